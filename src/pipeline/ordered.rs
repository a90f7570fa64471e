//! The ordered part of a run: each encoded unit, in unit order, merged into what
//! spans units. Its strings go into the run's string section (in the order the unit
//! first used them, so the section is the one a serial encoder would build); its
//! types (with a dedup, as its worker prepared them: only the words holding ids and
//! strings are rewritten here) get their ids (appended to the run's BTF, or
//! deduplicated against the types kept so far, which gives each its kept id); then
//! its function and variable
//! records are renumbered to those ids and strings and appended to the run's
//! functions. The array index type, the one type shared across units, is chosen
//! here, as pahole chooses it.

use crate::btf::{StrOffset, Type, TypeId, TypeKind};
use crate::dedup::{Incremental, Lead, LocalBatch, PreparedBatch, Preparer};
use crate::dwarf::types::Name;
use crate::encode::strings::{UnitInterner, UnitStrings};
use crate::encode::{
    EncodedUnit, EncoderState, FuncEncoder, IndexUse, UnitRecords, UnitTypeSink, INDEX_TYPE,
};
use crate::timing::{Busy, Timings};
use std::sync::{Arc, OnceLock};

/// `f`, counted as dedup time by `--time`.
fn busy<R>(t: Option<&Timings>, f: impl FnOnce() -> R) -> R {
    match t {
        Some(t) => t.busy(Busy::Dedup, f),
        None => f(),
    }
}

/// The array index type, once a unit has given one.
enum Index {
    /// Its id in the run's BTF (every unit's types kept there).
    Id(TypeId),
    /// With an incremental dedup, its INT: a copy leads each later unit's types, so
    /// that their arrays refer to a type of their own batch (the copy equals a kept
    /// type, so the dedup merges it away).
    Int(Type),
}

/// What the token holder keeps from one unit to the next.
pub(super) struct Ordered {
    pub state: EncoderState,
    /// The incremental dedup (whole BTF), or none: every unit's types stay in
    /// `state`'s BTF.
    pub inc: Option<Incremental>,
    index: Option<Index>,
    /// The units are parts of one merged unit (an LTO build).
    merged: bool,
    /// Scratch: the run's offset of each of the unit's strings.
    strs: Vec<StrOffset>,
    /// Where `--time` counts the dedup's busy time.
    timings: Option<&'static Timings>,
    /// The lead slot of every batch once the index type is known, for the
    /// workers ([`ready_flat`]).
    lead: Arc<OnceLock<Lead>>,
}

impl Ordered {
    pub fn new(
        state: EncoderState,
        inc: Option<Incremental>,
        merged: bool,
        timings: Option<&'static Timings>,
        lead: Arc<OnceLock<Lead>>,
    ) -> Ordered {
        Ordered {
            state,
            inc,
            index: None,
            merged,
            strs: Vec::new(),
            timings,
            lead,
        }
    }

    /// Merges the next unit in unit order (see the module doc). With an incremental
    /// dedup, the unit's types are the batch its worker prepared ([`ready_flat`]);
    /// without, the types as encoded ([`ready`]).
    pub fn add(&mut self, unit: ReadyUnit, funcs: &mut FuncEncoder) -> Result<(), String> {
        let ReadyUnit {
            types,
            strings,
            index: uses,
            records,
        } = unit;
        let known = self.index.is_some();
        // pahole adds an `int` after the types of the first unit with arrays and no
        // `int` of its own, if no earlier unit had one.
        let add_int = !known && uses.own_int.is_none() && uses.arrays;
        if add_int && self.merged {
            // pahole's merged unit takes the first `int` of any part, or adds one
            // after every part's types: not known until the last part.
            return Err(
                "LTO build: arrays come before the first 'int' type, whose place in \
                 pahole's merged unit is not known yet: not supported"
                    .into(),
            );
        }
        let lead = u32::from(known && self.inc.is_some());
        let own = uses.own_types;
        // The position in the unit's batch of local id `l` (not void, not the index).
        let pos = move |l: u32| l - 1 + lead + u32::from(add_int && l > own);
        // Where the index type is in the batch, if it is there.
        let index_pos = if lead == 1 {
            Some(0)
        } else if known {
            None
        } else if let Some(k) = uses.own_int {
            Some(pos(k.0))
        } else if add_int {
            Some(own)
        } else {
            None
        };

        // Strings, in the unit's first-use order (the added `int`'s name right after
        // those of the unit's types, as pahole adds it).
        self.strs.clear();
        let n = strings.len();
        self.state
            .merge_strings(&strings, 0..uses.own_strings.min(n), &mut self.strs);
        let int_name = add_int.then(|| self.state.intern(Name::new(b"int")));
        self.state
            .merge_strings(&strings, uses.own_strings.min(n)..n, &mut self.strs);

        // The batch: the unit's types in the run's ids and strings.
        let first = if self.inc.is_some() {
            self.state.btf().first_id().0
        } else {
            self.state.btf().type_count() + 1
        };
        let outside = match &self.index {
            Some(Index::Id(id)) => *id,
            _ => TypeId::VOID,
        };
        let batch_id = |l: TypeId| match l {
            TypeId::VOID => TypeId::VOID,
            INDEX_TYPE => index_pos.map_or(outside, |p| TypeId(first + p)),
            l => TypeId(first + pos(l.0)),
        };
        let strs = &self.strs;
        let s = |o: &mut StrOffset| {
            if o.0 != 0 {
                *o = strs[o.0 as usize - 1];
            }
        };
        let rewrite = |t: &mut Type| {
            s(&mut t.name);
            t.kind.for_each_str_mut(s);
            t.kind.for_each_ref_mut(|r| *r = batch_id(*r));
        };
        // Once per run: after the unit's own types (local ids 1..=own).
        let int = int_name.map(|name| Type {
            name,
            kind: TypeKind::int(32, crate::btf::INT_SIGNED),
        });
        let new_index = index_pos.filter(|_| !known);

        match (&mut self.inc, types) {
            (Some(inc), types) => {
                let state = &self.state;
                let keys = crate::dedup::btf_keys(state.btf());
                let id = |x: u32| batch_id(TypeId(x)).0;
                let string = |o: u32| strs[o as usize - 1].0;
                let (batch, own_int) = match types {
                    UnitTypes::Encoded(_) => {
                        return Err("internal error: a unit not prepared for the run's dedup".into())
                    }
                    // Filled on the worker but for the strings new to the run.
                    UnitTypes::Filled { mut batch, pending } => {
                        if lead != 1 {
                            return Err("internal error: a unit's batch filled before \
                                 the array index type was known"
                                .into());
                        }
                        batch.finish_strings(&pending, string);
                        (*batch, None)
                    }
                    UnitTypes::Prepared { local, own_int } => {
                        // The unit's types as the worker prepared them, spliced
                        // around the index INT's copy (the lead slot) and the added
                        // `int`, with their ids and strings rewritten to the batch's.
                        let local = *local;
                        let lead_int = match (lead, &self.index) {
                            (1, Some(Index::Int(t))) => Some(t),
                            _ => None,
                        };
                        // The usual unit: the index INT's copy in the lead slot,
                        // then the unit's types, rewritten where they lie. Else (a
                        // unit before the index type is known, or the one that adds
                        // the `int`) spliced.
                        let local = match (lead_int, &int) {
                            (Some(t), None) => {
                                local.into_prepared(inc.preparer(), t, &keys, id, string)
                            }
                            _ => Err(Box::new(local)),
                        };
                        let batch = match local {
                            Ok(batch) => batch,
                            Err(local) => {
                                // The unit's types are the local batch's 1..=n.
                                let n = u32::try_from(local.len().saturating_sub(1))
                                    .map_err(|_| "too many types")?;
                                let total = lead as usize + n as usize + usize::from(int.is_some());
                                // The local records with the lead slot's, and one
                                // more INT's (four words).
                                let words = local.words_len() + 4;
                                let mut b = inc.preparer().builder(total, words);
                                if let Some(t) = lead_int {
                                    b.push_type(t, &keys);
                                }
                                b.push_local(&local, 1..own.min(n) + 1, id, string);
                                if let Some(t) = &int {
                                    b.push_type(t, &keys);
                                }
                                b.push_local(&local, own.min(n) + 1..n + 1, id, string);
                                b.finish()
                            }
                        };
                        (batch, own_int)
                    }
                };
                drop(strings);
                let str_end = state.btf().str_end();
                let kept = busy(self.timings, || inc.add_prepared(batch, str_end))
                    .map_err(|e| format!("dedup: {e}"))?;
                let kept_id = |l: TypeId| match l {
                    TypeId::VOID => TypeId::VOID,
                    l => TypeId(kept.get(pos(l.0) as usize).copied().unwrap_or(u32::MAX)),
                };
                funcs.add_unit(records, kept_id, strs);
                if new_index.is_some() {
                    // The unit's own `int`, or the added one.
                    let t = match own_int {
                        Some(mut t) => {
                            rewrite(&mut t);
                            Some(t)
                        }
                        None => int,
                    };
                    if let Some(t) = &t {
                        // Later units' workers fill their batches' lead slot.
                        if let Some(l) = Lead::new(t, &crate::dedup::btf_keys(self.state.btf())) {
                            let _ = self.lead.set(l);
                        }
                    }
                    self.index = t.map(Index::Int);
                }
            }
            (None, UnitTypes::Prepared { .. } | UnitTypes::Filled { .. }) => {
                return Err(
                    "internal error: a unit prepared for a dedup the run does not have".into(),
                )
            }

            (None, UnitTypes::Encoded(mut types)) => {
                drop(strings);
                for t in &mut types[1..] {
                    rewrite(t);
                }
                if let Some(int) = int {
                    types.insert(own as usize + 1, int);
                }
                if let Some(p) = new_index {
                    self.index = Some(Index::Id(TypeId(first + p)));
                }
                let btf = self.state.btf_mut();
                for t in types.into_iter().skip(1) {
                    btf.push_type(t);
                }
                funcs.add_unit(records, batch_id, strs);
            }
        }
        Ok(())
    }
}

/// An encoded unit as the token holder merges it.
pub(super) struct ReadyUnit {
    types: UnitTypes,
    strings: UnitStrings,
    index: IndexUse,
    records: UnitRecords,
}

/// A unit's types as the token holder takes them.
enum UnitTypes {
    /// As encoded: without a dedup, they are appended to the run's BTF.
    Encoded(Vec<Type>),
    /// Prepared for the incremental dedup by the worker, which keeps of the encoded
    /// types only the unit's first `int` (should it become the array index type):
    /// the batch is all the dedup reads, and a large unit's types would otherwise
    /// stay alive beside it until the unit is merged.
    Prepared {
        local: Box<LocalBatch>,
        own_int: Option<Type>,
    },
    /// Prepared by the worker once the array index type was known: the lead slot
    /// filled, ids rewritten to the batch's, and strings to the run's but for
    /// those at `pending`, which no earlier unit had given the run.
    Filled {
        batch: Box<PreparedBatch>,
        pending: Vec<u32>,
    },
}

/// A unit's types flattened and hashed for the dedup as the encoder makes them (on
/// the worker, so that the unit's types are never held as `Type`s), and its base
/// types (INT, FLOAT) as they are: the unit's first `int` may become the array
/// index type.
pub(super) struct Flattening {
    batch: LocalBatch,
    /// (local id, type) of each base type, kept only while the run's array index
    /// type is not known (see [`ready_flat`]); None once it is.
    bases: Option<Vec<(u32, Type)>>,
}

impl Flattening {
    /// A unit's sink for the dedup `p` prepares batches for; `lead`: the run's
    /// array index type, if already known.
    pub fn new(p: &Preparer, lead: Option<&Lead>) -> Flattening {
        Flattening {
            batch: p.start_local(0, 0),
            bases: lead.is_none().then(Vec::new),
        }
    }
}

impl UnitTypeSink for Flattening {
    fn reserve(&mut self, n: usize, words: usize) {
        self.batch.reserve(n, words);
    }

    fn take(&mut self, t: &Type, strings: &UnitInterner) {
        if let Some(bases) = &mut self.bases {
            if matches!(t.kind, TypeKind::Int { .. } | TypeKind::Float { .. }) {
                let id = u32::try_from(self.batch.len()).expect("a unit's types have u32 ids");
                bases.push((id, t.clone()));
            }
        }
        self.batch.push(t, &|o| strings.key(o));
    }

    fn count(&self) -> usize {
        self.batch.len()
    }
}

/// A unit encoded into a [`Flattening`] for `p`'s dedup, as the token holder takes
/// it. Once the run's array index type is known (`lead`), every later unit's batch
/// has it in its lead slot and ids that do not depend on earlier units (a batch
/// numbers its types from the base's last on): the worker then fills the batch
/// whole, but for the strings no earlier unit gave the run.
pub(super) fn ready_flat(
    unit: EncodedUnit<Flattening>,
    p: &Preparer,
    lead: Option<&Lead>,
) -> ReadyUnit {
    let EncodedUnit {
        types: Flattening { batch, bases },
        strings,
        index,
        records,
    } = unit;
    let types = match lead {
        Some(lead) => {
            // As `Ordered::add` numbers a unit's types when its lead slot holds
            // the index type's copy.
            let first = p.first_id();
            let id = |x: u32| if x == INDEX_TYPE.0 { first } else { first + x };
            match batch.into_prepared_with(*p, lead, id, |o| strings.known(o)) {
                Ok((batch, pending)) => UnitTypes::Filled {
                    batch: Box::new(batch),
                    pending,
                },
                Err(local) => UnitTypes::Prepared {
                    local,
                    own_int: None,
                },
            }
        }
        None => {
            // A unit started before the index type was known kept its base types.
            let own_int = index.own_int.and_then(|k| {
                bases
                    .into_iter()
                    .flatten()
                    .find(|(id, _)| *id == k.0)
                    .map(|(_, t)| t)
            });
            UnitTypes::Prepared {
                local: Box::new(batch),
                own_int,
            }
        }
    };
    ReadyUnit {
        types,
        strings,
        index,
        records,
    }
}

/// `unit` as encoded, for a run without a dedup.
pub(super) fn ready(unit: EncodedUnit) -> ReadyUnit {
    let EncodedUnit {
        types,
        strings,
        index,
        records,
    } = unit;
    ReadyUnit {
        types: UnitTypes::Encoded(types),
        strings,
        index,
        records,
    }
}
