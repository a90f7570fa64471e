//! The fuzz entry points, shared by the cargo-fuzz targets (`fuzz/fuzz_targets/`) and
//! the deterministic replay in `tests/fuzz_replay.rs`, so a saved case is replayed
//! through exactly the code that found it.
//!
//! Each entry point takes arbitrary bytes and must return without panicking; the
//! asserts inside are properties of the code under test (a valid BTF writes back to
//! the same bytes, dedup output validates), so a failing assert is a bug found.
#![allow(dead_code)] // each fuzz target uses one entry point

use dwarf2btf::btf::{dump, read, validate, write, Btf};
use std::sync::{Arc, OnceLock};

/// The fixed base that split inputs are parsed over: the distilled base pahole wrote
/// for vsock_loopback.ko (542 bytes, 25 types).
pub const BASE_BTF: &[u8] = include_bytes!("data/base.btf");

/// The fixed base, parsed and validated once.
pub fn base() -> Arc<Btf> {
    static BASE: OnceLock<Arc<Btf>> = OnceLock::new();
    BASE.get_or_init(|| {
        Arc::new(validate::parse_checked(BASE_BTF, None).expect("fuzz/data/base.btf is valid"))
    })
    .clone()
}

/// Reader, validator, dump and writer on raw bytes (or an ELF's `.BTF`), once on
/// their own and once as split BTF over [`base`].
pub fn btf_read_validate(data: &[u8]) {
    let Ok((bytes, source)) = read::btf_bytes(data, ".BTF") else {
        return;
    };
    let raw = matches!(source, read::Source::Raw);
    check_btf(&bytes, None, raw);
    check_btf(&bytes, Some(base()), raw);
}

/// One parse + validate + dump + write round trip.
fn check_btf(bytes: &[u8], base: Option<Arc<Btf>>, raw: bool) {
    let Ok(btf) = read::parse(bytes, base.clone()) else {
        return;
    };
    // The dump must cope with BTF the validator would refuse (`dump --no-validate`).
    let _ = dump::dump_to_vec(&btf);
    let mut problems = validate::check_layout(bytes);
    problems.extend(validate::validate(&btf));
    let out = write::to_bytes(&btf);
    // Whatever the reader accepted, the writer's output must read back to the same
    // types and strings.
    let again = read::parse(&out, base.clone())
        .unwrap_or_else(|e| panic!("written BTF does not read back: {e}"));
    assert_eq!(again.types(), btf.types(), "types changed by write + read");
    assert_eq!(
        again.strings(),
        btf.strings(),
        "strings changed by write + read"
    );
    if problems.is_empty() {
        // Valid input: the writer gives back the same bytes, and parse_checked agrees.
        if raw {
            assert_eq!(out, bytes, "valid BTF did not write back to the same bytes");
        }
        assert!(
            validate::parse_checked(bytes, base).is_ok(),
            "parse_checked refuses what check_layout + validate accept"
        );
    }
}

/// Parse (alone and over [`base`]), validate, dedup with both libbpf behaviours.
/// Dedup must never panic, even on BTF the validator refuses (the `dedup` command
/// does not validate its input); on valid input it must succeed, its output must
/// itself be valid and hold no more types than the input.
pub fn dedup(data: &[u8]) {
    use dwarf2btf::dedup::{dedup_bytes, Compat};
    for base in [None, Some(base())] {
        let Ok(btf) = read::parse(data, base.clone()) else {
            continue;
        };
        let mut problems = validate::check_layout(data);
        problems.extend(validate::validate(&btf));
        let valid = problems.is_empty();
        for compat in [Compat::Upstream, Compat::Libbpf1_1] {
            let res = dedup_bytes(&btf, compat);
            if !valid {
                continue;
            }
            let bytes =
                res.unwrap_or_else(|e| panic!("dedup ({compat:?}) of valid BTF failed: {e}"));
            let out = validate::parse_checked(&bytes, base.clone())
                .unwrap_or_else(|e| panic!("dedup ({compat:?}) output is not valid: {e}"));
            assert!(
                out.types().len() <= btf.types().len(),
                "dedup ({compat:?}) added types: {} -> {}",
                btf.types().len(),
                out.types().len()
            );
        }
    }
}

/// A file in a RAM-backed folder where the path-based ELF entry points read the
/// input; one per process and thread (the replay test runs threads in parallel).
fn scratch_file(tag: &str, data: &[u8]) -> std::path::PathBuf {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let p = dir.join(format!(
        "dwarf2btf-fuzz-{tag}-{}-{:?}.o",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&p, data).expect("write the fuzz input");
    p
}

/// The ELF reader: open (section lookup, decompression, `.rela.debug_*` relocation)
/// and read every debug section; also the BTF reader's `.BTF` lookup.
pub fn elf_reader(data: &[u8]) {
    let _ = read::btf_bytes(data, ".BTF");
    let path = scratch_file("elf", data);
    if let Ok(input) = dwarf2btf::elf::ElfInput::open(&path) {
        let mut sum = 0usize;
        for &name in dwarf2btf::elf::DEBUG_SECTIONS {
            let s = input.section(name);
            sum = sum
                .wrapping_add(s.len())
                .wrapping_add(s.last().copied().unwrap_or(0) as usize);
        }
        assert!(
            !input.section(".debug_info").is_empty(),
            "opened without .debug_info"
        );
        std::hint::black_box(sum);
    }
    let _ = std::fs::remove_file(&path);
}

/// The whole encoder on bytes as an ELF file: DWARF units → arena → BTF → dedup, with
/// the kernel's feature set. Whatever it accepts must come out as valid BTF.
pub fn dwarf_loader(data: &[u8]) {
    use dwarf2btf::pipeline;
    let path = scratch_file("dwarf", data);
    let opts = pipeline::Options {
        input: path.clone(),
        btf_base: None,
        detached: None,
        features: dwarf2btf::encode::Features::from_list(
            "encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs",
        ),
        lang_exclude: Vec::new(),
        jobs: 1,
    };
    let encoded = pipeline::encode_file(&opts);
    let _ = std::fs::remove_file(&path);
    let Ok(btf) = encoded else { return };
    let bytes = match pipeline::dedup_output(btf) {
        Ok(b) => b,
        Err(e) => panic!("dedup of the encoder's output failed: {e}"),
    };
    // The dedup output must at least read back. Full validity is not asserted yet:
    // DWARF whose type references loop or dangle still encodes to BTF the validator
    // refuses (tests/hostile_dwarf.rs `patched_debug_info_known_invalid`); set
    // DWARF2BTF_FUZZ_STRICT=1 to check it.
    let out = read::parse(&bytes, None)
        .unwrap_or_else(|e| panic!("the encoder's output does not read back: {e}"));
    if std::env::var_os("DWARF2BTF_FUZZ_STRICT").is_some() {
        let mut problems = validate::check_layout(&bytes);
        problems.extend(validate::validate(&out));
        assert!(
            problems.is_empty(),
            "the encoder's output is not valid BTF: {problems:?}"
        );
    }
}
