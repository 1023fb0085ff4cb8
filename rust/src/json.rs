//! A validating, non-recursive JSON line reader that accepts exactly what JavaScript's
//! `JSON.parse` accepts on a line Pi's loader has decoded, and extracts only the top-level
//! fields the tree needs (the "skeleton"). Bodies are never materialized here.
//!
//! Differences from a general JSON library, all deliberate and all Pi's:
//! * any nesting depth is accepted (V8's parser is iterative); we never recurse;
//! * escapes that produce lone UTF-16 surrogates (`"\ud800"`) are valid;
//! * raw bytes that are not valid UTF-8 inside strings are accepted (Node decodes the file
//!   with U+FFFD replacement before parsing), and reported through `invalid_utf8`;
//! * duplicate keys: the last one wins.
//!
//! Speed (this is the hot loop of opening a session): string bodies are skipped 16 or 32
//! bytes at a time, looking only for `"`, `\` and control bytes; a byte ≥ 0x80 can appear
//! in a line that parses only inside a string, so UTF-8 validity is one whole-line check
//! after the parse. Captured strings borrow the line unless they hold escapes or invalid
//! UTF-8, and a [`LineParser`] reuses its scratch buffers across lines, so parsing a line
//! allocates nothing in the common case.

use std::borrow::Cow;

/// A JSON value as far as the skeleton cares about it.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum JsVal {
    /// Key absent (JavaScript `undefined`).
    #[default]
    Missing,
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    /// An object or array: only its truthiness and identity matter to the tree.
    Composite,
}

impl JsVal {
    /// JavaScript truthiness (`if (x)`), for values JSON can express.
    pub fn truthy(&self) -> bool {
        match self {
            JsVal::Missing | JsVal::Null => false,
            JsVal::Bool(b) => *b,
            JsVal::Num(n) => *n != 0.0 && !n.is_nan(),
            JsVal::Str(s) => !s.is_empty(),
            JsVal::Composite => true,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            JsVal::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// [`JsVal`] borrowing its string from the line when it can (no escapes, valid UTF-8).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Val<'a> {
    #[default]
    Missing,
    Null,
    Bool(bool),
    Num(f64),
    Str(Cow<'a, str>),
    Composite,
}

impl Val<'_> {
    /// JavaScript truthiness, as [`JsVal::truthy`].
    pub fn truthy(&self) -> bool {
        match self {
            Val::Missing | Val::Null => false,
            Val::Bool(b) => *b,
            Val::Num(n) => *n != 0.0 && !n.is_nan(),
            Val::Str(s) => !s.is_empty(),
            Val::Composite => true,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn to_js(&self) -> JsVal {
        match self {
            Val::Missing => JsVal::Missing,
            Val::Null => JsVal::Null,
            Val::Bool(b) => JsVal::Bool(*b),
            Val::Num(n) => JsVal::Num(*n),
            Val::Str(s) => JsVal::Str(s.to_string()),
            Val::Composite => JsVal::Composite,
        }
    }
    /// `new Date(value).getTime()` (see [`crate::jsdate::date_value`]), without copying strings.
    pub fn date_value(&self) -> f64 {
        match self {
            Val::Str(s) => crate::jsdate::parse_iso(s),
            Val::Missing => f64::NAN,
            other => crate::jsdate::date_value(&other.to_js()),
        }
    }
}

/// What kind of top-level value a line holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopKind {
    Object,
    Array,
    String,
    Number,
    True,
    False,
    Null,
}

/// The fields of one line that tree-level logic needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Skeleton {
    pub top: TopKind,
    /// Truthiness of the whole value (Pi 1.6 skips falsy values: `null`, `0`, `false`, `""`).
    pub truthy: bool,
    pub type_: JsVal,
    pub id: JsVal,
    pub parent_id: JsVal,
    pub timestamp: JsVal,
    pub target_id: JsVal,
    pub label: JsVal,
    pub version: JsVal,
    pub first_kept_entry_id: JsVal,
    /// `message.role` when `message` is an object.
    pub role: JsVal,
    /// A string somewhere in the line held bytes that are not UTF-8 (Pi reads them as U+FFFD).
    pub invalid_utf8: bool,
}

impl Skeleton {
    #[allow(dead_code)]
    fn new(top: TopKind) -> Self {
        Skel::new(top).to_owned()
    }
}

/// [`Skeleton`] borrowing from the line (what [`LineParser::parse`] returns).
#[derive(Debug, Clone, PartialEq)]
pub struct Skel<'a> {
    pub top: TopKind,
    pub truthy: bool,
    pub type_: Val<'a>,
    pub id: Val<'a>,
    pub parent_id: Val<'a>,
    pub timestamp: Val<'a>,
    pub target_id: Val<'a>,
    pub label: Val<'a>,
    pub version: Val<'a>,
    pub first_kept_entry_id: Val<'a>,
    pub role: Val<'a>,
    pub invalid_utf8: bool,
}

impl<'a> Skel<'a> {
    pub fn new(top: TopKind) -> Self {
        Skel {
            top,
            truthy: true,
            type_: Val::Missing,
            id: Val::Missing,
            parent_id: Val::Missing,
            timestamp: Val::Missing,
            target_id: Val::Missing,
            label: Val::Missing,
            version: Val::Missing,
            first_kept_entry_id: Val::Missing,
            role: Val::Missing,
            invalid_utf8: false,
        }
    }
    pub fn to_owned(&self) -> Skeleton {
        Skeleton {
            top: self.top,
            truthy: self.truthy,
            type_: self.type_.to_js(),
            id: self.id.to_js(),
            parent_id: self.parent_id.to_js(),
            timestamp: self.timestamp.to_js(),
            target_id: self.target_id.to_js(),
            label: self.label.to_js(),
            version: self.version.to_js(),
            first_kept_entry_id: self.first_kept_entry_id.to_js(),
            role: self.role.to_js(),
            invalid_utf8: self.invalid_utf8,
        }
    }
}

/// Why a line is not JSON: byte position inside the line and a short reason.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonError {
    pub pos: usize,
    pub msg: &'static str,
}

type R<T> = Result<T, JsonError>;

#[derive(Clone, Copy, PartialEq)]
enum Field {
    Type,
    Id,
    ParentId,
    Timestamp,
    TargetId,
    Label,
    Version,
    FirstKept,
    Message,
}

#[inline]
fn top_field(key: &[u8]) -> Option<Field> {
    Some(match key {
        b"type" => Field::Type,
        b"id" => Field::Id,
        b"parentId" => Field::ParentId,
        b"timestamp" => Field::Timestamp,
        b"targetId" => Field::TargetId,
        b"label" => Field::Label,
        b"version" => Field::Version,
        b"firstKeptEntryId" => Field::FirstKept,
        b"message" => Field::Message,
        _ => return None,
    })
}

#[inline(always)]
fn is_special(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

// ---------------------------------------------------------------------------- string bodies

/// Position of the first byte at or after `i` that ends a run of plain string content: `"`,
/// `\` or a control byte below 0x20; `b.len()` when there is none.
#[inline(always)]
pub fn find_special(b: &[u8], i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of the x86_64 baseline; loads stay inside `b`.
        unsafe { find_special_sse2(b, i) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        find_special_swar(b, i)
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn find_special_sse2(b: &[u8], mut i: usize) -> usize {
    use std::arch::x86_64::*;
    let n = b.len();
    let p = b.as_ptr();
    let q = _mm_set1_epi8(b'"' as i8);
    let bs = _mm_set1_epi8(b'\\' as i8);
    let lim = _mm_set1_epi8(0x1f);
    if i + 16 <= n {
        let v = _mm_loadu_si128(p.add(i) as *const __m128i);
        let m = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, bs)),
            _mm_cmpeq_epi8(_mm_min_epu8(v, lim), v),
        );
        let mask = _mm_movemask_epi8(m) as u32;
        if mask != 0 {
            return i + mask.trailing_zeros() as usize;
        }
        i += 16;
        // a long run: wider vectors pay off
        if i + 64 <= n && std::is_x86_feature_detected!("avx2") {
            return find_special_avx2(b, i);
        }
        while i + 16 <= n {
            let v = _mm_loadu_si128(p.add(i) as *const __m128i);
            let m = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, bs)),
                _mm_cmpeq_epi8(_mm_min_epu8(v, lim), v),
            );
            let mask = _mm_movemask_epi8(m) as u32;
            if mask != 0 {
                return i + mask.trailing_zeros() as usize;
            }
            i += 16;
        }
    }
    find_special_tail(b, i)
}

/// [`find_special`] for long runs, 64 bytes per step.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn find_special_avx2(b: &[u8], mut i: usize) -> usize {
    use std::arch::x86_64::*;
    let n = b.len();
    let p = b.as_ptr();
    let q = _mm256_set1_epi8(b'"' as i8);
    let bs = _mm256_set1_epi8(b'\\' as i8);
    let lim = _mm256_set1_epi8(0x1f);
    macro_rules! hits {
        ($v:expr) => {{
            let v = $v;
            _mm256_or_si256(
                _mm256_or_si256(_mm256_cmpeq_epi8(v, q), _mm256_cmpeq_epi8(v, bs)),
                _mm256_cmpeq_epi8(_mm256_min_epu8(v, lim), v),
            )
        }};
    }
    while i + 64 <= n {
        let a = hits!(_mm256_loadu_si256(p.add(i) as *const __m256i));
        let c = hits!(_mm256_loadu_si256(p.add(i + 32) as *const __m256i));
        if _mm256_testz_si256(_mm256_or_si256(a, c), _mm256_or_si256(a, c)) == 0 {
            let ma = _mm256_movemask_epi8(a) as u32 as u64;
            let mc = _mm256_movemask_epi8(c) as u32 as u64;
            let mask = ma | (mc << 32);
            return i + mask.trailing_zeros() as usize;
        }
        i += 64;
    }
    while i + 32 <= n {
        let a = hits!(_mm256_loadu_si256(p.add(i) as *const __m256i));
        let mask = _mm256_movemask_epi8(a) as u32;
        if mask != 0 {
            return i + mask.trailing_zeros() as usize;
        }
        i += 32;
    }
    // fewer than 32 bytes left: finish here (a position < n that is not special is never
    // returned, so the caller can tell "found" from "ran out")
    while i < n {
        if is_special(*b.get_unchecked(i)) {
            return i;
        }
        i += 1;
    }
    n
}

/// Checks the escape whose backslash is at `j`; returns the position after it.
#[inline(always)]
fn check_escape(b: &[u8], j: usize) -> R<usize> {
    match b.get(j + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(j + 2),
        Some(b'u') => {
            if j + 6 <= b.len() && b[j + 2..j + 6].iter().all(u8::is_ascii_hexdigit) {
                Ok(j + 6)
            } else {
                Err(JsonError {
                    pos: j + 2,
                    msg: "bad \\u escape",
                })
            }
        }
        Some(_) => Err(JsonError {
            pos: j + 1,
            msg: "bad escape",
        }),
        None => Err(JsonError {
            pos: j + 1,
            msg: "unterminated string",
        }),
    }
}

/// Skips a string body from `i` (just after the opening quote), escapes included; returns
/// the position after the closing quote.
#[inline(always)]
fn skip_body_with(b: &[u8], mut i: usize, find: impl Fn(&[u8], usize) -> usize) -> R<usize> {
    loop {
        let k = find(b, i);
        match b.get(k) {
            Some(b'"') => return Ok(k + 1),
            Some(b'\\') => i = check_escape(b, k)?,
            Some(_) => {
                return Err(JsonError {
                    pos: k,
                    msg: "control character in string",
                })
            }
            None => {
                return Err(JsonError {
                    pos: k,
                    msg: "unterminated string",
                })
            }
        }
    }
}

/// [`skip_body_with`] 64 bytes per step: the escapes inside a block are checked off its
/// bit masks without loading it again (session text is full of `\n` and `\"`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn skip_body_avx2(b: &[u8], mut i: usize) -> R<usize> {
    use std::arch::x86_64::*;
    let n = b.len();
    let p = b.as_ptr();
    let q = _mm256_set1_epi8(b'"' as i8);
    let bs = _mm256_set1_epi8(b'\\' as i8);
    let lim = _mm256_set1_epi8(0x1f);
    'blocks: while i + 64 <= n {
        let v0 = _mm256_loadu_si256(p.add(i) as *const __m256i);
        let v1 = _mm256_loadu_si256(p.add(i + 32) as *const __m256i);
        let mask =
            |v: __m256i, c: __m256i| _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, c)) as u32 as u64;
        let qm = mask(v0, q) | (mask(v1, q) << 32);
        let bm = mask(v0, bs) | (mask(v1, bs) << 32);
        let cm = mask(v0, _mm256_min_epu8(v0, lim)) | (mask(v1, _mm256_min_epu8(v1, lim)) << 32);
        let mut m = qm | bm | cm;
        while m != 0 {
            let t = m.trailing_zeros();
            let k = i + t as usize;
            if qm & (1 << t) != 0 {
                return Ok(k + 1);
            }
            if cm & (1 << t) != 0 {
                return Err(JsonError {
                    pos: k,
                    msg: "control character in string",
                });
            }
            let next = check_escape(b, k)?;
            if next >= i + 64 {
                i = next;
                continue 'blocks;
            }
            m &= !0u64 << (next - i);
        }
        i += 64;
    }
    skip_body_with(b, i, |b, i| unsafe { find_special_avx2(b, i) })
}

/// [`skip_body_with`] with the widest scanner this CPU has.
#[inline]
fn skip_body(b: &[u8], i: usize) -> R<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { skip_body_avx2(b, i) };
        }
    }
    skip_body_with(b, i, find_special)
}

#[inline(always)]
fn find_special_tail(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        if is_special(b[i]) {
            return i;
        }
        i += 1;
    }
    b.len()
}

/// Portable word-at-a-time version of [`find_special`] (and its reference in tests).
#[allow(dead_code)]
fn find_special_swar(b: &[u8], mut i: usize) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    while i + 8 <= b.len() {
        let w = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let q = w ^ (LO * b'"' as u64);
        let s = w ^ (LO * b'\\' as u64);
        // lowest flagged byte is exact (borrows only create false hits above a true one)
        let m = (q.wrapping_sub(LO) & !q)
            | (s.wrapping_sub(LO) & !s)
            | (w.wrapping_sub(LO * 0x20) & !w);
        let m = m & HI;
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    find_special_tail(b, i)
}

// ---------------------------------------------------------------------------- the parser

/// Reusable scratch for parsing many lines (one per thread).
#[derive(Default)]
pub struct LineParser {
    /// open containers of the value being skipped: 1 = object, 0 = array
    stack: Vec<u8>,
    /// UTF-16 code units of a captured string with escapes
    units: Vec<u16>,
}

/// `LINE`: the input is one whole line, where `\n` is whitespace as in `JSON.parse`. Without
/// it the input runs on past the line, so `\n` ends the value (and is never whitespace).
struct P<'a, 's, const LINE: bool> {
    b: &'a [u8],
    i: usize,
    stack: &'s mut Vec<u8>,
    units: &'s mut Vec<u16>,
    /// deepest container nesting seen by [`P::skip_value`] (1 = inside one container)
    deepest: usize,
}

impl<'a, const LINE: bool> P<'a, '_, LINE> {
    #[cold]
    fn err_at<T>(&self, pos: usize, msg: &'static str) -> R<T> {
        Err(JsonError { pos, msg })
    }
    #[inline]
    fn err<T>(&self, msg: &'static str) -> R<T> {
        self.err_at(self.i, msg)
    }
    #[inline(always)]
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if c > b' ' || !(c == b' ' || c == b'\t' || c == b'\r' || (LINE && c == b'\n')) {
                break;
            }
            self.i += 1;
        }
    }
    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline(always)]
    fn escape(&self, j: usize) -> R<usize> {
        check_escape(self.b, j)
    }

    /// Skips a string (cursor on the opening quote).
    #[inline(always)]
    fn skip_string(&mut self) -> R<()> {
        let b = self.b;
        let s = self.i + 1;
        // most strings are short: one 16-byte probe settles them without a call
        #[cfg(target_arch = "x86_64")]
        if s + 16 <= b.len() {
            use std::arch::x86_64::*;
            // SAFETY: SSE2 is baseline on x86_64; the load is inside `b`.
            let mask = unsafe {
                let v = _mm_loadu_si128(b.as_ptr().add(s) as *const __m128i);
                let m = _mm_or_si128(
                    _mm_or_si128(
                        _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)),
                        _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)),
                    ),
                    _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v),
                );
                _mm_movemask_epi8(m) as u32
            };
            if mask != 0 {
                let k = s + mask.trailing_zeros() as usize;
                if b[k] == b'"' {
                    self.i = k + 1;
                    return Ok(());
                }
            }
        }
        match skip_body(b, s) {
            Ok(e) => {
                self.i = e;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Reads a string (cursor on the opening quote): borrowed when it has no escapes and is
    /// UTF-8; otherwise decoded as JavaScript sees it (lone surrogates read as U+FFFD, bytes
    /// that are not UTF-8 replaced as Node's decoder replaces them).
    #[inline]
    fn string(&mut self) -> R<Cow<'a, str>> {
        let b = self.b;
        let s = self.i + 1;
        let j = find_special(b, s);
        if b.get(j) == Some(&b'"') {
            self.i = j + 1;
            let raw = &b[s..j];
            if raw.len() <= 32 && raw.iter().all(|&c| c < 0x80) {
                // SAFETY: ASCII is UTF-8.
                return Ok(Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(raw) }));
            }
            return Ok(match std::str::from_utf8(raw) {
                Ok(t) => Cow::Borrowed(t),
                Err(_) => Cow::Owned(String::from_utf8_lossy(raw).into_owned()),
            });
        }
        self.string_slow(s)
    }

    #[cold]
    fn string_slow(&mut self, s: usize) -> R<Cow<'a, str>> {
        let b = self.b;
        self.units.clear();
        let mut i = s;
        loop {
            let j = find_special(b, i);
            if j > i {
                // a run of raw bytes: lossy per run equals lossy per sequence (runs end at ASCII)
                let run = String::from_utf8_lossy(&b[i..j]);
                self.units.extend(run.encode_utf16());
            }
            match b.get(j) {
                Some(b'"') => {
                    self.i = j + 1;
                    return Ok(Cow::Owned(String::from_utf16_lossy(self.units)));
                }
                Some(b'\\') => {
                    let next = self.escape(j)?;
                    let u: u16 = match b[j + 1] {
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => 10,
                        b'r' => 13,
                        b't' => 9,
                        b'u' => {
                            let h = std::str::from_utf8(&b[j + 2..j + 6]).unwrap();
                            u16::from_str_radix(h, 16).unwrap()
                        }
                        c => c as u16,
                    };
                    self.units.push(u);
                    i = next;
                }
                Some(_) => return self.err_at(j, "control character in string"),
                None => return self.err_at(j, "unterminated string"),
            }
        }
    }

    /// Checks a number's grammar (cursor on its first byte); returns its text.
    #[inline]
    fn number_text(&mut self) -> R<&'a [u8]> {
        let b = self.b;
        let s = self.i;
        let mut i = s;
        let digits = |mut i: usize| {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            i
        };
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(i + 1),
            _ => return self.err_at(i, "bad number"),
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if !matches!(b.get(i), Some(b'0'..=b'9')) {
                return self.err_at(i, "bad number");
            }
            i = digits(i + 1);
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !matches!(b.get(i), Some(b'0'..=b'9')) {
                return self.err_at(i, "bad number");
            }
            i = digits(i + 1);
        }
        self.i = i;
        Ok(&b[s..i])
    }

    fn number(&mut self) -> R<f64> {
        let t = self.number_text()?;
        // The grammar is checked above; the text is valid for Rust's float parser.
        let txt = unsafe { std::str::from_utf8_unchecked(t) };
        Ok(txt.parse::<f64>().unwrap_or(f64::NAN))
    }

    #[inline]
    fn lit(&mut self, word: &'static [u8]) -> R<()> {
        if self.b.get(self.i..self.i + word.len()) == Some(word) {
            self.i += word.len();
            Ok(())
        } else {
            self.err("bad literal")
        }
    }

    /// `"key"` then `:` (cursor on the key's quote, or on something that is not a key).
    #[inline(always)]
    fn key_colon(&mut self) -> R<()> {
        if self.peek() != Some(b'"') {
            return self.err("expected object key");
        }
        self.skip_string()?;
        self.colon()
    }

    #[inline(always)]
    fn colon(&mut self) -> R<()> {
        if self.peek() != Some(b':') {
            self.ws();
            if self.peek() != Some(b':') {
                return self.err("expected :");
            }
        }
        self.i += 1;
        Ok(())
    }

    /// Skips any value without recursion (cursor at its first byte or whitespace before it).
    fn skip_value(&mut self) -> R<()> {
        let base = self.stack.len();
        let b = self.b;
        loop {
            // one value start
            self.ws();
            match self.peek() {
                Some(b'"') => self.skip_string()?,
                Some(b'{') => {
                    self.deepest = self.deepest.max(self.stack.len() - base + 1);
                    self.i += 1;
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.i += 1;
                    } else {
                        self.stack.push(1);
                        self.key_colon()?;
                        continue;
                    }
                }
                Some(b'[') => {
                    self.deepest = self.deepest.max(self.stack.len() - base + 1);
                    self.i += 1;
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.i += 1;
                    } else {
                        self.stack.push(0);
                        continue;
                    }
                }
                Some(b'-' | b'0'..=b'9') => {
                    self.number_text()?;
                }
                Some(b't') => self.lit(b"true")?,
                Some(b'f') => self.lit(b"false")?,
                Some(b'n') => self.lit(b"null")?,
                Some(_) => return self.err("unexpected character"),
                None => return self.err("unexpected end"),
            }
            // after a value: close containers or move to the next element
            loop {
                if self.stack.len() == base {
                    return Ok(());
                }
                let is_obj = self.stack[self.stack.len() - 1] == 1;
                let mut c = b.get(self.i).copied();
                if matches!(c, Some(b' ' | b'\t' | b'\n' | b'\r')) {
                    self.ws();
                    c = self.peek();
                }
                match c {
                    Some(b',') => {
                        self.i += 1;
                        if is_obj {
                            self.ws();
                            self.key_colon()?;
                        }
                        break;
                    }
                    Some(b'}') if is_obj => {
                        self.i += 1;
                        self.stack.pop();
                    }
                    Some(b']') if !is_obj => {
                        self.i += 1;
                        self.stack.pop();
                    }
                    _ => return self.err("expected , or closing bracket"),
                }
            }
        }
    }

    /// A key (cursor on its quote): borrowed bytes, or decoded when it has escapes.
    #[inline(always)]
    fn key(&mut self) -> R<Cow<'a, [u8]>> {
        if self.peek() != Some(b'"') {
            return self.err("expected object key");
        }
        let b = self.b;
        let s = self.i + 1;
        let j = find_special(b, s);
        if b.get(j) == Some(&b'"') {
            self.i = j + 1;
            return Ok(Cow::Borrowed(&b[s..j]));
        }
        Ok(Cow::Owned(self.string_slow(s)?.into_owned().into_bytes()))
    }

    /// A value we keep: scalars are decoded, containers skipped and marked `Composite`.
    #[inline(always)]
    fn capture(&mut self) -> R<Val<'a>> {
        self.ws();
        Ok(match self.peek() {
            Some(b'"') => Val::Str(self.string()?),
            Some(b'{') | Some(b'[') => {
                self.skip_value()?;
                Val::Composite
            }
            Some(b't') => {
                self.lit(b"true")?;
                Val::Bool(true)
            }
            Some(b'f') => {
                self.lit(b"false")?;
                Val::Bool(false)
            }
            Some(b'n') => {
                self.lit(b"null")?;
                Val::Null
            }
            Some(b'-' | b'0'..=b'9') => Val::Num(self.number()?),
            Some(_) => return self.err("unexpected character"),
            None => return self.err("unexpected end"),
        })
    }

    /// After a member's value: `,` (true) or `}` (false).
    #[inline(always)]
    fn member_end(&mut self) -> R<bool> {
        self.ws();
        match self.peek() {
            Some(b',') => {
                self.i += 1;
                Ok(true)
            }
            Some(b'}') => {
                self.i += 1;
                Ok(false)
            }
            _ => self.err("expected , or }"),
        }
    }

    /// `{` then optional `}`: true when the object is empty (cursor after it).
    #[inline(always)]
    fn open_object(&mut self) -> bool {
        self.i += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return true;
        }
        false
    }

    /// The members of `message` (cursor on `{`): its `role`, validating the rest.
    fn message_role(&mut self) -> R<Val<'a>> {
        let mut role = Val::Missing;
        if self.open_object() {
            return Ok(role);
        }
        loop {
            self.ws();
            let k = self.key()?;
            self.colon()?;
            if &*k == b"role" {
                role = self.capture()?;
            } else {
                self.skip_value()?;
            }
            if !self.member_end()? {
                return Ok(role);
            }
        }
    }

    /// The top-level object (cursor on `{`).
    fn top_object(&mut self, sk: &mut Skel<'a>) -> R<()> {
        if self.open_object() {
            return Ok(());
        }
        self.top_members(sk)
    }

    /// The members of the top-level object from the cursor (on a key) to its `}`.
    #[inline]
    fn top_members(&mut self, sk: &mut Skel<'a>) -> R<()> {
        loop {
            self.ws();
            let k = self.key()?;
            self.colon()?;
            match top_field(&k) {
                Some(Field::Message) => {
                    self.ws();
                    if self.peek() == Some(b'{') {
                        sk.role = self.message_role()?;
                    } else {
                        self.skip_value()?;
                        sk.role = Val::Missing;
                    }
                }
                Some(f) => {
                    let v = self.capture()?;
                    match f {
                        Field::Type => sk.type_ = v,
                        Field::Id => sk.id = v,
                        Field::ParentId => sk.parent_id = v,
                        Field::Timestamp => sk.timestamp = v,
                        Field::TargetId => sk.target_id = v,
                        Field::Label => sk.label = v,
                        Field::Version => sk.version = v,
                        Field::FirstKept => sk.first_kept_entry_id = v,
                        Field::Message => unreachable!(),
                    }
                }
                None => self.skip_value()?,
            }
            if !self.member_end()? {
                return Ok(());
            }
        }
    }
}

impl LineParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses one line as `JSON.parse` would and extracts its skeleton.
    pub fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Skel<'a>, JsonError> {
        let mut p = P::<true> {
            b: line,
            i: 0,
            stack: &mut self.stack,
            units: &mut self.units,
            deepest: 0,
        };
        let sk = p.value()?;
        if p.i != line.len() {
            return p.err("trailing characters after JSON value");
        }
        Ok(sk)
    }

    /// Reads the line at the start of `buf` (which may run on past it) when it holds an
    /// object: returns its skeleton and the position of the `\n` that ends it (or
    /// `buf.len()`). None when the line is anything else; [`LineParser::parse`] on the line
    /// alone then gives the exact answer. This spares a separate pass to find line ends.
    pub fn parse_object_line<'a>(&mut self, buf: &'a [u8]) -> Option<(Skel<'a>, usize)> {
        let mut sk = Skel::new(TopKind::Object);
        let end = self.parse_object_line_into(buf, &mut sk)?;
        Some((sk, end))
    }

    /// Finishes an object line whose first members we wrote ourselves and already put in `sk`
    /// (a line being appended): `buf[from]` is the `,` or `}` after those members. The rest is
    /// read and checked as [`LineParser::parse_object_line_into`] does (a later duplicate key
    /// still wins, as in `JSON.parse`); UTF-8 is checked from `from` on.
    pub fn parse_object_line_rest<'a>(
        &mut self,
        buf: &'a [u8],
        from: usize,
        sk: &mut Skel<'a>,
    ) -> Option<usize> {
        let mut p = P::<false> {
            b: buf,
            i: from,
            stack: &mut self.stack,
            units: &mut self.units,
            deepest: 0,
        };
        p.stack.clear();
        if p.member_end().ok()? {
            p.top_members(sk).ok()?;
        }
        p.ws();
        if p.i < buf.len() && buf[p.i] != b'\n' {
            return None;
        }
        sk.invalid_utf8 = simdutf8::basic::from_utf8(&buf[from..p.i]).is_err();
        Some(p.i)
    }

    /// [`LineParser::parse_object_line`] writing into `sk` (a fresh `Skel` of an object), which
    /// spares copying skeletons around; on None, `sk` holds garbage.
    #[inline]
    pub fn parse_object_line_into<'a>(
        &mut self,
        buf: &'a [u8],
        sk: &mut Skel<'a>,
    ) -> Option<usize> {
        let end = self.parse_object_line_into_no_utf8(buf, sk)?;
        // the ASCII whitespace after the value does not change UTF-8 validity
        sk.invalid_utf8 = simdutf8::basic::from_utf8(&buf[..end]).is_err();
        Some(end)
    }

    /// [`LineParser::parse_object_line_into`] without the UTF-8 check (`sk.invalid_utf8` is
    /// left as it was), for a caller that checks many lines at once: a line's bytes outside
    /// its strings are ASCII, so the flag is just whether `buf[..end]` is UTF-8.
    #[inline]
    pub fn parse_object_line_into_no_utf8<'a>(
        &mut self,
        buf: &'a [u8],
        sk: &mut Skel<'a>,
    ) -> Option<usize> {
        if buf.first() != Some(&b'{') {
            return None;
        }
        let mut p = P::<false> {
            b: buf,
            i: 0,
            stack: &mut self.stack,
            units: &mut self.units,
            deepest: 0,
        };
        p.stack.clear();
        p.top_object(sk).ok()?;
        p.ws();
        if p.i < buf.len() && buf[p.i] != b'\n' {
            return None;
        }
        Some(p.i)
    }
}

impl<'a, const LINE: bool> P<'a, '_, LINE> {
    /// One JSON value and the whitespace after it.
    fn value(&mut self) -> R<Skel<'a>> {
        self.stack.clear();
        self.ws();
        let mut sk;
        match self.peek() {
            Some(b'{') => {
                sk = Skel::new(TopKind::Object);
                self.top_object(&mut sk)?;
            }
            Some(b'[') => {
                self.skip_value()?;
                sk = Skel::new(TopKind::Array);
            }
            Some(b'"') => {
                let s = self.i;
                self.skip_string()?;
                sk = Skel::new(TopKind::String);
                sk.truthy = self.i - s > 2;
            }
            Some(b't') => {
                self.lit(b"true")?;
                sk = Skel::new(TopKind::True);
            }
            Some(b'f') => {
                self.lit(b"false")?;
                sk = Skel::new(TopKind::False);
                sk.truthy = false;
            }
            Some(b'n') => {
                self.lit(b"null")?;
                sk = Skel::new(TopKind::Null);
                sk.truthy = false;
            }
            Some(b'-' | b'0'..=b'9') => {
                let v = self.number()?;
                sk = Skel::new(TopKind::Number);
                sk.truthy = v != 0.0;
            }
            Some(_) => return self.err("unexpected character"),
            None => return self.err("empty"),
        }
        self.ws();
        if LINE {
            // Outside strings every byte of a valid line is ASCII, so this is "some string
            // held bytes that are not UTF-8".
            sk.invalid_utf8 = simdutf8::basic::from_utf8(&self.b[..self.i]).is_err();
        }
        Ok(sk)
    }
}

/// Checks that `line` is one JSON value exactly as `JSON.parse` accepts it (whitespace around
/// it allowed, `\n` included) and returns its container nesting depth: 0 for a scalar, 1 for
/// `[1]` or `{}`, 2 for `[[]]`. Linear in the line, no recursion, no allocation beyond one byte
/// per open container. This is what a caller with its own value builder (Python's) uses to
/// refuse what JavaScript refuses (`NaN`, `Infinity`, trailing commas) and to bound the depth
/// it will recurse to, before building anything.
pub fn check_value(line: &[u8]) -> Result<usize, JsonError> {
    let (mut stack, mut units) = (Vec::new(), Vec::new());
    let mut p = P::<true> {
        b: line,
        i: 0,
        stack: &mut stack,
        units: &mut units,
        deepest: 0,
    };
    p.skip_value()?;
    p.ws();
    if p.i != line.len() {
        return p.err("trailing characters after JSON value");
    }
    Ok(p.deepest)
}

/// Parses one line as `JSON.parse` would and extracts its skeleton (owned; for one-off use —
/// loops should keep a [`LineParser`]).
pub fn parse_line(line: &[u8]) -> Result<Skeleton, JsonError> {
    LineParser::new().parse(line).map(|s| s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Skeleton {
        parse_line(s.as_bytes()).unwrap()
    }
    fn bad(s: &[u8]) {
        assert!(
            parse_line(s).is_err(),
            "{:?} should fail",
            String::from_utf8_lossy(s)
        );
    }

    #[test]
    fn check_value_depth_and_js_grammar() {
        assert_eq!(check_value(b"1").unwrap(), 0);
        assert_eq!(check_value(b" {} ").unwrap(), 1);
        assert_eq!(check_value(b"[[1,{\"a\":[]}],2]").unwrap(), 4);
        assert_eq!(check_value(b"\"\\ud800 [[[\"").unwrap(), 0);
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(check_value(deep.as_bytes()).unwrap(), 100_000);
        for bad in [
            &b"NaN"[..],
            b"[Infinity]",
            b"[1,]",
            b"",
            b"{\"a\":1} x",
            b"\"abc",
        ] {
            assert!(
                check_value(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // a torn line of escaped quotes: one pass, not one pass per quote
        let mut torn = b"{\"a\":\"".to_vec();
        torn.extend(b"\\\"".repeat(1 << 20));
        let t = std::time::Instant::now();
        assert!(check_value(&torn).is_err());
        assert!(t.elapsed().as_secs_f64() < 1.0);
    }

    #[test]
    fn extracts_top_level_fields() {
        let s = ok(
            r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:00Z","message":{"content":[{"role":"x"}],"role":"user"}}"#,
        );
        assert_eq!(s.type_, JsVal::Str("message".into()));
        assert_eq!(s.id, JsVal::Str("a1".into()));
        assert_eq!(s.parent_id, JsVal::Null);
        assert_eq!(s.role, JsVal::Str("user".into()));
    }

    #[test]
    fn duplicate_keys_last_wins_and_escaped_keys_match() {
        let s = ok(r#"{"id":"a","\u0069d":"b"}"#);
        assert_eq!(s.id, JsVal::Str("b".into()));
    }

    #[test]
    fn accepts_what_json_parse_accepts() {
        ok("  [1,2,3]  ");
        ok("true");
        ok(r#""\ud800 lone""#);
        ok("-0.5e+10");
        ok("{\"a\":\"\u{2028}\"}");
        assert!(!ok("0").truthy);
        assert!(!ok("null").truthy);
        assert!(!ok("\"\"").truthy);
        assert!(ok("\"x\"").truthy);
        assert!(ok("{\"a\":1}\r").truthy);
    }

    #[test]
    fn rejects_what_json_parse_rejects() {
        bad(b"{\"a\":1");
        bad(b"not json");
        bad(b"{\"a\":01}");
        bad(b"{\"a\":1,}");
        bad(b"[1 2]");
        bad(b"\xef\xbb\xbf{}");
        bad(b"{\"a\":\"\x01\"}");
        bad(b"{\"a\":\"\\x\"}");
        bad(b"{} {}");
        bad(b"");
        bad(b"1.");
        bad(b"NaN");
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let n = 200_000;
        let mut s = String::new();
        s.push_str("{\"a\":");
        for _ in 0..n {
            s.push('[');
        }
        for _ in 0..n {
            s.push(']');
        }
        s.push('}');
        ok(&s);
    }

    #[test]
    fn invalid_utf8_in_strings_is_accepted_and_flagged() {
        let s = parse_line(b"{\"id\":\"a\xff\"}").unwrap();
        assert!(s.invalid_utf8);
        assert_eq!(s.id, JsVal::Str("a\u{FFFD}".into()));
        bad(b"{\"a\":1}\xff");
    }

    // ------------------------------------------------------------------ differential checks

    /// The straightforward byte-at-a-time reader this module replaced, kept as the oracle.
    mod reference {
        use super::super::{JsVal, JsonError, Skeleton, TopKind};
        type R<T> = Result<T, JsonError>;

        #[derive(Clone, Copy, PartialEq)]
        enum Field {
            Type,
            Id,
            ParentId,
            Timestamp,
            TargetId,
            Label,
            Version,
            FirstKept,
            Message,
        }

        fn top_field(key: &[u8]) -> Option<Field> {
            Some(match key {
                b"type" => Field::Type,
                b"id" => Field::Id,
                b"parentId" => Field::ParentId,
                b"timestamp" => Field::Timestamp,
                b"targetId" => Field::TargetId,
                b"label" => Field::Label,
                b"version" => Field::Version,
                b"firstKeptEntryId" => Field::FirstKept,
                b"message" => Field::Message,
                _ => return None,
            })
        }

        struct P<'a> {
            b: &'a [u8],
            i: usize,
            bad_utf8: bool,
        }

        #[inline]
        fn is_ws(c: u8) -> bool {
            c == b' ' || c == b'\t' || c == b'\n' || c == b'\r'
        }

        impl<'a> P<'a> {
            #[inline]
            fn err<T>(&self, msg: &'static str) -> R<T> {
                Err(JsonError { pos: self.i, msg })
            }
            #[inline]
            fn ws(&mut self) {
                while self.i < self.b.len() && is_ws(self.b[self.i]) {
                    self.i += 1;
                }
            }
            #[inline]
            fn peek(&self) -> Option<u8> {
                self.b.get(self.i).copied()
            }

            /// Checks one UTF-8 sequence starting at a byte >= 0x80; invalid ones only set a flag.
            #[inline]
            fn utf8_seq(&mut self) {
                let b = self.b;
                let c = b[self.i];
                let (n, min) = if c & 0xE0 == 0xC0 {
                    (1, 0x80)
                } else if c & 0xF0 == 0xE0 {
                    (2, 0x800)
                } else if c & 0xF8 == 0xF0 {
                    (3, 0x10000)
                } else {
                    self.bad_utf8 = true;
                    self.i += 1;
                    return;
                };
                let mut cp: u32 = (c as u32) & (0x7F >> (n + 1));
                for k in 1..=n {
                    match b.get(self.i + k) {
                        Some(&cc) if cc & 0xC0 == 0x80 => cp = (cp << 6) | (cc as u32 & 0x3F),
                        _ => {
                            self.bad_utf8 = true;
                            self.i += k;
                            return;
                        }
                    }
                }
                if cp < min || cp > 0x10FFFF || (0xD800..=0xDFFF).contains(&cp) {
                    self.bad_utf8 = true;
                }
                self.i += n + 1;
            }

            fn hex4(&mut self) -> R<u32> {
                if self.i + 4 > self.b.len() {
                    return self.err("bad \\u escape");
                }
                let mut v = 0u32;
                for k in 0..4 {
                    let c = self.b[self.i + k];
                    let d = match c {
                        b'0'..=b'9' => c - b'0',
                        b'a'..=b'f' => c - b'a' + 10,
                        b'A'..=b'F' => c - b'A' + 10,
                        _ => return self.err("bad \\u escape"),
                    } as u32;
                    v = v * 16 + d;
                }
                self.i += 4;
                Ok(v)
            }

            /// Scans a string (cursor on the opening quote). With `out`, decodes it (lone surrogates
            /// become U+FFFD, invalid UTF-8 is replaced as Node does).
            fn string(&mut self, mut out: Option<&mut Vec<u16>>) -> R<()> {
                self.i += 1;
                let b = self.b;
                loop {
                    let start = self.i;
                    // fast run of plain ASCII
                    while self.i < b.len() {
                        let c = b[self.i];
                        if c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c) {
                            break;
                        }
                        self.i += 1;
                    }
                    if let Some(o) = out.as_deref_mut() {
                        o.extend(b[start..self.i].iter().map(|&c| c as u16));
                    }
                    let Some(c) = self.peek() else {
                        return self.err("unterminated string");
                    };
                    match c {
                        b'"' => {
                            self.i += 1;
                            return Ok(());
                        }
                        b'\\' => {
                            self.i += 1;
                            let Some(e) = self.peek() else {
                                return self.err("unterminated string");
                            };
                            self.i += 1;
                            let u: u16 = match e {
                                b'"' => b'"' as u16,
                                b'\\' => b'\\' as u16,
                                b'/' => b'/' as u16,
                                b'b' => 8,
                                b'f' => 12,
                                b'n' => 10,
                                b'r' => 13,
                                b't' => 9,
                                b'u' => self.hex4()? as u16,
                                _ => {
                                    self.i -= 1;
                                    return self.err("bad escape");
                                }
                            };
                            if let Some(o) = out.as_deref_mut() {
                                o.push(u);
                            }
                        }
                        c if c < 0x20 => return self.err("control character in string"),
                        _ => {
                            let s = self.i;
                            let was_bad = self.bad_utf8;
                            self.bad_utf8 = false;
                            self.utf8_seq();
                            let bad = self.bad_utf8;
                            self.bad_utf8 |= was_bad;
                            if let Some(o) = out.as_deref_mut() {
                                if bad {
                                    let txt = String::from_utf8_lossy(&b[s..self.i]);
                                    o.extend(txt.encode_utf16());
                                } else {
                                    let txt =
                                        std::str::from_utf8(&b[s..self.i]).unwrap_or("\u{FFFD}");
                                    o.extend(txt.encode_utf16());
                                }
                            }
                        }
                    }
                }
            }

            fn number(&mut self) -> R<f64> {
                let b = self.b;
                let s = self.i;
                if self.peek() == Some(b'-') {
                    self.i += 1;
                }
                match self.peek() {
                    Some(b'0') => self.i += 1,
                    Some(b'1'..=b'9') => {
                        while matches!(self.peek(), Some(b'0'..=b'9')) {
                            self.i += 1;
                        }
                    }
                    _ => return self.err("bad number"),
                }
                if self.peek() == Some(b'.') {
                    self.i += 1;
                    if !matches!(self.peek(), Some(b'0'..=b'9')) {
                        return self.err("bad number");
                    }
                    while matches!(self.peek(), Some(b'0'..=b'9')) {
                        self.i += 1;
                    }
                }
                if matches!(self.peek(), Some(b'e' | b'E')) {
                    self.i += 1;
                    if matches!(self.peek(), Some(b'+' | b'-')) {
                        self.i += 1;
                    }
                    if !matches!(self.peek(), Some(b'0'..=b'9')) {
                        return self.err("bad number");
                    }
                    while matches!(self.peek(), Some(b'0'..=b'9')) {
                        self.i += 1;
                    }
                }
                // The grammar is checked above; the text is valid for Rust's float parser.
                let txt = unsafe { std::str::from_utf8_unchecked(&b[s..self.i]) };
                Ok(txt.parse::<f64>().unwrap_or(f64::NAN))
            }

            fn lit(&mut self, word: &'static [u8]) -> R<()> {
                if self.b.len() >= self.i + word.len()
                    && &self.b[self.i..self.i + word.len()] == word
                {
                    self.i += word.len();
                    Ok(())
                } else {
                    self.err("bad literal")
                }
            }

            /// Skips any value without recursion (cursor at its first byte, whitespace skipped).
            fn skip_value(&mut self) -> R<()> {
                // stack of open containers: true = object, false = array
                let mut stack: Vec<bool> = Vec::new();
                loop {
                    // parse one value start
                    self.ws();
                    match self.peek() {
                        Some(b'{') => {
                            self.i += 1;
                            self.ws();
                            if self.peek() == Some(b'}') {
                                self.i += 1;
                            } else {
                                stack.push(true);
                                self.key_colon()?;
                                continue;
                            }
                        }
                        Some(b'[') => {
                            self.i += 1;
                            self.ws();
                            if self.peek() == Some(b']') {
                                self.i += 1;
                            } else {
                                stack.push(false);
                                continue;
                            }
                        }
                        Some(b'"') => self.string(None)?,
                        Some(b't') => self.lit(b"true")?,
                        Some(b'f') => self.lit(b"false")?,
                        Some(b'n') => self.lit(b"null")?,
                        Some(b'-' | b'0'..=b'9') => {
                            self.number()?;
                        }
                        Some(_) => return self.err("unexpected character"),
                        None => return self.err("unexpected end"),
                    }
                    // after a value: close containers or move to the next element
                    loop {
                        let Some(&is_obj) = stack.last() else {
                            return Ok(());
                        };
                        self.ws();
                        match self.peek() {
                            Some(b',') => {
                                self.i += 1;
                                if is_obj {
                                    self.ws();
                                    self.key_colon()?;
                                }
                                break;
                            }
                            Some(b'}') if is_obj => {
                                self.i += 1;
                                stack.pop();
                            }
                            Some(b']') if !is_obj => {
                                self.i += 1;
                                stack.pop();
                            }
                            _ => return self.err("expected , or closing bracket"),
                        }
                    }
                }
            }

            fn key_colon(&mut self) -> R<()> {
                if self.peek() != Some(b'"') {
                    return self.err("expected object key");
                }
                self.string(None)?;
                self.ws();
                if self.peek() != Some(b':') {
                    return self.err("expected :");
                }
                self.i += 1;
                Ok(())
            }

            /// Reads a key into `buf` as UTF-8 bytes (fast path: no escapes).
            fn key(&mut self, buf: &mut Vec<u8>) -> R<()> {
                if self.peek() != Some(b'"') {
                    return self.err("expected object key");
                }
                let b = self.b;
                let s = self.i + 1;
                let mut j = s;
                while j < b.len() && b[j] != b'"' && b[j] != b'\\' && b[j] >= 0x20 && b[j] < 0x80 {
                    j += 1;
                }
                buf.clear();
                if j < b.len() && b[j] == b'"' {
                    buf.extend_from_slice(&b[s..j]);
                    self.i = j + 1;
                    return Ok(());
                }
                let mut u = Vec::new();
                self.string(Some(&mut u))?;
                buf.extend_from_slice(String::from_utf16_lossy(&u).as_bytes());
                Ok(())
            }

            /// A value we keep: scalars are decoded, containers skipped and marked `Composite`.
            fn capture(&mut self) -> R<JsVal> {
                self.ws();
                Ok(match self.peek() {
                    Some(b'"') => {
                        let mut u = Vec::new();
                        self.string(Some(&mut u))?;
                        JsVal::Str(String::from_utf16_lossy(&u))
                    }
                    Some(b'{') | Some(b'[') => {
                        self.skip_value()?;
                        JsVal::Composite
                    }
                    Some(b't') => {
                        self.lit(b"true")?;
                        JsVal::Bool(true)
                    }
                    Some(b'f') => {
                        self.lit(b"false")?;
                        JsVal::Bool(false)
                    }
                    Some(b'n') => {
                        self.lit(b"null")?;
                        JsVal::Null
                    }
                    Some(b'-' | b'0'..=b'9') => JsVal::Num(self.number()?),
                    Some(_) => return self.err("unexpected character"),
                    None => return self.err("unexpected end"),
                })
            }

            /// Iterates an object's members (cursor on `{`), calling `f(key, parser)` which must
            /// consume the value.
            fn members(&mut self, mut f: impl FnMut(&[u8], &mut Self) -> R<()>) -> R<()> {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(());
                }
                let mut key = Vec::with_capacity(32);
                loop {
                    self.ws();
                    self.key(&mut key)?;
                    self.ws();
                    if self.peek() != Some(b':') {
                        return self.err("expected :");
                    }
                    self.i += 1;
                    self.ws();
                    f(&key, self)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return self.err("expected , or }"),
                    }
                }
            }
        }

        /// Parses one line as `JSON.parse` would and extracts its skeleton.
        pub fn parse_line(line: &[u8]) -> Result<Skeleton, JsonError> {
            let mut p = P {
                b: line,
                i: 0,
                bad_utf8: false,
            };
            p.ws();
            let mut sk;
            match p.peek() {
                Some(b'{') => {
                    sk = Skeleton::new(TopKind::Object);
                    let mut s2 = std::mem::replace(&mut sk, Skeleton::new(TopKind::Object));
                    p.members(|key, p| {
                        match top_field(key) {
                            Some(Field::Message) => {
                                if p.peek() == Some(b'{') {
                                    let mut role = JsVal::Missing;
                                    p.members(|k, p| {
                                        if k == b"role" {
                                            role = p.capture()?;
                                        } else {
                                            p.skip_value()?;
                                        }
                                        Ok(())
                                    })?;
                                    s2.role = role;
                                } else {
                                    p.skip_value()?;
                                    s2.role = JsVal::Missing;
                                }
                            }
                            Some(f) => {
                                let v = p.capture()?;
                                match f {
                                    Field::Type => s2.type_ = v,
                                    Field::Id => s2.id = v,
                                    Field::ParentId => s2.parent_id = v,
                                    Field::Timestamp => s2.timestamp = v,
                                    Field::TargetId => s2.target_id = v,
                                    Field::Label => s2.label = v,
                                    Field::Version => s2.version = v,
                                    Field::FirstKept => s2.first_kept_entry_id = v,
                                    Field::Message => unreachable!(),
                                }
                            }
                            None => p.skip_value()?,
                        }
                        Ok(())
                    })?;
                    sk = s2;
                }
                Some(b'[') => {
                    p.skip_value()?;
                    sk = Skeleton::new(TopKind::Array);
                }
                Some(b'"') => {
                    let s = p.i;
                    p.string(None)?;
                    sk = Skeleton::new(TopKind::String);
                    sk.truthy = p.i - s > 2;
                }
                Some(b't') => {
                    p.lit(b"true")?;
                    sk = Skeleton::new(TopKind::True);
                }
                Some(b'f') => {
                    p.lit(b"false")?;
                    sk = Skeleton::new(TopKind::False);
                    sk.truthy = false;
                }
                Some(b'n') => {
                    p.lit(b"null")?;
                    sk = Skeleton::new(TopKind::Null);
                    sk.truthy = false;
                }
                Some(b'-' | b'0'..=b'9') => {
                    let v = p.number()?;
                    sk = Skeleton::new(TopKind::Number);
                    sk.truthy = v != 0.0;
                }
                Some(_) => return p.err("unexpected character"),
                None => return p.err("empty"),
            }
            p.ws();
            if p.i != line.len() {
                return p.err("trailing characters after JSON value");
            }
            sk.invalid_utf8 = p.bad_utf8;
            Ok(sk)
        }
    }

    /// xorshift64*: deterministic, no dependencies.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    const SEEDS: &[&str] = &[
        r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:00Z","message":{"content":[{"role":"x"}],"role":"user"}}"#,
        r#"{"type":"label","id":"b\u0032","parentId":"a1","targetId":"a\ud800","label":"x\ny","timestamp":1700000000000}"#,
        r#"{"type":"compaction","id":7,"parentId":true,"firstKeptEntryId":{"a":[1,2.5e-3,-0]},"version":"3","summary":"long text long text long text long text long text long text \" \\ \/ \b\f\r\t"}"#,
        r#"{"type":"session","version":3,"id":"gen","timestamp":"2026-01-01T21:13:17.384Z","cwd":"/home/\u00e9\u4e2d"}"#,
        r#" [ {"a" : [ true , false , null ] } , "s" , 1 ] "#,
        "{\"id\":\"\u{4e2d}\u{6587}\u{1f600}\",\"message\":{\"role\":\"assistant\",\"role\":1}}",
        r#""plain string""#,
        "0",
        "-12.5E+7",
    ];

    const ALPHABET: &[&[u8]] = &[
        b"\"",
        b"\\",
        b"{",
        b"}",
        b"[",
        b"]",
        b":",
        b",",
        b" ",
        b"\t",
        b"\r",
        b"\n",
        b"0",
        b"1",
        b"-",
        b".",
        b"e",
        b"E",
        b"+",
        b"a",
        b"u",
        b"true",
        b"null",
        b"\\u",
        b"\\ud83d",
        b"\\n",
        b"\x01",
        b"\x1f",
        b"\x7f",
        b"\x80",
        b"\xc3\xa9",
        b"\xe4\xb8",
        b"\xf0\x9f\x98\x80",
        b"\xff",
        b"\xed\xa0\x80",
        b"id",
        b"\"id\":",
        b"\"role\"",
    ];

    fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
        let mut v = base.to_vec();
        for _ in 0..1 + rng.below(3) {
            let at = if v.is_empty() {
                0
            } else {
                rng.below(v.len() + 1)
            };
            match rng.below(4) {
                0 if at < v.len() => {
                    v.remove(at);
                }
                1 if at < v.len() => {
                    let piece = ALPHABET[rng.below(ALPHABET.len())];
                    v.splice(at..(at + 1).min(v.len()), piece.iter().copied());
                }
                _ => {
                    let piece = ALPHABET[rng.below(ALPHABET.len())];
                    v.splice(at..at, piece.iter().copied());
                }
            }
        }
        v
    }

    fn same(line: &[u8]) {
        let got = parse_line(line);
        let want = reference::parse_line(line);
        match (&got, &want) {
            (Ok(g), Ok(w)) => assert_eq!(g, w, "{:?}", String::from_utf8_lossy(line)),
            (Err(g), Err(w)) => assert_eq!(g, w, "{:?}", String::from_utf8_lossy(line)),
            _ => panic!(
                "{:?}: got {got:?}, reference {want:?}",
                String::from_utf8_lossy(line)
            ),
        }
    }

    #[test]
    fn agrees_with_the_reference_reader_on_mutated_lines() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..200_000 {
            let seed = SEEDS[rng.below(SEEDS.len())].as_bytes();
            let line = mutate(&mut rng, seed);
            same(&line);
        }
    }

    #[test]
    fn agrees_with_the_reference_reader_on_long_strings() {
        // runs longer than the vector widths, with the special byte at every offset
        let mut rng = Rng(7);
        for len in [15usize, 16, 17, 31, 32, 33, 63, 64, 65, 100, 200] {
            for at in 0..len {
                for special in [b'"', b'\\', 0x01u8, 0x1f, 0x80, b'a'] {
                    let mut body: Vec<u8> = (0..len).map(|_| b"abc xyz"[rng.below(7)]).collect();
                    body[at] = special;
                    let mut line = b"{\"id\":\"".to_vec();
                    line.extend_from_slice(&body);
                    line.extend_from_slice(b"\",\"x\":\"");
                    line.extend_from_slice(&body);
                    line.extend_from_slice(b"\"}");
                    same(&line);
                    same(&line[..line.len() - 2]);
                }
            }
        }
    }

    #[test]
    fn agrees_with_the_reference_reader_on_long_strings_full_of_escapes() {
        // escapes of every kind at every offset of the 64-byte blocks, and broken ones
        let pieces: &[&[u8]] = &[
            b"\\n",
            b"\\\"",
            b"\\\\",
            b"\\u00e9",
            b"\\ud83d\\ude00",
            b"\\u12",
            b"\\x",
            b"\\",
            b"\x01",
            b"\xc3\xa9",
            b"\xff",
            b"abcdefgh",
            b"0123456789abcdef0123456789abcdef",
            b" ",
            b"\"",
        ];
        let mut rng = Rng(42);
        for _ in 0..50_000 {
            let mut body = Vec::new();
            for _ in 0..rng.below(40) {
                let k = rng.below(pieces.len() * 4);
                // mostly plain text, sometimes an escape or a special byte
                body.extend_from_slice(if k < pieces.len() {
                    pieces[k]
                } else {
                    pieces[11 + k % 3]
                });
            }
            let mut line = b"{\"type\":\"message\",\"message\":{\"content\":[{\"text\":\"".to_vec();
            line.extend_from_slice(&body);
            line.extend_from_slice(b"\"}],\"role\":\"user\"},\"id\":\"");
            line.extend_from_slice(&body[..body.len().min(70)]);
            line.extend_from_slice(b"\"}");
            same(&line);
        }
    }

    #[test]
    fn agrees_with_the_reference_reader_on_the_corpus() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus");
        let mut stack = vec![std::path::PathBuf::from(root)];
        let mut lines = 0;
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    let data = std::fs::read(&p).unwrap();
                    for line in data.split(|&c| c == b'\n') {
                        let line = line.strip_suffix(b"\r").unwrap_or(line);
                        same(line);
                        lines += 1;
                    }
                }
            }
        }
        assert!(lines > 0);
    }

    #[test]
    fn string_scanners_agree() {
        let mut rng = Rng(99);
        for _ in 0..20_000 {
            let n = rng.below(150);
            let v: Vec<u8> = (0..n)
                .map(|_| {
                    if rng.below(40) == 0 {
                        rng.next() as u8
                    } else {
                        b'a' + rng.below(26) as u8
                    }
                })
                .collect();
            let start = if n == 0 { 0 } else { rng.below(n) };
            let want = find_special_tail(&v, start);
            assert_eq!(find_special(&v, start), want);
            assert_eq!(find_special_swar(&v, start), want);
        }
    }
}
