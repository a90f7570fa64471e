//! The candidate table: signature hash → canonical type ids, iterated in the order
//! libbpf's `hashmap` iterates them.
//!
//! Which candidate wins when several canonical types match decides the output, so
//! the order must be libbpf's. libbpf's map pushes each new entry at the head of its
//! bucket list, and when it grows (before an insert that would make it more than 3/4
//! full; capacity 4, then doubling) it moves every entry, in list order, to the head
//! of its new bucket — which reverses the relative order of entries with the same
//! key. Entries with different keys never match the same query (the key covers every
//! field the equality checks compare), so only the order within one key matters:
//! newest first, reversed once per growth since insertion. We keep one list per key
//! and apply the reversals lazily, counting growths in an epoch number.

use super::fxhash::FxHashMap;

struct Slot {
    /// The growth epoch this list's order was last brought up to date at.
    epoch: u32,
    /// Ids; iteration order is from the end to the start (the end is the head).
    ids: Vec<u32>,
}

/// Signature hash → candidate ids, in libbpf's iteration order.
#[derive(Default)]
pub struct CandTable {
    index: FxHashMap<u64, u32>,
    slots: Vec<Slot>,
    /// Number of entries (libbpf's `sz`), including any later removed.
    size: u64,
    /// libbpf's `cap`.
    cap: u64,
    /// Growths so far.
    epoch: u32,
}

impl CandTable {
    /// Adds `id` under `key` (libbpf's `hashmap__append`).
    pub fn add(&mut self, key: u64, id: u32) {
        if self.cap == 0 || (self.size + 1) * 4 / 3 > self.cap {
            self.cap = if self.cap == 0 { 4 } else { self.cap * 2 };
            self.epoch += 1;
        }
        self.size += 1;
        let epoch = self.epoch;
        match self.index.get(&key) {
            Some(&si) => {
                let slot = &mut self.slots[si as usize];
                sync(slot, epoch);
                slot.ids.push(id);
            }
            None => {
                self.index.insert(key, self.slots.len() as u32);
                self.slots.push(Slot {
                    epoch,
                    ids: vec![id],
                });
            }
        }
    }

    /// The candidates under `key`, in storage order: iterate them with `.iter().rev()`
    /// to get libbpf's order.
    #[inline]
    pub fn get(&mut self, key: u64) -> &[u32] {
        match self.index.get(&key) {
            Some(&si) => {
                let epoch = self.epoch;
                let slot = &mut self.slots[si as usize];
                sync(slot, epoch);
                &slot.ids
            }
            None => &[],
        }
    }

    /// Removes the ids `>= first` from the list of `key` (used by the incremental
    /// mode to drop a batch's provisional entries; the order of the rest is kept).
    pub fn remove_from(&mut self, key: u64, first: u32) {
        if let Some(&si) = self.index.get(&key) {
            let epoch = self.epoch;
            let slot = &mut self.slots[si as usize];
            sync(slot, epoch);
            slot.ids.retain(|&id| id < first);
        }
    }
}

#[inline]
fn sync(slot: &mut Slot, epoch: u32) {
    if (epoch - slot.epoch) & 1 == 1 {
        slot.ids.reverse();
    }
    slot.epoch = epoch;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A direct model of libbpf's bucket lists for one key.
    #[test]
    fn order_matches_a_model_of_libbpf_growth() {
        let mut t = CandTable::default();
        let mut model: Vec<u32> = Vec::new(); // head first
        let (mut size, mut cap) = (0u64, 0u64);
        for id in 0..200u32 {
            // Half the entries go to other keys: they only move the growth points.
            let key = if id % 2 == 0 { 7 } else { 1000 + id as u64 };
            if cap == 0 || (size + 1) * 4 / 3 > cap {
                cap = if cap == 0 { 4 } else { cap * 2 };
                model.reverse();
            }
            size += 1;
            if key == 7 {
                model.insert(0, id);
            }
            t.add(key, id);
            let got: Vec<u32> = t.get(7).iter().rev().copied().collect();
            assert_eq!(got, model, "after adding {id}");
        }
    }
}
