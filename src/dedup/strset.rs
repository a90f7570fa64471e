//! String sets with libbpf's `strset` semantics: a string section that grows by
//! appending, where adding a string already present returns its first offset; and
//! the same index over a base BTF's section, to find a string's first copy there.
//! (The encoder's `StrIndex` interns into the BTF it builds, by input address
//! first; the dedup only looks strings up by content, and never appends to a base.)

use super::FxHashMap;
use crate::hash::FxHasher;
use std::hash::Hasher;

/// Hash of a byte string.
#[inline]
fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.write(bytes);
    h.finish()
}

/// An index of NUL-terminated strings in a byte buffer, by content: the 64-bit
/// content hash maps straight to the offset (one probe, one compare); the rare
/// strings whose hash another string already has go to a side list.
#[derive(Default, Clone)]
struct Index {
    first: FxHashMap<u64, u32>,
    collisions: FxHashMap<u64, Vec<u32>>,
}

impl Index {
    fn with_capacity(n: usize) -> Index {
        Index {
            first: FxHashMap::with_capacity_and_hasher(n, Default::default()),
            collisions: FxHashMap::default(),
        }
    }

    fn find(&self, data: &[u8], s: &[u8], h: u64) -> Option<u32> {
        let off = *self.first.get(&h)?;
        if str_at(data, off) == s {
            return Some(off);
        }
        self.collisions
            .get(&h)?
            .iter()
            .copied()
            .find(|&o| str_at(data, o) == s)
    }

    /// Records `off`, which holds a string not yet in the index.
    fn insert(&mut self, h: u64, off: u32) {
        if let Some(prev) = self.first.insert(h, off) {
            // Keep the first string first; the newcomer goes to the side list.
            self.first.insert(h, prev);
            self.collisions.entry(h).or_default().push(off);
        }
    }
}

/// The string at `off` in `data`, without its NUL (to the end if unterminated).
fn str_at(data: &[u8], off: u32) -> &[u8] {
    let rest = &data[off as usize..];
    &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
}

/// A growing, deduplicated string section.
#[derive(Default, Clone)]
pub struct StrSet {
    data: Vec<u8>,
    index: Index,
}

impl StrSet {
    /// Makes room for about `bytes` more bytes of strings.
    pub fn reserve(&mut self, bytes: usize) {
        self.data.reserve(bytes);
        self.index.first.reserve(bytes / 32);
    }

    /// The section bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Offset of `s`, appending it if it is new (libbpf's `strset__add_str`).
    pub fn add(&mut self, s: &[u8]) -> u32 {
        let h = hash_bytes(s);
        if let Some(off) = self.index.find(&self.data, s, h) {
            return off;
        }
        // The set holds the strings of BTF sections, which `u32` offsets address:
        // it cannot grow past 4 GiB on any input we can read.
        #[allow(clippy::cast_possible_truncation)]
        let off = self.data.len() as u32;
        self.data.extend_from_slice(s);
        self.data.push(0);
        self.index.insert(h, off);
        off
    }
}

impl StrSet {
    /// The set of an existing string section, as libbpf indexes a base BTF's: every
    /// string that starts at offset 0 or right after a NUL, the first copy of a
    /// duplicate winning. `data` is a BTF string section, addressed by `u32`
    /// offsets: an offset past 4 GiB could name nothing, so the index stops there.
    pub fn of_section(data: Vec<u8>) -> StrSet {
        let mut index = Index::with_capacity(data.len() / 16);
        let mut off = 0usize;
        while let Ok(o) = u32::try_from(off) {
            if off >= data.len() {
                break;
            }
            let s = str_at(&data, o);
            let h = hash_bytes(s);
            if index.find(&data, s, h).is_none() {
                index.insert(h, o);
            }
            off += s.len() + 1;
        }
        StrSet { data, index }
    }

    /// Offset of the first copy of `s` (libbpf's `btf__find_str`).
    pub fn find(&self, s: &[u8]) -> Option<u32> {
        self.index.find(&self.data, s, hash_bytes(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_dedups_and_appends() {
        let mut s = StrSet::default();
        assert_eq!(s.add(b""), 0);
        assert_eq!(s.add(b"int"), 1);
        assert_eq!(s.add(b"long"), 5);
        assert_eq!(s.add(b"int"), 1);
        assert_eq!(s.data(), b"\0int\0long\0");
    }

    #[test]
    fn colliding_hashes_still_find_each_string() {
        let mut idx = Index::default();
        let data = b"\0aa\0bb\0";
        idx.insert(7, 1);
        idx.insert(7, 4);
        assert_eq!(idx.find(data, b"aa", 7), Some(1));
        assert_eq!(idx.find(data, b"bb", 7), Some(4));
        assert_eq!(idx.find(data, b"cc", 7), None);
    }

    #[test]
    fn index_finds_first_copy_at_string_starts_only() {
        let idx = StrSet::of_section(b"\0foo\0barfoo\0foo\0".to_vec());
        assert_eq!(idx.find(b"foo"), Some(1));
        assert_eq!(idx.find(b"barfoo"), Some(5));
        assert_eq!(idx.find(b""), Some(0));
        assert_eq!(idx.find(b"bar"), None);
    }
}
