//! Fleet rows: one batch call per session.
//!
//! The core's [`crate::columns`] as a dict, the per-entry columns as Arrow buffers.

use super::Index;
use crate::columns::{ArrowCol, SessionColumns, ENTRY_COLUMNS};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// What `sessiontree.fleet` needs of a session beyond the index getters, as a dict.
///
/// [`crate::columns::session_columns`]: `undecided` (entries the Python rules
/// decide), `totals` / `summary_totals` (usage sums: input, output, cacheRead, cacheWrite,
/// total, cost; None when undecided), `tool_calls`, `last_activity` (ms or None) /
/// `last_activity_undecided` (an entry index or None), `path_length` (entries root to `leaf`;
/// None: a cycle), `context`, `messages`, `messages_by_role`, `compactions`,
/// `branch_summaries`. With `per_entry`, also `n`, `columns` (the per-entry columns named by
/// `columns`, in that order, default every one the core computes: `FLEET_ENTRY_COLUMNS`;
/// strings `(int32 offsets, data, validity or None, null count)`, numbers `(values, b"",
/// validity or None, null count)`; and the `on_active_path` bits) and `tokens_undecided`.
/// `labels`: (entry id, label) pairs for the `label` column. The GIL is held (the store is
/// not shared across threads); the line scans run on every core. Raises ValueError for a
/// column the core does not compute.
#[pyfunction]
#[pyo3(signature = (index, leaf, per_entry, labels = Vec::new(), columns = None))]
pub fn fleet_rows<'py>(
    py: Python<'py>,
    index: PyRef<'py, Index>,
    leaf: Option<usize>,
    per_entry: bool,
    labels: Vec<(String, String)>,
    columns: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyDict>> {
    let names = columns.unwrap_or_else(|| ENTRY_COLUMNS.map(String::from).to_vec());
    let want = per_entry.then_some(&names[..]);
    let c = crate::columns::session_columns(&index.st, leaf, want, &labels)?;
    index.done(())?;
    to_dict(py, c)
}

fn to_dict(py: Python<'_>, c: SessionColumns) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("undecided", c.undecided)?;
    out.set_item("totals", c.totals)?;
    out.set_item("summary_totals", c.summary_totals)?;
    out.set_item("tool_calls", c.tool_calls)?;
    out.set_item("last_activity", c.last_activity)?;
    out.set_item("last_activity_undecided", c.last_activity_undecided)?;
    out.set_item("path_length", c.path_length)?;
    out.set_item("context", c.context)?;
    out.set_item("messages", c.counts.messages)?;
    out.set_item("messages_by_role", c.counts.roles)?;
    out.set_item("compactions", c.counts.compactions)?;
    out.set_item("branch_summaries", c.counts.branch_summaries)?;
    let Some(t) = c.entries else { return Ok(out) };
    let entries = PyDict::new(py);
    for (name, col) in &t.columns {
        entries.set_item(name, buffers(py, col))?;
    }
    entries.set_item("on_active_path", PyBytes::new(py, &t.on_active_path))?;
    out.set_item("n", t.n)?;
    out.set_item("columns", entries)?;
    out.set_item("tokens_undecided", t.tokens_undecided)?;
    Ok(out)
}

/// (values or offsets, data, validity or None when no value is null, null count)
fn buffers<'py>(
    py: Python<'py>,
    c: &ArrowCol,
) -> (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
    usize,
) {
    let valid = c.validity().map(|v| PyBytes::new(py, v));
    (
        PyBytes::new(py, &c.values),
        PyBytes::new(py, &c.data),
        valid,
        c.nulls,
    )
}
