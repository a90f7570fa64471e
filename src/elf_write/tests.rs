//! The writer on small hand-built files of every class and byte order.

use super::plan::*;
use super::reader::*;
use super::*;
use object::elf::FileHeader64;
use object::{Endianness, U16, U32, U64};

/// The ELF header of a relocatable file of format `fmt`, without program headers.
fn ehdr(fmt: Format, shoff: u64, shnum: u16, shstrndx: u16) -> Vec<u8> {
    use object::elf::*;
    let e = fmt.endian();
    let e_ident = Ident {
        magic: ELFMAG,
        class: if fmt.is64 { ELFCLASS64 } else { ELFCLASS32 },
        data: if fmt.le { ELFDATA2LSB } else { ELFDATA2MSB },
        version: EV_CURRENT,
        os_abi: 0,
        abi_version: 0,
        padding: [0; 7],
    };
    let size = |n: usize| U16::new(e, u16::try_from(n).unwrap());
    // The two classes' headers differ in the width of entry, phoff and shoff.
    macro_rules! header {
        ($header:ident, $word:ident) => {
            object::pod::bytes_of(&$header::<Endianness> {
                e_ident,
                e_type: U16::new(e, ET_REL),
                e_machine: U16::new(e, 0),
                e_version: U32::new(e, 1),
                e_entry: $word::new(e, 0),
                e_phoff: $word::new(e, 0),
                e_shoff: $word::new(e, shoff.try_into().unwrap()),
                e_flags: U32::new(e, 0),
                e_ehsize: size(fmt.ehdr_size()),
                e_phentsize: U16::new(e, 0),
                e_phnum: U16::new(e, 0),
                e_shentsize: size(fmt.shdr_size()),
                e_shnum: U16::new(e, shnum),
                e_shstrndx: U16::new(e, shstrndx),
            })
            .to_vec()
        };
    }
    if fmt.is64 {
        header!(FileHeader64, U64)
    } else {
        header!(FileHeader32, U32)
    }
}

/// `e_shnum` of a little-endian ELF64 file.
fn e_shnum(elf_bytes: &[u8]) -> u16 {
    use object::read::elf::FileHeader;
    let h = FileHeader64::<Endianness>::parse(elf_bytes).unwrap();
    h.e_shnum(Endianness::Little)
}

/// Changes section header `idx` of `elf_bytes` in place.
fn edit_shdr(elf_bytes: &mut [u8], idx: usize, edit: impl FnOnce(&mut Shdr)) {
    let elf = Elf::parse(elf_bytes).unwrap();
    let (fmt, mut s) = (elf.fmt, elf.shdrs[idx].clone());
    let at = usize::try_from(elf.shoff).unwrap() + idx * fmt.shdr_size();
    edit(&mut s);
    let mut b = Vec::new();
    s.write(fmt, &mut b).unwrap();
    elf_bytes[at..at + b.len()].copy_from_slice(&b);
}

/// A minimal relocatable file: null section, `.text`, `.shstrtab`.
fn tiny(is64: bool, le: bool) -> Vec<u8> {
    let fmt = Format { is64, le };
    let names = b"\0.text\0.shstrtab\0".to_vec();
    let text = b"\x90\x90\xc3\x00".to_vec();
    let text_off = fmt.ehdr_size() as u64;
    let names_off = text_off + text.len() as u64;
    let shoff = align_up(names_off + names.len() as u64, 8);
    let mut out = ehdr(fmt, shoff, 3, 2);
    out.extend_from_slice(&text);
    out.extend_from_slice(&names);
    out.resize(usize::try_from(shoff).unwrap(), 0);
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
        sh(7, object::elf::SHT_STRTAB, 0, names_off, names.len() as u64),
    ];
    for h in &hdrs {
        h.write(fmt, &mut out).unwrap();
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
                n => elf_bytes[range_in(elf_bytes, s.offset, n).unwrap()].to_vec(),
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
    assert_eq!(e_shnum(&out), 0, "e_shnum");
    let count = 3 + SHN_LORESERVE;
    let parsed = object::File::parse(&*out).unwrap();
    assert_eq!(parsed.sections().count(), count - 1);
    assert!(parsed.section_by_name(".s65279").is_some());
    // Adding to a file already in extended numbering keeps it.
    let out2 = set_sections(&out, &[(".BTF", b"xyz")]).unwrap();
    assert_eq!(e_shnum(&out2), 0, "e_shnum");
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
    // .text (section 1): size 0 at an offset past the end of the file.
    edit_shdr(&mut input, 1, |s| {
        s.offset = 1_000_000;
        s.size = 0;
    });
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
    edit_shdr(&mut twice, 2, |s| s.name = 1);
    let err = set_sections(&twice, &[(".text", b"x")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("more than one section named .text"),
        "{err}"
    );
}
