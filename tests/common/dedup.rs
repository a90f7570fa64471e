//! The dedup tests' helpers: running libbpf's dedup through
//! tests/tools/libbpf_dedup.py, building "doubled" BTF.

use super::{root, skip};
use dwarf2btf::btf::{self, Btf};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// Whether libbpf's dedup can be run here.
pub fn have_libbpf() -> bool {
    let harness = root().join("tests/tools/libbpf_dedup.py");
    let ok = Command::new("python3")
        .arg("-c")
        .arg("import ctypes; ctypes.CDLL('libbpf.so.1')")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok || !harness.is_file() {
        skip("python3 with libbpf.so.1 (apt-get install python3 libbpf1)");
    }
    ok && harness.is_file()
}

/// libbpf's `btf__dedup` output for the file `input` (split over `base` if given).
pub fn libbpf_dedup(input: &Path, base: Option<&Path>, out: &Path) -> Vec<u8> {
    let harness = root().join("tests/tools/libbpf_dedup.py");
    let mut cmd = Command::new("python3");
    cmd.arg(harness).arg(input).arg(out);
    if let Some(b) = base {
        cmd.arg("--base").arg(b);
    }
    let res = cmd.output().expect("run libbpf_dedup.py");
    assert!(
        res.status.success(),
        "libbpf_dedup.py failed on {}: {}",
        input.display(),
        String::from_utf8_lossy(&res.stderr)
    );
    std::fs::read(out).expect("read libbpf output")
}

/// Writes `btf` to `path` in the raw format.
pub fn write(btf: &Btf, path: &Path) {
    std::fs::write(path, btf::write::to_bytes(btf)).expect("write BTF");
}

/// The `.BTF` of the corpus vmlinux, and a raw copy of it in `dir`.
pub fn vmlinux_base(corpus: &Path, dir: &Path) -> (Arc<Btf>, PathBuf) {
    let base = btf::read::read_file(&corpus.join("vmlinux"), None).expect("read vmlinux .BTF");
    let path = dir.join("vmlinux.base.btf");
    write(&base, &path);
    (Arc::new(base), path)
}

/// `btf` with all its own types appended a second time: the copies' references to
/// own types are renumbered to the copies, and their names point into a second copy
/// of the own string section (references into the base stay).
pub fn doubled(btf: &Btf) -> Btf {
    let first = btf.first_id().0;
    let n = u32::try_from(btf.types().len()).unwrap();
    let str_first = btf.base_str_len();
    let str_len = u32::try_from(btf.strings().len()).unwrap();
    let mut types = btf.types().to_vec();
    for t in btf.types() {
        let mut t = t.clone();
        t.kind.for_each_ref_mut(|id| {
            if id.0 >= first {
                id.0 += n;
            }
        });
        t.for_each_str_mut(|s| {
            if s.0 != 0 && s.0 >= str_first {
                s.0 += str_len;
            }
        });
        types.push(t);
    }
    let mut strings = btf.strings().to_vec();
    strings.extend_from_slice(btf.strings());
    let mut out = Btf::from_parts(btf.base().cloned(), types, strings, btf.endian());
    out.set_header_extra(btf.header_extra().to_vec());
    out
}

/// Index of the first differing byte, for failure messages.
pub fn first_diff(a: &[u8], b: &[u8]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!(
            "first difference at byte {i} (lengths {} and {})",
            a.len(),
            b.len()
        ),
        None => format!("lengths {} and {}", a.len(), b.len()),
    }
}
