//! One line before it is indexed.
//!
//! The blank check (JavaScript `trim()`), the parse, and the facts worked out in the parallel phase
//! ([`Pre`]: timestamp, fixed type and role codes).

use super::codes::{known_code, ROLE_NAMES, TYPE_NAMES, T_NONE};
use crate::json::{self, LineParser, Skel, Val};

fn js_trim_is_blank(line: &[u8]) -> bool {
    // JavaScript String.prototype.trim() whitespace, on UTF-8 bytes.
    let mut i = 0;
    while i < line.len() {
        let c = line[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C => i += 1,
            0xC2 if line.get(i + 1) == Some(&0xA0) => i += 2,
            0xE1 if line[i..].starts_with(&[0xE1, 0x9A, 0x80]) => i += 3,
            0xE2 => {
                let t = &line[i..];
                if t.len() >= 3
                    && t[1] == 0x80
                    && ((0x80..=0x8A).contains(&t[2])
                        || t[2] == 0xA8
                        || t[2] == 0xA9
                        || t[2] == 0xAF)
                    || t.starts_with(&[0xE2, 0x81, 0x9F])
                {
                    i += 3
                } else {
                    return false;
                }
            }
            0xE3 if line[i..].starts_with(&[0xE3, 0x80, 0x80]) => i += 3,
            0xEF if line[i..].starts_with(&[0xEF, 0xBB, 0xBF]) => i += 3,
            _ => return false,
        }
    }
    true
}

/// A line ready to be indexed: its place in the file and its parse result (borrowing the
/// line's bytes).
pub struct ParsedLine<'a> {
    pub offset: u64,
    pub len: u64,
    pub line: u32,
    pub terminated: bool,
    /// offset just past the line's `\n` (or the end of data when unterminated)
    pub end: u64,
    pub result: LineResult<'a>,
    /// The stats row of a usage candidate's line: the type and role codes it assumed, and the row.
    /// Made when the scan keeps row sums ([`super::Index::keep_row_sums`]).
    pub row: Option<Box<(u16, u16, crate::rows::LineRow)>>,
}

// `Value` is the common case (nearly every line): boxing it would cost an allocation per line.
#[allow(clippy::large_enum_variant)]
pub enum LineResult<'a> {
    Blank,
    Bad(json::JsonError),
    /// the skeleton and what can be worked out from it while still in parallel
    Value(Skel<'a>, Pre),
    TooLong,
}

/// Longest line we index (a record stores lengths in 32 bits; a line this long is hostile).
pub const MAX_LINE: u64 = u32::MAX as u64;

/// Parses one line (the part of the work that runs in parallel).
pub fn parse_one<'a>(parser: &mut LineParser, bytes: &'a [u8]) -> LineResult<'a> {
    if bytes.len() as u64 > MAX_LINE {
        return LineResult::TooLong;
    }
    // blank after JavaScript trim(): only whitespace bytes, so a line starting with `{` is not
    let first = bytes.first().copied().unwrap_or(b' ');
    if (first <= b' ' || first >= 0x80) && js_trim_is_blank(bytes) {
        return LineResult::Blank;
    }
    match parser.parse(bytes) {
        Ok(s) => value_result(s),
        Err(e) => LineResult::Bad(e),
    }
}

/// Facts about a parsed line that need no index, worked out in the parallel phase. The sequential
/// phase then does not touch the line's bytes again.
#[derive(Debug, Clone, Copy)]
pub struct Pre {
    /// `new Date(timestamp).getTime()`
    pub ts: f64,
    /// the fixed code of `type` when it is a well-known name (T_NONE for non-strings)
    pub etype: Option<u16>,
    /// the fixed code of `message.role` when it is a well-known name
    pub role: Option<u16>,
}

/// `Date.parse` of exactly `YYYY-MM-DDTHH:mm:ss.sssZ`, what Pi writes (`toISOString()`).
///
/// The same value [`crate::jsdate::parse_iso`] gives; None for any other shape (or a value that
/// form rejects), which then goes the general way.
#[inline]
pub(super) fn iso_ms_fast(b: &[u8]) -> Option<f64> {
    if b.len() != 24
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[23] != b'Z'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let mut v = 0i64;
        for &c in &b[r] {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + (c - b'0') as i64;
        }
        Some(v)
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    // days from 1970-01-01 (Howard Hinnant's days_from_civil)
    let yy = if m <= 2 { y - 1 } else { y };
    let era = if yy >= 0 { yy } else { yy - 399 } / 400;
    let yoe = yy - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Some((days * 86_400_000 + h * 3_600_000 + mi * 60_000 + sec * 1000 + ms) as f64)
}

impl Pre {
    /// Placeholder before the facts are worked out.
    pub const NONE: Pre = Pre {
        ts: f64::NAN,
        etype: None,
        role: None,
    };
}

/// The result for a line that parsed.
#[inline]
pub fn value_result(s: Skel<'_>) -> LineResult<'_> {
    let pre = pre_of(&s);
    LineResult::Value(s, pre)
}

/// The [`Pre`] facts of a skeleton.
#[inline]
pub fn pre_of(s: &Skel<'_>) -> Pre {
    Pre {
        ts: match &s.timestamp {
            Val::Str(t) => iso_ms_fast(t.as_bytes()).unwrap_or_else(|| crate::jsdate::parse_iso(t)),
            other => other.date_value(),
        },
        etype: match &s.type_ {
            Val::Str(t) => known_code(&TYPE_NAMES, t),
            _ => Some(T_NONE),
        },
        role: match &s.role {
            Val::Str(r) => known_code(&ROLE_NAMES, r),
            _ => Some(0),
        },
    }
}
