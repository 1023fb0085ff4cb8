//! Cold open against the read floor, in one process, interleaved.
//!
//! `cargo run --release --example open_floor -- FILE [ROUNDS]`.
//!
//! Each round runs, in turn: `wc -l FILE` and `cat FILE >/dev/null` (subprocesses), an
//! in-process read of the whole file through a 1 MiB buffer counting its newlines (what
//! `wc -l` does), two threads `pread`ing 256 KiB ranges and counting newlines (the floor of
//! the open scan's reading), and `Store::open(FILE, parallel=true)` (the open scan, no
//! Python). It prints
//! each contender's best and median wall time, its CPU time (user+system; children's for the
//! subprocesses) and the ratios of the open to the floors. The machine is shared: run several
//! rounds and read the best and median together. `open_floor FILE N open-only` opens N times
//! and nothing else (for `perf record`).

use sessiontree_core::store::Store;
use std::io::Read;
use std::process::Command;
use std::time::Instant;

fn cpu(who: i32) -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn read_floor(path: &str) -> usize {
    let mut f = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0;
    loop {
        let k = f.read(&mut buf).unwrap();
        if k == 0 {
            return n;
        }
        n += memchr::memchr_iter(b'\n', &buf[..k]).count();
    }
}

/// The floor of the open scan's reading.
///
/// Two threads `pread` the file in 256 KiB ranges (thread `t` takes ranges `t, t + 2, ...`) into a
/// buffer each, reused, and count newlines. What the scan pays before it parses anything.
fn pread_floor(path: &str) -> usize {
    use std::os::unix::fs::FileExt;
    const RANGE: u64 = 256 << 10;
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len();
    let ranges = len.div_ceil(RANGE);
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..2u64)
            .map(|t| {
                let f = &f;
                sc.spawn(move || {
                    let mut buf = vec![0u8; RANGE as usize];
                    let mut n = 0;
                    let mut r = t;
                    while r < ranges {
                        let off = r * RANGE;
                        let k = (len - off).min(RANGE) as usize;
                        f.read_exact_at(&mut buf[..k], off).unwrap();
                        n += memchr::memchr_iter(b'\n', &buf[..k]).count();
                        r += 2;
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .expect("usage: open_floor FILE [ROUNDS]")
        .clone();
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(7);
    if args.get(3).map(String::as_str) == Some("open-only") {
        // for a profiler: the open alone, `rounds` times
        for _ in 0..rounds {
            let st = Store::open(std::path::Path::new(&path), true).unwrap();
            assert!(!st.index.recs.is_empty());
        }
        return;
    }
    let names = ["wc -l", "cat", "read+count", "pread x2", "Store::open"];
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut cpus: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut entries = 0;
    for _ in 0..rounds {
        for (i, _) in names.iter().enumerate() {
            let who = if i < 2 {
                libc::RUSAGE_CHILDREN
            } else {
                libc::RUSAGE_SELF
            };
            let c0 = cpu(who);
            let t0 = Instant::now();
            match i {
                0 => {
                    let ok = Command::new("wc").arg("-l").arg(&path).output().unwrap();
                    assert!(ok.status.success());
                }
                1 => {
                    let ok = Command::new("sh")
                        .arg("-c")
                        .arg("exec cat \"$0\" >/dev/null")
                        .arg(&path)
                        .status()
                        .unwrap();
                    assert!(ok.success());
                }
                2 => {
                    assert!(read_floor(&path) > 0);
                }
                3 => {
                    assert!(pread_floor(&path) > 0);
                }
                _ => {
                    let st = Store::open(std::path::Path::new(&path), true).unwrap();
                    entries = st.index.recs.len();
                    drop(st);
                }
            }
            wall[i].push(t0.elapsed().as_secs_f64());
            cpus[i].push(cpu(who) - c0);
        }
    }
    let stat = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (v[0], v[v.len() / 2])
    };
    println!("{path}: {entries} entries, {rounds} rounds interleaved");
    let mut best = Vec::new();
    let mut cpus_best = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let (wb, wm) = stat(&mut wall[i]);
        let (cb, cm) = stat(&mut cpus[i]);
        best.push((wb, wm));
        println!(
            "{n:>12}: wall best {:7.1} ms median {:7.1} ms | CPU best {:7.1} ms median {:7.1} ms",
            wb * 1e3,
            wm * 1e3,
            cb * 1e3,
            cm * 1e3
        );
        cpus_best.push(cb);
    }
    let o = best[4];
    for (i, n) in names.iter().enumerate().take(4) {
        println!(
            "open / {n}: best {:.2}x median {:.2}x",
            o.0 / best[i].0,
            o.1 / best[i].1
        );
    }
    let gib = std::fs::metadata(&path).unwrap().len() as f64 / f64::from(1u32 << 30);
    println!(
        "CPU per GiB, best: open {:.3} s, pread x2 {:.3} s, wc -l {:.3} s",
        cpus_best[4] / gib,
        cpus_best[3] / gib,
        cpus_best[0] / gib
    );
}
