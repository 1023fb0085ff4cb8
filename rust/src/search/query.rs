//! The query language, parsed once into [`Query`]: it builds the Tantivy query and re-checks hits.
//! A hit is returned only when its text, read back from the session file, still matches.
//!
//! Syntax: whitespace-separated items, all required (AND); `"an exact phrase"`; `a OR b`
//! (OR binds tighter than the implicit AND: `x a OR b` is `x AND (a OR b)`); `-item` excludes;
//! `word*` is a prefix. A word is cut by the tokenizer (`tokenize.rs`): a compound such as
//! `bd-q3fy` or `src/foo_bar.rs` matches its parts in sequence and ranks higher where it
//! occurs whole. Case-insensitive. Errors ([`QueryError`]): an empty query, an unterminated
//! quote, `OR` without an item on both sides, a negated item inside an OR, a query of only
//! negated items, a bare `*`.

use super::tokenize::{compounds, parts, tokens, Walk};

/// A bad query: one line saying what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError(pub String);

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad query: {}", self.0)
    }
}
impl std::error::Error for QueryError {}

/// A sequence of parts at relative positions; the last one a prefix when `prefix`. `whole` the
/// compound as typed (lowercased) when the matcher came from one word of 2+ parts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Matcher {
    pub parts: Vec<(usize, String)>,
    pub whole: Option<String>,
    pub prefix: bool,
}

/// One required (or, `neg`, excluded) item: any of `alts`, each a conjunction of matchers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Clause {
    pub alts: Vec<Vec<Matcher>>,
    pub neg: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub clauses: Vec<Clause>,
}

enum Lex {
    Item {
        text: String,
        phrase: bool,
        neg: bool,
    },
    Or,
}

fn lex(q: &str) -> Result<Vec<Lex>, QueryError> {
    let mut out = Vec::new();
    let cs: Vec<char> = q.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        if cs[i].is_whitespace() {
            i += 1;
            continue;
        }
        let mut neg = false;
        if cs[i] == '-' && i + 1 < cs.len() && !cs[i + 1].is_whitespace() {
            neg = true;
            i += 1;
        }
        if cs[i] == '"' {
            let start = i + 1;
            let len = match cs[start..].iter().position(|&c| c == '"') {
                Some(len) => len,
                None => return Err(QueryError("a quote is not closed".into())),
            };
            out.push(Lex::Item {
                text: cs[start..start + len].iter().collect(),
                phrase: true,
                neg,
            });
            i = start + len + 1;
            continue;
        }
        let start = i;
        while i < cs.len() && !cs[i].is_whitespace() && cs[i] != '"' {
            i += 1;
        }
        let text: String = cs[start..i].iter().collect();
        if text == "OR" && !neg {
            out.push(Lex::Or);
        } else {
            out.push(Lex::Item {
                text,
                phrase: false,
                neg,
            });
        }
    }
    Ok(out)
}

fn phrase_matcher(text: &str) -> Option<Matcher> {
    let mut ps = Vec::new();
    tokens(text, false, |t| ps.push((t.pos, t.text)));
    let first = ps.first()?.0;
    for p in &mut ps {
        p.0 -= first;
    }
    Some(Matcher {
        parts: ps,
        whole: None,
        prefix: false,
    })
}

/// The matchers of one word (one per compound; `prefix` applies to the last).
fn word_matchers(text: &str, prefix: bool) -> Vec<Matcher> {
    let cs = compounds(text);
    let n = cs.len();
    let mut out = Vec::new();
    let mut ps = Vec::new();
    for (k, (a, b)) in cs.into_iter().enumerate() {
        ps.clear();
        parts(text, a, b, &mut ps);
        let mut m = Matcher {
            parts: ps
                .iter()
                .enumerate()
                .filter(|(_, &(x, y))| y - x <= super::tokenize::MAX_TOKEN)
                .map(|(i, &(x, y))| (i, text[x..y].to_lowercase()))
                .collect(),
            whole: (ps.len() > 1 && b - a <= super::tokenize::MAX_TOKEN)
                .then(|| text[a..b].to_lowercase()),
            prefix: prefix && k + 1 == n,
        };
        if m.parts.is_empty() {
            continue;
        }
        // a prefix whose last part was too long to index: no prefix left to match
        if m.prefix && matches!(m.parts.last(), Some(p) if p.0 + 1 != ps.len()) {
            m.prefix = false;
        }
        let first = m.parts[0].0;
        for p in &mut m.parts {
            p.0 -= first;
        }
        out.push(m);
    }
    out
}

/// Parses `q` (see the module docs).
pub fn parse(q: &str) -> Result<Query, QueryError> {
    let lexes = lex(q)?;
    let mut clauses: Vec<Clause> = Vec::new();
    let mut pending_or = false;
    for l in lexes {
        match l {
            Lex::Or => {
                if pending_or || clauses.is_empty() {
                    return Err(QueryError("OR needs an item on each side".into()));
                }
                if matches!(clauses.last(), Some(c) if c.neg) {
                    return Err(QueryError("a negated item cannot be part of an OR".into()));
                }
                pending_or = true;
            }
            Lex::Item { text, phrase, neg } => {
                let alt = if phrase {
                    phrase_matcher(&text).into_iter().collect::<Vec<_>>()
                } else {
                    let prefix = text.ends_with('*');
                    let body = text.trim_end_matches('*');
                    if prefix && compounds(body).is_empty() {
                        return Err(QueryError(format!(
                            "{text:?}: a prefix needs letters or digits before the *"
                        )));
                    }
                    word_matchers(body, prefix)
                };
                if pending_or {
                    if neg {
                        return Err(QueryError("a negated item cannot be part of an OR".into()));
                    }
                    pending_or = false;
                    let last = clauses.last_mut().expect("OR follows an item");
                    if !alt.is_empty() {
                        last.alts.push(alt);
                    }
                } else {
                    clauses.push(Clause {
                        alts: if alt.is_empty() { vec![] } else { vec![alt] },
                        neg,
                    });
                }
            }
        }
    }
    if pending_or {
        return Err(QueryError("OR needs an item on each side".into()));
    }
    clauses.retain(|c| !c.alts.is_empty());
    if clauses.is_empty() {
        return Err(QueryError(format!("nothing to search for in {q:?}")));
    }
    if clauses.iter().all(|c| c.neg) {
        return Err(QueryError(
            "a query needs at least one item that is not negated".into(),
        ));
    }
    Ok(Query { clauses })
}

/// The tokens of a text for matching, as the index holds them. (position, lowercased text, byte
/// range), parts and whole compounds (a whole at its first part's position), so a query matches a
/// text here exactly when Tantivy's phrase and term queries match its document.
pub struct TextParts {
    /// (position, the lowercased text's range in `low`, the byte range in the text)
    toks: Vec<(usize, (usize, usize), usize, usize)>,
    /// every token's lowercased text, one after another (one buffer, not one per token)
    low: String,
}

impl TextParts {
    pub fn new(text: &str) -> Self {
        let mut toks = Vec::new();
        let mut low = String::with_capacity(text.len() + text.len() / 4);
        let mut w = Walk::new(text, true);
        while let Some((from, to, pos, _)) = w.next_range() {
            let a = low.len();
            let s = &text[from..to];
            if s.is_ascii() {
                low.push_str(s);
                low[a..].make_ascii_lowercase();
            } else {
                low.push_str(&s.to_lowercase());
            }
            toks.push((pos, (a, low.len()), from, to));
        }
        TextParts { toks, low }
    }
    fn text(&self, r: (usize, usize)) -> &str {
        &self.low[r.0..r.1]
    }
    fn at(&self, pos: usize) -> &[(usize, (usize, usize), usize, usize)] {
        let lo = self.toks.partition_point(|t| t.0 < pos);
        let hi = self.toks.partition_point(|t| t.0 <= pos);
        &self.toks[lo..hi]
    }
    /// Byte ranges of every occurrence of `m`.
    pub fn find(&self, m: &Matcher) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let last = m.parts.len() - 1;
        let ok = |k: usize, s: &str| {
            if m.prefix && k == last {
                s.starts_with(m.parts[k].1.as_str())
            } else {
                s == m.parts[k].1
            }
        };
        for t in &self.toks {
            let tt = self.text(t.1);
            if let Some(w) = &m.whole {
                let hit = if m.prefix {
                    tt.starts_with(w.as_str())
                } else {
                    tt == w.as_str()
                };
                if hit {
                    out.push((t.2, t.3));
                    continue;
                }
            }
            if !ok(0, tt) {
                continue;
            }
            let mut end = t.3;
            let mut all = true;
            for k in 1..=last {
                match self
                    .at(t.0 + m.parts[k].0)
                    .iter()
                    .find(|u| ok(k, self.text(u.1)))
                {
                    Some(u) => end = end.max(u.3),
                    None => {
                        all = false;
                        break;
                    }
                }
            }
            if all {
                out.push((t.2, end));
            }
        }
        out
    }
    fn has(&self, alt: &[Matcher]) -> bool {
        alt.iter().all(|m| !self.find(m).is_empty())
    }
}

impl Query {
    /// Whether `text` matches the whole query (the oracle a hit is checked against).
    pub fn matches(&self, tp: &TextParts) -> bool {
        self.clauses
            .iter()
            .all(|c| c.alts.iter().any(|a| tp.has(a)) != c.neg)
    }
    /// Byte ranges of every match of the query's positive items, sorted.
    pub fn spans(&self, tp: &TextParts) -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = self
            .clauses
            .iter()
            .filter(|c| !c.neg)
            .flat_map(|c| c.alts.iter().flatten())
            .flat_map(|m| tp.find(m))
            .collect();
        v.sort_unstable();
        // overlapping matches (a whole compound and its first part) as one
        let mut out: Vec<(usize, usize)> = Vec::with_capacity(v.len());
        for (a, b) in v {
            match out.last_mut() {
                Some(l) if a < l.1 => l.1 = l.1.max(b),
                _ => out.push((a, b)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(q: &str, text: &str) -> bool {
        parse(q).unwrap().matches(&TextParts::new(text))
    }

    #[test]
    fn forms() {
        assert!(m("alpha beta", "Beta then ALPHA"));
        assert!(!m("alpha beta", "alpha only"));
        assert!(m("\"alpha beta\"", "x alpha beta y"));
        assert!(!m("\"alpha beta\"", "beta alpha"));
        assert!(m("alpha OR gamma", "gamma"));
        assert!(m("x alpha OR gamma", "x gamma"));
        assert!(!m("x alpha OR gamma", "gamma"));
        assert!(!m("alpha -beta", "alpha beta"));
        assert!(m("alpha -beta", "alpha"));
        assert!(m("alph*", "alphabet"));
        assert!(m("bd-q3fy", "see bd-q3fy."));
        assert!(!m("bd-q3fy", "see bd-q3fz."));
        assert!(m("src/foo_bar.rs", "open /src/foo_bar.rs now"));
        assert!(m("snake_case_name", "a snake_case_name"));
        assert!(m("CamelCase", "camelcase"));
        assert!(m("camelcase", "CamelCase"));
        assert!(m("camel", "CamelCase"));
        assert!(m("src/foo*", "src/foobar.rs"));
    }

    #[test]
    fn errors() {
        for q in [
            "",
            "   ",
            "\"open",
            "OR a",
            "a OR",
            "a OR OR b",
            "-a",
            "-a OR b",
            "a OR -b",
            "*",
            "!!!",
        ] {
            assert!(parse(q).is_err(), "{q:?} should be an error");
        }
    }

    #[test]
    fn spans_are_byte_ranges() {
        let q = parse("\"foo bar\" baz").unwrap();
        let t = "x foo_bar baz";
        assert_eq!(q.spans(&TextParts::new(t)), vec![(2, 9), (10, 13)]);
    }
}
