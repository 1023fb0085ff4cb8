//! The PyO3 binding: type conversion, error mapping and GIL release only.
//!
//! `Index`'s methods are split by concern, one `#[pymethods]` block each (PyO3's
//! `multiple-pymethods`), mirroring the facade's `session/` package: this file holds the
//! class, its construction (`open`, `from_bytes`, `in_memory`) and the file it covers;
//! `py/index_reads.rs` the reads and batch views (`session/reads.py`, `session/views.py`),
//! `py/index_walks.rs` the walks over the tree, `py/index_writes.rs` the write path
//! (`session/writes.py`). Each method is one call of the core. The rest of `py/`:
//! `errors.rs` (the core's errors as the package's exceptions, so that they map with `?`),
//! `results.rs` (the named tuples), `functions.rs` (the module's functions), `export.rs` (the
//! HTML export's calls) and `tree.rs` (RPC `get_tree`'s text), module functions taking an
//! `Index`; `fleet.rs` (the fleet's columns), `scrub.rs` (`Scrubber`), `otel.rs` (`OtelMapper`). Entries are read
//! through the core's views (`crate::index::view`, `crate::reads`), never from the records
//! themselves.

mod convert;
mod errors;
mod export;
mod fleet;
mod functions;
mod index_reads;
mod index_walks;
mod index_writes;
mod otel;
mod results;
mod scrub;
mod search;
mod tree;

use crate::index::NONE;
use crate::store::Store;
use crate::walk::{SpanMemo, TreeCache};
use pyo3::prelude::*;
use std::path::PathBuf;

/// The index over one session's lines. Indices are entry positions in file order.
///
/// Threads: no method releases the GIL while it holds the index (only `open`, which has no
/// index yet, and the fsync of "fsync" mode, on a duplicate descriptor after the index is let
/// go), so a session shared by threads never fails with "Already borrowed".
#[pyclass(module = "sessiontree._core")]
pub struct Index {
    st: Store,
    tree: TreeCache,
    span_memo: SpanMemo,
    rng: crate::append::IdRng,
    /// what the saved index did when this index was opened
    cache: crate::saved::CacheState,
}

impl Index {
    fn new(st: Store, cache: crate::saved::CacheState) -> Self {
        Index {
            st,
            tree: TreeCache::default(),
            span_memo: SpanMemo::default(),
            rng: crate::append::IdRng::seeded(),
            cache,
        }
    }
    /// Raises SessionFileChangedError once a refresh found the file rewritten, shrunk or
    /// changed under its scan (the store is poisoned: no answer may mix two files), then
    /// checks the entry position `i`.
    fn check(&self, i: usize) -> PyResult<()> {
        self.live()?;
        Ok(self.st.index.check_pos(i)?)
    }
    /// Raises SessionFileChangedError once the store is poisoned (see `check`).
    fn live(&self) -> PyResult<()> {
        Ok(self.st.check_live()?)
    }
    fn opt(i: u32) -> Option<u32> {
        (i != NONE).then_some(i)
    }
    /// A walk's result, its cycle as `SessionCycleError` (the ids resolved); checked as
    /// [`Index::done`] checks.
    fn walked<T>(&self, r: Result<T, crate::walk::Cycle>) -> PyResult<T> {
        let r = r.map_err(|c| self.st.index.cycle_error(c).into());
        self.live()?;
        r
    }
    /// `v`, an answer built from the index, unless a read made while building it found the
    /// saved index unusable (a damaged block the cold scan could not stand in for: its records
    /// read as placeholders): then SessionFileChangedError, as every later call raises. So no
    /// answer is ever built from placeholders.
    fn done<T>(&self, v: T) -> PyResult<T> {
        self.live()?;
        Ok(v)
    }
}

#[pymethods]
impl Index {
    /// Scans a session file (read through a bounded buffer; the GIL is released while scanning).
    /// With `cache_dir`, through the saved index there (loaded when it passes its checks, saved
    /// after a cold scan of a file of at least `cache_min` bytes); see `cache_state`.
    /// After a save the folder's saved indexes of files gone or rewritten are evicted, then the
    /// least recently used past `cache_max` bytes (at most once per `cache_evict_s` seconds).
    /// With `row_sums`, a cold scan also sums the stats row's usage as it parses each line (the
    /// fleet's row then reads no line again; see `rows::RowSums`).
    #[staticmethod]
    #[pyo3(signature = (path, parallel = true, cache_dir = None, cache_min = 1048576, cache_max = 1073741824, cache_evict_s = 10, row_sums = false))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        parallel: bool,
        cache_dir: Option<PathBuf>,
        cache_min: u64,
        cache_max: u64,
        cache_evict_s: u64,
        row_sums: bool,
    ) -> PyResult<Self> {
        let cfg = cache_dir.map(|dir| crate::saved::CacheCfg {
            dir,
            min_bytes: cache_min,
            max_bytes: cache_max,
            evict_every_s: cache_evict_s,
        });
        let (st, cache) =
            py.detach(|| Store::open_cached_with(&path, parallel, cfg.as_ref(), row_sums))?;
        Ok(Index::new(st, cache))
    }

    /// What the saved index did at open: `("off", 0, "")`, `("warm", covered_bytes, "")`,
    /// `("saved", 0, why_cold)` or `("cold", 0, why_cold)`. Once a block of the saved index
    /// was found damaged when read (its records then came from a cold scan): `("cold", 0,
    /// why)`.
    fn cache_state(&self) -> (&'static str, u64, &str) {
        match self.st.index.saved_damage() {
            Some(why) => ("cold", 0, why),
            None => self.cache.parts(),
        }
    }

    /// Blocks read from the saved index so far (records and the by-id map), and how many it
    /// has ((0, 0) when the index was not loaded from one).
    fn cache_blocks_read(&self) -> (usize, usize) {
        self.st.index.saved_blocks_read()
    }

    /// A read-only index over a copy of the bytes of `data`.
    ///
    /// `data`: bytes, bytearray, memoryview, mmap: anything with the buffer protocol. Scanned with
    /// the GIL released, the same index `open` builds from a file holding these bytes. Appends
    /// raise SessionReadOnlyError.
    /// `row_sums`: as in `open`.
    #[staticmethod]
    #[pyo3(signature = (data, parallel = true, row_sums = false))]
    fn from_bytes(
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        parallel: bool,
        row_sums: bool,
    ) -> PyResult<Self> {
        let buf = pyo3::buffer::PyBuffer::<u8>::get(data)?;
        let bytes = buf.to_vec(py)?;
        drop(buf);
        let st = py.detach(|| Store::from_bytes_with(bytes, parallel, row_sums));
        Ok(Index::new(st, crate::saved::CacheState::Off))
    }

    /// An empty in-memory index (for sessions that are never written to a file).
    #[staticmethod]
    fn in_memory() -> Self {
        Index::new(Store::in_memory(), crate::saved::CacheState::Off)
    }

    /// (st_dev, st_ino) of the file opened (None in memory): what a rewrite checks the path
    /// still names.
    fn file_identity(&self) -> Option<(u64, u64)> {
        self.st.identity()
    }

    /// How many times a refresh found the file changed (size, mtime or ctime) with the bytes
    /// it checks unchanged (`Session.state_key`).
    #[getter]
    fn file_changes(&self) -> u64 {
        self.st.file_changes
    }

    /// Bytes known (the file length as of the last scan or append).
    #[getter]
    fn end(&self) -> u64 {
        self.st.end()
    }
    fn ends_without_newline(&self) -> PyResult<bool> {
        self.done(self.st.ends_without_newline()?)
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(functions::header_probe, m)?)?;
    m.add_function(wrap_pyfunction!(convert::convert_detect, m)?)?;
    m.add_function(wrap_pyfunction!(convert::convert_file, m)?)?;
    m.add_function(wrap_pyfunction!(convert::convert_detect_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(convert::convert_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(convert::convert_bytes_all, m)?)?;
    m.add_function(wrap_pyfunction!(functions::index_cache_clear, m)?)?;
    m.add_function(wrap_pyfunction!(functions::index_cache_census, m)?)?;
    m.add_function(wrap_pyfunction!(functions::index_cache_evict, m)?)?;
    m.add("INDEX_CACHE_MAX_BYTES", crate::saved::DEFAULT_MAX_BYTES)?;
    m.add_function(wrap_pyfunction!(functions::index_block_cache, m)?)?;
    m.add(
        "INDEX_BLOCK_CACHE_BYTES",
        crate::index::DEFAULT_BLOCK_CACHE_BYTES,
    )?;
    m.add_function(wrap_pyfunction!(fleet::fleet_rows, m)?)?;
    let names = pyo3::types::PyTuple::new(m.py(), crate::columns::ENTRY_COLUMNS)?;
    m.add("FLEET_ENTRY_COLUMNS", names)?;
    m.add_function(wrap_pyfunction!(export::html_digest, m)?)?;
    m.add_function(wrap_pyfunction!(export::html_segment_bounds, m)?)?;
    m.add_function(wrap_pyfunction!(export::html_write_index, m)?)?;
    m.add_function(wrap_pyfunction!(export::html_write_segments, m)?)?;
    m.add_function(wrap_pyfunction!(tree::stringify_lines, m)?)?;
    m.add_function(wrap_pyfunction!(tree::tree_json, m)?)?;
    m.add_function(wrap_pyfunction!(search::search_store, m)?)?;
    m.add_function(wrap_pyfunction!(search::search_match, m)?)?;
    m.add_function(wrap_pyfunction!(search::search_shard_stats, m)?)?;
    m.add_function(wrap_pyfunction!(search::search_stats_sum, m)?)?;
    m.add_function(wrap_pyfunction!(search::search_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(search::search_extract, m)?)?;
    m.add_class::<Index>()?;
    m.add_class::<scrub::Scrubber>()?;
    m.add_class::<otel::OtelMapper>()?;
    m.add_function(wrap_pyfunction!(otel::otel_trace_id, m)?)?;
    m.add_function(wrap_pyfunction!(otel::otel_span_id, m)?)?;
    m.add_function(wrap_pyfunction!(functions::date_parse, m)?)?;
    m.add_function(wrap_pyfunction!(functions::iso_now, m)?)?;
    m.add_function(wrap_pyfunction!(functions::json_check, m)?)?;
    m.add_function(wrap_pyfunction!(functions::js_text, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    functions::add_names(m)?;
    Ok(())
}
