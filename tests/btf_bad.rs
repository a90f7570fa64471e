//! Bad BTF gives an error naming the file and the problem, a non-zero exit from the
//! CLI, and never a panic.

use dwarf2btf::btf::*;
use std::path::PathBuf;
use std::process::Command;

/// A small valid BTF: [1] INT int, [2] PTR -> 1, [3] STRUCT s { int a; int *p; },
/// [4] TYPEDEF t -> 3. Record offsets: 24, 40, 52, 88; strings at 100.
fn good_model() -> Btf {
    let mut b = Btf::new(None);
    let int = b.push_str(b"int");
    let s = b.push_str(b"s");
    let a = b.push_str(b"a");
    let p = b.push_str(b"p");
    let t = b.push_str(b"t");
    b.push_type(Type {
        name: int,
        kind: TypeKind::int(32, INT_SIGNED),
    });
    b.push_type(Type {
        name: StrOffset::EMPTY,
        kind: TypeKind::Ptr(TypeId(1)),
    });
    b.push_type(Type {
        name: s,
        kind: TypeKind::Struct(Composite {
            size: 16,
            kflag: false,
            members: vec![
                Member {
                    name: a,
                    type_id: TypeId(1),
                    offset: 0,
                },
                Member {
                    name: p,
                    type_id: TypeId(2),
                    offset: 64,
                },
            ],
        }),
    });
    b.push_type(Type {
        name: t,
        kind: TypeKind::Typedef(TypeId(3)),
    });
    b
}

fn good() -> Vec<u8> {
    write::to_bytes(&good_model())
}

fn put(data: &mut [u8], at: usize, v: u32) {
    data[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Bad inputs and a piece of the message each must produce.
fn cases() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let mut v = Vec::new();
    let mut add = |name, f: &dyn Fn(&mut Vec<u8>), expect| {
        let mut d = good();
        f(&mut d);
        v.push((name, d, expect));
    };
    add(
        "truncated-header",
        &|d| d.truncate(10),
        "shorter than the 24-byte header",
    );
    add("truncated-record", &|d| put(d, 12, 20), "record truncated");
    add("truncated-file", &|d| d.truncate(90), "ends past the data");
    add("bad-magic", &|d| d[0] = 0x12, "bad BTF magic");
    add("bad-version", &|d| d[2] = 7, "unsupported BTF version 7");
    add(
        "strings-past-end",
        &|d| put(d, 20, 0xffff),
        "string section",
    );
    add(
        "types-past-end",
        &|d| put(d, 8, 0x1000_0000),
        "type section",
    );
    add(
        "type-id-out-of-range",
        &|d| put(d, 40 + 8, 99),
        "refers to type id 99",
    );
    add(
        "member-type-out-of-range",
        &|d| put(d, 64 + 4, 1234),
        "refers to type id 1234",
    );
    add(
        "unknown-kind",
        &|d| put(d, 40 + 4, 25 << 24),
        "unknown kind 25",
    );
    add(
        "absurd-vlen",
        &|d| put(d, 52 + 4, 4 << 24 | 0xffff),
        "vlen 65535 runs past",
    );
    add(
        "unterminated-strings",
        &|d| *d.last_mut().unwrap() = b'x',
        "does not end with a NUL",
    );
    add(
        "name-offset-past-end",
        &|d| put(d, 24, 5000),
        "name offset 5000 is past",
    );
    add(
        "layout-gap",
        &|d| {
            put(d, 16, 80); // string section 4 bytes after the types
            d.splice(100..100, [0u8; 4]);
        },
        "string section at offset 80",
    );
    add(
        "trailing-data",
        &|d| d.extend_from_slice(&[0; 8]),
        "but the data is",
    );
    add(
        "member-past-struct",
        &|d| put(d, 64 + 12 + 8, 200 * 8),
        "past the STRUCT size",
    );
    add(
        "member-offsets-backwards",
        &|d| put(d, 64 + 8, 96),
        "before the previous member",
    );
    add(
        "bad-struct-name",
        &|d| {
            let at = d.len() - 8; // "\0int\0s\0a\0p\0t\0": the 's'
            d[at] = b'9';
        },
        "is not a valid identifier",
    );
    add("ptr-with-name", &|d| put(d, 40, 1), "PTR must be anonymous");
    add(
        "reserved-info-bits",
        &|d| put(d, 40 + 4, 2 << 24 | 1 << 20),
        "reserved bits",
    );
    add(
        "int-too-wide",
        &|d| put(d, 24 + 12, 1 << 24 | 64),
        "exceed its size",
    );
    add(
        "not-btf",
        &|d| *d = b"hello, world\n".to_vec(),
        "bad BTF magic 0x6568",
    );
    add("empty", &|d| d.clear(), "neither raw BTF");
    v
}

/// Model-level cases (loops, DATASEC, DECL_TAG) written with the writer.
fn model_cases() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let mut out = Vec::new();
    let mut b = good_model();
    b.push_named(b"x", TypeKind::Typedef(TypeId(6)));
    b.push_named(b"y", TypeKind::Typedef(TypeId(5)));
    out.push(("typedef-cycle", write::to_bytes(&b), "loop"));

    let mut b = good_model();
    b.types_mut()[2] = Type {
        name: b.types()[2].name,
        kind: TypeKind::Struct(Composite {
            size: 16,
            kflag: false,
            members: vec![Member {
                name: StrOffset::EMPTY,
                type_id: TypeId(4),
                offset: 0,
            }],
        }),
    };
    out.push((
        "struct-contains-itself",
        write::to_bytes(&b),
        "loop through non-pointer",
    ));

    let mut b = good_model();
    let entries = vec![VarSecInfo {
        type_id: TypeId(1),
        offset: 0,
        size: 4,
    }];
    b.push_named(b".data", TypeKind::Datasec { size: 8, entries });
    out.push(("datasec-entry-not-var", write::to_bytes(&b), "not a VAR"));

    // Two different VARs at overlapping offsets; (pahole's global_var duplicates, the
    // same VAR name at the same offset and size, are accepted: see the reference test).
    let mut b = good_model();
    let var = TypeKind::Var {
        type_id: TypeId(1),
        linkage: VAR_GLOBAL_ALLOCATED,
    };
    b.push_named(b"v1", var.clone());
    b.push_named(b"v2", var);
    let entry = |id, offset| VarSecInfo {
        type_id: TypeId(id),
        offset,
        size: 4,
    };
    let entries = vec![entry(5, 0), entry(6, 2)];
    b.push_named(b".data", TypeKind::Datasec { size: 8, entries });
    out.push((
        "datasec-overlap",
        write::to_bytes(&b),
        "overlaps the previous entry",
    ));

    let mut b = good_model();
    let tag = TypeKind::DeclTag {
        type_id: TypeId(3),
        component_idx: 2,
        kflag: false,
    };
    b.push_named(b"tag", tag);
    out.push((
        "decl-tag-index",
        write::to_bytes(&b),
        "component_idx 2 is past the 2",
    ));
    out
}

fn tmp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("dwarf2btf-btf-bad-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_good_file_is_good() {
    let b = validate::parse_checked(&good(), None).unwrap();
    assert_eq!(b.types().len(), 4);
}

#[test]
fn library_names_each_problem() {
    for (name, data, expect) in cases().into_iter().chain(model_cases()) {
        let err = match read::btf_bytes(&data, ".BTF") {
            Err(e) => e,
            Ok((bytes, _)) => validate::parse_checked(&bytes, None)
                .err()
                .unwrap_or_else(|| panic!("{name}: accepted")),
        };
        let msg = match &err {
            // Check every problem, not just the first.
            BtfError::Invalid(ps) => ps
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("; "),
            e => e.to_string(),
        };
        assert!(
            msg.contains(expect),
            "{name}: {msg:?} does not say {expect:?}"
        );
    }
}

#[test]
fn cli_exits_non_zero_naming_file_and_problem() {
    let dir = tmp_dir();
    for (name, data, expect) in cases().into_iter().chain(model_cases()) {
        let path = dir.join(format!("{name}.btf"));
        std::fs::write(&path, &data).unwrap();
        for mode in ["dump", "validate"] {
            let out = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
                .arg(mode)
                .arg(&path)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{mode} {name}: {err}");
            assert!(
                out.stdout.is_empty() || mode == "validate",
                "{name}: printed a dump"
            );
            assert!(
                err.contains(&*path.to_string_lossy()),
                "{mode} {name}: {err}"
            );
            assert!(!err.contains("panicked"), "{mode} {name}: {err}");
            assert!(
                err.contains(expect),
                "{mode} {name}: {err:?} lacks {expect:?}"
            );
        }
    }
    let missing = dir.join("missing.btf");
    let out = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
        .arg("dump")
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.btf"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cli_rejects_bad_usage() {
    for args in [&["dump"][..], &["frobnicate"], &[], &["dump", "a", "b"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
            .args(args)
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}");
    }
}
