//! String bodies, the hot loop of opening a session.
//!
//! Finding the end of a run of plain string content (`"`, `\\` or a control byte) 16 or 32 bytes at
//! a time, checking escapes, and skipping a whole string body. The scalar, SWAR and SIMD scanners
//! agree (`tests.rs`).

use super::{JsonError, R};

#[inline(always)]
fn is_special(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

// ---------------------------------------------------------------------------- string bodies

/// One SSE2 probe of the 16 bytes at `s` for a closing quote, answered from its masks alone.
///
/// The byte found is never loaded again, which keeps a load off the critical path of every short
/// string. When the first special byte among them is a quote, its position and whether every byte
/// before it is ASCII. `None` when the first special byte is something else, there is none among
/// the 16, fewer than 16 bytes remain, or the target has no SSE2.
#[inline(always)]
pub(super) fn quote16(b: &[u8], s: usize) -> Option<(usize, bool)> {
    #[cfg(target_arch = "x86_64")]
    if s + 16 <= b.len() {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is baseline on x86_64; the load is inside `b`.
        let (q, m, high) = unsafe {
            let v = _mm_loadu_si128(b.as_ptr().add(s) as *const __m128i);
            let q = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let m = _mm_or_si128(
                _mm_or_si128(q, _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8))),
                _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v),
            );
            (
                _mm_movemask_epi8(q) as u32,
                _mm_movemask_epi8(m) as u32,
                _mm_movemask_epi8(v) as u32,
            )
        };
        let low = m & m.wrapping_neg();
        if low & q != 0 {
            return Some((s + low.trailing_zeros() as usize, high & (low - 1) == 0));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (b, s);
    None
}

/// Position of the first byte at or after `i` that ends a run of plain string content.
///
/// `"`, `\` or a control byte below 0x20; `b.len()` when there is none.
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

/// The special bytes ([`is_special`]) among the 16 at `p`, one bit each (SSE2).
///
/// # Safety
/// The 16 bytes at `p` must be readable.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn specials16(p: *const u8) -> u32 {
    use std::arch::x86_64::*;
    let v = _mm_loadu_si128(p as *const __m128i);
    let m = _mm_or_si128(
        _mm_or_si128(
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)),
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)),
        ),
        _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v),
    );
    _mm_movemask_epi8(m) as u32
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn find_special_sse2(b: &[u8], mut i: usize) -> usize {
    let n = b.len();
    let p = b.as_ptr();
    if i + 16 <= n {
        let mask = specials16(p.add(i));
        if mask != 0 {
            return i + mask.trailing_zeros() as usize;
        }
        i += 16;
        // a long run: wider vectors pay off
        if i + 64 <= n && std::is_x86_feature_detected!("avx2") {
            return find_special_avx2(b, i);
        }
        while i + 16 <= n {
            let mask = specials16(p.add(i));
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

/// Whether this thread's parse of the current line met an escape `JSON.stringify` does not
/// write (`\/`, or a `\u` escape other than lowercase `\u00xx` of a control character without a
/// short escape): [`check_escape`] notes it, the line parser clears and reads it per line. (A
/// flag beside the hot loops instead of a value through them: such escapes are rare, and the
/// loops stay as they are.)
pub(super) struct OddEscapes;

thread_local! {
    static ODD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl OddEscapes {
    #[inline]
    pub(super) fn clear() {
        ODD.with(|c| c.set(false));
    }
    #[inline]
    pub(super) fn seen() -> bool {
        ODD.with(|c| c.get())
    }
    #[cold]
    fn note() {
        ODD.with(|c| c.set(true));
    }
}

/// Whether the 4 hex digits `h` of a `\u` escape are how `JSON.stringify` writes a character:
/// lowercase, a control character below 0x20 without a short escape (`\b\t\n\f\r`).
#[inline]
fn stringify_u(h: &[u8]) -> bool {
    let lower = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
    h[0] == b'0'
        && h[1] == b'0'
        && matches!(h[2], b'0' | b'1')
        && lower(h[3])
        && !(h[2] == b'0' && matches!(h[3], b'8' | b'9' | b'a' | b'c' | b'd'))
}

/// Checks the escape whose backslash is at `j`; returns the position after it (and notes one
/// `JSON.stringify` would not write, see [`OddEscapes`]).
#[inline(always)]
pub(super) fn check_escape(b: &[u8], j: usize) -> R<usize> {
    match b.get(j + 1) {
        Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(j + 2),
        Some(b'/') => {
            OddEscapes::note();
            Ok(j + 2)
        }
        Some(b'u') => {
            if j + 6 <= b.len() && b[j + 2..j + 6].iter().all(u8::is_ascii_hexdigit) {
                if !stringify_u(&b[j + 2..j + 6]) {
                    OddEscapes::note();
                }
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

/// Skips a string body from `i` (just after the opening quote), escapes included.
///
/// Returns the position after the closing quote.
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

/// [`skip_body_with`] 64 bytes per step.
///
/// The escapes inside a block are checked off its bit masks without loading it again (session text
/// is full of `\n` and `\"`).
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
pub fn skip_body(b: &[u8], i: usize) -> R<usize> {
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
pub(super) fn find_special_tail(b: &[u8], mut i: usize) -> usize {
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
pub(super) fn find_special_swar(b: &[u8], mut i: usize) -> usize {
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
