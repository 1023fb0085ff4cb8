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
