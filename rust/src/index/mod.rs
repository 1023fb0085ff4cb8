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
//!
//! Files: this one holds the index and its ingest of lines; `keys.rs` the key table and the
//! by-id map; `codes.rs` type and role codes; `labels.rs` label replay; `problems.rs` skipped
//! lines; `legacy.rs` v1 ids and migration flags; `line.rs` a line's parse before ingest.

mod codes;
mod keys;
mod keystore;
mod labels;
mod legacy;
pub(crate) use legacy::legacy_of_json;
mod line;
mod lookup;
mod persist;
mod problems;
mod recs;
mod view;

pub use codes::*;
pub use line::*;
pub use persist::{fixed_names_stamp, recs_bytes, recs_from_bytes, RecBounds};
pub use problems::{Problem, Problems};
pub use recs::{
    block_cache, BlockCache, BlockChecks, Paged, PagedRecs, RecIter, Recs,
    DEFAULT_BLOCK_CACHE_BYTES, REC_BLOCK,
};
pub use view::{EntryColumns, EntryView, OutOfRange, WalkError};

use crate::json::{JsVal, TopKind, Val};
pub use keys::KeyRec;
use keys::KeyTable;
pub use keystore::{KeySections, KeyStore, PagedKeys, KEY_GROUP};
pub use lookup::{lookup_block_ok, SavedLookup};
use problems::{P_BLANK, P_EXTRA_HEADER, P_FALSY, P_MALFORMED, P_TOO_LONG, P_TORN, P_UTF8};
use std::collections::HashMap;

/// Hash state for small maps keyed by key ids: fast, randomly seeded.
type Hasher = foldhash::fast::RandomState;
/// Hash state for keys: fast, seeded per index with a random seed that a saved index keeps (its
/// key lookup is hashed with it; file contents cannot aim at it).
type KeyHasher = foldhash::fast::FixedState;

pub const NONE: u32 = u32::MAX;
/// Key id of JavaScript `undefined`.
pub const KID_UNDEFINED: u32 = 0;
/// Key id of `null`.
pub const KID_NULL: u32 = 1;

/// One entry's skeleton, 28 bytes. `offset()`/`len` locate the line's JSON text (without
/// `\r\n`). `repr(C)` with no padding: a saved index stores records as their bytes.
///
/// What is not here: the line number is derived ([`Index::line_of`]: entries on consecutive
/// lines share one run); the value position (Pi's `fileEntries` index) too
/// ([`Index::vpos`]: the entry's index, the header and the extra headers before it); the label
/// target or `firstKeptEntryId` lives in a side table ([`Index::target`]), since only labels
/// and compactions have one. The offset takes 40 bits (a line starting 1 TiB or more into a
/// file is a `line_too_long` problem, see [`MAX_OFFSET`]) and the timestamp 54 bits (every
/// `Date` value is an integer of at most 8.64e15 in magnitude, or NaN), packed in `hi` (two
/// 32-bit halves, so that records align on 4 bytes).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Rec {
    pub id: u32,
    pub parent: u32,
    /// at most [`MAX_LINE`]
    pub len: u32,
    pub etype: u16,
    pub role: u16,
    /// the offset's low 32 bits
    off_lo: u32,
    /// as one u64 (low half first).
    ///
    /// Bits 0..54 the timestamp as a signed integer ([`TS_NAN`]: NaN); 54 whether the line is
    /// `JSON.stringify`'s text but for its keys and numbers ([`Rec::stringify_form`]); 55 zero; 56..64 the offset's
    /// bits 32..40
    hi: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<Rec>() == 28);

/// Lines starting at this byte offset or later cannot be recorded (40-bit offsets).
pub const MAX_OFFSET: u64 = 1 << 40;
const TS_BITS: u32 = 54;
const TS_MASK: u64 = (1 << TS_BITS) - 1;
/// The timestamp code of NaN (below every `Date` value, -8.64e15).
const TS_NAN: i64 = -(1 << (TS_BITS - 1));

impl Rec {
    /// A record; None when `offset` is [`MAX_OFFSET`] or more. `ts` is a `Date` value (an
    /// integer of at most 8.64e15 in magnitude, +0 for zero) or NaN; anything else is kept as
    /// NaN (debug builds assert).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        offset: u64,
        len: u32,
        id: u32,
        parent: u32,
        ts: f64,
        etype: u16,
        role: u16,
    ) -> Option<Rec> {
        if offset >= MAX_OFFSET {
            return None;
        }
        let hi = (offset >> 32) << 56 | (ts_code(ts) as u64 & TS_MASK);
        Some(Rec {
            id,
            parent,
            len,
            etype,
            role,
            off_lo: offset as u32,
            hi: [hi as u32, (hi >> 32) as u32],
        })
    }
    #[inline]
    fn hi(&self) -> u64 {
        (self.hi[1] as u64) << 32 | self.hi[0] as u64
    }
    /// Byte offset of the line's JSON text.
    #[inline]
    pub fn offset(&self) -> u64 {
        (self.hi() >> 56) << 32 | self.off_lo as u64
    }
    /// `new Date(timestamp).getTime()`, NaN when invalid.
    #[inline]
    pub fn ts(&self) -> f64 {
        let v = ((self.hi() << (64 - TS_BITS)) as i64) >> (64 - TS_BITS);
        if v == TS_NAN {
            f64::NAN
        } else {
            v as f64
        }
    }
    /// Whether the bits a record never sets are zero and the timestamp is a `Date` value
    /// (checked on every record of a saved index).
    #[inline]
    pub(crate) fn well_formed(&self) -> bool {
        let ts = self.ts();
        self.hi() >> TS_BITS & 2 == 0 && (ts.is_nan() || ts.abs() <= 8.64e15)
    }
    /// Whether the scan found the entry's line `JSON.stringify`'s text but for keys and numbers.
    ///
    /// The line: its JSON text, see [`Rec::offset`]; the text `JSON.stringify(JSON.parse(line))`
    /// writes unless a number in it is spelled otherwise or an object has a repeated,
    /// array-index or 33rd key
    /// ([`crate::json::Skel::canon`], valid UTF-8). RPC `get_tree` copies such a line instead of
    /// writing it again once [`crate::json::canon_rest`] passes it. False is always safe (the
    /// exact writer is used).
    #[inline]
    pub fn stringify_form(&self) -> bool {
        self.hi() >> TS_BITS & 1 != 0
    }
    /// This record with [`Rec::stringify_form`] set to `yes`.
    #[inline]
    pub fn with_stringify_form(mut self, yes: bool) -> Rec {
        let hi = self.hi() & !(1 << TS_BITS) | u64::from(yes) << TS_BITS;
        self.hi = [hi as u32, (hi >> 32) as u32];
        self
    }
}

/// A random 64-bit seed (the standard library's per-process random keys, bumped per call).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher as _};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x5e55_1017);
    h.finish()
}

/// The 54-bit code of a `Date` value (see [`Rec`]).
#[inline]
fn ts_code(ts: f64) -> i64 {
    if ts.is_nan() {
        return TS_NAN;
    }
    let ok = ts.abs() <= 8.64e15 && ts.trunc() == ts && !(ts == 0.0 && ts.is_sign_negative());
    debug_assert!(ok, "not a Date value: {ts}");
    if ok {
        ts as i64
    } else {
        TS_NAN
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
    extra_len: usize,
    values: u32,
    by_id_prev: Option<(u32, u32)>,
    label_prev: Option<(u32, Option<(u64, u32)>)>,
    session_info_prev: u32,
    leaf_prev: Leaf,
    last_v1_prev: u32,
    header: Option<HeaderUndo>,
    /// (legacy_v1, legacy_v2, v1_seed): what a header line set
    legacy_prev: (bool, bool, u64),
    /// the stats row's sums before the line (when kept)
    row_sums_prev: Option<Box<crate::rows::RowSums>>,
}

/// The index. Bytes live elsewhere (see `store`); this holds only skeletons.
#[derive(Default)]
pub struct Index {
    pub recs: Recs,
    /// (entry index, key id) of each label's target and each compaction's
    /// `firstKeptEntryId`, in entry order (see [`Index::target`])
    targets: Vec<(u32, u32)>,
    /// (entry index, its 1-based line number) of each entry whose line does not follow the previous
    /// entry's.
    ///
    /// What [`Index::line_of`] derives line numbers from
    line_runs: Vec<(u32, u32)>,
    /// for each extra header line (a later `type:"session"` value), the number of entries before
    /// it.
    ///
    /// What [`Index::vpos`] derives value positions from
    extra_headers: Vec<u32>,
    /// interned keys by value (strings, numbers, booleans).
    ///
    /// The table holds key ids (built lazily after a restore from a saved index)
    keys: std::sync::OnceLock<KeyTable>,
    hasher: KeyHasher,
    /// the seed of `hasher` (random, or the saved index's)
    key_seed: u64,
    /// a saved index's key lookup, read on demand (a restored index only). The key table then
    /// holds only the keys interned since the restore (from `SavedLookup::nkeys` on); a lookup
    /// asks the table, then this (see `keys.rs`)
    saved_lookup: Option<Box<lookup::SavedLookup>>,
    /// the keys (see [`KeyRec`]; read on demand after a restore)
    kstore: keystore::KeyStore,
    /// key id → winning entry index (NONE when no entry has that id).
    ///
    /// Built from the records on first use after a restore from a saved index (see
    /// [`Index::by_id`]): a warm open that follows no link never reads every record
    by_id: std::sync::OnceLock<Vec<u32>>,
    /// the saved index's by-id map, read on demand until `by_id` is built (a restored index
    /// only; see [`Index::winner`])
    saved_winners: Option<Box<recs::Paged<u32>>>,
    /// the winners changed since the restore while `by_id` is not built (key id → winning entry
    /// index; with `saved_winners`, see [`Index::winner`])
    winners_since: hashbrown::HashMap<u32, u32, Hasher>,
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
    /// Bumped whenever the leaf may have moved (an entry indexed, a rollback, `set_leaf`).
    ///
    /// An append built from a leaf read earlier is written only if this did not change.
    pub leaf_version: u64,
    prev_winner_scratch: u32,
    prev_label_scratch: Option<(u64, u32)>,
    /// seed for v1 ids: a hash of the header id, so ids are stable across opens
    v1_seed: u64,
    /// records announced to [`Index::restore_records`] (0 otherwise)
    pending_recs: u32,
    /// The stats row's usage sums, kept as lines are ingested; None unless asked for. They are
    /// asked for before the scan ([`Index::keep_row_sums`]); a restored saved index has none.
    pub row_sums: Option<Box<crate::rows::RowSums>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeaderStateBox(pub HeaderState);
impl Default for HeaderStateBox {
    fn default() -> Self {
        HeaderStateBox(HeaderState::Empty)
    }
}

impl Index {
    pub fn new() -> Self {
        Index::with_key_seed(random_seed())
    }

    /// An empty index whose keys hash with `seed`.
    ///
    /// A saved index's seed, for a scan that must give the same saved key lookup.
    pub fn with_key_seed(seed: u64) -> Self {
        let mut ix = Index {
            hasher: KeyHasher::with_seed(seed),
            key_seed: seed,
            session_info: NONE,
            leaf: Leaf::Null,
            last_v1_id: NONE,
            prev_winner_scratch: NONE,
            first_context_edit: NONE,
            ..Default::default()
        };
        ix.push_fixed_keys();
        ix.push_fixed_codes();
        ix
    }

    /// Number of distinct ids (Pi `getEntryCount()`: the size of the by-id map).
    pub fn entry_count(&self) -> usize {
        self.recs.len() - self.dup_ids as usize
    }
    /// Whether two entries share an id (then "the entry with id X on a path" needs the whole path).
    pub fn has_duplicate_ids(&self) -> bool {
        self.dup_ids > 0
    }

    /// Keeps the stats row's usage sums ([`crate::rows::RowSums`]) from here on. The scan then
    /// computes each usage candidate's [`crate::rows::LineRow`] while it parses the line. Only on
    /// an empty index (the sums cover every entry or none).
    pub fn keep_row_sums(&mut self) {
        if self.recs.is_empty() && self.pending_recs == 0 {
            self.row_sums = Some(Box::default());
        }
    }

    /// Adds entry `i` (type `etype`, role `role`) to the kept row sums, with the row the scan
    /// computed for its line (`row`: the codes it assumed and the row).
    fn add_row_sums(
        &mut self,
        i: u32,
        etype: u16,
        role: u16,
        row: Option<&(u16, u16, crate::rows::LineRow)>,
    ) {
        let Some(acc) = self.row_sums.as_deref_mut() else {
            return;
        };
        if !crate::rows::is_candidate(etype, role) {
            return;
        }
        match row {
            Some((e, r, one)) if *e == etype && *r == role => {
                let summary = crate::entry_kind::type_row(etype).is_summary();
                acc.add(i, summary, one);
            }
            _ => acc.complete = false,
        }
    }

    // ------------------------------------------------------------------ ingest

    /// Undoes what an unterminated last line did (called before scanning from its start).
    pub fn rollback_provisional(&mut self) -> Option<(u64, u32)> {
        let p = self.provisional.take()?;
        self.problems.truncate(p.problems_len);
        self.recs.truncate(p.entries_len);
        let t = self
            .targets
            .partition_point(|&(i, _)| (i as usize) < p.entries_len);
        self.targets.truncate(t);
        let t = self
            .line_runs
            .partition_point(|&(i, _)| (i as usize) < p.entries_len);
        self.line_runs.truncate(t);
        self.extra_headers.truncate(p.extra_len);
        if self.first_context_edit != NONE && self.first_context_edit as usize >= p.entries_len {
            self.first_context_edit = NONE;
        }
        self.values = p.values;
        if self.row_sums.is_some() {
            self.row_sums = p.row_sums_prev;
        }
        if let Some((kid, prev)) = p.by_id_prev {
            let now = self.set_winner(kid, prev);
            if prev != NONE && now != NONE && prev != now {
                self.dup_ids -= 1;
            }
        }
        if let Some((target, prev)) = p.label_prev {
            self.restore_label(target, prev);
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
                extra_len: self.extra_headers.len(),
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
                row_sums_prev: self.row_sums.clone(),
            })
        };
        let r = self.ingest_inner(pl);
        if let Some(mut p) = prov {
            if let Some(i) = r {
                let rec = self.recs.at(i as usize);
                p.by_id_prev = Some((rec.id, self.prev_winner_scratch));
                if rec.etype == T_LABEL {
                    p.label_prev = Some((self.target(i), self.prev_label_scratch));
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
        if pl.offset >= MAX_OFFSET {
            // a record keeps 40-bit offsets: a line starting 1 TiB or more into the file is
            // not indexed (reported as too long)
            self.problems
                .push(pl.line, pl.offset, P_TOO_LONG, pl.len, "");
            return None;
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
                self.seed_legacy(sk.id.as_str().unwrap_or(""));
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
            self.extra_headers.push(self.recs.len() as u32);
            return None;
        }

        self.detect_unmigrated_fork(vpos, sk);
        let idx = self.recs.len() as u32;
        let (id, parent) = if self.legacy_v1 {
            self.v1_link(vpos)
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
        let target = if etype == T_LABEL {
            self.key_of_val(&sk.target_id)
        } else if etype == T_COMPACTION {
            self.key_of_val(&sk.first_kept_entry_id)
        } else {
            NONE
        };
        if self.line_of_next() != pl.line {
            self.line_runs.push((idx, pl.line));
        }
        let rec = Rec::new(pl.offset, pl.len as u32, id, parent, pre.ts, etype, role)
            .expect("offset checked above")
            .with_stringify_form(sk.canon && !sk.invalid_utf8);
        self.recs.push(rec);
        self.add_row_sums(idx, etype, role, pl.row.as_deref());
        if target != NONE {
            self.targets.push((idx, target));
        }
        if etype == T_CONTEXT_EDIT && self.first_context_edit == NONE {
            self.first_context_edit = idx;
        }
        let prev = self.set_winner(id, idx);
        self.prev_winner_scratch = prev;
        if prev != NONE {
            self.dup_ids += 1;
        }
        self.leaf = Leaf::Key(id);
        self.leaf_version += 1;
        if etype == T_LABEL {
            self.replay_label(target, idx, sk.label.truthy());
        } else if etype == T_SESSION_INFO {
            self.session_info = idx;
        }
        self.generation += 1;
        Some(idx)
    }

    /// Entry `i`'s 1-based line number in the file.
    #[inline]
    pub fn line_of(&self, i: u32) -> u32 {
        let k = self.line_runs.partition_point(|&(e, _)| e <= i);
        match k.checked_sub(1) {
            Some(k) => {
                let (e, line) = self.line_runs[k];
                line + (i - e)
            }
            None => 0, // (no entry yet)
        }
    }

    /// The line the next entry would have if it followed the last one (0 before any).
    fn line_of_next(&self) -> u32 {
        match self.line_runs.last() {
            Some(&(e, line)) => line + (self.recs.len() as u32 - e),
            None => 0,
        }
    }

    /// Entry `i`'s position among parsed values, the header being 0 (Pi's `fileEntries` index).
    ///
    /// The header, the entries before it and the extra headers before it.
    pub fn vpos(&self, i: u32) -> u32 {
        let extra = self.extra_headers.partition_point(|&n| n <= i) as u32;
        1 + i + extra
    }

    /// Entry index whose parsed-value position is `vpos` (for v1 `firstKeptEntryIndex`).
    pub fn entry_at_vpos(&self, vpos: u32) -> Option<u32> {
        let n = self.recs.len() as u32;
        // vpos is strictly increasing in the entry index
        let (mut lo, mut hi) = (0u32, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.vpos(mid) < vpos {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < n && self.vpos(lo) == vpos).then_some(lo)
    }

    /// Entry `i`'s label target or `firstKeptEntryId` as a key id; NONE for other entries. The
    /// label target for a label, `firstKeptEntryId` for a compaction.
    pub fn target(&self, i: u32) -> u32 {
        match self.targets.binary_search_by_key(&i, |&(e, _)| e) {
            Ok(k) => self.targets[k].1,
            Err(_) => NONE,
        }
    }
}

#[cfg(test)]
mod tests;
