//! The checks the kernel (`kernel/bpf/btf.c`: `btf_parse_hdr`, `btf_check_all_metas`,
//! `btf_check_all_types`, `btf_check_type_tags`) and libbpf make before they accept BTF.
//!
//! The reader already refuses what it cannot represent (short data, unknown kinds,
//! reserved bits, records running past the type section). The validator checks the
//! rest: the header layout, string offsets, names, type ids, sizes, member offsets and
//! bitfields, DATASEC entries, DECL_TAG targets and loops. It reports every problem it
//! finds, each naming the type id, so a bad encoder output is easy to pin down.
//!
//! Where the kernel's rule depends on the machine it runs on (pointer size), the
//! target's pointer size is guessed from the BTF as libbpf does (the size of `long`),
//! so 32-bit targets' BTF is checked with 4-byte pointers.

use super::*;
use std::fmt;

/// Largest type id the kernel accepts (`BTF_MAX_TYPE`).
pub const MAX_TYPE: u32 = 0x000f_ffff;
/// Largest string offset the kernel accepts (`BTF_MAX_NAME_OFFSET`).
pub const MAX_NAME_OFFSET: u32 = 0x00ff_ffff;
/// Longest name the kernel accepts (`KSYM_NAME_LEN`).
pub const MAX_NAME_LEN: usize = 512;
/// Pointer size assumed when the BTF has no `long` to tell (libbpf's fallback, its
/// own `sizeof(void *)` on a 64-bit host).
const DEFAULT_PTR_SIZE: u32 = 8;

/// libbpf's `determine_ptr_size`: the size of the first 4- or 8-byte INT named as
/// one of C's spellings of `long` / `unsigned long`, base types first; 8 if none.
/// (The kernel checks against its own `sizeof(void *)`, which is the target's.)
pub fn pointer_size(btf: &Btf) -> u32 {
    const LONGS: [&[u8]; 11] = [
        b"long",
        b"long int",
        b"int long",
        b"unsigned long",
        b"long unsigned",
        b"unsigned long int",
        b"unsigned int long",
        b"long unsigned int",
        b"long int unsigned",
        b"int unsigned long",
        b"int long unsigned",
    ];
    (1..=btf.type_count())
        .filter_map(|i| btf.get(TypeId(i)))
        .find_map(|t| match t.kind {
            TypeKind::Int {
                size: size @ (4 | 8),
                ..
            } if btf.str_bytes(t.name).is_some_and(|n| LONGS.contains(&n)) => Some(size),
            _ => None,
        })
        .unwrap_or(DEFAULT_PTR_SIZE)
}

/// One reason a BTF blob is invalid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The offending type, or None for a problem with the header or string section.
    pub id: Option<TypeId>,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.id {
            Some(id) => write!(f, "type [{id}]: {}", self.what),
            None => f.write_str(&self.what),
        }
    }
}

/// Checks the layout of a raw BTF blob's header the way the kernel does: the type
/// section first at offset 0, the string section right after it and running to the
/// end of the data, no gaps. (The reader has already checked magic, version, flags,
/// the header length and that both sections lie inside the data.)
pub fn check_layout(data: &[u8]) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut bad = |what: String| out.push(Problem { id: None, what });
    if data.len() < read::HEADER_LEN {
        bad(format!("{} bytes, shorter than the BTF header", data.len()));
        return out;
    }
    let big = data[0] == 0xeb;
    let word = |at: usize| {
        let b = [data[at], data[at + 1], data[at + 2], data[at + 3]];
        if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let (hdr_len, type_off, type_len, str_off, str_len) = (
        word(4) as u64,
        word(8),
        word(12) as u64,
        word(16) as u64,
        word(20) as u64,
    );
    // A header of either byte order may be longer than the classic 24 bytes (libbpf
    // ≥ 1.8 swaps its layout words too); the reader has refused a shorter one.
    if type_off != 0 {
        bad(format!(
            "type section at offset {type_off}, not right after the header"
        ));
    }
    if str_off != type_off as u64 + type_len {
        bad(format!(
            "string section at offset {str_off}, not right after the type section ({})",
            type_off as u64 + type_len
        ));
    }
    let total = hdr_len + type_len + str_len;
    if total != data.len() as u64 {
        bad(format!(
            "header, types and strings make {total} bytes but the data is {} bytes",
            data.len()
        ));
    }
    out
}

/// Checks a parsed BTF (its own types; a split BTF's base is assumed valid) and
/// returns every problem found, in type id order.
pub fn validate(btf: &Btf) -> Vec<Problem> {
    let ptr_size = pointer_size(btf);
    let mut v = Validator {
        btf,
        out: Vec::new(),
        cur: TypeId(0),
        chains: super::chains::Chains::new(btf, ptr_size),
        ptr_size,
    };
    v.check_strings();
    v.check_metas();
    v.check_types();
    v.check_loops();
    v.check_type_tags();
    v.out
}

/// Validates `btf` and returns Ok, or the problems as a [`BtfError::Invalid`].
pub fn check(btf: &Btf) -> Result<(), BtfError> {
    let problems = validate(btf);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(BtfError::Invalid(problems))
    }
}

/// Reads and validates a raw BTF blob: structure, header layout and types.
pub fn parse_checked(data: &[u8], base: Option<Arc<Btf>>) -> Result<Btf, BtfError> {
    let btf = read::parse(data, base)?;
    let mut problems = check_layout(data);
    problems.extend(validate(&btf));
    if problems.is_empty() {
        Ok(btf)
    } else {
        Err(BtfError::Invalid(problems))
    }
}

/// A type after following modifiers, with the size the kernel gives it.
enum Resolved<'a> {
    /// `void` (id 0).
    Void,
    /// A type with a size (INT, PTR, ARRAY, STRUCT, UNION, ENUM, ENUM64, FLOAT).
    Sized(&'a Type, u32),
    /// A type without a size (FWD, FUNC, FUNC_PROTO, VAR, DATASEC, DECL_TAG).
    Unsized(&'a Type),
    /// A dangling id, a modifier loop or an array whose size overflows.
    Broken,
}

struct Validator<'a> {
    btf: &'a Btf,
    out: Vec<Problem>,
    /// The type being checked.
    cur: TypeId,
    /// Chain ends and array sizes, computed once for all types.
    chains: super::chains::Chains,
    /// The target's pointer size ([`pointer_size`]).
    ptr_size: u32,
}

/// `btf_name_valid_identifier`: a C identifier of at most `MAX_NAME_LEN` bytes.
fn valid_identifier(s: &[u8]) -> bool {
    match s.first() {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return false,
    }
    s.len() <= MAX_NAME_LEN && s.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// `btf_name_valid_section`: non-empty, printable ASCII, at most `MAX_NAME_LEN` bytes.
fn valid_section_name(s: &[u8]) -> bool {
    !s.is_empty() && s.len() <= MAX_NAME_LEN && s.iter().all(|c| (0x20..0x7f).contains(c))
}

/// "member #i 'name'" for messages, formatted only when a problem is reported.
struct MemberAt<'b>(&'b Btf, usize, StrOffset);

impl fmt::Display for MemberAt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "member #{} '{}'", self.1, show(self.0, self.2))
    }
}

/// A name for a message (lossy; `?` if the offset is bad).
fn show(btf: &Btf, off: StrOffset) -> String {
    String::from_utf8_lossy(btf.str_bytes(off).unwrap_or(b"?")).into_owned()
}

fn bits_roundup_bytes(bits: u64) -> u64 {
    bits.div_ceil(8)
}

/// `btf_type_int_is_regular`: whole bytes (1, 2, 4, 8 or 16), no bit offset.
fn int_is_regular(bits: u8, offset: u8) -> bool {
    bits.is_multiple_of(8) && offset == 0 && matches!(bits / 8, 1 | 2 | 4 | 8 | 16)
}

impl<'a> Validator<'a> {
    fn problem(&mut self, what: impl Into<String>) {
        self.out.push(Problem {
            id: Some(self.cur),
            what: what.into(),
        });
    }

    fn name(&self, off: StrOffset) -> Option<&'a [u8]> {
        self.btf.str_bytes(off)
    }

    fn show(&self, off: StrOffset) -> String {
        show(self.btf, off)
    }

    /// `btf_name_offset_valid`.
    fn offset_valid(&self, off: StrOffset) -> bool {
        off.0 <= MAX_NAME_OFFSET && off.0 < self.btf.str_end()
    }

    fn check_strings(&mut self) {
        let own = self.btf.strings().len() as u64;
        if own > 0 && own - 1 > MAX_NAME_OFFSET as u64 {
            self.out.push(Problem {
                id: None,
                what: format!("string section of {own} bytes is larger than 16 MiB"),
            });
        }
        if self.btf.base().is_none() && self.btf.types().is_empty() {
            self.out.push(Problem {
                id: None,
                what: "no types (the kernel refuses a base BTF without types)".into(),
            });
        }
        if self.btf.type_count() >= MAX_TYPE {
            self.out.push(Problem {
                id: None,
                what: format!(
                    "{} types, more than the kernel's limit of {}",
                    self.btf.type_count(),
                    MAX_TYPE - 1
                ),
            });
        }
    }

    /// Checks a type id a record refers to: in range of the kernel's limit and of
    /// this BTF. `what` names the field.
    fn check_ref(&mut self, id: TypeId, what: impl Fn() -> String, void_ok: bool) {
        if id.0 == 0 {
            if !void_ok {
                self.problem(format!("{} is void (type id 0)", what()));
            }
        } else if id.0 > self.btf.type_count() || id.0 > MAX_TYPE {
            self.problem(format!(
                "{} refers to type id {id}, past the last type {}",
                what(),
                self.btf.type_count()
            ));
        }
    }

    /// Per-record checks (`btf_check_meta` and the kinds' `check_meta`).
    fn check_metas(&mut self) {
        let first = self.btf.first_id().0;
        for (i, t) in self.btf.types().iter().enumerate() {
            self.cur = TypeId(first + i as u32);
            self.check_meta(t);
        }
    }

    fn check_meta(&mut self, t: &'a Type) {
        if !self.offset_valid(t.name) {
            self.problem(format!(
                "name offset {} is past the string section (ends at {})",
                t.name.0,
                self.btf.str_end()
            ));
            return;
        }
        let name = self.name(t.name).unwrap_or(b"");
        let kind = t.kind();
        let kname = kind.name();
        match &t.kind {
            TypeKind::Int {
                size,
                encoding,
                offset,
                bits,
            } => {
                let nr_bits = *bits as u32 + *offset as u32;
                if nr_bits > 128 {
                    self.problem(format!("INT bits_offset + nr_bits = {nr_bits} exceeds 128"));
                } else if bits_roundup_bytes(nr_bits as u64) > *size as u64 {
                    self.problem(format!("INT nr_bits {nr_bits} exceed its size {size}"));
                }
                if !matches!(*encoding, 0 | INT_SIGNED | INT_CHAR | INT_BOOL) {
                    self.problem(format!("INT encoding {encoding:#x} (more than one bit)"));
                }
            }
            TypeKind::Ptr(r)
            | TypeKind::Volatile(r)
            | TypeKind::Const(r)
            | TypeKind::Restrict(r)
            | TypeKind::Typedef(r)
            | TypeKind::TypeTag { type_id: r, .. } => {
                match kind {
                    Kind::Typedef if !valid_identifier(name) => {
                        self.problem(format!(
                            "TYPEDEF name '{}' is not a valid identifier",
                            self.show(t.name)
                        ));
                    }
                    Kind::TypeTag if name.is_empty() => self.problem("TYPE_TAG without a value"),
                    Kind::Typedef | Kind::TypeTag => {}
                    _ if t.name != StrOffset::EMPTY => {
                        self.problem(format!("{kname} must be anonymous"))
                    }
                    _ => {}
                }
                self.check_ref(*r, || "target".into(), true);
            }
            TypeKind::Array {
                elem_type,
                index_type,
                ..
            } => {
                if t.name != StrOffset::EMPTY {
                    self.problem("ARRAY must be anonymous");
                }
                self.check_ref(*elem_type, || "element type".into(), false);
                self.check_ref(*index_type, || "index type".into(), false);
            }
            TypeKind::Struct(c) | TypeKind::Union(c) => self.check_composite_meta(t, c, name),
            TypeKind::Enum { size, values, .. } => {
                self.check_enum_meta(*size, name, values.iter().map(|v| v.name))
            }
            TypeKind::Enum64 { size, values, .. } => {
                self.check_enum_meta(*size, name, values.iter().map(|v| v.name))
            }
            TypeKind::Fwd { .. } => {
                if !valid_identifier(name) {
                    self.problem(format!(
                        "FWD name '{}' is not a valid identifier",
                        self.show(t.name)
                    ));
                }
            }
            TypeKind::Func { proto, linkage } => {
                if !valid_identifier(name) {
                    self.problem(format!(
                        "FUNC name '{}' is not a valid identifier",
                        self.show(t.name)
                    ));
                }
                if *linkage > FUNC_GLOBAL {
                    self.problem(format!(
                        "FUNC linkage {linkage} (the kernel takes static 0 or global 1)"
                    ));
                }
                self.check_ref(*proto, || "prototype".into(), false);
            }
            TypeKind::FuncProto { ret, params } => {
                if t.name != StrOffset::EMPTY {
                    self.problem("FUNC_PROTO must be anonymous");
                }
                self.check_ref(*ret, || "return type".into(), true);
                for (i, p) in params.iter().enumerate() {
                    if !self.offset_valid(p.name) {
                        self.problem(format!(
                            "parameter #{} name offset {} is past the string section",
                            i + 1,
                            p.name.0
                        ));
                    } else if p.name != StrOffset::EMPTY
                        && !valid_identifier(self.name(p.name).unwrap_or(b""))
                    {
                        self.problem(format!(
                            "parameter #{} name '{}' is not a valid identifier",
                            i + 1,
                            self.show(p.name)
                        ));
                    }
                    self.check_ref(p.type_id, || format!("parameter #{}", i + 1), true);
                }
            }
            TypeKind::Var { type_id, linkage } => {
                if !valid_identifier(name) {
                    self.problem(format!(
                        "VAR name '{}' is not a valid identifier",
                        self.show(t.name)
                    ));
                }
                self.check_ref(*type_id, || "type".into(), false);
                if *linkage != VAR_STATIC && *linkage != VAR_GLOBAL_ALLOCATED {
                    self.problem(format!(
                        "VAR linkage {linkage} (the kernel takes static 0 or global 1)"
                    ));
                }
            }
            TypeKind::Datasec { size, entries } => {
                if *size == 0 {
                    self.problem("DATASEC of size 0");
                }
                if !valid_section_name(name) {
                    self.problem(format!(
                        "DATASEC name '{}' is empty or not printable",
                        self.show(t.name)
                    ));
                }
                let mut last_end = 0u64;
                let mut sum = 0u64;
                let mut prev: Option<&VarSecInfo> = None;
                for (i, e) in entries.iter().enumerate() {
                    let at = || format!("entry #{} (type {}, offset {})", i, e.type_id, e.offset);
                    self.check_ref(e.type_id, at, false);
                    // pahole's global_var mode emits a variable defined in several CUs
                    // once per CU, all at the same address: the same offset and size
                    // as the entry before, naming a VAR of the same name. The kernel
                    // would refuse it, but it is pahole's output, which we must accept.
                    let duplicate = prev.is_some_and(|p| {
                        p.offset == e.offset && p.size == e.size && self.same_var_name(p, e)
                    });
                    prev = Some(e);
                    if duplicate {
                        continue;
                    }
                    if (e.offset as u64) < last_end || e.offset >= *size {
                        self.problem(format!(
                            "{}: offset overlaps the previous entry or is past the \
                             section size {size}",
                            at()
                        ));
                    }
                    if e.size == 0 || e.size > *size {
                        self.problem(format!(
                            "{}: size {} is 0 or past the section",
                            at(),
                            e.size
                        ));
                    }
                    last_end = e.offset as u64 + e.size as u64;
                    if last_end > *size as u64 {
                        self.problem(format!(
                            "{}: ends at {last_end}, past the section size {size}",
                            at()
                        ));
                    }
                    sum += e.size as u64;
                }
                if sum > *size as u64 {
                    self.problem(format!(
                        "entries total {sum} bytes, more than the size {size}"
                    ));
                }
            }
            TypeKind::Float { size } => {
                if !matches!(size, 2 | 4 | 8 | 12 | 16) {
                    self.problem(format!("FLOAT of size {size} (must be 2, 4, 8, 12 or 16)"));
                }
            }
            TypeKind::DeclTag {
                type_id,
                component_idx,
                ..
            } => {
                if name.is_empty() {
                    self.problem("DECL_TAG without a value");
                }
                if *component_idx < -1 {
                    self.problem(format!(
                        "DECL_TAG component_idx {component_idx} is below -1"
                    ));
                }
                self.check_ref(*type_id, || "target".into(), false);
            }
        }
    }

    /// Whether two DATASEC entries name VARs with the same name.
    fn same_var_name(&self, a: &VarSecInfo, b: &VarSecInfo) -> bool {
        let var_name = |e: &VarSecInfo| match self.btf.get(e.type_id) {
            Some(
                t @ Type {
                    kind: TypeKind::Var { .. },
                    ..
                },
            ) => self.name(t.name),
            _ => None,
        };
        matches!((var_name(a), var_name(b)), (Some(x), Some(y)) if x == y)
    }

    fn check_composite_meta(&mut self, t: &Type, c: &Composite, name: &[u8]) {
        let kname = t.kind().name();
        if t.name != StrOffset::EMPTY && !valid_identifier(name) {
            self.problem(format!(
                "{kname} name '{}' is not a valid identifier",
                self.show(t.name)
            ));
        }
        let is_union = t.kind() == Kind::Union;
        let mut last = 0u32;
        for (i, m) in c.members.iter().enumerate() {
            if !self.offset_valid(m.name) {
                self.problem(format!(
                    "member #{i} name offset {} is past the string section",
                    m.name.0
                ));
                continue;
            }
            let btf = self.btf;
            let mname = || show(btf, m.name);
            if m.name != StrOffset::EMPTY && !valid_identifier(self.name(m.name).unwrap_or(b"")) {
                self.problem(format!(
                    "member #{i} name '{}' is not a valid identifier",
                    mname()
                ));
            }
            self.check_ref(m.type_id, || format!("member '{}'", mname()), false);
            let off = m.bit_offset(c.kflag);
            if is_union && off != 0 {
                self.problem(format!(
                    "UNION member '{}' at bit offset {off}, not 0",
                    mname()
                ));
            }
            if last > off {
                self.problem(format!(
                    "member '{}' at bit offset {off} is before the previous member ({last})",
                    mname()
                ));
            }
            if bits_roundup_bytes(off as u64) > c.size as u64 {
                self.problem(format!(
                    "member '{}' bit offset {off} is past the {kname} size {}",
                    mname(),
                    c.size
                ));
            }
            last = off;
        }
    }

    fn check_enum_meta(&mut self, size: u32, name: &[u8], values: impl Iterator<Item = StrOffset>) {
        if !matches!(size, 1 | 2 | 4 | 8) {
            self.problem(format!("enum of size {size} (must be 1, 2, 4 or 8)"));
        }
        if !name.is_empty() && !valid_identifier(name) {
            self.problem(format!(
                "enum name '{}' is not a valid identifier",
                String::from_utf8_lossy(name)
            ));
        }
        for (i, v) in values.enumerate() {
            if !self.offset_valid(v) {
                self.problem(format!(
                    "enumerator #{i} name offset {} is past the string section",
                    v.0
                ));
            } else if !valid_identifier(self.name(v).unwrap_or(b"")) {
                self.problem(format!(
                    "enumerator #{i} name '{}' is not a valid identifier",
                    self.show(v)
                ));
            }
        }
    }

    /// Follows modifiers from `id` to a type with or without a size, as the kernel's
    /// `btf_type_id_size` (with arrays sized as `__btf_resolve_size`).
    fn resolve(&self, id: TypeId) -> Resolved<'a> {
        // Memoised: walking each type's chain from scratch is quadratic in its length.
        let end = self.chains.end(id);
        if end == 0 {
            return Resolved::Void;
        }
        if end == super::chains::BROKEN {
            // A dangling id or a modifier loop (the loop check names it).
            return Resolved::Broken;
        }
        let Some(t) = self.btf.get(TypeId(end)) else {
            return Resolved::Broken;
        };
        match &t.kind {
            TypeKind::Ptr(_) => Resolved::Sized(t, self.ptr_size),
            TypeKind::Array { .. } => match self.chains.array_size(TypeId(end)) {
                Some(s) => Resolved::Sized(t, s),
                None => Resolved::Broken,
            },
            _ => match t.kind.size() {
                Some(s) if t.kind() != Kind::Datasec => Resolved::Sized(t, s),
                _ => Resolved::Unsized(t),
            },
        }
    }

    /// Checks that need other types (`btf_check_all_types`: the kinds' `resolve`, the
    /// member checks and `btf_func_proto_check`).
    fn check_types(&mut self) {
        let first = self.btf.first_id().0;
        for (i, t) in self.btf.types().iter().enumerate() {
            self.cur = TypeId(first + i as u32);
            self.check_type(t);
        }
    }

    fn is_source_only(&self, id: TypeId) -> bool {
        matches!(
            self.btf.get(id).map(Type::kind),
            Some(Kind::Var | Kind::Datasec)
        )
    }

    fn check_type(&mut self, t: &'a Type) {
        match &t.kind {
            TypeKind::Ptr(r)
            | TypeKind::Volatile(r)
            | TypeKind::Const(r)
            | TypeKind::Restrict(r)
            | TypeKind::Typedef(r)
            | TypeKind::TypeTag { type_id: r, .. } => {
                if self.is_source_only(*r) {
                    self.problem(format!("target {r} is a VAR or DATASEC"));
                    return;
                }
                match self.resolve(*r) {
                    Resolved::Void | Resolved::Sized(..) | Resolved::Broken => {}
                    Resolved::Unsized(rt) => {
                        if !matches!(rt.kind(), Kind::Fwd | Kind::FuncProto) {
                            self.problem(format!(
                                "target {r} resolves to a {} (no size)",
                                rt.kind().name()
                            ));
                        }
                    }
                }
            }
            TypeKind::Array {
                elem_type,
                index_type,
                nelems,
            } => self.check_array(*elem_type, *index_type, *nelems),
            TypeKind::Struct(c) | TypeKind::Union(c) => {
                for (i, m) in c.members.iter().enumerate() {
                    self.check_member(t, c, i, m);
                }
            }
            TypeKind::Func { proto, .. } => match self.btf.get(*proto) {
                Some(Type {
                    kind: TypeKind::FuncProto { params, .. },
                    ..
                }) => {
                    for (i, p) in params.iter().enumerate() {
                        if p.name == StrOffset::EMPTY && p.type_id != TypeId::VOID {
                            self.problem(format!(
                                "parameter #{} of its prototype {proto} has no name",
                                i + 1
                            ));
                        }
                    }
                }
                Some(other) => self.problem(format!(
                    "prototype {proto} is a {}, not a FUNC_PROTO",
                    other.kind().name()
                )),
                None => {}
            },
            TypeKind::FuncProto { ret, params } => self.check_proto(*ret, params),
            TypeKind::Var { type_id, .. } => {
                if self.is_source_only(*type_id) {
                    self.problem(format!("type {type_id} is a VAR or DATASEC"));
                } else if let Resolved::Void | Resolved::Unsized(..) = self.resolve(*type_id) {
                    self.problem(format!("type {type_id} has no size"));
                }
            }
            TypeKind::Datasec { entries, .. } => {
                for (i, e) in entries.iter().enumerate() {
                    match self.btf.get(e.type_id) {
                        Some(Type {
                            kind: TypeKind::Var { type_id, .. },
                            ..
                        }) => {
                            if let Resolved::Sized(_, sz) = self.resolve(*type_id) {
                                if e.size < sz {
                                    self.problem(format!(
                                        "entry #{i}: size {} is smaller than its VAR's type ({sz})",
                                        e.size
                                    ));
                                }
                            }
                        }
                        Some(other) => self.problem(format!(
                            "entry #{i}: type {} is a {}, not a VAR",
                            e.type_id,
                            other.kind().name()
                        )),
                        None => {}
                    }
                }
            }
            TypeKind::DeclTag {
                type_id,
                component_idx,
                ..
            } => self.check_decl_tag(*type_id, *component_idx),
            TypeKind::Int { .. }
            | TypeKind::Enum { .. }
            | TypeKind::Enum64 { .. }
            | TypeKind::Fwd { .. }
            | TypeKind::Float { .. } => {}
        }
    }

    fn check_array(&mut self, elem: TypeId, index: TypeId, nelems: u32) {
        if elem.0 == 0 || index.0 == 0 {
            return; // reported by check_meta
        }
        if self.is_source_only(index) {
            self.problem("index type is a VAR or DATASEC");
        } else {
            match self.resolve(index) {
                Resolved::Sized(
                    Type {
                        kind: TypeKind::Int { bits, offset, .. },
                        ..
                    },
                    _,
                ) if int_is_regular(*bits, *offset) => {}
                Resolved::Broken => {}
                _ => self.problem(format!("index type {index} is not a whole-byte INT")),
            }
        }
        if self.is_source_only(elem) {
            self.problem("element type is a VAR or DATASEC");
            return;
        }
        match self.resolve(elem) {
            Resolved::Sized(et, size) => {
                if let TypeKind::Int { bits, offset, .. } = et.kind {
                    if !int_is_regular(bits, offset) {
                        self.problem(format!("element type {elem} is a bitfield-like INT"));
                    }
                }
                if nelems != 0 && size > u32::MAX / nelems {
                    self.problem(format!("{nelems} elements of {size} bytes overflow 4 GiB"));
                }
            }
            Resolved::Broken => {}
            Resolved::Void | Resolved::Unsized(..) => {
                self.problem(format!("element type {elem} has no size"))
            }
        }
    }

    /// The kernel's `check_member` / `check_kflag_member` for one member.
    fn check_member(&mut self, t: &Type, c: &Composite, i: usize, m: &Member) {
        if m.type_id.0 == 0 || self.btf.get(m.type_id).is_none() {
            return; // reported by check_meta
        }
        let at = MemberAt(self.btf, i, m.name);
        if self.is_source_only(m.type_id) {
            self.problem(format!("{at}: type {} is a VAR or DATASEC", m.type_id));
            return;
        }
        let (rt, size) = match self.resolve(m.type_id) {
            Resolved::Sized(rt, size) => (rt, size),
            Resolved::Broken => return,
            Resolved::Void | Resolved::Unsized(..) => {
                self.problem(format!("{at}: type {} has no size", m.type_id));
                return;
            }
        };
        let ssize = c.size as u64;
        let bit_off = m.bit_offset(c.kflag) as u64;
        let bf = m.bitfield_size(c.kflag) as u64;
        let exceeds = |end_bytes: u64| end_bytes > ssize;
        let kname = t.kind().name();
        match &rt.kind {
            TypeKind::Int { bits, offset, .. } => {
                let (bits, offset) = (*bits as u64, *offset as u64);
                if c.kflag {
                    if !int_is_regular(bits as u8, offset as u8) {
                        self.problem(format!("{at}: base INT is not whole bytes"));
                        return;
                    }
                    let nr_bits = if bf == 0 {
                        if !bit_off.is_multiple_of(8) {
                            self.problem(format!("{at}: bit offset {bit_off} is not byte aligned"));
                            return;
                        }
                        bits
                    } else if bf > bits {
                        self.problem(format!(
                            "{at}: bitfield size {bf} is wider than its INT ({bits} bits)"
                        ));
                        return;
                    } else {
                        bf
                    };
                    let copy = nr_bits + bit_off % 8;
                    if copy > 128 {
                        self.problem(format!("{at}: bitfield spans more than 128 bits"));
                    } else if exceeds(bit_off / 8 + bits_roundup_bytes(copy)) {
                        self.problem(format!("{at}: runs past the {kname} size {ssize}"));
                    }
                } else {
                    let off = bit_off + offset;
                    let copy = bits + off % 8;
                    if copy > 128 {
                        self.problem(format!("{at}: bitfield spans more than 128 bits"));
                    } else if exceeds(off / 8 + bits_roundup_bytes(copy)) {
                        self.problem(format!("{at}: runs past the {kname} size {ssize}"));
                    }
                }
            }
            TypeKind::Enum { .. } | TypeKind::Enum64 { .. } if c.kflag => {
                let nr_bits = if bf == 0 {
                    if !bit_off.is_multiple_of(8) {
                        self.problem(format!("{at}: bit offset {bit_off} is not byte aligned"));
                        return;
                    }
                    32
                } else if bf > 32 {
                    self.problem(format!("{at}: enum bitfield size {bf} is wider than 32"));
                    return;
                } else {
                    bf
                };
                if exceeds(bits_roundup_bytes(bit_off + nr_bits)) {
                    self.problem(format!("{at}: runs past the {kname} size {ssize}"));
                }
            }
            TypeKind::Float { size: fsize } => {
                if bf != 0 {
                    self.problem(format!("{at}: FLOAT member with bitfield size {bf}"));
                    return;
                }
                let align_bits = (self.ptr_size.min(*fsize) as u64) * 8;
                if align_bits == 0 || !bit_off.is_multiple_of(align_bits) {
                    self.problem(format!("{at}: FLOAT at bit offset {bit_off} is misaligned"));
                } else if exceeds(bit_off / 8 + *fsize as u64) {
                    self.problem(format!("{at}: runs past the {kname} size {ssize}"));
                }
            }
            _ => {
                // PTR, ARRAY, STRUCT, UNION and (without kflag) ENUM members.
                if bf != 0 {
                    self.problem(format!(
                        "{at}: {} member with bitfield size {bf}",
                        rt.kind().name()
                    ));
                    return;
                }
                if !bit_off.is_multiple_of(8) {
                    self.problem(format!("{at}: bit offset {bit_off} is not byte aligned"));
                } else if exceeds(bit_off / 8 + size as u64) {
                    self.problem(format!(
                        "{at}: {size} bytes at byte {} run past the {kname} size {ssize}",
                        bit_off / 8
                    ));
                }
            }
        }
    }

    fn check_proto(&mut self, ret: TypeId, params: &[Param]) {
        if ret.0 != 0 {
            if self.is_source_only(ret) {
                self.problem(format!("return type {ret} is a VAR or DATASEC"));
            } else if let Resolved::Unsized(rt) = self.resolve(ret) {
                self.problem(format!(
                    "return type {ret} resolves to a {} (no size)",
                    rt.kind().name()
                ));
            }
        }
        let mut n = params.len();
        if let Some(last) = params.last() {
            if last.type_id.0 == 0 {
                if last.name != StrOffset::EMPTY {
                    self.problem(format!("parameter #{n} is void but has a name"));
                }
                n -= 1;
            }
        }
        for (i, p) in params[..n].iter().enumerate() {
            if p.type_id.0 == 0 {
                self.problem(format!(
                    "parameter #{} is void (only the last may be)",
                    i + 1
                ));
                continue;
            }
            if self.is_source_only(p.type_id) {
                self.problem(format!("parameter #{} is a VAR or DATASEC", i + 1));
                continue;
            }
            if let Resolved::Void | Resolved::Unsized(..) = self.resolve(p.type_id) {
                self.problem(format!(
                    "parameter #{} type {} has no size",
                    i + 1,
                    p.type_id
                ));
            }
        }
    }

    fn check_decl_tag(&mut self, target: TypeId, idx: i32) {
        let Some(tt) = self.btf.get(target) else {
            return; // reported by check_meta
        };
        let vlen = match &tt.kind {
            TypeKind::Struct(c) | TypeKind::Union(c) => Some(c.members.len()),
            TypeKind::Func { proto, .. } => match self.btf.get(*proto) {
                Some(Type {
                    kind: TypeKind::FuncProto { params, .. },
                    ..
                }) => Some(params.len()),
                _ => Some(0),
            },
            TypeKind::Var { .. } | TypeKind::Typedef(_) => None,
            _ => {
                self.problem(format!(
                    "target {target} is a {} (must be STRUCT, UNION, FUNC, VAR or TYPEDEF)",
                    tt.kind().name()
                ));
                return;
            }
        };
        if idx != -1 {
            match vlen {
                None => self.problem(format!(
                    "component_idx {idx} on a {} (must be -1)",
                    tt.kind().name()
                )),
                Some(n) if idx < 0 || idx as usize >= n => self.problem(format!(
                    "component_idx {idx} is past the {n} members or parameters of {target}"
                )),
                _ => {}
            }
        }
    }

    /// Loops: the kernel resolves types depth first and reports "Loop detected" when a
    /// type is reached again while still being resolved. Two kinds of loop exist:
    /// through values (modifiers, arrays, members, VARs, DATASECs: infinitely large
    /// types) and through chains of pointers and modifiers with no concrete type at
    /// all. A loop that goes through a pointer into a struct is fine.
    fn check_loops(&mut self) {
        let first = self.btf.first_id().0;
        let n = self.btf.types().len();
        // 0 = not visited, 1 = on the stack, 2 = done.
        let mut state = vec![0u8; n];
        let local = |id: TypeId| -> Option<usize> {
            (id.0 >= first && ((id.0 - first) as usize) < n).then(|| (id.0 - first) as usize)
        };
        let mut loops = Vec::new();
        // Value edges.
        let value_edges = |t: &Type, out: &mut Vec<TypeId>| {
            out.clear();
            match &t.kind {
                TypeKind::Ptr(_) | TypeKind::Func { .. } | TypeKind::FuncProto { .. } => {}
                TypeKind::DeclTag { .. } => {}
                k => k.for_each_ref(|r| out.push(r)),
            }
        };
        let mut stack: Vec<(usize, Vec<TypeId>, usize)> = Vec::new();
        for start in 0..n {
            if state[start] != 0 {
                continue;
            }
            let mut edges = Vec::new();
            value_edges(&self.btf.types()[start], &mut edges);
            state[start] = 1;
            stack.push((start, edges, 0));
            while let Some((node, edges, next)) = stack.last_mut() {
                if *next == edges.len() {
                    state[*node] = 2;
                    stack.pop();
                    continue;
                }
                let r = edges[*next];
                *next += 1;
                let Some(j) = local(r) else { continue };
                match state[j] {
                    0 => {
                        let mut e = Vec::new();
                        value_edges(&self.btf.types()[j], &mut e);
                        state[j] = 1;
                        stack.push((j, e, 0));
                    }
                    1 => loops.push(j),
                    _ => {}
                }
            }
        }
        for j in loops {
            self.cur = TypeId(first + j as u32);
            self.problem("loop through non-pointer types (a type contains itself)");
        }
        // Pointer/modifier chains: each has one successor, so walk each chain once.
        let mut state = vec![0u8; n];
        let chain_next = |t: &Type| -> Option<TypeId> {
            match &t.kind {
                TypeKind::Ptr(r)
                | TypeKind::Typedef(r)
                | TypeKind::Volatile(r)
                | TypeKind::Const(r)
                | TypeKind::Restrict(r)
                | TypeKind::TypeTag { type_id: r, .. } => Some(*r),
                _ => None,
            }
        };
        let mut bad = Vec::new();
        for start in 0..n {
            if state[start] != 0 {
                continue;
            }
            let mut path = Vec::new();
            let mut cur = start;
            loop {
                match state[cur] {
                    2 => break,
                    1 => {
                        bad.push(cur);
                        break;
                    }
                    _ => {}
                }
                state[cur] = 1;
                path.push(cur);
                match chain_next(&self.btf.types()[cur]).and_then(local) {
                    Some(j) => cur = j,
                    None => break,
                }
            }
            for p in path {
                state[p] = 2;
            }
        }
        for j in bad {
            self.cur = TypeId(first + j as u32);
            self.problem("loop through pointers and modifiers only (no concrete type)");
        }
    }

    /// `btf_check_type_tags`: in a chain of modifiers, TYPE_TAGs come first.
    fn check_type_tags(&mut self) {
        let first = self.btf.first_id().0;
        let bad = super::chains::bad_type_tag_order(self.btf);
        for i in 0..self.btf.types().len() {
            let id = first + i as u32;
            if bad[id as usize] {
                self.cur = TypeId(id);
                self.problem("TYPE_TAG after a non-tag modifier in a modifier chain");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Btf {
        let mut b = Btf::new(None);
        let int = b.push_str(b"int");
        b.push_type(Type {
            name: int,
            kind: TypeKind::Int {
                size: 4,
                encoding: INT_SIGNED,
                offset: 0,
                bits: 32,
            },
        });
        b
    }

    #[test]
    fn accepts_a_small_btf() {
        let mut b = base();
        let s = b.push_str(b"s");
        let a = b.push_str(b"a");
        b.push_type(Type {
            name: s,
            kind: TypeKind::Struct(Composite {
                size: 4,
                kflag: false,
                members: vec![Member {
                    name: a,
                    type_id: TypeId(1),
                    offset: 0,
                }],
            }),
        });
        assert_eq!(validate(&b), vec![]);
    }

    /// `struct list { struct list *next, *prev; }` of `size`, with `long` of
    /// `long_size` bytes (the target's pointer size, as libbpf guesses it).
    fn two_pointers(long_size: u32, size: u32) -> Btf {
        let mut b = base();
        let long = b.push_str(b"long int");
        b.push_type(Type {
            name: long,
            kind: TypeKind::Int {
                size: long_size,
                encoding: INT_SIGNED,
                offset: 0,
                bits: (long_size * 8) as u8,
            },
        });
        let (s, next, prev) = (
            b.push_str(b"list"),
            b.push_str(b"next"),
            b.push_str(b"prev"),
        );
        b.push_type(Type {
            name: StrOffset::EMPTY,
            kind: TypeKind::Ptr(TypeId(4)),
        });
        let m = |name, bits| Member {
            name,
            type_id: TypeId(3),
            offset: bits,
        };
        b.push_type(Type {
            name: s,
            kind: TypeKind::Struct(Composite {
                size,
                kflag: false,
                members: vec![m(next, 0), m(prev, size * 4)],
            }),
        });
        b
    }

    #[test]
    fn pointer_size_is_the_size_of_long() {
        assert_eq!(pointer_size(&base()), 8, "no long: libbpf's 64-bit default");
        assert_eq!(pointer_size(&two_pointers(4, 8)), 4);
        assert_eq!(validate(&two_pointers(4, 8)), vec![], "32-bit target");
        assert_eq!(validate(&two_pointers(8, 16)), vec![], "64-bit target");
        let p = validate(&two_pointers(8, 8));
        assert!(p.iter().any(|p| p.what.contains("run past")), "{p:?}");
    }

    #[test]
    fn big_endian_header_of_32_bytes_is_accepted() {
        let mut b = two_pointers(8, 16);
        b.set_endian(Endian::Big);
        b.set_header_extra(vec![0; 8]);
        let bytes = write::to_bytes(&b);
        assert_eq!(&bytes[..2], &[0xeb, 0x9f]);
        let back = parse_checked(&bytes, None).expect("libbpf >= 1.8 reads it");
        assert_eq!(back.types(), b.types());
        assert_eq!(back.header_extra(), &[0; 8]);
        // A non-zero word past the classic header is still refused.
        let mut bad = bytes.clone();
        bad[27] = 1;
        assert!(parse_checked(&bad, None).is_err());
    }

    #[test]
    fn typedef_loop_is_reported() {
        let mut b = base();
        let t1 = b.push_str(b"t1");
        let t2 = b.push_str(b"t2");
        b.push_type(Type {
            name: t1,
            kind: TypeKind::Typedef(TypeId(3)),
        });
        b.push_type(Type {
            name: t2,
            kind: TypeKind::Typedef(TypeId(2)),
        });
        let p = validate(&b);
        assert!(p.iter().any(|p| p.what.contains("loop")), "{p:?}");
    }

    #[test]
    fn struct_through_pointer_is_fine() {
        let mut b = base();
        let s = b.push_str(b"node");
        let next = b.push_str(b"next");
        b.push_type(Type {
            name: s,
            kind: TypeKind::Struct(Composite {
                size: 8,
                kflag: false,
                members: vec![Member {
                    name: next,
                    type_id: TypeId(3),
                    offset: 0,
                }],
            }),
        });
        b.push_type(Type {
            name: StrOffset::EMPTY,
            kind: TypeKind::Ptr(TypeId(2)),
        });
        assert_eq!(validate(&b), vec![]);
    }

    #[test]
    fn duplicate_datasec_entries_of_one_var_name_are_accepted() {
        let mut b = base();
        let v = b.push_str(b"v");
        let sec = b.push_str(b".data");
        for _ in 0..2 {
            b.push_type(Type {
                name: v,
                kind: TypeKind::Var {
                    type_id: TypeId(1),
                    linkage: VAR_GLOBAL_ALLOCATED,
                },
            });
        }
        let e = |id| VarSecInfo {
            type_id: TypeId(id),
            offset: 4,
            size: 4,
        };
        b.push_type(Type {
            name: sec,
            kind: TypeKind::Datasec {
                size: 8,
                entries: vec![e(2), e(3)],
            },
        });
        assert_eq!(validate(&b), vec![]);
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_identifier(b"_a9"));
        assert!(!valid_identifier(b"9a"));
        assert!(!valid_identifier(b""));
        assert!(!valid_identifier(b"a.b"));
        assert!(valid_section_name(b".data..percpu"));
        assert!(!valid_section_name(b"\x01"));
    }
}
