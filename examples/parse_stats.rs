//! Times parsing and encoding separately over every unit of a file and reports
//! per-unit arena sizes: `cargo run --release --example parse_stats -- FILE`.

use dwarf2btf::dwarf::types::{parse_cu, PlanCache};
use dwarf2btf::dwarf::DwarfInput;
use dwarf2btf::elf::ElfInput;
use dwarf2btf::encode::{encode_unit, Features, Scratch, UnitContext};
use std::time::{Duration, Instant};

fn main() -> Result<(), dwarf2btf::Error> {
    let path = std::env::args_os().nth(1).expect("usage: parse_stats FILE");
    let t0 = Instant::now();
    let input = ElfInput::open(path.as_ref())?;
    let dw = DwarfInput::new(&input)?;
    let setup = t0.elapsed();
    // Types only: functions and variables need the file's symbols.
    let ctx = UnitContext::new(
        Features::from_list("default"),
        input.is_little_endian(),
        false,
        None,
    );
    let mut scratch = Scratch::default();
    let mut plans = PlanCache::default();
    let mut types = 0usize;
    let (mut parse, mut encode) = (Duration::ZERO, Duration::ZERO);
    let (mut max_arena, mut sum_arena, mut dies) = (0usize, 0usize, 0usize);
    for idx in 0..dw.unit_count() {
        let arena = arena::CuArena::new();
        let t = Instant::now();
        let cu = parse_cu(&dw, idx, arena.bump(), &[], &mut plans)?;
        parse += t.elapsed();
        dies += cu.types.len();
        let t = Instant::now();
        let unit = encode_unit(&cu, &ctx, &mut scratch).map_err(|e| dw.unit_error(idx, e))?;
        types += unit.types.len();
        encode += t.elapsed();
        max_arena = max_arena.max(arena.allocated_bytes());
        sum_arena += arena.allocated_bytes();
    }
    println!(
        "units {} | setup {:.3}s parse {:.3}s encode {:.3}s | type DIEs {} -> BTF types {} (before dedup) | arena max {} KB, mean {} KB",
        dw.unit_count(),
        setup.as_secs_f64(),
        parse.as_secs_f64(),
        encode.as_secs_f64(),
        dies,
        types,
        max_arena / 1024,
        sum_arena / dw.unit_count() / 1024
    );
    Ok(())
}
