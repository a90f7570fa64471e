//! Mutation test: at least 100,000 deterministically mutated reference files go
//! through the reader, the validator, the writer and the dump without a panic; any
//! mutant the validator accepts must write back to the same bytes.

mod common;

use common::*;
use dwarf2btf::btf::{dump, read, validate, write, Btf, Endian};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// Total mutants over all inputs.
/// Mutants of each small input (a few KiB: most of the test's mutants).
const SMALL_MUTANTS: usize = 50_000;
/// Mutants of each large input (tens of KiB, each far slower to check).
const LARGE_MUTANTS: usize = 6_000;

/// One input: the bytes to mutate and the base they need.
struct Input {
    name: String,
    data: Vec<u8>,
    base: Option<Arc<Btf>>,
}

fn inputs() -> Vec<Input> {
    let Some(dir) = reference() else {
        return Vec::new();
    };
    let load = |n: &str| std::fs::read(dir.join(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
    let mut v = Vec::new();
    for m in ["vsock_loopback", "nf_conntrack", "nf_tables"] {
        let base_name = format!("{m}.distilled.BTF.base");
        let base_data = load(&base_name);
        let base = Arc::new(validate::parse_checked(&base_data, None).unwrap());
        v.push(Input {
            name: base_name,
            data: base_data,
            base: None,
        });
        // The module's split BTF is mutated over its distilled base.
        v.push(Input {
            name: format!("{m}.distilled.BTF"),
            data: load(&format!("{m}.distilled.BTF")),
            base: Some(base),
        });
    }
    // A big-endian copy of the smallest base, to walk the byte-swapping paths.
    let mut be = validate::parse_checked(&load("vsock_loopback.distilled.BTF.base"), None).unwrap();
    be.set_endian(Endian::Big);
    be.set_header_extra(Vec::new());
    v.push(Input {
        name: "vsock_loopback.distilled.BTF.base (big endian)".into(),
        data: write::to_bytes(&be),
        base: None,
    });
    if let Some(vmlinux) = vmlinux_btf() {
        v.push(Input {
            name: "vsock_loopback.kernel-flags.btf".into(),
            data: load("vsock_loopback.kernel-flags.btf"),
            base: Some(vmlinux),
        });
    } else {
        eprintln!("corpus vmlinux absent: not mutating vsock_loopback.kernel-flags.btf");
    }
    v
}

/// Words worth writing into a type record or header field.
fn interesting(rng: &mut Rng, data: &[u8]) -> u32 {
    match rng.below(10) {
        0 => 0,
        1 => 1,
        2 => u32::MAX,
        3 => 0x7fff_ffff,
        4 => u32::try_from(data.len()).unwrap(),
        5 => rng.below_u32(64),
        6 => rng.below_u32(32) << 24 | rng.below_u32(4), // an info word
        7 => 1 << 31 | rng.below_u32(20) << 24 | 0xffff,
        8 => rng.below_u32(200_000), // a type id near vmlinux's range
        _ => rng.word(),
    }
}

/// Applies one random mutation; returns a short description for failure reports.
fn mutate(rng: &mut Rng, d: &mut Vec<u8>) -> String {
    if d.is_empty() {
        d.push(rng.byte());
        return "grow".into();
    }
    match rng.below(6) {
        0 => {
            let i = rng.below(d.len());
            let bit = rng.below(8);
            d[i] ^= 1 << bit;
            format!("flip bit {bit} of byte {i}")
        }
        1 => {
            let i = rng.below(d.len());
            d[i] = rng.byte();
            format!("byte {i} = {:#x}", d[i])
        }
        2 => {
            let n = rng.below(d.len());
            d.truncate(n);
            format!("truncate to {n}")
        }
        3 => {
            // A header field: hdr_len, type_off, type_len, str_off or str_len.
            let f = 4 + 4 * rng.below(5);
            let v = interesting(rng, d);
            if d.len() >= f + 4 {
                d[f..f + 4].copy_from_slice(&v.to_le_bytes());
            }
            format!("header word at {f} = {v:#x}")
        }
        _ => {
            // An aligned word, mostly in the type section (after a 32-byte header).
            let words = d.len() / 4;
            let w = rng.below(words.max(1));
            let v = interesting(rng, d);
            if d.len() >= 4 * w + 4 {
                d[4 * w..4 * w + 4].copy_from_slice(&v.to_le_bytes());
            }
            format!("word {w} = {v:#x}")
        }
    }
}

/// Runs one mutant through everything; panics are caught by the caller.
fn exercise(data: &[u8], base: &Option<Arc<Btf>>) -> (bool, bool) {
    let Ok(btf) = read::parse(data, base.clone()) else {
        return (false, false);
    };
    let mut problems = validate::check_layout(data);
    problems.extend(validate::validate(&btf));
    // The dump must not panic on BTF the reader accepts, valid or not.
    let _ = dump::dump_to_vec(&btf);
    if problems.is_empty() {
        assert!(
            write::to_bytes(&btf) == data,
            "valid mutant does not round-trip"
        );
    }
    (true, problems.is_empty())
}

#[test]
fn mutated_references_never_panic() {
    let inputs = inputs();
    if inputs.is_empty() {
        skip("pahole's reference outputs (set DWARF2BTF_REFERENCE)");
        return;
    }
    let start = Instant::now();
    let mut rng = Rng::new(0x5eed_b7f0_2026);
    let (mut parsed, mut valid) = (0usize, 0usize);
    let mut total = 0;
    for input in &inputs {
        let t = Instant::now();
        let count = if input.data.len() > 16 * 1024 {
            LARGE_MUTANTS
        } else {
            SMALL_MUTANTS
        };
        total += count;
        for n in 0..count {
            let mut d = input.data.clone();
            let count = 1 + rng.below(3);
            let what: Vec<String> = (0..count).map(|_| mutate(&mut rng, &mut d)).collect();
            let r = catch_unwind(AssertUnwindSafe(|| exercise(&d, &input.base)));
            match r {
                Ok((p, v)) => {
                    parsed += p as usize;
                    valid += v as usize;
                }
                Err(_) => panic!(
                    "mutant #{n} of {} panicked: {}",
                    input.name,
                    what.join(", ")
                ),
            }
        }
        eprintln!("{count} mutants of {}: {:.1?}", input.name, t.elapsed());
    }
    eprintln!(
        "{total} mutants of {} files in {:.1?}: {parsed} parsed, {valid} valid",
        inputs.len(),
        start.elapsed()
    );
    assert!(total >= 100_000);
    // The mutations must reach past the reader, or the validator is not exercised.
    assert!(
        parsed > total / 10,
        "only {parsed} of {total} mutants parsed"
    );
}
