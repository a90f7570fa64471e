//! The crate's dealings with the operating system that need `unsafe`, fenced in one
//! module: mapping input files ([`map_file`], the one constructor of a mapping),
//! giving the pages of consumed input back ([`release_range`]), so the mapped input
//! does not stay resident, the same for the deep end of a pooled unit arena
//! ([`reset_arena`]), the allocator's options ([`tune_allocator`]), and the
//! calling thread's exact CPU time for `--time` ([`thread_cpu_ns`]).
//! Everything else in the crate is `#![deny(unsafe_code)]`.
//!
//! Reading a CU through the mapping of the input file faults its pages in, and they
//! count in our RSS until unmapped: a vmlinux's `.debug_info` alone is hundreds of MB.
//! Once a CU is encoded its bytes are never read again, so its pages are dropped with
//! `madvise(MADV_DONTNEED)`. Should they be read again after all, they fault back in from
//! the page cache with the same contents; releasing costs time, never correctness.

use std::io;
use std::ops::Range;
use std::sync::OnceLock;

use arena::CuArena;
use memmap2::{Mmap, UncheckedAdvice};

/// Maps `file` read-only and private. Every input (ELF, raw BTF, a base) is read
/// through this one constructor.
pub fn map_file(file: &std::fs::File) -> io::Result<Mmap> {
    // SAFETY: the mapping is read-only and private; we only ever read it. The file is
    // an input of the build that nothing should modify while we run; if another
    // process truncates it anyway we may get SIGBUS, as every tool that maps its input
    // (pahole through libelf included) may. Output never goes into a mapped file: it
    // is written to a new file renamed over the old one.
    unsafe { Mmap::map(file) }
}

/// The system page size, from the auxiliary vector the kernel hands every process
/// (`AT_PAGESZ`), read without `unsafe`; 4096 if it cannot be read.
pub fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        std::fs::read("/proc/self/auxv")
            .ok()
            .and_then(|auxv| auxv_page_size(&auxv))
            .unwrap_or(4096)
    })
}

/// `AT_PAGESZ` out of an auxiliary vector: native-endian `(key, value)` word pairs.
fn auxv_page_size(auxv: &[u8]) -> Option<usize> {
    const AT_PAGESZ: usize = 6;
    const WORD: usize = std::mem::size_of::<usize>();
    let word = |bytes: &[u8]| usize::from_ne_bytes(bytes.try_into().expect("WORD bytes"));
    auxv.chunks_exact(2 * WORD)
        .map(|pair| (word(&pair[..WORD]), word(&pair[WORD..])))
        .find(|&(key, _)| key == AT_PAGESZ)
        .map(|(_, value)| value)
        .filter(|page| page.is_power_of_two())
}

/// The offsets of the whole pages inside `range` of a mapping of `map_len` bytes that
/// starts at address `base`. A range reaching the end of the mapping also takes the last,
/// partial page: its tail past the file's end belongs to the mapping too.
fn whole_pages(base: usize, map_len: usize, range: Range<usize>, page: usize) -> Range<usize> {
    let start = (base + range.start).next_multiple_of(page) - base;
    let end = if range.end == map_len {
        (base + range.end).next_multiple_of(page) - base
    } else {
        (base + range.end) / page * page - base
    };
    if start < end {
        start..end.min(map_len)
    } else {
        start..start
    }
}

/// Drops from memory the pages lying wholly inside `range` of `map` (byte offsets into
/// the mapping); the pages at either end, shared with bytes outside `range`, stay.
/// Returns how many bytes were released.
pub fn release_range(map: &Mmap, range: Range<usize>) -> io::Result<usize> {
    if range.start > range.end || range.end > map.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("release {range:?}: outside the {}-byte mapping", map.len()),
        ));
    }
    let pages = whole_pages(map.as_ptr() as usize, map.len(), range, page_size());
    if pages.is_empty() {
        return Ok(0);
    }
    // SAFETY: `Mmap` is a read-only mapping of a file (shared, or private and never
    // written), so MADV_DONTNEED only drops page-table entries: the next access faults
    // the same bytes back in from the page cache. No borrow of the mapping can observe a
    // change as long as the file is not modified, which mapping it already assumes.
    // `pages` lies inside the mapping and is page-aligned.
    unsafe { map.unchecked_advise_range(UncheckedAdvice::DontNeed, pages.start, pages.len())? };
    Ok(pages.len())
}

/// Resets `arena` for the next unit (see [`CuArena::reset`]), first giving the
/// system back the pages its unit used below the top `resident` bytes of the chunk
/// the arena keeps. A pooled arena otherwise stays resident as deep as the largest
/// unit it ever held reached, in every pooled arena at once; the next unit that
/// goes that deep faults the pages in again, zeroed, which costs time only.
/// Returns how many bytes were given back.
pub fn reset_arena(arena: &mut CuArena, resident: usize) -> usize {
    let released = match arena.kept_chunk_used() {
        Some(used) if used.len() > resident => {
            // Addresses as offsets from 0, in a "mapping" no range reaches the end
            // of: the whole pages inside, rounded inward at both ends.
            let pages = whole_pages(0, usize::MAX, used.start..used.end - resident, page_size());
            let (start, end) = (pages.start, pages.end);
            if start < end && cfg!(target_os = "linux") {
                // SAFETY: `start..end` lies inside the chunk `arena` owns and keeps
                // (whole pages of the part its last unit used), which nothing else
                // refers to: the arena is borrowed mutably, so none of the unit's
                // values is alive, and it is reset right below. The chunk is heap
                // memory, private and anonymous, so MADV_DONTNEED only drops the
                // pages' contents, which read back as zeros; the chunk's bumpalo
                // footer lies above `used.end` and is not touched.
                let rc =
                    unsafe { madvise(start as *mut std::ffi::c_void, end - start, MADV_DONTNEED) };
                if rc == 0 {
                    end - start
                } else {
                    0
                }
            } else {
                0
            }
        }
        _ => 0,
    };
    arena.reset();
    released
}

/// Linux's `MADV_DONTNEED`, 4 on every architecture Rust builds Linux for (on
/// other systems [`reset_arena`] gives nothing back). Declared here rather than
/// through a crate for one constant and one call.
const MADV_DONTNEED: std::ffi::c_int = 4;

extern "C" {
    fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: std::ffi::c_int)
        -> std::ffi::c_int;
}

/// Where `part` lies in `map` (byte offsets), or None for a slice that is not part
/// of the mapping (an owned copy: an inflated or relocated section).
pub fn range_in(map: &Mmap, part: &[u8]) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).wrapping_sub(map.as_ptr() as usize);
    (start <= map.len() && part.len() <= map.len() - start).then(|| start..start + part.len())
}

/// [`release_range`] for a slice borrowed from `map`, e.g. one section or one CU.
pub fn release_pages(map: &Mmap, part: &[u8]) -> io::Result<usize> {
    let Some(range) = range_in(map, part) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "release: the slice does not lie inside the mapping",
        ));
    };
    release_range(map, range)
}

/// The parts of `0..len` that none of the ranges `keep` covers, in order. An empty
/// range keeps nothing and splits no gap (a split inside a page would keep that
/// page: [`release_range`] releases whole pages only).
pub fn gaps(mut keep: Vec<Range<usize>>, len: usize) -> Vec<Range<usize>> {
    keep.retain(|r| !r.is_empty());
    keep.sort_unstable_by_key(|r| r.start);
    let mut out = Vec::new();
    let mut from = 0;
    for r in keep {
        if r.start > from {
            out.push(from..r.start.min(len));
        }
        from = from.max(r.end);
    }
    if from < len {
        out.push(from..len);
    }
    out.retain(|r| !r.is_empty());
    out
}

/// Releases a region of a mapping front to back as it is consumed in order: CU after CU
/// of `.debug_info`. A page shared by two CUs is released once the second one is done.
#[derive(Debug, Clone)]
pub struct ReleaseFront {
    /// Offset in the mapping below which everything is released (page-aligned).
    done: usize,
    /// Where the region ends: reaching it releases the last partial page too.
    end: usize,
}

impl ReleaseFront {
    /// Tracks `region` (byte offsets into the mapping), nothing released yet.
    pub fn new(region: Range<usize>) -> Self {
        ReleaseFront {
            done: region.start,
            end: region.end,
        }
    }

    /// Everything in the region before offset `upto` has been consumed: release the
    /// pages that lie wholly before it and were not released yet. Returns the bytes
    /// released.
    pub fn release_through(&mut self, map: &Mmap, upto: usize) -> io::Result<usize> {
        let upto = upto.min(self.end);
        if upto <= self.done {
            return Ok(0);
        }
        let released = release_range(map, self.done..upto)?;
        if released > 0 {
            let base = map.as_ptr() as usize;
            self.done = whole_pages(base, map.len(), self.done..upto, page_size()).end;
        }
        Ok(released)
    }
}

/// Releases one section of the input part by part, each unit's part once the unit is
/// done, with offsets into the section. Unlike [`ReleaseFront`] it does not assume the
/// parts only move forward: units that share one part (a kernel whose units' headers
/// point at the same abbreviations or location lists) take it back in when they read
/// it again, and it is released again after them.
///
/// Parts are released [`SectionParts::STEP`] bytes at a time, not each on its own: a
/// kernel's units are about 80 KB of `.debug_info` each, and with two threads every
/// `madvise` interrupts the other CPU to flush its TLB, which on a virtual machine
/// costs more than the call itself (on the corpus vmlinux at -j2, a call per unit and
/// section: 0.26 s of system time; in steps of 512 KB: 0.16 s, 0.953× the wall time,
/// and 0.5 MB more peak RSS).
#[derive(Debug, Clone)]
pub struct SectionParts {
    /// Offset of the section in the mapping, and its length.
    start: usize,
    len: usize,
    /// Where the last part began (an offset into the section).
    mark: usize,
}

impl SectionParts {
    /// The least span of consumed bytes worth a release; the section's end is
    /// released whatever its span.
    pub const STEP: usize = 512 << 10;

    /// Tracks `section`, a slice of `map`; None for an empty section or one that is
    /// an owned copy (inflated or relocated) rather than part of the mapping.
    pub fn new(map: &Mmap, section: &[u8]) -> Option<SectionParts> {
        let range = range_in(map, section).filter(|r| !r.is_empty())?;
        Some(SectionParts {
            start: range.start,
            len: range.len(),
            mark: 0,
        })
    }

    /// The bytes not consumed yet, from the last mark to the section's end (offsets
    /// in the mapping).
    pub fn unconsumed(&self) -> Range<usize> {
        self.start + self.mark..self.start + self.len
    }

    /// The next part begins at `offset`: everything from the last mark up to it is
    /// consumed. Once that is [`SectionParts::STEP`] bytes or more, or reaches the
    /// section's end, releases its whole pages and returns how many bytes.
    pub fn next_part(&mut self, map: &Mmap, offset: usize) -> io::Result<usize> {
        let offset = offset.min(self.len);
        if offset > self.mark && offset < self.len && offset - self.mark < Self::STEP {
            // Not enough yet: the mark stays, and a later part releases this one too.
            return Ok(0);
        }
        let from = std::mem::replace(&mut self.mark, offset);
        if from >= offset {
            return Ok(0);
        }
        // The page the last part began in holds the end of the part before it, also
        // consumed: take it too, or one page per part would stay.
        let base = map.as_ptr() as usize;
        let page = page_size();
        let lo = ((base + self.start + from) / page * page).saturating_sub(base);
        release_range(map, lo.max(self.start)..self.start + offset)
    }
}

/// The allocator the command installs (`#[global_allocator]` in `src/main.rs`): the
/// encoder allocates millions of small blocks on one thread and the dedup stage reads
/// them on another; mimalloc's per-thread heaps serve that with less CPU than glibc's
/// malloc (about 15% less at -j2 on the corpus vmlinux).
pub type Allocator = mimalloc::MiMalloc;

/// Memory must follow the output: makes [`Allocator`] give freed pages back to the
/// system at once (`purge_delay` 0; this mimalloc waits 1 s by default, while a run
/// frees a unit's worth every fraction of a millisecond) and collect freed blocks
/// more often (`generic_collect`), unless the user set `MIMALLOC_PURGE_DELAY` or
/// `MIMALLOC_GENERIC_COLLECT`. Call it first thing in `main`, before any thread
/// starts.
/// Arena memory is committed as it is used by a compile-time default
/// (.cargo/config.toml).
pub fn tune_allocator() {
    // The option number is that of the `mi_option_e` of the mimalloc v3 that
    // `libmimalloc-sys` builds (include/mimalloc.h).
    const PURGE_DELAY: std::ffi::c_int = 15;
    const GENERIC_COLLECT: std::ffi::c_int = 34;
    extern "C" {
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    for (name, option, value) in [
        ("MIMALLOC_PURGE_DELAY", PURGE_DELAY, 0),
        // Each thread's heap collects what other threads freed into it (a unit
        // is built by one worker and freed by whichever holds the token) every
        // 1,000 allocations that miss the fast path instead of every 10,000: that
        // memory otherwise waits in the builder's heap, so each worker added its
        // own. Corpus vmlinux, six interleaved runs each: peak RSS at -j2 53.5 ->
        // 52.1-52.4 MB, at -j1 47.9 -> 47.6 MB; system time at -j2 +0.03 s, the
        // CPU time within the runs' spread (2,000: 52.5 MB, 4,000: 52.9 MB).
        ("MIMALLOC_GENERIC_COLLECT", GENERIC_COLLECT, 1000),
    ] {
        if std::env::var_os(name).is_none() {
            // SAFETY: mimalloc's option setter (`void mi_option_set(mi_option_t,
            // long)`, the enum passed as an int), from the library `Allocator`
            // links in; it only stores the value, and reading options is
            // thread-safe in mimalloc.
            unsafe { mi_option_set(option, value) };
        }
    }
}

/// The calling thread's CPU time in nanoseconds, exact to the moment of the call
/// (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`, which brings the running thread's count
/// up to date first; `/proc/thread-self/schedstat` is only updated at the scheduler's
/// ticks and switches, which put calls of a fraction of a millisecond at -j2 a fifth
/// short). None where the call fails or `struct timespec` is not two `long`s.
pub fn thread_cpu_ns() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    {
        /// `struct timespec` of 64-bit Linux: `time_t` and `long`, both 64 bits.
        #[repr(C)]
        struct Timespec {
            tv_sec: std::ffi::c_long,
            tv_nsec: std::ffi::c_long,
        }
        const CLOCK_THREAD_CPUTIME_ID: std::ffi::c_int = 3;
        extern "C" {
            fn clock_gettime(clock: std::ffi::c_int, tp: *mut Timespec) -> std::ffi::c_int;
        }
        let mut ts = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: the C library's `clock_gettime` with a clock id Linux defines and a
        // pointer to a live, writable `struct timespec` of the layout above; it writes
        // only that struct.
        let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc == 0 {
            let secs = u64::try_from(ts.tv_sec).ok()?;
            let nanos = u64::try_from(ts.tv_nsec).ok()?;
            return secs.checked_mul(1_000_000_000)?.checked_add(nanos);
        }
        None
    }
    #[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_time_counts_work_not_sleep() {
        if !cfg!(all(target_os = "linux", target_pointer_width = "64")) {
            assert_eq!(thread_cpu_ns(), None);
            return;
        }
        // Sleeping costs (next to) no CPU time, however busy the machine is.
        let a = thread_cpu_ns().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = thread_cpu_ns().unwrap();
        assert!(b - a < 10_000_000, "asleep 20 ms, yet {} ns of CPU", b - a);
        // Spinning does, and never more than the wall time around it (the thread may
        // be preempted by the other tests, so the spin is measured, not timed; the
        // two clocks may run apart by NTP's slew, far below the 1% allowed).
        let spin = std::time::Instant::now();
        let b = thread_cpu_ns().unwrap();
        let mut x = 0u64;
        let mut c = b;
        while c - b < 20_000_000 {
            assert!(spin.elapsed().as_secs() < 20, "the clock does not advance");
            x = std::hint::black_box(x.wrapping_add(1));
            c = thread_cpu_ns().unwrap();
        }
        let wall = u64::try_from(spin.elapsed().as_nanos()).unwrap();
        assert!(
            c - b <= wall + wall / 100,
            "{} ns of CPU in {wall} ns of wall time",
            c - b
        );
    }

    #[test]
    fn a_pooled_arena_gives_its_deep_pages_back_and_still_works() {
        let page = page_size();
        let mut arena = CuArena::with_capacity(4 << 20);
        // A shallow unit: nothing to give back.
        arena.alloc_slice(&[1u8; 4096]);
        assert_eq!(reset_arena(&mut arena, 512 << 10), 0);
        // A deep one: what lies below the top 512 KiB, in whole pages.
        let deep = arena.alloc_iter(std::iter::repeat_n(7u8, 3 << 20));
        assert!(deep.iter().all(|&b| b == 7));
        let released = reset_arena(&mut arena, 512 << 10);
        if cfg!(target_os = "linux") {
            assert!(released.is_multiple_of(page), "{released}");
            assert!(
                released > (3 << 20) - (512 << 10) - 2 * page
                    && released <= (3 << 20) - (512 << 10),
                "{released}"
            );
        } else {
            assert_eq!(released, 0);
        }
        // The chunk is kept and serves the next unit, given-back pages included.
        let kept = arena.allocated_bytes();
        let pattern: Vec<u8> = (0..=250u8).cycle().take(3 << 20).collect();
        let again = arena.alloc_slice(&pattern);
        assert!(again == &pattern[..]);
        assert_eq!(arena.allocated_bytes(), kept);
    }

    #[test]
    fn section_parts_are_released_a_step_at_a_time() {
        let len = 4 * SectionParts::STEP;
        let map = memmap2::MmapOptions::new()
            .len(len)
            .map_anon()
            .and_then(memmap2::MmapMut::make_read_only)
            .unwrap();
        let mut parts = SectionParts::new(&map, &map[..]).unwrap();
        let page = page_size();
        // Parts smaller than a step wait for the next ones.
        assert_eq!(parts.next_part(&map, page).unwrap(), 0);
        assert_eq!(parts.next_part(&map, SectionParts::STEP / 2).unwrap(), 0);
        // A step's worth releases them all at once, from the section's start.
        let at = SectionParts::STEP + 3 * page;
        assert_eq!(parts.next_part(&map, at).unwrap(), at);
        // A part read again (shared by two units) came back in: it is released again.
        assert_eq!(parts.next_part(&map, page).unwrap(), 0);
        assert_eq!(parts.next_part(&map, at).unwrap(), at - page);
        // The section's end is released however little is left.
        let mut tail = SectionParts::new(&map, &map[..]).unwrap();
        assert_eq!(tail.next_part(&map, len).unwrap(), len);
    }

    #[test]
    fn a_slice_is_placed_in_its_mapping_or_nowhere() {
        let map = memmap2::MmapOptions::new()
            .len(3 * page_size())
            .map_anon()
            .and_then(memmap2::MmapMut::make_read_only)
            .unwrap();
        assert_eq!(range_in(&map, &map[10..20]), Some(10..20));
        assert_eq!(range_in(&map, &map[..]), Some(0..map.len()));
        assert_eq!(
            range_in(&map, &map[map.len()..]),
            Some(map.len()..map.len())
        );
        // An owned copy lies elsewhere.
        let copy = map[10..20].to_vec();
        assert_eq!(range_in(&map, &copy), None);
        assert!(SectionParts::new(&map, &copy).is_none());
        assert!(SectionParts::new(&map, &map[5..5]).is_none(), "empty");
        assert!(release_pages(&map, &copy).is_err());
    }

    #[test]
    fn page_size_is_sane() {
        let page = page_size();
        assert!(page.is_power_of_two() && page >= 4096, "{page}");
    }

    #[test]
    fn auxv_parsing() {
        let mut auxv = Vec::new();
        for (k, v) in [(33usize, 0x7fff_0000usize), (6, 16384), (0, 0)] {
            auxv.extend_from_slice(&k.to_ne_bytes());
            auxv.extend_from_slice(&v.to_ne_bytes());
        }
        assert_eq!(auxv_page_size(&auxv), Some(16384));
        assert_eq!(auxv_page_size(&auxv[..16]), None);
    }

    #[test]
    fn gaps_are_what_no_kept_range_covers() {
        assert_eq!(gaps(vec![], 10), vec![0..10]);
        // Unsorted, overlapping, touching and past-the-end ranges.
        assert_eq!(
            gaps(vec![20..30, 2..4, 3..6, 6..8, 25..40], 50),
            vec![0..2, 8..20, 40..50]
        );
        assert_eq!(gaps(vec![0..5, 5..10], 10), vec![]);
        assert_eq!(gaps(vec![4..6, 8..12], 10), vec![0..4, 6..8]);
        // An empty kept range keeps nothing and does not split the gap.
        assert_eq!(gaps(vec![5..5, 20..20], 10), vec![0..10]);
        assert_eq!(gaps(vec![3..3, 6..8], 10), vec![0..6, 8..10]);
    }

    #[test]
    fn whole_pages_rounds_inward_except_at_the_mapping_end() {
        let base = 0x10000;
        let p = 4096;
        assert_eq!(whole_pages(base, 5 * p, 0..5 * p, p), 0..5 * p);
        assert_eq!(whole_pages(base, 5 * p, 1..5 * p - 1, p), p..4 * p);
        assert_eq!(whole_pages(base, 5 * p, p..2 * p, p), p..2 * p);
        assert_eq!(whole_pages(base, 5 * p, 10..p + 10, p), p..p);
        assert!(whole_pages(base, 5 * p, 10..20, p).is_empty());
        // The last, partial page goes with the range that reaches the mapping's end.
        assert_eq!(
            whole_pages(base, 3 * p + 5, p + 1..3 * p + 5, p),
            2 * p..3 * p + 5
        );
        // A mapping that does not start on a page (mapped at a file offset).
        assert_eq!(
            whole_pages(base + 100, 3 * p, 0..2 * p, p),
            p - 100..2 * p - 100
        );
    }
}
