//! Resource limits of the BTF core: no allocation sized by an unchecked count or
//! length from the input, and no recursion whose depth the input chooses.
//!
//! Allocation bounds are checked by running the CLI under `ulimit -v` (a few hundred
//! MiB of address space): an allocation sized by a hostile count aborts the process
//! there, while a checked count gives a clean error. Recursion bounds are checked by
//! running the library on a thread with a small stack.

use dwarf2btf::btf::{dump, read, validate, write, Btf, StrOffset, Type, TypeId, TypeKind};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Address-space limit for the CLI runs, in KiB: ample for these tiny inputs, far
/// below any allocation sized by a 32-bit count of 12-byte records.
const VM_LIMIT_KIB: u64 = 512 * 1024;

/// Little-endian raw BTF from type-section words and a string section.
fn raw_btf(types: &[u32], strings: &[u8]) -> Vec<u8> {
    let type_len = u32::try_from(types.len() * 4).unwrap();
    let mut v = Vec::new();
    v.extend_from_slice(&0xeb9fu16.to_le_bytes());
    v.extend_from_slice(&[1, 0]);
    for w in [
        24,
        0,
        type_len,
        type_len,
        u32::try_from(strings.len()).unwrap(),
    ] {
        v.extend_from_slice(&w.to_le_bytes());
    }
    for w in types {
        v.extend_from_slice(&w.to_le_bytes());
    }
    v.extend_from_slice(strings);
    v
}

fn info(kind: u32, vlen: u32, kflag: bool) -> u32 {
    (kflag as u32) << 31 | kind << 24 | vlen
}

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("hostile_btf/{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the CLI with `args` under the address-space limit.
fn run_limited(args: &[&Path]) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -v {VM_LIMIT_KIB} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_dwarf2btf"));
    cmd.args(args);
    cmd.output().expect("run sh")
}

/// Writes `bytes` to a file and checks that `dump` and `validate` both refuse it
/// cleanly under the memory limit, with `expect` in the message.
fn refused_by_cli(name: &str, bytes: &[u8], expect: &str) {
    let dir = scratch(name);
    let f = dir.join(format!("{name}.btf"));
    std::fs::write(&f, bytes).unwrap();
    for mode in ["dump", "validate"] {
        let out = run_limited(&[Path::new(mode), &f]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let ctx = format!("{mode} {name}: exit {:?}: {stderr}", out.status.code());
        assert_eq!(out.status.code(), Some(1), "{ctx}");
        assert!(!stderr.contains("panicked at"), "{ctx}");
        assert!(stderr.contains(&f.display().to_string()), "{ctx}");
        assert!(stderr.contains(expect), "{ctx}: expected {expect:?}");
    }
}

/// The largest vlen, with records for one member only: the reader must check the
/// count against the bytes left before reserving room for 65535 members.
/// `f` on a thread with a stack of `kib` KiB: deep input must not need a deep stack.
fn on_small_stack<R: Send + 'static>(kib: usize, f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new()
        .stack_size(kib * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap_or_else(|_| panic!("overflowed a {kib} KiB stack (or failed)"))
}

#[test]
fn max_vlen_with_tiny_section() {
    for (kind, name) in [
        (4, "struct"),
        (5, "union"),
        (6, "enum"),
        (13, "proto"),
        (15, "datasec"),
        (19, "enum64"),
    ] {
        let mut types = vec![1, info(kind, 0xffff, false), 4];
        types.extend([0, 0, 0]);
        let bytes = raw_btf(&types, b"\0s\0");
        let err = read::parse(&bytes, None).unwrap_err().to_string();
        assert!(err.contains("vlen 65535 runs past"), "{name}: {err}");
        refused_by_cli(&format!("vlen_{name}"), &bytes, "vlen 65535 runs past");
    }
}

/// Header lengths and offsets near 2^32: refused before anything is sized by them.
#[test]
fn header_lengths_past_the_data() {
    let good = raw_btf(&[0, info(1, 0, false), 4, 32], b"\0");
    let put = |at: usize, v: u32| {
        let mut d = good.clone();
        d[at..at + 4].copy_from_slice(&v.to_le_bytes());
        d
    };
    let cases = [
        ("hdr_len", put(4, u32::MAX), "header length"),
        ("type_len", put(12, u32::MAX), "ends past the data"),
        ("str_len", put(20, u32::MAX), "ends past the data"),
        ("str_off", put(16, u32::MAX - 2), "ends past the data"),
        ("type_off", put(8, u32::MAX - 2), "ends past the data"),
    ];
    for (name, bytes, expect) in cases {
        let err = read::parse(&bytes, None).unwrap_err().to_string();
        assert!(err.contains(expect), "{name}: {err}");
        refused_by_cli(&format!("hdr_{name}"), &bytes, expect);
    }
}

/// A DATASEC, ARRAY and STRUCT claiming 4 GiB sizes and 2^32-1 elements are read
/// without allocating for them; the validator and dump only do arithmetic on them.
#[test]
fn huge_sizes_are_arithmetic_only() {
    let types = [
        // [1] INT int size 4
        1,
        info(1, 0, false),
        4,
        32,
        // [2] ARRAY int[u32::MAX]
        0,
        info(3, 0, false),
        0,
        1,
        1,
        u32::MAX,
        // [3] ARRAY [2][u32::MAX]: 2^64-ish bytes
        0,
        info(3, 0, false),
        0,
        2,
        1,
        u32::MAX,
        // [4] STRUCT s size u32::MAX { a: [3] at bit u32::MAX }
        5,
        info(4, 1, false),
        u32::MAX,
        7,
        3,
        u32::MAX,
    ];
    let bytes = raw_btf(&types, b"\0int\0s\0a\0");
    let btf = read::parse(&bytes, None).unwrap();
    let problems = validate::validate(&btf);
    assert!(
        !problems.is_empty(),
        "an array of 2^64 bytes must be refused"
    );
    let text = String::from_utf8(dump::dump_to_vec(&btf)).unwrap();
    assert!(text.contains("nr_elems=4294967295"), "{text}");
    let dir = scratch("huge_sizes");
    let f = dir.join("huge.btf");
    std::fs::write(&f, &bytes).unwrap();
    let out = run_limited(&[Path::new("validate"), &f]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let out = run_limited(&[Path::new("dump"), Path::new("--no-validate"), &f]);
    assert!(out.status.success(), "{out:?}");
}

/// Deep chains: 200,000 CONSTs over one INT, 200,000 structs each holding the next,
/// and a 200,000-long pointer loop. Validation, dump and write must not recurse per
/// link: they run here on a thread with a 256 KiB stack.
#[test]
fn deep_chains_use_bounded_stack() {
    const N: u32 = 200_000;
    let int_name = StrOffset(1);
    let build = |f: &dyn Fn(&mut Btf, u32)| {
        let mut b = Btf::new(None);
        b.push_str(b"int");
        b.push_type(Type {
            name: int_name,
            kind: TypeKind::int(32, 1),
        });
        for i in 0..N {
            f(&mut b, i);
        }
        b
    };
    let consts = build(&|b, i| {
        b.push_type(Type {
            name: StrOffset::EMPTY,
            kind: TypeKind::Const(TypeId(i + 1)),
        });
    });
    let nested = build(&|b, i| {
        let s = b.push_str(format!("s{i}").as_bytes());
        b.push_type(Type {
            name: s,
            kind: TypeKind::Struct(dwarf2btf::btf::Composite {
                size: 4,
                kflag: false,
                members: vec![dwarf2btf::btf::Member {
                    name: StrOffset::EMPTY,
                    type_id: TypeId(i + 1),
                    offset: 0,
                }],
            }),
        });
    });
    // PTR i+2 -> i+3 ... and the last back to the first: a loop with no concrete type.
    let ptr_loop = build(&|b, i| {
        let next = if i + 1 == N { 2 } else { i + 3 };
        b.push_type(Type {
            name: StrOffset::EMPTY,
            kind: TypeKind::Ptr(TypeId(next)),
        });
    });
    // STRUCTs each holding the next and the last holding the first: a value loop.
    let value_loop = build(&|b, i| {
        let next = if i + 1 == N { 2 } else { i + 3 };
        b.push_type(Type {
            name: StrOffset::EMPTY,
            kind: TypeKind::Struct(dwarf2btf::btf::Composite {
                size: 4,
                kflag: false,
                members: vec![dwarf2btf::btf::Member {
                    name: StrOffset::EMPTY,
                    type_id: TypeId(next),
                    offset: 0,
                }],
            }),
        });
    });
    let started = std::time::Instant::now();
    let verdicts = on_small_stack(256, move || {
        let mut verdicts = Vec::new();
        for b in [consts, nested, ptr_loop, value_loop] {
            let bytes = write::to_bytes(&b);
            let again = read::parse(&bytes, None).unwrap();
            assert_eq!(again.types().len(), N as usize + 1);
            let problems = validate::validate(&again);
            let _ = dump::dump_to_vec(&again);
            verdicts.push(problems.iter().any(|p| p.to_string().contains("loop")));
        }
        verdicts
    });
    assert_eq!(
        verdicts,
        [false, false, true, true],
        "loops found where expected"
    );
    // Linear work takes well under a second per chain; a walk per type along its
    // chain (quadratic) took minutes here.
    let took = started.elapsed();
    assert!(
        took.as_secs() < 60,
        "deep chains took {took:?}: superlinear validation?"
    );
}

/// An ELF whose `.BTF` is an SHF_COMPRESSED section whose header claims 2^40 or 4 GiB
/// of uncompressed data: refused with a message, within the memory limit.
#[test]
fn compressed_btf_section_with_huge_claimed_size() {
    let btf = raw_btf(&[1, info(1, 0, false), 4, 32], b"\0int\0");
    for (name, claim) in [
        ("1tib", 1u64 << 40),
        ("4gib", 1u64 << 32),
        ("max", u64::MAX),
    ] {
        let elf = elf_with_compressed_btf(&btf, claim);
        let dir = scratch(&format!("zbtf_{name}"));
        let f = dir.join("z.o");
        std::fs::write(&f, &elf).unwrap();
        for mode in ["dump", "validate"] {
            let out = run_limited(&[Path::new(mode), &f]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let ctx = format!("{mode} {name}: exit {:?}: {stderr}", out.status.code());
            assert_eq!(out.status.code(), Some(1), "{ctx}");
            assert!(stderr.contains(&f.display().to_string()), "{ctx}");
            assert!(stderr.contains(".BTF"), "{ctx}");
        }
    }
    // The same ELF with the true size reads fine: the failures above are the claims.
    let elf = elf_with_compressed_btf(&btf, btf.len() as u64);
    let dir = scratch("zbtf_ok");
    let f = dir.join("z.o");
    std::fs::write(&f, &elf).unwrap();
    let out = run_limited(&[Path::new("dump"), &f]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("[1] INT 'int'"));
}

/// A minimal ELF64 LE relocatable: sections null, .BTF (SHF_COMPRESSED, zlib, with a
/// header claiming `claim` bytes), .shstrtab.
fn elf_with_compressed_btf(btf: &[u8], claim: u64) -> Vec<u8> {
    let zdata = zlib_stored(btf);
    let mut sec = Vec::new();
    // Elf64_Chdr: ch_type = ELFCOMPRESS_ZLIB (1), reserved, ch_size, ch_addralign.
    sec.extend_from_slice(&1u32.to_le_bytes());
    sec.extend_from_slice(&0u32.to_le_bytes());
    sec.extend_from_slice(&claim.to_le_bytes());
    sec.extend_from_slice(&4u64.to_le_bytes());
    sec.extend_from_slice(&zdata);
    let shstr = b"\0.BTF\0.shstrtab\0";
    let btf_off = 64u64;
    let shstr_off = btf_off + sec.len() as u64;
    let shoff = (shstr_off + shstr.len() as u64 + 7) & !7;
    let mut e = Vec::new();
    e.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    e.extend_from_slice(&1u16.to_le_bytes()); // ET_REL
    e.extend_from_slice(&62u16.to_le_bytes()); // x86-64
    e.extend_from_slice(&1u32.to_le_bytes());
    e.extend_from_slice(&0u64.to_le_bytes()); // entry
    e.extend_from_slice(&0u64.to_le_bytes()); // phoff
    e.extend_from_slice(&shoff.to_le_bytes());
    e.extend_from_slice(&0u32.to_le_bytes()); // flags
    for h in [64u16, 0, 0, 64, 3, 2] {
        e.extend_from_slice(&h.to_le_bytes());
    }
    e.extend_from_slice(&sec);
    e.extend_from_slice(shstr);
    e.resize(usize::try_from(shoff).unwrap(), 0);
    let shdr = |e: &mut Vec<u8>, name: u32, ty: u32, flags: u64, off: u64, size: u64| {
        e.extend_from_slice(&name.to_le_bytes());
        e.extend_from_slice(&ty.to_le_bytes());
        for w in [flags, 0, off, size] {
            e.extend_from_slice(&w.to_le_bytes());
        }
        e.extend_from_slice(&0u32.to_le_bytes());
        e.extend_from_slice(&0u32.to_le_bytes());
        e.extend_from_slice(&1u64.to_le_bytes());
        e.extend_from_slice(&0u64.to_le_bytes());
    };
    shdr(&mut e, 0, 0, 0, 0, 0);
    const SHF_COMPRESSED: u64 = 0x800;
    shdr(&mut e, 1, 1, SHF_COMPRESSED, btf_off, sec.len() as u64);
    shdr(&mut e, 6, 3, 0, shstr_off, shstr.len() as u64);
    e
}

/// zlib framing around stored (uncompressed) deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut z = vec![0x78, 0x01];
    let chunks: Vec<&[u8]> = data.chunks(65535).collect();
    for (i, c) in chunks.iter().enumerate() {
        z.push((i + 1 == chunks.len()) as u8);
        z.extend_from_slice(&(u16::try_from(c.len()).unwrap()).to_le_bytes());
        z.extend_from_slice(&(!(u16::try_from(c.len()).unwrap())).to_le_bytes());
        z.extend_from_slice(c);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + x as u32) % 65521;
        b = (b + a) % 65521;
    }
    z.extend_from_slice(&(b << 16 | a).to_be_bytes());
    z
}

/// Dedup on deep chains (200,000 CONSTs; 200,000 pointers each to the previous;
/// 200,000 named structs each holding the previous; 300 anonymous ones), twice over so every type has a twin to
/// merge with, on a thread with a 512 KiB stack: no recursion per link, and the result
/// is valid and has each chain once.
#[test]
fn dedup_deep_chains_use_bounded_stack() {
    const N: u32 = 200_000;
    let build = |kind: fn(u32) -> TypeKind, n: u32, named: bool| {
        let mut b = Btf::new(None);
        let int = b.push_str(b"int");
        for _copy in 0..2 {
            let first = b.push_type(Type {
                name: int,
                kind: TypeKind::int(32, 1),
            });
            for i in 0..n {
                let k = kind(first.0 + i);
                let name = if named {
                    b.push_str(format!("s{i}").as_bytes())
                } else {
                    StrOffset::EMPTY
                };
                b.push_type(Type { name, kind: k });
            }
        }
        b
    };
    let consts = build(|prev| TypeKind::Const(TypeId(prev)), N, false);
    let ptrs = build(|prev| TypeKind::Ptr(TypeId(prev)), N, false);
    let nest = |prev| {
        TypeKind::Struct(dwarf2btf::btf::Composite {
            size: 4,
            kflag: false,
            members: vec![dwarf2btf::btf::Member {
                name: StrOffset::EMPTY,
                type_id: TypeId(prev),
                offset: 0,
            }],
        })
    };
    let nested = build(nest, N, true);
    // Anonymous look-alike structs all share one hash bucket: libbpf's algorithm (and
    // ours, which follows it) is then about cubic in the chain length (2,000 deep:
    // libbpf 74 s, ours 47 s), so this one stays short.
    let anon = build(nest, 300, false);
    let started = std::time::Instant::now();
    let counts = on_small_stack(512, move || {
        let mut counts = Vec::new();
        for b in [consts, ptrs, nested, anon] {
            assert!(validate::validate(&b).is_empty());
            let out = dwarf2btf::dedup::dedup(&b).expect("dedup");
            let problems = validate::validate(&out);
            assert!(
                problems.is_empty(),
                "{:?}",
                &problems[..problems.len().min(3)]
            );
            counts.push(out.types().len());
        }
        counts
    });
    assert_eq!(
        counts,
        [N as usize + 1, N as usize + 1, N as usize + 1, 301]
    );
    let took = started.elapsed();
    assert!(took.as_secs() < 120, "dedup of deep chains took {took:?}");
}
