//! `Index`'s reads, the neighbour of `session/reads.py` and `session/views.py`.
//!
//! New lines scanned (`refresh`), the header, entries by position and by id, the batch views
//! (records, ids, types, columns, metrics, token estimates), the leaf, labels and the problems.
//! Each is one call of the core's views (`crate::index::view`, `crate::reads`).

use super::results::{self, named, COLUMNS};
use super::Index;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

#[pymethods]
impl Index {
    /// Scans bytes appended to the file since the last scan; returns how many entries appeared.
    fn refresh(&mut self) -> PyResult<usize> {
        Ok(self.st.refresh()?)
    }

    /// ("empty" | "valid" | "invalid", reason or None).
    fn header_state(&self) -> (&'static str, Option<&str>) {
        self.st.index.header.0.parts()
    }
    fn header_line<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.live()?;
        self.done(self.st.header_bytes()?.map(|b| PyBytes::new(py, &b)))
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
        self.done(self.st.index.len())
    }

    /// Distinct ids (Pi getEntryCount).
    fn entry_count(&self) -> PyResult<usize> {
        self.live()?;
        self.done(self.st.index.entry_count())
    }
    fn line<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyBytes>> {
        self.check(i)?;
        let line = self.st.line(i)?;
        self.done(PyBytes::new(py, &line))
    }

    /// The lines of entries `idx`, in that order (lines close together in the file are read
    /// with one `pread`).
    fn lines<'py>(&self, py: Python<'py>, idx: Vec<usize>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        self.st.index.check_all(idx.iter().copied())?;
        let mut out = vec![None; idx.len()];
        self.st
            .with_lines(&idx, |k, b| out[k] = Some(PyBytes::new(py, b)))?;
        self.done(out.into_iter().flatten().collect()) // every line was read
    }

    /// Where Pi throws on the content of the entries at positions `idx` (`crate::content`):
    /// `(position, stage, pi_error)` for each entry it throws on, `(position, None, None)` for
    /// each line the core's check leaves to Python, in the order of `idx`; other entries are
    /// left out. Reads the lines on every core.
    #[allow(clippy::type_complexity)]
    fn content_check(
        &self,
        idx: Vec<usize>,
    ) -> PyResult<Vec<(usize, Option<&'static str>, Option<&'static str>)>> {
        self.st.index.check_all(idx.iter().copied())?;
        let found = crate::content::check_entries(&self.st, &idx)?;
        let out = found.into_iter().map(|(i, c)| match c {
            crate::content::Check::Throws(stage, text) => (i, Some(stage.name()), Some(text)),
            _ => (i, None, None),
        });
        self.done(out.collect())
    }

    /// Entry `i`'s facts from the index, in one call (`Entry` keeps it): an `EntryRecord`.
    fn record<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyAny>> {
        let r = self.st.with_record(i, |v| results::record(py, v))??;
        self.done(r)
    }

    /// The ids of entries `idx` (when strings, else None).
    fn ids(&self, idx: Vec<usize>) -> PyResult<Vec<Option<&str>>> {
        self.live()?;
        self.done(self.st.index.ids_of(&idx)?)
    }

    /// The type names of entries `idx` (when strings, else None).
    fn types(&self, idx: Vec<usize>) -> PyResult<Vec<Option<std::borrow::Cow<'_, str>>>> {
        self.live()?;
        self.done(self.st.type_names(&idx)?)
    }

    /// What listings show of entries `idx`, as an `EntryColumns`: ids, parent ids, parentId is
    /// null, types, roles, lines 1-based, byte offsets. Ids, types and roles only when strings.
    fn table<'py>(&self, py: Python<'py>, idx: Vec<usize>) -> PyResult<Bound<'py, PyAny>> {
        let parts = |c: crate::index::EntryColumns<'_>| {
            named(py, &COLUMNS, "EntryColumns", false, c.into_parts())
        };
        let t = self.st.with_columns(&idx, parts)??;
        self.done(t)
    }

    /// What `Session.entry_metrics` shows of entries `idx`: (sizes, times, token estimates).
    ///
    /// Byte lengths, times or None where `new Date` is NaN, token estimates as
    /// `estimate_tokens` gives them.
    fn metrics(&self, idx: Vec<usize>) -> PyResult<crate::reads::Metrics> {
        self.done(self.st.metrics(&idx)?)
    }

    /// Index of the entry owning string id `id` (the last one with that id), or None.
    fn index_of(&self, id: &str) -> PyResult<Option<u32>> {
        self.live()?;
        self.done(self.st.index.index_of_str(id))
    }

    /// Index of the entry at Pi `fileEntries` position `pos` (header = 0), or None.
    fn entry_at_value_pos(&self, pos: u32) -> PyResult<Option<u32>> {
        self.live()?;
        self.done(self.st.index.entry_at_vpos(pos))
    }

    /// The leaf entry's index (None when the leaf is null or names no entry).
    fn leaf(&self) -> PyResult<Option<u32>> {
        self.live()?;
        self.done(self.st.index.leaf_entry())
    }
    fn leaf_is_null(&self) -> PyResult<bool> {
        self.live()?;
        self.done(self.st.index.leaf == crate::index::Leaf::Null)
    }

    /// The leaf id when it is a string.
    fn leaf_id(&self) -> PyResult<Option<&str>> {
        self.live()?;
        self.done(self.st.index.leaf_id())
    }

    /// Resolved labels in Pi's Map order: (target id if a string, label entry index).
    fn labels(&self) -> PyResult<Vec<(Option<&str>, u32)>> {
        self.live()?;
        self.done(self.st.index.label_ids())
    }

    /// Index of the label entry currently labelling id `id`, or None.
    fn label_entry(&self, id: &str) -> PyResult<Option<u32>> {
        self.live()?;
        self.done(self.st.index.label_entry_of(id))
    }

    /// Index of the last session_info entry in file order, or None.
    fn session_info_entry(&self) -> PyResult<Option<u32>> {
        self.live()?;
        self.done(Self::opt(self.st.index.session_info))
    }

    /// How many problems were recorded (without building them).
    fn problem_count(&self) -> PyResult<usize> {
        self.live()?;
        self.done(self.st.index.problems.len())
    }

    /// Problem `i` (file order), a `Problem`: line 1-based, byte offset, kind, message.
    fn problem<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyAny>> {
        results::problem(py, self.st.index.problems.get(i), i)
    }

    /// Pi's token estimate of each entry's context message, computed from its raw line.
    ///
    /// 0 for entries without one, None where the exact (Python) rules must decide.
    fn estimate_tokens(&self, idx: Vec<usize>) -> PyResult<Vec<Option<u64>>> {
        self.done(self.st.estimate_tokens(&idx)?)
    }

    /// Total lines seen.
    #[getter]
    fn line_count(&self) -> u32 {
        self.st.index.lines
    }
}
