//! Walking the tree: branches (root first), children in Pi's
//! order, roots, pre-order and unreachable entries. Nothing recurses; every walk is bounded,
//! and a `parentId` cycle is reported instead of looping (Pi loops until the heap is gone).

use crate::index::{Index, Leaf, KID_NULL, NONE};

/// A `parentId` cycle met while walking: the entry indices on the cycle, in walk order.
#[derive(Debug, Clone, PartialEq)]
pub struct Cycle(pub Vec<u32>);

impl Index {
    /// Pi `getBranch`'s parent step: `current.parentId ? byId.get(current.parentId) : undefined`.
    #[inline]
    pub fn walk_parent(&self, i: u32) -> u32 {
        let p = self.recs[i as usize].parent;
        if self.key_is_truthy(p) {
            self.winner(p)
        } else {
            NONE
        }
    }

    /// The entry the leaf points at, if any (Pi: `byId.get(leafId)` when `leafId` is truthy).
    pub fn leaf_entry(&self) -> Option<u32> {
        match self.leaf {
            Leaf::Null => None,
            Leaf::Key(k) if self.key_is_truthy(k) => Some(self.winner(k)).filter(|&w| w != NONE),
            Leaf::Key(_) => None,
        }
    }

    /// Brent's cycle detection from `start` along `walk_parent`: O(path) time, O(1) memory.
    fn find_cycle(&self, start: u32) -> Option<Cycle> {
        let (mut power, mut lam) = (1u64, 1u64);
        let mut tortoise = start;
        let mut hare = self.walk_parent(start);
        while hare != NONE && tortoise != hare {
            if power == lam {
                tortoise = hare;
                power *= 2;
                lam = 0;
            }
            hare = self.walk_parent(hare);
            lam += 1;
        }
        if hare == NONE {
            return None;
        }
        // hare is on the cycle: list it
        let mut ids = vec![hare];
        let mut c = self.walk_parent(hare);
        while c != hare {
            ids.push(c);
            c = self.walk_parent(c);
        }
        Some(Cycle(ids))
    }

    /// Entries from the root down to `from` (Pi `getBranch(fromId)`), or the cycle met.
    pub fn branch(&self, from: u32) -> Result<Vec<u32>, Cycle> {
        let mut path = Vec::new();
        let mut c = from;
        let limit = self.recs.len();
        while c != NONE {
            path.push(c);
            if path.len() > limit {
                return Err(self.find_cycle(from).unwrap_or(Cycle(vec![])));
            }
            c = self.walk_parent(c);
        }
        path.reverse();
        Ok(path)
    }

    /// Entries no root reaches, given the tree's pre-order (`Tree::preorder`): the first
    /// occurrence of each such node, in file order. These hang off `parentId` cycles.
    pub fn unreachable(&self, preorder: &[u32]) -> Vec<u32> {
        let n = self.recs.len();
        let mut seen = vec![false; n];
        for &p in preorder {
            seen[p as usize] = true;
        }
        let mut out = Vec::new();
        for i in 0..n as u32 {
            let node = self.node_of(i);
            if !seen[node as usize] {
                seen[node as usize] = true;
                out.push(i);
            }
        }
        out
    }

    /// The bound on a pre-order walk's visits (duplicate ids can repeat whole subtrees).
    pub fn preorder_limit(&self) -> usize {
        self.recs.len().saturating_mul(8) + 1_000_000
    }

    /// Pi getTree's node for an occurrence: the winner of that entry's id.
    #[inline]
    pub fn node_of(&self, i: u32) -> u32 {
        self.winner(self.recs[i as usize].id)
    }

    /// Pi getTree's parent rule: `parentId === null || parentId === id` → root; an unknown
    /// parent → root (orphan); otherwise the node owning `parentId`.
    #[inline]
    pub fn tree_parent(&self, i: u32) -> u32 {
        let r = &self.recs[i as usize];
        if r.parent == KID_NULL || r.parent == r.id {
            NONE
        } else {
            self.winner(r.parent)
        }
    }

    /// Roots (occurrences, in file order, each mapped to its node) and the children lists in
    /// CSR form, each list sorted like Pi (by `Date` of the timestamp, ties in file order).
    pub fn build_tree(&self) -> Tree {
        let n = self.recs.len();
        let mut roots = Vec::new();
        let mut counts = vec![0u32; n + 1];
        let mut parent_of = vec![NONE; n];
        for i in 0..n as u32 {
            let p = self.tree_parent(i);
            parent_of[i as usize] = p;
            if p == NONE {
                roots.push(self.node_of(i));
            } else {
                counts[p as usize + 1] += 1;
            }
        }
        for k in 1..=n {
            counts[k] += counts[k - 1];
        }
        let start = counts.clone();
        let mut fill = counts;
        let mut kids = vec![0u32; start[n] as usize];
        for (i, &p) in parent_of.iter().enumerate() {
            if p != NONE {
                kids[fill[p as usize] as usize] = self.node_of(i as u32);
                fill[p as usize] += 1;
            }
        }
        drop(parent_of);
        for p in 0..n {
            let (s, e) = (start[p] as usize, start[p + 1] as usize);
            if e - s > 1 {
                sort_like_v8(&mut kids[s..e], |&c| self.recs[c as usize].ts);
            }
        }
        Tree { roots, start, kids }
    }
}

/// Children lists in CSR form: node `p`'s children are `kids[start[p]..start[p+1]]`.
pub struct Tree {
    pub roots: Vec<u32>,
    pub start: Vec<u32>,
    pub kids: Vec<u32>,
}

impl Tree {
    pub fn children(&self, p: u32) -> &[u32] {
        &self.kids[self.start[p as usize] as usize..self.start[p as usize + 1] as usize]
    }

    /// Depth-first pre-order from the roots (children in order), as Pi's tree lists it.
    /// A node met again below itself (possible only with duplicate ids) is a cycle: Pi never
    /// returns there; we stop with the cycle. Output is bounded by `limit` visits.
    pub fn preorder(&self, limit: usize) -> Result<Vec<u32>, PreorderError> {
        let mut out = Vec::new();
        let mut on_path = vec![false; self.start.len() - 1];
        // stack of (node, next child position); a node is pushed when entered
        let mut stack: Vec<(u32, u32)> = Vec::new();
        for &r in &self.roots {
            if on_path[r as usize] {
                continue;
            }
            out.push(r);
            on_path[r as usize] = true;
            stack.push((r, 0));
            while let Some(top) = stack.last_mut() {
                let (node, pos) = *top;
                let ch = self.children(node);
                if (pos as usize) < ch.len() {
                    top.1 += 1;
                    let c = ch[pos as usize];
                    if on_path[c as usize] {
                        let mut cyc: Vec<u32> = stack.iter().map(|s| s.0).skip_while(|&x| x != c).collect();
                        cyc.dedup();
                        return Err(PreorderError::Cycle(cyc));
                    }
                    if out.len() >= limit {
                        return Err(PreorderError::TooLarge(limit));
                    }
                    out.push(c);
                    on_path[c as usize] = true;
                    stack.push((c, 0));
                } else {
                    on_path[node as usize] = false;
                    stack.pop();
                }
            }
        }
        Ok(out)
    }
}

#[derive(Debug)]
pub enum PreorderError {
    Cycle(Vec<u32>),
    TooLarge(usize),
}

/// Sorts like V8's `Array.prototype.sort` with the comparator `(a, b) => key(a) - key(b)`:
/// stable, and with NaN keys (invalid dates) treated exactly as V8's binary insertion sort
/// treats a NaN comparison (neither less nor greater) for lists under 64 elements (V8 sorts
/// such lists with one run and binary insertion). Longer lists with NaN keys, where V8's
/// result depends on its run merging, get a stable O(n log n) order with NaN keys last: never
/// quadratic, and documented as an approximation of V8 for that hostile case.
pub fn sort_like_v8<T: Copy>(v: &mut [T], key: impl Fn(&T) -> f64) {
    let n = v.len();
    if n < 2 {
        return;
    }
    let any_nan = v.iter().any(|x| key(x).is_nan());
    if !any_nan {
        v.sort_by(|a, b| key(a).partial_cmp(&key(b)).unwrap());
        return;
    }
    if n >= 64 {
        v.sort_by(|a, b| {
            let (x, y) = (key(a), key(b));
            match (x.is_nan(), y.is_nan()) {
                (false, false) => x.partial_cmp(&y).unwrap(),
                (false, true) => std::cmp::Ordering::Less,
                (true, false) => std::cmp::Ordering::Greater,
                (true, true) => std::cmp::Ordering::Equal,
            }
        });
        return;
    }
    // V8 array-sort.tq: CountAndMakeRun, then BinaryInsertionSort over the rest.
    let cmp = |a: &T, b: &T| key(a) - key(b);
    let mut run = 2usize;
    let desc = cmp(&v[1], &v[0]) < 0.0;
    let mut prev = v[1];
    while run < n {
        let cur = v[run];
        let order = cmp(&cur, &prev);
        if desc {
            if order >= 0.0 {
                break;
            }
        } else if order < 0.0 {
            break;
        }
        prev = cur;
        run += 1;
    }
    if desc {
        v[..run].reverse();
    }
    for start in run..n {
        let pivot = v[start];
        let (mut left, mut right) = (0usize, start);
        while left < right {
            let mid = left + ((right - left) >> 1);
            if cmp(&pivot, &v[mid]) < 0.0 {
                right = mid;
            } else {
                left = mid + 1;
            }
        }
        let mut p = start;
        while p > left {
            v[p] = v[p - 1];
            p -= 1;
        }
        v[left] = pivot;
    }
}
