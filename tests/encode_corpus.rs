//! The corpus kernel and modules encoded (and deduplicated) with the kernel's flags
//! and compared with pahole v1.31's output by `btfcmp.py`, limited to the type kinds
//! (functions and variables are another issue). Skips with a message when the
//! corpus, the reference files or python3 are absent.

mod common;
use common::*;
use std::path::Path;

const KINDS: &str =
    "INT,PTR,ARRAY,STRUCT,UNION,ENUM,ENUM64,FWD,TYPEDEF,VOLATILE,CONST,RESTRICT,FLOAT,TYPE_TAG";

/// Encodes `input` with the kernel's flags and returns btfcmp's verdict.
fn encode_and_compare(input: &Path, reference: &Path, base: Option<&Path>) -> Option<String> {
    encode_and_compare_with(&[KFLAGS, "--lang_exclude=rust"], input, reference, base)
}

fn encode_and_compare_with(
    flags: &[&str],
    input: &Path,
    reference: &Path,
    base: Option<&Path>,
) -> Option<String> {
    let deduped = encode_detached(flags, input, base);
    // pahole 1.31 with libbpf ≥ 1.8 writes a 32-byte header; so do we.
    let head = std::fs::read(&deduped).unwrap();
    assert_eq!(u32::from_le_bytes(head[4..8].try_into().unwrap()), 32);
    let verdict = btfcmp_verdict(&deduped, reference, base, &["--only-kinds", KINDS]);
    let _ = std::fs::remove_file(&deduped);
    verdict
}

#[test]
fn corpus_types_equal_pahole() {
    let Some((c, r)) = corpus_and_reference() else {
        return;
    };
    for m in ["vsock_loopback", "nf_conntrack", "nf_tables"] {
        let verdict = encode_and_compare(
            &c.join(format!("{m}.ko")),
            &r.join(format!("{m}.kernel-flags.btf")),
            Some(&c.join("vmlinux")),
        );
        if let Some(v) = verdict {
            assert_eq!(v, "equal", "{m}.ko");
        }
    }
    if let Some(v) = encode_and_compare(
        &c.join("vmlinux"),
        &r.join("vmlinux-cloud.kernel-flags.btf"),
        None,
    ) {
        assert_eq!(v, "equal", "vmlinux");
    }
}

/// Without `--btf_features` pahole encodes floats as INTs (no `float`) but keeps
/// ENUM64: the types must match its no-flags output too.
#[test]
fn corpus_vmlinux_no_flags_types_equal_pahole() {
    let Some((c, r)) = corpus_and_reference() else {
        return;
    };
    if let Some(v) = encode_and_compare_with(
        &[],
        &c.join("vmlinux"),
        &r.join("vmlinux-cloud.no-flags.btf"),
        None,
    ) {
        assert_eq!(v, "equal", "vmlinux, no flags");
    }
}
