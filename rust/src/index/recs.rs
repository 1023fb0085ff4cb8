//! The records of an index, behind one accessor.
//!
//! Every reader asks for them by entry position (`recs.at(i)`, `recs.get(i)`, `recs.iter()`), by
//! value, so where they live is this file's business alone: records scanned in this process are
//! in memory; a saved index's records stay in the saved file until a query reads them
//! ([`PagedRecs`]): read a block of [`REC_BLOCK`] records at a time with `pread` (never a
//! mapping: a cache file truncated by another process must not raise SIGBUS), each block
//! checked against its own checksum and bounds when it is read, then kept in the process's
//! [`BlockCache`] while the blocks kept fit its byte budget (CLOCK: a block used since the hand
//! last passed it gets a second chance; else it is dropped, and read and checked again if asked
//! for again). The same holds for every section of [`Paged`] items (the saved by-id map's
//! winners, the key lookup).
//!
//! A block that fails its check (damaged, cut short, forged) is never used: the first one
//! triggers a cold scan of the session file's indexed bytes, and when that scan gives the same
//! keys and meta as the saved index (so the same key ids), every damaged block is served from
//! its records: the answers are the cold open's. When it does not (the session file itself
//! changed), the block reads as harmless placeholder records and [`Recs::unrecoverable`]
//! tells the store, which then refuses to answer (see `Store::check_live`).

use super::Rec;
use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Items per block of a saved index's paged sections (records, winners). One checksum, one `pread`
/// (28 KiB of records).
pub const REC_BLOCK: usize = 1024;

/// Fixed-size items that any bit pattern makes (read straight from a saved file's bytes).
///
/// # Safety
/// The type must be `repr(C)` or a primitive, with no padding, valid for every bit pattern.
pub unsafe trait Plain: Copy + Send + Sync + 'static {}
// SAFETY: `Rec` is `repr(C)` of integers with no padding (see its docs).
unsafe impl Plain for Rec {}
// SAFETY: a primitive integer.
unsafe impl Plain for u32 {}
// SAFETY: a primitive integer.
unsafe impl Plain for u64 {}

/// Items from their bytes; None unless a whole number of them.
fn items_from_bytes<T: Plain>(b: &[u8]) -> Option<Vec<T>> {
    let size = std::mem::size_of::<T>();
    if b.len() % size != 0 {
        return None;
    }
    let n = b.len() / size;
    let mut v: Vec<T> = Vec::with_capacity(n);
    // SAFETY: the allocation holds `n` items, `b` is exactly that many items' bytes, and any
    // bit pattern is a valid `T` (`Plain`).
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), v.as_mut_ptr() as *mut u8, b.len());
        v.set_len(n);
    }
    Some(v)
}

/// Whether items (the position of the first, the items) keep their bounds.
pub type ItemsOk<T> = Box<dyn Fn(usize, &[T]) -> bool + Send + Sync>;

/// How a block is checked: its checksum and its items' bounds. The checksum covers the block number
/// and bytes; the bounds are the position of the first item, and the items.
pub struct BlockChecks<T> {
    pub sum: fn(u64, &[u8]) -> u64,
    pub sums: Vec<u64>,
    pub items_ok: ItemsOk<T>,
    /// the cold scan's items, when they can stand in for the saved ones (see the module docs)
    pub rescan: Box<dyn Fn() -> Option<Vec<T>> + Send + Sync>,
    /// the item a block that can be neither read nor rescanned reads as
    pub placeholder: T,
}

/// The default byte budget of the [`BlockCache`] (128 MiB).
///
/// For the whole process, every open session's saved blocks together (a 1 GiB session's
/// records, winners and lookup are ~35 MiB).
pub const DEFAULT_BLOCK_CACHE_BYTES: usize = 128 << 20;

/// The blocks of saved indexes a process keeps in memory, under one byte budget.
///
/// One per process ([`block_cache`]): every [`Paged`] section of every open session puts the
/// blocks it reads here, and past the budget the CLOCK hand drops blocks not used since it last
/// passed them (the block just read is never dropped by its own read). A block dropped is read
/// and checked again when next asked for. Bytes held: at most the budget plus one block per
/// thread reading at that moment.
pub struct BlockCache {
    budget: AtomicUsize,
    held: AtomicUsize,
    /// every block held, in the order the hand passes them
    ring: Mutex<VecDeque<(Weak<dyn Evict>, u32)>>,
}

/// A section's side of the cache: second chances and drops.
trait Evict: Send + Sync {
    /// Whether block `b` was used since the last call (and clears that).
    fn used(&self, b: u32) -> bool;
    /// Drops block `b`; the bytes it held.
    fn drop_block(&self, b: u32) -> usize;
}

impl BlockCache {
    const fn new() -> Self {
        BlockCache {
            budget: AtomicUsize::new(DEFAULT_BLOCK_CACHE_BYTES),
            held: AtomicUsize::new(0),
            ring: Mutex::new(VecDeque::new()),
        }
    }
    /// The byte budget.
    pub fn budget(&self) -> usize {
        self.budget.load(Ordering::Relaxed)
    }
    /// Sets the byte budget; the blocks past a lower one are dropped now.
    pub fn set_budget(&self, bytes: usize) {
        self.budget.store(bytes, Ordering::Relaxed);
        if self.held() > bytes {
            let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
            self.shrink(&mut ring);
        }
    }
    /// Bytes of blocks held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
    /// Block `b` of `section` (`bytes` long) is now held: drops others past the budget.
    fn admit(&self, section: Weak<dyn Evict>, b: u32, bytes: usize) {
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        let held = self.held.fetch_add(bytes, Ordering::Relaxed) + bytes;
        ring.push_back((section, b));
        if ring.len() >= 1024 && ring.len().is_power_of_two() {
            // (entries of sections closed since: amortised, the ring stays proportional to what
            // is held)
            ring.retain(|(s, _)| s.strong_count() > 0);
        }
        if held <= self.budget() {
            return;
        }
        self.shrink(&mut ring);
    }
    /// Moves the hand until the blocks held fit the budget, at most two turns (the first clears
    /// the second chances); the ring's last block (the one just read) stays.
    fn shrink(&self, ring: &mut VecDeque<(Weak<dyn Evict>, u32)>) {
        let mut turns = 2 * ring.len();
        while self.held() > self.budget() && turns > 0 && ring.len() > 1 {
            turns -= 1;
            let Some((s, k)) = ring.pop_front() else {
                break;
            };
            let Some(sec) = s.upgrade() else {
                // (its section is gone: its bytes were given back then)
                continue;
            };
            if sec.used(k) {
                ring.push_back((s, k));
            } else {
                let freed = sec.drop_block(k);
                self.held.fetch_sub(freed, Ordering::Relaxed);
            }
        }
    }
    /// Gives back the bytes of a section closed (its ring entries go as the ring is pruned).
    fn release(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::Relaxed);
    }
}

static BLOCK_CACHE: BlockCache = BlockCache::new();

/// The process's [`BlockCache`].
pub fn block_cache() -> &'static BlockCache {
    &BLOCK_CACHE
}

/// The blocks of one section: each held or not, and whether used since the hand passed.
struct Slots<T> {
    blocks: Vec<Mutex<Option<Arc<[T]>>>>,
    used: Vec<AtomicBool>,
    /// blocks read at least once (tests and `blocks_read`)
    seen: Vec<AtomicBool>,
}

impl<T: Plain> Evict for Slots<T> {
    fn used(&self, b: u32) -> bool {
        self.used[b as usize].swap(false, Ordering::Relaxed)
    }
    fn drop_block(&self, b: u32) -> usize {
        let mut g = self.blocks[b as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        g.take().map_or(0, |bl| std::mem::size_of_val(&bl[..]))
    }
}

impl<T> Drop for Slots<T> {
    fn drop(&mut self) {
        let held: usize = self
            .blocks
            .iter_mut()
            .filter_map(|m| {
                m.get_mut()
                    .ok()?
                    .as_ref()
                    .map(|b| std::mem::size_of_val(&b[..]))
            })
            .sum();
        BLOCK_CACHE.release(held);
    }
}

/// A section of a saved index read on demand (see the module docs).
pub struct Paged<T: Plain> {
    file: std::sync::Arc<File>,
    /// where the items start in `file`
    at: u64,
    n: usize,
    checks: BlockChecks<T>,
    slots: Arc<Slots<T>>,
    cold: OnceLock<Option<Vec<T>>>,
    /// why the first damaged block was refused
    damaged: OnceLock<String>,
    /// blocks read from the file (a block dropped and read again counts again)
    reads: AtomicUsize,
}

/// The records of a saved index, read on demand.
pub type PagedRecs = Paged<Rec>;

impl<T: Plain> Paged<T> {
    /// `n` items at byte `at` of `file`, in blocks of [`REC_BLOCK`]. One checksum each in
    /// `checks.sums`, which must hold exactly one per block.
    pub fn new(
        file: std::sync::Arc<File>,
        at: u64,
        n: usize,
        checks: BlockChecks<T>,
    ) -> Option<Self> {
        let nb = n.div_ceil(REC_BLOCK);
        if checks.sums.len() != nb {
            return None;
        }
        let slots = Arc::new(Slots {
            blocks: (0..nb).map(|_| Mutex::new(None)).collect(),
            used: (0..nb).map(|_| AtomicBool::new(false)).collect(),
            seen: (0..nb).map(|_| AtomicBool::new(false)).collect(),
        });
        Some(Paged {
            file,
            at,
            n,
            checks,
            slots,
            cold: OnceLock::new(),
            damaged: OnceLock::new(),
            reads: AtomicUsize::new(0),
        })
    }

    /// How many items.
    pub fn len(&self) -> usize {
        self.n
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Item `i` (< `len`).
    #[inline]
    pub fn get(&self, i: usize) -> T {
        self.block(i / REC_BLOCK)[i % REC_BLOCK]
    }

    /// Block `b`: held, else read (and held while the budget allows).
    #[inline]
    fn block(&self, b: usize) -> Arc<[T]> {
        {
            let g = self.slots.blocks[b]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(bl) = &*g {
                let u = &self.slots.used[b];
                if !u.load(Ordering::Relaxed) {
                    u.store(true, Ordering::Relaxed);
                }
                return bl.clone();
            }
        }
        self.fetch(b)
    }

    #[cold]
    fn fetch(&self, b: usize) -> Arc<[T]> {
        let bl: Arc<[T]> = self.load(b).into();
        let bytes = std::mem::size_of_val(&bl[..]);
        {
            let mut g = self.slots.blocks[b]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(other) = &*g {
                // (another thread read it meanwhile)
                return other.clone();
            }
            *g = Some(bl.clone());
        }
        self.slots.seen[b].store(true, Ordering::Relaxed);
        self.slots.used[b].store(true, Ordering::Relaxed);
        let weak: Weak<Slots<T>> = Arc::downgrade(&self.slots);
        BLOCK_CACHE.admit(weak, b as u32, bytes);
        bl
    }

    /// Block `b`, read and checked; else from the cold scan; else placeholders.
    #[cold]
    fn load(&self, b: usize) -> Box<[T]> {
        let first = b * REC_BLOCK;
        let k = REC_BLOCK.min(self.n - first);
        self.reads.fetch_add(1, Ordering::Relaxed);
        match self.read(b, first, k) {
            Ok(v) => v.into_boxed_slice(),
            Err(why) => {
                let _ = self
                    .damaged
                    .set(format!("saved index damaged (block {b}: {why})"));
                match self.cold.get_or_init(|| (self.checks.rescan)()) {
                    Some(c) if c.len() == self.n => c[first..first + k].into(),
                    _ => vec![self.checks.placeholder; k].into_boxed_slice(),
                }
            }
        }
    }

    fn read(&self, b: usize, first: usize, k: usize) -> Result<Vec<T>, String> {
        let size = std::mem::size_of::<T>();
        let mut buf = vec![0u8; k * size];
        self.file
            .read_exact_at(&mut buf, self.at + (first * size) as u64)
            .map_err(|e| e.to_string())?;
        if (self.checks.sum)(b as u64, &buf) != self.checks.sums[b] {
            return Err("checksum".into());
        }
        let items = items_from_bytes(&buf).ok_or("length")?;
        if !(self.checks.items_ok)(first, &items) {
            return Err("out of bounds".into());
        }
        Ok(items)
    }

    /// Why a block was refused (the first), if one was.
    pub fn damaged(&self) -> Option<&str> {
        self.damaged.get().map(String::as_str)
    }

    /// Whether a refused block could not be served from a cold scan either.
    pub fn unrecoverable(&self) -> bool {
        matches!(self.cold.get(), Some(c) if c.as_ref().is_none_or(|c| c.len() != self.n))
    }

    /// Blocks read so far (each counted once, whether still held or dropped since), of how many.
    pub fn blocks_read(&self) -> (usize, usize) {
        let seen = &self.slots.seen;
        (
            seen.iter().filter(|b| b.load(Ordering::Relaxed)).count(),
            seen.len(),
        )
    }

    /// Reads of blocks from the file so far (a block dropped and read again counts again).
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::Relaxed)
    }

    /// Blocks held now.
    pub fn blocks_held(&self) -> usize {
        self.slots
            .blocks
            .iter()
            .filter(|m| m.lock().is_ok_and(|g| g.is_some()))
            .count()
    }
}

/// The records of an index, in entry (file) order.
#[derive(Default)]
pub struct Recs {
    /// the first records, read on demand from a saved index
    paged: Option<Box<PagedRecs>>,
    /// the rest (all of them when nothing was restored)
    tail: Vec<Rec>,
}

impl Recs {
    /// Records held in memory.
    pub fn from_vec(v: Vec<Rec>) -> Self {
        Recs {
            paged: None,
            tail: v,
        }
    }
    /// Records read on demand.
    pub fn paged(p: PagedRecs) -> Self {
        Recs {
            paged: Some(Box::new(p)),
            tail: Vec::new(),
        }
    }
    #[inline]
    fn base(&self) -> usize {
        self.paged.as_ref().map_or(0, |p| p.n)
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.base() + self.tail.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Entry `i`'s record, None past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Rec> {
        match &self.paged {
            Some(p) if i < p.n => Some(p.get(i)),
            Some(p) => self.tail.get(i - p.n).copied(),
            None => self.tail.get(i).copied(),
        }
    }
    /// Entry `i`'s record.
    ///
    /// # Panics
    /// When `i` >= `len` (a caller's bug, as indexing a slice past its end).
    #[inline]
    pub fn at(&self, i: usize) -> Rec {
        match self.get(i) {
            Some(r) => r,
            None => panic!("entry {i} out of range ({} entries)", self.len()),
        }
    }
    /// The last record.
    #[inline]
    pub fn last(&self) -> Option<Rec> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }
    pub fn push(&mut self, r: Rec) {
        self.tail.push(r);
    }
    /// Keeps the first `n` records.
    pub fn truncate(&mut self, n: usize) {
        if n < self.base() {
            // (never done by the index: rollbacks stay after the restored records)
            let mut all = self.to_vec();
            all.truncate(n);
            *self = Recs::from_vec(all);
        } else {
            let base = self.base();
            self.tail.truncate(n - base);
        }
    }
    /// The records in entry order. A saved block is fetched once per [`REC_BLOCK`] records.
    pub fn iter(&self) -> RecIter<'_> {
        RecIter {
            recs: self,
            front: 0,
            back: self.len(),
            block: None,
        }
    }
    /// Binary search over records sorted by `f`, as `slice::binary_search_by_key`. It reads O(log
    /// n) blocks of a saved index, never all of them.
    pub fn binary_search_by_key<K: Ord>(
        &self,
        key: &K,
        f: impl Fn(&Rec) -> K,
    ) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match f(&self.at(mid)).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }
    /// A copy of every record (tests, and a save of the whole index).
    pub fn to_vec(&self) -> Vec<Rec> {
        self.iter().collect()
    }
    /// Every record, when all are in memory (none read on demand).
    pub fn in_memory(&self) -> Option<&[Rec]> {
        self.paged.is_none().then_some(&self.tail[..])
    }
    /// The records held in memory, to reserve room in (see `Index::reserve`).
    pub(super) fn tail_mut(&mut self) -> &mut Vec<Rec> {
        &mut self.tail
    }
    /// Why a block of the saved records was refused (the first), if one was.
    pub fn damaged(&self) -> Option<&str> {
        self.paged.as_ref()?.damaged()
    }
    /// Whether a refused block could not be served from a cold scan either. Its records are then
    /// placeholders: no answer may be given from this index.
    pub fn unrecoverable(&self) -> bool {
        self.paged.as_ref().is_some_and(|p| p.unrecoverable())
    }
    /// How many blocks of records were read from the saved index so far (of how many).
    pub fn blocks_read(&self) -> (usize, usize) {
        self.paged.as_ref().map_or((0, 0), |p| p.blocks_read())
    }
    /// How many records come from the saved index.
    pub fn saved_len(&self) -> usize {
        self.base()
    }
}

/// The records in entry order, by value (see [`Recs::iter`]).
pub struct RecIter<'a> {
    recs: &'a Recs,
    front: usize,
    back: usize,
    /// the saved block last fetched going forward: (its number, its records)
    block: Option<(usize, Arc<[Rec]>)>,
}

impl Iterator for RecIter<'_> {
    type Item = Rec;
    #[inline]
    fn next(&mut self) -> Option<Rec> {
        if self.front >= self.back {
            return None;
        }
        let i = self.front;
        self.front += 1;
        match &self.recs.paged {
            Some(p) if i < p.n => {
                let b = i / REC_BLOCK;
                match &self.block {
                    Some((k, bl)) if *k == b => Some(bl[i % REC_BLOCK]),
                    _ => {
                        let bl = p.block(b);
                        let r = bl[i % REC_BLOCK];
                        self.block = Some((b, bl));
                        Some(r)
                    }
                }
            }
            _ => self.recs.get(i),
        }
    }
    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for RecIter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Rec> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        self.recs.get(self.back)
    }
}

impl ExactSizeIterator for RecIter<'_> {}

impl<'a> IntoIterator for &'a Recs {
    type Item = Rec;
    type IntoIter = RecIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl std::fmt::Debug for Recs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
