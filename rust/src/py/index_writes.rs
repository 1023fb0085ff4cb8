//! `Index`'s write path, the neighbour of `session/writes.py`.
//!
//! The writer's descriptor and its durability, the appends (whole lines and one entry built here),
//! fresh ids and the leaf's moves. A write runs with the index borrowed and the GIL held; then, in
//! "fsync" mode, the fsync runs on a duplicate descriptor with the GIL released and the index let
//! go, so other threads may use the session meanwhile.

use super::errors::os_err;
use super::Index;
use crate::store::{Store, StoreError};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// `fsync` of a duplicate descriptor with the GIL released (nothing of the index is borrowed, so
/// other threads may use the session meanwhile).
fn fsync_detached(py: Python<'_>, fd: Option<std::os::fd::OwnedFd>, what: &str) -> PyResult<()> {
    let Some(fd) = fd else { return Ok(()) };
    py.detach(|| crate::append::fsync_fd(&fd))
        .map_err(|e| os_err(&e, what))
}

impl Index {
    /// Runs a write on the store, then (in "fsync" mode, when it wrote) the fsync with the GIL
    /// released and the index let go. None: nothing was written.
    fn write_detached_fsync(
        slf: &Bound<'_, Self>,
        write: impl FnOnce(&mut Store) -> Result<Option<Option<u32>>, StoreError>,
    ) -> PyResult<Option<Option<u32>>> {
        let (r, fd) = {
            let mut this = slf.borrow_mut();
            let r = write(&mut this.st)?;
            if r.is_none() {
                return Ok(None);
            }
            (r, this.st.sync_handle_if_durable()?)
        };
        fsync_detached(slf.py(), fd, "the lines were written but fsync failed: ")?;
        Ok(r)
    }
    /// `append_entry` once its body is parsed: the new id, or None (nothing appended) for a
    /// body with an array-index key.
    fn append_detached<'py>(
        slf: &Bound<'py, Self>,
        etype: &str,
        body: crate::append::Body<'_>,
        js: bool,
    ) -> PyResult<Option<Bound<'py, PyString>>> {
        let py = slf.py();
        let ms = crate::append::now_ms();
        let (id, fd) = {
            let mut this = slf.borrow_mut();
            let this = &mut *this;
            let id = match this.st.append_entry(&mut this.rng, etype, body, js, ms) {
                Ok(id) => id,
                Err(StoreError::KeyOrder) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            (id, this.st.sync_handle_if_durable()?)
        };
        fsync_detached(py, fd, "the entry was written but fsync failed: ")?;
        // hex digits: always ASCII
        Ok(Some(PyString::new(
            py,
            std::str::from_utf8(&id).unwrap_or_default(),
        )))
    }
}

#[pymethods]
impl Index {
    /// Indexes whole lines we appended at byte `offset`. Returns the last new entry's index.
    fn append(&mut self, offset: u64, data: &[u8]) -> PyResult<Option<u32>> {
        let v = self.st.append_bytes(offset, data)?;
        self.done(v)
    }

    /// Appends from now on are written to the file open on `fd`, per `durability`.
    ///
    /// `fd`: `O_APPEND`, with the writer lock held by the caller; `durability`: "none" |
    /// "flush" | "fsync". The index keeps
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

    /// `write_lines` for one entry line built from the leaf as it was at `leaf_version`.
    ///
    /// Written and indexed only if the leaf has not moved since (another thread appended or
    /// branched); returns False, with nothing written, if it has.
    fn write_lines_if(slf: &Bound<'_, Self>, data: &[u8], leaf_version: u64) -> PyResult<bool> {
        let r = Self::write_detached_fsync(slf, |st| st.write_lines_if(data, leaf_version))?;
        Ok(r.is_some())
    }

    /// Appends a new entry in one call: built, checked, written and indexed (the new leaf).
    ///
    /// The entry is `{"type":etype,"id":<fresh>,"parentId":<leaf>,"timestamp":<now>, ...members of
    /// body}`, written per the durability mode. With `field`, `body` is the JSON value of that one
    /// member instead. With `js` (the default) the body, orjson's text, is written as
    /// `JSON.stringify` writes it (JavaScript's number spelling); then None, with nothing appended,
    /// means it has an object with an array-index key (`"0"`, `"42"`: JavaScript writes those
    /// first), and the caller passes `JSON.stringify`'s text with `js=False`. Returns the new id.
    /// Raises ValueError for a bad type or body and OSError when writing fails (then nothing was
    /// appended). In "fsync" mode the fsync runs after the entry is indexed, with the GIL released
    /// and the index free for other threads; when it fails, OSError says so (the entry is written
    /// and indexed, but may not survive a machine crash).
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

    /// Drops the writer's descriptor without writing what is buffered.
    ///
    /// For a child process after `fork` (the parent writes its buffered entries and holds the
    /// lock).
    fn forget_writer(&mut self) {
        self.st.forget_sink();
    }

    /// Bytes of appended lines the index holds in memory (the rest is read from the file).
    #[getter]
    fn appended_in_memory(&self) -> usize {
        self.st.tail_len()
    }

    /// Moves the leaf to entry `i` (its id), or to null with None.
    #[pyo3(signature = (i))]
    fn set_leaf(&mut self, i: Option<usize>) -> PyResult<()> {
        if let Some(i) = i {
            self.check(i)?;
        }
        self.st.index.set_leaf(i.map(|i| i as u32));
        self.done(())
    }
}
