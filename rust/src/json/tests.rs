use super::reference;
use super::strings::{find_special_swar, find_special_tail, quote16};
use super::*;

fn ok(s: &str) -> Skeleton {
    parse_line(s.as_bytes()).unwrap()
}
fn bad(s: &[u8]) {
    assert!(
        parse_line(s).is_err(),
        "{:?} should fail",
        String::from_utf8_lossy(s)
    );
}

#[test]
fn check_value_depth_and_js_grammar() {
    assert_eq!(check_value(b"1").unwrap(), 0);
    assert_eq!(check_value(b" {} ").unwrap(), 1);
    assert_eq!(check_value(b"[[1,{\"a\":[]}],2]").unwrap(), 4);
    assert_eq!(check_value(b"\"\\ud800 [[[\"").unwrap(), 0);
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(check_value(deep.as_bytes()).unwrap(), 100_000);
    for bad in [
        &b"NaN"[..],
        b"[Infinity]",
        b"[1,]",
        b"",
        b"{\"a\":1} x",
        b"\"abc",
    ] {
        assert!(
            check_value(bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // a torn line of escaped quotes: one pass, not one pass per quote
    let mut torn = b"{\"a\":\"".to_vec();
    torn.extend(b"\\\"".repeat(1 << 20));
    let t = std::time::Instant::now();
    assert!(check_value(&torn).is_err());
    assert!(t.elapsed().as_secs_f64() < 1.0);
}

#[test]
fn extracts_top_level_fields() {
    let s = ok(
        r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:00Z","message":{"content":[{"role":"x"}],"role":"user"}}"#,
    );
    assert_eq!(s.type_, JsVal::Str("message".into()));
    assert_eq!(s.id, JsVal::Str("a1".into()));
    assert_eq!(s.parent_id, JsVal::Null);
    assert_eq!(s.role, JsVal::Str("user".into()));
}

#[test]
fn duplicate_keys_last_wins_and_escaped_keys_match() {
    let s = ok(r#"{"id":"a","\u0069d":"b"}"#);
    assert_eq!(s.id, JsVal::Str("b".into()));
}

#[test]
fn accepts_what_json_parse_accepts() {
    ok("  [1,2,3]  ");
    ok("true");
    ok(r#""\ud800 lone""#);
    ok("-0.5e+10");
    ok("{\"a\":\"\u{2028}\"}");
    assert!(!ok("0").truthy);
    assert!(!ok("null").truthy);
    assert!(!ok("\"\"").truthy);
    assert!(ok("\"x\"").truthy);
    assert!(ok("{\"a\":1}\r").truthy);
}

#[test]
fn rejects_what_json_parse_rejects() {
    bad(b"{\"a\":1");
    bad(b"not json");
    bad(b"{\"a\":01}");
    bad(b"{\"a\":1,}");
    bad(b"[1 2]");
    bad(b"\xef\xbb\xbf{}");
    bad(b"{\"a\":\"\x01\"}");
    bad(b"{\"a\":\"\\x\"}");
    bad(b"{} {}");
    bad(b"");
    bad(b"1.");
    bad(b"NaN");
}

#[test]
fn deep_nesting_does_not_recurse() {
    let n = 200_000;
    let mut s = String::new();
    s.push_str("{\"a\":");
    for _ in 0..n {
        s.push('[');
    }
    for _ in 0..n {
        s.push(']');
    }
    s.push('}');
    ok(&s);
}

#[test]
fn invalid_utf8_in_strings_is_accepted_and_flagged() {
    let s = parse_line(b"{\"id\":\"a\xff\"}").unwrap();
    assert!(s.invalid_utf8);
    assert_eq!(s.id, JsVal::Str("a\u{FFFD}".into()));
    bad(b"{\"a\":1}\xff");
}

use crate::TestRng as Rng;

const SEEDS: &[&str] = &[
    r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:00Z","message":{"content":[{"role":"x"}],"role":"user"}}"#,
    r#"{"type":"label","id":"b\u0032","parentId":"a1","targetId":"a\ud800","label":"x\ny","timestamp":1700000000000}"#,
    r#"{"type":"compaction","id":7,"parentId":true,"firstKeptEntryId":{"a":[1,2.5e-3,-0]},"version":"3","summary":"long text long text long text long text long text long text \" \\ \/ \b\f\r\t"}"#,
    r#"{"type":"session","version":3,"id":"gen","timestamp":"2026-01-01T21:13:17.384Z","cwd":"/home/\u00e9\u4e2d"}"#,
    r#" [ {"a" : [ true , false , null ] } , "s" , 1 ] "#,
    "{\"id\":\"\u{4e2d}\u{6587}\u{1f600}\",\"message\":{\"role\":\"assistant\",\"role\":1}}",
    r#""plain string""#,
    "0",
    "-12.5E+7",
];

const ALPHABET: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b" ",
    b"\t",
    b"\r",
    b"\n",
    b"0",
    b"1",
    b"-",
    b".",
    b"e",
    b"E",
    b"+",
    b"a",
    b"u",
    b"true",
    b"null",
    b"\\u",
    b"\\ud83d",
    b"\\n",
    b"\x01",
    b"\x1f",
    b"\x7f",
    b"\x80",
    b"\xc3\xa9",
    b"\xe4\xb8",
    b"\xf0\x9f\x98\x80",
    b"\xff",
    b"\xed\xa0\x80",
    b"id",
    b"\"id\":",
    b"\"role\"",
];

fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = if v.is_empty() {
            0
        } else {
            rng.below(v.len() + 1)
        };
        match rng.below(4) {
            0 if at < v.len() => {
                v.remove(at);
            }
            1 if at < v.len() => {
                let piece = ALPHABET[rng.below(ALPHABET.len())];
                v.splice(at..(at + 1).min(v.len()), piece.iter().copied());
            }
            _ => {
                let piece = ALPHABET[rng.below(ALPHABET.len())];
                v.splice(at..at, piece.iter().copied());
            }
        }
    }
    v
}

/// The parse's `canon` (with valid UTF-8) and `canon_rest` are `is_stringify_text`, their
/// oracle: on the line
/// alone, and on the line read by the scan's object path up to `\n` or `\r\n` (whose text
/// ends before them).
fn canon_agrees(line: &[u8]) {
    let want = crate::jstext::is_stringify_text(line);
    let show = || String::from_utf8_lossy(line).into_owned();
    let mut parser = LineParser::new();
    if let Ok(sk) = parser.parse(line) {
        assert_eq!(
            sk.canon && !sk.invalid_utf8 && canon_rest(line),
            want,
            "{:?}",
            show()
        );
    } else {
        assert!(!want, "{:?}", show());
    }
    for end in [&b"\n"[..], b"\r\n", b""] {
        let mut buf = line.to_vec();
        buf.extend_from_slice(end);
        buf.extend_from_slice(b"{\"next\":1}");
        let mut sk = Skel::new(TopKind::Object);
        if let Some(k) = parser.parse_object_line_into(&buf, &mut sk) {
            if k == line.len() + end.len().saturating_sub(1) && !end.is_empty() {
                // the text the scan records: up to the `\n`, less one `\r` before it
                let text = buf[..k].strip_suffix(b"\r").unwrap_or(&buf[..k]);
                let want = crate::jstext::is_stringify_text(text);
                let got = sk.canon && !sk.invalid_utf8 && canon_rest(text);
                assert_eq!(got, want, "{:?} + {end:?}", show());
            }
        }
    }
}

fn same(line: &[u8]) {
    canon_agrees(line);
    let got = parse_line(line);
    let want = reference::parse_line(line);
    match (&got, &want) {
        (Ok(g), Ok(w)) => assert_eq!(g, w, "{:?}", String::from_utf8_lossy(line)),
        (Err(g), Err(w)) => assert_eq!(g, w, "{:?}", String::from_utf8_lossy(line)),
        _ => panic!(
            "{:?}: got {got:?}, reference {want:?}",
            String::from_utf8_lossy(line)
        ),
    }
}

#[test]
fn agrees_with_the_reference_reader_on_mutated_lines() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..200_000 {
        let seed = SEEDS[rng.below(SEEDS.len())].as_bytes();
        let line = mutate(&mut rng, seed);
        same(&line);
    }
}

#[test]
fn agrees_with_the_reference_reader_on_long_strings() {
    // runs longer than the vector widths, with the special byte at every offset
    let mut rng = Rng(7);
    for len in [15usize, 16, 17, 31, 32, 33, 63, 64, 65, 100, 200] {
        for at in 0..len {
            for special in [b'"', b'\\', 0x01u8, 0x1f, 0x80, b'a'] {
                let mut body: Vec<u8> = (0..len).map(|_| b"abc xyz"[rng.below(7)]).collect();
                body[at] = special;
                let mut line = b"{\"id\":\"".to_vec();
                line.extend_from_slice(&body);
                line.extend_from_slice(b"\",\"x\":\"");
                line.extend_from_slice(&body);
                line.extend_from_slice(b"\"}");
                same(&line);
                same(&line[..line.len() - 2]);
            }
        }
    }
}

#[test]
fn agrees_with_the_reference_reader_on_long_strings_full_of_escapes() {
    // escapes of every kind at every offset of the 64-byte blocks, and broken ones
    let pieces: &[&[u8]] = &[
        b"\\n",
        b"\\\"",
        b"\\\\",
        b"\\u00e9",
        b"\\ud83d\\ude00",
        b"\\u12",
        b"\\x",
        b"\\",
        b"\x01",
        b"\xc3\xa9",
        b"\xff",
        b"abcdefgh",
        b"0123456789abcdef0123456789abcdef",
        b" ",
        b"\"",
    ];
    let mut rng = Rng(42);
    for _ in 0..50_000 {
        let mut body = Vec::new();
        for _ in 0..rng.below(40) {
            let k = rng.below(pieces.len() * 4);
            // mostly plain text, sometimes an escape or a special byte
            body.extend_from_slice(if k < pieces.len() {
                pieces[k]
            } else {
                pieces[11 + k % 3]
            });
        }
        let mut line = b"{\"type\":\"message\",\"message\":{\"content\":[{\"text\":\"".to_vec();
        line.extend_from_slice(&body);
        line.extend_from_slice(b"\"}],\"role\":\"user\"},\"id\":\"");
        line.extend_from_slice(&body[..body.len().min(70)]);
        line.extend_from_slice(b"\"}");
        same(&line);
    }
}

#[test]
fn agrees_with_the_reference_reader_on_the_corpus() {
    let lines = crate::for_each_corpus_line(same);
    assert!(lines > 0);
}

#[test]
fn string_scanners_agree() {
    let mut rng = Rng(99);
    for _ in 0..20_000 {
        let n = rng.below(150);
        let v: Vec<u8> = (0..n)
            .map(|_| match rng.below(40) {
                0 => rng.next() as u8,
                1 => b'"',
                2 => 0x80 | rng.next() as u8,
                _ => b'a' + rng.below(26) as u8,
            })
            .collect();
        let start = if n == 0 { 0 } else { rng.below(n) };
        let want = find_special_tail(&v, start);
        assert_eq!(find_special(&v, start), want);
        assert_eq!(find_special_swar(&v, start), want);
        // the one-probe answer: the quote ending a short string, and whether it is ASCII
        let short_quote = want < start + 16 && start + 16 <= n && v[want] == b'"';
        match quote16(&v, start) {
            Some((k, ascii)) => {
                assert!(short_quote, "{v:?} {start}");
                assert_eq!(k, want);
                assert_eq!(ascii, v[start..k].is_ascii(), "{v:?} {start}");
            }
            None => assert!(
                !short_quote || !cfg!(target_arch = "x86_64"),
                "{v:?} {start}"
            ),
        }
    }
}

/// `canon_rest`: a number JavaScript spells otherwise, a repeated key, an array-index key or a 33rd key in any one object is found
/// (the same key in sibling or nested objects is not); text that is not a whole value is false,
/// never a panic.
#[test]
fn canon_rest_finds_the_keys_and_numbers_stringify_would_change() {
    assert!(canon_rest(
        br#"{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}],"d":"\"a\":"}"#
    ));
    assert!(!canon_rest(br#"{"a":1,"b":2,"a":3}"#));
    assert!(!canon_rest(br#"{"x":[{"k":1,"k":2}]}"#));
    assert!(!canon_rest(br#"{"b":{"c":1},"b":2}"#));
    assert!(!canon_rest(br#"{"x":1,"7":2}"#));
    assert!(canon_rest(br#"{"x":1,"07":2,"-1":3}"#));
    let many = |n: usize| {
        let body: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
        format!("{{{}}}", body.join(","))
    };
    assert!(canon_rest(
        br#"{"n":[0.5,-1,1e+21,123456789012345680000,-0.000001]}"#
    ));
    for odd in [
        &br#"{"n":1.50}"#[..],
        br#"[1e21]"#,
        br#"[-0]"#,
        br#"[1E+21]"#,
        br#"[0.0000001]"#,
    ] {
        assert!(!canon_rest(odd), "{:?}", String::from_utf8_lossy(odd));
    }
    assert!(canon_rest(many(32).as_bytes()));
    assert!(!canon_rest(many(33).as_bytes()));
    for bad in [
        &br#"{"a":1"#[..],
        br#"{"a"#,
        br#""a\"#,
        b"}",
        b"[}",
        br#"["a":1]"#,
        b"{]",
    ] {
        assert!(!canon_rest(bad), "{:?}", String::from_utf8_lossy(bad));
    }
}
