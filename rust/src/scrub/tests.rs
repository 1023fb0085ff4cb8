use super::*;

fn run(s: &str) -> (String, Vec<Finding>) {
    let (out, f) = scrub_bytes(s.as_bytes(), Options::default());
    (String::from_utf8(out).unwrap(), f)
}

#[test]
fn plain_lines_are_copied() {
    let line = "{\"type\":\"message\",\"id\":\"a1\",\"parentId\":null,\"message\":{\"role\":\"user\",\"content\":\"hello\"}}\n";
    assert_eq!(run(line).0, line);
}

#[test]
fn a_token_in_a_message_is_replaced_and_the_line_stays_json() {
    let tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let line = format!("{{\"type\":\"message\",\"id\":\"a1\",\"parentId\":null,\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"use {tok}\\nplease\"}}]}}}}\n");
    let (out, f) = run(&line);
    assert!(!out.contains(tok));
    let v: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
    let text = v["message"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text,
        format!(
            "use [REDACTED:github_token:{}]\nplease",
            hash6(tok.as_bytes())
        )
    );
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].pointer.as_deref(), Some("/message/content/0/text"));
    assert_eq!(f[0].entry_id.as_deref(), Some("a1"));
    assert_eq!((f[0].start, f[0].end), (4, 4 + tok.len()));
}

#[test]
fn escapes_round_trip_as_json_stringify_writes_them() {
    let tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let line = format!("{{\"a\":\"\\u0001 \\ud800 \\\"q\\\" \\/ {tok} é \\ud83d\\ude00\"}}");
    let (out, _) = run(&line);
    assert_eq!(
        out,
        format!(
            "{{\"a\":\"\\u0001 \\ud800 \\\"q\\\" / [REDACTED:github_token:{}] é 😀\"}}",
            hash6(tok.as_bytes())
        )
    );
}

#[test]
fn replay_fields_kept_or_dropped() {
    let tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let line = format!("{{\"type\":\"message\",\"id\":\"a\",\"message\":{{\"content\":[{{\"thinkingSignature\":\"{tok}\",\"type\":\"thinking\",\"thinking\":\"x\"}},{{\"type\":\"text\",\"textSignature\":\"s\"}}]}}}}");
    let (out, _) = run(&line);
    assert_eq!(out, line);
    let (out, _) = scrub_bytes(
        line.as_bytes(),
        Options {
            header: false,
            replay: Replay::Drop,
        },
    );
    let out = String::from_utf8(out).unwrap();
    assert_eq!(out, "{\"type\":\"message\",\"id\":\"a\",\"message\":{\"content\":[{\"type\":\"thinking\",\"thinking\":\"x\"},{\"type\":\"text\"}]}}");
}

#[test]
fn torn_line_is_scrubbed_as_text() {
    let tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let mut line = format!("{{\"type\":\"message\",\"text\":\"{tok} ").into_bytes();
    line.push(0xff);
    let (out, f) = scrub_bytes(&line, Options::default());
    assert!(!String::from_utf8_lossy(&out).contains(tok));
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].pointer, None);
}

/// `SCRUB_PROFILE=file cargo test --profile dev-fast --lib scrub::tests::profile -- --ignored --nocapture`
#[test]
#[ignore]
fn profile() {
    let Ok(p) = std::env::var("SCRUB_PROFILE") else {
        return;
    };
    let data = std::fs::read(p).unwrap();
    let e = engine();
    let t = std::time::Instant::now();
    let (mut lines, mut hit_lines, mut hits) = (0, 0, 0usize);
    for line in data.split(|&b| b == b'\n') {
        lines += 1;
        let k = e.ac.find_overlapping_iter(line).count();
        hits += k;
        hit_lines += (k > 0) as usize;
    }
    let ac = t.elapsed();
    let t = std::time::Instant::now();
    let mut p = crate::json::LineParser::new();
    for line in data.split(|&b| b == b'\n') {
        let _ = p.parse(line);
    }
    let parse = t.elapsed();
    let t = std::time::Instant::now();
    let mut s = Scrubber::new(Options::default());
    s.record = false;
    let mut out = Vec::with_capacity(data.len());
    s.feed(&data, &mut out);
    let full = t.elapsed();
    let mb = data.len() as f64 / 1e6;
    eprintln!("lines {lines} hit_lines {hit_lines} hits {hits}");
    eprintln!(
        "ac {:.0} MB/s, parse {:.0} MB/s, full {:.0} MB/s",
        mb / ac.as_secs_f64(),
        mb / parse.as_secs_f64(),
        mb / full.as_secs_f64()
    );
    let mut per = std::collections::HashMap::new();
    for line in data.split(|&b| b == b'\n').take(200000) {
        for m in e.ac.find_overlapping_iter(line) {
            *per.entry(m.pattern().as_usize()).or_insert(0usize) += 1;
        }
    }
    let mut v: Vec<_> = per.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    let names = lit_names();
    let v: Vec<_> = v.iter().map(|(k, c)| (names[*k].as_str(), *c)).collect();
    eprintln!("{:?}", &v[..v.len().min(12)]);
    for kind in [
        aho_corasick::AhoCorasickKind::DFA,
        aho_corasick::AhoCorasickKind::ContiguousNFA,
    ] {
        let ac = AhoCorasick::builder()
            .kind(Some(kind))
            .build(&names)
            .unwrap();
        let t = std::time::Instant::now();
        let k = ac.find_overlapping_iter(&data).count();
        let a = t.elapsed();
        let t = std::time::Instant::now();
        let k2 = ac.find_iter(&data).count();
        let b = t.elapsed();
        eprintln!(
            "{kind:?}: overlapping {k} {:.0} MB/s, find_iter {k2} {:.0} MB/s",
            mb / a.as_secs_f64(),
            mb / b.as_secs_f64()
        );
    }
}

#[test]
fn a_secret_key_is_replaced_and_never_in_a_pointer() {
    let tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let line =
        format!("{{\"type\":\"custom\",\"id\":\"c\",\"data\":{{\"{tok}\":{{\"x\":\"{tok}\"}}}}}}");
    let (out, f) = run(&line);
    assert!(!out.contains(tok));
    assert_eq!(f.len(), 2);
    for x in &f {
        assert!(!x.pointer.as_deref().unwrap().contains(tok), "{x:?}");
    }
    assert!(f.iter().any(|x| x.in_key));
}
