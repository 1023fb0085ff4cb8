//! A session's bytes and its index: a read-only memory map of the file (or nothing, for an
//! in-memory session) plus the lines appended through us since the map was made.
//! `refresh()` maps the file again and scans only the bytes that are new.

use crate::index::{Index, HeaderState};
use crate::scan;
use memmap2::Mmap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Files smaller than this are read instead of mapped.
const MMAP_MIN: u64 = 64 << 10;

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
    /// An appended line's offset does not continue the data we know.
    Offset { expected: u64, got: u64 },
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
    /// Set once the file was seen to shrink: the old mapping may point at vanished pages, so
    /// it is dropped and every later read must fail instead of faulting.
    pub shrunk: Option<(u64, u64)>,
}

fn map_file(path: &Path) -> io::Result<(Mapped, u64)> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok((Mapped::None, 0));
    }
    if len < MMAP_MIN {
        let mut buf = Vec::with_capacity(len as usize);
        f.read_to_end(&mut buf)?;
        let n = buf.len() as u64;
        return Ok((Mapped::Buf(buf), n));
    }
    // SAFETY: the map is read-only; a session file is append-only by contract. If another
    // program truncates it while mapped, reads past the new end would fault, so `refresh()`
    // checks the length first and we never touch bytes beyond the length we scanned.
    let m = unsafe { Mmap::map(&f)? };
    let n = m.len() as u64;
    Ok((Mapped::Map(m), n))
}

impl Store {
    /// An in-memory session: no file, lines only through `append_line`.
    pub fn in_memory() -> Self {
        Store { path: None, map: Mapped::None, map_len: 0, tail: Vec::new(), index: Index::new(), parallel: true, shrunk: None }
    }

    /// Opens and scans a file. Never writes to it.
    pub fn open(path: &Path, parallel: bool) -> Result<Self, StoreError> {
        let (map, map_len) = map_file(path)?;
        let mut st = Store { path: Some(path.to_path_buf()), map, map_len, tail: Vec::new(), index: Index::new(), parallel, shrunk: None };
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
        let len = std::fs::metadata(&path)?.len();
        let known = self.end();
        if let Some((had, now)) = self.shrunk {
            return Err(StoreError::Shrunk { had, now });
        }
        if len < known {
            return Err(self.poison(known, len));
        }
        if len == known {
            return Ok(0);
        }
        let (map, map_len) = map_file(&path)?;
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
