//! Dedup speed and memory against libbpf, on the doubled vmlinux reference (every
//! type twice, ~214k types): `cargo bench --bench dedup`.
//!
//! Reports, for ours and libbpf's (the system libbpf.so.1, in the same run):
//! the in-process CPU time of the dedup call alone (best of 5), and the wall time and
//! peak RSS of a whole process that reads the file, deduplicates it and writes the
//! result (`dwarf2btf dedup` against tests/tools/libbpf_dedup.py, under
//! /usr/bin/time). Both outputs must be the same bytes.

use dwarf2btf::btf::{self, Btf};
use dwarf2btf::dedup::{dedup_bytes, dedup_with, Compat};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const RUNS: usize = 5;

/// CPU time of this thread in seconds (Linux schedstat), which a loaded machine
/// disturbs far less than wall time; wall time where it is not available.
/// The least CPU time of `RUNS` calls of `f`, and the last call's result (each
/// result but the last is dropped outside the timing).
fn best_cpu<R>(mut f: impl FnMut() -> R) -> (f64, R) {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..RUNS {
        drop(last.take());
        let t = cpu_now();
        let r = f();
        best = best.min(cpu_now() - t);
        last = Some(r);
    }
    (best, last.expect("RUNS > 0"))
}

fn cpu_now() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ns| ns / 1e9)
        .unwrap_or_else(|| {
            static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            START.get_or_init(Instant::now).elapsed().as_secs_f64()
        })
}

fn reference() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("../shared"), root.join("../../shared")];
    if let Ok(d) = std::env::var("DWARF2BTF_SHARED") {
        dirs.insert(0, PathBuf::from(d));
    }
    dirs.into_iter()
        .map(|d| d.join("reference/pahole-1.31/vmlinux-cloud.kernel-flags.btf"))
        .find(|p| p.is_file())
}

/// Every own type twice, the copies' names in a second copy of the strings.
fn doubled(b: &Btf) -> Btf {
    let n = u32::try_from(b.types().len()).unwrap();
    let slen = u32::try_from(b.strings().len()).unwrap();
    let mut types = b.types().to_vec();
    for t in b.types() {
        let mut t = t.clone();
        t.kind.for_each_ref_mut(|id| {
            if id.0 != 0 {
                id.0 += n;
            }
        });
        t.for_each_str_mut(|s| {
            if s.0 != 0 {
                s.0 += slen;
            }
        });
        types.push(t);
    }
    let mut strings = b.strings().to_vec();
    strings.extend_from_slice(b.strings());
    Btf::from_parts(None, types, strings, b.endian())
}

/// Wall seconds, CPU seconds and peak RSS (KiB) of `cmd`, from GNU time.
fn timed(cmd: &mut Command) -> (f64, f64, u64) {
    let out = cmd.output().expect("run /usr/bin/time");
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.lines().last().expect("time output");
    let mut f = line.split_whitespace();
    let mut num = || {
        f.next()
            .and_then(|s| s.parse::<f64>().ok())
            .expect("GNU time field")
    };
    let (wall, user, sys) = (num(), num(), num());
    let rss = f
        .next()
        .and_then(|s| s.parse::<u64>().ok())
        .expect("GNU time's %M, whole kilobytes");
    (wall, user + sys, rss)
}

fn main() {
    let Some(path) = reference() else {
        eprintln!(
            "SKIP: reference vmlinux-cloud.kernel-flags.btf not found (set DWARF2BTF_SHARED)"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("dwarf2btf-dedup-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let src = btf::read::read_file(&path, None).expect("read reference");
    let input = dir.join("doubled.btf");
    let d = doubled(&src);
    std::fs::write(&input, btf::write::to_bytes(&d)).expect("write doubled");
    println!(
        "input: doubled {} ({} types)",
        path.display(),
        d.types().len()
    );

    // The dedup call: BTF model in, raw BTF out, as libbpf's btf__dedup (whose
    // timing below includes making its input modifiable).
    let (best, ours) = best_cpu(|| dedup_bytes(&d, Compat::Libbpf1_1).expect("dedup"));
    let (best_up, _) = best_cpu(|| dedup_bytes(&d, Compat::Upstream).expect("dedup"));
    // With the result read back into our BTF model too.
    let (best_model, _) = best_cpu(|| dedup_with(&d, Compat::Libbpf1_1).expect("dedup"));
    drop(d);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/dedup_libbpf_time.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&input)
        .arg(RUNS.to_string())
        .output()
        .expect("run python3");
    let libbpf_line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || libbpf_line.is_empty() {
        eprintln!(
            "SKIP libbpf timing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let mut f = libbpf_line
        .split_whitespace()
        .map(|s| s.parse::<f64>().unwrap_or(f64::NAN));
    let (_parse, lb_dedup) = (f.next().unwrap_or(f64::NAN), f.next().unwrap_or(f64::NAN));
    println!(
        "dedup call, CPU s, best of {RUNS}: ours {best:.3} s (libbpf 1.1 rules), {best_up:.3} s (upstream rules), \
         {best_model:.3} s (1.1 rules, result as a Btf model)   libbpf {lb_dedup:.3} s"
    );

    let ours_out = dir.join("ours.btf");
    let lb_out = dir.join("libbpf.btf");
    let (ow, ocpu, orss) = timed(
        Command::new("/usr/bin/time")
            .args(["-f", "%e %U %S %M"])
            .arg(env!("CARGO_BIN_EXE_dwarf2btf"))
            .arg("dedup")
            .arg(&input)
            .arg("-o")
            .arg(&ours_out)
            .arg("--libbpf-1.1"),
    );
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/libbpf_dedup.py");
    let (lw, lcpu, lrss) = timed(
        Command::new("/usr/bin/time")
            .args(["-f", "%e %U %S %M"])
            .arg("python3")
            .arg(harness)
            .arg(&input)
            .arg(&lb_out),
    );
    println!(
        "whole process (read, dedup, write): ours {ow:.2} s wall, {ocpu:.2} s CPU, peak RSS {orss} KiB   \
         libbpf (python3 + ctypes) {lw:.2} s wall, {lcpu:.2} s CPU, peak RSS {lrss} KiB"
    );
    let (_, _, py_rss) = timed(
        Command::new("/usr/bin/time")
            .args(["-f", "%e %U %S %M"])
            .args(["python3", "-c", "import ctypes; ctypes.CDLL('libbpf.so.1')"]),
    );
    println!("  (python3 with libbpf.so.1 loaded and nothing done: peak RSS {py_rss} KiB)");
    let theirs = std::fs::read(&lb_out).expect("libbpf output");
    assert_eq!(
        std::fs::read(&ours_out).expect("our output"),
        theirs,
        "CLI output differs from libbpf"
    );
    assert_eq!(ours, theirs, "in-process output differs from libbpf");
    println!("outputs: identical ({} bytes)", theirs.len());
    if best > lb_dedup {
        println!("WARNING: our dedup call is slower than libbpf's");
    }
    if std::env::var_os("DEDUP_BENCH_KEEP").is_none() {
        std::fs::remove_dir_all(&dir).ok();
    } else {
        println!("kept {}", dir.display());
    }
}
