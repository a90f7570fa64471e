//! The one parse of an input ELF file: `object`'s ELF reader over the mapping, of
//! either class and byte order. The DWARF sections and their relocations
//! ([`super::ElfInput`]), the symbol tables ([`crate::symbols`]) and the kfunc sets
//! ([`crate::kfuncs`]) all read this one parse: its section headers, names and symbol
//! table are read once.

use super::ElfError;
use object::read::elf::{ElfFile32, ElfFile64};
use object::{Endianness, FileKind};

/// A parsed ELF file, 32- or 64-bit, borrowing its bytes.
#[derive(Debug)]
pub enum ElfFile<'a> {
    /// ELFCLASS32.
    Elf32(ElfFile32<'a, Endianness>),
    /// ELFCLASS64.
    Elf64(ElfFile64<'a, Endianness>),
}

/// Runs `$body` with `$f` bound to the class-specific `object::read::elf::ElfFile`
/// of an [`ElfFile`], so that code generic over the header type serves both classes.
macro_rules! with_elf {
    ($elf:expr, $f:ident => $body:expr) => {
        match $elf {
            $crate::elf::ElfFile::Elf32($f) => $body,
            $crate::elf::ElfFile::Elf64($f) => $body,
        }
    };
}
pub(crate) use with_elf;

impl<'a> ElfFile<'a> {
    /// Parses `data`: [`ElfError::NotElf`] without the ELF magic or a known class,
    /// [`ElfError::Parse`] for damaged headers, section names or symbol table.
    pub fn parse(data: &'a [u8]) -> Result<ElfFile<'a>, ElfError> {
        if data.len() < 4 || data[..4] != *b"\x7fELF" {
            return Err(ElfError::NotElf);
        }
        let bad = |err| ElfError::Parse {
            what: "cannot parse ELF",
            err,
        };
        match FileKind::parse(data).map_err(bad)? {
            FileKind::Elf32 => ElfFile32::parse(data).map(ElfFile::Elf32).map_err(bad),
            FileKind::Elf64 => ElfFile64::parse(data).map(ElfFile::Elf64).map_err(bad),
            _ => Err(ElfError::NotElf),
        }
    }

    /// The file's bytes.
    pub fn data(&self) -> &'a [u8] {
        with_elf!(self, f => f.data())
    }

    /// The byte order.
    pub fn endian(&self) -> Endianness {
        with_elf!(self, f => f.endian())
    }

    /// Whether the file is little-endian.
    pub fn is_little_endian(&self) -> bool {
        self.endian() == Endianness::Little
    }

    /// Whether the file is ELFCLASS64.
    pub fn is_64(&self) -> bool {
        matches!(self, ElfFile::Elf64(_))
    }

    /// Whether the file is a relocatable object (a kernel module).
    pub fn is_relocatable(&self) -> bool {
        use object::read::elf::FileHeader;
        with_elf!(self, f => f.elf_header().e_type(f.endian()) == object::elf::ET_REL)
    }
}
