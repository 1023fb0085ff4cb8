//! RPC `get_tree` (nested, Pi's shape) written as one JSON text by the core.
//!
//! Pi's answer is
//! `{"tree":[{"entry":E,"children":[...],"label"?,"labelTimestamp"?}...],"leafId":L}` with every
//! entry two JSON levels below its parent. [`Nest`] writes the nesting around the entries from
//! the children table ([`crate::walk::Tree`]) with an explicit stack (no recursion on depth: a
//! 100,000-deep chain is one loop), one node at a time in pre-order (the order the text lists
//! them). [`write_tree`] reads the entries' lines in batches on a thread of its own (each batch's
//! lines read and checked on every core, never holding the index), while the caller's thread
//! writes the previous batch: a line the scan found already in `JSON.stringify`'s form
//! ([`crate::index::Rec::stringify_form`]) whose keys and numbers are too
//! ([`crate::json::canon_rest`]) is copied, the others are written by the caller's exact writer.
//! Each batch's text goes to the caller's sink as one piece written straight into the caller's
//! buffer (it is never held whole: a 1 GiB session's answer is over 1 GiB).

use crate::store::{DetachedReader, StoreError};
use rayon::prelude::*;
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::mpsc;

/// Entries per batch of [`write_tree`] (at most; a batch also ends after [`BATCH_BYTES`]).
pub const BATCH: usize = 4096;
/// Line bytes per batch of [`write_tree`] (a batch ends after the line that reaches this).
pub const BATCH_BYTES: u64 = 8 << 20;
/// Entries read and checked by one task of a batch.
const TASK: usize = 256;

/// A node to close is pushed on [`Nest`]'s stack with this bit set.
const CLOSE: u64 = 1 << 32;

/// Pi's nesting around the entries of a tree, written one node at a time in pre-order.
///
/// Node `p`'s children are `kids[start[p]..start[p + 1]]`. For each node of the pre-order,
/// [`Nest::open`] writes what comes before its entry's text and [`Nest::after`] what follows it;
/// [`Nest::finish`] closes the rest. The text starts with `[` ([`Nest::new`] writes nothing).
pub struct Nest<'a> {
    start: &'a [u32],
    kids: &'a [u32],
    stack: Vec<u64>,
    first: bool,
}

impl<'a> Nest<'a> {
    /// The nesting of the trees `roots` (in order).
    pub fn new(roots: &[u32], start: &'a [u32], kids: &'a [u32]) -> Self {
        Nest {
            start,
            kids,
            stack: roots.iter().rev().map(|&r| u64::from(r)).collect(),
            first: true,
        }
    }

    /// Pops the closes on top of the stack, writing each (`]`, the node's tail, `}`).
    fn close<'t>(&mut self, tail: &impl Fn(u32) -> Option<&'t [u8]>, out: &mut Vec<u8>) {
        while let Some(&top) = self.stack.last() {
            if top & CLOSE == 0 {
                return;
            }
            self.stack.pop();
            out.push(b']');
            if let Some(t) = tail((top & 0xffff_ffff) as u32) {
                out.extend_from_slice(t);
            }
            out.push(b'}');
            self.first = false;
        }
    }

    /// Appends to `out` the text before node `p`'s entry.
    ///
    /// The end of every node finished before it (`]`, `tail(q)`, `}`), then `{"entry":` (after
    /// a `,` unless it is the first of its array).
    ///
    /// Panics if `p` is not the next node of the pre-order (a caller's bug, never content).
    pub fn open<'t>(&mut self, p: u32, tail: &impl Fn(u32) -> Option<&'t [u8]>, out: &mut Vec<u8>) {
        self.close(tail, out);
        assert_eq!(self.stack.pop(), Some(u64::from(p)), "the tree's pre-order");
        out.extend_from_slice(if self.first {
            b"{\"entry\":"
        } else {
            b",{\"entry\":"
        });
    }

    /// Appends to `out` the text after node `p`'s entry (`,"children":[`); its children come
    /// next.
    pub fn after(&mut self, p: u32, out: &mut Vec<u8>) {
        out.extend_from_slice(b",\"children\":[");
        self.first = true;
        self.stack.push(CLOSE | u64::from(p));
        let (a, b) = (
            self.start[p as usize] as usize,
            self.start[p as usize + 1] as usize,
        );
        self.stack
            .extend(self.kids[a..b].iter().rev().map(|&k| u64::from(k)));
    }

    /// Appends the end of every open node and the closing `]` of the array.
    ///
    /// Panics if a node of the pre-order was left out (a caller's bug).
    pub fn finish<'t>(&mut self, tail: &impl Fn(u32) -> Option<&'t [u8]>, out: &mut Vec<u8>) {
        self.close(tail, out);
        assert!(self.stack.is_empty(), "the tree's pre-order");
        out.push(b']');
    }
}

/// A fallback writer that gave another count of texts than it was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FallbackCount;

impl std::fmt::Display for FallbackCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tree_json: fallback gave a wrong count")
    }
}
impl std::error::Error for FallbackCount {}

/// The tree of `ix` and its pre-order, as [`write_tree`] takes them. The children table is a copy,
/// so the caller may let the index go.
pub fn tree_and_order(
    cache: &mut crate::walk::TreeCache,
    ix: &crate::index::Index,
) -> Result<(crate::walk::Tree, Vec<u32>), crate::index::WalkError> {
    let order = cache.preorder(ix).map_err(|e| ix.walk_error(e));
    let t = cache.get(ix);
    let tree = crate::walk::Tree {
        roots: t.roots.clone(),
        start: t.start.clone(),
        kids: t.kids.clone(),
    };
    Ok((tree, order?))
}

/// Where an entry's line lies in the file, and whether it may be copied.
///
/// The line is its JSON text, without `\r\n`; `copy`: the scan's
/// [`crate::index::Rec::stringify_form`] and the caller's leave (the line is then copied when its
/// keys and numbers are `JSON.stringify`'s too).
#[derive(Debug, Clone, Copy)]
pub struct LineAt {
    pub offset: u64,
    pub len: u32,
    pub copy: bool,
}

/// What [`write_tree`] writes around the tree and after each node.
pub struct Frame<'a> {
    /// written before and after the array
    pub head: &'a [u8],
    pub foot: &'a [u8],
    /// node position -> the text after its children (`,"label":...`)
    pub tails: &'a HashMap<u32, Vec<u8>>,
}

/// The lines of one task of a batch: side by side in `buf[..used]` with the bytes between
/// them, `span[k]` where the `k`-th line lies, `ok[k]` whether it may be copied.
#[derive(Default)]
struct Task {
    buf: Vec<u8>,
    used: usize,
    span: Vec<(usize, usize)>,
    ok: Vec<bool>,
    order: Vec<usize>,
}

impl Task {
    /// Reads `lines` (nearby lines with one read, as `Store::with_lines` does) and checks each
    /// is still a line where the index has it (else [`StoreError::Rewritten`]).
    fn read(&mut self, rd: &DetachedReader, lines: &[LineAt]) -> Result<(), StoreError> {
        let end = rd.end();
        self.used = 0;
        self.span.clear();
        self.span.resize(lines.len(), (0, 0));
        self.ok.clear();
        self.ok.resize(lines.len(), false);
        self.order.clear();
        self.order.extend(0..lines.len());
        self.order.sort_unstable_by_key(|&k| lines[k].offset);
        let stop = |l: &LineAt| (l.offset + u64::from(l.len) + 1).min(end);
        let mut a = 0;
        while a < self.order.len() {
            let run_start = lines[self.order[a]].offset;
            let mut run_end = stop(&lines[self.order[a]]).max(run_start);
            let mut b = a + 1;
            while b < self.order.len() {
                let l = &lines[self.order[b]];
                let e = stop(l);
                if l.offset > run_end + crate::store::READ_GAP
                    || e.max(run_end) - run_start > crate::store::READ_RUN
                {
                    break;
                }
                run_end = run_end.max(e);
                b += 1;
            }
            let at = self.used;
            let n = (run_end - run_start) as usize;
            if self.buf.len() < at + n {
                // (grown only: a reused buffer is not cleared again)
                self.buf.resize(at + n, 0);
            }
            rd.read_to(run_start, &mut self.buf[at..at + n])?;
            self.used = at + n;
            for &k in &self.order[a..b] {
                let l = &lines[k];
                let s = at + (l.offset - run_start) as usize;
                let e = s + l.len as usize;
                let at_end = l.offset + u64::from(l.len) >= end;
                let next = self.buf[..self.used].get(e).copied();
                if !crate::store::line_in_place(&self.buf[s..e], next, at_end) {
                    return Err(StoreError::Rewritten { offset: l.offset });
                }
                self.span[k] = (s, e);
                self.ok[k] = l.copy && crate::json::canon_rest(&self.buf[s..e]);
            }
            a = b;
        }
        Ok(())
    }
}

/// Where batch `b` of `lines` ends: after [`BATCH`] lines or [`BATCH_BYTES`] bytes.
fn batch_end(lines: &[LineAt], from: usize) -> usize {
    let mut bytes = 0u64;
    let mut k = from;
    while k < lines.len() && k - from < BATCH && bytes < BATCH_BYTES {
        bytes += u64::from(lines[k].len);
        k += 1;
    }
    k
}

/// Reads and checks batch `lines` into `tasks` (one per [`TASK`] lines), on every core.
fn read_batch(
    rd: &DetachedReader,
    lines: &[LineAt],
    tasks: &mut Vec<Task>,
) -> Result<(), StoreError> {
    let n = lines.len().div_ceil(TASK);
    tasks.resize_with(n, Task::default);
    tasks.truncate(n);
    tasks
        .par_iter_mut()
        .zip(lines.par_chunks(TASK))
        .try_for_each(|(t, l)| t.read(rd, l))
}

/// RPC `get_tree` (nested) handed to `emit` in pieces.
///
/// `frame.head`, the text of Pi's `"tree"` array (`[`, then each node of `order` written by
/// [`Nest`] around its entry's text), `frame.foot`. `order` is the pre-order of `tree` (from
/// [`crate::walk::Tree::preorder`], which refuses cycles and bounds repeats) and `lines[k]` the
/// line of entry `order[k]`, read with `rd` (a reader that does not hold the store). A batch of
/// lines is read and checked on a thread of this call while the calling thread writes the
/// previous one; `wait(f)` runs `f`, the calling thread's wait for the next batch (a binding
/// lets its lock go around it). An entry whose `LineAt::copy` is set and whose line's keys and
/// numbers are plain ([`crate::json::canon_rest`]) is copied; the others of a batch are written
/// by `fallback(entries)` (the exact writer: one text per entry, else [`FallbackCount`]).
/// `emit(len, fill)` takes a piece: `fill` writes its `len` bytes into the slice it is given
/// (every byte of it, so that a caller may hand over uninitialized memory; one piece per batch;
/// the concatenation of the pieces is the text).
///
/// Errors: the first of reading (the file shrank, or a line is no longer where the index has it:
/// [`StoreError`]), `fallback` or `emit`; nothing more is emitted then.
///
/// Panics if `order` is not the pre-order of `tree` or `lines` is not as long (a caller's bug).
#[allow(clippy::too_many_arguments)]
pub fn write_tree<E: From<StoreError> + From<FallbackCount>>(
    tree: &crate::walk::Tree,
    order: &[u32],
    lines: &[LineAt],
    rd: &DetachedReader,
    frame: Frame<'_>,
    mut wait: impl FnMut(&mut (dyn FnMut() + Send)),
    mut fallback: impl FnMut(&[u32]) -> Result<Vec<Vec<u8>>, E>,
    mut emit: impl FnMut(usize, &mut dyn FnMut(&mut [MaybeUninit<u8>])) -> Result<(), E>,
) -> Result<(), E> {
    assert_eq!(
        order.len(),
        lines.len(),
        "one line per node of the pre-order"
    );
    let tails = frame.tails;
    let tail = |p: u32| tails.get(&p).map(Vec::as_slice);
    let mut nest = Nest::new(&tree.roots, &tree.start, &tree.kids);
    let mut bounds = Vec::new();
    let mut from = 0;
    while from < lines.len() {
        let to = batch_end(lines, from);
        bounds.push((from, to));
        from = to;
    }
    // the reading thread hands over batches and gets their buffers back for reuse
    let (full_tx, full_rx) = mpsc::sync_channel::<Result<Vec<Task>, StoreError>>(1);
    let (empty_tx, empty_rx) = mpsc::channel::<Vec<Task>>();
    std::thread::scope(|s| -> Result<(), E> {
        // (dropped when this returns, before the scope joins the reading thread: a reader
        // blocked on a full channel then stops)
        let mut full_rx = full_rx;
        let bounds = &bounds;
        s.spawn(move || {
            for &(a, b) in bounds {
                let mut tasks = empty_rx.try_recv().unwrap_or_default();
                let r = read_batch(rd, &lines[a..b], &mut tasks).map(|()| tasks);
                let failed = r.is_err();
                if full_tx.send(r).is_err() || failed {
                    return; // the writer stopped, or this read failed
                }
            }
        });
        let mut glue: Vec<u8> = Vec::new();
        let mut glue_end: Vec<usize> = Vec::new();
        let mut end: Vec<u8> = Vec::new();
        for (bi, &(a, b)) in bounds.iter().enumerate() {
            let mut got = None;
            let (rx, slot) = (&mut full_rx, &mut got);
            wait(&mut move || *slot = rx.recv().ok());
            let tasks = got.expect("the reading thread sends every batch or its error")?;
            // the texts of the lines that may not be copied, from the exact writer
            let redo: Vec<usize> = (a..b)
                .filter(|&k| !tasks[(k - a) / TASK].ok[(k - a) % TASK])
                .collect();
            let mut again: Vec<Vec<u8>> = Vec::new();
            if !redo.is_empty() {
                let want: Vec<u32> = redo.iter().map(|&k| order[k]).collect();
                again = fallback(&want)?;
                if again.len() != redo.len() {
                    return Err(FallbackCount.into());
                }
            }
            // the nesting before each entry; the head before the first, the end after the last
            glue.clear();
            glue_end.clear();
            if bi == 0 {
                glue.extend_from_slice(frame.head);
                glue.push(b'[');
            }
            for k in a..b {
                if k > 0 {
                    nest.after(order[k - 1], &mut glue);
                }
                nest.open(order[k], &tail, &mut glue);
                glue_end.push(glue.len());
            }
            end.clear();
            if bi + 1 == bounds.len() {
                nest.after(order[b - 1], &mut end);
                nest.finish(&tail, &mut end);
                end.extend_from_slice(frame.foot);
            }
            let text = |k: usize| -> &[u8] {
                let t = &tasks[(k - a) / TASK];
                let j = (k - a) % TASK;
                if t.ok[j] {
                    let (x, y) = t.span[j];
                    &t.buf[x..y]
                } else {
                    let r = redo
                        .binary_search(&k)
                        .expect("a line not copied was written again");
                    &again[r]
                }
            };
            let len = glue.len() + end.len() + (a..b).map(|k| text(k).len()).sum::<usize>();
            let mut fill = |dst: &mut [MaybeUninit<u8>]| {
                let mut at = 0;
                let mut put = |src: &[u8]| {
                    dst[at..at + src.len()].copy_from_slice(uninit(src));
                    at += src.len();
                };
                let mut g = 0;
                for k in a..b {
                    put(&glue[g..glue_end[k - a]]);
                    g = glue_end[k - a];
                    put(text(k));
                }
                put(&end);
                assert_eq!(at, dst.len(), "every byte of the piece written");
            };
            emit(len, &mut fill)?;
            // (the reading thread may have stopped after its last batch)
            let _ = empty_tx.send(tasks);
        }
        if bounds.is_empty() {
            let mut text = frame.head.to_vec();
            text.push(b'[');
            nest.finish(&tail, &mut text);
            text.extend_from_slice(frame.foot);
            emit(text.len(), &mut |dst: &mut [MaybeUninit<u8>]| {
                dst.copy_from_slice(uninit(&text))
            })?;
        }
        Ok(())
    })
}

/// `b` as bytes that may be uninitialized (the same layout), to fill a piece from.
fn uninit(b: &[u8]) -> &[MaybeUninit<u8>] {
    // SAFETY: `MaybeUninit<u8>` has `u8`'s size and alignment, and every `u8` is a valid one;
    // the slice is only read.
    unsafe { &*(b as *const [u8] as *const [MaybeUninit<u8>]) }
}

/// Which of the lines `raw[a..b]` (`span`) already are `JSON.stringify`'s text. Checked on every
/// core ([`crate::jstext::is_stringify_text`]): the test oracle of the scan's
/// [`crate::index::Rec::stringify_form`].
pub fn stringify_flags(raw: &[u8], span: &[(usize, usize)]) -> Vec<bool> {
    span.par_iter()
        .map(|&(a, b)| crate::jstext::is_stringify_text(&raw[a..b]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nesting of `order` with entry `i`'s text `i`.
    fn nested(
        roots: &[u32],
        start: &[u32],
        kids: &[u32],
        order: &[u32],
        tails: &HashMap<u32, Vec<u8>>,
    ) -> Vec<u8> {
        let tail = |p: u32| tails.get(&p).map(Vec::as_slice);
        let mut nest = Nest::new(roots, start, kids);
        let mut out = b"[".to_vec();
        for (k, &p) in order.iter().enumerate() {
            if k > 0 {
                nest.after(order[k - 1], &mut out);
            }
            nest.open(p, &tail, &mut out);
            out.extend_from_slice(p.to_string().as_bytes());
        }
        if let Some(&p) = order.last() {
            nest.after(p, &mut out);
        }
        nest.finish(&tail, &mut out);
        out
    }

    #[test]
    fn nested_with_labels() {
        // 0 -> (1, 2), 2 -> 3; second root 4
        let start = [0, 2, 2, 3, 3, 3];
        let kids = [1, 2, 3];
        let tails = HashMap::from([(2u32, b",\"label\":\"x\"".to_vec())]);
        let out = nested(&[0, 4], &start, &kids, &[0, 1, 2, 3, 4], &tails);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"[{"entry":0,"children":[{"entry":1,"children":[]},{"entry":2,"children":[{"entry":3,"children":[]}],"label":"x"}]},{"entry":4,"children":[]}]"#
        );
    }

    #[test]
    fn deep_chain_no_recursion() {
        let n: u32 = 200_000;
        let start: Vec<u32> = (0..=n).map(|i| i.min(n - 1)).collect();
        let kids: Vec<u32> = (1..n).collect();
        let order: Vec<u32> = (0..n).collect();
        let out = nested(&[0], &start, &kids, &order, &HashMap::new());
        assert!(out.starts_with(b"[{\"entry\":0,\"children\":[{\"entry\":1,"));
        let closes: Vec<u8> = b"]}".repeat(n as usize).into_iter().chain(*b"]").collect();
        assert!(out.ends_with(&closes));
    }

    #[test]
    #[should_panic(expected = "pre-order")]
    fn a_wrong_order_is_a_callers_bug() {
        let start = [0, 1, 1];
        nested(&[0], &start, &[1], &[1, 0], &HashMap::new());
    }

    const TEXT: &str = concat!(
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2025-01-01T00:00:00Z\",\"cwd\":\"/\"}\n",
        "{\"type\":\"label\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"t\"}\n",
        "{\"type\":\"label\", \"id\":\"b\",\"parentId\":\"a\",\"timestamp\":\"t\"}\n",
        "{\"type\":\"label\",\"id\":\"c\",\"parentId\":\"a\",\"timestamp\":\"t\",\"n\":1.0}\n",
    );

    #[derive(Debug)]
    enum TestError {
        Store,
        Count,
    }
    impl From<StoreError> for TestError {
        fn from(_: StoreError) -> Self {
            TestError::Store
        }
    }
    impl From<FallbackCount> for TestError {
        fn from(_: FallbackCount) -> Self {
            TestError::Count
        }
    }

    /// `write_tree` over `st`, the fallback answering `B<i>`; (pieces, entries asked for).
    fn tree_text(
        st: &crate::store::Store,
        copy: bool,
        tails: &HashMap<u32, Vec<u8>>,
    ) -> Result<(Vec<Vec<u8>>, Vec<u32>), TestError> {
        let mut cache = crate::walk::TreeCache::default();
        let (tree, order) = tree_and_order(&mut cache, &st.index).unwrap();
        let recs = &st.index.recs;
        let lines: Vec<LineAt> = order
            .iter()
            .map(|&i| {
                let r = recs.at(i as usize);
                LineAt {
                    offset: r.offset(),
                    len: r.len,
                    copy: copy && r.stringify_form(),
                }
            })
            .collect();
        let rd = st.detached_reader()?;
        let mut asked = Vec::new();
        let mut pieces = Vec::new();
        let frame = Frame {
            head: b"<",
            foot: b">",
            tails,
        };
        write_tree::<TestError>(
            &tree,
            &order,
            &lines,
            &rd,
            frame,
            |f| f(),
            |p| {
                asked.extend_from_slice(p);
                Ok(p.iter().map(|i| format!("B{i}").into_bytes()).collect())
            },
            |len, fill| {
                let mut piece = vec![MaybeUninit::new(0xAA); len];
                fill(&mut piece);
                // SAFETY: initialized above (and `fill` wrote each byte again)
                pieces.push(piece.iter().map(|b| unsafe { b.assume_init() }).collect());
                Ok(())
            },
        )?;
        Ok((pieces, asked))
    }

    #[test]
    fn tree_text_copies_stringify_lines_and_asks_for_the_others() {
        let st = crate::store::Store::from_bytes(TEXT.as_bytes().to_vec(), false);
        let tails = HashMap::from([(1u32, b",\"label\":1".to_vec())]);
        let (pieces, asked) = tree_text(&st, true, &tails).unwrap();
        // a space after `{`, and `1.0` (JSON.stringify writes `1`)
        assert_eq!(asked, vec![1, 2]);
        let text = String::from_utf8(pieces.concat()).unwrap();
        assert_eq!(
            text,
            concat!(
                "<[{\"entry\":{\"type\":\"label\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"t\"},",
                "\"children\":[{\"entry\":B1,\"children\":[],\"label\":1},{\"entry\":B2,\"children\":[]}]}]>"
            )
        );
        let (_, asked) = tree_text(&st, false, &tails).unwrap();
        assert_eq!(asked, vec![0, 1, 2], "nothing copied without leave");
    }

    #[test]
    fn batches_of_many_entries_and_an_empty_tree() {
        let mut text = TEXT.lines().next().unwrap().to_string() + "\n";
        let n = BATCH * 2 + 17;
        for i in 0..n {
            // one root with every other entry below it, a few two deep
            let parent = match i {
                0 => "null".to_string(),
                _ if i % 1000 == 1 => "\"e0\"".to_string(),
                _ => format!("\"e{}\"", if i % 1000 == 2 { i - 1 } else { 0 }),
            };
            text += &format!("{{\"type\":\"label\",\"id\":\"e{i}\",\"parentId\":{parent},\"timestamp\":\"t\"}}\n");
        }
        let st = crate::store::Store::from_bytes(text.into_bytes(), false);
        let (pieces, asked) = tree_text(&st, true, &HashMap::new()).unwrap();
        assert!(asked.is_empty());
        assert_eq!(pieces.len(), 3, "one piece per batch");
        let text = pieces.concat();
        let v: serde_json::Value = serde_json::from_slice(&text[1..text.len() - 1]).unwrap();
        let mut ids = Vec::new();
        let mut stack = vec![&v[0]];
        while let Some(node) = stack.pop() {
            ids.push(node["entry"]["id"].as_str().unwrap().to_string());
            stack.extend(node["children"].as_array().unwrap().iter().rev());
        }
        let want: Vec<String> = (0..n).map(|i| format!("e{i}")).collect();
        assert_eq!(ids, want, "every entry once, in pre-order");
        let empty = crate::store::Store::from_bytes(
            TEXT.lines().next().unwrap().as_bytes().to_vec(),
            false,
        );
        let (pieces, _) = tree_text(&empty, true, &HashMap::new()).unwrap();
        assert_eq!(pieces.concat(), b"<[]>");
    }
}
