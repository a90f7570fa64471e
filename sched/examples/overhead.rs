//! Measures the scheduler's per-task overhead on trivial tasks: `cargo run --release -p
//! dwarf2btf-sched --example overhead`.
fn main() {
    for jobs in [1, 2, 4] {
        let start = std::time::Instant::now();
        let mut sum = 0u64;
        sched::run_ordered::<u64, (), _, _>(
            200_000,
            jobs,
            sched::default_window(jobs),
            |i| Ok(i as u64),
            |_, v| {
                sum += v;
                Ok(())
            },
        )
        .unwrap();
        println!(
            "jobs {jobs}: {:?} for 200000 tasks (sum {sum})",
            start.elapsed()
        );
    }
}
