//! A failing `-J` leaves its input byte-identical: a bad base, a folder where the
//! new file cannot be created, a bad input among a batch.

mod dropin_util;

use dropin_util::*;
use std::process::Command;

/// Runs dwarf2btf expecting failure; returns stderr.
fn fails(cmd: &mut Command) -> String {
    let (success, _, err) = run(cmd);
    assert!(!success, "{cmd:?} should have failed");
    assert!(!err.trim().is_empty(), "{cmd:?} failed without a message");
    err
}

#[test]
fn failures_leave_the_input_untouched() {
    let Some(corpus) = corpus() else {
        return;
    };
    let dir = TempDir::new("dropin-atomic");
    let ko = copy_to(&corpus.join("vsock_loopback.ko"), &dir, "m.ko");
    let original = std::fs::read(&ko).unwrap();
    let features = format!("--btf_features={KFEATURES},distilled_base");
    let unchanged = |what: &str| {
        assert!(
            std::fs::read(&ko).unwrap() == original,
            "{what}: input changed"
        );
        assert_eq!(
            dir.listing().len(),
            1,
            "{what}: files left behind: {:?}",
            dir.listing()
        );
    };

    // A base that is not BTF at all.
    let bad = dir.join("bad.btf");
    std::fs::write(&bad, b"this is not BTF").unwrap();
    let err = fails(
        dwarf2btf()
            .args(["-J", &features, "--btf_base"])
            .arg(&bad)
            .arg(&ko),
    );
    assert!(
        err.contains("bad.btf"),
        "error does not name the base: {err}"
    );
    std::fs::remove_file(&bad).unwrap();
    unchanged("bad base");

    // A base file that does not exist.
    let err = fails(
        dwarf2btf()
            .args(["-J", &features, "--btf_base"])
            .arg(dir.join("missing"))
            .arg(&ko),
    );
    assert!(err.contains("missing"), "{err}");
    unchanged("missing base");

    // The folder refuses new files (immutable; root ignores mode bits), so the
    // temporary file cannot be created.
    let immutable = Command::new("chattr").arg("+i").arg(&dir.0).status();
    if matches!(immutable, Ok(s) if s.success()) {
        let err = fails(
            dwarf2btf()
                .args(["-J", &features, "--btf_base"])
                .arg(corpus.join("vmlinux"))
                .arg(&ko),
        );
        let _ = Command::new("chattr").arg("-i").arg(&dir.0).status();
        assert!(err.contains("m.ko"), "error does not name the file: {err}");
        unchanged("unwritable folder");
    } else {
        eprintln!("skipping the unwritable-folder case: chattr +i not available here");
    }

    // A batch with one bad input: the good one is written, the bad one untouched.
    let good = copy_to(&corpus.join("vsock_loopback.ko"), &dir, "good.ko");
    let garbage = dir.join("garbage.ko");
    std::fs::write(&garbage, b"\x7fELF but not really").unwrap();
    let err = fails(
        dwarf2btf()
            .args(["-J", &features, "--btf_base"])
            .arg(corpus.join("vmlinux"))
            .arg(&garbage)
            .arg(&good),
    );
    assert!(err.contains("garbage.ko"), "{err}");
    assert_eq!(std::fs::read(&garbage).unwrap(), b"\x7fELF but not really");
    assert!(
        std::fs::read(&good).unwrap() != original,
        "good module not written"
    );
    assert!(!read_section(&good, ".BTF.base").is_empty());
}
