//! Pi sessions older than version 3 through Claude Code and Codex: the one home of the rule.
//!
//! Pi -> target: the lines of a session Pi reads as version 1 get the ids our reader derives
//! (by position, each the child of the previous: [`reader_ids`]), so the target's own lines
//! can hang under them; each entry still travels in `piEntry` in its own version.
//!
//! Target -> Pi: a header of version 1 or 2 carried by the first line is given back as it
//! was only when every other line carries an entry in its own version (a `piEntry` line):
//! Pi and our reader then migrate those entries as they migrated the session's. When any
//! entry is made from the target's own lines (lines the agent appended, `piPart` lines, a
//! blank line), those entries are the current version's: the header is written at version 3
//! (every other byte kept, the first line in its side field so Pi -> target gives it back)
//! and the `piEntry` entries are migrated as Pi migrates them ([`Migration::apply`]): a v1
//! compaction's `firstKeptEntryIndex` becomes `firstKeptEntryId`, a `hookMessage` role
//! `custom`; their ids and parents are the lines' (the reader's ids, written by Pi -> target).
//! A later header over a first entry with neither `id` nor `parentId` (read as v1 by our
//! reader, docs/divergences.md row 22) stays as it was and its `piEntry` entries are migrated
//! the same way: given ids by their lines, the reader would no longer read them as v1.

use super::{io_err, open_src, push_str, s, ConvertError, Format};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::Path;

/// How the entries restored from a target's `piEntry` lines are migrated (the header older
/// than version 3, over lines of the target's own).
pub(crate) struct Migration {
    /// version 1 (v1 -> v2 -> v3), else version 2 (v2 -> v3)
    pub v1: bool,
    /// the lines (0-based) carrying an entry in its own version, with the entry's string `id`.
    ///
    /// In file order: the entries Pi's `firstKeptEntryIndex` counts.
    pub carried: Vec<(u32, Option<String>)>,
}

impl Migration {
    /// Whether line `n` carries an entry in its own version.
    pub fn carries(&self, n: u32) -> bool {
        self.carried.binary_search_by_key(&n, |c| c.0).is_ok()
    }

    /// Pi's `migrateV1ToV2` and `migrateV2ToV3` on one restored entry.
    ///
    /// `ty`, and its fields but `type`, `id`, `parentId`, `timestamp`: a v1 compaction's numeric
    /// `firstKeptEntryIndex` becomes `firstKeptEntryId`, the id of the entry at that index (the
    /// header being 0: the entry of the index-th `piEntry` line, `id_of` its line), none for the
    /// header or past the end; a message's `hookMessage` role becomes `custom`.
    pub fn apply(&self, ty: &str, fields: &mut Map<String, Value>, id_of: impl Fn(u32) -> String) {
        if self.v1 && ty == "compaction" {
            if let Some(k) = fields.get("firstKeptEntryIndex").and_then(Value::as_f64) {
                // JavaScript `entries[k]`: an integer index names an entry, anything else none
                let at = (k >= 1.0 && k.fract() == 0.0)
                    .then(|| self.carried.get(k as usize - 1))
                    .flatten();
                if let Some(&(line, _)) = at {
                    fields.insert("firstKeptEntryId".into(), Value::String(id_of(line)));
                }
                fields.remove("firstKeptEntryIndex");
            }
        }
        if ty == "message" {
            if let Some(Value::Object(m)) = fields.get_mut("message") {
                if s(m.get("role")) == Some("hookMessage") {
                    m.insert("role".into(), Value::String("custom".into()));
                }
            }
        }
    }
}

/// A line that carries a Pi entry in its own version: a top-level `piEntry` object whose
/// `type` is a string other than `session` (what the converters restore). The entry's `id`
/// when it is a string.
fn pi_entry_of(line: &[u8]) -> Option<Option<String>> {
    #[derive(Deserialize)]
    struct Line<'a> {
        #[serde(rename = "piEntry", borrow)]
        pi: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Entry {
        #[serde(rename = "type")]
        ty: Option<Value>,
        id: Option<Value>,
    }
    // a line without the key is not parsed (the scan runs only under an old header)
    memchr::memmem::find(line, b"\"piEntry\"")?;
    let raw = serde_json::from_slice::<Line>(line).ok()?.pi?;
    let e: Entry = serde_json::from_str(raw.get()).ok()?;
    match s(e.ty.as_ref()) {
        Some(t) if t != "session" => Some(s(e.id.as_ref()).map(str::to_string)),
        _ => None,
    }
}

/// A line whose `piEntry` has neither `id` nor `parentId` (a v1 entry).
fn bare_pi_entry(line: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Line {
        #[serde(rename = "piEntry")]
        pi: Option<Value>,
    }
    match serde_json::from_slice::<Line>(line) {
        Ok(Line {
            pi: Some(Value::Object(e)),
        }) => !e.contains_key("id") && !e.contains_key("parentId"),
        _ => false,
    }
}

/// The Pi header line to write for the header `raw` (JSON text) that the first line `first`
/// of `src` (or `data`) carries, and the migration of the entries under it (see the module).
/// `fmt`: the target format; `more`: members the side field adds (Claude Code's side sessions).
pub(crate) fn carried_header(
    raw: &[u8],
    first: &[u8],
    src: &Path,
    data: Option<&[u8]>,
    fmt: Format,
    more: &[u8],
) -> Result<(Vec<u8>, Option<Migration>), ConvertError> {
    let as_was = || [raw, b"\n"].concat();
    let head: Map<String, Value> = match serde_json::from_slice(raw) {
        Ok(h) => h,
        Err(_) => return Ok((as_was(), None)),
    };
    let legacy = crate::index::legacy_of_json(head.get("version"));
    let mut lines = open_src(src, data)?;
    let mut carried = Vec::new();
    let mut own = false;
    let mut n = 0u32;
    while let Some((line, _)) = lines.next_line().map_err(io_err(src))? {
        if n == 1 && legacy.is_none() && !bare_pi_entry(line) {
            return Ok((as_was(), None));
        }
        if n > 0 {
            match pi_entry_of(line) {
                Some(id) => carried.push((n, id)),
                None => own = true,
            }
        }
        n += 1;
    }
    let Some(v1) = legacy else {
        // a later header over an entry with neither `id` nor `parentId` first: our reader
        // reads the entries as v1 (docs/divergences.md row 22); given ids by their lines they
        // would not be, so they are migrated here, under the header as it was
        return Ok(match n > 1 {
            true => (as_was(), Some(Migration { v1: true, carried })),
            false => (as_was(), None),
        });
    };
    if !own {
        return Ok((as_was(), None));
    }
    let mut side = Vec::with_capacity(first.len() + 64);
    side.extend_from_slice(b"{\"format\":");
    push_str(&mut side, fmt.name());
    side.extend_from_slice(b",\"file\":");
    let name = src
        .file_name()
        .map(|x| x.to_string_lossy().into_owned())
        .unwrap_or_default();
    push_str(&mut side, &name);
    side.extend_from_slice(b",\"n\":0,\"line\":");
    side.extend_from_slice(super::trim_json(first));
    side.extend_from_slice(more);
    side.push(b'}');
    let mut h = with_member(raw, "version", b"3");
    h = with_member(&h, "source", &side);
    h.push(b'\n');
    Ok((h, Some(Migration { v1, carried })))
}

/// The JSON object text `obj` with every top-level member named `key` given the value `value`
/// (JSON text), or the member added at the end when there is none; every other byte kept.
/// `obj` is valid JSON (parsed before).
fn with_member(obj: &[u8], key: &str, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(obj.len() + value.len() + key.len() + 4);
    let mut last = 0usize; // bytes of `obj` copied so far
    let mut found = false;
    let (mut depth, mut in_str, mut esc) = (0u32, false, false);
    let mut key_start = None::<usize>;
    let mut this_key: Option<(usize, usize)> = None; // the member's key span, quotes included
    let mut val_start = None::<usize>;
    let mut close = obj.len();
    let mut replace =
        |out: &mut Vec<u8>, last: &mut usize, k: (usize, usize), v: (usize, usize)| {
            let name: Option<String> = serde_json::from_slice(&obj[k.0..k.1]).ok();
            if name.as_deref() == Some(key) {
                let text = &obj[v.0..v.1];
                let lead = text.len() - text.trim_ascii_start().len();
                let trail = text.len() - text.trim_ascii_end().len();
                out.extend_from_slice(&obj[*last..v.0 + lead]);
                out.extend_from_slice(value);
                *last = v.1 - trail;
                found = true;
            }
        };
    for (j, &c) in obj.iter().enumerate() {
        if in_str {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
                if depth == 1 && val_start.is_none() {
                    if let Some(k) = key_start.take() {
                        this_key = Some((k, j + 1));
                    }
                }
            }
            continue;
        }
        match c {
            b'"' => {
                in_str = true;
                if depth == 1 && val_start.is_none() && this_key.is_none() {
                    key_start = Some(j);
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                if depth == 1 {
                    if let (Some(k), Some(v)) = (this_key.take(), val_start.take()) {
                        replace(&mut out, &mut last, k, (v, j));
                    }
                    close = j;
                }
                depth -= 1;
            }
            b':' if depth == 1 && val_start.is_none() => val_start = Some(j + 1),
            b',' if depth == 1 => {
                if let (Some(k), Some(v)) = (this_key.take(), val_start.take()) {
                    replace(&mut out, &mut last, k, (v, j));
                }
            }
            _ => {}
        }
        if depth == 0 && c == b'}' {
            break;
        }
    }
    if found {
        out.extend_from_slice(&obj[last..]);
        return out;
    }
    // no such member: added before the closing brace
    let body = obj[..close].trim_ascii_end();
    out.clear();
    out.extend_from_slice(body);
    if !body.ends_with(b"{") {
        out.push(b',');
    }
    push_str(&mut out, key);
    out.push(b':');
    out.extend_from_slice(value);
    out.extend_from_slice(&obj[close..]);
    out
}

/// Entries' `(id, parentId)` by 1-based line number.
pub(crate) type IdsByLine = HashMap<u64, (String, Option<String>)>;

/// The ids our reader gives the entries of the Pi session `src` (header `h`) when it reads
/// them as version 1 (a version 1 header, or entries with neither `id` nor `parentId` under a
/// later one: docs/divergences.md rows 3 and 22): `(id, parentId)` by 1-based line number.
/// None when the session is not read as version 1 (its entries' own ids are the tree).
pub(crate) fn reader_ids(
    src: &Path,
    h: &Map<String, Value>,
) -> Result<Option<IdsByLine>, ConvertError> {
    let maybe = match crate::index::legacy_of_json(h.get("version")) {
        Some(v1) => v1,
        // the first entry without `id` and `parentId`, looked at without allocating (a null
        // reads as none here: the index decides)
        None => {
            #[derive(Deserialize)]
            struct Ids<'a> {
                #[serde(borrow)]
                id: Option<&'a RawValue>,
                #[serde(rename = "parentId", borrow)]
                parent: Option<&'a RawValue>,
            }
            let mut lines = super::open_lines(src)?;
            let mut n = 0;
            let mut bare = false;
            while let Some((line, _)) = lines.next_line().map_err(io_err(src))? {
                n += 1;
                if n > 1 && !super::is_blank(line) {
                    bare = matches!(
                        serde_json::from_slice::<Ids>(line),
                        Ok(Ids {
                            id: None,
                            parent: None
                        })
                    );
                    break;
                }
            }
            bare
        }
    };
    if !maybe {
        return Ok(None);
    }
    let st = crate::store::Store::open(src, false)
        .map_err(|e| ConvertError::Io(src.to_path_buf(), std::io::Error::other(e.to_string())))?;
    let ix = &st.index;
    if !ix.is_legacy_v1() {
        return Ok(None);
    }
    let mut out = HashMap::with_capacity(ix.len());
    for i in 0..ix.len() {
        let v = ix.view(i).expect("in range");
        if let Some(id) = v.id {
            out.insert(
                v.line as u64,
                (id.to_string(), v.parent_id.map(str::to_string)),
            );
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::with_member;

    #[test]
    fn a_member_is_replaced_in_place_or_added_at_the_end() {
        let got = |o: &str, k: &str, v: &str| {
            String::from_utf8(with_member(o.as_bytes(), k, v.as_bytes())).unwrap()
        };
        assert_eq!(
            got(
                r#"{"type":"session","version":1,"x":[1.50,"\u00e9"] }"#,
                "version",
                "3"
            ),
            r#"{"type":"session","version":3,"x":[1.50,"\u00e9"] }"#
        );
        assert_eq!(
            got(
                r#"{"a":{"version":1}, "version" : 2 ,"b":"}"}"#,
                "version",
                "3"
            ),
            r#"{"a":{"version":1}, "version" : 3 ,"b":"}"}"#
        );
        assert_eq!(
            got(r#"{"type":"session","id":"x"}"#, "version", "3"),
            r#"{"type":"session","id":"x","version":3}"#
        );
        assert_eq!(got("{}", "version", "3"), r#"{"version":3}"#);
        assert_eq!(
            got(r#"{"\u0076ersion":1,"version":"1"}"#, "version", "3"),
            r#"{"\u0076ersion":3,"version":3}"#
        );
        assert_eq!(
            got(
                r#"{"source":{"format":"codex"},"k":"v"}"#,
                "source",
                r#"{"f":1}"#
            ),
            r#"{"source":{"f":1},"k":"v"}"#
        );
    }
}
