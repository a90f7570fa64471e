//! Times parsing and encoding separately over every unit of a file and reports
//! per-unit arena sizes: `cargo run --release --example parse_stats -- FILE`.

use dwarf2btf::dwarf::{types::parse_cu, DwarfInput};
use dwarf2btf::elf::ElfInput;
use dwarf2btf::encode::{encode_cu, EncoderState, Features};
use std::time::{Duration, Instant};

fn main() -> Result<(), dwarf2btf::Error> {
    let path = std::env::args_os().nth(1).expect("usage: parse_stats FILE");
    let t0 = Instant::now();
    let input = ElfInput::open(path.as_ref())?;
    let dw = DwarfInput::new(&input)?;
    let setup = t0.elapsed();
    let mut st = EncoderState::new(
        None,
        Features::from_list("default"),
        input.is_little_endian(),
    );
    let (mut parse, mut encode) = (Duration::ZERO, Duration::ZERO);
    let (mut max_arena, mut sum_arena, mut dies) = (0usize, 0usize, 0usize);
    for idx in 0..dw.unit_count() {
        let arena = arena::CuArena::new();
        let t = Instant::now();
        let cu = parse_cu(&dw, idx, arena.bump(), &[])?;
        parse += t.elapsed();
        dies += cu.types.len();
        let t = Instant::now();
        encode_cu(&cu, &mut st).map_err(|e| dw.unit_error(idx, e))?;
        encode += t.elapsed();
        max_arena = max_arena.max(arena.allocated_bytes());
        sum_arena += arena.allocated_bytes();
    }
    let btf = st.finish();
    println!(
        "units {} | setup {:.3}s parse {:.3}s encode {:.3}s | type DIEs {} -> BTF types {} | arena max {} KB, mean {} KB",
        dw.unit_count(),
        setup.as_secs_f64(),
        parse.as_secs_f64(),
        encode.as_secs_f64(),
        dies,
        btf.types().len(),
        max_arena / 1024,
        sum_arena / dw.unit_count() / 1024
    );
    Ok(())
}
