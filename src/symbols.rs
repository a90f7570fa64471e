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

/// The names of a table's symbols, one after another in one buffer, each found by
/// its [`NameSpan`]: one allocation for a vmlinux's 190,000 function and object
/// names instead of one each. The tables live for the whole run: with a box per
/// name (rounded up to the allocator's size classes) the corpus vmlinux peaked 3.2
/// MB higher at -j1 and at -j2.
#[derive(Clone, Debug, Default)]
struct Names(String);

/// Where one name lies in its table's [`Names`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NameSpan {
    start: u32,
    len: u32,
}

impl Names {
    /// Appends `name`; a name that is not UTF-8 is kept as `from_utf8_lossy` makes
    /// it. Fails if the names outgrow 32-bit offsets (a string table of 4 GiB).
    fn push(&mut self, name: &[u8]) -> Result<NameSpan, ElfError> {
        let too_large = || ElfError::TooLarge {
            what: "the size of the symbol names",
        };
        let start = u32::try_from(self.0.len()).map_err(|_| too_large())?;
        match std::str::from_utf8(name) {
            Ok(n) => self.0.push_str(n),
            Err(_) => self.0.push_str(&String::from_utf8_lossy(name)),
        }
        let end = u32::try_from(self.0.len()).map_err(|_| too_large())?;
        Ok(NameSpan {
            start,
            len: end - start,
        })
    }

    fn get(&self, span: NameSpan) -> &str {
        &self.0[span.start as usize..][..span.len as usize]
    }
}

/// One `STT_FUNC` symbol as the function table stores it (its name in the table's
/// [`Names`]); [`FuncSym`] is the view of it the table gives out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FuncEntry {
    addr: u64,
    size: u64,
    name: NameSpan,
    /// The length of the base name (up to the first `.`): found once, as the name
    /// is asked for its base for every unit's functions.
    base_len: u32,
    section: Option<u32>,
    bind: u8,
}

impl FuncEntry {
    /// The base name, from the table's `names`.
    fn base<'n>(&self, names: &'n Names) -> &'n str {
        &names.get(self.name)[..self.base_len as usize]
    }
}

/// One `STT_FUNC` symbol of the function table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuncSym<'t> {
    /// The full symbol name, suffixes included (`foo.isra.0`).
    pub name: &'t str,
    /// `st_value`: a virtual address in ET_EXEC, a section offset in ET_REL.
    pub addr: u64,
    /// `st_size`.
    pub size: u64,
    /// The section the symbol is defined in (extended indices resolved), if any.
    pub section: Option<u32>,
    /// `STB_LOCAL`, `STB_GLOBAL` or `STB_WEAK`.
    pub bind: u8,
    base_len: u32,
}

impl<'t> FuncSym<'t> {
    /// A symbol named `name`.
    pub fn new(name: &'t str, addr: u64, size: u64, section: Option<u32>, bind: u8) -> Self {
        // Names come from a string table of less than 4 GiB.
        #[allow(clippy::cast_possible_truncation)]
        let base_len = base_name(name).len() as u32;
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
    pub fn base(&self) -> &'t str {
        &self.name[..self.base_len as usize]
    }

    /// The part of the name from the first `.` on (`.isra.0`), empty if none.
    pub fn suffix(&self) -> &'t str {
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
#[derive(Clone, Copy)]
pub struct ElfFunction<'t> {
    entries: &'t [FuncEntry],
    names: &'t Names,
    /// The symbols do not all share one address (pahole's quirky rule, see
    /// [`ambiguous_address`]); pahole then emits no FUNC for this name.
    pub ambiguous_addr: bool,
}

impl<'t> ElfFunction<'t> {
    /// The base name: the symbol name up to its first `.`.
    pub fn name(&self) -> &'t str {
        self.sym(0).base()
    }

    /// The symbols, in `.symtab` order; never none.
    pub fn syms(&self) -> impl ExactSizeIterator<Item = FuncSym<'t>> + Clone + 't {
        let names = self.names;
        self.entries.iter().map(move |e| view(names, e))
    }

    /// Symbol `i` of [`ElfFunction::syms`].
    pub fn sym(&self, i: usize) -> FuncSym<'t> {
        view(self.names, &self.entries[i])
    }

    /// Whether one of the symbols at exactly `addr` is an optimized clone
    /// (`.isra` / `.constprop`): pahole's `optimized_symbol` for a DWARF function
    /// whose low_pc is `addr`.
    pub fn optimized_symbol_at(&self, addr: u64) -> bool {
        addr != 0
            && self
                .syms()
                .any(|s| s.addr == addr && s.is_optimized_clone())
    }

    /// Whether any symbol of this function is at `addr`.
    pub fn has_sym_at(&self, addr: u64) -> bool {
        self.entries.iter().any(|s| s.addr == addr)
    }
}

impl PartialEq for ElfFunction<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.ambiguous_addr == other.ambiguous_addr && self.syms().eq(other.syms())
    }
}

impl Eq for ElfFunction<'_> {}

impl std::fmt::Debug for ElfFunction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfFunction")
            .field("syms", &self.syms().collect::<Vec<_>>())
            .field("ambiguous_addr", &self.ambiguous_addr)
            .finish()
    }
}

/// The view of `e`, whose name is in `names`.
fn view<'t>(names: &'t Names, e: &FuncEntry) -> FuncSym<'t> {
    FuncSym {
        name: names.get(e.name),
        addr: e.addr,
        size: e.size,
        section: e.section,
        bind: e.bind,
        base_len: e.base_len,
    }
}

/// pahole's `elf_function__has_ambiguous_address`, kept bug-for-bug: an address of
/// 0 counts as "not seen yet", so `[0, X]` is not ambiguous while `[X, 0]` is.
pub fn ambiguous_address(addrs: impl IntoIterator<Item = u64>) -> bool {
    let mut addrs = addrs.into_iter();
    let Some(mut seen) = addrs.next() else {
        return false;
    };
    for addr in addrs {
        if seen != 0 && seen != addr {
            return true;
        }
        seen = addr;
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
    syms: Vec<FuncEntry>,
    /// The symbols' names.
    names: Names,
    /// Per base name, in name order: where its symbols start in `syms`, and
    /// whether their addresses are ambiguous.
    funcs: Vec<(u32, bool)>,
    /// The hash of each base name → its function's index ([`FunctionTable::index_of`]:
    /// a look-up per subprogram of every unit instead of a binary search over
    /// string compares). Built with the table, so on the thread that reads it, not
    /// where the two halves of the symbol tables are joined.
    by_hash: HashMap<u64, u32, BuildHasherDefault<Prehashed>>,
    /// How many `STT_FUNC` symbols were dropped as `.cold` / `.part` pieces.
    pieces_skipped: usize,
}

/// A symbol's place in the sort of [`FunctionTable`], as plain words that compare
/// as the names do for all but a few: the first [`KEY_BYTES`] of its base name,
/// big-endian and padded with zeros, then the base name's length (up to
/// `KEY_BYTES + 1`: "longer") and its position in `.symtab` order. A name that
/// fits the key is the key and its length: of two with equal keys, if either is
/// that short, it is the start of the other. Only longer names with equal keys
/// need reading, after the sort ([`FunctionTableBuilder::finish`]). On the corpus
/// vmlinux a sort that read them in its comparisons (on 16-byte keys) took 10 ms;
/// on these, 5 ms and 2.4 ms for the runs of longer names.
type SortKey = (u64, u64, u64, u64);

/// The bytes of a base name a [`SortKey`] holds.
const KEY_BYTES: usize = 24;

/// The [`SortKey`] of the base name `base` at position `pos`.
fn sort_key(base: &str, pos: u32) -> SortKey {
    let mut b = [0u8; KEY_BYTES];
    let n = base.len().min(KEY_BYTES);
    b[..n].copy_from_slice(&base.as_bytes()[..n]);
    let word = |i: usize| u64::from_be_bytes(b[i * 8..][..8].try_into().expect("8 bytes"));
    let len = base.len().min(KEY_BYTES + 1) as u64;
    (word(0), word(1), word(2), len << 32 | u64::from(pos))
}

/// The position a [`SortKey`] holds.
fn key_pos(k: &SortKey) -> u32 {
    // The low half holds a 32-bit position.
    #[allow(clippy::cast_possible_truncation)]
    let pos = k.3 as u32;
    pos
}

/// Whether a [`SortKey`]'s name is longer than the key.
fn key_is_long(k: &SortKey) -> bool {
    k.3 >> 32 > KEY_BYTES as u64
}

/// The function table as its symbols are read in `.symtab` order; sorted into a
/// [`FunctionTable`] by [`FunctionTableBuilder::finish`].
#[derive(Default)]
struct FunctionTableBuilder {
    syms: Vec<FuncEntry>,
    names: Names,
    keys: Vec<SortKey>,
    /// [`hash_str`] of each base name: taken as the names are read, in the order
    /// they are stored in; taken in sorted order, every name was a cache miss of
    /// its own.
    hashes: Vec<u64>,
    pieces_skipped: usize,
}

impl FunctionTableBuilder {
    /// Room for `n` symbols.
    fn reserve(&mut self, n: usize) {
        self.syms.reserve(n);
        self.keys.reserve(n);
        self.hashes.reserve(n);
    }

    /// Adds a symbol, unless it is a `.cold` / `.part` piece.
    fn push(&mut self, raw: RawSym<'_>) -> Result<(), ElfError> {
        let span = self.names.push(raw.name)?;
        let sym = FuncSym::new(
            self.names.get(span),
            raw.value,
            raw.size,
            raw.section,
            raw.bind,
        );
        if sym.is_piece() {
            self.pieces_skipped += 1;
            self.names.0.truncate(span.start as usize);
            return Ok(());
        }
        let base = sym.base();
        self.hashes.push(hash_str(base.as_bytes()));
        self.keys.push(sort_key(base, index32(self.syms.len())));
        self.syms.push(FuncEntry {
            addr: sym.addr,
            size: sym.size,
            name: span,
            base_len: sym.base_len,
            section: sym.section,
            bind: sym.bind,
        });
        Ok(())
    }

    /// The table: the symbols sorted by (base name, position), the same order as a
    /// stable sort by name, which is what glibc's merge-sort qsort gives pahole.
    fn finish(self) -> FunctionTable {
        let FunctionTableBuilder {
            mut syms,
            names,
            mut keys,
            hashes,
            pieces_skipped,
        } = self;
        let base = |k: &SortKey| syms[key_pos(k) as usize].base(&names);
        keys.sort_unstable();
        // Longer names with equal keys, in runs: in order of their names, then
        // positions.
        let mut i = 0;
        while i < keys.len() {
            let mut j = i + 1;
            if key_is_long(&keys[i]) {
                let words = |k: &SortKey| (k.0, k.1, k.2, k.3 >> 32);
                while j < keys.len() && words(&keys[j]) == words(&keys[i]) {
                    j += 1;
                }
                if j - i > 1 {
                    keys[i..j].sort_unstable_by(|x, y| base(x).cmp(base(y)).then(x.3.cmp(&y.3)));
                }
            }
            i = j;
        }
        let same = |x: &SortKey, y: &SortKey| {
            (x.0, x.1, x.2, x.3 >> 32) == (y.0, y.1, y.2, y.3 >> 32)
                && (!key_is_long(x)
                    || (hashes[key_pos(x) as usize] == hashes[key_pos(y) as usize]
                        && base(x) == base(y)))
        };
        // Where each name's run starts, in sorted positions.
        let mut funcs = Vec::new();
        for k in 0..keys.len() {
            if k == 0 || !same(&keys[k - 1], &keys[k]) {
                funcs.push((index32(k), false));
            }
        }
        // Of names with one hash, the first is kept (`index_of` looks the others
        // up by name).
        let mut by_hash = HashMap::with_capacity_and_hasher(funcs.len(), Default::default());
        for (fi, &(k, _)) in funcs.iter().enumerate() {
            by_hash
                .entry(hashes[key_pos(&keys[k as usize]) as usize])
                .or_insert(index32(fi));
        }
        drop(hashes);
        let mut perm: Vec<u32> = keys.iter().map(key_pos).collect();
        drop(keys);
        crate::order::permute_in_place(&mut syms, &mut perm);
        drop(perm);
        for fi in 0..funcs.len() {
            let (start, end) = run_bounds(&funcs, syms.len(), fi);
            funcs[fi].1 = ambiguous_address(syms[start..end].iter().map(|s| s.addr));
        }
        FunctionTable {
            syms,
            names,
            funcs,
            by_hash,
            pieces_skipped,
        }
    }
}

impl FunctionTable {
    /// Reads the `STT_FUNC` symbols of `elf` into a table.
    pub fn from_elf(elf: &ElfFile<'_>) -> Result<FunctionTable, ElfError> {
        with_elf!(elf, f => function_table(f))
    }

    /// Builds the table from the `STT_FUNC` symbols, given in `.symtab` order.
    pub fn from_syms<'a>(syms: impl IntoIterator<Item = FuncSym<'a>>) -> FunctionTable {
        let mut b = FunctionTableBuilder::default();
        for s in syms {
            b.push(RawSym {
                name: s.name.as_bytes(),
                section: s.section,
                value: s.addr,
                size: s.size,
                bind: s.bind,
            })
            .expect("names of less than 4 GiB");
        }
        b.finish()
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
            .binary_search_by(|&(start, _)| self.syms[start as usize].base(&self.names).cmp(name))
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
            entries: &self.syms[start..end],
            names: &self.names,
            ambiguous_addr: self.funcs[i].1,
        }
    }

    /// Every kept symbol at exactly `addr`, as (function, symbol) pairs in name
    /// order. A scan of the whole table: the encoders never ask by address, so no
    /// index is kept for it (one cost 3 ms and 1.6 MB for the whole run on a
    /// vmlinux).
    pub fn at_addr(&self, addr: u64) -> impl Iterator<Item = (ElfFunction<'_>, FuncSym<'_>)> {
        self.functions().flat_map(move |f| {
            f.syms()
                .filter(move |s| s.addr == addr)
                .map(move |s| (f, s))
        })
    }

    /// How many `STT_FUNC` symbols were left out as `.cold` / `.part` pieces.
    pub fn pieces_skipped(&self) -> usize {
        self.pieces_skipped
    }

    /// How many symbols the table holds in all.
    pub fn sym_count(&self) -> usize {
        self.syms.len()
    }
}

/// Where the symbols of function `i` lie in a table's `len` symbols.
fn run_bounds(funcs: &[(u32, bool)], len: usize, i: usize) -> (usize, usize) {
    let end = funcs.get(i + 1).map_or(len, |f| f.0 as usize);
    (funcs[i].0 as usize, end)
}

/// A position in the function table, stored in 32 bits to keep the table small.
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectSym<'t> {
    /// The symbol name.
    pub name: &'t str,
    /// The section it is defined in.
    pub section: u32,
    /// `st_value`.
    pub value: u64,
    /// `st_size`.
    pub size: u64,
    /// `STB_LOCAL`, `STB_GLOBAL` or `STB_WEAK`.
    pub bind: u8,
}

/// One `STT_OBJECT` symbol as [`Objects`] stores it.
#[derive(Clone, Copy, Debug)]
struct ObjectEntry {
    name: NameSpan,
    section: u32,
    value: u64,
    size: u64,
    bind: u8,
}

/// The `STT_OBJECT` symbols defined in a section, with their names in one buffer.
#[derive(Clone, Debug, Default)]
struct Objects {
    /// Sorted by (section, name, value) once read ([`sort_objects`]).
    entries: Vec<ObjectEntry>,
    names: Names,
}

impl Objects {
    fn view(&self, e: &ObjectEntry) -> ObjectSym<'_> {
        ObjectSym {
            name: self.names.get(e.name),
            section: e.section,
            value: e.value,
            size: e.size,
            bind: e.bind,
        }
    }
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
    objects: Objects,
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
    objects: Objects,
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
        let objects = &self.objects;
        let key = |o: &ObjectEntry| (o.section, objects.names.get(o.name));
        let start = objects
            .entries
            .partition_point(|o| key(o) < (section, name));
        objects
            .entries
            .get(start)
            .is_some_and(|o| key(o) == (section, name))
    }

    /// The `STT_OBJECT` symbols of section `section`, sorted by name then value.
    pub fn objects_in(
        &self,
        section: u32,
    ) -> impl ExactSizeIterator<Item = ObjectSym<'_>> + Clone + '_ {
        let entries = &self.objects.entries;
        let start = entries.partition_point(|o| o.section < section);
        let end = entries.partition_point(|o| o.section <= section);
        entries[start..end].iter().map(|e| self.objects.view(e))
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
    let mut objects = Objects::default();
    objects.entries.reserve(symbol_count(f, elf::STT_OBJECT));
    objects.names.0.reserve(names_room(f));
    scan_symbols(f, elf::STT_OBJECT, |s| {
        // Only objects defined in a section are kept.
        if let Some(section) = s.section {
            objects.entries.push(ObjectEntry {
                name: objects.names.push(s.name)?,
                section,
                value: s.value,
                size: s.size,
                bind: s.bind,
            });
        }
        Ok(())
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

/// The function table of one ELF class.
fn function_table<Elf: FileHeader<Endian = Endianness>>(
    f: &object::read::elf::ElfFile<'_, Elf>,
) -> Result<FunctionTable, ElfError> {
    let mut table = FunctionTableBuilder::default();
    table.reserve(symbol_count(f, elf::STT_FUNC));
    table.names.0.reserve(names_room(f));
    // pahole skips only symbols whose name it cannot read; an empty name is kept
    // (it never matches a DWARF name).
    scan_symbols(f, elf::STT_FUNC, |s| table.push(s))?;
    Ok(table.finish())
}

/// A symbol as [`scan_symbols`] reads it.
struct RawSym<'data> {
    name: &'data [u8],
    section: Option<u32>,
    value: u64,
    size: u64,
    bind: u8,
}

/// The number of symbols of type `st_type`, to size what holds them: a vmlinux
/// has 100,000 functions, and a vector grown by doubling copies itself into fresh
/// pages each time, which with the table's other vectors cost a sixth of the time
/// it took to read (54 ms then, 44 ms with the vectors sized).
fn symbol_count<Elf: FileHeader<Endian = Endianness>>(
    f: &object::read::elf::ElfFile<'_, Elf>,
    st_type: u8,
) -> usize {
    f.elf_symbol_table()
        .symbols()
        .iter()
        .filter(|s| s.st_type() == st_type)
        .count()
}

/// Room for the names of a kind of symbols: at most the symbol string table's
/// size, reserved at once so that the names' buffer is not copied into fresh pages
/// at each doubling (the function table read 3.5 ms sooner on the corpus vmlinux,
/// 38.5 against 42 ms). What the names do not use of it is never touched; a corrupt
/// header's size is bounded by the file's.
fn names_room<Elf: FileHeader<Endian = Endianness>>(
    f: &object::read::elf::ElfFile<'_, Elf>,
) -> usize {
    let strtab = f.elf_symbol_table().string_section();
    let size = f.elf_section_table().section(strtab).map_or(0, |sh| {
        let size: u64 = sh.sh_size(f.endian()).into();
        usize::try_from(size).unwrap_or(usize::MAX)
    });
    size.min(f.data().len())
}

/// Gives `each` every symbol of type `st_type`, in `.symtab` order.
fn scan_symbols<'data, Elf: FileHeader<Endian = Endianness>>(
    f: &object::read::elf::ElfFile<'data, Elf>,
    st_type: u8,
    mut each: impl FnMut(RawSym<'data>) -> Result<(), ElfError>,
) -> Result<(), ElfError> {
    let bad = |what, err| ElfError::Parse { what, err };
    let endian = f.endian();
    let symtab = f.elf_symbol_table();
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
        each(RawSym {
            name,
            section,
            value: sym.st_value(endian).into(),
            size: sym.st_size(endian).into(),
            bind: sym.st_bind(),
        })?;
    }
    Ok(())
}

/// `objects` sorted by (section, name, value), those equal in all three kept in
/// `.symtab` order, as a stable sort would; the comparisons go by the names'
/// [`sort_key`] words first, kept beside the positions, instead of reading each
/// name.
fn sort_objects(objects: Objects) -> Objects {
    let Objects { entries, names } = objects;
    let mut keyed: Vec<(u32, SortKey)> = entries
        .iter()
        .enumerate()
        .map(|(i, o)| (o.section, sort_key(names.get(o.name), index32(i))))
        .collect();
    keyed.sort_unstable_by(|&(sa, ka), &(sb, kb)| {
        let (oa, ob) = (
            &entries[key_pos(&ka) as usize],
            &entries[key_pos(&kb) as usize],
        );
        (sa, ka.0, ka.1, ka.2)
            .cmp(&(sb, kb.0, kb.1, kb.2))
            .then_with(|| (names.get(oa.name), oa.value).cmp(&(names.get(ob.name), ob.value)))
            .then(key_pos(&ka).cmp(&key_pos(&kb)))
    });
    Objects {
        entries: keyed
            .iter()
            .map(|(_, k)| entries[key_pos(k) as usize])
            .collect(),
        names,
    }
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

    fn sym(name: &str, addr: u64) -> FuncSym<'_> {
        FuncSym::new(name, addr, 16, Some(1), elf::STB_LOCAL)
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
        // Keys of 24 bytes: these share theirs, or one is the other's prefix.
        let t = FunctionTable::from_syms([
            sym("trace_event_raw_event_sys_exit", 0x100),
            sym("trace_event_raw_event_sys_enter", 0x200),
            sym("trace_event_raw_event_sys", 0x300),
            sym("trace_event_raw_event_sys_enter_x", 0x400),
            sym("trace_event_raw_event_sys", 0x500),
            sym("z", 0x600),
        ]);
        let names: Vec<&str> = t.functions().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "trace_event_raw_event_sys",
                "trace_event_raw_event_sys_enter",
                "trace_event_raw_event_sys_enter_x",
                "trace_event_raw_event_sys_exit",
                "z"
            ]
        );
        // Symbols of one name stay in .symtab order.
        let addrs: Vec<u64> = t.get(0).syms().map(|s| s.addr).collect();
        assert_eq!(addrs, [0x300, 0x500]);

        let mut objects = Objects::default();
        for (name, section, value, size) in [
            ("per_cpu_variable_b", 2, 8, 1),
            ("per_cpu_variable_a", 2, 8, 2),
            ("per_cpu_variable_a", 2, 0, 3),
            ("per_cpu_variable_a", 2, 8, 4),
            ("z", 1, 0, 5),
        ] {
            let name = objects.names.push(name.as_bytes()).unwrap();
            objects.entries.push(ObjectEntry {
                name,
                section,
                value,
                size,
                bind: elf::STB_GLOBAL,
            });
        }
        let sorted = sort_objects(objects);
        let order: Vec<(&str, u64)> = sorted
            .entries
            .iter()
            .map(|o| (sorted.view(o).name, o.size))
            .collect();
        assert_eq!(
            order,
            [
                ("z", 5),
                ("per_cpu_variable_a", 3),
                ("per_cpu_variable_a", 2),
                ("per_cpu_variable_a", 4),
                ("per_cpu_variable_b", 1)
            ]
        );
    }

    #[test]
    fn runs_and_order_agree_with_a_plain_sort_at_the_key_boundary() {
        // Names around 16 and 24 bytes (the objects' and the functions' key
        // lengths), with suffixes and repeats, and names with NULs (no ELF name
        // has one, but the order must still be bytewise): the table's runs and
        // order are those of a stable sort by base name, and every name is found
        // by its bytes.
        let names = [
            "abcdefghijklmnopqrstuvwx",
            "abcdefghijklmnopqrstuvwxy",
            "abcdefghijklmnopqrstuvw",
            "abcdefghijklmnopqrstuvwx.isra.0",
            "abcdefghijklmnopqrstuvwxy",
            "abcdefghijklmnopqrstuvwxz",
            "abcdefghijklmnopqrstuvwxy.constprop.0",
            "abcdefghijklmnopqrstuvw\0",
            "abcdefghijklmnopqrstuvw\0x",
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
            .flat_map(|f| f.syms().map(move |s| (f.name(), s.addr)))
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
        assert!(baz.sym(0).is_optimized_clone());
        assert!(baz.optimized_symbol_at(0x300));
        assert!(!baz.optimized_symbol_at(0x301));
        let (_, qux) = t.find("qux").unwrap();
        assert!(!qux.sym(0).is_optimized_clone());
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
        assert_eq!(t.at_addr(0x30).next().unwrap().1.name, "b.constprop.0");
        // pahole's zero-address quirk: 0 first is "unset", 0 last is a mismatch.
        assert!(!ambiguous_address([0, 8]));
        assert!(ambiguous_address([8, 0]));
        assert!(!ambiguous_address([8]));
        assert!(!ambiguous_address([]));
    }

    #[test]
    fn names_that_are_not_utf8_are_kept_lossily() {
        let mut names = Names::default();
        let a = names.push(b"ok").unwrap();
        let b = names.push(b"bad\xff.isra.0").unwrap();
        assert_eq!(names.get(a), "ok");
        assert_eq!(names.get(b), "bad\u{fffd}.isra.0");
        // The spans follow one another, the replacement's three bytes counted.
        assert_eq!((b.start, b.len), (2, 13));
    }

    #[test]
    fn tables_are_shareable_between_workers() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<ElfSymbols>();
        shareable::<crate::kfuncs::Kfuncs>();
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
