//! BTF deduplication with the results of libbpf's `btf__dedup`, whole, split and
//! incremental.
//!
//! # One-shot dedup
//!
//! [`dedup`] gives the bytes libbpf gives (`btf__raw_data` after `btf__dedup`, with
//! the classic 24-byte header). It follows libbpf's passes:
//!
//! 1. strings: every string referenced by any type (kept or not), in type order and
//!    within a type name first, goes into a new section; a split BTF first reuses the
//!    base's copy of a string (offset 0 and strings already in the base are left);
//! 2. INT, FLOAT, FWD, and ENUM/ENUM64 — an enum with no enumerators (an enum FWD)
//!    matches the full ENUM or ENUM64 of its name and a canonical enum FWD is
//!    resolved to a later full enum;
//! 3. STRUCT/UNION — and, in current libbpf, TYPEDEF — by graph equivalence with a
//!    hypothetical canonical→candidate mapping that follows cycles through pointers,
//!    resolves FWD ↔ STRUCT/UNION on the way, tolerates duplicate identical types
//!    inside one CU, and never resolves a base FWD;
//! 4. each FWD still unresolved maps to the one canonical STRUCT/UNION of its name,
//!    if there is exactly one;
//! 5. reference kinds (PTR, CONST, VOLATILE, RESTRICT, FUNC, TYPE_TAG, DECL_TAG,
//!    ARRAY, FUNC_PROTO) once what they refer to is canonical;
//! 6. compaction in id order and remapping of every referenced id. VAR and DATASEC
//!    are never merged.
//!
//! When several canonical candidates match, the first in libbpf's hash-bucket order
//! wins, so the candidate table reproduces that order (see `table.rs`).
//!
//! [`Compat::Upstream`] is current libbpf including "libbpf: Fix deduplication of
//! typedef with base definitions" (the libbpf the pahole references were made with).
//! [`Compat::Libbpf1_1`] is libbpf 1.1 (Debian 12's `libbpf1`, our test oracle):
//! typedefs are reference kinds there, and only identical arrays and structs (not
//! deeper identical graphs) are accepted as in-CU duplicates.
//!
//! # Incremental dedup
//!
//! [`Incremental`] keeps a canonical set and deduplicates each new batch (say one
//! CU's types) against it, keeping only the batch's new canonical types: memory
//! stays proportional to the deduplicated output, not to the input. Each batch goes
//! through the passes above as a split BTF over the canonical set would, except that
//! FWDs are not resolved by name (step 4): whether a name is unique is only known
//! once every batch is in. A FWD (or enum FWD), of the base or kept, that a batch
//! resolves to one of its types stays resolved, to that type's kept copy, for every
//! later batch, as it stays for the rest of libbpf's one dedup (libbpf never undoes
//! a map entry). The kept set itself never changes after the fact, which is where
//! incremental and one-shot dedup of the same stream can part:
//!
//! * a FWD kept before its STRUCT/UNION arrives stays a FWD in the set, and the
//!   first batch struct whose graph needs that FWD resolved is not merged with the
//!   kept struct that refers to it (libbpf's rule for a base FWD, `adjust_canon`):
//!   it is kept, and the FWD resolved, so later batches merge with the first kept
//!   struct as one-shot dedup would (with the FWD put back after each batch, as
//!   before 2026-12-05, every later batch's copy of such a struct was first walked
//!   against that struct, then against the second: a third of the struct pass's
//!   steps on the corpus vmlinux). One-shot dedup would resolve the FWD and merge at
//!   the first batch already. An enum FWD kept before its full enum likewise stays;
//! * whether two structs are equivalent is decided when the later one arrives,
//!   against a set that is already deduplicated; one-shot dedup compares raw CU
//!   graphs, and libbpf's checks are path dependent (duplicate types inside one CU,
//!   FWDs resolved on the way), so it can leave duplicates the incremental set does
//!   not have, or the other way round;
//! * current libbpf's check for duplicate arrays inside one CU compares only the
//!   arrays' shapes (it reads the first array's element type twice), so arrays of
//!   different element types can merge wherever that check is met — and one-shot and
//!   incremental dedup meet it in different places.
//!
//! The dedup therefore ends with a final pass ([`FinalPass`], run by
//! [`Incremental::finish`]): a one-shot dedup of the kept set (and whatever the
//! caller appends to it, such as function types) that resolves FWDs by name with
//! every struct present, makes the merges between kept types that had to wait for a
//! FWD to be resolved, and drops the strings that only dropped types used. It starts
//! from the base FWDs the batches resolved, and it does not compare kept
//! STRUCT/UNION/TYPEDEFs with base types again: every batch compared its types with
//! the whole, immutable base as libbpf does, once, and redoing it over the kept set
//! would undo what libbpf keeps. (libbpf keeps the first split struct whose check
//! needs a base FWD resolved — `hypot_adjust_canon` — then points the base FWD at
//! the split definition, so later checks pass; once its references are remapped that
//! kept struct is identical to its base twin, and a plain one-shot pass over the kept
//! set would merge it.) Kept types are first occurrences in stream order, which is
//! the order one-shot dedup keeps. The result equals one-shot dedup of the whole
//! stream when no FWD comes before its definition and no in-CU duplicate arrays
//! differ in element type: the tests check this byte for byte on the vmlinux
//! reference cut into 40 CU-like batches (libbpf 1.1 rules; current rules differ by
//! 48 bytes there through the array check), on a module cut into batches that
//! carry FWDs of earlier batches' structs, and on a base FWD resolved by a batch.
//! With FWDs before their definitions the outputs can differ, in either direction.
//! On real kernels the cases line up: with functions and variables, the engine's
//! per-unit batches give pahole's bytes for the corpus vmlinux (three feature sets)
//! and its three modules (`tests/funcs_corpus.rs`, `tests/engine_identity.rs`);
//! `--dedup=one-shot` is there for an input where they would not.
//!
//! A batch's own share of the work can be done apart, on any thread, ahead of its
//! turn: [`Incremental::preparer`] gives a small [`Preparer`] whose
//! [`Preparer::prepare`] flattens and checks the batch's records and computes the
//! hashes that need no other type (see `engine/load.rs`), names keyed by content
//! ([`name_key`]); the ordered part, [`Incremental::add_prepared`], renumbers,
//! looks up, compares and commits. [`Incremental::add_encoded`] is the two in a
//! row. [`Preparer::prepare_local`] does the same before the batch has the run's
//! ids and strings (an encoder's unit, on its worker), and a [`BatchBuilder`]
//! rewrites just the words holding them (`engine/local.rs`).

mod engine;
mod flat;
mod strset;
mod table;

pub use engine::{btf_keys, name_key, BatchBuilder, Lead, LocalBatch, PreparedBatch, Preparer};

use crate::btf::{Btf, Endian, KindLayout};
use crate::hash::FxHasher;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

/// `HashMap` with the crate's [`FxHasher`]: the dedup's keys are integers and
/// short strings, for which std's SipHash costs more than the rest of a lookup.
type FxHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Which libbpf's behaviour to reproduce.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compat {
    /// Current upstream libbpf with the typedef fixes (pahole 1.31's references).
    #[default]
    Upstream,
    /// libbpf 1.1 as packaged by Debian 12 (`libbpf1` 1.1.2).
    Libbpf1_1,
}

/// Why dedup failed. The input is left untouched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DedupError {
    /// A type is malformed for dedup (dangling reference, wrong kind in a graph).
    Invalid {
        /// The type's id in the input.
        id: u32,
        /// What is wrong.
        what: String,
    },
    /// A string offset does not point into the string section.
    BadString {
        /// The type's id in the input.
        id: u32,
        /// The offset.
        offset: u32,
    },
    /// Reference types form a loop with no struct in it (not valid C).
    Loop {
        /// A type on the loop.
        id: u32,
    },
    /// A batch is not over the base the incremental dedup was started with.
    BaseMismatch,
    /// Types appended to a batch after its first passes (`Engine::load_more`)
    /// include a kind those passes handle.
    NotReferencesOnly,
    /// The result could not be read back (a bug).
    Output(crate::btf::BtfError),
}

impl fmt::Display for DedupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DedupError::Invalid { id, what } => write!(f, "type [{id}]: {what}"),
            DedupError::BadString { id, offset } => {
                write!(
                    f,
                    "type [{id}]: string offset {offset} is outside the string section"
                )
            }
            DedupError::Loop { id } => write!(f, "type [{id}]: reference types form a loop"),
            DedupError::BaseMismatch => f.write_str("batch is not over the dedup's base BTF"),
            DedupError::NotReferencesOnly => {
                f.write_str("types appended after the struct pass include a kind it handles")
            }
            DedupError::Output(e) => write!(f, "dedup produced unreadable BTF: {e}"),
        }
    }
}

impl std::error::Error for DedupError {}

/// Deduplicates `btf` (whole, or split over its unchanged base) as current libbpf
/// does. Like libbpf, the result keeps the input's header length.
pub fn dedup(btf: &Btf) -> Result<Btf, DedupError> {
    dedup_with(btf, Compat::Upstream)
}

/// [`dedup`] with the behaviour of the given libbpf.
pub fn dedup_with(btf: &Btf, compat: Compat) -> Result<Btf, DedupError> {
    let bytes = dedup_bytes(btf, compat)?;
    crate::btf::read::parse(&bytes, btf.base().cloned()).map_err(DedupError::Output)
}

/// [`dedup_with`] straight to raw BTF bytes (what `btf__raw_data` gives), without
/// building the result's type model: for writers, and to keep peak memory down.
pub fn dedup_bytes(btf: &Btf, compat: Compat) -> Result<Vec<u8>, DedupError> {
    let mut e = engine::Engine::new(btf.base().map(|b| &**b), compat, false)?;
    e.add_batch(btf)?;
    // libbpf keeps the input's header length (the bytes past 24 are zero) and its
    // kind layout section.
    Ok(e.to_bytes(btf.endian(), btf.header_extra(), btf.layout()))
}

/// [`dedup_bytes`] taking `btf` by value, to free it as soon as its types are copied
/// into the dedup's own compact form: the lowest peak memory, for the CLI.
pub fn dedup_bytes_owned(btf: Btf, compat: Compat) -> Result<Vec<u8>, DedupError> {
    dedup_owned(btf, compat, false)
}

/// [`dedup_bytes_owned`] for a BTF an encoder built from scratch with unique
/// strings, as pahole's final `btf__dedup`: libbpf then skips its string pass
/// (`strs_deduped`), so the string section stays as the encoder wrote it, in
/// insertion order and with strings no kept type uses.
pub fn dedup_bytes_owned_encoded(btf: Btf, compat: Compat) -> Result<Vec<u8>, DedupError> {
    dedup_owned(btf, compat, true)
}

fn dedup_owned(btf: Btf, compat: Compat, keep_strings: bool) -> Result<Vec<u8>, DedupError> {
    let base = btf.base().cloned();
    let e = engine::Engine::new(base.as_deref(), compat, false)?;
    run_owned(e, btf, keep_strings)
}

/// Dedups `btf` with `e`, an engine already set up for its base, freeing `btf` as
/// soon as its types are loaded.
fn run_owned(e: engine::Engine, btf: Btf, keep_strings: bool) -> Result<Vec<u8>, DedupError> {
    load_process_write(e, btf, keep_strings, |_| Ok(()))
}

/// Loads `btf` into `e`, frees it, lets `settle` set the engine up over the loaded
/// batch, runs the passes and writes the result. With `keep_strings` (a BTF an
/// encoder built, each string in its section once), the section is written as it
/// is and its offsets need no moving: libbpf does not dedup the strings of a BTF
/// built from scratch (a vmlinux's 110,000 strings hashed and looked up again were a
/// third of the final pass).
fn load_process_write(
    mut e: engine::Engine,
    btf: Btf,
    keep_strings: bool,
    settle: impl FnOnce(&mut engine::Engine) -> Result<(), DedupError>,
) -> Result<Vec<u8>, DedupError> {
    let framing = Framing::of(&btf);
    let (s, strings) = if keep_strings {
        let s = e.load_encoded_batch(&btf)?;
        (s, Some(btf.into_strings()))
    } else {
        let s = e.load_batch(&btf)?;
        drop(btf);
        (s, None)
    };
    settle(&mut e)?;
    e.process(s)?;
    Ok(match strings {
        Some(strs) => framing.bytes_with_strings(&e, &strs),
        None => framing.bytes(&e),
    })
}

/// What a dedup's bytes take from its input besides the types and strings, kept
/// when the input is freed after loading.
struct Framing {
    endian: Endian,
    extra: Vec<u8>,
    layout: Option<Vec<KindLayout>>,
}

impl Framing {
    fn of(btf: &Btf) -> Framing {
        Framing {
            endian: btf.endian(),
            extra: btf.header_extra().to_vec(),
            layout: btf.layout().map(<[_]>::to_vec),
        }
    }

    /// `e`'s result with its own string section.
    fn bytes(&self, e: &engine::Engine) -> Vec<u8> {
        e.to_bytes(self.endian, &self.extra, self.layout.as_deref())
    }

    /// `e`'s result over the encoder's string section `strs`, kept as it is.
    fn bytes_with_strings(&self, e: &engine::Engine, strs: &[u8]) -> Vec<u8> {
        e.to_bytes_with_strings(self.endian, &self.extra, self.layout.as_deref(), strs)
    }
}

/// A dedup with its base already indexed, for many split BTFs over one base (batch
/// mode): indexing vmlinux's types is done once, each module starts from a copy.
#[derive(Clone)]
pub struct PreparedBase {
    engine: engine::Engine,
    base: Arc<Btf>,
}

impl PreparedBase {
    /// Indexes `base` as [`dedup_bytes_owned`] would for a split BTF over it.
    pub fn new(base: Arc<Btf>, compat: Compat) -> Result<PreparedBase, DedupError> {
        Ok(PreparedBase {
            engine: engine::Engine::new(Some(&base), compat, false)?,
            base,
        })
    }

    /// [`dedup_bytes_owned`] of `btf`, a split BTF over this base: the same bytes.
    pub fn dedup_bytes_owned(&self, btf: Btf) -> Result<Vec<u8>, DedupError> {
        self.dedup_owned(btf, false)
    }

    /// [`dedup_bytes_owned_encoded`] of `btf`, a split BTF over this base: the same
    /// bytes.
    pub fn dedup_bytes_owned_encoded(&self, btf: Btf) -> Result<Vec<u8>, DedupError> {
        self.dedup_owned(btf, true)
    }

    fn dedup_owned(&self, btf: Btf, keep_strings: bool) -> Result<Vec<u8>, DedupError> {
        if !btf.base().is_some_and(|b| Arc::ptr_eq(b, &self.base)) {
            return Err(DedupError::BaseMismatch);
        }
        run_owned(self.engine.clone(), btf, keep_strings)
    }
}

/// Incremental dedup: batches of new types deduplicated against the canonical set
/// kept so far (see the module doc for how it relates to one-shot dedup).
pub struct Incremental {
    engine: engine::Engine,
    base: Option<Arc<Btf>>,
    compat: Compat,
}

impl Incremental {
    /// Starts with an empty canonical set over `base` (None for whole BTF).
    pub fn new(base: Option<Arc<Btf>>, compat: Compat) -> Result<Incremental, DedupError> {
        Ok(Incremental {
            engine: engine::Engine::new(base.as_deref(), compat, true)?,
            base,
            compat,
        })
    }

    /// Deduplicates `batch` against the canonical set and keeps its new canonical
    /// types. `batch` is a BTF over the same base (whole if there is none); its ids
    /// and string offsets are its own.
    pub fn add(&mut self, batch: &Btf) -> Result<(), DedupError> {
        self.engine.add_batch(batch)
    }

    /// [`Incremental::add`] for one unit of an encoder that keeps one string section
    /// for every unit, holding each string once: `types` are numbered from the
    /// base's end on and name offsets into that section, `strings`' (whose end so
    /// far is the section's). The offsets are kept as they are (nothing is copied per string), so
    /// [`Incremental::kept_btf`] gives the kept types over the encoder's section, as
    /// a one-shot dedup of the whole stream keeps it. Returns the kept id of each
    /// type of the batch, in batch order: where whatever still refers to the batch's
    /// ids (saved function records, variables) must point now.
    pub fn add_encoded(
        &mut self,
        types: &[crate::btf::Type],
        strings: &Btf,
    ) -> Result<&[u32], DedupError> {
        let batch = self.preparer().prepare(types, engine::btf_keys(strings));
        self.add_prepared(batch, strings.str_end())
    }

    /// What [`Preparer::prepare`] needs of this dedup: a small value that any
    /// thread can prepare batches with, ahead of [`Incremental::add_prepared`].
    pub fn preparer(&self) -> Preparer {
        self.engine.preparer()
    }

    /// [`Incremental::add_encoded`] of a batch prepared by [`Preparer::prepare`]
    /// (with this dedup's [`Incremental::preparer`]): the same result, the same
    /// errors. `add_encoded(types, str_end)` is `add_prepared(prepare(types),
    /// str_end)`.
    pub fn add_prepared(
        &mut self,
        batch: PreparedBatch,
        str_end: u32,
    ) -> Result<&[u32], DedupError> {
        let s = self.engine.load_prepared(batch, str_end)?;
        self.engine.process(s)?;
        Ok(self.engine.last_kept())
    }

    /// The kept types (ids from the base's end on, as [`Incremental::add_encoded`]
    /// returned them) over `strings`' string section: the encoder's section, which
    /// names every kept type. Deduplicate it (with anything appended) with
    /// [`Incremental::final_pass`], not a plain one-shot dedup, which would merge
    /// kept types libbpf keeps. With room for `more` types to be appended.
    pub fn kept_btf(&self, strings: &Btf, more: usize) -> Result<Btf, DedupError> {
        self.kept_over(strings.endian(), strings.strings(), more)
    }

    /// The kept types as [`Incremental::kept_btf`] gives them, without a string
    /// section: for a caller that puts them over the encoder's section it holds
    /// already. Copying the section (2 MB on the corpus vmlinux) into the bytes
    /// and out again cost the serial end of a run two copies and their page faults.
    pub fn kept_types(&self, more: usize) -> Result<Vec<crate::btf::Type>, DedupError> {
        // The smallest section the reader accepts: names are not looked up.
        let strings: &[u8] = if self.base.is_some() { &[] } else { &[0] };
        Ok(self.kept_over(self.endian(), strings, more)?.into_types())
    }

    /// The kept types written over the string section `strings` and read back,
    /// with room for `more`.
    fn kept_over(&self, endian: Endian, strings: &[u8], more: usize) -> Result<Btf, DedupError> {
        let bytes = self
            .engine
            .to_bytes_with_strings(endian, &[], None, strings);
        crate::btf::read::parse_with_room(&bytes, self.base.clone(), more)
            .map_err(DedupError::Output)
    }

    /// The byte order of the base, or the machine's without one.
    fn endian(&self) -> Endian {
        self.base.as_ref().map_or(Endian::native(), |b| b.endian())
    }

    /// Number of types kept so far (not counting the base).
    pub fn len(&self) -> u32 {
        self.engine.own_types()
    }

    /// Whether nothing is kept yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kept set as it is, without the final pass.
    pub fn snapshot(&self) -> Result<Btf, DedupError> {
        let bytes = self.engine.to_bytes(self.endian(), &[], None);
        crate::btf::read::parse(&bytes, self.base.clone()).map_err(DedupError::Output)
    }

    /// What the final pass needs from the batches, to run it after this dedup is
    /// dropped (see [`FinalPass`]).
    pub fn final_pass(&self) -> FinalPass {
        FinalPass {
            base: self.base.clone(),
            compat: self.compat,
            kept: self.len(),
            base_resolved: self.engine.base_resolved().to_vec(),
        }
    }

    /// The final pass over the kept set (see [`FinalPass`]).
    pub fn finish(self) -> Result<Btf, DedupError> {
        let set = self.snapshot()?;
        let bytes = self.final_pass().dedup_bytes(&set)?;
        crate::btf::read::parse(&bytes, self.base.clone()).map_err(DedupError::Output)
    }
}

/// The final pass of an [`Incremental`] dedup: a one-shot dedup of a BTF whose first
/// own types are the kept set (more may follow, such as the function types an
/// encoder adds at the end), starting from the state the batches left, as libbpf's
/// one dedup would have it at that point:
///
/// * the base FWDs and enum FWDs the batches resolved to kept types stay resolved
///   (libbpf never undoes a resolution of a base type);
/// * a kept STRUCT/UNION/TYPEDEF is not compared with base types again: its batch
///   compared it with every base candidate as libbpf does, once. Over the kept set,
///   whose references already point into the base, a type kept because its check
///   was the first to need a base FWD resolved (libbpf's `hypot_adjust_canon`) is
///   identical to its base twin and would be merged, which libbpf does not do.
///
/// The kept types are still deduplicated among themselves, FWDs are resolved by
/// name and reference types follow, as before.
#[derive(Clone, Debug)]
pub struct FinalPass {
    base: Option<Arc<Btf>>,
    compat: Compat,
    kept: u32,
    base_resolved: Vec<(u32, u32)>,
}

impl FinalPass {
    /// The final pass over `btf` (the kept types first), to raw bytes as
    /// [`dedup_bytes`].
    pub fn dedup_bytes(&self, btf: &Btf) -> Result<Vec<u8>, DedupError> {
        self.check_base(btf)?;
        let mut e = engine::Engine::new(btf.base().map(|b| &**b), self.compat, false)?;
        let s = e.load_batch(btf)?;
        e.set_settled(self.kept, &self.base_resolved)?;
        e.process(s)?;
        Ok(e.to_bytes(btf.endian(), btf.header_extra(), btf.layout()))
    }

    /// [`FinalPass::dedup_bytes`] taking `btf` by value, as [`dedup_bytes_owned`].
    pub fn dedup_bytes_owned(&self, btf: Btf) -> Result<Vec<u8>, DedupError> {
        self.owned(btf, false)
    }

    /// [`FinalPass::dedup_bytes`] for an encoder's BTF, as
    /// [`dedup_bytes_owned_encoded`] (the string section is kept as it is): for the
    /// kept set of [`Incremental::add_encoded`] plus the encoder's function types.
    pub fn dedup_bytes_owned_encoded(&self, btf: Btf) -> Result<Vec<u8>, DedupError> {
        self.owned(btf, true)
    }

    fn owned(&self, btf: Btf, keep_strings: bool) -> Result<Vec<u8>, DedupError> {
        self.check_base(&btf)?;
        let e = engine::Engine::new(btf.base().map(|b| &**b), self.compat, false)?;
        load_process_write(e, btf, keep_strings, |e| {
            e.set_settled(self.kept, &self.base_resolved)
        })
    }

    /// The kept types of `btf` (its first own types, which the function types
    /// follow) prepared for [`FinalPass::begin`], on the thread that owns `btf`
    /// before anything is added to it: with its string section's end so far.
    pub fn prepare_kept(&self, btf: &Btf) -> Result<(PreparedBatch, u32), DedupError> {
        self.check_base(btf)?;
        let kept = btf
            .types()
            .get(..self.kept as usize)
            .ok_or(DedupError::BaseMismatch)?;
        let preparer = Preparer::for_base(btf.base_type_count(), self.compat);
        Ok((preparer.prepare(kept, btf_keys(btf)), btf.str_end()))
    }

    /// The final pass's passes before the reference pass over the kept types alone
    /// (`kept`, from [`FinalPass::prepare_kept`], with the section's end then), on
    /// any thread: they read no type added after the kept ones, since those are
    /// all of the reference pass or never merged (FUNC_PROTO, FUNC, DECL_TAG, VAR,
    /// DATASEC, and a tag's PTR or TYPE_TAG) and no kept type refers to them. The
    /// reference pass then takes the kept types too: it goes in id order, and they
    /// come first. The caller adds the function types meanwhile, then
    /// [`FinalStart::finish`].
    pub fn begin(self, kept: PreparedBatch, str_end: u32) -> Result<FinalStart, DedupError> {
        let mut engine = engine::Engine::new(self.base.as_deref(), self.compat, false)?;
        let s = engine.load_prepared(kept, str_end)?;
        engine.set_settled(self.kept, &self.base_resolved)?;
        engine.process_first(s)?;
        engine.process_refs_so_far(s)?;
        Ok(FinalStart {
            fin: self,
            engine,
            s,
        })
    }

    /// `btf` must be over the base the batches were (the kept ids refer to it).
    fn check_base(&self, btf: &Btf) -> Result<(), DedupError> {
        let same = match (&self.base, btf.base()) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a.type_count() == b.type_count(),
            _ => false,
        };
        if same {
            Ok(())
        } else {
            Err(DedupError::BaseMismatch)
        }
    }
}

/// A final pass begun on the kept types ([`FinalPass::begin`]).
pub struct FinalStart {
    fin: FinalPass,
    engine: engine::Engine,
    /// Where the kept types start among the engine's ids.
    s: u32,
}

impl FinalStart {
    /// The final pass over `btf`, the kept types it was begun on followed by the
    /// types added since: the same bytes as [`FinalPass::dedup_bytes_owned_encoded`]
    /// of it (which runs instead, from the start, should an added type be of a
    /// kind the first passes handle). On two threads where it can: a pass begun
    /// beside is a run's with several workers.
    pub fn finish(mut self, btf: Btf) -> Result<Vec<u8>, DedupError> {
        self.fin.check_base(&btf)?;
        // The pass was begun beside the functions' encoding, so the run has
        // several workers: the added types are prepared in two halves on two
        // threads, each half a batch of its own loaded in turn.
        let halves = {
            let added = btf
                .types()
                .get(self.fin.kept as usize..)
                .ok_or(DedupError::BaseMismatch)?;
            let preparer = self.engine.preparer();
            let (kept, half) = (self.fin.kept, added.len() / 2);
            let keys = btf_keys(&btf);
            let first = || preparer.prepare_span(added, 0..half, &keys, kept);
            std::thread::scope(|scope| {
                // Should no thread start, this one prepares both.
                let beside = std::thread::Builder::new().spawn_scoped(scope, first).ok();
                let second = preparer.prepare_span(added, half..added.len(), &keys, kept);
                let first = match beside {
                    Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                    None => first(),
                };
                [first, second]
            })
        };
        for p in halves {
            match self.engine.load_more(self.s, p, btf.str_end()) {
                Ok(()) => {}
                Err(DedupError::NotReferencesOnly) => {
                    return self.fin.dedup_bytes_owned_encoded(btf)
                }
                Err(e) => return Err(e),
            }
        }
        // As in the one-pass path, the types go once loaded, before the
        // reference pass's tables grow: freed on another thread meanwhile.
        let framing = Framing::of(&btf);
        let mut btf = btf;
        let types = std::mem::take(btf.types_mut());
        let strs = btf.into_strings();
        std::thread::scope(|scope| {
            // Should no thread start, the failed spawn drops them here.
            let _ = std::thread::Builder::new().spawn_scoped(scope, move || drop(types));
            self.engine.process_rest(self.s)
        })?;
        Ok(framing.bytes_with_strings(&self.engine, &strs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::*;

    fn int(b: &mut Btf) -> TypeId {
        let name = b.push_str(b"int");
        b.push_type(Type {
            name,
            kind: TypeKind::Int {
                size: 4,
                encoding: INT_SIGNED,
                offset: 0,
                bits: 32,
            },
        })
    }

    fn ptr(b: &mut Btf, to: TypeId) -> TypeId {
        b.push_type(Type {
            name: StrOffset::EMPTY,
            kind: TypeKind::Ptr(to),
        })
    }

    /// A struct with one member `m` of type `ty`.
    fn strukt(b: &mut Btf, name: &[u8], ty: TypeId) -> TypeId {
        let name = b.push_str(name);
        let m = b.push_str(b"m");
        b.push_type(Type {
            name,
            kind: TypeKind::Struct(Composite {
                size: 8,
                kflag: false,
                members: vec![Member {
                    name: m,
                    type_id: ty,
                    offset: 0,
                }],
            }),
        })
    }

    /// One CU's `struct A { struct B *m; }; struct B { struct A *m; };`.
    fn cycle_cu(b: &mut Btf) {
        let first = b.type_count() + 1;
        // ids: A, B, PTR->B, PTR->A
        strukt(b, b"A", TypeId(first + 2));
        strukt(b, b"B", TypeId(first + 3));
        ptr(b, TypeId(first + 1));
        ptr(b, TypeId(first));
    }

    fn names(b: &Btf) -> Vec<String> {
        b.types()
            .iter()
            .map(|t| format!("{}:{}", t.kind().name(), b.str_at(t.name)))
            .collect()
    }

    #[test]
    fn cycles_through_pointers_dedup_to_one_copy() {
        let mut b = Btf::new(None);
        cycle_cu(&mut b);
        cycle_cu(&mut b);
        cycle_cu(&mut b);
        let d = dedup(&b).unwrap();
        assert_eq!(names(&d), ["STRUCT:A", "STRUCT:B", "PTR:", "PTR:"]);
        assert_eq!(d.strings(), b"\0A\0m\0B\0");
    }

    #[test]
    fn fwd_resolves_to_the_unique_struct_of_its_name() {
        let mut b = Btf::new(None);
        let s = b.push_str(b"S");
        let fwd = b.push_type(Type {
            name: s,
            kind: TypeKind::Fwd { union: false },
        });
        ptr(&mut b, fwd);
        let i = int(&mut b);
        let st = strukt(&mut b, b"S", i);
        ptr(&mut b, st);
        let d = dedup(&b).unwrap();
        // The FWD goes; both pointers become one pointer to S.
        assert_eq!(names(&d), ["PTR:", "INT:int", "STRUCT:S"]);
        assert_eq!(d.types()[0].kind, TypeKind::Ptr(TypeId(3)));
    }

    #[test]
    fn enum_fwd_meets_a_full_enum64() {
        let mut b = Btf::new(None);
        let e = b.push_str(b"e");
        b.push_type(Type {
            name: e,
            kind: TypeKind::Enum {
                size: 4,
                signed: false,
                values: vec![],
            },
        });
        let v = b.push_str(b"V");
        b.push_type(Type {
            name: e,
            kind: TypeKind::Enum64 {
                size: 8,
                signed: false,
                values: vec![Enum64Value {
                    name: v,
                    value: 1 << 40,
                }],
            },
        });
        assert_eq!(names(&dedup(&b).unwrap()), ["ENUM64:e"]);
    }

    #[test]
    fn split_types_equal_to_base_types_go() {
        let mut base = Btf::new(None);
        cycle_cu(&mut base);
        // A base is deduplicated (its strings too: a split string is matched to the
        // base's first copy).
        let base = Arc::new(dedup(&base).unwrap());
        let mut split = Btf::new(Some(base.clone()));
        cycle_cu(&mut split);
        let i = int(&mut split);
        strukt(&mut split, b"A", i); // same name, other layout: kept
        let d = dedup(&split).unwrap();
        assert_eq!(names(&d), ["INT:int", "STRUCT:A"]);
        // Names already in the base are the base's; only "int" is new.
        assert_eq!(d.strings(), b"int\0");
        assert_eq!(d.types()[1].name, StrOffset(1));
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let mut b = Btf::new(None);
        ptr(&mut b, TypeId(9));
        assert!(matches!(dedup(&b), Err(DedupError::Invalid { id: 1, .. })));

        let mut b = Btf::new(None);
        b.push_type(Type {
            name: StrOffset(1000),
            kind: TypeKind::Float { size: 4 },
        });
        assert_eq!(
            dedup(&b).unwrap_err(),
            DedupError::BadString {
                id: 1,
                offset: 1000
            }
        );

        let mut b = Btf::new(None);
        ptr(&mut b, TypeId(2));
        ptr(&mut b, TypeId(1));
        assert!(matches!(dedup(&b), Err(DedupError::Loop { .. })));
    }

    /// `struct N` only as a FWD, `T { N *m; }`, and `TOP { T *m; }` for each of
    /// `tops`.
    fn n_only_declared(b: &mut Btf, tops: &[&[u8]]) {
        let n = b.push_str(b"N");
        let fwd = b.push_type(Type {
            name: n,
            kind: TypeKind::Fwd { union: false },
        });
        let p = ptr(b, fwd);
        let t = strukt(b, b"T", p);
        let p = ptr(b, t);
        for top in tops {
            strukt(b, top, p);
        }
    }

    /// The incremental dedup's result, final pass included, is one-shot dedup's
    /// of `all`, the same types in one BTF, byte for byte.
    fn assert_same_as_one_shot(inc: Incremental, all: &Btf) {
        assert_eq!(
            crate::btf::write::to_bytes(&inc.finish().unwrap()),
            crate::btf::write::to_bytes(&dedup(all).unwrap())
        );
    }

    /// A base holding `struct N` only as a FWD, and `T { N *m; }`, `R { T *m; }`,
    /// `Q { T *m; }`.
    fn base_with_fwd() -> Arc<Btf> {
        let mut b = Btf::new(None);
        n_only_declared(&mut b, &[b"R", b"Q"]);
        Arc::new(dedup(&b).unwrap())
    }

    /// One CU over [`base_with_fwd`] defining `struct N`: `top { T *m; }`, T, N.
    fn defines_n(b: &mut Btf, top: &[u8]) {
        let f = b.type_count() + 1;
        // ids: top, PTR->T, T, PTR->N, N, int
        strukt(b, top, TypeId(f + 1));
        ptr(b, TypeId(f + 2));
        strukt(b, b"T", TypeId(f + 3));
        ptr(b, TypeId(f + 4));
        strukt(b, b"N", TypeId(f + 5));
        int(b);
    }

    /// libbpf keeps the first split struct whose check needs the base FWD resolved
    /// (`R` here: identical to the base's once its references are remapped), resolves
    /// the FWD to the split `N` for good, and merges every later struct that reaches
    /// it (`Q`, and `R` of the third CU into the kept one). The batches and the final
    /// pass must give the same bytes.
    #[test]
    fn base_fwd_resolved_by_a_batch_stays_resolved() {
        let base = base_with_fwd();
        let tops: [&[u8]; 3] = [b"R", b"Q", b"R"];
        let mut all = Btf::new(Some(base.clone()));
        let mut inc = Incremental::new(Some(base.clone()), Compat::Upstream).unwrap();
        for top in tops {
            defines_n(&mut all, top);
            let mut cu = Btf::new(Some(base.clone()));
            defines_n(&mut cu, top);
            inc.add(&cu).unwrap();
        }
        assert_eq!(
            names(&dedup(&all).unwrap()),
            ["STRUCT:R", "PTR:", "STRUCT:N", "INT:int"]
        );
        assert_same_as_one_shot(inc, &all);
    }

    /// A batch holding `struct N` only as a FWD, with `T { N *m; }` and
    /// `R { T *m; }`, then batches defining N (see [`defines_n`]). The first of
    /// those needs the kept FWD resolved: its `R`, like the base's case above,
    /// is kept, and the FWD resolved to its N stays resolved for the later batches
    /// (the old rule put it back after each batch), so that their `T` merges with
    /// the kept one at once. The final pass must give one-shot dedup's bytes.
    #[test]
    fn kept_fwd_resolved_by_a_batch_stays_resolved() {
        let mut first = Btf::new(None);
        n_only_declared(&mut first, &[b"R"]);
        let mut all = first.clone();
        let mut inc = Incremental::new(None, Compat::Upstream).unwrap();
        inc.add(&first).unwrap();
        let mut kept = vec![inc.len()];
        for top in [b"R", b"Q", b"R"] {
            defines_n(&mut all, top);
            let mut cu = Btf::new(None);
            defines_n(&mut cu, top);
            inc.add(&cu).unwrap();
            kept.push(inc.len());
        }
        // The second batch keeps R (its check needed the FWD), N, PTR->N and int;
        // the third only Q, its T being the first batch's through the resolved
        // FWD (with the FWD put back: a second T and a pointer to it as well).
        assert_eq!(kept, [5, 9, 10, 10]);
        assert_same_as_one_shot(inc, &all);
    }

    /// An enum FWD kept before its full enum (with `struct S { enum e m; }` each
    /// time), then units with the full enum: the batch that resolves the kept
    /// enum FWD keeps that resolution for the later batches too, and the final
    /// pass gives one-shot dedup's bytes.
    #[test]
    fn kept_enum_fwd_resolved_by_a_batch_stays_resolved() {
        fn unit(b: &mut Btf, full: bool) {
            let e = b.push_str(b"e");
            let values = if full {
                let v = b.push_str(b"V");
                vec![EnumValue { name: v, value: 1 }]
            } else {
                vec![]
            };
            let en = b.push_type(Type {
                name: e,
                kind: TypeKind::Enum {
                    size: 4,
                    signed: false,
                    values,
                },
            });
            strukt(b, b"S", en);
        }
        let mut all = Btf::new(None);
        let mut inc = Incremental::new(None, Compat::Upstream).unwrap();
        for full in [false, true, true, false, true] {
            unit(&mut all, full);
            let mut cu = Btf::new(None);
            unit(&mut cu, full);
            inc.add(&cu).unwrap();
        }
        assert_same_as_one_shot(inc, &all);
    }

    /// The final pass begun on the kept types alone (`FinalPass::begin`), the
    /// function types added after: the bytes of the pass run whole, with the
    /// one-pass fallback when an added type is of a kind the first passes handle.
    #[test]
    fn final_pass_begun_on_the_kept_types_gives_the_same_bytes() {
        let mut inc = Incremental::new(None, Compat::Upstream).unwrap();
        for _ in 0..3 {
            let mut cu = Btf::new(None);
            cycle_cu(&mut cu);
            int(&mut cu);
            inc.add(&cu).unwrap();
        }
        let fin = inc.final_pass();
        let kept = inc.snapshot().unwrap();
        let int_id = (1..=kept.type_count())
            .map(TypeId)
            .find(|&id| matches!(kept.get(id).map(|t| &t.kind), Some(TypeKind::Int { .. })))
            .unwrap();
        // The added types are prepared in two halves: with a pointer first that
        // refers into the second half, the halves must take each other's ids.
        for (late_struct, forward) in [(false, false), (true, false), (false, true)] {
            let (p, str_end) = fin.prepare_kept(&kept).unwrap();
            let begun = fin.clone().begin(p, str_end).unwrap();
            let mut b = kept.clone();
            if forward {
                // To g's prototype: after this pointer come f's prototype and
                // FUNC, then g's prototype, the fourth type past the kept ones.
                let to = TypeId(b.type_count() + 4);
                ptr(&mut b, to);
            }
            // Two equal prototypes over kept types, a FUNC for each.
            let x = b.push_str(b"x");
            for name in [&b"f"[..], b"g"] {
                let proto = b.push_type(Type {
                    name: StrOffset::EMPTY,
                    kind: TypeKind::FuncProto {
                        ret: int_id,
                        params: vec![Param {
                            name: x,
                            type_id: TypeId(1),
                        }],
                    },
                });
                let name = b.push_str(name);
                b.push_type(Type {
                    name,
                    kind: TypeKind::Func { proto, linkage: 1 },
                });
            }
            if late_struct {
                strukt(&mut b, b"late", int_id);
            }
            let whole = fin.dedup_bytes_owned_encoded(b.clone()).unwrap();
            assert_eq!(
                begun.finish(b).unwrap(),
                whole,
                "late struct: {late_struct}, forward: {forward}"
            );
        }
        // Nothing added (no functions): two empty halves.
        let (p, str_end) = fin.prepare_kept(&kept).unwrap();
        let begun = fin.clone().begin(p, str_end).unwrap();
        let whole = fin.dedup_bytes_owned_encoded(kept.clone()).unwrap();
        assert_eq!(begun.finish(kept).unwrap(), whole);
    }

    #[test]
    fn incremental_keeps_only_new_types() {
        let mut cu = Btf::new(None);
        cycle_cu(&mut cu);
        let mut inc = Incremental::new(None, Compat::Upstream).unwrap();
        inc.add(&cu).unwrap();
        assert_eq!(inc.len(), 4);
        inc.add(&cu).unwrap();
        assert_eq!(inc.len(), 4);
        let mut other = Btf::new(None);
        int(&mut other);
        inc.add(&other).unwrap();
        assert_eq!(inc.len(), 5);
        let mut all = Btf::new(None);
        cycle_cu(&mut all);
        cycle_cu(&mut all);
        int(&mut all);
        assert_same_as_one_shot(inc, &all);
    }
}
