//! `true_signature` on a small program of our own (tests/fixtures/true_sig/calls.c)
//! whose static functions the compilers call differently from their source: clang
//! 19 marks them `DW_CC_nocall` (built as objects for five targets), gcc makes
//! `.isra` / `.constprop` clones (linked, so that the clones have their own
//! addresses). Our BTF must be the bytes of pahole master's for the same input,
//! with the default features and with `+true_signature`
//! (`tests/fixtures/true_sig/NAME.FEATURES.btf`).
//!
//! The goldens depend on the compilers' exact output: they were made with Debian
//! 12's clang 19 and gcc 12.2, which `.ci/run` installs. With
//! `DWARF2BTF_PAHOLE=/path/to/pahole` the test also runs that pahole and checks
//! the golden against it; add `DWARF2BTF_BLESS=1` to rewrite the goldens from it.

mod common;
use common::{golden, need, scratch};

use std::path::{Path, PathBuf};
use std::process::Command;

/// One build: golden name, compiler, its arguments, linked or `-c`.
const BUILDS: &[(&str, &str, &[&str], bool)] = &[
    ("x86_64-clang19", "clang-19", &[], false),
    (
        "aarch64-clang19",
        "clang-19",
        &["--target=aarch64-linux-gnu"],
        false,
    ),
    (
        "s390x-clang19",
        "clang-19",
        &["--target=s390x-linux-gnu"],
        false,
    ),
    (
        "i386-clang19",
        "clang-19",
        &["--target=i386-linux-gnu"],
        false,
    ),
    (
        "riscv64-clang19",
        "clang-19",
        &["--target=riscv64-linux-gnu"],
        false,
    ),
    ("x86_64-gcc", "gcc", &[], true),
];

/// The feature lists, by the name the goldens carry.
const FEATURES: &[(&str, &str)] = &[
    ("default", "--btf_features=default"),
    ("true_signature", "--btf_features=+true_signature"),
];

fn fixtures() -> PathBuf {
    common::root().join("tests/fixtures/true_sig")
}

fn build(dir: &Path, name: &str, cc: &str, args: &[&str], linked: bool) -> PathBuf {
    let out = dir.join(name);
    let mut cmd = Command::new(cc);
    cmd.args(args).args(["-O2", "-g"]);
    if linked {
        // Nothing to link against: the program's externs stay undefined.
        cmd.args([
            "-nostdlib",
            "-static",
            "-Wl,-e,entry",
            "-Wl,--unresolved-symbols=ignore-all",
        ]);
    } else {
        cmd.arg("-c");
    }
    let st = cmd
        .arg(fixtures().join("calls.c"))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(st.success(), "{cc} {args:?} failed");
    out
}

/// Runs `prog -J FLAGS --btf_encode_detached=OUT input` and returns OUT's bytes.
fn encode(prog: &Path, flags: &str, input: &Path, out: &Path) -> Vec<u8> {
    let st = Command::new(prog)
        .args(["-J", flags])
        .arg(format!("--btf_encode_detached={}", out.display()))
        .arg(input)
        .status()
        .unwrap_or_else(|e| panic!("running {}: {e}", prog.display()));
    assert!(
        st.success(),
        "{} {flags} failed on {}",
        prog.display(),
        input.display()
    );
    std::fs::read(out).unwrap()
}

#[test]
fn true_signatures_are_pahole_s() {
    let dir = scratch("true_signature_fixtures");
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_dwarf2btf"));
    let pahole = std::env::var_os("DWARF2BTF_PAHOLE").map(PathBuf::from);
    let mut checked = 0;
    for &(name, cc, args, linked) in BUILDS {
        if !need(cc) {
            continue;
        }
        let input = build(&dir, name, cc, args, linked);
        for &(fname, flags) in FEATURES {
            let golden_path = fixtures().join(format!("{name}.{fname}.btf"));
            let fresh = pahole
                .as_ref()
                .map(|p| encode(p, flags, &input, &dir.join("pahole.btf")));
            let want = golden(&golden_path, fresh);
            let got = encode(&ours, flags, &input, &dir.join("ours.btf"));
            assert!(
                got == want,
                "{name} {flags}: not the bytes of {}",
                golden_path.display()
            );
            checked += 1;
        }
    }
    println!("{checked} encodings checked");
}
