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

use crate::json::{self, JsVal, LineParser, Skel, TopKind, Val};
use std::collections::HashMap;
use std::hash::BuildHasher;

/// Hash state for keys: fast, randomly seeded per index (file contents cannot aim at it).
type Hasher = foldhash::fast::RandomState;

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
pub const T_MODEL_CHANGE: u16 = 3;
pub const T_THINKING_LEVEL_CHANGE: u16 = 4;
pub const T_COMPACTION: u16 = 5;
pub const T_BRANCH_SUMMARY: u16 = 6;
pub const T_CUSTOM_MESSAGE: u16 = 8;
pub const T_LABEL: u16 = 9;
pub const T_SESSION_INFO: u16 = 10;
pub const T_CONTEXT_EDIT: u16 = 11;

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
pub const R_ASSISTANT: u16 = 2;
pub const R_CUSTOM: u16 = 5;
pub const R_HOOK: u16 = 9;

/// Flags on a record.
pub const F_LABEL_TRUTHY: u8 = 1;
pub const F_NOT_OBJECT: u8 = 2;

/// One entry's skeleton. `offset`/`len` locate the line's JSON text (without `\r\n`).
#[derive(Debug, Clone, Copy)]
pub struct Rec {
    pub offset: u64,
    /// at most [`MAX_LINE`]
    pub len: u32,
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

/// The problems of a file, stored as runs: consecutive lines with the same problem (same
/// kind, reason and position) whose offsets advance by a fixed stride are one 32-byte record
/// (64 MiB of blank lines after a header is one record, not 64 Mi). Kinds and messages are
/// worked out when read, and any problem is found by position in O(log runs).
#[derive(Debug, Clone, Default)]
pub struct Problems {
    runs: Vec<ProblemRun>,
    /// problems recorded (the sum of the runs' counts)
    n: usize,
    /// JSON error reasons met so far (a handful of fixed strings)
    reasons: Vec<&'static str>,
}

#[derive(Debug, Clone, Copy)]
struct ProblemRun {
    /// byte offset of the run's first line
    offset: u64,
    /// the JSON error position, or the line length for `line_too_long`
    arg: u64,
    /// 1-based line number of the run's first line
    line: u32,
    /// position of the run's first problem among all problems
    first: u32,
    /// lines in the run: lines `line + k`, at offsets `offset + k * stride`, `k < count`
    count: u32,
    /// bytes from one line of the run to the next (0 while the run has one line)
    stride: u16,
    kind: u8,
    reason: u8,
}

const PROBLEM_KINDS: [&str; 8] = [
    "blank_line",
    "line_too_long",
    "malformed_json",
    "torn_last_line",
    "skipped_value",
    "invalid_utf8",
    "extra_header",
    "",
];
const P_BLANK: u8 = 0;
const P_TOO_LONG: u8 = 1;
const P_MALFORMED: u8 = 2;
const P_TORN: u8 = 3;
const P_FALSY: u8 = 4;
const P_UTF8: u8 = 5;
const P_EXTRA_HEADER: u8 = 6;

impl Problems {
    pub fn len(&self) -> usize {
        self.n
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// Records stored (runs), for memory accounting and tests.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }
    /// Keeps the first `n` problems.
    fn truncate(&mut self, n: usize) {
        if n >= self.n {
            return;
        }
        let k = self.runs.partition_point(|r| (r.first as usize) < n);
        self.runs.truncate(k);
        if let Some(last) = self.runs.last_mut() {
            let keep = n - last.first as usize;
            if keep < last.count as usize {
                last.count = keep as u32;
                if keep == 1 {
                    last.stride = 0;
                }
            }
        }
        self.n = n;
    }
    fn push(&mut self, line: u32, offset: u64, kind: u8, arg: u64, reason: &'static str) {
        let r = match self
            .reasons
            .iter()
            .position(|&x| std::ptr::eq(x, reason) || x == reason)
        {
            Some(i) => i,
            None => {
                self.reasons.push(reason);
                self.reasons.len() - 1
            }
        };
        let reason = r.min(255) as u8;
        self.n += 1;
        if let Some(last) = self.runs.last_mut() {
            if last.kind == kind
                && last.reason == reason
                && last.arg == arg
                && last.count < u32::MAX
            {
                let next_line = last.line as u64 + last.count as u64;
                if line as u64 == next_line {
                    if last.count == 1 {
                        if let Ok(st) = u16::try_from(offset.wrapping_sub(last.offset)) {
                            if offset > last.offset {
                                last.stride = st;
                                last.count = 2;
                                return;
                            }
                        }
                    } else if offset == last.offset + last.stride as u64 * last.count as u64 {
                        last.count += 1;
                        return;
                    }
                }
            }
        }
        let first = (self.n - 1) as u32;
        self.runs.push(ProblemRun {
            offset,
            arg,
            line,
            first,
            count: 1,
            stride: 0,
            kind,
            reason,
        });
    }
    fn expand(&self, r: &ProblemRun, k: u32) -> Problem {
        let message = match r.kind {
            P_BLANK => "blank line (skipped)".to_string(),
            P_TOO_LONG => format!("line of {} bytes is over the 4 GiB limit (skipped)", r.arg),
            P_MALFORMED | P_TORN => format!(
                "not JSON ({} at byte {} of the line); skipped as Pi skips it",
                self.reasons[r.reason as usize], r.arg
            ),
            P_FALSY => {
                "falsy JSON value (null, 0, false or \"\"): skipped as Pi skips it".to_string()
            }
            P_UTF8 => "bytes that are not UTF-8 inside a string (read as U+FFFD, as Pi reads them)"
                .to_string(),
            _ => "another session header inside the file (not an entry, as in Pi)".to_string(),
        };
        Problem {
            line: r.line + k,
            offset: r.offset + r.stride as u64 * k as u64,
            kind: PROBLEM_KINDS[r.kind as usize],
            message,
        }
    }
    /// Each problem in file order, with its message.
    pub fn iter(&self) -> impl Iterator<Item = Problem> + '_ {
        self.runs
            .iter()
            .flat_map(move |r| (0..r.count).map(move |k| self.expand(r, k)))
    }
    pub fn get(&self, i: usize) -> Option<Problem> {
        if i >= self.n {
            return None;
        }
        let k = self.runs.partition_point(|r| r.first as usize <= i) - 1;
        let r = &self.runs[k];
        Some(self.expand(r, (i - r.first as usize) as u32))
    }
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

/// What a header line changed, to undo it: (header state, header span, header version).
type HeaderUndo = (HeaderState, Option<(u64, u64)>, JsVal);

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
    header: Option<HeaderUndo>,
    /// (legacy_v1, legacy_v2, v1_seed): what a header line set
    legacy_prev: (bool, bool, u64),
}

/// What a key id stands for: a JavaScript `Map` key (see [`Index::key_of`]).
#[derive(Debug, Clone, Copy)]
struct KeyRec {
    /// string: offset in `key_bytes`; number: the f64 bits (-0 as 0); bool: 0 or 1
    data: u64,
    /// string: byte length
    len: u32,
    tag: u8,
    truthy: bool,
}

const K_UNDEFINED: u8 = 0;
const K_NULL: u8 = 1;
const K_STR: u8 = 2;
const K_NUM: u8 = 3;
const K_BOOL: u8 = 4;
const K_OBJECT: u8 = 5;

/// Key ids by hash: open addressing with linear probing, each slot `(hash >> 32) << 32 |
/// (key id + 1)` (0 = empty), at most half full. Our own rather than a library map so the
/// sequential indexing pass can prefetch the slots of the lines it is about to index: with a
/// million ids the table no longer fits in cache while the file streams through it.
#[derive(Default)]
struct KeyTable {
    slots: Vec<u64>,
    len: usize,
}

impl KeyTable {
    #[inline]
    fn find(&self, h: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let tag = h >> 32;
        let mut i = h as usize & mask;
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                return None;
            }
            if slot >> 32 == tag && eq(slot as u32 - 1) {
                return Some(slot as u32 - 1);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    fn put(&mut self, h: u64, kid: u32) {
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = (h >> 32) << 32 | (kid as u64 + 1);
    }

    /// Adds a key id known to be absent.
    #[inline]
    fn insert(&mut self, h: u64, kid: u32, rehash: impl Fn(u32) -> u64) {
        self.reserve(1, rehash);
        self.put(h, kid);
        self.len += 1;
    }

    fn reserve(&mut self, more: usize, rehash: impl Fn(u32) -> u64) {
        let need = (self.len + more) * 2;
        if need <= self.slots.len() {
            return;
        }
        let cap = need.next_power_of_two().max(64);
        let old = std::mem::replace(&mut self.slots, vec![0; cap]);
        advise_huge_pages(&self.slots);
        if cap >= 1 << 13 {
            populate_range(self.slots.as_ptr() as usize, cap * 8);
        }
        for slot in old {
            if slot != 0 {
                let kid = slot as u32 - 1;
                self.put(rehash(kid), kid);
            }
        }
    }

    #[inline(always)]
    fn prefetch(&self, h: u64) {
        #[cfg(target_arch = "x86_64")]
        if !self.slots.is_empty() {
            let i = h as usize & (self.slots.len() - 1);
            // SAFETY: a prefetch hint at an address inside the table.
            unsafe {
                std::arch::x86_64::_mm_prefetch(
                    self.slots.as_ptr().add(i) as *const i8,
                    std::arch::x86_64::_MM_HINT_T0,
                )
            };
        }
        let _ = h;
    }
}

/// Asks for transparent huge pages under a big table we probe at random (with 4 KiB pages
/// nearly every probe of a million-key table would also miss the TLB).
fn advise_huge_pages(v: &[u64]) {
    advise_huge_range(v.as_ptr() as usize, std::mem::size_of_val(v));
}

/// Makes room for `more` elements in `v` when that is at least `RESERVE_MIN` bytes, on
/// transparent huge pages. (Room reserved is address space only until used. Arrays this large
/// get fresh pages from the OS whatever we do; smaller ones are left to grow, which lets the
/// allocator reuse memory it already has.)
fn reserve_large<T>(v: &mut Vec<T>, more: usize) {
    const RESERVE_MIN: usize = 8 << 20;
    if more.saturating_mul(std::mem::size_of::<T>()) < RESERVE_MIN || v.capacity() - v.len() >= more
    {
        return;
    }
    v.reserve(more);
    advise_huge_range(v.as_ptr() as usize, v.capacity() * std::mem::size_of::<T>());
}

/// Faults in `[start, start + len)` writable up front (`MADV_POPULATE_WRITE`, Linux 5.14+;
/// elsewhere nothing happens). For a zeroed table read before it is written: each page read
/// first maps the shared zero page, and the first write to it then takes a second fault and
/// a TLB shootdown across the threads of the process (costly in a VM, while a parallel scan
/// runs on every core).
fn populate_range(start: usize, len: usize) {
    #[cfg(target_os = "linux")]
    {
        let a = start & !4095;
        // SAFETY: advice only, on pages that hold our own allocation (populating pages that
        // are already mapped changes nothing).
        unsafe {
            libc::madvise(
                a as *mut libc::c_void,
                start + len - a,
                libc::MADV_POPULATE_WRITE,
            )
        };
    }
    let _ = (start, len);
}

/// `MADV_HUGEPAGE` on the whole 2 MiB pages inside `[start, start + len)`.
fn advise_huge_range(start: usize, len: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let end = start + len;
        let (a, b) = ((start + HUGE - 1) & !(HUGE - 1), end & !(HUGE - 1));
        if b > a {
            // SAFETY: advice only, on whole pages inside our own allocation.
            unsafe { libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_HUGEPAGE) };
        }
    }
    let _ = (start, len);
}

/// Equality of two byte strings of the same length, without a call for short ones (ids).
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if (8..=16).contains(&n) {
        let w = |s: &[u8], o: usize| u64::from_le_bytes(s[o..o + 8].try_into().unwrap());
        w(a, 0) == w(b, 0) && w(a, n - 8) == w(b, n - 8)
    } else {
        a == b
    }
}

/// The index. Bytes live elsewhere (see `store`); this holds only skeletons.
#[derive(Default)]
pub struct Index {
    pub recs: Vec<Rec>,
    /// interned keys by value (strings, numbers, booleans); the table holds key ids
    keys: KeyTable,
    hasher: Hasher,
    key_recs: Vec<KeyRec>,
    /// the bytes of every string key, back to back
    key_bytes: Vec<u8>,
    /// key id → winning entry index (NONE when no entry has that id)
    by_id: Vec<u32>,
    types: Vec<String>,
    type_codes: HashMap<String, u16>,
    roles: Vec<String>,
    role_codes: HashMap<String, u16>,
    /// label target key → (insertion sequence, label entry index); Map semantics
    labels: hashbrown::HashMap<u32, (u64, u32), Hasher>,
    label_seq: u64,
    pub session_info: u32,
    pub leaf: Leaf,
    pub header: HeaderStateBox,
    pub header_span: Option<(u64, u64)>,
    pub header_version: JsVal,
    pub problems: Problems,
    /// parsed values so far (header included): Pi's fileEntries length
    values: u32,
    /// lines consumed so far (1-based number of the next line is `lines + 1`)
    pub lines: u32,
    /// byte offset just after the last complete (`\n`-terminated) line
    pub scanned_to: u64,
    provisional: Option<Provisional>,
    dup_ids: u32,
    /// file index of the first `context_edit` entry (NONE: the file has none)
    pub first_context_edit: u32,
    legacy_v1: bool,
    legacy_v2: bool,
    last_v1_id: u32,
    /// bumped whenever entries or links change (invalidates cached children)
    pub generation: u64,
    /// Bumped whenever the leaf may have moved (an entry indexed, a rollback, `set_leaf`): an
    /// append built from a leaf read earlier is written only if this did not change.
    pub leaf_version: u64,
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
                    && ((0x80..=0x8A).contains(&t[2])
                        || t[2] == 0xA8
                        || t[2] == 0xA9
                        || t[2] == 0xAF)
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

/// The fixed code of a well-known name (`""` at 0 never matches a string).
#[inline]
fn known_code(names: &[&str], s: &str) -> Option<u16> {
    names
        .iter()
        .skip(1)
        .position(|&n| n == s)
        .map(|i| i as u16 + 1)
}

fn fnv1a(data: &[u8], seed: u64) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325 ^ seed.wrapping_mul(0x100000001b3);
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h ^ (h >> 29)
}

/// A line ready to be indexed: its place in the file and its parse result (borrowing the
/// line's bytes).
pub struct ParsedLine<'a> {
    pub offset: u64,
    pub len: u64,
    pub line: u32,
    pub terminated: bool,
    /// offset just past the line's `\n` (or the end of data when unterminated)
    pub end: u64,
    pub result: LineResult<'a>,
}

// `Value` is the common case (nearly every line): boxing it would cost an allocation per line.
#[allow(clippy::large_enum_variant)]
pub enum LineResult<'a> {
    Blank,
    Bad(json::JsonError),
    /// the skeleton and what can be worked out from it while still in parallel
    Value(Skel<'a>, Pre),
    TooLong,
}

/// Longest line we index (a record stores lengths in 32 bits; a line this long is hostile).
pub const MAX_LINE: u64 = u32::MAX as u64;

/// Parses one line (the part of the work that runs in parallel).
pub fn parse_one<'a>(parser: &mut LineParser, bytes: &'a [u8]) -> LineResult<'a> {
    if bytes.len() as u64 > MAX_LINE {
        return LineResult::TooLong;
    }
    // blank after JavaScript trim(): only whitespace bytes, so a line starting with `{` is not
    let first = bytes.first().copied().unwrap_or(b' ');
    if (first <= b' ' || first >= 0x80) && js_trim_is_blank(bytes) {
        return LineResult::Blank;
    }
    match parser.parse(bytes) {
        Ok(s) => value_result(s),
        Err(e) => LineResult::Bad(e),
    }
}

/// Facts about a parsed line that need no index, worked out in the parallel phase so the
/// sequential one does not touch the line's bytes again.
#[derive(Debug, Clone, Copy)]
pub struct Pre {
    /// `new Date(timestamp).getTime()`
    pub ts: f64,
    /// the fixed code of `type` when it is a well-known name (T_NONE for non-strings)
    pub etype: Option<u16>,
    /// the fixed code of `message.role` when it is a well-known name
    pub role: Option<u16>,
}

/// `Date.parse` of exactly `YYYY-MM-DDTHH:mm:ss.sssZ` (what Pi writes: `toISOString()`), the
/// same value [`crate::jsdate::parse_iso`] gives; None for any other shape (or a value that
/// form rejects), which then goes the general way.
#[inline]
fn iso_ms_fast(b: &[u8]) -> Option<f64> {
    if b.len() != 24
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[23] != b'Z'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let mut v = 0i64;
        for &c in &b[r] {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + (c - b'0') as i64;
        }
        Some(v)
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    // days from 1970-01-01 (Howard Hinnant's days_from_civil)
    let yy = if m <= 2 { y - 1 } else { y };
    let era = if yy >= 0 { yy } else { yy - 399 } / 400;
    let yoe = yy - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Some((days * 86_400_000 + h * 3_600_000 + mi * 60_000 + sec * 1000 + ms) as f64)
}

impl Pre {
    /// Placeholder before the facts are worked out.
    pub const NONE: Pre = Pre {
        ts: f64::NAN,
        etype: None,
        role: None,
    };
}

/// The result for a line that parsed.
#[inline]
pub fn value_result(s: Skel<'_>) -> LineResult<'_> {
    let pre = pre_of(&s);
    LineResult::Value(s, pre)
}

/// The [`Pre`] facts of a skeleton.
#[inline]
pub fn pre_of(s: &Skel<'_>) -> Pre {
    Pre {
        ts: match &s.timestamp {
            Val::Str(t) => iso_ms_fast(t.as_bytes()).unwrap_or_else(|| crate::jsdate::parse_iso(t)),
            other => other.date_value(),
        },
        etype: match &s.type_ {
            Val::Str(t) => known_code(&TYPE_NAMES, t),
            _ => Some(T_NONE),
        },
        role: match &s.role {
            Val::Str(r) => known_code(&ROLE_NAMES, r),
            _ => Some(0),
        },
    }
}

impl Index {
    pub fn new() -> Self {
        let mut ix = Index {
            session_info: NONE,
            leaf: Leaf::Null,
            last_v1_id: NONE,
            prev_winner_scratch: NONE,
            first_context_edit: NONE,
            ..Default::default()
        };
        // fixed keys: undefined, null
        ix.key_recs.push(KeyRec {
            data: 0,
            len: 0,
            tag: K_UNDEFINED,
            truthy: false,
        });
        ix.key_recs.push(KeyRec {
            data: 0,
            len: 0,
            tag: K_NULL,
            truthy: false,
        });
        ix.by_id.extend([NONE, NONE]);
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

    fn push_key(&mut self, k: KeyRec) -> u32 {
        let kid = self.key_recs.len() as u32;
        self.key_recs.push(k);
        self.by_id.push(NONE);
        kid
    }

    #[inline]
    fn hash_str(&self, s: &[u8]) -> u64 {
        self.hasher.hash_one(s)
    }
    #[inline]
    fn hash_scalar(&self, tag: u8, data: u64) -> u64 {
        self.hasher.hash_one((tag, data))
    }
    #[inline]
    fn key_hash(hasher: &Hasher, recs: &[KeyRec], bytes: &[u8], kid: u32) -> u64 {
        let k = recs[kid as usize];
        if k.tag == K_STR {
            hasher.hash_one(&bytes[k.data as usize..k.data as usize + k.len as usize])
        } else {
            hasher.hash_one((k.tag, k.data))
        }
    }
    #[inline]
    fn key_str_bytes(&self, k: &KeyRec) -> &[u8] {
        &self.key_bytes[k.data as usize..k.data as usize + k.len as usize]
    }

    /// Key id of a string, without interning.
    #[inline]
    fn find_str(&self, s: &[u8], h: u64) -> Option<u32> {
        self.keys.find(h, |kid| {
            let k = &self.key_recs[kid as usize];
            k.tag == K_STR && k.len as usize == s.len() && same_bytes(self.key_str_bytes(k), s)
        })
    }

    /// Hints the cache about the key-table slots a parsed line is about to look up.
    #[inline]
    pub fn prefetch_keys(&self, pl: &ParsedLine<'_>) {
        if let LineResult::Value(sk, _) = &pl.result {
            if let Val::Str(s) = &sk.id {
                self.keys.prefetch(self.hash_str(s.as_bytes()));
            }
            if let Val::Str(s) = &sk.parent_id {
                self.keys.prefetch(self.hash_str(s.as_bytes()));
            }
        }
    }

    /// Hints the cache about the key-table slot where string key `s` would be looked up.
    #[inline]
    pub fn prefetch_str(&self, s: &[u8]) {
        self.keys.prefetch(self.hash_str(s));
    }

    fn intern_bytes_str(&mut self, s: &str) -> u32 {
        let h = self.hash_str(s.as_bytes());
        if let Some(k) = self.find_str(s.as_bytes(), h) {
            return k;
        }
        let off = self.key_bytes.len() as u64;
        self.key_bytes.extend_from_slice(s.as_bytes());
        let kid = self.push_key(KeyRec {
            data: off,
            len: s.len() as u32,
            tag: K_STR,
            truthy: !s.is_empty(),
        });
        let (hasher, recs, bytes) = (&self.hasher, &self.key_recs, &self.key_bytes);
        self.keys
            .insert(h, kid, |k| Self::key_hash(hasher, recs, bytes, k));
        kid
    }

    fn intern_scalar(&mut self, tag: u8, data: u64, truthy: bool) -> u32 {
        let h = self.hash_scalar(tag, data);
        if let Some(k) = self.keys.find(h, |kid| {
            let k = &self.key_recs[kid as usize];
            k.tag == tag && k.data == data
        }) {
            return k;
        }
        let kid = self.push_key(KeyRec {
            data,
            len: 0,
            tag,
            truthy,
        });
        let (hasher, recs, bytes) = (&self.hasher, &self.key_recs, &self.key_bytes);
        self.keys
            .insert(h, kid, |k| Self::key_hash(hasher, recs, bytes, k));
        kid
    }

    /// The key id for a JSON value, interning it (objects get a fresh identity).
    pub fn key_of(&mut self, v: &JsVal) -> u32 {
        match v {
            JsVal::Missing => KID_UNDEFINED,
            JsVal::Null => KID_NULL,
            JsVal::Composite => self.push_key(KeyRec {
                data: 0,
                len: 0,
                tag: K_OBJECT,
                truthy: true,
            }),
            JsVal::Str(s) => self.intern_bytes_str(s),
            JsVal::Num(n) => self.key_of_num(*n),
            JsVal::Bool(b) => self.intern_scalar(K_BOOL, *b as u64, *b),
        }
    }

    fn key_of_num(&mut self, n: f64) -> u32 {
        // Map keys use SameValueZero: -0 and 0 are one key (NaN cannot come from JSON)
        let n = if n == 0.0 { 0.0 } else { n };
        self.intern_scalar(K_NUM, n.to_bits(), n != 0.0 && !n.is_nan())
    }

    /// [`Index::key_of`] for a borrowed value.
    #[inline]
    fn key_of_val(&mut self, v: &Val) -> u32 {
        match v {
            Val::Missing => KID_UNDEFINED,
            Val::Null => KID_NULL,
            Val::Str(s) => self.intern_bytes_str(s),
            Val::Num(n) => self.key_of_num(*n),
            Val::Bool(b) => self.intern_scalar(K_BOOL, *b as u64, *b),
            Val::Composite => self.push_key(KeyRec {
                data: 0,
                len: 0,
                tag: K_OBJECT,
                truthy: true,
            }),
        }
    }

    /// Makes room for about `entries` more entries (a guess from the bytes about to be
    /// scanned), so the key table does not rehash as it fills, and the large arrays that grow
    /// with every entry are neither copied as they grow nor faulted in 4 KiB at a time.
    pub fn reserve(&mut self, entries: usize) {
        let (hasher, recs, bytes) = (&self.hasher, &self.key_recs, &self.key_bytes);
        self.keys
            .reserve(entries, |k| Self::key_hash(hasher, recs, bytes, k));
        reserve_large(&mut self.recs, entries);
        // about one new key (its id) per entry; Pi ids are 8 bytes
        reserve_large(&mut self.key_recs, entries);
        reserve_large(&mut self.by_id, entries);
        reserve_large(&mut self.key_bytes, entries * 8);
    }

    /// Key id of a string id, without interning (None when no such key exists).
    pub fn lookup_str(&self, s: &str) -> Option<u32> {
        self.find_str(s.as_bytes(), self.hash_str(s.as_bytes()))
    }

    pub fn intern_str(&mut self, s: &str) -> u32 {
        self.intern_bytes_str(s)
    }

    #[inline]
    pub fn key_is_truthy(&self, kid: u32) -> bool {
        self.key_recs[kid as usize].truthy
    }
    /// The JSON text `JSON.stringify` gives a non-string scalar key (a number or boolean id, as
    /// hostile files have), or None for strings, objects and missing values.
    pub fn scalar_key_json(&self, kid: u32) -> Option<String> {
        let k = self.key_recs.get(kid as usize)?;
        match k.tag {
            K_NUM => Some(
                ryu_js::Buffer::new()
                    .format(f64::from_bits(k.data))
                    .to_string(),
            ),
            K_BOOL => Some(if k.data != 0 { "true" } else { "false" }.to_string()),
            K_NULL => Some("null".to_string()),
            _ => None,
        }
    }

    /// A non-string scalar key (number, boolean, null) as a skeleton value, or None.
    pub fn scalar_key(&self, kid: u32) -> Option<Val<'static>> {
        let k = self.key_recs.get(kid as usize)?;
        match k.tag {
            K_NUM => Some(Val::Num(f64::from_bits(k.data))),
            K_BOOL => Some(Val::Bool(k.data != 0)),
            K_NULL => Some(Val::Null),
            _ => None,
        }
    }

    /// The string behind a key id, if the key is a string.
    pub fn key_string(&self, kid: u32) -> Option<&str> {
        let k = self.key_recs.get(kid as usize)?;
        if k.tag != K_STR {
            return None;
        }
        // SAFETY: string keys are copied from `&str`s only.
        Some(unsafe { std::str::from_utf8_unchecked(self.key_str_bytes(k)) })
    }
    /// Entry that currently owns key `kid` (last occurrence wins), or NONE.
    pub fn winner(&self, kid: u32) -> u32 {
        self.by_id.get(kid as usize).copied().unwrap_or(NONE)
    }
    pub fn index_of_str(&self, s: &str) -> Option<u32> {
        self.lookup_str(s)
            .map(|k| self.winner(k))
            .filter(|&w| w != NONE)
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
    fn type_code(&mut self, v: &Val) -> u16 {
        match v {
            Val::Str(s) => {
                if let Some(c) = known_code(&TYPE_NAMES, s) {
                    return c;
                }
                if let Some(&c) = self.type_codes.get(&**s) {
                    return c;
                }
                let c = self.types.len() as u16;
                if c == u16::MAX {
                    return T_NONE;
                }
                self.types.push(s.to_string());
                self.type_codes.insert(s.to_string(), c);
                c
            }
            _ => T_NONE,
        }
    }
    fn role_code(&mut self, v: &Val) -> u16 {
        match v {
            Val::Str(s) => {
                if let Some(c) = known_code(&ROLE_NAMES, s) {
                    return c;
                }
                if let Some(&c) = self.role_codes.get(&**s) {
                    return c;
                }
                let c = self.roles.len() as u16;
                if c == u16::MAX {
                    return 0;
                }
                self.roles.push(s.to_string());
                self.role_codes.insert(s.to_string(), c);
                c
            }
            _ => 0,
        }
    }

    /// The code of an entry type name already met (None: no entry has this type).
    pub fn type_code_of(&self, name: &str) -> Option<u16> {
        self.type_codes.get(name).copied()
    }
    /// The code of a message role name already met.
    pub fn role_code_of(&self, name: &str) -> Option<u16> {
        self.role_codes.get(name).copied()
    }

    /// Whether two entries share an id (then "the entry with id X on a path" needs the whole path).
    pub fn has_duplicate_ids(&self) -> bool {
        self.dup_ids > 0
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
        if self.first_context_edit != NONE && self.first_context_edit as usize >= p.entries_len {
            self.first_context_edit = NONE;
        }
        self.values = p.values;
        if let Some((kid, prev)) = p.by_id_prev {
            if prev != NONE && self.by_id[kid as usize] != NONE && prev != self.by_id[kid as usize]
            {
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
        self.leaf_version += 1;
        self.last_v1_id = p.last_v1_prev;
        if let Some((h, span, ver)) = p.header {
            self.header = HeaderStateBox(h);
            self.header_span = span;
            self.header_version = ver;
            (self.legacy_v1, self.legacy_v2, self.v1_seed) = p.legacy_prev;
        }
        self.lines = p.line_no - 1;
        self.scanned_to = p.line_start;
        self.generation += 1;
        Some((p.line_start, p.line_no))
    }

    /// Indexes one parsed line. Returns the new entry's index when it became an entry.
    pub fn ingest(&mut self, pl: &ParsedLine<'_>) -> Option<u32> {
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
                header: Some((
                    self.header.0.clone(),
                    self.header_span,
                    self.header_version.clone(),
                )),
                legacy_prev: (self.legacy_v1, self.legacy_v2, self.v1_seed),
            })
        };
        let r = self.ingest_inner(pl);
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

    fn problem(&mut self, pl: &ParsedLine, kind: u8) {
        self.problems.push(pl.line, pl.offset, kind, 0, "");
    }

    fn ingest_inner(&mut self, pl: &ParsedLine) -> Option<u32> {
        let (sk, pre) = match &pl.result {
            LineResult::Blank => {
                if pl.len > 0 || pl.terminated {
                    self.problem(pl, P_BLANK);
                }
                return None;
            }
            LineResult::TooLong => {
                self.problems
                    .push(pl.line, pl.offset, P_TOO_LONG, pl.len, "");
                return None;
            }
            LineResult::Bad(e) => {
                let kind = if pl.terminated { P_MALFORMED } else { P_TORN };
                self.problems
                    .push(pl.line, pl.offset, kind, e.pos as u64, e.msg);
                return None;
            }
            LineResult::Value(s, pre) => (s, *pre),
        };
        if !sk.truthy {
            self.problem(pl, P_FALSY);
            return None;
        }
        if sk.invalid_utf8 {
            self.problem(pl, P_UTF8);
        }
        let vpos = self.values;
        self.values += 1;
        // an unknown name is not "session"; it is interned below, only for entries
        let is_session = pre.etype == Some(T_SESSION);
        if vpos == 0 {
            // Pi: the first parsed value must be {type:"session", id:<string>}
            if sk.top == TopKind::Object && is_session && matches!(sk.id, Val::Str(_)) {
                self.header = HeaderStateBox(HeaderState::Valid);
                self.header_span = Some((pl.offset, pl.len));
                self.header_version = sk.version.to_js();
                self.v1_seed = fnv1a(sk.id.as_str().unwrap_or("").as_bytes(), 0x5e55);
                let v = version_number(&self.header_version);
                // Pi: `if (version >= 3) no migration; if (version < 2) v1→v2; if (version < 3) v2→v3`
                if v < 3.0 || v.is_nan() {
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
                self.header =
                    HeaderStateBox(HeaderState::Invalid(format!("line {}: {}", pl.line, why)));
            }
            return None;
        }
        if is_session {
            self.problem(pl, P_EXTRA_HEADER);
            return None;
        }
        if vpos == 1
            && !self.legacy_v1
            && sk.top == TopKind::Object
            && matches!(sk.id, Val::Missing)
            && matches!(sk.parent_id, Val::Missing)
        {
            // A header over entries with neither `id` nor `parentId`: what Pi 1.6 `forkFrom`
            // writes for a v1 source (a v3 header over the v1 entries, copied unmigrated). Pi
            // then sees one entry per missing id and only the last message in context; we read
            // the entries as v1 (ids, each the child of the previous one), so the first write
            // rewrites the file migrated, as for any v1 file (docs/divergences.md).
            self.legacy_v1 = true;
            self.legacy_v2 = true;
        }
        let idx = self.recs.len() as u32;
        let (id, parent) = if self.legacy_v1 {
            // Pi migrateV1ToV2: fresh ids, each entry the child of the previous one.
            let id = self.synthetic_id(vpos);
            let parent = if self.last_v1_id == NONE {
                KID_NULL
            } else {
                self.last_v1_id
            };
            self.last_v1_id = id;
            (id, parent)
        } else {
            (self.key_of_val(&sk.id), self.key_of_val(&sk.parent_id))
        };
        let etype = match pre.etype {
            Some(c) => c,
            None => self.type_code(&sk.type_),
        };
        let mut role = match (etype, pre.role) {
            (T_MESSAGE, Some(c)) => c,
            (T_MESSAGE, None) => self.role_code(&sk.role),
            _ => 0,
        };
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
            self.key_of_val(&sk.target_id)
        } else if etype == T_COMPACTION {
            self.key_of_val(&sk.first_kept_entry_id)
        } else {
            NONE
        };
        let rec = Rec {
            offset: pl.offset,
            len: pl.len as u32,
            line: pl.line,
            vpos,
            id,
            parent,
            target,
            ts: pre.ts,
            etype,
            role,
            flags,
        };
        self.recs.push(rec);
        if etype == T_CONTEXT_EDIT && self.first_context_edit == NONE {
            self.first_context_edit = idx;
        }
        let prev = self.by_id[id as usize];
        self.prev_winner_scratch = prev;
        if prev != NONE {
            self.dup_ids += 1;
        }
        self.by_id[id as usize] = idx;
        self.leaf = Leaf::Key(id);
        self.leaf_version += 1;
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
            let h = fnv1a(
                &vpos.to_le_bytes(),
                self.v1_seed ^ attempt.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            let s = format!("{:08x}", (h & 0xffff_ffff) as u32);
            if self
                .lookup_str(&s)
                .map(|k| self.winner(k) == NONE)
                .unwrap_or(true)
            {
                return self.intern_str(&s);
            }
            attempt += 1;
        }
    }

    // ------------------------------------------------------------------ queries

    /// Labels in Pi's Map order: (target key id, label entry index).
    pub fn labels(&self) -> Vec<(u32, u32)> {
        let mut v: Vec<(u64, u32, u32)> =
            self.labels.iter().map(|(&t, &(s, e))| (s, t, e)).collect();
        v.sort_unstable();
        v.into_iter().map(|(_, t, e)| (t, e)).collect()
    }
    pub fn label_entry(&self, target: u32) -> Option<u32> {
        self.labels.get(&target).map(|&(_, e)| e)
    }

    /// Entry index whose parsed-value position is `vpos` (for v1 `firstKeptEntryIndex`).
    pub fn entry_at_vpos(&self, vpos: u32) -> Option<u32> {
        self.recs
            .binary_search_by_key(&vpos, |r| r.vpos)
            .ok()
            .map(|i| i as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_codes_name_their_types() {
        for (code, name) in [
            (T_SESSION, "session"),
            (T_MESSAGE, "message"),
            (T_COMPACTION, "compaction"),
            (T_BRANCH_SUMMARY, "branch_summary"),
            (T_CUSTOM_MESSAGE, "custom_message"),
            (T_LABEL, "label"),
            (T_SESSION_INFO, "session_info"),
            (T_CONTEXT_EDIT, "context_edit"),
        ] {
            assert_eq!(TYPE_NAMES[code as usize], name);
        }
    }

    #[test]
    fn problem_runs_answer_each_line_and_truncate_inside_a_run() {
        // (line, offset, kind, arg): a run of blank lines, one of CRLF blanks, lines of one
        // garbage shape, then lines that break runs (another stride, another kind)
        let mut want = Vec::new();
        let mut off = 90u64;
        let mut line = 2u32;
        let mut add =
            |n: usize, len: u64, kind: u8, arg: u64, want: &mut Vec<(u32, u64, u8, u64)>| {
                for _ in 0..n {
                    want.push((line, off, kind, arg));
                    line += 1;
                    off += len;
                }
            };
        add(100_000, 1, P_BLANK, 0, &mut want);
        add(10, 2, P_BLANK, 0, &mut want);
        add(1000, 4, P_MALFORMED, 0, &mut want);
        add(1, 70_000, P_MALFORMED, 0, &mut want);
        add(3, 3, P_MALFORMED, 1, &mut want);
        add(1, 1, P_BLANK, 0, &mut want);
        let mut p = Problems::default();
        for &(l, o, k, a) in &want {
            p.push(
                l,
                o,
                k,
                a,
                if k == P_MALFORMED {
                    "unexpected character"
                } else {
                    ""
                },
            );
        }
        assert_eq!(p.len(), want.len());
        assert!(p.runs() <= 7, "{} runs", p.runs());
        let got: Vec<_> = p.iter().map(|x| (x.line, x.offset)).collect();
        assert_eq!(got, want.iter().map(|w| (w.0, w.1)).collect::<Vec<_>>());
        for i in [
            0,
            99_999,
            100_000,
            100_009,
            100_010,
            101_009,
            101_010,
            101_011,
            want.len() - 1,
        ] {
            let x = p.get(i).unwrap();
            assert_eq!(
                (x.line, x.offset, x.kind),
                (want[i].0, want[i].1, PROBLEM_KINDS[want[i].2 as usize])
            );
        }
        assert!(p.get(want.len()).is_none());
        // keep a prefix that ends inside a run; pushing again continues from there
        p.truncate(50_000);
        assert_eq!(p.len(), 50_000);
        assert_eq!(p.get(49_999).map(|x| x.line), Some(want[49_999].0));
        assert!(p.get(50_000).is_none());
        p.push(want[50_000].0, want[50_000].1, P_BLANK, 0, "");
        assert_eq!((p.len(), p.runs()), (50_001, 1));
        p.truncate(1);
        p.push(want[1].0, want[1].1, P_BLANK, 0, "");
        assert_eq!((p.len(), p.runs()), (2, 1));
        assert_eq!(p.get(1).map(|x| x.offset), Some(want[1].1));
    }

    #[test]
    fn fast_iso_timestamps_read_as_parse_iso_reads_them() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..200_000 {
            let s = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                next(10_000),
                next(14),
                next(33),
                next(26),
                next(61),
                next(61),
                next(1000)
            );
            let want = crate::jsdate::parse_iso(&s);
            match iso_ms_fast(s.as_bytes()) {
                Some(v) => assert_eq!(v, want, "{s}"),
                None => assert!(
                    want.is_nan() || s.starts_with("0000") || s[11..13] == *"24",
                    "{s}: {want}"
                ),
            }
        }
        assert_eq!(
            iso_ms_fast(b"2026-01-01T21:13:17.384Z"),
            Some(crate::jsdate::parse_iso("2026-01-01T21:13:17.384Z"))
        );
    }
}
