use super::line::iso_ms_fast;
use super::problems::{PROBLEM_KINDS, P_BLANK, P_MALFORMED};
use super::*;

#[test]
fn type_codes_name_their_types() {
    for (code, name) in [
        (T_SESSION, "session"),
        (T_MESSAGE, "message"),
        (T_COMPACTION, "compaction"),
        (T_BRANCH_SUMMARY, "branch_summary"),
        (T_CUSTOM_MESSAGE, "custom_message"),
        (T_LABEL, "label"),
        (T_SESSION_INFO, "session_info"),
        (T_CONTEXT_EDIT, "context_edit"),
    ] {
        assert_eq!(TYPE_NAMES[code as usize], name);
    }
}

#[test]
fn problem_runs_answer_each_line_and_truncate_inside_a_run() {
    // (line, offset, kind, arg): a run of blank lines, one of CRLF blanks, lines of one
    // garbage shape, then lines that break runs (another stride, another kind)
    let mut want = Vec::new();
    let mut off = 90u64;
    let mut line = 2u32;
    let mut add = |n: usize, len: u64, kind: u8, arg: u64, want: &mut Vec<(u32, u64, u8, u64)>| {
        for _ in 0..n {
            want.push((line, off, kind, arg));
            line += 1;
            off += len;
        }
    };
    add(100_000, 1, P_BLANK, 0, &mut want);
    add(10, 2, P_BLANK, 0, &mut want);
    add(1000, 4, P_MALFORMED, 0, &mut want);
    add(1, 70_000, P_MALFORMED, 0, &mut want);
    add(3, 3, P_MALFORMED, 1, &mut want);
    add(1, 1, P_BLANK, 0, &mut want);
    let mut p = Problems::default();
    for &(l, o, k, a) in &want {
        p.push(
            l,
            o,
            k,
            a,
            if k == P_MALFORMED {
                "unexpected character"
            } else {
                ""
            },
        );
    }
    assert_eq!(p.len(), want.len());
    assert!(p.runs() <= 7, "{} runs", p.runs());
    let got: Vec<_> = p.iter().map(|x| (x.line, x.offset)).collect();
    assert_eq!(got, want.iter().map(|w| (w.0, w.1)).collect::<Vec<_>>());
    for i in [
        0,
        99_999,
        100_000,
        100_009,
        100_010,
        101_009,
        101_010,
        101_011,
        want.len() - 1,
    ] {
        let x = p.get(i).unwrap();
        assert_eq!(
            (x.line, x.offset, x.kind),
            (want[i].0, want[i].1, PROBLEM_KINDS[want[i].2 as usize])
        );
    }
    assert!(p.get(want.len()).is_none());
    // keep a prefix that ends inside a run; pushing again continues from there
    p.truncate(50_000);
    assert_eq!(p.len(), 50_000);
    assert_eq!(p.get(49_999).map(|x| x.line), Some(want[49_999].0));
    assert!(p.get(50_000).is_none());
    p.push(want[50_000].0, want[50_000].1, P_BLANK, 0, "");
    assert_eq!((p.len(), p.runs()), (50_001, 1));
    p.truncate(1);
    p.push(want[1].0, want[1].1, P_BLANK, 0, "");
    assert_eq!((p.len(), p.runs()), (2, 1));
    assert_eq!(p.get(1).map(|x| x.offset), Some(want[1].1));
}

#[test]
fn fast_iso_timestamps_read_as_parse_iso_reads_them() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for _ in 0..200_000 {
        let s = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            next(10_000),
            next(14),
            next(33),
            next(26),
            next(61),
            next(61),
            next(1000)
        );
        let want = crate::jsdate::parse_iso(&s);
        match iso_ms_fast(s.as_bytes()) {
            Some(v) => assert_eq!(v, want, "{s}"),
            None => assert!(
                want.is_nan() || s.starts_with("0000") || s[11..13] == *"24",
                "{s}: {want}"
            ),
        }
    }
    assert_eq!(
        iso_ms_fast(b"2026-01-01T21:13:17.384Z"),
        Some(crate::jsdate::parse_iso("2026-01-01T21:13:17.384Z"))
    );
}

#[test]
fn label_entry_of_looks_up_the_target_id() {
    let mut st = crate::store::Store::in_memory();
    let data = concat!(
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        "\n",
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"x"}}"#,
        "\n",
        r#"{"type":"label","id":"l","parentId":"a","timestamp":"2026-01-01T00:00:00.000Z","targetId":"a","label":"tag"}"#,
        "\n",
    );
    st.append_bytes(0, data.as_bytes()).unwrap();
    assert_eq!(st.index.label_entry_of("a"), Some(1));
    assert_eq!(st.index.label_entry_of("l"), None);
    assert_eq!(st.index.label_entry_of("zz"), None);
}

#[test]
fn label_entry_at_answers_as_label_entry_of_the_entry_id() {
    // string ids, a numeric id (labelled by nothing: the lookup is by string), an id used
    // twice, a label changed and one removed
    let mut st = crate::store::Store::in_memory();
    let m = |id: &str, p: &str| {
        format!(
            r#"{{"type":"message","id":{id},"parentId":{p},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"x"}}}}"#
        )
    };
    let l = |id: &str, t: &str, label: &str| {
        format!(
            r#"{{"type":"label","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","targetId":{t},"label":{label}}}"#
        )
    };
    let lines = [
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#.to_string(),
        m(r#""a""#, "null"),
        m("5", r#""a""#),
        m(r#""b""#, "5"),
        m(r#""a""#, r#""b""#),
        l("l1", r#""a""#, r#""one""#),
        l("l2", "5", r#""five""#),
        l("l3", r#""5""#, r#""five as text""#),
        l("l4", r#""b""#, r#""bee""#),
        l("l5", r#""b""#, "null"),
        l("l6", r#""a""#, r#""two""#),
    ];
    st.append_bytes(0, (lines.join("\n") + "\n").as_bytes())
        .unwrap();
    let ix = &st.index;
    for i in 0..ix.len() + 2 {
        let want = ix.id_at(i).and_then(|id| ix.label_entry_of(id));
        assert_eq!(ix.label_entry_at(i), want, "entry {i}");
    }
    assert!(
        ix.label_entry_at(0).is_some(),
        "the first \"a\" is labelled"
    );
}

#[test]
fn a_record_keeps_offsets_past_4_gib_and_every_date_value() {
    for off in [
        0u64,
        1,
        (1 << 32) - 1,
        1 << 32,
        (5 << 30) + 12_345,
        MAX_OFFSET - 1,
    ] {
        for ts in [
            0.0,
            1.0,
            -1.0,
            1_767_225_600_000.0,
            -62_198_755_200_000.0,
            8.64e15,
            -8.64e15,
            f64::NAN,
        ] {
            let r = Rec::new(off, 7, 11, 12, ts, T_MESSAGE, R_ASSISTANT).unwrap();
            assert_eq!(r.offset(), off);
            assert!(r.ts() == ts || (r.ts().is_nan() && ts.is_nan()), "{ts}");
            assert!(r.ts().is_nan() || r.ts().is_sign_positive() || ts < 0.0);
            assert_eq!((r.len, r.id, r.parent), (7, 11, 12));
            assert_eq!((r.etype, r.role), (T_MESSAGE, R_ASSISTANT));
            assert!(r.well_formed());
            // the stringify-form bit sits beside them and changes nothing else
            assert!(!r.stringify_form());
            let c = r.with_stringify_form(true);
            assert!(c.stringify_form() && c.well_formed());
            assert_eq!(c.offset(), off);
            assert!(c.ts() == ts || (c.ts().is_nan() && ts.is_nan()), "{ts}");
            assert!(!c.with_stringify_form(false).stringify_form());
            assert_eq!(
                format!("{:?}", c.with_stringify_form(false)),
                format!("{r:?}")
            );
        }
    }
    assert!(Rec::new(MAX_OFFSET, 1, 2, 1, 0.0, T_MESSAGE, 0).is_none());
}

/// Lines at logical offsets past 4 GiB (as in a file of more than 4 GiB) index with their offsets
/// exact.
///
/// One starting 1 TiB or more in is a `line_too_long` problem, not a record.
#[test]
fn lines_past_4_gib_index_with_exact_offsets() {
    let header = br#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
    let a = br#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"x"}}"#;
    let b = br#"{"type":"compaction","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:01.000Z","firstKeptEntryId":"a","summary":"s"}"#;
    let c = br#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"y"}}"#;
    let mut ix = Index::new();
    let mut parser = crate::json::LineParser::new();
    let at = [0u64, (6 << 30) + 3, (1 << 33) + 77, MAX_OFFSET];
    for (k, (bytes, &offset)) in [&header[..], a, b, c].iter().zip(&at).enumerate() {
        let result = parse_one(&mut parser, bytes);
        let pl = ParsedLine {
            offset,
            len: bytes.len() as u64,
            line: k as u32 + 1,
            terminated: true,
            end: offset + bytes.len() as u64 + 1,
            result,
            row: None,
        };
        ix.ingest(&pl);
    }
    assert_eq!(ix.recs.len(), 2);
    assert_eq!(ix.recs.at(0).offset(), (6 << 30) + 3);
    assert_eq!(ix.recs.at(1).offset(), (1 << 33) + 77);
    assert_eq!(ix.recs.at(1).ts(), 1_767_225_601_000.0);
    assert_eq!(ix.key_string(ix.target(1)), Some("a"));
    assert_eq!(ix.target(0), NONE);
    assert_eq!((ix.vpos(0), ix.vpos(1)), (1, 2));
    let p: Vec<_> = ix.problems.iter().collect();
    assert_eq!(p.len(), 1);
    assert_eq!(
        (p[0].kind, p[0].line, p[0].offset),
        ("line_too_long", 4, MAX_OFFSET)
    );
    // and through a saved index's bytes and back
    let meta = ix.persist_all();
    let covered = ix.scanned_to;
    let back = Index::restore(&meta, ix.recs.to_vec(), covered).expect("restores");
    assert_eq!(back.recs.at(1).offset(), (1 << 33) + 77);
    assert_eq!(back.key_string(back.target(1)), Some("a"));
}

/// Value positions are derived: the header, the entries and the extra headers before an entry.
#[test]
fn value_positions_count_extra_headers() {
    let mut st = crate::store::Store::in_memory();
    let h = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
    let m = |id: &str, p: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"{p}","timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"x"}}}}"#
        )
    };
    let data = [
        h.to_string(),
        m("a", "x"),
        h.to_string(),
        h.to_string(),
        "null".to_string(),
        m("b", "a"),
        h.to_string(),
        m("c", "b"),
    ]
    .join("\n")
        + "\n";
    st.append_bytes(0, data.as_bytes()).unwrap();
    let ix = &st.index;
    assert_eq!(ix.recs.len(), 3);
    // values: header 0, a 1, extra 2, extra 3, (null is not a value), b 4, extra 5, c 6
    assert_eq!((ix.vpos(0), ix.vpos(1), ix.vpos(2)), (1, 4, 6));
    // line numbers are derived too: entries on consecutive lines share a run
    assert_eq!((ix.line_of(0), ix.line_of(1), ix.line_of(2)), (2, 6, 8));
    assert_eq!(ix.line_runs.len(), 3);
    for (v, want) in [
        (0, None),
        (1, Some(0)),
        (2, None),
        (3, None),
        (4, Some(1)),
        (5, None),
        (6, Some(2)),
        (7, None),
    ] {
        assert_eq!(ix.entry_at_vpos(v), want, "{v}");
    }
}

/// Line numbers after blank, malformed and torn lines, and after a torn last line is rolled
/// back and completed.
#[test]
fn line_numbers_follow_skipped_lines_and_rollbacks() {
    let mut st = crate::store::Store::in_memory();
    let h = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
    let m = |id: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"x"}}}}"#
        )
    };
    let data = format!(
        "\n{h}\n{}\n{}\n\n  \nnot json\n{}\n{}",
        m("a"),
        m("b"),
        m("c"),
        &m("d")[..20]
    );
    st.append_bytes(0, data.as_bytes()).unwrap();
    let lines: Vec<u32> = (0..st.index.recs.len() as u32)
        .map(|i| st.index.line_of(i))
        .collect();
    assert_eq!(lines, [3, 4, 8]);
    // the torn line completes: rolled back and indexed again on the same line
    let end = data.len() as u64;
    let rest = format!("{}\n{}\n", &m("d")[20..], m("e"));
    st.append_bytes(end, rest.as_bytes()).unwrap();
    let lines: Vec<u32> = (0..st.index.recs.len() as u32)
        .map(|i| st.index.line_of(i))
        .collect();
    assert_eq!(lines, [3, 4, 8, 9, 10]);
}

/// A saved index holds type and role codes, and an interned name's code is its position after the
/// fixed names.
///
/// Restored by a build whose `TYPE_NAMES` has one more name (CONTRIBUTING's entry-type steps append
/// one), every interned type would read back as another. The meta carries a stamp of the fixed
/// tables, and a restore under other tables is refused.
#[test]
fn a_saved_index_of_other_fixed_names_is_refused() {
    let mut more: Vec<&str> = TYPE_NAMES.to_vec();
    more.push("x_note");
    let stamp = fixed_names_stamp(&TYPE_NAMES, &ROLE_NAMES);
    assert_ne!(stamp, fixed_names_stamp(&more, &ROLE_NAMES));
    assert_ne!(
        stamp,
        fixed_names_stamp(&TYPE_NAMES, &ROLE_NAMES[..ROLE_NAMES.len() - 1])
    );
    // moving a name from one table to the other changes it too
    assert_ne!(
        fixed_names_stamp(&TYPE_NAMES[..2], &TYPE_NAMES[2..]),
        fixed_names_stamp(&TYPE_NAMES[..3], &TYPE_NAMES[3..])
    );
    let mut ix = Index::new();
    let h = br#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
    let e = br#"{"type":"foo","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z"}"#;
    let mut parser = crate::json::LineParser::new();
    let mut offset = 0u64;
    for (k, bytes) in [&h[..], &e[..]].iter().enumerate() {
        let result = parse_one(&mut parser, bytes);
        let end = offset + bytes.len() as u64 + 1;
        let pl = ParsedLine {
            offset,
            len: bytes.len() as u64,
            line: k as u32 + 1,
            terminated: true,
            end,
            result,
            row: None,
        };
        ix.ingest(&pl);
        offset = end;
    }
    let all = ix.persist_all();
    let covered = ix.scanned_to;
    let back = Index::restore(&all, ix.recs.to_vec(), covered).expect("restores");
    assert_eq!(back.types[back.recs.at(0).etype as usize], "foo");
    // the stamp is the meta's first u64 (after the section's length)
    let mut other = all.clone();
    other[8..16].copy_from_slice(&fixed_names_stamp(&more, &ROLE_NAMES).to_ne_bytes());
    assert!(Index::restore(&other, ix.recs.to_vec(), covered).is_none());
}
