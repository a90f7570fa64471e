//! The engine's output does not depend on how it runs: the corpus vmlinux and the
//! three modules (split over the vmlinux's `.BTF`) give the same bytes with 1, 2, 4
//! and 8 worker threads and several look-ahead windows (fixed ones, and the default,
//! which with several workers lets small units run ahead) in the default dedup mode
//! (incremental for the vmlinux, one-shot for the modules), equal to an explicitly
//! one-shot sequential run (pahole's way: libbpf's dedup of the whole encoded
//! stream). The incremental mode is also checked on the three modules. Skips with a message when the corpus is absent.

mod common;
use common::*;
use dwarf2btf::pipeline::{encode_bytes, DedupMode, Options, Tuning};
use std::ffi::OsString;
use std::path::Path;

/// The options the kernel's build passes, for `input` (split over `base` if given).
fn options(input: &Path, base: Option<&Path>) -> Options {
    let mut args: Vec<OsString> = vec!["-J".into(), KFLAGS.into(), "--lang_exclude=rust".into()];
    if let Some(b) = base {
        args.push("--btf_base".into());
        args.push(b.into());
    }
    args.push(input.into());
    dwarf2btf::cli::parse_pahole_args(&args).expect("options")
}

/// A fixed window of that many units, or (0) the default one.
fn run(opts: &Options, workers: usize, window: usize, dedup: DedupMode) -> Vec<u8> {
    let tuning = Tuning {
        workers: Some(workers),
        window: (window > 0).then_some(window),
        dedup,
        ..Tuning::default()
    };
    encode_bytes(opts, &tuning).unwrap_or_else(|e| {
        panic!(
            "{}: -j{workers} window {window} {dedup:?}: {e}",
            opts.input.display()
        )
    })
}

/// One-shot bytes first (sequential), then those of `mode` for each (workers,
/// window; 0: the default window): all must be equal.
fn check(opts: &Options, mode: DedupMode, configs: &[(usize, usize)]) {
    let oneshot = run(opts, 1, 1, DedupMode::OneShot);
    assert!(oneshot.len() > 32, "{}: empty BTF", opts.input.display());
    for &(workers, window) in configs {
        let got = run(opts, workers, window, mode);
        assert!(
            got == oneshot,
            "{}: -j{workers} window {window}: {mode:?} output ({} bytes) differs from one-shot ({} bytes)",
            opts.input.display(),
            got.len(),
            oneshot.len()
        );
    }
    // And one-shot dedup is itself independent of the threads.
    assert!(run(opts, 4, 3, DedupMode::OneShot) == oneshot);
}

#[test]
fn vmlinux_bytes_do_not_depend_on_jobs_or_window() {
    let Some(c) = corpus() else {
        eprintln!("skipped: corpus not found (set DWARF2BTF_CORPUS)");
        return;
    };
    check(
        &options(&c.join("vmlinux"), None),
        DedupMode::Auto,
        &[(1, 1), (2, 2), (2, 7), (4, 3), (8, 16), (2, 0), (8, 0)],
    );
}

#[test]
fn module_bytes_do_not_depend_on_jobs_or_window() {
    let Some(c) = corpus() else {
        eprintln!("skipped: corpus not found (set DWARF2BTF_CORPUS)");
        return;
    };
    let vmlinux = c.join("vmlinux");
    for m in ["nf_tables.ko", "nf_conntrack.ko", "vsock_loopback.ko"] {
        check(
            &options(&c.join(m), Some(&vmlinux)),
            DedupMode::Auto,
            &[(1, 1), (1, 2), (2, 2), (4, 4), (8, 3), (8, 32), (4, 0)],
        );
    }
    // The incremental mode on split BTF, functions and variables included: also
    // one-shot's bytes (nf_conntrack needs the final pass to keep libbpf's decisions
    // about base FWDs, see `dedup::FinalPass`).
    for m in ["nf_tables.ko", "nf_conntrack.ko", "vsock_loopback.ko"] {
        check(
            &options(&c.join(m), Some(&vmlinux)),
            DedupMode::Incremental,
            &[(1, 1), (2, 2), (8, 5)],
        );
    }
}
