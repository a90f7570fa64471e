//! The input ELF file: mapped once (through [`crate::mmap::map_file`]) and parsed
//! once ([`ElfFile`]); that one parse serves the DWARF sections located here, the
//! relocations of a module's DWARF (`reloc`), the symbol tables
//! ([`crate::symbols`]) and the kfunc sets ([`crate::kfuncs`]); once the DWARF is
//! encoded, the writer copies the file from the same mapping ([`MappedElf`]).
//!
//! Sections of a linked image (vmlinux) are used in place, straight from the mapping.
//! Two cases need an owned copy: compressed sections (`SHF_COMPRESSED`, zlib or zstd)
//! are inflated, and the `.debug_*` sections of a relocatable object (a kernel module)
//! get their `.rela.debug_*` relocations applied, because until then every string or
//! section offset in them reads as zero.

mod error;
mod file;
mod reloc;

pub use error::{ElfError, RelocProblem};
pub(crate) use file::with_elf;
pub use file::ElfFile;
pub(crate) use reloc::read_uint;

use crate::kfuncs::Kfuncs;
use crate::symbols::{ElfSymbols, FunctionTable, SymbolsRest};
use crate::Error;
use object::read::elf::FileHeader;
use object::{Endianness, Object, ObjectSection};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::{Mutex, OnceLock, PoisonError};

/// The DWARF sections we read; each is located once when the file is opened.
pub const DEBUG_SECTIONS: &[&str] = &[
    ".debug_info",
    ".debug_abbrev",
    ".debug_str",
    ".debug_str_offsets",
    ".debug_line",
    ".debug_line_str",
    ".debug_addr",
    ".debug_rnglists",
    ".debug_ranges",
    ".debug_loclists",
    ".debug_loc",
    ".debug_types",
];

/// Where a section's bytes live.
enum SectionData {
    /// A range of the mapped file, used in place.
    Mapped { start: usize, len: usize },
    /// Inflated or relocated bytes.
    Owned(Vec<u8>),
}

self_cell::self_cell!(
    /// The mapping and its one parse, which borrows it.
    struct Mapped {
        owner: memmap2::Mmap,
        #[covariant]
        dependent: ElfFile,
    }
);

/// An input ELF file's one mapping and parse, without its debug sections: what an
/// [`ElfInput`] leaves once the DWARF is encoded ([`ElfInput::into_mapped`]), kept for
/// the writer, which copies the file from it with the new `.BTF`.
pub struct MappedElf {
    path: PathBuf,
    /// The file itself, for reads that should not map its pages in
    /// ([`ElfInput::read_at`]).
    file: std::fs::File,
    elf: Mapped,
}

impl MappedElf {
    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The one parse of the file.
    pub fn elf(&self) -> &ElfFile<'_> {
        self.elf.borrow_dependent()
    }

    /// The whole mapped file.
    pub fn bytes(&self) -> &[u8] {
        self.elf.borrow_owner()
    }

    /// The mapping itself, to release pages of consumed parts
    /// ([`crate::mmap::release_range`]).
    pub fn map(&self) -> &memmap2::Mmap {
        self.elf.borrow_owner()
    }
}

/// An opened input ELF file.
pub struct ElfInput {
    file: MappedElf,
    sections: HashMap<&'static str, SectionData>,
    little_endian: bool,
    relocatable: bool,
    /// The symbol table and section headers, when they had to be read to open the
    /// file (a relocatable object's section layout); the encoder reuses them.
    symbols: Option<Arc<ElfSymbols>>,
}

impl ElfInput {
    /// Maps `path` and prepares its debug sections. Fails with an error naming the
    /// file if it cannot be read, is not an ELF file, or has no `.debug_info`.
    pub fn open(path: &Path) -> Result<ElfInput, Error> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let map = crate::mmap::map_file(&file).map_err(|e| Error::io(path, e))?;
        let elf = Mapped::try_new(map, |map| ElfFile::parse(map)).map_err(|e| e.in_file(path))?;
        let parsed = elf.borrow_dependent();
        let relocatable = parsed.is_relocatable();
        let little_endian = parsed.is_little_endian();
        // pahole reads modules through libdwfl, which relocates their DWARF with
        // the section addresses it lays out itself: use the same addresses.
        let symbols = if relocatable {
            Some(Arc::new(
                ElfSymbols::from_elf(parsed).map_err(|e| e.in_file(path))?,
            ))
        } else {
            None
        };
        let layout: Vec<u64> = symbols
            .iter()
            .flat_map(|syms| syms.sections.iter().map(|s| s.addr))
            .collect();
        let sections =
            with_elf!(parsed, f => debug_sections(f, &layout)).map_err(|e| e.in_file(path))?;
        let input = ElfInput {
            file: MappedElf {
                path: path.to_path_buf(),
                file,
                elf,
            },
            sections,
            little_endian,
            relocatable,
            symbols,
        };
        if input.section(".debug_info").is_empty() {
            return Err(ElfError::NoDebugInfo.in_file(path));
        }
        Ok(input)
    }

    /// Fills `buf` with the file's bytes at `offset` (an offset in
    /// [`ElfInput::map`], which maps the whole file): what that part of the mapping
    /// holds, read without faulting its pages in.
    pub fn read_at(&self, offset: usize, buf: &mut [u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.file.file.read_exact_at(buf, offset as u64)
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The mapping and parse without the debug sections, whose owned copies (a
    /// module's relocated DWARF) are freed. The pages of the whole mapping are given
    /// back, so that keeping it costs no memory while the dedup runs: the writer's
    /// reads fault them back in.
    pub fn into_mapped(self) -> MappedElf {
        let map = self.file.map();
        // Best effort: a page not given back costs memory, not correctness.
        let _ = crate::mmap::release_range(map, 0..map.len());
        self.file
    }

    /// Whether the file is little-endian.
    pub fn is_little_endian(&self) -> bool {
        self.little_endian
    }

    /// Whether the file is a relocatable object (a kernel module).
    pub fn is_relocatable(&self) -> bool {
        self.relocatable
    }

    /// The (uncompressed, relocated) bytes of a debug section; empty if absent.
    pub fn section(&self, name: &str) -> &[u8] {
        match self.sections.get(name) {
            Some(SectionData::Mapped { start, len }) => &self.bytes()[*start..*start + *len],
            Some(SectionData::Owned(v)) => v,
            None => &[],
        }
    }

    /// The symbol table and section headers if opening the file read them (a
    /// relocatable object), so they are not parsed twice.
    pub fn parsed_symbols(&self) -> Option<Arc<ElfSymbols>> {
        self.symbols.clone()
    }

    /// The tables the function and variable encoders need, from the one parse: the
    /// symbols (those opening the file read, else read now) and, if `kfuncs`, the
    /// kfunc sets (else none). Both are owned, so the pages of `.symtab` and
    /// `.strtab` are given back afterwards. An error is the file's
    /// ([`ElfError::in_file`] names it): the encoder shares it between its workers.
    /// [`SymbolHalves`] reads them on two threads.
    pub fn symbol_tables(&self, kfuncs: bool) -> Result<(Arc<ElfSymbols>, Kfuncs), ElfError> {
        SymbolHalves::new(self, kfuncs).join()
    }

    /// The one parse of the file.
    pub fn elf(&self) -> &ElfFile<'_> {
        self.file.elf()
    }

    /// The whole mapped file.
    pub fn bytes(&self) -> &[u8] {
        self.file.bytes()
    }

    /// The mapping itself, to release pages of consumed sections
    /// ([`crate::mmap::ReleaseFront`]).
    pub fn map(&self) -> &memmap2::Mmap {
        self.file.map()
    }
}

/// The reading of [`ElfInput::symbol_tables`] in two halves, for two threads at
/// once: the function table (the larger: its 100,000 names on a vmlinux are sorted)
/// and the rest (section headers, objects, kfunc sets). Each half is read once, by
/// the first thread to ask for it; a thread asking for one another is reading
/// waits for it.
pub struct SymbolHalves<'a> {
    input: &'a ElfInput,
    kfuncs: bool,
    /// Each half once read; taken out by [`SymbolHalves::join`].
    functions: OnceLock<Half<FunctionTable>>,
    rest: OnceLock<Half<(SymbolsRest, Kfuncs)>>,
    /// Whether a thread has started on the function table.
    functions_claimed: AtomicBool,
}

/// A half of [`SymbolHalves`] once read, until it is joined.
type Half<T> = Mutex<Option<Result<T, ElfError>>>;

impl<'a> SymbolHalves<'a> {
    /// The halves of `input`'s tables (kfunc sets only if `kfuncs`), none read yet.
    pub fn new(input: &'a ElfInput, kfuncs: bool) -> SymbolHalves<'a> {
        SymbolHalves {
            input,
            kfuncs,
            functions: OnceLock::new(),
            rest: OnceLock::new(),
            functions_claimed: AtomicBool::new(input.symbols.is_some()),
        }
    }

    /// Reads the half no thread has started on yet: the function table if it is
    /// free, else the rest.
    pub fn read_either(&self) {
        if !self.functions_claimed.swap(true, Ordering::AcqRel) {
            self.read_functions();
        } else {
            self.read_rest();
        }
    }

    /// Reads the function table, unless it was (or is being) read.
    pub fn read_functions(&self) {
        self.functions_claimed.store(true, Ordering::Release);
        if self.input.symbols.is_none() {
            self.functions
                .get_or_init(|| Mutex::new(Some(FunctionTable::from_elf(self.input.elf()))));
        }
    }

    /// Reads the rest, unless it was (or is being) read.
    pub fn read_rest(&self) {
        self.rest.get_or_init(|| {
            let elf = self.input.elf();
            let read = || {
                let rest = match self.input.symbols {
                    // Read whole when the file was opened: only the kfuncs are left.
                    Some(_) => SymbolsRest::default(),
                    None => SymbolsRest::from_elf(elf)?,
                };
                let kfuncs = if self.kfuncs {
                    Kfuncs::from_elf(elf)?
                } else {
                    Kfuncs::default()
                };
                Ok((rest, kfuncs))
            };
            Mutex::new(Some(read()))
        });
    }

    /// The tables once both halves are read (each read here if no thread has);
    /// gives back the pages of `.symtab` and `.strtab`. Called once: the halves
    /// are moved out.
    pub fn join(&self) -> Result<(Arc<ElfSymbols>, Kfuncs), ElfError> {
        self.read_functions();
        self.read_rest();
        fn taken<T>(half: Option<&Mutex<Option<T>>>) -> T {
            half.expect("both halves are read above")
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .expect("the halves are joined once")
        }
        let (rest, kfuncs) = taken(self.rest.get())?;
        let syms = match &self.input.symbols {
            Some(syms) => Arc::clone(syms),
            None => Arc::new(rest.with_functions(taken(self.functions.get())?)),
        };
        let input = self.input;
        for s in &syms.sections {
            if s.sh_type == object::elf::SHT_SYMTAB || &*s.name == ".strtab" {
                let start = usize::try_from(s.file_offset).unwrap_or(usize::MAX);
                let end = start.saturating_add(usize::try_from(s.size).unwrap_or(usize::MAX));
                if end <= input.bytes().len() {
                    // Best effort: a page not given back costs memory, not correctness.
                    let _ = crate::mmap::release_range(input.map(), start..end);
                }
            }
        }
        Ok((syms, kfuncs))
    }
}

/// Parses the ELF file `data`, read from `path`, and reads something out of it with
/// `read`; an error names the file. For tables read from a file that is not an
/// opened [`ElfInput`] (whose one parse serves them otherwise).
pub fn read_file<T>(
    path: &Path,
    data: &[u8],
    read: impl FnOnce(&ElfFile<'_>) -> Result<T, ElfError>,
) -> Result<T, Error> {
    ElfFile::parse(data)
        .and_then(|elf| read(&elf))
        .map_err(|e| e.in_file(path))
}

/// Locates (and for a module relocates) the [`DEBUG_SECTIONS`] of `f`, with the
/// section addresses `layout` (libdwfl's, for a relocatable object).
fn debug_sections<'a, Elf: FileHeader<Endian = Endianness>>(
    f: &object::read::elf::ElfFile<'a, Elf>,
    layout: &[u64],
) -> Result<HashMap<&'static str, SectionData>, ElfError> {
    let mut sections = HashMap::new();
    for &name in DEBUG_SECTIONS {
        let Some(sec) = f.section_by_name(name) else {
            continue;
        };
        sections.insert(name, load_section(f, &sec, name, layout)?);
    }
    Ok(sections)
}

/// Loads one section: in place when possible, otherwise an owned, inflated and
/// relocated copy.
fn load_section<'a, Elf: FileHeader<Endian = Endianness>>(
    f: &object::read::elf::ElfFile<'a, Elf>,
    sec: &object::read::elf::ElfSection<'a, '_, Elf>,
    name: &str,
    layout: &[u64],
) -> Result<SectionData, ElfError> {
    let data_err = |err| ElfError::SectionData {
        section: name.to_string(),
        err,
    };
    let range = sec.compressed_file_range().map_err(data_err)?;
    let compressed = range.format != object::CompressionFormat::None;
    if compressed
        && !plausible_inflation(range.format, range.compressed_size, range.uncompressed_size)
    {
        // The claimed size would size the buffer the section is inflated into.
        return Err(ElfError::ImplausibleCompression {
            section: name.to_string(),
            claimed: range.uncompressed_size,
            compressed: range.compressed_size,
        });
    }
    let relocatable = f.kind() == object::ObjectKind::Relocatable;
    let has_relocs = relocatable && sec.relocations().next().is_some();
    if !compressed && !has_relocs {
        let Some((off, size)) = sec.file_range() else {
            // SHT_NOBITS: no bytes in the file.
            return Ok(SectionData::Owned(Vec::new()));
        };
        let out_of_bounds = || ElfError::SectionOutOfBounds {
            section: name.to_string(),
        };
        let start = usize::try_from(off).map_err(|_| out_of_bounds())?;
        let len = usize::try_from(size).map_err(|_| out_of_bounds())?;
        if start
            .checked_add(len)
            .is_none_or(|end| end > f.data().len())
        {
            return Err(out_of_bounds());
        }
        return Ok(SectionData::Mapped { start, len });
    }
    let mut bytes = sec.uncompressed_data().map_err(data_err)?.into_owned();
    if has_relocs {
        reloc::apply_relocations(f, sec, &mut bytes, layout).map_err(|(offset, problem)| {
            ElfError::Relocation {
                section: name.to_string(),
                offset,
                problem,
            }
        })?;
    }
    Ok(SectionData::Owned(bytes))
}

/// Whether `compressed` bytes can inflate to `claimed` bytes: deflate reaches at most
/// 1032:1, zstd (RLE blocks) about 43,700:1. A larger claim is a damaged header, and
/// must not size an allocation (a fuzzed header asked for 2^56 bytes).
fn plausible_inflation(format: object::CompressionFormat, compressed: u64, claimed: u64) -> bool {
    let ratio = match format {
        object::CompressionFormat::Zlib => 1032,
        _ => 1 << 16,
    };
    claimed <= compressed.saturating_mul(ratio).saturating_add(4096)
}
