//! A saved index's key lookup: the key id of a string, number or boolean, read on demand.
//!
//! Without it a warm open that scans appended lines (or looks up any id) would first build the
//! key table from every saved key, which grows with the file. The saved lookup is the key table's
//! content sorted: one 8-byte entry per string, number and boolean key, `hash >> 32 << 32 | key
//! id`, in ascending order (hashed with the index's own seed, which the saved index keeps), stored
//! in blocks of [`REC_BLOCK`] entries read with `pread` as a query needs them ([`Paged`]: each
//! block checked against its checksum and its bounds when read, then kept). A table read at load
//! holds each block's first hash tag (its fence), so a lookup reads the one block (rarely two)
//! whose range holds the tag, then compares the key bytes of the entries whose tag matches.
//!
//! Keys interned after the load are not in it: the index keeps them in its in-memory key table
//! (see `keys.rs`), and a lookup asks that table first.

use super::recs::{Paged, REC_BLOCK};

/// A saved index's key lookup (see the module docs).
pub struct SavedLookup {
    /// the entries, ascending
    pub(super) entries: Paged<u64>,
    /// per block, the tag (hash >> 32) of its first entry, ascending
    fences: Vec<u32>,
    /// keys with an id below this are the saved ones it covers
    pub(super) nkeys: u32,
}

impl SavedLookup {
    /// The lookup of a saved index with `nkeys` keys; None when `fences` do not fit `entries`.
    ///
    /// `entries` and per block the first entry's tag (`fences`, which must be one per block and
    /// ascending).
    pub fn new(entries: Paged<u64>, fences: Vec<u32>, nkeys: u32) -> Option<Self> {
        if fences.len() != entries.len().div_ceil(REC_BLOCK) || !fences.is_sorted() {
            return None;
        }
        Some(SavedLookup {
            entries,
            fences,
            nkeys,
        })
    }

    /// The key id whose entry has the tag of hash `h` and for which `eq` holds, if any.
    ///
    /// Reads the blocks whose fences admit the tag (one, or two when the tag's entries straddle a
    /// boundary); `eq` compares a candidate's key (it sees only key ids below `nkeys`).
    pub fn find(&self, h: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        let n = self.entries.len();
        if n == 0 {
            return None;
        }
        let tag = (h >> 32) as u32;
        // blocks whose first tag is below `tag`: the entries of `tag` start in the last of them
        // or in the next one; they end before the first block whose first tag is above it
        let p = self.fences.partition_point(|&f| f < tag);
        let q = self.fences.partition_point(|&f| f <= tag);
        let lo = p.saturating_sub(1) * REC_BLOCK;
        let hi = (q * REC_BLOCK).min(n);
        let want = (tag as u64) << 32;
        let (mut a, mut b) = (lo, hi);
        while a < b {
            let mid = a + (b - a) / 2;
            if self.entries.get(mid) < want {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        for i in a..hi {
            let e = self.entries.get(i);
            if (e >> 32) as u32 != tag {
                break;
            }
            let kid = e as u32;
            if kid < self.nkeys && eq(kid) {
                return Some(kid);
            }
        }
        None
    }

    /// Entries in the lookup.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the lookup has no entries (a session whose ids are all objects or missing).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry, ascending (every block read).
    pub fn to_vec(&self) -> Vec<u64> {
        (0..self.entries.len())
            .map(|i| self.entries.get(i))
            .collect()
    }
}

/// Whether a block of a saved lookup keeps its bounds.
///
/// The block's entries are `items`, from entry `first`; the lookup has `nkeys` keys and these
/// `fences`. Ascending, the first tag the block's fence, none past the next fence, each a key id
/// below `nkeys`.
pub fn lookup_block_ok(fences: &[u32], nkeys: u32, first: usize, items: &[u64]) -> bool {
    let b = first / REC_BLOCK;
    let Some(&fence) = fences.get(b) else {
        return false;
    };
    let next = fences.get(b + 1).copied().unwrap_or(u32::MAX);
    items.first().is_some_and(|&e| (e >> 32) as u32 == fence)
        && items.is_sorted()
        && items
            .iter()
            .all(|&e| (e as u32) < nkeys && (e >> 32) as u32 <= next)
}

/// The fences of ascending `entries`: per block of [`REC_BLOCK`], its first entry's tag.
#[cfg(test)]
pub fn fences_of(entries: &[u64]) -> Vec<u32> {
    entries
        .chunks(REC_BLOCK)
        .map(|c| (c[0] >> 32) as u32)
        .collect()
}

/// `entries` sorted ascending. A counting pass over the top 16 bits, then each of the (small)
/// buckets sorted: linear in practice, as the tags are hashes.
pub fn sort_entries(entries: Vec<u64>) -> Vec<u64> {
    const BITS: u32 = 16;
    if entries.len() < 1 << 12 {
        let mut v = entries;
        v.sort_unstable();
        return v;
    }
    let mut count = vec![0u32; (1 << BITS) + 1];
    for &e in &entries {
        count[(e >> (64 - BITS)) as usize + 1] += 1;
    }
    for i in 1..count.len() {
        count[i] += count[i - 1];
    }
    let starts = count.clone();
    let mut out = vec![0u64; entries.len()];
    for &e in &entries {
        let c = &mut count[(e >> (64 - BITS)) as usize];
        out[*c as usize] = e;
        *c += 1;
    }
    for w in starts.windows(2) {
        out[w[0] as usize..w[1] as usize].sort_unstable();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_entries_sorts_small_and_large_inputs() {
        for n in [0usize, 1, 5, 4095, 4096, 70_000] {
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let v: Vec<u64> = (0..n)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // repeated tags too (every 7th entry shares the previous tag)
                    if i % 7 == 0 {
                        x & !0xffff_ffff | i as u64
                    } else {
                        x
                    }
                })
                .collect();
            let mut want = v.clone();
            want.sort_unstable();
            assert_eq!(sort_entries(v), want, "n = {n}");
        }
    }

    #[test]
    fn block_ok_refuses_unsorted_wrong_fence_and_unknown_keys() {
        let e: Vec<u64> = (0..10u64).map(|i| (i * 100) << 32 | i).collect();
        let f = fences_of(&e);
        assert!(lookup_block_ok(&f, 10, 0, &e));
        assert!(!lookup_block_ok(&f, 9, 0, &e), "key id 9 of 9 keys");
        let mut s = e.clone();
        s.swap(2, 3);
        assert!(!lookup_block_ok(&f, 10, 0, &s), "unsorted");
        assert!(
            !lookup_block_ok(&[1], 10, 0, &e),
            "first tag is not the fence"
        );
        assert!(!lookup_block_ok(&f, 10, REC_BLOCK, &e), "no such block");
    }
}
