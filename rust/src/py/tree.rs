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
/// `foot`, written by [`crate::treejson::write_tree`]: `sink(bytes)` is called with pieces of
/// about 1 MiB or more (their concatenation is the text; the answer is never held whole). Each
/// entry's line is copied when `check` and the scan found it already `JSON.stringify`'s text
/// (`Rec::stringify_form`); the others are written by `fallback(positions) -> list[bytes]` (the
/// exact Python writer). `tails`: node position -> the text after its children
/// (`,"label":...`). Raises what `Index.check_tree` raises, what `fallback` or `sink` raise, and
/// SessionFileChangedError when a read found the saved index unusable (nothing more is written
/// then).
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
    let (tree, order) = {
        let mut this = index.borrow_mut();
        this.live()?;
        let this = &mut *this;
        crate::treejson::tree_and_order(&mut this.tree, &this.st.index)?
    };
    let frame = crate::treejson::Frame {
        head: &head,
        foot: &foot,
        tails: &tails,
    };
    crate::treejson::write_tree::<PyErr>(
        &tree,
        &order,
        frame,
        |idx, raw, span| Ok(index.borrow().st.lines_into(idx, raw, span)?),
        |idx| {
            let this = index.borrow();
            let recs = &this.st.index.recs;
            idx.iter()
                .map(|&i| check && recs.get(i).is_some_and(|r| r.stringify_form()))
                .collect()
        },
        |want| fallback.call1((want,))?.extract(),
        |chunk| {
            // (a block read while writing may have found the saved index unusable)
            index.borrow().live()?;
            sink.call1((PyBytes::new(py, chunk),))?;
            Ok(())
        },
    )
}
