//! The input ELF file: mapped once with `memmap2`, its debug sections located, and
//! made ready for DWARF parsing.
//!
//! Sections of a linked image (vmlinux) are used in place, straight from the mapping.
//! Two cases need an owned copy: compressed sections (`SHF_COMPRESSED`, zlib or zstd)
//! are inflated, and the `.debug_*` sections of a relocatable object (a kernel module)
//! get their `.rela.debug_*` relocations applied, because until then every string or
//! section offset in them reads as zero.

use crate::Error;
use object::{
    Object, ObjectSection, ObjectSymbol, RelocationFlags, RelocationKind, RelocationTarget,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The DWARF sections we read; each is located once when the file is opened.
pub const DEBUG_SECTIONS: &[&str] = &[
    ".debug_info",
    ".debug_abbrev",
    ".debug_str",
    ".debug_str_offsets",
    ".debug_line",
    ".debug_line_str",
    ".debug_addr",
    ".debug_rnglists",
    ".debug_ranges",
    ".debug_loclists",
    ".debug_loc",
    ".debug_types",
];

/// Where a section's bytes live.
enum SectionData {
    /// A range of the mapped file, used in place.
    Mapped { start: usize, len: usize },
    /// Inflated or relocated bytes.
    Owned(Vec<u8>),
}

/// An opened input ELF file.
pub struct ElfInput {
    path: PathBuf,
    map: memmap2::Mmap,
    sections: HashMap<&'static str, SectionData>,
    little_endian: bool,
    relocatable: bool,
    /// The symbol table and section headers, when they had to be read to open the
    /// file (a relocatable object's section layout); the encoder reuses them.
    symbols: Option<std::sync::Arc<crate::symbols::ElfSymbols>>,
}

impl ElfInput {
    /// Maps `path` and prepares its debug sections. Fails with an error naming the
    /// file if it cannot be read, is not an ELF file, or has no `.debug_info`.
    pub fn open(path: &Path) -> Result<ElfInput, Error> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let map = crate::mmap::map_file(&file).map_err(|e| Error::io(path, e))?;
        let data: &[u8] = &map;
        if data.len() < 4 || data[..4] != *b"\x7fELF" {
            return Err(Error::file(path, "not an ELF file"));
        }
        let obj = object::File::parse(data)
            .map_err(|e| Error::file(path, format!("cannot parse ELF: {e}")))?;
        let relocatable = obj.kind() == object::ObjectKind::Relocatable;
        let little_endian = obj.is_little_endian();
        // pahole reads modules through libdwfl, which relocates their DWARF with
        // the section addresses it lays out itself: use the same addresses.
        let symbols = if relocatable {
            Some(std::sync::Arc::new(crate::symbols::ElfSymbols::parse(
                path, data,
            )?))
        } else {
            None
        };
        let layout: Vec<u64> = symbols
            .iter()
            .flat_map(|syms| syms.sections.iter().map(|s| s.addr))
            .collect();
        let mut sections = HashMap::new();
        for &name in DEBUG_SECTIONS {
            let Some(sec) = obj.section_by_name(name) else {
                continue;
            };
            let sd = load_section(&obj, &sec, data, relocatable, little_endian, &layout)
                .map_err(|msg| Error::file(path, format!("section {name}: {msg}")))?;
            sections.insert(name, sd);
        }
        drop(obj);
        let input = ElfInput {
            path: path.to_path_buf(),
            map,
            sections,
            little_endian,
            relocatable,
            symbols,
        };
        if input.section(".debug_info").is_empty() {
            return Err(Error::file(
                path,
                "no DWARF debug information (.debug_info is missing or empty)",
            ));
        }
        Ok(input)
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file is little-endian.
    pub fn is_little_endian(&self) -> bool {
        self.little_endian
    }

    /// Whether the file is a relocatable object (a kernel module).
    pub fn is_relocatable(&self) -> bool {
        self.relocatable
    }

    /// The (uncompressed, relocated) bytes of a debug section; empty if absent.
    pub fn section(&self, name: &str) -> &[u8] {
        match self.sections.get(name) {
            Some(SectionData::Mapped { start, len }) => &self.map[*start..*start + *len],
            Some(SectionData::Owned(v)) => v,
            None => &[],
        }
    }

    /// The symbol table and section headers if opening the file read them (a
    /// relocatable object), so they are not parsed twice.
    pub fn parsed_symbols(&self) -> Option<std::sync::Arc<crate::symbols::ElfSymbols>> {
        self.symbols.clone()
    }

    /// The whole mapped file.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The mapping itself, to release pages of consumed sections
    /// ([`crate::mmap::ReleaseFront`]).
    pub fn map(&self) -> &memmap2::Mmap {
        &self.map
    }
}

/// Loads one section: in place when possible, otherwise an owned, inflated and
/// relocated copy.
fn load_section(
    obj: &object::File<'_>,
    sec: &object::Section<'_, '_>,
    file: &[u8],
    relocatable: bool,
    little_endian: bool,
    layout: &[u64],
) -> Result<SectionData, String> {
    let range = sec.compressed_file_range().map_err(|e| e.to_string())?;
    let compressed = range.format != object::CompressionFormat::None;
    if compressed
        && !plausible_inflation(range.format, range.compressed_size, range.uncompressed_size)
    {
        // The claimed size would size the buffer the section is inflated into.
        return Err(format!(
            "compression header claims {} bytes from {} compressed bytes",
            range.uncompressed_size, range.compressed_size
        ));
    }
    let has_relocs = relocatable && sec.relocations().next().is_some();
    if !compressed && !has_relocs {
        let Some((off, size)) = sec.file_range() else {
            // SHT_NOBITS: no bytes in the file.
            return Ok(SectionData::Owned(Vec::new()));
        };
        let (start, len) = (off as usize, size as usize);
        if start.checked_add(len).is_none_or(|end| end > file.len()) {
            return Err("extends past the end of the file (truncated?)".into());
        }
        return Ok(SectionData::Mapped { start, len });
    }
    let mut bytes = sec
        .uncompressed_data()
        .map_err(|e| e.to_string())?
        .into_owned();
    if has_relocs {
        apply_relocations(obj, sec, &mut bytes, little_endian, layout)?;
    }
    Ok(SectionData::Owned(bytes))
}

/// Whether `compressed` bytes can inflate to `claimed` bytes: deflate reaches at most
/// 1032:1, zstd (RLE blocks) about 43,700:1. A larger claim is a damaged header, and
/// must not size an allocation (a fuzzed header asked for 2^56 bytes).
fn plausible_inflation(format: object::CompressionFormat, compressed: u64, claimed: u64) -> bool {
    let ratio = match format {
        object::CompressionFormat::Zlib => 1032,
        _ => 1 << 16,
    };
    claimed <= compressed.saturating_mul(ratio).saturating_add(4096)
}

/// Applies the absolute relocations of a debug section of a relocatable object
/// (`S + A`, 32 or 64 bits): string offsets, section offsets and addresses. A
/// symbol's value is its offset plus its section's address in `layout` (libdwfl's
/// layout; 0 for sections it does not place).
fn apply_relocations(
    obj: &object::File<'_>,
    sec: &object::Section<'_, '_>,
    bytes: &mut [u8],
    little_endian: bool,
    layout: &[u64],
) -> Result<(), String> {
    let riscv = matches!(
        obj.architecture(),
        object::Architecture::Riscv32 | object::Architecture::Riscv64
    );
    for (offset, reloc) in sec.relocations() {
        let paired = match reloc.flags() {
            RelocationFlags::Elf { r_type } if riscv => RiscvOp::of(r_type),
            _ => None,
        };
        if reloc.kind() != RelocationKind::Absolute && paired.is_none() {
            if matches!(reloc.flags(), RelocationFlags::Elf { r_type: 0 }) {
                continue; // R_*_NONE
            }
            return Err(format!(
                "unsupported relocation {:?} at {offset:#x}",
                reloc.flags()
            ));
        }
        let sym_value = match reloc.target() {
            RelocationTarget::Symbol(idx) => {
                let sym = obj
                    .symbol_by_index(idx)
                    .map_err(|e| format!("relocation at {offset:#x}: {e}"))?;
                let base = sym
                    .section_index()
                    .and_then(|i| layout.get(i.0))
                    .copied()
                    .unwrap_or(0);
                sym.address().wrapping_add(base)
            }
            RelocationTarget::Absolute => 0,
            _ => {
                return Err(format!(
                    "relocation at {offset:#x} has an unsupported target"
                ))
            }
        };
        let at = offset as usize;
        if let Some(op) = paired {
            let value = sym_value.wrapping_add(reloc.addend() as u64);
            op.apply(bytes, at, value, little_endian)
                .ok_or_else(|| format!("relocation at {offset:#x} is out of range"))?;
            continue;
        }
        let size = reloc.size() as usize / 8;
        let slot = bytes
            .get_mut(at..at.saturating_add(size))
            .filter(|s| s.len() == size && (size == 4 || size == 8))
            .ok_or_else(|| format!("relocation at {offset:#x} is out of range"))?;
        let implicit = if reloc.has_implicit_addend() {
            read_uint(slot, little_endian)
        } else {
            0
        };
        let value = sym_value
            .wrapping_add(reloc.addend() as u64)
            .wrapping_add(implicit);
        write_uint(slot, value, little_endian);
    }
    Ok(())
}

/// RISC-V's relocations of label differences in debug sections (the linker may
/// relax the code between two labels, so the assembler leaves `end - start` to
/// it): add, subtract or set the value `S + A` in a field of 1, 2, 4 or 8 bytes,
/// of 6 bits, or a ULEB128 whose length stays.
#[derive(Clone, Copy, Debug)]
enum RiscvOp {
    Add(usize),
    Sub(usize),
    Set(usize),
    Sub6,
    Set6,
    SetUleb,
    SubUleb,
}

impl RiscvOp {
    fn of(r_type: u32) -> Option<RiscvOp> {
        use object::elf::*;
        Some(match r_type {
            R_RISCV_ADD8 => RiscvOp::Add(1),
            R_RISCV_ADD16 => RiscvOp::Add(2),
            R_RISCV_ADD32 => RiscvOp::Add(4),
            R_RISCV_ADD64 => RiscvOp::Add(8),
            R_RISCV_SUB8 => RiscvOp::Sub(1),
            R_RISCV_SUB16 => RiscvOp::Sub(2),
            R_RISCV_SUB32 => RiscvOp::Sub(4),
            R_RISCV_SUB64 => RiscvOp::Sub(8),
            R_RISCV_SET8 => RiscvOp::Set(1),
            R_RISCV_SET16 => RiscvOp::Set(2),
            R_RISCV_SET32 => RiscvOp::Set(4),
            R_RISCV_SUB6 => RiscvOp::Sub6,
            R_RISCV_SET6 => RiscvOp::Set6,
            R_RISCV_SET_ULEB128 => RiscvOp::SetUleb,
            R_RISCV_SUB_ULEB128 => RiscvOp::SubUleb,
            _ => return None,
        })
    }

    /// Applies `value` at `bytes[at..]`; None if the field is out of range.
    fn apply(self, bytes: &mut [u8], at: usize, value: u64, le: bool) -> Option<()> {
        let field = |n: usize, bytes: &mut [u8]| -> Option<std::ops::Range<usize>> {
            let r = at..at.checked_add(n)?;
            bytes.get(r.clone()).map(|_| r)
        };
        match self {
            RiscvOp::Add(n) | RiscvOp::Sub(n) | RiscvOp::Set(n) => {
                let r = field(n, bytes)?;
                let old = read_uint(&bytes[r.clone()], le);
                let new = match self {
                    RiscvOp::Add(_) => old.wrapping_add(value),
                    RiscvOp::Sub(_) => old.wrapping_sub(value),
                    _ => value,
                };
                write_uint(&mut bytes[r], new, le);
            }
            RiscvOp::Sub6 | RiscvOp::Set6 => {
                let b = bytes.get_mut(at)?;
                let low = match self {
                    RiscvOp::Sub6 => (*b as u64).wrapping_sub(value),
                    _ => value,
                };
                *b = (*b & 0xc0) | (low as u8 & 0x3f);
            }
            RiscvOp::SetUleb | RiscvOp::SubUleb => {
                let len = bytes.get(at..)?.iter().position(|b| b & 0x80 == 0)? + 1;
                let (mut old, mut shift) = (0u64, 0u32);
                for &b in &bytes[at..at + len] {
                    old |= ((b & 0x7f) as u64).checked_shl(shift).unwrap_or(0);
                    shift += 7;
                }
                let mut v = match self {
                    RiscvOp::SubUleb => old.wrapping_sub(value),
                    _ => value,
                };
                for (i, b) in bytes[at..at + len].iter_mut().enumerate() {
                    let more = if i + 1 < len { 0x80 } else { 0 };
                    *b = (v & 0x7f) as u8 | more;
                    v >>= 7;
                }
            }
        }
        Some(())
    }
}

pub(crate) fn read_uint(slot: &[u8], le: bool) -> u64 {
    let mut v = 0u64;
    for i in 0..slot.len() {
        let b = if le {
            slot[slot.len() - 1 - i]
        } else {
            slot[i]
        };
        v = v << 8 | b as u64;
    }
    v
}

fn write_uint(slot: &mut [u8], mut v: u64, le: bool) {
    let n = slot.len();
    for i in 0..n {
        let idx = if le { i } else { n - 1 - i };
        slot[idx] = v as u8;
        v >>= 8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn riscv_label_differences() {
        use object::elf::*;
        let op = |t| RiscvOp::of(t).unwrap();
        // end - start in a 4-byte field: ADD32 end, then SUB32 start.
        let mut b = [0u8; 4];
        op(R_RISCV_ADD32).apply(&mut b, 0, 0x1050, true).unwrap();
        op(R_RISCV_SUB32).apply(&mut b, 0, 0x1010, true).unwrap();
        assert_eq!(b, [0x40, 0, 0, 0]);
        // DW_CFA_advance_loc: the low 6 bits only.
        let mut b = [0x40 | 0x3f];
        op(R_RISCV_SET6).apply(&mut b, 0, 0x12, true).unwrap();
        op(R_RISCV_SUB6).apply(&mut b, 0, 0x02, true).unwrap();
        assert_eq!(b, [0x40 | 0x10]);
        // A ULEB128 keeps its length: 300 in two bytes, minus 44.
        let mut b = [0x80, 0x00, 0x7f];
        op(R_RISCV_SET_ULEB128).apply(&mut b, 0, 300, true).unwrap();
        assert_eq!(b, [0xac, 0x02, 0x7f]);
        op(R_RISCV_SUB_ULEB128).apply(&mut b, 0, 44, true).unwrap();
        assert_eq!(b, [0x80, 0x02, 0x7f]);
        assert!(
            op(R_RISCV_ADD64).apply(&mut b, 0, 1, true).is_none(),
            "out of range"
        );
        assert!(RiscvOp::of(R_RISCV_CALL_PLT).is_none());
    }

    #[test]
    fn uint_round_trip() {
        let mut b = [0u8; 4];
        write_uint(&mut b, 0x1234_5678, true);
        assert_eq!(b, [0x78, 0x56, 0x34, 0x12]);
        assert_eq!(read_uint(&b, true), 0x1234_5678);
        write_uint(&mut b, 0x1234_5678, false);
        assert_eq!(b, [0x12, 0x34, 0x56, 0x78]);
        assert_eq!(read_uint(&b, false), 0x1234_5678);
    }
}
