//! The skim: a cheaper first try at an object line, on 64-byte blocks (issue 17 item 4).
//!
//! Each block is classified at once (AVX2): quotes, backslashes, control bytes, and, through
//! two nibble lookups, structural bytes, whitespace and bytes that may belong to a number or
//! a literal. Escapes are found with carries across blocks (odd runs of backslashes) and the
//! bytes inside strings by a carry-less prefix XOR of the unescaped quotes, so string bodies
//! cost nothing per byte; what a string may not hold (control bytes, bad escapes) and what
//! may not stand outside strings is one error mask per block. A state machine then walks only
//! the tokens (structural bytes, opening quotes, scalar bytes) with a stack of open
//! containers: grammar is checked token by token, numbers and literals by the exact grammar,
//! and only the top-level keys the index needs (and `message.role`) are decoded.
//!
//! Exactness: the skim answers only when it is sure, and then its answer is the exact
//! parser's (`tests.rs` and the fuzz checks compare them); on anything it does not handle
//! (an escape in a key or a captured string, invalid UTF-8 in a captured string, no AVX2) or
//! any error, it answers `None` and the exact parser reads the line. One pass over the line,
//! no recursion (the stack is one byte per open container), so linear on any input.

use super::{Field, Skel, Val};
use std::borrow::Cow;

/// Class bits of the nibble lookup: a byte has bit `k` when its low nibble is in `L_k` and
/// its high nibble in `H_k` (each class is such a rectangle):
/// 0 `[]{}`, 1 `:`, 2 `,`, 3 space, 4 tab and CR, 5 `0x30-0x79` with low nibble 0-9
/// (digits, `e`, `E`, `a`, `f`, `r`, `s`, `t`, `u` and other letters), 6 `+-.`, 7 `l n`.
/// Bits 0-2 are the structural bytes; 5-7 a superset of what numbers and literals hold (the
/// exact grammar checks each one); any bit: allowed outside strings. `\n` is in none: outside
/// a string it ends the line, so the object is unterminated there.
const LO: [u8; 16] = [
    0x28, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x30, 0x02, 0x41, 0x84, 0x51, 0xC0, 0x00,
];
const HI: [u8; 16] = [
    0x10, 0x00, 0x4C, 0x22, 0x20, 0x21, 0xA0, 0x21, 0, 0, 0, 0, 0, 0, 0, 0,
];
const STRUCTURAL: u8 = 0x07;
const SCALAR: u8 = 0xE0;

/// The raw masks of one 64-byte block (bit `i` = byte `i`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Raw {
    pub quote: u64,
    pub backslash: u64,
    /// bytes below 0x20
    pub ctrl: u64,
    /// bytes allowed outside strings (any class bit)
    pub ok: u64,
    pub structural: u64,
    pub scalar: u64,
}

/// The portable classifier (the reference the vector one is tested against).
pub(super) fn classify_scalar(block: &[u8; 64]) -> Raw {
    let mut r = Raw::default();
    for (i, &c) in block.iter().enumerate() {
        let bit = 1u64 << i;
        let cls = LO[(c & 15) as usize] & HI[(c >> 4) as usize];
        if c == b'"' {
            r.quote |= bit;
        }
        if c == b'\\' {
            r.backslash |= bit;
        }
        if c < 0x20 {
            r.ctrl |= bit;
        }
        if cls != 0 {
            r.ok |= bit;
        }
        if cls & STRUCTURAL != 0 {
            r.structural |= bit;
        }
        if cls & SCALAR != 0 {
            r.scalar |= bit;
        }
    }
    r
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn classify_avx2(p: *const u8) -> Raw {
    use std::arch::x86_64::*;
    // (macros, not closures: a closure would not inherit the target feature)
    macro_rules! half {
        ($v:expr) => {{
            let v = $v;
            let nib = _mm256_set1_epi8(0x0f);
            let zero = _mm256_setzero_si256();
            let lo_t = _mm256_loadu_si256([LO, LO].as_ptr() as *const __m256i);
            let hi_t = _mm256_loadu_si256([HI, HI].as_ptr() as *const __m256i);
            let lo = _mm256_and_si256(v, nib);
            let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
            let cls =
                _mm256_and_si256(_mm256_shuffle_epi8(lo_t, lo), _mm256_shuffle_epi8(hi_t, hi));
            macro_rules! eq {
                ($a:expr, $b:expr) => {
                    _mm256_movemask_epi8(_mm256_cmpeq_epi8($a, $b)) as u32
                };
            }
            [
                eq!(v, _mm256_set1_epi8(b'"' as i8)),
                eq!(v, _mm256_set1_epi8(b'\\' as i8)),
                eq!(_mm256_min_epu8(v, _mm256_set1_epi8(0x1f)), v),
                !eq!(cls, zero),
                !eq!(_mm256_and_si256(cls, _mm256_set1_epi8(STRUCTURAL as i8)), zero),
                !eq!(_mm256_and_si256(cls, _mm256_set1_epi8(SCALAR as i8)), zero),
            ]
        }};
    }
    let a = half!(_mm256_loadu_si256(p as *const __m256i));
    let b = half!(_mm256_loadu_si256(p.add(32) as *const __m256i));
    let j = |k: usize| a[k] as u64 | (b[k] as u64) << 32;
    Raw {
        quote: j(0),
        backslash: j(1),
        ctrl: j(2),
        ok: j(3),
        structural: j(4),
        scalar: j(5),
    }
}

/// Which classifier a walk uses (the vector one in the scan; the scalar one in tests).
pub(super) trait Classify {
    /// # Safety
    /// `p` points at 64 readable bytes, and the CPU has what the classifier needs.
    unsafe fn classify(p: *const u8) -> Raw;
}
pub(super) struct Portable;
impl Classify for Portable {
    #[inline(always)]
    unsafe fn classify(p: *const u8) -> Raw {
        classify_scalar(&*(p as *const [u8; 64]))
    }
}
#[cfg(target_arch = "x86_64")]
pub(super) struct Avx2;
#[cfg(target_arch = "x86_64")]
impl Classify for Avx2 {
    #[inline(always)]
    unsafe fn classify(p: *const u8) -> Raw {
        classify_avx2(p)
    }
}

/// Bits of the bytes escaped by a backslash (simdjson's branchless odd-run trick); `prev` is 1
/// when the last byte of the previous block was an unescaped backslash.
#[inline(always)]
pub(super) fn escaped(backslash: u64, prev: &mut u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let backslash = backslash & !*prev;
    let follows = (backslash << 1) | *prev;
    let odd_starts = backslash & !EVEN & !follows;
    let (seq, carry) = odd_starts.overflowing_add(backslash);
    *prev = carry as u64;
    (EVEN ^ (seq << 1)) & follows
}

/// Each bit the XOR of itself and all below it (bits from an opening quote up to, not
/// including, its closing quote are set).
#[inline(always)]
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// What may follow a backslash in a JSON string.
static ESCAPE_OK: [bool; 256] = {
    let mut t = [false; 256];
    let ok = b"\"\\/bfnrtu";
    let mut i = 0;
    while i < ok.len() {
        t[ok[i] as usize] = true;
        i += 1;
    }
    t
};

/// The block being walked and the carries into the next one.
struct Blocks<'a> {
    b: &'a [u8],
    /// offset of the current block in `b`
    base: usize,
    /// tokens of the current block not yet taken
    tok: u64,
    /// unescaped quotes of the current block
    quotes: u64,
    /// bytes of the current block that make the line invalid (checked up to its end)
    err: u64,
    prev_escaped: u64,
    prev_in_string: u64,
}

impl<'a> Blocks<'a> {
    #[inline(always)]
    fn load<C: Classify>(&mut self) {
        let (b, base) = (self.b, self.base);
        let mut pad = [0u8; 64];
        let p = if base + 64 <= b.len() {
            // SAFETY: in bounds.
            unsafe { b.as_ptr().add(base) }
        } else {
            pad[..b.len() - base].copy_from_slice(&b[base..]);
            pad.as_ptr()
        };
        // SAFETY: 64 readable bytes; the caller chose `C` for this CPU.
        let r = unsafe { C::classify(p) };
        let esc = escaped(r.backslash, &mut self.prev_escaped);
        let quotes = r.quote & !esc;
        let in_string = prefix_xor(quotes) ^ self.prev_in_string;
        self.prev_in_string = ((in_string as i64) >> 63) as u64;
        let interior = in_string & !quotes;
        let outside = !(in_string | quotes);
        let mut err = (r.ctrl & interior) | (outside & !r.ok);
        let mut e = esc & interior;
        while e != 0 {
            let t = e.trailing_zeros() as usize;
            // SAFETY: t < 64.
            let c = unsafe { *p.add(t) };
            if !ESCAPE_OK[c as usize] || (c == b'u' && !hex4(b, base + t + 1)) {
                err |= 1 << t;
            }
            e &= e - 1;
        }
        self.tok = ((r.structural | r.scalar) & outside) | (quotes & in_string);
        self.quotes = quotes;
        self.err = err;
    }

    /// Moves to the next block; false past the end of `b` or when the block left held an
    /// error (every byte of it is inside the line).
    #[inline(always)]
    fn advance<C: Classify>(&mut self) -> bool {
        if self.err != 0 || self.base + 64 >= self.b.len() {
            return false;
        }
        self.base += 64;
        self.load::<C>();
        true
    }

    /// The next token's position (taken).
    #[inline(always)]
    fn next<C: Classify>(&mut self) -> Option<usize> {
        while self.tok == 0 {
            if !self.advance::<C>() {
                return None;
            }
        }
        let t = self.tok.trailing_zeros() as usize;
        self.tok &= self.tok - 1;
        Some(self.base + t)
    }

    /// Drops the tokens before `q` (the rest of a number or literal ending there).
    #[inline(always)]
    fn skip_to<C: Classify>(&mut self, q: usize) -> Option<()> {
        while q >= self.base + 64 {
            if !self.advance::<C>() {
                return None;
            }
        }
        self.tok &= !0u64 << (q - self.base);
        Some(())
    }

    /// The closing quote of the string opened at `p` (whose token was just taken).
    #[inline(always)]
    fn close<C: Classify>(&mut self, p: usize) -> Option<usize> {
        let k = p - self.base + 1;
        let mut m = if k < 64 { self.quotes & (!0u64 << k) } else { 0 };
        while m == 0 {
            if !self.advance::<C>() {
                return None;
            }
            m = self.quotes;
        }
        Some(self.base + m.trailing_zeros() as usize)
    }
}

#[inline(always)]
fn hex4(b: &[u8], i: usize) -> bool {
    b.get(i..i + 4)
        .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
}

/// The end of the number starting at `s` under JSON's grammar, or None.
#[inline(always)]
fn number_end(b: &[u8], s: usize) -> Option<usize> {
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut i = s;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(i + 1),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !matches!(b.get(i), Some(b'0'..=b'9')) {
            return None;
        }
        i = digits(i + 1);
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !matches!(b.get(i), Some(b'0'..=b'9')) {
            return None;
        }
        i = digits(i + 1);
    }
    Some(i)
}

/// The string between quotes at `s - 1` and `e`, borrowed, when it has no escape and is UTF-8.
#[inline(always)]
fn plain_str(b: &[u8], s: usize, e: usize) -> Option<&str> {
    let raw = &b[s..e];
    if memchr::memchr(b'\\', raw).is_some() {
        return None;
    }
    std::str::from_utf8(raw).ok()
}

/// Where a value goes.
#[derive(Clone, Copy, PartialEq)]
enum Cap {
    None,
    Field(Field),
    Role,
    /// the top-level `message` (its role is read when it is an object)
    Message,
}

const OBJ: u8 = 1;
const ARR: u8 = 0;

/// A member's key at token `p` and its colon; returns the value's first token and sets `cap`
/// (decoding the key only where it matters: the top level and the top-level message).
#[inline(always)]
fn member<'a, C: Classify>(
    bl: &mut Blocks<'a>,
    p: usize,
    depth: usize,
    msg: usize,
    sk: &mut Skel<'a>,
    cap: &mut Cap,
) -> Option<usize> {
    let buf = bl.b;
    if buf[p] != b'"' {
        return None;
    }
    *cap = Cap::None;
    if depth == 1 || depth == msg {
        let e = bl.close::<C>(p)?;
        let key = &buf[p + 1..e];
        if memchr::memchr(b'\\', key).is_some() {
            return None;
        }
        if depth == 1 {
            match super::top_field(key) {
                Some(Field::Message) => {
                    sk.role = Val::Missing;
                    *cap = Cap::Message;
                }
                Some(f) => *cap = Cap::Field(f),
                None => {}
            }
        } else if key == b"role" {
            *cap = Cap::Role;
        }
    }
    let q = bl.next::<C>()?;
    if buf[q] != b':' {
        return None;
    }
    bl.next::<C>()
}

/// [`super::LineParser::parse_object_line_into_no_utf8`] on blocks, for `buf[0] == b'{'`:
/// the same answer when Some; None when unsure (then `sk` holds garbage).
#[inline(always)]
pub(super) fn skim<'a, C: Classify>(
    buf: &'a [u8],
    sk: &mut Skel<'a>,
    stack: &mut Vec<u8>,
) -> Option<usize> {
    debug_assert_eq!(buf.first(), Some(&b'{'));
    let mut bl = Blocks {
        b: buf,
        base: 0,
        tok: 0,
        quotes: 0,
        err: 0,
        prev_escaped: 0,
        prev_in_string: 0,
    };
    bl.load::<C>();
    let mut p = bl.next::<C>()?;
    if p != 0 {
        return None;
    }
    stack.clear();
    let mut cap = Cap::None;
    // depth (stack length) of the top-level message object being read, 0 when none
    let mut msg = 0usize;
    // as the exact reader's `skip_value`: a value at token `p`, then what follows values
    'value: loop {
        let c = buf[p];
        let captured = matches!(cap, Cap::Field(_) | Cap::Role);
        if c == b'"' {
            if captured {
                let e = bl.close::<C>(p)?;
                set(sk, cap, Val::Str(Cow::Borrowed(plain_str(buf, p + 1, e)?)));
            }
        } else if c == b'{' || c == b'[' {
            if captured {
                set(sk, cap, Val::Composite);
            }
            let obj = c == b'{';
            stack.push(if obj { OBJ } else { ARR });
            if obj && cap == Cap::Message {
                msg = stack.len();
            }
            p = bl.next::<C>()?;
            let e = buf[p];
            if obj && e != b'}' {
                p = member::<C>(&mut bl, p, stack.len(), msg, sk, &mut cap)?;
                continue 'value;
            }
            if !obj && e != b']' {
                cap = Cap::None;
                continue 'value;
            }
            // empty: closes at `p`
            if stack.len() == msg {
                msg = 0;
            }
            stack.pop();
            if stack.is_empty() {
                return finish(&bl, p);
            }
        } else if c == b'-' || c.is_ascii_digit() {
            let q = number_end(buf, p)?;
            if captured {
                // SAFETY: the grammar admits ASCII only.
                let t = unsafe { std::str::from_utf8_unchecked(&buf[p..q]) };
                set(sk, cap, Val::Num(t.parse::<f64>().unwrap_or(f64::NAN)));
            }
            bl.skip_to::<C>(q)?;
        } else {
            let (word, v): (&[u8], _) = match c {
                b't' => (b"true", Val::Bool(true)),
                b'f' => (b"false", Val::Bool(false)),
                b'n' => (b"null", Val::Null),
                _ => return None,
            };
            if buf.get(p..p + word.len()) != Some(word) {
                return None;
            }
            if captured {
                set(sk, cap, v);
            }
            bl.skip_to::<C>(p + word.len())?;
        }
        // after a value: the next element, or closes
        loop {
            p = bl.next::<C>()?;
            let c = buf[p];
            let top = *stack.last()?;
            if c == b',' {
                p = bl.next::<C>()?;
                if top == OBJ {
                    p = member::<C>(&mut bl, p, stack.len(), msg, sk, &mut cap)?;
                } else {
                    cap = Cap::None;
                }
                continue 'value;
            }
            if c != if top == OBJ { b'}' } else { b']' } {
                return None;
            }
            if stack.len() == msg {
                msg = 0;
            }
            stack.pop();
            if stack.is_empty() {
                return finish(&bl, p);
            }
        }
    }
}

/// The top-level object closed at `p`: every byte up to it must be clean, and only
/// whitespace may follow it on the line. Returns the position of the line's `\n` (or the end).
#[inline(always)]
fn finish(bl: &Blocks<'_>, p: usize) -> Option<usize> {
    let buf = bl.b;
    let k = p - bl.base;
    let upto = if k == 63 { !0u64 } else { (1u64 << (k + 1)) - 1 };
    if bl.err & upto != 0 {
        return None;
    }
    let mut i = p + 1;
    while i < buf.len() && matches!(buf[i], b' ' | b'\t' | b'\r') {
        i += 1;
    }
    if i < buf.len() && buf[i] != b'\n' {
        return None;
    }
    Some(i)
}

#[inline(always)]
fn set<'a>(sk: &mut Skel<'a>, cap: Cap, v: Val<'a>) {
    match cap {
        Cap::None | Cap::Message => {}
        Cap::Role => sk.role = v,
        Cap::Field(f) => match f {
            Field::Type => sk.type_ = v,
            Field::Id => sk.id = v,
            Field::ParentId => sk.parent_id = v,
            Field::Timestamp => sk.timestamp = v,
            Field::TargetId => sk.target_id = v,
            Field::Label => sk.label = v,
            Field::Version => sk.version = v,
            Field::FirstKept => sk.first_kept_entry_id = v,
            Field::Message => {}
        },
    }
}

/// The skim with the vector classifier; None (unsure) on a CPU without AVX2.
#[inline]
pub(super) fn skim_fast<'a>(
    buf: &'a [u8],
    sk: &mut Skel<'a>,
    stack: &mut Vec<u8>,
) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { skim_avx2(buf, sk, stack) };
        }
    }
    let _ = (buf, sk, stack);
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn skim_avx2<'a>(buf: &'a [u8], sk: &mut Skel<'a>, stack: &mut Vec<u8>) -> Option<usize> {
    skim::<Avx2>(buf, sk, stack)
}

/// Benchmark probe: classifies every block of `data` and counts tokens (no walk).
#[doc(hidden)]
pub fn blocks_only(data: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn go(data: &[u8]) -> u64 {
        let mut bl = Blocks {
            b: data,
            base: 0,
            tok: 0,
            quotes: 0,
            err: 0,
            prev_escaped: 0,
            prev_in_string: 0,
        };
        bl.load::<Avx2>();
        let mut n = 0u64;
        loop {
            n += bl.tok.count_ones() as u64;
            bl.err = 0;
            if !bl.advance::<Avx2>() {
                return n;
            }
        }
    }
    unsafe { go(data) }
}
