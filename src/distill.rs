//! Distilled base BTF (pahole's `distilled_base` feature): libbpf's
//! `btf__distill_base()`.
//!
//! A module's split BTF normally refers to vmlinux's type ids, so it only loads over
//! exactly the vmlinux it was built against. Distilling replaces that base by a small
//! one (the `.BTF.base` section) that describes just the base types the module uses,
//! in a form the loader can match by name against whatever vmlinux it meets:
//! - INT, FLOAT and FWD types go into the distilled base as they are;
//! - named STRUCT/UNION become memberless ones of the same size (the size is
//!   checked when the module embeds one), named ENUM/ENUM64 a memberless ENUM of
//!   the same size;
//! - everything else it needs (pointers, typedefs, arrays, prototypes, anonymous
//!   composites and enums …) is copied into the split BTF, after the module's own
//!   types, and resolved against the distilled base.
//!
//! Type order and string order are libbpf's, so the bytes are those pahole writes.

use crate::btf::{Btf, Composite, Kind, StrOffset, Type, TypeId, TypeKind};
use std::collections::HashMap;
use std::sync::Arc;

/// Why a BTF cannot be distilled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DistillError {
    /// The BTF has no base: only split BTF can be distilled.
    NotSplit,
    /// A split type refers to a base type of a kind that split BTF may not use
    /// (libbpf refuses these too: FUNC, VAR, DATASEC, DECL_TAG).
    UnexpectedKind {
        /// The base type's id.
        id: TypeId,
        /// Its kind.
        kind: Kind,
    },
    /// A type id points past the end of the BTF.
    BadId(TypeId),
}

impl std::fmt::Display for DistillError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DistillError::NotSplit => f.write_str("only split BTF (with a base) can be distilled"),
            DistillError::UnexpectedKind { id, kind } => write!(
                f,
                "split BTF refers to base type [{id}] of kind {}, which a distilled base \
                 cannot describe",
                kind.name()
            ),
            DistillError::BadId(id) => write!(f, "type id {id} is out of range"),
        }
    }
}

impl std::error::Error for DistillError {}

/// The result of distilling: the new base (`.BTF.base`) and the split BTF over it
/// (`.BTF`).
#[derive(Debug)]
pub struct Distilled {
    /// The distilled base BTF.
    pub base: Arc<Btf>,
    /// The split BTF, relative to `base`.
    pub split: Btf,
}

/// A BTF being built whose strings are deduplicated as libbpf's `btf__add_str` does:
/// a string already in the base (for split BTF) or already added is reused.
struct Builder<'a> {
    btf: Btf,
    own: HashMap<Vec<u8>, StrOffset>,
    base_strs: Option<&'a HashMap<Vec<u8>, StrOffset>>,
}

impl<'a> Builder<'a> {
    fn new(btf: Btf, base_strs: Option<&'a HashMap<Vec<u8>, StrOffset>>) -> Self {
        Builder {
            btf,
            own: HashMap::new(),
            base_strs,
        }
    }

    fn add_str(&mut self, s: &[u8]) -> StrOffset {
        if s.is_empty() {
            return StrOffset::EMPTY;
        }
        if let Some(&off) = self.base_strs.and_then(|m| m.get(s)) {
            return off;
        }
        if let Some(&off) = self.own.get(s) {
            return off;
        }
        let off = self.btf.push_str(s);
        self.own.insert(s.to_vec(), off);
        off
    }

    /// Copies `t` (strings read from `src`), as libbpf's `btf_add_type` through a
    /// pipe: the record is the same, every string is re-added here. Type ids are
    /// left as in `src`; the caller rewrites them.
    fn copy_type(&mut self, src: &Btf, t: &Type) -> TypeId {
        let mut t = t.clone();
        t.for_each_str_mut(|off| *off = self.add_str(src.str_bytes(*off).unwrap_or(b"")));
        self.btf.push_type(t)
    }

    fn push(&mut self, name: &[u8], kind: TypeKind) -> TypeId {
        let name = self.add_str(name);
        self.btf.push_type(Type { name, kind })
    }
}

/// Where a used base type goes.
#[derive(PartialEq, Eq)]
enum Place {
    Base,
    Split,
}

/// The place of a used base type `t`, as libbpf's `btf_add_distilled_types` sorts
/// them.
fn place(t: &Type) -> Place {
    match t.kind() {
        Kind::Int | Kind::Float | Kind::Fwd => Place::Base,
        Kind::Struct | Kind::Union | Kind::Enum | Kind::Enum64 if t.name != StrOffset::EMPTY => {
            Place::Base
        }
        _ => Place::Split,
    }
}

/// Distills the base of split BTF `src` (libbpf's `btf__distill_base`).
pub fn distill_base(src: &Btf) -> Result<Distilled, DistillError> {
    let old_base = src.base().ok_or(DistillError::NotSplit)?;
    let n_base = old_base.type_count();
    let split_start = n_base + 1;
    let get = |id: TypeId| src.get(id).ok_or(DistillError::BadId(id));

    // 1. Which base types the split types use, directly or through the base types
    // they use (not through the members of named composites, which the distilled
    // base describes without members).
    let mut used = vec![false; split_start as usize];
    let mut stack = Vec::new();
    for t in src.types() {
        t.kind.for_each_ref(|id| stack.push(id));
    }
    while let Some(id) = stack.pop() {
        if id == TypeId::VOID || id.0 >= split_start || used[id.0 as usize] {
            continue;
        }
        let t = get(id)?;
        match t.kind() {
            Kind::Func | Kind::Var | Kind::Datasec | Kind::DeclTag => {
                return Err(DistillError::UnexpectedKind { id, kind: t.kind() })
            }
            _ => {}
        }
        used[id.0 as usize] = true;
        let named_composite =
            matches!(t.kind(), Kind::Struct | Kind::Union) && t.name != StrOffset::EMPTY;
        if !named_composite {
            t.kind.for_each_ref(|r| stack.push(r));
        }
    }

    // 2. The distilled base, in base id order. `map` gives the new id of each used
    // base type.
    let mut map = vec![TypeId::VOID; split_start as usize];
    let mut base = Builder::new(Btf::new(None), None);
    base.btf.set_endian(src.endian());
    base.btf.set_header_extra(src.header_extra().to_vec());
    for i in 1..split_start {
        if !used[i as usize] {
            continue;
        }
        let t = get(TypeId(i))?;
        if place(t) != Place::Base {
            continue;
        }
        let name = src.str_bytes(t.name).unwrap_or(b"");
        map[i as usize] = match &t.kind {
            TypeKind::Int { .. } | TypeKind::Float { .. } | TypeKind::Fwd { .. } => {
                base.copy_type(src, t)
            }
            TypeKind::Struct(c) | TypeKind::Union(c) => {
                let body = Composite {
                    size: c.size,
                    kflag: false,
                    members: Vec::new(),
                };
                let kind = if t.kind() == Kind::Struct {
                    TypeKind::Struct(body)
                } else {
                    TypeKind::Union(body)
                };
                base.push(name, kind)
            }
            TypeKind::Enum { size, .. } | TypeKind::Enum64 { size, .. } => base.push(
                name,
                TypeKind::Enum {
                    size: *size,
                    signed: false,
                    values: Vec::new(),
                },
            ),
            _ => unreachable!("place() puts only these kinds in the base"),
        };
    }
    let base_strs = base.own;
    let new_base = Arc::new(base.btf);

    // 3. The split BTF: the module's own types, then the used base types that are
    // not in the distilled base.
    let mut split_btf = Btf::new(Some(new_base.clone()));
    split_btf.set_endian(src.endian());
    split_btf.set_header_extra(src.header_extra().to_vec());
    let mut split = Builder::new(split_btf, Some(&base_strs));
    for t in src.types() {
        split.copy_type(src, t);
    }
    for i in 1..split_start {
        if !used[i as usize] {
            continue;
        }
        let t = get(TypeId(i))?;
        if place(t) == Place::Split {
            map[i as usize] = split.copy_type(src, t);
        }
    }

    // 4. Ids: used base types go where step 2 or 3 put them; the module's own types
    // move down by as many ids as the base shrank.
    let shift = n_base - new_base.type_count();
    for t in split.btf.types_mut() {
        t.kind.for_each_ref_mut(|id| {
            if id.0 >= split_start {
                id.0 -= shift;
            } else if id.0 != 0 {
                *id = map[id.0 as usize];
            }
        });
    }
    Ok(Distilled {
        base: new_base,
        split: split.btf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Member, Param};

    fn int(b: &mut Btf, name: &[u8]) -> TypeId {
        let name = b.push_str(name);
        b.push_type(Type {
            name,
            kind: TypeKind::int(32, crate::btf::INT_SIGNED),
        })
    }

    fn strukt(b: &mut Btf, name: &[u8], size: u32, members: Vec<Member>) -> TypeId {
        let name = b.push_str(name);
        b.push_type(Type {
            name,
            kind: TypeKind::Struct(Composite {
                size,
                kflag: false,
                members,
            }),
        })
    }

    fn anon(kind: TypeKind) -> Type {
        Type {
            name: StrOffset::EMPTY,
            kind,
        }
    }

    /// base: int, struct s { int a; }, unused struct u, ptr to s, typedef t = s,
    /// anonymous struct { int x; }, enum e.
    fn base() -> Arc<Btf> {
        let mut b = Btf::new(None);
        let i = int(&mut b, b"int");
        let a = b.push_str(b"a");
        let s = strukt(
            &mut b,
            b"s",
            4,
            vec![Member {
                name: a,
                type_id: i,
                offset: 0,
            }],
        );
        strukt(&mut b, b"unused", 8, vec![]);
        b.push_type(anon(TypeKind::Ptr(s)));
        let t = b.push_str(b"t");
        b.push_type(Type {
            name: t,
            kind: TypeKind::Typedef(s),
        });
        let x = b.push_str(b"x");
        b.push_type(anon(TypeKind::Struct(Composite {
            size: 4,
            kflag: false,
            members: vec![Member {
                name: x,
                type_id: i,
                offset: 0,
            }],
        })));
        let e = b.push_str(b"e");
        b.push_type(Type {
            name: e,
            kind: TypeKind::Enum64 {
                size: 8,
                signed: true,
                values: vec![],
            },
        });
        Arc::new(b)
    }

    #[test]
    fn distills_what_the_split_uses() {
        let base = base();
        // split: struct m { s *p; t v; anon w; e z; }, and func proto (int) -> void.
        let mut sp = Btf::new(Some(base.clone()));
        let names: Vec<StrOffset> = [b"p", b"v", b"w", b"z"]
            .iter()
            .map(|n| sp.push_str(*n))
            .collect();
        let refs = [4u32, 5, 6, 7];
        let members = names
            .iter()
            .zip(refs)
            .map(|(&name, r)| Member {
                name,
                type_id: TypeId(r),
                offset: 0,
            })
            .collect();
        let m = strukt(&mut sp, b"m", 32, members);
        sp.push_type(anon(TypeKind::FuncProto {
            ret: TypeId::VOID,
            params: vec![Param {
                name: StrOffset::EMPTY,
                type_id: TypeId(1),
            }],
        }));
        sp.push_type(anon(TypeKind::Ptr(m)));
        let d = distill_base(&sp).unwrap();
        let dump = |b: &Btf| String::from_utf8(crate::btf::dump::dump_to_vec(b)).unwrap();
        let bd = dump(&d.base);
        // int, struct s (memberless, sized), enum e as a 64-bit memberless ENUM;
        // "unused" and the anonymous struct are not in the base.
        assert_eq!(
            bd,
            "[1] INT 'int' size=4 bits_offset=0 nr_bits=32 encoding=SIGNED\n\
             [2] STRUCT 's' size=4 vlen=0\n\
             [3] ENUM 'e' encoding=UNSIGNED size=8 vlen=0\n"
        );
        let sd = dump(&d.split);
        let lines: Vec<&str> = sd.lines().filter(|l| l.starts_with('[')).collect();
        // Own types first (ids moved down by 7 - 3), then ptr, typedef, anon struct.
        assert!(
            lines[0].starts_with("[4] STRUCT 'm' size=32 vlen=4"),
            "{sd}"
        );
        assert!(sd.contains("'p' type_id=7"), "{sd}");
        assert!(sd.contains("'v' type_id=8"), "{sd}");
        assert!(sd.contains("'w' type_id=9"), "{sd}");
        assert!(sd.contains("'z' type_id=3"), "{sd}");
        assert!(lines[2].starts_with("[6] PTR '(anon)' type_id=4"), "{sd}");
        assert!(lines[3].starts_with("[7] PTR '(anon)' type_id=2"), "{sd}");
        assert!(lines[4].starts_with("[8] TYPEDEF 't' type_id=2"), "{sd}");
        assert!(
            lines[5].starts_with("[9] STRUCT '(anon)' size=4 vlen=1"),
            "{sd}"
        );
        assert_eq!(lines.len(), 6);
        // Strings in the base are not repeated in the split.
        assert!(!d.split.strings().windows(4).any(|w| w == b"int\0"));
        crate::btf::validate::check(&d.split).unwrap();
    }

    /// The distilled pair keeps the input's byte order and header length, and reads
    /// back as the same types.
    #[test]
    fn keeps_byte_order_and_header() {
        let mut b = (*base()).clone();
        b.set_endian(crate::btf::Endian::Big);
        b.set_header_extra(vec![0; 8]);
        let b = Arc::new(b);
        let mut sp = Btf::new(Some(b.clone()));
        sp.set_header_extra(vec![0; 8]);
        sp.push_type(anon(TypeKind::Ptr(TypeId(6))));
        let d = distill_base(&sp).unwrap();
        assert_eq!(d.split.endian(), crate::btf::Endian::Big);
        let base_bytes = crate::btf::write::to_bytes(&d.base);
        let split_bytes = crate::btf::write::to_bytes(&d.split);
        assert_eq!(&base_bytes[..2], &[0xeb, 0x9f]);
        assert_eq!(base_bytes[4..8], 32u32.to_be_bytes());
        let base2 = Arc::new(crate::btf::read::parse(&base_bytes, None).unwrap());
        let split2 = crate::btf::read::parse(&split_bytes, Some(base2.clone())).unwrap();
        assert_eq!(base2.types(), d.base.types());
        assert_eq!(split2.types(), d.split.types());
        // ptr → anonymous struct { int x; }: the struct moves to the split, int to
        // the base.
        assert_eq!(base2.types().len(), 1);
        assert_eq!(split2.types().len(), 2);
    }

    #[test]
    fn refuses_whole_btf_and_func_refs() {
        assert_eq!(
            distill_base(&Btf::new(None)).unwrap_err(),
            DistillError::NotSplit
        );
        let mut b = Btf::new(None);
        let p = b.push_type(anon(TypeKind::FuncProto {
            ret: TypeId::VOID,
            params: vec![],
        }));
        let f = b.push_str(b"f");
        let f = b.push_type(Type {
            name: f,
            kind: TypeKind::Func {
                proto: p,
                linkage: 0,
            },
        });
        let mut sp = Btf::new(Some(Arc::new(b)));
        sp.push_type(anon(TypeKind::Ptr(f)));
        assert!(matches!(
            distill_base(&sp),
            Err(DistillError::UnexpectedKind {
                kind: Kind::Func,
                ..
            })
        ));
    }
}
