//! The conversion's output files, written as the package's `atomic_write` writes. A temp file
//! `.<name>.<hex>.tmp` is created `O_EXCL | O_NOFOLLOW` in the same folder, then fsync, a check of
//! the target, rename, fsync of the folder. A symbolic link, a FIFO, a device, a directory or a
//! source file at a target is refused (nothing written); a new file is never more readable than the
//! first source (nor than the file it replaces). All files of one conversion are renamed into place
//! only when every one was written; an error removes every temp file.

use super::{io_err, ConvertError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

struct One {
    path: PathBuf,
    tmp: PathBuf,
    w: Option<BufWriter<File>>,
    /// the bytes written, in memory mode
    mem: Vec<u8>,
}

/// The files one conversion writes.
pub struct Outputs {
    sources: Vec<(u64, u64)>,
    mode: u32,
    files: Vec<One>,
    /// files held in memory, never written (`Outputs::memory`)
    memory: bool,
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
        for (i, s) in sources.iter().enumerate() {
            let m = std::fs::metadata(s).map_err(io_err(s))?;
            ids.push((m.dev(), m.ino()));
            if i == 0 {
                mode = m.mode() & 0o777;
            }
        }
        Ok(Outputs {
            sources: ids,
            mode,
            files: Vec::new(),
            memory: false,
        })
    }

    /// Outputs held in memory (nothing touches the filesystem); `take_memory` hands them out.
    pub fn memory() -> Self {
        Outputs {
            sources: Vec::new(),
            mode: 0o600,
            files: Vec::new(),
            memory: true,
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
        if self.files.iter().any(|f| f.path == path) {
            return Err(ConvertError::Output(
                path.to_path_buf(),
                "is written twice by this conversion".into(),
            ));
        }
        if self.memory {
            self.files.push(One {
                path: path.to_path_buf(),
                tmp: PathBuf::new(),
                w: None,
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
            w: Some(BufWriter::with_capacity(1 << 20, f)),
            mem: Vec::new(),
        });
        Ok(self.files.len() - 1)
    }

    pub fn path(&self, slot: usize) -> &Path {
        &self.files[slot].path
    }

    pub fn write(&mut self, slot: usize, data: &[u8]) -> Result<(), ConvertError> {
        let one = &mut self.files[slot];
        if self.memory {
            one.mem.extend_from_slice(data);
            return Ok(());
        }
        let w = one.w.as_mut().expect("an open output");
        w.write_all(data)
            .map_err(|e| ConvertError::Io(one.path.clone(), e))
    }

    /// Syncs every file, checks each target again and renames them into place; the paths.
    pub fn commit(mut self) -> Result<Vec<PathBuf>, ConvertError> {
        if self.memory {
            return Ok(self.files.iter().map(|f| f.path.clone()).collect());
        }
        for one in &mut self.files {
            let w = one.w.take().expect("an open output");
            let f = w
                .into_inner()
                .map_err(|e| ConvertError::Io(one.path.clone(), e.into_error()))?;
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
        for one in &mut self.files {
            one.w = None;
            if !one.tmp.as_os_str().is_empty() {
                let _ = std::fs::remove_file(&one.tmp);
            }
        }
    }
}
