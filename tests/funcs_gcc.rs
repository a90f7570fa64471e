//! Functions and variables of small programs built here with gcc and `ld -r`:
//! prototypes that differ between units (`consistent_func`), an optimized clone
//! with a constant-propagated parameter, a plain function with an unused
//! parameter, per-CPU-like and global variables. Skips when gcc or ld is missing.

mod common;
use common::*;

use dwarf2btf::btf::{Btf, TypeKind};
use dwarf2btf::encode::Features;
use dwarf2btf::pipeline::{encode_file, Options};

const A_C: &str = r#"
extern void sink(long);
/* Same static name, different prototype in b.c. */
static __attribute__((noinline)) int clash(int x) { sink(x); return x + 1; }
/* Called with a constant: gcc makes clone.constprop.0 and drops k. */
static __attribute__((noinline)) long scaled(long a, long k) { sink(a * k); return a * k + k; }
/* Unused parameter, plain symbol: kept. */
__attribute__((noinline)) int unused_arg(int a, int b) { sink(a); return a; }
int counter_a = 3;
static int hidden_a[4] = {1, 2, 3, 4};
int use_a(int x) { return clash(x) + scaled(x, 7) + unused_arg(x, 0) + hidden_a[x & 3]; }
"#;

const B_C: &str = r#"
extern void sink(long);
static __attribute__((noinline)) long clash(long x, long y) { sink(x + y); return x - y; }
long counter_b;
long use_b(long x) { counter_b += x; return clash(x, 2); }
"#;

/// Builds a.c and b.c into one relocatable object (like a module) and encodes it.
fn encode(features: &str) -> Option<Btf> {
    // Tests run in parallel and may build with the same features: one folder
    // per call.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = scratch(&format!("funcs_gcc_{n}_{}", features.replace(',', "_")));
    std::fs::write(dir.join("a.c"), A_C).unwrap();
    std::fs::write(dir.join("b.c"), B_C).unwrap();
    for f in ["a", "b"] {
        run_in(
            &dir,
            "gcc",
            &[
                "-O2",
                "-g",
                "-gdwarf-5",
                "-c",
                &format!("{f}.c"),
                "-o",
                &format!("{f}.o"),
            ],
        )?;
    }
    run_in(&dir, "ld", &["-r", "a.o", "b.o", "-o", "ab.o"])?;
    let opts = Options {
        input: dir.join("ab.o"),
        btf_base: None,
        detached: None,
        features: Features::from_list(features),
        lang_exclude: Vec::new(),
        jobs: 1,
    };
    Some(encode_file(&opts).unwrap())
}

/// The names of `btf`'s types that `pick` picks.
fn names(btf: &Btf, pick: fn(&TypeKind) -> bool) -> Vec<String> {
    btf.types()
        .iter()
        .filter(|t| pick(&t.kind))
        .map(|t| btf.str_at(t.name).into_owned())
        .collect()
}

fn funcs(btf: &Btf) -> Vec<String> {
    names(btf, |k| matches!(k, TypeKind::Func { .. }))
}

fn vars(btf: &Btf) -> Vec<String> {
    names(btf, |k| matches!(k, TypeKind::Var { .. }))
}

#[test]
fn inconsistent_prototypes_are_skipped_only_with_consistent_func() {
    let Some(with) = encode("default") else {
        return;
    };
    let Some(without) = encode("encode_force,var,decl_tag") else {
        return;
    };
    let (fw, fo) = (funcs(&with), funcs(&without));
    println!("with consistent_func: {fw:?}\nwithout: {fo:?}");
    assert!(!fw.contains(&"clash".to_string()), "{fw:?}");
    assert!(fo.contains(&"clash".to_string()), "{fo:?}");
    // FUNCs come in name order, and these are always there.
    // `scaled` exists only as a `.constprop` clone with an optimized-out
    // parameter; in a relocatable object pahole's DWARF addresses (libdwfl's
    // layout) never equal symbol values, so the clone rule does not fire and it is
    // kept, as pahole keeps such functions in modules.
    for f in ["scaled", "unused_arg", "use_a", "use_b"] {
        assert!(fw.contains(&f.to_string()), "{f} missing: {fw:?}");
    }
    let mut sorted = fw.clone();
    sorted.sort();
    assert_eq!(fw, sorted);
    // Every FUNC is static and follows its FUNC_PROTO's parameter names.
    let t = with
        .types()
        .iter()
        .find(|t| matches!(t.kind, TypeKind::Func { .. }) && with.str_at(t.name) == "unused_arg")
        .unwrap();
    let TypeKind::Func { proto, linkage } = t.kind else {
        unreachable!()
    };
    assert_eq!(linkage, 0);
    let TypeKind::FuncProto { params, .. } = &with.get(proto).unwrap().kind else {
        panic!("not a proto")
    };
    let names: Vec<_> = params
        .iter()
        .map(|p| with.str_at(p.name).into_owned())
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn global_variables_and_their_sections() {
    let Some(btf) = encode("default,global_var") else {
        return;
    };
    let v = vars(&btf);
    println!("{v:?}");
    for name in ["counter_a", "hidden_a", "counter_b"] {
        assert!(v.contains(&name.to_string()), "{name} missing: {v:?}");
    }
    let secs: Vec<String> = btf
        .types()
        .iter()
        .filter(|t| matches!(t.kind, TypeKind::Datasec { .. }))
        .map(|t| btf.str_at(t.name).into_owned())
        .collect();
    assert!(
        secs.contains(&".data".to_string()) && secs.contains(&".bss".to_string()),
        "{secs:?}"
    );
    // Without global_var (and no per-CPU section) there are none.
    let Some(plain) = encode("default") else {
        return;
    };
    assert!(vars(&plain).is_empty());
}
