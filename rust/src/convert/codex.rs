//! Codex rollout -> Pi session (one chain: Codex has no tree).
//!
//! The first line (`session_meta`, or the first layout's `{id, timestamp, instructions}`)
//! becomes the header; `forked_from_id` becomes `parentSession` when a rollout of that id is in
//! the same folder. Each later line becomes one entry, under the previous one: `response_item`
//! messages, reasoning and tool calls/outputs become messages, `turn_context` a model and a
//! thinking-level change, `compacted` a compaction (retain-none: its replacement history is
//! the new context), anything else a `custom` entry (`codex:<type>[:<payload type>]`). Pass 1
//! finds which assistant item each `token_count` event's `last_token_usage` belongs to (the
//! last assistant item before it), pass 2 writes.

use super::{
    io_err, ms_of, open_src, push_str, s, Carried, ConvertError, EntryOut, Format, Report,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

#[derive(Deserialize)]
struct M<'a> {
    #[serde(rename = "type")]
    ty: Option<Value>,
    #[serde(borrow)]
    payload: Option<&'a RawValue>,
    role: Option<Value>,
    #[serde(rename = "piEntry", borrow)]
    pi: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct P<'a> {
    #[serde(rename = "type")]
    ty: Option<Value>,
    role: Option<Value>,
    #[serde(borrow)]
    info: Option<&'a RawValue>,
}

const ASSISTANT_ITEMS: &[&str] = &[
    "reasoning",
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
];

fn is_assistant_item(ty: Option<&str>, role: Option<&str>) -> bool {
    match ty {
        Some("message") => role == Some("assistant"),
        Some(t) => ASSISTANT_ITEMS.contains(&t),
        None => false,
    }
}

fn num(v: Option<&Value>) -> u64 {
    v.and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)))
        .unwrap_or(0)
}

/// A `last_token_usage` object's counts: input (with the cached), cached, output, total,
/// reasoning (`u64::MAX`: absent). Kept this small between the passes.
type Counts = [u64; 5];

fn counts_of(u: &Value) -> Counts {
    let input = num(u.get("input_tokens"));
    let output = num(u.get("output_tokens"));
    [
        input,
        num(u.get("cached_input_tokens")),
        output,
        u.get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(input + output),
        u.get("reasoning_output_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(u64::MAX),
    ]
}

/// Pi usage from the counts (`input_tokens` includes the cached ones).
fn usage_of(c: &Counts) -> Value {
    let [input, cached, output, total, reasoning] = *c;
    let mut o = json!({"input": input.saturating_sub(cached), "output": output, "cacheRead": cached, "cacheWrite": 0,
        "totalTokens": total, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}});
    if reasoning != u64::MAX {
        o["reasoning"] = json!(reasoning);
    }
    o
}

fn zero_usage() -> Value {
    json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
}

/// Pass 1: the usage of each assistant-item line that has one, in line order.
fn usages(src: &Path, data: Option<&[u8]>) -> Result<Vec<(u32, Counts)>, ConvertError> {
    let mut lines = open_src(src, data)?;
    let mut out = Vec::new();
    let mut last: Option<u32> = None;
    let mut n = 0u32;
    while let Some((line, _)) = lines.next_line().map_err(io_err(src))? {
        if let Ok(m) = serde_json::from_slice::<M>(line) {
            let ty = s(m.ty.as_ref());
            let p = m
                .payload
                .and_then(|p| serde_json::from_str::<P>(p.get()).ok());
            let (pty, role) = match (ty, &p) {
                (Some("response_item"), Some(p)) => (s(p.ty.as_ref()), s(p.role.as_ref())),
                (Some(t), None) => (Some(t), s(m.role.as_ref())),
                _ => (None, None),
            };
            if m.pi.is_none()
                && is_assistant_item(pty, role)
                && (ty == Some("response_item") || m.payload.is_none())
            {
                last = Some(n);
            } else if ty == Some("event_msg") {
                if let Some(p) = &p {
                    if s(p.ty.as_ref()) == Some("token_count") {
                        if let (Some(a), Some(info)) = (last.take(), p.info) {
                            if let Ok(info) = serde_json::from_str::<Value>(info.get()) {
                                if let Some(u) =
                                    info.get("last_token_usage").filter(|u| u.is_object())
                                {
                                    out.push((a, counts_of(u)));
                                }
                            }
                        }
                    }
                }
            }
        }
        n += 1;
    }
    Ok(out)
}

fn text_blocks(content: Option<&Value>, user: bool) -> Vec<Value> {
    let mut o = Vec::new();
    match content {
        Some(Value::String(t)) => o.push(json!({"type": "text", "text": t})),
        Some(Value::Array(a)) => {
            for b in a {
                match s(b.get("type")) {
                    Some("input_text" | "output_text" | "text" | "refusal") => {
                        let t = s(b.get("text"))
                            .or_else(|| s(b.get("refusal")))
                            .unwrap_or("");
                        o.push(json!({"type": "text", "text": t}));
                    }
                    Some("input_image") if user => {
                        if let Some(url) = s(b.get("image_url")) {
                            if let Some(rest) = url.strip_prefix("data:") {
                                if let Some((mime, data)) = rest.split_once(";base64,") {
                                    o.push(
                                        json!({"type": "image", "data": data, "mimeType": mime}),
                                    );
                                    continue;
                                }
                            }
                            o.push(json!({"type": "text", "text": format!("[image: {url}]")}));
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    o
}

fn output_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Object(o)) => match o.get("content") {
            Some(Value::String(t)) => t.clone(),
            Some(c) => output_text(Some(c)),
            None => serde_json::to_string(v.expect("some")).unwrap_or_default(),
        },
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|b| s(b.get("text")))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

struct Made {
    ty: &'static str,
    fields: Vec<(&'static str, Value)>,
    extra: Option<Map<String, Value>>,
    /// an id the entry keeps (a restored Pi entry's)
    keep_id: Option<String>,
    /// a restored Pi entry's timestamp
    ts: Option<String>,
}

fn made(ty: &'static str, fields: Vec<(&'static str, Value)>) -> Made {
    Made {
        ty,
        fields,
        extra: None,
        keep_id: None,
        ts: None,
    }
}

fn custom(k: String) -> Made {
    made("custom", vec![("customType", Value::String(k))])
}

struct Cx {
    model: String,
    /// tool names by a keyed hash of the call id (verified: none; a 2^-64 collision names the
    /// wrong tool) into `tools`
    names: HashMap<u64, u32>,
    tools: Vec<String>,
    keys: std::collections::hash_map::RandomState,
    /// usages still ahead, the next first
    usage: std::iter::Peekable<std::vec::IntoIter<(u32, Counts)>>,
}

impl Cx {
    fn usage_at(&mut self, n: u32) -> Option<Value> {
        while self.usage.peek().is_some_and(|(l, _)| *l < n) {
            self.usage.next();
        }
        match self.usage.peek() {
            Some((l, _)) if *l == n => self.usage.next().map(|(_, u)| usage_of(&u)),
            _ => None,
        }
    }
    fn set_name(&mut self, call: &str, name: &str) {
        use std::hash::BuildHasher;
        let k = match self.tools.iter().position(|t| t == name) {
            Some(k) => k,
            None if self.tools.len() < 4096 => {
                self.tools.push(name.to_string());
                self.tools.len() - 1
            }
            None => return,
        };
        self.names.insert(self.keys.hash_one(call), k as u32);
    }
    fn name(&self, call: &str) -> String {
        use std::hash::BuildHasher;
        self.names
            .get(&self.keys.hash_one(call))
            .map(|&k| self.tools[k as usize].clone())
            .unwrap_or_default()
    }
}

fn message(role: &str, content: Value, extra: Vec<(&'static str, Value)>, ts: i64) -> Made {
    let mut o = Map::new();
    o.insert("role".into(), json!(role));
    o.insert("content".into(), content);
    for (k, v) in extra {
        o.insert(k.into(), v);
    }
    o.insert("timestamp".into(), json!(ts));
    made("message", vec![("message", Value::Object(o))])
}

fn item(p: &Map<String, Value>, n: u32, ts: i64, cx: &mut Cx) -> Vec<Made> {
    let pty = s(p.get("type")).unwrap_or("");
    let role = s(p.get("role"));
    let assistant = |blocks: Vec<Value>, cx: &mut Cx| {
        let calls = blocks.iter().any(|b| b["type"] == "toolCall");
        let usage = cx.usage_at(n).unwrap_or_else(zero_usage);
        message(
            "assistant",
            Value::Array(blocks),
            vec![
                ("api", json!("openai-responses")),
                ("provider", json!("openai")),
                ("model", json!(cx.model)),
                ("usage", usage),
                ("stopReason", json!(if calls { "toolUse" } else { "stop" })),
            ],
            ts,
        )
    };
    let call_id = |k: &str| s(p.get(k)).map(str::to_string);
    match (pty, role) {
        ("message", Some("user")) => vec![message(
            "user",
            Value::Array(text_blocks(p.get("content"), true)),
            vec![],
            ts,
        )],
        ("message", Some("assistant")) => vec![assistant(text_blocks(p.get("content"), false), cx)],
        ("reasoning", _) => {
            let mut blocks: Vec<Value> = Vec::new();
            if let Some(Value::Array(a)) = p.get("summary") {
                for b in a {
                    if let Some(t) = s(b.get("text")) {
                        blocks.push(json!({"type": "thinking", "thinking": t}));
                    }
                }
            }
            if let Some(enc) = s(p.get("encrypted_content")) {
                match blocks.first_mut() {
                    Some(b) => b["thinkingSignature"] = json!(enc),
                    None => blocks.push(json!({"type": "thinking", "thinking": "", "redacted": true, "thinkingSignature": enc})),
                }
            }
            if blocks.is_empty() {
                blocks.push(json!({"type": "thinking", "thinking": ""}));
            }
            vec![assistant(blocks, cx)]
        }
        ("function_call" | "custom_tool_call" | "local_shell_call" | "web_search_call", _) => {
            let id = call_id("call_id")
                .or_else(|| call_id("id"))
                .unwrap_or_else(|| format!("call-{n}"));
            let (name, args) = match pty {
                "function_call" => (
                    s(p.get("name")).unwrap_or("").to_string(),
                    match p.get("arguments") {
                        Some(Value::String(a)) => match serde_json::from_str::<Value>(a) {
                            Ok(Value::Object(o)) => Value::Object(o),
                            _ => json!({"input": a}),
                        },
                        Some(Value::Object(o)) => Value::Object(o.clone()),
                        Some(Value::Null) | None => json!({}),
                        Some(v) => json!({"input": v}),
                    },
                ),
                "custom_tool_call" => (
                    s(p.get("name")).unwrap_or("").to_string(),
                    json!({"input": p.get("input").cloned().unwrap_or(Value::Null)}),
                ),
                "local_shell_call" => (
                    "local_shell".into(),
                    match p.get("action") {
                        Some(Value::Object(o)) => Value::Object(o.clone()),
                        _ => json!({}),
                    },
                ),
                _ => (
                    "web_search".into(),
                    match p.get("action") {
                        Some(Value::Object(o)) => Value::Object(o.clone()),
                        _ => json!({}),
                    },
                ),
            };
            cx.set_name(&id, &name);
            vec![assistant(
                vec![json!({"type": "toolCall", "id": id, "name": name, "arguments": args})],
                cx,
            )]
        }
        ("function_call_output" | "custom_tool_call_output", _) => {
            let id = call_id("call_id").unwrap_or_default();
            let name = cx.name(&id);
            let text = output_text(p.get("output"));
            vec![message(
                "toolResult",
                json!([{"type": "text", "text": text}]),
                vec![
                    ("toolCallId", json!(id)),
                    ("toolName", json!(name)),
                    ("isError", json!(false)),
                ],
                ts,
            )]
        }
        ("message", r) => vec![custom(format!("codex:message:{}", r.unwrap_or("unknown")))],
        (t, _) => vec![custom(format!(
            "codex:response_item:{}",
            if t.is_empty() { "untyped" } else { t }
        ))],
    }
}

fn make(m: &Map<String, Value>, n: u32, ts: i64, cx: &mut Cx) -> Vec<Made> {
    if let Some(Value::Object(e)) = m.get("piEntry") {
        if let Some(t) = s(e.get("type")).filter(|t| *t != "session") {
            let mut extra = Map::new();
            for (k, v) in e {
                if !matches!(
                    k.as_str(),
                    "type" | "id" | "parentId" | "timestamp" | "source"
                ) {
                    extra.insert(k.clone(), v.clone());
                }
            }
            let ty = super::pi_entry_type(t);
            return vec![Made {
                ty,
                fields: vec![],
                extra: Some(extra),
                keep_id: s(e.get("id")).map(str::to_string),
                ts: s(e.get("timestamp")).map(str::to_string),
            }];
        }
    }
    if m.contains_key("piPart") {
        return vec![custom("codex:pi-part".into())];
    }
    let ty = s(m.get("type"));
    let payload = m.get("payload");
    match (ty, payload) {
        (Some("response_item"), Some(Value::Object(p))) => item(p, n, ts, cx),
        (Some("turn_context"), Some(Value::Object(p))) => {
            let mut v = Vec::new();
            if let Some(model) = s(p.get("model")) {
                cx.model = model.to_string();
                v.push(made(
                    "model_change",
                    vec![("provider", json!("openai")), ("modelId", json!(model))],
                ));
            }
            let effort = s(p.get("effort")).or_else(|| s(p.get("reasoning_effort")));
            if let Some(e) = effort {
                let level = match e {
                    "none" => "off",
                    other => other,
                };
                v.push(made(
                    "thinking_level_change",
                    vec![("thinkingLevel", json!(level))],
                ));
            }
            if v.is_empty() {
                v.push(custom("codex:turn_context".into()));
            }
            v
        }
        (Some("compacted"), Some(Value::Object(p))) => {
            let mut summary = s(p.get("message")).unwrap_or("").to_string();
            if summary.is_empty() {
                if let Some(Value::Array(h)) = p.get("replacement_history") {
                    let parts: Vec<String> = h
                        .iter()
                        .map(|i| {
                            text_blocks(i.get("content"), false)
                                .iter()
                                .filter_map(|b| s(b.get("text")).map(str::to_string))
                                .collect::<Vec<_>>()
                                .join("\n")
                        })
                        .filter(|t| !t.is_empty())
                        .collect();
                    summary = parts.join("\n\n");
                }
            }
            // firstKeptEntryId is filled with the entry's own id (retain-none) by the writer
            vec![made(
                "compaction",
                vec![("summary", json!(summary)), ("tokensBefore", json!(0))],
            )]
        }
        (Some("event_msg"), Some(Value::Object(p))) => {
            vec![custom(format!(
                "codex:event_msg:{}",
                s(p.get("type")).unwrap_or("untyped")
            ))]
        }
        (
            Some(
                "message"
                | "reasoning"
                | "function_call"
                | "function_call_output"
                | "custom_tool_call"
                | "custom_tool_call_output"
                | "local_shell_call"
                | "web_search_call",
            ),
            None,
        ) => {
            item(m, n, ts, cx) // the first layout: items at top level
        }
        (Some(t), _) => vec![custom(format!("codex:{t}"))],
        (None, _) if m.contains_key("record_type") => vec![custom("codex:state".into())],
        (None, _) => vec![custom("codex:untyped".into())],
    }
}

/// The rollout beside `src` whose name ends with `-<id>.jsonl` (or is `<id>.jsonl`).
fn find_parent(src: &Path, id: &str) -> Option<PathBuf> {
    if id.is_empty() || id.contains('/') {
        return None;
    }
    let dir = src.parent()?;
    let want = format!("{id}.jsonl");
    let rd = std::fs::read_dir(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    })
    .ok()?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if (name == want || name.ends_with(&format!("-{want}"))) && e.path() != src {
            return Some(e.path());
        }
    }
    None
}

/// Converts one Codex rollout. `data`: its bytes when held in memory; then no parent rollout is
/// looked for beside it.
pub fn convert(
    src: &Path,
    data: Option<&[u8]>,
    out: &Path,
    outs: &mut super::out::Outputs,
    rep: &mut Report,
) -> Result<(), ConvertError> {
    let usage = usages(src, data)?;
    let mut cx = Cx {
        model: String::new(),
        names: HashMap::new(),
        tools: Vec::new(),
        keys: Default::default(),
        usage: usage.into_iter().peekable(),
    };
    let slot = outs.open(out)?;
    let name = src
        .file_name()
        .map(|x| x.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = src
        .file_stem()
        .map(|x| x.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut lines = open_src(src, data)?;
    let mut n = 0u32;
    let mut prev: Option<String> = None;
    let mut used: HashSet<String> = HashSet::new();
    let mut last_ts = String::from("1970-01-01T00:00:00.000Z");
    let mut buf = Vec::with_capacity(1 << 16);
    let mut header_done = false;
    while let Some((line, eol)) = lines.next_line().map_err(io_err(src))? {
        buf.clear();
        let parsed = if super::is_blank(line) {
            super::Parsed::Bad
        } else {
            super::parse_line(line)
        };
        if !header_done {
            header_done = true;
            if let super::Parsed::Object(m) = &parsed {
                let meta = match (s(m.get("type")), m.get("payload")) {
                    (Some("session_meta"), Some(Value::Object(p))) => Some(p),
                    (None, _) if m.contains_key("id") && m.contains_key("timestamp") => Some(m),
                    _ => None,
                };
                if let Some(p) = meta {
                    let id = s(p.get("id"))
                        .or_else(|| s(p.get("session_id")))
                        .unwrap_or(&stem)
                        .to_string();
                    let ts = s(p.get("timestamp"))
                        .or_else(|| s(m.get("timestamp")))
                        .unwrap_or(&last_ts)
                        .to_string();
                    last_ts = ts.clone();
                    if let Some(model) = s(p.get("model")) {
                        cx.model = model.to_string();
                    }
                    let cwd = s(p.get("cwd")).unwrap_or("");
                    let mut parent = None;
                    if let Some(f) = s(p.get("forked_from_id")) {
                        match data.is_none().then(|| find_parent(src, f)).flatten() {
                            Some(pp) => parent = Some(pp.display().to_string()),
                            None => rep.not_carried.push(format!(
                                "forked_from_id {f:?}: no rollout of that id beside the source, so no parentSession"
                            )),
                        }
                    }
                    let mut sf = Vec::new();
                    sf.extend_from_slice(b"{\"format\":\"codex\",\"file\":");
                    push_str(&mut sf, &name);
                    sf.extend_from_slice(b",\"id\":");
                    push_str(&mut sf, &id);
                    sf.extend_from_slice(b",\"n\":0,\"line\":");
                    sf.extend_from_slice(super::trim_json(line));
                    if !eol {
                        sf.extend_from_slice(b",\"eol\":false");
                    }
                    sf.push(b'}');
                    outs.write(slot, &super::header(&id, &ts, cwd, parent.as_deref(), &sf))?;
                    rep.lines += 1;
                    n += 1;
                    continue;
                }
            }
            let mut sf = Vec::new();
            sf.extend_from_slice(b"{\"format\":\"codex\",\"file\":");
            push_str(&mut sf, &name);
            sf.push(b'}');
            rep.problem(
                src,
                1,
                "no_session_meta",
                "the first line is not a session_meta: a header was made".into(),
            );
            outs.write(slot, &super::header(&stem, &last_ts, "", None, &sf))?;
        }
        let (made, carried, source_id) = match &parsed {
            super::Parsed::Object(m) => {
                if let Some(t) = s(m.get("timestamp"))
                    .filter(|t| super::ms_of(t) != 0 || *t == "1970-01-01T00:00:00.000Z")
                {
                    last_ts = t.to_string();
                }
                let sid = m
                    .get("payload")
                    .and_then(|p| s(p.get("call_id")).or_else(|| s(p.get("id"))))
                    .or_else(|| s(m.get("call_id")))
                    .map(str::to_string);
                (
                    make(m, n, ms_of(&last_ts), &mut cx),
                    Carried::Json(line, eol),
                    sid,
                )
            }
            super::Parsed::Other => {
                rep.problem(
                    src,
                    n as u64 + 1,
                    "not_an_object",
                    "a JSON value that is not an object: carried in a custom entry".into(),
                );
                (
                    vec![custom("codex:unparsed".into())],
                    Carried::Json(line, eol),
                    None,
                )
            }
            super::Parsed::Bad => {
                if !super::is_blank(line) {
                    let kind = if eol {
                        "malformed_json"
                    } else {
                        "torn_last_line"
                    };
                    rep.problem(
                        src,
                        n as u64 + 1,
                        kind,
                        "not JSON: carried as raw text in a custom entry".into(),
                    );
                }
                (
                    vec![custom("codex:unparsed".into())],
                    Carried::Raw(line, eol),
                    None,
                )
            }
        };
        let k = made.len();
        for (j, e) in made.into_iter().enumerate() {
            // generated ids (cx-<n>[-<j>]) never repeat; a kept id (a restored Pi entry's) is
            // used once, and never one that looks generated
            let mut id = match &e.keep_id {
                Some(i) if !used.contains(i) && !i.starts_with("cx-") => i.clone(),
                _ => format!(
                    "cx-{n}{}",
                    if j + 1 == k {
                        String::new()
                    } else {
                        format!("-{j}")
                    }
                ),
            };
            while used.contains(&id) {
                id.push('x');
            }
            if e.keep_id.is_some() {
                used.insert(id.clone());
            }
            let ts = e.ts.clone().unwrap_or_else(|| last_ts.clone());
            let mut w = EntryOut { buf: &mut buf };
            w.begin(e.ty, &id, prev.as_deref(), &ts);
            for (key, v) in &e.fields {
                w.field(key, v);
            }
            if e.ty == "compaction" && e.extra.is_none() {
                w.field_str("firstKeptEntryId", &id);
            }
            if let Some(x) = &e.extra {
                for (key, v) in x {
                    w.field(key, v);
                }
            }
            w.source(
                Format::Codex,
                source_id.as_deref(),
                n as u64,
                if j + 1 == k {
                    carried
                } else {
                    Carried::Part(j as u32)
                },
            );
            rep.written += 1;
            match e.ty {
                "message" => rep.messages += 1,
                "compaction" => rep.compactions += 1,
                "custom" => rep.custom += 1,
                _ => {}
            }
            prev = Some(id);
        }
        outs.write(slot, &buf)?;
        rep.lines += 1;
        n += 1;
    }
    if !header_done {
        return Err(ConvertError::Unrecognised(
            src.to_path_buf(),
            "empty: no session_meta line".into(),
        ));
    }
    Ok(())
}
