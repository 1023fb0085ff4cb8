//! `EntryRecord`: one entry's facts from the index ([`crate::index::EntryView`]), taken in one
//! call and kept by `Entry`. A small frozen object: the fields are copied out of the index when
//! it is made, each Python value is made when its attribute is read.

use crate::index::EntryView;
use pyo3::prelude::*;

/// One entry's facts from the index, without parsing its line: `id`, `parent_id`, `type`,
/// `role` (`message.role`; v2 `hookMessage` reads `custom`) when strings, else None;
/// `parent_is_null` (`parentId` is JSON null); 1-based `line`; byte `offset` and `length` of
/// the line's JSON text; `value_pos` (Pi's `fileEntries` position, the header being 0);
/// `timestamp_ms` (`new Date(timestamp).getTime()`, NaN when invalid).
#[pyclass(frozen, module = "sessiontree._core", name = "EntryRecord")]
pub struct Record {
    id: Option<Box<str>>,
    parent_id: Option<Box<str>>,
    type_name: Option<Box<str>>,
    role: Option<Box<str>>,
    parent_is_null: bool,
    line: u32,
    offset: u64,
    len: u32,
    vpos: u32,
    ts: f64,
}

impl From<EntryView<'_>> for Record {
    fn from(v: EntryView<'_>) -> Self {
        Record {
            id: v.id.map(Into::into),
            parent_id: v.parent_id.map(Into::into),
            type_name: v.type_name.map(Into::into),
            role: v.role.map(Into::into),
            parent_is_null: v.parent_is_null,
            line: v.line,
            offset: v.offset,
            len: v.len,
            vpos: v.vpos,
            ts: v.ts,
        }
    }
}

#[pymethods]
impl Record {
    #[getter]
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
    #[getter]
    fn parent_id(&self) -> Option<&str> {
        self.parent_id.as_deref()
    }
    #[getter]
    fn parent_is_null(&self) -> bool {
        self.parent_is_null
    }
    #[getter(r#type)]
    fn type_name(&self) -> Option<&str> {
        self.type_name.as_deref()
    }
    #[getter]
    fn role(&self) -> Option<&str> {
        self.role.as_deref()
    }
    #[getter]
    fn line(&self) -> u32 {
        self.line
    }
    #[getter]
    fn offset(&self) -> u64 {
        self.offset
    }
    #[getter]
    fn length(&self) -> u32 {
        self.len
    }
    #[getter]
    fn value_pos(&self) -> u32 {
        self.vpos
    }
    #[getter]
    fn timestamp_ms(&self) -> f64 {
        self.ts
    }
    fn __repr__(&self) -> String {
        let show = |s: &Option<Box<str>>| s.as_ref().map_or("None".into(), |s| format!("{s:?}"));
        let (id, parent, t) = (show(&self.id), show(&self.parent_id), show(&self.type_name));
        format!(
            "EntryRecord(id={id}, parent_id={parent}, type={t}, line={})",
            self.line
        )
    }
}
