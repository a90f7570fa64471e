//! Prints the groups of units an LTO build's first pass finds (`dwarf::lto`): how
//! many, and the largest by units and by `.debug_info` bytes.
use dwarf2btf::dwarf::{lto, DwarfInput};
use dwarf2btf::elf::ElfInput;

fn main() -> Result<(), dwarf2btf::Error> {
    let path = std::env::args().nth(1).expect("usage: lto_groups FILE");
    let input = ElfInput::open(std::path::Path::new(&path))?;
    let dw = DwarfInput::new(&input)?;
    println!("merged unit: {}", lto::merges_units(&input, &dw)?);
    let groups = lto::groups(&dw)?;
    let bytes = |g: &std::ops::Range<usize>| dw.unit_end(g.end - 1) - dw.unit_start(g.start);
    let most_units = groups.iter().map(|g| g.len()).max().unwrap_or(0);
    let mut sizes: Vec<u64> = groups.iter().map(bytes).collect();
    sizes.sort_unstable();
    println!(
        "{} units in {} groups; largest: {} units, {} KB; median {} KB",
        dw.unit_count(),
        groups.len(),
        most_units,
        sizes.last().copied().unwrap_or(0) >> 10,
        sizes.get(sizes.len() / 2).copied().unwrap_or(0) >> 10
    );
    Ok(())
}
