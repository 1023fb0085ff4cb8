//! Scanner throughput in GB/s: `cargo bench --bench scan`.
//!
//! The input is a generated session (tests/tools/gen_session.py, never committed), cached in
//! target/bench-data; `SESSIONTREE_BENCH_MB` sets its size (default 64) and
//! `SESSIONTREE_BENCH_FILE` uses an existing file instead. Baselines: counting lines with
//! memchr, in memory and as `wc -l` does it (reading the file through a buffer: the yardstick
//! of `store_open/parallel`, which reads the same file from the page cache), and UTF-8
//! validation alone.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sessiontree_core::{json::LineParser, scan, store::Store};
use std::io::Read;
use std::path::PathBuf;
use std::process::Command;

fn input() -> PathBuf {
    if let Ok(p) = std::env::var("SESSIONTREE_BENCH_FILE") {
        return PathBuf::from(p);
    }
    let mb: u32 = std::env::var("SESSIONTREE_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/bench-data");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("gen-{mb}mb-seed1.jsonl"));
    if !path.exists() {
        let tmp = path.with_extension("tmp");
        let ok = Command::new("python3")
            .arg(root.join("tests/tools/gen_session.py"))
            .args(["--megabytes", &mb.to_string(), "--seed", "1", "--out"])
            .arg(&tmp)
            .status()
            .expect("python3 runs tests/tools/gen_session.py")
            .success();
        assert!(ok, "generating the bench input failed");
        std::fs::rename(&tmp, &path).unwrap();
    }
    path
}

fn bench(c: &mut Criterion) {
    let path = input();
    let data = std::fs::read(&path).unwrap();
    let mut g = c.benchmark_group("scan");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(data.len() as u64));

    g.bench_function("baseline/memchr_line_count", |b| {
        b.iter(|| memchr::memchr_iter(b'\n', &data).count())
    });
    g.bench_function("baseline/read_line_count", |b| {
        // `wc -l`: read() into a 128 KiB buffer, count newlines
        let mut buf = vec![0u8; 128 << 10];
        b.iter(|| {
            let mut f = std::fs::File::open(&path).unwrap();
            let mut n = 0;
            loop {
                let k = f.read(&mut buf).unwrap();
                if k == 0 {
                    break n;
                }
                n += memchr::memchr_iter(b'\n', &buf[..k]).count();
            }
        })
    });
    g.bench_function("baseline/utf8_validate", |b| {
        b.iter(|| simdutf8::basic::from_utf8(&data).is_ok())
    });
    g.bench_function("parse_lines/1_thread_no_split", |b| {
        // the JSON reader alone, over pre-split lines
        let lines: Vec<&[u8]> = data.split(|&c| c == b'\n').collect();
        b.iter(|| {
            let mut p = LineParser::new();
            lines.iter().filter(|l| p.parse(l).is_ok()).count()
        })
    });
    for parallel in [false, true] {
        let name = if parallel { "parallel" } else { "1_thread" };
        g.bench_with_input(BenchmarkId::new("scan_only", name), &parallel, |b, &par| {
            b.iter(|| scan::scan_only(&data, par))
        });
        g.bench_with_input(
            BenchmarkId::new("store_open", name),
            &parallel,
            |b, &par| b.iter(|| Store::open(&path, par).unwrap().index.recs.len()),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
