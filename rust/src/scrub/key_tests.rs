//! Keys are compared as `JSON.parse` decodes them. A tree key or a replay field written with
//! escapes keeps its rule.
use super::*;

const TOK: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

fn run(s: &str, replay: Replay) -> (String, Vec<Finding>) {
    let opts = Options {
        header: false,
        replay,
    };
    let (out, f) = scrub_bytes(s.as_bytes(), opts);
    (String::from_utf8(out).unwrap(), f)
}

#[test]
fn escaped_tree_keys_are_never_changed() {
    let line = format!(
        "{{\"type\":\"message\",\"\\u0069d\":\"{TOK}\",\"p\\u0061rentId\":\"{TOK}\",\"message\":{{\"content\":[{{\"\\u0069d\":\"{TOK}\"}}],\"t\\u006folCallId\":\"{TOK}\",\"text\":\"{TOK}\"}}}}\n"
    );
    let (out, f) = run(&line, Replay::Keep);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].pointer.as_deref(), Some("/message/text"));
    assert_eq!(out.matches(TOK).count(), 4);
}

#[test]
fn escaped_replay_names_are_dropped() {
    let line = "{\"type\":\"message\",\"id\":\"a\",\"message\":{\"content\":[{\"type\":\"thinking\",\"thinking\\u0053ignature\":\"s\"}]}}\n";
    let (out, _) = run(line, Replay::Drop);
    assert_eq!(
        out,
        "{\"type\":\"message\",\"id\":\"a\",\"message\":{\"content\":[{\"type\":\"thinking\"}]}}\n"
    );
}
