//! Skipped and odd lines (blank, malformed, torn, falsy, not UTF-8, extra headers), stored as
//! runs so a file of a million identical bad lines costs one record.

/// A skipped or odd line.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub line: u32,
    pub offset: u64,
    pub kind: &'static str,
    pub message: String,
}

/// The problems of a file, stored as runs: consecutive lines with the same problem (same
/// kind, reason and position) whose offsets advance by a fixed stride are one 32-byte record
/// (64 MiB of blank lines after a header is one record, not 64 Mi). Kinds and messages are
/// worked out when read, and any problem is found by position in O(log runs).
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
