//! The `dwarf2btf dedup` subcommand: whole and split, output equal to libbpf's,
//! errors naming the file.

mod common;

use common::*;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
}

/// `dwarf2btf dedup INPUT [--base-btf BASE] -o OUT`, asserting success.
fn dedup_cli(input: &std::path::Path, base: Option<&std::path::Path>, out: &std::path::Path) {
    let mut cmd = bin();
    cmd.arg("dedup").arg(input);
    if let Some(b) = base {
        cmd.arg("--base-btf").arg(b);
    }
    let st = cmd.arg("-o").arg(out).status().expect("run dwarf2btf");
    assert!(st.success(), "dedup of {} failed", input.display());
}

#[test]
fn dedup_whole_and_split_equal_libbpf() {
    let (Some(refs), Some(corpus), true) = (reference(), corpus(), have_libbpf()) else {
        return;
    };
    let dir = scratch("cli");
    let input = refs.join("vmlinux-cloud.no-flags.btf");
    let out = dir.join("out.btf");
    dedup_cli(&input, None, &out);
    let want = libbpf_dedup(&input, None, &dir.join("libbpf.btf"));
    assert!(
        std::fs::read(&out).unwrap() == want,
        "whole dedup differs from libbpf"
    );

    // Split, with the base given as the vmlinux ELF file itself (its .BTF section).
    let input = refs.join("vsock_loopback.kernel-flags.btf");
    let vmlinux = corpus.join("vmlinux");
    dedup_cli(&input, Some(&vmlinux), &out);
    let (_, base_path) = vmlinux_base(&corpus, &dir);
    let want = libbpf_dedup(&input, Some(&base_path), &dir.join("libbpf.btf"));
    assert!(
        std::fs::read(&out).unwrap() == want,
        "split dedup differs from libbpf"
    );
}

#[test]
fn dedup_errors_name_the_problem_and_leave_no_output() {
    let dir = scratch("cli-errors");
    let out = dir.join("out.btf");
    let res = bin()
        .args(["dedup", "x.btf"])
        .output()
        .expect("run dwarf2btf");
    assert!(!res.status.success());
    assert!(String::from_utf8_lossy(&res.stderr).contains("-o OUT"));

    let bad = dir.join("bad.btf");
    std::fs::write(&bad, b"\x9f\xeb\x01\x00garbage").unwrap();
    let res = bin()
        .arg("dedup")
        .arg(&bad)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("run dwarf2btf");
    assert!(!res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains("bad.btf"),
        "error does not name the file: {err}"
    );
    assert!(!out.exists(), "an output file was left behind");
}
