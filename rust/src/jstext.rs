//! Compact JSON from another serializer (orjson) made into the text `JSON.stringify` writes.
//!
//! Pi writes its session lines with `JSON.stringify`; sessiontree serializes with orjson, whose
//! text differs from Pi's in two ways only:
//!
//! * numbers: orjson keeps Python's float spelling (`100.0`, `-0.0`, `1e+16`, integers beyond
//!   2^53 exactly) where JavaScript writes `Number.prototype.toString()` of the double (`100`,
//!   `0`, `10000000000000000`, `18446744073709552000`). Those numbers are rewritten, through
//!   `ryu_js` (the JS number text: the one rule, also used by `tokens` and the index);
//! * key order: a JS object enumerates its array-index keys (`"0"` .. `"4294967294"`) first, in
//!   ascending order. Reordering needs the values, so [`js_text`] only reports such a key
//!   ([`JsText::NeedsKeyOrder`]) and the caller writes that value with the exact Python writer
//!   (`_jsjson.js_stringify_bytes`, rare: Pi's entries have no such keys).
//!
//! Strings and everything else are left as they are (orjson escapes what `JSON.stringify`
//! escapes). One linear pass, no recursion, no allocation when nothing changes.
//! `tests/core/test_append_bytes_js_exact.py` checks this pass against the Python writer.

/// What [`js_text`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum JsText {
    /// the text is already what `JSON.stringify` writes
    Same,
    /// the text with its numbers rewritten
    Rewritten(Vec<u8>),
    /// an object has an array-index key: only a writer that reorders keys can do
    NeedsKeyOrder,
}

/// Whether `key` (a key's raw text, between the quotes) is a canonical array index.
///
/// `0` or `[1-9][0-9]*` up to 2^32 - 2 (escaped keys are not: orjson never escapes digits).
pub(crate) fn is_array_index(key: &[u8]) -> bool {
    match key {
        [b'0'] => true,
        [b'1'..=b'9', rest @ ..] if rest.len() <= 9 && rest.iter().all(u8::is_ascii_digit) => {
            // at most 2^32 - 2
            key.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')) < u64::from(u32::MAX)
        }
        _ => false,
    }
}

/// The `JSON.stringify` text of a finite double, in `buf`.
pub fn js_number(x: f64, buf: &mut ryu_js::Buffer) -> &str {
    if x.is_finite() {
        buf.format_finite(x)
    } else {
        "null"
    }
}

/// Whether number token `tok` (a valid JSON number) is spelled as `JSON.stringify` spells
/// its value.
///
/// Settled without formatting when `tok` is a plain fraction of at most 15 significant digits,
/// no trailing zero and at most 5 zeros after `0.` (`-?(0|[1-9][0-9]*)\.[0-9]*[1-9]`): a decimal of
/// at most 15 significant digits is the only one of that many digits or fewer that reads as its
/// double (10^15 < 2^53), so it is the shortest one, which `Number.prototype.toString` writes in
/// fixed notation for values from 1e-6 below 1e21.
pub(crate) fn is_js_number_text(tok: &[u8]) -> bool {
    if plain_fraction(tok) {
        return true;
    }
    // SAFETY: a JSON number token is ASCII digits, signs, `.` and `e`
    let Ok(x) = unsafe { std::str::from_utf8_unchecked(tok) }.parse::<f64>() else {
        return false;
    };
    js_number(x, &mut ryu_js::Buffer::new()).as_bytes() == tok
}

/// See [`is_js_number_text`]: a valid JSON number token that JavaScript spells as it is,
/// known without formatting it (false: not known).
fn plain_fraction(tok: &[u8]) -> bool {
    let t = tok.strip_prefix(b"-").unwrap_or(tok);
    let Some(dot) = t.iter().position(|&c| c == b'.') else {
        return false;
    };
    let (int, frac) = (&t[..dot], &t[dot + 1..]);
    if frac.is_empty()
        || frac.last() == Some(&b'0')
        || !int.iter().chain(frac).all(u8::is_ascii_digit)
        || int.is_empty()
        || (int.len() > 1 && int[0] == b'0')
    {
        return false;
    }
    let digits = if int == b"0" {
        let zeros = frac.iter().take_while(|&&c| c == b'0').count();
        if zeros > 5 {
            return false;
        }
        frac.len() - zeros
    } else {
        int.len() + frac.len()
    };
    digits <= 15
}

/// Whether number token `tok` (a valid JSON number) may be spelled otherwise by JavaScript.
///
/// A fraction or exponent, `-0`, or an integer too long to be sure it is below 2^53.
#[inline]
pub(crate) fn may_differ(tok: &[u8]) -> bool {
    tok.len() >= 16 || tok == b"-0" || tok.iter().any(|&b| matches!(b, b'.' | b'e' | b'E'))
}

/// Walks compact JSON `input` (one valid value or a list of members, as orjson writes them).
///
/// `fix(start, end, text)` for each number JavaScript spells otherwise (`input[start..end]` should
/// be `text`), in order. Returns false at the first array-index key (then stops). Text that is not
/// valid JSON is walked without harm (the caller's parser rejects it).
fn walk(input: &[u8], mut fix: impl FnMut(usize, usize, &[u8])) -> bool {
    let mut buf = ryu_js::Buffer::new();
    let n = input.len();
    let mut i = 0;
    while i < n {
        match input[i] {
            b'"' => {
                // the closing quote: the first `"` not escaped
                let start = i + 1;
                let mut j = start;
                loop {
                    match memchr::memchr2(b'"', b'\\', input.get(j..).unwrap_or_default()) {
                        Some(k) if input[j + k] == b'\\' => j += k + 2,
                        Some(k) => {
                            j += k;
                            break;
                        }
                        None => return true, // an unterminated string: not JSON
                    }
                }
                if input.get(j + 1) == Some(&b':') && is_array_index(&input[start..j]) {
                    return false;
                }
                i = j + 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < n && matches!(input[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                    i += 1;
                }
                let tok = &input[start..i];
                if !may_differ(tok) {
                    continue;
                }
                // SAFETY: the token is ASCII digits, signs, `.` and `e`
                let Ok(x) = unsafe { std::str::from_utf8_unchecked(tok) }.parse::<f64>() else {
                    continue;
                };
                let js = js_number(x, &mut buf).as_bytes();
                if js != tok {
                    fix(start, i, js);
                }
            }
            _ => i += 1,
        }
    }
    true
}

/// `JSON.stringify`'s text for compact JSON `input` (one valid value, as orjson writes it).
pub fn js_text(input: &[u8]) -> JsText {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0; // input[..copied] is in `out` (when there is one)
    let ok = walk(input, |start, end, js| {
        let o = out.get_or_insert_with(|| Vec::with_capacity(input.len() + 16));
        o.extend_from_slice(&input[copied..start]);
        o.extend_from_slice(js);
        copied = end;
    });
    match (ok, out) {
        (false, _) => JsText::NeedsKeyOrder,
        (true, None) => JsText::Same,
        (true, Some(mut o)) => {
            o.extend_from_slice(&input[copied..]);
            JsText::Rewritten(o)
        }
    }
}

/// Appends [`js_text`] of `input` to `out` (no copy of `input` first). Returns false, with
/// nothing appended, when an object has an array-index key.
pub fn push_js_text(out: &mut Vec<u8>, input: &[u8]) -> bool {
    let base = out.len();
    let mut copied = 0;
    let ok = walk(input, |start, end, js| {
        out.extend_from_slice(&input[copied..start]);
        out.extend_from_slice(js);
        copied = end;
    });
    if ok {
        out.extend_from_slice(&input[copied..]);
    } else {
        out.truncate(base);
    }
    ok
}

// ==== text already in JSON.stringify's form (RPC get_tree copies such lines verbatim) ====

/// Whether `line` is exactly what `JSON.stringify(JSON.parse(line))` writes. A caller may then copy
/// it instead of parsing and writing it again. Conservative: true only for one valid JSON value
/// (`crate::json::check_value`) that is valid UTF-8, has no whitespace between tokens, escapes in
/// strings only as `JSON.stringify` does (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, lowercase
/// `\u00xx` for the other control characters; a lone surrogate escape is refused), numbers spelled
/// as JavaScript spells them, and objects without repeated or array-index keys (JSON.parse keeps
/// the last of repeated keys; JavaScript enumerates array-index keys first). Anything else is false
/// (the caller's exact writer handles it). One linear pass, no recursion.
pub fn is_stringify_text(line: &[u8]) -> bool {
    if std::str::from_utf8(line).is_err() || crate::json::check_value(line).is_err() {
        return false;
    }
    let mut buf = ryu_js::Buffer::new();
    // keys seen in each open object (None for an array)
    let mut open: Vec<Option<Keys>> = Vec::new();
    let n = line.len();
    let mut i = 0;
    while i < n {
        match line[i] {
            b'"' => {
                let start = i + 1;
                let mut j = start;
                loop {
                    match line.get(j) {
                        None => return false,
                        Some(b'"') => break,
                        Some(b'\\') => {
                            match line.get(j + 1) {
                                Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => j += 2,
                                Some(b'u') => {
                                    // only a control character without a short escape, lowercase
                                    let Some(h) = line.get(j + 2..j + 6) else {
                                        return false;
                                    };
                                    let ok_hex =
                                        h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
                                    if !ok_hex || &h[..2] != b"00" || !matches!(h[2], b'0' | b'1') {
                                        return false;
                                    }
                                    let v = (h[2] - b'0') * 16
                                        + (if h[3] <= b'9' {
                                            h[3] - b'0'
                                        } else {
                                            h[3] - b'a' + 10
                                        });
                                    if matches!(v, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                                        return false;
                                    }
                                    j += 6;
                                }
                                _ => return false,
                            }
                        }
                        Some(_) => j += 1,
                    }
                }
                if line.get(j + 1) == Some(&b':') {
                    let key = &line[start..j];
                    if is_array_index(key) {
                        return false;
                    }
                    match open.last_mut() {
                        Some(Some(keys)) => {
                            if !keys.insert(key) {
                                return false; // a repeated key
                            }
                        }
                        _ => return false,
                    }
                }
                i = j + 1;
            }
            b'{' => {
                open.push(Some(Keys::default()));
                i += 1;
            }
            b'[' => {
                open.push(None);
                i += 1;
            }
            b'}' | b']' => {
                open.pop();
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < n && matches!(line[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                    i += 1;
                }
                let tok = &line[start..i];
                if may_differ(tok) {
                    // SAFETY: the token is ASCII digits, signs, `.` and `e`
                    let Ok(x) = unsafe { std::str::from_utf8_unchecked(tok) }.parse::<f64>() else {
                        return false;
                    };
                    if js_number(x, &mut buf).as_bytes() != tok {
                        return false;
                    }
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' => return false,
            _ => i += 1,
        }
    }
    true
}

/// The keys of one object.
///
/// A short list searched in order (most objects have a few keys), a hash set once it is long (a
/// hostile object with many keys stays linear).
#[derive(Default)]
struct Keys<'a> {
    few: Vec<&'a [u8]>,
    many: Option<std::collections::HashSet<&'a [u8]>>,
}

impl<'a> Keys<'a> {
    /// False when `key` was already there.
    fn insert(&mut self, key: &'a [u8]) -> bool {
        if let Some(set) = &mut self.many {
            return set.insert(key);
        }
        if self.few.contains(&key) {
            return false;
        }
        self.few.push(key);
        if self.few.len() > 16 {
            self.many = Some(self.few.drain(..).collect());
        }
        true
    }
}

#[cfg(test)]
mod number_text_tests {
    use super::{is_js_number_text, js_number};

    /// The shortcut for plain fractions agrees with formatting: every double's own text passes;
    /// decimal texts of up to 17 digits pass exactly when they are that text.
    #[test]
    fn number_text_agrees_with_formatting() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut buf = ryu_js::Buffer::new();
        for k in 0..200_000 {
            let v = match k % 3 {
                0 => f64::from_bits(next()),
                1 => (next() % 1_000_000_000) as f64 / 10f64.powi((next() % 12) as i32),
                _ => (next() % 100_000) as f64 * 1e-9,
            };
            if !v.is_finite() {
                continue;
            }
            let t = js_number(v, &mut buf).to_string();
            assert!(is_js_number_text(t.as_bytes()), "{t}");
            let digits = 1 + next() % 17;
            let int = next() % 4;
            let mut tok = if next() % 2 == 0 {
                String::from("-")
            } else {
                String::new()
            };
            tok.push_str(&int.to_string());
            tok.push('.');
            for _ in 0..digits {
                tok.push(char::from(b'0' + (next() % 10) as u8));
            }
            let want = js_number(tok.parse().unwrap(), &mut buf).as_bytes() == tok.as_bytes();
            assert_eq!(is_js_number_text(tok.as_bytes()), want, "{tok}");
        }
    }
}

#[cfg(test)]
mod stringify_text_tests {
    use super::is_stringify_text;

    #[test]
    fn stringify_text_is_recognised() {
        for s in [
            r#"{"type":"message","id":"a1","parentId":null,"n":[1,-2,0.5,1e+21,0.000009],"ok":true}"#,
            r#"{"s":"tab\tnl\nq\"b\\ \u001f \u0000 é ✓"}"#,
            r#"[]"#,
            r#""x""#,
            r#"{"a":{"a":1},"b":[{"a":2}]}"#,
        ] {
            assert!(is_stringify_text(s.as_bytes()), "{s}");
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for s in [
            r#"{"a": 1}"#,
            r#"{"a":1} "#,
            "{\"a\":1}\r",
            r#"{"a":"\/"}"#,
            r#"{"a":"\u00e9"}"#,
            r#"{"a":"\u001F"}"#,
            r#"{"a":"\u0009"}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":1.0}"#,
            r#"{"a":-0}"#,
            r#"{"a":1E5}"#,
            r#"{"a":18446744073709551615}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"0":1}"#,
            r#"{"a":1"#,
        ] {
            assert!(!is_stringify_text(s.as_bytes()), "{s}");
        }
        assert!(!is_stringify_text(b"{\"a\":\"\xff\"}"), "invalid UTF-8");
        let many: Vec<String> = (0..100).map(|k| format!("\"k{k}\":{k}")).collect();
        let obj = format!("{{{}}}", many.join(","));
        assert!(is_stringify_text(obj.as_bytes()), "many keys");
        let dup = format!("{{{},\"k50\":1}}", many.join(","));
        assert!(
            !is_stringify_text(dup.as_bytes()),
            "a repeated key among many"
        );
        assert!(
            is_stringify_text("{\"a\":\"\u{2028}\u{2029}\"}".as_bytes()),
            "raw line separators"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> String {
        match js_text(s.as_bytes()) {
            JsText::Same => s.to_string(),
            JsText::Rewritten(v) => String::from_utf8(v).unwrap(),
            JsText::NeedsKeyOrder => "<keys>".to_string(),
        }
    }

    #[test]
    fn numbers_as_javascript_writes_them() {
        assert_eq!(
            text("[100.0,-0.0,1e+21,1.5e+300,5e-7,0.1,1e+16,0.00001,1e-7,-2.5e-300]"),
            "[100,0,1e+21,1.5e+300,5e-7,0.1,10000000000000000,0.00001,1e-7,-2.5e-300]"
        );
        assert_eq!(text("1E5"), "100000");
        assert_eq!(text("-0"), "0");
        assert_eq!(text("18446744073709551615"), "18446744073709552000");
        assert_eq!(text("9007199254740993"), "9007199254740992");
        assert_eq!(text("-9223372036854775808"), "-9223372036854776000");
        assert_eq!(text("9007199254740991"), "9007199254740991");
        assert_eq!(text("123456789012345678901234"), "1.2345678901234569e+23");
    }

    #[test]
    fn unchanged_text_is_not_copied() {
        for s in [
            r#"{"a":[1,-2,0.5,1e+21],"b":"100.0 -0.0","c":null,"d":true}"#,
            r#"{"s":"\"0\":","t":"\\","01":1,"-1":2,"4294967295":3,"1.0":4,"":5}"#,
            r#"["0","1",{"x":"2"}]"#,
        ] {
            assert_eq!(js_text(s.as_bytes()), JsText::Same, "{s}");
        }
    }

    #[test]
    fn array_index_keys_are_reported() {
        for s in [
            r#"{"0":1}"#,
            r#"{"b":1,"1":2}"#,
            r#"[{"a":{"42":1.0}}]"#,
            r#"{"4294967294":1}"#,
        ] {
            assert_eq!(js_text(s.as_bytes()), JsText::NeedsKeyOrder, "{s}");
        }
        // an escaped quote before the colon-like text inside a string is not a key
        assert_eq!(js_text(br#"{"a":"\"0\":1"}"#), JsText::Same);
    }

    #[test]
    fn push_appends_the_same_text() {
        let mut out = b"x".to_vec();
        assert!(push_js_text(&mut out, b"[1.0,\"2.0\",3]"));
        assert_eq!(out, b"x[1,\"2.0\",3]");
        assert!(push_js_text(&mut out, b"4"));
        assert_eq!(out, b"x[1,\"2.0\",3]4");
        assert!(!push_js_text(&mut out, b"{\"a\":1.0,\"7\":2}"));
        assert_eq!(out, b"x[1,\"2.0\",3]4");
        // not JSON: copied as it is, for the parser to reject
        assert!(push_js_text(&mut out, b"\"1.0"));
        assert_eq!(out, b"x[1,\"2.0\",3]4\"1.0");
    }

    #[test]
    fn strings_are_skipped_whole() {
        assert_eq!(
            text(r#"{"a\\":"1.0\"","b":[2.0,"x\\\"3.0"]}"#),
            r#"{"a\\":"1.0\"","b":[2,"x\\\"3.0"]}"#
        );
    }
}
