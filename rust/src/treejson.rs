//! RPC `get_tree` (nested, Pi's shape) written as one JSON text by the core.
//!
//! Pi's answer is
//! `{"tree":[{"entry":E,"children":[...],"label"?,"labelTimestamp"?}...],"leafId":L}` with every
//! entry two JSON levels below its parent. [`write_nested`] writes the `"tree"` array from the
//! children table ([`crate::walk::Tree`]) with an explicit stack (no recursion on depth: a
//! 100,000-deep chain is one loop), taking each entry's text from a caller that reads lines in
//! batches (in pre-order, the order the text lists them): a line the scan found already in
//! `JSON.stringify`'s form ([`crate::index::Rec::stringify_form`]) is copied, the others are
//! written by the caller's exact writer. The label tails and `leafId` come from the caller as
//! ready JSON text. The text goes to the caller's sink a batch at a time (it is never held
//! whole: a 1 GiB session's answer is over 1 GiB).

/// Entries read per batch by [`write_nested`].
pub const BATCH: usize = 4096;

/// Appends `[` + the nested nodes + `]` to `out` for the tree `(roots, start, kids)`.
///
/// Node `p`'s children are `kids[start[p]..start[p + 1]]`; the tree's pre-order is `order` (from
/// [`crate::walk::Tree::preorder`], which refuses cycles and bounds repeats). `texts(batch, buf,
/// spans)` appends the JSON text of each entry of `batch` (a slice of `order`) to `buf` (empty on
/// the call; in any order) and pushes where each lies in `buf` to `spans` (in `batch`'s order);
/// `tail(p)` is the text written after node `p`'s children array and before its closing brace
/// (`,"label":...,"labelTimestamp":...` or empty). Before each batch is read, `flush(out)` may take what `out` holds so far (and leave
/// it empty): the text is the concatenation of what `flush` took and what `out` holds at the end.
///
/// Errors: the first error of `texts` or `flush`. Panics if `order` is not the pre-order of the
/// tree (a caller's bug), never on content.
#[allow(clippy::too_many_arguments)]
pub fn write_nested<E>(
    roots: &[u32],
    start: &[u32],
    kids: &[u32],
    order: &[u32],
    mut tail: impl FnMut(u32) -> Option<Vec<u8>>,
    mut texts: impl FnMut(&[u32], &mut Vec<u8>, &mut Vec<(usize, usize)>) -> Result<(), E>,
    mut flush: impl FnMut(&mut Vec<u8>) -> Result<(), E>,
    out: &mut Vec<u8>,
) -> Result<(), E> {
    out.push(b'[');
    // a node to open is pushed as `p`, a node to close as `!p` (pushed with the high bit set)
    const CLOSE: u64 = 1 << 32;
    let mut stack: Vec<u64> = roots.iter().rev().map(|&r| u64::from(r)).collect();
    let mut buf: Vec<u8> = Vec::new();
    let mut ends: Vec<(usize, usize)> = Vec::new();
    let mut taken = 0; // texts of the batch already written
    let mut next = 0; // position in `order` of the next batch
    let mut first = true;
    while let Some(top) = stack.pop() {
        let p = (top & 0xffff_ffff) as u32;
        if top & CLOSE != 0 {
            out.push(b']');
            if let Some(t) = tail(p) {
                out.extend_from_slice(&t);
            }
            out.push(b'}');
            first = false;
            continue;
        }
        if taken == ends.len() {
            flush(out)?;
            buf.clear();
            ends.clear();
            taken = 0;
            let end = (next + BATCH).min(order.len());
            texts(&order[next..end], &mut buf, &mut ends)?;
            assert_eq!(ends.len(), end - next, "one text per entry of the batch");
            next = end;
        }
        debug_assert_eq!(
            order[next - ends.len() + taken],
            p,
            "order is the tree's pre-order"
        );
        out.extend_from_slice(if first {
            b"{\"entry\":"
        } else {
            b",{\"entry\":"
        });
        let (a, b) = ends[taken];
        out.extend_from_slice(&buf[a..b]);
        taken += 1;
        out.extend_from_slice(b",\"children\":[");
        first = true;
        stack.push(CLOSE | u64::from(p));
        let (a, b) = (start[p as usize] as usize, start[p as usize + 1] as usize);
        stack.extend(kids[a..b].iter().rev().map(|&k| u64::from(k)));
    }
    out.push(b']');
    Ok(())
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

/// What [`write_tree`] writes around the tree and after each node.
pub struct Frame<'a> {
    /// written before and after the array
    pub head: &'a [u8],
    pub foot: &'a [u8],
    /// node position -> the text after its children (`,"label":...`)
    pub tails: &'a std::collections::HashMap<u32, Vec<u8>>,
}

/// Bytes of text [`write_tree`] gathers before it hands them to its sink.
///
/// At least; a batch's text at most, see [`write_nested`].
pub const CHUNK: usize = 1 << 20;

/// RPC `get_tree` (nested) handed to `sink` in pieces.
///
/// `frame.head`, the text of Pi's `"tree"` array ([`write_nested`]), `frame.foot`, in pieces of
/// at least [`CHUNK`] bytes (the last may be shorter; never an empty one). The entries are read in batches by `read(idx, raw, span)`
/// (their lines side by side in `raw`, as [`crate::store::Store::lines_into`] gives them); an
/// entry for which `copy_ok(idx)` says true (the scan's [`crate::index::Rec::stringify_form`])
/// and whose line's keys are plain ([`crate::json::canon_rest`]) is copied, the others are written by `fallback(positions)` (the exact writer: one text per
/// position, else [`FallbackCount`]).
///
/// Errors: the first of `read`, `fallback` or `sink`.
pub fn write_tree<E: From<FallbackCount>>(
    tree: &crate::walk::Tree,
    order: &[u32],
    frame: Frame<'_>,
    mut read: impl FnMut(&[usize], &mut Vec<u8>, &mut Vec<(usize, usize)>) -> Result<(), E>,
    copy_ok: impl Fn(&[usize]) -> Vec<bool>,
    mut fallback: impl FnMut(Vec<usize>) -> Result<Vec<Vec<u8>>, E>,
    mut sink: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut out = Vec::with_capacity(CHUNK + frame.head.len());
    out.extend_from_slice(frame.head);
    let mut span = Vec::new();
    let mut raw = Vec::new();
    write_nested(
        &tree.roots,
        &tree.start,
        &tree.kids,
        order,
        |p| frame.tails.get(&p).cloned(),
        |batch, buf, ends| -> Result<(), E> {
            let idx: Vec<usize> = batch.iter().map(|&i| i as usize).collect();
            // the lines straight into `buf`: when every one may be copied, they are the texts
            read(&idx, buf, &mut span)?;
            let mut ok = copy_ok(&idx);
            for (k, &(a, b)) in span.iter().enumerate() {
                ok[k] = ok[k] && crate::json::canon_rest(&buf[a..b]);
            }
            let redo: Vec<usize> = (0..idx.len()).filter(|&k| !ok[k]).collect();
            if redo.is_empty() {
                ends.extend_from_slice(&span);
                return Ok(());
            }
            let got = fallback(redo.iter().map(|&k| idx[k]).collect())?;
            if got.len() != redo.len() {
                return Err(FallbackCount.into());
            }
            let mut again: Vec<Option<Vec<u8>>> = vec![None; idx.len()];
            for (k, text) in redo.into_iter().zip(got) {
                again[k] = Some(text);
            }
            std::mem::swap(buf, &mut raw);
            buf.clear();
            for (k, &(a, b)) in span.iter().enumerate() {
                let from = buf.len();
                match &again[k] {
                    Some(t) => buf.extend_from_slice(t),
                    None => buf.extend_from_slice(&raw[a..b]),
                }
                ends.push((from, buf.len()));
            }
            Ok(())
        },
        |out| {
            if out.len() >= CHUNK {
                sink(out)?;
                out.clear();
            }
            Ok(())
        },
        &mut out,
    )?;
    out.extend_from_slice(frame.foot);
    if !out.is_empty() {
        sink(&out)?;
    }
    Ok(())
}

/// Which of the lines `raw[a..b]` (`span`) already are `JSON.stringify`'s text. Checked on every
/// core ([`crate::jstext::is_stringify_text`]): the test oracle of the scan's
/// [`crate::index::Rec::stringify_form`].
pub fn stringify_flags(raw: &[u8], span: &[(usize, usize)]) -> Vec<bool> {
    use rayon::prelude::*;
    span.par_iter()
        .map(|&(a, b)| crate::jstext::is_stringify_text(&raw[a..b]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(b: &[u32], buf: &mut Vec<u8>, ends: &mut Vec<(usize, usize)>) -> Result<(), ()> {
        for i in b {
            let from = buf.len();
            buf.extend_from_slice(format!("{i}").as_bytes());
            ends.push((from, buf.len()));
        }
        Ok(())
    }

    #[test]
    fn nested_with_labels() {
        // 0 -> (1, 2), 2 -> 3; second root 4
        let start = [0, 2, 2, 3, 3, 3];
        let kids = [1, 2, 3];
        let mut out = Vec::new();
        write_nested(
            &[0, 4],
            &start,
            &kids,
            &[0, 1, 2, 3, 4],
            |p| (p == 2).then(|| b",\"label\":\"x\"".to_vec()),
            text_of,
            |_| Ok(()),
            &mut out,
        )
        .unwrap();
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
        let mut out = Vec::new();
        let mut taken = Vec::new();
        let flush = |o: &mut Vec<u8>| {
            taken.append(o);
            Ok(())
        };
        write_nested(
            &[0],
            &start,
            &kids,
            &order,
            |_| None,
            text_of,
            flush,
            &mut out,
        )
        .unwrap();
        taken.append(&mut out);
        let out = taken;
        assert!(out.starts_with(b"[{\"entry\":0,\"children\":[{\"entry\":1,"));
        assert!(out.ends_with(
            &b"]}"
                .repeat(n as usize)
                .into_iter()
                .chain(*b"]")
                .collect::<Vec<u8>>()
        ));
    }

    #[test]
    fn tree_text_copies_stringify_lines_and_asks_for_the_others() {
        let st = crate::store::Store::from_bytes(
            concat!(
                "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2025-01-01T00:00:00Z\",\"cwd\":\"/\"}\n",
                "{\"type\":\"label\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"t\"}\n",
                "{\"type\":\"label\", \"id\":\"b\",\"parentId\":\"a\",\"timestamp\":\"t\"}\n",
            )
            .as_bytes()
            .to_vec(),
            false,
        );
        let mut cache = crate::walk::TreeCache::default();
        let (tree, order) = tree_and_order(&mut cache, &st.index).unwrap();
        let tails = std::collections::HashMap::from([(1u32, b",\"label\":1".to_vec())]);
        let frame = |tails| Frame {
            head: b"<",
            foot: b">",
            tails,
        };
        let copy_ok = |idx: &[usize]| -> Vec<bool> {
            idx.iter()
                .map(|&i| st.index.recs.at(i).stringify_form())
                .collect()
        };
        let read = |idx: &[usize], raw: &mut Vec<u8>, span: &mut Vec<(usize, usize)>| {
            st.lines_into(idx, raw, span).map_err(|_| FallbackCount)
        };
        let mut asked = Vec::new();
        let mut got = Vec::new();
        write_tree(
            &tree,
            &order,
            frame(&tails),
            read,
            copy_ok,
            |p| {
                asked.extend(p.iter().copied());
                Ok(vec![b"B".to_vec(); p.len()])
            },
            |chunk| {
                got.extend_from_slice(chunk);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(asked, vec![1]);
        let text = String::from_utf8(got).unwrap();
        assert!(text.starts_with("<[{\"entry\":{\"type\":\"label\",\"id\":\"a\""));
        assert!(text.ends_with(",\"children\":[{\"entry\":B,\"children\":[],\"label\":1}]}]>"));
        let wrong = write_tree(
            &tree,
            &order,
            frame(&tails),
            read,
            |idx| vec![false; idx.len()],
            |_| Ok(vec![]),
            |_| Ok(()),
        );
        assert_eq!(wrong, Err(FallbackCount));
    }

    #[test]
    fn empty_tree() {
        let mut out = Vec::new();
        write_nested(&[], &[0], &[], &[], |_| None, text_of, |_| Ok(()), &mut out).unwrap();
        assert_eq!(out, b"[]");
    }
}
