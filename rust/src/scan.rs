//! Splitting bytes into lines and parsing them, in parallel batches.
//!
//! Lines end at `\n` only (never at `\r` alone or U+2028/U+2029); one trailing `\r` is not
//! part of the line's JSON. Batches bound the memory of parsed skeletons, so scanning a
//! 1 GB file holds only one batch of skeletons at a time.

use crate::index::{parse_one, Index, ParsedLine};
use rayon::prelude::*;

/// Bytes per parallel batch.
const BATCH: usize = 32 << 20;
/// Lines per parallel work item.
const CHUNK_LINES: usize = 2048;

/// One line's span: `(start, json_len, end_after_newline, terminated)`.
type Span = (u64, u64, u64, bool);

fn split_lines(data: &[u8], base: u64, out: &mut Vec<Span>) {
    let mut start = 0usize;
    for nl in memchr::memchr_iter(b'\n', data) {
        let mut end = nl;
        if end > start && data[end - 1] == b'\r' {
            end -= 1;
        }
        out.push((base + start as u64, (end - start) as u64, base + nl as u64 + 1, true));
        start = nl + 1;
    }
    if start < data.len() {
        let mut end = data.len();
        if end > start && data[end - 1] == b'\r' {
            end -= 1;
        }
        out.push((base + start as u64, (end - start) as u64, base + data.len() as u64, false));
    }
}

/// Scans `data` (which starts at file offset `base`) into `index`, first line numbered
/// `first_line`. `parallel` uses the rayon pool. Returns the number of new entries.
pub fn scan_into(index: &mut Index, data: &[u8], base: u64, parallel: bool) -> usize {
    let before = index.recs.len();
    let mut pos = 0usize;
    let mut spans: Vec<Span> = Vec::new();
    while pos < data.len() {
        // cut a batch at a newline
        let mut end = (pos + BATCH).min(data.len());
        if end < data.len() {
            match memchr::memchr(b'\n', &data[end..]) {
                Some(k) => end = end + k + 1,
                None => end = data.len(),
            }
        }
        spans.clear();
        split_lines(&data[pos..end], base + pos as u64, &mut spans);
        let parse = |sp: &Span| {
            let s = (sp.0 - base) as usize;
            parse_one(&data[s..s + sp.1 as usize])
        };
        let results: Vec<_> = if parallel && spans.len() > CHUNK_LINES {
            spans.par_chunks(CHUNK_LINES).flat_map_iter(|c| c.iter().map(parse).collect::<Vec<_>>()).collect()
        } else {
            spans.iter().map(parse).collect()
        };
        for (sp, result) in spans.iter().zip(results) {
            let line = index.lines + 1;
            index.ingest(ParsedLine { offset: sp.0, len: sp.1, line, terminated: sp.3, end: sp.2, result });
        }
        pos = end;
    }
    index.recs.len() - before
}
