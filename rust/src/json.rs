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
#[derive(Debug, Clone)]
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
    fn new(top: TopKind) -> Self {
        Skeleton {
            top,
            truthy: true,
            type_: JsVal::Missing,
            id: JsVal::Missing,
            parent_id: JsVal::Missing,
            timestamp: JsVal::Missing,
            target_id: JsVal::Missing,
            label: JsVal::Missing,
            version: JsVal::Missing,
            first_kept_entry_id: JsVal::Missing,
            role: JsVal::Missing,
            invalid_utf8: false,
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
                if c == b'"' || c == b'\\' || c < 0x20 || c >= 0x80 {
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
                            let txt = std::str::from_utf8(&b[s..self.i]).unwrap_or("\u{FFFD}");
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
        if self.b.len() >= self.i + word.len() && &self.b[self.i..self.i + word.len()] == word {
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
    let mut p = P { b: line, i: 0, bad_utf8: false };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Skeleton {
        parse_line(s.as_bytes()).unwrap()
    }
    fn bad(s: &[u8]) {
        assert!(parse_line(s).is_err(), "{:?} should fail", String::from_utf8_lossy(s));
    }

    #[test]
    fn extracts_top_level_fields() {
        let s = ok(r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:00Z","message":{"content":[{"role":"x"}],"role":"user"}}"#);
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
}
