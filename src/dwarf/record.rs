//! DIE → record: what each wanted DIE becomes in the unit's arrays (a type, a
//! member, an enumerator, a function, a variable, a decl tag), and what closing a DIE
//! with children does (its children's lists moved into the arena, type tags chained
//! under their pointer, member decl tags numbered).

use super::attrs::Attrs;
use super::die::{DieError, Val};
use super::error::DwarfErrorKind;
use super::types::{
    AnnotDie, DeclTagDie, DieRef, EnumeratorDie, FnParamDie, FuncDie, MemberDie, ParamDie, RefKind,
    TypeDie, VarDie, DW_TAG_GNU_ANNOTATION, DW_TAG_LLVM_ANNOTATION,
};
use super::walk::{idx32, Frame, FrameKind, Parser, Scratch};
use gimli::constants::*;

impl<'a, 'i: 'a> Parser<'a, 'i, '_> {
    fn push_type(&mut self, off: u32, t: TypeDie<'a>) {
        self.acc.offsets.push(off);
        self.acc.types.push(t);
    }

    /// Records one wanted DIE; returns the frame kind its children are read as.
    pub(super) fn handle(
        &mut self,
        tag: DwTag,
        parent: FrameKind,
        top: bool,
        off: u32,
        a: Attrs<'a>,
        s: &mut Scratch<'a>,
    ) -> Result<FrameKind, DieError> {
        Ok(match tag {
            DW_TAG_base_type => {
                let byte_size = fits_u32("DW_AT_byte_size", a.byte_size)?;
                let bit_size = match a.bit_size {
                    Some(b) => fits_u32("DW_AT_bit_size", Some(b))?,
                    None => byte_size
                        .checked_mul(8)
                        .ok_or_else(|| too_large("DW_AT_byte_size", byte_size.into()))?,
                };
                self.push_type(
                    off,
                    TypeDie::Base {
                        name: a.name,
                        byte_size,
                        bit_size,
                        encoding: a.encoding,
                    },
                );
                FrameKind::Other
            }
            DW_TAG_pointer_type
            | DW_TAG_const_type
            | DW_TAG_volatile_type
            | DW_TAG_restrict_type
            | DW_TAG_atomic_type
            | DW_TAG_unspecified_type
            | DW_TAG_typedef => {
                let (kind, frame) = match tag {
                    DW_TAG_pointer_type => (RefKind::Pointer, FrameKind::Pointer),
                    DW_TAG_const_type => (RefKind::Const, FrameKind::Other),
                    DW_TAG_volatile_type => (RefKind::Volatile, FrameKind::Other),
                    DW_TAG_restrict_type => (RefKind::Restrict, FrameKind::Other),
                    DW_TAG_typedef => (RefKind::Typedef, FrameKind::Typedef),
                    // atomic_type stands for its target, unspecified_type for void.
                    _ => (RefKind::Alias, FrameKind::Other),
                };
                let ty = if tag == DW_TAG_unspecified_type {
                    DieRef::VOID
                } else {
                    a.ty
                };
                self.push_type(
                    off,
                    TypeDie::Ref {
                        kind,
                        name: a.name,
                        ty,
                    },
                );
                frame
            }
            DW_TAG_structure_type | DW_TAG_union_type | DW_TAG_class_type => {
                self.push_type(
                    off,
                    TypeDie::Composite {
                        is_union: tag == DW_TAG_union_type,
                        declaration: a.declaration,
                        name: a.name,
                        size: fits_u32("DW_AT_byte_size", a.byte_size)?,
                        members: &[],
                    },
                );
                FrameKind::Composite
            }
            DW_TAG_enumeration_type => {
                self.push_type(
                    off,
                    TypeDie::Enum {
                        name: a.name,
                        size: fits_u32("DW_AT_byte_size", a.byte_size)?,
                        ty: a.ty,
                        values: &[],
                    },
                );
                FrameKind::Enum
            }
            DW_TAG_array_type => {
                self.push_type(
                    off,
                    TypeDie::Array {
                        ty: a.ty,
                        dims: &[],
                    },
                );
                FrameKind::Array
            }
            DW_TAG_subroutine_type => {
                self.push_type(
                    off,
                    TypeDie::Proto {
                        ret: a.ty,
                        params: &[],
                        varargs: false,
                    },
                );
                FrameKind::Proto
            }
            DW_TAG_member => {
                let old = if a.data_bit_offset.is_none() {
                    a.bit_offset
                } else {
                    None
                };
                s.members.push(MemberDie {
                    name: a.name,
                    ty: a.ty,
                    bit_offset: match (a.data_bit_offset, a.member_location) {
                        (Some(b), _) => b,
                        (None, l) => {
                            let l = l.unwrap_or(0);
                            l.checked_mul(8)
                                .ok_or_else(|| too_large("DW_AT_data_member_location", l))?
                        }
                    },
                    bit_size: fits_u32("DW_AT_bit_size", a.bit_size)?,
                    old_offset: old.unwrap_or(0),
                    has_old_offset: old.is_some(),
                    byte_size: fits_u32("DW_AT_byte_size", a.byte_size)?,
                });
                FrameKind::Member
            }
            DW_TAG_enumerator => {
                s.enumerators.push(EnumeratorDie {
                    name: a.name,
                    value: a.const_value.unwrap_or(0),
                });
                FrameKind::Other
            }
            DW_TAG_subrange_type => {
                let n = match (a.count, a.upper_bound) {
                    (Some(c), _) => c,
                    (None, Some(u)) => u.wrapping_add(1).wrapping_sub(a.lower_bound.unwrap_or(0)),
                    (None, None) => 0,
                };
                s.dims.push(n);
                FrameKind::Other
            }
            DW_TAG_subprogram if top => {
                let low_pc = match a.low_pc {
                    Some(Val::Addr(x)) | Some(Val::U(x)) => x,
                    Some(Val::AddrX(i)) => self.addrx(i).unwrap_or(0),
                    _ => 0,
                };
                self.acc.funcs.push(FuncDie {
                    off,
                    name: a.name,
                    origin: a.origin,
                    spec: a.spec,
                    ret: a.ty,
                    low_pc,
                    declaration: a.declaration,
                    inlined: a.inline,
                    nocall: a.nocall,
                    params: &[],
                    varargs: false,
                    annots: &[],
                });
                FrameKind::Subprogram
            }
            DW_TAG_variable if top => {
                self.acc.vars.push(VarDie {
                    off,
                    name: a.name,
                    ty: a.ty,
                    spec: a.spec,
                    declaration: a.declaration,
                    external: a.external,
                    artificial: a.artificial,
                    addr: self.var_addr(a.location),
                    annots: &[],
                });
                FrameKind::Variable
            }
            DW_TAG_formal_parameter if parent == FrameKind::Subprogram => {
                s.fparams.push(FnParamDie {
                    off,
                    name: a.name,
                    ty: a.ty,
                    origin: a.origin,
                    loc: self.loc(a.location),
                    has_loc: a.location.is_some(),
                    has_const: a.has_const,
                });
                FrameKind::FnParam
            }
            DW_TAG_formal_parameter => {
                s.params.push(ParamDie {
                    name: a.name,
                    ty: a.ty,
                });
                FrameKind::Other
            }
            DW_TAG_unspecified_parameters if parent == FrameKind::Subprogram => {
                if let Some(f) = s.stack.last() {
                    if let Some(func) = self.acc.funcs.get_mut(f.index as usize) {
                        func.varargs = true;
                    }
                }
                FrameKind::Other
            }
            DW_TAG_unspecified_parameters => {
                if let Some(f) = s.stack.last() {
                    if let Some(TypeDie::Proto { varargs, .. }) =
                        self.acc.types.get_mut(f.index as usize)
                    {
                        *varargs = true;
                    }
                }
                FrameKind::Other
            }
            _ if tag.0 == DW_TAG_LLVM_ANNOTATION || tag.0 == DW_TAG_GNU_ANNOTATION => {
                self.annotation(parent, off, a, s);
                FrameKind::Other
            }
            _ => FrameKind::Other,
        })
    }

    /// A `btf_type_tag` under a pointer, or a `btf_decl_tag` under a type or member.
    fn annotation(&mut self, parent: FrameKind, off: u32, a: Attrs<'a>, s: &mut Scratch<'a>) {
        let Some(f) = s.stack.last().copied() else {
            return;
        };
        let kind = if a.name.is(b"btf_type_tag") {
            1
        } else if a.name.is(b"btf_decl_tag") {
            2
        } else {
            0
        };
        match (parent, kind) {
            (FrameKind::Pointer, 1) => {
                s.ptr_tags.push(idx32(self.acc.types.len()));
                self.push_type(
                    off,
                    TypeDie::Ref {
                        kind: RefKind::TypeTag,
                        name: a.const_str,
                        ty: DieRef::VOID,
                    },
                );
            }
            (FrameKind::Composite | FrameKind::Typedef, 2) => {
                self.acc.decl_tags.push(DeclTagDie {
                    target: f.index,
                    component_idx: -1,
                    value: a.const_str,
                });
            }
            (FrameKind::Member, 2) => s.member_tags.push(a.const_str),
            (FrameKind::Subprogram | FrameKind::Variable, 2) => s.annots.push(AnnotDie {
                value: a.const_str,
                component_idx: -1,
            }),
            (FrameKind::FnParam, 2) => s.annots.push(AnnotDie {
                value: a.const_str,
                component_idx: f.index as i32,
            }),
            _ => {}
        }
    }

    /// Finishes an open DIE: moves its children's data into the arena.
    pub(super) fn close(&mut self, f: Frame, s: &mut Scratch<'a>) -> Result<(), DieError> {
        let start = f.start as usize;
        match f.kind {
            FrameKind::Composite => {
                let last = idx32(self.acc.types.len()) - 1;
                if last > f.index {
                    self.acc.nests.push((f.index, last));
                }
                let list = self.acc.bump.alloc_slice_copy(&s.members[start..]);
                s.members.truncate(start);
                if let Some(TypeDie::Composite { members, .. }) =
                    self.acc.types.get_mut(f.index as usize)
                {
                    *members = list;
                }
            }
            FrameKind::Enum => {
                let list = self.acc.bump.alloc_slice_copy(&s.enumerators[start..]);
                s.enumerators.truncate(start);
                if let Some(TypeDie::Enum { values, .. }) = self.acc.types.get_mut(f.index as usize)
                {
                    *values = list;
                }
            }
            FrameKind::Array => {
                let list = self.acc.bump.alloc_slice_copy(&s.dims[start..]);
                s.dims.truncate(start);
                if let Some(TypeDie::Array { dims, .. }) = self.acc.types.get_mut(f.index as usize)
                {
                    *dims = list;
                }
            }
            FrameKind::Proto => {
                let list = self.acc.bump.alloc_slice_copy(&s.params[start..]);
                s.params.truncate(start);
                if let Some(TypeDie::Proto { params, .. }) =
                    self.acc.types.get_mut(f.index as usize)
                {
                    *params = list;
                }
            }
            FrameKind::Pointer => {
                // For `int __t1 __t2 *p` the pointer's annotation children come in
                // source order (t1, t2) and pahole chains them from the last:
                // pointer → t2 → t1 → pointee (each tag applies to what follows).
                let tags = &s.ptr_tags[f.tag_start as usize..];
                if let Some(&last) = tags.last() {
                    // pahole adds the tags to the unit as it reads them, then the
                    // pointer: the pointer comes after them, as a struct after
                    // its nested types.
                    self.acc.nests.push((f.index, last));
                    let last_off = self.acc.offsets[last as usize];
                    let pointee = match &mut self.acc.types[f.index as usize] {
                        TypeDie::Ref { ty, .. } => std::mem::replace(ty, DieRef(last_off)),
                        _ => DieRef::VOID,
                    };
                    for w in (0..tags.len()).rev() {
                        let next = match w.checked_sub(1) {
                            Some(p) => DieRef(self.acc.offsets[tags[p] as usize]),
                            None => pointee,
                        };
                        if let TypeDie::Ref { ty, .. } = &mut self.acc.types[tags[w] as usize] {
                            *ty = next;
                        }
                    }
                }
                s.ptr_tags.truncate(f.tag_start as usize);
            }
            FrameKind::Member => {
                // The member's index within its composite: its position among the
                // members collected since the composite opened.
                let comp = s
                    .stack
                    .iter()
                    .rev()
                    .find(|p| p.kind == FrameKind::Composite)
                    .copied();
                if let Some(c) = comp {
                    let n = start - c.start as usize;
                    let idx = i32::try_from(n).map_err(|_| too_large("member index", n as u64))?;
                    for &value in &s.member_tags[f.tag_start as usize..] {
                        self.acc.decl_tags.push(DeclTagDie {
                            target: c.index,
                            component_idx: idx,
                            value,
                        });
                    }
                }
                s.member_tags.truncate(f.tag_start as usize);
            }
            FrameKind::Subprogram => {
                let params = self.acc.bump.alloc_slice_copy(&s.fparams[start..]);
                let annots = self
                    .acc
                    .bump
                    .alloc_slice_copy(&s.annots[f.tag_start as usize..]);
                s.fparams.truncate(start);
                s.annots.truncate(f.tag_start as usize);
                if let Some(func) = self.acc.funcs.get_mut(f.index as usize) {
                    func.params = params;
                    func.annots = annots;
                }
            }
            FrameKind::Variable => {
                let annots = self
                    .acc
                    .bump
                    .alloc_slice_copy(&s.annots[f.tag_start as usize..]);
                s.annots.truncate(f.tag_start as usize);
                if let Some(v) = self.acc.vars.get_mut(f.index as usize) {
                    v.annots = annots;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// An attribute value too large for the field it goes into.
fn too_large(what: &'static str, value: u64) -> DieError {
    DwarfErrorKind::TooLarge { what, value }
}

/// Attribute `what` (0 if absent) as the u32 BTF keeps it in: larger is an error,
/// not a truncation (pahole would truncate it).
fn fits_u32(what: &'static str, v: Option<u64>) -> Result<u32, DieError> {
    let v = v.unwrap_or(0);
    u32::try_from(v).map_err(|_| too_large(what, v))
}
