//! DWARF input: the list of compile units of an ELF file and parsing one unit's
//! type DIEs into its arena ([`types::CuTypes`]).
//!
//! Each unit is parsed on its own, from shared read-only section data, so units can
//! be parsed in any order and on any thread; the encoder consumes them in unit order.

#[allow(non_upper_case_globals)] // gimli names DWARF constants as the spec does
pub mod die;
pub mod error;
#[allow(non_upper_case_globals)]
pub mod lto;
pub mod ops;
pub mod types;

// The parser behind `types::parse_cu`: tree walk, DIE → record, attribute
// decoding, locations.
#[allow(non_upper_case_globals)]
mod abbrev;
#[allow(non_upper_case_globals)]
mod attrs;
#[allow(non_upper_case_globals)]
mod locs;
#[allow(non_upper_case_globals)]
mod plan;
#[allow(non_upper_case_globals)]
mod record;
mod units;
#[allow(non_upper_case_globals)]
mod walk;

use crate::elf::ElfInput;
use crate::Error;
use error::{DwarfError, DwarfErrorKind};
use gimli::{EndianSlice, RunTimeEndian};

/// The reader every DWARF section is read through: a slice of the input.
pub type Reader<'a> = EndianSlice<'a, RunTimeEndian>;

/// The DWARF of one input file: its sections and the headers of its units.
pub struct DwarfInput<'a> {
    /// The gimli view of the sections.
    pub dwarf: gimli::Dwarf<Reader<'a>>,
    /// Where the units of `.debug_info` lie, in section order (each header is
    /// read again when its unit is parsed: [`DwarfInput::header`]).
    pub units: Vec<UnitPlace>,
    /// The file, for error messages.
    pub input: &'a ElfInput,
}

/// What the unit list keeps of a unit's header: its offsets in `.debug_info` and in
/// `.debug_abbrev` (both sections are slices in memory). gimli's `UnitHeader` takes
/// about 100 bytes, and a kernel built with several copies of its `.debug_info` has
/// tens of thousands of units, whose headers were a megabyte of the run's peak.
#[derive(Clone, Copy, Debug)]
pub struct UnitPlace {
    /// The unit's offset in `.debug_info`.
    pub info: usize,
    /// Its abbreviation table's offset in `.debug_abbrev`.
    pub abbrev: usize,
}

impl<'a> DwarfInput<'a> {
    /// Loads the sections of `input` and lists its compile units.
    pub fn new(input: &'a ElfInput) -> Result<DwarfInput<'a>, Error> {
        let endian = if input.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let load = |id: gimli::SectionId| -> Result<Reader<'a>, Error> {
            Ok(EndianSlice::new(input.section(id.name()), endian))
        };
        if !input.section(".debug_types").is_empty() {
            // DWARF 4 type units: the units refer to their types by signature.
            return Err(Error::file(
                input.path(),
                "DWARF 4 type units (.debug_types, -fdebug-types-section) are not supported",
            ));
        }
        // No abbreviations cache: gimli fills it by walking every unit header
        // through the mapping, which faults in most of .debug_info at once (see
        // `units`), and compilers give each unit its own abbreviation table anyway
        // (all 2401 units of a vmlinux do), so each unit parses its table when it
        // is parsed.
        let dwarf = gimli::Dwarf::load(load)?;
        let info = input.section(".debug_info");
        let big_endian = !input.is_little_endian();
        // A section in the mapping is read from the file (`units`: reading the
        // headers through the mapping faulted in the pages around each); one the
        // input holds as a copy (decompressed, relocated) is read where it is.
        let listed = match crate::mmap::range_in(input.map(), info) {
            Some(r) => units::list(info.len(), big_endian, |at, buf| {
                input.read_at(r.start + at, buf)
            }),
            None => units::list(info.len(), big_endian, |at, buf| {
                buf.copy_from_slice(&info[at..at + buf.len()]);
                Ok(())
            }),
        };
        let units = listed.map_err(|e| {
            Error::file(
                input.path(),
                match e {
                    units::ListError::Read(e) => format!("cannot read .debug_info: {e}"),
                    units::ListError::Bad(what) => format!("bad .debug_info unit header: {what}"),
                },
            )
        })?;
        if units.is_empty() {
            return Err(Error::file(input.path(), "no compile units in .debug_info"));
        }
        Ok(DwarfInput {
            dwarf,
            units,
            input,
        })
    }

    /// Number of units.
    pub fn unit_count(&self) -> usize {
        self.units.len()
    }

    /// The `.debug_info` offset where unit `idx` starts.
    pub fn unit_start(&self, idx: usize) -> u64 {
        self.units[idx].info as u64
    }

    /// The header of unit `idx`, read again (the listing read it once).
    pub fn header(&self, idx: usize) -> Result<gimli::UnitHeader<Reader<'a>>, Error> {
        let at = gimli::DebugInfoOffset(self.units[idx].info);
        self.dwarf
            .debug_info
            .header_from_offset(at)
            .map_err(|e| self.unit_error(idx, format!("bad unit header: {e}")))
    }

    /// The `.debug_info` offset where unit `idx` ends.
    pub fn unit_end(&self, idx: usize) -> u64 {
        match self.units.get(idx + 1) {
            Some(_) => self.unit_start(idx + 1),
            None => self.input.section(".debug_info").len() as u64,
        }
    }

    /// An error about unit `idx` of this file, worded by the caller (the generic
    /// path: errors in a DIE go through [`DwarfInput::dwarf_error`]).
    pub fn unit_error(&self, idx: usize, e: impl std::fmt::Display) -> Error {
        self.dwarf_error(idx, None, DwarfErrorKind::Other(e.to_string()))
    }

    /// Error `kind` in unit `idx` of this file, in its DIE at unit offset `die` if
    /// given.
    pub fn dwarf_error(&self, idx: usize, die: Option<u64>, kind: DwarfErrorKind) -> Error {
        let unit_offset = self.unit_start(idx);
        Error::dwarf(
            self.input.path(),
            DwarfError {
                unit: idx,
                unit_offset,
                die_offset: die.map(|d| unit_offset + d),
                kind,
            },
        )
    }
}

/// Languages by the names pahole's `--lang_exclude` accepts (the `DW_LANG_` suffix,
/// lower case), with their DWARF codes.
const LANGS: &[(&str, u16)] = &[
    ("c89", 0x01),
    ("c", 0x02),
    ("ada83", 0x03),
    ("c_plus_plus", 0x04),
    ("cobol74", 0x05),
    ("cobol85", 0x06),
    ("fortran77", 0x07),
    ("fortran90", 0x08),
    ("pascal83", 0x09),
    ("modula2", 0x0a),
    ("java", 0x0b),
    ("c99", 0x0c),
    ("ada95", 0x0d),
    ("fortran95", 0x0e),
    ("pli", 0x0f),
    ("objc", 0x10),
    ("objc_plus_plus", 0x11),
    ("upc", 0x12),
    ("d", 0x13),
    ("python", 0x14),
    ("opencl", 0x15),
    ("go", 0x16),
    ("modula3", 0x17),
    ("haskell", 0x18),
    ("c_plus_plus_03", 0x19),
    ("c_plus_plus_11", 0x1a),
    ("ocaml", 0x1b),
    ("rust", 0x1c),
    ("c11", 0x1d),
    ("swift", 0x1e),
    ("julia", 0x1f),
    ("dylan", 0x20),
    ("c_plus_plus_14", 0x21),
    ("fortran03", 0x22),
    ("fortran08", 0x23),
    ("renderscript", 0x24),
    ("bliss", 0x25),
    ("mips_assembler", 0x8001),
];

/// The DWARF language code for a `--lang_exclude` name, if known.
pub fn lang_code(name: &str) -> Option<u16> {
    let n = name.trim().to_ascii_lowercase();
    let n = n.strip_prefix("dw_lang_").unwrap_or(&n);
    LANGS.iter().find(|(l, _)| *l == n).map(|&(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lang_names() {
        assert_eq!(lang_code("rust"), Some(0x1c));
        assert_eq!(lang_code("DW_LANG_C89"), Some(0x01));
        assert_eq!(lang_code("klingon"), None);
    }
}
