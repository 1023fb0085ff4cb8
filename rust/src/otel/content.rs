//! Message content in the GenAI conventions' JSON shape: Pi's content blocks as message parts. The
//! shape of `gen_ai.input.messages` and `gen_ai.output.messages`.

use super::out::J;
use serde_json::Value;
use std::borrow::Cow;

/// `v` when it is a string.
pub fn str_of(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

/// The text of a Pi message content: a string itself, else the `text` of its blocks joined.
pub fn text_of(content: Option<&Value>) -> Cow<'_, str> {
    match content {
        Some(Value::String(s)) => Cow::Borrowed(s),
        Some(Value::Array(a)) => {
            let mut s = String::new();
            for b in a {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    if b.is_object() {
                        s.push_str(t);
                    }
                }
            }
            Cow::Owned(s)
        }
        _ => Cow::Borrowed(""),
    }
}

/// Python's `str()` of a parsed JSON value, as a message's text shows a non-string field. `None`,
/// `True`, numbers; arrays and objects as compact JSON.
pub fn py_str(v: Option<&Value>) -> Cow<'_, str> {
    match v {
        None | Some(Value::Null) => Cow::Borrowed("None"),
        Some(Value::Bool(true)) => Cow::Borrowed("True"),
        Some(Value::Bool(false)) => Cow::Borrowed("False"),
        Some(Value::String(s)) => Cow::Borrowed(s),
        Some(Value::Number(n)) => Cow::Owned(py_number(n)),
        Some(other) => Cow::Owned(serde_json::to_string(other).unwrap_or_default()),
    }
}

/// Python's `repr` spelling of a JSON number as it parses (ints exact, floats `repr`).
fn py_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let x = n.as_f64().unwrap_or(f64::NAN);
    let s = serde_json::to_string(&x).unwrap_or_default();
    // Python writes 1e+16 where ryu writes 1e16
    match s.find('e') {
        Some(k) if !s[k + 1..].starts_with('-') => format!("{}e+{}", &s[..k], &s[k + 1..]),
        _ => s,
    }
}

/// GenAI message parts of a Pi message content (a string or a list of blocks).
pub fn parts(content: Option<&Value>) -> J<'_> {
    let mut out = Vec::new();
    match content {
        Some(Value::String(s)) => {
            return J::Arr(vec![text_part("text", s)]);
        }
        Some(Value::Array(a)) => {
            for b in a {
                let Value::Object(m) = b else { continue };
                let t = m.get("type");
                let s = |k: &str| J::Str(Cow::Borrowed(str_of(m.get(k)).unwrap_or("")));
                let opt = |k: &str| match str_of(m.get(k)) {
                    Some(x) => J::Str(Cow::Borrowed(x)),
                    None => J::Null,
                };
                let part = match t.and_then(Value::as_str) {
                    Some("text") => J::Obj(vec![
                        ("type", J::Str("text".into())),
                        ("content", s("text")),
                    ]),
                    Some("thinking") => J::Obj(vec![
                        ("type", J::Str("reasoning".into())),
                        ("content", s("thinking")),
                    ]),
                    Some("toolCall") => J::Obj(vec![
                        ("type", J::Str("tool_call".into())),
                        ("id", opt("id")),
                        ("name", s("name")),
                        ("arguments", m.get("arguments").map_or(J::Null, J::Val)),
                    ]),
                    Some("image") => J::Obj(vec![
                        ("type", J::Str("blob".into())),
                        ("modality", J::Str("image".into())),
                        ("mime_type", opt("mimeType")),
                        ("content", s("data")),
                    ]),
                    _ => {
                        let text = serde_json::to_string(b).unwrap_or_default();
                        J::Obj(vec![
                            ("type", J::Str(py_str(t))),
                            ("content", J::Str(Cow::Owned(text))),
                        ])
                    }
                };
                out.push(part);
            }
        }
        _ => {}
    }
    J::Arr(out)
}

fn text_part<'a>(kind: &'static str, s: &'a str) -> J<'a> {
    J::Obj(vec![
        ("type", J::Str(Cow::Borrowed(kind))),
        ("content", J::Str(Cow::Borrowed(s))),
    ])
}

/// A context message as a GenAI input message; None for other roles. Context messages: user,
/// toolResult, bashExecution, custom, summaries.
pub fn input_message(msg: &serde_json::Map<String, Value>) -> Option<J<'_>> {
    let role = str_of(msg.get("role"))?;
    Some(match role {
        "user" => J::Obj(vec![
            ("role", J::Str("user".into())),
            ("parts", parts(msg.get("content"))),
        ]),
        "toolResult" => J::Obj(vec![
            ("role", J::Str("tool".into())),
            (
                "parts",
                J::Arr(vec![J::Obj(vec![
                    ("type", J::Str("tool_call_response".into())),
                    (
                        "id",
                        str_of(msg.get("toolCallId")).map_or(J::Null, |s| J::Str(s.into())),
                    ),
                    ("response", J::Str(text_of(msg.get("content")))),
                ])]),
            ),
        ]),
        "bashExecution" => {
            let output = match msg.get("output") {
                None | Some(Value::Null) | Some(Value::Bool(false)) => Cow::Borrowed(""),
                Some(Value::String(s)) if s.is_empty() => Cow::Borrowed(""),
                Some(Value::Number(n)) if n.as_f64() == Some(0.0) => Cow::Borrowed(""),
                Some(Value::Array(a)) if a.is_empty() => Cow::Borrowed(""),
                Some(Value::Object(o)) if o.is_empty() => Cow::Borrowed(""),
                o => py_str(o),
            };
            let text = format!("$ {}\n{}", py_str(msg.get("command")), output);
            J::Obj(vec![
                ("role", J::Str("user".into())),
                (
                    "parts",
                    J::Arr(vec![J::Obj(vec![
                        ("type", J::Str("text".into())),
                        ("content", J::Str(text.into())),
                    ])]),
                ),
            ])
        }
        "custom" | "branchSummary" | "compactionSummary" => {
            let text = if role == "custom" {
                match msg.get("content") {
                    Some(Value::String(s)) => Cow::Borrowed(s.as_str()),
                    c => text_of(c),
                }
            } else {
                Cow::Borrowed(str_of(msg.get("summary")).unwrap_or(""))
            };
            J::Obj(vec![
                ("role", J::Str("user".into())),
                (
                    "parts",
                    J::Arr(vec![J::Obj(vec![
                        ("type", J::Str("text".into())),
                        ("content", J::Str(text)),
                    ])]),
                ),
            ])
        }
        _ => return None,
    })
}
