//! A batch into the engine, in two steps. [`Preparer::prepare`] does what depends
//! only on the batch's own types: their records flattened into words, their
//! references checked, the words holding the batch's own ids noted (to renumber
//! them later), the types sorted into the passes that look at them, with the hash
//! of every type whose hash needs no other type (INT, ENUM, ENUM64, FWD, FLOAT,
//! STRUCT, UNION, and upstream's TYPEDEF; the reference kinds' hashes need their
//! referenced types' canonical ids). It reads nothing of the engine, so it can run
//! on any thread, ahead of the dedup. [`Engine::load`] then appends the records,
//! renumbers, and moves or checks the strings.

use super::super::flat::*;
use super::hash;
use super::{fits_u32, invalid, Engine, IdSlot, MAX_ID, UNPROCESSED};
use crate::btf::{Btf, StrOffset, Type};
use crate::dedup::{Compat, DedupError, FxHashMap};

/// What [`Preparer::prepare`] needs of a dedup: what never changes with its batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preparer {
    pub(super) base_types: u32,
    pub(super) compat: Compat,
}

/// A batch's types of each pass, by index in the batch, in batch order, with the
/// pass's hash where it needs no other type.
#[derive(Clone, Default, Debug, PartialEq, Eq)]
pub(super) struct Passes {
    /// INT, ENUM, ENUM64, FWD, FLOAT.
    pub(super) prims: Vec<(u32, u64)>,
    /// STRUCT, UNION, and upstream's TYPEDEF.
    pub(super) structs: Vec<(u32, u64)>,
    /// The rest but VAR and DATASEC (the reference kinds).
    pub(super) refs: Vec<u32>,
}

impl Passes {
    /// Room for `n` more types.
    pub(super) fn reserve(&mut self, n: usize) {
        self.prims.reserve(n / 4);
        self.structs.reserve(n / 4);
        self.refs.reserve(n);
    }

    /// Empty lists, sized for `n` types.
    pub(super) fn for_types(n: usize) -> Passes {
        Passes {
            prims: Vec::with_capacity(n / 4),
            structs: Vec::with_capacity(n / 4),
            refs: Vec::with_capacity(n),
        }
    }
}

/// A batch flattened and checked by [`Preparer::prepare`] (or built by a
/// [`BatchBuilder`]), to be added with `Incremental::add_prepared` (or loaded by
/// the engine).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedBatch {
    pub(super) by: Preparer,
    /// The records, one after another, with the batch's ids as given.
    pub(super) words: Vec<u32>,
    /// End of each record in `words`.
    pub(super) ends: Vec<u32>,
    /// Words holding one of the batch's own ids (past the base's).
    pub(super) own_refs: Vec<u32>,
    pub(super) passes: Passes,
    /// VAR and DATASEC, which are never merged.
    pub(super) unmerged: Vec<u32>,
    /// The first type that refers past the batch's last type, and that id.
    pub(super) bad_ref: Option<(u32, u32)>,
    /// The largest string offset of any record (checked against the section's end).
    pub(super) max_str: u32,
}

impl PreparedBatch {
    /// Number of types.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the batch has no types.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The record of the batch's `i`-th type.
    fn rec_words(&self, i: usize) -> &[u32] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.words[start..self.ends[i] as usize]
    }
}

/// Builds a [`PreparedBatch`] type by type, or from parts prepared apart
/// ([`BatchBuilder::push_local`]).
pub struct BatchBuilder {
    pub(super) p: PreparedBatch,
    /// The batch's last id: references past it are errors.
    pub(super) last_local: u32,
}

impl Preparer {
    /// The id of a batch's first type (batches number their types from the
    /// base's last on, whatever the types kept before them).
    pub fn first_id(&self) -> u32 {
        self.base_types + 1
    }

    /// Flattens and checks `types`, numbered from the base's last id + 1 (their
    /// references to each other are those ids), with the hashes that need no other
    /// type, names keyed by `keys` (the [`name_key`](super::name_key) of the string
    /// at each offset). Errors (a reference past the last type, a string offset past
    /// the section's end) are reported when the batch is added, in batch order, as
    /// if the batch had not been prepared apart.
    pub fn prepare(&self, types: &[Type], keys: impl Fn(u32) -> u64) -> PreparedBatch {
        let words = types.iter().map(|t| t.record_len() / 4).sum::<usize>();
        let mut b = self.builder(types.len(), words);
        for t in types {
            b.push_type(t, &keys);
        }
        b.finish()
    }

    /// The preparer of an engine over a base of `base_types` types (none: 0).
    pub fn for_base(base_types: u32, compat: Compat) -> Preparer {
        Preparer { base_types, compat }
    }

    /// [`Preparer::prepare`] of `types[span]`, where `types` follow `before` types
    /// already loaded into the engine: their ids are the final ones (`before` past
    /// the base's last, then on), so the batch is loaded as it is
    /// (`Engine::load_more`), and a type of the span may refer to any of `types`.
    /// The batches of consecutive spans, loaded one after another, are the batch
    /// of all, so that they can be prepared on several threads.
    pub fn prepare_span(
        &self,
        types: &[Type],
        span: std::ops::Range<usize>,
        keys: impl Fn(u32) -> u64,
        before: u32,
    ) -> PreparedBatch {
        let part = &types[span];
        let words = part.iter().map(|t| t.record_len() / 4).sum::<usize>();
        let mut b = self.builder(part.len(), words);
        // Any of `types` is the batch's own (more ids than BTF holds are caught
        // when the batch is added).
        let all = u32::try_from(types.len()).unwrap_or(u32::MAX);
        b.last_local = self.base_types.saturating_add(before).saturating_add(all);
        for t in part {
            b.push_type(t, &keys);
        }
        b.finish()
    }

    /// A builder of a batch of `n` types of about `words` words in all: sized
    /// once, since grown by doubling the final pass's batch (a vmlinux's kept
    /// types and functions, 4 MB of words) was copied into fresh pages each time.
    pub fn builder(&self, n: usize, words: usize) -> BatchBuilder {
        // More types than ids are caught when the batch is added.
        let own = u32::try_from(n).unwrap_or(u32::MAX);
        BatchBuilder {
            p: PreparedBatch {
                by: *self,
                words: Vec::with_capacity(words),
                ends: Vec::with_capacity(n),
                // An estimate, as for a local batch (see `Preparer::start_local`).
                own_refs: Vec::with_capacity(words / 3 + n),
                passes: Passes::for_types(n),
                unmerged: Vec::new(),
                bad_ref: None,
                max_str: 0,
            },
            last_local: self.base_types.saturating_add(own),
        }
    }
}

impl BatchBuilder {
    /// The next type's index in the batch.
    pub(super) fn next_index(&self) -> u32 {
        // Types past `u32::MAX` are caught when the batch is added.
        u32::try_from(self.p.ends.len()).unwrap_or(u32::MAX)
    }

    /// Notes that the word at `pos` of the batch's `i`-th type holds id `x`.
    #[inline]
    pub(super) fn note_ref(&mut self, i: u32, pos: usize, x: u32) {
        if x > self.last_local {
            self.p.bad_ref.get_or_insert((i, x));
        } else if x > self.p.by.base_types {
            // Positions within the batch's words, which BTF keeps below 4 GiB; the
            // total is checked when the batch is added.
            #[allow(clippy::cast_possible_truncation)]
            self.p.own_refs.push(pos as u32);
        }
    }

    /// Appends `t`, in the batch's ids, its names keyed by `keys`.
    pub fn push_type(&mut self, t: &Type, keys: &impl Fn(u32) -> u64) {
        let i = self.next_index();
        let start = self.p.words.len();
        push_type(&mut self.p.words, t);
        let info = self.p.words[start + 1];
        for_each_ref_pos(info, |p| {
            let x = self.p.words[start + p];
            self.note_ref(i, start + p, x);
        });
        let r = &self.p.words[start..];
        for_each_str_pos(info, |p| self.p.max_str = self.p.max_str.max(r[p]));
        let rec = Rec::new(r);
        if let Some(h) = hash::prim_hash(rec, keys) {
            self.p.passes.prims.push((i, h));
        } else if let Some(h) = hash::struct_hash(rec, self.p.by.compat, keys) {
            self.p.passes.structs.push((i, h));
        } else if matches!(rec.kind(), K_VAR | K_DATASEC) {
            self.p.unmerged.push(i);
        } else {
            self.p.passes.refs.push(i);
        }
        // As above: checked when added.
        #[allow(clippy::cast_possible_truncation)]
        self.p.ends.push(self.p.words.len() as u32);
    }

    /// The batch.
    pub fn finish(self) -> PreparedBatch {
        self.p
    }
}

/// Where a batch's string offsets point.
#[derive(Clone, Copy)]
pub(super) enum Strings<'a> {
    /// Into this BTF's strings: each string is moved into the engine's set.
    Btf(&'a Btf),
    /// Into an encoder's section, ending at `str_end`: offsets are kept.
    Encoded { str_end: u32 },
}

impl Engine {
    /// What [`Preparer::prepare`] needs of this engine.
    pub fn preparer(&self) -> Preparer {
        Preparer {
            base_types: self.base_types,
            compat: self.compat,
        }
    }

    /// Appends the prepared batch `p` with ids renumbered from the next free id, and
    /// its strings moved into our string set (libbpf's `btf_dedup_strings`, in the
    /// same visiting order) or checked. Returns the batch's first id.
    pub(super) fn load(
        &mut self,
        p: PreparedBatch,
        strings: Strings<'_>,
    ) -> Result<u32, DedupError> {
        let first_id = self.base_types + 1;
        let (s, passes) = self.load_numbered(p, strings, first_id)?;
        self.passes = passes;
        Ok(s)
    }

    /// Appends `p`, whose types were numbered from `first_id`, renumbered from the
    /// next free id; the batch's passes are returned for the caller to place.
    fn load_numbered(
        &mut self,
        mut p: PreparedBatch,
        strings: Strings<'_>,
        first_id: u32,
    ) -> Result<(u32, Passes), DedupError> {
        if p.by != self.preparer() {
            return Err(DedupError::BaseMismatch);
        }
        // Type `i` refers past the last type: errors before it come first.
        let limit = p.bad_ref.map_or(p.len(), |(i, _)| i as usize);
        match strings {
            Strings::Encoded { str_end } => {
                // Offsets below the base's end are the base's; the rest must be
                // before the section's end.
                let bound = self.str_start.max(str_end);
                if p.max_str != 0 && p.max_str >= bound {
                    if let Some((i, off)) = first_bad_str(&p, limit, bound) {
                        return Err(DedupError::BadString {
                            id: first_id + i,
                            offset: off,
                        });
                    }
                }
            }
            Strings::Btf(b) => self.move_strings(&mut p, b, limit)?,
        }
        if let Some((i, x)) = p.bad_ref {
            return Err(invalid(
                first_id + i,
                format!("refers to type {x}, past the last type"),
            ));
        }
        let s = self.n_ids();
        let n = fits_u32(p.len(), s)?;
        if s.checked_add(n).is_none_or(|e| e > MAX_ID) {
            return Err(invalid(s, "more types than BTF can hold"));
        }
        // Every word offset, the last included, must fit the `u32`s of `offs`.
        fits_u32(self.w.len() + p.words.len(), s)?;
        #[allow(clippy::cast_possible_truncation)]
        let base_len = self.w.len() as u32;
        let shift = s - first_id;
        let start = self.w.len();
        self.w.extend_from_slice(&p.words);
        if shift != 0 {
            for &pos in &p.own_refs {
                self.w[start + pos as usize] += shift;
            }
        }
        self.offs.extend(p.ends.iter().map(|e| e + base_len));
        self.ids
            .resize((s + n) as usize, IdSlot::new(UNPROCESSED, UNPROCESSED));
        for &i in &p.unmerged {
            self.ids[(s + i) as usize].map = s + i;
        }
        self.anon.resize((s + n) as usize, [0; 2]);
        Ok((s, p.passes))
    }

    /// Appends `p` ([`Preparer::prepare_span`] of types that follow the ones
    /// loaded) to the batch loaded last, which [`Engine::process_first`] has taken
    /// through the passes before the reference pass: `p` may hold only reference
    /// kinds, VAR and DATASEC, whose ids it gives as they are, and its strings are
    /// an encoder's section ending at `str_end` (see [`Engine::load_prepared`]).
    /// `s` is where that batch starts, as its load returned.
    pub fn load_more(&mut self, s: u32, p: PreparedBatch, str_end: u32) -> Result<(), DedupError> {
        if !p.passes.prims.is_empty() || !p.passes.structs.is_empty() {
            return Err(DedupError::NotReferencesOnly);
        }
        let next = self.n_ids();
        let before = next - s;
        let (_, passes) = self.load_numbered(p, Strings::Encoded { str_end }, next)?;
        self.passes
            .refs
            .extend(passes.refs.iter().map(|&i| i + before));
        Ok(())
    }

    /// Moves the strings of `p`'s first `limit` records from `b`'s section into
    /// ours (the base's copy of a string if it has one).
    fn move_strings(
        &mut self,
        p: &mut PreparedBatch,
        b: &Btf,
        limit: usize,
    ) -> Result<(), DedupError> {
        let first_id = self.base_types + 1;
        // Most string offsets recur within a batch (member names).
        let mut memo: FxHashMap<u32, u32> = FxHashMap::default();
        let mut start = 0;
        for i in 0..limit {
            let end = p.ends[i] as usize;
            let r = &mut p.words[start..end];
            start = end;
            let mut bad = None;
            for_each_str_pos(r[1], |pos| {
                let off = r[pos];
                if off == 0 || off < self.str_start || bad.is_some() {
                    return;
                }
                if let Some(&o) = memo.get(&off) {
                    r[pos] = o;
                    return;
                }
                match b.str_bytes(StrOffset(off)) {
                    Some(bytes) => {
                        let o = match self.base_strs.as_ref().and_then(|s| s.find(bytes)) {
                            Some(o) => o,
                            None => self.str_start + self.strs.add(bytes),
                        };
                        memo.insert(off, o);
                        r[pos] = o;
                    }
                    None => bad = Some(off),
                }
            });
            if let Some(off) = bad {
                return Err(DedupError::BadString {
                    // `i` is below the batch's length, a `u32` (see `prepare`).
                    #[allow(clippy::cast_possible_truncation)]
                    id: first_id + i as u32,
                    offset: off,
                });
            }
        }
        // The hashes key names by content, which moving does not change.
        Ok(())
    }
}

/// The first of `p`'s first `limit` types with a string offset at or past `bound`.
fn first_bad_str(p: &PreparedBatch, limit: usize, bound: u32) -> Option<(u32, u32)> {
    (0u32..).zip(0..limit).find_map(|(i, j)| {
        let r = p.rec_words(j);
        let mut bad = None;
        for_each_str_pos(r[1], |pos| {
            if r[pos] != 0 && r[pos] >= bound && bad.is_none() {
                bad = Some(r[pos]);
            }
        });
        bad.map(|off| (i, off))
    })
}
