//! A session's bytes and its index: a read-only memory map of the file (or nothing, for an
//! in-memory session) plus the lines appended through us since the map was made.
//! `refresh()` maps the file again and scans only the bytes that are new.

use crate::append::{build_line_into, Body, Durability, IdRng, Sink, BUFFER_LIMIT};
use crate::index::{pre_of, HeaderState, Index, LineResult, ParsedLine, Pre, MAX_LINE};
use crate::json::{LineParser, Skel, TopKind, Val};
use std::borrow::Cow;
use crate::scan;
use memmap2::Mmap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Files smaller than this are read instead of mapped.
const MMAP_MIN: u64 = 64 << 10;
/// Buffered (`Durability::None`) appends check that the path still names the file we write
/// at least this often (bytes); direct writes check every time.
const IDENT_CHECK: u64 = 64 << 10;
/// Once this many of our appended bytes are in the file, the file is mapped again and the
/// in-memory copy dropped (its buffer kept): a long-running writer's memory stays bounded and
/// appends stop paying page faults for a growing buffer.
const FOLD_AT: usize = 1 << 20;

pub enum Mapped {
    None,
    Map(Mmap),
    Buf(Vec<u8>),
}

impl Mapped {
    fn bytes(&self) -> &[u8] {
        match self {
            Mapped::None => &[],
            Mapped::Map(m) => m,
            Mapped::Buf(b) => b,
        }
    }
}

#[derive(Debug)]
pub enum StoreError {
    Io(io::Error),
    /// The file is shorter than what we already indexed: it was truncated or replaced.
    Shrunk { had: u64, now: u64 },
    /// The path names another file than the one we opened (renamed over ours, or removed).
    Replaced,
    /// An appended line's offset does not continue the data we know.
    Offset { expected: u64, got: u64 },
    /// A line we were asked to append is not one whole, valid entry line.
    BadLine(&'static str),
    /// An append to a file-backed store with no writer attached (it was closed meanwhile).
    NoWriter,
    /// Buffered lines could not be written when the writer was let go: the index holds entries
    /// the file does not.
    Unwritten(u64),
    /// An append to a read-only store (one made by [`Store::from_bytes`]).
    ReadOnly,
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Io(e) => write!(f, "{e}"),
            StoreError::Shrunk { had, now } => write!(
                f,
                "the session file shrank from {had} to {now} bytes since it was indexed (truncated or replaced by another program)"
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
    map: Mapped,
    map_len: u64,
    /// lines appended through us beyond `map_len`
    tail: Vec<u8>,
    pub index: Index,
    pub parallel: bool,
    /// Set when our buffered lines were written after lines another program appended: their
    /// offsets in the file differ from the ones indexed, so the next refresh rescans the file.
    rescan: bool,
    /// Bytes of buffered lines a failed close could not write (the index is ahead of the file).
    unwritten: Option<u64>,
    /// Set once the file was seen to shrink: the old mapping may point at vanished pages, so
    /// it is dropped and every later read must fail instead of faulting.
    pub shrunk: Option<(u64, u64)>,
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
}

/// The file's identity (device, inode): a file renamed over ours has another.
type Ident = (u64, u64);

fn ident_of(meta: &std::fs::Metadata) -> Ident {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

fn map_file(path: &Path) -> io::Result<(Mapped, u64, Ident)> {
    let mut f = File::open(path)?;
    let meta = f.metadata()?;
    let (len, ident) = (meta.len(), ident_of(&meta));
    if len == 0 {
        return Ok((Mapped::None, 0, ident));
    }
    if len < MMAP_MIN {
        let mut buf = Vec::with_capacity(len as usize);
        f.read_to_end(&mut buf)?;
        let n = buf.len() as u64;
        return Ok((Mapped::Buf(buf), n, ident));
    }
    // SAFETY: the map is read-only; a session file is append-only by contract. If another
    // program truncates it while mapped, reads past the new end would fault, so `refresh()`
    // checks the length first and we never touch bytes beyond the length we scanned.
    let m = unsafe { Mmap::map(&f)? };
    let n = m.len() as u64;
    Ok((Mapped::Map(m), n, ident))
}

impl Store {
    /// An in-memory session: no file, lines only through `append_line`.
    pub fn in_memory() -> Self {
        Store::with_map(None, Mapped::None, 0, true)
    }

    fn with_map(path: Option<PathBuf>, map: Mapped, map_len: u64, parallel: bool) -> Self {
        Store {
            path,
            map,
            map_len,
            tail: Vec::new(),
            index: Index::new(),
            parallel,
            shrunk: None,
            sink: None,
            parser: LineParser::new(),
            ident: None,
            rescan: false,
            unwritten: None,
            replaced: false,
            checked_to: 0,
            read_only: false,
        }
    }

    /// A read-only store over a byte buffer (an object read from storage, say): the same scan
    /// and index as [`Store::open`] on a file holding these bytes; no path, no refresh, and
    /// every append fails with [`StoreError::ReadOnly`]. The store owns the bytes.
    pub fn from_bytes(data: Vec<u8>, parallel: bool) -> Self {
        let len = data.len() as u64;
        let map = if data.is_empty() { Mapped::None } else { Mapped::Buf(data) };
        let mut st = Store::with_map(None, map, len, parallel);
        st.read_only = true;
        let bytes = st.map.bytes();
        scan::scan_into(&mut st.index, &bytes[..len as usize], 0, parallel);
        st
    }

    /// Opens and scans a file. Never writes to it.
    pub fn open(path: &Path, parallel: bool) -> Result<Self, StoreError> {
        let (map, map_len, ident) = map_file(path)?;
        let mut st = Store::with_map(Some(path.to_path_buf()), map, map_len, parallel);
        st.ident = Some(ident);
        let data = st.map.bytes();
        scan::scan_into(&mut st.index, &data[..map_len as usize], 0, parallel);
        Ok(st)
    }

    /// Bytes known so far (mapped + appended through us).
    pub fn end(&self) -> u64 {
        self.map_len + self.tail.len() as u64
    }

    /// The bytes of `[offset, offset+len)`.
    pub fn slice(&self, offset: u64, len: u64) -> &[u8] {
        if offset >= self.map_len {
            let s = (offset - self.map_len) as usize;
            &self.tail[s..s + len as usize]
        } else {
            &self.map.bytes()[offset as usize..(offset + len) as usize]
        }
    }

    pub fn line(&self, i: usize) -> &[u8] {
        let r = &self.index.recs[i];
        self.slice(r.offset, r.len as u64)
    }

    /// Whether the known data ends without a newline (a torn or unterminated last line).
    pub fn ends_without_newline(&self) -> bool {
        let end = self.end();
        end > 0 && self.slice(end - 1, 1) != b"\n"
    }

    /// Scans bytes another writer appended since the last scan. Returns new entries.
    pub fn refresh(&mut self) -> Result<usize, StoreError> {
        let Some(path) = self.path.clone() else { return Ok(0) };
        if let Some((had, now)) = self.shrunk {
            return Err(StoreError::Shrunk { had, now });
        }
        if let Some(n) = self.unwritten {
            return Err(StoreError::Unwritten(n));
        }
        self.check_same_file()?;
        // what we buffered must be in the file before its length is compared with ours
        self.flush_pending()?;
        if self.rescan {
            return self.rescan_all(&path);
        }
        let len = std::fs::metadata(&path)?.len();
        let known = self.end();
        if len < known {
            return Err(self.poison(known, len));
        }
        if len == known {
            return Ok(0);
        }
        let (map, map_len, ident) = map_file(&path)?;
        if self.ident.is_some_and(|i| i != ident) {
            self.replaced = true;
            return Err(StoreError::Replaced);
        }
        if map_len < known {
            return Err(self.poison(known, map_len));
        }
        self.map = map;
        self.map_len = map_len;
        self.tail.clear();
        let before = self.index.recs.len();
        let start = match self.index.rollback_provisional() {
            Some((line_start, _)) => line_start,
            None => self.index.scanned_to,
        };
        let data = self.map.bytes();
        scan::scan_into(&mut self.index, &data[start as usize..map_len as usize], start, self.parallel);
        if let Some(sink) = &mut self.sink {
            sink.flushed_to = map_len;
        }
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
        let (map, map_len, ident) = map_file(path)?;
        if self.ident.is_some_and(|i| i != ident) {
            self.replaced = true;
            return Err(StoreError::Replaced);
        }
        let mut index = Index::new();
        scan::scan_into(&mut index, &map.bytes()[..map_len as usize], 0, self.parallel);
        if was_null {
            index.leaf = crate::index::Leaf::Null;
        } else if let Some(kid) = leaf_id.as_deref().and_then(|id| index.lookup_str(id)) {
            index.leaf = crate::index::Leaf::Key(kid);
        }
        index.leaf_version = self.index.leaf_version + 1;
        // caches keyed by the generation (the tree) must not take the new index for the old
        index.generation += self.index.generation + 1;
        self.index = index;
        self.map = map;
        self.map_len = map_len;
        self.tail.clear();
        self.rescan = false;
        if let Some(sink) = &mut self.sink {
            sink.flushed_to = map_len;
        }
        Ok(self.index.recs.len().saturating_sub(before))
    }

    /// Forgets the mapping of a file that shrank under us (reading it could fault).
    fn poison(&mut self, had: u64, now: u64) -> StoreError {
        self.shrunk = Some((had, now));
        self.map = Mapped::None;
        self.map_len = 0;
        self.tail.clear();
        StoreError::Shrunk { had, now }
    }

    /// The error to raise for any read once the file shrank.
    pub fn check_live(&self) -> Result<(), StoreError> {
        match self.shrunk {
            Some((had, now)) => Err(StoreError::Shrunk { had, now }),
            None => Ok(()),
        }
    }

    /// Indexes bytes we just appended to the file at `offset` (or to memory): `data` holds
    /// whole lines, each ending in `\n`. Returns the index of the last new entry, if any.
    pub fn append_bytes(&mut self, offset: u64, data: &[u8]) -> Result<Option<u32>, StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly);
        }
        self.check_live()?;
        let end = self.end();
        if offset != end {
            return Err(StoreError::Offset { expected: end, got: offset });
        }
        let before = self.index.recs.len();
        let start = match self.index.rollback_provisional() {
            Some((line_start, _)) => line_start,
            None => offset,
        };
        self.tail.extend_from_slice(data);
        // rescan from `start` (the start of a torn line we just completed, or `offset`)
        let scan_from = start;
        if scan_from >= self.map_len {
            // all in the tail: scan it in place
            let s = (scan_from - self.map_len) as usize;
            scan::scan_into(&mut self.index, &self.tail[s..], scan_from, false);
        } else {
            let bytes: Vec<u8> = self.slice_owned(scan_from, self.end() - scan_from);
            scan::scan_into(&mut self.index, &bytes, scan_from, false);
        }
        Ok(if self.index.recs.len() > before { Some(self.index.recs.len() as u32 - 1) } else { None })
    }

    // ------------------------------------------------------------------ writing

    /// Appends from now on go to the file open (`O_APPEND`, writer lock held) on `fd`, per
    /// `mode`. The store keeps its own duplicate of the descriptor; everything known so far must
    /// already be in the file.
    pub fn attach_sink(&mut self, fd: std::os::fd::RawFd, mode: Durability) -> Result<(), StoreError> {
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

    /// Writes out what is buffered and lets go of the descriptor (always, even when the write
    /// fails: the duplicate must not keep the writer lock alive).
    pub fn detach_sink(&mut self) -> Result<(), StoreError> {
        let r = self.flush_pending();
        if let (Err(_), Some(sink)) = (&r, &self.sink) {
            self.unwritten = Some(self.end() - sink.flushed_to);
        }
        self.sink = None;
        r
    }

    /// Bytes of appended lines held in memory (not yet folded into the mapping).
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
        let Some(sink) = &self.sink else { return Ok(()) };
        if sink.state()?.1 != sink.flushed_to {
            // someone else appended since our last write: the file stays whole (whole lines,
            // O_APPEND), but our buffered lines land after theirs, not where they were indexed
            self.rescan = true;
        }
        let Some(sink) = &mut self.sink else { return Ok(()) };
        // buffered bytes always follow the mapped part (refresh flushes before it remaps)
        let s = (sink.flushed_to.max(self.map_len) - self.map_len) as usize;
        sink.write_all(&self.tail[s..])?;
        sink.flushed_to = end;
        Ok(())
    }

    /// Before a line is added: `None` mode writes out a full buffer first (so an error here
    /// means the new line was not appended at all); a large in-memory copy that is all in the
    /// file is folded into the mapping.
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

    /// Maps the file again over exactly the bytes we know and drops the in-memory copy of our
    /// appended lines, when that is safe: everything is written, the file at `path` is still the
    /// one we write to, its length is exactly ours (nobody else appended) and its bytes are
    /// those of our copy. Otherwise nothing changes (the copy just stays).
    fn fold(&mut self) {
        use std::os::unix::fs::MetadataExt;
        let end = self.end();
        let (Some(sink), Some(path)) = (&self.sink, &self.path) else { return };
        if sink.flushed_to != end {
            return;
        }
        let Ok(ours) = sink.metadata() else { return };
        let Ok(f) = File::open(path) else { return };
        let Ok(meta) = f.metadata() else { return };
        if meta.dev() != ours.dev() || meta.ino() != ours.ino() || meta.len() != end {
            return;
        }
        // SAFETY: read-only map of `end` bytes of a file we hold the writer lock on (see map_file).
        let Ok(m) = (unsafe { memmap2::MmapOptions::new().len(end as usize).map(&f) }) else { return };
        if m[self.map_len as usize..] != self.tail[..] {
            return;
        }
        self.map = Mapped::Map(m);
        self.map_len = end;
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

    /// Indexes what another writer appended, keeping our leaf (as taking the lock does): the
    /// next entry we append still follows our own last one.
    fn absorb_foreign(&mut self) -> Result<(), StoreError> {
        let (leaf, version) = (self.index.leaf, self.index.leaf_version);
        self.refresh()?;
        self.index.leaf = leaf;
        self.index.leaf_version = version + 1;
        Ok(())
    }

    /// Errs (from now on) when `path` no longer names the file we opened: lines we append would
    /// go to a file nobody reads.
    fn check_same_file(&mut self) -> Result<(), StoreError> {
        if self.replaced {
            return Err(StoreError::Replaced);
        }
        self.checked_to = self.end();
        let (Some(path), Some(ident)) = (&self.path, self.ident) else { return Ok(()) };
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
        if self.ends_without_newline() {
            self.write_and_index(b"\n")?;
        }
        Ok(())
    }

    /// A duplicate of the written file's descriptor, to `fsync` without holding the store
    /// (None without a writer).
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

    fn write_and_index(&mut self, data: &[u8]) -> Result<Option<u32>, StoreError> {
        self.make_room()?;
        let offset = self.end();
        let direct = self.sink.as_ref().is_some_and(|s| s.mode != Durability::None);
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

    /// Appends a new entry in one step: builds its line (Pi's shape: `type`, a fresh id,
    /// `parentId` = the leaf, `timestamp` = `ms`, then the members of the JSON object `body`),
    /// checks that it parses, writes it per the durability mode, and indexes it (it becomes the
    /// leaf). Returns the new id. When building, parsing or writing fails, nothing is appended.
    /// In `Fsync` mode the caller fsyncs afterwards (see [`Store::sync_handle_if_durable`]).
    pub fn append_entry(&mut self, rng: &mut IdRng, etype: &str, body: Body<'_>, ms: i64) -> Result<[u8; 8], StoreError> {
        self.check_writable()?;
        self.terminate_torn_line()?;
        self.make_room()?;
        let offset = self.end();
        let start = self.tail.len();
        let built = match build_line_into(&mut self.tail, &self.index, rng, etype, body, ms) {
            Ok(b) => b,
            Err(crate::append::BuildError::BadType) => return Err(StoreError::BadLine("the entry type must be lowercase letters and '_'")),
            Err(crate::append::BuildError::BadBody) => {
                return Err(StoreError::BadLine("the body must be compact JSON on one line (an object, or a field name and value)"))
            }
        };
        let line = &self.tail[start..];
        // the base members are ours (ASCII, known places); only the body is read
        // SAFETY: each span holds bytes copied from a `&str` (type, parent id) or ASCII we wrote
        // (hex id, ISO timestamp), and starts and ends at character boundaries.
        let text = |(a, b): (usize, usize)| -> &str { unsafe { std::str::from_utf8_unchecked(&line[a..b]) } };
        let mut sk = Skel::new(TopKind::Object);
        sk.type_ = Val::Str(Cow::Borrowed(text(built.etype)));
        // `","id":"` follows the type
        sk.id = Val::Str(Cow::Borrowed(text((built.etype.1 + 8, built.etype.1 + 16))));
        sk.parent_id = match (built.parent, built.parent_escaped) {
            (Some(span), _) => Val::Str(Cow::Borrowed(text(span))),
            (None, Some(text)) => Val::Str(Cow::Owned(text)),
            (None, None) => match self.index.leaf {
                crate::index::Leaf::Key(k) if self.index.leaf_entry().is_some() => self.index.scalar_key(k).unwrap_or(Val::Null),
                _ => Val::Null,
            },
        };
        sk.timestamp = Val::Str(Cow::Borrowed(text(built.timestamp)));
        let parsed = match self.parser.parse_object_line_rest(line, built.rest, &mut sk) {
            Some(k) if k + 1 == line.len() && !sk.invalid_utf8 && (k as u64) <= MAX_LINE => Some(k),
            _ => None,
        };
        let Some(k) = parsed else {
            self.tail.truncate(start);
            return Err(StoreError::BadLine("the body is not valid JSON"));
        };
        let id = built.id;
        let direct = self.sink.as_ref().is_some_and(|s| s.mode != Durability::None);
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
        };
        self.index.ingest(&pl);
        rng.prepare(&self.index);
        self.after_direct_write(direct);
        Ok(id)
    }

    fn slice_owned(&self, offset: u64, len: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(len as usize);
        let mut o = offset;
        let end = offset + len;
        if o < self.map_len {
            let e = end.min(self.map_len);
            out.extend_from_slice(&self.map.bytes()[o as usize..e as usize]);
            o = e;
        }
        if o < end {
            let s = (o - self.map_len) as usize;
            out.extend_from_slice(&self.tail[s..s + (end - o) as usize]);
        }
        out
    }

    pub fn header_bytes(&self) -> Option<&[u8]> {
        match (&self.index.header.0, self.index.header_span) {
            (HeaderState::Valid, Some((o, l))) => Some(self.slice(o, l)),
            _ => None,
        }
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
        // large enough to be mapped rather than read
        let filler = format!("{{\"type\":\"custom\",\"id\":\"c\",\"parentId\":\"a\",\"timestamp\":\"2026-01-01T00:00:02.000Z\",\"data\":\"{}\"}}\n", "x".repeat(80 << 10));
        data.extend_from_slice(filler.as_bytes());
        data.extend_from_slice(b"{\"type\":\"message\",\"id\":\"torn\"");
        let path = std::env::temp_dir().join(format!("sessiontree-from-bytes-{}.jsonl", std::process::id()));
        std::fs::write(&path, &data).unwrap();
        let file = Store::open(&path, true).unwrap();
        std::fs::remove_file(&path).unwrap();
        let mut mem = Store::from_bytes(data.clone(), true);
        assert_eq!(mem.end(), file.end());
        assert_eq!(mem.index.recs.len(), file.index.recs.len());
        assert_eq!(mem.index.recs.len(), 2); // a and c: the header, the broken and the torn lines are not entries
        for i in 0..mem.index.recs.len() {
            assert_eq!(mem.line(i), file.line(i));
        }
        assert_eq!(mem.index.problems.len(), file.index.problems.len());
        assert!(mem.index.problems.len() >= 3);
        assert_eq!(format!("{:?}", mem.index.leaf), format!("{:?}", file.index.leaf));
        assert_eq!(mem.header_bytes(), file.header_bytes());
        assert!(mem.ends_without_newline());
        let end = mem.end();
        assert!(matches!(mem.append_bytes(end, b"{}\n"), Err(StoreError::ReadOnly)));
        assert!(matches!(mem.write_lines(b"{}\n"), Err(StoreError::ReadOnly)));
        assert_eq!(mem.index.recs.len(), 2); // a and c: the header, the broken and the torn lines are not entries
        assert_eq!(mem.refresh().unwrap(), 0);
        let empty = Store::from_bytes(Vec::new(), false);
        assert_eq!((empty.end(), empty.index.recs.len()), (0, 0));
    }
}
