//! The dedup passes, with libbpf's semantics (see the module doc of `dedup`).
//!
//! One [`Engine`] holds a fixed, already canonical part (a split BTF's base, or in
//! the incremental mode the types kept so far) and processes one batch of new types
//! at a time: strings, primitive kinds, structs/unions (and typedefs), FWD
//! resolution, reference kinds, then compaction and id remapping. A one-shot dedup is
//! one batch. The parts, in pass order:
//!
//! * `load.rs`: a batch's records, flattened and checked (`prepare`, which needs
//!   nothing of the engine's state), then appended with their strings;
//! * `hash.rs`: libbpf's hashes and shallow equality checks;
//! * `equiv.rs`: the primitive kinds, and structs by graph equivalence;
//! * `refs.rs`: the reference kinds;
//! * `commit.rs`: compaction, renumbering, and the output bytes.

mod commit;
mod equiv;
mod hash;
mod load;
mod local;
mod refs;

pub use hash::name_key;
pub use load::{BatchBuilder, PreparedBatch, Preparer};
pub use local::{Lead, LocalBatch};

use super::flat::*;
use super::strset::StrSet;
use super::table::CandTable;
use super::{Compat, DedupError, FxHashMap};
use crate::btf::Btf;

/// A type not looked at yet.
const UNPROCESSED: u32 = u32::MAX;
/// A reference type whose referenced types are being resolved (a loop if met again).
const IN_PROGRESS: u32 = u32::MAX - 1;
/// Ids above this are the two markers.
const MAX_ID: u32 = 0x7fff_ffff;

/// One dedup state: the fixed canonical types and the batch being processed.
#[derive(Clone)]
pub struct Engine {
    compat: Compat,
    /// All records, void (three zero words) first.
    w: Vec<u32>,
    /// `offs[id]..offs[id + 1]` is the record of `id`.
    offs: Vec<u32>,
    /// Number of types of the real base BTF.
    base_types: u32,
    /// First id of the batch (ids below it are fixed and canonical).
    first: u32,
    /// Per id, its canonical id (or a marker) and the hypothetical mapping of
    /// one equivalence check, side by side: the walk reads both of a kept id.
    ids: Vec<IdSlot>,
    hypot_list: Vec<u32>,
    /// The entries of `hypot_list` that [`Engine::merge_hypot`] may act on: those
    /// whose step met a FWD, STRUCT or UNION on either side.
    merge_list: Vec<u32>,
    /// The last equivalence check would need a fixed FWD resolved.
    adjust_canon: bool,
    table: CandTable,
    /// For each id, the table's one anonymous PTR and CONST to it (see
    /// [`anon_slot`]): 0 for none, [`MANY_REFS`] for several.
    anon: Vec<[u32; 2]>,
    /// The (target, slot) of `anon` entries a batch's provisional table entries
    /// changed, for the end of the batch to count again.
    anon_touched: Vec<(u32, usize)>,
    /// Keys the batch added to `table`, when they must be dropped after it.
    batch_keys: Option<Vec<u64>>,
    /// Fixed ids whose `map` entry the batch changed.
    dirty_fixed: Vec<u32>,
    /// Real base types whose `map` entry an incremental batch changed for good (a
    /// base FWD or enum FWD resolved to a kept type), with the kept type, in the
    /// order they were first resolved (see `Engine::commit`).
    base_resolved: Vec<(u32, u32)>,
    /// Own ids below this are the kept types of an incremental dedup going through
    /// its final pass: their STRUCT/UNION/TYPEDEF checks skip base candidates (see
    /// `Engine::set_settled`).
    settled_end: u32,
    /// Name → the one fixed STRUCT/UNION of that name, or 0 if several.
    fixed_names: FxHashMap<u32, u32>,
    /// Own strings (offsets from `str_start`).
    strs: StrSet,
    /// The real base's strings.
    base_strs: Option<StrSet>,
    str_start: u32,
    /// The batch's types of each pass, in id order, with their hash where it does
    /// not depend on other types (see `load::Passes`).
    passes: load::Passes,
    /// Kept id of each type of the last incremental batch (see `Engine::process`).
    last_kept: Vec<u32>,
    eq_stack: Vec<(u32, u32)>,
    ref_stack: Vec<(u32, u32)>,
}

fn invalid(id: u32, what: impl Into<String>) -> DedupError {
    DedupError::Invalid {
        id,
        what: what.into(),
    }
}

/// `n` (a count of words or ids) as a `u32`, or an error: BTF cannot hold more.
fn fits_u32(n: usize, id: u32) -> Result<u32, DedupError> {
    u32::try_from(n).map_err(|_| invalid(id, "more types than BTF can hold"))
}

/// The name keys of `btf`'s string offsets (an offset past its strings: any key,
/// as the offset is an error when the batch is added).
pub fn btf_keys(btf: &Btf) -> impl Fn(u32) -> u64 + '_ {
    |o| {
        btf.str_bytes(crate::btf::StrOffset(o))
            .map_or(0, hash::name_key)
    }
}

/// All strings of `btf`'s base chain and own section, root first.
fn chain_strings(btf: &Btf, out: &mut Vec<u8>) {
    if let Some(b) = btf.base() {
        chain_strings(b, out);
    }
    out.extend_from_slice(btf.strings());
}

/// An [`Engine::anon`] entry for two or more table entries.
const MANY_REFS: u32 = u32::MAX;

/// Where the record `r` goes in [`Engine::anon`]: (its target, 0 for a PTR or 1
/// for a CONST) if it is an anonymous PTR or CONST with no flag. Such a type's
/// reference-pass check is its three words' equality, so with its target
/// canonical, the candidate that passes is the table's one entry of these words
/// if there is one: the look-up that 64% of the corpus vmlinux's reference
/// checks make is then one load, not the table's slot, list node and record.
#[inline]
fn anon_slot(r: Rec<'_>) -> Option<(u32, usize)> {
    if r.name() != 0 {
        return None;
    }
    match r.info() {
        i if i == K_PTR << 24 => Some((r.size_type(), 0)),
        i if i == K_CONST << 24 => Some((r.size_type(), 1)),
        _ => None,
    }
}

/// How many look-ups of a pass are warmed at once ([`Engine::warm`]).
const WARM: usize = 16;

impl Engine {
    /// A new engine over the real base `base` (None for whole BTF). With
    /// `incremental`, batches may be added one after another.
    pub fn new(
        base: Option<&Btf>,
        compat: Compat,
        incremental: bool,
    ) -> Result<Engine, DedupError> {
        let base_types = base.map_or(0, |b| b.type_count());
        let mut e = Engine {
            compat,
            w: vec![0, 0, 0],
            offs: vec![0, 3],
            base_types,
            first: base_types + 1,
            ids: vec![IdSlot::new(0, UNPROCESSED)],
            hypot_list: Vec::new(),
            merge_list: Vec::new(),
            adjust_canon: false,
            table: CandTable::default(),
            anon: vec![[0; 2]],
            anon_touched: Vec::new(),
            batch_keys: incremental.then(Vec::new),
            dirty_fixed: Vec::new(),
            base_resolved: Vec::new(),
            settled_end: 0,
            fixed_names: FxHashMap::default(),
            strs: StrSet::default(),
            base_strs: None,
            str_start: 0,
            passes: load::Passes::default(),
            last_kept: Vec::new(),
            eq_stack: Vec::new(),
            ref_stack: Vec::new(),
        };
        match base {
            Some(b) => {
                let mut w = Vec::with_capacity(b.type_count() as usize * 8);
                for id in 1..=base_types {
                    let t = b.get(crate::btf::TypeId(id)).expect("id within the base");
                    let start = e.w.len();
                    push_type(&mut w, t);
                    e.w.extend_from_slice(&w);
                    w.clear();
                    e.offs.push(fits_u32(e.w.len(), id)?);
                    let r = &e.w[start..];
                    let mut bad = None;
                    for_each_ref_pos(r[1], |p| {
                        if r[p] > base_types {
                            bad = Some(r[p]);
                        }
                    });
                    if let Some(x) = bad {
                        return Err(invalid(
                            id,
                            format!("base type refers to type {x}, past the last base type"),
                        ));
                    }
                }
                e.ids
                    .extend((1..=base_types).map(|id| IdSlot::new(id, UNPROCESSED)));
                e.anon.resize(base_types as usize + 1, [0; 2]);
                let mut strs = Vec::new();
                chain_strings(b, &mut strs);
                for id in 1..=base_types {
                    e.fix_type(id, &strs);
                }
                e.table.seal();
                e.str_start = u32::try_from(strs.len())
                    .map_err(|_| invalid(0, "the base's strings exceed 4 GiB"))?;
                e.base_strs = Some(StrSet::of_section(strs));
            }
            None => {
                e.strs.add(b"");
            }
        }
        Ok(e)
    }

    /// The record of `id`.
    #[inline]
    fn rec(&self, id: u32) -> Rec<'_> {
        Rec::new(&self.w[self.offs[id as usize] as usize..self.offs[id as usize + 1] as usize])
    }

    #[inline]
    fn kind(&self, id: u32) -> u32 {
        kind_of(self.w[self.offs[id as usize] as usize + 1])
    }

    /// Number of ids including void.
    #[inline]
    fn n_ids(&self) -> u32 {
        // `offs` has one entry per id and one more, and ids are `u32`s (see `load`).
        #[allow(clippy::cast_possible_truncation)]
        let n = self.offs.len() as u32;
        n - 1
    }

    /// Makes `id` a fixed canonical type: indexed by the hash libbpf gives base
    /// types (`btf_dedup_prep`), and named for FWD resolution. `strs` is the base's
    /// string section (the chain's), which its names index.
    fn fix_type(&mut self, id: u32, strs: &[u8]) {
        let r = self.rec(id);
        let keys = |o: u32| {
            let s = strs.get(o as usize..).unwrap_or_default();
            hash::name_key(&s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())])
        };
        let h = hash::prep_hash(r, self.compat, &keys);
        self.fix_hashed(id, h);
    }

    /// [`Engine::fix_type`] with `id`'s hash `h` (None: not indexed).
    fn fix_hashed(&mut self, id: u32, h: Option<u64>) {
        let Some(h) = h else {
            return;
        };
        let r = self.rec(id);
        let (k, name) = (r.kind(), r.name());
        self.table.add(h, id);
        self.anon_add(id);
        if matches!(k, K_STRUCT | K_UNION) {
            self.fixed_names
                .entry(name)
                .and_modify(|v| *v = 0)
                .or_insert(id);
        }
    }

    fn table_add(&mut self, h: u64, id: u32) {
        self.table.add(h, id);
        let slot = self.anon_add(id);
        if let Some(keys) = &mut self.batch_keys {
            keys.push(h);
            self.anon_touched.extend(slot);
        }
    }

    /// Counts `id`, just added to the table, in [`Engine::anon`]; returns its slot
    /// there, if it has one.
    #[inline]
    fn anon_add(&mut self, id: u32) -> Option<(u32, usize)> {
        let (x, k) = anon_slot(self.rec(id))?;
        if let Some(e) = self.anon.get_mut(x as usize) {
            e[k] = if e[k] == 0 { id } else { MANY_REFS };
        }
        Some((x, k))
    }

    /// Counts again the table's entries of the anonymous PTR or CONST `slot` of
    /// [`anon_slot`] (after a batch's provisional entries left the table).
    fn anon_recount(&mut self, (x, k): (u32, usize)) {
        let words = [0, if k == 0 { K_PTR } else { K_CONST } << 24, x];
        let want = Rec::new(&words);
        let mut found = 0;
        let mut node = self.table.first(hash::ref_hash(want));
        while let Some((c, next)) = self.table.next(node) {
            node = next;
            if hash::equal_common(self.rec(c), want) {
                found = if found == 0 { c } else { MANY_REFS };
            }
        }
        if let Some(e) = self.anon.get_mut(x as usize) {
            e[k] = found;
        }
    }

    fn set_map(&mut self, id: u32, to: u32) {
        if id < self.first {
            self.dirty_fixed.push(id);
        }
        self.ids[id as usize].map = to;
    }

    #[inline]
    fn is_mapped(&self, id: u32) -> bool {
        self.ids[id as usize].map <= MAX_ID
    }

    #[inline]
    fn resolve(&self, id: u32) -> u32 {
        resolve_in(&self.ids, id)
    }

    /// A FWD resolved to a STRUCT/UNION becomes that; anything else stays.
    fn resolve_fwd(&self, id: u32) -> u32 {
        if self.kind(id) != K_FWD {
            return id;
        }
        let r = self.resolve(id);
        if self.kind(r) != K_FWD {
            r
        } else {
            id
        }
    }

    /// Adds the types of `batch` (a BTF over the same real base as the engine, or
    /// whole if the engine has none) and deduplicates them against the fixed types.
    /// The survivors become fixed.
    pub fn add_batch(&mut self, batch: &Btf) -> Result<(), DedupError> {
        let s = self.load_batch(batch)?;
        self.process(s)
    }

    /// The first half of [`Engine::add_batch`]: copies `batch` in (after which the
    /// caller may drop it) and returns the batch's first id for [`Engine::process`].
    pub fn load_batch(&mut self, batch: &Btf) -> Result<u32, DedupError> {
        let p = self.prepare_over_base(batch)?;
        self.strs.reserve(batch.strings().len());
        self.load(p, load::Strings::Btf(batch))
    }

    /// [`Engine::load_batch`] for a BTF an encoder built, whose strings are each in
    /// its section once: their offsets are kept as they are (libbpf does not dedup
    /// the strings of a BTF built from scratch) instead of being moved into our set
    /// one by one, which came to the same offsets. The caller writes that section
    /// with the result ([`Engine::to_bytes_with_strings`]).
    pub fn load_encoded_batch(&mut self, batch: &Btf) -> Result<u32, DedupError> {
        let p = self.prepare_over_base(batch)?;
        let str_end = batch.str_end();
        self.load(p, load::Strings::Encoded { str_end })
    }

    /// `batch`'s types flattened and hashed, once it is known to be over our base.
    fn prepare_over_base(&self, batch: &Btf) -> Result<PreparedBatch, DedupError> {
        if batch.base_type_count() != self.base_types || batch.base_str_len() != self.str_start {
            return Err(DedupError::BaseMismatch);
        }
        Ok(self.preparer().prepare(batch.types(), btf_keys(batch)))
    }

    /// [`Engine::load_batch`] for an encoder's batch, prepared by
    /// [`Preparer::prepare`], whose string offsets are kept as they are: its names
    /// are offsets (each string once) into the encoder's section, which ends at
    /// `str_end` so far. The caller writes that section with the result.
    pub fn load_prepared(&mut self, p: PreparedBatch, str_end: u32) -> Result<u32, DedupError> {
        self.load(p, load::Strings::Encoded { str_end })
    }

    /// The second half of [`Engine::add_batch`]: the passes over the batch loaded
    /// from id `s` on.
    pub fn process(&mut self, s: u32) -> Result<(), DedupError> {
        self.process_first(s)?;
        self.process_rest(s)
    }

    /// The passes over the batch loaded from id `s` on before the reference pass:
    /// primitive kinds, structs, FWDs. Types appended after them
    /// ([`Engine::load_more`]) take only the reference pass, as they would in one
    /// batch: none is of the first passes' kinds, and none of the batch's types
    /// refers to them.
    pub fn process_first(&mut self, s: u32) -> Result<(), DedupError> {
        let e = self.n_ids();
        let passes = std::mem::take(&mut self.passes);
        let res = self.run_first_passes(&passes, s, e);
        self.passes = passes;
        res
    }

    /// The reference pass over the types of the batch loaded from id `s` on that
    /// are loaded so far, after [`Engine::process_first`]: their entries leave the
    /// pass's list, so [`Engine::process_rest`] then takes only the types appended
    /// since ([`Engine::load_more`]). The same as one pass over all: the reference
    /// pass goes in id order, the appended types come last, and no type loaded
    /// before them refers to them.
    pub fn process_refs_so_far(&mut self, s: u32) -> Result<(), DedupError> {
        let mut passes = std::mem::take(&mut self.passes);
        let res = passes.refs.iter().try_for_each(|&i| self.ref_type(s + i));
        passes.refs.clear();
        self.passes = passes;
        res
    }

    /// The reference pass over the batch loaded from id `s` on (with what was
    /// appended to it), then its compaction.
    pub fn process_rest(&mut self, s: u32) -> Result<(), DedupError> {
        let e = self.n_ids();
        let passes = std::mem::take(&mut self.passes);
        let res = passes.refs.iter().try_for_each(|&i| self.ref_type(s + i));
        self.passes = passes;
        res?;
        self.commit(s, e)
    }

    /// Touches, for each hash of `keys`, its slot in the candidate table and its
    /// first candidate's record: the look-ups of a pass each wait for a cache miss
    /// there (a fifth of the dedup's time on the corpus vmlinux), and these loads are
    /// independent of each other, so the CPU overlaps their misses.
    ///
    /// Entries whose batch index `skip` names are left alone. Most of the struct
    /// pass's entries are mapped by an earlier check of their batch before their
    /// turn (1.04 million of the 1.42 million on the corpus vmlinux), and
    /// [`Engine::struct_type`] returns at once for those; the ones mapped before
    /// their group of `WARM` is warmed are skipped (checks within the group come
    /// after the warming), so their slots are not loaded for nothing.
    #[inline]
    fn warm(&self, keys: &[(u32, u64)], skip: impl Fn(u32) -> bool) {
        let mut acc = 0u32;
        for &(i, h) in keys {
            if skip(i) {
                continue;
            }
            let c = self.table.peek(h);
            if let Some(&o) = self.offs.get(c as usize) {
                acc ^= self.w.get(o as usize + 1).copied().unwrap_or(0);
            }
        }
        std::hint::black_box(acc);
    }

    fn run_first_passes(&mut self, p: &load::Passes, s: u32, e: u32) -> Result<(), DedupError> {
        // The passes' lists hold indices in the batch, which starts at `s`.
        for chunk in p.prims.chunks(WARM) {
            self.warm(chunk, |_| false);
            for &(i, h) in chunk {
                self.prim_type(s + i, h);
            }
        }
        for chunk in p.structs.chunks(WARM) {
            self.warm(chunk, |i| self.is_mapped(s + i));
            for &(i, h) in chunk {
                self.struct_type(s + i, h)?;
            }
        }
        if self.batch_keys.is_none() {
            // Incremental batches leave this to the final pass: whether a name is
            // unique is only known once every batch is in.
            self.resolve_fwds(s, e);
        }
        Ok(())
    }

    /// Real base types resolved for good to kept types by the batches so far, as
    /// (base id, kept id): the state an incremental dedup's final pass starts from.
    pub fn base_resolved(&self) -> &[(u32, u32)] {
        &self.base_resolved
    }

    /// Prepares the final pass of an incremental dedup, after [`Engine::load_batch`]
    /// of a BTF whose first `kept` own types are the incremental dedup's kept types:
    /// the base types the batches resolved start resolved (`resolved`, from
    /// [`Engine::base_resolved`]), and the kept STRUCT/UNION/TYPEDEFs are not
    /// compared with base types again. Each was compared with every base candidate
    /// in its batch, against the same immutable base and with these resolutions, as
    /// libbpf's one-shot dedup compares it once; redoing it over the already
    /// deduplicated kept set would merge types libbpf keeps (one kept only because
    /// its check was the first to need a base FWD resolved is, once its references
    /// are remapped, identical to its base twin). Only the checks between kept
    /// types, where a batch treated earlier kept FWDs as fixed, are redone.
    pub fn set_settled(&mut self, kept: u32, resolved: &[(u32, u32)]) -> Result<(), DedupError> {
        let own = self.n_ids() - self.first;
        if kept > own {
            return Err(invalid(
                self.first,
                format!("final pass over {own} types, fewer than the {kept} kept"),
            ));
        }
        for &(b, k) in resolved {
            if b == 0 || b > self.base_types || k >= self.first + kept {
                return Err(invalid(b, format!("resolution to {k} is out of range")));
            }
            self.ids[b as usize].map = k;
        }
        self.settled_end = self.first + kept;
        Ok(())
    }

    /// Kept id of each type of the last batch (incremental mode), in batch order.
    pub fn last_kept(&self) -> &[u32] {
        &self.last_kept
    }

    /// Number of types kept so far past the real base.
    pub fn own_types(&self) -> u32 {
        self.n_ids() - 1 - self.base_types
    }
}

/// What the engine keeps per id: see [`Engine::ids`].
#[derive(Clone, Copy, Debug)]
struct IdSlot {
    /// The canonical id, or a marker.
    map: u32,
    /// The candidate a running equivalence check pairs this canonical id with.
    hypot: u32,
}

impl IdSlot {
    fn new(map: u32, hypot: u32) -> IdSlot {
        IdSlot { map, hypot }
    }
}

/// The end of `id`'s chain in the map (see [`Engine::resolve`]), for callers
/// that hold other fields of the engine mutably.
#[inline]
fn resolve_in(ids: &[IdSlot], mut id: u32) -> u32 {
    loop {
        let m = ids[id as usize].map;
        if m > MAX_ID || m == id {
            return id;
        }
        id = m;
    }
}
