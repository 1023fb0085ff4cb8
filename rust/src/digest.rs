//! Per-entry digests for the HTML view (`sessiontree.html`): what a tree row shows and what the
//! page sums, computed from each entry's raw line without building Python objects.
//!
//! One digest per entry: a kind (`type`, or `message:<role>`), a short preview of its text, a
//! reference id (a tool result's `toolCallId`, a compaction's `firstKeptEntryId`, a branch
//! summary's `fromId`, a label's `targetId`), Pi's token estimate of its context message, and the
//! provider usage it carries (`sessiontree.usage` rules: assistant messages, tool results with a
//! usage, compaction / branch_summary / usage entries). [`digest_columns`] writes a batch as one
//! JSON document of columns, the form the page decodes.

use crate::store::{Store, StoreError};
use crate::tokens::{self, Estimate};
use rayon::prelude::*;
use serde_json::{Map, Value};

/// What one entry contributes to the page.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Digest {
    pub kind: String,
    pub preview: String,
    pub reference: Option<String>,
    /// Pi's token estimate of the entry's context message (None: no message, or Pi's rules
    /// would throw on it).
    pub tokens: Option<u64>,
    /// input, output, cacheRead, cacheWrite, cost.total (NaN where Pi's sum is NaN).
    pub usage: Option<[f64; 5]>,
}

/// `x += value` as JavaScript adds a usage field: numbers add, null 0, booleans 0/1, anything
/// else (a missing field included) NaN.
fn js_num(v: Option<&Value>) -> f64 {
    match v {
        Some(Value::Null) => 0.0,
        Some(Value::Bool(b)) => f64::from(u8::from(*b)),
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

fn usage_of(u: &Value) -> Option<[f64; 5]> {
    let Value::Object(u) = u else { return None };
    if u.is_empty() {
        return None;
    }
    let cost = match u.get("cost") {
        Some(Value::Object(c)) => js_num(c.get("total")),
        _ => 0.0,
    };
    Some([
        js_num(u.get("input")),
        js_num(u.get("output")),
        js_num(u.get("cacheRead")),
        js_num(u.get("cacheWrite")),
        cost,
    ])
}

/// Whitespace runs as one space, trimmed, at most `max` characters (an ellipsis marks a cut).
fn clip(s: &str, max: usize, out: &mut String) {
    let mut n = out.chars().count();
    let mut space = !out.is_empty() && !out.ends_with(' ');
    for c in s.chars() {
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if n + usize::from(space) >= max {
            out.push('…');
            return;
        }
        if space {
            out.push(' ');
            n += 1;
            space = false;
        }
        out.push(c);
        n += 1;
    }
}

fn content_text(c: Option<&Value>, max: usize, out: &mut String) {
    match c {
        Some(Value::String(s)) => clip(s, max, out),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                if out.chars().count() >= max {
                    return;
                }
                let Value::Object(o) = b else { continue };
                match o.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = o.get("text").and_then(Value::as_str) {
                            clip(t, max, out)
                        }
                    }
                    Some("toolCall") => {
                        if let Some(t) = o.get("name").and_then(Value::as_str) {
                            clip(&format!("→ {t}"), max, out)
                        }
                    }
                    Some("image") => clip("[image]", max, out),
                    _ => {}
                }
            }
            if out.is_empty() {
                // only thinking: show that
                for b in blocks {
                    if let Some(t) = b.get("thinking").and_then(Value::as_str) {
                        clip(t, max, out);
                        break;
                    }
                }
            }
        }
        _ => {}
    }
}

fn str_field<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k).and_then(Value::as_str)
}

fn estimate(msg: &Value) -> Option<u64> {
    match tokens::estimate_message(msg) {
        Estimate::Tokens(t) => Some(t),
        _ => None,
    }
}

/// The digest of one entry line (`preview_chars` caps the preview). A line that is not a JSON
/// object gives kind `"?"` and nothing else.
pub fn digest(line: &[u8], preview_chars: usize) -> Digest {
    let Ok(Value::Object(e)) = serde_json::from_slice::<Value>(line) else {
        return Digest {
            kind: "?".into(),
            ..Default::default()
        };
    };
    let etype = str_field(&e, "type").unwrap_or("?");
    let mut d = Digest {
        kind: etype.to_string(),
        ..Default::default()
    };
    let p = &mut d.preview;
    match etype {
        "message" => {
            let Some(Value::Object(m)) = e.get("message") else {
                return d;
            };
            let role = str_field(m, "role").unwrap_or("?");
            d.kind = format!("message:{role}");
            match role {
                "bashExecution" => clip(
                    &format!("$ {}", str_field(m, "command").unwrap_or("")),
                    preview_chars,
                    p,
                ),
                "toolResult" => {
                    clip(
                        &format!("{}: ", str_field(m, "toolName").unwrap_or("tool")),
                        preview_chars,
                        p,
                    );
                    content_text(m.get("content"), preview_chars, p);
                    d.reference = str_field(m, "toolCallId").map(str::to_string);
                }
                "branchSummary" | "compactionSummary" => {
                    clip(str_field(m, "summary").unwrap_or(""), preview_chars, p)
                }
                _ => content_text(m.get("content"), preview_chars, p),
            }
            let msg = e.get("message").unwrap();
            if !matches!(m.get("content"), None | Some(Value::Null)) || role == "bashExecution" {
                d.tokens = estimate(msg);
            }
            if role == "assistant" || role == "toolResult" {
                d.usage = m.get("usage").and_then(usage_of);
                if role == "assistant" && d.usage.is_none() && m.get("usage").is_some() {
                    d.usage = Some([f64::NAN; 5]);
                }
            }
        }
        "compaction" | "branch_summary" => {
            let summary = str_field(&e, "summary").unwrap_or("");
            clip(summary, preview_chars, p);
            d.reference = str_field(
                &e,
                if etype == "compaction" {
                    "firstKeptEntryId"
                } else {
                    "fromId"
                },
            )
            .map(str::to_string);
            if !summary.is_empty() {
                d.tokens =
                    estimate(&serde_json::json!({"role": "branchSummary", "summary": summary}));
            }
            d.usage = e.get("usage").and_then(usage_of);
        }
        "usage" => d.usage = e.get("usage").and_then(usage_of),
        "custom_message" => {
            let content = match e.get("content") {
                None | Some(Value::Null) => Value::Array(vec![]),
                Some(c) => c.clone(),
            };
            content_text(Some(&content), preview_chars, p);
            d.tokens = estimate(&serde_json::json!({"role": "custom", "content": content}));
        }
        "label" => {
            clip(
                str_field(&e, "label").unwrap_or("(label cleared)"),
                preview_chars,
                p,
            );
            d.reference = str_field(&e, "targetId").map(str::to_string);
        }
        "session_info" => clip(str_field(&e, "name").unwrap_or(""), preview_chars, p),
        "model_change" => clip(
            &format!(
                "{}/{}",
                str_field(&e, "provider").unwrap_or("?"),
                str_field(&e, "modelId").unwrap_or("?")
            ),
            preview_chars,
            p,
        ),
        "thinking_level_change" => clip(
            str_field(&e, "thinkingLevel").unwrap_or("?"),
            preview_chars,
            p,
        ),
        "custom" => clip(str_field(&e, "customType").unwrap_or(""), preview_chars, p),
        "context_edit" => {
            d.reference = str_field(&e, "targetId").map(str::to_string);
            clip(
                if matches!(e.get("replacement"), None | Some(Value::Null)) {
                    "omit"
                } else {
                    "replace"
                },
                preview_chars,
                p,
            );
        }
        _ => {}
    }
    d
}

fn num(v: f64) -> Value {
    serde_json::Number::from_f64(v)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// Entries `start..end` (file order) as one JSON document of columns: `id` (string or null),
/// `k` kind, `p` preview, `r` reference, `o` byte offset of the line, `l` its byte length, `t`
/// timestamp in ms (null when invalid), `e` token estimate (null: none), `u` usage
/// `[input, output, cacheRead, cacheWrite, cost]` or null. Digests run in parallel.
pub fn digest_columns(
    st: &Store,
    start: usize,
    end: usize,
    preview_chars: usize,
    id_of: impl Fn(usize) -> Option<String>,
) -> Result<Vec<u8>, StoreError> {
    // the lines are read first (nearby lines in one `pread`; a file changed under the index
    // errs instead of faulting), then digested in parallel
    let idx: Vec<usize> = (start..end).collect();
    let mut lines: Vec<Vec<u8>> = vec![Vec::new(); idx.len()];
    st.with_lines(&idx, |k, b| lines[k] = b.to_vec())?;
    let ds: Vec<Digest> = lines
        .par_iter()
        .enumerate()
        .map(|(k, line)| {
            let i = start + k;
            let mut d = digest(line, preview_chars);
            if d.kind == "?" {
                // a line the core accepts but serde_json does not (1e400, a lone surrogate escape,
                // nesting past 128): keep the type the index read
                let t = st.index.recs[i].etype;
                if t == crate::index::T_OTHER {
                    // a name past the full names table: the core's parse of the line has it
                    if let Some(n) = crate::index::type_of_line(line) {
                        d.kind = n;
                    }
                } else if t != 0 {
                    d.kind = st.index.type_name(t).to_string();
                }
            }
            d
        })
        .collect();
    let recs = &st.index.recs[start..end];
    let mut cols = Map::new();
    cols.insert(
        "id".into(),
        (start..end)
            .map(|i| id_of(i).map_or(Value::Null, Value::String))
            .collect(),
    );
    cols.insert(
        "o".into(),
        recs.iter().map(|r| Value::from(r.offset())).collect(),
    );
    cols.insert(
        "l".into(),
        recs.iter().map(|r| Value::from(r.len as u64)).collect(),
    );
    cols.insert("t".into(), recs.iter().map(|r| num(r.ts())).collect());
    cols.insert(
        "e".into(),
        ds.iter()
            .map(|d| d.tokens.map_or(Value::Null, Value::from))
            .collect(),
    );
    cols.insert(
        "u".into(),
        ds.iter()
            .map(|d| match d.usage {
                Some(u) => Value::Array(u.iter().map(|&x| num(x)).collect()),
                None => Value::Null,
            })
            .collect(),
    );
    cols.insert(
        "r".into(),
        ds.iter()
            .map(|d| d.reference.clone().map_or(Value::Null, Value::String))
            .collect(),
    );
    cols.insert(
        "k".into(),
        ds.iter().map(|d| Value::String(d.kind.clone())).collect(),
    );
    cols.insert(
        "p".into(),
        ds.into_iter().map(|d| Value::String(d.preview)).collect(),
    );
    Ok(serde_json::to_vec(&Value::Object(cols)).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_preview_usage_and_estimate() {
        let d = digest(br#"{"type":"message","id":"a","parentId":null,"timestamp":"x","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Hello\n\n  world"},{"type":"toolCall","id":"c1","name":"read","arguments":{"p":1}}],"usage":{"input":10,"output":2,"cacheRead":null,"cacheWrite":0,"cost":{"total":0.5}}}}"#, 40);
        assert_eq!(d.kind, "message:assistant");
        assert_eq!(d.preview, "Hello world → read");
        assert_eq!(d.usage, Some([10.0, 2.0, 0.0, 0.0, 0.5]));
        // thinking 3 + text 14 + name 4 + {"p":1} 7 = 28 chars → 7 tokens
        assert_eq!(d.tokens, Some(7));
    }

    #[test]
    fn missing_usage_field_is_nan_and_refs_are_kept() {
        let d = digest(br#"{"type":"message","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":"ok","usage":{"input":1}}}"#, 40);
        assert_eq!(d.reference.as_deref(), Some("c1"));
        assert_eq!(d.preview, "bash: ok");
        let u = d.usage.unwrap();
        assert_eq!(u[0], 1.0);
        assert!(u[1].is_nan());
        let c = digest(br#"{"type":"compaction","summary":"abcd efgh","firstKeptEntryId":"k","usage":{"input":3,"output":4,"cacheRead":0,"cacheWrite":0}}"#, 4);
        assert_eq!(c.reference.as_deref(), Some("k"));
        assert_eq!(c.preview, "abcd…");
        assert_eq!(c.tokens, Some(3));
        assert_eq!(c.usage, Some([3.0, 4.0, 0.0, 0.0, 0.0]));
    }

    #[test]
    fn hostile_lines_give_a_digest_not_a_panic() {
        for line in [
            &b"[1,2]"[..],
            b"{",
            b"{\"type\":5}",
            b"{\"type\":\"message\",\"message\":7}",
            b"\xff\xfe",
        ] {
            let d = digest(line, 10);
            assert!(d.usage.is_none());
        }
        let long = format!(
            "{{\"type\":\"message\",\"message\":{{\"role\":\"user\",\"content\":\"{}\"}}}}",
            "x ".repeat(100000)
        );
        assert_eq!(digest(long.as_bytes(), 8).preview, "x x x x…");
    }
}
