//! `.BTF` (and `.BTF.base`) written into copies of the corpus modules and vmlinux,
//! checked with binutils, bpftool and the kernel build's own objcopy step.

mod common;

use common::*;
use dwarf2btf::elf_write::{set_sections, write_sections_in_place};
use std::io::Read;
use std::path::Path;
use std::process::Command;

const MODULES: [&str; 3] = ["vsock_loopback", "nf_tables", "nf_conntrack"];

/// The `.BTF` section of vmlinux as a raw file: the base of the module references.
fn vmlinux_btf(corpus: &Path, dir: &TempDir) -> std::path::PathBuf {
    let out = dir.join("vmlinux.btf");
    std::fs::write(&out, read_section(&corpus.join("vmlinux"), ".BTF")).unwrap();
    out
}

fn bpftool_dump(file: &Path, base: &Path) -> String {
    run_clean(
        Command::new("bpftool")
            .args(["btf", "dump", "file"])
            .arg(file)
            .arg("--base-btf")
            .arg(base),
    )
}

/// A copy of module `m` without its `.BTF`, as the kernel build hands it to pahole.
fn stripped_module(corpus: &Path, dir: &TempDir, m: &str, name: &str) -> std::path::PathBuf {
    let out = dir.join(name);
    without_btf(&corpus.join(format!("{m}.ko")), &out);
    assert!(section_fields(&out, ".BTF").is_none());
    out
}

#[test]
fn modules_get_split_btf() {
    let (Some(corpus), Some(reference)) = (corpus(), reference()) else {
        return;
    };
    if !need("bpftool") {
        return;
    }
    let dir = TempDir::new("modules");
    let base = vmlinux_btf(&corpus, &dir);
    for m in MODULES {
        let ko = stripped_module(&corpus, &dir, m, &format!("{m}.ko"));
        let btf = std::fs::read(reference.join(format!("{m}.kernel-flags.btf"))).unwrap();
        write_sections_in_place(&ko, &[(".BTF", btf.clone())]).unwrap();
        check_elf(&ko, &[(".BTF", &btf)]);
        // bpftool (libbpf) reads the section as split BTF over vmlinux, exactly as it
        // reads the raw reference.
        let from_elf = bpftool_dump(&ko, &corpus.join("vmlinux"));
        let from_raw = bpftool_dump(&reference.join(format!("{m}.kernel-flags.btf")), &base);
        assert!(from_elf == from_raw, "{m}: bpftool dumps differ");
        assert!(from_elf.lines().count() > 10);

        // The same .BTF header as llvm-objcopy --add-section (what pahole runs).
        if have("llvm-objcopy") {
            let llvm = dir.join(format!("{m}.llvm.ko"));
            run_clean(
                Command::new("llvm-objcopy")
                    .arg(format!(
                        "--add-section=.BTF={}",
                        reference.join(format!("{m}.kernel-flags.btf")).display()
                    ))
                    .arg(stripped_module(&corpus, &dir, m, &format!("{m}.again.ko")))
                    .arg(&llvm),
            );
            let ours = section_fields(&ko, ".BTF").unwrap();
            assert_eq!(ours, section_fields(&llvm, ".BTF").unwrap(), "{m}");
            // Everything readelf shows (offsets, sizes, symbols, relocations) is the same.
            let all = |p: &Path| run_clean(Command::new("readelf").arg("-aW").arg(p));
            assert!(
                all(&ko) == all(&llvm),
                "{m}: readelf -aW differs from llvm-objcopy's"
            );
            let _ = std::fs::remove_file(&llvm);
        }
        let _ = std::fs::remove_file(&ko);
        let _ = std::fs::remove_file(dir.join(format!("{m}.again.ko")));
    }
}

/// The corpus modules already have a `.BTF` (made by an older pahole): replacing it.
#[test]
fn modules_btf_replaced() {
    let (Some(corpus), Some(reference)) = (corpus(), reference()) else {
        return;
    };
    let dir = TempDir::new("replace");
    for m in MODULES {
        let original = std::fs::read(corpus.join(format!("{m}.ko"))).unwrap();
        let btf = std::fs::read(reference.join(format!("{m}.kernel-flags.btf"))).unwrap();
        let out = set_sections(&original, &[(".BTF", &btf)]).unwrap();
        let ko = dir.join(format!("{m}.ko"));
        std::fs::write(&ko, &out).unwrap();
        check_elf(&ko, &[(".BTF", &btf)]);
        let fields = section_fields(&ko, ".BTF").unwrap();
        assert_eq!(
            Some(fields),
            section_fields(&corpus.join(format!("{m}.ko")), ".BTF")
        );
        if need("bpftool") {
            bpftool_dump(&ko, &corpus.join("vmlinux"));
        }
        // Writing the same again changes nothing.
        assert!(
            set_sections(&out, &[(".BTF", &btf)]).unwrap() == out,
            "{m}: not idempotent"
        );
    }
}

/// pahole with `distilled_base` writes `.BTF` relative to `.BTF.base`.
#[test]
fn modules_get_distilled_base() {
    let (Some(corpus), Some(reference)) = (corpus(), reference()) else {
        return;
    };
    let dir = TempDir::new("distilled");
    for m in MODULES {
        let ko = stripped_module(&corpus, &dir, m, &format!("{m}.ko"));
        let btf = std::fs::read(reference.join(format!("{m}.distilled.BTF"))).unwrap();
        let base = std::fs::read(reference.join(format!("{m}.distilled.BTF.base"))).unwrap();
        write_sections_in_place(&ko, &[(".BTF", btf.clone()), (".BTF.base", base.clone())])
            .unwrap();
        check_elf(&ko, &[(".BTF", &btf), (".BTF.base", &base)]);
        let a = section_fields(&ko, ".BTF").unwrap();
        let b = section_fields(&ko, ".BTF.base").unwrap();
        assert_eq!(b.0, a.0 + 1);
        assert_eq!((&a.1, &a.2, &a.5), (&b.1, &b.2, &b.5));
        if need("bpftool") {
            // bpftool 7.1 (libbpf 1.1) predates .BTF.base: give it the base explicitly.
            let base_file = dir.join(format!("{m}.base"));
            std::fs::write(&base_file, &base).unwrap();
            let dump = bpftool_dump(&ko, &base_file);
            assert!(dump.lines().count() > 10);
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    let (mut fa, mut fb) = (
        std::fs::File::open(a).unwrap(),
        std::fs::File::open(b).unwrap(),
    );
    if fa.metadata().unwrap().len() != fb.metadata().unwrap().len() {
        return false;
    }
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = fa.read(&mut ba).unwrap();
        if n == 0 {
            return true;
        }
        fb.read_exact(&mut bb[..n]).unwrap();
        if ba[..n] != bb[..n] {
            return false;
        }
    }
}

/// vmlinux's `.BTF` is loaded (SHF_ALLOC, in the first PT_LOAD) and found by the kernel
/// through `__start_BTF`/`__stop_BTF`: it can take contents of its own size only.
#[test]
fn vmlinux_loaded_btf_is_fixed() {
    let (Some(corpus), Some(reference)) = (corpus(), reference()) else {
        return;
    };
    let dir = TempDir::new("vmlinux");
    let copy = dir.join("vmlinux");
    std::fs::copy(corpus.join("vmlinux"), &copy).unwrap();
    let own = std::fs::read(vmlinux_btf(&corpus, &dir)).unwrap();
    std::fs::remove_file(dir.join("vmlinux.btf")).unwrap();

    let btf = std::fs::read(reference.join("vmlinux-cloud.kernel-flags.btf")).unwrap();
    eprintln!(
        "vmlinux .BTF: {} bytes; reference: {} bytes",
        own.len(),
        btf.len()
    );
    let msg = write_sections_in_place(&copy, &[(".BTF", btf)])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("vmlinux") && msg.contains(".BTF"), "{msg}");
    assert!(
        msg.contains(&own.len().to_string()) && msg.contains("relinking"),
        "{msg}"
    );
    assert!(
        same_file(&copy, &corpus.join("vmlinux")),
        "vmlinux modified by a failed write"
    );
    assert_eq!(dir.listing(), ["vmlinux"]);

    // Same-size contents go in place; writing back its own .BTF changes no byte.
    write_sections_in_place(&copy, &[(".BTF", own)]).unwrap();
    assert!(same_file(&copy, &corpus.join("vmlinux")));
    assert_eq!(dir.listing(), ["vmlinux"]);
}

/// The kernel build's path: pahole -J on a linked vmlinux that has no `.BTF` yet, then
/// `objcopy --only-section=.BTF --set-section-flags .BTF=alloc,readonly --strip-all`
/// (scripts/link-vmlinux.sh) to make the object linked into the final vmlinux.
#[test]
fn vmlinux_without_btf_gets_one() {
    let (Some(corpus), Some(reference)) = (corpus(), reference()) else {
        return;
    };
    let dir = TempDir::new("vmlinux-add");
    let tmp = dir.join("tmp_vmlinux");
    without_btf(&corpus.join("vmlinux"), &tmp);
    let btf = std::fs::read(reference.join("vmlinux-cloud.kernel-flags.btf")).unwrap();
    let before = run_clean(Command::new("readelf").args(["-lW"]).arg(&tmp));
    write_sections_in_place(&tmp, &[(".BTF", btf.clone())]).unwrap();
    // Segments untouched; the new section is a non-loaded one.
    assert_eq!(
        before,
        run_clean(Command::new("readelf").args(["-lW"]).arg(&tmp))
    );
    run_clean(Command::new("readelf").args(["-hSW"]).arg(&tmp));
    let f = section_fields(&tmp, ".BTF").unwrap();
    assert_eq!(
        (f.1.as_str(), f.2.as_str(), f.5.as_str()),
        ("PROGBITS", "", "1")
    );

    // link-vmlinux.sh sends this objcopy's warnings (empty segments) to /dev/null, then
    // patches e_type to ET_REL so the object can be linked.
    let btf_o = |from: &Path, obj: &Path| {
        let (ok, _, err) = run(Command::new("objcopy")
            .args([
                "--only-section=.BTF",
                "--set-section-flags",
                ".BTF=alloc,readonly",
            ])
            .arg("--strip-all")
            .arg(from)
            .arg(obj));
        assert!(ok, "{err}");
        let mut o = std::fs::read(obj).unwrap();
        o[16] = 1;
        std::fs::write(obj, &o).unwrap();
        o
    };
    let obj = dir.join("btf.o");
    let ours = btf_o(&tmp, &obj);
    // (readelf -a exits 1 on this odd object, whoever made the input: check the parts.)
    run_clean(Command::new("readelf").arg("-hSW").arg(&obj));
    let f = section_fields(&obj, ".BTF").unwrap();
    assert_eq!((f.1.as_str(), f.2.as_str()), ("PROGBITS", "A"));
    assert!(dumped_section(&obj, ".BTF", &dir.0) == btf);

    // The object is byte for byte what the same steps make after llvm-objcopy.
    if have("llvm-objcopy") {
        let llvm = dir.join("tmp_vmlinux.llvm");
        let payload = reference.join("vmlinux-cloud.kernel-flags.btf");
        without_btf(&corpus.join("vmlinux"), &llvm);
        run_clean(
            Command::new("llvm-objcopy")
                .arg(format!("--add-section=.BTF={}", payload.display()))
                .arg(&llvm),
        );
        let all = |p: &Path| run_clean(Command::new("readelf").arg("-hSlW").arg(p));
        assert!(
            all(&tmp) == all(&llvm),
            "readelf -hSlW differs from llvm-objcopy's vmlinux"
        );
        assert!(
            btf_o(&llvm, &dir.join("btf.llvm.o")) == ours,
            "btf.o differs"
        );
    }
    if need("bpftool") {
        let dump = run_clean(
            Command::new("bpftool")
                .args(["btf", "dump", "file"])
                .arg(&tmp),
        );
        assert!(dump.lines().count() > 100_000);
    }
}
