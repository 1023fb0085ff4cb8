//! The index as bytes and back, for the saved index. `crate::saved` owns the file, its checks and
//! its folder. Only what cannot be derived is written: the meta (a stamp of the fixed type and role
//! names, [`fixed_names_stamp`], then the extra type and role names, labels, problem runs, line
//! runs, label/compaction targets, extra headers, the header state), the key records and key bytes
//! as they are, and the records as their bytes; the meta ends with the seed the keys hash with
//! and the size of the key lookup (`lookup.rs`), which `crate::saved` stores. A restored index
//! finds saved keys through the saved key lookup and winners through the saved by-id map; its
//! key table holds only the keys interned since.
//!
//! Restoring trusts nothing: every length is checked against the bytes left before anything
//! is allocated, and every key (tag, start, the bytes of its kind, UTF-8 for strings), key
//! id, entry index, offset, line, type and role code is bounds-checked, so a damaged or
//! forged input gives `None` (the caller then scans the file), never a panic, an
//! out-of-bounds index later, or an allocation larger than the input. It comes in two halves
//! ([`Index::restore_meta`], [`Index::restore_records`]) so that the records can be read on
//! another thread meanwhile.

use super::keys::{KeyRec, K_BOOL, K_NULL, K_NUM, K_OBJECT, K_STR, K_UNDEFINED};
use super::{HeaderState, HeaderStateBox, Index, Leaf, Rec, NONE};
use crate::json::JsVal;

/// A stamp of the fixed names tables (`TYPE_NAMES`, `ROLE_NAMES`), the first value of the
/// meta. Records hold codes, and an interned name's code is its position after the fixed names,
/// so an index saved by a build with other fixed tables (a type appended to `TYPE_NAMES`, as
/// CONTRIBUTING's entry-type steps do) would read back with other types: a restore under other
/// tables is refused. FNV-1a over the names, each ended by 0xff (never a byte of UTF-8), each
/// table by 0xfe: stable across builds and runs.
pub fn fixed_names_stamp(types: &[&str], roles: &[&str]) -> u64 {
    const PRIME: u64 = 0x0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    };
    for names in [types, roles] {
        for n in names {
            n.bytes().for_each(&mut eat);
            eat(0xff);
        }
        eat(0xfe);
    }
    h
}

/// Appends native-endian values (the saved file records the byte order it was written in).
pub(crate) struct Out<'a>(pub &'a mut Vec<u8>);

impl Out<'_> {
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_ne_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_ne_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_ne_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

/// Reads what [`Out`] wrote; every read is bounds-checked (None past the end).
pub(crate) struct In<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> In<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        In { b, pos: 0 }
    }
    pub fn left(&self) -> usize {
        self.b.len() - self.pos
    }
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.left() {
            return None;
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Some(s)
    }
    pub fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Option<u16> {
        Some(u16::from_ne_bytes(self.take(2)?.try_into().ok()?))
    }
    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_ne_bytes(self.take(4)?.try_into().ok()?))
    }
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_ne_bytes(self.take(8)?.try_into().ok()?))
    }
    /// A count of items of at least `min_size` bytes each that must still fit in the input.
    pub fn count(&mut self, min_size: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n.checked_mul(min_size.max(1))? <= self.left()).then_some(n)
    }
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.count(1)?;
        self.take(n)
    }
    pub fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }
    pub fn at_end(&self) -> bool {
        self.pos == self.b.len()
    }
}

fn put_jsval(o: &mut Out, v: &JsVal) {
    match v {
        JsVal::Missing => o.u8(0),
        JsVal::Null => o.u8(1),
        JsVal::Bool(b) => {
            o.u8(2);
            o.u8(*b as u8);
        }
        JsVal::Num(n) => {
            o.u8(3);
            o.u64(n.to_bits());
        }
        JsVal::Str(s) => {
            o.u8(4);
            o.bytes(s.as_bytes());
        }
        JsVal::Composite => o.u8(5),
    }
}

fn get_jsval(r: &mut In) -> Option<JsVal> {
    Some(match r.u8()? {
        0 => JsVal::Missing,
        1 => JsVal::Null,
        2 => JsVal::Bool(r.u8()? != 0),
        3 => JsVal::Num(f64::from_bits(r.u64()?)),
        4 => JsVal::Str(r.str()?.to_string()),
        5 => JsVal::Composite,
        _ => return None,
    })
}

/// The records as bytes (`Rec` is `repr(C)` with no padding: every byte is initialised).
pub fn recs_bytes(recs: &[Rec]) -> &[u8] {
    // SAFETY: `Rec` is `repr(C)`, 32 bytes, made of integers with no padding between or after
    // them, so its memory holds no uninitialised bytes; the length is exact.
    unsafe { std::slice::from_raw_parts(recs.as_ptr() as *const u8, std::mem::size_of_val(recs)) }
}

/// The key records from their saved bytes, checked against the key bytes.
///
/// Tags known (the fixed `undefined` and `null` first and only there), starts in order and inside
/// the bytes, each key's bytes of its kind: a string valid UTF-8, a number 8 bytes of a non-NaN f64
/// (0 as +0), a boolean one byte 0 or 1, nothing for the others. `keys` are the keys from id
/// `first` on, `bytes` their bytes, which start at `base` of the key bytes (the first key's start).
pub(super) fn check_keys(keys: &[KeyRec], bytes: &[u8], base: u64, first: usize) -> Option<()> {
    let n = keys.len();
    // strings are checked as UTF-8 in runs (between the bytes of scalar keys), and each
    // string's start must be a character boundary
    let mut run_start = 0usize;
    let total = base + bytes.len() as u64;
    if keys.first().is_some_and(|k| k.start() != base) {
        return None;
    }
    for i in 0..n {
        let kid = first + i;
        let k = keys[i];
        let end = keys.get(i + 1).map_or(total, |k| k.start());
        let (tag, start) = (k.tag(), k.start());
        if start < base
            || end < start
            || end > total
            || (kid < 2) != matches!(tag, K_UNDEFINED | K_NULL)
        {
            return None;
        }
        if kid < 2 && tag != [K_UNDEFINED, K_NULL][kid] {
            return None;
        }
        let (s, e) = ((start - base) as usize, (end - base) as usize);
        let d = &bytes[s..e];
        match tag {
            K_STR => {
                if d.first().is_some_and(|&b| b & 0xC0 == 0x80) {
                    return None;
                }
            }
            K_NUM => {
                let bits = u64::from_ne_bytes(d.try_into().ok()?);
                let v = f64::from_bits(bits);
                if v.is_nan() || (v == 0.0 && bits != 0) {
                    return None;
                }
            }
            K_BOOL => {
                if d.len() != 1 || d[0] > 1 {
                    return None;
                }
            }
            K_UNDEFINED | K_NULL | K_OBJECT => {
                if !d.is_empty() {
                    return None;
                }
            }
            _ => return None,
        }
        if matches!(tag, K_NUM | K_BOOL) {
            simdutf8::basic::from_utf8(&bytes[run_start..s]).ok()?;
            run_start = e;
        }
    }
    simdutf8::basic::from_utf8(&bytes[run_start..]).ok()?;
    Some(())
}

/// Records from their bytes (as [`recs_bytes`] gives them); None unless a whole number of
/// records. Any bytes make a record; [`Index::restore`] checks them.
pub fn recs_from_bytes(b: &[u8]) -> Option<Vec<Rec>> {
    let size = std::mem::size_of::<Rec>();
    if b.len() % size != 0 {
        return None;
    }
    let n = b.len() / size;
    let mut v: Vec<Rec> = Vec::with_capacity(n);
    // SAFETY: the allocation holds `n` records, `b` is exactly that many bytes, and any bit
    // pattern is a valid `Rec` (integers only).
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), v.as_mut_ptr() as *mut u8, b.len());
        v.set_len(n);
    }
    Some(v)
}

impl Index {
    /// Whether this index can be saved.
    ///
    /// A valid v3 header, no provisional (torn) last line, no legacy migration state (v1/v2 files
    /// are small and rare; they are always scanned).
    pub fn can_persist(&self) -> bool {
        self.provisional.is_none()
            && !self.legacy_v1
            && !self.legacy_v2
            && self.header.0 == HeaderState::Valid
            && self.last_v1_id == NONE
    }

    /// Everything but the records, for [`Index::restore`]. Call only when
    /// [`Index::can_persist`].
    pub fn persist_meta(&self, out: &mut Vec<u8>) {
        let mut o = Out(out);
        o.u64(fixed_names_stamp(&super::TYPE_NAMES, &super::ROLE_NAMES));
        // type and role names beyond the fixed ones
        for names in [&self.types, &self.roles] {
            let fixed = if std::ptr::eq(names, &self.types) {
                super::TYPE_NAMES.len()
            } else {
                super::ROLE_NAMES.len()
            };
            o.u64((names.len() - fixed) as u64);
            for n in &names[fixed..] {
                o.bytes(n.as_bytes());
            }
        }
        // labels (Map order by insertion sequence)
        o.u64(self.labels.len() as u64);
        o.u64(self.label_seq);
        let mut labels: Vec<(u64, u32, u32)> =
            self.labels.iter().map(|(&t, &(s, e))| (s, t, e)).collect();
        labels.sort_unstable();
        for (s, t, e) in labels {
            o.u64(s);
            o.u32(t);
            o.u32(e);
        }
        self.problems.persist(&mut o);
        // label and compaction targets, extra headers
        o.u64(self.targets.len() as u64);
        for &(e, k) in &self.targets {
            o.u32(e);
            o.u32(k);
        }
        o.u64(self.line_runs.len() as u64);
        for &(e, l) in &self.line_runs {
            o.u32(e);
            o.u32(l);
        }
        o.u64(self.extra_headers.len() as u64);
        for &n in &self.extra_headers {
            o.u32(n);
        }
        // the rest of the state
        o.u32(self.session_info);
        match self.leaf {
            Leaf::Null => {
                o.u8(0);
                o.u32(0);
            }
            Leaf::Key(k) => {
                o.u8(1);
                o.u32(k);
            }
        }
        let (hs, hl) = self.header_span.unwrap_or((0, 0));
        o.u8(self.header_span.is_some() as u8);
        o.u64(hs);
        o.u64(hl);
        put_jsval(&mut o, &self.header_version);
        o.u32(self.values);
        o.u32(self.lines);
        o.u64(self.scanned_to);
        o.u32(self.first_context_edit);
        o.u64(self.v1_seed);
        o.u32(self.dup_ids);
        // last, at fixed places from the end (see `meta_lookup`): the key lookup's seed and size
        o.u64(self.key_seed);
        o.u64(self.lookup_len() as u64);
    }

    /// The key records as their bytes (8 each, see `KeyRec`) and the key bytes.
    ///
    /// The two sections a saved index stores besides the meta, the records and the winners.
    pub fn key_sections(&self) -> (std::borrow::Cow<'_, [u8]>, std::borrow::Cow<'_, [u8]>) {
        self.kstore.sections()
    }

    /// For tests: the meta and the key sections in one buffer, for [`Index::restore`].
    #[cfg(test)]
    pub fn persist_all(&self) -> Vec<u8> {
        let mut meta = Vec::new();
        self.persist_meta(&mut meta);
        let (k, b) = self.key_sections();
        let mut out = Vec::new();
        let mut o = Out(&mut out);
        o.bytes(&meta);
        o.bytes(&k);
        o.bytes(&b);
        out
    }

    /// For tests: the index that [`Index::persist_all`] and the records describe. As a saved
    /// index's load restores it; None when anything is out of bounds or inconsistent.
    #[cfg(test)]
    pub fn restore(all: &[u8], recs: Vec<Rec>, covered: u64) -> Option<Index> {
        let mut r = In::new(all);
        let (meta, k, b) = (r.bytes()?, r.bytes()?, r.bytes()?);
        if !r.at_end() || k.len() % 8 != 0 {
            return None;
        }
        let keys: Vec<KeyRec> = k
            .chunks_exact(8)
            .map(|c| KeyRec(u64::from_ne_bytes(c.try_into().expect("8"))))
            .collect();
        check_keys(&keys, b, 0, 0)?;
        let keys = super::keystore::KeyStore::from_vecs(keys, b.to_vec());
        Index::restore_meta(meta, keys, recs.len(), covered)?.restore_records(recs)
    }

    /// The key seed and the key lookup's size that end a meta section; None when too short.
    ///
    /// As [`Index::persist_meta`] writes them.
    pub fn meta_lookup(meta: &[u8]) -> Option<(u64, u64)> {
        let n = meta.len().checked_sub(16)?;
        let v = |at: usize| u64::from_ne_bytes(meta[at..at + 8].try_into().expect("8 bytes"));
        Some((v(n), v(n + 8)))
    }

    /// The first half of restoring a saved index.
    ///
    /// Everything but the records. `keys` are the keys (checked in memory by the caller, or
    /// read on demand and checked per group as read), `nrecs` the number of records that will
    /// follow, `covered` the bytes of the file indexed. None when anything is out of bounds or
    /// inconsistent. [`Index::restore_records`] or [`Index::restore_paged`] completes it.
    pub fn restore_meta(
        meta: &[u8],
        keys: super::keystore::KeyStore,
        nrecs: usize,
        covered: u64,
    ) -> Option<Index> {
        let (seed, nlookup) = Index::meta_lookup(meta)?;
        let mut ix = Index::with_key_seed(seed);
        let mut r = In::new(&meta[..meta.len() - 16]);
        if r.u64()? != fixed_names_stamp(&super::TYPE_NAMES, &super::ROLE_NAMES) {
            return None; // saved by a build with other fixed names: its codes mean other types
        }
        // keys: tags and starts in order, each key's bytes of its kind (see `KeyRec`); the
        // vector is reused as it is (`KeyRec` is a transparent u64)
        let nkeys = keys.len();
        if nkeys < 2 || nkeys > u32::MAX as usize - 1 {
            return None;
        }
        // names
        for which in 0..2 {
            let n = r.count(8)?;
            for _ in 0..n {
                let name = r.str()?;
                let (names, codes) = if which == 0 {
                    (&mut ix.types, &mut ix.type_codes)
                } else {
                    (&mut ix.roles, &mut ix.role_codes)
                };
                if names.len() >= u16::MAX as usize || codes.contains_key(name) {
                    return None;
                }
                codes.insert(name.to_string(), names.len() as u16);
                names.push(name.to_string());
            }
        }
        if nrecs >= NONE as usize {
            return None;
        }
        // labels
        let nlabels = r.count(16)?;
        ix.label_seq = r.u64()?;
        for _ in 0..nlabels {
            let (s, t, e) = (r.u64()?, r.u32()?, r.u32()?);
            if t as usize >= nkeys || e as usize >= nrecs || s > ix.label_seq {
                return None;
            }
            if ix.labels.insert(t, (s, e)).is_some() {
                return None;
            }
        }
        ix.problems = super::Problems::restore(&mut r, covered)?;
        let ntargets = r.count(8)?;
        if ntargets > nrecs {
            return None;
        }
        let mut targets = Vec::with_capacity(ntargets);
        for _ in 0..ntargets {
            let (e, k) = (r.u32()?, r.u32()?);
            if e as usize >= nrecs
                || k as usize >= nkeys
                || targets.last().is_some_and(|&(p, _)| p >= e)
            {
                return None;
            }
            targets.push((e, k));
        }
        // line runs: the first at entry 0, entries in order, lines increasing through them
        let nruns = r.count(8)?;
        if nruns > nrecs || (nruns == 0) != (nrecs == 0) {
            return None;
        }
        let mut line_runs: Vec<(u32, u32)> = Vec::with_capacity(nruns);
        for _ in 0..nruns {
            let (e, l) = (r.u32()?, r.u32()?);
            let ok = match line_runs.last() {
                None => e == 0 && l > 0,
                Some(&(pe, pl)) => e > pe && l as u64 > pl as u64 + (e - pe - 1) as u64,
            };
            if !ok || e as usize >= nrecs {
                return None;
            }
            line_runs.push((e, l));
        }
        let nextra = r.count(4)?;
        let mut extra_headers = Vec::with_capacity(nextra);
        for _ in 0..nextra {
            let n = r.u32()?;
            if n as usize > nrecs || extra_headers.last().is_some_and(|&p| p > n) {
                return None;
            }
            extra_headers.push(n);
        }
        ix.session_info = r.u32()?;
        let leaf = match (r.u8()?, r.u32()?) {
            (0, _) => Leaf::Null,
            (1, k) if (k as usize) < nkeys => Leaf::Key(k),
            _ => return None,
        };
        let has_span = r.u8()?;
        let (hs, hl) = (r.u64()?, r.u64()?);
        if has_span != 1 || hs.checked_add(hl)? > covered {
            return None;
        }
        ix.header_version = get_jsval(&mut r)?;
        ix.values = r.u32()?;
        ix.lines = r.u32()?;
        ix.scanned_to = r.u64()?;
        ix.first_context_edit = r.u32()?;
        ix.v1_seed = r.u64()?;
        ix.dup_ids = r.u32()?;
        let last_line = line_runs
            .last()
            .map_or(0, |&(e, l)| l as u64 + (nrecs as u64 - 1 - e as u64));
        if !r.at_end()
            || last_line > ix.lines as u64
            || ix.scanned_to != covered
            || ix.values as u64 != 1 + nrecs as u64 + nextra as u64
        {
            return None;
        }
        if ix.session_info != NONE && ix.session_info as usize >= nrecs {
            return None;
        }
        if ix.first_context_edit != NONE && ix.first_context_edit as usize >= nrecs {
            return None;
        }
        if ix.dup_ids as usize > nrecs || nlookup > nkeys as u64 {
            return None;
        }
        ix.kstore = keys;
        ix.targets = targets;
        ix.extra_headers = extra_headers;
        ix.line_runs = line_runs;
        ix.leaf = leaf;
        ix.header = HeaderStateBox(HeaderState::Valid);
        ix.header_span = Some((hs, hl));
        // the key table (hashed with the saved seed) is rebuilt on first use: all keys without a
        // saved key lookup, else only those interned after the restore (see `restore_paged`)
        ix.keys = std::sync::OnceLock::new();
        ix.pending_recs = nrecs as u32;
        Some(ix)
    }

    /// The bounds every record of this index restored by [`Index::restore_meta`] must keep.
    pub fn rec_bounds(&self) -> Option<RecBounds> {
        let (hs, hl) = self.header_span?;
        let (ntypes, nroles) = (self.types.len(), self.roles.len());
        Some(RecBounds {
            header_end: hs + hl,
            covered: self.scanned_to,
            nkeys: self.kstore.len(),
            ntypes,
            nroles,
            // the "other" codes are given only once a names table is full (see `codes`)
            types_full: ntypes == u16::MAX as usize,
            roles_full: nroles == u16::MAX as usize,
            targets: self.targets.iter().map(|&(e, _)| e).collect(),
        })
    }

    /// The second half of restoring a saved index whose records and by-id map stay in the file. The
    /// records and `winners` are read and checked block by block as queries need them (see `recs`).
    /// The duplicate count is the meta's. None when `recs` is not the number of records announced
    /// or `winners` not one per key.
    ///
    /// `lookup` is the saved key lookup (`lookup.rs`) of every saved key, which must be for this
    /// many keys; it must hold [`Index::meta_lookup`]'s number of entries (checked by the caller,
    /// which sized it from the meta).
    pub fn restore_paged(
        mut self,
        recs: super::PagedRecs,
        winners: super::Paged<u32>,
        lookup: super::SavedLookup,
    ) -> Option<Index> {
        let recs = super::Recs::paged(recs);
        if recs.len() != self.pending_recs as usize
            || !self.recs.is_empty()
            || winners.len() != self.kstore.len()
            || lookup.nkeys as usize != self.kstore.len()
        {
            return None;
        }
        self.recs = recs;
        self.pending_recs = 0;
        self.by_id = std::sync::OnceLock::new();
        self.saved_winners = Some(Box::new(winners));
        self.saved_lookup = Some(Box::new(lookup));
        // the key table holds only the keys interned from now on
        self.keys = std::sync::OnceLock::new();
        Some(self)
    }

    /// The second half of restoring a saved index ([`Index::restore_meta`]).
    ///
    /// The records, checked (in file order, inside the covered bytes, with known keys and codes)
    /// and the by-id map built from them. None when they are not the records announced or anything
    /// is out of bounds.
    pub fn restore_records(mut self, recs: Vec<Rec>) -> Option<Index> {
        let ix = &mut self;
        if recs.len() != ix.pending_recs as usize || !ix.recs.is_empty() {
            return None;
        }
        let bounds = ix.rec_bounds()?;
        if !bounds.ok(0, &recs) {
            return None;
        }
        let mut by_id = vec![NONE; ix.kstore.len()];
        let mut dup = 0u32;
        for (i, rec) in recs.iter().enumerate() {
            let slot = &mut by_id[rec.id as usize];
            if *slot != NONE {
                dup += 1;
            }
            *slot = i as u32;
        }
        if dup != ix.dup_ids {
            return None;
        }
        ix.by_id = std::sync::OnceLock::from(by_id);
        ix.dup_ids = dup;
        ix.pending_recs = 0;
        ix.recs = super::Recs::from_vec(recs);
        Some(self)
    }
}

/// The bounds of a restored index's records (see [`Index::rec_bounds`]).
pub struct RecBounds {
    header_end: u64,
    covered: u64,
    nkeys: usize,
    ntypes: usize,
    nroles: usize,
    types_full: bool,
    roles_full: bool,
    /// the entries with a target (labels and compactions), in order
    targets: Vec<u32>,
}

impl RecBounds {
    /// Whether `recs`, the records of entries `first..`, keep the bounds. In file order after the
    /// header and inside the covered bytes, with known keys and codes, a target exactly for labels
    /// and compactions, well formed.
    pub fn ok(&self, first: usize, recs: &[Rec]) -> bool {
        let mut prev_end = self.header_end;
        let mut next_target = self.targets
            [self.targets.partition_point(|&e| (e as usize) < first)..]
            .iter()
            .copied()
            .peekable();
        for (k, rec) in recs.iter().enumerate() {
            let i = first + k;
            let offset = rec.offset();
            let end = offset + rec.len as u64;
            let has_target = next_target.next_if_eq(&(i as u32)).is_some();
            if offset < prev_end
                || end > self.covered
                || rec.id as usize >= self.nkeys
                || rec.parent as usize >= self.nkeys
                || (rec.etype as usize >= self.ntypes
                    && !(rec.etype == super::T_OTHER && self.types_full))
                || (rec.role as usize >= self.nroles
                    && !(rec.role == super::R_OTHER
                        && self.roles_full
                        && rec.etype == super::T_MESSAGE))
                || has_target != matches!(rec.etype, super::T_LABEL | super::T_COMPACTION)
                || !rec.well_formed()
            {
                return false;
            }
            prev_end = end;
        }
        true
    }
}
