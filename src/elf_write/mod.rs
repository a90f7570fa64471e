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
//! The work is split into a [`Plan`] (what to copy from the input, what to patch, what to
//! append) and its execution, so that a 340 MB vmlinux is streamed from a mapping into
//! the temporary file instead of being built in memory.

mod plan;
mod reader;

use crate::Error;
use plan::build_plan;
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
        match self {
            ElfWriteError::NotElf(m) => write!(f, "not an ELF file: {m}"),
            ElfWriteError::Malformed(m) => write!(f, "malformed ELF: {m}"),
            ElfWriteError::Unsupported(m) => write!(f, "unsupported ELF: {m}"),
            ElfWriteError::FixedSize {
                name,
                size,
                new_size,
            } => write!(
                f,
                "section {name} is loaded at a fixed address in a linked file; its size \
                 {size} cannot change to {new_size} without relinking (a kernel build \
                 encodes BTF before the final link, into an ELF without {name})"
            ),
            ElfWriteError::BadRequest(m) => write!(f, "{m}"),
        }
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
    let plan = build_plan(input, sections)?;
    let mut out = Vec::with_capacity(plan.len() as usize);
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
    let plan = build_plan(&map, &refs).map_err(|e| Error::file(path, e.to_string()))?;
    crate::output::write_atomic_with(&real, |f| {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        // Copied input pages are not read again: give them back, so rewriting a
        // 340 MB vmlinux does not leave it all resident. Best effort.
        plan.write_to(&mut w, &mut |piece| {
            let _ = crate::mmap::release_range(&map, piece);
        })?;
        w.flush()
    })
}

#[cfg(test)]
mod tests {
    use super::plan::*;
    use super::reader::*;
    use super::*;

    /// A minimal ELF64 LE relocatable file: null section, `.text`, `.shstrtab`.
    fn tiny(is64: bool, le: bool) -> Vec<u8> {
        let fmt = Format { is64, le };
        let names = b"\0.text\0.shstrtab\0".to_vec();
        let text = b"\x90\x90\xc3\x00".to_vec();
        let eh = fmt.ehdr_size();
        let text_off = eh as u64;
        let names_off = text_off + text.len() as u64;
        let shoff = align_up(names_off + names.len() as u64, 8);
        let mut out = vec![0u8; shoff as usize + 3 * fmt.shdr_size()];
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = if is64 { 2 } else { 1 };
        out[5] = if le { 1 } else { 2 };
        out[6] = 1;
        fmt.put_u16(&mut out, 16, 1);
        fmt.put_u32(&mut out, 20, 1);
        let (_, shoff_at, phentsize_at) = fmt.ehdr_offsets();
        fmt.put_word(&mut out, shoff_at, shoff);
        fmt.put_u16(&mut out, phentsize_at - 2, eh as u16);
        fmt.put_u16(&mut out, phentsize_at + 4, fmt.shdr_size() as u16);
        fmt.put_u16(&mut out, phentsize_at + 6, 3);
        fmt.put_u16(&mut out, phentsize_at + 8, 2);
        out[text_off as usize..][..text.len()].copy_from_slice(&text);
        out[names_off as usize..][..names.len()].copy_from_slice(&names);
        let sh = |name, kind, flags, offset, size| Shdr {
            name,
            kind,
            flags,
            addr: 0,
            offset,
            size,
            link: 0,
            info: 0,
            addralign: 1,
            entsize: 0,
        };
        let hdrs = [
            sh(0, 0, 0, 0, 0),
            sh(1, SHT_PROGBITS, 6, text_off, text.len() as u64),
            sh(7, 3, 0, names_off, names.len() as u64),
        ];
        for (i, h) in hdrs.iter().enumerate() {
            let at = shoff as usize + i * fmt.shdr_size();
            h.write(fmt, &mut out[at..at + fmt.shdr_size()]);
        }
        out
    }

    fn section(elf_bytes: &[u8], name: &str) -> Option<(Shdr, Vec<u8>)> {
        let elf = Elf::parse(elf_bytes).unwrap();
        (1..elf.shdrs.len()).find_map(|i| {
            (elf.section_name(i).unwrap() == name.as_bytes()).then(|| {
                let s = elf.shdrs[i].clone();
                let d = match s.size {
                    0 => Vec::new(),
                    n => elf_bytes[s.offset as usize..(s.offset + n) as usize].to_vec(),
                };
                (s, d)
            })
        })
    }

    #[test]
    fn add_then_replace_all_formats() {
        for (is64, le) in [(true, true), (true, false), (false, true), (false, false)] {
            let input = tiny(is64, le);
            let out = set_sections(&input, &[(".BTF", b"hello BTF")]).unwrap();
            let (s, d) = section(&out, ".BTF").unwrap();
            assert_eq!(d, b"hello BTF");
            assert_eq!((s.kind, s.flags, s.addralign), (SHT_PROGBITS, 0, 1));
            assert_eq!(section(&out, ".text").unwrap().1, b"\x90\x90\xc3\x00");
            // .BTF is now the last data: a larger replacement rewrites it in place.
            let out2 = set_sections(&out, &[(".BTF", b"a longer BTF payload")]).unwrap();
            let (s2, d2) = section(&out2, ".BTF").unwrap();
            assert_eq!(d2, b"a longer BTF payload");
            assert_eq!(s2.offset, s.offset, "is64 {is64} le {le}");
            assert!(out2.len() - out.len() < 11 + 8);
            // A smaller one goes where the old one was.
            let out3 = set_sections(&out2, &[(".BTF", b"x"), (".BTF.base", b"yz")]).unwrap();
            assert_eq!(section(&out3, ".BTF").unwrap().1, b"x");
            assert_eq!(section(&out3, ".BTF.base").unwrap().1, b"yz");
            assert_eq!(Elf::parse(&out3).unwrap().shdrs.len(), 5);
        }
    }

    /// Past 0xff00 sections the count moves to section 0's `sh_size` (e_shnum = 0).
    #[test]
    fn extended_section_numbering() {
        use object::{Object, ObjectSection};
        let input = tiny(true, true);
        let names: Vec<String> = (0..SHN_LORESERVE).map(|i| format!(".s{i}")).collect();
        let reqs: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
        let out = set_sections(&input, &reqs).unwrap();
        let fmt = Format {
            is64: true,
            le: true,
        };
        assert_eq!(fmt.u16(&out, 60), 0, "e_shnum");
        let count = 3 + SHN_LORESERVE;
        let parsed = object::File::parse(&*out).unwrap();
        assert_eq!(parsed.sections().count(), count - 1);
        assert!(parsed.section_by_name(".s65279").is_some());
        // Adding to a file already in extended numbering keeps it.
        let out2 = set_sections(&out, &[(".BTF", b"xyz")]).unwrap();
        assert_eq!(fmt.u16(&out2, 60), 0, "e_shnum");
        let parsed = object::File::parse(&*out2).unwrap();
        assert_eq!(parsed.sections().count(), count);
        let btf = parsed.section_by_name(".BTF").unwrap();
        assert_eq!(btf.data().unwrap(), b"xyz");
        assert_eq!(
            parsed.section_by_name(".text").unwrap().data().unwrap(),
            b"\x90\x90\xc3\x00"
        );
    }

    #[test]
    fn garbage_and_truncation_are_errors() {
        assert!(matches!(
            set_sections(b"", &[]),
            Err(ElfWriteError::NotElf(_))
        ));
        assert!(matches!(
            set_sections(b"MZ\x90\x00 not an elf file", &[]),
            Err(ElfWriteError::NotElf(_))
        ));
        let good = tiny(true, true);
        for cut in [16, 40, 63, good.len() - 1, good.len() - 64] {
            let r = set_sections(&good[..cut], &[(".BTF", b"x")]);
            assert!(
                matches!(r, Err(ElfWriteError::Malformed(_))),
                "cut {cut}: {r:?}"
            );
        }
        let mut bad = good.clone();
        bad[4] = 9;
        assert!(matches!(
            set_sections(&bad, &[]),
            Err(ElfWriteError::Malformed(_))
        ));
    }

    /// Bytes after the section header table belong to no header: they are kept, and
    /// the new table goes after them.
    #[test]
    fn trailing_bytes_are_kept() {
        let mut input = tiny(false, false);
        input.extend_from_slice(b"TRAILER");
        let out = set_sections(&input, &[(".BTF", b"payload")]).unwrap();
        assert!(out[52..input.len() - 7] == input[52..input.len() - 7]);
        assert_eq!(&out[input.len() - 7..input.len()], b"TRAILER");
        assert_eq!(section(&out, ".BTF").unwrap().1, b"payload");
        assert_eq!(section(&out, ".text").unwrap().1, b"\x90\x90\xc3\x00");
    }

    /// An empty section's offset means nothing; giving it contents must not patch there.
    #[test]
    fn empty_section_gets_contents() {
        let mut input = tiny(true, true);
        let fmt = Format {
            is64: true,
            le: true,
        };
        let shoff = fmt.u64(&input, 40) as usize;
        // .text (section 1): size 0 at an offset past the end of the file.
        let text = shoff + 64;
        fmt.put(&mut input, text + 24, 1_000_000u64.to_le_bytes());
        fmt.put(&mut input, text + 32, 0u64.to_le_bytes());
        let out = set_sections(&input, &[(".text", b"")]).unwrap();
        assert_eq!(section(&out, ".text").unwrap().1, b"");
        let out = set_sections(&input, &[(".text", b"\xc3")]).unwrap();
        assert_eq!(section(&out, ".text").unwrap().1, b"\xc3");
    }

    #[test]
    fn bad_requests() {
        let good = tiny(true, true);
        assert!(set_sections(&good, &[("", b"x")]).is_err());
        assert!(set_sections(&good, &[(".a", b"x"), (".a", b"y")]).is_err());
        assert!(set_sections(&good, &[(".shstrtab", b"x")]).is_err());
        let mut signed = good.clone();
        signed.extend_from_slice(MODULE_SIG_MAGIC);
        let err = set_sections(&signed, &[(".BTF", b"x")]).unwrap_err();
        assert!(err.to_string().contains("signature"), "{err}");
        // Name the section name table ".text" too: which .text is meant is unclear.
        let mut twice = good.clone();
        let fmt = Format {
            is64: true,
            le: true,
        };
        let shoff = fmt.u64(&twice, 40) as usize;
        fmt.put_u32(&mut twice, shoff + 2 * 64, 1);
        let err = set_sections(&twice, &[(".text", b"x")]).unwrap_err();
        assert!(
            err.to_string()
                .contains("more than one section named .text"),
            "{err}"
        );
    }
}
