//! A bump arena owning everything parsed from one compile unit.
//!
//! A parser builds one unit's data in a [`CuArena`]; the data borrows the arena, so it
//! cannot outlive it, and dropping the arena frees the whole unit in one step (no
//! per-object frees, no fragmentation left behind). Anything that must outlive the unit
//! is copied out into owned memory before the arena is dropped.
//!
//! Every arena reports its size to a [`Tracker`] (by default the process-wide
//! [`GLOBAL`]), which counts live arenas and live bytes and keeps their peaks, so tests
//! and `--time` output can show how much parsed-but-unencoded memory existed at once.
//! [`rss`] reads the process's resident memory for the same reports; [`classes`] sizes
//! the vectors a worker makes anew for each unit so that the allocator keeps few of them.
//!
//! ```
//! static TRACKER: arena::Tracker = arena::Tracker::new();
//! let unit = arena::CuArena::with_tracker(&TRACKER);
//! let name: &str = unit.alloc_str("task_struct");
//! let offsets: &[u32] = unit.alloc_slice(&[0, 8, 16]);
//! assert_eq!((name, offsets.len()), ("task_struct", 3));
//! assert_eq!(TRACKER.stats().live_arenas, 1);
//! drop(unit); // the whole unit goes at once
//! assert_eq!(TRACKER.stats().live_bytes, 0);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod classes;
pub mod rss;

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use bumpalo::collections::{String as BumpString, Vec as BumpVec};
pub use bumpalo::Bump;

/// Live-arena and live-byte counters, shared by every arena that reports to it.
///
/// The counters are atomics so arenas created, grown and dropped on different threads
/// need no lock. `const`-constructible, so a test can own a `static` tracker of its own
/// and not see the arenas of tests running beside it.
#[derive(Debug, Default)]
pub struct Tracker {
    /// Arenas created and not yet dropped.
    live_arenas: AtomicUsize,
    /// The most arenas that were live at the same time since the last peak reset.
    peak_arenas: AtomicUsize,
    /// Bytes the live arenas have taken from the system (as last reported by each).
    live_bytes: AtomicUsize,
    /// The most live bytes seen at once since the last peak reset.
    peak_bytes: AtomicUsize,
    /// Arenas ever created through this tracker (never decreases).
    total_arenas: AtomicUsize,
}

/// A snapshot of a [`Tracker`]'s counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Arenas alive when the snapshot was taken.
    pub live_arenas: usize,
    /// The most arenas alive at once.
    pub peak_arenas: usize,
    /// Bytes held by the live arenas.
    pub live_bytes: usize,
    /// The most bytes held by arenas at once.
    pub peak_bytes: usize,
    /// Arenas ever created.
    pub total_arenas: usize,
}

/// The tracker [`CuArena::new`] reports to.
pub static GLOBAL: Tracker = Tracker::new();

impl Tracker {
    /// A tracker with every counter at zero.
    pub const fn new() -> Self {
        Self {
            live_arenas: AtomicUsize::new(0),
            peak_arenas: AtomicUsize::new(0),
            live_bytes: AtomicUsize::new(0),
            peak_bytes: AtomicUsize::new(0),
            total_arenas: AtomicUsize::new(0),
        }
    }

    /// The counters now. Each field is read atomically; the set is not one atomic read,
    /// which is fine for reporting.
    pub fn stats(&self) -> Stats {
        Stats {
            live_arenas: self.live_arenas.load(Ordering::Relaxed),
            peak_arenas: self.peak_arenas.load(Ordering::Relaxed),
            live_bytes: self.live_bytes.load(Ordering::Relaxed),
            peak_bytes: self.peak_bytes.load(Ordering::Relaxed),
            total_arenas: self.total_arenas.load(Ordering::Relaxed),
        }
    }

    /// Lowers the peaks to the current live values, to measure one phase on its own.
    pub fn reset_peaks(&self) {
        self.peak_arenas
            .store(self.live_arenas.load(Ordering::Relaxed), Ordering::Relaxed);
        self.peak_bytes
            .store(self.live_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    fn arena_created(&self) {
        self.total_arenas.fetch_add(1, Ordering::Relaxed);
        let live = self.live_arenas.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak_arenas.fetch_max(live, Ordering::Relaxed);
    }

    fn arena_dropped(&self, bytes: usize) {
        self.live_arenas.fetch_sub(1, Ordering::Relaxed);
        self.live_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    fn bytes_shrank(&self, by: usize) {
        self.live_bytes.fetch_sub(by, Ordering::Relaxed);
    }

    fn bytes_grew(&self, by: usize) {
        let live = self.live_bytes.fetch_add(by, Ordering::Relaxed) + by;
        self.peak_bytes.fetch_max(live, Ordering::Relaxed);
    }
}

/// One compile unit's memory: a bump allocator plus size reporting.
///
/// Values allocated here are never dropped individually, so they must not own heap
/// memory outside the arena (the typed helpers reject types that need `Drop` at
/// compile time). The arena is `Send` but not `Sync`: a worker builds a unit in it and
/// hands the whole arena to whichever thread encodes the unit.
#[derive(Debug)]
pub struct CuArena {
    /// The allocator holding the unit's data.
    bump: Bump,
    /// Where size changes are reported.
    tracker: &'static Tracker,
    /// Bytes already added to `tracker.live_bytes` on this arena's behalf; subtracted
    /// again on drop.
    reported: Cell<usize>,
}

impl Default for CuArena {
    fn default() -> Self {
        Self::new()
    }
}

impl CuArena {
    /// A new, empty arena reporting to [`GLOBAL`].
    pub fn new() -> Self {
        Self::with_tracker(&GLOBAL)
    }

    /// A new, empty arena reporting to `tracker`.
    pub fn with_tracker(tracker: &'static Tracker) -> Self {
        Self::from_bump(Bump::new(), tracker)
    }

    /// A new arena with room for `bytes` before it asks the system for more, reporting
    /// to [`GLOBAL`]. Sizing the first chunk from the unit's input size saves regrowth.
    pub fn with_capacity(bytes: usize) -> Self {
        Self::from_bump(Bump::with_capacity(bytes), &GLOBAL)
    }

    fn from_bump(bump: Bump, tracker: &'static Tracker) -> Self {
        tracker.arena_created();
        let arena = Self {
            bump,
            tracker,
            reported: Cell::new(0),
        };
        arena.report();
        arena
    }

    /// The allocator itself, for `bumpalo` collections ([`BumpVec`], [`BumpString`]).
    /// Call [`CuArena::report`] after building through it directly, so the tracker sees
    /// the growth before the arena is handed on (the typed helpers report by
    /// themselves).
    pub fn bump(&self) -> &Bump {
        &self.bump
    }

    /// Bytes the arena has taken from the system (its chunks, not what is used in them).
    pub fn allocated_bytes(&self) -> usize {
        self.bump.allocated_bytes()
    }

    /// Tells the tracker about growth since the last report. Cheap: the arena only grows
    /// chunk by chunk, so almost every call finds nothing new and touches no atomic.
    pub fn report(&self) {
        let now = self.bump.allocated_bytes();
        let before = self.reported.get();
        if now > before {
            self.tracker.bytes_grew(now - before);
            self.reported.set(now);
        }
    }

    /// Frees the whole unit at once, like dropping the arena, but keeps the arena's
    /// largest chunk for the next unit: an engine that recycles a few arenas then
    /// stops handing chunks back to the allocator and asking for them again, which
    /// with one allocator heap per thread leaves each thread's heap holding freed
    /// chunks of its own.
    pub fn reset(&mut self) {
        self.bump.reset();
        let now = self.bump.allocated_bytes();
        let before = self.reported.get();
        if now < before {
            self.tracker.bytes_shrank(before - now);
            self.reported.set(now);
        }
    }

    /// The addresses (`start..end`) the unit used in the chunk [`CuArena::reset`]
    /// keeps, if any: bumpalo allocates downwards from a chunk's end, so the unit's
    /// bytes are the top `end - start` of that chunk. For a caller that gives the
    /// pages of a large unit back before the arena is pooled (the crate itself
    /// does not touch the system).
    pub fn kept_chunk_used(&mut self) -> Option<std::ops::Range<usize>> {
        let used = self.bump.iter_allocated_chunks().next()?;
        let start = used.as_ptr() as usize;
        Some(start..start + used.len())
    }

    /// Moves `value` into the arena.
    pub fn alloc<T>(&self, value: T) -> &mut T {
        const {
            assert!(
                !std::mem::needs_drop::<T>(),
                "arena values are never dropped"
            )
        };
        let out = self.bump.alloc(value);
        self.report();
        out
    }

    /// Copies `items` into the arena.
    pub fn alloc_slice<T: Copy>(&self, items: &[T]) -> &mut [T] {
        let out = self.bump.alloc_slice_copy(items);
        self.report();
        out
    }

    /// Collects an iterator of known length into an arena slice.
    pub fn alloc_iter<T, I>(&self, items: I) -> &mut [T]
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: ExactSizeIterator,
    {
        const {
            assert!(
                !std::mem::needs_drop::<T>(),
                "arena values are never dropped"
            )
        };
        let out = self.bump.alloc_slice_fill_iter(items);
        self.report();
        out
    }

    /// Copies `text` into the arena.
    pub fn alloc_str(&self, text: &str) -> &mut str {
        let out = self.bump.alloc_str(text);
        self.report();
        out
    }

    /// An empty vector growing inside the arena, for lists whose length is not known
    /// up front. Call [`CuArena::report`] once it is built.
    pub fn vec<T>(&self) -> BumpVec<'_, T> {
        BumpVec::new_in(&self.bump)
    }
}

impl Drop for CuArena {
    fn drop(&mut self) {
        // The chunks are freed when `bump` drops right after this; the tracker only ever
        // saw `reported` bytes, so that is what it gets back.
        self.tracker.arena_dropped(self.reported.get());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_frees_all_but_one_chunk() {
        static T: Tracker = Tracker::new();
        let mut arena = CuArena::with_tracker(&T);
        for i in 0..10_000u32 {
            arena.alloc_slice(&[i; 16]);
        }
        arena.report();
        let grown = T.stats().live_bytes;
        arena.reset();
        let after = T.stats().live_bytes;
        assert!(after < grown, "{after} < {grown}");
        assert_eq!(after, arena.allocated_bytes());
        assert_eq!(T.stats().live_arenas, 1);
        drop(arena);
        assert_eq!(T.stats().live_bytes, 0);
    }

    #[test]
    fn kept_chunk_used_is_the_top_of_the_kept_chunk() {
        static T: Tracker = Tracker::new();
        let mut arena = CuArena::with_tracker(&T);
        assert_eq!(arena.kept_chunk_used().map(|r| r.len()).unwrap_or(0), 0);
        // Two chunks: the range is that of the newer, the one a reset keeps.
        arena.alloc_slice(&[1u8; 1000]);
        let big = arena.alloc_slice(&[2u8; 64 << 10]).as_ptr() as usize;
        let used = arena.kept_chunk_used().unwrap();
        assert!(used.contains(&big) && used.contains(&(big + (64 << 10) - 1)));
        assert!(used.len() >= 64 << 10, "{used:?}");
        let kept = arena.allocated_bytes();
        arena.reset();
        assert!(arena.allocated_bytes() < kept);
        assert_eq!(arena.kept_chunk_used().map(|r| r.len()).unwrap_or(0), 0);
    }

    #[test]
    fn helpers_copy_data_and_size_grows() {
        static T: Tracker = Tracker::new();
        let arena = CuArena::with_tracker(&T);
        let start = arena.allocated_bytes();
        let n = arena.alloc(42u64);
        *n += 1;
        let s = arena.alloc_str("task_struct");
        let xs = arena.alloc_slice(&[1u32, 2, 3]);
        let ys = arena.alloc_iter((0..4u16).map(|i| i * 10));
        assert_eq!(*n, 43);
        assert_eq!(s, "task_struct");
        assert_eq!(xs, &[1, 2, 3]);
        assert_eq!(ys, &[0, 10, 20, 30]);
        let big = arena.alloc_iter(std::iter::repeat_n(7u8, 1 << 20));
        assert_eq!(big.len(), 1 << 20);
        assert!(arena.allocated_bytes() >= start + (1 << 20));
        assert_eq!(T.stats().live_bytes, arena.allocated_bytes());
    }

    #[test]
    fn tracker_counts_live_arenas_and_bytes_and_keeps_peaks() {
        static T: Tracker = Tracker::new();
        let a = CuArena::with_tracker(&T);
        let b = CuArena::with_tracker(&T);
        a.alloc_iter(std::iter::repeat_n(0u8, 100_000));
        b.alloc_iter(std::iter::repeat_n(0u8, 300_000));
        let both = a.allocated_bytes() + b.allocated_bytes();
        let s = T.stats();
        assert_eq!(s.live_arenas, 2);
        assert_eq!(s.peak_arenas, 2);
        assert_eq!(s.total_arenas, 2);
        assert_eq!(s.live_bytes, both);
        assert_eq!(s.peak_bytes, both);

        let a_bytes = a.allocated_bytes();
        drop(a);
        let s = T.stats();
        assert_eq!(s.live_arenas, 1);
        assert_eq!(s.live_bytes, both - a_bytes);
        assert_eq!(s.peak_bytes, both, "the peak survives the drop");

        T.reset_peaks();
        let s = T.stats();
        assert_eq!((s.peak_arenas, s.peak_bytes), (1, both - a_bytes));
        drop(b);
        let s = T.stats();
        assert_eq!((s.live_arenas, s.live_bytes, s.total_arenas), (0, 0, 2));
    }

    #[test]
    fn growth_through_bump_is_seen_after_report() {
        static T: Tracker = Tracker::new();
        let arena = CuArena::with_tracker(&T);
        let mut v = arena.vec::<u64>();
        v.extend(0..100_000);
        assert!(T.stats().live_bytes < arena.allocated_bytes());
        arena.report();
        assert_eq!(T.stats().live_bytes, arena.allocated_bytes());
        assert_eq!(v.iter().sum::<u64>(), 99_999 * 100_000 / 2);
    }

    #[test]
    fn arena_moves_to_another_thread_and_is_freed_there() {
        static T: Tracker = Tracker::new();
        let arena = CuArena::with_tracker(&T);
        arena.alloc_str("built on one thread");
        std::thread::spawn(move || {
            assert_eq!(arena.alloc_str("x"), "x");
            drop(arena);
        })
        .join()
        .unwrap();
        let s = T.stats();
        assert_eq!((s.live_arenas, s.live_bytes, s.total_arenas), (0, 0, 1));
        assert!(s.peak_bytes > 0);
    }

    #[test]
    fn many_threads_keep_counters_consistent() {
        static T: Tracker = Tracker::new();
        std::thread::scope(|s| {
            for t in 0..4 {
                s.spawn(move || {
                    for i in 0..200 {
                        let a = CuArena::with_tracker(&T);
                        a.alloc_iter(std::iter::repeat_n(1u8, 1000 * (t + i % 7)));
                    }
                });
            }
        });
        let s = T.stats();
        assert_eq!((s.live_arenas, s.live_bytes, s.total_arenas), (0, 0, 800));
        assert!((1..=4).contains(&s.peak_arenas));
    }
}
