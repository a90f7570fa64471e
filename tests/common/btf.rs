//! The BTF tests' cases: which base each reference file needs, the corpus files, a
//! seedable generator.

use super::{corpus, reference, skip, vmlinux};
use dwarf2btf::btf::{read, Btf};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// The `.BTF` of the corpus vmlinux, read once per test binary.
pub fn vmlinux_btf() -> Option<Arc<Btf>> {
    static BTF: OnceLock<Option<Arc<Btf>>> = OnceLock::new();
    BTF.get_or_init(|| {
        vmlinux().map(|v| Arc::new(read::read_file_checked(&v, None).expect("vmlinux .BTF")))
    })
    .clone()
}

/// One BTF file to test, with the base it needs (if split).
#[derive(Debug, Clone)]
pub struct Case {
    /// The BTF file (raw or ELF).
    pub file: PathBuf,
    /// Its base (raw or ELF), for split BTF.
    pub base: Option<PathBuf>,
}

/// Every reference file with its base: the matching `.distilled.BTF.base` for a
/// `.distilled.BTF`, the corpus vmlinux for a module's `.kernel-flags.btf` (skipped
/// with a message when the corpus is absent). Sorted by name.
pub fn reference_cases() -> Vec<Case> {
    let Some(dir) = reference() else {
        return Vec::new();
    };
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("read reference dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    let mut cases = Vec::new();
    for n in names {
        let file = dir.join(&n);
        if n.ends_with(".distilled.BTF") {
            cases.push(Case {
                base: Some(dir.join(format!("{n}.base"))),
                file,
            });
        } else if n.ends_with(".BTF.base") || n.starts_with("vmlinux") && n.ends_with(".btf") {
            cases.push(Case { file, base: None });
        } else if n.ends_with(".kernel-flags.btf") {
            match vmlinux() {
                Some(v) => cases.push(Case {
                    file,
                    base: Some(v),
                }),
                None => skip(&format!("{n}: the corpus vmlinux")),
            }
        }
    }
    cases
}

/// The corpus files themselves (vmlinux, and the modules over it), if unpacked.
pub fn corpus_cases() -> Vec<Case> {
    let Some(dir) = corpus() else {
        return Vec::new();
    };
    let v = dir.join("vmlinux");
    let mut cases = vec![Case {
        file: v.clone(),
        base: None,
    }];
    for m in ["nf_tables", "nf_conntrack", "vsock_loopback"] {
        let f = dir.join(format!("{m}.ko"));
        if f.is_file() {
            cases.push(Case {
                file: f,
                base: Some(v.clone()),
            });
        }
    }
    cases
}

/// A small xorshift64* generator: deterministic, seedable, no dependency.
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// 32 random bits.
    pub fn word(&mut self) -> u32 {
        self.next().to_le_bytes()[..4]
            .iter()
            .rev()
            .fold(0, |w, &b| w << 8 | u32::from(b))
    }

    /// 8 random bits.
    pub fn byte(&mut self) -> u8 {
        self.next().to_le_bytes()[0]
    }

    /// A number in `0..n` (n > 0) as a u32.
    pub fn below_u32(&mut self, n: u32) -> u32 {
        u32::try_from(self.next() % u64::from(n)).expect("below n, a u32")
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        let n = u64::try_from(n).expect("usize fits u64");
        usize::try_from(self.next() % n).expect("below n, a usize")
    }
}
