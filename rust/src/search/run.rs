//! A query's run: the Tantivy query, the ranking, and each hit read back and placed in its tree.

use super::extract::extract;
use super::query::{parse, Matcher, Query as Parsed, TextParts};
use super::shard::{Global, Stats};
use super::store_index::{
    convert_file, discard, evict_indexes, fingerprint, index_dir, key_path, line_hash, source_of,
    source_range, stat_of, touch, Fields, FileRec, StoreIndex, Synced,
};
use super::{BranchState, Filters, Hit, Outcome, Place, SearchError, SNIPPET_CHARS};
use crate::index::NONE;
use crate::saved::DEFAULT_EVICT_EVERY_S;
use crate::store::Store;
use std::collections::{BinaryHeap, HashMap};
use std::ops::Bound;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::Column;
use tantivy::query::{
    BooleanQuery, ConstScoreQuery, EmptyQuery, Occur, PhrasePrefixQuery, PhraseQuery, Query,
    RangeQuery, TermQuery, TermSetQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, DocId, IndexReader, Score, SegmentOrdinal, SegmentReader, Term};

/// Searches the store of session files `files` (absolute paths) named `store_key` for `q`.
/// The paths and `store_key` (the bytes of the store's name) need not be UTF-8. The hits
/// `offset..offset+limit` in rank order (BM25, then the newer entry, then file order). See the
/// module docs of `search` for what is checked.
///
/// Errors: [`SearchError::Query`] for a bad query (nothing is read); an index that cannot be
/// written even after a rebuild.
pub fn search(
    place: &Place,
    store_key: &[u8],
    files: &[PathBuf],
    q: &str,
    filters: &Filters,
    limit: usize,
    offset: usize,
) -> Result<Outcome, SearchError> {
    search_scored(place, store_key, files, q, filters, limit, offset, None)
}

/// [`search`], ranked with a whole store's BM25 statistics.
///
/// `stats`: the statistics of the store whose shards this index is one of ([`super::shard`]),
/// used instead of this index's own. None: [`search`].
#[allow(clippy::too_many_arguments)]
pub fn search_scored(
    place: &Place,
    store_key: &[u8],
    files: &[PathBuf],
    q: &str,
    filters: &Filters,
    limit: usize,
    offset: usize,
    stats: Option<&Stats>,
) -> Result<Outcome, SearchError> {
    let t0 = Instant::now();
    let parsed = parse(q)?;
    let (hits, total) = with_synced(place, store_key, files, |o| {
        run(o, place, &parsed, filters, limit, offset, stats)
    })?;
    let next = offset + hits.len();
    Ok(Outcome {
        next_offset: (next < total).then_some(next),
        hits,
        total,
        took_ms: t0.elapsed().as_secs_f64() * 1000.0,
    })
}

/// Opens the index of the store `store_key`, brings it up to date with `files`, runs `f` on it.
///
/// The index this process keeps open is reused. A failure other than a bad query is retried
/// once (a race with another process's writer), then the index is rebuilt.
pub(crate) fn with_synced<T>(
    place: &Place,
    store_key: &[u8],
    files: &[PathBuf],
    mut f: impl FnMut(&mut Open) -> Result<T, SearchError>,
) -> Result<T, SearchError> {
    let dir = place.dir.as_ref().map(|c| index_dir(c, store_key));
    let mut last_err = None;
    for attempt in 0..3 {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // a process that searched this store before keeps small appends in a tail index
            // (its cost paid once, then reused); a new one commits them (so that a process
            // per query never indexes the same appended bytes again)
            let (mut o, defer) = match dir.as_deref().and_then(take_open) {
                Some(o) => (o, true),
                None => (Open::new(StoreIndex::open(dir.as_deref())?)?, false),
            };
            o.refresh()?;
            // the manifest and the reader always come from the same commit: after a commit
            // (ours or another process's, met under the writer's lock) both are reloaded and
            // the files checked again
            let mut tail = None;
            o.fresh = Fresh::Unknown;
            for _ in 0..4 {
                tail = None;
                match o.si.sync(files, defer)? {
                    Synced::Same => o.fresh = Fresh::All,
                    Synced::Tail(recs) => {
                        o.fresh = Fresh::Except(recs.iter().map(|r| r.key).collect());
                        tail = Some(recs);
                    }
                    Synced::Committed => {
                        o.stamp = None;
                        o.refresh()?;
                        if let (Some(d), Some(c)) = (&dir, &place.dir) {
                            let (max, every) = place
                                .saved
                                .as_ref()
                                .map(|s| (s.max_bytes, s.evict_every_s))
                                .unwrap_or((
                                    crate::saved::DEFAULT_MAX_BYTES,
                                    DEFAULT_EVICT_EVERY_S,
                                ));
                            evict_indexes(c, d, max, every);
                        }
                        continue;
                    }
                }
                break;
            }
            o.set_tail(tail)?;
            if let Some(d) = &dir {
                touch(d);
            }
            let found = f(&mut o)?;
            if let Some(d) = &dir {
                keep_open(d, o);
            }
            Ok(found)
        }));
        match outcome {
            Ok(Ok(found)) => return Ok(found),
            Ok(Err(SearchError::Query(e))) => return Err(SearchError::Query(e)),
            Ok(Err(e)) => last_err = Some(e),
            Err(_) => last_err = Some(SearchError::Index("the index is damaged".into())),
        }
        // the first failure may be a race with another process's writer (a segment merged
        // away under us): try again; a second one means damage: the index is rebuilt
        if attempt >= 1 {
            if let Some(d) = &dir {
                discard(d)?;
            }
        }
    }
    Err(last_err.unwrap_or_else(|| SearchError::Index("unknown failure".into())))
}

/// An index opened by an earlier query of this process, with its reader: reused while its
/// commit is the one on disk (`meta.json`'s identity unchanged), else reloaded.
pub(crate) struct Open {
    pub(crate) si: StoreIndex,
    pub(crate) reader: IndexReader,
    /// `meta.json`'s (device, inode, size, mtime) when the manifest and reader were loaded
    stamp: Option<Stamp>,
    /// [`Open::ranks`] and the stamp they were computed at
    ranks: Option<(Option<Stamp>, Ranks)>,
    /// the lines appended since the commit (not committed: [`Synced::Tail`]), in memory
    tail: Option<Tail>,
    /// the files this query's sync found as their records say (stat unchanged since indexed)
    fresh: Fresh,
    /// each segment's fast-field columns, opened by an earlier query (a segment never changes;
    /// the ones no searcher holds any more are dropped at the next query)
    cols: Cols,
}

/// Which indexed files the query's sync found unchanged since their records were made: their
/// (device, inode, size, mtime, ctime) as recorded.
enum Fresh {
    /// not known (nothing is skipped)
    Unknown,
    /// every file of the manifest
    All,
    /// every file of the manifest but these keys (appended to: searched through the tail)
    Except(std::collections::HashSet<u64>),
}

impl Fresh {
    fn has(&self, key: u64) -> bool {
        match self {
            Fresh::Unknown => false,
            Fresh::All => true,
            Fresh::Except(k) => !k.contains(&key),
        }
    }
}

/// Each segment's fast-field columns, by segment id.
type Cols = Arc<HashMap<tantivy::index::SegmentId, SegCols>>;

/// The fast-field columns a query reads of one segment.
#[derive(Clone)]
struct SegCols {
    ts: Column<i64>,
    file: Column<u64>,
    off: Column<u64>,
    len: Column<u64>,
    h: Column<u64>,
}

impl SegCols {
    fn open(r: &SegmentReader) -> tantivy::Result<SegCols> {
        let ff = r.fast_fields();
        Ok(SegCols {
            ts: ff.i64("ts")?,
            file: ff.u64("file")?,
            off: ff.u64("off")?,
            len: ff.u64("len")?,
            h: ff.u64("h")?,
        })
    }
}

/// A tail index: the appended lines of some files, past what the commit covers, in parts
/// (one per query that found more appended, each a segment in memory), oldest first.
struct Tail {
    parts: Vec<tantivy::Searcher>,
    /// per file key, its record as the parts cover it: `covered`, the (device, inode, size,
    /// mtime, ctime) read and the fingerprint before `covered`
    recs: HashMap<u64, FileRec>,
}

/// The most parts a tail has; one more and it is built again as one.
const TAIL_PARTS: usize = 16;

/// A file's (device, inode, size, mtime ns, ctime ns) now; None when it cannot be read.
fn stat_now(rec: &FileRec) -> Option<(u64, u64, u64, i64, i64)> {
    let m = std::fs::metadata(key_path(&rec.path)).ok()?;
    let (size, mt, ct) = stat_of(&m);
    Some((m.dev(), m.ino(), size, mt, ct))
}

impl Open {
    fn new(si: StoreIndex) -> Result<Open, SearchError> {
        let reader = si
            .index
            .reader_builder()
            .reload_policy(tantivy::ReloadPolicy::Manual)
            .try_into()?;
        let mut o = Open {
            si,
            reader,
            stamp: None,
            tail: None,
            ranks: None,
            fresh: Fresh::Unknown,
            cols: Arc::new(HashMap::new()),
        };
        // the manifest and the reader, from one commit
        o.refresh()?;
        Ok(o)
    }

    /// Reloads the manifest and the reader when a commit was made since.
    ///
    /// By another process, or `stamp` None. Both come from the same commit: `meta.json`'s
    /// identity the same before and after reading them. Drops the tail index (it was built
    /// against the old commit).
    fn refresh(&mut self) -> Result<(), SearchError> {
        let mut now = self.si.meta_stamp();
        if now == self.stamp && now.is_some() {
            return Ok(());
        }
        self.tail = None;
        for _ in 0..8 {
            self.si.reload_manifest()?;
            self.reader.reload()?;
            let after = self.si.meta_stamp();
            if after == now && now.is_some() {
                break;
            }
            now = after;
        }
        self.stamp = now;
        Ok(())
    }

    /// Each indexed file's rank in the order of its name's bytes, by file key.
    ///
    /// The tie-break after the score and the timestamp, the same in every index of a store's
    /// shards; kept until the next commit.
    fn ranks(&mut self) -> Ranks {
        if let Some((at, r)) = &self.ranks {
            if at.is_some() && *at == self.stamp && self.si.dir.is_some() {
                return r.clone();
            }
        }
        use std::os::unix::ffi::OsStrExt;
        let mut names: Vec<(PathBuf, u64)> = self
            .si
            .manifest
            .files
            .iter()
            .map(|r| (key_path(&r.path), r.key))
            .collect();
        names.sort_by(|a, b| a.0.as_os_str().as_bytes().cmp(b.0.as_os_str().as_bytes()));
        let r: Ranks = Arc::new(
            names
                .into_iter()
                .enumerate()
                .map(|(i, (_, k))| (k, i as u32))
                .collect(),
        );
        self.ranks = Some((self.stamp, r.clone()));
        r
    }

    /// The columns of every segment of `all`: the ones opened before reused, the others
    /// opened; the columns of segments no longer searched dropped.
    fn columns(&mut self, all: &[&tantivy::Searcher]) -> tantivy::Result<Cols> {
        let mut m = HashMap::new();
        for s in all {
            for r in s.segment_readers() {
                let id = r.segment_id();
                let c = match self.cols.get(&id) {
                    Some(c) => c.clone(),
                    None => SegCols::open(r)?,
                };
                m.insert(id, c);
            }
        }
        self.cols = Arc::new(m);
        Ok(self.cols.clone())
    }

    /// The commit's searcher and the tail's parts, in that order.
    pub(crate) fn searchers(&self) -> Vec<tantivy::Searcher> {
        let mut all = vec![self.reader.searcher()];
        if let Some(t) = &self.tail {
            all.extend(t.parts.iter().cloned());
        }
        all
    }

    /// Keeps a tail index of the lines of `recs` past their `covered`.
    ///
    /// `recs`: the manifest's records of the files appended to ([`Synced::Tail`]); None: no
    /// tail. The tail built by earlier queries is kept, extended by a part for the bytes
    /// appended since; it is built again when a file changed otherwise.
    fn set_tail(&mut self, recs: Option<Vec<FileRec>>) -> Result<(), SearchError> {
        let Some(recs) = recs else {
            self.tail = None;
            return Ok(());
        };
        // what each file needs past the tail's parts: nothing (unchanged since), the bytes
        // after the tail's `covered` (appended to again), or everything after the commit's
        let mut tail = self.tail.take().unwrap_or(Tail {
            parts: Vec::new(),
            recs: HashMap::new(),
        });
        let mut work: Vec<(FileRec, u64)> = Vec::new();
        let mut again = tail.recs.keys().any(|k| !recs.iter().any(|r| r.key == *k));
        for r in &recs {
            let Some(t) = tail.recs.get(&r.key) else {
                work.push((r.clone(), r.covered));
                continue;
            };
            let now = stat_now(t);
            if now == Some((t.dev, t.ino, t.size, t.mtime_ns, t.ctime_ns)) {
                continue;
            }
            let appended = now.is_some_and(|(dev, ino, size, _, _)| {
                (dev, ino) == (t.dev, t.ino)
                    && size >= t.covered
                    && std::fs::File::open(key_path(&t.path))
                        .ok()
                        .and_then(|f| fingerprint(&f, t.covered).ok())
                        == Some(t.fp)
            });
            if !appended {
                again = true;
                break;
            }
            work.push((t.clone(), t.covered));
        }
        if again || tail.parts.len() >= TAIL_PARTS {
            tail.parts.clear();
            tail.recs.clear();
            work = recs.iter().map(|r| (r.clone(), r.covered)).collect();
        }
        if !work.is_empty() {
            let (index, done) = self.si.tail_index(&work)?;
            let reader: IndexReader = index
                .reader_builder()
                .reload_policy(tantivy::ReloadPolicy::Manual)
                .try_into()?;
            tail.parts.push(reader.searcher());
            for r in done {
                tail.recs.insert(r.key, r);
            }
        }
        self.tail = Some(tail);
        Ok(())
    }
}

/// `meta.json`'s (device, inode, size, mtime): a commit's identity.
type Stamp = (u64, u64, u64, i64);
/// Each file key's rank by its name's bytes ([`Open::ranks`]).
type Ranks = Arc<HashMap<u64, u32>>;

/// BM25 statistics of the commit and the tail's parts together: each a sum over all, as over
/// the segments of one index, so a hit's score is the one a single index of all the lines
/// gives.
pub(crate) struct AllStats<'a>(pub(crate) Vec<&'a tantivy::Searcher>);

impl tantivy::query::Bm25StatisticsProvider for AllStats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let mut n = 0;
        for s in &self.0 {
            n += s.total_num_tokens(field)?;
        }
        Ok(n)
    }
    fn total_num_docs(&self) -> tantivy::Result<u64> {
        let mut n = 0;
        for s in &self.0 {
            n += s.total_num_docs()?;
        }
        Ok(n)
    }
    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let mut n = 0;
        for s in &self.0 {
            n += s.doc_freq(term)?;
        }
        Ok(n)
    }
}

/// Indexes opened by earlier queries of this process, by folder (at most [`KEEP_INDEXES`]).
static OPEN: std::sync::Mutex<Option<HashMap<PathBuf, Open>>> = std::sync::Mutex::new(None);
const KEEP_INDEXES: usize = 4;

fn take_open(dir: &std::path::Path) -> Option<Open> {
    OPEN.lock().ok()?.as_mut()?.remove(dir)
}

fn keep_open(dir: &std::path::Path, o: Open) {
    if let Ok(mut g) = OPEN.lock() {
        let m = g.get_or_insert_with(HashMap::new);
        if m.len() >= KEEP_INDEXES {
            m.clear();
        }
        m.insert(dir.to_path_buf(), o);
    }
}

fn term_q(f: Field, s: &str, opt: IndexRecordOption) -> Box<dyn Query> {
    Box::new(TermQuery::new(Term::from_field_text(f, s), opt))
}

fn prefix_q(f: Field, p: &str) -> Box<dyn Query> {
    let mut hi = p.to_string();
    hi.push(char::MAX);
    Box::new(RangeQuery::new(
        Bound::Included(Term::from_field_text(f, p)),
        Bound::Excluded(Term::from_field_text(f, &hi)),
    ))
}

fn matcher_q(f: Field, m: &Matcher) -> Box<dyn Query> {
    let terms: Vec<(usize, Term)> = m
        .parts
        .iter()
        .map(|(p, s)| (*p, Term::from_field_text(f, s)))
        .collect();
    let parts_q: Box<dyn Query> = match (terms.len(), m.prefix) {
        (1, false) => term_q(f, &m.parts[0].1, IndexRecordOption::WithFreqs),
        (1, true) => prefix_q(f, &m.parts[0].1),
        (_, false) => Box::new(PhraseQuery::new_with_offset(terms)),
        (_, true) => Box::new(PhrasePrefixQuery::new_with_offset(terms)),
    };
    match &m.whole {
        Some(w) => {
            let whole = if m.prefix {
                prefix_q(f, w)
            } else {
                term_q(f, w, IndexRecordOption::WithFreqs)
            };
            Box::new(BooleanQuery::new(vec![
                (Occur::Should, whole),
                (Occur::Should, parts_q),
            ]))
        }
        None => parts_q,
    }
}

fn all_of(qs: Vec<Box<dyn Query>>) -> Box<dyn Query> {
    if qs.len() == 1 {
        return qs.into_iter().next().expect("one");
    }
    Box::new(BooleanQuery::new(
        qs.into_iter().map(|q| (Occur::Must, q)).collect(),
    ))
}

fn filter(q: Box<dyn Query>) -> (Occur, Box<dyn Query>) {
    (Occur::Must, Box::new(ConstScoreQuery::new(q, 0.0)))
}

pub(crate) fn build(
    f: &Fields,
    p: &Parsed,
    fl: &Filters,
    keys: Option<Vec<u64>>,
) -> Box<dyn Query> {
    let mut subs: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for c in &p.clauses {
        let alts: Vec<Box<dyn Query>> = c
            .alts
            .iter()
            .map(|alt| all_of(alt.iter().map(|m| matcher_q(f.text, m)).collect()))
            .collect();
        let q: Box<dyn Query> = if alts.len() == 1 {
            alts.into_iter().next().expect("one")
        } else {
            Box::new(BooleanQuery::new(
                alts.into_iter().map(|q| (Occur::Should, q)).collect(),
            ))
        };
        subs.push((if c.neg { Occur::MustNot } else { Occur::Must }, q));
    }
    for (field, v) in [(f.etype, &fl.etype), (f.role, &fl.role), (f.tool, &fl.tool)] {
        if let Some(v) = v {
            subs.push(filter(term_q(field, v, IndexRecordOption::Basic)));
        }
    }
    if fl.since.is_some() || fl.until.is_some() {
        let lo = Bound::Included(Term::from_field_i64(
            f.ts,
            fl.since.unwrap_or(i64::MIN + 1).max(i64::MIN + 1),
        ));
        let hi = match fl.until {
            Some(u) => Bound::Included(Term::from_field_i64(f.ts, u)),
            None => Bound::Unbounded,
        };
        subs.push(filter(Box::new(RangeQuery::new(lo, hi))));
    }
    if let Some(keys) = keys {
        let terms = keys.into_iter().map(|k| Term::from_field_u64(f.file, k));
        subs.push(filter(Box::new(TermSetQuery::new(terms))));
    }
    Box::new(BooleanQuery::new(subs))
}

/// A ranked document: higher is better.
///
/// By score, then the newer entry, then the file whose name's bytes sort first
/// ([`Open::ranks`]), then the earlier line: an order every shard of a store agrees on, so
/// merged shards rank as one index does. `src`: 0 in the commit's index, i + 1 in the tail's
/// part i.
#[derive(Clone, Copy, Debug)]
struct Cand {
    score: Score,
    ts: i64,
    /// the file's rank ([`Open::ranks`]; lower first)
    file: u32,
    off: u64,
    src: usize,
    addr: DocAddress,
}
impl Ord for Cand {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.score
            .total_cmp(&o.score)
            .then(self.ts.cmp(&o.ts))
            .then(o.file.cmp(&self.file))
            .then(o.off.cmp(&self.off))
            .then(o.src.cmp(&self.src))
            .then(o.addr.cmp(&self.addr))
    }
}
impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl PartialEq for Cand {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}
impl Eq for Cand {}

/// The best `k` documents by [`Cand`]'s order, and how many matched.
struct Ranked {
    k: usize,
    src: usize,
    ranks: Ranks,
    cols: Cols,
}
struct RankedSeg {
    ts: Column<i64>,
    file: Column<u64>,
    off: Column<u64>,
    ranks: Ranks,
    src: usize,
    seg: SegmentOrdinal,
    heap: BinaryHeap<std::cmp::Reverse<Cand>>,
    k: usize,
    count: usize,
}

impl Collector for Ranked {
    type Fruit = (Vec<Cand>, usize);
    type Child = RankedSeg;
    fn for_segment(&self, seg: SegmentOrdinal, r: &SegmentReader) -> tantivy::Result<RankedSeg> {
        let c = match self.cols.get(&r.segment_id()) {
            Some(c) => c.clone(),
            None => SegCols::open(r)?,
        };
        Ok(RankedSeg {
            ts: c.ts,
            file: c.file,
            off: c.off,
            ranks: self.ranks.clone(),
            src: self.src,
            seg,
            heap: BinaryHeap::new(),
            k: self.k,
            count: 0,
        })
    }
    fn requires_scoring(&self) -> bool {
        true
    }
    fn merge_fruits(&self, fr: Vec<(Vec<Cand>, usize)>) -> tantivy::Result<(Vec<Cand>, usize)> {
        let count = fr.iter().map(|f| f.1).sum();
        let mut all: Vec<Cand> = fr.into_iter().flat_map(|f| f.0).collect();
        all.sort_unstable_by(|a, b| b.cmp(a));
        all.truncate(self.k);
        Ok((all, count))
    }
}

impl SegmentCollector for RankedSeg {
    type Fruit = (Vec<Cand>, usize);
    fn collect(&mut self, doc: DocId, score: Score) {
        self.count += 1;
        if self.k == 0 {
            return;
        }
        let full = self.heap.len() >= self.k;
        // below the worst kept on score alone: no column is read (most documents of a
        // common term stop here, as in Tantivy's own top-k collector)
        if full
            && self
                .heap
                .peek()
                .is_some_and(|w| score.total_cmp(&w.0.score) == std::cmp::Ordering::Less)
        {
            return;
        }
        let ts = self.ts.first(doc).unwrap_or(i64::MIN);
        if full
            && self.heap.peek().is_some_and(|w| {
                score.total_cmp(&w.0.score).then(ts.cmp(&w.0.ts)) == std::cmp::Ordering::Less
            })
        {
            return; // below the worst kept on score and time: the tie-break is not needed
        }
        let c = Cand {
            score,
            ts,
            file: self
                .file
                .first(doc)
                .and_then(|k| self.ranks.get(&k).copied())
                .unwrap_or(u32::MAX),
            off: self.off.first(doc).unwrap_or(u64::MAX),
            src: self.src,
            addr: DocAddress::new(self.seg, doc),
        };
        if !full {
            self.heap.push(std::cmp::Reverse(c));
        } else if self.heap.peek().is_some_and(|w| c > w.0) {
            self.heap.pop();
            self.heap.push(std::cmp::Reverse(c));
        }
    }
    fn harvest(self) -> (Vec<Cand>, usize) {
        (self.heap.into_iter().map(|r| r.0).collect(), self.count)
    }
}

/// A session opened for its hits, and what its tree says.
struct Sess {
    st: Store,
    tree: Option<Tree>,
    labels: HashMap<u32, Option<String>>,
    /// the index's (generation, leaf version) when `tree` and `labels` were computed
    seen: (u64, u64),
    /// the file's key in the search index when opened: the same key later means the file was
    /// only appended to since (a rewrite or replacement is indexed under a new key)
    key: u64,
    /// a Claude Code or Codex file: `st` is its conversion to Pi, in memory
    conv: Option<Conv>,
    /// the file's record's (device, inode, size, mtime, ctime) when `st` was last opened or
    /// refreshed in a query whose sync found the file as its record says ([`Fresh`]): while a
    /// later sync finds it so again, the file has not changed since and `st` is current
    verified: Option<(u64, u64, u64, i64, i64)>,
}

/// What a converted session keeps of its source file.
struct Conv {
    fmt: crate::convert::Format,
    /// each source line's start offset, the file's end last
    lines: Vec<u64>,
    /// the file's (device, inode, size, mtime, ctime) when converted
    stat: (u64, u64, u64, i64, i64),
}

/// Sessions opened by earlier queries of this process, by path: reused after a `refresh()`
/// (which reads only appended bytes, and errs when the file was rewritten or replaced), so a
/// warm query reads no index again. At most [`KEEP_SESSIONS`].
static OPENED: std::sync::Mutex<Option<HashMap<String, Sess>>> = std::sync::Mutex::new(None);
const KEEP_SESSIONS: usize = 64;

fn take_opened(path: &str) -> Option<Sess> {
    OPENED.lock().ok()?.as_mut()?.remove(path)
}

fn keep_opened(sess: HashMap<String, Sess>) {
    if let Ok(mut g) = OPENED.lock() {
        let m = g.get_or_insert_with(HashMap::new);
        for (k, v) in sess {
            if m.len() >= KEEP_SESSIONS {
                m.clear();
            }
            m.insert(k, v);
        }
    }
}

/// The active path, the context and (lazily) the branch summaries' coverage of one session.
struct Tree {
    on_path: Vec<bool>,
    in_ctx: Vec<bool>,
    covered: Option<HashMap<u32, u32>>,
    /// [`nearest_labelled`], built on the first hit that needs it
    near: Option<(Vec<u32>, usize)>,
    /// the labels on the path of a labelled entry, root first, by that entry (a hit's are
    /// those of its nearest labelled ancestor-or-self)
    paths: HashMap<u32, Vec<String>>,
}

impl Sess {
    /// A session just opened (or converted): nothing computed yet, `seen` its index's state now.
    fn new(st: Store, key: u64, conv: Option<Conv>) -> Sess {
        let seen = (st.index.generation, st.index.leaf_version);
        Sess {
            st,
            tree: None,
            labels: HashMap::new(),
            seen,
            key,
            conv,
            verified: None,
        }
    }

    fn tree(&mut self) -> &mut Tree {
        let st = &self.st;
        self.tree.get_or_insert_with(|| {
            let ix = &st.index;
            let n = ix.len();
            let mut on_path = vec![false; n];
            let mut in_ctx = vec![false; n];
            if let Some(leaf) = ix.leaf_entry() {
                let path = walked_path(ix, leaf, &mut on_path);
                let from = kept_from(st, &path);
                for (k, &e) in path.iter().enumerate() {
                    in_ctx[e as usize] = k >= from;
                }
            }
            Tree {
                on_path,
                in_ctx,
                covered: None,
                near: None,
                paths: HashMap::new(),
            }
        })
    }

    fn state(&mut self, e: u32) -> BranchState {
        let t = self.tree();
        if t.on_path[e as usize] {
            if t.in_ctx[e as usize] {
                BranchState::Active
            } else {
                BranchState::Compacted
            }
        } else {
            BranchState::Abandoned
        }
    }

    /// The nearest ancestor of `e` on the active path.
    fn fork_point(&mut self, e: u32) -> Option<u32> {
        let n = self.st.index.len();
        self.tree();
        let t = self.tree.as_ref().expect("built");
        let mut c = self.st.index.walk_parent(e);
        for _ in 0..n {
            if c == NONE {
                return None;
            }
            if t.on_path[c as usize] {
                return Some(c);
            }
            c = self.st.index.walk_parent(c);
        }
        None
    }

    /// The branch summary covering `e`: one whose `fromId` is `e` or below it, appended where
    /// `e` is not an ancestor (Pi `branchWithSummary`: the summary covers the entries from
    /// `fromId` up to the common ancestor with its position).
    fn summary_of(&mut self, e: u32) -> Option<u32> {
        if self.tree().covered.is_none() {
            let ix = &self.st.index;
            let n = ix.len();
            let mut cov = HashMap::new();
            let depth = depths(ix);
            for s in 0..n {
                if ix.view(s).ok().and_then(|v| v.type_name) != Some("branch_summary") {
                    continue;
                }
                let Some(x) = self
                    .st
                    .line(s)
                    .ok()
                    .and_then(|l| serde_json::from_slice::<serde_json::Value>(&l).ok())
                else {
                    continue;
                };
                let Some(from) = x
                    .get("fromId")
                    .and_then(|v| v.as_str())
                    .and_then(|id| ix.index_of_str(id))
                else {
                    continue;
                };
                // the entries from `from` up to its common ancestor with the summary
                let stop = common_ancestor(ix, &depth, from, s as u32);
                let mut c = from;
                for _ in 0..n {
                    if c == NONE || c == stop {
                        break;
                    }
                    cov.insert(c, s as u32);
                    c = ix.walk_parent(c);
                }
            }
            self.tree.as_mut().expect("built").covered = Some(cov);
        }
        self.tree
            .as_ref()
            .and_then(|t| t.covered.as_ref())
            .and_then(|c| c.get(&e).copied())
    }

    /// The labels on `e`'s path, root first (an entry is labelled when a label targets its
    /// id, as Pi's `getLabel(id)`). Per session, built on the first hit that needs it: each
    /// entry's nearest labelled ancestor-or-self, so a hit's labels cost one step per label on
    /// its path; a session with no label answers at once. On a parent cycle the walk stops
    /// after as many steps as there are labelled entries.
    fn labels(&mut self, e: u32) -> Vec<String> {
        self.tree();
        let t = self.tree.as_mut().expect("built");
        let ix = &self.st.index;
        let (near, count) = t.near.get_or_insert_with(|| nearest_labelled(ix));
        if *count == 0 {
            return Vec::new();
        }
        let first = near[e as usize];
        if first == NONE {
            return Vec::new();
        }
        if let Some(p) = t.paths.get(&first) {
            return p.clone();
        }
        let mut out = Vec::new();
        let mut c = first;
        for _ in 0..*count {
            if c == NONE {
                break;
            }
            let l = ix.label_entry_at(c as usize).unwrap_or(NONE);
            let st = &self.st;
            let text = self.labels.entry(l).or_insert_with(|| {
                st.line(l as usize)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                    .and_then(|v| v.get("label").and_then(|x| x.as_str()).map(str::to_string))
            });
            if let Some(t) = text {
                out.push(t.clone());
            }
            let p = ix.walk_parent(c);
            c = if p == NONE { NONE } else { near[p as usize] };
        }
        out.reverse();
        t.paths.insert(first, out.clone());
        out
    }
}

/// Each entry's nearest ancestor-or-self that a label targets (NONE: none), and how many
/// entries are labelled; `(vec![], 0)` when the session has no label. O(entries); a parent
/// cycle ends the chain where the walk meets it again.
fn nearest_labelled(ix: &crate::index::Index) -> (Vec<u32>, usize) {
    if ix.labels().is_empty() {
        return (Vec::new(), 0);
    }
    const TODO: u32 = u32::MAX;
    const BUSY: u32 = u32::MAX - 1;
    let n = ix.len();
    let labelled: Vec<bool> = (0..n).map(|c| ix.label_entry_at(c).is_some()).collect();
    let count = labelled.iter().filter(|&&x| x).count();
    let mut near = vec![TODO; n];
    let mut stack = Vec::new();
    for i in 0..n as u32 {
        let mut c = i;
        while c != NONE && near[c as usize] == TODO {
            near[c as usize] = BUSY;
            stack.push(c);
            c = ix.walk_parent(c);
        }
        let mut base = match c {
            NONE => NONE,
            c if near[c as usize] == BUSY => NONE, // a cycle
            c => near[c as usize],
        };
        while let Some(x) = stack.pop() {
            if labelled[x as usize] {
                base = x;
            }
            near[x as usize] = base;
        }
    }
    (near, count)
}

/// The entries the walk up from `leaf` visits, root first (Pi `getBranch`), each marked in
/// `seen`. On a `parentId` loop the walk stops before it would visit an entry again: the path
/// is the entries from the leaf round the loop once, and the one met last stands first (Pi
/// never returns there; `Index::branch` reports the cycle). O(path).
fn walked_path(ix: &crate::index::Index, leaf: u32, seen: &mut [bool]) -> Vec<u32> {
    let mut path = Vec::new();
    let mut c = leaf;
    while c != NONE && !seen[c as usize] {
        seen[c as usize] = true;
        path.push(c);
        c = ix.walk_parent(c);
    }
    path.reverse();
    path
}

/// Each entry's number of ancestors (entries on a parent cycle: 0), in O(entries).
fn depths(ix: &crate::index::Index) -> Vec<u32> {
    const TODO: u32 = u32::MAX;
    const BUSY: u32 = u32::MAX - 1;
    let n = ix.len();
    let mut d = vec![TODO; n];
    let mut stack = Vec::new();
    for i in 0..n as u32 {
        let mut c = i;
        while c != NONE && d[c as usize] == TODO {
            d[c as usize] = BUSY;
            stack.push(c);
            c = ix.walk_parent(c);
        }
        let mut base = match c {
            NONE => 0,
            c if d[c as usize] == BUSY => 0, // a cycle
            c => d[c as usize] + 1,
        };
        while let Some(x) = stack.pop() {
            d[x as usize] = base;
            base += 1;
        }
    }
    d
}

/// The nearest common ancestor-or-self of `a` and `b` (NONE: none), in O(their depths).
fn common_ancestor(ix: &crate::index::Index, depth: &[u32], mut a: u32, mut b: u32) -> u32 {
    let n = ix.len();
    for _ in 0..2 * n + 2 {
        if a == NONE || b == NONE {
            return NONE;
        }
        if a == b {
            return a;
        }
        let (da, db) = (depth[a as usize], depth[b as usize]);
        if da >= db {
            a = ix.walk_parent(a);
        }
        if db >= da {
            b = ix.walk_parent(b);
        }
    }
    NONE
}

/// Where the context starts on `path` (root first): Pi's `buildSessionContext` keeps, after the
/// latest compaction on the path, the entries from the first one before it whose id is its
/// `firstKeptEntryId` (a v1 file's `firstKeptEntryIndex` names the entry at that value
/// position, as Pi's migration maps it); when none has it, from the compaction on. No
/// compaction: the whole path. The same rule as `sessiontree.context.latest_compaction_at`.
fn kept_from(st: &Store, path: &[u32]) -> usize {
    let ix = &st.index;
    let Some(c) = path
        .iter()
        .rposition(|&e| ix.view(e as usize).ok().and_then(|v| v.type_name) == Some("compaction"))
    else {
        return 0;
    };
    let v = st
        .line(path[c] as usize)
        .ok()
        .and_then(|l| serde_json::from_slice::<serde_json::Value>(&l).ok());
    let first = v.as_ref().and_then(|v| {
        if let Some(id) = v.get("firstKeptEntryId") {
            let id = id.as_str()?;
            (0..c).find(|&i| ix.id_at(path[i] as usize) == Some(id))
        } else {
            let at = v.get("firstKeptEntryIndex")?.as_u64()?;
            let e = ix.entry_at_vpos(u32::try_from(at).ok()?)?;
            (0..c).find(|&i| path[i] == e)
        }
    });
    first.unwrap_or(c)
}

struct Ctx<'a> {
    place: &'a Place,
    fresh: &'a Fresh,
    recs: HashMap<u64, &'a FileRec>,
    sess: HashMap<u64, Option<Sess>>,
}

impl Ctx<'_> {
    fn sess(&mut self, key: u64) -> Option<&mut Sess> {
        let rec = *self.recs.get(&key)?;
        let place = self.place;
        let want = (rec.dev, rec.ino, rec.size, rec.mtime_ns, rec.ctime_ns);
        let fresh = self.fresh.has(key).then_some(want);
        self.sess
            .entry(key)
            .or_insert_with(|| {
                if rec.fmt.is_some() {
                    return open_converted(rec, key);
                }
                let mut kept = take_opened(&rec.path).filter(|s| s.key == key);
                // unchanged since it was last brought up to date: this query's sync just
                // found the file as its record says, as the query that refreshed it did
                if fresh.is_some() && kept.as_ref().is_some_and(|s| s.verified == fresh) {
                    return kept;
                }
                let meta = std::fs::metadata(key_path(&rec.path)).ok()?;
                if (meta.dev(), meta.ino()) != (rec.dev, rec.ino) {
                    return None;
                }
                if let Some(mut s) = kept.take() {
                    if s.st.identity() == Some((rec.dev, rec.ino)) && s.st.refresh().is_ok() {
                        let now = (s.st.index.generation, s.st.index.leaf_version);
                        if now != s.seen {
                            s.tree = None;
                            s.labels.clear();
                            s.seen = now;
                        }
                        s.verified = fresh;
                        return Some(s);
                    }
                }
                let (st, _) =
                    Store::open_cached(&key_path(&rec.path), true, place.saved.as_ref()).ok()?;
                if st.identity() != Some((rec.dev, rec.ino)) {
                    return None;
                }
                let mut s = Sess::new(st, key, None);
                s.verified = fresh;
                Some(s)
            })
            .as_mut()
    }

    /// Hands the sessions opened to the next query of this process.
    fn keep(self) {
        let recs = self.recs;
        keep_opened(
            self.sess
                .into_iter()
                .filter_map(|(k, s)| Some((recs.get(&k)?.path.clone(), s?)))
                .collect(),
        );
    }
}

/// A Claude Code or Codex file's session: its conversion to Pi, in memory, made again unless
/// this process holds one of the same file key and (device, inode, size, mtime, ctime), the
/// ones the index read. None: the file changed since it was indexed (its hits are stale).
fn open_converted(rec: &FileRec, key: u64) -> Option<Sess> {
    let want = (rec.dev, rec.ino, rec.size, rec.mtime_ns, rec.ctime_ns);
    if let Some(s) = take_opened(&rec.path) {
        if s.key == key && s.conv.as_ref().is_some_and(|c| c.stat == want) {
            return Some(s);
        }
    }
    let path = key_path(&rec.path);
    let file = std::fs::File::open(&path).ok()?;
    let m = file.metadata().ok()?;
    let (size, mt, ct) = stat_of(&m);
    if (m.dev(), m.ino(), size, mt, ct) != want {
        return None;
    }
    let c = convert_file(&file, &path, (size, mt, ct)).ok()??;
    let conv = Conv {
        fmt: c.fmt,
        lines: c.lines,
        stat: want,
    };
    Some(Sess::new(Store::from_bytes(c.pi, false), key, Some(conv)))
}

/// Where a converted entry line came from: its source line's (byte offset, 1-based number) and
/// record id, when that line is still in the file as indexed (its hash `h`).
fn source_line(
    c: &Conv,
    rec: &FileRec,
    pi_line: &[u8],
    h: u64,
) -> Option<(u64, u32, Option<String>)> {
    use std::os::unix::fs::FileExt;
    let (n, id) = source_of(pi_line)?;
    let (a, len) = source_range(&c.lines, n)?;
    let mut buf = vec![0u8; usize::try_from(len).ok()?];
    let file = std::fs::File::open(key_path(&rec.path)).ok()?;
    file.read_exact_at(&mut buf, a).ok()?;
    if line_hash(&buf) != h {
        return None;
    }
    Some((a, u32::try_from(n + 1).unwrap_or(u32::MAX), id))
}

type Found = (Vec<Hit>, usize);

fn run(
    o: &mut Open,
    place: &Place,
    p: &Parsed,
    fl: &Filters,
    limit: usize,
    offset: usize,
    global: Option<&Stats>,
) -> Result<Found, SearchError> {
    let ranks = o.ranks();
    let searchers = o.searchers();
    let all: Vec<&tantivy::Searcher> = searchers.iter().collect();
    let seg_cols = o.columns(&all)?;
    let o = &*o;
    let si = &o.si;
    let recs: HashMap<u64, &FileRec> = si.manifest.files.iter().map(|r| (r.key, r)).collect();
    let keys = if fl.session.is_some() || fl.cwd.is_some() {
        Some(
            si.manifest
                .files
                .iter()
                .filter(|r| fl.session.is_none() || r.sid == fl.session)
                .filter(|r| fl.cwd.is_none() || r.cwd == fl.cwd)
                .map(|r| r.key)
                .collect::<Vec<u64>>(),
        )
    } else {
        None
    };
    if keys.as_ref().is_some_and(|k| k.is_empty()) {
        return Ok((vec![], 0));
    }
    let tq: Box<dyn Query> = if p.clauses.is_empty() {
        Box::new(EmptyQuery)
    } else {
        build(&si.f, p, fl, keys)
    };
    let own = AllStats(all.clone());
    let shards;
    let stats: &dyn tantivy::query::Bm25StatisticsProvider = match global {
        Some(g) => {
            shards = Global {
                stats: g,
                local: &own,
                text: si.f.text,
            };
            &shards
        }
        None => &own,
    };
    let post = fl.branch_state.is_some() || fl.label.is_some();
    let want = offset.saturating_add(limit);
    let mut k = if post {
        usize::MAX
    } else {
        want.saturating_add(8)
    };
    let mut ctx = Ctx {
        place,
        fresh: &o.fresh,
        recs,
        sess: HashMap::new(),
    };
    loop {
        let kk = k.min(1 << 24);
        let mut cands = Vec::new();
        let mut count = 0;
        for (src, s) in all.iter().enumerate() {
            let ranked = Ranked {
                k: kk,
                src,
                ranks: ranks.clone(),
                cols: seg_cols.clone(),
            };
            let (more, n) = s.search_with_statistics_provider(&*tq, &ranked, stats)?;
            cands.extend(more);
            count += n;
        }
        if all.len() > 1 {
            cands.sort_unstable_by(|a, b| b.cmp(a));
            cands.truncate(kk);
        }
        let mut hits = Vec::new();
        let mut passed = 0usize;
        let mut stale = 0usize;
        for c in &cands {
            let seg = all[c.src].segment_reader(c.addr.segment_ord);
            let opened;
            let co = match seg_cols.get(&seg.segment_id()) {
                Some(co) => co,
                None => {
                    opened = SegCols::open(seg)?;
                    &opened
                }
            };
            let d = c.addr.doc_id;
            let (Some(file), Some(off), Some(len), Some(h)) = (
                co.file.first(d),
                co.off.first(d),
                co.len.first(d),
                co.h.first(d),
            ) else {
                stale += 1;
                continue;
            };
            let Some(s) = ctx.sess(file) else {
                stale += 1;
                continue;
            };
            let Some(e) = s.st.index.entry_at_offset(off) else {
                stale += 1;
                continue;
            };
            if post {
                let state = s.state(e as u32);
                if fl.branch_state.is_some_and(|b| b != state) {
                    continue;
                }
                if let Some(l) = &fl.label {
                    if !s.labels(e as u32).iter().any(|x| x == l) {
                        continue;
                    }
                }
            }
            passed += 1;
            if passed <= offset || hits.len() >= limit {
                continue;
            }
            let rec = ctx.recs[&file];
            match hit(
                ctx.sess(file).expect("opened"),
                rec,
                e,
                off,
                len,
                h,
                c.score,
                p,
            ) {
                Some(x) => hits.push(x),
                None => {
                    stale += 1;
                    passed -= 1;
                }
            }
        }
        let total = if post {
            passed
        } else {
            count.saturating_sub(stale)
        };
        // stale candidates may have left the page short while more documents matched
        if hits.len() < limit && cands.len() < count && !post && k < count {
            k = k.saturating_mul(4);
            continue;
        }
        ctx.keep();
        return Ok((hits, total));
    }
}

#[allow(clippy::too_many_arguments)]
fn hit(
    s: &mut Sess,
    rec: &FileRec,
    e: usize,
    off: u64,
    len: u64,
    h: u64,
    score: Score,
    p: &Parsed,
) -> Option<Hit> {
    let line = s.st.read(off, len).ok()?;
    // a converted file's hit is checked against its source line, read from the file
    let from_source = match &s.conv {
        None if line_hash(&line) != h => return None,
        None => None,
        Some(c) => Some((c.fmt, source_line(c, rec, &line, h)?)),
    };
    let x = extract(&line)?;
    let tp = TextParts::new(&x.text);
    if !p.matches(&tp) {
        return None;
    }
    let spans = p.spans(&tp);
    let (snippet, spans) = snippet(&x.text, &spans);
    let view = s.st.index.view(e).ok()?;
    let entry_id = view.id.map(str::to_string);
    let (line_no, off, source_format, source_id) = match from_source {
        None => (view.line, off, crate::convert::Format::Pi, None),
        Some((fmt, (at, n, id))) => (n, at, fmt, id),
    };
    let state = s.state(e as u32);
    let (fork_point, summary_id) = if state == BranchState::Abandoned {
        let fp = s
            .fork_point(e as u32)
            .and_then(|f| s.st.index.id_at(f as usize).map(str::to_string));
        let sm = s
            .summary_of(e as u32)
            .and_then(|f| s.st.index.id_at(f as usize).map(str::to_string));
        (fp, sm)
    } else {
        (None, None)
    };
    Some(Hit {
        path: key_path(&rec.path),
        session_id: rec.sid.clone(),
        entry_id,
        etype: x.etype,
        role: x.role,
        tool: x.tools.into_iter().next(),
        ts: x.ts,
        line: line_no,
        offset: off,
        snippet,
        spans,
        score,
        state,
        fork_point,
        summary_id,
        labels: s.labels(e as u32),
        source_format: source_format.name(),
        source_id,
    })
}

/// At most [`SNIPPET_CHARS`] characters of `text` around the first of `spans` (byte ranges),
/// newlines as spaces, and the spans inside it as character offsets.
pub(crate) fn snippet(text: &str, spans: &[(usize, usize)]) -> (String, Vec<(usize, usize)>) {
    // byte offset of every char, and the text's end
    let starts: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let nchars = starts.len() - 1;
    let ci = |b: usize| starts.partition_point(|&x| x < b);
    let (first_s, first_e) = spans
        .first()
        .map(|&(a, b)| (ci(a), ci(b)))
        .unwrap_or((0, 0));
    let mlen = first_e - first_s;
    let lead = if mlen >= SNIPPET_CHARS {
        0
    } else {
        ((SNIPPET_CHARS - mlen) / 3).min(first_s)
    };
    let mut from = first_s - lead;
    let to = (from + SNIPPET_CHARS).min(nchars);
    // use the room left at the end for more text before the match
    from = from.min(to.saturating_sub(SNIPPET_CHARS));
    let snip: String = text[starts[from]..starts[to]]
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let out = spans
        .iter()
        .map(|&(a, b)| (ci(a), ci(b)))
        .filter(|&(a, b)| a >= from && b <= to && a < b)
        .map(|(a, b)| (a - from, b - from))
        .collect();
    (snip, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippet_windows_the_first_match() {
        let text = format!("{}needle{}", "a ".repeat(200), " b".repeat(200));
        let i = text.find("needle").unwrap();
        let (s, sp) = snippet(&text, &[(i, i + 6)]);
        assert_eq!(s.chars().count(), SNIPPET_CHARS);
        let (a, b) = sp[0];
        assert_eq!(s.chars().skip(a).take(b - a).collect::<String>(), "needle");
        let (s, sp) = snippet("x\nneedle", &[(2, 8)]);
        assert_eq!((s.as_str(), sp), ("x needle", vec![(2, 8)]));
    }
}
