//! The DWARF expression opcodes that pahole's parameter-location rules look at
//! (DWARF 5 §2.5 and §2.6), as bytes, with the classes those rules test. The values
//! are gimli's.

/// `DW_OP_reg0`; `reg0 + N` names register N (N < 32).
pub const DW_OP_REG0: u8 = gimli::DW_OP_reg0.0;
/// `DW_OP_breg0`; `breg0 + N` is register N plus an offset (N < 32).
pub const DW_OP_BREG0: u8 = gimli::DW_OP_breg0.0;
/// `DW_OP_lit0`; `lit0 + N` is the constant N (N < 32).
pub const DW_OP_LIT0: u8 = gimli::DW_OP_lit0.0;
/// `DW_OP_constu`.
pub const DW_OP_CONSTU: u8 = gimli::DW_OP_constu.0;
/// `DW_OP_consts`.
pub const DW_OP_CONSTS: u8 = gimli::DW_OP_consts.0;
/// `DW_OP_fbreg`: a stack slot.
pub const DW_OP_FBREG: u8 = gimli::DW_OP_fbreg.0;
/// `DW_OP_piece`.
pub const DW_OP_PIECE: u8 = gimli::DW_OP_piece.0;
/// `DW_OP_stack_value`.
pub const DW_OP_STACK_VALUE: u8 = gimli::DW_OP_stack_value.0;
/// `DW_OP_entry_value`.
pub const DW_OP_ENTRY_VALUE: u8 = gimli::DW_OP_entry_value.0;
/// `DW_OP_GNU_entry_value`, its GNU predecessor.
pub const DW_OP_GNU_ENTRY_VALUE: u8 = gimli::DW_OP_GNU_entry_value.0;

/// `DW_OP_reg0` … `DW_OP_reg31`.
pub fn is_reg(op: u8) -> bool {
    (DW_OP_REG0..DW_OP_REG0 + 32).contains(&op)
}

/// `DW_OP_breg0` … `DW_OP_breg31`.
pub fn is_breg(op: u8) -> bool {
    (DW_OP_BREG0..DW_OP_BREG0 + 32).contains(&op)
}

/// `DW_OP_lit0` … `DW_OP_lit31`, `DW_OP_constu`, `DW_OP_consts`.
pub fn is_const(op: u8) -> bool {
    (DW_OP_LIT0..DW_OP_LIT0 + 32).contains(&op) || op == DW_OP_CONSTU || op == DW_OP_CONSTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_are_the_specs() {
        assert_eq!(
            [
                DW_OP_REG0,
                DW_OP_BREG0,
                DW_OP_LIT0,
                DW_OP_CONSTU,
                DW_OP_CONSTS
            ],
            [0x50, 0x70, 0x30, 0x10, 0x11]
        );
        assert_eq!(
            [
                DW_OP_FBREG,
                DW_OP_PIECE,
                DW_OP_STACK_VALUE,
                DW_OP_ENTRY_VALUE
            ],
            [0x91, 0x93, 0x9f, 0xa3]
        );
        assert!(is_reg(0x6f) && !is_reg(0x70) && is_breg(0x8f) && !is_breg(0x90));
        assert!(is_const(0x4f) && !is_const(0x50) && is_const(0x11) && !is_const(0x12));
    }
}
