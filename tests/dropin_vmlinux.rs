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
    // stay behind, never a damaged vmlinux). A run that finishes before the kill
    // rightly changes vmlinux and shows nothing (at -j2 the corpus vmlinux takes
    // about 1.2 s in all on the 2-CPU build machine, and a fixed 1.5 s delay came
    // to outlast it): the input is put back and the kill comes sooner.
    let mut killed = false;
    for delay_ms in [400, 200, 100, 50, 25] {
        let mut child = dwarf2btf().args(args).arg(&vmlinux).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let finished = child.try_wait().unwrap().is_some();
        if !finished {
            child.kill().unwrap();
        }
        child.wait().unwrap();
        if finished {
            std::fs::write(&vmlinux, &original).unwrap();
            continue;
        }
        assert!(
            std::fs::read(&vmlinux).unwrap() == original,
            "run killed after {delay_ms} ms changed vmlinux"
        );
        killed = true;
        break;
    }
    assert!(killed, "every run finished before it could be killed");
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
