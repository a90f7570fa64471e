//! The function table and kfunc sets of small objects built here with gcc and ld:
//! optimized clones, cold pieces, aliases, static functions of the same name in a
//! relocatable link (as in kernel modules), and hand-made BTF_SET8 kfunc sets.
//!
//! Skips (with a message) when gcc or ld is missing.

mod common;
use common::*;

use dwarf2btf::kfuncs::{Kfuncs, KF_FASTCALL};
use dwarf2btf::symbols::ElfSymbols;
use object::{Object, ObjectSymbol, SymbolKind};

/// The STT_FUNC symbols of a file, read through `object`'s generic API (a second
/// reader, independent of symbols.rs).
fn func_symbols(data: &[u8]) -> Vec<(String, u64)> {
    let f = object::File::parse(data).unwrap();
    f.symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
        .map(|s| (s.name().unwrap().to_string(), s.address()))
        .collect()
}

const CLONES_C: &str = r#"
extern void ext_sink(int);
extern void ext_fail(const char *);

/* Static and always called with an unused second argument: IPA-SRA drops it. */
static __attribute__((noinline)) int helper(int a, int unused)
{
    ext_sink(a);
    return a * 3 + 1;
}

/* Static and always called with k == 4: constant propagation clones it. */
static __attribute__((noinline)) int scaled(int a, int k)
{
    ext_sink(a * k);
    return a * k + k;
}

/* An unlikely branch to a cold function is split out as f.cold. */
__attribute__((cold, noinline)) void slow_path(int x) { ext_fail("slow"); ext_sink(x); }

int with_cold(int x)
{
    if (__builtin_expect(x == 42, 0)) {
        slow_path(x);
        ext_fail("x");
        ext_sink(x * 7);
    }
    return x + 1;
}

int use1(int x) { return helper(x, 5) + scaled(x, 4); }
int use2(int x) { return helper(x + 1, 7) + scaled(x + 2, 4); }
int alias_fn(int x) __attribute__((alias("use1")));
"#;

/// `source` compiled by `gcc -O2 -c` into a scratch directory: the object's path
/// and bytes (None, after a skip, without gcc).
fn gcc_o2(name: &str, source: &str) -> Option<(std::path::PathBuf, Vec<u8>)> {
    let dir = scratch(&format!("gcc_{name}"));
    std::fs::write(dir.join(format!("{name}.c")), source).unwrap();
    let (c, o) = (format!("{name}.c"), format!("{name}.o"));
    run_in(&dir, "gcc", &["-O2", "-c", &c, "-o", &o])?;
    let path = dir.join(o);
    let data = std::fs::read(&path).unwrap();
    Some((path, data))
}

#[test]
fn gcc_clones_pieces_and_aliases() {
    let Some((path, data)) = gcc_o2("clones", CLONES_C) else {
        return;
    };
    let syms = ElfSymbols::parse(&path, &data).expect("parses");
    let table = &syms.functions;
    let all = func_symbols(&data);
    eprintln!("gcc -O2 function symbols: {all:?}");

    // Every function symbol is in the table under its base name, unless it is a
    // .cold/.part piece; the pieces are counted.
    let mut pieces = 0;
    for (name, addr) in &all {
        let base = name.split('.').next().unwrap();
        let suffix = &name[base.len()..];
        if suffix.contains(".cold") || suffix.contains(".part") {
            pieces += 1;
            let kept = table.find(base).map(|f| f.1.syms().any(|s| s.name == name));
            assert_ne!(kept, Some(true), "{name} must not be kept");
            continue;
        }
        let f = table
            .find(base)
            .unwrap_or_else(|| panic!("{base} missing"))
            .1;
        assert!(f.syms().any(|s| s.name == name && s.addr == *addr));
    }
    assert_eq!(table.pieces_skipped(), pieces);
    assert_eq!(table.sym_count() + pieces, all.len());

    // gcc 12 at -O2 splits the cold path and clones both static helpers.
    assert!(
        all.iter().any(|(n, _)| n.starts_with("with_cold.cold")),
        "expected with_cold.cold in {all:?}"
    );
    let helper = table.find("helper").expect("helper").1;
    let scaled = table.find("scaled").expect("scaled").1;
    assert!(helper.syms().all(|s| s.name.starts_with("helper.")));
    assert!(helper.syms().any(|s| s.is_optimized_clone()));
    assert!(scaled.syms().any(|s| s.is_optimized_clone()));
    let clone = scaled.syms().find(|s| s.is_optimized_clone()).unwrap();
    assert!(scaled.optimized_symbol_at(clone.addr) || clone.addr == 0);

    // An alias is another name at the same address.
    let use1 = table.find("use1").unwrap().1.sym(0).addr;
    let at: Vec<&str> = table.at_addr(use1).map(|(f, _)| f.name()).collect();
    assert!(at.contains(&"use1") && at.contains(&"alias_fn"), "{at:?}");
    assert!(!table.find("alias_fn").unwrap().1.ambiguous_addr);
}

const DUP_A: &str = r#"
extern void ext_sink(int);
static __attribute__((noinline)) int dup(int x) { ext_sink(x); return x + 1; }
int a_user(int x) { return dup(x) * 2; }
"#;
const DUP_B: &str = r#"
extern void ext_sink(int);
int b_first(int x) { ext_sink(x); return x - 1; }
static __attribute__((noinline)) int dup(int x) { ext_sink(x * 3); return x + 2; }
int b_user(int x) { return dup(x) * 5; }
"#;

#[test]
fn relocatable_link_with_two_static_functions_of_one_name() {
    let dir = scratch("gcc_dup");
    std::fs::write(dir.join("a.c"), DUP_A).unwrap();
    std::fs::write(dir.join("b.c"), DUP_B).unwrap();
    let cc = ["-O2", "-fno-toplevel-reorder", "-fno-inline", "-c"];
    for f in ["a", "b"] {
        let (src, obj) = (format!("{f}.c"), format!("{f}.o"));
        let mut args = cc.to_vec();
        args.extend([src.as_str(), "-o", obj.as_str()]);
        if run_in(&dir, "gcc", &args).is_none() {
            return;
        }
    }
    if run_in(&dir, "ld", &["-r", "a.o", "b.o", "-o", "ab.o"]).is_none() {
        return;
    }
    let path = dir.join("ab.o");
    let data = std::fs::read(&path).unwrap();
    let syms = ElfSymbols::parse(&path, &data).expect("parses");
    assert!(syms.is_rel());
    let dup = syms.functions.find("dup").expect("dup").1;
    let addrs: Vec<u64> = dup.syms().map(|s| s.addr).collect();
    eprintln!("dup symbols at {addrs:?} (section offsets)");
    assert_eq!(addrs.len(), 2);
    assert_ne!(addrs[0], addrs[1]);
    // a.o's dup is the first function of .text: offset 0. pahole treats a first
    // address of 0 as unset, so [0, X] is not ambiguous; any other pair is.
    assert_eq!(dup.ambiguous_addr, addrs[0] != 0, "{addrs:?}");
    // The .text of an ET_REL file gets libdwfl's first layout address.
    let text = syms.section_by_name(".text").unwrap();
    assert_eq!(text.file_addr, 0);
    assert_eq!(text.addr, 0x10000);
}

const KFUNC_SETS_C: &str = r#"
asm(
    ".pushsection .BTF_ids,\"a\"\n"
    /* A BTF_ID_LIST entry before any set: not a kfunc. */
    "__BTF_ID__func__listed_only__1:\n .zero 4\n"
    /* A kfunc set (set flags BTF_SET8_KFUNCS). */
    "__BTF_ID__set8__my_kfuncs:\n .zero 4\n .long 1\n"
    "__BTF_ID__func__kf_a__2:\n .zero 4\n .long 0x3\n"
    "__BTF_ID__func__kf_fast__3:\n .zero 4\n .long 0x1000\n"
    "__BTF_ID__func__kf_odd__name__4:\n .zero 4\n .long 0x20\n"
    ".size __BTF_ID__set8__my_kfuncs, .-__BTF_ID__set8__my_kfuncs\n"
    /* A set8 without the kfunc flag: its functions are not kfuncs. */
    "__BTF_ID__set8__not_kfuncs:\n .zero 4\n .long 0\n"
    "__BTF_ID__func__plain__5:\n .zero 4\n .long 0x7\n"
    ".size __BTF_ID__set8__not_kfuncs, .-__BTF_ID__set8__not_kfuncs\n"
    /* A second kfunc set naming kf_a again: the later flags win. */
    "__BTF_ID__set8__more_kfuncs:\n .zero 4\n .long 1\n"
    "__BTF_ID__func__kf_a__6:\n .zero 4\n .long 0x10\n"
    ".size __BTF_ID__set8__more_kfuncs, .-__BTF_ID__set8__more_kfuncs\n"
    ".popsection\n");
int kf_a(void) { return 1; }
"#;

#[test]
fn kfunc_sets_from_btf_ids() {
    let Some((path, data)) = gcc_o2("kfuncs", KFUNC_SETS_C) else {
        return;
    };
    let k = Kfuncs::parse(&path, &data).expect("parses");
    let got: Vec<(&str, u32)> = k.iter().collect();
    assert_eq!(
        got,
        [
            ("kf_a", 0x10),
            ("kf_fast", KF_FASTCALL),
            ("kf_odd__name", 0x20)
        ]
    );
    assert!(!k.contains("plain") && !k.contains("listed_only"));

    // No .BTF_ids: no kfuncs. Not ELF: an error naming the file.
    let (none_path, none) = gcc_o2("none", "int f(void) { return 0; }\n").expect("gcc ran above");
    assert!(Kfuncs::parse(&none_path, &none).unwrap().is_empty());
    let dir = path.parent().unwrap();
    let err = Kfuncs::parse(&dir.join("kfuncs.c"), b"not an elf").unwrap_err();
    assert!(err.to_string().contains("kfuncs.c"), "{err}");
    let err = ElfSymbols::parse(&dir.join("kfuncs.c"), b"\x7fELF\x02\x01\x01").unwrap_err();
    assert!(err.to_string().contains("kfuncs.c"), "{err}");
}
