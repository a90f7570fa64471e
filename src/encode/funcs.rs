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

use super::skips::{FuncSkip, SkipReason};
use super::true_sig;
use super::vars::VarSections;
use super::{EncodeError, EncoderState, Features};
use crate::btf::{Btf, Param, StrOffset, Type, TypeId, TypeKind};
use crate::dwarf::ops::{
    is_breg, is_const, is_reg, DW_OP_BREG0, DW_OP_ENTRY_VALUE, DW_OP_GNU_ENTRY_VALUE, DW_OP_REG0,
    DW_OP_STACK_VALUE,
};
use crate::dwarf::types::{
    CuTypes, DieRef, FnParamDie, FuncDie, LocCtx, LocDie, Name, RefKind, TypeDie,
};
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
/// `signature_changed`: clang marked the function `DW_CC_nocall`.
const SIGNATURE_CHANGED: u8 = 1 << 6;

/// How the target passes arguments, by ELF machine: pahole's
/// `arch__nr_register_params`, `arch__set_register_params` and
/// `arch__agg_use_two_regs`.
#[derive(Clone, Copy, Debug)]
struct Abi {
    /// Number of argument registers (0: the machine is not analysed).
    nr_regs: usize,
    /// The DWARF register of each argument slot, where pahole knows it (on
    /// machines where it does not, any register is as expected).
    regs: [Option<u8>; 8],
    /// An aggregate up to two registers wide is passed in two (all but s390).
    agg_two_regs: bool,
}

impl Abi {
    fn of(machine: u16) -> Abi {
        let known = |r: &[u8]| {
            let mut a = [None; 8];
            for (slot, &reg) in a.iter_mut().zip(r) {
                *slot = Some(reg);
            }
            a
        };
        let (nr_regs, regs) = match machine {
            elf::EM_S390 => (5, known(&[2, 3, 4, 5, 6])),
            elf::EM_X86_64 => (6, known(&[5, 4, 1, 2, 8, 9])),
            elf::EM_SPARC | elf::EM_SPARCV9 => (6, [None; 8]),
            elf::EM_AARCH64 | elf::EM_ARM => (8, known(&[0, 1, 2, 3, 4, 5, 6, 7])),
            elf::EM_ARC | elf::EM_MIPS | elf::EM_PPC | elf::EM_PPC64 | elf::EM_RISCV => {
                (8, [None; 8])
            }
            _ => (0, [None; 8]),
        };
        Abi {
            nr_regs,
            regs,
            agg_two_regs: machine != elf::EM_S390,
        }
    }

    /// The register of argument slot `i`, if pahole knows it.
    fn expected(&self, i: usize) -> Option<u8> {
        self.regs.get(i).copied().flatten()
    }
}

/// What pahole's `parameter__new` records of one parameter's location, with what
/// concrete instances share with their abstract origin (`ftype__recode_dwarf_types`).
#[derive(Clone, Copy, Debug, Default)]
struct ParamLoc {
    /// Has a `DW_AT_location`.
    has_loc: bool,
    /// The register it is in on entry, as pahole reads the location.
    reg: Option<u8>,
    /// pahole's `type_byte_size`.
    size: u64,
    /// Wider than the registers that would carry it: passed in memory.
    in_memory: bool,
}

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
    /// With `true_signature`: the symbol at `addr` whose name has a `.` suffix (an
    /// index in the function's symbols), which names the FUNC of the clone.
    true_sym: Option<u16>,
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
    /// The target's argument registers.
    abi: Abi,
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
    /// Per-unit scratch: the location facts of every parameter of the unit, by
    /// function and parameter in DIE order (`func_start[f] + p`).
    locs: Vec<ParamLoc>,
    /// Per-unit scratch: where each function's parameters start in `locs`.
    func_start: Vec<u32>,
    /// Functions left out and merge disagreements, in pahole's order (`--verbose`).
    skips: Vec<FuncSkip>,
    /// Per-function scratch: whether each parameter is optimized out (no location,
    /// or one that is not a register), as [`FuncEncoder::analyze`] found.
    gone: Vec<bool>,
    /// Per-function scratch, with `true_signature` where clang changed the
    /// signature: the parameters not passed (dropped from the prototype) …
    ts_drop: Vec<bool>,
    /// … the byte offset of the one field of an aggregate parameter that reaches a
    /// register (which names the parameter `PARAM__FIELD`) …
    ts_member: Vec<Option<u64>>,
    /// … and whether the parameter is passed as that field (takes its type).
    ts_apply: Vec<bool>,
    /// The `true_signature` feature.
    true_signature: bool,
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
        let abi = Abi::of(syms.machine);
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
            abi,
            saved: Vec::new(),
            parms: Vec::new(),
            annots: Vec::new(),
            vars,
            param_index: Vec::new(),
            locs: Vec::new(),
            func_start: Vec::new(),
            unmapped: Default::default(),
            skips: Vec::new(),
            gone: Vec::new(),
            ts_drop: Vec::new(),
            ts_member: Vec::new(),
            ts_apply: Vec::new(),
            true_signature: features.true_signature,
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
    /// variables. Call after the last unit, before dedup. Returns why functions
    /// were left out (pahole's `--verbose` lines, in its order).
    pub fn finish(mut self, st: &mut EncoderState) -> Result<Vec<FuncSkip>, EncodeError> {
        if let Some(m) = self.merged.take() {
            self.finish_merged(*m, st);
        }
        self.emit_funcs(st)?;
        self.vars.finish(st);
        Ok(self.skips)
    }

    /// The records of a merged unit that pahole adds after every part's types, in
    /// its order: the type decl tags, the saved functions' strings, the variables.
    fn finish_merged(&mut self, m: Merged, st: &mut EncoderState) {
        for (value, target, idx) in &m.tags {
            let v = st.intern_owned(value);
            push_decl_tag(st, v, *target, *idx);
        }
        for s in &self.saved {
            let parms = s.parms_start as usize..s.parms_start as usize + s.parms_len as usize;
            for k in parms {
                if !m.parm_names[k].is_empty() {
                    self.parms[k].name = st.intern_owned(&m.parm_names[k]);
                }
            }
            let annots = s.annots_start as usize..s.annots_start as usize + s.annots_len as usize;
            for k in annots {
                self.annots[k].0 = st.intern_owned(&m.annot_values[k]);
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
        for (fi, f) in cu.funcs.iter().enumerate() {
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
            let mut flags = self.analyze(cu, fi);
            if self.uncertain_parm_loc(cu, f) {
                flags |= UNCERTAIN_PARM_LOC;
            }
            if ef.optimized_symbol_at(f.low_pc) {
                flags |= OPTIMIZED_SYMBOL;
            }
            let ret = st.type_id(cu, func_ret(cu, f));
            let parms_start = self.parms.len() as u32;
            let reordered = flags & REORDERED_PARM != 0;
            let true_sig = st.features().true_signature && flags & SIGNATURE_CHANGED != 0;
            for (k, p) in f.params.iter().enumerate() {
                // pahole: with reordered parameters, those optimized out are gone;
                // a true signature has only the parameters passed.
                if (reordered && self.gone[k]) || (true_sig && self.ts_drop[k]) {
                    continue;
                }
                let (pname, pty) = self.param_origin(cu, p);
                // pahole names the parameter after the field it found even where
                // it does not pass the parameter as that field.
                let field = self.ts_member[k]
                    .filter(|_| true_sig)
                    .and_then(|off| true_sig::member_at(cu, p.ty, off));
                let names = self.merged.as_deref_mut().map(|m| &mut m.parm_names);
                let (name, ty) = match field {
                    Some((mname, mty)) => {
                        let full = [pname.bytes(), b"__", mname.bytes()].concat();
                        let ty = if self.ts_apply[k] { mty } else { pty };
                        // An owned name goes by content, never through the address
                        // cache: its address is freed and can come back.
                        let name = match names {
                            None => st.intern_owned(&full),
                            Some(names) => {
                                names.push(full.into());
                                StrOffset::EMPTY
                            }
                        };
                        (name, ty)
                    }
                    None => (Self::save_str(st, names, pname), pty),
                };
                self.parms.push(Param {
                    name,
                    type_id: st.type_id(cu, ty),
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
                true_sym: if st.features().true_signature {
                    true_sym(ef, f.low_pc)
                } else {
                    None
                },
            });
        }
    }

    /// Indexes the unit's subprogram parameters by offset and reads their
    /// locations; then, as pahole's `ftype__recode_dwarf_types` does in DIE order,
    /// each concrete parameter shares its location facts with its abstract origin.
    fn index_params(&mut self, cu: &CuTypes<'_>) {
        self.param_index.clear();
        self.locs.clear();
        self.func_start.clear();
        for (fi, f) in cu.funcs.iter().enumerate() {
            self.func_start.push(self.param_index.len() as u32);
            for (pi, p) in f.params.iter().enumerate() {
                self.param_index.push((p.off, fi as u32, pi as u32));
            }
        }
        // DIE order is offset order, but be safe against odd producers.
        if !self.param_index.windows(2).all(|w| w[0].0 < w[1].0) {
            self.param_index.sort_unstable();
        }
        let mut locs = std::mem::take(&mut self.locs);
        for f in cu.funcs {
            locs.extend(f.params.iter().map(|p| self.own_loc(cu, p)));
        }
        self.locs = locs;
        for (fi, f) in cu.funcs.iter().enumerate() {
            for (pi, p) in f.params.iter().enumerate() {
                if p.origin.0 == 0 {
                    continue;
                }
                let Some(k) = self.param_slot(p.origin) else {
                    continue;
                };
                let (_, ofi, opi) = self.param_index[k];
                let from = self.locs[(self.func_start[fi] + pi as u32) as usize];
                let to = &mut self.locs[(self.func_start[ofi as usize] + opi) as usize];
                to.has_loc |= from.has_loc;
                if from.reg.is_some() {
                    to.reg = from.reg;
                }
                if from.size != 0 {
                    to.size = from.size;
                }
                to.in_memory |= from.in_memory;
            }
        }
    }

    /// What pahole's `parameter__new` reads of parameter `p`'s own DIE.
    fn own_loc(&self, cu: &CuTypes<'_>, p: &FnParamDie<'_>) -> ParamLoc {
        // `get_type_byte_size`: the origin's type when there is an origin.
        let ty = if p.origin.0 != 0 {
            self.param_at(cu, p.origin)
                .map_or(DieRef::VOID, |(o, _)| o.ty)
        } else {
            p.ty
        };
        let size = param_byte_size(cu, ty, 0);
        let addr = cu.address_size as u64;
        // The widest parameter passed in registers.
        let in_regs = if self.abi.agg_two_regs {
            2 * addr
        } else {
            addr
        };
        let wide = self.abi.agg_two_regs && size > addr;
        let reg = if p.has_loc {
            loc_reg(cu, p.loc, wide)
        } else {
            None
        };
        ParamLoc {
            has_loc: p.has_loc,
            reg,
            size,
            in_memory: size > in_regs,
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

    /// pahole's per-function location analysis (docs §4;
    /// `function__analyze_parameter_locations`): `optimized_parms`,
    /// `unexpected_reg`, `reordered_parm` and clang's `signature_changed`.
    fn analyze(&mut self, cu: &CuTypes<'_>, fi: usize) -> u8 {
        let f = &cu.funcs[fi];
        let locs = &self.locs[self.func_start[fi] as usize..][..f.params.len()];
        let abi = &self.abi;
        let addr = cu.address_size as u64;
        let changed = cu.producer_clang && signature_changed(cu, f);
        let (mut optimized, mut unexpected, mut reordered) = (false, false, false);
        // Which parameters are optimized out (pahole's `optimized || !has_loc`).
        let mut gone = std::mem::take(&mut self.gone);
        gone.clear();
        gone.extend(locs.iter().map(|l| !l.has_loc));
        self.ts_drop.clear();
        self.ts_drop.resize(locs.len(), false);
        self.ts_member.clear();
        self.ts_member.resize(locs.len(), None);
        self.ts_apply.clear();
        self.ts_apply.resize(locs.len(), false);
        for (i, p) in f.params.iter().enumerate() {
            if p.origin.0 != 0 {
                if let Some((_, oi)) = self.param_at(cu, p.origin) {
                    reordered |= oi as usize != i;
                }
            }
        }
        // Register slots (`parameter__abi_slots`): one, or one per register of an
        // aggregate wider than a register.
        let slots = |l: &ParamLoc| {
            if !abi.agg_two_regs || l.size <= addr || addr == 0 {
                1
            } else {
                l.size.div_ceil(addr).max(1) as usize
            }
        };
        let mut reg_idx = 0usize;
        if changed && self.true_signature {
            // The signature is rewritten from the locations (its own rules).
            unexpected = analyze_true_sig(
                abi,
                locs,
                cu,
                f,
                &mut self.ts_drop,
                &mut self.ts_member,
                &mut self.ts_apply,
            );
            for (g, d) in gone.iter_mut().zip(&self.ts_drop) {
                *g |= *d;
            }
            optimized = gone.iter().any(|&g| g);
        } else if cu.producer_clang && !changed {
            // clang, signature unchanged: each register must be one of the
            // parameter's slots (`function__match_clang_parameter_locations`).
            for l in locs {
                if l.in_memory {
                    continue;
                }
                if reg_idx >= abi.nr_regs {
                    break;
                }
                let n = slots(l);
                if let Some(r) = l.reg {
                    let window = reg_idx..(reg_idx + n).min(abi.nr_regs);
                    unexpected |= !window.into_iter().any(|k| abi.expected(k) == Some(r));
                }
                reg_idx += n;
            }
        } else {
            for (k, l) in locs.iter().enumerate() {
                let available = reg_idx < abi.nr_regs;
                let mut consumes = true;
                if l.has_loc {
                    if !available {
                        consumes = false;
                    } else if l.reg.is_none() {
                        optimized = true;
                        gone[k] = true;
                    } else if abi.expected(reg_idx).is_some_and(|e| Some(e) != l.reg) {
                        unexpected = true;
                    }
                }
                if consumes {
                    reg_idx += if l.in_memory { 1 } else { slots(l) };
                }
            }
        }
        optimized |= locs.iter().any(|l| !l.has_loc);
        // A struct parameter may take several registers, which throws the mapping
        // off: pahole does not trust `unexpected_reg` then.
        let has_struct = f
            .params
            .iter()
            .any(|p| is_struct(cu, self.param_origin(cu, p).1));
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
        if changed {
            flags |= SIGNATURE_CHANGED;
        }
        self.gone = gone;
        flags
    }

    /// pahole's `ftype__has_uncertain_arg_loc`: a named packed struct passed by
    /// value beyond the argument registers.
    fn uncertain_parm_loc(&self, cu: &CuTypes<'_>, f: &FuncDie<'_>) -> bool {
        let n = self.abi.nr_regs;
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
            // pahole's `add_true_signature`: the first unit's view at a clone's
            // address whose parameters fentry can trust is encoded under the clone's
            // name (`foo.isra.0`), instead of all that follows (no skip reasons, no
            // kfunc tags).
            if features.true_signature {
                let clone = self.saved[i..j].iter().find(|s| {
                    s.true_sym.is_some() && s.flags & (UNEXPECTED_REG | UNCERTAIN_PARM_LOC) == 0
                });
                if let Some(&s) = clone {
                    let name = &ef.syms[s.true_sym.map_or(0, usize::from)].name;
                    self.emit_one(st, &s, name, None, &features)?;
                    i = j;
                    continue;
                }
            }
            let first = self.saved[i];
            let canonical = if j - i > 1 {
                let run = &self.saved[i..j];
                run.iter()
                    .find(|s| ef.has_sym_at(s.addr) && !skip_optimized(s, &features))
                    .or_else(|| run.iter().find(|s| ef.has_sym_at(s.addr)))
                    .copied()
                    .unwrap_or(first)
            } else {
                first
            };
            // pahole tests in this order and names the last reason that holds.
            let reasons = [
                (first.flags & UNEXPECTED_REG != 0, SkipReason::UnexpectedReg),
                (
                    features.consistent_func && first.flags & INCONSISTENT != 0,
                    SkipReason::Inconsistent,
                ),
                (
                    first.flags & UNCERTAIN_PARM_LOC != 0,
                    SkipReason::UncertainParmLoc,
                ),
                (first.flags & REORDERED_PARM != 0, SkipReason::ReorderedParm),
                (
                    skip_optimized(&canonical, &features),
                    SkipReason::OptimizedParms,
                ),
                (ef.ambiguous_addr, SkipReason::AmbiguousAddr),
            ];
            if let Some((_, reason)) = reasons.into_iter().rev().find(|(on, _)| *on) {
                self.skips.push(FuncSkip {
                    name: ef.name().to_string(),
                    reason,
                });
            } else {
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
        if shared & (UNEXPECTED_REG | INCONSISTENT | REORDERED_PARM) == 0 {
            if let Some(reason) = self.funcs_mismatch(btf, &self.saved[a], &self.saved[b]) {
                let name = self.syms.functions.get(self.saved[a].func as usize).name();
                self.skips.push(FuncSkip {
                    name: name.to_string(),
                    reason,
                });
                shared |= INCONSISTENT;
            }
        }
        for k in [a, b] {
            self.saved[k].flags = self.saved[k].flags & !SHARED | shared;
        }
    }

    /// pahole's `funcs__match`: same parameter count, matching return and
    /// parameter types (names are not compared); None if they match, else the
    /// first difference.
    fn funcs_mismatch(&self, btf: &Btf, a: &SavedFunc, b: &SavedFunc) -> Option<SkipReason> {
        if a.parms_len != b.parms_len {
            return Some(SkipReason::ParamCount(a.parms_len, b.parms_len));
        }
        if !types_match(btf, a.ret, b.ret) {
            return Some(SkipReason::ReturnType);
        }
        let pa = &self.parms[a.parms_start as usize..][..a.parms_len as usize];
        let pb = &self.parms[b.parms_start as usize..][..b.parms_len as usize];
        let i = pa
            .iter()
            .zip(pb)
            .position(|(x, y)| !types_match(btf, x.type_id, y.type_id))?;
        let name = |p: &Param| btf.str_at(p.name).into_owned();
        Some(SkipReason::ParamType {
            index: i + 1,
            first: name(&pa[i]),
            other: name(&pb[i]),
        })
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

/// `function__analyze_parameter_locations` with `true_signature`, for a function
/// whose signature clang changed: parameters passed as constants or not at all
/// are dropped (`ts_drop`), one passed on the stack or in no known register is
/// unexpected, and an aggregate of which one field reaches a register is that
/// field (`ts_member`). Returns whether a register was unexpected.
fn analyze_true_sig(
    abi: &Abi,
    locs: &[ParamLoc],
    cu: &CuTypes<'_>,
    f: &FuncDie<'_>,
    drop: &mut [bool],
    member: &mut [Option<u64>],
    apply: &mut [bool],
) -> bool {
    let addr = cu.address_size as u64;
    let slots = |l: &ParamLoc| {
        if !abi.agg_two_regs || l.size <= addr || addr == 0 {
            1
        } else {
            l.size.div_ceil(addr).max(1) as usize
        }
    };
    // `ftype__next_parameter_preserves_slots`: the next parameter is in the
    // register that follows this one's slots.
    let next_in_place = |k: usize, reg_idx: usize, n: usize| {
        let next = reg_idx + n;
        locs.get(k + 1)
            .and_then(|l| l.reg)
            .is_some_and(|r| next < abi.nr_regs && abi.expected(next) == Some(r))
    };
    let mut unexpected = false;
    let mut reg_idx = 0usize;
    for (k, (l, p)) in locs.iter().zip(f.params).enumerate() {
        let available = reg_idx < abi.nr_regs;
        let n = slots(l);
        let wide = abi.agg_two_regs && l.size > addr;
        let fx = true_sig::facts(cu, p.loc, wide, addr);
        // Recorded while the location is read (`parameter__finish_piece_decode`).
        if l.has_loc {
            member[k] = fx
                .single_field(addr)
                .filter(|&off| !p.name.is_empty() && true_sig::member_at(cu, p.ty, off).is_some());
        }
        let mut consumes = true;
        if l.has_loc {
            if fx.const_value {
                drop[k] = true;
                consumes = false;
            } else if !available {
                consumes = false;
            } else if fx.stack {
                if l.in_memory {
                    consumes = false;
                } else {
                    unexpected = true;
                }
            } else if l.reg.is_none() || abi.expected(reg_idx).is_some_and(|e| Some(e) != l.reg) {
                unexpected = true;
            } else if fx.has_pieces() {
                if fx.full() {
                    reg_idx += n;
                    continue;
                }
                if next_in_place(k, reg_idx, n) {
                    member[k] = None;
                    reg_idx += n;
                    continue;
                }
                if member[k].is_some() {
                    apply[k] = true;
                    reg_idx += 1;
                    continue;
                }
            }
        } else {
            if available && next_in_place(k, reg_idx, n) {
                reg_idx += n;
                continue;
            }
            drop[k] = true;
            consumes = false;
        }
        if consumes {
            reg_idx += if l.in_memory { 1 } else { n };
        }
    }
    unexpected
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
/// symbol or in a function whose signature clang changed, unless `true_signature`
/// rewrites such signatures.
fn skip_optimized(s: &SavedFunc, features: &Features) -> bool {
    !features.true_signature
        && s.flags & OPTIMIZED_PARMS != 0
        && s.flags & (OPTIMIZED_SYMBOL | SIGNATURE_CHANGED) != 0
}

/// pahole's true-signature symbol: the first symbol (in `.symtab` order) at exactly
/// `addr` whose name has a `.` (`foo.isra.0`), if any.
fn true_sym(ef: &crate::symbols::ElfFunction, addr: u64) -> Option<u16> {
    if addr == 0 {
        return None;
    }
    ef.syms
        .iter()
        .position(|s| s.addr == addr && s.name.contains('.'))
        .map(|i| i as u16)
}

/// pahole's `function__signature_changed` (asked of clang's units only): an
/// abstract instance's never changed; otherwise `DW_CC_nocall` on the function or
/// on its abstract origin.
fn signature_changed(cu: &CuTypes<'_>, f: &FuncDie<'_>) -> bool {
    if f.inlined {
        return false;
    }
    if f.origin.0 == 0 {
        return f.nocall;
    }
    func_at(cu, f.origin).is_some_and(|o| o.nocall)
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

/// pahole's `param__is_struct`: `r` is a struct (not a union) once typedefs and
/// `const` are removed.
fn is_struct(cu: &CuTypes<'_>, mut r: DieRef) -> bool {
    for _ in 0..64 {
        match cu.index_of(r).map(|i| &cu.types[i]) {
            Some(TypeDie::Composite {
                is_union: false, ..
            }) => return true,
            Some(TypeDie::Ref {
                kind: RefKind::Typedef | RefKind::Const,
                ty,
                ..
            }) => r = *ty,
            _ => return false,
        }
    }
    false
}

/// pahole's `__get_type_byte_size` for a parameter of type `r`: a pointer is the
/// unit's address size; a type without `DW_AT_byte_size` (typedef, qualifier,
/// array, declaration) has the size of the type it refers to.
fn param_byte_size(cu: &CuTypes<'_>, r: DieRef, depth: u32) -> u64 {
    let Some(i) = cu.index_of(r).filter(|_| depth < 64) else {
        return 0;
    };
    let sized = |size: u32, ty: DieRef| {
        if size != 0 {
            size as u64
        } else {
            param_byte_size(cu, ty, depth + 1)
        }
    };
    match cu.types[i] {
        TypeDie::Base { byte_size, .. } => byte_size as u64,
        TypeDie::Composite { size, .. } => size as u64,
        TypeDie::Enum { size, ty, .. } => sized(size, ty),
        TypeDie::Ref {
            kind: RefKind::Pointer,
            ..
        } => cu.address_size as u64,
        TypeDie::Ref { ty, .. } | TypeDie::Array { ty, .. } => sized(0, ty),
        TypeDie::Proto { .. } => 0,
    }
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

/// The register a parameter is in on entry, as pahole's
/// `parameter__decode_location` reads its `DW_AT_location` (docs §4): over the
/// entries of a location list in order, the first of
/// - `DW_OP_regN` alone, or `DW_OP_bregN` with a `DW_OP_stack_value`, in the
///   first entry;
/// - `DW_OP_entry_value(DW_OP_regN)` alone (`DW_OP_stack_value` aside), in any;
/// - for a parameter `wide`r than a register and passed in several, the first
///   `DW_OP_regN` of a longer expression (pieces), in any entry.
///
/// An expression starting with a constant gives none. An undecodable expression
/// ends the list, as libdw stops there.
fn loc_reg(cu: &CuTypes<'_>, loc: LocDie<'_>, wide: bool) -> Option<u8> {
    let locs = cu.locs.as_ref()?;
    let mut ops = Vec::new();
    // None: stop reading the list.
    let mut entry = |k: usize, expr: &[u8]| -> Option<Option<u8>> {
        decode_ops(expr, locs, &mut ops)?;
        let Some(&(first, inner)) = ops.first() else {
            return Some(None);
        };
        let stack_value = ops.last().is_some_and(|o| o.0 == DW_OP_STACK_VALUE);
        let n = if ops.len() == 2 && stack_value {
            1
        } else {
            ops.len()
        };
        if n == 1 {
            return Some(if k == 0 && is_reg(first) {
                Some(first - DW_OP_REG0)
            } else if k == 0 && is_breg(first) && stack_value {
                Some(first - DW_OP_BREG0)
            } else if first == DW_OP_ENTRY_VALUE || first == DW_OP_GNU_ENTRY_VALUE {
                inner
            } else {
                None
            });
        }
        // `parameter__multi_exprs`.
        if is_const(first) {
            return Some(None);
        }
        if !wide {
            return Some(if k == 0 && is_reg(first) {
                Some(first - DW_OP_REG0)
            } else if k == 0 && is_breg(first) && ops[1..].iter().any(|o| o.0 == DW_OP_STACK_VALUE)
            {
                Some(first - DW_OP_BREG0)
            } else {
                None
            });
        }
        // Pieces: the first register named (pahole keeps the first it sets,
        // whichever piece it is in).
        Some(ops.iter().find(|o| is_reg(o.0)).map(|o| o.0 - DW_OP_REG0))
    };
    match loc {
        LocDie::None => None,
        LocDie::Expr(e) => entry(0, e).flatten(),
        LocDie::List(off) => {
            for (k, data) in locs.list_exprs(off).enumerate() {
                match entry(k, data) {
                    Some(Some(r)) => return Some(r),
                    Some(None) => {}
                    None => return None,
                }
            }
            None
        }
    }
}

/// Decodes every operation of `expr` into `out` (clang's moved parameters are
/// `DW_OP_bregN … DW_OP_stack_value` of six operations or more): each opcode with,
/// for an entry value whose block is a single `DW_OP_regN`, that N. None if an
/// operation cannot be decoded.
fn decode_ops(expr: &[u8], locs: &LocCtx<'_>, out: &mut Vec<(u8, Option<u8>)>) -> Option<()> {
    out.clear();
    let mut r = gimli::EndianSlice::new(expr, locs.endian);
    while !r.is_empty() {
        let code = r.slice()[0];
        match gimli::Operation::parse(&mut r, locs.encoding).ok()? {
            gimli::Operation::EntryValue { expression } => {
                let b = expression.slice();
                let inner = (b.len() == 1 && is_reg(b[0])).then(|| b[0] - DW_OP_REG0);
                out.push((code, inner));
            }
            _ => out.push((code, None)),
        }
    }
    Some(())
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

    fn unit_with_locs() -> CuTypes<'static> {
        unit_with_loclists(&[])
    }

    /// A DWARF 5 unit whose `.debug_loclists` is `lists`.
    fn unit_with_loclists(lists: &'static [u8]) -> CuTypes<'static> {
        let e = gimli::EndianSlice::new(&[][..], gimli::RunTimeEndian::Little);
        let l = gimli::EndianSlice::new(lists, gimli::RunTimeEndian::Little);
        CuTypes {
            locs: Some(LocCtx {
                lists: gimli::LocationLists::new(e.into(), l.into()),
                encoding: gimli::Encoding {
                    format: gimli::Format::Dwarf32,
                    version: 5,
                    address_size: 8,
                },
                endian: gimli::RunTimeEndian::Little,
            }),
            ..CuTypes::empty(0x1d, 8)
        }
    }

    #[test]
    fn entry_registers_from_expressions() {
        let cu = unit_with_locs();
        let reg = |e: &'static [u8]| loc_reg(&cu, LocDie::Expr(e), false);
        let wide = |e: &'static [u8]| loc_reg(&cu, LocDie::Expr(e), true);
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
        assert_eq!(
            wide(&[0x93, 0x04, 0x52, 0x93, 0x04]),
            Some(2),
            "piece 4 (lost); reg2; piece 4: the first register named"
        );
        assert_eq!(
            reg(&[0x93, 0x04, 0x52, 0x93, 0x04]),
            None,
            "the same for a parameter that fits a register: no register first"
        );
        assert_eq!(reg(&[0x30, 0x9f]), None, "lit0; stack_value: a constant");
        assert_eq!(
            wide(&[0x31, 0x9f, 0x93, 0x04, 0x52, 0x93, 0x04]),
            None,
            "constant first"
        );
        assert_eq!(reg(&[0x75, 0x00, 0xff]), None, "undecodable");
        assert_eq!(reg(&[]), None);
    }

    #[test]
    fn entry_registers_from_location_lists() {
        // DW_LLE_offset_pair (4) start end, then the expression's length and bytes.
        const LISTS: &[u8] = &[
            // 0: fbreg 0 (spilled), then piece 4; reg2; piece 4.
            4, 0, 4, 2, 0x91, 0x00, 4, 4, 8, 5, 0x93, 0x04, 0x52, 0x93, 0x04, 0,
            // 16: lit0; stack_value, then reg5 alone.
            4, 0, 4, 2, 0x30, 0x9f, 4, 4, 8, 1, 0x55, 0,
            // 28: empty, then entry_value(reg3); stack_value.
            4, 0, 4, 0, 4, 4, 8, 4, 0xa3, 0x01, 0x53, 0x9f, 0,
            // 41: an undecodable expression ends the list.
            4, 0, 4, 1, 0xff, 4, 4, 8, 1, 0x55, 0,
        ];
        let cu = unit_with_loclists(LISTS);
        let at = |off, wide| loc_reg(&cu, LocDie::List(off), wide);
        assert_eq!(at(0, true), Some(2), "pieces count in any entry");
        assert_eq!(
            at(0, false),
            None,
            "a register-sized parameter: first entry only"
        );
        assert_eq!(
            at(16, false),
            None,
            "a bare register counts in the first entry only"
        );
        assert_eq!(at(28, false), Some(3), "entry values count in any entry");
        assert_eq!(at(41, false), None);
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
