//! The layout plan of a rewrite: which input ranges are copied, what is patched and
//! what is appended, checked before any byte is written.

use super::reader::*;
use super::{malformed, ElfWriteError, Res};
use std::collections::HashMap;
use std::io::Write;
use std::ops::Range;

/// A piece of the output.
#[derive(Debug)]
pub(super) enum Chunk<'a> {
    /// Bytes of the input file.
    Input(u64, u64),
    /// Caller-provided bytes.
    Data(&'a [u8]),
    /// Bytes built here (headers, names).
    Owned(Vec<u8>),
    /// Padding or erased old contents.
    Zeros(u64),
}

impl Chunk<'_> {
    pub(super) fn len(&self) -> u64 {
        match self {
            Chunk::Input(a, b) => b - a,
            Chunk::Data(d) => d.len() as u64,
            Chunk::Owned(d) => d.len() as u64,
            Chunk::Zeros(n) => *n,
        }
    }

    /// Writes the chunk; `copied` hears of each piece of the input once it has been
    /// handed to `w`.
    pub(super) fn write(
        &self,
        input: &[u8],
        w: &mut impl Write,
        copied: &mut impl FnMut(Range<usize>),
    ) -> std::io::Result<()> {
        match self {
            Chunk::Input(a, b) => {
                // The plan's ranges lie inside the input, so they fit a usize.
                let at = usize::try_from(*a).map_err(std::io::Error::other);
                let (mut at, end) = (at?, usize::try_from(*b).map_err(std::io::Error::other)?);
                while at < end {
                    let piece = at..end.min(at + INPUT_PIECE);
                    w.write_all(&input[piece.clone()])?;
                    at = piece.end;
                    copied(piece);
                }
                Ok(())
            }
            Chunk::Data(d) => w.write_all(d),
            Chunk::Owned(d) => w.write_all(d),
            Chunk::Zeros(n) => {
                let zeros = [0u8; 4096];
                let mut left = *n;
                while left > 0 {
                    let k = zeros.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    w.write_all(&zeros[..k])?;
                    left -= k as u64;
                }
                Ok(())
            }
        }
    }
}

/// How to produce the output: the first `keep` bytes of the input with `patches`
/// written over them, then `tail`.
#[derive(Debug)]
pub(super) struct Plan<'a> {
    pub(super) input: &'a [u8],
    pub(super) keep: u64,
    /// Sorted by offset, non-overlapping, all inside `0..keep`.
    pub(super) patches: Vec<(u64, Chunk<'a>)>,
    pub(super) tail: Vec<Chunk<'a>>,
}

impl Plan<'_> {
    pub(super) fn len(&self) -> u64 {
        self.keep + self.tail.iter().map(Chunk::len).sum::<u64>()
    }

    /// Writes the output to `w`; `copied` hears of each piece of the input once written
    /// (so that its pages can be released).
    pub(super) fn write_to(
        &self,
        w: &mut impl Write,
        copied: &mut impl FnMut(Range<usize>),
    ) -> std::io::Result<()> {
        let mut at = 0u64;
        for (off, chunk) in &self.patches {
            Chunk::Input(at, *off).write(self.input, w, copied)?;
            chunk.write(self.input, w, copied)?;
            at = off + chunk.len();
        }
        Chunk::Input(at, self.keep).write(self.input, w, copied)?;
        for chunk in &self.tail {
            chunk.write(self.input, w, copied)?;
        }
        Ok(())
    }
}

pub(super) fn align_up(v: u64, a: u64) -> u64 {
    if a <= 1 {
        v
    } else {
        v.div_ceil(a) * a
    }
}

/// What happens to one requested section.
pub(super) enum Placement {
    /// Same offset, contents overwritten (the rest of the old range zeroed).
    InPlace,
    /// Contents appended; the old bytes are cut off with the old tail of the file.
    AppendTail,
    /// Contents appended; the old range is zeroed if nothing else uses it.
    Append { erase_old: bool },
    /// A new section header at the end of the table.
    New,
}

/// The plan that gives the file `elf` the `sections`.
pub(super) fn build_plan<'a>(elf: Elf<'a>, sections: &[(&str, &'a [u8])]) -> Res<Plan<'a>> {
    let input = elf.data;
    let fmt = elf.fmt;
    if input.ends_with(MODULE_SIG_MAGIC) {
        return Err(ElfWriteError::Unsupported(
            "a module signature is appended to the file; sign the module after adding \
             BTF (strip the signature first)"
                .into(),
        ));
    }

    // Resolve each request to an existing section or a new one.
    let mut wanted: HashMap<&[u8], Option<usize>> = HashMap::with_capacity(sections.len());
    for &(name, _) in sections {
        if name.is_empty() || name.contains('\0') {
            return Err(ElfWriteError::BadRequest(format!(
                "invalid section name {name:?}"
            )));
        }
        if wanted.insert(name.as_bytes(), None).is_some() {
            return Err(ElfWriteError::BadRequest(format!(
                "section {name} requested twice"
            )));
        }
    }
    for idx in 1..elf.shdrs.len() {
        if let Some(slot) = wanted.get_mut(elf.section_name(idx)?) {
            if let Some(prev) = slot.replace(idx) {
                return Err(ElfWriteError::Unsupported(format!(
                    "more than one section named {} ([{prev}] and [{idx}])",
                    String::from_utf8_lossy(elf.section_name(idx)?)
                )));
            }
        }
    }
    let mut targets: Vec<(Option<usize>, &str, &[u8])> = Vec::with_capacity(sections.len());
    for &(name, data) in sections {
        let found = wanted[name.as_bytes()];
        if let Some(idx) = found {
            check_replaceable(&elf, idx, name)?;
        }
        targets.push((found, name, data));
    }

    // Where the kept part of the input ends: drop the old section header table (and the
    // padding before it) when it is the last thing in the file, since a new one is
    // written at the end.
    let sht_end = elf.shoff + elf.sht_len();
    let data_end = elf
        .shdrs
        .iter()
        .filter_map(Shdr::file_range)
        .chain(elf.segments.iter().copied())
        .map(|(_, e)| e)
        .fold(elf.headers_end, u64::max);
    let mut keep = if sht_end == input.len() as u64 && elf.shoff >= data_end {
        data_end
    } else {
        input.len() as u64
    };

    let mut placements = Vec::with_capacity(targets.len());
    for &(found, name, data) in &targets {
        let Some(idx) = found else {
            placements.push(Placement::New);
            continue;
        };
        let s = &elf.shdrs[idx];
        let new_size = data.len() as u64;
        if elf.is_fixed(s) {
            if new_size != s.size {
                return Err(ElfWriteError::FixedSize {
                    name: name.into(),
                    size: s.size,
                    new_size,
                });
            }
            if let Some(other) = elf.shares_bytes(idx) {
                return Err(ElfWriteError::Unsupported(format!(
                    "section {name} shares its file bytes with {other}"
                )));
            }
            placements.push(Placement::InPlace);
            continue;
        }
        let shared = elf.shares_bytes(idx).is_some();
        let ends_at_keep = s.kind != SHT_NOBITS && s.size > 0 && s.offset + s.size == keep;
        if ends_at_keep && !shared {
            keep = s.offset;
            placements.push(Placement::AppendTail);
        } else if new_size <= s.size && !shared && s.kind != SHT_NOBITS {
            placements.push(Placement::InPlace);
        } else {
            placements.push(Placement::Append {
                erase_old: !shared && s.kind != SHT_NOBITS && s.size > 0,
            });
        }
    }

    let mut shdrs = elf.shdrs.clone();
    let mut patches: Vec<(u64, Chunk<'a>)> = Vec::new();
    let mut tail: Vec<Chunk<'a>> = Vec::new();
    let mut cursor = keep;

    // Names of new sections: extend the name table where it is, if it is the last data
    // kept; otherwise append a copy of it followed by the new names.
    let mut new_names = Vec::new();
    let mut name_offsets = Vec::new();
    let st = &elf.shdrs[elf.shstrndx];
    let st_extends_in_place = st.offset + st.size == keep;
    let names_base = st.size;
    for &(found, name, _) in &targets {
        if found.is_none() {
            name_offsets.push(names_base + new_names.len() as u64);
            new_names.extend_from_slice(name.as_bytes());
            new_names.push(0);
        }
    }
    if !new_names.is_empty() {
        let st_new = &mut shdrs[elf.shstrndx];
        if !st_extends_in_place {
            st_new.offset = cursor;
            tail.push(Chunk::Input(st.offset, st.offset + st.size));
            cursor += st.size;
        }
        st_new.size += new_names.len() as u64;
        if st_new.size > u64::from(u32::MAX) {
            return Err(ElfWriteError::Unsupported(
                "section name table would exceed 4 GiB".into(),
            ));
        }
        cursor += new_names.len() as u64;
        tail.push(Chunk::Owned(new_names));
    }

    let mut name_offsets = name_offsets.into_iter();
    for (&(found, _, data), placement) in targets.iter().zip(&placements) {
        let new_size = data.len() as u64;
        let append = |tail: &mut Vec<Chunk<'a>>, cursor: &mut u64, align: u64| {
            let at = align_up(*cursor, align);
            if at > *cursor {
                tail.push(Chunk::Zeros(at - *cursor));
            }
            tail.push(Chunk::Data(data));
            *cursor = at + new_size;
            at
        };
        match (placement, found) {
            (Placement::New, _) => {
                let offset = append(&mut tail, &mut cursor, 1);
                shdrs.push(Shdr {
                    name: u32::try_from(name_offsets.next().unwrap_or(0)).map_err(|_| {
                        ElfWriteError::Unsupported("section name table would exceed 4 GiB".into())
                    })?,
                    kind: SHT_PROGBITS,
                    flags: 0,
                    addr: 0,
                    offset,
                    size: new_size,
                    link: 0,
                    info: 0,
                    addralign: 1,
                    entsize: 0,
                });
            }
            (Placement::InPlace, Some(idx)) => {
                let s = &mut shdrs[idx];
                if new_size > 0 {
                    patches.push((s.offset, Chunk::Data(data)));
                }
                if s.size > new_size {
                    patches.push((s.offset + new_size, Chunk::Zeros(s.size - new_size)));
                }
                s.size = new_size;
            }
            (Placement::AppendTail, Some(idx)) => {
                let s = &mut shdrs[idx];
                s.offset = append(&mut tail, &mut cursor, s.addralign);
                s.size = new_size;
            }
            (Placement::Append { erase_old }, Some(idx)) => {
                let s = &mut shdrs[idx];
                if *erase_old {
                    patches.push((s.offset, Chunk::Zeros(s.size)));
                }
                s.offset = append(&mut tail, &mut cursor, s.addralign);
                s.size = new_size;
                if s.kind == SHT_NOBITS {
                    s.kind = SHT_PROGBITS;
                }
            }
            (_, None) => unreachable!("only new sections lack an index"),
        }
    }

    // The new section header table.
    let sht_align = if fmt.is64 { 8 } else { 4 };
    let shoff = align_up(cursor, sht_align);
    if shoff > cursor {
        tail.push(Chunk::Zeros(shoff - cursor));
    }
    let count = shdrs.len();
    let extended = elf.shnum_extended || count >= SHN_LORESERVE;
    if extended {
        shdrs[0].size = count as u64;
    }
    let mut sht = Vec::with_capacity(count * fmt.shdr_size());
    for s in &shdrs {
        s.write(fmt, &mut sht)?;
    }
    tail.push(Chunk::Owned(sht));

    // The ELF header, pointing at the new table.
    let shnum = match u16::try_from(count) {
        Ok(n) if !extended => n,
        _ => 0,
    };
    let ehdr = fmt.patched_ehdr(&input[..fmt.ehdr_size()], shoff, shnum)?;
    patches.push((0, Chunk::Owned(ehdr)));

    patches.sort_by_key(|(off, _)| *off);
    let mut end = 0;
    for (off, chunk) in &patches {
        if *off < end || off + chunk.len() > keep {
            return malformed("overlapping section contents");
        }
        end = off + chunk.len();
    }
    Ok(Plan {
        input,
        keep,
        patches,
        tail,
    })
}

/// Refuses sections whose contents other sections depend on.
pub(super) fn check_replaceable(elf: &Elf<'_>, idx: usize, name: &str) -> Res<()> {
    let s = &elf.shdrs[idx];
    let refuse = |why: &str| {
        Err(ElfWriteError::Unsupported(format!(
            "cannot replace section {name} ([{idx}]): {why}"
        )))
    };
    if idx == elf.shstrndx {
        return refuse("it is the section name table");
    }
    if s.kind == SHT_NULL {
        return refuse("it is an SHT_NULL (inactive) section header");
    }
    if s.kind == SHT_NOBITS && !elf.is_fixed(s) {
        // An unloaded NOBITS section simply gets contents, as objcopy does.
    } else if s.kind == SHT_NOBITS {
        return refuse("it is a loaded SHT_NOBITS section");
    }
    for (j, o) in elf.shdrs.iter().enumerate() {
        if j != idx && o.kind != SHT_NULL && o.link as usize == idx {
            return refuse(&format!("section [{j}] links to it"));
        }
        if (o.kind == SHT_REL || o.kind == SHT_RELA) && o.info as usize == idx {
            return refuse(&format!("relocation section [{j}] applies to it"));
        }
    }
    Ok(())
}
