//! Secret scrubbing over raw session lines.
//!
//! Find credentials in every JSON string of a line (keys too), replace each with
//! `[REDACTED:<kind>:<hash6>]`, and write the line back as `JSON.stringify` would, leaving the tree
//! (ids, parents, order) untouched.
//!
//! How a line is read (cost follows the work):
//! 1. one Aho-Corasick pass over the raw bytes for the rules' literals ([`rules::RULES`]);
//!    most lines have none and are copied as they are;
//! 2. a line with a hit is checked by the core's JSON reader ([`crate::json::LineParser`]) and
//!    walked iteratively (no recursion, any depth): each string body is found with the core's
//!    string scanner; only a string holding a hit (or an escape that could hide one) is decoded
//!    and searched, by the rules its hits name (the `regex` crate: linear time);
//! 3. a replaced string is re-encoded as `JSON.stringify` writes it; everything else keeps its
//!    bytes. A line that is not JSON (a torn last line) is searched as raw text and its
//!    matches replaced in place (the placeholder holds no JSON-special byte).
//!
//! Values are never logged or returned: a finding carries the kind, where it was, and the
//! first 6 hex digits of the SHA-256 of the value.

pub mod rules;

use crate::json::{skip_string_body, LineParser, TopKind, Val};
use aho_corasick::AhoCorasick;
use regex::bytes::Regex;
use rules::{Check, RULES};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

/// What to do with provider replay fields (`thinkingSignature`, `textSignature`,
/// `thoughtSignature`). They hold opaque, often encrypted, data a provider checks on replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// left byte for byte as they are and not searched (a changed one breaks the replay)
    Keep,
    /// removed from the line
    Drop,
}

#[derive(Clone, Debug)]
pub struct Options {
    /// also search the header's `cwd` and `parentSession`
    pub header: bool,
    pub replay: Replay,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            header: false,
            replay: Replay::Keep,
        }
    }
}

/// One secret found (never its value).
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// 1-based line number in the input
    pub line: u64,
    /// the entry's `id` when the line is an entry with a string id
    pub entry_id: Option<String>,
    /// RFC 6901 pointer of the string (None: the line is not JSON)
    pub pointer: Option<String>,
    /// the secret is in an object key (then `pointer` names the member)
    pub in_key: bool,
    pub kind: &'static str,
    /// offsets in the decoded string, in Unicode code points (a lone surrogate counts one)
    pub start: usize,
    pub end: usize,
    /// first 6 hex digits of SHA-256 of the value (the placeholder's)
    pub hash: String,
}

const REPLAY_KEYS: [&[u8]; 3] = [b"thinkingSignature", b"textSignature", b"thoughtSignature"];
/// Top-level fields of an entry that hold the tree: never searched, never changed.
const TREE_KEYS: [&[u8]; 7] = [
    b"id",
    b"parentId",
    b"timestamp",
    b"type",
    b"firstKeptEntryId",
    b"fromId",
    b"targetId",
];

struct Engine {
    ac: AhoCorasick,
    /// per literal: the rules it makes candidates (a mask over [`RULES`])
    lit_mask: Vec<Mask>,
    res: Vec<Regex>,
    secret_name: Regex,
    password_name: Regex,
    /// [`rules::BENIGN_NAME`]
    benign_name: Regex,
    /// the rules made candidates by [`DOTTED_SIX`] (Discord bot tokens)
    dotted_mask: Mask,
}

/// Rules with no literal of their own, made candidates where two dots stand 7 bytes apart with
/// 6 token bytes (`[A-Za-z0-9_-]`) between them and 24 bytes or more before the first: the
/// middle part of a Discord bot token (`<base64 id>.<6>.<hmac>`).
const DOTTED_SIX: &[&str] = &["discord_bot_token"];

fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// The offsets of the first dot of each `.xxxxxx.` in `line` (see [`DOTTED_SIX`]): one
/// `memchr` pass over the dots, a constant check at each.
fn dotted_six(line: &[u8], mut push: impl FnMut(usize)) {
    for i in memchr::memchr_iter(b'.', line) {
        if i >= 24
            && line.get(i + 7) == Some(&b'.')
            && line[i + 1..i + 7].iter().all(|&b| token_byte(b))
        {
            push(i);
        }
    }
}

/// A set of rules: bit `r` is [`RULES`]`[r]`.
pub type Mask = u128;
const ALL: Mask = Mask::MAX;
/// Escapes `JSON.stringify` never writes (an escaped printable ASCII byte, `\/`).
///
/// Text written by another tool may hide a literal behind them, so a string holding one is searched
/// by all.
const HIDING_ESCAPES: [&str; 7] = [
    "\\u002", "\\u003", "\\u004", "\\u005", "\\u006", "\\u007", "\\/",
];

/// The prefilter's literals with the rules each makes candidates (a mask over [`RULES`]).
///
/// The rules' literals, their names followed by each of [`rules::NAME_ENDS`], and the escapes that
/// could hide a literal (which make every rule a candidate).
fn literals() -> (Vec<String>, Vec<Mask>) {
    let mut lits: Vec<String> = Vec::new();
    let mut masks: Vec<Mask> = Vec::new();
    let mut add = |l: String, m: Mask| {
        if let Some(k) = lits.iter().position(|x| *x == l) {
            masks[k] |= m;
        } else {
            lits.push(l);
            masks.push(m);
        }
    };
    for (r, rule) in RULES.iter().enumerate() {
        for &l in rule.lits {
            add(l.to_string(), 1 << r);
        }
        for &name in rule.names {
            for end in rules::NAME_ENDS {
                add(format!("{name}{end}"), 1 << r);
            }
        }
    }
    for l in HIDING_ESCAPES {
        add(l.to_string(), ALL);
    }
    (lits, masks)
}

#[cfg(test)]
fn lit_names() -> Vec<String> {
    literals().0
}

fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        assert!(RULES.len() <= Mask::BITS as usize);
        let (lits, lit_mask) = literals();
        let ac = AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::Standard)
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(&lits)
            .expect("scrub literals");
        let res = RULES
            .iter()
            .map(|r| Regex::new(&format!("(?-u){}", r.pattern)).expect("scrub rule"))
            .collect();
        Engine {
            ac,
            lit_mask,
            res,
            secret_name: Regex::new(&format!("(?-u){}", rules::SECRET_NAME)).unwrap(),
            password_name: Regex::new(r"(?-u)(?i)passw(?:or)?d|passphrase|pwd").unwrap(),
            benign_name: Regex::new(&format!("(?-u){}", rules::BENIGN_NAME)).unwrap(),
            dotted_mask: RULES
                .iter()
                .enumerate()
                .filter(|(_, r)| DOTTED_SIX.contains(&r.kind))
                .fold(0, |m, (k, _)| m | 1 << k),
        }
    })
}

/// The kinds the rules detect, in table order.
pub fn kinds() -> Vec<&'static str> {
    RULES.iter().map(|r| r.kind).collect()
}

pub fn hash6(value: &[u8]) -> String {
    let d = Sha256::digest(value);
    let mut s = String::with_capacity(6);
    for b in &d[..3] {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

// ---------------------------------------------------------------------------- checks

fn shannon(v: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    for &b in v {
        counts[b as usize] += 1;
    }
    let n = v.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

fn lower(v: &[u8]) -> Vec<u8> {
    v.to_ascii_lowercase()
}

fn contains(h: &[u8], n: &[u8]) -> bool {
    memchr::memmem::find(h, n).is_some()
}

/// A documented example or a placeholder.
///
/// `YOUR_API_KEY_HERE`, `<token>`, `${TOKEN}`, `xxxx`, `****`, `changeme`-style words,
/// `AKIAIOSFODNN7EXAMPLE`.
pub fn placeholder_like(v: &[u8]) -> bool {
    if v.is_empty() {
        return true;
    }
    if matches!(v[0], b'$' | b'<' | b'{' | b'%' | b'*' | b'[' | b'(' | b'@') {
        return true;
    }
    let l = lower(v);
    const WORDS: [&[u8]; 23] = [
        b"example",
        b"placeholder",
        b"your_",
        b"your-",
        b"yourtoken",
        b"yourkey",
        b"yourpass",
        b"xxxx",
        b"****",
        b"...",
        "\u{2026}".as_bytes(),
        b"redacted",
        b"dummy",
        b"sample",
        b"changeme",
        b"change_me",
        b"replace",
        b"insert",
        b"fake",
        b"foobar",
        b"<",
        b"here",
        b"todo",
    ];
    if WORDS.iter().any(|w| contains(&l, w)) {
        return true;
    }
    // one repeated byte (`aaaaaaaa`, `00000000`), or mostly one (`xoxb-xxxxxxxxxxxx-…`)
    v.iter().all(|&b| b == v[0]) || filler(v)
}

fn path_like(v: &[u8]) -> bool {
    v.starts_with(b"/")
        || v.starts_with(b"./")
        || v.starts_with(b"../")
        || v.starts_with(b"~/")
        || (v.len() > 2 && v[1] == b':' && v[2] == b'\\')
        || contains(v, b"://")
}

/// `self.password`, `os.environ`, `config.api_token`: code, not a value.
fn dotted_identifier(v: &[u8]) -> bool {
    let mut parts = 0;
    for p in v.split(|&b| b == b'.') {
        if p.is_empty()
            || !(p[0].is_ascii_alphabetic() || p[0] == b'_')
            || !p.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return false;
        }
        parts += 1;
    }
    parts >= 2
        && !v
            .split(|&b| b == b'.')
            .any(|p| p.len() >= 16 && classes(p) >= 3)
}

fn words_only(v: &[u8]) -> bool {
    // prose and identifiers: letters with `_`/`-` separators, no digits, one case or camel
    v.iter()
        .all(|&b| b.is_ascii_alphabetic() || b == b'_' || b == b'-')
        && !(v.iter().any(u8::is_ascii_uppercase)
            && v.iter().any(u8::is_ascii_lowercase)
            && v.len() >= 20)
}

/// A package and its version (`jjwt-jackson-0.11.2`, `left-pad@1.3.0`, `tool_v2.10`): words, then
/// `-`, `_` or `@`, then a dotted version number.
fn versioned_name(v: &[u8]) -> bool {
    let Some(k) = v.iter().rposition(|&b| matches!(b, b'-' | b'_' | b'@')) else {
        return false;
    };
    let (name, ver) = (&v[..k], &v[k + 1..]);
    let ver = ver.strip_prefix(b"v").unwrap_or(ver);
    !name.is_empty()
        && words_only(name)
        && ver.first().is_some_and(u8::is_ascii_digit)
        && ver.contains(&b'.')
        && ver.iter().all(|b| b.is_ascii_digit() || *b == b'.')
}

fn classes(v: &[u8]) -> usize {
    let l = v.iter().any(u8::is_ascii_lowercase) as usize;
    let u = v.iter().any(u8::is_ascii_uppercase) as usize;
    let d = v.iter().any(u8::is_ascii_digit) as usize;
    let s = v.iter().any(|b| !b.is_ascii_alphanumeric()) as usize;
    l + u + d + s
}

/// Random-looking enough to be a key: long, several character classes, high entropy.
pub fn looks_random(v: &[u8]) -> bool {
    if v.len() < 12
        || placeholder_like(v)
        || path_like(v)
        || dotted_identifier(v)
        || words_only(v)
        || versioned_name(v)
    {
        return false;
    }
    if v.iter().all(u8::is_ascii_digit) {
        // an id or secret of 16+ digits (client ids, numeric secrets); not a time or a count
        return v.len() >= 16 && shannon(v) >= 2.5 && !sequence(v);
    }
    let need = (0.75 * (v.len() as f64).log2()).min(3.0);
    classes(v) >= 2 && v.iter().any(u8::is_ascii_digit) && shannon(v) >= need
        || (classes(v) >= 3 && shannon(v) >= need)
}

const PROSE: [&[u8]; 20] = [
    b"required",
    b"optional",
    b"string",
    b"none",
    b"null",
    b"true",
    b"false",
    b"hidden",
    b"empty",
    b"prompt",
    b"input",
    b"password",
    b"secret",
    b"undefined",
    b"enter",
    b"the",
    b"your",
    b"admin",
    b"default",
    b"value",
];

fn password_ok(v: &[u8]) -> bool {
    if v.len() < 4 || placeholder_like(v) || dotted_identifier(v) || path_like(v) {
        return false;
    }
    let l = lower(v);
    if PROSE.iter().any(|w| l == *w) {
        return false;
    }
    // an identifier of code (`getpass`, `pw_hash`, `self`) or a prose word: letters only in one case
    if v.iter().all(|&b| b.is_ascii_lowercase() || b == b'_') && v.len() < 12 && shannon(v) < 3.0 {
        return false;
    }
    !two_words(v)
}

/// A name of two lower-case words joined by one `-` or `_` (`shorter-version`, `read_only`,
/// `new-user`): a name, not a password. A passphrase of words (`correct-horse-battery-staple`)
/// has more of them, and a typed password a digit or a capital.
fn two_words(v: &[u8]) -> bool {
    let mut seps = v.iter().filter(|&&b| b == b'-' || b == b'_');
    seps.next().is_some()
        && seps.next().is_none()
        && v.iter()
            .all(|&b| b.is_ascii_lowercase() || b == b'-' || b == b'_')
        && !v.starts_with(b"-")
        && !v.starts_with(b"_")
        && !v.ends_with(b"-")
        && !v.ends_with(b"_")
}

fn assigned_ok(v: &[u8]) -> bool {
    v.len() >= 6
        && !placeholder_like(v)
        && !path_like(v)
        && !dotted_identifier(v)
        && !v.iter().all(|b| b.is_ascii_digit() || *b == b'.')
        && !matches!(
            lower(v).as_slice(),
            b"true" | b"false" | b"none" | b"null" | b"enabled" | b"disabled"
        )
}

/// Filler, not a secret: a placeholder byte (`x`, `X`, `*`, `#`, `0`, `.`) makes up half of the
/// value or more (`ghp_xxxx…`, `AKIAXXXXXXXXXXXXXXXX`, `xoxb-xxxxxxxxxxxx-…`, `sk_live_000…`), as
/// in the documented examples; in a value of 16 bytes or more, any one byte making up half
/// (`sntryu_aaaa…`, `glc_1111…=`) or a typed repetition ([`repetitive`]).
fn filler(v: &[u8]) -> bool {
    if v.len() < 8 {
        return false;
    }
    let mut counts = [0u32; 256];
    for &b in v {
        counts[b as usize] += 1;
    }
    if b"xX*#0."
        .iter()
        .any(|&b| counts[b as usize] as usize * 2 >= v.len())
    {
        return true;
    }
    v.len() >= 16 && (counts.iter().any(|&c| c as usize * 2 >= v.len()) || repetitive(v))
}

/// Typed, not drawn: for some period `p` of 1 to 4 bytes, 60% or more of the bytes equal the
/// one `p` before (`GR1348941123123123…`, `5555555dAAAAA7777777…`). A drawn value repeats
/// its byte `p` back about once in its alphabet's size (1/16 for hex).
fn repetitive(v: &[u8]) -> bool {
    (1..=4usize).any(|p| {
        v.len() > p && v.windows(p + 1).filter(|w| w[0] == w[p]).count() * 10 >= (v.len() - p) * 6
    })
}

/// A masked value: the match runs into `####` or `****` (`xoxp-…-####…`), the rest of a value a
/// tool or a person hid.
fn masked_after(text: &[u8], end: usize) -> bool {
    let rest = &text[end.min(text.len())..];
    rest.starts_with(b"####") || rest.starts_with(b"****")
}

/// A run of 5 consecutive ascending letters or digits (`abcde`, `12345`): typed, not drawn
/// (used for numbers only: a typed token in a test must still go).
fn sequence(v: &[u8]) -> bool {
    let mut run = 1;
    for w in v.windows(2) {
        if w[1] == w[0] + 1 && w[1].is_ascii_alphanumeric() && w[0].is_ascii_alphanumeric() {
            run += 1;
            if run >= 5 {
                return true;
            }
        } else {
            run = 1;
        }
    }
    false
}

/// Marks of a placeholder or a cut value a real token never holds.
fn marked(v: &[u8]) -> bool {
    contains(v, b"####")
        || contains(v, b"****")
        || contains(v, b"...")
        || v.ends_with(b"..")
        || contains(&lower(v), b"example")
}

/// A private-key block with a body: 64 or more base64 characters between its armour lines.
fn key_block(v: &[u8]) -> bool {
    let Some(a) = memchr::memmem::find(v.get(5..).unwrap_or_default(), b"-----").map(|k| k + 10)
    else {
        return false;
    };
    let b = memchr::memmem::find(&v[a.min(v.len())..], b"-----END").map_or(v.len(), |k| a + k);
    v[a.min(b)..b]
        .iter()
        .filter(|c| c.is_ascii_alphanumeric() || **c == b'+' || **c == b'/')
        .count()
        >= 64
}

fn check(c: Check, v: &[u8]) -> bool {
    if rules::PUBLIC_VALUES.iter().any(|p| p.as_bytes() == v) {
        return false;
    }
    match c {
        Check::Exact => return true,
        Check::KeyBlock => return key_block(v),
        _ => {}
    }
    if filler(v) || marked(v) {
        return false;
    }
    match c {
        Check::Shape | Check::Exact | Check::KeyBlock => true,
        Check::NotExample => !lower(v).ends_with(b"example") && !lower(v).ends_with(b"examplekey"),
        Check::MixedCase => {
            v.iter().any(u8::is_ascii_uppercase)
                && v.iter().any(u8::is_ascii_lowercase)
                && !placeholder_like(v)
        }
        Check::HasDigit => v.iter().any(u8::is_ascii_digit) && !placeholder_like(v),
        Check::Assigned => assigned_ok(v),
        Check::Password => password_ok(v),
        Check::UrlPassword => !placeholder_like(v) && !contains(v, b"${"),
        Check::Random => looks_random(v),
    }
}

// ---------------------------------------------------------------------------- text search

/// A secret in a decoded string: `[start, end)` bytes, rule index.
#[derive(Clone, Copy, Debug)]
struct Hit {
    start: usize,
    end: usize,
    rule: usize,
}

/// The secrets in `text` by the rules in `mask`, non-overlapping, in order.
fn search(e: &Engine, text: &[u8], mask: Mask, out: &mut Vec<Hit>) {
    out.clear();
    let mut m = mask;
    while m != 0 {
        let r = m.trailing_zeros() as usize;
        m &= m - 1;
        if r >= RULES.len() {
            break;
        }
        let rule = &RULES[r];
        if !rule.context.is_empty() && !rule.context.iter().any(|c| contains(text, c.as_bytes())) {
            continue;
        }
        let re = &e.res[r];
        if rule.group == 0 {
            for mt in re.find_iter(text) {
                if check(rule.check, mt.as_bytes()) && !masked_after(text, mt.end()) {
                    out.push(Hit {
                        start: mt.start(),
                        end: mt.end(),
                        rule: r,
                    });
                }
            }
        } else {
            for caps in re.captures_iter(text) {
                // the first group from `rule.group` on that took part (a rule may have
                // alternatives, each with its own group: `sgp_…` or a 40-hex value under a name)
                let Some(g) = (rule.group..caps.len()).find_map(|k| caps.get(k)) else {
                    continue;
                };
                // when the secret is group 2 or later, group 1 is the name it is assigned to
                let benign = rule.group >= 2
                    && caps
                        .get(1)
                        .is_some_and(|n| e.benign_name.is_match(n.as_bytes()));
                if !g.is_empty()
                    && !benign
                    && check(rule.check, g.as_bytes())
                    && !masked_after(text, g.end())
                {
                    out.push(Hit {
                        start: g.start(),
                        end: g.end(),
                        rule: r,
                    });
                }
            }
        }
    }
    if out.len() > 1 {
        // earliest first, then the longest, then the table's order; drop overlaps
        out.sort_by(|a, b| {
            a.start
                .cmp(&b.start)
                .then(b.end.cmp(&a.end))
                .then(a.rule.cmp(&b.rule))
        });
        let mut keep = 0;
        let mut last_end = 0;
        for i in 0..out.len() {
            if i == 0 || out[i].start >= last_end {
                last_end = out[i].end;
                out[keep] = out[i];
                keep += 1;
            }
        }
        out.truncate(keep);
    }
}

/// `text` with `hits` replaced by placeholders; pushes one finding per hit (code point offsets).
fn replace(
    text: &[u8],
    hits: &[Hit],
    kinds: &mut Vec<(&'static str, usize, usize, String)>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut at = 0;
    let mut cp = 0; // code points before `at`
    let count = |b: &[u8]| b.iter().filter(|&&c| (c & 0xC0) != 0x80).count();
    for h in hits {
        out.extend_from_slice(&text[at..h.start]);
        cp += count(&text[at..h.start]);
        let value = &text[h.start..h.end];
        let start_cp = cp;
        cp += count(value);
        let kind = RULES[h.rule].kind;
        let hash = hash6(value);
        out.extend_from_slice(format!("[REDACTED:{kind}:{hash}]").as_bytes());
        kinds.push((kind, start_cp, cp, hash));
        at = h.end;
    }
    out.extend_from_slice(&text[at..]);
    out
}

// ---------------------------------------------------------------------------- JSON strings

/// Decodes a JSON string body (between the quotes, escapes valid) into bytes.
///
/// UTF-8, lone surrogates as their 3-byte (WTF-8) form, raw bytes that are not UTF-8 kept as they
/// are.
fn decode(body: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    while i < body.len() {
        let Some(k) = memchr::memchr(b'\\', &body[i..]) else {
            out.extend_from_slice(&body[i..]);
            break;
        };
        out.extend_from_slice(&body[i..i + k]);
        i += k;
        let c = body[i + 1];
        i += 2;
        let byte = match c {
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let hex = |s: &[u8]| {
                    u32::from_str_radix(std::str::from_utf8(s).unwrap_or("0"), 16).unwrap_or(0)
                };
                let mut u = hex(&body[i..i + 4]);
                i += 4;
                if (0xD800..0xDC00).contains(&u)
                    && body.get(i) == Some(&b'\\')
                    && body.get(i + 1) == Some(&b'u')
                    && i + 6 <= body.len()
                {
                    let lo = hex(&body[i + 2..i + 6]);
                    if (0xDC00..0xE000).contains(&lo) {
                        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                        i += 6;
                    }
                }
                push_utf8(out, u);
                continue;
            }
            other => other,
        };
        out.push(byte);
    }
}

fn push_utf8(out: &mut Vec<u8>, u: u32) {
    // surrogates get their 3-byte form (WTF-8), which `encode` turns back into `\udxxx`
    if u < 0x80 {
        out.push(u as u8);
    } else if u < 0x800 {
        out.extend_from_slice(&[0xC0 | (u >> 6) as u8, 0x80 | (u & 0x3F) as u8]);
    } else if u < 0x10000 {
        out.extend_from_slice(&[
            0xE0 | (u >> 12) as u8,
            0x80 | ((u >> 6) & 0x3F) as u8,
            0x80 | (u & 0x3F) as u8,
        ]);
    } else {
        out.extend_from_slice(&[
            0xF0 | (u >> 18) as u8,
            0x80 | ((u >> 12) & 0x3F) as u8,
            0x80 | ((u >> 6) & 0x3F) as u8,
            0x80 | (u & 0x3F) as u8,
        ]);
    }
}

/// Writes decoded bytes as a JSON string body the way `JSON.stringify` does.
///
/// `"` `\` and control characters escaped (`\b\f\n\r\t`, else `\u00xx`), lone surrogates as
/// `\udxxx`, everything else as is.
fn encode(text: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            8 => out.extend_from_slice(b"\\b"),
            12 => out.extend_from_slice(b"\\f"),
            0..=0x1F => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(c >> 4) as usize],
                HEX[(c & 15) as usize],
            ]),
            0xED if i + 2 < text.len()
                && (0xA0..=0xBF).contains(&text[i + 1])
                && (text[i + 2] & 0xC0) == 0x80 =>
            {
                let u = 0xD000 | (((text[i + 1] & 0x3F) as u32) << 6) | (text[i + 2] & 0x3F) as u32;
                out.extend_from_slice(b"\\u");
                for s in [12, 8, 4, 0] {
                    out.push(HEX[((u >> s) & 15) as usize]);
                }
                i += 3;
                continue;
            }
            _ => out.push(c),
        }
        i += 1;
    }
}

fn pointer_escape(key: &[u8], out: &mut String) {
    out.push('/');
    for ch in String::from_utf8_lossy(key).chars() {
        match ch {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

// ---------------------------------------------------------------------------- the line walk

enum Frame {
    Obj {
        /// raw body span of the current member's key
        key: (usize, usize),
        /// whether a member was kept so far (for dropping a member with its comma)
        kept_any: bool,
        /// the `,` before the current member (when it has one)
        comma: Option<usize>,
        /// the current member is being dropped
        dropping: Option<usize>,
        /// the current key had a literal hit (only such a key can be a secret)
        key_hit: bool,
    },
    Arr {
        idx: u64,
    },
}

/// One edit of a line: bytes `[start, end)` become `with`.
struct Edit {
    start: usize,
    end: usize,
    with: Vec<u8>,
}

/// Streams a session through the rules.
///
/// Feed it bytes, it hands back the scrubbed bytes of the whole lines it has, keeping at most one
/// partial line (memory: the largest line).
pub struct Scrubber {
    opts: Options,
    carry: Vec<u8>,
    line_no: u64,
    pub findings: Vec<Finding>,
    pub lines_changed: u64,
    pub replay_fields: u64,
    pub bytes_in: u64,
    parser: LineParser,
    scratch: Vec<u8>,
    hits: Vec<Hit>,
    lit_hits: Vec<(usize, Mask)>,
    /// collect findings (off: count only)
    pub record: bool,
    pub found: u64,
}

impl Scrubber {
    pub fn new(opts: Options) -> Self {
        engine();
        Scrubber {
            opts,
            carry: Vec::new(),
            line_no: 0,
            findings: Vec::new(),
            lines_changed: 0,
            replay_fields: 0,
            bytes_in: 0,
            parser: LineParser::new(),
            scratch: Vec::new(),
            hits: Vec::new(),
            lit_hits: Vec::new(),
            record: true,
            found: 0,
        }
    }

    /// Scrubs the whole lines of `carry + data` into `out`; keeps the last partial line.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) {
        self.bytes_in += data.len() as u64;
        let mut start = 0;
        if !self.carry.is_empty() {
            match memchr::memchr(b'\n', data) {
                None => {
                    self.carry.extend_from_slice(data);
                    return;
                }
                Some(k) => {
                    let mut line = std::mem::take(&mut self.carry);
                    line.extend_from_slice(&data[..k]);
                    self.line(&line, out);
                    out.push(b'\n');
                    line.clear();
                    self.carry = line;
                    start = k + 1;
                }
            }
        }
        while start < data.len() {
            match memchr::memchr(b'\n', &data[start..]) {
                Some(k) => {
                    self.line(&data[start..start + k], out);
                    out.push(b'\n');
                    start += k + 1;
                }
                None => {
                    self.carry.extend_from_slice(&data[start..]);
                    break;
                }
            }
        }
    }

    /// The last line when the input did not end with `\n` (kept without one).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.carry.is_empty() {
            let line = std::mem::take(&mut self.carry);
            self.line(&line, out);
        }
    }

    /// Scrubs one line (without its `\n`) into `out`.
    pub fn line(&mut self, line: &[u8], out: &mut Vec<u8>) {
        self.line_no += 1;
        let e = engine();
        self.lit_hits.clear();
        for m in e.ac.find_overlapping_iter(line) {
            self.lit_hits
                .push((m.start(), e.lit_mask[m.pattern().as_usize()]));
        }
        let dotted = e.dotted_mask;
        dotted_six(line, |i| self.lit_hits.push((i, dotted)));
        if self.lit_hits.is_empty()
            && !(self.opts.replay == Replay::Drop && contains(line, b"Signature\""))
        {
            out.extend_from_slice(line);
            return;
        }
        self.lit_hits.sort_unstable_by_key(|h| h.0);
        let before = out.len();
        let (is_obj, header, entry_id) = match self.parser.parse(line) {
            Ok(sk) => (
                sk.top == TopKind::Object,
                sk.type_.as_str() == Some("session"),
                match &sk.id {
                    Val::Str(s) => Some(s.to_string()),
                    _ => None,
                },
            ),
            Err(_) => {
                self.raw_line(line, out);
                if out[before..] != *line {
                    self.lines_changed += 1;
                }
                return;
            }
        };
        let edits = self.walk(line, is_obj, header, entry_id.as_deref());
        if edits.is_empty() {
            out.extend_from_slice(line);
            return;
        }
        self.lines_changed += 1;
        let mut at = 0;
        for ed in &edits {
            out.extend_from_slice(&line[at..ed.start]);
            out.extend_from_slice(&ed.with);
            at = ed.end;
        }
        out.extend_from_slice(&line[at..]);
    }

    /// A line that is not JSON: searched as text, matches replaced in place.
    fn raw_line(&mut self, line: &[u8], out: &mut Vec<u8>) {
        let e = engine();
        let mask = self.lit_hits.iter().fold(0, |m: Mask, h| m | h.1);
        let mut hits = std::mem::take(&mut self.hits);
        search(e, line, mask, &mut hits);
        let mut kinds = Vec::new();
        let text = replace(line, &hits, &mut kinds);
        self.record_findings(kinds, None, None, false);
        self.hits = hits;
        out.extend_from_slice(&text);
    }

    fn record_findings(
        &mut self,
        kinds: Vec<(&'static str, usize, usize, String)>,
        entry_id: Option<&str>,
        pointer: Option<String>,
        in_key: bool,
    ) {
        self.found += kinds.len() as u64;
        if !self.record {
            return;
        }
        for (kind, start, end, hash) in kinds {
            self.findings.push(Finding {
                line: self.line_no,
                entry_id: entry_id.map(str::to_string),
                pointer: pointer.clone(),
                in_key,
                kind,
                start,
                end,
                hash,
            });
        }
    }

    /// The RFC 6901 pointer of the current string. A key that is itself a secret is written
    /// as its placeholder, so a pointer never holds a value.
    fn pointer(line: &[u8], stack: &[Frame], scratch: &mut Vec<u8>) -> String {
        let e = engine();
        let mut p = String::new();
        let mut hits = Vec::new();
        for f in stack {
            match f {
                Frame::Obj { key, key_hit, .. } => {
                    decode(&line[key.0..key.1], scratch);
                    hits.clear();
                    if *key_hit {
                        search(e, scratch, ALL, &mut hits);
                    }
                    if hits.is_empty() {
                        pointer_escape(scratch, &mut p);
                    } else {
                        let clean = replace(scratch, &hits, &mut Vec::new());
                        pointer_escape(&clean, &mut p);
                    }
                }
                Frame::Arr { idx } => {
                    p.push('/');
                    p.push_str(&idx.to_string());
                }
            }
        }
        p
    }

    /// Walks a line that is valid JSON; returns its edits in order.
    fn walk(
        &mut self,
        line: &[u8],
        _is_obj: bool,
        header: bool,
        entry_id: Option<&str>,
    ) -> Vec<Edit> {
        let mut edits: Vec<Edit> = Vec::new();
        let mut stack: Vec<Frame> = Vec::new();
        let mut hit_at = 0usize; // first literal hit not yet behind us
        let mut i = 0usize;
        let n = line.len();
        // a value string under a secret-named key: (rule kind by name, mask forced)
        let mut keyed: Option<bool> = None; // Some(is_password)
                                            // skip everything inside a value until the stack is back to this length
        let mut skip_to: Option<usize> = None;
        let ws = |i: &mut usize| {
            while *i < n && matches!(line[*i], b' ' | b'\t' | b'\n' | b'\r') {
                *i += 1;
            }
        };
        loop {
            // a value starts at i
            ws(&mut i);
            if i >= n {
                break;
            }
            let c = line[i];
            match c {
                b'{' | b'[' => {
                    i += 1;
                    ws(&mut i);
                    let close = if c == b'{' { b'}' } else { b']' };
                    if line.get(i) == Some(&close) {
                        i += 1;
                    } else if c == b'[' {
                        stack.push(Frame::Arr { idx: 0 });
                        keyed = None;
                        continue;
                    } else {
                        stack.push(Frame::Obj {
                            key: (0, 0),
                            kept_any: false,
                            comma: None,
                            dropping: None,
                            key_hit: false,
                        });
                        keyed = None;
                        // the first key
                        self.member_key(
                            line,
                            &mut i,
                            &mut stack,
                            &mut edits,
                            &mut hit_at,
                            &mut keyed,
                            &mut skip_to,
                            header,
                            entry_id,
                        );
                        continue;
                    }
                }
                b'"' => {
                    let s = i + 1;
                    let end = skip_string_body(line, s).unwrap_or(n);
                    let body = (s, end - 1);
                    i = end;
                    if skip_to.is_none() {
                        let mask = take_mask(&self.lit_hits, &mut hit_at, body.0, body.1);
                        let forced = keyed.take();
                        if mask != 0 || forced.is_some() {
                            self.string(
                                line, body, mask, forced, &stack, &mut edits, entry_id, false,
                            );
                        }
                    }
                }
                _ => {
                    // number, true, false, null
                    while i < n
                        && !matches!(line[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                    {
                        i += 1;
                    }
                }
            }
            keyed = None;
            // after a value: close containers, or move to the next element
            loop {
                ws(&mut i);
                let Some(top) = stack.last_mut() else {
                    return finish_edits(edits);
                };
                let c = line.get(i).copied();
                match (top, c) {
                    (
                        Frame::Obj {
                            dropping,
                            kept_any,
                            comma,
                            ..
                        },
                        Some(b','),
                    ) => {
                        if let Some(ds) = dropping.take() {
                            // drop the member: with the comma before it, or (first kept) the one after
                            let mut j = i + 1;
                            while j < n && matches!(line[j], b' ' | b'\t' | b'\n' | b'\r') {
                                j += 1;
                            }
                            let (st, en) = if *kept_any { (ds, i) } else { (ds, j) };
                            edits.push(Edit {
                                start: st,
                                end: en,
                                with: Vec::new(),
                            });
                            self.replay_fields += 1;
                        } else {
                            *kept_any = true;
                        }
                        *comma = Some(i);
                        if skip_to == Some(stack.len()) {
                            skip_to = None;
                        }
                        i += 1;
                        ws(&mut i);
                        self.member_key(
                            line,
                            &mut i,
                            &mut stack,
                            &mut edits,
                            &mut hit_at,
                            &mut keyed,
                            &mut skip_to,
                            header,
                            entry_id,
                        );
                        break;
                    }
                    (Frame::Obj { dropping, .. }, Some(b'}')) => {
                        if let Some(ds) = dropping.take() {
                            edits.push(Edit {
                                start: ds,
                                end: i,
                                with: Vec::new(),
                            });
                            self.replay_fields += 1;
                        }
                        i += 1;
                        if skip_to == Some(stack.len()) {
                            skip_to = None;
                        }
                        stack.pop();
                        if skip_to.is_some_and(|d| stack.len() < d) {
                            skip_to = None;
                        }
                    }
                    (Frame::Arr { idx }, Some(b',')) => {
                        *idx += 1;
                        i += 1;
                        break;
                    }
                    (Frame::Arr { .. }, Some(b']')) => {
                        i += 1;
                        stack.pop();
                        if skip_to.is_some_and(|d| stack.len() < d) {
                            skip_to = None;
                        }
                    }
                    _ => return finish_edits(edits), // cannot happen on a line that parsed
                }
            }
        }
        finish_edits(edits)
    }

    /// Reads a member's key (cursor on its quote) and the `:`; decides how its value is treated.
    #[allow(clippy::too_many_arguments)]
    fn member_key(
        &mut self,
        line: &[u8],
        i: &mut usize,
        stack: &mut [Frame],
        edits: &mut Vec<Edit>,
        hit_at: &mut usize,
        keyed: &mut Option<bool>,
        skip_to: &mut Option<usize>,
        header: bool,
        entry_id: Option<&str>,
    ) -> bool {
        let e = engine();
        let n = line.len();
        let key_start = *i;
        let s = *i + 1;
        let end = skip_string_body(line, s).unwrap_or(n);
        let body = (s, end - 1);
        *i = end;
        while *i < n && line[*i] != b':' {
            *i += 1;
        }
        *i += 1; // the colon
        let depth_len = stack.len();
        match stack.last_mut() {
            Some(Frame::Obj { key, key_hit, .. }) => {
                *key = body;
                *key_hit = false;
            }
            _ => return false,
        }
        if skip_to.is_some() {
            return true;
        }
        // keys are compared as `JSON.parse` reads them: `"\u0069d"` is `id`
        let raw_k = &line[body.0..body.1];
        let decoded_k: Vec<u8>;
        let k: &[u8] = if memchr::memchr(b'\\', raw_k).is_some() {
            let mut v = Vec::new();
            decode(raw_k, &mut v);
            decoded_k = v;
            &decoded_k
        } else {
            raw_k
        };
        let top = depth_len == 1;
        if top
            && (TREE_KEYS.contains(&k)
                || (header
                    && (k == b"version"
                        || (!self.opts.header && (k == b"cwd" || k == b"parentSession")))))
        {
            *skip_to = Some(depth_len);
            let _ = take_mask(&self.lit_hits, hit_at, body.0, body.1);
            return true;
        }
        if !top && (k == b"id" || k == b"toolCallId") {
            *skip_to = Some(depth_len);
            let _ = take_mask(&self.lit_hits, hit_at, body.0, body.1);
            return true;
        }
        if depth_len >= 2 && REPLAY_KEYS.contains(&k) {
            *skip_to = Some(depth_len);
            let _ = take_mask(&self.lit_hits, hit_at, body.0, body.1);
            match self.opts.replay {
                Replay::Keep => self.replay_fields += 1,
                Replay::Drop => {
                    if let Some(Frame::Obj {
                        dropping,
                        kept_any,
                        comma,
                        ..
                    }) = stack.last_mut()
                    {
                        *dropping = Some(if *kept_any {
                            comma.unwrap_or(key_start)
                        } else {
                            key_start
                        });
                    }
                }
            }
            return true;
        }
        // the key itself is searched; a secret-named key makes its value searched
        let mask = take_mask(&self.lit_hits, hit_at, body.0, body.1);
        if mask != 0 {
            if let Some(Frame::Obj { key_hit, .. }) = stack.last_mut() {
                *key_hit = true;
            }
            decode(raw_k, &mut self.scratch);
            let name = std::mem::take(&mut self.scratch);
            if e.secret_name.is_match(&name) && !e.benign_name.is_match(&name) {
                *keyed = Some(e.password_name.is_match(&name));
            }
            self.scratch = name;
            self.string(line, body, mask, None, stack, edits, entry_id, true);
        }
        true
    }

    /// Searches one string (raw body span); pushes an edit when it changes.
    #[allow(clippy::too_many_arguments)]
    fn string(
        &mut self,
        line: &[u8],
        body: (usize, usize),
        mask: Mask,
        forced: Option<bool>,
        stack: &[Frame],
        edits: &mut Vec<Edit>,
        entry_id: Option<&str>,
        in_key: bool,
    ) {
        let e = engine();
        let raw = &line[body.0..body.1];
        let mut text = std::mem::take(&mut self.scratch);
        decode(raw, &mut text);
        let mut hits = std::mem::take(&mut self.hits);
        search(e, &text, mask, &mut hits);
        if hits.is_empty() {
            if let Some(is_pw) = forced {
                // the whole value of a secret-named key
                let ok = if is_pw {
                    password_ok(&text)
                } else {
                    looks_random(&text)
                };
                if ok && !text.contains(&b'\n') && text.len() <= 4096 {
                    let rule = RULES
                        .iter()
                        .position(|r| {
                            r.kind
                                == if is_pw {
                                    "password_assignment"
                                } else {
                                    "secret_keyed_value"
                                }
                        })
                        .unwrap();
                    hits.push(Hit {
                        start: 0,
                        end: text.len(),
                        rule,
                    });
                }
            }
        }
        if !hits.is_empty() {
            let mut kinds = Vec::new();
            let new = replace(&text, &hits, &mut kinds);
            let mut enc = Vec::with_capacity(new.len() + 16);
            encode(&new, &mut enc);
            let mut scratch2 = Vec::new();
            let ptr = Self::pointer(line, stack, &mut scratch2);
            self.record_findings(kinds, entry_id, Some(ptr), in_key);
            edits.push(Edit {
                start: body.0,
                end: body.1,
                with: enc,
            });
        }
        self.hits = hits;
        self.scratch = text;
    }
}

fn finish_edits(mut edits: Vec<Edit>) -> Vec<Edit> {
    edits.sort_by_key(|e| e.start);
    edits
}

/// The rules named by literal hits starting inside `[s, e)`; moves the cursor past them.
fn take_mask(hits: &[(usize, Mask)], at: &mut usize, s: usize, e: usize) -> Mask {
    while *at < hits.len() && hits[*at].0 < s {
        *at += 1;
    }
    let mut m = 0;
    while *at < hits.len() && hits[*at].0 < e {
        m |= hits[*at].1;
        *at += 1;
    }
    m
}

/// Scrubs a whole buffer (a test and benchmark helper).
pub fn scrub_bytes(data: &[u8], opts: Options) -> (Vec<u8>, Vec<Finding>) {
    let mut s = Scrubber::new(opts);
    let mut out = Vec::with_capacity(data.len());
    s.feed(data, &mut out);
    s.finish(&mut out);
    (out, s.findings)
}

#[cfg(test)]
mod key_tests;
#[cfg(test)]
mod lookalike_tests;
#[cfg(test)]
mod tests;
