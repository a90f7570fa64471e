//! The primitive kinds (libbpf's `btf_dedup_prim_type`), and STRUCT/UNION (and
//! upstream's TYPEDEF) by graph equivalence (`btf_dedup_struct_type`,
//! `btf_dedup_is_equiv`), then the resolution of FWDs by name
//! (`btf_dedup_resolve_fwds`).

use super::super::flat::*;
use super::hash::*;
use super::{invalid, Engine, MAX_ID, UNPROCESSED};
use crate::dedup::{Compat, DedupError, FxHashMap};

/// Whether a step whose side has kind `k` may leave [`Engine::merge_hypot`]
/// something to do. What it acts on is a FWD, STRUCT or UNION once both sides are
/// resolved, and resolving keeps a type's kind but a FWD's (which may become a
/// STRUCT or UNION): a pair of other kinds stays such a pair, whatever the merge
/// maps before it, so it is not listed.
#[inline]
fn may_merge(k: u32) -> bool {
    matches!(k, K_FWD | K_STRUCT | K_UNION)
}

/// How deep libbpf looks for structurally identical types inside one CU.
const IDENTICAL_DEPTH: i32 = 16;

impl Engine {
    /// INT, ENUM, ENUM64, FWD, FLOAT with its hash `h` (libbpf's
    /// `btf_dedup_prim_type`).
    pub(super) fn prim_type(&mut self, id: u32, h: u64) {
        let k = self.kind(id);
        let mut new = id;
        let mut node = self.table.first(h);
        while let Some((c, next)) = self.table.next(node) {
            node = next;
            let (t, cr) = (self.rec(id), self.rec(c));
            match k {
                K_INT if equal_int_tag(t, cr) => {
                    new = c;
                    break;
                }
                // `compat_enum` unrolled, as `equal_enum` was just checked.
                K_ENUM | K_ENUM64 => {
                    if equal_enum(t, cr) {
                        new = c;
                        break;
                    }
                    if t.name() != cr.name() {
                        continue;
                    }
                    if is_enum_fwd(t) {
                        if is_any_enum(cr) {
                            new = c;
                            break;
                        }
                    } else if is_enum_fwd(cr) {
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
        self.ids[id as usize].map = new;
        if new == id {
            self.table_add(h, id);
        }
    }

    /// STRUCT, UNION and (upstream) TYPEDEF with its hash `h`, by graph
    /// equivalence (libbpf's `btf_dedup_struct_type`).
    pub(super) fn struct_type(&mut self, id: u32, h: u64) -> Result<(), DedupError> {
        if self.is_mapped(id) {
            return Ok(());
        }
        let typedef = self.kind(id) == K_TYPEDEF;
        let settled = id < self.settled_end;
        let mut new = id;
        let mut node = self.table.first(h);
        while let Some((c, next)) = self.table.next(node) {
            node = next;
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
            if !self.is_equiv(id, c)? {
                continue;
            }
            self.merge_hypot();
            if self.adjust_canon {
                continue;
            }
            new = c;
            break;
        }
        self.ids[id as usize].map = new;
        if new == id {
            self.table_add(h, id);
        }
        Ok(())
    }

    pub(super) fn clear_hypot(&mut self) {
        for &x in &self.hypot_list {
            self.ids[x as usize].hypot = UNPROCESSED;
        }
        self.hypot_list.clear();
        self.merge_list.clear();
        self.adjust_canon = false;
    }

    /// Whether the graphs of `cand` and `canon` are equivalent (libbpf's
    /// `btf_dedup_is_equiv`), recording the hypothetical mapping. libbpf recurses
    /// depth first and stops at the first difference; we walk the same preorder with
    /// an explicit stack, so deep graphs cannot overflow ours.
    fn is_equiv(&mut self, cand: u32, canon: u32) -> Result<bool, DedupError> {
        let mut stack = std::mem::take(&mut self.eq_stack);
        stack.clear();
        self.push_pair(&mut stack, cand, canon);
        let mut res = Ok(true);
        while let Some((a, b)) = stack.pop() {
            match self.equiv_step(a, b, &mut stack) {
                Ok(true) => {}
                Ok(false) => {
                    res = Ok(false);
                    break;
                }
                Err(bad) => {
                    let k = self.kind(bad);
                    res = Err(invalid(
                        bad,
                        format!("kind {k} cannot be part of a struct's type graph"),
                    ));
                    break;
                }
            }
        }
        self.eq_stack = stack;
        res
    }

    /// One node of the equivalence walk, whose two sides resolve to different types
    /// (see [`Engine::push_pair`]); pushes the pairs still to compare, last first.
    /// Err(the candidate) if its kind cannot be in a type graph.
    #[inline]
    fn equiv_step(
        &mut self,
        cand: u32,
        canon: u32,
        stack: &mut Vec<(u32, u32)>,
    ) -> Result<bool, u32> {
        let canon = self.resolve_fwd(canon);
        let hyp = self.ids[canon as usize].hypot;
        if hyp <= MAX_ID {
            return Ok(hyp == cand || self.identical(hyp, cand));
        }
        self.hypot_list.push(canon);
        self.ids[canon as usize].hypot = cand;

        let (ck, nk) = (self.kind(cand), self.kind(canon));
        if may_merge(ck) || may_merge(nk) {
            self.merge_list.push(canon);
        }
        let (ct, nt) = (self.rec(cand), self.rec(canon));
        if ct.name() != nt.name() {
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
            K_INT => Ok(equal_int_tag(ct, nt)),
            K_ENUM | K_ENUM64 => Ok(compat_enum(ct, nt)),
            K_FWD | K_FLOAT => Ok(equal_common(ct, nt)),
            K_CONST | K_VOLATILE | K_RESTRICT | K_PTR | K_TYPEDEF | K_FUNC | K_TYPE_TAG => {
                if ct.info() != nt.info() {
                    return Ok(false);
                }
                self.push_pair(stack, ct.size_type(), nt.size_type());
                Ok(true)
            }
            K_ARRAY => {
                if !compat_array(ct, nt) {
                    return Ok(false);
                }
                self.push_pair(stack, ct.array_elem(), nt.array_elem());
                self.push_pair(stack, ct.array_index(), nt.array_index());
                Ok(true)
            }
            K_STRUCT | K_UNION => {
                if !shallow_equal_struct(ct, nt) {
                    return Ok(false);
                }
                for i in (0..ct.vlen()).rev() {
                    self.push_pair(stack, ct.member_type(i), nt.member_type(i));
                }
                Ok(true)
            }
            K_FUNC_PROTO => {
                if !compat_fnproto(ct, nt) {
                    return Ok(false);
                }
                for i in (0..ct.vlen()).rev() {
                    self.push_pair(stack, ct.param_type(i), nt.param_type(i));
                }
                self.push_pair(stack, ct.size_type(), nt.size_type());
                Ok(true)
            }
            _ => Err(cand),
        }
    }

    /// Pushes the pair `(cand, canon)` for the walk, unless both already resolve to
    /// one type: the step would accept such a pair at once and change nothing, and
    /// nothing changes `map` during a walk, so skipping it here gives the same walk
    /// for less (most member pairs of a unit's repeat of a kept struct are such).
    /// Nor is a pair pushed whose kept side this walk already met with this very
    /// candidate: its step would find `hypot[canon] == cand` and accept at once
    /// (`canon`, an id a step looked up, is its own [`Engine::resolve_fwd`]), and a
    /// set `hypot` entry stays as it is until the walk ends. On the corpus vmlinux,
    /// 3.7 million of the 12.7 million pairs the walks pushed were such.
    #[inline]
    fn push_pair(&self, stack: &mut Vec<(u32, u32)>, cand: u32, canon: u32) {
        if self.resolve(cand) != self.resolve(canon) && self.ids[canon as usize].hypot != cand {
            stack.push((cand, canon));
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
                let (k1, k2) = (t1.kind(), t2.kind());
                if k1 == K_ARRAY && k2 == K_ARRAY {
                    return equal_array(t1, t2);
                }
                (k1 == K_STRUCT || k1 == K_UNION)
                    && k1 == k2
                    && shallow_equal_struct(t1, t2)
                    && (0..t1.vlen()).all(|i| t1.member_type(i) == t2.member_type(i))
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
            let k = t1.kind();
            if k != t2.kind() {
                return false;
            }
            let same = |x: u32, y: u32, budget: &mut usize| {
                x == y || self.identical_types(x, y, depth - 1, budget)
            };
            return match k {
                0 => true,
                K_INT => equal_int_tag(t1, t2),
                K_ENUM | K_ENUM64 => compat_enum(t1, t2),
                K_FWD | K_FLOAT => equal_common(t1, t2),
                K_CONST | K_VOLATILE | K_RESTRICT | K_PTR | K_TYPEDEF | K_FUNC | K_TYPE_TAG => {
                    if t1.info() != t2.info() || t1.name() != t2.name() {
                        return false;
                    }
                    a = t1.size_type();
                    b = t2.size_type();
                    continue;
                }
                // libbpf compares the first array's element and index types with
                // themselves here, so only the shallow check counts.
                K_ARRAY => compat_array(t1, t2),
                K_STRUCT | K_UNION => {
                    shallow_equal_struct(t1, t2)
                        && (0..t1.vlen())
                            .all(|i| same(t1.member_type(i), t2.member_type(i), budget))
                }
                K_FUNC_PROTO => {
                    compat_fnproto(t1, t2)
                        && same(t1.size_type(), t2.size_type(), budget)
                        && (0..t1.vlen()).all(|i| same(t1.param_type(i), t2.param_type(i), budget))
                }
                _ => false,
            };
        }
    }

    /// Records what a successful equivalence check established (libbpf's
    /// `btf_dedup_merge_hypot_map`): FWDs resolved, and structs mapped early.
    fn merge_hypot(&mut self) {
        for i in 0..self.merge_list.len() {
            let canon = self.merge_list[i];
            let targ = self.ids[canon as usize].hypot;
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
    pub(super) fn resolve_fwds(&mut self, s: u32, e: u32) {
        let mut batch_names: FxHashMap<u32, u32> = FxHashMap::default();
        for id in s..e {
            let r = self.rec(id);
            if matches!(r.kind(), K_STRUCT | K_UNION) && self.ids[id as usize].map == id {
                batch_names
                    .entry(r.name())
                    .and_modify(|v| *v = 0)
                    .or_insert(id);
            }
        }
        for id in s..e {
            let r = self.rec(id);
            if r.kind() != K_FWD || self.ids[id as usize].map != id {
                continue;
            }
            let cand = match (self.fixed_names.get(&r.name()), batch_names.get(&r.name())) {
                (Some(&x), None) | (None, Some(&x)) => x,
                _ => continue,
            };
            if cand == 0 || self.kind(cand) != fwd_kind(r) {
                continue;
            }
            self.ids[id as usize].map = cand;
        }
    }
}
