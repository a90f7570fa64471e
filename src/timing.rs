//! `--time` (as the wild linker has it): where one run's time goes, printed on stderr
//! when it ends. Phases on the main thread are timed by their wall clock and the
//! process's CPU time meanwhile (all threads); the work spread over threads (parsing
//! and encoding on the workers, the in-order merge on the token holder, its dedup)
//! by its busy time — the wall clock inside each call, summed — and by the CPU time
//! of the calling thread inside each call (`clock_gettime`'s thread clock), which
//! stays true on a machine short of CPUs. The run's CPU time is the process's own
//! (user + system, from `/proc/self/stat`). Each phase also shows the process's
//! resident memory when it ended and its peak so far (`/proc/self/status`), which
//! tells which part of the run sets the peak.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Work done on several threads, timed by its summed busy time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Busy {
    /// Parsing and encoding units, on the workers.
    Parse,
    /// Reading the symbol tables (part of `Parse`: the first workers to need them,
    /// and those waiting for them).
    Symbols,
    /// Merging units in order (strings, dedup, records), on the token holder.
    Encode,
    /// The dedup of units in order (part of `Encode`).
    Dedup,
}

const BUSY: [(Busy, &str); 4] = [
    (Busy::Parse, "parse + encode units (workers, summed)"),
    (Busy::Symbols, "  of which: read the symbol tables"),
    (Busy::Encode, "merge units in order (token holder)"),
    (Busy::Dedup, "  of which: dedup"),
];

/// One phase's figures: its name, wall time, the process's CPU time meanwhile, and
/// the resident and peak memory when it ended.
#[derive(Debug)]
struct Phase {
    name: &'static str,
    took: Duration,
    cpu: Option<f64>,
    memory: Option<arena::rss::Status>,
}

/// The figures of one run.
#[derive(Debug)]
pub struct Timings {
    start: Instant,
    phases: Mutex<Vec<Phase>>,
    busy_ns: [AtomicU64; 4],
    cpu_ns: [AtomicU64; 4],
}

impl Default for Timings {
    fn default() -> Self {
        Timings::new()
    }
}

impl Timings {
    /// Starts the clock of a run.
    pub fn new() -> Timings {
        Timings {
            start: Instant::now(),
            phases: Mutex::new(Vec::new()),
            busy_ns: Default::default(),
            cpu_ns: Default::default(),
        }
    }

    /// Runs `f` as the phase `name` and records its wall time and the process's CPU
    /// time meanwhile.
    pub fn phase<R>(&self, name: &'static str, f: impl FnOnce() -> R) -> R {
        let (t, cpu) = (Instant::now(), process_cpu_seconds());
        let r = f();
        let took = t.elapsed();
        let cpu = cpu.zip(process_cpu_seconds()).map(|(a, b)| b - a);
        let memory = arena::rss::Status::read().ok();
        self.phases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Phase {
                name,
                took,
                cpu,
                memory,
            });
        r
    }

    /// Runs `f` and adds its wall time and the thread's CPU time inside it to the busy
    /// time of `work`.
    pub fn busy<R>(&self, work: Busy, f: impl FnOnce() -> R) -> R {
        let (t, cpu) = (Instant::now(), thread_cpu_ns());
        let r = f();
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.busy_ns[work as usize].fetch_add(ns, Ordering::Relaxed);
        if let (Some(a), Some(b)) = (cpu, thread_cpu_ns()) {
            self.cpu_ns[work as usize].fetch_add(b.saturating_sub(a), Ordering::Relaxed);
        }
        r
    }

    /// The report: one line per phase and per kind of busy time, then the run's wall
    /// and CPU time.
    pub fn report(&self) -> String {
        let total = self.start.elapsed().as_secs_f64();
        let mut out = String::from("dwarf2btf --time:\n");
        let phases = self
            .phases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for p in phases.iter() {
            out += &format!("  {:<40} {:>8.3} s wall", p.name, p.took.as_secs_f64());
            if let Some(cpu) = p.cpu {
                out += &format!(", {cpu:>7.2} s CPU");
            }
            if let Some(m) = p.memory {
                out += &format!(
                    ", RSS {:>6.1} MB (file {:.1}, peak {:.1})",
                    megabytes(m.current),
                    megabytes(m.file),
                    megabytes(m.peak)
                );
            }
            out.push('\n');
        }
        for (work, name) in BUSY {
            let ns = self.busy_ns[work as usize].load(Ordering::Relaxed);
            if ns > 0 {
                let cpu = seconds(self.cpu_ns[work as usize].load(Ordering::Relaxed));
                out += &format!(
                    "  {name:<40} {:>8.3} s busy, {cpu:>7.3} s CPU\n",
                    seconds(ns)
                );
            }
        }
        out += "  (busy: wall time inside the calls, summed over threads; CPU: the\n   calling threads' CPU time inside them)\n";
        out += &format!("  {:<40} {total:>8.3} s wall", "total");
        if let Some(cpu) = process_cpu_seconds() {
            out += &format!(", {cpu:.3} s CPU (user + system)");
        }
        out.push('\n');
        out
    }
}

/// Nanoseconds as seconds, for the report.
#[allow(clippy::cast_precision_loss)] // a run's nanoseconds stay far below 2^52
fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Bytes as megabytes (10^6), as GNU time's figures are usually quoted.
#[allow(clippy::cast_precision_loss)] // a process's bytes stay far below 2^52
fn megabytes(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// The calling thread's CPU time so far, in nanoseconds: exact where the system
/// call is available ([`crate::mmap::thread_cpu_ns`]), else the first field of
/// `/proc/thread-self/schedstat` (which lags by up to a scheduler tick).
fn thread_cpu_ns() -> Option<u64> {
    crate::mmap::thread_cpu_ns().or_else(|| {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        stat.split_whitespace().next()?.parse().ok()
    })
}

/// The process's user + system CPU time so far, from `/proc/self/stat` (fields 14
/// and 15, in clock ticks of 1/100 s: Linux's USER_HZ on every architecture it
/// exports to user space).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_names_every_timed_part() {
        let t = Timings::new();
        t.phase("open input", || {
            std::thread::sleep(Duration::from_millis(5))
        });
        t.busy(Busy::Encode, || {
            std::thread::sleep(Duration::from_millis(5))
        });
        let r = t.report();
        assert!(r.contains("open input"), "{r}");
        assert!(r.contains("merge units in order"), "{r}");
        // Nothing was parsed: no line for it.
        assert!(!r.contains("parse + encode units"), "{r}");
        assert!(r.contains("total"), "{r}");
        assert!(r.contains("CPU (user + system)"), "{r}");
    }

    #[test]
    fn cpu_time_is_read() {
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(process_cpu_seconds().is_some_and(|s| s > 0.0));
    }

    #[test]
    fn memory_is_read_and_peak_covers_a_touched_block() {
        let before = arena::rss::Status::read().expect("/proc/self/status on Linux");
        assert!(before.current > 0 && before.peak >= before.current);
        // 16 MB written page by page is resident while it is held, whatever the
        // other tests of this process allocate or free meanwhile.
        let block = vec![1u8; 16 << 20];
        let during = arena::rss::Status::read().unwrap();
        assert!(std::hint::black_box(&block)
            .iter()
            .step_by(4096)
            .all(|&b| b == 1));
        assert!(during.current >= 16 << 20, "{before:?} {during:?}");
        assert!(during.peak >= during.current);
        let t = Timings::new();
        t.phase("touch", || ());
        let report = t.report();
        assert!(
            report.contains("RSS") && report.contains("(file "),
            "{report}"
        );
    }
}
