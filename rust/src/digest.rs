//! Per-entry digests for the HTML view (`sessiontree.html`).
//!
//! What a tree row shows and what the page sums, computed from each entry's raw line without
//! building Python objects.
//!
//! One digest per entry: a kind (`type`, or `message:<role>`), a short preview of its text, a
//! reference id (a tool result's `toolCallId`, a compaction's `firstKeptEntryId`, a branch
//! summary's `fromId`, a label's `targetId`), Pi's token estimate of its context message, and the
//! provider usage it carries (`sessiontree.usage` rules: assistant messages, tool results with a
//! usage, compaction / branch_summary / usage entries). [`digest_columns`] writes a batch as one
//! JSON document of columns, the form the page decodes.
//!
//! What an entry is to the rules (whether it has a context message to estimate, which usage it
//! carries) is the projection's (`entry_kind.rs`: the row of the line's `type`), and a usage
//! field's number is `rows::js_usage_number`'s; the previews are the page's own.

use crate::entry_kind::{self, Carries, Context, Shape, TypeRow};
use crate::rows::{js_usage_number, Num, Scalar};
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

/// `x += value` as JavaScript adds a usage field (`rows::js_usage_number`: numbers add, null 0,
/// booleans 0/1, anything else, a missing field included, NaN).
fn js_num(v: Option<&Value>) -> f64 {
    js_usage_number(Scalar::of_value(v)).map_or(f64::NAN, Num::to_f64)
}

/// The numbers of a usage object as Pi's sums add them (cost 0 without a `cost` object).
fn usage_numbers(u: &Map<String, Value>) -> [f64; 5] {
    let cost = match u.get("cost") {
        Some(Value::Object(c)) => js_num(c.get("total")),
        _ => 0.0,
    };
    [
        js_num(u.get("input")),
        js_num(u.get("output")),
        js_num(u.get("cacheRead")),
        js_num(u.get("cacheWrite")),
        cost,
    ]
}

/// The usage the page shows for an entry of type row `t`.
///
/// `role`: its message's role when a string; `msg_usage`, `entry_usage`: `message.usage` and
/// its own `usage`. The numbers of the
/// usage it carries by `entry_kind::carried_usage`, when that usage has a field. An assistant
/// message whose `usage` is there but holds no field (`{}`, null, a number...) shows as a usage
/// without numbers (NaN: Pi's sums over it are NaN or throw; `sessiontree.usage` adds NaN
/// tokens for `{}` and skips the others).
fn page_usage(
    t: TypeRow,
    role: Option<&str>,
    msg_usage: Option<&Value>,
    entry_usage: Option<&Value>,
) -> Option<[f64; 5]> {
    let role = role.map(|r| entry_kind::role_row_of_name(r.as_bytes()));
    let (ms, es) = (Shape::of_value(msg_usage), Shape::of_value(entry_usage));
    let carried = entry_kind::carried_usage(t, role, ms, es);
    let u = match carried {
        Some(true) => msg_usage,
        Some(false) => entry_usage,
        None => None,
    };
    match u {
        Some(Value::Object(u)) if !u.is_empty() => Some(usage_numbers(u)),
        _ if msg_usage.is_some() && role.is_some_and(|r| r.usage == Carries::Object) => {
            Some([f64::NAN; 5])
        }
        _ => None,
    }
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
///
/// The common entries (user, assistant and tool-result messages of the usual shape) are read by
/// [`fast::digest`] without building a JSON tree; anything else, and any line on which that
/// reader stops, by [`digest_value`], which stays the rule (and the oracle of the parity test
/// over the corpus).
pub fn digest(line: &[u8], preview_chars: usize) -> Digest {
    fast::digest(line, preview_chars).unwrap_or_else(|| digest_value(line, preview_chars))
}

/// [`digest`] through a `serde_json::Value` of the whole line.
pub fn digest_value(line: &[u8], preview_chars: usize) -> Digest {
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
    let row = entry_kind::type_row_of_name(etype);
    let p = &mut d.preview;
    match row.context {
        Context::Message => {
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
            d.usage = page_usage(row, str_field(m, "role"), m.get("usage"), e.get("usage"));
        }
        Context::CompactionSummary | Context::BranchSummary => {
            let summary = str_field(&e, "summary").unwrap_or("");
            clip(summary, preview_chars, p);
            d.reference = str_field(
                &e,
                if row.context == Context::CompactionSummary {
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
            d.usage = page_usage(row, None, None, e.get("usage"));
        }
        Context::CustomMessage => {
            let content = match e.get("content") {
                None | Some(Value::Null) => Value::Array(vec![]),
                Some(c) => c.clone(),
            };
            content_text(Some(&content), preview_chars, p);
            d.tokens = estimate(&serde_json::json!({"role": "custom", "content": content}));
        }
        Context::ContextEdit => {
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
        // no context message: what the page shows of each (and the usage an entry carries)
        Context::Nothing => {
            d.usage = page_usage(row, None, None, e.get("usage"));
            nothing_preview(&e, etype, preview_chars, &mut d);
        }
        // a type the core does not know: its name only (Pi 1.6 ignores it; no usage)
        Context::Undecided => {}
    }
    d
}

/// The preview of an entry that contributes no context message.
fn nothing_preview(e: &Map<String, Value>, etype: &str, preview_chars: usize, d: &mut Digest) {
    let p = &mut d.preview;
    match etype {
        "label" => {
            clip(
                str_field(e, "label").unwrap_or("(label cleared)"),
                preview_chars,
                p,
            );
            d.reference = str_field(e, "targetId").map(str::to_string);
        }
        "session_info" => clip(str_field(e, "name").unwrap_or(""), preview_chars, p),
        "model_change" => clip(
            &format!(
                "{}/{}",
                str_field(e, "provider").unwrap_or("?"),
                str_field(e, "modelId").unwrap_or("?")
            ),
            preview_chars,
            p,
        ),
        "thinking_level_change" => clip(
            str_field(e, "thinkingLevel").unwrap_or("?"),
            preview_chars,
            p,
        ),
        "custom" => clip(str_field(e, "customType").unwrap_or(""), preview_chars, p),
        _ => {} // `usage`, `session`: no preview
    }
}

/// [`digest`] without a JSON tree, for the usual `message` entries.
///
/// For roles `user`, `assistant` or `toolResult` whose fields have the usual types: one pass of
/// `serde_json` over the line, strings borrowed where they have no escapes, fields the digest does
/// not read checked as JSON (the same parser, so the same lines fail) but not kept. Returns None
/// (ask [`digest_value`]) for any other entry, any field of an unexpected type, a key given twice,
/// or a line `serde_json` rejects; when it answers, the answer is `digest_value`'s (tested over the
/// corpus).
mod fast {
    use super::{clip, page_usage, Digest};
    use crate::entry_kind;
    use crate::tokens::{stringify_len, utf16_len, IMAGE_CHARS};
    use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde_json::Value;
    use std::borrow::Cow;
    use std::fmt;

    /// A string, borrowed from the line when it has no escapes; `null` is None.
    struct NStr<'a>(Option<Cow<'a, str>>);

    impl<'de> Deserialize<'de> for NStr<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = NStr<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a string or null")
                }
                fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                    Ok(NStr(Some(Cow::Borrowed(s))))
                }
                fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                    Ok(NStr(Some(Cow::Owned(s.to_owned()))))
                }
                fn visit_unit<E>(self) -> Result<Self::Value, E> {
                    Ok(NStr(None))
                }
            }
            d.deserialize_any(V)
        }
    }

    /// The longest preview the fast reader makes (longer ones go to `digest_value`).
    pub(super) const HEAD_CHARS: usize = 1024;

    /// A text block's or a content string's UTF-16 length and (a head of) its text.
    ///
    /// Borrowed when it has no escapes, else only its first `max + 1` non-whitespace characters
    /// copied, `max` the preview's length (a tool output of megabytes is not): [`clip`] never
    /// reads past the `max + 1`-th, so the preview is exact.
    struct Txt<'a> {
        head: Cow<'a, str>,
        units: u64,
    }

    thread_local! {
        /// The non-whitespace characters a copied text keeps on this thread: the preview's
        /// length of the digest being read ([`digest`] sets it; [`clip`] reads at most one more).
        static HEAD: std::cell::Cell<usize> = const { std::cell::Cell::new(HEAD_CHARS) };
    }

    fn head_of(s: &str) -> &str {
        let limit = HEAD.with(std::cell::Cell::get);
        let mut k = 0;
        for (i, c) in s.char_indices() {
            if !c.is_whitespace() {
                k += 1;
                if k > limit {
                    return &s[..i + c.len_utf8()];
                }
            }
        }
        s
    }

    impl<'a> Txt<'a> {
        fn borrowed(s: &'a str) -> Self {
            Txt {
                units: utf16_len(s),
                head: Cow::Borrowed(s),
            }
        }
        fn copied(s: &str) -> Self {
            Txt {
                units: utf16_len(s),
                head: Cow::Owned(head_of(s).to_owned()),
            }
        }
    }

    /// A [`Txt`] or `null` (None).
    struct NTxt<'a>(Option<Txt<'a>>);

    impl<'de> Deserialize<'de> for NTxt<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = NTxt<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a string or null")
                }
                fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                    Ok(NTxt(Some(Txt::borrowed(s))))
                }
                fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                    Ok(NTxt(Some(Txt::copied(s))))
                }
                fn visit_unit<E>(self) -> Result<Self::Value, E> {
                    Ok(NTxt(None))
                }
            }
            d.deserialize_any(V)
        }
    }

    /// Any JSON value, parsed (so what `Value` rejects is rejected) and dropped.
    struct Skip;

    impl<'de> Deserialize<'de> for Skip {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Skip;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_unit<E>(self) -> Result<Skip, E> {
                    Ok(Skip)
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Skip, A::Error> {
                    while a.next_element::<Skip>()?.is_some() {}
                    Ok(Skip)
                }
                fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Skip, A::Error> {
                    while a.next_entry::<Skip, Skip>()?.is_some() {}
                    Ok(Skip)
                }
            }
            d.deserialize_any(V)
        }
    }

    /// A key (escapes decoded, as `Value` decodes them).
    struct Key<'a>(Cow<'a, str>);

    impl<'de> Deserialize<'de> for Key<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Key<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a key")
                }
                fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                    Ok(Key(Cow::Borrowed(s)))
                }
                fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                    Ok(Key(Cow::Owned(s.to_owned())))
                }
            }
            d.deserialize_str(V)
        }
    }

    fn set<T, E: de::Error>(slot: &mut Option<T>, v: T) -> Result<(), E> {
        if slot.is_some() {
            return Err(E::custom("a key given twice")); // Value keeps the last: ask it
        }
        *slot = Some(v);
        Ok(())
    }

    #[derive(Default)]
    struct Block<'a> {
        btype: Option<Option<Cow<'a, str>>>,
        text: Option<Option<Txt<'a>>>,
        thinking: Option<Option<Txt<'a>>>,
        name: Option<Option<Cow<'a, str>>>,
        arguments: Option<Value>,
    }

    impl<'de> Deserialize<'de> for Block<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Block<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a content block")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                    let mut b = Block::default();
                    while let Some(Key(k)) = a.next_key::<Key>()? {
                        match &*k {
                            "type" => set(&mut b.btype, a.next_value::<NStr>()?.0)?,
                            "text" => set(&mut b.text, a.next_value::<NTxt>()?.0)?,
                            "thinking" => set(&mut b.thinking, a.next_value::<NTxt>()?.0)?,
                            "name" => set(&mut b.name, a.next_value::<NStr>()?.0)?,
                            "arguments" => set(&mut b.arguments, a.next_value::<Value>()?)?,
                            _ => {
                                a.next_value::<Skip>()?;
                            }
                        }
                    }
                    Ok(b)
                }
            }
            d.deserialize_map(V)
        }
    }

    enum Content<'a> {
        Text(Txt<'a>),
        Blocks(Vec<Block<'a>>),
    }

    impl<'de> Deserialize<'de> for Content<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Content<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a string or an array of blocks")
                }
                fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                    Ok(Content::Text(Txt::borrowed(s)))
                }
                fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                    Ok(Content::Text(Txt::copied(s)))
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                    let mut v = Vec::new();
                    while let Some(b) = a.next_element::<Block>()? {
                        v.push(b);
                    }
                    Ok(Content::Blocks(v))
                }
            }
            d.deserialize_any(V)
        }
    }

    #[derive(Default)]
    struct Msg<'a> {
        role: Option<Option<Cow<'a, str>>>,
        content: Option<Content<'a>>,
        tool_name: Option<Option<Cow<'a, str>>>,
        tool_call_id: Option<Option<Cow<'a, str>>>,
        usage: Option<Value>,
    }

    impl<'de> Deserialize<'de> for Msg<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Msg<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a message")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                    let mut m = Msg::default();
                    while let Some(Key(k)) = a.next_key::<Key>()? {
                        match &*k {
                            "role" => set(&mut m.role, a.next_value::<NStr>()?.0)?,
                            "content" => set(&mut m.content, a.next_value::<Content>()?)?,
                            "toolName" => set(&mut m.tool_name, a.next_value::<NStr>()?.0)?,
                            "toolCallId" => set(&mut m.tool_call_id, a.next_value::<NStr>()?.0)?,
                            "usage" => set(&mut m.usage, a.next_value::<Value>()?)?,
                            _ => {
                                a.next_value::<Skip>()?;
                            }
                        }
                    }
                    Ok(m)
                }
            }
            d.deserialize_map(V)
        }
    }

    #[derive(Default)]
    struct Line<'a> {
        etype: Option<Option<Cow<'a, str>>>,
        message: Option<Msg<'a>>,
    }

    impl<'de> Deserialize<'de> for Line<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Line<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("an entry")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                    let mut l = Line::default();
                    while let Some(Key(k)) = a.next_key::<Key>()? {
                        match &*k {
                            "type" => set(&mut l.etype, a.next_value::<NStr>()?.0)?,
                            "message" => set(&mut l.message, a.next_value::<Msg>()?)?,
                            _ => {
                                a.next_value::<Skip>()?;
                            }
                        }
                    }
                    Ok(l)
                }
            }
            d.deserialize_map(V)
        }
    }

    /// `super::content_text` over typed blocks.
    fn content_text(c: &Content<'_>, max: usize, out: &mut String) {
        match c {
            Content::Text(s) => clip(&s.head, max, out),
            Content::Blocks(blocks) => {
                for b in blocks {
                    if out.chars().count() >= max {
                        return;
                    }
                    match b.btype.as_ref().and_then(|t| t.as_deref()) {
                        Some("text") => {
                            if let Some(Some(t)) = &b.text {
                                clip(&t.head, max, out)
                            }
                        }
                        Some("toolCall") => {
                            if let Some(Some(t)) = &b.name {
                                clip(&format!("→ {t}"), max, out)
                            }
                        }
                        Some("image") => clip("[image]", max, out),
                        _ => {}
                    }
                }
                if out.is_empty() {
                    for b in blocks {
                        if let Some(Some(t)) = &b.thinking {
                            clip(&t.head, max, out);
                            break;
                        }
                    }
                }
            }
        }
    }

    fn t_len(v: &Option<Option<Txt<'_>>>) -> Option<u64> {
        match v {
            Some(Some(t)) => Some(t.units),
            _ => None,
        }
    }

    fn s_len(v: &Option<Option<Cow<'_, str>>>) -> Option<u64> {
        match v {
            Some(Some(s)) => Some(utf16_len(s)),
            _ => None,
        }
    }

    /// `tokens::content_chars` (user, toolResult) over typed content.
    fn content_chars(c: &Content<'_>) -> Option<u64> {
        match c {
            Content::Text(s) => Some(s.units),
            Content::Blocks(blocks) => {
                let mut n = 0u64;
                for b in blocks {
                    match b.btype.as_ref().and_then(|t| t.as_deref()) {
                        Some("text") => n += t_len(&b.text).unwrap_or(0),
                        Some("image") => n += IMAGE_CHARS,
                        _ => {}
                    }
                }
                Some(n)
            }
        }
    }

    /// `tokens::assistant_chars` over typed content.
    fn assistant_chars(c: &Content<'_>) -> Option<u64> {
        let Content::Blocks(blocks) = c else {
            return None;
        };
        let mut n = 0u64;
        for b in blocks {
            match b.btype.as_ref().and_then(|t| t.as_deref()) {
                Some("text") => n += t_len(&b.text)?,
                Some("thinking") => n += t_len(&b.thinking)?,
                Some("toolCall") => {
                    n += s_len(&b.name)?;
                    n += stringify_len(b.arguments.as_ref()?);
                }
                _ => {}
            }
        }
        Some(n)
    }

    pub(super) fn digest(line: &[u8], preview_chars: usize) -> Option<Digest> {
        if preview_chars >= HEAD_CHARS {
            return None;
        }
        HEAD.with(|h| h.set(preview_chars));
        // one SIMD check of the whole line, then `from_str` (no check per string); a line that
        // is not UTF-8 is one `Value` rejects too
        let text = simdutf8::basic::from_utf8(line).ok()?;
        let mut de = serde_json::Deserializer::from_str(text);
        let l = Line::deserialize(&mut de).ok()?;
        de.end().ok()?;
        if l.etype.as_ref()?.as_deref() != Some("message") {
            return None;
        }
        let m = l.message?;
        let role = m.role.as_ref()?.as_deref()?;
        if !matches!(role, "user" | "assistant" | "toolResult") {
            return None;
        }
        let content = m.content.as_ref()?;
        let mut d = Digest {
            kind: format!("message:{role}"),
            ..Default::default()
        };
        let p = &mut d.preview;
        if role == "toolResult" {
            let name = m.tool_name.as_ref().and_then(|t| t.as_deref());
            clip(&format!("{}: ", name.unwrap_or("tool")), preview_chars, p);
            d.reference = m
                .tool_call_id
                .as_ref()
                .and_then(|t| t.as_deref())
                .map(str::to_string);
        }
        content_text(content, preview_chars, p);
        d.tokens = match role {
            "assistant" => assistant_chars(content),
            _ => content_chars(content),
        }
        .map(|c| c.div_ceil(4));
        d.usage = page_usage(
            entry_kind::type_row(crate::index::T_MESSAGE),
            Some(role),
            m.usage.as_ref(),
            None,
        );
        Some(d)
    }
}

/// Entries digested per task: each task reads its lines (`Store::with_lines`) and digests them
/// as they are read, so no batch's lines are copied side by side first.
const PART: usize = 1024;

/// The digest of entry `i` from its `line`, with the fix-ups only the index knows.
fn digest_at(st: &Store, i: usize, line: &[u8], preview_chars: usize) -> Digest {
    let mut d = digest(line, preview_chars);
    // the digest reads a `hookMessage` message as `custom` (what Pi's migrateV2ToV3 makes of
    // it); the index keeps the role as `hookMessage` only in a file Pi does not migrate (v3),
    // where Pi's estimateTokens has no case for it: 0
    if d.tokens.is_some() && st.index.recs.at(i).role == crate::index::R_HOOK {
        d.tokens = Some(0);
    }
    if d.kind == "?" {
        // a line the core accepts but serde_json does not (1e400, a lone surrogate escape,
        // nesting past 128): keep the type the index read
        let t = st.index.recs.at(i).etype;
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
}

/// Writes `"key":[...]` (after a `,` unless first) with `each` writing the values of `items`.
fn push_column<T>(
    out: &mut Vec<u8>,
    key: &str,
    items: impl IntoIterator<Item = T>,
    mut each: impl FnMut(&mut Vec<u8>, T),
) {
    if out.len() > 1 {
        out.push(b',');
    }
    push_json(out, key);
    out.extend_from_slice(b":[");
    for (k, v) in items.into_iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        each(out, v);
    }
    out.push(b']');
}

/// `v` as serde_json writes it (strings escaped, floats in its shortest form, NaN and the
/// infinities as `null`).
fn push_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    // writing into a Vec fails only for a value that cannot be JSON (none is given here)
    if serde_json::to_writer(&mut *out, v).is_err() {
        out.extend_from_slice(b"null");
    }
}

fn push_opt<T: serde::Serialize>(out: &mut Vec<u8>, v: Option<T>) {
    match v {
        Some(v) => push_json(out, &v),
        None => out.extend_from_slice(b"null"),
    }
}

/// Entries `start..end` (file order) as one JSON document of columns.
///
/// `id` (string or null), `k` kind, `p` preview, `r` reference, `o` byte offset of the line, `l`
/// its byte length, `t` timestamp in ms (null when invalid), `e` token estimate (null: none), `u`
/// usage `[input, output, cacheRead, cacheWrite, cost]` or null (NaN fields null). Keys in
/// sorted order, compact, as serde_json writes a map. Digests run in parallel, [`PART`] entries
/// a task, each reading its own lines (nearby lines in one `pread`; a file changed under the
/// index errs instead of faulting).
pub fn digest_columns(
    st: &Store,
    start: usize,
    end: usize,
    preview_chars: usize,
    id_of: impl Fn(usize) -> Option<String>,
) -> Result<Vec<u8>, StoreError> {
    let parts: Vec<usize> = (start..end).step_by(PART).collect();
    let ds: Vec<Vec<Digest>> = parts
        .par_iter()
        .map(|&s| {
            let e = (s + PART).min(end);
            let idx: Vec<usize> = (s..e).collect();
            let mut ds = vec![Digest::default(); e - s];
            st.with_lines(&idx, |k, line| {
                ds[k] = digest_at(st, s + k, line, preview_chars)
            })?;
            Ok(ds)
        })
        .collect::<Result<_, StoreError>>()?;
    let ds = || ds.iter().flatten();
    let recs = || (start..end).map(|i| st.index.recs.at(i));
    let mut out = Vec::with_capacity((end - start) * 160);
    out.push(b'{');
    push_column(&mut out, "e", ds(), |o, d| push_opt(o, d.tokens));
    push_column(&mut out, "id", start..end, |o, i| push_opt(o, id_of(i)));
    push_column(&mut out, "k", ds(), |o, d| push_json(o, &d.kind));
    push_column(&mut out, "l", recs(), |o, r| push_json(o, &r.len));
    push_column(&mut out, "o", recs(), |o, r| push_json(o, &r.offset()));
    push_column(&mut out, "p", ds(), |o, d| push_json(o, &d.preview));
    push_column(&mut out, "r", ds(), |o, d| {
        push_opt(o, d.reference.as_ref())
    });
    push_column(&mut out, "t", recs(), |o, r| push_json(o, &r.ts()));
    push_column(&mut out, "u", ds(), |o, d| match d.usage {
        Some(u) => push_json(o, &u),
        None => o.extend_from_slice(b"null"),
    });
    out.push(b'}');
    Ok(out)
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

    fn same(line: &[u8]) -> bool {
        for max in [80, 3] {
            let a = format!("{:?}", digest(line, max));
            let b = format!("{:?}", digest_value(line, max));
            assert_eq!(a, b, "{}", String::from_utf8_lossy(line));
        }
        fast::digest(line, 80).is_some()
    }

    /// The fast reader answers as `digest_value` on every line of the corpus, on odd shapes of
    /// the fields it reads, and on lines `serde_json` rejects only deep inside a field it skips.
    #[test]
    fn the_fast_digest_equals_the_value_digest() {
        let mut fast_hits = 0;
        let lines = crate::for_each_corpus_line(|line| fast_hits += usize::from(same(line)));
        assert!(
            lines > 1000 && fast_hits > lines / 4,
            "{fast_hits} of {lines}"
        );
        let m = |body: &str| format!(r#"{{"type":"message","id":"a","message":{{{body}}}}}"#);
        let odd = [
            m(r#""role":"user","content":"plain""#),
            m(r#""role":"user","content":"esc\n\u00e9\ud83d\ude00 x""#),
            m(&format!(
                r#""role":"user","content":"{}""#,
                "a\\n \\t".repeat(3000)
            )),
            m(&format!(
                r#""role":"assistant","content":[{{"type":"text","text":"{}"}},{{"type":"thinking","thinking":"\\n{}"}}]"#,
                "\\u00e9 ".repeat(2000),
                "b".repeat(5000)
            )),
            m(&format!(
                r#""role":"toolResult","content":[{{"type":"text","text":"{}x"}}]"#,
                "\\n".repeat(5000)
            )),
            m(
                r#""role":"user","content":[{"type":"text","text":null},{"type":"image"},{"type":"x"}]"#,
            ),
            m(r#""role":"user","content":[{"type":null,"text":"a"},{"text":"b"}]"#),
            m(r#""role":"user","content":[{"type":5,"text":"a"}]"#),
            m(r#""role":"user","content":[{"type":"text","text":5}]"#),
            m(r#""role":"user","content":[7,{"type":"text","text":"a"}]"#),
            m(r#""role":"user","content":null"#),
            m(r#""role":"user""#),
            m(r#""role":"user","content":{"a":1}"#),
            m(r#""role":"user","content":"a","content":"bb""#),
            m(r#""role":"user","role":"assistant","content":"a""#),
            m(r#""role":5,"content":"a""#),
            m(r#""role":null,"content":"a""#),
            m(r#""content":"a""#),
            m(r#""role":"bashExecution","command":"ls","output":"x""#),
            m(r#""role":"assistant","content":"text, not blocks","usage":{"input":1}"#),
            m(r#""role":"assistant","content":[{"type":"thinking","thinking":"t"}],"usage":null"#),
            m(r#""role":"assistant","content":[{"type":"thinking","thinking":null}],"usage":5"#),
            m(r#""role":"assistant","content":[{"type":"toolCall","name":"ls","arguments":null}]"#),
            m(r#""role":"assistant","content":[{"type":"toolCall","name":"ls"}]"#),
            m(
                r#""role":"assistant","content":[{"type":"toolCall","arguments":{"a":[1,2.50,"\u2028"]}}]"#,
            ),
            m(r#""role":"assistant","content":[{"type":"text","text":"a","type":"thinking"}]"#),
            m(r#""role":"assistant","content":[{"type":"other","thinking":"only"}],"usage":{}"#),
            m(
                r#""role":"assistant","content":[],"usage":{"input":1,"output":null,"cacheRead":true,"cost":{"total":"x"}}"#,
            ),
            m(r#""role":"toolResult","toolCallId":"c","toolName":null,"content":"ok""#),
            m(r#""role":"toolResult","toolCallId":5,"content":"ok""#),
            m(
                r#""role":"toolResult","content":[{"type":"text","text":"  spaced\t out  "}],"usage":{"input":2}"#,
            ),
            m(r#""r\u006fle":"user","content":"escaped key""#),
            m(r#""role":"user","content":"a","extra":1e400"#),
            m(r#""role":"user","content":"a","extra":"\ud800""#),
            m(r#""role":"user","content":"a","extra":-0.0,"deep":[[[[{"x":[true,false,null]}]]]]"#),
            format!(
                r#"{{"type":"message","message":{{"role":"user","content":"a","d":{}{}}}}}"#,
                "[".repeat(200),
                "]".repeat(200)
            ),
            r#"{"type":"message","message":{"role":"user","content":"a"}} trailing"#.to_string(),
            r#"{"type":"message","type":"label","message":{"role":"user","content":"a"}}"#
                .to_string(),
            r#"{"type":"label","message":{"role":"user","content":"a"}}"#.to_string(),
            r#"{"type":"message","message":"not an object"}"#.to_string(),
            r#"{"message":{"role":"user","content":"a"},"type":"message","x":{"type":"y"}}"#
                .to_string(),
            r#"[{"type":"message"}]"#.to_string(),
        ];
        for line in &odd {
            same(line.as_bytes());
        }
        assert!(same(m(r#""role":"user","content":"plain""#).as_bytes()));
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
