//! Splitting bytes into lines and parsing them, in parallel chunks.
//!
//! Lines end at `\n` only (never at `\r` alone or U+2028/U+2029); one trailing `\r` is not
//! part of the line's JSON.
//!
//! How the work is shared: the data is handed out in chunks cut at line boundaries, in file
//! order; each thread splits its chunk into lines and parses them (with its own
//! [`LineParser`]). One thread also indexes the parsed chunks in file order as they come in,
//! and parses chunks itself whenever the next one is not ready, so both cores stay busy
//! without a barrier between rounds of work. Finding line ends is part of the parallel work
//! too, so no pass over the data runs on one core. Parsed skeletons borrow the mapped bytes;
//! how many parsed lines may wait to be indexed is bounded (a small share of the data's
//! size), so memory stays bounded however large the file.
//!
//! A file is scanned the same way without ever being mapped ([`scan_file`]): each thread reads
//! the ranges it is handed with `pread` into a buffer of its own and parses them there; the
//! indexing thread checks that the ranges' lines meet end to start.

use crate::index::{parse_one, pre_of, Index, LineResult, ParsedLine, Pre, MAX_LINE};
use crate::json::LineParser;
use crate::json::{Skel, TopKind};
use rayon::prelude::*;
use std::sync::{Condvar, Mutex, MutexGuard};

/// Chunks (the unit of parallel work) hold about `TARGET_LINES` lines of the length seen
/// last, within these sizes in bytes; a chunk parses at most `CHUNK_LINES` lines before it
/// hands back the rest.
const MIN_CHUNK: usize = 4 << 10;
const MAX_CHUNK: usize = 256 << 10;
const TARGET_LINES: usize = 2 << 10;
const CHUNK_LINES: usize = 8 << 10;
/// Chunks parsed (or being parsed) ahead of the one being indexed, at most.
const RING: usize = 512;
/// Parsed lines waiting to be indexed, at most about this many bytes of them per byte of
/// data (within the bounds below). A deep queue lets the parsing thread run on while the
/// indexing one is held up (the OS gave its core to another process), but costs memory.
const QUEUE_SHARE: usize = 64;
const MIN_QUEUE: usize = 256 << 10;
const MAX_QUEUE: usize = 16 << 20;
/// Below this many bytes one thread scans (handing work to others costs more than it saves).
const PARALLEL_MIN: usize = 32 << 10;
/// How far ahead of the parser the data is prefetched.
#[cfg(target_arch = "x86_64")]
const PREFETCH: usize = 16 << 10;

/// Splits `data[s..e]` into lines and parses them, at most `CHUNK_LINES` of them. `e` is at a
/// line start (or the end of the data); `base` is the file offset of `data[0]`. Returns the
/// parsed lines and where it stopped (`e` unless the line limit was reached).
fn parse_chunk<'a>(data: &'a [u8], s: usize, e: usize, base: u64, pool: &Pool<'a>) -> Part<'a> {
    let mut out = pool.take();
    let stop = parse_lines(data, s, e, base, pool.rows, &mut out);
    // Object lines were parsed without their UTF-8 check: one check of the whole chunk, while
    // it is still in cache, settles them all at once in the common case. (A line's bytes
    // outside its strings are ASCII, and lines split at `\n`, so the chunk is UTF-8 exactly
    // when every line is.)
    if simdutf8::basic::from_utf8(&data[s..stop]).is_err() {
        for pl in out.iter_mut() {
            if let LineResult::Value(sk, _) = &mut pl.result {
                let a = (pl.offset - base) as usize;
                sk.invalid_utf8 =
                    simdutf8::basic::from_utf8(&data[a..a + pl.len as usize]).is_err();
            }
        }
    }
    if pool.rows {
        row_lines(data, base, &mut out);
    }
    Part {
        lines: out,
        start: s,
        stop,
        end: e,
    }
}

/// The stats row ([`crate::rows::line_row_at`]) of each usage candidate among `lines`, from the
/// places in its bytes (in `data`, file offset `base`) its parse recorded: what the index adds to
/// its row sums, so the row never reads the line again (and the content blocks the parse walked
/// are not walked twice). The type and role codes are the ones the
/// parse worked out (a name past the fixed tables is no candidate); the index checks them
/// against the codes it gives the entry.
fn row_lines(data: &[u8], base: u64, lines: &mut [ParsedLine<'_>]) {
    use crate::index::{ROLE_NAMES, T_MESSAGE};
    for pl in lines.iter_mut() {
        let LineResult::Value(sk, pre) = &pl.result else {
            continue;
        };
        let Some(etype) = pre.etype else { continue };
        let role = if etype == T_MESSAGE {
            match pre.role {
                Some(r) => r,
                None => continue,
            }
        } else {
            0
        };
        if !crate::rows::is_candidate(etype, role) {
            continue;
        }
        let a = (pl.offset - base) as usize;
        let line = &data[a..a + pl.len as usize];
        let name = ROLE_NAMES.get(role as usize).copied().unwrap_or("");
        let row = crate::rows::line_row_at(etype, name, line, &sk.rows);
        pl.row = Some(Box::new((etype, role, row)));
    }
}

/// [`parse_chunk`] before the UTF-8 check of object lines.
///
/// Pushes the lines to `out` and returns where it stopped.
#[inline(always)]
fn parse_lines<'a>(
    data: &'a [u8],
    s: usize,
    e: usize,
    base: u64,
    rows: bool,
    out: &mut Vec<ParsedLine<'a>>,
) -> usize {
    // (with `rows`, the parse records where each line's stats row facts are)
    let mut parser = LineParser::with_rows(rows);
    let mut start = s;
    #[cfg(target_arch = "x86_64")]
    let mut fetched = s;
    while start < e {
        if out.len() == CHUNK_LINES {
            return start;
        }
        // Ask for the bytes ahead early, every cache line of them: the hardware prefetcher
        // stops at page boundaries, and a mapped file's pages are scattered. (One prefetch a
        // page was measured to do nothing; one a line saves about 3%.)
        #[cfg(target_arch = "x86_64")]
        while fetched < (start + PREFETCH).min(e) {
            // SAFETY: a prefetch is a hint; the address is inside `data`.
            unsafe {
                std::arch::x86_64::_mm_prefetch(
                    data.as_ptr().add(fetched) as *const i8,
                    std::arch::x86_64::_MM_HINT_T0,
                )
            };
            fetched += 64;
        }
        // fast path: an object line, parsed up to its newline in one pass, straight into
        // its slot of `out`
        if data[start] == b'{' {
            // (built in the vector's spare room: a push would build it aside and copy it)
            out.reserve(1);
            let n = out.len();
            out.spare_capacity_mut()[0].write(ParsedLine {
                offset: base + start as u64,
                len: 0,
                line: 0,
                terminated: false,
                end: 0,
                result: LineResult::Value(Skel::new(TopKind::Object), Pre::NONE),
                row: None,
            });
            // SAFETY: the slot past the old length was just written.
            unsafe { out.set_len(n + 1) };
            let slot = &mut out[n];
            let LineResult::Value(sk, pre) = &mut slot.result else {
                unreachable!()
            };
            match parser.parse_object_line_into_no_utf8(&data[start..e], sk) {
                Some(k) if k as u64 <= MAX_LINE => {
                    *pre = pre_of(sk);
                    let nl = start + k;
                    let end = content_end(data, start, nl);
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
        let at = line_at(data, start, e);
        let line = &data[start..at.end];
        out.push(ParsedLine {
            offset: base + start as u64,
            len: line.len() as u64,
            line: 0,
            terminated: at.nl.is_some(),
            end: base + at.next as u64,
            result: parse_one(&mut parser, line),
            row: None,
        });
        start = at.next;
    }
    e
}

/// Where one line of `data[..e]` that starts at `start` ends.
struct LineAt {
    /// the end of its content (its `\n` and one `\r` before it cut)
    end: usize,
    /// its `\n` (None: the line runs to `e` unterminated)
    nl: Option<usize>,
    /// where the next line starts
    next: usize,
}

/// The line-ending rule.
///
/// A line ends at `\n` only, and one `\r` before it (or before `e`, unterminated) is not part of
/// the line's content.
#[inline(always)]
fn line_at(data: &[u8], start: usize, e: usize) -> LineAt {
    let nl = memchr::memchr(b'\n', &data[start..e]).map(|k| start + k);
    let stop = nl.unwrap_or(e);
    LineAt {
        end: content_end(data, start, stop),
        nl,
        next: nl.map_or(e, |n| n + 1),
    }
}

/// The end of the content of the line `data[start..stop]` (`stop`: its `\n` or the data's end).
///
/// One trailing `\r` cut; see [`line_at`].
#[inline(always)]
fn content_end(data: &[u8], start: usize, stop: usize) -> usize {
    if stop > start && data[stop - 1] == b'\r' {
        stop - 1
    } else {
        stop
    }
}

/// The parsed lines of one chunk `[.., end)`, complete up to `stop`.
struct Part<'a> {
    lines: Vec<ParsedLine<'a>>,
    start: usize,
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

/// Result vectors for reuse.
///
/// Fresh ones for every chunk would have the allocator hand out (and the kernel zero) new pages
/// over and over.
///
/// Also says whether each chunk's usage candidates get their stats row ([`row_lines`]).
#[derive(Default)]
struct Pool<'a> {
    free: Mutex<Vec<Vec<ParsedLine<'a>>>>,
    rows: bool,
}

impl<'a> Pool<'a> {
    /// The pool of a scan into `index` (rows when the index keeps row sums).
    fn for_index(index: &Index) -> Self {
        Pool {
            free: Mutex::default(),
            rows: index.row_sums.is_some(),
        }
    }
    fn take(&self) -> Vec<ParsedLine<'a>> {
        self.free.lock().unwrap().pop().unwrap_or_default()
    }
    fn give(&self, mut v: Vec<ParsedLine<'a>>) {
        v.clear();
        self.free.lock().unwrap().push(v);
    }
}

/// Hints the cache about a parsed line's record (lines are indexed `4 * AHEAD` later).
#[inline(always)]
fn prefetch_record(pl: &ParsedLine<'_>) {
    #[cfg(target_arch = "x86_64")]
    {
        let p = pl as *const ParsedLine as *const i8;
        let mut o = 0;
        while o < std::mem::size_of::<ParsedLine>() {
            // SAFETY: a prefetch is a hint; the address is inside `pl`.
            unsafe {
                std::arch::x86_64::_mm_prefetch(p.wrapping_add(o), std::arch::x86_64::_MM_HINT_T0)
            };
            o += 64;
        }
    }
    let _ = pl;
}

/// Hints the cache about the id bytes a parsed line's indexing reads (hashes, compares, copies).
///
/// They lie in the mapped file, one line apart, and were last read by another core.
#[inline(always)]
fn prefetch_ids(pl: &ParsedLine<'_>) {
    #[cfg(target_arch = "x86_64")]
    if let LineResult::Value(sk, _) = &pl.result {
        use crate::json::Val;
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        if let Val::Str(s) = &sk.id {
            // SAFETY: a prefetch is a hint.
            unsafe { _mm_prefetch(s.as_ptr() as *const i8, _MM_HINT_T0) };
        }
        if let Val::Str(s) = &sk.parent_id {
            // SAFETY: as above.
            unsafe { _mm_prefetch(s.as_ptr() as *const i8, _MM_HINT_T0) };
        }
    }
    let _ = pl;
}

/// Indexes a chunk's lines in order, then gives its vector back to the pool. Memory is
/// pulled in ahead of use in three steps, each a few lines earlier than the next: the
/// parsed records, the id bytes they point at, then (hashing those) the key-table slots.
fn ingest_lines<'a>(index: &mut Index, mut lines: Vec<ParsedLine<'a>>, pool: &Pool<'a>) {
    const AHEAD: usize = 8;
    let n = lines.len();
    for pl in lines.iter().take(4 * AHEAD) {
        prefetch_record(pl);
    }
    for pl in lines.iter().take(2 * AHEAD) {
        prefetch_ids(pl);
    }
    for pl in lines.iter().take(AHEAD) {
        index.prefetch_keys(pl);
    }
    for k in 0..n {
        if k + 4 * AHEAD < n {
            prefetch_record(&lines[k + 4 * AHEAD]);
        }
        if k + 2 * AHEAD < n {
            prefetch_ids(&lines[k + 2 * AHEAD]);
        }
        if k + AHEAD < n {
            index.prefetch_keys(&lines[k + AHEAD]);
        }
        let pl = &mut lines[k];
        pl.line = index.lines + 1;
        index.ingest(pl);
    }
    pool.give(lines);
}

/// Indexes a parsed chunk.
///
/// When it stopped short (its line limit), parses and indexes the rest of it here, `CHUNK_LINES` at
/// a time. Returns the chunk's (bytes, lines).
fn ingest_part<'a>(
    index: &mut Index,
    data: &'a [u8],
    base: u64,
    part: Part<'a>,
    pool: &Pool<'a>,
) -> (usize, usize) {
    let (start, mut stop, end) = (part.start, part.stop, part.end);
    let mut lines = part.lines.len();
    ingest_lines(index, part.lines, pool);
    while stop < end {
        let p = parse_chunk(data, stop, end, base, pool);
        stop = p.stop;
        lines += p.lines.len();
        ingest_lines(index, p.lines, pool);
    }
    (end - start, lines)
}

/// Chunk size for the average line length seen last.
///
/// About `TARGET_LINES` lines, so the parsed records of tiny (hostile) lines never dwarf the bytes
/// they came from.
fn chunk_size(avg: usize) -> usize {
    avg.saturating_mul(TARGET_LINES).clamp(MIN_CHUNK, MAX_CHUNK)
}

/// The end of the line that holds byte `from + size` (or the end of the data).
fn cut(data: &[u8], from: usize, size: usize) -> usize {
    let end = from.saturating_add(size).min(data.len());
    if end < data.len() {
        match memchr::memchr(b'\n', &data[end..]) {
            Some(k) => end + k + 1,
            None => data.len(),
        }
    } else {
        end
    }
}

/// What the threads of a parallel scan share, behind one lock (held only for bookkeeping,
/// never while parsing or indexing).
struct State<'a> {
    /// where the next chunk handed out starts
    next: usize,
    /// chunks handed out so far (chunk `i` waits in slot `i % RING` once parsed)
    claimed: usize,
    /// chunks indexed so far
    done: usize,
    /// size of the chunks handed out now
    chunk: usize,
    slots: Vec<Option<Part<'a>>>,
    /// parsed lines in `slots`
    queued: usize,
    /// threads blocked on the condvar
    waiting: usize,
    /// a thread panicked: the others stop
    failed: bool,
}

enum Claim {
    /// parse `[s, e)`, chunk number `i`
    Chunk(usize, usize, usize),
    /// enough is parsed ahead of the indexing: wait
    Full,
    /// nothing left to hand out
    Done,
}

struct Shared<'a> {
    data: &'a [u8],
    base: u64,
    /// most parsed lines `slots` may hold
    queue: usize,
    state: Mutex<State<'a>>,
    cv: Condvar,
    pool: Pool<'a>,
}

impl<'a> Shared<'a> {
    fn claim(&self, st: &mut State<'a>) -> Claim {
        if st.failed || st.next >= self.data.len() {
            return Claim::Done;
        }
        // (waiting on this always ends: the chunk to index next is either in its slot or
        // being parsed by a running thread, so indexing goes on and makes room)
        if st.claimed >= st.done + RING || st.queued >= self.queue {
            return Claim::Full;
        }
        let s = st.next;
        let e = cut(self.data, s, st.chunk);
        st.next = e;
        st.claimed += 1;
        Claim::Chunk(st.claimed - 1, s, e)
    }

    fn wait<'g>(&self, mut g: MutexGuard<'g, State<'a>>) -> MutexGuard<'g, State<'a>> {
        g.waiting += 1;
        g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        g.waiting -= 1;
        g
    }

    /// Queues parsed chunk `i` for indexing.
    fn put(&self, g: &mut State<'a>, i: usize, part: Part<'a>) {
        g.queued += part.lines.len();
        g.slots[i % RING] = Some(part);
        if g.waiting > 0 {
            self.cv.notify_all();
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<'a>> {
        // (a thread that panicked never held the lock while running our code's loops, but a
        // poisoned lock must not turn one panic into a hang of the others either)
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A parsing thread: parses the chunks it is handed until none are left.
    fn parse_loop(&self) {
        let _guard = Failed(self);
        let mut g = self.lock();
        loop {
            match self.claim(&mut g) {
                Claim::Done => return,
                Claim::Full => g = self.wait(g),
                Claim::Chunk(i, s, e) => {
                    drop(g);
                    let part = parse_chunk(self.data, s, e, self.base, &self.pool);
                    g = self.lock();
                    self.put(&mut g, i, part);
                }
            }
        }
    }

    /// The indexing thread.
    ///
    /// Indexes the chunks in file order as they are ready, and parses chunks itself while the next
    /// one is not.
    fn index_loop(&self, index: &mut Index) {
        let _guard = Failed(self);
        let mut g = self.lock();
        loop {
            let slot = g.done % RING;
            let part = match g.slots[slot].take() {
                Some(part) => {
                    g.queued -= part.lines.len();
                    part
                }
                None => match self.claim(&mut g) {
                    Claim::Chunk(i, s, e) => {
                        drop(g);
                        let part = parse_chunk(self.data, s, e, self.base, &self.pool);
                        g = self.lock();
                        if i != g.done {
                            self.put(&mut g, i, part);
                            continue;
                        }
                        part
                    }
                    Claim::Done if g.failed || g.done == g.claimed => return,
                    Claim::Full | Claim::Done => {
                        g = self.wait(g);
                        continue;
                    }
                },
            };
            drop(g);
            let (bytes, lines) = ingest_part(index, self.data, self.base, part, &self.pool);
            g = self.lock();
            g.done += 1;
            g.chunk = chunk_size(bytes / lines.max(1));
            if g.waiting > 0 {
                self.cv.notify_all();
            }
        }
    }
}

/// Should a thread of a parallel scan panic, the others must not wait for it.
///
/// They stop, and the scope passes the panic on.
struct Failed<'s, 'a>(&'s Shared<'a>);

impl Drop for Failed<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut g = self.0.lock();
            g.failed = true;
            self.0.cv.notify_all();
        }
    }
}

/// The chunk size for the line length of the first bytes of `data`.
fn first_chunk_size(data: &[u8]) -> usize {
    let head = &data[..data.len().min(MAX_CHUNK)];
    chunk_size(head.len() / memchr::memchr_iter(b'\n', head).count().max(1))
}

/// Scans `data` (which starts at file offset `base`) into `index`. `parallel` uses the rayon
/// pool. Returns the number of new entries.
pub fn scan_into(index: &mut Index, data: &[u8], base: u64, parallel: bool) -> usize {
    let before = index.recs.len();
    // Pi sessions average well over 1 KiB a line; a wrong guess only costs a rehash
    index.reserve(data.len() / 1024);
    let pool = Pool::for_index(index);
    let threads = if parallel && data.len() > PARALLEL_MIN {
        rayon::current_num_threads()
    } else {
        1
    };
    if threads <= 1 {
        // one chunk at a time: its parsed lines are still in cache when they are indexed
        let mut pos = 0;
        let mut chunk = first_chunk_size(data);
        while pos < data.len() {
            let end = cut(data, pos, chunk);
            let part = parse_chunk(data, pos, end, base, &pool);
            let (bytes, lines) = ingest_part(index, data, base, part, &pool);
            chunk = chunk_size(bytes / lines.max(1));
            pos = end;
        }
        return index.recs.len() - before;
    }
    let queue =
        (data.len() / QUEUE_SHARE).clamp(MIN_QUEUE, MAX_QUEUE) / std::mem::size_of::<ParsedLine>();
    let shared = Shared {
        data,
        base,
        queue,
        state: Mutex::new(State {
            next: 0,
            claimed: 0,
            done: 0,
            chunk: first_chunk_size(data),
            slots: (0..RING).map(|_| None).collect(),
            queued: 0,
            waiting: 0,
            failed: false,
        }),
        cv: Condvar::new(),
        pool,
    };
    let sh = &shared;
    rayon::scope(|s| {
        for _ in 1..threads {
            s.spawn(move |_| sh.parse_loop());
        }
        sh.index_loop(index);
    });
    index.recs.len() - before
}

// ------------------------------------------------------------------ scanning through reads

/// A file scan hands out byte ranges of about this many bytes at most (a range holds about
/// `TARGET_LINES` lines of the length seen last, as chunks of data in memory do).
const FILE_MAX_CHUNK: usize = 256 << 10;
/// Each range is read together with this many bytes after it.
///
/// The rest of its last line, almost always (a longer line is read on in steps).
const READ_PAST: usize = 8 << 10;
/// A line still unfinished after this many bytes is looked for through a bounded buffer
/// before it is held (a line longer than [`MAX_LINE`] never is).
const LONG_LINE: u64 = 16 << 20;
/// Bytes read ahead of the indexing, at most (besides the range being indexed).
///
/// What the read buffers may hold when the indexing thread is held up. (8 MiB cost a third more
/// system time than 0.5-2 MiB: every buffer is a fresh mapping, faulted in, at each open.)
const READ_AHEAD: u64 = 2 << 20;
/// Parsed lines waiting to be indexed in a file scan, at most this many bytes of them.
const FILE_QUEUE: usize = 1 << 20;
/// Read buffers larger than this (a long line was read into one) are freed, not reused.
const KEEP_BUFFER: usize = 4 * FILE_MAX_CHUNK;

/// Why a file scan stopped.
#[derive(Debug)]
pub enum FileScanError<E> {
    /// A read failed (the file may have shrunk).
    Read(E),
    /// Two reads disagree about where a line ends: the file changed while it was read. The
    /// offset is where the index expected the next line to start.
    Changed { offset: u64 },
}

/// Lines parsed from one range `[s, e)` of a file: the lines that start in it, read into a
/// buffer of their own.
struct FilePart<'a> {
    /// `None`: no line starts in the range (a longer line spans it)
    part: Option<Part<'a>>,
    /// a line longer than [`MAX_LINE`] that starts in the range, last: recorded, never held
    too_long: Option<ParsedLine<'static>>,
    /// the buffer's bytes as `part` borrows them
    data: &'a [u8],
    /// the file offset of `data[0]`
    base: u64,
    /// where the first line starts and where the last one ends (file offsets)
    first: u64,
    next: u64,
    /// the range's end
    range_end: u64,
    /// the buffer (after `part` and `data`, which borrow it: they go first)
    buf: Vec<u8>,
}

/// Read buffers for reuse.
#[derive(Default)]
struct Buffers(Mutex<Vec<Vec<u8>>>);

impl Buffers {
    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default()
    }
    fn give(&self, b: Vec<u8>) {
        if b.len() <= KEEP_BUFFER {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(b);
        }
    }
}

/// The offset of the first `\n` in `[from, to)`, read through a bounded buffer.
fn find_newline_in<E>(
    read: &(impl Fn(&mut [u8], u64) -> Result<(), E> + Sync),
    from: u64,
    to: u64,
) -> Result<Option<u64>, E> {
    let mut buf = vec![0u8; (1usize << 20).min((to - from) as usize)];
    let mut pos = from;
    while pos < to {
        let n = ((to - pos) as usize).min(buf.len());
        read(&mut buf[..n], pos)?;
        if let Some(k) = memchr::memchr(b'\n', &buf[..n]) {
            return Ok(Some(pos + k as u64));
        }
        pos += n as u64;
    }
    Ok(None)
}

/// `buf[..n]` readable (grown, never shrunk: bytes already there are overwritten by the read,
/// never zeroed first).
fn room(buf: &mut Vec<u8>, n: usize) -> &mut [u8] {
    if buf.len() < n {
        buf.resize(n, 0);
    }
    &mut buf[..n]
}

/// What the threads of a file scan share.
struct FileShared<'a, R, E> {
    read: &'a R,
    /// the scan covers `[from, to)`; `from` is a line start
    from: u64,
    to: u64,
    /// most parsed lines `slots` may hold
    queue: usize,
    state: Mutex<FileState<'a, E>>,
    cv: Condvar,
    pool: Pool<'a>,
    bufs: Buffers,
    knobs: Knobs<'a>,
}

/// The limits of a file scan, smaller in tests (so the rare paths run on small data).
#[derive(Clone, Copy)]
struct Knobs<'a> {
    /// range sizes to hand out in turn instead of ones fitted to the line length
    sizes: Option<&'a [usize]>,
    max_line: u64,
    long_line: u64,
    read_past: usize,
}

const KNOBS: Knobs<'static> = Knobs {
    sizes: None,
    max_line: MAX_LINE,
    long_line: LONG_LINE,
    read_past: READ_PAST,
};

struct FileState<'a, E> {
    /// where the next range handed out starts
    next: u64,
    claimed: usize,
    done: usize,
    /// where the last range indexed ends
    indexed_to: u64,
    chunk: usize,
    slots: Vec<Option<FilePart<'a>>>,
    queued: usize,
    waiting: usize,
    failed: bool,
    error: Option<FileScanError<E>>,
}

impl<'a, R, E> FileShared<'a, R, E>
where
    R: Fn(&mut [u8], u64) -> Result<(), E> + Sync,
    E: Send,
{
    fn lock(&self) -> MutexGuard<'_, FileState<'a, E>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn claim(&self, st: &mut FileState<'a, E>) -> Claim {
        if st.failed || st.next >= self.to {
            return Claim::Done;
        }
        if st.claimed >= st.done + RING
            || st.queued >= self.queue
            || (st.claimed > st.done && st.next.saturating_sub(st.indexed_to) > READ_AHEAD)
        {
            return Claim::Full;
        }
        let s = st.next;
        let size = match self.knobs.sizes {
            Some(v) => v[st.claimed % v.len()].max(1),
            None => st.chunk,
        };
        let e = (s + size as u64).min(self.to);
        st.next = e;
        st.claimed += 1;
        Claim::Chunk(st.claimed - 1, s as usize, e as usize)
    }

    fn wait<'g>(
        &self,
        mut g: MutexGuard<'g, FileState<'a, E>>,
    ) -> MutexGuard<'g, FileState<'a, E>> {
        g.waiting += 1;
        g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        g.waiting -= 1;
        g
    }

    fn fail(&self, g: &mut FileState<'a, E>, e: FileScanError<E>) {
        g.failed = true;
        if g.error.is_none() {
            g.error = Some(e);
        }
        self.cv.notify_all();
    }

    fn put(&self, g: &mut FileState<'a, E>, i: usize, part: FilePart<'a>) {
        g.queued += part.part.as_ref().map_or(0, |p| p.lines.len());
        g.slots[i % RING] = Some(part);
        if g.waiting > 0 {
            self.cv.notify_all();
        }
    }

    /// Reads range `[s, e)` (and as far past `e` as its last line goes) and parses the lines that
    /// start in it.
    ///
    /// The first starts after the first `\n` at or after `s - 1` (at `s` itself when `s` is where
    /// the scan starts).
    fn fetch(&self, s: u64, e: u64) -> Result<FilePart<'a>, E> {
        let lead = u64::from(s > self.from);
        let base = s - lead;
        let range = (e - base) as usize;
        let want = range + self.knobs.read_past.min(range).min((self.to - e) as usize);
        let mut buf = self.bufs.take();
        (self.read)(room(&mut buf, want), base)?;
        let first = if lead == 1 {
            memchr::memchr(b'\n', &buf[..range]).map_or(range, |j| j + 1)
        } else {
            0
        };
        if first >= range {
            // no line starts in the range
            self.bufs.give(buf);
            return Ok(FilePart {
                part: None,
                too_long: None,
                data: &[],
                base,
                first: e,
                next: e,
                range_end: e,
                buf: Vec::new(),
            });
        }
        // the last line that starts in the range ends at the first `\n` at or after `e - 1`
        let mut held = want;
        let mut too_long = None;
        if buf[range - 1] != b'\n' {
            match memchr::memchr(b'\n', &buf[range..want]) {
                Some(k) => held = range + k + 1,
                None if base + want as u64 == self.to => {}
                None => {
                    let ls =
                        memchr::memrchr(b'\n', &buf[first..range]).map_or(first, |k| first + k + 1);
                    let line_start = base + ls as u64;
                    // read on in growing steps, up to `LONG_LINE` of the line
                    let mut nl = None;
                    let mut step = FILE_MAX_CHUNK;
                    while nl.is_none()
                        && (base + held as u64) < self.to
                        && (base + held as u64 - line_start) < self.knobs.long_line
                    {
                        let line_so_far = base + held as u64 - line_start;
                        let n = step
                            .min((self.to - base) as usize - held)
                            .min((self.knobs.long_line - line_so_far) as usize);
                        (self.read)(&mut room(&mut buf, held + n)[held..], base + held as u64)?;
                        nl = memchr::memchr(b'\n', &buf[held..held + n]).map(|k| held + k);
                        held += n;
                        step *= 2;
                    }
                    match nl {
                        Some(k) => held = k + 1,
                        None if base + held as u64 == self.to => {}
                        None => {
                            // a very long line: where does it end?
                            let found = find_newline_in(self.read, base + held as u64, self.to)?;
                            let stop = found.unwrap_or(self.to);
                            let next = found.map_or(self.to, |n| n + 1);
                            if stop - line_start > self.knobs.max_line {
                                too_long = Some(ParsedLine {
                                    offset: line_start,
                                    len: stop - line_start,
                                    line: 0,
                                    terminated: found.is_some(),
                                    end: next,
                                    result: LineResult::TooLong,
                                    row: None,
                                });
                                held = ls;
                            } else {
                                let upto = (next - base) as usize;
                                (self.read)(&mut room(&mut buf, upto)[held..], base + held as u64)?;
                                held = upto;
                            }
                        }
                    }
                }
            }
        } else {
            held = range;
        }
        // SAFETY: `data` points into `buf`'s heap block, which moves with the part (moving a
        // `Vec` does not move its elements) and is neither written nor freed while lines
        // borrowing `data` live: the part's lines are indexed and dropped (`ingest_file_part`)
        // before `buf` goes back to the pool, and on every other path `part` is dropped before
        // `buf` (field order).
        let data: &'a [u8] = unsafe { std::slice::from_raw_parts(buf.as_ptr(), held) };
        let next = too_long.as_ref().map_or(base + held as u64, |t| t.end);
        let part = if first < held {
            Some(parse_chunk(data, first, held, base, &self.pool))
        } else {
            None
        };
        Ok(FilePart {
            part,
            too_long,
            data,
            base,
            first: base + first as u64,
            next,
            range_end: e,
            buf,
        })
    }

    fn fetch_or_fail(&self, s: usize, e: usize) -> Option<FilePart<'a>> {
        match self.fetch(s as u64, e as u64) {
            Ok(p) => Some(p),
            Err(err) => {
                let mut g = self.lock();
                self.fail(&mut g, FileScanError::Read(err));
                None
            }
        }
    }

    /// A reading thread: reads and parses the ranges it is handed until none are left.
    fn parse_loop(&self) {
        let _guard = FileFailed(self);
        let mut g = self.lock();
        loop {
            match self.claim(&mut g) {
                Claim::Done => return,
                Claim::Full => g = self.wait(g),
                Claim::Chunk(i, s, e) => {
                    drop(g);
                    let part = self.fetch_or_fail(s, e);
                    g = self.lock();
                    match part {
                        Some(p) => self.put(&mut g, i, p),
                        None => return,
                    }
                }
            }
        }
    }

    /// The indexing thread.
    ///
    /// Indexes the ranges in file order as they are ready (checking that each starts where the one
    /// before ended), and reads ranges itself while the next one is not ready.
    fn index_loop(&self, index: &mut Index) {
        let _guard = FileFailed(self);
        let mut expect = self.from;
        let mut g = self.lock();
        loop {
            if g.failed {
                return;
            }
            let slot = g.done % RING;
            let fp = match g.slots[slot].take() {
                Some(fp) => {
                    g.queued -= fp.part.as_ref().map_or(0, |p| p.lines.len());
                    fp
                }
                None => match self.claim(&mut g) {
                    Claim::Chunk(i, s, e) => {
                        drop(g);
                        let part = self.fetch_or_fail(s, e);
                        g = self.lock();
                        let Some(fp) = part else { return };
                        if i != g.done {
                            self.put(&mut g, i, fp);
                            continue;
                        }
                        fp
                    }
                    Claim::Done if g.failed || g.done == g.claimed => return,
                    Claim::Full | Claim::Done => {
                        g = self.wait(g);
                        continue;
                    }
                },
            };
            drop(g);
            // lines cover the file without gaps or overlaps: a range holding no line start
            // lies inside a line that started before it, else its first line starts where
            // the last one ended
            let agrees = if fp.part.is_some() || fp.too_long.is_some() {
                fp.first == expect
            } else {
                expect >= fp.range_end
            };
            if !agrees {
                let mut g = self.lock();
                self.fail(&mut g, FileScanError::Changed { offset: expect });
                return;
            }
            let range_end = fp.range_end;
            let (bytes, lines) = self.ingest_file_part(index, fp, &mut expect);
            g = self.lock();
            g.done += 1;
            g.indexed_to = g.indexed_to.max(expect).max(range_end);
            if let Some(avg) = bytes.checked_div(lines) {
                g.chunk = chunk_size(avg).min(FILE_MAX_CHUNK);
            }
            if g.waiting > 0 {
                self.cv.notify_all();
            }
        }
    }

    /// Indexes a part's lines and gives its buffer back. Returns its (bytes, lines).
    fn ingest_file_part(
        &self,
        index: &mut Index,
        fp: FilePart<'a>,
        expect: &mut u64,
    ) -> (usize, usize) {
        let FilePart {
            part,
            too_long,
            data,
            base,
            first,
            next,
            buf,
            ..
        } = fp;
        let mut lines = 0;
        if let Some(p) = part {
            lines = ingest_part(index, data, base, p, &self.pool).1;
        }
        if let Some(mut t) = too_long {
            t.line = index.lines + 1;
            index.ingest(&t);
            lines += 1;
        }
        if lines > 0 {
            *expect = next;
        }
        self.bufs.give(buf);
        ((next - first) as usize, lines)
    }
}

/// As [`Failed`], for a file scan.
struct FileFailed<'s, 'a, R, E>(&'s FileShared<'a, R, E>)
where
    R: Fn(&mut [u8], u64) -> Result<(), E> + Sync,
    E: Send;

impl<R, E> Drop for FileFailed<'_, '_, R, E>
where
    R: Fn(&mut [u8], u64) -> Result<(), E> + Sync,
    E: Send,
{
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut g = self.0.lock();
            g.failed = true;
            self.0.cv.notify_all();
        }
    }
}

/// Scans bytes `[from, to)` of a file into `index`, reading them with `read(buf, offset)`. `read`
/// fills `buf` with the bytes at `offset`, or errs. `from` is a line start; only the last line may
/// end inside a line at `to` (the index keeps it provisional).
///
/// Reading and scanning go on at once on every pool thread (with `parallel`): each thread
/// reads a range of the file into a buffer of its own (in the cache when it is parsed), finds
/// the lines that start in it (the first after the first `\n` at or after the range's first
/// byte minus one, the last read on until its `\n`), and parses them; one thread indexes the
/// parsed ranges in file order, reading and parsing ranges itself whenever the next one is not
/// ready. Each range must start exactly where the one before ended (two reads of the same
/// bytes must agree): a file that changes meanwhile gives [`FileScanError::Changed`] and a read
/// that fails [`FileScanError::Read`]. Read buffers ahead of the indexing are bounded
/// (`READ_AHEAD`), as are parsed lines; a line longer than [`MAX_LINE`] is never held, only
/// recorded as too long. The index is the one [`scan_into`] builds from the same bytes.
pub fn scan_file<R, E>(
    index: &mut Index,
    read: &R,
    from: u64,
    to: u64,
    parallel: bool,
) -> Result<(), FileScanError<E>>
where
    R: Fn(&mut [u8], u64) -> Result<(), E> + Sync,
    E: Send,
{
    scan_file_with(index, read, from, to, parallel, KNOBS)
}

/// [`scan_file`] with the given range sizes handed out in turn (instead of sizes fitted to the line
/// length).
///
/// For tests that cut a file at arbitrary places (`fuzz/src/lib.rs`).
#[doc(hidden)]
pub fn scan_file_in_ranges<R, E>(
    index: &mut Index,
    read: &R,
    from: u64,
    to: u64,
    parallel: bool,
    sizes: &[usize],
) -> Result<(), FileScanError<E>>
where
    R: Fn(&mut [u8], u64) -> Result<(), E> + Sync,
    E: Send,
{
    let knobs = Knobs {
        sizes: (!sizes.is_empty()).then_some(sizes),
        ..KNOBS
    };
    scan_file_with(index, read, from, to, parallel, knobs)
}

fn scan_file_with<R, E>(
    index: &mut Index,
    read: &R,
    from: u64,
    to: u64,
    parallel: bool,
    knobs: Knobs<'_>,
) -> Result<(), FileScanError<E>>
where
    R: Fn(&mut [u8], u64) -> Result<(), E> + Sync,
    E: Send,
{
    if to <= from {
        return Ok(());
    }
    let len = (to - from) as usize;
    // a guess on the low side: tables grow by doubling, and one reserved for more lines than
    // the file has (a tiny-line guess, 1 KiB a line, on ~1.3 KiB lines) doubles the key table
    index.reserve(len / 4096);
    let threads = if parallel && len > PARALLEL_MIN {
        rayon::current_num_threads()
    } else {
        1
    };
    // (what `READ_AHEAD` bytes of realistic lines parse to; tiny lines stop at this instead)
    let queue =
        (len / QUEUE_SHARE).clamp(MIN_QUEUE, FILE_QUEUE) / std::mem::size_of::<ParsedLine>();
    let shared = FileShared {
        read,
        from,
        to,
        queue,
        state: Mutex::new(FileState {
            next: from,
            claimed: 0,
            done: 0,
            indexed_to: from,
            chunk: 64 << 10,
            slots: (0..RING).map(|_| None).collect(),
            queued: 0,
            waiting: 0,
            failed: false,
            error: None,
        }),
        cv: Condvar::new(),
        pool: Pool::for_index(index),
        bufs: Buffers::default(),
        knobs,
    };
    let sh = &shared;
    if threads <= 1 {
        sh.index_loop(index);
    } else {
        rayon::scope(|s| {
            for _ in 1..threads {
                s.spawn(move |_| sh.parse_loop());
            }
            sh.index_loop(index);
        });
    }
    let mut g = shared.lock();
    // parts left in the ring (after a failure) drop their lines before their buffers
    for slot in g.slots.iter_mut() {
        slot.take();
    }
    match g.error.take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// What the start of a file says about its header: one rule for opening and for listing.
///
/// The rule `Index` applies when it opens the file (the first JSON value, blank, damaged and falsy
/// lines skipped, must be an object with `type:"session"` and a string `id`): one rule for opening
/// and for listing.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderProbe {
    /// `buf` ends before the first value is complete: read more (or pass `eof`).
    NeedMore,
    /// The whole file holds no JSON value.
    NoValue,
    /// The header: its line's offset and length (without the line end).
    Valid { offset: u64, len: u64 },
    /// The first value is not a header; why.
    Invalid(String),
}

/// Reads a file's first lines until the first JSON value decides whether it is a Pi session. `buf`:
/// its first bytes; `eof`: `buf` is the whole file. Reads only as far as that value's line.
pub fn probe_header(buf: &[u8], eof: bool) -> HeaderProbe {
    use crate::index::HeaderState;
    let mut ix = Index::new();
    let mut parser = crate::json::LineParser::new();
    let mut start = 0;
    while start < buf.len() {
        let at = line_at(buf, start, buf.len());
        if at.nl.is_none() && !eof {
            return HeaderProbe::NeedMore;
        }
        let pl = ParsedLine {
            offset: start as u64,
            len: (at.end - start) as u64,
            line: ix.lines + 1,
            terminated: at.nl.is_some(),
            end: at.next as u64,
            result: parse_one(&mut parser, &buf[start..at.end]),
            row: None,
        };
        ix.ingest(&pl);
        match &ix.header.0 {
            HeaderState::Empty => {}
            HeaderState::Valid => {
                let (offset, len) = ix.header_span.unwrap_or((pl.offset, pl.len));
                return HeaderProbe::Valid { offset, len };
            }
            HeaderState::Invalid(why) => return HeaderProbe::Invalid(why.clone()),
        }
        start = at.next;
    }
    if eof {
        HeaderProbe::NoValue
    } else {
        HeaderProbe::NeedMore
    }
}

/// Lines and parse outcomes of `data`, without an index: the scanner alone (for benchmarks).
/// Returns (lines, JSON values, lines that are not JSON).
pub fn scan_only(data: &[u8], parallel: bool) -> (usize, usize, usize) {
    // chunks small enough never to reach their line limit
    let parts = chunks(data, 0, data.len(), CHUNK_LINES / 2);
    let pool = Pool::default();
    let count = |&(a, b): &(usize, usize)| {
        let v = parse_chunk(data, a, b, 0, &pool).lines;
        let ok = v
            .iter()
            .filter(|p| matches!(p.result, LineResult::Value(..)))
            .count();
        let bad = v
            .iter()
            .filter(|p| matches!(p.result, LineResult::Bad(_)))
            .count();
        let n = v.len();
        pool.give(v);
        (n, ok, bad)
    };
    let add =
        |x: (usize, usize, usize), y: (usize, usize, usize)| (x.0 + y.0, x.1 + y.1, x.2 + y.2);
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
        let want: Vec<_> = (oracle_lines(data).into_iter())
            .map(|(start, end, nl)| {
                let line = &data[start..end];
                let r = parse_one(&mut parser, line);
                (start as u64, line.len() as u64, nl.is_some(), r)
            })
            .collect();
        assert_eq!(got.len(), want.len(), "{:?}", String::from_utf8_lossy(data));
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(
                (g.offset, g.len, g.terminated),
                (w.0, w.1, w.2),
                "{:?}",
                String::from_utf8_lossy(data)
            );
            let same = match (&g.result, &w.3) {
                (LineResult::Value(a, _), LineResult::Value(b, _)) => a == b,
                (LineResult::Bad(a), LineResult::Bad(b)) => a == b,
                (LineResult::Blank, LineResult::Blank)
                | (LineResult::TooLong, LineResult::TooLong) => true,
                _ => false,
            };
            assert!(
                same,
                "{:?}",
                String::from_utf8_lossy(&data[g.offset as usize..])
            );
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
            let probs: Vec<_> = ix
                .problems
                .iter()
                .map(|p| (p.line, p.offset, p.kind))
                .collect();
            (
                ix.lines,
                ix.recs.len(),
                ix.recs
                    .last()
                    .map(|r| (ix.line_of(ix.recs.len() as u32 - 1), r.offset())),
                probs,
            )
        };
        let mut one = Index::new();
        scan_into(&mut one, &data, 0, false);
        let mut par = Index::new();
        scan_into(&mut par, &data, 0, true);
        assert_eq!(snapshot(&one), snapshot(&par));
        assert_eq!(
            one.lines as usize,
            1 + 3 * CHUNK_LINES + 77 + 2 + CHUNK_LINES + 5
        );
        assert_eq!(one.recs.len(), (3 * CHUNK_LINES + 77) / 1000 + 1);
    }

    #[test]
    fn header_probe_applies_the_open_rule_to_a_prefix() {
        let h = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\"}";
        let mut f = b"\n  \nnot json\nnull\n".to_vec();
        f.extend_from_slice(h);
        f.extend_from_slice(b"\r\n{\"type\":\"custom\"}\n");
        assert_eq!(
            probe_header(&f, false),
            HeaderProbe::Valid {
                offset: 18,
                len: h.len() as u64
            }
        );
        assert_eq!(probe_header(&f[..30], false), HeaderProbe::NeedMore);
        assert_eq!(probe_header(&f[..30], true), HeaderProbe::NoValue); // a torn header is no value
        assert_eq!(probe_header(b"\n\nxx\n", true), HeaderProbe::NoValue);
        assert!(matches!(
            probe_header(b"[1]\n", false),
            HeaderProbe::Invalid(_)
        ));
        assert!(matches!(
            probe_header(b"{\"type\":\"session\",\"id\":1}\n", false),
            HeaderProbe::Invalid(_)
        ));
        // the same answer as opening the whole file
        let mut ix = Index::new();
        scan_into(&mut ix, &f, 0, false);
        assert_eq!(ix.header_span, Some((18, h.len() as u64)));
    }

    /// The lines of `data` as the tests' oracle splits them, apart from [`line_at`].
    ///
    /// (start, content end, `\n` position), split at `\n` with one `\r` before it cut.
    fn oracle_lines(data: &[u8]) -> Vec<(usize, usize, Option<usize>)> {
        let mut out = Vec::new();
        let mut start = 0;
        for piece in data.split_inclusive(|&c| c == b'\n') {
            let nl = piece.ends_with(b"\n").then(|| start + piece.len() - 1);
            let body = piece.strip_suffix(b"\n").unwrap_or(piece);
            let body = body.strip_suffix(b"\r").unwrap_or(body);
            out.push((start, start + body.len(), nl));
            start += piece.len();
        }
        out
    }

    /// Indexes `data` a line at a time, without chunks or threads: what a scan must match.
    fn reference(data: &[u8]) -> Index {
        reference_max(data, u64::MAX)
    }

    #[test]
    fn chunks_sized_for_long_lines_that_meet_tiny_ones_match_a_line_at_a_time() {
        // long lines first (big chunks), then far more tiny lines than a chunk may hold, bytes
        // that are not UTF-8 on both sides, and an unterminated last line
        let mut data = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n".to_vec();
        let long = |data: &mut Vec<u8>, i: usize, parent: usize| {
            let text = if i % 97 == 5 {
                "caf\u{e9} \u{1F600} ".repeat(90)
            } else {
                "word ".repeat(400)
            };
            data.extend_from_slice(
                format!("{{\"type\":\"message\",\"id\":\"e{i}\",\"parentId\":\"e{parent}\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\"}}}}\n")
                    .as_bytes(),
            );
            if i % 211 == 7 {
                data.extend_from_slice(
                    b"{\"type\":\"custom\",\"id\":\"bad\xff\",\"parentId\":null}\r\n",
                );
            }
        };
        for i in 0..600 {
            long(&mut data, i, i.saturating_sub(1));
        }
        for i in 0..(5 * CHUNK_LINES + 3) {
            data.extend_from_slice(match i % 500 {
                0 => b"{\"type\":\"custom\",\"id\":\"t\",\"parentId\":\"e1\"}\n" as &[u8],
                1 => b"not json\n",
                2 => b"\xfe\n",
                _ => b"\n",
            });
        }
        for i in 600..1200 {
            long(&mut data, i, i - 1);
        }
        data.extend_from_slice(b"{\"type\":\"custom\",\"id\":\"torn\"");
        let snapshot = |ix: &Index| {
            let probs: Vec<_> = ix
                .problems
                .iter()
                .map(|p| (p.line, p.offset, p.kind))
                .collect();
            (
                ix.lines,
                ix.scanned_to,
                format!("{:?}", ix.recs),
                probs,
                ix.leaf,
            )
        };
        let want = snapshot(&reference(&data));
        for parallel in [false, true] {
            let mut ix = Index::new();
            scan_into(&mut ix, &data, 0, parallel);
            assert_eq!(snapshot(&ix), want, "parallel: {parallel}");
        }
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

    fn mem_read(data: &[u8]) -> impl Fn(&mut [u8], u64) -> Result<(), ()> + Sync + '_ {
        move |buf: &mut [u8], off: u64| {
            let o = off as usize;
            buf.copy_from_slice(data.get(o..o + buf.len()).ok_or(())?);
            Ok(())
        }
    }

    /// What a file scan must match.
    ///
    /// [`reference`], with lines longer than `max` recorded as too long (as [`MAX_LINE`] is for
    /// real).
    fn reference_max(data: &[u8], max: u64) -> Index {
        let mut ix = Index::new();
        let mut parser = LineParser::new();
        for (start, end, nl) in oracle_lines(data) {
            let stop = nl.unwrap_or(data.len());
            // (a too-long line is measured to its `\n`, as the file scan measures it)
            let too_long = (stop - start) as u64 > max;
            let pl = ParsedLine {
                offset: start as u64,
                len: if too_long { stop - start } else { end - start } as u64,
                line: ix.lines + 1,
                terminated: nl.is_some(),
                end: nl.map_or(data.len(), |n| n + 1) as u64,
                result: if too_long {
                    LineResult::TooLong
                } else {
                    parse_one(&mut parser, &data[start..end])
                },
                row: None,
            };
            ix.ingest(&pl);
        }
        ix
    }

    fn file_snapshot(ix: &Index) -> Vec<String> {
        let mut v = vec![format!(
            "{} {} {:?} {:?} {:?}",
            ix.lines, ix.scanned_to, ix.leaf, ix.header, ix.header_span
        )];
        v.extend(ix.recs.iter().map(|r| format!("{r:?}")));
        v.extend(
            ix.problems
                .iter()
                .map(|p| format!("{} {} {} {}", p.line, p.offset, p.kind, p.message)),
        );
        v
    }

    /// The first difference of two snapshots (a short message, not the whole index).
    fn same_snapshot(got: &[String], want: &[String], what: &str) {
        if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
            panic!(
                "{what}: item {i}: got {:?}, want {:?}",
                got.get(i),
                want.get(i)
            );
        }
    }

    /// The file scan of long and too-long lines gives the line-at-a-time index.
    ///
    /// Lines longer than a range, than the read-on step and than the "long line" limit, and
    /// lines too long to hold, at every place against range boundaries, in one thread and two.
    #[test]
    fn file_scan_of_long_and_too_long_lines_matches_a_line_at_a_time() {
        let mut data = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n".to_vec();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..400 {
            let n = match next() % 10 {
                0 => 3000 + next() % 9000, // too long (> 2500)
                1 => 600 + next() % 1800,  // long (> 500), held
                2 => 0,
                _ => next() % 200,
            } as usize;
            let text = "w".repeat(n);
            data.extend_from_slice(
                format!("{{\"type\":\"custom\",\"id\":\"e{i}\",\"parentId\":\"e{}\",\"data\":\"{text}\"}}", i.max(1) - 1)
                    .as_bytes(),
            );
            data.extend_from_slice(if i % 7 == 3 { b"\r\n" } else { b"\n" });
        }
        data.extend_from_slice(&vec![b'z'; 4000]); // unterminated and too long
        let want = file_snapshot(&reference_max(&data, 2500));
        let read = mem_read(&data);
        for sizes in [&[1usize, 7, 64][..], &[100, 3], &[513], &[2000, 1]] {
            for parallel in [false, true] {
                let knobs = Knobs {
                    sizes: Some(sizes),
                    max_line: 2500,
                    long_line: 500,
                    read_past: 64,
                };
                let mut ix = Index::new();
                scan_file_with(&mut ix, &read, 0, data.len() as u64, parallel, knobs).unwrap();
                assert_eq!(
                    file_snapshot(&ix),
                    want,
                    "sizes {sizes:?}, parallel {parallel}"
                );
            }
        }
    }

    /// Two reads that disagree about where a line ends (the file changed between them) stop the
    /// scan with `Changed`.
    ///
    /// A read that fails stops it with that error. Neither hangs, in one thread or two.
    #[test]
    fn file_scan_stops_when_reads_disagree_or_fail() {
        let mut a = b"{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n".to_vec();
        for i in 0..2000 {
            a.extend_from_slice(
                format!(
                    "{{\"type\":\"custom\",\"id\":\"e{i}\",\"parentId\":null,\"data\":\"{}\"}}\n",
                    "x".repeat(i % 90)
                )
                .as_bytes(),
            );
        }
        // the same length, its line ends moved: a rewrite in place
        let mut b = a.clone();
        for (i, c) in b.iter_mut().enumerate() {
            if *c == b'\n' && i % 3 == 0 {
                *c = b' ';
            } else if *c == b'x' && i % 5 == 0 {
                *c = b'\n';
            }
        }
        let reads = std::sync::atomic::AtomicUsize::new(0);
        // the first reads see `a`, later ones `b`
        let changing = |buf: &mut [u8], off: u64| -> Result<(), ()> {
            let src = if reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 3 {
                &a
            } else {
                &b
            };
            buf.copy_from_slice(&src[off as usize..off as usize + buf.len()]);
            Ok(())
        };
        for parallel in [false, true] {
            reads.store(0, std::sync::atomic::Ordering::SeqCst);
            let mut ix = Index::new();
            let r = scan_file_in_ranges(&mut ix, &changing, 0, a.len() as u64, parallel, &[1000]);
            assert!(matches!(r, Err(FileScanError::Changed { .. })), "{r:?}");
        }
        let failing = |buf: &mut [u8], off: u64| -> Result<(), &'static str> {
            if off > 50_000 {
                return Err("shrunk");
            }
            buf.copy_from_slice(&a[off as usize..off as usize + buf.len()]);
            Ok(())
        };
        for parallel in [false, true] {
            let mut ix = Index::new();
            let r = scan_file_in_ranges(&mut ix, &failing, 0, a.len() as u64, parallel, &[4096]);
            assert!(matches!(r, Err(FileScanError::Read("shrunk"))), "{r:?}");
        }
        // unchanged reads: the serial scan's index
        let mut want = Index::new();
        scan_into(&mut want, &a, 0, false);
        let mut ix = Index::new();
        scan_file(&mut ix, &mem_read(&a), 0, a.len() as u64, true).unwrap();
        same_snapshot(&file_snapshot(&ix), &file_snapshot(&want), "unchanged");
    }

    /// The corpus, scanned through reads in ranges of many sizes (and fitted ones), from the start
    /// and in two pieces.
    ///
    /// The serial in-memory scan's index every time.
    #[test]
    fn file_scan_matches_the_serial_scan_on_the_corpus() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
        let mut files = Vec::new();
        let mut dirs = vec![root];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    files.push(p);
                }
            }
        }
        assert!(files.len() > 20, "the corpus is missing");
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for f in files {
            let data = std::fs::read(&f).unwrap();
            let mut want = Index::new();
            scan_into(&mut want, &data, 0, false);
            let want = file_snapshot(&want);
            let read = mem_read(&data);
            for round in 0..4 {
                let sizes: Vec<usize> = if round == 0 {
                    Vec::new()
                } else {
                    (0..5)
                        .map(|_| 1 + (next() % (1 << (4 * round))) as usize)
                        .collect()
                };
                let parallel = round % 2 == 0;
                let mut ix = Index::new();
                scan_file_in_ranges(&mut ix, &read, 0, data.len() as u64, parallel, &sizes)
                    .unwrap();
                same_snapshot(
                    &file_snapshot(&ix),
                    &want,
                    &format!("{f:?} sizes {sizes:?}"),
                );
                let k = (next() % (data.len() as u64 + 1)) as usize;
                let mut inc = Index::new();
                scan_file_in_ranges(&mut inc, &read, 0, k as u64, parallel, &sizes).unwrap();
                let start = match inc.rollback_provisional() {
                    Some((s, _)) => s,
                    None => inc.scanned_to,
                };
                scan_file_in_ranges(&mut inc, &read, start, data.len() as u64, !parallel, &sizes)
                    .unwrap();
                assert_eq!(
                    file_snapshot(&inc),
                    want,
                    "{f:?} split at {k}, sizes {sizes:?}"
                );
            }
        }
    }
}
