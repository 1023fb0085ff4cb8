//! `Index`'s walks over the tree, the neighbour of the facade's branch and tree reads.
//!
//! Pi getBranch's parent and branch, the context span, searches back along a branch, common
//! ancestors, getTree's nodes, children and orders, and findCutPoint. A cycle met on the way
//! is raised as SessionCycleError (its ids resolved).

use super::results;
use super::Index;
use crate::index::NONE;
use pyo3::prelude::*;

#[pymethods]
impl Index {
    /// Pi getBranch's parent of entry `i`, or None.
    fn walk_parent(&self, i: usize) -> PyResult<Option<u32>> {
        self.check(i)?;
        let v = Self::opt(self.st.index.walk_parent(i as u32));
        self.done(v)
    }

    /// Entry indices root first down to `i` (Pi getBranch). Raises SessionCycleError.
    fn branch(&self, i: usize) -> PyResult<Vec<u32>> {
        self.check(i)?;
        self.walked(self.st.index.branch(i as u32))
    }

    /// Pi's context span of the branch ending at `leaf` (see `Index::context_span`): entry
    /// indices root first. Raises SessionCycleError.
    #[pyo3(signature = (leaf, with_settings = false))]
    fn context_span(&self, leaf: usize, with_settings: bool) -> PyResult<Vec<u32>> {
        self.check(leaf)?;
        // the GIL is kept: the walk is short, and a borrow held without it would make another
        // thread's append fail with "Already borrowed"
        let ix = &self.st.index;
        self.walked(ix.context_span_with(leaf as u32, with_settings, &self.span_memo))
    }

    /// The newest entry at or above `i` on its branch with type name `etype` (and role `role`).
    #[pyo3(signature = (i, etype, role = None))]
    fn find_back(&self, i: usize, etype: &str, role: Option<&str>) -> PyResult<Option<u32>> {
        self.check(i)?;
        self.walked(self.st.index.find_back_named(i as u32, etype, role))
    }

    /// Entries strictly below ancestor `to` (None: from the root) down to `i`, root first;
    /// None when `to` is not an ancestor of `i`.
    #[pyo3(signature = (i, to = None))]
    fn branch_since(&self, i: usize, to: Option<usize>) -> PyResult<Option<Vec<u32>>> {
        self.check(i)?;
        if let Some(t) = to {
            self.check(t)?;
        }
        let to = to.map_or(NONE, |t| t as u32);
        self.walked(self.st.index.branch_since(i as u32, to))
    }

    /// Deepest common ancestor of `a` and `b`, walking only as far as it is.
    fn common_ancestor_near(&self, a: usize, b: usize) -> PyResult<Option<u32>> {
        self.check(a)?;
        self.check(b)?;
        self.walked(self.st.index.common_ancestor_near(a as u32, b as u32))
    }

    /// Pi getTree's node (the winning entry of entry `i`'s id).
    fn node_of(&self, i: usize) -> PyResult<u32> {
        self.check(i)?;
        let v = self.st.index.node_of(i as u32);
        self.done(v)
    }

    /// Root nodes in Pi's order (one per root occurrence).
    fn roots(&mut self) -> PyResult<Vec<u32>> {
        self.live()?;
        let v = self.tree.get(&self.st.index).roots.clone();
        self.done(v)
    }

    /// Children nodes of node `i` in Pi's order.
    fn children(&mut self, i: usize) -> PyResult<Vec<u32>> {
        self.check(i)?;
        let v = self.tree.get(&self.st.index).children(i as u32).to_vec();
        self.done(v)
    }

    /// A `TreeTable` (roots, start, kids): the whole children table in CSR form.
    fn tree_table<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.live()?;
        let t = results::tree_table(py, self.tree.get(&self.st.index))?;
        self.done(t)
    }

    /// The tree's leaf nodes in file order ([`crate::walk::Tree::leaves`]).
    fn tree_leaves(&mut self) -> PyResult<Vec<u32>> {
        self.live()?;
        let ix = &self.st.index;
        Ok(self.tree.get(ix).leaves(ix))
    }

    /// Depth-first pre-order of nodes from the roots. Raises SessionCycleError on a cycle
    /// reachable from a root (only possible with duplicate ids).
    fn preorder(&mut self) -> PyResult<Vec<u32>> {
        self.live()?;
        let ix = &self.st.index;
        let v = self.tree.preorder(ix).map_err(|e| ix.walk_error(e))?;
        self.done(v)
    }

    /// Raises what [`Index::preorder`] raises (SessionCycleError on a cycle reachable from a
    /// root), without handing the order to Python.
    fn check_tree(&mut self) -> PyResult<()> {
        self.preorder().map(|_| ())
    }

    /// Entries (first occurrence of each node, file order) not reachable from any root.
    fn unreachable(&mut self) -> PyResult<Vec<u32>> {
        self.live()?;
        let ix = &self.st.index;
        let v = self.tree.unreachable(ix).map_err(|e| ix.walk_error(e))?;
        self.done(v)
    }

    /// Pi's findCutPoint over `path[start..end]`. Touches only the entries it needs.
    ///
    /// `path`: entry indices, the latest compaction removed by the caller. Returns (first kept
    /// position, turn start position or -1, split turn), or None when the exact (Python) rules
    /// must decide.
    fn find_cut_point(
        &self,
        path: Vec<u32>,
        start: usize,
        end: usize,
        keep_recent_tokens: u64,
    ) -> PyResult<Option<(usize, isize, bool)>> {
        let v = self.st.cut_point(&path, start, end, keep_recent_tokens)?;
        self.done(v)
    }
}
