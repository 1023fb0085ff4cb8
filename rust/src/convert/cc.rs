//! Claude Code transcript -> Pi session tree.
//!
//! Pass 1 reads each line's ids and flags only (the message bodies are skipped unparsed) and
//! builds the tree from ids, never from file order: `parentUuid` -> `parentId`; a
//! `compact_boundary` with a null `parentUuid` hangs under its `logicalParentUuid` (one root,
//! not one per compaction) unless that makes a cycle, when it hangs under the last preserved
//! message before it (else the last message before it); any other cycle is cut at its first
//! line, which becomes a root. Lines without `parentUuid` hang under the previous line of the
//! same session. Sidechain lines (`isSidechain`) of a file that also has main-chain lines go to
//! Pi sessions of their own, one per `agentId` (else per sidechain root); subagent files
//! (`<session>/subagents/*.jsonl`) too. Pass 2 writes one entry per line (a user line with
//! several tool results: one per result), the leaf (the last main-chain message) last.
//!
//! Both passes read the lines on two worker threads in batches (`par_lines`), their results
//! applied in line order. Pass 2's entries depend on pass 1's plan and on two things of the
//! lines before: the last timestamp (a line without one takes it) and each tool call's name (a
//! tool result names it). A worker leaves a tool result's name as a hole that the merging
//! thread fills in line order, and leaves the lines before its batch's first timestamp to the
//! merging thread, so the output is byte for byte what one thread writes.

use super::raw::{self, raw_struct, W};
use super::{
    io_err, ms_of, open_src, push_str, s, safe_name, Carried, ConvertError, EntryOut, Format,
    Report,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;

const NONE: u32 = u32::MAX;
const F_MSG: u8 = 1; // a leaf candidate: a user/assistant message, a boundary, a restored Pi entry
const F_BOUNDARY: u8 = 2;
const F_SUMMARY: u8 = 4;
const F_SIDE: u8 = 8;
const F_UUID: u8 = 16; // has a string uuid
const F_FULL: u8 = 32; // pass 2 needs the whole line parsed (else only its type: a custom entry)
/// Bytes of the first line read to find a Pi header written by `from_pi` (`back::cc_header_line`).
const HEADER_PEEK: u64 = 16 << 20;

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The fields pass 1 reads; the rest of the line is skipped.
#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(rename = "type")]
    ty: Option<Value>,
    subtype: Option<Value>,
    uuid: Option<Value>,
    #[serde(rename = "parentUuid", default, deserialize_with = "present")]
    parent: Option<Value>,
    #[serde(rename = "logicalParentUuid")]
    logical: Option<Value>,
    #[serde(rename = "isSidechain")]
    sidechain: Option<Value>,
    #[serde(rename = "agentId")]
    agent: Option<Value>,
    #[serde(rename = "isMeta")]
    is_meta: Option<Value>,
    #[serde(rename = "isCompactSummary")]
    compact_summary: Option<Value>,
    #[serde(rename = "sessionId")]
    session: Option<Value>,
    cwd: Option<Value>,
    timestamp: Option<Value>,
    #[serde(rename = "compactMetadata")]
    compact: Option<Value>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(rename = "piEntry", borrow)]
    pi_entry: Option<&'a RawValue>,
}

/// What pass 1 keeps of a line's `Meta`: its fields, owned (sent between threads), the
/// summary text of a compact summary, whether it has `piEntry`, whether it is not UTF-8.
struct MetaRec {
    ty: Option<Value>,
    subtype: Option<Value>,
    uuid: Option<Value>,
    parent: Option<Value>,
    logical: Option<Value>,
    sidechain: Option<Value>,
    agent: Option<Value>,
    is_meta: Option<Value>,
    compact_summary: Option<Value>,
    session: Option<Value>,
    cwd: Option<Value>,
    timestamp: Option<Value>,
    compact: Option<Value>,
    has_pi: bool,
    summary_text: Option<String>,
    utf8_bad: bool,
}

/// How a line whose fields were not read parses whole.
#[derive(Clone, Copy)]
enum Unparsed {
    Bad,
    Other,
    Object,
}

/// Pass 1's reading of one line (made on a worker thread, applied in line order).
struct Rec {
    meta: Option<Box<MetaRec>>,
    eol: bool,
    blank: bool,
    unparsed: Unparsed,
}

/// Reads one line for pass 1: its `Meta` fields, or how it fails.
fn record(line: &[u8], eol: bool) -> Rec {
    let first = line.iter().find(|c| !c.is_ascii_whitespace());
    let meta = if first == Some(&b'{') {
        serde_json::from_slice::<Meta>(line).ok()
    } else {
        None
    };
    match meta {
        Some(m) => {
            let summary_text = (s(m.ty.as_ref()) == Some("user") && truthy(&m.compact_summary))
                .then(|| {
                    let msg: Option<Value> =
                        m.message.and_then(|r| serde_json::from_str(r.get()).ok());
                    text_of(msg.as_ref().and_then(|v| v.get("content")))
                });
            Rec {
                meta: Some(Box::new(MetaRec {
                    utf8_bad: simdutf8::basic::from_utf8(line).is_err(),
                    has_pi: m.pi_entry.is_some(),
                    summary_text,
                    ty: m.ty,
                    subtype: m.subtype,
                    uuid: m.uuid,
                    parent: m.parent,
                    logical: m.logical,
                    sidechain: m.sidechain,
                    agent: m.agent,
                    is_meta: m.is_meta,
                    compact_summary: m.compact_summary,
                    session: m.session,
                    cwd: m.cwd,
                    timestamp: m.timestamp,
                    compact: m.compact,
                })),
                eol,
                blank: false,
                unparsed: Unparsed::Bad,
            }
        }
        None => {
            let blank = super::is_blank(line);
            let unparsed = if blank {
                Unparsed::Bad
            } else {
                match super::parse_line(line) {
                    super::Parsed::Bad => Unparsed::Bad,
                    super::Parsed::Other => Unparsed::Other,
                    super::Parsed::Object(_) => Unparsed::Object,
                }
            };
            Rec {
                meta: None,
                eol,
                blank,
                unparsed,
            }
        }
    }
}

/// Lines handed to a worker: the bytes (each line without its "\n"), `(end, eol)` per line, and
/// the number of the first line.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    ends: Vec<(usize, bool)>,
    first: u32,
}

/// Bytes of lines per batch of pass 1 (a longer line is a batch of its own).
const BATCH: usize = 64 << 10;
/// Bytes of lines per batch of pass 2 (its output is about 2.5 times that): about a dozen
/// batches and their outputs are in flight, 5 MiB.
pub(crate) const BATCH2: usize = 128 << 10;
/// The largest buffer kept for reuse (a long line's is freed).
const SPARE_MAX: usize = 8 << 20;
/// Threads working on the lines.
const WORKERS: usize = 2;

/// `work` on every batch of `batch` bytes of lines of `src` (or `data`), `apply` called on each
/// batch and its result in line order. Both passes read their lines this way.
/// The lines are read on one thread and worked on by `WORKERS` threads, batch `i` by worker
/// `i % WORKERS`, so the batches come back in order; at most a few batches are in flight. An
/// error of `apply` stops the reading and is returned.
fn par_lines<R: Send>(
    src: &Path,
    data: Option<&[u8]>,
    batch: usize,
    work: impl Fn(&Batch) -> R + Sync,
    mut apply: impl FnMut(&Batch, R) -> Result<(), ConvertError>,
) -> Result<(), ConvertError> {
    let work = &work;
    // the batches' buffers go back to the reader: fresh ones, made on one thread and freed on
    // another, cost a page fault per 4 KiB
    let (spare_tx, spare_rx) = sync_channel::<Vec<u8>>(2 * WORKERS + 2);
    std::thread::scope(|sc| {
        let mut to_workers = Vec::new();
        let mut from_workers = Vec::new();
        let mut workers = Vec::new();
        for _ in 0..WORKERS {
            let (tx, rx) = sync_channel::<Batch>(1);
            let (otx, orx) = sync_channel::<(Batch, R)>(1);
            to_workers.push(tx);
            from_workers.push(orx);
            let w = std::thread::Builder::new()
                .name("sessiontree-cc-lines".into())
                .spawn_scoped(sc, move || {
                    while let Ok(b) = rx.recv() {
                        let r = work(&b);
                        if otx.send((b, r)).is_err() {
                            return;
                        }
                    }
                })
                .map_err(io_err(src))?;
            workers.push(w);
        }
        let reader = std::thread::Builder::new()
            .name("sessiontree-cc-read".into())
            .spawn_scoped(sc, move || -> Result<(), ConvertError> {
                let mut lines = open_src(src, data)?;
                let mut b = Batch::default();
                let mut k = 0usize;
                let mut n = 0u32;
                while let Some((line, eol)) = lines.next_line().map_err(io_err(src))? {
                    b.bytes.extend_from_slice(line);
                    b.ends.push((b.bytes.len(), eol));
                    n = n.wrapping_add(1);
                    if b.bytes.len() >= batch {
                        let next = Batch {
                            first: n,
                            bytes: spare_rx.try_recv().unwrap_or_default(),
                            ..Batch::default()
                        };
                        if to_workers[k % WORKERS]
                            .send(std::mem::replace(&mut b, next))
                            .is_err()
                        {
                            return Ok(());
                        }
                        k += 1;
                    }
                }
                if !b.ends.is_empty() {
                    let _ = to_workers[k % WORKERS].send(b);
                }
                Ok(())
            })
            .map_err(io_err(src))?;
        let mut k = 0usize;
        let mut failed = Ok(());
        while let Ok((b, r)) = from_workers[k % WORKERS].recv() {
            if let Err(e) = apply(&b, r) {
                failed = Err(e);
                break;
            }
            let mut bytes = b.bytes;
            if bytes.capacity() <= SPARE_MAX {
                bytes.clear();
                let _ = spare_tx.try_send(bytes);
            }
            k += 1;
        }
        drop(from_workers);
        let panicked = || {
            ConvertError::Io(
                src.to_path_buf(),
                std::io::Error::other("a thread reading the lines panicked"),
            )
        };
        // a worker that stopped early ended the results early: never a plan of part of a file
        for w in workers {
            w.join().map_err(|_| panicked())?;
        }
        let read = reader.join().unwrap_or_else(|_| Err(panicked()));
        failed.and(read)
    })
}

enum PRef {
    Absent,
    Null,
    Id(Box<str>),
}

struct Boundary {
    logical: Option<Box<str>>,
    meta: Option<Value>,
    /// the last message line before it in its session (the cycle fallback)
    last_msg: u32,
    summary: Option<String>,
}

/// The text of a message's content: a string, or its text blocks joined by "\n".
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(a)) => {
            let mut o = String::new();
            for b in a {
                if let Some(t) = s(b.get("text")) {
                    if !o.is_empty() {
                        o.push('\n');
                    }
                    o.push_str(t);
                }
            }
            o
        }
        _ => String::new(),
    }
}

fn truthy(v: &Option<Value>) -> bool {
    matches!(v, Some(Value::Bool(true)))
}

/// Cycles of a parent array (each node one parent): lists of nodes, each cycle once. Linear.
pub(crate) fn cycles(parent: &[u32]) -> Vec<Vec<u32>> {
    let n = parent.len();
    let mut state = vec![0u8; n]; // 0 new, 1 on the current walk, 2 done
    let mut out = Vec::new();
    let mut path: Vec<u32> = Vec::new();
    for start in 0..n {
        if state[start] != 0 {
            continue;
        }
        path.clear();
        let mut x = start as u32;
        while x != NONE && state[x as usize] == 0 {
            state[x as usize] = 1;
            path.push(x);
            x = parent[x as usize];
        }
        if x != NONE && state[x as usize] == 1 {
            let at = path.iter().position(|&p| p == x).expect("on the walk");
            out.push(path[at..].to_vec());
        }
        for &p in &path {
            state[p as usize] = 2;
        }
    }
    out
}

/// Every line's Pi id in one arena, and each uuid's first line in a table of line numbers
/// (keyed hashes of the ids, compared against the arena): about 36 + 4 + 6 bytes a line with a
/// uuid, nothing per line kept twice. The keys are foldhash's, randomly seeded per conversion
/// (a file's ids cannot aim at the table), as the index's key table (`index/mod.rs`).
#[derive(Default)]
pub(crate) struct Ids {
    arena: String,
    /// each id's start in the arena, its low 32 bits
    start: Vec<u32>,
    /// `(first line, high bits)` from which the starts pass a multiple of 2^32 (an arena of
    /// more than 4 GiB of ids: a hostile file of that size)
    high: Vec<(u32, u64)>,
    table: hashbrown::HashTable<u32>,
    keys: foldhash::fast::RandomState,
}

fn id_at<'a>(arena: &'a str, start: &[u32], high: &[(u32, u64)], i: usize) -> &'a str {
    let off = |i: usize| -> usize {
        let lo = start[i] as u64;
        if high.is_empty() {
            return lo as usize;
        }
        let k = high.partition_point(|&(at, _)| at as usize <= i);
        let hi = if k == 0 { 0 } else { high[k - 1].1 };
        (hi | lo) as usize
    };
    let a = off(i);
    let b = if i + 1 < start.len() {
        off(i + 1)
    } else {
        arena.len()
    };
    &arena[a..b]
}

impl Ids {
    fn hash(&self, s: &str) -> u64 {
        use std::hash::BuildHasher;
        self.keys.hash_one(s)
    }
    pub fn get(&self, i: usize) -> &str {
        id_at(&self.arena, &self.start, &self.high, i)
    }
    /// The first line whose uuid is `s`.
    pub fn find(&self, s: &str) -> Option<u32> {
        self.table
            .find(self.hash(s), |&l| self.get(l as usize) == s)
            .copied()
    }
    #[cfg(test)]
    pub fn push_for_test(&mut self, s: &str, index: bool) -> bool {
        self.push(s, index)
    }
    /// Appends the next line's id; `index`: as a uuid that `find` finds (false: a line before
    /// already has it, and it is not indexed).
    fn push(&mut self, s: &str, index: bool) -> bool {
        let off = self.arena.len() as u64;
        let hi = off & !0xffff_ffff;
        if hi != self.high.last().map_or(0, |h| h.1) {
            self.high.push((self.start.len() as u32, hi));
        }
        self.start.push(off as u32);
        self.arena.push_str(s);
        if !index || self.find(s).is_some() {
            return false;
        }
        let h = self.hash(s);
        let line = self.start.len() as u32 - 1;
        let Ids {
            arena,
            start,
            high,
            table,
            keys,
        } = self;
        table.insert_unique(h, line, |&l| {
            use std::hash::BuildHasher;
            keys.hash_one(id_at(arena, start, high, l as usize))
        });
        true
    }
}

/// Pass 1's result: one slot per source line.
struct Plan {
    pid: Ids,
    parent: Vec<u32>,
    out: Vec<u32>,
    flags: Vec<u8>,
    bounds: HashMap<u32, Boundary>,
    groups: Vec<String>,
    leaf: Vec<u32>,
    session: Option<String>,
    cwd: Option<String>,
    ts: Option<String>,
}

fn plan(src: &Path, data: Option<&[u8]>, rep: &mut Report) -> Result<Plan, ConvertError> {
    plan_in(src, data, rep, BATCH)
}

/// Pass 1's plan of what each line's bytes say, in line order (`plan`), and of every problem:
/// `(ids, parents, outputs, flags, leaves, groups, problems)`, the lines read in batches of
/// `batch` bytes. Equal for every batch size (a test's oracle: one batch is one thread).
#[cfg(test)]
#[allow(clippy::type_complexity)]
pub(crate) fn plan_summary(
    data: &[u8],
    batch: usize,
) -> (
    Vec<String>,
    Vec<u32>,
    Vec<u32>,
    Vec<u8>,
    Vec<u32>,
    Vec<String>,
    Vec<(u64, &'static str, String)>,
) {
    let mut rep = Report::default();
    let p = plan_in(Path::new("t.jsonl"), Some(data), &mut rep, batch).expect("a plan");
    (
        (0..p.parent.len())
            .map(|i| p.pid.get(i).to_string())
            .collect(),
        p.parent,
        p.out,
        p.flags,
        p.leaf,
        p.groups,
        rep.problems
            .into_iter()
            .map(|x| (x.line, x.kind, x.message))
            .collect(),
    )
}

fn plan_in(
    src: &Path,
    data: Option<&[u8]>,
    rep: &mut Report,
    batch: usize,
) -> Result<Plan, ConvertError> {
    let mut pid = Ids::default();
    let mut pkind: Vec<u8> = Vec::new(); // 0 no parentUuid, 1 null, 2 a string
    let mut rparent: Vec<u32> = Vec::new();
    let mut forward: Vec<(u32, Box<str>)> = Vec::new();
    let mut flags: Vec<u8> = Vec::new();
    let mut agents: HashMap<u32, Box<str>> = HashMap::new();
    let mut bounds: HashMap<u32, Boundary> = HashMap::new();
    let mut summaries: Vec<(u32, String)> = Vec::new();
    let (mut session, mut cwd, mut ts) = (None, None, None);
    let mut last_msg = NONE;
    let mut n: u32 = 0;
    let records = |b: &Batch| -> Vec<Rec> {
        let mut start = 0;
        b.ends
            .iter()
            .map(|&(end, eol)| {
                let r = record(&b.bytes[start..end], eol);
                start = end;
                r
            })
            .collect()
    };
    let mut pass1_line = |rec: Rec| {
        let mut f = 0u8;
        let mut pref = PRef::Absent;
        let mut uuid: Option<String> = None;
        match &rec.meta {
            Some(m) => {
                if m.utf8_bad {
                    rep.problem(
                        src,
                        n as u64 + 1,
                        "invalid_utf8",
                        "bytes that are not UTF-8: the line keeps its place in the tree and is carried as raw bytes in a custom entry".into(),
                    );
                }
                let ty = s(m.ty.as_ref());
                let sub = s(m.subtype.as_ref());
                if let Some(u) = s(m.uuid.as_ref()) {
                    uuid = Some(u.to_string());
                }
                match &m.parent {
                    None => {}
                    Some(Value::Null) => pref = PRef::Null,
                    Some(Value::String(p)) => pref = PRef::Id(p.as_str().into()),
                    Some(_) => rep.problem(
                        src,
                        n as u64 + 1,
                        "bad_parent_id",
                        "parentUuid is neither a string nor null (read as absent)".into(),
                    ),
                }
                if truthy(&m.sidechain) {
                    f |= F_SIDE;
                }
                if let Some(a) = s(m.agent.as_ref()) {
                    agents.insert(n, a.into());
                }
                if session.is_none() && f & F_SIDE == 0 {
                    session = s(m.session.as_ref()).map(str::to_string);
                }
                if cwd.is_none() {
                    cwd = s(m.cwd.as_ref()).map(str::to_string);
                }
                if ts.is_none() {
                    ts = s(m.timestamp.as_ref()).map(str::to_string);
                }
                let summary = ty == Some("user") && truthy(&m.compact_summary);
                if matches!(ty, Some("user" | "assistant" | "summary" | "custom-title")) || m.has_pi
                {
                    f |= F_FULL;
                }
                if ty == Some("system") && sub == Some("compact_boundary") {
                    f |= F_BOUNDARY | F_MSG | F_FULL;
                    bounds.insert(
                        n,
                        Boundary {
                            logical: s(m.logical.as_ref()).map(Into::into),
                            meta: m.compact.clone(),
                            last_msg,
                            summary: None,
                        },
                    );
                } else if summary {
                    f |= F_SUMMARY;
                    summaries.push((n, m.summary_text.clone().unwrap_or_default()));
                } else if (matches!(ty, Some("user" | "assistant")) && !truthy(&m.is_meta))
                    || (ty == Some("system") && sub == Some("pi_entry") && m.has_pi)
                {
                    f |= F_MSG;
                }
                if f & F_MSG != 0 && f & F_SIDE == 0 {
                    last_msg = n;
                }
            }
            None => {
                if !rec.blank {
                    match rec.unparsed {
                        Unparsed::Bad => {
                            let (kind, what) = if rec.eol {
                                ("malformed_json", "not JSON")
                            } else {
                                ("torn_last_line", "a torn last line (no newline, not JSON)")
                            };
                            rep.problem(src, n as u64 + 1, kind, format!("{what}: carried as raw text in a custom entry"));
                        }
                        Unparsed::Other => rep.problem(
                            src,
                            n as u64 + 1,
                            "not_an_object",
                            "a JSON value that is not an object: carried in a custom entry".into(),
                        ),
                        Unparsed::Object => rep.problem(
                            src,
                            n as u64 + 1,
                            "unreadable_fields",
                            "an object whose fields could not be read (a duplicate key?): carried in a custom entry".into(),
                        ),
                    }
                }
            }
        }
        let fresh = match &uuid {
            Some(u) => match pid.find(u) {
                None => true,
                Some(first) => {
                    rep.problem(
                        src,
                        n as u64 + 1,
                        "duplicate_id",
                        format!(
                            "uuid {u:?} already used on line {}; this line gets a new id",
                            first + 1
                        ),
                    );
                    false
                }
            },
            None => false,
        };
        match uuid {
            Some(u) if fresh => {
                if pid.push(&u, true) {
                    f |= F_UUID;
                }
            }
            _ => {
                let mut g = format!("cc-{n}");
                while pid.find(&g).is_some() {
                    g.push('x');
                }
                pid.push(&g, false);
            }
        }
        let (k, r) = match pref {
            PRef::Absent => (0, NONE),
            PRef::Null => (1, NONE),
            PRef::Id(p) => match pid.find(&p) {
                Some(r) => (2, r),
                None => {
                    forward.push((n, p));
                    (2, NONE)
                }
            },
        };
        pkind.push(k);
        rparent.push(r);
        flags.push(f);
        n += 1;
        rep.lines += 1;
    };
    par_lines(src, data, batch, records, |_, recs| {
        for rec in recs {
            pass1_line(rec);
        }
        Ok(())
    })?;
    let len = n as usize;
    // parents named before their line (a boundary pointing at a later line, hostile order)
    let resolve = |p: &str| pid.find(p);
    let mut unresolved: HashMap<u32, Box<str>> = HashMap::new();
    for (i, p) in forward {
        match resolve(&p) {
            Some(r) => rparent[i as usize] = r,
            None => {
                unresolved.insert(i, p);
            }
        }
    }
    // sidechains: split out only when the file has main-chain lines
    let main_has = (0..len).any(|i| flags[i] & (F_UUID | F_SIDE) == F_UUID);
    let mut out = vec![0u32; len];
    let mut groups: Vec<String> = Vec::new();
    let mut group_of_key: HashMap<String, u32> = HashMap::new();
    if main_has {
        for i in 0..len {
            if flags[i] & F_SIDE == 0 || flags[i] & F_UUID == 0 {
                continue;
            }
            let p = rparent[i];
            let key = if let Some(a) = agents.get(&(i as u32)) {
                format!("agent-{a}")
            } else if p != NONE && (p as usize) < i && out[p as usize] != 0 {
                groups[out[p as usize] as usize - 1].clone()
            } else {
                format!("root-{}", pid.get(i))
            };
            let g = match group_of_key.get(&key) {
                Some(&g) => g,
                None => {
                    groups.push(key.clone());
                    group_of_key.insert(key, groups.len() as u32);
                    groups.len() as u32
                }
            };
            out[i] = g;
        }
    }
    let nout = groups.len() + 1;
    // the summary of each boundary: the first compact summary whose parent is it
    for (line, text) in summaries {
        let p = rparent[line as usize];
        if p != NONE {
            if let Some(b) = bounds.get_mut(&p) {
                if b.summary.is_none() {
                    b.summary = Some(text);
                }
            }
        }
    }
    // effective parents
    let mut parent = vec![NONE; len];
    let mut prev = vec![NONE; nout];
    for i in 0..len {
        let o = out[i] as usize;
        let same = |r: u32| r != NONE && out[r as usize] as usize == o;
        parent[i] = match pkind[i] {
            2 => {
                let r = rparent[i];
                let p = unresolved.get(&(i as u32)).map_or("", |x| &**x);
                if same(r) {
                    r
                } else if r != NONE {
                    NONE // a sidechain's root under a main-chain line: parentSession says it
                } else {
                    rep.problem(
                        src,
                        i as u64 + 1,
                        "orphan",
                        format!("parentUuid {p:?} names no line: hung under the previous line"),
                    );
                    prev[o]
                }
            }
            1 => match bounds.get(&(i as u32)).and_then(|b| b.logical.as_deref()) {
                Some(l) => match resolve(l) {
                    Some(r) if same(r) => r,
                    _ => {
                        rep.problem(
                            src,
                            i as u64 + 1,
                            "orphan",
                            format!("logicalParentUuid {l:?} names no line of this session: hung under the previous line"),
                        );
                        prev[o]
                    }
                },
                None => NONE,
            },
            _ => prev[o],
        };
        prev[o] = i as u32;
    }
    // cycles: a boundary under its own logical parent hangs under the last preserved message
    for c in cycles(&parent) {
        let b = c.iter().copied().find(|x| bounds.contains_key(x));
        if let Some(b) = b {
            let bd = &bounds[&b];
            let mut fb = bd.last_msg;
            if let Some(list) = bd
                .meta
                .as_ref()
                .and_then(|m| m.get("preservedMessages"))
                .and_then(|p| p.get("uuids"))
                .and_then(Value::as_array)
            {
                if let Some(r) = list
                    .iter()
                    .rev()
                    .filter_map(|u| u.as_str().and_then(resolve))
                    .find(|&r| r < b && out[r as usize] == out[b as usize])
                {
                    fb = r;
                }
            }
            rep.problem(
                src,
                b as u64 + 1,
                "boundary_cycle",
                "the compact boundary's logicalParentUuid is under the boundary: linked to the last preserved message before it".into(),
            );
            parent[b as usize] = if fb != NONE && out[fb as usize] == out[b as usize] {
                fb
            } else {
                NONE
            };
        }
    }
    for c in cycles(&parent) {
        let first = *c.iter().min().expect("a cycle has a line");
        rep.problem(
            src,
            first as u64 + 1,
            "parent_cycle",
            format!(
                "parentUuid cycle through {} lines: cut here (this line becomes a root)",
                c.len()
            ),
        );
        parent[first as usize] = NONE;
    }
    let mut leaf = vec![NONE; nout];
    for i in 0..len {
        if flags[i] & F_MSG != 0 {
            leaf[out[i] as usize] = i as u32;
        }
    }
    Ok(Plan {
        pid,
        parent,
        out,
        flags,
        bounds,
        groups,
        leaf,
        session,
        cwd,
        ts,
    })
}

raw_struct!(
    /// The fields pass 2 reads of every line.
    Line {
        ty => "type",
        subtype => "subtype",
        is_meta => "isMeta",
        timestamp => "timestamp",
        message => "message",
        pi_entry => "piEntry",
    }
);
raw_struct!(
    /// The fields of a `message` the mapping reads.
    Msg {
        content => "content",
        model => "model",
        usage => "usage",
        stop_reason => "stop_reason",
        id => "id",
    }
);
raw_struct!(
    /// The fields of a content block the mapping reads (any block type).
    Block {
        ty => "type",
        text => "text",
        thinking => "thinking",
        signature => "signature",
        data => "data",
        id => "id",
        name => "name",
        input => "input",
        tool_use_id => "tool_use_id",
        content => "content",
        is_error => "is_error",
        source => "source",
    }
);
raw_struct!(ImgSrc { ty => "type", data => "data", media_type => "media_type", url => "url" });
raw_struct!(Usage {
    input => "input_tokens",
    output => "output_tokens",
    cache_read => "cache_read_input_tokens",
    cache_write => "cache_creation_input_tokens",
});

type Res<T> = Result<T, serde_json::Error>;

/// The blocks of a content array (a non-object element reads as a block without fields).
fn blocks(content: Option<&RawValue>) -> Res<Vec<Block<'_>>> {
    raw::elements(content)?
        .into_iter()
        .map(|e| raw::object(Some(e)))
        .collect()
}

/// Pi usage from a Claude Code `usage` object (no cost in the transcripts: 0).
fn usage(w: &mut W<'_>, u: Option<&RawValue>) -> Res<()> {
    let u: Usage = raw::object(u)?;
    let (i, o, cr, cw) = (
        raw::count(u.input),
        raw::count(u.output),
        raw::count(u.cache_read),
        raw::count(u.cache_write),
    );
    let total = i.wrapping_add(o).wrapping_add(cr).wrapping_add(cw);
    raw::usage(w, i, o, cr, cw, total, None);
    Ok(())
}

/// A text block `{"text","type":"text"}` of a string field (`""` when not a string).
fn text_block(w: &mut W<'_>, t: Option<&RawValue>) {
    w.lit("{\"text\":")
        .tok_or_empty(t)
        .lit(",\"type\":\"text\"}");
}

/// An `image` block: base64 source -> Pi image; a URL -> a text naming it; else nothing.
fn image(w: &mut W<'_>, b: &Block<'_>) -> Res<bool> {
    if b.source.is_none() {
        return Ok(false);
    }
    let src: ImgSrc = raw::object(b.source)?;
    if raw::str_of(src.ty).as_deref() == Some("base64") {
        w.lit("{\"data\":")
            .tok_or_empty(src.data)
            .lit(",\"mimeType\":");
        match raw::str_tok(src.media_type) {
            Some(t) => w.lit(t),
            None => w.lit("\"image/png\""),
        };
        w.lit(",\"type\":\"image\"}");
        Ok(true)
    } else if let Some(u) = raw::str_of(src.url) {
        w.lit("{\"text\":")
            .str(&format!("[image: {u}]"))
            .lit(",\"type\":\"text\"}");
        Ok(true)
    } else {
        Ok(false)
    }
}

/// User-side blocks (text, image) as Pi content blocks, comma-separated; how many.
fn user_blocks(w: &mut W<'_>, a: &[Block<'_>]) -> Res<usize> {
    let mut k = 0;
    for b in a {
        let at = w.0.len();
        if k > 0 {
            w.lit(",");
        }
        let wrote = match raw::str_of(b.ty).as_deref() {
            Some("text") => {
                text_block(w, b.text);
                true
            }
            Some("image") => image(w, b)?,
            _ => false,
        };
        if wrote {
            k += 1;
        } else {
            w.0.truncate(at);
        }
    }
    Ok(k)
}

/// A tool result's content: a string -> one text block; blocks -> their text and images.
fn result_content(w: &mut W<'_>, c: Option<&RawValue>) -> Res<()> {
    w.lit("[");
    match raw::kind(c) {
        b'"' => text_block(w, c),
        b'[' => {
            user_blocks(w, &blocks(c)?)?;
        }
        _ => {}
    }
    w.lit("]");
    Ok(())
}

fn message_made(body: Vec<u8>) -> Made {
    Made {
        ty: Cow::Borrowed("message"),
        fields: vec![],
        body: Some(body),
        holes: vec![],
        extra: None,
        message: true,
    }
}

/// The Pi messages of a main-chain `user` or `assistant` line (`None`: the line has no
/// `message.content` and becomes a custom entry). Errors: a field given twice.
fn make_message(
    user: bool,
    message: Option<&RawValue>,
    ts_ms: i64,
    cx: &Ctx<'_>,
    n: u32,
    evs: &mut Vec<Ev>,
) -> Res<Option<Vec<Made>>> {
    let msg: Msg = raw::object(message)?;
    let Some(content) = msg.content else {
        return Ok(None);
    };
    let cap = content.get().len() + 256;
    if user {
        return Ok(Some(match raw::kind(Some(content)) {
            b'[' => {
                let a = blocks(Some(content))?;
                let mut made = Vec::new();
                for b in a
                    .iter()
                    .filter(|b| raw::str_of(b.ty).as_deref() == Some("tool_result"))
                {
                    let call = raw::str_of(b.tool_use_id);
                    let call = {
                        use std::hash::BuildHasher;
                        cx.keys.hash_one(call.as_deref().unwrap_or(""))
                    };
                    let mut body = Vec::with_capacity(cap);
                    let mut w = W(&mut body);
                    w.lit("{\"content\":");
                    result_content(&mut w, b.content)?;
                    w.lit(",\"isError\":")
                        .lit(if raw::is_true(b.is_error) {
                            "true"
                        } else {
                            "false"
                        })
                        .lit(",\"role\":\"toolResult\",\"timestamp\":")
                        .int(ts_ms)
                        .lit(",\"toolCallId\":")
                        .tok_or_empty(b.tool_use_id)
                        .lit(",\"toolName\":");
                    // the name, from the tool call before it: filled in by `Merge::emit`
                    let hole = body.len();
                    body.push(b'}');
                    let mut m = message_made(body);
                    m.holes.push((hole, call));
                    made.push(m);
                }
                let mut body = Vec::with_capacity(cap);
                let mut w = W(&mut body);
                w.lit("{\"content\":[");
                let k = user_blocks(&mut w, &a)?;
                if k > 0 || made.is_empty() {
                    w.lit("],\"role\":\"user\",\"timestamp\":")
                        .int(ts_ms)
                        .lit("}");
                    made.push(message_made(body));
                }
                made
            }
            b'"' => {
                let mut body = Vec::with_capacity(cap);
                W(&mut body)
                    .lit("{\"content\":")
                    .raw(content)
                    .lit(",\"role\":\"user\",\"timestamp\":")
                    .int(ts_ms)
                    .lit("}");
                vec![message_made(body)]
            }
            _ => vec![custom("claude-code:user".into())],
        }));
    }
    let mut body = Vec::with_capacity(cap);
    let mut w = W(&mut body);
    w.lit("{\"api\":\"anthropic-messages\",\"content\":[");
    let mut calls = false;
    match raw::kind(Some(content)) {
        b'"' => text_block(&mut w, Some(content)),
        b'[' => {
            let mut first = true;
            for b in blocks(Some(content))? {
                let ty = raw::str_of(b.ty);
                let sep = if first { "" } else { "," };
                match ty.as_deref() {
                    Some("text") => {
                        w.lit(sep);
                        text_block(&mut w, b.text);
                    }
                    Some("thinking") => {
                        w.lit(sep).lit("{\"thinking\":").tok_or_empty(b.thinking);
                        if let Some(sig) = raw::str_tok(b.signature) {
                            w.lit(",\"thinkingSignature\":").lit(sig);
                        }
                        w.lit(",\"type\":\"thinking\"}");
                    }
                    Some("redacted_thinking") => {
                        w.lit(sep)
                            .lit("{\"redacted\":true,\"thinking\":\"\",\"thinkingSignature\":")
                            .tok_or_empty(b.data)
                            .lit(",\"type\":\"thinking\"}");
                    }
                    Some("tool_use" | "server_tool_use" | "mcp_tool_use") => {
                        calls = true;
                        let name = raw::str_of(b.name);
                        let name = name.as_deref().unwrap_or("");
                        {
                            use std::hash::BuildHasher;
                            let id = raw::str_of(b.id);
                            let h = cx.keys.hash_one(id.as_deref().unwrap_or(""));
                            evs.push(Ev::Use(n, h, name.to_string()));
                        }
                        w.lit(sep).lit("{\"arguments\":");
                        match (raw::kind(b.input), b.input) {
                            (b'{', Some(i)) => {
                                w.raw(i);
                            }
                            (0 | b'n', _) => {
                                w.lit("{}");
                            }
                            (_, Some(i)) => {
                                w.lit("{\"input\":").raw(i).lit("}");
                            }
                            (_, None) => unreachable!("kind 0 is absent"),
                        }
                        w.lit(",\"id\":")
                            .tok_or_empty(b.id)
                            .lit(",\"name\":")
                            .tok_or_empty(b.name)
                            .lit(",\"type\":\"toolCall\"}");
                    }
                    _ => continue,
                }
                first = false;
            }
        }
        _ => {}
    }
    let stop = match raw::str_of(msg.stop_reason).as_deref() {
        Some("tool_use") => "toolUse",
        Some("max_tokens" | "model_context_window_exceeded") => "length",
        Some(_) => "stop",
        None if calls => "toolUse",
        None => "stop",
    };
    w.lit("],\"model\":").tok_or_empty(msg.model);
    w.lit(",\"provider\":\"anthropic\"");
    if let Some(rid) = raw::str_tok(msg.id) {
        w.lit(",\"responseId\":").lit(rid);
    }
    w.lit(",\"role\":\"assistant\",\"stopReason\":\"")
        .lit(stop)
        .lit("\",\"timestamp\":")
        .int(ts_ms)
        .lit(",\"usage\":");
    usage(&mut w, msg.usage)?;
    w.lit("}");
    Ok(Some(vec![message_made(body)]))
}

/// The `customType` of a line kept as a custom entry: `claude-code:<type>[:<subtype>|:meta]`
/// (`claude-code:compact-summary` for a compaction's summary line).
fn custom_kind(ty: Option<&str>, sub: Option<&str>, is_meta: bool, flags: u8) -> String {
    if flags & F_SUMMARY != 0 {
        return "claude-code:compact-summary".into();
    }
    let ty = ty.unwrap_or("");
    let mut k = format!("claude-code:{}", if ty.is_empty() { "untyped" } else { ty });
    if let Some(sub) = sub {
        k.push(':');
        k.push_str(sub);
    } else if is_meta {
        k.push_str(":meta");
    }
    k
}

/// Pi's entries for one parsed line: (type, fields); several for a user line of tool results.
struct Made {
    /// the entry's type: Pi's, or a restored entry's own (one Pi 1.6 does not know)
    ty: Cow<'static, str>,
    fields: Vec<(&'static str, Value)>,
    /// a message entry's `message` object, written
    body: Option<Vec<u8>>,
    /// `(offset in body, keyed hash of the call id)`: where a tool result's `toolName` goes
    holes: Vec<(usize, u64)>,
    /// a restored Pi entry's own fields
    extra: Option<Map<String, Value>>,
    message: bool,
}

fn custom(kind: String) -> Made {
    Made {
        ty: Cow::Borrowed("custom"),
        fields: vec![("customType", Value::String(kind))],
        body: None,
        holes: vec![],
        extra: None,
        message: false,
    }
}

/// What pass 2 reads of every line, shared by the threads that convert them.
struct Ctx<'a> {
    /// the keys of the tool call ids' hashes
    keys: std::collections::hash_map::RandomState,
    plan: &'a Plan,
    /// the first line is a Pi header (it makes no entry)
    pi_header: bool,
    /// the entries in their own version under a header now at version 3 (`super::legacy`)
    migration: Option<&'a super::legacy::Migration>,
}

/// The entries of a line read whole (a restored Pi entry, a compaction boundary, a summary,
/// a title; anything else a custom entry). Main-chain messages: `make_message`.
fn make(m: &Map<String, Value>, n: u32, cx: &Ctx<'_>) -> Vec<Made> {
    let ty = s(m.get("type")).unwrap_or("");
    let sub = s(m.get("subtype"));
    let flags = cx.plan.flags[n as usize];
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
            return vec![Made {
                ty: super::pi_entry_type(t),
                fields: vec![],
                body: None,
                holes: vec![],
                extra: Some(extra),
                message: t == "message",
            }];
        }
    }
    match ty {
        "system" if flags & F_BOUNDARY != 0 => {
            let bd = &cx.plan.bounds[&n];
            let meta = bd.meta.as_ref();
            let find = |u: Option<&str>| {
                u.and_then(|u| cx.plan.pid.find(u))
                    .filter(|&r| r != n && cx.plan.out[r as usize] == cx.plan.out[n as usize])
            };
            let kept = find(s(meta
                .and_then(|m| m.get("preservedSegment"))
                .and_then(|p| p.get("headUuid"))))
            .or_else(|| {
                find(s(meta
                    .and_then(|m| m.get("preservedMessages"))
                    .and_then(|p| p.get("uuids"))
                    .and_then(|u| u.get(0))))
            })
            .unwrap_or(n);
            let tokens = meta
                .and_then(|m| m.get("preTokens"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let summary = bd
                .summary
                .clone()
                .unwrap_or_else(|| s(m.get("content")).unwrap_or("").to_string());
            vec![Made {
                ty: Cow::Borrowed("compaction"),
                fields: vec![
                    ("summary", Value::String(summary)),
                    (
                        "firstKeptEntryId",
                        Value::String(cx.plan.pid.get(kept as usize).to_string()),
                    ),
                    ("tokensBefore", json!(tokens)),
                ],
                body: None,
                holes: vec![],
                extra: None,
                message: false,
            }]
        }
        "system" if sub == Some("pi_entry") && flags & F_MSG != 0 => match m.get("piEntry") {
            Some(Value::Object(e)) if s(e.get("type")).is_some_and(|t| t != "session") => {
                let mut extra = Map::new();
                for (k, v) in e {
                    if !matches!(
                        k.as_str(),
                        "type" | "id" | "parentId" | "timestamp" | "source"
                    ) {
                        extra.insert(k.clone(), v.clone());
                    }
                }
                vec![Made {
                    ty: super::pi_entry_type(s(e.get("type")).expect("checked")),
                    fields: vec![],
                    body: None,
                    holes: vec![],
                    extra: Some(extra),
                    message: s(e.get("type")) == Some("message"),
                }]
            }
            _ => vec![custom("claude-code:system:pi_entry".into())],
        },
        "summary" => {
            let text = s(m.get("summary")).unwrap_or("").to_string();
            match s(m.get("leafUuid")).and_then(|u| cx.plan.pid.find(u)) {
                Some(r) => vec![Made {
                    ty: Cow::Borrowed("label"),
                    fields: vec![
                        (
                            "targetId",
                            Value::String(cx.plan.pid.get(r as usize).to_string()),
                        ),
                        ("label", Value::String(text)),
                    ],
                    body: None,
                    holes: vec![],
                    extra: None,
                    message: false,
                }],
                None => vec![Made {
                    ty: Cow::Borrowed("session_info"),
                    fields: vec![("name", Value::String(text))],
                    body: None,
                    holes: vec![],
                    extra: None,
                    message: false,
                }],
            }
        }
        "custom-title" if s(m.get("customTitle")).is_some() => vec![Made {
            ty: Cow::Borrowed("session_info"),
            fields: vec![("name", m["customTitle"].clone())],
            body: None,
            holes: vec![],
            extra: None,
            message: false,
        }],
        _ => vec![custom(custom_kind(
            Some(ty),
            sub,
            m.get("isMeta") == Some(&Value::Bool(true)),
            flags,
        ))],
    }
}

/// Pass 2's one state that crosses lines, in line order: each tool call's name, which a tool
/// result after it names (applied by `Merge::emit` on the thread that writes).
enum Ev {
    /// line `n`'s tool call: the keyed hash of its id, its name
    Use(u32, u64, String),
    /// line `n`'s tool result: its `toolName` goes at byte `at` of the part (keyed hash of its call id)
    Hole(u32, usize, u64),
}

impl Ev {
    fn line(&self) -> u32 {
        match self {
            Ev::Use(n, ..) | Ev::Hole(n, ..) => *n,
        }
    }
}

/// The Pi entries of a batch of lines (`convert_batch`), tool names left as holes.
#[derive(Default)]
struct Part {
    /// lines at the batch's start left to the merging thread: before the batch's first
    /// timestamp, their entries take the timestamp of the lines before the batch
    skip: usize,
    bytes: Vec<u8>,
    /// each converted line: its number and the end of its entries in `bytes`
    lines: Vec<(u32, usize)>,
    evs: Vec<Ev>,
    /// the timestamp after the batch's last line (None: no line of it has one)
    ts: Option<String>,
    /// the report's counts: entries, messages, compactions, custom entries
    counts: [u64; 4],
}

impl Part {
    fn clear(&mut self) {
        self.bytes.clear();
        self.lines.clear();
        self.evs.clear();
        self.counts = [0; 4];
    }
}

/// A batch's Pi entries (on a worker thread). The lines before its first timestamp are left to
/// the merging thread (`Part::skip`) unless it is the first batch (`ts0` before it).
fn convert_batch(b: &Batch, cx: &Ctx<'_>, ts0: &str, mut bytes: Vec<u8>) -> Part {
    // the entries carry each line and add the Pi entry: room for both, no regrowth
    bytes.clear();
    bytes.reserve(b.bytes.len() * 3);
    let mut part = Part {
        bytes,
        ..Part::default()
    };
    let mut known = b.first == 0;
    let mut last_ts = if known {
        ts0.to_string()
    } else {
        String::new()
    };
    let mut start = 0;
    for (j, &(end, eol)) in b.ends.iter().enumerate() {
        let own = line_out(
            &b.bytes[start..end],
            eol,
            b.first + j as u32,
            cx,
            &mut last_ts,
            &mut part,
        );
        start = end;
        if !known && !own {
            part.clear();
            part.skip += 1;
        } else {
            known = true;
        }
    }
    part.ts = known.then_some(last_ts);
    part
}

/// Pass 2 on line `n`: its entries appended to `part`; `last_ts`, the timestamp of the lines
/// before, updated. True when the line has a timestamp of its own (then its entries do not
/// depend on the lines before it).
fn line_out(
    line: &[u8],
    eol: bool,
    n: u32,
    cx: &Ctx<'_>,
    last_ts: &mut String,
    part: &mut Part,
) -> bool {
    if n == 0 && cx.pi_header {
        // the header line: on no chain (nothing under it), it makes no entry
        return false;
    }
    let plan = cx.plan;
    let i = n as usize;
    let parent = plan.parent[i];
    let parent_id = (parent != NONE).then(|| plan.pid.get(parent as usize));
    let id = plan.pid.get(i);
    let uuid = (plan.flags[i] & F_UUID != 0).then_some(id);
    let starts = line.iter().find(|c| !c.is_ascii_whitespace()) == Some(&b'{');
    // a line that is not UTF-8 (even in a field no rule reads) is carried as raw bytes,
    // never copied into the Pi file as JSON text
    let utf8 = simdutf8::basic::from_utf8(line).is_ok();
    let flags = plan.flags[i];
    // the fields every line needs, borrowed from it (None: not an object, or a field
    // given twice: the line is read whole below)
    let head = if starts && utf8 {
        serde_json::from_slice::<Line>(line).ok()
    } else {
        None
    };
    let ty = head.as_ref().and_then(|h| raw::str_of(h.ty));
    let custom_of = |h: &Line<'_>| {
        custom(custom_kind(
            ty.as_deref(),
            raw::str_of(h.subtype).as_deref(),
            raw::is_true(h.is_meta),
            flags,
        ))
    };
    // a main-chain message, read through borrowed fields; a line with an escaped
    // surrogate is read whole first (a lone one is not JSON text Pi can hold)
    let message = head.as_ref().filter(|h| {
        flags & F_MSG != 0
            && h.pi_entry.is_none()
            && matches!(ty.as_deref(), Some("user" | "assistant"))
            && (!raw::may_have_surrogate(line) || serde_json::from_slice::<Value>(line).is_ok())
    });
    let mut parsed = super::Parsed::Other;
    let mut own = false;
    let mut set_ts = |h: &Line<'_>, last_ts: &mut String| {
        if let Some(t) = raw::str_of(h.timestamp) {
            last_ts.clear();
            last_ts.push_str(&t);
            own = true;
        }
    };
    let evs = &mut part.evs;
    let (made, carried) = match (&head, message) {
        (Some(h), _) if flags & F_FULL == 0 => {
            set_ts(h, last_ts);
            (vec![custom_of(h)], Carried::Json(line, eol))
        }
        (Some(h), Some(_)) => {
            set_ts(h, last_ts);
            let user = ty.as_deref() == Some("user");
            let ts_ms = ms_of(last_ts);
            let made = match make_message(user, h.message, ts_ms, cx, n, evs) {
                Ok(made) => made,
                // a field given twice inside the message: read as the whole-line parse
                // reads it (the last one), the line itself still carried as it is
                Err(_) => match super::parse_line(line) {
                    super::Parsed::Object(m) => {
                        let text = serde_json::to_vec(&m).expect("a map serializes");
                        serde_json::from_slice::<Line>(&text)
                            .ok()
                            .and_then(|h2| make_message(user, h2.message, ts_ms, cx, n, evs).ok())
                            .flatten()
                    }
                    _ => None,
                },
            };
            (
                made.unwrap_or_else(|| vec![custom_of(h)]),
                Carried::Json(line, eol),
            )
        }
        _ => {
            parsed = if super::is_blank(line) || !utf8 {
                super::Parsed::Bad
            } else {
                super::parse_line(line)
            };
            match &parsed {
                super::Parsed::Object(m) => {
                    if let Some(t) = s(m.get("timestamp")) {
                        *last_ts = t.to_string();
                        own = true;
                    }
                    (make(m, n, cx), Carried::Json(line, eol))
                }
                super::Parsed::Other => (
                    vec![custom("claude-code:unparsed".into())],
                    Carried::Json(line, eol),
                ),
                super::Parsed::Bad => (
                    vec![custom("claude-code:unparsed".into())],
                    Carried::Raw(line, eol),
                ),
            }
        }
    };
    let mut made = made;
    if let Some(m) = cx.migration.filter(|m| m.carries(n)) {
        // an entry in its own version under the header now at version 3
        if let Some(e) = made.last_mut() {
            if let Some(x) = e.extra.as_mut() {
                m.apply(&e.ty, x, |line| plan.pid.get(line as usize).to_string());
            }
        }
    }
    let k = made.len();
    let mut prev_id: Option<String> = parent_id.map(str::to_string);
    let buf = &mut part.bytes;
    for (j, e) in made.into_iter().enumerate() {
        let this = if j + 1 == k {
            id.to_string()
        } else {
            format!("{id}#{}", j + 1)
        };
        let ts = match &parsed {
            super::Parsed::Object(m) if m.get("piEntry").is_some() && flags & F_MSG != 0 => m
                .get("piEntry")
                .and_then(|p| s(p.get("timestamp")))
                .unwrap_or(last_ts)
                .to_string(),
            _ => last_ts.clone(),
        };
        let mut w = EntryOut { buf: &mut *buf };
        w.begin(&e.ty, &this, prev_id.as_deref(), &ts);
        for (key, v) in &e.fields {
            w.field(key, v);
        }
        if let Some(b) = &e.body {
            w.field_raw("message", b);
            let at = w.buf.len() - b.len();
            for &(off, call) in &e.holes {
                part.evs.push(Ev::Hole(n, at + off, call));
            }
        }
        if let Some(x) = &e.extra {
            for (key, v) in x {
                w.field(key, v);
            }
        }
        let c = if j + 1 == k {
            carried
        } else {
            Carried::Part(j as u32)
        };
        w.source(Format::ClaudeCode, uuid, n as u64, c);
        part.counts[0] += 1;
        if e.message {
            part.counts[1] += 1;
        } else if e.ty == "compaction" {
            part.counts[2] += 1;
        } else if e.ty == "custom" {
            part.counts[3] += 1;
        }
        prev_id = Some(this);
    }
    part.lines.push((n, buf.len()));
    own
}

/// The merging thread's state: the tool names, the outputs, the leaves held back.
struct Merge<'a> {
    plan: &'a Plan,
    /// tool names by a keyed hash of the tool_use id, into `tools` (few distinct names)
    names: HashMap<u64, u32>,
    tools: Vec<String>,
    /// each of `tools` as JSON text
    esc: Vec<Vec<u8>>,
    /// each output's leaf entries, written last
    stash: Vec<Option<Vec<u8>>>,
    slots: Vec<usize>,
    /// the timestamp after the lines merged
    last_ts: String,
}

impl Merge<'_> {
    /// Writes a part's entries, each tool result's name filled in from the calls before it.
    fn emit(
        &mut self,
        part: &Part,
        outs: &mut super::out::Outputs,
        rep: &mut Report,
    ) -> Result<(), ConvertError> {
        let plan = self.plan;
        let mut ev = part.evs.iter().peekable();
        // a run of whole lines for one output, written at once
        let mut run: Option<(usize, usize)> = None; // (slot, start)
        let mut start = 0;
        let mut filled: Vec<u8> = Vec::new();
        for &(n, end) in &part.lines {
            let o = plan.out[n as usize] as usize;
            let slot = self.slots[o];
            let leaf = plan.leaf[o] == n;
            filled.clear();
            let mut pos = start;
            let mut holes = false;
            while let Some(e) = ev.next_if(|e| e.line() == n) {
                match e {
                    Ev::Use(_, h, name) => {
                        let k = match self.tools.iter().position(|t| t == name) {
                            Some(k) => Some(k),
                            None if self.tools.len() < 4096 => {
                                self.tools.push(name.clone());
                                let mut e = Vec::new();
                                super::push_str(&mut e, name);
                                self.esc.push(e);
                                Some(self.tools.len() - 1)
                            }
                            None => None,
                        };
                        if let Some(k) = k {
                            self.names.insert(*h, k as u32);
                        }
                    }
                    Ev::Hole(_, at, h) => {
                        holes = true;
                        filled.extend_from_slice(&part.bytes[pos..*at]);
                        match self.names.get(h) {
                            Some(&k) => filled.extend_from_slice(&self.esc[k as usize]),
                            None => filled.extend_from_slice(b"\"\""),
                        }
                        pos = *at;
                    }
                }
            }
            if holes || leaf || run.is_some_and(|(s, _)| s != slot) {
                if let Some((s, a)) = run.take() {
                    outs.write(s, &part.bytes[a..start])?;
                }
            }
            if holes || leaf {
                filled.extend_from_slice(&part.bytes[pos..end]);
                if leaf {
                    self.stash[o] = Some(std::mem::take(&mut filled));
                } else {
                    outs.write(slot, &filled)?;
                }
            } else if run.is_none() {
                run = Some((slot, start));
            }
            start = end;
        }
        if let Some((s, a)) = run {
            outs.write(s, &part.bytes[a..start])?;
        }
        rep.written += part.counts[0];
        rep.messages += part.counts[1];
        rep.compactions += part.counts[2];
        rep.custom += part.counts[3];
        Ok(())
    }
}

/// Converts one Claude Code file and, for a top-level file read from disk, its subagent files.
/// `data`: its bytes when held in memory; `shown`: the path the headers give the main output (`out`
/// itself, or the same file by another path).
pub fn convert(
    src: &Path,
    data: Option<&[u8]>,
    out: &Path,
    shown: &Path,
    parent_session: Option<(&Path, &str)>,
    outs: &mut super::out::Outputs,
    rep: &mut Report,
) -> Result<(), ConvertError> {
    convert_in(src, data, out, shown, parent_session, outs, rep, BATCH2)
}

/// `convert` with pass 2's lines converted in batches of `batch` bytes (the output is the same
/// for every size: a test's oracle is one batch, every line converted in order on one thread).
#[allow(clippy::too_many_arguments)]
pub(crate) fn convert_in(
    src: &Path,
    data: Option<&[u8]>,
    out: &Path,
    shown: &Path,
    parent_session: Option<(&Path, &str)>,
    outs: &mut super::out::Outputs,
    rep: &mut Report,
    batch: usize,
) -> Result<(), ConvertError> {
    let plan = plan(src, data, rep)?;
    // subagent files: <dir>/<stem>/subagents/*.jsonl
    let mut subagents: Vec<PathBuf> = Vec::new();
    if parent_session.is_none() && data.is_none() {
        if let (Some(dir), Some(stem)) = (src.parent(), src.file_stem()) {
            let sd = dir.join(stem).join("subagents");
            if let Ok(rd) = std::fs::read_dir(&sd) {
                for e in rd.flatten() {
                    let p = e.path();
                    if p.extension().is_some_and(|x| x == "jsonl") && p.is_file() {
                        subagents.push(p);
                    }
                }
            }
            subagents.sort();
        }
    }
    let name_of = |p: &Path| {
        p.file_name()
            .map(|x| x.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let mut side_paths: Vec<PathBuf> = Vec::new();
    // each side session's tag told apart from those before it: the first repeats of a tag end
    // in `x`, `xx`, `xxx`, later ones in `x<n>` (a file of many groups whose names agree in
    // their first 80 characters: linear time, names of bounded length)
    let mut used: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut next: HashMap<String, usize> = HashMap::new();
    let mut uniq = |tag: String| {
        if used.insert(tag.clone()) {
            return tag;
        }
        let n = next.entry(tag.clone()).or_insert(0);
        loop {
            *n += 1;
            let t = if *n <= 3 {
                format!("{tag}{}", "x".repeat(*n))
            } else {
                format!("{tag}x{n}")
            };
            if used.insert(t.clone()) {
                return t;
            }
        }
    };
    for g in &plan.groups {
        side_paths.push(super::beside(
            out,
            &uniq(format!("sidechain-{}", safe_name(g))),
        ));
    }
    let sub_paths: Vec<PathBuf> = subagents
        .iter()
        .map(|p| {
            let stem = p
                .file_stem()
                .map(|x| x.to_string_lossy().into_owned())
                .unwrap_or_default();
            super::beside(out, &uniq(format!("subagent-{}", safe_name(&stem))))
        })
        .collect();
    // the side sessions named in the header's side field
    let mut lists = Vec::new();
    lists.extend_from_slice(b",\"sidechains\":[");
    for (i, p) in side_paths.iter().enumerate() {
        if i > 0 {
            lists.push(b',');
        }
        push_str(&mut lists, &name_of(p));
    }
    lists.extend_from_slice(b"],\"subagents\":[");
    for (i, (p, sp)) in sub_paths.iter().zip(&subagents).enumerate() {
        if i > 0 {
            lists.push(b',');
        }
        lists.extend_from_slice(b"{\"file\":");
        push_str(&mut lists, &name_of(p));
        lists.extend_from_slice(b",\"path\":");
        push_str(&mut lists, &format!("subagents/{}", name_of(sp)));
        lists.push(b'}');
    }
    lists.extend_from_slice(b"]");
    // a main session written by `from_pi` from a Pi session: its first line carries the Pi
    // header, given back as it was (read at most `HEADER_PEEK` bytes in: a longer first line
    // is no such line); a header older than version 3 over lines of Claude Code's own is
    // written at version 3, the entries in their own version migrated (`super::legacy`)
    let (pi_header, migration) = if parent_session.is_none() {
        let r: Box<dyn std::io::Read + '_> = match data {
            Some(d) => Box::new(d),
            None => Box::new(std::fs::File::open(src).map_err(io_err(src))?),
        };
        let mut first = super::Lines::new(std::io::Read::take(r, HEADER_PEEK));
        match first.next_line().map_err(io_err(src))? {
            Some((line, true)) => match super::back::header_carried(line, Format::ClaudeCode) {
                Some(h) => {
                    let (h, m) = super::legacy::carried_header(
                        h,
                        line,
                        src,
                        data,
                        Format::ClaudeCode,
                        &lists,
                    )?;
                    (Some(h), m)
                }
                None => (None, None),
            },
            _ => (None, None),
        }
    } else {
        (None, None)
    };
    // headers
    let main_slot = outs.open(out)?;
    let mut src_field = Vec::new();
    src_field.extend_from_slice(b"{\"format\":\"claude-code\",\"file\":");
    push_str(&mut src_field, &name_of(src));
    if let Some((_, role)) = parent_session {
        src_field.extend_from_slice(b",\"role\":");
        push_str(&mut src_field, role);
    }
    src_field.extend_from_slice(&lists);
    src_field.push(b'}');
    let stem = src
        .file_stem()
        .map(|x| x.to_string_lossy().into_owned())
        .unwrap_or_default();
    let sid = plan.session.clone().unwrap_or_else(|| stem.clone());
    let ts0 = plan
        .ts
        .clone()
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".into());
    let cwd = plan.cwd.clone().unwrap_or_default();
    let ps = parent_session.map(|(p, _)| p.display().to_string());
    match &pi_header {
        Some(h) => outs.write(main_slot, h)?,
        None => outs.write(
            main_slot,
            &super::header(&sid, &ts0, &cwd, ps.as_deref(), &src_field),
        )?,
    }
    let mut slots = vec![main_slot];
    let out_s = shown.display().to_string();
    for (g, p) in plan.groups.iter().zip(&side_paths) {
        let slot = outs.open(p)?;
        let mut f = Vec::new();
        f.extend_from_slice(b"{\"format\":\"claude-code\",\"sidechainOf\":");
        push_str(&mut f, &name_of(out));
        f.extend_from_slice(b",\"key\":");
        push_str(&mut f, g);
        f.push(b'}');
        outs.write(
            slot,
            &super::header(
                &format!("{sid}.{}", safe_name(g)),
                &ts0,
                &cwd,
                Some(&out_s),
                &f,
            ),
        )?;
        slots.push(slot);
    }
    // pass 2: batches of lines converted on the worker threads, merged here in line order
    let cx = Ctx {
        keys: Default::default(),
        plan: &plan,
        pi_header: pi_header.is_some(),
        migration: migration.as_ref(),
    };
    let mut m = Merge {
        plan: &plan,
        names: HashMap::new(),
        tools: Vec::new(),
        esc: Vec::new(),
        stash: vec![None; slots.len()],
        slots,
        last_ts: ts0.clone(),
    };
    let spare: std::sync::Mutex<Vec<Vec<u8>>> = Default::default();
    par_lines(
        src,
        data,
        batch,
        |b| {
            let spare = spare.lock().ok().and_then(|mut s| s.pop());
            convert_batch(b, &cx, &ts0, spare.unwrap_or_default())
        },
        |b, part| {
            if part.skip > 0 {
                // the lines before the batch's first timestamp, with the one before the batch
                let mut head = Part::default();
                let mut start = 0;
                for (j, &(end, eol)) in b.ends[..part.skip].iter().enumerate() {
                    let line = &b.bytes[start..end];
                    line_out(
                        line,
                        eol,
                        b.first + j as u32,
                        &cx,
                        &mut m.last_ts,
                        &mut head,
                    );
                    start = end;
                }
                m.emit(&head, outs, rep)?;
            }
            m.emit(&part, outs, rep)?;
            if let Some(t) = part.ts {
                m.last_ts = t;
            }
            // the part's buffer back to the workers (as the batches' to the reader)
            if let Ok(mut s) = spare.lock() {
                if s.len() < 2 * WORKERS + 2 && part.bytes.capacity() <= SPARE_MAX {
                    s.push(part.bytes);
                }
            }
            Ok(())
        },
    )?;
    for (o, st) in std::mem::take(&mut m.stash).into_iter().enumerate() {
        if let Some(b) = st {
            outs.write(m.slots[o], &b)?;
        }
    }
    // subagent files: sessions of their own, parentSession naming this one
    for (sp, pp) in subagents.iter().zip(&sub_paths) {
        outs.also_read(sp)?;
        let pp_shown = match pp.file_name() {
            Some(f) => shown.with_file_name(f),
            None => pp.clone(),
        };
        convert_in(
            sp,
            None,
            pp,
            &pp_shown,
            Some((shown, "subagent")),
            outs,
            rep,
            batch,
        )?;
    }
    Ok(())
}
