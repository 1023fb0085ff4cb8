//! Full-text search over a store of session files, with each hit's place in its tree.
//!
//! * `tokenize.rs`: the one tokenizer (index, query, snippets);
//! * `extract.rs`: what of an entry line is searchable;
//! * `query.rs`: the query language, and the matcher every hit is re-checked with;
//! * `store_index.rs`: the Tantivy index of a store, kept in the cache folder and checked
//!   against every file before a query (appended: the new lines indexed; rewritten or
//!   replaced: indexed again; gone: evicted; damaged: rebuilt);
//! * `run.rs`: a query's run: ranking (BM25, then the newer entry, the file's name, the
//!   offset), hits read back from the session files through their offsets and re-verified,
//!   snippets, branch states;
//! * `shard.rs`: a store searched as shards (one index each), ranked with the store's BM25
//!   statistics so the merged pages equal one index's.
//!
//! The index stores no text: per entry line, the file's key, the line's byte offset, length
//! and hash, its timestamp, and its type, role and tool names as filter terms. A hit's text is
//! read from the session file; a line no longer at its offset, or changed, or no longer
//! matching, is never returned. Branch state and labels come from the session's index
//! (`crate::index`) at query time, so a new leaf or compaction changes them without indexing.

pub mod extract;
pub mod query;
mod run;
pub mod shard;
mod store_index;
pub mod tokenize;

pub use query::{parse, Query, QueryError};
pub use run::{search, search_scored};
pub use shard::{shard_stats, Stats};
pub use store_index::{index_dir, StoreIndex};

use std::path::PathBuf;

/// Where a hit stands in its session's tree at query time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchState {
    /// on the path from the leaf, in the context Pi builds (`buildSessionContext`)
    Active,
    /// on the path from the leaf, before the latest compaction's first kept entry
    Compacted,
    /// on a branch the leaf left
    Abandoned,
}

impl BranchState {
    pub fn name(self) -> &'static str {
        match self {
            BranchState::Active => "active",
            BranchState::Compacted => "compacted",
            BranchState::Abandoned => "abandoned",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "active" => Some(BranchState::Active),
            "compacted" => Some(BranchState::Compacted),
            "abandoned" => Some(BranchState::Abandoned),
            _ => None,
        }
    }
}

/// Restrictions on hits. Strings match exactly (the session id, the header's `cwd`, a label
/// on the hit's path, the entry type, the message role, a tool name); `since`/`until` are ms
/// since the epoch, inclusive (entries without a valid timestamp never pass either).
#[derive(Debug, Clone, Default)]
pub struct Filters {
    pub role: Option<String>,
    pub etype: Option<String>,
    pub tool: Option<String>,
    pub branch_state: Option<BranchState>,
    pub session: Option<String>,
    pub cwd: Option<String>,
    pub label: Option<String>,
    pub since: Option<i64>,
    pub until: Option<i64>,
}

/// Where the index lives, and the saved-index cache the hits' sessions open through (`saved`).
/// `dir` (created 0700 inside the cache folder) or, None, in memory for this query only.
#[derive(Debug, Clone, Default)]
pub struct Place {
    pub dir: Option<PathBuf>,
    pub saved: Option<crate::saved::CacheCfg>,
}

/// One hit. `snippet` is at most [`SNIPPET_CHARS`] characters of the entry's searchable text
/// (newlines as spaces) around the first match; `spans` the matches in it as character
/// offsets `[start, end)`. `ts` in ms since the epoch. `fork_point` (the nearest ancestor on
/// the active path) and `summary_id` (the branch summary covering the entry) for abandoned
/// hits only; `labels` the labels on the entry's path, root first.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// the session file (its name need not be UTF-8)
    pub path: PathBuf,
    pub session_id: Option<String>,
    pub entry_id: Option<String>,
    pub etype: String,
    pub role: Option<String>,
    pub tool: Option<String>,
    pub ts: Option<i64>,
    pub line: u32,
    pub offset: u64,
    pub snippet: String,
    pub spans: Vec<(usize, usize)>,
    pub score: f32,
    pub state: BranchState,
    pub fork_point: Option<String>,
    pub summary_id: Option<String>,
    pub labels: Vec<String>,
    /// the file's format: `pi`, `claude-code` or `codex`.
    ///
    /// The latter two are searched through their conversion to Pi; `line` and `offset` then
    /// name the source line the entry came from.
    pub source_format: &'static str,
    /// a converted entry's source record id (Claude Code's `uuid`...), as `convert` keeps it
    pub source_id: Option<String>,
}

/// The longest snippet, in characters.
pub const SNIPPET_CHARS: usize = 160;

/// A query's answer: the page of hits, the number of hits, the next page's offset, the time. The
/// offset is None when this was the last page; the time (ms) includes indexing.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub hits: Vec<Hit>,
    pub total: usize,
    pub next_offset: Option<usize>,
    pub took_ms: f64,
}

/// Why a search failed.
#[derive(Debug)]
pub enum SearchError {
    Query(QueryError),
    Io(std::io::Error),
    /// the index could not be opened or written even after a rebuild
    Index(String),
}

impl std::fmt::Display for SearchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchError::Query(e) => e.fmt(f),
            SearchError::Io(e) => write!(f, "search index: {e}"),
            SearchError::Index(e) => write!(f, "search index: {e}"),
        }
    }
}
impl std::error::Error for SearchError {}

impl From<QueryError> for SearchError {
    fn from(e: QueryError) -> Self {
        SearchError::Query(e)
    }
}
impl From<std::io::Error> for SearchError {
    fn from(e: std::io::Error) -> Self {
        SearchError::Io(e)
    }
}
impl From<tantivy::TantivyError> for SearchError {
    fn from(e: tantivy::TantivyError) -> Self {
        SearchError::Index(e.to_string())
    }
}
