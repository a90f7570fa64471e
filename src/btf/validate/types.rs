//! Checks of resolved types, as the kernel's `btf_check_all_types` makes them: the
//! sizes modifiers and arrays resolve to, members and bitfields, prototypes and decl
//! tag targets.

use super::*;

impl<'a> Validator<'a> {
    /// Follows modifiers from `id` to a type with or without a size, as the kernel's
    /// `btf_type_id_size` (with arrays sized as `__btf_resolve_size`).
    pub(super) fn resolve(&self, id: TypeId) -> Resolved<'a> {
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
    pub(super) fn check_types(&mut self) {
        for (i, t) in self.btf.types().iter().enumerate() {
            self.cur = self.btf.id_at(i);
            self.check_type(t);
        }
    }

    pub(super) fn is_source_only(&self, id: TypeId) -> bool {
        matches!(
            self.btf.get(id).map(Type::kind),
            Some(Kind::Var | Kind::Datasec)
        )
    }

    pub(super) fn check_type(&mut self, t: &'a Type) {
        // PTR, the modifiers, TYPEDEF and TYPE_TAG: their one target.
        if let Some(r) = t.kind.ref_target() {
            return self.check_target(r);
        }
        match &t.kind {
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
            // INT, ENUM, ENUM64, FWD, FLOAT refer to no type; the kinds with one
            // target are checked above.
            _ => {}
        }
    }

    /// The target `r` of a PTR, modifier, TYPEDEF or TYPE_TAG: not a VAR or DATASEC,
    /// and resolving to a type with a size, `void`, a FWD or a FUNC_PROTO.
    fn check_target(&mut self, r: TypeId) {
        if self.is_source_only(r) {
            self.problem(format!("target {r} is a VAR or DATASEC"));
            return;
        }
        match self.resolve(r) {
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

    pub(super) fn check_array(&mut self, elem: TypeId, index: TypeId, nelems: u32) {
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
    pub(super) fn check_member(&mut self, t: &Type, c: &Composite, i: usize, m: &Member) {
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
                let (rt_bits, rt_offset) = (*bits, *offset);
                let (bits, offset) = (u64::from(rt_bits), u64::from(rt_offset));
                if c.kflag {
                    if !int_is_regular(rt_bits, rt_offset) {
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

    pub(super) fn check_proto(&mut self, ret: TypeId, params: &[Param]) {
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

    pub(super) fn check_decl_tag(&mut self, target: TypeId, idx: i32) {
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
}
