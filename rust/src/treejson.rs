//! RPC `get_tree` (nested, Pi's shape) written as one JSON text by the core.
//!
//! Pi's answer is `{"tree":[{"entry":E,"children":[...],"label"?,"labelTimestamp"?}...],"leafId":L}`
//! with every entry two JSON levels below its parent. [`write_nested`] writes the `"tree"` array
//! from the children table ([`crate::walk::Tree`]) with an explicit stack (no recursion on depth:
//! a 100,000-deep chain is one loop), taking each entry's text from a caller that reads lines in
//! batches (in pre-order, the order the text lists them): a line already in `JSON.stringify`'s
//! form ([`crate::jstext::is_stringify_text`]) is copied, the others are written by the caller's
//! exact writer. The label tails and `leafId` come from the caller as ready JSON text.

/// Entries read per batch by [`write_nested`].
pub const BATCH: usize = 4096;

/// Appends `[` + the nested nodes + `]` to `out` for the tree `(roots, start, kids)` (node `p`'s
/// children are `kids[start[p]..start[p + 1]]`), whose pre-order is `order` (from
/// [`crate::walk::Tree::preorder`], which refuses cycles and bounds repeats).
/// `texts(batch, buf, ends)` appends the JSON text of each entry of `batch` (a slice of `order`,
/// in that order) to `buf` (empty on the call) and its end in `buf` to `ends`; `tail(p)` is the text written after node `p`'s children array and
/// before its closing brace (`,"label":...,"labelTimestamp":...` or empty).
///
/// Errors: the first error of `texts`. Panics if `order` is not the pre-order of the tree (a
/// caller's bug), never on content.
pub fn write_nested<E>(
    roots: &[u32],
    start: &[u32],
    kids: &[u32],
    order: &[u32],
    mut tail: impl FnMut(u32) -> Option<Vec<u8>>,
    mut texts: impl FnMut(&[u32], &mut Vec<u8>, &mut Vec<usize>) -> Result<(), E>,
    out: &mut Vec<u8>,
) -> Result<(), E> {
    out.push(b'[');
    // a node to open is pushed as `p`, a node to close as `!p` (pushed with the high bit set)
    const CLOSE: u64 = 1 << 32;
    let mut stack: Vec<u64> = roots.iter().rev().map(|&r| u64::from(r)).collect();
    let mut buf: Vec<u8> = Vec::new();
    let mut ends: Vec<usize> = Vec::new();
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
        let a = if taken == 0 { 0 } else { ends[taken - 1] };
        out.extend_from_slice(&buf[a..ends[taken]]);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(b: &[u32], buf: &mut Vec<u8>, ends: &mut Vec<usize>) -> Result<(), ()> {
        for i in b {
            buf.extend_from_slice(format!("{i}").as_bytes());
            ends.push(buf.len());
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
        write_nested(&[0], &start, &kids, &order, |_| None, text_of, &mut out).unwrap();
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
    fn empty_tree() {
        let mut out = Vec::new();
        write_nested(&[], &[0], &[], &[], |_| None, text_of, &mut out).unwrap();
        assert_eq!(out, b"[]");
    }
}
