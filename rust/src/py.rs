//! The PyO3 binding: type conversion, error mapping and GIL release only.
//!
//! This file holds `Index`, each method one call of the core; `py/` the rest: `errors.rs`
//! (the core's errors as the package's exceptions, so that they map with `?`), `results.rs`
//! (the named tuples), `functions.rs` (the module's functions), `export.rs` (the HTML
//! export's calls) and `tree.rs` (RPC `get_tree`'s text), module functions taking an
//! `Index`; `fleet.rs` (the fleet's columns), `scrub.rs` (`Scrubber`), `write.rs` (the write
//! path's GIL release). Entries are read through the core's views (`crate::index::view`,
//! `crate::reads`), never from the records themselves.

mod errors;
mod export;
mod fleet;
mod functions;
mod results;
mod scrub;
mod tree;
mod write;

use crate::index::NONE;
use crate::store::Store;
use crate::walk::{SpanMemo, TreeCache};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use results::{named, COLUMNS};
use std::path::PathBuf;
use write::fsync_detached;

/// The index over one session's lines. Indices are entry positions in file order.
///
/// Threads: no method releases the GIL while it holds the index (only `open`, which has no
/// index yet, and the fsync of "fsync" mode, on a duplicate descriptor after the index is let
/// go), so a session shared by threads never fails with "Already borrowed".
#[pyclass(module = "sessiontree._core")]
pub struct Index {
    st: Store,
    tree: TreeCache,
    span_memo: SpanMemo,
    rng: crate::append::IdRng,
    /// what the saved index did when this index was opened
    cache: crate::saved::CacheState,
}

impl Index {
    fn new(st: Store, cache: crate::saved::CacheState) -> Self {
        Index {
            st,
            tree: TreeCache::default(),
            span_memo: SpanMemo::default(),
            rng: crate::append::IdRng::seeded(),
            cache,
        }
    }
    /// Raises SessionFileChangedError once a refresh found the file rewritten, shrunk or
    /// changed under its scan (the store is poisoned: no answer may mix two files), then
    /// checks the entry position `i`.
    fn check(&self, i: usize) -> PyResult<()> {
        self.live()?;
        Ok(self.st.index.check_pos(i)?)
    }
    /// Raises SessionFileChangedError once the store is poisoned (see `check`).
    fn live(&self) -> PyResult<()> {
        Ok(self.st.check_live()?)
    }
    fn opt(i: u32) -> Option<u32> {
        (i != NONE).then_some(i)
    }
    /// A walk's result, its cycle as `SessionCycleError` (the ids resolved).
    fn walked<T>(&self, r: Result<T, crate::walk::Cycle>) -> PyResult<T> {
        r.map_err(|c| self.st.index.cycle_error(c).into())
    }
}

#[pymethods]
impl Index {
    /// Scans a session file (read through a bounded buffer; the GIL is released while scanning).
    /// With `cache_dir`, through the saved index there (loaded when it passes its checks, saved
    /// after a cold scan of a file of at least `cache_min` bytes); see `cache_state`.
    /// After a save the folder's saved indexes of files gone or rewritten are evicted, then the
    /// least recently used past `cache_max` bytes (at most once per `cache_evict_s` seconds).
    #[staticmethod]
    #[pyo3(signature = (path, parallel = true, cache_dir = None, cache_min = 1048576, cache_max = 1073741824, cache_evict_s = 10))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        parallel: bool,
        cache_dir: Option<PathBuf>,
        cache_min: u64,
        cache_max: u64,
        cache_evict_s: u64,
    ) -> PyResult<Self> {
        let cfg = cache_dir.map(|dir| crate::saved::CacheCfg {
            dir,
            min_bytes: cache_min,
            max_bytes: cache_max,
            evict_every_s: cache_evict_s,
        });
        let (st, cache) = py.detach(|| Store::open_cached(&path, parallel, cfg.as_ref()))?;
        Ok(Index::new(st, cache))
    }

    /// What the saved index did at open: `("off", 0, "")`, `("warm", covered_bytes, "")`,
    /// `("saved", 0, why_cold)` or `("cold", 0, why_cold)`.
    fn cache_state(&self) -> (&'static str, u64, &str) {
        self.cache.parts()
    }

    /// A read-only index over a copy of the bytes of `data` (bytes, bytearray, memoryview,
    /// mmap: anything with the buffer protocol); scanned with the GIL released, the same
    /// index `open` builds from a file holding these bytes. Appends raise SessionReadOnlyError.
    #[staticmethod]
    #[pyo3(signature = (data, parallel = true))]
    fn from_bytes(py: Python<'_>, data: &Bound<'_, PyAny>, parallel: bool) -> PyResult<Self> {
        let buf = pyo3::buffer::PyBuffer::<u8>::get(data)?;
        let bytes = buf.to_vec(py)?;
        drop(buf);
        let st = py.detach(|| Store::from_bytes(bytes, parallel));
        Ok(Index::new(st, crate::saved::CacheState::Off))
    }

    /// An empty in-memory index (for sessions that are never written to a file).
    #[staticmethod]
    fn in_memory() -> Self {
        Index::new(Store::in_memory(), crate::saved::CacheState::Off)
    }

    /// Scans bytes appended to the file since the last scan; returns how many entries appeared.
    fn refresh(&mut self) -> PyResult<usize> {
        Ok(self.st.refresh()?)
    }

    /// Indexes whole lines we appended at byte `offset`. Returns the last new entry's index.
    fn append(&mut self, offset: u64, data: &[u8]) -> PyResult<Option<u32>> {
        Ok(self.st.append_bytes(offset, data)?)
    }

    /// Appends from now on are written to the file open on `fd` (`O_APPEND`, with the writer
    /// lock held by the caller), per `durability` ("none" | "flush" | "fsync"). The index keeps
    /// its own duplicate of the descriptor until `detach_writer`.
    fn attach_writer(&mut self, fd: i32, durability: &str) -> PyResult<()> {
        let mode = crate::append::Durability::parse(durability).ok_or_else(|| {
            PyValueError::new_err(format!("unknown durability mode {durability:?}"))
        })?;
        Ok(self.st.attach_sink(fd, mode)?)
    }

    /// Writes out what is buffered and closes the duplicate descriptor (always, even when the
    /// write fails and the error is raised).
    fn detach_writer(&mut self) -> PyResult<()> {
        Ok(self.st.detach_sink()?)
    }

    /// Writes out what durability "none" buffered.
    fn flush_writes(&mut self) -> PyResult<()> {
        Ok(self.st.flush_pending()?)
    }

    /// Flush, then fsync the file (with the GIL released and the index free for other threads).
    fn sync_writes(slf: &Bound<'_, Self>) -> PyResult<()> {
        let fd = {
            let mut this = slf.borrow_mut();
            this.st.flush_pending()?;
            this.st.sync_handle()?
        };
        fsync_detached(slf.py(), fd, "")
    }

    /// Writes whole lines (per the durability mode) and indexes them; nothing is indexed when
    /// the write fails. Returns the last new entry's index.
    fn write_lines(slf: &Bound<'_, Self>, data: &[u8]) -> PyResult<Option<u32>> {
        let r = Self::write_detached_fsync(slf, |st| st.write_lines(data).map(Some))?;
        Ok(r.flatten())
    }

    /// Bumped whenever the leaf may have moved (see `write_lines_if`).
    #[getter]
    fn leaf_version(&self) -> u64 {
        self.st.index.leaf_version
    }

    /// `write_lines` for one entry line built from the leaf as it was at `leaf_version`:
    /// written and indexed only if the leaf has not moved since (another thread appended or
    /// branched); returns False, with nothing written, if it has.
    fn write_lines_if(slf: &Bound<'_, Self>, data: &[u8], leaf_version: u64) -> PyResult<bool> {
        let r = Self::write_detached_fsync(slf, |st| st.write_lines_if(data, leaf_version))?;
        Ok(r.is_some())
    }

    /// Appends a new entry `{"type":etype,"id":<fresh>,"parentId":<leaf>,"timestamp":<now>,
    /// ...members of body}` in one call: built, checked, written per the durability mode and
    /// indexed (it becomes the leaf). With `field`, `body` is the JSON value of that one member
    /// instead. With `js` (the default) the body, orjson's text, is written as `JSON.stringify`
    /// writes it (JavaScript's number spelling); then None, with nothing appended, means it has
    /// an object with an array-index key (`"0"`, `"42"`: JavaScript writes those first), and
    /// the caller passes `JSON.stringify`'s text with `js=False`. Returns the new id. Raises
    /// ValueError for a bad type or body and OSError when writing fails (then nothing was
    /// appended).
    /// In "fsync" mode the fsync runs after the entry is indexed, with the GIL released and the
    /// index free for other threads; when it fails, OSError says so (the entry is written and
    /// indexed, but may not survive a machine crash).
    #[pyo3(signature = (etype, body, field = None, js = true))]
    fn append_entry<'py>(
        slf: &Bound<'py, Self>,
        etype: &str,
        body: &[u8],
        field: Option<&str>,
        js: bool,
    ) -> PyResult<Option<Bound<'py, PyString>>> {
        let body = match field {
            Some(name) => crate::append::Body::Field(name, body),
            None => crate::append::Body::Members(body),
        };
        Self::append_detached(slf, etype, body, js)
    }

    /// A fresh entry id for an entry built in Python (Pi `generateId`: 8 hex digits not used in
    /// the index), from the generator `append_entry` uses.
    fn new_id(&mut self) -> String {
        let id = crate::append::fresh_id(&self.st.index, &mut self.rng);
        String::from_utf8_lossy(&id).into_owned()
    }

    /// Drops the writer's descriptor without writing what is buffered: for a child process
    /// after `fork` (the parent writes its buffered entries and holds the lock).
    fn forget_writer(&mut self) {
        self.st.forget_sink();
    }

    /// Bytes of appended lines the index holds in memory (the rest is read from the file).
    #[getter]
    fn appended_in_memory(&self) -> usize {
        self.st.tail_len()
    }

    /// (st_dev, st_ino) of the file opened (None in memory): what a rewrite checks the path
    /// still names.
    fn file_identity(&self) -> Option<(u64, u64)> {
        self.st.identity()
    }

    /// How many times a refresh found the file changed (size, mtime or ctime) with the bytes
    /// it checks unchanged (`Session.state_key`).
    #[getter]
    fn file_changes(&self) -> u64 {
        self.st.file_changes
    }

    /// Bytes known (the file length as of the last scan or append).
    #[getter]
    fn end(&self) -> u64 {
        self.st.end()
    }
    fn ends_without_newline(&self) -> PyResult<bool> {
        Ok(self.st.ends_without_newline()?)
    }

    /// ("empty" | "valid" | "invalid", reason or None).
    fn header_state(&self) -> (&'static str, Option<&str>) {
        self.st.index.header.0.parts()
    }
    fn header_line<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.live()?;
        Ok(self.st.header_bytes()?.map(|b| PyBytes::new(py, &b)))
    }
    #[getter]
    fn needs_migration(&self) -> bool {
        self.st.index.needs_migration()
    }
    #[getter]
    fn legacy_v1(&self) -> bool {
        self.st.index.is_legacy_v1()
    }

    fn __len__(&self) -> PyResult<usize> {
        self.live()?;
        Ok(self.st.index.len())
    }
    /// Distinct ids (Pi getEntryCount).
    fn entry_count(&self) -> PyResult<usize> {
        self.live()?;
        Ok(self.st.index.entry_count())
    }

    fn line<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyBytes>> {
        self.check(i)?;
        let line = self.st.line(i)?;
        Ok(PyBytes::new(py, &line))
    }
    /// The lines of entries `idx`, in that order (lines close together in the file are read
    /// with one `pread`).
    fn lines<'py>(&self, py: Python<'py>, idx: Vec<usize>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        self.st.index.check_all(idx.iter().copied())?;
        let mut out = vec![None; idx.len()];
        self.st
            .with_lines(&idx, |k, b| out[k] = Some(PyBytes::new(py, b)))?;
        Ok(out.into_iter().flatten().collect()) // every line was read
    }

    /// Entry `i`'s facts from the index, in one call (`Entry` keeps it): an `EntryRecord`.
    fn record<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyAny>> {
        self.st.with_record(i, |v| results::record(py, v))?
    }
    /// The ids of entries `idx` (when strings, else None).
    fn ids(&self, idx: Vec<usize>) -> PyResult<Vec<Option<&str>>> {
        self.live()?;
        Ok(self.st.index.ids_of(&idx)?)
    }
    /// The type names of entries `idx` (when strings, else None).
    fn types(&self, idx: Vec<usize>) -> PyResult<Vec<Option<std::borrow::Cow<'_, str>>>> {
        self.live()?;
        Ok(self.st.type_names(&idx)?)
    }
    /// What listings show of entries `idx`, as an `EntryColumns`: ids, parent ids, parentId is
    /// null, types, roles, lines 1-based, byte offsets. Ids, types and roles only when strings.
    fn table<'py>(&self, py: Python<'py>, idx: Vec<usize>) -> PyResult<Bound<'py, PyAny>> {
        let parts = |c: crate::index::EntryColumns<'_>| {
            named(py, &COLUMNS, "EntryColumns", false, c.into_parts())
        };
        self.st.with_columns(&idx, parts)?
    }
    /// (byte lengths, times or None where `new Date` is NaN, token estimates as
    /// `estimate_tokens` gives them) of entries `idx`: what `Session.entry_metrics` shows.
    fn metrics(&self, idx: Vec<usize>) -> PyResult<crate::reads::Metrics> {
        Ok(self.st.metrics(&idx)?)
    }

    /// Index of the entry owning string id `id` (the last one with that id), or None.
    fn index_of(&self, id: &str) -> PyResult<Option<u32>> {
        self.live()?;
        Ok(self.st.index.index_of_str(id))
    }
    /// Index of the entry at Pi `fileEntries` position `pos` (header = 0), or None.
    fn entry_at_value_pos(&self, pos: u32) -> PyResult<Option<u32>> {
        self.live()?;
        Ok(self.st.index.entry_at_vpos(pos))
    }

    /// The leaf entry's index (None when the leaf is null or names no entry).
    fn leaf(&self) -> PyResult<Option<u32>> {
        self.live()?;
        Ok(self.st.index.leaf_entry())
    }
    fn leaf_is_null(&self) -> PyResult<bool> {
        self.live()?;
        Ok(self.st.index.leaf == crate::index::Leaf::Null)
    }
    /// The leaf id when it is a string.
    fn leaf_id(&self) -> PyResult<Option<&str>> {
        self.live()?;
        Ok(self.st.index.leaf_id())
    }
    /// Moves the leaf to entry `i` (its id), or to null with None.
    #[pyo3(signature = (i))]
    fn set_leaf(&mut self, i: Option<usize>) -> PyResult<()> {
        if let Some(i) = i {
            self.check(i)?;
        }
        self.st.index.set_leaf(i.map(|i| i as u32));
        Ok(())
    }

    /// Pi getBranch's parent of entry `i`, or None.
    fn walk_parent(&self, i: usize) -> PyResult<Option<u32>> {
        self.check(i)?;
        Ok(Self::opt(self.st.index.walk_parent(i as u32)))
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
        Ok(self.st.index.node_of(i as u32))
    }
    /// Root nodes in Pi's order (one per root occurrence).
    fn roots(&mut self) -> PyResult<Vec<u32>> {
        self.live()?;
        Ok(self.tree.get(&self.st.index).roots.clone())
    }
    /// Children nodes of node `i` in Pi's order.
    fn children(&mut self, i: usize) -> PyResult<Vec<u32>> {
        self.check(i)?;
        Ok(self.tree.get(&self.st.index).children(i as u32).to_vec())
    }
    /// A `TreeTable` (roots, start, kids): the whole children table in CSR form.
    fn tree_table<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.live()?;
        results::tree_table(py, self.tree.get(&self.st.index))
    }
    /// Depth-first pre-order of nodes from the roots. Raises SessionCycleError on a cycle
    /// reachable from a root (only possible with duplicate ids).
    fn preorder(&mut self) -> PyResult<Vec<u32>> {
        self.live()?;
        let ix = &self.st.index;
        Ok(self.tree.preorder(ix).map_err(|e| ix.walk_error(e))?)
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
        Ok(self.tree.unreachable(ix).map_err(|e| ix.walk_error(e))?)
    }

    /// Resolved labels in Pi's Map order: (target id if a string, label entry index).
    fn labels(&self) -> PyResult<Vec<(Option<&str>, u32)>> {
        self.live()?;
        Ok(self.st.index.label_ids())
    }
    /// Index of the label entry currently labelling id `id`, or None.
    fn label_entry(&self, id: &str) -> PyResult<Option<u32>> {
        self.live()?;
        Ok(self.st.index.label_entry_of(id))
    }
    /// Index of the last session_info entry in file order, or None.
    fn session_info_entry(&self) -> PyResult<Option<u32>> {
        self.live()?;
        Ok(Self::opt(self.st.index.session_info))
    }
    /// How many problems were recorded (without building them).
    fn problem_count(&self) -> PyResult<usize> {
        self.live()?;
        Ok(self.st.index.problems.len())
    }
    /// Problem `i` (file order), a `Problem`: line 1-based, byte offset, kind, message.
    fn problem<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyAny>> {
        results::problem(py, self.st.index.problems.get(i), i)
    }
    /// Pi's token estimate of each entry's context message, computed from its raw line:
    /// 0 for entries without one, None where the exact (Python) rules must decide.
    fn estimate_tokens(&self, idx: Vec<usize>) -> PyResult<Vec<Option<u64>>> {
        Ok(self.st.estimate_tokens(&idx)?)
    }
    /// Pi's findCutPoint over `path[start..end]` (entry indices; the latest compaction removed
    /// by the caller): (first kept position, turn start position or -1, split turn), or None
    /// when the exact (Python) rules must decide. Touches only the entries it needs.
    fn find_cut_point(
        &self,
        path: Vec<u32>,
        start: usize,
        end: usize,
        keep_recent_tokens: u64,
    ) -> PyResult<Option<(usize, isize, bool)>> {
        Ok(self.st.cut_point(&path, start, end, keep_recent_tokens)?)
    }
    /// Total lines seen.
    #[getter]
    fn line_count(&self) -> u32 {
        self.st.index.lines
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(functions::header_probe, m)?)?;
    m.add_function(wrap_pyfunction!(functions::index_cache_clear, m)?)?;
    m.add_function(wrap_pyfunction!(functions::index_cache_census, m)?)?;
    m.add_function(wrap_pyfunction!(functions::index_cache_evict, m)?)?;
    m.add("INDEX_CACHE_MAX_BYTES", crate::saved::DEFAULT_MAX_BYTES)?;
    m.add_function(wrap_pyfunction!(fleet::fleet_rows, m)?)?;
    let names = pyo3::types::PyTuple::new(m.py(), crate::columns::ENTRY_COLUMNS)?;
    m.add("FLEET_ENTRY_COLUMNS", names)?;
    m.add_function(wrap_pyfunction!(export::html_digest, m)?)?;
    m.add_function(wrap_pyfunction!(export::html_segment_bounds, m)?)?;
    m.add_function(wrap_pyfunction!(export::html_write_index, m)?)?;
    m.add_function(wrap_pyfunction!(export::html_write_segments, m)?)?;
    m.add_function(wrap_pyfunction!(tree::stringify_lines, m)?)?;
    m.add_function(wrap_pyfunction!(tree::tree_json, m)?)?;
    m.add_class::<Index>()?;
    m.add_class::<scrub::Scrubber>()?;
    m.add_function(wrap_pyfunction!(functions::date_parse, m)?)?;
    m.add_function(wrap_pyfunction!(functions::iso_now, m)?)?;
    m.add_function(wrap_pyfunction!(functions::json_check, m)?)?;
    m.add_function(wrap_pyfunction!(functions::js_text, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    functions::add_names(m)?;
    Ok(())
}
