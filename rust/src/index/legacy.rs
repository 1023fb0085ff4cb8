//! Legacy files: the header version that decides Pi's migrations, and the seeds and ids of v1
//! entries. v1 entries have none: Pi's `migrateV1ToV2` gives them fresh ids and a linear chain.

use super::{Index, KID_NULL, NONE};
use crate::json::{JsVal, Skel, TopKind, Val};

/// JavaScript `ToNumber` for a header `version` (`header.version ?? 1`).
fn version_number(v: &JsVal) -> f64 {
    match v {
        JsVal::Missing | JsVal::Null => 1.0,
        JsVal::Bool(b) => *b as u8 as f64,
        JsVal::Num(n) => *n,
        JsVal::Str(s) => {
            let t = s.trim();
            if t.is_empty() {
                0.0
            } else {
                t.parse::<f64>().unwrap_or(f64::NAN)
            }
        }
        JsVal::Composite => f64::NAN,
    }
}

/// Pi's migrations for a header `version` (`header.version ?? 1`): None for the current
/// version (3 and later); `Some(true)` for version 1 (v1 -> v2 -> v3), `Some(false)` for version
/// 2 (v2 -> v3). The one home of the rule: the index and the converter (`convert::legacy`) ask it.
pub(crate) fn legacy_of(v: &JsVal) -> Option<bool> {
    let v = version_number(v);
    // Pi: `if (version >= 3) no migration; if (version < 2) v1→v2; if (version < 3) v2→v3`
    (v < 3.0 || v.is_nan()).then_some(v < 2.0)
}

/// [`legacy_of`] for a header parsed by serde (`None`: no `version` key).
pub(crate) fn legacy_of_json(v: Option<&serde_json::Value>) -> Option<bool> {
    use serde_json::Value;
    let js = match v {
        None => JsVal::Missing,
        Some(Value::Null) => JsVal::Null,
        Some(Value::Bool(b)) => JsVal::Bool(*b),
        Some(Value::Number(n)) => JsVal::Num(n.as_f64().unwrap_or(f64::NAN)),
        Some(Value::String(s)) => JsVal::Str(s.clone()),
        Some(_) => JsVal::Composite,
    };
    legacy_of(&js)
}

fn fnv1a(data: &[u8], seed: u64) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325 ^ seed.wrapping_mul(0x100000001b3);
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h ^ (h >> 29)
}

impl Index {
    pub fn is_legacy_v1(&self) -> bool {
        self.legacy_v1
    }
    /// Header version below 3: Pi migrates (and rewrites) such files on open.
    pub fn needs_migration(&self) -> bool {
        self.legacy_v1 || self.legacy_v2
    }

    /// What a valid header sets.
    ///
    /// The seed of v1 ids (a hash of the header id, so ids are stable across opens) and whether the
    /// file needs Pi's migrations (`header_version` already set).
    pub(super) fn seed_legacy(&mut self, header_id: &str) {
        self.v1_seed = fnv1a(header_id.as_bytes(), 0x5e55);
        if let Some(v1) = legacy_of(&self.header_version) {
            self.legacy_v1 = v1;
            self.legacy_v2 = true;
        }
    }

    /// The first entry after the header, seen as v1 when it has neither `id` nor `parentId`.
    #[inline]
    pub(super) fn detect_unmigrated_fork(&mut self, vpos: u32, sk: &Skel<'_>) {
        if vpos == 1
            && !self.legacy_v1
            && sk.top == TopKind::Object
            && matches!(sk.id, Val::Missing)
            && matches!(sk.parent_id, Val::Missing)
        {
            // A header over entries with neither `id` nor `parentId`: what Pi 1.6 `forkFrom`
            // writes for a v1 source (a v3 header over the v1 entries, copied unmigrated). Pi
            // then sees one entry per missing id and only the last message in context; we read
            // the entries as v1 (ids, each the child of the previous one), so the first write
            // rewrites the file migrated, as for any v1 file (docs/divergences.md).
            self.legacy_v1 = true;
            self.legacy_v2 = true;
        }
    }

    /// Pi `migrateV1ToV2`: a fresh id for the entry at `vpos`, the child of the previous one.
    /// Returns (id, parent) as key ids.
    pub(super) fn v1_link(&mut self, vpos: u32) -> (u32, u32) {
        let id = self.synthetic_id(vpos);
        let parent = if self.last_v1_id == NONE {
            KID_NULL
        } else {
            self.last_v1_id
        };
        self.last_v1_id = id;
        (id, parent)
    }

    fn synthetic_id(&mut self, vpos: u32) -> u32 {
        // Deterministic per file (header position), so cursors survive reopening a v1 file.
        let mut attempt = 0u64;
        loop {
            let h = fnv1a(
                &vpos.to_le_bytes(),
                self.v1_seed ^ attempt.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            let s = format!("{:08x}", (h & 0xffff_ffff) as u32);
            if self
                .lookup_str(&s)
                .map(|k| self.winner(k) == NONE)
                .unwrap_or(true)
            {
                return self.intern_str(&s);
            }
            attempt += 1;
        }
    }
}
