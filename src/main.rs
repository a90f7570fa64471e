//! The `dwarf2btf` command: parse the command line, run, print the error chain.

/// The encoder allocates millions of small blocks on one thread and the dedup stage
/// reads them on another; mimalloc's per-thread heaps serve that with less CPU than
/// glibc's malloc (about 15% less at -j2 on the corpus vmlinux).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    tune_allocator();
    let code = dwarf2btf::cli::main(std::env::args_os().collect());
    std::process::exit(code);
}

/// Memory must follow the output: give freed pages back to the system at once
/// (`purge_delay` 0; this mimalloc waits 1 s by default, while a run frees a unit's
/// worth every fraction of a millisecond), unless the user set
/// `MIMALLOC_PURGE_DELAY`. The option number is that of the `mi_option_e` of the
/// mimalloc v3 that `libmimalloc-sys` builds (include/mimalloc.h). Arena memory is
/// committed as it is used by a compile-time default (.cargo/config.toml).
fn tune_allocator() {
    const PURGE_DELAY: c_int = 15;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mimalloc's option setter (`void mi_option_set(mi_option_t, long)`,
        // the enum passed as an int), from the library the allocator links in;
        // called before any other thread starts.
        unsafe { mi_option_set(PURGE_DELAY, 0) };
    }
}

use std::ffi::{c_int, c_long};

extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
}
