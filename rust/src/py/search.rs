//! Search over a store (`crate::search`): arguments in, hits out as tuples, the GIL released.

use super::errors::os_err;
use crate::search::{BranchState, Filters, Hit, Place, SearchError};
use pyo3::prelude::*;
use std::path::PathBuf;

pyo3::import_exception!(sessiontree.errors, SearchQueryError);
pyo3::import_exception!(sessiontree.errors, SearchIndexError);

impl From<SearchError> for PyErr {
    fn from(e: SearchError) -> PyErr {
        match &e {
            SearchError::Query(q) => SearchQueryError::new_err(q.to_string()),
            SearchError::Io(io) => os_err(io, "search index: "),
            SearchError::Index(_) => SearchIndexError::new_err(e.to_string()),
        }
    }
}

/// One hit as two tuples (PyO3 converts tuples of at most 12). (path, session_id, entry_id, type,
/// role, tool, ts_ms, line, offset) and (snippet, spans, score, branch_state, fork_point,
/// summary_id, labels, source_format, source_id). The path is a str, decoded as `os.fsdecode` decodes (a name that is not
/// UTF-8 keeps its bytes as surrogates).
pub type HitTuple = (
    (
        std::ffi::OsString,
        Option<String>,
        Option<String>,
        String,
        Option<String>,
        Option<String>,
        Option<i64>,
        u32,
        u64,
    ),
    (
        String,
        Vec<(usize, usize)>,
        f32,
        &'static str,
        Option<String>,
        Option<String>,
        Vec<String>,
        &'static str,
        Option<String>,
    ),
);

fn tuple(h: Hit) -> HitTuple {
    (
        (
            h.path.into_os_string(),
            h.session_id,
            h.entry_id,
            h.etype,
            h.role,
            h.tool,
            h.ts,
            h.line,
            h.offset,
        ),
        (
            h.snippet,
            h.spans,
            h.score,
            h.state.name(),
            h.fork_point,
            h.summary_id,
            h.labels,
            h.source_format,
            h.source_id,
        ),
    )
}

/// Searches the session files `files` (absolute paths) for `query`. `store_key` names the
/// store: a str or path, encoded as `os.fsencode` encodes it, so names that are not UTF-8 work.
/// The index lives under `cache_dir` (None: in memory, for this call); sessions open through
/// the saved indexes there (`cache_min`, `cache_max`, `cache_evict_s` as for `Index.open`). Filters as `crate::search::Filters` (`since`/`until`: ms since the epoch).
/// `stats`: the JSON of a store's BM25 statistics (`search_shard_stats`'s answers summed) to
/// rank with, when these files are one shard of it; None: this index's own.
/// Returns (hits, total, next_offset, took_ms). Raises SearchQueryError for a bad query,
/// SearchIndexError when the index cannot be written even after a rebuild or `stats` does not
/// parse, OSError for the cache folder.
#[pyfunction]
#[pyo3(signature = (query, files, store_key, cache_dir=None, cache_min=1048576, cache_max=1073741824, cache_evict_s=10, limit=20, offset=0, role=None, etype=None, tool=None, branch_state=None, session=None, cwd=None, label=None, since=None, until=None, stats=None))]
#[allow(clippy::too_many_arguments)]
pub fn search_store(
    py: Python<'_>,
    query: &str,
    files: Vec<PathBuf>,
    store_key: PathBuf,
    cache_dir: Option<PathBuf>,
    cache_min: u64,
    cache_max: u64,
    cache_evict_s: u64,
    limit: usize,
    offset: usize,
    role: Option<String>,
    etype: Option<String>,
    tool: Option<String>,
    branch_state: Option<String>,
    session: Option<String>,
    cwd: Option<String>,
    label: Option<String>,
    since: Option<i64>,
    until: Option<i64>,
    stats: Option<&str>,
) -> PyResult<(Vec<HitTuple>, usize, Option<usize>, f64)> {
    let stats = stats.map(parse_stats).transpose()?;
    let branch_state = match branch_state.as_deref() {
        None => None,
        Some(s) => Some(BranchState::from_name(s).ok_or_else(|| {
            super::errors::SessionArgumentError::new_err(format!(
                "branch_state must be active, compacted or abandoned, not {s:?}"
            ))
        })?),
    };
    let filters = Filters {
        role,
        etype,
        tool,
        branch_state,
        session,
        cwd,
        label,
        since,
        until,
    };
    let place = place(cache_dir, cache_min, cache_max, cache_evict_s);
    let query = query.to_string();
    let store_key = {
        use std::os::unix::ffi::OsStringExt;
        store_key.into_os_string().into_vec()
    };
    let out = py.detach(move || {
        crate::search::search_scored(
            &place,
            &store_key,
            &files,
            &query,
            &filters,
            limit,
            offset,
            stats.as_ref(),
        )
    })?;
    Ok((
        out.hits.into_iter().map(tuple).collect(),
        out.total,
        out.next_offset,
        out.took_ms,
    ))
}

fn place(cache_dir: Option<PathBuf>, min: u64, max: u64, evict_s: u64) -> Place {
    Place {
        saved: cache_dir.as_ref().map(|dir| crate::saved::CacheCfg {
            dir: dir.clone(),
            min_bytes: min,
            max_bytes: max,
            evict_every_s: evict_s,
        }),
        dir: cache_dir,
    }
}

fn parse_stats(s: &str) -> PyResult<crate::search::Stats> {
    serde_json::from_str(s)
        .map_err(|e| SearchIndexError::new_err(format!("search statistics: {e}")))
}

/// One shard's index brought up to date, and its BM25 statistics as JSON.
///
/// The shard: `files`, its index named `store_key`, as `search_store`'s. The statistics of
/// `query`'s terms: `{"docs", "tokens", "terms": {term: documents}}`, to be summed over the
/// shards (`search_stats_sum`) and given to each shard's `search_store(stats=...)`. Raises as
/// `search_store`.
#[pyfunction]
#[pyo3(signature = (query, files, store_key, cache_dir=None, cache_min=1048576, cache_max=1073741824, cache_evict_s=10))]
#[allow(clippy::too_many_arguments)]
pub fn search_shard_stats(
    py: Python<'_>,
    query: &str,
    files: Vec<PathBuf>,
    store_key: PathBuf,
    cache_dir: Option<PathBuf>,
    cache_min: u64,
    cache_max: u64,
    cache_evict_s: u64,
) -> PyResult<String> {
    let place = place(cache_dir, cache_min, cache_max, cache_evict_s);
    let query = query.to_string();
    let store_key = {
        use std::os::unix::ffi::OsStringExt;
        store_key.into_os_string().into_vec()
    };
    let st = py.detach(move || crate::search::shard_stats(&place, &store_key, &files, &query))?;
    serde_json::to_string(&st).map_err(|e| SearchIndexError::new_err(e.to_string()))
}

/// The sum of shards' statistics (JSON texts from `search_shard_stats`), as JSON. Raises
/// SearchIndexError for one that does not parse.
#[pyfunction]
pub fn search_stats_sum(parts: Vec<String>) -> PyResult<String> {
    let mut sum = crate::search::Stats::default();
    for p in &parts {
        sum.add(&parse_stats(p)?);
    }
    serde_json::to_string(&sum).map_err(|e| SearchIndexError::new_err(e.to_string()))
}

/// The byte-free matcher for one text: the character spans of `query`'s matches in `text`. None
/// when `text` does not match the whole query (the rule every hit is checked with). Raises
/// SearchQueryError for a bad query.
#[pyfunction]
pub fn search_match(query: &str, text: &str) -> PyResult<Option<Vec<(usize, usize)>>> {
    let q = crate::search::parse(query).map_err(SearchError::Query)?;
    let tp = crate::search::query::TextParts::new(text);
    if !q.matches(&tp) {
        return Ok(None);
    }
    let starts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let ci = |b: usize| starts.partition_point(|&x| x < b);
    Ok(Some(
        q.spans(&tp)
            .into_iter()
            .map(|(a, b)| (ci(a), ci(b)))
            .collect(),
    ))
}

/// The tokens of `text` as the index sees them: (lowercased text, position, whole compound).
#[pyfunction]
pub fn search_tokens(text: &str) -> Vec<(String, usize, bool)> {
    let mut v = Vec::new();
    crate::search::tokenize::tokens(text, true, |t| v.push((t.text, t.pos, t.whole)));
    v
}

/// The searchable text of one entry line as the index sees it (`crate::search::extract`). None for
/// a line that is not an entry.
#[pyfunction]
pub fn search_extract(line: &[u8]) -> Option<String> {
    crate::search::extract::extract(line).map(|x| x.text)
}
