//! The PyO3 binding: type conversion, error mapping and GIL release only.

use crate::index::{HeaderState, Leaf, NONE};
use crate::store::{Store, StoreError};
use crate::walk::{Cycle, PreorderError, SpanMemo, TreeCache};
use pyo3::exceptions::{PyIndexError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::path::PathBuf;

// The package's exception classes, each looked up once per interpreter (PyO3 caches the type
// object) instead of importing `sessiontree.errors` and naming a class at every error.
pyo3::import_exception!(sessiontree.errors, SessionError);
pyo3::import_exception!(sessiontree.errors, SessionFileChangedError);
pyo3::import_exception!(sessiontree.errors, SessionCycleError);
pyo3::import_exception!(sessiontree.errors, SessionReadOnlyError);

/// Columns of [`Index::table`]: ids, parent ids, parentId is null, types, roles, lines, offsets.
type EntryColumns = (
    Vec<Option<String>>,
    Vec<Option<String>>,
    Vec<bool>,
    Vec<Option<String>>,
    Vec<Option<String>>,
    Vec<u32>,
    Vec<u64>,
);

/// A SessionCycleError's message and ids, to build once no borrow of the index is held.
struct CycleInfo(String, Vec<Option<String>>);

enum WalkErr {
    Cycle(CycleInfo),
    TooLarge(usize),
}

impl WalkErr {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            WalkErr::Cycle(c) => cycle_err(py, c),
            WalkErr::TooLarge(n) => SessionError::new_err(format!(
                "tree walk exceeded {n} nodes (duplicate ids repeat whole subtrees)"
            )),
        }
    }
}

fn cycle_err(_py: Python<'_>, c: CycleInfo) -> PyErr {
    SessionCycleError::new_err((c.0, c.1))
}

/// `OSError(errno, strerror)` (Python picks the subclass from errno), or `OSError(message)`.
fn os_err(e: &std::io::Error, prefix: &str) -> PyErr {
    match e.raw_os_error() {
        Some(code) => {
            let text = e.to_string();
            let text = text
                .strip_suffix(&format!(" (os error {code})"))
                .unwrap_or(&text)
                .to_string();
            PyOSError::new_err((code, format!("{prefix}{text}")))
        }
        None => PyOSError::new_err(format!("{prefix}{e}")),
    }
}

fn store_err(_py: Python<'_>, e: StoreError) -> PyErr {
    match e {
        StoreError::Io(io) => os_err(&io, ""),
        StoreError::BadLine(_) | StoreError::KeyOrder => PyValueError::new_err(e.to_string()),
        StoreError::NoWriter => SessionError::new_err(e.to_string()),
        StoreError::Replaced => SessionFileChangedError::new_err(e.to_string()),
        StoreError::Unwritten(_) => SessionError::new_err(e.to_string()),
        StoreError::ReadOnly => SessionReadOnlyError::new_err(e.to_string()),
        other => SessionFileChangedError::new_err(other.to_string()),
    }
}

/// A duplicate of the caller's file descriptor `fd` (a Python file object's, kept open by the
/// caller), written at the same offset (the HTML export).
fn dup_fd(fd: i32) -> PyResult<std::fs::File> {
    if fd < 0 {
        return Err(PyValueError::new_err("not a file descriptor"));
    }
    // SAFETY: `fd` is only borrowed for the `dup` below, which fails cleanly (EBADF) when it is
    // not open; the caller keeps its file open for the call.
    let b = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    b.try_clone_to_owned()
        .map(std::fs::File::from)
        .map_err(|e| os_err(&e, ""))
}

fn export_err(py: Python<'_>, e: crate::export::ExportError) -> PyErr {
    match e {
        crate::export::ExportError::Read(e) => store_err(py, e),
        crate::export::ExportError::Write(e) => os_err(&e, ""),
    }
}

/// `fsync` of a duplicate descriptor with the GIL released (nothing of the index is borrowed, so
/// other threads may use the session meanwhile).
fn fsync_detached(py: Python<'_>, fd: Option<std::os::fd::OwnedFd>, what: &str) -> PyResult<()> {
    let Some(fd) = fd else { return Ok(()) };
    py.detach(|| crate::append::fsync_fd(&fd))
        .map_err(|e| os_err(&e, what))
}

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
    fn check(&self, i: usize) -> PyResult<()> {
        if i < self.st.index.recs.len() {
            Ok(())
        } else {
            Err(PyIndexError::new_err(format!(
                "entry index {i} out of range"
            )))
        }
    }
    fn id_str(&self, kid: u32) -> Option<String> {
        self.st.index.key_string(kid).map(str::to_string)
    }
    /// What a SessionCycleError says (message, ids), taken from the index. The exception is
    /// built by [`cycle_err`] only after the index is let go: its `__init__` is Python code,
    /// during which another thread may run and use the session.
    fn cycle_info(&self, c: Cycle) -> CycleInfo {
        let ids: Vec<Option<String>> =
            c.0.iter()
                .map(|&i| self.id_str(self.st.index.recs[i as usize].id))
                .collect();
        let shown: Vec<String> = ids
            .iter()
            .map(|s| s.clone().unwrap_or_else(|| "<non-string id>".into()))
            .collect();
        CycleInfo(
            format!("parentId cycle through entries: {}", shown.join(" -> ")),
            ids,
        )
    }
    /// A pre-order walk's error as a [`WalkErr`], to raise once the index is let go.
    fn walk_err(&self, e: PreorderError) -> WalkErr {
        match e {
            PreorderError::Cycle(c) => WalkErr::Cycle(self.cycle_info(Cycle(c))),
            PreorderError::TooLarge(n) => WalkErr::TooLarge(n),
        }
    }
    /// Runs a write on the store, then (in "fsync" mode, when it wrote) the fsync with the GIL
    /// released and the index let go. None: nothing was written.
    fn write_detached_fsync(
        slf: &Bound<'_, Self>,
        write: impl FnOnce(&mut Store) -> Result<Option<Option<u32>>, StoreError>,
    ) -> PyResult<Option<Option<u32>>> {
        let py = slf.py();
        let (r, fd) = {
            let mut this = slf.borrow_mut();
            let r = write(&mut this.st).map_err(|e| store_err(py, e))?;
            if r.is_none() {
                return Ok(None);
            }
            (
                r,
                this.st
                    .sync_handle_if_durable()
                    .map_err(|e| store_err(py, e))?,
            )
        };
        fsync_detached(py, fd, "the lines were written but fsync failed: ")?;
        Ok(r)
    }
    fn opt(i: u32) -> Option<u32> {
        (i != NONE).then_some(i)
    }
}

#[pymethods]
impl Index {
    /// Scans a session file (read through a bounded buffer; the GIL is released while scanning).
    /// With `cache_dir`, through the saved index there (loaded when it passes its checks, saved
    /// after a cold scan of a file of at least `cache_min` bytes); see `cache_state`.
    #[staticmethod]
    #[pyo3(signature = (path, parallel = true, cache_dir = None, cache_min = 1048576))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        parallel: bool,
        cache_dir: Option<PathBuf>,
        cache_min: u64,
    ) -> PyResult<Self> {
        let cfg = cache_dir.map(|dir| crate::saved::CacheCfg {
            dir,
            min_bytes: cache_min,
        });
        let (st, cache) = py
            .detach(|| Store::open_cached(&path, parallel, cfg.as_ref()))
            .map_err(|e| store_err(py, e))?;
        Ok(Index {
            st,
            tree: TreeCache::default(),
            span_memo: SpanMemo::default(),
            rng: crate::append::IdRng::seeded(),
            cache,
        })
    }

    /// What the saved index did at open: `("off", 0, "")`, `("warm", covered_bytes, "")`,
    /// `("saved", 0, why_cold)` or `("cold", 0, why_cold)`.
    fn cache_state(&self) -> (&'static str, u64, String) {
        use crate::saved::CacheState;
        match &self.cache {
            CacheState::Off => ("off", 0, String::new()),
            CacheState::Warm { covered } => ("warm", *covered, String::new()),
            CacheState::Cold { why, saved: true } => ("saved", 0, why.clone()),
            CacheState::Cold { why, saved: false } => ("cold", 0, why.clone()),
        }
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
        Ok(Index {
            st,
            tree: TreeCache::default(),
            span_memo: SpanMemo::default(),
            rng: crate::append::IdRng::seeded(),
            cache: crate::saved::CacheState::Off,
        })
    }

    /// An empty in-memory index (for sessions that are never written to a file).
    #[staticmethod]
    fn in_memory() -> Self {
        Index {
            st: Store::in_memory(),
            tree: TreeCache::default(),
            span_memo: SpanMemo::default(),
            rng: crate::append::IdRng::seeded(),
            cache: crate::saved::CacheState::Off,
        }
    }

    /// Scans bytes appended to the file since the last scan; returns how many entries appeared.
    fn refresh(&mut self, py: Python<'_>) -> PyResult<usize> {
        self.st.refresh().map_err(|e| store_err(py, e))
    }

    /// Indexes whole lines we appended at byte `offset`. Returns the last new entry's index.
    fn append(&mut self, py: Python<'_>, offset: u64, data: &[u8]) -> PyResult<Option<u32>> {
        self.st
            .append_bytes(offset, data)
            .map_err(|e| store_err(py, e))
    }

    /// Appends from now on are written to the file open on `fd` (`O_APPEND`, with the writer
    /// lock held by the caller), per `durability` ("none" | "flush" | "fsync"). The index keeps
    /// its own duplicate of the descriptor until `detach_writer`.
    fn attach_writer(&mut self, py: Python<'_>, fd: i32, durability: &str) -> PyResult<()> {
        let mode = crate::append::Durability::parse(durability).ok_or_else(|| {
            PyValueError::new_err(format!("unknown durability mode {durability:?}"))
        })?;
        self.st.attach_sink(fd, mode).map_err(|e| store_err(py, e))
    }

    /// Writes out what is buffered and closes the duplicate descriptor (always, even when the
    /// write fails and the error is raised).
    fn detach_writer(&mut self, py: Python<'_>) -> PyResult<()> {
        self.st.detach_sink().map_err(|e| store_err(py, e))
    }

    /// Writes out what durability "none" buffered.
    fn flush_writes(&mut self, py: Python<'_>) -> PyResult<()> {
        self.st.flush_pending().map_err(|e| store_err(py, e))
    }

    /// Flush, then fsync the file (with the GIL released and the index free for other threads).
    fn sync_writes(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let fd = {
            let mut this = slf.borrow_mut();
            this.st.flush_pending().map_err(|e| store_err(py, e))?;
            this.st.sync_handle().map_err(|e| store_err(py, e))?
        };
        fsync_detached(py, fd, "")
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
        let py = slf.py();
        let ms = crate::append::now_ms();
        let body = match field {
            Some(name) => crate::append::Body::Field(name, body),
            None => crate::append::Body::Members(body),
        };
        let (id, fd) = {
            let mut this = slf.borrow_mut();
            let this = &mut *this;
            let id = match this.st.append_entry(&mut this.rng, etype, body, js, ms) {
                Ok(id) => id,
                Err(StoreError::KeyOrder) => return Ok(None),
                Err(e) => return Err(store_err(py, e)),
            };
            (
                id,
                this.st
                    .sync_handle_if_durable()
                    .map_err(|e| store_err(py, e))?,
            )
        };
        fsync_detached(py, fd, "the entry was written but fsync failed: ")?;
        // hex digits: always ASCII
        Ok(Some(PyString::new(
            py,
            std::str::from_utf8(&id).unwrap_or_default(),
        )))
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

    /// Bytes known (the file length as of the last scan or append).
    #[getter]
    fn end(&self) -> u64 {
        self.st.end()
    }
    fn ends_without_newline(&self, py: Python<'_>) -> PyResult<bool> {
        self.st.ends_without_newline().map_err(|e| store_err(py, e))
    }

    /// ("empty" | "valid" | "invalid", reason or None).
    fn header_state(&self) -> (&'static str, Option<String>) {
        match &self.st.index.header.0 {
            HeaderState::Empty => ("empty", None),
            HeaderState::Valid => ("valid", None),
            HeaderState::Invalid(r) => ("invalid", Some(r.clone())),
        }
    }
    fn header_line<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        Ok(self
            .st
            .header_bytes()
            .map_err(|e| store_err(py, e))?
            .map(|b| PyBytes::new(py, &b)))
    }
    #[getter]
    fn needs_migration(&self) -> bool {
        self.st.index.needs_migration()
    }
    #[getter]
    fn legacy_v1(&self) -> bool {
        self.st.index.is_legacy_v1()
    }

    fn __len__(&self) -> usize {
        self.st.index.recs.len()
    }
    /// Distinct ids (Pi getEntryCount).
    fn entry_count(&self) -> usize {
        self.st.index.entry_count()
    }

    fn line<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyBytes>> {
        self.check(i)?;
        let line = self.st.line(i).map_err(|e| store_err(py, e))?;
        Ok(PyBytes::new(py, &line))
    }
    /// The lines of entries `idx`, in that order (lines close together in the file are read
    /// with one `pread`).
    fn lines<'py>(&self, py: Python<'py>, idx: Vec<usize>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        for &i in &idx {
            self.check(i)?;
        }
        let mut out: Vec<Option<Bound<'py, PyBytes>>> = vec![None; idx.len()];
        self.st
            .with_lines(&idx, |k, b| out[k] = Some(PyBytes::new(py, b)))
            .map_err(|e| store_err(py, e))?;
        Ok(out
            .into_iter()
            .map(|b| b.expect("every line was read"))
            .collect())
    }

    // ---- RPC get_tree (sessiontree.rpc): lines already in JSON.stringify's form ----

    /// The lines of entries `idx` that are already `JSON.stringify(JSON.parse(line))`'s text
    /// (`jstext::is_stringify_text`), None for the others (the caller writes those itself).
    fn stringify_lines<'py>(
        &self,
        py: Python<'py>,
        idx: Vec<usize>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        for &i in &idx {
            self.check(i)?;
        }
        let mut out: Vec<Option<Bound<'py, PyBytes>>> = vec![None; idx.len()];
        self.st
            .with_lines(&idx, |k, b| {
                if crate::jstext::is_stringify_text(b) {
                    out[k] = Some(PyBytes::new(py, b));
                }
            })
            .map_err(|e| store_err(py, e))?;
        Ok(out)
    }

    /// The entry's id when it is a string, else None.
    fn id(&self, i: usize) -> PyResult<Option<String>> {
        self.check(i)?;
        Ok(self.id_str(self.st.index.recs[i].id))
    }
    fn ids(&self, idx: Vec<usize>) -> PyResult<Vec<Option<String>>> {
        idx.iter().map(|&i| self.id(i)).collect()
    }
    /// The entry's parentId when it is a string, else None.
    fn parent_id(&self, i: usize) -> PyResult<Option<String>> {
        self.check(i)?;
        Ok(self.id_str(self.st.index.recs[i].parent))
    }
    /// (id is a string, parentId is a string, parentId is null)
    fn key_kinds(&self, i: usize) -> PyResult<(bool, bool, bool)> {
        self.check(i)?;
        let r = &self.st.index.recs[i];
        Ok((
            self.st.index.key_string(r.id).is_some(),
            self.st.index.key_string(r.parent).is_some(),
            r.parent == crate::index::KID_NULL,
        ))
    }
    /// The entry's `type` when it is a string, else None.
    fn type_name(&self, py: Python<'_>, i: usize) -> PyResult<Option<String>> {
        self.check(i)?;
        self.st.entry_type(i).map_err(|e| store_err(py, e))
    }
    fn types(&self, py: Python<'_>, idx: Vec<usize>) -> PyResult<Vec<Option<String>>> {
        idx.iter().map(|&i| self.type_name(py, i)).collect()
    }
    /// `message.role` of a message entry when it is a string (v2 `hookMessage` reads `custom`).
    fn role(&self, py: Python<'_>, i: usize) -> PyResult<Option<String>> {
        self.check(i)?;
        self.st.entry_role(i).map_err(|e| store_err(py, e))
    }
    /// What listings show of entries `idx`, as columns: (ids, parent ids, parentId is null,
    /// types, roles, lines 1-based, byte offsets). Ids, types and roles only when strings.
    fn table(&self, py: Python<'_>, idx: Vec<usize>) -> PyResult<EntryColumns> {
        for &i in &idx {
            self.check(i)?;
        }
        let ix = &self.st.index;
        let name = |t: u16, f: &dyn Fn(u16) -> String| (t != 0).then(|| f(t));
        let mut cols: EntryColumns = Default::default();
        for &i in &idx {
            let r = &ix.recs[i];
            cols.0.push(self.id_str(r.id));
            cols.1.push(self.id_str(r.parent));
            cols.2.push(r.parent == crate::index::KID_NULL);
            if r.etype == crate::index::T_OTHER || r.role == crate::index::R_OTHER {
                // a name past the full names table: read back from the line
                cols.3
                    .push(self.st.entry_type(i).map_err(|e| store_err(py, e))?);
                cols.4
                    .push(self.st.entry_role(i).map_err(|e| store_err(py, e))?);
            } else {
                cols.3.push(name(r.etype, &|t| ix.type_name(t).to_string()));
                cols.4.push(name(r.role, &|t| ix.role_name(t).to_string()));
            }
            cols.5.push(ix.line_of(i as u32));
            cols.6.push(r.offset());
        }
        Ok(cols)
    }
    /// (line number 1-based, byte offset, byte length of the JSON text, value position)
    fn location(&self, i: usize) -> PyResult<(u32, u64, u64, u32)> {
        self.check(i)?;
        let r = &self.st.index.recs[i];
        Ok((
            self.st.index.line_of(i as u32),
            r.offset(),
            r.len as u64,
            self.st.index.vpos(i as u32),
        ))
    }
    /// `new Date(timestamp).getTime()` (NaN when invalid).
    fn timestamp_ms(&self, i: usize) -> PyResult<f64> {
        self.check(i)?;
        Ok(self.st.index.recs[i].ts())
    }

    /// Index of the entry owning string id `id` (the last one with that id), or None.
    fn index_of(&self, id: &str) -> Option<u32> {
        self.st.index.index_of_str(id)
    }
    /// Index of the entry at Pi `fileEntries` position `pos` (header = 0), or None.
    fn entry_at_value_pos(&self, pos: u32) -> Option<u32> {
        self.st.index.entry_at_vpos(pos)
    }

    /// The leaf entry's index (None when the leaf is null or names no entry).
    fn leaf(&self) -> Option<u32> {
        self.st.index.leaf_entry()
    }
    fn leaf_is_null(&self) -> bool {
        self.st.index.leaf == Leaf::Null
    }
    /// The leaf id when it is a string.
    fn leaf_id(&self) -> Option<String> {
        match self.st.index.leaf {
            Leaf::Null => None,
            Leaf::Key(k) => self.id_str(k),
        }
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
    fn branch(slf: &Bound<'_, Self>, i: usize) -> PyResult<Vec<u32>> {
        let r = {
            let this = slf.borrow();
            this.check(i)?;
            this.st
                .index
                .branch(i as u32)
                .map_err(|c| this.cycle_info(c))
        };
        r.map_err(|c| cycle_err(slf.py(), c))
    }
    /// Pi's context span of the branch ending at `leaf` (see `Index::context_span`): entry
    /// indices root first. Raises SessionCycleError.
    #[pyo3(signature = (leaf, with_settings = false))]
    fn context_span(&self, py: Python<'_>, leaf: usize, with_settings: bool) -> PyResult<Vec<u32>> {
        self.check(leaf)?;
        // the GIL is kept: the walk is short, and a borrow held without it would make another
        // thread's append fail with "Already borrowed"
        self.st
            .index
            .context_span_with(leaf as u32, with_settings, &self.span_memo)
            .map_err(|c| cycle_err(py, self.cycle_info(c)))
    }
    /// The newest entry at or above `i` on its branch with type name `etype` (and role `role`).
    #[pyo3(signature = (i, etype, role = None))]
    fn find_back(
        &self,
        py: Python<'_>,
        i: usize,
        etype: &str,
        role: Option<&str>,
    ) -> PyResult<Option<u32>> {
        self.check(i)?;
        self.st
            .index
            .find_back_named(i as u32, etype, role)
            .map_err(|c| cycle_err(py, self.cycle_info(c)))
    }
    /// Entries strictly below ancestor `to` (None: from the root) down to `i`, root first;
    /// None when `to` is not an ancestor of `i`.
    #[pyo3(signature = (i, to = None))]
    fn branch_since(
        &self,
        py: Python<'_>,
        i: usize,
        to: Option<usize>,
    ) -> PyResult<Option<Vec<u32>>> {
        self.check(i)?;
        if let Some(t) = to {
            self.check(t)?;
        }
        self.st
            .index
            .branch_since(i as u32, to.map_or(NONE, |t| t as u32))
            .map_err(|c| cycle_err(py, self.cycle_info(c)))
    }
    /// Deepest common ancestor of `a` and `b`, walking only as far as it is.
    fn common_ancestor_near(&self, py: Python<'_>, a: usize, b: usize) -> PyResult<Option<u32>> {
        self.check(a)?;
        self.check(b)?;
        self.st
            .index
            .common_ancestor_near(a as u32, b as u32)
            .map_err(|c| cycle_err(py, self.cycle_info(c)))
    }
    /// Pi getTree's node (the winning entry of entry `i`'s id).
    fn node_of(&self, i: usize) -> PyResult<u32> {
        self.check(i)?;
        Ok(self.st.index.node_of(i as u32))
    }
    /// Root nodes in Pi's order (one per root occurrence).
    fn roots(&mut self) -> Vec<u32> {
        self.tree.get(&self.st.index).roots.clone()
    }
    /// Children nodes of node `i` in Pi's order.
    fn children(&mut self, i: usize) -> PyResult<Vec<u32>> {
        self.check(i)?;
        Ok(self.tree.get(&self.st.index).children(i as u32).to_vec())
    }
    /// (roots, start, kids): the whole children table in CSR form.
    fn tree_table(&mut self) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let t = self.tree.get(&self.st.index);
        (t.roots.clone(), t.start.clone(), t.kids.clone())
    }
    /// Depth-first pre-order of nodes from the roots. Raises SessionCycleError on a cycle
    /// reachable from a root (only possible with duplicate ids).
    fn preorder(slf: &Bound<'_, Self>) -> PyResult<Vec<u32>> {
        let r = {
            let mut this = slf.borrow_mut();
            let this = &mut *this;
            this.tree
                .preorder(&this.st.index)
                .map_err(|e| this.walk_err(e))
        };
        r.map_err(|e| e.into_py(slf.py()))
    }
    /// Raises what [`Index::preorder`] raises (SessionCycleError on a cycle reachable from a
    /// root), without handing the order to Python.
    fn check_tree(slf: &Bound<'_, Self>) -> PyResult<()> {
        Self::preorder(slf).map(|_| ())
    }
    /// Entries (first occurrence of each node, file order) not reachable from any root.
    fn unreachable(slf: &Bound<'_, Self>) -> PyResult<Vec<u32>> {
        let r = {
            let mut this = slf.borrow_mut();
            let this = &mut *this;
            this.tree
                .unreachable(&this.st.index)
                .map_err(|e| this.walk_err(e))
        };
        r.map_err(|e| e.into_py(slf.py()))
    }

    /// Resolved labels in Pi's Map order: (target id if a string, label entry index).
    fn labels(&self) -> Vec<(Option<String>, u32)> {
        self.st
            .index
            .labels()
            .into_iter()
            .map(|(t, e)| (self.id_str(t), e))
            .collect()
    }
    /// Index of the label entry currently labelling id `id`, or None.
    fn label_entry(&self, id: &str) -> Option<u32> {
        self.st.index.label_entry_of(id)
    }
    /// Index of the last session_info entry in file order, or None.
    fn session_info_entry(&self) -> Option<u32> {
        Self::opt(self.st.index.session_info)
    }
    /// How many problems were recorded (without building them).
    fn problem_count(&self) -> usize {
        self.st.index.problems.len()
    }
    /// Problem `i` (file order): (line 1-based, byte offset, kind, message).
    fn problem(&self, i: usize) -> PyResult<(u32, u64, &'static str, String)> {
        self.st
            .index
            .problems
            .get(i)
            .map(|p| (p.line, p.offset, p.kind, p.message))
            .ok_or_else(|| PyIndexError::new_err(format!("problem index {i} out of range")))
    }
    /// Pi's token estimate of each entry's context message, computed from its raw line:
    /// 0 for entries without one, None where the exact (Python) rules must decide.
    fn estimate_tokens(&self, py: Python<'_>, idx: Vec<usize>) -> PyResult<Vec<Option<u64>>> {
        self.st.check_live().map_err(|e| store_err(py, e))?;
        for &i in &idx {
            self.check(i)?;
        }
        Ok(idx
            .iter()
            .map(|&i| crate::cut::entry_info(&self.st, i as u32).map(|info| info.tokens))
            .collect())
    }
    /// Pi's findCutPoint over `path[start..end]` (entry indices; the latest compaction removed
    /// by the caller): (first kept position, turn start position or -1, split turn), or None
    /// when the exact (Python) rules must decide. Touches only the entries it needs.
    fn find_cut_point(
        &self,
        py: Python<'_>,
        path: Vec<u32>,
        start: usize,
        end: usize,
        keep_recent_tokens: u64,
    ) -> PyResult<Option<(usize, isize, bool)>> {
        self.st.check_live().map_err(|e| store_err(py, e))?;
        for &i in &path {
            self.check(i as usize)?;
        }
        Ok(crate::cut::find_cut_point(
            &self.st,
            &path,
            start,
            end,
            keep_recent_tokens,
        ))
    }
    /// Entries `start..end` as one JSON document of columns for the HTML view (see
    /// `crate::digest::digest_columns`): ids, kinds, previews, references, offsets, lengths,
    /// timestamps, token estimates, usage.
    fn html_digest<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        end: usize,
        preview_chars: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.st.check_live().map_err(|e| store_err(py, e))?;
        let end = end.min(self.st.index.recs.len());
        let start = start.min(end);
        let doc = crate::digest::digest_columns(&self.st, start, end, preview_chars, |i| {
            self.id_str(self.st.index.recs[i].id)
        })
        .map_err(|e| store_err(py, e))?;
        Ok(PyBytes::new(py, &doc))
    }
    // ---- the HTML export's bulk work (`crate::export`, issue 18) ----
    /// `(offset, length)` of the pieces the known bytes are cut into for the HTML view: at
    /// entries' line starts, each about `seg_bytes` long (no read: from the index).
    fn html_segment_bounds(&self, py: Python<'_>, seg_bytes: u64) -> PyResult<Vec<(u64, u64)>> {
        self.st.check_live().map_err(|e| store_err(py, e))?;
        Ok(crate::export::segment_bounds(&self.st, seg_bytes))
    }
    /// Writes the index chunks (entries in batches of `batch`, each `head`, the gzip+base64 of
    /// its `html_digest` document, `tail`) to the file descriptor `fd` at its offset; batches
    /// are digested and compressed on every core. Holds the GIL (the digests read the index).
    #[allow(clippy::too_many_arguments)]
    fn html_write_index(
        &self,
        py: Python<'_>,
        fd: i32,
        batch: usize,
        preview_chars: usize,
        head: &[u8],
        tail: &[u8],
    ) -> PyResult<()> {
        self.st.check_live().map_err(|e| store_err(py, e))?;
        let mut out = dup_fd(fd)?;
        let ix = &self.st.index;
        crate::export::write_index_chunks(
            &self.st,
            batch,
            preview_chars,
            |i| ix.key_string(ix.recs[i].id).map(str::to_string),
            head,
            tail,
            &mut out,
        )
        .map_err(|e| export_err(py, e))
    }
    /// Writes the pieces `bounds[k]` for `k` in `order`, each `heads[k]`, its gzip+base64,
    /// `tail`, to the file descriptor `fd` at its offset: of the session's known bytes, or of
    /// `data` when given (an in-memory session's lines). Reading, compressing and writing run
    /// with the GIL released, on a reader that does not hold the index.
    #[allow(clippy::too_many_arguments)]
    fn html_write_segments(
        &self,
        py: Python<'_>,
        fd: i32,
        bounds: Vec<(u64, u64)>,
        order: Vec<usize>,
        heads: Vec<Vec<u8>>,
        tail: Vec<u8>,
        data: Option<Vec<u8>>,
    ) -> PyResult<()> {
        if heads.len() != bounds.len() || order.iter().any(|&k| k >= bounds.len()) {
            return Err(PyValueError::new_err(
                "heads must name every piece and order only pieces that exist",
            ));
        }
        let src = match data {
            Some(d) => crate::store::DetachedReader::from_bytes(d),
            None => self.st.detached_reader().map_err(|e| store_err(py, e))?,
        };
        let mut out = dup_fd(fd)?;
        py.detach(|| crate::export::write_segments(&src, &bounds, &order, &heads, &tail, &mut out))
            .map_err(|e| export_err(py, e))
    }
    /// Total lines seen.
    #[getter]
    fn line_count(&self) -> u32 {
        self.st.index.lines
    }
}

/// JavaScript `Date.parse(s)` (`new Date(s).getTime()` of a string) in epoch milliseconds, NaN
/// when invalid: the one date rule, also used by the index for sibling order. A string that is
/// not valid UTF-8 (a lone surrogate) is never a date.
#[pyfunction]
fn date_parse(s: &Bound<'_, PyString>) -> f64 {
    s.to_str().map(crate::jsdate::parse_iso).unwrap_or(f64::NAN)
}

/// Now as JavaScript `new Date().toISOString()` (ms precision, `Z`): the clock of appended
/// entries, also used for headers and entries built in Python.
#[pyfunction]
fn iso_now() -> String {
    crate::append::iso_from_ms(crate::append::now_ms())
}

/// Compact JSON `json` (orjson's) as `JSON.stringify` writes it: the same object when nothing
/// differs, new bytes with JavaScript's number spelling, or None when an object has an
/// array-index key (JavaScript enumerates those first: the exact Python writer orders them).
#[pyfunction]
fn js_text<'py>(json: &Bound<'py, PyBytes>) -> Option<Bound<'py, PyBytes>> {
    match crate::jstext::js_text(json.as_bytes()) {
        crate::jstext::JsText::Same => Some(json.clone()),
        crate::jstext::JsText::Rewritten(v) => Some(PyBytes::new(json.py(), &v)),
        crate::jstext::JsText::NeedsKeyOrder => None,
    }
}

/// `(depth, None)` when `line` is one JSON value as `JSON.parse` accepts it (depth: container
/// nesting, 0 for a scalar); `(byte position, reason)` when it is not. Linear, GIL released.
#[pyfunction]
fn json_check(py: Python<'_>, line: &[u8]) -> (usize, Option<&'static str>) {
    match py.detach(|| crate::json::check_value(line)) {
        Ok(depth) => (depth, None),
        Err(e) => (e.pos, Some(e.msg)),
    }
}

/// The header of a file from its first bytes `buf` (`eof`: that is the whole file), by the
/// rule opening applies: `("more", None, 0, 0)` (read more), `("none", None, 0, 0)` (no JSON
/// value), `("valid", None, offset, len)` or `("invalid", reason, 0, 0)`.
#[pyfunction]
fn header_probe(py: Python<'_>, buf: &[u8], eof: bool) -> (&'static str, Option<String>, u64, u64) {
    use crate::scan::HeaderProbe;
    match py.detach(|| crate::scan::probe_header(buf, eof)) {
        HeaderProbe::NeedMore => ("more", None, 0, 0),
        HeaderProbe::NoValue => ("none", None, 0, 0),
        HeaderProbe::Valid { offset, len } => ("valid", None, offset, len),
        HeaderProbe::Invalid(why) => ("invalid", Some(why), 0, 0),
    }
}

/// One finding of [`Scrubber`]: line (1-based), entry id, JSON pointer (None: the line is not
/// JSON), in a key, kind, start and end (code points in the decoded string), hash6.
type FindingRow = (
    u64,
    Option<String>,
    Option<String>,
    bool,
    &'static str,
    usize,
    usize,
    String,
);

/// The secret scrubber of `crate::scrub` over a byte stream: `feed` returns the scrubbed whole
/// lines, `finish` the last line without `\n`. Values never cross this boundary.
#[pyclass(module = "sessiontree._core")]
struct Scrubber {
    inner: crate::scrub::Scrubber,
}

#[pymethods]
impl Scrubber {
    /// `replay`: "keep" or "drop"; `header`: also search the header's cwd and parentSession;
    /// `record`: keep the findings (else only count them).
    #[new]
    #[pyo3(signature = (header=false, replay="keep", record=true))]
    fn new(header: bool, replay: &str, record: bool) -> PyResult<Self> {
        let replay = match replay {
            "keep" => crate::scrub::Replay::Keep,
            "drop" => crate::scrub::Replay::Drop,
            _ => return Err(PyValueError::new_err("replay must be 'keep' or 'drop'")),
        };
        let mut inner = crate::scrub::Scrubber::new(crate::scrub::Options { header, replay });
        inner.record = record;
        Ok(Scrubber { inner })
    }

    /// The scrubbed bytes of the whole lines now complete (GIL released).
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> Bound<'py, PyBytes> {
        let inner = &mut self.inner;
        let out = py.detach(|| {
            let mut out = Vec::with_capacity(data.len() + 64);
            inner.feed(data, &mut out);
            out
        });
        PyBytes::new(py, &out)
    }

    /// The last line when the input did not end with a newline (b"" otherwise).
    fn finish<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut out = Vec::new();
        let inner = &mut self.inner;
        py.detach(|| inner.finish(&mut out));
        PyBytes::new(py, &out)
    }

    /// The findings so far, removed from the scrubber.
    fn take_findings(&mut self) -> Vec<FindingRow> {
        std::mem::take(&mut self.inner.findings)
            .into_iter()
            .map(|f| {
                (
                    f.line, f.entry_id, f.pointer, f.in_key, f.kind, f.start, f.end, f.hash,
                )
            })
            .collect()
    }

    /// (bytes fed, lines changed, secrets found, replay fields kept or dropped)
    fn stats(&self) -> (u64, u64, u64, u64) {
        let s = &self.inner;
        (s.bytes_in, s.lines_changed, s.found, s.replay_fields)
    }

    /// The kinds the rules detect, in table order.
    #[staticmethod]
    fn kinds() -> Vec<&'static str> {
        crate::scrub::kinds()
    }
}

// ==== Fleet rows (issue 18; `rows.rs`): one batch call per session, columns as buffers ====

/// Arrow-layout buffers of one column: values (or offsets and data), validity bitmap.
#[derive(Default)]
struct ArrowCol {
    values: Vec<u8>,
    data: Vec<u8>,
    valid: Vec<u8>,
    nulls: usize,
    n: usize,
}

impl ArrowCol {
    fn bit(&mut self, ok: bool) {
        if self.n % 8 == 0 {
            self.valid.push(0);
        }
        if ok {
            *self.valid.last_mut().expect("a byte per 8 values") |= 1 << (self.n % 8);
        } else {
            self.nulls += 1;
        }
        self.n += 1;
    }
    fn f64(&mut self, v: Option<f64>) {
        self.values
            .extend_from_slice(&v.unwrap_or(0.0).to_le_bytes());
        self.bit(v.is_some());
    }
    fn i64(&mut self, v: Option<i64>) {
        self.values.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
        self.bit(v.is_some());
    }
    fn str(&mut self, v: Option<&str>) -> PyResult<()> {
        if self.n == 0 {
            self.values.extend_from_slice(&0i32.to_le_bytes());
        }
        if let Some(s) = v {
            self.data.extend_from_slice(s.as_bytes());
        }
        let end = i32::try_from(self.data.len())
            .map_err(|_| PyValueError::new_err("a string column over 2 GiB"))?;
        self.values.extend_from_slice(&end.to_le_bytes());
        self.bit(v.is_some());
        Ok(())
    }
    /// (values or offsets, data, validity or None when no value is null, null count)
    fn into_py<'py>(
        self,
        py: Python<'py>,
    ) -> (
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Option<Bound<'py, PyBytes>>,
        usize,
    ) {
        let valid = (self.nulls > 0).then(|| PyBytes::new(py, &self.valid));
        (
            PyBytes::new(py, &self.values),
            PyBytes::new(py, &self.data),
            valid,
            self.nulls,
        )
    }
}

/// Bits of a boolean column (Arrow order: bit `i % 8` of byte `i / 8`).
fn bool_bits(flags: impl Iterator<Item = bool>, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n.div_ceil(8)];
    for (i, f) in flags.enumerate() {
        if f {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// What `sessiontree.fleet` needs of a session beyond the index getters (see `rows.rs`), as a
/// dict: `undecided` (entries the Python rules decide), `totals` / `summary_totals` (usage
/// sums: input, output, cacheRead, cacheWrite, total, cost; None when undecided),
/// `tool_calls`, `last_activity` (ms or None) / `last_activity_undecided` (an entry index or
/// None), `path_length` (entries root to `leaf`; None: no leaf or a cycle). With `per_entry`,
/// also the per-entry columns as Arrow buffers (`entry_id`, `parent_id`, `type`, `role`,
/// `label` strings; `timestamp`, `line`, `offset`, `bytes` int64; `tokens` and the usage
/// columns float64; `on_active_path` bits) and `tokens_undecided`. `labels`: (entry id,
/// label) pairs for the `label` column. The GIL is held (the store is not shared across
/// threads); the line scan runs on every core.
#[pyfunction]
#[pyo3(signature = (index, leaf, per_entry, labels = Vec::new()))]
fn fleet_rows<'py>(
    py: Python<'py>,
    index: PyRef<'py, Index>,
    leaf: Option<usize>,
    per_entry: bool,
    labels: Vec<(String, String)>,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    use pyo3::types::PyDict;
    let st = &index.st;
    st.check_live().map_err(|e| store_err(py, e))?;
    let n = st.index.recs.len();
    if let Some(l) = leaf {
        index.check(l)?;
    }
    let rows = crate::rows::session_rows(st, per_entry).map_err(|e| store_err(py, e))?;
    let last = crate::rows::last_activity(st).map_err(|e| store_err(py, e))?;
    let path = leaf.map(|l| st.index.branch(l as u32));
    let out = PyDict::new(py);
    out.set_item("undecided", rows.undecided.clone())?;
    out.set_item("totals", rows.totals)?;
    out.set_item("summary_totals", rows.summary_totals)?;
    out.set_item("tool_calls", rows.tool_calls)?;
    out.set_item("last_activity", last.ok().flatten())?;
    out.set_item("last_activity_undecided", last.err())?;
    // no leaf: an empty path; a cycle: no length
    let path_length = match &path {
        None => Some(0),
        Some(p) => p.as_ref().ok().map(Vec::len),
    };
    out.set_item("path_length", path_length)?;
    let ctx = crate::rows::context_estimate(st, leaf.map(|l| l as u32));
    out.set_item("context", ctx.map(|(t, n)| (t.to_f64(), n)))?;
    let c = crate::rows::counts(st);
    out.set_item("messages", c.messages)?;
    out.set_item("messages_by_role", c.roles)?;
    out.set_item("compactions", c.compactions)?;
    out.set_item("branch_summaries", c.branch_summaries)?;
    if !per_entry {
        return Ok(out);
    }
    let ix = &st.index;
    let mut on_path = vec![false; n];
    if let Some(Ok(p)) = &path {
        for &i in p {
            on_path[i as usize] = true;
        }
    }
    let label_of: std::collections::HashMap<&str, &str> = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut cols: Vec<(&str, ArrowCol)> = [
        "entry_id",
        "parent_id",
        "type",
        "role",
        "label",
        "timestamp",
        "line",
        "offset",
        "bytes",
        "tokens",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost",
    ]
    .into_iter()
    .map(|c| (c, ArrowCol::default()))
    .collect();
    let mut tokens_undecided: Vec<u32> = Vec::new();
    let tokens_of = crate::rows::entry_tokens(st);
    for (i, r) in ix.recs.iter().enumerate() {
        let id = ix.key_string(r.id);
        // a name past the full names table is read back from the entry's line
        let (t_other, r_other) =
            if r.etype == crate::index::T_OTHER || r.role == crate::index::R_OTHER {
                let e = |e| store_err(py, e);
                (st.entry_type(i).map_err(e)?, st.entry_role(i).map_err(e)?)
            } else {
                (None, None)
            };
        let tname = match r.etype {
            crate::index::T_OTHER => t_other.as_deref(),
            t => (t != 0).then(|| ix.type_name(t)),
        };
        cols[0].1.str(id)?;
        cols[1].1.str(ix.key_string(r.parent))?;
        cols[2].1.str(tname)?;
        let role = match r.role {
            crate::index::R_OTHER => r_other.as_deref(),
            c => (r.etype == crate::index::T_MESSAGE && c != 0).then(|| ix.role_name(c)),
        };
        cols[3].1.str(role)?;
        cols[4].1.str(id.and_then(|k| label_of.get(k).copied()))?;
        // `new Date(...)` in JavaScript's range, as an integer of ms (TimeClip made it one)
        let t = r.ts();
        let ts = (t.is_finite() && t.abs() <= 8.64e15).then_some(t as i64);
        cols[5].1.i64(ts);
        cols[6].1.i64(Some(i64::from(ix.line_of(i as u32))));
        cols[7].1.i64(Some(r.offset() as i64));
        cols[8].1.i64(Some(i64::from(r.len)));
        let tokens = tokens_of[i].map(|t| t as f64);
        if tokens.is_none() {
            tokens_undecided.push(i as u32);
        }
        cols[9].1.f64(tokens);
        let u = rows.usage[i];
        for k in 0..5 {
            cols[10 + k].1.f64(u.and_then(|u| u[k]));
        }
    }
    let entries = PyDict::new(py);
    for (name, col) in cols {
        entries.set_item(name, col.into_py(py))?;
    }
    entries.set_item(
        "on_active_path",
        PyBytes::new(py, &bool_bits(on_path.into_iter(), n)),
    )?;
    out.set_item("n", n)?;
    out.set_item("columns", entries)?;
    out.set_item("tokens_undecided", tokens_undecided)?;
    Ok(out)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(header_probe, m)?)?;
    m.add_class::<Index>()?;
    m.add_class::<Scrubber>()?;
    m.add_function(wrap_pyfunction!(date_parse, m)?)?;
    m.add_function(wrap_pyfunction!(iso_now, m)?)?;
    m.add_function(wrap_pyfunction!(json_check, m)?)?;
    m.add_function(wrap_pyfunction!(js_text, m)?)?;
    m.add_function(wrap_pyfunction!(fleet_rows, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
