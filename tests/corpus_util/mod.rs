//! Where the corpus tests find their inputs: the project's `shared` folder (the pahole
//! references, btfcmp.py), the unpacked corpus, and unique temporary names; and, for
//! the tests that build small objects themselves, scratch folders and a tool runner;
//! and, for the memory test and the engine bench (which includes this file by path),
//! GNU time and the four-copy kernel. Each user compiles all of it and uses a part.
#![allow(dead_code)] // each test binary compiles this module and uses only a part

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The flags `scripts/Makefile.btf` passes (without `--lang_exclude=rust`).
pub const KFLAGS: &str = "--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs";

/// GNU time, which reports a run's peak RSS.
pub const GNU_TIME: &str = "/usr/bin/time";

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The project's `shared` folder: `../shared` from the main checkout, further up
/// from a worktree.
pub fn shared() -> Option<PathBuf> {
    root()
        .ancestors()
        .skip(1)
        .map(|a| a.join("shared"))
        .find(|d| d.join("tools/btfcmp.py").exists())
}

/// The unpacked corpus: `$DWARF2BTF_CORPUS`, or what `shared/corpus/unpack.sh` prints.
pub fn corpus() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("DWARF2BTF_CORPUS") {
        let d = PathBuf::from(d);
        return d.join("vmlinux").exists().then_some(d);
    }
    let script = shared()?.join("corpus/unpack.sh");
    let out = Command::new("sh").arg(&script).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let d = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string());
    d.join("vmlinux").exists().then_some(d)
}

/// pahole v1.31's reference outputs.
pub fn reference() -> Option<PathBuf> {
    let d = shared()?.join("reference/pahole-1.31");
    d.exists().then_some(d)
}

/// A temporary file name unique to this call (tests run on parallel threads).
pub fn tmp(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("dwarf2btf-test-{}-{n}-{name}", std::process::id()))
}

/// A fresh, empty scratch folder `name` under cargo's temporary folder for tests.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a tool (gcc, ld) in `dir`, asserting success; `None` (and a skip message)
/// when it cannot be run at all.
pub fn run(cmd: &str, args: &[&str], dir: &Path) -> Option<()> {
    let out = match Command::new(cmd).args(args).current_dir(dir).output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("SKIP: cannot run {cmd}: {e}");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(())
}

/// The corpus and pahole's references, or `None` after a skip message.
pub fn corpus_and_reference() -> Option<(PathBuf, PathBuf)> {
    let (Some(c), Some(r)) = (corpus(), reference()) else {
        println!("skipping: corpus or pahole reference files not found");
        return None;
    };
    Some((c, r))
}

/// Encodes `input` (split over `base`, if given) with `-J -j2` and `flags` into a new
/// temporary file, asserting success; returns that file.
pub fn encode_detached(flags: &[&str], input: &Path, base: Option<&Path>) -> PathBuf {
    let out = tmp("out.btf");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"));
    cmd.args(["-J", "-j2"]).args(flags);
    if let Some(b) = base {
        cmd.arg("--btf_base").arg(b);
    }
    let st = cmd
        .arg(format!("--btf_encode_detached={}", out.display()))
        .arg(input)
        .status()
        .unwrap();
    assert!(st.success(), "dwarf2btf failed on {}", input.display());
    out
}

/// Compares `ours` with `reference` (both over `base`, if given) by btfcmp.py with
/// the `extra` arguments, prints the report and returns its verdict (last line);
/// `None` (and a skip message) when python3 cannot be run.
pub fn btfcmp_verdict(
    ours: &Path,
    reference: &Path,
    base: Option<&Path>,
    extra: &[&str],
) -> Option<String> {
    let mut cmp = Command::new("python3");
    cmp.arg(shared().unwrap().join("tools/btfcmp.py"))
        .arg(ours)
        .arg(reference)
        .args(extra);
    if let Some(b) = base {
        cmp.arg("--base").arg(b);
    }
    let Ok(out) = cmp.output() else {
        println!("skipping: python3 not available");
        return None;
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{text}{}", String::from_utf8_lossy(&out.stderr));
    Some(text.lines().last().unwrap_or("").trim().to_string())
}

/// The arguments that encode `input` at `-jJOBS` with the kernel's flags (as
/// `scripts/Makefile.btf`, without Rust units) into the detached file `out`.
pub fn kernel_args(jobs: usize, input: &Path, out: &Path) -> Vec<String> {
    vec![
        "-J".into(),
        format!("-j{jobs}"),
        KFLAGS.into(),
        "--lang_exclude=rust".into(),
        format!("--btf_encode_detached={}", out.display()),
        input.display().to_string(),
    ]
}

/// Runs `prog args` under GNU time, asserting success, and returns the figures that
/// `fields` (GNU time's `%` fields separated by spaces, e.g. `%e %M`) asks for.
pub fn gnu_time<A: AsRef<OsStr>>(prog: &Path, args: &[A], fields: &str) -> Vec<f64> {
    let out = Command::new(GNU_TIME)
        .args(["-f", &format!("@@ {fields}")])
        .arg(prog)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {GNU_TIME}: {e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{} failed: {err}", prog.display());
    let line = err
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("@@ "))
        .expect("GNU time's line");
    line.split_whitespace()
        .map(|x| x.parse().expect("GNU time's figure"))
        .collect()
}

/// A copy of `vmlinux`, written in `dir`, whose `.debug_info` is its own four times
/// over (each copy's unit headers point into the one `.debug_abbrev`, so every copy
/// stays valid). `None` when objcopy cannot be run or fails.
pub fn four_copies(vmlinux: &Path, dir: &Path) -> Option<PathBuf> {
    let one = dir.join("debug_info.1");
    let four = dir.join("debug_info.4");
    let out = dir.join("vmlinux.4x");
    let dumped = Command::new("objcopy")
        .arg(format!("--dump-section=.debug_info={}", one.display()))
        .arg(vmlinux)
        .arg(dir.join("scratch"))
        .status()
        .ok()?;
    if !dumped.success() {
        return None;
    }
    let data = std::fs::read(&one).unwrap();
    // Written copy by copy: no buffer of four times the section.
    let mut f = std::fs::File::create(&four).unwrap();
    for _ in 0..4 {
        std::io::Write::write_all(&mut f, &data).unwrap();
    }
    drop((data, f));
    let updated = Command::new("objcopy")
        .arg(format!("--update-section=.debug_info={}", four.display()))
        .arg(vmlinux)
        .arg(&out)
        .status()
        .ok()?;
    for f in [one, four, dir.join("scratch")] {
        let _ = std::fs::remove_file(f);
    }
    updated.success().then_some(out)
}

/// A test that cannot run for want of `what` (an input, a tool): under
/// `DWARF2BTF_REQUIRE_DATA=1`, as CI sets it, that is a failure; otherwise it prints
/// `SKIP: what` and the caller returns.
pub fn skip(what: &str) {
    if std::env::var_os("DWARF2BTF_REQUIRE_DATA").is_some_and(|v| v == "1") {
        panic!("required test input missing: {what} (DWARF2BTF_REQUIRE_DATA=1)");
    }
    eprintln!("SKIP: {what}");
}

/// The folder of the clang-built kernel `case` (`c1-clang`, `c2-thinlto`: vmlinux,
/// tcp_bic.ko, tcp_bbr.ko): `$DWARF2BTF_CLANG_KERNELS/case`, else `/root/clang/case`,
/// else the corpus's `clang/case.tar.zst` unpacked once under cargo's temporary
/// folder. `None` when none is there.
pub fn clang_case(case: &str) -> Option<PathBuf> {
    let roots = [
        std::env::var_os("DWARF2BTF_CLANG_KERNELS").map(PathBuf::from),
        Some(PathBuf::from("/root/clang")),
    ];
    for root in roots.into_iter().flatten() {
        let dir = root.join(case);
        if dir.join("vmlinux").is_file() {
            return Some(dir);
        }
    }
    let packed = shared()?.join(format!("corpus/clang/{case}.tar.zst"));
    if !packed.is_file() {
        return None;
    }
    let into = Path::new(env!("CARGO_TARGET_TMPDIR")).join("clang");
    let dir = into.join(case);
    if !dir.join("vmlinux").is_file() {
        // Unpacked beside and renamed, so that tests running at once never see half.
        let part = into.join(format!("{case}.part{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&part);
        std::fs::create_dir_all(&part).ok()?;
        let ok = Command::new("tar")
            .args(["--zstd", "-xf"])
            .arg(&packed)
            .arg("-C")
            .arg(&part)
            .status()
            .ok()?
            .success();
        if !ok || std::fs::rename(&part, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&part);
            return dir.join("vmlinux").is_file().then_some(dir);
        }
    }
    Some(dir)
}
