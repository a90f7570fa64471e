//! DWARF errors: what is wrong with the input ([`DwarfErrorKind`]) and where
//! ([`DwarfError`]: the unit, its `.debug_info` offset and, for an error in a DIE,
//! the DIE's `.debug_info` offset).
//!
//! The decoders (`die.rs`, the tree walk) return a bare kind; the unit's parse adds
//! the place, and [`crate::Error::Dwarf`] the file.

use std::fmt;

/// What is wrong with a unit's DWARF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DwarfErrorKind {
    /// A DIE's bytes (or an attribute's) end before it does.
    Truncated,
    /// A DIE's abbreviation code is not in the unit's abbreviation table.
    UnknownAbbrev(u64),
    /// An attribute form this reader does not know.
    UnknownForm(u64),
    /// A string offset past the end of its string section.
    BadStrOffset(u64),
    /// A string index past the end of the unit's string offsets table.
    BadStrIndex(u64),
    /// A reference (unit offset) outside its unit.
    BadReference(u64),
    /// A `DW_FORM_ref_addr` outside the group of units read as one.
    RefOutsideGroup(u64),
    /// A reference (type, origin, specification) into another unit
    /// (`DW_FORM_ref_addr`, `ref_sig8`) in a file whose units are read one by one.
    FarTypeRef,
    /// A value too large for the field BTF keeps it in.
    TooLarge {
        /// The attribute.
        what: &'static str,
        /// Its value.
        value: u64,
    },
    /// What gimli could not read (a unit header, an abbreviation table).
    Gimli(gimli::Error),
    /// Anything else, worded by the caller (the generic path).
    Other(String),
}

impl fmt::Display for DwarfErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DwarfErrorKind::Truncated => f.write_str("unexpected end of DIE data"),
            DwarfErrorKind::UnknownAbbrev(c) => write!(f, "unknown abbreviation code {c}"),
            DwarfErrorKind::UnknownForm(form) => write!(f, "unknown attribute form {form:#x}"),
            DwarfErrorKind::BadStrOffset(o) => write!(f, "string offset {o:#x} out of range"),
            DwarfErrorKind::BadStrIndex(i) => write!(f, "string index {i} out of range"),
            DwarfErrorKind::BadReference(o) => {
                write!(f, "reference to unit offset {o:#x}, outside its unit")
            }
            DwarfErrorKind::RefOutsideGroup(o) => write!(
                f,
                "reference to .debug_info+{o:#x}, outside its group of units"
            ),
            DwarfErrorKind::FarTypeRef => f.write_str(
                "refers to a DIE in another unit (DW_FORM_ref_addr/ref_sig8, as in LTO \
                 builds or type units): not supported",
            ),
            DwarfErrorKind::TooLarge { what, value } => {
                write!(f, "{what} {value:#x} is too large for BTF")
            }
            DwarfErrorKind::Gimli(e) => write!(f, "{e}"),
            DwarfErrorKind::Other(m) => f.write_str(m),
        }
    }
}

impl From<gimli::Error> for DwarfErrorKind {
    fn from(e: gimli::Error) -> Self {
        DwarfErrorKind::Gimli(e)
    }
}

/// A DWARF error and where it is: unit `unit` (its index) at `.debug_info` offset
/// `unit_offset`, in the DIE at `.debug_info` offset `die_offset` when it is a DIE's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DwarfError {
    /// The unit's index in `.debug_info`.
    pub unit: usize,
    /// The unit's `.debug_info` offset.
    pub unit_offset: u64,
    /// The DIE's `.debug_info` offset (None for an error of the unit as a whole).
    pub die_offset: Option<u64>,
    /// What is wrong.
    pub kind: DwarfErrorKind,
}

impl fmt::Display for DwarfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DWARF unit {} at .debug_info+{:#x}",
            self.unit, self.unit_offset
        )?;
        if let Some(d) = self.die_offset {
            write!(f, ", DIE at .debug_info+{d:#x}")?;
        }
        write!(f, ": {}", self.kind)
    }
}

impl std::error::Error for DwarfError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_unit_and_die() {
        let e = DwarfError {
            unit: 3,
            unit_offset: 0x1000,
            die_offset: Some(0x1234),
            kind: DwarfErrorKind::UnknownForm(0x99),
        };
        assert_eq!(
            e.to_string(),
            "DWARF unit 3 at .debug_info+0x1000, DIE at .debug_info+0x1234: unknown attribute form 0x99"
        );
        let e = DwarfError {
            die_offset: None,
            kind: DwarfErrorKind::Other("no root".into()),
            ..e
        };
        assert_eq!(e.to_string(), "DWARF unit 3 at .debug_info+0x1000: no root");
    }
}
