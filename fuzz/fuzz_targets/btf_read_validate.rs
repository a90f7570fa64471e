//! BTF reader + validator + dump + writer round trip on raw bytes, alone and split
//! over a fixed base.
#![no_main]

#[path = "../entry.rs"]
mod entry;

libfuzzer_sys::fuzz_target!(|data: &[u8]| entry::btf_read_validate(data));
