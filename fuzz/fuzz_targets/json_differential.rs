//! Our JSON line reader against serde_json on the inputs where both must agree.
//! See `sessiontree_fuzz::check_json_differential`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sessiontree_fuzz::check_json_differential(data));
