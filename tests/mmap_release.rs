//! Releasing consumed input pages really lowers RSS (its own test binary, so no other
//! test's memory moves the figures).

use std::io::Write;

use arena::rss::Status;
use dwarf2btf::mmap::{release_pages, release_range, ReleaseFront};

/// Removes the temp file however the test ends.
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const MB: usize = 1 << 20;

fn touch(map: &[u8], step: usize) -> u64 {
    map.iter().step_by(step).map(|&b| b as u64).sum()
}

fn rss_file() -> u64 {
    Status::read().expect("/proc/self/status").file
}

#[test]
fn released_pages_leave_rss_and_read_back_the_same() {
    let size = 32 * MB + 1234;
    let tmp = TempFile(std::env::temp_dir().join(format!("dwarf2btf-mmap-{}", std::process::id())));
    let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251).to_le_bytes()[0]).collect();
    std::fs::File::create(&tmp.0)
        .unwrap()
        .write_all(&data)
        .unwrap();
    let file = std::fs::File::open(&tmp.0).unwrap();
    let map = dwarf2btf::mmap::map_file(&file).unwrap();
    let expected = touch(&data, 512);
    drop(data);

    let page = dwarf2btf::mmap::page_size();
    let before = rss_file();
    assert_eq!(touch(&map, 512), expected);
    let touched = rss_file();
    assert!(
        touched >= before + 30 * MB as u64,
        "mapping not resident: {before} -> {touched}"
    );

    // Front to back, in uneven "CU" steps, as the ordered encoder consumes them.
    let mut front = ReleaseFront::new(0..map.len());
    let mut released = 0;
    let mut at = 0;
    while at < map.len() {
        at = (at + 777_777).min(map.len());
        released += front.release_through(&map, at).unwrap();
    }
    assert_eq!(released, map.len(), "every page released once");
    let after = rss_file();
    assert!(
        after + 30 * MB as u64 <= touched,
        "rss_file {touched} -> {after} after releasing {released} bytes"
    );

    // The bytes come back unchanged when read again.
    assert_eq!(touch(&map, 512), expected);
    assert!(rss_file() >= after + 30 * MB as u64);

    // A sub-slice: only whole pages inside it go.
    let part = &map[page / 2..page / 2 + 4 * MB];
    assert_eq!(release_pages(&map, part).unwrap(), 4 * MB - page);
    assert_eq!(release_range(&map, 100..200).unwrap(), 0);
    assert!(release_range(&map, 0..map.len() + 1).is_err());
    assert!(release_pages(&map, &[1, 2, 3]).is_err());
    assert_eq!(touch(&map, 512), expected);
}
