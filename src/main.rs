//! The `dwarf2btf` command: parse the command line, run, print the error chain.

fn main() {
    let code = dwarf2btf::cli::main(std::env::args_os().collect());
    std::process::exit(code);
}
