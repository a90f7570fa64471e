//! The whole BTF of the corpus kernel and modules, byte for byte equal to pahole
//! v1.31's references for the kernel's flags, `global_var` and no flags. On a
//! difference the failure says where the sections part and (with python3) what
//! btfcmp.py finds.

mod common;
use common::*;
use std::path::Path;

/// Encodes `input` with `flags` and asserts the bytes of `reference`.
fn encode_equals(flags: &[&str], input: &Path, reference: &Path, base: Option<&Path>) {
    let out = encode_detached(flags, input, base);
    assert_same_btf(&out, reference, base);
    let _ = std::fs::remove_file(&out);
}

/// The corpus vmlinux encoded with `flags` has the bytes of pahole's `reference`.
fn vmlinux_equals(flags: &[&str], reference: &str) {
    let Some((c, r)) = corpus_and_reference() else {
        return;
    };
    encode_equals(flags, &c.join("vmlinux"), &r.join(reference), None);
}

fn kflags() -> [&'static str; 2] {
    [KFLAGS, "--lang_exclude=rust"]
}

#[test]
fn corpus_modules_equal_pahole() {
    let Some((c, r)) = corpus_and_reference() else {
        return;
    };
    for m in MODULES {
        encode_equals(
            &kflags(),
            &c.join(format!("{m}.ko")),
            &r.join(format!("{m}.kernel-flags.btf")),
            Some(&c.join("vmlinux")),
        );
    }
}

#[test]
fn corpus_vmlinux_kernel_flags_equal_pahole() {
    vmlinux_equals(&kflags(), "vmlinux-cloud.kernel-flags.btf");
}

#[test]
fn corpus_vmlinux_global_var_equal_pahole() {
    let flags = format!("{KFLAGS},global_var");
    vmlinux_equals(
        &[&flags, "--lang_exclude=rust"],
        "vmlinux-cloud.global_var.btf",
    );
}

/// Plain `pahole -J`: per-CPU variables, no consistency check (27 more FUNCs), no
/// kfunc tags.
#[test]
fn corpus_vmlinux_no_flags_equal_pahole() {
    vmlinux_equals(&[], "vmlinux-cloud.no-flags.btf");
}
