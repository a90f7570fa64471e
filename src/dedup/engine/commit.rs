//! The end of a batch: its canonical types kept, renumbered in order, with every
//! reference rewritten to its final id (libbpf's compaction and remapping), and
//! the kept types as raw BTF.

use super::super::flat::*;
use super::{invalid, resolve_in, Engine, IdSlot, UNPROCESSED};
use crate::btf::write::RawWriter;
use crate::btf::{Endian, KindLayout};
use crate::dedup::DedupError;

impl Engine {
    /// Keeps the canonical types of the batch, renumbered in order, with every
    /// reference rewritten to its final id (libbpf's compaction and remapping).
    pub(super) fn commit(&mut self, s: u32, e: u32) -> Result<(), DedupError> {
        let mut new_ids = vec![UNPROCESSED; (e - s) as usize];
        let mut next = s;
        for id in s..e {
            if self.ids[id as usize].map == id {
                new_ids[(id - s) as usize] = next;
                next += 1;
            }
        }
        if self.batch_keys.is_some() {
            // Where each type of the batch ends up: kept here, or a type kept earlier.
            self.last_kept.clear();
            for id in s..e {
                let x = self.resolve(id);
                self.last_kept
                    .push(if x < s { x } else { new_ids[(x - s) as usize] });
            }
        }
        // The kept records move down in place, each to where the one before it
        // ended: a kept record never starts after its old place, and the records
        // after it are read before they can be overwritten. (Copying them out and
        // back grew a fresh vector for every unit, on the ordered stage.)
        let base_len = self.offs[s as usize];
        let mut end = base_len as usize;
        let mut out_offs: Vec<u32> = Vec::with_capacity((next - s) as usize);
        let ids = &self.ids;
        let w = &mut self.w;
        for id in s..e {
            if ids[id as usize].map != id {
                continue;
            }
            let from = self.offs[id as usize] as usize..self.offs[id as usize + 1] as usize;
            let start = end;
            end += from.len();
            w.copy_within(from, start);
            let mut bad = None;
            for_each_ref_pos(w[start + 1], |p| {
                let x = resolve_in(ids, w[start + p]);
                let y = if x < s { x } else { new_ids[(x - s) as usize] };
                if y == UNPROCESSED {
                    bad = Some(x);
                }
                w[start + p] = y;
            });
            if let Some(x) = bad {
                return Err(invalid(
                    id,
                    format!("refers to type {x}, which has no canonical copy"),
                ));
            }
            // Fewer words than the batch's, whose offsets are `u32`s.
            #[allow(clippy::cast_possible_truncation)]
            out_offs.push(end as u32);
        }
        self.w.truncate(end);
        self.offs.truncate(s as usize + 1);
        self.offs.extend_from_slice(&out_offs);
        self.clear_hypot();
        let incremental = self.batch_keys.is_some();
        for x in std::mem::take(&mut self.dirty_fixed) {
            // libbpf never undoes a change to the map: a FWD (or enum FWD) that a
            // batch resolved stays resolved, to that type's kept copy, for every later
            // batch, as for the rest of a one-shot dedup. For a base FWD the final
            // pass starts from that resolution (`base_resolved`). A kept FWD stays in
            // the kept set, resolved: later batches see the struct through it, as a
            // one-shot dedup would after the same check, and their copies of a
            // struct that refers to it merge with the kept one at once instead of
            // each needing the FWD resolved (`adjust_canon`), failing that check and
            // being compared with the next candidate, a second walk of the unit's
            // graph. The final pass redoes the resolutions among kept types.
            let r = self.resolve(x);
            let to = if r < s { r } else { new_ids[(r - s) as usize] };
            if incremental && to != x && to != UNPROCESSED {
                self.ids[x as usize].map = to;
                if x <= self.base_types {
                    match self.base_resolved.iter_mut().find(|(b, _)| *b == x) {
                        Some(e) => e.1 = to,
                        None => self.base_resolved.push((x, to)),
                    }
                }
            } else {
                self.ids[x as usize].map = x;
            }
        }
        self.ids.truncate(s as usize);
        self.ids
            .extend((s..next).map(|id| IdSlot::new(id, UNPROCESSED)));
        self.anon.truncate(s as usize);
        self.anon.resize(next as usize, [0; 2]);
        self.first = next;
        if let Some(mut keys) = self.batch_keys.take() {
            keys.sort_unstable();
            keys.dedup();
            for &k in &keys {
                self.table.remove_from(k, s);
            }
            self.table.drop_batch_nodes(s);
            // What the batch's provisional entries did to the earlier ids' `anon`
            // is counted again, before the kept types are added.
            for slot in std::mem::take(&mut self.anon_touched) {
                if slot.0 < s {
                    self.anon_recount(slot);
                }
            }
            keys.clear();
            self.batch_keys = Some(keys);
            // The prim and struct kinds keep the hash their pass gave them (their
            // names keyed by content, which only the batch's source could read);
            // the reference kinds are hashed again over their final ids.
            let passes = std::mem::take(&mut self.passes);
            let (mut prims, mut structs) = (passes.prims.iter(), passes.structs.iter());
            let (mut prim, mut strukt) = (prims.next(), structs.next());
            for old in s..e {
                let i = old - s;
                let mut named = None;
                if let Some(&(_, h)) = prim.filter(|p| p.0 == i) {
                    named = Some(h);
                    prim = prims.next();
                } else if let Some(&(_, h)) = strukt.filter(|p| p.0 == i) {
                    named = Some(h);
                    strukt = structs.next();
                }
                let id = new_ids[i as usize];
                if id == UNPROCESSED {
                    continue;
                }
                let h = named.or_else(|| super::hash::ref_prep_hash(self.rec(id)));
                self.fix_hashed(id, h);
            }
            self.table.seal();
            self.passes = passes;
        }
        Ok(())
    }

    /// The kept types and strings as raw BTF in `endian`, with `header_extra` (zero
    /// bytes) past the 24-byte header and the input's kind layout section, if any.
    pub fn to_bytes(
        &self,
        endian: Endian,
        header_extra: &[u8],
        layout: Option<&[KindLayout]>,
    ) -> Vec<u8> {
        self.to_bytes_with_strings(endian, header_extra, layout, self.strs.data())
    }

    /// [`Engine::to_bytes`] with `strs` as the string section (for verbatim strings,
    /// the encoder's section).
    pub fn to_bytes_with_strings(
        &self,
        endian: Endian,
        header_extra: &[u8],
        layout: Option<&[KindLayout]>,
        strs: &[u8],
    ) -> Vec<u8> {
        let first = self.base_types + 1;
        let type_words = &self.w[self.offs[first as usize] as usize..];
        let mut o = RawWriter::new(
            endian,
            header_extra,
            layout,
            type_words.len() * 4,
            strs.len(),
        );
        for &v in type_words {
            o.word(v);
        }
        o.finish(strs)
    }
}
