//! libbpf's type hashes (the candidate table's keys) and the shallow equality checks
//! that go with them, on flat records. A hash covers every field its check compares
//! except the referenced types the graph walk compares, so that two types the check
//! could accept always share a key (the order within a key is then libbpf's).
//!
//! The kinds hashed before the dedup (the prim and struct passes', and the base's)
//! key a name by its content ([`name_key`]), not its offset: equal names have equal
//! offsets once merged, so types the checks could accept still share a key, and a
//! batch can be hashed on a worker before its strings have the run's offsets. The
//! reference kinds, hashed in the ordered part once their references are canonical,
//! key names by offset. Each kind is hashed one way everywhere; candidates of other
//! kinds under a key never pass a check (it compares the kind).

use super::super::flat::*;
use crate::dedup::Compat;

/// The key of a name's bytes: 0 for the empty name.
#[inline]
pub fn name_key(s: &[u8]) -> u64 {
    if s.is_empty() {
        0
    } else {
        crate::hash::hash_str(s)
    }
}

#[inline]
fn hc(h: u64, v: impl Into<u64>) -> u64 {
    h.wrapping_mul(31).wrapping_add(v.into())
}

/// Hash of name, info and size/type (libbpf's `btf_hash_common`), the name by offset.
#[inline]
pub(super) fn hash_common(r: Rec<'_>) -> u64 {
    hash_common_named(r, u64::from(r.name()))
}

/// [`hash_common`] with the name's key `name`.
#[inline]
fn hash_common_named(r: Rec<'_>, name: u64) -> u64 {
    hc(hc(hc(0, name), r.info()), r.size_type())
}

#[inline]
pub(super) fn equal_common(a: Rec<'_>, b: Rec<'_>) -> bool {
    // Word by word: a slice comparison calls `memcmp`, which costs more here.
    a.name() == b.name() && a.info() == b.info() && a.size_type() == b.size_type()
}

/// INT and DECL_TAG: the common words and the fourth (encoding, component index),
/// the name keyed by `name`.
#[inline]
pub(super) fn hash_int_tag(r: Rec<'_>, name: u64) -> u64 {
    hc(hash_common_named(r, name), r.tail()[0])
}

#[inline]
pub(super) fn equal_int_tag(a: Rec<'_>, b: Rec<'_>) -> bool {
    equal_common(a, b) && a.tail()[0] == b.tail()[0]
}

/// Name only: an enum FWD must meet the full ENUM or ENUM64 of any size.
#[inline]
pub(super) fn hash_enum(name: u64) -> u64 {
    hc(0, name)
}

#[inline]
pub(super) fn is_any_enum(r: Rec<'_>) -> bool {
    matches!(r.kind(), K_ENUM | K_ENUM64)
}

#[inline]
pub(super) fn is_enum_fwd(r: Rec<'_>) -> bool {
    is_any_enum(r) && r.vlen() == 0
}

/// Same name, info, size and enumerators.
#[inline]
pub(super) fn equal_enum(a: Rec<'_>, b: Rec<'_>) -> bool {
    equal_common(a, b) && a.tail() == b.tail()
}

/// Equal enums, or an enum FWD and any enum of its name.
#[inline]
pub(super) fn compat_enum(a: Rec<'_>, b: Rec<'_>) -> bool {
    if !is_enum_fwd(a) && !is_enum_fwd(b) {
        return equal_enum(a, b);
    }
    a.name() == b.name() && is_any_enum(a) && is_any_enum(b)
}

/// Name, info, size, and member names and offsets (not member types).
pub(super) fn hash_struct(r: Rec<'_>, keys: &impl Fn(u32) -> u64) -> u64 {
    (0..r.vlen()).fold(hash_common_named(r, keys(r.name())), |h, i| {
        let (name, offset) = r.member_name_offset(i);
        hc(hc(h, keys(name)), offset)
    })
}

/// Same name, info, size, and member names and offsets (not member types).
#[inline]
pub(super) fn shallow_equal_struct(a: Rec<'_>, b: Rec<'_>) -> bool {
    // Indexed (not zipped iterators): this is the dedup's hottest comparison.
    equal_common(a, b) && (0..a.vlen()).all(|i| a.member_name_offset(i) == b.member_name_offset(i))
}

/// Upstream libbpf's typedef hash (it dedups typedefs as it does structs).
#[inline]
pub(super) fn hash_typedef(r: Rec<'_>, name: u64) -> u64 {
    hc(hc(0, name), r.info())
}

#[inline]
pub(super) fn equal_typedef(a: Rec<'_>, b: Rec<'_>) -> bool {
    a.name() == b.name() && a.info() == b.info()
}

pub(super) fn hash_array(r: Rec<'_>) -> u64 {
    hc(
        hc(hc(hash_common(r), r.array_elem()), r.array_index()),
        r.array_nelems(),
    )
}

/// Same shape (the common words and the element count), not the element types.
#[inline]
pub(super) fn compat_array(a: Rec<'_>, b: Rec<'_>) -> bool {
    equal_common(a, b) && a.array_nelems() == b.array_nelems()
}

#[inline]
pub(super) fn equal_array(a: Rec<'_>, b: Rec<'_>) -> bool {
    compat_array(a, b) && a.array_elem() == b.array_elem() && a.array_index() == b.array_index()
}

pub(super) fn hash_fnproto(r: Rec<'_>) -> u64 {
    (0..r.vlen()).fold(hash_common(r), |h, i| {
        hc(hc(h, r.param_name(i)), r.param_type(i))
    })
}

/// Same name, info and parameter names (not the return or parameter types).
#[inline]
pub(super) fn compat_fnproto(a: Rec<'_>, b: Rec<'_>) -> bool {
    a.name() == b.name()
        && a.info() == b.info()
        && (0..a.vlen()).all(|i| a.param_name(i) == b.param_name(i))
}

/// The kind the FWD `r` declares: STRUCT, or UNION with the kflag.
#[inline]
pub(super) fn fwd_kind(r: Rec<'_>) -> u32 {
    crate::btf::Kind::fwd_declares(r.kflag()) as u32
}

/// The hash of the prim pass (INT, ENUM, ENUM64, FWD, FLOAT), if `r` is one.
#[inline]
pub(super) fn prim_hash(r: Rec<'_>, keys: &impl Fn(u32) -> u64) -> Option<u64> {
    Some(match r.kind() {
        K_INT => hash_int_tag(r, keys(r.name())),
        K_ENUM | K_ENUM64 => hash_enum(keys(r.name())),
        K_FWD | K_FLOAT => hash_common_named(r, keys(r.name())),
        _ => return None,
    })
}

/// The hash of the struct pass (STRUCT, UNION, and upstream's TYPEDEF), if `r` is
/// one of those.
#[inline]
pub(super) fn struct_hash(r: Rec<'_>, compat: Compat, keys: &impl Fn(u32) -> u64) -> Option<u64> {
    match r.kind() {
        K_STRUCT | K_UNION => Some(hash_struct(r, keys)),
        K_TYPEDEF if compat == Compat::Upstream => Some(hash_typedef(r, keys(r.name()))),
        _ => None,
    }
}

/// The hash of the reference pass, once `r`'s references are canonical. Always
/// inlined (2.6 million calls on the corpus vmlinux: 0.24% of the instructions).
#[inline(always)]
pub(super) fn ref_hash(r: Rec<'_>) -> u64 {
    match r.kind() {
        K_DECL_TAG => hash_int_tag(r, u64::from(r.name())),
        K_ARRAY => hash_array(r),
        K_FUNC_PROTO => hash_fnproto(r),
        _ => hash_common(r),
    }
}

/// The hash libbpf gives a base type (`btf_dedup_prep`), which the fixed types are
/// indexed by; None for VAR and DATASEC, which are never merged. Each kind is
/// hashed as its pass hashes it: the prim and struct kinds' names by `keys`.
pub(super) fn prep_hash(r: Rec<'_>, compat: Compat, keys: &impl Fn(u32) -> u64) -> Option<u64> {
    prim_hash(r, keys)
        .or_else(|| struct_hash(r, compat, keys))
        .or_else(|| ref_prep_hash(r))
}

/// [`prep_hash`] of a reference kind (None for the rest).
pub(super) fn ref_prep_hash(r: Rec<'_>) -> Option<u64> {
    match r.kind() {
        K_VAR | K_DATASEC => None,
        K_CONST | K_VOLATILE | K_RESTRICT | K_PTR | K_TYPEDEF | K_FUNC | K_TYPE_TAG
        | K_DECL_TAG | K_ARRAY | K_FUNC_PROTO => Some(ref_hash(r)),
        _ => None,
    }
}
