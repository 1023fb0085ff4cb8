//! The records of an index, behind one accessor.
//!
//! Every reader indexes them by entry position (`recs[i]`, `recs.get(i)`, `recs.iter()`), so
//! where they live is this file's business alone: records scanned in this process are in
//! memory; a saved index's records stay in the saved file until a query reads them
//! ([`PagedRecs`]): read a block of [`REC_BLOCK`] records at a time with `pread` (never a
//! mapping: a cache file truncated by another process must not raise SIGBUS), each block
//! checked against its own checksum and bounds when it is read, then kept.
//!
//! A block that fails its check (damaged, cut short, forged) is never used: the first one
//! triggers a cold scan of the session file's indexed bytes, and when that scan gives the same
//! keys and meta as the saved index (so the same key ids), every damaged block is served from
//! its records: the answers are the cold open's. When it does not (the session file itself
//! changed), the block reads as harmless placeholder records and [`Recs::unrecoverable`]
//! tells the store, which then refuses to answer (see `Store::check_live`).

use super::Rec;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

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

/// A section of a saved index read on demand (see the module docs).
pub struct Paged<T: Plain> {
    file: std::sync::Arc<File>,
    /// where the items start in `file`
    at: u64,
    n: usize,
    checks: BlockChecks<T>,
    blocks: Vec<OnceLock<Box<[T]>>>,
    cold: OnceLock<Option<Vec<T>>>,
    /// why the first damaged block was refused
    damaged: OnceLock<String>,
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
        if checks.sums.len() != n.div_ceil(REC_BLOCK) {
            return None;
        }
        let blocks = (0..checks.sums.len()).map(|_| OnceLock::new()).collect();
        Some(Paged {
            file,
            at,
            n,
            checks,
            blocks,
            cold: OnceLock::new(),
            damaged: OnceLock::new(),
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
    pub fn get(&self, i: usize) -> &T {
        let b = i / REC_BLOCK;
        let block = self.blocks[b].get_or_init(|| self.load(b));
        &block[i % REC_BLOCK]
    }

    /// Block `b`, read and checked; else from the cold scan; else placeholders.
    #[cold]
    fn load(&self, b: usize) -> Box<[T]> {
        let first = b * REC_BLOCK;
        let k = REC_BLOCK.min(self.n - first);
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

    /// Blocks read so far, of how many.
    pub fn blocks_read(&self) -> (usize, usize) {
        (
            self.blocks.iter().filter(|b| b.get().is_some()).count(),
            self.blocks.len(),
        )
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
    pub fn get(&self, i: usize) -> Option<&Rec> {
        match &self.paged {
            Some(p) if i < p.n => Some(p.get(i)),
            Some(p) => self.tail.get(i - p.n),
            None => self.tail.get(i),
        }
    }
    /// The last record.
    #[inline]
    pub fn last(&self) -> Option<&Rec> {
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
    /// The records in entry order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Rec> + ExactSizeIterator + '_ {
        (0..self.len()).map(move |i| &self[i])
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
            match f(&self[mid]).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }
    /// A copy of every record (tests, and a save of the whole index).
    pub fn to_vec(&self) -> Vec<Rec> {
        self.iter().copied().collect()
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

impl std::ops::Index<usize> for Recs {
    type Output = Rec;
    #[inline]
    fn index(&self, i: usize) -> &Rec {
        match self.get(i) {
            Some(r) => r,
            None => panic!("entry {i} out of range ({} entries)", self.len()),
        }
    }
}

impl<'a> IntoIterator for &'a Recs {
    type Item = &'a Rec;
    type IntoIter = Box<dyn DoubleEndedIterator<Item = &'a Rec> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl std::fmt::Debug for Recs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
