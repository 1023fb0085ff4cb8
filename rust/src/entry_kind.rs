//! What each entry type and message role is to the rules.
//!
//! One projection by code, asked by the cut-point search (`cut.rs`), the HTML view's digest
//! (`digest.rs`) and the fleet rows (`rows.rs`), and the one rule of which `usage` an entry carries
//! (`sessiontree.usage._carries_usage`), shared by the digest and the rows.
//!
//! The tables have one row per fixed name of `index/codes.rs`, in code order: [`TYPE_ROWS`] is
//! `[TypeRow; TYPE_NAMES.len()]` and [`ROLE_ROWS`] `[RoleRow; ROLE_NAMES.len()]`, and a const
//! check compares each row's name with the name at its code, so a name added to `codes.rs`
//! without a row here does not compile. A type code past the fixed names (a name interned
//! later, [`T_OTHER`]) and [`T_NONE`] (a `type` that is not a string) are [`Context::Undecided`]:
//! the core does not know what Pi does with such an entry, so the fast paths answer "undecided"
//! and the Python rules decide (Pi 1.6's `buildSessionContext` ignores them; a later Pi may
//! not). The Python registry is `sessiontree.entry_types.ENTRY_TYPES`;
//! `tests/pi_rules/test_entry_types.py` checks, through the binding, that every name here is
//! handled by the cut-point search, the digest and the fleet rows as that registry says.

use crate::index::{ROLE_NAMES, TYPE_NAMES, T_NONE};

/// The context message an entry of a type contributes (Pi `sessionEntryToContextMessages`). The
/// Python home is `sessiontree.context.entry_to_context_messages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// `message`: the stored message (its role says the rest: [`RoleRow`])
    Message,
    /// `custom_message`: a `custom` message of its `content` (`[]` when null or missing)
    CustomMessage,
    /// `branch_summary`: a `branchSummary` message when its `summary` is truthy
    BranchSummary,
    /// `compaction`: the `compactionSummary` of the latest compaction on the path (the
    /// cut-point search stops at it)
    CompactionSummary,
    /// nothing: settings changes, labels, names, `custom` and `usage` entries, a `session` line
    Nothing,
    /// `context_edit`: changes another entry's message (`context.collect_context_edits`
    /// decides, in Python)
    ContextEdit,
    /// a type the core does not know: the Python rules decide
    Undecided,
}

/// Which `usage` value an entry carries into Pi's sums (`sessiontree.usage._carries_usage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carries {
    /// none
    Never,
    /// any object, `{}` included (assistant messages)
    Object,
    /// an object with at least one key (tool results, summaries, `usage` entries)
    NonEmptyObject,
}

/// Where a type's usage sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageAt {
    /// the type carries none
    Nowhere,
    /// `message.usage`, as the message's role says ([`RoleRow::usage`])
    Message,
    /// the entry's own `usage`
    Entry(Carries),
}

/// One entry type: what it is to the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeRow {
    pub name: &'static str,
    pub context: Context,
    pub usage: UsageAt,
}

impl TypeRow {
    /// Summarization work (Pi's compaction and branch summaries): the fleet's summary sums.
    pub fn is_summary(&self) -> bool {
        matches!(
            self.context,
            Context::BranchSummary | Context::CompactionSummary
        )
    }
    /// The row's `usage` may carry a usage (a candidate of the usage sums).
    pub fn may_carry_usage(&self) -> bool {
        self.usage != UsageAt::Nowhere
    }
}

const fn row(name: &'static str, context: Context, usage: UsageAt) -> TypeRow {
    TypeRow {
        name,
        context,
        usage,
    }
}

const NOTHING: UsageAt = UsageAt::Nowhere;
const SUMMED: UsageAt = UsageAt::Entry(Carries::NonEmptyObject);

/// The row of each fixed type code (`TYPE_NAMES[code]`).
pub const TYPE_ROWS: [TypeRow; TYPE_NAMES.len()] = [
    row("", Context::Undecided, NOTHING), // T_NONE: a type that is not a string
    row("session", Context::Nothing, NOTHING),
    row("message", Context::Message, UsageAt::Message),
    row("model_change", Context::Nothing, NOTHING),
    row("thinking_level_change", Context::Nothing, NOTHING),
    row("compaction", Context::CompactionSummary, SUMMED),
    row("branch_summary", Context::BranchSummary, SUMMED),
    row("custom", Context::Nothing, NOTHING),
    row("custom_message", Context::CustomMessage, NOTHING),
    row("label", Context::Nothing, NOTHING),
    row("session_info", Context::Nothing, NOTHING),
    row("context_edit", Context::ContextEdit, NOTHING),
    row("usage", Context::Nothing, SUMMED),
];

/// The row of a type the core does not know.
pub const UNDECIDED_TYPE: TypeRow = row("", Context::Undecided, NOTHING);

/// The row of type code `code` (an index record's `etype`).
#[inline]
pub fn type_row(code: u16) -> TypeRow {
    match TYPE_ROWS.get(code as usize) {
        Some(r) if code != T_NONE => *r,
        _ => UNDECIDED_TYPE,
    }
}

/// The row of the type named `name` (what a raw line's `type` says).
pub fn type_row_of_name(name: &str) -> TypeRow {
    TYPE_ROWS
        .iter()
        .skip(1)
        .find(|r| r.name == name)
        .copied()
        .unwrap_or(UNDECIDED_TYPE)
}

/// What a `message` entry's role is to the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// decided here: whether the message may start the kept region of a compaction (Pi
    /// `findValidCutPoints`) and whether it opens a turn (`findTurnStartIndex`)
    Known { cut_point: bool, turn_start: bool },
    /// the core leaves the message to the Python rules
    Undecided,
}

/// One message role: what a `message` entry of it is to the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleRow {
    pub name: &'static str,
    pub role: Role,
    /// which `message.usage` it carries
    pub usage: Carries,
}

const fn role(name: &'static str, cut_point: bool, turn_start: bool, usage: Carries) -> RoleRow {
    RoleRow {
        name,
        role: Role::Known {
            cut_point,
            turn_start,
        },
        usage,
    }
}

/// The row of each fixed role code (`ROLE_NAMES[code]`).
pub const ROLE_ROWS: [RoleRow; ROLE_NAMES.len()] = [
    // 0: `role` missing or not a string
    RoleRow {
        name: "",
        role: Role::Undecided,
        usage: Carries::Never,
    },
    role("user", true, true, Carries::Never),
    role("assistant", true, false, Carries::Object),
    role("toolResult", false, false, Carries::NonEmptyObject),
    role("bashExecution", true, true, Carries::Never),
    role("custom", true, true, Carries::Never),
    role("branchSummary", true, true, Carries::Never),
    role("compactionSummary", true, true, Carries::Never),
    role("system", false, false, Carries::Never),
    // v2's role: the index reads it as `custom` in a v2 file (Pi `migrateV2ToV3`); in a v3
    // file Pi's rules have no case for it, and the Python rules decide
    RoleRow {
        name: "hookMessage",
        role: Role::Undecided,
        usage: Carries::Never,
    },
];

/// The row of a string role past the fixed names: no cut point, no turn, no usage.
pub const OTHER_ROLE: RoleRow = role("", false, false, Carries::Never);

/// The row of role code `code` (an index record's `role`; 0: not a string or no role).
#[inline]
pub fn role_row(code: u16) -> RoleRow {
    ROLE_ROWS.get(code as usize).copied().unwrap_or(OTHER_ROLE)
}

/// The row of the role named `name` (what a raw line's `message.role` says).
pub fn role_row_of_name(name: &[u8]) -> RoleRow {
    ROLE_ROWS
        .iter()
        .skip(1)
        .find(|r| r.name.as_bytes() == name)
        .copied()
        .unwrap_or(OTHER_ROLE)
}

/// What a `usage` value is, as far as carrying it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Missing,
    /// `null`, a number, a string, an array, a boolean
    NotObject,
    EmptyObject,
    Object,
}

impl Shape {
    pub fn of_value(v: Option<&serde_json::Value>) -> Shape {
        match v {
            None => Shape::Missing,
            Some(serde_json::Value::Object(m)) if m.is_empty() => Shape::EmptyObject,
            Some(serde_json::Value::Object(_)) => Shape::Object,
            Some(_) => Shape::NotObject,
        }
    }
}

impl Carries {
    /// Whether a usage of shape `s` is carried.
    pub fn carries(self, s: Shape) -> bool {
        match self {
            Carries::Never => false,
            Carries::Object => matches!(s, Shape::Object | Shape::EmptyObject),
            Carries::NonEmptyObject => s == Shape::Object,
        }
    }
}

/// Which usage an entry carries (`sessiontree.usage._carries_usage`).
///
/// Its type's row, the role of its message (for `message` entries: None when `message` is not an
/// object or its role is not a string), and the shapes of `message.usage` and of its own `usage`.
/// `Some(true)` for `message.usage`, `Some(false)` for the entry's `usage`, None for none.
pub fn carried_usage(
    t: TypeRow,
    role: Option<RoleRow>,
    message_usage: Shape,
    entry_usage: Shape,
) -> Option<bool> {
    match t.usage {
        UsageAt::Nowhere => None,
        UsageAt::Message => role?.usage.carries(message_usage).then_some(true),
        UsageAt::Entry(c) => c.carries(entry_usage).then_some(false),
    }
}

const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn rows_name_the_codes() -> bool {
    let mut i = 0;
    while i < TYPE_NAMES.len() {
        if !same_str(TYPE_ROWS[i].name, TYPE_NAMES[i]) {
            return false;
        }
        i += 1;
    }
    let mut i = 0;
    while i < ROLE_NAMES.len() {
        if !same_str(ROLE_ROWS[i].name, ROLE_NAMES[i]) {
            return false;
        }
        i += 1;
    }
    true
}

// Each row sits at the code of its name (the lengths are tied by the tables' types).
const _: () = assert!(
    rows_name_the_codes(),
    "a projection row is not at its name's code"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{R_OTHER, T_CONTEXT_EDIT, T_MESSAGE, T_OTHER};

    #[test]
    fn unknown_codes_are_undecided() {
        assert_eq!(type_row(T_NONE).context, Context::Undecided);
        assert_eq!(type_row(T_OTHER).context, Context::Undecided);
        assert_eq!(
            type_row(TYPE_NAMES.len() as u16).context,
            Context::Undecided
        );
        assert_eq!(type_row_of_name("x_future").context, Context::Undecided);
        assert_eq!(type_row_of_name("").context, Context::Undecided);
        assert_eq!(type_row(T_MESSAGE).context, Context::Message);
        assert_eq!(type_row(T_CONTEXT_EDIT).context, Context::ContextEdit);
        assert_eq!(role_row(R_OTHER), OTHER_ROLE);
        assert_eq!(role_row(0).role, Role::Undecided);
        assert_eq!(role_row_of_name(b"weird"), OTHER_ROLE);
        for (code, r) in TYPE_ROWS.iter().enumerate().skip(1) {
            assert_eq!(type_row_of_name(r.name), *r);
            assert_eq!(type_row(code as u16), *r);
        }
        for (code, r) in ROLE_ROWS.iter().enumerate().skip(1) {
            assert_eq!(role_row_of_name(r.name.as_bytes()), *r);
            assert_eq!(role_row(code as u16), *r);
        }
    }

    #[test]
    fn which_usage_is_carried() {
        let msg = type_row(T_MESSAGE);
        let asst = Some(role_row_of_name(b"assistant"));
        let tool = Some(role_row_of_name(b"toolResult"));
        let user = Some(role_row_of_name(b"user"));
        use Shape::*;
        assert_eq!(carried_usage(msg, asst, EmptyObject, Missing), Some(true));
        assert_eq!(carried_usage(msg, asst, NotObject, Object), None);
        assert_eq!(carried_usage(msg, tool, EmptyObject, Missing), None);
        assert_eq!(carried_usage(msg, tool, Object, Missing), Some(true));
        assert_eq!(carried_usage(msg, user, Object, Object), None);
        assert_eq!(carried_usage(msg, None, Object, Object), None);
        let usage = type_row_of_name("usage");
        assert_eq!(carried_usage(usage, None, Missing, Object), Some(false));
        assert_eq!(carried_usage(usage, asst, Object, EmptyObject), None);
        assert_eq!(
            carried_usage(type_row_of_name("custom"), None, Object, Object),
            None
        );
        assert_eq!(carried_usage(UNDECIDED_TYPE, asst, Object, Object), None);
    }

    /// The Python registry's rows (`python/sessiontree/entry_types.py`, `ENTRY_TYPES`).
    ///
    /// (name, contributes context messages, its usage is summed), in the table's order.
    fn python_registry() -> Vec<(String, bool, bool)> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/python/sessiontree/entry_types.py"
        );
        let text = std::fs::read_to_string(path).expect("the registry");
        let start = text.find("ENTRY_TYPES: tuple").expect("ENTRY_TYPES");
        let end = start + text[start..].find("\n)\n").expect("its end");
        text[start..end]
            .split("EntryType(")
            .skip(1)
            .map(|row| {
                let name = row.split('"').nth(1).expect("a name").to_string();
                let flag = |k: &str| {
                    let at = row.find(&format!("{k}=")).expect(k) + k.len() + 1;
                    row[at..].starts_with("True")
                };
                (name, flag("context"), flag("usage"))
            })
            .collect()
    }

    /// One well-formed entry of each type (the fields Pi writes; every one also carries an
    /// entry-level `usage`, which only the usage types may count).
    fn example(name: &str) -> String {
        const U: &str =
            r#"{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.5}}"#;
        let body = match name {
            "message" => format!(
                r#""message":{{"role":"assistant","content":[{{"type":"text","text":"hi there"}}],"usage":{U}}}"#
            ),
            "model_change" => r#""provider":"p","modelId":"m""#.into(),
            "thinking_level_change" => r#""thinkingLevel":"high""#.into(),
            "compaction" => r#""summary":"sum","firstKeptEntryId":"u","tokensBefore":5"#.into(),
            "branch_summary" => r#""fromId":"u","summary":"sum""#.into(),
            "custom" => r#""customType":"ext","data":{}"#.into(),
            "custom_message" => r#""customType":"ext","content":"text","display":true"#.into(),
            "label" => r#""targetId":"u","label":"L""#.into(),
            "session_info" => r#""name":"n""#.into(),
            "context_edit" => r#""targetId":"u","replacement":null"#.into(),
            "usage" => String::new(),
            other => panic!("no example entry for the registry's type {other:?}: add one here"),
        };
        let sep = if body.is_empty() { "" } else { "," };
        format!(
            r#"{{"type":"{name}","id":"x","parentId":"u","timestamp":"2026-01-01T00:00:01.000Z",{body}{sep}"usage":{U}}}"#
        )
    }

    fn store_of(line: &str) -> crate::store::Store {
        let mut data = Vec::new();
        data.extend_from_slice(b"{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/p\"}\n");
        data.extend_from_slice(b"{\"type\":\"message\",\"id\":\"u\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"message\":{\"role\":\"user\",\"content\":\"hello\"}}\n");
        data.extend_from_slice(line.as_bytes());
        data.push(b'\n');
        crate::store::Store::from_bytes(data, false)
    }

    /// Every name of `TYPE_NAMES` is the registry's (in order), its row says what the
    /// registry says, and the cut-point search, the digest and the fleet rows handle an entry
    /// of it as the row says. A type added to the registry without its name and row here, or
    /// a row that disagrees with it, fails this test.
    #[test]
    fn every_type_is_handled_as_the_python_registry_says() {
        let registry = python_registry();
        let names: Vec<&str> = registry.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(TYPE_NAMES[..2], ["", "session"]);
        assert_eq!(&TYPE_NAMES[2..], &names[..]);
        for (name, context, usage) in &registry {
            let row = type_row_of_name(name);
            let makes_message = matches!(
                row.context,
                Context::Message
                    | Context::CustomMessage
                    | Context::BranchSummary
                    | Context::CompactionSummary
            );
            assert_eq!(makes_message, *context, "{name}: context");
            assert_eq!(row.may_carry_usage(), *usage, "{name}: usage");
            let line = example(name);
            let st = store_of(&line);
            assert_eq!(st.index.recs.len(), 2, "{name}");
            // the cut-point search
            let info = crate::cut::entry_info(&st, 1);
            match row.context {
                Context::ContextEdit | Context::Undecided => assert_eq!(info, None, "{name}"),
                Context::CompactionSummary => assert!(info.unwrap().compaction, "{name}"),
                _ => {
                    let info = info.expect(name);
                    assert_eq!(info.has_message, *context, "{name}");
                    assert_eq!(info.tokens > 0, *context, "{name}");
                }
            }
            // the HTML digest
            let d = crate::digest::digest(line.as_bytes(), 80);
            assert_eq!(d.tokens.is_some(), *context, "{name}: digest estimate");
            assert_eq!(d.usage.is_some(), *usage, "{name}: digest usage");
            // the fleet rows' usage sums
            let rows = crate::rows::session_rows(&st, true).unwrap();
            assert!(rows.undecided.is_empty(), "{name}");
            let output = rows.totals.unwrap()[1];
            assert_eq!(output == Some(2.0), *usage, "{name}: fleet usage");
            assert_eq!(rows.usage[1].is_some(), *usage, "{name}: a usage candidate");
            let summary = rows.summary_totals.unwrap()[1] == Some(2.0);
            assert_eq!(summary, row.is_summary(), "{name}: summary sums");
        }
        // a type the core does not know: undecided for the search, nothing for the others
        for line in [
            r#"{"type":"x_future","id":"x","parentId":"u","timestamp":"2026-01-01T00:00:01.000Z","summary":"s","usage":{"output":2}}"#,
            r#"{"type":7,"id":"x","parentId":"u","timestamp":"2026-01-01T00:00:01.000Z","summary":"s","usage":{"output":2}}"#,
        ] {
            let st = store_of(line);
            assert_eq!(crate::cut::entry_info(&st, 1), None, "{line}");
            let d = crate::digest::digest(line.as_bytes(), 80);
            assert!(d.tokens.is_none() && d.usage.is_none(), "{line}");
            let rows = crate::rows::session_rows(&st, true).unwrap();
            assert_eq!(rows.totals.unwrap()[1], Some(0.0), "{line}");
            assert_eq!(crate::rows::context_estimate(&st, Some(1)), None, "{line}");
        }
    }

    /// Every name of `ROLE_NAMES` is handled by the cut-point search and the fleet rows as its
    /// row says (an undecided role leaves the search to Python).
    #[test]
    fn every_role_is_handled_as_its_row_says() {
        for row in ROLE_ROWS.iter().skip(1).chain([&OTHER_ROLE]) {
            let name = if row.name.is_empty() {
                "x_role"
            } else {
                row.name
            };
            let content = if name == "assistant" {
                r#"[{"type":"text","text":"text"}]"#
            } else {
                r#""text""#
            };
            let line = format!(
                r#"{{"type":"message","id":"x","parentId":"u","timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"{name}","content":{content},"command":"ls","output":"o","summary":"s","usage":{{"output":2}}}}}}"#
            );
            let st = store_of(&line);
            let info = crate::cut::entry_info(&st, 1);
            match row.role {
                Role::Undecided => assert_eq!(info, None, "{name}"),
                Role::Known {
                    cut_point,
                    turn_start,
                } => {
                    let info = info.expect(name);
                    assert_eq!((info.cut_point, info.turn_start), (cut_point, turn_start));
                }
            }
            let rows = crate::rows::session_rows(&st, true).unwrap();
            let carried = rows.totals.unwrap()[1] == Some(2.0);
            assert_eq!(carried, row.usage != Carries::Never, "{name}: fleet usage");
            let d = crate::digest::digest(line.as_bytes(), 80);
            assert_eq!(d.usage.is_some(), row.usage != Carries::Never, "{name}");
        }
    }
}
