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
//! newest first, reversed once per growth since insertion. We keep one linked list
//! per key and apply the reversals lazily, counting growths in an epoch number.

use crate::hash::FxHasher;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

const END: u32 = u32::MAX;

/// One key's list: its head node and the growth epoch its order is up to date at.
#[derive(Clone, Copy)]
struct Slot {
    head: u32,
    epoch: u32,
}

/// Signature hash → candidate ids, in libbpf's iteration order. The lists are
/// singly linked through one node arena, head first, like libbpf's buckets.
#[derive(Default, Clone)]
pub struct CandTable {
    index: HashMap<u64, Slot, BuildHasherDefault<FxHasher>>,
    /// (id, next node).
    nodes: Vec<(u32, u32)>,
    /// Number of entries (libbpf's `sz`), including any later removed.
    size: u64,
    /// libbpf's `cap`.
    cap: u64,
    /// Growths so far.
    epoch: u32,
    /// The nodes before the current batch's (see [`CandTable::drop_batch_nodes`]).
    sealed: usize,
}

impl CandTable {
    /// Adds `id` under `key` (libbpf's `hashmap__append`).
    pub fn add(&mut self, key: u64, id: u32) {
        if self.cap == 0 || (self.size + 1) * 4 / 3 > self.cap {
            self.cap = if self.cap == 0 { 4 } else { self.cap * 2 };
            self.epoch += 1;
        }
        self.size += 1;
        // One node per type id added, and ids are `u32`s.
        #[allow(clippy::cast_possible_truncation)]
        let node = self.nodes.len() as u32;
        let epoch = self.epoch;
        let slot = self.index.entry(key).or_insert(Slot { head: END, epoch });
        sync(&mut self.nodes, slot, epoch);
        self.nodes.push((id, slot.head));
        slot.head = node;
    }

    /// The first node of the list of `key`, in libbpf's order: walk it with
    /// [`CandTable::next`] (the table must not change in between).
    #[inline]
    pub fn first(&mut self, key: u64) -> u32 {
        let epoch = self.epoch;
        match self.index.get_mut(&key) {
            Some(slot) => {
                sync(&mut self.nodes, slot, epoch);
                slot.head
            }
            None => END,
        }
    }

    /// The first candidate id under `key` as the table stands (its list not yet
    /// brought up to date), or `END`: for touching what a look-up of `key` will
    /// read before it is made (see [`super::engine`]'s passes).
    #[inline]
    pub fn peek(&self, key: u64) -> u32 {
        match self.index.get(&key) {
            Some(slot) => self.nodes.get(slot.head as usize).map_or(END, |n| n.0),
            None => END,
        }
    }

    /// The candidate at `node` and the node after it, or None past the end.
    #[inline]
    pub fn next(&self, node: u32) -> Option<(u32, u32)> {
        self.nodes.get(node as usize).copied()
    }

    /// The candidates under `key`, in libbpf's order.
    #[cfg(test)]
    fn get(&mut self, key: u64) -> Vec<u32> {
        let mut out = Vec::new();
        let mut n = self.first(key);
        while let Some((id, next)) = self.next(n) {
            out.push(id);
            n = next;
        }
        out
    }

    /// Removes the ids `>= first` from the list of `key` (used by the incremental
    /// mode to drop a batch's provisional entries; the order of the rest is kept).
    pub fn remove_from(&mut self, key: u64, first: u32) {
        let epoch = self.epoch;
        if let Some(slot) = self.index.get_mut(&key) {
            sync(&mut self.nodes, slot, epoch);
            let mut prev = END;
            let mut n = slot.head;
            while n != END {
                let (id, next) = self.nodes[n as usize];
                if id >= first {
                    if prev == END {
                        slot.head = next;
                    } else {
                        self.nodes[prev as usize].1 = next;
                    }
                } else {
                    prev = n;
                }
                n = next;
            }
        }
    }

    /// Marks the nodes so far as kept: the next batch's begin here.
    pub fn seal(&mut self) {
        self.sealed = self.nodes.len();
    }

    /// Frees the nodes added since the last [`CandTable::seal`], once the batch that
    /// added them is removed from every list it was added to
    /// ([`CandTable::remove_from`] with the batch's first id, for each of its keys):
    /// unlinked, they would keep the node arena growing with the input (106,000
    /// nodes over the corpus vmlinux's units, four times that for a kernel holding
    /// each unit four times). They are kept if any holds an id below `first`, which
    /// no removal unlinked.
    pub fn drop_batch_nodes(&mut self, first: u32) {
        let sealed = self.sealed.min(self.nodes.len());
        if self.nodes[sealed..].iter().all(|&(id, _)| id >= first) {
            self.nodes.truncate(sealed);
        }
    }
}

/// Applies the growths since the list was last looked at: an odd number reverses it.
#[inline]
fn sync(nodes: &mut [(u32, u32)], slot: &mut Slot, epoch: u32) {
    if (epoch - slot.epoch) & 1 == 1 {
        let mut prev = END;
        let mut n = slot.head;
        while n != END {
            let next = nodes[n as usize].1;
            nodes[n as usize].1 = prev;
            prev = n;
            n = next;
        }
        slot.head = prev;
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
            assert_eq!(t.get(7), model, "after adding {id}");
        }
        t.remove_from(7, 100);
        model.retain(|&id| id < 100);
        assert_eq!(t.get(7), model, "after removal");
    }

    /// A batch's nodes, once its ids are removed, are freed, and the lists read as
    /// in a table that kept them; nodes of earlier ids are never freed.
    #[test]
    fn a_removed_batch_leaves_no_nodes() {
        let batch = |t: &mut CandTable| {
            for id in 50..80u32 {
                t.add(u64::from(id % 7), id);
            }
            for k in 0..7 {
                t.remove_from(k, 50);
            }
        };
        let (mut t, mut kept_all) = (CandTable::default(), CandTable::default());
        for id in 0..50u32 {
            t.add(u64::from(id % 5), id);
            kept_all.add(u64::from(id % 5), id);
        }
        t.seal();
        let kept = t.nodes.len();
        batch(&mut t);
        batch(&mut kept_all);
        t.drop_batch_nodes(50);
        assert_eq!(t.nodes.len(), kept);
        // The growths the batch made still count.
        for k in 0..7 {
            assert_eq!(t.get(k), kept_all.get(k), "key {k}");
        }
        // A batch that also added an earlier id keeps its nodes.
        t.seal();
        t.add(1, 80);
        t.add(2, 3);
        t.remove_from(1, 80);
        t.drop_batch_nodes(80);
        assert_eq!(t.nodes.len(), kept + 2);
        assert!(t.get(2).contains(&3));
    }
}
