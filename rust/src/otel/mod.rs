//! Session trees as OpenTelemetry GenAI traces, written as OTLP/JSON lines (`sessiontree.otel`).
//!
//! One trace per session, as `docs/otel.md` maps it (GenAI semantic conventions 1.41.0):
//!
//! * the trace id is the first 16 bytes of SHA-256 over `"trace"` and the session id; a span's
//!   id the first 8 bytes of SHA-256 over `"span"`, the session id and the entry id (and
//!   `"tool"` and the call id for a tool call, `"branch"` for a branch), the parts joined by NUL:
//!   a re-export gives the same ids ([`trace_id_of`], [`span_id_of`]);
//! * a root `invoke_agent pi` span, an `invoke_agent pi` span per user message (a turn);
//! * `chat {model}` per assistant message (usage, finish reasons, cost under
//!   `sessiontree.cost.*`), `execute_tool {name}` per tool call (child of its chat span, ending at
//!   its result) and per `bashExecution` message; `compaction` and `branch_summary` spans;
//! * labels, model and thinking-level changes (and the other entries without a span) as events
//!   of the span they fall in;
//! * entries off the active path under a `branch {fromId}` span linked to the fork point's span;
//!   `sessiontree.active_path` on every span;
//! * content (`gen_ai.input.messages`, `gen_ai.output.messages`, tool arguments and results)
//!   only when asked, scrubbed by the scrub rules first when asked.
//!
//! It streams: [`read_batch`] reads a batch of entries from the store (ids, types, parents,
//! lines, the lookups by id the mapping needs); [`Mapper::map_batch`] maps it without the store
//! (the binding releases the GIL there) and hands back the finished request lines. Kept per
//! entry: its group, time and two flags (13 bytes; its parent too in the content modes): its span
//! id is derived again where a link needs it; per user turn and abandoned branch a small record
//! (about 60 bytes, its id in one shared buffer) until [`Mapper::finish_chunk`]. Bad input (no timestamps,
//! unknown types, usage that is not a number) still gives a valid trace; each problem is
//! recorded ([`Mapper::problems`], and as a `sessiontree.problem` event on the root span).

mod content;
mod out;

use crate::reads::ReadError;
use crate::store::Store;
use content::{input_message, parts, str_of, text_of};
pub use out::{hex, AttrValue, Attrs, J};
use out::{push_attrs, push_link, push_nanos, push_str};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::HashMap;

/// The GenAI semantic conventions implemented.
pub const SEMCONV_VERSION: &str = "1.41.0";
/// Spans per `ExportTraceServiceRequest` line.
pub const SPANS_PER_REQUEST: usize = 512;
/// Entries read per batch.
pub const BATCH: usize = 2048;
/// Turn and branch spans written per [`Mapper::finish_chunk`].
///
/// One request line's worth: what the call hands back at once.
pub const FINISH: usize = 512;
/// Events kept on one span; more are counted in `droppedEventsCount`.
pub const MAX_EVENTS: usize = 256;
/// Problems kept per session; more are counted.
pub const MAX_PROBLEMS: usize = 200;
/// Characters of one content attribute value (longer ones are cut, with a problem recorded).
pub const MAX_CONTENT_CHARS: usize = 1 << 20;

const INTERNAL: u8 = 1;
const CLIENT: u8 = 3;
const ROOT: i64 = -1;
const NO_PARENT: u32 = u32::MAX;
/// [`Mapper`]'s `group` of an entry not mapped yet, and of one under the root.
const G_UNSEEN: u32 = u32::MAX;
const G_ROOT: u32 = u32::MAX - 1;
/// [`Mapper`]'s `flags` of an entry: on the active path; it has a span of its own (a chat, a
/// bash execution, a summary, a turn), its id from its entry id; else its span is its group's.
const ACTIVE: u8 = 1;
const OWN_SPAN: u8 = 2;

/// What content the spans carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    None,
    Scrubbed,
    Full,
}

impl Content {
    pub fn parse(s: &str) -> Option<Content> {
        match s {
            "none" => Some(Content::None),
            "scrubbed" => Some(Content::Scrubbed),
            "full" => Some(Content::Full),
            _ => None,
        }
    }
}

fn sha_id<const N: usize>(parts: &[&str]) -> [u8; N] {
    let mut h = Sha256::new();
    for (k, p) in parts.iter().enumerate() {
        if k > 0 {
            h.update([0u8]);
        }
        h.update(p.as_bytes());
    }
    let d = h.finalize();
    let mut id = [0u8; N];
    id.copy_from_slice(&d[..N]);
    if id.iter().all(|&b| b == 0) {
        id[N - 1] = 1; // an all-zero id is invalid in OTLP
    }
    id
}

/// The trace id (32 hex digits) of a session: SHA-256 over `"trace"` and the session id.
pub fn trace_id_of(session_id: &str) -> String {
    hex(&sha_id::<16>(&["trace", session_id]))
}

/// A span id (8 bytes): SHA-256 over `"span"`, the session id and `parts`, joined by NUL.
pub fn span_id_of(session_id: &str, parts: &[&str]) -> [u8; 8] {
    let mut all = Vec::with_capacity(parts.len() + 2);
    all.push("span");
    all.push(session_id);
    all.extend_from_slice(parts);
    sha_id::<8>(&all)
}

/// A session line as a JSON value (`Null` when it is not JSON), read as Pi's loader reads it. Bytes
/// that are not UTF-8 and lone UTF-16 surrogates (`"\\ud800"`, which `JSON.parse` accepts and
/// serde_json refuses) become U+FFFD, as the index keeps them. One linear pass, only for a line
/// serde_json refused.
pub fn parse_value(line: &[u8]) -> Value {
    if let Ok(v) = serde_json::from_slice(line) {
        return v;
    }
    let text = String::from_utf8_lossy(line);
    let mut b = text.into_owned().into_bytes();
    let hex = |s: &[u8]| -> Option<u32> {
        let s = std::str::from_utf8(s).ok()?;
        u32::from_str_radix(s, 16).ok()
    };
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b[i + 1] != b'u' || i + 6 > b.len() {
            i += 2;
            continue;
        }
        let Some(u) = hex(&b[i + 2..i + 6]) else {
            i += 6;
            continue;
        };
        if (0xd800..0xdc00).contains(&u) {
            let low = (i + 12 <= b.len() && b[i + 6] == b'\\' && b[i + 7] == b'u')
                .then(|| hex(&b[i + 8..i + 12]))
                .flatten();
            if low.is_some_and(|l| (0xdc00..0xe000).contains(&l)) {
                i += 12;
                continue;
            }
            b[i + 2..i + 6].copy_from_slice(b"fffd");
        } else if (0xdc00..0xe000).contains(&u) {
            b[i + 2..i + 6].copy_from_slice(b"fffd");
        }
        i += 6;
    }
    serde_json::from_slice(&b).unwrap_or(Value::Null)
}

/// The session-level facts the mapping needs (from the header as Pi holds it after migration).
#[derive(Clone, Debug, Default)]
pub struct Meta {
    /// the header's `id` when a non-empty string
    pub session_id: Option<String>,
    /// the trace's name when there is no session id (the file name)
    pub fallback_id: String,
    pub cwd: Option<String>,
    pub parent_session: Option<String>,
    /// the header's `timestamp` when a string
    pub timestamp: Option<String>,
    /// `Session.session_name`
    pub session_name: Option<String>,
    /// where the session was read (`sessiontree.session.path`)
    pub path: Option<String>,
    /// the package version (the scope's version)
    pub version: String,
}

/// One batch of entries as [`read_batch`] read them.
#[derive(Default)]
pub struct Batch {
    pub lo: usize,
    ids: Vec<Option<String>>,
    types: Vec<Option<String>>,
    parents: Vec<u32>,
    /// the id is also a later entry's (the by-id lookup names another position)
    repeated: Vec<bool>,
    /// the id of the parent, for the entries that start an abandoned branch
    fork_ids: Vec<Option<String>>,
    /// for those entries, the parent's own span id (used when it has one)
    fork_own: Vec<[u8; 8]>,
    /// for branch summaries: `Some(position)` of `fromId` by the by-id lookup
    from_pos: Vec<Option<u32>>,
    /// for those, the own span id of that entry (used when it has one)
    from_own: Vec<[u8; 8]>,
    raw: Vec<u8>,
    span: Vec<(usize, usize)>,
}

/// Where an entry's span sits: the entry id, its span-id parts, its parent span, its start and
/// time (epoch ms), and whether it is on the active branch.
#[derive(Clone, Copy)]
struct Site<'a> {
    eid: &'a str,
    cur: &'a [&'a str],
    own: [u8; 8],
    start: f64,
    ms: f64,
    active: bool,
}

/// A span waiting for its end: a turn or a branch (kept until the end), or a tool call (until
/// its result).
struct Pending {
    span: [u8; 8],
    parent_span: Option<[u8; 8]>,
    name: String,
    kind: u8,
    start: f64,
    end: f64,
    attrs: Attrs,
    links: Vec<u8>,
    events: Vec<u8>,
    n_events: usize,
    dropped: u64,
    active: bool,
}

/// A turn or a branch: its span is written at the end (what falls in it may come anywhere
/// later in the file). Kept small: 56 bytes (its id in [`Mapper`]'s `group_ids`, a branch's
/// fork point span in `forks`; its parent span is its parent group's).
struct Group {
    span: [u8; 8],
    start: f64,
    end: f64,
    /// events, and the input messages in content modes (most groups have neither)
    extra: Option<Box<Extra>>,
    /// the group it nests in (its index), or [`G_ROOT`]
    parent_group: u32,
    /// a turn: its user message's position; a branch: its first entry's
    pos: u32,
    /// a turn: the user message's id; a branch: `fromId` (the fork point's id, or `root`): the
    /// end of its bytes in `group_ids` (the previous group's end is their start)
    id_end: u32,
    turn: bool,
    active: bool,
}

/// The groups in the order they were made, in blocks of [`Groups::BLOCK`] (no doubling of one
/// large array as they grow: at most one block's room unused).
#[derive(Default)]
struct Groups {
    blocks: Vec<Vec<Group>>,
    len: usize,
}

impl Groups {
    const BLOCK: usize = 4096;

    fn push(&mut self, g: Group) {
        if self.blocks.last().is_none_or(|b| b.len() == Self::BLOCK) {
            self.blocks.push(Vec::with_capacity(Self::BLOCK));
        }
        if let Some(b) = self.blocks.last_mut() {
            b.push(g);
            self.len += 1;
        }
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl std::ops::Index<usize> for Groups {
    type Output = Group;
    fn index(&self, ix: usize) -> &Group {
        &self.blocks[ix / Self::BLOCK][ix % Self::BLOCK]
    }
}

impl std::ops::IndexMut<usize> for Groups {
    fn index_mut(&mut self, ix: usize) -> &mut Group {
        &mut self.blocks[ix / Self::BLOCK][ix % Self::BLOCK]
    }
}

#[derive(Default)]
struct Extra {
    events: Vec<u8>,
    n_events: usize,
    dropped: u64,
    input: Option<AttrValue>,
}

/// The state of one session's export.
pub struct Mapper {
    content: Content,
    sid: String,
    trace: String,
    root_span: [u8; 8],
    n: usize,
    dups: bool,
    parent: Vec<u32>,
    /// the group (turn or branch) each entry falls in: an index into `group_list`, [`G_ROOT`]
    /// or [`G_UNSEEN`]
    group: Vec<u32>,
    time: Vec<f64>,
    /// [`ACTIVE`], [`OWN_SPAN`]
    flags: Vec<u8>,
    /// the turns and branches in the order they were made (`group` holds indices into it)
    group_list: Groups,
    /// the groups' ids, one after the other (see [`Group::id_end`])
    group_ids: String,
    /// the branches' fork point spans (their links), by group index, in order
    forks: Vec<(u32, [u8; 8])>,
    /// tool call id -> (order made, pending span)
    tools: HashMap<String, (u64, Pending)>,
    tool_seq: u64,
    /// content modes: position -> the input message's JSON (empty: none)
    recent: HashMap<usize, Vec<u8>>,
    root_events: Vec<u8>,
    n_root_events: usize,
    root_dropped: u64,
    start_ms: f64,
    end_ms: f64,
    meta: Meta,
    resource: Vec<u8>,
    pending: Vec<u8>,
    n_pending: usize,
    out: Vec<u8>,
    /// spans and request lines written
    pub spans: u64,
    pub requests: u64,
    pub problems: Vec<String>,
    pub problems_dropped: u64,
    finishing: bool,
    scrubber: Option<crate::scrub::Scrubber>,
    /// the batch [`read_batch`] read last (its buffers reused)
    batch: Batch,
}

fn is_num(v: Option<&Value>) -> Option<f64> {
    match v {
        Some(Value::Number(n)) => n.as_f64().filter(|x| x.is_finite()),
        _ => None,
    }
}

/// Python's type name of a parsed JSON value (what a problem says a bad value is).
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// The integer of a JSON number, truncated toward zero; None out of the 64-bit range.
fn int_of(n: &serde_json::Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    if n.is_u64() {
        return None;
    }
    let x = n.as_f64()?;
    (x.is_finite() && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&x))
        .then_some(x as i64)
}

/// A JSON integer (not a float) within the 64-bit range.
fn exact_int(v: Option<&Value>) -> Option<i64> {
    match v {
        Some(Value::Number(n)) => n.as_i64(),
        _ => None,
    }
}

/// Python's `repr` of a string (what a problem shows of an unknown name).
fn py_repr(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut o = String::with_capacity(s.len() + 2);
    o.push(q);
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if c == q => {
                o.push('\\');
                o.push(c)
            }
            c if (c as u32) < 0x20 || (0x7f..=0xa0).contains(&(c as u32)) || c == '\u{ad}' => {
                o.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => o.push(c),
        }
    }
    o.push(q);
    o
}

fn finish_reason(stop: &str) -> &str {
    match stop {
        "stop" => "stop",
        "length" => "length",
        "toolUse" => "tool_call",
        "error" => "error",
        "aborted" => "aborted",
        other => other,
    }
}

const USAGE: [(&str, &str); 5] = [
    ("input", "gen_ai.usage.input_tokens"),
    ("output", "gen_ai.usage.output_tokens"),
    ("cacheRead", "gen_ai.usage.cache_read.input_tokens"),
    ("cacheWrite", "gen_ai.usage.cache_creation.input_tokens"),
    ("totalTokens", "sessiontree.usage.total_tokens"),
];
const COST: [(&str, &str); 5] = [
    ("input", "sessiontree.cost.input"),
    ("output", "sessiontree.cost.output"),
    ("cacheRead", "sessiontree.cost.cache_read"),
    ("cacheWrite", "sessiontree.cost.cache_write"),
    ("total", "sessiontree.cost.total"),
];

fn s(v: &str) -> AttrValue {
    AttrValue::Str(v.to_string())
}

impl Mapper {
    /// The export of a session of `n` entries. `active`: the positions on the leaf's branch (Err:
    /// why the active path could not be walked, recorded as a problem); `dups`: some entry ids
    /// repeat (`entry_count() != n`).
    pub fn new(
        meta: Meta,
        content: Content,
        n: usize,
        active: Result<Vec<u32>, String>,
        dups: bool,
    ) -> Mapper {
        let mut m = Mapper {
            content,
            sid: String::new(),
            trace: String::new(),
            root_span: [0; 8],
            n,
            dups,
            // the chain of input messages (content modes only)
            parent: if content == Content::None {
                Vec::new()
            } else {
                vec![NO_PARENT; n]
            },
            group: vec![G_UNSEEN; n],
            time: vec![f64::NAN; n],
            flags: vec![0; n],
            group_list: Groups::default(),
            group_ids: String::new(),
            forks: Vec::new(),
            tools: HashMap::new(),
            tool_seq: 0,
            recent: HashMap::new(),
            root_events: Vec::new(),
            n_root_events: 0,
            root_dropped: 0,
            start_ms: f64::NAN,
            end_ms: f64::NAN,
            meta,
            resource: Vec::new(),
            pending: Vec::new(),
            n_pending: 0,
            out: Vec::new(),
            spans: 0,
            requests: 0,
            problems: Vec::new(),
            problems_dropped: 0,
            finishing: false,
            scrubber: None,
            batch: Batch::default(),
        };
        let sid = match m.meta.session_id.clone().filter(|s| !s.is_empty()) {
            Some(s) => s,
            None => {
                m.problem(
                    "the header has no string session id: the trace id is derived from the file name"
                        .into(),
                );
                m.meta.fallback_id.clone()
            }
        };
        m.trace = trace_id_of(&sid);
        m.root_span = span_id_of(&sid, &[]);
        m.sid = sid;
        let head = m
            .meta
            .timestamp
            .as_deref()
            .map_or(f64::NAN, crate::jsdate::parse_iso);
        m.start_ms = if head.is_finite() { head } else { f64::NAN };
        m.end_ms = m.start_ms;
        match active {
            Ok(pos) => {
                for p in pos {
                    if let Some(a) = m.flags.get_mut(p as usize) {
                        *a |= ACTIVE;
                    }
                }
            }
            Err(why) => m.problem(format!("the active path could not be walked: {why}")),
        }
        let mut res = Attrs::default();
        res.set("service.name", s("sessiontree"));
        res.set("sessiontree.session.id", s(&m.sid));
        res.str("sessiontree.session.cwd", m.meta.cwd.as_deref());
        res.str("sessiontree.session.path", m.meta.path.as_deref());
        res.str(
            "sessiontree.session.parent",
            m.meta.parent_session.as_deref(),
        );
        let mut r = b"{\"attributes\":".to_vec();
        push_attrs(&mut r, res.0.iter().map(|(k, v)| (*k, v)));
        r.push(b'}');
        m.resource = r;
        if content == Content::Scrubbed {
            let mut sc = crate::scrub::Scrubber::new(crate::scrub::Options::default());
            sc.record = false;
            let mut sink = Vec::new();
            sc.line(br#"{"type":"session","version":3,"id":"-"}"#, &mut sink);
            m.scrubber = Some(sc);
        }
        m
    }

    /// The session id the trace is named by, and the trace id.
    pub fn ids(&self) -> (&str, &str) {
        (&self.sid, &self.trace)
    }

    /// Records a problem (at most [`MAX_PROBLEMS`] kept; more counted).
    pub fn problem(&mut self, text: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(text);
        } else {
            self.problems_dropped += 1;
        }
    }

    fn scrub_line<'a>(&mut self, line: &'a [u8]) -> Cow<'a, [u8]> {
        match &mut self.scrubber {
            Some(sc) => {
                let mut o = Vec::with_capacity(line.len());
                sc.line(line, &mut o);
                Cow::Owned(o)
            }
            None => Cow::Borrowed(line),
        }
    }

    // --- output ---

    fn flush(&mut self) {
        if self.n_pending == 0 {
            return;
        }
        let o = &mut self.out;
        o.extend_from_slice(b"{\"resourceSpans\":[{\"resource\":");
        o.extend_from_slice(&self.resource);
        o.extend_from_slice(
            b",\"scopeSpans\":[{\"scope\":{\"name\":\"sessiontree.otel\",\"version\":",
        );
        push_str(o, &self.meta.version);
        o.extend_from_slice(b"},\"spans\":[");
        o.extend_from_slice(&self.pending);
        let schema = format!("https://opentelemetry.io/schemas/{SEMCONV_VERSION}");
        o.extend_from_slice(b"],\"schemaUrl\":");
        push_str(o, &schema);
        o.extend_from_slice(b"}],\"schemaUrl\":");
        push_str(o, &schema);
        o.extend_from_slice(b"}]}\n");
        self.requests += 1;
        self.pending.clear();
        self.n_pending = 0;
    }

    /// Writes span `p` (its times made finite and ordered) to the pending request.
    fn emit(&mut self, p: &Pending, error: Option<&str>) {
        let (mut start, mut end) = (p.start, p.end);
        if !start.is_finite() {
            start = end;
        }
        if !end.is_finite() {
            end = start;
        }
        if !start.is_finite() {
            start = 0.0;
            end = 0.0;
        }
        if end < start {
            end = start;
        }
        let o = &mut self.pending;
        if self.n_pending > 0 {
            o.push(b',');
        }
        o.extend_from_slice(b"{\"traceId\":");
        push_str(o, &self.trace);
        o.extend_from_slice(b",\"spanId\":\"");
        o.extend_from_slice(hex(&p.span).as_bytes());
        o.push(b'"');
        if let Some(ps) = &p.parent_span {
            o.extend_from_slice(b",\"parentSpanId\":\"");
            o.extend_from_slice(hex(ps).as_bytes());
            o.push(b'"');
        }
        o.extend_from_slice(b",\"name\":");
        push_str(o, &p.name);
        o.extend_from_slice(format!(",\"kind\":{},\"startTimeUnixNano\":", p.kind).as_bytes());
        push_nanos(o, start);
        o.extend_from_slice(b",\"endTimeUnixNano\":");
        push_nanos(o, end);
        o.extend_from_slice(b",\"attributes\":");
        let conv = AttrValue::Str(self.sid.clone());
        let act = AttrValue::Bool(p.active);
        let head = std::iter::once(("gen_ai.conversation.id", &conv));
        let body = p.attrs.0.iter().map(|(k, v)| (*k, v));
        let tail = std::iter::once(("sessiontree.active_path", &act));
        push_attrs(o, head.chain(body).chain(tail));
        if p.n_events > 0 {
            o.extend_from_slice(b",\"events\":[");
            o.extend_from_slice(&p.events);
            o.push(b']');
        }
        if p.dropped > 0 {
            o.extend_from_slice(format!(",\"droppedEventsCount\":{}", p.dropped).as_bytes());
        }
        if !p.links.is_empty() {
            o.extend_from_slice(b",\"links\":[");
            o.extend_from_slice(&p.links);
            o.push(b']');
        }
        match error {
            Some(e) => {
                o.extend_from_slice(b",\"status\":{\"code\":2,\"message\":");
                push_str(o, e);
                o.extend_from_slice(b"}}");
            }
            None => o.extend_from_slice(b",\"status\":{}}"),
        }
        self.n_pending += 1;
        self.spans += 1;
        if self.n_pending >= SPANS_PER_REQUEST {
            self.flush();
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn simple(
        &self,
        span: [u8; 8],
        parent: [u8; 8],
        name: String,
        kind: u8,
        start: f64,
        end: f64,
        attrs: Attrs,
        active: bool,
    ) -> Pending {
        Pending {
            span,
            parent_span: Some(parent),
            name,
            kind,
            start,
            end,
            attrs,
            links: Vec::new(),
            events: Vec::new(),
            n_events: 0,
            dropped: 0,
            active,
        }
    }

    // --- helpers ---

    /// The JSON text of `doc` as a content attribute's value (cut to [`MAX_CONTENT_CHARS`]
    /// characters, the cut recorded as a problem). Written escaped as the attribute's string in
    /// one pass; the text is made first only when it may be over the limit.
    fn content_value(&mut self, doc: &J, what: &str) -> AttrValue {
        let (v, problem) = Self::content_of(doc, what);
        if let Some(p) = problem {
            self.problem(p);
        }
        v
    }

    /// [`Mapper::content_value`]: the value and the problem to record.
    fn content_of(doc: &J, what: &str) -> (AttrValue, Option<String>) {
        let mut escaped = Vec::new();
        doc.write_escaped(&mut escaped);
        // the text is no longer than its escaped form
        if escaped.len() <= MAX_CONTENT_CHARS {
            return (AttrValue::Escaped(escaped), None);
        }
        drop(escaped);
        // the mapping's own JSON (UTF-8 by construction): checked with SIMD
        let text = doc.to_vec();
        let text = match simdutf8::basic::from_utf8(&text) {
            // SAFETY: `text` was just checked to be UTF-8
            Ok(_) => unsafe { String::from_utf8_unchecked(text) },
            Err(_) => String::from_utf8_lossy(&text).into_owned(),
        };
        let chars = text.chars().count();
        if chars <= MAX_CONTENT_CHARS {
            return (AttrValue::Str(text), None);
        }
        let problem = format!("{what}: content of {chars} characters cut to {MAX_CONTENT_CHARS}");
        let cut: String = text.chars().take(MAX_CONTENT_CHARS).collect();
        let j = J::Arr(vec![J::Obj(vec![
            ("role", J::Str("user".into())),
            (
                "parts",
                J::Arr(vec![J::Obj(vec![
                    ("type", J::Str("text".into())),
                    ("content", J::Str(cut.into())),
                ])]),
            ),
        ])]);
        let v = AttrValue::Str(String::from_utf8(j.to_vec()).unwrap_or_default());
        (v, Some(problem))
    }

    fn group_span(&self, g: i64) -> [u8; 8] {
        if g < 0 {
            self.root_span
        } else {
            self.grp(g).span
        }
    }

    fn grp(&self, g: i64) -> &Group {
        &self.group_list[g as usize]
    }

    fn grp_mut(&mut self, g: i64) -> &mut Group {
        &mut self.group_list[g as usize]
    }

    /// The id of group `ix` (see [`Group::id_end`]).
    fn group_id(&self, ix: usize) -> &str {
        let lo = match ix {
            0 => 0,
            _ => self.group_list[ix - 1].id_end as usize,
        };
        &self.group_ids[lo..self.group_list[ix].id_end as usize]
    }

    /// Adds a group (a turn or a branch) under group `parent`, with id `id`; its index.
    #[allow(clippy::too_many_arguments)]
    fn add_group(
        &mut self,
        span: [u8; 8],
        parent: i64,
        start: f64,
        end: f64,
        pos: usize,
        turn: bool,
        active: bool,
        id: &str,
    ) -> i64 {
        // the ids' total is held to 4 GiB (`id_end` is 32 bits): past it an id reads as empty
        if self.group_ids.len() + id.len() <= u32::MAX as usize {
            self.group_ids.push_str(id);
        }
        self.group_list.push(Group {
            span,
            start,
            end,
            extra: None,
            parent_group: Self::stored(parent),
            pos: pos as u32,
            id_end: self.group_ids.len() as u32,
            turn,
            active,
        });
        (self.group_list.len() - 1) as i64
    }

    /// A group index as `group` holds it.
    fn stored(g: i64) -> u32 {
        if g < 0 {
            G_ROOT
        } else {
            u32::try_from(g).unwrap_or(G_ROOT)
        }
    }

    /// The group of entry `q` (mapped already), [`ROOT`] for the root.
    fn group_of(&self, q: usize) -> i64 {
        match self.group[q] {
            G_ROOT | G_UNSEEN => ROOT,
            g => i64::from(g),
        }
    }

    /// The span of entry `q` (mapped already): `own`, its own span's id as [`read_batch`]
    /// derived it, when it has one, else its group's.
    fn span_of(&self, q: usize, own: [u8; 8]) -> [u8; 8] {
        if self.flags[q] & OWN_SPAN != 0 {
            own
        } else {
            self.group_span(self.group_of(q))
        }
    }

    /// Extends group `g` and its ancestors (at most 8 up) and the root to `ms`.
    fn touch(&mut self, mut g: i64, ms: f64) {
        if !ms.is_finite() {
            return;
        }
        // NaN (no time yet) takes any time
        if self.end_ms.is_nan() || self.end_ms < ms {
            self.end_ms = ms;
        }
        if self.start_ms.is_nan() || self.start_ms > ms {
            self.start_ms = ms;
        }
        let mut hops = 0;
        while g >= 0 && hops < 8 {
            let rec = self.grp_mut(g);
            if rec.end.is_nan() || rec.end < ms {
                rec.end = ms;
            }
            if rec.start.is_nan() || rec.start > ms {
                rec.start = ms;
            }
            g = match rec.parent_group {
                G_ROOT | G_UNSEEN => ROOT,
                pg => i64::from(pg),
            };
            hops += 1;
        }
    }

    fn event(&mut self, g: i64, ms: f64, name: &str, attrs: &Attrs) {
        let t = if ms.is_finite() {
            ms
        } else if self.start_ms.is_finite() {
            self.start_ms
        } else {
            0.0
        };
        let (buf, count, dropped) = if g < 0 {
            (
                &mut self.root_events,
                &mut self.n_root_events,
                &mut self.root_dropped,
            )
        } else {
            let x = self.group_list[g as usize]
                .extra
                .get_or_insert_with(Box::default);
            (&mut x.events, &mut x.n_events, &mut x.dropped)
        };
        if *count >= MAX_EVENTS {
            *dropped += 1;
            return;
        }
        if *count > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(b"{\"timeUnixNano\":");
        push_nanos(buf, t);
        buf.extend_from_slice(b",\"name\":");
        push_str(buf, name);
        buf.extend_from_slice(b",\"attributes\":");
        push_attrs(buf, attrs.0.iter().map(|(k, v)| (*k, v)));
        buf.push(b'}');
        *count += 1;
    }

    fn usage(&mut self, usage: Option<&Value>, what: &str, out: &mut Attrs) {
        let u = match usage {
            None | Some(Value::Null) => return,
            Some(Value::Object(u)) => u,
            Some(_) => {
                self.problem(format!("{what}: usage is not an object"));
                return;
            }
        };
        for (key, name) in USAGE {
            match u.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::Number(n)) => match int_of(n) {
                    Some(i) => out.set(name, AttrValue::Int(i)),
                    None => self.problem(format!("{what}: usage.{key} is out of the 64-bit range")),
                },
                Some(v) => {
                    let t = type_name(v);
                    self.problem(format!("{what}: usage.{key} is not a finite number ({t})"))
                }
            }
        }
        match u.get("cost") {
            Some(Value::Object(c)) => {
                for (key, name) in COST {
                    match c.get(key) {
                        None | Some(Value::Null) => {}
                        Some(v) => match is_num(Some(v)) {
                            Some(x) => out.set(name, AttrValue::Double(x)),
                            None => {
                                let t = type_name(v);
                                self.problem(format!(
                                    "{what}: usage.cost.{key} is not a finite number ({t})"
                                ))
                            }
                        },
                    }
                }
            }
            None | Some(Value::Null) => {}
            Some(_) => self.problem(format!("{what}: usage.cost is not an object")),
        }
    }

    fn input_json(msg: &Map<String, Value>) -> Option<Vec<u8>> {
        input_message(msg).map(|j| j.to_vec())
    }

    // --- the walk ---

    /// Maps the entries [`read_batch`] read; the request lines finished are in
    /// [`Mapper::output`].
    pub fn map_batch(&mut self) {
        let b = std::mem::take(&mut self.batch);
        for k in 0..b.ids.len() {
            let (lo, hi) = b.span[k];
            let raw = parse_value(&b.raw[lo..hi]);
            self.entry(&b, k, raw);
        }
        // the input messages kept are pruned at the end of each [`BATCH`] of entries, whatever
        // the size of the batches read
        let end = b.lo + b.ids.len();
        let at_end = end % BATCH == 0 || end == self.n;
        if at_end && end > 0 && self.content != Content::None && self.recent.len() > 4 * BATCH {
            let keep = ((end - 1) / BATCH * BATCH).saturating_sub(BATCH);
            self.recent.retain(|&q, _| q >= keep);
        }
        self.batch = b;
    }

    /// The request lines finished since [`Mapper::clear_output`] (each ending in `\n`).
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// Forgets the lines [`Mapper::output`] gave (the buffer is kept for the next ones).
    pub fn clear_output(&mut self) {
        self.out.clear();
    }

    fn entry(&mut self, b: &Batch, k: usize, raw: Value) {
        let p = b.lo + k;
        let empty = Map::new();
        let raw = match &raw {
            Value::Object(m) => m,
            _ => &empty,
        };
        let (eid, cur): (String, Vec<String>) = match &b.ids[k] {
            None => {
                self.problem(format!(
                    "entry {}: no string id (its span id is derived from its position)",
                    p + 1
                ));
                let e = format!("#{p}");
                (e.clone(), vec![e, "@noid".into()])
            }
            Some(e) if self.dups && b.repeated[k] => (e.clone(), vec![e.clone(), format!("@{p}")]),
            Some(e) => (e.clone(), vec![e.clone()]),
        };
        let cur: Vec<&str> = cur.iter().map(String::as_str).collect();
        let what = format!("entry {eid}");
        let mut ms = str_of(raw.get("timestamp")).map_or(f64::NAN, crate::jsdate::parse_iso);
        if !ms.is_finite() {
            let msg = raw.get("message").and_then(Value::as_object);
            ms = is_num(msg.and_then(|m| m.get("timestamp"))).unwrap_or(f64::NAN);
            let tail = if ms.is_nan() {
                ""
            } else {
                " (the message's is used)"
            };
            self.problem(format!("{what}: no valid timestamp{tail}"));
        }
        let mut parent = (b.parents[k] != NO_PARENT && (b.parents[k] as usize) < self.n)
            .then_some(b.parents[k] as usize);
        if let Some(q) = parent {
            if self.group[q] == G_UNSEEN {
                self.problem(format!(
                    "{what}: its parent comes later in the file (placed under the root)"
                ));
                parent = None;
            }
        }
        let (mut g, mut start);
        match parent {
            Some(q) => {
                if let Some(slot) = self.parent.get_mut(p) {
                    *slot = q as u32;
                }
                g = self.group_of(q);
                start = self.time[q];
                if ms.is_nan() {
                    ms = start;
                }
            }
            None => {
                g = ROOT;
                start = self.start_ms;
            }
        }
        if start.is_nan() {
            start = ms;
        }
        self.time[p] = ms;
        let is_active = |q: usize| self.flags[q] & ACTIVE != 0;
        let active = is_active(p);
        let mut own = self.group_span(g);
        if !active && parent.is_none_or(is_active) {
            let fork = parent.map_or(self.root_span, |q| self.span_of(q, b.fork_own[k]));
            let from_id = match parent {
                None => "root".to_string(),
                Some(q) => b.fork_ids[k].clone().unwrap_or_else(|| format!("#{q}")),
            };
            let mut parts = cur.clone();
            parts.push("branch");
            let bspan = span_id_of(&self.sid, &parts);
            g = self.add_group(bspan, g, start, ms, p, false, false, &from_id);
            self.forks.push(((self.group_list.len() - 1) as u32, fork));
            own = bspan;
        }
        self.touch(g, ms);
        let at = Site {
            eid: &eid,
            cur: &cur,
            own,
            start,
            ms,
            active,
        };
        let mut span_here = None;
        let etype = b.types[k].as_deref();
        let full = self.content != Content::None;
        let ev_attrs = |eid: &str| {
            let mut a = Attrs::default();
            a.set("sessiontree.entry.id", s(eid));
            a
        };
        match etype {
            Some("message") => {
                let msg = raw.get("message").and_then(Value::as_object);
                match msg {
                    None => {
                        self.problem(format!("{what}: a message entry without a message object"))
                    }
                    Some(msg) => match str_of(msg.get("role")) {
                        Some("user") => {
                            let sp = span_id_of(&self.sid, &cur);
                            span_here = Some(sp);
                            if full {
                                if let Some(im) = Self::input_json(msg) {
                                    self.recent.insert(p, im);
                                }
                            }
                            g = self.add_group(sp, g, ms, ms, p, true, active, &eid);
                            self.touch(g, ms);
                        }
                        Some("assistant") => {
                            span_here = Some(self.chat(&at, msg, parent));
                        }
                        Some("toolResult") => {
                            self.tool_result(&at, msg);
                            if full {
                                let im = Self::input_json(msg).unwrap_or_else(|| b"{}".to_vec());
                                self.recent.insert(p, im);
                            }
                        }
                        Some("bashExecution") => {
                            let sp = span_id_of(&self.sid, &cur);
                            span_here = Some(sp);
                            let code = exact_int(msg.get("exitCode"));
                            let err = if msg.get("cancelled") == Some(&Value::Bool(true)) {
                                Some("cancelled".to_string())
                            } else {
                                code.filter(|&c| c != 0).map(|c| format!("exit code {c}"))
                            };
                            let mut attrs = Attrs::default();
                            attrs.set("gen_ai.operation.name", s("execute_tool"));
                            attrs.set("gen_ai.tool.name", s("bash"));
                            attrs.set("gen_ai.tool.type", s("extension"));
                            attrs.set("sessiontree.entry.id", s(&eid));
                            if let Some(c) = code {
                                attrs.set("sessiontree.bash.exit_code", AttrValue::Int(c));
                            }
                            if full {
                                let args = J::Obj(vec![(
                                    "command",
                                    msg.get("command").map_or(J::Null, J::Val),
                                )])
                                .to_vec();
                                attrs.set(
                                    "gen_ai.tool.call.arguments",
                                    AttrValue::Str(String::from_utf8_lossy(&args).into_owned()),
                                );
                                let res = msg.get("output").map_or(J::Null, J::Val);
                                let v = self.content_value(&res, &what);
                                attrs.set("gen_ai.tool.call.result", v);
                                let im = Self::input_json(msg).unwrap_or_else(|| b"{}".to_vec());
                                self.recent.insert(p, im);
                            }
                            let rec = self.simple(
                                sp,
                                own,
                                "execute_tool bash".into(),
                                INTERNAL,
                                ms,
                                ms,
                                attrs,
                                active,
                            );
                            self.emit(&rec, err.as_deref());
                        }
                        role => {
                            if full {
                                if let Some(im) = Self::input_json(msg) {
                                    self.recent.insert(p, im);
                                }
                            }
                            let name = match role {
                                Some(r) => format!("sessiontree.message.{r}"),
                                None => "sessiontree.message".into(),
                            };
                            self.event(g, ms, &name, &ev_attrs(&eid));
                        }
                    },
                }
            }
            Some(t @ ("compaction" | "branch_summary")) => {
                span_here = Some(self.summary(p, &at, t, raw, b.from_pos[k], b.from_own[k]));
            }
            Some("custom_message") => {
                let mut a = ev_attrs(&eid);
                a.str("sessiontree.custom_type", str_of(raw.get("customType")));
                self.event(g, ms, "sessiontree.custom_message", &a);
            }
            Some(
                t @ ("label"
                | "model_change"
                | "thinking_level_change"
                | "session_info"
                | "custom"
                | "context_edit"),
            ) => {
                let mut a = ev_attrs(&eid);
                let f = |k: &str| str_of(raw.get(k));
                match t {
                    "label" => {
                        a.str("sessiontree.label.target_id", f("targetId"));
                        a.str("sessiontree.label", f("label"));
                    }
                    "model_change" => {
                        a.str("sessiontree.model.provider", f("provider"));
                        a.str("sessiontree.model.id", f("modelId"));
                    }
                    "thinking_level_change" => {
                        a.str("sessiontree.thinking_level", f("thinkingLevel"))
                    }
                    "session_info" => a.str("sessiontree.session.name", f("name")),
                    "custom" => a.str("sessiontree.custom_type", f("customType")),
                    _ => {}
                }
                self.event(g, ms, &format!("sessiontree.{t}"), &a);
            }
            other => {
                let shown = other.map_or_else(|| "None".to_string(), py_repr);
                self.problem(format!(
                    "{what}: unknown entry type {shown} (kept as an event)"
                ));
                let mut a = ev_attrs(&eid);
                a.str("sessiontree.entry.type", other);
                self.event(g, ms, "sessiontree.entry", &a);
            }
        }
        self.group[p] = Self::stored(g);
        if span_here.is_some() {
            self.flags[p] |= OWN_SPAN;
        }
    }

    fn chat(&mut self, at: &Site, msg: &Map<String, Value>, parent: Option<usize>) -> [u8; 8] {
        let eid = at.eid;
        let what = format!("entry {eid}");
        let span = span_id_of(&self.sid, at.cur);
        let model = str_of(msg.get("model"));
        let stop = msg.get("stopReason");
        let stop_s = str_of(stop);
        let mut attrs = Attrs::default();
        attrs.set("gen_ai.operation.name", s("chat"));
        attrs.str("gen_ai.provider.name", str_of(msg.get("provider")));
        attrs.str("gen_ai.request.model", model);
        let resp = str_of(msg.get("responseModel"))
            .filter(|x| !x.is_empty())
            .or(model);
        attrs.str("gen_ai.response.model", resp);
        attrs.str("gen_ai.response.id", str_of(msg.get("responseId")));
        if let Some(st) = stop_s {
            attrs.set(
                "gen_ai.response.finish_reasons",
                AttrValue::Strs(vec![finish_reason(st).to_string()]),
            );
        }
        attrs.set("sessiontree.entry.id", s(eid));
        attrs.str("sessiontree.api", str_of(msg.get("api")));
        self.usage(msg.get("usage"), &what, &mut attrs);
        let full = self.content != Content::None;
        if full {
            let mut inputs: Vec<&Vec<u8>> = Vec::new();
            let (mut q, mut hops) = (parent, 0);
            while let Some(qq) = q {
                let Some(m) = self.recent.get(&qq) else { break };
                if hops >= 64 {
                    break;
                }
                inputs.push(m);
                q = (self.parent[qq] != NO_PARENT).then_some(self.parent[qq] as usize);
                hops += 1;
            }
            let inputs: Vec<&Vec<u8>> = inputs
                .into_iter()
                .rev()
                .filter(|m| m.as_slice() != b"{}")
                .collect();
            if !inputs.is_empty() {
                let j = J::Arr(inputs.iter().map(|m| J::Raw(m)).collect());
                let (v, problem) = Self::content_of(&j, &what);
                attrs.set("gen_ai.input.messages", v);
                if let Some(p) = problem {
                    self.problem(p);
                }
            }
            let fr = stop_s.map_or("stop", finish_reason);
            let j = J::Arr(vec![J::Obj(vec![
                ("role", J::Str("assistant".into())),
                ("parts", parts(msg.get("content"))),
                ("finish_reason", J::Str(fr.into())),
            ])]);
            let v = self.content_value(&j, &what);
            attrs.set("gen_ai.output.messages", v);
        }
        let err = (stop_s == Some("error")).then(|| {
            str_of(msg.get("errorMessage"))
                .unwrap_or("error")
                .to_string()
        });
        let name = match model {
            Some(m) if !m.is_empty() => format!("chat {m}"),
            _ => "chat".into(),
        };
        let rec = self.simple(
            span, at.own, name, CLIENT, at.start, at.ms, attrs, at.active,
        );
        self.emit(&rec, err.as_deref());
        if let Some(Value::Array(blocks)) = msg.get("content") {
            for b in blocks {
                let Value::Object(b) = b else { continue };
                if str_of(b.get("type")) != Some("toolCall") {
                    continue;
                }
                let cid = str_of(b.get("id")).unwrap_or("");
                let tname = str_of(b.get("name"))
                    .filter(|x| !x.is_empty())
                    .unwrap_or("tool");
                let mut ta = Attrs::default();
                ta.set("gen_ai.operation.name", s("execute_tool"));
                ta.set("gen_ai.tool.name", s(tname));
                if !cid.is_empty() {
                    ta.set("gen_ai.tool.call.id", s(cid));
                }
                ta.set("gen_ai.tool.type", s("function"));
                ta.set("sessiontree.entry.id", s(eid));
                if full {
                    let args = b.get("arguments").map_or(J::Null, J::Val);
                    let v = self.content_value(&args, &what);
                    ta.set("gen_ai.tool.call.arguments", v);
                }
                let mut parts: Vec<&str> = at.cur.to_vec();
                parts.push("tool");
                parts.push(cid);
                let tspan = span_id_of(&self.sid, &parts);
                if !cid.is_empty() {
                    if let Some((_, old)) = self.tools.remove(cid) {
                        self.emit(&old, None);
                    }
                }
                let rec = self.simple(
                    tspan,
                    span,
                    format!("execute_tool {tname}"),
                    INTERNAL,
                    at.ms,
                    at.ms,
                    ta,
                    at.active,
                );
                if cid.is_empty() {
                    self.problem(format!("entry {eid}: a tool call without an id"));
                    self.emit(&rec, None);
                } else {
                    self.tool_seq += 1;
                    self.tools.insert(cid.to_string(), (self.tool_seq, rec));
                }
            }
        }
        span
    }

    fn tool_result(&mut self, at: &Site, msg: &Map<String, Value>) {
        let eid = at.eid;
        let cid = str_of(msg.get("toolCallId")).unwrap_or("");
        let found = if cid.is_empty() {
            None
        } else {
            self.tools.remove(cid)
        };
        let full = self.content != Content::None;
        let mut err =
            (msg.get("isError") == Some(&Value::Bool(true))).then(|| "tool error".to_string());
        if err.is_some() && full {
            let t: String = text_of(msg.get("content")).chars().take(1024).collect();
            err = Some(if t.is_empty() { "tool error".into() } else { t });
        }
        let mut rec = match found {
            Some((_, rec)) => rec,
            None => {
                let tname = str_of(msg.get("toolName"))
                    .filter(|x| !x.is_empty())
                    .unwrap_or("tool");
                let shown = if cid.is_empty() { "no id" } else { cid };
                self.problem(format!(
                    "entry {eid}: a tool result for no earlier tool call ({shown})"
                ));
                let mut parts: Vec<&str> = at.cur.to_vec();
                parts.push("tool");
                parts.push(cid);
                let mut a = Attrs::default();
                a.set("gen_ai.operation.name", s("execute_tool"));
                a.set("gen_ai.tool.name", s(tname));
                if !cid.is_empty() {
                    a.set("gen_ai.tool.call.id", s(cid));
                }
                a.set("sessiontree.entry.id", s(eid));
                let sp = span_id_of(&self.sid, &parts);
                self.simple(
                    sp,
                    at.own,
                    format!("execute_tool {tname}"),
                    INTERNAL,
                    at.start,
                    at.ms,
                    a,
                    at.active,
                )
            }
        };
        rec.end = at.ms;
        rec.attrs.set("sessiontree.result.entry_id", s(eid));
        if full {
            let t = J::Str(text_of(msg.get("content")));
            let v = self.content_value(&t, &format!("entry {eid}"));
            rec.attrs.set("gen_ai.tool.call.result", v);
        }
        self.emit(&rec, err.as_deref());
    }

    fn summary(
        &mut self,
        p: usize,
        at: &Site,
        etype: &str,
        raw: &Map<String, Value>,
        from_pos: Option<u32>,
        from_own: [u8; 8],
    ) -> [u8; 8] {
        let eid = at.eid;
        let what = format!("entry {eid}");
        let span = span_id_of(&self.sid, at.cur);
        let summary = str_of(raw.get("summary"));
        let mut attrs = Attrs::default();
        attrs.set("sessiontree.entry.id", s(eid));
        let mut links = Vec::new();
        if etype == "compaction" {
            match raw.get("tokensBefore") {
                None | Some(Value::Null) => {}
                Some(Value::Number(n)) => match int_of(n) {
                    Some(i) => attrs.set("sessiontree.compaction.tokens_before", AttrValue::Int(i)),
                    None => {
                        self.problem(format!("{what}: tokensBefore is out of the 64-bit range"))
                    }
                },
                Some(_) => self.problem(format!("{what}: tokensBefore is not a finite number")),
            }
            attrs.str(
                "sessiontree.compaction.first_kept_entry_id",
                str_of(raw.get("firstKeptEntryId")),
            );
            if let Some(t) = summary {
                attrs.set(
                    "sessiontree.compaction.tokens_after",
                    AttrValue::Int(t.chars().count().div_ceil(4) as i64),
                );
            }
        } else {
            let from_id = str_of(raw.get("fromId"));
            attrs.str("sessiontree.branch_summary.from_id", from_id);
            if let (Some(fid), Some(q)) = (from_id.filter(|x| !x.is_empty()), from_pos) {
                let q = q as usize;
                if q < self.n {
                    let target = if self.group[q] != G_UNSEEN {
                        self.span_of(q, from_own)
                    } else {
                        span_id_of(&self.sid, &[fid])
                    };
                    push_link(&mut links, &self.trace, &target, "summarized_branch");
                }
            }
            if let Some(t) = summary {
                attrs.set(
                    "sessiontree.branch_summary.tokens",
                    AttrValue::Int(t.chars().count().div_ceil(4) as i64),
                );
            }
        }
        if raw.get("fromHook") == Some(&Value::Bool(true)) {
            attrs.set("sessiontree.from_hook", AttrValue::Bool(true));
        }
        self.usage(raw.get("usage"), &what, &mut attrs);
        if self.content != Content::None {
            if let Some(t) = summary {
                let kind = if etype == "compaction" {
                    "compaction"
                } else {
                    "branch_summary"
                };
                let j = J::Arr(vec![J::Obj(vec![
                    ("role", J::Str("assistant".into())),
                    (
                        "parts",
                        J::Arr(vec![J::Obj(vec![
                            ("type", J::Str(kind.into())),
                            ("content", J::Str(t.into())),
                        ])]),
                    ),
                    ("finish_reason", J::Str("stop".into())),
                ])]);
                let v = self.content_value(&j, &what);
                attrs.set("gen_ai.output.messages", v);
                let im = J::Obj(vec![
                    ("role", J::Str("user".into())),
                    (
                        "parts",
                        J::Arr(vec![J::Obj(vec![
                            ("type", J::Str("text".into())),
                            ("content", J::Str(t.into())),
                        ])]),
                    ),
                ]);
                self.recent.insert(p, im.to_vec());
            }
        }
        let mut rec = self.simple(
            span,
            at.own,
            etype.to_string(),
            INTERNAL,
            at.start,
            at.ms,
            attrs,
            at.active,
        );
        rec.links = links;
        self.emit(&rec, None);
        span
    }

    // --- the end ---

    /// The groups [`Mapper::finish_chunk`] `k` writes (indices into `group_list`).
    fn chunk_range(&self, k: usize) -> std::ops::Range<usize> {
        let n = self.group_list.len();
        k.saturating_mul(FINISH).min(n)..k.saturating_add(1).saturating_mul(FINISH).min(n)
    }

    /// The positions of the user messages whose turn spans [`Mapper::finish_chunk`] `k` writes.
    /// Their content is read again then, in content modes; none otherwise.
    pub fn chunk_turns(&self, k: usize) -> Vec<usize> {
        if self.content == Content::None {
            return Vec::new();
        }
        self.chunk_range(k)
            .map(|ix| &self.group_list[ix])
            .filter(|g| g.turn)
            .map(|g| g.pos as usize)
            .collect()
    }

    /// The number of [`Mapper::finish_chunk`] calls that end the trace.
    pub fn chunks(&self) -> usize {
        self.group_list.len().div_ceil(FINISH)
    }

    /// Writes the tool calls left without a result (once, before the turn and branch spans).
    fn close_tools(&mut self) {
        if self.finishing {
            return;
        }
        self.finishing = true;
        let mut left: Vec<(u64, Pending)> = self.tools.drain().map(|(_, v)| v).collect();
        left.sort_unstable_by_key(|x| x.0);
        for (_, mut rec) in left {
            rec.attrs
                .set("sessiontree.tool.result_missing", AttrValue::Bool(true));
            self.emit(&rec, None);
        }
    }

    /// Writes the tool calls left without a result, then the turn and branch spans of chunk `k`.
    /// Tool calls at the first call; spans made [`FINISH`] at a time, in the order they were
    /// made. `lines`: in content modes, the lines of [`Mapper::chunk_turns`] `k`, in that order.
    pub fn finish_chunk(&mut self, k: usize, lines: &[Vec<u8>]) {
        self.close_tools();
        let range = self.chunk_range(k);
        if self.content != Content::None {
            let turns: Vec<usize> = range
                .clone()
                .filter(|&ix| self.group_list[ix].turn)
                .collect();
            for (ix, line) in turns.into_iter().zip(lines) {
                let line = self.scrub_line(line).into_owned();
                let raw = parse_value(&line);
                let im = raw
                    .get("message")
                    .and_then(Value::as_object)
                    .and_then(Self::input_json);
                if let Some(im) = im {
                    let what = format!("entry {}", self.group_id(ix));
                    let v = self.content_value(&J::Arr(vec![J::Raw(&im)]), &what);
                    self.group_list[ix]
                        .extra
                        .get_or_insert_with(Box::default)
                        .input = Some(v);
                }
            }
        }
        for ix in range {
            let rec = self.group_span_of(ix);
            self.emit(&rec, None);
        }
    }

    /// The span of group `ix` (its attributes, links and events; its events and input message
    /// are taken: each group is written once).
    fn group_span_of(&mut self, ix: usize) -> Pending {
        let mut attrs = Attrs::default();
        let mut links = Vec::new();
        let id = self.group_id(ix).to_string();
        let g = &self.group_list[ix];
        let name = if g.turn {
            attrs.set("gen_ai.operation.name", s("invoke_agent"));
            attrs.set("gen_ai.agent.name", s("pi"));
            attrs.set("sessiontree.entry.id", AttrValue::Str(id));
            "invoke_agent pi".to_string()
        } else {
            let name = format!("branch {id}");
            attrs.set("sessiontree.branch.from_id", AttrValue::Str(id));
            let fork = self
                .forks
                .binary_search_by_key(&(ix as u32), |f| f.0)
                .map_or([0; 8], |f| self.forks[f].1);
            push_link(&mut links, &self.trace, &fork, "fork_point");
            name
        };
        let parent_span = match g.parent_group {
            G_ROOT | G_UNSEEN => self.root_span,
            pg => self.group_list[pg as usize].span,
        };
        let (span, start, end, active) = (g.span, g.start, g.end, g.active);
        let x = self.group_list[ix]
            .extra
            .take()
            .map(|b| *b)
            .unwrap_or_default();
        if let Some(v) = x.input {
            attrs.set("gen_ai.input.messages", v);
        }
        Pending {
            span,
            parent_span: Some(parent_span),
            name,
            kind: INTERNAL,
            start,
            end,
            attrs,
            links,
            events: x.events,
            n_events: x.n_events,
            dropped: x.dropped,
            active,
        }
    }

    /// Writes the root span (the problems as its events) and the last request line.
    pub fn finish_root(&mut self) {
        self.close_tools();
        self.group_list = Groups::default();
        self.group_ids = String::new();
        self.forks = Vec::new();
        let problems = self.problems.clone();
        for text in problems {
            let mut a = Attrs::default();
            a.set("sessiontree.problem", s(&text));
            self.event(ROOT, self.start_ms, "sessiontree.problem", &a);
        }
        let mut attrs = Attrs::default();
        attrs.set("gen_ai.operation.name", s("invoke_agent"));
        attrs.set("gen_ai.agent.name", s("pi"));
        attrs.set("gen_ai.agent.id", s(&self.sid));
        attrs.str(
            "sessiontree.session.name",
            self.meta.session_name.as_deref(),
        );
        attrs.str("sessiontree.session.cwd", self.meta.cwd.as_deref());
        attrs.set("sessiontree.entries", AttrValue::Int(self.n as i64));
        let np = self.problems.len() as i64 + self.problems_dropped as i64;
        attrs.set("sessiontree.problems", AttrValue::Int(np));
        let rec = Pending {
            span: self.root_span,
            parent_span: None,
            name: "invoke_agent pi".into(),
            kind: INTERNAL,
            start: self.start_ms,
            end: self.end_ms,
            attrs,
            links: Vec::new(),
            events: std::mem::take(&mut self.root_events),
            n_events: self.n_root_events,
            dropped: self.root_dropped,
            active: true,
        };
        self.emit(&rec, None);
        self.flush();
    }
}

/// Reads entries `lo..hi` of `st` for [`Mapper::map_batch`]. Ids, types, parents, lines (`lines`,
/// when given, instead of the file's: a legacy session's lines after migration), the by-id lookups
/// (repeated ids, branch summaries' `fromId`) and the ids of fork points. In the scrubbed mode the
/// lines are scrubbed here.
pub fn read_batch(
    st: &Store,
    m: &mut Mapper,
    lo: usize,
    hi: usize,
    lines: Option<Vec<Vec<u8>>>,
) -> Result<(), ReadError> {
    // the batch's buffers are the mapper's, kept from one batch to the next (no heap left
    // fragmented by a few MB freed and allocated again per batch)
    let mut b = std::mem::take(&mut m.batch);
    let r = fill_batch(st, m, &mut b, lo, hi, lines);
    m.batch = b;
    r
}

fn fill_batch(
    st: &Store,
    m: &mut Mapper,
    b: &mut Batch,
    lo: usize,
    hi: usize,
    lines: Option<Vec<Vec<u8>>>,
) -> Result<(), ReadError> {
    let idx: Vec<usize> = (lo..hi).collect();
    let ix = &st.index;
    b.lo = lo;
    b.ids.clear();
    b.ids
        .extend(ix.ids_of(&idx)?.into_iter().map(|x| x.map(str::to_string)));
    b.types.clear();
    b.types.extend(
        st.type_names(&idx)?
            .into_iter()
            .map(|x| x.map(|c| c.into_owned())),
    );
    b.parents.clear();
    b.parents
        .extend(idx.iter().map(|&i| ix.walk_parent(i as u32)));
    b.repeated.clear();
    b.fork_ids.clear();
    b.fork_own.clear();
    b.from_pos.clear();
    b.from_own.clear();
    match lines {
        Some(ls) => {
            b.raw.clear();
            b.span.clear();
            for l in ls {
                let s0 = b.raw.len();
                b.raw.extend_from_slice(&l);
                b.span.push((s0, b.raw.len()));
            }
        }
        None => st.lines_into(&idx, &mut b.raw, &mut b.span)?,
    }
    if b.span.len() != idx.len() {
        b.span.resize(idx.len(), (0, 0));
    }
    if m.scrubber.is_some() {
        let mut raw = Vec::with_capacity(b.raw.len());
        let mut span = Vec::with_capacity(b.span.len());
        for &(a, z) in &b.span {
            let s0 = raw.len();
            let line = b.raw[a..z].to_vec();
            raw.extend_from_slice(&m.scrub_line(&line));
            span.push((s0, raw.len()));
        }
        b.raw = raw;
        b.span = span;
    }
    for (k, &i) in idx.iter().enumerate() {
        let rep = m.dups
            && b.ids[k]
                .as_deref()
                .is_some_and(|e| ix.index_of_str(e) != Some(i as u32));
        b.repeated.push(rep);
        let q = b.parents[k];
        let active = |q: usize| m.flags[q] & ACTIVE != 0;
        let forks = !active(i) && q != NO_PARENT && (q as usize) < m.n && active(q as usize);
        let fork = forks
            .then(|| ix.id_at(q as usize).map(str::to_string))
            .flatten();
        b.fork_ids.push(fork);
        b.fork_own.push(if forks {
            own_span(&m.sid, ix, q as usize, m.dups)
        } else {
            [0; 8]
        });
        let from = if b.types[k].as_deref() == Some("branch_summary") {
            let (a, z) = b.span[k];
            #[derive(serde::Deserialize)]
            struct From {
                #[serde(rename = "fromId")]
                from_id: Option<Value>,
            }
            serde_json::from_slice::<From>(&b.raw[a..z])
                .ok()
                .and_then(|f| f.from_id)
                .and_then(|v| v.as_str().and_then(|x| ix.index_of_str(x)))
        } else {
            None
        };
        b.from_pos.push(from);
        b.from_own.push(match from {
            Some(q) if (q as usize) < m.n => own_span(&m.sid, ix, q as usize, m.dups),
            _ => [0; 8],
        });
    }
    Ok(())
}

/// The id of entry `q`'s own span (a chat, a bash execution, a summary, a turn), as
/// [`Mapper::map_batch`] derives it: from its entry id, with `@q` for an id the file repeats,
/// `#q` and `@noid` for an entry without one.
fn own_span(sid: &str, ix: &crate::index::Index, q: usize, dups: bool) -> [u8; 8] {
    match ix.id_at(q) {
        None => span_id_of(sid, &[&format!("#{q}"), "@noid"]),
        Some(e) if dups && ix.index_of_str(e) != Some(q as u32) => {
            span_id_of(sid, &[e, &format!("@{q}")])
        }
        Some(e) => span_id_of(sid, &[e]),
    }
}

/// The lines of the user messages `turns` (for [`Mapper::finish_chunk`]).
pub fn read_lines(st: &Store, turns: &[usize]) -> Result<Vec<Vec<u8>>, ReadError> {
    let mut raw = Vec::new();
    let mut span = Vec::new();
    st.lines_into(turns, &mut raw, &mut span)?;
    Ok(span.iter().map(|&(a, z)| raw[a..z].to_vec()).collect())
}

#[cfg(test)]
mod tests;
