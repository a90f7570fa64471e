//! The process's resident memory, read from `/proc/self/status` (Linux).
//!
//! Peak RSS (`VmHWM`) is the figure the project is judged on; the split into anonymous
//! and file-backed pages tells heap growth apart from mapped input that stayed resident.

use std::io;

/// Resident-memory figures of this process, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    /// Peak resident set size so far (`VmHWM`).
    pub peak: u64,
    /// Resident set size now (`VmRSS`).
    pub current: u64,
    /// Resident anonymous memory now: heap, stacks, arenas (`RssAnon`).
    pub anon: u64,
    /// Resident file-backed memory now: mapped input and binaries (`RssFile`).
    pub file: u64,
}

impl Status {
    /// Reads the figures now.
    pub fn read() -> io::Result<Status> {
        let text = std::fs::read_to_string("/proc/self/status")?;
        Status::parse(&text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "/proc/self/status: no VmHWM/VmRSS/RssAnon/RssFile lines",
            )
        })
    }

    /// Reads the four fields out of the text of a `/proc/<pid>/status` file.
    fn parse(text: &str) -> Option<Status> {
        let field = |name: &str| {
            text.lines().find_map(|line| {
                let rest = line.strip_prefix(name)?.strip_prefix(':')?;
                let kib = rest.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
                Some(kib * 1024)
            })
        };
        Some(Status {
            peak: field("VmHWM")?,
            current: field("VmRSS")?,
            anon: field("RssAnon")?,
            file: field("RssFile")?,
        })
    }
}

/// Peak resident set size of the process so far, in bytes.
pub fn peak_rss() -> io::Result<u64> {
    Ok(Status::read()?.peak)
}

/// Resident set size of the process now, in bytes.
pub fn current_rss() -> io::Result<u64> {
    Ok(Status::read()?.current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_text() {
        let text = "Name:\tx\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n\
                    RssAnon:\t     600 kB\nRssFile:\t     400 kB\nRssShmem:\t0 kB\n";
        let s = Status::parse(text).unwrap();
        assert_eq!(
            s,
            Status {
                peak: 2048 * 1024,
                current: 1024 * 1024,
                anon: 600 * 1024,
                file: 400 * 1024
            }
        );
        assert_eq!(Status::parse("VmHWM:\t1 kB\n"), None);
    }

    #[test]
    fn peak_follows_a_large_touched_allocation() {
        let before = Status::read().unwrap();
        assert!(before.current > 0 && before.peak >= before.current);
        let size = 64 << 20;
        // Every page written, so every page is resident.
        let buf = vec![1u8; size];
        let during = Status::read().unwrap();
        assert!(
            during.peak >= before.current + size as u64 / 2,
            "{before:?} {during:?}"
        );
        assert_eq!(buf.iter().map(|&b| b as usize).sum::<usize>(), size);
        assert!(peak_rss().unwrap() >= current_rss().unwrap());
    }
}
