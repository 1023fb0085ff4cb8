//! Conversion between Claude Code transcripts, Codex rollouts and Pi session trees (v3).
//!
//! Streaming, line by line, in two passes over the source: the first reads only what the tree
//! needs (ids, parent links, sidechain flags, compaction boundaries, usage positions), the
//! second writes each entry. Nothing recurses on content; each line is parsed on its own.
//!
//! Losslessness: every Pi entry made from a source line carries one side field that Pi ignores,
//! the same shape for every source: `"source": {"format", "id", "n", "line"}` (`n`: the line's
//! 0-based number in its file; `line`: the line's JSON text copied byte for byte), or `"raw"` /
//! `"rawBase64"` for a line that is not JSON (`"eol": false` when it had no final newline), or
//! `"part": k` on the extra entries one line made (the line itself rides on its last entry).
//! Converting back writes these lines again, in `n` order, so SRC -> Pi -> SRC is exact.
//!
//! Modules: `cc` (Claude Code -> Pi), `codex` (Codex -> Pi), `back` (Pi -> Claude Code or
//! Codex), `legacy` (Pi sessions older than version 3 through the targets), `out` (the atomic
//! output files).

pub mod back;
pub mod cc;
pub mod codex;
pub(crate) mod legacy;
pub mod out;
pub(crate) mod raw;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// The formats converted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Format {
    ClaudeCode,
    Codex,
    Pi,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::Pi => "pi",
        }
    }
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "claude-code" => Some(Format::ClaudeCode),
            "codex" => Some(Format::Codex),
            "pi" => Some(Format::Pi),
            _ => None,
        }
    }
}

/// A line the conversion could not carry as intended (it is still carried, see the module doc).
#[derive(Debug, Clone)]
pub struct Problem {
    /// the file it is in (a source or a Pi file read back)
    pub file: String,
    /// 1-based line number (0: the file as a whole)
    pub line: u64,
    pub kind: &'static str,
    pub message: String,
}

/// What one conversion did.
#[derive(Debug, Default)]
pub struct Report {
    pub from: Option<Format>,
    pub to: Option<Format>,
    /// source lines read (every file)
    pub lines: u64,
    /// entries (to Pi) or lines (from Pi) written
    pub written: u64,
    pub messages: u64,
    pub compactions: u64,
    pub custom: u64,
    /// every file written, the main one first
    pub files: Vec<PathBuf>,
    pub problems: Vec<Problem>,
    /// what the target could not hold (Codex: entries off the active branch)
    pub not_carried: Vec<String>,
}

impl Report {
    pub(crate) fn problem(&mut self, file: &Path, line: u64, kind: &'static str, message: String) {
        if self.problems.len() < 10_000 {
            self.problems.push(Problem {
                file: file.display().to_string(),
                line,
                kind,
                message,
            });
        }
    }
}

/// Why a conversion wrote nothing.
#[derive(Debug)]
pub enum ConvertError {
    /// reading a source or writing an output failed
    Io(PathBuf, std::io::Error),
    /// the source is none of the formats (or not the one asked for)
    Unrecognised(PathBuf, String),
    /// an output path we never write: a symbolic link, not a regular file, or a source
    Output(PathBuf, String),
    /// a conversion that does not exist (Claude Code -> Codex...)
    Unsupported(String),
}

impl std::fmt::Display for ConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvertError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            ConvertError::Unrecognised(p, why) => write!(f, "{}: {why}", p.display()),
            ConvertError::Output(p, why) => write!(f, "{}: {why}", p.display()),
            ConvertError::Unsupported(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ConvertError {}

pub(crate) fn io_err(p: &Path) -> impl FnOnce(std::io::Error) -> ConvertError + '_ {
    move |e| ConvertError::Io(p.to_path_buf(), e)
}

/// Lines of a file through a bounded buffer: `(bytes without the "\n", had a "\n")`.
pub(crate) struct Lines<R> {
    r: BufReader<R>,
    buf: Vec<u8>,
}

impl<R: Read> Lines<R> {
    pub fn new(r: R) -> Self {
        Lines {
            r: BufReader::with_capacity(1 << 20, r),
            buf: Vec::new(),
        }
    }
    /// The next line, or None at the end.
    pub fn next_line(&mut self) -> std::io::Result<Option<(&[u8], bool)>> {
        self.buf.clear();
        let n = self.r.read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        let eol = self.buf.last() == Some(&b'\n');
        if eol {
            self.buf.pop();
        }
        if self.buf.capacity() > (64 << 20) && self.buf.len() < (1 << 20) {
            self.buf.shrink_to(1 << 20); // a huge line does not keep its buffer
        }
        Ok(Some((&self.buf, eol)))
    }
}

pub(crate) fn open_lines(p: &Path) -> Result<Lines<std::fs::File>, ConvertError> {
    Ok(Lines::new(std::fs::File::open(p).map_err(io_err(p))?))
}

/// The lines of the file `p`, or of `data` when given (the file's bytes held in memory; `p`
/// then only names them).
pub(crate) fn open_src<'a>(
    p: &Path,
    data: Option<&'a [u8]>,
) -> Result<Lines<Box<dyn Read + 'a>>, ConvertError> {
    Ok(match data {
        Some(d) => Lines::new(Box::new(d) as Box<dyn Read + 'a>),
        None => Lines::new(Box::new(std::fs::File::open(p).map_err(io_err(p))?)),
    })
}

/// How a line parsed.
pub(crate) enum Parsed {
    Object(serde_json::Map<String, Value>),
    /// valid JSON but not an object
    Other,
    /// not JSON
    Bad,
}

/// A blank line (only whitespace).
pub(crate) fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|c| matches!(c, b' ' | b'\t' | b'\r'))
}

pub(crate) fn parse_line(line: &[u8]) -> Parsed {
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(m)) => Parsed::Object(m),
        Ok(_) => Parsed::Other,
        Err(_) => Parsed::Bad,
    }
}

/// `v` as a string slice.
pub(crate) fn s(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

/// JSON text of a string.
pub(crate) fn push_str(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(&mut *out, text).expect("a string serializes");
}

pub(crate) fn push_val(out: &mut Vec<u8>, v: &Value) {
    serde_json::to_writer(&mut *out, v).expect("a value serializes");
}

/// Writes a Pi entry, field by field: `{"type":..,"id":..,"parentId":..,"timestamp":..` on
/// `begin`, each `field`, then `source` closes it with the side field and a newline.
pub(crate) struct EntryOut<'a> {
    pub buf: &'a mut Vec<u8>,
}

impl EntryOut<'_> {
    pub fn begin(&mut self, ty: &str, id: &str, parent: Option<&str>, ts: &str) {
        self.buf.extend_from_slice(b"{\"type\":");
        push_str(self.buf, ty);
        self.buf.extend_from_slice(b",\"id\":");
        push_str(self.buf, id);
        self.buf.extend_from_slice(b",\"parentId\":");
        match parent {
            Some(p) => push_str(self.buf, p),
            None => self.buf.extend_from_slice(b"null"),
        }
        self.buf.extend_from_slice(b",\"timestamp\":");
        push_str(self.buf, ts);
    }
    pub fn field(&mut self, key: &str, v: &Value) {
        self.buf.push(b',');
        push_str(self.buf, key);
        self.buf.push(b':');
        push_val(self.buf, v);
    }
    /// A field whose value is JSON text already written.
    pub fn field_raw(&mut self, key: &str, json: &[u8]) {
        self.buf.push(b',');
        push_str(self.buf, key);
        self.buf.push(b':');
        self.buf.extend_from_slice(json);
    }
    pub fn field_str(&mut self, key: &str, v: &str) {
        self.buf.push(b',');
        push_str(self.buf, key);
        self.buf.push(b':');
        push_str(self.buf, v);
    }
    /// Closes the entry with `"source"`: the line itself, or its part number.
    pub fn source(&mut self, fmt: Format, id: Option<&str>, n: u64, carried: Carried<'_>) {
        self.buf.extend_from_slice(b",\"source\":{\"format\":");
        push_str(self.buf, fmt.name());
        self.buf.extend_from_slice(b",\"id\":");
        match id {
            Some(i) => push_str(self.buf, i),
            None => self.buf.extend_from_slice(b"null"),
        }
        self.buf.extend_from_slice(b",\"n\":");
        self.buf.extend_from_slice(n.to_string().as_bytes());
        match carried {
            Carried::Json(line, eol) => {
                self.buf.extend_from_slice(b",\"line\":");
                self.buf.extend_from_slice(trim_json(line));
                if !eol {
                    self.buf.extend_from_slice(b",\"eol\":false");
                }
                // what trim_json cut (a "\r", spaces) is kept so the line comes back exact
                let (pre, post) = trimmed_edges(line);
                if !pre.is_empty() || !post.is_empty() {
                    self.buf.extend_from_slice(b",\"pad\":[");
                    push_str(self.buf, std::str::from_utf8(pre).unwrap_or(""));
                    self.buf.push(b',');
                    push_str(self.buf, std::str::from_utf8(post).unwrap_or(""));
                    self.buf.push(b']');
                }
            }
            Carried::Raw(line, eol) => {
                match std::str::from_utf8(line) {
                    Ok(t) => {
                        self.buf.extend_from_slice(b",\"raw\":");
                        push_str(self.buf, t);
                    }
                    Err(_) => {
                        use base64::Engine;
                        self.buf.extend_from_slice(b",\"rawBase64\":");
                        let enc = base64::engine::general_purpose::STANDARD.encode(line);
                        push_str(self.buf, &enc);
                    }
                }
                if !eol {
                    self.buf.extend_from_slice(b",\"eol\":false");
                }
            }
            Carried::Part(k) => {
                self.buf.extend_from_slice(b",\"part\":");
                self.buf.extend_from_slice(k.to_string().as_bytes());
            }
        }
        self.buf.extend_from_slice(b"}}\n");
    }
}

/// What an entry's side field carries of its source line.
#[derive(Clone, Copy)]
pub(crate) enum Carried<'a> {
    /// a JSON line (copied as it is) and whether it ended with "\n"
    Json(&'a [u8], bool),
    /// a line that is not JSON
    Raw(&'a [u8], bool),
    /// an extra entry made from a line carried by a later entry
    Part(u32),
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

pub(crate) fn trim_json(line: &[u8]) -> &[u8] {
    let a = line.iter().position(|&c| !is_ws(c)).unwrap_or(line.len());
    let b = line.iter().rposition(|&c| !is_ws(c)).map_or(a, |i| i + 1);
    &line[a..b]
}

fn trimmed_edges(line: &[u8]) -> (&[u8], &[u8]) {
    let a = line.iter().position(|&c| !is_ws(c)).unwrap_or(line.len());
    let b = line.iter().rposition(|&c| !is_ws(c)).map_or(a, |i| i + 1);
    (&line[..a], &line[b..])
}

/// Epoch milliseconds of an ISO timestamp (JavaScript's `Date.parse`), 0 when invalid.
pub(crate) fn ms_of(ts: &str) -> i64 {
    let v = crate::jsdate::parse_iso(ts);
    if v.is_finite() {
        v as i64
    } else {
        0
    }
}

/// A Pi header line.
pub(crate) fn header(
    id: &str,
    ts: &str,
    cwd: &str,
    parent_session: Option<&str>,
    source: &[u8],
) -> Vec<u8> {
    let mut b = Vec::with_capacity(256 + source.len());
    b.extend_from_slice(b"{\"type\":\"session\",\"version\":3,\"id\":");
    push_str(&mut b, id);
    b.extend_from_slice(b",\"timestamp\":");
    push_str(&mut b, ts);
    b.extend_from_slice(b",\"cwd\":");
    push_str(&mut b, cwd);
    if let Some(p) = parent_session {
        b.extend_from_slice(b",\"parentSession\":");
        push_str(&mut b, p);
    }
    if !source.is_empty() {
        b.extend_from_slice(b",\"source\":");
        b.extend_from_slice(source);
    }
    b.extend_from_slice(b"}\n");
    b
}

/// Keys that say which format a JSON line is in, or None.
fn vote(m: &serde_json::Map<String, Value>) -> Option<Format> {
    let ty = s(m.get("type"));
    match ty {
        Some("session") if m.contains_key("version") || m.contains_key("id") => {
            return Some(Format::Pi)
        }
        Some("session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted")
            if m.contains_key("payload") =>
        {
            return Some(Format::Codex)
        }
        _ => {}
    }
    if m.contains_key("uuid") || m.contains_key("parentUuid") || m.contains_key("sessionId") {
        return Some(Format::ClaudeCode);
    }
    match ty {
        Some(
            "user"
            | "assistant"
            | "summary"
            | "system"
            | "file-history-snapshot"
            | "queue-operation"
            | "custom-title"
            | "progress"
            | "attachment",
        ) if m.contains_key("message")
            || m.contains_key("summary")
            || m.contains_key("leafUuid")
            || m.contains_key("subtype")
            || m.contains_key("snapshot")
            || m.contains_key("customTitle") =>
        {
            Some(Format::ClaudeCode)
        }
        // Codex's first layout: items at top level, a header with instructions
        Some("message" | "reasoning" | "function_call" | "function_call_output")
            if m.contains_key("role") || m.contains_key("call_id") || m.contains_key("summary") =>
        {
            Some(Format::Codex)
        }
        None if m.contains_key("record_type") => Some(Format::Codex),
        None if m.contains_key("id")
            && m.contains_key("timestamp")
            && (m.contains_key("instructions") || m.contains_key("git")) =>
        {
            Some(Format::Codex)
        }
        _ => None,
    }
}

/// At most this many bytes of the first lines are read to detect a format.
const DETECT_BYTES: u64 = 16 << 20;

/// The format of a file from the content of its first lines (up to 16 lines, 16 MiB). A Pi header,
/// a Codex rollout (either layout) or a Claude Code transcript; the file's name is never looked at.
/// `Unrecognised` when no line decides.
pub fn detect(path: &Path) -> Result<Format, ConvertError> {
    regular(path)?;
    let f = std::fs::File::open(path).map_err(io_err(path))?;
    let meta = f.metadata().map_err(io_err(path))?;
    if !meta.is_file() {
        return Err(ConvertError::Unrecognised(
            path.to_path_buf(),
            "not a regular file".into(),
        ));
    }
    detect_in(Lines::new(f.take(DETECT_BYTES)), path)
}

/// `detect` over a file's bytes held in memory (`name` names them in errors).
pub fn detect_bytes(data: &[u8], name: &Path) -> Result<Format, ConvertError> {
    let end = data.len().min(DETECT_BYTES as usize);
    detect_in(Lines::new(&data[..end]), name)
}

fn detect_in<R: Read>(mut lines: Lines<R>, path: &Path) -> Result<Format, ConvertError> {
    let mut seen = 0;
    while let Some((line, _)) = lines.next_line().map_err(io_err(path))? {
        if is_blank(line) {
            continue;
        }
        seen += 1;
        if let Parsed::Object(m) = parse_line(line) {
            if let Some(f) = vote(&m) {
                return Ok(f);
            }
        }
        if seen >= 16 {
            break;
        }
    }
    Err(ConvertError::Unrecognised(
        path.to_path_buf(),
        if seen == 0 {
            "empty: no line to recognise".into()
        } else {
            "not a Claude Code transcript, a Codex rollout or a Pi session".into()
        },
    ))
}

/// `Unrecognised` unless `p` is a regular file (a FIFO or a device is never opened: opening a
/// FIFO waits for a writer).
fn regular(p: &Path) -> Result<(), ConvertError> {
    let m = std::fs::metadata(p).map_err(io_err(p))?;
    if m.is_file() {
        Ok(())
    } else {
        Err(ConvertError::Unrecognised(
            p.to_path_buf(),
            "not a regular file".into(),
        ))
    }
}

/// Converts `src` to Pi at `out`; `from` None: detected. Sidechains and subagent files are
/// written beside `out` (listed in the report).
pub fn to_pi(src: &Path, from: Option<Format>, out: &Path) -> Result<Report, ConvertError> {
    to_pi_shown(src, from, out, out, None)
}

/// `to_pi` with the headers naming the main output `shown`. Sidechains name it in their
/// `parentSession`; `shown` is used where `out` is another path to the same file (through an open
/// folder, `/proc/self/fd/N/x`). `store`: `(source folder, output folder)` of a whole store's
/// conversion, so that a Codex fork's `parentSession` names its parent's Pi output.
pub fn to_pi_shown(
    src: &Path,
    from: Option<Format>,
    out: &Path,
    shown: &Path,
    store: codex::StoreDirs<'_>,
) -> Result<Report, ConvertError> {
    regular(src)?;
    let fmt = match from {
        Some(f) => f,
        None => detect(src)?,
    };
    let mut rep = Report {
        from: Some(fmt),
        to: Some(Format::Pi),
        ..Report::default()
    };
    let mut outs = out::Outputs::new(&[src])?;
    match fmt {
        Format::ClaudeCode => cc::convert(src, None, out, shown, None, &mut outs, &mut rep)?,
        Format::Codex => codex::convert(src, None, out, store, &mut outs, &mut rep)?,
        Format::Pi => back::copy_pi(src, out, &mut outs, &mut rep)?,
    }
    rep.files = outs.commit()?;
    Ok(rep)
}

/// A file made in memory: its name and bytes.
pub type MemoryFile = (PathBuf, Vec<u8>);

/// Converts a Claude Code transcript or a Codex rollout held in memory to Pi in memory. `data` is
/// named `name`. Returns the files made, the main one first (`(name, bytes)`; Claude Code
/// sidechains after it, named as `to_pi` would write them beside `name`), and the report. Nothing
/// is read from or written to the filesystem (subagent files beside a transcript are not looked
/// for). A Pi session comes back as it is.
pub fn to_pi_bytes(
    data: &[u8],
    name: &Path,
    from: Option<Format>,
) -> Result<(Vec<MemoryFile>, Report), ConvertError> {
    let fmt = match from {
        Some(f) => f,
        None => detect_bytes(data, name)?,
    };
    let mut rep = Report {
        from: Some(fmt),
        to: Some(Format::Pi),
        ..Report::default()
    };
    let mut outs = out::Outputs::memory();
    match fmt {
        Format::ClaudeCode => cc::convert(name, Some(data), name, name, None, &mut outs, &mut rep)?,
        Format::Codex => codex::convert(name, Some(data), name, None, &mut outs, &mut rep)?,
        Format::Pi => {
            rep.lines = data.split(|&c| c == b'\n').count() as u64;
            rep.written = rep.lines;
            return Ok((vec![(name.to_path_buf(), data.to_vec())], rep));
        }
    }
    let files = outs.take_memory();
    rep.files = files.iter().map(|(p, _)| p.clone()).collect();
    Ok((files, rep))
}

/// Converts the Pi session `src` to `to` at `out`.
pub fn from_pi(src: &Path, to: Format, out: &Path) -> Result<Report, ConvertError> {
    regular(src)?;
    let mut rep = Report {
        from: Some(Format::Pi),
        to: Some(to),
        ..Report::default()
    };
    let mut outs = out::Outputs::new(&[src])?;
    match to {
        Format::ClaudeCode => back::to_claude_code(src, out, &mut outs, &mut rep)?,
        Format::Codex => back::to_codex(src, out, &mut outs, &mut rep)?,
        Format::Pi => back::copy_pi(src, out, &mut outs, &mut rep)?,
    }
    rep.files = outs.commit()?;
    Ok(rep)
}

/// `to_pi` or `from_pi`, whichever the pair names (one of them must be Pi).
pub fn convert(
    src: &Path,
    from: Option<Format>,
    to: Format,
    out: &Path,
) -> Result<Report, ConvertError> {
    let from = match from {
        Some(f) => f,
        None => detect(src)?,
    };
    match (from, to) {
        (_, Format::Pi) => to_pi(src, Some(from), out),
        (Format::Pi, t) => {
            let found = detect(src)?;
            if found != Format::Pi {
                return Err(ConvertError::Unrecognised(
                    src.to_path_buf(),
                    format!("not a Pi session (it reads as {})", found.name()),
                ));
            }
            from_pi(src, t, out)
        }
        (f, t) => Err(ConvertError::Unsupported(format!(
            "{} -> {}: convert to pi first, then from pi",
            f.name(),
            t.name()
        ))),
    }
}

/// A file name part made of `[A-Za-z0-9_.-]` only (at most 80 bytes).
pub(crate) fn safe_name(s: &str) -> String {
    let mut o: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    if o.is_empty() {
        o.push('x');
    }
    o
}

/// `dir/<stem>.<tag>.jsonl` beside `out`.
pub(crate) fn beside(out: &Path, tag: &str) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    out.with_file_name(format!("{stem}.{tag}.jsonl"))
}

/// The type of a Pi entry restored from a `pi_entry` line: Pi's own types borrowed, any other
/// (a later version's, a harness `leaf`) kept as written, so a round trip through Claude Code
/// or Codex gives the entry back with its type and fields.
pub(crate) fn pi_entry_type(t: &str) -> std::borrow::Cow<'static, str> {
    use std::borrow::Cow;
    match t {
        "message" => Cow::Borrowed("message"),
        "compaction" => Cow::Borrowed("compaction"),
        "branch_summary" => Cow::Borrowed("branch_summary"),
        "custom" => Cow::Borrowed("custom"),
        "custom_message" => Cow::Borrowed("custom_message"),
        "label" => Cow::Borrowed("label"),
        "session_info" => Cow::Borrowed("session_info"),
        "model_change" => Cow::Borrowed("model_change"),
        "thinking_level_change" => Cow::Borrowed("thinking_level_change"),
        "usage" => Cow::Borrowed("usage"),
        "context_edit" => Cow::Borrowed("context_edit"),
        other => Cow::Owned(other.to_string()),
    }
}

#[cfg(test)]
mod tests;
