use super::*;

#[test]
fn ids_are_sha256_prefixes_of_the_nul_joined_parts() {
    assert_eq!(trace_id_of("s-1"), "ccdbeb4be9fcbe6f30b2defc3df3a905");
    assert_eq!(
        hex(&span_id_of("s-1", &["a1", "tool", "c1"])),
        "2c8e354ea0421e27"
    );
}

#[test]
fn lines_serde_refuses_are_read_as_pi_reads_them() {
    // a lone high surrogate, a lone low one, a pair, an escaped backslash before a `u`
    let v = parse_value(br#"{"a":"x\ud83d y\ude00 \ud83d\ude00 \\ud800"}"#);
    assert_eq!(v["a"], "x\u{fffd} y\u{fffd} \u{1f600} \\ud800");
    // bytes that are not UTF-8
    let v = parse_value(b"{\"a\":\"x\xff\"}");
    assert_eq!(v["a"], "x\u{fffd}");
    assert_eq!(parse_value(b"nope"), Value::Null);
}

fn session(lines: &[&str]) -> Store {
    Store::from_bytes((lines.join("\n") + "\n").into_bytes(), false)
}

fn run(st: &Store, content: Content) -> (Vec<serde_json::Value>, Vec<String>) {
    let n = st.index.len();
    let meta = Meta {
        session_id: Some("s".into()),
        fallback_id: "session".into(),
        version: "0".into(),
        ..Default::default()
    };
    let mut m = Mapper::new(meta, content, n, Ok((0..n as u32).collect()), false);
    let mut out = Vec::new();
    read_batch(st, &mut m, 0, n, None).unwrap();
    m.map_batch();
    for k in 0..m.chunks() {
        let lines = read_lines(st, &m.chunk_turns(k)).unwrap();
        m.finish_chunk(k, &lines);
    }
    m.finish_root();
    out.extend_from_slice(m.output());
    let mut spans = Vec::new();
    for line in out.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
        let doc: serde_json::Value = serde_json::from_slice(line).unwrap();
        spans.extend(
            doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .unwrap()
                .clone(),
        );
    }
    (spans, m.problems.clone())
}

#[test]
fn a_turn_a_chat_and_a_tool_call_without_result() {
    let st = session(&[
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
        r#"{"type":"message","id":"u","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi"}}"#,
        r#"{"type":"message","id":"a","parentId":"u","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","model":"m","content":[{"type":"toolCall","id":"c","name":"ls","arguments":{"p":1}}],"usage":{"input":"x","output":1e300},"stopReason":"toolUse"}}"#,
    ]);
    let (spans, problems) = run(&st, Content::Full);
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "chat m",
            "execute_tool ls",
            "invoke_agent pi",
            "invoke_agent pi"
        ]
    );
    assert_eq!(spans[1]["parentSpanId"], spans[0]["spanId"]);
    assert_eq!(spans[0]["parentSpanId"], spans[2]["spanId"]);
    assert_eq!(spans[0]["startTimeUnixNano"], "1767225601000000000");
    assert_eq!(
        problems,
        [
            "entry a: usage.input is not a finite number (str)",
            "entry a: usage.output is out of the 64-bit range"
        ]
    );
    let tool = spans[1]["attributes"].as_array().unwrap();
    assert!(tool
        .iter()
        .any(|a| a["key"] == "sessiontree.tool.result_missing"));
    assert!(tool
        .iter()
        .any(|a| a["key"] == "gen_ai.tool.call.arguments"
            && a["value"]["stringValue"] == r#"{"p":1}"#));
}
