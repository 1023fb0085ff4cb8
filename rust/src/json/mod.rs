//! A validating, non-recursive JSON line reader for Pi's session lines.
//!
//! It accepts exactly what JavaScript's `JSON.parse` accepts on a line Pi's loader has
//! decoded, and extracts only the top-level
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
//!
//! Files: this one holds the value types and the parser; `strings.rs` the SIMD string-body
//! scanning; `reference.rs` (tests only) the plain reader the fast one is checked against.

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
    /// JavaScript truthiness (`if (x)`), as [`Val::truthy`].
    pub fn truthy(&self) -> bool {
        self.as_val().truthy()
    }
    /// This value as a [`Val`] borrowing its string.
    pub fn as_val(&self) -> Val<'_> {
        match self {
            JsVal::Missing => Val::Missing,
            JsVal::Null => Val::Null,
            JsVal::Bool(b) => Val::Bool(*b),
            JsVal::Num(n) => Val::Num(*n),
            JsVal::Str(s) => Val::Str(Cow::Borrowed(s)),
            JsVal::Composite => Val::Composite,
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
    /// JavaScript truthiness (`if (x)`), for values JSON can express.
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

/// Where the stats row's facts sit in an object line.
///
/// Recorded by the parse when the parser is asked to ([`LineParser::with_rows`]), so the row
/// never walks the line a second time.
///
/// Offsets are bytes from the line's start to a value's first byte (0: no such value; offset 0
/// is the line's `{`); a repeated key's last value counts, as in `JSON.parse`. Keys are
/// compared decoded (`"us\u0061ge"` is `usage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RowSpans {
    /// the top-level `usage`
    pub usage: u32,
    /// the (last) `message` is an object
    pub message_obj: bool,
    /// `message.role`
    pub role: u32,
    /// `message.usage`
    pub msg_usage: u32,
    /// `message.content` is an array
    pub content_array: bool,
    /// its elements that are objects whose (last) `type` is the string `toolCall`
    pub tool_calls: u32,
    /// a bound on the line's container nesting (at least its depth)
    pub depth: u32,
    /// a content block's key or `type` held an escape: the row must be read another way
    pub undecided: bool,
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
    /// The line's text is already what `JSON.stringify(JSON.parse(line))` writes.
    ///
    /// As far as the parse saw (see [`LineParser::parse`]; the caller also requires
    /// `!invalid_utf8`).
    pub canon: bool,
    /// the stats row's facts (all absent unless the parser records them)
    pub rows: RowSpans,
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
            canon: false,
            rows: RowSpans::default(),
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

mod strings;

pub use strings::find_special;
pub use strings::skip_body as skip_string_body;
use strings::{check_escape, quote16, skip_body, OddEscapes};

// ---------------------------------------------------------------------------- the parser

/// Reusable scratch for parsing many lines (one per thread).
#[derive(Default)]
pub struct LineParser {
    /// open containers of the value being skipped: 1 = object, 0 = array
    stack: Vec<u8>,
    /// UTF-16 code units of a captured string with escapes
    units: Vec<u16>,
    /// record each object line's [`RowSpans`]
    rows: bool,
}

/// [`canon_rest`] is false for a line with an object of more keys than this (the check stays
/// linear; the caller's exact writer handles such a line).
const CANON_MAX_KEYS: usize = 32;

/// The closing quote of the string whose body starts at `s` of canonical text (the first `"`
/// after an even run of backslashes), if any. Linear: each run is counted once.
fn string_end(b: &[u8], s: usize) -> Option<usize> {
    let mut j = s;
    loop {
        j += memchr::memchr(b'"', &b[j..])?;
        let run = b[s..j].iter().rev().take_while(|&&c| c == b'\\').count();
        if run % 2 == 0 {
            return Some(j);
        }
        j += 1;
    }
}

/// The rest of "this line is `JSON.stringify`'s text" for a line marked [`Skel::canon`].
///
/// Every number is spelled as JavaScript spells it, and no object in
/// it has a repeated key (`JSON.parse` keeps the last), an array-index key (JavaScript lists
/// those first) or more than [`CANON_MAX_KEYS`] keys.
///
/// Kept out of the parse so that only the lines a caller copies pay for it. Such a line's
/// escapes are `JSON.stringify`'s own, so equal key texts are equal keys. Linear in the line,
/// no recursion; false for text that is not a whole JSON value without whitespace.
pub fn canon_rest(line: &[u8]) -> bool {
    thread_local! {
        // (reused: a caller checks every line of a session, most with a few small objects)
        static STACKS: std::cell::RefCell<CanonStacks> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    STACKS.with(|st| match st.try_borrow_mut() {
        Ok(mut st) => {
            let (keys, open) = &mut *st;
            keys.clear();
            open.clear();
            canon_rest_with(line, keys, open)
        }
        Err(_) => canon_rest_with(line, &mut Vec::new(), &mut Vec::new()),
    })
}

/// [`canon_rest`]'s stacks: the key spans of the open objects side by side; per open container,
/// where its keys start (`usize::MAX`: an array).
type CanonStacks = (Vec<(usize, usize)>, Vec<usize>);

fn canon_rest_with(line: &[u8], keys: &mut Vec<(usize, usize)>, open: &mut Vec<usize>) -> bool {
    let b = line;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let s = i + 1;
                // the closing quote: the first `"` after an even run of backslashes (message
                // texts hold many `\n`, so looking for quotes alone stops less often); most
                // strings are short: one 16-byte probe settles them without a call
                let j = match quote16(b, s) {
                    Some((k, _)) => k,
                    None => match string_end(b, s) {
                        Some(k) => k,
                        None => return false,
                    },
                };
                i = j + 1;
                if b.get(i) == Some(&b':') {
                    let from = match open.last() {
                        Some(&f) if f != usize::MAX => f,
                        _ => return false,
                    };
                    let k = &b[s..j];
                    let have = &keys[from..];
                    if have.len() >= CANON_MAX_KEYS
                        || have.iter().any(|&(x, y)| &b[x..y] == k)
                        || (k.first().is_some_and(u8::is_ascii_digit)
                            && crate::jstext::is_array_index(k))
                    {
                        return false;
                    }
                    keys.push((s, j));
                    i += 1;
                }
            }
            b'-' | b'0'..=b'9' => {
                let s = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let tok = &b[s..i];
                if crate::jstext::may_differ(tok) && !crate::jstext::is_js_number_text(tok) {
                    return false;
                }
            }
            b'{' => {
                open.push(keys.len());
                i += 1;
            }
            b'[' => {
                open.push(usize::MAX);
                i += 1;
            }
            b'}' => {
                match open.pop() {
                    Some(f) if f != usize::MAX => keys.truncate(f),
                    _ => return false,
                }
                i += 1;
            }
            b']' => {
                if open.pop() != Some(usize::MAX) {
                    return false;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    open.is_empty()
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
    /// no sign yet that the text is not `JSON.stringify`'s (see [`Skel::canon`])
    canon: bool,
    /// record [`RowSpans`]
    rows: bool,
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
            self.canon = false;
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
        if let Some((k, _)) = quote16(b, s) {
            self.i = k + 1;
            return Ok(());
        }
        match skip_body(b, s) {
            Ok(e) => {
                self.i = e;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Reads a string (cursor on the opening quote).
    ///
    /// Borrowed when it has no escapes and is UTF-8; otherwise decoded as JavaScript sees it (lone
    /// surrogates read as U+FFFD, bytes that are not UTF-8 replaced as Node's decoder replaces
    /// them).
    #[inline]
    fn string(&mut self) -> R<Cow<'a, str>> {
        let b = self.b;
        let s = self.i + 1;
        // a short string: one probe, which also tells whether it is ASCII
        let (j, ascii) = match quote16(b, s) {
            Some(found) => found,
            None => {
                let j = find_special(b, s);
                if b.get(j) != Some(&b'"') {
                    return self.string_slow(s);
                }
                (j, b[s..j].is_ascii())
            }
        };
        self.i = j + 1;
        let raw = &b[s..j];
        if ascii {
            // SAFETY: ASCII is UTF-8.
            return Ok(Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(raw) }));
        }
        Ok(match std::str::from_utf8(raw) {
            Ok(t) => Cow::Borrowed(t),
            Err(_) => Cow::Owned(String::from_utf8_lossy(raw).into_owned()),
        })
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
        if let Some((j, _)) = quote16(b, s) {
            self.i = j + 1;
            return Ok(Cow::Borrowed(&b[s..j]));
        }
        let j = find_special(b, s);
        if b.get(j) == Some(&b'"') {
            self.i = j + 1;
            return Ok(Cow::Borrowed(&b[s..j]));
        }
        let k = self.string_slow(s)?.into_owned().into_bytes();
        Ok(Cow::Owned(k))
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

    /// The members of `message` (cursor on `{`): its `role`, validating the rest; with
    /// [`P::rows`], its row facts into `rf` too.
    fn message_role(&mut self, rf: &mut RowSpans) -> R<Val<'a>> {
        let mut role = Val::Missing;
        if self.open_object() {
            return Ok(role);
        }
        loop {
            self.ws();
            let k = self.key()?;
            self.colon()?;
            if &*k == b"role" {
                if self.rows {
                    self.ws();
                    rf.role = self.i as u32;
                }
                role = self.capture()?;
            } else if self.rows && &*k == b"usage" {
                self.ws();
                rf.msg_usage = self.i as u32;
                self.skip_value()?;
            } else if self.rows && &*k == b"content" {
                self.ws();
                rf.content_array = self.peek() == Some(b'[');
                rf.tool_calls = 0;
                if rf.content_array {
                    rf.tool_calls = self.content_calls(rf)?;
                } else {
                    self.skip_value()?;
                }
            } else {
                self.skip_value()?;
            }
            if !self.member_end()? {
                return Ok(role);
            }
        }
    }

    /// `message.content` (cursor on `[`), validated as [`P::skip_value`] does (same errors):
    /// how many of its elements are objects whose last `type` is the string `toolCall`. A block
    /// key or `type` string holding an escape sets `rf.undecided` (compared raw here).
    fn content_calls(&mut self, rf: &mut RowSpans) -> R<u32> {
        let b = self.b;
        self.i += 1;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(0);
        }
        let mut calls = 0u32;
        loop {
            self.ws();
            if self.peek() == Some(b'{') {
                let mut call = false;
                if !self.open_object() {
                    loop {
                        self.ws();
                        if self.peek() != Some(b'"') {
                            return self.err("expected object key");
                        }
                        let s = self.i;
                        self.skip_string()?;
                        let key = &b[s + 1..self.i - 1];
                        self.colon()?;
                        if memchr::memchr(b'\\', key).is_some() {
                            rf.undecided = true;
                        }
                        if key == b"type" {
                            self.ws();
                            let v = self.i;
                            self.skip_value()?;
                            let text = &b[v..self.i];
                            call = text == b"\"toolCall\"";
                            if text.first() == Some(&b'"') && memchr::memchr(b'\\', text).is_some()
                            {
                                rf.undecided = true;
                            }
                        } else {
                            self.skip_value()?;
                        }
                        if !self.block_member_end()? {
                            break;
                        }
                    }
                }
                calls = calls.saturating_add(u32::from(call));
            } else {
                self.skip_value()?;
            }
            let mut c = b.get(self.i).copied();
            if matches!(c, Some(b' ' | b'\t' | b'\n' | b'\r')) {
                self.ws();
                c = self.peek();
            }
            match c {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(calls);
                }
                _ => return self.err("expected , or closing bracket"),
            }
        }
    }

    /// After a content block's member: `,` (true) or `}` (false), with [`P::skip_value`]'s
    /// error.
    #[inline(always)]
    fn block_member_end(&mut self) -> R<bool> {
        let mut c = self.b.get(self.i).copied();
        if matches!(c, Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.ws();
            c = self.peek();
        }
        match c {
            Some(b',') => {
                self.i += 1;
                self.ws();
                Ok(true)
            }
            Some(b'}') => {
                self.i += 1;
                Ok(false)
            }
            _ => self.err("expected , or closing bracket"),
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
                    // a repeated `message`: the last one is the message
                    let usage = sk.rows.usage;
                    sk.rows = RowSpans {
                        usage,
                        ..RowSpans::default()
                    };
                    if self.peek() == Some(b'{') {
                        sk.rows.message_obj = self.rows;
                        sk.role = self.message_role(&mut sk.rows)?;
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
                None => {
                    if self.rows && &*k == b"usage" {
                        self.ws();
                        sk.rows.usage = self.i as u32;
                    }
                    self.skip_value()?
                }
            }
            if !self.member_end()? {
                if self.rows {
                    // the walks above reach 4 levels (a content block's members); what they
                    // skipped nests `deepest` more
                    sk.rows.depth = u32::try_from(self.deepest + 4).unwrap_or(u32::MAX);
                }
                return Ok(());
            }
        }
    }
}

impl LineParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that also records each object line's [`RowSpans`] in its skeleton.
    ///
    /// The parse then walks `message.content`'s blocks' members instead of skipping them whole.
    pub fn with_rows(rows: bool) -> Self {
        LineParser {
            rows,
            ..Self::default()
        }
    }

    /// A parser at `i` of `b`, nothing open.
    fn at<'a, const LINE: bool>(&mut self, b: &'a [u8], i: usize) -> P<'a, '_, LINE> {
        self.stack.clear();
        OddEscapes::clear();
        P {
            b,
            i,
            stack: &mut self.stack,
            units: &mut self.units,
            deepest: 0,
            canon: true,
            rows: self.rows,
        }
    }

    /// Parses one line as `JSON.parse` would and extracts its skeleton.
    ///
    /// `canon` with [`canon_rest`] tells whether the line already is
    /// `JSON.stringify(JSON.parse(line))`'s text (their one home; `crate::jstext::is_stringify_text`
    /// is the test oracle), leaving out only the UTF-8 check (`invalid_utf8`). `canon`: no
    /// whitespace around or between tokens; escapes only as `JSON.stringify` writes them (`\"`,
    /// `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, lowercase `\u00xx` for the other control characters).
    /// The numbers' spelling and the keys (repeated, array-index, too many) are left to
    /// [`canon_rest`], run only on the lines a caller copies: the open pays nothing for them.
    pub fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Skel<'a>, JsonError> {
        let mut p = self.at::<true>(line, 0);
        let mut sk = p.value()?;
        if p.i != line.len() {
            return p.err("trailing characters after JSON value");
        }
        sk.canon = p.canon && !OddEscapes::seen();
        Ok(sk)
    }

    /// Reads the line at the start of `buf` (which may run on past it) when it holds an object.
    ///
    /// Returns its skeleton and the position of the `\n` that ends it (or `buf.len()`). None when
    /// the line is anything else; [`LineParser::parse`] on the line alone then gives the exact
    /// answer. This spares a separate pass to find line ends.
    pub fn parse_object_line<'a>(&mut self, buf: &'a [u8]) -> Option<(Skel<'a>, usize)> {
        let mut sk = Skel::new(TopKind::Object);
        let end = self.parse_object_line_into(buf, &mut sk)?;
        Some((sk, end))
    }

    /// Finishes an object line whose first members we wrote and put in `sk` ourselves. For a line
    /// being appended.
    ///
    /// `buf[from]` is the `,` or `}` after those members. The rest is read and checked as
    /// [`LineParser::parse_object_line_into`] does (a later duplicate key still wins, as in
    /// `JSON.parse`); UTF-8 is checked from `from` on. `sk.canon` is set as that parse sets it,
    /// from what the members from `from` on show: the caller's members must be
    /// `JSON.stringify`'s text (as `crate::append` writes them).
    pub fn parse_object_line_rest<'a>(
        &mut self,
        buf: &'a [u8],
        from: usize,
        sk: &mut Skel<'a>,
    ) -> Option<usize> {
        let mut p = self.at::<false>(buf, from);
        if p.member_end().ok()? {
            p.top_members(sk).ok()?;
        }
        let (canon, end) = (p.canon, p.i);
        p.ws();
        if p.i < buf.len() && buf[p.i] != b'\n' {
            return None;
        }
        sk.invalid_utf8 = simdutf8::basic::from_utf8(&buf[from..p.i]).is_err();
        // the members before `from` are the caller's, which writes them as `JSON.stringify`
        // does: the line is marked `canon` on what the rest shows
        sk.canon = canon && !OddEscapes::seen() && p.i == end;
        Some(p.i)
    }

    /// [`LineParser::parse_object_line`] writing into `sk`, a fresh `Skel` of an object. This
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

    /// [`LineParser::parse_object_line_into`] without the UTF-8 check.
    ///
    /// `sk.invalid_utf8` is left as it was, for a caller that checks many lines at once: a line's
    /// bytes outside its strings are ASCII, so the flag is just whether `buf[..end]` is UTF-8.
    #[inline]
    pub fn parse_object_line_into_no_utf8<'a>(
        &mut self,
        buf: &'a [u8],
        sk: &mut Skel<'a>,
    ) -> Option<usize> {
        if buf.first() != Some(&b'{') {
            return None;
        }
        let mut p = self.at::<false>(buf, 0);
        p.top_object(sk).ok()?;
        let (canon, end) = (p.canon, p.i);
        p.ws();
        if p.i < buf.len() && buf[p.i] != b'\n' {
            return None;
        }
        // the line's text ends before one `\r` ahead of its `\n`
        sk.canon = canon && !OddEscapes::seen() && (p.i == end || &buf[end..p.i] == b"\r");
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

/// Checks that `line` is one JSON value as `JSON.parse` accepts it; returns its nesting depth.
///
/// Whitespace around it is allowed, `\n` included. The depth: 0 for a scalar, 1 for
/// `[1]` or `{}`, 2 for `[[]]`. Linear in the line, no recursion, no allocation beyond one byte
/// per open container. This is what a caller with its own value builder (Python's) uses to
/// refuse what JavaScript refuses (`NaN`, `Infinity`, trailing commas) and to bound the depth
/// it will recurse to, before building anything.
pub fn check_value(line: &[u8]) -> Result<usize, JsonError> {
    let mut parser = LineParser::new();
    let mut p = parser.at::<true>(line, 0);
    p.skip_value()?;
    p.ws();
    if p.i != line.len() {
        return p.err("trailing characters after JSON value");
    }
    Ok(p.deepest)
}

/// Parses one line as `JSON.parse` would and extracts its skeleton (owned). For one-off use: loops
/// should keep a [`LineParser`].
pub fn parse_line(line: &[u8]) -> Result<Skeleton, JsonError> {
    LineParser::new().parse(line).map(|s| s.to_owned())
}

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
