//! vmlinux as the kernel build hands it to pahole (`.tmp_vmlinux1`, no `.BTF`):
//! `-J` writes into the ELF the same `.BTF` that `--btf_encode_detached` writes, and
//! a run killed half-way leaves the input byte-identical.

mod common;

use common::*;
use std::time::Duration;

#[test]
fn vmlinux_in_place_equals_detached_and_kill_is_harmless() {
    let Some(corpus) = corpus() else {
        return;
    };
    if !need("objcopy") {
        return;
    }
    let dir = TempDir::new("dropin-vmlinux");
    let vmlinux = dir.join("vmlinux");
    without_btf(&corpus.join("vmlinux"), &vmlinux);
    let input_copy = copy_to(&vmlinux, &dir, "vmlinux.input");
    let original = std::fs::read(&vmlinux).unwrap();
    let features = format!("--btf_features={KFEATURES}");
    let args = ["-J", "-j2", &features, "--lang_exclude=rust"];

    // Killed while encoding: the input is untouched (only a stray temporary file may
    // stay behind, never a damaged vmlinux).
    let mut child = dwarf2btf().args(args).arg(&vmlinux).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        std::fs::read(&vmlinux).unwrap() == original,
        "killed run changed vmlinux"
    );
    drop(original);

    let detached = dir.join("vmlinux.btf");
    ok(dwarf2btf()
        .args(args)
        .arg(format!("--btf_encode_detached={}", detached.display()))
        .arg(&vmlinux));
    ok(dwarf2btf().args(args).arg(&vmlinux));
    let section = read_section(&vmlinux, ".BTF");
    assert!(
        section == std::fs::read(&detached).unwrap(),
        ".BTF written into vmlinux differs from the detached output"
    );
    // Nothing else changed: taking .BTF out again with objcopy gives what objcopy
    // gives for the input.
    let ours = dir.join("ours.stripped");
    let theirs = dir.join("input.stripped");
    for (from, to) in [(&vmlinux, &ours), (&input_copy, &theirs)] {
        without_btf(from, to);
    }
    assert!(
        std::fs::read(&ours).unwrap() == std::fs::read(&theirs).unwrap(),
        "-J changed more of vmlinux than its .BTF"
    );
}
