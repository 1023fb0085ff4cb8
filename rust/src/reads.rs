//! What the binding's batch views ask of a [`Store`], one call each.
//!
//! An entry's facts and the listings' columns with the names past the full names tables read back
//! from the lines, the type names, sizes, times and token estimates of many entries, the lines
//! already in `JSON.stringify`'s form, the cut point. Every position is checked first (an
//! [`OutOfRange`]); a file changed under the index errs as its store does.
//!
//! Methods of `Store` kept out of `store.rs`, which holds the scan, the reads and the appends.

use crate::index::{EntryColumns, EntryView, OutOfRange, R_OTHER, T_OTHER};
use crate::store::{Store, StoreError};
use std::borrow::Cow;

/// A read of entries that failed: a position that names no entry, or the store's error.
#[derive(Debug)]
pub enum ReadError {
    Range(OutOfRange),
    Store(StoreError),
}

impl From<OutOfRange> for ReadError {
    fn from(e: OutOfRange) -> Self {
        ReadError::Range(e)
    }
}
impl From<StoreError> for ReadError {
    fn from(e: StoreError) -> Self {
        ReadError::Store(e)
    }
}

/// (byte lengths, times or None where `new Date` is NaN, token estimates) of many entries.
///
/// What `Session.entry_metrics` shows.
pub type Metrics = (Vec<u32>, Vec<Option<f64>>, Vec<Option<u64>>);

impl Store {
    /// The names of entry `i` that its view cannot give, read back from its line.
    ///
    /// `type` past the full names table ([`T_OTHER`]), `message.role` likewise ([`R_OTHER`]):
    /// (type, role), each None when its code is not "other" (or the line holds no string there).
    fn other_names(
        &self,
        i: usize,
        v: &EntryView<'_>,
    ) -> Result<(Option<String>, Option<String>), StoreError> {
        let t = (v.type_code == T_OTHER)
            .then(|| self.entry_type(i))
            .transpose()?;
        let r = (v.role_code == R_OTHER)
            .then(|| self.entry_role(i))
            .transpose()?;
        Ok((t.flatten(), r.flatten()))
    }

    /// `f` of entry `i`'s view with every name in it (what `Entry` shows: an `EntryRecord`).
    pub fn with_record<R>(
        &self,
        i: usize,
        f: impl FnOnce(EntryView<'_>) -> R,
    ) -> Result<R, ReadError> {
        let mut v = self.index.view(i)?;
        if v.type_code != T_OTHER && v.role_code != R_OTHER {
            return Ok(f(v));
        }
        let (t, r) = self.other_names(i, &v)?;
        if v.type_code == T_OTHER {
            v.type_name = t.as_deref();
        }
        if v.role_code == R_OTHER {
            v.role = r.as_deref();
        }
        Ok(f(v))
    }

    /// `f` of the columns of entries `idx` ([`crate::index::Index::columns`]) with every name
    /// in them.
    pub fn with_columns<R>(
        &self,
        idx: &[usize],
        f: impl FnOnce(EntryColumns<'_>) -> R,
    ) -> Result<R, ReadError> {
        let ix = &self.index;
        // names past the full names tables: read back from the entries' lines
        let mut others: Vec<(usize, Option<String>, Option<String>)> = Vec::new();
        if ix.names_overflowed() {
            for (k, &i) in idx.iter().enumerate() {
                let v = ix.view(i)?;
                if v.type_code == T_OTHER || v.role_code == R_OTHER {
                    let (t, r) = self.other_names(i, &v)?;
                    others.push((k, t, r));
                }
            }
        }
        let mut cols = ix.columns(idx)?;
        for (k, t, r) in &others {
            let v = ix.view(idx[*k])?;
            if v.type_code == T_OTHER {
                cols.types[*k] = t.as_deref();
            }
            if v.role_code == R_OTHER {
                cols.roles[*k] = r.as_deref();
            }
        }
        Ok(f(cols))
    }

    /// The type names of entries `idx` (None: not a string). Names past the full names table are
    /// read back from the lines.
    pub fn type_names(&self, idx: &[usize]) -> Result<Vec<Option<Cow<'_, str>>>, ReadError> {
        let ix = &self.index;
        let mut out: Vec<Option<Cow<'_, str>>> = ix
            .types_of(idx)?
            .into_iter()
            .map(|t| t.map(Cow::Borrowed))
            .collect();
        if ix.names_overflowed() {
            for (k, &i) in idx.iter().enumerate() {
                if ix.view(i)?.type_code == T_OTHER {
                    out[k] = self.entry_type(i)?.map(Cow::Owned);
                }
            }
        }
        Ok(out)
    }

    /// Calls `f(k, bytes)` with the line of each entry `idx[k]` the scan found stringify text.
    /// Each `k` in file order whose line already is `JSON.stringify(JSON.parse(line))`'s text
    /// ([`crate::index::Rec::stringify_form`] and [`crate::json::canon_rest`]); only the lines
    /// with the bit are read.
    pub fn with_stringify_lines(
        &self,
        idx: &[usize],
        mut f: impl FnMut(usize, &[u8]),
    ) -> Result<(), ReadError> {
        self.index.check_all(idx.iter().copied())?;
        let (at, want): (Vec<usize>, Vec<usize>) = idx
            .iter()
            .enumerate()
            .filter(|&(_, &i)| self.index.recs.at(i).stringify_form())
            .map(|(k, &i)| (k, i))
            .unzip();
        self.with_lines(&want, |k, b| {
            if crate::json::canon_rest(b) {
                f(at[k], b);
            }
        })?;
        Ok(())
    }

    /// The lines of entries `idx` side by side in `raw` (cleared first). `span[k]` is the range of
    /// entry `idx[k]`'s line in it.
    pub fn lines_into(
        &self,
        idx: &[usize],
        raw: &mut Vec<u8>,
        span: &mut Vec<(usize, usize)>,
    ) -> Result<(), ReadError> {
        self.index.check_all(idx.iter().copied())?;
        raw.clear();
        span.clear();
        span.resize(idx.len(), (0, 0));
        self.with_lines(idx, |k, b| {
            span[k] = (raw.len(), raw.len() + b.len());
            raw.extend_from_slice(b);
        })?;
        Ok(())
    }

    /// Pi's token estimate of each entry's context message, from its raw line
    /// ([`crate::cut::entry_info`]).
    ///
    /// 0 for entries without one, None where the exact (Python) rules must decide.
    pub fn estimate_tokens(&self, idx: &[usize]) -> Result<Vec<Option<u64>>, ReadError> {
        self.check_live()?;
        self.index.check_all(idx.iter().copied())?;
        let tokens = |&i: &usize| crate::cut::entry_info(self, i as u32).map(|info| info.tokens);
        Ok(idx.iter().map(tokens).collect())
    }

    /// The byte lengths, times and token estimates of entries `idx` ([`Metrics`]).
    pub fn metrics(&self, idx: &[usize]) -> Result<Metrics, ReadError> {
        let (lens, times) = self.index.sizes_and_times(idx)?;
        Ok((lens, times, self.estimate_tokens(idx)?))
    }

    /// Pi's findCutPoint over `path[start..end]` ([`crate::cut::find_cut_point`]).
    ///
    /// `path`: entry indices, the latest compaction removed by the caller. (first kept position,
    /// turn start position or -1, split turn), or None when the exact (Python) rules must decide.
    pub fn cut_point(
        &self,
        path: &[u32],
        start: usize,
        end: usize,
        keep_recent_tokens: u64,
    ) -> Result<Option<(usize, isize, bool)>, ReadError> {
        self.check_live()?;
        self.index.check_all(path.iter().map(|&i| i as usize))?;
        Ok(crate::cut::find_cut_point(
            self,
            path,
            start,
            end,
            keep_recent_tokens,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::ReadError;
    use crate::store::Store;

    fn store(text: &str) -> Store {
        Store::from_bytes(text.as_bytes().to_vec(), false)
    }

    const TEXT: &str = concat!(
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2025-01-01T00:00:00Z\",\"cwd\":\"/\"}\n",
        "{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2025-01-01T00:00:01Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
        "{\"type\":\"message\", \"id\":\"b\",\"parentId\":\"a\",\"timestamp\":\"x\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
    );

    #[test]
    fn records_columns_and_lines_check_positions() {
        let st = store(TEXT);
        let own = |s: Option<&str>| s.map(str::to_string);
        let rec = st
            .with_record(0, |v| [own(v.id), own(v.type_name), own(v.role)])
            .unwrap();
        assert_eq!(rec, ["a", "message", "user"].map(|s| Some(s.to_string())));
        assert!(matches!(
            st.with_record(2, |_| ()),
            Err(ReadError::Range(_))
        ));
        let ids = st.with_columns(&[1, 0], |c| c.ids.len()).unwrap();
        assert_eq!(ids, 2);
        let types = st.type_names(&[0, 1]).unwrap();
        assert_eq!(types[1].as_deref(), Some("message"));
        // the second line has a space after `{`: not JSON.stringify's text
        let mut got = Vec::new();
        st.with_stringify_lines(&[0, 1], |k, _| got.push(k))
            .unwrap();
        assert_eq!(got, vec![0]);
        let (mut raw, mut span) = (Vec::new(), Vec::new());
        st.lines_into(&[1, 0], &mut raw, &mut span).unwrap();
        assert_eq!(&raw[span[1].0..span[1].1], st.line(0).unwrap().as_ref());
        assert!(st.lines_into(&[5], &mut raw, &mut span).is_err());
        let (lens, times, tokens) = st.metrics(&[0, 1]).unwrap();
        assert_eq!(lens.len(), 2);
        assert_eq!(times[1], None);
        assert_eq!(tokens.len(), 2);
        assert!(st.cut_point(&[0, 9], 0, 2, 10).is_err());
    }
}
