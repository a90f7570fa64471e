//! Shared helpers of the `dropin_*` tests (dwarf2btf as the kernel build's pahole):
//! the flags the kernel passes, running the binary, and btfcmp.
#![allow(dead_code)]

#[path = "../elf_write_util/mod.rs"]
mod elf_write_util;
pub use elf_write_util::*;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The features `scripts/Makefile.btf` passes (the reference README's KFLAGS).
pub const KFEATURES: &str = "encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,\
                             consistent_func,decl_tag_kfuncs";

/// The corpus modules.
pub const MODULES: [&str; 3] = ["vsock_loopback", "nf_tables", "nf_conntrack"];

/// The dwarf2btf binary under test.
pub fn dwarf2btf() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
}

/// Runs `cmd`, asserting success; returns stderr.
pub fn ok(cmd: &mut Command) -> String {
    let (success, _out, err) = run(cmd);
    assert!(success, "{cmd:?} failed:\n{err}");
    err
}

/// Copies `src` into `dir` (as `name`) and returns the copy.
pub fn copy_to(src: &Path, dir: &TempDir, name: &str) -> PathBuf {
    let dst = dir.join(name);
    std::fs::copy(src, &dst).unwrap();
    dst
}

/// `btfcmp.py` of the shared tools, or None (with a message) when it is absent.
pub fn btfcmp() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for up in ["../shared", "../../shared"] {
        let p = root.join(up).join("tools/btfcmp.py");
        if p.is_file() {
            return Some(p);
        }
    }
    eprintln!("skipping: btfcmp.py not found");
    None
}

/// The last line of btfcmp's report (`equal` or `differ: …`) and the whole report.
pub fn btfcmp_verdict(tool: &Path, args: &[&std::ffi::OsStr]) -> (String, String) {
    // btfcmp exits 1 on `differ`; only an empty report is a failure of the tool.
    let (_, out, err) = run(Command::new("python3").arg(tool).args(args));
    assert!(!out.trim().is_empty(), "btfcmp {args:?} failed:\n{err}");
    let last = out.lines().last().unwrap_or("").to_string();
    (last, out)
}
