//! Every target pahole encodes, on a small kernel-like program of our own
//! (tests/fixtures/arch/kernel.c and sinks.c), built here by Debian's cross
//! compilers and by clang: linked into a vmlinux-like executable and, for some,
//! as a relocatable object like a module. Our BTF must be the bytes of pahole's
//! for the same input (`tests/fixtures/arch/NAME.btf`, made by the reference
//! pahole with the kernel's flags), at -j1 and -j2, and `dwarf2btf validate` and
//! `dump` must accept pahole's file and show what libbpf reads.
//!
//! The constructs: plain `char` signed or not by target, 4-byte pointers,
//! big-endian BTF (s390x), u64 parameters over two registers and their
//! DW_OP_piece location lists (32-bit ARM), the argument registers of each
//! machine (ppc64el's, RISC-V's, MIPS', SPARC's), clang's parameter checks and its long
//! `DW_OP_bregN … DW_OP_stack_value` expressions, RISC-V modules' paired
//! (label difference) relocations.
//!
//! The goldens depend on the compilers' exact output: they were made with
//! Debian 12's gcc 12.2 cross compilers and clang 14, which `.ci/run` installs.
//! With `DWARF2BTF_PAHOLE=/path/to/pahole` the test also runs that pahole on
//! each build and checks the golden against it; add `DWARF2BTF_BLESS=1` to
//! rewrite the goldens from it.

mod common;
use common::{golden, scratch, skip, stdout_of, KFLAGS};

use dwarf2btf::btf::{dump, read, write, Endian};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One build: golden name, compiler, its arguments, linked or `-c`.
struct Build {
    name: &'static str,
    cc: &'static str,
    args: &'static [&'static str],
    linked: bool,
}

const fn linked(name: &'static str, cc: &'static str, args: &'static [&'static str]) -> Build {
    Build {
        name,
        cc,
        args,
        linked: true,
    }
}

const fn object(name: &'static str, cc: &'static str, args: &'static [&'static str]) -> Build {
    Build {
        name,
        cc,
        args,
        linked: false,
    }
}

const BUILDS: &[Build] = &[
    linked("x86_64-gcc", "gcc", &[]),
    linked("x86_64-gcc-unsigned-char", "gcc", &["-funsigned-char"]),
    linked("i386-gcc", "i686-linux-gnu-gcc", &[]),
    object("i386-gcc-module", "i686-linux-gnu-gcc", &[]),
    linked("armhf-gcc", "arm-linux-gnueabihf-gcc", &[]),
    linked(
        "armhf-gcc-dwarf4",
        "arm-linux-gnueabihf-gcc",
        &["-gdwarf-4"],
    ),
    object("armhf-gcc-module", "arm-linux-gnueabihf-gcc", &[]),
    linked("s390x-gcc", "s390x-linux-gnu-gcc", &[]),
    object("s390x-gcc-module", "s390x-linux-gnu-gcc", &[]),
    linked("ppc64el-gcc", "powerpc64le-linux-gnu-gcc", &[]),
    object("ppc64el-gcc-module", "powerpc64le-linux-gnu-gcc", &[]),
    linked("arm64-gcc", "aarch64-linux-gnu-gcc", &[]),
    linked("riscv64-gcc", "riscv64-linux-gnu-gcc", &[]),
    object("riscv64-gcc-module", "riscv64-linux-gnu-gcc", &[]),
    // MIPS images only: the reference pahole's libdw (elfutils 0.188) applies no
    // MIPS relocations to a module's DWARF (its mips64el BTF has wrong names), so
    // module BTF is not comparable there.
    linked("mips64el-gcc", "mips64el-linux-gnuabi64-gcc", &[]),
    linked("mipsel-gcc", "mipsel-linux-gnu-gcc", &[]),
    linked("sparc64-gcc", "sparc64-linux-gnu-gcc", &[]),
    object("sparc64-gcc-module", "sparc64-linux-gnu-gcc", &[]),
    linked("x86_64-clang", "clang", &[]),
    object("x86_64-clang-module", "clang", &[]),
    linked("i386-clang", "clang", &["--target=i686-linux-gnu"]),
    linked("armhf-clang", "clang", &["--target=arm-linux-gnueabihf"]),
    linked("s390x-clang", "clang", &["--target=s390x-linux-gnu"]),
    linked(
        "ppc64el-clang",
        "clang",
        &["--target=powerpc64le-linux-gnu"],
    ),
    linked("arm64-clang", "clang", &["--target=aarch64-linux-gnu"]),
    linked("riscv64-clang", "clang", &["--target=riscv64-linux-gnu"]),
    object(
        "riscv32-clang-module",
        "clang",
        &["--target=riscv32-linux-gnu"],
    ),
    object(
        "powerpc-clang-module",
        "clang",
        &["--target=powerpc-linux-gnu"],
    ),
    object(
        "powerpc64-clang-module",
        "clang",
        &["--target=powerpc64-linux-gnu"],
    ),
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/arch")
}

/// pahole's arguments with the kernel's flags.
const KERNEL_FLAGS: [&str; 3] = ["-J", KFLAGS, "--lang_exclude=rust"];

/// Builds `b` in `dir`; None (after a skip) if its compiler is missing.
fn build(b: &Build, dir: &Path) -> Option<PathBuf> {
    let src = fixtures();
    let out = dir.join(if b.linked {
        b.name.to_string()
    } else {
        format!("{}.o", b.name)
    });
    let mut cmd = Command::new(b.cc);
    cmd.args(b.args).args(["-O2", "-g"]);
    if b.linked {
        // A freestanding executable, entered at use_all, as a vmlinux is linked.
        cmd.args(["-nostdlib", "-static", "-Wl,-e,use_all"])
            .arg(src.join("kernel.c"))
            .arg(src.join("sinks.c"));
    } else {
        cmd.arg("-c").arg(src.join("kernel.c"));
    }
    let res = cmd.arg("-o").arg(&out).output();
    match res {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => panic!(
            "{}: {} {:?} failed: {}",
            b.name,
            b.cc,
            b.args,
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            skip(&format!("{} ({}: {e})", b.name, b.cc));
            None
        }
    }
}

fn ours() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_dwarf2btf"))
}

/// Encodes `input` with the kernel's flags at `-jN` into `out`.
fn encode(input: &Path, jobs: u32, out: &Path) -> Vec<u8> {
    let j = format!("-j{jobs}");
    let detached = format!("--btf_encode_detached={}", out.display());
    let mut args: Vec<&std::ffi::OsStr> = KERNEL_FLAGS.iter().map(|s| s.as_ref()).collect();
    args.extend([j.as_ref(), detached.as_ref(), input.as_os_str()]);
    stdout_of(ours(), &args, None);
    std::fs::read(out).unwrap()
}

/// What pahole (`DWARF2BTF_PAHOLE`) writes for `input`, if it is set.
fn pahole(input: &Path, out: &Path) -> Option<Vec<u8>> {
    let prog = PathBuf::from(std::env::var_os("DWARF2BTF_PAHOLE")?);
    let detached = format!("--btf_encode_detached={}", out.display());
    let mut args: Vec<&std::ffi::OsStr> = KERNEL_FLAGS.iter().map(|s| s.as_ref()).collect();
    args.extend([detached.as_ref(), input.as_os_str()]);
    stdout_of(&prog, &args, prog.parent());
    Some(std::fs::read(out).unwrap())
}

/// `dwarf2btf validate` and `dump` on pahole's file: accepted, and the dump is
/// bpftool's for a copy libbpf reads the same way (bpftool 7.1 reads big-endian
/// BTF only with the classic 24-byte header, so that copy has one; the types are
/// the same).
fn check_tools(name: &str, golden: &Path, dir: &Path) {
    stdout_of(ours(), &["validate".as_ref(), golden.as_os_str()], None);
    let our_dump = stdout_of(ours(), &["dump".as_ref(), golden.as_os_str()], None);
    let btf = read::parse(&std::fs::read(golden).unwrap(), None).unwrap();
    assert_eq!(our_dump, dump::dump_to_vec(&btf), "{name}: dump mode");
    if Command::new("bpftool").arg("version").output().is_err() {
        skip("bpftool (to check dwarf2btf dump against it)");
        return;
    }
    let for_bpftool = if btf.endian() == Endian::Big {
        let mut b = btf.clone();
        b.set_header_extra(Vec::new());
        let copy = dir.join(format!("{name}.24.btf"));
        std::fs::write(&copy, write::to_bytes(&b)).unwrap();
        copy
    } else {
        golden.to_path_buf()
    };
    let theirs = stdout_of(
        Path::new("bpftool"),
        &[
            "btf".as_ref(),
            "dump".as_ref(),
            "file".as_ref(),
            for_bpftool.as_os_str(),
        ],
        None,
    );
    assert!(
        our_dump == theirs,
        "{name}: our dump differs from bpftool's"
    );
}

#[test]
fn every_target_encodes_as_pahole() {
    let dir = scratch("arch_fixtures");
    let mut checked = Vec::new();
    for b in BUILDS {
        let Some(input) = build(b, &dir) else {
            continue;
        };
        let golden_path = fixtures().join(format!("{}.btf", b.name));
        let fresh = pahole(&input, &dir.join(format!("{}.pahole.btf", b.name)));
        let want = golden(&golden_path, fresh);
        for jobs in [1, 2] {
            let got = encode(&input, jobs, &dir.join(format!("{}.j{jobs}.btf", b.name)));
            assert!(
                got == want,
                "{} -j{jobs}: not pahole's bytes ({} vs {} bytes)",
                b.name,
                got.len(),
                want.len()
            );
        }
        check_tools(b.name, &golden_path, &dir);
        checked.push(b.name);
    }
    println!("byte-identical to pahole: {checked:?}");
}

/// The goldens cover what they are for: the BTF differs by target where it should.
#[test]
fn goldens_differ_by_target() {
    let golden = |n: &str| {
        let bytes = std::fs::read(fixtures().join(format!("{n}.btf"))).unwrap();
        read::parse(&bytes, None).unwrap()
    };
    let text = |n: &str| String::from_utf8(dump::dump_to_vec(&golden(n))).unwrap();
    let char_enc = |n: &str| {
        text(n)
            .lines()
            .find(|l| l.contains("INT 'char'"))
            .map(|l| l.contains("encoding=SIGNED"))
    };
    assert_eq!(char_enc("x86_64-gcc"), Some(true), "x86 char is signed");
    assert_eq!(char_enc("x86_64-gcc-unsigned-char"), Some(false));
    assert_eq!(char_enc("i386-gcc"), Some(true));
    assert_eq!(char_enc("armhf-gcc"), Some(false), "arm char is unsigned");
    assert_eq!(golden("s390x-gcc").endian(), Endian::Big);
    assert_eq!(
        golden("s390x-gcc").header_extra().len(),
        8,
        "32-byte header"
    );
    let ptr_member = |n: &str| {
        let t = text(n);
        let at = t.find("STRUCT 'list_head'").unwrap();
        t[at..].lines().nth(2).unwrap().to_string()
    };
    assert!(
        ptr_member("i386-gcc").contains("bits_offset=32"),
        "4-byte pointers"
    );
    assert!(ptr_member("x86_64-gcc").contains("bits_offset=64"));
    let funcs = |n: &str| {
        text(n)
            .lines()
            .filter_map(|l| {
                l.split_once("] FUNC '")
                    .map(|(_, r)| r.split('\'').next().unwrap().to_string())
            })
            .collect::<Vec<_>>()
    };
    // u64 parameters: on 32-bit ARM `mixed`'s y is in r2:r3, not where pahole's
    // slot count (x: 1 slot, y: 2) expects it: skipped there, kept on x86.
    assert!(funcs("x86_64-gcc").contains(&"mixed".to_string()));
    assert!(!funcs("armhf-gcc").contains(&"mixed".to_string()));
    // ppc64el has 8 argument registers in pahole's model: the .isra clone whose
    // dropped parameter has no register is skipped, as on x86.
    // So on MIPS and SPARC (8 and 6); i386 has none in pahole's model: kept.
    for n in [
        "ppc64el-gcc",
        "x86_64-gcc",
        "mips64el-gcc",
        "mipsel-gcc",
        "sparc64-gcc",
    ] {
        assert!(!funcs(n).contains(&"drop_unused".to_string()), "{n}");
    }
    assert!(funcs("i386-gcc").contains(&"drop_unused".to_string()));
}
