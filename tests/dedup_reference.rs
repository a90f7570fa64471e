//! Dedup of the pahole reference BTF files, and of "doubled" copies of them, gives
//! libbpf's bytes — whole (vmlinux) and split (modules over the corpus vmlinux).

mod common;

use common::*;
use dwarf2btf::btf::{self, Btf};
use dwarf2btf::dedup::{dedup_with, Compat};
use std::path::Path;
use std::sync::Arc;

/// Our dedup of the BTF in `path` (written to `dir`) against libbpf's, both modes.
fn check(btf: &Btf, path: &Path, base: Option<&Path>, dir: &Path, what: &str) {
    let want = libbpf_dedup(path, base, &dir.join("libbpf.out"));
    for compat in [Compat::Upstream, Compat::Libbpf1_1] {
        let got = btf::write::to_bytes(&dedup_with(btf, compat).expect("dedup"));
        assert!(
            got == want,
            "{what} ({compat:?}): our dedup differs from libbpf: {}",
            first_diff(&got, &want)
        );
    }
}

const VMLINUX: [&str; 3] = [
    "vmlinux-cloud.kernel-flags.btf",
    "vmlinux-cloud.no-flags.btf",
    "vmlinux-cloud.global_var.btf",
];
const MODULES: [&str; 3] = ["nf_conntrack", "nf_tables", "vsock_loopback"];

#[test]
fn vmlinux_references_equal_libbpf() {
    let (Some(refs), true) = (reference(), have_libbpf()) else {
        return;
    };
    let dir = scratch("vmlinux");
    for name in VMLINUX {
        let path = refs.join(name);
        let btf = btf::read::read_file(&path, None).expect("read reference");
        check(&btf, &path, None, &dir, name);
    }
}

/// Runs `f` on each module reference read over the corpus vmlinux's BTF, with its
/// path, the base's path and a scratch directory `name`.
fn each_module(name: &str, mut f: impl FnMut(&str, Btf, &Path, &Path, &Path)) {
    let (Some(refs), Some(corpus), true) = (reference(), corpus(), have_libbpf()) else {
        return;
    };
    let dir = scratch(name);
    let (base, base_path) = vmlinux_base(&corpus, &dir);
    for m in MODULES {
        let path = refs.join(format!("{m}.kernel-flags.btf"));
        let btf =
            btf::read::read_file(&path, Some(Arc::clone(&base))).expect("read module reference");
        f(m, btf, &path, &base_path, &dir);
    }
}

#[test]
fn module_references_split_equal_libbpf() {
    each_module("modules", |m, btf, path, base, dir| {
        check(&btf, path, Some(base), dir, m);
    });
}

#[test]
fn doubled_vmlinux_equals_libbpf() {
    let (Some(refs), true) = (reference(), have_libbpf()) else {
        return;
    };
    let dir = scratch("doubled-vmlinux");
    let btf = btf::read::read_file(&refs.join(VMLINUX[0]), None).expect("read reference");
    let d = doubled(&btf);
    assert_eq!(d.types().len(), 2 * btf.types().len());
    let path = dir.join("doubled.btf");
    write(&d, &path);
    check(&d, &path, None, &dir, "doubled vmlinux");
}

#[test]
fn doubled_modules_split_equal_libbpf() {
    each_module("doubled-modules", |m, btf, _, base, dir| {
        let d = doubled(&btf);
        let path = dir.join(format!("{m}.doubled.btf"));
        write(&d, &path);
        check(&d, &path, Some(base), dir, &format!("doubled {m}"));
    });
}

/// The case "libbpf: Fix deduplication of typedef with base definitions" is about:
/// split BTF holding copies of base typedefs. Every base typedef is appended to a
/// module (names copied into the module's strings): all copies must go, as libbpf
/// 1.1 (typedefs as reference kinds) and fixed current libbpf (typedefs compared by
/// graph, base typedefs indexed the same way) both do.
#[test]
fn split_copies_of_base_typedefs_dedup_into_the_base() {
    let (Some(refs), Some(corpus), true) = (reference(), corpus(), have_libbpf()) else {
        return;
    };
    let dir = scratch("base-typedefs");
    let (base, base_path) = vmlinux_base(&corpus, &dir);
    let mut btf = btf::read::read_file(
        &refs.join("nf_conntrack.kernel-flags.btf"),
        Some(Arc::clone(&base)),
    )
    .expect("read module reference");
    let before = btf.types().len();
    let mut copies = 0;
    for id in 1..=base.type_count() {
        let t = base.get(btf::TypeId(id)).expect("base type").clone();
        if let btf::TypeKind::Typedef(target) = t.kind {
            let name = btf.push_str(base.str_bytes(t.name).expect("typedef name"));
            btf.push_type(btf::Type {
                name,
                kind: btf::TypeKind::Typedef(target),
            });
            copies += 1;
        }
    }
    assert!(copies > 1000, "only {copies} base typedefs");
    let path = dir.join("with-typedefs.btf");
    write(&btf, &path);
    check(
        &btf,
        &path,
        Some(&base_path),
        &dir,
        "module + base typedef copies",
    );
    let d = dedup_with(&btf, Compat::Upstream).expect("dedup");
    let plain = dedup_with(
        &btf::read::read_file(&refs.join("nf_conntrack.kernel-flags.btf"), Some(base))
            .expect("read"),
        Compat::Upstream,
    )
    .expect("dedup");
    assert_eq!(
        d.types().len(),
        plain.types().len(),
        "copies of base typedefs were kept ({before} types before)"
    );
}

/// A big-endian BTF (libbpf dedups it in that byte order and writes it back so).
#[test]
fn big_endian_equals_libbpf() {
    let (Some(refs), true) = (reference(), have_libbpf()) else {
        return;
    };
    let dir = scratch("big-endian");
    let mut btf = btf::read::read_file(&refs.join(VMLINUX[1]), None).expect("read reference");
    btf.set_endian(btf::Endian::Big);
    // libbpf reads non-native byte order only with the classic 24-byte header.
    btf.set_header_extra(Vec::new());
    let d = doubled(&btf);
    let path = dir.join("be.btf");
    write(&d, &path);
    check(&d, &path, None, &dir, "big-endian doubled vmlinux");
}
