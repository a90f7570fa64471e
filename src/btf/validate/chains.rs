//! Memoised walks along modifier chains and nested arrays, for the validator.
//!
//! Checking each type by walking its chain to the end is quadratic in the chain's
//! length: 200,000 CONSTs in a row (40,000 already) took minutes to validate. Here
//! every type's chain end, array size and type-tag order are computed once, in time
//! linear in the number of types and without recursion, with the same answers the
//! per-type walks gave (loops and dangling ids are "broken").

use super::*;

/// `end` of a dangling id or a modifier loop.
pub(crate) const BROKEN: u32 = u32::MAX;
const UNKNOWN: u32 = u32::MAX - 1;
const BUSY: u32 = u32::MAX - 2;

/// Sizes above this are all "too large"; it keeps products of u32 factors in a u64.
const CAP: u64 = 1 << 33;

/// What the arrays from one point inwards contribute to an outer array's size, as
/// the kernel's `__btf_resolve_size` multiplies from the outside in: the product of
/// the element counts up to the first zero count (times the element size if there
/// is no zero), capped; or broken (a loop, a dangling id, an element without size).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Suffix {
    Unknown,
    Busy,
    Broken,
    Ok { zero: bool, product: u64 },
}

/// The memo: one entry per type id of the whole chain (base and own), id 0 = void.
pub(crate) struct Chains {
    /// The first non-modifier type on the modifier chain from each id (the id
    /// itself for a non-modifier; 0 for void), or [`BROKEN`].
    end: Vec<u32>,
    /// For array ids, their [`Suffix`].
    arrays: Vec<Suffix>,
    /// The target's pointer size (a pointer element's size).
    ptr_size: u32,
}

impl Chains {
    /// A memo of no type, for checks that resolve none: every id reads as broken.
    pub(crate) fn empty(ptr_size: u32) -> Chains {
        Chains {
            end: Vec::new(),
            arrays: Vec::new(),
            ptr_size,
        }
    }

    /// The memo for `btf`, whose pointers are `ptr_size` bytes.
    pub(crate) fn new(btf: &Btf, ptr_size: u32) -> Chains {
        let count = btf.type_count() as usize;
        let mut c = Chains {
            end: vec![UNKNOWN; count + 1],
            arrays: vec![Suffix::Unknown; count + 1],
            ptr_size,
        };
        c.end[0] = 0;
        let mut path = Vec::new();
        for start in 1..=btf.type_count() {
            if c.end[start as usize] != UNKNOWN {
                continue;
            }
            let mut cur = start;
            let result = loop {
                let Some(t) = btf.get(TypeId(cur)) else {
                    break if cur == 0 { 0 } else { BROKEN };
                };
                match c.end[cur as usize] {
                    UNKNOWN => {}
                    BUSY => break BROKEN,
                    r => break r,
                }
                match modifier_target(t) {
                    Some(next) => {
                        c.end[cur as usize] = BUSY;
                        path.push(cur);
                        cur = next.0;
                    }
                    None => {
                        c.end[cur as usize] = cur;
                        break cur;
                    }
                }
            };
            for p in path.drain(..) {
                c.end[p as usize] = result;
            }
        }
        for start in 1..=btf.type_count() {
            if c.arrays[start as usize] == Suffix::Unknown {
                if let Some(TypeKind::Array { .. }) = btf.get(TypeId(start)).map(|t| &t.kind) {
                    c.fill_array(btf, start, &mut path);
                }
            }
        }
        c
    }

    /// The end of the modifier chain from `id`: 0 (void), [`BROKEN`] or a type id.
    pub(crate) fn end(&self, id: TypeId) -> u32 {
        self.end.get(id.0 as usize).copied().unwrap_or(BROKEN)
    }

    /// Total byte size of array `id` as the kernel computes it, or None if it
    /// overflows u32, loops, dangles or its element has no size.
    pub(crate) fn array_size(&self, id: TypeId) -> Option<u32> {
        match self.arrays.get(id.0 as usize)? {
            Suffix::Ok { zero, product } => {
                if *product > u64::from(u32::MAX) {
                    None
                } else if *zero {
                    Some(0)
                } else {
                    u32::try_from(*product).ok()
                }
            }
            _ => None,
        }
    }

    /// The suffix of an element type that is not itself an array (after modifiers).
    fn leaf(&self, btf: &Btf, elem: TypeId) -> Result<Suffix, u32> {
        let e = self.end(elem);
        if e == 0 || e == BROKEN {
            return Ok(Suffix::Broken);
        }
        let Some(t) = btf.get(TypeId(e)) else {
            return Ok(Suffix::Broken);
        };
        let size = match &t.kind {
            TypeKind::Array { .. } => return Err(e),
            TypeKind::Ptr(_) => Some(self.ptr_size),
            TypeKind::Datasec { .. } => None,
            k => k.size(),
        };
        Ok(match size {
            Some(s) => Suffix::Ok {
                zero: false,
                product: s as u64,
            },
            None => Suffix::Broken,
        })
    }

    /// Computes the suffix of array `start` and of every array it nests.
    fn fill_array(&mut self, btf: &Btf, start: u32, path: &mut Vec<u32>) {
        path.clear();
        let mut cur = start;
        let mut result = loop {
            match self.arrays[cur as usize] {
                Suffix::Unknown => {}
                Suffix::Busy => break Suffix::Broken,
                done => break done,
            }
            let Some(TypeKind::Array { elem_type, .. }) = btf.get(TypeId(cur)).map(|t| &t.kind)
            else {
                break Suffix::Broken;
            };
            self.arrays[cur as usize] = Suffix::Busy;
            path.push(cur);
            match self.leaf(btf, *elem_type) {
                Ok(s) => break s,
                Err(inner) => cur = inner,
            }
        };
        for &p in path.iter().rev() {
            let Some(TypeKind::Array { nelems, .. }) = btf.get(TypeId(p)).map(|t| &t.kind) else {
                unreachable!("only arrays are on the path");
            };
            result = match result {
                Suffix::Ok { .. } if *nelems == 0 => Suffix::Ok {
                    zero: true,
                    product: 1,
                },
                Suffix::Ok { zero, product } => Suffix::Ok {
                    zero,
                    product: product.saturating_mul(*nelems as u64).min(CAP),
                },
                _ => Suffix::Broken,
            };
            self.arrays[p as usize] = result;
        }
    }
}

/// The next type of a modifier (TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG).
fn modifier_target(t: &Type) -> Option<TypeId> {
    t.kind.modifier_target()
}

/// For each type id: whether the modifier chain from it has a TYPE_TAG after a
/// non-tag modifier (`btf_check_type_tags`' rule: TYPE_TAGs come first), computed for
/// all ids at once. On a modifier loop, every node of the loop sees the whole loop.
pub(crate) fn bad_type_tag_order(btf: &Btf) -> Vec<bool> {
    #[derive(Clone, Copy)]
    enum St {
        Unknown,
        Busy(usize),
        Done { tag_ahead: bool, bad: bool },
    }
    let count = btf.type_count() as usize;
    let mut st = vec![St::Unknown; count + 1];
    let mut path: Vec<u32> = Vec::new();
    let is_tag = |id: u32| {
        matches!(
            btf.get(TypeId(id)).map(|t| &t.kind),
            Some(TypeKind::TypeTag { .. })
        )
    };
    for start in 1..=btf.type_count() {
        if !matches!(st[start as usize], St::Unknown) {
            continue;
        }
        path.clear();
        let mut cur = start;
        let (mut tag_ahead, mut bad) = loop {
            let Some(next) = btf.get(TypeId(cur)).and_then(modifier_target) else {
                break (false, false);
            };
            match st[cur as usize] {
                St::Done { tag_ahead, bad } => break (tag_ahead, bad),
                St::Busy(pos) => {
                    let cycle = &path[pos..];
                    let tags = cycle.iter().any(|&c| is_tag(c));
                    let others = cycle.iter().any(|&c| !is_tag(c));
                    let v = St::Done {
                        tag_ahead: tags,
                        bad: tags && others,
                    };
                    for &c in cycle {
                        st[c as usize] = v;
                    }
                    path.truncate(pos);
                    break (tags, tags && others);
                }
                St::Unknown => {
                    st[cur as usize] = St::Busy(path.len());
                    path.push(cur);
                    cur = next.0;
                }
            }
        };
        for &p in path.iter().rev() {
            let tag = is_tag(p);
            bad = bad || (!tag && tag_ahead);
            tag_ahead = tag_ahead || tag;
            st[p as usize] = St::Done { tag_ahead, bad };
        }
    }
    st.iter()
        .map(|s| matches!(s, St::Done { bad: true, .. }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-type walks the memo replaces, kept as the reference.
    fn naive_end(btf: &Btf, mut id: TypeId) -> u32 {
        let mut steps = 0;
        loop {
            if id.0 == 0 {
                return 0;
            }
            let Some(t) = btf.get(id) else { return BROKEN };
            match modifier_target(t) {
                Some(n) => {
                    steps += 1;
                    if steps > btf.type_count() {
                        return BROKEN;
                    }
                    id = n;
                }
                None => return id.0,
            }
        }
    }

    fn naive_array_size(btf: &Btf, mut id: TypeId) -> Option<u32> {
        let mut nelems: u32 = 1;
        let mut steps = 0u32;
        loop {
            steps += 1;
            if steps > btf.type_count() + 1 {
                return None;
            }
            let t = btf.get(id)?;
            match &t.kind {
                TypeKind::Array {
                    elem_type,
                    nelems: n,
                    ..
                } => {
                    nelems = nelems.checked_mul(*n)?;
                    id = *elem_type;
                }
                k if modifier_target(t).is_some() => {
                    id = modifier_target(t).unwrap_or_else(|| unreachable!("{k:?}"))
                }
                TypeKind::Ptr(_) => return nelems.checked_mul(8),
                TypeKind::Datasec { .. } => return None,
                k => return nelems.checked_mul(k.size()?),
            }
        }
    }

    fn naive_bad_tags(btf: &Btf, id: u32) -> bool {
        let Some(t) = btf.get(TypeId(id)) else {
            return false;
        };
        if modifier_target(t).is_none() {
            return false;
        }
        let mut in_tags = matches!(t.kind, TypeKind::TypeTag { .. });
        let mut cur = t;
        let mut steps = 0u32;
        while let Some(next) = modifier_target(cur) {
            if matches!(cur.kind, TypeKind::TypeTag { .. }) {
                if !in_tags {
                    return true;
                }
            } else {
                in_tags = false;
            }
            steps += 1;
            if steps > btf.type_count() {
                return false;
            }
            match btf.get(next) {
                Some(nt) => cur = nt,
                None => return false,
            }
        }
        false
    }

    /// Random graphs of modifiers, tags, arrays (counts 0, small, huge), pointers,
    /// ints, FWDs and DATASECs, with loops and dangling ids: memo = naive walks.
    #[test]
    #[allow(clippy::cast_possible_truncation)] // random numbers below small bounds
    fn memo_agrees_with_naive_walks() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..20_000 {
            let n = 1 + rnd(12) as u32;
            let mut b = Btf::new(None);
            for _ in 0..n {
                let r = TypeId(rnd(n as u64 + 2) as u32);
                let kind = match rnd(10) {
                    0 => TypeKind::int(32, 0),
                    1 => TypeKind::Ptr(r),
                    2 => TypeKind::Const(r),
                    3 => TypeKind::Typedef(r),
                    4 => TypeKind::TypeTag {
                        type_id: r,
                        kflag: false,
                    },
                    5 => TypeKind::Fwd { union: false },
                    6 => TypeKind::Datasec {
                        size: 8,
                        entries: Vec::new(),
                    },
                    _ => TypeKind::Array {
                        elem_type: r,
                        index_type: TypeId(1),
                        nelems: [0, 1, 3, 1 << 16, 1 << 20, u32::MAX][rnd(6) as usize],
                    },
                };
                b.push_type(Type {
                    name: StrOffset::EMPTY,
                    kind,
                });
            }
            let c = Chains::new(&b, 8);
            let bad = bad_type_tag_order(&b);
            for id in 0..=n + 1 {
                let id = TypeId(id);
                assert_eq!(c.end(id), naive_end(&b, id), "end {id} in {b:?}");
                if let Some(Type {
                    kind: TypeKind::Array { .. },
                    ..
                }) = b.get(id)
                {
                    assert_eq!(
                        c.array_size(id),
                        naive_array_size(&b, id),
                        "size {id} in {b:?}"
                    );
                }
                if id.0 <= n {
                    assert_eq!(
                        bad[id.0 as usize],
                        naive_bad_tags(&b, id.0),
                        "tags {id} in {b:?}"
                    );
                }
            }
        }
    }
}
