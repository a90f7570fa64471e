//! BTF written by compilers (clang's BPF target, gcc -gbtf) covers dump formats the
//! pahole references lack: TYPE_TAG, extern linkage, CHAR and UNKN int encodings,
//! vararg parameters, DATASEC entries. Our `dump --no-validate` must equal bpftool's,
//! reading then writing must give the same bytes, and the validator must name the
//! problems the kernel would refuse these objects for (libbpf fixes them at load).

mod common;
use common::{need, skip};

use dwarf2btf::btf::{read, validate, write};
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/btf_fixtures")
        .join(name)
}

/// Compiles `src` with `cc args`; None (with a message) if the compiler is missing.
fn compile(cc: &str, args: &[&str], src: &str, out_name: &str) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "dwarf2btf-btf-cc-{}-{out_name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(out_name);
    let status = Command::new(cc)
        .args(args)
        .arg(fixture(src))
        .arg("-o")
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        _ => {
            skip(&format!(
                "{cc} {args:?} {src} failed or {cc} is not installed"
            ));
            None
        }
    }
}

fn check(obj: &Path, expected_problems: &[&str]) {
    if need("bpftool") {
        let ours = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
            .args(["dump", "--no-validate"])
            .arg(obj)
            .output()
            .unwrap();
        assert!(
            ours.status.success(),
            "{}",
            String::from_utf8_lossy(&ours.stderr)
        );
        let theirs = Command::new("bpftool")
            .args(["btf", "dump", "file"])
            .arg(obj)
            .output()
            .unwrap();
        assert!(theirs.status.success());
        assert_eq!(
            String::from_utf8_lossy(&ours.stdout),
            String::from_utf8_lossy(&theirs.stdout),
            "dump of {} differs from bpftool's",
            obj.display()
        );
    }
    let bytes = read::with_btf_bytes(obj, ".BTF", |b| Ok(b.to_vec())).unwrap();
    let btf = read::parse(&bytes, None).unwrap();
    assert!(
        write::to_bytes(&btf) == bytes,
        "{}: round trip",
        obj.display()
    );
    let problems: Vec<String> = validate::validate(&btf)
        .iter()
        .map(|p| p.to_string())
        .collect();
    for want in expected_problems {
        assert!(
            problems.iter().any(|p| p.contains(want)),
            "{}: no problem says {want:?}: {problems:#?}",
            obj.display()
        );
    }
    // And the default dump refuses it, naming the file.
    let out = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
        .arg("dump")
        .arg(obj)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&*obj.to_string_lossy()));
    std::fs::remove_dir_all(obj.parent().unwrap()).unwrap();
}

#[test]
fn clang_bpf_object() {
    let Some(obj) = compile(
        "clang",
        &["-target", "bpf", "-g", "-O2", "-c"],
        "kinds.c",
        "kinds.bpf.o",
    ) else {
        return;
    };
    check(
        &obj,
        &[
            "FUNC linkage 2",
            "VAR linkage 2",
            "DATASEC of size 0",
            "parameter #1 of its prototype",
        ],
    );
}

#[test]
fn gcc_btf_object() {
    let Some(obj) = compile("gcc", &["-gbtf", "-c"], "gcc_kinds.c", "gcc_kinds.o") else {
        return;
    };
    check(&obj, &["INT encoding 0x3", "DATASEC of size 0"]);
}
