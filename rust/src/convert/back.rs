//! Pi session -> Claude Code transcript or Codex rollout.
//!
//! An entry whose side field names the target format gives back its source line as it was
//! (a `part` gives nothing: its line rides on the line's last entry). Any other entry (made in
//! Pi, or converted from another format) is written in the target's shape, with the whole Pi
//! entry in a `piEntry` field the target ignores, so converting back to Pi restores it.
//!
//! Claude Code holds a tree: every entry goes out, sidechain sessions merged back into the main
//! file at their lines, subagent sessions to `<out stem>/subagents/`. Codex holds one chain: the
//! active branch (leaf = the last entry) goes out; the entries off it are named in the report.

use super::{io_err, open_lines, push_val, s, ConvertError, Format, Report};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

#[derive(Deserialize)]
struct Probe<'a> {
    id: Option<Value>,
    #[serde(rename = "parentId")]
    parent: Option<Value>,
    #[serde(rename = "type")]
    ty: Option<Value>,
    #[serde(rename = "targetId")]
    target: Option<Value>,
    #[serde(borrow)]
    source: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Src<'a> {
    format: Option<Value>,
    n: Option<Value>,
    part: Option<Value>,
    #[serde(borrow)]
    line: Option<&'a RawValue>,
    raw: Option<String>,
    #[serde(rename = "rawBase64")]
    raw_b64: Option<String>,
    eol: Option<bool>,
    pad: Option<(String, String)>,
}

/// A header's side field, as its JSON text.
#[derive(Deserialize)]
struct HeaderProbe<'a> {
    #[serde(borrow)]
    source: Option<&'a RawValue>,
}

/// What a side field says of its entry.
enum Carried {
    /// the source line's bytes (with its newline when it had one)
    Line(Vec<u8>),
    /// an extra entry of a line carried elsewhere
    Part,
}

fn carried(src: &RawValue, fmt: Format) -> Option<(u64, Carried)> {
    let sv: Src = serde_json::from_str(src.get()).ok()?;
    if s(sv.format.as_ref()) != Some(fmt.name()) {
        return None;
    }
    let n = sv.n.as_ref().and_then(Value::as_u64)?;
    if sv.part.is_some() {
        return Some((n, Carried::Part));
    }
    let mut b = Vec::new();
    if let Some(l) = sv.line {
        if let Some((pre, _)) = &sv.pad {
            b.extend_from_slice(pre.as_bytes());
        }
        b.extend_from_slice(l.get().as_bytes());
        if let Some((_, post)) = &sv.pad {
            b.extend_from_slice(post.as_bytes());
        }
    } else if let Some(r) = sv.raw {
        b.extend_from_slice(r.as_bytes());
    } else if let Some(r) = sv.raw_b64 {
        use base64::Engine;
        b = base64::engine::general_purpose::STANDARD.decode(r).ok()?;
    } else {
        return None;
    }
    if sv.eol != Some(false) {
        b.push(b'\n');
    }
    Some((n, Carried::Line(b)))
}

/// The first line of a Pi file (the header): as an object, and its JSON text (the line
/// without the whitespace around it).
fn read_header(p: &Path) -> Result<(Map<String, Value>, Vec<u8>), ConvertError> {
    let mut lines = open_lines(p)?;
    let first = lines.next_line().map_err(io_err(p))?;
    match first.map(|(l, _)| (super::parse_line(l), l)) {
        Some((super::Parsed::Object(m), l)) if s(m.get("type")) == Some("session") => {
            Ok((m, super::trim_json(l).to_vec()))
        }
        _ => Err(ConvertError::Unrecognised(
            p.to_path_buf(),
            "not a Pi session (no session header)".into(),
        )),
    }
}

/// `o` as JSON text with `,"piHeader":<raw>` added before its closing brace, and a newline.
fn with_pi_header(o: &Value, raw: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(256 + raw.len());
    push_val(&mut b, o);
    b.pop(); // the closing brace of an object
    b.extend_from_slice(b",\"piHeader\":");
    b.extend_from_slice(raw);
    b.extend_from_slice(b"}\n");
    b
}

/// The Claude Code line that carries a Pi header: a `system` line of subtype `pi_header`
/// (`isMeta`, `parentUuid` null and no line under it: on no chain, so Claude Code never shows
/// or resumes it) holding the header's JSON text, byte for byte, in `piHeader`. `h`: the
/// header parsed, `raw`: its text.
pub(crate) fn cc_header_line(h: &Map<String, Value>, raw: &[u8]) -> Vec<u8> {
    let id = s(h.get("id")).unwrap_or("");
    let o = json!({"parentUuid": null, "isSidechain": false, "userType": "external",
        "cwd": h.get("cwd").cloned().unwrap_or(json!("")), "sessionId": h.get("id").cloned().unwrap_or(json!("")),
        "version": "sessiontree", "type": "system", "subtype": "pi_header", "content": "Pi session header",
        "level": "info", "isMeta": true, "uuid": format!("{id}.header"),
        "timestamp": h.get("timestamp").cloned().unwrap_or(Value::Null)});
    with_pi_header(&o, raw)
}

/// The Codex `session_meta` line of a Pi header: the header's id, timestamp and cwd in its
/// payload, and the header's JSON text, byte for byte, in `piHeader` (a field Codex's reader
/// ignores, as it ignores `piEntry`).
pub(crate) fn codex_header_line(h: &Map<String, Value>, raw: &[u8]) -> Vec<u8> {
    let ts = h.get("timestamp").cloned().unwrap_or(Value::Null);
    let o = json!({"timestamp": ts.clone(), "type": "session_meta",
        "payload": {"id": h.get("id").cloned().unwrap_or(json!("")), "timestamp": ts,
                    "cwd": h.get("cwd").cloned().unwrap_or(json!("")), "originator": "sessiontree", "cli_version": "0",
                    "source": "cli"}});
    with_pi_header(&o, raw)
}

/// The Pi header a target's first line carries, as JSON text: `Some` only when `line` (without
/// its newline) is exactly the line `from_pi` writes for that header
/// ([`cc_header_line`] / [`codex_header_line`]); a line edited since is an ordinary line of
/// its format, never trusted to say the header.
pub(crate) fn header_carried(line: &[u8], fmt: Format) -> Option<&[u8]> {
    #[derive(Deserialize)]
    struct HasHeader<'a> {
        #[serde(rename = "piHeader", borrow)]
        header: Option<&'a RawValue>,
    }
    // a line without the key is not read further (a long first line is scanned once, not parsed)
    memchr::memmem::find(line, b"\"piHeader\":")?;
    let raw = serde_json::from_slice::<HasHeader>(line).ok()?.header?;
    let h = match serde_json::from_str::<Value>(raw.get()).ok()? {
        Value::Object(m) if s(m.get("type")) == Some("session") => m,
        _ => return None,
    };
    let raw = raw.get().as_bytes();
    let made = match fmt {
        Format::ClaudeCode => cc_header_line(&h, raw),
        Format::Codex => codex_header_line(&h, raw),
        Format::Pi => return None,
    };
    // the same bytes: then `raw` is a slice of `line` at the same place
    (made[..made.len() - 1] == *line).then_some(raw)
}

/// Copies a Pi session as it is (pi -> pi).
pub fn copy_pi(
    src: &Path,
    out: &Path,
    outs: &mut super::out::Outputs,
    rep: &mut Report,
) -> Result<(), ConvertError> {
    read_header(src)?;
    let slot = outs.open(out)?;
    let mut lines = open_lines(src)?;
    while let Some((line, eol)) = lines.next_line().map_err(io_err(src))? {
        outs.write(slot, line)?;
        if eol {
            outs.write(slot, b"\n")?;
        }
        rep.lines += 1;
        rep.written += 1;
    }
    Ok(())
}

struct Rec {
    key: (u64, u32, u32, u64),
    file: u32,
    off: u64,
    len: u32,
    /// 1-based line number in its file
    line: u64,
}

fn cc_content_user(c: &Value) -> Value {
    match c {
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|b| match s(b.get("type")) {
                    Some("image") => json!({"type": "image", "source": {"type": "base64",
                        "media_type": s(b.get("mimeType")).unwrap_or("image/png"), "data": s(b.get("data")).unwrap_or("")}}),
                    _ => json!({"type": "text", "text": s(b.get("text")).unwrap_or("")}),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The Claude Code lines of one entry made in Pi (or in another format).
/// `id` and `parent`: the entry's, as our reader reads them.
fn cc_lines(
    e: &Map<String, Value>,
    id: &str,
    parent: Value,
    side: bool,
    h: &Map<String, Value>,
    out: &mut Vec<u8>,
) {
    let ts = e.get("timestamp").cloned().unwrap_or(Value::Null);
    let base = |ty: &str| {
        let mut o = Map::new();
        o.insert("parentUuid".into(), parent.clone());
        o.insert("isSidechain".into(), json!(side));
        o.insert("userType".into(), json!("external"));
        o.insert("cwd".into(), h.get("cwd").cloned().unwrap_or(json!("")));
        o.insert(
            "sessionId".into(),
            h.get("id").cloned().unwrap_or(json!("")),
        );
        o.insert("version".into(), json!("sessiontree"));
        o.insert("type".into(), json!(ty));
        o
    };
    let mut entry = e.clone();
    entry.remove("source");
    let finish = |mut o: Map<String, Value>, out: &mut Vec<u8>| {
        o.insert("uuid".into(), json!(id));
        o.insert("timestamp".into(), ts.clone());
        o.insert("piEntry".into(), Value::Object(entry.clone()));
        push_val(out, &Value::Object(o));
        out.push(b'\n');
    };
    let ty = s(e.get("type")).unwrap_or("");
    let msg = e.get("message");
    let role = msg.and_then(|m| s(m.get("role")));
    match (ty, role) {
        ("message", Some("user")) => {
            let mut o = base("user");
            let c = msg
                .and_then(|m| m.get("content"))
                .cloned()
                .unwrap_or(json!(""));
            o.insert(
                "message".into(),
                json!({"role": "user", "content": cc_content_user(&c)}),
            );
            finish(o, out);
        }
        ("message", Some("toolResult")) => {
            let m = msg.expect("a message");
            let mut o = base("user");
            let c = cc_content_user(m.get("content").unwrap_or(&json!([])));
            o.insert(
                "message".into(),
                json!({"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": m.get("toolCallId").cloned().unwrap_or(json!("")), "content": c,
                "is_error": m.get("isError").cloned().unwrap_or(json!(false))}]}),
            );
            finish(o, out);
        }
        ("message", Some("assistant")) => {
            let m = msg.expect("a message");
            let mut blocks = Vec::new();
            if let Some(Value::Array(a)) = m.get("content") {
                for b in a {
                    blocks.push(match s(b.get("type")) {
                        Some("thinking") if b.get("redacted") == Some(&Value::Bool(true)) => {
                            json!({"type": "redacted_thinking", "data": s(b.get("thinkingSignature")).unwrap_or("")})
                        }
                        Some("thinking") => {
                            json!({"type": "thinking", "thinking": s(b.get("thinking")).unwrap_or(""),
                                   "signature": s(b.get("thinkingSignature")).unwrap_or("")})
                        }
                        Some("toolCall") => json!({"type": "tool_use", "id": s(b.get("id")).unwrap_or(""),
                            "name": s(b.get("name")).unwrap_or(""), "input": b.get("arguments").cloned().unwrap_or(json!({}))}),
                        _ => json!({"type": "text", "text": s(b.get("text")).unwrap_or("")}),
                    });
                }
            }
            let stop = match s(m.get("stopReason")) {
                Some("toolUse") => json!("tool_use"),
                Some("length") => json!("max_tokens"),
                Some("stop") => json!("end_turn"),
                _ => Value::Null,
            };
            let u = m.get("usage");
            let g = |k: &str| u.and_then(|u| u.get(k)).cloned().unwrap_or(json!(0));
            let mut o = base("assistant");
            o.insert("message".into(), json!({"id": s(m.get("responseId")).map(str::to_string).unwrap_or_else(|| format!("msg_{id}")),
                "type": "message", "role": "assistant", "model": m.get("model").cloned().unwrap_or(json!("")),
                "content": blocks, "stop_reason": stop, "stop_sequence": null,
                "usage": {"input_tokens": g("input"), "output_tokens": g("output"),
                          "cache_read_input_tokens": g("cacheRead"), "cache_creation_input_tokens": g("cacheWrite")}}));
            finish(o, out);
        }
        ("compaction", _) => {
            let mut o = base("system");
            o.insert("subtype".into(), json!("compact_boundary"));
            o.insert("content".into(), json!("Conversation compacted"));
            o.insert("level".into(), json!("info"));
            o.insert(
                "compactMetadata".into(),
                json!({"trigger": "manual",
                "preTokens": e.get("tokensBefore").cloned().unwrap_or(json!(0))}),
            );
            finish(o, out);
            let mut sm = base("user");
            sm.insert("parentUuid".into(), json!(id));
            sm.insert("isCompactSummary".into(), json!(true));
            sm.insert(
                "message".into(),
                json!({"role": "user", "content": e.get("summary").cloned().unwrap_or(json!(""))}),
            );
            sm.insert("uuid".into(), json!(format!("{id}.summary")));
            sm.insert("timestamp".into(), ts.clone());
            sm.insert("piPart".into(), json!(1));
            push_val(out, &Value::Object(sm));
            out.push(b'\n');
        }
        _ => {
            let mut o = base("system");
            o.insert("subtype".into(), json!("pi_entry"));
            o.insert("content".into(), json!(ty));
            o.insert("level".into(), json!("info"));
            o.insert("isMeta".into(), json!(true));
            finish(o, out);
        }
    }
}

/// Pi -> Claude Code: the main session with its sidechain sessions, then its subagents.
pub fn to_claude_code(
    src: &Path,
    out: &Path,
    outs: &mut super::out::Outputs,
    rep: &mut Report,
) -> Result<(), ConvertError> {
    let (h, h_raw) = read_header(src)?;
    let hs = h.get("source");
    let dir = src.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut files: Vec<PathBuf> = vec![src.to_path_buf()];
    let mut subs: Vec<(PathBuf, String)> = Vec::new();
    if s(hs.and_then(|x| x.get("format"))) == Some("claude-code") {
        if let Some(Value::Array(a)) = hs.and_then(|x| x.get("sidechains")) {
            for f in a.iter().filter_map(Value::as_str) {
                if is_plain_name(f) {
                    files.push(dir.join(f));
                }
            }
        }
        if let Some(Value::Array(a)) = hs.and_then(|x| x.get("subagents")) {
            for x in a {
                if let (Some(f), Some(p)) = (s(x.get("file")), s(x.get("path"))) {
                    if is_plain_name(f)
                        && p.split('/').all(|c| !c.is_empty() && c != ".." && c != ".")
                    {
                        subs.push((dir.join(f), p.to_string()));
                    }
                }
            }
        }
    }
    // a session Pi reads as version 1: its lines get the ids our reader derives (the entries
    // still travel in their own version), so lines Claude Code appends hang under them
    let v1 = super::legacy::reader_ids(src, &h)?;
    let slot = outs.open(out)?;
    if s(hs.and_then(|x| x.get("format"))) != Some("claude-code") {
        // a header Claude Code's lines would not give back: it rides on a line of its own
        outs.write(slot, &cc_header_line(&h, &h_raw))?;
    } else if let Some((0, Carried::Line(b))) = serde_json::from_slice::<HeaderProbe>(&h_raw)
        .ok()
        .and_then(|hp| hp.source)
        .and_then(|r| carried(r, Format::ClaudeCode))
    {
        // a header migrated from the one a Claude Code line carried: that line, as it was
        outs.write(slot, &b)?;
    }
    let mut recs: Vec<Rec> = Vec::new();
    let mut compactions: HashSet<String> = HashSet::new();
    let mut handles = Vec::new();
    for (fi, f) in files.iter().enumerate() {
        if fi > 0 {
            if !f.is_file() {
                rep.problem(
                    src,
                    0,
                    "missing_sidechain",
                    format!(
                        "sidechain session {} is missing: its lines are not written",
                        f.display()
                    ),
                );
                handles.push(None);
                continue;
            }
            outs.also_read(f)?;
        }
        let mut lines = open_lines(f)?;
        let mut off = 0u64;
        let mut last_n = 0u64;
        let mut seq = 0u64;
        let mut ln = 0u64;
        while let Some((line, eol)) = lines.next_line().map_err(io_err(f))? {
            let len = line.len() as u64 + eol as u64;
            ln += 1;
            rep.lines += 1;
            if ln > 1 && !super::is_blank(line) {
                match serde_json::from_slice::<Probe>(line) {
                    Ok(p) => {
                        seq += 1;
                        let c = p.source.and_then(|r| carried(r, Format::ClaudeCode));
                        let key = match c {
                            Some((_, Carried::Part)) => None,
                            Some((n, Carried::Line(_))) => {
                                last_n = n;
                                Some((n, 0, fi as u32, seq))
                            }
                            None => {
                                if s(p.ty.as_ref()) == Some("compaction") {
                                    let id = match (&v1, fi) {
                                        (Some(ids), 0) => ids.get(&ln).map(|x| x.0.as_str()),
                                        _ => s(p.id.as_ref()),
                                    };
                                    if let Some(i) = id {
                                        compactions.insert(i.to_string());
                                    }
                                }
                                Some((last_n, 1, fi as u32, seq))
                            }
                        };
                        if let Some(key) = key {
                            recs.push(Rec {
                                key,
                                file: fi as u32,
                                off,
                                len: line.len() as u32,
                                line: ln,
                            });
                        }
                    }
                    Err(_) => rep.problem(
                        f,
                        ln,
                        "malformed_json",
                        "not a Pi entry: not written".into(),
                    ),
                }
            }
            off += len;
        }
        handles.push(Some(std::fs::File::open(f).map_err(io_err(f))?));
    }
    recs.sort_unstable_by_key(|r| r.key);
    let mut buf = Vec::new();
    let mut out_buf = Vec::with_capacity(1 << 16);
    for r in &recs {
        let f = handles[r.file as usize].as_ref().expect("read above");
        buf.resize(r.len as usize, 0);
        f.read_exact_at(&mut buf, r.off)
            .map_err(io_err(&files[r.file as usize]))?;
        out_buf.clear();
        let p: Probe = match serde_json::from_slice(&buf) {
            Ok(p) => p,
            Err(_) => continue,
        };
        match p.source.and_then(|x| carried(x, Format::ClaudeCode)) {
            Some((_, Carried::Line(b))) => out_buf.extend_from_slice(&b),
            Some((_, Carried::Part)) => {}
            None => {
                if let super::Parsed::Object(e) = super::parse_line(&buf) {
                    let (id, pid) = match v1.as_ref().filter(|_| r.file == 0) {
                        Some(ids) => match ids.get(&r.line) {
                            Some((i, p)) => (i.as_str(), p.as_deref()),
                            None => ("", None),
                        },
                        None => (s(e.get("id")).unwrap_or(""), s(e.get("parentId"))),
                    };
                    let parent = match pid {
                        Some(pid) if compactions.contains(pid) => json!(format!("{pid}.summary")),
                        Some(pid) => json!(pid),
                        None => Value::Null,
                    };
                    cc_lines(&e, id, parent, r.file > 0, &h, &mut out_buf);
                }
            }
        }
        rep.written += 1;
        outs.write(slot, &out_buf)?;
    }
    drop(handles);
    // subagent sessions: <out dir>/<out stem>/subagents/...
    let stem = out
        .file_stem()
        .map(|x| x.to_string_lossy().into_owned())
        .unwrap_or_default();
    for (f, p) in subs {
        if !f.is_file() {
            rep.problem(
                src,
                0,
                "missing_subagent",
                format!("subagent session {} is missing: not written", f.display()),
            );
            continue;
        }
        outs.also_read(&f)?;
        let target = out.with_file_name(&stem).join(p);
        to_claude_code(&f, &target, outs, rep)?;
    }
    Ok(())
}

fn is_plain_name(f: &str) -> bool {
    !f.is_empty() && !f.contains('/') && f != "." && f != ".."
}

/// The Codex lines of one entry made in Pi (or in another format); `model`: the current one.
fn codex_lines(
    e: &Map<String, Value>,
    h: &Map<String, Value>,
    model: &mut String,
    out: &mut Vec<u8>,
) {
    let ts = e.get("timestamp").cloned().unwrap_or(Value::Null);
    let mut entry = e.clone();
    entry.remove("source");
    let mut items: Vec<(&str, Value)> = Vec::new();
    let ty = s(e.get("type")).unwrap_or("");
    let msg = e.get("message");
    let cwd = h.get("cwd").cloned().unwrap_or(json!(""));
    match (ty, msg.and_then(|m| s(m.get("role")))) {
        ("message", Some("user")) => {
            let c = match msg.and_then(|m| m.get("content")) {
                Some(Value::String(t)) => vec![json!({"type": "input_text", "text": t})],
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|b| match s(b.get("type")) {
                        Some("image") => json!({"type": "input_image", "image_url": format!("data:{};base64,{}",
                            s(b.get("mimeType")).unwrap_or("image/png"), s(b.get("data")).unwrap_or(""))}),
                        _ => json!({"type": "input_text", "text": s(b.get("text")).unwrap_or("")}),
                    })
                    .collect(),
                _ => vec![],
            };
            items.push((
                "response_item",
                json!({"type": "message", "role": "user", "content": c}),
            ));
        }
        ("message", Some("assistant")) => {
            let mut texts: Vec<Value> = Vec::new();
            let flush = |texts: &mut Vec<Value>, items: &mut Vec<(&str, Value)>| {
                if !texts.is_empty() {
                    items.push(("response_item", json!({"type": "message", "role": "assistant", "content": std::mem::take(texts)})));
                }
            };
            if let Some(Value::Array(a)) = msg.and_then(|m| m.get("content")) {
                for b in a {
                    match s(b.get("type")) {
                        Some("thinking") => {
                            flush(&mut texts, &mut items);
                            let mut r = json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": s(b.get("thinking")).unwrap_or("")}]});
                            if let Some(sig) = s(b.get("thinkingSignature")) {
                                r["encrypted_content"] = json!(sig);
                            }
                            items.push(("response_item", r));
                        }
                        Some("toolCall") => {
                            flush(&mut texts, &mut items);
                            let args =
                                serde_json::to_string(b.get("arguments").unwrap_or(&json!({})))
                                    .unwrap_or_default();
                            items.push(("response_item", json!({"type": "function_call", "name": s(b.get("name")).unwrap_or(""),
                                "arguments": args, "call_id": s(b.get("id")).unwrap_or("")})));
                        }
                        _ => texts.push(
                            json!({"type": "output_text", "text": s(b.get("text")).unwrap_or("")}),
                        ),
                    }
                }
            }
            flush(&mut texts, &mut items);
            if items.is_empty() {
                items.push((
                    "response_item",
                    json!({"type": "message", "role": "assistant", "content": []}),
                ));
            }
        }
        ("message", Some("toolResult")) => {
            let m = msg.expect("a message");
            let text = match m.get("content") {
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(|b| s(b.get("text")))
                    .collect::<Vec<_>>()
                    .join("\n"),
                Some(Value::String(t)) => t.clone(),
                _ => String::new(),
            };
            items.push((
                "response_item",
                json!({"type": "function_call_output",
                "call_id": m.get("toolCallId").cloned().unwrap_or(json!("")), "output": text}),
            ));
        }
        ("model_change", _) => {
            if let Some(mid) = s(e.get("modelId")) {
                *model = mid.to_string();
            }
            items.push(("turn_context", json!({"cwd": cwd, "model": model.clone()})));
        }
        ("thinking_level_change", _) => {
            let level = match s(e.get("thinkingLevel")) {
                Some("off") => "none",
                Some(l) => l,
                None => "medium",
            };
            items.push((
                "turn_context",
                json!({"cwd": cwd, "model": model.clone(), "effort": level}),
            ));
        }
        ("compaction", _) => items.push((
            "compacted",
            json!({"message": e.get("summary").cloned().unwrap_or(json!("")),
            "replacement_history": []}),
        )),
        _ => items.push(("event_msg", json!({"type": "pi_entry", "entry_type": ty}))),
    }
    for (k, (t, payload)) in items.into_iter().enumerate() {
        let mut o = Map::new();
        o.insert("timestamp".into(), ts.clone());
        o.insert("type".into(), json!(t));
        o.insert("payload".into(), payload);
        if k == 0 {
            o.insert("piEntry".into(), Value::Object(entry.clone()));
        } else {
            o.insert("piPart".into(), json!(k));
        }
        push_val(out, &Value::Object(o));
        out.push(b'\n');
    }
}

/// An entry's parent id, offset and length in its file.
type Located = (Option<Box<str>>, u64, u32);

/// Entry id to entry id.
type IdMap = HashMap<Box<str>, Box<str>>;

/// The labels of the active branch `path` that Pi -> Codex does not write, and where a
/// compaction kept from one of them is kept from instead.
///
/// A label is not written when its target is not (off the branch, missing, or a label not
/// written: linear, through the labels naming each label). The second map sends each such
/// label to the next entry of the path that is written (none past the last).
fn labels_not_written(
    path: &[(Box<str>, u64, u32)],
    on: &HashSet<Box<str>>,
    label_of: &IdMap,
) -> (HashSet<Box<str>>, IdMap) {
    let mut naming: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut dropped: HashSet<Box<str>> = HashSet::new();
    let mut todo: Vec<&str> = Vec::new();
    for (id, _, _) in path {
        if let Some(t) = label_of.get(id) {
            naming.entry(&**t).or_default().push(&**id);
            if !on.contains(t) && dropped.insert(id.clone()) {
                todo.push(&**id);
            }
        }
    }
    while let Some(d) = todo.pop() {
        for &l in naming.get(d).map(Vec::as_slice).unwrap_or(&[]) {
            if dropped.insert(l.into()) {
                todo.push(l);
            }
        }
    }
    let mut kept_from = HashMap::new();
    let mut next: Option<&Box<str>> = None;
    for (id, _, _) in path.iter().rev() {
        if dropped.contains(id) {
            if let Some(n) = next {
                kept_from.insert(id.clone(), n.clone());
            }
        } else {
            next = Some(id);
        }
    }
    (dropped, kept_from)
}

/// Pi -> Codex: the active branch (the leaf is the last entry).
pub fn to_codex(
    src: &Path,
    out: &Path,
    outs: &mut super::out::Outputs,
    rep: &mut Report,
) -> Result<(), ConvertError> {
    let (h, h_raw) = read_header(src)?;
    let v1 = super::legacy::reader_ids(src, &h)?;
    let mut at: HashMap<Box<str>, Located> = HashMap::new();
    // each label entry's target (a label whose target is not written is not written either)
    let mut label_of: IdMap = HashMap::new();
    let mut leaf: Option<Box<str>> = None;
    let mut total = 0u64;
    {
        let mut lines = open_lines(src)?;
        let mut off = 0u64;
        let mut ln = 0u64;
        while let Some((line, eol)) = lines.next_line().map_err(io_err(src))? {
            ln += 1;
            rep.lines += 1;
            if ln > 1 && !super::is_blank(line) {
                match serde_json::from_slice::<Probe>(line) {
                    Ok(p) => {
                        if s(p.ty.as_ref()) == Some("label") && p.source.is_none() {
                            if let Some(id) = s(p.id.as_ref()) {
                                let t = s(p.target.as_ref()).unwrap_or("");
                                label_of.insert(id.into(), t.into());
                            }
                        }
                        // a session Pi reads as version 1: the ids our reader derives (one
                        // chain); the entries still travel in their own version
                        let (id, parent) = match &v1 {
                            Some(ids) => match ids.get(&ln) {
                                Some((i, p)) => (Some(i.as_str()), p.as_deref()),
                                None => (None, None),
                            },
                            None => (s(p.id.as_ref()), s(p.parent.as_ref())),
                        };
                        if let Some(id) = id {
                            total += 1;
                            let parent = parent.map(Into::into);
                            at.insert(id.into(), (parent, off, line.len() as u32));
                            leaf = Some(id.into());
                        } else {
                            rep.problem(
                                src,
                                ln,
                                "missing_id",
                                "an entry without an id: not on any branch, not written".into(),
                            );
                        }
                    }
                    Err(_) => rep.problem(
                        src,
                        ln,
                        "malformed_json",
                        "not a Pi entry: not written".into(),
                    ),
                }
            }
            off += line.len() as u64 + eol as u64;
        }
    }
    let mut path: Vec<(Box<str>, u64, u32)> = Vec::new();
    let mut on: HashSet<Box<str>> = HashSet::new();
    let mut cur = leaf;
    while let Some(id) = cur {
        if on.contains(&id) {
            rep.problem(
                src,
                0,
                "parent_cycle",
                format!("the active branch loops at {id:?}: cut there"),
            );
            break;
        }
        let Some((parent, off, len)) = at.get(&id) else {
            break;
        };
        path.push((id.clone(), *off, *len));
        cur = parent.clone();
        on.insert(id);
    }
    path.reverse();
    let (dropped, kept_from) = labels_not_written(&path, &on, &label_of);
    let off_branch = total - path.len() as u64;
    if off_branch > 0 {
        let mut names: Vec<&str> = at
            .keys()
            .filter(|k| !on.contains(*k))
            .map(|k| &**k)
            .take(20)
            .collect();
        names.sort_unstable();
        rep.not_carried.push(format!(
            "{off_branch} entries off the active branch (Codex holds one chain): {}{}",
            names.join(", "),
            if off_branch > 20 { ", ..." } else { "" }
        ));
    }
    let slot = outs.open(out)?;
    let mut wrote_header = false;
    {
        let mut lines = open_lines(src)?;
        if let Some((first, _)) = lines.next_line().map_err(io_err(src))? {
            if let Ok(hp) = serde_json::from_slice::<HeaderProbe>(first) {
                if let Some((_, Carried::Line(b))) =
                    hp.source.and_then(|r| carried(r, Format::Codex))
                {
                    outs.write(slot, &b)?;
                    wrote_header = true;
                }
            }
        }
    }
    if !wrote_header {
        outs.write(slot, &codex_header_line(&h, &h_raw))?;
    }
    rep.written += 1;
    let f = std::fs::File::open(src).map_err(io_err(src))?;
    let mut buf = Vec::new();
    let mut ob = Vec::new();
    let mut model = String::new();
    for (id, off, len) in path {
        buf.resize(len as usize, 0);
        f.read_exact_at(&mut buf, off).map_err(io_err(src))?;
        ob.clear();
        let p: Probe = match serde_json::from_slice(&buf) {
            Ok(p) => p,
            Err(_) => continue,
        };
        match p.source.and_then(|x| carried(x, Format::Codex)) {
            Some((_, Carried::Line(b))) => ob.extend_from_slice(&b),
            Some((_, Carried::Part)) => {}
            None => {
                if let super::Parsed::Object(mut e) = super::parse_line(&buf) {
                    if dropped.contains(&id) {
                        // a label on an entry that is not written would name nothing
                        rep.not_carried.push(format!(
                            "label {:?} on {:?}: its target is off the active branch or not written",
                            &*id,
                            s(e.get("targetId")).unwrap_or("")
                        ));
                    } else {
                        // a compaction kept from a label not written: kept from the next entry
                        // written, which gives the same context (a label is no message)
                        if let Some(k) = s(e.get("firstKeptEntryId")) {
                            if let Some(next) = kept_from.get(k) {
                                e.insert("firstKeptEntryId".into(), json!(&**next));
                            }
                        }
                        codex_lines(&e, &h, &mut model, &mut ob);
                    }
                }
            }
        }
        if !ob.is_empty() {
            rep.written += 1;
        }
        outs.write(slot, &ob)?;
    }
    Ok(())
}
