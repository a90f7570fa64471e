//! The hashes of names that the encoder, the dedup and the symbol tables share: a
//! fast multiply-rotate hasher for short keys, a name's hash, and the hasher of maps
//! keyed by a hash already computed.

use std::hash::Hasher;

/// A name's hash, computed once where the name is first met (on a worker).
pub fn hash_str(s: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.write(s);
    let h = h.finish();
    // Fx leaves its low bits weak; the tables index by them.
    h ^ (h >> 29)
}

/// The hasher of a map keyed by an already computed hash: the key is the hash.
#[derive(Default, Clone, Copy)]
pub struct Prehashed(u64);

impl Hasher for Prehashed {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys are hashed");
    }

    #[inline]
    fn write_u64(&mut self, h: u64) {
        self.0 = h;
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A fast, non-cryptographic hasher for short names (the multiply-rotate scheme of
/// rustc's FxHasher).
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

/// The multiplier of [`FxHasher`], also a good one to scatter keys by.
pub const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

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
            self.add(u64::from_le_bytes(c.try_into().expect("8-byte chunk")));
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
        self.add(u64::from(i));
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
