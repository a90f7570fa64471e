//! Encodes small C programs of our own (tests/fixtures/*.c), compiled by gcc and
//! clang at -O0 and -O2 (and gcc with DWARF 4, whose bitfields use the old
//! DW_AT_bit_offset), and checks the exact BTF produced against
//! tests/fixtures/*.CC.expected.
//!
//! The check is independent of type ids: every named type is printed with the
//! types it refers to spelled out (named structs, unions and typedefs by name), one
//! line per type, sorted. Set `DWARF2BTF_BLESS=1` to rewrite the expected files.

mod common;
use common::skip;

use dwarf2btf::btf::{Btf, StrOffset, TypeId, TypeKind};
use dwarf2btf::encode::Features;
use dwarf2btf::pipeline::{encode_file, Options};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Compiles `src` with `cc args` into a temporary object; None if `cc` is missing.
fn compile(cc: &str, args: &[&str], src: &Path, tag: &str) -> Option<PathBuf> {
    let out = std::env::temp_dir().join(format!(
        "dwarf2btf-fixture-{}-{}-{tag}.o",
        std::process::id(),
        src.file_stem().unwrap().to_string_lossy()
    ));
    let status = Command::new(cc)
        .args(args)
        .args(["-g", "-c", "-o"])
        .arg(&out)
        .arg(src)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("{cc} {args:?} failed on {}: {s}", src.display()),
        Err(_) => {
            skip(&format!("{cc} is not installed"));
            None
        }
    }
}

fn encode(obj: &Path, features: Features) -> Btf {
    encode_file(&Options {
        input: obj.to_path_buf(),
        btf_base: None,
        detached: None,
        features,
        lang_exclude: vec![],
        jobs: 1,
    })
    .unwrap_or_else(|e| panic!("encoding {}: {e}", obj.display()))
}

fn name(btf: &Btf, id: TypeId) -> String {
    btf.get(id)
        .map(|t| btf.str_at(t.name).into_owned())
        .unwrap_or_default()
}

/// A type as text; named composites, enums and typedefs below the top are
/// written by name only.
fn show(btf: &Btf, id: TypeId, top: bool) -> String {
    if id == TypeId::VOID {
        return "void".into();
    }
    let Some(t) = btf.get(id) else {
        return format!("<bad id {id}>");
    };
    let n = btf.str_at(t.name);
    let named = !n.is_empty();
    match &t.kind {
        TypeKind::Int { .. } => {
            let (size, encoding, offset, bits) = t.kind.int_fields().unwrap_or_default();
            format!("int '{n}' size={size} enc={encoding} off={offset} bits={bits}")
        }
        TypeKind::Float { size } => format!("float '{n}' size={size}"),
        TypeKind::Ptr(to) => format!("*({})", show(btf, *to, false)),
        TypeKind::Const(to) => format!("const({})", show(btf, *to, false)),
        TypeKind::Volatile(to) => format!("volatile({})", show(btf, *to, false)),
        TypeKind::Restrict(to) => format!("restrict({})", show(btf, *to, false)),
        TypeKind::TypeTag { type_id, kflag } => {
            format!(
                "type_tag '{n}' kflag={kflag} ({})",
                show(btf, *type_id, false)
            )
        }
        TypeKind::Typedef(to) if top => format!("typedef '{n}' = {}", show(btf, *to, false)),
        TypeKind::Typedef(_) => format!("typedef '{n}'"),
        TypeKind::Fwd { union } => format!("fwd '{n}' union={union}"),
        TypeKind::Array {
            elem_type,
            index_type,
            nelems,
        } => format!(
            "[{nelems}; index {}]({})",
            show(btf, *index_type, false),
            show(btf, *elem_type, false)
        ),
        TypeKind::Struct(c) | TypeKind::Union(c) => {
            let what = if matches!(t.kind, TypeKind::Struct(_)) {
                "struct"
            } else {
                "union"
            };
            if named && !top {
                return format!("{what} '{n}'");
            }
            let members: Vec<String> = c
                .members
                .iter()
                .map(|m| {
                    format!(
                        "{}@{}:{} {}",
                        btf.str_at(m.name),
                        m.bit_offset(c.kflag),
                        m.bitfield_size(c.kflag),
                        show(btf, m.type_id, false)
                    )
                })
                .collect();
            format!(
                "{what} '{n}' size={} kflag={} {{{}}}",
                c.size,
                c.kflag,
                members.join(", ")
            )
        }
        TypeKind::Enum {
            size,
            signed,
            values,
        } => {
            let v: Vec<_> = values
                .iter()
                .map(|v| (v.name, u64::from(v.value)))
                .collect();
            enum_line("enum", &n, named && !top, *size, *signed, &v, btf)
        }
        TypeKind::Enum64 {
            size,
            signed,
            values,
        } => {
            let v: Vec<_> = values.iter().map(|v| (v.name, v.value)).collect();
            enum_line("enum64", &n, named && !top, *size, *signed, &v, btf)
        }
        TypeKind::FuncProto { ret, params } => {
            let p: Vec<String> = params
                .iter()
                .map(|p| format!("{}:{}", btf.str_at(p.name), show(btf, p.type_id, false)))
                .collect();
            format!("fn({}) -> {}", p.join(", "), show(btf, *ret, false))
        }
        TypeKind::DeclTag {
            type_id,
            component_idx,
            kflag,
        } => format!(
            "decl_tag '{n}' on {} '{}' component={component_idx} kflag={kflag}",
            btf.get(*type_id).map_or("?", |t| t.kind().name()),
            name(btf, *type_id)
        ),
        other => format!("{:?}", other.kind()),
    }
}

/// An ENUM or ENUM64 (`kw`) as `show` writes it: by name only when `by_name`.
fn enum_line(
    kw: &str,
    n: &str,
    by_name: bool,
    size: u32,
    signed: bool,
    values: &[(StrOffset, u64)],
    btf: &Btf,
) -> String {
    if by_name {
        return format!("{kw} '{n}'");
    }
    let v: Vec<String> = values
        .iter()
        .map(|(name, value)| format!("{}={value:#x}", btf.str_at(*name)))
        .collect();
    format!(
        "{kw} '{n}' size={size} signed={signed} {{{}}}",
        v.join(", ")
    )
}

/// Every named type (and every decl tag) of `btf`, one line each, sorted.
fn render(btf: &Btf) -> String {
    let mut lines = BTreeSet::new();
    for i in 0..u32::try_from(btf.types().len()).unwrap() {
        let id = TypeId(btf.first_id().0 + i);
        let t = btf.get(id).unwrap();
        if !btf.str_at(t.name).is_empty() {
            lines.insert(show(btf, id, true));
        }
    }
    lines.into_iter().collect::<Vec<_>>().join("\n") + "\n"
}

/// Checks `fixture` compiled each way against `STEM.CC.expected` (gcc and clang
/// name base types differently, so each compiler has its own file; all its
/// variants must give the same BTF), or `STEM.CC-ARCH.expected` for a
/// `--target=ARCH-…` (targets differ in the signedness of `char`).
fn check(fixture: &str, variants: &[(&str, &[&str])]) {
    let src = fixtures().join(fixture);
    let stem = src.file_stem().unwrap().to_string_lossy().into_owned();
    let mut ran = 0;
    let mut blessed = std::collections::HashSet::new();
    for (cc, args) in variants {
        let key = match args.iter().find_map(|a| a.strip_prefix("--target=")) {
            Some(t) => format!("{cc}-{}", t.split('-').next().unwrap_or(t)),
            None => cc.to_string(),
        };
        let exp_path = fixtures().join(format!("{stem}.{key}.expected"));
        let Some(obj) = compile(cc, args, &src, &format!("{cc}{}", args.join(""))) else {
            continue;
        };
        let btf = encode(&obj, Features::from_list("default"));
        let _ = std::fs::remove_file(&obj);
        let got = render(&btf);
        if std::env::var_os("DWARF2BTF_BLESS").is_some() && blessed.insert(key.clone()) {
            std::fs::write(&exp_path, &got).unwrap();
        }
        let want = std::fs::read_to_string(&exp_path).unwrap();
        assert_eq!(got, want, "{fixture} compiled with {cc} {args:?}");
        ran += 1;
    }
    println!("{fixture}: {ran} compiler variants checked");
}

#[test]
fn types_fixture_exact_btf() {
    check(
        "types.c",
        &[
            ("gcc", &["-O0"]),
            ("gcc", &["-O2"]),
            ("gcc", &["-O2", "-gdwarf-4"]),
            ("clang", &["-O0"]),
            ("clang", &["-O2"]),
            ("clang", &["-O2", "-gdwarf-4"]),
            // Big-endian, with big-endian relocations and old-style bit offsets.
            ("clang", &["-O2", "--target=s390x-linux-gnu"]),
            ("clang", &["-O2", "-gdwarf-4", "--target=s390x-linux-gnu"]),
        ],
    );
}

#[test]
fn type_and_decl_tags_with_clang() {
    check("tags.c", &[("clang", &["-O0"]), ("clang", &["-O2"])]);
}

#[test]
fn features_switch_kinds_off() {
    let Some(obj) = compile("gcc", &["-O0"], &fixtures().join("types.c"), "features") else {
        return;
    };
    // Without `float` and `enum64`: floats become INTs without encoding, 64-bit
    // enums become ENUMs of size 8 with truncated, unsigned values.
    let btf = encode(&obj, Features::from_list("var"));
    let _ = std::fs::remove_file(&obj);
    let text = render(&btf);
    assert!(
        text.contains("int 'double' size=8 enc=0 off=0 bits=64"),
        "{text}"
    );
    assert!(
        text.contains("enum 'big' size=8 signed=false {B_A=0x1, B_B=0x0}"),
        "{text}"
    );
    assert!(
        text.contains("enum 'sbig' size=8 signed=false {SB_A=0xffffffff, SB_B=0x0}"),
        "{text}"
    );
    assert!(!text.contains("float '"), "{text}");
}

#[test]
fn tags_off_without_features() {
    let Some(obj) = compile("clang", &["-O0"], &fixtures().join("tags.c"), "notags") else {
        return;
    };
    let btf = encode(&obj, Features::from_list("float"));
    let _ = std::fs::remove_file(&obj);
    let text = render(&btf);
    assert!(
        !text.contains("type_tag") && !text.contains("decl_tag"),
        "{text}"
    );
    assert!(text.contains("p@0:0 *(int 'int'"), "{text}");
}

/// `--lang_exclude` drops whole units by `DW_AT_language` (gcc 12 says C11).
#[test]
fn lang_exclude_drops_units() {
    let Some(obj) = compile(
        "gcc",
        &["-O0", "-std=gnu17"],
        &fixtures().join("types.c"),
        "lang",
    ) else {
        return;
    };
    let run = |langs: &[&str]| {
        encode_file(&Options {
            input: obj.clone(),
            btf_base: None,
            detached: None,
            features: Features::from_list("default"),
            lang_exclude: langs
                .iter()
                .map(|l| dwarf2btf::dwarf::lang_code(l).unwrap())
                .collect(),
            jobs: 1,
        })
        .unwrap()
    };
    let kept = run(&["rust"]);
    let dropped = run(&["rust", "c11"]);
    let _ = std::fs::remove_file(&obj);
    assert!(kept.types().len() > 40, "{}", kept.types().len());
    assert_eq!(dropped.types().len(), 0);
}

/// Compressed debug sections (SHF_COMPRESSED, zlib and zstd) give the same BTF.
#[test]
fn compressed_sections_same_btf() {
    let Some(obj) = compile("gcc", &["-O2"], &fixtures().join("types.c"), "compress") else {
        return;
    };
    let plain = render(&encode(&obj, Features::from_list("default")));
    for kind in ["zlib", "zstd"] {
        let out = obj.with_extension(format!("{kind}.o"));
        let ok = Command::new("objcopy")
            .arg(format!("--compress-debug-sections={kind}"))
            .arg(&obj)
            .arg(&out)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            skip(&format!("objcopy cannot compress with {kind}"));
            continue;
        }
        let data = std::fs::read(&out).unwrap();
        let f = object::File::parse(&*data).unwrap();
        let sec = object::Object::section_by_name(&f, ".debug_info").unwrap();
        let compressed = object::ObjectSection::compressed_file_range(&sec).unwrap();
        assert_ne!(compressed.format, object::CompressionFormat::None, "{kind}");
        let got = render(&encode(&out, Features::from_list("default")));
        let _ = std::fs::remove_file(&out);
        assert_eq!(got, plain, "{kind}");
    }
    let _ = std::fs::remove_file(&obj);
}

/// clang's BPF backend writes its own BTF for the same source: our type tag chains,
/// decl tags and struct must read the same as LLVM's.
#[test]
fn type_tags_match_llvm_bpf_btf() {
    let src = fixtures().join("tags.c");
    let Some(host) = compile("clang", &["-O2"], &src, "llvm-host") else {
        return;
    };
    let Some(bpf) = compile("clang", &["-O2", "--target=bpf"], &src, "llvm-bpf") else {
        return;
    };
    let ours = render(&encode(&host, Features::from_list("default")));
    let llvm = render(&dwarf2btf::btf::read::read_file(&bpf, None).unwrap());
    let _ = (std::fs::remove_file(&host), std::fs::remove_file(&bpf));
    let pick = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| {
                l.starts_with("struct 'tagged'")
                    || l.starts_with("type_tag")
                    || l.starts_with("decl_tag")
            })
            .map(str::to_string)
            .collect()
    };
    assert_eq!(pick(&ours), pick(&llvm));
    assert_eq!(pick(&ours).len(), 6);
}
