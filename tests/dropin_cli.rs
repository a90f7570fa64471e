//! pahole's command line: the name `pahole`, `--version` as the kernel's
//! `scripts/pahole-version.sh` reads it, and clear refusals of what is not BTF
//! encoding.

mod common;

use common::*;
use std::process::Command;

/// A `pahole` symlink to the binary, in its own folder.
fn pahole_link(dir: &TempDir) -> std::path::PathBuf {
    let link = dir.join("pahole");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_dwarf2btf"), &link).unwrap();
    link
}

#[test]
fn pahole_version_as_the_kernel_reads_it() {
    let dir = TempDir::new("dropin-cli");
    let link = pahole_link(&dir);
    // scripts/pahole-version.sh: `"$1" --version 2>/dev/null | sed -E 's/…/\1\2/'`.
    for exe in [
        link.as_path(),
        std::path::Path::new(env!("CARGO_BIN_EXE_dwarf2btf")),
    ] {
        let out = run_clean(
            Command::new("sh")
                .arg("-c")
                .arg(r#""$1" --version 2>/dev/null | sed -E 's/v([0-9]+)\.([0-9]+)/\1\2/'"#)
                .arg("sh")
                .arg(exe),
        );
        assert_eq!(out, "132\n", "{}", exe.display());
    }
    // Through PATH, as `PAHOLE=pahole` finds it.
    let path = format!(
        "{}:{}",
        dir.0.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = run_clean(Command::new("pahole").env("PATH", path).arg("--version"));
    assert_eq!(out, "v1.32\n");
}

#[test]
fn not_encoding_is_refused_clearly() {
    let dir = TempDir::new("dropin-cli-refuse");
    let link = pahole_link(&dir);
    let input = dir.join("x.ko");
    std::fs::write(&input, b"not read").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["-C", "task_struct"], "--class_name"),
        (&["--sizes"], "--sizes"),
        (&["-E", "-J"], "--expand_types"),
        (
            &["--btf_features_strict=var,nope", "-J"],
            "Feature 'nope' in 'var,nope' is not supported.  Supported BTF features are:\nencode_force,var,",
        ),
        (&[], "add -J"),
        (&["-J", "--no_such_option"], "unknown option"),
    ];
    for (args, want) in cases {
        let (success, out, err) = run(Command::new(&link).args(*args).arg(&input));
        assert!(!success, "pahole {args:?} should fail");
        assert!(out.is_empty(), "pahole {args:?} printed {out}");
        assert!(
            err.contains(want),
            "pahole {args:?}: expected '{want}' in: {err}"
        );
    }
    assert_eq!(std::fs::read(&input).unwrap(), b"not read");
    // Under the name pahole there are no subcommands: `dump` is a file name.
    let (success, _, err) = run(Command::new(&link).args(["-J", "dump"]));
    assert!(!success);
    assert!(err.contains("dump"), "{err}");
}

/// The switches of older kernels (5.x: --skip_encoding_btf_vars, --btf_gen_floats,
/// -j; 6.x before --btf_features: --skip_encoding_btf_inconsistent_proto,
/// --btf_gen_optimized …) encode exactly what the features pahole maps them to do.
#[test]
fn legacy_switches_encode_as_their_features() {
    let Some(corpus) = corpus() else {
        return;
    };
    let dir = TempDir::new("dropin-cli-legacy");
    let link = pahole_link(&dir);
    let vmlinux = corpus.join("vmlinux");
    let ko = corpus.join("nf_tables.ko");
    let encode = |args: &[&str]| {
        let out = dir.join("out.btf");
        ok(Command::new(&link)
            .args(["-J", "--lang_exclude=rust"])
            .args(args)
            .arg("--btf_base")
            .arg(&vmlinux)
            .arg(format!("--btf_encode_detached={}", out.display()))
            .arg(&ko));
        std::fs::read(&out).unwrap()
    };
    let pairs: &[(&[&str], &str)] = &[
        // pahole's defaults without --btf_features.
        (&[], "var,decl_tag,type_tag,enum64"),
        // 5.x (pahole 1.18 … 1.21).
        (&["--skip_encoding_btf_vars"], "decl_tag,type_tag,enum64"),
        // 5.x/6.x with pahole ≥ 1.22 and ≥ 1.24 (enum64 left out for older kernels).
        (
            &["-j", "--btf_gen_floats", "--skip_encoding_btf_enum64"],
            "var,decl_tag,type_tag,float",
        ),
        // 6.x with pahole ≥ 1.25, before --btf_features.
        (
            &[
                "-j",
                "--btf_gen_floats",
                "--skip_encoding_btf_inconsistent_proto",
                "--btf_gen_optimized",
                "--btf_encode_force",
                "--skip_encoding_btf_type_tag",
                "--skip_encoding_btf_decl_tag",
            ],
            "encode_force,var,float,enum64,optimized_func,consistent_func",
        ),
        // pahole runs it as the list `all`, a name it does not know: nothing is on.
        (&["--btf_gen_all"], ""),
    ];
    for (legacy, features) in pairs {
        let a = encode(legacy);
        let b = encode(&["-j2", &format!("--btf_features={features}")]);
        assert!(
            a == b,
            "{legacy:?} does not encode as --btf_features={features}"
        );
    }
}

#[test]
fn time_reports_the_phases_on_stderr_and_leaves_the_output_alone() {
    let sample = common::root().join("examples/sample/sample.o");
    let dir = TempDir::new("time");
    let (plain, timed) = (dir.join("plain.btf"), dir.join("timed.btf"));
    for (out, extra) in [(&plain, None), (&timed, Some("--time"))] {
        let mut cmd = dwarf2btf();
        cmd.args(["-J", "-j2", "--btf_features=default,float"])
            .args(extra)
            .arg(format!("--btf_encode_detached={}", out.display()))
            .arg(&sample);
        let (ok, stdout, stderr) = run(&mut cmd);
        assert!(ok, "{stderr}");
        assert!(stdout.is_empty(), "nothing on stdout: {stdout}");
        if extra.is_some() {
            for phase in [
                "open the input",
                "parse, encode, dedup the units",
                "write",
                "total",
            ] {
                assert!(stderr.contains(phase), "no '{phase}' in:\n{stderr}");
            }
        } else {
            assert!(stderr.is_empty(), "{stderr}");
        }
    }
    assert!(std::fs::read(&plain).unwrap() == std::fs::read(&timed).unwrap());
}
