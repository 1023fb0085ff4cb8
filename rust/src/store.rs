//! A session's bytes and its index.
//!
//! The file (read through `pread`, never memory-mapped: a mapping of a file that another program
//! truncates kills the process with SIGBUS), or a copy of a small file, or nothing (an in-memory
//! session), plus the lines appended through us since the file was last read. `refresh()` reads and
//! scans only the bytes that are new.

use crate::append::{build_line_into, Body, Durability, IdRng, Sink, BUFFER_LIMIT};
use crate::index::{pre_of, HeaderState, Index, LineResult, ParsedLine, Pre, MAX_LINE};
use crate::json::{LineParser, Skel, TopKind, Val};
use crate::saved;
use crate::scan;
use std::borrow::Cow;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Files smaller than this are read whole and kept in memory; larger ones are read on demand.
const WHOLE_MAX: u64 = 64 << 10;
/// Lines read together whose gaps are at most this many bytes are fetched with one `pread`.
pub(crate) const READ_GAP: u64 = 16 << 10;
/// One `pread` of several lines reads at most this many bytes (a longer line is read alone).
pub(crate) const READ_RUN: u64 = 4 << 20;
/// Buffered (`Durability::None`) appends check that the path still names the file we write
/// at least this often (bytes); direct writes check every time.
const IDENT_CHECK: u64 = 64 << 10;
/// Our appended bytes held in memory at most; then the lines are read from the file.
///
/// Once this many of our appended bytes are in the file, the in-memory copy is dropped (its
/// buffer kept) and those lines are read from the file like the rest: a long-running writer's
/// memory stays bounded and appends stop paying page faults for a growing buffer.
const FOLD_AT: usize = 1 << 20;

/// Where the file's bytes below `base_len` live (the store never maps the file).
pub enum Base {
    None,
    /// in the file `Store::file`, read with `pread`
    Disk,
    Buf(Vec<u8>),
}

#[derive(Debug)]
pub enum StoreError {
    Io(io::Error),
    /// The file is shorter than what we already indexed: it was truncated or replaced.
    Shrunk {
        had: u64,
        now: u64,
    },
    /// The bytes of an indexed line are no longer a line where the index has one.
    ///
    /// The file was rewritten in place by another program.
    Rewritten {
        offset: u64,
    },
    /// The path names another file than the one we opened (renamed over ours, or removed).
    Replaced,
    /// An appended line's offset does not continue the data we know.
    Offset {
        expected: u64,
        got: u64,
    },
    /// A line we were asked to append is not one whole, valid entry line.
    BadLine(&'static str),
    /// An append to a file-backed store with no writer attached (it was closed meanwhile).
    NoWriter,
    /// Buffered lines could not be written when the writer was let go: the index holds entries
    /// the file does not.
    Unwritten(u64),
    /// An append to a read-only store (one made by [`Store::from_bytes`]).
    ReadOnly,
    /// An entry body with an array-index key, which `JSON.stringify` writes first.
    ///
    /// Nothing was appended; the caller writes the body with a writer that orders keys (see
    /// `append_entry`).
    KeyOrder,
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Io(e) => write!(f, "{e}"),
            StoreError::Shrunk { had, now } => write!(
                f,
                "the session file shrank from {had} to {now} bytes since it was indexed (truncated or replaced by another program)"
            ),
            StoreError::Rewritten { offset } => write!(
                f,
                "the session file was rewritten in place by another program since it was indexed (the line at byte {offset} is no longer there): open it again"
            ),
            StoreError::Offset { expected, got } => {
                write!(f, "appended line at byte {got}, but the data ends at byte {expected}")
            }
            StoreError::BadLine(why) => write!(f, "cannot append the entry: {why}"),
            StoreError::Replaced => write!(
                f,
                "the session file was replaced (another file renamed over it) or removed since it was opened: open it again"
            ),
            StoreError::NoWriter => write!(f, "the session was closed for writing while appending: nothing was appended"),
            StoreError::Unwritten(n) => write!(
                f,
                "{n} bytes of entries appended with durability \"none\" could not be written when the session was closed; \
                 they exist only in this Session object: open the session again to see the file as it is"
            ),
            StoreError::ReadOnly => write!(f, "the session is read-only (made from bytes): nothing was appended"),
            StoreError::KeyOrder => write!(
                f,
                "the entry has an object with an array-index key (JSON.stringify writes those first): nothing was appended"
            ),
        }
    }
}

impl From<io::Error> for StoreError {
    fn from(e: io::Error) -> Self {
        StoreError::Io(e)
    }
}

pub struct Store {
    pub path: Option<PathBuf>,
    /// the file we opened (reads of `Base::Disk` bytes, and what `refresh` scans)
    file: Option<File>,
    base: Base,
    base_len: u64,
    /// lines appended through us beyond `base_len`
    tail: Vec<u8>,
    pub index: Index,
    pub parallel: bool,
    /// Set when our buffered lines were written after lines another program appended.
    ///
    /// Their offsets in the file differ from the ones indexed, so the next refresh rescans the
    /// file.
    rescan: bool,
    /// Bytes of buffered lines a failed close could not write (the index is ahead of the file).
    unwritten: Option<u64>,
    /// Set once the file was seen to shrink: every later read fails.
    pub shrunk: Option<(u64, u64)>,
    /// Set once a refresh's scan saw the bytes change under it (two reads disagreed).
    ///
    /// The entries it had indexed by then may come from either version, so every later read fails
    /// (with [`StoreError::Rewritten`] at this offset) until the file is opened again.
    rewritten: Option<u64>,
    /// where appends are written (none for a reader or an in-memory session)
    sink: Option<Sink>,
    /// reused for lines appended one at a time
    parser: LineParser,
    /// the identity of the file we opened, and whether `path` was seen to name another since
    ident: Option<Ident>,
    replaced: bool,
    /// `end()` when we last checked that `path` still names our file (appends check every
    /// `IDENT_CHECK` bytes)
    checked_to: u64,
    /// set for a store over a byte buffer ([`Store::from_bytes`]): every append fails
    read_only: bool,
    /// what `refresh` checks before it trusts that the file only grew (see [`Guard`])
    guard: Option<Guard>,
    /// how many times `refresh` found the file's size, mtime or ctime changed. Its bytes under the
    /// guard were unchanged.
    ///
    /// Part of `Session.state_key`, so an answer cached before a rewrite the guard cannot see is
    /// never given after it
    pub file_changes: u64,
}

/// Bytes of the file kept when it was last scanned, to tell an append from a rewrite.
///
/// Compared with the file when `refresh` sees it grown or its mtime/ctime changed: the header
/// line's first bytes and the last bytes before
/// the end then scanned. A file rewritten in place (longer, same length, truncated and regrown)
/// has other bytes there; an append does not touch them.
struct Guard {
    head: Vec<u8>,
    tail_at: u64,
    tail: Vec<u8>,
    /// (size, mtime ns, ctime ns) when last checked
    stamp: (u64, i64, i64),
}

/// Bytes kept at each end for [`Guard`] (one `pread` of each when the file changed).
const GUARD_BYTES: u64 = 4096;

fn stamp_of(m: &std::fs::Metadata) -> (u64, i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (
        m.len(),
        m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        m.ctime() * 1_000_000_000 + m.ctime_nsec(),
    )
}

/// The file's identity (device, inode): a file renamed over ours has another.
type Ident = (u64, u64);

fn ident_of(meta: &std::fs::Metadata) -> Ident {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// The first `len` bytes of `f`: kept in memory for a small file, else left on disk.
fn load(f: &File, len: u64) -> io::Result<(Base, u64)> {
    if len == 0 {
        return Ok((Base::None, 0));
    }
    if len < WHOLE_MAX {
        // what the file holds now, up to `len` (it may have shrunk since its length was taken)
        let mut buf = vec![0u8; len as usize];
        let mut n = 0;
        while n < buf.len() {
            match f.read_at(&mut buf[n..], n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(n);
        return Ok((Base::Buf(buf), n as u64));
    }
    Ok((Base::Disk, len))
}

/// Reads exactly `buf.len()` bytes at `offset`; a file that ends first has shrunk.
fn pread_exact(f: &File, buf: &mut [u8], offset: u64, known: u64) -> Result<(), StoreError> {
    match f.read_exact_at(buf, offset) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            let now = f.metadata().map(|m| m.len()).unwrap_or(0);
            Err(StoreError::Shrunk { had: known, now })
        }
        Err(e) => Err(StoreError::Io(e)),
    }
}

/// Whether `line`, read where the index has an entry's line, still is one: its first byte may
/// open a JSON value (or is whitespace), and `next`, the byte read after it, ends the line (`\n`,
/// or the `\r` of `\r\n`) unless the line is the unterminated last one (`at_end`). A file
/// rewritten in place fails this ([`StoreError::Rewritten`] for the callers).
pub(crate) fn line_in_place(line: &[u8], next: Option<u8>, at_end: bool) -> bool {
    let after_ok = at_end || matches!(next, Some(b'\n' | b'\r'));
    let first_ok = line.is_empty()
        || matches!(line[0], b'{' | b'[' | b' ' | b'\t' | b'\r' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n' | 0x80..=0xff | b'\x0b' | b'\x0c');
    after_ok && first_ok
}

/// Scans bytes `[from, to)` of `f` into `index` ([`scan::scan_file`]: both cores read and
/// scan at once, each its own ranges through `pread`). Errs when the file ends before `to` (it
/// shrank meanwhile: [`StoreError::Shrunk`]) or two reads of it disagree (it was rewritten
/// meanwhile: [`StoreError::Rewritten`]).
fn scan_file(
    index: &mut Index,
    f: &File,
    from: u64,
    to: u64,
    parallel: bool,
) -> Result<(), StoreError> {
    let read = |buf: &mut [u8], offset: u64| pread_exact(f, buf, offset, to);
    scan::scan_file(index, &read, from, to, parallel).map_err(|e| match e {
        scan::FileScanError::Read(e) => e,
        scan::FileScanError::Changed { offset } => StoreError::Rewritten { offset },
    })
}

impl Store {
    /// An in-memory session: no file, lines only through `append_line`.
    pub fn in_memory() -> Self {
        Store::with_base(None, Base::None, 0, true)
    }

    fn with_base(path: Option<PathBuf>, base: Base, base_len: u64, parallel: bool) -> Self {
        Store {
            path,
            file: None,
            base,
            base_len,
            tail: Vec::new(),
            index: Index::new(),
            parallel,
            shrunk: None,
            rewritten: None,
            sink: None,
            parser: LineParser::new(),
            ident: None,
            rescan: false,
            unwritten: None,
            replaced: false,
            checked_to: 0,
            read_only: false,
            guard: None,
            file_changes: 0,
        }
    }

    /// A read-only store over a byte buffer (an object read from storage, say).
    ///
    /// The same scan and index as [`Store::open`] on a file holding these bytes; no path, no
    /// refresh, and every append fails with [`StoreError::ReadOnly`]. The store owns the bytes.
    pub fn from_bytes(data: Vec<u8>, parallel: bool) -> Self {
        Store::from_bytes_with(data, parallel, false)
    }

    /// [`Store::from_bytes`], optionally keeping the stats row's usage sums. With `rows`, the index
    /// keeps them as it scans ([`Index::keep_row_sums`]).
    pub fn from_bytes_with(data: Vec<u8>, parallel: bool, rows: bool) -> Self {
        let len = data.len() as u64;
        let base = if data.is_empty() {
            Base::None
        } else {
            Base::Buf(data)
        };
        let mut st = Store::with_base(None, base, len, parallel);
        st.read_only = true;
        if rows {
            st.index.keep_row_sums();
        }
        if let Base::Buf(b) = &st.base {
            scan::scan_into(&mut st.index, &b[..len as usize], 0, parallel);
        }
        st
    }

    /// Opens and scans a file. Never writes to it.
    pub fn open(path: &Path, parallel: bool) -> Result<Self, StoreError> {
        Store::open_with(path, parallel, false)
    }

    /// [`Store::open`], optionally keeping the stats row's usage sums. With `rows`, the index keeps
    /// them as it scans ([`Index::keep_row_sums`]: the fleet's row then reads no line a second
    /// time).
    pub fn open_with(path: &Path, parallel: bool, rows: bool) -> Result<Self, StoreError> {
        let f = File::open(path)?;
        let meta = f.metadata()?;
        let (base, base_len) = load(&f, meta.len())?;
        let mut st = Store::with_base(Some(path.to_path_buf()), base, base_len, parallel);
        st.ident = Some(ident_of(&meta));
        if rows {
            st.index.keep_row_sums();
        }
        match &st.base {
            Base::Buf(b) => {
                scan::scan_into(&mut st.index, b, 0, parallel);
            }
            _ => scan_file(&mut st.index, &f, 0, base_len, parallel)?,
        }
        st.file = Some(f);
        st.set_guard(stamp_of(&meta));
        Ok(st)
    }

    /// [`Store::open`] through the saved index in `cache` (see `crate::saved`, the storage seam).
    ///
    /// A saved index that passes its checks is loaded and only the bytes after it are scanned;
    /// otherwise the file is scanned cold and, when it may be, its index saved. The answers are the
    /// cold open's either way. `None`: [`Store::open`].
    pub fn open_cached(
        path: &Path,
        parallel: bool,
        cache: Option<&saved::CacheCfg>,
    ) -> Result<(Self, saved::CacheState), StoreError> {
        Store::open_cached_with(path, parallel, cache, false)
    }

    /// [`Store::open_cached`], optionally keeping the stats row's usage sums. With `rows`, a cold
    /// scan keeps them ([`Store::open_with`]); a loaded index has none (the row reads its lines).
    pub fn open_cached_with(
        path: &Path,
        parallel: bool,
        cache: Option<&saved::CacheCfg>,
        rows: bool,
    ) -> Result<(Self, saved::CacheState), StoreError> {
        let Some(cfg) = cache else {
            return Ok((
                Store::open_with(path, parallel, rows)?,
                saved::CacheState::Off,
            ));
        };
        let f = File::open(path)?;
        let meta = f.metadata()?;
        if meta.len() < cfg.min_bytes {
            // a small file: its scan costs about what a load would; the cache is not looked at
            drop(f);
            let why = "below the size saved".to_string();
            let st = Store::open_with(path, parallel, rows)?;
            return Ok((st, saved::CacheState::Cold { why, saved: false }));
        }
        let why = match saved::load(cfg, &f, &meta) {
            Ok((index, covered)) => {
                let (base, base_len) = load(&f, meta.len())?;
                if base_len >= covered {
                    let mut st =
                        Store::with_base(Some(path.to_path_buf()), base, base_len, parallel);
                    st.ident = Some(ident_of(&meta));
                    st.index = index;
                    // a few appended lines are scanned on this thread: starting the pool's
                    // threads in a new process costs more than their scan
                    let par = parallel && base_len - covered >= saved::PARALLEL_REST;
                    match &st.base {
                        Base::Buf(b) => {
                            let b = &b[covered as usize..];
                            scan::scan_into(&mut st.index, b, covered, par);
                        }
                        _ => scan_file(&mut st.index, &f, covered, base_len, par)?,
                    }
                    // much appended since the save: save again (a few appended lines are not
                    // worth rewriting the saved index for)
                    if base_len - covered >= saved::RESAVE_MIN.max(covered / 4) {
                        let _ = saved::save(cfg, &st.index, &f, &meta, path);
                    }
                    st.file = Some(f);
                    st.set_guard(stamp_of(&meta));
                    return Ok((st, saved::CacheState::Warm { covered }));
                }
                "the file shrank while it was opened".to_string()
            }
            Err(why) => why,
        };
        drop(f);
        let st = Store::open_with(path, parallel, rows)?;
        let file = st.file.as_ref().expect("opened from a file");
        let same = file
            .metadata()
            .is_ok_and(|m| ident_of(&m) == ident_of(&meta));
        let saved = same && saved::save(cfg, &st.index, file, &meta, path).is_ok();
        Ok((st, saved::CacheState::Cold { why, saved }))
    }

    /// Keeps the bytes [`Guard`] compares (read from what the index covers; nothing when they
    /// cannot be read, and then `refresh` checks nothing more than before).
    fn set_guard(&mut self, stamp: (u64, i64, i64)) {
        let end = self.index.scanned_to.min(self.base_len);
        let hl = match self.index.header_span {
            Some((0, l)) => (l + 1).min(GUARD_BYTES).min(end),
            _ => GUARD_BYTES.min(end),
        };
        let tail_at = end.saturating_sub(GUARD_BYTES);
        let head = self.read(0, hl).map(|b| b.into_owned());
        let tail = self.read(tail_at, end - tail_at).map(|b| b.into_owned());
        self.guard = match (head, tail) {
            (Ok(head), Ok(tail)) => Some(Guard {
                head,
                tail_at,
                tail,
                stamp,
            }),
            _ => None,
        };
    }

    /// Errs when the file's bytes under the guard are not the ones kept.
    ///
    /// The file was rewritten (in place, or truncated and regrown). Checked only when the file's
    /// size, mtime or ctime changed since the last check (an append changes them too, and costs two
    /// small reads).
    fn check_guard(&mut self, f: &File, meta: &std::fs::Metadata) -> Result<(), StoreError> {
        let stamp = stamp_of(meta);
        let Some(g) = &self.guard else { return Ok(()) };
        if g.stamp == stamp {
            return Ok(());
        }
        let mut buf = vec![0u8; g.head.len().max(g.tail.len())];
        let same = |at: u64, want: &[u8], buf: &mut [u8]| -> bool {
            let b = &mut buf[..want.len()];
            f.read_exact_at(b, at).is_ok() && b == want
        };
        if !same(0, &g.head, &mut buf) {
            return Err(StoreError::Rewritten { offset: 0 });
        }
        if !same(g.tail_at, &g.tail, &mut buf) {
            return Err(StoreError::Rewritten { offset: g.tail_at });
        }
        // a file held in memory (below `WHOLE_MAX`) is compared whole: its reads answer from
        // the bytes kept, so a rewrite between the two spans would otherwise never be seen
        if let Base::Buf(b) = &self.base {
            let mut now = vec![0u8; b.len()];
            if f.read_exact_at(&mut now, 0).is_err() || now != *b {
                let at = now.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0);
                return Err(StoreError::Rewritten { offset: at as u64 });
            }
        }
        self.file_changes += 1;
        if let Some(g) = &mut self.guard {
            g.stamp = stamp;
        }
        Ok(())
    }

    /// The (device, inode) of the file opened, None in memory.
    pub fn identity(&self) -> Option<(u64, u64)> {
        self.ident
    }

    /// Bytes known so far (the file as loaded + appended through us).
    pub fn end(&self) -> u64 {
        self.base_len + self.tail.len() as u64
    }

    /// The bytes of `[offset, offset+len)` of the known data (read from the file, or borrowed
    /// from memory). Errs when the file no longer holds them (it shrank).
    pub fn read(&self, offset: u64, len: u64) -> Result<Cow<'_, [u8]>, StoreError> {
        self.check_live()?;
        let end = offset + len;
        if offset >= self.base_len {
            let s = (offset - self.base_len) as usize;
            return Ok(Cow::Borrowed(&self.tail[s..s + len as usize]));
        }
        match &self.base {
            Base::Buf(b) if end <= self.base_len => {
                return Ok(Cow::Borrowed(&b[offset as usize..end as usize]))
            }
            _ => {}
        }
        let mut out = vec![0u8; len as usize];
        let in_base = end.min(self.base_len);
        match &self.base {
            Base::Buf(b) => out[..(in_base - offset) as usize]
                .copy_from_slice(&b[offset as usize..in_base as usize]),
            Base::Disk => {
                let f = self.file.as_ref().expect("a store on disk holds its file");
                pread_exact(
                    f,
                    &mut out[..(in_base - offset) as usize],
                    offset,
                    self.end(),
                )?;
            }
            Base::None => unreachable!("no bytes below base_len"),
        }
        if end > self.base_len {
            let k = (in_base - offset) as usize;
            out[k..].copy_from_slice(&self.tail[..(end - self.base_len) as usize]);
        }
        Ok(Cow::Owned(out))
    }

    /// The bytes of entry `i`'s line (without its line end).
    pub fn line(&self, i: usize) -> Result<Cow<'_, [u8]>, StoreError> {
        let mut out = None;
        self.with_lines(&[i], |_, b| out = Some(b.to_vec()))?;
        Ok(Cow::Owned(out.unwrap_or_default()))
    }

    /// Entry `i`'s `type` when it is a string, else None.
    ///
    /// The name of its code, or, for a name past the full names table ([`crate::index::T_OTHER`]),
    /// the name on its line.
    pub fn entry_type(&self, i: usize) -> Result<Option<String>, StoreError> {
        match self.index.recs.at(i).etype {
            crate::index::T_NONE => Ok(None),
            crate::index::T_OTHER => self.name_on_line(i, crate::index::type_of_line),
            t => Ok(Some(self.index.type_name(t).to_string())),
        }
    }

    /// Entry `i`'s `message.role` when it is a message whose role is a string, else None. v2
    /// `hookMessage` reads `custom`; [`crate::index::R_OTHER`] as in [`Store::entry_type`].
    pub fn entry_role(&self, i: usize) -> Result<Option<String>, StoreError> {
        match self.index.recs.at(i).role {
            0 => Ok(None),
            crate::index::R_OTHER => self.name_on_line(i, crate::index::role_of_line),
            r => Ok(Some(self.index.role_name(r).to_string())),
        }
    }

    /// A name read back from entry `i`'s line.
    ///
    /// The line indexed with a string there that no longer holds one was rewritten.
    fn name_on_line(
        &self,
        i: usize,
        get: fn(&[u8]) -> Option<String>,
    ) -> Result<Option<String>, StoreError> {
        match get(&self.line(i)?) {
            Some(n) => Ok(Some(n)),
            None => Err(StoreError::Rewritten {
                offset: self.index.recs.at(i).offset(),
            }),
        }
    }

    /// Calls `f(k, bytes)` with the bytes of the line of entry `idx[k]`, for every `k`. In file
    /// order, not in the order given. Lines close together in the file are read with one `pread`.
    /// Each line read from the file is checked to still be a line where the index has it (its first
    /// byte opens a JSON value, the byte after it ends the line): a file rewritten in place errs
    /// ([`StoreError::Rewritten`]), one that shrank errs ([`StoreError::Shrunk`]); neither can
    /// fault.
    pub fn with_lines(
        &self,
        idx: &[usize],
        mut f: impl FnMut(usize, &[u8]),
    ) -> Result<(), StoreError> {
        self.check_live()?;
        let end = self.end();
        let recs = &self.index.recs;
        let span = |i: usize| (recs.at(i).offset(), recs.at(i).len as u64);
        let on_disk = matches!(self.base, Base::Disk);
        if !on_disk {
            for (k, &i) in idx.iter().enumerate() {
                let (o, l) = span(i);
                f(k, &self.read(o, l)?);
            }
            return Ok(());
        }
        let mut order: Vec<usize> = (0..idx.len()).collect();
        order.sort_unstable_by_key(|&k| recs.at(idx[k]).offset());
        let mut buf: Vec<u8> = Vec::new();
        let mut a = 0;
        while a < order.len() {
            // a run of lines read together: [run_start, run_end) of the file
            let (o, l) = span(idx[order[a]]);
            let run_start = o;
            let mut run_end = (o + l + 1).min(end);
            let mut b = a + 1;
            while b < order.len() {
                let (o2, l2) = span(idx[order[b]]);
                let e2 = (o2 + l2 + 1).min(end);
                if o2 > run_end + READ_GAP || e2.max(run_end) - run_start > READ_RUN {
                    break;
                }
                run_end = run_end.max(e2);
                b += 1;
            }
            let bytes: Cow<'_, [u8]> = if run_start >= self.base_len {
                self.read(run_start, run_end - run_start)?
            } else {
                buf.clear();
                buf.resize((run_end - run_start) as usize, 0);
                let in_base = run_end.min(self.base_len);
                let f = self.file.as_ref().expect("a store on disk holds its file");
                pread_exact(
                    f,
                    &mut buf[..(in_base - run_start) as usize],
                    run_start,
                    end,
                )?;
                if run_end > self.base_len {
                    let k = (in_base - run_start) as usize;
                    buf[k..].copy_from_slice(&self.tail[..(run_end - self.base_len) as usize]);
                }
                Cow::Borrowed(&buf[..])
            };
            for &k in &order[a..b] {
                let (o, l) = span(idx[k]);
                let s = (o - run_start) as usize;
                let line = &bytes[s..s + l as usize];
                if !line_in_place(line, bytes.get(s + l as usize).copied(), o + l >= end) {
                    return Err(StoreError::Rewritten { offset: o });
                }
                f(k, line);
            }
            a = b;
        }
        Ok(())
    }

    /// Whether the known data ends without a newline (a torn or unterminated last line).
    pub fn ends_without_newline(&self) -> Result<bool, StoreError> {
        let end = self.end();
        Ok(end > 0 && &*self.read(end - 1, 1)? != b"\n")
    }

    /// Scans bytes another writer appended since the last scan. Returns new entries.
    pub fn refresh(&mut self) -> Result<usize, StoreError> {
        let Some(path) = self.path.clone() else {
            return Ok(0);
        };
        self.check_live()?;
        if let Some(n) = self.unwritten {
            return Err(StoreError::Unwritten(n));
        }
        self.check_same_file()?;
        // what we buffered must be in the file before its length is compared with ours
        self.flush_pending()?;
        if self.rescan {
            return self.rescan_all(&path);
        }
        // `path` still names our file (checked above): its descriptor tells the length
        let file = match self.file.take() {
            Some(f) => f,
            None => self.reopen(&path)?,
        };
        let fmeta = match file.metadata() {
            Ok(m) => m,
            Err(e) => {
                self.file = Some(file);
                return Err(e.into());
            }
        };
        let len = fmeta.len();
        let known = self.end();
        if len < known {
            self.file = Some(file);
            return Err(self.poison(known, len));
        }
        let checked = self.check_guard(&file, &fmeta);
        self.file = Some(file);
        // a rewrite caught here poisons the store as one caught mid-scan does: the bytes kept
        // are the old file's, and no later read may answer from them
        self.after_refresh_scan(checked)?;
        if len == known {
            return Ok(0);
        }
        let file = self.file.take().expect("just set");
        let loaded = load(&file, len);
        self.file = Some(file);
        let (base, base_len) = loaded?;
        if base_len < known {
            return Err(self.poison(known, base_len));
        }
        self.base = base;
        self.base_len = base_len;
        self.tail.clear();
        let before = self.index.recs.len();
        let start = match self.index.rollback_provisional() {
            Some((line_start, _)) => line_start,
            None => self.index.scanned_to,
        };
        let r = match &self.base {
            Base::Buf(b) => {
                scan::scan_into(
                    &mut self.index,
                    &b[start as usize..base_len as usize],
                    start,
                    self.parallel,
                );
                Ok(())
            }
            _ => scan_file(
                &mut self.index,
                self.file.as_ref().expect("just set"),
                start,
                base_len,
                self.parallel,
            ),
        };
        self.after_refresh_scan(r)?;
        if let Some(sink) = &mut self.sink {
            sink.flushed_to = base_len;
        }
        self.set_guard(stamp_of(&fmeta));
        Ok(self.index.recs.len().saturating_sub(before))
    }

    /// Indexes the whole file again (our lines and another writer's were interleaved in a way
    /// the index did not see), keeping the leaf by id. Returns how many entries are new.
    fn rescan_all(&mut self, path: &Path) -> Result<usize, StoreError> {
        let leaf_id = match self.index.leaf {
            crate::index::Leaf::Key(k) => self.index.key_string(k).map(str::to_string),
            crate::index::Leaf::Null => None,
        };
        let was_null = matches!(self.index.leaf, crate::index::Leaf::Null);
        let before = self.index.recs.len();
        let file = self.reopen(path)?;
        let len = file.metadata()?.len();
        let (base, base_len) = load(&file, len)?;
        let mut index = Index::new();
        match &base {
            Base::Buf(b) => {
                scan::scan_into(&mut index, b, 0, self.parallel);
            }
            _ => scan_file(&mut index, &file, 0, base_len, self.parallel)?,
        }
        self.file = Some(file);
        if was_null {
            index.leaf = crate::index::Leaf::Null;
        } else if let Some(kid) = leaf_id.as_deref().and_then(|id| index.lookup_str(id)) {
            index.leaf = crate::index::Leaf::Key(kid);
        }
        index.leaf_version = self.index.leaf_version + 1;
        // caches keyed by the generation (the tree) must not take the new index for the old
        index.generation += self.index.generation + 1;
        self.index = index;
        self.base = base;
        self.base_len = base_len;
        self.tail.clear();
        self.rescan = false;
        if let Some(sink) = &mut self.sink {
            sink.flushed_to = base_len;
        }
        if let Some(f) = &self.file {
            if let Ok(m) = f.metadata() {
                self.set_guard(stamp_of(&m));
            }
        }
        Ok(self.index.recs.len().saturating_sub(before))
    }

    /// The file at `path` when it is still the one we opened (a file renamed over ours errs,
    /// from now on).
    fn reopen(&mut self, path: &Path) -> Result<File, StoreError> {
        let file = File::open(path)?;
        let theirs = ident_of(&file.metadata()?);
        if self.ident.is_some_and(|i| i != theirs) {
            self.replaced = true;
            return Err(StoreError::Replaced);
        }
        Ok(file)
    }

    /// Forgets the bytes of a file that shrank under us: every later read errs.
    fn poison(&mut self, had: u64, now: u64) -> StoreError {
        self.shrunk = Some((had, now));
        self.base = Base::None;
        self.base_len = 0;
        self.tail.clear();
        StoreError::Shrunk { had, now }
    }

    /// What a refresh does with its scan's outcome. A file that shrank or changed during the
    /// scan leaves the entries indexed before it noticed in the index, and those may be half
    /// of one version and half of another: the store is poisoned, so that no answer is built
    /// from them (every later read and refresh errs; the caller opens the file again).
    fn after_refresh_scan(&mut self, r: Result<(), StoreError>) -> Result<(), StoreError> {
        match r {
            Err(StoreError::Shrunk { had, now }) => Err(self.poison(had, now)),
            Err(StoreError::Rewritten { offset }) => {
                self.rewritten = Some(offset);
                self.base = Base::None;
                self.base_len = 0;
                self.tail.clear();
                Err(StoreError::Rewritten { offset })
            }
            r => r,
        }
    }

    /// The error to raise for any read once the file shrank, or changed under a refresh.
    pub fn check_live(&self) -> Result<(), StoreError> {
        if let Some((had, now)) = self.shrunk {
            return Err(StoreError::Shrunk { had, now });
        }
        if let Some(offset) = self.rewritten {
            return Err(StoreError::Rewritten { offset });
        }
        if self.index.saved_unrecoverable() {
            // a damaged block of the saved index whose cold scan did not give the saved keys:
            // the indexed bytes changed since the save
            return Err(StoreError::Rewritten { offset: 0 });
        }
        Ok(())
    }

    /// Indexes bytes we just appended to the file at `offset` (or to memory).
    ///
    /// `data` holds whole lines, each ending in `\n`. Returns the index of the last new entry, if
    /// any.
    pub fn append_bytes(&mut self, offset: u64, data: &[u8]) -> Result<Option<u32>, StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly);
        }
        self.check_live()?;
        let end = self.end();
        if offset != end {
            return Err(StoreError::Offset {
                expected: end,
                got: offset,
            });
        }
        let before = self.index.recs.len();
        let start = match self.index.rollback_provisional() {
            Some((line_start, _)) => line_start,
            None => offset,
        };
        self.tail.extend_from_slice(data);
        // rescan from `start` (the start of a torn line we just completed, or `offset`)
        let scan_from = start;
        if scan_from >= self.base_len {
            // all in the tail: scan it in place
            let s = (scan_from - self.base_len) as usize;
            scan::scan_into(&mut self.index, &self.tail[s..], scan_from, false);
        } else {
            let bytes = self.read(scan_from, self.end() - scan_from)?.into_owned();
            scan::scan_into(&mut self.index, &bytes, scan_from, false);
        }
        Ok(if self.index.recs.len() > before {
            Some(self.index.recs.len() as u32 - 1)
        } else {
            None
        })
    }

    // ------------------------------------------------------------------ writing

    /// Appends from now on go to the file open (`O_APPEND`, writer lock held) on `fd`, per
    /// `mode`. The store keeps its own duplicate of the descriptor; everything known so far must
    /// already be in the file.
    pub fn attach_sink(
        &mut self,
        fd: std::os::fd::RawFd,
        mode: Durability,
    ) -> Result<(), StoreError> {
        self.detach_sink()?;
        let sink = Sink::new(fd, mode, self.end())?;
        let theirs = ident_of(&sink.metadata()?);
        if self.ident.is_some_and(|i| i != theirs) {
            // the descriptor is open on another file than the one we indexed
            self.replaced = true;
            return Err(StoreError::Replaced);
        }
        self.sink = Some(sink);
        self.checked_to = self.end();
        Ok(())
    }

    /// Writes out what is buffered and lets go of the descriptor. Always, even when the write
    /// fails: the duplicate must not keep the writer lock alive.
    pub fn detach_sink(&mut self) -> Result<(), StoreError> {
        let r = self.flush_pending();
        if let (Err(_), Some(sink)) = (&r, &self.sink) {
            self.unwritten = Some(self.end() - sink.flushed_to);
        }
        self.sink = None;
        r
    }

    /// Lets go of the descriptor without writing anything. In a child process after `fork`: what is
    /// buffered is the parent's to write, and the lock is the parent's.
    pub fn forget_sink(&mut self) {
        self.sink = None;
    }

    /// Bytes of appended lines held in memory (not yet read back from the file).
    pub fn tail_len(&self) -> usize {
        self.tail.len()
    }

    pub fn sink_mode(&self) -> Option<Durability> {
        self.sink.as_ref().map(|s| s.mode)
    }

    /// Writes out what `Durability::None` buffered, in one `write()` (nothing to do in the
    /// other modes).
    pub fn flush_pending(&mut self) -> Result<(), StoreError> {
        let end = self.end();
        match &self.sink {
            Some(sink) if sink.flushed_to < end => self.check_same_file()?,
            _ => return Ok(()),
        }
        let Some(sink) = &self.sink else {
            return Ok(());
        };
        if sink.state()?.1 != sink.flushed_to {
            // someone else appended since our last write: the file stays whole (whole lines,
            // O_APPEND), but our buffered lines land after theirs, not where they were indexed
            self.rescan = true;
        }
        let Some(sink) = &mut self.sink else {
            return Ok(());
        };
        // buffered bytes always follow the mapped part (refresh flushes before it remaps)
        let s = (sink.flushed_to.max(self.base_len) - self.base_len) as usize;
        sink.write_all(&self.tail[s..])?;
        sink.flushed_to = end;
        Ok(())
    }

    /// Before a line is added.
    ///
    /// `None` mode writes out a full buffer first (so an error here means the new line was not
    /// appended at all); a large in-memory copy that is all in the file is folded into the mapping.
    fn make_room(&mut self) -> Result<(), StoreError> {
        if let Some(sink) = &self.sink {
            if sink.mode == Durability::None && self.end() - sink.flushed_to >= BUFFER_LIMIT {
                self.flush_pending()?;
            }
        }
        if self.tail.len() >= FOLD_AT {
            self.fold();
        }
        Ok(())
    }

    /// Drops the in-memory copy of our appended lines when that is safe.
    ///
    /// The file is then read over exactly the bytes we know. Safe: everything is written, the file
    /// at `path` is still the one we write to, its length is exactly ours (nobody else appended)
    /// and its bytes are those of our copy. Otherwise nothing changes (the copy just stays).
    fn fold(&mut self) {
        use std::os::unix::fs::MetadataExt;
        let end = self.end();
        let (Some(sink), Some(path)) = (&self.sink, &self.path) else {
            return;
        };
        if sink.flushed_to != end {
            return;
        }
        let Ok(ours) = sink.metadata() else { return };
        let Ok(f) = File::open(path) else { return };
        let Ok(meta) = f.metadata() else { return };
        if meta.dev() != ours.dev() || meta.ino() != ours.ino() || meta.len() != end {
            return;
        }
        let mut on_disk = vec![0u8; self.tail.len()];
        if f.read_exact_at(&mut on_disk, self.base_len).is_err() || on_disk[..] != self.tail[..] {
            return;
        }
        self.base = Base::Disk;
        self.file = Some(f);
        self.base_len = end;
        self.tail.clear();
    }

    /// Appends need a live store and, for a file, a writer: a line indexed but never written
    /// would be lost silently.
    fn check_writable(&mut self) -> Result<(), StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly);
        }
        self.check_live()?;
        if let Some(n) = self.unwritten {
            return Err(StoreError::Unwritten(n));
        }
        if self.path.is_some() && self.sink.is_none() {
            return Err(StoreError::NoWriter);
        }
        if self.replaced {
            return Err(StoreError::Replaced);
        }
        // every IDENT_CHECK bytes (and before a buffer is written) the path is looked up again;
        // a write that goes straight to the file first checks, cheaply, that the file it goes
        // to still has a name (a file renamed over ours, or a removal, leaves it with none)
        if self.end() >= self.checked_to + IDENT_CHECK {
            self.check_same_file()?;
        }
        if let Some(sink) = &self.sink {
            if sink.mode != Durability::None {
                let (unlinked, len) = sink.state()?;
                if unlinked {
                    self.replaced = true;
                    return Err(StoreError::Replaced);
                }
                if len != self.end() {
                    // another program (Pi takes no lock) appended since our last write: index
                    // its lines first, so ours is indexed where O_APPEND puts it
                    self.absorb_foreign()?;
                }
            }
        }
        Ok(())
    }

    /// Indexes what another writer appended, keeping our leaf (as taking the lock does).
    ///
    /// The next entry we append still follows our own last one.
    fn absorb_foreign(&mut self) -> Result<(), StoreError> {
        let (leaf, version) = (self.index.leaf, self.index.leaf_version);
        self.refresh()?;
        self.index.leaf = leaf;
        self.index.leaf_version = version + 1;
        Ok(())
    }

    /// Errs (from now on) when `path` no longer names the file we opened.
    ///
    /// Lines we append would go to a file nobody reads.
    fn check_same_file(&mut self) -> Result<(), StoreError> {
        if self.replaced {
            return Err(StoreError::Replaced);
        }
        self.checked_to = self.end();
        let (Some(path), Some(ident)) = (&self.path, self.ident) else {
            return Ok(());
        };
        match std::fs::metadata(path) {
            Ok(meta) if ident_of(&meta) == ident => Ok(()),
            Ok(_) => {
                self.replaced = true;
                Err(StoreError::Replaced)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.replaced = true;
                Err(StoreError::Replaced)
            }
            Err(e) => Err(StoreError::Io(e)),
        }
    }

    /// Before a line is added to a file whose known data ends without a newline (a torn line
    /// another writer left, seen by `refresh`), a newline goes first: an entry never joins it.
    fn terminate_torn_line(&mut self) -> Result<(), StoreError> {
        if self.ends_without_newline()? {
            self.write_and_index(b"\n")?;
        }
        Ok(())
    }

    /// A duplicate of the written file's descriptor, to `fsync` without holding the store. None
    /// without a writer.
    pub fn sync_handle(&self) -> Result<Option<std::os::fd::OwnedFd>, StoreError> {
        match &self.sink {
            Some(sink) => Ok(Some(sink.dup()?)),
            None => Ok(None),
        }
    }

    /// [`Store::sync_handle`] in `Durability::Fsync` mode only: the fsync that appends leave to
    /// the caller.
    pub fn sync_handle_if_durable(&self) -> Result<Option<std::os::fd::OwnedFd>, StoreError> {
        if self.sink_mode() == Some(Durability::Fsync) {
            self.sync_handle()
        } else {
            Ok(None)
        }
    }

    /// Writes whole lines `data` (per the durability mode), then indexes them. Returns the
    /// last new entry's index; nothing is indexed when the write fails. In `Fsync` mode the
    /// caller fsyncs afterwards, without holding the store (see
    /// [`Store::sync_handle_if_durable`]).
    pub fn write_lines(&mut self, data: &[u8]) -> Result<Option<u32>, StoreError> {
        self.check_writable()?;
        if data.first() != Some(&b'\n') {
            self.terminate_torn_line()?;
        }
        self.write_and_index(data)
    }

    /// [`Store::write_lines`] for lines built from the leaf as it was at `leaf_version`.
    ///
    /// Written and indexed only if the leaf has not moved since (another thread appended or
    /// branched); None, with nothing written, if it has.
    pub fn write_lines_if(
        &mut self,
        data: &[u8],
        leaf_version: u64,
    ) -> Result<Option<Option<u32>>, StoreError> {
        if self.index.leaf_version != leaf_version {
            return Ok(None);
        }
        self.write_lines(data).map(Some)
    }

    fn write_and_index(&mut self, data: &[u8]) -> Result<Option<u32>, StoreError> {
        self.make_room()?;
        let offset = self.end();
        let direct = self
            .sink
            .as_ref()
            .is_some_and(|s| s.mode != Durability::None);
        if direct {
            self.sink.as_ref().expect("checked").write_all(data)?;
        }
        let r = self.append_bytes(offset, data);
        self.after_direct_write(direct);
        r
    }

    fn after_direct_write(&mut self, direct: bool) {
        if direct {
            let end = self.end();
            self.sink.as_mut().expect("checked").flushed_to = end;
        }
    }

    /// Appends a new entry in one step.
    ///
    /// Builds its line (Pi's shape: `type`, a fresh id, `parentId` = the leaf, `timestamp` = `ms`,
    /// then the members of the JSON object `body`), checks that it parses, writes it per the
    /// durability mode, and indexes it (it becomes the leaf). Returns the new id. When building,
    /// parsing or writing fails, nothing is appended. In `Fsync` mode the caller fsyncs afterwards
    /// (see [`Store::sync_handle_if_durable`]).
    pub fn append_entry(
        &mut self,
        rng: &mut IdRng,
        etype: &str,
        body: Body<'_>,
        js: bool,
        ms: i64,
    ) -> Result<[u8; 8], StoreError> {
        self.check_writable()?;
        self.terminate_torn_line()?;
        self.make_room()?;
        let offset = self.end();
        let start = self.tail.len();
        let built = match build_line_into(&mut self.tail, &self.index, rng, etype, body, js, ms) {
            Ok(b) => b,
            Err(crate::append::BuildError::BadType) => {
                return Err(StoreError::BadLine(
                    "the entry type must be lowercase letters and '_'",
                ))
            }
            Err(crate::append::BuildError::KeyOrder) => return Err(StoreError::KeyOrder),
            Err(crate::append::BuildError::BadBody) => return Err(StoreError::BadLine(
                "the body must be compact JSON on one line (an object, or a field name and value)",
            )),
        };
        let line = &self.tail[start..];
        // the base members are ours (ASCII, known places); only the body is read
        // SAFETY: each span holds bytes copied from a `&str` (type, parent id) or ASCII we wrote
        // (hex id, ISO timestamp), and starts and ends at character boundaries.
        let text = |(a, b): (usize, usize)| -> &str {
            unsafe { std::str::from_utf8_unchecked(&line[a..b]) }
        };
        let mut sk = Skel::new(TopKind::Object);
        sk.type_ = Val::Str(Cow::Borrowed(text(built.etype)));
        // `","id":"` follows the type
        sk.id = Val::Str(Cow::Borrowed(text((built.etype.1 + 8, built.etype.1 + 16))));
        sk.parent_id = match (built.parent, built.parent_escaped) {
            (Some(span), _) => Val::Str(Cow::Borrowed(text(span))),
            (None, Some(text)) => Val::Str(Cow::Owned(text)),
            (None, None) => match self.index.leaf {
                crate::index::Leaf::Key(k) if self.index.leaf_entry().is_some() => {
                    self.index.scalar_key(k).unwrap_or(Val::Null)
                }
                _ => Val::Null,
            },
        };
        sk.timestamp = Val::Str(Cow::Borrowed(text(built.timestamp)));
        let parsed = match self
            .parser
            .parse_object_line_rest(line, built.rest, &mut sk)
        {
            Some(k) if k + 1 == line.len() && !sk.invalid_utf8 && (k as u64) <= MAX_LINE => Some(k),
            _ => None,
        };
        let Some(k) = parsed else {
            self.tail.truncate(start);
            return Err(StoreError::BadLine("the body is not valid JSON"));
        };
        let id = built.id;
        let direct = self
            .sink
            .as_ref()
            .is_some_and(|s| s.mode != Durability::None);
        if direct {
            if let Err(e) = self.sink.as_ref().expect("checked").write_all(line) {
                self.tail.truncate(start);
                return Err(StoreError::Io(e));
            }
        }
        let pre: Pre = pre_of(&sk);
        let pl = ParsedLine {
            offset,
            len: k as u64,
            line: self.index.lines + 1,
            terminated: true,
            end: offset + line.len() as u64,
            result: LineResult::Value(sk, pre),
            row: None,
        };
        self.index.ingest(&pl);
        rng.prepare(&self.index);
        self.after_direct_write(direct);
        Ok(id)
    }

    pub fn header_bytes(&self) -> Result<Option<Cow<'_, [u8]>>, StoreError> {
        match (&self.index.header.0, self.index.header_span) {
            (HeaderState::Valid, Some((o, l))) => Ok(Some(self.read(o, l)?)),
            _ => Ok(None),
        }
    }
}

// ---- a reader that does not hold the store (the HTML export, `crate::export`) ----------------

/// The known bytes `[0, end)` of a store, readable without holding it.
///
/// The HTML export reads its segments with the GIL released while the session stays usable. A
/// duplicate of the
/// file's descriptor (read with `pread`), or a copy of bytes held in memory, plus the bytes
/// appended through the store. A file that shrinks under it errs ([`StoreError::Shrunk`]).
pub struct DetachedReader {
    file: Option<File>,
    buf: Vec<u8>,
    base_len: u64,
    tail: Vec<u8>,
}

impl Store {
    /// A [`DetachedReader`] of what the store knows now.
    pub fn detached_reader(&self) -> Result<DetachedReader, StoreError> {
        self.check_live()?;
        let (file, buf) = match &self.base {
            Base::Disk => {
                let f = self.file.as_ref().expect("a store on disk holds its file");
                (Some(f.try_clone()?), Vec::new())
            }
            Base::Buf(b) => (None, b[..self.base_len as usize].to_vec()),
            Base::None => (None, Vec::new()),
        };
        Ok(DetachedReader {
            file,
            buf,
            base_len: self.base_len,
            tail: self.tail.clone(),
        })
    }
}

impl DetachedReader {
    /// A reader over bytes in memory (an in-memory session's lines as the exporter lays them).
    pub fn from_bytes(data: Vec<u8>) -> Self {
        DetachedReader {
            file: None,
            base_len: data.len() as u64,
            buf: data,
            tail: Vec::new(),
        }
    }

    /// Bytes known.
    pub fn end(&self) -> u64 {
        self.base_len + self.tail.len() as u64
    }

    /// Bytes `[offset, offset + len)` into `out` (cleared first). Errs past the known end.
    pub fn read_into(&self, offset: u64, len: u64, out: &mut Vec<u8>) -> Result<(), StoreError> {
        if offset.checked_add(len).is_none_or(|e| e > self.end()) {
            return Err(StoreError::Shrunk {
                had: self.end(),
                now: offset.saturating_add(len),
            });
        }
        out.clear();
        out.resize(len as usize, 0);
        self.read_to(offset, out)
    }

    /// Fills `dst` with the bytes from `offset` on. Errs past the known end.
    pub fn read_to(&self, offset: u64, dst: &mut [u8]) -> Result<(), StoreError> {
        let end = offset
            .checked_add(dst.len() as u64)
            .filter(|&e| e <= self.end());
        let Some(end) = end else {
            return Err(StoreError::Shrunk {
                had: self.end(),
                now: offset.saturating_add(dst.len() as u64),
            });
        };
        let in_base = end.min(self.base_len);
        if offset < in_base {
            let part = &mut dst[..(in_base - offset) as usize];
            match &self.file {
                Some(f) => pread_exact(f, part, offset, self.base_len)?,
                None => part.copy_from_slice(&self.buf[offset as usize..in_base as usize]),
            }
        }
        if end > self.base_len {
            let from = offset.max(self.base_len);
            let k = (from - offset) as usize;
            dst[k..].copy_from_slice(
                &self.tail[(from - self.base_len) as usize..(end - self.base_len) as usize],
            );
        }
        Ok(())
    }
}

impl Drop for Store {
    /// Best effort: what `Durability::None` still buffers is written when the store goes away
    /// (the Python layer flushes on `close()` and reports errors there).
    fn drop(&mut self) {
        let _ = self.flush_pending();
    }
}

#[cfg(test)]
mod from_bytes_tests {
    use super::*;

    /// A store over bytes indexes exactly what a store over a file holding them does, and
    /// refuses every append.
    #[test]
    fn from_bytes_matches_open_and_is_read_only() {
        let mut data = Vec::new();
        data.extend_from_slice(b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/p\"}\n");
        data.extend_from_slice(b"{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n");
        data.extend_from_slice(b"{\"type\":\"message\",\"id\":\"b\",broken\n\n");
        // a large entry (80 KiB) between the damaged lines
        let filler = format!("{{\"type\":\"custom\",\"id\":\"c\",\"parentId\":\"a\",\"timestamp\":\"2026-01-01T00:00:02.000Z\",\"data\":\"{}\"}}\n", "x".repeat(80 << 10));
        data.extend_from_slice(filler.as_bytes());
        data.extend_from_slice(b"{\"type\":\"message\",\"id\":\"torn\"");
        let path = std::env::temp_dir().join(format!(
            "sessiontree-from-bytes-{}.jsonl",
            std::process::id()
        ));
        std::fs::write(&path, &data).unwrap();
        let file = Store::open(&path, true).unwrap();
        std::fs::remove_file(&path).unwrap();
        let mut mem = Store::from_bytes(data.clone(), true);
        assert_eq!(mem.end(), file.end());
        assert_eq!(mem.index.recs.len(), file.index.recs.len());
        assert_eq!(mem.index.recs.len(), 2); // a and c: the header, the broken and the torn lines are not entries
        for i in 0..mem.index.recs.len() {
            assert_eq!(mem.line(i).unwrap(), file.line(i).unwrap());
        }
        assert_eq!(mem.index.problems.len(), file.index.problems.len());
        assert!(mem.index.problems.len() >= 3);
        assert_eq!(
            format!("{:?}", mem.index.leaf),
            format!("{:?}", file.index.leaf)
        );
        assert_eq!(mem.header_bytes().unwrap(), file.header_bytes().unwrap());
        assert!(mem.ends_without_newline().unwrap());
        let end = mem.end();
        assert!(matches!(
            mem.append_bytes(end, b"{}\n"),
            Err(StoreError::ReadOnly)
        ));
        assert!(matches!(
            mem.write_lines(b"{}\n"),
            Err(StoreError::ReadOnly)
        ));
        assert_eq!(mem.index.recs.len(), 2); // a and c: the header, the broken and the torn lines are not entries
        assert_eq!(mem.refresh().unwrap(), 0);
        let empty = Store::from_bytes(Vec::new(), false);
        assert_eq!((empty.end(), empty.index.recs.len()), (0, 0));
    }
}

#[cfg(test)]
mod refresh_poison_tests {
    use super::*;

    const HEAD: &[u8] = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/p\"}\n";
    const A: &[u8] = b"{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";

    /// A refresh whose scan saw the file change under it (`scan_file`'s `Changed`, raised as
    /// `Rewritten`) has indexed entries of an unknown mix of versions: the store must answer
    /// nothing more from them. Before the fix, reads and a later refresh went on as if the
    /// half-scanned entries were sound.
    #[test]
    fn a_change_seen_mid_scan_poisons_the_store() {
        let path = std::env::temp_dir().join(format!(
            "sessiontree-refresh-poison-{}.jsonl",
            std::process::id()
        ));
        let mut data = HEAD.to_vec();
        data.extend_from_slice(A);
        std::fs::write(&path, &data).unwrap();
        let mut st = Store::open(&path, false).unwrap();
        assert_eq!(st.index.recs.len(), 1);
        assert_eq!(&*st.line(0).unwrap(), A.strip_suffix(b"\n").unwrap());
        // what `refresh` does when its scan reports the change
        let r = st.after_refresh_scan(Err(StoreError::Rewritten { offset: 7 }));
        assert!(
            matches!(r, Err(StoreError::Rewritten { offset: 7 })),
            "{r:?}"
        );
        assert!(matches!(
            st.line(0),
            Err(StoreError::Rewritten { offset: 7 })
        ));
        assert!(matches!(
            st.refresh(),
            Err(StoreError::Rewritten { offset: 7 })
        ));
        let end = st.end();
        assert!(st.append_bytes(end, A).is_err());
        // other outcomes pass through and poison nothing
        let mut ok = Store::open(&path, false).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(ok.after_refresh_scan(Ok(())).is_ok());
        assert!(ok.line(0).is_ok());
    }
}
