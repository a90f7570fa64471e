//! The one type shared across units, the array index type, placed as pahole places
//! it whatever the workers and the dedup mode: three units compiled by gcc and linked
//! into one object (tests/fixtures/engine/): the first has arrays and no `int`, so an
//! `int` is added right after its types, and every later unit's arrays use that one
//! (not their own `int`). The bytes were checked equal to the reference pahole's.

mod common;
use common::skip;

use dwarf2btf::btf::{Btf, TypeKind};
use dwarf2btf::encode::Features;
use dwarf2btf::pipeline::{encode_bytes, encode_file, DedupMode, Options, Tuning};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The three units as one relocatable object; None (after `skip`) without gcc/ld.
fn object() -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/engine");
    let dir = std::env::temp_dir().join(format!("dwarf2btf-engine-units-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut objs = Vec::new();
    for name in ["no_int", "int", "later"] {
        let out = dir.join(format!("{name}.o"));
        let status = Command::new("gcc")
            .args(["-g", "-O2", "-c", "-o"])
            .arg(&out)
            .arg(src.join(format!("{name}.c")))
            .status();
        match status {
            Ok(s) if s.success() => objs.push(out),
            Ok(s) => panic!("gcc failed on {name}.c: {s}"),
            Err(_) => {
                skip("gcc is not installed");
                return None;
            }
        }
    }
    let linked = dir.join("units.o");
    match Command::new("ld")
        .arg("-r")
        .arg("-o")
        .arg(&linked)
        .args(&objs)
        .status()
    {
        Ok(s) if s.success() => Some(linked),
        Ok(s) => panic!("ld -r failed: {s}"),
        Err(_) => {
            skip("ld is not installed");
            None
        }
    }
}

fn options(input: &Path) -> Options {
    Options {
        input: input.to_path_buf(),
        btf_base: None,
        detached: None,
        features: Features::from_list(
            "encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func",
        ),
        lang_exclude: vec![],
        jobs: 1,
    }
}

/// The ids of the INTs named `int`, and the index type of every array.
fn ints_and_indices(btf: &Btf) -> (Vec<u32>, Vec<u32>) {
    let first = btf.first_id().0;
    let (mut ints, mut indices) = (Vec::new(), Vec::new());
    for (k, t) in btf.types().iter().enumerate() {
        let id = first + u32::try_from(k).unwrap();
        match &t.kind {
            TypeKind::Int { .. } if btf.str_bytes(t.name) == Some(b"int") => ints.push(id),
            TypeKind::Array { index_type, .. } => indices.push(index_type.0),
            _ => {}
        }
    }
    (ints, indices)
}

#[test]
fn the_index_type_is_chosen_in_unit_order() {
    let Some(obj) = object() else { return };
    let opts = options(&obj);

    // Before dedup: the added `int` is the first, and every array uses it.
    let whole = encode_file(&opts).unwrap();
    let (ints, indices) = ints_and_indices(&whole);
    assert!(
        ints.len() >= 3,
        "an added int and two of the units' own: {ints:?}"
    );
    assert_eq!(indices.len(), 4, "four arrays: {indices:?}");
    assert!(
        indices.iter().all(|&i| i == ints[0]),
        "{ints:?} {indices:?}"
    );
    // It comes right after the first unit's types: its struct, arrays and bases,
    // none of them an `int`.
    let before: Vec<_> = whole.types()[..(ints[0] - 1) as usize]
        .iter()
        .map(|t| t.kind.kind())
        .collect();
    assert!(before.contains(&dwarf2btf::btf::Kind::Array), "{before:?}");

    // After dedup: the same bytes whatever the workers, window and mode.
    let one = encode_bytes(&opts, &Tuning::default()).unwrap();
    let out = dwarf2btf::btf::read::parse(&one, None).unwrap();
    let (ints, indices) = ints_and_indices(&out);
    assert_eq!(ints.len(), 1, "{ints:?}");
    assert!(
        indices.iter().all(|&i| i == ints[0]),
        "{ints:?} {indices:?}"
    );
    for (workers, window) in [(1, 1), (2, 1), (2, 3), (4, 8)] {
        for dedup in [DedupMode::Incremental, DedupMode::OneShot] {
            let tuning = Tuning {
                workers: Some(workers),
                window: Some(window),
                dedup,
                timings: None,
            };
            let got = encode_bytes(&opts, &tuning).unwrap();
            assert!(got == one, "-j{workers} window {window} {dedup:?} differs");
        }
    }
}
