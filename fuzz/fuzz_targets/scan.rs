//! Arbitrary bytes as a session file.
//!
//! Scan whole and in two pieces (as `refresh()` and appends do), then every walk. See
//! `sessiontree_fuzz::check_scan`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sessiontree_fuzz::check_scan(data));
