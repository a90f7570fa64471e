//! The dedup passes, with libbpf's semantics (see the module doc of `dedup`).
//!
//! One [`Engine`] holds a fixed, already canonical part (a split BTF's base, or in
//! the incremental mode the types kept so far) and processes one batch of new types
//! at a time: strings, primitive kinds, structs/unions (and typedefs), FWD
//! resolution, reference kinds, then compaction and id remapping. A one-shot dedup is
//! one batch.

use super::flat::*;
use super::fxhash::FxHashMap;
use super::strset::{StrIndex, StrSet};
use super::table::CandTable;
use super::{Compat, DedupError};
use crate::btf::write::RawWriter;
use crate::btf::{Btf, Endian, KindLayout, StrOffset, Type};

/// A type not looked at yet.
const UNPROCESSED: u32 = u32::MAX;
/// A reference type whose referenced types are being resolved (a loop if met again).
const IN_PROGRESS: u32 = u32::MAX - 1;
/// Ids above this are the two markers.
const MAX_ID: u32 = 0x7fff_ffff;
/// How deep libbpf looks for structurally identical types inside one CU.
const IDENTICAL_DEPTH: i32 = 16;

#[inline]
fn hc(h: u64, v: u32) -> u64 {
    h.wrapping_mul(31).wrapping_add(v as u64)
}

/// Hash of name, info and size/type (libbpf's `btf_hash_common`).
#[inline]
fn hash_common(r: &[u32]) -> u64 {
    hc(hc(hc(0, r[0]), r[1]), r[2])
}

#[inline]
fn equal_common(a: &[u32], b: &[u32]) -> bool {
    a[..3] == b[..3]
}

#[inline]
fn is_any_enum(r: &[u32]) -> bool {
    matches!(kind_of(r[1]), K_ENUM | K_ENUM64)
}

#[inline]
fn is_enum_fwd(r: &[u32]) -> bool {
    is_any_enum(r) && vlen_of(r[1]) == 0
}

/// Same name, info, size and enumerators.
#[inline]
fn equal_enum(a: &[u32], b: &[u32]) -> bool {
    equal_common(a, b) && a[3..] == b[3..]
}

/// Same name, info, size, and member names and offsets (not member types).
#[inline]
fn shallow_equal_struct(a: &[u32], b: &[u32]) -> bool {
    if !equal_common(a, b) {
        return false;
    }
    let n = vlen_of(a[1]);
    (0..n).all(|i| {
        let j = 3 + 3 * i;
        a[j] == b[j] && a[j + 2] == b[j + 2]
    })
}

#[inline]
fn compat_array(a: &[u32], b: &[u32]) -> bool {
    equal_common(a, b) && a[5] == b[5]
}

/// Same name, info and parameter names (not the return or parameter types).
#[inline]
fn compat_fnproto(a: &[u32], b: &[u32]) -> bool {
    if a[0] != b[0] || a[1] != b[1] {
        return false;
    }
    (0..vlen_of(a[1])).all(|i| a[3 + 2 * i] == b[3 + 2 * i])
}

#[inline]
fn equal_typedef(a: &[u32], b: &[u32]) -> bool {
    a[0] == b[0] && a[1] == b[1]
}

/// The FWD's kind: STRUCT, or UNION with the kflag.
#[inline]
fn fwd_kind(r: &[u32]) -> u32 {
    if r[1] >> 31 == 1 {
        K_UNION
    } else {
        K_STRUCT
    }
}

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
    /// Canonical id of each type, or a marker.
    map: Vec<u32>,
    /// Hypothetical canonical → candidate mapping of one equivalence check.
    hypot: Vec<u32>,
    hypot_list: Vec<u32>,
    /// The last equivalence check would need a fixed FWD resolved.
    adjust_canon: bool,
    table: CandTable,
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
    base_strs: Option<StrIndex>,
    str_start: u32,
    cand_buf: Vec<u32>,
    /// Kept id of each type of the last incremental batch (see `Engine::process`).
    last_kept: Vec<u32>,
    eq_stack: Vec<(u32, u32)>,
    ref_stack: Vec<(u32, usize)>,
}

/// Where a batch's string offsets point.
#[derive(Clone, Copy)]
enum Src<'a> {
    /// Into this BTF's strings: each string is moved into our set.
    Btf(&'a Btf),
    /// Into an encoder's section, ending at `str_end`: offsets are kept.
    Encoded { first_id: u32, str_end: u32 },
}

impl Src<'_> {
    fn first_id(&self) -> u32 {
        match self {
            Src::Btf(b) => b.first_id().0,
            Src::Encoded { first_id, .. } => *first_id,
        }
    }
}

fn invalid(id: u32, what: impl Into<String>) -> DedupError {
    DedupError::Invalid {
        id,
        what: what.into(),
    }
}

/// All strings of `btf`'s base chain and own section, root first.
fn chain_strings(btf: &Btf, out: &mut Vec<u8>) {
    if let Some(b) = btf.base() {
        chain_strings(b, out);
    }
    out.extend_from_slice(btf.strings());
}

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
            map: vec![0],
            hypot: vec![UNPROCESSED],
            hypot_list: Vec::new(),
            adjust_canon: false,
            table: CandTable::default(),
            batch_keys: incremental.then(Vec::new),
            dirty_fixed: Vec::new(),
            base_resolved: Vec::new(),
            settled_end: 0,
            fixed_names: FxHashMap::default(),
            strs: StrSet::default(),
            base_strs: None,
            str_start: 0,
            cand_buf: Vec::new(),
            last_kept: Vec::new(),
            eq_stack: Vec::new(),
            ref_stack: Vec::new(),
        };
        match base {
            Some(b) => {
                let mut w = Vec::with_capacity(b.type_count() as usize * 8);
                for id in 1..=base_types {
                    let t = b.get(crate::btf::TypeId(id)).expect("id within the base");
                    push_type(&mut w, t);
                    e.w.extend_from_slice(&w);
                    w.clear();
                    e.offs.push(e.w.len() as u32);
                    let r = e.rec(id);
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
                e.map.extend(1..=base_types);
                e.hypot.resize(base_types as usize + 1, UNPROCESSED);
                for id in 1..=base_types {
                    e.fix_type(id);
                }
                let mut strs = Vec::new();
                chain_strings(b, &mut strs);
                e.str_start = strs.len() as u32;
                e.base_strs = Some(StrIndex::new(strs));
            }
            None => {
                e.strs.add(b"");
            }
        }
        Ok(e)
    }

    /// The record of `id`.
    #[inline]
    fn rec(&self, id: u32) -> &[u32] {
        &self.w[self.offs[id as usize] as usize..self.offs[id as usize + 1] as usize]
    }

    #[inline]
    fn kind(&self, id: u32) -> u32 {
        kind_of(self.w[self.offs[id as usize] as usize + 1])
    }

    /// Number of ids including void.
    #[inline]
    fn n_ids(&self) -> u32 {
        self.offs.len() as u32 - 1
    }

    /// Makes `id` a fixed canonical type: indexed by the hash libbpf gives base
    /// types (`btf_dedup_prep`), and named for FWD resolution.
    fn fix_type(&mut self, id: u32) {
        let Some(h) = self.prep_hash(id) else { return };
        self.table.add(h, id);
        let r = self.rec(id);
        if matches!(kind_of(r[1]), K_STRUCT | K_UNION) {
            let name = r[0];
            self.fixed_names
                .entry(name)
                .and_modify(|v| *v = 0)
                .or_insert(id);
        }
    }

    fn prep_hash(&self, id: u32) -> Option<u64> {
        let r = self.rec(id);
        Some(match kind_of(r[1]) {
            K_VAR | K_DATASEC => return None,
            K_TYPEDEF if self.compat == Compat::Upstream => self.hash_typedef(r),
            K_CONST | K_VOLATILE | K_RESTRICT | K_PTR | K_FWD | K_TYPEDEF | K_FUNC | K_FLOAT
            | K_TYPE_TAG => hash_common(r),
            K_INT | K_DECL_TAG => hash_int_tag(r),
            K_ENUM | K_ENUM64 => self.hash_enum(r),
            K_STRUCT | K_UNION => hash_struct(r),
            K_ARRAY => hash_array(r),
            K_FUNC_PROTO => hash_fnproto(r),
            _ => return None,
        })
    }

    fn hash_typedef(&self, r: &[u32]) -> u64 {
        hc(hc(0, r[0]), r[1])
    }

    /// Name only: an enum FWD must meet the full ENUM or ENUM64 of any size.
    fn hash_enum(&self, r: &[u32]) -> u64 {
        hc(0, r[0])
    }

    /// Equal enums, or an enum FWD and any enum of its name.
    fn compat_enum(&self, a: &[u32], b: &[u32]) -> bool {
        if !is_enum_fwd(a) && !is_enum_fwd(b) {
            return equal_enum(a, b);
        }
        a[0] == b[0] && is_any_enum(a) && is_any_enum(b)
    }

    fn table_add(&mut self, h: u64, id: u32) {
        self.table.add(h, id);
        if let Some(keys) = &mut self.batch_keys {
            keys.push(h);
        }
    }

    fn set_map(&mut self, id: u32, to: u32) {
        if id < self.first {
            self.dirty_fixed.push(id);
        }
        self.map[id as usize] = to;
    }

    /// Candidates under `h` in libbpf's order, into `cand_buf`.
    fn load_cands(&mut self, h: u64) -> Vec<u32> {
        let mut buf = std::mem::take(&mut self.cand_buf);
        buf.clear();
        self.table.get_into(h, &mut buf);
        buf
    }

    #[inline]
    fn is_mapped(&self, id: u32) -> bool {
        self.map[id as usize] <= MAX_ID
    }

    #[inline]
    fn resolve(&self, mut id: u32) -> u32 {
        loop {
            let m = self.map[id as usize];
            if m > MAX_ID || m == id {
                return id;
            }
            id = m;
        }
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
    /// Seeds the string set with `batch`'s own strings, in their order: libbpf
    /// skips string dedup for a BTF built from scratch (`strs_deduped`), so its
    /// output keeps the encoder's string section as it is, unused strings included.
    pub fn keep_strings_of(&mut self, batch: &Btf) {
        for s in batch.strings().split(|&b| b == 0).filter(|s| !s.is_empty()) {
            self.strs.add(s);
        }
    }

    pub fn load_batch(&mut self, batch: &Btf) -> Result<u32, DedupError> {
        if batch.base_type_count() != self.base_types || batch.base_str_len() != self.str_start {
            return Err(DedupError::BaseMismatch);
        }
        let s = self.n_ids();
        self.strs.reserve(batch.strings().len());
        self.load(batch.types(), Src::Btf(batch), s)?;
        Ok(s)
    }

    /// [`Engine::load_batch`] for an encoder's batch whose string offsets are kept as
    /// they are: `types` are numbered from `first_id`, and their names are offsets
    /// (each string once) into the encoder's section, which ends at `str_end` so
    /// far. The caller writes that section with the result.
    pub fn load_encoded(
        &mut self,
        types: &[Type],
        first_id: u32,
        str_end: u32,
    ) -> Result<u32, DedupError> {
        if first_id != self.base_types + 1 {
            return Err(DedupError::BaseMismatch);
        }
        let s = self.n_ids();
        self.load(types, Src::Encoded { first_id, str_end }, s)?;
        Ok(s)
    }

    /// The second half of [`Engine::add_batch`]: the passes over the batch loaded
    /// from id `s` on.
    pub fn process(&mut self, s: u32) -> Result<(), DedupError> {
        let e = self.n_ids();
        for id in s..e {
            self.prim_type(id);
        }
        for id in s..e {
            self.struct_type(id)?;
        }
        if self.batch_keys.is_none() {
            // Incremental batches leave this to the final pass: whether a name is
            // unique is only known once every batch is in.
            self.resolve_fwds(s, e);
        }
        for id in s..e {
            self.ref_type(id)?;
        }
        self.commit(s, e)
    }

    /// Appends `batch`'s records with ids renumbered from `s` and strings moved into
    /// our string set (libbpf's `btf_dedup_strings`, in the same visiting order).
    fn load(&mut self, types: &[Type], batch: Src<'_>, s: u32) -> Result<(), DedupError> {
        let base = self.base_types;
        let own = types.len() as u32;
        let last_local = base + own;
        let mut w = std::mem::take(&mut self.w);
        let n = types.len();
        w.reserve(n * 8);
        self.offs.reserve(n);
        self.map.reserve(n);
        self.hypot.reserve(n);
        // Most string offsets recur within a batch (member names).
        let mut memo: FxHashMap<u32, u32> = FxHashMap::default();
        for (i, t) in types.iter().enumerate() {
            let id = s + i as u32;
            let start = w.len();
            push_type(&mut w, t);
            let r = &mut w[start..];
            let mut bad = None;
            for_each_ref_pos(r[1], |p| {
                let x = r[p];
                if x > last_local {
                    bad = Some(x);
                } else if x > base {
                    r[p] = x - base - 1 + s;
                }
            });
            if let Some(x) = bad {
                self.w = w;
                return Err(invalid(
                    batch.first_id() + i as u32,
                    format!("refers to type {x}, past the last type"),
                ));
            }
            let mut bad_str = None;
            for_each_str_pos(r[1], |p| {
                let off = r[p];
                if off == 0 || off < self.str_start || bad_str.is_some() {
                    return;
                }
                let batch = match batch {
                    Src::Encoded { str_end, .. } => {
                        // The encoder's offsets, kept: one per string.
                        if off >= str_end {
                            bad_str = Some(off);
                        }
                        return;
                    }
                    Src::Btf(b) => b,
                };
                // Most offsets recur (member names): remember each one's new offset.
                if let Some(&o) = memo.get(&off) {
                    r[p] = o;
                    return;
                }
                match batch.str_bytes(StrOffset(off)) {
                    Some(bytes) => {
                        let o = match self.base_strs.as_ref().and_then(|b| b.find(bytes)) {
                            Some(o) => o,
                            None => self.str_start + self.strs.add(bytes),
                        };
                        memo.insert(off, o);
                        r[p] = o;
                    }
                    None => bad_str = Some(off),
                }
            });
            if let Some(off) = bad_str {
                self.w = w;
                return Err(DedupError::BadString {
                    id: batch.first_id() + i as u32,
                    offset: off,
                });
            }
            self.offs.push(w.len() as u32);
            let k = kind_of(w[start + 1]);
            self.map.push(if k == K_VAR || k == K_DATASEC {
                id
            } else {
                UNPROCESSED
            });
        }
        self.w = w;
        self.hypot.resize((s + own) as usize, UNPROCESSED);
        Ok(())
    }

    /// INT, ENUM, ENUM64, FWD, FLOAT (libbpf's `btf_dedup_prim_type`).
    fn prim_type(&mut self, id: u32) {
        let r = self.rec(id);
        let h = match kind_of(r[1]) {
            K_INT => hash_int_tag(r),
            K_ENUM | K_ENUM64 => self.hash_enum(r),
            K_FWD | K_FLOAT => hash_common(r),
            _ => return,
        };
        let k = kind_of(r[1]);
        let cands = self.load_cands(h);
        let mut new = id;
        for &c in &cands {
            let (t, cr) = (self.rec(id), self.rec(c));
            match k {
                K_INT if hash_int_tag_eq(t, cr) => {
                    new = c;
                    break;
                }
                K_ENUM | K_ENUM64 => {
                    if equal_enum(t, cr) {
                        new = c;
                        break;
                    }
                    if self.compat_enum(t, cr) {
                        if is_enum_fwd(t) {
                            new = c;
                            break;
                        }
                        // The canonical enum FWD now resolves to this full enum.
                        self.set_map(c, id);
                    }
                }
                K_FWD | K_FLOAT if equal_common(t, cr) => {
                    new = c;
                    break;
                }
                _ => {}
            }
        }
        self.cand_buf = cands;
        self.map[id as usize] = new;
        if new == id {
            self.table_add(h, id);
        }
    }

    /// STRUCT, UNION and (upstream) TYPEDEF by graph equivalence (libbpf's
    /// `btf_dedup_struct_type`).
    fn struct_type(&mut self, id: u32) -> Result<(), DedupError> {
        if self.is_mapped(id) {
            return Ok(());
        }
        let r = self.rec(id);
        let k = kind_of(r[1]);
        let typedef = k == K_TYPEDEF && self.compat == Compat::Upstream;
        if !(k == K_STRUCT || k == K_UNION || typedef) {
            return Ok(());
        }
        let h = if typedef {
            self.hash_typedef(r)
        } else {
            hash_struct(r)
        };
        let cands = self.load_cands(h);
        let settled = id < self.settled_end;
        let mut new = id;
        let mut result = Ok(());
        for &c in &cands {
            if settled && c <= self.base_types {
                continue;
            }
            let (t, cr) = (self.rec(id), self.rec(c));
            let shallow = if typedef {
                equal_typedef(t, cr)
            } else {
                shallow_equal_struct(t, cr)
            };
            if !shallow {
                continue;
            }
            self.clear_hypot();
            match self.is_equiv(id, c) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
            self.merge_hypot();
            if self.adjust_canon {
                continue;
            }
            new = c;
            break;
        }
        self.cand_buf = cands;
        result?;
        self.map[id as usize] = new;
        if new == id {
            self.table_add(h, id);
        }
        Ok(())
    }

    fn clear_hypot(&mut self) {
        for &x in &self.hypot_list {
            self.hypot[x as usize] = UNPROCESSED;
        }
        self.hypot_list.clear();
        self.adjust_canon = false;
    }

    /// Whether the graphs of `cand` and `canon` are equivalent (libbpf's
    /// `btf_dedup_is_equiv`), recording the hypothetical mapping. libbpf recurses
    /// depth first and stops at the first difference; we walk the same preorder with
    /// an explicit stack, so deep graphs cannot overflow ours.
    fn is_equiv(&mut self, cand: u32, canon: u32) -> Result<bool, DedupError> {
        let mut stack = std::mem::take(&mut self.eq_stack);
        stack.clear();
        stack.push((cand, canon));
        let mut res = Ok(true);
        while let Some((a, b)) = stack.pop() {
            match self.equiv_step(a, b, &mut stack) {
                Ok(true) => {}
                other => {
                    res = other;
                    break;
                }
            }
        }
        self.eq_stack = stack;
        res
    }

    /// One node of the equivalence walk; pushes the pairs still to compare, last
    /// first.
    fn equiv_step(
        &mut self,
        cand: u32,
        canon: u32,
        stack: &mut Vec<(u32, u32)>,
    ) -> Result<bool, DedupError> {
        if self.resolve(cand) == self.resolve(canon) {
            return Ok(true);
        }
        let canon = self.resolve_fwd(canon);
        let hyp = self.hypot[canon as usize];
        if hyp <= MAX_ID {
            return Ok(hyp == cand || self.identical(hyp, cand));
        }
        self.hypot_list.push(canon);
        self.hypot[canon as usize] = cand;

        let (ct, nt) = (self.rec(cand), self.rec(canon));
        let (ck, nk) = (kind_of(ct[1]), kind_of(nt[1]));
        if ct[0] != nt[0] {
            return Ok(false);
        }
        if (ck == K_FWD || nk == K_FWD) && ck != nk {
            let (real, fwd) = if ck == K_FWD {
                (nk, fwd_kind(ct))
            } else {
                let fwd = fwd_kind(nt);
                if fwd == ck && canon < self.first {
                    // A fixed FWD would have to be resolved: not allowed.
                    self.adjust_canon = true;
                }
                (ck, fwd)
            };
            return Ok(real == fwd);
        }
        if ck != nk {
            return Ok(false);
        }
        match ck {
            K_INT => Ok(hash_int_tag_eq(ct, nt)),
            K_ENUM | K_ENUM64 => Ok(self.compat_enum(ct, nt)),
            K_FWD | K_FLOAT => Ok(equal_common(ct, nt)),
            K_CONST | K_VOLATILE | K_RESTRICT | K_PTR | K_TYPEDEF | K_FUNC | K_TYPE_TAG => {
                if ct[1] != nt[1] {
                    return Ok(false);
                }
                stack.push((ct[2], nt[2]));
                Ok(true)
            }
            K_ARRAY => {
                if !compat_array(ct, nt) {
                    return Ok(false);
                }
                stack.push((ct[3], nt[3]));
                stack.push((ct[4], nt[4]));
                Ok(true)
            }
            K_STRUCT | K_UNION => {
                if !shallow_equal_struct(ct, nt) {
                    return Ok(false);
                }
                for i in (0..vlen_of(ct[1])).rev() {
                    stack.push((ct[3 + 3 * i + 1], nt[3 + 3 * i + 1]));
                }
                Ok(true)
            }
            K_FUNC_PROTO => {
                if !compat_fnproto(ct, nt) {
                    return Ok(false);
                }
                for i in (0..vlen_of(ct[1])).rev() {
                    stack.push((ct[3 + 2 * i + 1], nt[3 + 2 * i + 1]));
                }
                stack.push((ct[2], nt[2]));
                Ok(true)
            }
            _ => Err(invalid(
                cand,
                format!("kind {ck} cannot be part of a struct's type graph"),
            )),
        }
    }

    /// Whether two different ids of one candidate graph describe the same type
    /// (compilers sometimes emit duplicates within one CU).
    fn identical(&self, a: u32, b: u32) -> bool {
        match self.compat {
            Compat::Upstream => {
                let mut budget = self.n_ids() as usize + 16;
                self.identical_types(a, b, IDENTICAL_DEPTH, &mut budget)
            }
            Compat::Libbpf1_1 => {
                let (t1, t2) = (self.rec(a), self.rec(b));
                let (k1, k2) = (kind_of(t1[1]), kind_of(t2[1]));
                if k1 == K_ARRAY && k2 == K_ARRAY {
                    return equal_common(t1, t2) && t1[3..6] == t2[3..6];
                }
                (k1 == K_STRUCT || k1 == K_UNION)
                    && k1 == k2
                    && shallow_equal_struct(t1, t2)
                    && (0..vlen_of(t1[1])).all(|i| t1[3 + 3 * i + 1] == t2[3 + 3 * i + 1])
            }
        }
    }

    /// libbpf's `btf_dedup_identical_types`. `budget` bounds the modifier chains,
    /// which libbpf follows without a limit (a loop of modifiers, impossible in C,
    /// would hang it).
    fn identical_types(&self, mut a: u32, mut b: u32, depth: i32, budget: &mut usize) -> bool {
        loop {
            if depth <= 0 || *budget == 0 {
                return false;
            }
            *budget -= 1;
            let (t1, t2) = (self.rec(a), self.rec(b));
            let k = kind_of(t1[1]);
            if k != kind_of(t2[1]) {
                return false;
            }
            return match k {
                0 => true,
                K_INT => hash_int_tag_eq(t1, t2),
                K_ENUM | K_ENUM64 => self.compat_enum(t1, t2),
                K_FWD | K_FLOAT => equal_common(t1, t2),
                K_CONST | K_VOLATILE | K_RESTRICT | K_PTR | K_TYPEDEF | K_FUNC | K_TYPE_TAG => {
                    if t1[1] != t2[1] || t1[0] != t2[0] {
                        return false;
                    }
                    a = t1[2];
                    b = t2[2];
                    continue;
                }
                // libbpf compares the first array's element and index types with
                // themselves here, so only the shallow check counts.
                K_ARRAY => compat_array(t1, t2),
                K_STRUCT | K_UNION => {
                    shallow_equal_struct(t1, t2)
                        && (0..vlen_of(t1[1])).all(|i| {
                            let (x, y) = (t1[3 + 3 * i + 1], t2[3 + 3 * i + 1]);
                            x == y || self.identical_types(x, y, depth - 1, budget)
                        })
                }
                K_FUNC_PROTO => {
                    compat_fnproto(t1, t2)
                        && (t1[2] == t2[2] || self.identical_types(t1[2], t2[2], depth - 1, budget))
                        && (0..vlen_of(t1[1])).all(|i| {
                            let (x, y) = (t1[3 + 2 * i + 1], t2[3 + 2 * i + 1]);
                            x == y || self.identical_types(x, y, depth - 1, budget)
                        })
                }
                _ => false,
            };
        }
    }

    /// Records what a successful equivalence check established (libbpf's
    /// `btf_dedup_merge_hypot_map`): FWDs resolved, and structs mapped early.
    fn merge_hypot(&mut self) {
        for i in 0..self.hypot_list.len() {
            let canon = self.hypot_list[i];
            let targ = self.hypot[canon as usize];
            let t = self.resolve(targ);
            let c = self.resolve(canon);
            let (tk, ck) = (self.kind(t), self.kind(c));
            if tk != K_FWD && ck == K_FWD {
                self.set_map(c, t);
            }
            if self.adjust_canon {
                continue;
            }
            if tk == K_FWD && ck != K_FWD {
                self.set_map(t, c);
            }
            if (tk == K_STRUCT || tk == K_UNION)
                && ck != K_FWD
                && self.is_mapped(c)
                && !self.is_mapped(t)
            {
                self.set_map(t, c);
            }
        }
    }

    /// Maps each unresolved FWD to the one canonical STRUCT/UNION of its name, if
    /// there is exactly one (libbpf's `btf_dedup_resolve_fwds`).
    fn resolve_fwds(&mut self, s: u32, e: u32) {
        let mut batch_names: FxHashMap<u32, u32> = FxHashMap::default();
        for id in s..e {
            let r = self.rec(id);
            if matches!(kind_of(r[1]), K_STRUCT | K_UNION) && self.map[id as usize] == id {
                batch_names.entry(r[0]).and_modify(|v| *v = 0).or_insert(id);
            }
        }
        for id in s..e {
            let r = self.rec(id);
            if kind_of(r[1]) != K_FWD || self.map[id as usize] != id {
                continue;
            }
            let cand = match (self.fixed_names.get(&r[0]), batch_names.get(&r[0])) {
                (Some(&x), None) | (None, Some(&x)) => x,
                _ => continue,
            };
            if cand == 0 {
                continue;
            }
            if self.kind(cand) != fwd_kind(r) {
                continue;
            }
            self.map[id as usize] = cand;
        }
    }

    /// Reference kinds, after their referenced types (libbpf's recursive
    /// `btf_dedup_ref_type`, walked with an explicit stack).
    fn ref_type(&mut self, root: u32) -> Result<u32, DedupError> {
        let mut stack = std::mem::take(&mut self.ref_stack);
        stack.clear();
        let res = self.ref_walk(root, &mut stack);
        self.ref_stack = stack;
        res
    }

    fn ref_walk(&mut self, root: u32, stack: &mut Vec<(u32, usize)>) -> Result<u32, DedupError> {
        // Some(canonical id) of the type just entered or finished, to store in its
        // referrer's record.
        let mut value = self.ref_enter(root, stack)?;
        loop {
            let Some(&(id, child)) = stack.last() else {
                return Ok(value.expect("a finished walk has a value"));
            };
            if let Some(v) = value.take() {
                let pos = self.ref_pos(id, child - 1);
                let o = self.offs[id as usize] as usize;
                self.w[o + pos] = v;
            }
            if child < self.ref_count(id) {
                let pos = self.ref_pos(id, child);
                let top = stack.len() - 1;
                stack[top].1 += 1;
                let target = self.rec(id)[pos];
                value = self.ref_enter(target, stack)?;
                continue;
            }
            stack.pop();
            value = Some(self.ref_finish(id));
        }
    }

    /// Starts `id`: its canonical id if known, else marks it in progress and pushes it.
    fn ref_enter(
        &mut self,
        id: u32,
        stack: &mut Vec<(u32, usize)>,
    ) -> Result<Option<u32>, DedupError> {
        let m = self.map[id as usize];
        if m == IN_PROGRESS {
            return Err(DedupError::Loop { id });
        }
        if m <= MAX_ID {
            return Ok(Some(self.resolve(id)));
        }
        match self.kind(id) {
            K_CONST | K_VOLATILE | K_RESTRICT | K_PTR | K_FUNC | K_TYPE_TAG | K_DECL_TAG
            | K_ARRAY | K_FUNC_PROTO => {}
            K_TYPEDEF if self.compat == Compat::Libbpf1_1 => {}
            k => {
                return Err(invalid(
                    id,
                    format!("kind {k} left unprocessed before the reference pass"),
                ))
            }
        }
        self.map[id as usize] = IN_PROGRESS;
        stack.push((id, 0));
        Ok(None)
    }

    /// Number of referenced ids the reference pass resolves for `id`.
    fn ref_count(&self, id: u32) -> usize {
        let r = self.rec(id);
        match kind_of(r[1]) {
            K_ARRAY => 2,
            K_FUNC_PROTO => 1 + vlen_of(r[1]),
            _ => 1,
        }
    }

    /// Word index of the `i`-th referenced id, in libbpf's order (an array's element
    /// type before its index type; a prototype's return type before its parameters).
    fn ref_pos(&self, id: u32, i: usize) -> usize {
        match self.kind(id) {
            K_ARRAY => 3 + i,
            K_FUNC_PROTO if i > 0 => 3 + 2 * (i - 1) + 1,
            _ => 2,
        }
    }

    /// All of `id`'s references are canonical: find its equal or make it canonical.
    fn ref_finish(&mut self, id: u32) -> u32 {
        let r = self.rec(id);
        let k = kind_of(r[1]);
        let h = match k {
            K_DECL_TAG => hash_int_tag(r),
            K_ARRAY => hash_array(r),
            K_FUNC_PROTO => hash_fnproto(r),
            _ => hash_common(r),
        };
        let cands = self.load_cands(h);
        let mut new = id;
        for &c in &cands {
            let (t, cr) = (self.rec(id), self.rec(c));
            let eq = match k {
                K_DECL_TAG => hash_int_tag_eq(t, cr),
                K_ARRAY => equal_common(t, cr) && t[3..6] == cr[3..6],
                K_FUNC_PROTO => equal_common(t, cr) && t[3..] == cr[3..],
                _ => equal_common(t, cr),
            };
            if eq {
                new = c;
                break;
            }
        }
        self.cand_buf = cands;
        self.map[id as usize] = new;
        if new == id {
            self.table_add(h, id);
        }
        new
    }

    /// Keeps the canonical types of the batch, renumbered in order, with every
    /// reference rewritten to its final id (libbpf's compaction and remapping).
    fn commit(&mut self, s: u32, e: u32) -> Result<(), DedupError> {
        let mut new_ids = vec![UNPROCESSED; (e - s) as usize];
        let mut next = s;
        for id in s..e {
            if self.map[id as usize] == id {
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
        let mut out: Vec<u32> = Vec::new();
        let mut out_offs: Vec<u32> = Vec::new();
        for id in s..e {
            if self.map[id as usize] != id {
                continue;
            }
            let start = out.len();
            out.extend_from_slice(self.rec(id));
            let mut bad = None;
            for_each_ref_pos(out[start + 1], |p| {
                let x = self.resolve(out[start + p]);
                let y = if x < s { x } else { new_ids[(x - s) as usize] };
                if y == UNPROCESSED {
                    bad = Some(x);
                }
                out[start + p] = y;
            });
            if let Some(x) = bad {
                return Err(invalid(
                    id,
                    format!("refers to type {x}, which has no canonical copy"),
                ));
            }
            out_offs.push(out.len() as u32);
        }
        let base_len = self.offs[s as usize];
        self.w.truncate(base_len as usize);
        self.w.extend_from_slice(&out);
        self.offs.truncate(s as usize + 1);
        self.offs.extend(out_offs.iter().map(|o| o + base_len));
        self.clear_hypot();
        let incremental = self.batch_keys.is_some();
        for x in std::mem::take(&mut self.dirty_fixed) {
            // libbpf never undoes a change to the map: a base FWD (or enum FWD) that a
            // batch resolved stays resolved, to that type's kept copy, for every later
            // batch, as for the rest of a one-shot dedup. Kept types, fixed only in
            // the incremental mode, go back to themselves: the final pass redoes
            // those resolutions among kept types.
            let r = self.resolve(x);
            let to = if r < s { r } else { new_ids[(r - s) as usize] };
            if incremental && x <= self.base_types && to != x && to != UNPROCESSED {
                self.map[x as usize] = to;
                match self.base_resolved.iter_mut().find(|(b, _)| *b == x) {
                    Some(e) => e.1 = to,
                    None => self.base_resolved.push((x, to)),
                }
            } else {
                self.map[x as usize] = x;
            }
        }
        self.map.truncate(s as usize);
        self.map.extend(s..next);
        self.hypot.truncate(s as usize);
        self.hypot.resize(next as usize, UNPROCESSED);
        self.first = next;
        if let Some(mut keys) = self.batch_keys.take() {
            keys.sort_unstable();
            keys.dedup();
            for &k in &keys {
                self.table.remove_from(k, s);
            }
            keys.clear();
            self.batch_keys = Some(keys);
            for id in s..next {
                self.fix_type(id);
            }
        }
        Ok(())
    }

    /// Number of types kept so far past the real base.
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
            self.map[b as usize] = k;
        }
        self.settled_end = self.first + kept;
        Ok(())
    }

    /// Kept id of each type of the last batch (incremental mode), in batch order.
    pub fn last_kept(&self) -> &[u32] {
        &self.last_kept
    }

    pub fn own_types(&self) -> u32 {
        self.n_ids() - 1 - self.base_types
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

#[inline]
fn hash_int_tag(r: &[u32]) -> u64 {
    hc(hash_common(r), r[3])
}

#[inline]
fn hash_int_tag_eq(a: &[u32], b: &[u32]) -> bool {
    a[..4] == b[..4]
}

fn hash_struct(r: &[u32]) -> u64 {
    let mut h = hash_common(r);
    for i in 0..vlen_of(r[1]) {
        h = hc(h, r[3 + 3 * i]);
        h = hc(h, r[3 + 3 * i + 2]);
    }
    h
}

fn hash_array(r: &[u32]) -> u64 {
    hc(hc(hc(hash_common(r), r[3]), r[4]), r[5])
}

fn hash_fnproto(r: &[u32]) -> u64 {
    let mut h = hash_common(r);
    for i in 0..vlen_of(r[1]) {
        h = hc(h, r[3 + 2 * i]);
        h = hc(h, r[3 + 2 * i + 1]);
    }
    h
}
