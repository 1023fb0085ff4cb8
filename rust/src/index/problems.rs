//! Skipped and odd lines (blank, malformed, torn, falsy, not UTF-8, extra headers), stored as runs.
//! A file of a million identical bad lines costs one record.

/// A skipped or odd line.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub line: u32,
    pub offset: u64,
    pub kind: &'static str,
    pub message: String,
}

/// The problems of a file, stored as runs.
///
/// Consecutive lines with the same problem (same kind, reason and position) whose offsets advance
/// by a fixed stride are one 32-byte record (64 MiB of blank lines after a header is one record,
/// not 64 Mi). Kinds and messages are worked out when read, and any problem is found by position in
/// O(log runs).
#[derive(Debug, Clone, Default)]
pub struct Problems {
    runs: Vec<ProblemRun>,
    /// problems recorded (the sum of the runs' counts)
    n: usize,
    /// JSON error reasons met so far (a handful of fixed strings)
    reasons: Vec<&'static str>,
}

#[derive(Debug, Clone, Copy)]
struct ProblemRun {
    /// byte offset of the run's first line
    offset: u64,
    /// the JSON error position, or the line length for `line_too_long`
    arg: u64,
    /// 1-based line number of the run's first line
    line: u32,
    /// position of the run's first problem among all problems
    first: u32,
    /// lines in the run: lines `line + k`, at offsets `offset + k * stride`, `k < count`
    count: u32,
    /// bytes from one line of the run to the next (0 while the run has one line)
    stride: u16,
    kind: u8,
    reason: u8,
}

pub(super) const PROBLEM_KINDS: [&str; 8] = [
    "blank_line",
    "line_too_long",
    "malformed_json",
    "torn_last_line",
    "skipped_value",
    "invalid_utf8",
    "extra_header",
    "",
];
pub(super) const P_BLANK: u8 = 0;
pub(super) const P_TOO_LONG: u8 = 1;
pub(super) const P_MALFORMED: u8 = 2;
pub(super) const P_TORN: u8 = 3;
pub(super) const P_FALSY: u8 = 4;
pub(super) const P_UTF8: u8 = 5;
pub(super) const P_EXTRA_HEADER: u8 = 6;

impl Problems {
    /// The problem kinds a scan records, in code order (what [`Problem::kind`] is).
    pub fn kinds() -> &'static [&'static str] {
        &PROBLEM_KINDS[..=P_EXTRA_HEADER as usize]
    }
    pub fn len(&self) -> usize {
        self.n
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// Records stored (runs), for memory accounting and tests.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }
    /// Keeps the first `n` problems.
    pub(super) fn truncate(&mut self, n: usize) {
        if n >= self.n {
            return;
        }
        let k = self.runs.partition_point(|r| (r.first as usize) < n);
        self.runs.truncate(k);
        if let Some(last) = self.runs.last_mut() {
            let keep = n - last.first as usize;
            if keep < last.count as usize {
                last.count = keep as u32;
                if keep == 1 {
                    last.stride = 0;
                }
            }
        }
        self.n = n;
    }
    pub(super) fn push(
        &mut self,
        line: u32,
        offset: u64,
        kind: u8,
        arg: u64,
        reason: &'static str,
    ) {
        let r = match self
            .reasons
            .iter()
            .position(|&x| std::ptr::eq(x, reason) || x == reason)
        {
            Some(i) => i,
            None => {
                self.reasons.push(reason);
                self.reasons.len() - 1
            }
        };
        let reason = r.min(255) as u8;
        self.n += 1;
        if let Some(last) = self.runs.last_mut() {
            if last.kind == kind
                && last.reason == reason
                && last.arg == arg
                && last.count < u32::MAX
            {
                let next_line = last.line as u64 + last.count as u64;
                if line as u64 == next_line {
                    if last.count == 1 {
                        if let Ok(st) = u16::try_from(offset.wrapping_sub(last.offset)) {
                            if offset > last.offset {
                                last.stride = st;
                                last.count = 2;
                                return;
                            }
                        }
                    } else if offset == last.offset + last.stride as u64 * last.count as u64 {
                        last.count += 1;
                        return;
                    }
                }
            }
        }
        let first = (self.n - 1) as u32;
        self.runs.push(ProblemRun {
            offset,
            arg,
            line,
            first,
            count: 1,
            stride: 0,
            kind,
            reason,
        });
    }
    /// The runs as bytes, for a saved index (`persist.rs`).
    pub(super) fn persist(&self, o: &mut super::persist::Out) {
        o.u64(self.n as u64);
        o.u64(self.reasons.len() as u64);
        for r in &self.reasons {
            o.bytes(r.as_bytes());
        }
        o.u64(self.runs.len() as u64);
        for r in &self.runs {
            o.u64(r.offset);
            o.u64(r.arg);
            o.u32(r.line);
            o.u32(r.first);
            o.u32(r.count);
            o.u16(r.stride);
            o.u8(r.kind);
            o.u8(r.reason);
        }
    }

    /// What [`Problems::persist`] wrote, checked.
    ///
    /// Runs in file order inside the first `covered` bytes, counts that add up, known kinds and
    /// reasons. None otherwise.
    pub(super) fn restore(r: &mut super::persist::In, covered: u64) -> Option<Problems> {
        let n = usize::try_from(r.u64()?).ok()?;
        let nreasons = r.count(8)?;
        if nreasons > 256 {
            return None;
        }
        let mut reasons = Vec::with_capacity(nreasons);
        for _ in 0..nreasons {
            reasons.push(static_reason(r.str()?)?);
        }
        let nruns = r.count(32)?;
        let mut runs = Vec::with_capacity(nruns);
        let mut total = 0usize;
        let mut prev_end = 0u64;
        for _ in 0..nruns {
            let run = ProblemRun {
                offset: r.u64()?,
                arg: r.u64()?,
                line: r.u32()?,
                first: r.u32()?,
                count: r.u32()?,
                stride: r.u16()?,
                kind: r.u8()?,
                reason: r.u8()?,
            };
            let last = run
                .offset
                .checked_add(run.stride as u64 * (run.count as u64).checked_sub(1)?)?;
            if run.first as usize != total
                || run.kind > P_EXTRA_HEADER
                || run.reason as usize >= nreasons.max(1)
                || run.offset < prev_end
                || last > covered
                || (run.count > 1 && run.stride == 0)
            {
                return None;
            }
            prev_end = last;
            total = total.checked_add(run.count as usize)?;
            runs.push(run);
        }
        if total != n || n > u32::MAX as usize {
            return None;
        }
        Some(Problems { runs, n, reasons })
    }

    fn expand(&self, r: &ProblemRun, k: u32) -> Problem {
        let message = match r.kind {
            P_BLANK => "blank line (skipped)".to_string(),
            P_TOO_LONG => format!("line of {} bytes is over the 4 GiB limit (skipped)", r.arg),
            P_MALFORMED | P_TORN => format!(
                "not JSON ({} at byte {} of the line); skipped as Pi skips it",
                self.reasons[r.reason as usize], r.arg
            ),
            P_FALSY => {
                "falsy JSON value (null, 0, false or \"\"): skipped as Pi skips it".to_string()
            }
            P_UTF8 => "bytes that are not UTF-8 inside a string (read as U+FFFD, as Pi reads them)"
                .to_string(),
            _ => "another session header inside the file (not an entry, as in Pi)".to_string(),
        };
        Problem {
            line: r.line + k,
            offset: r.offset + r.stride as u64 * k as u64,
            kind: PROBLEM_KINDS[r.kind as usize],
            message,
        }
    }
    /// Each problem in file order, with its message.
    pub fn iter(&self) -> impl Iterator<Item = Problem> + '_ {
        self.runs
            .iter()
            .flat_map(move |r| (0..r.count).map(move |k| self.expand(r, k)))
    }
    pub fn get(&self, i: usize) -> Option<Problem> {
        if i >= self.n {
            return None;
        }
        let k = self.runs.partition_point(|r| r.first as usize <= i) - 1;
        let r = &self.runs[k];
        Some(self.expand(r, (i - r.first as usize) as u32))
    }
}

/// The JSON error reasons a saved index names, as the `&'static str`s problems hold.
///
/// Each distinct text is kept once per process, and at most `MAX_REASONS` texts of at most 200
/// bytes (the parser has a handful), so no input can make this grow without bound.
fn static_reason(s: &str) -> Option<&'static str> {
    use std::sync::Mutex;
    const MAX_REASONS: usize = 64;
    static SEEN: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    if s.len() > 200 {
        return None;
    }
    let mut seen = SEEN.lock().ok()?;
    if let Some(&r) = seen.iter().find(|&&r| r == s) {
        return Some(r);
    }
    if seen.len() >= MAX_REASONS {
        return None;
    }
    let r: &'static str = Box::leak(s.to_string().into_boxed_str());
    seen.push(r);
    Some(r)
}
