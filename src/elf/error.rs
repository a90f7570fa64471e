//! What can be wrong with an input ELF file, as a value: the readers of the input
//! layer return an [`ElfError`], and the file it concerns is added at the top
//! ([`ElfError::in_file`]), where the path is known.

use std::fmt;
use std::path::Path;

/// A problem reading an input ELF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElfError {
    /// No ELF magic, or a class or byte order that is not ELF's.
    NotElf,
    /// The ELF structure (header, section headers, names, symbol table) is damaged:
    /// what was being read, and `object`'s diagnosis.
    Parse {
        /// What was being read ("cannot parse ELF", "bad .symtab" …).
        what: &'static str,
        /// Why it failed.
        err: object::read::Error,
    },
    /// A section's bytes lie (partly) outside the file.
    SectionOutOfBounds {
        /// The section.
        section: String,
    },
    /// A compressed section whose header claims more bytes than its compressed data
    /// can inflate to.
    ImplausibleCompression {
        /// The section.
        section: String,
        /// The claimed uncompressed size.
        claimed: u64,
        /// The compressed size.
        compressed: u64,
    },
    /// Reading a section's (uncompressed) bytes failed.
    SectionData {
        /// The section.
        section: String,
        /// Why.
        err: object::read::Error,
    },
    /// A relocation of a debug section that cannot be applied.
    Relocation {
        /// The section it applies to.
        section: String,
        /// Its offset in that section.
        offset: u64,
        /// What is wrong with it.
        problem: RelocProblem,
    },
    /// A kfunc's flags word lies outside `.BTF_ids`.
    KfuncOutOfBounds {
        /// The kfunc.
        func: String,
    },
    /// The file has no (or an empty) `.debug_info`.
    NoDebugInfo,
    /// A count or index beyond what the encoders keep in 32 bits.
    TooLarge {
        /// What ("section index" …).
        what: &'static str,
    },
}

/// Why a relocation cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelocProblem {
    /// A relocation type we do not apply (its `object` flags, printed).
    Unsupported(String),
    /// Its symbol cannot be read.
    BadSymbol(object::read::Error),
    /// It is relative to something other than a symbol or nothing.
    UnsupportedTarget,
    /// Its field lies outside the section.
    OutOfRange,
}

impl ElfError {
    /// The error as the crate's [`crate::Error`], naming `path`.
    pub fn in_file(self, path: &Path) -> crate::Error {
        crate::Error::elf(path, self)
    }
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElfError::NotElf => f.write_str("not an ELF file"),
            ElfError::Parse { what, err } => write!(f, "{what}: {err}"),
            ElfError::SectionOutOfBounds { section } => write!(
                f,
                "section {section}: extends past the end of the file (truncated?)"
            ),
            ElfError::ImplausibleCompression {
                section,
                claimed,
                compressed,
            } => write!(
                f,
                "section {section}: compression header claims {claimed} bytes from \
                 {compressed} compressed bytes"
            ),
            ElfError::SectionData { section, err } => write!(f, "section {section}: {err}"),
            ElfError::Relocation {
                section,
                offset,
                problem,
            } => match problem {
                RelocProblem::Unsupported(flags) => write!(
                    f,
                    "section {section}: unsupported relocation {flags} at {offset:#x}"
                ),
                RelocProblem::BadSymbol(e) => {
                    write!(f, "section {section}: relocation at {offset:#x}: {e}")
                }
                RelocProblem::UnsupportedTarget => write!(
                    f,
                    "section {section}: relocation at {offset:#x} has an unsupported target"
                ),
                RelocProblem::OutOfRange => write!(
                    f,
                    "section {section}: relocation at {offset:#x} is out of range"
                ),
            },
            ElfError::KfuncOutOfBounds { func } => write!(
                f,
                "kfunc '{func}' offset outside section '{}'",
                crate::kfuncs::BTF_IDS_SECTION
            ),
            ElfError::TooLarge { what } => write!(f, "{what} does not fit in 32 bits"),
            ElfError::NoDebugInfo => {
                f.write_str("no DWARF debug information (.debug_info is missing or empty)")
            }
        }
    }
}

impl std::error::Error for ElfError {}
