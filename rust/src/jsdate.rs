//! JavaScript `new Date(x).getTime()` for the values a session entry's `timestamp` can hold. Pi
//! uses it to order siblings (Pi session-manager.ts getTree sorts children by it).
//!
//! Strings follow the ECMAScript date-time string format (`YYYY`, `YYYY-MM`, `YYYY-MM-DD`,
//! `±YYYYYY`, optional `THH:mm`, `:ss`, `.fraction`, `Z` or `±HH:mm`). Date-only forms are
//! UTC; date-times without an offset are local time in JavaScript, which we read as UTC (Pi
//! itself writes `toISOString()`, always with `Z`). A space instead of `T` is accepted as V8's
//! fallback parser does. Anything else is NaN.
//!
//! This module uses the JSON reader's value types; the reader knows nothing of dates (the
//! date of a parsed value is [`Val::date_value`], defined here).

use crate::json::{JsVal, Val};

const MS_PER_DAY: f64 = 86_400_000.0;

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    // Howard Hinnant's algorithm; m in 1..=12
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn time_clip(t: f64) -> f64 {
    if !t.is_finite() || t.abs() > 8.64e15 {
        f64::NAN
    } else {
        t.trunc() + 0.0
    }
}

struct Cur<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cur<'_> {
    fn digits(&mut self, n: usize) -> Option<i64> {
        if self.i + n > self.b.len() {
            return None;
        }
        let mut v = 0i64;
        for k in 0..n {
            let c = self.b[self.i + k];
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + (c - b'0') as i64;
        }
        self.i += n;
        Some(v)
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn done(&self) -> bool {
        self.i == self.b.len()
    }
}

/// JavaScript's WhiteSpace and LineTerminator characters.
///
/// What `String.prototype.trim()` removes and what V8's date parser skips (TAB, VT, FF, SP, NBSP,
/// ZWNBSP, the Zs category, LF, CR, LS, PS). Not U+0085 or U+001C..U+001F, which Rust's
/// `char::is_whitespace` or Python's `str.strip()` would take. Python's twin,
/// `sessiontree._jsjson.js_trim`, is pinned to this set by `tests/parity/test_parity_js_rules.py`.
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// `s.trim()` as JavaScript does it (see [`is_js_whitespace`]).
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

/// `Date.parse(s)` in milliseconds since the epoch, or NaN.
pub fn parse_iso(s: &str) -> f64 {
    let s = js_trim(s);
    let mut c = Cur {
        b: s.as_bytes(),
        i: 0,
    };
    let year = match c.b.first() {
        Some(b'+') | Some(b'-') => {
            let neg = c.b[0] == b'-';
            c.i = 1;
            let Some(y) = c.digits(6) else {
                return f64::NAN;
            };
            if neg && y == 0 {
                return f64::NAN;
            }
            if neg {
                -y
            } else {
                y
            }
        }
        _ => match c.digits(4) {
            Some(y) => y,
            None => return f64::NAN,
        },
    };
    let (mut month, mut day) = (1, 1);
    if c.eat(b'-') {
        let Some(m) = c.digits(2) else {
            return f64::NAN;
        };
        month = m;
        if c.eat(b'-') {
            let Some(d) = c.digits(2) else {
                return f64::NAN;
            };
            day = d;
        }
    }
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return f64::NAN;
    }
    let (mut h, mut mi, mut sec, mut ms) = (0i64, 0i64, 0i64, 0f64);
    let mut offset_min: i64 = 0;
    if !c.done() {
        if !(c.eat(b'T') || c.eat(b't') || c.eat(b' ')) {
            return f64::NAN;
        }
        let (Some(hh), true, Some(mm)) = (
            c.digits(2),
            c.eat(b':'),
            None::<i64>.or_else(|| c.digits(2)),
        ) else {
            return f64::NAN;
        };
        h = hh;
        mi = mm;
        if c.eat(b':') {
            let Some(ss) = c.digits(2) else {
                return f64::NAN;
            };
            sec = ss;
            if c.eat(b'.') || c.eat(b',') {
                let start = c.i;
                while c.i < c.b.len() && c.b[c.i].is_ascii_digit() {
                    c.i += 1;
                }
                if c.i == start {
                    return f64::NAN;
                }
                // V8 keeps milliseconds, truncating further digits
                let frac = &s[start..c.i];
                let mut v = 0f64;
                for (k, ch) in frac.bytes().take(3).enumerate() {
                    v += ((ch - b'0') as f64) * [100.0, 10.0, 1.0][k];
                }
                ms = v;
            }
        }
        if h > 24 || mi > 59 || sec > 59 || (h == 24 && (mi > 0 || sec > 0 || ms > 0.0)) {
            return f64::NAN;
        }
        if c.eat(b'Z') || c.eat(b'z') {
        } else if c.b.get(c.i) == Some(&b'+') || c.b.get(c.i) == Some(&b'-') {
            let sign = if c.b[c.i] == b'-' { -1 } else { 1 };
            c.i += 1;
            let Some(oh) = c.digits(2) else {
                return f64::NAN;
            };
            let _ = c.eat(b':');
            let Some(om) = c.digits(2) else {
                return f64::NAN;
            };
            if oh > 23 || om > 59 {
                return f64::NAN;
            }
            offset_min = sign * (oh * 60 + om);
        }
    }
    if !c.done() {
        return f64::NAN;
    }
    let days = days_from_civil(year, month, day) as f64;
    let t = days * MS_PER_DAY + (h * 3_600_000 + mi * 60_000 + sec * 1000) as f64 + ms
        - (offset_min * 60_000) as f64;
    time_clip(t)
}

/// `new Date(value).getTime()` for a JSON value (missing → NaN, null → 0, number → itself).
pub fn date_value(v: &JsVal) -> f64 {
    match v {
        JsVal::Missing => f64::NAN,
        JsVal::Null => 0.0,
        JsVal::Bool(b) => {
            if *b {
                1.0
            } else {
                0.0
            }
        }
        JsVal::Num(n) => time_clip(*n),
        JsVal::Str(s) => parse_iso(s),
        JsVal::Composite => f64::NAN,
    }
}

impl Val<'_> {
    /// `new Date(value).getTime()` (see [`date_value`]), without copying strings.
    pub fn date_value(&self) -> f64 {
        match self {
            Val::Str(s) => parse_iso(s),
            Val::Missing => f64::NAN,
            other => date_value(&other.to_js()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pi_timestamps() {
        assert_eq!(parse_iso("1970-01-01T00:00:00.000Z"), 0.0);
        assert_eq!(parse_iso("2025-06-01T12:00:48.000Z"), 1748779248000.0);
        assert_eq!(parse_iso("2026-07-20T11:01:00Z"), 1784545260000.0);
        assert_eq!(parse_iso("2024-01-01"), 1704067200000.0);
        assert_eq!(parse_iso("2024-01-01T01:00:00+01:00"), 1704067200000.0);
        assert_eq!(parse_iso("2024-01-01T00:00:00.1234Z"), 1704067200123.0);
    }

    #[test]
    fn surrounding_js_whitespace_is_skipped_and_other_controls_are_not() {
        assert_eq!(parse_iso(" 2024-01-01"), 1704067200000.0);
        assert_eq!(parse_iso("\u{feff}2024-01-01\u{2028}"), 1704067200000.0);
        assert!(parse_iso("\u{85}2024-01-01").is_nan());
        assert!(parse_iso("\u{1f}2024-01-01").is_nan());
        assert_eq!(js_trim("\u{1f}name\u{85}"), "\u{1f}name\u{85}");
        assert_eq!(js_trim("\u{a0} name\u{3000}"), "name");
    }

    #[test]
    fn garbage_is_nan() {
        for s in [
            "",
            "yesterday",
            "2024-13-01",
            "2024-01-01T25:00Z",
            "2024-01-01T00:00:00Zjunk",
        ] {
            assert!(parse_iso(s).is_nan(), "{s}");
        }
    }
}
