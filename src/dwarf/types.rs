//! One compile unit's type DIEs, parsed into a compact form in the unit's arena.
//!
//! [`parse_cu`] walks every DIE of the unit once (gimli's raw entries, skipping the
//! attributes of DIEs we do not need) and keeps, in DIE order, the type DIEs pahole
//! encodes: everything the encoder needs and nothing else. Type references stay
//! unit offsets ([`DieRef`]); [`CuTypes::index_of`] maps them to positions by binary
//! search over the sorted DIE offsets. Names borrow the input's string sections.

use super::die::{Cur, DieError, Op, Place, Plan, UnitEnc, Val};
use super::DwarfInput;
use crate::elf::read_uint;
use arena::Bump;
use bumpalo::collections::Vec as BVec;
use gimli::constants::*;
use gimli::UnitOffset;
use std::cell::Cell;
use std::collections::HashMap;

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
    /// The old `DW_AT_bit_offset` (DWARF ≤ 4), counted from the storage unit's MSB.
    pub old_bit_offset: Option<i64>,
    /// `DW_AT_byte_size` of the storage unit, if given (0 if not).
    pub byte_size: u32,
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

/// What reading a unit's location lists needs.
#[derive(Clone, Debug)]
pub struct LocCtx<'a> {
    /// `.debug_loc` and `.debug_loclists`.
    pub lists: gimli::LocationLists<super::Reader<'a>>,
    /// The unit's encoding (version, address size).
    pub encoding: gimli::Encoding,
    /// The byte order of the expressions' operands.
    pub endian: gimli::RunTimeEndian,
}

impl<'a> LocCtx<'a> {
    /// The location expressions of the entries of location list `off`, in order
    /// (base address entries hold none); ends at the list's end or at the first
    /// entry that cannot be read.
    pub fn list_exprs(&self, off: u64) -> impl Iterator<Item = &'a [u8]> {
        let mut entries = self
            .lists
            .raw_locations(gimli::LocationListsOffset(off as usize), self.encoding)
            .ok();
        std::iter::from_fn(move || loop {
            use gimli::RawLocListEntry as E;
            match entries.as_mut()?.next().ok().flatten()? {
                E::AddressOrOffsetPair { data, .. }
                | E::StartxEndx { data, .. }
                | E::StartxLength { data, .. }
                | E::OffsetPair { data, .. }
                | E::DefaultLocation { data }
                | E::StartEnd { data, .. }
                | E::StartLength { data, .. } => return Some(data.0.slice()),
                E::BaseAddress { .. } | E::BaseAddressx { .. } => continue,
            }
        })
    }
}

/// The type DIEs of one unit, in DIE order, allocated in the unit's arena.
#[derive(Debug)]
pub struct CuTypes<'a> {
    /// Unit offset of each entry of `types` (strictly increasing).
    pub offsets: &'a [u32],
    /// The type DIEs.
    pub types: &'a [TypeDie<'a>],
    /// `btf_decl_tag` annotations of types and members.
    pub decl_tags: &'a [DeclTagDie<'a>],
    /// `DW_AT_language` of the unit (0 if absent).
    pub language: u16,
    /// Address size of the unit (pointer size).
    pub address_size: u8,
    /// The unit's `DW_AT_producer` names clang (pahole reads clang's parameter
    /// locations differently).
    pub producer_clang: bool,
    /// Unit-level subprograms, in DIE order.
    pub funcs: &'a [FuncDie<'a>],
    /// Unit-level variables, in DIE order.
    pub vars: &'a [VarDie<'a>],
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

impl<'a> CuTypes<'a> {
    /// The position in `types` of the DIE at unit offset `r`, if it is a type DIE.
    #[inline]
    pub fn index_of(&self, r: DieRef) -> Option<usize> {
        if r.0 == 0 {
            return None;
        }
        self.offsets.binary_search(&r.0).ok()
    }

    /// An empty unit (e.g. one whose language is excluded).
    pub fn empty(language: u16, address_size: u8) -> CuTypes<'static> {
        CuTypes {
            offsets: &[],
            types: &[],
            decl_tags: &[],
            language,
            address_size,
            producer_clang: false,
            funcs: &[],
            vars: &[],
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

/// What an open DIE with children is, for interpreting its children.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FrameKind {
    Composite,
    Enum,
    Array,
    Proto,
    Pointer,
    Typedef,
    Member,
    /// A unit-level subprogram.
    Subprogram,
    /// A parameter of a unit-level subprogram.
    FnParam,
    /// A unit-level variable.
    Variable,
    Other,
}

/// An open DIE with children.
#[derive(Clone, Copy)]
struct Frame {
    depth: isize,
    kind: FrameKind,
    /// Index in `types` of the DIE (for type frames).
    index: u32,
    /// Start of this frame's entries in the scratch vector for its child kind.
    start: u32,
    /// Start of this frame's pending type tags (pointers) / member decl tags.
    tag_start: u32,
}

/// The attributes of a DIE that the encoder needs.
#[derive(Default)]
struct Attrs<'a> {
    name: Name<'a>,
    ty: DieRef,
    byte_size: Option<u64>,
    bit_size: Option<u64>,
    data_bit_offset: Option<u64>,
    bit_offset: Option<i64>,
    member_location: Option<u64>,
    encoding: u8,
    declaration: bool,
    const_value: Option<i64>,
    const_str: Name<'a>,
    upper_bound: Option<u64>,
    count: Option<u64>,
    lower_bound: Option<u64>,
    /// `DW_AT_type` refers outside the unit.
    far_ref: bool,
    origin: DieRef,
    spec: DieRef,
    low_pc: Option<Val<'a>>,
    location: Option<Val<'a>>,
    has_const: bool,
    external: bool,
    artificial: bool,
    /// A non-zero `DW_AT_inline`.
    inline: bool,
    /// `DW_AT_calling_convention` is `DW_CC_nocall`.
    nocall: bool,
}

/// Children collected while their parent DIE is open; moved into the arena when it
/// closes.
#[derive(Default)]
struct Scratch<'a> {
    stack: Vec<Frame>,
    members: Vec<MemberDie<'a>>,
    enumerators: Vec<EnumeratorDie<'a>>,
    dims: Vec<u64>,
    params: Vec<ParamDie<'a>>,
    /// Pending `btf_type_tag` annotations of open pointers: (type index).
    ptr_tags: Vec<u32>,
    /// Pending `btf_decl_tag` values of open members.
    member_tags: Vec<Name<'a>>,
    /// Parameters of the open subprogram.
    fparams: Vec<FnParamDie<'a>>,
    /// Decl tags of the open subprogram (and its parameters) or variable.
    annots: Vec<AnnotDie<'a>>,
}

/// Parses unit `idx` of `dw` into `bump`. Units whose language is in `exclude`
/// yield an empty [`CuTypes`].
pub fn parse_cu<'a, 'i: 'a>(
    dw: &DwarfInput<'i>,
    idx: usize,
    bump: &'a Bump,
    exclude: &[u16],
) -> Result<CuTypes<'a>, crate::Error> {
    let mut acc = Acc::new(bump);
    let info = parse_cu_at(dw, idx, bump, exclude, Place::default(), &mut acc)?;
    Ok(acc.finish(info))
}

/// Parses units `units` of `dw` (an LTO build's group of units that refer to each
/// other, see [`super::lto`]) into `bump` as one unit, as pahole's merged unit holds
/// them: each unit's DIEs after the previous unit's, with every unit offset relative
/// to the group's start, so that references between the units resolve like
/// references within one. The units' DIEs go into one set of arrays, so that a
/// group costs what one unit of its size does. The language, address size and
/// producer are the first unit's, as in pahole's merged unit.
pub fn parse_group<'a, 'i: 'a>(
    dw: &DwarfInput<'i>,
    units: std::ops::Range<usize>,
    bump: &'a Bump,
    exclude: &[u16],
) -> Result<CuTypes<'a>, crate::Error> {
    let first = units.start;
    let start = dw.unit_start(first);
    let end = dw.unit_end(units.end - 1);
    if end - start > u32::MAX as u64 / 2 {
        return Err(dw.unit_error(
            first,
            format!(
                "units {}..{} refer to each other over more than 2 GB of .debug_info",
                units.start, units.end
            ),
        ));
    }
    let mut acc = Acc::new(bump);
    let mut info: Option<UnitInfo<'a>> = None;
    for idx in units {
        let place = Place {
            rebase: (dw.unit_start(idx) - start) as u32,
            group: (start, end),
        };
        let u = parse_cu_at(dw, idx, bump, exclude, place, &mut acc)?;
        match &mut info {
            None => info = Some(u),
            Some(first_info) => {
                if u.address_size != first_info.address_size {
                    return Err(dw.unit_error(idx, "address size differs from its group's"));
                }
                match (&first_info.locs, u.locs) {
                    (Some(a), Some(b)) if a.encoding != b.encoding => {
                        return Err(
                            dw.unit_error(idx, "DWARF version or format differs from its group's")
                        )
                    }
                    (None, Some(b)) => first_info.locs = Some(b),
                    _ => {}
                }
                first_info.loclists_start = first_info.loclists_start.min(u.loclists_start);
            }
        }
    }
    let info = info.expect("a group has a unit");
    Ok(acc.finish(info))
}

/// The arrays a unit's (or a group's) DIEs are parsed into.
struct Acc<'a> {
    offsets: BVec<'a, u32>,
    types: BVec<'a, TypeDie<'a>>,
    decl_tags: BVec<'a, DeclTagDie<'a>>,
    funcs: BVec<'a, FuncDie<'a>>,
    vars: BVec<'a, VarDie<'a>>,
    /// Composites with nested type DIEs: (index, index of the last nested type).
    nests: Vec<(u32, u32)>,
    bump: &'a Bump,
}

/// What a parsed unit says of itself besides its DIEs.
struct UnitInfo<'a> {
    language: u16,
    address_size: u8,
    producer_clang: bool,
    locs: Option<LocCtx<'a>>,
    loclists_start: u64,
}

impl<'a> Acc<'a> {
    fn new(bump: &'a Bump) -> Acc<'a> {
        Acc {
            offsets: BVec::new_in(bump),
            types: BVec::new_in(bump),
            decl_tags: BVec::new_in(bump),
            funcs: BVec::new_in(bump),
            vars: BVec::new_in(bump),
            nests: Vec::new(),
            bump,
        }
    }

    fn finish(mut self, info: UnitInfo<'a>) -> CuTypes<'a> {
        let order = self.emission_order();
        CuTypes {
            offsets: self.offsets.into_bump_slice(),
            types: self.types.into_bump_slice(),
            decl_tags: self.decl_tags.into_bump_slice(),
            language: info.language,
            address_size: info.address_size,
            producer_clang: info.producer_clang,
            funcs: self.funcs.into_bump_slice(),
            vars: self.vars.into_bump_slice(),
            locs: info.locs,
            loclists_start: info.loclists_start,
            order,
        }
    }

    /// pahole's order of the unit's types: DIE order, except that a composite
    /// comes right after the last type nested in it (dwarf_loader adds a struct's
    /// nested types while reading its children, then the struct). Empty when that
    /// is DIE order.
    fn emission_order(&mut self) -> &'a [u32] {
        if self.nests.is_empty() {
            return &[];
        }
        self.nests.sort_unstable();
        let mut out = BVec::with_capacity_in(self.types.len(), self.bump);
        // Composites waiting for their nested types: (index, last nested index);
        // ranges nest, so the innermost is on top.
        let mut waiting: Vec<(u32, u32)> = Vec::new();
        let mut next = self.nests.iter().peekable();
        for i in 0..self.types.len() as u32 {
            while waiting.last().is_some_and(|w| w.1 < i) {
                out.push(waiting.pop().expect("checked").0);
            }
            if next.peek().is_some_and(|n| n.0 == i) {
                waiting.push(*next.next().expect("peeked"));
            } else {
                out.push(i);
            }
        }
        while let Some(w) = waiting.pop() {
            out.push(w.0);
        }
        out.into_bump_slice()
    }
}

/// Parses unit `idx` into `acc`, after what is there already.
fn parse_cu_at<'a, 'i: 'a>(
    dw: &DwarfInput<'i>,
    idx: usize,
    bump: &'a Bump,
    exclude: &[u16],
    place: Place,
    acc: &mut Acc<'a>,
) -> Result<UnitInfo<'a>, crate::Error> {
    let header = dw.units[idx];
    let abbrevs = dw
        .dwarf
        .abbreviations(&header)
        .map_err(|e| dw.unit_error(idx, e))?;
    let entries = header
        .range_from(UnitOffset(header.header_size())..)
        .map_err(|e| dw.unit_error(idx, e))?;
    let encoding = header.encoding();
    let enc = UnitEnc::of(dw, encoding, place);
    let mut p = Parser {
        enc,
        abbrevs: &abbrevs,
        plans: Vec::new(),
        far_plans: HashMap::new(),
        base: header.header_size() as u32 + place.rebase,
        acc: std::mem::replace(acc, Acc::new(bump)),
        debug_addr: dw.input.section(".debug_addr"),
        addr_base: 0,
        loclists: dw.input.section(".debug_loclists"),
        loclists_base: 0,
        loc_min: Cell::new(u64::MAX),
    };
    let data = entries.slice();
    let RootAttrs {
        language,
        str_offsets_base,
        addr_base,
        loclists_base,
        producer,
    } = p.root(data).map_err(|e| dw.unit_error(idx, e))?;
    // Plans do not depend on the string offsets base: keep them.
    p.enc.str_offsets_base = str_offsets_base;
    let producer_clang = producer.is_some_and(|v| p.producer_is_clang(v));
    if exclude.contains(&language) {
        p.give_back(acc);
        return Ok(UnitInfo {
            language,
            address_size: encoding.address_size,
            producer_clang,
            locs: None,
            loclists_start: u64::MAX,
        });
    }
    p.addr_base = addr_base;
    p.loclists_base = loclists_base;
    let mut scratch = Scratch::default();
    let ran = p.run(data, &mut scratch);
    let loc_min = p.loc_min.get();
    p.give_back(acc);
    ran.map_err(|e| dw.unit_error(idx, e))?;
    Ok(UnitInfo {
        language,
        address_size: encoding.address_size,
        producer_clang,
        locs: Some(LocCtx {
            lists: dw.dwarf.locations,
            encoding,
            endian: if dw.input.is_little_endian() {
                gimli::RunTimeEndian::Little
            } else {
                gimli::RunTimeEndian::Big
            },
        }),
        loclists_start: if loclists_base != 0 {
            loclists_base
        } else {
            loc_min
        },
    })
}

struct Parser<'a, 'i, 'u> {
    enc: UnitEnc<'i>,
    abbrevs: &'u gimli::Abbreviations,
    /// Plans by abbreviation code (dense codes), built on first use.
    plans: Vec<Option<Plan>>,
    /// Plans for codes too large for `plans`.
    far_plans: HashMap<u64, Plan>,
    /// Unit offset of the first DIE (the unit header's size).
    base: u32,
    /// The arrays the DIEs go into (taken from the caller's, given back after).
    acc: Acc<'a>,
    /// `.debug_addr` and the unit's `DW_AT_addr_base`.
    debug_addr: &'i [u8],
    addr_base: u64,
    /// `.debug_loclists` and the unit's `DW_AT_loclists_base`.
    loclists: &'i [u8],
    loclists_base: u64,
    /// The lowest location list offset met (see `CuTypes::loclists_start`).
    loc_min: Cell<u64>,
}

/// The attributes of a unit's root DIE that reading its other DIEs needs.
#[derive(Default)]
struct RootAttrs<'i> {
    language: u16,
    str_offsets_base: u64,
    addr_base: u64,
    loclists_base: u64,
    /// `DW_AT_producer` as read (a strx form needs the string offsets base).
    producer: Option<(gimli::DwForm, &'i [u8])>,
}

/// Abbreviation codes below this get a slot in the dense plan table.
const DENSE_CODES: u64 = 1 << 16;

impl<'a, 'i: 'a> Parser<'a, 'i, '_> {
    /// The plan of abbreviation `code`.
    #[inline]
    fn plan(&mut self, code: u64) -> Result<&Plan, DieError> {
        let missing = || DieError(format!("unknown abbreviation code {code}"));
        if code < DENSE_CODES {
            let i = code as usize;
            if i >= self.plans.len() {
                self.plans.resize_with(i + 1, || None);
            }
            if self.plans[i].is_none() {
                let a = self.abbrevs.get(code).ok_or_else(missing)?;
                self.plans[i] = Some(Plan::new(a, &self.enc, is_needed));
            }
            Ok(self.plans[i].as_ref().expect("just built"))
        } else {
            if !self.far_plans.contains_key(&code) {
                let a = self.abbrevs.get(code).ok_or_else(missing)?;
                self.far_plans
                    .insert(code, Plan::new(a, &self.enc, is_needed));
            }
            Ok(&self.far_plans[&code])
        }
    }

    /// Reads the attributes of the unit's root DIE that the other DIEs depend on.
    fn root(&mut self, data: &'i [u8]) -> Result<RootAttrs<'i>, DieError> {
        let enc = self.enc;
        let mut c = Cur::new(data, enc.little);
        let mut r = RootAttrs::default();
        let code = c.uleb()?;
        if code == 0 {
            return Ok(r);
        }
        let abbrev = self
            .abbrevs
            .get(code)
            .ok_or_else(|| DieError(format!("unknown abbreviation code {code}")))?;
        for spec in abbrev.attributes() {
            let (name, form) = (spec.name(), spec.form());
            let implicit = spec.implicit_const_value().unwrap_or(0);
            let slot = match name {
                DW_AT_language => None,
                DW_AT_str_offsets_base => Some(&mut r.str_offsets_base),
                DW_AT_addr_base | DW_AT_GNU_addr_base => Some(&mut r.addr_base),
                DW_AT_loclists_base => Some(&mut r.loclists_base),
                DW_AT_producer => {
                    // Read once the string offsets base is known.
                    let at = c.pos();
                    enc.skip(&mut c, form)?;
                    r.producer = Some((form, &data[at..c.pos()]));
                    continue;
                }
                _ => {
                    enc.skip(&mut c, form)?;
                    continue;
                }
            };
            if let Val::U(v) = enc.read(&mut c, form, implicit)? {
                match slot {
                    Some(x) => *x = v,
                    None => r.language = v as u16,
                }
            }
        }
        Ok(r)
    }

    /// Whether the root's `DW_AT_producer` (`form`, its raw value) contains
    /// "clang", as pahole's `attr_producer_clang` asks.
    fn producer_is_clang(&self, (form, raw): (gimli::DwForm, &'i [u8])) -> bool {
        let mut c = Cur::new(raw, self.enc.little);
        match self.enc.read(&mut c, form, 0) {
            Ok(Val::Str(s)) => s.bytes().windows(5).any(|w| w == b"clang"),
            _ => false,
        }
    }

    /// Moves the parsed arrays back into `acc`.
    fn give_back(self, acc: &mut Acc<'a>) {
        *acc = self.acc;
    }

    /// The address at index `i` of the unit's `.debug_addr` table.
    fn addrx(&self, i: u64) -> Option<u64> {
        let size = self.enc.addr_size as u64;
        let at = usize::try_from(self.addr_base.checked_add(i.checked_mul(size)?)?).ok()?;
        let b = self.debug_addr.get(at..at.checked_add(size as usize)?)?;
        Some(read_uint(b, self.enc.little))
    }

    /// The `.debug_loclists` offset of location list `i` of the unit.
    fn loclistx(&self, i: u64) -> Option<u64> {
        let size = self.enc.offset_size as u64;
        let at = usize::try_from(self.loclists_base.checked_add(i.checked_mul(size)?)?).ok()?;
        let b = self.loclists.get(at..at.checked_add(size as usize)?)?;
        self.loclists_base
            .checked_add(read_uint(b, self.enc.little))
    }

    /// A `DW_AT_location` value as a parameter location.
    fn loc(&self, v: Option<Val<'a>>) -> LocDie<'a> {
        match v {
            Some(Val::Expr(e)) => LocDie::Expr(e),
            Some(Val::U(off)) => self.list_at(off),
            Some(Val::LocListX(i)) => self.loclistx(i).map_or(LocDie::None, |o| self.list_at(o)),
            _ => LocDie::None,
        }
    }

    fn list_at(&self, off: u64) -> LocDie<'a> {
        self.loc_min.set(self.loc_min.get().min(off));
        LocDie::List(off)
    }

    /// The address a variable's location expression starts with, if it starts
    /// with `DW_OP_addr` or `DW_OP_addrx` (pahole's `VSCOPE_GLOBAL`).
    fn var_addr(&self, v: Option<Val<'a>>) -> Option<u64> {
        let Some(Val::Expr(e)) = v else {
            return None;
        };
        let (&op, rest) = e.split_first()?;
        if op == DW_OP_addr.0 {
            let n = self.enc.addr_size as usize;
            Some(read_uint(rest.get(..n)?, self.enc.little))
        } else if op == DW_OP_addrx.0 || op == DW_OP_GNU_addr_index.0 {
            let mut c = Cur::new(rest, self.enc.little);
            self.addrx(c.uleb().ok()?)
        } else {
            None
        }
    }

    fn run(&mut self, data: &'i [u8], s: &mut Scratch<'a>) -> Result<(), DieError> {
        s.stack.clear();
        s.members.clear();
        s.enumerators.clear();
        s.dims.clear();
        s.params.clear();
        s.ptr_tags.clear();
        s.member_tags.clear();
        let enc = self.enc;
        let mut cursor = Cur::new(data, enc.little);
        let mut depth: isize = 0;
        while !cursor.is_empty() {
            let off = self.base + cursor.pos() as u32;
            let code = cursor.uleb()?;
            if code == 0 {
                depth -= 1;
                continue;
            }
            let (tag, has_children, fixed) = {
                let plan = self.plan(code)?;
                (plan.tag, plan.has_children, plan.fixed)
            };
            while s.stack.last().is_some_and(|f| f.depth >= depth) {
                let f = s.stack.pop().unwrap();
                self.close(f, s);
            }
            let parent = match s.stack.last() {
                Some(f) if f.depth == depth - 1 => f.kind,
                _ => FrameKind::Other,
            };
            let wanted = is_type_tag(tag)
                || matches!(
                    (parent, tag),
                    (FrameKind::Composite, DW_TAG_member)
                        | (FrameKind::Enum, DW_TAG_enumerator)
                        | (FrameKind::Array, DW_TAG_subrange_type)
                        | (FrameKind::Proto, DW_TAG_formal_parameter)
                        | (FrameKind::Proto, DW_TAG_unspecified_parameters)
                        | (FrameKind::Subprogram, DW_TAG_formal_parameter)
                        | (FrameKind::Subprogram, DW_TAG_unspecified_parameters)
                )
                || (depth == 1 && (tag == DW_TAG_subprogram || tag == DW_TAG_variable))
                || (tag.0 == DW_TAG_LLVM_ANNOTATION || tag.0 == DW_TAG_GNU_ANNOTATION)
                    && matches!(
                        parent,
                        FrameKind::Pointer
                            | FrameKind::Composite
                            | FrameKind::Typedef
                            | FrameKind::Member
                            | FrameKind::Subprogram
                            | FrameKind::FnParam
                            | FrameKind::Variable
                    );
            if !wanted {
                match fixed {
                    Some(n) => cursor.skip_bytes(n as usize)?,
                    None => {
                        let plan = self.plan(code)?;
                        plan.skip_all(&enc, &mut cursor)?;
                    }
                }
                if has_children {
                    s.stack.push(Frame {
                        depth,
                        kind: FrameKind::Other,
                        index: 0,
                        start: 0,
                        tag_start: 0,
                    });
                    depth += 1;
                }
                continue;
            }
            let mut a = Attrs::default();
            {
                let plan = self.plan(code)?;
                for op in plan.read_ops.iter() {
                    match *op {
                        Op::Skip(n) => cursor.skip_bytes(n as usize)?,
                        Op::SkipForm(form) => enc.skip(&mut cursor, form)?,
                        Op::Read(name, form, implicit) => {
                            let v = enc.read(&mut cursor, form, implicit)?;
                            take_attr(&mut a, name, v);
                        }
                    }
                }
            }
            if a.far_ref {
                // pahole merges such units (LTO builds) before encoding; we do not
                // yet, and will not guess: refuse rather than write wrong types.
                return Err(DieError(format!(
                    "DIE at unit offset {off:#x} refers to a type in another unit \
                     (DW_FORM_ref_addr/ref_sig8, as in LTO builds or type units): not supported"
                )));
            }
            let kind = self.handle(tag, parent, depth == 1, off, a, s);
            if has_children {
                let index = match kind {
                    FrameKind::Subprogram => self.acc.funcs.len() - 1,
                    FrameKind::Variable => self.acc.vars.len() - 1,
                    FrameKind::FnParam => {
                        // The parameter's index within its subprogram.
                        let sub = s.stack.last().map_or(0, |f| f.start as usize);
                        s.fparams.len() - 1 - sub
                    }
                    _ => self.acc.types.len().wrapping_sub(1),
                } as u32;
                let (start, tag_start) = match kind {
                    FrameKind::Composite => (s.members.len(), 0),
                    FrameKind::Enum => (s.enumerators.len(), 0),
                    FrameKind::Array => (s.dims.len(), 0),
                    FrameKind::Proto => (s.params.len(), 0),
                    FrameKind::Pointer => (0, s.ptr_tags.len()),
                    FrameKind::Member => (s.members.len() - 1, s.member_tags.len()),
                    FrameKind::Subprogram => (s.fparams.len(), s.annots.len()),
                    FrameKind::Variable => (0, s.annots.len()),
                    _ => (0, 0),
                };
                s.stack.push(Frame {
                    depth,
                    kind,
                    index,
                    start: start as u32,
                    tag_start: tag_start as u32,
                });
                depth += 1;
            }
        }
        while let Some(f) = s.stack.pop() {
            self.close(f, s);
        }
        Ok(())
    }

    fn push_type(&mut self, off: u32, t: TypeDie<'a>) {
        self.acc.offsets.push(off);
        self.acc.types.push(t);
    }

    /// Records one wanted DIE; returns the frame kind its children are read as.
    fn handle(
        &mut self,
        tag: DwTag,
        parent: FrameKind,
        top: bool,
        off: u32,
        a: Attrs<'a>,
        s: &mut Scratch<'a>,
    ) -> FrameKind {
        let ref_die = |kind| TypeDie::Ref {
            kind,
            name: a.name,
            ty: a.ty,
        };
        match tag {
            DW_TAG_base_type => {
                let byte_size = a.byte_size.unwrap_or(0) as u32;
                let bit_size = a.bit_size.map_or(byte_size.wrapping_mul(8), |b| b as u32);
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
            DW_TAG_pointer_type => {
                self.push_type(off, ref_die(RefKind::Pointer));
                FrameKind::Pointer
            }
            DW_TAG_const_type => {
                self.push_type(off, ref_die(RefKind::Const));
                FrameKind::Other
            }
            DW_TAG_volatile_type => {
                self.push_type(off, ref_die(RefKind::Volatile));
                FrameKind::Other
            }
            DW_TAG_restrict_type => {
                self.push_type(off, ref_die(RefKind::Restrict));
                FrameKind::Other
            }
            DW_TAG_atomic_type => {
                self.push_type(off, ref_die(RefKind::Alias));
                FrameKind::Other
            }
            DW_TAG_unspecified_type => {
                self.push_type(
                    off,
                    TypeDie::Ref {
                        kind: RefKind::Alias,
                        name: a.name,
                        ty: DieRef::VOID,
                    },
                );
                FrameKind::Other
            }
            DW_TAG_typedef => {
                self.push_type(off, ref_die(RefKind::Typedef));
                FrameKind::Typedef
            }
            DW_TAG_structure_type | DW_TAG_union_type | DW_TAG_class_type => {
                self.push_type(
                    off,
                    TypeDie::Composite {
                        is_union: tag == DW_TAG_union_type,
                        declaration: a.declaration,
                        name: a.name,
                        size: a.byte_size.unwrap_or(0) as u32,
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
                        size: a.byte_size.unwrap_or(0) as u32,
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
                s.members.push(MemberDie {
                    name: a.name,
                    ty: a.ty,
                    bit_offset: a
                        .data_bit_offset
                        .unwrap_or_else(|| a.member_location.unwrap_or(0).wrapping_mul(8)),
                    bit_size: a.bit_size.unwrap_or(0) as u32,
                    old_bit_offset: if a.data_bit_offset.is_none() {
                        a.bit_offset
                    } else {
                        None
                    },
                    byte_size: a.byte_size.unwrap_or(0) as u32,
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
        }
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
                s.ptr_tags.push(self.acc.types.len() as u32);
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
    fn close(&mut self, f: Frame, s: &mut Scratch<'a>) {
        let start = f.start as usize;
        match f.kind {
            FrameKind::Composite => {
                let last = self.acc.types.len() as u32 - 1;
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
                    let idx = (start - c.start as usize) as i32;
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
    }
}

/// Stores one decoded attribute in `a`.
#[inline]
fn take_attr<'a>(a: &mut Attrs<'a>, name: DwAt, v: Val<'a>) {
    match name {
        DW_AT_name => {
            if let Val::Str(s) = v {
                a.name = s;
            }
        }
        DW_AT_type => {
            a.ty = match v {
                Val::Ref(o) => DieRef(o as u32),
                Val::FarRef => {
                    a.far_ref = true;
                    DieRef::VOID
                }
                _ => DieRef::VOID,
            }
        }
        DW_AT_byte_size => a.byte_size = unsigned(v),
        DW_AT_bit_size => a.bit_size = unsigned(v),
        DW_AT_data_bit_offset => a.data_bit_offset = unsigned(v),
        DW_AT_bit_offset => {
            a.bit_offset = match v {
                Val::S(x) => Some(x),
                Val::U(x) => Some(x as i64),
                _ => None,
            }
        }
        DW_AT_data_member_location => {
            a.member_location = match v {
                Val::Expr(e) => plus_uconst(e),
                v => unsigned(v),
            }
        }
        DW_AT_encoding => {
            if let Val::U(e) = v {
                a.encoding = e as u8;
            }
        }
        DW_AT_declaration => a.declaration = matches!(v, Val::U(x) if x != 0),
        DW_AT_external => a.external = matches!(v, Val::U(x) if x != 0),
        DW_AT_artificial => a.artificial = matches!(v, Val::U(x) if x != 0),
        DW_AT_inline => a.inline = matches!(v, Val::U(x) if x != 0),
        DW_AT_calling_convention => {
            a.nocall = matches!(v, Val::U(x) if x == u64::from(DW_CC_nocall.0))
        }
        DW_AT_abstract_origin => {
            if let Val::Ref(o) = v {
                a.origin = DieRef(o as u32);
            }
        }
        DW_AT_specification => {
            if let Val::Ref(o) = v {
                a.spec = DieRef(o as u32);
            }
        }
        DW_AT_low_pc => a.low_pc = Some(v),
        DW_AT_location => a.location = Some(v),
        DW_AT_const_value => {
            a.has_const = true;
            match v {
                Val::U(x) => a.const_value = Some(x as i64),
                Val::S(x) => a.const_value = Some(x),
                Val::Str(s) => a.const_str = s,
                _ => {}
            }
        }
        DW_AT_upper_bound => a.upper_bound = unsigned(v),
        DW_AT_count => a.count = unsigned(v),
        DW_AT_lower_bound => a.lower_bound = unsigned(v),
        _ => {}
    }
}

/// A constant as unsigned (sdata reinterpreted); None for other shapes (bounds
/// given as expressions or references, i.e. VLAs, read as unknown).
#[inline]
fn unsigned(v: Val<'_>) -> Option<u64> {
    match v {
        Val::U(x) => Some(x),
        Val::S(x) => Some(x as u64),
        _ => None,
    }
}

/// The offset of a `DW_OP_plus_uconst N` member location expression.
fn plus_uconst(e: &[u8]) -> Option<u64> {
    let (&op, rest) = e.split_first()?;
    if op != DW_OP_plus_uconst.0 {
        return None;
    }
    let mut c = Cur::new(rest, true);
    c.uleb().ok()
}

/// The attributes [`Parser::take_attr`] uses.
#[inline]
fn is_needed(name: DwAt) -> bool {
    matches!(
        name,
        DW_AT_name
            | DW_AT_type
            | DW_AT_byte_size
            | DW_AT_bit_size
            | DW_AT_data_bit_offset
            | DW_AT_bit_offset
            | DW_AT_data_member_location
            | DW_AT_encoding
            | DW_AT_declaration
            | DW_AT_const_value
            | DW_AT_upper_bound
            | DW_AT_count
            | DW_AT_lower_bound
            | DW_AT_external
            | DW_AT_artificial
            | DW_AT_abstract_origin
            | DW_AT_specification
            | DW_AT_low_pc
            | DW_AT_location
            | DW_AT_inline
            | DW_AT_calling_convention
    )
}

/// The DIE tags that are types pahole encodes (or follows).
fn is_type_tag(tag: DwTag) -> bool {
    matches!(
        tag,
        DW_TAG_base_type
            | DW_TAG_pointer_type
            | DW_TAG_const_type
            | DW_TAG_volatile_type
            | DW_TAG_restrict_type
            | DW_TAG_atomic_type
            | DW_TAG_unspecified_type
            | DW_TAG_typedef
            | DW_TAG_structure_type
            | DW_TAG_union_type
            | DW_TAG_class_type
            | DW_TAG_enumeration_type
            | DW_TAG_array_type
            | DW_TAG_subroutine_type
    )
}
