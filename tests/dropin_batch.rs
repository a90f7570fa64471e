//! Many modules per run: `dwarf2btf -J --btf_base vmlinux a.ko b.ko c.ko` writes into
//! each module the same bytes as three separate runs, in less time.

mod common;

use common::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[test]
fn batch_equals_separate_runs_and_is_faster() {
    let Some(corpus) = corpus() else {
        return;
    };
    let vmlinux = corpus.join("vmlinux");
    let features = format!("--btf_features={KFEATURES},distilled_base");
    let args = ["-J", features.as_str(), "--lang_exclude=rust", "--btf_base"];
    let copies = |tag: &str| -> (TempDir, Vec<PathBuf>) {
        let dir = TempDir::new(tag);
        let kos = MODULES
            .iter()
            .map(|m| {
                copy_to(
                    &corpus.join(format!("{m}.ko")),
                    &dir,
                    format!("{m}.ko").as_str(),
                )
            })
            .collect();
        (dir, kos)
    };
    // Best of five of each, so that other work on the machine does not decide.
    let (mut separate, mut batch) = (Duration::MAX, Duration::MAX);
    let mut outputs = Vec::new();
    for _ in 0..5 {
        let (sep_dir, sep) = copies("dropin-separate");
        let t = Instant::now();
        for ko in &sep {
            ok(dwarf2btf().args(args).arg(&vmlinux).arg(ko));
        }
        separate = separate.min(t.elapsed());

        let (bat_dir, bat) = copies("dropin-batch");
        let t = Instant::now();
        ok(dwarf2btf().args(args).arg(&vmlinux).args(&bat));
        batch = batch.min(t.elapsed());

        for (a, b) in sep.iter().zip(&bat) {
            let (a, b) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
            assert!(a == b, "batch output differs from a separate run");
            outputs.push(a);
        }
        // Every run wrote something new into every module.
        for (ko, m) in bat.iter().zip(MODULES) {
            let orig = std::fs::read(corpus.join(format!("{m}.ko"))).unwrap();
            assert!(std::fs::read(ko).unwrap() != orig, "{m} not written");
            assert!(!read_section(ko, ".BTF.base").is_empty());
        }
        drop((sep_dir, bat_dir));
    }
    // Same bytes on every round.
    for chunk in outputs.chunks(MODULES.len()).skip(1) {
        assert!(chunk == &outputs[..MODULES.len()]);
    }
    eprintln!("three separate runs: {separate:?}; one batch run: {batch:?}");
    assert!(
        batch < separate,
        "batch {batch:?} not faster than separate runs {separate:?}"
    );
}
