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

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

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

// ---- the line's shape, read in one pass: only the keys named below are kept (the last of a
// duplicated key, as JSON.parse does), strings borrowed from the line where they hold no
// escape; every other value is skipped unparsed (its syntax still checked).

/// Any JSON value, kept when it is a string.
#[derive(Default)]
struct Str<'a>(Option<Cow<'a, str>>);

impl Str<'_> {
    fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

struct StrV;
impl<'de> Visitor<'de> for StrV {
    type Value = Str<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Str(Some(Cow::Borrowed(v))))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Str(Some(Cow::Owned(v.to_owned()))))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Str(Some(Cow::Owned(v))))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Str(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        while a.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Str(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Str(None))
    }
}
impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrV)
    }
}

/// Implements a visitor for a lenient object shape: a map fills the fields named (each
/// through `$read`), any other value gives the default.
macro_rules! lenient_object {
    ($ty:ident, $v:ident, |$m:ident, $out:ident, $key:ident| $body:block) => {
        struct $v;
        impl<'de> Visitor<'de> for $v {
            type Value = $ty<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut $m: A) -> Result<Self::Value, A::Error> {
                let mut $out = $ty::default();
                while let Some($key) = $m.next_key::<Str<'de>>()? {
                    $body
                }
                Ok($out)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok($ty::default())
            }
            fn visit_borrowed_str<E>(self, _: &'de str) -> Result<Self::Value, E> {
                Ok($ty::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok($ty::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok($ty::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok($ty::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok($ty::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok($ty::default())
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok($ty::default())
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok($ty::default())
            }
        }
        impl<'de> Deserialize<'de> for $ty<'de> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any($v)
            }
        }
    };
}

/// A content block (`text`, `thinking`, `toolCall`; others are skipped).
#[derive(Default)]
struct Block<'a> {
    btype: Str<'a>,
    text: Str<'a>,
    thinking: Str<'a>,
    name: Str<'a>,
    /// a tool call's arguments, unparsed until the block is known to be one
    arguments: Option<&'a RawValue>,
}
lenient_object!(Block, BlockV, |m, b, k| {
    match k.get().unwrap_or("") {
        "type" => b.btype = m.next_value()?,
        "text" => b.text = m.next_value()?,
        "thinking" => b.thinking = m.next_value()?,
        "name" => b.name = m.next_value()?,
        "arguments" => b.arguments = Some(m.next_value()?),
        _ => {
            m.next_value::<IgnoredAny>()?;
        }
    }
});

/// A message's or entry's `content`: a string, a list of blocks, or anything else (nothing).
#[derive(Default)]
enum Content<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
    #[default]
    Other,
}
struct ContentV;
impl<'de> Visitor<'de> for ContentV {
    type Value = Content<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Content::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Content::Text(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Content::Text(Cow::Owned(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(b) = a.next_element::<Block<'de>>()? {
            out.push(b);
        }
        Ok(Content::Blocks(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Content::Other)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Content::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Content::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Content::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Content::Other)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Content::Other)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Content::Other)
    }
}
impl<'de> Deserialize<'de> for Content<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContentV)
    }
}

/// A message (`message` of a message entry).
#[derive(Default)]
struct Msg<'a> {
    role: Str<'a>,
    command: Str<'a>,
    output: Str<'a>,
    summary: Str<'a>,
    tool_name: Str<'a>,
    content: Content<'a>,
}
lenient_object!(Msg, MsgV, |m, x, k| {
    match k.get().unwrap_or("") {
        "role" => x.role = m.next_value()?,
        "command" => x.command = m.next_value()?,
        "output" => x.output = m.next_value()?,
        "summary" => x.summary = m.next_value()?,
        "toolName" => x.tool_name = m.next_value()?,
        "content" => x.content = m.next_value()?,
        _ => {
            m.next_value::<IgnoredAny>()?;
        }
    }
});

/// An entry line.
#[derive(Default)]
struct Line<'a> {
    etype: Str<'a>,
    id: Str<'a>,
    timestamp: Str<'a>,
    summary: Str<'a>,
    label: Str<'a>,
    name: Str<'a>,
    /// present (any value) or not
    message: Option<Msg<'a>>,
    content: Content<'a>,
}
lenient_object!(Line, LineV, |m, x, k| {
    match k.get().unwrap_or("") {
        "type" => x.etype = m.next_value()?,
        "id" => x.id = m.next_value()?,
        "timestamp" => x.timestamp = m.next_value()?,
        "summary" => x.summary = m.next_value()?,
        "label" => x.label = m.next_value()?,
        "name" => x.name = m.next_value()?,
        "message" => x.message = Some(m.next_value()?),
        "content" => x.content = m.next_value()?,
        _ => {
            m.next_value::<IgnoredAny>()?;
        }
    }
});

fn push_content(out: &mut String, c: &Content) {
    match c {
        Content::Text(s) => push(out, s),
        Content::Blocks(blocks) => {
            for b in blocks {
                match b.btype.get() {
                    Some("text") => push(out, b.text.get().unwrap_or("")),
                    Some("thinking") => push(out, b.thinking.get().unwrap_or("")),
                    _ => {}
                }
            }
        }
        Content::Other => {}
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

/// The searchable text of one line, read in one pass.
///
/// None for a line that is not a JSON object with a string `type`, or is the session header.
/// Bytes that are not UTF-8 read as U+FFFD, as Pi reads the file (Node's `utf8` decoding); a
/// tool call's `arguments` are parsed again as a value; only the fields read are kept.
pub fn extract(line: &[u8]) -> Option<Extracted> {
    let text = match std::str::from_utf8(line) {
        Ok(t) => Cow::Borrowed(t),
        Err(_) => String::from_utf8_lossy(line),
    };
    let v: Line = serde_json::from_str(&text).ok()?;
    let etype = v.etype.get()?;
    if etype == "session" {
        return None;
    }
    let mut x = Extracted {
        etype: etype.to_string(),
        id: v.id.get().map(str::to_string),
        ts: v
            .timestamp
            .get()
            .map(crate::jsdate::parse_iso)
            .filter(|t| t.is_finite())
            .map(|t| t as i64),
        ..Default::default()
    };
    let out = &mut x.text;
    match etype {
        "message" => {
            let m = v.message.as_ref()?;
            let role = m.role.get().unwrap_or("");
            x.role = Some(role.to_string());
            match role {
                "bashExecution" => {
                    push(out, m.command.get().unwrap_or(""));
                    push(out, m.output.get().unwrap_or(""));
                }
                "branchSummary" | "compactionSummary" => push(out, m.summary.get().unwrap_or("")),
                "toolResult" => {
                    if let Some(t) = m.tool_name.get() {
                        x.tools.push(t.to_string());
                    }
                    push_content(out, &m.content);
                }
                _ => {
                    push_content(out, &m.content);
                    if let Content::Blocks(blocks) = &m.content {
                        for b in blocks {
                            if b.btype.get() == Some("toolCall") {
                                if let Some(n) = b.name.get() {
                                    x.tools.push(n.to_string());
                                    push(out, n);
                                }
                                if let Some(a) = b.arguments {
                                    if let Ok(a) = serde_json::from_str::<Value>(a.get()) {
                                        push_scalars(out, &a);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        "compaction" | "branch_summary" => push(out, v.summary.get().unwrap_or("")),
        "label" => push(out, v.label.get().unwrap_or("")),
        "session_info" => push(out, v.name.get().unwrap_or("")),
        "custom_message" => push_content(out, &v.content),
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
