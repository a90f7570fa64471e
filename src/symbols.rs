//! The ELF symbol table as pahole v1.31's BTF encoder sees it, built once per input
//! file and shared read-only by every worker.
//!
//! Three things are read from `.symtab` and the section headers:
//! - the *function table*: every `STT_FUNC` symbol grouped under its base name (the
//!   name cut at the first `.`), minus the `.cold` / `.part` pieces that are not
//!   functions of their own. A DWARF subprogram is matched to it by name only; the
//!   symbols' addresses decide "ambiguous address" and "optimized symbol".
//! - the *sections*: index, name, type and address of every section, with the
//!   address libdwfl gives it (for ET_REL modules libdwfl lays the allocated
//!   sections out itself, and pahole's DWARF addresses are in that layout);
//! - the *data objects*: `STT_OBJECT` symbols, which pahole consults for variables
//!   whose DWARF address is 0, and which list the per-CPU variables.
//!
//! See docs/pahole-functions.md for the rules and where they come from.

use crate::hash::{hash_str, Prehashed};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::path::Path;

use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::Endianness;

use crate::elf::{with_elf, ElfError, ElfFile};
use crate::Result;

/// The name of the per-CPU data section, whose variables the `var` feature encodes.
pub const PERCPU_SECTION: &str = ".data..percpu";

/// libdwfl starts the layout of an offline ET_REL module at this address
/// (`OFFLINE_REDZONE` in elfutils' libdwflP.h)…
const DWFL_OFFLINE_BASE: u64 = 0x10000;
/// …rounded up to this alignment (`REL_MIN_ALIGN` in dwfl_report_elf.c).
const DWFL_REL_MIN_ALIGN: u64 = 0x100;

/// One `STT_FUNC` symbol kept in the function table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncSym {
    /// The full symbol name, suffixes included (`foo.isra.0`).
    pub name: Box<str>,
    /// `st_value`: a virtual address in ET_EXEC, a section offset in ET_REL.
    pub addr: u64,
    /// `st_size`.
    pub size: u64,
    /// The section the symbol is defined in (extended indices resolved), if any.
    pub section: Option<u32>,
    /// `STB_LOCAL`, `STB_GLOBAL` or `STB_WEAK`.
    pub bind: u8,
    /// The length of the base name (up to the first `.`): found once, as the name
    /// is asked for its base for every unit's functions (and fits the padding).
    base_len: u32,
}

impl FuncSym {
    /// A symbol named `name`.
    pub fn new(name: Box<str>, addr: u64, size: u64, section: Option<u32>, bind: u8) -> Self {
        // Names come from a string table of less than 4 GiB.
        #[allow(clippy::cast_possible_truncation)]
        let base_len = base_name(&name).len() as u32;
        FuncSym {
            name,
            addr,
            size,
            section,
            bind,
            base_len,
        }
    }

    /// The name up to its first `.` (`foo.isra.0` → `foo`).
    pub fn base(&self) -> &str {
        &self.name[..self.base_len as usize]
    }

    /// The part of the name from the first `.` on (`.isra.0`), empty if none.
    pub fn suffix(&self) -> &str {
        &self.name[self.base_len as usize..]
    }

    /// Whether the symbol is left out of the table as a piece of a function
    /// (pahole's `str_contains_non_fn_suffix`): its suffix contains `.cold` or
    /// `.part`.
    fn is_piece(&self) -> bool {
        let s = self.suffix();
        s.contains(".cold") || s.contains(".part")
    }

    /// Whether pahole counts this symbol as an optimized clone: its suffix contains
    /// `.constprop` or `.isra` (pahole's `str_contains_optimized_fn_suffix`).
    pub fn is_optimized_clone(&self) -> bool {
        let s = self.suffix();
        s.contains(".constprop") || s.contains(".isra")
    }
}

/// All function symbols sharing one base name: what pahole calls an `elf_function`.
/// A view into the [`FunctionTable`], which holds every symbol in one array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElfFunction<'t> {
    /// The symbols, in `.symtab` order; never empty.
    pub syms: &'t [FuncSym],
    /// The symbols do not all share one address (pahole's quirky rule, see
    /// [`ambiguous_address`]); pahole then emits no FUNC for this name.
    pub ambiguous_addr: bool,
}

impl<'t> ElfFunction<'t> {
    /// The base name: the symbol name up to its first `.`.
    pub fn name(&self) -> &'t str {
        self.syms[0].base()
    }

    /// Whether one of the symbols at exactly `addr` is an optimized clone
    /// (`.isra` / `.constprop`): pahole's `optimized_symbol` for a DWARF function
    /// whose low_pc is `addr`.
    pub fn optimized_symbol_at(&self, addr: u64) -> bool {
        addr != 0
            && self
                .syms
                .iter()
                .any(|s| s.addr == addr && s.is_optimized_clone())
    }

    /// Whether any symbol of this function is at `addr`.
    pub fn has_sym_at(&self, addr: u64) -> bool {
        self.syms.iter().any(|s| s.addr == addr)
    }
}

/// pahole's `elf_function__has_ambiguous_address`, kept bug-for-bug: an address of
/// 0 counts as "not seen yet", so `[0, X]` is not ambiguous while `[X, 0]` is.
pub fn ambiguous_address(syms: &[FuncSym]) -> bool {
    if syms.len() <= 1 {
        return false;
    }
    let mut seen = 0u64;
    for s in syms {
        if seen != 0 && seen != s.addr {
            return true;
        }
        seen = s.addr;
    }
    false
}

/// A symbol name up to its first `.` (`foo.isra.0` → `foo`).
pub fn base_name(sym_name: &str) -> &str {
    sym_name.find('.').map_or(sym_name, |i| &sym_name[..i])
}

/// The function table: one [`ElfFunction`] per base name, sorted by name in byte
/// order (strcmp), which is also the order pahole emits FUNCs in.
#[derive(Clone, Debug, Default)]
pub struct FunctionTable {
    /// Every kept symbol, sorted by base name, those of one name in `.symtab`
    /// order: one array rather than one per name, which for a vmlinux's 100,000
    /// names were as many allocations and a sixth of the run's page faults.
    syms: Vec<FuncSym>,
    /// Per base name, in name order: where its symbols start in `syms`, and
    /// whether their addresses are ambiguous.
    funcs: Vec<(u32, bool)>,
    /// (address, function index, index in `syms`), sorted by address then position.
    by_addr: Vec<(u64, u32, u32)>,
    /// The hash of each base name → its function's index ([`FunctionTable::index_of`]:
    /// a look-up per subprogram of every unit instead of a binary search over
    /// string compares). Built with the table, so on the thread that reads it, not
    /// where the two halves of the symbol tables are joined.
    by_hash: HashMap<u64, u32, BuildHasherDefault<Prehashed>>,
    /// How many `STT_FUNC` symbols were dropped as `.cold` / `.part` pieces.
    pieces_skipped: usize,
}

impl FunctionTable {
    /// Reads the `STT_FUNC` symbols of `elf` into a table.
    pub fn from_elf(elf: &ElfFile<'_>) -> Result<FunctionTable, ElfError> {
        Ok(FunctionTable::from_syms(
            with_elf!(elf, f => function_symbols(f))?,
        ))
    }

    /// Builds the table from the `STT_FUNC` symbols, given in `.symtab` order.
    pub fn from_syms(syms: impl IntoIterator<Item = FuncSym>) -> FunctionTable {
        let mut syms: Vec<FuncSym> = syms.into_iter().collect();
        let before = syms.len();
        syms.retain(|s| !s.is_piece());
        let pieces_skipped = before - syms.len();
        // Positions sorted by (base name, position): the same order as a stable
        // sort by name, which is what glibc's merge-sort qsort gives pahole. Each
        // with its base name's prefix key and length beside it: most comparisons
        // are settled by the key, without reading the names (a vmlinux sorts
        // 100,000), and the others need not look for the `.` again.
        //
        // Each base name's hash is taken here too, while the names are read in the
        // order they were allocated in: read again in sorted order, every name is
        // a cache miss of its own (the runs and the index below, which did, took
        // 22 ms of the 60 the table took on the corpus vmlinux).
        let base = |&(_, i, len): &(u128, u32, u32)| &syms[i as usize].name[..len as usize];
        let mut order: Vec<(u128, u32, u32)> = Vec::with_capacity(syms.len());
        let mut hashes: Vec<u64> = Vec::with_capacity(syms.len());
        for (i, s) in syms.iter().enumerate() {
            let b = s.base();
            hashes.push(hash_str(b.as_bytes()));
            // Names are shorter than the 4 GiB string table that holds them.
            #[allow(clippy::cast_possible_truncation)]
            order.push((name_prefix(b), index32(i), b.len() as u32));
        }
        // A name of at most 16 bytes is its prefix key and its length: of two with
        // equal keys, if either is that short, it is the start of the other, and
        // only longer ones need reading.
        let short = |x: &(u128, u32, u32)| x.2 as usize <= PREFIX_BYTES;
        order.sort_unstable_by(|x, y| {
            x.0.cmp(&y.0)
                .then_with(|| {
                    if short(x) || short(y) {
                        x.2.cmp(&y.2)
                    } else {
                        base(x).cmp(base(y))
                    }
                })
                .then(x.1.cmp(&y.1))
        });
        let same = |x: &(u128, u32, u32), y: &(u128, u32, u32)| {
            x.0 == y.0
                && x.2 == y.2
                && (short(x)
                    || (hashes[x.1 as usize] == hashes[y.1 as usize] && base(x) == base(y)))
        };
        // Where each name's run starts, in sorted positions.
        let mut funcs = Vec::new();
        for k in 0..order.len() {
            if k == 0 || !same(&order[k - 1], &order[k]) {
                funcs.push((index32(k), false));
            }
        }
        // Of names with one hash, the first is kept (`index_of` looks the others
        // up by name).
        let mut by_hash = HashMap::with_capacity_and_hasher(funcs.len(), Default::default());
        for (fi, &(k, _)) in funcs.iter().enumerate() {
            by_hash
                .entry(hashes[order[k as usize].1 as usize])
                .or_insert(index32(fi));
        }
        drop(hashes);
        let mut perm: Vec<u32> = order.iter().map(|o| o.1).collect();
        drop(order);
        permute_in_place(&mut syms, &mut perm);
        drop(perm);
        let mut by_addr = Vec::with_capacity(syms.len());
        for fi in 0..funcs.len() {
            let (start, end) = run_bounds(&funcs, syms.len(), fi);
            funcs[fi].1 = ambiguous_address(&syms[start..end]);
            for (si, s) in syms[start..end].iter().enumerate() {
                by_addr.push((s.addr, index32(fi), index32(start + si)));
            }
        }
        by_addr.sort_unstable();
        FunctionTable {
            syms,
            funcs,
            by_addr,
            by_hash,
            pieces_skipped,
        }
    }

    /// The number of distinct base names.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    /// Whether the table is empty (pahole then falls back to "external functions
    /// only", see the docs).
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }

    /// All functions, sorted by name.
    pub fn functions(&self) -> impl ExactSizeIterator<Item = ElfFunction<'_>> {
        (0..self.funcs.len()).map(|i| self.get(i))
    }

    /// The function with this base name, with its index (stable for this table).
    pub fn find(&self, name: &str) -> Option<(usize, ElfFunction<'_>)> {
        self.funcs
            .binary_search_by(|&(start, _)| self.syms[start as usize].base().cmp(name))
            .ok()
            .map(|i| (i, self.get(i)))
    }

    /// The index of the function whose base name is `name`.
    pub fn index_of(&self, name: &[u8]) -> Option<u32> {
        match self.by_hash.get(&hash_str(name)) {
            Some(&i) if self.get(i as usize).name().as_bytes() == name => Some(i),
            // Another name with the same hash, or none.
            Some(_) => {
                let (i, _) = self.find(std::str::from_utf8(name).ok()?)?;
                u32::try_from(i).ok()
            }
            None => None,
        }
    }

    /// The function at index `i` (from [`FunctionTable::find`]).
    pub fn get(&self, i: usize) -> ElfFunction<'_> {
        let (start, end) = run_bounds(&self.funcs, self.syms.len(), i);
        ElfFunction {
            syms: &self.syms[start..end],
            ambiguous_addr: self.funcs[i].1,
        }
    }

    /// Every kept symbol at exactly `addr`, as (function, symbol) pairs.
    pub fn at_addr(&self, addr: u64) -> impl Iterator<Item = (ElfFunction<'_>, &FuncSym)> {
        let start = self.by_addr.partition_point(|e| e.0 < addr);
        self.by_addr[start..]
            .iter()
            .take_while(move |e| e.0 == addr)
            .map(|&(_, f, s)| (self.get(f as usize), &self.syms[s as usize]))
    }

    /// How many `STT_FUNC` symbols were left out as `.cold` / `.part` pieces.
    pub fn pieces_skipped(&self) -> usize {
        self.pieces_skipped
    }

    /// How many symbols the table holds in all.
    pub fn sym_count(&self) -> usize {
        self.by_addr.len()
    }
}

/// Where the symbols of function `i` lie in a table's `len` symbols.
fn run_bounds(funcs: &[(u32, bool)], len: usize, i: usize) -> (usize, usize) {
    let end = funcs.get(i + 1).map_or(len, |f| f.0 as usize);
    (funcs[i].0 as usize, end)
}

/// Reorders `v` so that its `k`-th element is the one at `order[k]` before,
/// moving each element once along the permutation's cycles (no second array of
/// elements). `order` is used up.
fn permute_in_place<T>(v: &mut [T], order: &mut [u32]) {
    for i in 0..v.len() {
        let mut cur = i;
        while order[cur] as usize != cur {
            let src = order[cur] as usize;
            order[cur] = index32(cur);
            if src == i {
                break;
            }
            v.swap(cur, src);
            cur = src;
        }
    }
}

/// A position in the function table, stored in 32 bits to keep the address index
/// small.
// The positions count symbols of one symbol table, 16 or 24 bytes each: 2^32 of
// them would take a 64 GB `.symtab`, which no file we read has (or can map).
#[allow(clippy::cast_possible_truncation)]
fn index32(i: usize) -> u32 {
    i as u32
}

/// One section header, with the address pahole sees for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionInfo {
    /// The section index.
    pub index: u32,
    /// The section name.
    pub name: Box<str>,
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// `sh_addr` as stored in the file.
    pub file_addr: u64,
    /// The address pahole sees: `sh_addr` for ET_EXEC/ET_DYN, libdwfl's layout
    /// address for allocated sections of an ET_REL file (0 for the others).
    pub addr: u64,
    /// `sh_size`.
    pub size: u64,
    /// `sh_addralign`.
    pub align: u64,
    /// `sh_offset`: where the section's bytes are in the file.
    pub file_offset: u64,
}

/// One `STT_OBJECT` symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectSym {
    /// The symbol name.
    pub name: Box<str>,
    /// The section it is defined in.
    pub section: u32,
    /// `st_value`.
    pub value: u64,
    /// `st_size`.
    pub size: u64,
    /// `STB_LOCAL`, `STB_GLOBAL` or `STB_WEAK`.
    pub bind: u8,
}

/// Everything the function/variable/kfunc encoders need from `.symtab` and the
/// section headers of one input file. Owned, built once, shared read-only.
#[derive(Clone, Debug)]
pub struct ElfSymbols {
    /// The ELF type (`ET_EXEC`, `ET_REL`, …).
    pub e_type: u16,
    /// `e_machine`; pahole's parameter-register table depends on it.
    pub machine: u16,
    /// The byte order of the file.
    pub little_endian: bool,
    /// Whether the file is ELFCLASS64.
    pub is_64: bool,
    /// The function table.
    pub functions: FunctionTable,
    /// Every section header, by index (index 0 is the null section).
    pub sections: Vec<SectionInfo>,
    /// `STT_OBJECT` symbols defined in a section, sorted by (section, name, value).
    objects: Vec<ObjectSym>,
}

/// [`ElfSymbols`] but for the function table: the other half of the reading, which
/// a second thread can do meanwhile ([`FunctionTable::from_elf`]).
#[derive(Clone, Debug, Default)]
pub struct SymbolsRest {
    e_type: u16,
    machine: u16,
    little_endian: bool,
    is_64: bool,
    sections: Vec<SectionInfo>,
    objects: Vec<ObjectSym>,
}

impl SymbolsRest {
    /// Reads the section headers and the `STT_OBJECT` symbols of `elf`.
    pub fn from_elf(elf: &ElfFile<'_>) -> Result<SymbolsRest, ElfError> {
        with_elf!(elf, f => rest_from_tables(f))
    }

    /// The whole tables, with the function table read apart.
    pub fn with_functions(self, functions: FunctionTable) -> ElfSymbols {
        ElfSymbols {
            e_type: self.e_type,
            machine: self.machine,
            little_endian: self.little_endian,
            is_64: self.is_64,
            functions,
            sections: self.sections,
            objects: self.objects,
        }
    }
}

impl ElfSymbols {
    /// Reads the symbol table and section headers of the ELF file `data`, which was
    /// read from `path` (named in errors). An opened input has them from its one
    /// parse instead ([`crate::elf::ElfInput::symbol_tables`]).
    pub fn parse(path: &Path, data: &[u8]) -> Result<ElfSymbols> {
        crate::elf::read_file(path, data, ElfSymbols::from_elf)
    }

    /// The symbol table and section headers of the parsed ELF file `elf`.
    pub fn from_elf(elf: &ElfFile<'_>) -> Result<ElfSymbols, ElfError> {
        // The rest first, as `SymbolHalves::join` takes them: a damaged section
        // header is the error named before a damaged symbol.
        let rest = SymbolsRest::from_elf(elf)?;
        Ok(rest.with_functions(FunctionTable::from_elf(elf)?))
    }

    /// Whether this is a relocatable object (a kernel module).
    pub fn is_rel(&self) -> bool {
        self.e_type == elf::ET_REL
    }

    /// The section named `name` (the first one, in index order).
    pub fn section_by_name(&self, name: &str) -> Option<&SectionInfo> {
        self.sections.iter().find(|s| &*s.name == name)
    }

    /// The `.data..percpu` section, if the file has one.
    pub fn percpu_section(&self) -> Option<&SectionInfo> {
        self.section_by_name(PERCPU_SECTION)
    }

    /// pahole's `get_elf_section`: the first section (by index, from 1) of type
    /// PROGBITS or NOBITS whose `[addr, addr + size)` holds `addr`, with addresses
    /// as pahole sees them ([`SectionInfo::addr`]).
    pub fn section_for_addr(&self, addr: u64) -> Option<&SectionInfo> {
        self.sections.iter().skip(1).find(|s| {
            (s.sh_type == elf::SHT_PROGBITS || s.sh_type == elf::SHT_NOBITS)
                && s.addr <= addr
                && addr - s.addr < s.size
        })
    }

    /// pahole's `variable_in_sec`: whether an `STT_OBJECT` symbol called `name` is
    /// defined in section `section`.
    pub fn has_object_in(&self, name: &str, section: u32) -> bool {
        let start = self
            .objects
            .partition_point(|o| (o.section, &*o.name) < (section, name));
        self.objects
            .get(start)
            .is_some_and(|o| o.section == section && &*o.name == name)
    }

    /// The `STT_OBJECT` symbols of section `section`, sorted by name then value.
    pub fn objects_in(&self, section: u32) -> &[ObjectSym] {
        let start = self.objects.partition_point(|o| o.section < section);
        let end = self.objects.partition_point(|o| o.section <= section);
        &self.objects[start..end]
    }
}

/// The section headers and object symbols of one ELF class: [`SymbolsRest`].
fn rest_from_tables<Elf: FileHeader<Endian = Endianness>>(
    f: &object::read::elf::ElfFile<'_, Elf>,
) -> Result<SymbolsRest, ElfError> {
    let bad = |what, err| ElfError::Parse { what, err };
    let (header, endian) = (f.elf_header(), f.endian());
    let e_type = header.e_type(endian);
    let sections = f.elf_section_table();

    let mut infos = Vec::with_capacity(sections.len());
    for (i, sh) in sections.iter().enumerate() {
        let name = sections
            .section_name(endian, sh)
            .map_err(|e| bad("bad section name", e))?;
        let file_addr: u64 = sh.sh_addr(endian).into();
        infos.push(SectionInfo {
            index: u32::try_from(i).map_err(|_| ElfError::TooLarge {
                what: "section index",
            })?,
            name: String::from_utf8_lossy(name).into(),
            sh_type: sh.sh_type(endian),
            flags: sh.sh_flags(endian).into(),
            file_addr,
            addr: file_addr,
            size: sh.sh_size(endian).into(),
            align: sh.sh_addralign(endian).into(),
            file_offset: sh.sh_offset(endian).into(),
        });
    }
    if e_type == elf::ET_REL {
        dwfl_rel_layout(&mut infos);
    }
    let mut objects = Vec::new();
    scan_symbols(f, elf::STT_OBJECT, &mut objects, |s| {
        s.section.map(|section| ObjectSym {
            name: s.name,
            section,
            value: s.value,
            size: s.size,
            bind: s.bind,
        })
    })?;
    Ok(SymbolsRest {
        e_type,
        machine: header.e_machine(endian),
        little_endian: endian == Endianness::Little,
        is_64: header.is_type_64(),
        sections: infos,
        objects: sort_objects(objects),
    })
}

/// The `STT_FUNC` symbols of one ELF class, in `.symtab` order.
fn function_symbols<Elf: FileHeader<Endian = Endianness>>(
    f: &object::read::elf::ElfFile<'_, Elf>,
) -> Result<Vec<FuncSym>, ElfError> {
    let mut funcs = Vec::new();
    // pahole skips only symbols whose name it cannot read; an empty name is kept
    // (it never matches a DWARF name).
    scan_symbols(f, elf::STT_FUNC, &mut funcs, |s| {
        Some(FuncSym::new(s.name, s.value, s.size, s.section, s.bind))
    })?;
    Ok(funcs)
}

/// A symbol as [`scan_symbols`] reads it.
struct RawSym {
    name: Box<str>,
    section: Option<u32>,
    value: u64,
    size: u64,
    bind: u8,
}

/// Appends to `out` what `keep` makes of each symbol of type `st_type`, in `.symtab`
/// order.
fn scan_symbols<Elf: FileHeader<Endian = Endianness>, T>(
    f: &object::read::elf::ElfFile<'_, Elf>,
    st_type: u8,
    out: &mut Vec<T>,
    keep: impl Fn(RawSym) -> Option<T>,
) -> Result<(), ElfError> {
    let bad = |what, err| ElfError::Parse { what, err };
    let endian = f.endian();
    let symtab = f.elf_symbol_table();
    // Counted first: a vmlinux has 100,000 functions, and a vector grown by
    // doubling copies itself into fresh pages each time, which with the table's
    // other vectors cost a sixth of the time it took to read (54 ms then, 44 ms now).
    out.reserve(
        symtab
            .symbols()
            .iter()
            .filter(|s| s.st_type() == st_type)
            .count(),
    );
    for (index, sym) in symtab.enumerate() {
        if sym.st_type() != st_type {
            continue;
        }
        let name = symtab
            .symbol_name(endian, sym)
            .map_err(|e| bad("bad symbol name", e))?;
        let section = symtab
            .symbol_section(endian, sym, index)
            .map_err(|e| bad("bad symbol section index", e))?
            .map(|s| u32::try_from(s.0))
            .transpose()
            .map_err(|_| ElfError::TooLarge {
                what: "symbol section index",
            })?;
        out.extend(keep(RawSym {
            name: String::from_utf8_lossy(name).into(),
            section,
            value: sym.st_value(endian).into(),
            size: sym.st_size(endian).into(),
            bind: sym.st_bind(),
        }));
    }
    Ok(())
}

/// `objects` sorted by (section, name, value), those equal in all three kept in
/// `.symtab` order, as a stable sort would; the comparisons go by the names' prefix
/// keys first, kept beside the positions, instead of reading each name.
fn sort_objects(objects: Vec<ObjectSym>) -> Vec<ObjectSym> {
    let mut keyed: Vec<(u32, u128, u32)> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| (o.section, name_prefix(&o.name), index32(i)))
        .collect();
    keyed.sort_unstable_by(|&(sa, ka, a), &(sb, kb, b)| {
        let (oa, ob) = (&objects[a as usize], &objects[b as usize]);
        (sa, ka)
            .cmp(&(sb, kb))
            .then_with(|| (&oa.name, oa.value).cmp(&(&ob.name, ob.value)))
            .then(a.cmp(&b))
    });
    let mut slots: Vec<Option<ObjectSym>> = objects.into_iter().map(Some).collect();
    // Sized first: collected from a `filter_map`, the vector would grow by doubling.
    let mut sorted = Vec::with_capacity(keyed.len());
    sorted.extend(
        keyed
            .iter()
            .filter_map(|&(_, _, i)| slots[i as usize].take()),
    );
    sorted
}

/// The bytes of a name [`name_prefix`] keeps.
const PREFIX_BYTES: usize = 16;

/// The first sixteen bytes of `name`, big-endian, padded with zeros: symbol names
/// (which hold no NUL) whose keys differ compare as their keys do.
fn name_prefix(name: &str) -> u128 {
    let mut b = [0u8; PREFIX_BYTES];
    let n = name.len().min(PREFIX_BYTES);
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    u128::from_be_bytes(b)
}

/// Gives the allocated sections of an ET_REL file the addresses libdwfl's
/// `__libdwfl_report_elf` gives them when pahole reports the module offline: laid
/// out one after another in index order, each aligned, from 0x10000.
///
/// `ld -r` can leave a nonzero `sh_addr` on some sections (kernel modules have
/// `__patchable_function_entries` at 0x80 and `.data` after it); libdwfl keeps such
/// an address unless the running layout would need padding before the section, and
/// that rule is reproduced here step for step, base adjustments included.
fn dwfl_rel_layout(sections: &mut [SectionInfo]) {
    let round = |v: u64, a: u64| v.wrapping_add(a - 1) & !(a - 1);
    let alloc = |s: &SectionInfo| s.flags & u64::from(elf::SHF_ALLOC) != 0;
    let mut base = round(DWFL_OFFLINE_BASE, DWFL_REL_MIN_ALIGN);
    let mut start = base;
    let mut end = base;
    let mut bias = 0u64;
    let mut first = true;
    for i in 1..sections.len() {
        if !alloc(&sections[i]) {
            continue;
        }
        let align = sections[i].align.max(1);
        let next = round(end, align);
        let cur = sections[i].addr;
        if cur == 0 || (bias == 0 && end > start && end != next) {
            sections[i].addr = next;
            if end == base {
                // The first section placed sets the module's base.
                start = next;
                base = next;
            } else if base & (align - 1) != 0 {
                // libdwfl restarts the layout from a base aligned for this
                // section, re-placing every allocated section up to this one.
                base = round(base, align);
                start = base;
                end = base;
                for p in sections[1..=i].iter_mut().filter(|p| alloc(p)) {
                    p.addr = round(end, p.align.max(1));
                    end = p.addr + p.size;
                }
                continue;
            }
            end = next + sections[i].size;
        } else {
            // An address from the file: kept, and only tracked.
            let top = cur + sections[i].size;
            if first || end < top {
                end = top;
            }
            if first || bias > cur {
                bias = cur;
            }
            if (cur.wrapping_sub(bias).wrapping_add(base)) & (align - 1) != 0 {
                base = round(base, align) + (bias & (align - 1));
            }
        }
        first = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(name: &str, addr: u64) -> FuncSym {
        FuncSym::new(name.into(), addr, 16, Some(1), elf::STB_LOCAL)
    }

    #[test]
    fn a_symbol_splits_at_its_first_dot() {
        for (name, base, piece, clone) in [
            ("foo", "foo", false, false),
            ("foo.isra.0", "foo", false, true),
            ("foo.cold", "foo", true, false),
            ("foo.constprop.0.part.1", "foo", true, true),
            ("foo_part", "foo_part", false, false),
            (".cold", "", true, false),
            ("", "", false, false),
        ] {
            let s = sym(name, 0x100);
            assert_eq!(s.base(), base, "{name}");
            assert_eq!(format!("{}{}", s.base(), s.suffix()), name);
            assert_eq!(s.is_piece(), piece, "{name}");
            assert_eq!(s.is_optimized_clone(), clone, "{name}");
        }
    }

    #[test]
    fn names_sort_in_byte_order_past_their_prefix_keys() {
        // Keys of sixteen bytes: these share theirs, or one is the other's prefix.
        let t = FunctionTable::from_syms([
            sym("__x64_sys_openat2", 0x100),
            sym("__x64_sys_openat", 0x200),
            sym("__x64_sys_open", 0x300),
            sym("__x64_sys_open_by_handle_at", 0x400),
            sym("__x64_sys_open", 0x500),
            sym("a", 0x600),
        ]);
        let names: Vec<&str> = t.functions().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "__x64_sys_open",
                "__x64_sys_open_by_handle_at",
                "__x64_sys_openat",
                "__x64_sys_openat2",
                "a"
            ]
        );
        // Symbols of one name stay in .symtab order.
        let addrs: Vec<u64> = t.get(0).syms.iter().map(|s| s.addr).collect();
        assert_eq!(addrs, [0x300, 0x500]);

        let obj = |name: &str, section, value, size| ObjectSym {
            name: name.into(),
            section,
            value,
            size,
            bind: elf::STB_GLOBAL,
        };
        let sorted = sort_objects(vec![
            obj("per_cpu_variable_b", 2, 8, 1),
            obj("per_cpu_variable_a", 2, 8, 2),
            obj("per_cpu_variable_a", 2, 0, 3),
            obj("per_cpu_variable_a", 2, 8, 4),
            obj("z", 1, 0, 5),
        ]);
        let order: Vec<u64> = sorted.iter().map(|o| o.size).collect();
        assert_eq!(order, [5, 3, 2, 4, 1]);
    }

    #[test]
    fn runs_and_order_agree_with_a_plain_sort_at_the_key_boundary() {
        // Names around sixteen bytes (the prefix key's length), with suffixes and
        // repeats, and names with NULs (no ELF name has one, but the order must
        // still be bytewise): the table's runs and order are those of a stable
        // sort by base name, and every name is found by its bytes.
        let names = [
            "abcdefghijklmnop",
            "abcdefghijklmnopq",
            "abcdefghijklmno",
            "abcdefghijklmnop.isra.0",
            "abcdefghijklmnopq",
            "abcdefghijklmnopr",
            "abcdefghijklmnopq.constprop.0",
            "a",
            "a\0",
            "a\0\0",
            "a.isra.0",
            "abcdefghijklmno\0",
            "abcdefghijklmno\0x",
            "",
        ];
        let syms = names
            .iter()
            .enumerate()
            .map(|(i, n)| sym(n, 0x100 * i as u64 + 0x100));
        let t = FunctionTable::from_syms(syms);
        let mut want: Vec<(&str, u64)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (base_name(n), 0x100 * i as u64 + 0x100))
            .collect();
        want.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let got: Vec<(&str, u64)> = t
            .functions()
            .flat_map(|f| f.syms.iter().map(move |s| (f.name(), s.addr)))
            .collect();
        assert_eq!(got, want);
        let mut distinct: Vec<&str> = want.iter().map(|w| w.0).collect();
        distinct.dedup();
        assert_eq!(t.len(), distinct.len());
        for (i, n) in distinct.iter().enumerate() {
            assert_eq!(t.index_of(n.as_bytes()), Some(index32(i)), "{n:?}");
        }
    }

    #[test]
    fn pieces_are_dropped_and_suffixes_stripped() {
        let t = FunctionTable::from_syms([
            sym("foo", 0x100),
            sym("foo.cold", 0x900),
            sym("bar.part.0", 0x200),
            sym("bar.part.0.isra.0", 0x210),
            sym("baz.constprop.0.isra.0", 0x300),
            sym("qux.llvm.123", 0x400),
        ]);
        assert_eq!(t.pieces_skipped(), 3);
        let names: Vec<&str> = t.functions().map(|f| f.name()).collect();
        assert_eq!(names, ["baz", "foo", "qux"]);
        let (_, baz) = t.find("baz").unwrap();
        assert!(baz.syms[0].is_optimized_clone());
        assert!(baz.optimized_symbol_at(0x300));
        assert!(!baz.optimized_symbol_at(0x301));
        let (_, qux) = t.find("qux").unwrap();
        assert!(!qux.syms[0].is_optimized_clone());
        assert!(t.find("bar").is_none());
    }

    #[test]
    fn aliases_group_and_ambiguity_follows_pahole() {
        let t = FunctionTable::from_syms([
            sym("a", 0x10),
            sym("a.isra.0", 0x10),
            sym("b", 0x20),
            sym("b.constprop.0", 0x30),
        ]);
        assert!(!t.find("a").unwrap().1.ambiguous_addr);
        assert!(t.find("b").unwrap().1.ambiguous_addr);
        assert_eq!(t.at_addr(0x10).count(), 2);
        assert_eq!(
            t.at_addr(0x30).next().unwrap().1.name.as_ref(),
            "b.constprop.0"
        );
        // pahole's zero-address quirk: 0 first is "unset", 0 last is a mismatch.
        assert!(!ambiguous_address(&[sym("c", 0), sym("c", 8)]));
        assert!(ambiguous_address(&[sym("c", 8), sym("c", 0)]));
    }

    #[test]
    fn tables_are_shareable_between_workers() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<ElfSymbols>();
        shareable::<crate::kfuncs::Kfuncs>();
    }

    #[test]
    fn permuting_in_place_follows_every_cycle() {
        // Cycles of lengths 3, 2 and 1, and one of 4 with elements in between.
        let order = [2u32, 0, 1, 4, 3, 5, 9, 6, 7, 8];
        let mut v: Vec<char> = "abcdefghij".chars().collect();
        let want: Vec<char> = order.iter().map(|&i| v[i as usize]).collect();
        permute_in_place(&mut v, &mut order.clone());
        assert_eq!(v, want);
        let mut none: [u8; 0] = [];
        permute_in_place(&mut none, &mut []);
    }

    #[test]
    fn names_are_found_by_their_hash_index() {
        let t = FunctionTable::from_syms([
            sym("foo", 0x100),
            sym("bar.isra.0", 0x200),
            sym("bar", 0x300),
            sym("baz.constprop.1", 0x400),
        ]);
        for (i, f) in t.functions().enumerate() {
            assert_eq!(
                t.index_of(f.name().as_bytes()),
                Some(index32(i)),
                "{}",
                f.name()
            );
        }
        assert_eq!(t.index_of(b"baz"), t.find("baz").map(|(i, _)| index32(i)));
        assert_eq!(
            t.index_of(b"bar.isra.0"),
            None,
            "a symbol name, not a base name"
        );
        assert_eq!(t.index_of(b"qux"), None);
        assert_eq!(t.index_of(b""), None);
        // A hash shared with another name (made here by hand) is told apart by the
        // name: "qux" is still absent, and "baz" is found by its name.
        let mut t = t;
        let (foo, _) = t.find("foo").unwrap();
        t.by_hash.insert(hash_str(b"qux"), index32(foo));
        t.by_hash.insert(hash_str(b"baz"), index32(foo));
        assert_eq!(t.index_of(b"qux"), None);
        assert_eq!(t.index_of(b"baz"), t.find("baz").map(|(i, _)| index32(i)));
    }

    #[test]
    fn names_sort_in_byte_order() {
        let t = FunctionTable::from_syms([sym("b", 1), sym("B", 2), sym("_a", 3), sym("a", 4)]);
        let names: Vec<&str> = t.functions().map(|f| f.name()).collect();
        assert_eq!(names, ["B", "_a", "a", "b"]);
    }

    /// The addresses libdwfl gives sections of (size, alignment, allocated?), after
    /// the null section.
    fn rel_layout(secs: &[(u64, u64, bool)]) -> Vec<u64> {
        let null = (0, 0, false);
        let mut infos: Vec<SectionInfo> = std::iter::once(&null)
            .chain(secs)
            .zip(0..)
            .map(|(&(size, align, alloc), index)| SectionInfo {
                index,
                name: format!(".s{index}").into(),
                sh_type: elf::SHT_PROGBITS,
                flags: if alloc { u64::from(elf::SHF_ALLOC) } else { 0 },
                file_addr: 0,
                addr: 0,
                size,
                align,
                file_offset: 0,
            })
            .collect();
        dwfl_rel_layout(&mut infos);
        infos[1..].iter().map(|s| s.addr).collect()
    }

    #[test]
    fn rel_layout_packs_allocated_sections() {
        // .text, .debug_info (not allocated), .data, .rodata.
        let secs = [
            (0x30, 16, true),
            (0x100, 1, false),
            (0x8, 8, true),
            (0x5, 32, true),
        ];
        assert_eq!(rel_layout(&secs), [0x10000, 0, 0x10030, 0x10040]);
    }

    #[test]
    fn rel_layout_restarts_for_a_larger_alignment() {
        // The first lands at 0x10000; the second's 0x20000 alignment then moves the
        // base to 0x20000 and lays everything out again from there.
        let secs = [(0x10, 0x100, true), (0x10, 0x20000, true)];
        assert_eq!(rel_layout(&secs), [0x20000, 0x20000 + 0x20000]);
    }
}
