//! The cargo-fuzz checks (fuzz/src/lib.rs) driven by a seeded PRNG instead of libFuzzer, so
//! plain `cargo test` exercises them on every CI run. More iterations:
//! `SESSIONTREE_FUZZ_ITERS=200000 cargo test --release --test fuzz_fallback`.
//! Coverage-guided runs: see docs/reliability.md ("Fuzzing").

#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod fuzz;
