//! sessiontree core: scanning, indexing and walking Pi session files (JSONL v3).
//!
//! Pure Rust; the only module that knows Python is `py` (feature `python`).

pub mod append;
pub mod cut;
pub mod digest;
pub mod entry_kind;
pub mod export;
pub mod index;
pub mod jsdate;
pub mod json;
pub mod jstext;
pub mod rows;
pub mod saved;
pub mod scan;
pub mod scrub;
pub mod store;
pub mod tokens;
pub mod treejson;
pub mod walk;

#[cfg(feature = "python")]
mod py;
