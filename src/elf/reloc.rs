//! The relocations of a relocatable object's debug sections, applied as libdwfl
//! applies them for pahole: absolute `S + A` of 32 or 64 bits (string offsets,
//! section offsets, addresses), and RISC-V's label differences.

use super::RelocProblem;
use object::read::elf::FileHeader;
use object::{
    Endianness, Object, ObjectSection, ObjectSymbol, RelocationFlags, RelocationKind,
    RelocationTarget,
};

/// Applies the absolute relocations of debug section `sec` of the relocatable
/// object `obj` to `bytes`, its contents (`S + A`, 32 or 64 bits): string offsets,
/// section offsets and addresses. A symbol's value is its offset plus its section's
/// address in `layout` (libdwfl's layout; 0 for sections it does not place). An
/// error gives the relocation's offset in the section and what is wrong.
pub(super) fn apply_relocations<'a, Elf: FileHeader<Endian = Endianness>>(
    obj: &object::read::elf::ElfFile<'a, Elf>,
    sec: &object::read::elf::ElfSection<'a, '_, Elf>,
    bytes: &mut [u8],
    layout: &[u64],
) -> Result<(), (u64, RelocProblem)> {
    let little_endian = obj.is_little_endian();
    let riscv = matches!(
        obj.architecture(),
        object::Architecture::Riscv32 | object::Architecture::Riscv64
    );
    for (offset, reloc) in sec.relocations() {
        let fail = |problem| Err((offset, problem));
        let paired = match reloc.flags() {
            RelocationFlags::Elf { r_type } if riscv => RiscvOp::of(r_type),
            _ => None,
        };
        if reloc.kind() != RelocationKind::Absolute && paired.is_none() {
            if matches!(reloc.flags(), RelocationFlags::Elf { r_type: 0 }) {
                continue; // R_*_NONE
            }
            return fail(RelocProblem::Unsupported(format!("{:?}", reloc.flags())));
        }
        let sym_value = match reloc.target() {
            RelocationTarget::Symbol(idx) => {
                let sym = match obj.symbol_by_index(idx) {
                    Ok(sym) => sym,
                    Err(e) => return fail(RelocProblem::BadSymbol(e)),
                };
                let base = sym
                    .section_index()
                    .and_then(|i| layout.get(i.0))
                    .copied()
                    .unwrap_or(0);
                sym.address().wrapping_add(base)
            }
            RelocationTarget::Absolute => 0,
            _ => return fail(RelocProblem::UnsupportedTarget),
        };
        let Ok(at) = usize::try_from(offset) else {
            return fail(RelocProblem::OutOfRange);
        };
        // The addend is two's complement: adding it as u64 wraps as S + A does.
        let addend = reloc.addend().cast_unsigned();
        if let Some(op) = paired {
            let value = sym_value.wrapping_add(addend);
            if op.apply(bytes, at, value, little_endian).is_none() {
                return fail(RelocProblem::OutOfRange);
            }
            continue;
        }
        let size = usize::from(reloc.size() / 8);
        let Some(slot) = bytes
            .get_mut(at..at.saturating_add(size))
            .filter(|s| s.len() == size && (size == 4 || size == 8))
        else {
            return fail(RelocProblem::OutOfRange);
        };
        let implicit = if reloc.has_implicit_addend() {
            read_uint(slot, little_endian)
        } else {
            0
        };
        let value = sym_value.wrapping_add(addend).wrapping_add(implicit);
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
                    RiscvOp::Sub6 => u64::from(*b).wrapping_sub(value),
                    _ => value,
                };
                *b = (*b & 0xc0) | (low.to_le_bytes()[0] & 0x3f);
            }
            RiscvOp::SetUleb | RiscvOp::SubUleb => {
                let len = bytes.get(at..)?.iter().position(|b| b & 0x80 == 0)? + 1;
                let (mut old, mut shift) = (0u64, 0u32);
                for &b in &bytes[at..at + len] {
                    old |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
                    shift += 7;
                }
                let mut v = match self {
                    RiscvOp::SubUleb => old.wrapping_sub(value),
                    _ => value,
                };
                for (i, b) in bytes[at..at + len].iter_mut().enumerate() {
                    let more = if i + 1 < len { 0x80 } else { 0 };
                    *b = (v.to_le_bytes()[0] & 0x7f) | more;
                    v >>= 7;
                }
            }
        }
        Some(())
    }
}

/// The unsigned integer in `slot` (1 to 8 bytes), little- or big-endian: the one
/// reader of a sized field of the input (relocation slots, DWARF attribute values).
#[inline]
pub(crate) fn read_uint(slot: &[u8], le: bool) -> u64 {
    // Up to 8 bytes as one load of a zero-padded word: the byte loop below was 1%
    // of a vmlinux run's instructions, most of it reading 2- and 4-byte DWARF
    // fields.
    let n = slot.len();
    if n <= 8 {
        let mut w = [0u8; 8];
        return if le {
            w[..n].copy_from_slice(slot);
            u64::from_le_bytes(w)
        } else {
            w[8 - n..].copy_from_slice(slot);
            u64::from_be_bytes(w)
        };
    }
    let mut v = 0u64;
    if le {
        for &b in slot.iter().rev() {
            v = v << 8 | u64::from(b);
        }
    } else {
        for &b in slot {
            v = v << 8 | u64::from(b);
        }
    }
    v
}

/// Writes the low `slot.len()` bytes of `v` into `slot`, little- or big-endian.
fn write_uint(slot: &mut [u8], mut v: u64, le: bool) {
    let n = slot.len();
    for i in 0..n {
        let idx = if le { i } else { n - 1 - i };
        slot[idx] = v.to_le_bytes()[0];
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

    #[test]
    fn uint_of_every_width_in_both_orders() {
        let bytes = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08];
        for n in 1..=8 {
            let b = &bytes[..n];
            let (mut le, mut be) = (0u64, 0u64);
            for (i, &x) in b.iter().enumerate() {
                le |= u64::from(x) << (8 * i);
                be = be << 8 | u64::from(x);
            }
            assert_eq!(read_uint(b, true), le, "{n} bytes, little-endian");
            assert_eq!(read_uint(b, false), be, "{n} bytes, big-endian");
        }
    }
}
