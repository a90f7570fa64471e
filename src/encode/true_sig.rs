//! The location facts `true_signature` adds for functions whose calling convention
//! clang changed (`DW_CC_nocall`): pahole master's `parameter__decode_location`
//! and `parameter__finish_piece_decode`. A parameter whose first location is a
//! constant or a stack slot is not passed in its register, and an aggregate of which
//! only one field reaches a register is passed as that field (named
//! `PARAM__FIELD`, with the field's type).

use crate::dwarf::ops::{is_const, DW_OP_FBREG, DW_OP_PIECE, DW_OP_STACK_VALUE};
use crate::dwarf::types::{CuTypes, DieRef, LocCtx, LocDie, Name, RefKind, TypeDie};

/// What the location list of one parameter says, beyond its register.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Facts {
    /// The first entry is a constant (`DW_OP_litN`, `constu`, `consts`):
    /// pahole's `loc_const_value`.
    pub const_value: bool,
    /// The first entry is a frame-base offset alone: `loc_stack`.
    pub stack: bool,
    /// Byte offsets (bits) of the fields that reach the first and the second
    /// register, for an aggregate wider than a register (`first_reg_fields`,
    /// `second_reg_fields`).
    pub first: u64,
    pub second: u64,
}

impl Facts {
    /// Some field reaches a register (`parameter__has_piece_info`).
    pub fn has_pieces(&self) -> bool {
        self.first != 0 || self.second != 0
    }

    /// Fields reach both registers: the whole aggregate is passed.
    pub fn full(&self) -> bool {
        self.first != 0 && self.second != 0
    }

    /// The byte offset of the one field that reaches a register, if exactly one
    /// does (`parameter__finish_piece_decode`).
    pub fn single_field(&self, addr: u64) -> Option<u64> {
        if self.full() || !self.has_pieces() {
            return None;
        }
        if self.first.count_ones() >= 2 || self.second.count_ones() >= 2 {
            return None;
        }
        Some(if self.first.count_ones() == 1 {
            self.first.trailing_zeros() as u64
        } else {
            addr + self.second.trailing_zeros() as u64
        })
    }
}

/// The facts of a parameter's location; `wide`: its type is wider than a register
/// on an architecture that passes such aggregates in two (`addr`: register bytes).
pub(super) fn facts(cu: &CuTypes<'_>, loc: LocDie<'_>, wide: bool, addr: u64) -> Facts {
    let mut f = Facts::default();
    let Some(locs) = cu.locs.as_ref() else {
        return f;
    };
    let mut ops = Vec::new();
    let mut entry = |k: usize, expr: &[u8]| {
        if !decode(expr, locs, &mut ops) || ops.is_empty() {
            return;
        }
        let stack_value = ops.last().is_some_and(|o| o.0 == DW_OP_STACK_VALUE);
        let n = if ops.len() == 2 && stack_value {
            1
        } else {
            ops.len()
        };
        let first = ops[0].0;
        if k == 0 && is_const(first) {
            f.const_value = true;
        }
        if n == 1 {
            f.stack |= k == 0 && first == DW_OP_FBREG;
            return;
        }
        if is_const(first) || !wide {
            return;
        }
        // Pieces: each `DW_OP_piece N` after a register closes the field that
        // starts at the running offset (a leading piece only moves it).
        let mut off = 0u64;
        for (i, &(op, num)) in ops[..n].iter().enumerate() {
            if op != DW_OP_PIECE {
                continue;
            }
            if i == 0 {
                off = num;
                continue;
            }
            let (bits, at) = if off < addr {
                (&mut f.first, off)
            } else {
                (&mut f.second, off - addr)
            };
            if at < 64 {
                *bits |= 1 << at;
            }
            off = off.wrapping_add(num);
        }
    };
    match loc {
        LocDie::None => {}
        LocDie::Expr(e) => entry(0, e),
        LocDie::List(off) => {
            for (k, data) in locs.list_exprs(off).enumerate() {
                entry(k, data);
            }
        }
    }
    f
}

/// Each operation's opcode, with a piece's size in bytes; false if undecodable.
fn decode(expr: &[u8], locs: &LocCtx<'_>, out: &mut Vec<(u8, u64)>) -> bool {
    out.clear();
    let mut r = gimli::EndianSlice::new(expr, locs.endian);
    while !r.is_empty() {
        let code = r.slice()[0];
        match gimli::Operation::parse(&mut r, locs.encoding) {
            Ok(gimli::Operation::Piece { size_in_bits, .. }) => out.push((code, size_in_bits / 8)),
            Ok(_) => out.push((code, 0)),
            Err(_) => return false,
        }
    }
    true
}

/// The named member at byte `offset` of the struct parameter type `ty` (through
/// typedefs and qualifiers, which have no size of their own): its name and type
/// (`get_member_with_offset`).
pub(super) fn member_at<'a>(
    cu: &CuTypes<'a>,
    mut ty: DieRef,
    offset: u64,
) -> Option<(Name<'a>, DieRef)> {
    for _ in 0..64 {
        match &cu.types[cu.index_of(ty)?] {
            TypeDie::Ref {
                kind: RefKind::Typedef | RefKind::Const | RefKind::Volatile | RefKind::Restrict,
                ty: next,
                ..
            } => ty = *next,
            TypeDie::Composite {
                is_union: false,
                members,
                ..
            } => {
                let m = members.iter().find(|m| m.bit_offset == offset * 8)?;
                return (!m.name.is_empty() && m.ty.0 != 0).then_some((m.name, m.ty));
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_field_of_pieces() {
        // piece 8 (not in a register); reg5; piece 8: the field at byte 8.
        let f = Facts {
            second: 1,
            ..Facts::default()
        };
        assert_eq!(f.single_field(8), Some(8));
        let f = Facts {
            first: 1,
            second: 1,
            ..Facts::default()
        };
        assert!(f.full() && f.single_field(8).is_none());
        let f = Facts {
            first: 0b101,
            ..Facts::default()
        };
        assert_eq!(f.single_field(8), None, "two fields in one register");
    }
}
