//! The corpus kernel and modules encoded (and deduplicated) with the kernel's flags
//! and compared with pahole v1.31's output by `btfcmp.py`, limited to the type kinds
//! (functions and variables are another issue). Skips with a message when the
//! corpus, the reference files or python3 are absent.

mod corpus_util;
use corpus_util::{corpus, reference, shared, tmp, KFLAGS};
use std::path::Path;
use std::process::Command;

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
    let deduped = tmp("out.btf");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"));
    cmd.args(["-J", "-j2"]).args(flags);
    if let Some(b) = base {
        cmd.arg("--btf_base").arg(b);
    }
    let st = cmd
        .arg(format!("--btf_encode_detached={}", deduped.display()))
        .arg(input)
        .status()
        .unwrap();
    assert!(st.success(), "dwarf2btf failed on {}", input.display());
    // pahole 1.31 with libbpf ≥ 1.8 writes a 32-byte header; so do we.
    let head = std::fs::read(&deduped).unwrap();
    assert_eq!(u32::from_le_bytes(head[4..8].try_into().unwrap()), 32);
    let mut cmp = Command::new("python3");
    cmp.arg(shared().unwrap().join("tools/btfcmp.py"))
        .arg(&deduped)
        .arg(reference)
        .args(["--only-kinds", KINDS]);
    if let Some(b) = base {
        cmp.arg("--base").arg(b);
    }
    let Ok(out) = cmp.output() else {
        println!("skipping: python3 not available");
        return None;
    };
    let _ = std::fs::remove_file(&deduped);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{text}{}", String::from_utf8_lossy(&out.stderr));
    Some(text.lines().last().unwrap_or("").trim().to_string())
}

#[test]
fn corpus_types_equal_pahole() {
    let (Some(c), Some(r)) = (corpus(), reference()) else {
        println!("skipping: corpus or pahole reference files not found");
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
    let (Some(c), Some(r)) = (corpus(), reference()) else {
        println!("skipping: corpus or pahole reference files not found");
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
