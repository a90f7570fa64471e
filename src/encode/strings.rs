//! The string index of the BTF being built: each distinct name is stored once.

use crate::btf::{Btf, StrOffset};
use crate::dwarf::types::Name;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Maps each name already in the BTF's string section to its offset.
///
/// Names usually come straight from the input's `.debug_str`, where the linker has
/// merged equal strings, so the same name is almost always the same address: a
/// first lookup by address (no hashing or comparing of bytes) answers most calls.
/// Addresses are only compared, never dereferenced, and the input stays mapped for
/// the whole run, so an address cannot be reused for another string.
pub struct StrIndex {
    map: HashMap<Box<[u8]>, StrOffset, BuildHasherDefault<FxHasher>>,
    /// A direct-mapped cache by address, small enough to stay in the CPU cache:
    /// (address, backing length, offset).
    recent: Box<[(usize, usize, u32)]>,
}

/// log2 of the number of entries of the address cache.
const RECENT_BITS: u32 = 16;

impl Default for StrIndex {
    fn default() -> Self {
        StrIndex {
            map: HashMap::default(),
            recent: vec![(0, 0, 0); 1 << RECENT_BITS].into_boxed_slice(),
        }
    }
}

impl StrIndex {
    /// An index that already knows the strings of `btf`'s base (split BTF): like
    /// libbpf's `btf__add_str`, which pahole uses, a name the base has is referred
    /// to there and never copied into the split BTF's own strings.
    pub fn with_base_of(btf: &Btf) -> StrIndex {
        let mut idx = StrIndex::default();
        if let Some(base) = btf.base() {
            let data = base_chain_strings(base);
            let mut off = 0usize;
            for s in data.split(|&b| b == 0) {
                if !s.is_empty() {
                    idx.map.entry(s.into()).or_insert(StrOffset(off as u32));
                }
                off += s.len() + 1;
            }
        }
        idx
    }

    /// Touches the cache slots of `names` before they are interned one by one: the
    /// loads are independent, so the CPU overlaps their cache misses instead of
    /// waiting for each in turn.
    #[inline]
    pub fn warm<'n>(&self, names: impl Iterator<Item = Name<'n>>) {
        let mut acc = 0usize;
        for name in names {
            let slot = (name.key().0 as u64).wrapping_mul(SEED) >> (64 - RECENT_BITS);
            acc ^= self.recent[slot as usize].0;
        }
        std::hint::black_box(acc);
    }

    /// The offset of `s`, appending it to `btf`'s strings the first time.
    pub fn intern(&mut self, btf: &mut Btf, name: Name<'_>) -> StrOffset {
        if name.is_empty() {
            return StrOffset::EMPTY;
        }
        let (addr, len) = name.key();
        let slot = (addr as u64).wrapping_mul(SEED) >> (64 - RECENT_BITS);
        let e = &mut self.recent[slot as usize];
        if e.0 == addr && e.1 == len {
            return StrOffset(e.2);
        }
        let s = name.bytes();
        let off = match self.map.get(s) {
            Some(&off) => off,
            None => {
                let off = btf.push_str(s);
                self.map.insert(s.into(), off);
                off
            }
        };
        *e = (addr, len, off.0);
        off
    }

    /// [`StrIndex::intern`] for bytes that are not in the input (an owned copy kept
    /// for later): looked up by content only, since their address may be reused
    /// for another string once they are freed.
    pub fn intern_owned(&mut self, btf: &mut Btf, s: &[u8]) -> StrOffset {
        if s.is_empty() {
            return StrOffset::EMPTY;
        }
        match self.map.get(s) {
            Some(&off) => off,
            None => {
                let off = btf.push_str(s);
                self.map.insert(s.into(), off);
                off
            }
        }
    }
}

/// All strings of `btf`'s base chain and own section, root first: offsets into
/// the result are BTF string offsets.
fn base_chain_strings(btf: &Btf) -> Vec<u8> {
    let mut out = match btf.base() {
        Some(b) => base_chain_strings(b),
        None => Vec::new(),
    };
    out.extend_from_slice(btf.strings());
    out
}

/// A fast, non-cryptographic hasher for short names (the multiply-rotate scheme of
/// rustc's FxHasher).
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.hash = (self.hash.rotate_left(5) ^ w).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_once() {
        let mut btf = Btf::new(None);
        let mut idx = StrIndex::default();
        let sec = b"int\0long\0int\0";
        let a = idx.intern(&mut btf, Name::new(&sec[0..]));
        let b = idx.intern(&mut btf, Name::new(&sec[4..]));
        assert_eq!(idx.intern(&mut btf, Name::new(&sec[0..])), a);
        assert_eq!(idx.intern(&mut btf, Name::new(&sec[9..])), a);
        assert_eq!(idx.intern(&mut btf, Name::new(b"int")), a);
        assert_ne!(a, b);
        assert_eq!(idx.intern(&mut btf, Name::new(&sec[3..])), StrOffset::EMPTY);
        assert_eq!(btf.strings(), b"\0int\0long\0");
    }
}
