//! Labels, replayed in file order with JavaScript `Map` semantics. A truthy `label` sets, and keeps
//! the key's position when it already exists; anything else deletes.

use super::Index;

impl Index {
    /// Labels in Pi's Map order: (target key id, label entry index).
    pub fn labels(&self) -> Vec<(u32, u32)> {
        let mut v: Vec<(u64, u32, u32)> =
            self.labels.iter().map(|(&t, &(s, e))| (s, t, e)).collect();
        v.sort_unstable();
        v.into_iter().map(|(_, t, e)| (t, e)).collect()
    }
    pub fn label_entry(&self, target: u32) -> Option<u32> {
        self.labels.get(&target).map(|&(_, e)| e)
    }
    /// The label entry currently labelling string id `id`, or None.
    pub fn label_entry_of(&self, id: &str) -> Option<u32> {
        self.label_entry(self.lookup_str(id)?)
    }

    /// [`Index::label_entry_of`] the id of entry `i` ([`Index::id_at`]), without a string lookup.
    ///
    /// A string id is interned once, so its key is the one a lookup of its text finds; an id
    /// that is not a string is labelled by nothing, as there. None when `i` is out of range.
    pub fn label_entry_at(&self, i: usize) -> Option<u32> {
        let kid = self.recs.get(i)?.id;
        let e = self.label_entry(kid)?;
        self.key_string(kid)?;
        Some(e)
    }

    /// Replays label entry `idx` on `target` (remembering the previous state for a rollback).
    #[inline]
    pub(super) fn replay_label(&mut self, target: u32, idx: u32, truthy: bool) {
        self.prev_label_scratch = self.labels.get(&target).copied();
        if truthy {
            if let Some(e) = self.labels.get_mut(&target) {
                e.1 = idx; // Map.set on an existing key keeps its position
            } else {
                self.label_seq += 1;
                self.labels.insert(target, (self.label_seq, idx));
            }
        } else {
            self.labels.remove(&target);
        }
    }

    /// Puts back the label state of `target` that a rolled-back line changed.
    pub(super) fn restore_label(&mut self, target: u32, prev: Option<(u64, u32)>) {
        match prev {
            Some(v) => {
                self.labels.insert(target, v);
            }
            None => {
                self.labels.remove(&target);
            }
        }
    }
}
