//! One unit's type DIEs to BTF types, with unit-local ids, as pahole v1.31 converts
//! them (`btf_encoder__encode_tag` and friends).

use super::{low32, DeferredTag, EncodeError, Features, Out, UnitContext, ALIAS, INDEX_TYPE};
use crate::btf::{
    Composite, Enum64Value, EnumValue, Member, Param, StrOffset, Type, TypeId, TypeKind,
};
use crate::dwarf::types::{CuTypes, DieRef, Name, RefKind, TypeDie};
use gimli::constants::{
    DW_ATE_boolean, DW_ATE_complex_float, DW_ATE_float, DW_ATE_imaginary_float, DW_ATE_signed,
    DW_ATE_signed_char,
};

/// What a unit's arrays need to know of the array index type, which is chosen in unit
/// order (pahole keeps the first `int` of any unit, or adds one after the types of
/// the first unit with arrays but no `int`): the unit's records refer to it as
/// [`INDEX_TYPE`].
#[derive(Clone, Copy, Debug, Default)]
pub struct IndexUse {
    /// The local id of the unit's first `int`.
    pub own_int: Option<TypeId>,
    /// The unit has arrays.
    pub arrays: bool,
    /// The unit's types proper are local ids `1..=own_types`: an `int` added for the
    /// index goes right after them (before the unit's decl tags).
    pub own_types: u32,
    /// The strings those types use are the unit's first `own_strings`.
    pub own_strings: usize,
}

/// Appends the BTF types of unit `cu` to `out`, in DIE order, then (unless the unit
/// is part of a merged unit, whose tags are returned) its decl tags. `ids` is
/// scratch: the local ids of the unit's type DIEs.
pub(super) fn encode_types(
    cu: &CuTypes<'_>,
    ctx: &UnitContext,
    ids: &mut UnitIds,
    out: &mut Out<'_>,
) -> Result<(IndexUse, Vec<DeferredTag>), EncodeError> {
    let n = ids.assign(cu, &ctx.features);
    // Room for the unit's types and decl tags: growing the vector would copy it.
    out.types.reserve(n + cu.decl_tags.len(), words_hint(cu));
    let enc = ids.unit(cu);
    let ids = &ids.own;
    let st = &ctx.features;
    let own_int = cu
        .types
        .iter()
        .position(|t| matches!(t, TypeDie::Base { name, .. } if name.is(b"int")))
        .map(|i| TypeId(ids[i]));
    let mut arrays = false;
    let mut lists = Lists::default();
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
                    let list = std::mem::take(&mut lists.members);
                    let c = composite(&enc, ctx, out, name, size, members, list)?;
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
                out.strs.intern(name);
                if size <= 4 || !st.enum64 {
                    let mut signed = false;
                    let mut vals = std::mem::take(&mut lists.values);
                    vals.reserve(values.len());
                    for v in values {
                        let value = if st.enum64 {
                            v.value
                        } else {
                            i64::from(low32(v.value as u64))
                        };
                        if value < i64::from(i32::MIN) || value > i64::from(u32::MAX) {
                            return Err(EncodeError(format!(
                                "enumerator {} value {value} does not fit in 32 bits",
                                String::from_utf8_lossy(v.name.bytes())
                            )));
                        }
                        signed |= value < 0;
                        vals.push(EnumValue {
                            name: out.strs.intern(v.name),
                            // In i32::MIN..=u32::MAX: the BTF word's two's complement.
                            value: low32(value as u64),
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
                    let mut vals = std::mem::take(&mut lists.values64);
                    vals.extend(values.iter().map(|v| Enum64Value {
                        name: out.strs.intern(v.name),
                        value: v.value as u64,
                    }));
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
                arrays = true;
                // pahole keeps each dimension's low 32 bits (`nr_entries` is a u32).
                let nelems = dims.iter().fold(1u32, |n, &d| n.wrapping_mul(low32(d)));
                (
                    Name::EMPTY,
                    TypeKind::Array {
                        elem_type: enc.id(ty),
                        index_type: INDEX_TYPE,
                        nelems,
                    },
                )
            }
            TypeDie::Proto {
                ret,
                params,
                varargs,
            } => {
                let mut ps = std::mem::take(&mut lists.params);
                ps.extend(params.iter().map(|p| Param {
                    name: out.strs.intern(p.name),
                    type_id: enc.id(p.ty),
                }));
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
        let name = out.strs.intern(name);
        let t = Type { name, kind };
        let id = out.push_ref(&t);
        debug_assert_eq!(id.0, ids[i]);
        lists.recycle(t.kind);
    }
    let index = IndexUse {
        own_int,
        arrays,
        own_types: u32::try_from(out.types.count() - 1).map_err(|_| too_many())?,
        own_strings: out.strs.len(),
    };
    let mut deferred = Vec::new();
    if st.decl_tag {
        for d in &cu.decl_tags {
            let target = ids[d.target as usize];
            if target == ALIAS {
                continue;
            }
            if ctx.merged {
                // pahole adds the tags of its merged unit after every part's types.
                deferred.push((d.value.bytes().into(), TypeId(target), d.component_idx));
                continue;
            }
            let value = out.strs.intern(d.value);
            super::push_decl_tag(out, value, TypeId(target), d.component_idx);
        }
    }
    Ok((index, deferred))
}

/// About how many BTF words the unit's types and decl tags take (an upper bound
/// but for the types the functions and variables add), to make room at once.
fn words_hint(cu: &CuTypes<'_>) -> usize {
    let types: usize = cu
        .types
        .iter()
        .map(|t| match t {
            TypeDie::Composite { members, .. } => 3 + 3 * members.len(),
            TypeDie::Enum { values, .. } => 3 + 3 * values.len(),
            TypeDie::Proto { params, .. } => 3 + 2 * params.len(),
            TypeDie::Array { dims, .. } => 6 * dims.len().max(1),
            TypeDie::Base { .. } | TypeDie::Ref { .. } => 4,
        })
        .sum();
    types + 4 * cu.decl_tags.len()
}

/// The lists of the type being made, kept from one type to the next: the sink
/// copies a type as it takes it, and a unit has thousands of structs.
#[derive(Default)]
struct Lists {
    members: Vec<Member>,
    values: Vec<EnumValue>,
    values64: Vec<Enum64Value>,
    params: Vec<Param>,
}

impl Lists {
    /// Takes back, emptied, the list of a type the sink has taken.
    fn recycle(&mut self, kind: TypeKind) {
        match kind {
            TypeKind::Struct(c) | TypeKind::Union(c) => self.members = c.members,
            TypeKind::Enum { values, .. } => self.values = values,
            TypeKind::Enum64 { values, .. } => self.values64 = values,
            TypeKind::FuncProto { params, .. } => self.params = params,
            _ => return,
        }
        self.members.clear();
        self.values.clear();
        self.values64.clear();
        self.params.clear();
    }
}

fn too_many() -> EncodeError {
    EncodeError("more than 2^32 types in one unit".into())
}

/// A struct's or union's members (pahole's `btf_encoder__add_field`s).
fn composite(
    enc: &Unit<'_, '_>,
    ctx: &UnitContext,
    out: &mut Out<'_>,
    name: Name<'_>,
    size: u32,
    members: &[crate::dwarf::types::MemberDie<'_>],
    mut list: Vec<Member>,
) -> Result<Composite, EncodeError> {
    let mut kflag = false;
    list.reserve(members.len());
    // pahole adds the type's name before its members' names: the string section
    // keeps that order.
    out.strs.intern(name);
    for m in members {
        let mut bit_offset = m.bit_offset;
        if let (Some(old), true) = (m.old_bit_offset(), m.bit_size != 0) {
            let storage = if m.byte_size != 0 {
                u64::from(m.byte_size)
            } else {
                super::layout::size_of(enc.cu, m.ty, 0, super::layout::Sizing::Storage)
            };
            let within = if ctx.little_endian {
                (storage * 8) as i64 - old - i64::from(m.bit_size)
            } else {
                old
            };
            bit_offset = bit_offset.wrapping_add(within as u64);
        }
        let refuse = |what: &str| {
            EncodeError(format!(
                "member '{}' of '{}': {what}",
                String::from_utf8_lossy(m.name.bytes()),
                String::from_utf8_lossy(name.bytes()),
            ))
        };
        let bit_offset = u32::try_from(bit_offset)
            .map_err(|_| refuse(&format!("bit offset {bit_offset} does not fit in 32 bits")))?;
        if m.bit_size != 0 || !bit_offset.is_multiple_of(8) {
            // libbpf's btf__add_field refuses what the offset word cannot hold, and
            // so pahole fails on it.
            if m.bit_size == 0 || m.bit_size > 255 || bit_offset > 0xff_ffff {
                return Err(refuse(&format!(
                    "bitfield of {} bits at bit {bit_offset} cannot be encoded",
                    m.bit_size
                )));
            }
            kflag = true;
        }
        let mname = out.strs.intern(m.name);
        list.push(Member {
            name: mname,
            type_id: enc.id(m.ty),
            offset: bit_offset | m.bit_size << 24,
        });
    }
    Ok(Composite {
        size,
        kflag,
        members: list,
    })
}

/// An INT or FLOAT for a base type, as pahole's `btf_encoder__add_base_type`: the
/// signedness, boolean and float facts come from `DW_AT_encoding` (so plain `char`
/// is SIGNED where the compiler says `DW_ATE_signed_char`, as in kernels built
/// without `-funsigned-char`), the size from `DW_AT_byte_size`.
fn base_type<'n>(
    st: &Features,
    name: Name<'n>,
    byte_size: u32,
    encoding: u8,
) -> Result<(Name<'n>, TypeKind), EncodeError> {
    let mut enc = 0;
    if encoding == DW_ATE_signed.0 || encoding == DW_ATE_signed_char.0 {
        enc = crate::btf::INT_SIGNED;
    } else if encoding == DW_ATE_boolean.0 {
        enc = crate::btf::INT_BOOL;
    } else if st.float && encoding == DW_ATE_float.0 {
        return Ok((name, TypeKind::Float { size: byte_size }));
    } else if st.float
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
    // A power of two up to 16 bytes: at most 128 bits.
    let bits = u8::try_from(size * 8).unwrap_or(128);
    Ok((
        name,
        TypeKind::Int {
            size,
            encoding: enc,
            offset: 0,
            bits,
        },
    ))
}

/// The local ids of a unit's type DIEs (a worker's scratch, reused unit after
/// unit).
#[derive(Default, Debug)]
pub(super) struct UnitIds {
    /// Each type DIE's own id, from 1 on, or `ALIAS` for one not encoded itself.
    own: Vec<u32>,
    /// The id a reference to each type DIE resolves to (see [`Unit::id`]): its own,
    /// or where its chain of aliases ends.
    resolved: Vec<u32>,
}

impl UnitIds {
    /// Assigns the local id of every type DIE of the unit, from 1 on (`ALIAS` for
    /// those not encoded), and resolves the aliases; returns how many are encoded.
    fn assign(&mut self, cu: &CuTypes<'_>, features: &Features) -> usize {
        let ids = &mut self.own;
        ids.clear();
        ids.resize(cu.types.len(), ALIAS);
        let mut next = 1;
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
                } => !features.type_tag,
                _ => false,
            };
            if !alias {
                ids[i] = next;
                next += 1;
            }
        }
        // Each reference resolved once here instead of at each use (12 million
        // on the corpus vmlinux, most to a type with an id of its own).
        self.resolved.clear();
        self.resolved.extend(ids.iter().enumerate().map(|(i, &id)| {
            if id != ALIAS {
                return id;
            }
            match cu.types[i] {
                // The alias itself is the first of the 64 steps.
                TypeDie::Ref { ty, .. } => follow_aliases(cu, ids, ty, 63).0,
                _ => TypeId::VOID.0,
            }
        }));
        next as usize - 1
    }

    /// The unit `cu`, whose ids these are.
    pub(super) fn unit<'c, 'a>(&'c self, cu: &'c CuTypes<'a>) -> Unit<'c, 'a> {
        Unit {
            cu,
            resolved: &self.resolved,
        }
    }
}

/// Where the reference `r` leads through the unit's aliases (`ids[i] == ALIAS`)
/// within `steps` DIEs: the first type DIE with an id of its own; void for none,
/// for a non-type DIE, and for a longer chain.
fn follow_aliases(cu: &CuTypes<'_>, ids: &[u32], r: DieRef, steps: usize) -> TypeId {
    let mut r = r;
    for _ in 0..steps {
        let Some(i) = cu.index_of(r) else {
            return TypeId::VOID;
        };
        if ids[i] != ALIAS {
            return TypeId(ids[i]);
        }
        match cu.types[i] {
            TypeDie::Ref { ty, .. } => r = ty,
            _ => return TypeId::VOID,
        }
    }
    TypeId::VOID
}

/// A unit being encoded, with the local ids of its DIEs.
pub(super) struct Unit<'c, 'a> {
    pub cu: &'c CuTypes<'a>,
    /// What a reference to each type DIE resolves to (see [`UnitIds`]).
    resolved: &'c [u32],
}

impl Unit<'_, '_> {
    /// The local id a reference resolves to: void for none, for non-type DIEs and
    /// for alias chains ending in void or longer than 64 DIEs. One look-up: the
    /// chains were followed when the ids were assigned ([`UnitIds`]).
    ///
    /// Inlined: 12 million calls on the corpus vmlinux, whose entry and exit were
    /// 0.9% of the run's instructions (-0.26% inlined, cachegrind; `#[inline]`
    /// alone changed nothing).
    #[inline(always)]
    pub fn id(&self, r: DieRef) -> TypeId {
        match self.cu.index_of(r) {
            Some(i) => TypeId(self.resolved[i]),
            None => TypeId::VOID,
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alias(to: u32) -> TypeDie<'static> {
        TypeDie::Ref {
            kind: RefKind::Alias,
            name: Name::EMPTY,
            ty: DieRef(to),
        }
    }

    /// A unit of `types` at offsets 10, 20, 30, …
    fn unit_of(types: Vec<TypeDie<'static>>) -> CuTypes<'static> {
        CuTypes {
            offsets: (1..=u32::try_from(types.len()).unwrap())
                .map(|k| 10 * k)
                .collect(),
            types,
            ..CuTypes::empty(0x1d, 8)
        }
    }

    #[test]
    fn references_resolve_through_alias_chains_of_at_most_64() {
        let int = TypeDie::Base {
            name: Name::new(b"int"),
            byte_size: 4,
            bit_size: 32,
            encoding: gimli::constants::DW_ATE_signed.0,
        };
        // int at 10; aliases of it at 20 and (through 20) 30; one of void at 40;
        // two aliases of each other at 50 and 60; then a chain at 70 of 64
        // aliases ending at int.
        let mut types = vec![int, alias(10), alias(20), alias(0), alias(60), alias(50)];
        let chain = 64;
        for k in 0..chain {
            let next = if k + 1 == chain { 10 } else { 10 * (8 + k) };
            types.push(alias(next));
        }
        let cu = unit_of(types);
        let mut ids = UnitIds::default();
        assert_eq!(ids.assign(&cu, &Features::from_list("default")), 1);
        let unit = ids.unit(&cu);
        let id = |off: u32| unit.id(DieRef(off)).0;
        assert_eq!([id(10), id(20), id(30), id(40)], [1, 1, 1, 0]);
        assert_eq!([id(50), id(60)], [0, 0], "a loop of aliases is void");
        assert_eq!([id(0), id(15), id(99_999)], [0, 0, 0], "no type DIE there");
        // From the chain's first alias, int is the 65th DIE: one too far; from
        // its second, the 64th.
        assert_eq!([id(70), id(80)], [0, 1]);
    }
}
