//! The by-id map: JavaScript `Map` keys interned as key ids, and the winning entry of each.
//!
//! Keys are strings, numbers, booleans, `null` and `undefined` by value, objects and arrays by
//! identity; here too the open-addressing key table behind them and the memory advice for these
//! tables.

use super::keystore::KeyStore;
use super::{Index, KeyHasher, LineResult, ParsedLine, KID_NULL, KID_UNDEFINED, NONE};
use crate::json::{JsVal, Val};
use std::hash::BuildHasher;

/// What a key id stands for.
///
/// A JavaScript `Map` key (see [`Index::key_of`]), 8 bytes: its tag (top 3 bits) and where its
/// bytes start in `key_bytes` (the rest). A key's bytes end where the next key's start (the last
/// key's at the end of `key_bytes`): a string's UTF-8, a number's f64 bits (8 bytes, native order,
/// -0 as 0), a boolean's one byte (0 or 1), nothing for `undefined`, `null` and objects. Its
/// truthiness follows from those.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(transparent)]
pub struct KeyRec(pub(super) u64);

const TAG_SHIFT: u32 = 61;
pub(super) const KEY_START_MAX: u64 = (1 << TAG_SHIFT) - 1;

impl KeyRec {
    #[inline]
    pub(super) fn new(tag: u8, start: u64) -> Self {
        debug_assert!(start <= KEY_START_MAX && tag <= K_OBJECT);
        KeyRec((tag as u64) << TAG_SHIFT | start)
    }
    #[inline]
    pub(super) fn tag(self) -> u8 {
        (self.0 >> TAG_SHIFT) as u8
    }
    #[inline]
    pub(super) fn start(self) -> u64 {
        self.0 & KEY_START_MAX
    }
}

pub(super) const K_UNDEFINED: u8 = 0;
pub(super) const K_NULL: u8 = 1;
pub(super) const K_STR: u8 = 2;
pub(super) const K_NUM: u8 = 3;
pub(super) const K_BOOL: u8 = 4;
pub(super) const K_OBJECT: u8 = 5;

/// Key ids by hash.
///
/// Open addressing with linear probing, each slot `(hash >> 32) << 32 | (key id + 1)` (0 = empty),
/// at most [`MAX_LOAD_NUM`]/[`MAX_LOAD_DEN`] full (a probe that misses compares 32-bit hash tags in
/// the slots, which share cache lines, and touches no key until a tag matches). Our own rather than
/// a library map so the sequential indexing pass can prefetch the slots of the lines it is about to
/// index: with a million ids the table no longer fits in cache while the file streams through it.
pub(super) const MAX_LOAD_NUM: usize = 7;
pub(super) const MAX_LOAD_DEN: usize = 8;

#[derive(Default)]
pub(super) struct KeyTable {
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
        let need = ((self.len + more) * MAX_LOAD_DEN).div_ceil(MAX_LOAD_NUM);
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

impl Index {
    /// The fixed keys every index starts with: `undefined` ([`KID_UNDEFINED`]) and `null`
    /// ([`KID_NULL`]).
    pub(super) fn push_fixed_keys(&mut self) {
        for tag in [K_UNDEFINED, K_NULL] {
            self.push_key(tag, &[]);
        }
        debug_assert_eq!(self.kstore.len() as u32, KID_NULL + 1);
    }

    /// A new key of `tag` whose bytes are `data` (see [`KeyRec`]).
    pub(super) fn push_key(&mut self, tag: u8, data: &[u8]) -> u32 {
        // (the map first: built lazily, it is sized by the keys before this one; a restored
        // index that has not built it has no winner for a new key)
        if let Some(m) = self.by_id_map_mut() {
            m.push(NONE);
        }
        self.kstore.push(tag, data)
    }

    /// The tag and bytes of key `kid` (see [`KeyRec`]).
    #[inline]
    fn key_data(&self, kid: u32) -> (u8, &[u8]) {
        self.kstore.data(kid)
    }
    /// A scalar key's value as the table hashes it: a number's f64 bits, a boolean's 0 or 1.
    #[inline]
    fn scalar_bits(data: &[u8]) -> u64 {
        match data.len() {
            8 => u64::from_ne_bytes(data.try_into().expect("8 bytes")),
            1 => data[0] as u64,
            _ => 0,
        }
    }

    #[inline]
    pub(super) fn hash_str(&self, s: &[u8]) -> u64 {
        self.hasher.hash_one(s)
    }
    #[inline]
    pub(super) fn hash_scalar(&self, tag: u8, data: u64) -> u64 {
        self.hasher.hash_one((tag, data))
    }
    #[inline]
    pub(super) fn key_hash(hasher: &KeyHasher, keys: &KeyStore, kid: u32) -> u64 {
        let (tag, d) = keys.data(kid);
        if tag == K_STR {
            hasher.hash_one(d)
        } else {
            hasher.hash_one((tag, Self::scalar_bits(d)))
        }
    }

    /// The key table, built from the keys on first use after a restore from a saved index
    /// (`persist.rs`).
    ///
    /// A warm open that never looks an id up never pays for it.
    #[inline]
    fn table(&self) -> &KeyTable {
        self.keys.get_or_init(|| self.rebuild_table())
    }

    /// Makes sure the key table exists (see [`Index::table`]) before it is changed.
    #[inline]
    fn ensure_table(&mut self) {
        if self.keys.get().is_none() {
            let t = self.rebuild_table();
            let _ = self.keys.set(t);
        }
    }

    /// The key ids below this are a saved index's, found through its key lookup; the key table
    /// holds the (string, number, boolean) keys from here on.
    #[inline]
    fn table_base(&self) -> u32 {
        self.saved_lookup.as_ref().map_or(0, |l| l.nkeys)
    }

    /// The table of every interned (string, number, boolean) key from [`Index::table_base`] on:
    /// after a restore with a saved key lookup, only those interned since (none at first).
    fn rebuild_table(&self) -> KeyTable {
        let mut t = KeyTable::default();
        let (hasher, ks) = (&self.hasher, &self.kstore);
        let nk = ks.len() as u32;
        let base = self.table_base();
        let n = (base..nk)
            .filter(|&k| matches!(ks.tag(k), K_STR | K_NUM | K_BOOL))
            .count();
        t.reserve(n, |k| Self::key_hash(hasher, ks, k));
        // each key's slot is prefetched AHEAD keys before it is written: the table is far
        // larger than the cache, and a miss per key would dominate the rebuild
        const AHEAD: usize = 16;
        let mut ring = [(0u64, 0u32); AHEAD];
        let mut pending = 0usize;
        for kid in base..nk {
            if matches!(ks.tag(kid), K_STR | K_NUM | K_BOOL) {
                let h = Self::key_hash(hasher, ks, kid);
                t.prefetch(h);
                let slot = &mut ring[pending % AHEAD];
                if pending >= AHEAD {
                    t.put(slot.0, slot.1);
                }
                *slot = (h, kid);
                pending += 1;
            }
        }
        for j in pending.saturating_sub(AHEAD)..pending {
            let (h, kid) = ring[j % AHEAD];
            t.put(h, kid);
        }
        t.len = n;
        t
    }

    /// Key id of a string, without interning.
    #[inline]
    pub(super) fn find_str(&self, s: &[u8], h: u64) -> Option<u32> {
        let eq = |kid: u32| {
            let (tag, d) = self.kstore.data(kid);
            tag == K_STR && d.len() == s.len() && same_bytes(d, s)
        };
        self.table()
            .find(h, eq)
            .or_else(|| self.saved_lookup.as_ref()?.find(h, eq))
    }

    /// Key id of a number or boolean key (`tag`, its bits as [`Index::scalar_bits`] gives them),
    /// without interning.
    fn find_scalar(&self, tag: u8, data: u64, h: u64) -> Option<u32> {
        let eq = |kid: u32| {
            let (t, d) = self.key_data(kid);
            t == tag && Self::scalar_bits(d) == data
        };
        self.table()
            .find(h, eq)
            .or_else(|| self.saved_lookup.as_ref()?.find(h, eq))
    }

    /// The seed the keys hash with (a saved index keeps it with its key lookup).
    pub fn key_seed(&self) -> u64 {
        self.key_seed
    }

    /// How many entries the key lookup holds: one per string, number and boolean key.
    pub fn lookup_len(&self) -> usize {
        self.table().len + self.saved_lookup.as_ref().map_or(0, |l| l.len())
    }

    /// The key lookup a saved index stores (see `lookup.rs`), ascending.
    ///
    /// Per string, number and boolean key, `hash >> 32 << 32 | key id` ([`Index::lookup_len`] of
    /// them). A restored index's saved lookup is read whole.
    pub fn lookup_entries(&self) -> Vec<u64> {
        let t = self.table();
        let mut v = self
            .saved_lookup
            .as_ref()
            .map_or_else(Vec::new, |l| l.to_vec());
        v.reserve(t.len);
        v.extend(
            t.slots
                .iter()
                .filter(|&&s| s != 0)
                .map(|&s| s & !0xffff_ffff | (s as u32 - 1) as u64),
        );
        super::lookup::sort_entries(v)
    }

    /// Hints the cache about the key-table slots a parsed line is about to look up.
    #[inline]
    pub fn prefetch_keys(&self, pl: &ParsedLine<'_>) {
        if let LineResult::Value(sk, _) = &pl.result {
            let Some(t) = self.keys.get() else { return };
            if let Val::Str(s) = &sk.id {
                t.prefetch(self.hash_str(s.as_bytes()));
            }
            if let Val::Str(s) = &sk.parent_id {
                t.prefetch(self.hash_str(s.as_bytes()));
            }
        }
    }

    /// Hints the cache about the key-table slot where string key `s` would be looked up.
    #[inline]
    pub fn prefetch_str(&self, s: &[u8]) {
        if let Some(t) = self.keys.get() {
            t.prefetch(self.hash_str(s));
        }
    }

    pub(super) fn intern_bytes_str(&mut self, s: &str) -> u32 {
        let h = self.hash_str(s.as_bytes());
        if let Some(k) = self.find_str(s.as_bytes(), h) {
            return k;
        }
        let kid = self.push_key(K_STR, s.as_bytes());
        self.ensure_table();
        let (hasher, ks) = (&self.hasher, &self.kstore);
        let keys = self.keys.get_mut().expect("just built");
        keys.insert(h, kid, |k| Self::key_hash(hasher, ks, k));
        kid
    }

    pub(super) fn intern_scalar(&mut self, tag: u8, data: u64) -> u32 {
        let h = self.hash_scalar(tag, data);
        if let Some(k) = self.find_scalar(tag, data, h) {
            return k;
        }
        let kid = if tag == K_BOOL {
            self.push_key(tag, &[data as u8])
        } else {
            self.push_key(tag, &data.to_ne_bytes())
        };
        self.ensure_table();
        let (hasher, ks) = (&self.hasher, &self.kstore);
        let keys = self.keys.get_mut().expect("just built");
        keys.insert(h, kid, |k| Self::key_hash(hasher, ks, k));
        kid
    }

    /// The key id for a JSON value, interning it (objects get a fresh identity).
    pub fn key_of(&mut self, v: &JsVal) -> u32 {
        match v {
            JsVal::Missing => KID_UNDEFINED,
            JsVal::Null => KID_NULL,
            JsVal::Composite => self.push_key(K_OBJECT, &[]),
            JsVal::Str(s) => self.intern_bytes_str(s),
            JsVal::Num(n) => self.key_of_num(*n),
            JsVal::Bool(b) => self.intern_scalar(K_BOOL, *b as u64),
        }
    }

    pub(super) fn key_of_num(&mut self, n: f64) -> u32 {
        // Map keys use SameValueZero: -0 and 0 are one key (NaN cannot come from JSON)
        let n = if n == 0.0 { 0.0 } else { n };
        self.intern_scalar(K_NUM, n.to_bits())
    }

    /// [`Index::key_of`] for a borrowed value.
    #[inline]
    pub(super) fn key_of_val(&mut self, v: &Val) -> u32 {
        match v {
            Val::Missing => KID_UNDEFINED,
            Val::Null => KID_NULL,
            Val::Str(s) => self.intern_bytes_str(s),
            Val::Num(n) => self.key_of_num(*n),
            Val::Bool(b) => self.intern_scalar(K_BOOL, *b as u64),
            Val::Composite => self.push_key(K_OBJECT, &[]),
        }
    }

    /// Makes room for about `entries` more entries (a guess from the bytes about to be scanned).
    ///
    /// So the key table does not rehash as it fills, and the large arrays that grow
    /// with every entry are neither copied as they grow nor faulted in 4 KiB at a time.
    pub fn reserve(&mut self, entries: usize) {
        self.ensure_table();
        let (hasher, ks) = (&self.hasher, &self.kstore);
        let keys = self.keys.get_mut().expect("just built");
        keys.reserve(entries, |k| Self::key_hash(hasher, ks, k));
        reserve_large(self.recs.tail_mut(), entries);
        // about one new key (its id) per entry; Pi ids are 8 bytes
        let (kr, kb) = self.kstore.tails_mut();
        reserve_large(kr, entries);
        reserve_large(kb, entries * 8);
        if let Some(m) = self.by_id_map_mut() {
            reserve_large(m, entries);
        }
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
        let (tag, d) = self.key_data(kid);
        match tag {
            K_STR => !d.is_empty(),
            K_NUM => f64::from_bits(Self::scalar_bits(d)) != 0.0, // (NaN is never a key)
            K_BOOL => Self::scalar_bits(d) != 0,
            K_OBJECT => true,
            _ => false,
        }
    }
    /// The JSON text `JSON.stringify` gives a non-string scalar key, or None. A number or boolean
    /// id, as hostile files have; None for strings, objects and missing values.
    pub fn scalar_key_json(&self, kid: u32) -> Option<String> {
        if kid as usize >= self.kstore.len() {
            return None;
        }
        let (tag, d) = self.key_data(kid);
        let data = Self::scalar_bits(d);
        match tag {
            K_NUM => Some(
                ryu_js::Buffer::new()
                    .format(f64::from_bits(data))
                    .to_string(),
            ),
            K_BOOL => Some(if data != 0 { "true" } else { "false" }.to_string()),
            K_NULL => Some("null".to_string()),
            _ => None,
        }
    }

    /// A non-string scalar key (number, boolean, null) as a skeleton value, or None.
    pub fn scalar_key(&self, kid: u32) -> Option<Val<'static>> {
        if kid as usize >= self.kstore.len() {
            return None;
        }
        let (tag, d) = self.key_data(kid);
        let data = Self::scalar_bits(d);
        match tag {
            K_NUM => Some(Val::Num(f64::from_bits(data))),
            K_BOOL => Some(Val::Bool(data != 0)),
            K_NULL => Some(Val::Null),
            _ => None,
        }
    }

    /// The string behind a key id, if the key is a string.
    pub fn key_string(&self, kid: u32) -> Option<&str> {
        if kid as usize >= self.kstore.len() {
            return None;
        }
        let (tag, d) = self.key_data(kid);
        if tag != K_STR {
            return None;
        }
        // SAFETY: string keys are copied from `&str`s only (a restored index checks each one).
        Some(unsafe { std::str::from_utf8_unchecked(d) })
    }
    /// Entry that currently owns key `kid` (last occurrence wins), or NONE.
    pub fn winner(&self, kid: u32) -> u32 {
        if self.by_id.get().is_none() {
            if let Some(w) = &self.saved_winners {
                if let Some(&e) = self.winners_since.get(&kid) {
                    return e;
                }
                return if (kid as usize) < w.len() {
                    w.get(kid as usize)
                } else {
                    NONE
                };
            }
        }
        self.by_id().get(kid as usize).copied().unwrap_or(NONE)
    }

    /// The by-id map as a vector (key id → winning entry index, NONE: no entry has that id).
    pub fn winners(&self) -> Vec<u32> {
        self.by_id().to_vec()
    }

    /// The by-id map's bytes (4 per key id, native order), as a saved index stores them.
    pub fn winners_bytes(&self) -> &[u8] {
        let w = self.by_id();
        // SAFETY: a view of the words' initialised bytes, exactly their length.
        unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, std::mem::size_of_val(w)) }
    }

    /// Why a block of the saved index was found damaged when read (the first), if one was.
    pub fn saved_damage(&self) -> Option<&str> {
        self.recs
            .damaged()
            .or_else(|| self.saved_winners.as_ref()?.damaged())
            .or_else(|| self.kstore.damaged())
            .or_else(|| self.saved_lookup.as_ref()?.entries.damaged())
    }

    /// Whether a damaged block of the saved index could not be served from a cold scan. Then no
    /// answer may be given from this index.
    pub fn saved_unrecoverable(&self) -> bool {
        self.recs.unrecoverable()
            || self
                .saved_winners
                .as_ref()
                .is_some_and(|w| w.unrecoverable())
            || self.kstore.unrecoverable()
            || self
                .saved_lookup
                .as_ref()
                .is_some_and(|l| l.entries.unrecoverable())
    }

    /// Blocks read from the saved index so far, of how many.
    ///
    /// Records, winners, key groups and key lookup blocks.
    pub fn saved_blocks_read(&self) -> (usize, usize) {
        let (a, b) = self.recs.blocks_read();
        let (c, d) = self
            .saved_winners
            .as_ref()
            .map_or((0, 0), |w| w.blocks_read());
        let (e, f) = self.kstore.groups_read();
        let (g, h) = self
            .saved_lookup
            .as_ref()
            .map_or((0, 0), |l| l.entries.blocks_read());
        (a + c + e + g, b + d + f + h)
    }

    /// The by-id map (key id → winning entry index), built from the records on first use after
    /// a restore (each record read then, in file order: a later duplicate wins).
    #[inline]
    fn by_id(&self) -> &[u32] {
        self.by_id.get_or_init(|| self.build_by_id())
    }

    /// The by-id map, to change (built first when it is not yet; see [`Index::by_id`]), or None
    /// for a restored index that has not built it: its winners are the saved ones and
    /// `winners_since` (see [`Index::set_winner`]), so that indexing appended lines costs what
    /// they cost, not a map of every key.
    #[inline]
    pub(super) fn by_id_map_mut(&mut self) -> Option<&mut Vec<u32>> {
        if self.by_id.get().is_none() {
            if self.saved_winners.is_some() {
                return None;
            }
            let v = self.build_by_id();
            let _ = self.by_id.set(v);
        }
        self.by_id.get_mut()
    }

    /// Makes entry `e` the winner of key `kid` (NONE: none); the winner before.
    #[inline]
    pub(super) fn set_winner(&mut self, kid: u32, e: u32) -> u32 {
        if let Some(m) = self.by_id_map_mut() {
            return std::mem::replace(&mut m[kid as usize], e);
        }
        let prev = self.winner(kid);
        self.winners_since.insert(kid, e);
        prev
    }

    /// The map from the records: one slot per key (NONE: no entry has that id).
    fn build_by_id(&self) -> Vec<u32> {
        let (mut by_id, from) = match &self.saved_winners {
            // the saved map, then the records after the saved ones
            Some(w) => (
                (0..w.len()).map(|k| w.get(k)).collect(),
                self.recs.saved_len(),
            ),
            None => (Vec::new(), 0),
        };
        by_id.resize(self.kstore.len(), NONE);
        for i in from..self.recs.len() {
            // (every record's id is a key: checked when its block was read)
            if let Some(slot) = by_id.get_mut(self.recs.at(i).id as usize) {
                *slot = i as u32;
            }
        }
        by_id
    }
    pub fn index_of_str(&self, s: &str) -> Option<u32> {
        self.lookup_str(s)
            .map(|k| self.winner(k))
            .filter(|&w| w != NONE)
    }
}
