//! The ELF reader (section lookup, decompression, relocation) on arbitrary bytes.
#![no_main]

#[path = "../entry.rs"]
mod entry;

libfuzzer_sys::fuzz_target!(|data: &[u8]| entry::elf_reader(data));
