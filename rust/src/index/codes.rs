//! Entry type and message role codes: the well-known names with fixed codes (`T_*`, `R_*`),
//! and the interning of other names.

use super::Index;
use crate::json::Val;

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

/// The fixed code of a well-known name (`""` at 0 never matches a string).
#[inline]
pub(super) fn known_code(names: &[&str], s: &str) -> Option<u16> {
    names
        .iter()
        .skip(1)
        .position(|&n| n == s)
        .map(|i| i as u16 + 1)
}

impl Index {
    /// The well-known names at their fixed codes.
    pub(super) fn push_fixed_codes(&mut self) {
        for (i, t) in TYPE_NAMES.iter().enumerate() {
            self.types.push(t.to_string());
            if i > 0 {
                self.type_codes.insert(t.to_string(), i as u16);
            }
        }
        for (i, r) in ROLE_NAMES.iter().enumerate() {
            self.roles.push(r.to_string());
            if i > 0 {
                self.role_codes.insert(r.to_string(), i as u16);
            }
        }
    }

    pub fn type_name(&self, code: u16) -> &str {
        &self.types[code as usize]
    }
    pub fn role_name(&self, code: u16) -> &str {
        &self.roles[code as usize]
    }
    pub(super) fn type_code(&mut self, v: &Val) -> u16 {
        match v {
            Val::Str(s) => {
                if let Some(c) = known_code(&TYPE_NAMES, s) {
                    return c;
                }
                if let Some(&c) = self.type_codes.get(&**s) {
                    return c;
                }
                let c = self.types.len() as u16;
                if c == u16::MAX {
                    return T_NONE;
                }
                self.types.push(s.to_string());
                self.type_codes.insert(s.to_string(), c);
                c
            }
            _ => T_NONE,
        }
    }
    pub(super) fn role_code(&mut self, v: &Val) -> u16 {
        match v {
            Val::Str(s) => {
                if let Some(c) = known_code(&ROLE_NAMES, s) {
                    return c;
                }
                if let Some(&c) = self.role_codes.get(&**s) {
                    return c;
                }
                let c = self.roles.len() as u16;
                if c == u16::MAX {
                    return 0;
                }
                self.roles.push(s.to_string());
                self.role_codes.insert(s.to_string(), c);
                c
            }
            _ => 0,
        }
    }

    /// The code of an entry type name already met (None: no entry has this type).
    pub fn type_code_of(&self, name: &str) -> Option<u16> {
        self.type_codes.get(name).copied()
    }
    /// The code of a message role name already met.
    pub fn role_code_of(&self, name: &str) -> Option<u16> {
        self.role_codes.get(name).copied()
    }
}
