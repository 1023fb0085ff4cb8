//! The write path's GIL release: a write runs with the index borrowed and the GIL held; then,
//! in "fsync" mode, the fsync runs on a duplicate descriptor with the GIL released and the
//! index let go, so other threads may use the session meanwhile.

use super::errors::os_err;
use super::Index;
use crate::store::{Store, StoreError};
use pyo3::prelude::*;
use pyo3::types::PyString;

/// `fsync` of a duplicate descriptor with the GIL released (nothing of the index is borrowed, so
/// other threads may use the session meanwhile).
pub(super) fn fsync_detached(
    py: Python<'_>,
    fd: Option<std::os::fd::OwnedFd>,
    what: &str,
) -> PyResult<()> {
    let Some(fd) = fd else { return Ok(()) };
    py.detach(|| crate::append::fsync_fd(&fd))
        .map_err(|e| os_err(&e, what))
}

impl Index {
    /// Runs a write on the store, then (in "fsync" mode, when it wrote) the fsync with the GIL
    /// released and the index let go. None: nothing was written.
    pub(super) fn write_detached_fsync(
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
    pub(super) fn append_detached<'py>(
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
