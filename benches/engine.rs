//! The engine over the corpus vmlinux with the kernel's flags, against pahole in the
//! same run: wall time, CPU time and peak RSS at -j1, -j2 and -j8 (ours) and -j1, -j2
//! (pahole), the runs of every configuration interleaved (every other round in
//! reverse order) and each figure the median of `BENCH_RUNS` (default 3) runs (the
//! largest peak beside the median one); then the ratios the engine is held to, each
//! with its target (ratios of those medians), and beside them the medians of the
//! rounds' own ratios for -j2 against -j1 and -j1 against pahole; the share of the run's
//! CPU that the ordered stage (the serial part) takes, from `--time` at -j1; a
//! kernel with four copies of the vmlinux's `.debug_info` at -j2 (`BENCH_RUNS` runs
//! after the others); and the clang ThinLTO kernel. Each input is first put in the
//! page cache the same way (`recache`).
//!
//! `cargo bench --bench engine` (needs GNU time at /usr/bin/time and the corpus:
//! `$DWARF2BTF_CORPUS` or `../shared/corpus/unpack.sh`). pahole is `$BENCH_PAHOLE`, or
//! `pahole` on PATH (one older than v1.26 gets its era's switches). `BENCH_NO_4X=1`
//! skips the four-copy kernel (it needs objcopy and ~2 GB of temporary disk).
//!
//! The ThinLTO kernel (`c2-thinlto`, found or unpacked by `common::clang_case`), whose
//! 2,416 units pahole reads as one merged unit: ours at -j1, -j2 and -j8, and pahole's
//! when `BENCH_PAHOLE_LTO` names a pahole that reads LTO DWARF (the reference pahole
//! 1.31 does). `BENCH_NO_LTO=1` skips it.

// The corpus locator, GNU time and the four-copy kernel, shared with the tests.
#[path = "../tests/common/mod.rs"]
mod common;

use common::{clang_case, corpus, four_copies, gnu_time, kernel_args, recache, whole_kb, GNU_TIME};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One run's figures, from GNU time.
#[derive(Clone, Copy, Debug)]
struct Figures {
    wall: f64,
    cpu: f64,
    rss_kb: u64,
    /// The largest of the runs' peaks, beside their median `rss_kb` (one run's).
    rss_max_kb: u64,
}

/// Runs `prog args` under GNU time and returns its figures.
fn measure(prog: &Path, args: &[String]) -> Figures {
    let v = gnu_time(prog, args, "%e %U %S %M");
    let rss_kb = whole_kb(v[3]);
    Figures {
        wall: v[0],
        cpu: v[1] + v[2],
        rss_kb,
        rss_max_kb: rss_kb,
    }
}

/// The median over the rounds of configuration `a`'s figure `of` over `b`'s, for
/// `(a, b)` = `pair` (indices into `figures`, one run of each per round).
fn paired(figures: &[Vec<Figures>], pair: (usize, usize), of: impl Fn(&Figures) -> f64) -> f64 {
    let (a, b) = pair;
    median(
        figures[a]
            .iter()
            .zip(&figures[b])
            .map(|(x, y)| of(x) / of(y))
            .collect(),
    )
}

/// The median of `xs` (not empty).
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The medians of wall time, CPU time and peak RSS of `runs` (the measure),
/// and their largest peak: with two workers a run's peak moves by a megabyte or
/// two with which units are in flight at once.
fn summary(runs: &[Figures]) -> Figures {
    let mut peaks: Vec<u64> = runs.iter().map(|f| f.rss_kb).collect();
    peaks.sort_unstable();
    Figures {
        wall: median(runs.iter().map(|f| f.wall).collect()),
        cpu: median(runs.iter().map(|f| f.cpu).collect()),
        // The lower middle of an even count: a peak one run reached.
        rss_kb: peaks
            .get(peaks.len().saturating_sub(1) / 2)
            .copied()
            .unwrap_or(0),
        rss_max_kb: peaks.last().copied().unwrap_or(0),
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn row(what: &str, f: Figures) {
    println!(
        "| {what} | {:.1} MB ({:.1}) | {:.2} s | {:.2} s |",
        kb_to_mb(f.rss_kb),
        kb_to_mb(f.rss_max_kb),
        f.wall,
        f.cpu,
    );
}

fn kb_to_mb(kb: u64) -> f64 {
    // Peak RSS in KB is far below 2^52: the conversion is exact.
    #[allow(clippy::cast_precision_loss)]
    let mb = kb as f64 / 1024.0;
    mb
}

/// A ratio and the bound the engine is held to (`ratio <= target`).
fn ratio(what: &str, value: f64, target: f64) {
    let verdict = if value <= target { "met" } else { "NOT met" };
    println!("| {what} | {value:.3} | ≤ {target} | {verdict} |");
}

/// `pahole --version` (`v1.24`) as 124.
fn pahole_version(pahole: &Path) -> Option<u32> {
    let out = Command::new(pahole).arg("--version").output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout);
    let (major, minor) = v.trim().trim_start_matches('v').split_once('.')?;
    Some(major.parse::<u32>().ok()? * 100 + minor.parse::<u32>().ok()?)
}

/// The pahole to measure: `$BENCH_PAHOLE`, or the first `pahole` on PATH.
fn find_pahole() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BENCH_PAHOLE") {
        return Some(PathBuf::from(p));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join("pahole"))
        .find(|p| p.exists())
}

/// pahole's arguments for the kernel's flags at `-jJOBS`, in its version's dialect.
fn pahole_args(version: Option<u32>, jobs: usize, input: &Path, out: &Path) -> Vec<String> {
    let mut a = kernel_args(jobs, input, out);
    if version.is_some_and(|v| v < 126) {
        // Before --btf_features (v1.26): the switches of the kernel's Makefile for
        // that pahole. It encodes every function (no optimized_func/consistent_func
        // filtering, no kfunc tags).
        a[2] = "--btf_encode_force".into();
        a.insert(3, "--btf_gen_floats".into());
    }
    a
}

/// From `--time`'s report on stderr: the token holder's CPU time in the in-order
/// merge (the serial part, the line `merge units in order … s CPU`) and the run's
/// CPU time (the line `total … s CPU`).
fn serial_share(ours: &Path, args: &[String]) -> Option<(f64, f64)> {
    let out = Command::new(ours).args(args).arg("--time").output().ok()?;
    let err = String::from_utf8_lossy(&out.stderr);
    // The figure just before "s CPU" on a line.
    let cpu_of = |line: &str| -> Option<f64> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words
            .windows(3)
            .position(|w| w[1] == "s" && w[2].starts_with("CPU"))?;
        words[at].parse().ok()
    };
    let line = |start: &str| {
        err.lines()
            .map(str::trim_start)
            .find(|l| l.starts_with(start))
    };
    Some((
        cpu_of(line("merge units in order")?)?,
        cpu_of(line("total")?)?,
    ))
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
        .unwrap_or(3)
        .max(1);
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_dwarf2btf"));
    let dir = std::env::temp_dir().join(format!("dwarf2btf-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let vmlinux = c.join("vmlinux");
    let out = dir.join("out.btf");
    let pahole = find_pahole();
    let version = pahole.as_deref().and_then(pahole_version);
    let pv = version.map_or("?".into(), |v| format!("1.{}", v - 100));

    // Every configuration once per round, rounds interleaved, so that the machine's
    // drift falls on all of them alike; every other round runs them in reverse
    // order, so that none always follows the same one (pahole -j2 freeing 600 MB
    // just before our -j1 started, say).
    let mut configs: Vec<(String, PathBuf, Vec<String>)> = [1, 2, 8]
        .iter()
        .map(|&j| {
            let args = kernel_args(j, &vmlinux, &out);
            (format!("dwarf2btf -j{j}"), ours.clone(), args)
        })
        .collect();
    if let Some(p) = &pahole {
        for j in [1, 2] {
            let args = pahole_args(version, j, &vmlinux, &dir.join("pahole.btf"));
            configs.push((format!("pahole {pv} -j{j}"), p.clone(), args));
        }
    }
    recache(&vmlinux);
    let mut figures = vec![Vec::new(); configs.len()];
    for round in 0..runs {
        let mut order: Vec<usize> = (0..configs.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (_, prog, args) = &configs[i];
            figures[i].push(measure(prog, args));
        }
    }
    let s: Vec<Figures> = figures.iter().map(|f| summary(f)).collect();
    println!(
        "corpus vmlinux, kernel flags, {} CPUs, medians of {runs} interleaved runs, load {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        loadavg()
    );
    println!("(inputs dropped from the page cache, then read through once: see `recache`)");
    println!("| run | peak RSS (largest) | wall | CPU (user+sys) |");
    println!("| --- | --- | --- | --- |");
    for ((name, _, _), f) in configs.iter().zip(&s) {
        row(name, *f);
    }
    let v4 = if std::env::var_os("BENCH_NO_4X").is_none() {
        match four_copies(&vmlinux, &dir) {
            Some(v4) => {
                recache(&v4);
                // As many runs as the others, summed up alike (the median peak):
                // one run's peak moves by a megabyte or two from run to run.
                let all: Vec<Figures> = (0..runs)
                    .map(|_| measure(&ours, &kernel_args(2, &v4, &out)))
                    .collect();
                let f = summary(&all);
                row("dwarf2btf -j2, 4 × .debug_info", f);
                let _ = std::fs::remove_file(&v4);
                Some(f)
            }
            None => {
                println!("(objcopy failed: the four-copy kernel is not measured)");
                None
            }
        }
    } else {
        None
    };
    let kb = |f: &Figures| kb_to_mb(f.rss_kb);
    println!();
    println!("| ratio | value | target | |");
    println!("| --- | --- | --- | --- |");
    if let [j1, j2, _, p1, p2] = &s[..] {
        ratio("wall -j1 / pahole -j1", j1.wall / p1.wall, 0.22);
        ratio("wall -j2 / pahole -j2", j2.wall / p2.wall, 0.25);
        ratio("peak RSS -j2 / pahole -j2", kb(j2) / kb(p2), 0.1);
    } else {
        println!("(no pahole: the ratios against it are not measured)");
    }
    let (j1, j2, j8) = (&s[0], &s[1], &s[2]);
    ratio("wall -j2 / wall -j1", j2.wall / j1.wall, 0.6);
    ratio("CPU -j2 / CPU -j1", j2.cpu / j1.cpu, 1.1);
    if let [_, _, _, p1, p2] = &s[..] {
        // Not a target: what a second thread cost pahole in the same runs, to read
        // the line above against (both move with the host's load).
        println!(
            "(pahole's own: wall -j2 / -j1 {:.3}, CPU -j2 / -j1 {:.3})",
            p2.wall / p1.wall,
            p2.cpu / p1.cpu
        );
    }
    // Not the measure (a ratio of medians, above): the median of each
    // round's own ratio, whose two runs lie seconds apart, for reading how much
    // of a miss the host's drift between rounds explains.
    let (j2_j1, j1_p1) = ((1, 0), (0, 3));
    print!(
        "(round by round, medians: wall -j2 / -j1 {:.3}, CPU -j2 / -j1 {:.3}",
        paired(&figures, j2_j1, |f| f.wall),
        paired(&figures, j2_j1, |f| f.cpu)
    );
    if figures.len() == 5 {
        print!(
            ", wall -j1 / pahole -j1 {:.3}",
            paired(&figures, j1_p1, |f| f.wall)
        );
    }
    println!(")");
    ratio("peak RSS -j8 / -j1", kb(j8) / kb(j1), 1.1);
    if let Some(f) = v4 {
        ratio("peak RSS 4× .debug_info / 1× (-j2)", kb(&f) / kb(j2), 1.15);
    }
    // The same two on the largest peaks, stricter than the medians.
    let max = |f: &Figures| kb_to_mb(f.rss_max_kb);
    print!("(on the largest peaks: -j8 / -j1 {:.3}", max(j8) / max(j1));
    match v4 {
        Some(f) => println!(", 4× / 1× {:.3})", max(&f) / max(j2)),
        None => println!(")"),
    }
    match serial_share(&ours, &kernel_args(1, &vmlinux, &out)) {
        Some((ordered, cpu)) => ratio("in-order merge CPU / run CPU, -j1", ordered / cpu, 0.3),
        None => println!("(--time gave no in-order merge line)"),
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
    recache(&vmlinux);
    let out = dir.join("lto.btf");
    println!();
    println!("c2-thinlto vmlinux (ThinLTO, 2,416 units merged), kernel flags");
    println!("| run | peak RSS (largest) | wall | CPU (user+sys) |");
    println!("| --- | --- | --- | --- |");
    let mut rss = Vec::new();
    for j in [1, 2, 8] {
        let all: Vec<Figures> = (0..runs)
            .map(|_| measure(ours, &kernel_args(j, &vmlinux, &out)))
            .collect();
        let f = summary(&all);
        row(&format!("dwarf2btf -j{j}, ThinLTO"), f);
        rss.push(kb_to_mb(f.rss_kb));
    }
    if let Some(p) = std::env::var_os("BENCH_PAHOLE_LTO") {
        let all: Vec<Figures> = (0..runs)
            .map(|_| {
                let args = kernel_args(2, &vmlinux, &dir.join("p.btf"));
                measure(Path::new(&p), &args)
            })
            .collect();
        row("pahole -j2, ThinLTO", summary(&all));
    }
    println!("RSS -j8 / -j1 = {:.2}", rss[2] / rss[0]);
}
