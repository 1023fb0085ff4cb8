//! Entry type and message role codes.
//!
//! The well-known names with fixed codes (`T_*`, `R_*`), and the interning of other names.
//!
//! A record holds 16-bit codes, so each table holds at most 65,535 names; every later new
//! name gets the "other" code ([`T_OTHER`], [`R_OTHER`]), whose name is read back from the
//! entry's own line when asked ([`type_of_line`], `Store::entry_type`). Such an entry is
//! exact for every answer: no rule compares against a code past the fixed ones.

use super::Index;
use crate::json::Val;

/// A names table's codes by name.
type NameCodes = std::collections::HashMap<String, u16>;

/// Interned entry types with fixed codes; others are interned after these.
pub const TYPE_NAMES: [&str; 13] = [
    "", // 0: not a string (undefined, number, ...)
    "session",
    "message",
    "model_change",
    "thinking_level_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
    "context_edit",
    "usage",
];
pub const T_NONE: u16 = 0;
pub const T_SESSION: u16 = 1;
pub const T_MESSAGE: u16 = 2;
pub const T_MODEL_CHANGE: u16 = 3;
pub const T_THINKING_LEVEL_CHANGE: u16 = 4;
pub const T_COMPACTION: u16 = 5;
pub const T_BRANCH_SUMMARY: u16 = 6;
pub const T_CUSTOM_MESSAGE: u16 = 8;
pub const T_LABEL: u16 = 9;
pub const T_SESSION_INFO: u16 = 10;
pub const T_CONTEXT_EDIT: u16 = 11;
/// A string type past the full names table: its name is on the entry's line.
pub const T_OTHER: u16 = u16::MAX;

pub const ROLE_NAMES: [&str; 10] = [
    "",
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom",
    "branchSummary",
    "compactionSummary",
    "system",
    "hookMessage",
];
pub const R_ASSISTANT: u16 = 2;
pub const R_CUSTOM: u16 = 5;
pub const R_HOOK: u16 = 9;
/// A string role past the full names table: its name is on the entry's line.
pub const R_OTHER: u16 = u16::MAX;

/// `type` of an entry's line when it is a string (what [`T_OTHER`] stands for).
pub fn type_of_line(line: &[u8]) -> Option<String> {
    match crate::json::LineParser::new().parse(line).ok()?.type_ {
        Val::Str(s) => Some(s.into_owned()),
        _ => None,
    }
}

/// `message.role` of an entry's line when it is a string (what [`R_OTHER`] stands for).
pub fn role_of_line(line: &[u8]) -> Option<String> {
    match crate::json::LineParser::new().parse(line).ok()?.role {
        Val::Str(s) => Some(s.into_owned()),
        _ => None,
    }
}

/// The fixed code of a well-known name (`""` at 0 never matches a string).
#[inline]
pub(super) fn known_code(names: &[&str], s: &str) -> Option<u16> {
    names
        .iter()
        .skip(1)
        .position(|&n| n == s)
        .map(|i| i as u16 + 1)
}

/// The well-known names `fixed` at their codes (their index) in a names table; `""` at 0
/// is not looked up.
fn push_fixed(fixed: &[&str], names: &mut Vec<String>, codes: &mut NameCodes) {
    for (i, t) in fixed.iter().enumerate() {
        names.push(t.to_string());
        if i > 0 {
            codes.insert(t.to_string(), i as u16);
        }
    }
}

/// The code of name `s` in a names table (`names` by code, `codes` by name).
///
/// Its fixed code in `fixed`, the code it took when first met, or the next one; `other` once the
/// table is full.
fn intern(
    fixed: &[&str],
    names: &mut Vec<String>,
    codes: &mut NameCodes,
    other: u16,
    s: &str,
) -> u16 {
    if let Some(c) = known_code(fixed, s) {
        return c;
    }
    if let Some(&c) = codes.get(s) {
        return c;
    }
    let c = names.len() as u16;
    if c == other {
        return other;
    }
    names.push(s.to_string());
    codes.insert(s.to_string(), c);
    c
}

impl Index {
    /// The well-known names at their fixed codes.
    pub(super) fn push_fixed_codes(&mut self) {
        push_fixed(&TYPE_NAMES, &mut self.types, &mut self.type_codes);
        push_fixed(&ROLE_NAMES, &mut self.roles, &mut self.role_codes);
    }

    /// The name of a type code.
    ///
    /// `""` for [`T_NONE`] and for [`T_OTHER`], whose name is only on the entry's line
    /// (`Store::entry_type` answers for an entry).
    pub fn type_name(&self, code: u16) -> &str {
        self.types.get(code as usize).map_or("", |s| s)
    }
    /// The name of a role code; `""` for 0 and for [`R_OTHER`] (see `Store::entry_role`).
    pub fn role_name(&self, code: u16) -> &str {
        self.roles.get(code as usize).map_or("", |s| s)
    }
    pub(super) fn type_code(&mut self, v: &Val) -> u16 {
        match v {
            Val::Str(s) => intern(
                &TYPE_NAMES,
                &mut self.types,
                &mut self.type_codes,
                T_OTHER,
                s,
            ),
            _ => T_NONE,
        }
    }
    pub(super) fn role_code(&mut self, v: &Val) -> u16 {
        match v {
            Val::Str(s) => intern(
                &ROLE_NAMES,
                &mut self.roles,
                &mut self.role_codes,
                R_OTHER,
                s,
            ),
            _ => 0,
        }
    }

    /// Whether a names table is full. Then some entries may carry [`T_OTHER`] or [`R_OTHER`] (their
    /// names are then read back from their lines).
    pub fn names_overflowed(&self) -> bool {
        self.types.len() >= T_OTHER as usize || self.roles.len() >= R_OTHER as usize
    }

    /// The code of an entry type name already met. None: no entry has this type, or only entries
    /// coded [`T_OTHER`] once the table is full (callers ask for well-known names).
    pub fn type_code_of(&self, name: &str) -> Option<u16> {
        self.type_codes.get(name).copied()
    }
    /// The code of a message role name already met (as [`Index::type_code_of`]).
    pub fn role_code_of(&self, name: &str) -> Option<u16> {
        self.role_codes.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    /// Past 65,535 distinct names each entry still reads back its own type and role (before
    /// the fix they read as a non-string type and no role).
    #[test]
    fn names_past_a_full_table_read_back_from_the_line() {
        let n = 70_000usize;
        let mut data = Vec::new();
        data.extend_from_slice(b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/p\"}\n");
        for k in 0..n {
            data.extend_from_slice(format!("{{\"type\":\"x{k}\",\"id\":\"t{k}\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\"}}\n").as_bytes());
        }
        for k in 0..n {
            data.extend_from_slice(format!("{{\"type\":\"message\",\"id\":\"r{k}\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"role{k}\",\"content\":\"c\"}}}}\n").as_bytes());
        }
        data.extend_from_slice(b"{\"type\":7,\"id\":\"n\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\"}\n");
        let st = Store::from_bytes(data, true);
        assert_eq!(st.index.recs.len(), 2 * n + 1);
        for k in 0..n {
            assert_eq!(
                st.entry_type(k).unwrap().as_deref(),
                Some(&*format!("x{k}"))
            );
            assert_eq!(st.entry_role(k).unwrap(), None);
            let m = n + k;
            assert_eq!(st.entry_type(m).unwrap().as_deref(), Some("message"));
            assert_eq!(
                st.entry_role(m).unwrap().as_deref(),
                Some(&*format!("role{k}"))
            );
        }
        // the table filled and the later names took the "other" code, never a known one
        let last = &st.index.recs.at(n - 1);
        assert_eq!(last.etype, T_OTHER);
        assert_eq!(st.index.recs.at(2 * n - 1).role, R_OTHER);
        assert_eq!(st.index.type_name(T_OTHER), "");
        // a type that is not a string still reads as none
        assert_eq!(st.entry_type(2 * n).unwrap(), None);
        // the saved index keeps the "other" codes with the full tables
        let ix = &st.index;
        let back =
            Index::restore(&ix.persist_all(), ix.recs.to_vec(), ix.scanned_to).expect("restores");
        assert_eq!(back.recs.at(n - 1).etype, T_OTHER);
        assert_eq!(back.recs.at(2 * n - 1).role, R_OTHER);
        assert_eq!(back.type_code_of("x10"), ix.type_code_of("x10"));
    }

    /// A saved index is hostile: an "other" code while its table is not full is refused.
    #[test]
    fn a_saved_other_code_with_room_in_the_table_is_refused() {
        let mut data = Vec::new();
        data.extend_from_slice(b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/p\"}\n");
        data.extend_from_slice(b"{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"odd\",\"content\":\"c\"}}\n");
        data.extend_from_slice(b"{\"type\":\"odd\",\"id\":\"b\",\"parentId\":\"a\",\"timestamp\":\"2026-01-01T00:00:01.000Z\"}\n");
        let st = Store::from_bytes(data, false);
        let ix = &st.index;
        let meta = ix.persist_all();
        assert!(Index::restore(&meta, ix.recs.to_vec(), ix.scanned_to).is_some());
        let mut recs = ix.recs.to_vec();
        recs[1].etype = T_OTHER;
        assert!(Index::restore(&meta, recs, ix.scanned_to).is_none());
        let mut recs = ix.recs.to_vec();
        recs[0].role = R_OTHER;
        assert!(Index::restore(&meta, recs, ix.scanned_to).is_none());
    }
}
