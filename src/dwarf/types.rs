//! The model of one compile unit's DIEs as the encoder reads them: [`CuTypes`] and
//! the records it holds (types, members, functions, variables, decl tags): its
//! arrays are vectors the unit owns, the lists they point to are in the unit's
//! arena. Type references stay unit offsets ([`DieRef`]);
//! [`CuTypes::index_of`] maps them to positions through an index of the sorted DIE
//! offsets by 64-byte bucket. Names borrow the input's string sections.
//!
//! Building it: [`parse_cu`] / [`parse_group`] (`walk.rs`, the tree walk), which
//! turn each wanted DIE into a record (`record.rs`) from its decoded attributes
//! (`attrs.rs`); parameter and variable locations are read in `locs.rs`.

pub use super::abbrev::PlanCache;
pub use super::locs::LocCtx;
pub use super::walk::{parse_cu, parse_group};

/// `DW_TAG_LLVM_annotation` (clang's `btf_type_tag` / `btf_decl_tag`).
pub const DW_TAG_LLVM_ANNOTATION: u16 = 0x6000;
/// `DW_TAG_GNU_annotation` (gcc ≥ 14's `btf_type_tag` / `btf_decl_tag`).
pub const DW_TAG_GNU_ANNOTATION: u16 = 0x6001;

/// A reference to a DIE of the same unit by its unit offset; 0 means none (void).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DieRef(pub u32);

impl DieRef {
    /// No type: void.
    pub const VOID: DieRef = DieRef(0);
}

/// A name borrowed from the input (empty for anonymous): the bytes up to the first
/// NUL of `raw`, or all of `raw` if it has none.
///
/// Names point into the input's string sections and are measured only when needed
/// (most are found in the encoder's string cache by address first), so reading a
/// DIE never scans its strings.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Name<'a> {
    raw: &'a [u8],
}

impl<'a> Name<'a> {
    /// The empty name.
    pub const EMPTY: Name<'static> = Name { raw: b"" };

    /// The name starting at `raw[0]` (ending at its first NUL or at its end).
    #[inline]
    pub fn new(raw: &'a [u8]) -> Name<'a> {
        Name { raw }
    }

    /// The name's bytes.
    #[inline]
    pub fn bytes(self) -> &'a [u8] {
        match self.raw.iter().position(|&b| b == 0) {
            Some(n) => &self.raw[..n],
            None => self.raw,
        }
    }

    /// The bytes the name starts, up to the end of the slice it was read from
    /// (past its NUL, if it has one).
    #[inline]
    pub fn raw_bytes(self) -> &'a [u8] {
        self.raw
    }

    /// Whether the name is empty.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.raw.first().is_none_or(|&b| b == 0)
    }

    /// Whether the name is `s`.
    #[inline]
    pub fn is(self, s: &[u8]) -> bool {
        match self.raw.get(..s.len()) {
            Some(head) => head == s && self.raw.get(s.len()).is_none_or(|&b| b == 0),
            None => false,
        }
    }

    /// An identity for caching: equal keys mean equal names (same start, same
    /// backing slice), though equal names may have different keys.
    #[inline]
    pub fn key(self) -> (usize, usize) {
        (self.raw.as_ptr() as usize, self.raw.len())
    }
}

impl std::fmt::Debug for Name<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.bytes()))
    }
}

/// A struct/union member.
#[derive(Clone, Copy, Debug)]
pub struct MemberDie<'a> {
    /// Member name.
    pub name: Name<'a>,
    /// Member type.
    pub ty: DieRef,
    /// Bit offset from `DW_AT_data_bit_offset`, or `DW_AT_data_member_location` × 8.
    pub bit_offset: u64,
    /// `DW_AT_bit_size` (0: not a bitfield).
    pub bit_size: u32,
    /// The old `DW_AT_bit_offset` (DWARF ≤ 4), counted from the storage unit's MSB,
    /// where `has_old_offset` (see [`MemberDie::old_bit_offset`]). Not an
    /// `Option<i64>`, which takes 16 bytes: with the flag beside the other small
    /// fields a member takes 48 bytes instead of 56, and a kernel's units hold
    /// millions of them, each copied into its unit's arena and read back.
    pub old_offset: i64,
    /// Whether the member has an old `DW_AT_bit_offset`.
    pub has_old_offset: bool,
    /// `DW_AT_byte_size` of the storage unit, if given (0 if not).
    pub byte_size: u32,
}

impl MemberDie<'_> {
    /// The old `DW_AT_bit_offset`, if the member has one.
    #[inline]
    pub fn old_bit_offset(&self) -> Option<i64> {
        self.has_old_offset.then_some(self.old_offset)
    }
}

/// An enumerator: name and value as pahole reads it (sign-extended only for
/// `DW_FORM_sdata` / `implicit_const`, zero-extended otherwise).
#[derive(Clone, Copy, Debug)]
pub struct EnumeratorDie<'a> {
    /// Enumerator name.
    pub name: Name<'a>,
    /// Value.
    pub value: i64,
}

/// A parameter of a subroutine type.
#[derive(Clone, Copy, Debug)]
pub struct ParamDie<'a> {
    /// Parameter name (usually empty for subroutine types).
    pub name: Name<'a>,
    /// Parameter type.
    pub ty: DieRef,
}

/// Modifier and reference kinds that carry only a target type (and a name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefKind {
    /// `DW_TAG_pointer_type`.
    Pointer,
    /// `DW_TAG_const_type`.
    Const,
    /// `DW_TAG_volatile_type`.
    Volatile,
    /// `DW_TAG_restrict_type`.
    Restrict,
    /// `DW_TAG_typedef`.
    Typedef,
    /// A `btf_type_tag` annotation placed between a pointer and its pointee.
    TypeTag,
    /// A DIE that stands for its target (`DW_TAG_atomic_type`) or for void
    /// (`DW_TAG_unspecified_type`, target none): not encoded, references follow it.
    Alias,
}

/// One type DIE.
#[derive(Clone, Copy, Debug)]
pub enum TypeDie<'a> {
    /// `DW_TAG_base_type`.
    Base {
        /// Name.
        name: Name<'a>,
        /// `DW_AT_byte_size`.
        byte_size: u32,
        /// `DW_AT_bit_size`, or byte size × 8.
        bit_size: u32,
        /// `DW_AT_encoding` (`DW_ATE_*`).
        encoding: u8,
    },
    /// Pointer, cv-qualifier, typedef, type tag or alias.
    Ref {
        /// Which.
        kind: RefKind,
        /// Name (typedefs and type tags).
        name: Name<'a>,
        /// Target type.
        ty: DieRef,
    },
    /// Struct, union or class.
    Composite {
        /// Union rather than struct/class.
        is_union: bool,
        /// `DW_AT_declaration`: encoded as FWD.
        declaration: bool,
        /// Name.
        name: Name<'a>,
        /// `DW_AT_byte_size`.
        size: u32,
        /// Data members, in order.
        members: &'a [MemberDie<'a>],
    },
    /// Enumeration.
    Enum {
        /// Name.
        name: Name<'a>,
        /// `DW_AT_byte_size` (0 if absent).
        size: u32,
        /// Underlying type (`DW_AT_type`), for signedness.
        ty: DieRef,
        /// Enumerators.
        values: &'a [EnumeratorDie<'a>],
    },
    /// Array: element type and the element count of each dimension.
    Array {
        /// Element type.
        ty: DieRef,
        /// Element count per dimension (0 for flexible/unknown).
        dims: &'a [u64],
    },
    /// Subroutine type.
    Proto {
        /// Return type.
        ret: DieRef,
        /// Parameters.
        params: &'a [ParamDie<'a>],
        /// Ends with `...`.
        varargs: bool,
    },
}

/// A `btf_decl_tag` on a struct, union, typedef or one of a composite's members.
#[derive(Clone, Copy, Debug)]
pub struct DeclTagDie<'a> {
    /// Index (in [`CuTypes::types`]) of the tagged type.
    pub target: u32,
    /// Member index, or -1 for the type itself.
    pub component_idx: i32,
    /// Tag value.
    pub value: Name<'a>,
}

/// Where a parameter is on entry, as its `DW_AT_location` gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocDie<'a> {
    /// No location attribute, or one we cannot read.
    None,
    /// A single expression (`DW_FORM_exprloc`).
    Expr(&'a [u8]),
    /// A location list at this offset of `.debug_loclists` (DWARF 5) or
    /// `.debug_loc` (DWARF ≤ 4).
    List(u64),
}

/// A `btf_decl_tag` on a function, one of its parameters, or a variable.
#[derive(Clone, Copy, Debug)]
pub struct AnnotDie<'a> {
    /// Tag value.
    pub value: Name<'a>,
    /// Parameter index, or -1 for the function or variable itself.
    pub component_idx: i32,
}

/// A `DW_TAG_formal_parameter` child of a subprogram.
#[derive(Clone, Copy, Debug)]
pub struct FnParamDie<'a> {
    /// Unit offset of the DIE.
    pub off: u32,
    /// `DW_AT_name` (empty if absent: then the origin's).
    pub name: Name<'a>,
    /// `DW_AT_type` (void if absent: then the origin's).
    pub ty: DieRef,
    /// `DW_AT_abstract_origin`.
    pub origin: DieRef,
    /// `DW_AT_location`, when readable.
    pub loc: LocDie<'a>,
    /// Whether the DIE has a `DW_AT_location` at all.
    pub has_loc: bool,
    /// Whether the DIE has a `DW_AT_const_value`.
    pub has_const: bool,
}

/// A `DW_TAG_subprogram` at unit level: a definition, declaration, abstract
/// instance or concrete out-of-line instance.
#[derive(Clone, Copy, Debug)]
pub struct FuncDie<'a> {
    /// Unit offset of the DIE.
    pub off: u32,
    /// `DW_AT_name` (empty: take the origin's or specification's).
    pub name: Name<'a>,
    /// `DW_AT_abstract_origin`.
    pub origin: DieRef,
    /// `DW_AT_specification`.
    pub spec: DieRef,
    /// `DW_AT_type`: the return type (void if absent: then the origin's).
    pub ret: DieRef,
    /// `DW_AT_low_pc` (0 if none).
    pub low_pc: u64,
    /// `DW_AT_declaration`.
    pub declaration: bool,
    /// A non-zero `DW_AT_inline`: an abstract instance.
    pub inlined: bool,
    /// `DW_AT_calling_convention` is `DW_CC_nocall` (clang: the function does not
    /// follow the ABI, its signature changed).
    pub nocall: bool,
    /// The `DW_TAG_formal_parameter` children, in DIE order.
    pub params: &'a [FnParamDie<'a>],
    /// Has a `DW_TAG_unspecified_parameters` child.
    pub varargs: bool,
    /// `btf_decl_tag`s of the function and its parameters, in DIE order.
    pub annots: &'a [AnnotDie<'a>],
}

/// A `DW_TAG_variable` at unit level.
#[derive(Clone, Copy, Debug)]
pub struct VarDie<'a> {
    /// Unit offset of the DIE.
    pub off: u32,
    /// `DW_AT_name`.
    pub name: Name<'a>,
    /// `DW_AT_type`.
    pub ty: DieRef,
    /// `DW_AT_specification`.
    pub spec: DieRef,
    /// `DW_AT_declaration`.
    pub declaration: bool,
    /// `DW_AT_external`.
    pub external: bool,
    /// `DW_AT_artificial`.
    pub artificial: bool,
    /// The address of a static-storage variable: the operand of a location that
    /// starts with `DW_OP_addr` / `DW_OP_addrx`.
    pub addr: Option<u64>,
    /// `btf_decl_tag`s of the variable.
    pub annots: &'a [AnnotDie<'a>],
}

/// The DIEs of one unit the encoder reads, in DIE order: the arrays are the
/// unit's own vectors, the lists they point to (members, parameters...) are in
/// the unit's arena; both go when the unit does.
#[derive(Debug)]
pub struct CuTypes<'a> {
    /// Unit offset of each entry of `types` (strictly increasing).
    pub offsets: Vec<u32>,
    /// For each `2^BUCKET_SHIFT` bytes of the unit, which of them start a type DIE
    /// and how many type DIEs start before them ([`index_buckets`]): a reference
    /// is resolved by one look-up there, not a binary search of the whole unit (one
    /// per member, parameter and pointer: 5% of a run's cycles). Empty: search.
    pub buckets: &'a [Bucket],
    /// The type DIEs.
    pub types: Vec<TypeDie<'a>>,
    /// `btf_decl_tag` annotations of types and members.
    pub decl_tags: Vec<DeclTagDie<'a>>,
    /// `DW_AT_language` of the unit (0 if absent).
    pub language: u16,
    /// Address size of the unit (pointer size).
    pub address_size: u8,
    /// The unit's `DW_AT_producer` names clang (pahole reads clang's parameter
    /// locations differently).
    pub producer_clang: bool,
    /// Unit-level subprograms, in DIE order.
    pub funcs: Vec<FuncDie<'a>>,
    /// Unit-level variables, in DIE order.
    pub vars: Vec<VarDie<'a>>,
    /// For reading parameter location lists (None for an empty unit).
    pub locs: Option<LocCtx<'a>>,
    /// The lowest `.debug_loclists` (or `.debug_loc`) offset the unit uses: its
    /// `DW_AT_loclists_base`, else its first location list (`u64::MAX` if none).
    /// Compilers lay the units' lists out in unit order, so the lists before it
    /// are earlier units'.
    pub loclists_start: u64,
    /// The order pahole adds the types in, as indices into `types`, when it is
    /// not DIE order (empty then): a struct or union whose DIE contains type DIEs
    /// (in gcc's output, only types local to a function) comes after them, and a
    /// pointer after its `btf_type_tag` children (clang's).
    pub order: &'a [u32],
}

/// log2 of the bytes of a unit one entry of [`CuTypes::buckets`] covers: a type
/// DIE takes 44 bytes (the corpus vmlinux's median), so a bucket holds one or two.
pub const BUCKET_SHIFT: u32 = 6;

/// One entry of [`CuTypes::buckets`]: the type DIEs that start in `2^BUCKET_SHIFT`
/// bytes of a unit, as a bit per byte, and the number that start before them, so
/// that the position of a DIE is that number plus the bits below its own. One
/// cache line holds both; the scan of the DIE offsets from a bucket's first, which
/// this replaces, read a second line and left the loop at a varying count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bucket {
    starts: u64,
    before: u32,
}

/// [`CuTypes::buckets`] of `offsets` (strictly increasing), in `bump`.
pub fn index_buckets<'a>(offsets: &[u32], bump: &'a arena::Bump) -> &'a [Bucket] {
    let Some(&last) = offsets.last() else {
        return &[];
    };
    let n = (last >> BUCKET_SHIFT) as usize + 1;
    let out = bump.alloc_slice_fill_default::<Bucket>(n);
    for &o in offsets {
        out[(o >> BUCKET_SHIFT) as usize].starts |= 1 << (o & ((1 << BUCKET_SHIFT) - 1));
    }
    let mut before = 0u32;
    for b in out.iter_mut() {
        b.before = before;
        before += b.starts.count_ones();
    }
    out
}

impl<'a> CuTypes<'a> {
    /// The position in `types` of the DIE at unit offset `r`, if it is a type DIE.
    #[inline]
    pub fn index_of(&self, r: DieRef) -> Option<usize> {
        if r.0 == 0 {
            return None;
        }
        let Some(b) = self.buckets.get((r.0 >> BUCKET_SHIFT) as usize) else {
            // Past the last type DIE, or no index.
            return if self.buckets.is_empty() {
                self.offsets.binary_search(&r.0).ok()
            } else {
                None
            };
        };
        let bit = 1u64 << (r.0 & ((1 << BUCKET_SHIFT) - 1));
        if b.starts & bit == 0 {
            return None;
        }
        Some(b.before as usize + (b.starts & (bit - 1)).count_ones() as usize)
    }

    /// An empty unit (e.g. one whose language is excluded).
    pub fn empty(language: u16, address_size: u8) -> CuTypes<'static> {
        CuTypes {
            offsets: Vec::new(),
            buckets: &[],
            types: Vec::new(),
            decl_tags: Vec::new(),
            language,
            address_size,
            producer_clang: false,
            funcs: Vec::new(),
            vars: Vec::new(),
            locs: None,
            loclists_start: u64::MAX,
            order: &[],
        }
    }

    /// Indices into `types` in the order the types are encoded.
    pub fn emission_order(&self) -> impl Iterator<Item = usize> + '_ {
        let n = if self.order.is_empty() {
            self.types.len()
        } else {
            0
        };
        (0..n).chain(self.order.iter().map(|&i| i as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member is 48 bytes on a 64-bit host (see [`MemberDie::old_offset`]).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_member_takes_48_bytes() {
        assert_eq!(std::mem::size_of::<MemberDie<'_>>(), 48);
    }

    /// The bucket index finds what a binary search finds, for every offset up to
    /// past the last, over gaps and runs of DIEs closer than a bucket.
    #[test]
    fn buckets_resolve_as_a_search_does() {
        let bump = arena::Bump::new();
        let mut offsets = Vec::new();
        let mut o = 11u32;
        for step in [1, 3, 64, 65, 200, 2, 2, 1000, 63, 64, 7, 129] {
            offsets.push(o);
            o += step;
        }
        for offs in [&offsets[..], &offsets[..1], &[]] {
            let cu = CuTypes {
                offsets: offs.to_vec(),
                buckets: index_buckets(offs, &bump),
                ..CuTypes::empty(0, 8)
            };
            let searched = CuTypes {
                offsets: offs.to_vec(),
                ..CuTypes::empty(0, 8)
            };
            for r in 0..o + 200 {
                let want = if r == 0 {
                    None
                } else {
                    offs.binary_search(&r).ok()
                };
                assert_eq!(cu.index_of(DieRef(r)), want, "offset {r}");
                assert_eq!(searched.index_of(DieRef(r)), want, "offset {r}");
            }
        }
    }
}
