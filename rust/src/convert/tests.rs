use super::*;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("st-convert-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn cycles_are_found_once_each() {
    const N: u32 = u32::MAX;
    // 0 <- 1 <- 2, and 3 -> 4 -> 5 -> 3, and 6 -> 6
    let parent = vec![N, 0, 1, 5, 3, 4, 6, 2];
    let mut c = cc::cycles(&parent);
    for x in &mut c {
        x.sort();
    }
    c.sort();
    assert_eq!(c, vec![vec![3, 4, 5], vec![6]]);
}

#[test]
fn claude_code_round_trips_byte_for_byte() {
    let d = tmp("cc");
    let src = d.join("s.jsonl");
    let text = concat!(
        r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","timestamp":"2025-01-01T00:00:00Z","message":{"role":"user","content":"hi"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","timestamp":"2025-01-01T00:00:01Z","message":{"role":"assistant","content":[{"type":"text","text":"yo"}]}}"#,
        "\n",
        "not json\n",
        r#"{"type":"user","uuid":"u2","parentUuid":"a1","message":{"role":"user","content":"torn"#
    );
    std::fs::write(&src, text).unwrap();
    assert_eq!(detect(&src).unwrap(), Format::ClaudeCode);
    let pi = d.join("s.pi.jsonl");
    let r = to_pi(&src, None, &pi).unwrap();
    assert_eq!(r.lines, 4);
    assert!(r.problems.iter().any(|p| p.kind == "torn_last_line"));
    let back = d.join("back.jsonl");
    from_pi(&pi, Format::ClaudeCode, &back).unwrap();
    assert_eq!(std::fs::read_to_string(&back).unwrap(), text);
}

#[test]
fn codex_round_trips_byte_for_byte() {
    let d = tmp("codex");
    let src = d.join("r.jsonl");
    let text = concat!(
        r#"{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"x","cwd":"/t"}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:01Z","type":"turn_context","payload":{"model":"gpt-5","effort":"high"}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:02Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:03Z","type":"response_item","payload":{"type":"function_call","name":"sh","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:04Z","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":10,"output_tokens":2}}}}"#,
        "\n",
    );
    std::fs::write(&src, text).unwrap();
    assert_eq!(detect(&src).unwrap(), Format::Codex);
    let pi = d.join("r.pi.jsonl");
    to_pi(&src, None, &pi).unwrap();
    let pitext = std::fs::read_to_string(&pi).unwrap();
    assert!(
        pitext.contains(r#""usage":{"cacheRead":0,"cacheWrite":0,"cost""#),
        "{pitext}"
    );
    let back = d.join("back.jsonl");
    from_pi(&pi, Format::Codex, &back).unwrap();
    assert_eq!(std::fs::read_to_string(&back).unwrap(), text);
}

#[test]
fn ids_find_the_first_line_of_each_uuid_exactly() {
    let mut ids = cc::Ids::default();
    assert!(ids.push_for_test("a", true));
    assert!(ids.push_for_test("bb", true));
    assert!(!ids.push_for_test("a", true)); // a duplicate is not indexed again
    assert!(!ids.push_for_test("cc-3", false));
    assert_eq!(ids.find("a"), Some(0));
    assert_eq!(ids.find("bb"), Some(1));
    assert_eq!(ids.find("cc-3"), None);
    assert_eq!(ids.find("b"), None);
    assert_eq!(
        (0..4).map(|i| ids.get(i)).collect::<Vec<_>>(),
        ["a", "bb", "a", "cc-3"]
    );
    // many ids: the table grows and still finds each
    for k in 0..10_000 {
        ids.push_for_test(&format!("id-{k}"), true);
    }
    assert_eq!(ids.find("id-9999"), Some(4 + 9_999));
    assert_eq!(ids.get(4 + 5_000), "id-5000");
}

/// The Pi entries (parsed) of a converted source text: (type, message or customType).
fn pi_of(name: &str, text: &str) -> Vec<serde_json::Value> {
    let d = tmp(name);
    let src = d.join("s.jsonl");
    std::fs::write(&src, text).unwrap();
    let pi = d.join("s.pi.jsonl");
    to_pi(&src, None, &pi).unwrap();
    let back = d.join("back.jsonl");
    let fmt = detect(&src).unwrap();
    from_pi(&pi, fmt, &back).unwrap();
    assert_eq!(std::fs::read_to_string(&back).unwrap(), text, "round trip");
    std::fs::read_to_string(&pi)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn claude_code_messages_read_through_borrowed_fields_map_as_the_table_says() {
    let text = concat!(
        r#"{"type":"assistant","uuid":"a1","parentUuid":null,"sessionId":"s","timestamp":"2025-01-01T00:00:01Z","message":{"id":"m1","model":"claude","content":["str",{"type":"t\u0065xt","text":"caf\u00e9 \/"},{"type":"text","text":7},{"type":"thinking","thinking":"th","signature":5},{"type":"redacted_thinking","data":"dd"},{"type":"tool_use","id":"t1","name":"Bash","input":null},{"type":"tool_use","id":"t2","name":"Ed","input":[1]}],"usage":{"input_tokens":1.9,"output_tokens":"3","cache_read_input_tokens":4}}}"#,
        "\n",
        r#"{"type":"user","uuid":"u1","parentUuid":"a1","timestamp":"2025-01-01T00:00:02Z","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"r"},{"type":"image","source":{"type":"base64","data":"AAA"}},{"type":"image","source":{"url":"http://x"}}],"is_error":true},{"type":"text","text":"and"}]}}"#,
        "\n",
        r#"{"type":"user","uuid":"u2","parentUuid":"u1","timestamp":"2025-01-01T00:00:03Z","message":{"content":"a","content":"last"}}"#,
        "\n",
        r#"{"type":"user","uuid":"u3","parentUuid":"u2","timestamp":"2025-01-01T00:00:04Z","message":{"content":null}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"u4","parentUuid":"u3","timestamp":"2025-01-01T00:00:05Z","message":{"content":"x \ud800"}}"#,
        "\n",
    );
    let e = pi_of("cc-typed", text);
    let m = &e[0]["message"];
    assert_eq!(
        m["content"],
        serde_json::json!([
            {"type": "text", "text": "café /"},
            {"type": "text", "text": ""},
            {"type": "thinking", "thinking": "th"},
            {"type": "thinking", "thinking": "", "redacted": true, "thinkingSignature": "dd"},
            {"type": "toolCall", "id": "t1", "name": "Bash", "arguments": {}},
            {"type": "toolCall", "id": "t2", "name": "Ed", "arguments": {"input": [1]}},
        ])
    );
    assert_eq!(m["stopReason"], "toolUse");
    assert_eq!(m["responseId"], "m1");
    assert_eq!(m["model"], "claude");
    assert_eq!(m["usage"]["input"], 1);
    assert_eq!(m["usage"]["output"], 0);
    assert_eq!(m["usage"]["cacheRead"], 4);
    assert_eq!(m["usage"]["totalTokens"], 5);
    assert_eq!(m["timestamp"], 1735689601000i64);
    // one tool result, then the user's own blocks
    assert_eq!(e[1]["message"]["role"], "toolResult");
    assert_eq!(e[1]["message"]["toolName"], "Ed");
    assert_eq!(e[1]["message"]["isError"], true);
    assert_eq!(
        e[1]["message"]["content"],
        serde_json::json!([{"type": "text", "text": "r"}, {"type": "image", "data": "AAA", "mimeType": "image/png"}, {"type": "text", "text": "[image: http://x]"}])
    );
    assert_eq!(
        e[2]["message"]["content"],
        serde_json::json!([{"type": "text", "text": "and"}])
    );
    // a field given twice reads as the last one
    assert_eq!(e[3]["message"]["content"], "last");
    // null content: a custom entry; a lone surrogate: unparsed, carried raw
    assert_eq!(e[4]["customType"], "claude-code:user");
    assert_eq!(e[5]["customType"], "claude-code:unparsed");
    assert!(e[5]["source"]["raw"].is_string());
}

#[test]
fn codex_items_read_through_borrowed_fields_map_as_the_table_says() {
    let text = concat!(
        r#"{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"x","cwd":"/t"}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:01Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi\u00e9"},{"type":"input_image","image_url":"data:image/png;base64,AAA"},"s"]}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:02Z","type":"response_item","payload":{"type":"reasoning","summary":[{"text":"a"},{"text":"b"}],"encrypted_content":"E"}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:03Z","type":"response_item","payload":{"type":"function_call","name":"sh","arguments":"[1]","call_id":"c1"}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:04Z","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":2,"reasoning_output_tokens":1}}}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:05Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":{"content":[{"text":"a"},{"text":"b"}]}}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:06Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":{"x":1}}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:07Z","type":"response_item","payload":{"type":"message","role":"user","role":"assistant","content":"dup"}}"#,
        "\n",
    );
    let e = pi_of("codex-typed", text);
    assert_eq!(
        e[0]["message"]["content"],
        serde_json::json!([{"type": "text", "text": "hié"}, {"type": "image", "data": "AAA", "mimeType": "image/png"}])
    );
    assert_eq!(
        e[1]["message"]["content"],
        serde_json::json!([{"type": "thinking", "thinking": "a", "thinkingSignature": "E"}, {"type": "thinking", "thinking": "b"}])
    );
    let call = &e[2]["message"];
    assert_eq!(
        call["content"][0]["arguments"],
        serde_json::json!({"input": "[1]"})
    );
    assert_eq!(call["stopReason"], "toolUse");
    assert_eq!(call["usage"]["input"], 6);
    assert_eq!(call["usage"]["cacheRead"], 4);
    assert_eq!(call["usage"]["reasoning"], 1);
    assert_eq!(e[4]["message"]["content"][0]["text"], "a\nb");
    assert_eq!(e[4]["message"]["toolName"], "sh");
    assert_eq!(e[5]["message"]["content"][0]["text"], r#"{"x":1}"#);
    // a field given twice reads as the last one
    assert_eq!(e[6]["message"]["role"], "assistant");
    assert_eq!(e[6]["source"]["id"], serde_json::Value::Null);
}

/// Lines of every kind pass 1 reads, hostile ones included, for the batch-order test.
fn mixed_claude_code() -> Vec<u8> {
    let mut t = String::new();
    let mut parent = "null".to_string();
    for i in 0..400 {
        let u = format!("u{i}");
        let line = match i % 9 {
            0 => format!(
                r#"{{"type":"user","uuid":"{u}","parentUuid":{parent},"sessionId":"s","timestamp":"2025-01-01T00:00:00Z","message":{{"role":"user","content":"hi {i}"}}}}"#
            ),
            1 => format!(
                r#"{{"type":"assistant","uuid":"{u}","parentUuid":{parent},"isSidechain":{},"agentId":"a{}","message":{{"role":"assistant","content":[{{"type":"text","text":"yo"}}]}}}}"#,
                i % 2 == 0,
                i % 3
            ),
            2 => "not json".to_string(),
            3 => "[1,2]".to_string(),
            4 => format!(
                r#"{{"type":"user","uuid":"u{}","parentUuid":"later{i}","message":{{"role":"user","content":"dup id"}}}}"#,
                i - 4
            ),
            5 => format!(
                r#"{{"type":"system","subtype":"compact_boundary","uuid":"{u}","parentUuid":null,"logicalParentUuid":"u{}","compactMetadata":{{"preTokens":5}}}}"#,
                i - 5
            ),
            6 => format!(
                r#"{{"type":"user","isCompactSummary":true,"uuid":"{u}","parentUuid":{parent},"message":{{"content":[{{"type":"text","text":"sum {i}"}}]}}}}"#
            ),
            7 => format!(r#"{{"type":"progress","uuid":"{u}","uuid":"x","parentUuid":3}}"#),
            _ => format!(
                r#"{{"type":"user","uuid":"later{}","parentUuid":{parent},"message":{{"role":"user","content":"\ud800 \u00e9"}}}}"#,
                i - 4
            ),
        };
        t.push_str(&line);
        t.push('\n');
        parent = format!("\"{u}\"");
    }
    let mut b = t.into_bytes();
    b.extend_from_slice(
        b"{\"type\":\"user\",\"uuid\":\"z\",\"parentUuid\":\"u1\",\"x\":\"\xff\"}\n",
    );
    b.extend_from_slice(b"{\"type\":\"user\",\"uu");
    b
}

#[test]
fn claude_code_pass_1_is_the_same_for_every_batch_size() {
    let data = mixed_claude_code();
    // one batch: one worker reads every line in order (the sequential reading)
    let one = cc::plan_summary(&data, usize::MAX);
    assert!(
        one.0.len() > 400 && one.6.len() > 100,
        "{} lines, {} problems",
        one.0.len(),
        one.6.len()
    );
    for batch in [1, 7, 100, 4096] {
        assert!(cc::plan_summary(&data, batch) == one, "batch {batch}");
    }
}

#[test]
fn claude_code_output_is_the_same_in_memory_and_through_the_writer_thread() {
    let d = tmp("cc-writer");
    let src = d.join("s.jsonl");
    std::fs::write(&src, mixed_claude_code()).unwrap();
    let pi = d.join("s.pi.jsonl");
    let r = to_pi(&src, None, &pi).unwrap();
    let (mem, _) = to_pi_bytes(&std::fs::read(&src).unwrap(), &src, None).unwrap();
    assert_eq!(r.files.len(), mem.len());
    assert!(r.files.len() > 1, "sidechain files too");
    for (p, (_, bytes)) in r.files.iter().zip(&mem) {
        // the memory files are named beside the source ("s.") where the written ones are
        // beside the output ("s.pi.")
        let disk = String::from_utf8_lossy(&std::fs::read(p).unwrap()).replace("s.pi.", "s.");
        assert!(disk.len() > 100);
        assert!(disk.as_bytes() == bytes.as_slice(), "{}", p.display());
    }
}

#[test]
fn codex_usage_is_not_taken_by_a_payload_that_is_an_array() {
    // an array payload is not an item (pass 2 reads only an object payload as one), so the
    // token_count after it still belongs to the assistant message before it
    let text = concat!(
        r#"{"timestamp":"2025-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"r","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/x"}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:01.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:02.000Z","type":"response_item","payload":["reasoning",null,null]}"#,
        "\n",
        r#"{"timestamp":"2025-01-01T00:00:03.000Z","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":5,"output_tokens":2}}}}"#,
        "\n",
    );
    let e = pi_of("codex-array-payload", text);
    assert_eq!(e[0]["message"]["role"], "assistant");
    assert_eq!(e[0]["message"]["usage"]["input"], 5);
    assert_eq!(e[0]["message"]["usage"]["output"], 2);
    assert_eq!(e[1]["type"], "custom");
}

#[test]
fn codex_usage_follows_each_assistant_item_over_many_lines() {
    // pass 1 runs beside pass 2: every assistant item gets the usage of the token_count
    // event after it (none when another item comes first), however far ahead pass 1 is
    let mut text = String::from(
        r#"{"timestamp":"2025-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"r","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/x"}}"#,
    );
    text.push('\n');
    for i in 0..30_000u32 {
        text.push_str(&format!(r#"{{"timestamp":"2025-01-01T00:00:01.000Z","type":"response_item","payload":{{"type":"message","role":"assistant","content":"m{i}"}}}}"#));
        text.push('\n');
        if i % 3 != 0 {
            text.push_str(&format!(r#"{{"timestamp":"2025-01-01T00:00:01.000Z","type":"event_msg","payload":{{"type":"token_count","info":{{"last_token_usage":{{"input_tokens":{i},"output_tokens":1}}}}}}}}"#));
            text.push('\n');
        }
    }
    let d = tmp("codex-many");
    let src = d.join("s.jsonl");
    std::fs::write(&src, &text).unwrap();
    let (files, _) = to_pi_bytes(text.as_bytes(), &src, None).unwrap();
    let mut seen = 0;
    for l in String::from_utf8_lossy(&files[0].1).lines().skip(1) {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v["type"] != "message" {
            continue;
        }
        let i: u64 = v["message"]["content"][0]["text"].as_str().unwrap()[1..]
            .parse()
            .unwrap();
        let want = if i % 3 != 0 { i } else { 0 };
        assert_eq!(v["message"]["usage"]["input"], want, "message {i}");
        seen += 1;
    }
    assert_eq!(seen, 30_000);
}

#[test]
fn the_writer_batches_grow_with_the_source_within_bounds() {
    // a 1024th of the source: small files keep 128 KiB batches, a 1 GiB one 1 MiB
    assert_eq!(out::chunk_for(0), 128 << 10);
    assert_eq!(out::chunk_for(10_000_000), 128 << 10);
    assert_eq!(out::chunk_for(512 << 20), 512 << 10);
    assert_eq!(out::chunk_for(1074 << 20), 1 << 20);
    assert_eq!(out::chunk_for(u64::MAX), 1 << 20);
}

/// The files of a Claude Code conversion in memory, pass 2 in batches of `batch` bytes, and the
/// report's counts and problems.
fn cc_batched(data: &[u8], batch: usize) -> (Vec<MemoryFile>, [u64; 5], usize) {
    let name = Path::new("t.jsonl");
    let mut outs = out::Outputs::memory();
    let mut rep = Report::default();
    cc::convert_in(
        name,
        Some(data),
        name,
        name,
        None,
        &mut outs,
        &mut rep,
        batch,
    )
    .unwrap();
    let counts = [
        rep.lines,
        rep.written,
        rep.messages,
        rep.compactions,
        rep.custom,
    ];
    (outs.take_memory(), counts, rep.problems.len())
}

/// Tool calls and their results on lines far apart and near, lines without a timestamp (many
/// in a row), sidechains, duplicate call ids, more than 4096 tool names, lines that are not JSON.
fn tools_claude_code(rng: &mut crate::TestRng, lines: usize) -> Vec<u8> {
    let mut t = String::new();
    let mut parent = "null".to_string();
    for i in 0..lines {
        let u = format!("u{i}");
        let side = rng.below(8) == 0;
        let ts = match rng.below(3) {
            0 => String::new(),
            _ => format!(
                r#","timestamp":"2025-01-01T00:{:02}:{:02}.000Z""#,
                i / 60 % 60,
                i % 60
            ),
        };
        let call = rng.below(lines / 2 + 1);
        let line = match rng.below(7) {
            0 | 1 => format!(
                r#"{{"type":"assistant","uuid":"{u}","parentUuid":{parent},"isSidechain":{side}{ts},"message":{{"role":"assistant","content":[{{"type":"tool_use","id":"t{call}","name":"tool\"{}","input":{{}}}},{{"type":"tool_use","id":"t{}","name":"n{}","input":{{}}}}]}}}}"#,
                i,
                call + 1,
                rng.below(8)
            ),
            2 | 3 => format!(
                r#"{{"type":"user","uuid":"{u}","parentUuid":{parent},"isSidechain":{side}{ts},"message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{call}","content":"r"}},{{"type":"text","text":"x"}},{{"type":"tool_result","tool_use_id":"t{}","content":[{{"type":"text","text":"y"}}]}}]}}}}"#,
                rng.below(lines / 2 + 1)
            ),
            4 => format!(r#"{{"type":"progress","uuid":"{u}","parentUuid":{parent}{ts}}}"#),
            5 => format!(
                r#"{{"type":"user","uuid":"{u}","parentUuid":{parent}{ts},"message":{{"role":"user","content":"hi","content":"dup"}}}}"#
            ),
            _ => ["not json", "", "[1]", "{\"timestamp\":7}"][rng.below(4)].to_string(),
        };
        t.push_str(&line);
        t.push('\n');
        parent = format!("\"{u}\"");
    }
    t.into_bytes()
}

#[test]
fn claude_code_pass_2_is_the_same_for_every_batch_size() {
    // every Claude Code fixture, every other fixture and corpus file read as Claude Code
    // (hostile to it), and generated files of tool calls; one batch (every line converted in
    // order on one thread) against batches of 1 byte (a line each), of random sizes, and of
    // the default size
    let mut rng = crate::TestRng(0x9e37_79b9_7f4a_7c15);
    let mut inputs: Vec<(String, Vec<u8>)> = vec![("mixed".into(), mixed_claude_code())];
    for n in [50, 400, 16000] {
        inputs.push((format!("tools-{n}"), tools_claude_code(&mut rng, n)));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut stack = vec![root.join("tests/fixtures"), root.join("tests/corpus")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                inputs.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    assert!(inputs.len() > 60, "{} files", inputs.len());
    let mut checked = 0;
    for (name, data) in &inputs {
        let one = cc_batched(data, usize::MAX);
        let mut sizes = vec![1, 1 + rng.below(300), 1 + rng.below(data.len().max(1))];
        if data.len() > 64 << 10 {
            sizes.push(cc::BATCH2);
        }
        for batch in sizes {
            let got = cc_batched(data, batch);
            assert!(got == one, "{name}: batch {batch}");
            checked += 1;
        }
    }
    assert!(checked > 180);
}
