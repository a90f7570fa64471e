//! A small 6.12 kernel built with clang ThinLTO (`c2-thinlto`: 2,416 units and 1.5
//! million `DW_FORM_ref_addr`, which pahole reads as one merged unit): its vmlinux
//! and its two modules, encoded with the kernel's flags at -j1, -j2 and -j8 (as
//! many workers), must be byte-identical to the reference pahole's files; and the
//! command's peak RSS at -j2 must stay a tenth of pahole's 1.55 GB.

mod common;

use std::path::{Path, PathBuf};

/// The kernel and the reference folder, or None after `skip`.
fn case() -> Option<(PathBuf, PathBuf)> {
    let dir = common::clang_case("c2-thinlto")?;
    let refs = common::reference()?.join("clang/c2-thinlto");
    Some((dir, refs))
}

fn encode(input: &Path, base: Option<&Path>, jobs: usize) -> Vec<u8> {
    let flags = common::KFLAGS.trim_start_matches("--btf_features=");
    common::encode_in_process(input, base, flags, jobs)
}

fn assert_same(got: &[u8], reference: &Path, what: &str) {
    let want = std::fs::read(reference).unwrap();
    assert!(
        got == want,
        "{what}: {} bytes, differs from {} ({} bytes)",
        got.len(),
        reference.display(),
        want.len()
    );
}

#[test]
fn thinlto_vmlinux_and_modules_equal_pahole() {
    let Some((dir, refs)) = case() else { return };
    let vmlinux = dir.join("vmlinux");
    for jobs in [1, 2, 8] {
        let got = encode(&vmlinux, None, jobs);
        assert_same(
            &got,
            &refs.join("vmlinux.btf"),
            &format!("vmlinux -j{jobs}"),
        );
        for m in ["tcp_bic", "tcp_bbr"] {
            let got = encode(&dir.join(format!("{m}.ko")), Some(&vmlinux), jobs);
            assert_same(
                &got,
                &refs.join(format!("{m}.btf")),
                &format!("{m}.ko -j{jobs}"),
            );
        }
    }
}

#[test]
fn thinlto_vmlinux_in_a_tenth_of_paholes_memory() {
    let Some((dir, _)) = case() else { return };
    if !Path::new(common::GNU_TIME).is_file() {
        common::skip("GNU time (/usr/bin/time)");
        return;
    }
    let out = common::tmp("thinlto.btf");
    let args = common::kernel_args(2, &dir.join("vmlinux"), &out);
    let v = common::gnu_time(Path::new(env!("CARGO_BIN_EXE_dwarf2btf")), &args, "%M");
    let _ = std::fs::remove_file(&out);
    let mb = v[0] / 1024.0;
    println!("c2-thinlto vmlinux -j2: peak RSS {mb:.1} MB");
    // pahole 1.31: 1.55 GB.
    assert!(
        mb <= 155.0,
        "peak RSS {mb:.1} MB, over a tenth of pahole's 1.55 GB"
    );
}
