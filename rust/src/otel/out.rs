//! OTLP/JSON text: attribute values, spans and the request line around them.
//!
//! What `opentelemetry-exporter-otlp-json-file` writes: camelCase keys, trace and span ids as
//! lowercase hex, 64-bit integers (times in nanoseconds, `intValue`) as decimal strings, enums
//! as integers. Strings are escaped as `JSON.stringify` and orjson escape them (`"`, `\`, the
//! C0 controls; everything else as UTF-8).

use serde_json::Value;

/// One attribute value (`AnyValue`).
#[derive(Debug, Clone)]
pub enum AttrValue {
    Str(String),
    Bool(bool),
    Int(i64),
    Double(f64),
    /// an array of strings (`gen_ai.response.finish_reasons`)
    Strs(Vec<String>),
    /// a string already escaped as a JSON string's text (the bytes between its quotes: what
    /// [`push_str`] writes of it); valid UTF-8
    Escaped(Vec<u8>),
}

/// Attributes in the order they are written; a key set twice keeps its first place.
#[derive(Debug, Clone, Default)]
pub struct Attrs(pub Vec<(&'static str, AttrValue)>);

impl Attrs {
    pub fn set(&mut self, key: &'static str, v: AttrValue) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = v,
            None => self.0.push((key, v)),
        }
    }
    pub fn str(&mut self, key: &'static str, v: Option<&str>) {
        if let Some(s) = v {
            self.set(key, AttrValue::Str(s.to_string()));
        }
    }
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| match v {
                AttrValue::Str(s) => Some(s.as_str()),
                _ => None,
            })
    }
}

/// Bytes [`push_str`] escapes: `"`, `\\` and the C0 controls.
const fn escape_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
}
static ESCAPE: [bool; 256] = escape_table();

/// Whether one of the 8 bytes of `w` is `"`, `\\` or below 0x20 (exact, no false positives).
#[inline]
fn word_needs_escape(w: u64) -> bool {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES * 0x80;
    // per byte: its low 7 bits + 0x60 sets bit 7 exactly when they are >= 0x20 (no carry into
    // the next byte); a byte with bit 7 set is not a control character
    let below_space = !((w & !HIGH) + ONES * 0x60) & !w & HIGH;
    let quote = has_zero(w ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(w ^ (ONES * u64::from(b'\\')));
    (below_space | quote | backslash) != 0
}

/// Bit 7 of each byte of `x` that is zero (exact).
#[inline]
fn has_zero(x: u64) -> u64 {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES * 0x80;
    !(((x & !HIGH) + !HIGH) | x) & HIGH
}

/// `s` as a JSON string (quoted, escaped) appended to `out`.
///
/// Runs without a byte to escape are found 8 bytes at a time and copied whole; each escaped
/// byte is written as `JSON.stringify` writes it (`\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`,
/// else `\u00xx`).
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    push_body(out, s.as_bytes(), 1);
    out.push(b'"');
}

/// The text of `b` (UTF-8) as a JSON string's, between the quotes, escaped `times` times over
/// (1 or 2) in one pass: twice is what escaping the JSON string of `b` again gives (`"` as
/// `\\\"`, a newline as `\\n`), the text of a JSON document held in a string attribute.
fn push_body(out: &mut Vec<u8>, b: &[u8], times: usize) {
    let lead: &[u8] = if times == 2 { b"\\\\" } else { b"\\" };
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        if i + 8 <= b.len() {
            let w = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
            if !word_needs_escape(w) {
                i += 8;
                continue;
            }
        }
        let c = b[i];
        if !ESCAPE[usize::from(c)] {
            i += 1;
            continue;
        }
        out.extend_from_slice(&b[start..i]);
        out.extend_from_slice(lead);
        push_escape(out, c, times);
        i += 1;
        start = i;
    }
    out.extend_from_slice(&b[start..]);
}

/// What follows the backslash(es) of `c`'s escape (`"`, `\\`, `n`, ..., `u00xx`): `"` and `\\`
/// escaped again when `times` is 2.
fn push_escape(out: &mut Vec<u8>, c: u8, times: usize) {
    match c {
        b'"' if times == 2 => out.extend_from_slice(b"\\\""),
        b'\\' if times == 2 => out.extend_from_slice(b"\\\\"),
        b'"' => out.push(b'"'),
        b'\\' => out.push(b'\\'),
        b'\n' => out.push(b'n'),
        b'\r' => out.push(b'r'),
        b'\t' => out.push(b't'),
        0x08 => out.push(b'b'),
        0x0c => out.push(b'f'),
        _ => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"u00");
            out.push(HEX[usize::from(c >> 4)]);
            out.push(HEX[usize::from(c & 15)]);
        }
    }
}

/// serde_json's compact JSON with every string escaped once more: the text of a JSON document
/// as a JSON string's (between its quotes). Used for a session value inside a content attribute.
struct EscapedJson;

impl serde_json::ser::Formatter for EscapedJson {
    fn begin_string<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b"\\\"")
    }
    fn end_string<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b"\\\"")
    }
    // a fragment holds no byte that needs escaping (serde_json splits those out): its text
    // escaped again is itself
    fn write_char_escape<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        e: serde_json::ser::CharEscape,
    ) -> std::io::Result<()> {
        use serde_json::ser::CharEscape as E;
        let c = match e {
            E::Quote => b'"',
            E::ReverseSolidus => b'\\',
            E::Solidus => b'/',
            E::Backspace => 0x08,
            E::FormFeed => 0x0c,
            E::LineFeed => b'\n',
            E::CarriageReturn => b'\r',
            E::Tab => b'\t',
            E::AsciiControl(c) => c,
        };
        let mut o = Vec::with_capacity(8);
        o.extend_from_slice(b"\\\\");
        if c == b'/' {
            o.push(b'/');
        } else {
            push_escape(&mut o, c, 2);
        }
        w.write_all(&o)
    }
}

/// A double as JSON (the shortest text that reads back to it, as orjson writes it).
pub fn push_f64(out: &mut Vec<u8>, x: f64) {
    match serde_json::to_vec(&x) {
        Ok(v) if x.is_finite() => out.extend_from_slice(&v),
        _ => out.extend_from_slice(b"null"),
    }
}

/// A JSON value (parsed from a session line) as compact JSON.
pub fn push_value(out: &mut Vec<u8>, v: &Value) {
    // a Value of parsed JSON always serializes (finite numbers, string keys)
    if serde_json::to_writer(&mut *out, v).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// `ms` (epoch milliseconds) as the decimal string of whole nanoseconds. That is `int(ms * 1e6)`,
/// truncated toward zero.
pub fn push_nanos(out: &mut Vec<u8>, ms: f64) {
    out.push(b'"');
    out.extend_from_slice(((ms * 1_000_000.0) as i128).to_string().as_bytes());
    out.push(b'"');
}

fn push_any(out: &mut Vec<u8>, v: &AttrValue) {
    match v {
        AttrValue::Str(s) => {
            out.extend_from_slice(b"{\"stringValue\":");
            push_str(out, s);
        }
        AttrValue::Bool(b) => {
            out.extend_from_slice(if *b {
                b"{\"boolValue\":true"
            } else {
                b"{\"boolValue\":false"
            });
        }
        AttrValue::Int(i) => {
            out.extend_from_slice(b"{\"intValue\":\"");
            out.extend_from_slice(i.to_string().as_bytes());
            out.push(b'"');
        }
        AttrValue::Double(x) => {
            out.extend_from_slice(b"{\"doubleValue\":");
            push_f64(out, *x);
        }
        AttrValue::Escaped(b) => {
            out.extend_from_slice(b"{\"stringValue\":\"");
            out.extend_from_slice(b);
            out.push(b'"');
        }
        AttrValue::Strs(v) => {
            out.extend_from_slice(b"{\"arrayValue\":{\"values\":[");
            for (k, s) in v.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"stringValue\":");
                push_str(out, s);
                out.push(b'}');
            }
            out.extend_from_slice(b"]}");
        }
    }
    out.push(b'}');
}

/// `[{"key":K,"value":V},...]` of `attrs`.
pub fn push_attrs<'a>(
    out: &mut Vec<u8>,
    attrs: impl IntoIterator<Item = (&'a str, &'a AttrValue)>,
) {
    out.push(b'[');
    for (k, (key, v)) in attrs.into_iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"key\":");
        push_str(out, key);
        out.extend_from_slice(b",\"value\":");
        push_any(out, v);
        out.push(b'}');
    }
    out.push(b']');
}

/// Lowercase hex of `b`.
pub fn hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * b.len());
    for &x in b {
        s.push(D[usize::from(x >> 4)] as char);
        s.push(D[usize::from(x & 15)] as char);
    }
    s
}

/// A span link (`Span.Link`) to `span` of `trace`, with `sessiontree.link` = `why`.
pub fn push_link(out: &mut Vec<u8>, trace: &str, span: &[u8; 8], why: &str) {
    out.extend_from_slice(b"{\"traceId\":");
    push_str(out, trace);
    out.extend_from_slice(b",\"spanId\":");
    push_str(out, &hex(span));
    out.extend_from_slice(b",\"attributes\":");
    push_attrs(
        out,
        [("sessiontree.link", &AttrValue::Str(why.to_string()))],
    );
    out.push(b'}');
}

/// A JSON document built by the mapping (message parts), written in the order given.
pub enum J<'a> {
    Null,
    Str(std::borrow::Cow<'a, str>),
    /// a value of the session line, as it parsed
    Val(&'a Value),
    /// JSON text already written
    Raw(&'a [u8]),
    Obj(Vec<(&'static str, J<'a>)>),
    Arr(Vec<J<'a>>),
}

impl J<'_> {
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            J::Null => out.extend_from_slice(b"null"),
            J::Str(s) => push_str(out, s),
            J::Val(v) => push_value(out, v),
            J::Raw(r) => out.extend_from_slice(r),
            J::Obj(m) => {
                out.push(b'{');
                for (k, (key, v)) in m.iter().enumerate() {
                    if k > 0 {
                        out.push(b',');
                    }
                    push_str(out, key);
                    out.push(b':');
                    v.write(out);
                }
                out.push(b'}');
            }
            J::Arr(a) => {
                out.push(b'[');
                for (k, v) in a.iter().enumerate() {
                    if k > 0 {
                        out.push(b',');
                    }
                    v.write(out);
                }
                out.push(b']');
            }
        }
    }
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write(&mut v);
        v
    }

    /// What [`J::write`] writes, escaped as a JSON string's text, in one pass.
    ///
    /// The bytes between the quotes of a string attribute holding this document: what
    /// [`push_str`] would write of the text `write` gives.
    pub fn write_escaped(&self, out: &mut Vec<u8>) {
        match self {
            J::Null => out.extend_from_slice(b"null"),
            J::Str(s) => {
                out.extend_from_slice(b"\\\"");
                push_body(out, s.as_bytes(), 2);
                out.extend_from_slice(b"\\\"");
            }
            J::Val(v) => {
                let mut ser = serde_json::Serializer::with_formatter(&mut *out, EscapedJson);
                // a Value of parsed JSON always serializes (finite numbers, string keys)
                if serde::Serialize::serialize(v, &mut ser).is_err() {
                    out.extend_from_slice(b"null");
                }
            }
            J::Raw(r) => push_body(out, r, 1),
            J::Obj(m) => {
                out.push(b'{');
                for (k, (key, v)) in m.iter().enumerate() {
                    if k > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"\\\"");
                    push_body(out, key.as_bytes(), 2);
                    out.extend_from_slice(b"\\\":");
                    v.write_escaped(out);
                }
                out.push(b'}');
            }
            J::Arr(a) => {
                out.push(b'[');
                for (k, v) in a.iter().enumerate() {
                    if k > 0 {
                        out.push(b',');
                    }
                    v.write_escaped(out);
                }
                out.push(b']');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{push_str, J};
    use std::borrow::Cow;

    /// A document written escaped in one pass is the string of its text escaped again, for
    /// every ASCII byte in strings, keys and values parsed from a line, and for text already
    /// written.
    #[test]
    fn a_document_escaped_in_one_pass_is_its_text_escaped() {
        let mut texts: Vec<String> = (0u8..0x80)
            .map(|c| format!("a{}\u{e9}", char::from(c)))
            .collect();
        texts.push("\"\\\n\r\t\u{8}\u{c}\u{1}\u{1f}/\u{7f}\u{2028}\u{1f600}".repeat(5));
        texts.push(String::new());
        for t in &texts {
            let val: serde_json::Value =
                serde_json::json!({t.as_str(): [t, 1.5, -2, null, true, {"k": t}]});
            let raw = serde_json::to_vec(&val).unwrap();
            let doc = J::Arr(vec![
                J::Obj(vec![("role", J::Str(Cow::Borrowed(t))), ("x", J::Null)]),
                J::Val(&val),
                J::Raw(&raw),
                J::Str(Cow::Owned(t.repeat(3))),
            ]);
            let mut want = Vec::new();
            push_str(&mut want, std::str::from_utf8(&doc.to_vec()).unwrap());
            let mut got = b"\"".to_vec();
            doc.write_escaped(&mut got);
            got.push(b'"');
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "{t:?}"
            );
        }
    }

    /// The escaping is serde_json's (and `JSON.stringify`'s) for every ASCII byte at every
    /// place in a word, and non-ASCII text is copied as it is.
    #[test]
    fn strings_are_escaped_as_json_stringify_escapes_them() {
        let mut cases: Vec<String> = Vec::new();
        for c in 0u8..0x80 {
            for pad in 0..17 {
                let mut t: String = "ab\u{e9}cdefghij".repeat(2).chars().take(pad).collect();
                t.push(char::from(c));
                t.push_str("klmnop\u{1f600}qrs");
                cases.push(t);
            }
        }
        cases.push(String::new());
        cases.push("\u{2028}\u{2029}\u{7f}\u{80}\u{ff}".into());
        cases.push("\"\\\n\r\t\u{8}\u{c}\u{1}\u{1f}".repeat(9));
        for s in cases {
            let mut out = b"x".to_vec();
            push_str(&mut out, &s);
            assert_eq!(
                out[1..],
                *serde_json::to_string(&s).unwrap().as_bytes(),
                "{s:?}"
            );
        }
    }
}
