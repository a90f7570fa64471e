//! Locations: the unit's location lists ([`LocCtx`]), a parameter's
//! `DW_AT_location` ([`LocDie`]), a variable's static address, and the
//! `.debug_addr` / `.debug_loclists` index tables they go through.
//!
//! An index or offset outside its table reads as no location (no address), as a
//! failing libdw lookup does for pahole: the function or variable is then treated
//! as one without a location, as pahole treats it.

use super::die::{Cur, Val};
use super::types::LocDie;
use super::walk::Parser;
use crate::elf::read_uint;
use gimli::constants::*;

/// What reading a unit's location lists needs.
#[derive(Clone, Debug)]
pub struct LocCtx<'a> {
    /// `.debug_loc` and `.debug_loclists`.
    pub lists: gimli::LocationLists<super::Reader<'a>>,
    /// The unit's encoding (version, address size).
    pub encoding: gimli::Encoding,
    /// The byte order of the expressions' operands.
    pub endian: gimli::RunTimeEndian,
}

impl<'a> LocCtx<'a> {
    /// The location expressions of the entries of location list `off`, in order
    /// (base address entries hold none); ends at the list's end or at the first
    /// entry that cannot be read.
    pub fn list_exprs(&self, off: u64) -> impl Iterator<Item = &'a [u8]> {
        let mut entries = usize::try_from(off).ok().and_then(|off| {
            self.lists
                .raw_locations(gimli::LocationListsOffset(off), self.encoding)
                .ok()
        });
        std::iter::from_fn(move || loop {
            use gimli::RawLocListEntry as E;
            match entries.as_mut()?.next().ok().flatten()? {
                E::AddressOrOffsetPair { data, .. }
                | E::StartxEndx { data, .. }
                | E::StartxLength { data, .. }
                | E::OffsetPair { data, .. }
                | E::DefaultLocation { data }
                | E::StartEnd { data, .. }
                | E::StartLength { data, .. } => return Some(data.0.slice()),
                E::BaseAddress { .. } | E::BaseAddressx { .. } => continue,
            }
        })
    }
}

impl<'a, 'i: 'a> Parser<'a, 'i, '_> {
    /// The address at index `i` of the unit's `.debug_addr` table.
    pub(super) fn addrx(&self, i: u64) -> Option<u64> {
        let size = self.enc.addr_size;
        let at = self
            .addr_base
            .checked_add(i.checked_mul(u64::from(size))?)?;
        let at = usize::try_from(at).ok()?;
        let b = self
            .debug_addr
            .get(at..at.checked_add(usize::from(size))?)?;
        Some(read_uint(b, self.enc.little))
    }

    /// The `.debug_loclists` offset of location list `i` of the unit.
    fn loclistx(&self, i: u64) -> Option<u64> {
        let size = self.enc.offset_size;
        let at = self
            .loclists_base
            .checked_add(i.checked_mul(u64::from(size))?)?;
        let at = usize::try_from(at).ok()?;
        let b = self.loclists.get(at..at.checked_add(usize::from(size))?)?;
        self.loclists_base
            .checked_add(read_uint(b, self.enc.little))
    }

    /// A `DW_AT_location` value as a parameter location.
    pub(super) fn loc(&self, v: Option<Val<'a>>) -> LocDie<'a> {
        match v {
            Some(Val::Expr(e)) => LocDie::Expr(e),
            Some(Val::U(off)) => self.list_at(off),
            Some(Val::LocListX(i)) => self.loclistx(i).map_or(LocDie::None, |o| self.list_at(o)),
            _ => LocDie::None,
        }
    }

    fn list_at(&self, off: u64) -> LocDie<'a> {
        self.loc_min.set(self.loc_min.get().min(off));
        LocDie::List(off)
    }

    /// The address a variable's location expression starts with, if it starts
    /// with `DW_OP_addr` or `DW_OP_addrx` (pahole's `VSCOPE_GLOBAL`).
    pub(super) fn var_addr(&self, v: Option<Val<'a>>) -> Option<u64> {
        let Some(Val::Expr(e)) = v else {
            return None;
        };
        let (&op, rest) = e.split_first()?;
        if op == DW_OP_addr.0 {
            let n = usize::from(self.enc.addr_size);
            Some(read_uint(rest.get(..n)?, self.enc.little))
        } else if op == DW_OP_addrx.0 || op == DW_OP_GNU_addr_index.0 {
            let mut c = Cur::new(rest, self.enc.little);
            self.addrx(c.uleb().ok()?)
        } else {
            None
        }
    }
}
