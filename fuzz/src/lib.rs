//! Fuzz checks for `sessiontree-core`, shared by the cargo-fuzz targets (`fuzz_targets/`) and by
//! a libFuzzer-free driver (`tests` below) that `cargo test` runs with a seeded PRNG, both here
//! (`cd fuzz && cargo test`) and from the main crate (`rust/tests/fuzz_fallback.rs` includes this
//! file), so every CI run exercises the same checks.
//!
//! * [`check_scan`]: arbitrary bytes as a session file. Scanning never panics or hangs; scanning
//!   in two pieces (what `refresh()` after a torn last line and appends do) gives exactly the
//!   index a single scan gives; every walk terminates and returns a consistent answer.
//! * [`check_json_differential`]: `json::parse_line` accepts exactly what serde_json accepts and
//!   reads the same top-level `type`, `id`, `parentId`, … values, on the inputs where the two
//!   are meant to agree (JavaScript's `JSON.parse` rules differ from serde_json's in three
//!   places, excluded below).
//!
//! Docs: docs/reliability.md ("Fuzzing").

use sessiontree_core::index::{Index, Leaf, NONE};
use sessiontree_core::json::{self, JsVal, Skeleton, TopKind};
use sessiontree_core::scan;
use sessiontree_core::store::Store;
use sessiontree_core::walk::PreorderError;

// ==== scan =====================================================================

/// How a key id reads, independent of interning order: (string value, truthiness).
fn key(ix: &Index, kid: u32) -> (Option<String>, bool) {
    (
        ix.key_string(kid).map(str::to_string),
        ix.key_is_truthy(kid),
    )
}

fn opt(i: u32) -> Option<u32> {
    (i != NONE).then_some(i)
}

/// Everything observable about an index, normalized so two scans of the same bytes compare
/// equal whatever order keys were interned in.
#[derive(Debug, PartialEq)]
struct Snapshot {
    header: String,
    header_span: Option<(u64, u64)>,
    header_version: String,
    needs_migration: bool,
    legacy_v1: bool,
    lines: u32,
    scanned_to: u64,
    problems: Vec<(u32, u64, &'static str, String)>,
    entry_count: usize,
    recs: Vec<String>,
    leaf: Option<Option<u32>>,
    labels: Vec<((Option<String>, bool), u32)>,
    session_info: Option<u32>,
}

fn snapshot(ix: &Index) -> Snapshot {
    let recs = ix
        .recs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let i = i as u32;
            format!(
                "{} {} {} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                r.offset(),
                r.len,
                ix.line_of(i),
                ix.vpos(i),
                ix.type_name(r.etype),
                ix.role_name(r.role),
                if r.ts().is_nan() {
                    None
                } else {
                    Some(r.ts().to_bits())
                },
                key(ix, r.id),
                key(ix, r.parent),
                if ix.target(i) == NONE {
                    None
                } else {
                    Some(key(ix, ix.target(i)))
                },
                opt(ix.walk_parent(i)),
                opt(ix.tree_parent(i)),
                ix.node_of(i),
            )
        })
        .collect();
    Snapshot {
        header: format!("{:?}", ix.header.0),
        header_span: ix.header_span,
        header_version: format!("{:?}", ix.header_version),
        needs_migration: ix.needs_migration(),
        legacy_v1: ix.is_legacy_v1(),
        lines: ix.lines,
        scanned_to: ix.scanned_to,
        problems: ix
            .problems
            .iter()
            .map(|p| (p.line, p.offset, p.kind, p.message.clone()))
            .collect(),
        entry_count: ix.entry_count(),
        recs,
        leaf: match ix.leaf {
            Leaf::Null => None,
            Leaf::Key(_) => Some(ix.leaf_entry()),
        },
        labels: ix
            .labels()
            .into_iter()
            .map(|(t, e)| (key(ix, t), e))
            .collect(),
        session_info: opt(ix.session_info),
    }
}

/// Entries worth walking from: the first and last 64 (walks are O(depth) each).
fn sample(n: usize) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n.min(64) as u32).collect();
    v.extend((n.saturating_sub(64).max(64) as u32)..n as u32);
    v
}

/// Walk invariants that hold for any index.
fn check_walks(ix: &Index, data: &[u8]) {
    let n = ix.recs.len();
    for (i, r) in ix.recs.iter().enumerate() {
        let end = r.offset() + r.len as u64;
        assert!(end <= data.len() as u64, "entry {i} spans past the data");
        let line = &data[r.offset() as usize..end as usize];
        assert!(
            json::parse_line(line).is_ok(),
            "entry {i} is not a JSON line"
        );
        assert!(!line.contains(&b'\n'), "entry {i} holds a newline");
        assert_eq!(
            ix.entry_at_vpos(ix.vpos(i as u32)),
            Some(i as u32),
            "value position of entry {i}"
        );
        assert!(ix.node_of(i as u32) < n as u32);
    }
    if let Some(l) = ix.leaf_entry() {
        assert!((l as usize) < n);
    }
    let picks = sample(n);
    for &i in &picks {
        match ix.branch(i) {
            Ok(path) => {
                assert_eq!(path.last(), Some(&i));
                assert!(path.len() <= n);
                assert_eq!(ix.walk_parent(path[0]), NONE, "a branch starts at a root");
                for w in path.windows(2) {
                    assert_eq!(ix.walk_parent(w[1]), w[0], "a branch follows parents");
                }
            }
            Err(cycle) => {
                let c = &cycle.0;
                assert!(!c.is_empty(), "a reported cycle lists its entries");
                for (k, &e) in c.iter().enumerate() {
                    assert_eq!(
                        ix.walk_parent(e),
                        c[(k + 1) % c.len()],
                        "cycle entries follow parents"
                    );
                }
            }
        }
    }
    let tree = ix.build_tree();
    assert_eq!(tree.start.len(), n + 1);
    let non_roots = (0..n as u32).filter(|&i| ix.tree_parent(i) != NONE).count();
    assert_eq!(tree.kids.len(), non_roots);
    assert_eq!(tree.roots.len(), n - non_roots);
    for p in 0..n as u32 {
        let ch = tree.children(p);
        let ts: Vec<f64> = ch.iter().map(|&c| ix.recs.at(c as usize).ts()).collect();
        if !ts.iter().any(|t| t.is_nan()) {
            assert!(
                ts.windows(2).all(|w| w[0] <= w[1]),
                "children sorted by timestamp"
            );
        }
    }
    let limit = n * 8 + 1000;
    match tree.preorder(limit) {
        Ok(order) => assert!(order.len() <= limit),
        Err(PreorderError::Cycle(c)) => assert!(!c.is_empty()),
        Err(PreorderError::TooLarge(_)) => {}
    }
}

/// A split point derived from the data, so each input is checked at a varying place.
fn split_point(data: &[u8]) -> usize {
    if data.is_empty() {
        return 0;
    }
    let h = data.iter().fold(0x811c9dc5u32, |h, &b| {
        (h ^ b as u32).wrapping_mul(0x01000193)
    });
    h as usize % (data.len() + 1)
}

/// Arbitrary bytes as a session file (see the module docs).
pub fn check_scan(data: &[u8]) {
    let mut whole = Index::new();
    scan::scan_into(&mut whole, data, 0, false);
    let expected = snapshot(&whole);
    check_walks(&whole, data);

    // two pieces, as Store::refresh does after a torn last line
    let k = split_point(data);
    let mut inc = Index::new();
    scan::scan_into(&mut inc, &data[..k], 0, false);
    check_walks(&inc, &data[..k]);
    let start = match inc.rollback_provisional() {
        Some((line_start, _)) => line_start,
        None => inc.scanned_to,
    };
    assert!(start as usize <= k);
    scan::scan_into(&mut inc, &data[start as usize..], start, false);
    assert_eq!(
        snapshot(&inc),
        expected,
        "scanning in two pieces (split at {k}) differs"
    );

    // the same through reads of the file (what `Store::open` and `refresh` do), in ranges of
    // every size, one thread and two, whole and in the two pieces above
    let read = |buf: &mut [u8], off: u64| -> Result<(), ()> {
        let o = off as usize;
        buf.copy_from_slice(data.get(o..o + buf.len()).ok_or(())?);
        Ok(())
    };
    let h = split_point(data) as u64;
    let sizes: Vec<usize> = if data.len() <= 64 << 10 {
        vec![
            1 + (h % 5) as usize,
            1,
            2 + (h % 97) as usize,
            3,
            64 + (h % 301) as usize,
        ]
    } else {
        vec![997, 4096 + (h % 4096) as usize, 1 << 16]
    };
    for parallel in [false, true] {
        for sz in [&sizes[..], &[]] {
            let mut ix = Index::new();
            scan::scan_file_in_ranges(&mut ix, &read, 0, data.len() as u64, parallel, sz).unwrap();
            assert_eq!(
                snapshot(&ix),
                expected,
                "read in ranges {sz:?} (parallel: {parallel}) differs"
            );
            let mut inc = Index::new();
            scan::scan_file_in_ranges(&mut inc, &read, 0, k as u64, parallel, sz).unwrap();
            let start = match inc.rollback_provisional() {
                Some((line_start, _)) => line_start,
                None => inc.scanned_to,
            };
            scan::scan_file_in_ranges(&mut inc, &read, start, data.len() as u64, parallel, sz)
                .unwrap();
            assert_eq!(
                snapshot(&inc),
                expected,
                "read in ranges {sz:?} (parallel: {parallel}) in two pieces (split at {k}) differs"
            );
        }
    }

    // the same through the store's append path (in-memory session)
    let mut st = Store::in_memory();
    st.append_bytes(0, &data[..k]).unwrap();
    st.append_bytes(k as u64, &data[k..]).unwrap();
    assert_eq!(
        snapshot(&st.index),
        expected,
        "appending in two pieces (split at {k}) differs"
    );
    for i in 0..st.index.recs.len() {
        let r = st.index.recs.at(i);
        assert_eq!(
            &*st.line(i).expect("the file is unchanged"),
            &data[r.offset() as usize..(r.offset() + r.len as u64) as usize]
        );
    }
}

// ==== JSON differential ============================================================

thread_local! {
    static REUSED: std::cell::RefCell<json::LineParser> = std::cell::RefCell::new(json::LineParser::new());
}

/// Whether serde_json and `JSON.parse` may legitimately disagree on `data`:
/// * bytes that are not UTF-8 (Node reads them as U+FFFD; serde_json refuses);
/// * `\uD800`-`\uDFFF` escapes (lone surrogates are valid in JavaScript; serde_json refuses);
/// * more than 128 brackets (serde_json's recursion limit; JavaScript has none).
///
/// Numbers beyond f64 (`1e400`: JavaScript reads Infinity, serde_json refuses) are excluded
/// by serde_json's own error below.
fn may_differ(data: &[u8]) -> bool {
    if std::str::from_utf8(data).is_err() {
        return true;
    }
    if data.iter().filter(|&&b| b == b'[' || b == b'{').count() > 128 {
        return true;
    }
    data.windows(3).any(|w| {
        w[0] == b'u' && (w[1] | 0x20) == b'd' && matches!(w[2] | 0x20, b'8'..=b'9' | b'a'..=b'f')
    })
}

fn same(ours: &JsVal, theirs: Option<&serde_json::Value>) -> bool {
    use serde_json::Value as V;
    match (ours, theirs) {
        (JsVal::Missing, None) => true,
        (JsVal::Null, Some(V::Null)) => true,
        (JsVal::Bool(a), Some(V::Bool(b))) => a == b,
        (JsVal::Num(a), Some(V::Number(b))) => b.as_f64().is_some_and(|b| *a == b),
        (JsVal::Str(a), Some(V::String(b))) => a == b,
        (JsVal::Composite, Some(V::Array(_) | V::Object(_))) => true,
        _ => false,
    }
}

fn compare(sk: &Skeleton, v: &serde_json::Value, data: &[u8]) {
    use serde_json::Value as V;
    let text = String::from_utf8_lossy(data);
    let kind_ok = matches!(
        (sk.top, v),
        (TopKind::Object, V::Object(_))
            | (TopKind::Array, V::Array(_))
            | (TopKind::String, V::String(_))
            | (TopKind::Number, V::Number(_))
            | (TopKind::True, V::Bool(true))
            | (TopKind::False, V::Bool(false))
            | (TopKind::Null, V::Null)
    );
    assert!(kind_ok, "top-level kind {:?} vs {v:?} for {text:?}", sk.top);
    let truthy = match v {
        V::Null => false,
        V::Bool(b) => *b,
        V::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        V::String(s) => !s.is_empty(),
        V::Array(_) | V::Object(_) => true,
    };
    assert_eq!(sk.truthy, truthy, "truthiness for {text:?}");
    let V::Object(map) = v else { return };
    let fields: [(&str, &JsVal); 8] = [
        ("type", &sk.type_),
        ("id", &sk.id),
        ("parentId", &sk.parent_id),
        ("timestamp", &sk.timestamp),
        ("targetId", &sk.target_id),
        ("label", &sk.label),
        ("version", &sk.version),
        ("firstKeptEntryId", &sk.first_kept_entry_id),
    ];
    for (name, ours) in fields {
        assert!(
            same(ours, map.get(name)),
            "field {name}: ours {ours:?}, serde_json {:?} for {text:?}",
            map.get(name)
        );
    }
    let role = match map.get("message") {
        Some(V::Object(m)) => m.get("role"),
        _ => None,
    };
    assert!(
        same(&sk.role, role),
        "message.role: ours {:?}, serde_json {role:?} for {text:?}",
        sk.role
    );
    assert!(!sk.invalid_utf8, "valid UTF-8 flagged invalid: {text:?}");
}

/// `json::parse_line` against serde_json (see the module docs). Never panics on any input by
/// itself; panics (a fuzz failure) when the two disagree where they must agree.
pub fn check_json_differential(data: &[u8]) {
    let ours = json::parse_line(data);
    // a parser reused across lines (as the scanner reuses it) answers like a fresh one
    let reused = REUSED.with(|p| p.borrow_mut().parse(data).map(|s| s.to_owned()));
    assert_eq!(
        format!("{reused:?}"),
        format!("{ours:?}"),
        "a reused LineParser differs"
    );
    if let Err(e) = &ours {
        assert!(e.pos <= data.len(), "error position past the end");
    }
    if may_differ(data) {
        return;
    }
    let theirs: Result<serde_json::Value, _> = serde_json::from_slice(data);
    match (&ours, &theirs) {
        (Ok(sk), Ok(v)) => compare(sk, v, data),
        (Err(_), Err(_)) => {}
        (Ok(_), Err(e)) if e.to_string().starts_with("number out of range") => {}
        (Ok(_), Err(e)) => panic!(
            "we accept, serde_json rejects ({e}): {:?}",
            String::from_utf8_lossy(data)
        ),
        (Err(e), Ok(_)) => panic!(
            "we reject ({e:?}), serde_json accepts: {:?}",
            String::from_utf8_lossy(data)
        ),
    }
}

// ==== libFuzzer-free driver ======================================================

/// A small deterministic PRNG (xorshift64*), so runs repeat exactly.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Tokens a mutation inserts: JSON structure, the format's keys, and hostile bytes.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"\\",
    b"\\u",
    b"\\ud800",
    b"\\udc00",
    b"\\u0069d",
    b"\n",
    b"\r\n",
    b"\r",
    b"\x00",
    b"\xef\xbb\xbf",
    b"\xff",
    b"\xc3",
    b"\xe2\x80\xa8",
    b" ",
    b"\t",
    b"null",
    b"true",
    b"false",
    b"0",
    b"-0",
    b"1e400",
    b"-1e400",
    b"1e-400",
    b"123456789012345678901234567890",
    b"9007199254740993",
    b"0.1",
    b"1.",
    b"01",
    b"NaN",
    b"\"type\":",
    b"\"id\":",
    b"\"parentId\":",
    b"\"label\":",
    b"\"targetId\":",
    b"\"timestamp\":",
    b"\"version\":",
    b"\"message\":{\"role\":\"user\"}",
    b"\"firstKeptEntryId\":",
    b"\"session\"",
    b"\"message\"",
    b"\"label\"",
    b"\"compaction\"",
    b"\"session_info\"",
    b"{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n",
    b"{\"type\":\"session\",\"id\":\"s\"}\n",
    b"{\"type\":\"message\",\"id\":\"a\",\"parentId\":\"b\"}\n",
    b"{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\"}\n",
    b"{\"type\":\"label\",\"id\":\"l\",\"parentId\":\"a\",\"targetId\":\"a\",\"label\":\"x\"}\n",
    b"\"2025-01-01T00:00:00Z\"",
    b"\"x\"",
];

/// Seed inputs: the session corpus (when found) plus small built-in sessions.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![
        b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2025-01-01T00:00:00Z\",\"cwd\":\"/\"}\n\
{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2025-01-01T00:00:01Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n\
{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\",\"timestamp\":\"2025-01-01T00:00:02Z\",\"message\":{\"role\":\"assistant\",\"content\":[]}}\n\
{\"type\":\"label\",\"id\":\"c\",\"parentId\":\"b\",\"timestamp\":\"2025-01-01T00:00:03Z\",\"targetId\":\"a\",\"label\":\"L\"}\n"
            .to_vec(),
        b"{\"type\":\"session\",\"id\":\"v1\"}\n{\"type\":\"message\",\"message\":{\"role\":\"hookMessage\"}}\n\
{\"type\":\"compaction\",\"firstKeptEntryIndex\":1}\n"
            .to_vec(),
    ];
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for root in [here.join("tests/corpus"), here.join("../tests/corpus")] {
        for sub in ["pi-generated", "real"] {
            let Ok(rd) = std::fs::read_dir(root.join(sub)) else {
                continue;
            };
            let mut paths: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for p in paths {
                if p.extension().is_some_and(|e| e == "jsonl") {
                    if let Ok(b) = std::fs::read(&p) {
                        if b.len() <= 256 << 10 {
                            out.push(b);
                        }
                    }
                }
            }
        }
    }
    out
}

/// One mutated input: a few random edits of a seed (or of a splice of two seeds).
pub fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut d = seeds[rng.below(seeds.len())].clone();
    if rng.below(8) == 0 {
        // pure random bytes
        let n = rng.below(256);
        return (0..n).map(|_| rng.next() as u8).collect();
    }
    if d.len() > 4096 && rng.below(2) == 0 {
        // a window of a long seed keeps each iteration cheap
        let s = rng.below(d.len() - 4096);
        d = d[s..s + 4096].to_vec();
    }
    for _ in 0..1 + rng.below(6) {
        let at = rng.below(d.len() + 1);
        match rng.below(7) {
            0 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            1 if !d.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(d.len());
                d.drain(at.min(d.len())..end);
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                d.splice(at..at, t.iter().copied());
            }
            3 if !d.is_empty() => {
                // duplicate a span (duplicate ids, repeated lines)
                let s = rng.below(d.len());
                let e = (s + 1 + rng.below(200)).min(d.len());
                let span = d[s..e].to_vec();
                d.splice(at..at, span);
            }
            4 => d.truncate(at),
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                let s = rng.below(other.len() + 1);
                let e = (s + rng.below(512)).min(other.len());
                d.splice(at..at, other[s..e].iter().copied());
            }
            _ => {
                let b = rng.next() as u8;
                d.insert(at, b);
            }
        }
    }
    d
}

/// Iterations for the libFuzzer-free driver: `SESSIONTREE_FUZZ_ITERS` or `default`.
pub fn iterations(default: usize) -> usize {
    std::env::var("SESSIONTREE_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzz_fallback_scan_never_panics_and_is_split_invariant() {
        let seeds = seeds();
        for s in &seeds {
            check_scan(s);
        }
        let mut rng = Rng::new(0x5e55_1017);
        for _ in 0..iterations(3000) {
            let d = mutate(&mut rng, &seeds);
            check_scan(&d);
        }
    }

    #[test]
    fn fuzz_fallback_json_agrees_with_serde_json() {
        let seeds = seeds();
        let mut lines: Vec<Vec<u8>> = Vec::new();
        for s in &seeds {
            for l in s.split(|&b| b == b'\n').take(200) {
                if l.len() <= 16 << 10 {
                    lines.push(l.to_vec());
                }
            }
        }
        for l in &lines {
            check_json_differential(l);
        }
        let mut rng = Rng::new(0x7501_2128);
        for _ in 0..iterations(20000) {
            let mut d = mutate(&mut rng, &lines);
            if let Some(nl) = d.iter().position(|&b| b == b'\n') {
                d.truncate(nl); // one line, as the scanner hands it over
            }
            check_json_differential(&d);
        }
    }

    /// Found by the `scan` target.
    ///
    /// An unterminated first line that parses as a v1 header sets the legacy flags; when the line
    /// grows into garbage, `rollback_provisional` must clear them again (it did not: entries read
    /// afterwards got synthetic v1 ids).
    #[test]
    fn rollback_of_a_torn_v1_header_clears_the_legacy_flags() {
        let data = b"{\"type\":\"session\",\"id\":\"old\"}garbage\n{\"type\":\"session\",\"version\":3,\"id\":\"new\"}\n{\"type\":\"message\",\"id\":\"a\",\"parentId\":null}\n";
        let k = b"{\"type\":\"session\",\"id\":\"old\"}".len();
        let mut whole = Index::new();
        scan::scan_into(&mut whole, data, 0, false);
        assert!(!whole.needs_migration());
        let mut inc = Index::new();
        scan::scan_into(&mut inc, &data[..k], 0, false);
        assert!(inc.is_legacy_v1());
        let start = inc
            .rollback_provisional()
            .map(|p| p.0)
            .unwrap_or(inc.scanned_to);
        scan::scan_into(&mut inc, &data[start as usize..], start, false);
        assert_eq!(inc.key_string(inc.recs.at(0).id), Some("a"));
        assert!(!inc.needs_migration() && !inc.is_legacy_v1());
    }

    #[test]
    fn differential_catches_known_shapes() {
        for s in [
            &b"{\"type\":\"message\",\"id\":\"a\",\"id\":1.5e3}"[..],
            b"{\"\\u0069d\":\"x\",\"message\":{\"role\":\"user\"},\"message\":[]}",
            b"[1,2,{\"a\":[]}]",
            b" \"str\" ",
            b"-0",
            b"123456789012345678901234567890",
            b"1e400",
            b"{\"a\":1,}",
            b"{\"a\" 1}",
            b"\"\x01\"",
            b"",
        ] {
            check_json_differential(s);
        }
    }
}
