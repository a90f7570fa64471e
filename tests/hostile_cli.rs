//! Hostile inputs on the command line: every mode, fed a missing file, a directory, an
//! empty file, a truncated ELF, garbage after an ELF magic, scribbled section headers,
//! a bad base BTF or an unknown flag, must exit non-zero with a message naming the
//! file and the problem, never panic, and leave no file behind (hidden temp files
//! included) in the folder it would write to.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A small x86-64 relocatable object with DWARF (gcc -g -O2 -c fuzz/c/types.c).
const ELF_SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/elf/types.gcc.o");
/// A valid split BTF and the base it was written over.
const SPLIT_BTF: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fuzz/seeds/btf/vsock_loopback.distilled.BTF"
);
const SPLIT_BASE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/data/base.btf");

/// One way of running the tool on an input: the arguments, given the input, an
/// optional base and the folder where outputs go.
struct Mode {
    name: &'static str,
    /// An input this mode accepts over the base `SPLIT_BASE`.
    good_input: &'static str,
    args: fn(input: &Path, base: Option<&Path>, out_dir: &Path) -> Vec<OsString>,
}

fn os(parts: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    parts.iter().map(|p| p.as_ref().to_os_string()).collect()
}

fn modes() -> Vec<Mode> {
    vec![
        Mode {
            name: "dump",
            good_input: SPLIT_BTF,
            args: |i, b, _| match b {
                Some(b) => os(&[&"dump", &"--base-btf", &b, &i]),
                None => os(&[&"dump", &i]),
            },
        },
        Mode {
            name: "dump --no-validate",
            good_input: SPLIT_BTF,
            args: |i, b, _| match b {
                Some(b) => os(&[&"dump", &"--no-validate", &"--base-btf", &b, &i]),
                None => os(&[&"dump", &"--no-validate", &i]),
            },
        },
        Mode {
            name: "encode",
            good_input: ELF_SEED,
            args: |i, b, o| {
                let out = o.join("out.btf");
                let mut a = os(&[&"-J", &"-j2"]);
                a.push(format!("--btf_encode_detached={}", out.display()).into());
                if let Some(b) = b {
                    a.extend(os(&[&"--btf_base", &b]));
                }
                a.push(i.into());
                a
            },
        },
        Mode {
            name: "dedup",
            good_input: SPLIT_BTF,
            args: |i, b, o| {
                let out = o.join("out.btf");
                match b {
                    Some(b) => os(&[&"dedup", &i, &"-o", &out, &"--base-btf", &b]),
                    None => os(&[&"dedup", &i, &"-o", &out]),
                }
            },
        },
        Mode {
            name: "validate",
            good_input: SPLIT_BTF,
            args: |i, b, _| match b {
                Some(b) => os(&[&"validate", &"--base-btf", &b, &i]),
                None => os(&[&"validate", &i]),
            },
        },
    ]
}

/// A bad base: file name, contents (None: missing), words its message may contain.
type BaseCase = (&'static str, Option<Vec<u8>>, &'static [&'static str]);

/// A fresh, empty folder for one case.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("hostile_cli/{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every entry of `dir` (hidden ones too), sorted.
fn listing(dir: &Path) -> Vec<OsString> {
    let mut v: Vec<OsString> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    v.sort();
    v
}

fn run(args: &[OsString]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
        .args(args)
        .output()
        .expect("run dwarf2btf")
}

/// Checks that a run failed cleanly: non-zero exit, no panic, stderr naming `names`
/// (the file) and containing one of `problems` (case-insensitive), and `out_dir`
/// holding exactly `before`.
fn expect_clean_failure(
    what: &str,
    out: &Output,
    names: &str,
    problems: &[&str],
    out_dir: &Path,
    before: &[OsString],
) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ctx = format!("{what}: exit {:?}, stderr:\n{stderr}", out.status.code());
    assert!(!out.status.success(), "{ctx}\nexpected failure");
    assert!(out.status.code().is_some(), "{ctx}\nkilled by a signal");
    assert!(!stderr.contains("panicked at"), "{ctx}\npanicked");
    assert!(!stderr.contains("RUST_BACKTRACE"), "{ctx}\npanicked");
    assert!(
        stderr.contains(names),
        "{ctx}\nstderr does not name {names}"
    );
    let low = stderr.to_lowercase();
    assert!(
        problems.iter().any(|p| low.contains(&p.to_lowercase())),
        "{ctx}\nstderr names none of the problems {problems:?}"
    );
    assert_eq!(
        listing(out_dir),
        before,
        "{ctx}\nfiles left behind in {out_dir:?}"
    );
}

/// The damaged inputs, each with the words one of which its message must contain.
fn damaged_inputs(dir: &Path) -> Vec<(&'static str, PathBuf, &'static [&'static str])> {
    let seed = std::fs::read(ELF_SEED).expect("fuzz/seeds/elf/types.gcc.o");
    let mut v: Vec<(&'static str, PathBuf, &'static [&'static str])> = Vec::new();
    let mut add =
        |name: &'static str, bytes: Option<Vec<u8>>, problems: &'static [&'static str]| {
            let p = dir.join(name);
            if let Some(b) = bytes {
                std::fs::write(&p, b).unwrap();
            }
            v.push((name, p, problems));
        };
    add("missing.o", None, &["no such file"]);
    add("empty.o", Some(Vec::new()), &["empty"]);
    add(
        "truncated.o",
        Some(seed[..seed.len() / 2].to_vec()),
        &["elf", "truncated"],
    );
    let mut garbage = b"\x7fELF".to_vec();
    garbage.extend((0..4000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13).to_le_bytes()[0]));
    add("garbage.o", Some(garbage), &["elf"]);
    add("magic_only.o", Some(b"\x7fELF".to_vec()), &["elf"]);
    // Section headers overwritten with a pattern (the ELF header left intact).
    let mut scribbled = seed.clone();
    let shoff = usize::try_from(u64::from_le_bytes(seed[0x28..0x30].try_into().unwrap())).unwrap();
    for (i, b) in scribbled[shoff..].iter_mut().enumerate() {
        *b = i.to_le_bytes()[0].wrapping_mul(37).wrapping_add(11);
    }
    add("scribbled_shdrs.o", Some(scribbled), &["elf", "section"]);
    // Section header table pointing past the end of the file.
    let mut past = seed.clone();
    past[0x28..0x30].copy_from_slice(&(seed.len() as u64 * 4).to_le_bytes());
    add("shoff_past_end.o", Some(past), &["elf", "section"]);
    // Found by the elf_reader fuzz target: a compressed .debug_str whose header
    // claims 2^56 bytes.
    let claim = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/regressions/elf_reader/compressed-debug-str-claims-2p56-bytes"
    );
    add(
        "compressed_claim.o",
        Some(std::fs::read(claim).unwrap()),
        &["compress", "elf"],
    );
    v
}

#[test]
fn damaged_files_fail_cleanly_in_every_mode() {
    for mode in modes() {
        let dir = scratch(&format!("damaged_{}", mode.name.replace(' ', "_")));
        let inputs = damaged_inputs(&dir);
        let before = listing(&dir);
        for (name, path, problems) in &inputs {
            let out = run(&(mode.args)(path, None, &dir));
            let what = format!("{} {name}", mode.name);
            expect_clean_failure(
                &what,
                &out,
                &path.display().to_string(),
                problems,
                &dir,
                &before,
            );
        }
    }
}

#[test]
fn directory_input_fails_cleanly() {
    for mode in modes() {
        let dir = scratch(&format!("dir_{}", mode.name.replace(' ', "_")));
        let input = dir.join("a_directory");
        std::fs::create_dir(&input).unwrap();
        let before = listing(&dir);
        let out = run(&(mode.args)(&input, None, &dir));
        expect_clean_failure(
            mode.name,
            &out,
            &input.display().to_string(),
            &["directory"],
            &dir,
            &before,
        );
    }
}

#[test]
fn bad_base_btf_fails_cleanly() {
    for mode in modes() {
        let dir = scratch(&format!("base_{}", mode.name.replace(' ', "_")));
        let input = dir.join("input");
        std::fs::copy(mode.good_input, &input).unwrap();
        // Sanity: with the right base the split BTF is fine.
        let good = run(&(mode.args)(&input, Some(Path::new(SPLIT_BASE)), &dir));
        assert!(
            good.status.success(),
            "{}: {}",
            mode.name,
            String::from_utf8_lossy(&good.stderr)
        );
        // The good run's output (dedup) must not hide a leftover of the bad runs.
        let _ = std::fs::remove_file(dir.join("out.btf"));
        let base_bytes = std::fs::read(SPLIT_BASE).unwrap();
        let mut bad_magic = base_bytes.clone();
        bad_magic[0] = 0;
        let truncated = base_bytes[..base_bytes.len() / 2].to_vec();
        let mut huge_type_len = base_bytes.clone();
        huge_type_len[12..16].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        let cases: [BaseCase; 5] = [
            ("bad_magic.btf", Some(bad_magic), &["magic"]),
            ("truncated.btf", Some(truncated), &["truncated", "past"]),
            (
                "huge_type_len.btf",
                Some(huge_type_len),
                &["truncated", "past"],
            ),
            ("empty.btf", Some(Vec::new()), &["empty"]),
            ("missing.btf", None, &["no such file"]),
        ];
        for (name, bytes, _) in &cases {
            if let Some(b) = bytes {
                std::fs::write(dir.join(name), b).unwrap();
            }
        }
        // A directory as the base: every mode reads bases through the same reader.
        let base_dir = dir.join("a_directory.btf");
        std::fs::create_dir(&base_dir).unwrap();
        let before = listing(&dir);
        let out = run(&(mode.args)(&input, Some(&base_dir), &dir));
        expect_clean_failure(
            &format!("{} --base a directory", mode.name),
            &out,
            &base_dir.display().to_string(),
            &["is a directory"],
            &dir,
            &before,
        );
        for (name, _, problems) in &cases {
            let base = dir.join(name);
            let out = run(&(mode.args)(&input, Some(&base), &dir));
            let what = format!("{} --base {name}", mode.name);
            expect_clean_failure(
                &what,
                &out,
                &base.display().to_string(),
                problems,
                &dir,
                &before,
            );
        }
        // A valid BTF that is not this file's base: the split BTF's ids and string
        // offsets then point at the wrong things (or past the end).
        let wrong = dir.join("wrong_base.btf");
        std::fs::copy(
            concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/btf/gcc_kinds.btf"),
            &wrong,
        )
        .unwrap();
        let out = run(&(mode.args)(&input, Some(&wrong), &dir));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked at"), "{}: {stderr}", mode.name);
    }
}

#[test]
fn unknown_flag_fails_cleanly() {
    for mode in modes() {
        let dir = scratch(&format!("flag_{}", mode.name.replace(' ', "_")));
        let input = dir.join("input");
        std::fs::copy(mode.good_input, &input).unwrap();
        let before = listing(&dir);
        let mut args = (mode.args)(&input, Some(Path::new(SPLIT_BASE)), &dir);
        args.insert(1, "--no-such-flag".into());
        let out = run(&args);
        expect_clean_failure(
            mode.name,
            &out,
            "--no-such-flag",
            &["unexpected argument", "unknown", "unrecognized"],
            &dir,
            &before,
        );
    }
}

#[test]
fn no_arguments_and_unknown_mode_fail_cleanly() {
    let dir = scratch("no_args");
    for args in [vec![], vec!["dump"], vec!["validate"], vec!["dedup"]] {
        let out = run(&args.iter().map(OsString::from).collect::<Vec<_>>());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: succeeded");
        assert!(!stderr.contains("panicked at"), "{args:?}: {stderr}");
        assert!(
            stderr.to_lowercase().contains("usage"),
            "{args:?}: {stderr}"
        );
        assert!(listing(&dir).is_empty());
    }
    // Without a mode the arguments are pahole's: an unknown word is the input file
    // (or, without -J, a usage error).
    let out = run(&[OsString::from("frobnicate")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && !stderr.contains("panicked at"),
        "{stderr}"
    );
    assert!(
        stderr.contains("frobnicate") || stderr.contains("usage"),
        "{stderr}"
    );
}

/// Modes that write a file, given an output path that cannot be written (its folder
/// is missing, or it is a folder): a clean error naming it, nothing left behind.
#[test]
fn unwritable_output_fails_cleanly() {
    type Writer = fn(&Path, &Path) -> Vec<OsString>;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let writers: [(&str, Writer, &str); 2] = [
        (
            "dedup",
            |i, o| os(&[&"dedup", &i, &"-o", &o]),
            "fuzz/data/base.btf",
        ),
        (
            "encode",
            |i, o| {
                let mut a = os(&[&"-J"]);
                a.push(format!("--btf_encode_detached={}", o.display()).into());
                a.push(i.into());
                a
            },
            "fuzz/seeds/elf/types.gcc.o",
        ),
    ];
    for (name, args, seed) in writers {
        let dir = scratch(&format!("unwritable_{name}"));
        let input = dir.join("input");
        std::fs::copy(root.join(seed), &input).unwrap();
        let a_dir = dir.join("a_dir");
        std::fs::create_dir(&a_dir).unwrap();
        let before = listing(&dir);
        for out in [dir.join("missing_dir/out.btf"), a_dir.clone()] {
            let res = run(&args(&input, &out));
            let what = format!("{name} -> {}", out.display());
            expect_clean_failure(
                &what,
                &res,
                &out.display().to_string(),
                &["no such file", "directory"],
                &dir,
                &before,
            );
            assert!(listing(&a_dir).is_empty(), "{what}: wrote into {a_dir:?}");
        }
    }
}
