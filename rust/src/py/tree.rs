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
    Ok(out)
}

/// RPC `get_tree` (nested) of `index`, written by the core.
///
/// `head`, the text of Pi's `"tree"` array,
/// `[{"entry":...,"children":[...]...}...]`, then `foot`, written by
/// [`crate::treejson::write_tree`]. Each entry's line is copied when `check` and it is already
/// `JSON.stringify`'s text (checked with the GIL released, on a copy of the batch's lines: no
/// borrow of the index is held meanwhile); the others are written by `fallback(positions) ->
/// list[bytes]` (the exact Python writer). `tails`: node position -> the text after its
/// children (`,"label":...`). Raises what `Index.check_tree` raises.
#[pyfunction]
pub fn tree_json<'py>(
    index: &Bound<'py, Index>,
    tails: std::collections::HashMap<u32, Vec<u8>>,
    fallback: &Bound<'py, PyAny>,
    check: bool,
    head: Vec<u8>,
    foot: Vec<u8>,
) -> PyResult<Bound<'py, PyBytes>> {
    let py = index.py();
    let (tree, order, size_guess) = {
        let mut this = index.borrow_mut();
        let this = &mut *this;
        let (tree, order) = crate::treejson::tree_and_order(&mut this.tree, &this.st.index)?;
        (tree, order, usize::try_from(this.st.end()).unwrap_or(0))
    };
    let frame = crate::treejson::Frame {
        head: &head,
        foot: &foot,
        tails: &tails,
        size_guess,
    };
    let out = crate::treejson::write_tree::<PyErr>(
        &tree,
        &order,
        frame,
        check,
        |idx, raw, span| Ok(index.borrow().st.lines_into(idx, raw, span)?),
        |raw, span| py.detach(|| crate::treejson::stringify_flags(raw, span)),
        |want| fallback.call1((want,))?.extract(),
    )?;
    Ok(PyBytes::new(py, &out))
}
