//! A lean DIE reader for the hot loop: walks a unit's DIE bytes directly, skipping
//! the attributes it does not need by precomputed sizes and decoding only the few
//! forms the type encoder reads.
//!
//! gimli still parses the unit headers and the abbreviation tables; this module
//! replaces only gimli's per-attribute decoding, which built a full `AttributeValue`
//! for every attribute of every DIE and was the largest cost of a vmlinux run.

use super::error::DwarfErrorKind;
use super::types::Name;
use gimli::constants::*;
use gimli::DwForm;

/// A decoding error: what is wrong (the caller knows where).
pub type DieError = DwarfErrorKind;

type Result<T> = std::result::Result<T, DieError>;

fn eof() -> DieError {
    DwarfErrorKind::Truncated
}

/// A cursor over bytes with the unit's byte order: the bytes not read yet, so that
/// each read checks one length.
#[derive(Clone, Copy)]
pub struct Cur<'i> {
    rest: &'i [u8],
    len: usize,
    little: bool,
}

impl<'i> Cur<'i> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'i [u8], little: bool) -> Cur<'i> {
        Cur {
            rest: buf,
            len: buf.len(),
            little,
        }
    }

    /// Current position.
    #[inline]
    pub fn pos(&self) -> usize {
        self.len - self.rest.len()
    }

    /// Whether all bytes are read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next `n` bytes, not consumed (None if fewer are left).
    #[inline]
    pub fn peek(&self, n: usize) -> Option<&'i [u8]> {
        self.rest.get(..n)
    }

    /// Whether the cursor reads little-endian numbers.
    #[inline]
    pub fn little(&self) -> bool {
        self.little
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'i [u8]> {
        if n > self.rest.len() {
            return Err(eof());
        }
        let (s, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(s)
    }

    /// Skips `n` bytes.
    #[inline]
    pub fn skip_bytes(&mut self, n: usize) -> Result<()> {
        self.skip(n)
    }

    #[inline]
    fn skip(&mut self, n: usize) -> Result<()> {
        self.take(n).map(|_| ())
    }

    /// The next `N` bytes.
    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let (&b, rest) = self.rest.split_first_chunk::<N>().ok_or_else(eof)?;
        self.rest = rest;
        Ok(b)
    }

    /// One byte.
    #[inline]
    pub(super) fn u8(&mut self) -> Result<u8> {
        let (&b, rest) = self.rest.split_first().ok_or_else(eof)?;
        self.rest = rest;
        Ok(b)
    }

    /// The next `N` bytes as a number in the unit's byte order (`le` or `be`).
    #[inline]
    fn num<const N: usize, T>(&mut self, le: fn([u8; N]) -> T, be: fn([u8; N]) -> T) -> Result<T> {
        let b = self.array()?;
        Ok(if self.little { le(b) } else { be(b) })
    }

    /// A 2-byte unsigned integer in the unit's byte order.
    #[inline]
    pub(super) fn u16(&mut self) -> Result<u16> {
        self.num(u16::from_le_bytes, u16::from_be_bytes)
    }

    /// A 4-byte unsigned integer in the unit's byte order.
    #[inline]
    pub(super) fn u32(&mut self) -> Result<u32> {
        self.num(u32::from_le_bytes, u32::from_be_bytes)
    }

    /// An 8-byte unsigned integer in the unit's byte order.
    #[inline]
    pub(super) fn u64(&mut self) -> Result<u64> {
        self.num(u64::from_le_bytes, u64::from_be_bytes)
    }

    /// An unsigned integer of `n` bytes in the unit's byte order.
    #[inline]
    pub fn read_uint(&mut self, n: usize) -> Result<u64> {
        self.uint(n)
    }

    #[inline]
    fn uint(&mut self, n: usize) -> Result<u64> {
        match n {
            1 => return self.u8().map(u64::from),
            2 => return self.u16().map(u64::from),
            4 => return self.u32().map(u64::from),
            8 => return self.u64(),
            _ => {}
        }
        let b = self.take(n)?;
        Ok(crate::elf::read_uint(b, self.little))
    }

    /// An unsigned LEB128.
    #[inline]
    pub fn uleb(&mut self) -> Result<u64> {
        // Most values (abbreviation codes, small constants) fit one byte.
        if let Some((&b, rest)) = self.rest.split_first() {
            if b & 0x80 == 0 {
                self.rest = rest;
                return Ok(u64::from(b));
            }
        }
        self.leb().map(|(v, _)| v)
    }

    /// A signed LEB128.
    #[inline]
    pub fn sleb(&mut self) -> Result<i64> {
        let (v, (shift, last)) = self.leb()?;
        // Two's complement: the bits as read, sign-extended from the last group's.
        let mut v = v as i64;
        if shift < 64 && last & 0x40 != 0 {
            v |= -1i64 << shift;
        }
        Ok(v)
    }

    /// A LEB128's low 64 bits, with the bits read and the last byte (for the sign).
    #[inline]
    fn leb(&mut self) -> Result<(u64, (u32, u8))> {
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            if shift < 64 {
                v |= ((b & 0x7f) as u64) << shift;
            }
            shift += 7;
            if b & 0x80 == 0 {
                return Ok((v, (shift, b)));
            }
        }
    }

    /// The bytes of a block (`DW_FORM_block*`, `exprloc`): its length, then them.
    #[inline]
    fn block(&mut self, form: DwForm) -> Result<&'i [u8]> {
        let n = match form {
            DW_FORM_block1 => self.uint(1)?,
            DW_FORM_block2 => self.uint(2)?,
            DW_FORM_block4 => self.uint(4)?,
            _ => self.uleb()?,
        };
        self.take(usize::try_from(n).map_err(|_| eof())?)
    }

    /// A NUL-terminated string (without the NUL).
    #[inline]
    fn cstr(&mut self) -> Result<&'i [u8]> {
        let rest = self.rest;
        let n = rest.iter().position(|&b| b == 0).ok_or_else(eof)?;
        self.rest = &rest[n + 1..];
        Ok(&rest[..n])
    }
}

/// The NUL-terminated string at `off` of a string section (not measured yet).
#[inline]
pub fn str_at(sec: &[u8], off: u64) -> Result<Name<'_>> {
    usize::try_from(off)
        .ok()
        .and_then(|o| sec.get(o..))
        .filter(|rest| !rest.is_empty())
        .map(Name::new)
        .ok_or(DwarfErrorKind::BadStrOffset(off))
}

/// The form a `DW_FORM_indirect` names.
fn indirect(f: u64) -> Result<DwForm> {
    u16::try_from(f)
        .map(DwForm)
        .map_err(|_| DwarfErrorKind::UnknownForm(f))
}

/// A decoded attribute value: only the shapes the encoder reads.
#[derive(Clone, Copy, Debug)]
pub enum Val<'i> {
    /// `data1/2/4/8`, `udata`, a flag: zero-extended.
    U(u64),
    /// `sdata`, `implicit_const`: sign-extended.
    S(i64),
    /// A reference within the unit (unit offset, relative to its group's start).
    Ref(u32),
    /// A string.
    Str(Name<'i>),
    /// A `DW_OP_*` expression.
    Expr(&'i [u8]),
    /// A reference outside the unit (`ref_addr`, `ref_sig8`, supplementary refs).
    FarRef,
    /// An address (`DW_FORM_addr`).
    Addr(u64),
    /// An index into `.debug_addr` (`DW_FORM_addrx*`).
    AddrX(u64),
    /// An index into the unit's location list table (`DW_FORM_loclistx`).
    LocListX(u64),
    /// A form we do not interpret (block, address …).
    Other,
}

/// What a unit's attribute forms need to be decoded.
#[derive(Clone, Copy)]
pub struct UnitEnc<'i> {
    /// Byte order.
    pub little: bool,
    /// 4 (32-bit DWARF) or 8 (64-bit DWARF).
    pub offset_size: u8,
    /// Address size.
    pub addr_size: u8,
    /// DWARF version.
    pub version: u16,
    /// `.debug_str`.
    pub debug_str: &'i [u8],
    /// `.debug_line_str`.
    pub line_str: &'i [u8],
    /// `.debug_str_offsets`.
    pub str_offsets: &'i [u8],
    /// `DW_AT_str_offsets_base` of the unit.
    pub str_offsets_base: u64,
    /// Where the unit lies in the group of units parsed as one (LTO builds, see
    /// [`super::lto`]); the default for a unit on its own.
    pub place: Place,
    /// The unit's length (header included): references within the unit lie below
    /// it (`u64::MAX`: not checked).
    pub unit_len: u64,
}

impl<'i> UnitEnc<'i> {
    /// The forms of a unit of `dw` with `encoding` (its header's) at `place`, with
    /// the input's string sections (its `DW_AT_str_offsets_base` is read later, from
    /// its root).
    pub fn of(dw: &super::DwarfInput<'i>, encoding: gimli::Encoding, place: Place) -> UnitEnc<'i> {
        UnitEnc {
            little: dw.input.is_little_endian(),
            offset_size: encoding.format.word_size(),
            addr_size: encoding.address_size,
            version: encoding.version,
            debug_str: dw.input.section(".debug_str"),
            line_str: dw.input.section(".debug_line_str"),
            str_offsets: dw.input.section(".debug_str_offsets"),
            str_offsets_base: 0,
            place,
            unit_len: u64::MAX,
        }
    }
}

/// Where a unit lies in the units parsed as one: references within the unit are
/// shifted by `rebase` (the unit's start minus the group's), and a `DW_FORM_ref_addr`
/// into `group` (`.debug_info` offsets) becomes a reference relative to its start.
/// A unit on its own has no group: its `ref_addr`s are [`Val::FarRef`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Place {
    /// Added to every unit offset.
    pub rebase: u32,
    /// The group's `.debug_info` range (empty for a unit on its own).
    pub group: (u64, u64),
}

impl<'i> UnitEnc<'i> {
    /// Size of a form with a fixed size, or None if it varies.
    pub fn fixed_size(&self, form: DwForm) -> Option<u8> {
        Some(match form {
            DW_FORM_addr => self.addr_size,
            DW_FORM_data1 | DW_FORM_ref1 | DW_FORM_flag | DW_FORM_strx1 | DW_FORM_addrx1 => 1,
            DW_FORM_data2 | DW_FORM_ref2 | DW_FORM_strx2 | DW_FORM_addrx2 => 2,
            DW_FORM_strx3 | DW_FORM_addrx3 => 3,
            DW_FORM_data4 | DW_FORM_ref4 | DW_FORM_strx4 | DW_FORM_addrx4 | DW_FORM_ref_sup4 => 4,
            DW_FORM_data8 | DW_FORM_ref8 | DW_FORM_ref_sig8 | DW_FORM_ref_sup8 => 8,
            DW_FORM_data16 => 16,
            DW_FORM_flag_present | DW_FORM_implicit_const => 0,
            DW_FORM_strp | DW_FORM_line_strp | DW_FORM_sec_offset | DW_FORM_strp_sup
            | DW_FORM_GNU_ref_alt | DW_FORM_GNU_strp_alt => self.offset_size,
            DW_FORM_ref_addr => {
                if self.version <= 2 {
                    self.addr_size
                } else {
                    self.offset_size
                }
            }
            _ => return None,
        })
    }

    /// Skips one attribute of a variable-size form.
    pub fn skip(&self, c: &mut Cur<'i>, form: DwForm) -> Result<()> {
        if let Some(n) = self.fixed_size(form) {
            return c.skip(n as usize);
        }
        match form {
            DW_FORM_udata
            | DW_FORM_sdata
            | DW_FORM_ref_udata
            | DW_FORM_strx
            | DW_FORM_addrx
            | DW_FORM_loclistx
            | DW_FORM_rnglistx
            | DW_FORM_GNU_addr_index
            | DW_FORM_GNU_str_index => c.uleb().map(|_| ()),
            DW_FORM_string => c.cstr().map(|_| ()),
            DW_FORM_block1 | DW_FORM_block2 | DW_FORM_block4 | DW_FORM_block | DW_FORM_exprloc => {
                c.block(form).map(|_| ())
            }
            DW_FORM_indirect => {
                let f = c.uleb()?;
                self.skip(c, indirect(f)?)
            }
            _ => Err(DwarfErrorKind::UnknownForm(form.0.into())),
        }
    }

    /// Decodes one attribute.
    #[inline(never)]
    pub fn read(&self, c: &mut Cur<'i>, form: DwForm, implicit: i64) -> Result<Val<'i>> {
        Ok(match form {
            DW_FORM_data1 | DW_FORM_flag => Val::U(c.uint(1)?),
            DW_FORM_data2 => Val::U(c.uint(2)?),
            DW_FORM_data4 => Val::U(c.uint(4)?),
            DW_FORM_data8 => Val::U(c.uint(8)?),
            DW_FORM_udata => Val::U(c.uleb()?),
            DW_FORM_sec_offset => Val::U(c.uint(self.offset_size as usize)?),
            DW_FORM_sdata => Val::S(c.sleb()?),
            DW_FORM_implicit_const => Val::S(implicit),
            DW_FORM_flag_present => Val::U(1),
            DW_FORM_ref1 => self.local(c.uint(1)?)?,
            DW_FORM_ref2 => self.local(c.uint(2)?)?,
            DW_FORM_ref4 => self.local(c.uint(4)?)?,
            DW_FORM_ref8 => self.local(c.uint(8)?)?,
            DW_FORM_ref_udata => self.local(c.uleb()?)?,
            DW_FORM_ref_addr if self.place.group.1 > self.place.group.0 => {
                let n = self.fixed_size(form).unwrap_or(4) as usize;
                let t = c.uint(n)?;
                let (start, end) = self.place.group;
                if t < start || t >= end {
                    return Err(DwarfErrorKind::RefOutsideGroup(t));
                }
                Val::Ref(u32::try_from(t - start).map_err(|_| DwarfErrorKind::RefOutsideGroup(t))?)
            }
            DW_FORM_ref_addr | DW_FORM_ref_sig8 | DW_FORM_ref_sup4 | DW_FORM_ref_sup8
            | DW_FORM_GNU_ref_alt => {
                self.skip(c, form)?;
                Val::FarRef
            }
            DW_FORM_string => Val::Str(Name::new(c.cstr()?)),
            DW_FORM_strp => {
                let off = c.uint(self.offset_size as usize)?;
                Val::Str(str_at(self.debug_str, off)?)
            }
            DW_FORM_line_strp => {
                let off = c.uint(self.offset_size as usize)?;
                Val::Str(str_at(self.line_str, off)?)
            }
            DW_FORM_strx | DW_FORM_GNU_str_index => {
                let i = c.uleb()?;
                Val::Str(self.strx(i)?)
            }
            DW_FORM_strx1 => Val::Str(self.strx(c.uint(1)?)?),
            DW_FORM_strx2 => Val::Str(self.strx(c.uint(2)?)?),
            DW_FORM_strx3 => Val::Str(self.strx(c.uint(3)?)?),
            DW_FORM_strx4 => Val::Str(self.strx(c.uint(4)?)?),
            DW_FORM_exprloc | DW_FORM_block1 | DW_FORM_block2 | DW_FORM_block4 | DW_FORM_block => {
                Val::Expr(c.block(form)?)
            }
            DW_FORM_addr => Val::Addr(c.uint(self.addr_size as usize)?),
            DW_FORM_addrx | DW_FORM_GNU_addr_index => Val::AddrX(c.uleb()?),
            DW_FORM_addrx1 => Val::AddrX(c.uint(1)?),
            DW_FORM_addrx2 => Val::AddrX(c.uint(2)?),
            DW_FORM_addrx3 => Val::AddrX(c.uint(3)?),
            DW_FORM_addrx4 => Val::AddrX(c.uint(4)?),
            DW_FORM_loclistx => Val::LocListX(c.uleb()?),
            DW_FORM_indirect => {
                let f = c.uleb()?;
                return self.read(c, indirect(f)?, implicit);
            }
            _ => {
                self.skip(c, form)?;
                Val::Other
            }
        })
    }

    /// A reference within the unit, relative to its group's start; one past the
    /// unit's end is an error (libdw would not find the DIE, and pahole would read
    /// the type as void: we refuse rather than encode a type the input lacks).
    #[inline]
    pub(super) fn local(&self, o: u64) -> Result<Val<'i>> {
        if o >= self.unit_len {
            return Err(DwarfErrorKind::BadReference(o));
        }
        u32::try_from(o + u64::from(self.place.rebase))
            .map(Val::Ref)
            .map_err(|_| DwarfErrorKind::BadReference(o))
    }

    /// The string at index `i` of the unit's string offsets table.
    fn strx(&self, i: u64) -> Result<Name<'i>> {
        let at = i
            .checked_mul(self.offset_size as u64)
            .and_then(|x| x.checked_add(self.str_offsets_base))
            .and_then(|x| usize::try_from(x).ok())
            .ok_or(DwarfErrorKind::BadStrIndex(i))?;
        let mut c = Cur::new(self.str_offsets, self.little);
        c.skip(at).map_err(|_| DwarfErrorKind::BadStrIndex(i))?;
        let off = c.uint(self.offset_size as usize)?;
        str_at(self.debug_str, off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leb128() {
        let mut c = Cur::new(&[0xe5, 0x8e, 0x26, 0x7f, 0x80, 0x7f], true);
        assert_eq!(c.uleb().unwrap(), 624485);
        assert_eq!(c.sleb().unwrap(), -1);
        assert_eq!(c.sleb().unwrap(), -128);
        assert!(c.is_empty());
        assert!(c.uleb().is_err());
    }

    #[test]
    fn strings_and_bounds() {
        let sec = b"int\0long\0";
        assert_eq!(str_at(sec, 4).unwrap().bytes(), b"long");
        assert!(str_at(sec, 4).unwrap().is(b"long"));
        assert!(!str_at(sec, 4).unwrap().is(b"lon"));
        assert!(!str_at(sec, 0).unwrap().is(b"in"));
        assert!(str_at(sec, 0).unwrap().is(b"int"));
        assert!(str_at(sec, 9).is_err());
        assert_eq!(str_at(b"abc", 0).unwrap().bytes(), b"abc");
        assert!(str_at(sec, 3).unwrap().is_empty());
        let mut c = Cur::new(&[1, 2], true);
        assert!(c.uint(4).is_err());
    }
}
