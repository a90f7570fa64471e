//! Which of a unit's subprograms are candidate functions, and the owned record of
//! each (docs/pahole-functions.md §3): built on the worker that encodes the unit,
//! with the unit's local type ids and strings; merged across units in unit order by
//! [`super::FuncEncoder`].

use super::abi::Abi;
use super::types::Unit;
use super::vars::VarRules;
use super::{idx32, true_sig, Features, Out};
use crate::btf::{Param, StrOffset, TypeId};
use crate::dwarf::types::{CuTypes, DieRef, FuncDie, Name};
use crate::symbols::ElfSymbols;
use std::sync::Arc;

/// `optimized_parms`: a parameter is optimized out or has no location.
pub(super) const OPTIMIZED_PARMS: u8 = 1 << 0;
/// `unexpected_reg`: a parameter is not in the register the ABI puts it in.
pub(super) const UNEXPECTED_REG: u8 = 1 << 1;
/// `inconsistent_proto`: units disagree on the prototype (set while merging).
pub(super) const INCONSISTENT: u8 = 1 << 2;
/// `uncertain_parm_loc`: a packed struct is passed on the stack.
pub(super) const UNCERTAIN_PARM_LOC: u8 = 1 << 3;
/// `reordered_parm`: a parameter moved relative to the abstract origin.
pub(super) const REORDERED_PARM: u8 = 1 << 4;
/// `optimized_symbol`: the address is that of a `.isra` / `.constprop` clone.
pub(super) const OPTIMIZED_SYMBOL: u8 = 1 << 5;
/// `signature_changed`: clang marked the function `DW_CC_nocall`.
pub(super) const SIGNATURE_CHANGED: u8 = 1 << 6;

/// One unit's view of one function, kept until all units are encoded.
#[derive(Clone, Copy, Debug)]
pub(super) struct SavedFunc {
    /// Index in the ELF function table (sorted by name).
    pub func: u32,
    /// `DW_AT_low_pc` (0 for abstract instances).
    pub addr: u64,
    /// Return type.
    pub ret: TypeId,
    /// Parameters: a range of the records' `parms`.
    pub parms_start: u32,
    pub parms_len: u32,
    /// Decl tags: a range of the records' `annots`.
    pub annots_start: u32,
    pub annots_len: u32,
    /// The flag bits above.
    pub flags: u8,
    /// With `true_signature`: the symbol at `addr` whose name has a `.` suffix (an
    /// index in the function's symbols), which names the FUNC of the clone.
    pub true_sym: Option<u32>,
}

/// The candidate functions of one unit, owned: ids are the unit's local ids and
/// names the unit's local strings (or, in a merged unit, owned bytes, interned when
/// pahole interns them: after every part's types).
#[derive(Default, Debug)]
pub struct UnitFuncs {
    pub(super) saved: Vec<SavedFunc>,
    pub(super) parms: Vec<Param>,
    pub(super) annots: Vec<(StrOffset, i32)>,
    /// Merged unit: the name of each entry of `parms` (empty for `...`).
    pub(super) parm_names: Vec<Box<[u8]>>,
    /// Merged unit: the value of each entry of `annots`.
    pub(super) annot_values: Vec<Box<[u8]>>,
}

/// What selecting a unit's functions and variables needs of the whole file: its
/// ELF symbols, read once and shared by the workers.
pub struct FuncRules {
    pub(super) syms: Arc<ElfSymbols>,
    /// The target's argument registers.
    pub(super) abi: Abi,
    true_signature: bool,
    pub(super) vars: VarRules,
}

impl FuncRules {
    /// The index in the function table of the function named `name`.
    fn function_index(&self, name: &[u8]) -> Option<u32> {
        self.syms.functions.index_of(name)
    }

    /// The rules for the file `syms` describes.
    pub fn new(syms: Arc<ElfSymbols>, features: &Features) -> FuncRules {
        FuncRules {
            abi: Abi::of(syms.machine),
            vars: VarRules::new(&syms, features),
            syms,
            true_signature: features.true_signature,
        }
    }
}

/// A worker's scratch for one unit's functions (reused between units).
#[derive(Default)]
pub struct FuncScratch {
    /// (unit offset, function index, parameter index) of every parameter of the
    /// unit, sorted by offset.
    pub(super) param_index: Vec<(u32, u32, u32)>,
    /// The location facts of every parameter of the unit, by function and
    /// parameter in DIE order (`func_start[f] + p`).
    pub(super) locs: Vec<super::locations::ParamLoc>,
    /// Where each function's parameters start in `locs`.
    pub(super) func_start: Vec<u32>,
    /// Per function: whether each parameter is optimized out (no location, or one
    /// that is not a register), as the analysis found.
    pub(super) gone: Vec<bool>,
    /// Per function, with `true_signature` where clang changed the signature: the
    /// parameters not passed (dropped from the prototype) …
    pub(super) ts_drop: Vec<bool>,
    /// … the byte offset of the one field of an aggregate parameter that reaches a
    /// register (which names the parameter `PARAM__FIELD`) …
    pub(super) ts_member: Vec<Option<u64>>,
    /// … and whether the parameter is passed as that field (takes its type).
    pub(super) ts_apply: Vec<bool>,
}

/// A string of a saved record: the unit's, or with a merged unit kept in `names`
/// (and the empty offset for now).
fn save_str(out: &mut Out<'_>, merged: Option<&mut Vec<Box<[u8]>>>, s: Name<'_>) -> StrOffset {
    match merged {
        None => out.strs.intern(s),
        Some(names) => {
            names.push(s.bytes().into());
            StrOffset::EMPTY
        }
    }
}

/// The candidate functions of unit `enc`, pahole's `btf_encoder__save_func` of each.
pub(super) fn save_funcs(
    enc: &Unit<'_, '_>,
    rules: &FuncRules,
    sc: &mut FuncScratch,
    out: &mut Out<'_>,
    merged: bool,
) -> UnitFuncs {
    let cu = enc.cu;
    let mut u = UnitFuncs::default();
    if rules.syms.functions.is_empty() || cu.funcs.is_empty() {
        return u;
    }
    sc.index_params(cu, &rules.abi);
    let table = &rules.syms.functions;
    for (fi, f) in cu.funcs.iter().enumerate() {
        if f.declaration {
            continue;
        }
        let name = func_name(cu, f, 0);
        if name.is_empty() {
            continue;
        }
        // pahole: every parameter must have a name (its own or its origin's).
        if f.params.iter().any(|p| sc.param_origin(cu, p).0.is_empty()) {
            continue;
        }
        let Some(fidx) = rules.function_index(name.bytes()) else {
            continue;
        };
        let ef = table.get(fidx as usize);
        let mut flags = sc.analyze(cu, fi, &rules.abi, rules.true_signature);
        if sc.uncertain_parm_loc(cu, f, &rules.abi) {
            flags |= UNCERTAIN_PARM_LOC;
        }
        if ef.optimized_symbol_at(f.low_pc) {
            flags |= OPTIMIZED_SYMBOL;
        }
        let ret = enc.id(func_ret(cu, f));
        let parms_start = idx32(u.parms.len());
        let reordered = flags & REORDERED_PARM != 0;
        let true_sig = rules.true_signature && flags & SIGNATURE_CHANGED != 0;
        for (k, p) in f.params.iter().enumerate() {
            // pahole: with reordered parameters, those optimized out are gone;
            // a true signature has only the parameters passed.
            if (reordered && sc.gone[k]) || (true_sig && sc.ts_drop[k]) {
                continue;
            }
            let (pname, pty) = sc.param_origin(cu, p);
            // pahole names the parameter after the field it found even where
            // it does not pass the parameter as that field.
            let field = sc.ts_member[k]
                .filter(|_| true_sig)
                .and_then(|off| true_sig::member_at(cu, p.ty, off));
            let names = merged.then_some(&mut u.parm_names);
            let (name, ty) = match field {
                Some((mname, mty)) => {
                    let full = [pname.bytes(), b"__", mname.bytes()].concat();
                    let ty = if sc.ts_apply[k] { mty } else { pty };
                    // An owned name goes by content, never through the address
                    // cache: its address is freed and can come back.
                    let name = match names {
                        None => out.strs.intern_owned(&full),
                        Some(names) => {
                            names.push(full.into());
                            StrOffset::EMPTY
                        }
                    };
                    (name, ty)
                }
                None => (save_str(out, names, pname), pty),
            };
            u.parms.push(Param {
                name,
                type_id: enc.id(ty),
            });
        }
        if f.varargs {
            if merged {
                u.parm_names.push(Box::default());
            }
            u.parms.push(Param {
                name: StrOffset::EMPTY,
                type_id: TypeId::VOID,
            });
        }
        let annots_start = idx32(u.annots.len());
        for a in f.annots {
            let v = save_str(out, merged.then_some(&mut u.annot_values), a.value);
            u.annots.push((v, a.component_idx));
        }
        u.saved.push(SavedFunc {
            func: fidx,
            addr: f.low_pc,
            ret,
            parms_start,
            parms_len: idx32(u.parms.len()) - parms_start,
            annots_start,
            annots_len: idx32(u.annots.len()) - annots_start,
            flags,
            true_sym: if rules.true_signature {
                true_sym(&ef, f.low_pc)
            } else {
                None
            },
        });
    }
    u
}

/// pahole's true-signature symbol: the first symbol (in `.symtab` order) at exactly
/// `addr` whose name has a `.` (`foo.isra.0`), if any.
fn true_sym(ef: &crate::symbols::ElfFunction<'_>, addr: u64) -> Option<u32> {
    if addr == 0 {
        return None;
    }
    ef.syms()
        .position(|s| s.addr == addr && s.name.contains('.'))
        .and_then(|i| u32::try_from(i).ok())
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
pub(super) fn func_at<'c, 'a>(cu: &'c CuTypes<'a>, r: DieRef) -> Option<&'c FuncDie<'a>> {
    let i = cu.funcs.binary_search_by_key(&r.0, |f| f.off).ok()?;
    Some(&cu.funcs[i])
}
