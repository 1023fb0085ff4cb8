//! The HTML export's bulk work (`sessiontree.html`).
//!
//! The session file's bytes cut at line starts into segments, each gzip-compressed (`libdeflate`,
//! level [`GZIP_LEVEL`]) and base64-encoded, and the index chunks (the digests of `crate::digest`,
//! compressed the same way), written to the page's file in order while later pieces are compressed
//! on every core.
//!
//! Memory stays bounded: at most [`WINDOW`] pieces are read or compressed ahead of the one being
//! written. The markup around each piece is the caller's (`heads[k]`, `tail`).
//!
//! Choice of compressor, measured on 24 segments of 2 MiB of a generated session (thread CPU
//! time, so the machine's load does not enter): `libdeflate` level 1 at 325-345 MB/s to 0.268
//! of the input; `flate2` on zlib-ng level 1 366-385 MB/s but to 0.369 (its level 1 is a
//! quicker strategy: 38% more bytes to base64, write and parse in the browser); `flate2` on
//! zlib-rs 298-308 MB/s to 0.369; `pigz -1` (zlib) ~150 MB/s per core to 0.29. zlib-ng would
//! also need cmake to build the wheel; libdeflate is plain C built by `cc`.

use crate::store::{DetachedReader, Store, StoreError};
use base64::Engine as _;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::{Condvar, Mutex};

/// gzip level of segments and index chunks (1: fastest; session JSON still shrinks ~4x).
pub const GZIP_LEVEL: i32 = 1;
/// Pieces read or compressed ahead of the one being written.
pub const WINDOW: usize = 4;

/// An error of the export: reading the session (its store's error) or writing the page.
#[derive(Debug)]
pub enum ExportError {
    Read(StoreError),
    Write(io::Error),
    /// the pieces named do not match the markup given for them ([`check_pieces`])
    Pieces,
}

impl From<StoreError> for ExportError {
    fn from(e: StoreError) -> Self {
        ExportError::Read(e)
    }
}

/// What each compressing thread keeps from one piece to the next: its compressor, its gzip
/// output buffer and the buffer segments are read into (no buffer of megabytes allocated, zeroed
/// and faulted in again per piece).
struct Worker {
    compressor: libdeflater::Compressor,
    gz: Vec<u8>,
    read: Vec<u8>,
}

thread_local! {
    static WORKER: std::cell::RefCell<Option<Worker>> = const { std::cell::RefCell::new(None) };
}

fn with_worker<T>(f: impl FnOnce(&mut Worker) -> T) -> T {
    WORKER.with(|w| {
        let mut w = w.borrow_mut();
        let w = w.get_or_insert_with(|| Worker {
            compressor: libdeflater::Compressor::new(
                libdeflater::CompressionLvl::new(GZIP_LEVEL).expect("a valid level"),
            ),
            gz: Vec::new(),
            read: Vec::new(),
        });
        f(w)
    })
}

/// `data` as one gzip member (level [`GZIP_LEVEL`]), then base64, safe inside any HTML element.
/// Base64 of the standard alphabet, padded: what `atob` reads.
pub fn gz_b64(data: &[u8]) -> Vec<u8> {
    with_worker(|w| gz_b64_with(w, data))
}

fn gz_b64_with(w: &mut Worker, data: &[u8]) -> Vec<u8> {
    let bound = w.compressor.gzip_compress_bound(data.len());
    if w.gz.len() < bound {
        w.gz.resize(bound, 0);
    }
    let n = w
        .compressor
        .gzip_compress(data, &mut w.gz)
        .expect("the output buffer has the compressor's bound");
    let engine = &base64::engine::general_purpose::STANDARD;
    let mut out = vec![0u8; base64::encoded_len(n, true).expect("a piece's length fits")];
    let k = engine
        .encode_slice(&w.gz[..n], &mut out)
        .expect("the output has the encoded length");
    out.truncate(k);
    out
}

/// `(offset, length)` of the pieces `[0, end)` is cut into at the line starts `starts`.
///
/// `starts`: any order; those outside `(0, end)` are ignored. Each piece is at most `seg_bytes`
/// long, except one that holds a longer line, which runs to the next line start after it. No line
/// start inside a piece is skipped over, so every line lies in one piece.
pub fn cut_at_line_starts(
    starts: impl IntoIterator<Item = u64>,
    end: u64,
    seg_bytes: u64,
) -> Vec<(u64, u64)> {
    let seg = seg_bytes.max(1);
    let mut out = Vec::new();
    let mut start = 0u64;
    // the last line start in (start, start + seg]
    let mut cand: Option<u64> = None;
    for o in starts {
        if o <= start || o >= end || cand.is_some_and(|c| o <= c) {
            continue;
        }
        if o - start <= seg {
            cand = Some(o);
            continue;
        }
        match cand.take() {
            Some(c) => {
                out.push((start, c - start));
                start = c;
                if o - start <= seg {
                    cand = Some(o);
                } else {
                    // [c, o) is one line longer than a piece
                    out.push((start, o - start));
                    start = o;
                }
            }
            None => {
                out.push((start, o - start));
                start = o;
            }
        }
    }
    if start < end {
        match cand {
            Some(c) if end - start > seg => {
                out.push((start, c - start));
                out.push((c, end - c));
            }
            _ => out.push((start, end - start)),
        }
    }
    out
}

/// The pieces of a store's known bytes, cut at its entries' line starts. No read: the index knows
/// where every entry's line starts. Lines that are not entries (blank, damaged) stay inside a
/// piece.
pub fn segment_bounds(st: &Store, seg_bytes: u64) -> Vec<(u64, u64)> {
    cut_at_line_starts(
        st.index.recs.iter().map(|r| r.offset()),
        st.end(),
        seg_bytes,
    )
}

/// The pieces of bytes held in memory, cut after the last `\n` within each `seg_bytes`. A longer
/// line makes its piece run to the first `\n` after it.
pub fn bytes_bounds(data: &[u8], seg_bytes: u64) -> Vec<(u64, u64)> {
    let starts = memchr::memchr_iter(b'\n', data).map(|i| i as u64 + 1);
    cut_at_line_starts(starts, data.len() as u64, seg_bytes)
}

/// Runs `work(k)` for `k` in `0..jobs` on `threads` threads, handing each result to `sink` in
/// order. At most [`WINDOW`] results wait or are in work ahead of the next one `sink` takes. The
/// first error (of a job or of `sink`) stops the rest and is returned.
pub fn in_order<E: Send>(
    jobs: usize,
    threads: usize,
    work: impl Fn(usize) -> Result<Vec<u8>, E> + Sync,
    mut sink: impl FnMut(usize, Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    struct State<E> {
        next: usize,
        taken: usize,
        done: BTreeMap<usize, Result<Vec<u8>, E>>,
        stop: bool,
    }
    let state = Mutex::new(State {
        next: 0,
        taken: 0,
        done: BTreeMap::new(),
        stop: false,
    });
    let cv = Condvar::new();
    let lock = || state.lock().unwrap_or_else(|p| p.into_inner());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(jobs) {
            s.spawn(|| loop {
                let k = {
                    let mut g = lock();
                    while !g.stop && g.next < jobs && g.next >= g.taken + WINDOW {
                        g = cv.wait(g).unwrap_or_else(|p| p.into_inner());
                    }
                    if g.stop || g.next >= jobs {
                        return;
                    }
                    g.next += 1;
                    g.next - 1
                };
                let r = work(k);
                let mut g = lock();
                g.done.insert(k, r);
                cv.notify_all();
            });
        }
        let mut result = Ok(());
        for k in 0..jobs {
            let r = {
                let mut g = lock();
                loop {
                    if let Some(r) = g.done.remove(&k) {
                        g.taken = k + 1;
                        cv.notify_all();
                        break r;
                    }
                    g = cv.wait(g).unwrap_or_else(|p| p.into_inner());
                }
            };
            if let Err(e) = r.and_then(|bytes| sink(k, bytes)) {
                result = Err(e);
                break;
            }
        }
        let mut g = lock();
        g.stop = true;
        cv.notify_all();
        drop(g);
        result
    })
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Writes the pieces `bounds[order[i]]` of `src` to `out` in that order. Each is written as
/// `heads[order[i]]`, its gzip+base64, then `tail`. Reading and compressing run on every core while
/// earlier pieces are written; a piece that cannot be read whole (the file shrank) stops the export
/// with that error.
pub fn write_segments(
    src: &DetachedReader,
    bounds: &[(u64, u64)],
    order: &[usize],
    heads: &[Vec<u8>],
    tail: &[u8],
    out: &mut impl Write,
) -> Result<(), ExportError> {
    in_order(
        order.len(),
        cores(),
        |i| {
            let (o, l) = bounds[order[i]];
            with_worker(|w| {
                let mut buf = std::mem::take(&mut w.read);
                let r = src.read_into(o, l, &mut buf);
                let b64 = r.map(|()| gz_b64_with(w, &buf));
                w.read = buf;
                Ok(b64?)
            })
        },
        |i, b64| write_piece(out, &heads[order[i]], &b64, tail),
    )
}

/// Writes one piece of the page: its markup `head`, the compressed `b64`, then `tail`.
fn write_piece(
    out: &mut impl Write,
    head: &[u8],
    b64: &[u8],
    tail: &[u8],
) -> Result<(), ExportError> {
    out.write_all(head)
        .and_then(|_| out.write_all(b64))
        .and_then(|_| out.write_all(tail))
        .map_err(ExportError::Write)
}

/// Writes the index chunks of entries `0..n` of `st`, `batch` entries a chunk.
///
/// Each chunk is `head`, the gzip+base64 of [`crate::digest::digest_columns`]' document, then
/// `tail`; batches are digested and compressed on every core while earlier ones are written.
pub fn write_index_chunks(
    st: &Store,
    batch: usize,
    preview_chars: usize,
    id_of: impl Fn(usize) -> Option<String> + Sync,
    head: &[u8],
    tail: &[u8],
    out: &mut impl Write,
) -> Result<(), ExportError> {
    let n = st.index.recs.len();
    let batch = batch.max(1);
    in_order(
        n.div_ceil(batch),
        cores(),
        |b| {
            let (s, e) = (b * batch, ((b + 1) * batch).min(n));
            let doc = crate::digest::digest_columns(st, s, e, preview_chars, &id_of)?;
            Ok(gz_b64(&doc))
        },
        |_, b64| write_piece(out, head, &b64, tail),
    )
}

// ---- the export's calls on a session (what `Session.html_*` reach through the binding) ----

/// The HTML view's index chunk of entries `start..end` (clamped to the entries there are).
///
/// [`crate::digest::digest_columns`]' JSON document, ids as strings where they are.
pub fn digest(
    st: &Store,
    start: usize,
    end: usize,
    preview_chars: usize,
) -> Result<Vec<u8>, StoreError> {
    st.check_live()?;
    let ix = &st.index;
    let end = end.min(ix.len());
    let start = start.min(end);
    let id_of = |i| ix.id_at(i).map(str::to_string);
    crate::digest::digest_columns(st, start, end, preview_chars, id_of)
}

/// [`segment_bounds`] of a store whose file has not changed under it.
pub fn live_segment_bounds(st: &Store, seg_bytes: u64) -> Result<Vec<(u64, u64)>, StoreError> {
    st.check_live()?;
    Ok(segment_bounds(st, seg_bytes))
}

/// [`write_index_chunks`] of every entry of `st`, ids as strings where they are.
pub fn write_index(
    st: &Store,
    batch: usize,
    preview_chars: usize,
    head: &[u8],
    tail: &[u8],
    out: &mut impl Write,
) -> Result<(), ExportError> {
    st.check_live()?;
    let ix = &st.index;
    let id_of = |i| ix.id_at(i).map(str::to_string);
    write_index_chunks(st, batch, preview_chars, id_of, head, tail, out)
}

/// Checks the pieces' plan: `Ok`, or [`ExportError::Pieces`]. `Ok` when `heads` has one head per
/// piece of `bounds` and `order` names only pieces that exist (what [`write_segments`] needs).
pub fn check_pieces(
    bounds: &[(u64, u64)],
    order: &[usize],
    heads: &[Vec<u8>],
) -> Result<(), ExportError> {
    if heads.len() != bounds.len() || order.iter().any(|&k| k >= bounds.len()) {
        return Err(ExportError::Pieces);
    }
    Ok(())
}

/// What the segments are read from.
///
/// `data` when given (an in-memory session's lines), else the session's known bytes through a
/// reader that does not hold the index.
pub fn segment_source(st: &Store, data: Option<Vec<u8>>) -> Result<DetachedReader, StoreError> {
    match data {
        Some(d) => Ok(DetachedReader::from_bytes(d)),
        None => st.detached_reader(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_cover(bounds: &[(u64, u64)], end: u64) {
        let mut at = 0;
        for &(o, l) in bounds {
            assert_eq!(o, at);
            assert!(l > 0);
            at += l;
        }
        assert_eq!(at, end);
    }

    #[test]
    fn pieces_cover_the_bytes_and_cut_only_at_line_starts() {
        let mut data = Vec::new();
        for i in 0..500 {
            data.extend(std::iter::repeat_n(b'x', (i * 37) % 300));
            data.push(b'\n');
        }
        data.extend_from_slice(b"torn");
        let starts: Vec<u64> = memchr::memchr_iter(b'\n', &data)
            .map(|i| i as u64 + 1)
            .collect();
        for seg in [1, 50, 299, 300, 1000, 1 << 20] {
            let b = bytes_bounds(&data, seg);
            check_cover(&b, data.len() as u64);
            for w in b.windows(2) {
                let cut = w[1].0;
                assert!(starts.contains(&cut));
                // no line start left out of a piece that had room for it
                let (o, l) = w[0];
                if l < seg {
                    assert!(!starts.iter().any(|&s| s > o + l && s <= o + seg));
                }
            }
        }
        assert!(bytes_bounds(b"", 10).is_empty());
        assert_eq!(bytes_bounds(b"abc", 10), vec![(0, 3)]);
        // one line longer than a piece runs to the next line start
        assert_eq!(
            cut_at_line_starts([2, 30, 32], 40, 10),
            vec![(0, 2), (2, 28), (30, 10)]
        );
        // unordered and out-of-range starts are ignored
        assert_eq!(
            cut_at_line_starts([0, 5, 3, 50, 8], 12, 6),
            vec![(0, 5), (5, 3), (8, 4)]
        );
    }

    #[test]
    fn gz_b64_round_trips() {
        let data = b"{\"type\":\"message\"}\n".repeat(1000);
        let b = gz_b64(&data);
        let gz = base64::engine::general_purpose::STANDARD
            .decode(&b)
            .unwrap();
        let mut d = libdeflater::Decompressor::new();
        let mut out = vec![0u8; data.len()];
        assert_eq!(d.gzip_decompress(&gz, &mut out).unwrap(), data.len());
        assert_eq!(out, data);
        assert!(!gz_b64(b"").is_empty());
    }

    #[test]
    fn in_order_keeps_order_bounds_work_and_stops_at_the_first_error() {
        let started = std::sync::atomic::AtomicUsize::new(0);
        let mut got = Vec::new();
        in_order::<()>(
            50,
            3,
            |k| {
                started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(vec![k as u8])
            },
            |k, v| {
                assert_eq!(v, vec![k as u8]);
                // never more than WINDOW pieces started past the one being taken
                assert!(started.load(std::sync::atomic::Ordering::SeqCst) <= k + 1 + WINDOW);
                got.push(k);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(got, (0..50).collect::<Vec<_>>());
        let mut seen = 0;
        let r = in_order(
            50,
            2,
            |k| if k == 7 { Err(k) } else { Ok(vec![]) },
            |_, _| {
                seen += 1;
                Ok(())
            },
        );
        assert_eq!((r, seen), (Err(7), 7));
        let r = in_order::<&str>(
            5,
            2,
            |_| Ok(vec![]),
            |k, _| if k == 2 { Err("w") } else { Ok(()) },
        );
        assert_eq!(r, Err("w"));
        in_order::<()>(0, 2, |_| unreachable!(), |_, _| unreachable!()).unwrap();
    }

    #[test]
    fn detached_reader_reads_what_the_store_knows_and_errs_past_it() {
        let r = DetachedReader::from_bytes(b"0123456789".to_vec());
        let mut buf = Vec::new();
        r.read_into(2, 5, &mut buf).unwrap();
        assert_eq!(buf, b"23456");
        assert!(r.read_into(8, 5, &mut buf).is_err());
        assert!(r.read_into(u64::MAX, 2, &mut buf).is_err());
    }
}
