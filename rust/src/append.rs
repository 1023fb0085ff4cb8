//! Building a new entry's line the way Pi's SessionManager writes it: `type`, a fresh 8-hex
//! `id` (collision-checked against the index, Pi `generateId`), `parentId` = the leaf,
//! `timestamp` = now as `toISOString()`, then the entry's own fields, compact JSON.

use crate::index::{Index, Leaf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A small, fast generator for entry ids (uniqueness is checked against the index; ids need
/// no secrecy). xorshift64*.
#[derive(Debug, Clone)]
pub struct IdRng(u64);

impl IdRng {
    pub fn seeded() -> Self {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
        let local = 0u8;
        let addr = &local as *const u8 as u64;
        let mut s = t ^ (std::process::id() as u64).rotate_left(32) ^ addr.rotate_left(17);
        if s == 0 {
            s = 0x9E37_79B9_7F4A_7C15;
        }
        IdRng(s)
    }
    pub fn next_u32(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = (z - era * 146_097) as u64;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe as i64 + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// JavaScript `new Date(ms).toISOString()` for years 0..=9999.
pub fn iso_from_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, mi, s, milli) = (rem / 3_600_000, rem / 60_000 % 60, rem / 1000 % 60, rem % 1000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z")
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Why a line could not be built.
#[derive(Debug, PartialEq)]
pub enum BuildError {
    BadType,
    BadBody,
}

/// `{"type":T,"id":ID,"parentId":LEAF,"timestamp":NOW,<fields of body>}\n` and the new id.
/// `body` is a compact JSON object (its members follow the base fields in order).
pub fn build_line(index: &Index, rng: &mut IdRng, etype: &str, body: &[u8], ms: i64) -> Result<(String, Vec<u8>), BuildError> {
    if etype.is_empty() || !etype.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return Err(BuildError::BadType);
    }
    let body = body.trim_ascii();
    if body.len() < 2 || body[0] != b'{' || body[body.len() - 1] != b'}' {
        return Err(BuildError::BadBody);
    }
    let interior = body[1..body.len() - 1].trim_ascii();
    let id = loop {
        let cand = format!("{:08x}", rng.next_u32());
        if index.index_of_str(&cand).is_none() {
            break cand;
        }
    };
    let parent = match index.leaf {
        Leaf::Key(k) => match index.key_string(k) {
            Some(s) if index.leaf_entry().is_some() => serde_json::to_string(s).unwrap_or_else(|_| "null".into()),
            _ => "null".to_string(),
        },
        Leaf::Null => "null".to_string(),
    };
    let mut line = Vec::with_capacity(96 + interior.len());
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(etype.as_bytes());
    line.extend_from_slice(b"\",\"id\":\"");
    line.extend_from_slice(id.as_bytes());
    line.extend_from_slice(b"\",\"parentId\":");
    line.extend_from_slice(parent.as_bytes());
    line.extend_from_slice(b",\"timestamp\":\"");
    line.extend_from_slice(iso_from_ms(ms).as_bytes());
    line.push(b'"');
    if !interior.is_empty() {
        line.push(b',');
        line.extend_from_slice(interior);
    }
    line.extend_from_slice(b"}\n");
    Ok((id, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_matches_javascript() {
        assert_eq!(iso_from_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_from_ms(1_748_779_248_123), "2025-06-01T12:00:48.123Z");
        assert_eq!(iso_from_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn builds_pi_shaped_lines() {
        let ix = Index::new();
        let mut rng = IdRng(42);
        let (id, line) = build_line(&ix, &mut rng, "message", br#"{"message":{"role":"user"}}"#, 0).unwrap();
        let want = format!(
            "{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":null,\"timestamp\":\"1970-01-01T00:00:00.000Z\",\"message\":{{\"role\":\"user\"}}}}\n"
        );
        assert_eq!(String::from_utf8(line).unwrap(), want);
        assert_eq!(build_line(&ix, &mut rng, "Bad\"", b"{}", 0), Err(BuildError::BadType));
        assert_eq!(build_line(&ix, &mut rng, "x", b"[]", 0), Err(BuildError::BadBody));
    }
}
