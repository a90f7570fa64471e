//! Peak memory of the engine on the corpus vmlinux with the kernel's flags, measured
//! by GNU time around the CLI in the default mode (incremental dedup for a vmlinux):
//! at most 95 MB at -j1 and -j8 (pahole 1.31: 617–625 MB), flat in -j (-j8 within
//! 1.15 × -j1, medians of three runs each), and flat in the input: a kernel with
//! four copies of the vmlinux's `.debug_info` stays within 1.3 × the vmlinux. Skips
//! with a message when the corpus, /usr/bin/time or objcopy are absent; fails
//! instead with `DWARF2BTF_REQUIRE_DATA=1`, as CI runs it.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// Removes a temporary folder however the test ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(name: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("dwarf2btf-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// Encodes `input` at `-jJOBS` under GNU time: (peak RSS in KB, the output bytes).
fn peak_kb(jobs: usize, input: &Path, dir: &Path) -> (u64, Vec<u8>) {
    let out = dir.join(format!("out-j{jobs}.btf"));
    let bin = Path::new(env!("CARGO_BIN_EXE_dwarf2btf"));
    let kb = whole_kb(gnu_time(bin, &kernel_args(jobs, input, &out), "%M")[0]);
    (kb, std::fs::read(&out).unwrap())
}

/// The corpus, once it and GNU time are found (`corpus` and `skip` report a
/// missing one, and fail under `DWARF2BTF_REQUIRE_DATA=1`).
fn ready() -> Option<PathBuf> {
    let c = corpus()?;
    if !Path::new(GNU_TIME).exists() {
        skip(&format!("{GNU_TIME} (GNU time)"));
        return None;
    }
    Some(c)
}

/// The peak RSS bound for the corpus vmlinux with the kernel's flags.
const MAX_KB: u64 = 95 * 1024;

#[test]
fn peak_rss_is_small_flat_in_jobs_and_flat_in_input() {
    let Some(c) = ready() else { return };
    let dir = temp_dir("engine-memory");
    let vmlinux = c.join("vmlinux");
    recache(&vmlinux);
    // Medians of three runs: with two workers, which large units happen to be
    // in flight at once moves a single run's peak by a few MB (-j8 took
    // 58.4-62.8 MB in six runs, once 64.9 MB, where -j1 takes 54.8).
    let median = |jobs: usize| {
        let mut runs: Vec<(u64, Vec<u8>)> =
            (0..3).map(|_| peak_kb(jobs, &vmlinux, &dir.0)).collect();
        runs.sort_by_key(|r| r.0);
        runs.swap_remove(1)
    };
    let (j1, out1) = median(1);
    let (j8, out8) = median(8);
    eprintln!("vmlinux peak RSS, medians of 3: -j1 {j1} KB, -j8 {j8} KB");
    assert!(out1 == out8, "-j1 and -j8 outputs differ");
    for (j, kb) in [(1, j1), (8, j8)] {
        assert!(kb <= MAX_KB, "-j{j} peak RSS {kb} KB > {MAX_KB} KB");
    }
    assert!(
        j8 as f64 <= 1.15 * j1 as f64,
        "-j8 peak RSS {j8} KB > 1.15 × -j1's {j1} KB"
    );
    let Some(v4) = four_copies(&vmlinux, &dir.0) else {
        skip("the four-copy kernel (objcopy failed or is absent)");
        return;
    };
    recache(&v4);
    let (j2, _) = peak_kb(2, &vmlinux, &dir.0);
    let (x4, out4) = peak_kb(2, &v4, &dir.0);
    eprintln!("peak RSS at -j2: vmlinux {j2} KB, four copies of .debug_info {x4} KB");
    // The engine is held to 1.15 (benches/engine prints it). Since repeated
    // function records are dropped as they come this measured 1.10–1.13 on a quiet
    // machine, up to 1.22 on a loaded one (1.25–1.34 when the records grew with the
    // input); 1.07–1.09 since both inputs are cached alike (`recache`) and the
    // pages beside the sections read are released. The check leaves room for a
    // loaded machine.
    assert!(
        x4 as f64 <= 1.3 * j2 as f64,
        "four-copy kernel peak RSS {x4} KB > 1.3 × {j2} KB"
    );
    // The four-copy kernel's BTF is not compared with the vmlinux's: with functions
    // and variables encoded, the copies' repeated function and variable records change
    // the output (not a kernel pahole has a reference for), so only its memory counts.
    assert!(out4.len() > 32, "the four-copy kernel's BTF is empty");
}
