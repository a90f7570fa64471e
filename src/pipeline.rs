//! The encoding run: ELF → DWARF units → (per unit, on a worker) arena → encoded
//! unit → (in unit order) strings, dedup, records → file.
//!
//! [`sched::run_ordered`] hands unit indices to the workers. A worker parses unit `i`
//! into an arena from a small pool ([`crate::dwarf::types::parse_cu`]), encodes it
//! ([`encode_unit`]) into an owned [`crate::encode::EncodedUnit`] (types with
//! unit-local ids, a unit-local string table, its function and variable records),
//! finds the strings earlier units gave the run in the run's address cache (as it
//! meets them, `UnitInterner::with_run_cache`, and after, `UnitInterner::learn_known`),
//! with an incremental dedup flattens its types for it as they are encoded
//! (`ordered::Flattening`, `ordered::ready_flat`: the dedup's work that needs no
//! other unit), and empties the arena back into the pool at once. Whichever worker
//! holds the token merges the next unit in order (`ordered::Ordered::add`): its
//! strings into the run's string section, its types into the run's BTF or the
//! incremental dedup (whole BTF; see [`DedupMode`]), its records, renumbered, into
//! the run's functions; then it releases the unit's input pages. A window bounds
//! the units encoded but not yet merged: a few, and with several workers more small
//! ones within a budget of input bytes.
//! DESIGN.md ("The engine") tells the whole story.
//!
//! The output bytes do not depend on `-j` or the window: encoding a unit depends on
//! nothing but the unit (and the file's symbols), and everything that spans units
//! happens in unit order.

use crate::btf::{self, Btf};
use crate::dedup::{Compat, DedupError, FinalPass, FinalStart, Incremental};
use crate::dwarf::types::{parse_cu, parse_group, CuTypes, PlanCache};
use crate::dwarf::{lto, DwarfInput};
use crate::elf::{ElfError, ElfInput, MappedElf, SymbolHalves};
use crate::encode::{
    encode_unit, encode_unit_into, EncoderState, Features, FuncEncoder, FuncRules, FuncSkip,
    Scratch, UnitContext,
};
use crate::mmap::SectionParts;
use crate::timing::{Busy, Timings};
use crate::Error;
use sched::LocalPool;
use std::cell::RefCell;
use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

mod ordered;

/// What to encode and where to write it (pahole's `-J` options).
#[derive(Clone, Debug)]
pub struct Options {
    /// The ELF file with DWARF to encode.
    pub input: PathBuf,
    /// `--btf_base`: the base BTF (raw or an ELF's `.BTF`) for split BTF.
    pub btf_base: Option<PathBuf>,
    /// `--btf_encode_detached`: write raw BTF to this file.
    pub detached: Option<PathBuf>,
    /// The features to encode.
    pub features: Features,
    /// DWARF language codes of units to skip (`--lang_exclude`).
    pub lang_exclude: Vec<u16>,
    /// Worker threads (`-j`); the encoding is the same for every value.
    pub jobs: usize,
}

/// How the final dedup is reached. Both give the bytes of libbpf's one-shot
/// `btf__dedup` of the whole encoded stream (pahole's) on every input we have checked;
/// they differ in time and memory, and the incremental one can differ in output in
/// corner cases (see [`crate::dedup`]'s module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DedupMode {
    /// [`DedupMode::Incremental`] for whole BTF (a vmlinux: memory would otherwise
    /// grow with its input), [`DedupMode::OneShot`] for split BTF (a module's stream
    /// is small, and one-shot is pahole's result by construction).
    #[default]
    Auto,
    /// Each unit's types are deduplicated against the types kept so far as the unit
    /// is merged in order, and the unit's records (saved function prototypes,
    /// variables) get the kept ids ([`FuncEncoder::add_unit`]); the functions and
    /// DATASECs are added after the
    /// last unit, and one final one-shot pass runs over the kept types and them.
    /// Memory follows the output, not the input.
    Incremental,
    /// Every unit's types are kept until the end and deduplicated in one pass, as
    /// pahole does.
    OneShot,
}

impl DedupMode {
    /// The mode for `--dedup=NAME`.
    pub fn parse(name: &str) -> Result<DedupMode, String> {
        match name {
            "auto" => Ok(DedupMode::Auto),
            "incremental" => Ok(DedupMode::Incremental),
            "one-shot" | "oneshot" => Ok(DedupMode::OneShot),
            _ => Err(format!(
                "--dedup: unknown mode '{name}' (auto, incremental or one-shot)"
            )),
        }
    }

    /// The mode used for an input with (`split`) or without a base.
    fn resolve(self, split: bool) -> DedupMode {
        match self {
            DedupMode::Auto if split => DedupMode::OneShot,
            DedupMode::Auto => DedupMode::Incremental,
            m => m,
        }
    }
}

/// Engine settings: time and memory. Workers and window never change the output;
/// the dedup mode can only in corner cases (see [`DedupMode`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tuning {
    /// Worker threads, overriding what `-j` gives ([`workers_for`]); tests use it to
    /// run more threads than the machine has CPUs.
    pub workers: Option<usize>,
    /// Most units in flight at once: being parsed and encoded, or encoded and
    /// waiting to be merged (unit `i` starts only once unit `i - window` is
    /// merged). Default: 2 with one worker; with more, the workers, and more
    /// units while those in flight stay within a budget of input bytes (see
    /// `AHEAD_MAX`); 2 for an LTO build's groups of units (see `encode_units`).
    /// A window set here is that many units, whatever their size.
    pub window: Option<usize>,
    /// How the dedup is reached.
    pub dedup: DedupMode,
    /// Where `--time` records the run's phases (none: not timed).
    pub timings: Option<&'static Timings>,
}

/// Runs one encoding as `pahole -J` does.
pub fn run(opts: &Options) -> Result<(), Error> {
    run_tuned(opts, &Tuning::default()).map(drop)
}

/// [`run`] with engine settings. Returns why functions were left out (what
/// pahole prints under `--verbose`).
pub fn run_tuned(opts: &Options, tuning: &Tuning) -> Result<Vec<FuncSkip>, Error> {
    let t = tuning.timings;
    let base = phase(t, "read the base BTF", || load_base(opts))?;
    let (bytes, skips, input) = encode_input_bytes(opts, tuning, base.clone())?;
    // With several workers, the output is checked on two more threads while it is
    // written.
    let threads = worker_count(opts, tuning) > 1;
    phase(t, "write", || {
        crate::emit::write_output(opts, &input, bytes, base.as_ref(), threads)
    })?;
    Ok(skips)
}

/// Encodes and deduplicates the input's DWARF: the raw `.BTF` bytes pahole writes.
pub fn encode_bytes(opts: &Options, tuning: &Tuning) -> Result<Vec<u8>, Error> {
    encode_bytes_over(opts, tuning, load_base(opts)?)
}

/// [`encode_bytes`] over a base already read (`opts.btf_base` is not read again).
pub fn encode_bytes_over(
    opts: &Options,
    tuning: &Tuning,
    base: Option<Arc<Btf>>,
) -> Result<Vec<u8>, Error> {
    Ok(encode_bytes_reported(opts, tuning, base)?.0)
}

/// [`encode_bytes_over`], with why functions were left out.
pub fn encode_bytes_reported(
    opts: &Options,
    tuning: &Tuning,
    base: Option<Arc<Btf>>,
) -> Result<(Vec<u8>, Vec<FuncSkip>), Error> {
    let (bytes, skips, _) = encode_input_bytes(opts, tuning, base)?;
    Ok((bytes, skips))
}

/// [`encode_bytes_reported`], with the input's mapping kept for the writer.
fn encode_input_bytes(
    opts: &Options,
    tuning: &Tuning,
    base: Option<Arc<Btf>>,
) -> Result<(Vec<u8>, Vec<FuncSkip>, MappedElf), Error> {
    let mut sink = match tuning.dedup.resolve(base.is_some()) {
        DedupMode::OneShot | DedupMode::Auto => None,
        DedupMode::Incremental => Some(
            Incremental::new(base.clone(), Compat::Upstream)
                .map_err(|e| Error::file(&opts.input, format!("dedup: {e}")))?,
        ),
    };
    let input = open_input(opts, tuning)?;
    let (state, fin, skips) = encode_units(opts, tuning, &input, base, &mut sink)?;
    let input = input.into_mapped();
    let bytes = phase(tuning.timings, "final dedup", || match fin {
        // The kept types and the function types: the final pass of the incremental
        // dedup, which starts from what the units settled.
        Some(fin) => fin
            .finish(state.finish())
            .map_err(|e| Error::file(&opts.input, format!("dedup: {e}"))),
        None => dedup_output(state.finish()).map_err(|e| Error::file(&opts.input, e)),
    })?;
    Ok((bytes, skips, input))
}

/// Encodes every type of the input's DWARF into one BTF (before dedup).
pub fn encode_file(opts: &Options) -> Result<Btf, Error> {
    encode_file_over(opts, load_base(opts)?)
}

/// Reads `--btf_base`, if given, with the reader's structural checks: the output is
/// validated over it before it is written.
pub fn load_base(opts: &Options) -> Result<Option<Arc<Btf>>, Error> {
    btf::read::read_base(opts.btf_base.as_deref(), false)
}

/// [`encode_file`] over a base already read (`opts.btf_base` is not read again), so
/// that many modules share one base.
pub fn encode_file_over(opts: &Options, base: Option<Arc<Btf>>) -> Result<Btf, Error> {
    Ok(encode_file_reported(opts, base)?.0)
}

/// [`encode_file_over`], with why functions were left out.
pub fn encode_file_reported(
    opts: &Options,
    base: Option<Arc<Btf>>,
) -> Result<(Btf, Vec<FuncSkip>), Error> {
    let (btf, skips, _) = encode_input_file(opts, base)?;
    Ok((btf, skips))
}

/// [`encode_file_reported`], with the input's mapping kept for the writer.
pub(crate) fn encode_input_file(
    opts: &Options,
    base: Option<Arc<Btf>>,
) -> Result<(Btf, Vec<FuncSkip>, MappedElf), Error> {
    let tuning = Tuning {
        dedup: DedupMode::OneShot,
        ..Tuning::default()
    };
    let input = open_input(opts, &tuning)?;
    let (state, _, skips) = encode_units(opts, &tuning, &input, base, &mut None)?;
    Ok((state.finish(), skips, input.into_mapped()))
}

/// Opens `opts.input`: the one mapping and parse of the run, which the writer reuses.
fn open_input(opts: &Options, tuning: &Tuning) -> Result<ElfInput, Error> {
    phase(tuning.timings, "open the input", || {
        ElfInput::open(&opts.input)
    })
}

/// The worker threads for `-j jobs`: `jobs`, but no more than the CPUs the process
/// may run on. Parsing is CPU-bound, so threads beyond the CPUs would not finish
/// sooner; they would only keep more units (and more per-thread allocator memory)
/// alive at once. The output is the same for any count.
pub fn workers_for(jobs: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    jobs.clamp(1, cpus)
}

/// The run's workers: as tuned, else as many as `-j` allows on this machine.
fn worker_count(opts: &Options, tuning: &Tuning) -> usize {
    tuning.workers.unwrap_or_else(|| workers_for(opts.jobs))
}

/// What a worker owns for one parsed unit: its arena, and what the parse needs from
/// the run (so that the parse may borrow the arena for less than `'i`).
struct UnitOwner<'i> {
    arena: arena::CuArena,
    dw: &'i DwarfInput<'i>,
    /// The units parsed as one: one unit, or a group of an LTO build.
    units: Range<usize>,
    /// Whether the units are a group (parts of pahole's merged unit).
    group: bool,
    exclude: &'i [u16],
    /// The plans of the abbreviations earlier units declared (see `PlanCache`),
    /// lent to the parse and taken back after it.
    plans: RefCell<PlanCache>,
}

self_cell::self_cell!(
    /// One parsed unit: its arena and the [`CuTypes`] that borrow it, moved as one
    /// value from the worker that parsed it to the one that encodes it. The input
    /// data the types also borrow lives for the whole run, longer than the cell.
    struct ParsedUnit<'i> {
        owner: UnitOwner<'i>,
        #[covariant]
        dependent: CuTypes,
    }
);

/// The parse of one unit into its arena. A named function, not a closure: the type
/// of its argument carries the bound `'i: 'a` that lets the types borrow both.
fn build_unit<'a, 'i>(o: &'a UnitOwner<'i>) -> Result<CuTypes<'a>, Error> {
    let plans = &mut o.plans.borrow_mut();
    let cu = if o.group {
        parse_group(o.dw, o.units.clone(), o.arena.bump(), o.exclude, plans)?
    } else {
        parse_cu(o.dw, o.units.start, o.arena.bump(), o.exclude, plans)?
    };
    o.arena.report();
    Ok(cu)
}

/// Parses units `units` of `dw` into `arena`: one unit, or (`group`) an LTO build's
/// group of units as one.
fn parse_unit<'i>(
    dw: &'i DwarfInput<'i>,
    units: Range<usize>,
    group: bool,
    exclude: &'i [u16],
    arena: arena::CuArena,
    plans: PlanCache,
) -> Result<ParsedUnit<'i>, Error> {
    let owner = UnitOwner {
        arena,
        dw,
        units,
        group,
        exclude,
        plans: RefCell::new(plans),
    };
    ParsedUnit::try_new(owner, build_unit)
}

/// Parses and encodes the units on `opts.jobs` workers and merges them in unit order
/// ([`ordered::Ordered`]) into an encoder state. With an incremental dedup (`sink`),
/// each unit's types are deduplicated as the unit is merged, the state holds the kept
/// types at the end, to be deduplicated with the returned final pass; without, every
/// unit's types stay in the encoder's BTF.
fn encode_units(
    opts: &Options,
    tuning: &Tuning,
    input: &ElfInput,
    base: Option<Arc<Btf>>,
    sink: &mut Option<Incremental>,
) -> Result<(EncoderState, Option<FinalBegun>, Vec<FuncSkip>), Error> {
    // The symbol tables, read by the first workers that need them, in two halves
    // that two threads read at once (the others wait): every unit's functions and
    // variables are selected against them.
    let halves = SymbolHalves::new(input, opts.features.decl_tag_kfuncs);
    let workers = worker_count(opts, tuning);
    std::thread::scope(|scope| {
        // With several workers, a thread starts on one half while the units are
        // listed, before any worker runs: the workers' first units otherwise wait
        // for the tables with all but one worker idle (on the corpus vmlinux at
        // -j2, about 15 ms less wall time). A panic there is not the run's end:
        // the half is left unread, and the worker that reads it instead meets the
        // panic where the scheduler reports it as an error.
        if workers > 1 {
            scope.spawn(|| {
                let _ = std::panic::catch_unwind(AssertUnwindSafe(|| halves.read_either()));
            });
        }
        encode_units_with(opts, tuning, input, base, sink, &halves, workers)
    })
}

/// [`encode_units`] on `workers`, with the symbol tables read in `halves`.
fn encode_units_with(
    opts: &Options,
    tuning: &Tuning,
    input: &ElfInput,
    base: Option<Arc<Btf>>,
    sink: &mut Option<Incremental>,
    halves: &SymbolHalves<'_>,
    workers: usize,
) -> Result<(EncoderState, Option<FinalBegun>, Vec<FuncSkip>), Error> {
    let t = tuning.timings;
    let dw = phase(t, "list its units", || DwarfInput::new(input))?;
    let little = input.is_little_endian();
    let state = EncoderState::new(base, opts.features.clone(), little);
    // Read by the workers: a unit's strings that earlier units gave the run are
    // found before its turn, not by the token holder.
    let addr_cache = state.addr_cache();
    // An LTO build, which pahole reads as one merged unit: the groups of units that
    // refer to each other are the items, each parsed as one unit (`dwarf::lto`).
    let groups = if lto::merges_units(input, &dw)? {
        Some(lto::groups(&dw)?)
    } else {
        None
    };
    let merged = groups.is_some();
    let units_of = |i: usize| match &groups {
        Some(g) => g[i].clone(),
        None => i..i + 1,
    };
    let items = groups.as_ref().map_or(dw.unit_count(), |g| g.len());
    let window = tuning.window.unwrap_or(match (&groups, workers) {
        // An LTO build's groups are several units each (the ThinLTO test
        // kernel's largest takes 12 MB of arena). With 1, no worker starts the
        // next group before the last is merged, and -j2 is no faster than -j1
        // (1.61 s against 1.46 s there); with 2, 1.07 s, at a peak RSS of 57 MB
        // against 56 MB with 1 (46 MB at -j1). More would add a large group's
        // arena for each.
        (Some(_), _) => 2,
        (None, 1) => 2,
        // One unit more than the workers, whatever its size, let a worker start
        // its next unit while the token holder merges, but at -j2 on the corpus
        // vmlinux it was 0.9 MiB of peak RSS (55.7 against 56.6 MiB, medians of
        // 10 interleaved runs) for 1.03x the wall time, within those runs' noise
        // (0.80-1.11x): near the end of the run, where the kept types set the
        // peak, units of 150-360 KB fill the budget, so a third one in flight
        // was a third unit's arena, arrays and batch. Small units still run
        // ahead within the budget.
        (None, w) => w,
    });
    let mut release = InputRelease::new(input);
    // Emptied arenas and encoder buffers, for the next units: a unit's data is freed
    // in one step once it is encoded, and the arena's largest chunk is kept (see
    // `CuArena::reset`). One of each per worker at a time, which takes back its own
    // (`sched::LocalPool`: the name cache in the buffers is warm in its core's cache).
    let pool: LocalPool<arena::CuArena> = LocalPool::new();
    let scratch: LocalPool<Scratch> = LocalPool::new();
    // The abbreviations' plans, one cache per worker at a time: most declarations
    // recur from unit to unit.
    let plan_caches: LocalPool<PlanCache> = LocalPool::new();
    let shared: OnceLock<Result<Shared, ElfError>> = OnceLock::new();
    let shared_init = || {
        if let Some(s) = shared.get() {
            return s;
        }
        busy(t, Busy::Symbols, || {
            halves.read_either();
            shared.get_or_init(|| new_shared(halves, &opts.features, little, merged))
        })
    };
    // The incremental dedup's batches are prepared on the workers; once the array
    // index type is known, whole but for the strings new to the run.
    let preparer = sink.as_ref().map(Incremental::preparer);
    let lead: Arc<OnceLock<crate::dedup::Lead>> = Arc::new(OnceLock::new());
    let produce = |idx: usize| {
        busy(t, Busy::Parse, || {
            let arena = pool.take().unwrap_or_default();
            let units = units_of(idx);
            let plans = plan_caches.take().unwrap_or_default();
            let unit = parse_unit(&dw, units.clone(), merged, &opts.lang_exclude, arena, plans)?;
            let ctx = match shared_init() {
                Ok(s) => &s.ctx,
                Err(e) => return Err(e.clone().in_file(&opts.input)),
            };
            let mut sc = scratch.take_or(|| Scratch::for_workers(workers, Arc::clone(&addr_cache)));
            let cu = unit.borrow_dependent();
            // With a dedup, the types are flattened for it as they are encoded.
            let encoded = match &preparer {
                Some(p) => {
                    encode_unit_into(cu, ctx, &mut sc, ordered::Flattening::new(p, lead.get())).map(
                        |mut u| {
                            sc.learn_known(&mut u, &addr_cache);
                            ordered::ready_flat(u, p, lead.get())
                        },
                    )
                }
                None => encode_unit(cu, ctx, &mut sc).map(|mut u| {
                    sc.learn_known(&mut u, &addr_cache);
                    ordered::ready(u)
                }),
            };
            scratch.put(sc);
            let loclists_start = unit.borrow_dependent().loclists_start;
            let owner = unit.into_owner();
            plan_caches.put(owner.plans.into_inner());
            let mut arena = owner.arena;
            // An arena that grew past what most units need (an LTO build's large
            // group) is dropped rather than kept in the pool with its largest chunk.
            if arena.allocated_bytes() <= POOLED_ARENA_MAX {
                crate::mmap::reset_arena(&mut arena, POOLED_ARENA_RESIDENT);
                pool.put(arena);
            } else {
                drop(arena);
            }
            // Errors name the first unit of a group.
            let unit = encoded.map_err(|e| dw.unit_error(units.start, e))?;
            Ok((unit, loclists_start))
        })
    };
    let mut ordered = ordered::Ordered::new(state, sink.take(), merged, t, Arc::clone(&lead));
    let mut funcs: Option<FuncEncoder> = None;
    let consume = |item: usize, (unit, loclists_start): (ordered::ReadyUnit, u64)| {
        busy(t, Busy::Encode, || {
            let units = units_of(item);
            let funcs = match &mut funcs {
                Some(f) => f,
                None => funcs.insert(new_funcs(shared_init(), &opts.input)?),
            };
            ordered
                .add(unit, funcs)
                .map_err(|e| dw.unit_error(units.start, e))?;
            // Pages go up to the group's last unit.
            release.after_unit(input, &dw, units.end - 1, loclists_start);
            Ok(())
        })
    };
    // With several workers, small units may also run ahead of a large one being
    // parsed or merged, within a budget of input bytes (see `AHEAD_BUDGET`).
    let window = if groups.is_none() && workers > 1 && tuning.window.is_none() {
        sched::Window {
            min: window,
            max: AHEAD_MAX,
            budget: AHEAD_BUDGET,
        }
    } else {
        sched::Window::tasks(window)
    };
    // A unit weighs its bytes of .debug_info, which its encoded form follows.
    let weight = |i: usize| {
        let u = units_of(i);
        dw.unit_end(u.end - 1) - dw.unit_start(u.start)
    };
    phase(t, "parse, encode, dedup the units", || {
        sched::run_ordered_weighted(items, workers, window, weight, produce, consume)
    })
    .map_err(|e| match e {
        sched::Error::Failed { error, .. } => error,
        panicked => Error::file(&opts.input, format!("internal error: {panicked}")),
    })?;
    // What the workers kept from unit to unit (pooled arenas with their largest
    // chunk, name and plan caches, scratch vectors: 3.8 MB a worker on the corpus
    // vmlinux) goes before the serial tail, whose kept types and functions set the
    // run's peak.
    drop((pool, scratch, plan_caches));
    let funcs = match funcs {
        Some(f) => f,
        None => new_funcs(shared_init(), &opts.input)?,
    };
    let ordered::Ordered { mut state, inc, .. } = ordered;
    let mut fin = None;
    if let Some(inc) = inc {
        // The functions and DATASECs refer to kept types: they are added after them,
        // and the final one-shot dedup runs over the kept types and these.
        let kept = inc
            .kept_types(funcs.types_to_come())
            .map_err(|e| Error::file(&opts.input, format!("dedup: {e}")))?;
        let pass = inc.final_pass();
        drop(inc);
        *state.btf_mut().types_mut() = kept;
        // The final pass's passes before the reference pass read the kept types
        // only (see `FinalPass::begin`): with several workers they run on a thread
        // of their own while the functions are encoded. With one, after them, as
        // one pass: begun before, its tables were live beside the functions'
        // encoding and made the run's peak (-j1 on the corpus vmlinux: 42.9 ->
        // 45.0 MB).
        fin = Some(if workers > 1 {
            let (p, str_end) = phase(t, "final dedup: kept types", || {
                pass.prepare_kept(state.btf())
            })
            .map_err(|e| Error::file(&opts.input, format!("dedup: {e}")))?;
            // The main thread's usual stack, as the workers have (`sched`). Should
            // no thread start, the pass runs whole after the functions.
            let spare = pass.clone();
            std::thread::Builder::new()
                .name("dwarf2btf-final".into())
                .stack_size(8 << 20)
                .spawn(move || pass.begin(p, str_end))
                .map_or(FinalBegun::After(spare), FinalBegun::Beside)
        } else {
            FinalBegun::After(pass)
        });
    }
    let skips = phase(t, "functions and variables", || funcs.finish(&mut state))
        .map_err(|e| Error::file(&opts.input, e.0))?;
    Ok((state, fin, skips))
}

/// The final pass of an incremental dedup: begun on the kept types on a thread
/// beside the functions' encoding ([`FinalPass::begin`]), or to run whole after it.
enum FinalBegun {
    Beside(std::thread::JoinHandle<Result<FinalStart, DedupError>>),
    After(FinalPass),
}

impl FinalBegun {
    /// The pass over `btf` (the kept types, then the function types): its bytes. A
    /// panic on the thread that began it goes on here.
    fn finish(self, btf: Btf) -> Result<Vec<u8>, DedupError> {
        match self {
            FinalBegun::Beside(h) => h
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))?
                .finish(btf),
            FinalBegun::After(pass) => pass.dedup_bytes_owned_encoded(btf),
        }
    }
}

/// The largest arena (in bytes allocated) that goes back to the pool: the largest
/// unit of the clang-built test kernel takes 3 MB; the largest group of units of its
/// ThinLTO build 12 MB, which, kept by every pooled arena, would stay resident.
const POOLED_ARENA_MAX: usize = 4 << 20;

/// How much of a pooled arena's chunk stays resident between units: the deeper
/// pages a large unit used are given back when it is done (`mmap::reset_arena`).
/// About what the late units near the peak need (an arena takes 2.25 times its
/// unit's `.debug_info`; those units have 150-360 KB), so that few units fault
/// pages in again. Corpus vmlinux, six interleaved runs each against none: peak
/// RSS at -j2 46.4 -> 45.6 MB, at -j1 42.4 -> 42.1 MB, page faults unchanged; at
/// 384 KB the same peaks for 11% more faults, at 256 KB 45.2 and 42.0 MB for 50%
/// more (three runs), at 768 KB 46.0 and 42.2 MB.
const POOLED_ARENA_RESIDENT: usize = 512 << 10;

/// Most units in flight with several workers: beyond the fixed window, units start
/// while the `.debug_info` bytes of all units in flight stay within
/// [`AHEAD_BUDGET`], so a worker that finished its units need not wait for one large
/// unit ahead of them. On the corpus vmlinux at -j2 (units of 84 KB on average),
/// 512 KB gave 0.973x the wall time of the fixed window for +0.2 MB of peak RSS (11
/// interleaved pairs; 1 MB: 0.962x for +1.1 MB).
const AHEAD_MAX: usize = 16;

/// See [`AHEAD_MAX`].
const AHEAD_BUDGET: u64 = 512 << 10;

/// `f` as the phase `name` of a run timed by `--time`.
fn phase<R>(t: Option<&Timings>, name: &'static str, f: impl FnOnce() -> R) -> R {
    match t {
        Some(t) => t.phase(name, f),
        None => f(),
    }
}

/// `f` counted in the busy time of `work` of a run timed by `--time`.
fn busy<R>(t: Option<&Timings>, work: Busy, f: impl FnOnce() -> R) -> R {
    match t {
        Some(t) => t.busy(work, f),
        None => f(),
    }
}

/// What every unit's encoding shares: the encoding context (features, the file's
/// functions and variables) and the file's kfunc sets.
struct Shared {
    ctx: UnitContext,
    syms: Arc<crate::symbols::ElfSymbols>,
    kfuncs: crate::kfuncs::Kfuncs,
    merged: bool,
}

/// The run's function encoder, over the shared tables of `input`.
fn new_funcs(shared: &Result<Shared, ElfError>, input: &Path) -> Result<FuncEncoder, Error> {
    let s = shared.as_ref().map_err(|e| e.clone().in_file(input))?;
    Ok(FuncEncoder::new(
        Arc::clone(&s.syms),
        s.kfuncs.clone(),
        s.merged,
    ))
}

/// Gives back the input pages of the units already encoded, section by section, so
/// that the mapped input does not stay resident (see [`crate::mmap`]): in each
/// section the units' parts lie in unit order, so what lies between two units' starts
/// is the first one's. Should a page be needed again after all (an odd producer), it
/// faults back in.
struct InputRelease {
    info: Option<SectionParts>,
    abbrev: Option<SectionParts>,
    loclists: Option<SectionParts>,
    info_len: usize,
    /// The sections the units read wherever they point (see [`READ_ANYWHERE`]), as
    /// offsets in the mapping: kept mapped while everything else but the unread
    /// parts of the three above is given back (see [`InputRelease::release_unread`]).
    anywhere: Vec<Range<usize>>,
}

/// Sections a unit reads at any offset: strings, and range and location lists that
/// are not read unit by unit.
const READ_ANYWHERE: [&str; 7] = [
    ".debug_str",
    ".debug_line_str",
    ".debug_str_offsets",
    ".debug_addr",
    ".debug_rnglists",
    ".debug_ranges",
    ".debug_loc",
];

impl InputRelease {
    /// Tracks the sections of `input` that are read unit by unit.
    fn new(input: &ElfInput) -> InputRelease {
        let map = input.map();
        InputRelease {
            info: SectionParts::new(map, input.section(".debug_info")),
            abbrev: SectionParts::new(map, input.section(".debug_abbrev")),
            loclists: SectionParts::new(map, input.section(".debug_loclists")),
            info_len: input.section(".debug_info").len(),
            anywhere: READ_ANYWHERE
                .iter()
                .filter_map(|name| crate::mmap::range_in(map, input.section(name)))
                .collect(),
        }
    }

    /// Gives back every page of the input but those of the sections read anywhere
    /// and the parts of `.debug_info`, `.debug_abbrev` and `.debug_loclists` not
    /// consumed yet. A fault can map a whole large folio of the page cache (up to
    /// 2 MB once the file was read in large chunks, as by the linker that wrote it),
    /// so reading one section maps its neighbours' bytes too, which nothing else
    /// would release: on the corpus vmlinux so cached, 5 MB of `.debug_frame`,
    /// `.BTF` and `.debug_line` beside the sections read. Releasing only saves
    /// memory: a page read again faults back in.
    fn release_unread(&self, map: &memmap2::Mmap) {
        let mut keep: Vec<Range<usize>> = self.anywhere.clone();
        keep.extend(
            [&self.info, &self.abbrev, &self.loclists]
                .into_iter()
                .flatten()
                .map(SectionParts::unconsumed),
        );
        for gap in crate::mmap::gaps(keep, map.len()) {
            let _ = crate::mmap::release_range(map, gap);
        }
    }

    /// Unit `idx` is encoded, and its `.debug_loclists` part starts at
    /// `loclists_start` (see `CuTypes::loclists_start`). Releasing only saves
    /// memory: a failure is no reason to fail the run.
    fn after_unit(
        &mut self,
        input: &ElfInput,
        dw: &DwarfInput<'_>,
        idx: usize,
        loclists_start: u64,
    ) {
        let map = input.map();
        let next = dw.units.get(idx + 1);
        let mut released = 0;
        if let Some(f) = &mut self.info {
            let end = next.map_or(self.info_len, |u| u.info);
            released += f.next_part(map, end).unwrap_or(0);
        }
        if let (Some(f), Some(u)) = (&mut self.abbrev, next) {
            released += f.next_part(map, u.abbrev).unwrap_or(0);
        }
        if let Some(f) = self
            .loclists
            .as_mut()
            .filter(|_| loclists_start != u64::MAX)
        {
            released += f
                .next_part(map, usize::try_from(loclists_start).unwrap_or(0))
                .unwrap_or(0);
        }
        // As often as the parts are released (every `SectionParts::STEP` bytes).
        if released > 0 {
            self.release_unread(map);
        }
    }
}

/// What every unit of `input` is encoded with: its ELF symbols and, with
/// `decl_tag_kfuncs`, its kfunc sets, read once.
fn new_shared(
    halves: &SymbolHalves<'_>,
    features: &Features,
    little_endian: bool,
    merged: bool,
) -> Result<Shared, ElfError> {
    let (syms, kfuncs) = halves.join()?;
    let rules = FuncRules::new(Arc::clone(&syms), features);
    Ok(Shared {
        ctx: UnitContext::new(features.clone(), little_endian, merged, Some(rules)),
        syms,
        kfuncs,
        merged,
    })
}

/// The dedup of [`dedup_output`] with `base` indexed once, for many modules over it.
pub fn prepare_dedup_base(base: Arc<Btf>) -> Result<crate::dedup::PreparedBase, String> {
    crate::dedup::PreparedBase::new(base, crate::dedup::Compat::Upstream)
        .map_err(|e| format!("dedup: {e}"))
}

/// Deduplicates the encoded BTF as pahole's final `btf__dedup` does (current libbpf,
/// the one pahole 1.31's references were made with) and returns the raw bytes to
/// write. Takes the BTF by value so its types are freed as soon as the dedup has
/// copied them.
pub fn dedup_output(btf: Btf) -> Result<Vec<u8>, String> {
    crate::dedup::dedup_bytes_owned_encoded(btf, crate::dedup::Compat::Upstream)
        .map_err(|e| format!("dedup: {e}"))
}
