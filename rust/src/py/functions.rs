//! The module's functions: the date rule, the clock, `JSON.stringify`'s text, the line checks. The
//! line checks are the JSON check of a line and the header probe.

use super::results::{named, PROBE};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// JavaScript `Date.parse(s)` in epoch milliseconds, NaN when invalid.
///
/// `new Date(s).getTime()` of a string: the one date rule, also used by the index for sibling
/// order. A string that is
/// not valid UTF-8 (a lone surrogate) is never a date.
#[pyfunction]
pub fn date_parse(s: &Bound<'_, PyString>) -> f64 {
    s.to_str().map(crate::jsdate::parse_iso).unwrap_or(f64::NAN)
}

/// Now as JavaScript `new Date().toISOString()` (ms precision, `Z`).
///
/// The clock of appended entries, also used for headers and entries built in Python.
#[pyfunction]
pub fn iso_now() -> String {
    crate::append::iso_from_ms(crate::append::now_ms())
}

/// Compact JSON `json` (orjson's) as `JSON.stringify` writes it.
///
/// The same object when nothing differs, new bytes with JavaScript's number spelling, or None
/// when an object has an array-index key (JavaScript enumerates those first: the exact Python
/// writer orders them).
#[pyfunction]
pub fn js_text<'py>(json: &Bound<'py, PyBytes>) -> Option<Bound<'py, PyBytes>> {
    match crate::jstext::js_text(json.as_bytes()) {
        crate::jstext::JsText::Same => Some(json.clone()),
        crate::jstext::JsText::Rewritten(v) => Some(PyBytes::new(json.py(), &v)),
        crate::jstext::JsText::NeedsKeyOrder => None,
    }
}

/// Whether `line` is one JSON value as `JSON.parse` accepts it. Linear, GIL released.
///
/// `(depth, None)` when it is (depth: container nesting, 0 for a scalar); `(byte position,
/// reason)` when it is not.
#[pyfunction]
pub fn json_check(py: Python<'_>, line: &[u8]) -> (usize, Option<&'static str>) {
    match py.detach(|| crate::json::check_value(line)) {
        Ok(depth) => (depth, None),
        Err(e) => (e.pos, Some(e.msg)),
    }
}

/// The header of a file from its first bytes `buf` (`eof`: that is the whole file).
///
/// By the rule opening applies: `("more", None, 0, 0)` (read more), `("none", None, 0, 0)` (no JSON
/// value), `("valid", None, offset, len)` or `("invalid", reason, 0, 0)`.
#[pyfunction]
pub fn header_probe<'py>(py: Python<'py>, buf: &[u8], eof: bool) -> PyResult<Bound<'py, PyAny>> {
    use crate::scan::HeaderProbe;
    let items = match py.detach(|| crate::scan::probe_header(buf, eof)) {
        HeaderProbe::NeedMore => ("more", None, 0, 0),
        HeaderProbe::NoValue => ("none", None, 0, 0),
        HeaderProbe::Valid { offset, len } => ("valid", None, offset, len),
        HeaderProbe::Invalid(why) => ("invalid", Some(why), 0, 0),
    };
    named(py, &PROBE, "HeaderProbe", true, items)
}

/// Adds the core's fixed names to the module as constants.
///
/// `TYPE_NAMES` and `ROLE_NAMES`: the
/// entry types and message roles with fixed codes in code order (`index/codes.rs`; code 0,
/// `""`, is "not a string"), each with its row in the projection `entry_kind.rs`; and
/// `PROBLEM_KINDS`, the scanner's problem kinds (`index/problems.rs`). `entries.py` re-exports
/// them for the registry's tests and the fleet's columns.
pub fn add_names(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use pyo3::types::PyTuple;
    let py = m.py();
    m.add("TYPE_NAMES", PyTuple::new(py, crate::index::TYPE_NAMES)?)?;
    m.add("ROLE_NAMES", PyTuple::new(py, crate::index::ROLE_NAMES)?)?;
    m.add(
        "PROBLEM_KINDS",
        PyTuple::new(py, crate::index::Problems::kinds())?,
    )?;
    Ok(())
}

/// Removes our saved indexes (and leftover temp files) from the cache folder `dir`. Only files this
/// core would load, and nothing when the folder is a symlink, another user's or writable by others.
/// Returns how many files were removed.
#[pyfunction]
pub fn index_cache_clear(py: Python<'_>, dir: std::path::PathBuf) -> usize {
    py.detach(|| crate::saved::clear(&dir))
}

/// `(saved indexes, their bytes, temp files)` of ours in the cache folder `dir`. None when the
/// folder is missing, a symlink, another user's or writable by others.
#[pyfunction]
pub fn index_cache_census(py: Python<'_>, dir: std::path::PathBuf) -> Option<(usize, u64, usize)> {
    py.detach(|| crate::saved::census(&dir))
}

/// Evicts stale and least recently used saved indexes from the cache folder `dir`. First those of
/// files gone or rewritten, then the least recently used past `max_bytes`; returns how many files
/// were removed (0 when the folder is refused).
#[pyfunction]
pub fn index_cache_evict(py: Python<'_>, dir: std::path::PathBuf, max_bytes: u64) -> usize {
    py.detach(|| match crate::saved::open_dir(&dir, false) {
        Ok(d) => crate::saved::evict(&d, max_bytes, None),
        Err(_) => 0,
    })
}

/// The process's cache of saved-index blocks (`index::BlockCache`): (bytes held, budget).
///
/// Sets the byte budget first when `budget` is given; blocks past a smaller budget go as the
/// next blocks are read.
#[pyfunction]
#[pyo3(signature = (budget = None))]
pub fn index_block_cache(budget: Option<usize>) -> (usize, usize) {
    let c = crate::index::block_cache();
    if let Some(b) = budget {
        c.set_budget(b);
    }
    (c.held(), c.budget())
}
