//! LTO builds: a program of three units sharing types (tests/fixtures/lto), built
//! by clang and lld with ThinLTO and with full LTO, whose units refer to each
//! other's DIEs (`DW_FORM_ref_addr`), and a module-like object (`ld.lld -r` of
//! ThinLTO objects). Encoded at -j1, -j2 and -j8 (with as many workers), the BTF
//! must be byte for byte what the reference pahole wrote for the same build
//! (the `.btf` goldens beside the sources: `pahole -J -j1 FLAGS`, the module split
//! over `thin.btf`). The goldens hold for Debian's clang 14 and lld 14, which CI
//! installs.
//!
//! To remake the goldens after changing a source, build as `build()` does and run
//! the reference pahole (see `../shared/reference/pahole-1.31/README.md`).

mod common;

use dwarf2btf::encode::Features;
use dwarf2btf::pipeline::{encode_bytes, Options, Tuning};
use std::path::{Path, PathBuf};

const KFLAGS: &str = "encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lto")
}

/// lld as clang 14 finds it: `ld.lld` or Debian's versioned `ld.lld-14`.
fn lld() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for name in ["ld.lld", "ld.lld-14"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// The fixture's builds in a scratch folder: `thin` and `full` (the program with
/// `-flto=thin` and `-flto`) and `mod.o` (`ld.lld -r` of b.c and d.c built with
/// `-flto=thin`). None, after `skip`, without clang or lld.
fn build() -> Option<PathBuf> {
    let Some(lld) = lld() else {
        common::skip("ld.lld (Debian package lld-14)");
        return None;
    };
    let lld = lld.to_string_lossy().into_owned();
    let out = common::scratch("lto-fixtures");
    let src = fixtures();
    let o = |n: &str| out.join(n).to_string_lossy().into_owned();
    let ld_path = format!("--ld-path={lld}");
    for (name, lto) in [("thin", "-flto=thin"), ("full", "-flto")] {
        let args = [
            "-g",
            "-O2",
            lto,
            "-fuse-ld=lld",
            &ld_path,
            "-o",
            &o(name),
            "a.c",
            "b.c",
            "c.c",
        ];
        common::run_in(&src, "clang", &args)?;
    }
    for u in ["b", "d"] {
        let args = [
            "-g",
            "-O2",
            "-flto=thin",
            "-c",
            "-o",
            &o(&format!("{u}.o")),
            &format!("{u}.c"),
        ];
        common::run_in(&src, "clang", &args)?;
    }
    common::run_in(&src, &lld, &["-r", "-o", &o("mod.o"), &o("b.o"), &o("d.o")])?;
    Some(out)
}

fn check(input: &Path, base: Option<&Path>, features: &str, golden: &str) {
    let want = std::fs::read(fixtures().join(golden)).unwrap();
    for jobs in [1, 2, 8] {
        let got = common::encode_in_process(input, base, features, jobs);
        assert!(
            got == want,
            "{} -j{jobs} ({features}): {} bytes, the reference pahole's {golden} has {}",
            input.display(),
            got.len(),
            want.len()
        );
    }
}

#[test]
fn lto_programs_and_module_equal_pahole() {
    let Some(dir) = build() else { return };
    for name in ["thin", "full"] {
        let input = dir.join(name);
        let merged = {
            let elf = dwarf2btf::elf::ElfInput::open(&input).unwrap();
            let dw = dwarf2btf::dwarf::DwarfInput::new(&elf).unwrap();
            let groups = dwarf2btf::dwarf::lto::groups(&dw).unwrap();
            assert!(
                groups.len() < dw.unit_count(),
                "{name}: no unit refers to another ({} units): the fixture tests nothing",
                dw.unit_count()
            );
            dwarf2btf::dwarf::lto::merges_units(&elf, &dw).unwrap()
        };
        assert!(merged, "{name}: pahole merges the units of an LTO build");
        check(&input, None, KFLAGS, &format!("{name}.btf"));
        check(
            &input,
            None,
            &format!("{KFLAGS},global_var"),
            &format!("{name}.global_var.btf"),
        );
    }
    let base = fixtures().join("thin.btf");
    check(&dir.join("mod.o"), Some(&base), KFLAGS, "mod.btf");
}

/// dwz-compressed DWARF (partial units imported by `DW_FORM_ref_addr`, which makes
/// pahole merge the units; pahole 1.31 then writes no BTF at all) is refused with
/// an error naming the construct, never encoded.
#[test]
fn dwz_compressed_dwarf_is_refused() {
    let Some(lld) = lld() else {
        common::skip("ld.lld (Debian package lld-14)");
        return;
    };
    let out = common::scratch("lto-dwz");
    let bin = out.join("prog").to_string_lossy().into_owned();
    let ld_path = format!("--ld-path={}", lld.display());
    // dwz reads DWARF 4 only.
    let args = [
        "-gdwarf-4",
        "-O2",
        "-fuse-ld=lld",
        &ld_path,
        "-o",
        &bin,
        "a.c",
        "b.c",
        "c.c",
    ];
    if common::run_in(&fixtures(), "clang", &args).is_none()
        || common::run_in(&out, "dwz", &[&bin]).is_none()
    {
        return;
    }
    let opts = Options {
        input: PathBuf::from(&bin),
        btf_base: None,
        detached: None,
        features: Features::from_list(KFLAGS),
        lang_exclude: vec![],
        jobs: 1,
    };
    let err = encode_bytes(&opts, &Tuning::default()).expect_err("dwz output must be refused");
    let msg = err.to_string();
    assert!(
        msg.contains("DW_TAG_partial_unit") && msg.contains("dwz") && msg.contains("prog"),
        "{msg}"
    );
}
