//! The validator on small hand-made BTF.

use super::*;

fn base() -> Btf {
    let mut b = Btf::new(None);
    b.push_named(b"int", TypeKind::int(32, INT_SIGNED));
    b
}

/// Adds struct `name` of `size` bytes whose one member `member` has type `ty`.
fn one_member_struct(b: &mut Btf, name: &[u8], size: u32, member: &[u8], ty: TypeId) {
    let member = b.push_str(member);
    let members = vec![Member {
        name: member,
        type_id: ty,
        offset: 0,
    }];
    push_struct(b, name, size, members);
}

/// Adds struct `name` of `size` bytes with `members`.
fn push_struct(b: &mut Btf, name: &[u8], size: u32, members: Vec<Member>) {
    let kind = TypeKind::Struct(Composite {
        size,
        kflag: false,
        members,
    });
    b.push_named(name, kind);
}

#[test]
fn accepts_a_small_btf() {
    let mut b = base();
    one_member_struct(&mut b, b"s", 4, b"a", TypeId(1));
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
            bits: u8::try_from(long_size * 8).unwrap(),
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
    // Its layout words must describe whole records (here: a 1-byte section).
    let mut bad = bytes.clone();
    bad[31] = 1;
    assert!(parse_checked(&bad, None).is_err());
}

#[test]
fn typedef_loop_is_reported() {
    let mut b = base();
    b.push_named(b"t1", TypeKind::Typedef(TypeId(3)));
    b.push_named(b"t2", TypeKind::Typedef(TypeId(2)));
    let p = validate(&b);
    assert!(p.iter().any(|p| p.what.contains("loop")), "{p:?}");
}

#[test]
fn struct_through_pointer_is_fine() {
    let mut b = base();
    one_member_struct(&mut b, b"node", 8, b"next", TypeId(3));
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

#[test]
fn two_threads_report_the_same_problems_in_the_same_order() {
    // A bad name (a record check) and a typedef loop (a resolved check), so both
    // halves have something to say.
    let mut b = base();
    b.push_named(b"9bad", TypeKind::Typedef(TypeId(1)));
    b.push_named(b"t1", TypeKind::Typedef(TypeId(4)));
    b.push_named(b"t2", TypeKind::Typedef(TypeId(3)));
    let one = validate_on(&b, false);
    let two = validate_on(&b, true);
    assert_eq!(one, validate(&b));
    assert_eq!(one, two);
    assert!(one.iter().any(|p| p.what.contains("loop")), "{one:?}");
    let name = one.iter().position(|p| p.id == Some(TypeId(2)));
    let looped = one.iter().position(|p| p.what.contains("loop"));
    assert!(name.is_some() && name < looped, "{one:?}");
}

/// Adds struct `name` of `size` bytes with members of types `tys`, each four
/// bytes after the one before.
fn struct_of(b: &mut Btf, name: &[u8], size: u32, tys: &[u32]) {
    let members = (0u32..)
        .zip(tys)
        .map(|(i, &ty)| Member {
            name: StrOffset::EMPTY,
            type_id: TypeId(ty),
            offset: 32 * i,
        })
        .collect();
    push_struct(b, name, size, members);
}

#[test]
fn value_loop_after_a_finished_member_is_reported_once() {
    // s { t; u; int }, t { int; int }, u { t; s }: t is done when u reaches s,
    // which is still being walked.
    let mut b = base();
    struct_of(&mut b, b"s", 12, &[3, 4, 1]);
    struct_of(&mut b, b"t", 8, &[1, 1]);
    struct_of(&mut b, b"u", 12, &[3, 2]);
    let loops: Vec<_> = validate(&b)
        .into_iter()
        .filter(|p| p.what.contains("loop"))
        .collect();
    assert_eq!(loops.len(), 1, "{loops:?}");
    assert_eq!(loops[0].id, Some(TypeId(2)), "{loops:?}");
}

#[test]
fn shared_members_are_no_loop() {
    // s { t; t; u }, t { int }, u { t }: t is reached three times, never while
    // it is being walked.
    let mut b = base();
    struct_of(&mut b, b"s", 12, &[3, 3, 4]);
    struct_of(&mut b, b"t", 4, &[1]);
    struct_of(&mut b, b"u", 4, &[3]);
    assert_eq!(validate(&b), vec![]);
}
