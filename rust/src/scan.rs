//! Splitting bytes into lines and parsing them, in parallel batches.
//!
//! Lines end at `\n` only (never at `\r` alone or U+2028/U+2029); one trailing `\r` is not
//! part of the line's JSON.
//!
//! How the work is shared: the data is cut into batches, each batch into chunks at line
//! boundaries; chunks are split into lines and parsed on the rayon pool (each worker with
//! its own [`LineParser`]), and the parsed lines are indexed in file order on one thread
//! while the pool already parses the next batch. Finding line ends is part of the parallel
//! work too, so no pass over the data runs on one core. Parsed skeletons borrow the mapped
//! bytes, and at most two batches of them exist at a time, so memory stays bounded however
//! large the file.

use crate::index::{parse_one, pre_of, Index, LineResult, ParsedLine, Pre, MAX_LINE};
use crate::json::LineParser;
use crate::json::{Skel, TopKind};
use rayon::prelude::*;
use std::sync::Mutex;

/// Bytes per batch (the unit of the parse / index pipeline), at most and at least; within
/// these, a batch is sized to hold about `BATCH_LINES` lines of the length seen last, so
/// parsed records of tiny (hostile) lines never dwarf the bytes they came from.
const MAX_BATCH: usize = 2 << 20;
const MIN_BATCH: usize = 32 << 10;
const BATCH_LINES: usize = 32 << 10;
/// Chunks (parallel work items) per batch, and the most lines one chunk parses before it
/// hands back the rest (the hard bound on parsed records in flight).
const CHUNKS_PER_BATCH: usize = 16;
const CHUNK_LINES: usize = 8 << 10;
/// How far ahead of the parser pages are prefetched.
const PREFETCH: usize = 16 << 10;

/// Splits `data[s..e]` into lines and parses them, at most `CHUNK_LINES` of them. `e` is at a
/// line start (or the end of the data); `base` is the file offset of `data[0]`. Returns the
/// parsed lines and where it stopped (`e` unless the line limit was reached).
fn parse_chunk<'a>(data: &'a [u8], s: usize, e: usize, base: u64, pool: &Pool<'a>) -> Part<'a> {
    let mut parser = LineParser::new();
    let mut out = pool.take();
    let mut start = s;
    let mut fetched = s;
    while start < e {
        if out.len() == CHUNK_LINES {
            return Part { lines: out, stop: start, end: e };
        }
        // Ask for the next pages early: the hardware prefetcher stops at page boundaries, and
        // a mapped file's pages are scattered.
        #[cfg(target_arch = "x86_64")]
        while fetched < (start + PREFETCH).min(e) {
            // SAFETY: a prefetch is a hint; the address is inside `data`.
            unsafe {
                std::arch::x86_64::_mm_prefetch(data.as_ptr().add(fetched) as *const i8, std::arch::x86_64::_MM_HINT_T0)
            };
            fetched += 4096;
        }
        // fast path: an object line, parsed up to its newline in one pass, straight into
        // its slot of `out`
        if data[start] == b'{' {
            out.push(ParsedLine {
                offset: base + start as u64,
                len: 0,
                line: 0,
                terminated: false,
                end: 0,
                result: LineResult::Value(Skel::new(TopKind::Object), Pre::NONE),
            });
            let slot = out.last_mut().unwrap();
            let LineResult::Value(sk, pre) = &mut slot.result else { unreachable!() };
            match parser.parse_object_line_into(&data[start..e], sk) {
                Some(k) if k as u64 <= MAX_LINE => {
                    *pre = pre_of(sk);
                    let nl = start + k;
                    let mut end = nl;
                    if end > start && data[end - 1] == b'\r' {
                        end -= 1;
                    }
                    slot.terminated = nl < e;
                    slot.len = (end - start) as u64;
                    slot.end = base + if slot.terminated { nl + 1 } else { e } as u64;
                    start = if slot.terminated { nl + 1 } else { e };
                    continue;
                }
                _ => {
                    out.pop();
                }
            }
        }
        let nl = memchr::memchr(b'\n', &data[start..e]).map(|k| start + k);
        let stop = nl.unwrap_or(e);
        let mut end = stop;
        if end > start && data[end - 1] == b'\r' {
            end -= 1;
        }
        let line = &data[start..end];
        out.push(ParsedLine {
            offset: base + start as u64,
            len: line.len() as u64,
            line: 0,
            terminated: nl.is_some(),
            end: base + nl.map_or(e, |n| n + 1) as u64,
            result: parse_one(&mut parser, line),
        });
        start = nl.map_or(e, |n| n + 1);
    }
    Part { lines: out, stop: e, end: e }
}

/// The parsed lines of one chunk `[.., end)`, complete up to `stop`.
struct Part<'a> {
    lines: Vec<ParsedLine<'a>>,
    stop: usize,
    end: usize,
}

/// Chunk boundaries for `data[s..e]`: each chunk ends just after a newline (or at `e`).
fn chunks(data: &[u8], s: usize, e: usize, size: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity((e - s) / size + 1);
    let mut a = s;
    while a < e {
        let mut b = (a + size).min(e);
        if b < e {
            b = match memchr::memchr(b'\n', &data[b..e]) {
                Some(k) => b + k + 1,
                None => e,
            };
        }
        out.push((a, b));
        a = b;
    }
    out
}

/// Result vectors for reuse: fresh ones for every chunk would have the allocator hand out
/// (and the kernel zero) new pages over and over.
#[derive(Default)]
struct Pool<'a>(Mutex<Vec<Vec<ParsedLine<'a>>>>);

impl<'a> Pool<'a> {
    fn take(&self) -> Vec<ParsedLine<'a>> {
        self.0.lock().unwrap().pop().unwrap_or_default()
    }
    fn give(&self, mut v: Vec<ParsedLine<'a>>) {
        v.clear();
        self.0.lock().unwrap().push(v);
    }
}

fn parse_batch<'a>(data: &'a [u8], s: usize, e: usize, base: u64, chunk: usize, pool: &Pool<'a>) -> Vec<Part<'a>> {
    let parts = chunks(data, s, e, chunk);
    if parts.len() > 1 {
        parts.par_iter().map(|&(a, b)| parse_chunk(data, a, b, base, pool)).collect()
    } else {
        parts.iter().map(|&(a, b)| parse_chunk(data, a, b, base, pool)).collect()
    }
}

/// Indexes a batch's lines in order. When a chunk stopped short (its line limit), indexing
/// stops there: returns the position to go on from, and what followed is dropped.
fn ingest_batch<'a>(index: &mut Index, batch: Vec<Part<'a>>, pool: &Pool<'a>) -> Option<usize> {
    // how many lines ahead the key-table slots are prefetched
    const AHEAD: usize = 8;
    let mut resume = None;
    for part in batch {
        let mut lines = part.lines;
        if resume.is_none() {
            for pl in lines.iter().take(AHEAD) {
                index.prefetch_keys(pl);
            }
            for k in 0..lines.len() {
                if k + AHEAD < lines.len() {
                    index.prefetch_keys(&lines[k + AHEAD]);
                }
                let pl = &mut lines[k];
                pl.line = index.lines + 1;
                index.ingest(pl);
            }
            if part.stop < part.end {
                resume = Some(part.stop);
            }
        }
        pool.give(lines);
    }
    resume
}

/// Batch and chunk sizes from the average line length of the last batch.
struct Sizer {
    avg: usize,
}

impl Sizer {
    fn batch(&self) -> usize {
        self.avg.saturating_mul(BATCH_LINES).clamp(MIN_BATCH, MAX_BATCH)
    }
    fn chunk(&self) -> usize {
        (self.batch() / CHUNKS_PER_BATCH).max(4 << 10)
    }
    fn saw(&mut self, bytes: usize, parts: &[Part]) {
        let lines: usize = parts.iter().map(|p| p.lines.len()).sum();
        self.avg = (bytes / lines.max(1)).max(1);
    }
}

/// Scans `data` (which starts at file offset `base`) into `index`. `parallel` uses the rayon
/// pool. Returns the number of new entries.
pub fn scan_into(index: &mut Index, data: &[u8], base: u64, parallel: bool) -> usize {
    let before = index.recs.len();
    // Pi sessions average well over 1 KiB a line; a wrong guess only costs a rehash
    index.reserve(data.len() / 1024);
    // the end of the line that holds byte `from + size` (or the end of the data)
    let cut = |from: usize, size: usize| -> usize {
        let end = from.saturating_add(size).min(data.len());
        if end < data.len() {
            match memchr::memchr(b'\n', &data[end..]) {
                Some(k) => end + k + 1,
                None => data.len(),
            }
        } else {
            end
        }
    };
    let pool = Pool::default();
    // the first batch is small, until the line length is known
    let mut sizer = Sizer { avg: 1 };
    if !parallel || data.len() <= MIN_BATCH {
        // one chunk at a time: its parsed lines are still in cache when they are indexed
        let mut pos = 0;
        while pos < data.len() {
            let end = cut(pos, sizer.chunk());
            let part = vec![parse_chunk(data, pos, end, base, &pool)];
            sizer.saw(part[0].stop - pos, &part);
            pos = ingest_batch(index, part, &pool).unwrap_or(end);
        }
        return index.recs.len() - before;
    }
    // pipeline: index batch k on one worker while the pool parses batch k+1
    let mut pos = 0;
    let mut end = cut(0, sizer.batch());
    let mut pending = parse_batch(data, pos, end, base, sizer.chunk(), &pool);
    sizer.saw(end - pos, &pending);
    loop {
        pos = end;
        if pos >= data.len() {
            match ingest_batch(index, pending, &pool) {
                None => break,
                Some(stop) => {
                    // the last batch stopped short: go on from there
                    end = cut(stop, sizer.batch());
                    pending = parse_batch(data, stop, end, base, sizer.chunk(), &pool);
                    sizer.saw(end - stop, &pending);
                    continue;
                }
            }
        }
        end = cut(pos, sizer.batch());
        let chunk = sizer.chunk();
        let (resume, next) =
            rayon::join(|| ingest_batch(index, pending, &pool), || parse_batch(data, pos, end, base, chunk, &pool));
        match resume {
            None => {
                sizer.saw(end - pos, &next);
                pending = next;
            }
            Some(stop) => {
                // the batch before stopped short: what was parsed after it is dropped
                for p in next {
                    pool.give(p.lines);
                }
                end = cut(stop, sizer.batch());
                pending = parse_batch(data, stop, end, base, sizer.chunk(), &pool);
                sizer.saw(end - stop, &pending);
            }
        }
    }
    index.recs.len() - before
}

/// Lines and parse outcomes of `data`, without an index: the scanner alone (for benchmarks).
/// Returns (lines, JSON values, lines that are not JSON).
pub fn scan_only(data: &[u8], parallel: bool) -> (usize, usize, usize) {
    // chunks small enough never to reach their line limit
    let parts = chunks(data, 0, data.len(), CHUNK_LINES / 2);
    let pool = Pool::default();
    let count = |&(a, b): &(usize, usize)| {
        let v = parse_chunk(data, a, b, 0, &pool).lines;
        let ok = v.iter().filter(|p| matches!(p.result, LineResult::Value(..))).count();
        let bad = v.iter().filter(|p| matches!(p.result, LineResult::Bad(_))).count();
        let n = v.len();
        pool.give(v);
        (n, ok, bad)
    };
    let add = |x: (usize, usize, usize), y: (usize, usize, usize)| (x.0 + y.0, x.1 + y.1, x.2 + y.2);
    if parallel {
        parts.par_iter().map(count).reduce(|| (0, 0, 0), add)
    } else {
        parts.iter().map(count).fold((0, 0, 0), add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass object path must give exactly what splitting first and parsing each line
    /// alone gives.
    fn check(data: &[u8]) {
        let pool = Pool::default();
        let got = parse_chunk(data, 0, data.len(), 0, &pool).lines;
        let mut parser = LineParser::new();
        let mut want = Vec::new();
        let mut start = 0;
        while start < data.len() {
            let nl = memchr::memchr(b'\n', &data[start..]).map(|k| start + k);
            let stop = nl.unwrap_or(data.len());
            let end = if stop > start && data[stop - 1] == b'\r' { stop - 1 } else { stop };
            want.push((start as u64, (end - start) as u64, nl.is_some(), parse_one(&mut parser, &data[start..end])));
            start = nl.map_or(data.len(), |n| n + 1);
        }
        assert_eq!(got.len(), want.len(), "{:?}", String::from_utf8_lossy(data));
        for (g, w) in got.iter().zip(&want) {
            assert_eq!((g.offset, g.len, g.terminated), (w.0, w.1, w.2), "{:?}", String::from_utf8_lossy(data));
            let same = match (&g.result, &w.3) {
                (LineResult::Value(a, _), LineResult::Value(b, _)) => a == b,
                (LineResult::Bad(a), LineResult::Bad(b)) => a == b,
                (LineResult::Blank, LineResult::Blank) | (LineResult::TooLong, LineResult::TooLong) => true,
                _ => false,
            };
            assert!(same, "{:?}", String::from_utf8_lossy(&data[g.offset as usize..]));
        }
    }

    #[test]
    fn tiny_lines_are_scanned_in_bounded_pieces_with_the_same_result() {
        // more lines than a chunk takes, in every mode, and split at every kind of boundary
        let mut data = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n".to_vec();
        for i in 0..(3 * CHUNK_LINES + 77) {
            data.extend_from_slice(if i % 1000 == 999 {
                b"{\"type\":\"custom\",\"id\":\"x\",\"parentId\":null}\n"
            } else {
                b"\n"
            });
        }
        data.extend_from_slice(&vec![b'y'; 300 << 10]);
        data.extend_from_slice(b"\n{\"type\":\"custom\",\"id\":\"z\",\"parentId\":\"x\"}\n");
        for _ in 0..(CHUNK_LINES + 5) {
            data.extend_from_slice(b"x\n");
        }
        let snapshot = |ix: &Index| {
            let probs: Vec<_> = ix.problems.iter().map(|p| (p.line, p.offset, p.kind)).collect();
            (ix.lines, ix.recs.len(), ix.recs.last().map(|r| (r.line, r.offset)), probs)
        };
        let mut one = Index::new();
        scan_into(&mut one, &data, 0, false);
        let mut par = Index::new();
        scan_into(&mut par, &data, 0, true);
        assert_eq!(snapshot(&one), snapshot(&par));
        assert_eq!(one.lines as usize, 1 + 3 * CHUNK_LINES + 77 + 2 + CHUNK_LINES + 5);
        assert_eq!(one.recs.len(), (3 * CHUNK_LINES + 77) / 1000 + 1);
    }

    #[test]
    fn one_pass_lines_match_split_then_parse() {
        let pieces: &[&[u8]] = &[
            b"{\"id\":\"a\",\"parentId\":null}",
            b"{\"type\":\"label\",\"label\":\"x\\ny\"}",
            b"{",
            b"}",
            b"\"",
            b"\\",
            b"\n",
            b"\r",
            b"\r\n",
            b" ",
            b"\t",
            b"{\"a\":",
            b"1",
            b"[1,2]",
            b"\"s\"",
            b"\xc3\xa9",
            b"\xff",
            b"\x01",
            b"\xe2\x80\xa8",
            b"\xef\xbb\xbf",
            b"{\"message\":{\"role\":\"user\"}}",
            b",",
        ];
        let mut x: u64 = 0x1234_5678_9abc_def1;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..100_000 {
            let mut data = Vec::new();
            for _ in 0..next() % 12 {
                data.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize]);
            }
            check(&data);
        }
    }
}
