//! The Tantivy index of one store, and keeping it true to the files.
//!
//! Place: `<cache folder>/search/<hash of the store's sources>/` (created 0700; a folder that is
//! a symlink, another user's, or writable by others is not used: the query runs on an index in
//! memory instead). Tantivy's `MmapDirectory` maps the index's own segment files there. That
//! mapping is safe from SIGBUS: the files are ours, in a folder only we can write, and Tantivy
//! never truncates or rewrites a segment file (it writes new ones and deletes old ones; a
//! deleted file stays mapped until unmapped). Session files are never mapped (read with
//! `pread`).
//!
//! The manifest (one JSON object, the commit's payload in Tantivy's `meta.json`, so it commits
//! atomically with the segments it describes) records per session file its key, identity
//! (device, inode), the bytes indexed (`covered`: up to the last complete line), its size,
//! mtime and ctime when indexed, a fingerprint of the first and the last 4 KiB before
//! `covered`, and the header's session id and `cwd`. Before a query every file is checked:
//! same size, mtime and ctime: unchanged; same identity, at least `covered` bytes and the same
//! fingerprint: appended (only the lines after `covered` are indexed); anything else:
//! rewritten or replaced (its documents deleted, the file indexed again); a file no longer in
//! the store or gone: evicted. An index that cannot be opened, has another schema or format,
//! or a manifest that does not parse is moved aside and rebuilt.
//!
//! Writers: Tantivy's lock file (`flock`) admits one writer at a time, across processes; a
//! second waits for it (at most [`LOCK_WAIT`]), then checks the files again against the
//! manifest the first committed. Readers never wait: they read the last commit.

use super::extract::{extract, Extracted};
use super::tokenize::{SearchTokenizer, TOKENIZER};
use super::SearchError;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tantivy::directory::error::LockError;
use tantivy::directory::MmapDirectory;
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED, STRING,
};
use tantivy::{Index, IndexWriter, TantivyDocument, TantivyError, Term};

/// Bumped whenever the schema, the tokenizer or the extraction changes.
///
/// An index of another format is rebuilt.
pub const FORMAT: u32 = 3;
const SEED: u64 = 0x5e55_1017_5ea7_c401;
/// Bytes hashed at each end of the covered range for the fingerprint.
const FP_BLOCK: u64 = 4096;
/// How long a second writer waits for the first.
pub const LOCK_WAIT: Duration = Duration::from_secs(300);
/// Bytes read per `pread` while indexing a file (a longer line grows the buffer to hold it).
const CHUNK: usize = 1 << 20;
/// The writer's memory budget (Tantivy's minimum is 15 MB): the most its arena holds before
/// it writes a segment. The arena grows as it fills, so a small sync uses little of it. One
/// indexing thread (fed by the extraction threads): a second one's arena, and the segment it
/// finalizes at the same time, were a third of the build's peak memory.
const BUDGET_PER_THREAD: usize = 24 << 20;
/// The most appended bytes kept uncommitted, in a tail index in memory.
///
/// Counted in all, past what the last commit covers: a sync whose only work is appends of at
/// most this much commits nothing (see [`Synced::Tail`]); the next sync with more, or with a
/// new, rewritten or removed file, commits them with the rest.
pub const PENDING_MAX: u64 = 4 << 20;
/// The tail index's writer budget: Tantivy sizes the term table from it (the largest power
/// of two of 8-byte slots under a third of it, zeroed when the writer starts, grown as terms
/// come). 512 KiB: 16,384 slots (128 KiB), where 8 MiB zeroed 2 MiB per tail segment (7 % of
/// the CPU of a 1 MiB tail's build).
const TAIL_BUDGET: usize = 512 << 10;

/// The most bytes of extracted text handed to the writer and not yet indexed.
///
/// Tantivy's queue between the extraction threads and the indexing thread holds up to 10,000
/// documents whatever their size: extraction outruns indexing, so the queue stays full, tens of
/// MB of text at the build's peak. [`Gate`] holds the extraction threads back instead.
const IN_FLIGHT: usize = 2 << 20;

/// Bounds the bytes of documents waiting for the indexing thread (see [`IN_FLIGHT`]).
///
/// A document's bytes are counted from [`Gate::admit`] until the indexing thread drops it
/// ([`GatedDoc`]'s `Drop`). One document larger than the bound is admitted alone.
struct Gate {
    held: Mutex<usize>,
    freed: Condvar,
    cap: usize,
}

impl Gate {
    fn new(cap: usize) -> Gate {
        Gate {
            held: Mutex::new(0),
            freed: Condvar::new(),
            cap,
        }
    }

    /// Waits until `bytes` more fit (or nothing is held), then counts them against `doc`.
    ///
    /// Never waits forever: after [`GATE_WAIT`] without room it admits the document anyway
    /// (the bound is memory's, not correctness's).
    fn admit(self: &Arc<Self>, doc: TantivyDocument, bytes: usize) -> GatedDoc {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        while *held > 0 && *held + bytes > self.cap && started.elapsed() < GATE_WAIT {
            held = self
                .freed
                .wait_timeout(held, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *held += bytes;
        GatedDoc {
            doc,
            gate: self.clone(),
            bytes,
        }
    }
}

/// What a document counts against the [`Gate`]: its extracted text plus this (its fields).
const DOC_FIELDS_BYTES: usize = 128;

/// How long a document waits for room in the [`Gate`] before it goes in anyway.
const GATE_WAIT: Duration = Duration::from_secs(10);

/// A document counted against a [`Gate`] until dropped (after Tantivy indexed it).
struct GatedDoc {
    doc: TantivyDocument,
    gate: Arc<Gate>,
    bytes: usize,
}

impl Drop for GatedDoc {
    fn drop(&mut self) {
        let mut held = self.gate.held.lock().unwrap_or_else(|e| e.into_inner());
        *held = held.saturating_sub(self.bytes);
        self.gate.freed.notify_all();
    }
}

impl tantivy::Document for GatedDoc {
    type Value<'a> = <TantivyDocument as tantivy::Document>::Value<'a>;
    type FieldsValuesIter<'a> = <TantivyDocument as tantivy::Document>::FieldsValuesIter<'a>;

    fn iter_fields_and_values(&self) -> Self::FieldsValuesIter<'_> {
        self.doc.iter_fields_and_values()
    }
}

/// What [`StoreIndex::sync`] did.
#[derive(Debug)]
pub enum Synced {
    /// nothing to do: the last commit covers every file
    Same,
    /// a commit was made (by this process), or found made by another one while waiting for the
    /// writer's lock: the reader must be reloaded
    Committed,
    /// only appends, at most [`PENDING_MAX`] bytes: nothing committed; the manifest's records
    /// of the appended files, whose lines after `covered` a tail index must hold
    /// ([`StoreIndex::tail_index`])
    Tail(Vec<FileRec>),
}

pub(crate) fn hasher() -> foldhash::fast::FoldHasher<'static> {
    foldhash::fast::FixedState::with_seed(SEED).build_hasher()
}

/// The hash of a line's bytes, as the index records it.
pub(crate) fn line_hash(b: &[u8]) -> u64 {
    let mut h = hasher();
    h.write(b);
    h.finish()
}

/// The folder of the index of the store named `store_key` under the cache folder `cache`.
/// `store_key` is the bytes of the store's name, which need not be UTF-8.
pub fn index_dir(cache: &Path, store_key: &[u8]) -> PathBuf {
    cache
        .join("search")
        .join(format!("{:016x}", line_hash(store_key)))
}

/// The manifest's name of the file `p` ([`FileRec::path`]).
///
/// Its text when it is UTF-8, else a NUL then its bytes in lowercase hex. A path never holds a NUL byte, so the two forms never
/// meet; [`key_path`] reverses it.
pub(crate) fn path_key(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    match p.to_str() {
        Some(s) => s.to_string(),
        None => {
            let b = p.as_os_str().as_bytes();
            let mut out = String::with_capacity(1 + 2 * b.len());
            out.push('\0');
            for x in b {
                out.push_str(&format!("{x:02x}"));
            }
            out
        }
    }
}

/// The file named by the manifest's name `k` (see [`path_key`]).
///
/// A malformed hex form (a manifest we did not write) names a path that does not exist.
pub(crate) fn key_path(k: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let Some(hex) = k.strip_prefix('\0') else {
        return PathBuf::from(k);
    };
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect();
    match bytes {
        Some(b) if hex.len() % 2 == 0 && !b.contains(&0) => {
            PathBuf::from(std::ffi::OsString::from_vec(b))
        }
        _ => PathBuf::from("/\0"),
    }
}

/// One indexed file (see the module docs).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct FileRec {
    /// the file's name as [`path_key`] writes it (the file: [`key_path`])
    pub path: String,
    pub key: u64,
    pub dev: u64,
    pub ino: u64,
    pub covered: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub fp: u64,
    pub sid: Option<String>,
    pub cwd: Option<String>,
    /// the format of a converted file ([`crate::convert::Format::name`]); None: Pi.
    ///
    /// A Claude Code transcript or a Codex rollout is indexed through its conversion to Pi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fmt: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Manifest {
    pub v: u32,
    pub next_key: u64,
    pub files: Vec<FileRec>,
}

/// The schema's fields.
#[derive(Clone, Copy)]
pub struct Fields {
    pub text: Field,
    pub etype: Field,
    pub role: Field,
    pub tool: Field,
    pub file: Field,
    pub off: Field,
    pub len: Field,
    pub h: Field,
    pub ts: Field,
}

impl Fields {
    /// The document of one entry: its extracted text and fields, the file's key, `off`/`len` of
    /// the line the hit is placed by, and `h` the hash of the line checked at query time.
    fn doc(&self, x: &Extracted, key: u64, off: u64, len: usize, h: u64) -> TantivyDocument {
        let mut doc = TantivyDocument::default();
        doc.add_text(self.text, &x.text);
        doc.add_text(self.etype, &x.etype);
        if let Some(r) = &x.role {
            doc.add_text(self.role, r);
        }
        for t in &x.tools {
            doc.add_text(self.tool, t);
        }
        doc.add_u64(self.file, key);
        doc.add_u64(self.off, off);
        doc.add_u64(self.len, len as u64);
        doc.add_u64(self.h, h);
        doc.add_i64(self.ts, x.ts.unwrap_or(i64::MIN));
        doc
    }
}

fn schema() -> (Schema, Fields) {
    let mut sb = Schema::builder();
    let text = sb.add_text_field(
        "text",
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(TOKENIZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        ),
    );
    let f = Fields {
        text,
        etype: sb.add_text_field("type", STRING),
        role: sb.add_text_field("role", STRING),
        tool: sb.add_text_field("tool", STRING),
        file: sb.add_u64_field("file", INDEXED | FAST),
        off: sb.add_u64_field("off", FAST),
        len: sb.add_u64_field("len", FAST),
        h: sb.add_u64_field("h", FAST),
        ts: sb.add_i64_field("ts", INDEXED | FAST),
    };
    (sb.build(), f)
}

/// A store's index, opened, with the manifest of its last commit.
pub struct StoreIndex {
    /// the folder, None for an index in memory
    pub dir: Option<PathBuf>,
    pub index: Index,
    pub f: Fields,
    pub manifest: Manifest,
}

fn bad(why: impl std::fmt::Display) -> SearchError {
    SearchError::Index(why.to_string())
}

/// Creates `d` (0700, parents too) and checks it is a real folder of ours that others cannot
/// write.
fn prepare_dir(d: &Path) -> Result<(), SearchError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(d)?;
    let m = std::fs::symlink_metadata(d)?;
    // SAFETY: geteuid has no preconditions
    let uid = unsafe { libc::geteuid() };
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o022 != 0 {
        return Err(bad(format!(
            "{} is not a folder of ours that only we can write",
            d.display()
        )));
    }
    Ok(())
}

/// Moves the folder `d` aside (one rename: readers that have it open keep their files) and
/// removes it.
pub(crate) fn discard(d: &Path) -> Result<(), SearchError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.as_nanos())
        .unwrap_or(0);
    let name = d.file_name().and_then(|n| n.to_str()).unwrap_or("index");
    let aside = d.with_file_name(format!(".{name}.old.{}.{nanos}", std::process::id()));
    match std::fs::rename(d, &aside) {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&aside);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn read_manifest(index: &Index) -> Result<Manifest, SearchError> {
    let metas = index.load_metas()?;
    let docs: u64 = metas.segments.iter().map(|s| s.max_doc() as u64).sum();
    match metas.payload {
        None if docs == 0 => Ok(Manifest {
            v: FORMAT,
            ..Default::default()
        }),
        None => Err(bad("an index without a manifest")),
        Some(p) => {
            let m: Manifest = serde_json::from_str(&p).map_err(bad)?;
            if m.v != FORMAT {
                return Err(bad(format!("an index of format {}", m.v)));
            }
            let mut keys: Vec<u64> = m.files.iter().map(|r| r.key).collect();
            keys.sort_unstable();
            keys.dedup();
            if keys.len() != m.files.len() || keys.last().is_some_and(|&k| k >= m.next_key) {
                return Err(bad("a manifest with reused keys"));
            }
            Ok(m)
        }
    }
}

impl StoreIndex {
    /// Opens (or creates) the index in `dir`, or in memory when `dir` is None or unusable. A
    /// damaged index is moved aside and created again.
    pub fn open(dir: Option<&Path>) -> Result<StoreIndex, SearchError> {
        let Some(d) = dir else {
            return Ok(Self::in_memory());
        };
        if prepare_dir(d).is_err() {
            return Ok(Self::in_memory());
        }
        match Self::try_open(d) {
            Ok(s) => Ok(s),
            Err(_) => {
                discard(d)?;
                prepare_dir(d)?;
                Self::try_open(d)
            }
        }
    }

    fn in_memory() -> StoreIndex {
        let (schema, f) = schema();
        let index = Index::create_in_ram(schema);
        index
            .tokenizers()
            .register(TOKENIZER, SearchTokenizer::default());
        StoreIndex {
            dir: None,
            index,
            f,
            manifest: Manifest {
                v: FORMAT,
                ..Default::default()
            },
        }
    }

    fn try_open(d: &Path) -> Result<StoreIndex, SearchError> {
        let (schema, f) = schema();
        let mdir = MmapDirectory::open(d).map_err(bad)?;
        let index = Index::open_or_create(mdir, schema)?;
        index
            .tokenizers()
            .register(TOKENIZER, SearchTokenizer::default());
        let manifest = read_manifest(&index)?;
        Ok(StoreIndex {
            dir: Some(d.to_path_buf()),
            index,
            f,
            manifest,
        })
    }

    /// The identity of the last commit on disk: `meta.json`'s (device, inode, size, mtime).
    ///
    /// Tantivy replaces the file at each commit. A constant for an index in memory (only this
    /// process writes it); None when it cannot be read.
    pub fn meta_stamp(&self) -> Option<(u64, u64, u64, i64)> {
        let Some(d) = &self.dir else {
            return Some((0, 0, 0, 0));
        };
        let m = std::fs::metadata(d.join("meta.json")).ok()?;
        Some((
            m.dev(),
            m.ino(),
            m.len(),
            m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        ))
    }

    /// Reads the manifest of the last commit again (another process may have committed).
    pub fn reload_manifest(&mut self) -> Result<(), SearchError> {
        self.manifest = read_manifest(&self.index)?;
        Ok(())
    }

    /// Brings the index up to date with `files`, the absolute paths of the store's session files.
    ///
    /// A file that cannot be opened is left out, and evicted if it was indexed. With `defer`,
    /// appends of at most [`PENDING_MAX`] bytes in all (and nothing else) are not committed:
    /// [`Synced::Tail`] names them.
    pub fn sync(&mut self, files: &[PathBuf], defer: bool) -> Result<Synced, SearchError> {
        let plan = self.plan(files);
        if plan.is_empty() {
            return Ok(Synced::Same);
        }
        // bytes to index: an append's new bytes, a fresh file's all
        let bytes: u64 = plan
            .iter()
            .map(|(p, a)| {
                let size = std::fs::metadata(key_path(p)).map(|m| m.len()).unwrap_or(0);
                match a {
                    Act::Evict(_) => 0,
                    Act::Append(r) => size.saturating_sub(r.covered),
                    Act::Fresh(_) => size,
                }
            })
            .sum();
        if defer && bytes <= PENDING_MAX && plan.iter().all(|(_, a)| matches!(a, Act::Append(_))) {
            let recs = plan
                .into_iter()
                .filter_map(|(_, a)| match a {
                    Act::Append(r) => Some(r),
                    _ => None,
                })
                .collect();
            return Ok(Synced::Tail(recs));
        }
        let options = tantivy::indexer::IndexWriterOptions::builder()
            .memory_budget_per_thread(BUDGET_PER_THREAD)
            .num_worker_threads(1)
            .num_merge_threads(1)
            .build();
        let started = Instant::now();
        let writer: IndexWriter<GatedDoc> = loop {
            match self.index.writer_with_options(options.clone()) {
                Ok(w) => break w,
                Err(TantivyError::LockFailure(LockError::LockBusy, _))
                    if started.elapsed() < LOCK_WAIT =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e.into()),
            }
        };
        // another process may have committed while we waited
        self.manifest = read_manifest(&self.index)?;
        let plan = self.plan(files);
        if plan.is_empty() {
            return Ok(Synced::Committed);
        }
        let mut next_key = self.manifest.next_key;
        let mut keep: Vec<FileRec> = Vec::new();
        let mut work: Vec<(FileRec, u64)> = Vec::new();
        let mut touched = std::collections::HashSet::new();
        for (path, act) in plan {
            touched.insert(path.clone());
            match act {
                Act::Evict(key) => {
                    writer.delete_term(Term::from_field_u64(self.f.file, key));
                }
                Act::Append(rec) => work.push((rec.clone(), rec.covered)),
                Act::Fresh(old) => {
                    if let Some(key) = old {
                        writer.delete_term(Term::from_field_u64(self.f.file, key));
                    }
                    let rec = FileRec {
                        path,
                        key: next_key,
                        dev: 0,
                        ino: 0,
                        covered: 0,
                        size: 0,
                        mtime_ns: 0,
                        ctime_ns: 0,
                        fp: 0,
                        sid: None,
                        cwd: None,
                        fmt: None,
                    };
                    next_key += 1;
                    work.push((rec, 0));
                }
            }
        }
        for r in &self.manifest.files {
            if !touched.contains(&r.path) {
                keep.push(r.clone());
            }
        }
        let f = self.f;
        let gate = Arc::new(Gate::new(IN_FLIGHT));
        let done: Vec<Option<FileRec>> = work
            .into_par_iter()
            .map(|(rec, from)| {
                index_file(
                    &mut |d, bytes| {
                        let d = gate.admit(d, bytes);
                        Ok(writer.add_document(d).map(|_| ())?)
                    },
                    f,
                    rec,
                    from,
                )
                .ok()
            })
            .collect();
        keep.extend(done.into_iter().flatten());
        keep.sort_by(|a, b| a.path.cmp(&b.path));
        let m = Manifest {
            v: FORMAT,
            next_key,
            files: keep,
        };
        let mut writer = writer;
        let mut pc = writer.prepare_commit()?;
        pc.set_payload(&serde_json::to_string(&m).map_err(bad)?);
        pc.commit()?;
        writer.wait_merging_threads()?;
        self.manifest = m;
        Ok(Synced::Committed)
    }

    /// A tail index: the lines of each file of `work` from its byte to its end, in memory.
    ///
    /// `work`: a file's record and the byte (a line start) from which to index it. Returns the
    /// index (this index's schema and tokenizer; one segment, built in this thread) and the
    /// records as they would be committed (`covered`, size, times and fingerprint as read).
    /// Files that cannot be read are left out (the next sync finds them).
    pub fn tail_index(
        &self,
        work: &[(FileRec, u64)],
    ) -> Result<(Index, Vec<FileRec>), SearchError> {
        let tm = tantivy::tokenizer::TokenizerManager::default();
        tm.register(TOKENIZER, SearchTokenizer::default());
        let mut w = Index::builder()
            .schema(self.index.schema())
            .tokenizers(tm)
            .single_segment_index_writer::<TantivyDocument>(
                tantivy::directory::RamDirectory::create(),
                TAIL_BUDGET,
            )?;
        let mut out = Vec::with_capacity(work.len());
        for (r, from) in work {
            if let Ok(done) =
                index_file(&mut |d, _| Ok(w.add_document(d)?), self.f, r.clone(), *from)
            {
                out.push(done);
            }
        }
        let index = w.finalize()?;
        Ok((index, out))
    }

    /// What each file needs (files that need nothing are left out).
    fn plan(&self, files: &[PathBuf]) -> Vec<(String, Act)> {
        let by_path: std::collections::HashMap<&str, &FileRec> = self
            .manifest
            .files
            .iter()
            .map(|r| (r.path.as_str(), r))
            .collect();
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for p in files {
            let ps = path_key(p);
            if !seen.insert(ps.clone()) {
                continue;
            }
            let ps = ps.as_str();
            let meta = match std::fs::metadata(p) {
                Ok(m) if m.is_file() => m,
                _ => {
                    if let Some(r) = by_path.get(ps) {
                        out.push((ps.to_string(), Act::Evict(r.key)));
                    }
                    continue;
                }
            };
            let Some(r) = by_path.get(ps) else {
                out.push((ps.to_string(), Act::Fresh(None)));
                continue;
            };
            let (size, mt, ct) = stat_of(&meta);
            if (meta.dev(), meta.ino(), size, mt, ct)
                == (r.dev, r.ino, r.size, r.mtime_ns, r.ctime_ns)
            {
                continue;
            }
            // a converted file is converted whole again on any change (the conversion of a
            // line depends on the lines before and after it)
            let appended = r.fmt.is_none()
                && meta.dev() == r.dev
                && meta.ino() == r.ino
                && size >= r.covered
                && File::open(p)
                    .ok()
                    .and_then(|f| fingerprint(&f, r.covered).ok())
                    == Some(r.fp);
            if appended {
                out.push((ps.to_string(), Act::Append((*r).clone())));
            } else {
                out.push((ps.to_string(), Act::Fresh(Some(r.key))));
            }
        }
        for r in &self.manifest.files {
            if !seen.contains(&r.path) {
                out.push((r.path.clone(), Act::Evict(r.key)));
            }
        }
        out
    }
}

enum Act {
    Evict(u64),
    Append(FileRec),
    /// index the whole file (deleting the old key's documents)
    Fresh(Option<u64>),
}

pub(crate) fn stat_of(m: &std::fs::Metadata) -> (u64, i64, i64) {
    (
        m.len(),
        m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        m.ctime() * 1_000_000_000 + m.ctime_nsec(),
    )
}

/// The hash of the first and the last [`FP_BLOCK`] bytes before `covered`.
pub(crate) fn fingerprint(f: &File, covered: u64) -> std::io::Result<u64> {
    let mut h = hasher();
    h.write_u64(covered);
    let mut buf = vec![0u8; FP_BLOCK as usize];
    for start in [0, covered.saturating_sub(FP_BLOCK)] {
        let n = (covered - start).min(FP_BLOCK) as usize;
        f.read_exact_at(&mut buf[..n], start)?;
        h.write(&buf[..n]);
    }
    Ok(h.finish())
}

/// Whether the file's start passes the header rule the session reader applies
/// ([`crate::scan::probe_header`]); reads only as far as the first JSON value's line, in doubling
/// reads (linear in that length).
fn opens_as_session(file: &File, size: u64) -> std::io::Result<bool> {
    let mut want = (64u64 << 10).min(size);
    loop {
        let mut buf = vec![0u8; want as usize];
        let n = file.read_at(&mut buf, 0)?;
        buf.truncate(n);
        let eof = (n as u64) < want || want >= size;
        match crate::scan::probe_header(&buf, eof) {
            crate::scan::HeaderProbe::Valid { .. } => return Ok(true),
            crate::scan::HeaderProbe::NeedMore if !eof => want = (want * 2).min(size),
            _ => return Ok(false),
        }
    }
}

/// Indexes the complete lines of `rec.path` from byte `from` (a line start) to its end; returns
/// the record for the manifest.
fn index_file(
    add: &mut dyn FnMut(TantivyDocument, usize) -> Result<(), SearchError>,
    f: Fields,
    mut rec: FileRec,
    from: u64,
) -> Result<FileRec, SearchError> {
    let file = File::open(key_path(&rec.path))?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(bad("not a regular file"));
    }
    let (size, mt, ct) = stat_of(&meta);
    if from == 0 && !opens_as_session(&file, size)? {
        if let Some(done) = index_converted(add, f, &mut rec, &file, &meta)? {
            return Ok(done);
        }
        // the session reader refuses it (no hit could be placed): nothing of it is indexed,
        // and `covered` stays 0 so a later append probes the header again
        rec.dev = meta.dev();
        rec.ino = meta.ino();
        rec.size = size;
        rec.mtime_ns = mt;
        rec.ctime_ns = ct;
        rec.covered = 0;
        rec.fp = fingerprint(&file, 0)?;
        rec.sid = None;
        rec.cwd = None;
        rec.fmt = None;
        return Ok(rec);
    }
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK.min(size as usize) + 1);
    let mut pos = from; // file offset of buf[0]
    let mut read_to = from;
    let mut header_seen = from > 0;
    let mut covered = from;
    while read_to < size {
        let want = (size - read_to).min(CHUNK as u64) as usize;
        let old = buf.len();
        buf.resize(old + want, 0);
        let n = file.read_at(&mut buf[old..], read_to)?;
        buf.truncate(old + n);
        if n == 0 {
            break;
        }
        read_to += n as u64;
        let mut start = 0usize;
        while let Some(nl) = memchr::memchr(b'\n', &buf[start..]) {
            let end = start + nl;
            let line = &buf[start..end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let off = pos + start as u64;
            if !header_seen && !crate::jsdate::js_trim(&String::from_utf8_lossy(line)).is_empty() {
                header_seen = true;
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) {
                    if v.get("type").and_then(|t| t.as_str()) == Some("session") {
                        rec.sid = v.get("id").and_then(|t| t.as_str()).map(str::to_string);
                        rec.cwd = v.get("cwd").and_then(|t| t.as_str()).map(str::to_string);
                    }
                }
            }
            if let Some(x) = extract(line) {
                if !x.text.is_empty() {
                    let doc = f.doc(&x, rec.key, off, line.len(), line_hash(line));
                    add(doc, x.text.len() + DOC_FIELDS_BYTES)?;
                }
            }
            start = end + 1;
            covered = pos + start as u64;
        }
        buf.drain(..start);
        pos += start as u64;
    }
    rec.dev = meta.dev();
    rec.ino = meta.ino();
    rec.size = size;
    rec.mtime_ns = mt;
    rec.ctime_ns = ct;
    rec.covered = covered;
    rec.fp = fingerprint(&file, covered)?;
    Ok(rec)
}

/// A Claude Code transcript or Codex rollout, converted to Pi in memory (its main session).
///
/// `fmt`: the source's format; `src`: the file's bytes; `pi`: the converted session's bytes; `lines`: the byte offset
/// of each source line's start, and the file's end last (line `n` is `lines[n]..lines[n+1]`
/// less its `\n`).
pub(crate) struct Converted {
    pub fmt: crate::convert::Format,
    pub src: Vec<u8>,
    pub pi: Vec<u8>,
    pub lines: Vec<u64>,
}

/// Reads the whole of `file` and converts it when it is a Claude Code transcript or a Codex
/// rollout; None when it is neither (or cannot be converted). The file's (size, mtime, ctime)
/// must be `stat` before and after the read, else None (it changed under us).
pub(crate) fn convert_file(
    file: &File,
    name: &Path,
    stat: (u64, i64, i64),
) -> std::io::Result<Option<Converted>> {
    use crate::convert::{detect_bytes, to_pi_bytes, Format};
    let size = stat.0;
    let mut data = vec![0u8; size as usize];
    let mut got = 0usize;
    while got < data.len() {
        let n = file.read_at(&mut data[got..], got as u64)?;
        if n == 0 {
            return Ok(None);
        }
        got += n;
    }
    if stat_of(&file.metadata()?) != stat {
        return Ok(None);
    }
    let fmt = match detect_bytes(&data, name) {
        Ok(f @ (Format::ClaudeCode | Format::Codex)) => f,
        _ => return Ok(None),
    };
    let Ok((mut made, _)) = to_pi_bytes(&data, name, Some(fmt)) else {
        return Ok(None);
    };
    if made.is_empty() {
        return Ok(None);
    }
    let pi = made.swap_remove(0).1;
    let mut lines = vec![0u64];
    lines.extend(memchr::memchr_iter(b'\n', &data).map(|i| i as u64 + 1));
    if *lines.last().unwrap_or(&0) != size {
        lines.push(size);
    }
    Ok(Some(Converted {
        fmt,
        src: data,
        pi,
        lines,
    }))
}

/// The source side field of a converted entry line: the source line's number and record id.
#[derive(Deserialize)]
struct SourceOf {
    source: Option<SourceField>,
}
#[derive(Deserialize)]
struct SourceField {
    n: Option<u64>,
    id: Option<serde_json::Value>,
}

/// The source line number (0-based) and record id a converted entry line names.
pub(crate) fn source_of(pi_line: &[u8]) -> Option<(u64, Option<String>)> {
    let s: SourceOf = serde_json::from_slice(pi_line).ok()?;
    let f = s.source?;
    let id = match f.id {
        Some(serde_json::Value::String(s)) => Some(s),
        _ => None,
    };
    Some((f.n?, id))
}

/// The bytes of source line `n` (without its `\n`), by the offsets of [`Converted::lines`].
pub(crate) fn source_range(lines: &[u64], n: u64) -> Option<(u64, u64)> {
    let i = usize::try_from(n).ok()?;
    let (a, b) = (*lines.get(i)?, *lines.get(i + 1)?);
    let b = if b > a { b - 1 } else { b };
    Some((a, b - a))
}

/// Indexes a Claude Code or Codex file through its conversion to Pi (its main session: the
/// sidechains and subagents `convert` writes beside it are not searched). A document per
/// converted entry: `off`/`len` its line in the converted bytes (where the converted session's
/// tree finds it), `h` the hash of the source line it came from (checked against the file at
/// query time). None: not such a file.
fn index_converted(
    add: &mut dyn FnMut(TantivyDocument, usize) -> Result<(), SearchError>,
    f: Fields,
    rec: &mut FileRec,
    file: &File,
    meta: &std::fs::Metadata,
) -> Result<Option<FileRec>, SearchError> {
    let stat = stat_of(meta);
    let Some(c) = convert_file(file, &key_path(&rec.path), stat)? else {
        return Ok(None);
    };
    let mut start = 0usize;
    let mut header_seen = false;
    while let Some(nl) = memchr::memchr(b'\n', &c.pi[start..]) {
        let end = start + nl;
        let line = &c.pi[start..end];
        let off = start as u64;
        start = end + 1;
        if !header_seen {
            header_seen = true;
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) {
                rec.sid = v.get("id").and_then(|t| t.as_str()).map(str::to_string);
                rec.cwd = v.get("cwd").and_then(|t| t.as_str()).map(str::to_string);
            }
            continue;
        }
        let Some(x) = extract(line) else { continue };
        if x.text.is_empty() {
            continue;
        }
        let Some((a, n)) = source_of(line).and_then(|(n, _)| source_range(&c.lines, n)) else {
            continue;
        };
        let src = &c.src[a as usize..(a + n) as usize];
        let doc = f.doc(&x, rec.key, off, line.len(), line_hash(src));
        add(doc, x.text.len() + DOC_FIELDS_BYTES)?;
    }
    rec.dev = meta.dev();
    rec.ino = meta.ino();
    rec.size = stat.0;
    rec.mtime_ns = stat.1;
    rec.ctime_ns = stat.2;
    rec.covered = stat.0;
    rec.fp = fingerprint(file, stat.0)?;
    rec.fmt = Some(c.fmt.name().to_string());
    Ok(Some(rec.clone()))
}

/// Marks the index folder `d` used now (its mtime), at most once a minute: the age
/// [`evict_indexes`] ranks folders by.
pub(crate) fn touch(d: &Path) {
    let Ok(m) = std::fs::symlink_metadata(d) else {
        return;
    };
    let now = std::time::SystemTime::now();
    let old = m.modified().unwrap_or(std::time::UNIX_EPOCH);
    if now
        .duration_since(old)
        .map(|a| a.as_secs() < 60)
        .unwrap_or(true)
    {
        return;
    }
    if let Ok(f) = File::open(d) {
        let _ = f.set_modified(now);
    }
}

/// When this process last evicted search indexes (seconds since the epoch; 0: never).
static LAST_EVICT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Keeps the search indexes under the cache folder `cache` (`<cache>/search/<16 hex>/`) at
/// most `max_bytes` in all: the least recently used folders (by mtime, see [`touch`]) are
/// discarded first, never `keep` (the one just used, kept even when alone it is larger).
/// Only folders of ours (real directories we own, named as [`index_dir`] names them) are
/// counted or removed. At most once per `every_s` seconds per process (its first call always
/// runs). Returns how many were removed; failures are ignored (eviction is upkeep).
pub(crate) fn evict_indexes(cache: &Path, keep: &Path, max_bytes: u64, every_s: u64) -> usize {
    use std::sync::atomic::Ordering;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let last = LAST_EVICT.load(Ordering::Relaxed);
    if last != 0 && now - last < every_s as i64 {
        return 0;
    }
    LAST_EVICT.store(now, Ordering::Relaxed);
    let root = cache.join("search");
    let Ok(rd) = std::fs::read_dir(&root) else {
        return 0;
    };
    // SAFETY: geteuid has no preconditions
    let uid = unsafe { libc::geteuid() };
    let mut found: Vec<(i64, u64, PathBuf)> = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(n) = name.to_str() else { continue };
        if n.len() != 16 || !n.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let Ok(m) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if !m.is_dir() || m.uid() != uid {
            continue;
        }
        let size: u64 = std::fs::read_dir(e.path())
            .map(|r| {
                r.flatten()
                    .filter_map(|f| f.metadata().ok())
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0);
        found.push((m.mtime() * 1_000_000_000 + m.mtime_nsec(), size, e.path()));
    }
    let mut total: u64 = found.iter().map(|x| x.1).sum();
    found.sort();
    let mut removed = 0;
    for (_, size, p) in found {
        if total <= max_bytes {
            break;
        }
        if p == keep {
            continue;
        }
        if discard(&p).is_ok() {
            removed += 1;
            total -= size;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::{key_path, path_key};
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    #[test]
    fn a_name_that_is_not_utf8_round_trips_and_never_meets_a_utf8_one() {
        let odd = Path::new(OsStr::from_bytes(b"/s/caf\xe9.jsonl"));
        let k = path_key(odd);
        assert!(k.starts_with('\0'));
        assert_eq!(key_path(&k), odd);
        assert_eq!(path_key(Path::new("/s/café.jsonl")), "/s/café.jsonl");
        assert_eq!(key_path("/s/café.jsonl"), Path::new("/s/café.jsonl"));
        for bad in ["\0zz", "\0abc", "\x0000"] {
            assert!(std::fs::metadata(key_path(bad)).is_err(), "{bad:?}");
        }
    }
}
