//! Fleet rows (issue 18; `rows.rs`): one batch call per session, columns as Arrow buffers.

use super::Index;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

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
pub fn fleet_rows<'py>(
    py: Python<'py>,
    index: PyRef<'py, Index>,
    leaf: Option<usize>,
    per_entry: bool,
    labels: Vec<(String, String)>,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    use pyo3::types::PyDict;
    let st = &index.st;
    st.check_live()?;
    let n = st.index.recs.len();
    if let Some(l) = leaf {
        index.check(l)?;
    }
    let rows = crate::rows::session_rows(st, per_entry)?;
    let last = crate::rows::last_activity(st)?;
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
                (st.entry_type(i)?, st.entry_role(i)?)
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
