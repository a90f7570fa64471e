//! Per-record checks, as the kernel's `btf_check_all_metas` makes them: each record
//! on its own (names, sizes, vlen, member and DATASEC entry layout, enum values).

use super::*;

impl<'a> Validator<'a> {
    /// Per-record checks (`btf_check_meta` and the kinds' `check_meta`).
    pub(super) fn check_metas(&mut self) {
        for (i, t) in self.btf.types().iter().enumerate() {
            self.cur = self.btf.id_at(i);
            self.check_meta(t);
        }
    }

    pub(super) fn check_meta(&mut self, t: &'a Type) {
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
            TypeKind::Int { .. } => {
                let Some((size, encoding, offset, bits)) = t.kind.int_fields() else {
                    return;
                };
                let nr_bits = u32::from(bits) + u32::from(offset);
                if nr_bits > 128 {
                    self.problem(format!("INT bits_offset + nr_bits = {nr_bits} exceeds 128"));
                } else if bits_roundup_bytes(u64::from(nr_bits)) > u64::from(size) {
                    self.problem(format!("INT nr_bits {nr_bits} exceed its size {size}"));
                }
                if !matches!(encoding, 0 | INT_SIGNED | INT_CHAR | INT_BOOL) {
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
                if !valid_func_name(name) {
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
    pub(super) fn same_var_name(&self, a: &VarSecInfo, b: &VarSecInfo) -> bool {
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

    pub(super) fn check_composite_meta(&mut self, t: &Type, c: &Composite, name: &[u8]) {
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

    pub(super) fn check_enum_meta(
        &mut self,
        size: u32,
        name: &[u8],
        values: impl Iterator<Item = StrOffset>,
    ) {
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
}
