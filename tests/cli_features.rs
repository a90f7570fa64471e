//! pahole's feature syntax and `--verbose` on the corpus vmlinux, against the
//! references of pahole master (`features/` of the references): a list starting
//! with `+` (the defaults plus its items), an unknown feature (ignored, or refused
//! with pahole's message and status under `--btf_features_strict`), and the
//! function-skip lines of `--verbose`.

mod common;
use common::{assert_same_btf, corpus_and_reference, encode_detached, tmp, KFLAGS};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The corpus vmlinux and pahole's references (the locators skip without them).
fn inputs() -> Option<(PathBuf, PathBuf)> {
    let (c, r) = corpus_and_reference()?;
    Some((c.join("vmlinux"), r))
}

fn same_bytes(ours: &Path, reference: &Path) {
    assert_same_btf(ours, reference, None);
    let _ = std::fs::remove_file(ours);
}

/// Encodes `input` (over `base`) with the kernel's features and `extra` ones.
fn encode_with(extra: &str, input: &Path, base: Option<&Path>) -> PathBuf {
    let list = format!("{KFLAGS}{extra}");
    encode_detached(&[&list, "--lang_exclude=rust"], input, base)
}

#[test]
fn plus_list_is_the_defaults_and_its_items() {
    let Some((vmlinux, r)) = inputs() else { return };
    let out = encode_detached(&["--btf_features=+reproducible_build"], &vmlinux, None);
    same_bytes(
        &out,
        &r.join("features/vmlinux-cloud.plus-reproducible_build.btf"),
    );
}

#[test]
fn unknown_feature_is_ignored_unless_strict() {
    let Some((vmlinux, r)) = inputs() else { return };
    let list = format!("{KFLAGS},no_such_feature");
    let out = encode_with(",no_such_feature", &vmlinux, None);
    same_bytes(&out, &r.join("vmlinux-cloud.kernel-flags.btf"));

    let strict = list.replace("--btf_features=", "--btf_features_strict=");
    let out = tmp("strict.btf");
    let res = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
        .args(["-J", &strict])
        .arg(format!("--btf_encode_detached={}", out.display()))
        .arg(&vmlinux)
        .output()
        .unwrap();
    assert_eq!(res.status.code(), Some(1), "pahole's EXIT_FAILURE");
    assert!(res.stdout.is_empty());
    let err = String::from_utf8_lossy(&res.stderr);
    let want = format!(
        "Feature 'no_such_feature' in '{}' is not supported.  Supported BTF features are:\n{}\n",
        &list["--btf_features=".len()..],
        dwarf2btf::encode::supported_list()
    );
    assert_eq!(err, want);
    assert!(!out.exists(), "nothing is written");
}

#[test]
fn verbose_prints_pahole_s_skip_lines() {
    let Some((vmlinux, r)) = inputs() else { return };
    let out = tmp("verbose.btf");
    let res = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
        .args(["-J", "-j2", "--verbose", KFLAGS, "--lang_exclude=rust"])
        .arg(format!("--btf_encode_detached={}", out.display()))
        .arg(&vmlinux)
        .output()
        .unwrap();
    assert!(res.status.success());
    same_bytes(&out, &r.join("vmlinux-cloud.kernel-flags.btf"));
    let mut ours: Vec<String> = String::from_utf8(res.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let text =
        std::fs::read_to_string(r.join("features/vmlinux-cloud.kernel-flags.verbose-skips.txt"))
            .unwrap();
    let mut want: Vec<String> = text.lines().map(str::to_string).collect();
    assert_eq!(want.len(), 1065);
    ours.sort();
    want.sort();
    assert_eq!(ours, want);
}

/// `layout` (what kernels ≥ 7.1 pass to pahole ≥ 1.32): the kind layout section in
/// the vmlinux's BTF, none in a module's (split BTF shares its base's).
#[test]
fn layout_section_as_pahole_writes_it() {
    let Some((vmlinux, r)) = inputs() else { return };
    let list = ",attributes,layout";
    let out = encode_with(list, &vmlinux, None);
    same_bytes(&out, &r.join("features/vmlinux-cloud.layout.btf"));
    let ko = vmlinux.with_file_name("nf_tables.ko");
    let out = encode_with(list, &ko, Some(&vmlinux));
    same_bytes(&out, &r.join("features/nf_tables.layout.btf"));
    // A module over a base that has a layout section (a 7.1 kernel's vmlinux) is
    // the module over the same types without one.
    let with = r.join("features/vmlinux-cloud.layout.btf");
    let without = r.join("features/vmlinux-cloud.attributes.btf");
    let a = encode_with(list, &ko, Some(&with));
    let b = encode_with(list, &ko, Some(&without));
    same_bytes(&a, &b);
}

#[test]
fn attributes_as_pahole_encodes_them() {
    let Some((vmlinux, r)) = inputs() else { return };
    let out = encode_with(",attributes", &vmlinux, None);
    same_bytes(&out, &r.join("features/vmlinux-cloud.attributes.btf"));
}

/// `true_signature` (what a proposed kbuild change passes to pahole ≥ 1.31): clones
/// at their own addresses encoded under their own names, with their parameters.
#[test]
fn true_signature_as_pahole_encodes_it() {
    let Some((vmlinux, r)) = inputs() else { return };
    let out = encode_with(",attributes,true_signature", &vmlinux, None);
    same_bytes(&out, &r.join("features/vmlinux-cloud.true_signature.btf"));
}
