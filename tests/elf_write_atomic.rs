//! A failed `write_sections_in_place` leaves the input byte-identical and no temporary
//! file behind; bad input is an error naming the file and the problem, never a panic.

mod common;

use common::*;
use dwarf2btf::elf_write::{set_sections, write_sections_in_place};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A small gcc-compiled object in `dir`, or `None` when gcc is unavailable.
fn object(dir: &TempDir) -> Option<PathBuf> {
    let src = dir.join("t.c");
    std::fs::write(
        &src,
        "struct s { int a; char *b; } g;\nint f(struct s *p) { return p->a; }\n",
    )
    .unwrap();
    let obj = dir.join("t.o");
    let (ok, _, err) = run(Command::new("gcc")
        .args(["-g", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj));
    if !ok {
        skip(&format!("gcc cannot compile: {err}"));
        return None;
    }
    std::fs::remove_file(&src).unwrap();
    Some(obj)
}

/// The file is byte-identical to `before` and the folder holds only `files`.
fn assert_untouched(dir: &TempDir, path: &Path, before: &[u8], files: &[&str]) {
    assert!(
        std::fs::read(path).unwrap() == before,
        "{} was modified",
        path.display()
    );
    assert_eq!(dir.listing(), files, "files left in {}", dir.0.display());
}

#[test]
fn garbage_input_is_an_error_naming_the_file() {
    let dir = TempDir::new("garbage");
    let path = dir.join("junk.ko");
    let junk: Vec<u8> = (0..5000u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(&path, &junk).unwrap();
    let err = write_sections_in_place(&path, &[(".BTF", vec![1, 2, 3])]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("junk.ko") && msg.contains("not an ELF file"),
        "{msg}"
    );
    assert_untouched(&dir, &path, &junk, &["junk.ko"]);

    let empty = dir.join("empty.ko");
    std::fs::write(&empty, b"").unwrap();
    let msg = write_sections_in_place(&empty, &[(".BTF", vec![1])])
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("empty.ko") && msg.contains("not an ELF file"),
        "{msg}"
    );

    let missing = dir.join("missing.ko");
    let msg = write_sections_in_place(&missing, &[(".BTF", vec![1])])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("missing.ko"), "{msg}");
    assert_eq!(dir.listing(), ["empty.ko", "junk.ko"]);
}

#[test]
fn truncated_input_is_an_error_naming_the_problem() {
    let dir = TempDir::new("trunc");
    let Some(obj) = object(&dir) else { return };
    let full = std::fs::read(&obj).unwrap();
    // Cut before the end of the section header table (at the end of a gcc object).
    let cut = &full[..full.len() - 10];
    std::fs::write(&obj, cut).unwrap();
    let msg = write_sections_in_place(&obj, &[(".BTF", vec![9; 100])])
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("t.o") && msg.contains("section header table"),
        "{msg}"
    );
    assert!(msg.contains("past the end of the file"), "{msg}");
    assert_untouched(&dir, &obj, cut, &["t.o"]);
    // Cut inside the ELF header.
    std::fs::write(&obj, &full[..30]).unwrap();
    let msg = write_sections_in_place(&obj, &[(".BTF", vec![9; 100])])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("ELF header cut short"), "{msg}");
    assert_untouched(&dir, &obj, &full[..30], &["t.o"]);
}

/// Every prefix and many corrupted copies of a real object: an error or a result,
/// never a panic.
#[test]
fn no_panic_on_damaged_objects() {
    let dir = TempDir::new("fuzz");
    let Some(obj) = object(&dir) else { return };
    let full = std::fs::read(&obj).unwrap();
    for cut in 0..full.len() {
        let _ = set_sections(&full[..cut], &[(".BTF", b"abc")]);
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut ok, mut err) = (0, 0);
    for _ in 0..20_000 {
        let mut bad = full.clone();
        for _ in 0..1 + next() % 4 {
            let at = usize::try_from(next() % u64::try_from(bad.len()).unwrap()).unwrap();
            bad[at] = next().to_le_bytes()[0];
        }
        match set_sections(&bad, &[(".BTF", b"abc"), (".text", b"")]) {
            Ok(_) => ok += 1,
            Err(_) => err += 1,
        }
    }
    eprintln!("damaged objects: {ok} rewritten, {err} refused");
    assert!(err > 0);
}

#[test]
fn read_only_folder_fails_cleanly() {
    let dir = TempDir::new("rodir");
    let Some(obj) = object(&dir) else { return };
    let before = std::fs::read(&obj).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o555)).unwrap();
    if std::fs::write(dir.join("probe"), b"").is_ok() {
        eprintln!("skipping: running with privileges that ignore folder permissions (root)");
        let _ = std::fs::remove_file(dir.join("probe"));
        return;
    }
    let err = write_sections_in_place(&obj, &[(".BTF", vec![7; 4096])]).unwrap_err();
    assert!(err.to_string().contains("t.o"), "{err}");
    assert_untouched(&dir, &obj, &before, &["t.o"]);
}

/// The child side of the two tests below: rewrite `$ELFW_TARGET`, report the outcome.
#[test]
#[ignore = "run by write_failure_* tests in a child process"]
fn child_write_sections() {
    let Some(target) = std::env::var_os("ELFW_TARGET") else {
        return;
    };
    match write_sections_in_place(Path::new(&target), &[(".BTF", vec![0x5a; 1 << 20])]) {
        Ok(()) => println!("CHILD: ok"),
        Err(e) => println!("CHILD: error: {e}"),
    }
}

/// Runs `child_write_sections` on `target` with the file size limited to 64 KiB;
/// `ignore_xfsz` makes writes fail with EFBIG instead of killing the process.
fn run_limited_child(target: &Path, ignore_xfsz: bool) -> (Option<i32>, String) {
    let exe = std::env::current_exe().unwrap();
    let trap = if ignore_xfsz { "trap '' XFSZ; " } else { "" };
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{trap}ulimit -f 64; exec \"$0\" \"$@\""))
        .arg(exe)
        .args([
            "--ignored",
            "--exact",
            "child_write_sections",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ELFW_TARGET", target)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn write_failure_no_space_leaves_input_identical() {
    let dir = TempDir::new("efbig");
    let Some(obj) = object(&dir) else { return };
    let before = std::fs::read(&obj).unwrap();
    let (_, stdout) = run_limited_child(&obj, true);
    assert!(
        stdout.contains("CHILD: error:") && stdout.contains("t.o"),
        "{stdout}"
    );
    assert!(stdout.contains("too large"), "expected EFBIG: {stdout}");
    assert_untouched(&dir, &obj, &before, &["t.o"]);
}

#[test]
fn write_killed_midway_leaves_input_identical() {
    let dir = TempDir::new("killed");
    let Some(obj) = object(&dir) else { return };
    let before = std::fs::read(&obj).unwrap();
    let (code, stdout) = run_limited_child(&obj, false);
    assert_eq!(code, None, "the child should die of SIGXFSZ: {stdout}");
    assert!(std::fs::read(&obj).unwrap() == before);
    // A process killed mid-write cannot remove its temporary file; it is a hidden
    // file next to the input, and the input itself is intact.
    let left: Vec<String> = dir.listing().into_iter().filter(|n| n != "t.o").collect();
    assert!(
        left.iter()
            .all(|n| n.starts_with(".t.o.dwarf2btf-") && n.ends_with(".tmp")),
        "{left:?}"
    );
}
