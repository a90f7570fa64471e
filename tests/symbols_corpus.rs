//! The ELF function table, sections, per-CPU objects and kfunc sets of the corpus
//! kernel, checked against pahole v1.31's output for it (the reference BTF) and
//! against libdwfl itself for the module section layout.
//!
//! Skips (with a message) when the corpus or the references are absent.

mod common;
use common::{corpus, reference, skip};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use dwarf2btf::btf::{self, Btf, TypeId, TypeKind};
use dwarf2btf::kfuncs::{Kfuncs, KF_ARENA_ARG1, KF_ARENA_ARG2, KF_ARENA_RET, KF_FASTCALL};
use dwarf2btf::symbols::{ElfSymbols, PERCPU_SECTION};

fn ref_path(name: &str) -> Option<PathBuf> {
    let p = reference()?.join(name);
    if !p.exists() {
        skip(&format!("the reference {name}"));
    }
    p.exists().then_some(p)
}

/// Both the corpus and the reference file `name`.
fn inputs(name: &str) -> Option<(PathBuf, PathBuf)> {
    Some((corpus()?, ref_path(name)?))
}

/// Maps a file read-only.
fn map(path: &Path) -> memmap2::Mmap {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    dwarf2btf::mmap::map_file(&f).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `.BTF` section of vmlinux: the base of the module references.
fn vmlinux_btf(corpus: &Path) -> Arc<Btf> {
    let data = map(&corpus.join("vmlinux"));
    let (bytes, _) = btf::read::btf_bytes(&data, ".BTF").expect("vmlinux .BTF");
    Arc::new(btf::read::parse(&bytes, None).expect("vmlinux .BTF parses"))
}

/// What a reference holds about functions, variables and decl tags.
struct RefFacts {
    /// FUNC names, with their type ids.
    funcs: BTreeMap<String, TypeId>,
    /// DECL_TAG value → names of the FUNCs it tags with component_idx -1.
    func_tags: BTreeMap<String, BTreeSet<String>>,
    /// DATASEC name → (VAR name, offset, size) entries.
    datasecs: BTreeMap<String, Vec<(String, u32, u32)>>,
}

fn ref_facts(btf: &Btf) -> RefFacts {
    let first = btf.first_id().0;
    let name_of =
        |id: TypeId| -> Option<String> { btf.get(id).map(|t| btf.str_at(t.name).into_owned()) };
    let mut funcs = BTreeMap::new();
    let mut func_tags: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut datasecs = BTreeMap::new();
    for (i, t) in btf.types().iter().enumerate() {
        let id = TypeId(first + u32::try_from(i).unwrap());
        match &t.kind {
            TypeKind::Func { .. } => {
                funcs.insert(btf.str_at(t.name).into_owned(), id);
            }
            TypeKind::DeclTag {
                type_id,
                component_idx: -1,
                ..
            } => {
                let target = btf.get(*type_id).expect("tag target");
                if matches!(target.kind, TypeKind::Func { .. }) {
                    func_tags
                        .entry(btf.str_at(t.name).into_owned())
                        .or_default()
                        .insert(name_of(*type_id).unwrap());
                }
            }
            TypeKind::Datasec { entries, .. } => {
                let v = entries
                    .iter()
                    .map(|e| (name_of(e.type_id).unwrap(), e.offset, e.size))
                    .collect();
                datasecs.insert(btf.str_at(t.name).into_owned(), v);
            }
            _ => {}
        }
    }
    RefFacts {
        funcs,
        func_tags,
        datasecs,
    }
}

/// The corpus vmlinux (path and mapping) and what the reference `name` holds, or
/// `None` after a skip message.
fn vmlinux_and_facts(name: &str) -> Option<(PathBuf, memmap2::Mmap, RefFacts)> {
    let (corpus, reference) = inputs(name)?;
    let path = corpus.join("vmlinux");
    let data = map(&path);
    let refb = btf::read::read_file(&reference, None).expect("reference");
    Some((path, data, ref_facts(&refb)))
}

#[test]
fn vmlinux_function_table_covers_every_reference_func() {
    let Some((path, data, facts)) = vmlinux_and_facts("vmlinux-cloud.kernel-flags.btf") else {
        return;
    };
    let t0 = std::time::Instant::now();
    let syms = ElfSymbols::parse(&path, &data).expect("vmlinux symbols");
    let t1 = t0.elapsed();
    let kf = Kfuncs::parse(&path, &data).expect("vmlinux kfuncs");
    eprintln!(
        "vmlinux: ElfSymbols::parse {:.1} ms, Kfuncs::parse {:.1} ms (test profile)",
        t1.as_secs_f64() * 1e3,
        (t0.elapsed() - t1).as_secs_f64() * 1e3
    );
    assert!(!kf.is_empty());
    let table = &syms.functions;
    eprintln!(
        "vmlinux: {} function names from {} symbols ({} .cold/.part pieces skipped); reference: {} FUNCs",
        table.len(),
        table.sym_count(),
        table.pieces_skipped(),
        facts.funcs.len()
    );
    assert!(!syms.is_rel());

    // Every FUNC pahole emitted is a name of the table, with unambiguous symbols.
    let missing: Vec<&String> = facts
        .funcs
        .keys()
        .filter(|n| table.find(n).is_none())
        .collect();
    assert!(missing.is_empty(), "FUNCs not in the table: {missing:?}");
    let ambiguous: Vec<&String> = facts
        .funcs
        .keys()
        .filter(|n| table.find(n).unwrap().1.ambiguous_addr)
        .collect();
    assert!(
        ambiguous.is_empty(),
        "ambiguous FUNCs emitted: {ambiguous:?}"
    );
    // pahole emits FUNCs sorted by name: the reference's FUNC ids follow the table.
    let mut by_id: Vec<(&TypeId, &String)> = facts.funcs.iter().map(|(n, i)| (i, n)).collect();
    by_id.sort();
    let in_id_order: Vec<&String> = by_id.iter().map(|p| p.1).collect();
    let mut sorted = in_id_order.clone();
    sorted.sort();
    assert_eq!(in_id_order, sorted, "reference FUNCs are in strcmp order");

    // The table's own shape on this kernel: no .part piece or .cold piece is a
    // function; every symbol of a name shares the name up to its first '.'.
    for f in table.functions() {
        for s in f.syms() {
            assert_eq!(s.name.split('.').next().unwrap(), f.name());
            assert!(!s.suffix().contains(".part") && !s.suffix().contains(".cold"));
        }
    }
    assert!(
        table.pieces_skipped() > 0,
        "gcc -O2 kernels have .part clones"
    );
    // Some optimized clones are emitted (their parameters survived) and the
    // ambiguous names are many: the rules are exercised on this corpus.
    let clone_only = table
        .functions()
        .filter(|f| f.syms().all(|s| !s.suffix().is_empty()))
        .filter(|f| facts.funcs.contains_key(f.name()))
        .count();
    let ambiguous_names = table.functions().filter(|f| f.ambiguous_addr).count();
    eprintln!("clone-only names emitted: {clone_only}; ambiguous names: {ambiguous_names}");
    assert!(clone_only > 0 && ambiguous_names > 0);
    // Lookup by address finds each kept symbol.
    let f = table.find("vfs_read").expect("vfs_read").1;
    let addr = f.sym(0).addr;
    assert!(table.at_addr(addr).any(|(g, _)| g.name() == f.name()));
}

#[test]
fn vmlinux_percpu_objects_match_the_reference_datasec() {
    let Some((path, data, facts)) = vmlinux_and_facts("vmlinux-cloud.kernel-flags.btf") else {
        return;
    };
    let syms = ElfSymbols::parse(&path, &data).expect("vmlinux symbols");
    let percpu = syms.percpu_section().expect(".data..percpu");
    let objects = syms.objects_in(percpu.index);
    let entries = &facts.datasecs[PERCPU_SECTION];
    eprintln!(
        "vmlinux: {} objects in {PERCPU_SECTION}, reference DATASEC has {} VARs",
        objects.len(),
        entries.len()
    );
    assert_eq!(
        facts.datasecs.len(),
        1,
        "kernel-flags: only the per-CPU DATASEC"
    );
    for (name, off, size) in entries {
        let o = objects
            .clone()
            .find(|o| o.name == name)
            .unwrap_or_else(|| panic!("VAR {name} has no per-CPU symbol"));
        assert_eq!(
            (o.value, o.size),
            (u64::from(*off), u64::from(*size)),
            "{name}"
        );
        let sec = syms.section_for_addr(u64::from(*off)).expect("section");
        assert_eq!(&*sec.name, PERCPU_SECTION, "{name} at {off}");
        assert!(syms.has_object_in(name, percpu.index));
    }
    // The only per-CPU object without a VAR is a linker-script symbol, which has no
    // DWARF variable.
    let extra: Vec<&str> = objects
        .map(|o| o.name)
        .filter(|n| !entries.iter().any(|e| e.0 == *n))
        .collect();
    assert_eq!(extra, ["const_pcpu_hot"]);
    assert!(!syms.has_object_in("const_pcpu_hot_no_such", percpu.index));
}

#[test]
fn vmlinux_global_var_sections_are_found_by_address() {
    let Some((path, data, facts)) = vmlinux_and_facts("vmlinux-cloud.global_var.btf") else {
        return;
    };
    let syms = ElfSymbols::parse(&path, &data).expect("vmlinux symbols");
    // Every DATASEC of global_var is a section pahole found by address, and its
    // VARs' offsets (address - section address) stay within it.
    for (name, entries) in &facts.datasecs {
        let sec = syms.section_by_name(name).expect("section exists");
        for (var, off, size) in entries {
            let addr = sec.addr + u64::from(*off);
            let found = syms.section_for_addr(addr).expect("section by address");
            assert_eq!(found.index, sec.index, "{var} in {name}");
            assert!(
                u64::from(*off) + u64::from(*size) <= sec.size,
                "{var} fits in {name}"
            );
        }
    }
    eprintln!("global_var: {} DATASECs checked", facts.datasecs.len());
}

#[test]
fn vmlinux_kfuncs_are_the_reference_bpf_kfunc_tags() {
    let Some((path, data, facts)) = vmlinux_and_facts("vmlinux-cloud.kernel-flags.btf") else {
        return;
    };
    let kfuncs = Kfuncs::parse(&path, &data).expect("kfuncs");
    check_kfuncs("vmlinux", &kfuncs, &facts);
    // no-flags has no decl tags at all.
    if let Some(nf) = ref_path("vmlinux-cloud.no-flags.btf") {
        let nf = ref_facts(&btf::read::read_file(&nf, None).unwrap());
        assert!(nf.func_tags.is_empty());
    }
}

/// The kfuncs that pahole emitted a FUNC for are exactly the FUNCs tagged
/// `bpf_kfunc`; those with KF_FASTCALL exactly the ones tagged `bpf_fastcall`.
fn check_kfuncs(what: &str, kfuncs: &Kfuncs, facts: &RefFacts) {
    let with_func: BTreeSet<String> = kfuncs
        .iter()
        .filter(|(n, _)| facts.funcs.contains_key(*n))
        .map(|(n, _)| n.to_string())
        .collect();
    let fastcall: BTreeSet<String> = kfuncs
        .iter()
        .filter(|(n, f)| f & KF_FASTCALL != 0 && facts.funcs.contains_key(*n))
        .map(|(n, _)| n.to_string())
        .collect();
    let empty = BTreeSet::new();
    let tagged = facts.func_tags.get("bpf_kfunc").unwrap_or(&empty);
    let fast_tagged = facts.func_tags.get("bpf_fastcall").unwrap_or(&empty);
    eprintln!(
        "{what}: {} kfuncs in sets, {} with a FUNC, {} bpf_kfunc tags; {} KF_FASTCALL, {} bpf_fastcall tags",
        kfuncs.len(),
        with_func.len(),
        tagged.len(),
        fastcall.len(),
        fast_tagged.len()
    );
    let arena = kfuncs
        .iter()
        .filter(|(_, f)| f & (KF_ARENA_RET | KF_ARENA_ARG1 | KF_ARENA_ARG2) != 0)
        .count();
    eprintln!("{what}: {arena} kfuncs with KF_ARENA_* flags (used by `attributes`)");
    assert_eq!(&with_func, tagged, "{what}: bpf_kfunc");
    assert_eq!(&fastcall, fast_tagged, "{what}: bpf_fastcall");
    let other: Vec<&String> = facts
        .func_tags
        .keys()
        .filter(|k| *k != "bpf_kfunc" && *k != "bpf_fastcall")
        .collect();
    assert!(
        other.is_empty(),
        "{what}: unexpected function tags {other:?}"
    );
}

#[test]
fn module_kfuncs_functions_and_percpu() {
    let Some(corpus) = corpus() else {
        return;
    };
    let base = vmlinux_btf(&corpus);
    for m in ["nf_tables", "nf_conntrack", "vsock_loopback"] {
        let Some(reference) = ref_path(&format!("{m}.kernel-flags.btf")) else {
            continue;
        };
        let path = corpus.join(format!("{m}.ko"));
        let data = map(&path);
        let syms = ElfSymbols::parse(&path, &data).expect("module symbols");
        assert!(syms.is_rel());
        let refb = btf::read::read_file(&reference, Some(base.clone())).expect("reference");
        let facts = ref_facts(&refb);
        let missing: Vec<&String> = facts
            .funcs
            .keys()
            .filter(|n| syms.functions.find(n).is_none())
            .collect();
        assert!(
            missing.is_empty(),
            "{m}: FUNCs not in the table: {missing:?}"
        );
        let kfuncs = Kfuncs::parse(&path, &data).expect("kfuncs");
        check_kfuncs(m, &kfuncs, &facts);
        // Per-CPU variables: offsets are symbol values, found in the laid-out
        // section by address.
        if let Some(entries) = facts.datasecs.get(PERCPU_SECTION) {
            let percpu = syms.percpu_section().expect("module .data..percpu");
            for (name, off, size) in entries {
                let o = syms
                    .objects_in(percpu.index)
                    .find(|o| o.name == name)
                    .expect("per-CPU symbol");
                assert_eq!((o.value, o.size), (u64::from(*off), u64::from(*size)));
                let sec = syms
                    .section_for_addr(percpu.addr + u64::from(*off))
                    .expect("found by address");
                assert_eq!(sec.index, percpu.index, "{m}: {name}");
            }
        }
        eprintln!(
            "{m}: {} function names, {} FUNCs in the reference, {} kfuncs",
            syms.functions.len(),
            facts.funcs.len(),
            kfuncs.len()
        );
    }
}

#[test]
fn module_section_layout_is_libdwfls() {
    let Some(corpus) = corpus() else {
        return;
    };
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/dwfl_layout.py");
    for m in ["nf_tables", "nf_conntrack", "vsock_loopback"] {
        let path = corpus.join(format!("{m}.ko"));
        let out = match Command::new("python3").arg(&tool).arg(&path).output() {
            Ok(o) if o.status.success() => o,
            _ => {
                skip("python3 with libdw, for the layout oracle");
                return;
            }
        };
        let data = map(&path);
        let syms = ElfSymbols::parse(&path, &data).expect("module symbols");
        let text = String::from_utf8(out.stdout).unwrap();
        let mut n = 0;
        for line in text.lines() {
            let mut it = line.split_whitespace();
            let i: usize = it.next().unwrap().parse().unwrap();
            let a = u64::from_str_radix(it.next().unwrap().trim_start_matches("0x"), 16).unwrap();
            assert_eq!(
                syms.sections[i].addr, a,
                "{m}: section {i} {}",
                syms.sections[i].name
            );
            n += 1;
        }
        assert_eq!(n, syms.sections.len());
    }
}

/// An opened input's tables come from its one parse: the same as reading the file on
/// its own, and for a module the very symbols that opening it read.
#[test]
fn opened_inputs_share_their_parse() {
    let Some(corpus) = corpus() else {
        return;
    };
    for name in ["vmlinux", "nf_conntrack.ko"] {
        let path = corpus.join(name);
        let input = dwarf2btf::elf::ElfInput::open(&path).expect("opens");
        let opened = input.parsed_symbols();
        assert_eq!(opened.is_some(), name.ends_with(".ko"), "{name}");
        let (syms, kfuncs) = input.symbol_tables(true).expect("tables");
        if let Some(opened) = opened {
            assert!(Arc::ptr_eq(&opened, &syms), "{name}: symbols read twice");
        }
        let data = map(&path);
        let alone = ElfSymbols::parse(&path, &data).expect("symbols");
        assert_eq!(
            syms.functions.functions().collect::<Vec<_>>(),
            alone.functions.functions().collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(syms.sections, alone.sections, "{name}");
        assert_eq!(
            kfuncs,
            Kfuncs::parse(&path, &data).expect("kfuncs"),
            "{name}"
        );
        assert!(
            !kfuncs.is_empty(),
            "{name}: the corpus files have kfunc sets"
        );
    }
}

/// The tables read in two halves by two threads at once, in either order, are the
/// tables read by one.
#[test]
fn symbol_halves_read_on_two_threads_are_the_whole_tables() {
    let Some(corpus) = corpus() else {
        return;
    };
    for name in ["vmlinux", "nf_conntrack.ko"] {
        let path = corpus.join(name);
        let data = map(&path);
        let alone = ElfSymbols::parse(&path, &data).expect("symbols");
        let kfuncs = Kfuncs::parse(&path, &data).expect("kfuncs");
        for rest_first in [false, true] {
            let input = dwarf2btf::elf::ElfInput::open(&path).expect("opens");
            let halves = dwarf2btf::elf::SymbolHalves::new(&input, true);
            if rest_first {
                halves.read_rest();
            }
            let (syms, k) = std::thread::scope(|s| {
                let other = s.spawn(|| halves.read_either());
                halves.read_either();
                other.join().expect("no panic");
                halves.join().expect("tables")
            });
            let what = format!("{name}, rest first: {rest_first}");
            assert_eq!(
                syms.functions.functions().collect::<Vec<_>>(),
                alone.functions.functions().collect::<Vec<_>>(),
                "{what}"
            );
            assert_eq!(syms.sections, alone.sections, "{what}");
            for s in &alone.sections {
                assert!(
                    syms.objects_in(s.index).eq(alone.objects_in(s.index)),
                    "{what}"
                );
            }
            assert_eq!(k, kfuncs, "{what}");
        }
    }
}
