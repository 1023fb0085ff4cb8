//! Results with names: the named tuples of `sessiontree.entries`, made from Rust tuples.
//!
//! `EntryRecord`, `EntryColumns`, `Problem`, `HeaderProbe`, `TreeTable`, `ScrubFinding`,
//! `ScrubStats`.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyTuple, PyType};

pub static RECORD: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub static COLUMNS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub static PROBLEM: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub static PROBE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub static TREE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub static FINDING: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub static SCRUB_STATS: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The named tuple `name` of `sessiontree.entries` (looked up once, in `cell`) holding `items`.
/// Made as `tuple.__new__(cls, items)` makes it, without its argument parsing (that costs
/// more than the tuple: `Entry` takes one record per entry): the class's own `tp_alloc` with
/// `len(items)` slots, each set once.
///
/// With `atomic` (every item a string, number, bool or None: nothing that can hold a
/// reference), the tuple is untracked by the garbage collector, as CPython untracks such plain
/// tuples itself: a record kept by each of a million `Entry` objects then adds no work to the
/// collections.
pub fn named<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
    atomic: bool,
    items: impl IntoPyObject<'py, Target = PyTuple, Output = Bound<'py, PyTuple>, Error = PyErr>,
) -> PyResult<Bound<'py, PyAny>> {
    let items = items.into_pyobject(py)?;
    named_of(py, cell, name, atomic, items.iter())
}

/// [`named`] of items already made (no intermediate tuple).
pub fn named_of<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
    atomic: bool,
    items: impl ExactSizeIterator<Item = Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let cls = cell
        .get_or_try_init(py, || {
            let c = py
                .import("sessiontree.entries")?
                .getattr(name)?
                .cast_into::<PyType>()?;
            if !c.is_subclass_of::<PyTuple>()? {
                return Err(PyTypeError::new_err(format!(
                    "sessiontree.entries.{name} is not a tuple"
                )));
            }
            Ok::<_, PyErr>(c.unbind())
        })?
        .bind(py);
    let n = items.len();
    let tp = cls.as_type_ptr();
    // SAFETY: `cls` is a type deriving from `tuple` (a NamedTuple class, checked when it was
    // looked up; a tuple subclass's `tp_alloc` makes a tuple of `n` empty slots). Each slot of
    // the new tuple, whose only reference we hold, is set once with an owned reference, as
    // `PyTuple_SetItem` requires (it refuses an index out of range); a tuple left with an
    // empty slot is an error, and its deallocation skips empty slots.
    unsafe {
        let alloc = pyo3::ffi::PyType_GetSlot(tp, pyo3::ffi::Py_tp_alloc);
        let alloc: pyo3::ffi::allocfunc = std::mem::transmute(alloc);
        let obj = Bound::from_owned_ptr_or_err(py, alloc(tp, n as pyo3::ffi::Py_ssize_t))?;
        let mut set = 0;
        for (k, item) in items.enumerate() {
            if pyo3::ffi::PyTuple_SetItem(obj.as_ptr(), k as pyo3::ffi::Py_ssize_t, item.into_ptr())
                != 0
            {
                return Err(PyErr::fetch(py));
            }
            set += 1;
        }
        if set != n {
            // never left with an empty slot: a tuple's readers assume none
            return Err(PyTypeError::new_err(format!("{name}: {set} of {n} items")));
        }
        if atomic {
            pyo3::ffi::PyObject_GC_UnTrack(obj.as_ptr().cast());
        }
        Ok(obj)
    }
}

/// Python strings of the fixed type and role names of `codes.rs`, made once per interpreter:
/// nearly every record names one of them.
static TYPES: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
static ROLES: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();

fn name<'py>(
    py: Python<'py>,
    cell: &PyOnceLock<Vec<Py<PyString>>>,
    fixed: &[&str],
    code: u16,
    name: Option<&str>,
) -> Option<Bound<'py, PyString>> {
    let name = name?;
    let made = cell.get_or_init(py, || {
        fixed
            .iter()
            .map(|s| PyString::new(py, s).unbind())
            .collect()
    });
    match made.get(code as usize) {
        Some(s) if fixed[code as usize] == name => Some(s.bind(py).clone()),
        _ => Some(PyString::new(py, name)),
    }
}

/// An `EntryRecord` of one entry's view: what `Entry` shows. Its id, parent id, whether parentId is
/// null, type, role, line, offset.
pub fn record<'py>(py: Python<'py>, v: crate::index::EntryView<'_>) -> PyResult<Bound<'py, PyAny>> {
    use crate::index::{ROLE_NAMES, TYPE_NAMES};
    let t = name(py, &TYPES, &TYPE_NAMES, v.type_code, v.type_name);
    let r = name(py, &ROLES, &ROLE_NAMES, v.role_code, v.role);
    let items = [
        v.id.into_pyobject(py)?.into_any(),
        v.parent_id.into_pyobject(py)?.into_any(),
        v.parent_is_null.into_pyobject(py)?.to_owned().into_any(),
        t.into_pyobject(py)?.into_any(),
        r.into_pyobject(py)?.into_any(),
        v.line.into_pyobject(py)?.into_any(),
        v.offset.into_pyobject(py)?.into_any(),
    ];
    named_of(py, &RECORD, "EntryRecord", true, items.into_iter())
}

/// Problem `i` of the index (`p`) as a `Problem`: line 1-based, byte offset, kind, message.
pub fn problem<'py>(
    py: Python<'py>,
    p: Option<crate::index::Problem>,
    i: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let Some(p) = p else {
        return Err(pyo3::exceptions::PyIndexError::new_err(format!(
            "problem index {i} out of range"
        )));
    };
    named(
        py,
        &PROBLEM,
        "Problem",
        true,
        (p.line, p.offset, p.kind, p.message),
    )
}

/// The children table `t` as a `TreeTable` (roots, start, kids). The lists are made from the table
/// itself, with no copy of it first.
pub fn tree_table<'py>(py: Python<'py>, t: &crate::walk::Tree) -> PyResult<Bound<'py, PyAny>> {
    named(py, &TREE, "TreeTable", false, (&t.roots, &t.start, &t.kids))
}

/// A scrubber's finding as a `ScrubFinding`. Line, entry id, JSON pointer, in a key, kind, start,
/// end, hash6.
pub fn finding<'py>(py: Python<'py>, f: crate::scrub::Finding) -> PyResult<Bound<'py, PyAny>> {
    let items = (
        f.line, f.entry_id, f.pointer, f.in_key, f.kind, f.start, f.end, f.hash,
    );
    named(py, &FINDING, "ScrubFinding", true, items)
}

/// A scrubber's counts as a `ScrubStats`. Bytes fed, lines changed, secrets found, replay fields
/// kept or dropped.
pub fn scrub_stats<'py>(
    py: Python<'py>,
    s: &crate::scrub::Scrubber,
) -> PyResult<Bound<'py, PyAny>> {
    let items = (s.bytes_in, s.lines_changed, s.found, s.replay_fields);
    named(py, &SCRUB_STATS, "ScrubStats", true, items)
}
