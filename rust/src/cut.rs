//! Pi's cut-point search (compaction.ts `findCutPoint`), over the context projection as Pi 1.6 runs
//! it. It walks back from the newest entry and parses only the entries it needs.
//!
//! Per entry, what matters is the context message it contributes (if any), its token estimate,
//! and whether it may start the kept region (user, assistant, bashExecution, custom,
//! branchSummary, compactionSummary — never a tool result) or opens a turn (the same without
//! assistant). Entries without a message (settings changes, labels, ...) right before the cut
//! are kept with it. What an entry is to the rules comes from the projection
//! (`entry_kind.rs`: its type's row, and its role's). Anything unusual (a `context_edit` on the
//! path, a type or role the projection leaves undecided, content on which Pi would throw)
//! makes the search return `None`, and the caller uses the Python implementation.

use crate::entry_kind::{self, Context, Role};
use crate::store::Store;
use crate::tokens::{self, Estimate};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Info {
    pub tokens: u64,
    pub has_message: bool,
    pub cut_point: bool,
    pub turn_start: bool,
    pub compaction: bool,
}

impl Info {
    /// An entry that is a message of `tokens` tokens for the search.
    fn message(tokens: u64, cut_point: bool, turn_start: bool) -> Info {
        Info {
            tokens,
            has_message: true,
            cut_point,
            turn_start,
            compaction: false,
        }
    }
}

#[derive(Deserialize)]
struct Fields {
    message: Option<Value>,
    content: Option<Value>,
    summary: Option<Value>,
}

/// What entry `i` contributes to the cut-point search, or None when Python must decide.
pub fn entry_info(st: &Store, i: u32) -> Option<Info> {
    let rec = st.index.recs.at(i as usize);
    let kind = entry_kind::type_row(rec.etype).context;
    match kind {
        Context::CompactionSummary => {
            return Some(Info {
                compaction: true,
                ..Default::default()
            })
        }
        Context::ContextEdit | Context::Undecided => return None,
        Context::Nothing => return Some(Info::default()),
        Context::Message | Context::CustomMessage | Context::BranchSummary => {}
    }
    let f: Fields = serde_json::from_slice(&st.line(i as usize).ok()?).ok()?;
    match kind {
        Context::Message => {
            let msg = f.message?;
            let role = msg.get("role")?.as_str()?.to_string();
            // the index's role code (in a v2 file `hookMessage` is already `custom` there)
            let Role::Known {
                cut_point,
                turn_start,
            } = entry_kind::role_row(rec.role).role
            else {
                return None; // a role the projection leaves to Python
            };
            if matches!(msg.get("content"), None | Some(Value::Null))
                && role != "bashExecution"
                && role != "branchSummary"
                && role != "compactionSummary"
            {
                return None; // null-content fix-ups: leave them to Python
            }
            let Estimate::Tokens(t) = tokens::estimate_message(&msg) else {
                return None;
            };
            Some(Info::message(t, cut_point, turn_start))
        }
        Context::CustomMessage => {
            let content = match f.content {
                None | Some(Value::Null) => Value::Array(vec![]),
                Some(c) => c,
            };
            let msg = serde_json::json!({"role": "custom", "content": content});
            let Estimate::Tokens(t) = tokens::estimate_message(&msg) else {
                return None;
            };
            let (cut_point, turn_start) = flags_of(b"custom")?;
            Some(Info::message(t, cut_point, turn_start))
        }
        Context::BranchSummary => {
            // a message only when `summary` is truthy
            match f.summary {
                Some(Value::String(s)) if !s.is_empty() => {
                    let t = tokens::estimate_message(
                        &serde_json::json!({"role": "branchSummary", "summary": s}),
                    );
                    let Estimate::Tokens(t) = t else { return None };
                    let (cut_point, turn_start) = flags_of(b"branchSummary")?;
                    Some(Info::message(t, cut_point, turn_start))
                }
                None | Some(Value::Null) | Some(Value::Bool(false)) => Some(Info::default()),
                Some(Value::String(_)) => Some(Info::default()),
                Some(_) => None,
            }
        }
        Context::CompactionSummary
        | Context::Nothing
        | Context::ContextEdit
        | Context::Undecided => None,
    }
}

/// (cut point, turn start) of the messages the projection gives role `name` (the messages
/// that context building makes of `custom_message` and `branch_summary` entries).
fn flags_of(name: &[u8]) -> Option<(bool, bool)> {
    match entry_kind::role_row_of_name(name).role {
        Role::Known {
            cut_point,
            turn_start,
        } => Some((cut_point, turn_start)),
        Role::Undecided => None,
    }
}

/// `(first_kept, turn_start or -1, is_split_turn)` as positions in `path`.
pub type CutResult = (usize, isize, bool);

/// Pi's findCutPoint over `path[start..end]` (entry indices), or None when Python must decide.
pub fn find_cut_point(
    st: &Store,
    path: &[u32],
    start: usize,
    end: usize,
    keep: u64,
) -> Option<CutResult> {
    let end = end.min(path.len());
    if start >= end {
        return Some((start, -1, false));
    }
    let mut cache: HashMap<usize, Info> = HashMap::new();
    let mut info = |k: usize| -> Option<Info> {
        if let Some(i) = cache.get(&k) {
            return Some(*i);
        }
        let i = entry_info(st, path[k])?;
        cache.insert(k, i);
        Some(i)
    };
    let first_cut_from =
        |from: usize, info: &mut dyn FnMut(usize) -> Option<Info>| -> Option<Option<usize>> {
            for k in from..end {
                if info(k)?.cut_point {
                    return Some(Some(k));
                }
            }
            Some(None)
        };
    // walk back from the newest entry until the budget is met
    let mut accumulated = 0u64;
    let mut met_at = None;
    for k in (start..end).rev() {
        let t = info(k)?.tokens;
        if t == 0 {
            continue;
        }
        accumulated += t;
        if accumulated >= keep {
            met_at = Some(k);
            break;
        }
    }
    let mut cut = match met_at {
        Some(k) => match first_cut_from(k, &mut info)? {
            Some(c) => c,
            None => match first_cut_from(start, &mut info)? {
                Some(c) => c,
                None => return Some((start, -1, false)),
            },
        },
        None => match first_cut_from(start, &mut info)? {
            Some(c) => c,
            None => return Some((start, -1, false)),
        },
    };
    // keep the message-less entries (settings changes, labels, ...) directly before the cut
    while cut > start {
        let prev = info(cut - 1)?;
        if prev.compaction || prev.has_message {
            break;
        }
        cut -= 1;
    }
    if info(cut)?.turn_start {
        return Some((cut, -1, false));
    }
    for k in (start..=cut).rev() {
        if info(k)?.turn_start {
            return Some((cut, k as isize, true));
        }
    }
    Some((cut, -1, false))
}
