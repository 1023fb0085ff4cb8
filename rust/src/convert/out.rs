//! The conversion's output files, written as the package's `atomic_write` writes. A temp file
//! `.<name>.<hex>.tmp` is created `O_EXCL | O_NOFOLLOW` in the same folder, then fsync, a check of
//! the target, rename, fsync of the folder. A symbolic link, a FIFO, a device, a directory or a
//! source file at a target is refused (nothing written); a new file is never more readable than the
//! first source (nor than the file it replaces). All files of one conversion are renamed into place
//! only when every one was written; an error removes every temp file.
//!
//! The bytes are written on a thread of their own (the conversion goes on while the kernel
//! copies them into the page cache), handed over in batches of `chunk` bytes (`chunk_for`: a
//! 1024th of the source, from 128 KiB to 1 MiB) through a channel of `DEPTH` batches, so at
//! most about `(DEPTH + 2) * chunk` bytes are in flight (4 MiB from a 1 GiB source, 512 KiB
//! up to a 128 MiB one). Every
//! `KICK` bytes of a file, the writer asks the kernel to start writing them back
//! (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, no wait), so the final `fsync` finds little left
//! to do; the `fsync` before the rename is what makes the file durable, as before.

use super::{io_err, ConvertError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// Bytes handed to the writer thread at a time, at least (small sources)...
const CHUNK_MIN: usize = 128 << 10;
/// ... and at most (each hand-off can wake the other thread: a 1 GiB source's 2.6 GB of Pi
/// text in 128 KiB batches was 20,000 hand-offs, 33,000 context switches).
const CHUNK_MAX: usize = 1 << 20;

/// The batch size for a source of `bytes` bytes: a 1024th of it, within `CHUNK_MIN..=CHUNK_MAX`.
pub(crate) fn chunk_for(bytes: u64) -> usize {
    (bytes >> 10).clamp(CHUNK_MIN as u64, CHUNK_MAX as u64) as usize
}
/// Batches queued for the writer thread.
const DEPTH: usize = 2;
/// Bytes of a file after which its write-back is started.
const KICK: u64 = 8 << 20;

struct One {
    path: PathBuf,
    tmp: PathBuf,
    /// the file is open (its bytes go to the writer thread)
    open: bool,
    /// the bytes written, in memory mode
    mem: Vec<u8>,
}

enum Msg {
    Open(usize, File),
    Data(usize, Vec<u8>),
}

/// The writer thread's failure: the slot whose write failed and the error.
type WriteFail = (usize, std::io::Error);

/// The thread that writes the output files, and the batch being filled for it.
struct Writer {
    tx: Option<SyncSender<Msg>>,
    /// emptied batches coming back, reused
    back: Receiver<Vec<u8>>,
    handle: Option<JoinHandle<Result<Vec<Option<File>>, WriteFail>>>,
    pending: Vec<u8>,
    pending_slot: usize,
    /// bytes per batch
    chunk: usize,
}

/// One file on the writer thread: buffered, with the offset its last write-back started at.
struct Sink {
    w: BufWriter<File>,
    written: u64,
    kicked: u64,
}

fn writer_loop(
    rx: Receiver<Msg>,
    back: SyncSender<Vec<u8>>,
) -> Result<Vec<Option<File>>, WriteFail> {
    let mut sinks: Vec<Option<Sink>> = Vec::new();
    while let Ok(m) = rx.recv() {
        match m {
            Msg::Open(slot, f) => {
                if sinks.len() <= slot {
                    sinks.resize_with(slot + 1, || None);
                }
                sinks[slot] = Some(Sink {
                    w: BufWriter::with_capacity(64 << 10, f),
                    written: 0,
                    kicked: 0,
                });
            }
            Msg::Data(slot, mut data) => {
                let s = sinks[slot].as_mut().expect("an open output");
                s.w.write_all(&data).map_err(|e| (slot, e))?;
                s.written += data.len() as u64;
                if s.written - s.kicked >= KICK {
                    s.w.flush().map_err(|e| (slot, e))?;
                    // a hint: a failure here is found again by the fsync
                    // SAFETY: the descriptor is open (owned by the BufWriter's File)
                    unsafe {
                        libc::sync_file_range(
                            s.w.get_ref().as_raw_fd(),
                            s.kicked as libc::off64_t,
                            (s.written - s.kicked) as libc::off64_t,
                            libc::SYNC_FILE_RANGE_WRITE,
                        );
                    }
                    s.kicked = s.written;
                }
                data.clear();
                let _ = back.try_send(data);
            }
        }
    }
    let mut files = Vec::with_capacity(sinks.len());
    for (slot, s) in sinks.into_iter().enumerate() {
        files.push(match s {
            Some(s) => Some(s.w.into_inner().map_err(|e| (slot, e.into_error()))?),
            None => None,
        });
    }
    Ok(files)
}

impl Writer {
    fn new(chunk: usize) -> Result<Self, std::io::Error> {
        let (tx, rx) = sync_channel(DEPTH);
        let (btx, back) = sync_channel(DEPTH + 1);
        let handle = std::thread::Builder::new()
            .name("sessiontree-convert-writer".into())
            .spawn(move || writer_loop(rx, btx))?;
        Ok(Writer {
            tx: Some(tx),
            back,
            handle: Some(handle),
            pending: Vec::new(),
            pending_slot: 0,
            chunk,
        })
    }

    /// Sends a message; false when the thread has stopped (on an error: `finish` returns it).
    fn send(&mut self, m: Msg) -> bool {
        self.tx.as_ref().is_some_and(|tx| tx.send(m).is_ok())
    }

    fn flush_pending(&mut self) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        let next = self
            .back
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(self.chunk));
        let full = std::mem::replace(&mut self.pending, next);
        let slot = self.pending_slot;
        self.send(Msg::Data(slot, full))
    }

    /// Queues `data` for `slot`; false when the thread has stopped.
    fn write(&mut self, slot: usize, mut data: &[u8]) -> bool {
        if slot != self.pending_slot && !self.flush_pending() {
            return false;
        }
        self.pending_slot = slot;
        while !data.is_empty() {
            if self.pending.capacity() == 0 {
                self.pending.reserve_exact(self.chunk);
            }
            let room = self.chunk.saturating_sub(self.pending.len()).max(1);
            let (now, rest) = data.split_at(room.min(data.len()));
            self.pending.extend_from_slice(now);
            data = rest;
            if self.pending.len() >= self.chunk && !self.flush_pending() {
                return false;
            }
        }
        true
    }

    /// Everything queued written: the files by slot, or the first failure.
    fn finish(&mut self) -> Result<Vec<Option<File>>, WriteFail> {
        self.flush_pending();
        self.tx = None;
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err((
                usize::MAX,
                std::io::Error::other("the writer thread panicked"),
            )),
            None => Ok(Vec::new()),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The files one conversion writes.
pub struct Outputs {
    sources: Vec<(u64, u64)>,
    /// the writer's batch size (`chunk_for` the first source)
    chunk: usize,
    mode: u32,
    files: Vec<One>,
    /// the paths of `files`: a conversion of many side sessions opens each in constant time
    paths: std::collections::HashSet<PathBuf>,
    /// files held in memory, never written (`Outputs::memory`)
    memory: bool,
    /// the writer thread, started with the first file
    writer: Option<Writer>,
}

fn check_target(
    path: &Path,
    sources: &[(u64, u64)],
) -> Result<Option<std::fs::Metadata>, ConvertError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ConvertError::Io(path.to_path_buf(), e)),
        Ok(m) => {
            let ft = m.file_type();
            if ft.is_symlink() {
                return Err(ConvertError::Output(
                    path.to_path_buf(),
                    "is a symbolic link; nothing is written through one (name its target)".into(),
                ));
            }
            if !ft.is_file() {
                return Err(ConvertError::Output(
                    path.to_path_buf(),
                    "is not a regular file; only a regular file is replaced".into(),
                ));
            }
            if sources.contains(&(m.dev(), m.ino())) {
                return Err(ConvertError::Output(
                    path.to_path_buf(),
                    "is the file being read; it is never written over".into(),
                ));
            }
            Ok(Some(m))
        }
    }
}

fn tmp_name(path: &Path) -> PathBuf {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{:08x}.tmp", h.finish() as u32))
}

impl Outputs {
    /// Outputs never written over any of `sources` (they must exist), never more readable than
    /// the first.
    pub fn new(sources: &[&Path]) -> Result<Self, ConvertError> {
        let mut ids = Vec::new();
        let mut mode = 0o644;
        let mut chunk = CHUNK_MIN;
        for (i, s) in sources.iter().enumerate() {
            let m = std::fs::metadata(s).map_err(io_err(s))?;
            ids.push((m.dev(), m.ino()));
            if i == 0 {
                mode = m.mode() & 0o777;
                chunk = chunk_for(m.len());
            }
        }
        Ok(Outputs {
            sources: ids,
            chunk,
            mode,
            files: Vec::new(),
            paths: Default::default(),
            memory: false,
            writer: None,
        })
    }

    /// Outputs held in memory (nothing touches the filesystem); `take_memory` hands them out.
    pub fn memory() -> Self {
        Outputs {
            sources: Vec::new(),
            chunk: CHUNK_MIN,
            mode: 0o600,
            files: Vec::new(),
            paths: Default::default(),
            memory: true,
            writer: None,
        }
    }

    /// The files of a memory conversion, the main one first: `(path, bytes)`.
    pub fn take_memory(mut self) -> Vec<(PathBuf, Vec<u8>)> {
        std::mem::take(&mut self.files)
            .into_iter()
            .map(|mut one| (std::mem::take(&mut one.path), std::mem::take(&mut one.mem)))
            .collect()
    }

    /// Another file that is read (a sidechain, a subagent file): never written over.
    pub fn also_read(&mut self, p: &Path) -> Result<(), ConvertError> {
        if self.memory {
            return Ok(());
        }
        let m = std::fs::metadata(p).map_err(io_err(p))?;
        self.sources.push((m.dev(), m.ino()));
        Ok(())
    }

    /// Opens a new output; returns its slot for `write`.
    pub fn open(&mut self, path: &Path) -> Result<usize, ConvertError> {
        if !self.paths.insert(path.to_path_buf()) {
            return Err(ConvertError::Output(
                path.to_path_buf(),
                "is written twice by this conversion".into(),
            ));
        }
        if self.memory {
            self.files.push(One {
                path: path.to_path_buf(),
                tmp: PathBuf::new(),
                open: false,
                mem: Vec::new(),
            });
            return Ok(self.files.len() - 1);
        }
        let existing = check_target(path, &self.sources)?;
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                std::fs::create_dir_all(dir).map_err(io_err(dir))?;
            }
        }
        let mut mode = self.mode;
        if let Some(m) = &existing {
            mode &= m.mode() & 0o777;
        }
        let tmp = tmp_name(path);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(mode)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        if existing.is_some() {
            // the umask applied to a new path; a replaced file keeps its (narrowed) bits
            let _ = f.set_permissions(std::fs::Permissions::from_mode(mode));
        }
        self.files.push(One {
            path: path.to_path_buf(),
            tmp,
            open: true,
            mem: Vec::new(),
        });
        let slot = self.files.len() - 1;
        if self.writer.is_none() {
            self.writer = Some(Writer::new(self.chunk).map_err(io_err(path))?);
        }
        let w = self.writer.as_mut().expect("a writer");
        if !w.send(Msg::Open(slot, f)) {
            return Err(self.failed());
        }
        Ok(slot)
    }

    pub fn path(&self, slot: usize) -> &Path {
        &self.files[slot].path
    }

    pub fn write(&mut self, slot: usize, data: &[u8]) -> Result<(), ConvertError> {
        if self.memory {
            self.files[slot].mem.extend_from_slice(data);
            return Ok(());
        }
        assert!(self.files[slot].open, "an open output");
        let w = self.writer.as_mut().expect("a writer");
        if w.write(slot, data) {
            Ok(())
        } else {
            Err(self.failed())
        }
    }

    /// The writer thread's error, once it has stopped.
    fn failed(&mut self) -> ConvertError {
        let r = self.writer.as_mut().map(Writer::finish);
        self.writer = None;
        match r {
            Some(Err(fail)) => self.fail_of(fail),
            _ => ConvertError::Io(
                PathBuf::new(),
                std::io::Error::other("the writer thread stopped"),
            ),
        }
    }

    fn fail_of(&self, (slot, e): WriteFail) -> ConvertError {
        match self.files.get(slot) {
            Some(one) => ConvertError::Io(one.path.clone(), e),
            None => ConvertError::Io(PathBuf::new(), e),
        }
    }

    /// Syncs every file, checks each target again and renames them into place; the paths.
    pub fn commit(mut self) -> Result<Vec<PathBuf>, ConvertError> {
        if self.memory {
            return Ok(self.files.iter().map(|f| f.path.clone()).collect());
        }
        let files = match self.writer.as_mut().map(Writer::finish) {
            None => Vec::new(),
            Some(Ok(f)) => f,
            Some(Err(fail)) => {
                self.writer = None;
                return Err(self.fail_of(fail));
            }
        };
        self.writer = None;
        for (one, f) in self.files.iter_mut().zip(files) {
            let f = f.expect("an open output");
            one.open = false;
            f.sync_all().map_err(io_err(&one.path))?;
        }
        for one in &self.files {
            check_target(&one.path, &self.sources)?;
        }
        let mut done = Vec::new();
        let mut dirs: Vec<PathBuf> = Vec::new();
        for one in &mut self.files {
            std::fs::rename(&one.tmp, &one.path).map_err(io_err(&one.path))?;
            one.tmp = PathBuf::new();
            done.push(one.path.clone());
            if let Some(d) = one.path.parent() {
                if !dirs.iter().any(|x| x == d) {
                    dirs.push(d.to_path_buf());
                }
            }
        }
        for d in dirs {
            let d = if d.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                d
            };
            if let Ok(f) = File::open(&d) {
                let _ = f.sync_all();
            }
        }
        Ok(done)
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        self.writer = None; // joins the thread: its files are closed first
        for one in &mut self.files {
            one.open = false;
            if !one.tmp.as_os_str().is_empty() {
                let _ = std::fs::remove_file(&one.tmp);
            }
        }
    }
}
