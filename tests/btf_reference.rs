//! Every pahole reference file (and the corpus's own `.BTF` sections): our dump is
//! byte for byte bpftool's, reading then writing gives the same bytes, and the
//! validator accepts them.

mod btf_support;

use btf_support::{corpus_cases, have_bpftool, reference_cases, Case};
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
    if !have_bpftool() {
        eprintln!("SKIP: bpftool not installed (apt-get install bpftool)");
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
    if !have_bpftool() {
        eprintln!("SKIP: bpftool not installed");
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
