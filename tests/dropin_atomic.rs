//! A failing `-J` leaves its input byte-identical: a bad base, a folder where the
//! new file cannot be created, a bad input among a batch.

mod common;

use common::*;
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

    // A module distilled before, now encoded without distilled_base: its old
    // .BTF.base would not match the new .BTF, so it is refused.
    let distilled = copy_to(&ko, &dir, "distilled.ko");
    ok(dwarf2btf()
        .args(["-J", &features, "--btf_base"])
        .arg(corpus.join("vmlinux"))
        .arg(&distilled));
    let before = std::fs::read(&distilled).unwrap();
    let err = fails(
        dwarf2btf()
            .args(["-J", &format!("--btf_features={KFEATURES}"), "--btf_base"])
            .arg(corpus.join("vmlinux"))
            .arg(&distilled),
    );
    assert!(err.contains(".BTF.base"), "{err}");
    assert!(std::fs::read(&distilled).unwrap() == before);
    std::fs::remove_file(&distilled).unwrap();

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

/// Unmounts the small file system when the test ends, however it ends.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// No space left for the new file: the input stays as it was and no partial
/// temporary file remains. Needs a small tmpfs (root); skipped otherwise.
#[test]
fn no_space_leaves_the_input_untouched() {
    let Some(corpus) = corpus() else {
        return;
    };
    let dir = TempDir::new("dropin-nospace");
    let small = dir.join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=20m", "tmpfs"])
        .arg(&small)
        .stderr(std::process::Stdio::null())
        .status();
    if !matches!(mounted, Ok(s) if s.success()) {
        eprintln!("skipping: cannot mount a small tmpfs here (needs root)");
        return;
    }
    let _mount = Mount(small.clone());
    // nf_tables.ko is 15 MB: it fits once, not twice.
    let ko = small.join("nf_tables.ko");
    std::fs::copy(corpus.join("nf_tables.ko"), &ko).unwrap();
    let original = std::fs::read(&ko).unwrap();
    let err = fails(
        dwarf2btf()
            .args(["-J", &format!("--btf_features={KFEATURES},distilled_base")])
            .arg("--btf_base")
            .arg(corpus.join("vmlinux"))
            .arg(&ko),
    );
    assert!(
        err.contains("nf_tables.ko"),
        "error does not name the file: {err}"
    );
    assert!(err.to_lowercase().contains("space"), "{err}");
    assert!(std::fs::read(&ko).unwrap() == original, "input changed");
    let left: Vec<_> = std::fs::read_dir(&small)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("nf_tables.ko")]);
}
