//! pahole's DWARF location analysis of a unit's function parameters (docs
//! §4; `parameter__new`, `function__analyze_parameter_locations`): which register
//! each parameter arrives in, and the flags that follow (`optimized_parms`,
//! `unexpected_reg`, `reordered_parm`, clang's `signature_changed`, the
//! `true_signature` rewrite).

use super::abi::Abi;
use super::candidates::{
    FuncScratch, OPTIMIZED_PARMS, REORDERED_PARM, SIGNATURE_CHANGED, UNEXPECTED_REG,
};
use super::idx32;
use super::layout::{is_packed, is_struct, param_byte_size};
use super::true_sig;
use crate::dwarf::ops::{
    is_breg, is_const, is_reg, DW_OP_BREG0, DW_OP_ENTRY_VALUE, DW_OP_GNU_ENTRY_VALUE, DW_OP_REG0,
    DW_OP_STACK_VALUE,
};
use crate::dwarf::types::{CuTypes, DieRef, FnParamDie, FuncDie, LocCtx, LocDie, Name, TypeDie};

/// What pahole's `parameter__new` records of one parameter's location, with what
/// concrete instances share with their abstract origin (`ftype__recode_dwarf_types`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ParamLoc {
    /// Has a `DW_AT_location`.
    has_loc: bool,
    /// The register it is in on entry, as pahole reads the location.
    reg: Option<u8>,
    /// pahole's `type_byte_size`.
    size: u64,
    /// Wider than the registers that would carry it: passed in memory.
    in_memory: bool,
}

impl FuncScratch {
    /// Indexes the unit's subprogram parameters by offset and reads their
    /// locations; then, as pahole's `ftype__recode_dwarf_types` does in DIE order,
    /// each concrete parameter shares its location facts with its abstract origin.
    pub(super) fn index_params(&mut self, cu: &CuTypes<'_>, abi: &Abi) {
        self.param_index.clear();
        self.locs.clear();
        self.func_start.clear();
        for (fi, f) in cu.funcs.iter().enumerate() {
            self.func_start.push(idx32(self.param_index.len()));
            for (pi, p) in f.params.iter().enumerate() {
                self.param_index.push((p.off, idx32(fi), idx32(pi)));
            }
        }
        // DIE order is offset order, but be safe against odd producers.
        if !self.param_index.windows(2).all(|w| w[0].0 < w[1].0) {
            self.param_index.sort_unstable();
        }
        let mut locs = std::mem::take(&mut self.locs);
        for f in &cu.funcs {
            locs.extend(f.params.iter().map(|p| self.own_loc(cu, p, abi)));
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
                let from = self.locs[(self.func_start[fi] + idx32(pi)) as usize];
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
    fn own_loc(&self, cu: &CuTypes<'_>, p: &FnParamDie<'_>, abi: &Abi) -> ParamLoc {
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
        let in_regs = if abi.agg_two_regs { 2 * addr } else { addr };
        let wide = abi.agg_two_regs && size > addr;
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
    pub(super) fn param_at<'c, 'a>(
        &self,
        cu: &'c CuTypes<'a>,
        r: DieRef,
    ) -> Option<(&'c FnParamDie<'a>, u32)> {
        let (_, fi, pi) = self.param_index[self.param_slot(r)?];
        Some((&cu.funcs[fi as usize].params[pi as usize], pi))
    }

    /// A parameter's name and type, taken from its abstract origin when it has
    /// none of its own.
    pub(super) fn param_origin<'a>(
        &self,
        cu: &CuTypes<'a>,
        p: &FnParamDie<'a>,
    ) -> (Name<'a>, DieRef) {
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
    pub(super) fn analyze(
        &mut self,
        cu: &CuTypes<'_>,
        fi: usize,
        abi: &Abi,
        true_signature: bool,
    ) -> u8 {
        let f = &cu.funcs[fi];
        let locs = &self.locs[self.func_start[fi] as usize..][..f.params.len()];
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
        let slots = |l: &ParamLoc| slots(abi, addr, l);
        let mut reg_idx = 0usize;
        if changed && true_signature {
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
    pub(super) fn uncertain_parm_loc(&self, cu: &CuTypes<'_>, f: &FuncDie<'_>, abi: &Abi) -> bool {
        let n = abi.nr_regs;
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
}

/// Register slots (`parameter__abi_slots`): one, or one per register of an
/// aggregate wider than a register.
fn slots(abi: &Abi, addr: u64, l: &ParamLoc) -> usize {
    if !abi.agg_two_regs || l.size <= addr || addr == 0 {
        1
    } else {
        // A parameter's size over the register's: a handful of slots.
        usize::try_from(l.size.div_ceil(addr).max(1)).unwrap_or(usize::MAX)
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
    let slots = |l: &ParamLoc| slots(abi, addr, l);
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

/// pahole's `function__signature_changed` (asked of clang's units only): an
/// abstract instance's never changed; otherwise `DW_CC_nocall` on the function or
/// on its abstract origin.
pub(super) fn signature_changed(cu: &CuTypes<'_>, f: &FuncDie<'_>) -> bool {
    if f.inlined {
        return false;
    }
    if f.origin.0 == 0 {
        return f.nocall;
    }
    super::candidates::func_at(cu, f.origin).is_some_and(|o| o.nocall)
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
pub(super) fn loc_reg(cu: &CuTypes<'_>, loc: LocDie<'_>, wide: bool) -> Option<u8> {
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
}
