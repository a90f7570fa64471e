//! The kernel build's module step with dwarf2btf as pahole: on copies of the corpus
//! modules, `dwarf2btf -J -j2 $KFLAGS,distilled_base --btf_base vmlinux M.ko` writes
//! `.BTF` relative to a distilled `.BTF.base`, as pahole 1.31 does.

mod common;

use common::*;
use std::ffi::OsStr;
use std::process::Command;

#[test]
fn modules_get_distilled_split_btf() {
    let (Some(corpus), Some(reference), Some(btfcmp)) = (corpus(), reference(), btfcmp()) else {
        return;
    };
    let dir = TempDir::new("dropin-modules");
    let vmlinux = corpus.join("vmlinux");
    for m in MODULES {
        let ko = copy_to(&corpus.join(format!("{m}.ko")), &dir, &format!("{m}.ko"));
        ok(dwarf2btf()
            .args(["-J", "-j2"])
            .arg(format!("--btf_features={KFEATURES},distilled_base"))
            .arg("--lang_exclude=rust")
            .arg("--btf_base")
            .arg(&vmlinux)
            .arg(&ko));
        let split = dir.join(format!("{m}.BTF"));
        let base = dir.join(format!("{m}.BTF.base"));
        std::fs::write(&split, read_section(&ko, ".BTF")).unwrap();
        std::fs::write(&base, read_section(&ko, ".BTF.base")).unwrap();
        let ref_split = reference.join(format!("{m}.distilled.BTF"));
        let ref_base = reference.join(format!("{m}.distilled.BTF.base"));
        // Ours and pahole's .BTF, each over its own .BTF.base.
        let split_args: Vec<&OsStr> = vec![
            split.as_os_str(),
            ref_split.as_os_str(),
            OsStr::new("--base-a"),
            base.as_os_str(),
            OsStr::new("--base-b"),
            ref_base.as_os_str(),
        ];

        // The whole comparison: `equal`, and both sections pahole's bytes.
        let (verdict, report) = btfcmp_report(&btfcmp, &split_args);
        assert_eq!(verdict, "equal", "{m}:\n{report}");
        assert!(std::fs::read(&split).unwrap() == std::fs::read(&ref_split).unwrap());
        assert!(std::fs::read(&base).unwrap() == std::fs::read(&ref_base).unwrap());
        let kinds = "INT,PTR,ARRAY,STRUCT,UNION,ENUM,FWD,TYPEDEF,VOLATILE,CONST,RESTRICT,\
                     FLOAT,TYPE_TAG,ENUM64,VAR,DATASEC";
        let mut args = split_args.clone();
        args.extend([OsStr::new("--only-kinds"), OsStr::new(kinds)]);
        let (verdict, report) = btfcmp_report(&btfcmp, &args);
        assert!(
            verdict == "equal" || verdict.starts_with("differ: 0 only-in-A"),
            "{m}: .BTF over .BTF.base has types pahole's has not:\n{report}"
        );
        let args: Vec<&OsStr> = vec![base.as_os_str(), ref_base.as_os_str()];
        let (verdict, report) = btfcmp_report(&btfcmp, &args);
        assert!(
            verdict == "equal" || verdict.starts_with("differ: 0 only-in-A"),
            "{m}: .BTF.base has types pahole's has not:\n{report}"
        );

        // Our own checks: the pair is valid split BTF over its distilled base.
        ok(dwarf2btf()
            .arg("validate")
            .arg(&split)
            .arg("--base-btf")
            .arg(&base));
        if need("bpftool") {
            // libbpf reads the pair as split BTF over the distilled base.
            run_clean(
                Command::new("bpftool")
                    .args(["btf", "dump", "file"])
                    .arg(&split)
                    .arg("--base-btf")
                    .arg(&base),
            );
            // The acceptance command. bpftool 7.1 (libbpf 1.1) predates .BTF.base: it
            // reads .BTF as split over vmlinux without relocating (libbpf ≥ 1.5 and the
            // kernel relocate), so this shows the file is readable, not the ids' meaning;
            // it behaves the same on pahole's output.
            run_clean(
                Command::new("bpftool")
                    .args(["btf", "dump", "file"])
                    .arg(&ko)
                    .arg("--base-btf")
                    .arg(&vmlinux),
            );
        }
    }
}

/// `-J` into the module equals the detached split BTF distilled afterwards: the two
/// output paths agree byte for byte.
#[test]
fn in_place_equals_detached_then_distilled() {
    let Some(corpus) = corpus() else {
        return;
    };
    let dir = TempDir::new("dropin-consistent");
    let vmlinux = corpus.join("vmlinux");
    let base = std::sync::Arc::new(dwarf2btf::btf::read::read_file(&vmlinux, None).unwrap());
    let m = "vsock_loopback";
    let ko = copy_to(&corpus.join(format!("{m}.ko")), &dir, "m.ko");
    let detached = dir.join("m.btf");
    let features = format!("--btf_features={KFEATURES},distilled_base");
    ok(dwarf2btf()
        .args(["-J", &features, "--btf_base"])
        .arg(&vmlinux)
        .arg(format!("--btf_encode_detached={}", detached.display()))
        .arg(&ko));
    // Detached output is plain split BTF over vmlinux, as pahole writes it.
    let bytes = std::fs::read(&detached).unwrap();
    dwarf2btf::btf::read::parse(&bytes, Some(base.clone())).unwrap();
    let (split, dist_base) = dwarf2btf::emit::distill_bytes(&bytes, &base).unwrap();
    ok(dwarf2btf()
        .args(["-J", &features, "--btf_base"])
        .arg(&vmlinux)
        .arg(&ko));
    assert!(read_section(&ko, ".BTF") == split);
    assert!(read_section(&ko, ".BTF.base") == dist_base);
}
