//! sessiontree core: scanning, indexing and walking Pi session files (JSONL v3).
//!
//! Pure Rust; the only module that knows Python is `py` (feature `python`).

pub mod append;
pub mod columns;
pub mod content;
pub mod convert;
pub mod cut;
pub mod digest;
pub mod entry_kind;
pub mod export;
pub mod index;
pub mod jsdate;
pub mod json;
pub mod jstext;
pub mod otel;
pub mod reads;
pub mod rows;
pub mod saved;
pub mod scan;
pub mod scrub;
pub mod search;
pub mod store;
pub mod tokens;
pub mod treejson;
pub mod walk;

#[cfg(feature = "python")]
mod py;

/// xorshift64*: the tests' seeded generator (no dependency), so a failure reproduces.
#[cfg(test)]
pub(crate) struct TestRng(pub(crate) u64);

#[cfg(test)]
impl TestRng {
    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// A number in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Every line of every `.jsonl` file under `tests/corpus` (a trailing `\r` cut), for the tests
/// that check a fast path against its rule over the whole corpus; returns how many lines.
#[cfg(test)]
pub(crate) fn for_each_corpus_line(mut f: impl FnMut(&[u8])) -> usize {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus");
    let mut stack = vec![std::path::PathBuf::from(root)];
    let mut lines = 0;
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                let data = std::fs::read(&p).unwrap();
                for line in data.split(|&c| c == b'\n') {
                    f(line.strip_suffix(b"\r").unwrap_or(line));
                    lines += 1;
                }
            }
        }
    }
    lines
}
