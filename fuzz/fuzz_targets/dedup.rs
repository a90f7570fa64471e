//! Parse, validate and dedup (whole and split over a fixed base); dedup output of
//! valid input must validate.
#![no_main]

#[path = "../entry.rs"]
mod entry;

libfuzzer_sys::fuzz_target!(|data: &[u8]| entry::dedup(data));
