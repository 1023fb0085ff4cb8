//! The skeleton parser against in-memory floors, one thread, interleaved:
//! `cargo run --release --example parse_floor -- FILE [ROUNDS]`.
//!
//! Each round runs, in turn, over the whole file held in memory: counting newlines with
//! memchr, UTF-8 validation (simdutf8), and the line-by-line skeleton parse that the open
//! scan does, each line read up to its newline: by the exact reader alone
//! (`LineParser::parse_object_line_exact`) and with the skim first
//! (`LineParser::parse_object_line_into_no_utf8`, what the scan calls).
//! It prints each contender's best and median in ms and GB/s, and the ratios. No I/O, no index: this is the parse's CPU per byte alone.

use sessiontree_core::json::{LineParser, Skel, TopKind};
use std::time::Instant;

fn parse_all(data: &[u8], exact: bool) -> usize {
    let mut p = LineParser::new();
    let mut start = 0;
    let mut n = 0;
    while start < data.len() {
        let mut sk = Skel::new(TopKind::Object);
        let r = if exact {
            p.parse_object_line_exact(&data[start..], &mut sk)
        } else {
            p.parse_object_line_into_no_utf8(&data[start..], &mut sk)
        };
        match r {
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
    let names = ["memchr \\n", "utf8", "exact", "skim", "blocks"];
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for _ in 0..rounds {
        for (i, w) in wall.iter_mut().enumerate() {
            let t0 = Instant::now();
            let r = match i {
                0 => memchr::memchr_iter(b'\n', &data).count(),
                1 => simdutf8::basic::from_utf8(&data).is_ok() as usize,
                2 => parse_all(&data, true),
                3 => parse_all(&data, false),
                _ => sessiontree_core::json::skim::blocks_only(&data) as usize,
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
            "{n:>10}: best {:7.1} ms ({:5.2} GB/s) median {:7.1} ms",
            v[0] * 1e3,
            gb / v[0],
            v[v.len() / 2] * 1e3
        );
    }
    assert_eq!(parse_all(&data, true), parse_all(&data, false));
    let (mut lines, mut skimmed, mut start) = (0, 0, 0);
    let mut p = LineParser::new();
    while start < data.len() {
        let mut sk = Skel::new(TopKind::Object);
        lines += 1;
        skimmed += p
            .parse_object_line_skim(&data[start..], &mut sk)
            .is_some() as usize;
        let k = memchr::memchr(b'\n', &data[start..]).unwrap_or(data.len() - start);
        start += k + 1;
    }
    println!("the skim answered {skimmed} of {lines} lines");

    println!(
        "exact / memchr: {:.2}x, skim / memchr: {:.2}x, skim / exact: {:.2}x",
        best[2] / best[0],
        best[3] / best[0],
        best[3] / best[2]
    );
}
