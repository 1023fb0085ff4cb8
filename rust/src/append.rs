//! Building a new entry's line the way Pi's SessionManager writes it.
//!
//! `type`, a fresh 8-hex `id` (collision-checked against the index, Pi `generateId`), `parentId` =
//! the leaf, `timestamp` = now as `toISOString()`, then the entry's own fields, compact JSON.

use crate::index::{Index, Leaf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A small, fast generator for entry ids (uniqueness is checked against the index; ids need
/// no secrecy). xorshift64*. It keeps the next candidate id ready, so the key-table slot that
/// candidate's uniqueness check will read can be fetched into the cache ahead of time.
#[derive(Debug, Clone)]
pub struct IdRng {
    state: u64,
    next: Option<[u8; 8]>,
}

impl IdRng {
    pub fn seeded() -> Self {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        let local = 0u8;
        let addr = &local as *const u8 as u64;
        let mut s = t ^ (std::process::id() as u64).rotate_left(32) ^ addr.rotate_left(17);
        if s == 0 {
            s = 0x9E37_79B9_7F4A_7C15;
        }
        IdRng {
            state: s,
            next: None,
        }
    }
    #[cfg(test)]
    pub fn with_state(state: u64) -> Self {
        IdRng {
            state: state.max(1),
            next: None,
        }
    }
    pub fn next_u32(&mut self) -> u32 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }
    /// The next candidate id: 8 lowercase hex digits.
    fn candidate(&mut self) -> [u8; 8] {
        if let Some(c) = self.next.take() {
            return c;
        }
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let v = self.next_u32();
        let mut id = [0u8; 8];
        for (k, c) in id.iter_mut().enumerate() {
            *c = HEX[(v >> (28 - 4 * k) & 0xf) as usize];
        }
        id
    }
    /// Draws the next candidate now and prefetches the key-table slot its check will read. Called
    /// after an append, while the caller does other work.
    pub fn prepare(&mut self, index: &Index) {
        let c = self.candidate();
        index.prefetch_str(&c);
        self.next = Some(c);
    }
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = (z - era * 146_097) as u64;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe as i64 + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// JavaScript `new Date(ms).toISOString()` for years 0..=9999, as its 24 ASCII bytes. The shape is
/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn write_iso(ms: i64) -> [u8; 24] {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let y = y.clamp(0, 9999) as u32;
    let (h, mi, s, milli) = (
        (rem / 3_600_000) as u32,
        (rem / 60_000 % 60) as u32,
        (rem / 1000 % 60) as u32,
        (rem % 1000) as u32,
    );
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut v: u32| {
        for k in (0..width).rev() {
            out[at + k] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, y);
    put(5, 2, m);
    put(8, 2, d);
    put(11, 2, h);
    put(14, 2, mi);
    put(17, 2, s);
    put(20, 3, milli);
    out
}

/// JavaScript `new Date(ms).toISOString()` for years 0..=9999.
pub fn iso_from_ms(ms: i64) -> String {
    String::from_utf8_lossy(&write_iso(ms)).into_owned()
}

/// Milliseconds since the epoch now (the clock of every appended entry and new header).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Why a line could not be built.
#[derive(Debug, PartialEq)]
pub enum BuildError {
    BadType,
    BadBody,
    /// the body has an object with an array-index key, which `JSON.stringify` would write first.
    ///
    /// Only a writer that reorders keys can write it (see [`crate::jstext`])
    KeyOrder,
}

/// Appends the JSON text of string `s` to `out` (quotes included), as `JSON.stringify` writes it.
///
/// Ids are plain ASCII nearly always, so only strings that need escapes go through serde. Returns
/// whether `s` was written as it is (no escapes).
fn push_json_str(out: &mut Vec<u8>, s: &str) -> bool {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        true
    } else {
        out.extend_from_slice(
            serde_json::to_string(s)
                .unwrap_or_else(|_| "null".into())
                .as_bytes(),
        );
        false
    }
}

/// A fresh entry id: 8 lowercase hex digits not yet used in the index (Pi `generateId`). The one
/// id generator: appends built here and entries built in Python (through the binding's `new_id`)
/// both take their ids from it.
pub fn fresh_id(index: &Index, rng: &mut IdRng) -> [u8; 8] {
    loop {
        let id = rng.candidate();
        if index
            .index_of_str(std::str::from_utf8(&id).expect("hex digits are ASCII"))
            .is_none()
        {
            return id;
        }
    }
}

/// What follows the base fields of a new entry's line.
#[derive(Debug, Clone, Copy)]
pub enum Body<'a> {
    /// a compact JSON object: its members follow the base fields, in order
    Members(&'a [u8]),
    /// one member: the name (plain ASCII letters) and its compact JSON value
    Field(&'a str, &'a [u8]),
}

/// Where the parts of a line built by [`build_line_into`] are (byte offsets into the line).
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    pub id: [u8; 8],
    /// the `type` string's contents
    pub etype: (usize, usize),
    /// the `parentId` string's contents when it was written without escapes; `None` for null
    pub parent: Option<(usize, usize)>,
    /// a parent id that needed escapes (its text)
    pub parent_escaped: Option<String>,
    pub timestamp: (usize, usize),
    /// the `,` or `}` after the base members: where the body starts
    pub rest: usize,
}

/// Appends one entry line to `out`; returns the new id and where its parts are. The line is
/// `{"type":T,"id":ID,"parentId":LEAF,"timestamp":NOW,<body>}\n`. On error nothing is appended. The
/// JSON of the body is not checked here (the caller parses the rest of the line). With `js`, the
/// body (orjson's text) is written as `JSON.stringify` writes it ([`crate::jstext`]: JavaScript's
/// number spelling; `KeyOrder` for an array-index key); without, it is copied as it is (it is
/// `JSON.stringify`'s text already).
pub fn build_line_into(
    out: &mut Vec<u8>,
    index: &Index,
    rng: &mut IdRng,
    etype: &str,
    body: Body<'_>,
    js: bool,
    ms: i64,
) -> Result<Built, BuildError> {
    if etype.is_empty() || !etype.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return Err(BuildError::BadType);
    }
    let (name, json) = match body {
        Body::Members(b) => {
            let b = b.trim_ascii();
            if b.len() < 2 || b[0] != b'{' || b[b.len() - 1] != b'}' {
                return Err(BuildError::BadBody);
            }
            (None, b[1..b.len() - 1].trim_ascii())
        }
        Body::Field(name, v) => {
            if name.is_empty()
                || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                || v.trim_ascii().is_empty()
            {
                return Err(BuildError::BadBody);
            }
            (Some(name), v.trim_ascii())
        }
    };
    if memchr::memchr2(b'\n', b'\r', json).is_some() {
        return Err(BuildError::BadBody);
    }
    let id = fresh_id(index, rng);
    out.reserve(100 + etype.len() + json.len());
    let base = out.len();
    out.extend_from_slice(b"{\"type\":\"");
    let t0 = out.len() - base;
    out.extend_from_slice(etype.as_bytes());
    let t1 = out.len() - base;
    out.extend_from_slice(b"\",\"id\":\"");
    out.extend_from_slice(&id);
    out.extend_from_slice(b"\",\"parentId\":");
    let (mut parent, mut parent_escaped) = (None, None);
    match index.leaf {
        Leaf::Key(k) => match index.key_string(k) {
            Some(s) if index.leaf_entry().is_some() => {
                let p0 = out.len() - base;
                if push_json_str(out, s) {
                    parent = Some((p0 + 1, out.len() - base - 1));
                } else {
                    parent_escaped = Some(s.to_string());
                }
            }
            // a number or boolean id stays one (Pi: parentId = the leaf's id as it is)
            _ => match index
                .scalar_key_json(k)
                .filter(|_| index.leaf_entry().is_some())
            {
                Some(text) => out.extend_from_slice(text.as_bytes()),
                None => out.extend_from_slice(b"null"),
            },
        },
        Leaf::Null => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"timestamp\":\"");
    let ts0 = out.len() - base;
    out.extend_from_slice(&write_iso(ms));
    let ts1 = out.len() - base;
    out.push(b'"');
    let rest = out.len() - base;
    if let Some(name) = name {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
    } else if !json.is_empty() {
        out.push(b',');
    }
    if !js {
        out.extend_from_slice(json);
    } else if !crate::jstext::push_js_text(out, json) {
        out.truncate(base);
        return Err(BuildError::KeyOrder);
    }
    out.extend_from_slice(b"}\n");
    Ok(Built {
        id,
        etype: (t0, t1),
        parent,
        parent_escaped,
        timestamp: (ts0, ts1),
        rest,
    })
}

// ---------------------------------------------------------------------- writing to the file

/// What an append has done when it returns (see python/sessiontree/writer.py).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// buffered in the process, written at `BUFFER_LIMIT`, `flush()` or close
    None,
    /// handed to the OS with one `write()`
    Flush,
    /// written and `fsync`-ed
    Fsync,
}

impl Durability {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Durability::None),
            "flush" => Some(Durability::Flush),
            "fsync" => Some(Durability::Fsync),
            _ => None,
        }
    }
}

/// Buffered bytes are written once they reach this many.
pub const BUFFER_LIMIT: u64 = 64 << 10;

/// The append side of a session file.
///
/// Our own duplicate of the descriptor the writer lock was taken on (opened `O_APPEND`), and the
/// durability mode. Closing it does not release the lock while the original descriptor stays open.
#[derive(Debug)]
pub struct Sink {
    fd: std::os::fd::OwnedFd,
    pub mode: Durability,
    /// file offset up to which our bytes were handed to the OS (`None` mode buffers the rest)
    pub flushed_to: u64,
}

impl Sink {
    /// Duplicates `fd` (close-on-exec). `flushed_to` is where our data ends in the file now.
    pub fn new(fd: std::os::fd::RawFd, mode: Durability, flushed_to: u64) -> std::io::Result<Self> {
        // SAFETY: `fd` is borrowed only for the duration of the dup; the caller keeps it open.
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let fd = borrowed.try_clone_to_owned()?;
        Ok(Sink {
            fd,
            mode,
            flushed_to,
        })
    }

    /// Writes all of `data` with as many `write()` calls as it takes (retrying on EINTR).
    /// On failure after part of it was written, the part is cut off again when the file still
    /// ends with it (so no torn line stays behind), and the error is returned.
    pub fn write_all(&self, data: &[u8]) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let fd = self.fd.as_raw_fd();
        let mut done = 0usize;
        while done < data.len() {
            // SAFETY: the pointer and length describe the live slice `data[done..]`.
            let n = unsafe {
                libc::write(
                    fd,
                    data[done..].as_ptr() as *const libc::c_void,
                    data.len() - done,
                )
            };
            if n < 0 {
                let err = std::io::Error::last_os_error();
                if err.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                if done > 0 {
                    self.cut_torn(done as u64);
                }
                return Err(err);
            }
            if n == 0 {
                if done > 0 {
                    self.cut_torn(done as u64);
                }
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "write() wrote nothing",
                ));
            }
            done += n as usize;
        }
        Ok(())
    }

    /// Best effort: remove the `partial` bytes a failed write left at the end of the file,
    /// only when they are still the last bytes (nobody appended after them).
    fn cut_torn(&self, partial: u64) {
        use std::os::fd::AsRawFd;
        let fd = self.fd.as_raw_fd();
        // SAFETY: fstat/ftruncate on our own descriptor with a zeroed stat buffer.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) == 0 && st.st_size as u64 == self.flushed_to + partial {
                let _ = libc::ftruncate(fd, self.flushed_to as libc::off_t);
            }
        }
    }

    /// Whether the file we write to has no name left, and its length in bytes. No name left:
    /// removed, or another file renamed over it. One `fstat`, no path lookup.
    pub fn state(&self) -> std::io::Result<(bool, u64)> {
        use std::os::fd::AsRawFd;
        // SAFETY: fstat on our own descriptor into a zeroed buffer.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(self.fd.as_raw_fd(), &mut st) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok((st.st_nlink == 0, st.st_size as u64))
        }
    }

    /// `fstat` of the file we write to.
    pub fn metadata(&self) -> std::io::Result<std::fs::Metadata> {
        std::fs::File::from(self.fd.try_clone()?).metadata()
    }

    /// A descriptor of the same file to `fsync` without holding the store. On Linux a fresh,
    /// read-only open of the same inode (`/proc/self/fd/N`): it is another open file description,
    /// so it does not keep the writer lock alive should the session be closed during the fsync.
    /// Elsewhere, a duplicate of ours.
    pub fn dup(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            if let Ok(f) = std::fs::File::open(format!("/proc/self/fd/{}", self.fd.as_raw_fd())) {
                return Ok(f.into());
            }
        }
        self.fd.try_clone()
    }
}

/// `fsync(fd)`, retried on EINTR.
pub fn fsync_fd(fd: &std::os::fd::OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: fsync on a descriptor we own.
        if unsafe { libc::fsync(fd.as_raw_fd()) } == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_matches_javascript() {
        assert_eq!(iso_from_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_from_ms(1_748_779_248_123), "2025-06-01T12:00:48.123Z");
        assert_eq!(iso_from_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso_from_ms(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        assert_eq!(iso_from_ms(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn builds_pi_shaped_lines() {
        let ix = Index::new();
        let mut rng = IdRng::with_state(42);
        let build_line = |ix: &Index, rng: &mut IdRng, etype: &str, body: &[u8], ms: i64| {
            let mut line = Vec::new();
            build_line_into(&mut line, ix, rng, etype, Body::Members(body), true, ms)
                .map(|b| (String::from_utf8_lossy(&b.id).into_owned(), line))
        };
        let (id, line) = build_line(
            &ix,
            &mut rng,
            "message",
            br#"{"message":{"role":"user"}}"#,
            0,
        )
        .unwrap();
        let want = format!(
            "{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":null,\"timestamp\":\"1970-01-01T00:00:00.000Z\",\"message\":{{\"role\":\"user\"}}}}\n"
        );
        assert_eq!(String::from_utf8(line).unwrap(), want);
        assert_eq!(
            build_line(&ix, &mut rng, "Bad\"", b"{}", 0),
            Err(BuildError::BadType)
        );
        assert_eq!(
            build_line(&ix, &mut rng, "x", b"[]", 0),
            Err(BuildError::BadBody)
        );
        assert_eq!(
            build_line(&ix, &mut rng, "x", b"{\"a\":\n1}", 0),
            Err(BuildError::BadBody)
        );
        let mut out = Vec::new();
        let built = build_line_into(
            &mut out,
            &ix,
            &mut rng,
            "model_change",
            Body::Field("modelId", b"\"m\""),
            true,
            0,
        )
        .unwrap();
        let id = std::str::from_utf8(&built.id).unwrap();
        assert_eq!(&out[built.etype.0..built.etype.1], b"model_change");
        assert_eq!(
            &out[built.timestamp.0..built.timestamp.1],
            b"1970-01-01T00:00:00.000Z"
        );
        assert_eq!((built.parent, out[built.rest]), (None, b','));
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            format!("{{\"type\":\"model_change\",\"id\":\"{id}\",\"parentId\":null,\"timestamp\":\"1970-01-01T00:00:00.000Z\",\"modelId\":\"m\"}}\n")
        );
        assert!(build_line_into(
            &mut out,
            &ix,
            &mut rng,
            "x",
            Body::Field("a\"", b"1"),
            true,
            0
        )
        .is_err());
        // the body in JavaScript's spelling; array-index keys are left to an exact writer
        let (id, line) = build_line(&ix, &mut rng, "x", br#"{"a":[1.0,-0.0,1e+16]}"#, 0).unwrap();
        assert!(String::from_utf8(line)
            .unwrap()
            .ends_with(&format!("\"{id}\",\"parentId\":null,\"timestamp\":\"1970-01-01T00:00:00.000Z\",\"a\":[1,0,10000000000000000]}}\n")));
        let len = out.len();
        assert_eq!(
            build_line_into(
                &mut out,
                &ix,
                &mut rng,
                "x",
                Body::Field("v", br#"{"b":1,"0":2}"#),
                true,
                0
            )
            .map(|_| ()),
            Err(BuildError::KeyOrder)
        );
        assert_eq!(out.len(), len);
        build_line_into(
            &mut out,
            &ix,
            &mut rng,
            "x",
            Body::Field("v", br#"{"0":2,"b":1.0}"#),
            false,
            0,
        )
        .unwrap();
        assert!(out.ends_with(
            br#""v":{"0":2,"b":1.0}}
"#
        ));
    }
}
