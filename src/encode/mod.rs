//! Converting one unit's type DIEs to BTF types, as pahole v1.31 converts them.
//!
//! The encoder consumes units strictly in unit order: [`encode_cu`] appends a unit's
//! types to the one growing [`Btf`] in [`EncoderState`]. It reads the unit's
//! [`CuTypes`] only while it runs; everything that outlives the unit (the BTF, the
//! string index, the array index type) is owned by the state.

mod features;
pub mod funcs;
mod skips;
pub mod strings;
mod true_sig;
mod vars;

pub use features::{supported_list, FeatureArgs, Features, UnsupportedFeature};
pub use funcs::FuncEncoder;
pub use skips::{FuncSkip, SkipReason};

use crate::btf::{
    Btf, Composite, Enum64Value, EnumValue, Member, Param, StrOffset, Type, TypeId, TypeKind,
};
use crate::dwarf::types::{CuTypes, DieRef, Name, RefKind, TypeDie};
use gimli::constants::{
    DW_ATE_boolean, DW_ATE_complex_float, DW_ATE_float, DW_ATE_imaginary_float, DW_ATE_signed,
    DW_ATE_signed_char,
};
use std::sync::Arc;
use strings::StrIndex;

/// Everything the encoder keeps from one unit to the next.
pub struct EncoderState {
    btf: Btf,
    strings: StrIndex,
    features: Features,
    /// The INT used as the index type of every array, once a unit has provided one
    /// (pahole keeps the first `int` it finds, or adds one after the first unit with
    /// arrays but no `int`).
    index_type: Option<TypeId>,
    /// Per-unit scratch: the BTF id of each type DIE (reused between units).
    ids: Vec<u32>,
    little_endian: bool,
    /// The units are parts of pahole's one merged unit (an LTO build, see
    /// `dwarf::lto`): what pahole adds after that unit's types waits for the last
    /// part (see [`EncoderState::set_merged`]).
    merged: bool,
    /// With `merged`, the decl tags of the types encoded so far, not yet taken by
    /// [`EncoderState::take_type_tags`]: (value, tagged type, component index).
    type_tags: Vec<(Box<[u8]>, TypeId, i32)>,
}

/// Marks a DIE that is not encoded itself (its references follow its target).
const ALIAS: u32 = u32::MAX;

impl EncoderState {
    /// A new encoder producing BTF over `base` (split BTF for modules).
    pub fn new(base: Option<Arc<Btf>>, features: Features, little_endian: bool) -> EncoderState {
        // pahole adds the kind layout section to base BTF only: split BTF shares its
        // base's.
        let layout = (features.layout && base.is_none()).then(crate::btf::layout::libbpf_table);
        let mut btf = Btf::new(base);
        btf.set_layout(layout);
        // libbpf ≥ 1.8 (pahole 1.31's) writes a 32-byte header: the classic 24 bytes
        // and two zero `layout` words. Dedup keeps the input's header length.
        btf.set_header_extra(vec![0; 8]);
        btf.set_endian(if little_endian {
            crate::btf::Endian::Little
        } else {
            crate::btf::Endian::Big
        });
        EncoderState {
            strings: StrIndex::with_base_of(&btf),
            btf,
            features,
            index_type: None,
            ids: Vec::new(),
            little_endian,
            merged: false,
            type_tags: Vec::new(),
        }
    }

    /// Encodes the units as the parts of pahole's one merged unit (an LTO build):
    /// every part's types come first, then every decl tag of a type, then the
    /// functions' and variables' records (see `FuncEncoder`), as pahole adds them
    /// to its merged unit. The decl tags wait in the state until taken
    /// ([`EncoderState::take_type_tags`]).
    pub fn set_merged(&mut self) {
        self.merged = true;
    }

    /// Whether the units are parts of one merged unit.
    pub fn merged(&self) -> bool {
        self.merged
    }

    /// The decl tags of types deferred since the last call (with
    /// [`EncoderState::set_merged`]), in pahole's order.
    pub fn take_type_tags(&mut self) -> Vec<(Box<[u8]>, TypeId, i32)> {
        std::mem::take(&mut self.type_tags)
    }

    /// The BTF built so far.
    pub fn btf(&self) -> &Btf {
        &self.btf
    }

    /// The features in effect.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// The BTF id that reference `r` of unit `cu` was encoded as. Valid right after
    /// [`encode_cu`] of that same unit (and until the next unit is encoded): later
    /// steps of the unit (functions, variables) use it to refer to its types.
    pub fn type_id(&self, cu: &CuTypes<'_>, r: DieRef) -> TypeId {
        if self.ids.len() != cu.types.len() {
            return TypeId::VOID;
        }
        Unit { cu, ids: &self.ids }.id(r)
    }

    /// Mutable access to the BTF being built, to append a unit's other records
    /// (functions, variables) after its types.
    pub fn btf_mut(&mut self) -> &mut Btf {
        &mut self.btf
    }

    /// Interns a name into the BTF's string section.
    pub fn intern(&mut self, name: Name<'_>) -> StrOffset {
        self.str(name)
    }

    /// Interns an owned copy of a name (one kept for later, not the input's
    /// bytes): see [`strings::StrIndex::intern_owned`].
    pub fn intern_owned(&mut self, name: &[u8]) -> StrOffset {
        self.strings.intern_owned(&mut self.btf, name)
    }

    /// Ends encoding and returns the (not yet deduplicated) BTF.
    pub fn finish(self) -> Btf {
        self.btf
    }

    /// Hands over the types encoded since the last call and empties the BTF of types,
    /// keeping its strings and the string index: with units deduplicated one by one
    /// (`dedup::Incremental::add_encoded`), the BTF then never holds more than one unit.
    /// Ids restart after the base. The array index type is the one type id kept from
    /// one unit to the next, so a copy of its INT becomes the first type of the next
    /// batch and the index type points at it; the copy equals a type already handed
    /// over, so dedup merges it away. Any other id kept across units must be carried
    /// over here the same way.
    pub fn take_types(&mut self) -> Vec<Type> {
        let first = self.btf.first_id().0;
        let types = std::mem::take(self.btf.types_mut());
        if let Some(id) = self.index_type {
            if id.0 >= first {
                let int = types[(id.0 - first) as usize].clone();
                self.index_type = Some(self.btf.push_type(int));
            }
        }
        types
    }

    /// Replaces every type of the BTF with `types` (numbered from the first id on),
    /// keeping the strings: after an incremental dedup, the kept types, so that what
    /// is added after the last unit (functions, DATASECs) refers to them. The array
    /// index type is forgotten: nothing added after the units has arrays.
    pub fn replace_types(&mut self, types: Vec<Type>) {
        *self.btf.types_mut() = types;
        self.index_type = None;
    }

    fn str(&mut self, s: Name<'_>) -> StrOffset {
        self.strings.intern(&mut self.btf, s)
    }

    fn push(&mut self, name: Name<'_>, kind: TypeKind) -> TypeId {
        let name = self.str(name);
        self.btf.push_type(Type { name, kind })
    }
}

/// An error encoding a unit: what pahole would also refuse.
#[derive(Debug)]
pub struct EncodeError(pub String);

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Appends the BTF types of unit `cu` to `st`, in DIE order, then its decl tags.
pub fn encode_cu(cu: &CuTypes<'_>, st: &mut EncoderState) -> Result<(), EncodeError> {
    let first = st.btf.type_count() + 1;
    assign_ids(cu, st, first);
    let ids = std::mem::take(&mut st.ids);
    let enc = Unit { cu, ids: &ids };

    let mut index_found = st.index_type.is_some();
    if !index_found {
        if let Some(i) = cu
            .types
            .iter()
            .position(|t| matches!(t, TypeDie::Base { name, .. } if name.is(b"int")))
        {
            st.index_type = Some(TypeId(ids[i]));
            index_found = true;
        }
    }
    let mut need_index = false;
    // Where pahole puts its own `int` when the unit has none: right after its types.
    let fallback_index = TypeId(first + ids.iter().filter(|&&i| i != ALIAS).count() as u32);
    let index_type = st.index_type.unwrap_or(fallback_index);

    for i in cu.emission_order() {
        let t = &cu.types[i];
        if ids[i] == ALIAS {
            continue;
        }
        let (name, kind): (Name<'_>, TypeKind) = match *t {
            TypeDie::Base {
                name,
                byte_size,
                encoding,
                ..
            } => base_type(st, name, byte_size, encoding)?,
            TypeDie::Ref { kind, name, ty } => {
                let to = enc.id(ty);
                match kind {
                    RefKind::Pointer => (Name::EMPTY, TypeKind::Ptr(to)),
                    RefKind::Const => (Name::EMPTY, TypeKind::Const(to)),
                    RefKind::Volatile => (Name::EMPTY, TypeKind::Volatile(to)),
                    RefKind::Restrict => (Name::EMPTY, TypeKind::Restrict(to)),
                    RefKind::Typedef => (name, TypeKind::Typedef(to)),
                    RefKind::TypeTag => (
                        name,
                        TypeKind::TypeTag {
                            type_id: to,
                            kflag: false,
                        },
                    ),
                    RefKind::Alias => unreachable!("aliases have no id"),
                }
            }
            TypeDie::Composite {
                is_union,
                declaration,
                name,
                size,
                members,
            } => {
                if declaration {
                    (name, TypeKind::Fwd { union: is_union })
                } else {
                    let mut kflag = false;
                    let mut out = Vec::with_capacity(members.len());
                    // pahole adds the type's name before its members' names: the
                    // string section keeps that order (see `dedup_output`).
                    st.str(name);
                    st.strings.warm(members.iter().map(|m| m.name));
                    for m in members {
                        let mut bit_offset = m.bit_offset;
                        if let (Some(old), true) = (m.old_bit_offset, m.bit_size != 0) {
                            let storage = if m.byte_size != 0 {
                                m.byte_size as u64
                            } else {
                                enc.size_of(m.ty, 0)
                            };
                            let within = if st.little_endian {
                                (storage * 8) as i64 - old - m.bit_size as i64
                            } else {
                                old
                            };
                            bit_offset = bit_offset.wrapping_add(within as u64);
                        }
                        let bit_offset = bit_offset as u32;
                        if m.bit_size != 0 || !bit_offset.is_multiple_of(8) {
                            // libbpf's btf__add_field refuses what the offset word
                            // cannot hold, and so pahole fails on it.
                            if m.bit_size == 0 || m.bit_size > 255 || bit_offset > 0xff_ffff {
                                return Err(EncodeError(format!(
                                    "member '{}' of '{}': bitfield of {} bits at bit {} cannot be encoded",
                                    String::from_utf8_lossy(m.name.bytes()),
                                    String::from_utf8_lossy(name.bytes()),
                                    m.bit_size,
                                    bit_offset
                                )));
                            }
                            kflag = true;
                        }
                        let name = st.str(m.name);
                        out.push(Member {
                            name,
                            type_id: enc.id(m.ty),
                            offset: bit_offset | m.bit_size << 24,
                        });
                    }
                    let c = Composite {
                        size,
                        kflag,
                        members: out,
                    };
                    (
                        name,
                        if is_union {
                            TypeKind::Union(c)
                        } else {
                            TypeKind::Struct(c)
                        },
                    )
                }
            }
            TypeDie::Enum {
                name,
                size,
                ty,
                values,
            } => {
                let size = if size == 0 { 4 } else { size };
                st.str(name);
                st.strings.warm(values.iter().map(|v| v.name));
                if size <= 4 || !st.features.enum64 {
                    let mut signed = false;
                    let mut vals = Vec::with_capacity(values.len());
                    for v in values {
                        let value = if st.features.enum64 {
                            v.value
                        } else {
                            v.value as u32 as i64
                        };
                        if value < i32::MIN as i64 || value > u32::MAX as i64 {
                            return Err(EncodeError(format!(
                                "enumerator {} value {value} does not fit in 32 bits",
                                String::from_utf8_lossy(v.name.bytes())
                            )));
                        }
                        signed |= value < 0;
                        vals.push(EnumValue {
                            name: st.str(v.name),
                            value: value as u32,
                        });
                    }
                    (
                        name,
                        TypeKind::Enum {
                            size,
                            signed,
                            values: vals,
                        },
                    )
                } else {
                    let signed = enc.is_signed_base(ty);
                    let vals = values
                        .iter()
                        .map(|v| Enum64Value {
                            name: st.str(v.name),
                            value: v.value as u64,
                        })
                        .collect();
                    (
                        name,
                        TypeKind::Enum64 {
                            size,
                            signed,
                            values: vals,
                        },
                    )
                }
            }
            TypeDie::Array { ty, dims } => {
                need_index = true;
                let nelems = dims.iter().fold(1u32, |n, &d| n.wrapping_mul(d as u32));
                (
                    Name::EMPTY,
                    TypeKind::Array {
                        elem_type: enc.id(ty),
                        index_type,
                        nelems,
                    },
                )
            }
            TypeDie::Proto {
                ret,
                params,
                varargs,
            } => {
                let mut ps: Vec<Param> = params
                    .iter()
                    .map(|p| Param {
                        name: st.str(p.name),
                        type_id: enc.id(p.ty),
                    })
                    .collect();
                if varargs {
                    ps.push(Param {
                        name: StrOffset::EMPTY,
                        type_id: TypeId::VOID,
                    });
                }
                (
                    Name::EMPTY,
                    TypeKind::FuncProto {
                        ret: enc.id(ret),
                        params: ps,
                    },
                )
            }
        };
        if kind.vlen() > 0xffff {
            return Err(EncodeError(format!(
                "type '{}' has {} members/values/parameters, more than BTF's 65535",
                String::from_utf8_lossy(name.bytes()),
                kind.vlen()
            )));
        }
        let id = st.push(name, kind);
        debug_assert_eq!(id.0, ids[i]);
    }

    if need_index && !index_found {
        if st.merged {
            // pahole's merged unit takes the first `int` of any part, or adds one
            // after every part's types: not known until the last part.
            return Err(EncodeError(
                "LTO build: arrays come before the first 'int' type, whose place in \
                 pahole's merged unit is not known yet: not supported"
                    .into(),
            ));
        }
        let id = st.push(
            Name::new(b"int"),
            TypeKind::Int {
                size: 4,
                encoding: crate::btf::INT_SIGNED,
                offset: 0,
                bits: 32,
            },
        );
        st.index_type = Some(id);
    }

    if st.features.decl_tag {
        for d in cu.decl_tags {
            let target = ids[d.target as usize];
            if target == ALIAS {
                continue;
            }
            if st.merged {
                st.type_tags
                    .push((d.value.bytes().into(), TypeId(target), d.component_idx));
                continue;
            }
            st.push(
                d.value,
                TypeKind::DeclTag {
                    type_id: TypeId(target),
                    component_idx: d.component_idx,
                    kflag: false,
                },
            );
        }
    }
    st.ids = ids;
    Ok(())
}

/// An INT or FLOAT for a base type, as pahole's `btf_encoder__add_base_type`: the
/// signedness, boolean and float facts come from `DW_AT_encoding` (so plain `char`
/// is SIGNED where the compiler says `DW_ATE_signed_char`, as in kernels built
/// without `-funsigned-char`), the size from `DW_AT_byte_size`.
fn base_type<'n>(
    st: &EncoderState,
    name: Name<'n>,
    byte_size: u32,
    encoding: u8,
) -> Result<(Name<'n>, TypeKind), EncodeError> {
    let mut enc = 0;
    if encoding == DW_ATE_signed.0 || encoding == DW_ATE_signed_char.0 {
        enc = crate::btf::INT_SIGNED;
    } else if encoding == DW_ATE_boolean.0 {
        enc = crate::btf::INT_BOOL;
    } else if st.features.float && encoding == DW_ATE_float.0 {
        return Ok((name, TypeKind::Float { size: byte_size }));
    } else if st.features.float
        && (encoding == DW_ATE_complex_float.0 || encoding == DW_ATE_imaginary_float.0)
    {
        return Err(EncodeError(format!(
            "base type '{}': complex and imaginary floats have no BTF encoding (pahole refuses them too)",
            String::from_utf8_lossy(name.bytes())
        )));
    }
    let mut size = byte_size;
    let mut name = name;
    if size == 0 || !size.is_power_of_two() || size > 16 {
        name = Name::new(b"__SANITIZED_FAKE_INT__");
        size = 4;
    }
    Ok((
        name,
        TypeKind::Int {
            size,
            encoding: enc,
            offset: 0,
            bits: (size * 8) as u8,
        },
    ))
}

/// Assigns the BTF id of every type DIE of the unit (`ALIAS` for those not encoded).
fn assign_ids(cu: &CuTypes<'_>, st: &mut EncoderState, first: u32) {
    let ids = &mut st.ids;
    ids.clear();
    ids.resize(cu.types.len(), ALIAS);
    let mut next = first;
    for i in cu.emission_order() {
        let t = &cu.types[i];
        let alias = match t {
            TypeDie::Ref {
                kind: RefKind::Alias,
                ..
            } => true,
            TypeDie::Ref {
                kind: RefKind::TypeTag,
                ..
            } => !st.features.type_tag,
            _ => false,
        };
        if !alias {
            ids[i] = next;
            next += 1;
        }
    }
}

/// A unit being encoded, with the ids of its DIEs.
struct Unit<'c, 'a> {
    cu: &'c CuTypes<'a>,
    ids: &'c [u32],
}

impl Unit<'_, '_> {
    /// The BTF id a reference resolves to: void for none, for non-type DIEs and for
    /// alias chains ending in void.
    fn id(&self, r: DieRef) -> TypeId {
        let mut r = r;
        for _ in 0..64 {
            let Some(i) = self.cu.index_of(r) else {
                return TypeId::VOID;
            };
            if self.ids[i] != ALIAS {
                return TypeId(self.ids[i]);
            }
            match self.cu.types[i] {
                TypeDie::Ref { ty, .. } => r = ty,
                _ => return TypeId::VOID,
            }
        }
        TypeId::VOID
    }

    /// Whether `r` is a signed base type (pahole's `is_signed_enum` test).
    fn is_signed_base(&self, r: DieRef) -> bool {
        match self.cu.index_of(r).map(|i| &self.cu.types[i]) {
            Some(TypeDie::Base { encoding, .. }) => {
                *encoding == DW_ATE_signed.0 || *encoding == DW_ATE_signed_char.0
            }
            _ => false,
        }
    }

    /// Size in bytes of the type `r` refers to (for old-style bitfield offsets).
    fn size_of(&self, r: DieRef, depth: u32) -> u64 {
        if depth > 32 {
            return 0;
        }
        let Some(i) = self.cu.index_of(r) else {
            return 0;
        };
        match self.cu.types[i] {
            TypeDie::Base { byte_size, .. } => byte_size as u64,
            TypeDie::Composite { size, .. } => size as u64,
            TypeDie::Enum { size, .. } => {
                if size == 0 {
                    4
                } else {
                    size as u64
                }
            }
            TypeDie::Ref {
                kind: RefKind::Pointer,
                ..
            } => self.cu.address_size as u64,
            TypeDie::Ref { ty, .. } => self.size_of(ty, depth + 1),
            TypeDie::Array { ty, dims } => dims
                .iter()
                .fold(self.size_of(ty, depth + 1), |n, &d| n.wrapping_mul(d)),
            TypeDie::Proto { .. } => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dwarf::types::{MemberDie, TypeDie};

    /// A hand-built unit: `typedef struct s { int a; } s_t;` plus an atomic alias
    /// and a pointer to it, an enum with a negative value and a 2×3 array.
    #[test]
    fn encodes_a_small_unit() {
        let members = [MemberDie {
            name: Name::new(b"a"),
            ty: DieRef(10),
            bit_offset: 0,
            bit_size: 0,
            old_bit_offset: None,
            byte_size: 0,
        }];
        let values = [crate::dwarf::types::EnumeratorDie {
            name: Name::new(b"NEG"),
            value: -1,
        }];
        let dims = [2u64, 3];
        let types = [
            TypeDie::Base {
                name: Name::new(b"int"),
                byte_size: 4,
                bit_size: 32,
                encoding: DW_ATE_signed.0,
            },
            TypeDie::Composite {
                is_union: false,
                declaration: false,
                name: Name::new(b"s"),
                size: 4,
                members: &members,
            },
            TypeDie::Ref {
                kind: RefKind::Typedef,
                name: Name::new(b"s_t"),
                ty: DieRef(20),
            },
            TypeDie::Ref {
                kind: RefKind::Alias,
                name: Name::EMPTY,
                ty: DieRef(10),
            },
            TypeDie::Ref {
                kind: RefKind::Pointer,
                name: Name::EMPTY,
                ty: DieRef(40),
            },
            TypeDie::Enum {
                name: Name::new(b"e"),
                size: 4,
                ty: DieRef(10),
                values: &values,
            },
            TypeDie::Array {
                ty: DieRef(10),
                dims: &dims,
            },
        ];
        let cu = CuTypes {
            offsets: &[10, 20, 30, 40, 50, 60, 70],
            types: &types,
            decl_tags: &[],
            language: 0x1d,
            address_size: 8,
            ..CuTypes::empty(0, 8)
        };
        let mut st = EncoderState::new(None, Features::from_list("default"), true);
        encode_cu(&cu, &mut st).unwrap();
        assert_eq!(
            st.type_id(&cu, DieRef(40)),
            TypeId(1),
            "atomic follows to int"
        );
        assert_eq!(st.type_id(&cu, DieRef(999)), TypeId::VOID);
        let btf = st.finish();
        let kinds: Vec<_> = btf.types().iter().map(|t| t.kind.clone()).collect();
        assert_eq!(kinds.len(), 6, "{kinds:?}");
        assert_eq!(kinds[3], TypeKind::Ptr(TypeId(1)));
        assert!(
            matches!(&kinds[4], TypeKind::Enum { signed: true, values, .. } if values[0].value == u32::MAX)
        );
        assert_eq!(
            kinds[5],
            TypeKind::Array {
                elem_type: TypeId(1),
                index_type: TypeId(1),
                nelems: 6
            }
        );
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;
    use crate::dwarf::types::MemberDie;

    fn one_member(bit_offset: u64, bit_size: u32) -> Result<(), EncodeError> {
        let members = [MemberDie {
            name: Name::new(b"m"),
            ty: DieRef::VOID,
            bit_offset,
            bit_size,
            old_bit_offset: None,
            byte_size: 0,
        }];
        let types = [TypeDie::Composite {
            is_union: false,
            declaration: false,
            name: Name::new(b"s"),
            size: 64,
            members: &members,
        }];
        let cu = CuTypes {
            offsets: &[10],
            types: &types,
            decl_tags: &[],
            language: 0,
            address_size: 8,
            ..CuTypes::empty(0, 8)
        };
        let mut st = EncoderState::new(None, Features::default(), true);
        encode_cu(&cu, &mut st)
    }

    #[test]
    fn bitfields_beyond_the_offset_word_are_refused() {
        assert!(one_member(8, 3).is_ok());
        assert!(one_member(3, 0).is_err(), "bit offset without a size");
        assert!(one_member(0, 300).is_err(), "size over 255");
        assert!(one_member(1 << 24, 3).is_err(), "offset over 24 bits");
        assert!(
            one_member(1 << 24, 0).is_ok(),
            "plain member: offset word is 32 bits"
        );
    }
}
