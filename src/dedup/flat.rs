//! Types as flat `u32` records laid out as in the raw BTF type section, one id space
//! for base and own types. Dedup compares and rewrites fields in place, as libbpf
//! does on its raw buffer: flat records keep that cheap and cache-friendly.

use crate::btf::write::record_words;
use crate::btf::Type;

pub const K_INT: u32 = 1;
pub const K_PTR: u32 = 2;
pub const K_ARRAY: u32 = 3;
pub const K_STRUCT: u32 = 4;
pub const K_UNION: u32 = 5;
pub const K_ENUM: u32 = 6;
pub const K_FWD: u32 = 7;
pub const K_TYPEDEF: u32 = 8;
pub const K_VOLATILE: u32 = 9;
pub const K_CONST: u32 = 10;
pub const K_RESTRICT: u32 = 11;
pub const K_FUNC: u32 = 12;
pub const K_FUNC_PROTO: u32 = 13;
pub const K_VAR: u32 = 14;
pub const K_DATASEC: u32 = 15;
pub const K_FLOAT: u32 = 16;
pub const K_DECL_TAG: u32 = 17;
pub const K_TYPE_TAG: u32 = 18;
pub const K_ENUM64: u32 = 19;

/// Appends the record of `t` to `w`.
#[inline]
pub fn push_type(w: &mut Vec<u32>, t: &Type) {
    record_words(t, |v| w.push(v));
}

/// The kind in an `info` word.
#[inline]
pub fn kind_of(info: u32) -> u32 {
    (info >> 24) & 0x1f
}

/// The vlen in an `info` word.
#[inline]
pub fn vlen_of(info: u32) -> usize {
    (info & 0xffff) as usize
}

/// Calls `f` with the index (relative to the record start) of every word of the
/// record `r` that holds a type id, in libbpf's field order.
#[inline]
pub fn for_each_ref_pos(info: u32, mut f: impl FnMut(usize)) {
    let vlen = vlen_of(info);
    match kind_of(info) {
        K_PTR | K_TYPEDEF | K_VOLATILE | K_CONST | K_RESTRICT | K_FUNC | K_VAR | K_DECL_TAG
        | K_TYPE_TAG => f(2),
        K_ARRAY => {
            f(3);
            f(4);
        }
        K_STRUCT | K_UNION => (0..vlen).for_each(|i| f(3 + 3 * i + 1)),
        K_FUNC_PROTO => {
            f(2);
            (0..vlen).for_each(|i| f(3 + 2 * i + 1));
        }
        K_DATASEC => (0..vlen).for_each(|i| f(3 + 3 * i)),
        _ => {}
    }
}

/// Calls `f` with the index of every word of a record with `info` word `info` that holds a string
/// offset: the name first, then member, enumerator and parameter names.
#[inline]
pub fn for_each_str_pos(info: u32, mut f: impl FnMut(usize)) {
    f(0);
    let vlen = vlen_of(info);
    match kind_of(info) {
        K_STRUCT | K_UNION | K_ENUM64 => (0..vlen).for_each(|i| f(3 + 3 * i)),
        K_ENUM | K_FUNC_PROTO => (0..vlen).for_each(|i| f(3 + 2 * i)),
        _ => {}
    }
}
