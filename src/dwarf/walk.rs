//! The tree walk over one unit's DIEs (or an LTO group's): [`parse_cu`] reads every
//! DIE of the unit once (the raw bytes, skipping the attributes of DIEs we do not
//! need by the abbreviations' precomputed plans), keeps the stack of open DIEs, and
//! hands each DIE pahole encodes to `record.rs`; the arrays it fills become the
//! unit's [`CuTypes`].

use super::abbrev::{PlanCache, Plans};
use super::attrs::{take_attr, Attrs};
use super::die::{self, Cur, DieError, Place, UnitEnc, Val};
use super::error::DwarfErrorKind;
use super::plan::{Fast, MemberPlan, Op};
use super::types::{
    AnnotDie, CuTypes, DeclTagDie, DieRef, EnumeratorDie, FnParamDie, FuncDie, LocCtx, MemberDie,
    Name, ParamDie, TypeDie, VarDie, DW_TAG_GNU_ANNOTATION, DW_TAG_LLVM_ANNOTATION,
};
use super::DwarfInput;
use arena::Bump;
use bumpalo::collections::Vec as BVec;
use gimli::constants::*;
use gimli::UnitOffset;
use std::cell::Cell;

/// What an open DIE with children is, for interpreting its children.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum FrameKind {
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
pub(super) struct Frame {
    pub(super) depth: isize,
    pub(super) kind: FrameKind,
    /// Index in `types` of the DIE (for type frames).
    pub(super) index: u32,
    /// Start of this frame's entries in the scratch vector for its child kind.
    pub(super) start: u32,
    /// Start of this frame's pending type tags (pointers) / member decl tags.
    pub(super) tag_start: u32,
}

/// Children collected while their parent DIE is open; moved into the arena when it
/// closes.
#[derive(Default)]
pub(super) struct Scratch<'a> {
    pub(super) stack: Vec<Frame>,
    pub(super) members: Vec<MemberDie<'a>>,
    pub(super) enumerators: Vec<EnumeratorDie<'a>>,
    pub(super) dims: Vec<u64>,
    pub(super) params: Vec<ParamDie<'a>>,
    /// Pending `btf_type_tag` annotations of open pointers: (type index).
    pub(super) ptr_tags: Vec<u32>,
    /// Pending `btf_decl_tag` values of open members.
    pub(super) member_tags: Vec<Name<'a>>,
    /// Parameters of the open subprogram.
    pub(super) fparams: Vec<FnParamDie<'a>>,
    /// Decl tags of the open subprogram (and its parameters) or variable.
    pub(super) annots: Vec<AnnotDie<'a>>,
}

/// Parses unit `idx` of `dw` into `bump`. Units whose language is in `exclude`
/// yield an empty [`CuTypes`].
pub fn parse_cu<'a, 'i: 'a>(
    dw: &DwarfInput<'i>,
    idx: usize,
    bump: &'a Bump,
    exclude: &[u16],
    plans: &mut PlanCache,
) -> Result<CuTypes<'a>, crate::Error> {
    let mut acc = Acc::new(bump);
    acc.reserve_for(dw.unit_end(idx) - dw.unit_start(idx));
    let info = parse_cu_at(dw, idx, bump, exclude, Place::default(), &mut acc, plans)?;
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
    plans: &mut PlanCache,
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
    acc.reserve_for(end - start);
    let mut info: Option<UnitInfo<'a>> = None;
    for idx in units {
        let place = Place {
            // Below `end - start`, checked above.
            rebase: u32::try_from(dw.unit_start(idx) - start).expect("group span checked"),
            group: (start, end),
        };
        let u = parse_cu_at(dw, idx, bump, exclude, place, &mut acc, plans)?;
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
///
/// They are heap vectors, reserved for the unit's size ([`Acc::reserve_for`]),
/// which the unit's [`CuTypes`] then owns: grown in the arena, each doubling would
/// leave the old copy there (a bump arena frees nothing until it is reset), and
/// copying them into it at the end cost 1% of a run's instructions.
pub(super) struct Acc<'a> {
    pub(super) offsets: Vec<u32>,
    pub(super) types: Vec<TypeDie<'a>>,
    pub(super) decl_tags: Vec<DeclTagDie<'a>>,
    pub(super) funcs: Vec<FuncDie<'a>>,
    pub(super) vars: Vec<VarDie<'a>>,
    /// Composites with nested type DIEs: (index, index of the last nested type).
    pub(super) nests: Vec<(u32, u32)>,
    pub(super) bump: &'a Bump,
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
            offsets: Vec::new(),
            types: Vec::new(),
            decl_tags: Vec::new(),
            funcs: Vec::new(),
            vars: Vec::new(),
            nests: Vec::new(),
            bump,
        }
    }

    /// Room for the DIEs of `bytes` of `.debug_info`, so that the arrays seldom grow
    /// (each doubling copies the array: 1% of a run's cycles on the corpus vmlinux).
    /// The corpus vmlinux's units hold a type DIE per 44 bytes (median; 36 for the
    /// densest tenth, which a room of one per 40 bytes left growing: 0.9% of the
    /// instructions on the c1-clang kernel) and a function per 880: room for one
    /// per 24 and 256 bytes is seldom short, and what is not used is never touched.
    /// The arrays are made anew for each unit: their sizes are kept to few of the
    /// allocator's size classes ([`arena::classes`]).
    fn reserve_for(&mut self, bytes: u64) {
        let n = |per: u64| usize::try_from(bytes / per).unwrap_or(0);
        arena::classes::reserve(&mut self.offsets, n(24));
        arena::classes::reserve(&mut self.types, n(24));
        arena::classes::reserve(&mut self.funcs, n(256));
        arena::classes::reserve(&mut self.vars, n(256));
    }

    fn finish(mut self, info: UnitInfo<'a>) -> CuTypes<'a> {
        let order = self.emission_order();
        let bump = self.bump;
        CuTypes {
            buckets: super::types::index_buckets(&self.offsets, bump),
            offsets: self.offsets,
            types: self.types,
            decl_tags: self.decl_tags,
            language: info.language,
            address_size: info.address_size,
            producer_clang: info.producer_clang,
            funcs: self.funcs,
            vars: self.vars,
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
        for i in 0..idx32(self.types.len()) {
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
    cache: &mut PlanCache,
) -> Result<UnitInfo<'a>, crate::Error> {
    let header = dw.header(idx)?;
    let entries = header
        .range_from(UnitOffset(header.header_size())..)
        .map_err(|e| dw.dwarf_error(idx, None, e.into()))?;
    let encoding = header.encoding();
    let mut enc = UnitEnc::of(dw, encoding, place);
    // Unit offsets (rebased to the group's start) are kept as u32: the unit must
    // end below 4 GB of its group, so that no offset or reference into it truncates.
    let unit_len = header.length_including_self() as u64;
    let fits = u32::try_from(unit_len + u64::from(place.rebase)).is_ok();
    // The header lies inside the unit, so that sum fits too.
    let base = u32::try_from(header.header_size())
        .ok()
        .filter(|_| fits)
        .map(|h| h + place.rebase)
        .ok_or_else(|| {
            dw.dwarf_error(
                idx,
                None,
                DwarfErrorKind::TooLarge {
                    what: "unit length",
                    value: unit_len,
                },
            )
        })?;
    enc.unit_len = unit_len;
    let plans = cache
        .table(
            dw.input.section(".debug_abbrev"),
            header.debug_abbrev_offset().0 as u64,
            &enc,
            super::attrs::is_needed,
        )
        .map_err(|e| dw.dwarf_error(idx, None, e))?;
    let mut p = Parser {
        enc,
        plans: &plans,
        base,
        acc: std::mem::replace(acc, Acc::new(bump)),
        debug_addr: dw.input.section(".debug_addr"),
        addr_base: 0,
        loclists: dw.input.section(".debug_loclists"),
        loclists_base: 0,
        loc_min: Cell::new(u64::MAX),
        die: base,
    };
    let data = entries.slice();
    let RootAttrs {
        language,
        str_offsets_base,
        addr_base,
        loclists_base,
        producer,
    } = p.root(data).map_err(|e| p.error(dw, idx, e))?;
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
    let ran = p.run(data, &mut scratch).map_err(|e| p.error(dw, idx, e));
    let loc_min = p.loc_min.get();
    p.give_back(acc);
    ran?;
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

pub(super) struct Parser<'a, 'i, 'u> {
    pub(super) enc: UnitEnc<'i>,
    /// The unit's abbreviations.
    pub(super) plans: &'u Plans<'u>,
    /// Unit offset of the first DIE (the unit header's size).
    pub(super) base: u32,
    /// The arrays the DIEs go into (taken from the caller's, given back after).
    pub(super) acc: Acc<'a>,
    /// `.debug_addr` and the unit's `DW_AT_addr_base`.
    pub(super) debug_addr: &'i [u8],
    pub(super) addr_base: u64,
    /// `.debug_loclists` and the unit's `DW_AT_loclists_base`.
    pub(super) loclists: &'i [u8],
    pub(super) loclists_base: u64,
    /// The lowest location list offset met (see `CuTypes::loclists_start`).
    pub(super) loc_min: Cell<u64>,
    /// Unit offset (rebased) of the DIE being read, for errors.
    pub(super) die: u32,
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

/// A count of (or index into) a unit's arrays, as the u32 the records keep it in:
/// each entry comes from a DIE of its own, so there are fewer than the unit (or
/// group) has bytes, which fit u32 (checked in `parse_cu_at`).
#[allow(clippy::cast_possible_truncation)]
#[inline]
pub(super) fn idx32(n: usize) -> u32 {
    n as u32
}

impl<'a, 'i: 'a> Parser<'a, 'i, '_> {
    /// Reads the attributes of the unit's root DIE that the other DIEs depend on.
    fn root(&mut self, data: &'i [u8]) -> Result<RootAttrs<'i>, DieError> {
        let enc = self.enc;
        let mut c = Cur::new(data, enc.little);
        let mut r = RootAttrs::default();
        let code = c.uleb()?;
        if code == 0 {
            return Ok(r);
        }
        let decl = self.plans.decl(code)?;
        for spec in &decl.specs {
            let (name, form) = (spec.name, spec.form);
            let implicit = spec.implicit.unwrap_or(0);
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
                    None => {
                        r.language = u16::try_from(v).map_err(|_| DwarfErrorKind::TooLarge {
                            what: "DW_AT_language",
                            value: v,
                        })?
                    }
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

    /// Error `kind` in the DIE being read, with its place.
    fn error(&self, dw: &DwarfInput<'_>, idx: usize, kind: DwarfErrorKind) -> crate::Error {
        let in_unit = self.die - self.enc.place.rebase;
        dw.dwarf_error(idx, Some(u64::from(in_unit)), kind)
    }

    /// Moves the parsed arrays back into `acc`.
    fn give_back(self, acc: &mut Acc<'a>) {
        *acc = self.acc;
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
        let plans = self.plans;
        let mut cursor = Cur::new(data, enc.little);
        let mut depth: isize = 0;
        while !cursor.is_empty() {
            let off = self.mark_die(&cursor);
            let code = cursor.uleb()?;
            if code == 0 {
                depth -= 1;
                continue;
            }
            let head = plans.head(code)?;
            let (tag, has_children) = (head.tag, head.has_children);
            while s.stack.last().is_some_and(|f| f.depth >= depth) {
                let f = s.stack.pop().unwrap();
                self.close(f, s)?;
            }
            let parent = match s.stack.last() {
                Some(f) if f.depth == depth - 1 => f.kind,
                _ => FrameKind::Other,
            };
            if parent == FrameKind::Composite {
                if let (Some(m), Some(n)) = (head.member, head.fixed) {
                    if let Some(bytes) = cursor.peek(n as usize) {
                        // What the general path below makes of such a member.
                        s.members.push(self.fast_member(&m, bytes)?);
                        cursor.skip_bytes(n as usize)?;
                        continue;
                    }
                }
            }
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
                match head.fixed {
                    Some(n) => cursor.skip_bytes(n as usize)?,
                    None => plans.plan(head).skip_all(&enc, &mut cursor)?,
                }
                if has_children && depth >= 1 {
                    depth = self.skim_subtree(&mut cursor, depth)?;
                } else if has_children {
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
            for op in plans.plan(head).read_ops() {
                match *op {
                    Op::Skip(n) => cursor.skip_bytes(n as usize)?,
                    Op::SkipForm(form) => enc.skip(&mut cursor, form)?,
                    Op::Read(name, form, implicit) => {
                        let v = enc.read_fast(&mut cursor, form, implicit)?;
                        take_attr(&mut a, name, v)?;
                    }
                }
            }
            if a.far_ref {
                // pahole merges such units (LTO builds) before encoding; we do not
                // yet, and will not guess: refuse rather than write wrong types.
                return Err(DwarfErrorKind::FarTypeRef);
            }
            let kind = self.handle(tag, parent, depth == 1, off, a, s)?;
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
                };
                // A frame with no type yet (none pushed) keeps u32::MAX: never read.
                let index = u32::try_from(index).unwrap_or(u32::MAX);
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
                    start: idx32(start),
                    tag_start: idx32(tag_start),
                });
                depth += 1;
            }
        }
        while let Some(f) = s.stack.pop() {
            self.close(f, s)?;
        }
        Ok(())
    }
}

impl<'a, 'i: 'a> Parser<'a, 'i, '_> {
    /// Notes the DIE at `cursor` as the one being read (for errors), and returns its
    /// offset.
    #[inline]
    fn mark_die(&mut self, cursor: &Cur<'i>) -> u32 {
        // Below the unit's end, checked to fit u32 (parse_cu_at).
        #[allow(clippy::cast_possible_truncation)]
        let off = self.base + cursor.pos() as u32;
        self.die = off;
        off
    }

    /// Skips the children of an unwanted DIE at `depth` (one below the unit's DIE or
    /// deeper: a function's local variables, lexical blocks, inlined calls) and
    /// returns the depth the walk goes on at. Below such a DIE only type DIEs are
    /// wanted (a type declared inside a function): the skim stops before the first
    /// one, which the walk then reads at the depth returned, as it would have. The
    /// frames the walk would have pushed for the DIEs skimmed over are of no kind,
    /// which closing ignores and which a child's parent test reads as no parent, so
    /// none is pushed. Over the corpus vmlinux these children are most of the DIEs.
    #[inline(never)]
    fn skim_subtree(&mut self, cursor: &mut Cur<'i>, depth: isize) -> Result<isize, DieError> {
        let (enc, plans) = (self.enc, self.plans);
        let mut d = depth + 1;
        while !cursor.is_empty() {
            let at = *cursor;
            self.mark_die(cursor);
            let code = cursor.uleb()?;
            if code == 0 {
                d -= 1;
                if d == depth {
                    break;
                }
                continue;
            }
            let head = plans.head(code)?;
            if is_type_tag(head.tag) {
                *cursor = at;
                break;
            }
            match head.fixed {
                Some(n) => cursor.skip_bytes(n as usize)?,
                None => plans.plan(head).skip_all(&enc, cursor)?,
            }
            if head.has_children {
                d += 1;
            }
        }
        Ok(d)
    }

    /// The member whose attributes are `bytes`, laid out as `m` says: what reading
    /// them one by one gives (the same reads; no bit field, no other attribute).
    #[inline]
    fn fast_member(&self, m: &MemberPlan, bytes: &'i [u8]) -> Result<MemberDie<'a>, DieError> {
        let enc = &self.enc;
        // The plan's offsets lie within the DIE's fixed size, which `bytes` holds.
        let word = |at: u32, width: usize| {
            crate::elf::read_uint(&bytes[at as usize..][..width], enc.little)
        };
        let at = |at: u32| Cur::new(&bytes[at as usize..], enc.little);
        let mut name = Name::EMPTY;
        match m.name {
            // The common forms read straight, the others as any attribute is.
            Some((o, Fast::Strp4)) => name = die::str_at(enc.debug_str, word(o, 4))?,
            Some((o, form)) => {
                if let Val::Str(s) = enc.read_fast(&mut at(o), form, 0)? {
                    name = s;
                }
            }
            None => {}
        }
        let mut ty = DieRef::VOID;
        if let Some((o, form)) = m.ty {
            let v = match form {
                Fast::Ref4 => enc.local(word(o, 4))?,
                form => enc.read_fast(&mut at(o), form, 0)?,
            };
            if let Val::Ref(r) = v {
                ty = DieRef(r);
            }
        }
        let location = match m.location {
            Some((o, Fast::U1)) => word(o, 1),
            Some((o, Fast::U2)) => word(o, 2),
            Some((o, Fast::U4)) => word(o, 4),
            Some((o, Fast::U8)) => word(o, 8),
            Some((o, form)) => match enc.read_fast(&mut at(o), form, 0)? {
                Val::U(x) => x,
                _ => 0,
            },
            None => 0,
        };
        Ok(MemberDie {
            name,
            ty,
            bit_offset: location.checked_mul(8).ok_or(DwarfErrorKind::TooLarge {
                what: "DW_AT_data_member_location",
                value: location,
            })?,
            bit_size: 0,
            old_offset: 0,
            has_old_offset: false,
            byte_size: 0,
        })
    }
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
