//! LTO builds: units that refer to each other's DIEs, and the first pass that finds
//! which units must be read as one.
//!
//! pahole reads such a file as one merged unit (`cus__merge_and_process_cu`): when
//! the file has the Linux LTO note (`0x101`, non-zero), or, without the note, when a
//! unit's abbreviations use `DW_FORM_ref_addr`. Its output is then that of one unit
//! holding every type of every unit, in unit order. We give the same output without
//! holding every unit: [`groups`] reads `.debug_info` once, skipping every attribute
//! but the cross-unit references by the abbreviations' sizes, and cuts the units into
//! the shortest runs of consecutive units that no reference leaves. Each run is then
//! parsed as one unit (`types::parse_group`) and encoded and deduplicated in order,
//! like any other unit; the order of what pahole adds after the merged unit's types
//! (decl tags, functions, variables) is kept by the encoder (`Merged`).

use super::die::{Cur, UnitEnc};
use super::error::DwarfErrorKind;
use super::DwarfInput;
use crate::elf::ElfInput;
use crate::Error;
use gimli::constants::*;
use gimli::{DwForm, UnitOffset};
use object::{Object, ObjectSection};
use std::ops::Range;

/// The note type of the kernel's `elfnote-lto.h` (`LINUX_ELFNOTE_LTO_INFO`).
const LINUX_ELFNOTE_LTO_INFO: u32 = 0x101;

/// Whether pahole reads `input` as one merged unit (`cus__merging_cu`): the first
/// Linux LTO note decides; without one, any `DW_FORM_ref_addr` in the units'
/// abbreviations.
pub fn merges_units(input: &ElfInput, dw: &DwarfInput<'_>) -> Result<bool, Error> {
    if let Some(on) = lto_note(input) {
        return Ok(on);
    }
    let abbrev = input.section(".debug_abbrev");
    for (idx, u) in dw.units.iter().enumerate() {
        if abbrevs_use_ref_addr(abbrev, u.abbrev).map_err(|e| dw.unit_error(idx, e))? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The value of the first Linux LTO note of the file's note sections.
fn lto_note(input: &ElfInput) -> Option<bool> {
    let file = object::File::parse(input.bytes()).ok()?;
    let little = input.is_little_endian();
    for s in file.sections() {
        if s.kind() != object::SectionKind::Note {
            continue;
        }
        let Ok(data) = s.data() else { continue };
        let word = |b: &[u8]| -> u32 {
            let a = [b[0], b[1], b[2], b[3]];
            if little {
                u32::from_le_bytes(a)
            } else {
                u32::from_be_bytes(a)
            }
        };
        let mut at = 0usize;
        while at + 12 <= data.len() {
            let namesz = word(&data[at..]) as usize;
            let descsz = word(&data[at + 4..]) as usize;
            let ty = word(&data[at + 8..]);
            let name_at = at + 12;
            let desc_at = name_at + namesz.next_multiple_of(4);
            let next = desc_at + descsz.next_multiple_of(4);
            if next > data.len() || desc_at > data.len() {
                break;
            }
            let name = &data[name_at..name_at + namesz];
            if ty == LINUX_ELFNOTE_LTO_INFO && name.split(|&b| b == 0).next() == Some(b"Linux") {
                // pahole reads the descriptor as an int.
                return Some(descsz >= 4 && word(&data[desc_at..]) != 0);
            }
            at = next;
        }
    }
    None
}

/// Whether the abbreviation table at `off` of `.debug_abbrev` uses `DW_FORM_ref_addr`.
fn abbrevs_use_ref_addr(abbrev: &[u8], off: usize) -> Result<bool, String> {
    let bad = || format!("bad abbreviation table at .debug_abbrev+{off:#x}");
    let mut c = Cur::new(abbrev.get(off..).ok_or_else(bad)?, true);
    loop {
        if c.uleb().map_err(|_| bad())? == 0 {
            return Ok(false);
        }
        c.uleb().map_err(|_| bad())?; // tag
        c.skip_bytes(1).map_err(|_| bad())?; // children
        loop {
            let name = c.uleb().map_err(|_| bad())?;
            let form = c.uleb().map_err(|_| bad())?;
            if name == 0 && form == 0 {
                break;
            }
            if form == DW_FORM_implicit_const.0 as u64 {
                c.sleb().map_err(|_| bad())?;
            }
            if form == DW_FORM_ref_addr.0 as u64 {
                return Ok(true);
            }
        }
    }
}

/// One step of an abbreviation in the scan.
#[derive(Clone, Copy)]
enum Step {
    Skip(u32),
    SkipForm(DwForm),
    /// A `DW_FORM_ref_addr` of this size.
    Far(u8),
}

/// Cuts the units into the shortest runs of consecutive units that no
/// `DW_FORM_ref_addr` leaves, in unit order. Refuses what pahole's merged unit
/// would read but we do not follow: references into type units or a supplementary
/// file. Memory: a word per unit; `.debug_info`'s pages are given back as the scan
/// goes.
pub fn groups(dw: &DwarfInput<'_>) -> Result<Vec<Range<usize>>, Error> {
    let n = dw.units.len();
    let starts: Vec<u64> = (0..n).map(|i| dw.unit_start(i)).collect();
    // reach[u]: the last unit that a reference between u and a later unit reaches.
    let mut reach: Vec<usize> = (0..n).collect();
    let input = dw.input;
    let info = input.section(".debug_info");
    let map = input.map();
    let info_range = crate::mmap::range_in(map, info);
    let info_start = info_range.as_ref().map_or(0, |r| r.start);
    let mut front = info_range.map(crate::mmap::ReleaseFront::new);
    let mut released_to = 0u64;
    for idx in 0..n {
        let header = dw.header(idx)?;
        scan_unit(dw, idx, &header, |target| {
            let t = starts.partition_point(|&s| s <= target).saturating_sub(1);
            let (lo, hi) = (t.min(idx), t.max(idx));
            reach[lo] = reach[lo].max(hi);
        })?;
        if let Some(f) = front
            .as_mut()
            .filter(|_| starts[idx] >= released_to + (4 << 20))
        {
            // Releasing only saves memory; a failure is no reason to stop.
            // A unit starts inside .debug_info, a slice of the mapping.
            #[allow(clippy::cast_possible_truncation)]
            let at = starts[idx] as usize;
            let _ = f.release_through(map, info_start + at);
            released_to = starts[idx];
        }
    }
    if let Some(f) = &mut front {
        let _ = f.release_through(map, info_start + info.len());
    }
    let mut out = Vec::new();
    let (mut start, mut end) = (0usize, 0usize);
    for (u, &r) in reach.iter().enumerate() {
        if u > end {
            out.push(start..end + 1);
            start = u;
        }
        end = end.max(r);
    }
    if n > 0 {
        out.push(start..n);
    }
    Ok(out)
}

/// Calls `far` with the target of every `DW_FORM_ref_addr` of unit `idx`.
fn scan_unit(
    dw: &DwarfInput<'_>,
    idx: usize,
    header: &gimli::UnitHeader<super::Reader<'_>>,
    mut far: impl FnMut(u64),
) -> Result<(), Error> {
    let unit = |e: gimli::Error| dw.dwarf_error(idx, None, e.into());
    let abbrevs = dw.dwarf.abbreviations(header).map_err(unit)?;
    let enc = UnitEnc::of(dw, header.encoding(), Default::default());
    let entries = header
        .range_from(UnitOffset(header.header_size())..)
        .map_err(unit)?;
    let mut plans: Vec<Option<Box<[Step]>>> = Vec::new();
    let mut c = Cur::new(entries.slice(), enc.little);
    let header_size = header.header_size() as u64;
    while !c.is_empty() {
        // Errors from here on are the DIE's at `die` (a unit offset).
        let die = header_size + c.pos() as u64;
        let at = |kind: DwarfErrorKind| dw.dwarf_error(idx, Some(die), kind);
        let code = c.uleb().map_err(at)?;
        if code == 0 {
            continue;
        }
        let i = usize::try_from(code)
            .ok()
            .filter(|&i| i < 1 << 20)
            .ok_or_else(|| {
                at(DwarfErrorKind::TooLarge {
                    what: "abbreviation code",
                    value: code,
                })
            })?;
        if i >= plans.len() {
            plans.resize_with(i + 1, || None);
        }
        if plans[i].is_none() {
            let a = abbrevs
                .get(code)
                .ok_or_else(|| at(DwarfErrorKind::UnknownAbbrev(code)))?;
            plans[i] = Some(scan_plan(a, &enc).map_err(|m| at(DwarfErrorKind::Other(m)))?);
        }
        for s in plans[i].as_deref().expect("just built") {
            match *s {
                Step::Skip(n) => c.skip_bytes(n as usize).map_err(at)?,
                Step::SkipForm(f) => enc.skip(&mut c, f).map_err(at)?,
                Step::Far(n) => far(c.read_uint(n as usize).map_err(at)?),
            }
        }
    }
    Ok(())
}

fn scan_plan(a: &gimli::Abbreviation, enc: &UnitEnc<'_>) -> Result<Box<[Step]>, String> {
    match a.tag() {
        DW_TAG_partial_unit | DW_TAG_imported_unit => {
            return Err(format!(
                "a {} (dwz-compressed DWARF) in a file pahole reads as one merged unit: \
                 not supported",
                a.tag()
            ))
        }
        DW_TAG_type_unit => {
            return Err(
                "a DW_TAG_type_unit (-fdebug-types-section) in a file pahole reads as one \
                 merged unit: not supported"
                    .into(),
            )
        }
        _ => {}
    }
    let mut steps: Vec<Step> = Vec::new();
    for s in a.attributes() {
        let form = s.form();
        match form {
            DW_FORM_ref_addr => {
                steps.push(Step::Far(enc.fixed_size(form).unwrap_or(4)));
                continue;
            }
            DW_FORM_ref_sig8 => {
                return Err(format!(
                    "{} of a {} refers into a type unit (DW_FORM_ref_sig8, \
                     -fdebug-types-section) in a file pahole reads as one merged unit: not supported",
                    s.name(),
                    a.tag()
                ))
            }
            DW_FORM_GNU_ref_alt | DW_FORM_ref_sup4 | DW_FORM_ref_sup8 => {
                return Err(format!(
                    "{} of a {} refers into a supplementary file (DW_FORM_GNU_ref_alt, \
                     dwz-compressed DWARF) in a file pahole reads as one merged unit: not supported",
                    s.name(),
                    a.tag()
                ))
            }
            DW_FORM_indirect => {
                return Err(
                    "DW_FORM_indirect attribute forms in a file pahole reads as one merged unit: not supported".into(),
                )
            }
            _ => {}
        }
        match (enc.fixed_size(form), steps.last_mut()) {
            (Some(0), _) => {}
            (Some(n), Some(Step::Skip(k))) => *k += n as u32,
            (Some(n), _) => steps.push(Step::Skip(n as u32)),
            (None, _) => steps.push(Step::SkipForm(form)),
        }
    }
    Ok(steps.into_boxed_slice())
}
