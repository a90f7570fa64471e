//! Abbreviations made ready for the hot loop: each abbreviation of a unit becomes a
//! [`Plan`] once (on first use), the steps that skip a DIE of it or read the
//! attributes the encoder needs, with the common forms resolved to the fixed-width
//! reads they are for this unit ([`Fast`]), so that a DIE costs one table look-up and
//! a few straight reads.

use super::abbrev::Decl;
use super::die::{Cur, DieError, UnitEnc, Val};
use super::error::DwarfErrorKind;
use super::types::Name;
use gimli::constants::*;
use gimli::{DwAt, DwForm, DwTag};

type Result<T> = std::result::Result<T, DieError>;

/// A form as one unit decodes it: the common ones with their width resolved (the
/// unit's offset size known), the others through [`UnitEnc::read`].
#[derive(Clone, Copy, Debug)]
pub enum Fast {
    /// `data1`, `flag`.
    U1,
    /// `data2`.
    U2,
    /// `data4`, `sec_offset` of 32-bit DWARF.
    U4,
    /// `data8`, `sec_offset` of 64-bit DWARF.
    U8,
    /// `udata`.
    Uleb,
    /// `sdata`.
    Sleb,
    /// `implicit_const`.
    Implicit,
    /// `flag_present`.
    Present,
    /// `ref4`.
    Ref4,
    /// `strp` of 32-bit DWARF.
    Strp4,
    /// `line_strp` of 32-bit DWARF.
    LineStrp4,
    /// Any other form.
    Any(DwForm),
}

impl Fast {
    fn of(form: DwForm, enc: &UnitEnc<'_>) -> Fast {
        let wide = enc.offset_size == 8;
        match form {
            DW_FORM_data1 | DW_FORM_flag => Fast::U1,
            DW_FORM_data2 => Fast::U2,
            DW_FORM_data4 => Fast::U4,
            DW_FORM_data8 => Fast::U8,
            DW_FORM_sec_offset if wide => Fast::U8,
            DW_FORM_sec_offset => Fast::U4,
            DW_FORM_udata => Fast::Uleb,
            DW_FORM_sdata => Fast::Sleb,
            DW_FORM_implicit_const => Fast::Implicit,
            DW_FORM_flag_present => Fast::Present,
            DW_FORM_ref4 => Fast::Ref4,
            DW_FORM_strp if !wide => Fast::Strp4,
            DW_FORM_line_strp if !wide => Fast::LineStrp4,
            f => Fast::Any(f),
        }
    }
}

impl<'i> UnitEnc<'i> {
    /// Decodes one attribute of a resolved form: the same value as
    /// [`UnitEnc::read`] gives for the form it stands for.
    #[inline(always)]
    pub fn read_fast(&self, c: &mut Cur<'i>, form: Fast, implicit: i64) -> Result<Val<'i>> {
        Ok(match form {
            Fast::U1 => Val::U(c.u8()?.into()),
            Fast::U2 => Val::U(c.u16()?.into()),
            Fast::U4 => Val::U(c.u32()?.into()),
            Fast::U8 => Val::U(c.u64()?),
            Fast::Uleb => Val::U(c.uleb()?),
            Fast::Sleb => Val::S(c.sleb()?),
            Fast::Implicit => Val::S(implicit),
            Fast::Present => Val::U(1),
            Fast::Ref4 => self.local(c.u32()?.into())?,
            Fast::Strp4 => Val::Str(str_at(self.debug_str, c.u32()?)?),
            Fast::LineStrp4 => Val::Str(str_at(self.line_str, c.u32()?)?),
            Fast::Any(f) => self.read(c, f, implicit)?,
        })
    }
}

/// The string at `off` of a string section (see [`super::die::str_at`]).
#[inline(always)]
fn str_at(sec: &[u8], off: u32) -> Result<Name<'_>> {
    match usize::try_from(off).ok().and_then(|o| sec.get(o..)) {
        Some(rest) if !rest.is_empty() => Ok(Name::new(rest)),
        _ => Err(DwarfErrorKind::BadStrOffset(off.into())),
    }
}

/// One step of reading a DIE's attributes.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// Skip this many bytes (a run of fixed-size attributes).
    Skip(u32),
    /// Skip one attribute of a variable-size form.
    SkipForm(DwForm),
    /// Decode one attribute: name, form, implicit constant.
    Read(DwAt, Fast, i64),
}

/// Where a member DIE of a fixed-size abbreviation holds the only attributes
/// read of it (the common member: a name, a type reference within the unit and
/// a constant location, besides attributes not read), so that it is read at those
/// offsets in one step: members are half of a kernel's DIEs.
#[derive(Clone, Copy, Debug)]
pub struct MemberPlan {
    /// Offset and form of the name (`strp`, `strx1`..`strx4`).
    pub name: Option<(u32, Fast)>,
    /// Offset and form of the type (`ref1`..`ref8`).
    pub ty: Option<(u32, Fast)>,
    /// Offset and form of the location (`data1`..`data8`).
    pub location: Option<(u32, Fast)>,
}

impl MemberPlan {
    /// The plan of member abbreviation `a`, if it qualifies: no children, every
    /// form fixed-size, and every attribute `needed` reads one of the three above
    /// in one of their forms, each once.
    fn of(a: &Decl, enc: &UnitEnc<'_>, needed: fn(DwAt) -> bool) -> Option<Self> {
        if a.tag != DW_TAG_member || a.has_children {
            return None;
        }
        let mut m = MemberPlan {
            name: None,
            ty: None,
            location: None,
        };
        let mut at = 0u32;
        for s in &a.specs {
            let (name, form) = (s.name, s.form);
            let size = enc.fixed_size(form)?;
            if needed(name) {
                let slot = match (name, form) {
                    (
                        DW_AT_name,
                        DW_FORM_strp | DW_FORM_strx1 | DW_FORM_strx2 | DW_FORM_strx3
                        | DW_FORM_strx4,
                    ) => &mut m.name,
                    (DW_AT_type, DW_FORM_ref1 | DW_FORM_ref2 | DW_FORM_ref4 | DW_FORM_ref8) => {
                        &mut m.ty
                    }
                    (
                        DW_AT_data_member_location,
                        DW_FORM_data1 | DW_FORM_data2 | DW_FORM_data4 | DW_FORM_data8,
                    ) => &mut m.location,
                    _ => return None,
                };
                if slot.replace((at, Fast::of(form, enc))).is_some() {
                    return None;
                }
            }
            at += u32::from(size);
        }
        Some(m)
    }
}

/// One abbreviation, ready for the hot loop.
pub struct Plan {
    /// The DIE tag.
    pub tag: DwTag,
    /// Whether children follow.
    pub has_children: bool,
    /// Total size when every form is fixed-size: such DIEs are skipped in one step.
    pub fixed: Option<u32>,
    /// For the common member abbreviation, where its attributes lie.
    pub member: Option<MemberPlan>,
    /// The steps to skip the whole DIE (`..split`), then those that read the
    /// attributes `needed` selects and skip the others (`split..`): one allocation.
    ops: Box<[Op]>,
    split: usize,
}

impl Plan {
    /// The plan for a declaration; `needed` selects the attributes to decode.
    pub fn new(a: &Decl, enc: &UnitEnc<'_>, needed: fn(DwAt) -> bool) -> Plan {
        let specs = &a.specs;
        let fixed = specs.iter().try_fold(0u32, |n, s| {
            enc.fixed_size(s.form).map(|k| n + u32::from(k))
        });
        let mut out: Vec<Op> = Vec::with_capacity(2 * specs.len());
        // A DIE of fixed size is skipped in one step: it needs no skip steps.
        let passes: &[bool] = if fixed.is_some() {
            &[true]
        } else {
            &[false, true]
        };
        let mut split = 0;
        for &read in passes {
            let first = out.len();
            for s in specs {
                let (name, form) = (s.name, s.form);
                if read && needed(name) {
                    let implicit = s.implicit.unwrap_or(0);
                    out.push(Op::Read(name, Fast::of(form, enc), implicit));
                    continue;
                }
                match (enc.fixed_size(form), out[first..].last_mut()) {
                    (Some(0), _) => {}
                    (Some(n), Some(Op::Skip(k))) => *k += u32::from(n),
                    (Some(n), _) => out.push(Op::Skip(n.into())),
                    (None, _) => out.push(Op::SkipForm(form)),
                }
            }
            if !read {
                split = out.len();
            }
        }
        Plan {
            tag: a.tag,
            has_children: a.has_children,
            fixed,
            member: fixed.and_then(|_| MemberPlan::of(a, enc, needed)),
            ops: out.into_boxed_slice(),
            split,
        }
    }

    /// The steps that read the needed attributes of a DIE and skip the others.
    #[inline]
    pub fn read_ops(&self) -> &[Op] {
        &self.ops[self.split..]
    }

    /// Skips all attributes of a DIE with this plan.
    #[inline]
    pub fn skip_all<'i>(&self, enc: &UnitEnc<'i>, c: &mut Cur<'i>) -> Result<()> {
        if let Some(n) = self.fixed {
            return c.skip_bytes(n as usize);
        }
        for op in &self.ops[..self.split] {
            match *op {
                Op::Skip(n) => c.skip_bytes(n as usize)?,
                Op::SkipForm(form) => enc.skip(c, form)?,
                // Not among the skip steps.
                Op::Read(..) => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(little: bool, offset_size: u8) -> UnitEnc<'static> {
        UnitEnc {
            little,
            offset_size,
            addr_size: 8,
            version: 5,
            debug_str: b"int\0long\0",
            line_str: b"a.c\0",
            str_offsets: &[],
            str_offsets_base: 0,
            place: Default::default(),
            unit_len: 0x1000,
        }
    }

    /// Each resolved form decodes what `UnitEnc::read` decodes for its form, in
    /// either byte order, and fails as it does on truncated input.
    #[test]
    fn fast_forms_read_as_the_general_reader() {
        let bytes = [0x04, 0x00, 0x00, 0x00, 0x85, 0x7f, 0x01, 0x02, 0x03, 0x04];
        let forms = [
            DW_FORM_data1,
            DW_FORM_flag,
            DW_FORM_data2,
            DW_FORM_data4,
            DW_FORM_data8,
            DW_FORM_sec_offset,
            DW_FORM_udata,
            DW_FORM_sdata,
            DW_FORM_implicit_const,
            DW_FORM_flag_present,
            DW_FORM_ref4,
            DW_FORM_strp,
            DW_FORM_line_strp,
            DW_FORM_ref1,
        ];
        for little in [true, false] {
            for offset_size in [4, 8] {
                let e = enc(little, offset_size);
                for form in forms {
                    for len in 0..=bytes.len() {
                        let (mut a, mut b) = (
                            Cur::new(&bytes[..len], little),
                            Cur::new(&bytes[..len], little),
                        );
                        let slow = e.read(&mut a, form, -3);
                        let fast = e.read_fast(&mut b, Fast::of(form, &e), -3);
                        assert_eq!(format!("{slow:?}"), format!("{fast:?}"), "{form} {len}");
                        if slow.is_ok() {
                            assert_eq!(a.pos(), b.pos(), "{form}");
                        }
                    }
                }
            }
        }
    }

    /// An abbreviation: its tag, whether it has children, (attribute, form) pairs.
    type Abbrev<'a> = (u16, bool, &'a [(u16, u16)]);

    /// A `.debug_abbrev` holding `abbrevs` (code 1 on).
    fn abbrevs(abbrevs: &[Abbrev<'_>]) -> &'static [u8] {
        // Codes, tags, attributes and forms below 128: one-byte ULEBs.
        let byte = |x: usize| u8::try_from(x).ok().filter(|&b| b < 128).unwrap();
        let mut b = Vec::new();
        for (i, (tag, children, attrs)) in abbrevs.iter().enumerate() {
            b.extend([byte(i + 1), byte((*tag).into()), u8::from(*children)]);
            for &(name, form) in *attrs {
                b.extend([byte(name.into()), byte(form.into())]);
            }
            b.extend([0, 0]);
        }
        b.push(0);
        b.leak()
    }

    /// The common member abbreviation gets its attributes' offsets; one with any
    /// other attribute read, children, or a variable-size form does not.
    #[test]
    fn member_plans_only_for_the_common_members() {
        let (name, file, line, ty, loc) = (
            (DW_AT_name.0, DW_FORM_strp.0),
            (DW_AT_decl_file.0, DW_FORM_data1.0),
            (DW_AT_decl_line.0, DW_FORM_data2.0),
            (DW_AT_type.0, DW_FORM_ref4.0),
            (DW_AT_data_member_location.0, DW_FORM_data2.0),
        );
        let member = DW_TAG_member.0;
        let a = abbrevs(&[
            (member, false, &[name, file, line, ty, loc]),
            (
                member,
                false,
                &[name, ty, loc, (DW_AT_bit_size.0, DW_FORM_data1.0)],
            ),
            (member, true, &[name, ty, loc]),
            (member, false, &[(DW_AT_name.0, DW_FORM_string.0), ty, loc]),
            (member, false, &[name, ty, ty]),
            (DW_TAG_variable.0, false, &[name, ty]),
            (member, false, &[ty]),
        ]);
        let e = enc(true, 4);
        let mut cache = super::super::abbrev::PlanCache::default();
        let plans = cache
            .table(a, 0, &e, super::super::attrs::is_needed)
            .unwrap();
        let plan = |code| {
            let p = plans.get(code).unwrap();
            p.member.map(|m| {
                (
                    m.name.map(|x| x.0),
                    m.ty.map(|x| x.0),
                    m.location.map(|x| x.0),
                )
            })
        };
        assert_eq!(plan(1), Some((Some(0), Some(7), Some(11))));
        for code in 2..=6 {
            assert_eq!(plan(code), None, "abbreviation {code}");
        }
        assert_eq!(plan(7), Some((None, Some(0), None)));
    }
}
