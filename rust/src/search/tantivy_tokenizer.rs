//! The search tokenizer as a Tantivy tokenizer.
//!
//! The same tokens as [`super::Walk`] (with wholes), registered as [`TOKENIZER`] on the index's
//! text field, produced by a faster walk: a compound of ASCII bytes is found, split into parts
//! and lowercased in one pass over its bytes with a class table, no `char` decoding; a compound
//! with any other byte goes through [`super::next_compound`] and [`super::parts`] as before.
//! Not compiled into the WebAssembly matcher (which uses [`super::Walk`]); the tests below check
//! the two walks agree token for token.

use super::{lower_into, next_compound, parts, MAX_TOKEN};

/// The same tokens for Tantivy (registered as [`TOKENIZER`] on the text field). Streams them:
/// one [`tantivy::tokenizer::Token`] whose text buffer is reused.
#[derive(Clone, Default)]
pub struct SearchTokenizer {
    token: tantivy::tokenizer::Token,
    parts: Vec<(usize, usize)>,
}

/// The name the text field's tokenizer is registered under.
pub const TOKENIZER: &str = "sessiontree";

// An ASCII byte's class: the part-split classes of `super::class_of` (0 other, 1 lower,
// 2 upper, 3 digit) plus `_` (a word byte of class 0) and the joiners.
const SEP: u8 = 0;
const LOWER: u8 = 1;
const UPPER: u8 = 2;
const DIGIT: u8 = 3;
const UNDER: u8 = 4;
const JOIN: u8 = 5;
// a byte >= 0x80: the compound is walked by the general code
const WIDE: u8 = 6;

const fn class_table() -> [u8; 256] {
    let mut t = [WIDE; 256];
    let mut i = 0;
    while i < 128 {
        let c = i as u8;
        t[i] = if c.is_ascii_lowercase() {
            LOWER
        } else if c.is_ascii_uppercase() {
            UPPER
        } else if c.is_ascii_digit() {
            DIGIT
        } else if c == b'_' {
            UNDER
        } else if matches!(
            c,
            b'-' | b'.' | b'/' | b':' | b'@' | b'#' | b'~' | b'+' | b'\\' | b'='
        ) {
            JOIN
        } else {
            SEP
        };
        i += 1;
    }
    t
}

static CLASS: [u8; 256] = class_table();

/// The next compound at or after byte `at`: `(start, end, resume, ascii)`, its parts in `out`
/// (cleared first). `ascii`: every byte of the compound is ASCII (false: not known).
#[inline]
fn next_split(
    text: &str,
    at: usize,
    out: &mut Vec<(usize, usize)>,
) -> Option<(usize, usize, usize, bool)> {
    let b = text.as_bytes();
    let n = b.len();
    let mut i = at;
    out.clear();
    // the compound's first byte: skip ASCII separators and joiners
    loop {
        if i >= n {
            return None;
        }
        let c = CLASS[b[i] as usize];
        if c == WIDE {
            return slow(text, i, out);
        }
        if (LOWER..=UNDER).contains(&c) {
            break;
        }
        i += 1;
    }
    let start = i;
    let mut last_word_end = i;
    // the open part's start, or usize::MAX
    let mut part = usize::MAX;
    let mut prev = SEP;
    while i < n {
        let c = CLASS[b[i] as usize];
        match c {
            LOWER | DIGIT => {
                if part == usize::MAX {
                    part = i;
                }
                prev = c;
                last_word_end = i + 1;
            }
            UPPER => {
                if part == usize::MAX {
                    part = i;
                } else if prev == LOWER
                    || prev == DIGIT
                    || (prev == UPPER && i + 1 < n && CLASS[b[i + 1] as usize] == LOWER)
                {
                    out.push((part, i));
                    part = i;
                }
                prev = UPPER;
                last_word_end = i + 1;
            }
            UNDER => {
                if part != usize::MAX {
                    out.push((part, i));
                    part = usize::MAX;
                }
                prev = SEP;
                last_word_end = i + 1;
            }
            JOIN => {
                if part != usize::MAX {
                    out.push((part, i));
                    part = usize::MAX;
                }
                prev = SEP;
            }
            WIDE => return slow(text, start, out),
            _ => {
                // a separator ends the compound
                if part != usize::MAX {
                    out.push((part, i));
                }
                return Some((start, last_word_end, i + 1, true));
            }
        }
        i += 1;
    }
    if part != usize::MAX {
        out.push((part, n));
    }
    Some((start, last_word_end, n, true))
}

/// [`next_split`] by the general code: the compound at or after `at` and its parts.
#[cold]
fn slow(
    text: &str,
    at: usize,
    out: &mut Vec<(usize, usize)>,
) -> Option<(usize, usize, usize, bool)> {
    out.clear();
    let (a, b, next) = next_compound(text, at)?;
    parts(text, a, b, out);
    Some((a, b, next, false))
}

pub struct SearchTokenStream<'a> {
    text: &'a str,
    at: usize,
    pos: usize,
    next_part: usize,
    whole: Option<(usize, usize)>,
    // the current compound is ASCII: its tokens lowercase byte by byte
    ascii: bool,
    token: &'a mut tantivy::tokenizer::Token,
    parts: &'a mut Vec<(usize, usize)>,
}

impl tantivy::tokenizer::Tokenizer for SearchTokenizer {
    type TokenStream<'a> = SearchTokenStream<'a>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> SearchTokenStream<'a> {
        self.token.text.clear();
        self.token.position = usize::MAX;
        self.token.position_length = 1;
        self.parts.clear();
        SearchTokenStream {
            text,
            at: 0,
            pos: 0,
            next_part: 0,
            whole: None,
            ascii: false,
            token: &mut self.token,
            parts: &mut self.parts,
        }
    }
}

impl SearchTokenStream<'_> {
    #[inline]
    fn emit(&mut self, from: usize, to: usize, pos: usize) {
        let s = &self.text[from..to];
        if self.ascii {
            let t = &mut self.token.text;
            t.clear();
            t.push_str(s);
            t.make_ascii_lowercase();
        } else {
            lower_into(s, &mut self.token.text);
        }
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.position = pos;
    }
}

impl tantivy::tokenizer::TokenStream for SearchTokenStream<'_> {
    fn advance(&mut self) -> bool {
        loop {
            if let Some((a, b)) = self.whole.take() {
                let pos = self.pos;
                self.emit(a, b, pos);
                return true;
            }
            if self.next_part < self.parts.len() {
                let (x, y) = self.parts[self.next_part];
                self.next_part += 1;
                let pos = self.pos;
                self.pos += 1;
                if y - x <= MAX_TOKEN {
                    self.emit(x, y, pos);
                    return true;
                }
                continue;
            }
            let (a, b, next, ascii) = match next_split(self.text, self.at, self.parts) {
                Some(c) => c,
                None => return false,
            };
            self.at = next;
            self.ascii = ascii;
            self.next_part = 0;
            if self.parts.len() > 1 && b - a <= MAX_TOKEN {
                self.whole = Some((a, b));
            }
        }
    }
    fn token(&self) -> &tantivy::tokenizer::Token {
        self.token
    }
    fn token_mut(&mut self) -> &mut tantivy::tokenizer::Token {
        self.token
    }
}

#[cfg(test)]
mod tests {
    use super::super::{lower_into, Walk};
    use super::*;
    use tantivy::tokenizer::{TokenStream, Tokenizer};

    type Seen = Vec<(String, usize, usize, usize)>;

    /// The oracle: [`Walk`] (the matcher's and the snippets' walk) lowercased as before.
    fn walked(text: &str) -> Seen {
        let mut w = Walk::new(text, true);
        let mut v = Vec::new();
        let mut s = String::new();
        while let Some((from, to, pos, _)) = w.next_range() {
            lower_into(&text[from..to], &mut s);
            v.push((s.clone(), from, to, pos));
        }
        v
    }

    fn streamed(tk: &mut SearchTokenizer, text: &str) -> Seen {
        let mut st = tk.token_stream(text);
        let mut v = Vec::new();
        while st.advance() {
            let t = st.token();
            assert_eq!(t.position_length, 1);
            v.push((t.text.clone(), t.offset_from, t.offset_to, t.position));
        }
        v
    }

    fn same(tk: &mut SearchTokenizer, text: &str) {
        let (a, b) = (walked(text), streamed(tk, text));
        if a != b {
            let i = a
                .iter()
                .zip(&b)
                .position(|(x, y)| x != y)
                .unwrap_or(a.len().min(b.len()));
            panic!(
                "tokens differ at {i} ({} vs {} tokens): walk {:?}, stream {:?}; text {:?}",
                a.len(),
                b.len(),
                a.get(i),
                b.get(i),
                text.chars().take(200).collect::<String>()
            );
        }
    }

    use crate::TestRng as Rng;

    // ASCII of every class, and the characters Unicode case and class rules trip on: Kelvin
    // sign, Turkish dotted/dotless i, sharp s, a titlecase digraph, combining marks, emoji (and
    // a ZWJ sequence), non-ASCII digits and numerics, full-width letters, CJK, NUL, a BOM.
    const PIECES: &[&str] = &[
        "a",
        "z",
        "A",
        "Z",
        "0",
        "9",
        "_",
        "-",
        ".",
        "/",
        ":",
        "@",
        "#",
        "~",
        "+",
        "\\",
        "=",
        " ",
        "\n",
        "\t",
        ",",
        ";",
        "'",
        "\"",
        "(",
        ")",
        "!",
        "*",
        "\u{212A}",
        "\u{130}",
        "\u{131}",
        "ß",
        "ẞ",
        "\u{1C5}",
        "\u{301}",
        "e\u{301}",
        "\u{308}",
        "😀",
        "👩\u{200D}💻",
        "٣",
        "²",
        "Ⅻ",
        "Ａ",
        "ａ",
        "中",
        "\u{0}",
        "\u{FEFF}",
        "Σ",
        "ς",
        "É",
        "é",
        "—",
        "’",
        "\u{10FFFF}",
        "ǅ",
        "HTTP",
        "Server",
        "fooBar",
        "bd-q3fy",
        "src/foo_bar.rs",
        "a1b2c3d4",
        "ABc",
        "x9Y",
    ];

    fn random_text(r: &mut Rng) -> String {
        let n = r.below(40);
        let mut s = String::new();
        for _ in 0..n {
            match r.below(8) {
                0 => {
                    // any scalar value
                    let c = loop {
                        if let Some(c) = char::from_u32(r.below(0x11_0000) as u32) {
                            break c;
                        }
                    };
                    s.push(c);
                }
                1 => s.push((r.below(128) as u8) as char),
                _ => s.push_str(PIECES[r.below(PIECES.len())]),
            }
        }
        s
    }

    #[test]
    fn the_stream_matches_the_walk_on_random_text() {
        let mut tk = SearchTokenizer::default();
        let mut r = Rng(0x5EED_F00D_70C5);
        for _ in 0..200_000 {
            let t = random_text(&mut r);
            same(&mut tk, &t);
        }
    }

    #[test]
    fn the_stream_matches_the_walk_on_hostile_text() {
        let mut tk = SearchTokenizer::default();
        let long_word = "a".repeat(100_000);
        let at_max = "b".repeat(MAX_TOKEN);
        let over_max = "c".repeat(MAX_TOKEN + 1);
        let caps = "X".repeat(MAX_TOKEN + 5);
        let texts = [
            String::new(),
            long_word.clone(),
            format!("{long_word} tail"),
            format!("{at_max}-{at_max} {at_max}_x {over_max}.y x/{over_max}"),
            format!("{caps}y {caps}"),
            "a-".repeat(50_000),
            "-_-_".repeat(10_000),
            "e\u{301}".repeat(10_000),
            "\u{212A}elvin \u{212A}ELVIN K\u{212A}k".to_string(),
            "İstanbul ıi Iı İI DİYARBAKIR".to_string(),
            "😀😀 a😀b 👩\u{200D}💻x".to_string(),
            "HTTPServer ABé ABC€ fooÄr xÉy ǅx ǅ ΣΑΣ".to_string(),
            "trailing joiners--- /leading ==mid==dle== _under_ __ _".to_string(),
            "line\n".repeat(20_000),
        ];
        for t in &texts {
            same(&mut tk, t);
        }
    }

    #[test]
    fn the_stream_matches_the_walk_on_the_corpus() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
        let mut tk = SearchTokenizer::default();
        let mut stack = vec![root];
        let mut lines = 0;
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("the corpus") {
                let p = e.expect("an entry").path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    let bytes = std::fs::read(&p).expect("a corpus file");
                    for line in bytes.split(|&c| c == b'\n') {
                        if let Some(x) = crate::search::extract::extract(line) {
                            same(&mut tk, &x.text);
                            lines += 1;
                        }
                        same(&mut tk, &String::from_utf8_lossy(line));
                    }
                }
            }
        }
        assert!(lines > 1000, "only {lines} corpus lines");
    }

    /// Throughput of the walk (lowercased, as the index used it) and the stream over the
    /// corpus's extracted text: `cargo test --profile dev-fast -- --ignored --nocapture speed`.
    #[test]
    #[ignore]
    fn speed() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
        let mut texts = Vec::new();
        let mut stack = vec![root];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("the corpus") {
                let p = e.expect("an entry").path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    for line in std::fs::read(&p).expect("a file").split(|&c| c == b'\n') {
                        if let Some(x) = crate::search::extract::extract(line) {
                            texts.push(x.text);
                        }
                    }
                }
            }
        }
        let bytes: usize = texts.iter().map(|t| t.len()).sum();
        let mut tk = SearchTokenizer::default();
        for round in 0..3 {
            let t0 = std::time::Instant::now();
            let mut n = 0usize;
            let mut w = Walk::new("", true);
            let mut s = String::new();
            for t in &texts {
                w = Walk::with_buf(t, true, w.into_buf());
                while let Some((from, to, _, _)) = w.next_range() {
                    lower_into(&t[from..to], &mut s);
                    n += s.len();
                }
            }
            let walk = t0.elapsed();
            let t0 = std::time::Instant::now();
            let mut m = 0usize;
            for t in &texts {
                let mut st = tk.token_stream(t);
                while st.advance() {
                    m += st.token().text.len();
                }
            }
            let stream = t0.elapsed();
            assert_eq!(n, m);
            eprintln!(
                "round {round}: {bytes} bytes; walk {:.1} MB/s, stream {:.1} MB/s",
                bytes as f64 / walk.as_secs_f64() / 1e6,
                bytes as f64 / stream.as_secs_f64() / 1e6
            );
        }
    }
}
