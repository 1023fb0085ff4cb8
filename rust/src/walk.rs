//! Walking the tree: branches (root first), children in Pi's order, roots, pre-order. And the
//! unreachable entries. Nothing recurses; every walk is bounded, and a `parentId` cycle is reported
//! instead of looping (Pi loops until the heap is gone).

use crate::index::{
    Index, Leaf, KID_NULL, NONE, R_ASSISTANT, T_COMPACTION, T_CONTEXT_EDIT, T_MESSAGE,
    T_MODEL_CHANGE, T_THINKING_LEVEL_CHANGE,
};

/// A `parentId` cycle met while walking: the entry indices on the cycle, in walk order.
#[derive(Debug, Clone, PartialEq)]
pub struct Cycle(pub Vec<u32>);

impl Index {
    /// Pi `getBranch`'s parent step: `current.parentId ? byId.get(current.parentId) : undefined`.
    #[inline]
    pub fn walk_parent(&self, i: u32) -> u32 {
        let p = self.recs.at(i as usize).parent;
        if self.key_is_truthy(p) {
            self.winner(p)
        } else {
            NONE
        }
    }

    /// Moves the leaf to entry `entry` (its id), or to null with None. The leaf may have moved,
    /// so an append built from the old leaf is refused (`leaf_version`).
    pub fn set_leaf(&mut self, entry: Option<u32>) {
        self.leaf_version += 1;
        self.leaf = match entry {
            None => Leaf::Null,
            Some(i) => Leaf::Key(self.recs.at(i as usize).id),
        };
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

    /// What Pi's context building and compaction read of the branch ending at `leaf`, root first.
    ///
    /// The whole branch when it has no compaction; otherwise the entries from the latest
    /// compaction's first kept entry to the leaf, preceded (when needed) by the few earlier entries
    /// whose values still count: with `with_settings`, the latest `thinking_level_change` and the
    /// latest `model_change` / assistant message (the session context's thinking level and model),
    /// and every `context_edit` (compaction applies them path-wide). Pure functions give the same
    /// answers on this list as on the whole branch. The rule for the latest compaction and its kept
    /// range is Python's `sessiontree.context.latest_compaction_at` (Pi `buildSessionContext`);
    /// this walk only decides what to read (tests/session/test_entry_objects.py checks the answers
    /// over the corpus).
    ///
    /// Cost: the walk from the leaf back to the first kept entry (the context), not the branch.
    /// The whole branch is read only when the rule needs it: a file with duplicate ids or a
    /// legacy (v1/v2) header, a `firstKeptEntryId` that is not a string, a needed setting that
    /// is not in the context, or a file with `context_edit`s. A `firstKeptEntryId` that names
    /// no entry, or one that is not on the branch before the compaction, keeps nothing before
    /// it (the span is the compaction on); telling the second walks the index above the
    /// compaction once, remembered by [`Index::context_span_with`]
    /// (tests/parity/test_odd_first_kept.py).
    pub fn context_span(&self, leaf: u32, with_settings: bool) -> Result<Vec<u32>, Cycle> {
        self.context_span_with(leaf, with_settings, &SpanMemo::default())
    }

    /// [`Index::context_span`], remembering in `memo` first kept entries that are not ancestors.
    ///
    /// Pi never writes a compaction whose first kept entry is not one of its ancestors, but files
    /// get edited. Learning it walks the branch above the compaction once (the index only, no line
    /// is read); later calls, after any appends, take the memo's word while it still holds. It
    /// holds while the compaction's ancestors cannot have changed: without duplicate ids (checked
    /// first) an entry's parent, once found, is fixed; only a root whose `parentId` names no entry
    /// yet may gain ancestors, so the memo keeps that id and is dropped once an entry has it.
    pub fn context_span_with(
        &self,
        leaf: u32,
        with_settings: bool,
        memo: &SpanMemo,
    ) -> Result<Vec<u32>, Cycle> {
        if self.has_duplicate_ids() || self.needs_migration() {
            return self.branch(leaf);
        }
        let limit = self.recs.len();
        let rec = |i: u32| self.recs.at(i as usize);
        // leaf back to the latest compaction
        let mut rev: Vec<u32> = Vec::new();
        let mut c = leaf;
        let mut compaction = NONE;
        while c != NONE {
            rev.push(c);
            if rev.len() > limit {
                return Err(self.find_cycle(leaf).unwrap_or(Cycle(vec![])));
            }
            if rec(c).etype == T_COMPACTION {
                compaction = c;
                break;
            }
            c = self.walk_parent(c);
        }
        if compaction == NONE {
            rev.reverse();
            return Ok(rev);
        }
        let fk = self.target(compaction);
        if self.key_string(fk).is_none() {
            return self.branch(leaf);
        }
        // on to the first kept entry (ids are unique: the first match is the only one). When no
        // entry has that id, or the compaction names itself (keep nothing), nothing before the
        // compaction is kept and no walk is needed.
        let owner = self.winner(fk);
        let keeps_nothing = owner == NONE
            || owner == compaction
            || !self.is_above(compaction, owner, memo, leaf)?;
        let head_from = if keeps_nothing {
            self.walk_parent(compaction)
        } else {
            c = self.walk_parent(compaction);
            loop {
                if c == NONE {
                    return self.branch(leaf); // (is_above found it: unreachable)
                }
                rev.push(c);
                if rev.len() > limit {
                    return Err(self.find_cycle(leaf).unwrap_or(Cycle(vec![])));
                }
                if rec(c).id == fk {
                    break self.walk_parent(c);
                }
                c = self.walk_parent(c);
            }
        };
        let is_model = |i: u32| {
            let r = rec(i);
            r.etype == T_MODEL_CHANGE || (r.etype == T_MESSAGE && r.role == R_ASSISTANT)
        };
        let mut need_thinking =
            with_settings && !rev.iter().any(|&i| rec(i).etype == T_THINKING_LEVEL_CHANGE);
        let mut need_model = with_settings && !rev.iter().any(|&i| is_model(i));
        let need_edits = self.first_context_edit != NONE;
        let mut head: Vec<u32> = Vec::new();
        let mut steps = rev.len();
        c = head_from;
        while c != NONE && (need_thinking || need_model || need_edits) {
            steps += 1;
            if steps > limit {
                return Err(self.find_cycle(leaf).unwrap_or(Cycle(vec![])));
            }
            let r = rec(c);
            if need_thinking && r.etype == T_THINKING_LEVEL_CHANGE {
                need_thinking = false;
                head.push(c);
            } else if need_model && is_model(c) {
                need_model = false;
                head.push(c);
            } else if need_edits && r.etype == T_CONTEXT_EDIT {
                head.push(c);
            }
            c = self.walk_parent(c);
        }
        head.reverse();
        rev.reverse();
        head.extend(rev);
        Ok(head)
    }

    /// Whether `owner` is an ancestor of `compaction` (walking up from it, or by `memo`).
    /// A cycle met on the way is reported from `leaf`, as the span's other walks report it.
    fn is_above(
        &self,
        compaction: u32,
        owner: u32,
        memo: &SpanMemo,
        leaf: u32,
    ) -> Result<bool, Cycle> {
        let rec = &self.recs.at(compaction as usize);
        let fk = self.key_string(self.target(compaction));
        let mut m = memo.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = m.as_ref() {
            let still = k.compaction == compaction
                && k.offset == rec.offset()
                && fk == Some(k.first_kept.as_str())
                && k.dangling.as_deref().is_none_or(|d| {
                    self.lookup_str(d)
                        .is_none_or(|kid| self.winner(kid) == NONE)
                });
            if still {
                return Ok(false);
            }
            *m = None;
        }
        let limit = self.recs.len();
        let mut steps = 0;
        let mut last = compaction;
        let mut c = self.walk_parent(compaction);
        while c != NONE {
            if c == owner {
                return Ok(true);
            }
            steps += 1;
            if steps > limit {
                return Err(self.find_cycle(leaf).unwrap_or(Cycle(vec![])));
            }
            last = c;
            c = self.walk_parent(c);
        }
        // `last` is the root: its parent is null, or an id no entry has (yet)
        let p = self.recs.at(last as usize).parent;
        let dangling = if self.key_is_truthy(p) {
            match self.key_string(p) {
                Some(d) => Some(d.to_string()),
                None => return Ok(false), // (not remembered: a parent id that is not a string)
            }
        } else {
            None
        };
        if let Some(fk) = fk {
            *m = Some(NotAbove {
                compaction,
                offset: rec.offset(),
                first_kept: fk.to_string(),
                dangling,
            });
        }
        Ok(false)
    }

    /// The newest entry at or above `from` on its branch whose type is `etype`. And whose role is
    /// `role`, when given; it walks back only as far as needed.
    pub fn find_back(
        &self,
        from: u32,
        etype: u16,
        role: Option<u16>,
    ) -> Result<Option<u32>, Cycle> {
        let limit = self.recs.len();
        let mut c = from;
        let mut n = 0usize;
        while c != NONE {
            let r = &self.recs.at(c as usize);
            if r.etype == etype && role.is_none_or(|x| r.role == x) {
                return Ok(Some(c));
            }
            n += 1;
            if n > limit {
                return Err(self.find_cycle(from).unwrap_or(Cycle(vec![])));
            }
            c = self.walk_parent(c);
        }
        Ok(None)
    }

    /// [`Index::find_back`] by type name (and role name): None at once when no entry has that
    /// type or role.
    pub fn find_back_named(
        &self,
        from: u32,
        etype: &str,
        role: Option<&str>,
    ) -> Result<Option<u32>, Cycle> {
        let Some(t) = self.type_code_of(etype) else {
            return Ok(None);
        };
        let r = match role {
            None => None,
            Some(r) => match self.role_code_of(r) {
                Some(c) => Some(c),
                None => return Ok(None),
            },
        };
        self.find_back(from, t, r)
    }

    /// The branch from `to` (exclusive) down to `from`, root first, walking only that far. `to`: an
    /// ancestor of `from`, or NONE for the root; None when `to` is not an ancestor of `from`.
    pub fn branch_since(&self, from: u32, to: u32) -> Result<Option<Vec<u32>>, Cycle> {
        let limit = self.recs.len();
        let mut out = Vec::new();
        let mut c = from;
        while c != to {
            if c == NONE {
                return Ok(None);
            }
            out.push(c);
            if out.len() > limit {
                return Err(self.find_cycle(from).unwrap_or(Cycle(vec![])));
            }
            c = self.walk_parent(c);
        }
        out.reverse();
        Ok(Some(out))
    }

    /// Deepest common ancestor of two entries, walking both branches up in turns.
    ///
    /// The cost is the distance from the farther entry to the ancestor, not the depth of the tree.
    pub fn common_ancestor_near(&self, a: u32, b: u32) -> Result<Option<u32>, Cycle> {
        use std::collections::HashSet;
        let limit = self.recs.len();
        let (mut seen_a, mut seen_b) = (HashSet::new(), HashSet::new());
        let (mut x, mut y) = (a, b);
        let mut n = 0usize;
        while x != NONE || y != NONE {
            if x != NONE {
                if seen_b.contains(&x) {
                    return Ok(Some(x));
                }
                seen_a.insert(x);
            }
            if y != NONE {
                if seen_a.contains(&y) {
                    return Ok(Some(y));
                }
                seen_b.insert(y);
            }
            n += 1;
            if n > limit {
                return Err(self
                    .find_cycle(if x != NONE { a } else { b })
                    .unwrap_or(Cycle(vec![])));
            }
            if x != NONE {
                x = self.walk_parent(x);
            }
            if y != NONE {
                y = self.walk_parent(y);
            }
        }
        Ok(None)
    }

    /// Entries no root reaches, given the tree's pre-order (`Tree::preorder`).
    ///
    /// The first occurrence of each such node, in file order. These hang off `parentId` cycles.
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
        self.winner(self.recs.at(i as usize).id)
    }

    /// Pi getTree's parent rule.
    ///
    /// `parentId === null || parentId === id` → root; an unknown parent → root (orphan); otherwise
    /// the node owning `parentId`.
    #[inline]
    pub fn tree_parent(&self, i: u32) -> u32 {
        let r = &self.recs.at(i as usize);
        if r.parent == KID_NULL || r.parent == r.id {
            NONE
        } else {
            self.winner(r.parent)
        }
    }

    /// Roots and the children lists in CSR form, each list sorted like Pi. Roots: occurrences, in
    /// file order, each mapped to its node; children by `Date` of the timestamp, ties in file
    /// order.
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
                sort_like_v8(&mut kids[s..e], |&c| self.recs.at(c as usize).ts());
            }
        }
        Tree { roots, start, kids }
    }
}

/// What [`Index::context_span_with`] learnt.
///
/// The latest compaction it met whose first kept entry is not one of its ancestors. One per session
/// (the binding keeps it beside the index).
#[derive(Default)]
pub struct SpanMemo(std::sync::Mutex<Option<NotAbove>>);

struct NotAbove {
    /// the compaction (entry index and line offset) and its `firstKeptEntryId`
    compaction: u32,
    offset: u64,
    first_kept: String,
    /// the `parentId` of the root above it when no entry has that id yet (it may come)
    dangling: Option<String>,
}

/// The children table of one index, built on first use and rebuilt once the index has changed. It
/// changed when its `generation` moved: an entry indexed, a rollback, a rescan.
#[derive(Default)]
pub struct TreeCache(Option<(u64, Tree)>);

impl TreeCache {
    /// The tree of `ix`, rebuilt when `ix` changed since it was built.
    pub fn get(&mut self, ix: &Index) -> &Tree {
        let gen = ix.generation;
        if self.0.as_ref().is_none_or(|(g, _)| *g != gen) {
            self.0 = None;
        }
        &self.0.get_or_insert_with(|| (gen, ix.build_tree())).1
    }

    /// Depth-first pre-order of nodes from the roots ([`Tree::preorder`]), bounded by
    /// [`Index::preorder_limit`].
    pub fn preorder(&mut self, ix: &Index) -> Result<Vec<u32>, PreorderError> {
        let limit = ix.preorder_limit();
        self.get(ix).preorder(limit)
    }

    /// Entries no root reaches ([`Index::unreachable`]).
    ///
    /// The pre-order it needs fails first on a cycle reachable from a root.
    pub fn unreachable(&mut self, ix: &Index) -> Result<Vec<u32>, PreorderError> {
        let pre = self.preorder(ix)?;
        Ok(ix.unreachable(&pre))
    }
}

/// Children lists in CSR form: node `p`'s children are `kids[start[p]..start[p+1]]`.
pub struct Tree {
    pub roots: Vec<u32>,
    pub start: Vec<u32>,
    pub kids: Vec<u32>,
}

impl Tree {
    /// Pi getTree's nodes without children, as entry positions in file order.
    ///
    /// An entry is a node when its id is its own (`node_of`; every entry is when no id
    /// repeats); nodes no root reaches are included.
    pub fn leaves(&self, ix: &Index) -> Vec<u32> {
        let n = ix.recs.len();
        let unique = ix.entry_count() == n;
        (0..n as u32)
            .filter(|&p| {
                self.start[p as usize + 1] == self.start[p as usize]
                    && (unique || ix.node_of(p) == p)
            })
            .collect()
    }

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
                        let mut cyc: Vec<u32> =
                            stack.iter().map(|s| s.0).skip_while(|&x| x != c).collect();
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

/// Sorts like V8's `Array.prototype.sort` with the comparator `(a, b) => key(a) - key(b)`.
///
/// Stable, and with NaN keys (invalid dates) treated exactly as V8's binary insertion sort treats a
/// NaN comparison (neither less nor greater) for lists under 64 elements (V8 sorts such lists with
/// one run and binary insertion). Longer lists with NaN keys, where V8's result depends on its run
/// merging, get a stable O(n log n) order with NaN keys last: never quadratic, and documented as an
/// approximation of V8 for that hostile case.
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

#[cfg(test)]
mod span_tests {
    use crate::index::Index;
    use crate::store::Store;
    use crate::walk::Cycle;

    /// The plain rule (both branches walked whole), the oracle for `common_ancestor_near`.
    fn common_ancestor(ix: &Index, a: u32, b: u32) -> Result<Option<u32>, Cycle> {
        let (pa, pb) = (ix.branch(a)?, ix.branch(b)?);
        Ok(pa
            .iter()
            .zip(pb.iter())
            .take_while(|(x, y)| x == y)
            .last()
            .map(|(x, _)| *x))
    }

    fn store(lines: &[String]) -> Store {
        let mut st = Store::in_memory();
        let mut data = String::from(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        );
        data.push('\n');
        for l in lines {
            data.push_str(l);
            data.push('\n');
        }
        st.append_bytes(0, data.as_bytes()).unwrap();
        st
    }

    fn msg(id: &str, parent: &str, role: &str) -> String {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"{role}","content":"x"}}}}"#
        )
    }

    fn chain(n: usize) -> Vec<String> {
        let mut v = vec![r#"{"type":"thinking_level_change","id":"t","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","thinkingLevel":"high"}"#.to_string()];
        let mut parent = "t".to_string();
        for i in 0..n {
            let id = format!("m{i}");
            v.push(msg(
                &id,
                &parent,
                if i % 2 == 0 { "user" } else { "assistant" },
            ));
            parent = id;
        }
        v
    }

    fn compaction(id: &str, parent: &str, fk: &str) -> String {
        format!(
            r#"{{"type":"compaction","id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:00.000Z","summary":"s","firstKeptEntryId":"{fk}","tokensBefore":1}}"#
        )
    }

    #[test]
    fn the_span_starts_at_the_first_kept_entry_with_the_settings_before_it() {
        let mut lines = chain(20);
        lines.push(compaction("c", "m19", "m14"));
        lines.push(msg("after", "c", "user"));
        let st = store(&lines);
        let ix = &st.index;
        let leaf = (lines.len() - 1) as u32;
        let ids = |v: &[u32]| {
            v.iter()
                .map(|&i| {
                    ix.key_string(ix.recs.at(i as usize).id)
                        .unwrap()
                        .to_string()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(&ix.context_span(leaf, false).unwrap()),
            ["m14", "m15", "m16", "m17", "m18", "m19", "c", "after"]
        );
        // the thinking level is far back; the model comes from m19 (an assistant) inside the span
        assert_eq!(ids(&ix.context_span(leaf, true).unwrap())[0], "t");
    }

    #[test]
    fn a_compaction_that_keeps_nothing_needs_no_walk_and_duplicates_read_the_branch() {
        let mut lines = chain(10);
        lines.push(compaction("c", "m9", "c"));
        lines.push(msg("after", "c", "user"));
        let st = store(&lines);
        let leaf = (lines.len() - 1) as u32;
        assert_eq!(st.index.context_span(leaf, false).unwrap().len(), 2);
        lines.push(msg("after", "c", "assistant")); // a duplicate id: the whole branch
        let st = store(&lines);
        let leaf = (lines.len() - 1) as u32;
        assert_eq!(
            st.index.context_span(leaf, false).unwrap(),
            st.index.branch(leaf).unwrap()
        );
    }

    /// A first kept entry that is not above the compaction keeps nothing before it.
    ///
    /// The memo answers later calls, and is dropped when the root above gains a parent (here one
    /// that makes the entry an ancestor after all).
    #[test]
    fn an_off_path_first_kept_entry_keeps_nothing_and_the_memo_follows_appends() {
        let side = r#"{"type":"message","id":"side","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"x"}}"#;
        let mut lines = vec![side.to_string(), msg("m0", "late", "user")];
        lines.push(msg("m1", "m0", "assistant"));
        lines.push(compaction("c", "m1", "side"));
        lines.push(msg("after", "c", "user"));
        let mut st = store(&lines);
        let memo = crate::walk::SpanMemo::default();
        let ids = |ix: &Index, v: &[u32]| {
            v.iter()
                .map(|&i| {
                    ix.key_string(ix.recs.at(i as usize).id)
                        .unwrap()
                        .to_string()
                })
                .collect::<Vec<_>>()
        };
        for _ in 0..2 {
            let leaf = (st.index.recs.len() - 1) as u32;
            let span = st.index.context_span_with(leaf, false, &memo).unwrap();
            assert_eq!(ids(&st.index, &span), ["c", "after"]);
            assert!(memo.0.lock().unwrap().is_some());
        }
        // "late" arrives, under "side": side is above the compaction now
        let late = r#"{"type":"message","id":"late","parentId":"side","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"x"}}"#;
        let end = st.end();
        st.append_bytes(end, format!("{late}\n").as_bytes())
            .unwrap();
        let leaf = st
            .index
            .lookup_str("after")
            .map(|k| st.index.winner(k))
            .unwrap();
        let span = st.index.context_span_with(leaf, false, &memo).unwrap();
        assert_eq!(
            ids(&st.index, &span),
            ["side", "late", "m0", "m1", "c", "after"]
        );
        assert_eq!(span, st.index.context_span(leaf, false).unwrap());
    }

    #[test]
    fn the_near_common_ancestor_is_the_common_ancestor() {
        let mut lines = chain(12);
        lines.push(msg("x1", "m4", "user"));
        lines.push(msg("x2", "x1", "assistant"));
        let st = store(&lines);
        let ix = &st.index;
        let n = lines.len() as u32;
        for a in 0..n {
            for b in 0..n {
                assert_eq!(
                    ix.common_ancestor_near(a, b).unwrap(),
                    common_ancestor(ix, a, b).unwrap(),
                    "{a} {b}"
                );
            }
        }
        assert_eq!(ix.branch_since(n - 1, 5).unwrap().unwrap().len(), 2);
        assert_eq!(ix.branch_since(n - 1, 8), Ok(None));
    }

    #[test]
    fn tree_cache_follows_the_index() {
        // t, m0 (user), m1 (assistant), m2 (user): one chain
        let mut st = store(&chain(3));
        let mut cache = crate::walk::TreeCache::default();
        assert_eq!(cache.get(&st.index).roots, vec![0]);
        assert_eq!(cache.get(&st.index).children(1), &[2]);
        assert_eq!(cache.preorder(&st.index).unwrap(), vec![0, 1, 2, 3]);
        // a second child of m0, appended after the tree was built: the cache sees it
        let end = st.end();
        let line = format!("{}\n", msg("x", "m0", "user"));
        st.append_bytes(end, line.as_bytes()).unwrap();
        assert_eq!(cache.get(&st.index).children(1), &[2, 4]);
        assert_eq!(cache.preorder(&st.index).unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(cache.unreachable(&st.index).unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn leaf_moves_by_name_lookups_and_conditional_writes() {
        let mut st = store(&chain(3));
        let ix = &st.index;
        assert_eq!(
            ix.find_back_named(3, "message", Some("assistant")),
            Ok(Some(2))
        );
        assert_eq!(
            ix.find_back_named(3, "thinking_level_change", None),
            Ok(Some(0))
        );
        assert_eq!(ix.find_back_named(3, "message", Some("nobody")), Ok(None));
        assert_eq!(ix.find_back_named(3, "no_such_type", None), Ok(None));
        let v = st.index.leaf_version;
        st.index.set_leaf(Some(1));
        assert_eq!(st.index.leaf_entry(), Some(1));
        assert!(st.index.leaf_version > v);
        // a line built from the leaf as it was before set_leaf is not written
        let line = format!("{}\n", msg("y", "m2", "user"));
        assert_eq!(st.write_lines_if(line.as_bytes(), v).unwrap(), None);
        assert_eq!(st.index.recs.len(), 4);
        let now = st.index.leaf_version;
        assert_eq!(
            st.write_lines_if(line.as_bytes(), now).unwrap(),
            Some(Some(4))
        );
        st.index.set_leaf(None);
        assert_eq!(st.index.leaf_entry(), None);
        assert_eq!(st.index.leaf, crate::index::Leaf::Null);
    }
}
