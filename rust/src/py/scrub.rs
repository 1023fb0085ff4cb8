//! `Scrubber`: the secret scrubber of `crate::scrub` over a byte stream.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The secret scrubber of `crate::scrub` over a byte stream. `feed` returns the scrubbed whole
/// lines, `finish` the last line without `\n`. Values never cross this boundary.
#[pyclass(module = "sessiontree._core")]
pub struct Scrubber {
    inner: crate::scrub::Scrubber,
}

#[pymethods]
impl Scrubber {
    /// `replay`: "keep" or "drop"; `header`: also search the header's cwd and parentSession;
    /// `record`: keep the findings (else only count them).
    #[new]
    #[pyo3(signature = (header=false, replay="keep", record=true))]
    fn new(header: bool, replay: &str, record: bool) -> PyResult<Self> {
        let replay = match replay {
            "keep" => crate::scrub::Replay::Keep,
            "drop" => crate::scrub::Replay::Drop,
            _ => return Err(PyValueError::new_err("replay must be 'keep' or 'drop'")),
        };
        let mut inner = crate::scrub::Scrubber::new(crate::scrub::Options { header, replay });
        inner.record = record;
        Ok(Scrubber { inner })
    }

    /// The scrubbed bytes of the whole lines now complete (GIL released).
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> Bound<'py, PyBytes> {
        let inner = &mut self.inner;
        let out = py.detach(|| {
            let mut out = Vec::with_capacity(data.len() + 64);
            inner.feed(data, &mut out);
            out
        });
        PyBytes::new(py, &out)
    }

    /// The last line when the input did not end with a newline (b"" otherwise).
    fn finish<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut out = Vec::new();
        let inner = &mut self.inner;
        py.detach(|| inner.finish(&mut out));
        PyBytes::new(py, &out)
    }

    /// The findings so far, removed from the scrubber: `ScrubFinding`s.
    fn take_findings<'py>(&mut self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let found = std::mem::take(&mut self.inner.findings);
        found
            .into_iter()
            .map(|f| super::results::finding(py, f))
            .collect()
    }

    /// A `ScrubStats`: bytes fed, lines changed, secrets found, replay fields kept or dropped.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::results::scrub_stats(py, &self.inner)
    }

    /// The kinds the rules detect, in table order.
    #[staticmethod]
    fn kinds() -> Vec<&'static str> {
        crate::scrub::kinds()
    }
}
