//! Emission, after the last unit: FUNC_PROTO + FUNC (+ DECL_TAGs, kfunc tags) for
//! each function that survives the merge, in the ELF function table's name order,
//! or the reason pahole gives for leaving it out.

use super::candidates::{
    SavedFunc, INCONSISTENT, REORDERED_PARM, UNCERTAIN_PARM_LOC, UNEXPECTED_REG,
};
use super::merge::{skip_optimized, FuncEncoder};
use super::skips::{FuncSkip, SkipReason};
use super::{push_decl_tag, EncodeError, EncoderState, Features};
use crate::btf::{StrOffset, Type, TypeId, TypeKind};
use crate::dwarf::types::Name;
use crate::kfuncs::{KF_ARENA_ARG1, KF_ARENA_ARG2, KF_ARENA_RET, KF_FASTCALL};
use std::sync::Arc;

impl FuncEncoder {
    pub(super) fn emit_funcs(&mut self, st: &mut EncoderState) -> Result<(), EncodeError> {
        let features = st.features().clone();
        // Stable: the states of one function stay in unit order. Counted, by the
        // function's index (a comparison sort of the corpus vmlinux's 56,000
        // records took 3.4-4.4 ms, and as much memory again as the records).
        let keys: Vec<u32> = self.saved.iter().map(|s| s.func).collect();
        let mut order = crate::order::stable_by_key(&keys);
        drop(keys);
        crate::order::permute_in_place(&mut self.saved, &mut order);
        // Room for a FUNC_PROTO and a FUNC per function and their decl tags, made
        // once: grown by doubling, the run's largest vector (the kept types) would
        // be copied into one of twice its size, the run's peak of memory.
        let funcs = 1 + self
            .saved
            .windows(2)
            .filter(|w| w[0].func != w[1].func)
            .count();
        st.btf_mut()
            .types_mut()
            .reserve(2 * funcs + self.annots.len());
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
                    let name = ef.sym(s.true_sym.map_or(0, |k| k as usize)).name;
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
        // By content, not through the run's address cache: each function's name is
        // emitted once, from the symbol table, so the cache would only miss and
        // then record it (a fifth of emitting the corpus vmlinux's functions).
        let fname = st.intern_owned(name.as_bytes());
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
