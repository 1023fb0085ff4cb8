//! What of an entry line is searchable, and the facts filters need.
//!
//! One home for the rule: the index tokenizes [`Extracted::text`], and a snippet is cut from
//! the same text re-extracted from the line read back through its offset.
//!
//! Searchable (Pi 1.6 entry and message shapes, session-manager.ts / messages.ts): the text of
//! user, assistant, custom and tool-result messages (a string `content`, or its `text` blocks),
//! assistant `thinking` blocks, tool calls' `name` and every string, number and key-less value
//! of their `arguments`; `bashExecution` messages' `command` and `output`; the `summary` of
//! compactions, branch summaries and their message forms; a label's `label`; a
//! `session_info`'s `name`; a `custom_message`'s content. Pieces are joined by `\n`. Nothing
//! else (ids, model names, usage, images, `custom` entries' data) is searchable.

use serde_json::Value;

/// The searchable text and filter facts of one entry line.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Extracted {
    pub id: Option<String>,
    pub etype: String,
    /// `message.role` of a message entry
    pub role: Option<String>,
    /// tool names: of an assistant's tool calls, or a tool result's `toolName`
    pub tools: Vec<String>,
    /// the entry's `timestamp` in ms since the epoch (None when missing or invalid)
    pub ts: Option<i64>,
    pub text: String,
}

/// Values nested deeper than this in tool-call arguments are not searched (the walk is a loop
/// over an explicit stack; serde_json already refuses more than 128 levels).
const MAX_DEPTH: usize = 64;

fn push(out: &mut String, s: &str) {
    if s.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(s);
}

fn push_content(out: &mut String, v: Option<&Value>) {
    match v {
        Some(Value::String(s)) => push(out, s),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => push(out, b.get("text").and_then(Value::as_str).unwrap_or("")),
                    Some("thinking") => {
                        push(out, b.get("thinking").and_then(Value::as_str).unwrap_or(""))
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// Every scalar of `v` (strings as they are, numbers and booleans as JSON), depth first.
fn push_scalars(out: &mut String, v: &Value) {
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::String(s) => push(out, s),
            Value::Number(n) => push(out, &n.to_string()),
            Value::Bool(b) => push(out, if *b { "true" } else { "false" }),
            Value::Null => {}
            Value::Array(a) if d < MAX_DEPTH => stack.extend(a.iter().rev().map(|x| (x, d + 1))),
            Value::Object(o) if d < MAX_DEPTH => stack.extend(o.values().rev().map(|x| (x, d + 1))),
            _ => {}
        }
    }
}

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// The searchable text of one line. None for a line that is not a JSON object with a string `type`,
/// or is the session header.
pub fn extract(line: &[u8]) -> Option<Extracted> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let etype = str_of(&v, "type")?.to_string();
    if etype == "session" {
        return None;
    }
    let mut x = Extracted {
        etype: etype.clone(),
        id: str_of(&v, "id").map(str::to_string),
        ts: str_of(&v, "timestamp")
            .map(crate::jsdate::parse_iso)
            .filter(|t| t.is_finite())
            .map(|t| t as i64),
        ..Default::default()
    };
    let out = &mut x.text;
    match etype.as_str() {
        "message" => {
            let m = v.get("message")?;
            let role = str_of(m, "role").unwrap_or("");
            x.role = Some(role.to_string());
            match role {
                "bashExecution" => {
                    push(out, str_of(m, "command").unwrap_or(""));
                    push(out, str_of(m, "output").unwrap_or(""));
                }
                "branchSummary" | "compactionSummary" => {
                    push(out, str_of(m, "summary").unwrap_or(""))
                }
                "toolResult" => {
                    if let Some(t) = str_of(m, "toolName") {
                        x.tools.push(t.to_string());
                    }
                    push_content(out, m.get("content"));
                }
                _ => {
                    push_content(out, m.get("content"));
                    if let Some(Value::Array(blocks)) = m.get("content") {
                        for b in blocks {
                            if str_of(b, "type") == Some("toolCall") {
                                if let Some(n) = str_of(b, "name") {
                                    x.tools.push(n.to_string());
                                    push(out, n);
                                }
                                if let Some(a) = b.get("arguments") {
                                    push_scalars(out, a);
                                }
                            }
                        }
                    }
                }
            }
        }
        "compaction" | "branch_summary" => push(out, str_of(&v, "summary").unwrap_or("")),
        "label" => push(out, str_of(&v, "label").unwrap_or("")),
        "session_info" => push(out, str_of(&v, "name").unwrap_or("")),
        "custom_message" => push_content(out, v.get("content")),
        _ => {}
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_tools_and_summaries() {
        let a = br#"{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:00.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"ok"},{"type":"toolCall","id":"c","name":"bash","arguments":{"command":"ls src/foo_bar.rs","n":3}}]}}"#;
        let x = extract(a).unwrap();
        assert_eq!(x.text, "hmm\nok\nbash\nls src/foo_bar.rs\n3");
        assert_eq!(x.tools, vec!["bash"]);
        assert_eq!(x.etype, "message");
        assert_eq!(x.role.as_deref(), Some("assistant"));
        assert_eq!(x.ts, Some(1735689600000));
        let r = br#"{"type":"message","id":"r","message":{"role":"toolResult","toolName":"read","content":[{"type":"text","text":"body"},{"type":"image","data":"AAAA"}]}}"#;
        let x = extract(r).unwrap();
        assert_eq!((x.text.as_str(), x.tools[0].as_str()), ("body", "read"));
        let c = br#"{"type":"compaction","id":"k","summary":"did things","firstKeptEntryId":"a1"}"#;
        assert_eq!(extract(c).unwrap().text, "did things");
        let b = br#"{"type":"message","id":"b","message":{"role":"bashExecution","command":"make","output":"done"}}"#;
        assert_eq!(extract(b).unwrap().text, "make\ndone");
        assert!(extract(br#"{"type":"session","id":"s"}"#).is_none());
        assert!(extract(b"not json").is_none());
    }
}
