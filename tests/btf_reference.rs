//! Every pahole reference file (and the corpus's own `.BTF` sections): our dump is
//! byte for byte bpftool's, reading then writing gives the same bytes, and the
//! validator accepts them.

mod common;

use common::*;
use dwarf2btf::btf::{dump, read, validate, write, Btf};
use std::process::Command;
use std::sync::Arc;

fn load(case: &Case) -> Btf {
    let base = case.base.as_ref().map(|b| {
        Arc::new(read::read_file_checked(b, None).unwrap_or_else(|e| panic!("base: {e}")))
    });
    read::read_file_checked(&case.file, base).unwrap_or_else(|e| panic!("{e}"))
}

fn bpftool_dump(case: &Case) -> Vec<u8> {
    let mut cmd = Command::new("bpftool");
    cmd.args(["btf", "dump", "file"]).arg(&case.file);
    if let Some(b) = &case.base {
        cmd.arg("--base-btf").arg(b);
    }
    let out = cmd.output().expect("run bpftool");
    assert!(
        out.status.success(),
        "bpftool failed on {case:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Panics with the first differing line if `ours` and `theirs` differ.
fn assert_same_dump(case: &Case, ours: &[u8], theirs: &[u8]) {
    if ours == theirs {
        return;
    }
    let (a, b): (Vec<_>, Vec<_>) = (
        ours.split(|&c| c == b'\n').collect(),
        theirs.split(|&c| c == b'\n').collect(),
    );
    let i = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    panic!(
        "dump of {case:?} differs from bpftool at line {}:\n ours:    {:?}\n bpftool: {:?}\n({} vs {} lines)",
        i + 1,
        a.get(i).map(|l| String::from_utf8_lossy(l)),
        b.get(i).map(|l| String::from_utf8_lossy(l)),
        a.len(),
        b.len()
    );
}

fn check_dumps(cases: &[Case]) {
    if !need("bpftool") {
        return;
    }
    for case in cases {
        let ours = dump::dump_to_vec(&load(case));
        assert_same_dump(case, &ours, &bpftool_dump(case));
        eprintln!("same dump as bpftool: {}", case.file.display());
    }
}

#[test]
fn reference_dumps_equal_bpftool() {
    check_dumps(&reference_cases());
}

#[test]
fn corpus_dumps_equal_bpftool() {
    check_dumps(&corpus_cases());
}

/// The CLI prints the same as the library (and so as bpftool) for a split file.
#[test]
fn cli_dump_equals_bpftool() {
    if !need("bpftool") {
        return;
    }
    let Some(case) = reference_cases().into_iter().find(|c| {
        c.file
            .to_string_lossy()
            .ends_with("vsock_loopback.distilled.BTF")
    }) else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
        .arg("dump")
        .arg(&case.file)
        .arg("--base-btf")
        .arg(case.base.as_ref().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_same_dump(&case, &out.stdout, &bpftool_dump(&case));
}

#[test]
fn read_then_write_gives_the_same_bytes() {
    let mut cases = reference_cases();
    cases.extend(corpus_cases());
    for case in &cases {
        let btf = load(case);
        let original = read::with_btf_bytes(&case.file, ".BTF", |b| Ok(b.to_vec())).unwrap();
        let written = write::to_bytes(&btf);
        assert!(
            written == original,
            "{}: written {} bytes differ from the {} read",
            case.file.display(),
            written.len(),
            original.len()
        );
        // And the bytes we write read back valid.
        let again = validate::parse_checked(&written, btf.base().cloned()).unwrap();
        assert_eq!(again.types(), btf.types());
    }
}

/// Names are printed raw, unescaped (bpftool uses `printf("%s")`): bytes that are not
/// UTF-8, quotes, tabs, percent signs. Odd ids in DATASEC entries (void, past the end)
/// and name offsets past the string section print as bpftool prints them. Such BTF is
/// invalid, so this goes through `dump --no-validate`.
#[test]
fn odd_names_and_ids_print_like_bpftool() {
    use dwarf2btf::btf::*;
    if !need("bpftool") {
        return;
    }
    let mut b = Btf::new(None);
    let names: [&[u8]; 4] = [b"we\xffird", b"it's", b"tab\there", b"100%s%n"];
    for n in names {
        let off = b.push_str(n);
        b.push_type(Type {
            name: off,
            kind: TypeKind::Int {
                size: 4,
                encoding: INT_SIGNED | INT_CHAR,
                offset: 0,
                bits: 32,
            },
        });
    }
    let empty_but_not_zero = b.push_str(b"x"); // "x\0": offset+1 is an empty name
    b.push_type(Type {
        name: StrOffset(empty_but_not_zero.0 + 1),
        kind: TypeKind::Fwd { union: false },
    });
    b.push_type(Type {
        name: StrOffset(1_000_000),
        kind: TypeKind::Ptr(TypeId(1)),
    });
    let sec = b.push_str(b".data");
    b.push_type(Type {
        name: sec,
        kind: TypeKind::Datasec {
            size: 8,
            entries: vec![
                VarSecInfo {
                    type_id: TypeId(0),
                    offset: 0,
                    size: 4,
                },
                VarSecInfo {
                    type_id: TypeId(2),
                    offset: 0,
                    size: 4,
                },
                VarSecInfo {
                    type_id: TypeId(99),
                    offset: 4,
                    size: 4,
                },
            ],
        },
    });
    b.push_type(Type {
        name: sec,
        kind: TypeKind::Func {
            proto: TypeId(1),
            linkage: 7,
        },
    });
    let dir = std::env::temp_dir().join(format!("dwarf2btf-btf-odd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("odd.btf");
    std::fs::write(&f, write::to_bytes(&b)).unwrap();
    let ours = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
        .args(["dump", "--no-validate"])
        .arg(&f)
        .output()
        .unwrap();
    let case = Case {
        file: f,
        base: None,
    };
    let theirs = bpftool_dump(&case);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        ours.status.success(),
        "{}",
        String::from_utf8_lossy(&ours.stderr)
    );
    assert_same_dump(&case, &ours.stdout, &theirs);
}
