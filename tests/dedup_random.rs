//! Property test: random type graphs shaped like an encoder's output — several CUs,
//! each with its own copy of the types it uses, structs that point at each other in
//! cycles, FWDs where a CU lacks a definition, enum FWDs, ENUM64, typedefs, duplicate
//! anonymous structs inside a CU, same-named structs of different layout — give the
//! same dedup bytes as libbpf, whole and split.
//!
//! The oracle is the system libbpf (1.1.2), so the exact comparison uses
//! `Compat::Libbpf1_1`; `Compat::Upstream` must give the same bytes on graphs
//! without typedefs and in-CU duplicates, whose handling changed after 1.1.
//! `DEDUP_RANDOM_CASES` sets the number of cases (default 100).

mod common;

use common::*;
use dwarf2btf::btf::*;
use dwarf2btf::dedup::{dedup_with, Compat};
use std::collections::HashMap;
use std::sync::Arc;

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        let n = u64::try_from(n).expect("usize fits u64");
        usize::try_from(self.next() % n).expect("below n, a usize")
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A C-level type reference in the universe.
#[derive(Clone, Debug)]
enum TRef {
    Void,
    Int(usize),
    Ptr(Box<TRef>),
    Const(Box<TRef>),
    TypeTag(Box<TRef>),
    Struct(usize),
    Array(Box<TRef>, u32),
    Typedef(usize),
    Enum(usize),
    FuncPtr(usize),
}

struct UStruct {
    name: Option<String>,
    union: bool,
    members: Vec<(String, TRef)>,
}

struct UEnum {
    name: String,
    is64: bool,
    size: u32,
    values: Vec<(String, u64)>,
}

struct Universe {
    ints: Vec<(String, u32, u8)>,
    structs: Vec<UStruct>,
    enums: Vec<UEnum>,
    typedefs: Vec<(String, TRef)>,
    protos: Vec<(TRef, Vec<(String, TRef)>)>,
    funcs: Vec<(String, usize)>,
    use_typedefs: bool,
    use_enum_fwds: bool,
    /// Anonymous structs are sometimes emitted twice in one CU.
    dup_anon: bool,
}

fn gen_universe(r: &mut Rng) -> Universe {
    let ints = vec![
        ("int".to_string(), 4, INT_SIGNED),
        ("char".to_string(), 1, INT_SIGNED | INT_CHAR),
        ("long".to_string(), 8, INT_SIGNED),
        ("unsigned int".to_string(), 4, 0),
    ];
    let use_typedefs = r.chance(50);
    let use_enum_fwds = r.chance(50);
    let n_structs = 3 + r.below(10);
    let n_enums = r.below(4);
    let n_typedefs = if use_typedefs { 1 + r.below(4) } else { 0 };
    let n_protos = 1 + r.below(3);
    let mut u = Universe {
        ints,
        structs: Vec::new(),
        enums: Vec::new(),
        typedefs: Vec::new(),
        protos: Vec::new(),
        funcs: Vec::new(),
        use_typedefs,
        use_enum_fwds,
        dup_anon: r.chance(50),
    };
    for i in 0..n_enums {
        let is64 = r.chance(30);
        let n = 1 + r.below(3);
        let values = (0..n)
            .map(|j| {
                let v = if is64 {
                    (r.next() >> 20) | 1 << 40
                } else {
                    r.below(100) as u64
                };
                (format!("E{i}_{j}"), v)
            })
            .collect();
        let size = if is64 {
            8
        } else if r.chance(20) {
            1
        } else {
            4
        };
        u.enums.push(UEnum {
            name: format!("en{i}"),
            is64,
            size,
            values,
        });
    }
    // A type for a member or parameter; by-value structs only of lower index.
    fn pick(
        r: &mut Rng,
        u: &Universe,
        n_structs: usize,
        below_struct: usize,
        n_td: usize,
        n_protos: usize,
    ) -> TRef {
        match r.below(12) {
            0..=2 => TRef::Int(r.below(u.ints.len())),
            3..=5 => TRef::Ptr(Box::new(TRef::Struct(r.below(n_structs)))),
            6 if below_struct > 0 => TRef::Struct(r.below(below_struct)),
            7 => TRef::Array(
                Box::new(TRef::Int(r.below(u.ints.len()))),
                1 + u32::try_from(r.below(4)).unwrap(),
            ),
            8 if !u.enums.is_empty() => TRef::Enum(r.below(u.enums.len())),
            9 if n_td > 0 => TRef::Typedef(r.below(n_td)),
            10 if n_protos > 0 => TRef::FuncPtr(r.below(n_protos)),
            11 => TRef::Const(Box::new(TRef::Ptr(Box::new(TRef::Int(
                r.below(u.ints.len()),
            ))))),
            _ => TRef::Ptr(Box::new(TRef::TypeTag(Box::new(TRef::Struct(
                r.below(n_structs),
            ))))),
        }
    }
    for i in 0..n_typedefs {
        let target = match r.below(3) {
            0 => TRef::Int(r.below(u.ints.len())),
            1 => TRef::Struct(r.below(n_structs)),
            _ => TRef::Ptr(Box::new(TRef::Struct(r.below(n_structs)))),
        };
        u.typedefs.push((format!("td{i}"), target));
    }
    for i in 0..n_protos {
        let ret = if r.chance(30) {
            TRef::Void
        } else {
            TRef::Int(r.below(u.ints.len()))
        };
        let params = (0..r.below(3))
            .map(|j| (format!("p{j}"), pick(r, &u, n_structs, 0, 0, 0)))
            .collect();
        let _ = i;
        u.protos.push((ret, params));
    }
    for i in 0..n_structs {
        // Anonymous structs are used by value only, so only lower-index ones exist
        // for by-value members; naming most keeps FWDs possible.
        let name = if i > 0 && r.chance(25) {
            None
        } else {
            Some(format!("s{}", i % 7))
        };
        let members = (0..1 + r.below(4))
            .map(|j| {
                (
                    format!("m{j}"),
                    pick(r, &u, n_structs, i, n_typedefs, n_protos),
                )
            })
            .collect();
        u.structs.push(UStruct {
            name,
            union: r.chance(15),
            members,
        });
    }
    for i in 0..r.below(4) {
        let p = r.below(n_protos);
        u.funcs.push((format!("f{i}"), p));
    }
    u
}

/// One CU's emission of universe types with CU-local dedup, as a compiler does.
struct Cu<'a> {
    u: &'a Universe,
    r: &'a mut Rng,
    /// Type ids start after this many types (all previous CUs, and the base).
    id_base: u32,
    types: Vec<Type>,
    /// String offset of this CU's first string.
    str_base: u32,
    strings: Vec<u8>,
    str_memo: HashMap<String, u32>,
    memo: HashMap<String, u32>,
    defined: Vec<bool>,
    variant: Vec<bool>,
    enum_fwd: Vec<bool>,
}

impl Cu<'_> {
    fn s(&mut self, name: &str) -> StrOffset {
        if name.is_empty() {
            return StrOffset(0);
        }
        if let Some(&o) = self.str_memo.get(name) {
            return StrOffset(o);
        }
        let o = self.str_base + u32::try_from(self.strings.len()).unwrap();
        self.strings.extend_from_slice(name.as_bytes());
        self.strings.push(0);
        self.str_memo.insert(name.to_string(), o);
        StrOffset(o)
    }

    fn push(&mut self, t: Type) -> u32 {
        self.types.push(t);
        self.id_base + u32::try_from(self.types.len()).unwrap()
    }

    fn memo_or(&mut self, key: String, f: impl FnOnce(&mut Self) -> Type) -> u32 {
        if let Some(&id) = self.memo.get(&key) {
            return id;
        }
        let t = f(self);
        let id = self.push(t);
        self.memo.insert(key, id);
        id
    }

    fn int(&mut self, i: usize) -> u32 {
        let (name, size, enc) = self.u.ints[i].clone();
        self.memo_or(format!("int{i}"), |c| Type {
            name: c.s(&name),
            kind: TypeKind::Int {
                size,
                encoding: enc,
                offset: 0,
                bits: u8::try_from(size * 8).unwrap(),
            },
        })
    }

    /// What a pointer or type tag refers to: a named struct not defined yet is
    /// reached through its FWD, as C declares it.
    fn pointee(&mut self, inner: &TRef) -> u32 {
        match inner {
            TRef::Struct(s) if !self.defined[*s] && self.u.structs[*s].name.is_some() => {
                self.fwd(*s)
            }
            other => self.tref(other),
        }
    }

    fn tref(&mut self, t: &TRef) -> u32 {
        match t {
            TRef::Void => 0,
            TRef::Int(i) => self.int(*i),
            TRef::Ptr(inner) => {
                let target = self.pointee(inner);
                self.memo_or(format!("ptr{target}"), |_| Type {
                    name: StrOffset(0),
                    kind: TypeKind::Ptr(TypeId(target)),
                })
            }
            TRef::Const(inner) => {
                let target = self.tref(inner);
                self.memo_or(format!("const{target}"), |_| Type {
                    name: StrOffset(0),
                    kind: TypeKind::Const(TypeId(target)),
                })
            }
            TRef::TypeTag(inner) => {
                let target = self.pointee(inner);
                self.memo_or(format!("tag{target}"), |c| Type {
                    name: c.s("user"),
                    kind: TypeKind::TypeTag {
                        type_id: TypeId(target),
                        kflag: false,
                    },
                })
            }
            TRef::Struct(s) => self.strukt(*s),
            TRef::Array(inner, n) => {
                let elem = self.tref(inner);
                let index = self.int(0);
                self.memo_or(format!("arr{elem}_{n}"), |_| Type {
                    name: StrOffset(0),
                    kind: TypeKind::Array {
                        elem_type: TypeId(elem),
                        index_type: TypeId(index),
                        nelems: *n,
                    },
                })
            }
            TRef::Typedef(i) => {
                if let Some(&id) = self.memo.get(&format!("td{i}")) {
                    return id;
                }
                let (name, target) = (self.u.typedefs[*i].0.clone(), self.u.typedefs[*i].1.clone());
                let target = self.tref(&target);
                self.memo_or(format!("td{i}"), |c| Type {
                    name: c.s(&name),
                    kind: TypeKind::Typedef(TypeId(target)),
                })
            }
            TRef::Enum(e) => self.enumeration(*e),
            TRef::FuncPtr(p) => {
                let proto = self.proto(*p);
                self.memo_or(format!("ptr{proto}"), |_| Type {
                    name: StrOffset(0),
                    kind: TypeKind::Ptr(TypeId(proto)),
                })
            }
        }
    }

    fn fwd(&mut self, s: usize) -> u32 {
        let name = self.u.structs[s].name.clone().expect("named");
        let union = self.u.structs[s].union;
        self.memo_or(format!("fwd{s}"), |c| Type {
            name: c.s(&name),
            kind: TypeKind::Fwd { union },
        })
    }

    fn enumeration(&mut self, e: usize) -> u32 {
        let en = &self.u.enums[e];
        let (name, is64, size, values) = (en.name.clone(), en.is64, en.size, en.values.clone());
        let fwd = self.enum_fwd[e];
        self.memo_or(format!("enum{e}"), |c| {
            let name = c.s(&name);
            let kind = if fwd {
                TypeKind::Enum {
                    size: 4,
                    signed: false,
                    values: Vec::new(),
                }
            } else if is64 {
                TypeKind::Enum64 {
                    size,
                    signed: false,
                    values: values
                        .iter()
                        .map(|(n, v)| Enum64Value {
                            name: c.s(n),
                            value: *v,
                        })
                        .collect(),
                }
            } else {
                TypeKind::Enum {
                    size,
                    signed: false,
                    values: values
                        .iter()
                        .map(|(n, v)| EnumValue {
                            name: c.s(n),
                            value: u32::try_from(*v).unwrap(),
                        })
                        .collect(),
                }
            };
            Type { name, kind }
        })
    }

    fn proto(&mut self, p: usize) -> u32 {
        if let Some(&id) = self.memo.get(&format!("proto{p}")) {
            return id;
        }
        let (ret, params) = (self.u.protos[p].0.clone(), self.u.protos[p].1.clone());
        let ret = self.tref(&ret);
        let params: Vec<Param> = params
            .iter()
            .map(|(n, t)| {
                let type_id = TypeId(self.tref(t));
                Param {
                    name: self.s(n),
                    type_id,
                }
            })
            .collect();
        self.memo_or(format!("proto{p}"), |_| Type {
            name: StrOffset(0),
            kind: TypeKind::FuncProto {
                ret: TypeId(ret),
                params,
            },
        })
    }

    /// A full struct; anonymous ones are sometimes emitted twice (no memo).
    fn strukt(&mut self, s: usize) -> u32 {
        let key = format!("struct{s}");
        let anon = self.u.structs[s].name.is_none();
        if let Some(&id) = self.memo.get(&key) {
            if !(anon && self.u.dup_anon && self.r.chance(40)) {
                return id;
            }
        }
        // Reserve the id first: members may point back at this struct.
        let id = self.push(Type {
            name: StrOffset(0),
            kind: TypeKind::Fwd { union: false },
        });
        self.memo.entry(key).or_insert(id);
        let st = &self.u.structs[s];
        let (name, union, members) = (st.name.clone(), st.union, st.members.clone());
        let mut ms = Vec::new();
        let mut off = 0;
        for (i, (n, t)) in members.iter().enumerate() {
            let type_id = TypeId(self.tref(t));
            let mut offset = if union { 0 } else { off };
            if self.variant[s] && i + 1 == members.len() {
                offset += 32;
            }
            ms.push(Member {
                name: self.s(n),
                type_id,
                offset,
            });
            off += 64;
        }
        let c = Composite {
            size: if union {
                8
            } else {
                8 * u32::try_from(members.len()).unwrap() + 8 * self.variant[s] as u32
            },
            kflag: false,
            members: ms,
        };
        let name = self.s(name.as_deref().unwrap_or(""));
        self.types[(id - self.id_base - 1) as usize] = Type {
            name,
            kind: if union {
                TypeKind::Union(c)
            } else {
                TypeKind::Struct(c)
            },
        };
        id
    }
}

/// `n_cus` CUs of `u` as one BTF over `base` (or whole).
fn gen_btf(r: &mut Rng, u: &Universe, n_cus: usize, base: Option<Arc<Btf>>) -> Btf {
    let mut btf = Btf::new(base);
    for _ in 0..n_cus {
        let n = u.structs.len();
        let defined = (0..n).map(|_| r.chance(65)).collect();
        let variant = (0..n).map(|_| r.chance(8)).collect();
        let enum_fwd = (0..u.enums.len())
            .map(|_| u.use_enum_fwds && r.chance(30))
            .collect();
        let id_base = btf.type_count();
        let str_base = btf.str_end();
        let mut rr = Rng(r.next());
        let mut cu = Cu {
            u,
            r: &mut rr,
            id_base,
            types: Vec::new(),
            str_base,
            strings: Vec::new(),
            str_memo: HashMap::new(),
            memo: HashMap::new(),
            defined,
            variant,
            enum_fwd,
        };
        let mut roots: Vec<TRef> = (0..n)
            .filter(|_| cu.r.chance(50))
            .map(TRef::Struct)
            .collect();
        if u.use_typedefs {
            roots.extend(
                (0..u.typedefs.len())
                    .filter(|_| r.chance(50))
                    .map(TRef::Typedef),
            );
        }
        for t in &roots {
            cu.tref(t);
        }
        for (name, p) in &u.funcs {
            if cu.r.chance(60) {
                let proto = cu.proto(*p);
                let name = cu.s(name);
                cu.push(Type {
                    name,
                    kind: TypeKind::Func {
                        proto: TypeId(proto),
                        linkage: FUNC_GLOBAL,
                    },
                });
            }
        }
        if cu.r.chance(20) && !cu.types.is_empty() {
            let target = id_base + 1;
            let name = cu.s("tag");
            cu.push(Type {
                name,
                kind: TypeKind::DeclTag {
                    type_id: TypeId(target),
                    component_idx: -1,
                    kflag: false,
                },
            });
        }
        let (types, strings) = (
            std::mem::take(&mut cu.types),
            std::mem::take(&mut cu.strings),
        );
        for t in types {
            btf.push_type(t);
        }
        for s in strings.split(|&b| b == 0).filter(|s| !s.is_empty()) {
            btf.push_str(s);
        }
    }
    btf
}

#[test]
fn random_graphs_equal_libbpf() {
    if !have_libbpf() {
        return;
    }
    let cases: u64 = std::env::var("DEDUP_RANDOM_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let dir = scratch("random");
    let (mut upstream_checked, mut split_cases) = (0, 0);
    for seed in 0..cases {
        let mut r = Rng(seed.wrapping_mul(0x1234_5678_9abc_def1) ^ 0x5eed);
        let u = gen_universe(&mut r);
        let split = seed % 3 == 2;
        let (base, base_path) = if split {
            // The base is a deduplicated set of CUs, as vmlinux's .BTF is.
            let n = 1 + r.below(3);
            let raw = gen_btf(&mut r, &u, n, None);
            let base = dedup_with(&raw, Compat::Libbpf1_1).expect("dedup base");
            let p = dir.join(format!("base{seed}.btf"));
            write(&base, &p);
            (Some(Arc::new(base)), Some(p))
        } else {
            (None, None)
        };
        split_cases += split as u32;
        let n = 2 + r.below(5);
        let btf = gen_btf(&mut r, &u, n, base);
        let path = dir.join(format!("case{seed}.btf"));
        write(&btf, &path);
        let want = libbpf_dedup(&path, base_path.as_deref(), &dir.join("out.btf"));
        let got =
            dwarf2btf::btf::write::to_bytes(&dedup_with(&btf, Compat::Libbpf1_1).expect("dedup"));
        assert!(
            got == want,
            "seed {seed} (Libbpf1_1, split={split}): {}; input kept in {}",
            first_diff(&got, &want),
            path.display()
        );
        if !u.use_typedefs && !u.dup_anon {
            upstream_checked += 1;
            let got = dwarf2btf::btf::write::to_bytes(
                &dedup_with(&btf, Compat::Upstream).expect("dedup"),
            );
            assert!(
                got == want,
                "seed {seed} (Upstream, split={split}): {}",
                first_diff(&got, &want)
            );
        }
        std::fs::remove_file(&path).ok();
    }
    eprintln!("{cases} random cases ({split_cases} split) equal libbpf; {upstream_checked} also in Upstream mode");
    std::fs::remove_dir_all(&dir).ok();
}

/// A base that is not deduplicated may hold two equal anonymous PTRs (and CONSTs)
/// to one type. Which of them a split type's equal PTR becomes is then libbpf's
/// candidate order (the engine's index of the one anonymous PTR or CONST to a
/// type must step aside), in either rule set.
#[test]
fn duplicate_anonymous_pointers_in_a_base_follow_libbpf() {
    if !have_libbpf() {
        return;
    }
    let dir = scratch("dup-anon");
    let mut base = Btf::new(None);
    let int_name = base.push_str(b"int");
    let s_name = base.push_str(b"s");
    let m_name = base.push_str(b"m");
    let int = base.push_type(Type {
        name: int_name,
        kind: TypeKind::int(32, 1),
    });
    for _ in 0..2 {
        base.push_type(Type {
            name: StrOffset::EMPTY,
            kind: TypeKind::Ptr(int),
        });
        base.push_type(Type {
            name: StrOffset::EMPTY,
            kind: TypeKind::Const(int),
        });
    }
    let base_path = dir.join("base.btf");
    write(&base, &base_path);
    let base = Arc::new(base);
    let mut split = Btf::new(Some(Arc::clone(&base)));
    let int2 = split.push_type(Type {
        name: int_name,
        kind: TypeKind::int(32, 1),
    });
    let ptr = split.push_type(Type {
        name: StrOffset::EMPTY,
        kind: TypeKind::Ptr(int2),
    });
    let cst = split.push_type(Type {
        name: StrOffset::EMPTY,
        kind: TypeKind::Const(int2),
    });
    // A pointer to the CONST: its target is one of the base's two CONSTs, each
    // with no PTR to it yet.
    let ptr_cst = split.push_type(Type {
        name: StrOffset::EMPTY,
        kind: TypeKind::Ptr(cst),
    });
    split.push_type(Type {
        name: s_name,
        kind: TypeKind::Struct(Composite {
            size: 24,
            kflag: false,
            members: [ptr, cst, ptr_cst]
                .into_iter()
                .zip(0u32..)
                .map(|(t, i)| Member {
                    name: m_name,
                    type_id: t,
                    offset: 64 * i,
                })
                .collect(),
        }),
    });
    let path = dir.join("split.btf");
    write(&split, &path);
    let want = libbpf_dedup(&path, Some(&base_path), &dir.join("out.btf"));
    for compat in [Compat::Libbpf1_1, Compat::Upstream] {
        let got = dwarf2btf::btf::write::to_bytes(&dedup_with(&split, compat).expect("dedup"));
        assert!(got == want, "{compat:?}: {}", first_diff(&got, &want));
    }
}
