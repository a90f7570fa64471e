//! Real kernels of other architectures and compilers against pahole's references
//! (`reference/pahole-1.31/debian-6.1/CASE/`, `reference/pahole-1.31/clang/c1-clang/`):
//! Debian 12's 6.1 kernels for arm64, s390x (big-endian), i386 (32-bit, signed
//! `char`) and ppc64el, and Linux 6.12 built with clang 14 without LTO. The
//! vmlinux at -j1 and -j2 and two modules split over it must be pahole's bytes;
//! `dwarf2btf validate` must accept the references, and `dwarf2btf dump` must
//! print what bpftool prints (for big-endian BTF, of a copy with the classic
//! 24-byte header, which bpftool 7.1 needs).
//!
//! Debian's kernels are large downloads (`shared/corpus/debian-kernel.sh CASE`),
//! looked up in `$DWARF2BTF_KERNELS/CASE/` (default `~/.cache/dwarf2btf-kernels`):
//! without them those tests print SKIP, or fail under `DWARF2BTF_REQUIRE_KERNELS=1`;
//! CI covers the same constructs with tests/arch_fixtures.rs. The clang kernel is in
//! the shared corpus (`shared/corpus/clang/c1-clang.tar.zst`, or unpacked in
//! `$DWARF2BTF_CLANG/c1-clang/`), so CI runs it.

mod common;
use common::{clang_case, debian_kernel, reference, scratch, stdout_of, KFLAGS};

use dwarf2btf::btf::{read, write, Btf, Endian};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn ours() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_dwarf2btf"))
}

/// Encodes `input` (split over `base`) with the kernel's flags at `-jN`; asserts
/// its bytes are `reference`'s.
fn encode_equals(input: &Path, base: Option<&Path>, jobs: u32, reference: &Path, out: &Path) {
    let j = format!("-j{jobs}");
    let detached = format!("--btf_encode_detached={}", out.display());
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "-J".as_ref(),
        KFLAGS.as_ref(),
        "--lang_exclude=rust".as_ref(),
        j.as_ref(),
    ];
    if let Some(b) = base {
        args.extend(["--btf_base".as_ref(), b.as_os_str()]);
    }
    args.extend([detached.as_ref(), input.as_os_str()]);
    stdout_of(ours(), &args, None);
    let (got, want) = (
        std::fs::read(out).unwrap(),
        std::fs::read(reference).unwrap(),
    );
    assert!(
        got == want,
        "{} -j{jobs}: not the bytes of {} ({} vs {} bytes)",
        input.display(),
        reference.display(),
        got.len(),
        want.len()
    );
    let _ = std::fs::remove_file(out);
}

/// `validate` accepts `file` (split over `base`), and `dump` prints bpftool's dump.
fn tools_accept(file: &Path, base: Option<&Path>, dir: &Path) {
    let mut args: Vec<&std::ffi::OsStr> = vec![file.as_os_str()];
    if let Some(b) = base {
        args.extend(["--base-btf".as_ref(), b.as_os_str()]);
    }
    let with = |mode: &'static str| {
        let mut a: Vec<&std::ffi::OsStr> = vec![mode.as_ref()];
        a.extend(args.iter().copied());
        a
    };
    stdout_of(ours(), &with("validate"), None);
    let our_dump = stdout_of(ours(), &with("dump"), None);
    if !common::need("bpftool") {
        return;
    }
    // bpftool 7.1 refuses big-endian BTF with a header past 24 bytes: give it
    // copies with the classic header (same types, same strings).
    let classic = |path: &Path, base: Option<Arc<Btf>>, name: &str| -> PathBuf {
        let mut b = read::read_file(path, base).unwrap();
        if b.endian() != Endian::Big {
            return path.to_path_buf();
        }
        b.set_header_extra(Vec::new());
        let p = dir.join(name);
        std::fs::write(&p, write::to_bytes(&b)).unwrap();
        p
    };
    let base_btf = base.map(|b| Arc::new(read::read_file(b, None).unwrap()));
    let f = classic(file, base_btf, "file.24.btf");
    let mut a: Vec<&std::ffi::OsStr> = vec![
        "btf".as_ref(),
        "dump".as_ref(),
        "file".as_ref(),
        f.as_os_str(),
    ];
    let b24 = base.map(|b| classic(b, None, "base.24.btf"));
    if let Some(b) = &b24 {
        a.extend(["--base-btf".as_ref(), b.as_os_str()]);
    }
    let theirs = stdout_of(Path::new("bpftool"), &a, None);
    assert!(
        our_dump == theirs,
        "{}: dwarf2btf dump differs from bpftool's",
        file.display()
    );
}

/// The vmlinux at -j1 and -j2 and `modules` over pahole's vmlinux.btf.
fn check_case(name: &str, inputs: &Path, refs: &Path, modules: &[&str], module_base_is_ref: bool) {
    let dir = scratch(&format!("arch_kernels_{name}"));
    let vmlinux = inputs.join("vmlinux");
    let vref = refs.join("vmlinux.btf");
    for jobs in [1, 2] {
        encode_equals(&vmlinux, None, jobs, &vref, &dir.join("vmlinux.btf"));
    }
    tools_accept(&vref, None, &dir);
    // pahole split the Debian modules over its vmlinux.btf, clang's over the
    // vmlinux (its own .BTF section).
    let base = if module_base_is_ref {
        vref.clone()
    } else {
        vmlinux.clone()
    };
    for m in modules {
        let mref = refs.join(format!("{m}.btf"));
        for jobs in [1, 2] {
            encode_equals(
                &inputs.join(format!("{m}.ko")),
                Some(&base),
                jobs,
                &mref,
                &dir.join("m.btf"),
            );
        }
        tools_accept(&mref, Some(&base), &dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn debian(arch: &str) {
    let refs = reference().map(|r| r.join("debian-6.1").join(arch));
    let files = ["vmlinux", "nf_conntrack.ko", "ext4.ko"];
    let (Some(refs), Some(inputs)) = (refs, debian_kernel(arch, &files)) else {
        return;
    };
    check_case(arch, &inputs, &refs, &["nf_conntrack", "ext4"], true);
}

#[test]
fn debian_arm64() {
    debian("arm64");
}

#[test]
fn debian_s390x_big_endian() {
    debian("s390x");
}

#[test]
fn debian_i386_32_bit_signed_char() {
    debian("i386");
}

#[test]
fn debian_ppc64el() {
    debian("ppc64el");
}

#[test]
fn clang_without_lto() {
    let refs = reference().map(|r| r.join("clang/c1-clang"));
    // In the shared corpus, so required in CI (unlike Debian's kernels).
    let (Some(refs), Some(inputs)) = (refs, clang_case("c1-clang")) else {
        return;
    };
    check_case("c1-clang", &inputs, &refs, &["tcp_bic", "tcp_bbr"], false);
}
