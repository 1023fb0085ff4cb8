//! Fleet rows from the core.
//!
//! What `sessiontree.fleet`'s per-session stats row and per-entry table need from an entry's raw
//! line, computed without a Python object per entry.
//!
//! A fast path in the manner of `tokens.rs`: it reads only what the row needs from each line
//! (`usage` and `message.{role, usage, content, timestamp}`, the `type` of content blocks, one
//! usage's `cost.total`) with a linear, iterative scan that skips every other value (strings
//! through the core's SIMD string scanner), and reports **undecided** for anything it cannot
//! settle exactly (escaped keys or names, integers beyond 128 bits, an array timestamp, a
//! line that does not scan). The rules are `sessiontree.usage`'s (`UsageAccumulator` with
//! `skip_missing=True`, Python's int/float arithmetic included: integers add exactly, a float
//! turns the sum into a float) and `fleet/_rows.py`'s (tool calls, Pi's `modified`); the
//! Python rules stay the oracle, `tests/fleet/test_core_rows_parity.py` runs both over the
//! corpus and generated stores, and the session answers for undecided entries from them.

use crate::entry_kind::{self, Carries, Context, Shape, TypeRow, UsageAt};
use crate::index::{T_BRANCH_SUMMARY, T_COMPACTION, T_MESSAGE};
use crate::json::{skip_string_body, RowSpans};
use crate::store::{Store, StoreError};
use rayon::prelude::*;

/// A scalar JSON value as the rules need it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Scalar {
    #[default]
    Missing,
    Null,
    Bool(bool),
    /// an integer literal (no fraction, no exponent), exactly
    Int(i128),
    Float(f64),
    Str {
        empty: bool,
    },
    Obj {
        empty: bool,
    },
    Arr,
}

impl Scalar {
    /// A parsed value (None: missing) as a [`Scalar`]. An integer that fits 64 bits stays an
    /// integer, as this scanner reads it; larger ones are floats, as `serde_json` parsed them.
    pub fn of_value(v: Option<&serde_json::Value>) -> Scalar {
        use serde_json::Value;
        match v {
            None => Scalar::Missing,
            Some(Value::Null) => Scalar::Null,
            Some(Value::Bool(b)) => Scalar::Bool(*b),
            Some(Value::Number(n)) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Scalar::Int(i128::from(i)),
                (None, Some(u)) => Scalar::Int(i128::from(u)),
                _ => Scalar::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Some(Value::String(s)) => Scalar::Str {
                empty: s.is_empty(),
            },
            Some(Value::Object(m)) => Scalar::Obj {
                empty: m.is_empty(),
            },
            Some(Value::Array(_)) => Scalar::Arr,
        }
    }
    /// What the value is to the usage rule (`entry_kind::carried_usage`).
    pub fn shape(&self) -> Shape {
        match *self {
            Scalar::Missing => Shape::Missing,
            Scalar::Obj { empty: true } => Shape::EmptyObject,
            Scalar::Obj { empty: false } => Shape::Object,
            _ => Shape::NotObject,
        }
    }
}

/// A number as Python holds it after the JSON parse: an `int` or a `float`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    pub fn to_f64(self) -> f64 {
        match self {
            Num::Int(n) => n as f64,
            Num::Float(f) => f,
        }
    }
    /// `self + other` with Python's semantics (None: an int sum over 128 bits, undecided).
    fn add(self, other: Num) -> Option<Num> {
        Some(match (self, other) {
            (Num::Int(a), Num::Int(b)) => Num::Int(a.checked_add(b)?),
            (a, b) => Num::Float(a.to_f64() + b.to_f64()),
        })
    }
}

/// What `sessiontree.usage` adds for a usage field with `skip_missing` (`js_usage_number`, then
/// SQL's `sum`).
///
/// A missing field or one that is not a finite number adds nothing.
fn usage_number(v: Scalar) -> Option<Num> {
    match v {
        Scalar::Null => Some(Num::Int(0)),
        Scalar::Bool(b) => Some(Num::Int(i128::from(b))),
        Scalar::Int(n) => Some(Num::Int(n)),
        Scalar::Float(f) if f.is_finite() => Some(Num::Float(f)),
        _ => None,
    }
}

/// A `usage` value: whether it is an object, how many keys, and the fields the sums read.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    pub value: Scalar,
    /// input, output, cacheRead, cacheWrite, cost.total (Missing when `cost` is no object)
    pub fields: [Scalar; 5],
    pub total_tokens: Scalar,
}

/// A short name (`role`, a block's `type`, `stopReason`).
///
/// Its bytes when a string without escapes, else how it differs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Name<'a> {
    #[default]
    Missing,
    Str(&'a [u8]),
    Other,
}

/// What the row needs from one entry line.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LineFacts<'a> {
    /// the entry's `usage`
    pub usage: Usage,
    /// `message` is an object
    pub message_obj: bool,
    pub role: Name<'a>,
    pub stop_reason: Name<'a>,
    /// `message.usage`
    pub msg_usage: Usage,
    /// `"content" in message`
    pub has_content: bool,
    /// `message.content` is an array: its `toolCall` blocks (objects whose `type` is that)
    pub content_array: bool,
    pub tool_calls: u32,
    /// `message.timestamp`
    pub msg_timestamp: Scalar,
    /// the entry's own `timestamp` is an array (`new Date([..])` parses its `String()`)
    pub timestamp_array: bool,
}

/// The scan of one line; every method returns None where the line is not settled here.
struct W<'a> {
    b: &'a [u8],
    i: usize,
    /// nesting of the containers being read (not skipped)
    d: usize,
}

/// Deeper lines are decided by Python (`entries.MAX_DEPTH`: it refuses to load them).
const MAX_DEPTH: usize = 1000;

#[derive(Clone, Copy, PartialEq)]
enum Obj {
    Top,
    Message,
    TopUsage,
    MsgUsage,
    Cost,
    Block,
}

impl<'a> W<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            } else {
                break;
            }
        }
    }
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }
    /// A string at `"`: (body, holds an escape).
    fn string(&mut self) -> Option<(&'a [u8], bool)> {
        debug_assert_eq!(self.peek(), Some(b'"'));
        let start = self.i + 1;
        let end = skip_string_body(self.b, start).ok()?;
        self.i = end;
        let body = &self.b[start..end - 1];
        Some((body, memchr::memchr(b'\\', body).is_some()))
    }
    /// Skips a string at `"` (its body's length: 0 for `""`); no escape check (a skipped
    /// string is never compared).
    #[inline]
    fn skip_str(&mut self) -> Option<usize> {
        let start = self.i + 1;
        let end = skip_string_body(self.b, start).ok()?;
        self.i = end;
        Some(end - 1 - start)
    }
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.b.get(self.i..self.i + word.len())? == word {
            self.i += word.len();
            Some(())
        } else {
            None
        }
    }
    fn number(&mut self) -> Option<Scalar> {
        let start = self.i;
        let mut int = true;
        while let Some(c) = self.peek() {
            match c {
                b'0'..=b'9' | b'-' | b'+' => {}
                b'.' | b'e' | b'E' => int = false,
                _ => break,
            }
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).ok()?;
        if int {
            if text.len() > 40 {
                return None; // beyond 128 bits, or nearly: Python's int decides
            }
            // outside [-2**63, 2**64 - 1] the Python reader's type depends on the orjson
            // version (a float in 3.13, an exact int through the fallback in older ones):
            // Python decides
            return text
                .parse::<i128>()
                .ok()
                .filter(|n| (i64::MIN as i128..=u64::MAX as i128).contains(n))
                .map(Scalar::Int);
        }
        text.parse::<f64>().ok().map(Scalar::Float)
    }
    /// Skips any composite value at `{`/`[` (iteratively; strings by the SIMD scanner).
    fn skip_composite(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            let c = self.peek()?;
            match c {
                b'"' => {
                    self.skip_str()?;
                    continue;
                }
                b'{' | b'[' => {
                    depth += 1;
                    if self.d + depth > MAX_DEPTH {
                        return None;
                    }
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        self.i += 1;
                        return Some(());
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
    }
    /// Whether the composite at `{`/`[` is empty (`{}`), then skips it.
    fn skip_value(&mut self) -> Option<Scalar> {
        self.ws();
        match self.peek()? {
            b'"' => Some(Scalar::Str {
                empty: self.skip_str()? == 0,
            }),
            b'{' => {
                let save = self.i;
                self.i += 1;
                self.ws();
                let empty = self.peek()? == b'}';
                self.i = save;
                self.skip_composite()?;
                Some(Scalar::Obj { empty })
            }
            b'[' => {
                self.skip_composite()?;
                Some(Scalar::Arr)
            }
            b't' => self.literal(b"true").map(|_| Scalar::Bool(true)),
            b'f' => self.literal(b"false").map(|_| Scalar::Bool(false)),
            b'n' => self.literal(b"null").map(|_| Scalar::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }
    /// Skips a value the row does not read: None where [`W::skip_value`] is None, without
    /// converting a number whose text surely converts (up to 18 digits, or a float ending in a
    /// digit: the cost fields beside `total` are most of a usage's numbers).
    fn skip(&mut self) -> Option<()> {
        self.ws();
        if !matches!(self.peek()?, b'-' | b'0'..=b'9') {
            return self.skip_value().map(|_| ());
        }
        let start = self.i;
        let mut int = true;
        while let Some(c) = self.peek() {
            match c {
                b'0'..=b'9' | b'-' | b'+' => {}
                b'.' | b'e' | b'E' => int = false,
                _ => break,
            }
            self.i += 1;
        }
        let ends_in_digit = self.b[self.i - 1].is_ascii_digit();
        if !ends_in_digit || (int && self.i - start > 18) {
            self.i = start;
            self.number()?;
        }
        Some(())
    }
    fn name(&mut self) -> Option<Name<'a>> {
        self.ws();
        if self.peek()? == b'"' {
            let (body, esc) = self.string()?;
            if esc {
                return None; // an escaped name might spell one we compare with
            }
            Some(Name::Str(body))
        } else {
            self.skip_value()?;
            Some(Name::Other)
        }
    }
    /// An object at `{` in role `what`, its fields stored into `f` (the last of a repeated key
    /// wins, as in `JSON.parse`). Returns how many keys it had.
    fn object(
        &mut self,
        what: Obj,
        f: &mut LineFacts<'a>,
        block_type: &mut Name<'a>,
    ) -> Option<u32> {
        self.eat(b'{')?;
        self.d += 1;
        let mut n = 0u32;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            self.d -= 1;
            return Some(0);
        }
        loop {
            self.ws();
            if self.peek()? != b'"' {
                return None;
            }
            let (key, esc) = self.string()?;
            if esc {
                return None; // `"us\u0061ge"` is `usage`
            }
            self.eat(b':')?;
            self.ws();
            n += 1;
            self.field(what, key, f, block_type)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    self.d -= 1;
                    return Some(n);
                }
                _ => return None,
            }
        }
    }
    fn usage(&mut self, what: Obj) -> Option<Usage> {
        if self.peek()? == b'{' {
            let mut u = LineFacts::default();
            let n = self.object(what, &mut u, &mut Name::Missing)?;
            let mut out = u.usage;
            out.value = Scalar::Obj { empty: n == 0 };
            Some(out)
        } else {
            Some(Usage {
                value: self.skip_value()?,
                ..Usage::default()
            })
        }
    }
    fn field(
        &mut self,
        what: Obj,
        key: &'a [u8],
        f: &mut LineFacts<'a>,
        bt: &mut Name<'a>,
    ) -> Option<()> {
        match (what, key) {
            (Obj::Top, b"usage") => f.usage = self.usage(Obj::TopUsage)?,
            (Obj::Top, b"message") => {
                // a repeated `message`: the last one is the message
                let keep_usage = f.usage;
                let keep_ts = f.timestamp_array;
                *f = LineFacts {
                    usage: keep_usage,
                    timestamp_array: keep_ts,
                    ..LineFacts::default()
                };
                if self.peek()? == b'{' {
                    f.message_obj = true;
                    self.object(Obj::Message, f, bt)?;
                } else {
                    self.skip_value()?;
                }
            }
            (Obj::Top, b"timestamp") => f.timestamp_array = self.skip_value()? == Scalar::Arr,
            (Obj::Message, b"role") => f.role = self.name()?,
            (Obj::Message, b"stopReason") => f.stop_reason = self.name()?,
            (Obj::Message, b"usage") => f.msg_usage = self.usage(Obj::MsgUsage)?,
            (Obj::Message, b"timestamp") => f.msg_timestamp = self.skip_value()?,
            (Obj::Message, b"content") => {
                f.has_content = true;
                f.tool_calls = 0;
                f.content_array = false;
                if self.peek()? == b'[' {
                    f.content_array = true;
                    f.tool_calls = self.content()?;
                } else {
                    self.skip_value()?;
                }
            }
            (Obj::TopUsage | Obj::MsgUsage, k) => {
                let slot = match k {
                    b"input" => Some(0),
                    b"output" => Some(1),
                    b"cacheRead" => Some(2),
                    b"cacheWrite" => Some(3),
                    _ => None,
                };
                if let Some(s) = slot {
                    f.usage.fields[s] = self.skip_value()?;
                } else if k == b"totalTokens" {
                    f.usage.total_tokens = self.skip_value()?;
                } else if k == b"cost" {
                    f.usage.fields[4] = Scalar::Missing;
                    if self.peek()? == b'{' {
                        let mut c = LineFacts::default();
                        self.object(Obj::Cost, &mut c, &mut Name::Missing)?;
                        f.usage.fields[4] = c.usage.fields[4];
                    } else {
                        self.skip_value()?;
                    }
                } else {
                    self.skip()?;
                }
            }
            (Obj::Cost, b"total") => f.usage.fields[4] = self.skip_value()?,
            (Obj::Block, b"type") => *bt = self.name()?,
            _ => self.skip()?,
        }
        Some(())
    }
    /// `message.content` at `[`: how many of its elements are objects with `type: "toolCall"`.
    fn content(&mut self) -> Option<u32> {
        self.eat(b'[')?;
        self.d += 1;
        let mut calls = 0u32;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            self.d -= 1;
            return Some(0);
        }
        loop {
            self.ws();
            if self.peek()? == b'{' {
                let mut bt = Name::Missing;
                let mut scratch = LineFacts::default();
                self.object(Obj::Block, &mut scratch, &mut bt)?;
                if bt == Name::Str(b"toolCall") {
                    calls += 1;
                }
            } else {
                self.skip_value()?;
            }
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    self.d -= 1;
                    return Some(calls);
                }
                _ => return None,
            }
        }
    }
}

/// The facts of one entry line, or None where the exact (Python) rules must decide.
pub fn line_facts(line: &[u8]) -> Option<LineFacts<'_>> {
    let mut w = W {
        b: line,
        i: 0,
        d: 0,
    };
    let mut f = LineFacts::default();
    w.ws();
    if w.peek()? != b'{' {
        return None;
    }
    w.object(Obj::Top, &mut f, &mut Name::Missing)?;
    w.ws();
    (w.i == line.len()).then_some(f)
}

/// The usage an entry of type row `t` carries (`entry_kind::carried_usage`, the rule of
/// `sessiontree.usage._carries_usage`; None: none).
fn carried(t: TypeRow, f: &LineFacts<'_>) -> Option<Usage> {
    let role = match (f.message_obj, f.role) {
        (true, Name::Str(r)) => Some(entry_kind::role_row_of_name(r)),
        _ => None,
    };
    let in_message =
        entry_kind::carried_usage(t, role, f.msg_usage.value.shape(), f.usage.value.shape())?;
    Some(if in_message { f.msg_usage } else { f.usage })
}

/// Running sums of `UsageAccumulator(skip_missing=True)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sums {
    pub sums: [Num; 5],
    pub seen: [bool; 5],
    pub carriers: u64,
}

impl Default for Sums {
    fn default() -> Self {
        Sums {
            sums: [Num::Int(0); 5],
            seen: [false; 5],
            carriers: 0,
        }
    }
}

impl Sums {
    /// Adds one carried usage's numbers (None: a sum beyond 128-bit integers, undecided).
    fn add(&mut self, vals: &[Option<Num>; 5]) -> Option<()> {
        self.carriers += 1;
        for (k, v) in vals.iter().enumerate() {
            if let Some(v) = *v {
                self.sums[k] = self.sums[k].add(v)?;
                self.seen[k] = true;
            }
        }
        Some(())
    }
    /// `UsageAccumulator.totals()`.
    ///
    /// Input, output, cacheRead, cacheWrite, total, cost (None: a sum the usages gave no number to;
    /// `total` the sum of the four that are not None).
    pub fn totals(&self) -> Option<[Option<f64>; 6]> {
        let part = |k: usize| (self.seen[k] || self.carriers == 0).then_some(self.sums[k]);
        let mut total: Option<Num> = None;
        for k in 0..4 {
            if let Some(v) = part(k) {
                total = Some(total.unwrap_or(Num::Int(0)).add(v)?);
            }
        }
        Some([
            part(0).map(Num::to_f64),
            part(1).map(Num::to_f64),
            part(2).map(Num::to_f64),
            part(3).map(Num::to_f64),
            total.map(Num::to_f64),
            part(4).map(Num::to_f64),
        ])
    }
}

/// One entry's usage as the per-entry table shows it (`usage_totals_of_entries([raw],
/// skip_missing=True)`).
///
/// Input, output, cacheRead, cacheWrite, cost (None: missing or not a finite number).
pub type EntryUsage = [Option<f64>; 5];

/// The columns and sums of a whole session.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    /// per entry: the usage sums of that entry alone. None: not an entry that may carry one; zeros
    /// for one that carries none
    pub usage: Vec<Option<EntryUsage>>,
    /// entries the exact (Python) rules must decide (file order)
    pub undecided: Vec<u32>,
    /// `usage.py` totals over every entry: summaries included / summaries only. None when an entry
    /// is undecided or an integer sum overflowed
    pub totals: Option<[Option<f64>; 6]>,
    pub summary_totals: Option<[Option<f64>; 6]>,
    /// `toolCall` blocks of assistant messages
    pub tool_calls: u64,
}

/// Lines are read and scanned in batches of about this many bytes (bounded memory).
const BATCH_BYTES: u64 = 2 << 20;

/// Whether an entry of type code `etype` and role code `role` is a usage candidate.
///
/// Message entries whose role is assistant or toolResult, compactions, branch summaries and `usage`
/// entries (what `fleet/_rows.py` parses).
pub fn is_candidate(etype: u16, role: u16) -> bool {
    match entry_kind::type_row(etype).usage {
        UsageAt::Message => entry_kind::role_row(role).usage != Carries::Never,
        UsageAt::Entry(_) => true,
        UsageAt::Nowhere => false,
    }
}

/// Usage candidates of the index (see [`is_candidate`]).
fn candidates(st: &Store) -> Vec<usize> {
    let ix = &st.index;
    (0..ix.recs.len())
        .filter(|&i| is_candidate(ix.recs.at(i).etype, ix.recs.at(i).role))
        .collect()
}

/// What one usage candidate's line adds to the stats row: its usage numbers and its `toolCall`
/// blocks. The numbers: input, output, cacheRead, cacheWrite, cost (None: it carries no usage).
/// None: undecided (the Python rules decide).
pub type LineRow = Option<(Option<[Option<Num>; 5]>, u32)>;

/// [`LineRow`] of the line of a candidate entry of type code `etype` whose role is named `role`.
pub fn line_row(etype: u16, role: &str, line: &[u8]) -> LineRow {
    let t = entry_kind::type_row(etype);
    if t.usage == UsageAt::Message && role == "toolResult" && surely_without_usage(line) {
        return Some((None, 0));
    }
    row_of_facts(etype, role, &line_facts(line)?)
}

/// [`line_row`] from the places the open's parser recorded ([`RowSpans`]).
///
/// Only the `usage` values (and the role) are read again, never the content. The same answer as [`line_row`] (`rows::tests` checks it); a line the spans cannot settle
/// (an escaped block key or type, nesting near [`MAX_DEPTH`]) goes the whole way.
pub fn line_row_at(etype: u16, role: &str, line: &[u8], at: &RowSpans) -> LineRow {
    if at.undecided || at.depth as usize >= MAX_DEPTH {
        return line_row(etype, role, line);
    }
    let w = |i: u32, d: usize| W {
        b: line,
        i: i as usize,
        d,
    };
    let mut f = LineFacts::default();
    if at.usage != 0 {
        f.usage = w(at.usage, 1).usage(Obj::TopUsage)?;
    }
    if at.message_obj {
        f.message_obj = true;
        if at.role != 0 {
            f.role = w(at.role, 2).name()?;
        }
        if at.msg_usage != 0 {
            f.msg_usage = w(at.msg_usage, 2).usage(Obj::MsgUsage)?;
        }
        f.content_array = at.content_array;
        f.tool_calls = at.tool_calls;
    }
    row_of_facts(etype, role, &f)
}

/// [`LineRow`] of a line's facts.
fn row_of_facts(etype: u16, role: &str, f: &LineFacts<'_>) -> LineRow {
    let t = entry_kind::type_row(etype);
    let is_msg = t.usage == UsageAt::Message;
    let u = carried(t, f);
    let nums = u.map(|u| u.fields.map(usage_number));
    let calls = if is_msg && role == "assistant" && f.message_obj && f.content_array {
        f.tool_calls
    } else {
        0
    };
    Some((nums, calls))
}

/// The stats row's usage sums, kept by the index as it ingests lines. The scan computes each
/// candidate's [`LineRow`] in its parallel phase, from the bytes it has just parsed, and the index
/// adds them in file order: the session's [`Rows`] without a second read of its lines.
#[derive(Debug, Clone)]
pub struct RowSums {
    all: Option<Sums>,
    summary: Option<Sums>,
    tool_calls: u64,
    undecided: Vec<u32>,
    /// false when a candidate came without its line's row; then [`session_rows`] reads the lines
    /// again. An appended line, or a code the parallel phase did not foresee
    pub complete: bool,
}

impl Default for RowSums {
    fn default() -> Self {
        RowSums {
            all: Some(Sums::default()),
            summary: Some(Sums::default()),
            tool_calls: 0,
            undecided: Vec::new(),
            complete: true,
        }
    }
}

impl RowSums {
    /// Adds candidate entry `i` (a summary type or not) with its line's row, in file order.
    pub fn add(&mut self, i: u32, summary_type: bool, one: &LineRow) {
        let Some((nums, calls)) = one else {
            self.undecided.push(i);
            self.all = None;
            self.summary = None;
            return;
        };
        self.tool_calls += u64::from(*calls);
        let Some(nums) = nums else { return };
        if let Some(s) = self.all.as_mut() {
            if s.add(nums).is_none() {
                self.all = None;
            }
        }
        if summary_type {
            if let Some(s) = self.summary.as_mut() {
                if s.add(nums).is_none() {
                    self.summary = None;
                }
            }
        }
    }
    fn rows(&self) -> Rows {
        Rows {
            usage: Vec::new(),
            undecided: self.undecided.clone(),
            totals: self.all.and_then(|s| s.totals()),
            summary_totals: self.summary.and_then(|s| s.totals()),
            tool_calls: self.tool_calls,
        }
    }
}

/// `each(k, line)` for the lines of entries `idx`, read in batches of about [`BATCH_BYTES`] and run
/// on every core.
///
/// The results in the order of `idx`.
fn scan_lines<T: Send>(
    st: &Store,
    idx: &[usize],
    each: impl Fn(usize, &[u8]) -> T + Sync,
) -> Result<Vec<T>, StoreError> {
    let mut out: Vec<T> = Vec::with_capacity(idx.len());
    let recs = &st.index.recs;
    let mut a = 0;
    let mut buf: Vec<u8> = Vec::new();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    while a < idx.len() {
        let mut b = a;
        let mut bytes = 0u64;
        while b < idx.len() && (b == a || bytes + recs.at(idx[b]).len as u64 <= BATCH_BYTES) {
            bytes += recs.at(idx[b]).len as u64;
            b += 1;
        }
        buf.clear();
        spans.clear();
        spans.resize(b - a, (0, 0));
        st.with_lines(&idx[a..b], |k, line| {
            let s = buf.len();
            buf.extend_from_slice(line);
            spans[k] = (s, buf.len());
        })?;
        let part: Vec<T> = spans
            .par_iter()
            .enumerate()
            .map(|(k, &(s, e))| each(a + k, &buf[s..e]))
            .collect();
        out.extend(part);
        a = b;
    }
    Ok(out)
}

/// The usage columns and sums of a session (see [`Rows`]).
/// A line that cannot hold a `usage` key, nor nest deeper than Python loads: no `"usage"` in
/// its bytes, no `\u` escape (the only way to spell those letters otherwise), fewer than
/// [`MAX_DEPTH`] opening brackets. Tool results rarely carry a usage and are much of a
/// session's bytes: this finds most of them out at memory speed instead of scanning them.
fn surely_without_usage(line: &[u8]) -> bool {
    use memchr::memmem::Finder;
    use std::sync::LazyLock;
    // built once (a searcher built per line cost about a fifth of this check)
    static USAGE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"usage\""));
    static ESCAPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u"));
    USAGE.find(line).is_none()
        && ESCAPE.find(line).is_none()
        && memchr::memchr2_iter(b'{', b'[', line)
            .take(MAX_DEPTH)
            .count()
            < MAX_DEPTH
}

/// The usage sums of a session and, with `per_entry`, its per-entry usage column (else
/// `usage` is empty).
pub fn session_rows(st: &Store, per_entry: bool) -> Result<Rows, StoreError> {
    let ix = &st.index;
    if !per_entry {
        if let Some(acc) = ix.row_sums.as_deref().filter(|a| a.complete) {
            return Ok(acc.rows());
        }
    }
    let n = ix.recs.len();
    let idx = candidates(st);
    // (usage numbers, tool calls) per candidate; None: undecided
    let per: Vec<LineRow> = scan_lines(st, &idx, |k, line| {
        let r = &ix.recs.at(idx[k]);
        line_row(r.etype, ix.role_name(r.role), line)
    })?;
    let mut usage: Vec<Option<EntryUsage>> = if per_entry { vec![None; n] } else { Vec::new() };
    let mut acc = RowSums::default();
    for (k, one) in per.iter().enumerate() {
        let i = idx[k];
        acc.add(
            i as u32,
            entry_kind::type_row(ix.recs.at(i).etype).is_summary(),
            one,
        );
        if per_entry {
            match one {
                // a candidate without a usage: the per-entry sums of nothing, zeros
                Some((None, _)) => usage[i] = Some([Some(0.0); 5]),
                Some((Some(nums), _)) => {
                    usage[i] = Some(
                        nums.map(|v| v.map(|x| Num::Int(0).add(x).map_or(f64::NAN, Num::to_f64))),
                    )
                }
                None => {}
            }
        }
    }
    let mut rows = acc.rows();
    rows.usage = usage;
    Ok(rows)
}

/// Pi's token estimate of every entry's context messages, on every core; None where Python decides.
/// As `cut::entry_info` makes it, what `Session.entry_metrics` reads.
pub fn entry_tokens(st: &Store) -> Vec<Option<u64>> {
    (0..st.index.recs.len() as u32)
        .into_par_iter()
        .with_min_len(256)
        .map(|i| crate::cut::entry_info(st, i).map(|info| info.tokens))
        .collect()
}

/// Entry counts of the stats row, from the index.
///
/// Message entries, those by role (user, assistant, toolResult, bashExecution, custom, then any
/// other), compactions and branch summaries.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Counts {
    pub messages: u64,
    pub roles: [u64; 6],
    pub compactions: u64,
    pub branch_summaries: u64,
}

/// The roles with a column of their own, in [`Counts::roles`] order (`other` last).
pub const ROLE_COLUMNS: [&str; 5] = ["user", "assistant", "toolResult", "bashExecution", "custom"];

pub fn counts(st: &Store) -> Counts {
    let ix = &st.index;
    let mut c = Counts::default();
    let mut by_code: Vec<u64> = Vec::new();
    for r in &ix.recs {
        match r.etype {
            T_MESSAGE => {
                c.messages += 1;
                let k = r.role as usize;
                if by_code.len() <= k {
                    by_code.resize(k + 1, 0);
                }
                by_code[k] += 1;
            }
            T_COMPACTION => c.compactions += 1,
            T_BRANCH_SUMMARY => c.branch_summaries += 1,
            _ => {}
        }
    }
    for (code, &count) in by_code.iter().enumerate() {
        let name = if code == 0 {
            ""
        } else {
            ix.role_name(code as u16)
        };
        let col = ROLE_COLUMNS.iter().position(|&r| r == name).unwrap_or(5);
        c.roles[col] += count;
    }
    c
}

/// Pi's `modified` rule as `fleet/_rows.py` applies it.
///
/// The last user or assistant message that has `content`, its `message.timestamp` when a number,
/// else its entry's timestamp when a valid date. `Ok(Err(i))`: entry `i` must be decided by the
/// exact (Python) rules (the scan stops there); `Ok(Ok(None))`: no such message.
pub fn last_activity(st: &Store) -> Result<Result<Option<f64>, u32>, StoreError> {
    let ix = &st.index;
    for i in (0..ix.recs.len()).rev() {
        let r = &ix.recs.at(i);
        if r.etype != T_MESSAGE
            || r.role == 0
            || !matches!(ix.role_name(r.role), "user" | "assistant")
        {
            continue;
        }
        let line = st.line(i)?;
        let Some(f) = line_facts(&line) else {
            return Ok(Err(i as u32));
        };
        if !f.message_obj || !f.has_content {
            continue;
        }
        match f.msg_timestamp {
            Scalar::Int(t) => return Ok(Ok(Some(t as f64))),
            Scalar::Float(t) => return Ok(Ok(Some(t))),
            _ => {}
        }
        if f.timestamp_array {
            return Ok(Err(i as u32));
        }
        if r.ts().is_finite() {
            return Ok(Ok(Some(r.ts())));
        }
    }
    Ok(Ok(None))
}

/// JavaScript truthiness of a parsed value (an object or array is truthy even when empty).
fn js_truthy(v: Scalar) -> bool {
    match v {
        Scalar::Missing | Scalar::Null => false,
        Scalar::Bool(b) => b,
        Scalar::Int(n) => n != 0,
        Scalar::Float(f) => f != 0.0 && !f.is_nan(),
        Scalar::Str { empty } => !empty,
        Scalar::Obj { .. } | Scalar::Arr => true,
    }
}

/// How JavaScript adds a usage field (`x += value`; `_jsjson.js_usage_number`).
///
/// Null 0, booleans 0/1, numbers themselves, anything else (a missing field included) NaN (None).
/// The one home of that rule in the core: the context estimate here and the HTML digest's sums
/// (`digest.rs`, through [`Scalar::of_value`]) use it.
pub fn js_usage_number(v: Scalar) -> Option<Num> {
    match v {
        Scalar::Null => Some(Num::Int(0)),
        Scalar::Bool(b) => Some(Num::Int(i128::from(b))),
        Scalar::Int(n) => Some(Num::Int(n)),
        Scalar::Float(f) if !f.is_nan() => Some(Num::Float(f)),
        _ => None,
    }
}

/// Pi's `calculateContextTokens` as `context.calculate_context_tokens` computes it (None: NaN).
fn context_tokens_of(u: &Usage) -> Option<Num> {
    if !matches!(u.value, Scalar::Obj { .. }) {
        return None;
    }
    if js_truthy(u.total_tokens) {
        return match u.total_tokens {
            Scalar::Int(n) => Some(Num::Int(n)),
            Scalar::Float(f) => Some(Num::Float(f)),
            other => js_usage_number(other),
        };
    }
    let mut sum = js_usage_number(u.fields[0])?;
    for k in 1..4 {
        sum = sum.add(js_usage_number(u.fields[k])?)?;
    }
    Some(sum)
}

fn positive(n: Num) -> bool {
    match n {
        Num::Int(i) => i > 0,
        Num::Float(f) => f > 0.0,
    }
}

/// Pi's projected estimate of the context at `leaf`: (tokens, context messages).
///
/// `context.estimate_projected_context_tokens` over `buildSessionContext`, as `fleet/_rows.py`
/// computes it, reading only the lines it needs: the latest compaction, the assistant messages from
/// the end back to the last one with a usable usage, and the token estimates after it (all of them
/// when that usage does not count). None where the exact (Python) rules must decide: repeated or
/// non-string ids, a legacy file, any `context_edit`, a system message, a compaction's
/// `systemMessage`, a type the projection leaves undecided (`entry_kind.rs`) on the context path,
/// content the estimate leaves to Python, a cycle, no leaf.
pub fn context_estimate(st: &Store, leaf: Option<u32>) -> Option<(Num, u64)> {
    use crate::index::NONE;
    let ix = &st.index;
    let leaf = leaf?;
    if ix.has_duplicate_ids() || ix.needs_migration() || ix.first_context_edit != NONE {
        return None;
    }
    let path = ix.branch(leaf).ok()?;
    let rec = |i: u32| ix.recs.at(i as usize);
    if path.iter().any(|&i| ix.key_string(rec(i).id).is_none()) {
        return None;
    }
    let cpos = path.iter().rposition(|&i| rec(i).etype == T_COMPACTION);
    // (entry, is the leading compaction) of the context, in order
    let mut entries: Vec<(u32, bool)> = Vec::new();
    if let Some(c) = cpos {
        entries.push((path[c], true));
        let fk = ix.target(path[c]);
        if let Some(kept) = path[..c].iter().position(|&i| rec(i).id == fk) {
            entries.extend(path[kept..c].iter().map(|&i| (i, false)));
        }
        entries.extend(path[c + 1..].iter().map(|&i| (i, false)));
    } else {
        entries.extend(path.iter().map(|&i| (i, false)));
    }
    // the entries that contribute a message, each with its estimate when already known
    let mut msgs: Vec<(u32, Option<u64>)> = Vec::new();
    for &(i, leading) in &entries {
        let r = rec(i);
        match entry_kind::type_row(r.etype).context {
            Context::CompactionSummary if leading => {
                let line = st.line(i as usize).ok()?;
                let v: serde_json::Value = serde_json::from_slice(&line).ok()?;
                let sys = v.get("systemMessage");
                let sys_truthy = match sys {
                    None | Some(serde_json::Value::Null) => false,
                    Some(serde_json::Value::Bool(b)) => *b,
                    Some(serde_json::Value::Number(n)) => n.as_f64().is_none_or(|f| f != 0.0),
                    Some(serde_json::Value::String(s)) => !s.is_empty(),
                    Some(_) => true,
                };
                if sys_truthy {
                    return None;
                }
                let summary = v.get("summary")?.as_str()?;
                let msg = serde_json::json!({"role": "compactionSummary", "summary": summary});
                let crate::tokens::Estimate::Tokens(t) = crate::tokens::estimate_message(&msg)
                else {
                    return None;
                };
                msgs.push((i, Some(t)));
            }
            Context::CompactionSummary => {} // only the latest compaction contributes
            Context::Message => {
                if r.role == 0 || ix.role_name(r.role) == "system" {
                    return None;
                }
                msgs.push((i, None));
            }
            Context::CustomMessage => msgs.push((i, None)),
            Context::BranchSummary => {
                let info = crate::cut::entry_info(st, i)?;
                if info.has_message {
                    msgs.push((i, Some(info.tokens)));
                }
            }
            Context::Nothing => {}
            // a type the projection leaves to Python (and edits, refused above)
            Context::ContextEdit | Context::Undecided => return None,
        }
    }
    let estimate = |k: usize| -> Option<u64> {
        match msgs[k].1 {
            Some(t) => Some(t),
            None => {
                let info = crate::cut::entry_info(st, msgs[k].0)?;
                info.has_message.then_some(info.tokens)
            }
        }
    };
    let sum_all = || -> Option<Num> {
        let mut t = 0u64;
        for k in 0..msgs.len() {
            t = t.checked_add(estimate(k)?)?;
        }
        Some(Num::Int(i128::from(t)))
    };
    let n = msgs.len() as u64;
    // the last assistant message with a usable usage (Pi `getAssistantUsage`)
    for k in (0..msgs.len()).rev() {
        let i = msgs[k].0;
        let r = rec(i);
        if r.etype != T_MESSAGE || ix.role_name(r.role) != "assistant" {
            continue;
        }
        let line = st.line(i as usize).ok()?;
        let f = line_facts(&line)?;
        if !f.message_obj || f.role != Name::Str(b"assistant") {
            return None; // the index and the line disagree: let Python read it
        }
        if f.msg_usage.value == Scalar::Missing {
            continue; // `"usage" in message` is false
        }
        if matches!(f.stop_reason, Name::Str(b"aborted") | Name::Str(b"error")) {
            continue;
        }
        if !js_truthy(f.msg_usage.value) {
            continue;
        }
        let Some(usage_tokens) = context_tokens_of(&f.msg_usage) else {
            continue; // NaN: not > 0
        };
        if !positive(usage_tokens) {
            continue;
        }
        // the usage counts when its entry comes after every compaction on the path
        let pos = path.iter().position(|&p| p == i)?;
        let id_truthy = ix.key_string(r.id).is_some_and(|s| !s.is_empty());
        let counts = id_truthy && cpos.is_none_or(|c| pos > c);
        if !counts {
            return Some((sum_all()?, n));
        }
        let mut trailing = 0u64;
        for j in k + 1..msgs.len() {
            trailing = trailing.checked_add(estimate(j)?)?;
        }
        return Some((usage_tokens.add(Num::Int(i128::from(trailing)))?, n));
    }
    Some((sum_all()?, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(s: &str) -> LineFacts<'_> {
        line_facts(s.as_bytes()).expect("decided")
    }

    #[test]
    fn reads_message_usage_and_tool_calls() {
        let f = facts(
            r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"text","text":"x\"}"},{"type":"toolCall","name":"r","arguments":{"type":"toolCall"}},"s",{"type":"toolCall"}],"usage":{"input":10,"output":2.5,"cacheRead":null,"cacheWrite":true,"totalTokens":9,"cost":{"total":0.25,"input":1}},"timestamp":5}}"#,
        );
        assert!(f.message_obj && f.has_content && f.content_array);
        assert_eq!(f.role, Name::Str(b"assistant"));
        assert_eq!(f.tool_calls, 2);
        assert_eq!(
            f.msg_usage.fields,
            [
                Scalar::Int(10),
                Scalar::Float(2.5),
                Scalar::Null,
                Scalar::Bool(true),
                Scalar::Float(0.25)
            ]
        );
        assert_eq!(f.msg_usage.total_tokens, Scalar::Int(9));
        assert_eq!(f.msg_timestamp, Scalar::Int(5));
    }

    #[test]
    fn the_last_repeated_key_wins_and_cost_must_be_an_object() {
        let f = facts(
            r#"{"usage":{"input":1},"message":{"role":"user"},"usage":{"input":2,"cost":{"total":1},"cost":3},"message":{"role":"toolResult","content":"x"}}"#,
        );
        assert_eq!(f.usage.fields[0], Scalar::Int(2));
        assert_eq!(f.usage.fields[4], Scalar::Missing);
        assert_eq!(f.role, Name::Str(b"toolResult"));
        assert!(f.has_content && !f.content_array);
    }

    #[test]
    fn undecided_where_python_must_decide() {
        for line in [
            r#"{"message":{"r\u006fle":"assistant"}}"#,
            r#"{"message":{"role":"assist\u0061nt"}}"#,
            r#"{"usage":{"input":123456789012345678901234567890123456789012345}}"#,
            r#"{"message":{"role":"assistant"}"#,
            r#"[1]"#,
            r#"{"a":1} x"#,
        ] {
            assert_eq!(line_facts(line.as_bytes()), None, "{line}");
        }
        // escapes elsewhere are skipped
        let f = facts(r#"{"x":{"k\u0041":"\ud800"},"message":{"role":"user","content":"\n"}}"#);
        assert_eq!(f.role, Name::Str(b"user"));
    }

    #[test]
    fn sums_follow_python_int_and_float_arithmetic() {
        let mut s = Sums::default();
        let big = Num::Int(1 << 60);
        s.add(&[
            Some(big),
            Some(Num::Float(0.1)),
            None,
            Some(Num::Int(0)),
            None,
        ])
        .unwrap();
        s.add(&[Some(Num::Int(1)), Some(Num::Float(0.2)), None, None, None])
            .unwrap();
        let t = s.totals().unwrap();
        // ints add exactly before the one conversion to float
        assert_eq!(t[0], Some(((1i128 << 60) + 1) as f64));
        assert_eq!(t[1], Some(0.1 + 0.2));
        assert_eq!(t[2], None); // usages were added, none gave a number
        assert_eq!(t[3], Some(0.0));
        assert_eq!(t[5], None);
        // total: 0 + input + output + cacheWrite (the parts that are not None)
        assert_eq!(t[4], Some(((1i128 << 60) + 1) as f64 + (0.1 + 0.2) + 0.0));
        assert_eq!(Sums::default().totals().unwrap(), [Some(0.0); 6]);
    }

    #[test]
    fn carried_usage_follows_usage_py() {
        let carried_of = |line: &str, msg: bool| {
            let f = line_facts(line.as_bytes()).unwrap();
            let t = entry_kind::type_row_of_name(if msg { "message" } else { "usage" });
            carried(t, &f).is_some()
        };
        assert!(carried_of(
            r#"{"message":{"role":"assistant","usage":{}}}"#,
            true
        ));
        assert!(!carried_of(
            r#"{"message":{"role":"toolResult","usage":{}}}"#,
            true
        ));
        assert!(carried_of(
            r#"{"message":{"role":"toolResult","usage":{"input":1}}}"#,
            true
        ));
        assert!(!carried_of(
            r#"{"message":{"role":"assistant","usage":5}}"#,
            true
        ));
        assert!(!carried_of(
            r#"{"message":{"role":"user","usage":{"input":1}}}"#,
            true
        ));
        assert!(!carried_of(r#"{"type":"compaction","usage":{}}"#, false));
        assert!(carried_of(
            r#"{"type":"compaction","usage":{"x":1}}"#,
            false
        ));
    }

    #[test]
    fn tool_results_without_usage_are_told_by_their_bytes() {
        assert!(surely_without_usage(
            br#"{"message":{"role":"toolResult","content":"x"}}"#
        ));
        assert!(!surely_without_usage(br#"{"message":{"usage":{}}}"#));
        assert!(!surely_without_usage(br#"{"message":{"us\u0061ge":{}}}"#));
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(1000), "]".repeat(1000));
        assert!(!surely_without_usage(deep.as_bytes()));
    }

    fn store(lines: &[&str]) -> Store {
        let mut text = String::from(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00Z","cwd":"/"}"#,
        );
        for l in lines {
            text.push('\n');
            text.push_str(l);
        }
        text.push('\n');
        Store::from_bytes(text.into_bytes(), false)
    }

    #[test]
    fn context_estimate_trusts_a_usage_after_the_latest_compaction_only() {
        let u = r#"{"input":100,"output":20,"cacheRead":0,"cacheWrite":0,"totalTokens":0}"#;
        let lines = [
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"abcdefgh"}}"#.to_string(),
            format!(r#"{{"type":"message","id":"b","parentId":"a","message":{{"role":"assistant","content":[],"usage":{u}}}}}"#),
            r#"{"type":"message","id":"c","parentId":"b","message":{"role":"user","content":"abcd"}}"#.to_string(),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let st = store(&refs);
        // usage 120 (totalTokens 0 is falsy: the four fields) + "abcd" (1 token) after it
        assert_eq!(context_estimate(&st, Some(2)), Some((Num::Int(121), 3)));
        // a compaction after the usage: the estimate of every message instead
        let mut more = refs.clone();
        let comp = r#"{"type":"compaction","id":"d","parentId":"c","summary":"abcdefghijkl","firstKeptEntryId":"c","tokensBefore":5}"#;
        more.push(comp);
        let st = store(&more);
        // compaction summary (3 tokens) + kept "abcd" (1)
        assert_eq!(context_estimate(&st, Some(3)), Some((Num::Int(4), 2)));
        // an aborted reply's usage is not used; a system message is left to Python
        let aborted = format!(
            r#"{{"type":"message","id":"b","parentId":"a","message":{{"role":"assistant","stopReason":"aborted","content":[],"usage":{u}}}}}"#
        );
        let st = store(&[refs[0], &aborted, refs[2]]);
        assert_eq!(context_estimate(&st, Some(2)), Some((Num::Int(3), 3)));
        let sys = r#"{"type":"message","id":"z","parentId":"c","message":{"role":"system","content":"x"}}"#;
        let st = store(&[refs[0], refs[1], refs[2], sys]);
        assert_eq!(context_estimate(&st, Some(3)), None);
        assert_eq!(context_estimate(&st, None), None);
    }

    #[test]
    fn counts_by_type_and_role() {
        let st = store(&[
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}"#,
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"planner","content":"x"}}"#,
            r#"{"type":"message","id":"c","parentId":"b","message":5}"#,
            r#"{"type":"compaction","id":"d","parentId":"c","summary":"s","firstKeptEntryId":"c"}"#,
            r#"{"type":"branch_summary","id":"e","parentId":"d","summary":"s","fromId":"a"}"#,
        ]);
        let c = counts(&st);
        assert_eq!(c.messages, 3);
        assert_eq!(c.roles, [1, 0, 0, 0, 0, 2]);
        assert_eq!((c.compactions, c.branch_summaries), (1, 1));
    }

    #[test]
    fn sums_kept_by_the_scan_equal_a_second_read() {
        let asst = |id: &str, parent: &str, u: &str| {
            format!(
                r#"{{"type":"message","id":"{id}","parentId":"{parent}","message":{{"role":"assistant","content":[{{"type":"toolCall"}}],"usage":{u}}}}}"#
            )
        };
        let mut lines = vec![
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}"#.to_string(),
            r#"{"type":"message","id":"t","parentId":"a","message":{"role":"toolResult","content":"x","usage":{"output":3}}}"#.to_string(),
            r#"{"type":"compaction","id":"c","parentId":"t","summary":"s","firstKeptEntryId":"a","usage":{"input":4,"cost":{"total":0.5}}}"#.to_string(),
        ];
        for k in 0..200 {
            let parent = if k == 0 {
                "c".to_string()
            } else {
                format!("m{}", k - 1)
            };
            lines.push(asst(
                &format!("m{k}"),
                &parent,
                &format!(r#"{{"input":{k},"output":1.5,"cost":{{"total":0.01}}}}"#),
            ));
        }
        lines.push(asst("u", "m199", r#"{"inp\u0075t":5}"#)); // undecided
        let text: Vec<&str> = lines.iter().map(String::as_str).collect();
        let st = store(&text);
        let want = session_rows(&st, false).unwrap();
        for parallel in [false, true] {
            let mut data = format!(
                "{}\n{}\n",
                r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00Z","cwd":"/"}"#,
                text.join("\n")
            )
            .into_bytes();
            // whole, and with the last line unterminated (provisional, then completed)
            let kept = Store::from_bytes_with(data.clone(), parallel, true);
            assert!(kept.index.row_sums.as_ref().is_some_and(|a| a.complete));
            let got = session_rows(&kept, false).unwrap();
            assert_eq!(format!("{got:?}"), format!("{want:?}"));
            data.pop();
            let torn = Store::from_bytes_with(data, parallel, true);
            let got = session_rows(&torn, false).unwrap();
            assert_eq!(format!("{got:?}"), format!("{want:?}"));
        }
    }

    /// Random lines built from the keys the row reads (repeated, nested, escaped, at the wrong
    /// level) and values of every kind, with whitespace between tokens.
    fn random_line(seed: &mut u64) -> String {
        fn next(s: &mut u64) -> u64 {
            *s ^= *s << 13;
            *s ^= *s >> 7;
            *s ^= *s << 17;
            *s
        }
        const KEYS: [&str; 16] = [
            "type",
            "role",
            "usage",
            "content",
            "message",
            "input",
            "output",
            "cost",
            "total",
            "cacheRead",
            "cacheWrite",
            "totalTokens",
            "text",
            "arguments",
            "us\\u0061ge",
            "typ\\u0065",
        ];
        const SCALARS: [&str; 14] = [
            "1",
            "-2",
            "2.5",
            "1e3",
            "null",
            "true",
            "false",
            "\"toolCall\"",
            "\"text\"",
            "\"assistant\"",
            "\"\"",
            "\"toolC\\u0061ll\"",
            "\"x\\\"}\"",
            "123456789012345678901",
        ];
        fn value(s: &mut u64, depth: u32, out: &mut String) {
            let ws = |s: &mut u64, out: &mut String| {
                if next(s) % 5 == 0 {
                    out.push_str(" \t");
                }
            };
            match next(s) % if depth > 4 { 2 } else { 5 } {
                0 | 1 => out.push_str(SCALARS[(next(s) % SCALARS.len() as u64) as usize]),
                2 | 3 => {
                    out.push('{');
                    for k in 0..next(s) % 5 {
                        if k > 0 {
                            out.push(',');
                        }
                        ws(s, out);
                        out.push('"');
                        out.push_str(KEYS[(next(s) % KEYS.len() as u64) as usize]);
                        out.push('"');
                        ws(s, out);
                        out.push(':');
                        ws(s, out);
                        value(s, depth + 1, out);
                        ws(s, out);
                    }
                    out.push('}');
                }
                _ => {
                    out.push('[');
                    for k in 0..next(s) % 4 {
                        if k > 0 {
                            out.push(',');
                        }
                        ws(s, out);
                        value(s, depth + 1, out);
                    }
                    out.push(']');
                }
            }
        }
        let mut out = String::from("{\"type\":\"message\"");
        for _ in 0..1 + next(seed) % 4 {
            out.push_str(",\"");
            out.push_str(KEYS[(next(seed) % KEYS.len() as u64) as usize]);
            out.push_str("\":");
            value(seed, 1, &mut out);
        }
        out.push('}');
        out
    }

    #[test]
    fn rows_from_the_parse_equal_a_second_read() {
        use crate::index::{T_BRANCH_SUMMARY, T_COMPACTION};
        let mut lines: Vec<String> = vec![
            r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"text","text":"x\"}"},{"type":"toolCall","name":"r","arguments":{"type":"toolCall"}},"s",{"type":"toolCall"}],"usage":{"input":10,"output":2.5,"cacheRead":null,"cacheWrite":true,"totalTokens":9,"cost":{"total":0.25,"input":1}},"timestamp":5}}"#.into(),
            r#"{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","type":"text"},{"type":"text","type":"toolCall"}]},"message":{"role":"assistant","content":[{"type":"toolCall"}],"content":[]}}"#.into(),
            r#"{"usage":{"input":1},"message":{"role":"toolResult","content":"x","usage":{"output":3}},"usage":{"output":7}}"#.into(),
            r#"{"message":{"role":"assistant","content":[ { "type" : "toolCall" } , {} , [] ] , "usage" : { "input" : 4 } } }"#.into(),
            r#"{"message":{"role":"assistant","content":[{"typ\u0065":"toolCall"},{"type":"toolC\u0061ll"}]}}"#.into(),
            r#"{"message":"x","usage":{"input":2,"cost":{"total":1}}}"#.into(),
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        lines.extend((0..3000).map(|_| random_line(&mut seed)));
        let mut parser = crate::json::LineParser::with_rows(true);
        let mut compared = 0;
        for line in &lines {
            let Ok(sk) = parser.parse(line.as_bytes()) else {
                continue;
            };
            for (etype, role) in [
                (T_MESSAGE, "assistant"),
                (T_MESSAGE, "toolResult"),
                (T_COMPACTION, ""),
                (T_BRANCH_SUMMARY, ""),
            ] {
                let want = line_row(etype, role, line.as_bytes());
                let got = line_row_at(etype, role, line.as_bytes(), &sk.rows);
                // (the second read leaves escaped keys to Python; the parse decodes them)
                if want.is_some() {
                    compared += 1;
                    assert_eq!(got, want, "{line}");
                }
            }
        }
        assert!(compared > 4000, "{compared}");
        // an escaped key is the key it spells
        let plain = r#"{"message":{"role":"assistant","content":[],"usage":{"input":3}}}"#;
        let escaped = r#"{"message":{"role":"assistant","content":[],"us\u0061ge":{"input":3}}}"#;
        let mut spans = |l: &str| parser.parse(l.as_bytes()).unwrap().rows;
        let a = line_row_at(T_MESSAGE, "assistant", plain.as_bytes(), &spans(plain));
        assert_eq!(
            a,
            Some((Some([Some(Num::Int(3)), None, None, None, None]), 0))
        );
        let b = line_row_at(T_MESSAGE, "assistant", escaped.as_bytes(), &spans(escaped));
        assert_eq!(a, b);
        // without rows the parse records nothing
        let none = crate::json::LineParser::new()
            .parse(plain.as_bytes())
            .unwrap();
        assert_eq!(none.rows, RowSpans::default());
    }

    #[test]
    fn hostile_lines_never_panic() {
        let cases = [
            "",
            "{",
            "{\"",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":[",
            "{\"message\":{\"content\":[{",
            "{\"usage\":{\"input\":-}}",
            "{\"usage\":{\"input\":1e999}}",
            "}}}}",
            "{\"a\":tru}",
        ];
        for c in cases {
            let _ = line_facts(c.as_bytes());
        }
        let deep = |n: usize| format!("{{\"a\":{}{}}}", "[".repeat(n), "]".repeat(n));
        assert!(line_facts(deep(900).as_bytes()).is_some());
        // deeper than Python loads: its rules decide (they raise)
        assert!(line_facts(deep(100_000).as_bytes()).is_none());
    }

    /// `ROWS_PROFILE=FILE cargo test --profile dev-fast --lib rows::tests::profile -- --ignored
    /// --nocapture`.
    ///
    /// The open, the line scan alone and the whole session rows, one file.
    #[test]
    #[ignore]
    fn profile() {
        let Ok(p) = std::env::var("ROWS_PROFILE") else {
            return;
        };
        let t = std::time::Instant::now();
        let st = Store::open(std::path::Path::new(&p), true).unwrap();
        let open = t.elapsed();
        let data = std::fs::read(&p).unwrap();
        let t = std::time::Instant::now();
        let mut k = 0usize;
        for line in data.split(|&b| b == b'\n') {
            k += usize::from(line_facts(line).is_some());
        }
        let facts = t.elapsed();
        let t = std::time::Instant::now();
        let mut p2 = crate::json::LineParser::new();
        for line in data.split(|&b| b == b'\n') {
            let _ = p2.parse(line);
        }
        let parse = t.elapsed();
        let t = std::time::Instant::now();
        let idx = candidates(&st);
        let mut total = 0usize;
        st.with_lines(&idx, |_, l| total += l.len()).unwrap();
        eprintln!(
            "with_lines of {} candidates, {total} bytes: {:?}",
            idx.len(),
            t.elapsed()
        );
        let t = std::time::Instant::now();
        let mut skipped = 0usize;
        for line in data.split(|&b| b == b'\n') {
            skipped += usize::from(surely_without_usage(line));
        }
        eprintln!(
            "prefilter over all lines: {:?} ({skipped} would be skipped)",
            t.elapsed()
        );
        let t = std::time::Instant::now();
        let rows = session_rows(&st, false).unwrap();
        let whole = t.elapsed();
        let t = std::time::Instant::now();
        let ctx = context_estimate(&st, st.index.recs.len().checked_sub(1).map(|l| l as u32));
        let cx = t.elapsed();
        let mb = data.len() as f64 / 1e6;
        eprintln!(
            "open {open:?}; facts (one core) {:.0} MB/s ({k} lines); skeleton parse {:.0} MB/s; session_rows {whole:?} ({} undecided); context {cx:?} {ctx:?}",
            mb / facts.as_secs_f64(),
            mb / parse.as_secs_f64(),
            rows.undecided.len()
        );
    }
}

#[cfg(test)]
mod prof {
    /// `ROWS_PROFILE=FILE cargo test --profile dev-fast --lib rows::prof -- --ignored --nocapture`:
    /// the row scan's parts on one file (tool-result prefilter, assistant lines' facts).
    #[test]
    #[ignore]
    fn profile() {
        let Ok(p) = std::env::var("ROWS_PROFILE") else {
            return;
        };
        let data = std::fs::read(p).unwrap();
        let lines: Vec<&[u8]> = data
            .split(|&c| c == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        let tr: Vec<&[u8]> = lines
            .iter()
            .copied()
            .filter(|l| memchr::memmem::find(l, b"\"role\":\"toolResult\"").is_some())
            .collect();
        let asst: Vec<&[u8]> = lines
            .iter()
            .copied()
            .filter(|l| memchr::memmem::find(l, b"\"role\":\"assistant\"").is_some())
            .collect();
        let mb = |v: &[&[u8]]| v.iter().map(|l| l.len()).sum::<usize>() as f64 / 1e6;
        for _ in 0..9 {
            let t = std::time::Instant::now();
            let n = tr.iter().filter(|l| super::surely_without_usage(l)).count();
            let a = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let m = tr
                .iter()
                .filter(|l| memchr::memmem::find(l, b"\"usage\"").is_none())
                .count();
            let a1 = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let k = asst
                .iter()
                .filter(|l| super::line_facts(l).is_some())
                .count();
            let b = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let mut p = crate::json::LineParser::new();
            let j = lines.iter().filter(|l| p.parse(l).is_ok()).count();
            let c = t.elapsed().as_secs_f64();
            // the parse that records the row's places, then the rows from them
            let t = std::time::Instant::now();
            let mut pr = crate::json::LineParser::with_rows(true);
            let spans: Vec<_> = lines.iter().map(|l| pr.parse(l).map(|s| s.rows)).collect();
            let cr = t.elapsed().as_secs_f64();
            let msg = crate::index::T_MESSAGE;
            let roles: Vec<Option<&str>> = lines
                .iter()
                .map(|l| {
                    if memchr::memmem::find(l, b"\"role\":\"assistant\"").is_some() {
                        Some("assistant")
                    } else if memchr::memmem::find(l, b"\"role\":\"toolResult\"").is_some() {
                        Some("toolResult")
                    } else {
                        None
                    }
                })
                .collect();
            let t = std::time::Instant::now();
            let mut decided = 0;
            for ((l, sp), role) in lines.iter().zip(&spans).zip(&roles) {
                if let (Ok(sp), Some(role)) = (sp, role) {
                    decided += usize::from(super::line_row_at(msg, role, l, sp).is_some());
                }
            }
            let ra = t.elapsed().as_secs_f64();
            let all = data.len() as f64 / 1e6;
            eprintln!("parse recording rows {:.0} MB/s (plain {:.0} MB/s); rows from the places {decided} lines {:.4}s ({:.0} MB/s of the file)", all / cr, all / c, ra, all / ra);
            eprintln!("prefilter {n}/{} lines {:.1} MB {:.4}s ({:.0} MB/s; memmem usage only {m}: {:.4}s) | facts {k}/{} lines {:.1} MB {:.4}s ({:.0} MB/s) | skeleton parse {j} lines {:.4}s ({:.0} MB/s)",
                tr.len(), mb(&tr), a, mb(&tr) / a, a1, asst.len(), mb(&asst), b, mb(&asst) / b, c, data.len() as f64 / 1e6 / c);
        }
    }
}
