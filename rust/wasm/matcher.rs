//! The search matcher of the CLI (`rust/src/search/query.rs`, `tokenize.rs`) as a WebAssembly
//! module for the HTML view's search box: the same files compiled again, so the page and
//! `sessiontree search` parse a query and match a text by one rule.
//!
//! Built by `make wasm` with Debian's rustc 1.63 (`/usr/bin/rustc --target
//! wasm32-unknown-unknown -O --crate-type cdylib`) into `python/sessiontree/html/matcher.wasm`,
//! which the exporter embeds in every page (base64); `tests/html/test_html_search_wasm.py`
//! checks that rebuilding gives the committed bytes.
//!
//! The C ABI (every length and offset a `u32`; one module instance, one caller at a time):
//!
//! * `st_buffer(n) -> ptr`: the input buffer, at least `n` bytes (the caller writes UTF-8 there;
//!   the memory may grow, so views of it are made again after this call);
//! * `st_parse(n) -> 1 | 0`: parses the buffer's first `n` bytes as the query to match with
//!   (1), or keeps the error (0): its message, one line, at `st_out_ptr()` as `st_out_len()`
//!   bytes of UTF-8;
//! * `st_match(n) -> k | -1`: whether the buffer's first `n` bytes (a text) match the whole
//!   query: -1 when not (or no query parsed), else the number `k` of spans of the query's
//!   positive items in it, written at `st_out_ptr()` as `2k` `u32`s `[start, end)` in UTF-16
//!   code units (JavaScript string offsets), sorted, disjoint;
//! * `st_spans(n) -> k`: the same spans whether or not the text matches the whole query (to mark
//!   the matches in a piece of an entry's text);
//! * `st_needles() -> n`: what a text matching the query must hold, for a prefilter on the raw
//!   lines: at `st_out_ptr()`, `n` bytes: per positive item a line (`\n` between), per
//!   alternative of it a field (`\t` between), per alternative the query's parts made only of
//!   the letters `a`-`z` (a space between; a token holding such a part holds it lowercased,
//!   so the line's text does). A text matches only if, for every line, some field's parts all
//!   occur in it (an empty field: no condition).
//!
//! Bytes that are not UTF-8 read as U+FFFD (a JavaScript `TextEncoder` never writes them). A
//! query's repeated items are matched once (AND and OR of the same item are the item): the
//! work per text is at most the number of distinct items times its tokens.

#[path = "../src/search/query.rs"]
mod query;
#[path = "../src/search/tokenize.rs"]
mod tokenize;

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Mutex;

struct State {
    query: Option<query::Query>,
    input: Vec<u8>,
    out: Vec<u8>,
}

static STATE: Mutex<State> = Mutex::new(State {
    query: None,
    input: Vec::new(),
    out: Vec::new(),
});

fn state() -> std::sync::MutexGuard<'static, State> {
    match STATE.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn text_of(input: &[u8], n: u32) -> Cow<'_, str> {
    let n = (n as usize).min(input.len());
    String::from_utf8_lossy(&input[..n])
}

/// The query with each clause and each alternative once (first occurrence kept, order kept).
fn distinct(q: query::Query) -> query::Query {
    let mut clauses = Vec::with_capacity(q.clauses.len());
    let mut seen = HashSet::new();
    for mut c in q.clauses {
        let mut alts = Vec::with_capacity(c.alts.len());
        let mut seen_alts = HashSet::new();
        for a in c.alts {
            if seen_alts.insert(a.clone()) {
                alts.push(a);
            }
        }
        c.alts = alts;
        if seen.insert(c.clone()) {
            clauses.push(c);
        }
    }
    query::Query { clauses }
}

/// `spans` (byte ranges of `text`, sorted, disjoint) as UTF-16 offsets, written to `out`.
fn utf16_spans(text: &str, spans: &[(usize, usize)], out: &mut Vec<u8>) {
    out.clear();
    let mut ends: Vec<usize> = Vec::with_capacity(spans.len() * 2);
    for &(a, b) in spans {
        ends.push(a);
        ends.push(b);
    }
    // one forward walk: the byte offsets are non-decreasing
    let mut k = 0;
    let mut units = 0u32;
    for (i, c) in text.char_indices() {
        while k < ends.len() && ends[k] <= i {
            out.extend_from_slice(&units.to_le_bytes());
            k += 1;
        }
        if k == ends.len() {
            break;
        }
        units += c.len_utf16() as u32;
    }
    while k < ends.len() {
        out.extend_from_slice(&units.to_le_bytes());
        k += 1;
    }
}

#[no_mangle]
pub extern "C" fn st_buffer(n: u32) -> *mut u8 {
    let mut s = state();
    let n = n as usize;
    if s.input.len() < n {
        s.input.resize(n, 0);
    }
    s.input.as_mut_ptr()
}

#[no_mangle]
pub extern "C" fn st_out_ptr() -> *const u8 {
    state().out.as_ptr()
}

#[no_mangle]
pub extern "C" fn st_out_len() -> u32 {
    state().out.len() as u32
}

#[no_mangle]
pub extern "C" fn st_parse(n: u32) -> u32 {
    let mut s = state();
    let parsed = query::parse(&text_of(&s.input, n));
    s.out.clear();
    match parsed {
        Ok(q) => {
            s.query = Some(distinct(q));
            1
        }
        Err(e) => {
            s.query = None;
            s.out.extend_from_slice(e.to_string().as_bytes());
            0
        }
    }
}

fn run(n: u32, whole: bool) -> i32 {
    let mut s = state();
    let s = &mut *s;
    s.out.clear();
    let q = match &s.query {
        Some(q) => q,
        None => return -1,
    };
    let text = text_of(&s.input, n);
    let tp = query::TextParts::new(&text);
    if whole && !q.matches(&tp) {
        return -1;
    }
    let spans = q.spans(&tp);
    utf16_spans(&text, &spans, &mut s.out);
    spans.len() as i32
}

#[no_mangle]
pub extern "C" fn st_match(n: u32) -> i32 {
    run(n, true)
}

#[no_mangle]
pub extern "C" fn st_spans(n: u32) -> i32 {
    run(n, false)
}

#[no_mangle]
pub extern "C" fn st_needles() -> u32 {
    let mut s = state();
    let s = &mut *s;
    s.out.clear();
    let q = match &s.query {
        Some(q) => q,
        None => return 0,
    };
    let mut t = String::new();
    for (k, c) in q.clauses.iter().filter(|c| !c.neg).enumerate() {
        if k > 0 {
            t.push('\n');
        }
        for (i, alt) in c.alts.iter().enumerate() {
            if i > 0 {
                t.push('\t');
            }
            let mut first = true;
            for (_, p) in alt.iter().flat_map(|m| m.parts.iter()) {
                if !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()) {
                    if !first {
                        t.push(' ');
                    }
                    t.push_str(p);
                    first = false;
                }
            }
        }
    }
    s.out.extend_from_slice(t.as_bytes());
    s.out.len() as u32
}
