//! Functions: each unit's candidate prototypes saved as owned records, merged after
//! the last unit into FUNC_PROTO + FUNC (+ DECL_TAGs), as pahole v1.31 does.
//!
//! The rules (which subprograms are candidates, the location analysis behind
//! `optimized_func`, the `consistent_func` merge, the kfunc tags) are those of
//! docs/pahole-functions.md §3–§6. A saved record holds BTF ids of the growing,
//! not yet deduplicated BTF, as pahole's do; with the incremental dedup, the ids of
//! the types kept for them instead ([`FuncEncoder::remap_unit`]). The prototype
//! comparison (`types_match`) looks only at names and shapes, which dedup keeps, so
//! it gives the same answers on either.

use super::vars::VarSections;
use super::{EncodeError, EncoderState, Features};
use crate::btf::{Btf, Param, StrOffset, Type, TypeId, TypeKind};
use crate::dwarf::types::{CuTypes, DieRef, FnParamDie, FuncDie, LocDie, Name, RefKind, TypeDie};
use crate::kfuncs::{Kfuncs, KF_ARENA_ARG1, KF_ARENA_ARG2, KF_ARENA_RET, KF_FASTCALL};
use crate::symbols::ElfSymbols;
use object::elf;
use std::collections::HashMap;
use std::sync::Arc;

/// `optimized_parms`: a parameter is optimized out or has no location.
const OPTIMIZED_PARMS: u8 = 1 << 0;
/// `unexpected_reg`: a parameter is not in the register the ABI puts it in.
const UNEXPECTED_REG: u8 = 1 << 1;
/// `inconsistent_proto`: units disagree on the prototype (set while merging).
const INCONSISTENT: u8 = 1 << 2;
/// `uncertain_parm_loc`: a packed struct is passed on the stack.
const UNCERTAIN_PARM_LOC: u8 = 1 << 3;
/// `reordered_parm`: a parameter moved relative to the abstract origin.
const REORDERED_PARM: u8 = 1 << 4;
/// `optimized_symbol`: the address is that of a `.isra` / `.constprop` clone.
const OPTIMIZED_SYMBOL: u8 = 1 << 5;

/// One unit's view of one function, kept until all units are encoded.
#[derive(Clone, Copy, Debug)]
struct SavedFunc {
    /// Index in the ELF function table (sorted by name).
    func: u32,
    /// `DW_AT_low_pc` (0 for abstract instances).
    addr: u64,
    /// Return type.
    ret: TypeId,
    /// Parameters: a range of [`FuncEncoder::parms`].
    parms_start: u32,
    parms_len: u16,
    /// Decl tags: a range of [`FuncEncoder::annots`].
    annots_start: u32,
    annots_len: u16,
    /// The flag bits above.
    flags: u8,
}

/// Where one unit's records are (see [`FuncEncoder::remap_unit`]).
struct UnitRecords {
    saved: std::ops::Range<usize>,
    parms: std::ops::Range<usize>,
    /// (section, entry) of each of the unit's variables.
    vars: Vec<(u32, u32)>,
    /// With a merged unit: the unit's deferred type decl tags and variables, as
    /// ranges of [`Merged::tags`] and [`Merged::vars`].
    tags: std::ops::Range<usize>,
    pending_vars: std::ops::Range<usize>,
}

/// What pahole adds to its one merged unit (an LTO build) after every part's types,
/// kept until the last part: the parts' type decl tags, the strings of the saved
/// functions (interned when pahole saves them, after those decl tags) and the
/// variables, in part order. Owned, and renumbered with the rest.
#[derive(Default)]
struct Merged {
    /// (value, tagged type, component index).
    tags: Vec<(Box<[u8]>, TypeId, i32)>,
    /// The name of each entry of [`FuncEncoder::parms`] (empty for `...`).
    parm_names: Vec<Box<[u8]>>,
    /// The value of each entry of [`FuncEncoder::annots`].
    annot_values: Vec<Box<[u8]>>,
    vars: Vec<super::vars::PendingVar>,
}

/// Saves functions unit by unit and emits them (and the variables' DATASECs) at
/// the end. Everything here is owned: nothing points into a unit's arena.
pub struct FuncEncoder {
    syms: Arc<ElfSymbols>,
    kfuncs: Kfuncs,
    /// DWARF register numbers of the argument registers, in order (by e_machine).
    regs: &'static [u8],
    /// Whether each parameter takes one register slot whatever its size (s390).
    one_slot: bool,
    /// The function table's names → index (a hash lookup per subprogram instead
    /// of a binary search over string compares).
    by_name: HashMap<Box<[u8]>, u32>,
    saved: Vec<SavedFunc>,
    parms: Vec<Param>,
    annots: Vec<(StrOffset, i32)>,
    vars: VarSections,
    /// The units whose records still hold the unit's own type ids, oldest first
    /// (see [`FuncEncoder::remap_unit`]).
    unmapped: std::collections::VecDeque<UnitRecords>,
    /// Per-unit scratch: (unit offset, function index, parameter index) of every
    /// parameter of the unit, sorted by offset.
    param_index: Vec<(u32, u32, u32)>,
    /// Per-unit scratch: for each parameter (as in `param_index` order), the
    /// concrete parameter whose location it shares.
    share: Vec<Option<(u32, u32)>>,
    /// The deferred records of a merged unit (None for ordinary units).
    merged: Option<Box<Merged>>,
}

impl FuncEncoder {
    /// An encoder for the functions and variables of the file `syms` describes.
    /// Refuses the features it does not implement.
    pub fn new(
        syms: Arc<ElfSymbols>,
        kfuncs: Kfuncs,
        features: &Features,
    ) -> Result<FuncEncoder, String> {
        for (on, name) in [
            (features.true_signature, "true_signature"),
            (features.layout, "layout"),
        ] {
            if on {
                return Err(format!(
                    "--btf_features={name} is not supported by dwarf2btf yet"
                ));
            }
        }
        let (regs, one_slot): (&'static [u8], bool) = match syms.machine {
            elf::EM_X86_64 => (&[5, 4, 1, 2, 8, 9], false),
            elf::EM_AARCH64 | elf::EM_ARM => (&[0, 1, 2, 3, 4, 5, 6, 7], false),
            elf::EM_S390 => (&[2, 3, 4, 5, 6], true),
            _ => (&[], false),
        };
        let vars = VarSections::new(&syms, features);
        let by_name = syms
            .functions
            .functions()
            .iter()
            .enumerate()
            .map(|(i, f)| (f.name().as_bytes().into(), i as u32))
            .collect();
        Ok(FuncEncoder {
            by_name,
            syms,
            kfuncs,
            regs,
            one_slot,
            saved: Vec::new(),
            parms: Vec::new(),
            annots: Vec::new(),
            vars,
            param_index: Vec::new(),
            share: Vec::new(),
            unmapped: Default::default(),
            merged: None,
        })
    }

    /// Saves the candidate functions of unit `cu` and encodes its variables. Call
    /// right after [`super::encode_cu`] of the same unit.
    pub fn add_cu(&mut self, cu: &CuTypes<'_>, st: &mut EncoderState) -> Result<(), EncodeError> {
        let (saved, parms) = (self.saved.len(), self.parms.len());
        if st.merged() && self.merged.is_none() {
            self.merged = Some(Box::default());
        }
        self.save_funcs(cu, st);
        let (vars, tags, pending_vars) = match self.merged.as_deref_mut() {
            None => (self.vars.encode_cu(cu, st, &self.syms)?, 0..0, 0..0),
            Some(m) => {
                let (t, v) = (m.tags.len(), m.vars.len());
                m.tags.extend(st.take_type_tags());
                m.vars.extend(self.vars.select_cu(cu, st, &self.syms)?);
                (Vec::new(), t..m.tags.len(), v..m.vars.len())
            }
        };
        self.unmapped.push_back(UnitRecords {
            saved: saved..self.saved.len(),
            parms: parms..self.parms.len(),
            vars,
            tags,
            pending_vars,
        });
        Ok(())
    }

    /// Renumbers the type ids held by the records of the oldest unit not renumbered
    /// yet (return and parameter types, variables' ids) through `map`: an incremental
    /// dedup has replaced that unit's types by the types it keeps. Units are
    /// renumbered in the order they were added, possibly some units later.
    pub fn remap_unit(&mut self, map: impl Fn(TypeId) -> TypeId) {
        let Some(u) = self.unmapped.pop_front() else {
            return;
        };
        for s in &mut self.saved[u.saved] {
            s.ret = map(s.ret);
        }
        for p in &mut self.parms[u.parms] {
            p.type_id = map(p.type_id);
        }
        if let Some(m) = self.merged.as_deref_mut() {
            for t in &mut m.tags[u.tags] {
                t.1 = map(t.1);
            }
            for v in &mut m.vars[u.pending_vars] {
                v.type_id = map(v.type_id);
            }
        }
        self.vars.remap(&u.vars, map);
    }

    /// Emits the saved functions in name order, then one DATASEC per section with
    /// variables. Call after the last unit, before dedup.
    pub fn finish(mut self, st: &mut EncoderState) -> Result<(), EncodeError> {
        if let Some(m) = self.merged.take() {
            self.finish_merged(*m, st);
        }
        self.emit_funcs(st)?;
        self.vars.finish(st);
        Ok(())
    }

    /// The records of a merged unit that pahole adds after every part's types, in
    /// its order: the type decl tags, the saved functions' strings, the variables.
    fn finish_merged(&mut self, m: Merged, st: &mut EncoderState) {
        for (value, target, idx) in &m.tags {
            let v = st.intern(Name::new(value));
            push_decl_tag(st, v, *target, *idx);
        }
        for s in &self.saved {
            let parms = s.parms_start as usize..s.parms_start as usize + s.parms_len as usize;
            for k in parms {
                if !m.parm_names[k].is_empty() {
                    self.parms[k].name = st.intern(Name::new(&m.parm_names[k]));
                }
            }
            let annots = s.annots_start as usize..s.annots_start as usize + s.annots_len as usize;
            for k in annots {
                self.annots[k].0 = st.intern(Name::new(&m.annot_values[k]));
            }
        }
        for v in &m.vars {
            self.vars.emit(v, st);
        }
    }

    /// A string of a saved record: interned now, or with a merged unit kept for
    /// [`FuncEncoder::finish_merged`] in `names` (and the empty offset for now).
    fn save_str(
        st: &mut EncoderState,
        merged: Option<&mut Vec<Box<[u8]>>>,
        s: Name<'_>,
    ) -> StrOffset {
        match merged {
            None => st.intern(s),
            Some(names) => {
                names.push(s.bytes().into());
                StrOffset::EMPTY
            }
        }
    }

    fn save_funcs(&mut self, cu: &CuTypes<'_>, st: &mut EncoderState) {
        if self.syms.functions.is_empty() || cu.funcs.is_empty() {
            return;
        }
        self.index_params(cu);
        let syms = Arc::clone(&self.syms);
        let table = &syms.functions;
        for f in cu.funcs {
            if f.declaration {
                continue;
            }
            let name = func_name(cu, f, 0);
            if name.is_empty() {
                continue;
            }
            // pahole: every parameter must have a name (its own or its origin's).
            if f.params
                .iter()
                .any(|p| self.param_origin(cu, p).0.is_empty())
            {
                continue;
            }
            let Some(&fidx) = self.by_name.get(name.bytes()) else {
                continue;
            };
            let ef = table.get(fidx as usize);
            let mut flags = self.analyze(cu, f);
            if self.uncertain_parm_loc(cu, f) {
                flags |= UNCERTAIN_PARM_LOC;
            }
            if ef.optimized_symbol_at(f.low_pc) {
                flags |= OPTIMIZED_SYMBOL;
            }
            let ret = st.type_id(cu, func_ret(cu, f));
            let parms_start = self.parms.len() as u32;
            for p in f.params {
                let (pname, pty) = self.param_origin(cu, p);
                let names = self.merged.as_deref_mut().map(|m| &mut m.parm_names);
                let name = Self::save_str(st, names, pname);
                self.parms.push(Param {
                    name,
                    type_id: st.type_id(cu, pty),
                });
            }
            if f.varargs {
                if let Some(m) = self.merged.as_deref_mut() {
                    m.parm_names.push(Box::default());
                }
                self.parms.push(Param {
                    name: StrOffset::EMPTY,
                    type_id: TypeId::VOID,
                });
            }
            let annots_start = self.annots.len() as u32;
            for a in f.annots {
                let values = self.merged.as_deref_mut().map(|m| &mut m.annot_values);
                let v = Self::save_str(st, values, a.value);
                self.annots.push((v, a.component_idx));
            }
            self.saved.push(SavedFunc {
                func: fidx,
                addr: f.low_pc,
                ret,
                parms_start,
                parms_len: (self.parms.len() as u32 - parms_start) as u16,
                annots_start,
                annots_len: (self.annots.len() as u32 - annots_start) as u16,
                flags,
            });
        }
    }

    /// Indexes the unit's subprogram parameters by offset, and which concrete
    /// parameter (the last with a location) each abstract one shares its location
    /// with (pahole copies location facts to the abstract origin).
    fn index_params(&mut self, cu: &CuTypes<'_>) {
        self.param_index.clear();
        for (fi, f) in cu.funcs.iter().enumerate() {
            for (pi, p) in f.params.iter().enumerate() {
                self.param_index.push((p.off, fi as u32, pi as u32));
            }
        }
        // DIE order is offset order, but be safe against odd producers.
        if !self.param_index.windows(2).all(|w| w[0].0 < w[1].0) {
            self.param_index.sort_unstable();
        }
        self.share.clear();
        self.share.resize(self.param_index.len(), None);
        for (fi, f) in cu.funcs.iter().enumerate() {
            for (pi, p) in f.params.iter().enumerate() {
                if p.origin.0 == 0 || !p.has_loc {
                    continue;
                }
                if let Some(k) = self.param_slot(p.origin) {
                    self.share[k] = Some((fi as u32, pi as u32));
                }
            }
        }
    }

    /// Position in `param_index` of the parameter at unit offset `r`.
    fn param_slot(&self, r: DieRef) -> Option<usize> {
        self.param_index.binary_search_by_key(&r.0, |e| e.0).ok()
    }

    /// The parameter at unit offset `r`, with its index in its function.
    fn param_at<'c, 'a>(
        &self,
        cu: &'c CuTypes<'a>,
        r: DieRef,
    ) -> Option<(&'c FnParamDie<'a>, u32)> {
        let (_, fi, pi) = self.param_index[self.param_slot(r)?];
        Some((&cu.funcs[fi as usize].params[pi as usize], pi))
    }

    /// A parameter's name and type, taken from its abstract origin when it has
    /// none of its own.
    fn param_origin<'a>(&self, cu: &CuTypes<'a>, p: &FnParamDie<'a>) -> (Name<'a>, DieRef) {
        if p.origin.0 == 0 {
            return (p.name, p.ty);
        }
        let o = self.param_at(cu, p.origin).map(|(o, _)| *o);
        let name = if p.name.is_empty() {
            o.map_or(Name::EMPTY, |o| o.name)
        } else {
            p.name
        };
        let ty = if p.ty.0 == 0 {
            o.map_or(DieRef::VOID, |o| o.ty)
        } else {
            p.ty
        };
        (name, ty)
    }

    /// pahole's per-function location analysis (docs §4): `optimized_parms`,
    /// `unexpected_reg` and `reordered_parm`.
    fn analyze(&self, cu: &CuTypes<'_>, f: &FuncDie<'_>) -> u8 {
        let (mut optimized, mut unexpected, mut reordered, mut has_struct) =
            (false, false, false, false);
        let mut reg_idx = 0usize;
        for (i, p) in f.params.iter().enumerate() {
            let mut q = p;
            if p.origin.0 != 0 {
                if let Some((_, oi)) = self.param_at(cu, p.origin) {
                    if oi as usize != i {
                        reordered = true;
                    }
                }
            } else if !p.has_loc {
                if let Some((sf, sp)) = self.param_slot(DieRef(p.off)).and_then(|k| self.share[k]) {
                    q = &cu.funcs[sf as usize].params[sp as usize];
                }
            }
            let ty = self.param_origin(cu, p).1;
            let (is_struct, size) = (is_struct(cu, ty), type_size(cu, ty, 0));
            has_struct |= is_struct;
            // Register slots: one, or one per 8 bytes of an aggregate passed in
            // registers (over 16 bytes it goes to memory: one slot, as pahole counts).
            let slots = if self.one_slot || size <= 8 || size > 16 {
                1
            } else {
                size.div_ceil(8) as usize
            };
            if q.has_loc {
                if reg_idx >= self.regs.len() {
                    continue;
                }
                match loc_reg(cu, q.loc) {
                    None => optimized = true,
                    Some(r) if r != self.regs[reg_idx] => unexpected = true,
                    Some(_) => {}
                }
                reg_idx += slots;
            } else {
                optimized = true;
                reg_idx += slots;
            }
        }
        let mut flags = 0;
        if optimized {
            flags |= OPTIMIZED_PARMS;
        }
        if unexpected && !has_struct {
            flags |= UNEXPECTED_REG;
        }
        if reordered {
            flags |= REORDERED_PARM;
        }
        flags
    }

    /// pahole's `ftype__has_uncertain_arg_loc`: a named packed struct passed by
    /// value beyond the argument registers.
    fn uncertain_parm_loc(&self, cu: &CuTypes<'_>, f: &FuncDie<'_>) -> bool {
        let n = self.regs.len();
        if f.params.len() < n {
            return false;
        }
        f.params.iter().skip(n).any(|p| {
            let ty = self.param_origin(cu, p).1;
            match cu.index_of(ty).map(|i| &cu.types[i]) {
                Some(TypeDie::Composite {
                    is_union: false,
                    name,
                    ..
                }) if !name.is_empty() => is_packed(cu, ty),
                _ => false,
            }
        })
    }

    fn emit_funcs(&mut self, st: &mut EncoderState) -> Result<(), EncodeError> {
        let features = st.features().clone();
        // Stable: the states of one function stay in unit order.
        self.saved.sort_by_key(|s| s.func);
        let syms = Arc::clone(&self.syms);
        let mut i = 0;
        while i < self.saved.len() {
            let mut j = i + 1;
            while j < self.saved.len() && self.saved[j].func == self.saved[i].func {
                self.combine(st.btf(), i, j);
                j += 1;
            }
            let ef = syms.functions.get(self.saved[i].func as usize);
            let first = self.saved[i];
            let canonical = if j - i > 1 {
                let run = &self.saved[i..j];
                run.iter()
                    .find(|s| ef.has_sym_at(s.addr) && !skip_optimized(s))
                    .or_else(|| run.iter().find(|s| ef.has_sym_at(s.addr)))
                    .copied()
                    .unwrap_or(first)
            } else {
                first
            };
            let skip = first.flags & UNEXPECTED_REG != 0
                || (features.consistent_func && first.flags & INCONSISTENT != 0)
                || first.flags & UNCERTAIN_PARM_LOC != 0
                || first.flags & REORDERED_PARM != 0
                || skip_optimized(&canonical)
                || ef.ambiguous_addr;
            if !skip {
                let kfunc = if features.decl_tag_kfuncs {
                    self.kfuncs.get(ef.name())
                } else {
                    None
                };
                self.emit_one(st, &canonical, ef.name(), kfunc, &features)?;
            }
            i = j;
        }
        Ok(())
    }

    /// pahole's `saved_functions_combine` of state `b` into the run's first `a`.
    fn combine(&mut self, btf: &Btf, a: usize, b: usize) {
        const SHARED: u8 = UNEXPECTED_REG | INCONSISTENT | UNCERTAIN_PARM_LOC | REORDERED_PARM;
        let mut shared = (self.saved[a].flags | self.saved[b].flags) & SHARED;
        if shared & (UNEXPECTED_REG | INCONSISTENT | REORDERED_PARM) == 0
            && !self.funcs_match(btf, &self.saved[a], &self.saved[b])
        {
            shared |= INCONSISTENT;
        }
        for k in [a, b] {
            self.saved[k].flags = self.saved[k].flags & !SHARED | shared;
        }
    }

    /// pahole's `funcs__match`: same parameter count, matching return and
    /// parameter types (names are not compared).
    fn funcs_match(&self, btf: &Btf, a: &SavedFunc, b: &SavedFunc) -> bool {
        if a.parms_len != b.parms_len || !types_match(btf, a.ret, b.ret) {
            return false;
        }
        let pa = &self.parms[a.parms_start as usize..][..a.parms_len as usize];
        let pb = &self.parms[b.parms_start as usize..][..b.parms_len as usize];
        pa.iter()
            .zip(pb)
            .all(|(x, y)| types_match(btf, x.type_id, y.type_id))
    }

    /// FUNC_PROTO, FUNC, the function's decl tags, then the kfunc tags.
    fn emit_one(
        &self,
        st: &mut EncoderState,
        s: &SavedFunc,
        name: &str,
        kfunc: Option<u32>,
        features: &Features,
    ) -> Result<(), EncodeError> {
        let mut ret = s.ret;
        let mut params = self.parms[s.parms_start as usize..][..s.parms_len as usize].to_vec();
        if let (Some(flags), true) = (kfunc, features.attributes) {
            let tag = |st: &mut EncoderState, id: TypeId, what: &str| {
                arena_ptr(st, id).ok_or_else(|| {
                    EncodeError(format!(
                        "kfunc '{name}': {what} is not a pointer, cannot tag it as arena memory"
                    ))
                })
            };
            if flags & KF_ARENA_RET != 0 {
                ret = tag(st, ret, "the return type")?;
            }
            for (bit, k) in [(KF_ARENA_ARG1, 0), (KF_ARENA_ARG2, 1)] {
                if flags & bit != 0 {
                    let p = params.get_mut(k).ok_or_else(|| {
                        EncodeError(format!("kfunc '{name}': argument {} is missing", k + 1))
                    })?;
                    p.type_id = tag(st, p.type_id, "an arena argument")?;
                }
            }
        }
        if params.len() > 0xffff {
            return Err(EncodeError(format!(
                "function '{name}' has more than 65535 parameters"
            )));
        }
        let proto = st.btf_mut().push_type(Type {
            name: StrOffset::EMPTY,
            kind: TypeKind::FuncProto { ret, params },
        });
        let fname = st.intern(Name::new(name.as_bytes()));
        let func = st.btf_mut().push_type(Type {
            name: fname,
            kind: TypeKind::Func {
                proto,
                linkage: crate::btf::FUNC_STATIC,
            },
        });
        let tags = &self.annots[s.annots_start as usize..][..s.annots_len as usize];
        if features.decl_tag {
            for &(value, component_idx) in tags {
                push_decl_tag(st, value, func, component_idx);
            }
        }
        if let (Some(flags), true) = (kfunc, features.decl_tag) {
            let v = st.intern(Name::new(b"bpf_kfunc"));
            push_decl_tag(st, v, func, -1);
            if flags & KF_FASTCALL != 0 {
                let v = st.intern(Name::new(b"bpf_fastcall"));
                push_decl_tag(st, v, func, -1);
            }
        }
        Ok(())
    }
}

/// Appends a DECL_TAG.
pub(crate) fn push_decl_tag(st: &mut EncoderState, value: StrOffset, target: TypeId, idx: i32) {
    st.btf_mut().push_type(Type {
        name: value,
        kind: TypeKind::DeclTag {
            type_id: target,
            component_idx: idx,
            kflag: false,
        },
    });
}

/// `btf__tag_bpf_arena_ptr`: a new `PTR` to a new `TYPE_TAG 'address_space(1)'`
/// (kflag: an attribute) on what the pointer `id` points to; None if `id` is not
/// a pointer.
fn arena_ptr(st: &mut EncoderState, id: TypeId) -> Option<TypeId> {
    let pointee = match st.btf().get(id)?.kind {
        TypeKind::Ptr(t) => t,
        _ => return None,
    };
    let name = st.intern(Name::new(b"address_space(1)"));
    let tag = st.btf_mut().push_type(Type {
        name,
        kind: TypeKind::TypeTag {
            type_id: pointee,
            kflag: true,
        },
    });
    Some(st.btf_mut().push_type(Type {
        name: StrOffset::EMPTY,
        kind: TypeKind::Ptr(tag),
    }))
}

/// pahole's "skip optimized": optimized-out parameters at the address of a clone
/// symbol (without `true_signature`; `signature_changed` is clang-only).
fn skip_optimized(s: &SavedFunc) -> bool {
    s.flags & OPTIMIZED_PARMS != 0 && s.flags & OPTIMIZED_SYMBOL != 0
}

/// A subprogram's name: its own, else its abstract origin's, else its
/// specification's.
fn func_name<'a>(cu: &CuTypes<'a>, f: &FuncDie<'a>, depth: u32) -> Name<'a> {
    if !f.name.is_empty() || depth > 8 {
        return f.name;
    }
    for r in [f.origin, f.spec] {
        if r.0 != 0 {
            if let Some(o) = func_at(cu, r) {
                return func_name(cu, o, depth + 1);
            }
        }
    }
    Name::EMPTY
}

/// A subprogram's return type: its own, else its abstract origin's.
fn func_ret(cu: &CuTypes<'_>, f: &FuncDie<'_>) -> DieRef {
    if f.ret.0 != 0 || f.origin.0 == 0 {
        return f.ret;
    }
    func_at(cu, f.origin).map_or(DieRef::VOID, |o| o.ret)
}

/// The unit-level subprogram at unit offset `r`.
fn func_at<'c, 'a>(cu: &'c CuTypes<'a>, r: DieRef) -> Option<&'c FuncDie<'a>> {
    let i = cu.funcs.binary_search_by_key(&r.0, |f| f.off).ok()?;
    Some(&cu.funcs[i])
}

/// The type DIE `r` refers to, through typedefs, cv-qualifiers and aliases.
fn strip<'c, 'a>(cu: &'c CuTypes<'a>, mut r: DieRef) -> Option<&'c TypeDie<'a>> {
    for _ in 0..64 {
        let t = &cu.types[cu.index_of(r)?];
        match *t {
            TypeDie::Ref {
                kind:
                    RefKind::Typedef
                    | RefKind::Const
                    | RefKind::Volatile
                    | RefKind::Restrict
                    | RefKind::TypeTag
                    | RefKind::Alias,
                ty,
                ..
            } => r = ty,
            _ => return Some(t),
        }
    }
    None
}

/// Whether `r` is a struct (not a union) once typedefs and qualifiers are removed.
fn is_struct(cu: &CuTypes<'_>, r: DieRef) -> bool {
    matches!(
        strip(cu, r),
        Some(TypeDie::Composite {
            is_union: false,
            ..
        })
    )
}

/// pahole's `tag__size`: the size in bytes of type `r` (0 for void, incomplete
/// arrays and function types).
pub(crate) fn type_size(cu: &CuTypes<'_>, r: DieRef, depth: u32) -> u64 {
    if depth > 64 {
        return 0;
    }
    let Some(i) = cu.index_of(r) else {
        return 0;
    };
    match cu.types[i] {
        TypeDie::Base { bit_size, .. } => (bit_size as u64).div_ceil(8),
        TypeDie::Composite { size, .. } => size as u64,
        TypeDie::Enum { size, .. } => size as u64,
        TypeDie::Ref {
            kind: RefKind::Pointer,
            ..
        } => cu.address_size as u64,
        TypeDie::Ref { ty, .. } => type_size(cu, ty, depth + 1),
        TypeDie::Array { ty, dims } => dims
            .iter()
            .fold(type_size(cu, ty, depth + 1), |n, &d| n.wrapping_mul(d)),
        TypeDie::Proto { .. } => 0,
    }
}

/// Natural alignment of type `r` in bytes.
fn type_align(cu: &CuTypes<'_>, r: DieRef, depth: u32) -> u64 {
    if depth > 64 {
        return 1;
    }
    match strip(cu, r) {
        Some(TypeDie::Composite { members, .. }) => members
            .iter()
            .map(|m| type_align(cu, m.ty, depth + 1))
            .max()
            .unwrap_or(1),
        Some(TypeDie::Array { ty, .. }) => type_align(cu, *ty, depth + 1),
        _ => type_size(cu, r, depth + 1).clamp(1, 16),
    }
}

/// An approximation of pahole's `class__infer_packed_attributes`: a member at an
/// offset its type's alignment does not divide, or a size the largest alignment
/// does not divide.
fn is_packed(cu: &CuTypes<'_>, r: DieRef) -> bool {
    let Some(TypeDie::Composite { members, size, .. }) = strip(cu, r) else {
        return false;
    };
    let mut max_align = 1;
    for m in members.iter() {
        if m.bit_size != 0 {
            continue;
        }
        let a = type_align(cu, m.ty, 0);
        max_align = max_align.max(a);
        if (m.bit_offset / 8) % a != 0 {
            return true;
        }
    }
    !(*size as u64).is_multiple_of(max_align)
}

/// The register a parameter is in on entry (docs §4): `DW_OP_regN` as the first
/// entry, `DW_OP_bregN … DW_OP_stack_value` as the first entry, or any entry that
/// is just `DW_OP_entry_value(DW_OP_regN)`.
fn loc_reg(cu: &CuTypes<'_>, loc: LocDie<'_>) -> Option<u8> {
    let locs = cu.locs.as_ref()?;
    let mut reg = None;
    let mut check = |k: usize, expr: &[u8]| {
        let ops = decode_ops(expr, locs.encoding);
        let Some(&(first, inner)) = ops.first() else {
            return;
        };
        let sv = ops.len() == 2 && ops[1].0 == DW_OP_STACK_VALUE;
        let single = ops.len() == 1 || sv;
        if reg.is_some() {
            return;
        }
        if k == 0 && is_reg(first) {
            reg = Some(first - DW_OP_REG0);
        } else if k == 0
            && is_breg(first)
            && (sv || !single && ops[1..].iter().any(|o| o.0 == DW_OP_STACK_VALUE))
        {
            reg = Some(first - DW_OP_BREG0);
        } else if single && (first == DW_OP_ENTRY_VALUE || first == DW_OP_GNU_ENTRY_VALUE) {
            if let Some(r) = inner {
                reg = Some(r);
            }
        }
    };
    match loc {
        LocDie::None => {}
        LocDie::Expr(e) => check(0, e),
        LocDie::List(off) => {
            let mut it = locs
                .lists
                .raw_locations(gimli::LocationListsOffset(off as usize), locs.encoding)
                .ok()?;
            let mut k = 0;
            while let Ok(Some(e)) = it.next() {
                use gimli::RawLocListEntry as E;
                let data = match e {
                    E::AddressOrOffsetPair { data, .. }
                    | E::StartxEndx { data, .. }
                    | E::StartxLength { data, .. }
                    | E::OffsetPair { data, .. }
                    | E::DefaultLocation { data }
                    | E::StartEnd { data, .. }
                    | E::StartLength { data, .. } => data,
                    E::BaseAddress { .. } | E::BaseAddressx { .. } => continue,
                };
                check(k, data.0.slice());
                k += 1;
            }
        }
    }
    reg
}

const DW_OP_REG0: u8 = 0x50;
const DW_OP_BREG0: u8 = 0x70;
const DW_OP_STACK_VALUE: u8 = 0x9f;
const DW_OP_ENTRY_VALUE: u8 = 0xa3;
const DW_OP_GNU_ENTRY_VALUE: u8 = 0xf3;

fn is_reg(op: u8) -> bool {
    (DW_OP_REG0..DW_OP_REG0 + 32).contains(&op)
}

fn is_breg(op: u8) -> bool {
    (DW_OP_BREG0..DW_OP_BREG0 + 32).contains(&op)
}

/// The opcodes of an expression, all of them (clang's moved parameters are
/// `DW_OP_bregN … DW_OP_stack_value` of six operations or more), each with, for
/// an entry value whose block is a single `DW_OP_regN`, that N. An undecodable
/// tail ends the list with a placeholder opcode 0.
fn decode_ops(expr: &[u8], encoding: gimli::Encoding) -> Vec<(u8, Option<u8>)> {
    let mut out = Vec::new();
    let mut r = gimli::EndianSlice::new(expr, gimli::RunTimeEndian::Little);
    while !r.is_empty() {
        let code = r.slice()[0];
        match gimli::Operation::parse(&mut r, encoding) {
            Ok(gimli::Operation::EntryValue { expression }) => {
                let b = expression.slice();
                let inner = (b.len() == 1 && is_reg(b[0])).then(|| b[0] - DW_OP_REG0);
                out.push((code, inner));
            }
            Ok(_) => out.push((code, None)),
            Err(_) => {
                out.push((0, None));
                break;
            }
        }
    }
    out
}

/// pahole's `types__match` on one BTF: names and shapes, loose about `const`.
fn types_match(btf: &Btf, a: TypeId, b: TypeId) -> bool {
    let (mut a, mut b) = (a, b);
    loop {
        if a == b {
            return true;
        }
        if a.0 == 0 || b.0 == 0 {
            return false;
        }
        let (Some(ta), Some(tb)) = (btf.get(a), btf.get(b)) else {
            return false;
        };
        let (ka, kb) = (fwd_kind(ta), fwd_kind(tb));
        if ka != kb {
            if let TypeKind::Const(t) = ta.kind {
                a = t;
                continue;
            }
            if let TypeKind::Const(t) = tb.kind {
                b = t;
                continue;
            }
            return false;
        }
        let names = || ta.name == tb.name || btf.str_bytes(ta.name) == btf.str_bytes(tb.name);
        match (&ta.kind, &tb.kind) {
            (
                TypeKind::Int {
                    size: s1,
                    encoding: e1,
                    offset: o1,
                    bits: b1,
                },
                TypeKind::Int {
                    size: s2,
                    encoding: e2,
                    offset: o2,
                    bits: b2,
                },
            ) => return (s1, e1, o1, b1) == (s2, e2, o2, b2) && names(),
            (TypeKind::Float { size: s1 }, TypeKind::Float { size: s2 }) => {
                return s1 == s2 && names()
            }
            (
                TypeKind::Typedef(_)
                | TypeKind::Struct(_)
                | TypeKind::Union(_)
                | TypeKind::Fwd { .. }
                | TypeKind::Enum { .. }
                | TypeKind::Enum64 { .. },
                _,
            ) => return names(),
            (TypeKind::Ptr(x), TypeKind::Ptr(y))
            | (TypeKind::Volatile(x), TypeKind::Volatile(y))
            | (TypeKind::Const(x), TypeKind::Const(y))
            | (TypeKind::Restrict(x), TypeKind::Restrict(y))
            | (TypeKind::TypeTag { type_id: x, .. }, TypeKind::TypeTag { type_id: y, .. }) => {
                a = *x;
                b = *y;
            }
            (
                TypeKind::Array {
                    elem_type: x,
                    nelems: n1,
                    ..
                },
                TypeKind::Array {
                    elem_type: y,
                    nelems: n2,
                    ..
                },
            ) => {
                if n1 != n2 {
                    return false;
                }
                a = *x;
                b = *y;
            }
            (
                TypeKind::FuncProto {
                    ret: r1,
                    params: p1,
                },
                TypeKind::FuncProto {
                    ret: r2,
                    params: p2,
                },
            ) => {
                return p1.len() == p2.len()
                    && types_match(btf, *r1, *r2)
                    && p1
                        .iter()
                        .zip(p2)
                        .all(|(x, y)| types_match(btf, x.type_id, y.type_id))
            }
            _ => return false,
        }
    }
}

/// A type's kind for matching, with a FWD counted as the struct or union it
/// declares.
fn fwd_kind(t: &Type) -> crate::btf::Kind {
    use crate::btf::Kind;
    match t.kind {
        TypeKind::Fwd { union: true } => Kind::Union,
        TypeKind::Fwd { union: false } => Kind::Struct,
        _ => t.kind(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dwarf::types::LocCtx;

    fn unit_with_locs() -> CuTypes<'static> {
        let e = gimli::EndianSlice::new(&[][..], gimli::RunTimeEndian::Little);
        CuTypes {
            locs: Some(LocCtx {
                lists: gimli::LocationLists::new(e.into(), e.into()),
                encoding: gimli::Encoding {
                    format: gimli::Format::Dwarf32,
                    version: 5,
                    address_size: 8,
                },
            }),
            ..CuTypes::empty(0x1d, 8)
        }
    }

    #[test]
    fn entry_registers_from_expressions() {
        let cu = unit_with_locs();
        let reg = |e: &'static [u8]| loc_reg(&cu, LocDie::Expr(e));
        assert_eq!(reg(&[0x55]), Some(5), "DW_OP_reg5");
        assert_eq!(reg(&[0x75, 0x00]), None, "DW_OP_breg5 alone is memory");
        assert_eq!(reg(&[0x75, 0x00, 0x9f]), Some(5), "breg5; stack_value");
        assert_eq!(
            reg(&[0x75, 0x00, 0x94, 0x04, 0x9f]),
            Some(5),
            "breg5; deref_size; stack_value"
        );
        assert_eq!(
            reg(&[0x75, 0x00, 0x10, 0xff, 0x01, 0x1a, 0x30, 0x22, 0x9f]),
            Some(5),
            "breg5; constu 255; and; lit0; plus; stack_value (six operations)"
        );
        assert_eq!(reg(&[0xa3, 0x01, 0x54]), Some(4), "entry_value(reg4)");
        assert_eq!(
            reg(&[0xa3, 0x01, 0x54, 0x9f]),
            Some(4),
            "entry_value(reg4); stack_value"
        );
        assert_eq!(reg(&[0x91, 0x00]), None, "fbreg: spilled");
        assert_eq!(
            reg(&[0x51, 0x93, 0x08, 0x52, 0x93, 0x08]),
            Some(1),
            "pieces: first"
        );
        assert_eq!(reg(&[]), None);
    }

    #[test]
    fn types_match_loosely_on_const_and_by_name() {
        let mut btf = Btf::new(None);
        let int = btf.push_str(b"int");
        let s = btf.push_str(b"s");
        let t = |btf: &mut Btf, name, kind| btf.push_type(Type { name, kind });
        let i1 = t(
            &mut btf,
            int,
            TypeKind::Int {
                size: 4,
                encoding: 1,
                offset: 0,
                bits: 32,
            },
        );
        let i2 = t(
            &mut btf,
            int,
            TypeKind::Int {
                size: 4,
                encoding: 1,
                offset: 0,
                bits: 32,
            },
        );
        let c = t(&mut btf, StrOffset::EMPTY, TypeKind::Const(i2));
        let p1 = t(&mut btf, StrOffset::EMPTY, TypeKind::Ptr(i1));
        let p2 = t(&mut btf, StrOffset::EMPTY, TypeKind::Ptr(c));
        let st = t(&mut btf, s, TypeKind::Fwd { union: false });
        let un = t(&mut btf, s, TypeKind::Fwd { union: true });
        assert!(types_match(&btf, i1, c), "const is skipped");
        assert!(types_match(&btf, p1, p2));
        assert!(!types_match(&btf, p1, i1));
        assert!(!types_match(&btf, st, un), "struct s vs union s");
        assert!(!types_match(&btf, TypeId::VOID, i1));
        assert!(types_match(&btf, TypeId::VOID, TypeId::VOID));
    }
}
