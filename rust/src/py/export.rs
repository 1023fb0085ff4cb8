//! The HTML export's calls (`crate::export`): module functions taking the `Index`.
//!
//! They give the digest of a range of entries and the segments' bounds, and write the index
//! chunks and the segments to the page's file descriptor.

use super::errors::os_err;
use super::Index;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A duplicate of the caller's file descriptor `fd` (a Python file object's, kept open by the
/// caller), written at the same offset.
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

/// Entries `start..end` of `index` as the HTML view's JSON document of columns.
///
/// [`crate::export::digest`]: ids, kinds, previews, references, offsets, lengths, timestamps,
/// token estimates, usage.
#[pyfunction]
pub fn html_digest<'py>(
    py: Python<'py>,
    index: PyRef<'py, Index>,
    start: usize,
    end: usize,
    preview_chars: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let doc = crate::export::digest(&index.st, start, end, preview_chars)?;
    index.done(PyBytes::new(py, &doc))
}

/// `(offset, length)` of the pieces the HTML view cuts the known bytes of `index` into.
///
/// They start at entries' line starts, each about `seg_bytes` long (no read: from the index).
#[pyfunction]
pub fn html_segment_bounds(index: PyRef<'_, Index>, seg_bytes: u64) -> PyResult<Vec<(u64, u64)>> {
    let b = crate::export::live_segment_bounds(&index.st, seg_bytes)?;
    index.done(b)
}

/// Writes the index chunks of `index` to the file descriptor `fd` at its offset.
///
/// Entries go in batches of `batch`, each `head`, the gzip+base64 of its `html_digest`
/// document, `tail`; batches are digested and compressed on every core. Holds the GIL (the
/// digests read the index).
#[pyfunction]
pub fn html_write_index(
    index: PyRef<'_, Index>,
    fd: i32,
    batch: usize,
    preview_chars: usize,
    head: &[u8],
    tail: &[u8],
) -> PyResult<()> {
    let mut out = dup_fd(fd)?;
    crate::export::write_index(&index.st, batch, preview_chars, head, tail, &mut out)?;
    // (what was written is refused with the page: the caller renames nothing on an error)
    index.done(())
}

/// Writes the pieces `bounds[k]` for `k` in `order` to the file descriptor `fd` at its offset.
///
/// Each is `heads[k]`, its gzip+base64, `tail`: of the known bytes of `index`, or of `data`
/// when given (an in-memory session's lines). Reading, compressing and writing run with the GIL
/// released, on a reader that does not hold the index (let go meanwhile: other threads may
/// use the session).
#[pyfunction]
pub fn html_write_segments(
    index: &Bound<'_, Index>,
    fd: i32,
    bounds: Vec<(u64, u64)>,
    order: Vec<usize>,
    heads: Vec<Vec<u8>>,
    tail: Vec<u8>,
    data: Option<Vec<u8>>,
) -> PyResult<()> {
    crate::export::check_pieces(&bounds, &order, &heads)?;
    let src = crate::export::segment_source(&index.borrow().st, data)?;
    let mut out = dup_fd(fd)?;
    let write = || crate::export::write_segments(&src, &bounds, &order, &heads, &tail, &mut out);
    Ok(index.py().detach(write)?)
}
