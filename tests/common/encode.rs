//! Encoding with the binary under test and judging the result: btfcmp's verdict,
//! the kernel's arguments, GNU time's figures, the four-copy kernel.

use super::{btfcmp, skip, tmp, KFLAGS};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// GNU time, which reports a run's peak RSS.
pub const GNU_TIME: &str = "/usr/bin/time";

/// GNU time's `%M` (peak RSS in whole kilobytes) read as a number.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // %M prints a whole, non-negative count of KB
pub fn whole_kb(x: f64) -> u64 {
    x as u64
}

/// Encodes `input` (split over `base`, if given) with `-J -j2` and `flags` into a new
/// temporary file, asserting success; returns that file.
pub fn encode_detached(flags: &[&str], input: &Path, base: Option<&Path>) -> PathBuf {
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
    out
}

/// Compares `ours` with `reference` (both over `base`, if given) by btfcmp.py with
/// the `extra` arguments, prints the report and returns its verdict (last line);
/// `None` (and a skip message) when python3 cannot be run.
pub fn btfcmp_verdict(
    ours: &Path,
    reference: &Path,
    base: Option<&Path>,
    extra: &[&str],
) -> Option<String> {
    let mut cmp = Command::new("python3");
    cmp.arg(btfcmp()?).arg(ours).arg(reference).args(extra);
    if let Some(b) = base {
        cmp.arg("--base").arg(b);
    }
    let Ok(out) = cmp.output() else {
        skip("python3 cannot be run");
        return None;
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{text}{}", String::from_utf8_lossy(&out.stderr));
    Some(text.lines().last().unwrap_or("").trim().to_string())
}

/// Asserts that the BTF file `ours` has the bytes of `reference`. When it does not,
/// the failure says where the type and string sections first differ and, where
/// python3 can run btfcmp.py, what differs up to id renumbering.
pub fn assert_same_btf(ours: &Path, reference: &Path, base: Option<&Path>) {
    let (a, b) = (read(ours), read(reference));
    if a == b {
        return;
    }
    let sections = |d: &[u8]| -> Option<[Vec<u8>; 2]> {
        let w = |o: usize| Some(u32::from_le_bytes(d.get(o..o + 4)?.try_into().ok()?) as usize);
        let (hl, to, tl, so, sl) = (w(4)?, w(8)?, w(12)?, w(16)?, w(20)?);
        Some([
            d.get(hl + to..hl + to + tl)?.to_vec(),
            d.get(hl + so..hl + so + sl)?.to_vec(),
        ])
    };
    let layout = match (sections(&a), sections(&b)) {
        (Some([ta, sa]), Some([tb, sb])) => format!(
            "types: {}; strings: {}",
            super::first_diff(&ta, &tb),
            super::first_diff(&sa, &sb)
        ),
        _ => super::first_diff(&a, &b),
    };
    // btfcmp is only the diagnosis: the bytes are the verdict, with or without it.
    let verdict = if super::have("python3") {
        btfcmp_verdict(ours, reference, base, &[]).unwrap_or_default()
    } else {
        "btfcmp.py not run: no python3".into()
    };
    panic!(
        "{} differs from {}: {layout}; btfcmp: {verdict}",
        ours.display(),
        reference.display()
    );
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The arguments that encode `input` at `-jJOBS` with the kernel's flags (as
/// `scripts/Makefile.btf`, without Rust units) into the detached file `out`.
pub fn kernel_args(jobs: usize, input: &Path, out: &Path) -> Vec<String> {
    vec![
        "-J".into(),
        format!("-j{jobs}"),
        KFLAGS.into(),
        "--lang_exclude=rust".into(),
        format!("--btf_encode_detached={}", out.display()),
        input.display().to_string(),
    ]
}

/// Runs `prog args` under GNU time, asserting success, and returns the figures that
/// `fields` (GNU time's `%` fields separated by spaces, e.g. `%e %M`) asks for.
pub fn gnu_time<A: AsRef<OsStr>>(prog: &Path, args: &[A], fields: &str) -> Vec<f64> {
    let out = Command::new(GNU_TIME)
        .args(["-f", &format!("@@ {fields}")])
        .arg(prog)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {GNU_TIME}: {e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{} failed: {err}", prog.display());
    let line = err
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("@@ "))
        .expect("GNU time's line");
    line.split_whitespace()
        .map(|x| x.parse().expect("GNU time's figure"))
        .collect()
}

/// A copy of `vmlinux`, written in `dir`, whose `.debug_info` is its own four times
/// over (each copy's unit headers point into the one `.debug_abbrev`, so every copy
/// stays valid). `None` when objcopy cannot be run or fails.
pub fn four_copies(vmlinux: &Path, dir: &Path) -> Option<PathBuf> {
    let one = dir.join("debug_info.1");
    let four = dir.join("debug_info.4");
    let out = dir.join("vmlinux.4x");
    let dumped = Command::new("objcopy")
        .arg(format!("--dump-section=.debug_info={}", one.display()))
        .arg(vmlinux)
        .arg(dir.join("scratch"))
        .status()
        .ok()?;
    if !dumped.success() {
        return None;
    }
    let data = std::fs::read(&one).unwrap();
    // Written copy by copy: no buffer of four times the section.
    let mut f = std::fs::File::create(&four).unwrap();
    for _ in 0..4 {
        std::io::Write::write_all(&mut f, &data).unwrap();
    }
    drop((data, f));
    let updated = Command::new("objcopy")
        .arg(format!("--update-section=.debug_info={}", four.display()))
        .arg(vmlinux)
        .arg(&out)
        .status()
        .ok()?;
    for f in [one, four, dir.join("scratch")] {
        let _ = std::fs::remove_file(f);
    }
    updated.success().then_some(out)
}

/// Puts `path` in the page cache the same way whatever its history: dropped
/// (`dd iflag=nocache count=0`), then read through in 1 MiB reads. A file written by
/// a tool and one read back sit in the cache in different sizes of folio, and a
/// fault maps a whole folio (up to 2 MB on a current kernel), so how the input was
/// cached moved the corpus vmlinux's peak RSS at -j2 by 9 MB (49.7 against 58.9 MB).
/// Peaks compared with each other are measured after this. Best effort: a file that
/// cannot be dropped is still read.
pub fn recache(path: &Path) {
    let _ = Command::new("dd")
        .arg(format!("if={}", path.display()))
        .args(["iflag=nocache", "count=0", "status=none"])
        .status();
    if let Ok(mut f) = std::fs::File::open(path) {
        let mut buf = vec![0u8; 1 << 20];
        while matches!(std::io::Read::read(&mut f, &mut buf), Ok(n) if n > 0) {}
    }
}

/// The last line of btfcmp's report (`equal` or `differ: …`) and the whole report,
/// for `btfcmp.py args`.
pub fn btfcmp_report(tool: &Path, args: &[&OsStr]) -> (String, String) {
    // btfcmp exits 1 on `differ`; only an empty report is a failure of the tool.
    let (_, out, err) = super::run(Command::new("python3").arg(tool).args(args));
    assert!(!out.trim().is_empty(), "btfcmp {args:?} failed:\n{err}");
    let last = out.lines().last().unwrap_or("").to_string();
    (last, out)
}

/// Our bytes for `input` (split over `base`) with the feature list `features` and
/// Rust units left out, encoded in this process at `-jJOBS` with as many workers.
pub fn encode_in_process(
    input: &Path,
    base: Option<&Path>,
    features: &str,
    jobs: usize,
) -> Vec<u8> {
    use dwarf2btf::pipeline::{encode_bytes, Options, Tuning};
    let opts = Options {
        input: input.to_path_buf(),
        btf_base: base.map(Path::to_path_buf),
        detached: None,
        features: dwarf2btf::encode::Features::from_list(features),
        lang_exclude: vec![dwarf2btf::dwarf::lang_code("rust").unwrap()],
        jobs,
    };
    let tuning = Tuning {
        workers: Some(jobs),
        ..Tuning::default()
    };
    encode_bytes(&opts, &tuning).unwrap_or_else(|e| panic!("{}: {e}", input.display()))
}
