//! Type-layout queries over one unit's DIEs: sizes and alignments, each as the pahole
//! function it mirrors computes it (they differ on purpose: pahole sizes a bitfield's
//! storage, a parameter and a variable each its own way).

use crate::dwarf::types::{CuTypes, DieRef, RefKind, TypeDie};

/// The type DIE `r` refers to, through typedefs, cv-qualifiers and aliases.
pub(super) fn strip<'c, 'a>(cu: &'c CuTypes<'a>, mut r: DieRef) -> Option<&'c TypeDie<'a>> {
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
pub(super) fn is_struct(cu: &CuTypes<'_>, mut r: DieRef) -> bool {
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
pub(super) fn param_byte_size(cu: &CuTypes<'_>, r: DieRef, depth: u32) -> u64 {
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

/// Which of pahole's size queries [`size_of`] answers: they differ on base types
/// and enums.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Sizing {
    /// `tag__size` (variables, alignment): a base type's `DW_AT_bit_size` in
    /// bytes, an enum's size as it is.
    Tag,
    /// The storage unit of an old-style bitfield (`DW_AT_bit_offset`): a base
    /// type's `DW_AT_byte_size`, 4 for an enum without a size.
    Storage,
}

/// The size in bytes of type `r` (0 for void, incomplete arrays and function
/// types), as `how` measures it.
pub(super) fn size_of(cu: &CuTypes<'_>, r: DieRef, depth: u32, how: Sizing) -> u64 {
    let limit = if how == Sizing::Storage { 32 } else { 64 };
    if depth > limit {
        return 0;
    }
    let Some(i) = cu.index_of(r) else {
        return 0;
    };
    match cu.types[i] {
        TypeDie::Base { byte_size, .. } if how == Sizing::Storage => u64::from(byte_size),
        TypeDie::Base { bit_size, .. } => u64::from(bit_size).div_ceil(8),
        TypeDie::Enum { size: 0, .. } if how == Sizing::Storage => 4,
        TypeDie::Composite { size, .. } | TypeDie::Enum { size, .. } => u64::from(size),
        TypeDie::Ref {
            kind: RefKind::Pointer,
            ..
        } => u64::from(cu.address_size),
        TypeDie::Ref { ty, .. } => size_of(cu, ty, depth + 1, how),
        TypeDie::Array { ty, dims } => dims
            .iter()
            .fold(size_of(cu, ty, depth + 1, how), |n, &d| n.wrapping_mul(d)),
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
        _ => size_of(cu, r, depth + 1, Sizing::Tag).clamp(1, 16),
    }
}

/// An approximation of pahole's `class__infer_packed_attributes`: a member at an
/// offset its type's alignment does not divide, or a size the largest alignment
/// does not divide.
pub(super) fn is_packed(cu: &CuTypes<'_>, r: DieRef) -> bool {
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
