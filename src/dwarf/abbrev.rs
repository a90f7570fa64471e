//! Abbreviation tables, read straight from `.debug_abbrev`, and the [`Plan`]s made
//! of their declarations, kept from unit to unit ([`PlanCache`]).
//!
//! Compilers give each unit a table of its own, but the declarations in them recur:
//! the corpus vmlinux's 2401 units declare 366,089 abbreviations, and only 9,303
//! distinct ones. A worker builds the plan of a declaration once, when it first
//! meets its bytes (tag, children flag, attribute specifications: all of it but the
//! code), and a unit's table is then a list of plans by code. Reading the tables
//! with gimli and building each unit's plans again took 3.4% of a run's
//! instructions; this takes 1.5% fewer on the corpus vmlinux (cachegrind, -j1).

use super::die::{Cur, DieError, UnitEnc};
use super::error::DwarfErrorKind;
use super::plan::{MemberPlan, Plan};
use crate::hash::FxHasher;
use gimli::constants::DW_FORM_implicit_const;
use gimli::{DwAt, DwForm, DwTag};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

type Result<T> = std::result::Result<T, DieError>;
type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// One attribute specification of a declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    pub name: DwAt,
    pub form: DwForm,
    /// The value of a `DW_FORM_implicit_const`.
    pub implicit: Option<i64>,
}

/// One abbreviation declaration, without its code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decl {
    pub tag: DwTag,
    pub has_children: bool,
    pub specs: Vec<Spec>,
}

/// Codes below this are looked up in a unit's dense table.
const DENSE_CODES: u64 = 1 << 16;
/// No declaration has this code.
const NONE: u32 = u32::MAX;
/// The cache is emptied when it holds this many plans, before a unit's table; the
/// common declarations are met again at once. With no bound, the corpus vmlinux's
/// 9,303 plans (with their declarations) cost 5 MB of peak RSS at -j1; with this
/// one, 0.5-0.8 MB more than gimli's tables did, for 1.007x the instructions of
/// no bound.
const MAX_PLANS: usize = 1024;

/// The plans of the declarations a worker has met, by their bytes and the sizes
/// of the unit that declared them (what a plan depends on besides the
/// declaration). The keys are copies: comparing a declaration with bytes of the
/// input seen units ago would fault those pages of `.debug_abbrev` back in after
/// the release behind the walk (9 MB more peak RSS on the corpus vmlinux).
#[derive(Default)]
pub struct PlanCache {
    by_bytes: FxHashMap<Box<[u8]>, u32>,
    plans: Vec<Plan>,
    /// The last unit's table, its room kept for the next one.
    dense: Vec<Head>,
    /// The key being looked up: the sizes, then the declaration's bytes.
    key: Vec<u8>,
}

/// One unit's table: the plan of each abbreviation code.
pub struct Plans<'c> {
    cache: &'c PlanCache,
    /// The table's bytes (on from its first code).
    data: &'c [u8],
    dense: &'c [Head],
    far: FxHashMap<u64, Head>,
}

/// What the walk reads of a plan at every DIE, by code in a unit's table: a
/// unit's few hundred codes take a few KB, which stay in the first-level cache,
/// where the plans themselves (64 bytes each, a unit's among the worker's
/// thousand) were a cache miss at many DIEs.
#[derive(Clone, Copy, Debug)]
pub struct Head {
    /// The DIE tag.
    pub tag: DwTag,
    /// Whether children follow.
    pub has_children: bool,
    /// The DIE's size when every form is fixed-size.
    pub fixed: Option<u32>,
    /// For the common member abbreviation, where its attributes lie.
    pub member: Option<MemberPlan>,
    /// The plan's index in the cache ([`NONE`]: no such code).
    plan: u32,
}

const NO_HEAD: Head = Head {
    tag: DwTag(0),
    has_children: false,
    fixed: None,
    member: None,
    plan: NONE,
};

impl PlanCache {
    /// The table at `offset` of `section` (`.debug_abbrev`), for a unit of `enc`'s
    /// sizes, with the plans its declarations need built; `needed` selects the
    /// attributes the plans decode.
    pub fn table<'c>(
        &'c mut self,
        section: &'c [u8],
        offset: u64,
        enc: &UnitEnc<'_>,
        needed: fn(DwAt) -> bool,
    ) -> Result<Plans<'c>> {
        let sizes = {
            let v = enc.version.to_le_bytes();
            [enc.offset_size, enc.addr_size, v[0], v[1]]
        };
        let bad = |what: &str| {
            DwarfErrorKind::Other(format!(
                "bad abbreviation table at .debug_abbrev+{offset:#x}: {what}"
            ))
        };
        let data = usize::try_from(offset)
            .ok()
            .and_then(|o| section.get(o..))
            .ok_or_else(|| bad("offset past the section's end"))?;
        if self.plans.len() >= MAX_PLANS {
            self.plans.clear();
            self.by_bytes.clear();
        }
        let mut c = Cur::new(data, true);
        self.dense.clear();
        let mut far = FxHashMap::default();
        loop {
            let code = c.uleb().map_err(|_| bad("truncated"))?;
            if code == 0 {
                break;
            }
            let start = c.pos();
            skip_decl(&mut c).map_err(bad)?;
            self.key.clear();
            self.key.extend_from_slice(&sizes);
            self.key.extend_from_slice(&data[start..c.pos()]);
            let index = match self.by_bytes.get(self.key.as_slice()) {
                Some(&i) => i,
                None => self.build(enc, needed),
            };
            let p = &self.plans[index as usize];
            let head = Head {
                tag: p.tag,
                has_children: p.has_children,
                fixed: p.fixed,
                member: p.member,
                plan: index,
            };
            let fresh = if let Some(i) = dense_slot(code) {
                if i >= self.dense.len() {
                    self.dense.resize(i + 1, NO_HEAD);
                }
                std::mem::replace(&mut self.dense[i], head).plan == NONE
            } else {
                far.insert(code, head).is_none()
            };
            if !fresh {
                return Err(bad(&format!("abbreviation code {code} declared twice")));
            }
        }
        Ok(Plans {
            cache: self,
            data,
            dense: &self.dense,
            far,
        })
    }

    /// Builds the plan of the declaration in `key` (after the sizes; checked by
    /// [`skip_decl`]).
    #[cold]
    #[inline(never)]
    fn build(&mut self, enc: &UnitEnc<'_>, needed: fn(DwAt) -> bool) -> u32 {
        let decl = read_decl(&self.key[4..]).expect("a declaration skip_decl checked");
        let plan = Plan::new(&decl, enc, needed);
        // Fewer plans than declarations, which are bytes of the input.
        let index = u32::try_from(self.plans.len()).expect("fewer than 4 G declarations");
        self.plans.push(plan);
        self.by_bytes.insert(self.key.as_slice().into(), index);
        index
    }
}

impl<'c> Plans<'c> {
    /// What the walk reads first of abbreviation `code`'s plan.
    #[inline]
    pub fn head(&self, code: u64) -> Result<&Head> {
        let head = if let Some(i) = dense_slot(code) {
            self.dense.get(i)
        } else {
            self.far.get(&code)
        };
        match head {
            Some(h) if h.plan != NONE => Ok(h),
            _ => Err(DwarfErrorKind::UnknownAbbrev(code)),
        }
    }

    /// The plan `head` stands for.
    #[inline]
    pub fn plan(&self, head: &Head) -> &'c Plan {
        &self.cache.plans[head.plan as usize]
    }

    /// The plan of abbreviation `code`.
    #[inline]
    pub fn get(&self, code: u64) -> Result<&'c Plan> {
        let head = self.head(code)?;
        Ok(self.plan(head))
    }

    /// The declaration of abbreviation `code`, read again from the table (for the
    /// unit's root DIE: the cache keeps plans, not declarations).
    pub fn decl(&self, code: u64) -> Result<Decl> {
        let mut c = Cur::new(self.data, true);
        loop {
            match c.uleb()? {
                0 => return Err(DwarfErrorKind::UnknownAbbrev(code)),
                k => {
                    let start = c.pos();
                    skip_decl(&mut c).map_err(|_| DwarfErrorKind::Truncated)?;
                    if k == code {
                        return read_decl(&self.data[start..c.pos()]);
                    }
                }
            }
        }
    }
}

/// The slot of `code` in a unit's dense table, if it has one.
#[inline]
fn dense_slot(code: u64) -> Option<usize> {
    // Below DENSE_CODES, which fits usize.
    #[allow(clippy::cast_possible_truncation)]
    (code < DENSE_CODES).then_some(code as usize)
}

/// Moves `c` past one declaration after its code, checking it as gimli does: a
/// tag other than 0, a children flag of 0 or 1, attribute specifications with a
/// name and a form (each below 2^16), ended by two zeros.
fn skip_decl(c: &mut Cur<'_>) -> std::result::Result<(), &'static str> {
    let eof = |_| "truncated";
    match c.uleb().map_err(eof)? {
        0 => return Err("abbreviation tag 0"),
        t if t > u64::from(u16::MAX) => return Err("tag too large"),
        _ => {}
    }
    if c.u8().map_err(eof)? > 1 {
        return Err("children flag neither 0 nor 1");
    }
    loop {
        let name = c.uleb().map_err(eof)?;
        let form = c.uleb().map_err(eof)?;
        match (name, form) {
            (0, 0) => return Ok(()),
            (0, _) => return Err("attribute name 0"),
            (_, 0) => return Err("attribute form 0"),
            (n, f) if n > u64::from(u16::MAX) || f > u64::from(u16::MAX) => {
                return Err("attribute name or form too large")
            }
            _ => {}
        }
        if form == u64::from(DW_FORM_implicit_const.0) {
            c.sleb().map_err(eof)?;
        }
    }
}

/// The declaration `bytes` holds (its tag on, without its code).
fn read_decl(bytes: &[u8]) -> Result<Decl> {
    let mut c = Cur::new(bytes, true);
    let u16_of = |v: u64| u16::try_from(v).map_err(|_| DwarfErrorKind::Truncated);
    let tag = DwTag(u16_of(c.uleb()?)?);
    let has_children = c.u8()? == 1;
    let mut specs = Vec::new();
    loop {
        let name = DwAt(u16_of(c.uleb()?)?);
        let form = DwForm(u16_of(c.uleb()?)?);
        if name.0 == 0 {
            break;
        }
        let implicit = if form == DW_FORM_implicit_const {
            Some(c.sleb()?)
        } else {
            None
        };
        specs.push(Spec {
            name,
            form,
            implicit,
        });
    }
    Ok(Decl {
        tag,
        has_children,
        specs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(offset_size: u8) -> UnitEnc<'static> {
        UnitEnc {
            little: true,
            offset_size,
            addr_size: 8,
            version: 5,
            debug_str: b"",
            line_str: b"",
            str_offsets: &[],
            str_offsets_base: 0,
            place: Default::default(),
            unit_len: 0x1000,
        }
    }

    /// A table as gimli reads it: the same declarations by code, the same errors.
    fn both(bytes: &'static [u8]) -> (Result<Vec<(u64, Decl)>>, bool) {
        let mut cache = PlanCache::default();
        let ours = cache
            .table(bytes, 0, &enc(4), super::super::attrs::is_needed)
            .map(|p| {
                (1..300)
                    .filter_map(|code| p.decl(code).ok().map(|d| (code, d)))
                    .collect::<Vec<_>>()
            });
        let sec = gimli::DebugAbbrev::new(bytes, gimli::LittleEndian);
        let gimli_ok = match sec.abbreviations(gimli::DebugAbbrevOffset(0)) {
            Ok(a) => {
                if let Ok(ours) = &ours {
                    for (code, d) in ours {
                        let g = a.get(*code).expect("gimli has the code");
                        assert_eq!(g.tag(), d.tag);
                        assert_eq!(g.has_children(), d.has_children);
                        let gs: Vec<Spec> = g
                            .attributes()
                            .iter()
                            .map(|s| Spec {
                                name: s.name(),
                                form: s.form(),
                                implicit: s.implicit_const_value(),
                            })
                            .collect();
                        assert_eq!(gs, d.specs);
                    }
                    assert_eq!((1..300).filter(|&c| a.get(c).is_some()).count(), ours.len());
                }
                true
            }
            Err(_) => false,
        };
        (ours, gimli_ok)
    }

    #[test]
    fn tables_read_as_gimli_reads_them() {
        // 1: base_type {name strp, byte_size data1}; 2 (children): structure_type
        // {name strp, implicit_const byte_size -3}; 300 (two-byte code): member.
        let good: &[u8] = &[
            1, 0x24, 0, 0x03, 0x0e, 0x0b, 0x0b, 0, 0, //
            2, 0x13, 1, 0x03, 0x0e, 0x0b, 0x21, 0x7d, 0, 0, //
            0xac, 0x02, 0x0d, 0, 0x49, 0x13, 0, 0, //
            0,
        ];
        let (ours, gimli_ok) = both(good);
        assert!(gimli_ok);
        let ours = ours.unwrap();
        assert_eq!(ours.len(), 2, "codes below 300 here");
        assert_eq!(ours[1].1.specs[1].implicit, Some(-3));
        let bad: [&'static [u8]; 6] = [
            &[1, 0x24],                               // truncated
            &[1, 0, 0, 0, 0, 0],                      // tag 0
            &[1, 0x24, 2, 0, 0, 0],                   // children flag 2
            &[1, 0x24, 0, 0, 0x0b, 0, 0],             // attribute name 0
            &[1, 0x24, 0, 0x0b, 0, 0],                // form 0
            &[1, 0x24, 0, 0, 0, 1, 0x24, 0, 0, 0, 0], // code 1 twice
        ];
        for b in bad {
            let (ours, gimli_ok) = both(b);
            assert!(ours.is_err() && !gimli_ok, "{b:?}");
        }
    }

    /// A declaration met again (in another unit's table, under another code) gets
    /// the plan built the first time; one of other sizes gets its own.
    #[test]
    fn plans_are_built_once_per_declaration_and_sizes() {
        let t1: &[u8] = &[1, 0x24, 0, 0x03, 0x0e, 0, 0, 0];
        let t2: &[u8] = &[7, 0x24, 0, 0x03, 0x0e, 0, 0, 0];
        let mut cache = PlanCache::default();
        let needed = super::super::attrs::is_needed;
        // The fixed size of `code`'s plan in `table` read with `offset_size`, and the
        // number of plans the cache holds after.
        let mut fixed = |table, code, offset_size| {
            let f = cache.table(table, 0, &enc(offset_size), needed).unwrap();
            let size = f.get(code).unwrap().fixed;
            (size, cache.plans.len())
        };
        assert_eq!(fixed(t1, 1, 4), (Some(4), 1));
        assert_eq!(
            fixed(t2, 7, 4),
            (Some(4), 1),
            "met again under another code"
        );
        assert_eq!(fixed(t1, 1, 8), (Some(8), 2), "other sizes, another plan");
        assert!(
            cache.table(t1, 9, &enc(4), needed).is_err(),
            "offset past the end"
        );
    }

    /// A cache that reaches its bound is emptied before the next table, and then
    /// holds only that table's plans.
    #[test]
    fn the_cache_is_bounded() {
        let uleb = |mut v: usize, out: &mut Vec<u8>| loop {
            let byte = u8::try_from(v & 0x7f).unwrap();
            v >>= 7;
            if v == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        };
        // MAX_PLANS distinct base types: each with one attribute of its own name.
        let mut big = Vec::new();
        for k in 1..=MAX_PLANS {
            uleb(k, &mut big);
            big.extend([0x24, 0]);
            uleb(k, &mut big);
            big.extend([0x0b, 0, 0]);
        }
        big.push(0);
        let small: &[u8] = &[1, 0x24, 0, 0x03, 0x0e, 0, 0, 0];
        let mut cache = PlanCache::default();
        let needed = super::super::attrs::is_needed;
        let plans = cache.table(&big, 0, &enc(4), needed).unwrap();
        assert_eq!(plans.get(MAX_PLANS as u64).unwrap().fixed, Some(1));
        assert_eq!(cache.plans.len(), MAX_PLANS);
        let plans = cache.table(small, 0, &enc(4), needed).unwrap();
        assert_eq!(plans.get(1).unwrap().fixed, Some(4));
        assert_eq!(cache.plans.len(), 1);
    }
}
