//! Writing sections (`.BTF`, `.BTF.base`) into an ELF file, as `pahole -J` does with
//! `llvm-objcopy --add-section`, but without any external tool.
//!
//! The rewrite is deliberately conservative, so that everything else in the file keeps
//! working:
//! - every existing byte keeps its file offset, except the section header table (moved
//!   to the end) and data of replaced sections that must move;
//! - section indices never change: a new section's header is appended at the end of the
//!   table, so `sh_link`/`sh_info` of symbol and relocation tables stay valid;
//! - a new section is `SHT_PROGBITS`, no flags, alignment 1 (what both GNU and LLVM
//!   objcopy give `--add-section`), its data appended after the existing data;
//! - a section that is loaded (`SHF_ALLOC` in a file with program headers, or inside a
//!   segment's file range) can only get contents of exactly its current size: the
//!   kernel finds its `.BTF` through `__start_BTF`/`__stop_BTF`, fixed at link time.
//!
//! The work is split into a `plan::Plan` (what to copy from the input, what to patch, what to
//! append) and its execution, so that a 340 MB vmlinux is streamed from a mapping into
//! the temporary file instead of being built in memory.

mod plan;
mod reader;

use crate::elf::MappedElf;
use crate::Error;
use plan::build_plan;
use reader::Elf;
use std::fmt;
use std::io::Write;
use std::path::Path;

/// Why an ELF file cannot get the requested sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElfWriteError {
    /// The input is not an ELF file at all.
    NotElf(String),
    /// The input claims to be ELF but its headers are inconsistent or cut short.
    Malformed(String),
    /// A valid ELF file this writer does not handle (and why).
    Unsupported(String),
    /// A loaded section whose size cannot change without relinking.
    FixedSize {
        /// The section name.
        name: String,
        /// Its current size.
        size: u64,
        /// The size asked for.
        new_size: u64,
    },
    /// The request itself is wrong (empty or duplicated section name …).
    BadRequest(String),
}

impl fmt::Display for ElfWriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, msg) = match self {
            ElfWriteError::NotElf(m) => ("not an ELF file: ", m),
            ElfWriteError::Malformed(m) => ("malformed ELF: ", m),
            ElfWriteError::Unsupported(m) => ("unsupported ELF: ", m),
            ElfWriteError::BadRequest(m) => ("", m),
            ElfWriteError::FixedSize {
                name,
                size,
                new_size,
            } => {
                return write!(
                    f,
                    "section {name} is loaded at a fixed address in a linked file; its \
                     size {size} cannot change to {new_size} without relinking (a kernel \
                     build encodes BTF before the final link, into an ELF without {name})"
                )
            }
        };
        write!(f, "{what}{msg}")
    }
}

impl std::error::Error for ElfWriteError {}

pub(crate) type Res<T> = std::result::Result<T, ElfWriteError>;

pub(crate) fn malformed<T>(msg: impl Into<String>) -> Res<T> {
    Err(ElfWriteError::Malformed(msg.into()))
}

/// Returns `input` with each named section's contents replaced by the given bytes, or
/// added as a new non-allocated `SHT_PROGBITS` section when the file has none by that
/// name (objcopy's `--add-section`, keeping section indices).
pub fn set_sections(input: &[u8], sections: &[(&str, &[u8])]) -> Result<Vec<u8>, ElfWriteError> {
    let plan = build_plan(Elf::parse(input)?, sections)?;
    // A capacity hint: the plan's length, if it fits.
    let mut out = Vec::with_capacity(usize::try_from(plan.len()).unwrap_or(0));
    plan.write_to(&mut out, &mut |_| {})
        .expect("writing into a Vec cannot fail");
    Ok(out)
}

/// Sets the sections of the ELF file at `path` (see [`set_sections`]) atomically: the
/// new file is written next to it and renamed over it, keeping its mode, so on any
/// failure the original is untouched. A symbolic link is followed, not replaced.
pub fn write_sections_in_place(path: &Path, sections: &[(&str, Vec<u8>)]) -> Result<(), Error> {
    let real = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
    let file = std::fs::File::open(&real).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        return Err(Error::file(
            path,
            ElfWriteError::NotElf("empty file".into()).to_string(),
        ));
    }
    // The result goes to a new file renamed over this one: the mapping is never written.
    let map = crate::mmap::map_file(&file).map_err(|e| Error::io(path, e))?;
    let refs: Vec<(&str, &[u8])> = sections.iter().map(|(n, d)| (*n, d.as_slice())).collect();
    write_mapped(path, &real, &map, &refs, None, || Ok(()))
}

/// [`write_sections_in_place`] for the input the run encoded, from the mapping it
/// read the DWARF through (the file is not opened again), refusing with `refusal.1`
/// a file that has a section named `refusal.0`; the new file replaces the input only
/// if `gate` says so (see [`crate::output::write_atomic_gated`]).
pub(crate) fn write_sections_into(
    input: &MappedElf,
    sections: &[(&str, &[u8])],
    refusal: Option<(&str, &str)>,
    gate: impl FnOnce() -> Result<(), Error>,
) -> Result<(), Error> {
    let path = input.path();
    let real = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
    write_mapped(path, &real, input.map(), sections, refusal, gate)
}

/// Rewrites the file at `path` (`real` once symbolic links are followed: the new file
/// replaces the target, not the link), mapped as `map`, with `sections`; the check
/// for `refusal` reads the same headers as the rewrite.
fn write_mapped(
    path: &Path,
    real: &Path,
    map: &memmap2::Mmap,
    refs: &[(&str, &[u8])],
    refusal: Option<(&str, &str)>,
    gate: impl FnOnce() -> Result<(), Error>,
) -> Result<(), Error> {
    let bad = |e: ElfWriteError| Error::file(path, e.to_string());
    let elf = Elf::parse(map).map_err(bad)?;
    if let Some((name, why)) = refusal {
        if elf.find_section(name).map_err(bad)?.is_some() {
            return Err(Error::file(path, why));
        }
    }
    let plan = build_plan(elf, refs).map_err(bad)?;
    crate::output::write_atomic_gated(
        real,
        |f| {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
            // Copied input pages are not read again: give them back, so rewriting a
            // 340 MB vmlinux does not leave it all resident. Best effort.
            plan.write_to(&mut w, &mut |piece| {
                let _ = crate::mmap::release_range(map, piece);
            })?;
            w.flush()
        },
        gate,
    )
}

#[cfg(test)]
mod tests;
