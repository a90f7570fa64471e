//! Strings: each unit's own table, built on the worker that encodes the unit, and the
//! one string index of the BTF being built, into which the units' tables are merged
//! in unit order.
//!
//! A unit's table ([`UnitStrings`]) holds each distinct name of the unit once, in the
//! order the unit first uses it, with its hash. Merging the tables in unit order
//! ([`StrIndex::merge`]) appends the names not seen before in exactly the order one
//! encoder interning every name of every unit in turn would, which is the order of
//! pahole's string section (the output keeps it as it is: see `dedup::Engine::
//! load_encoded_batch`).

use crate::btf::{Btf, StrOffset};
use crate::dwarf::types::Name;
use crate::hash::{hash_str, Prehashed, SEED};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

/// A map keyed by an already computed hash.
type ByHash = HashMap<u64, u32, BuildHasherDefault<Prehashed>>;

/// A name of one unit's table whose offset in the run was not known when it was
/// entered: what merging it needs.
#[derive(Clone, Copy, Debug)]
struct Unknown {
    /// What the caches know the name by ([`NameKey::NONE`] for a name built by the
    /// encoder, whose address may be reused).
    key: NameKey,
    /// Its index in the table.
    i: u32,
    /// Its bytes in the table's blob.
    start: u32,
    len: u32,
}

/// One unit's strings in first-use order (a string may have more than one entry:
/// see [`UnitInterner`]). A unit's records name string
/// `i` of the table (0-based) as `StrOffset(i + 1)`; `StrOffset(0)` is the empty name.
///
/// Most of a unit's names are known to the run when they are entered (an earlier
/// unit gave them): such a name is its hash and its offset, 12 bytes, with no
/// bytes kept; only the others have an `Unknown` entry and their bytes.
#[derive(Default, Debug)]
pub struct UnitStrings {
    blob: Vec<u8>,
    /// [`hash_str`] of each string.
    hashes: Vec<u64>,
    /// The run's offset of each string that a unit merged earlier already gave
    /// the run (0: not known), found by [`UnitInterner::learn_known`] or, for a
    /// name the worker learned with an earlier unit, when it is interned.
    known: Vec<u32>,
    /// The strings not known when entered, by index.
    unknown: Vec<Unknown>,
}

impl UnitStrings {
    /// Number of strings.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// The run's offset of string `o` (1-based, as the unit's records name it),
    /// if an earlier unit gave it the run.
    pub fn known(&self, o: u32) -> Option<u32> {
        let i = (o as usize).checked_sub(1)?;
        self.known.get(i).copied().filter(|&k| k != 0)
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// [`hash_str`] of string `i`.
    pub fn hash(&self, i: usize) -> u64 {
        self.hashes[i]
    }

    /// The bytes of string `i` (none for a string known to the run when entered),
    /// for the tests: the merge walks the unknown entries in order instead.
    #[cfg(test)]
    pub fn bytes(&self, i: usize) -> &[u8] {
        let at = self.unknown.partition_point(|u| (u.i as usize) < i);
        match self.unknown.get(at) {
            Some(u) if u.i as usize == i => self.unknown_bytes(u),
            _ => &[],
        }
    }

    fn unknown_bytes(&self, u: &Unknown) -> &[u8] {
        &self.blob[u.start as usize..][..u.len as usize]
    }
}

/// log2 of the entries of a worker's name cache (512 KiB of 32-byte entries, two
/// to a set) when it is the only worker: a unit has a few thousand distinct
/// names, but the cache serves unit after unit. Most names are found on the
/// worker's trail ([`TRAIL_BITS`]) instead; the cache answers the rest. Before
/// the trail it had 2^15 entries (1 MiB), which the trail's 512 KiB replaced
/// half of: see DESIGN.md, "The names' trail".
const UNIT_RECENT_BITS: u32 = 14;

/// log2 of the entries of each worker's name cache when several workers run
/// (128 KiB a worker): with its 512 KiB trail and 64 KiB trail index, 704 KiB a
/// worker against the 512 KiB its cache of 2^14 entries took before the trail,
/// the peak growing with each worker. A smaller trail or index made -j2 slower
/// (see DESIGN.md, "The names' trail").
const UNIT_RECENT_BITS_SHARED: u32 = 12;

/// log2 of the entries of a worker's trail: the names it interned last, in order
/// (512 KiB of the cache's 32-byte entries, about four units' names on the corpus
/// vmlinux).
const TRAIL_BITS: u32 = 14;

/// A ring position's index in the ring (its low `TRAIL_BITS` bits), which is all
/// the trail index keeps of it.
#[inline]
fn ring_index(at: u32) -> u16 {
    // TRAIL_BITS is at most 16, checked at compile time.
    const _: () = assert!(TRAIL_BITS <= 16);
    #[allow(clippy::cast_possible_truncation)]
    let i = (at & ((1 << TRAIL_BITS) - 1)) as u16;
    i
}

/// log2 of the slots of a worker's trail index ([`UnitInterner::jump`]: 64 KiB).
const JUMP_BITS: u32 = TRAIL_BITS + 1;

/// Builds one unit's [`UnitStrings`] at a time (a worker's; reused between units).
///
/// A name is found again by its [`NameKey`] only (its address, or a short name's
/// bytes): a name met again at another address, or after its cache slot was
/// taken, gets a second entry. That costs nothing in the output:
/// merging maps both entries to the one offset, and only the first use of a string
/// decides its place.
///
/// The cache outlives the unit: an entry an earlier unit left gives the name's
/// length and hash, so a name that unit met (most are: a unit's header types are
/// the last unit's) is neither measured nor hashed again, only copied; and once
/// the run's offset of the name is known ([`UnitInterner::learn_known`]), not
/// even copied.
///
/// Before the cache, the trail: a ring of the entries of the names interned last,
/// in the order they were interned. Names come in runs that repeat from unit to
/// unit (a struct's members, an enum's values, a prototype's parameters, and the
/// types of one header after another), so the name interned next is most often
/// the one that followed the previous name when it was interned before: on the
/// corpus vmlinux 9.3 of the 10.8 million non-empty names are the trail's entry
/// after the previous non-empty name's, 0.75 million more found through the
/// index (see
/// DESIGN.md, "The names' trail" and "Runs across empty names"). That entry is
/// the one after it in the ring, next to memory just read, where the cache's set
/// is a miss in a table the size of a core's L2. A name that breaks the run is
/// looked up in a small index of the ring by key, then in the cache. An entry of
/// the trail from an earlier unit gives a name the unit already has a second
/// entry, which costs nothing in the output (see above).
pub struct UnitInterner {
    out: UnitStrings,
    /// A two-way set-associative cache by [`NameKey`], the newer entry of a set
    /// first; entries of earlier units are told apart by `unit`. After its
    /// `2^sets_log2` sets, in the same allocation (a second one took more peak
    /// RSS than its size), the trail's ring: `2^TRAIL_BITS` entries, two a set.
    recent: Box<[RecentSet]>,
    /// log2 of the number of sets of the cache.
    sets_log2: u32,
    /// Ring position (wrapping; the ring index is its low `TRAIL_BITS` bits) of
    /// the next name's entry on the trail.
    head: u32,
    /// Ring position of the entry predicted for the next name: the one after the
    /// previous name's, where the trail has it.
    next: u32,
    /// By [`cache_slot`] of a name's key: the ring index where the name's entry
    /// was written, for a name that breaks the run. Checked against the entry's
    /// key, as the ring is overwritten.
    jump: Box<[u16]>,
    unit: u16,
    /// The run's address cache, asked for a name `recent` does not have.
    run_cache: Option<Arc<AddrCache>>,
}

/// A set of [`UnitInterner`]'s cache: two entries in one cache line.
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct RecentSet([Recent; 2]);

impl RecentSet {
    /// The way that holds `key`.
    #[inline]
    fn way_of(&self, key: NameKey) -> Option<usize> {
        self.0
            .iter()
            .position(|e| e.id == key.id && e.len == key.len)
    }
}

/// An entry of [`UnitInterner`]'s cache (32 bytes).
#[derive(Clone, Copy, Default)]
struct Recent {
    /// The name's [`NameKey`].
    id: u64,
    hash: u64,
    len: u32,
    /// The name's offset in the run's string section, once known (0: not yet).
    run: u32,
    /// Its index in the table of unit `unit`, the last to meet it.
    idx: u32,
    /// The name's length (names of 64 KiB or more are not cached); 0 for a name
    /// whose `run` was known when it was entered (its bytes are never read).
    name_len: u16,
    unit: u16,
}

impl Default for UnitInterner {
    fn default() -> Self {
        UnitInterner::with_cache_bits(UNIT_RECENT_BITS)
    }
}

impl UnitInterner {
    /// A worker's interner when `workers` run at once: a name cache of
    /// `UNIT_RECENT_BITS` alone, `UNIT_RECENT_BITS_SHARED` with others.
    pub fn for_workers(workers: usize) -> UnitInterner {
        UnitInterner::with_cache_bits(if workers > 1 {
            UNIT_RECENT_BITS_SHARED
        } else {
            UNIT_RECENT_BITS
        })
    }

    /// An interner whose name cache has `2^bits` entries (`bits` at least 1).
    fn with_cache_bits(bits: u32) -> UnitInterner {
        let sets_log2 = bits.max(1) - 1;
        let sets = (1usize << sets_log2) + (1 << (TRAIL_BITS - 1));
        UnitInterner {
            out: UnitStrings::default(),
            recent: vec![RecentSet::default(); sets].into_boxed_slice(),
            sets_log2,
            head: 0,
            next: 0,
            jump: vec![0; 1 << JUMP_BITS].into_boxed_slice(),
            unit: 1,
            run_cache: None,
        }
    }

    /// The interner, asking `cache` (the run's address cache) for the names its
    /// own cache misses: with two workers, each cache has half the entries and
    /// meets every other unit, and missed 1.2 million names on the corpus vmlinux
    /// against 0.4 million for one worker; the run's cache had 0.79 million of
    /// them (0.2 million at -j1), which then need neither their bytes read and
    /// hashed nor a look-up after the unit ([`UnitInterner::learn_known`]).
    pub fn with_run_cache(mut self, cache: Arc<AddrCache>) -> UnitInterner {
        self.run_cache = Some(cache);
        self
    }

    /// The unit's reference to `name`, adding it to the unit's table the first time.
    #[inline]
    pub fn intern(&mut self, name: Name<'_>) -> StrOffset {
        // The trail and the cache are looked at before the name's bytes: a name
        // they have is not empty (empty names are never entered), and reading the
        // first byte of a name in `.debug_str` is a cache miss of its own.
        // A name kept off the trail (an empty one, most of these: 4.9 million on
        // the corpus vmlinux, the names of pointers, prototypes and anonymous
        // types) leaves the prediction as it was: it is left off in every unit,
        // so the runs of names around it repeat all the same.
        let key = NameKey::of(name);
        if !key.is_cached() {
            return self.push_uncached(name.bytes(), key);
        }
        if let Some(o) = self.intern_by_trail(key) {
            return o;
        }
        let (o, entry) = self.intern_by_cache(name, key);
        if let Some(e) = entry {
            self.append(e);
        }
        o
    }

    /// Where the trail's entry at ring position `at` lies in `recent`: (set, way).
    #[inline]
    fn ring_slot(&self, at: u32) -> (usize, usize) {
        let i = usize::from(ring_index(at));
        ((1 << self.sets_log2) + i / 2, i % 2)
    }

    /// The trail's entry at ring position `at`.
    #[inline]
    fn on_trail(&self, at: u32) -> &Recent {
        let (set, way) = self.ring_slot(at);
        &self.recent[set].0[way]
    }

    /// Writes `e` at the trail's head, where the trail's index finds it after. The
    /// next name is predicted at the new head, where nothing follows yet: a caller
    /// that knows where `e`'s name was followed before sets `next` after.
    #[inline]
    fn append(&mut self, e: Recent) {
        // Every time, also for a name the prediction found: its older entry, which
        // the index gave until now, is overwritten a ring later, and a run that
        // breaks there would find the name nowhere on the trail.
        self.jump[cache_slot(e.id, JUMP_BITS)] = ring_index(self.head);
        let (set, way) = self.ring_slot(self.head);
        self.recent[set].0[way] = e;
        self.head = self.head.wrapping_add(1);
        self.next = self.head;
    }

    /// `key`'s reference from the trail: the predicted entry, or the one the
    /// ring's index gives. None if neither is `key`'s, or if the entry's unit did
    /// not learn the name's offset in the run (the cache may have since).
    #[inline]
    fn intern_by_trail(&mut self, key: NameKey) -> Option<StrOffset> {
        let is_key = |e: &Recent| (e.id == key.id) & (e.len == key.len);
        let predicted = self.next;
        let at = if is_key(self.on_trail(predicted)) {
            predicted
        } else {
            let at = u32::from(self.jump[cache_slot(key.id, JUMP_BITS)]);
            if !is_key(self.on_trail(at)) {
                return None;
            }
            at
        };
        let e = *self.on_trail(at);
        let idx = if e.unit == self.unit {
            e.idx
        } else if e.run != 0 {
            self.push_known(key, e.hash, e.run)
        } else {
            return None;
        };
        self.append(Recent {
            unit: self.unit,
            idx,
            ..e
        });
        // The name after this one is predicted to be the one that followed it.
        self.next = at.wrapping_add(1);
        Some(StrOffset(idx + 1))
    }

    /// `key`'s reference through the cache, and the cache's entry for it after
    /// (None for a name it does not keep).
    #[inline]
    fn intern_by_cache(&mut self, name: Name<'_>, key: NameKey) -> (StrOffset, Option<Recent>) {
        let set = cache_slot(key.id, self.sets_log2);
        if let Some(way) = self.recent[set].way_of(key) {
            let e = self.recent[set].0[way];
            if e.unit == self.unit {
                return (StrOffset(e.idx + 1), Some(e));
            }
            // Met by an earlier unit: its length and hash are known, and maybe
            // its offset in the run.
            let i = if e.run != 0 {
                self.push_known(key, e.hash, e.run)
            } else {
                self.push_hashed(&name.raw_bytes()[..usize::from(e.name_len)], key, e.hash)
            };
            let e = Recent {
                unit: self.unit,
                idx: i,
                ..e
            };
            self.recent[set].0[way] = e;
            return (StrOffset(i + 1), Some(e));
        }
        if let Some((run, hash)) = self.run_cache.as_ref().and_then(|c| c.get_hashed(key)) {
            let i = self.push_known(key, hash, run);
            let e = self.remember(set, key, hash, run, i, 0);
            return (StrOffset(i + 1), Some(e));
        }
        if name.is_empty() {
            return (StrOffset::EMPTY, None);
        }
        let bytes = name.bytes();
        let hash = hash_str(bytes);
        let i = self.push_hashed(bytes, key, hash);
        let e = u16::try_from(bytes.len())
            .ok()
            .map(|name_len| self.remember(set, key, hash, 0, i, name_len));
        (StrOffset(i + 1), e)
    }

    /// Adds `s` (known by `key`, which neither the trail nor the cache keeps: an
    /// empty name, a slice of 4 GiB or more, bytes the encoder built) as an entry
    /// of its own; nothing for the empty name.
    fn push_uncached(&mut self, s: &[u8], key: NameKey) -> StrOffset {
        if s.is_empty() {
            return StrOffset::EMPTY;
        }
        StrOffset(self.push_hashed(s, key, hash_str(s)) + 1)
    }

    /// Enters a name in set `set` of the cache: the newer entry of the set moves
    /// to the second way; the older goes. Returns the entry.
    #[inline]
    fn remember(
        &mut self,
        set: usize,
        key: NameKey,
        hash: u64,
        run: u32,
        idx: u32,
        name_len: u16,
    ) -> Recent {
        let e = Recent {
            id: key.id,
            hash,
            len: key.len,
            run,
            idx,
            name_len,
            unit: self.unit,
        };
        let ways = &mut self.recent[set].0;
        ways[1] = ways[0];
        ways[0] = e;
        e
    }

    /// [`UnitInterner::intern`] for bytes the encoder built (no address to know
    /// them by: each is an entry of its own).
    pub fn intern_owned(&mut self, s: &[u8]) -> StrOffset {
        self.push_uncached(s, NameKey::NONE)
    }

    /// Number of strings of the unit so far.
    pub fn len(&self) -> usize {
        self.out.hashes.len()
    }

    /// The content key of the unit's string `o` (1-based, as the unit's records
    /// name it): its [`hash_str`], 0 for the empty name.
    #[inline]
    pub fn key(&self, o: u32) -> u64 {
        match (o as usize).checked_sub(1) {
            Some(i) => self.out.hashes.get(i).copied().unwrap_or(0),
            None => 0,
        }
    }

    /// Whether the unit has no string yet.
    pub fn is_empty(&self) -> bool {
        self.out.hashes.is_empty()
    }

    /// The unit's table; the interner is ready for the next unit.
    pub fn take(&mut self) -> UnitStrings {
        self.unit = self.unit.wrapping_add(1).max(1);
        if self.unit == 1 {
            // Wrapped: entries of unit 1 of the last round, in the cache or on the
            // trail, must not match.
            self.recent.fill(RecentSet::default());
        }
        // The next unit starts with room for as many names as this one had: units
        // are alike in size, and growing the table by doubling copies it again and
        // again. The room is rounded to few size classes (`arena::classes`).
        let room = arena::classes::capacity;
        let next = UnitStrings {
            blob: Vec::with_capacity(room(self.out.blob.len())),
            hashes: Vec::with_capacity(room(self.out.hashes.len())),
            known: Vec::with_capacity(room(self.out.known.len())),
            unknown: Vec::with_capacity(room(self.out.unknown.len())),
        };
        std::mem::replace(&mut self.out, next)
    }

    /// Adds `s`, whose [`hash_str`] is `hash`, to the unit's table.
    fn push_hashed(&mut self, s: &[u8], key: NameKey, hash: u64) -> u32 {
        self.push_entry(s, key, hash, 0)
    }

    /// Adds a name whose offset in the run is `run` to the unit's table, without
    /// its bytes.
    fn push_known(&mut self, key: NameKey, hash: u64, run: u32) -> u32 {
        self.push_entry(&[], key, hash, run)
    }

    /// Always inlined into its two callers: 7.9 million calls on the corpus
    /// vmlinux, whose entry and exit were 1.4% of the run's instructions.
    #[inline(always)]
    fn push_entry(&mut self, s: &[u8], key: NameKey, hash: u64, run: u32) -> u32 {
        let out = &mut self.out;
        let i = u32::try_from(out.hashes.len()).expect("fewer than 2^32 names in a unit");
        out.hashes.push(hash);
        out.known.push(run);
        if run == 0 {
            let start = u32::try_from(out.blob.len()).expect("a unit's names under 4 GiB");
            out.blob.extend_from_slice(s);
            out.unknown.push(Unknown {
                key,
                i,
                start,
                len: u32::try_from(s.len()).expect("a name under 4 GiB"),
            });
        }
        i
    }

    /// Looks up in the run's address cache, which the thread merging strings
    /// writes (see [`AddrCache`]), the strings of `unit` (the table this interner
    /// just gave) not yet known, so that merging the unit later only reads their
    /// offsets, and remembers what it finds for the units to come. On a worker,
    /// before the unit's turn: a string found there has that offset for good (each
    /// string is in the run's section once), so what is found is what the merge
    /// would find, and what is not is looked up by the merge.
    pub fn learn_known(&mut self, unit: &mut UnitStrings, cache: &AddrCache) {
        for s in &unit.unknown {
            let known = &mut unit.known[s.i as usize];
            if *known != 0 || !s.key.is_cached() {
                continue;
            }
            if let Some(off) = cache.get(s.key) {
                *known = off;
                let set = &mut self.recent[cache_slot(s.key.id, self.sets_log2)];
                if let Some(way) = set.way_of(s.key) {
                    set.0[way].run = off;
                }
            }
        }
    }
}

/// Inserting into a [`ByHash`]: true if the hash was taken (by another string).
trait TryInsertHash {
    fn try_insert_hash(&mut self, hash: u64, v: u32) -> bool;
}

impl TryInsertHash for ByHash {
    #[inline]
    fn try_insert_hash(&mut self, hash: u64, v: u32) -> bool {
        match self.entry(hash) {
            std::collections::hash_map::Entry::Occupied(_) => true,
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(v);
                false
            }
        }
    }
}

/// The slot or set of a [`NameKey`]'s `id` in a cache of `2^bits` of them.
#[inline]
fn cache_slot(id: u64, bits: u32) -> usize {
    // A u64 product shifted down to `bits` (< 32) bits: fits a usize.
    #[allow(clippy::cast_possible_truncation)]
    let slot = (id.wrapping_mul(SEED) >> (64 - bits)) as usize;
    slot
}

/// Maps each name already in the BTF's string section to its offset.
///
/// A first lookup by [`NameKey`] (an address, or a short name's bytes: no hashing
/// or comparing of bytes) answers most calls. Behind it, a map from each string's
/// hash to its offset, the bytes compared in the section.
pub struct StrIndex {
    map: ByHash,
    /// Strings whose hash an earlier string has: (hash, offset).
    overflow: Vec<(u64, u32)>,
    /// A direct-mapped cache by address, small enough to stay in the CPU cache,
    /// which the workers read too ([`UnitInterner::learn_known`]); only this index
    /// writes it.
    recent: Arc<AddrCache>,
}

/// The address cache of a [`StrIndex`]: (key, length, offset) and, for the two
/// newer entries of each set, the name's [`hash_str`], in a three-way
/// set-associative table of 64-byte sets (1 MiB; see `cache_len`), written by the
/// one index that owns it and read by any thread. An entry is two or three atomic
/// words: the key's id, the length and offset, maybe the hash; the writer clears
/// the id before it changes the rest, and a reader takes an entry only if it read
/// the same id before and after the rest, so it never takes one half-written.
/// Set-associative instead of direct-mapped: the corpus vmlinux's merge looked up
/// by hash 302,000 names the run had, with two ways 56,000 (see `set`). The hash
/// is for the workers ([`UnitInterner::with_run_cache`]): a name their own cache
/// misses and the run has is entered with its offset and hash, its bytes never
/// read. Two ways of 24 bytes and a third of 16 fill a line: against two 16-byte
/// ways without hashes in the same 1 MiB, on the corpus vmlinux, -j2 took
/// 0.977-0.992x the CPU (medians of 14-30 interleaved pairs) and 0.7 MB less peak
/// RSS (fewer names' bytes in the units in flight), -j1 0.997-1.012x the CPU. Two
/// ways of 24 bytes in 2 MiB gave -j2 0.967-0.982x, for 0.2-1.2 MB more peak RSS
/// at every -j; the hashes in a table of their own, another line to read, gained
/// nothing.
pub struct AddrCache {
    sets: Box<[CacheSet]>,
    /// log2 of the number of sets.
    bits: u32,
}

/// A set of [`AddrCache`]: three entries, the newest first, within one cache
/// line: their ids, their lengths and offsets, and the hashes of the first two.
#[repr(align(64))]
#[derive(Default)]
struct CacheSet([AtomicU64; 8]);

/// Ways of a set of [`AddrCache`].
const WAYS: usize = 3;
/// The ways of a set that keep their name's hash (the newer ones).
const HASHED_WAYS: usize = 2;

// A set's words: an id and a length and offset for each way, a hash for each
// hashed way, in one 64-byte line.
const _: () = assert!(2 * WAYS + HASHED_WAYS == 8 && HASHED_WAYS <= WAYS);

impl CacheSet {
    /// Way `w`'s id, length and offset, and hash (if it keeps one).
    #[inline]
    fn way(&self, w: usize) -> (&AtomicU64, &AtomicU64, Option<&AtomicU64>) {
        let h = (w < HASHED_WAYS).then(|| &self.0[2 * WAYS + w]);
        (&self.0[w], &self.0[WAYS + w], h)
    }
}

impl AddrCache {
    fn new(bits: u32) -> AddrCache {
        AddrCache {
            sets: (0..1usize << bits).map(|_| CacheSet::default()).collect(),
            bits,
        }
    }

    /// The offset of the name `key`, if the cache has it.
    #[inline]
    pub fn get(&self, key: NameKey) -> Option<u32> {
        if !key.is_cached() {
            // An empty entry's id reads as this key's.
            return None;
        }
        let set = &self.sets[cache_slot(key.id, self.bits)];
        (0..WAYS).find_map(|w| Self::get_way(set.way(w), key).map(|(off, _)| off))
    }

    /// The offset and the [`hash_str`] of the name `key`, if the cache has it
    /// with its hash.
    #[inline]
    pub fn get_hashed(&self, key: NameKey) -> Option<(u32, u64)> {
        if !key.is_cached() {
            return None;
        }
        let set = &self.sets[cache_slot(key.id, self.bits)];
        (0..HASHED_WAYS).find_map(|w| Self::get_way(set.way(w), key))
    }

    /// A seqlock's read: the id, then the rest, then the id again (see
    /// [`AddrCache::set_way`]); the hash is 0 if the way keeps none.
    #[inline]
    fn get_way(
        (a, v, h): (&AtomicU64, &AtomicU64, Option<&AtomicU64>),
        key: NameKey,
    ) -> Option<(u32, u64)> {
        if a.load(Ordering::Acquire) != key.id {
            return None;
        }
        let value = v.load(Ordering::Relaxed);
        let hash = h.map_or(0, |h| h.load(Ordering::Relaxed));
        fence(Ordering::Acquire);
        if a.load(Ordering::Relaxed) != key.id || value >> 32 != u64::from(key.len) {
            return None;
        }
        // The low word of `value` is the offset.
        #[allow(clippy::cast_possible_truncation)]
        Some((value as u32, hash))
    }

    /// Records the name `key` at `off`, with its hash (its owner only), in the
    /// first way, each name of the set moving one way down: the oldest is
    /// dropped.
    #[inline]
    fn set(&self, key: NameKey, off: u32, hash: u64) {
        if !key.is_cached() {
            return;
        }
        let set = &self.sets[cache_slot(key.id, self.bits)];
        if (0..WAYS).any(|w| set.0[w].load(Ordering::Relaxed) == key.id) {
            // Held already (a name's offset is for good).
            return;
        }
        for w in (1..WAYS).rev() {
            let (a, v, h) = set.way(w - 1);
            let id = a.load(Ordering::Relaxed);
            if id != 0 {
                let moved = (
                    v.load(Ordering::Relaxed),
                    h.map_or(0, |h| h.load(Ordering::Relaxed)),
                );
                Self::set_way(set.way(w), id, moved.0, moved.1);
            }
        }
        let value = u64::from(key.len) << 32 | u64::from(off);
        Self::set_way(set.way(0), key.id, value, hash);
    }

    /// A seqlock's write (one writer): the id cleared, the rest written, then the
    /// id. A reader that read the new rest reads, after its acquire fence, the
    /// cleared id or a later one; a later write of the same id writes the same
    /// rest (a name's offset and hash are for good).
    #[inline]
    fn set_way(
        (a, v, h): (&AtomicU64, &AtomicU64, Option<&AtomicU64>),
        id: u64,
        value: u64,
        hash: u64,
    ) {
        a.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        v.store(value, Ordering::Relaxed);
        if let Some(h) = h {
            h.store(hash, Ordering::Relaxed);
        }
        a.store(id, Ordering::Release);
    }
}

/// What the string caches know a name by, without reading the name where they
/// can: its address in the input and the length of the slice it was read from,
/// since names come from `.debug_str`, where the linker merged equal strings, so
/// the same name is almost always the same address. A name read from a slice of
/// at most 7 bytes is known by its bytes instead: gcc writes names of up to 3 bytes
/// inline in the DIE (`DW_FORM_string`, whose slice is the name), a new address at
/// each use (three in five of the names the address would not find, and each
/// would evict a name from the caches), and its bytes are at hand in the DIE.
/// Addresses are only compared, never dereferenced, and the input stays mapped
/// for the whole run, so an address cannot be reused for another string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameKey {
    /// The address, or the bytes with [`NameKey::BYTES`] set (no address has it).
    id: u64,
    /// The slice's length; the name's for a key by bytes; `u32::MAX` (never
    /// cached) for a slice of 4 GiB or more.
    len: u32,
}

impl NameKey {
    /// A name built by the encoder: not cached (its address may be reused).
    pub const NONE: NameKey = NameKey { id: 0, len: 0 };

    /// Marks a key made of the name's bytes: addresses are below 2^63.
    const BYTES: u64 = 1 << 63;

    /// The key of `name`.
    #[inline]
    pub fn of(name: Name<'_>) -> NameKey {
        let (addr, backing) = name.key();
        if backing <= 7 {
            let b = name.bytes();
            if b.is_empty() {
                // Never cached, whoever asks: an empty name has no entry.
                return NameKey::NONE;
            }
            let mut w = [0u8; 8];
            w[..b.len()].copy_from_slice(b);
            return NameKey {
                id: Self::BYTES | u64::from_le_bytes(w),
                len: cache_len(b.len()),
            };
        }
        NameKey {
            id: addr as u64,
            len: cache_len(backing),
        }
    }

    /// Whether the caches may hold the name.
    #[inline]
    pub fn is_cached(self) -> bool {
        self.id != 0 && self.len != u32::MAX
    }
}

/// A slice's length as a [`NameKey`] keeps it: `u32::MAX` (never kept, so never
/// found) for one of 4 GiB or more, so that the length and an offset share a
/// word of the address cache and three entries fit in a line.
#[inline]
fn cache_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// log2 of the number of sets of the address cache (three entries each, 1 MiB).
const RECENT_BITS: u32 = 14;

impl Default for StrIndex {
    fn default() -> Self {
        StrIndex {
            map: ByHash::default(),
            overflow: Vec::new(),
            recent: Arc::new(AddrCache::new(RECENT_BITS)),
        }
    }
}

impl StrIndex {
    /// An index that already knows the strings of `btf`'s base (split BTF): like
    /// libbpf's `btf__add_str`, which pahole uses, a name the base has is referred
    /// to there and never copied into the split BTF's own strings.
    pub fn with_base_of(btf: &Btf) -> StrIndex {
        let mut idx = StrIndex::default();
        if let Some(base) = btf.base() {
            let data = base_chain_strings(base);
            let mut off = 0usize;
            for s in data.split(|&b| b == 0) {
                if !s.is_empty() {
                    let off = u32::try_from(off).expect("BTF string offsets are 32 bits");
                    // The first copy of a string in the chain is the one referred to.
                    if idx.lookup(btf, hash_str(s), s).is_none() {
                        idx.insert(hash_str(s), off);
                    }
                }
                off += s.len() + 1;
            }
        }
        idx
    }

    /// The offset of `name`, appending it to `btf`'s strings the first time.
    pub fn intern(&mut self, btf: &mut Btf, name: Name<'_>) -> StrOffset {
        if name.is_empty() {
            return StrOffset::EMPTY;
        }
        let key = NameKey::of(name);
        if let Some(off) = self.recent.get(key) {
            return StrOffset(off);
        }
        let hash = hash_str(name.bytes());
        let off = self.intern_hashed(btf, hash, name.bytes());
        self.recent.set(key, off.0, hash);
        off
    }

    /// [`StrIndex::intern`] for bytes that are not in the input (an owned copy kept
    /// for later): looked up by content only, since their address may be reused
    /// for another string once they are freed.
    pub fn intern_owned(&mut self, btf: &mut Btf, s: &[u8]) -> StrOffset {
        if s.is_empty() {
            return StrOffset::EMPTY;
        }
        self.intern_hashed(btf, hash_str(s), s)
    }

    /// Merges strings `range` of a unit's table into the BTF's strings, in order,
    /// appending to `out` the offset of each.
    pub fn merge(
        &mut self,
        btf: &mut Btf,
        unit: &UnitStrings,
        range: std::ops::Range<usize>,
        out: &mut Vec<StrOffset>,
    ) {
        // Most strings are known to the run (an earlier unit gave them): their
        // offsets are copied in one go, and only the others, the unknown entries,
        // are looked at, in index order, which is the order new strings are
        // appended in. An unknown entry the worker learned since is known.
        let at = out.len();
        out.extend(unit.known[range.clone()].iter().map(|&k| StrOffset(k)));
        let first = unit
            .unknown
            .partition_point(|u| (u.i as usize) < range.start);
        for s in &unit.unknown[first..] {
            let i = s.i as usize;
            if i >= range.end {
                break;
            }
            let slot = &mut out[at + i - range.start];
            if slot.0 != 0 {
                continue;
            }
            *slot = match self.recent.get(s.key) {
                Some(off) => StrOffset(off),
                None => {
                    let off = self.intern_hashed(btf, unit.hashes[i], unit.unknown_bytes(s));
                    self.recent.set(s.key, off.0, unit.hashes[i]);
                    off
                }
            };
        }
        // Every string not known has an unknown entry (see `push_entry`).
        debug_assert!(out[at..].iter().all(|o| o.0 != 0), "a string left unmerged");
    }

    /// The address cache, for the workers to read ([`UnitInterner::learn_known`]).
    pub fn addr_cache(&self) -> Arc<AddrCache> {
        Arc::clone(&self.recent)
    }

    /// The offset of `s` (whose hash is `hash`), appending it the first time.
    fn intern_hashed(&mut self, btf: &mut Btf, hash: u64, s: &[u8]) -> StrOffset {
        if let Some(off) = self.lookup(btf, hash, s) {
            return StrOffset(off);
        }
        let off = btf.push_str(s);
        self.insert(hash, off.0);
        off
    }

    fn lookup(&self, btf: &Btf, hash: u64, s: &[u8]) -> Option<u32> {
        let &off = self.map.get(&hash)?;
        if btf.str_bytes(StrOffset(off)) == Some(s) {
            return Some(off);
        }
        self.overflow
            .iter()
            .find(|&&(h, off)| h == hash && btf.str_bytes(StrOffset(off)) == Some(s))
            .map(|&(_, off)| off)
    }

    fn insert(&mut self, hash: u64, off: u32) {
        if self.map.try_insert_hash(hash, off) {
            self.overflow.push((hash, off));
        }
    }
}

/// All strings of `btf`'s base chain and own section, root first: offsets into
/// the result are BTF string offsets.
fn base_chain_strings(btf: &Btf) -> Vec<u8> {
    let mut out = match btf.base() {
        Some(b) => base_chain_strings(b),
        None => Vec::new(),
    };
    out.extend_from_slice(btf.strings());
    out
}

#[cfg(test)]
mod tests;
