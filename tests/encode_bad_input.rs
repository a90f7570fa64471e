//! Bad input to the encoder: a clear error naming the file, a non-zero exit, no
//! panic and no output file left behind.

mod common;
use common::skip;

use std::path::{Path, PathBuf};
use std::process::Command;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dwarf2btf-bad-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Compiles `src` into `obj` with gcc and `flags`; false when gcc is missing or fails.
fn gcc(flags: &[&str], src: &Path, obj: &Path) -> bool {
    Command::new("gcc")
        .args(flags)
        .args(["-c", "-o"])
        .arg(obj)
        .arg(src)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// `source` written to `NAME.c` and compiled by gcc with `flags` into `NAME.o`: both
/// paths (None, after a skip, without gcc).
fn compiled(name: &str, source: &str, flags: &[&str]) -> Option<(PathBuf, PathBuf)> {
    let src = tmp(&format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let obj = tmp(&format!("{name}.o"));
    if !gcc(flags, &src, &obj) {
        skip("gcc");
        return None;
    }
    Some((src, obj))
}

fn expect_failure(input: &Path, what: &str) {
    let out_file = tmp(&format!(
        "{}.btf",
        input.file_name().unwrap().to_string_lossy()
    ));
    let out = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
        .args(["-J", "-j2", "--btf_features=default"])
        .arg(format!("--btf_encode_detached={}", out_file.display()))
        .arg(input)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}: {err}", input.display());
    assert!(
        err.contains(&input.display().to_string()),
        "error does not name the file: {err}"
    );
    assert!(err.contains(what), "expected '{what}' in: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out_file.exists(), "output file left behind");
    let leftovers: Vec<_> = std::fs::read_dir(out_file.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

/// Text is refused by the command, and by the library with the typed ELF error
/// that names the file, with the text the command prints.
#[test]
fn not_an_elf() {
    let f = tmp("notelf");
    std::fs::write(&f, b"hello, this is text\n").unwrap();
    expect_failure(&f, "not an ELF file");
    match dwarf2btf::elf::ElfInput::open(&f).map(drop) {
        Err(dwarf2btf::Error::Elf { path, err }) => {
            assert_eq!(path, f);
            assert_eq!(err, dwarf2btf::elf::ElfError::NotElf);
            let shown = dwarf2btf::Error::Elf { path, err }.to_string();
            assert_eq!(shown, format!("{}: not an ELF file", f.display()));
        }
        other => panic!("not the ELF error: {other:?}"),
    }
}

#[test]
fn empty_file() {
    let f = tmp("empty");
    std::fs::write(&f, b"").unwrap();
    expect_failure(&f, "not an ELF file");
}

#[test]
fn missing_file() {
    expect_failure(&tmp("does-not-exist"), "No such file");
}

/// An object compiled without -g, and the same object truncated.
#[test]
fn no_dwarf_and_truncated() {
    let Some((src, obj)) = compiled("nodwarf", "int f(int x) { return x + 1; }\n", &["-O2"]) else {
        return;
    };
    expect_failure(&obj, "no DWARF");

    let dbg = tmp("dwarf.o");
    assert!(gcc(&["-g", "-O2"], &src, &dbg), "gcc -g failed");
    let bytes = std::fs::read(&dbg).unwrap();
    for cut in [10, 64, bytes.len() / 2, bytes.len() - 8] {
        let t = tmp(&format!("trunc{cut}.o"));
        std::fs::write(&t, &bytes[..cut]).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
            .args(["-J", "--btf_encode_detached=/dev/null/x"])
            .arg(&t)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "cut {cut}: {err}");
        assert!(err.contains(&t.display().to_string()), "cut {cut}: {err}");
        assert!(!err.contains("panicked"), "cut {cut}: {err}");
    }
}

/// `obj` with its `.debug_info` replaced by `info` (and no relocations for it), as
/// `NAME.o`; None (after a skip) if objcopy cannot do it.
fn with_debug_info(obj: &Path, info: &[u8], name: &str) -> Option<PathBuf> {
    let garbage = tmp(&format!("{name}.bin"));
    std::fs::write(&garbage, info).unwrap();
    let bad = tmp(&format!("{name}.o"));
    let st = Command::new("objcopy")
        .arg(format!(
            "--update-section=.debug_info={}",
            garbage.display()
        ))
        .arg("--remove-section=.rela.debug_info")
        .arg(obj)
        .arg(&bad)
        .status();
    if !st.map(|s| s.success()).unwrap_or(false) {
        skip("objcopy could not rewrite .debug_info");
        return None;
    }
    Some(bad)
}

/// Garbage in `.debug_info` gives an error naming the file, not a panic.
#[test]
fn corrupt_debug_info() {
    let Some((_, obj)) = compiled("corrupt", "struct s { int a; long b; } v;\n", &["-g"]) else {
        return;
    };
    // A valid DWARF 5 unit header (64 bytes long) followed by DIEs whose
    // abbreviation codes do not exist.
    let mut unit = vec![0x40, 0, 0, 0, 5, 0, 1, 8, 0, 0, 0, 0];
    unit.extend([0x7f; 56]);
    let Some(bad) = with_debug_info(&obj, &unit, "corrupt-bad") else {
        return;
    };
    expect_failure(&bad, "unknown abbreviation");
    // Headers the unit list cannot step over: a length past the section, a
    // version no DWARF has, a second header cut short by the section's end.
    let mut past = unit.clone();
    past[1] = 0x40;
    let mut version = unit.clone();
    version[4] = 9;
    let mut cut = unit.clone();
    cut.extend([8, 0, 0, 0, 5]);
    for (name, info, says) in [
        ("header-past", past, "past the section"),
        ("header-version", version, "DWARF version 9"),
        ("header-cut", cut, "cut short"),
    ] {
        if let Some(bad) = with_debug_info(&obj, &info, name) {
            expect_failure(&bad, says);
        }
    }
}

/// Random damage to `.debug_info` (and `.debug_abbrev`) of a real object: every
/// run ends in a BTF or an error naming the file, never a panic or a hang.
#[test]
fn damaged_dwarf_never_panics() {
    use object::{Object, ObjectSection};
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/types.c");
    let obj = tmp("fuzz.o");
    if !gcc(&["-g", "-O2"], &src, &obj) {
        skip("gcc");
        return;
    }
    let bytes = std::fs::read(&obj).unwrap();
    let ranges: Vec<(u64, u64)> = {
        let f = object::File::parse(&*bytes).unwrap();
        [".debug_info", ".debug_abbrev", ".debug_str"]
            .iter()
            .filter_map(|n| f.section_by_name(n)?.file_range())
            .collect()
    };
    // A small xorshift generator: deterministic, no extra dependency.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let damaged = tmp("fuzz-damaged.o");
    let (mut ok_runs, mut err_runs) = (0, 0);
    for round in 0..300 {
        let mut b = bytes.clone();
        let (start, len) = ranges[round % ranges.len()];
        for _ in 0..1 + next() % 4 {
            let at = usize::try_from(start + next() % len).unwrap();
            b[at] = next().to_le_bytes()[0];
        }
        std::fs::write(&damaged, &b).unwrap();
        let r = dwarf2btf::pipeline::encode_file(&dwarf2btf::pipeline::Options {
            input: damaged.clone(),
            btf_base: None,
            detached: None,
            features: dwarf2btf::encode::Features::from_list("default"),
            lang_exclude: vec![],
            jobs: 1,
        });
        match r {
            Ok(_) => ok_runs += 1,
            Err(e) => {
                assert!(
                    e.to_string().contains(&damaged.display().to_string()),
                    "{e}"
                );
                err_runs += 1;
            }
        }
    }
    println!("damaged inputs: {ok_runs} encoded, {err_runs} refused");
    assert!(err_runs > 0);
}

/// Type units (gcc -fdebug-types-section) refer to types across units: refused
/// with a clear error, never encoded as void.
#[test]
fn type_units_are_refused() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/types.c");
    for (dwarf, what) in [("-gdwarf-4", ".debug_types"), ("-gdwarf-5", "another unit")] {
        let obj = tmp(&format!("tu{dwarf}.o"));
        if !gcc(&["-g", dwarf, "-fdebug-types-section"], &src, &obj) {
            skip("gcc");
            return;
        }
        expect_failure(&obj, what);
    }
}
