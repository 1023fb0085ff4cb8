//! The search tokenizer: one rule for the index, the query parser and the snippets.
//!
//! Text is cut into *compounds*: runs of word characters (`char::is_alphanumeric` or `_`)
//! joined by runs of joiners (`- . / : @ # ~ + \ =`), leading and trailing joiners dropped. A
//! compound splits into *parts* at joiners and `_`, then at case changes (`fooBar` → `foo`,
//! `Bar`; `HTTPServer` → `HTTP`, `Server`; a digit never starts a new part, so `a1b2c3d4` and
//! `v2` stay whole). Each part is a token at its own position; a compound of two or more
//! parts is also a token whole, at its first part's position, so `bd-q3fy`, `src/foo_bar.rs`,
//! `snake_case_name` and `CamelCase` are found as typed, and as their words. Tokens are
//! lowercased (`str::to_lowercase`); tokens longer than [`MAX_TOKEN`] bytes are not indexed
//! (their position still counts). One pass, linear in the text, no recursion.

/// The longest token indexed, in bytes (a longer one keeps its position, unindexed).
pub const MAX_TOKEN: usize = 128;

/// One token: its lowercased text, byte range and position, and whether it is a whole compound. A
/// whole compound (of 2+ parts) rather than a part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tok {
    pub text: String,
    pub from: usize,
    pub to: usize,
    pub pos: usize,
    pub whole: bool,
}

#[inline]
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

#[inline]
fn is_joiner(c: char) -> bool {
    matches!(
        c,
        '-' | '.' | '/' | ':' | '@' | '#' | '~' | '+' | '\\' | '='
    )
}

/// The compound starting at or after byte `from` of `text`: `(start, end, resume)`, `resume`
/// where the scan for the next one goes on. One forward scan; ASCII bytes are classed without
/// decoding.
#[inline]
fn next_compound(text: &str, from: usize) -> Option<(usize, usize, usize)> {
    let b = text.as_bytes();
    let mut i = from;
    let mut start: Option<usize> = None;
    // end of the last word char of the current compound
    let mut last_word_end = 0;
    while i < b.len() {
        let (word, joiner, len) = if b[i] < 0x80 {
            let c = b[i];
            (
                c.is_ascii_alphanumeric() || c == b'_',
                is_joiner(c as char),
                1,
            )
        } else {
            let c = text[i..].chars().next().expect("a char boundary");
            (is_word(c), false, c.len_utf8())
        };
        if word {
            if start.is_none() {
                start = Some(i);
            }
            last_word_end = i + len;
        } else if joiner && start.is_some() {
            // a joiner continues the compound only if a word char follows
        } else if let Some(s) = start {
            return Some((s, last_word_end, i + len));
        }
        i += len;
    }
    start.map(|s| (s, last_word_end, b.len()))
}

/// The compounds of `text`: byte ranges, in order.
pub fn compounds(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some((a, b, next)) = next_compound(text, at) {
        out.push((a, b));
        at = next;
    }
    out
}

/// A char's class for the part split: 0 not alphanumeric, 1 lower or other, 2 upper, 3 digit.
#[inline]
fn class_of(c: char) -> u8 {
    if c.is_ascii() {
        match c {
            'a'..='z' => 1,
            'A'..='Z' => 2,
            '0'..='9' => 3,
            _ => 0,
        }
    } else if !c.is_alphanumeric() {
        0
    } else if c.is_uppercase() {
        2
    } else if c.is_numeric() {
        3
    } else {
        1
    }
}

/// The parts of the compound `text[from..to]`: byte ranges in `text`.
pub fn parts(text: &str, from: usize, to: usize, out: &mut Vec<(usize, usize)>) {
    let s = &text[from..to];
    let mut start: Option<usize> = None;
    // previous char's class: 0 none/sep, 1 lower or other, 2 upper, 3 digit
    let mut prev = 0u8;
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let class = class_of(c);
        if class == 0 {
            if let Some(st) = start.take() {
                out.push((from + st, from + i));
            }
            prev = 0;
            continue;
        }
        if let Some(st) = start {
            let split = match (prev, class) {
                (1, 2) | (3, 2) => true,
                // an upper run followed by upper+lower: `HTTPServer` splits before `S`
                (2, 2) => matches!(it.peek(), Some(&(_, n)) if n.is_lowercase()),
                _ => false,
            };
            if split {
                out.push((from + st, from + i));
                start = Some(i);
            }
        } else {
            start = Some(i);
        }
        prev = class;
    }
    if let Some(st) = start {
        out.push((from + st, to));
    }
}

/// Writes `s` lowercased (`str::to_lowercase`) into `out`, reusing its buffer.
#[inline]
pub fn lower_into(s: &str, out: &mut String) {
    out.clear();
    if s.is_ascii() {
        out.push_str(s);
        out.make_ascii_lowercase();
    } else {
        out.push_str(&s.to_lowercase());
    }
}

/// The token walk without the tokens' text: byte ranges and positions.
///
/// Whole compounds and parts, in position order. No allocation once `parts` has grown.
pub struct Walk<'t> {
    text: &'t str,
    wholes: bool,
    at: usize,
    pos: usize,
    parts: Vec<(usize, usize)>,
    next_part: usize,
    whole: Option<(usize, usize)>,
}

impl<'t> Walk<'t> {
    pub fn new(text: &'t str, wholes: bool) -> Self {
        Self::with_buf(text, wholes, Vec::new())
    }

    /// As [`Walk::new`], reusing `parts` (its contents are dropped).
    pub fn with_buf(text: &'t str, wholes: bool, mut parts: Vec<(usize, usize)>) -> Self {
        parts.clear();
        Walk {
            text,
            wholes,
            at: 0,
            pos: 0,
            parts,
            next_part: 0,
            whole: None,
        }
    }

    /// The parts buffer back, for reuse.
    pub fn into_buf(self) -> Vec<(usize, usize)> {
        self.parts
    }

    /// The next token: `(from, to, pos, whole)`.
    #[inline]
    pub fn next_range(&mut self) -> Option<(usize, usize, usize, bool)> {
        loop {
            if let Some((a, b)) = self.whole.take() {
                return Some((a, b, self.pos, true));
            }
            if self.next_part < self.parts.len() {
                let (x, y) = self.parts[self.next_part];
                self.next_part += 1;
                let pos = self.pos;
                self.pos += 1;
                if y - x <= MAX_TOKEN {
                    return Some((x, y, pos, false));
                }
                continue;
            }
            let (a, b, next) = next_compound(self.text, self.at)?;
            self.at = next;
            self.parts.clear();
            self.next_part = 0;
            parts(self.text, a, b, &mut self.parts);
            if self.wholes && self.parts.len() > 1 && b - a <= MAX_TOKEN {
                self.whole = Some((a, b));
            }
        }
    }
}

/// Every token of `text`, in position order (a whole compound before its first part).
/// `wholes`: emit whole compounds (the index and snippets do; a phrase query does not).
pub fn tokens(text: &str, wholes: bool, mut f: impl FnMut(Tok)) {
    let mut w = Walk::new(text, wholes);
    while let Some((from, to, pos, whole)) = w.next_range() {
        f(Tok {
            text: text[from..to].to_lowercase(),
            from,
            to,
            pos,
            whole,
        });
    }
}

// The same tokens for Tantivy, in a file of their own: the WebAssembly build of the matcher
// (`rust/wasm/search.rs`, for the HTML view) compiles this file without Tantivy.
#[cfg(not(target_arch = "wasm32"))]
#[path = "tantivy_tokenizer.rs"]
mod tantivy_tokenizer;
#[cfg(not(target_arch = "wasm32"))]
pub use tantivy_tokenizer::{SearchTokenStream, SearchTokenizer, TOKENIZER};

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<(String, usize, bool)> {
        let mut v = Vec::new();
        tokens(text, true, |t| v.push((t.text, t.pos, t.whole)));
        v
    }

    #[test]
    fn ids_paths_and_identifiers_whole_and_split() {
        let t = all("see bd-q3fy in src/foo_bar.rs, a1b2c3d4 CamelCase HTTPServer.");
        let s = |x: &str, p: usize, w: bool| (x.to_string(), p, w);
        assert_eq!(
            t,
            vec![
                s("see", 0, false),
                s("bd-q3fy", 1, true),
                s("bd", 1, false),
                s("q3fy", 2, false),
                s("in", 3, false),
                s("src/foo_bar.rs", 4, true),
                s("src", 4, false),
                s("foo", 5, false),
                s("bar", 6, false),
                s("rs", 7, false),
                s("a1b2c3d4", 8, false),
                s("camelcase", 9, true),
                s("camel", 9, false),
                s("case", 10, false),
                s("httpserver", 11, true),
                s("http", 11, false),
                s("server", 12, false),
            ]
        );
    }

    #[test]
    fn joiners_at_the_ends_are_dropped_and_unicode_lowercases() {
        let t = all("--/usr/lib/ Ärger...");
        assert_eq!(t[0].0, "usr/lib");
        assert_eq!(t.last().unwrap().0, "ärger");
    }

    #[test]
    fn long_tokens_keep_their_position() {
        let long = "x".repeat(MAX_TOKEN + 1);
        let t = all(&format!("{long} after"));
        assert_eq!(t, vec![("after".to_string(), 1, false)]);
    }
}
