//! RPC `get_tree`'s text (`crate::treejson`): module functions taking the `Index`.
//!
//! The lines already in `JSON.stringify`'s form, and the whole nested answer written by the
//! core.

use super::Index;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The lines of entries `idx` of `index` that are already in `JSON.stringify`'s form.
///
/// `JSON.stringify(JSON.parse(line))`'s text (`jstext::is_stringify_text`); None for the
/// others (the caller writes those itself).
#[pyfunction]
pub fn stringify_lines<'py>(
    py: Python<'py>,
    index: PyRef<'py, Index>,
    idx: Vec<usize>,
) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
    let mut out: Vec<Option<Bound<'py, PyBytes>>> = vec![None; idx.len()];
    (index.st).with_stringify_lines(&idx, |k, b| out[k] = Some(PyBytes::new(py, b)))?;
    index.done(out)
}

/// RPC `get_tree` (nested) of `index`, written by the core and handed to `sink` in pieces.
///
/// `head`, the text of Pi's `"tree"` array, `[{"entry":...,"children":[...]...}...]`, then
/// `foot`, written by [`crate::treejson::write_tree`]: `sink(bytes)` is called with one piece
/// per batch of up to 4,096 entries (their concatenation is the text; the answer is never held
/// whole). The lines are read and checked with the GIL released, on a reader that does not hold
/// the index (other threads may use the session meanwhile; entries they append are not in the
/// tree). Each entry's line is copied when `check` and the scan found it already
/// `JSON.stringify`'s text (`Rec::stringify_form`, `json::canon_rest`); the others are written
/// by `fallback(positions) -> list[bytes]` (the exact Python writer). `tails`: node position ->
/// the text after its children (`,"label":...`). Raises what `Index.check_tree` raises,
/// SessionFileChangedError when the saved index was found unusable (before anything is written)
/// or the file shrank or was rewritten under the reads, and what `fallback` or `sink` raise.
#[pyfunction]
pub fn tree_json<'py>(
    index: &Bound<'py, Index>,
    tails: std::collections::HashMap<u32, Vec<u8>>,
    fallback: &Bound<'py, PyAny>,
    check: bool,
    head: Vec<u8>,
    foot: Vec<u8>,
    sink: &Bound<'py, PyAny>,
) -> PyResult<()> {
    let py = index.py();
    let (tree, order, lines, rd) = {
        let mut this = index.borrow_mut();
        this.live()?;
        let this = &mut *this;
        let (tree, order) = crate::treejson::tree_and_order(&mut this.tree, &this.st.index)?;
        let recs = &this.st.index.recs;
        let lines: Vec<crate::treejson::LineAt> = order
            .iter()
            .map(|&i| {
                let r = recs.at(i as usize);
                crate::treejson::LineAt {
                    offset: r.offset(),
                    len: r.len,
                    copy: check && r.stringify_form(),
                }
            })
            .collect();
        // (a block of records read here may have found the saved index unusable)
        this.live()?;
        (tree, order, lines, this.st.detached_reader()?)
    };
    let frame = crate::treejson::Frame {
        head: &head,
        foot: &foot,
        tails: &tails,
    };
    crate::treejson::write_tree::<PyErr>(
        &tree,
        &order,
        &lines,
        &rd,
        frame,
        |f| py.detach(f),
        |want| fallback.call1((want.to_vec(),))?.extract(),
        |len, fill| {
            let size = pyo3::ffi::Py_ssize_t::try_from(len).map_err(|_| {
                pyo3::exceptions::PyMemoryError::new_err("tree_json: piece too large")
            })?;
            // SAFETY: a new bytes object of `len` bytes, owned here (its pointer checked); its
            // buffer is `len` bytes, which `fill` writes every one of (it asserts so) before
            // the object is handed to Python. (`PyBytes::new_with` would zero it first: a
            // second pass over every byte of the answer.)
            let piece = unsafe {
                let ptr = pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), size);
                let piece = Bound::from_owned_ptr_or_err(py, ptr)?;
                let buf = pyo3::ffi::PyBytes_AsString(ptr).cast::<std::mem::MaybeUninit<u8>>();
                fill(std::slice::from_raw_parts_mut(buf, len));
                piece
            };
            sink.call1((piece,))?;
            Ok(())
        },
    )
}
