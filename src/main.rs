//! The `dwarf2btf` command: parse the command line, run, print the error chain.
#![deny(unsafe_code)]

/// mimalloc, tuned by [`dwarf2btf::mmap::tune_allocator`] (see there why).
#[global_allocator]
static ALLOC: dwarf2btf::mmap::Allocator = dwarf2btf::mmap::Allocator {};

fn main() {
    dwarf2btf::mmap::tune_allocator();
    let code = dwarf2btf::cli::main(std::env::args_os().collect());
    std::process::exit(code);
}
