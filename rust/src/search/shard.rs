//! A store searched as shards, one index each, ranked with the shards' summed statistics.
//!
//! BM25 scores a document with its index's statistics (the number of documents, of tokens in
//! the text field, and of documents holding each query term). Shards searched with their own
//! would score one entry differently from one index over the whole store, and their merged
//! top hits would not be the store's. So a sharded query runs in two steps: each shard brings
//! its index up to date with its files and answers [`shard_stats`] for the query; the sums
//! ([`Stats::add`]) go back to every shard, which ranks with them
//! ([`super::run::search_scored`]). With the sums, an entry scores bit for bit what one index
//! holding the same documents gives it, and the tie-break ([`super::run`]'s order: the newer
//! entry, then the file name's bytes, then the offset) needs nothing from other shards, so the
//! shards' pages merged by (score, time, name, offset) are the one index's page.
//!
//! The statistics count the documents Tantivy counts: a deleted document still counts until
//! its segment is merged (as in one index), so two indexes of the same files agree exactly
//! when neither holds deletions not yet merged away.

use super::query::parse;
use super::run::{build, with_synced, AllStats};
use super::{Filters, Place, SearchError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use tantivy::query::{Bm25StatisticsProvider, Query};
use tantivy::schema::Field;
use tantivy::Term;

/// The BM25 statistics of a query over some indexes.
///
/// `docs` documents, `tokens` tokens in the text field, and per query term (its text), how
/// many documents hold it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub docs: u64,
    pub tokens: u64,
    pub terms: BTreeMap<String, u64>,
}

impl Stats {
    /// Adds another shard's statistics (of the same query).
    pub fn add(&mut self, o: &Stats) {
        self.docs = self.docs.saturating_add(o.docs);
        self.tokens = self.tokens.saturating_add(o.tokens);
        for (t, n) in &o.terms {
            let e = self.terms.entry(t.clone()).or_insert(0);
            *e = e.saturating_add(*n);
        }
    }
}

/// Brings a shard's index up to date and returns its statistics for `q`'s terms.
///
/// The shard: the index `store_key` of `files`, synced as [`super::search`] does. Errors as
/// [`super::search`]'s.
pub fn shard_stats(
    place: &Place,
    store_key: &[u8],
    files: &[PathBuf],
    q: &str,
) -> Result<Stats, SearchError> {
    let parsed = parse(q)?;
    with_synced(place, store_key, files, |o| {
        // the commit and the tail of lines appended since, as the shard's query ranks them
        let searchers = o.searchers();
        let all = AllStats(searchers.iter().collect());
        let text = o.si.f.text;
        let mut st = Stats {
            docs: all.total_num_docs()?,
            tokens: all.total_num_tokens(text)?,
            terms: BTreeMap::new(),
        };
        if parsed.clauses.is_empty() {
            return Ok(st);
        }
        let tq = build(&o.si.f, &parsed, &Filters::default(), None);
        let mut terms: Vec<Term> = Vec::new();
        tq.query_terms(&mut |t, _| {
            if t.field() == text {
                terms.push(t.clone());
            }
        });
        for t in terms {
            if let Some(s) = t.value().as_str() {
                if !st.terms.contains_key(s) {
                    let n = all.doc_freq(&t)?;
                    st.terms.insert(s.to_string(), n);
                }
            }
        }
        Ok(st)
    })
}

/// The statistics a shard ranks with: the store's ([`Stats`]) for the text field and the
/// query's terms, the shard's own for anything else (filters, which score nothing). The
/// store's counts are never below the shard's own (documents, tokens), and a term's count
/// never above the documents, so sums computed before another process committed, or damaged,
/// cannot make Tantivy's `idf` fail or an average length zero.
pub(crate) struct Global<'a> {
    pub stats: &'a Stats,
    /// the shard's own statistics (its commit and tail)
    pub local: &'a dyn Bm25StatisticsProvider,
    pub text: Field,
}

impl Bm25StatisticsProvider for Global<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        if field == self.text {
            Ok(self.stats.tokens.max(self.local.total_num_tokens(field)?))
        } else {
            self.local.total_num_tokens(field)
        }
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.stats.docs.max(self.local.total_num_docs()?))
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let docs = self.total_num_docs()?;
        let n = match (term.field() == self.text, term.value().as_str()) {
            (true, Some(s)) => match self.stats.terms.get(s) {
                Some(&n) => n,
                None => self.local.doc_freq(term)?,
            },
            _ => self.local.doc_freq(term)?,
        };
        Ok(n.min(docs))
    }
}
