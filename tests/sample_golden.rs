//! The README's first command, checked against pahole: the shipped sample object
//! encoded with `--btf_features=default,float` must give exactly the bytes that the
//! reference pahole (v1.31+, `pahole -J --btf_features=default,float
//! --btf_encode_detached=sample.btf sample.o`) wrote into `examples/sample/sample.btf`.
//! Needs no tool and no download, so it runs everywhere.

use std::path::Path;
use std::process::Command;

#[test]
fn sample_object_encodes_to_paholes_bytes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sample.btf");
    let st = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
        .args(["-J", "--btf_features=default,float"])
        .arg(format!("--btf_encode_detached={}", out.display()))
        .arg(dir.join("sample.o"))
        .status()
        .unwrap();
    assert!(st.success());
    let ours = std::fs::read(&out).unwrap();
    let pahole = std::fs::read(dir.join("sample.btf")).unwrap();
    assert!(
        ours == pahole,
        "sample.o: our BTF ({} bytes) differs from pahole's ({} bytes)",
        ours.len(),
        pahole.len()
    );
}
