//! The command lines Linux's build passes to pahole, kernel 5.4 to 7.2, run on the
//! corpus (the Debian 6.12 vmlinux and nf_tables.ko): each must give the bytes the
//! reference pahole (v1.31 + 38 commits) gives for it. A row's `sha256` is that of
//! pahole's output: the detached BTF, or the `.BTF` section it writes into a copy
//! of the module (`+` the first 16 hex digits of `.BTF.base`'s, when it writes one).
//!
//! Where they come from:
//! - 5.4–5.6 `scripts/link-vmlinux.sh`: `pahole -J vmlinux` (no module BTF);
//! - 5.7–6.1 link-vmlinux.sh and `scripts/pahole-flags.sh` by pahole version:
//!   `--skip_encoding_btf_vars` (1.18–1.21), `--btf_gen_floats` (≥ 1.21), `-j`
//!   (≥ 1.22), `--skip_encoding_btf_enum64` (6.0–6.1, ≥ 1.24); modules (≥ 5.11,
//!   `scripts/Makefile.modfinal`): the same with `--btf_base vmlinux`, into the .ko;
//! - 6.2–6.7 `scripts/Makefile.btf`: `--lang_exclude=rust`, and for ≥ 1.25
//!   `--skip_encoding_btf_inconsistent_proto --btf_gen_optimized`;
//! - 6.8–6.19: `-j$(JOBS) --btf_features=…` for ≥ 1.26 (`decl_tag_kfuncs` from
//!   6.10), `--btf_features=reproducible_build` under `KBUILD_BUILD_TIMESTAMP`,
//!   `--btf_features=distilled_base` for external modules (≥ 1.28),
//!   `--btf_features=attributes` (6.15, ≥ 1.30);
//! - 7.0 `scripts/gen-btf.sh`: the same lists, detached (`--btf_encode_detached`),
//!   then resolve_btfids (which distills external modules' base) and objcopy;
//! - 7.1: `--btf_features=layout`; a proposed 7.2 change drops `decl_tag_kfuncs`
//!   and `attributes` (resolve_btfids does that work); a proposed kbuild change
//!   passes `true_signature`.
//!
//! Android's kleaf builds through kbuild with these same lines; its own switch
//! (`--btf_debug_info`) only turns `CONFIG_DEBUG_INFO_BTF` on or off. The vmlinux
//! rows that pahole runs in place (`-J vmlinux`) are run detached here (the same
//! bytes go to `.BTF`; writing into an ELF is tests/elf_write_corpus.rs's subject).

mod common;
use common::{corpus, need, scratch};

use std::path::Path;
use std::process::Command;

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    /// vmlinux (detached output).
    Vmlinux,
    /// An in-tree module: `.BTF` written into the .ko.
    Module,
    /// An external module (`make M=`): `.BTF` and `.BTF.base` into the .ko.
    ExtModule,
}

struct Row {
    kernels: &'static str,
    pahole: &'static str,
    phase: Phase,
    /// pahole's arguments, with `vmlinux` for the base and `OUT` for a detached
    /// output; the input comes last.
    args: &'static str,
    sha256: &'static str,
}

const ROWS: &[Row] = &[
    Row {
        kernels: "5.4-5.6",
        pahole: "any",
        phase: Phase::Vmlinux,
        args: "-J",
        sha256: "baee332f7eee432ad57242a35b9881537c6ae63c3efd29b8ed7e398d34b1345c",
    },
    Row {
        kernels: "5.7-5.10",
        pahole: "1.16-1.17",
        phase: Phase::Vmlinux,
        args: "-J",
        sha256: "baee332f7eee432ad57242a35b9881537c6ae63c3efd29b8ed7e398d34b1345c",
    },
    Row {
        kernels: "5.11-5.12",
        pahole: "1.18-1.20",
        phase: Phase::Vmlinux,
        args: "-J --skip_encoding_btf_vars",
        sha256: "5ce637ff256b1c9e46dcb43e46f1389043b763a9d7578c346292880d40118533",
    },
    Row {
        kernels: "5.11-5.12",
        pahole: "1.18-1.20",
        phase: Phase::Module,
        args: "-J --skip_encoding_btf_vars --btf_base vmlinux",
        sha256: "f0313af60e25864172e4a6c31fbd1550b1a6c77955fc4154be0a243e3b5cb761",
    },
    Row {
        kernels: "5.13-5.14",
        pahole: "1.21",
        phase: Phase::Vmlinux,
        args: "-J --skip_encoding_btf_vars --btf_gen_floats",
        sha256: "b516f5686d087c4c74a0edd63d0a110726d8619203b875315c33d4fd7f60af09",
    },
    Row {
        kernels: "5.15-5.19",
        pahole: "1.22-1.23",
        phase: Phase::Vmlinux,
        args: "-J --btf_gen_floats -j",
        sha256: "dac090a337a010536e9c2ac5054dc7ec000b2db16e95a3cbb1643380967ed783",
    },
    Row {
        kernels: "5.15-5.19",
        pahole: "1.22-1.23",
        phase: Phase::Module,
        args: "-J --btf_gen_floats -j --btf_base vmlinux",
        sha256: "c834fdb19fe5ea27ea3c76125a53870c676a3d1b9cc72ce0ff0392ac36bf7a9f",
    },
    Row {
        kernels: "6.0-6.1",
        pahole: "1.24",
        phase: Phase::Vmlinux,
        args: "-J --btf_gen_floats -j --skip_encoding_btf_enum64",
        sha256: "223b7bce8657f90ed11b4561d565d3a0d4eb7915ccee2198c75d829ac820c149",
    },
    Row {
        kernels: "6.2-6.7",
        pahole: "1.25",
        phase: Phase::Vmlinux,
        args: "-J --btf_gen_floats -j --lang_exclude=rust --skip_encoding_btf_inconsistent_proto --btf_gen_optimized",
        sha256: "eefc304f610d1e282eb07a1e51f7844265da85ed4ce4b76d0a3ee1a19045a81b",
    },
    Row {
        kernels: "6.2-6.7",
        pahole: "1.25",
        phase: Phase::Module,
        args: "-J --btf_gen_floats -j --lang_exclude=rust --skip_encoding_btf_inconsistent_proto --btf_gen_optimized --btf_base vmlinux",
        sha256: "c834fdb19fe5ea27ea3c76125a53870c676a3d1b9cc72ce0ff0392ac36bf7a9f",
    },
    Row {
        kernels: "6.8-6.9",
        pahole: "1.26-1.27",
        phase: Phase::Vmlinux,
        args: "-J -j --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func --lang_exclude=rust",
        sha256: "eefc304f610d1e282eb07a1e51f7844265da85ed4ce4b76d0a3ee1a19045a81b",
    },
    Row {
        kernels: "6.10-6.14",
        pahole: "1.27-1.29",
        phase: Phase::Vmlinux,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs --lang_exclude=rust",
        sha256: "350a75a9ec7058737a877b547d608c7d1ad0fe9ea55caea02ac7f47de62c5dec",
    },
    Row {
        kernels: "6.11-6.14",
        pahole: "1.27-1.29",
        phase: Phase::Vmlinux,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs --btf_features=reproducible_build --lang_exclude=rust",
        sha256: "350a75a9ec7058737a877b547d608c7d1ad0fe9ea55caea02ac7f47de62c5dec",
    },
    Row {
        kernels: "6.10-6.14",
        pahole: "1.27-1.29",
        phase: Phase::Module,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs --lang_exclude=rust --btf_base vmlinux",
        sha256: "c834fdb19fe5ea27ea3c76125a53870c676a3d1b9cc72ce0ff0392ac36bf7a9f",
    },
    Row {
        kernels: "6.11-6.14",
        pahole: "1.28-1.29",
        phase: Phase::ExtModule,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs --lang_exclude=rust --btf_features=distilled_base --btf_base vmlinux",
        sha256: "5f40be4b3e0642e46ace68ebc57d938b6fa16094facb25401c44638b922c2df4+d8c66aa29a41739b",
    },
    Row {
        kernels: "6.15-6.19",
        pahole: "1.30-1.31",
        phase: Phase::Vmlinux,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs --btf_features=attributes --lang_exclude=rust",
        sha256: "350a75a9ec7058737a877b547d608c7d1ad0fe9ea55caea02ac7f47de62c5dec",
    },
    Row {
        kernels: "6.15-6.19",
        pahole: "1.30-1.31",
        phase: Phase::ExtModule,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs --btf_features=attributes --lang_exclude=rust --btf_features=distilled_base --btf_base vmlinux",
        sha256: "5f40be4b3e0642e46ace68ebc57d938b6fa16094facb25401c44638b922c2df4+d8c66aa29a41739b",
    },
    Row {
        kernels: "7.0",
        pahole: "1.30-1.31",
        phase: Phase::Vmlinux,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs --btf_features=attributes --lang_exclude=rust --btf_encode_detached=OUT",
        sha256: "350a75a9ec7058737a877b547d608c7d1ad0fe9ea55caea02ac7f47de62c5dec",
    },
    Row {
        kernels: "7.0",
        pahole: "1.30-1.31",
        phase: Phase::Module,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs --btf_features=attributes --lang_exclude=rust --btf_base vmlinux --btf_encode_detached=OUT",
        sha256: "c834fdb19fe5ea27ea3c76125a53870c676a3d1b9cc72ce0ff0392ac36bf7a9f",
    },
    Row {
        kernels: "7.1-7.2",
        pahole: "1.32",
        phase: Phase::Vmlinux,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs --btf_features=attributes --btf_features=layout --lang_exclude=rust --btf_encode_detached=OUT",
        sha256: "70a5cf3be68194b1d3f59bf78fe8fe32df065ca17340f6b98aad0e039dfc34aa",
    },
    Row {
        kernels: "7.1-7.2",
        pahole: "1.32",
        phase: Phase::Module,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs --btf_features=attributes --btf_features=layout --lang_exclude=rust --btf_base vmlinux --btf_encode_detached=OUT",
        sha256: "c834fdb19fe5ea27ea3c76125a53870c676a3d1b9cc72ce0ff0392ac36bf7a9f",
    },
    Row {
        kernels: "7.2 (proposed)",
        pahole: "1.32",
        phase: Phase::Vmlinux,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func --btf_features=layout --lang_exclude=rust --btf_encode_detached=OUT",
        sha256: "43a8addb69bac8ce32a59d65258e42563d340a275f5a6b5f02f4b4aae13193d6",
    },
    Row {
        kernels: "proposed kbuild",
        pahole: "1.31",
        phase: Phase::Vmlinux,
        args: "-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs --btf_features=attributes --btf_features=true_signature --lang_exclude=rust --btf_encode_detached=OUT",
        sha256: "6100fa9cfaba4ed463398cdeecd2c3a609dc0e0a99fb630db855628e37cb2e4e",
    },
];

/// The SHA-256 of `path`'s bytes, in hex (by coreutils' sha256sum).
fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(out.status.success(), "sha256sum {}", path.display());
    String::from_utf8_lossy(&out.stdout)[..64].to_string()
}

/// Section `name` of `elf` into `out`, if it has it.
fn dump_section(elf: &Path, name: &str, out: &Path) -> bool {
    let _ = std::fs::remove_file(out);
    Command::new("objcopy")
        .arg(format!("--dump-section={name}={}", out.display()))
        .arg(elf)
        .arg(out.with_extension("scratch"))
        .output()
        .is_ok_and(|o| o.status.success())
        && out.exists()
}

#[test]
fn kernel_command_lines_give_pahole_s_bytes() {
    let Some(c) = corpus() else { return };
    if !need("sha256sum") || !need("objcopy") {
        return;
    }
    let dir = scratch("kernel_cmdlines");
    let vmlinux = c.join("vmlinux");
    let mut failures = Vec::new();
    for (i, row) in ROWS.iter().enumerate() {
        let out = dir.join(format!("{i}.btf"));
        let mut args: Vec<String> = row
            .args
            .split(' ')
            .map(|a| match a {
                "vmlinux" => vmlinux.display().to_string(),
                _ => a.replace("OUT", &out.display().to_string()),
            })
            .collect();
        let input = match row.phase {
            Phase::Vmlinux => {
                if !row.args.contains("--btf_encode_detached") {
                    args.push(format!("--btf_encode_detached={}", out.display()));
                }
                vmlinux.clone()
            }
            Phase::Module | Phase::ExtModule => {
                let ko = dir.join(format!("{i}.ko"));
                std::fs::copy(c.join("nf_tables.ko"), &ko).unwrap();
                ko
            }
        };
        let res = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"))
            .args(&args)
            .arg(&input)
            .output()
            .unwrap();
        let what = format!("{} (pahole {}): {}", row.kernels, row.pahole, row.args);
        if !res.status.success() {
            failures.push(format!(
                "{what}: failed: {}",
                String::from_utf8_lossy(&res.stderr)
            ));
            continue;
        }
        let got = if out.exists() {
            sha256(&out)
        } else {
            let btf = dir.join(format!("{i}.BTF"));
            assert!(dump_section(&input, ".BTF", &btf), "{what}: no .BTF");
            let mut h = sha256(&btf);
            let base = dir.join(format!("{i}.BTF.base"));
            if dump_section(&input, ".BTF.base", &base) {
                h = format!("{h}+{}", &sha256(&base)[..16]);
            }
            assert_eq!(
                row.phase == Phase::ExtModule,
                h.contains('+'),
                "{what}: .BTF.base written only for external modules"
            );
            let _ = std::fs::remove_file(&input);
            h
        };
        if got != row.sha256 {
            failures.push(format!("{what}: {got}, pahole {}", row.sha256));
        }
        let _ = std::fs::remove_file(&out);
    }
    assert!(
        failures.is_empty(),
        "not pahole's bytes:\n{}",
        failures.join("\n")
    );
}
