//! A unit's types prepared on a worker, before its strings and ids are the run's:
//! flattened, sorted into the passes and hashed (names keyed by content, which the
//! unit's strings know), with the words holding ids and strings noted, after a slot
//! kept free for one INT ahead of them. The ordered part then either fills that slot
//! and rewrites those words in place ([`LocalBatch::into_prepared`]: the batch is
//! the unit's own words, not a copy), or splices the types into a
//! [`PreparedBatch`] with [`BatchBuilder::push_local`].

use super::super::flat::*;
use super::hash;
use super::load::{BatchBuilder, Passes, PreparedBatch, Preparer};
use crate::btf::{Type, TypeKind};

/// Types flattened and hashed in their unit's own ids and strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalBatch {
    /// The preparer that started it (None: the default, empty batch).
    by: Option<Preparer>,
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

/// The words of an INT's record: the lead slot's size.
const INT_WORDS: usize = 4;

impl LocalBatch {
    /// Number of types, the lead slot (index 0) included: the unit's `i`-th type
    /// (from 1) is the batch's `i`-th.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no types, not even the lead slot.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Number of words of all its records, the lead slot's included.
    pub fn words_len(&self) -> usize {
        self.words.len()
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
    ///
    /// Index 0 is the lead slot: an unnamed INT, which [`LocalBatch::into_prepared`]
    /// replaces and [`BatchBuilder::push_local`] leaves out.
    pub fn prepare_local(&self, types: &[Type], keys: impl Fn(u32) -> u64) -> LocalBatch {
        let words = types.iter().map(|t| t.record_len() / 4).sum::<usize>();
        let mut b = self.start_local(types.len(), words);
        for t in types {
            b.push(t, &keys);
        }
        b
    }

    /// [`Preparer::prepare_local`] one type at a time, for an encoder that hands
    /// over each type as it makes it ([`LocalBatch::push`]): a batch holding only
    /// its lead slot, with room for `n` types of `words` words in all.
    pub fn start_local(&self, n: usize, words: usize) -> LocalBatch {
        let n = n + 1;
        let mut b = LocalBatch {
            by: Some(*self),
            words: Vec::with_capacity(INT_WORDS + words),
            ends: Vec::with_capacity(n),
            // An estimate, not a bound: a member is three words with a name and an
            // id, and most records are structs (an enum or prototype with many
            // entries may still grow them).
            refs: Vec::with_capacity(words / 3 + n),
            strs: Vec::with_capacity(words / 3 + n),
            passes: Passes::for_types(n),
            unmerged: Vec::new(),
        };
        push_type(&mut b.words, &lead_placeholder());
        b.ends.push(pos32(b.words.len()));
        // Its hash is the filled slot's.
        b.passes.prims.push((0, 0));
        b
    }
}

impl LocalBatch {
    /// Room for `n` more types of `words` words in all (the references and names
    /// estimated as in [`Preparer::start_local`]), in few size classes
    /// ([`arena::classes`]): a batch is made anew for every unit.
    pub fn reserve(&mut self, n: usize, words: usize) {
        arena::classes::reserve(&mut self.words, words);
        arena::classes::reserve(&mut self.ends, n);
        arena::classes::reserve(&mut self.refs, words / 3 + n);
        arena::classes::reserve(&mut self.strs, words / 3 + n);
        self.passes.reserve(n);
    }

    /// Appends `t`, the unit's next type, flattened and hashed (names keyed by
    /// `keys`) by the preparer that started the batch.
    pub fn push(&mut self, t: &Type, keys: &impl Fn(u32) -> u64) {
        let compat = self.by.expect("a batch started by a preparer").compat;
        let i = pos32(self.ends.len());
        let b = self;
        let start = b.words.len();
        push_type_noted(&mut b.words, &mut b.strs, &mut b.refs, t);
        let rec = Rec::new(&b.words[start..]);
        if let Some(h) = hash::prim_hash(rec, keys) {
            b.passes.prims.push((i, h));
        } else if let Some(h) = hash::struct_hash(rec, compat, keys) {
            b.passes.structs.push((i, h));
        } else if matches!(rec.kind(), K_VAR | K_DATASEC) {
            b.unmerged.push(i);
        } else {
            b.passes.refs.push(i);
        }
        b.ends.push(pos32(b.words.len()));
    }
}

/// What the lead slot holds until it is filled: an INT, so that the slot's record
/// has the size of the type that fills it.
fn lead_placeholder() -> Type {
    Type {
        name: crate::btf::StrOffset::EMPTY,
        kind: TypeKind::int(32, 0),
    }
}

/// What fills the lead slot of a batch once the run's array index type is known:
/// that INT's record, in the run's strings, and its hash (see
/// [`LocalBatch::into_prepared`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lead {
    words: [u32; INT_WORDS],
    hash: u64,
}

impl Lead {
    /// `int` as the lead slot, its name keyed by `keys`; None if it is not an INT.
    pub fn new(int: &Type, keys: &impl Fn(u32) -> u64) -> Option<Lead> {
        if !matches!(int.kind, TypeKind::Int { .. }) {
            return None;
        }
        let mut slot = Vec::with_capacity(INT_WORDS);
        push_type(&mut slot, int);
        let words: [u32; INT_WORDS] = slot.try_into().ok()?;
        let hash = hash::prim_hash(Rec::new(&words), keys)?;
        Some(Lead { words, hash })
    }
}

impl LocalBatch {
    /// The batch of `by`'s dedup: `lead` (an INT, in the batch's ids and strings)
    /// in the lead slot, then the unit's types, each id `x` (not void) rewritten to
    /// `id(x)` and each string `s` (not the empty one) to `string(s)`, in place.
    /// What a [`BatchBuilder`] would build from `lead` and then the whole of this
    /// batch ([`BatchBuilder::push_local`]), without copying it. `lead`'s name is
    /// keyed by `keys`. Gives the batch back if `lead` is not an INT.
    pub fn into_prepared(
        self,
        by: Preparer,
        lead: &Type,
        keys: &impl Fn(u32) -> u64,
        id: impl Fn(u32) -> u32,
        string: impl Fn(u32) -> u32,
    ) -> Result<PreparedBatch, Box<LocalBatch>> {
        let Some(lead) = Lead::new(lead, keys) else {
            return Err(Box::new(self));
        };
        let (batch, pending) = self.into_prepared_with(by, &lead, id, |o| Some(string(o)))?;
        debug_assert!(pending.is_empty());
        Ok(batch)
    }

    /// [`LocalBatch::into_prepared`] with the lead slot's filling made once, and
    /// strings `string` does not know yet (None) left as they are: their
    /// positions are returned, for [`PreparedBatch::finish_strings`]. So a worker
    /// can prepare a unit's batch whole but for the strings no earlier unit gave
    /// the run.
    pub fn into_prepared_with(
        mut self,
        by: Preparer,
        lead: &Lead,
        id: impl Fn(u32) -> u32,
        string: impl Fn(u32) -> Option<u32>,
    ) -> Result<(PreparedBatch, Vec<u32>), Box<LocalBatch>> {
        if self.is_empty() {
            return Err(Box::new(self));
        }
        self.words[..INT_WORDS].copy_from_slice(&lead.words);
        self.passes.prims[0] = (0, lead.hash);
        let mut max_str = Rec::new(&lead.words).name();
        let mut pending = Vec::new();
        for &q in &self.strs {
            let w = &mut self.words[q as usize];
            match string(*w) {
                Some(x) => {
                    *w = x;
                    max_str = max_str.max(x);
                }
                None => pending.push(q),
            }
        }
        // As `BatchBuilder::note_ref`: ids past the batch's last are an error (the
        // first one is reported), ids of the batch's own types are noted. The
        // positions of `refs` ascend, so the own ones are kept in its place.
        let last_local = by.base_types.saturating_add(pos32(self.len()));
        let mut bad_ref = None;
        let mut own = 0;
        let mut t = 0;
        for k in 0..self.refs.len() {
            let q = self.refs[k];
            while self.ends[t] <= q {
                t += 1;
            }
            let x = id(self.words[q as usize]);
            self.words[q as usize] = x;
            if x > last_local {
                bad_ref.get_or_insert((pos32(t), x));
            } else if x > by.base_types {
                self.refs[own] = q;
                own += 1;
            }
        }
        self.refs.truncate(own);
        let batch = PreparedBatch {
            by,
            words: self.words,
            ends: self.ends,
            own_refs: self.refs,
            passes: self.passes,
            unmerged: self.unmerged,
            bad_ref,
            max_str,
        };
        Ok((batch, pending))
    }
}

impl PreparedBatch {
    /// Rewrites the string words at `pending` (which
    /// [`LocalBatch::into_prepared_with`] left) to `string(s)`.
    pub fn finish_strings(&mut self, pending: &[u32], string: impl Fn(u32) -> u32) {
        for &q in pending {
            let w = &mut self.words[q as usize];
            *w = string(*w);
            self.max_str = self.max_str.max(*w);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Member, StrOffset, TypeId};
    use crate::dedup::Compat;

    /// Filling the lead slot in place gives the batch a builder splices from the
    /// same INT and the whole local batch: words, ends, own ids, passes, hashes, the
    /// largest string and the first reference past the batch.
    #[test]
    fn filled_in_place_equals_spliced() {
        let by = Preparer {
            base_types: 10,
            compat: Compat::Upstream,
        };
        let t = |name: u32, kind| Type {
            name: StrOffset(name),
            kind,
        };
        let member = |name: u32, ty: u32| Member {
            name: StrOffset(name),
            type_id: TypeId(ty),
            offset: 0,
        };
        for past in [false, true] {
            let types = vec![
                t(1, TypeKind::int(32, 1)),
                t(0, TypeKind::Ptr(TypeId(3))),
                t(
                    2,
                    TypeKind::Struct(crate::btf::Composite {
                        size: 8,
                        kflag: false,
                        members: vec![member(3, 2), member(0, 1)],
                    }),
                ),
                t(0, TypeKind::Ptr(TypeId(if past { 50 } else { 0 }))),
                t(4, TypeKind::Typedef(TypeId(3))),
            ];
            let local = by.prepare_local(&types, |o| u64::from(o) * 7919);
            // Named past every rewritten string: the largest is the lead's.
            let lead = t(5000, TypeKind::int(32, 1));
            let keys = |o: u32| u64::from(o) * 31;
            let id = |x: u32| x + by.base_types + 1;
            let string = |o: u32| o + 1000;
            let mut b = by.builder(local.len(), local.words_len());
            b.push_type(&lead, &keys);
            b.push_local(&local, 1..pos32(local.len()), id, string);
            let spliced = b.finish();
            // Filled in two steps, as a worker and the token holder do: strings
            // 1 and 3 known first, the others after.
            let (mut parted, pending) = local
                .clone()
                .into_prepared_with(by, &Lead::new(&lead, &keys).unwrap(), id, |o| {
                    [1, 3].contains(&o).then(|| string(o))
                })
                .expect("an INT fills the slot");
            assert_eq!(pending.len(), 2, "names 2 and 4 wait");
            assert_ne!(parted, spliced);
            parted.finish_strings(&pending, string);
            let filled = local
                .into_prepared(by, &lead, &keys, id, string)
                .expect("an INT fills the slot");
            assert_eq!(filled, spliced);
            assert_eq!(parted, spliced);
            assert_eq!(filled.bad_ref.is_some(), past);
        }
    }
}
