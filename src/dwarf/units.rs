//! The list of a file's compile units: where each unit header in `.debug_info`
//! says the unit starts and where its abbreviation table is.
//!
//! The list is read before any unit is parsed, and on a kernel its 2,400 headers
//! lie one every 100 KB or so of `.debug_info`: read through the mapping, each
//! header was a page fault that mapped 64 KB around it (the kernel's fault-around),
//! pages the walk then had to give back. The headers are read from the file
//! instead (`pread`, 24 bytes each), which maps nothing (corpus vmlinux: 7 ms ->
//! 2 ms at -j1, 8-12 ms -> 2-5 ms at -j2, where the other thread reads the
//! symbol tables at the same time). Only the fields needed to step from unit to
//! unit are read here; each header is parsed whole by gimli when its unit is
//! parsed (`DwarfInput::header`).

use super::UnitPlace;
use std::io;

/// The longest header prefix read: a 64-bit DWARF 5 header up to its abbreviation
/// offset (12 bytes of length, version, unit type, address size, 8 of offset).
const HEADER_MAX: usize = 24;

/// Why the list stopped.
#[derive(Debug)]
pub enum ListError {
    /// The bytes could not be read.
    Read(io::Error),
    /// A header is malformed: what, at which `.debug_info` offset.
    Bad(String),
}

/// The units of a `.debug_info` section of `len` bytes whose bytes `read(offset,
/// buf)` fills `buf` with (`buf` never goes past `len`).
pub fn list(
    len: usize,
    big_endian: bool,
    mut read: impl FnMut(usize, &mut [u8]) -> io::Result<()>,
) -> Result<Vec<UnitPlace>, ListError> {
    let mut units = Vec::new();
    let mut at = 0usize;
    let mut buf = [0u8; HEADER_MAX];
    while at < len {
        let h = &mut buf[..(len - at).min(HEADER_MAX)];
        read(at, h).map_err(ListError::Read)?;
        let (place, end) = parse(h, at, len, big_endian).map_err(ListError::Bad)?;
        units.push(place);
        at = end;
    }
    Ok(units)
}

/// The unit whose header starts with `h` at offset `at` of a section of `len`
/// bytes, and the offset where the next one starts.
fn parse(h: &[u8], at: usize, len: usize, big_endian: bool) -> Result<(UnitPlace, usize), String> {
    let r = Fields { h, at, big_endian };
    let (unit_len, offset_size, fixed) = match r.uint(0, 4)? {
        0xffff_ffff => (r.uint(4, 8)?, 8, 12),
        l if l >= 0xffff_fff0 => return Err(format!("reserved unit length {l:#x} at {at:#x}")),
        l => (l, 4, 4),
    };
    let version = r.uint(fixed, 2)?;
    // After the version: DWARF 2-4 have the abbreviation offset, then the address
    // size; DWARF 5 has the unit type and the address size first.
    let (abbrev_at, rest) = match version {
        2..=4 => (fixed + 2, 1),
        5 => (fixed + 4, 0),
        v => return Err(format!("unit at {at:#x} has DWARF version {v}, not 2 to 5")),
    };
    let abbrev = r.uint(abbrev_at, offset_size)?;
    let header_len = (abbrev_at + offset_size + rest - fixed) as u64;
    if unit_len < header_len {
        return Err(format!(
            "unit at {at:#x} is {unit_len} bytes long, shorter than its header"
        ));
    }
    let end = (at as u64)
        .checked_add(fixed as u64)
        .and_then(|e| e.checked_add(unit_len))
        .filter(|&e| e <= len as u64)
        .ok_or_else(|| {
            format!("unit at {at:#x} is {unit_len} bytes long, past the section's {len}")
        })?;
    let too_far = |what: &str| format!("unit at {at:#x}: {what} does not fit in memory");
    Ok((
        UnitPlace {
            info: at,
            abbrev: usize::try_from(abbrev).map_err(|_| too_far("abbreviation offset"))?,
        },
        usize::try_from(end).map_err(|_| too_far("end"))?,
    ))
}

/// Reading a header's fixed-size fields in the file's byte order.
struct Fields<'h> {
    h: &'h [u8],
    at: usize,
    big_endian: bool,
}

impl Fields<'_> {
    /// The `size`-byte unsigned field at `i`.
    fn uint(&self, i: usize, size: usize) -> Result<u64, String> {
        let b = self.h.get(i..i + size).ok_or_else(|| {
            format!(
                "unit header at {:#x} cut short by the section's end",
                self.at
            )
        })?;
        Ok(crate::elf::read_uint(b, !self.big_endian))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `list` over bytes in memory.
    fn list_of(bytes: &[u8], big_endian: bool) -> Result<Vec<(usize, usize)>, String> {
        list(bytes.len(), big_endian, |at, buf| {
            buf.copy_from_slice(&bytes[at..at + buf.len()]);
            Ok(())
        })
        .map(|u| u.iter().map(|p| (p.info, p.abbrev)).collect())
        .map_err(|e| match e {
            ListError::Bad(s) => s,
            ListError::Read(e) => e.to_string(),
        })
    }

    /// A DWARF 5 compile unit header (32-bit), `body` bytes of DIEs after it.
    fn v5(abbrev: u32, body: u32) -> Vec<u8> {
        let mut v = (8 + body).to_le_bytes().to_vec();
        v.extend_from_slice(&5u16.to_le_bytes());
        v.extend_from_slice(&[1, 8]); // DW_UT_compile, address size
        v.extend_from_slice(&abbrev.to_le_bytes());
        v.resize(v.len() + body as usize, 0);
        v
    }

    /// A DWARF 4 header in 64-bit DWARF, big-endian.
    fn v4_64_be(abbrev: u64, body: u64) -> Vec<u8> {
        let mut v = vec![0xff; 4];
        v.extend_from_slice(&(11 + body).to_be_bytes());
        v.extend_from_slice(&4u16.to_be_bytes());
        v.extend_from_slice(&abbrev.to_be_bytes());
        v.push(8);
        v.resize(v.len() + usize::try_from(body).unwrap(), 0);
        v
    }

    #[test]
    fn steps_from_unit_to_unit() {
        let mut s = v5(0, 20);
        s.extend(v5(0x40, 3));
        s.extend(v5(0x80, 0));
        assert_eq!(
            list_of(&s, false).unwrap(),
            [(0, 0), (32, 0x40), (47, 0x80)]
        );
    }

    #[test]
    fn reads_64_bit_big_endian_headers() {
        let mut s = v4_64_be(7, 5);
        let second = s.len();
        s.extend(v4_64_be(0x1_0000_0000, 0));
        assert_eq!(
            list_of(&s, true).unwrap(),
            [(0, 7), (second, 0x1_0000_0000)]
        );
    }

    #[test]
    fn refuses_what_it_cannot_step_over() {
        let mut long = v5(0, 4);
        long[0] = 200;
        let mut old = v5(0, 4);
        old[4] = 1;
        let mut reserved = v5(0, 4);
        reserved[..4].copy_from_slice(&0xffff_fff3u32.to_le_bytes());
        let mut short = v5(0, 0);
        short[0] = 2;
        let cut = v5(0, 0)[..7].to_vec();
        for (bytes, says) in [
            (long, "past the section"),
            (old, "DWARF version 1"),
            (reserved, "reserved unit length"),
            (short, "shorter than its header"),
            (cut, "cut short"),
        ] {
            let e = list_of(&bytes, false).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        assert_eq!(list_of(&[], false).unwrap(), []);
    }
}
