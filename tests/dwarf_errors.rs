//! An error in one DIE names the file, the unit and the DIE: `examples/sample/sample.o`
//! (shipped, so no tools are needed) with one DIE damaged, through the encoder.

mod common;

use gimli::LittleEndian;
use object::{Object, ObjectSection};
use std::path::{Path, PathBuf};

fn sample() -> PathBuf {
    common::root().join("examples/sample/sample.o")
}

/// Where `.debug_info` lies in the file, and its bytes.
fn debug_info(elf: &[u8]) -> (usize, &[u8]) {
    let file = object::File::parse(elf).unwrap();
    let s = file.section_by_name(".debug_info").unwrap();
    let (start, _) = s.file_range().unwrap();
    (usize::try_from(start).unwrap(), s.data().unwrap())
}

/// Each DIE of the first unit: its `.debug_info` offset, its abbreviation code, and
/// where its `DW_FORM_ref4` `DW_AT_type` value lies (if it has one).
fn dies(elf: &[u8]) -> Vec<(usize, u64, Option<usize>)> {
    let file = object::File::parse(elf).unwrap();
    let sec = |name: &str| file.section_by_name(name).unwrap().data().unwrap();
    let info = gimli::DebugInfo::new(sec(".debug_info"), LittleEndian);
    let abbrev = gimli::DebugAbbrev::new(sec(".debug_abbrev"), LittleEndian);
    let unit = info.units().next().unwrap().unwrap();
    let abbrevs = unit.abbreviations(&abbrev).unwrap();
    let mut raw = unit.entries_raw(&abbrevs, None).unwrap();
    let mut out = Vec::new();
    while !raw.is_empty() {
        let off = raw.next_offset().0;
        let Some(a) = raw.read_abbreviation().unwrap() else {
            continue;
        };
        let mut type_at = None;
        for spec in a.attributes() {
            let at = raw.next_offset().0;
            let attr = raw.read_attribute(*spec).unwrap();
            if attr.name() == gimli::DW_AT_type && spec.form() == gimli::DW_FORM_ref4 {
                type_at = Some(at);
            }
        }
        out.push((off, a.code(), type_at));
    }
    out
}

/// Encodes `input`; asserts that it fails and returns the message.
fn refused(input: &Path, out: &Path) -> String {
    let (ok, _, err) = common::run(
        common::dwarf2btf()
            .arg("-J")
            .arg(format!("--btf_encode_detached={}", out.display()))
            .arg(input),
    );
    assert!(!ok, "encoded damaged DWARF: {err}");
    assert!(!out.exists(), "wrote BTF for damaged DWARF");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn die_errors_name_file_unit_and_die() {
    let dir = common::TempDir::new("dwarf_errors");
    let orig = std::fs::read(sample()).unwrap();
    let (info_at, _) = debug_info(&orig);
    let list = dies(&orig);
    // The unit's offset in .debug_info (the first unit: 0) and its DIEs' offsets are
    // unit offsets too.
    let unit_off = 0;

    // An unknown abbreviation code in the first child of the root.
    let &(die, code, _) = &list[1];
    assert!(code < 0x80, "a one-byte code to overwrite");
    assert!(
        list.iter().all(|d| d.1 != 0x7f),
        "0x7f is not one of the codes"
    );
    let mut bytes = orig.clone();
    bytes[info_at + die] = 0x7f;
    let input = dir.join("bad_abbrev.o");
    std::fs::write(&input, &bytes).unwrap();
    let err = refused(&input, &dir.join("bad_abbrev.btf"));
    let want = format!(
        "{}: DWARF unit 0 at .debug_info+{unit_off:#x}, DIE at .debug_info+{die:#x}: \
         unknown abbreviation code 127",
        input.display()
    );
    assert!(err.contains(&want), "want {want:?} in:\n{err}");

    // A type reference far past the end of its unit.
    let &(die, _, at) = list
        .iter()
        .find(|d| d.2.is_some())
        .expect("a DIE with a ref4 DW_AT_type");
    let mut bytes = orig.clone();
    let at = info_at + at.unwrap();
    bytes[at..at + 4].copy_from_slice(&0x00ff_ff00u32.to_le_bytes());
    let input = dir.join("bad_ref.o");
    std::fs::write(&input, &bytes).unwrap();
    let err = refused(&input, &dir.join("bad_ref.btf"));
    let want = format!(
        "{}: DWARF unit 0 at .debug_info+{unit_off:#x}, DIE at .debug_info+{die:#x}: \
         reference to unit offset 0xffff00, outside its unit",
        input.display()
    );
    assert!(err.contains(&want), "want {want:?} in:\n{err}");
}
