//! Reading the ELF file being rewritten: its class and byte order, the section
//! headers, the program headers' file ranges.

use super::{malformed, ElfWriteError, Res};

pub(super) const SHT_NULL: u32 = 0;
pub(super) const SHT_PROGBITS: u32 = 1;
pub(super) const SHT_REL: u32 = 9;
pub(super) const SHT_RELA: u32 = 4;
pub(super) const SHT_NOBITS: u32 = 8;
pub(super) const SHF_ALLOC: u64 = 2;
pub(super) const SHN_LORESERVE: usize = 0xff00;
pub(super) const SHN_XINDEX: u16 = 0xffff;
pub(super) const PN_XNUM: u16 = 0xffff;
pub(super) const MODULE_SIG_MAGIC: &[u8] = b"~Module signature appended~\n";
/// Input is copied in pieces of this size, each released from memory once written.
pub(super) const INPUT_PIECE: usize = 8 << 20;

/// Class and byte order: how to read and write every header field.
#[derive(Clone, Copy, Debug)]
pub(super) struct Format {
    pub(super) is64: bool,
    pub(super) le: bool,
}

impl Format {
    pub(super) fn get<const N: usize>(self, b: &[u8], off: usize) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[off..off + N]);
        if !self.le {
            a.reverse();
        }
        a
    }
    pub(super) fn u16(self, b: &[u8], off: usize) -> u16 {
        u16::from_le_bytes(self.get(b, off))
    }
    pub(super) fn u32(self, b: &[u8], off: usize) -> u32 {
        u32::from_le_bytes(self.get(b, off))
    }
    pub(super) fn u64(self, b: &[u8], off: usize) -> u64 {
        u64::from_le_bytes(self.get(b, off))
    }
    /// An address, offset or size: 4 or 8 bytes by class.
    pub(super) fn word(self, b: &[u8], off: usize) -> u64 {
        if self.is64 {
            self.u64(b, off)
        } else {
            u64::from(self.u32(b, off))
        }
    }
    pub(super) fn put<const N: usize>(self, b: &mut [u8], off: usize, mut le_bytes: [u8; N]) {
        if !self.le {
            le_bytes.reverse();
        }
        b[off..off + N].copy_from_slice(&le_bytes);
    }
    pub(super) fn put_u16(self, b: &mut [u8], off: usize, v: u16) {
        self.put(b, off, v.to_le_bytes());
    }
    pub(super) fn put_u32(self, b: &mut [u8], off: usize, v: u32) {
        self.put(b, off, v.to_le_bytes());
    }
    /// Callers check that `v` fits a 32-bit field first (see [`Format::check_word`]).
    pub(super) fn put_word(self, b: &mut [u8], off: usize, v: u64) {
        if self.is64 {
            self.put(b, off, v.to_le_bytes());
        } else {
            self.put(b, off, (v as u32).to_le_bytes());
        }
    }
    pub(super) fn check_word(self, v: u64, what: &str) -> Res<()> {
        if !self.is64 && v > u64::from(u32::MAX) {
            return Err(ElfWriteError::Unsupported(format!(
                "{what} {v:#x} does not fit a 32-bit ELF file"
            )));
        }
        Ok(())
    }
    pub(super) fn ehdr_size(self) -> usize {
        if self.is64 {
            64
        } else {
            52
        }
    }
    pub(super) fn shdr_size(self) -> usize {
        if self.is64 {
            64
        } else {
            40
        }
    }
    pub(super) fn phdr_size(self) -> usize {
        if self.is64 {
            56
        } else {
            32
        }
    }
    /// Offsets in the ELF header of e_phoff, e_shoff, e_phentsize (the fields after it
    /// follow at 2-byte steps: e_phnum, e_shentsize, e_shnum, e_shstrndx).
    pub(super) fn ehdr_offsets(self) -> (usize, usize, usize) {
        if self.is64 {
            (32, 40, 54)
        } else {
            (28, 32, 42)
        }
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
    pub(super) fn read(f: Format, b: &[u8]) -> Shdr {
        if f.is64 {
            Shdr {
                name: f.u32(b, 0),
                kind: f.u32(b, 4),
                flags: f.u64(b, 8),
                addr: f.u64(b, 16),
                offset: f.u64(b, 24),
                size: f.u64(b, 32),
                link: f.u32(b, 40),
                info: f.u32(b, 44),
                addralign: f.u64(b, 48),
                entsize: f.u64(b, 56),
            }
        } else {
            Shdr {
                name: f.u32(b, 0),
                kind: f.u32(b, 4),
                flags: u64::from(f.u32(b, 8)),
                addr: u64::from(f.u32(b, 12)),
                offset: u64::from(f.u32(b, 16)),
                size: u64::from(f.u32(b, 20)),
                link: f.u32(b, 24),
                info: f.u32(b, 28),
                addralign: u64::from(f.u32(b, 32)),
                entsize: u64::from(f.u32(b, 36)),
            }
        }
    }

    pub(super) fn write(&self, f: Format, b: &mut [u8]) {
        f.put_u32(b, 0, self.name);
        f.put_u32(b, 4, self.kind);
        let w = if f.is64 { 8 } else { 4 };
        let mut off = 8;
        for v in [self.flags, self.addr, self.offset, self.size] {
            f.put_word(b, off, v);
            off += w;
        }
        f.put_u32(b, off, self.link);
        f.put_u32(b, off + 4, self.info);
        f.put_word(b, off + 8, self.addralign);
        f.put_word(b, off + 8 + w, self.entsize);
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
    let end = off.checked_add(len)?;
    if end > data.len() as u64 {
        return None;
    }
    Some(off as usize..end as usize)
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
        let is64 = match data[4] {
            1 => false,
            2 => true,
            c => return malformed(format!("unknown ELF class {c}")),
        };
        let le = match data[5] {
            1 => true,
            2 => false,
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
        let (phoff_at, shoff_at, phentsize_at) = fmt.ehdr_offsets();
        let phoff = fmt.word(data, phoff_at);
        let shoff = fmt.word(data, shoff_at);
        let phentsize = fmt.u16(data, phentsize_at);
        let phnum_raw = fmt.u16(data, phentsize_at + 2);
        let shentsize = fmt.u16(data, phentsize_at + 4);
        let shnum_raw = fmt.u16(data, phentsize_at + 6);
        let shstrndx_raw = fmt.u16(data, phentsize_at + 8);

        if shoff == 0 {
            return Err(ElfWriteError::Unsupported(
                "no section header table (e_shoff is 0)".into(),
            ));
        }
        if usize::from(shentsize) != fmt.shdr_size() {
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
        let sh0 = Shdr::read(fmt, &data[sh0_range]);
        let shnum_extended = shnum_raw == 0;
        let shnum = if shnum_extended {
            sh0.size
        } else {
            u64::from(shnum_raw)
        };
        let sht_len = shnum
            .checked_mul(u64::from(shentsize))
            .ok_or_else(|| ElfWriteError::Malformed("section count overflows".into()))?;
        let sht = range_in(data, shoff, sht_len).ok_or_else(|| {
            ElfWriteError::Malformed(format!(
                "section header table ({shnum} headers at offset {shoff:#x}) extends past \
                 the end of the file ({} bytes)",
                data.len()
            ))
        })?;
        let shdrs: Vec<Shdr> = data[sht]
            .chunks_exact(fmt.shdr_size())
            .map(|b| Shdr::read(fmt, b))
            .collect();
        let shstrndx = if shstrndx_raw == SHN_XINDEX {
            sh0.link as usize
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

        let phnum = if phnum_raw == PN_XNUM {
            u64::from(sh0.info)
        } else {
            u64::from(phnum_raw)
        };
        let mut segments = Vec::new();
        let mut headers_end = fmt.ehdr_size() as u64;
        if phnum > 0 {
            if usize::from(phentsize) != fmt.phdr_size() {
                return malformed(format!(
                    "e_phentsize is {phentsize}, expected {}",
                    fmt.phdr_size()
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
            for p in data[pht].chunks_exact(fmt.phdr_size()) {
                let (off, filesz) = if fmt.is64 {
                    (fmt.u64(p, 8), fmt.u64(p, 32))
                } else {
                    (u64::from(fmt.u32(p, 4)), u64::from(fmt.u32(p, 16)))
                };
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
