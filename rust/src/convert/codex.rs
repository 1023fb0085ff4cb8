//! Codex rollout -> Pi session (one chain: Codex has no tree).
//!
//! The first line (`session_meta`, or the first layout's `{id, timestamp, instructions}`)
//! becomes the header; `forked_from_id` becomes `parentSession` when a rollout of that id is
//! found (beside it, or in another day folder of Codex's `sessions/YYYY/MM/DD/` layout). Each
//! later line becomes one entry, under the previous one: `response_item` messages, reasoning
//! and tool calls/outputs become messages, `turn_context` a model and a thinking-level change,
//! `compacted` a compaction (retain-none: its replacement history is the new context),
//! anything else a `custom` entry (`codex:<type>[:<payload type>]`). Pass 1 finds which
//! assistant item each `token_count` event's `last_token_usage` belongs to (the last assistant
//! item before it), pass 2 writes.

use super::raw::{self, raw_struct, W};
use super::{
    io_err, ms_of, open_src, push_str, s, Carried, ConvertError, EntryOut, Format, Report,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

#[derive(Deserialize)]
struct M<'a> {
    #[serde(rename = "type")]
    ty: Option<Value>,
    #[serde(borrow)]
    payload: Option<&'a RawValue>,
    role: Option<Value>,
    #[serde(rename = "piEntry", borrow)]
    pi: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct P<'a> {
    #[serde(rename = "type")]
    ty: Option<Value>,
    role: Option<Value>,
    #[serde(borrow)]
    info: Option<&'a RawValue>,
}

raw_struct!(P1 { ty => "type", role => "role", info => "info" });

/// Pass 1's fields of a line, its payload read in the same pass (`raw::Nested`).
#[derive(Deserialize)]
struct M1<'a> {
    #[serde(rename = "type", borrow, default, deserialize_with = "raw::present")]
    ty: Option<&'a RawValue>,
    #[serde(borrow)]
    payload: Option<raw::Nested<P1<'a>>>,
    #[serde(borrow, default, deserialize_with = "raw::present")]
    role: Option<&'a RawValue>,
    /// (`null` reads as absent here, as in `M`)
    #[serde(rename = "piEntry", borrow)]
    pi: Option<&'a RawValue>,
}

type Cow<'a> = std::borrow::Cow<'a, str>;

/// What pass 1 reads of a line: its type, whether it has a payload, the payload's type, role
/// and `info` when the payload is an object, the line's own role, whether it has `piEntry`.
/// None: not a JSON object, or a field given twice (at the top, or in an object payload).
#[allow(clippy::type_complexity)]
fn seen(
    line: &[u8],
) -> Option<(
    Option<Cow<'_>>,
    bool,
    Option<(Option<Cow<'_>>, Option<Cow<'_>>, Option<&RawValue>)>,
    Option<Cow<'_>>,
    bool,
)> {
    if let Ok(m) = serde_json::from_slice::<M1>(line) {
        let p = match &m.payload {
            Some(raw::Nested::Object(p)) => Some((raw::str_of(p.ty), raw::str_of(p.role), p.info)),
            _ => None,
        };
        return Some((
            raw::str_of(m.ty),
            m.payload.is_some(),
            p,
            raw::str_of(m.role),
            m.pi.is_some(),
        ));
    }
    // a number beyond f64 in the payload fails the one-pass read: the payload as raw text
    let m = serde_json::from_slice::<M>(line).ok()?;
    let p = m
        .payload
        .filter(|p| p.get().starts_with('{'))
        .and_then(|p| serde_json::from_str::<P>(p.get()).ok());
    let own = |v: Option<&Value>| s(v).map(|t| Cow::Owned(t.to_string()));
    Some((
        own(m.ty.as_ref()),
        m.payload.is_some(),
        p.map(|p| (own(p.ty.as_ref()), own(p.role.as_ref()), p.info)),
        own(m.role.as_ref()),
        m.pi.is_some(),
    ))
}

const ASSISTANT_ITEMS: &[&str] = &[
    "reasoning",
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
];

fn is_assistant_item(ty: Option<&str>, role: Option<&str>) -> bool {
    match ty {
        Some("message") => role == Some("assistant"),
        Some(t) => ASSISTANT_ITEMS.contains(&t),
        None => false,
    }
}

fn num(v: Option<&Value>) -> u64 {
    v.and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)))
        .unwrap_or(0)
}

/// A `last_token_usage` object's counts: input (with the cached), cached, output, total,
/// reasoning (`u64::MAX`: absent). Kept this small between the passes.
type Counts = [u64; 5];

/// One decision of pass 1: an assistant item's line and the usage a `token_count` gives it.
type Decision = (u32, Option<Counts>);
/// Decisions handed from pass 1 to pass 2 at a time: one hand-off (a possible wake-up of the
/// other thread) per batch, not per assistant item (about 100 KB a batch).
const DECISIONS: usize = 2048;
/// Batches queued between the passes.
const DECISION_DEPTH: usize = 8;

fn counts_of(u: &Value) -> Counts {
    let input = num(u.get("input_tokens"));
    let output = num(u.get("output_tokens"));
    [
        input,
        num(u.get("cached_input_tokens")),
        output,
        u.get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(input + output),
        u.get("reasoning_output_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(u64::MAX),
    ]
}

/// Pass 1: decides, for each assistant-item line in line order, the usage its `token_count`
/// event gives (the first such event before the next assistant item), and sends
/// `(line, Some(counts))` or `(line, None)`, `DECISIONS` at a time (the last batch at the end).
/// Runs beside pass 2, which waits for a line's decision (`Cx::usage_at`); stops early when
/// pass 2 has stopped.
fn usages(
    src: &Path,
    data: Option<&[u8]>,
    tx: &SyncSender<Vec<Decision>>,
) -> Result<(), ConvertError> {
    let mut lines = open_src(src, data)?;
    let mut batch: Vec<Decision> = Vec::with_capacity(DECISIONS);
    // false when pass 2 has stopped
    let send = |d: Decision, batch: &mut Vec<Decision>| {
        batch.push(d);
        batch.len() < DECISIONS
            || tx
                .send(std::mem::replace(batch, Vec::with_capacity(DECISIONS)))
                .is_ok()
    };
    let mut last: Option<u32> = None;
    let mut n = 0u32;
    while let Some((line, _)) = lines.next_line().map_err(io_err(src))? {
        if let Some((ty, has_payload, p, own_role, pi)) = seen(line) {
            let ty = ty.as_deref();
            let (pty, role) = match (ty, &p) {
                (Some("response_item"), Some((t, r, _))) => (t.as_deref(), r.as_deref()),
                (Some(t), None) => (Some(t), own_role.as_deref()),
                _ => (None, None),
            };
            if !pi && is_assistant_item(pty, role) && (ty == Some("response_item") || !has_payload)
            {
                if let Some(old) = last.replace(n) {
                    if !send((old, None), &mut batch) {
                        return Ok(());
                    }
                }
            } else if ty == Some("event_msg") {
                if let Some((Some(t), _, info)) = &p {
                    if t == "token_count" {
                        if let Some(a) = last.take() {
                            let u = info
                                .and_then(|i| serde_json::from_str::<Value>(i.get()).ok())
                                .and_then(|i| {
                                    i.get("last_token_usage")
                                        .filter(|u| u.is_object())
                                        .map(counts_of)
                                });
                            if !send((a, u), &mut batch) {
                                return Ok(());
                            }
                        }
                    }
                }
            }
        }
        n += 1;
    }
    if let Some(a) = last {
        batch.push((a, None));
    }
    if !batch.is_empty() {
        let _ = tx.send(batch);
    }
    Ok(())
}

raw_struct!(
    /// The fields of a line the mapping reads first.
    Head {
        ty => "type",
        timestamp => "timestamp",
        payload => "payload",
        pi => "piEntry",
        pi_part => "piPart",
        record_type => "record_type",
        call_id => "call_id",
    }
);
raw_struct!(
    /// A response item's fields (a `response_item` payload, or a line of the first layout).
    Item {
        ty => "type",
        role => "role",
        content => "content",
        summary => "summary",
        encrypted_content => "encrypted_content",
        call_id => "call_id",
        id => "id",
        name => "name",
        arguments => "arguments",
        input => "input",
        action => "action",
        output => "output",
    }
);
/// `Head` with the payload read in the same pass.
#[derive(Deserialize)]
struct HeadN<'a> {
    #[serde(rename = "type", borrow, default, deserialize_with = "raw::present")]
    ty: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw::present")]
    timestamp: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw::present_nested")]
    payload: Option<raw::Nested<Item<'a>>>,
    #[serde(rename = "piEntry", borrow, default, deserialize_with = "raw::present")]
    pi: Option<&'a RawValue>,
    #[serde(rename = "piPart", borrow, default, deserialize_with = "raw::present")]
    pi_part: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw::present")]
    record_type: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw::present")]
    call_id: Option<&'a RawValue>,
}
raw_struct!(CxBlock { ty => "type", text => "text", refusal => "refusal", image_url => "image_url" });
raw_struct!(TurnContext { model => "model", effort => "effort", reasoning_effort => "reasoning_effort" });
raw_struct!(OutputObj { content => "content" });
raw_struct!(PiHead { ty => "type" });

type Res<T> = Result<T, serde_json::Error>;

fn cx_blocks(content: Option<&RawValue>) -> Res<Vec<CxBlock<'_>>> {
    raw::elements(content)?
        .into_iter()
        .map(|e| raw::object(Some(e)))
        .collect()
}

/// A message's content as Pi text (and, for a user, image) blocks, comma-separated.
fn text_blocks(w: &mut W<'_>, content: Option<&RawValue>, user: bool) -> Res<()> {
    match raw::kind(content) {
        b'"' => {
            w.lit("{\"text\":")
                .tok_or_empty(content)
                .lit(",\"type\":\"text\"}");
        }
        b'[' => {
            let mut first = true;
            for b in cx_blocks(content)? {
                let sep = if first { "" } else { "," };
                match raw::str_of(b.ty).as_deref() {
                    Some("input_text" | "output_text" | "text" | "refusal") => {
                        let t = raw::str_tok(b.text).or_else(|| raw::str_tok(b.refusal));
                        w.lit(sep)
                            .lit("{\"text\":")
                            .lit(t.unwrap_or("\"\""))
                            .lit(",\"type\":\"text\"}");
                    }
                    Some("input_image") if user => {
                        let Some(url) = raw::str_of(b.image_url) else {
                            continue;
                        };
                        w.lit(sep);
                        match url
                            .strip_prefix("data:")
                            .and_then(|r| r.split_once(";base64,"))
                        {
                            Some((mime, data)) => {
                                w.lit("{\"data\":")
                                    .str(data)
                                    .lit(",\"mimeType\":")
                                    .str(mime)
                                    .lit(",\"type\":\"image\"}");
                            }
                            None => {
                                w.lit("{\"text\":")
                                    .str(&format!("[image: {url}]"))
                                    .lit(",\"type\":\"text\"}");
                            }
                        }
                    }
                    _ => continue,
                }
                first = false;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The texts of a content value joined by "\n" (a `compacted` replacement history item).
fn texts_joined(content: Option<&Value>) -> String {
    let mut o = String::new();
    let mut add = |t: &str| {
        if !o.is_empty() {
            o.push('\n');
        }
        o.push_str(t);
    };
    match content {
        Some(Value::String(t)) => add(t),
        Some(Value::Array(a)) => {
            for b in a {
                if matches!(
                    s(b.get("type")),
                    Some("input_text" | "output_text" | "text" | "refusal")
                ) {
                    add(s(b.get("text"))
                        .or_else(|| s(b.get("refusal")))
                        .unwrap_or(""));
                }
            }
        }
        _ => {}
    }
    o
}

/// A tool output as a JSON string: a string as it is; an object's `content` (followed
/// through nested objects); an array's texts joined by "\n"; an object without `content`
/// as its JSON text; null or absent: empty; another value as its JSON text.
fn output_text(w: &mut W<'_>, mut v: Option<&RawValue>) -> Res<()> {
    loop {
        match raw::kind(v) {
            b'"' => {
                w.tok_or_empty(v);
            }
            b'{' => {
                let o: OutputObj = raw::object(v)?;
                match raw::kind(o.content) {
                    0 => {
                        let val: Value = serde_json::from_str(v.expect("present").get())?;
                        w.str(&val.to_string());
                    }
                    _ => {
                        v = o.content;
                        continue;
                    }
                }
            }
            b'[' => {
                let mut t = String::new();
                for (i, b) in cx_blocks(v)?
                    .iter()
                    .filter_map(|b| raw::str_of(b.text))
                    .enumerate()
                {
                    if i > 0 {
                        t.push('\n');
                    }
                    t.push_str(&b);
                }
                w.str(&t);
            }
            0 | b'n' => {
                w.lit("\"\"");
            }
            _ => {
                let val: Value = serde_json::from_str(v.expect("present").get())?;
                w.str(&val.to_string());
            }
        }
        return Ok(());
    }
}

struct Made {
    /// the entry's type: Pi's, or a restored entry's own (one Pi 1.6 does not know)
    ty: Cow<'static>,
    fields: Vec<(&'static str, Value)>,
    /// a message entry's `message` object, written
    body: Option<Vec<u8>>,
    extra: Option<Map<String, Value>>,
    /// an id the entry keeps (a restored Pi entry's)
    keep_id: Option<String>,
    /// a restored Pi entry's timestamp
    ts: Option<String>,
}

fn made(ty: &'static str, fields: Vec<(&'static str, Value)>) -> Made {
    Made {
        ty: Cow::Borrowed(ty),
        fields,
        body: None,
        extra: None,
        keep_id: None,
        ts: None,
    }
}

fn custom(k: String) -> Made {
    made("custom", vec![("customType", Value::String(k))])
}

struct Cx {
    model: String,
    /// tool names by a keyed hash of the call id (verified: none; a 2^-64 collision names the
    /// wrong tool) into `tools`
    names: HashMap<u64, u32>,
    tools: Vec<String>,
    keys: std::collections::hash_map::RandomState,
    /// pass 1's decisions still ahead (in line order), the next one read
    usage: Receiver<Vec<Decision>>,
    /// the batch being read
    batch: std::vec::IntoIter<Decision>,
    next_usage: Option<Decision>,
}

impl Cx {
    /// The usage counts of the assistant item on line `n`, if a `token_count` event names it.
    /// Waits for pass 1 to decide line `n` (or to pass it, or to end); asked in line order.
    fn usage_at(&mut self, n: u32) -> Option<Counts> {
        loop {
            if self.next_usage.is_none() {
                match self.batch.next() {
                    Some(d) => self.next_usage = Some(d),
                    None => {
                        self.batch = self.usage.recv().ok()?.into_iter();
                        continue;
                    }
                }
            }
            match self.next_usage {
                Some((l, _)) if l < n => self.next_usage = None,
                Some((l, u)) if l == n => {
                    self.next_usage = None;
                    return u;
                }
                _ => return None,
            }
        }
    }
    fn set_name(&mut self, call: &str, name: &str) {
        use std::hash::BuildHasher;
        let k = match self.tools.iter().position(|t| t == name) {
            Some(k) => k,
            None if self.tools.len() < 4096 => {
                self.tools.push(name.to_string());
                self.tools.len() - 1
            }
            None => return,
        };
        self.names.insert(self.keys.hash_one(call), k as u32);
    }
    fn name(&self, call: &str) -> String {
        use std::hash::BuildHasher;
        self.names
            .get(&self.keys.hash_one(call))
            .map(|&k| self.tools[k as usize].clone())
            .unwrap_or_default()
    }
}

fn message_made(body: Vec<u8>) -> Made {
    Made {
        ty: Cow::Borrowed("message"),
        fields: vec![],
        body: Some(body),
        extra: None,
        keep_id: None,
        ts: None,
    }
}

/// An assistant message of the blocks `blocks` writes (`calls`: it holds a tool call).
fn assistant(
    n: u32,
    ts: i64,
    cx: &mut Cx,
    calls: bool,
    blocks: impl FnOnce(&mut W<'_>) -> Res<()>,
) -> Res<Made> {
    let mut body = Vec::with_capacity(512);
    let mut w = W(&mut body);
    w.lit("{\"api\":\"openai-responses\",\"content\":[");
    blocks(&mut w)?;
    w.lit("],\"model\":")
        .str(&cx.model)
        .lit(",\"provider\":\"openai\",\"role\":\"assistant\",\"stopReason\":")
        .lit(if calls { "\"toolUse\"" } else { "\"stop\"" })
        .lit(",\"timestamp\":")
        .int(ts)
        .lit(",\"usage\":");
    let c = cx.usage_at(n).unwrap_or([0, 0, 0, 0, u64::MAX]);
    let [input, cached, output, total, reasoning] = c;
    raw::usage(
        &mut w,
        input.saturating_sub(cached),
        output,
        cached,
        0,
        total,
        (reasoning != u64::MAX).then_some(reasoning),
    );
    w.lit("}");
    Ok(message_made(body))
}

/// A function call's `arguments` as Pi arguments: a JSON object text -> that object; an
/// object -> itself; null or absent -> `{}`; anything else -> `{"input": it}`.
fn arguments(w: &mut W<'_>, a: Option<&RawValue>) -> Res<()> {
    match raw::kind(a) {
        b'"' => {
            let text = raw::str_of(a).expect("a string");
            let obj = serde_json::from_str::<&RawValue>(&text)
                .ok()
                .filter(|r| r.get().starts_with('{'))
                .filter(|_| {
                    !raw::may_have_surrogate(text.as_bytes())
                        || serde_json::from_str::<Value>(&text).is_ok()
                });
            match obj {
                Some(r) => {
                    w.raw(r);
                }
                None => {
                    w.lit("{\"input\":").tok_or_empty(a).lit("}");
                }
            }
        }
        b'{' => {
            w.raw(a.expect("present"));
        }
        0 | b'n' => {
            w.lit("{}");
        }
        _ => {
            w.lit("{\"input\":").raw(a.expect("present")).lit("}");
        }
    }
    Ok(())
}

fn item(p: &Item<'_>, n: u32, ts: i64, cx: &mut Cx) -> Res<Vec<Made>> {
    let pty = raw::str_of(p.ty);
    let pty = pty.as_deref().unwrap_or("");
    let role = raw::str_of(p.role);
    Ok(match (pty, role.as_deref()) {
        ("message", Some("user")) => {
            let mut body = Vec::with_capacity(256);
            let mut w = W(&mut body);
            w.lit("{\"content\":[");
            text_blocks(&mut w, p.content, true)?;
            w.lit("],\"role\":\"user\",\"timestamp\":").int(ts).lit("}");
            vec![message_made(body)]
        }
        ("message", Some("assistant")) => vec![assistant(n, ts, cx, false, |w| {
            text_blocks(w, p.content, false)
        })?],
        ("reasoning", _) => {
            let enc = raw::str_tok(p.encrypted_content);
            vec![assistant(n, ts, cx, false, |w| {
                let mut k = 0;
                for e in raw::elements(p.summary)? {
                    let b: CxBlock<'_> = raw::object(Some(e))?;
                    if let Some(t) = raw::str_tok(b.text) {
                        w.lit(if k > 0 { "," } else { "" })
                            .lit("{\"thinking\":")
                            .lit(t);
                        if let (0, Some(e)) = (k, enc) {
                            w.lit(",\"thinkingSignature\":").lit(e);
                        }
                        w.lit(",\"type\":\"thinking\"}");
                        k += 1;
                    }
                }
                if k == 0 {
                    match enc {
                        Some(e) => w
                            .lit("{\"redacted\":true,\"thinking\":\"\",\"thinkingSignature\":")
                            .lit(e)
                            .lit(",\"type\":\"thinking\"}"),
                        None => w.lit("{\"thinking\":\"\",\"type\":\"thinking\"}"),
                    };
                }
                Ok(())
            })?]
        }
        ("function_call" | "custom_tool_call" | "local_shell_call" | "web_search_call", _) => {
            let id = raw::str_of(p.call_id)
                .or_else(|| raw::str_of(p.id))
                .map_or_else(|| format!("call-{n}"), |c| c.into_owned());
            let name = match pty {
                "function_call" | "custom_tool_call" => raw::str_of(p.name)
                    .map(|c| c.into_owned())
                    .unwrap_or_default(),
                "local_shell_call" => "local_shell".into(),
                _ => "web_search".into(),
            };
            cx.set_name(&id, &name);
            vec![assistant(n, ts, cx, true, |w| {
                w.lit("{\"arguments\":");
                match pty {
                    "function_call" => arguments(w, p.arguments)?,
                    "custom_tool_call" => {
                        w.lit("{\"input\":");
                        match p.input {
                            Some(i) => w.raw(i),
                            None => w.lit("null"),
                        };
                        w.lit("}");
                    }
                    _ => {
                        match (raw::kind(p.action), p.action) {
                            (b'{', Some(a)) => w.raw(a),
                            _ => w.lit("{}"),
                        };
                    }
                }
                w.lit(",\"id\":")
                    .str(&id)
                    .lit(",\"name\":")
                    .str(&name)
                    .lit(",\"type\":\"toolCall\"}");
                Ok(())
            })?]
        }
        ("function_call_output" | "custom_tool_call_output", _) => {
            let id = raw::str_of(p.call_id)
                .map(|c| c.into_owned())
                .unwrap_or_default();
            let mut body = Vec::with_capacity(256);
            let mut w = W(&mut body);
            w.lit("{\"content\":[{\"text\":");
            output_text(&mut w, p.output)?;
            w.lit(",\"type\":\"text\"}],\"isError\":false,\"role\":\"toolResult\",\"timestamp\":")
                .int(ts)
                .lit(",\"toolCallId\":")
                .str(&id)
                .lit(",\"toolName\":")
                .str(&cx.name(&id))
                .lit("}");
            vec![message_made(body)]
        }
        ("message", r) => vec![custom(format!("codex:message:{}", r.unwrap_or("unknown")))],
        (t, _) => vec![custom(format!(
            "codex:response_item:{}",
            if t.is_empty() { "untyped" } else { t }
        ))],
    })
}

/// The entries of one line (after the header), read through borrowed fields, and the source
/// record's id; `last_ts` follows the line's timestamp. Errors: not an object, or a field
/// given twice (the caller reads the line whole).
fn entries(
    line: &[u8],
    n: u32,
    last_ts: &mut String,
    cx: &mut Cx,
) -> Res<(Vec<Made>, Option<String>)> {
    // one pass over the line, its payload read as it goes (a `turn_context`, which reads its
    // payload as another struct, and a line this read refuses: the two-step read below)
    if let Ok(h) = serde_json::from_slice::<HeadN<'_>>(line) {
        if raw::str_of(h.ty).as_deref() != Some("turn_context") {
            let has_payload = h.payload.is_some();
            let (p, object) = match h.payload {
                Some(raw::Nested::Object(p)) => (p, true),
                _ => (Item::default(), false),
            };
            let head = Head {
                ty: h.ty,
                timestamp: h.timestamp,
                payload: None,
                pi: h.pi,
                pi_part: h.pi_part,
                record_type: h.record_type,
                call_id: h.call_id,
            };
            return entries_of(line, &head, p, object, has_payload, n, last_ts, cx);
        }
    }
    let h: Head<'_> = serde_json::from_slice(line)?;
    let p: Item<'_> = raw::object(h.payload)?;
    let object = raw::kind(h.payload) == b'{';
    entries_of(line, &h, p, object, h.payload.is_some(), n, last_ts, cx)
}

/// `entries` once the line is read: `h` its fields, `p` its payload's (default when it is not
/// an object), `object` whether it is one, `has_payload` whether the line has one.
#[allow(clippy::too_many_arguments)]
fn entries_of(
    line: &[u8],
    h: &Head<'_>,
    p: Item<'_>,
    object: bool,
    has_payload: bool,
    n: u32,
    last_ts: &mut String,
    cx: &mut Cx,
) -> Res<(Vec<Made>, Option<String>)> {
    let mut own_ms = None;
    if let Some(t) = raw::str_of(h.timestamp) {
        let ms = super::ms_of(&t);
        if ms != 0 || t == "1970-01-01T00:00:00.000Z" {
            last_ts.clear();
            last_ts.push_str(&t);
            own_ms = Some(ms);
        }
    }
    let ts = own_ms.unwrap_or_else(|| ms_of(last_ts));
    let sid = raw::str_of(p.call_id)
        .or_else(|| raw::str_of(p.id))
        .or_else(|| raw::str_of(h.call_id))
        .map(|c| c.into_owned());
    let pi: PiHead<'_> = raw::object(h.pi)?;
    if raw::str_of(pi.ty).is_some_and(|t| t != "session") {
        let m: Map<String, Value> = serde_json::from_slice(line)?;
        return Ok((make(&m), sid));
    }
    if h.pi_part.is_some() {
        return Ok((vec![custom("codex:pi-part".into())], sid));
    }
    let ty = raw::str_of(h.ty);
    let made = match (ty.as_deref(), object) {
        (Some("response_item"), true) => item(&p, n, ts, cx)?,
        (Some("turn_context"), true) => {
            let t: TurnContext<'_> = raw::object(h.payload)?;
            let mut v = Vec::new();
            if let Some(model) = raw::str_of(t.model) {
                cx.model = model.into_owned();
                v.push(made(
                    "model_change",
                    vec![("provider", json!("openai")), ("modelId", json!(cx.model))],
                ));
            }
            let effort = raw::str_of(t.effort).or_else(|| raw::str_of(t.reasoning_effort));
            if let Some(e) = effort {
                let level = match &*e {
                    "none" => "off",
                    other => other,
                };
                v.push(made(
                    "thinking_level_change",
                    vec![("thinkingLevel", json!(level))],
                ));
            }
            if v.is_empty() {
                v.push(custom("codex:turn_context".into()));
            }
            v
        }
        (Some("compacted"), true) => {
            let m: Map<String, Value> = serde_json::from_slice(line)?;
            make(&m)
        }
        (Some("event_msg"), true) => {
            let t = raw::str_of(p.ty);
            vec![custom(format!(
                "codex:event_msg:{}",
                t.as_deref().unwrap_or("untyped")
            ))]
        }
        (
            Some(
                "message"
                | "reasoning"
                | "function_call"
                | "function_call_output"
                | "custom_tool_call"
                | "custom_tool_call_output"
                | "local_shell_call"
                | "web_search_call",
            ),
            _,
        ) if !has_payload => {
            // the first layout: items at top level
            let it: Item<'_> = serde_json::from_slice(line)?;
            item(&it, n, ts, cx)?
        }
        (Some(t), _) => vec![custom(format!("codex:{t}"))],
        (None, _) if h.record_type.is_some() => vec![custom("codex:state".into())],
        (None, _) => vec![custom("codex:untyped".into())],
    };
    Ok((made, sid))
}

/// The entries of a line read whole: a restored Pi entry, or a `compacted` record.
fn make(m: &Map<String, Value>) -> Vec<Made> {
    if let Some(Value::Object(e)) = m.get("piEntry") {
        if let Some(t) = s(e.get("type")).filter(|t| *t != "session") {
            let mut extra = Map::new();
            for (k, v) in e {
                if !matches!(
                    k.as_str(),
                    "type" | "id" | "parentId" | "timestamp" | "source"
                ) {
                    extra.insert(k.clone(), v.clone());
                }
            }
            let ty = super::pi_entry_type(t);
            return vec![Made {
                ty,
                fields: vec![],
                body: None,
                extra: Some(extra),
                keep_id: s(e.get("id")).map(str::to_string),
                ts: s(e.get("timestamp")).map(str::to_string),
            }];
        }
    }
    let Some(Value::Object(p)) = m.get("payload") else {
        return vec![custom("codex:compacted".into())];
    };
    let mut summary = s(p.get("message")).unwrap_or("").to_string();
    if summary.is_empty() {
        if let Some(Value::Array(h)) = p.get("replacement_history") {
            let parts: Vec<String> = h
                .iter()
                .map(|i| texts_joined(i.get("content")))
                .filter(|t| !t.is_empty())
                .collect();
            summary = parts.join("\n\n");
        }
    }
    // firstKeptEntryId is filled with the entry's own id (retain-none) by the writer
    vec![made(
        "compaction",
        vec![("summary", json!(summary)), ("tokensBefore", json!(0))],
    )]
}

/// A rollout of id `id` in the folder `dir` (its name `<id>.jsonl` or ending `-<id>.jsonl`),
/// never `src` itself; the first in name order.
fn rollout_in(dir: &Path, id: &str, src: &Path) -> Option<PathBuf> {
    let want = format!("{id}.jsonl");
    let tail = format!("-{want}");
    let rd = std::fs::read_dir(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    })
    .ok()?;
    let mut found: Option<PathBuf> = None;
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if (name == want || name.ends_with(&tail)) && e.path() != src {
            let p = e.path();
            if found.as_ref().is_none_or(|f| p < *f) {
                found = Some(p);
            }
        }
    }
    found
}

/// The sub-folders of `dir` whose names are all digits, in name order.
fn digit_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            !n.is_empty()
                && n.bytes().all(|c| c.is_ascii_digit())
                && e.file_type().is_ok_and(|t| t.is_dir())
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// The rollout a fork names (`forked_from_id`): beside `src` first; then, when `src` is in
/// Codex's `sessions/YYYY/MM/DD/` layout, in any day folder of that `sessions` folder (a fork
/// is often made on a later day than its parent), the newest day first. No symbolic link
/// between folders is followed.
pub(crate) fn find_parent(src: &Path, id: &str) -> Option<PathBuf> {
    if id.is_empty() || id.contains('/') || id.contains('\0') {
        return None;
    }
    let dir = src.parent()?;
    if let Some(p) = rollout_in(dir, id, src) {
        return Some(p);
    }
    let is_num = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
    };
    let (dd, mm) = (Some(dir), dir.parent());
    let yyyy = mm.and_then(Path::parent);
    if !(is_num(dd) && is_num(mm) && is_num(yyyy)) {
        return None;
    }
    let root = yyyy?.parent()?;
    for y in digit_dirs(root).into_iter().rev() {
        for m in digit_dirs(&y).into_iter().rev() {
            for d in digit_dirs(&m).into_iter().rev() {
                if d == dir {
                    continue;
                }
                if let Some(p) = rollout_in(&d, id, src) {
                    return Some(p);
                }
            }
        }
    }
    None
}

/// Where the Pi sessions of a store go: `(source folder, output folder)`.
///
/// A parent rollout below the source folder is named by its Pi output at the same path below
/// the output folder.
pub type StoreDirs<'a> = Option<(&'a Path, &'a Path)>;

/// Converts one Codex rollout. `data`: its bytes when held in memory; then no parent rollout is
/// looked for beside it.
pub fn convert(
    src: &Path,
    data: Option<&[u8]>,
    out: &Path,
    store: StoreDirs<'_>,
    outs: &mut super::out::Outputs,
    rep: &mut Report,
) -> Result<(), ConvertError> {
    // pass 1 on a thread of its own, pass 2 here, waiting for its decisions as it needs them
    let (tx, rx) = sync_channel(DECISION_DEPTH);
    std::thread::scope(|sc| {
        let pass1 = std::thread::Builder::new()
            .name("sessiontree-codex-pass1".into())
            .spawn_scoped(sc, move || usages(src, data, &tx))
            .map_err(io_err(src))?;
        let cx = Cx {
            model: String::new(),
            names: HashMap::new(),
            tools: Vec::new(),
            keys: Default::default(),
            usage: rx,
            batch: Vec::new().into_iter(),
            next_usage: None,
        };
        let written = write_pi(src, data, out, store, outs, rep, cx);
        let read = pass1.join().unwrap_or_else(|_| {
            Err(ConvertError::Io(
                src.to_path_buf(),
                std::io::Error::other("pass 1 panicked"),
            ))
        });
        read.and(written)
    })
}

/// Pass 2: writes the Pi session, `cx` receiving pass 1's usage decisions.
fn write_pi(
    src: &Path,
    data: Option<&[u8]>,
    out: &Path,
    store: StoreDirs<'_>,
    outs: &mut super::out::Outputs,
    rep: &mut Report,
    mut cx: Cx,
) -> Result<(), ConvertError> {
    let slot = outs.open(out)?;
    let name = src
        .file_name()
        .map(|x| x.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = src
        .file_stem()
        .map(|x| x.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut lines = open_src(src, data)?;
    let mut n = 0u32;
    let mut prev: Option<String> = None;
    let mut used: HashSet<String> = HashSet::new();
    let mut last_ts = String::from("1970-01-01T00:00:00.000Z");
    let mut buf = Vec::with_capacity(1 << 16);
    let mut header_done = false;
    let mut migration: Option<super::legacy::Migration> = None;
    // under a migration: the ids of the entries in their own version, by line
    let mut ids_at: HashMap<u32, String> = HashMap::new();
    while let Some((line, eol)) = lines.next_line().map_err(io_err(src))? {
        buf.clear();
        if !header_done {
            header_done = true;
            // a rollout written by `from_pi` from a Pi session: the Pi header, as it was (one
            // older than version 3 over lines of Codex's own: at version 3, `super::legacy`)
            if let Some(h) = eol
                .then(|| super::back::header_carried(line, Format::Codex))
                .flatten()
            {
                if let Ok(m) = serde_json::from_slice::<Map<String, Value>>(h) {
                    if let Some(t) = s(m.get("timestamp")) {
                        last_ts = t.to_string();
                    }
                }
                let (h, m) = super::legacy::carried_header(h, line, src, data, Format::Codex, b"")?;
                migration = m;
                outs.write(slot, &h)?;
                rep.lines += 1;
                n += 1;
                continue;
            }
            let parsed = if super::is_blank(line) {
                super::Parsed::Bad
            } else {
                super::parse_line(line)
            };
            if let super::Parsed::Object(m) = &parsed {
                let meta = match (s(m.get("type")), m.get("payload")) {
                    (Some("session_meta"), Some(Value::Object(p))) => Some(p),
                    (None, _) if m.contains_key("id") && m.contains_key("timestamp") => Some(m),
                    _ => None,
                };
                if let Some(p) = meta {
                    let id = s(p.get("id"))
                        .or_else(|| s(p.get("session_id")))
                        .unwrap_or(&stem)
                        .to_string();
                    let ts = s(p.get("timestamp"))
                        .or_else(|| s(m.get("timestamp")))
                        .unwrap_or(&last_ts)
                        .to_string();
                    last_ts = ts.clone();
                    if let Some(model) = s(p.get("model")) {
                        cx.model = model.to_string();
                    }
                    let cwd = s(p.get("cwd")).unwrap_or("");
                    let mut parent = None;
                    if let Some(f) = s(p.get("forked_from_id")) {
                        match data.is_none().then(|| find_parent(src, f)).flatten() {
                            Some(pp) => {
                                // in a store converted whole: the parent's Pi output
                                let shown = store
                                    .and_then(|(from, to)| {
                                        let abs = std::path::absolute(&pp).ok()?;
                                        abs.strip_prefix(from).ok().map(|rel| to.join(rel))
                                    })
                                    .unwrap_or(pp);
                                parent = Some(shown.display().to_string())
                            }
                            None => rep.not_carried.push(format!(
                                "forked_from_id {f:?}: no rollout of that id beside the source or in the store's day folders, so no parentSession"
                            )),
                        }
                    }
                    let mut sf = Vec::new();
                    sf.extend_from_slice(b"{\"format\":\"codex\",\"file\":");
                    push_str(&mut sf, &name);
                    sf.extend_from_slice(b",\"id\":");
                    push_str(&mut sf, &id);
                    sf.extend_from_slice(b",\"n\":0,\"line\":");
                    sf.extend_from_slice(super::trim_json(line));
                    if !eol {
                        sf.extend_from_slice(b",\"eol\":false");
                    }
                    sf.push(b'}');
                    outs.write(slot, &super::header(&id, &ts, cwd, parent.as_deref(), &sf))?;
                    rep.lines += 1;
                    n += 1;
                    continue;
                }
            }
            let mut sf = Vec::new();
            sf.extend_from_slice(b"{\"format\":\"codex\",\"file\":");
            push_str(&mut sf, &name);
            sf.push(b'}');
            rep.problem(
                src,
                1,
                "no_session_meta",
                "the first line is not a session_meta: a header was made".into(),
            );
            outs.write(slot, &super::header(&stem, &last_ts, "", None, &sf))?;
        }
        let blank = super::is_blank(line);
        // a lone escaped surrogate is not JSON text a Pi file can hold: read it whole first
        let whole_ok = blank
            || !raw::may_have_surrogate(line)
            || serde_json::from_slice::<Value>(line).is_ok();
        let typed = if blank || !whole_ok {
            None
        } else {
            entries(line, n, &mut last_ts, &mut cx).ok()
        };
        let (made, carried, source_id) = match typed {
            Some((made, sid)) => (made, Carried::Json(line, eol), sid),
            None => match if blank {
                super::Parsed::Bad
            } else {
                super::parse_line(line)
            } {
                super::Parsed::Object(m) => {
                    // a field given twice: read as the whole-line parse reads it (the last
                    // one), the line itself still carried as it is
                    let text = serde_json::to_vec(&m).expect("a map serializes");
                    let (made, sid) = entries(&text, n, &mut last_ts, &mut cx)
                        .unwrap_or_else(|_| (vec![custom("codex:unparsed".into())], None));
                    (made, Carried::Json(line, eol), sid)
                }
                super::Parsed::Other => {
                    rep.problem(
                        src,
                        n as u64 + 1,
                        "not_an_object",
                        "a JSON value that is not an object: carried in a custom entry".into(),
                    );
                    (
                        vec![custom("codex:unparsed".into())],
                        Carried::Json(line, eol),
                        None,
                    )
                }
                super::Parsed::Bad => {
                    if !blank {
                        let kind = if eol {
                            "malformed_json"
                        } else {
                            "torn_last_line"
                        };
                        rep.problem(
                            src,
                            n as u64 + 1,
                            kind,
                            "not JSON: carried as raw text in a custom entry".into(),
                        );
                    }
                    (
                        vec![custom("codex:unparsed".into())],
                        Carried::Raw(line, eol),
                        None,
                    )
                }
            },
        };
        let mut made = made;
        let restored = migration.as_ref().filter(|m| m.carries(n));
        if let Some(m) = restored {
            // an entry in its own version under the header now at version 3; an entry named
            // before its line is written gets the id that line's entry will get (below)
            if let Some(e) = made.last_mut() {
                if let Some(x) = e.extra.as_mut() {
                    m.apply(&e.ty, x, |at| match ids_at.get(&at) {
                        Some(id) => id.clone(),
                        None => m
                            .carried
                            .iter()
                            .find(|c| c.0 == at)
                            .and_then(|c| c.1.clone())
                            .filter(|i| !i.starts_with("cx-"))
                            .unwrap_or_else(|| format!("cx-{at}")),
                    });
                }
            }
        }
        let k = made.len();
        for (j, e) in made.into_iter().enumerate() {
            // generated ids (cx-<n>[-<j>]) never repeat; a kept id (a restored Pi entry's) is
            // used once, and never one that looks generated
            let mut id = match &e.keep_id {
                Some(i) if !used.contains(i) && !i.starts_with("cx-") => i.clone(),
                _ => format!(
                    "cx-{n}{}",
                    if j + 1 == k {
                        String::new()
                    } else {
                        format!("-{j}")
                    }
                ),
            };
            while used.contains(&id) {
                id.push('x');
            }
            if e.keep_id.is_some() {
                used.insert(id.clone());
            }
            if restored.is_some() && j + 1 == k {
                ids_at.insert(n, id.clone());
            }
            let ts = e.ts.clone().unwrap_or_else(|| last_ts.clone());
            let mut w = EntryOut { buf: &mut buf };
            w.begin(&e.ty, &id, prev.as_deref(), &ts);
            for (key, v) in &e.fields {
                w.field(key, v);
            }
            if let Some(b) = &e.body {
                w.field_raw("message", b);
            }
            if e.ty == "compaction" && e.extra.is_none() {
                w.field_str("firstKeptEntryId", &id);
            }
            if let Some(x) = &e.extra {
                for (key, v) in x {
                    w.field(key, v);
                }
            }
            w.source(
                Format::Codex,
                source_id.as_deref(),
                n as u64,
                if j + 1 == k {
                    carried
                } else {
                    Carried::Part(j as u32)
                },
            );
            rep.written += 1;
            match &*e.ty {
                "message" => rep.messages += 1,
                "compaction" => rep.compactions += 1,
                "custom" => rep.custom += 1,
                _ => {}
            }
            prev = Some(id);
        }
        outs.write(slot, &buf)?;
        rep.lines += 1;
        n += 1;
    }
    if !header_done {
        return Err(ConvertError::Unrecognised(
            src.to_path_buf(),
            "empty: no session_meta line".into(),
        ));
    }
    Ok(())
}
