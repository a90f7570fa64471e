//! dwarf2btf: encode the DWARF of Linux kernels and modules into BTF, the same BTF as
//! `pahole -J`, in a fraction of its time and memory.
//!
//! Data flows one way: ELF → DWARF → CU arena → encoder → dedup → writer.
//! See DESIGN.md for the phases and who owns what memory.
#![deny(missing_docs)]
// `unsafe` lives in one fenced module, `mmap` (mappings, page release, the
// allocator's option), which allows it for itself.
#![deny(unsafe_code)]

pub mod batch;
pub mod btf;
pub mod cli;
pub mod dedup;
pub mod distill;
pub mod dwarf;
pub mod elf;
pub mod elf_write;
pub mod emit;
pub mod encode;
mod error;
pub mod hash;
pub mod kfuncs;
#[allow(unsafe_code)]
// the crate's one use of it: mapping files, releasing pages, mimalloc's option
pub mod mmap;
pub mod order;
pub mod output;
pub mod pipeline;
pub mod symbols;
pub mod timing;

pub use error::{Error, Result};
