//! Which structure interns the encoder's names best: `cargo bench --bench strings`.
//!
//! The workload is the encoder's: every `DW_AT_name` of the corpus vmlinux's
//! `.debug_info`, in unit and DIE order, each a slice starting in `.debug_str` (the
//! linker merged equal strings there, so a repeated name is mostly the same address),
//! each interned into a BTF string section and answered with its BTF offset. Compared:
//! - `StrIndex`, the encoder's (an address cache in front of an Fx-hashed map);
//! - `string-interner` 0.17 (`StringBackend`, with its default hasher and with Fx),
//!   plus the symbol → offset table that BTF needs, since its symbols are indices and
//!   its buffer has no NUL separators: the BTF string section is built beside it.
//!
//! Reports, per structure, the best of 3 runs' time and the peak of the bytes it and
//! the string section allocate (a counting allocator), and checks that every structure
//! gives the same offset for every name.

use dwarf2btf::btf::{Btf, StrOffset};
use dwarf2btf::dwarf::types::Name;
use dwarf2btf::encode::strings::StrIndex;
use dwarf2btf::hash::FxHasher;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

#[path = "../tests/common/mod.rs"]
mod common;

/// The system allocator, counting live and peak bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are
// only statistics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Every name attribute's raw slice of `.debug_str`, in DIE order.
fn names(data: &[u8]) -> Vec<&[u8]> {
    use object::{Object, ObjectSection};
    let elf = object::File::parse(data).expect("the corpus vmlinux is an ELF file");
    let section = |name: &str| -> &[u8] {
        elf.section_by_name(name)
            .and_then(|s| s.data().ok())
            .unwrap_or(&[])
    };
    let endian = gimli::RunTimeEndian::Little;
    let dwarf = gimli::Dwarf {
        debug_info: gimli::DebugInfo::new(section(".debug_info"), endian),
        debug_abbrev: gimli::DebugAbbrev::new(section(".debug_abbrev"), endian),
        debug_str: gimli::DebugStr::new(section(".debug_str"), endian),
        ..Default::default()
    };
    let strs = section(".debug_str");
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(abbrevs) = header.abbreviations(&dwarf.debug_abbrev) else {
            continue;
        };
        let mut entries = header.entries(&abbrevs);
        while let Ok(Some((_, entry))) = entries.next_dfs() {
            if let Ok(Some(gimli::AttributeValue::DebugStrRef(off))) =
                entry.attr_value(gimli::DW_AT_name)
            {
                if let Some(raw) = strs.get(off.0..) {
                    out.push(raw);
                }
            }
        }
    }
    out
}

/// Runs `f` three times; the best time in seconds, the peak bytes it allocated, and
/// the offsets of its last run.
fn measure(f: impl Fn() -> Vec<u32>) -> (f64, usize, Vec<u32>) {
    let mut best = f64::MAX;
    let mut peak = 0;
    let mut offsets = Vec::new();
    for _ in 0..3 {
        drop(offsets);
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let t = Instant::now();
        offsets = f();
        best = best.min(t.elapsed().as_secs_f64());
        // The offsets vector is the answer, not the structure: left out.
        let answer = offsets.capacity() * 4;
        peak = PEAK.load(Ordering::Relaxed) - before - answer;
    }
    (best, peak, offsets)
}

fn ours(names: &[&[u8]]) -> Vec<u32> {
    let mut btf = Btf::new(None);
    let mut index = StrIndex::default();
    names
        .iter()
        .map(|&raw| index.intern(&mut btf, Name::new(raw)).0)
        .collect()
}

fn interner<H: std::hash::BuildHasher + Default>(names: &[&[u8]]) -> Vec<u32> {
    use string_interner::{backend::StringBackend, symbol::SymbolU32, Symbol};
    let mut interner =
        string_interner::StringInterner::<StringBackend<SymbolU32>, H>::with_hasher(H::default());
    let mut btf = Btf::new(None);
    // Symbol index → BTF offset.
    let mut offsets: Vec<StrOffset> = Vec::new();
    names
        .iter()
        .map(|&raw| {
            let bytes = Name::new(raw).bytes();
            if bytes.is_empty() {
                return 0;
            }
            // Kernel names are ASCII; a name that is not UTF-8 would need a byte
            // interner, which string-interner is not.
            let s = std::str::from_utf8(bytes).expect("UTF-8 name");
            let sym = interner.get_or_intern(s).to_usize();
            if sym == offsets.len() {
                offsets.push(btf.push_str(bytes));
            }
            offsets[sym].0
        })
        .collect()
}

fn main() {
    let Some(vmlinux) = common::vmlinux() else {
        return;
    };
    let data = std::fs::read(&vmlinux).expect("read the corpus vmlinux");
    let names = names(&data);
    let distinct = names
        .iter()
        .map(|&r| Name::new(r).bytes())
        .collect::<std::collections::HashSet<_>>()
        .len();
    println!(
        "{} names ({} distinct) from {}",
        names.len(),
        distinct,
        vmlinux.display()
    );
    let runs: [(&str, &dyn Fn() -> Vec<u32>); 3] = [
        ("StrIndex (ours)", &|| ours(&names)),
        ("string-interner, default hasher", &|| {
            interner::<string_interner::DefaultHashBuilder>(&names)
        }),
        ("string-interner, Fx hasher", &|| {
            interner::<BuildHasherDefault<FxHasher>>(&names)
        }),
    ];
    let mut first: Option<Vec<u32>> = None;
    println!("| structure | time (best of 3) | peak bytes | vs ours |");
    println!("| --- | --- | --- | --- |");
    let mut ours_time = 0.0;
    for (name, f) in runs {
        let (time, peak, offsets) = measure(f);
        match &first {
            None => {
                ours_time = time;
                first = Some(offsets);
            }
            Some(want) => assert!(*want == offsets, "{name} gives other offsets"),
        }
        println!(
            "| {name} | {:.3} s | {:.1} MB | {:.2}x |",
            time,
            peak as f64 / 1e6,
            time / ours_time
        );
    }
}
