//! `.BTF` added to and replaced in small compiled objects of every ELF flavour the
//! installed compilers can produce, checked with binutils and against llvm-objcopy.

mod common;

use common::*;
use dwarf2btf::elf_write::{set_sections, write_sections_in_place};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = "struct pair { int a; long b; };\n\
                      struct pair global_pair;\n\
                      int first(struct pair *p) { return p->a + (int)global_pair.b; }\n";

/// Compiles `SOURCE` with `cc args`; `None` when this compiler/target is unavailable.
fn compile(dir: &TempDir, name: &str, cc: &str, args: &[&str]) -> Option<PathBuf> {
    let src = dir.join("t.c");
    std::fs::write(&src, SOURCE).unwrap();
    let obj = dir.join(name);
    let ok = Command::new(cc)
        .args(args)
        .args(["-g", "-O1", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        Some(obj)
    } else {
        skip(&format!(
            "{name}: `{cc} {}` cannot compile here",
            args.join(" ")
        ));
        None
    }
}

fn payload(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| i.to_le_bytes()[0].wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// readelf's symbol and relocation listings: unchanged by adding a section when
/// section indices stay valid.
fn symbols_and_relocs(path: &Path) -> String {
    run_clean(Command::new("readelf").args(["-sW", "-rW"]).arg(path))
}

fn check_flavour(dir: &TempDir, obj: &Path) {
    let input = std::fs::read(obj).unwrap();
    let btf = payload(1000, 7);

    // Add.
    let added = set_sections(&input, &[(".BTF", &btf)]).unwrap();
    let out = dir.join("added.o");
    std::fs::write(&out, &added).unwrap();
    check_elf(&out, &[(".BTF", &btf)]);
    assert_eq!(symbols_and_relocs(obj), symbols_and_relocs(&out));

    // The same section header fields (index included) as llvm-objcopy --add-section,
    // which is what pahole runs.
    if have("llvm-objcopy") {
        let pay = dir.join("payload");
        std::fs::write(&pay, &btf).unwrap();
        let llvm = dir.join("llvm.o");
        run_clean(
            Command::new("llvm-objcopy")
                .arg(format!("--add-section=.BTF={}", pay.display()))
                .arg(obj)
                .arg(&llvm),
        );
        let ours = section_fields(&out, ".BTF").unwrap();
        assert_eq!(ours, section_fields(&llvm, ".BTF").unwrap());
        assert_eq!(ours.1, "PROGBITS");
        assert_eq!((ours.2.as_str(), ours.5.as_str()), ("", "1"));
        // Everything readelf shows is the same: headers, every section's offset and
        // size, symbols, relocations. (The bytes differ only in .shstrtab, whose
        // strings llvm-objcopy re-sorts, and so in the sh_name fields. llvm-objcopy
        // also empties clang's .llvm_addrsig, which we keep as it was.)
        let all = |p: &Path| {
            let text = run_clean(Command::new("readelf").arg("-aW").arg(p));
            text.lines()
                .filter(|l| !l.contains(".llvm_addrsig"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        let (a, b) = (all(&out), all(&llvm));
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(
                x,
                y,
                "readelf -aW of {} and of llvm-objcopy's output",
                obj.display()
            );
        }
        assert_eq!(a.len(), b.len());
    }

    // GNU objcopy (what pahole runs in a GCC kernel build: LLVM_OBJCOPY=$(OBJCOPY))
    // gives the same header fields, but inserts .BTF before .symtab, renumbering the
    // sections after it; we keep every index, as llvm-objcopy does.
    let pay = dir.join("payload");
    std::fs::write(&pay, &btf).unwrap();
    let gnu = dir.join("gnu.o");
    let (ok, _, err) = run(Command::new("objcopy")
        .arg(format!("--add-section=.BTF={}", pay.display()))
        .arg(obj)
        .arg(&gnu));
    if ok {
        let (g, o) = (
            section_fields(&gnu, ".BTF").unwrap(),
            section_fields(&out, ".BTF").unwrap(),
        );
        assert_eq!(
            (g.1, g.2, g.3, g.4, g.5, g.6),
            (o.1, o.2, o.3, o.4, o.5, o.6)
        );
    } else {
        eprintln!("GNU objcopy cannot handle {}: {err}", obj.display());
    }

    // Replace with a larger payload, then set .BTF smaller plus a new .BTF.base.
    let bigger = payload(5000, 3);
    let replaced = set_sections(&added, &[(".BTF", &bigger)]).unwrap();
    let out2 = dir.join("replaced.o");
    std::fs::write(&out2, &replaced).unwrap();
    check_elf(&out2, &[(".BTF", &bigger)]);
    assert_eq!(section_fields(&out2, ".BTF"), section_fields(&out, ".BTF"));

    let small = payload(10, 1);
    let base = payload(300, 2);
    let both = set_sections(&replaced, &[(".BTF", &small), (".BTF.base", &base)]).unwrap();
    let out3 = dir.join("both.o");
    std::fs::write(&out3, &both).unwrap();
    check_elf(&out3, &[(".BTF", &small), (".BTF.base", &base)]);
    assert_eq!(symbols_and_relocs(obj), symbols_and_relocs(&out3));
    let idx_btf = section_fields(&out3, ".BTF").unwrap().0;
    let idx_base = section_fields(&out3, ".BTF.base").unwrap().0;
    assert_eq!(idx_base, idx_btf + 1);

    // In place, keeping the mode, same bytes as set_sections.
    let inplace = dir.join("inplace.o");
    std::fs::write(&inplace, &input).unwrap();
    std::fs::set_permissions(&inplace, std::fs::Permissions::from_mode(0o640)).unwrap();
    write_sections_in_place(&inplace, &[(".BTF", btf.clone())]).unwrap();
    assert!(std::fs::read(&inplace).unwrap() == added);
    let mode = std::fs::metadata(&inplace).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
}

#[test]
fn x86_64_object() {
    let dir = TempDir::new("obj64");
    let Some(obj) = compile(&dir, "t64.o", "gcc", &[]) else {
        return;
    };
    check_flavour(&dir, &obj);
    // The result still links and runs.
    let btf = payload(64, 9);
    let with = dir.join("with_btf.o");
    std::fs::write(
        &with,
        set_sections(&std::fs::read(&obj).unwrap(), &[(".BTF", &btf)]).unwrap(),
    )
    .unwrap();
    let main = dir.join("main.c");
    std::fs::write(
        &main,
        "struct pair { int a; long b; };\nint first(struct pair *p);\n\
         int main(void) { struct pair p = { 42, 0 }; return first(&p) == 42 ? 0 : 1; }\n",
    )
    .unwrap();
    let prog = dir.join("prog");
    run_clean(
        Command::new("gcc")
            .arg(&main)
            .arg(&with)
            .arg("-o")
            .arg(&prog),
    );
    assert!(Command::new(&prog).status().unwrap().success());
}

/// An object of ELF class and byte order `tag`, compiled by `cc` with `args`, gets
/// its sections written as for the host's.
fn flavour(tag: &str, cc: &str, args: &[&str]) {
    let dir = TempDir::new(&format!("obj{tag}"));
    if let Some(obj) = compile(&dir, &format!("t{tag}.o"), cc, args) {
        check_flavour(&dir, &obj);
    }
}

#[test]
fn i386_object() {
    flavour("32", "gcc", &["-m32"]);
}

#[test]
fn big_endian_64_object() {
    flavour("be64", "clang", &["--target=powerpc64-linux-gnu"]);
}

#[test]
fn big_endian_32_object() {
    flavour("be32", "clang", &["--target=powerpc-linux-gnu"]);
}

/// A linked executable (ET_EXEC/ET_DYN with segments) gets a non-loaded `.BTF`.
#[test]
fn linked_executable() {
    let dir = TempDir::new("exe");
    let src = dir.join("m.c");
    std::fs::write(&src, "int main(void) { return 3; }\n").unwrap();
    let exe = dir.join("m");
    let (ok, _, err) = run(Command::new("gcc").arg("-g").arg(&src).arg("-o").arg(&exe));
    if !ok {
        skip(&format!("gcc cannot link here: {err}"));
        return;
    }
    let original = std::fs::read(&exe).unwrap();
    let btf = payload(777, 5);
    write_sections_in_place(&exe, &[(".BTF", btf.clone())]).unwrap();
    check_elf(&exe, &[(".BTF", &btf)]);
    let status = Command::new(&exe).status().unwrap();
    assert_eq!(status.code(), Some(3));
    let segments = |p: &Path| run_clean(Command::new("readelf").arg("-lW").arg(p));
    let orig_path = dir.join("orig");
    std::fs::write(&orig_path, &original).unwrap();
    assert_eq!(segments(&exe), segments(&orig_path));

    // A loaded section keeps its size; same-size contents go in place.
    let text = dumped_section(&orig_path, ".text", &dir.0);
    let mut longer = text.clone();
    longer.push(0xc3);
    let err = set_sections(&original, &[(".text", &longer)]).unwrap_err();
    assert!(err.to_string().contains("cannot change"), "{err}");
    assert!(set_sections(&original, &[(".text", &text)]).unwrap() == original);
    // Sections other sections depend on are refused.
    let err = set_sections(&original, &[(".strtab", b"\0")]).unwrap_err();
    assert!(err.to_string().contains("links to it"), "{err}");
    // A non-loaded section may grow: it moves to the end.
    let comment = payload(3000, 4);
    let out = set_sections(&original, &[(".comment", &comment)]).unwrap();
    std::fs::write(&exe, &out).unwrap();
    check_elf(&exe, &[(".comment", &comment)]);
    assert_eq!(Command::new(&exe).status().unwrap().code(), Some(3));
}
