//! Tests of the unit tables, the run's index and its address cache.

use super::*;

/// A run's string section, into which a test merges units' tables whole.
struct Run {
    btf: Btf,
    idx: StrIndex,
}

impl Run {
    fn new() -> Run {
        Run {
            btf: Btf::new(None),
            idx: StrIndex::default(),
        }
    }

    /// Merges `t` whole, then has `u` (the interner that gave it) learn the
    /// offsets found, as a worker does; returns each entry's offset.
    fn merge_learned(&mut self, u: &mut UnitInterner, t: &mut UnitStrings) -> Vec<StrOffset> {
        let mut offs = Vec::new();
        self.idx.merge(&mut self.btf, t, 0..t.len(), &mut offs);
        u.learn_known(t, &self.idx.addr_cache());
        offs
    }

    /// Has `u` intern `names` as each of `count` units in turn, every unit merged
    /// and learned; returns the last unit's offsets. From the second unit on, the
    /// trail holds the names with their offsets in the run.
    fn units_learned(
        &mut self,
        u: &mut UnitInterner,
        names: &[Name<'_>],
        count: usize,
    ) -> Vec<StrOffset> {
        let mut offs = Vec::new();
        for _ in 0..count {
            for &n in names {
                u.intern(n);
            }
            let mut t = u.take();
            offs = self.merge_learned(u, &mut t);
        }
        offs
    }
}

/// A section of `count` names of one length (the NULs `name` gives them
/// included), and the name at each index.
struct Numbered {
    sec: Vec<u8>,
    stride: usize,
}

impl Numbered {
    fn new(count: usize, name: impl Fn(usize) -> String) -> Numbered {
        let stride = name(0).len();
        let sec = (0..count)
            .flat_map(|i| {
                let n = name(i);
                assert_eq!(n.len(), stride, "names of one length");
                n.into_bytes()
            })
            .collect();
        Numbered { sec, stride }
    }

    fn at(&self, i: usize) -> Name<'_> {
        Name::new(&self.sec[i * self.stride..])
    }
}

#[test]
fn interns_once() {
    let mut btf = Btf::new(None);
    let mut idx = StrIndex::default();
    let sec = b"int\0long\0int\0";
    let a = idx.intern(&mut btf, Name::new(&sec[0..]));
    let b = idx.intern(&mut btf, Name::new(&sec[4..]));
    assert_eq!(idx.intern(&mut btf, Name::new(&sec[0..])), a);
    assert_eq!(idx.intern(&mut btf, Name::new(&sec[9..])), a);
    assert_eq!(idx.intern(&mut btf, Name::new(b"int")), a);
    assert_ne!(a, b);
    assert_eq!(idx.intern(&mut btf, Name::new(&sec[3..])), StrOffset::EMPTY);
    assert_eq!(btf.strings(), b"\0int\0long\0");
}

/// A unit's strings that an earlier unit merged are found by address before
/// its turn, with the offsets the merge gives; the others are left to it.
#[test]
fn known_strings_are_the_merged_offsets() {
    let sec = b"int\0long\0char\0";
    let mut u = UnitInterner::default();
    u.intern(Name::new(&sec[0..]));
    u.intern(Name::new(&sec[4..]));
    let first = u.take();
    u.intern(Name::new(&sec[9..]));
    u.intern(Name::new(&sec[4..]));
    u.intern_owned(b"int");
    let mut second = u.take();
    let (mut btf, mut idx) = (Btf::new(None), StrIndex::default());
    let cache = idx.addr_cache();
    u.learn_known(&mut second, &cache);
    assert_eq!(second.known, [0, 0, 0], "nothing merged yet");
    let mut a = Vec::new();
    idx.merge(&mut btf, &first, 0..first.len(), &mut a);
    u.learn_known(&mut second, &cache);
    // "char" is new; "long" is known; the owned "int" has no address.
    assert_eq!(second.known, [0, a[1].0, 0]);
    let mut b = Vec::new();
    idx.merge(&mut btf, &second, 0..second.len(), &mut b);
    assert_eq!(b[1..], [a[1], a[0]]);
    assert_eq!(btf.strings(), b"\0int\0long\0char\0");
    // The interner remembers: a third unit's "long" is known when interned,
    // and its bytes are not kept; "char", merged only after the last look-up,
    // is left to the merge.
    u.intern(Name::new(&sec[4..]));
    u.intern(Name::new(&sec[9..]));
    let third = u.take();
    assert_eq!(third.known, [a[1].0, 0]);
    assert_eq!((third.bytes(0), third.bytes(1)), (&b""[..], &b"char"[..]));
    let mut c = Vec::new();
    idx.merge(&mut btf, &third, 0..third.len(), &mut c);
    assert_eq!(c, [a[1], b[0]]);
    assert_eq!(btf.strings(), b"\0int\0long\0char\0");
}

/// The key of a name at address `a` read from a slice of `len` bytes.
fn addr_key(a: u32, len: u32) -> NameKey {
    NameKey {
        id: u64::from(a),
        len,
    }
}

/// The hash the cache tests give address `a`.
fn test_hash(a: u32) -> u64 {
    u64::from(a) << 40 | u64::from(a * 5)
}

/// Readers on other threads never take a half-written entry: every offset and
/// hash they find are the ones written for that address.
#[test]
fn cache_readers_see_whole_entries() {
    let cache = AddrCache::new(4);
    let stop = std::sync::atomic::AtomicBool::new(false);
    // Address `a` (many share each slot) always maps to length a % 7, offset
    // a * 3 and hash a << 40 | a * 5, so any mix of two entries is detectable.
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut found = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    for a in 1..200u32 {
                        if let Some((off, hash)) = cache.get_hashed(addr_key(a, a % 7)) {
                            assert_eq!(off, a * 3, "address {a}");
                            assert_eq!(hash, test_hash(a), "address {a}");
                            found += 1;
                        }
                        assert_eq!(cache.get(addr_key(a, a % 7 + 1)), None);
                    }
                }
                std::hint::black_box(found);
            });
        }
        for round in 0..1_000_000u32 {
            let a = 1 + round % 199;
            cache.set(addr_key(a, a % 7), a * 3, test_hash(a));
        }
        stop.store(true, Ordering::Relaxed);
    });
}

#[test]
fn unit_tables_merge_in_first_use_order() {
    let sec = b"int\0long\0int\0char\0";
    let mut u = UnitInterner::default();
    assert_eq!(u.intern(Name::new(&sec[4..])), StrOffset(1));
    assert_eq!(u.intern(Name::new(&sec[0..])), StrOffset(2));
    assert_eq!(u.intern(Name::new(&sec[0..])), StrOffset(2), "by address");
    assert_eq!(
        u.intern(Name::new(&sec[9..])),
        StrOffset(3),
        "another address"
    );
    assert_eq!(u.intern_owned(b"long"), StrOffset(4));
    let first = u.take();
    assert_eq!(u.intern(Name::new(&sec[13..])), StrOffset(1));
    assert_eq!(u.intern(Name::new(&sec[0..])), StrOffset(2), "a new unit");
    let second = u.take();
    let mut btf = Btf::new(None);
    let mut idx = StrIndex::default();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    idx.merge(&mut btf, &first, 0..first.len(), &mut a);
    idx.merge(&mut btf, &second, 0..second.len(), &mut b);
    assert_eq!(btf.strings(), b"\0long\0int\0char\0");
    assert_eq!(a, [StrOffset(1), StrOffset(6), StrOffset(6), StrOffset(1)]);
    assert_eq!(b, [StrOffset(10), StrOffset(6)]);
}

#[test]
fn names_an_earlier_unit_met_keep_their_bytes_and_hashes() {
    let sec = b"task_struct\0pid\0";
    let mut u = UnitInterner::default();
    u.intern(Name::new(&sec[12..]));
    u.intern(Name::new(&sec[..]));
    drop(u.take());
    // The same addresses again, in another order, and one of them read from a
    // shorter slice (another key: its length is not the cached one's).
    assert_eq!(u.intern(Name::new(&sec[..])), StrOffset(1));
    assert_eq!(u.intern(Name::new(&sec[..4])), StrOffset(2));
    assert_eq!(u.intern(Name::new(&sec[12..])), StrOffset(3));
    assert_eq!(u.intern(Name::new(&sec[12..])), StrOffset(3));
    let t = u.take();
    let want: [&[u8]; 3] = [b"task_struct", b"task", b"pid"];
    assert_eq!(t.len(), want.len());
    for (i, w) in want.iter().enumerate() {
        assert_eq!(t.bytes(i), *w);
        assert_eq!(t.hash(i), hash_str(w));
    }
}

#[test]
fn equal_hashes_of_different_strings_are_told_apart() {
    let mut btf = Btf::new(None);
    let mut idx = StrIndex::default();
    let a = idx.intern_hashed(&mut btf, 7, b"a");
    let b = idx.intern_hashed(&mut btf, 7, b"b");
    assert_ne!(a, b);
    assert_eq!(idx.intern_hashed(&mut btf, 7, b"b"), b);
    assert_eq!(idx.intern_hashed(&mut btf, 7, b"a"), a);
}

/// Names gcc writes inline in the DIE (up to 3 bytes, a new address each time)
/// are known by their bytes: one entry in the unit's table, found in the run's
/// cache by the next unit; a longer name at two addresses is two entries.
#[test]
fn short_names_are_known_by_their_bytes() {
    let dies = [*b"\x05id\0\x01", *b"\x07id\0\x02"];
    // The DW_FORM_string slices: the name without its NUL.
    fn at(d: &[u8; 5]) -> Name<'_> {
        Name::new(&d[1..3])
    }
    let sec = b"id\0long_name\0long_name\0";
    let mut u = UnitInterner::default();
    assert_eq!(u.intern(at(&dies[0])), StrOffset(1));
    assert_eq!(u.intern(at(&dies[1])), StrOffset(1), "same bytes");
    // The same name in `.debug_str`, read from a longer slice: by address.
    assert_eq!(u.intern(Name::new(&sec[..])), StrOffset(2));
    assert_eq!(u.intern(Name::new(&sec[3..])), StrOffset(3));
    assert_eq!(
        u.intern(Name::new(&sec[13..])),
        StrOffset(4),
        "another address"
    );
    let first = u.take();
    assert_eq!(NameKey::of(at(&dies[0])), NameKey::of(at(&dies[1])));
    assert!(!NameKey::of(Name::EMPTY).is_cached(), "an empty name");
    assert!(
        !NameKey::of(Name::new(b"\0abc")).is_cached(),
        "a name ending at once"
    );
    assert_ne!(NameKey::of(at(&dies[0])), NameKey::of(Name::new(&sec[..])));
    let (mut btf, mut idx) = (Btf::new(None), StrIndex::default());
    let mut a = Vec::new();
    idx.merge(&mut btf, &first, 0..first.len(), &mut a);
    assert_eq!(btf.strings(), b"\0id\0long_name\0");
    assert_eq!(a, [StrOffset(1), StrOffset(1), StrOffset(4), StrOffset(4)]);
    // A later unit's inline "id", at yet another address, is known before
    // its turn.
    let third = *b"\x09id\0\x03";
    u.intern(at(&third));
    let mut second = u.take();
    u.learn_known(&mut second, &idx.addr_cache());
    assert_eq!(second.known, [1]);
}

/// A table merged in two ranges, split anywhere, gives what merging it whole
/// gives: known names (12 bytes, no bytes kept) and unknown ones (with their
/// bytes) interleave, and each range finds its unknown entries.
#[test]
fn a_table_merges_the_same_in_two_ranges() {
    let sec = b"alpha_name\0beta_name\0gamma_name\0delta_name\0";
    let at = |o: usize| Name::new(&sec[o..]);
    let mut u = UnitInterner::default();
    u.intern(at(11));
    u.intern(at(32));
    let mut first = u.take();
    // The run merges the first unit; the worker learns its offsets.
    let mut run = Run::new();
    run.merge_learned(&mut u, &mut first);
    for o in [0, 11, 21, 32, 0] {
        u.intern(at(o));
    }
    u.intern_owned(b"owned_name");
    let t = u.take();
    assert_eq!(t.len(), 5);
    assert_eq!(t.unknown.len(), 3, "alpha, gamma and the owned name");
    let merged = |cut: usize| {
        // Neither name of the first unit is looked up again: both are known.
        let (mut b, mut i) = (run.btf.clone(), StrIndex::default());
        let mut offs = Vec::new();
        i.merge(&mut b, &t, 0..cut, &mut offs);
        i.merge(&mut b, &t, cut..t.len(), &mut offs);
        (offs, b.strings().to_vec())
    };
    let whole = merged(t.len());
    assert_eq!(
        whole.1,
        b"\0beta_name\0delta_name\0alpha_name\0gamma_name\0owned_name\0"
    );
    assert_eq!(
        whole.0,
        [22, 1, 33, 11, 44].map(StrOffset),
        "alpha, beta, gamma, delta, owned"
    );
    for cut in 0..t.len() {
        assert_eq!(merged(cut), whole, "cut at {cut}");
    }
}

/// Three names of one set are all held; a fourth takes the first way, each name
/// moves one way down, and the oldest is dropped; the two newer keep their
/// hashes, the third way only its offset.
#[test]
fn cache_sets_hold_three_names() {
    let cache = AddrCache::new(3);
    let set_of = |a: u32| cache_slot(u64::from(a), 3);
    let same: Vec<u32> = (1..1000)
        .filter(|&a| set_of(a) == set_of(1))
        .take(4)
        .collect();
    let other = (1..1000).find(|&a| set_of(a) != set_of(1)).unwrap();
    let [a, b, c, d] = [same[0], same[1], same[2], same[3]];
    let off = |x: u32| x * 10;
    let set = |x: u32| cache.set(addr_key(x, 8), off(x), test_hash(x));
    set(a);
    set(other);
    set(b);
    set(c);
    for x in [a, b, c] {
        assert_eq!(cache.get(addr_key(x, 8)), Some(off(x)));
    }
    set(a);
    assert_eq!(
        cache.get_hashed(addr_key(c, 8)),
        Some((off(c), test_hash(c))),
        "setting a held name again moves nothing"
    );
    assert_eq!(
        cache.get_hashed(addr_key(a, 8)),
        None,
        "the third way: no hash"
    );
    set(d);
    assert_eq!(
        cache.get_hashed(addr_key(d, 8)),
        Some((off(d), test_hash(d)))
    );
    assert_eq!(
        cache.get_hashed(addr_key(c, 8)),
        Some((off(c), test_hash(c))),
        "moved to the second way with its hash"
    );
    assert_eq!(
        cache.get(addr_key(b, 8)),
        Some(off(b)),
        "moved to the third"
    );
    assert_eq!(cache.get_hashed(addr_key(b, 8)), None, "its hash dropped");
    assert_eq!(cache.get(addr_key(a, 8)), None, "the oldest, dropped");
    assert_eq!(
        cache.get(addr_key(other, 8)),
        Some(off(other)),
        "another set"
    );
    assert_eq!(cache.get(addr_key(c, 9)), None, "another length");
}

/// A worker asks the run's address cache for the names its own cache does not
/// have: those the run merged are entered with the run's offset and their hash,
/// no bytes kept; the others as before.
#[test]
fn names_the_run_has_come_from_its_cache() {
    let sec = b"alpha\0beta_name\0gamma\0";
    let at = |o: usize| Name::new(&sec[o..]);
    let mut u = UnitInterner::default();
    u.intern(at(0));
    u.intern(at(6));
    let first = u.take();
    let (mut btf, mut idx) = (Btf::new(None), StrIndex::default());
    let mut offs = Vec::new();
    idx.merge(&mut btf, &first, 0..first.len(), &mut offs);
    // Another worker, which has met none of these names.
    let mut w = UnitInterner::for_workers(2).with_run_cache(idx.addr_cache());
    for o in [6, 16, 0, 6] {
        w.intern(at(o));
    }
    let t = w.take();
    assert_eq!(t.len(), 3, "beta_name entered once");
    assert_eq!(t.known, [offs[1].0, 0, offs[0].0]);
    assert_eq!(t.unknown.len(), 1, "only gamma's bytes kept");
    for (i, name) in [&b"beta_name"[..], b"gamma", b"alpha"].iter().enumerate() {
        assert_eq!(
            t.hash(i),
            hash_str(name),
            "{:?}",
            String::from_utf8_lossy(name)
        );
    }
    // Its next unit finds beta_name in its own cache, with the run's offset.
    w.intern(at(6));
    assert_eq!(w.take().known, [offs[1].0]);
}

/// Two names of one set of a worker's cache are both remembered: a later unit
/// gets both with the run's offsets, neither read nor hashed again.
#[test]
fn name_cache_sets_hold_two_names() {
    let sec = Numbered::new(4000, |i| format!("name_{i:04}\0"));
    let at = |i: usize| sec.at(i);
    let set = |i: usize| cache_slot(NameKey::of(at(i)).id, UNIT_RECENT_BITS - 1);
    let (a, b) = (0..4000)
        .find_map(|a| ((a + 1)..4000).find(|&b| set(b) == set(a)).map(|b| (a, b)))
        .expect("two of 4000 names share one of the 8192 sets");
    let mut u = UnitInterner::default();
    u.intern(at(a));
    u.intern(at(b));
    let mut first = u.take();
    let offs = Run::new().merge_learned(&mut u, &mut first);
    u.intern(at(b));
    u.intern(at(a));
    let second = u.take();
    assert_eq!(second.known, [offs[1].0, offs[0].0]);
    assert!(second.unknown.is_empty(), "no bytes kept");
}

/// With several workers each name cache is a quarter of a lone worker's (the
/// trail is the same), and what a unit's references name does not depend on the
/// cache's size: a name whose slot was taken may get a second entry in the smaller
/// cache (which the merge maps to the same offset), but every reference names the
/// same bytes with the same hash.
#[test]
fn several_workers_shrink_the_name_cache_not_the_names() {
    let one = UnitInterner::for_workers(1);
    let two = UnitInterner::for_workers(2);
    let trail_sets = 1 << (TRAIL_BITS - 1);
    assert_eq!(one.recent.len(), (1 << (UNIT_RECENT_BITS - 1)) + trail_sets);
    assert_eq!(
        two.recent.len(),
        (1 << (UNIT_RECENT_BITS_SHARED - 1)) + trail_sets
    );
    assert_eq!(1 << one.sets_log2, 4 << two.sets_log2);
    let sec = Numbered::new(40_000, |i| format!("n{i:05}\0\0\0"));
    let at = |i: usize| sec.at(i);
    let named = |mut u: UnitInterner| {
        let mut out = Vec::new();
        let mut entries = 0;
        // Three units over 40,000 names (more than either cache holds), some met
        // twice in a unit, and half of each unit's names met again in the next.
        for unit in 0..3usize {
            let first = unit * 10_000;
            let names: Vec<usize> = (first..first + 20_000).chain(first..first + 50).collect();
            let refs: Vec<StrOffset> = names.iter().map(|&i| u.intern(at(i))).collect();
            let t = u.take();
            entries += t.len();
            for r in refs {
                let k = r.0 as usize - 1;
                out.push((t.bytes(k).to_vec(), t.hash(k)));
            }
        }
        (out, entries)
    };
    let (big, big_entries) = named(one);
    let (small, small_entries) = named(two);
    assert!(big == small, "the same names, whatever the cache's size");
    // The smaller cache did lose names it had met (60,150 entries against 60,085
    // now), so the equality above is not that of two runs with nothing evicted.
    assert!(
        small_entries > big_entries,
        "{small_entries} vs {big_entries}"
    );
}

/// A run of names met again is answered by the trail, without the cache: each
/// name the entry after the previous one's, or (where the run is broken) the one
/// the ring's index finds; an entry whose unit had not learned the name's offset
/// goes to the cache instead, and is written to the trail again with it.
#[test]
fn runs_of_names_met_again_come_from_the_trail() {
    let sec = Numbered::new(200, |i| format!("member_{i:03}\0"));
    let at = |i: usize| sec.at(i);
    let mut u = UnitInterner::default();
    // Unit 1 meets the names; the run learns them.
    for i in 0..200 {
        u.intern(at(i));
    }
    let mut first = u.take();
    let offs = Run::new().merge_learned(&mut u, &mut first);
    // Unit 2: the trail's entries (unit 1's) have no run offset, the cache's do.
    for i in 0..200 {
        u.intern(at(i));
    }
    let second = u.take();
    let run: Vec<u32> = offs.iter().map(|o| o.0).collect();
    assert_eq!(second.known, run, "from the cache, with the run's offsets");
    // Unit 3, with the cache emptied: only the trail (unit 2's entries) knows the
    // names. The run is broken twice: it starts at 150, and goes on at 0.
    let sets = 1 << u.sets_log2;
    u.recent[..sets].fill(RecentSet::default());
    let order: Vec<usize> = (150..200).chain(0..150).collect();
    let refs: Vec<StrOffset> = order.iter().map(|&i| u.intern(at(i))).collect();
    let third = u.take();
    assert!(third.unknown.is_empty(), "no name read or hashed");
    for (&i, r) in order.iter().zip(&refs) {
        let k = r.0 as usize - 1;
        assert_eq!(third.known[k], offs[i].0, "name {i}");
        assert_eq!(third.hash(k), hash_str(at(i).bytes()), "name {i}");
    }
    assert_eq!(third.len(), 200, "one entry a name");
}

/// A name the unit already has, met again through a trail entry of an earlier
/// unit, gets a second entry: the same offset and hash as the first, which is
/// all the unit's records and the merge see of it. A name met again through the
/// ring's index finds the unit's own entry.
#[test]
fn a_trail_entry_of_an_earlier_unit_gives_a_second_entry_of_the_same_name() {
    let sec = b"next\0prev\0";
    let (next, prev) = (Name::new(&sec[0..]), Name::new(&sec[5..]));
    let mut u = UnitInterner::default();
    // The first unit enters the names; the second, with the run's offsets
    // learned, leaves entries with them on the trail.
    let offs = Run::new().units_learned(&mut u, &[next, prev], 2);
    // `prev` and `next` come from the second unit's entries (through the ring's
    // index: the run is broken); after `next`, the trail predicts what followed
    // it there, the second unit's `prev`, which this unit has already entered.
    let p1 = u.intern(prev);
    let n1 = u.intern(next);
    let p2 = u.intern(prev);
    assert_ne!(p1, p2, "a second entry of prev");
    // After that `prev` comes this unit's own `prev` again, not `next`: the
    // ring's index gives `next`'s newest entry, this unit's own.
    assert_eq!(u.intern(next), n1, "this unit's own entry");
    let t = u.take();
    assert_eq!(t.len(), 3);
    let at = |r: StrOffset| r.0 as usize - 1;
    for (r, o) in [(p1, offs[1]), (n1, offs[0]), (p2, offs[1])] {
        assert_eq!(t.known[at(r)], o.0, "the run's offset");
    }
    assert_eq!(t.hash(at(p1)), hash_str(b"prev"));
    assert_eq!(t.hash(at(p2)), hash_str(b"prev"));
    assert!(t.unknown.is_empty(), "no bytes kept");
}

/// A name kept off the trail (an empty one, by its bytes or by an address) does
/// not break the run around it: the name after it is still predicted, found
/// with the cache emptied and the ring's index of no help.
#[test]
fn an_empty_name_leaves_the_run_unbroken() {
    let sec = b"first_member\0\0second_member\0";
    let (first, empty_at, second) = (
        Name::new(&sec[0..]),
        Name::new(&sec[13..]),
        Name::new(&sec[14..]),
    );
    let empty = Name::new(b"\0");
    let mut u = UnitInterner::default();
    let offs = Run::new().units_learned(&mut u, &[first, empty, empty_at, second], 2);
    let sets = 1 << u.sets_log2;
    u.recent[..sets].fill(RecentSet::default());
    assert_eq!(u.intern(first), StrOffset(1), "through the ring's index");
    assert_eq!(u.intern(empty), StrOffset::EMPTY);
    assert_eq!(u.intern(empty_at), StrOffset::EMPTY);
    // The index now points at the ring's first entry, the first unit's `first`.
    u.jump.fill(0);
    let s = u.intern(second);
    let t = u.take();
    assert_eq!(t.len(), 2);
    assert!(t.unknown.is_empty(), "no name read or hashed");
    assert_eq!(t.known[s.0 as usize - 1], offs[1].0, "second's offset");
}

/// The ring's index follows a name to its newest entry on the trail, also when
/// the prediction found it: a run that breaks at a name after its older entries
/// were overwritten still finds it on the trail.
#[test]
fn the_trail_index_follows_names_the_prediction_finds() {
    const RUN: usize = 50;
    let sec = Numbered::new(RUN, |i| format!("member_{i:03}\0"));
    let at = |i: usize| sec.at(i);
    let filler_count = (1 << TRAIL_BITS) - RUN;
    let filler = Numbered::new(filler_count, |i| format!("f{i:05}\0\0\0"));
    let fill = |i: usize| filler.at(i);
    let mut u = UnitInterner::default();
    // Units 1 and 2 put the run on the trail, unit 2's entries with the run's
    // offsets; unit 3 meets it again, all but its first name predicted.
    let names: Vec<Name<'_>> = (0..RUN).map(at).collect();
    let offs = Run::new().units_learned(&mut u, &names, 3);
    // Unit 4 overwrites the ring up to unit 3's entries, exclusive.
    for i in 0..filler_count {
        u.intern(fill(i));
    }
    u.take();
    // A name of the run whose index slot no filler name took, met alone: only
    // unit 3's entry, through the index, knows it once the cache is emptied.
    let slot = |n: Name<'_>| cache_slot(NameKey::of(n).id, JUMP_BITS);
    let taken: std::collections::HashSet<usize> =
        (0..filler_count).map(|i| slot(fill(i))).collect();
    let k = (1..RUN)
        .find(|&k| !taken.contains(&slot(at(k))))
        .expect("a slot of 2^15 left free by 16,334 names");
    let sets = 1 << u.sets_log2;
    u.recent[..sets].fill(RecentSet::default());
    let r = u.intern(at(k));
    let t = u.take();
    assert!(t.unknown.is_empty(), "name {k} found on the trail");
    assert_eq!(t.known[r.0 as usize - 1], offs[k].0);
}
