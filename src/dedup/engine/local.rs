//! A unit's types prepared on a worker, before its strings and ids are the run's:
//! flattened, sorted into the passes and hashed (names keyed by content, which the
//! unit's strings know), with the words holding ids and strings noted. The ordered
//! part then splices such parts into a [`PreparedBatch`] with
//! [`BatchBuilder::push_local`], rewriting only those words.

use super::super::flat::*;
use super::hash;
use super::load::{BatchBuilder, Passes, Preparer};
use crate::btf::Type;

/// Types flattened and hashed in their unit's own ids and strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalBatch {
    words: Vec<u32>,
    /// End of each record in `words`.
    ends: Vec<u32>,
    /// Words holding an id other than void, in order.
    refs: Vec<u32>,
    /// Words holding a string other than the empty one, in order.
    strs: Vec<u32>,
    /// By index in this batch.
    passes: Passes,
    unmerged: Vec<u32>,
}

impl LocalBatch {
    /// Number of types.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no types.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Where type `i`'s record starts in `words`.
    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.ends[i - 1] as usize
        }
    }
}

/// Positions of a word list (below 4 GiB, as BTF's are; the batch's total is
/// checked when it is added).
#[allow(clippy::cast_possible_truncation)]
fn pos32(p: usize) -> u32 {
    p as u32
}

impl Preparer {
    /// Flattens and hashes `types`, whose ids and string offsets are their unit's
    /// own, names keyed by `keys` (see [`Preparer::prepare`]). Pure: runs anywhere.
    pub fn prepare_local(&self, types: &[Type], keys: impl Fn(u32) -> u64) -> LocalBatch {
        let n = types.len();
        let mut b = LocalBatch {
            words: Vec::with_capacity(types.iter().map(|t| t.record_len() / 4).sum()),
            ends: Vec::with_capacity(n),
            refs: Vec::with_capacity(2 * n),
            strs: Vec::with_capacity(2 * n),
            passes: Passes::for_types(n),
            unmerged: Vec::new(),
        };
        for (i, t) in (0u32..).zip(types) {
            let start = b.words.len();
            push_type(&mut b.words, t);
            let r = &b.words[start..];
            let info = r[1];
            // Positions ascend within a record: its strings and ids are noted apart.
            for_each_str_pos(info, |p| {
                if r[p] != 0 {
                    b.strs.push(pos32(start + p));
                }
            });
            for_each_ref_pos(info, |p| {
                if r[p] != 0 {
                    b.refs.push(pos32(start + p));
                }
            });
            let rec = Rec::new(r);
            if let Some(h) = hash::prim_hash(rec, &keys) {
                b.passes.prims.push((i, h));
            } else if let Some(h) = hash::struct_hash(rec, self.compat, &keys) {
                b.passes.structs.push((i, h));
            } else if matches!(rec.kind(), K_VAR | K_DATASEC) {
                b.unmerged.push(i);
            } else {
                b.passes.refs.push(i);
            }
            b.ends.push(pos32(b.words.len()));
        }
        b
    }
}

/// The entries of a list ascending by `index` whose index is within `range`.
fn within<'a, T: Copy>(
    list: &'a [T],
    index: impl Fn(T) -> u32,
    range: &std::ops::Range<u32>,
) -> impl Iterator<Item = T> + 'a {
    let lo = list.partition_point(|&x| index(x) < range.start);
    let hi = list.partition_point(|&x| index(x) < range.end);
    list[lo..hi].iter().copied()
}

impl BatchBuilder {
    /// Appends `b`'s types `range`, each id `x` (not void) rewritten to `id(x)` (the
    /// batch's ids) and each string `s` (not the empty one) to `string(s)`.
    pub fn push_local(
        &mut self,
        b: &LocalBatch,
        range: std::ops::Range<u32>,
        id: impl Fn(u32) -> u32,
        string: impl Fn(u32) -> u32,
    ) {
        if range.is_empty() {
            return;
        }
        let (w0, w1) = (b.start(range.start as usize), b.start(range.end as usize));
        let first = self.next_index();
        let at = self.p.words.len();
        self.p.words.extend_from_slice(&b.words[w0..w1]);
        let moved = |q: u32| q as usize - w0 + at;
        let words = range.start as usize..range.end as usize;
        let (w0_32, w1_32) = (pos32(w0), pos32(w1));
        let in_words = w0_32..w1_32;
        for q in within(&b.strs, |q| q, &in_words) {
            let w = &mut self.p.words[moved(q)];
            *w = string(*w);
            self.p.max_str = self.p.max_str.max(*w);
        }
        // The type of each id's word, for an id past the batch's last.
        let mut t = range.start as usize;
        for q in within(&b.refs, |q| q, &in_words) {
            while b.ends[t] <= q {
                t += 1;
            }
            let pos = moved(q);
            let x = id(self.p.words[pos]);
            self.p.words[pos] = x;
            self.note_ref(first + pos32(t) - range.start, pos, x);
        }
        self.p
            .ends
            .extend(b.ends[words].iter().map(|&e| pos32(moved(e))));
        let shift = |i: u32| i - range.start + first;
        let passes = &mut self.p.passes;
        let ps = &b.passes;
        passes
            .prims
            .extend(within(&ps.prims, |x| x.0, &range).map(|(i, h)| (shift(i), h)));
        passes
            .structs
            .extend(within(&ps.structs, |x| x.0, &range).map(|(i, h)| (shift(i), h)));
        passes
            .refs
            .extend(within(&ps.refs, |i| i, &range).map(shift));
        self.p
            .unmerged
            .extend(within(&b.unmerged, |i| i, &range).map(shift));
    }
}
