//! kfunc sets read from `.BTF_ids`, as pahole v1.31 reads them for the
//! `decl_tag_kfuncs` feature.
//!
//! The kernel's `BTF_KFUNCS_START(set)` … `BTF_ID_FLAGS(func, f, flags)` …
//! `BTF_KFUNCS_END(set)` (include/linux/btf_ids.h) lay out, in `.BTF_ids`:
//!
//! ```text
//! __BTF_ID__set8__<set>:        u32 cnt, u32 set flags   (BTF_SET8_KFUNCS = 1 << 0)
//! __BTF_ID__func__<f>__<n>:     u32 id,  u32 flags       (one pair per function)
//! ```
//!
//! The set symbol's `st_size` covers the header and all pairs. A function belongs
//! to a kfunc set when its `__BTF_ID__func__` symbol lies inside the range of a
//! `__BTF_ID__set8__` symbol whose set flags have `BTF_SET8_KFUNCS`; its kfunc
//! flags are the u32 after its id. The ids themselves (filled in by resolve_btfids
//! in vmlinux, zero in modules) are not used.

use std::collections::BTreeMap;
use std::path::Path;

use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::Endianness;

use crate::elf::{with_elf, ElfError, ElfFile};
use crate::Result;

/// The section holding BTF id lists and sets.
pub const BTF_IDS_SECTION: &str = ".BTF_ids";
/// Prefix of the symbol at the start of a BTF_SET8.
pub const SET8_PREFIX: &str = "__BTF_ID__set8__";
/// Prefix of the symbol at each function's id slot.
pub const FUNC_PREFIX: &str = "__BTF_ID__func__";
/// The set8 flag marking a set of kfuncs.
pub const BTF_SET8_KFUNCS: u32 = 1 << 0;
/// kfunc flag: the function follows the `bpf_fastcall` convention; pahole adds a
/// `bpf_fastcall` DECL_TAG next to `bpf_kfunc` (include/linux/btf.h).
pub const KF_FASTCALL: u32 = 1 << 12;
/// kfunc flag: the return value points into a BPF arena (used by pahole's
/// `attributes` feature).
pub const KF_ARENA_RET: u32 = 1 << 13;
/// kfunc flag: the first argument points into a BPF arena.
pub const KF_ARENA_ARG1: u32 = 1 << 14;
/// kfunc flag: the second argument points into a BPF arena.
pub const KF_ARENA_ARG2: u32 = 1 << 15;

/// The kfuncs of one file: function name → kfunc flags.
///
/// When a name is in several sets, the flags of its last `__BTF_ID__func__` symbol
/// in `.symtab` order win, as in pahole (which overwrites `kfunc_flags`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Kfuncs {
    flags: BTreeMap<String, u32>,
}

impl Kfuncs {
    /// Reads the kfunc sets of the ELF file `data`, read from `path`. A file with no
    /// `.symtab` or no `.BTF_ids` has no kfuncs.
    /// An opened input has them from its one parse instead
    /// ([`crate::elf::ElfInput::symbol_tables`]).
    pub fn parse(path: &Path, data: &[u8]) -> Result<Kfuncs> {
        crate::elf::read_file(path, data, Kfuncs::from_elf)
    }

    /// The kfunc sets of the parsed ELF file `elf`.
    pub fn from_elf(elf: &ElfFile<'_>) -> Result<Kfuncs, ElfError> {
        with_elf!(elf, f => from_tables(f))
    }

    /// The flags of kfunc `name`, if it is one.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.flags.get(name).copied()
    }

    /// Whether `name` is a kfunc.
    pub fn contains(&self, name: &str) -> bool {
        self.flags.contains_key(name)
    }

    /// The number of kfuncs.
    pub fn len(&self) -> usize {
        self.flags.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.flags.is_empty()
    }

    /// All kfuncs with their flags, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.flags.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

/// pahole's `get_func_name`: `__BTF_ID__func__vfs_close__1` → `vfs_close`. The
/// name is what lies between the prefix and the last `__`-introduced suffix.
pub fn btf_id_func_name(sym: &str) -> Option<&str> {
    let rest = sym.strip_prefix(FUNC_PREFIX)?;
    if !rest.contains("__") {
        return None;
    }
    let last = rest.rfind('_')?;
    if last == 0 || rest.as_bytes()[last - 1] != b'_' {
        return None;
    }
    Some(&rest[..last - 1])
}

/// Reads the kfunc sets of one ELF class.
fn from_tables<Elf: FileHeader<Endian = Endianness>>(
    f: &object::read::elf::ElfFile<'_, Elf>,
) -> Result<Kfuncs, ElfError> {
    let bad = |what, err| ElfError::Parse { what, err };
    let (endian, data) = (f.endian(), f.data());
    let sections = f.elf_section_table();
    let Some((ids_index, ids_sh)) = sections
        .enumerate()
        .find(|(_, sh)| sections.section_name(endian, sh) == Ok(BTF_IDS_SECTION.as_bytes()))
    else {
        return Ok(Kfuncs::default());
    };
    let symtab = f.elf_symbol_table();
    if symtab.is_empty() {
        return Ok(Kfuncs::default());
    }
    let ids: &[u8] = if ids_sh.sh_type(endian) == elf::SHT_NOBITS {
        &[]
    } else {
        ids_sh
            .data(endian, data)
            .map_err(|e| bad("bad .BTF_ids section", e))?
    };
    let ids_addr: u64 = ids_sh.sh_addr(endian).into();
    let word = |off: u64| -> Option<u32> {
        let off = usize::try_from(off).ok()?;
        let b = ids.get(off..off.checked_add(4)?)?;
        let b = [b[0], b[1], b[2], b[3]];
        Some(if endian == Endianness::Little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    // The symbols of `.BTF_ids`, with their names (pahole compares the raw st_shndx
    // with the section's index).
    let ids_symbols = || {
        symtab
            .iter()
            .filter(|sym| usize::from(sym.st_shndx(endian)) == ids_index.0)
            .map(|sym| -> Result<_, ElfError> {
                let name = symtab
                    .symbol_name(endian, sym)
                    .map_err(|e| bad("bad symbol name", e))?;
                Ok((sym, name))
            })
    };

    // First pass: the address ranges of the kfunc sets.
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for item in ids_symbols() {
        let (sym, name) = item?;
        if !name.starts_with(SET8_PREFIX.as_bytes()) {
            continue;
        }
        let value: u64 = sym.st_value(endian).into();
        let Some(off) = value.checked_sub(ids_addr) else {
            continue;
        };
        // The set header is {cnt, flags}; pahole reads the flags word.
        let Some(set_flags) = word(off + 4) else {
            continue;
        };
        if set_flags & BTF_SET8_KFUNCS != 0 {
            let size: u64 = sym.st_size(endian).into();
            ranges.push((value, value + size));
        }
    }

    // Second pass: the functions whose id slot lies in one of those ranges.
    let mut flags = BTreeMap::new();
    for item in ids_symbols() {
        let (sym, name) = item?;
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        let Some(func) = btf_id_func_name(name) else {
            continue;
        };
        let addr: u64 = sym.st_value(endian).into();
        if !ranges.iter().any(|&(s, e)| s <= addr && addr < e) {
            continue;
        }
        let pair_flags = addr.checked_sub(ids_addr).and_then(|off| word(off + 4));
        let Some(pair_flags) = pair_flags else {
            return Err(ElfError::KfuncOutOfBounds {
                func: func.to_string(),
            });
        };
        flags.insert(func.to_string(), pair_flags);
    }
    Ok(Kfuncs { flags })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn func_names_from_btf_id_symbols() {
        assert_eq!(
            btf_id_func_name("__BTF_ID__func__vfs_close__1"),
            Some("vfs_close")
        );
        assert_eq!(
            btf_id_func_name("__BTF_ID__func__bpf__odd__name__815657"),
            Some("bpf__odd__name")
        );
        assert_eq!(btf_id_func_name("__BTF_ID__func___"), None);
        assert_eq!(btf_id_func_name("__BTF_ID__func__noseparator"), None);
        assert_eq!(btf_id_func_name("__BTF_ID__struct__task_struct__3"), None);
        // The last '_' must follow another '_'.
        assert_eq!(btf_id_func_name("__BTF_ID__func__a__b_c"), None);
    }
}
