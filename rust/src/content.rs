//! Where Pi throws on an entry's content, and with which text.
//!
//! Pi runs context building (session-manager.ts `sessionEntryToContextMessages`), then the
//! token estimate of each message (compaction.ts `estimateTokens`), then the summary
//! serialization (`convertToLlm` + utils.ts `serializeConversation`), in that order, as
//! compaction, branch summaries and `shouldCompact` run them on a branch. `sessiontree validate` reports each entry this finds as a
//! `content_error` (`sessiontree.validation.content_problems`).
//!
//! Only whether and where Pi throws matters, so an entry is read as a shape: which fields are
//! missing, null, strings, numbers, arrays or objects, down to the depth Pi's property reads go
//! (entry, message, content block, block field). Values below that are skipped unread: Pi only
//! stringifies them, which does not throw on parsed JSON. JavaScript's `+` does not throw
//! either, so a `text` whose `length` is not a number is no error here.
//!
//! The Python rules compute the values (`sessiontree.context`, `sessiontree.tokens`,
//! `sessiontree.compaction`) and raise the same errors; `sessiontree.validation.entry_content_error`
//! runs them on one entry. That is this check's test oracle: tests/parity/test_content_check.py
//! compares the two on every entry of the corpus and the fixtures and on hand-made hostile
//! shapes.
//!
//! A line nested [`PYTHON_DEPTH`] levels or more, or one `serde_json` refuses (a number beyond
//! f64, a lone surrogate in a read string, bytes that are not UTF-8, a read key given twice),
//! is [`Check::Undecided`]: the caller asks the Python check, which also knows when Python
//! cannot load the entry at all.

use crate::store::{Store, StoreError};
use rayon::prelude::*;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// The stage of Pi's pipeline that throws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `sessionEntryToContextMessages` (building the context)
    Context,
    /// `estimateTokens` on one of the entry's context messages
    Estimate,
    /// `convertToLlm` + `serializeConversation` (summarizing it)
    Serialize,
}

impl Stage {
    /// The stage's name as `sessiontree.validation` reports it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Context => "context",
            Stage::Estimate => "estimate",
            Stage::Serialize => "serialize",
        }
    }
}

/// What Pi does with one entry's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Nothing throws (or the entry's type carries no content).
    Fine,
    /// `stage` throws Pi's (V8's) text.
    Throws(Stage, &'static str),
    /// A line this reader refuses: ask the Python check.
    Undecided,
}

const ROLE_OF_NULL: &str = "TypeError: Cannot read properties of null (reading 'role')";
const ROLE_OF_UNDEFINED: &str = "TypeError: Cannot read properties of undefined (reading 'role')";
const TYPE_OF_NULL: &str = "TypeError: Cannot read properties of null (reading 'type')";
const LENGTH_OF_NULL: &str = "TypeError: Cannot read properties of null (reading 'length')";
const LENGTH_OF_UNDEFINED: &str =
    "TypeError: Cannot read properties of undefined (reading 'length')";
const CONTENT_NOT_ITERABLE: &str = "TypeError: content is not iterable";
const ASSISTANT_NOT_ITERABLE: &str = "TypeError: assistant.content is not iterable";
const NO_SOME: &str = "TypeError: msg.content.some is not a function";
const NO_FILTER: &str = "TypeError: msg.content.filter is not a function";
const NULL_TO_OBJECT: &str = "TypeError: Cannot convert undefined or null to object";

// ==== shapes ======================================================================

/// A value as far as the check reads it: whether it is there, null, and its truthiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Kind {
    /// key absent (`undefined`)
    #[default]
    Missing,
    Null,
    /// a boolean, number, non-empty string, array or object (truthy)
    Truthy,
    /// `false`, `0`, `-0` or `""`
    Falsy,
}

struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = Kind;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Kind, E> {
        Ok(Kind::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Kind, E> {
        Ok(if v { Kind::Truthy } else { Kind::Falsy })
    }
    fn visit_i64<E>(self, v: i64) -> Result<Kind, E> {
        Ok(if v != 0 { Kind::Truthy } else { Kind::Falsy })
    }
    fn visit_u64<E>(self, v: u64) -> Result<Kind, E> {
        Ok(if v != 0 { Kind::Truthy } else { Kind::Falsy })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Kind, E> {
        Ok(if v != 0.0 && !v.is_nan() {
            Kind::Truthy
        } else {
            Kind::Falsy
        })
    }
    fn visit_str<E>(self, v: &str) -> Result<Kind, E> {
        Ok(if v.is_empty() {
            Kind::Falsy
        } else {
            Kind::Truthy
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Kind, A::Error> {
        while s.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Kind::Truthy)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Kind, A::Error> {
        while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Kind::Truthy)
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(KindVisitor)
    }
}

/// A field whose `length` Pi reads (`estimateTokens` reads the length of every text, thinking,
/// name, command, output and summary): only whether it is missing, null or another value
/// matters.
///
/// Read through `deserialize_option`, so a value that is not null is skipped unread (a text of
/// megabytes is scanned for its end, not decoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Present {
    #[default]
    Missing,
    Null,
    Value,
}

impl Present {
    /// The error of `value.length` on it.
    fn length_error(self) -> Option<&'static str> {
        match self {
            Present::Missing => Some(LENGTH_OF_UNDEFINED),
            Present::Null => Some(LENGTH_OF_NULL),
            Present::Value => None,
        }
    }
}

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Present;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_none<E>(self) -> Result<Present, E> {
                Ok(Present::Null)
            }
            fn visit_unit<E>(self) -> Result<Present, E> {
                Ok(Present::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Present, D::Error> {
                IgnoredAny::deserialize(d).map(|_| Present::Value)
            }
        }
        d.deserialize_option(V)
    }
}

/// A string field compared with Pi's names (`block.type`, `message.role`); any other string,
/// a value of another type and a missing key are `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Name {
    Text,
    Thinking,
    ToolCall,
    User,
    Assistant,
    ToolResult,
    System,
    Custom,
    BashExecution,
    BranchSummary,
    CompactionSummary,
    Message,
    CustomMessage,
    BranchSummaryEntry,
    Compaction,
    #[default]
    Other,
}

struct NameVisitor;

impl<'de> Visitor<'de> for NameVisitor {
    type Value = Name;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Name, E> {
        Ok(match v {
            "text" => Name::Text,
            "thinking" => Name::Thinking,
            "toolCall" => Name::ToolCall,
            "user" => Name::User,
            "assistant" => Name::Assistant,
            "toolResult" => Name::ToolResult,
            "system" => Name::System,
            "custom" => Name::Custom,
            "bashExecution" => Name::BashExecution,
            "branchSummary" => Name::BranchSummary,
            "compactionSummary" => Name::CompactionSummary,
            "message" => Name::Message,
            "custom_message" => Name::CustomMessage,
            "branch_summary" => Name::BranchSummaryEntry,
            "compaction" => Name::Compaction,
            _ => Name::Other,
        })
    }
    fn visit_unit<E>(self) -> Result<Name, E> {
        Ok(Name::Other)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Name, E> {
        Ok(Name::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Name, E> {
        Ok(Name::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Name, E> {
        Ok(Name::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Name, E> {
        Ok(Name::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Name, A::Error> {
        KindVisitor.visit_seq(s).map(|_| Name::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Name, A::Error> {
        KindVisitor.visit_map(m).map(|_| Name::Other)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NameVisitor)
    }
}

/// The fields of an object block that Pi reads.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct BlockFields {
    #[serde(rename = "type")]
    btype: Name,
    text: Present,
    thinking: Present,
    name: Present,
    arguments: Present,
}

/// One item of a content array.
#[derive(Debug)]
enum Block {
    Null,
    /// a boolean, number, string or array: its `type` is `undefined`
    Other,
    Obj(BlockFields),
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Block;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Block, A::Error> {
                BlockFields::deserialize(de::value::MapAccessDeserializer::new(m)).map(Block::Obj)
            }
            fn visit_unit<E>(self) -> Result<Block, E> {
                Ok(Block::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Block, E> {
                Ok(Block::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Block, E> {
                Ok(Block::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Block, E> {
                Ok(Block::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Block, E> {
                Ok(Block::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Block, E> {
                Ok(Block::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Block, A::Error> {
                KindVisitor.visit_seq(s).map(|_| Block::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// A message's `content` (or a `custom_message` entry's).
#[derive(Debug, Default)]
enum Content {
    #[default]
    Missing,
    Null,
    Str,
    Arr(Vec<Block>),
    /// a boolean, number or object
    Other,
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Content, E> {
                Ok(Content::Null)
            }
            fn visit_str<E>(self, _: &str) -> Result<Content, E> {
                Ok(Content::Str)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Content, A::Error> {
                let mut blocks = Vec::new();
                while let Some(b) = s.next_element::<Block>()? {
                    blocks.push(b);
                }
                Ok(Content::Arr(blocks))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Content, A::Error> {
                KindVisitor.visit_map(m).map(|_| Content::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Content, E> {
                Ok(Content::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Content, E> {
                Ok(Content::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Content, E> {
                Ok(Content::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Content, E> {
                Ok(Content::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// The fields of a message object that Pi reads.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct MsgFields {
    role: Name,
    content: Content,
    command: Present,
    output: Present,
    summary: Present,
}

/// An entry's `message` or a compaction's `systemMessage`.
#[derive(Debug, Default)]
enum Msg {
    #[default]
    Missing,
    Null,
    /// not an object: Pi's estimate counts 0 for it and `convertToLlm` drops it
    Scalar(Kind),
    Obj(Box<MsgFields>),
}

impl<'de> Deserialize<'de> for Msg {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Msg;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Msg, A::Error> {
                MsgFields::deserialize(de::value::MapAccessDeserializer::new(m))
                    .map(|f| Msg::Obj(Box::new(f)))
            }
            fn visit_unit<E>(self) -> Result<Msg, E> {
                Ok(Msg::Null)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Msg, E> {
                KindVisitor.visit_bool(v).map(Msg::Scalar)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Msg, E> {
                KindVisitor.visit_i64(v).map(Msg::Scalar)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Msg, E> {
                KindVisitor.visit_u64(v).map(Msg::Scalar)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Msg, E> {
                KindVisitor.visit_f64(v).map(Msg::Scalar)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Msg, E> {
                KindVisitor.visit_str(v).map(Msg::Scalar)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Msg, A::Error> {
                KindVisitor.visit_seq(s).map(Msg::Scalar)
            }
        }
        d.deserialize_any(V)
    }
}

/// The fields of an entry that Pi's context building reads.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct EntryFields {
    #[serde(rename = "type")]
    etype: Name,
    message: Msg,
    content: Content,
    summary: Kind,
    #[serde(rename = "systemMessage")]
    system_message: Msg,
}

/// The entry of `line` when it is a JSON object this reader takes, else None.
fn parse(line: &[u8]) -> Option<EntryFields> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = EntryFields;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<EntryFields, A::Error> {
            EntryFields::deserialize(de::value::MapAccessDeserializer::new(m))
        }
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    let e = de.deserialize_map(V).ok()?;
    de.end().ok()?;
    Some(e)
}

// ==== the rule ====================================================================

/// A context message, as far as the check reads it: an object's fields, or not an object.
type Built = Option<MsgFields>;

/// The messages Pi's `sessionEntryToContextMessages` makes of the entry, or its error.
fn context_messages(e: EntryFields) -> Result<Vec<Built>, &'static str> {
    Ok(match e.etype {
        Name::Message => match e.message {
            Msg::Missing => return Err(ROLE_OF_UNDEFINED),
            Msg::Null => return Err(ROLE_OF_NULL),
            Msg::Scalar(_) => vec![None],
            Msg::Obj(mut m) => {
                // null or missing content: `""` for system, `[]` for user, assistant, toolResult
                if matches!(m.content, Content::Missing | Content::Null) {
                    match m.role {
                        Name::System => m.content = Content::Str,
                        Name::User | Name::Assistant | Name::ToolResult => {
                            m.content = Content::Arr(Vec::new())
                        }
                        _ => {}
                    }
                }
                vec![Some(*m)]
            }
        },
        Name::CustomMessage => {
            let content = match e.content {
                Content::Missing | Content::Null => Content::Arr(Vec::new()),
                c => c,
            };
            vec![Some(MsgFields {
                role: Name::Custom,
                content,
                ..Default::default()
            })]
        }
        Name::BranchSummaryEntry => match e.summary {
            Kind::Truthy => vec![Some(MsgFields {
                role: Name::BranchSummary,
                summary: Present::Value,
                ..Default::default()
            })],
            _ => vec![],
        },
        Name::Compaction => {
            let mut out = Vec::with_capacity(2);
            match e.system_message {
                Msg::Obj(m) => out.push(Some(*m)),
                Msg::Scalar(Kind::Truthy) => out.push(None),
                _ => {}
            }
            out.push(Some(MsgFields {
                role: Name::CompactionSummary,
                summary: match e.summary {
                    Kind::Missing => Present::Missing,
                    Kind::Null => Present::Null,
                    Kind::Truthy | Kind::Falsy => Present::Value,
                },
                ..Default::default()
            }));
            out
        }
        _ => vec![],
    })
}

/// Pi's `estimateTextAndImageContentChars` over `content`: its error.
fn content_chars_error(content: &Content) -> Option<&'static str> {
    match content {
        Content::Str => None,
        Content::Arr(blocks) => blocks
            .iter()
            .find_map(|b| matches!(b, Block::Null).then_some(TYPE_OF_NULL)),
        _ => Some(CONTENT_NOT_ITERABLE),
    }
}

/// Pi's `estimateTokens(message)`: its error.
fn estimate_error(m: &MsgFields) -> Option<&'static str> {
    match m.role {
        Name::User | Name::Custom | Name::ToolResult | Name::System => {
            content_chars_error(&m.content)
        }
        Name::Assistant => match &m.content {
            Content::Str => None, // iterates its characters, whose `type` is undefined
            Content::Arr(blocks) => blocks.iter().find_map(|b| match b {
                Block::Null => Some(TYPE_OF_NULL),
                Block::Other => None,
                Block::Obj(f) => match f.btype {
                    Name::Text => f.text.length_error(),
                    Name::Thinking => f.thinking.length_error(),
                    Name::ToolCall => f.name.length_error().or(match f.arguments {
                        // `JSON.stringify(undefined).length`
                        Present::Missing => Some(LENGTH_OF_UNDEFINED),
                        _ => None,
                    }),
                    _ => None,
                },
            }),
            _ => Some(ASSISTANT_NOT_ITERABLE),
        },
        Name::BashExecution => m.command.length_error().or(m.output.length_error()),
        Name::BranchSummary | Name::CompactionSummary => m.summary.length_error(),
        _ => None,
    }
}

/// Pi's `serializeConversation(convertToLlm(messages))` on messages whose estimate passed: its
/// error. `convertToLlm` makes user text of bash executions, custom messages and summaries (no
/// error); user content is then a string or an array without null items.
fn serialize_error(m: &MsgFields) -> Option<&'static str> {
    match (m.role, &m.content) {
        (Name::Assistant, Content::Arr(blocks)) => blocks.iter().find_map(|b| match b {
            Block::Obj(f) if f.btype == Name::ToolCall && f.arguments == Present::Null => {
                Some(NULL_TO_OBJECT) // Object.entries(null)
            }
            _ => None,
        }),
        (Name::Assistant, _) => Some(NO_SOME),
        (Name::ToolResult, Content::Str) => Some(NO_FILTER),
        _ => None,
    }
}

/// Nesting from which a line is left to the Python check, which knows when Python cannot load
/// it (`sessiontree.entries.parse_json_line`: past 1000 levels, or its parser's recursion limit
/// a little before). The values this reader skips nest without bound (`serde_json` skips them
/// without recursion), so the depth is measured here.
const PYTHON_DEPTH: usize = 512;

/// The line may nest [`PYTHON_DEPTH`] levels or more: it holds that many `[` and `{` bytes
/// (one pass, counted in bytes per chunk so that it vectorizes) and its measured depth
/// ([`crate::json::check_value`], only then) reaches it.
fn too_deep_for_python(line: &[u8]) -> bool {
    let mut opens = 0usize;
    for chunk in line.chunks(255) {
        let mut k = 0u8;
        for &c in chunk {
            k += u8::from(c == b'[') + u8::from(c == b'{');
        }
        opens += usize::from(k);
    }
    opens >= PYTHON_DEPTH && crate::json::check_value(line).map_or(true, |d| d >= PYTHON_DEPTH)
}

/// What Pi does with the content of the entry on `line` (one JSON object).
///
/// Pi `sessionEntryToContextMessages`, then `estimateTokens` on each message, then
/// `serializeConversation(convertToLlm(messages))`; the first that throws, with Pi's text.
/// Entries of other types are [`Check::Fine`].
pub fn check_line(line: &[u8]) -> Check {
    if too_deep_for_python(line) {
        return Check::Undecided;
    }
    let Some(e) = parse(line) else {
        return Check::Undecided;
    };
    let messages = match context_messages(e) {
        Ok(m) => m,
        Err(text) => return Check::Throws(Stage::Context, text),
    };
    let objects = || messages.iter().flatten();
    if let Some(text) = objects().find_map(estimate_error) {
        return Check::Throws(Stage::Estimate, text);
    }
    match objects().find_map(serialize_error) {
        Some(text) => Check::Throws(Stage::Serialize, text),
        None => Check::Fine,
    }
}

/// Entries checked per task.
const PART: usize = 1024;

/// [`check_line`] on the entries at positions `idx` of `st`, on every core.
///
/// `(position, check)` for each entry that is not [`Check::Fine`], in the order of `idx`.
pub fn check_entries(st: &Store, idx: &[usize]) -> Result<Vec<(usize, Check)>, StoreError> {
    let parts: Vec<Vec<(usize, Check)>> = idx
        .par_chunks(PART)
        .enumerate()
        .map(|(p, chunk)| {
            let mut found = Vec::new();
            st.with_lines(chunk, |k, line| match check_line(line) {
                Check::Fine => {}
                c => found.push((p * PART + k, c)),
            })?;
            found.sort_unstable_by_key(|&(k, _)| k);
            Ok(found
                .into_iter()
                .map(|(k, c)| (idx[k], c))
                .collect::<Vec<_>>())
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(parts.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str) -> Check {
        check_line(line.as_bytes())
    }

    #[test]
    fn well_formed_entries_are_fine() {
        assert_eq!(
            check(r#"{"type":"message","message":{"role":"user","content":"hi"}}"#),
            Check::Fine
        );
        assert_eq!(
            check(
                r#"{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","name":"r","arguments":{"a":[1,{"b":null}]}}]}}"#
            ),
            Check::Fine
        );
        assert_eq!(check(r#"{"type":"label","targetId":null}"#), Check::Fine);
    }

    #[test]
    fn each_stage_throws_pis_text() {
        assert_eq!(
            check(r#"{"type":"message"}"#),
            Check::Throws(Stage::Context, ROLE_OF_UNDEFINED)
        );
        assert_eq!(
            check(
                r#"{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","name":"r"}]}}"#
            ),
            Check::Throws(Stage::Estimate, LENGTH_OF_UNDEFINED)
        );
        assert_eq!(
            check(r#"{"type":"message","message":{"role":"assistant","content":"hi"}}"#),
            Check::Throws(Stage::Serialize, NO_SOME)
        );
        assert_eq!(
            check(r#"{"type":"compaction","summary":null}"#),
            Check::Throws(Stage::Estimate, LENGTH_OF_NULL)
        );
    }

    #[test]
    fn lines_serde_refuses_are_left_to_the_caller() {
        let deep = "[".repeat(600) + &"]".repeat(600);
        let line = format!(r#"{{"type":"message","message":{{"role":"user","content":{deep}}}}}"#);
        assert_eq!(check(&line), Check::Undecided);
        // brackets in strings are not nesting: a long code listing is read here
        let text = "[{".repeat(600);
        let line =
            format!(r#"{{"type":"message","message":{{"role":"assistant","content":"{text}"}}}}"#);
        assert_eq!(check(&line), Check::Throws(Stage::Serialize, NO_SOME));
        assert_eq!(
            check(r#"{"type":"message","type":"message","message":null}"#),
            Check::Undecided
        );
        // an array is not an entry: a struct must not read it field by field
        assert_eq!(check(r#"["message",null]"#), Check::Undecided);
    }
}
