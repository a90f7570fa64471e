//! Deterministic replay of the fuzz cases, in plain `cargo test` (no nightly): every
//! saved case in `fuzz/regressions/<target>/`, the committed seeds, the small pahole
//! reference files and, when a local `fuzz/corpus/<target>/` exists, a fixed sample of
//! it, each through the same entry point the fuzz target calls (`fuzz/entry.rs`).

#[path = "../fuzz/entry.rs"]
mod entry;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

const FUZZ: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz");

/// At most this many files of a local corpus folder (every n-th, in name order).
const CORPUS_SAMPLE: usize = 200;

/// Regular files of `dir`, in name order; empty if it does not exist.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_none_or(|e| e != "md"))
        .collect();
    v.sort();
    v
}

fn sample(mut v: Vec<PathBuf>, n: usize) -> Vec<PathBuf> {
    if v.len() > n {
        let step = v.len().div_ceil(n);
        v = v.into_iter().step_by(step).collect();
    }
    v
}

/// The small pahole reference files (not the multi-megabyte vmlinux ones).
fn reference_files() -> Vec<PathBuf> {
    let dirs = [
        std::env::var_os("DWARF2BTF_REFERENCE").map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference/pahole-1.31")),
        Some(PathBuf::from("/work/shared/reference/pahole-1.31")),
    ];
    let Some(dir) = dirs.into_iter().flatten().find(|d| d.is_dir()) else {
        println!("pahole reference files not found: replaying saved cases and seeds only");
        return Vec::new();
    };
    files(&dir)
        .into_iter()
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            !n.starts_with("vmlinux")
                && (n.ends_with(".BTF") || n.ends_with(".btf") || n.ends_with(".base"))
        })
        .collect()
}

/// Runs `f` on every file; returns how many ran, and fails naming each that panicked.
fn replay(target: &str, inputs: Vec<PathBuf>, f: fn(&[u8])) -> usize {
    let mut failed = Vec::new();
    for p in &inputs {
        let data = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| f(&data))) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("{}: {msg}", p.display()));
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} cases failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    println!("{target}: replayed {} inputs", inputs.len());
    inputs.len()
}

/// Saved regressions, the committed seeds of `kind`, extra inputs and a local corpus sample.
fn inputs(target: &str, seed_kind: &str, extra: Vec<PathBuf>) -> Vec<PathBuf> {
    let fuzz = Path::new(FUZZ);
    let mut v = files(&fuzz.join("regressions").join(target));
    v.extend(files(&fuzz.join("seeds").join(seed_kind)));
    v.extend(extra);
    v.extend(sample(
        files(&fuzz.join("corpus").join(target)),
        CORPUS_SAMPLE,
    ));
    v
}

#[test]
fn replay_btf_read_validate() {
    let mut extra = reference_files();
    extra.push(Path::new(FUZZ).join("data/base.btf"));
    let n = replay(
        "btf_read_validate",
        inputs("btf_read_validate", "btf", extra),
        entry::btf_read_validate,
    );
    assert!(n >= 4, "too few inputs: {n}");
}

#[test]
fn replay_dedup() {
    let mut extra = reference_files();
    extra.push(Path::new(FUZZ).join("data/base.btf"));
    let n = replay("dedup", inputs("dedup", "btf", extra), entry::dedup);
    assert!(n >= 4, "too few inputs: {n}");
}

/// Replays the ELF inputs of the fuzz target `target` through `entry`.
fn replay_elf(target: &str, entry: fn(&[u8])) {
    let n = replay(target, inputs(target, "elf", Vec::new()), entry);
    assert!(n >= 2, "too few inputs: {n}");
}

#[test]
fn replay_elf_reader() {
    replay_elf("elf_reader", entry::elf_reader);
}

#[test]
fn replay_dwarf_loader() {
    replay_elf("dwarf_loader", entry::dwarf_loader);
}

/// The seeds themselves are good input: each ELF seed encodes (the replay above only
/// checks that nothing panics), so the fuzz targets start from the deep paths.
#[test]
fn elf_seeds_encode() {
    for p in files(&Path::new(FUZZ).join("seeds/elf")) {
        let opts = dwarf2btf::pipeline::Options {
            input: p.clone(),
            btf_base: None,
            detached: None,
            features: dwarf2btf::encode::Features::from_list("default"),
            lang_exclude: Vec::new(),
            jobs: 1,
        };
        let btf = dwarf2btf::pipeline::encode_file(&opts)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(
            btf.types().len() > 10,
            "{}: {} types",
            p.display(),
            btf.types().len()
        );
    }
}
