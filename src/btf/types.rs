//! The BTF data model: one `Type` per BTF type record, typed ids and string offsets.
//!
//! The model keeps every field a valid BTF file can carry, so that reading a file and
//! writing it back gives the same bytes. Layout and kind meanings follow the kernel's
//! `Documentation/bpf/btf.rst`.

use std::fmt;

/// A BTF type id. Id 0 is `void`; in split BTF the ids of the split part continue
/// after the last id of its base.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TypeId(pub u32);

impl TypeId {
    /// The implicit `void` type.
    pub const VOID: TypeId = TypeId(0);
}

impl fmt::Display for TypeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An offset into the (possibly base + split) BTF string section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StrOffset(pub u32);

impl StrOffset {
    /// The empty string (anonymous types).
    pub const EMPTY: StrOffset = StrOffset(0);
}

/// The 5-bit kind field of a type's `info` word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    /// Integer.
    Int = 1,
    /// Pointer.
    Ptr = 2,
    /// Array.
    Array = 3,
    /// Struct.
    Struct = 4,
    /// Union.
    Union = 5,
    /// Enum with 32-bit values.
    Enum = 6,
    /// Forward declaration of a struct or union.
    Fwd = 7,
    /// Typedef.
    Typedef = 8,
    /// `volatile` modifier.
    Volatile = 9,
    /// `const` modifier.
    Const = 10,
    /// `restrict` modifier.
    Restrict = 11,
    /// Function (name + prototype + linkage).
    Func = 12,
    /// Function prototype.
    FuncProto = 13,
    /// Variable.
    Var = 14,
    /// Data section with its variables.
    Datasec = 15,
    /// Floating point.
    Float = 16,
    /// Declaration tag (`btf_decl_tag`).
    DeclTag = 17,
    /// Type tag (`btf_type_tag`).
    TypeTag = 18,
    /// Enum with 64-bit values.
    Enum64 = 19,
}

impl Kind {
    /// The kind for a raw kind number, if it is one BTF defines.
    pub fn from_raw(raw: u32) -> Option<Kind> {
        Some(match raw {
            1 => Kind::Int,
            2 => Kind::Ptr,
            3 => Kind::Array,
            4 => Kind::Struct,
            5 => Kind::Union,
            6 => Kind::Enum,
            7 => Kind::Fwd,
            8 => Kind::Typedef,
            9 => Kind::Volatile,
            10 => Kind::Const,
            11 => Kind::Restrict,
            12 => Kind::Func,
            13 => Kind::FuncProto,
            14 => Kind::Var,
            15 => Kind::Datasec,
            16 => Kind::Float,
            17 => Kind::DeclTag,
            18 => Kind::TypeTag,
            19 => Kind::Enum64,
            _ => return None,
        })
    }

    /// The kind a FWD declares: UNION for a union's (the kflag), else STRUCT.
    #[inline]
    pub const fn fwd_declares(union: bool) -> Kind {
        if union {
            Kind::Union
        } else {
            Kind::Struct
        }
    }

    /// The name bpftool prints for the kind (`STRUCT`, `FUNC_PROTO`, …).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Int => "INT",
            Kind::Ptr => "PTR",
            Kind::Array => "ARRAY",
            Kind::Struct => "STRUCT",
            Kind::Union => "UNION",
            Kind::Enum => "ENUM",
            Kind::Fwd => "FWD",
            Kind::Typedef => "TYPEDEF",
            Kind::Volatile => "VOLATILE",
            Kind::Const => "CONST",
            Kind::Restrict => "RESTRICT",
            Kind::Func => "FUNC",
            Kind::FuncProto => "FUNC_PROTO",
            Kind::Var => "VAR",
            Kind::Datasec => "DATASEC",
            Kind::Float => "FLOAT",
            Kind::DeclTag => "DECL_TAG",
            Kind::TypeTag => "TYPE_TAG",
            Kind::Enum64 => "ENUM64",
        }
    }
}

/// `BTF_INT_SIGNED` in an INT's encoding bits.
pub const INT_SIGNED: u8 = 1 << 0;
/// `BTF_INT_CHAR` in an INT's encoding bits.
pub const INT_CHAR: u8 = 1 << 1;
/// `BTF_INT_BOOL` in an INT's encoding bits.
pub const INT_BOOL: u8 = 1 << 2;

/// Function linkage (the `vlen` of a FUNC).
pub const FUNC_STATIC: u16 = 0;
/// Global function linkage.
pub const FUNC_GLOBAL: u16 = 1;
/// Extern function linkage.
pub const FUNC_EXTERN: u16 = 2;

/// Variable linkage: static.
pub const VAR_STATIC: u32 = 0;
/// Variable linkage: global (allocated).
pub const VAR_GLOBAL_ALLOCATED: u32 = 1;
/// Variable linkage: extern.
pub const VAR_GLOBAL_EXTERN: u32 = 2;

/// A struct or union member.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    /// Member name (empty for anonymous members).
    pub name: StrOffset,
    /// Member type.
    pub type_id: TypeId,
    /// The raw offset word: a bit offset, or with the parent's kflag set,
    /// `bitfield_size << 24 | bit_offset`.
    pub offset: u32,
}

impl Member {
    /// The member's bit offset, reading the offset word as `kflag` says.
    pub fn bit_offset(&self, kflag: bool) -> u32 {
        if kflag {
            self.offset & 0x00ff_ffff
        } else {
            self.offset
        }
    }

    /// The member's bitfield size (0 when it is not a bitfield or `kflag` is clear).
    pub fn bitfield_size(&self, kflag: bool) -> u32 {
        if kflag {
            self.offset >> 24
        } else {
            0
        }
    }
}

/// A struct or union body.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Composite {
    /// Size in bytes.
    pub size: u32,
    /// The kflag: member offsets carry bitfield sizes.
    pub kflag: bool,
    /// Members in declaration order.
    pub members: Vec<Member>,
}

/// One enumerator of a 32-bit ENUM.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EnumValue {
    /// Enumerator name.
    pub name: StrOffset,
    /// Raw 32-bit value (signed or not as the enum's kflag says).
    pub value: u32,
}

/// One enumerator of an ENUM64.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Enum64Value {
    /// Enumerator name.
    pub name: StrOffset,
    /// Raw 64-bit value (signed or not as the enum's kflag says).
    pub value: u64,
}

/// A function prototype parameter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Param {
    /// Parameter name (may be empty).
    pub name: StrOffset,
    /// Parameter type; void with an empty name as the last parameter means `...`.
    pub type_id: TypeId,
}

/// One variable (or function) placed in a DATASEC.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VarSecInfo {
    /// The VAR (or FUNC) type.
    pub type_id: TypeId,
    /// Offset within the section.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
}

/// What a type is, with its kind-specific data.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TypeKind {
    /// INT: `size` bytes; the encoding word split into its fields.
    Int {
        /// Size in bytes.
        size: u32,
        /// `INT_SIGNED | INT_CHAR | INT_BOOL` bits.
        encoding: u8,
        /// Bit offset (always 0 from modern encoders).
        offset: u8,
        /// Number of value bits.
        bits: u8,
    },
    /// PTR to a type.
    Ptr(TypeId),
    /// ARRAY.
    Array {
        /// Element type.
        elem_type: TypeId,
        /// Index type.
        index_type: TypeId,
        /// Element count.
        nelems: u32,
    },
    /// STRUCT.
    Struct(Composite),
    /// UNION.
    Union(Composite),
    /// ENUM with 32-bit values.
    Enum {
        /// Size in bytes (1, 2, 4 or 8).
        size: u32,
        /// kflag: the values are signed.
        signed: bool,
        /// Enumerators.
        values: Vec<EnumValue>,
    },
    /// FWD declaration; `union` is the kflag.
    Fwd {
        /// Declares a union rather than a struct.
        union: bool,
    },
    /// TYPEDEF to a type.
    Typedef(TypeId),
    /// VOLATILE modifier.
    Volatile(TypeId),
    /// CONST modifier.
    Const(TypeId),
    /// RESTRICT modifier.
    Restrict(TypeId),
    /// FUNC: its prototype and linkage.
    Func {
        /// The FUNC_PROTO.
        proto: TypeId,
        /// `FUNC_STATIC`, `FUNC_GLOBAL` or `FUNC_EXTERN`.
        linkage: u16,
    },
    /// FUNC_PROTO.
    FuncProto {
        /// Return type.
        ret: TypeId,
        /// Parameters.
        params: Vec<Param>,
    },
    /// VAR.
    Var {
        /// Variable type.
        type_id: TypeId,
        /// `VAR_STATIC`, `VAR_GLOBAL_ALLOCATED` or `VAR_GLOBAL_EXTERN`.
        linkage: u32,
    },
    /// DATASEC.
    Datasec {
        /// Section size.
        size: u32,
        /// Its variables, by offset.
        entries: Vec<VarSecInfo>,
    },
    /// FLOAT of `size` bytes.
    Float {
        /// Size in bytes.
        size: u32,
    },
    /// DECL_TAG.
    DeclTag {
        /// Tagged type.
        type_id: TypeId,
        /// Member or parameter index, or -1 for the type itself.
        component_idx: i32,
        /// kflag: the tag is an attribute (`__attribute__((…))`) not a `btf_decl_tag`.
        kflag: bool,
    },
    /// TYPE_TAG.
    TypeTag {
        /// Tagged type.
        type_id: TypeId,
        /// kflag: the tag is an attribute.
        kflag: bool,
    },
    /// ENUM64.
    Enum64 {
        /// Size in bytes.
        size: u32,
        /// kflag: the values are signed.
        signed: bool,
        /// Enumerators.
        values: Vec<Enum64Value>,
    },
}

/// One BTF type: its name and what it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Type {
    /// Name offset in the string section.
    pub name: StrOffset,
    /// Kind and kind-specific data.
    pub kind: TypeKind,
}

/// The one body of [`TypeKind::for_each_ref`] and [`TypeKind::for_each_ref_mut`]:
/// calls `$f` on each type id of `$kind` (`&TypeId`, or `&mut TypeId` with `mut`),
/// in record order; `$iter` is `iter` or `iter_mut`.
macro_rules! each_ref {
    ($kind:expr, $f:ident, $iter:ident $(, $m:tt)?) => {
        match $kind {
            TypeKind::Int { .. } | TypeKind::Fwd { .. } | TypeKind::Float { .. } => {}
            TypeKind::Enum { .. } | TypeKind::Enum64 { .. } => {}
            TypeKind::Ptr(t)
            | TypeKind::Typedef(t)
            | TypeKind::Volatile(t)
            | TypeKind::Const(t)
            | TypeKind::Restrict(t) => $f(t),
            TypeKind::Array {
                elem_type,
                index_type,
                ..
            } => {
                $f(elem_type);
                $f(index_type);
            }
            TypeKind::Struct(c) | TypeKind::Union(c) => {
                c.members.$iter().for_each(|m| $f(&$($m)? m.type_id))
            }
            TypeKind::Func { proto, .. } => $f(proto),
            TypeKind::FuncProto { ret, params } => {
                $f(ret);
                params.$iter().for_each(|p| $f(&$($m)? p.type_id));
            }
            TypeKind::Var { type_id, .. }
            | TypeKind::DeclTag { type_id, .. }
            | TypeKind::TypeTag { type_id, .. } => $f(type_id),
            TypeKind::Datasec { entries, .. } => {
                entries.$iter().for_each(|e| $f(&$($m)? e.type_id))
            }
        }
    };
}

impl TypeKind {
    /// The BTF kind.
    pub fn kind(&self) -> Kind {
        match self {
            TypeKind::Int { .. } => Kind::Int,
            TypeKind::Ptr(_) => Kind::Ptr,
            TypeKind::Array { .. } => Kind::Array,
            TypeKind::Struct(_) => Kind::Struct,
            TypeKind::Union(_) => Kind::Union,
            TypeKind::Enum { .. } => Kind::Enum,
            TypeKind::Fwd { .. } => Kind::Fwd,
            TypeKind::Typedef(_) => Kind::Typedef,
            TypeKind::Volatile(_) => Kind::Volatile,
            TypeKind::Const(_) => Kind::Const,
            TypeKind::Restrict(_) => Kind::Restrict,
            TypeKind::Func { .. } => Kind::Func,
            TypeKind::FuncProto { .. } => Kind::FuncProto,
            TypeKind::Var { .. } => Kind::Var,
            TypeKind::Datasec { .. } => Kind::Datasec,
            TypeKind::Float { .. } => Kind::Float,
            TypeKind::DeclTag { .. } => Kind::DeclTag,
            TypeKind::TypeTag { .. } => Kind::TypeTag,
            TypeKind::Enum64 { .. } => Kind::Enum64,
        }
    }

    /// The kflag bit as stored in the `info` word.
    pub fn kflag(&self) -> bool {
        match self {
            TypeKind::Struct(c) | TypeKind::Union(c) => c.kflag,
            TypeKind::Enum { signed, .. } | TypeKind::Enum64 { signed, .. } => *signed,
            TypeKind::Fwd { union } => *union,
            TypeKind::DeclTag { kflag, .. } | TypeKind::TypeTag { kflag, .. } => *kflag,
            _ => false,
        }
    }

    /// The `vlen` as stored in the `info` word (member count, or a FUNC's linkage).
    pub fn vlen(&self) -> usize {
        match self {
            TypeKind::Struct(c) | TypeKind::Union(c) => c.members.len(),
            TypeKind::Enum { values, .. } => values.len(),
            TypeKind::Enum64 { values, .. } => values.len(),
            TypeKind::FuncProto { params, .. } => params.len(),
            TypeKind::Datasec { entries, .. } => entries.len(),
            TypeKind::Func { linkage, .. } => *linkage as usize,
            _ => 0,
        }
    }

    /// The `size` of sized kinds, or None for kinds whose third word is a type id.
    pub fn size(&self) -> Option<u32> {
        match self {
            TypeKind::Int { size, .. }
            | TypeKind::Enum { size, .. }
            | TypeKind::Enum64 { size, .. }
            | TypeKind::Datasec { size, .. }
            | TypeKind::Float { size } => Some(*size),
            TypeKind::Struct(c) | TypeKind::Union(c) => Some(c.size),
            _ => None,
        }
    }

    /// Calls `f` on every type id this type refers to, in record order.
    pub fn for_each_ref(&self, mut f: impl FnMut(TypeId)) {
        let mut g = |t: &TypeId| f(*t);
        each_ref!(self, g, iter);
    }

    /// Calls `f` on a mutable reference to every type id this type refers to,
    /// in the same order as [`TypeKind::for_each_ref`].
    pub fn for_each_ref_mut(&mut self, mut f: impl FnMut(&mut TypeId)) {
        each_ref!(self, f, iter_mut, mut);
    }

    /// An INT's fields — size, encoding, bit offset, bits — or None for the other
    /// kinds.
    pub fn int_fields(&self) -> Option<(u32, u8, u8, u8)> {
        match *self {
            TypeKind::Int {
                size,
                encoding,
                offset,
                bits,
            } => Some((size, encoding, offset, bits)),
            _ => None,
        }
    }

    /// An INT of `bits` bits (at offset 0, in the fewest whole bytes) with
    /// `encoding` (`INT_SIGNED`, `INT_CHAR`, `INT_BOOL` or 0).
    pub fn int(bits: u8, encoding: u8) -> TypeKind {
        TypeKind::Int {
            size: u32::from(bits.div_ceil(8)),
            encoding,
            offset: 0,
            bits,
        }
    }

    /// The one type a pointer, modifier (CONST, VOLATILE, RESTRICT), TYPEDEF or
    /// TYPE_TAG refers to; None for the other kinds.
    pub fn ref_target(&self) -> Option<TypeId> {
        match self {
            TypeKind::Ptr(r) => Some(*r),
            _ => self.modifier_target(),
        }
    }

    /// The next type of a modifier chain (TYPEDEF, VOLATILE, CONST, RESTRICT,
    /// TYPE_TAG); None for the other kinds, pointers included.
    pub fn modifier_target(&self) -> Option<TypeId> {
        match self {
            TypeKind::Typedef(r)
            | TypeKind::Volatile(r)
            | TypeKind::Const(r)
            | TypeKind::Restrict(r)
            | TypeKind::TypeTag { type_id: r, .. } => Some(*r),
            _ => None,
        }
    }

    /// Calls `f` on every string offset inside the kind data (member, enumerator and
    /// parameter names; not the type's own name).
    pub fn for_each_str_mut(&mut self, mut f: impl FnMut(&mut StrOffset)) {
        match self {
            TypeKind::Struct(c) | TypeKind::Union(c) => {
                c.members.iter_mut().for_each(|m| f(&mut m.name))
            }
            TypeKind::Enum { values, .. } => values.iter_mut().for_each(|v| f(&mut v.name)),
            TypeKind::Enum64 { values, .. } => values.iter_mut().for_each(|v| f(&mut v.name)),
            TypeKind::FuncProto { params, .. } => params.iter_mut().for_each(|p| f(&mut p.name)),
            _ => {}
        }
    }
}

impl Type {
    /// The BTF kind.
    pub fn kind(&self) -> Kind {
        self.kind.kind()
    }

    /// Size of the record in the type section, in bytes.
    pub fn record_len(&self) -> usize {
        12 + match &self.kind {
            TypeKind::Int { .. } => 4,
            TypeKind::Array { .. } => 12,
            TypeKind::Struct(c) | TypeKind::Union(c) => 12 * c.members.len(),
            TypeKind::Enum { values, .. } => 8 * values.len(),
            TypeKind::Enum64 { values, .. } => 12 * values.len(),
            TypeKind::FuncProto { params, .. } => 8 * params.len(),
            TypeKind::Var { .. } => 4,
            TypeKind::Datasec { entries, .. } => 12 * entries.len(),
            TypeKind::DeclTag { .. } => 4,
            _ => 0,
        }
    }

    /// Calls `f` on every string offset of the type, its own name first.
    pub fn for_each_str_mut(&mut self, mut f: impl FnMut(&mut StrOffset)) {
        f(&mut self.name);
        self.kind.for_each_str_mut(f);
    }
}
