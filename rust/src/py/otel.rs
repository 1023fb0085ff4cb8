//! `OtelMapper`: one session's OpenTelemetry trace (`crate::otel`), batch by batch.
//!
//! Each call reads what it needs from the `Index` with the GIL held, then maps with the GIL
//! released (the index let go meanwhile), and returns the finished OTLP/JSON request lines.

use super::Index;
use crate::otel::{Content, Mapper, Meta};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The export of one session (see `crate::otel`), fed batch by batch. `feed` each batch of entries,
/// then `finish_chunk` for each of `chunks()`, then `finish_root`; each returns the request lines
/// finished (bytes, each line ending in `\n`). `report()` gives the counts and problems.
#[pyclass(module = "sessiontree._core")]
pub struct OtelMapper {
    m: Mapper,
}

impl OtelMapper {
    /// The lines finished, as bytes (the core's buffer kept for the next ones).
    fn take_output<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let out = PyBytes::new(py, self.m.output());
        self.m.clear_output();
        out
    }
}

#[pymethods]
impl OtelMapper {
    /// `content`: "none", "scrubbed" or "full"; `index`: the session's (its entries are the
    /// trace's; the leaf's branch, Pi's getBranch from the leaf, is the active path: walked here,
    /// so no list of its positions is built; a cycle on it is recorded as a problem, with the
    /// message `SessionCycleError` would have); `dups`: some entry ids repeat.
    #[new]
    #[pyo3(signature = (*, session_id, fallback_id, cwd, parent_session, timestamp, session_name, path, version, content, index, dups))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        session_id: Option<String>,
        fallback_id: String,
        cwd: Option<String>,
        parent_session: Option<String>,
        timestamp: Option<String>,
        session_name: Option<String>,
        path: Option<String>,
        version: String,
        content: &str,
        index: PyRef<'_, Index>,
        dups: bool,
    ) -> PyResult<Self> {
        let content = Content::parse(content)
            .ok_or_else(|| PyValueError::new_err("content must be none, scrubbed or full"))?;
        let meta = Meta {
            session_id,
            fallback_id,
            cwd,
            parent_session,
            timestamp,
            session_name,
            path,
            version,
        };
        index.live()?;
        let ix = &index.st.index;
        let active = match ix.leaf_entry() {
            None => Ok(Vec::new()),
            Some(leaf) => index
                .walked(ix.branch(leaf))
                .map_err(|e| e.value(py).to_string()),
        };
        Ok(OtelMapper {
            m: Mapper::new(meta, content, ix.len(), active, dups),
        })
    }

    /// Maps entries `lo..hi` of `index` (`lines`: their lines after migration, for a legacy
    /// session; None: read from the index).
    #[pyo3(signature = (index, lo, hi, lines=None))]
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        index: PyRef<'py, Index>,
        lo: usize,
        hi: usize,
        lines: Option<Vec<Vec<u8>>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        index.live()?;
        if lines
            .as_ref()
            .is_some_and(|l| l.len() != hi.saturating_sub(lo))
        {
            return Err(PyValueError::new_err("one line per entry"));
        }
        crate::otel::read_batch(&index.st, &mut self.m, lo, hi, lines)?;
        index.done(())?;
        drop(index);
        let m = &mut self.m;
        py.detach(|| m.map_batch());
        Ok(self.take_output(py))
    }

    /// How many `finish_chunk` calls end the trace.
    fn chunks(&self) -> usize {
        self.m.chunks()
    }

    /// The positions of the user messages whose lines `finish_chunk(k)` needs (none when
    /// content is off).
    fn chunk_turns(&self, k: usize) -> Vec<usize> {
        self.m.chunk_turns(k)
    }

    /// Writes the turn and branch spans of chunk `k` (`lines`: the lines of `chunk_turns(k)`
    /// after migration; None: read from the index).
    #[pyo3(signature = (index, k, lines=None))]
    fn finish_chunk<'py>(
        &mut self,
        py: Python<'py>,
        index: PyRef<'py, Index>,
        k: usize,
        lines: Option<Vec<Vec<u8>>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let turns = self.m.chunk_turns(k);
        let lines = match lines {
            Some(l) => l,
            None if turns.is_empty() => Vec::new(),
            None => {
                index.live()?;
                index.st.index.check_all(turns.iter().copied())?;
                let got = crate::otel::read_lines(&index.st, &turns)?;
                index.done(got)?
            }
        };
        drop(index);
        let m = &mut self.m;
        py.detach(|| m.finish_chunk(k, &lines));
        Ok(self.take_output(py))
    }

    /// Writes the root span and the last request line.
    fn finish_root<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        self.m.finish_root();
        self.take_output(py)
    }

    /// `(session_id, trace_id, spans, requests, problems, problems_dropped)`.
    fn report(&self) -> (String, String, u64, u64, Vec<String>, u64) {
        let (sid, trace) = self.m.ids();
        (
            sid.to_string(),
            trace.to_string(),
            self.m.spans,
            self.m.requests,
            self.m.problems.clone(),
            self.m.problems_dropped,
        )
    }
}

/// The trace id (32 hex digits) of the session `session_id`.
#[pyfunction]
pub fn otel_trace_id(session_id: &str) -> String {
    crate::otel::trace_id_of(session_id)
}

/// The span id (16 hex digits) of `parts` in the session `session_id`. `parts`: an entry id, then
/// "tool" and a call id, ...
#[pyfunction]
pub fn otel_span_id(session_id: &str, parts: Vec<String>) -> String {
    let p: Vec<&str> = parts.iter().map(String::as_str).collect();
    crate::otel::hex(&crate::otel::span_id_of(session_id, &p))
}
