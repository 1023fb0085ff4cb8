//! Read-only views of the index for callers outside it (the binding, the digest, the walks'
//! errors).
//!
//! One entry's facts, and columns over many entries. Outside `index/`, a record's fields are read
//! here and nowhere else; every view checks its positions first.

use super::{Index, KID_NULL};
use crate::walk::{Cycle, PreorderError};

/// An entry position that names no entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfRange(pub usize);

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "entry index {} out of range", self.0)
    }
}
impl std::error::Error for OutOfRange {}

/// One entry's facts from its record: strings only where the JSON value is a string.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EntryView<'a> {
    pub id: Option<&'a str>,
    pub parent_id: Option<&'a str>,
    /// `parentId` is JSON `null` (a root by Pi's rule)
    pub parent_is_null: bool,
    pub type_name: Option<&'a str>,
    /// `message.role` of a message entry (v2 `hookMessage` reads `custom`)
    pub role: Option<&'a str>,
    /// the codes of `type_name` and `role`. Below the lengths of `TYPE_NAMES` and `ROLE_NAMES`
    /// (`codes.rs`), a fixed name
    pub type_code: u16,
    pub role_code: u16,
    /// 1-based line number
    pub line: u32,
    /// byte offset of the line's JSON text
    pub offset: u64,
    /// byte length of the line's JSON text (without `\r\n`)
    pub len: u32,
    /// position among parsed values, the header being 0 (Pi's `fileEntries` index)
    pub vpos: u32,
    /// `new Date(timestamp).getTime()`, NaN when invalid
    pub ts: f64,
}

/// What listings show of many entries, one column per fact (see [`Index::columns`]).
#[derive(Debug, Default, PartialEq)]
pub struct EntryColumns<'a> {
    pub ids: Vec<Option<&'a str>>,
    pub parent_ids: Vec<Option<&'a str>>,
    pub parent_is_null: Vec<bool>,
    pub types: Vec<Option<&'a str>>,
    pub roles: Vec<Option<&'a str>>,
    pub lines: Vec<u32>,
    pub offsets: Vec<u64>,
}

/// The columns of a [`EntryColumns`] in their order, for a caller that hands them on as one tuple.
pub type ColumnParts<'a> = (
    Vec<Option<&'a str>>,
    Vec<Option<&'a str>>,
    Vec<bool>,
    Vec<Option<&'a str>>,
    Vec<Option<&'a str>>,
    Vec<u32>,
    Vec<u64>,
);

impl<'a> EntryColumns<'a> {
    /// (ids, parent ids, parentId is null, types, roles, lines, offsets)
    pub fn into_parts(self) -> ColumnParts<'a> {
        let c = self;
        (
            c.ids,
            c.parent_ids,
            c.parent_is_null,
            c.types,
            c.roles,
            c.lines,
            c.offsets,
        )
    }
}

impl super::HeaderState {
    /// `("empty" | "valid" | "invalid", reason)`: the state as a code.
    pub fn parts(&self) -> (&'static str, Option<&str>) {
        match self {
            super::HeaderState::Empty => ("empty", None),
            super::HeaderState::Valid => ("valid", None),
            super::HeaderState::Invalid(r) => ("invalid", Some(r)),
        }
    }
}

impl crate::saved::CacheState {
    /// What the saved index did at open as a code.
    ///
    /// `("off", 0, "")`, `("warm", covered bytes, "")`, `("saved", 0, why cold)` or `("cold", 0,
    /// why cold)`.
    pub fn parts(&self) -> (&'static str, u64, &str) {
        use crate::saved::CacheState;
        match self {
            CacheState::Off => ("off", 0, ""),
            CacheState::Warm { covered } => ("warm", *covered, ""),
            CacheState::Cold { why, saved: true } => ("saved", 0, why),
            CacheState::Cold { why, saved: false } => ("cold", 0, why),
        }
    }
}

/// A walk's error with the ids it names resolved: what `SessionCycleError` says.
#[derive(Debug, Clone, PartialEq)]
pub enum WalkError {
    /// a `parentId` cycle: the message and the ids of its entries (None: not a string)
    Cycle(String, Vec<Option<String>>),
    /// a pre-order walk went past this many nodes
    TooLarge(usize),
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Cycle(m, _) => f.write_str(m),
            WalkError::TooLarge(n) => write!(
                f,
                "tree walk exceeded {n} nodes (duplicate ids repeat whole subtrees)"
            ),
        }
    }
}
impl std::error::Error for WalkError {}

impl Index {
    /// How many entries (file order positions `0..len`).
    pub fn len(&self) -> usize {
        self.recs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    /// `Ok` when `i` names an entry.
    pub fn check_pos(&self, i: usize) -> Result<(), OutOfRange> {
        if i < self.recs.len() {
            Ok(())
        } else {
            Err(OutOfRange(i))
        }
    }

    /// Every position of `idx` names an entry (else the first that does not).
    pub fn check_all(&self, idx: impl IntoIterator<Item = usize>) -> Result<(), OutOfRange> {
        idx.into_iter().try_for_each(|i| self.check_pos(i))
    }

    /// The facts of entry `i`.
    pub fn view(&self, i: usize) -> Result<EntryView<'_>, OutOfRange> {
        let r = self.recs.get(i).ok_or(OutOfRange(i))?;
        Ok(EntryView {
            id: self.key_string(r.id),
            parent_id: self.key_string(r.parent),
            parent_is_null: r.parent == KID_NULL,
            type_name: (r.etype != 0).then(|| self.type_name(r.etype)),
            role: (r.role != 0).then(|| self.role_name(r.role)),
            type_code: r.etype,
            role_code: r.role,
            line: self.line_of(i as u32),
            offset: r.offset(),
            len: r.len,
            vpos: self.vpos(i as u32),
            ts: r.ts(),
        })
    }

    /// The entry whose line starts at byte `offset`, or None. Entries are in file order, so their
    /// offsets increase.
    pub fn entry_at_offset(&self, offset: u64) -> Option<usize> {
        self.recs.binary_search_by_key(&offset, |r| r.offset()).ok()
    }

    /// Entry `i`'s id when it names an entry and the id is a string.
    pub fn id_at(&self, i: usize) -> Option<&str> {
        self.recs.get(i).and_then(|r| self.key_string(r.id))
    }

    /// The string ids of entries `idx` (None: not a string).
    pub fn ids_of(&self, idx: &[usize]) -> Result<Vec<Option<&str>>, OutOfRange> {
        self.check_all(idx.iter().copied())?;
        Ok(idx.iter().map(|&i| self.id_at(i)).collect())
    }

    /// The type names of entries `idx` (None: not a string).
    pub fn types_of(&self, idx: &[usize]) -> Result<Vec<Option<&str>>, OutOfRange> {
        idx.iter().map(|&i| Ok(self.view(i)?.type_name)).collect()
    }

    /// What listings show of entries `idx`, as columns.
    pub fn columns(&self, idx: &[usize]) -> Result<EntryColumns<'_>, OutOfRange> {
        self.check_all(idx.iter().copied())?;
        let mut c = EntryColumns::default();
        for &i in idx {
            let v = self.view(i)?;
            c.ids.push(v.id);
            c.parent_ids.push(v.parent_id);
            c.parent_is_null.push(v.parent_is_null);
            c.types.push(v.type_name);
            c.roles.push(v.role);
            c.lines.push(v.line);
            c.offsets.push(v.offset);
        }
        Ok(c)
    }

    /// Byte lengths and times (`new Date(timestamp).getTime()`, None where it is NaN) of
    /// entries `idx`.
    pub fn sizes_and_times(
        &self,
        idx: &[usize],
    ) -> Result<(Vec<u32>, Vec<Option<f64>>), OutOfRange> {
        self.check_all(idx.iter().copied())?;
        Ok(idx
            .iter()
            .map(|&i| {
                let r = &self.recs.at(i);
                (r.len, (!r.ts().is_nan()).then_some(r.ts()))
            })
            .unzip())
    }

    /// A cycle as `SessionCycleError` names it: the message and the ids round the loop.
    pub fn cycle_error(&self, c: Cycle) -> WalkError {
        let ids: Vec<Option<String>> =
            c.0.iter()
                .map(|&i| self.id_at(i as usize).map(str::to_string))
                .collect();
        let shown: Vec<&str> = ids
            .iter()
            .map(|s| s.as_deref().unwrap_or("<non-string id>"))
            .collect();
        WalkError::Cycle(
            format!("parentId cycle through entries: {}", shown.join(" -> ")),
            ids,
        )
    }

    /// A pre-order walk's error with its ids resolved.
    pub fn walk_error(&self, e: PreorderError) -> WalkError {
        match e {
            PreorderError::Cycle(c) => self.cycle_error(Cycle(c)),
            PreorderError::TooLarge(n) => WalkError::TooLarge(n),
        }
    }
}

/// The labels and the leaf with their ids as strings (what the binding hands out).
impl Index {
    /// Resolved labels in Pi's `Map` order: (target id if a string, label entry index).
    pub fn label_ids(&self) -> Vec<(Option<&str>, u32)> {
        self.labels()
            .into_iter()
            .map(|(t, e)| (self.key_string(t), e))
            .collect()
    }

    /// The leaf's id when it is a string (None: the leaf is null, or its id is not a string).
    pub fn leaf_id(&self) -> Option<&str> {
        match self.leaf {
            super::Leaf::Null => None,
            super::Leaf::Key(k) => self.key_string(k),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::store::Store;

    fn store(text: &str) -> Store {
        Store::from_bytes(text.as_bytes().to_vec(), false)
    }

    #[test]
    fn views_agree_with_columns_and_check_positions() {
        let st = store(concat!(
            "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2025-01-01T00:00:00Z\",\"cwd\":\"/\"}\n",
            "{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2025-01-01T00:00:01Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
            "{\"type\":7,\"id\":3,\"parentId\":\"a\",\"timestamp\":\"nope\"}\n",
        ));
        let ix = &st.index;
        let a = ix.view(0).unwrap();
        assert_eq!(
            (a.id, a.parent_id, a.parent_is_null),
            (Some("a"), None, true)
        );
        assert_eq!(
            (a.type_name, a.role, a.line),
            (Some("message"), Some("user"), 2)
        );
        assert_eq!(a.ts, 1735689601000.0);
        let b = ix.view(1).unwrap();
        assert_eq!(
            (b.id, b.parent_id, b.parent_is_null),
            (None, Some("a"), false)
        );
        assert_eq!((b.type_name, b.role, b.line), (None, None, 3));
        let c = ix.columns(&[1, 0]).unwrap();
        assert_eq!(c.ids, vec![None, Some("a")]);
        assert_eq!(c.offsets, vec![b.offset, a.offset]);
        assert_eq!(ix.view(2), Err(super::OutOfRange(2)));
        assert_eq!(
            ix.columns(&[0, 5]).unwrap_err().to_string(),
            "entry index 5 out of range"
        );
        let (sizes, times) = ix.sizes_and_times(&[0, 1]).unwrap();
        assert_eq!(sizes, vec![a.len, b.len]);
        assert_eq!(times, vec![Some(1735689601000.0), None]);
    }
}
