//! The whole encoder (ELF → DWARF → BTF → dedup) on arbitrary bytes as an ELF file;
//! accepted input must give valid BTF.
#![no_main]

#[path = "../entry.rs"]
mod entry;

libfuzzer_sys::fuzz_target!(|data: &[u8]| entry::dwarf_loader(data));
