//! Variables: VARs per unit, right after the unit's types (`var`: per-CPU ones;
//! `global_var`: every global), selected on the worker that encodes the unit, and one
//! DATASEC per section at the very end, as
//! pahole v1.31's `btf_encoder__encode_cu_variables` (docs/pahole-functions.md §7).

use super::layout::{size_of, Sizing};
use super::types::Unit;
use super::{push_decl_tag, EncodeError, EncoderState, Features, TypeSink};
use crate::btf::{Type, TypeId, TypeKind, VarSecInfo, VAR_GLOBAL_ALLOCATED, VAR_STATIC};
use crate::dwarf::types::{CuTypes, DieRef, VarDie};
use crate::symbols::{ElfSymbols, PERCPU_SECTION};

/// Names pahole never encodes as variables (`filter_variable_name`).
const SKIPPED_PREFIXES: &[&str] = &[
    "__UNIQUE_ID",
    "__tpstrtab_",
    "__exitcall_",
    "__gendwarfksyms_ptr_",
    "__func_stack_frame_non_standard_",
];

/// pahole's `KSYM_NAME_LEN`: the longest valid variable name.
const KSYM_NAME_LEN: usize = 128;

/// A variable pahole encodes, before its VAR is added (see `emit_var`).
#[derive(Clone, Debug)]
pub struct PendingVar {
    /// Name.
    pub name: Box<[u8]>,
    /// The id of its type.
    pub type_id: TypeId,
    /// `DW_AT_external`.
    pub external: bool,
    /// Section index, offset in it and size.
    pub shndx: u32,
    /// Offset in the section.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// `btf_decl_tag`s (value, component index), if decl tags are encoded.
    pub annots: Vec<(Box<[u8]>, i32)>,
}

/// Which variables pahole encodes: read by the workers.
pub struct VarRules {
    /// Whether variables of each section are encoded.
    include: Vec<bool>,
    encode_force: bool,
    decl_tag: bool,
}

impl VarRules {
    /// Which sections' variables `features` asks for.
    pub fn new(syms: &ElfSymbols, features: &Features) -> VarRules {
        VarRules {
            include: syms
                .sections
                .iter()
                .map(|s| features.global_var || (features.var && &*s.name == PERCPU_SECTION))
                .collect(),
            encode_force: features.encode_force,
            decl_tag: features.decl_tag,
        }
    }

    /// The variables of unit `enc` that pahole encodes, as owned records with the
    /// unit's local type ids; nothing is added to the BTF yet (see [`emit_var`]).
    pub(super) fn select_cu(
        &self,
        enc: &Unit<'_, '_>,
        syms: &ElfSymbols,
    ) -> Result<Vec<PendingVar>, EncodeError> {
        let cu = enc.cu;
        let mut out = Vec::new();
        if !self.include.iter().any(|&b| b) {
            return Ok(out);
        }
        for v in &cu.vars {
            // Incomplete declarations; definitions of `extern`-declared
            // variables carry a specification and are kept.
            if v.declaration && v.spec.0 == 0 {
                continue;
            }
            if v.artificial {
                continue;
            }
            let Some(addr) = v.addr else {
                continue;
            };
            let Some(sec) = syms.section_for_addr(addr) else {
                continue;
            };
            if !self
                .include
                .get(sec.index as usize)
                .copied()
                .unwrap_or(false)
            {
                continue;
            }
            let offset = addr - sec.addr;
            // Name, type, linkage and tags come from the specification.
            let d = if v.spec.0 != 0 {
                var_at(cu, v.spec).unwrap_or(v)
            } else {
                v
            };
            if d.name.is_empty() {
                continue;
            }
            let name = String::from_utf8_lossy(d.name.bytes());
            if name.starts_with('_') && SKIPPED_PREFIXES.iter().any(|p| name.starts_with(p)) {
                continue;
            }
            // A variable at offset 0 may be in a discarded section: pahole then
            // wants an object symbol of that name in the section.
            if offset == 0 && !syms.has_object_in(&name, sec.index) {
                continue;
            }
            if !name_valid(d.name.bytes()) {
                if self.encode_force {
                    continue;
                }
                return Err(EncodeError(format!(
                    "invalid variable name '{name}' (pahole needs --btf_encode_force to skip it)"
                )));
            }
            if d.ty == DieRef::VOID {
                if self.encode_force {
                    continue;
                }
                return Err(EncodeError(format!("variable '{name}' has void type")));
            }
            let size = size_of(cu, d.ty, 0, Sizing::Tag);
            // pahole leaves out what a DATASEC entry cannot hold.
            let (Ok(size), Ok(offset)) = (u32::try_from(size), u32::try_from(offset)) else {
                continue;
            };
            if size == 0 {
                continue;
            }
            out.push(PendingVar {
                name: d.name.bytes().into(),
                type_id: enc.id(d.ty),
                external: d.external,
                shndx: sec.index,
                offset,
                size,
                annots: if self.decl_tag {
                    d.annots
                        .iter()
                        .map(|a| (a.value.bytes().into(), a.component_idx))
                        .collect()
                } else {
                    Vec::new()
                },
            });
        }
        Ok(out)
    }
}

/// Adds the VAR of `v` (and its decl tags) to `sink`; returns its section and its
/// DATASEC entry.
pub(super) fn emit_var(v: &PendingVar, sink: &mut impl TypeSink) -> (u32, VarSecInfo) {
    let name_off = sink.intern_owned(&v.name);
    let id = sink.push(Type {
        name: name_off,
        kind: TypeKind::Var {
            type_id: v.type_id,
            linkage: if v.external {
                VAR_GLOBAL_ALLOCATED
            } else {
                VAR_STATIC
            },
        },
    });
    for (value, idx) in &v.annots {
        let value = sink.intern_owned(value);
        push_decl_tag(sink, value, id, *idx);
    }
    let entry = VarSecInfo {
        type_id: id,
        offset: v.offset,
        size: v.size,
    };
    (v.shndx, entry)
}

/// The variables found so far, by section index.
pub struct VarSections {
    /// (VAR id, offset, size) per section, in emission order.
    entries: Vec<Vec<VarSecInfo>>,
    /// Section names.
    names: Vec<Box<str>>,
}

impl VarSections {
    /// No variables yet, in the sections of `syms`.
    pub fn new(syms: &ElfSymbols) -> VarSections {
        VarSections {
            entries: vec![Vec::new(); syms.sections.len()],
            names: syms.sections.iter().map(|s| s.name.clone()).collect(),
        }
    }

    /// Number of sections of the file (each may get a DATASEC).
    pub fn sections(&self) -> usize {
        self.entries.len()
    }

    /// Adds the entry of a VAR to section `shndx`.
    pub fn push(&mut self, shndx: u32, entry: VarSecInfo) {
        self.entries[shndx as usize].push(entry);
    }

    /// One DATASEC per section with variables, in section order, entries sorted
    /// by offset (stably, as glibc's merge-sort qsort leaves equal offsets).
    pub fn finish(self, st: &mut EncoderState) {
        for (entries, name) in self.entries.into_iter().zip(self.names.iter()) {
            if entries.is_empty() {
                continue;
            }
            let mut entries = entries;
            entries.sort_by_key(|e| e.offset);
            let last = entries.last().expect("not empty");
            let size = last.offset.wrapping_add(last.size);
            let name = st.intern(crate::dwarf::types::Name::new(name.as_bytes()));
            st.btf_mut().push_type(Type {
                name,
                kind: TypeKind::Datasec { size, entries },
            });
        }
    }
}

/// The unit-level variable at unit offset `r`.
fn var_at<'c, 'a>(cu: &'c CuTypes<'a>, r: DieRef) -> Option<&'c VarDie<'a>> {
    let i = cu.vars.binary_search_by_key(&r.0, |v| v.off).ok()?;
    Some(&cu.vars[i])
}

/// pahole's `btf_name_valid`: `[A-Za-z_.][A-Za-z0-9_.]*`, at most 128 bytes.
fn name_valid(name: &[u8]) -> bool {
    let ok = |c: u8, first: bool| {
        c == b'_'
            || c == b'.'
            || if first {
                c.is_ascii_alphabetic()
            } else {
                c.is_ascii_alphanumeric()
            }
    };
    match name.split_first() {
        Some((&c, rest)) => {
            ok(c, true) && name.len() <= KSYM_NAME_LEN && rest.iter().all(|&c| ok(c, false))
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(name_valid(b"jiffies"));
        assert!(name_valid(b"_a.b1"));
        assert!(!name_valid(b"1a"));
        assert!(!name_valid(b"a-b"));
        assert!(!name_valid(b""));
        assert!(name_valid(&[b'a'; 128]));
        assert!(!name_valid(&[b'a'; 129]));
    }
}
