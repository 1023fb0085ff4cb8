//! The straightforward byte-at-a-time reader the fast one replaced, kept as its oracle. Test-only:
//! the fast reader is compared against it (see `tests.rs`).

use super::{JsVal, JsonError, Skeleton, TopKind};
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
