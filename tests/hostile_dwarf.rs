//! Hostile DWARF through the encoder (`dwarf2btf -J --btf_encode_detached=OUT FILE`):
//! small C programs compiled with gcc, then `.debug_info` patched by hand (type
//! references looping back to themselves, dangling, into the unit header; a name
//! offset 4 GiB into `.debug_str`; a unit claiming more bytes than the section) and
//! programs with huge sizes and deep type chains. Each run must end within a time
//! limit, inside an address-space limit, without a panic, and either fail with a
//! message naming the file and leave no output, or succeed with valid BTF.

mod common;
use common::skip;

use dwarf2btf::btf::validate;
use gimli::{EndianSlice, LittleEndian};
use object::{Object, ObjectSection};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Address space for one encoder run, in KiB.
const VM_LIMIT_KIB: u64 = 1024 * 1024;
/// Wall time for one encoder run.
const TIME_LIMIT: Duration = Duration::from_secs(60);

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("hostile_dwarf/{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles and links `src` with gcc (DWARF 4, -O0) into `dir`; None if gcc is absent.
fn build(dir: &Path, name: &str, src: &str, extra: &[&str]) -> Option<PathBuf> {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let out = dir.join(name);
    let res = Command::new("gcc")
        .args(["-g", "-gdwarf-4", "-O0"])
        .args(extra)
        .arg(&c)
        .arg("-o")
        .arg(&out)
        .output();
    match res {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => panic!("gcc {name}: {}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => {
            skip(&format!("gcc, for {name}"));
            None
        }
    }
}

/// What one run did.
enum Outcome {
    Failed(String),
    Encoded(String),
    /// Exit 0 with BTF the validator refuses: a bug.
    Invalid(String),
}

/// Runs the encoder on `input` under the limits and checks the common rules.
fn encode(input: &Path) -> Outcome {
    let dir = input.parent().unwrap();
    let out = dir.join(format!(
        "{}.btf",
        input.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&out);
    let before = listing(dir);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {VM_LIMIT_KIB} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_dwarf2btf"))
        .args(["-J", "-j2"])
        .arg("--btf_features=encode_force,var,float,enum64,decl_tag,type_tag")
        .arg(format!("--btf_encode_detached={}", out.display()))
        .arg(input)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            panic!("{}: still running after {TIME_LIMIT:?}", input.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let ctx = format!("{}: exit {:?}: {stderr}", input.display(), status.code());
    assert!(status.code().is_some(), "{ctx}\nkilled by a signal");
    assert!(!stderr.contains("panicked at"), "{ctx}");
    if status.success() {
        let bytes = std::fs::read(&out).unwrap_or_else(|e| panic!("{ctx}\nno output: {e}"));
        if let Err(e) = validate::parse_checked(&bytes, None) {
            return Outcome::Invalid(format!("{ctx}\nthe output is not valid BTF: {e}"));
        }
        Outcome::Encoded(stderr)
    } else {
        assert_eq!(status.code(), Some(1), "{ctx}");
        assert!(
            stderr.contains(&input.display().to_string()),
            "{ctx}\nthe message does not name the file"
        );
        assert_eq!(listing(dir), before, "{ctx}\nfiles left behind");
        Outcome::Failed(stderr)
    }
}

fn listing(dir: &Path) -> Vec<std::ffi::OsString> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    v.sort();
    v
}

/// One attribute value in `.debug_info`: where it is in the file and its DIE.
#[derive(Debug, Clone, Copy)]
struct AttrAt {
    /// The DIE's offset in the section.
    die: u64,
    /// The DIE's tag.
    tag: gimli::DwTag,
    /// The parent DIE's offset in the section (0 for a unit's root).
    parent: u64,
    /// The attribute and its form.
    name: gimli::DwAt,
    form: gimli::DwForm,
    /// Offset of the attribute's value in the file.
    file_off: u64,
    /// Offset of the unit in the section.
    unit: u64,
}

/// Every attribute of every DIE in the (little-endian ELF64) file's `.debug_info`.
fn attributes(elf: &[u8]) -> Vec<AttrAt> {
    let obj = object::File::parse(elf).unwrap();
    let sec = |n: &str| {
        obj.section_by_name(n)
            .map(|s| s.data().unwrap())
            .unwrap_or(&[])
    };
    let info_file_off = obj
        .section_by_name(".debug_info")
        .unwrap()
        .file_range()
        .unwrap()
        .0;
    let dwarf = gimli::Dwarf::load(|id| -> Result<_, gimli::Error> {
        Ok(EndianSlice::new(sec(id.name()), LittleEndian))
    })
    .unwrap();
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Some(h) = units.next().unwrap() {
        let unit_off = h.offset().as_debug_info_offset().unwrap().0 as u64;
        let abbrevs = dwarf.abbreviations(&h).unwrap();
        let mut raw = h.entries_raw(&abbrevs, None).unwrap();
        let mut parents: Vec<u64> = Vec::new();
        while !raw.is_empty() {
            let die = unit_off + raw.next_offset().0 as u64;
            let Some(abbrev) = raw.read_abbreviation().unwrap() else {
                parents.pop();
                continue;
            };
            let parent = parents.last().copied().unwrap_or(0);
            for spec in abbrev.attributes() {
                let at = unit_off + raw.next_offset().0 as u64;
                raw.read_attribute(*spec).unwrap();
                out.push(AttrAt {
                    die,
                    tag: abbrev.tag(),
                    parent,
                    name: spec.name(),
                    form: spec.form(),
                    file_off: info_file_off + at,
                    unit: unit_off,
                });
            }
            if abbrev.has_children() {
                parents.push(die);
            }
        }
    }
    out
}

/// The first `attr` of a DIE with tag `tag`.
fn find(attrs: &[AttrAt], tag: gimli::DwTag, attr: gimli::DwAt) -> AttrAt {
    *attrs
        .iter()
        .find(|a| a.tag == tag && a.name == attr)
        .unwrap_or_else(|| panic!("no {tag} with {attr}"))
}

/// Writes a copy of `elf` with the 4-byte value at `at.file_off` replaced.
fn patched(elf: &Path, name: &str, at: AttrAt, value: u32) -> PathBuf {
    let mut bytes = std::fs::read(elf).unwrap();
    assert!(
        matches!(at.form, gimli::DW_FORM_ref4 | gimli::DW_FORM_strp),
        "{at:?}: only 4-byte forms are patched"
    );
    let o = usize::try_from(at.file_off).unwrap();
    bytes[o..o + 4].copy_from_slice(&value.to_le_bytes());
    let p = elf.with_file_name(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

const TYPES_C: &str = r#"
typedef int myint;
struct node { myint v; struct node *next; const volatile long cv; };
struct node g_node;
myint g_int;
int main(void) { return g_node.v + g_int; }
"#;

/// A patched copy of the test program for each hostile `.debug_info` edit.
fn patched_cases(dir: &Path) -> Option<Vec<(&'static str, PathBuf)>> {
    let elf = build(dir, "types", TYPES_C, &[])?;
    assert!(
        matches!(encode(&elf), Outcome::Encoded(_)),
        "the unpatched program"
    );
    let attrs = attributes(&std::fs::read(&elf).unwrap());
    let rel = |a: &AttrAt, die: u64| u32::try_from(die - a.unit).unwrap();
    let typedef = find(&attrs, gimli::DW_TAG_typedef, gimli::DW_AT_type);
    let ptr = find(&attrs, gimli::DW_TAG_pointer_type, gimli::DW_AT_type);
    let member = find(&attrs, gimli::DW_TAG_member, gimli::DW_AT_type);
    let volatile = find(&attrs, gimli::DW_TAG_volatile_type, gimli::DW_AT_type);
    let konst = find(&attrs, gimli::DW_TAG_const_type, gimli::DW_AT_type);
    let name = find(&attrs, gimli::DW_TAG_typedef, gimli::DW_AT_name);
    let cases = [
        ("typedef_self", typedef, rel(&typedef, typedef.die)),
        ("pointer_self", ptr, rel(&ptr, ptr.die)),
        ("member_is_its_struct", member, rel(&member, member.parent)),
        ("const_volatile_loop", volatile, rel(&volatile, konst.die)),
        ("dangling_ref", typedef, 0x7fff_fff0),
        ("ref_into_header", typedef, 1),
        ("name_past_debug_str", name, 0xffff_fff0),
    ];
    Some(
        cases
            .into_iter()
            .map(|(case, at, value)| (case, patched(&elf, case, at, value)))
            .collect(),
    )
}

/// The patched cases the encoder gives valid BTF for, or refuses cleanly: a
/// pointer to itself, a const → volatile → const loop, a name 4 GiB into
/// `.debug_str`. (The others are in `patched_debug_info_known_invalid`.)
#[test]
fn patched_debug_info() {
    let dir = scratch("patched");
    let Some(cases) = patched_cases(&dir) else {
        return;
    };
    for (case, p) in cases {
        if KNOWN_INVALID.contains(&case) {
            continue;
        }
        match encode(&p) {
            Outcome::Failed(msg) => println!("{case}: refused: {}", msg.trim()),
            Outcome::Encoded(warn) => println!("{case}: encoded; {}", warn.trim()),
            Outcome::Invalid(msg) => panic!("{case}: {msg}"),
        }
    }
}

/// Cases that once encoded, with exit 0 and no warning, to BTF the kernel refuses: a
/// typedef of itself and a struct member of its own struct (a value loop), a type
/// reference past the unit or into its header (a typedef of nothing, then a member
/// without size). The output is now validated before it is written, so each must
/// fail cleanly (or, if the encoder learns to skip them, encode to valid BTF).
const KNOWN_INVALID: [&str; 4] = [
    "typedef_self",
    "member_is_its_struct",
    "dangling_ref",
    "ref_into_header",
];

#[test]
fn patched_debug_info_known_invalid() {
    let dir = scratch("patched_known_invalid");
    let Some(cases) = patched_cases(&dir) else {
        return;
    };
    let mut bad = Vec::new();
    for (case, p) in cases {
        if KNOWN_INVALID.contains(&case) {
            if let Outcome::Invalid(msg) = encode(&p) {
                bad.push(msg);
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The known-invalid cases whose types reach BTF are refused by the check of the
/// output, which with several workers runs while the file is written: at every `-j`
/// the same message, an existing output left as it was, no temporary file, and the
/// input untouched when the BTF would go into it.
#[test]
fn invalid_output_is_refused_at_every_jobs_count() {
    let dir = scratch("invalid_output");
    let Some(cases) = patched_cases(&dir) else {
        return;
    };
    let mut refused = 0;
    for (case, p) in cases.iter().filter(|(c, _)| KNOWN_INVALID.contains(c)) {
        let out = dir.join(format!("{case}.old.btf"));
        std::fs::write(&out, b"old output").unwrap();
        let input_before = std::fs::read(p).unwrap();
        let mut messages = Vec::new();
        for jobs in ["-j1", "-j2", "-j4"] {
            for detached in [true, false] {
                let before = listing(&dir);
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_dwarf2btf"));
                cmd.args(["-J", jobs, "--btf_features=encode_force,var,type_tag"]);
                if detached {
                    cmd.arg(format!("--btf_encode_detached={}", out.display()));
                }
                let o = cmd.arg(p).output().unwrap();
                let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
                assert_eq!(o.status.code(), Some(1), "{case} {jobs}: {stderr}");
                assert_eq!(listing(&dir), before, "{case} {jobs}: files left behind");
                assert_eq!(std::fs::read(&out).unwrap(), b"old output", "{case} {jobs}");
                assert_eq!(std::fs::read(p).unwrap(), input_before, "{case} {jobs}");
                messages.push(stderr);
            }
        }
        if messages[0].contains("encodes to invalid BTF, nothing written") {
            refused += 1;
        }
        assert!(
            messages.iter().all(|m| *m == messages[0]),
            "{case}: {messages:#?}"
        );
    }
    // typedef_self, member_is_its_struct and ref_into_header reach the check.
    assert!(
        refused >= 3,
        "{refused} cases refused by the check of the output"
    );
}

/// A unit whose length runs past the section, and a section cut short.
#[test]
fn truncated_debug_info() {
    let dir = scratch("truncated");
    let Some(elf) = build(&dir, "types", TYPES_C, &[]) else {
        return;
    };
    let bytes = std::fs::read(&elf).unwrap();
    let obj = object::File::parse(&*bytes).unwrap();
    let (off, len) = obj
        .section_by_name(".debug_info")
        .unwrap()
        .file_range()
        .unwrap();
    let (off, len) = (usize::try_from(off).unwrap(), u32::try_from(len).unwrap());
    let mut long_unit = bytes.clone();
    long_unit[off..off + 4].copy_from_slice(&(len * 4).to_le_bytes());
    let p = dir.join("long_unit");
    std::fs::write(&p, long_unit).unwrap();
    assert!(
        matches!(encode(&p), Outcome::Failed(_)),
        "unit past the section"
    );
    // The section header's size cut to half: units end mid-DIE.
    let shdr = section_header_offset(&bytes, ".debug_info");
    let mut half = bytes.clone();
    half[shdr + 32..shdr + 40].copy_from_slice(&(u64::from(len) / 2).to_le_bytes());
    let p = dir.join("half_section");
    std::fs::write(&p, half).unwrap();
    let _ = encode(&p);
}

/// File offset of the ELF64 section header of `name`.
fn section_header_offset(elf: &[u8], name: &str) -> usize {
    let obj = object::File::parse(elf).unwrap();
    let idx = obj.section_by_name(name).unwrap().index().0;
    let shoff = usize::try_from(u64::from_le_bytes(elf[0x28..0x30].try_into().unwrap())).unwrap();
    shoff + idx * 64
}

/// Sizes past u32: a 2^40-element array, a struct of 2^33 bytes, a member past 4 GiB.
/// BTF cannot hold them; the encoder must not allocate by them and must give valid
/// BTF or a clean error.
#[test]
fn huge_sizes() {
    let dir = scratch("huge");
    let src = r#"
struct big { char a[1UL << 40]; int after; };
struct big2 { char a[1UL << 33]; };
struct big *p1; struct big2 *p2;
extern char huge_arr[1UL << 40];
char (*hp)[1UL << 40] = &huge_arr;
int main(void) { return 0; }
"#;
    let Some(elf) = build(&dir, "huge", src, &["-c"]) else {
        return;
    };
    let _ = encode(&elf);
}

/// Deep chains: 20,000 typedefs each of the previous, and a pointer with 3,000 stars.
/// The encoder must not recurse per link.
#[test]
fn deep_chains() {
    let dir = scratch("deep");
    let mut src = String::from("typedef int t0;\n");
    for i in 1..20_000 {
        src.push_str(&format!("typedef t{} t{i};\n", i - 1));
    }
    src.push_str("t19999 *gp;\n");
    src.push_str(&format!("int {}stars;\n", "*".repeat(3000)));
    let Some(elf) = build(&dir, "deep", &src, &["-c"]) else {
        return;
    };
    assert!(matches!(encode(&elf), Outcome::Encoded(_)), "deep chains");
}
