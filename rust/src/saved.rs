//! The saved index: the storage seam between a cold scan and a warm open. After a cold scan
//! the index can be written to a cache folder of ours; a later open (any process) checks the
//! saved file against the session file, loads it, and scans only the bytes appended since.
//! [`crate::store::Store::open_cached`] calls [`load`] and [`save`]; nothing else in the core
//! knows the cache exists.
//!
//! One file per session file, named after the file's identity (`{dev:016x}-{ino:016x}.stidx`).
//! Layout (native byte order; the header names the order, the record size and the format
//! version, and a file of another kind is ignored):
//!
//! * a fixed 128-byte header: magic, format version, byte-order mark, record size, pointer
//!   width, then what the index covers (device, inode, indexed length, the file's size, mtime
//!   and ctime in nanoseconds as they were at the scan, a fingerprint of sampled blocks), the
//!   lengths of the sections and a checksum of all of it (the header, the path and a hash of
//!   each section);
//! * the session file's absolute path as it was opened (at most [`PATH_MAX`] bytes): only
//!   eviction reads it, to tell whether that file still exists as the inode indexed;
//! * the index's meta section (`index::persist`): a stamp of the fixed type and role names
//!   (an index saved by a build with other fixed names is refused), names, labels, problems,
//!   line runs, targets, header state, the count of duplicate ids;
//! * the key-group table: per group of [`KEY_GROUP`] keys, the checksum of its key records and
//!   key bytes and where its bytes start (16 bytes);
//! * the records-block table: per block of [`REC_BLOCK`] records, its checksum (8 bytes);
//! * the winners-block table: per block of [`REC_BLOCK`] key ids, its checksum (8 bytes);
//! * the key records (8 bytes each) and the key bytes, the records, as their bytes (28 each),
//!   and the winners (the by-id map: per key id, the entry that owns it, 4 bytes each), none
//!   read at load: a query reads the groups and blocks it needs (`index::keystore`,
//!   `index::recs`), each checked against its checksum and bounds when read; blocks of
//!   records, winners and the lookup are kept in the process's `index::BlockCache` under its
//!   byte budget (past it, dropped and read and checked again when needed), key groups once
//!   read;
//! * the lookup-block table: per block of [`REC_BLOCK`] entries of the key lookup, its checksum
//!   and its first entry's hash tag (16 bytes), then the key lookup (`index::lookup`: per
//!   string, number and boolean key, `hash >> 32 << 32 | key id`, ascending, hashed with the seed
//!   that ends the meta), read on demand like the records.
//!
//! The header's checksum covers the header, the path, the meta and the four tables; through
//! the tables, every group of keys and every block of records, winners and lookup entries. A
//! load reads and checks the header, the path, the meta and the tables, nothing that grows with
//! the entries but the tables (40 bytes per 1,024 entries); a link followed reads the winners'
//! block it needs, an id looked up (a query's, or an appended line's id and parent) the lookup
//! block and the key group it needs. Lines appended since the save are indexed on top (their
//! keys in a table of their own, the winners they change in a small map), so a warm open
//! after an append costs what the appended lines cost; the full by-id map is built only when a
//! whole copy is asked for (a save). A block found damaged when read is served from a cold
//! scan of the session file (the same answers, see `index::recs`); nothing is used before it
//! is checked.
//!
//! The check (see docs/reliability.md): same (device, inode); the file at least the indexed
//! length; if it is exactly that long, the same mtime and ctime (ctime cannot be set back by a
//! program); the fingerprint of [`FP_BLOCKS`] blocks of [`FP_BLOCK`] bytes (the first, the
//! last before the indexed end, the others evenly spaced) equal; the checksum equal; then
//! every length, offset, key id and code bounds-checked while restoring. Any doubt: the cold
//! scan. Nothing here panics on input, reads past what it checked, or allocates more than a
//! bounded multiple of the session file's size.
//!
//! Writes: the folder is created 0700 and opened `O_DIRECTORY|O_NOFOLLOW` (a symlink, a folder
//! owned by another user or writable by others is refused); files are written to an `O_EXCL`
//! temp file (mode 0600) in that folder and renamed over the final name (two processes saving
//! at once each rename a whole file; a symlink planted at the name is replaced, never
//! followed). A failed save (full disk, unwritable folder) only means the next open is cold.
//!
//! Eviction ([`evict`], after every save): a saved index whose session file no longer exists,
//! or is now another inode or another file at that inode (rewritten), is removed; then, while
//! the folder's saved indexes total more than the cap, the least recently used go (a load
//! sets the saved file's mtime: its last use); a process does this at most once per
//! [`CacheCfg::evict_every_s`]. Only files this module would load are touched
//! (our name, magic and layout), through the folder's descriptor, never through a symlink.

use crate::index::{
    lookup_block_ok, recs_bytes, BlockChecks, Index, KeyStore, Paged, PagedKeys, PagedRecs, Rec,
    SavedLookup, KEY_GROUP, KID_NULL, KID_UNDEFINED, NONE, REC_BLOCK, T_NONE,
};
use std::ffi::CString;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

const MAGIC: [u8; 8] = *b"STIDX\0\r\n";
/// Bumped whenever the layout or the meaning of any field changes. This also covers the fingerprint
/// and checksum hash, foldhash 0.2's fixed state.
pub const FORMAT_VERSION: u32 = 7;
const ORDER_MARK: u32 = 0x0102_0304;
const HEADER_LEN: usize = 128;
/// Bytes per sampled block of the fingerprint.
pub const FP_BLOCK: u64 = 4096;
/// Blocks sampled: the first, the last before the indexed end, and the rest evenly spaced.
pub const FP_BLOCKS: u64 = 16;
const SEED: u64 = 0x5e55_1017_7ee5_0001;
/// A saved index is at most this many times the session file's size (plus 1 MiB).
///
/// A file claiming more is not read (a real index is well under half the file).
const MAX_RATIO: u64 = 32;
pub const SUFFIX: &str = ".stidx";
/// A warm open saves again when at least this much was appended since the save. And at least a
/// quarter of what was covered.
pub const RESAVE_MIN: u64 = 8 << 20;
/// Below this many appended bytes, a warm open scans them on the calling thread. The pool's threads
/// cost more to start in a new process than a few MiB cost to scan.
pub const PARALLEL_REST: u64 = 8 << 20;

/// Where saved indexes go, from what file size on, and how much they may total.
#[derive(Clone, Debug)]
pub struct CacheCfg {
    pub dir: PathBuf,
    /// files smaller than this are not saved (a scan of them is about as fast as a load)
    pub min_bytes: u64,
    /// the saved indexes in `dir` total at most this many bytes after a save. Least recently used
    /// evicted first; the one just saved is kept even when alone it is larger
    pub max_bytes: u64,
    /// a process evicts at most once per this many seconds (its first save always does). Each
    /// eviction reads every saved index's header, so a bulk job saving thousands of indexes into
    /// one folder must not do it on every save
    pub evict_every_s: u64,
}

/// Seconds between two evictions of one process when none is given.
pub const DEFAULT_EVICT_EVERY_S: u64 = 10;
/// When this process last evicted (seconds since the epoch; 0: never).
static LAST_EVICT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// The cap on a folder's saved indexes when none is given (1 GiB).
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// The longest session path recorded in a saved index (a longer one: not saved).
pub const PATH_MAX: u64 = 4096;
/// A leftover temp file of an interrupted save older than this (seconds) is removed on evict.
const STALE_TMP_SECS: i64 = 3600;

/// What the cache did on an open (for `Index.cache_state()`, tests and `sessiontree cache`).
#[derive(Clone, Debug, PartialEq)]
pub enum CacheState {
    Off,
    /// loaded a saved index covering `covered` bytes (and scanned the rest)
    Warm {
        covered: u64,
    },
    /// scanned the whole file; `saved` whether the index was saved; `why` a cold open's cause
    Cold {
        why: String,
        saved: bool,
    },
}

/// The coverage record: what the saved index was built from.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Cover {
    dev: u64,
    ino: u64,
    covered: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    fp: u64,
}

fn stat_of(m: &std::fs::Metadata) -> (u64, i64, i64) {
    (
        m.len(),
        m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        m.ctime() * 1_000_000_000 + m.ctime_nsec(),
    )
}

/// The saved file's name for a session file of this identity.
pub fn file_name(dev: u64, ino: u64) -> String {
    format!("{dev:016x}-{ino:016x}{SUFFIX}")
}

fn hasher() -> foldhash::fast::FoldHasher<'static> {
    foldhash::fast::FixedState::with_seed(SEED).build_hasher()
}

/// The fingerprint of the first `covered` bytes of `f`.
///
/// The hash of [`FP_BLOCKS`] blocks of [`FP_BLOCK`] bytes and their positions (the first, the last
/// before `covered`, the others evenly spaced between). Errs when the file ends before `covered`.
pub fn fingerprint(f: &File, covered: u64) -> io::Result<u64> {
    let mut h = hasher();
    h.write_u64(covered);
    let mut buf = vec![0u8; FP_BLOCK as usize];
    let last = covered.saturating_sub(FP_BLOCK);
    for k in 0..FP_BLOCKS {
        let at = if k == FP_BLOCKS - 1 {
            last
        } else {
            last / (FP_BLOCKS - 1) * k
        };
        let n = FP_BLOCK.min(covered - at) as usize;
        f.read_exact_at(&mut buf[..n], at)?;
        h.write_u64(at);
        h.write(&buf[..n]);
    }
    Ok(h.finish())
}

/// The hash of one section (each on the thread that read it).
fn section_sum(b: &[u8]) -> u64 {
    let mut h = hasher();
    h.write(b);
    h.finish()
}

/// The checksum of records block `b` (its number first: blocks cannot change places).
fn block_sum(b: u64, bytes: &[u8]) -> u64 {
    let mut h = hasher();
    h.write_u64(b);
    h.write(bytes);
    h.finish()
}

/// The checksum of key group `g`: its number, its key records' bytes, its key bytes.
fn group_sum(g: u64, recs: &[u8], bytes: &[u8]) -> u64 {
    let mut h = hasher();
    h.write_u64(g);
    h.write(recs);
    h.write(bytes);
    h.finish()
}

/// The key-group table of the key sections (`keys`: 8 bytes per key record, `kb`: the key
/// bytes): per group of [`KEY_GROUP`] keys, the checksum of its key records and its bytes, and
/// where its bytes start (16 bytes). None when the records' starts do not lie in order inside
/// `kb`.
fn key_table(keys: &[u8], kb: &[u8]) -> Option<Vec<u8>> {
    const START: u64 = (1 << 61) - 1;
    let start_of = |k: usize| {
        let w = u64::from_ne_bytes(keys[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
        w & START
    };
    let nkeys = keys.len() / 8;
    let mut out = Vec::with_capacity(nkeys.div_ceil(KEY_GROUP) * 16);
    for g in 0..nkeys.div_ceil(KEY_GROUP) {
        let (first, next) = (g * KEY_GROUP, ((g + 1) * KEY_GROUP).min(nkeys));
        let start = start_of(first);
        let end = if next < nkeys {
            start_of(next)
        } else {
            kb.len() as u64
        };
        if start > end || end > kb.len() as u64 {
            return None;
        }
        let h = group_sum(
            g as u64,
            &keys[first * 8..next * 8],
            &kb[start as usize..end as usize],
        );
        out.extend_from_slice(&h.to_ne_bytes());
        out.extend_from_slice(&start.to_ne_bytes());
    }
    Some(out)
}

/// The lookup-block table of the key lookup's `entries` (ascending, see `index::lookup`): per
/// block of [`REC_BLOCK`] entries, its checksum and its first entry's tag (16 bytes).
fn lookup_table(entries: &[u8]) -> Vec<u8> {
    entries
        .chunks(REC_BLOCK * 8)
        .enumerate()
        .flat_map(|(b, c)| {
            let first = u64::from_ne_bytes(c[..8].try_into().expect("8 bytes"));
            let mut w = [0u8; 16];
            w[..8].copy_from_slice(&block_sum(b as u64, c).to_ne_bytes());
            w[8..].copy_from_slice(&(first >> 32).to_ne_bytes());
            w
        })
        .collect()
}

/// The entries of a key lookup as their bytes (8 each, native order).
fn u64s_bytes(v: &[u64]) -> &[u8] {
    // SAFETY: a view of the words' initialised bytes, exactly their length.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// The checksum: the header (its checksum slot zero) and the hashes of the sections (meta,
/// key-group table, records-block table, winners-block table, lookup-block table).
fn checksum(head: &[u8], sections: [u64; 5]) -> u64 {
    let mut h = hasher();
    h.write(head);
    for s in sections {
        h.write_u64(s);
    }
    h.finish()
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn cname(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// Opens the cache folder (creating it and its parents 0700 when `create`).
///
/// Never a symlink, owned by us, not writable by group or others.
pub fn open_dir(dir: &Path, create: bool) -> io::Result<OwnedFd> {
    if create {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
        {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    let c = cstr(dir)?;
    // SAFETY: a NUL-terminated path; the descriptor is owned below.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(last_err());
    }
    // SAFETY: `fd` is a descriptor we just opened and nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on our descriptor into a zeroed stat.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(last_err());
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if st.st_uid != me || st.st_mode & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the index cache folder is owned by another user or writable by others",
        ));
    }
    Ok(fd)
}

/// Opens `name` in the folder `dir` for reading.
///
/// A regular file, never through a symlink, never blocking on a FIFO.
fn open_in(dir: &OwnedFd, name: &str) -> io::Result<File> {
    let c = cname(name)?;
    // SAFETY: openat on our folder descriptor with a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(last_err());
    }
    // SAFETY: we own the new descriptor.
    let f = unsafe { File::from_raw_fd(fd) };
    if !f.metadata()?.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    Ok(f)
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The header: fields at fixed places (see the module docs). `sums` is the checksum slot.
fn header(cover: &Cover, lens: [u64; 5], sum: u64) -> [u8; HEADER_LEN] {
    let [meta_len, nrecs, nkeys, key_bytes, path_len] = lens;
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    let mut put32 = |at: usize, v: u32| h[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    put32(8, FORMAT_VERSION);
    put32(12, ORDER_MARK);
    put32(16, std::mem::size_of::<Rec>() as u32);
    put32(20, usize::BITS);
    let vals = [
        cover.dev,
        cover.ino,
        cover.covered,
        cover.size,
        cover.mtime_ns as u64,
        cover.ctime_ns as u64,
        cover.fp,
        meta_len,
        nrecs,
        sum,
        nkeys,
        key_bytes,
        path_len,
    ];
    for (i, v) in vals.iter().enumerate() {
        h[24 + 8 * i..32 + 8 * i].copy_from_slice(&v.to_ne_bytes());
    }
    h
}
const SUM_AT: usize = 24 + 8 * 9;

/// Reads `len` bytes at `at` of `f` into a fresh vector (the length checked by the caller).
fn read_vec(f: &File, at: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut v: Vec<u8> = Vec::with_capacity(len);
    read_into(f, at, v.as_mut_ptr(), len)?;
    // SAFETY: `read_into` wrote all `len` bytes.
    unsafe { v.set_len(len) };
    Ok(v)
}

/// Reads exactly `len` bytes at `at` of `f` into the allocation at `base` (room for `len`
/// bytes). (No transparent-huge-page advice: with `defrag=madvise` a huge page fault may
/// compact memory synchronously, which on a machine whose memory is full of page cache cost
/// more than the 4 KiB faults it saves: 50-100 ms more for a 1 GiB session's index.)
fn read_into(f: &File, at: u64, base: *mut u8, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        // SAFETY: `base[done..len]` lies inside an allocation of at least `len` bytes; the
        // kernel writes into it through a raw pointer, no reference to uninitialised memory is
        // made.
        let r = unsafe {
            libc::pread(
                f.as_raw_fd(),
                base.add(done) as *mut libc::c_void,
                len - done,
                (at + done as u64) as libc::off_t,
            )
        };
        if r < 0 {
            let e = last_err();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        done += r as usize;
    }
    Ok(())
}

/// Loads the saved index of session file `f` (its metadata `meta`) from the cache folder.
///
/// The index and how many bytes of the file it covers, or why not (then scan cold).
pub fn load(cfg: &CacheCfg, f: &File, meta: &std::fs::Metadata) -> Result<(Index, u64), String> {
    let dir = open_dir(&cfg.dir, false).map_err(|e| format!("no cache folder ({e})"))?;
    let name = file_name(meta.dev(), meta.ino());
    let c = open_in(&dir, &name).map_err(|e| format!("no saved index ({e})"))?;
    let clen = c.metadata().map_err(|e| e.to_string())?.len();
    let limit = meta.len().saturating_mul(MAX_RATIO).saturating_add(1 << 20);
    if clen < HEADER_LEN as u64 || clen > limit {
        return Err("saved index of a wrong size".into());
    }
    let mut head = [0u8; HEADER_LEN];
    c.read_exact_at(&mut head, 0).map_err(|e| e.to_string())?;
    if head[..8] != MAGIC
        || get_u32(&head, 8) != FORMAT_VERSION
        || get_u32(&head, 12) != ORDER_MARK
        || get_u32(&head, 16) != std::mem::size_of::<Rec>() as u32
        || get_u32(&head, 20) != usize::BITS
    {
        return Err("saved index of another format, version or architecture".into());
    }
    let v = |i: usize| get_u64(&head, 24 + 8 * i);
    let cover = Cover {
        dev: v(0),
        ino: v(1),
        covered: v(2),
        size: v(3),
        mtime_ns: v(4) as i64,
        ctime_ns: v(5) as i64,
        fp: v(6),
    };
    let (meta_len, nrecs, sum, nkeys, kb_len) = (v(7), v(8), v(9), v(10), v(11));
    let path_len = v(12);
    let (size, mtime, ctime) = stat_of(meta);
    if (cover.dev, cover.ino) != (meta.dev(), meta.ino()) {
        return Err("saved index of another file".into());
    }
    if size < cover.covered || cover.size != cover.covered {
        return Err("the file is shorter than what was indexed".into());
    }
    if size == cover.covered && (mtime, ctime) != (cover.mtime_ns, cover.ctime_ns) {
        return Err("the file was changed (same length, other mtime or ctime)".into());
    }
    // the sections: path, meta, key-group table, records-block table, key records, key
    // bytes, records, exactly filling the file
    let wrong = || "saved index of a wrong size".to_string();
    if path_len > PATH_MAX || nkeys > u32::MAX as u64 || nrecs > u32::MAX as u64 {
        return Err(wrong());
    }
    let rec_size = std::mem::size_of::<Rec>() as u64;
    let ktab_len = nkeys.div_ceil(KEY_GROUP as u64) * 16;
    let rtab_len = nrecs.div_ceil(REC_BLOCK as u64) * 8;
    let wtab_len = nkeys.div_ceil(REC_BLOCK as u64) * 8;
    let at_meta = HEADER_LEN as u64 + path_len;
    let at_ktab = at_meta.checked_add(meta_len).ok_or_else(wrong)?;
    let at_rtab = at_ktab + ktab_len;
    let at_wtab = at_rtab + rtab_len;
    let at_keys = at_wtab + wtab_len;
    let at_kb = at_keys + nkeys * 8;
    let at_recs = at_kb.checked_add(kb_len).ok_or_else(wrong)?;
    let at_winners = at_recs + nrecs * rec_size;
    let at_ltab = at_winners + nkeys * 4;
    if at_ltab > clen {
        return Err(wrong());
    }
    let fp = fingerprint(f, cover.covered).map_err(|e| e.to_string())?;
    if fp != cover.fp {
        return Err("the file's indexed bytes changed (fingerprint)".into());
    }
    let rd = |at: u64, len: u64| read_vec(&c, at, len as usize).map_err(|e| e.to_string());
    let mut h0 = head.to_vec();
    h0[SUM_AT..SUM_AT + 8].fill(0);
    let path_b = rd(HEADER_LEN as u64, path_len)?;
    h0.extend_from_slice(&path_b);
    // the meta and the two tables: all the checksum covers directly (the keys and the records
    // are covered through the tables' checksums of their groups and blocks)
    let meta_b = rd(at_meta, meta_len)?;
    // the key lookup (its seed and size end the meta): its table, then its entries, end the file
    let (seed, nlookup) = Index::meta_lookup(&meta_b).ok_or_else(wrong)?;
    if nlookup > nkeys {
        return Err(wrong());
    }
    let ltab_len = nlookup.div_ceil(REC_BLOCK as u64) * 16;
    let at_lent = at_ltab + ltab_len;
    if at_lent.checked_add(nlookup * 8) != Some(clen) {
        return Err(wrong());
    }
    let ktab = rd(at_ktab, ktab_len)?;
    let rtab = rd(at_rtab, rtab_len)?;
    let wtab = rd(at_wtab, wtab_len)?;
    let ltab = rd(at_ltab, ltab_len)?;
    let meta_sum = section_sum(&meta_b);
    let sums = [
        meta_sum,
        section_sum(&ktab),
        section_sum(&rtab),
        section_sum(&wtab),
        section_sum(&ltab),
    ];
    if checksum(&h0, sums) != sum {
        return Err("saved index damaged (checksum)".into());
    }
    let inconsistent = || "saved index inconsistent".to_string();
    let c = std::sync::Arc::new(c);
    let session = f.try_clone().map_err(|e| e.to_string())?;
    let covered = cover.covered;
    // a damaged block found later: the cold scan stands in (once, for every section), and is
    // saved over this file
    let (cfg, stat) = (cfg.clone(), meta.clone());
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(&path_b));
    type Cold = Option<(Vec<Rec>, Vec<u32>, crate::index::KeySections, Vec<u64>)>;
    let cold: std::sync::Arc<std::sync::OnceLock<Cold>> = Default::default();
    let want_ktab = ktab.clone();
    let rescue = std::sync::Arc::new(move || {
        cold.get_or_init(|| {
            let ix = rescan(
                &session,
                covered,
                nrecs as usize,
                meta_sum,
                &want_ktab,
                seed,
            )?;
            let _ = save(&cfg, &ix, &session, &stat, &path);
            let (k, b) = ix.key_sections();
            Some((
                ix.recs.to_vec(),
                ix.winners(),
                (k.into_owned(), b.into_owned()),
                ix.lookup_entries(),
            ))
        })
        .clone()
    });
    let table = ktab
        .chunks_exact(16)
        .map(|w| {
            let v = |i: usize| u64::from_ne_bytes(w[i..i + 8].try_into().expect("8 bytes"));
            (v(0), v(8))
        })
        .collect();
    let r3 = rescue.clone();
    let keys = PagedKeys::new(
        c.clone(),
        at_keys,
        at_kb,
        nkeys as usize,
        kb_len,
        table,
        group_sum,
        Box::new(move || r3().map(|c| c.2)),
    )
    .ok_or_else(inconsistent)?;
    let ix = Index::restore_meta(
        &meta_b,
        KeyStore::paged(keys),
        nrecs as usize,
        cover.covered,
    )
    .ok_or_else(inconsistent)?;
    let bounds = ix.rec_bounds().ok_or_else(inconsistent)?;
    let header_end = ix.header_span.map_or(0, |(s, l)| s + l);
    let placeholder = Rec::new(header_end, 0, KID_UNDEFINED, KID_NULL, f64::NAN, T_NONE, 0)
        .ok_or_else(inconsistent)?;
    let sums_of = |t: &[u8]| -> Vec<u64> {
        t.chunks_exact(8)
            .map(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")))
            .collect()
    };
    let r2 = rescue.clone();
    let rec_checks = BlockChecks {
        sum: block_sum,
        sums: sums_of(&rtab),
        items_ok: Box::new(move |first, recs: &[Rec]| bounds.ok(first, recs)),
        rescan: Box::new(move || r2().map(|c| c.0)),
        placeholder,
    };
    let nr = nrecs as u32;
    let r4 = rescue.clone();
    let win_checks = BlockChecks {
        sum: block_sum,
        sums: sums_of(&wtab),
        items_ok: Box::new(move |_, w: &[u32]| w.iter().all(|&e| e == NONE || e < nr)),
        rescan: Box::new(move || r4().map(|c| c.1)),
        placeholder: NONE,
    };
    let (lsums, fences): (Vec<u64>, Vec<u32>) = ltab
        .chunks_exact(16)
        .map(|w| {
            let v = |i: usize| u64::from_ne_bytes(w[i..i + 8].try_into().expect("8 bytes"));
            (v(0), v(8) as u32)
        })
        .unzip();
    let (f2, nk) = (fences.clone(), nkeys as u32);
    let lookup_checks = BlockChecks {
        sum: block_sum,
        sums: lsums,
        items_ok: Box::new(move |first, e: &[u64]| lookup_block_ok(&f2, nk, first, e)),
        rescan: Box::new(move || rescue().map(|c| c.3)),
        // (key 0 is `undefined`: never equal to a key looked up)
        placeholder: 0,
    };
    touch(&c);
    let recs =
        PagedRecs::new(c.clone(), at_recs, nrecs as usize, rec_checks).ok_or_else(inconsistent)?;
    let winners =
        Paged::new(c.clone(), at_winners, nkeys as usize, win_checks).ok_or_else(inconsistent)?;
    let lookup = Paged::new(c, at_lent, nlookup as usize, lookup_checks)
        .and_then(|e| SavedLookup::new(e, fences, nkeys as u32))
        .ok_or_else(inconsistent)?;
    let ix = ix
        .restore_paged(recs, winners, lookup)
        .ok_or_else(inconsistent)?;
    Ok((ix, cover.covered))
}

/// The index of a cold scan of the first `covered` bytes of session file `f`, when that scan
/// gives what the saved index says it was built from (`nrecs` records, the meta whose hash is
/// `meta_sum`, the key-group table `ktab`: the same keys, so the same key ids); None otherwise.
/// Its keys hash with `seed`, the saved index's, so that its key lookup is the saved one.
///
/// What a damaged block of records is served from (see `index::recs`).
fn rescan(
    f: &File,
    covered: u64,
    nrecs: usize,
    meta_sum: u64,
    ktab: &[u8],
    seed: u64,
) -> Option<Index> {
    let mut ix = Index::with_key_seed(seed);
    let read = |buf: &mut [u8], at: u64| f.read_exact_at(buf, at);
    crate::scan::scan_file(&mut ix, &read, 0, covered, true).ok()?;
    if !ix.can_persist() || ix.scanned_to != covered || ix.recs.len() != nrecs {
        return None;
    }
    let mut meta = Vec::new();
    ix.persist_meta(&mut meta);
    let (k, b) = ix.key_sections();
    if section_sum(&meta) != meta_sum || key_table(&k, &b).as_deref() != Some(ktab) {
        return None;
    }
    Some(ix)
}

static TMP_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Saves `index` unless the file changed meanwhile. `index` is built from all `index.scanned_to`
/// bytes of `f` whose metadata before the scan was `before`. Never writes outside the folder.
pub fn save(
    cfg: &CacheCfg,
    index: &Index,
    f: &File,
    before: &std::fs::Metadata,
    path: &Path,
) -> Result<(), String> {
    if !index.can_persist() {
        return Err("index not saveable (torn last line, legacy format or no header)".into());
    }
    let after = f.metadata().map_err(|e| e.to_string())?;
    let covered = index.scanned_to;
    if stat_of(&after) != stat_of(before) || after.ino() != before.ino() || covered != after.len() {
        return Err("the file changed while it was scanned".into());
    }
    if covered < cfg.min_bytes {
        return Err("below the size saved".into());
    }
    let (size, mtime_ns, ctime_ns) = stat_of(before);
    let cover = Cover {
        dev: before.dev(),
        ino: before.ino(),
        covered,
        size,
        mtime_ns,
        ctime_ns,
        fp: fingerprint(f, covered).map_err(|e| e.to_string())?,
    };
    let abs = std::path::absolute(path).map_err(|e| e.to_string())?;
    let path_b = abs.as_os_str().as_bytes();
    if path_b.len() as u64 > PATH_MAX {
        return Err("the session path is too long to record".into());
    }
    let mut meta = Vec::new();
    index.persist_meta(&mut meta);
    let lookup = index.lookup_entries();
    if Index::meta_lookup(&meta).map(|m| m.1) != Some(lookup.len() as u64) {
        return Err("key lookup of another size than the meta's".into());
    }
    let lent = u64s_bytes(&lookup);
    let ltab = lookup_table(lent);
    // (copies only of what was restored from a saved index and read on demand)
    let recs_v: std::borrow::Cow<'_, [Rec]> = match index.recs.in_memory() {
        Some(r) => r.into(),
        None => index.recs.to_vec().into(),
    };
    let recs = recs_bytes(&recs_v);
    let (keys, kb) = index.key_sections();
    let ktab = key_table(&keys, &kb).ok_or("keys out of order")?;
    let rtab: Vec<u8> = recs
        .chunks(REC_BLOCK * std::mem::size_of::<Rec>())
        .enumerate()
        .flat_map(|(b, c)| block_sum(b as u64, c).to_ne_bytes())
        .collect();
    let winners = index.winners_bytes();
    let wtab: Vec<u8> = winners
        .chunks(REC_BLOCK * 4)
        .enumerate()
        .flat_map(|(b, c)| block_sum(b as u64, c).to_ne_bytes())
        .collect();
    let lens = [
        meta.len() as u64,
        recs_v.len() as u64,
        keys.len() as u64 / 8,
        kb.len() as u64,
        path_b.len() as u64,
    ];
    let mut h0 = header(&cover, lens, 0).to_vec();
    h0.extend_from_slice(path_b);
    let sums = [
        section_sum(&meta),
        section_sum(&ktab),
        section_sum(&rtab),
        section_sum(&wtab),
        section_sum(&ltab),
    ];
    let head = header(&cover, lens, checksum(&h0, sums));
    let dir = open_dir(&cfg.dir, true).map_err(|e| format!("cache folder: {e}"))?;
    let name = file_name(cover.dev, cover.ino);
    let seq = TMP_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = format!(".{name}.{}.{seq}.{nanos:x}.tmp", std::process::id());
    let ctmp = cname(&tmp).map_err(|e| e.to_string())?;
    // SAFETY: openat on our folder descriptor, NUL-terminated name, a new file only.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            ctmp.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(format!("cache file: {}", last_err()));
    }
    // SAFETY: we own the new descriptor.
    let mut out = unsafe { File::from_raw_fd(fd) };
    let unlink = || {
        // SAFETY: unlinkat of our own temp name in our folder.
        unsafe { libc::unlinkat(dir.as_raw_fd(), ctmp.as_ptr(), 0) };
    };
    let w = out
        .write_all(&head)
        .and_then(|_| out.write_all(path_b))
        .and_then(|_| out.write_all(&meta))
        .and_then(|_| out.write_all(&ktab))
        .and_then(|_| out.write_all(&rtab))
        .and_then(|_| out.write_all(&wtab))
        .and_then(|_| out.write_all(&keys))
        .and_then(|_| out.write_all(&kb))
        .and_then(|_| out.write_all(recs))
        .and_then(|_| out.write_all(winners))
        .and_then(|_| out.write_all(&ltab))
        .and_then(|_| out.write_all(lent));
    drop(out);
    if let Err(e) = w {
        unlink();
        return Err(format!("cache write: {e}"));
    }
    let cfinal = cname(&name).map_err(|e| e.to_string())?;
    // SAFETY: renameat within our folder, both names NUL-terminated.
    let r = unsafe {
        libc::renameat(
            dir.as_raw_fd(),
            ctmp.as_ptr(),
            dir.as_raw_fd(),
            cfinal.as_ptr(),
        )
    };
    if r != 0 {
        let e = last_err();
        unlink();
        return Err(format!("cache rename: {e}"));
    }
    let now = now_secs();
    let last = LAST_EVICT.load(std::sync::atomic::Ordering::Relaxed);
    if last == 0 || now.saturating_sub(last) >= cfg.evict_every_s as i64 {
        LAST_EVICT.store(now, std::sync::atomic::Ordering::Relaxed);
        evict(&dir, cfg.max_bytes, Some(&name));
    }
    Ok(())
}

/// Sets a saved index's mtime to now: its last use, for the least-recently-used eviction.
fn touch(f: &File) {
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
    ];
    // SAFETY: futimens on our open descriptor with two valid timespecs.
    unsafe { libc::futimens(f.as_raw_fd(), times.as_ptr()) };
}

/// What [`inspect`] tells of one name in the cache folder.
enum Found {
    /// a saved index this module wrote: its size, last use (mtime, s) and whether its session
    /// file is gone or rewritten
    Saved { size: u64, used: i64, stale: bool },
    /// a leftover temp file of an interrupted save (ours: regular, owned by us, mode 0600)
    Temp { age: i64 },
}

/// The names in the folder open as `dir` (read through the descriptor, not the path).
fn names_in(dir: &OwnedFd) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect()
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Whether `name` in `dir` is a file of ours (see [`Found`]); None for anything else (not our
/// name, magic, layout or owner, a symlink, a FIFO, unreadable): never to be removed.
fn inspect(dir: &OwnedFd, name: &str) -> Option<Found> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if let Some(rest) = name.strip_prefix('.') {
        // `.{dev}-{ino}.stidx.{pid}.{seq}.{nanos}.tmp`
        let (base, _) = rest.split_once(SUFFIX)?;
        let ok = name.ends_with(".tmp") && base.len() == 33 && base.as_bytes()[16] == b'-';
        if !ok {
            return None;
        }
        let f = open_in(dir, name).ok()?;
        let m = f.metadata().ok()?;
        if m.uid() != me || m.mode() & 0o777 != 0o600 {
            return None;
        }
        return Some(Found::Temp {
            age: now_secs() - m.mtime(),
        });
    }
    if !name.ends_with(SUFFIX) {
        return None;
    }
    let c = open_in(dir, name).ok()?;
    let cm = c.metadata().ok()?;
    if cm.uid() != me {
        return None;
    }
    let mut head = [0u8; HEADER_LEN];
    c.read_exact_at(&mut head, 0).ok()?;
    if head[..8] != MAGIC {
        return None;
    }
    let v = |i: usize| get_u64(&head, 24 + 8 * i);
    let (dev, ino) = (v(0), v(1));
    if name != file_name(dev, ino) {
        return None;
    }
    let current = get_u32(&head, 8) == FORMAT_VERSION
        && get_u32(&head, 12) == ORDER_MARK
        && get_u32(&head, 16) == std::mem::size_of::<Rec>() as u32
        && get_u32(&head, 20) == usize::BITS;
    let size = cm.len();
    let used = cm.mtime();
    if !current {
        // our magic and name, another version or architecture: never loaded again
        return Some(Found::Saved {
            size,
            used,
            stale: true,
        });
    }
    let path_len = v(12);
    if path_len == 0 || path_len > PATH_MAX || HEADER_LEN as u64 + path_len > size {
        return None;
    }
    let p = read_vec(&c, HEADER_LEN as u64, path_len as usize).ok()?;
    let path = Path::new(std::ffi::OsStr::from_bytes(&p));
    let stale = match std::fs::metadata(path) {
        Err(e) => e.kind() == io::ErrorKind::NotFound,
        Ok(m) => {
            let (len, mtime, ctime) = stat_of(&m);
            let covered = v(2);
            (m.dev(), m.ino()) != (dev, ino)
                || len < covered
                || (len == covered && (mtime, ctime) != (v(4) as i64, v(5) as i64))
        }
    };
    Some(Found::Saved { size, used, stale })
}

/// Removes `name` from `dir` (never following a symlink: unlinkat removes the name itself).
fn remove(dir: &OwnedFd, name: &str) -> bool {
    let Ok(c) = cname(name) else { return false };
    // SAFETY: unlinkat of a name in our folder descriptor.
    unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) == 0 }
}

/// Evicts stale and least recently used files from the open cache folder `dir`. Saved indexes whose
/// session file is gone or was rewritten, temp files of interrupted saves older than an hour, then
/// the least recently used saved indexes while they total more than `max_bytes` (never `keep`, the
/// one just saved). Returns how many files were removed. Failures are ignored (eviction is upkeep).
pub fn evict(dir: &OwnedFd, max_bytes: u64, keep: Option<&str>) -> usize {
    let mut live: Vec<(i64, u64, String)> = Vec::new();
    let mut removed = 0;
    for name in names_in(dir) {
        match inspect(dir, &name) {
            Some(Found::Temp { age }) if age > STALE_TMP_SECS => {
                removed += remove(dir, &name) as usize
            }
            Some(Found::Saved { stale: true, .. }) if Some(name.as_str()) != keep => {
                removed += remove(dir, &name) as usize
            }
            Some(Found::Saved { size, used, .. }) => live.push((used, size, name)),
            _ => {}
        }
    }
    let mut total: u64 = live.iter().map(|x| x.1).sum();
    live.sort();
    for (_, size, name) in live {
        if total <= max_bytes {
            break;
        }
        if Some(name.as_str()) == keep {
            continue;
        }
        if remove(dir, &name) {
            removed += 1;
            total -= size;
        }
    }
    removed
}

/// Removes every file of ours (see [`inspect`]) from the cache folder `dir`; returns how many. Only
/// when the folder passes [`open_dir`]'s rules (else nothing is removed).
pub fn clear(dir: &Path) -> usize {
    let Ok(d) = open_dir(dir, false) else {
        return 0;
    };
    let mut n = 0;
    for name in names_in(&d) {
        if inspect(&d, &name).is_some() && remove(&d, &name) {
            n += 1;
        }
    }
    n
}

/// The files of ours in the cache folder `dir`: (saved indexes, their total bytes, temp files).
/// Only when the folder passes [`open_dir`]'s rules.
pub fn census(dir: &Path) -> Option<(usize, u64, usize)> {
    let d = open_dir(dir, false).ok()?;
    let (mut files, mut bytes, mut temps) = (0, 0, 0);
    for name in names_in(&d) {
        match inspect(&d, &name) {
            Some(Found::Saved { size, .. }) => {
                files += 1;
                bytes += size;
            }
            Some(Found::Temp { .. }) => temps += 1,
            None => {}
        }
    }
    Some((files, bytes, temps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn sample() -> Vec<u8> {
        sample_n(400)
    }

    /// `sample()` with `n` entries.
    fn sample_n(n: usize) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/p\"}\n");
        let mut parent = "null".to_string();
        for i in 0..n {
            let id = format!("e{i:05}");
            if i % 9 == 4 {
                d.extend_from_slice(format!("{{\"type\":\"label\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"targetId\":{parent},\"label\":\"x\"}}\n").as_bytes());
            } else if i % 50 == 7 {
                d.extend_from_slice(b"not json\n\n");
                d.extend_from_slice(format!("{{\"type\":\"compaction\",\"id\":{i},\"parentId\":{parent},\"timestamp\":\"bad\",\"firstKeptEntryId\":true,\"summary\":\"s\"}}\n").as_bytes());
                continue;
            } else {
                d.extend_from_slice(format!("{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"r{}\",\"content\":\"hi\"}}}}\n", i % 3).as_bytes());
            }
            parent = format!("\"{id}\"");
        }
        d
    }

    /// A tiny deterministic PRNG (xorshift) for the mutations.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Forged inputs with a valid checksum (what only someone who can write our folder could make).
    ///
    /// Random bytes changed in the meta section and in the records, or lengths cut, never panic; a
    /// restore that succeeds gives an index every query can run on.
    #[test]
    fn forged_meta_and_records_never_panic() {
        let st = Store::from_bytes(sample(), false);
        let ix = &st.index;
        assert!(ix.can_persist());
        let covered = ix.scanned_to;
        let meta = ix.persist_all();
        let recs = ix.recs.to_vec();
        // the untouched input restores to the same index
        let back = Index::restore(&meta, recs.clone(), covered).expect("restores");
        assert_eq!(back.recs.len(), ix.recs.len());
        assert_eq!(back.labels(), ix.labels());
        assert_eq!(back.problems.len(), ix.problems.len());
        assert_eq!(back.entry_count(), ix.entry_count());
        for r in &ix.recs {
            let s = ix.key_string(r.id).map(str::to_string);
            assert_eq!(back.key_string(r.id).map(str::to_string), s);
            if let Some(s) = s {
                assert_eq!(back.index_of_str(&s), ix.index_of_str(&s));
            }
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut restored = 0;
        for round in 0..3000 {
            let mut m = meta.clone();
            let mut rs = recs.clone();
            let flips = 1 + rng.next() % 4;
            for _ in 0..flips {
                if rng.next() % 2 == 0 && !m.is_empty() {
                    let at = (rng.next() % m.len() as u64) as usize;
                    m[at] = rng.next() as u8;
                } else {
                    let i = (rng.next() % rs.len() as u64) as usize;
                    let v = rng.next();
                    match rng.next() % 7 {
                        0 | 1 => {
                            // any byte of the record: the packed offset and timestamp too
                            let mut b = recs_bytes(&rs[i..i + 1]).to_vec();
                            b[(v % 28) as usize] = (v >> 8) as u8;
                            rs[i] = crate::index::recs_from_bytes(&b).expect("one record")[0];
                        }
                        2 => rs[i].len = v as u32,
                        3 => rs[i].id = v as u32,
                        4 => rs[i].parent = v as u32,
                        5 => rs[i].etype = v as u16,
                        _ => rs[i].role = v as u16,
                    }
                }
            }
            if round % 10 == 0 {
                let cut = (rng.next() % (m.len() as u64 + 1)) as usize;
                m.truncate(cut);
            }
            if let Some(mut bad) = Index::restore(&m, rs, covered) {
                restored += 1;
                // every query over the whole index runs without a panic
                let _ = bad.labels();
                let _ = bad.problems.iter().count();
                for i in 0..bad.recs.len() {
                    let r = bad.recs.at(i);
                    let _ = (
                        bad.key_string(r.id),
                        bad.winner(r.parent),
                        bad.type_name(r.etype),
                        bad.role_name(r.role),
                    );
                    let _ = bad.label_entry(r.id);
                }
                let _ = bad.lookup_str("e00001");
                let _ = bad.intern_str("new-id");
                // walks over the forged parents and leaf: no panic either
                let n = bad.recs.len() as u32;
                if let Some(l) = bad.leaf_entry() {
                    let _ = bad.branch(l);
                    let _ = bad.context_span(l, true);
                }
                for i in (0..n).step_by(37) {
                    let _ = bad.branch(i);
                    let _ = bad.context_span(i, false);
                    let _ = bad.walk_parent(i);
                    let _ = bad.tree_parent(i);
                    let _ = bad.find_back_named(i, "message", Some("assistant"));
                }
                let tree = bad.build_tree();
                if let Ok(order) = tree.preorder(bad.preorder_limit()) {
                    let _ = bad.unreachable(&order);
                }
            }
        }
        // most forgeries are refused; some (a changed timestamp, say) restore
        assert!(restored < 3000);
    }

    /// A fresh folder (its name from `tag` and the process id) holding `sample()` as
    /// `s.jsonl`, and a cache config saving every file there: (folder, session path, config).
    fn sample_with_cache(tag: &str) -> (std::path::PathBuf, std::path::PathBuf, CacheCfg) {
        let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        std::fs::write(&path, sample()).unwrap();
        let cfg = CacheCfg {
            dir: dir.join("cache"),
            min_bytes: 0,
            max_bytes: DEFAULT_MAX_BYTES,
            evict_every_s: DEFAULT_EVICT_EVERY_S,
        };
        (dir, path, cfg)
    }

    /// A saved file damaged anywhere (any byte changed, any length cut) loads as an error, or,
    /// when the damage is in a block of records (read only when a query needs it), loads and
    /// gives the cold scan's records once that block is read, saying so.
    #[test]
    fn a_damaged_saved_file_is_refused_or_caught_when_read() {
        let (dir, path, cfg) = sample_with_cache("sessiontree-saved");
        let (cold, state) = Store::open_cached(&path, false, Some(&cfg)).unwrap();
        assert!(
            matches!(state, CacheState::Cold { saved: true, .. }),
            "{state:?}"
        );
        let (_, state) = Store::open_cached(&path, false, Some(&cfg)).unwrap();
        assert!(matches!(state, CacheState::Warm { .. }), "{state:?}");
        let f = File::open(&path).unwrap();
        let meta = f.metadata().unwrap();
        let saved_path = cfg.dir.join(file_name(meta.dev(), meta.ino()));
        let good = std::fs::read(&saved_path).unwrap();
        // the keys, the records, the winners, then (after its table) the key lookup end the
        // file: read on demand
        let want_keys = cold.index.key_sections();
        let want_l = cold.index.lookup_entries();
        let l_len = want_l.len() * 8;
        let ltab_len = want_l.len().div_ceil(REC_BLOCK) * 16;
        let at_ltab = good.len() - l_len - ltab_len;
        let at_recs = at_ltab
            - want_keys.0.len()
            - want_keys.1.len()
            - cold.index.recs.len() * std::mem::size_of::<Rec>()
            - cold.index.winners().len() * 4;
        let on_demand = |at: usize| (at_recs..at_ltab).contains(&at) || at >= at_ltab + ltab_len;
        let want = format!("{:?}", cold.index.recs);
        let want_w = cold.index.winners();
        let ids: Vec<String> = (0..400).map(|i| format!("e{i:05}")).collect();
        let want_ids: Vec<_> = ids.iter().map(|s| cold.index.index_of_str(s)).collect();
        let mut rng = Rng(12345);
        let mut caught_late = 0;
        for k in 0..200 {
            let mut bad = good.clone();
            let at = if k % 4 == 0 {
                let cut = (rng.next() % good.len() as u64) as usize;
                bad.truncate(cut);
                cut
            } else {
                let at = (rng.next() % good.len() as u64) as usize;
                bad[at] ^= 1 << (rng.next() % 8);
                at
            };
            std::fs::write(&saved_path, &bad).unwrap();
            match load(&cfg, &f, &meta) {
                Err(_) => assert!(!on_demand(at) || k % 4 == 0, "damage {k} at {at} refused"),
                Ok((ix, _)) => {
                    assert!(on_demand(at) && k % 4 != 0, "damage {k} at {at} accepted");
                    assert_eq!(ix.saved_damage(), None, "nothing read yet");
                    // reading the records, the by-id map, the keys and the key lookup finds
                    // the damaged block; the answers are the cold ones
                    let got_ids: Vec<_> = ids.iter().map(|s| ix.index_of_str(s)).collect();
                    assert_eq!(got_ids, want_ids, "damage {k}");
                    assert_eq!(format!("{:?}", ix.recs), want, "damage {k}");
                    assert_eq!(ix.winners(), want_w, "damage {k}");
                    assert!(ix.key_sections() == want_keys, "damage {k}");
                    assert_eq!(ix.lookup_entries(), want_l, "damage {k}");
                    let why = ix.saved_damage().expect("caught when read");
                    assert!(why.contains("checksum"), "{why}");
                    assert!(!ix.saved_unrecoverable());
                    assert_eq!(ix.entry_count(), cold.index.entry_count());
                    caught_late += 1;
                    // and a good index was saved over the damaged one
                    let (again, _) = load(&cfg, &f, &meta).expect("saved again");
                    assert_eq!(format!("{:?}", again.recs), want);
                    assert_eq!(again.winners(), want_w);
                    assert_eq!(again.saved_damage(), None);
                }
            }
        }
        assert!(caught_late > 10, "{caught_late}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Lines appended since the save (new ids, a duplicate of a saved id, a number id equal to a
    /// saved one, a label and a child of saved entries) are indexed on top of the saved index
    /// without reading every saved key or winner, and every answer equals a cold open's. With a
    /// damaged lookup block too: the cold scan's entries stand in.
    #[test]
    fn a_warm_open_after_an_append_reads_only_what_the_tail_needs() {
        let (dir, path, cfg) = sample_with_cache("st-saved-append");
        // (5 blocks of records, winners, keys and lookup entries)
        let big = sample_n(5000);
        std::fs::write(&path, &big).unwrap();
        let (_, state) = Store::open_cached(&path, false, Some(&cfg)).unwrap();
        assert!(matches!(state, CacheState::Cold { saved: true, .. }));
        let f = File::open(&path).unwrap();
        let meta = f.metadata().unwrap();
        let saved_path = cfg.dir.join(file_name(meta.dev(), meta.ino()));
        let good = std::fs::read(&saved_path).unwrap();
        let mut tail = Vec::new();
        for (id, parent, extra) in [
            ("\"t1\"", "\"e04998\"", ""),
            ("\"t2\"", "\"t1\"", ""),
            ("\"e00100\"", "\"t2\"", ""), // a saved id again: the later entry wins
            ("57", "\"e00100\"", ""),     // a saved number id (the compaction at i = 57)
            ("\"t3\"", "57", ",\"targetId\":\"e00010\",\"label\":\"y\""),
            ("\"t4\"", "\"e00010\"", ""),
        ] {
            let ty = if extra.is_empty() { "message" } else { "label" };
            let body = if extra.is_empty() {
                ",\"message\":{\"role\":\"user\",\"content\":\"x\"}"
            } else {
                extra
            };
            tail.extend_from_slice(format!("{{\"type\":\"{ty}\",\"id\":{id},\"parentId\":{parent},\"timestamp\":\"2026-01-02T00:00:00.000Z\"{body}}}\n").as_bytes());
        }
        let mut all = big.clone();
        all.extend_from_slice(&tail);
        let cold_path = dir.join("cold.jsonl");
        std::fs::write(&cold_path, &all).unwrap();
        let cold = Store::open(&cold_path, false).unwrap();
        let ids: Vec<String> = (0..5000)
            .map(|i| format!("e{i:05}"))
            .chain(["t1", "t2", "t3", "t4", "nope"].map(String::from))
            .collect();
        for damage in [false, true] {
            std::fs::write(&path, &big).unwrap();
            if damage {
                // one byte of the first lookup block (the entries end the file)
                let mut bad = good.clone();
                let n = cold.index.lookup_len() - 4; // the saved keys' entries (t1..t4 are new)
                let at = bad.len() - n * 8 + 3;
                bad[at] ^= 0x10;
                std::fs::write(&saved_path, &bad).unwrap();
            } else {
                std::fs::write(&saved_path, &good).unwrap();
            }
            std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap()
                .write_all(&tail)
                .unwrap();
            let (warm, state) = Store::open_cached(&path, false, Some(&cfg)).unwrap();
            assert!(matches!(state, CacheState::Warm { .. }), "{state:?}");
            let (ix, cx) = (&warm.index, &cold.index);
            if !damage {
                // per appended line a lookup block and a key group or two, a winners block for a
                // saved id reused, the leaf's: far from all 20
                let (read, of) = ix.saved_blocks_read();
                assert!(read <= 12 && of == 20, "read {read} of {of} blocks");
                assert_eq!(ix.saved_damage(), None);
            }
            let got: Vec<_> = ids.iter().map(|s| ix.index_of_str(s)).collect();
            let want: Vec<_> = ids.iter().map(|s| cx.index_of_str(s)).collect();
            assert_eq!(got, want, "damage {damage}");
            assert_eq!(ix.entry_count(), cx.entry_count());
            assert_eq!(ix.has_duplicate_ids(), cx.has_duplicate_ids());
            assert_eq!(ix.leaf_entry(), cx.leaf_entry());
            assert_eq!(format!("{:?}", ix.labels()), format!("{:?}", cx.labels()));
            let n = cx.recs.len() as u32;
            for i in 0..n {
                assert_eq!(ix.walk_parent(i), cx.walk_parent(i), "entry {i}");
                assert_eq!(
                    ix.key_string(ix.recs.at(i as usize).id),
                    cx.key_string(cx.recs.at(i as usize).id)
                );
            }
            assert_eq!(ix.lookup_str("57"), None);
            assert_eq!(ix.winners(), cx.winners(), "damage {damage}");
            if damage {
                let why = ix.saved_damage().expect("caught when read");
                assert!(why.contains("checksum"), "{why}");
                assert!(!ix.saved_unrecoverable());
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A block of records forged with a valid checksum (its block sum and the header's
    /// recomputed) but an out-of-bounds key id is refused when read, and the cold scan's
    /// records stand in: no panic, no out-of-bounds read, the cold answers.
    #[test]
    fn a_forged_block_with_valid_checksums_is_bounds_checked_when_read() {
        let (dir, path, cfg) = sample_with_cache("st-saved-forged");
        let (cold, _) = Store::open_cached(&path, false, Some(&cfg)).unwrap();
        let f = File::open(&path).unwrap();
        let meta = f.metadata().unwrap();
        let saved_path = cfg.dir.join(file_name(meta.dev(), meta.ino()));
        let mut b = std::fs::read(&saved_path).unwrap();
        let v = |b: &[u8], i: usize| get_u64(b, 24 + 8 * i);
        let (meta_len, nrecs, nkeys, kb_len, path_len) =
            (v(&b, 7), v(&b, 8), v(&b, 10), v(&b, 11), v(&b, 12));
        let at_meta = HEADER_LEN + path_len as usize;
        let ktab_len = nkeys.div_ceil(KEY_GROUP as u64) as usize * 16;
        let rtab_len = nrecs.div_ceil(REC_BLOCK as u64) as usize * 8;
        let wtab_len = nkeys.div_ceil(REC_BLOCK as u64) as usize * 8;
        let at_ktab = at_meta + meta_len as usize;
        let at_rtab = at_ktab + ktab_len;
        let at_wtab = at_rtab + rtab_len;
        let at_recs = at_wtab + wtab_len + nkeys as usize * 8 + kb_len as usize;
        // record 0's id: a key id past every key
        b[at_recs..at_recs + 4].copy_from_slice(&(u32::MAX - 1).to_ne_bytes());
        let size = std::mem::size_of::<Rec>();
        let block0 = &b[at_recs..at_recs + size * REC_BLOCK.min(nrecs as usize)];
        let s0 = block_sum(0, block0);
        b[at_rtab..at_rtab + 8].copy_from_slice(&s0.to_ne_bytes());
        let mut h0 = b[..HEADER_LEN + path_len as usize].to_vec();
        h0[SUM_AT..SUM_AT + 8].fill(0);
        let nlookup = cold.index.lookup_len();
        let at_ltab = b.len() - nlookup * 8 - nlookup.div_ceil(REC_BLOCK) * 16;
        let sums = [
            section_sum(&b[at_meta..at_ktab]),
            section_sum(&b[at_ktab..at_rtab]),
            section_sum(&b[at_rtab..at_wtab]),
            section_sum(&b[at_wtab..at_wtab + wtab_len]),
            section_sum(&b[at_ltab..b.len() - nlookup * 8]),
        ];
        let sum = checksum(&h0, sums);
        b[SUM_AT..SUM_AT + 8].copy_from_slice(&sum.to_ne_bytes());
        std::fs::write(&saved_path, &b).unwrap();
        let (ix, _) = load(&cfg, &f, &meta).expect("the checksums add up: loads");
        assert_eq!(ix.saved_damage(), None);
        assert_eq!(
            format!("{:?}", ix.recs),
            format!("{:?}", cold.index.recs),
            "the cold records stand in"
        );
        let why = ix.saved_damage().expect("caught when read");
        assert!(why.contains("out of bounds"), "{why}");
        assert_eq!(ix.winners(), cold.index.winners());
        assert_eq!(ix.leaf_entry(), cold.index.leaf_entry());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A saved index of the previous layout (format 1: 48-byte records with the value
    /// position and the target inside), even with a checksum that adds up, is refused: a
    /// cold open.
    #[test]
    fn an_index_saved_by_the_previous_layout_is_refused() {
        let (dir, path, cfg) = sample_with_cache("st-saved-old");
        let (cold, _) = Store::open_cached(&path, false, Some(&cfg)).unwrap();
        let f = File::open(&path).unwrap();
        let meta = f.metadata().unwrap();
        let saved_path = cfg.dir.join(file_name(meta.dev(), meta.ino()));
        let good = std::fs::read(&saved_path).unwrap();
        // the meta and key sections, as one section before the records
        let before_recs = good.len() - cold.index.recs.len() * std::mem::size_of::<Rec>();
        let ix = &cold.index;
        // the records as format 1 wrote them
        let mut old_recs = Vec::new();
        for (i, r) in ix.recs.iter().enumerate() {
            let i = i as u32;
            old_recs.extend_from_slice(&r.offset().to_ne_bytes());
            for v in [
                r.len,
                ix.line_of(i),
                ix.vpos(i),
                r.id,
                r.parent,
                ix.target(i),
            ] {
                old_recs.extend_from_slice(&v.to_ne_bytes());
            }
            old_recs.extend_from_slice(&r.ts().to_ne_bytes());
            old_recs.extend_from_slice(&r.etype.to_ne_bytes());
            old_recs.extend_from_slice(&r.role.to_ne_bytes());
            old_recs.extend_from_slice(&[0u8; 4]);
        }
        assert_eq!(old_recs.len(), ix.recs.len() * 48);
        let mut head: [u8; HEADER_LEN] = good[..HEADER_LEN].try_into().unwrap();
        head[8..12].copy_from_slice(&1u32.to_ne_bytes());
        head[16..20].copy_from_slice(&48u32.to_ne_bytes());
        head[SUM_AT..SUM_AT + 8].fill(0);
        let meta_b = &good[HEADER_LEN..before_recs];
        let sum = checksum(
            &head,
            [section_sum(meta_b), 0, 0, section_sum(&old_recs), 0],
        );
        head[SUM_AT..SUM_AT + 8].copy_from_slice(&sum.to_ne_bytes());
        let mut old = head.to_vec();
        old.extend_from_slice(meta_b);
        old.extend_from_slice(&old_recs);
        std::fs::write(&saved_path, &old).unwrap();
        let err = load(&cfg, &f, &meta).err().expect("refused");
        assert!(err.contains("another format"), "{err}");
        // and the open is cold, with the cold answers, and saves the current layout again
        let (again, state) = Store::open_cached(&path, false, Some(&cfg)).unwrap();
        assert!(
            matches!(state, CacheState::Cold { saved: true, .. }),
            "{state:?}"
        );
        assert_eq!(again.index.recs.len(), ix.recs.len());
        let (_, state) = Store::open_cached(&path, false, Some(&cfg)).unwrap();
        assert!(matches!(state, CacheState::Warm { .. }), "{state:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
