//! The keys of an index (key records and key bytes, see [`KeyRec`]), behind one accessor.
//!
//! Keys interned in this process are in memory; a saved index's keys stay in the saved file
//! until a query reads them ([`PagedKeys`]): a group of [`KEY_GROUP`] keys at a time (its key
//! records and its bytes, two `pread`s), checked against the group's checksum and its rules
//! (`check_keys`) when read, then kept. A damaged group is served like a damaged block of
//! records (see `recs`): from a cold scan that gives the same keys, else placeholders and the
//! store refuses to answer.

use super::keys::{KeyRec, K_NULL, K_OBJECT, K_UNDEFINED};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};

/// Keys per group of a saved index: one checksum.
pub const KEY_GROUP: usize = 1024;

/// One group of saved keys: its records and bytes (which start at `start` of the key bytes).
struct Group {
    recs: Vec<KeyRec>,
    bytes: Vec<u8>,
    start: u64,
}

/// Saved key sections (key records, key bytes) as a cold scan gives them.
pub type KeySections = (Vec<u8>, Vec<u8>);

/// The keys of a saved index, read on demand (see the module docs).
pub struct PagedKeys {
    file: Arc<File>,
    at_recs: u64,
    at_bytes: u64,
    n: usize,
    total_bytes: u64,
    /// per group: its checksum and where its bytes start
    table: Vec<(u64, u64)>,
    /// a group's checksum: (group number, its key records' bytes, its key bytes)
    sum: fn(u64, &[u8], &[u8]) -> u64,
    rescan: Box<dyn Fn() -> Option<KeySections> + Send + Sync>,
    groups: Vec<OnceLock<Group>>,
    cold: OnceLock<Option<KeySections>>,
    damaged: OnceLock<String>,
}

impl PagedKeys {
    /// `n` keys of `file`: records at `at_recs` (8 bytes each), bytes at `at_bytes`. There are
    /// `total_bytes` key bytes; `table` holds one (checksum, bytes start) per group of
    /// [`KEY_GROUP`].
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        file: Arc<File>,
        at_recs: u64,
        at_bytes: u64,
        n: usize,
        total_bytes: u64,
        table: Vec<(u64, u64)>,
        sum: fn(u64, &[u8], &[u8]) -> u64,
        rescan: Box<dyn Fn() -> Option<KeySections> + Send + Sync>,
    ) -> Option<Self> {
        if table.len() != n.div_ceil(KEY_GROUP) || n < 2 {
            return None;
        }
        let groups = (0..table.len()).map(|_| OnceLock::new()).collect();
        Some(PagedKeys {
            file,
            at_recs,
            at_bytes,
            n,
            total_bytes,
            table,
            sum,
            rescan,
            groups,
            cold: OnceLock::new(),
            damaged: OnceLock::new(),
        })
    }

    /// Group `g`'s keys: (first key id, how many, bytes start, bytes end).
    fn span(&self, g: usize) -> (usize, usize, u64, u64) {
        let first = g * KEY_GROUP;
        let k = KEY_GROUP.min(self.n - first);
        let start = self.table[g].1;
        let end = self.table.get(g + 1).map_or(self.total_bytes, |t| t.1);
        (first, k, start, end)
    }

    #[inline]
    fn group(&self, g: usize) -> &Group {
        self.groups[g].get_or_init(|| self.load(g))
    }

    #[cold]
    fn load(&self, g: usize) -> Group {
        match self.read(g) {
            Ok(gr) => gr,
            Err(why) => {
                let _ = self
                    .damaged
                    .set(format!("saved index damaged (key group {g}: {why})"));
                let (first, k, start, end) = self.span(g);
                match self.cold.get_or_init(|| (self.rescan)()) {
                    Some((recs, bytes))
                        if recs.len() == self.n * 8
                            && bytes.len() as u64 == self.total_bytes
                            && start <= end
                            && end <= self.total_bytes =>
                    {
                        Group {
                            recs: recs[first * 8..(first + k) * 8]
                                .chunks_exact(8)
                                .map(|c| KeyRec(u64::from_ne_bytes(c.try_into().expect("8"))))
                                .collect(),
                            bytes: bytes[start as usize..end as usize].to_vec(),
                            start,
                        }
                    }
                    _ => {
                        // placeholders: empty keys that are nothing's id
                        let start = start.min(self.total_bytes);
                        let tag = |i: usize| match first + i {
                            0 => K_UNDEFINED,
                            1 => K_NULL,
                            _ => K_OBJECT,
                        };
                        Group {
                            recs: (0..k).map(|i| KeyRec::new(tag(i), start)).collect(),
                            bytes: Vec::new(),
                            start,
                        }
                    }
                }
            }
        }
    }

    fn read(&self, g: usize) -> Result<Group, String> {
        let (first, k, start, end) = self.span(g);
        if start > end || end > self.total_bytes {
            return Err("out of bounds".into());
        }
        let mut rb = vec![0u8; k * 8];
        let mut bytes = vec![0u8; (end - start) as usize];
        let e = |e: std::io::Error| e.to_string();
        self.file
            .read_exact_at(&mut rb, self.at_recs + first as u64 * 8)
            .map_err(e)?;
        self.file
            .read_exact_at(&mut bytes, self.at_bytes + start)
            .map_err(e)?;
        if (self.sum)(g as u64, &rb, &bytes) != self.table[g].0 {
            return Err("checksum".into());
        }
        let recs: Vec<KeyRec> = rb
            .chunks_exact(8)
            .map(|c| KeyRec(u64::from_ne_bytes(c.try_into().expect("8"))))
            .collect();
        super::persist::check_keys(&recs, &bytes, start, first).ok_or("bad keys")?;
        Ok(Group { recs, bytes, start })
    }

    /// Why a group was refused (the first), if one was.
    pub fn damaged(&self) -> Option<&str> {
        self.damaged.get().map(String::as_str)
    }

    /// Whether a refused group could not be served from a cold scan either.
    pub fn unrecoverable(&self) -> bool {
        matches!(self.cold.get(), Some(c) if c.as_ref().is_none_or(|(r, b)| r.len() != self.n * 8 || b.len() as u64 != self.total_bytes))
    }

    /// Groups read so far, of how many.
    pub fn groups_read(&self) -> (usize, usize) {
        (
            self.groups.iter().filter(|g| g.get().is_some()).count(),
            self.groups.len(),
        )
    }
}

/// The keys of an index: the saved ones read on demand, then those interned since.
#[derive(Default)]
pub struct KeyStore {
    saved: Option<Box<PagedKeys>>,
    /// how many keys are saved ones (0: none)
    nsaved: usize,
    /// the saved keys' bytes (where the bytes in `bytes` start)
    base: u64,
    recs: Vec<KeyRec>,
    bytes: Vec<u8>,
}

impl KeyStore {
    /// Keys held in memory (checked by the caller).
    pub fn from_vecs(recs: Vec<KeyRec>, bytes: Vec<u8>) -> Self {
        KeyStore {
            recs,
            bytes,
            ..Default::default()
        }
    }
    /// Keys read on demand.
    pub fn paged(p: PagedKeys) -> Self {
        KeyStore {
            nsaved: p.n,
            base: p.total_bytes,
            saved: Some(Box::new(p)),
            ..Default::default()
        }
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.nsaved + self.recs.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Key `kid`'s tag and bytes (`kid` < `len`).
    #[inline]
    pub fn data(&self, kid: u32) -> (u8, &[u8]) {
        let i = kid as usize;
        if i >= self.nsaved {
            let j = i - self.nsaved;
            let k = self.recs[j];
            let end = match self.recs.get(j + 1) {
                Some(n) => n.start(),
                None => self.base + self.bytes.len() as u64,
            };
            let (s, e) = ((k.start() - self.base) as usize, (end - self.base) as usize);
            return (k.tag(), &self.bytes[s..e]);
        }
        let p = self.saved.as_ref().expect("saved keys");
        let g = i / KEY_GROUP;
        let gr = p.group(g);
        let j = i % KEY_GROUP;
        let k = gr.recs[j];
        let end = match gr.recs.get(j + 1) {
            Some(n) => n.start(),
            None => gr.start + gr.bytes.len() as u64,
        };
        // (checked when the group was read: starts in order inside the group's bytes)
        let (s, e) = ((k.start() - gr.start) as usize, (end - gr.start) as usize);
        (k.tag(), &gr.bytes[s..e])
    }
    /// Key `kid`'s tag (`kid` < `len`).
    #[inline]
    pub fn tag(&self, kid: u32) -> u8 {
        self.data(kid).0
    }
    /// Adds a key; its id.
    #[inline]
    pub fn push(&mut self, tag: u8, data: &[u8]) -> u32 {
        let kid = self.len() as u32;
        self.recs
            .push(KeyRec::new(tag, self.base + self.bytes.len() as u64));
        self.bytes.extend_from_slice(data);
        kid
    }
    /// The in-memory arrays, to reserve room in.
    pub fn tails_mut(&mut self) -> (&mut Vec<KeyRec>, &mut Vec<u8>) {
        (&mut self.recs, &mut self.bytes)
    }
    /// The key records (8 bytes each) and the key bytes, whole. Every saved group is read; borrowed
    /// when every key is in memory.
    pub fn sections(&self) -> (std::borrow::Cow<'_, [u8]>, std::borrow::Cow<'_, [u8]>) {
        if self.saved.is_none() {
            // SAFETY: `KeyRec` is a transparent u64: its memory is initialised, the length exact.
            let recs = unsafe {
                std::slice::from_raw_parts(
                    self.recs.as_ptr() as *const u8,
                    std::mem::size_of_val(&self.recs[..]),
                )
            };
            return (recs.into(), self.bytes.as_slice().into());
        }
        let mut recs = Vec::with_capacity(self.len() * 8);
        let mut bytes = Vec::with_capacity((self.base as usize) + self.bytes.len());
        if let Some(p) = &self.saved {
            for g in 0..p.groups.len() {
                let gr = p.group(g);
                recs.extend(gr.recs.iter().flat_map(|k| k.0.to_ne_bytes()));
                bytes.extend_from_slice(&gr.bytes);
            }
        }
        recs.extend(self.recs.iter().flat_map(|k| k.0.to_ne_bytes()));
        bytes.extend_from_slice(&self.bytes);
        (recs.into(), bytes.into())
    }
    pub fn damaged(&self) -> Option<&str> {
        self.saved.as_ref()?.damaged()
    }
    pub fn unrecoverable(&self) -> bool {
        self.saved.as_ref().is_some_and(|p| p.unrecoverable())
    }
    pub fn groups_read(&self) -> (usize, usize) {
        self.saved.as_ref().map_or((0, 0), |p| p.groups_read())
    }
}
