//! Writing sections (`.BTF`, `.BTF.base`) into an ELF file, as `pahole -J` does with
//! `llvm-objcopy --add-section`, but without any external tool.
//!
//! The rewrite is deliberately conservative, so that everything else in the file keeps
//! working:
//! - every existing byte keeps its file offset, except the section header table (moved
//!   to the end) and data of replaced sections that must move;
//! - section indices never change: a new section's header is appended at the end of the
//!   table, so `sh_link`/`sh_info` of symbol and relocation tables stay valid;
//! - a new section is `SHT_PROGBITS`, no flags, alignment 1 (what both GNU and LLVM
//!   objcopy give `--add-section`), its data appended after the existing data;
//! - a section that is loaded (`SHF_ALLOC` in a file with program headers, or inside a
//!   segment's file range) can only get contents of exactly its current size: the
//!   kernel finds its `.BTF` through `__start_BTF`/`__stop_BTF`, fixed at link time.
//!
//! The work is split into a [`Plan`] (what to copy from the input, what to patch, what to
//! append) and its execution, so that a 340 MB vmlinux is streamed from a mapping into
//! the temporary file instead of being built in memory.

use crate::Error;
use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::ops::Range;
use std::path::Path;

/// Why an ELF file cannot get the requested sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElfWriteError {
    /// The input is not an ELF file at all.
    NotElf(String),
    /// The input claims to be ELF but its headers are inconsistent or cut short.
    Malformed(String),
    /// A valid ELF file this writer does not handle (and why).
    Unsupported(String),
    /// A loaded section whose size cannot change without relinking.
    FixedSize {
        /// The section name.
        name: String,
        /// Its current size.
        size: u64,
        /// The size asked for.
        new_size: u64,
    },
    /// The request itself is wrong (empty or duplicated section name …).
    BadRequest(String),
}

impl fmt::Display for ElfWriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElfWriteError::NotElf(m) => write!(f, "not an ELF file: {m}"),
            ElfWriteError::Malformed(m) => write!(f, "malformed ELF: {m}"),
            ElfWriteError::Unsupported(m) => write!(f, "unsupported ELF: {m}"),
            ElfWriteError::FixedSize {
                name,
                size,
                new_size,
            } => write!(
                f,
                "section {name} is loaded at a fixed address in a linked file; its size \
                 {size} cannot change to {new_size} without relinking (a kernel build \
                 encodes BTF before the final link, into an ELF without {name})"
            ),
            ElfWriteError::BadRequest(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for ElfWriteError {}

type Res<T> = std::result::Result<T, ElfWriteError>;

fn malformed<T>(msg: impl Into<String>) -> Res<T> {
    Err(ElfWriteError::Malformed(msg.into()))
}

const SHT_NULL: u32 = 0;
const SHT_PROGBITS: u32 = 1;
const SHT_REL: u32 = 9;
const SHT_RELA: u32 = 4;
const SHT_NOBITS: u32 = 8;
const SHF_ALLOC: u64 = 2;
const SHN_LORESERVE: usize = 0xff00;
const SHN_XINDEX: u16 = 0xffff;
const PN_XNUM: u16 = 0xffff;
const MODULE_SIG_MAGIC: &[u8] = b"~Module signature appended~\n";
/// Input is copied in pieces of this size, each released from memory once written.
const INPUT_PIECE: usize = 8 << 20;

/// Class and byte order: how to read and write every header field.
#[derive(Clone, Copy, Debug)]
struct Format {
    is64: bool,
    le: bool,
}

impl Format {
    fn get<const N: usize>(self, b: &[u8], off: usize) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[off..off + N]);
        if !self.le {
            a.reverse();
        }
        a
    }
    fn u16(self, b: &[u8], off: usize) -> u16 {
        u16::from_le_bytes(self.get(b, off))
    }
    fn u32(self, b: &[u8], off: usize) -> u32 {
        u32::from_le_bytes(self.get(b, off))
    }
    fn u64(self, b: &[u8], off: usize) -> u64 {
        u64::from_le_bytes(self.get(b, off))
    }
    /// An address, offset or size: 4 or 8 bytes by class.
    fn word(self, b: &[u8], off: usize) -> u64 {
        if self.is64 {
            self.u64(b, off)
        } else {
            u64::from(self.u32(b, off))
        }
    }
    fn put<const N: usize>(self, b: &mut [u8], off: usize, mut le_bytes: [u8; N]) {
        if !self.le {
            le_bytes.reverse();
        }
        b[off..off + N].copy_from_slice(&le_bytes);
    }
    fn put_u16(self, b: &mut [u8], off: usize, v: u16) {
        self.put(b, off, v.to_le_bytes());
    }
    fn put_u32(self, b: &mut [u8], off: usize, v: u32) {
        self.put(b, off, v.to_le_bytes());
    }
    /// Callers check that `v` fits a 32-bit field first (see [`Format::check_word`]).
    fn put_word(self, b: &mut [u8], off: usize, v: u64) {
        if self.is64 {
            self.put(b, off, v.to_le_bytes());
        } else {
            self.put(b, off, (v as u32).to_le_bytes());
        }
    }
    fn check_word(self, v: u64, what: &str) -> Res<()> {
        if !self.is64 && v > u64::from(u32::MAX) {
            return Err(ElfWriteError::Unsupported(format!(
                "{what} {v:#x} does not fit a 32-bit ELF file"
            )));
        }
        Ok(())
    }
    fn ehdr_size(self) -> usize {
        if self.is64 {
            64
        } else {
            52
        }
    }
    fn shdr_size(self) -> usize {
        if self.is64 {
            64
        } else {
            40
        }
    }
    fn phdr_size(self) -> usize {
        if self.is64 {
            56
        } else {
            32
        }
    }
    /// Offsets in the ELF header of e_phoff, e_shoff, e_phentsize (the fields after it
    /// follow at 2-byte steps: e_phnum, e_shentsize, e_shnum, e_shstrndx).
    fn ehdr_offsets(self) -> (usize, usize, usize) {
        if self.is64 {
            (32, 40, 54)
        } else {
            (28, 32, 42)
        }
    }
}

/// One section header, widened to 64 bits.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Shdr {
    name: u32,
    kind: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
    addralign: u64,
    entsize: u64,
}

impl Shdr {
    fn read(f: Format, b: &[u8]) -> Shdr {
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

    fn write(&self, f: Format, b: &mut [u8]) {
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
    fn file_range(&self) -> Option<(u64, u64)> {
        if self.kind == SHT_NOBITS || self.kind == SHT_NULL || self.size == 0 {
            None
        } else {
            Some((self.offset, self.offset + self.size))
        }
    }
}

/// The parsed headers of an input ELF file.
struct Elf<'a> {
    data: &'a [u8],
    fmt: Format,
    shoff: u64,
    /// True when the section count lives in section 0's `sh_size` (`e_shnum == 0`).
    shnum_extended: bool,
    shstrndx: usize,
    shdrs: Vec<Shdr>,
    /// File ranges of the program headers (`p_offset`, `p_offset + p_filesz`).
    segments: Vec<(u64, u64)>,
    /// File ranges of the ELF header and the program header table.
    headers_end: u64,
}

fn range_in(data: &[u8], off: u64, len: u64) -> Option<std::ops::Range<usize>> {
    let end = off.checked_add(len)?;
    if end > data.len() as u64 {
        return None;
    }
    Some(off as usize..end as usize)
}

impl<'a> Elf<'a> {
    fn parse(data: &'a [u8]) -> Res<Elf<'a>> {
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

    fn section_name(&self, idx: usize) -> Res<&'a [u8]> {
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

    fn sht_len(&self) -> u64 {
        (self.shdrs.len() * self.fmt.shdr_size()) as u64
    }

    /// Loaded sections keep their address and size: they are inside a segment, or
    /// allocated in a file that has segments.
    fn is_fixed(&self, s: &Shdr) -> bool {
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
    fn shares_bytes(&self, idx: usize) -> Option<String> {
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

/// A piece of the output.
#[derive(Debug)]
enum Chunk<'a> {
    /// Bytes of the input file.
    Input(u64, u64),
    /// Caller-provided bytes.
    Data(&'a [u8]),
    /// Bytes built here (headers, names).
    Owned(Vec<u8>),
    /// Padding or erased old contents.
    Zeros(u64),
}

impl Chunk<'_> {
    fn len(&self) -> u64 {
        match self {
            Chunk::Input(a, b) => b - a,
            Chunk::Data(d) => d.len() as u64,
            Chunk::Owned(d) => d.len() as u64,
            Chunk::Zeros(n) => *n,
        }
    }

    /// Writes the chunk; `copied` hears of each piece of the input once it has been
    /// handed to `w`.
    fn write(
        &self,
        input: &[u8],
        w: &mut impl Write,
        copied: &mut impl FnMut(Range<usize>),
    ) -> std::io::Result<()> {
        match self {
            Chunk::Input(a, b) => {
                let (mut at, end) = (*a as usize, *b as usize);
                while at < end {
                    let piece = at..end.min(at + INPUT_PIECE);
                    w.write_all(&input[piece.clone()])?;
                    at = piece.end;
                    copied(piece);
                }
                Ok(())
            }
            Chunk::Data(d) => w.write_all(d),
            Chunk::Owned(d) => w.write_all(d),
            Chunk::Zeros(n) => {
                let zeros = [0u8; 4096];
                let mut left = *n;
                while left > 0 {
                    let k = left.min(zeros.len() as u64) as usize;
                    w.write_all(&zeros[..k])?;
                    left -= k as u64;
                }
                Ok(())
            }
        }
    }
}

/// How to produce the output: the first `keep` bytes of the input with `patches`
/// written over them, then `tail`.
#[derive(Debug)]
struct Plan<'a> {
    input: &'a [u8],
    keep: u64,
    /// Sorted by offset, non-overlapping, all inside `0..keep`.
    patches: Vec<(u64, Chunk<'a>)>,
    tail: Vec<Chunk<'a>>,
}

impl Plan<'_> {
    fn len(&self) -> u64 {
        self.keep + self.tail.iter().map(Chunk::len).sum::<u64>()
    }

    /// Writes the output to `w`; `copied` hears of each piece of the input once written
    /// (so that its pages can be released).
    fn write_to(
        &self,
        w: &mut impl Write,
        copied: &mut impl FnMut(Range<usize>),
    ) -> std::io::Result<()> {
        let mut at = 0u64;
        for (off, chunk) in &self.patches {
            Chunk::Input(at, *off).write(self.input, w, copied)?;
            chunk.write(self.input, w, copied)?;
            at = off + chunk.len();
        }
        Chunk::Input(at, self.keep).write(self.input, w, copied)?;
        for chunk in &self.tail {
            chunk.write(self.input, w, copied)?;
        }
        Ok(())
    }
}

fn align_up(v: u64, a: u64) -> u64 {
    if a <= 1 {
        v
    } else {
        v.div_ceil(a) * a
    }
}

/// What happens to one requested section.
enum Placement {
    /// Same offset, contents overwritten (the rest of the old range zeroed).
    InPlace,
    /// Contents appended; the old bytes are cut off with the old tail of the file.
    AppendTail,
    /// Contents appended; the old range is zeroed if nothing else uses it.
    Append { erase_old: bool },
    /// A new section header at the end of the table.
    New,
}

fn build_plan<'a>(input: &'a [u8], sections: &[(&str, &'a [u8])]) -> Res<Plan<'a>> {
    let elf = Elf::parse(input)?;
    let fmt = elf.fmt;
    if input.ends_with(MODULE_SIG_MAGIC) {
        return Err(ElfWriteError::Unsupported(
            "a module signature is appended to the file; sign the module after adding \
             BTF (strip the signature first)"
                .into(),
        ));
    }

    // Resolve each request to an existing section or a new one.
    let mut wanted: HashMap<&[u8], Option<usize>> = HashMap::with_capacity(sections.len());
    for &(name, _) in sections {
        if name.is_empty() || name.contains('\0') {
            return Err(ElfWriteError::BadRequest(format!(
                "invalid section name {name:?}"
            )));
        }
        if wanted.insert(name.as_bytes(), None).is_some() {
            return Err(ElfWriteError::BadRequest(format!(
                "section {name} requested twice"
            )));
        }
    }
    for idx in 1..elf.shdrs.len() {
        if let Some(slot) = wanted.get_mut(elf.section_name(idx)?) {
            if let Some(prev) = slot.replace(idx) {
                return Err(ElfWriteError::Unsupported(format!(
                    "more than one section named {} ([{prev}] and [{idx}])",
                    String::from_utf8_lossy(elf.section_name(idx)?)
                )));
            }
        }
    }
    let mut targets: Vec<(Option<usize>, &str, &[u8])> = Vec::with_capacity(sections.len());
    for &(name, data) in sections {
        let found = wanted[name.as_bytes()];
        if let Some(idx) = found {
            check_replaceable(&elf, idx, name)?;
        }
        targets.push((found, name, data));
    }

    // Where the kept part of the input ends: drop the old section header table (and the
    // padding before it) when it is the last thing in the file, since a new one is
    // written at the end.
    let sht_end = elf.shoff + elf.sht_len();
    let data_end = elf
        .shdrs
        .iter()
        .filter_map(Shdr::file_range)
        .chain(elf.segments.iter().copied())
        .map(|(_, e)| e)
        .fold(elf.headers_end, u64::max);
    let mut keep = if sht_end == input.len() as u64 && elf.shoff >= data_end {
        data_end
    } else {
        input.len() as u64
    };

    let mut placements = Vec::with_capacity(targets.len());
    for &(found, name, data) in &targets {
        let Some(idx) = found else {
            placements.push(Placement::New);
            continue;
        };
        let s = &elf.shdrs[idx];
        let new_size = data.len() as u64;
        if elf.is_fixed(s) {
            if new_size != s.size {
                return Err(ElfWriteError::FixedSize {
                    name: name.into(),
                    size: s.size,
                    new_size,
                });
            }
            if let Some(other) = elf.shares_bytes(idx) {
                return Err(ElfWriteError::Unsupported(format!(
                    "section {name} shares its file bytes with {other}"
                )));
            }
            placements.push(Placement::InPlace);
            continue;
        }
        let shared = elf.shares_bytes(idx).is_some();
        let ends_at_keep = s.kind != SHT_NOBITS && s.size > 0 && s.offset + s.size == keep;
        if ends_at_keep && !shared {
            keep = s.offset;
            placements.push(Placement::AppendTail);
        } else if new_size <= s.size && !shared && s.kind != SHT_NOBITS {
            placements.push(Placement::InPlace);
        } else {
            placements.push(Placement::Append {
                erase_old: !shared && s.kind != SHT_NOBITS && s.size > 0,
            });
        }
    }

    let mut shdrs = elf.shdrs.clone();
    let mut patches: Vec<(u64, Chunk<'a>)> = Vec::new();
    let mut tail: Vec<Chunk<'a>> = Vec::new();
    let mut cursor = keep;

    // Names of new sections: extend the name table where it is, if it is the last data
    // kept; otherwise append a copy of it followed by the new names.
    let mut new_names = Vec::new();
    let mut name_offsets = Vec::new();
    let st = &elf.shdrs[elf.shstrndx];
    let st_extends_in_place = st.offset + st.size == keep;
    let names_base = st.size;
    for &(found, name, _) in &targets {
        if found.is_none() {
            name_offsets.push(names_base + new_names.len() as u64);
            new_names.extend_from_slice(name.as_bytes());
            new_names.push(0);
        }
    }
    if !new_names.is_empty() {
        let st_new = &mut shdrs[elf.shstrndx];
        if !st_extends_in_place {
            st_new.offset = cursor;
            tail.push(Chunk::Input(st.offset, st.offset + st.size));
            cursor += st.size;
        }
        st_new.size += new_names.len() as u64;
        if st_new.size > u64::from(u32::MAX) {
            return Err(ElfWriteError::Unsupported(
                "section name table would exceed 4 GiB".into(),
            ));
        }
        cursor += new_names.len() as u64;
        tail.push(Chunk::Owned(new_names));
    }

    let mut name_offsets = name_offsets.into_iter();
    for (&(found, _, data), placement) in targets.iter().zip(&placements) {
        let new_size = data.len() as u64;
        let append = |tail: &mut Vec<Chunk<'a>>, cursor: &mut u64, align: u64| {
            let at = align_up(*cursor, align);
            if at > *cursor {
                tail.push(Chunk::Zeros(at - *cursor));
            }
            tail.push(Chunk::Data(data));
            *cursor = at + new_size;
            at
        };
        match (placement, found) {
            (Placement::New, _) => {
                let offset = append(&mut tail, &mut cursor, 1);
                shdrs.push(Shdr {
                    name: name_offsets.next().unwrap_or(0) as u32,
                    kind: SHT_PROGBITS,
                    flags: 0,
                    addr: 0,
                    offset,
                    size: new_size,
                    link: 0,
                    info: 0,
                    addralign: 1,
                    entsize: 0,
                });
            }
            (Placement::InPlace, Some(idx)) => {
                let s = &mut shdrs[idx];
                if new_size > 0 {
                    patches.push((s.offset, Chunk::Data(data)));
                }
                if s.size > new_size {
                    patches.push((s.offset + new_size, Chunk::Zeros(s.size - new_size)));
                }
                s.size = new_size;
            }
            (Placement::AppendTail, Some(idx)) => {
                let s = &mut shdrs[idx];
                s.offset = append(&mut tail, &mut cursor, s.addralign);
                s.size = new_size;
            }
            (Placement::Append { erase_old }, Some(idx)) => {
                let s = &mut shdrs[idx];
                if *erase_old {
                    patches.push((s.offset, Chunk::Zeros(s.size)));
                }
                s.offset = append(&mut tail, &mut cursor, s.addralign);
                s.size = new_size;
                if s.kind == SHT_NOBITS {
                    s.kind = SHT_PROGBITS;
                }
            }
            (_, None) => unreachable!("only new sections lack an index"),
        }
    }

    // The new section header table.
    let sht_align = if fmt.is64 { 8 } else { 4 };
    let shoff = align_up(cursor, sht_align);
    if shoff > cursor {
        tail.push(Chunk::Zeros(shoff - cursor));
    }
    let count = shdrs.len();
    let extended = elf.shnum_extended || count >= SHN_LORESERVE;
    if extended {
        shdrs[0].size = count as u64;
    }
    let mut sht = vec![0u8; count * fmt.shdr_size()];
    for (s, b) in shdrs.iter().zip(sht.chunks_exact_mut(fmt.shdr_size())) {
        for (v, what) in [(s.offset, "section offset"), (s.size, "section size")] {
            fmt.check_word(v, what)?;
        }
        s.write(fmt, b);
    }
    tail.push(Chunk::Owned(sht));

    // The ELF header, pointing at the new table.
    let mut ehdr = input[..fmt.ehdr_size()].to_vec();
    let (_, shoff_at, phentsize_at) = fmt.ehdr_offsets();
    fmt.check_word(shoff, "section header table offset")?;
    fmt.put_word(&mut ehdr, shoff_at, shoff);
    fmt.put_u16(
        &mut ehdr,
        phentsize_at + 6,
        if extended { 0 } else { count as u16 },
    );
    patches.push((0, Chunk::Owned(ehdr)));

    patches.sort_by_key(|(off, _)| *off);
    let mut end = 0;
    for (off, chunk) in &patches {
        if *off < end || off + chunk.len() > keep {
            return malformed("overlapping section contents");
        }
        end = off + chunk.len();
    }
    Ok(Plan {
        input,
        keep,
        patches,
        tail,
    })
}

/// Refuses sections whose contents other sections depend on.
fn check_replaceable(elf: &Elf<'_>, idx: usize, name: &str) -> Res<()> {
    let s = &elf.shdrs[idx];
    let refuse = |why: &str| {
        Err(ElfWriteError::Unsupported(format!(
            "cannot replace section {name} ([{idx}]): {why}"
        )))
    };
    if idx == elf.shstrndx {
        return refuse("it is the section name table");
    }
    if s.kind == SHT_NULL {
        return refuse("it is an SHT_NULL (inactive) section header");
    }
    if s.kind == SHT_NOBITS && !elf.is_fixed(s) {
        // An unloaded NOBITS section simply gets contents, as objcopy does.
    } else if s.kind == SHT_NOBITS {
        return refuse("it is a loaded SHT_NOBITS section");
    }
    for (j, o) in elf.shdrs.iter().enumerate() {
        if j != idx && o.kind != SHT_NULL && o.link as usize == idx {
            return refuse(&format!("section [{j}] links to it"));
        }
        if (o.kind == SHT_REL || o.kind == SHT_RELA) && o.info as usize == idx {
            return refuse(&format!("relocation section [{j}] applies to it"));
        }
    }
    Ok(())
}

/// Returns `input` with each named section's contents replaced by the given bytes, or
/// added as a new non-allocated `SHT_PROGBITS` section when the file has none by that
/// name (objcopy's `--add-section`, keeping section indices).
pub fn set_sections(input: &[u8], sections: &[(&str, &[u8])]) -> Result<Vec<u8>, ElfWriteError> {
    let plan = build_plan(input, sections)?;
    let mut out = Vec::with_capacity(plan.len() as usize);
    plan.write_to(&mut out, &mut |_| {})
        .expect("writing into a Vec cannot fail");
    Ok(out)
}

/// Sets the sections of the ELF file at `path` (see [`set_sections`]) atomically: the
/// new file is written next to it and renamed over it, keeping its mode, so on any
/// failure the original is untouched. A symbolic link is followed, not replaced.
pub fn write_sections_in_place(path: &Path, sections: &[(&str, Vec<u8>)]) -> Result<(), Error> {
    let real = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
    let file = std::fs::File::open(&real).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        return Err(Error::file(
            path,
            ElfWriteError::NotElf("empty file".into()).to_string(),
        ));
    }
    // The result goes to a new file renamed over this one: the mapping is never written.
    let map = crate::mmap::map_file(&file).map_err(|e| Error::io(path, e))?;
    let refs: Vec<(&str, &[u8])> = sections.iter().map(|(n, d)| (*n, d.as_slice())).collect();
    let plan = build_plan(&map, &refs).map_err(|e| Error::file(path, e.to_string()))?;
    crate::output::write_atomic_with(&real, |f| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        // Copied input pages are not read again: give them back, so rewriting a
        // 340 MB vmlinux does not leave it all resident. Best effort.
        plan.write_to(&mut w, &mut |piece| {
            let _ = crate::mmap::release_range(&map, piece);
        })?;
        w.flush()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 LE relocatable file: null section, `.text`, `.shstrtab`.
    fn tiny(is64: bool, le: bool) -> Vec<u8> {
        let fmt = Format { is64, le };
        let names = b"\0.text\0.shstrtab\0".to_vec();
        let text = b"\x90\x90\xc3\x00".to_vec();
        let eh = fmt.ehdr_size();
        let text_off = eh as u64;
        let names_off = text_off + text.len() as u64;
        let shoff = align_up(names_off + names.len() as u64, 8);
        let mut out = vec![0u8; shoff as usize + 3 * fmt.shdr_size()];
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = if is64 { 2 } else { 1 };
        out[5] = if le { 1 } else { 2 };
        out[6] = 1;
        fmt.put_u16(&mut out, 16, 1);
        fmt.put_u32(&mut out, 20, 1);
        let (_, shoff_at, phentsize_at) = fmt.ehdr_offsets();
        fmt.put_word(&mut out, shoff_at, shoff);
        fmt.put_u16(&mut out, phentsize_at - 2, eh as u16);
        fmt.put_u16(&mut out, phentsize_at + 4, fmt.shdr_size() as u16);
        fmt.put_u16(&mut out, phentsize_at + 6, 3);
        fmt.put_u16(&mut out, phentsize_at + 8, 2);
        out[text_off as usize..][..text.len()].copy_from_slice(&text);
        out[names_off as usize..][..names.len()].copy_from_slice(&names);
        let sh = |name, kind, flags, offset, size| Shdr {
            name,
            kind,
            flags,
            addr: 0,
            offset,
            size,
            link: 0,
            info: 0,
            addralign: 1,
            entsize: 0,
        };
        let hdrs = [
            sh(0, 0, 0, 0, 0),
            sh(1, SHT_PROGBITS, 6, text_off, text.len() as u64),
            sh(7, 3, 0, names_off, names.len() as u64),
        ];
        for (i, h) in hdrs.iter().enumerate() {
            let at = shoff as usize + i * fmt.shdr_size();
            h.write(fmt, &mut out[at..at + fmt.shdr_size()]);
        }
        out
    }

    fn section(elf_bytes: &[u8], name: &str) -> Option<(Shdr, Vec<u8>)> {
        let elf = Elf::parse(elf_bytes).unwrap();
        (1..elf.shdrs.len()).find_map(|i| {
            (elf.section_name(i).unwrap() == name.as_bytes()).then(|| {
                let s = elf.shdrs[i].clone();
                let d = match s.size {
                    0 => Vec::new(),
                    n => elf_bytes[s.offset as usize..(s.offset + n) as usize].to_vec(),
                };
                (s, d)
            })
        })
    }

    #[test]
    fn add_then_replace_all_formats() {
        for (is64, le) in [(true, true), (true, false), (false, true), (false, false)] {
            let input = tiny(is64, le);
            let out = set_sections(&input, &[(".BTF", b"hello BTF")]).unwrap();
            let (s, d) = section(&out, ".BTF").unwrap();
            assert_eq!(d, b"hello BTF");
            assert_eq!((s.kind, s.flags, s.addralign), (SHT_PROGBITS, 0, 1));
            assert_eq!(section(&out, ".text").unwrap().1, b"\x90\x90\xc3\x00");
            // .BTF is now the last data: a larger replacement rewrites it in place.
            let out2 = set_sections(&out, &[(".BTF", b"a longer BTF payload")]).unwrap();
            let (s2, d2) = section(&out2, ".BTF").unwrap();
            assert_eq!(d2, b"a longer BTF payload");
            assert_eq!(s2.offset, s.offset, "is64 {is64} le {le}");
            assert!(out2.len() - out.len() < 11 + 8);
            // A smaller one goes where the old one was.
            let out3 = set_sections(&out2, &[(".BTF", b"x"), (".BTF.base", b"yz")]).unwrap();
            assert_eq!(section(&out3, ".BTF").unwrap().1, b"x");
            assert_eq!(section(&out3, ".BTF.base").unwrap().1, b"yz");
            assert_eq!(Elf::parse(&out3).unwrap().shdrs.len(), 5);
        }
    }

    /// Past 0xff00 sections the count moves to section 0's `sh_size` (e_shnum = 0).
    #[test]
    fn extended_section_numbering() {
        use object::{Object, ObjectSection};
        let input = tiny(true, true);
        let names: Vec<String> = (0..SHN_LORESERVE).map(|i| format!(".s{i}")).collect();
        let reqs: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
        let out = set_sections(&input, &reqs).unwrap();
        let fmt = Format {
            is64: true,
            le: true,
        };
        assert_eq!(fmt.u16(&out, 60), 0, "e_shnum");
        let count = 3 + SHN_LORESERVE;
        let parsed = object::File::parse(&*out).unwrap();
        assert_eq!(parsed.sections().count(), count - 1);
        assert!(parsed.section_by_name(".s65279").is_some());
        // Adding to a file already in extended numbering keeps it.
        let out2 = set_sections(&out, &[(".BTF", b"xyz")]).unwrap();
        assert_eq!(fmt.u16(&out2, 60), 0, "e_shnum");
        let parsed = object::File::parse(&*out2).unwrap();
        assert_eq!(parsed.sections().count(), count);
        let btf = parsed.section_by_name(".BTF").unwrap();
        assert_eq!(btf.data().unwrap(), b"xyz");
        assert_eq!(
            parsed.section_by_name(".text").unwrap().data().unwrap(),
            b"\x90\x90\xc3\x00"
        );
    }

    #[test]
    fn garbage_and_truncation_are_errors() {
        assert!(matches!(
            set_sections(b"", &[]),
            Err(ElfWriteError::NotElf(_))
        ));
        assert!(matches!(
            set_sections(b"MZ\x90\x00 not an elf file", &[]),
            Err(ElfWriteError::NotElf(_))
        ));
        let good = tiny(true, true);
        for cut in [16, 40, 63, good.len() - 1, good.len() - 64] {
            let r = set_sections(&good[..cut], &[(".BTF", b"x")]);
            assert!(
                matches!(r, Err(ElfWriteError::Malformed(_))),
                "cut {cut}: {r:?}"
            );
        }
        let mut bad = good.clone();
        bad[4] = 9;
        assert!(matches!(
            set_sections(&bad, &[]),
            Err(ElfWriteError::Malformed(_))
        ));
    }

    /// Bytes after the section header table belong to no header: they are kept, and
    /// the new table goes after them.
    #[test]
    fn trailing_bytes_are_kept() {
        let mut input = tiny(false, false);
        input.extend_from_slice(b"TRAILER");
        let out = set_sections(&input, &[(".BTF", b"payload")]).unwrap();
        assert!(out[52..input.len() - 7] == input[52..input.len() - 7]);
        assert_eq!(&out[input.len() - 7..input.len()], b"TRAILER");
        assert_eq!(section(&out, ".BTF").unwrap().1, b"payload");
        assert_eq!(section(&out, ".text").unwrap().1, b"\x90\x90\xc3\x00");
    }

    /// An empty section's offset means nothing; giving it contents must not patch there.
    #[test]
    fn empty_section_gets_contents() {
        let mut input = tiny(true, true);
        let fmt = Format {
            is64: true,
            le: true,
        };
        let shoff = fmt.u64(&input, 40) as usize;
        // .text (section 1): size 0 at an offset past the end of the file.
        let text = shoff + 64;
        fmt.put(&mut input, text + 24, 1_000_000u64.to_le_bytes());
        fmt.put(&mut input, text + 32, 0u64.to_le_bytes());
        let out = set_sections(&input, &[(".text", b"")]).unwrap();
        assert_eq!(section(&out, ".text").unwrap().1, b"");
        let out = set_sections(&input, &[(".text", b"\xc3")]).unwrap();
        assert_eq!(section(&out, ".text").unwrap().1, b"\xc3");
    }

    #[test]
    fn bad_requests() {
        let good = tiny(true, true);
        assert!(set_sections(&good, &[("", b"x")]).is_err());
        assert!(set_sections(&good, &[(".a", b"x"), (".a", b"y")]).is_err());
        assert!(set_sections(&good, &[(".shstrtab", b"x")]).is_err());
        let mut signed = good.clone();
        signed.extend_from_slice(MODULE_SIG_MAGIC);
        let err = set_sections(&signed, &[(".BTF", b"x")]).unwrap_err();
        assert!(err.to_string().contains("signature"), "{err}");
        // Name the section name table ".text" too: which .text is meant is unclear.
        let mut twice = good.clone();
        let fmt = Format {
            is64: true,
            le: true,
        };
        let shoff = fmt.u64(&twice, 40) as usize;
        fmt.put_u32(&mut twice, shoff + 2 * 64, 1);
        let err = set_sections(&twice, &[(".text", b"x")]).unwrap_err();
        assert!(
            err.to_string()
                .contains("more than one section named .text"),
            "{err}"
        );
    }
}
