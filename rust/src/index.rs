//! The by-id index over a session file's entries: compact arrays, no parsed bodies.
//!
//! Rules are Pi's (session-manager.ts `loadEntriesFromFile`, `_buildIndex`, migrations):
//! * lines are split on `\n` only; one trailing `\r` is dropped; lines that are blank after
//!   JavaScript `trim()` are skipped; lines `JSON.parse` rejects are skipped (and reported);
//!   falsy JSON values (`null`, `0`, `false`, `""`) are skipped (Pi 1.6 streaming loader);
//! * the first parsed value must be an object with `type:"session"` and a string `id`,
//!   otherwise the file is not a Pi session; later `type:"session"` values are not entries;
//! * the by-id map is keyed like a JavaScript `Map` (strings, numbers, booleans, `null` and
//!   `undefined` by value; objects and arrays by identity); a later duplicate id wins;
//! * the leaf after a scan is the id of the last entry in file order;
//! * labels replay in file order (a truthy `label` sets, anything else clears);
//! * v1 files (header `version` missing or < 2) get ids and a linear parent chain in memory.

use crate::jsdate;
use crate::json::{self, JsVal, Skeleton, TopKind};
use std::collections::HashMap;

pub const NONE: u32 = u32::MAX;
/// Key id of JavaScript `undefined`.
pub const KID_UNDEFINED: u32 = 0;
/// Key id of `null`.
pub const KID_NULL: u32 = 1;

/// Interned entry types with fixed codes; others are interned after these.
pub const TYPE_NAMES: [&str; 13] = [
    "", // 0: not a string (undefined, number, ...)
    "session",
    "message",
    "model_change",
    "thinking_level_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
    "context_edit",
    "usage",
];
pub const T_NONE: u16 = 0;
pub const T_SESSION: u16 = 1;
pub const T_MESSAGE: u16 = 2;
pub const T_COMPACTION: u16 = 5;
pub const T_LABEL: u16 = 9;
pub const T_SESSION_INFO: u16 = 10;

pub const ROLE_NAMES: [&str; 10] = [
    "",
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom",
    "branchSummary",
    "compactionSummary",
    "system",
    "hookMessage",
];
pub const R_CUSTOM: u16 = 5;
pub const R_HOOK: u16 = 9;

/// Flags on a record.
pub const F_LABEL_TRUTHY: u8 = 1;
pub const F_NOT_OBJECT: u8 = 2;

/// One entry's skeleton. `offset`/`len` locate the line's JSON text (without `\r\n`).
#[derive(Debug, Clone, Copy)]
pub struct Rec {
    pub offset: u64,
    pub len: u64,
    /// 1-based line number in the file.
    pub line: u32,
    /// Position among parsed values, the header being 0 (Pi's `fileEntries` index).
    pub vpos: u32,
    pub id: u32,
    pub parent: u32,
    /// Label target (labels) or `firstKeptEntryId` (compactions), as a key id.
    pub target: u32,
    /// `new Date(timestamp).getTime()`, NaN when invalid.
    pub ts: f64,
    pub etype: u16,
    pub role: u16,
    pub flags: u8,
}

/// A skipped or odd line.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub line: u32,
    pub offset: u64,
    pub kind: &'static str,
    pub message: String,
}

/// Why a file is not a Pi session.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderState {
    /// No value parsed yet (empty or blank file).
    Empty,
    Valid,
    Invalid(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Leaf {
    #[default]
    /// Explicit null: before the first entry.
    Null,
    Key(u32),
}

/// What an unterminated last line changed, so `refresh()` can undo it once the line grows.
#[derive(Debug, Clone)]
struct Provisional {
    line_start: u64,
    line_no: u32,
    problems_len: usize,
    entries_len: usize,
    values: u32,
    by_id_prev: Option<(u32, u32)>,
    label_prev: Option<(u32, Option<(u64, u32)>)>,
    session_info_prev: u32,
    leaf_prev: Leaf,
    last_v1_prev: u32,
    header: Option<(HeaderState, Option<(u64, u64)>, JsVal)>,
}

/// The index. Bytes live elsewhere (see `store`); this holds only skeletons.
#[derive(Default)]
pub struct Index {
    pub recs: Vec<Rec>,
    keys: HashMap<Box<[u8]>, u32>,
    key_truthy: Vec<bool>,
    key_str: Vec<Option<Box<str>>>,
    /// key id → winning entry index (NONE when no entry has that id)
    by_id: Vec<u32>,
    types: Vec<String>,
    type_codes: HashMap<String, u16>,
    roles: Vec<String>,
    role_codes: HashMap<String, u16>,
    /// label target key → (insertion sequence, label entry index); Map semantics
    labels: HashMap<u32, (u64, u32)>,
    label_seq: u64,
    pub session_info: u32,
    pub leaf: Leaf,
    pub header: HeaderStateBox,
    pub header_span: Option<(u64, u64)>,
    pub header_version: JsVal,
    pub problems: Vec<Problem>,
    /// parsed values so far (header included): Pi's fileEntries length
    values: u32,
    /// lines consumed so far (1-based number of the next line is `lines + 1`)
    pub lines: u32,
    /// byte offset just after the last complete (`\n`-terminated) line
    pub scanned_to: u64,
    provisional: Option<Provisional>,
    dup_ids: u32,
    legacy_v1: bool,
    legacy_v2: bool,
    last_v1_id: u32,
    /// bumped whenever entries or links change (invalidates cached children)
    pub generation: u64,
    prev_winner_scratch: u32,
    prev_label_scratch: Option<(u64, u32)>,
    /// seed for v1 ids: a hash of the header id, so ids are stable across opens
    v1_seed: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeaderStateBox(pub HeaderState);
impl Default for HeaderStateBox {
    fn default() -> Self {
        HeaderStateBox(HeaderState::Empty)
    }
}

fn js_trim_is_blank(line: &[u8]) -> bool {
    // JavaScript String.prototype.trim() whitespace, on UTF-8 bytes.
    let mut i = 0;
    while i < line.len() {
        let c = line[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C => i += 1,
            0xC2 if line.get(i + 1) == Some(&0xA0) => i += 2,
            0xE1 if line[i..].starts_with(&[0xE1, 0x9A, 0x80]) => i += 3,
            0xE2 => {
                let t = &line[i..];
                if t.len() >= 3
                    && t[1] == 0x80
                    && ((0x80..=0x8A).contains(&t[2]) || t[2] == 0xA8 || t[2] == 0xA9 || t[2] == 0xAF)
                    || t.starts_with(&[0xE2, 0x81, 0x9F])
                {
                    i += 3
                } else {
                    return false;
                }
            }
            0xE3 if line[i..].starts_with(&[0xE3, 0x80, 0x80]) => i += 3,
            0xEF if line[i..].starts_with(&[0xEF, 0xBB, 0xBF]) => i += 3,
            _ => return false,
        }
    }
    true
}

/// JavaScript `ToNumber` for a header `version` (`header.version ?? 1`).
fn version_number(v: &JsVal) -> f64 {
    match v {
        JsVal::Missing | JsVal::Null => 1.0,
        JsVal::Bool(b) => *b as u8 as f64,
        JsVal::Num(n) => *n,
        JsVal::Str(s) => {
            let t = s.trim();
            if t.is_empty() {
                0.0
            } else {
                t.parse::<f64>().unwrap_or(f64::NAN)
            }
        }
        JsVal::Composite => f64::NAN,
    }
}

fn fnv1a(data: &[u8], seed: u64) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325 ^ seed.wrapping_mul(0x100000001b3);
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h ^ (h >> 29)
}

/// A line ready to be indexed: its place in the file and its parse result.
pub struct ParsedLine {
    pub offset: u64,
    pub len: u64,
    pub line: u32,
    pub terminated: bool,
    /// offset just past the line's `\n` (or the end of data when unterminated)
    pub end: u64,
    pub result: LineResult,
}

pub enum LineResult {
    Blank,
    Bad(json::JsonError),
    Value(Skeleton),
    TooLong,
}

/// Longest line we index (a record stores lengths in 64 bits, but a line this long is hostile).
pub const MAX_LINE: u64 = u32::MAX as u64;

pub fn parse_one(bytes: &[u8]) -> LineResult {
    if bytes.len() as u64 > MAX_LINE {
        return LineResult::TooLong;
    }
    if js_trim_is_blank(bytes) {
        return LineResult::Blank;
    }
    match json::parse_line(bytes) {
        Ok(s) => LineResult::Value(s),
        Err(e) => LineResult::Bad(e),
    }
}

impl Index {
    pub fn new() -> Self {
        let mut ix = Index {
            session_info: NONE,
            leaf: Leaf::Null,
            last_v1_id: NONE,
            prev_winner_scratch: NONE,
            ..Default::default()
        };
        // fixed keys: undefined, null
        ix.key_truthy.extend([false, false]);
        ix.key_str.extend([None, None]);
        ix.by_id.extend([NONE, NONE]);
        ix.keys.insert(Box::from(&b"u"[..]), KID_UNDEFINED);
        ix.keys.insert(Box::from(&b"n"[..]), KID_NULL);
        for (i, t) in TYPE_NAMES.iter().enumerate() {
            ix.types.push(t.to_string());
            if i > 0 {
                ix.type_codes.insert(t.to_string(), i as u16);
            }
        }
        for (i, r) in ROLE_NAMES.iter().enumerate() {
            ix.roles.push(r.to_string());
            if i > 0 {
                ix.role_codes.insert(r.to_string(), i as u16);
            }
        }
        ix
    }

    // ------------------------------------------------------------------ keys

    fn new_key(&mut self, truthy: bool, s: Option<&str>) -> u32 {
        let kid = self.key_truthy.len() as u32;
        self.key_truthy.push(truthy);
        self.key_str.push(s.map(Box::from));
        self.by_id.push(NONE);
        kid
    }

    /// The key id for a JSON value, interning it (objects get a fresh identity).
    pub fn key_of(&mut self, v: &JsVal) -> u32 {
        let mut buf: Vec<u8>;
        match v {
            JsVal::Missing => return KID_UNDEFINED,
            JsVal::Null => return KID_NULL,
            JsVal::Composite => return self.new_key(true, None),
            JsVal::Str(s) => {
                buf = Vec::with_capacity(s.len() + 1);
                buf.push(b's');
                buf.extend_from_slice(s.as_bytes());
            }
            JsVal::Num(n) => {
                let n = if *n == 0.0 { 0.0 } else { *n };
                buf = vec![b'd'];
                buf.extend_from_slice(&n.to_le_bytes());
            }
            JsVal::Bool(b) => buf = vec![b'b', *b as u8],
        }
        if let Some(&k) = self.keys.get(buf.as_slice()) {
            return k;
        }
        let kid = self.new_key(v.truthy(), v.as_str());
        self.keys.insert(buf.into_boxed_slice(), kid);
        kid
    }

    /// Key id of a string id, without interning (None when no such key exists).
    pub fn lookup_str(&self, s: &str) -> Option<u32> {
        let mut buf = Vec::with_capacity(s.len() + 1);
        buf.push(b's');
        buf.extend_from_slice(s.as_bytes());
        self.keys.get(buf.as_slice()).copied()
    }

    pub fn intern_str(&mut self, s: &str) -> u32 {
        self.key_of(&JsVal::Str(s.to_string()))
    }

    pub fn key_is_truthy(&self, kid: u32) -> bool {
        self.key_truthy[kid as usize]
    }
    /// The string behind a key id, if the key is a string.
    pub fn key_string(&self, kid: u32) -> Option<&str> {
        self.key_str.get(kid as usize).and_then(|s| s.as_deref())
    }
    /// Entry that currently owns key `kid` (last occurrence wins), or NONE.
    pub fn winner(&self, kid: u32) -> u32 {
        self.by_id.get(kid as usize).copied().unwrap_or(NONE)
    }
    pub fn index_of_str(&self, s: &str) -> Option<u32> {
        self.lookup_str(s).map(|k| self.winner(k)).filter(|&w| w != NONE)
    }
    /// Number of distinct ids (Pi `getEntryCount()`: the size of the by-id map).
    pub fn entry_count(&self) -> usize {
        self.recs.len() - self.dup_ids as usize
    }

    pub fn type_name(&self, code: u16) -> &str {
        &self.types[code as usize]
    }
    pub fn role_name(&self, code: u16) -> &str {
        &self.roles[code as usize]
    }
    fn type_code(&mut self, v: &JsVal) -> u16 {
        match v {
            JsVal::Str(s) => {
                if let Some(&c) = self.type_codes.get(s.as_str()) {
                    return c;
                }
                let c = self.types.len() as u16;
                if c == u16::MAX {
                    return T_NONE;
                }
                self.types.push(s.clone());
                self.type_codes.insert(s.clone(), c);
                c
            }
            _ => T_NONE,
        }
    }
    fn role_code(&mut self, v: &JsVal) -> u16 {
        match v {
            JsVal::Str(s) => {
                if let Some(&c) = self.role_codes.get(s.as_str()) {
                    return c;
                }
                let c = self.roles.len() as u16;
                if c == u16::MAX {
                    return 0;
                }
                self.roles.push(s.clone());
                self.role_codes.insert(s.clone(), c);
                c
            }
            _ => 0,
        }
    }

    pub fn is_legacy_v1(&self) -> bool {
        self.legacy_v1
    }
    /// Header version below 3: Pi migrates (and rewrites) such files on open.
    pub fn needs_migration(&self) -> bool {
        self.legacy_v1 || self.legacy_v2
    }

    // ------------------------------------------------------------------ ingest

    /// Undoes what an unterminated last line did (called before scanning from its start).
    pub fn rollback_provisional(&mut self) -> Option<(u64, u32)> {
        let p = self.provisional.take()?;
        self.problems.truncate(p.problems_len);
        self.recs.truncate(p.entries_len);
        self.values = p.values;
        if let Some((kid, prev)) = p.by_id_prev {
            if prev != NONE && self.by_id[kid as usize] != NONE && prev != self.by_id[kid as usize] {
                self.dup_ids -= 1;
            }
            self.by_id[kid as usize] = prev;
        }
        if let Some((target, prev)) = p.label_prev {
            match prev {
                Some(v) => {
                    self.labels.insert(target, v);
                }
                None => {
                    self.labels.remove(&target);
                }
            }
        }
        self.session_info = p.session_info_prev;
        self.leaf = p.leaf_prev;
        self.last_v1_id = p.last_v1_prev;
        if let Some((h, span, ver)) = p.header {
            self.header = HeaderStateBox(h);
            self.header_span = span;
            self.header_version = ver;
        }
        self.lines = p.line_no - 1;
        self.scanned_to = p.line_start;
        self.generation += 1;
        Some((p.line_start, p.line_no))
    }

    /// Indexes one parsed line. Returns the new entry's index when it became an entry.
    pub fn ingest(&mut self, pl: ParsedLine) -> Option<u32> {
        self.lines = pl.line;
        let prov = if pl.terminated {
            self.scanned_to = pl.end;
            None
        } else {
            Some(Provisional {
                line_start: pl.offset,
                line_no: pl.line,
                problems_len: self.problems.len(),
                entries_len: self.recs.len(),
                values: self.values,
                by_id_prev: None,
                label_prev: None,
                session_info_prev: self.session_info,
                leaf_prev: self.leaf,
                last_v1_prev: self.last_v1_id,
                header: Some((self.header.0.clone(), self.header_span, self.header_version.clone())),
            })
        };
        let r = self.ingest_inner(&pl);
        if let Some(mut p) = prov {
            if let Some(i) = r {
                let rec = self.recs[i as usize];
                p.by_id_prev = Some((rec.id, self.prev_winner_scratch));
                if rec.etype == T_LABEL {
                    p.label_prev = Some((rec.target, self.prev_label_scratch));
                }
            }
            self.provisional = Some(p);
        }
        r
    }

    fn problem(&mut self, pl: &ParsedLine, kind: &'static str, message: String) {
        self.problems.push(Problem { line: pl.line, offset: pl.offset, kind, message });
    }

    fn ingest_inner(&mut self, pl: &ParsedLine) -> Option<u32> {
        let sk = match &pl.result {
            LineResult::Blank => {
                if pl.len > 0 || pl.terminated {
                    self.problem(pl, "blank_line", "blank line (skipped)".into());
                }
                return None;
            }
            LineResult::TooLong => {
                self.problem(pl, "line_too_long", format!("line of {} bytes is over the 4 GiB limit (skipped)", pl.len));
                return None;
            }
            LineResult::Bad(e) => {
                let kind = if pl.terminated { "malformed_json" } else { "torn_last_line" };
                self.problem(
                    pl,
                    kind,
                    format!("not JSON ({} at byte {} of the line); skipped as Pi skips it", e.msg, e.pos),
                );
                return None;
            }
            LineResult::Value(s) => s,
        };
        if !sk.truthy {
            self.problem(pl, "skipped_value", "falsy JSON value (null, 0, false or \"\"): skipped as Pi skips it".into());
            return None;
        }
        if sk.invalid_utf8 {
            self.problem(pl, "invalid_utf8", "bytes that are not UTF-8 inside a string (read as U+FFFD, as Pi reads them)".into());
        }
        let vpos = self.values;
        self.values += 1;
        let is_session = sk.type_.as_str() == Some("session");
        if vpos == 0 {
            // Pi: the first parsed value must be {type:"session", id:<string>}
            if sk.top == TopKind::Object && is_session && matches!(sk.id, JsVal::Str(_)) {
                self.header = HeaderStateBox(HeaderState::Valid);
                self.header_span = Some((pl.offset, pl.len));
                self.header_version = sk.version.clone();
                self.v1_seed = fnv1a(sk.id.as_str().unwrap_or("").as_bytes(), 0x5e55);
                let v = version_number(&sk.version);
                // Pi: `if (version >= 3) no migration; if (version < 2) v1→v2; if (version < 3) v2→v3`
                if !(v >= 3.0) {
                    self.legacy_v1 = v < 2.0;
                    self.legacy_v2 = true;
                }
            } else {
                let why = if sk.top != TopKind::Object {
                    "the first JSON value is not an object".to_string()
                } else if !is_session {
                    "the first JSON line is not a session header (type \"session\")".to_string()
                } else {
                    "the session header has no string id".to_string()
                };
                self.header = HeaderStateBox(HeaderState::Invalid(format!("line {}: {}", pl.line, why)));
            }
            return None;
        }
        if is_session {
            self.problem(pl, "extra_header", "another session header inside the file (not an entry, as in Pi)".into());
            return None;
        }
        let idx = self.recs.len() as u32;
        let (id, parent) = if self.legacy_v1 {
            // Pi migrateV1ToV2: fresh ids, each entry the child of the previous one.
            let id = self.synthetic_id(vpos);
            let parent = if self.last_v1_id == NONE { KID_NULL } else { self.last_v1_id };
            self.last_v1_id = id;
            (id, parent)
        } else {
            (self.key_of(&sk.id), self.key_of(&sk.parent_id))
        };
        let etype = self.type_code(&sk.type_);
        let mut role = if etype == T_MESSAGE { self.role_code(&sk.role) } else { 0 };
        if self.legacy_v2 && role == R_HOOK {
            role = R_CUSTOM; // Pi migrateV2ToV3
        }
        let mut flags = 0u8;
        if sk.top != TopKind::Object {
            flags |= F_NOT_OBJECT;
        }
        let target = if etype == T_LABEL {
            if sk.label.truthy() {
                flags |= F_LABEL_TRUTHY;
            }
            self.key_of(&sk.target_id)
        } else if etype == T_COMPACTION {
            self.key_of(&sk.first_kept_entry_id)
        } else {
            NONE
        };
        let rec = Rec {
            offset: pl.offset,
            len: pl.len,
            line: pl.line,
            vpos,
            id,
            parent,
            target,
            ts: jsdate::date_value(&sk.timestamp),
            etype,
            role,
            flags,
        };
        self.recs.push(rec);
        let prev = self.by_id[id as usize];
        self.prev_winner_scratch = prev;
        if prev != NONE {
            self.dup_ids += 1;
        }
        self.by_id[id as usize] = idx;
        self.leaf = Leaf::Key(id);
        if etype == T_LABEL {
            self.prev_label_scratch = self.labels.get(&target).copied();
            if flags & F_LABEL_TRUTHY != 0 {
                if let Some(e) = self.labels.get_mut(&target) {
                    e.1 = idx; // Map.set on an existing key keeps its position
                } else {
                    self.label_seq += 1;
                    self.labels.insert(target, (self.label_seq, idx));
                }
            } else {
                self.labels.remove(&target);
            }
        } else if etype == T_SESSION_INFO {
            self.session_info = idx;
        }
        self.generation += 1;
        Some(idx)
    }

    fn synthetic_id(&mut self, vpos: u32) -> u32 {
        // Deterministic per file (header position), so cursors survive reopening a v1 file.
        let mut attempt = 0u64;
        loop {
            let h = fnv1a(&vpos.to_le_bytes(), self.v1_seed ^ attempt.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let s = format!("{:08x}", (h & 0xffff_ffff) as u32);
            if self.lookup_str(&s).map(|k| self.winner(k) == NONE).unwrap_or(true) {
                return self.intern_str(&s);
            }
            attempt += 1;
        }
    }

    // ------------------------------------------------------------------ queries

    /// Labels in Pi's Map order: (target key id, label entry index).
    pub fn labels(&self) -> Vec<(u32, u32)> {
        let mut v: Vec<(u64, u32, u32)> = self.labels.iter().map(|(&t, &(s, e))| (s, t, e)).collect();
        v.sort_unstable();
        v.into_iter().map(|(_, t, e)| (t, e)).collect()
    }
    pub fn label_entry(&self, target: u32) -> Option<u32> {
        self.labels.get(&target).map(|&(_, e)| e)
    }

    /// Entry index whose parsed-value position is `vpos` (for v1 `firstKeptEntryIndex`).
    pub fn entry_at_vpos(&self, vpos: u32) -> Option<u32> {
        self.recs.binary_search_by_key(&vpos, |r| r.vpos).ok().map(|i| i as u32)
    }
}
