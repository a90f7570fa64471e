//! The whole BTF (types, FUNC/FUNC_PROTO, VAR/DATASEC, DECL_TAG) of the corpus
//! kernel and modules, compared with pahole v1.31's references for the kernel's
//! flags, `global_var` and no flags: by `btfcmp.py` (every kind, up to id
//! renumbering, which says what differs), then byte for byte. Skips with a
//! message when the corpus, the reference files or python3 are absent.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

/// Encodes `input` with `flags`, compares the whole output with `reference` and
/// returns btfcmp's verdict (None if python3 is missing), after printing how far
/// the bytes are from the reference's.
fn encode_and_compare(
    flags: &[&str],
    input: &Path,
    reference: &Path,
    base: Option<&Path>,
) -> Option<String> {
    let out = encode_detached(flags, input, base);
    let identical = report_bytes(&out, reference);
    let verdict = btfcmp_verdict(&out, reference, base, &[]);
    let _ = std::fs::remove_file(&out);
    let verdict = verdict?;
    assert!(identical, "{}: not byte-identical", reference.display());
    Some(verdict)
}

/// The corpus vmlinux encoded with `flags` is equal to pahole's `reference` file.
fn vmlinux_equals(flags: &[&str], reference: &str, what: &str) {
    let Some((c, r)) = corpus_and_reference() else {
        return;
    };
    if let Some(v) = encode_and_compare(flags, &c.join("vmlinux"), &r.join(reference), None) {
        assert_eq!(v, "equal", "{what}");
    }
}

/// Whether the output is byte-identical to the reference; if not, prints the
/// first differing offsets of the type and string sections.
fn report_bytes(ours: &Path, reference: &Path) -> bool {
    let (a, b) = (
        std::fs::read(ours).unwrap(),
        std::fs::read(reference).unwrap(),
    );
    if a == b {
        println!("{}: byte-identical", reference.display());
        return true;
    }
    let sections = |d: &[u8]| -> Option<(Vec<u8>, Vec<u8>)> {
        let w = |o: usize| Some(u32::from_le_bytes(d.get(o..o + 4)?.try_into().ok()?) as usize);
        let (hl, to, tl, so, sl) = (w(4)?, w(8)?, w(12)?, w(16)?, w(20)?);
        Some((
            d.get(hl + to..hl + to + tl)?.to_vec(),
            d.get(hl + so..hl + so + sl)?.to_vec(),
        ))
    };
    let first_diff = |x: &[u8], y: &[u8]| x.iter().zip(y).position(|(p, q)| p != q);
    if let (Some((ta, sa)), Some((tb, sb))) = (sections(&a), sections(&b)) {
        println!(
            "{}: not byte-identical: types {} vs {} bytes (first difference at {:?}), strings {} vs {} bytes (first difference at {:?})",
            reference.display(),
            ta.len(),
            tb.len(),
            first_diff(&ta, &tb),
            sa.len(),
            sb.len(),
            first_diff(&sa, &sb)
        );
    }
    false
}

fn kflags() -> [&'static str; 2] {
    [KFLAGS, "--lang_exclude=rust"]
}

#[test]
fn corpus_modules_equal_pahole() {
    let Some((c, r)) = corpus_and_reference() else {
        return;
    };
    for m in ["vsock_loopback", "nf_conntrack", "nf_tables"] {
        let verdict = encode_and_compare(
            &kflags(),
            &c.join(format!("{m}.ko")),
            &r.join(format!("{m}.kernel-flags.btf")),
            Some(&c.join("vmlinux")),
        );
        if let Some(v) = verdict {
            assert_eq!(v, "equal", "{m}.ko");
        }
    }
}

#[test]
fn corpus_vmlinux_kernel_flags_equal_pahole() {
    vmlinux_equals(
        &kflags(),
        "vmlinux-cloud.kernel-flags.btf",
        "vmlinux, kernel flags",
    );
}

#[test]
fn corpus_vmlinux_global_var_equal_pahole() {
    let flags = format!("{KFLAGS},global_var");
    vmlinux_equals(
        &[&flags, "--lang_exclude=rust"],
        "vmlinux-cloud.global_var.btf",
        "vmlinux, global_var",
    );
}

/// Plain `pahole -J`: per-CPU variables, no consistency check (27 more FUNCs), no
/// kfunc tags.
#[test]
fn corpus_vmlinux_no_flags_equal_pahole() {
    vmlinux_equals(&[], "vmlinux-cloud.no-flags.btf", "vmlinux, no flags");
}

/// Features we do not implement are refused, never silently ignored.
#[test]
fn unsupported_features_are_refused() {
    let Some(c) = corpus() else {
        return;
    };
    for f in ["true_signature", "layout"] {
        let out = tmp("refused.btf");
        let res = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
            .args(["-J", &format!("--btf_features=default,{f}")])
            .arg(format!("--btf_encode_detached={}", out.display()))
            .arg(c.join("vsock_loopback.ko"))
            .output()
            .unwrap();
        assert!(!res.status.success(), "{f} accepted");
        let err = String::from_utf8_lossy(&res.stderr);
        assert!(err.contains(f) && err.contains("not supported"), "{err}");
        assert!(!out.exists());
    }
}
