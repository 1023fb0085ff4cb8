//! The skeleton parser against in-memory floors, one thread, interleaved.
//!
//! `cargo run --release --example parse_floor -- FILE [ROUNDS]`.
//!
//! Each round runs, in turn, over the whole file held in memory: counting newlines with
//! memchr, UTF-8 validation (simdutf8), and the line-by-line skeleton parse that the open
//! scan does (`LineParser::parse_object_line_into_no_utf8`, each line read up to its
//! newline), and `scan::scan_only` on one thread (the scan's own chunk loop: parsing into
//! the vectors of parsed lines the indexing takes, and the UTF-8 check). It prints each contender's best and median (ms, GB/s) and the parse's ratio to
//! the newline count. No I/O, no index, no threads: the parse's CPU per byte alone. Small
//! files (10 MiB) stay in the cache, as the open scan's 256 KiB ranges do.

use sessiontree_core::json::{LineParser, Skel, TopKind};
use std::time::Instant;

fn parse_all(data: &[u8]) -> usize {
    let mut p = LineParser::new();
    let mut start = 0;
    let mut n = 0;
    while start < data.len() {
        let mut sk = Skel::new(TopKind::Object);
        match p.parse_object_line_into_no_utf8(&data[start..], &mut sk) {
            Some(k) => {
                n += sk.id.truthy() as usize;
                start += k + 1;
            }
            None => {
                let k = memchr::memchr(b'\n', &data[start..]).unwrap_or(data.len() - start);
                start += k + 1;
            }
        }
    }
    n
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: parse_floor FILE [ROUNDS]");
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(7);
    let data = std::fs::read(path).unwrap();
    let names = ["memchr \\n", "utf8", "parse", "scan_only"];
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for _ in 0..rounds {
        for (i, w) in wall.iter_mut().enumerate() {
            let t0 = Instant::now();
            let r = match i {
                0 => memchr::memchr_iter(b'\n', &data).count(),
                1 => simdutf8::basic::from_utf8(&data).is_ok() as usize,
                2 => parse_all(&data),
                _ => sessiontree_core::scan::scan_only(&data, false).0,
            };
            std::hint::black_box(r);
            w.push(t0.elapsed().as_secs_f64());
        }
    }
    let gb = data.len() as f64 / 1e9;
    let mut best = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let v = &mut wall[i];
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        best.push(v[0]);
        println!(
            "{n:>10}: best {:7.2} ms ({:5.2} GB/s) median {:7.2} ms",
            v[0] * 1e3,
            gb / v[0],
            v[v.len() / 2] * 1e3
        );
    }
    println!(
        "parse / memchr: {:.2}x, parse / utf8: {:.2}x",
        best[2] / best[0],
        best[2] / best[1]
    );
}
