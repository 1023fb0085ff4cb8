//! The fleet's columns (`sessiontree.fleet`).
//!
//! A whole session's row facts from `rows.rs`, and its per-entry table as Arrow-layout buffers
//! (values, or offsets and data; validity bits), assembled here so that the binding only hands them
//! over.
//!
//! The per-entry columns are named by the caller, in the order it wants them:
//! `sessiontree.fleet.columns.ENTRY_COLUMNS` is the one list of the entry table's columns, and
//! those it marks `core` are computed here; [`ENTRY_COLUMNS`] are the names this module knows
//! (`tests/fleet/test_columns.py` checks the two agree).

use crate::index::{OutOfRange, R_OTHER, T_MESSAGE, T_OTHER};
use crate::rows::Counts;
use crate::store::{Store, StoreError};

/// The per-entry columns the core computes.
///
/// `entry_id`, `parent_id`, `type`, `role`, `label` (strings); `timestamp` (ms), `line`, `offset`,
/// `bytes` (int64); `tokens` and the entry's usage (float64).
pub const ENTRY_COLUMNS: [&str; 15] = [
    "entry_id",
    "parent_id",
    "type",
    "role",
    "label",
    "timestamp",
    "line",
    "offset",
    "bytes",
    "tokens",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
];

/// Why the columns could not be made.
#[derive(Debug)]
pub enum ColumnError {
    Store(StoreError),
    /// the leaf names no entry
    Range(OutOfRange),
    /// a column name the core does not compute, or one asked for twice
    Unknown(String),
    /// a string column of 2 GiB or more (Arrow's 32-bit offsets)
    TooLong,
}

impl std::fmt::Display for ColumnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ColumnError::Store(e) => write!(f, "{e}"),
            ColumnError::Range(e) => write!(f, "{e}"),
            ColumnError::Unknown(name) => write!(
                f,
                "no per-entry column {name:?} (the core computes, once each: {})",
                ENTRY_COLUMNS.join(", ")
            ),
            ColumnError::TooLong => write!(f, "a string column over 2 GiB"),
        }
    }
}
impl std::error::Error for ColumnError {}

impl From<StoreError> for ColumnError {
    fn from(e: StoreError) -> Self {
        ColumnError::Store(e)
    }
}
impl From<OutOfRange> for ColumnError {
    fn from(e: OutOfRange) -> Self {
        ColumnError::Range(e)
    }
}

/// Arrow-layout buffers of one column.
///
/// Values (little-endian), or for strings int32 offsets in `values` and the bytes in `data`; the
/// validity bitmap (bit `i % 8` of byte `i / 8`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ArrowCol {
    pub values: Vec<u8>,
    pub data: Vec<u8>,
    valid: Vec<u8>,
    /// how many values are null
    pub nulls: usize,
    n: usize,
}

impl ArrowCol {
    fn bit(&mut self, ok: bool) {
        if self.n % 8 == 0 {
            self.valid.push(0);
        }
        if ok {
            *self.valid.last_mut().expect("a byte per 8 values") |= 1 << (self.n % 8);
        } else {
            self.nulls += 1;
        }
        self.n += 1;
    }
    pub fn push_f64(&mut self, v: Option<f64>) {
        self.values
            .extend_from_slice(&v.unwrap_or(0.0).to_le_bytes());
        self.bit(v.is_some());
    }
    pub fn push_i64(&mut self, v: Option<i64>) {
        self.values.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
        self.bit(v.is_some());
    }
    pub fn push_str(&mut self, v: Option<&str>) -> Result<(), ColumnError> {
        if self.n == 0 {
            self.values.extend_from_slice(&0i32.to_le_bytes());
        }
        if let Some(s) = v {
            self.data.extend_from_slice(s.as_bytes());
        }
        let end = i32::try_from(self.data.len()).map_err(|_| ColumnError::TooLong)?;
        self.values.extend_from_slice(&end.to_le_bytes());
        self.bit(v.is_some());
        Ok(())
    }
    /// The validity bitmap, None when no value is null (Arrow's "all valid").
    pub fn validity(&self) -> Option<&[u8]> {
        (self.nulls > 0).then_some(&self.valid[..])
    }
}

/// Bits of a boolean column (Arrow order: bit `i % 8` of byte `i / 8`).
pub fn bool_bits(flags: impl Iterator<Item = bool>, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n.div_ceil(8)];
    for (i, f) in flags.enumerate() {
        if f {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// A session's per-entry table.
#[derive(Debug, Default)]
pub struct EntryTable {
    /// entries (rows)
    pub n: usize,
    /// the columns asked for, in that order
    pub columns: Vec<(&'static str, ArrowCol)>,
    /// the `on_active_path` bits (entries root to the leaf)
    pub on_active_path: Vec<u8>,
    /// positions whose `tokens` the exact (Python) rules decide (`Session.entry_metrics`)
    pub tokens_undecided: Vec<u32>,
}

/// What `sessiontree.fleet` needs of a session beyond the index getters (see `rows.rs` for
/// each rule).
#[derive(Debug, Default)]
pub struct SessionColumns {
    /// entries whose usage or tool calls the Python rules decide
    pub undecided: Vec<u32>,
    /// usage sums over every entry / summaries only.
    ///
    /// Input, output, cacheRead, cacheWrite, total, cost (None when undecided)
    pub totals: Option<[Option<f64>; 6]>,
    pub summary_totals: Option<[Option<f64>; 6]>,
    pub tool_calls: u64,
    /// Pi's `modified` (ms), or the entry where the core stopped and Python decides
    pub last_activity: Option<f64>,
    pub last_activity_undecided: Option<u32>,
    /// entries root to the leaf (Some(0) without a leaf; None: a cycle)
    pub path_length: Option<usize>,
    /// (tokens, messages) of Pi's projected context estimate at the leaf, or None
    pub context: Option<(f64, u64)>,
    pub counts: Counts,
    /// the per-entry table, when columns were asked for
    pub entries: Option<EntryTable>,
}

/// The row facts of session `st` with the context leaf `leaf`. With `entry_columns`, also its
/// per-entry table of those columns (names of [`ENTRY_COLUMNS`], in the order given). `labels`:
/// (entry id, label) pairs for the `label` column. The line scans run on every core.
pub fn session_columns(
    st: &Store,
    leaf: Option<usize>,
    entry_columns: Option<&[String]>,
    labels: &[(String, String)],
) -> Result<SessionColumns, ColumnError> {
    st.check_live()?;
    if let Some(l) = leaf {
        st.index.check_pos(l)?;
    }
    let want = match entry_columns {
        Some(names) => Some(column_slots(names)?),
        None => None,
    };
    let rows = crate::rows::session_rows(st, want.is_some())?;
    let last = crate::rows::last_activity(st)?;
    let path = leaf.map(|l| st.index.branch(l as u32));
    let mut out = SessionColumns {
        undecided: rows.undecided.clone(),
        totals: rows.totals,
        summary_totals: rows.summary_totals,
        tool_calls: rows.tool_calls,
        last_activity: last.ok().flatten(),
        last_activity_undecided: last.err(),
        // no leaf: an empty path; a cycle: no length
        path_length: match &path {
            None => Some(0),
            Some(p) => p.as_ref().ok().map(Vec::len),
        },
        context: crate::rows::context_estimate(st, leaf.map(|l| l as u32))
            .map(|(t, n)| (t.to_f64(), n)),
        counts: crate::rows::counts(st),
        entries: None,
    };
    if let Some(want) = want {
        let on_path = match &path {
            Some(Ok(p)) => p.as_slice(),
            _ => &[],
        };
        out.entries = Some(entry_table(st, &rows.usage, on_path, labels, &want)?);
    }
    Ok(out)
}

/// Positions in [`ENTRY_COLUMNS`] of `names` (each known, none twice).
fn column_slots(names: &[String]) -> Result<Vec<usize>, ColumnError> {
    let mut seen = [false; ENTRY_COLUMNS.len()];
    names
        .iter()
        .map(|name| match ENTRY_COLUMNS.iter().position(|c| c == name) {
            Some(j) if !seen[j] => {
                seen[j] = true;
                Ok(j)
            }
            _ => Err(ColumnError::Unknown(name.clone())),
        })
        .collect()
}

/// The per-entry table.
///
/// Every entry's columns from its view (names past the full names tables read back from its line),
/// `usage` from `rows.rs`, the token estimates of [`crate::rows::entry_tokens`] (when `tokens` is
/// asked for).
fn entry_table(
    st: &Store,
    usage: &[Option<crate::rows::EntryUsage>],
    on_path: &[u32],
    labels: &[(String, String)],
    want: &[usize],
) -> Result<EntryTable, ColumnError> {
    let ix = &st.index;
    let n = ix.len();
    let mut on = vec![false; n];
    for &i in on_path {
        on[i as usize] = true;
    }
    let label_of: std::collections::HashMap<&str, &str> = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut cols: Vec<ArrowCol> = vec![ArrowCol::default(); ENTRY_COLUMNS.len()];
    let mut tokens_undecided: Vec<u32> = Vec::new();
    let tokens_of = if want.contains(&9) {
        crate::rows::entry_tokens(st)
    } else {
        vec![Some(0); n]
    };
    for (i, tok) in tokens_of.iter().enumerate() {
        let v = ix.view(i)?;
        // a name past the full names table is read back from the entry's line
        let (t_other, r_other) = if v.type_code == T_OTHER || v.role_code == R_OTHER {
            (st.entry_type(i)?, st.entry_role(i)?)
        } else {
            (None, None)
        };
        let tname = match v.type_code {
            T_OTHER => t_other.as_deref(),
            _ => v.type_name,
        };
        let role = match v.role_code {
            R_OTHER => r_other.as_deref(),
            _ if v.type_code == T_MESSAGE => v.role,
            _ => None,
        };
        cols[0].push_str(v.id)?;
        cols[1].push_str(v.parent_id)?;
        cols[2].push_str(tname)?;
        cols[3].push_str(role)?;
        cols[4].push_str(v.id.and_then(|k| label_of.get(k).copied()))?;
        // `new Date(...)` in JavaScript's range, as an integer of ms (TimeClip made it one)
        let ts = (v.ts.is_finite() && v.ts.abs() <= 8.64e15).then_some(v.ts as i64);
        cols[5].push_i64(ts);
        cols[6].push_i64(Some(i64::from(v.line)));
        cols[7].push_i64(Some(v.offset as i64));
        cols[8].push_i64(Some(i64::from(v.len)));
        let tokens = tok.map(|t| t as f64);
        if tokens.is_none() {
            tokens_undecided.push(i as u32);
        }
        cols[9].push_f64(tokens);
        let u = usage.get(i).copied().flatten();
        for k in 0..5 {
            cols[10 + k].push_f64(u.and_then(|u| u[k]));
        }
    }
    Ok(EntryTable {
        n,
        columns: want
            .iter()
            .map(|&j| (ENTRY_COLUMNS[j], std::mem::take(&mut cols[j])))
            .collect(),
        on_active_path: bool_bits(on.into_iter(), n),
        tokens_undecided,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = concat!(
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2025-01-01T00:00:00Z\",\"cwd\":\"/\"}\n",
        "{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2025-01-01T00:00:01Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
        "{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\",\"timestamp\":\"nope\",\"message\":{\"role\":\"assistant\",\"content\":[],\"usage\":{\"input\":3,\"output\":4,\"cacheRead\":0,\"cacheWrite\":0,\"cost\":{\"total\":0.5}}}}\n",
        "{\"type\":\"label\",\"id\":\"c\",\"parentId\":\"b\",\"timestamp\":\"2025-01-01T00:00:03Z\",\"targetId\":\"a\",\"label\":\"x\"}\n",
    );

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn strings(c: &ArrowCol) -> Vec<Option<String>> {
        let off: Vec<usize> = c
            .values
            .chunks(4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()) as usize)
            .collect();
        (0..off.len() - 1)
            .map(|i| {
                let ok = c.validity().is_none_or(|v| v[i / 8] >> (i % 8) & 1 == 1);
                ok.then(|| String::from_utf8(c.data[off[i]..off[i + 1]].to_vec()).unwrap())
            })
            .collect()
    }

    #[test]
    fn columns_in_the_order_asked_with_nulls_and_bits() {
        let st = Store::from_bytes(TEXT.as_bytes().to_vec(), false);
        let labels = vec![("a".to_string(), "x".to_string())];
        let want = names(&["role", "entry_id", "timestamp", "label", "input_tokens"]);
        let got = session_columns(&st, Some(1), Some(&want), &labels).unwrap();
        assert_eq!(got.path_length, Some(2));
        assert_eq!(got.counts.messages, 2);
        let t = got.entries.unwrap();
        assert_eq!(t.n, 3);
        let order: Vec<&str> = t.columns.iter().map(|c| c.0).collect();
        assert_eq!(
            order,
            ["role", "entry_id", "timestamp", "label", "input_tokens"]
        );
        let s = |x: &str| Some(x.to_string());
        assert_eq!(
            strings(&t.columns[0].1),
            vec![s("user"), s("assistant"), None]
        );
        assert_eq!(strings(&t.columns[1].1), vec![s("a"), s("b"), s("c")]);
        assert_eq!(strings(&t.columns[3].1), vec![s("x"), None, None]);
        let ts = &t.columns[2].1;
        assert_eq!(ts.nulls, 1);
        assert_eq!(
            i64::from_le_bytes(ts.values[..8].try_into().unwrap()),
            1735689601000
        );
        let input = &t.columns[4].1;
        assert_eq!(
            f64::from_le_bytes(input.values[8..16].try_into().unwrap()),
            3.0
        );
        assert_eq!(t.on_active_path, vec![0b011]);
        assert!(t.tokens_undecided.is_empty());
    }

    #[test]
    fn unknown_or_repeated_names_and_a_bad_leaf_are_errors() {
        let st = Store::from_bytes(TEXT.as_bytes().to_vec(), false);
        for bad in [names(&["nope"]), names(&["line", "line"])] {
            let e = session_columns(&st, None, Some(&bad), &[]).unwrap_err();
            assert!(matches!(e, ColumnError::Unknown(_)), "{e}");
        }
        let e = session_columns(&st, Some(7), None, &[]).unwrap_err();
        assert!(matches!(e, ColumnError::Range(_)));
        let got = session_columns(&st, None, None, &[]).unwrap();
        assert!(got.entries.is_none());
        assert_eq!(got.path_length, Some(0));
    }

    #[test]
    fn bits_and_validity() {
        assert_eq!(
            bool_bits([true, false, true].into_iter(), 9),
            vec![0b101, 0]
        );
        let mut c = ArrowCol::default();
        c.push_i64(Some(1));
        assert_eq!(c.validity(), None);
        c.push_i64(None);
        assert_eq!(c.validity(), Some(&[0b01u8][..]));
    }
}
