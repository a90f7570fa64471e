//! Types as flat `u32` records laid out as in the raw BTF type section, one id space
//! for base and own types. Dedup compares and rewrites fields in place, as libbpf
//! does on its raw buffer: flat records keep that cheap and cache-friendly. [`Rec`]
//! names the fields of a record; the `*_POS` constants and `*_pos` functions give
//! the word index of a field, for the few places that rewrite one.

use crate::btf::write::{halves, info_word, record_words, size_or_type};
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

/// What a word of a record holds, for [`push_type_noted`].
#[derive(Clone, Copy)]
enum Word {
    Str,
    Ref,
    Other,
}

/// The three vectors [`push_type_noted`] appends to.
struct Noted<'v> {
    w: &'v mut Vec<u32>,
    strs: &'v mut Vec<u32>,
    refs: &'v mut Vec<u32>,
}

impl Noted<'_> {
    /// The position the next word takes. Records lie below 4 GiB of words, as a
    /// BTF's do (checked when a batch is added).
    #[inline]
    #[allow(clippy::cast_possible_truncation)]
    fn at(&self) -> u32 {
        self.w.len() as u32
    }

    /// A member's or parameter's words at once: one capacity check of the record's
    /// vector for them all, not one a word. On the corpus vmlinux 1.2% fewer
    /// instructions for the run (members 0.9%, parameters 0.2%); used for the
    /// enumerators, arrays and entries too it gave back more than that (the
    /// function is then inlined differently), so they keep [`Noted::put`].
    #[inline]
    fn put_all<const N: usize>(&mut self, words: [(u32, Word); N]) {
        let at = self.at();
        for (k, &(v, what)) in (0u32..).zip(&words) {
            match what {
                Word::Str if v != 0 => self.strs.push(at + k),
                Word::Ref if v != 0 => self.refs.push(at + k),
                _ => {}
            }
        }
        self.w.extend_from_slice(&words.map(|(v, _)| v));
    }

    #[inline]
    fn put(&mut self, v: u32, what: Word) {
        match what {
            Word::Str if v != 0 => self.strs.push(self.at()),
            Word::Ref if v != 0 => self.refs.push(self.at()),
            _ => {}
        }
        self.w.push(v);
    }
}

/// [`push_type`], noting as it goes the positions in `w` of the words that hold a
/// string other than the empty one (in `strs`) and an id other than void (in
/// `refs`), each in ascending order: the positions [`for_each_str_pos`] and
/// [`for_each_ref_pos`] give, without walking the record again (flattening with
/// those two walks after it was 9% of a run's instructions on the corpus vmlinux;
/// one pass takes the run to 0.985× of them).
#[inline]
pub fn push_type_noted(w: &mut Vec<u32>, strs: &mut Vec<u32>, refs: &mut Vec<u32>, t: &Type) {
    use crate::btf::TypeKind as T;
    w.reserve(t.record_len() / 4);
    let mut n = Noted { w, strs, refs };
    n.put(t.name.0, Word::Str);
    n.put(info_word(&t.kind), Word::Other);
    let third = match t.kind {
        T::Ptr(_)
        | T::Typedef(_)
        | T::Volatile(_)
        | T::Const(_)
        | T::Restrict(_)
        | T::Func { .. }
        | T::FuncProto { .. }
        | T::Var { .. }
        | T::DeclTag { .. }
        | T::TypeTag { .. } => Word::Ref,
        _ => Word::Other,
    };
    n.put(size_or_type(&t.kind), third);
    match &t.kind {
        T::Int {
            encoding,
            offset,
            bits,
            ..
        } => n.put(
            u32::from(*encoding) << 24 | u32::from(*offset) << 16 | u32::from(*bits),
            Word::Other,
        ),
        T::Var { linkage, .. } => n.put(*linkage, Word::Other),
        T::DeclTag { component_idx, .. } => n.put(*component_idx as u32, Word::Other),
        T::Array {
            elem_type,
            index_type,
            nelems,
        } => {
            n.put(elem_type.0, Word::Ref);
            n.put(index_type.0, Word::Ref);
            n.put(*nelems, Word::Other);
        }
        T::Struct(c) | T::Union(c) => {
            for m in &c.members {
                n.put_all([
                    (m.name.0, Word::Str),
                    (m.type_id.0, Word::Ref),
                    (m.offset, Word::Other),
                ]);
            }
        }
        T::Enum { values, .. } => {
            for v in values {
                n.put(v.name.0, Word::Str);
                n.put(v.value, Word::Other);
            }
        }
        T::Enum64 { values, .. } => {
            for v in values {
                let (lo, hi) = halves(v.value);
                n.put(v.name.0, Word::Str);
                n.put(lo, Word::Other);
                n.put(hi, Word::Other);
            }
        }
        T::FuncProto { params, .. } => {
            for p in params {
                n.put_all([(p.name.0, Word::Str), (p.type_id.0, Word::Ref)]);
            }
        }
        T::Datasec { entries, .. } => {
            for e in entries {
                n.put(e.type_id.0, Word::Ref);
                n.put(e.offset, Word::Other);
                n.put(e.size, Word::Other);
            }
        }
        _ => {}
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{
        Composite, Enum64Value, EnumValue, Member, Param, StrOffset, TypeId, TypeKind, VarSecInfo,
    };

    /// One type of every kind, with empty names and void ids beside real ones.
    fn every_kind() -> Vec<Type> {
        let (s, id) = (StrOffset, TypeId);
        let member = |n, t| Member {
            name: s(n),
            type_id: id(t),
            offset: n * 8,
        };
        let composite = Composite {
            size: 16,
            kflag: false,
            members: vec![member(5, 1), member(0, 2), member(7, 0)],
        };
        let kinds = vec![
            TypeKind::Int {
                size: 4,
                encoding: 1,
                offset: 2,
                bits: 32,
            },
            TypeKind::Ptr(id(0)),
            TypeKind::Ptr(id(3)),
            TypeKind::Array {
                elem_type: id(2),
                index_type: id(0),
                nelems: 9,
            },
            TypeKind::Struct(composite.clone()),
            TypeKind::Union(composite),
            TypeKind::Enum {
                size: 4,
                signed: true,
                values: vec![
                    EnumValue {
                        name: s(3),
                        value: 7,
                    },
                    EnumValue {
                        name: s(0),
                        value: 0,
                    },
                ],
            },
            TypeKind::Fwd { union: true },
            TypeKind::Typedef(id(4)),
            TypeKind::Volatile(id(4)),
            TypeKind::Const(id(0)),
            TypeKind::Restrict(id(4)),
            TypeKind::Func {
                proto: id(6),
                linkage: 1,
            },
            TypeKind::FuncProto {
                ret: id(0),
                params: Vec::new(),
            },
            TypeKind::FuncProto {
                ret: id(2),
                params: vec![
                    Param {
                        name: s(2),
                        type_id: id(1),
                    },
                    Param {
                        name: s(0),
                        type_id: id(0),
                    },
                ],
            },
            TypeKind::Var {
                type_id: id(1),
                linkage: 1,
            },
            TypeKind::Datasec {
                size: 8,
                entries: vec![VarSecInfo {
                    type_id: id(9),
                    offset: 0,
                    size: 8,
                }],
            },
            TypeKind::Float { size: 8 },
            TypeKind::DeclTag {
                type_id: id(4),
                component_idx: -1,
                kflag: false,
            },
            TypeKind::TypeTag {
                type_id: id(1),
                kflag: true,
            },
            TypeKind::Enum64 {
                size: 8,
                signed: false,
                values: vec![Enum64Value {
                    name: s(4),
                    value: 1 << 40 | 3,
                }],
            },
        ];
        let mut types = Vec::new();
        for (i, kind) in kinds.into_iter().enumerate() {
            // Named and unnamed, whatever the kind allows.
            let i = u32::try_from(i).unwrap();
            types.push(Type {
                name: s(0),
                kind: kind.clone(),
            });
            types.push(Type {
                name: s(100 + i),
                kind,
            });
        }
        types
    }

    #[test]
    fn noted_push_gives_the_words_and_positions_of_the_two_passes() {
        let (mut w, mut strs, mut refs) = (vec![42], Vec::new(), Vec::new());
        let (mut want_w, mut want_strs, mut want_refs) = (vec![42], Vec::new(), Vec::new());
        for t in every_kind() {
            push_type_noted(&mut w, &mut strs, &mut refs, &t);
            let start = want_w.len();
            push_type(&mut want_w, &t);
            let r = &want_w[start..];
            let at = |p: usize| u32::try_from(start + p).unwrap();
            for_each_str_pos(r[1], |p| {
                if r[p] != 0 {
                    want_strs.push(at(p));
                }
            });
            for_each_ref_pos(r[1], |p| {
                if r[p] != 0 {
                    want_refs.push(at(p));
                }
            });
        }
        assert_eq!(w, want_w);
        assert_eq!(strs, want_strs);
        assert_eq!(refs, want_refs);
        // Every kind has at least one of each noted, so a wrong pattern shows.
        assert!(
            strs.len() > 20 && refs.len() > 15,
            "{} {}",
            strs.len(),
            refs.len()
        );
    }
}
