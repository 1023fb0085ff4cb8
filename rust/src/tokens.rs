//! Pi's token estimate (compaction.ts `estimateTokens`) computed from an entry's raw JSON line.
//!
//! `ceil(chars / 4)` where `chars` counts UTF-16 code units, per role:
//! user/custom/toolResult content (string length, or text blocks plus 4800 per image),
//! assistant text/thinking and tool calls (`name.length + JSON.stringify(arguments).length`),
//! bashExecution command + output, branch/compaction summaries, system content + sections +
//! `JSON.stringify(toolsAdded)`; any other role 0.
//!
//! Only well-formed messages are estimated here; anything on which Pi would throw or produce
//! NaN (missing fields, wrong types) gives `Estimate::Fallback`, and the caller uses the
//! Python implementation, which reproduces Pi's error exactly.

use serde::Deserialize;
use serde_json::Value;

/// Characters Pi counts for an image block.
pub const IMAGE_CHARS: u64 = 4800;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimate {
    /// The entry is not a `message` entry (no estimate).
    NotMessage,
    /// Pi's estimate in tokens.
    Tokens(u64),
    /// Unusual content: ask the exact (Python) implementation.
    Fallback,
}

#[inline]
pub(crate) fn utf16_len(s: &str) -> u64 {
    // 4-byte UTF-8 sequences are surrogate pairs in UTF-16; everything else is one unit: one
    // unit per byte that starts a character, one more per 4-byte lead. Branch-free with byte
    // counters (at most 2 per byte, so 127 bytes fit in a u8): the compiler vectorizes it
    // (~15x the byte loop)
    let mut n = 0u64;
    for chunk in s.as_bytes().chunks(127) {
        let mut k = 0u8;
        for &c in chunk {
            k += u8::from((c as i8) >= -64) + u8::from(c >= 0xF0);
        }
        n += u64::from(k);
    }
    n
}

/// `JSON.stringify(value).length` in UTF-16 code units (independent of key order).
pub fn stringify_len(v: &Value) -> u64 {
    match v {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if !f.is_finite() {
                4 // JSON.stringify(Infinity) === "null"
            } else {
                let mut buf = ryu_js::Buffer::new();
                buf.format(f).len() as u64
            }
        }
        Value::String(s) => string_literal_len(s),
        Value::Array(a) => {
            2 + a.iter().map(stringify_len).sum::<u64>() + a.len().saturating_sub(1) as u64
        }
        Value::Object(o) => {
            2 + o
                .iter()
                .map(|(k, v)| string_literal_len(k) + 1 + stringify_len(v))
                .sum::<u64>()
                + o.len().saturating_sub(1) as u64
        }
    }
}

fn string_literal_len(s: &str) -> u64 {
    let mut n = 2u64;
    for &b in s.as_bytes() {
        if b & 0xC0 == 0x80 {
            continue;
        }
        n += match b {
            b'"' | b'\\' | 0x08 | 0x0C | b'\n' | b'\r' | b'\t' => 2,
            0..=0x1F => 6,
            0xF0..=0xFF => 2,
            _ => 1,
        };
    }
    n
}

fn str_len(v: Option<&Value>) -> Option<u64> {
    match v {
        Some(Value::String(s)) => Some(utf16_len(s)),
        _ => None,
    }
}

/// Pi's estimateTextAndImageContentChars.
fn content_chars(c: Option<&Value>) -> Option<u64> {
    match c {
        Some(Value::String(s)) => Some(utf16_len(s)),
        Some(Value::Array(blocks)) => {
            let mut n = 0u64;
            for b in blocks {
                let Value::Object(o) = b else { return None };
                match o.get("type").and_then(Value::as_str) {
                    Some("text") => match o.get("text") {
                        Some(Value::String(t)) => n += utf16_len(t),
                        None | Some(Value::Null) => {}
                        Some(_) => return None,
                    },
                    Some("image") => n += IMAGE_CHARS,
                    _ => {}
                }
            }
            Some(n)
        }
        _ => None,
    }
}

fn assistant_chars(m: &serde_json::Map<String, Value>) -> Option<u64> {
    let Some(Value::Array(blocks)) = m.get("content") else {
        return None;
    };
    let mut n = 0u64;
    for b in blocks {
        let Value::Object(o) = b else { return None };
        match o.get("type").and_then(Value::as_str) {
            Some("text") => n += str_len(o.get("text"))?,
            Some("thinking") => n += str_len(o.get("thinking"))?,
            Some("toolCall") => {
                n += str_len(o.get("name"))?;
                n += stringify_len(o.get("arguments")?);
            }
            _ => {}
        }
    }
    Some(n)
}

fn system_chars(m: &serde_json::Map<String, Value>) -> Option<u64> {
    let mut n = content_chars(m.get("content"))?;
    match m.get("sections") {
        None | Some(Value::Null) => {}
        Some(Value::Object(sections)) => {
            for v in sections.values() {
                match v {
                    Value::String(s) => n += utf16_len(s),
                    Value::Null => {}
                    _ => return None,
                }
            }
        }
        Some(_) => return None,
    }
    match m.get("toolsAdded") {
        None | Some(Value::Null) => {}
        Some(v @ Value::Array(_)) => n += stringify_len(v),
        Some(_) => return None,
    }
    Some(n)
}

/// Pi's estimateTokens over a message object.
pub fn estimate_message(msg: &Value) -> Estimate {
    let Value::Object(m) = msg else {
        return Estimate::Fallback;
    };
    let chars = match m.get("role").and_then(Value::as_str) {
        Some("user") | Some("custom") | Some("toolResult") => content_chars(m.get("content")),
        Some("assistant") => assistant_chars(m),
        Some("system") => system_chars(m),
        Some("bashExecution") => match (str_len(m.get("command")), str_len(m.get("output"))) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        },
        Some("branchSummary") | Some("compactionSummary") => str_len(m.get("summary")),
        Some("hookMessage") => content_chars(m.get("content")), // v2, read as `custom`
        Some(_) => Some(0),
        None => return Estimate::Fallback,
    };
    match chars {
        Some(c) => Estimate::Tokens(c.div_ceil(4)),
        None => Estimate::Fallback,
    }
}

#[derive(Deserialize)]
struct MessageEntry {
    #[serde(rename = "type")]
    type_: Option<Value>,
    message: Option<Value>,
}

/// The estimate of a `message` entry's message, from the entry's JSON line.
pub fn estimate_line(line: &[u8]) -> Estimate {
    let e: MessageEntry = match serde_json::from_slice(line) {
        Ok(e) => e,
        Err(_) => return Estimate::Fallback, // lone surrogates, deep nesting, odd numbers...
    };
    if e.type_.as_ref().and_then(Value::as_str) != Some("message") {
        return Estimate::NotMessage;
    }
    match e.message {
        Some(m) => estimate_message(&m),
        None => Estimate::Fallback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(s: &str) -> Estimate {
        estimate_line(s.as_bytes())
    }

    #[test]
    fn counts_utf16_units_per_role() {
        assert_eq!(
            est(r#"{"type":"message","message":{"role":"user","content":"abcdefgh"}}"#),
            Estimate::Tokens(2)
        );
        // 😀 is two UTF-16 units, é one
        assert_eq!(
            est(r#"{"type":"message","message":{"role":"user","content":"😀é"}}"#),
            Estimate::Tokens(1)
        );
        assert_eq!(
            est(
                r#"{"type":"message","message":{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image"}]}}"#
            ),
            Estimate::Tokens(1201)
        );
        assert_eq!(
            est(r#"{"type":"label","targetId":"x"}"#),
            Estimate::NotMessage
        );
        assert_eq!(
            est(r#"{"type":"message","message":{"role":"user","content":null}}"#),
            Estimate::Fallback
        );
    }

    #[test]
    fn tool_call_arguments_are_counted_as_json_stringify() {
        // name "ls" (2) + {"path":".","n":1.5,"big":1e21,"q":"a\"b\n"} in JS
        let line = r#"{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","name":"ls","arguments":{"path":".","n":1.50,"big":1e21,"q":"a\"b\n"}}]}}"#;
        let js = r#"{"path":".","n":1.5,"big":1e+21,"q":"a\"b\n"}"#;
        assert_eq!(
            est(line),
            Estimate::Tokens(((2 + js.len()) as u64).div_ceil(4))
        );
    }

    #[test]
    fn stringify_len_matches_js_for_numbers_and_escapes() {
        let v: Value =
            serde_json::from_str(r#"[0,-0.0,100,1e-7,123456789012345678901234,"\u0001","\u2028"]"#)
                .unwrap();
        // JS: [0,0,100,1e-7,1.2345678901234568e+23,"\u0001","\u2028"] with U+2028 raw (1 unit)
        let js_len = "[0,0,100,1e-7,1.2345678901234568e+23,\"\\u0001\",\"x\"]".len() as u64;
        assert_eq!(stringify_len(&v), js_len);
    }
}
