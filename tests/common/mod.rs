//! What every integration test shares: where its inputs are (the project's `shared`
//! folder, the unpacked corpus, pahole's references, Debian's kernels), one skip
//! policy, temporary folders, and running tools. The thematic helpers are the
//! submodules; each test binary compiles all of it and uses a part.
//!
//! Skip policy: a test that lacks an input or a tool calls [`skip`] and returns.
//! Under `DWARF2BTF_REQUIRE_DATA=1` (CI sets it) that is a failure, so CI cannot pass
//! a test that did not run. The locators below call [`skip`] themselves when they
//! find nothing.
#![allow(dead_code)] // each test binary uses a different part

pub mod btf;
pub mod dedup;
pub mod elf;
pub mod encode;

// One flat namespace for the tests; each test binary uses a part of it.
#[allow(unused_imports)]
pub use {btf::*, dedup::*, elf::*, encode::*};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The flags `scripts/Makefile.btf` passes (without `--lang_exclude=rust`).
pub const KFLAGS: &str = "--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs";

/// The same features, without the switch.
pub const KFEATURES: &str = "encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,\
                             consistent_func,decl_tag_kfuncs";

/// The corpus modules.
pub const MODULES: [&str; 3] = ["vsock_loopback", "nf_tables", "nf_conntrack"];

/// A test that cannot run for want of `what` (an input, a tool): under
/// `DWARF2BTF_REQUIRE_DATA=1`, as CI sets it, that is a failure; otherwise it prints
/// `SKIP: what` and the caller returns.
pub fn skip(what: &str) {
    if std::env::var_os("DWARF2BTF_REQUIRE_DATA").is_some_and(|v| v == "1") {
        panic!("required test input missing: {what} (DWARF2BTF_REQUIRE_DATA=1)");
    }
    eprintln!("SKIP: {what}");
}

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The project's `shared` folder: `$DWARF2BTF_SHARED`, else the nearest `shared`
/// beside the checkout or one of its parents (a worktree lies deeper).
pub fn shared() -> Option<PathBuf> {
    let found = shared_candidates().find(|d| d.join("tools/btfcmp.py").is_file());
    if found.is_none() {
        skip("the shared folder (set DWARF2BTF_SHARED)");
    }
    found
}

/// Where the `shared` folder may be: `$DWARF2BTF_SHARED`, then `shared` beside each
/// folder above the checkout, nearest first.
fn shared_candidates() -> impl Iterator<Item = PathBuf> {
    std::env::var_os("DWARF2BTF_SHARED")
        .map(PathBuf::from)
        .into_iter()
        .chain(root().ancestors().skip(1).map(|a| a.join("shared")))
}

/// `btfcmp.py` of the shared tools.
pub fn btfcmp() -> Option<PathBuf> {
    shared().map(|s| s.join("tools/btfcmp.py"))
}

/// The unpacked corpus: `$DWARF2BTF_CORPUS`, else what `shared/corpus/unpack.sh`
/// prints (it unpacks on first use).
pub fn corpus() -> Option<PathBuf> {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let dir = DIR
        .get_or_init(|| {
            if let Some(d) = std::env::var_os("DWARF2BTF_CORPUS") {
                return Some(PathBuf::from(d));
            }
            let script = shared()?.join("corpus/unpack.sh");
            let out = Command::new("sh").arg(&script).output().ok()?;
            out.status
                .success()
                .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        })
        .clone()
        .filter(|d| d.join("vmlinux").is_file());
    if dir.is_none() {
        skip("the corpus (set DWARF2BTF_CORPUS or run shared/corpus/unpack.sh)");
    }
    dir
}

/// The corpus vmlinux.
pub fn vmlinux() -> Option<PathBuf> {
    corpus().map(|d| d.join("vmlinux"))
}

/// pahole v1.31's reference outputs: `$DWARF2BTF_REFERENCE`, else
/// `shared/reference/pahole-1.31`.
pub fn reference() -> Option<PathBuf> {
    let dir = match std::env::var_os("DWARF2BTF_REFERENCE") {
        Some(d) => Some(PathBuf::from(d)),
        None => shared_candidates()
            .map(|s| s.join("reference/pahole-1.31"))
            .find(|d| d.is_dir()),
    }
    .filter(|d| d.join("vmlinux-cloud.kernel-flags.btf").is_file());
    if dir.is_none() {
        skip("pahole's reference outputs (set DWARF2BTF_REFERENCE)");
    }
    dir
}

/// A large kernel download (not in CI) is missing: a failure under
/// `DWARF2BTF_REQUIRE_KERNELS=1`, else `SKIP: what` (`DWARF2BTF_REQUIRE_DATA` alone
/// does not require them).
pub fn skip_kernel(what: &str) {
    if std::env::var_os("DWARF2BTF_REQUIRE_KERNELS").is_some_and(|v| v == "1") {
        panic!("required kernel input missing: {what} (DWARF2BTF_REQUIRE_KERNELS=1)");
    }
    eprintln!("SKIP: {what}");
}

/// Debian's kernel for `arch` (`shared/corpus/debian-kernel.sh ARCH`), if its
/// `files` are in `$DWARF2BTF_KERNELS/ARCH` (default `~/.cache/dwarf2btf-kernels`);
/// None after [`skip_kernel`].
pub fn debian_kernel(arch: &str, files: &[&str]) -> Option<PathBuf> {
    kernel_dir("DWARF2BTF_KERNELS", ".cache/dwarf2btf-kernels", arch, files)
}

/// The folder of the clang-built kernel `case` (`c1-clang`, `c2-thinlto`: vmlinux,
/// tcp_bic.ko, tcp_bbr.ko): `$DWARF2BTF_CLANG/case` (default `~/clang/case`), else
/// the corpus's `clang/case.tar.zst` unpacked once
/// under cargo's temporary folder (so that CI, which has the corpus, runs the
/// tests over it). `None` (after a skip) when neither is there.
pub fn clang_case(case: &str) -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));
    let dir = std::env::var_os("DWARF2BTF_CLANG")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join("clang"))
        .join(case);
    if dir.join("vmlinux").is_file() {
        return Some(dir);
    }
    let packed = shared()?.join(format!("corpus/clang/{case}.tar.zst"));
    if !packed.is_file() {
        skip(&format!(
            "the {case} kernel ({} or {})",
            dir.display(),
            packed.display()
        ));
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
            if !dir.join("vmlinux").is_file() {
                skip(&format!(
                    "the {case} kernel: unpacking {} failed",
                    packed.display()
                ));
                return None;
            }
        }
    }
    Some(dir)
}

fn kernel_dir(var: &str, default: &str, case: &str, files: &[&str]) -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));
    let dir = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(default))
        .join(case);
    match files.iter().find(|f| !dir.join(f).is_file()) {
        Some(f) => {
            skip_kernel(&format!("{} (set {var})", dir.join(f).display()));
            None
        }
        None => Some(dir),
    }
}

/// The corpus and pahole's references.
pub fn corpus_and_reference() -> Option<(PathBuf, PathBuf)> {
    Some((corpus()?, reference()?))
}

/// Whether `tool` can be run (for optional alternatives; a tool a check needs is
/// asked for with [`need`]).
pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether `tool`, which the caller's check needs, can be run; a skip when not.
pub fn need(tool: &str) -> bool {
    let ok = match tool {
        // bpftool answers `version`, not `--version`.
        "bpftool" => Command::new(tool)
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success()),
        _ => have(tool),
    };
    if !ok {
        skip(&format!("{tool} cannot be run"));
    }
    ok
}

/// A temporary file name unique to this call (tests run on parallel threads).
pub fn tmp(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("dwarf2btf-test-{}-{n}-{name}", std::process::id()))
}

/// A fresh, empty scratch folder `name` under cargo's temporary folder for tests.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A temporary folder removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "dwarf2btf-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }
    /// Names of the files in the folder, sorted.
    pub fn listing(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Make read-only test folders removable again.
        let _ =
            std::fs::set_permissions(&self.0, std::os::unix::fs::PermissionsExt::from_mode(0o755));
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The dwarf2btf binary under test.
pub fn dwarf2btf() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
}

/// Runs a command; returns (success, stdout, stderr).
pub fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Copies `src` into `dir` (as `name`) and returns the copy.
pub fn copy_to(src: &Path, dir: &TempDir, name: &str) -> PathBuf {
    let dst = dir.join(name);
    std::fs::copy(src, &dst).unwrap();
    dst
}

/// Runs `prog args` (with `LD_LIBRARY_PATH=lib`, if given), asserting success;
/// returns its stdout.
pub fn stdout_of(prog: &Path, args: &[&std::ffi::OsStr], lib: Option<&Path>) -> Vec<u8> {
    let mut cmd = Command::new(prog);
    cmd.args(args);
    if let Some(lib) = lib {
        cmd.env("LD_LIBRARY_PATH", lib);
    }
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", prog.display()));
    assert!(
        o.status.success(),
        "{} {args:?}: {}",
        prog.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// Runs `cmd`, asserting success; returns stderr.
pub fn ok(cmd: &mut Command) -> String {
    let (success, _out, err) = run(cmd);
    assert!(success, "{cmd:?} failed:\n{err}");
    err
}

/// Runs a tool (gcc, ld) in `dir`, asserting success; `None` (after a skip) when it
/// cannot be run at all.
pub fn run_in(dir: &Path, cmd: &str, args: &[&str]) -> Option<()> {
    let out = match Command::new(cmd).args(args).current_dir(dir).output() {
        Ok(o) => o,
        Err(e) => {
            skip(&format!("cannot run {cmd}: {e}"));
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

/// The golden file `path`: what the reference pahole wrote for it. With `fresh`
/// (that pahole's output now, when `DWARF2BTF_PAHOLE` names one) the golden must be
/// those bytes, and `DWARF2BTF_BLESS` first writes them there.
pub fn golden(path: &Path, fresh: Option<Vec<u8>>) -> Vec<u8> {
    if let Some(fresh) = fresh {
        if std::env::var_os("DWARF2BTF_BLESS").is_some() {
            std::fs::write(path, &fresh).unwrap();
        }
        let want = std::fs::read(path).unwrap_or_default();
        assert!(fresh == want, "{}: not what pahole writes", path.display());
        return want;
    }
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("{}: {e} (bless it with DWARF2BTF_PAHOLE)", path.display()))
}
