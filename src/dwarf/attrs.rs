//! Attribute decoding: the attributes of a DIE the encoder reads ([`is_needed`]),
//! and how each decoded value ([`Val`]) lands in a DIE's [`Attrs`].

use super::die::{Cur, DieError, Val};
use super::error::DwarfErrorKind;
use super::types::{DieRef, Name};
use gimli::constants::*;

/// The attributes of a DIE that the encoder needs.
#[derive(Default)]
pub(super) struct Attrs<'a> {
    pub(super) name: Name<'a>,
    pub(super) ty: DieRef,
    pub(super) byte_size: Option<u64>,
    pub(super) bit_size: Option<u64>,
    pub(super) data_bit_offset: Option<u64>,
    pub(super) bit_offset: Option<i64>,
    pub(super) member_location: Option<u64>,
    pub(super) encoding: u8,
    pub(super) declaration: bool,
    pub(super) const_value: Option<i64>,
    pub(super) const_str: Name<'a>,
    pub(super) upper_bound: Option<u64>,
    pub(super) count: Option<u64>,
    pub(super) lower_bound: Option<u64>,
    /// `DW_AT_type`, `DW_AT_abstract_origin` or `DW_AT_specification` refers
    /// outside the unit.
    pub(super) far_ref: bool,
    pub(super) origin: DieRef,
    pub(super) spec: DieRef,
    pub(super) low_pc: Option<Val<'a>>,
    pub(super) location: Option<Val<'a>>,
    pub(super) has_const: bool,
    pub(super) external: bool,
    pub(super) artificial: bool,
    /// A non-zero `DW_AT_inline`.
    pub(super) inline: bool,
    /// `DW_AT_calling_convention` is `DW_CC_nocall`.
    pub(super) nocall: bool,
}

/// Stores one decoded attribute in `a`.
#[inline]
pub(super) fn take_attr<'a>(a: &mut Attrs<'a>, name: DwAt, v: Val<'a>) -> Result<(), DieError> {
    match name {
        DW_AT_name => {
            if let Val::Str(s) = v {
                a.name = s;
            }
        }
        DW_AT_type => a.ty = die_ref(a, v),
        DW_AT_byte_size => a.byte_size = unsigned(v),
        DW_AT_bit_size => a.bit_size = unsigned(v),
        DW_AT_data_bit_offset => a.data_bit_offset = unsigned(v),
        DW_AT_bit_offset => {
            a.bit_offset = match v {
                Val::S(x) => Some(x),
                Val::U(x) => Some(x as i64),
                _ => None,
            }
        }
        DW_AT_data_member_location => {
            a.member_location = match v {
                Val::Expr(e) => plus_uconst(e),
                v => unsigned(v),
            }
        }
        DW_AT_encoding => {
            if let Val::U(e) = v {
                a.encoding = u8::try_from(e).map_err(|_| DwarfErrorKind::TooLarge {
                    what: "DW_AT_encoding",
                    value: e,
                })?;
            }
        }
        DW_AT_declaration => a.declaration = matches!(v, Val::U(x) if x != 0),
        DW_AT_external => a.external = matches!(v, Val::U(x) if x != 0),
        DW_AT_artificial => a.artificial = matches!(v, Val::U(x) if x != 0),
        DW_AT_inline => a.inline = matches!(v, Val::U(x) if x != 0),
        DW_AT_calling_convention => {
            a.nocall = matches!(v, Val::U(x) if x == u64::from(DW_CC_nocall.0))
        }
        DW_AT_abstract_origin => a.origin = die_ref(a, v),
        DW_AT_specification => a.spec = die_ref(a, v),
        DW_AT_low_pc => a.low_pc = Some(v),
        DW_AT_location => a.location = Some(v),
        DW_AT_const_value => {
            a.has_const = true;
            match v {
                Val::U(x) => a.const_value = Some(x as i64),
                Val::S(x) => a.const_value = Some(x),
                Val::Str(s) => a.const_str = s,
                _ => {}
            }
        }
        DW_AT_upper_bound => a.upper_bound = unsigned(v),
        DW_AT_count => a.count = unsigned(v),
        DW_AT_lower_bound => a.lower_bound = unsigned(v),
        _ => {}
    }
    Ok(())
}

/// A reference attribute's DIE. A reference into another unit is noted (the
/// caller refuses the DIE); a value of a non-reference form is void, as pahole's
/// `attr_type` reads it (libdw finds no DIE for it, and pahole takes 0).
#[inline]
fn die_ref(a: &mut Attrs<'_>, v: Val<'_>) -> DieRef {
    match v {
        Val::Ref(o) => DieRef(o),
        Val::FarRef => {
            a.far_ref = true;
            DieRef::VOID
        }
        _ => DieRef::VOID,
    }
}

/// A constant as unsigned (sdata reinterpreted); None for other shapes (bounds
/// given as expressions or references, i.e. VLAs, read as unknown).
#[inline]
fn unsigned(v: Val<'_>) -> Option<u64> {
    match v {
        Val::U(x) => Some(x),
        Val::S(x) => Some(x as u64),
        _ => None,
    }
}

/// The offset of a `DW_OP_plus_uconst N` member location expression.
fn plus_uconst(e: &[u8]) -> Option<u64> {
    let (&op, rest) = e.split_first()?;
    if op != DW_OP_plus_uconst.0 {
        return None;
    }
    let mut c = Cur::new(rest, true);
    c.uleb().ok()
}

/// The attributes [`take_attr`] uses.
#[inline]
pub(super) fn is_needed(name: DwAt) -> bool {
    matches!(
        name,
        DW_AT_name
            | DW_AT_type
            | DW_AT_byte_size
            | DW_AT_bit_size
            | DW_AT_data_bit_offset
            | DW_AT_bit_offset
            | DW_AT_data_member_location
            | DW_AT_encoding
            | DW_AT_declaration
            | DW_AT_const_value
            | DW_AT_upper_bound
            | DW_AT_count
            | DW_AT_lower_bound
            | DW_AT_external
            | DW_AT_artificial
            | DW_AT_abstract_origin
            | DW_AT_specification
            | DW_AT_low_pc
            | DW_AT_location
            | DW_AT_inline
            | DW_AT_calling_convention
    )
}
