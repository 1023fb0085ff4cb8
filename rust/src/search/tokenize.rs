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

/// The compounds of `text`: byte ranges, in order.
pub fn compounds(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    // end of the last word char of the current compound
    let mut last_word_end = 0;
    for (i, c) in text.char_indices() {
        if is_word(c) {
            if start.is_none() {
                start = Some(i);
            }
            last_word_end = i + c.len_utf8();
        } else if is_joiner(c) && start.is_some() {
            // a joiner continues the compound only if a word char follows (checked later)
        } else if let Some(s) = start.take() {
            out.push((s, last_word_end));
        }
    }
    if let Some(s) = start {
        out.push((s, last_word_end));
    }
    out
}

/// The parts of the compound `text[from..to]`: byte ranges in `text`.
pub fn parts(text: &str, from: usize, to: usize, out: &mut Vec<(usize, usize)>) {
    let s = &text[from..to];
    let mut start: Option<usize> = None;
    // previous char's class: 0 none/sep, 1 lower or other, 2 upper, 3 digit
    let mut prev = 0u8;
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if !c.is_alphanumeric() {
            if let Some(st) = start.take() {
                out.push((from + st, from + i));
            }
            prev = 0;
            continue;
        }
        let class = if c.is_uppercase() {
            2
        } else if c.is_numeric() {
            3
        } else {
            1
        };
        if let Some(st) = start {
            let split = match (prev, class) {
                (1, 2) | (3, 2) => true,
                // an upper run followed by upper+lower: `HTTPServer` splits before `S`
                (2, 2) => it.peek().is_some_and(|&(_, n)| n.is_lowercase()),
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

/// Every token of `text`, in position order (a whole compound before its first part).
/// `wholes`: emit whole compounds (the index and snippets do; a phrase query does not).
pub fn tokens(text: &str, wholes: bool, mut f: impl FnMut(Tok)) {
    let mut pos = 0usize;
    let mut ps = Vec::new();
    for (a, b) in compounds(text) {
        ps.clear();
        parts(text, a, b, &mut ps);
        if ps.is_empty() {
            continue;
        }
        if wholes && ps.len() > 1 && b - a <= MAX_TOKEN {
            f(Tok {
                text: text[a..b].to_lowercase(),
                from: a,
                to: b,
                pos,
                whole: true,
            });
        }
        for &(x, y) in &ps {
            if y - x <= MAX_TOKEN {
                f(Tok {
                    text: text[x..y].to_lowercase(),
                    from: x,
                    to: y,
                    pos,
                    whole: false,
                });
            }
            pos += 1;
        }
    }
}

/// The same tokens for Tantivy (registered as [`TOKENIZER`] on the text field).
#[derive(Clone, Default)]
pub struct SearchTokenizer {
    buf: Vec<tantivy::tokenizer::Token>,
}

/// The name the text field's tokenizer is registered under.
pub const TOKENIZER: &str = "sessiontree";

pub struct SearchTokenStream<'a> {
    toks: &'a [tantivy::tokenizer::Token],
    i: usize,
}

impl tantivy::tokenizer::Tokenizer for SearchTokenizer {
    type TokenStream<'a> = SearchTokenStream<'a>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> SearchTokenStream<'a> {
        self.buf.clear();
        let buf = &mut self.buf;
        tokens(text, true, |t| {
            buf.push(tantivy::tokenizer::Token {
                offset_from: t.from,
                offset_to: t.to,
                position: t.pos,
                text: t.text,
                position_length: 1,
            })
        });
        SearchTokenStream {
            toks: &self.buf,
            i: 0,
        }
    }
}

impl tantivy::tokenizer::TokenStream for SearchTokenStream<'_> {
    fn advance(&mut self) -> bool {
        if self.i < self.toks.len() {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn token(&self) -> &tantivy::tokenizer::Token {
        &self.toks[self.i - 1]
    }
    fn token_mut(&mut self) -> &mut tantivy::tokenizer::Token {
        unreachable!("the search tokenizer's stream is read only")
    }
}

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
