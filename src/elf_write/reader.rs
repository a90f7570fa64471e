//! Reading the ELF file being rewritten, through `object`'s header types (either
//! class and byte order): the section headers, the program headers' file ranges;
//! and writing the headers that change.

use super::{malformed, ElfWriteError, Res};
use object::elf::{self, FileHeader32, FileHeader64, SectionHeader32, SectionHeader64};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::{pod, Endianness, U16, U32, U64};
use std::mem::size_of;

pub(super) use object::elf::{SHT_NOBITS, SHT_NULL, SHT_PROGBITS, SHT_REL, SHT_RELA};
pub(super) const SHF_ALLOC: u64 = elf::SHF_ALLOC as u64;
pub(super) const SHN_LORESERVE: usize = elf::SHN_LORESERVE as usize;
pub(super) const MODULE_SIG_MAGIC: &[u8] = b"~Module signature appended~\n";
/// Input is copied in pieces of this size, each released from memory once written.
pub(super) const INPUT_PIECE: usize = 8 << 20;

/// Class and byte order of the file: which of `object`'s header types describe it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Format {
    pub(super) is64: bool,
    pub(super) le: bool,
}

impl Format {
    pub(super) fn endian(self) -> Endianness {
        if self.le {
            Endianness::Little
        } else {
            Endianness::Big
        }
    }
    pub(super) fn ehdr_size(self) -> usize {
        if self.is64 {
            size_of::<FileHeader64<Endianness>>()
        } else {
            size_of::<FileHeader32<Endianness>>()
        }
    }
    pub(super) fn shdr_size(self) -> usize {
        if self.is64 {
            size_of::<SectionHeader64<Endianness>>()
        } else {
            size_of::<SectionHeader32<Endianness>>()
        }
    }
    /// An address, offset or size of a header field: 32 bits in an ELFCLASS32 file.
    fn word32(self, v: u64, what: &str) -> Res<u32> {
        u32::try_from(v).map_err(|_| {
            ElfWriteError::Unsupported(format!("{what} {v:#x} does not fit a 32-bit ELF file"))
        })
    }

    /// The ELF header `ehdr` (of this format) pointing at a section header table
    /// at `shoff` with `shnum` entries (0: the count is in section 0).
    pub(super) fn patched_ehdr(self, ehdr: &[u8], shoff: u64, shnum: u16) -> Res<Vec<u8>> {
        let e = self.endian();
        let cut = || ElfWriteError::Malformed("ELF header cut short".into());
        Ok(if self.is64 {
            let mut h = *pod::from_bytes::<FileHeader64<Endianness>>(ehdr)
                .map_err(|()| cut())?
                .0;
            h.e_shoff = U64::new(e, shoff);
            h.e_shnum = U16::new(e, shnum);
            pod::bytes_of(&h).to_vec()
        } else {
            let mut h = *pod::from_bytes::<FileHeader32<Endianness>>(ehdr)
                .map_err(|()| cut())?
                .0;
            h.e_shoff = U32::new(e, self.word32(shoff, "section header table offset")?);
            h.e_shnum = U16::new(e, shnum);
            pod::bytes_of(&h).to_vec()
        })
    }
}

/// One section header, widened to 64 bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Shdr {
    pub(super) name: u32,
    pub(super) kind: u32,
    pub(super) flags: u64,
    pub(super) addr: u64,
    pub(super) offset: u64,
    pub(super) size: u64,
    pub(super) link: u32,
    pub(super) info: u32,
    pub(super) addralign: u64,
    pub(super) entsize: u64,
}

impl Shdr {
    fn read<S: SectionHeader<Endian = Endianness>>(s: &S, e: Endianness) -> Shdr {
        Shdr {
            name: s.sh_name(e),
            kind: s.sh_type(e),
            flags: s.sh_flags(e).into(),
            addr: s.sh_addr(e).into(),
            offset: s.sh_offset(e).into(),
            size: s.sh_size(e).into(),
            link: s.sh_link(e),
            info: s.sh_info(e),
            addralign: s.sh_addralign(e).into(),
            entsize: s.sh_entsize(e).into(),
        }
    }

    /// Appends the header's bytes in format `f` to `out`; an error if a field does
    /// not fit a 32-bit file.
    pub(super) fn write(&self, f: Format, out: &mut Vec<u8>) -> Res<()> {
        let e = f.endian();
        if f.is64 {
            let h = SectionHeader64::<Endianness> {
                sh_name: U32::new(e, self.name),
                sh_type: U32::new(e, self.kind),
                sh_flags: U64::new(e, self.flags),
                sh_addr: U64::new(e, self.addr),
                sh_offset: U64::new(e, self.offset),
                sh_size: U64::new(e, self.size),
                sh_link: U32::new(e, self.link),
                sh_info: U32::new(e, self.info),
                sh_addralign: U64::new(e, self.addralign),
                sh_entsize: U64::new(e, self.entsize),
            };
            out.extend_from_slice(pod::bytes_of(&h));
        } else {
            let w = |v, what| f.word32(v, what).map(|v| U32::new(e, v));
            let h = SectionHeader32::<Endianness> {
                sh_name: U32::new(e, self.name),
                sh_type: U32::new(e, self.kind),
                sh_flags: w(self.flags, "section flags")?,
                sh_addr: w(self.addr, "section address")?,
                sh_offset: w(self.offset, "section offset")?,
                sh_size: w(self.size, "section size")?,
                sh_link: U32::new(e, self.link),
                sh_info: U32::new(e, self.info),
                sh_addralign: w(self.addralign, "section alignment")?,
                sh_entsize: w(self.entsize, "section entry size")?,
            };
            out.extend_from_slice(pod::bytes_of(&h));
        }
        Ok(())
    }

    /// The file bytes it occupies, if any.
    pub(super) fn file_range(&self) -> Option<(u64, u64)> {
        if self.kind == SHT_NOBITS || self.kind == SHT_NULL || self.size == 0 {
            None
        } else {
            Some((self.offset, self.offset + self.size))
        }
    }
}

/// The parsed headers of an input ELF file.
pub(super) struct Elf<'a> {
    pub(super) data: &'a [u8],
    pub(super) fmt: Format,
    pub(super) shoff: u64,
    /// True when the section count lives in section 0's `sh_size` (`e_shnum == 0`).
    pub(super) shnum_extended: bool,
    pub(super) shstrndx: usize,
    pub(super) shdrs: Vec<Shdr>,
    /// File ranges of the program headers (`p_offset`, `p_offset + p_filesz`).
    pub(super) segments: Vec<(u64, u64)>,
    /// File ranges of the ELF header and the program header table.
    pub(super) headers_end: u64,
}

pub(super) fn range_in(data: &[u8], off: u64, len: u64) -> Option<std::ops::Range<usize>> {
    let start = usize::try_from(off).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    (end <= data.len()).then_some(start..end)
}

impl<'a> Elf<'a> {
    pub(super) fn parse(data: &'a [u8]) -> Res<Elf<'a>> {
        if data.len() < 16 || &data[..4] != b"\x7fELF" {
            return Err(ElfWriteError::NotElf(if data.len() < 4 {
                format!("only {} bytes long", data.len())
            } else {
                "no \\x7fELF magic at the start".into()
            }));
        }
        // `e_ident`'s class and data bytes (`EI_CLASS`, `EI_DATA`), which say which
        // header type to read the rest with.
        let (class, encoding) = (data[4], data[5]);
        let is64 = match class {
            elf::ELFCLASS32 => false,
            elf::ELFCLASS64 => true,
            c => return malformed(format!("unknown ELF class {c}")),
        };
        let le = match encoding {
            elf::ELFDATA2LSB => true,
            elf::ELFDATA2MSB => false,
            d => return malformed(format!("unknown ELF data encoding {d}")),
        };
        let fmt = Format { is64, le };
        if data.len() < fmt.ehdr_size() {
            return malformed(format!(
                "ELF header cut short: file is {} bytes, the header needs {}",
                data.len(),
                fmt.ehdr_size()
            ));
        }
        if is64 {
            Elf::parse_as::<FileHeader64<Endianness>>(data, fmt)
        } else {
            Elf::parse_as::<FileHeader32<Endianness>>(data, fmt)
        }
    }

    /// The headers of a file of class `H` (whose ELF header is in `data`).
    fn parse_as<H: FileHeader<Endian = Endianness>>(data: &'a [u8], fmt: Format) -> Res<Elf<'a>> {
        let e = fmt.endian();
        let (header, _) = pod::from_bytes::<H>(data)
            .map_err(|()| ElfWriteError::Malformed("ELF header cut short".into()))?;
        let phoff: u64 = header.e_phoff(e).into();
        let shoff: u64 = header.e_shoff(e).into();
        let phentsize = header.e_phentsize(e);
        let phnum_raw = header.e_phnum(e);
        let shentsize = header.e_shentsize(e);
        let shnum_raw = header.e_shnum(e);
        let shstrndx_raw = header.e_shstrndx(e);

        if shoff == 0 {
            return Err(ElfWriteError::Unsupported(
                "no section header table (e_shoff is 0)".into(),
            ));
        }
        if usize::from(shentsize) != size_of::<H::SectionHeader>() {
            return malformed(format!(
                "e_shentsize is {shentsize}, expected {}",
                fmt.shdr_size()
            ));
        }
        let sh0_range = range_in(data, shoff, shentsize.into()).ok_or_else(|| {
            ElfWriteError::Malformed(format!(
                "section header table at offset {shoff:#x} lies past the end of the file \
                 ({} bytes)",
                data.len()
            ))
        })?;
        let (sh0, _) = pod::from_bytes::<H::SectionHeader>(&data[sh0_range])
            .map_err(|()| ElfWriteError::Malformed("section header cut short".into()))?;
        let sh0 = Shdr::read(sh0, e);
        let shnum_extended = shnum_raw == 0;
        let shnum = if shnum_extended {
            sh0.size
        } else {
            u64::from(shnum_raw)
        };
        let table = shnum
            .checked_mul(u64::from(shentsize))
            .and_then(|len| range_in(data, shoff, len))
            .ok_or_else(|| {
                ElfWriteError::Malformed(format!(
                    "section header table ({shnum} headers at offset {shoff:#x}) extends \
                     past the end of the file ({} bytes)",
                    data.len()
                ))
            })?;
        let count = table.len() / size_of::<H::SectionHeader>();
        let (raw, _) = pod::slice_from_bytes::<H::SectionHeader>(&data[table], count)
            .map_err(|()| ElfWriteError::Malformed("section header table cut short".into()))?;
        let shdrs: Vec<Shdr> = raw.iter().map(|s| Shdr::read(s, e)).collect();
        let shstrndx = if shstrndx_raw == elf::SHN_XINDEX {
            usize::try_from(sh0.link).unwrap_or(usize::MAX)
        } else {
            usize::from(shstrndx_raw)
        };
        if shstrndx == 0 || shstrndx >= shdrs.len() {
            return malformed(format!(
                "section name table index {shstrndx} is not a section (there are {})",
                shdrs.len()
            ));
        }
        for (i, s) in shdrs.iter().enumerate() {
            if let Some((off, _)) = s.file_range() {
                if range_in(data, off, s.size).is_none() {
                    return malformed(format!(
                        "section [{i}] (offset {off:#x}, size {:#x}) extends past the end of \
                         the file ({} bytes)",
                        s.size,
                        data.len()
                    ));
                }
            }
        }

        let phnum = if phnum_raw == elf::PN_XNUM {
            u64::from(sh0.info)
        } else {
            u64::from(phnum_raw)
        };
        let mut segments = Vec::new();
        let mut headers_end = fmt.ehdr_size() as u64;
        if phnum > 0 {
            if usize::from(phentsize) != size_of::<H::ProgramHeader>() {
                return malformed(format!(
                    "e_phentsize is {phentsize}, expected {}",
                    size_of::<H::ProgramHeader>()
                ));
            }
            let pht = range_in(data, phoff, phnum * u64::from(phentsize)).ok_or_else(|| {
                ElfWriteError::Malformed(format!(
                    "program header table ({phnum} headers at offset {phoff:#x}) extends \
                     past the end of the file ({} bytes)",
                    data.len()
                ))
            })?;
            headers_end = headers_end.max(pht.end as u64);
            let count = pht.len() / size_of::<H::ProgramHeader>();
            let (phdrs, _) = pod::slice_from_bytes::<H::ProgramHeader>(&data[pht], count)
                .map_err(|()| ElfWriteError::Malformed("program header table cut short".into()))?;
            for p in phdrs {
                let (off, filesz): (u64, u64) = (p.p_offset(e).into(), p.p_filesz(e).into());
                if filesz > 0 {
                    let end = off.checked_add(filesz).filter(|&e| e <= data.len() as u64);
                    let Some(end) = end else {
                        return malformed(format!(
                            "segment at offset {off:#x} (size {filesz:#x}) extends past the \
                             end of the file ({} bytes)",
                            data.len()
                        ));
                    };
                    segments.push((off, end));
                }
            }
        }
        let elf = Elf {
            data,
            fmt,
            shoff,
            shnum_extended,
            shstrndx,
            shdrs,
            segments,
            headers_end,
        };
        let strtab = &elf.shdrs[shstrndx];
        if strtab.kind == SHT_NOBITS || strtab.size == 0 {
            return malformed(format!("section name table [{shstrndx}] has no contents"));
        }
        Ok(elf)
    }

    pub(super) fn section_name(&self, idx: usize) -> Res<&'a [u8]> {
        let st = &self.shdrs[self.shstrndx];
        let table = usize::try_from(st.offset)
            .ok()
            .zip(usize::try_from(st.offset.saturating_add(st.size)).ok())
            .and_then(|(start, end)| self.data.get(start..end))
            .ok_or_else(|| {
                ElfWriteError::Malformed(format!(
                    "section name table [{}] at {:#x}+{:#x} lies outside the file",
                    self.shstrndx, st.offset, st.size
                ))
            })?;
        let off = self.shdrs[idx].name as usize;
        let rest = table.get(off..).ok_or_else(|| {
            ElfWriteError::Malformed(format!(
                "name of section [{idx}] at {off:#x} lies outside the section name table"
            ))
        })?;
        let len = rest.iter().position(|&c| c == 0).ok_or_else(|| {
            ElfWriteError::Malformed(format!("name of section [{idx}] is not NUL-terminated"))
        })?;
        Ok(&rest[..len])
    }

    /// The index of the first section named `name`, if any.
    pub(super) fn find_section(&self, name: &str) -> Res<Option<usize>> {
        for idx in 1..self.shdrs.len() {
            if self.section_name(idx)? == name.as_bytes() {
                return Ok(Some(idx));
            }
        }
        Ok(None)
    }

    pub(super) fn sht_len(&self) -> u64 {
        (self.shdrs.len() * self.fmt.shdr_size()) as u64
    }

    /// Loaded sections keep their address and size: they are inside a segment, or
    /// allocated in a file that has segments.
    pub(super) fn is_fixed(&self, s: &Shdr) -> bool {
        if s.flags & SHF_ALLOC != 0 && !self.segments.is_empty() {
            return true;
        }
        match s.file_range() {
            Some((a, b)) => self.segments.iter().any(|&(c, d)| a < d && c < b),
            None => false,
        }
    }

    /// Whether anything else in the file (headers, another section, the section header
    /// table) shares bytes with section `idx`.
    pub(super) fn shares_bytes(&self, idx: usize) -> Option<String> {
        let (a, b) = self.shdrs[idx].file_range()?;
        if a < self.headers_end {
            return Some("the ELF or program headers".into());
        }
        if a < self.shoff + self.sht_len() && self.shoff < b {
            return Some("the section header table".into());
        }
        self.shdrs.iter().enumerate().find_map(|(j, o)| {
            let (c, d) = o.file_range()?;
            (j != idx && a < d && c < b).then(|| format!("section [{j}]"))
        })
    }
}
