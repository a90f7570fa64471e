//! The whole BTF (types, FUNC/FUNC_PROTO, VAR/DATASEC, DECL_TAG) of the corpus
//! kernel and modules, compared with pahole v1.31's references for the kernel's
//! flags, `global_var` and no flags: by `btfcmp.py` (every kind, up to id
//! renumbering, which says what differs), then byte for byte. Skips with a
//! message when the corpus, the reference files or python3 are absent.

mod corpus_util;
use corpus_util::{corpus, reference, shared, tmp, KFLAGS};
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
    let identical = report_bytes(&out, reference);
    let mut cmp = Command::new("python3");
    cmp.arg(shared().unwrap().join("tools/btfcmp.py"))
        .arg(&out)
        .arg(reference);
    if let Some(b) = base {
        cmp.arg("--base").arg(b);
    }
    let Ok(res) = cmp.output() else {
        println!("skipping: python3 not available");
        return None;
    };
    let _ = std::fs::remove_file(&out);
    let text = String::from_utf8_lossy(&res.stdout).into_owned();
    println!("{text}{}", String::from_utf8_lossy(&res.stderr));
    assert!(identical, "{}: not byte-identical", reference.display());
    Some(text.lines().last().unwrap_or("").trim().to_string())
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
    let (Some(c), Some(r)) = (corpus(), reference()) else {
        println!("skipping: corpus or pahole reference files not found");
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
    let (Some(c), Some(r)) = (corpus(), reference()) else {
        println!("skipping: corpus or pahole reference files not found");
        return;
    };
    if let Some(v) = encode_and_compare(
        &kflags(),
        &c.join("vmlinux"),
        &r.join("vmlinux-cloud.kernel-flags.btf"),
        None,
    ) {
        assert_eq!(v, "equal", "vmlinux, kernel flags");
    }
}

#[test]
fn corpus_vmlinux_global_var_equal_pahole() {
    let (Some(c), Some(r)) = (corpus(), reference()) else {
        println!("skipping: corpus or pahole reference files not found");
        return;
    };
    let flags = format!("{KFLAGS},global_var");
    if let Some(v) = encode_and_compare(
        &[&flags, "--lang_exclude=rust"],
        &c.join("vmlinux"),
        &r.join("vmlinux-cloud.global_var.btf"),
        None,
    ) {
        assert_eq!(v, "equal", "vmlinux, global_var");
    }
}

/// Plain `pahole -J`: per-CPU variables, no consistency check (27 more FUNCs), no
/// kfunc tags.
#[test]
fn corpus_vmlinux_no_flags_equal_pahole() {
    let (Some(c), Some(r)) = (corpus(), reference()) else {
        println!("skipping: corpus or pahole reference files not found");
        return;
    };
    if let Some(v) = encode_and_compare(
        &[],
        &c.join("vmlinux"),
        &r.join("vmlinux-cloud.no-flags.btf"),
        None,
    ) {
        assert_eq!(v, "equal", "vmlinux, no flags");
    }
}

/// Features we do not implement are refused, never silently ignored.
#[test]
fn unsupported_features_are_refused() {
    let Some(c) = corpus() else {
        println!("skipping: corpus not found");
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
