//! Types as flat `u32` records laid out as in the raw BTF type section, one id space
//! for base and own types. Dedup compares and rewrites fields in place, as libbpf
//! does on its raw buffer: flat records keep that cheap and cache-friendly. [`Rec`]
//! names the fields of a record; the `*_POS` constants and `*_pos` functions give
//! the word index of a field, for the few places that rewrite one.

use crate::btf::write::record_words;
use crate::btf::{Kind, Type};

// The kind numbers, as `u32`s to match against an `info` word's kind field.
pub const K_INT: u32 = Kind::Int as u32;
pub const K_PTR: u32 = Kind::Ptr as u32;
pub const K_ARRAY: u32 = Kind::Array as u32;
pub const K_STRUCT: u32 = Kind::Struct as u32;
pub const K_UNION: u32 = Kind::Union as u32;
pub const K_ENUM: u32 = Kind::Enum as u32;
pub const K_FWD: u32 = Kind::Fwd as u32;
pub const K_TYPEDEF: u32 = Kind::Typedef as u32;
pub const K_VOLATILE: u32 = Kind::Volatile as u32;
pub const K_CONST: u32 = Kind::Const as u32;
pub const K_RESTRICT: u32 = Kind::Restrict as u32;
pub const K_FUNC: u32 = Kind::Func as u32;
pub const K_FUNC_PROTO: u32 = Kind::FuncProto as u32;
pub const K_VAR: u32 = Kind::Var as u32;
pub const K_DATASEC: u32 = Kind::Datasec as u32;
pub const K_FLOAT: u32 = Kind::Float as u32;
pub const K_DECL_TAG: u32 = Kind::DeclTag as u32;
pub const K_TYPE_TAG: u32 = Kind::TypeTag as u32;
pub const K_ENUM64: u32 = Kind::Enum64 as u32;

/// Word of the referenced type of PTR, TYPEDEF, the modifiers, FUNC, VAR and
/// DECL_TAG, and of a FUNC_PROTO's return type (the size of sized kinds).
pub const TYPE_POS: usize = 2;
/// Words of an ARRAY's element and index types.
pub const ARRAY_ELEM_POS: usize = 3;
pub const ARRAY_INDEX_POS: usize = 4;
/// Words before the kind-specific part of every record.
const HEAD: usize = 3;

/// Word of the type of a STRUCT/UNION's `i`-th member.
#[inline]
pub fn member_type_pos(i: usize) -> usize {
    HEAD + 3 * i + 1
}

/// Word of the type of a FUNC_PROTO's `i`-th parameter.
#[inline]
pub fn param_type_pos(i: usize) -> usize {
    HEAD + 2 * i + 1
}

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

/// A view of one flat record.
#[derive(Clone, Copy)]
pub struct Rec<'a>(&'a [u32]);

impl<'a> Rec<'a> {
    /// `words` must be one whole record (at least the three common words).
    #[inline]
    pub fn new(words: &'a [u32]) -> Rec<'a> {
        Rec(words)
    }

    #[inline]
    pub fn name(self) -> u32 {
        self.0[0]
    }

    #[inline]
    pub fn info(self) -> u32 {
        self.0[1]
    }

    #[inline]
    pub fn kind(self) -> u32 {
        kind_of(self.0[1])
    }

    #[inline]
    pub fn vlen(self) -> usize {
        vlen_of(self.0[1])
    }

    /// The kind flag (a FWD of a union, among others).
    #[inline]
    pub fn kflag(self) -> bool {
        self.0[1] >> 31 == 1
    }

    /// Size, or the referenced type (see [`TYPE_POS`]).
    #[inline]
    pub fn size_type(self) -> u32 {
        self.0[TYPE_POS]
    }

    /// The words after the common ones: INT's encoding, ARRAY's element, index and
    /// count, DECL_TAG's component, the members, enumerators or parameters.
    #[inline]
    pub fn tail(self) -> &'a [u32] {
        &self.0[HEAD..]
    }

    /// The whole record.
    #[inline]
    pub fn words(self) -> &'a [u32] {
        self.0
    }

    /// ARRAY's element type.
    #[inline]
    pub fn array_elem(self) -> u32 {
        self.0[ARRAY_ELEM_POS]
    }

    /// ARRAY's index type.
    #[inline]
    pub fn array_index(self) -> u32 {
        self.0[ARRAY_INDEX_POS]
    }

    /// ARRAY's element count.
    #[inline]
    pub fn array_nelems(self) -> u32 {
        self.0[ARRAY_INDEX_POS + 1]
    }

    /// The type of a STRUCT/UNION's `i`-th member.
    #[inline]
    pub fn member_type(self, i: usize) -> u32 {
        self.0[member_type_pos(i)]
    }

    /// The name and offset of a STRUCT/UNION's `i`-th member.
    #[inline]
    pub fn member_name_offset(self, i: usize) -> (u32, u32) {
        let m = &self.0[HEAD + 3 * i..HEAD + 3 * i + 3];
        (m[0], m[2])
    }

    /// The type of a FUNC_PROTO's `i`-th parameter.
    #[inline]
    pub fn param_type(self, i: usize) -> u32 {
        self.0[param_type_pos(i)]
    }

    /// The name of a FUNC_PROTO's `i`-th parameter.
    #[inline]
    pub fn param_name(self, i: usize) -> u32 {
        self.0[HEAD + 2 * i]
    }
}

/// Calls `f` with the index (relative to the record start) of every word of the
/// record `r` that holds a type id, in libbpf's field order.
#[inline]
pub fn for_each_ref_pos(info: u32, mut f: impl FnMut(usize)) {
    let vlen = vlen_of(info);
    match kind_of(info) {
        K_PTR | K_TYPEDEF | K_VOLATILE | K_CONST | K_RESTRICT | K_FUNC | K_VAR | K_DECL_TAG
        | K_TYPE_TAG => f(TYPE_POS),
        K_ARRAY => {
            f(ARRAY_ELEM_POS);
            f(ARRAY_INDEX_POS);
        }
        K_STRUCT | K_UNION => (0..vlen).for_each(|i| f(member_type_pos(i))),
        K_FUNC_PROTO => {
            f(TYPE_POS);
            (0..vlen).for_each(|i| f(param_type_pos(i)));
        }
        K_DATASEC => (0..vlen).for_each(|i| f(HEAD + 3 * i)),
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
        K_STRUCT | K_UNION | K_ENUM64 => (0..vlen).for_each(|i| f(HEAD + 3 * i)),
        K_ENUM | K_FUNC_PROTO => (0..vlen).for_each(|i| f(HEAD + 2 * i)),
        _ => {}
    }
}
