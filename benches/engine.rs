//! The engine over the corpus vmlinux with the kernel's flags: wall time, CPU time and
//! peak RSS at -j1, -j2 and -j8, pahole's figures in the same run when a `pahole` is on
//! PATH (one older than v1.26 gets its era's switches), and a kernel with four copies
//! of the vmlinux's `.debug_info` at -j2.
//!
//! `cargo bench --bench engine` (needs GNU time at /usr/bin/time and the corpus:
//! `$DWARF2BTF_CORPUS` or `../shared/corpus/unpack.sh`). `BENCH_RUNS=N` repeats each
//! measurement N times (default 3) and keeps the fastest run; `BENCH_NO_4X=1` skips
//! the four-copy kernel (it needs objcopy and ~2 GB of temporary disk).
//!
//! Then the clang ThinLTO kernel (`c2-thinlto`, found or unpacked by
//! `common::clang_case`), whose 2,416 units pahole reads as one merged unit:
//! ours at -j1, -j2 and -j8, and pahole's when `BENCH_PAHOLE_LTO` names a pahole
//! that reads LTO DWARF (the reference pahole 1.31 does; Debian 12's 1.24 does too,
//! more slowly). `BENCH_NO_LTO=1` skips it.

// The corpus locator, GNU time and the four-copy kernel, shared with the tests.
#[path = "../tests/common/mod.rs"]
mod common;

use common::{clang_case, corpus, four_copies, gnu_time, kernel_args, GNU_TIME};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One run's figures, from GNU time.
#[derive(Clone, Copy, Debug)]
struct Figures {
    wall: f64,
    user: f64,
    sys: f64,
    rss_kb: u64,
}

/// Runs `prog args` under GNU time and returns its figures.
fn measure(prog: &Path, args: &[String]) -> Figures {
    let v = gnu_time(prog, args, "%e %U %S %M");
    Figures {
        wall: v[0],
        user: v[1],
        sys: v[2],
        rss_kb: v[3] as u64,
    }
}

/// The fastest of `runs` runs (its RSS is the largest seen, to be safe).
fn best(prog: &Path, args: &[String], runs: usize) -> Figures {
    let all: Vec<Figures> = (0..runs).map(|_| measure(prog, args)).collect();
    let mut f = *all.iter().min_by(|a, b| a.wall.total_cmp(&b.wall)).unwrap();
    f.rss_kb = all.iter().map(|f| f.rss_kb).max().unwrap();
    f
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn row(what: &str, f: Figures) {
    println!(
        "| {what} | {:.1} MB | {:.2} s | {:.2} s | load {} |",
        f.rss_kb as f64 / 1024.0,
        f.wall,
        f.user + f.sys,
        loadavg()
    );
}

/// `pahole --version` (`v1.24`) as 124.
fn pahole_version(pahole: &Path) -> Option<u32> {
    let out = Command::new(pahole).arg("--version").output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout);
    let (major, minor) = v.trim().trim_start_matches('v').split_once('.')?;
    Some(major.parse::<u32>().ok()? * 100 + minor.parse::<u32>().ok()?)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` runs benches as tests with no such
    // flag: then only say what would run.
    if !std::env::args().any(|a| a == "--bench") {
        println!("engine bench: run with `cargo bench --bench engine`");
        return;
    }
    let Some(c) = corpus() else {
        println!("engine bench skipped: corpus not found (set DWARF2BTF_CORPUS)");
        return;
    };
    if !Path::new(GNU_TIME).exists() {
        println!("engine bench skipped: {GNU_TIME} (GNU time) not found");
        return;
    }
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_dwarf2btf"));
    let dir = std::env::temp_dir().join(format!("dwarf2btf-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let vmlinux = c.join("vmlinux");
    let out = dir.join("out.btf");
    println!(
        "corpus vmlinux, kernel flags, {} CPUs, fastest of {runs}",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("| run | peak RSS | wall | CPU (user+sys) | |");
    println!("| --- | --- | --- | --- | --- |");
    let mut rss = Vec::new();
    for j in [1, 2, 8] {
        let f = best(&ours, &kernel_args(j, &vmlinux, &out), runs);
        row(&format!("dwarf2btf -j{j}"), f);
        rss.push(f.rss_kb);
    }
    println!("RSS -j8 / -j1 = {:.2}", rss[2] as f64 / rss[0] as f64);
    let pahole = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("pahole"))
            .find(|p| p.exists())
    });
    match pahole {
        Some(p) => {
            let version = pahole_version(&p);
            for j in [1, 2] {
                let mut a = kernel_args(j, &vmlinux, &dir.join("pahole.btf"));
                if version.is_some_and(|v| v < 126) {
                    // Before --btf_features (v1.26): the switches of the kernel's
                    // Makefile for that pahole. It encodes every function (no
                    // optimized_func/consistent_func filtering, no kfunc tags).
                    a[2] = "--btf_encode_force".into();
                    a.insert(3, "--btf_gen_floats".into());
                }
                let f = best(&p, &a, runs);
                let v = version.map_or("?".into(), |v| format!("1.{}", v - 100));
                row(&format!("pahole {v} -j{j}"), f);
            }
        }
        None => println!("(no pahole on PATH: its figures are not measured)"),
    }
    if std::env::var_os("BENCH_NO_4X").is_none() {
        match four_copies(&vmlinux, &dir) {
            Some(v4) => {
                let f = measure(&ours, &kernel_args(2, &v4, &out));
                row("dwarf2btf -j2, 4 × .debug_info", f);
                println!("RSS 4× / 1× (-j2) = {:.2}", f.rss_kb as f64 / rss[1] as f64);
                let _ = std::fs::remove_file(&v4);
            }
            None => println!("(objcopy failed: the four-copy kernel is not measured)"),
        }
    }
    if std::env::var_os("BENCH_NO_LTO").is_none() {
        lto(&ours, &dir, runs);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The ThinLTO kernel's vmlinux: ours at -j1, -j2 and -j8, pahole's at -j2.
fn lto(ours: &Path, dir: &Path, runs: usize) {
    let Some(case) = clang_case("c2-thinlto") else {
        println!("(no c2-thinlto kernel: the LTO case is not measured)");
        return;
    };
    let vmlinux = case.join("vmlinux");
    let out = dir.join("lto.btf");
    println!("c2-thinlto vmlinux (ThinLTO, 2,416 units merged), kernel flags");
    let mut rss = Vec::new();
    for j in [1, 2, 8] {
        let f = best(ours, &kernel_args(j, &vmlinux, &out), runs);
        row(&format!("dwarf2btf -j{j}, ThinLTO"), f);
        rss.push(f.rss_kb);
    }
    println!("RSS -j8 / -j1 = {:.2}", rss[2] as f64 / rss[0] as f64);
    if let Some(p) = std::env::var_os("BENCH_PAHOLE_LTO") {
        let f = best(
            Path::new(&p),
            &kernel_args(2, &vmlinux, &dir.join("p.btf")),
            runs,
        );
        row("pahole -j2, ThinLTO", f);
    }
}
