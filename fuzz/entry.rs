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
    assert_eq!(again.strings(), btf.strings(), "strings changed by write + read");
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
            let bytes = res.unwrap_or_else(|e| panic!("dedup ({compat:?}) of valid BTF failed: {e}"));
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
