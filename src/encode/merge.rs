//! The cross-unit part of the functions: each unit's candidate records, renumbered
//! to the ids and strings the units' types and names got in unit order, appended in
//! unit order; after the last unit, the records of one function merged across units
//! (pahole's `saved_functions_combine`, `funcs__match`) and emitted (see `emit.rs`).
//! The prototype comparison (`types_match`) looks only at names and shapes, which
//! dedup keeps, so it answers the same on the kept types as on the whole stream.

use super::candidates::{
    SavedFunc, INCONSISTENT, OPTIMIZED_PARMS, OPTIMIZED_SYMBOL, REORDERED_PARM, SIGNATURE_CHANGED,
    UNCERTAIN_PARM_LOC, UNEXPECTED_REG,
};
use super::skips::{FuncSkip, SkipReason};
use super::vars::{emit_var, PendingVar, VarSections};
use super::{push_decl_tag, EncodeError, EncoderState, Features, UnitRecords};
use crate::btf::{Btf, Param, StrOffset, Type, TypeId, TypeKind};
use crate::kfuncs::Kfuncs;
use crate::symbols::ElfSymbols;
use std::sync::Arc;

/// What pahole adds to its one merged unit (an LTO build) after every part's types,
/// kept until the last part: the parts' type decl tags, the strings of the saved
/// functions (interned when pahole saves them, after those decl tags) and the
/// variables, in part order.
#[derive(Default)]
struct Merged {
    /// (value, tagged type, component index).
    tags: Vec<super::DeferredTag>,
    /// The name of each entry of [`FuncEncoder::parms`] (empty for `...`).
    parm_names: Vec<Box<[u8]>>,
    /// The value of each entry of [`FuncEncoder::annots`].
    annot_values: Vec<Box<[u8]>>,
    vars: Vec<PendingVar>,
}

/// The functions of every unit so far, emitted (with the variables' DATASECs) at
/// the end. Everything here is owned and in the run's ids and strings.
pub struct FuncEncoder {
    pub(super) syms: Arc<ElfSymbols>,
    pub(super) kfuncs: Kfuncs,
    pub(super) saved: Vec<SavedFunc>,
    pub(super) parms: Vec<Param>,
    pub(super) annots: Vec<(StrOffset, i32)>,
    /// Per function of the symbol table, its last saved record ([`NONE`] before
    /// its first), and per saved record the one saved before it for the same
    /// function: the chains [`FuncEncoder::save_unless_repeated`] looks for
    /// repeats in. Two arrays of fixed size instead of a hash table of the
    /// records' contents, which doubled with the input (1.1 MB on the corpus
    /// vmlinux, 2.2 MB with four copies of its `.debug_info`).
    last_of: Vec<u32>,
    prev_of: Vec<u32>,
    vars: VarSections,
    /// Functions left out and merge disagreements, in pahole's order (`--verbose`).
    pub(super) skips: Vec<FuncSkip>,
    /// The deferred records of a merged unit (None for ordinary units).
    merged: Option<Box<Merged>>,
}

impl FuncEncoder {
    /// The functions and variables of the file `syms` describes, with its kfunc
    /// sets; `merged`: the units are parts of one merged unit (an LTO build).
    pub fn new(syms: Arc<ElfSymbols>, kfuncs: Kfuncs, merged: bool) -> FuncEncoder {
        let n = syms.functions.sym_count();
        let last_of = vec![NONE; syms.functions.len()];
        FuncEncoder {
            vars: VarSections::new(&syms),
            syms,
            kfuncs,
            // Sized by the symbol table, once: grown by doubling, the run's
            // records were copied into fresh pages at each step (3 MB at the
            // last, on a vmlinux); room never used is never touched.
            saved: Vec::with_capacity(n),
            parms: Vec::with_capacity(3 * n),
            annots: Vec::new(),
            last_of,
            prev_of: Vec::with_capacity(n),
            skips: Vec::new(),
            merged: merged.then(Box::default),
        }
    }

    /// At most how many types [`FuncEncoder::finish`] will add: a FUNC_PROTO and a
    /// FUNC per saved record, a DECL_TAG per tag, a DATASEC per section, and for a
    /// merged unit its deferred type decl tags and VARs.
    pub fn types_to_come(&self) -> usize {
        let deferred = self
            .merged
            .as_ref()
            .map_or(0, |m| m.tags.len() + m.vars.len());
        2 * self.saved.len() + self.annots.len() + self.vars.sections() + deferred
    }

    /// Appends the records of the next unit, in unit order: `id` gives the run's id
    /// of each of the unit's local type ids, `strs[i]` the offset of the unit's
    /// string `i + 1`.
    pub fn add_unit(
        &mut self,
        unit: UnitRecords,
        id: impl Fn(TypeId) -> TypeId,
        strs: &[StrOffset],
    ) {
        let s = |o: StrOffset| match o.0 {
            0 => StrOffset::EMPTY,
            k => strs[k as usize - 1],
        };
        let f = unit.funcs;
        if self.merged.is_some() {
            // A merged unit's names are owned bytes until its end (`Merged`): its
            // records are kept as they come.
            let (parms, annots) = (offset32(self.parms.len()), offset32(self.annots.len()));
            self.saved.extend(f.saved.into_iter().map(|mut r| {
                r.ret = id(r.ret);
                r.parms_start += parms;
                r.annots_start += annots;
                r
            }));
            self.parms.extend(f.parms.into_iter().map(|p| Param {
                name: s(p.name),
                type_id: id(p.type_id),
            }));
            self.annots
                .extend(f.annots.into_iter().map(|(v, idx)| (s(v), idx)));
        } else {
            for r in f.saved {
                let parms = &f.parms[r.parms_start as usize..][..r.parms_len as usize];
                let annots = &f.annots[r.annots_start as usize..][..r.annots_len as usize];
                let rec = SavedFunc {
                    ret: id(r.ret),
                    parms_start: offset32(self.parms.len()),
                    annots_start: offset32(self.annots.len()),
                    ..r
                };
                self.parms.extend(parms.iter().map(|p| Param {
                    name: s(p.name),
                    type_id: id(p.type_id),
                }));
                self.annots
                    .extend(annots.iter().map(|&(v, idx)| (s(v), idx)));
                self.save_unless_repeated(rec);
            }
        }
        for (shndx, mut e) in unit.vars {
            e.type_id = id(e.type_id);
            self.vars.push(shndx, e);
        }
        if let Some(m) = self.merged.as_deref_mut() {
            m.parm_names.extend(f.parm_names);
            m.annot_values.extend(f.annot_values);
            m.tags
                .extend(unit.tags.into_iter().map(|(v, t, i)| (v, id(t), i)));
            m.vars.extend(unit.pending_vars.into_iter().map(|mut v| {
                v.type_id = id(v.type_id);
                v
            }));
        }
    }

    /// Saves `rec`, whose parameters and decl tags are the last of `parms` and
    /// `annots`, unless an equal record (same function, address, flags, return,
    /// parameters and tags, in the run's ids and strings) is saved already: then its
    /// parameters and tags are taken back. A kernel that holds the same unit twice
    /// gives such repeats, which would keep memory growing with the input.
    ///
    /// Dropping a repeat changes nothing that [`FuncEncoder::emit_funcs`] decides: a
    /// function's records are combined in unit order into its first one, and a
    /// repeat of an earlier record adds no flag and no mismatch the earlier one did
    /// not (its comparison with the first record is the earlier one's), and the
    /// earlier one comes first wherever a record of the run is searched for.
    ///
    /// The earlier records of the function are walked newest first; a function
    /// has a few (its static copies in several units, its views at several
    /// addresses).
    fn save_unless_repeated(&mut self, rec: SavedFunc) {
        let (ps, an) = (rec.parms_start as usize, rec.annots_start as usize);
        let Some(&last) = self.last_of.get(rec.func as usize) else {
            // Not a function of the table (never so): saved, and never a repeat.
            self.saved.push(rec);
            self.prev_of.push(NONE);
            return;
        };
        let body = self.record_body(&rec);
        let mut k = last;
        while k != NONE {
            if self.record_body(&self.saved[k as usize]) == body {
                self.parms.truncate(ps);
                self.annots.truncate(an);
                return;
            }
            k = self.prev_of[k as usize];
        }
        self.last_of[rec.func as usize] = offset32(self.saved.len());
        self.saved.push(rec);
        self.prev_of.push(last);
    }

    /// What makes a saved record the same as another: all but where its parameters
    /// and tags lie.
    #[allow(clippy::type_complexity)] // a tuple compared, named once here
    fn record_body<'e>(
        &'e self,
        r: &SavedFunc,
    ) -> (
        (u32, u64, TypeId, u8, Option<u32>),
        &'e [Param],
        &'e [(StrOffset, i32)],
    ) {
        (
            (r.func, r.addr, r.ret, r.flags, r.true_sym),
            &self.parms[r.parms_start as usize..][..r.parms_len as usize],
            &self.annots[r.annots_start as usize..][..r.annots_len as usize],
        )
    }

    /// Emits the saved functions in name order, then one DATASEC per section with
    /// variables. Call after the last unit, before dedup. Returns why functions
    /// were left out (pahole's `--verbose` lines, in its order).
    pub fn finish(mut self, st: &mut EncoderState) -> Result<Vec<FuncSkip>, EncodeError> {
        if let Some(m) = self.merged.take() {
            self.finish_merged(*m, st);
        }
        self.emit_funcs(st)?;
        let FuncEncoder { vars, skips, .. } = self;
        vars.finish(st);
        Ok(skips)
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
            let (shndx, e) = emit_var(v, st);
            self.vars.push(shndx, e);
        }
    }

    /// pahole's `saved_functions_combine` of state `b` into the run's first `a`.
    pub(super) fn combine(&mut self, btf: &Btf, a: usize, b: usize) {
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
}

/// No record: the end of a chain of [`FuncEncoder::prev_of`].
const NONE: u32 = u32::MAX;

/// An index into the run's records as a u32: the records of a function are at most
/// a few per subprogram DIE of the input, far fewer than 2^32.
fn offset32(n: usize) -> u32 {
    u32::try_from(n).expect("fewer than 2^32 function records")
}

/// pahole's "skip optimized": optimized-out parameters at the address of a clone
/// symbol or in a function whose signature clang changed, unless `true_signature`
/// rewrites such signatures.
pub(super) fn skip_optimized(s: &SavedFunc, features: &Features) -> bool {
    !features.true_signature
        && s.flags & OPTIMIZED_PARMS != 0
        && s.flags & (OPTIMIZED_SYMBOL | SIGNATURE_CHANGED) != 0
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
        if let (Some((x, n1)), Some((y, n2))) = (array_shape(&ta.kind), array_shape(&tb.kind)) {
            if n1 != n2 {
                return false;
            }
            a = x;
            b = y;
            continue;
        }
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

/// An array's element type and element count.
fn array_shape(k: &TypeKind) -> Option<(TypeId, u32)> {
    match k {
        TypeKind::Array {
            elem_type, nelems, ..
        } => Some((*elem_type, *nelems)),
        _ => None,
    }
}

/// A type's kind for matching, with a FWD counted as the struct or union it
/// declares.
fn fwd_kind(t: &Type) -> crate::btf::Kind {
    match t.kind {
        TypeKind::Fwd { union } => crate::btf::Kind::fwd_declares(union),
        _ => t.kind(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit of one function record with `parms` (local type and string ids).
    fn unit(func: u32, parms: &[(u32, u32)]) -> UnitRecords {
        let mut r = UnitRecords::default();
        r.funcs.parms = parms
            .iter()
            .map(|&(name, t)| Param {
                name: StrOffset(name),
                type_id: TypeId(t),
            })
            .collect();
        r.funcs.saved.push(SavedFunc {
            func,
            addr: 0x1000,
            ret: TypeId(1),
            parms_start: 0,
            parms_len: offset32(parms.len()),
            annots_start: 0,
            annots_len: 0,
            flags: 0,
            true_sym: None,
        });
        r
    }

    #[test]
    fn a_repeated_record_is_not_saved_twice() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample/sample.o");
        let data = std::fs::read(&path).expect("examples/sample/sample.o");
        let syms = ElfSymbols::parse(&path, &data).expect("sample.o's symbols");
        let mut f = FuncEncoder::new(Arc::new(syms), Kfuncs::default(), false);
        let strs = [StrOffset(10), StrOffset(20)];
        // Unit ids map to run ids + 100: the same record from two units is equal
        // only in the run's ids.
        let id = |t: TypeId| TypeId(t.0 + 100);
        f.add_unit(unit(0, &[(1, 1), (2, 1)]), id, &strs);
        f.add_unit(unit(0, &[(1, 1), (2, 1)]), id, &strs);
        assert_eq!((f.saved.len(), f.parms.len()), (1, 2), "repeat dropped");
        // Differing in a parameter's type, in its name, or in the function: kept.
        f.add_unit(unit(0, &[(1, 1), (2, 2)]), id, &strs);
        f.add_unit(unit(0, &[(2, 1), (2, 1)]), id, &strs);
        f.add_unit(unit(1, &[(1, 1), (2, 1)]), id, &strs);
        assert_eq!((f.saved.len(), f.parms.len()), (4, 8));
        // The kept records' parameters are where they say, in the run's ids.
        let last = f.saved[3];
        let p = &f.parms[last.parms_start as usize..][..last.parms_len as usize];
        assert_eq!(p[0].name, StrOffset(10));
        assert_eq!(p[1].type_id, TypeId(101));
        // And a repeat of a record that is not the last one saved is found too.
        f.add_unit(unit(0, &[(1, 1), (2, 2)]), id, &strs);
        assert_eq!((f.saved.len(), f.parms.len()), (4, 8));
    }

    #[test]
    fn types_match_loosely_on_const_and_by_name() {
        let mut btf = Btf::new(None);
        let int = btf.push_str(b"int");
        let s = btf.push_str(b"s");
        let t = |btf: &mut Btf, name, kind| btf.push_type(Type { name, kind });
        let i1 = t(&mut btf, int, TypeKind::int(32, 1));
        let i2 = t(&mut btf, int, TypeKind::int(32, 1));
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
