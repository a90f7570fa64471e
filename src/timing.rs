//! `--time` (as the wild linker has it): where one run's time goes, printed on stderr
//! when it ends. Phases on the main thread are timed by their wall clock and the
//! process's CPU time meanwhile (all threads); the work spread over threads (parsing
//! and encoding on the workers, the in-order merge on the token holder, its dedup)
//! by its busy time — the wall clock inside each call, summed — and by the CPU time
//! of the calling thread inside each call (`clock_gettime`'s thread clock), which
//! stays true on a machine short of CPUs. The run's CPU time is the process's own
//! (user + system, from `/proc/self/stat`). Each phase also shows the process's
//! resident memory when it ended and its peak so far (`/proc/self/status`), which
//! tells which part of the run sets the peak, and the page faults taken meanwhile
//! (all threads): with several workers, much of what a run pays beyond one worker
//! is system time, most of it faults on pages the allocator gave back.

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
    /// Page faults of the process meanwhile (minor and major).
    faults: Option<u64>,
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
        let (t, before) = (Instant::now(), ProcessStat::read());
        let r = f();
        let took = t.elapsed();
        let (cpu, faults) = match before.zip(ProcessStat::read()) {
            Some((a, b)) => (
                Some(b.cpu_seconds() - a.cpu_seconds()),
                Some(b.faults().saturating_sub(a.faults())),
            ),
            None => (None, None),
        };
        let memory = arena::rss::Status::read().ok();
        self.phases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Phase {
                name,
                took,
                cpu,
                memory,
                faults,
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
            if let Some(n) = p.faults {
                out += &format!(", {n} faults");
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
        if let Some(s) = ProcessStat::read() {
            out += &format!(
                ", {:.3} s CPU (user {:.2} + system {:.2}), {} page faults ({} major)",
                s.cpu_seconds(),
                ticks(s.utime),
                ticks(s.stime),
                s.faults(),
                s.majflt
            );
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

/// The process's counters so far, from `/proc/self/stat`: page faults (fields 10
/// and 12) and user and system CPU time (fields 14 and 15, in clock ticks of 1/100
/// s: Linux's USER_HZ on every architecture it exports to user space).
#[derive(Clone, Copy, Debug)]
struct ProcessStat {
    minflt: u64,
    majflt: u64,
    utime: u64,
    stime: u64,
}

impl ProcessStat {
    fn read() -> Option<ProcessStat> {
        ProcessStat::parse(&std::fs::read_to_string("/proc/self/stat").ok()?)
    }

    fn parse(stat: &str) -> Option<ProcessStat> {
        // The command name (field 2) is in parentheses and may hold spaces; what
        // follows starts with field 3.
        let rest = stat.get(stat.rfind(')')? + 2..)?;
        let fields: Vec<&str> = rest.split_whitespace().take(13).collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(ProcessStat {
            minflt: field(10)?,
            majflt: field(12)?,
            utime: field(14)?,
            stime: field(15)?,
        })
    }

    fn cpu_seconds(&self) -> f64 {
        ticks(self.utime + self.stime)
    }

    fn faults(&self) -> u64 {
        self.minflt + self.majflt
    }
}

/// Clock ticks of 1/100 s as seconds.
#[allow(clippy::cast_precision_loss)] // a run's ticks stay far below 2^52
fn ticks(n: u64) -> f64 {
    n as f64 / 100.0
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
        assert!(r.contains("s CPU (user "), "{r}");
        assert!(r.contains("page faults"), "{r}");
    }

    #[test]
    fn cpu_time_is_read() {
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(ProcessStat::read().is_some_and(|s| s.cpu_seconds() > 0.0));
    }

    #[test]
    fn process_stat_fields_are_read_past_a_command_name_with_spaces() {
        // A kernel 6.x `/proc/PID/stat` line, fields 1-20, for a command `a) b`.
        let line = "42 (a) b) R 1 42 42 0 -1 4194560 31250 7 3 0 178 12 0 0 20 0";
        let s = ProcessStat::parse(line).unwrap();
        assert_eq!((s.minflt, s.majflt, s.utime, s.stime), (31250, 3, 178, 12));
        assert_eq!(s.faults(), 31253);
        assert!((s.cpu_seconds() - 1.90).abs() < 1e-9);
        assert!(ProcessStat::parse("42 (a) R 1 2").is_none());
        assert!(ProcessStat::parse("no name").is_none());
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
            report.contains("RSS") && report.contains("(file ") && report.contains(" faults"),
            "{report}"
        );
    }
}
