//! Converting DWARF units to BTF, as pahole v1.31 converts them.
//!
//! Each unit is encoded on its own, on the worker that parsed it ([`encode_unit`]),
//! into an owned [`EncodedUnit`]: its types with unit-local ids (`TypeId(1)` is its
//! first type), its strings in a unit-local table in first-use order, and the owned
//! records of its functions and variables. The one thing a unit cannot know, the
//! array index type (chosen in unit order), it refers to as [`INDEX_TYPE`]. What
//! spans units lives in [`EncoderState`] (the BTF being built and its string index)
//! and [`FuncEncoder`] (every unit's function records, merged and emitted after the
//! last unit); the pipeline merges each unit into them in unit order.
//!
//! Modules: `types` (type DIEs), `layout` (sizes and alignments), `candidates` (which
//! subprograms are functions, and their records), `locations` and `abi` (the
//! parameter location analysis), `vars`, `merge` and `emit` (after the last unit),
//! `strings`.

mod abi;
mod candidates;
mod emit;
mod features;
mod layout;
mod locations;
mod merge;
mod skips;
pub mod strings;
mod true_sig;
mod types;
mod vars;

pub use candidates::{FuncRules, UnitFuncs};
pub use features::{supported_list, FeatureArgs, Features, UnsupportedFeature};
pub use merge::FuncEncoder;
pub use skips::{FuncSkip, SkipReason};
pub use types::IndexUse;
pub use vars::PendingVar;

use crate::btf::{Btf, StrOffset, Type, TypeId, TypeKind, VarSecInfo};
use crate::dwarf::types::{CuTypes, Name};
use std::sync::Arc;
use strings::{StrIndex, UnitInterner, UnitStrings};

/// Marks a DIE that is not encoded itself (its references follow its target).
const ALIAS: u32 = u32::MAX;

/// The local id by which a unit's arrays refer to the array index type, which is
/// chosen in unit order (see [`IndexUse`]).
pub const INDEX_TYPE: TypeId = TypeId(u32::MAX);

/// The low 32 bits of `v`: what pahole keeps where it stores a DWARF value in a
/// 32-bit field (array dimensions, enumerator values without `enum64`).
#[allow(clippy::cast_possible_truncation)] // masked to 32 bits first
fn low32(v: u64) -> u32 {
    (v & 0xffff_ffff) as u32
}

/// What `EncodedUnit::types[0]` holds as the unit leaves its worker: a free slot
/// before the unit's first type, where the ordered part puts the one type a unit's
/// batch may need ahead of its own (see `pipeline::ordered`), so that the types are
/// never moved for it.
pub const LEAD_SLOT: Type = Type {
    name: StrOffset::EMPTY,
    kind: TypeKind::Fwd { union: false },
};

/// An index or count among one unit's DIEs (functions, parameters, decl tags) as a
/// u32: every DIE takes bytes of `.debug_info`, whose unit offsets are 32-bit in the
/// DWARF kernels are built with, so there are fewer than 2^32.
#[allow(clippy::cast_possible_truncation)] // see above
fn idx32(n: usize) -> u32 {
    debug_assert!(u32::try_from(n).is_ok());
    n as u32
}

/// An error encoding a unit: what pahole would also refuse.
#[derive(Debug)]
pub struct EncodeError(pub String);

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where types and strings go: a unit's own output on a worker, or the run's BTF.
pub(crate) trait TypeSink {
    /// Interns bytes the encoder built (by content).
    fn intern_owned(&mut self, s: &[u8]) -> StrOffset;
    /// Appends a type; returns its id.
    fn push(&mut self, t: Type) -> TypeId;
}

/// Appends a DECL_TAG.
pub(crate) fn push_decl_tag(st: &mut impl TypeSink, value: StrOffset, target: TypeId, idx: i32) {
    st.push(Type {
        name: value,
        kind: TypeKind::DeclTag {
            type_id: target,
            component_idx: idx,
            kflag: false,
        },
    });
}

/// Where a unit's types go as the encoder makes them: local id `l` is the `l`-th
/// type taken, after a lead slot that a new sink already holds ([`LEAD_SLOT`] in a
/// `Vec<Type>`). The encoder only appends; what becomes of the types (kept as
/// they are, or flattened and hashed for a dedup as they come) is the caller's.
pub trait UnitTypeSink {
    /// Room for `n` more types of about `words` BTF words in all.
    fn reserve(&mut self, n: usize, words: usize);
    /// Takes the unit's next type; `strings` is the unit's table, which holds
    /// every string the type names. By reference: the encoder reuses the type's
    /// lists for its next type.
    fn take(&mut self, t: &Type, strings: &UnitInterner);
    /// Number of types taken, the lead slot included.
    fn count(&self) -> usize;
}

impl UnitTypeSink for Vec<Type> {
    fn reserve(&mut self, n: usize, _words: usize) {
        self.reserve_exact(n);
    }

    fn take(&mut self, t: &Type, _strings: &UnitInterner) {
        self.push(t.clone());
    }

    fn count(&self) -> usize {
        self.len()
    }
}

/// A unit's output while it is encoded: its types and its string table.
pub(crate) struct Out<'s> {
    types: &'s mut dyn UnitTypeSink,
    strs: &'s mut UnitInterner,
}

impl TypeSink for Out<'_> {
    fn intern_owned(&mut self, s: &[u8]) -> StrOffset {
        self.strs.intern_owned(s)
    }

    fn push(&mut self, t: Type) -> TypeId {
        self.push_ref(&t)
    }
}

impl Out<'_> {
    /// [`TypeSink::push`] that leaves the type with the caller.
    fn push_ref(&mut self, t: &Type) -> TypeId {
        self.types.take(t, self.strs);
        TypeId(idx32(self.types.count() - 1))
    }
}

/// What encoding any unit needs: the same for every unit, shared by the workers.
pub struct UnitContext {
    features: Features,
    little_endian: bool,
    /// The units are parts of pahole's one merged unit (an LTO build, see
    /// `dwarf::lto`): what pahole adds after that unit's types waits for the last
    /// part (see [`FuncEncoder`]).
    merged: bool,
    /// The file's functions and variables (None: types only).
    rules: Option<FuncRules>,
}

impl UnitContext {
    /// The context of a run with `features` over a file of the given byte order;
    /// `rules`: its ELF symbols, to select functions and variables.
    pub fn new(
        features: Features,
        little_endian: bool,
        merged: bool,
        rules: Option<FuncRules>,
    ) -> UnitContext {
        UnitContext {
            features,
            little_endian,
            merged,
            rules,
        }
    }
}

/// A worker's buffers, reused from one unit to the next.
#[derive(Default)]
pub struct Scratch {
    /// The local ids of the unit's type DIEs.
    ids: types::UnitIds,
    strings: UnitInterner,
    funcs: candidates::FuncScratch,
}

impl Scratch {
    /// A worker's buffers when `workers` run at once (see
    /// [`UnitInterner::for_workers`]), its names also looked up in `run_cache`,
    /// the run's address cache ([`UnitInterner::with_run_cache`]).
    pub fn for_workers(workers: usize, run_cache: Arc<strings::AddrCache>) -> Scratch {
        Scratch {
            strings: UnitInterner::for_workers(workers).with_run_cache(run_cache),
            ..Scratch::default()
        }
    }

    /// Finds the strings of `unit` (encoded with this scratch) that earlier units
    /// gave the run, in the run's address cache: see [`UnitInterner::learn_known`].
    pub fn learn_known<S>(&mut self, unit: &mut EncodedUnit<S>, cache: &strings::AddrCache) {
        self.strings.learn_known(&mut unit.strings, cache);
    }
}

/// A decl tag of a type waiting for the end of a merged unit: (value, tagged type,
/// component index).
pub type DeferredTag = (Box<[u8]>, TypeId, i32);

/// A unit's records that outlive it, in its local ids and strings.
#[derive(Default, Debug)]
pub struct UnitRecords {
    /// Its candidate functions.
    pub funcs: UnitFuncs,
    /// Its VARs' DATASEC entries: (section, entry).
    pub vars: Vec<(u32, VarSecInfo)>,
    /// In a merged unit: its type decl tags (value, tagged type, component index)
    /// and its variables, which pahole adds after every part's types.
    pub tags: Vec<DeferredTag>,
    /// See `tags`.
    pub pending_vars: Vec<PendingVar>,
}

/// One unit, encoded (see the module doc).
#[derive(Debug)]
pub struct EncodedUnit<S = Vec<Type>> {
    /// The lead slot ([`LEAD_SLOT`]), then the unit's types in pahole's order:
    /// those of its DIEs, its decl tags, its VARs (with their decl tags). Local id
    /// `l` is the `l`-th type; names are local strings.
    pub types: S,
    /// The unit's strings: local string `k` is `StrOffset(k)` (from 1 on).
    pub strings: UnitStrings,
    /// How the unit uses the array index type.
    pub index: IndexUse,
    /// Its functions and variables.
    pub records: UnitRecords,
}

/// Encodes unit `cu`: its types, then (with the file's rules) its functions and
/// variables, as pahole adds them, each string interned in that order.
pub fn encode_unit(
    cu: &CuTypes<'_>,
    ctx: &UnitContext,
    sc: &mut Scratch,
) -> Result<EncodedUnit, EncodeError> {
    encode_unit_into(cu, ctx, sc, vec![LEAD_SLOT])
}

/// [`encode_unit`] with the types going into `types`, a sink that holds only its
/// lead slot.
pub fn encode_unit_into<S: UnitTypeSink + 'static>(
    cu: &CuTypes<'_>,
    ctx: &UnitContext,
    sc: &mut Scratch,
    mut types: S,
) -> Result<EncodedUnit<S>, EncodeError> {
    let mut out = Out {
        types: &mut types,
        strs: &mut sc.strings,
    };
    let result = encode_into(cu, ctx, &mut sc.ids, &mut sc.funcs, &mut out);
    // Taken even after an error, so that the next unit starts afresh.
    let strings = sc.strings.take();
    let (index, records) = result?;
    Ok(EncodedUnit {
        types,
        strings,
        index,
        records,
    })
}

fn encode_into(
    cu: &CuTypes<'_>,
    ctx: &UnitContext,
    ids: &mut types::UnitIds,
    fsc: &mut candidates::FuncScratch,
    out: &mut Out<'_>,
) -> Result<(IndexUse, UnitRecords), EncodeError> {
    let (index, tags) = types::encode_types(cu, ctx, ids, out)?;
    let mut records = UnitRecords {
        tags,
        ..UnitRecords::default()
    };
    let Some(rules) = &ctx.rules else {
        return Ok((index, records));
    };
    let enc = ids.unit(cu);
    // Functions and variables come right after the unit's types (pahole's order).
    records.funcs = candidates::save_funcs(&enc, rules, fsc, out, ctx.merged);
    let vars = rules.vars.select_cu(&enc, &rules.syms)?;
    if ctx.merged {
        records.pending_vars = vars;
    } else {
        records.vars = vars.iter().map(|v| vars::emit_var(v, out)).collect();
    }
    Ok((index, records))
}

/// What the encoder keeps from one unit to the next: the BTF being built (every
/// unit's types, or with an incremental dedup the types kept) and its string index.
pub struct EncoderState {
    btf: Btf,
    strings: StrIndex,
    features: Features,
}

impl EncoderState {
    /// A new encoder producing BTF over `base` (split BTF for modules).
    pub fn new(base: Option<Arc<Btf>>, features: Features, little_endian: bool) -> EncoderState {
        // pahole adds the kind layout section to base BTF only: split BTF shares its
        // base's.
        let layout = (features.layout && base.is_none()).then(crate::btf::layout::libbpf_table);
        let mut btf = Btf::new(base);
        btf.set_layout(layout);
        // libbpf ≥ 1.8 (pahole 1.31's) writes a 32-byte header: the classic 24 bytes
        // and two zero `layout` words. Dedup keeps the input's header length.
        btf.set_header_extra(vec![0; 8]);
        btf.set_endian(if little_endian {
            crate::btf::Endian::Little
        } else {
            crate::btf::Endian::Big
        });
        EncoderState {
            strings: StrIndex::with_base_of(&btf),
            btf,
            features,
        }
    }

    /// The BTF built so far.
    pub fn btf(&self) -> &Btf {
        &self.btf
    }

    /// Mutable access to the BTF being built.
    pub fn btf_mut(&mut self) -> &mut Btf {
        &mut self.btf
    }

    /// The features in effect.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// Interns a name into the BTF's string section.
    pub fn intern(&mut self, name: Name<'_>) -> StrOffset {
        self.strings.intern(&mut self.btf, name)
    }

    /// Interns an owned copy of a name (one kept for later, not the input's
    /// bytes): see [`strings::StrIndex::intern_owned`].
    pub fn intern_owned(&mut self, name: &[u8]) -> StrOffset {
        self.strings.intern_owned(&mut self.btf, name)
    }

    /// The string index's address cache, which workers read to find the strings
    /// earlier units gave the run ([`UnitInterner::learn_known`]).
    pub fn addr_cache(&self) -> Arc<strings::AddrCache> {
        self.strings.addr_cache()
    }

    /// Merges strings `range` of a unit's table into the BTF's strings, in order;
    /// appends the offset of each to `out`.
    pub fn merge_strings(
        &mut self,
        unit: &UnitStrings,
        range: std::ops::Range<usize>,
        out: &mut Vec<StrOffset>,
    ) {
        self.strings.merge(&mut self.btf, unit, range, out);
    }

    /// Ends encoding and returns the (not yet deduplicated) BTF.
    pub fn finish(self) -> Btf {
        self.btf
    }
}

impl TypeSink for EncoderState {
    fn intern_owned(&mut self, s: &[u8]) -> StrOffset {
        EncoderState::intern_owned(self, s)
    }

    fn push(&mut self, t: Type) -> TypeId {
        self.btf.push_type(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dwarf::types::{DieRef, MemberDie, RefKind, TypeDie};
    use gimli::constants::DW_ATE_signed;

    /// A hand-built unit: `typedef struct s { int a; } s_t;` plus an atomic alias
    /// and a pointer to it, an enum with a negative value and a 2×3 array.
    #[test]
    fn encodes_a_small_unit() {
        let members = [MemberDie {
            name: Name::new(b"a"),
            ty: DieRef(10),
            bit_offset: 0,
            bit_size: 0,
            old_offset: 0,
            has_old_offset: false,
            byte_size: 0,
        }];
        let values = [crate::dwarf::types::EnumeratorDie {
            name: Name::new(b"NEG"),
            value: -1,
        }];
        let dims = [2u64, 3];
        let types = [
            TypeDie::Base {
                name: Name::new(b"int"),
                byte_size: 4,
                bit_size: 32,
                encoding: DW_ATE_signed.0,
            },
            TypeDie::Composite {
                is_union: false,
                declaration: false,
                name: Name::new(b"s"),
                size: 4,
                members: &members,
            },
            TypeDie::Ref {
                kind: RefKind::Typedef,
                name: Name::new(b"s_t"),
                ty: DieRef(20),
            },
            TypeDie::Ref {
                kind: RefKind::Alias,
                name: Name::EMPTY,
                ty: DieRef(10),
            },
            TypeDie::Ref {
                kind: RefKind::Pointer,
                name: Name::EMPTY,
                ty: DieRef(40),
            },
            TypeDie::Enum {
                name: Name::new(b"e"),
                size: 4,
                ty: DieRef(10),
                values: &values,
            },
            TypeDie::Array {
                ty: DieRef(10),
                dims: &dims,
            },
        ];
        let cu = CuTypes {
            offsets: vec![10, 20, 30, 40, 50, 60, 70],
            buckets: &[],
            types: types.to_vec(),
            decl_tags: Vec::new(),
            language: 0x1d,
            address_size: 8,
            ..CuTypes::empty(0, 8)
        };
        let ctx = UnitContext::new(Features::from_list("default"), true, false, None);
        let unit = encode_unit(&cu, &ctx, &mut Scratch::default()).unwrap();
        assert_eq!(unit.index.own_int, Some(TypeId(1)));
        assert!(unit.index.arrays);
        assert_eq!(unit.index.own_types, 6);
        assert_eq!(
            unit.strings.len(),
            6,
            "int, s, a, s_t, e, NEG: {:?}",
            unit.strings
        );
        let kinds: Vec<_> = unit.types[1..].iter().map(|t| t.kind.clone()).collect();
        assert_eq!(kinds.len(), 6, "{kinds:?}");
        assert_eq!(kinds[3], TypeKind::Ptr(TypeId(1)), "atomic follows to int");
        assert!(
            matches!(&kinds[4], TypeKind::Enum { signed: true, values, .. } if values[0].value == u32::MAX)
        );
        assert_eq!(
            kinds[5],
            TypeKind::Array {
                elem_type: TypeId(1),
                index_type: INDEX_TYPE,
                nelems: 6
            }
        );
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;
    use crate::dwarf::types::{DieRef, MemberDie, TypeDie};

    fn one_member(bit_offset: u64, bit_size: u32) -> Result<(), EncodeError> {
        let members = [MemberDie {
            name: Name::new(b"m"),
            ty: DieRef::VOID,
            bit_offset,
            bit_size,
            old_offset: 0,
            has_old_offset: false,
            byte_size: 0,
        }];
        let types = [TypeDie::Composite {
            is_union: false,
            declaration: false,
            name: Name::new(b"s"),
            size: 64,
            members: &members,
        }];
        let cu = CuTypes {
            offsets: vec![10],
            buckets: &[],
            types: types.to_vec(),
            decl_tags: Vec::new(),
            language: 0,
            address_size: 8,
            ..CuTypes::empty(0, 8)
        };
        let ctx = UnitContext::new(Features::default(), true, false, None);
        encode_unit(&cu, &ctx, &mut Scratch::default()).map(drop)
    }

    #[test]
    fn bitfields_beyond_the_offset_word_are_refused() {
        assert!(one_member(8, 3).is_ok());
        assert!(one_member(3, 0).is_err(), "bit offset without a size");
        assert!(one_member(0, 300).is_err(), "size over 255");
        assert!(one_member(1 << 24, 3).is_err(), "offset over 24 bits");
        assert!(
            one_member(1 << 24, 0).is_ok(),
            "plain member: offset word is 32 bits"
        );
    }
}
