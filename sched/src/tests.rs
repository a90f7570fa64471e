use super::*;

use std::sync::atomic::AtomicUsize;
use std::sync::{mpsc, Arc, Once};
use std::time::{Duration, Instant};

/// A small seeded PRNG (xorshift64*), so the stress runs are repeatable.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A number below `n`, as an index.
    fn index_below(&mut self, n: usize) -> usize {
        usize::try_from(self.below(n as u64)).expect("below a usize")
    }
}

/// Injected panics start with this; the hook keeps them off stderr.
const INJECTED: &str = "injected panic";

fn quiet_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !message.starts_with(INJECTED) {
                default(info);
            }
        }));
    });
}

/// Runs `f` on its own thread and fails the test if it takes longer than `secs`: a hang
/// must show up as a failure, not as a stuck test run.
fn within<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(value) => {
            handle.join().unwrap();
            value
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("sender dropped without sending"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("run did not finish in {secs} s"),
    }
}

/// What a test injects into task `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    ProduceErr(usize),
    ProducePanic(usize),
    ConsumeErr(usize),
    ConsumePanic(usize),
}

/// A test's setup: tasks, workers, window, per-task delays and one fault.
#[derive(Debug, Clone)]
struct Case {
    tasks: usize,
    jobs: usize,
    window: usize,
    /// Microseconds each task's `produce` sleeps.
    delay_us: Vec<u64>,
    fault: Fault,
}

impl Case {
    fn new(tasks: usize, jobs: usize, window: usize) -> Self {
        Case {
            tasks,
            jobs,
            window,
            delay_us: vec![0; tasks],
            fault: Fault::None,
        }
    }
}

/// Counts results alive at once: made when `produce` starts, gone when the result is
/// dropped (by `consume`, or by the scheduler when the run stops).
struct Alive {
    now: Arc<AtomicUsize>,
}

impl Alive {
    fn new(now: &Arc<AtomicUsize>, max: &AtomicUsize) -> Self {
        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
        max.fetch_max(n, Ordering::SeqCst);
        Alive { now: now.clone() }
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `(task, stage, is_panic)` of the error a run returned.
type Failed = (usize, Stage, bool);

/// What a run did.
#[derive(Debug)]
struct Outcome {
    /// `(task, value)` in the order `consume` saw them.
    consumed: Vec<(usize, u64)>,
    /// The error returned, if any.
    error: Option<Failed>,
    /// Most results alive at once.
    max_alive: usize,
    /// How many `produce` calls started.
    produced: usize,
}

fn value_of(task: usize) -> u64 {
    (task as u64).wrapping_mul(2_654_435_761) ^ 0x5eed
}

fn run_case(case: &Case) -> Outcome {
    quiet_injected_panics();
    let now = Arc::new(AtomicUsize::new(0));
    let max = AtomicUsize::new(0);
    let produced = AtomicUsize::new(0);
    let mut consumed = Vec::new();
    let fault = case.fault;
    let result = run_ordered(
        case.tasks,
        case.jobs,
        case.window,
        |task| {
            let alive = Alive::new(&now, &max);
            produced.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_micros(case.delay_us[task]));
            match fault {
                Fault::ProduceErr(at) if at == task => return Err(format!("bad task {task}")),
                Fault::ProducePanic(at) if at == task => panic!("{INJECTED} in produce {task}"),
                _ => {}
            }
            Ok((value_of(task), alive))
        },
        |task, (value, alive): (u64, Alive)| {
            consumed.push((task, value));
            drop(alive);
            match fault {
                Fault::ConsumeErr(at) if at == task => Err(format!("cannot take {task}")),
                Fault::ConsumePanic(at) if at == task => panic!("{INJECTED} in consume {task}"),
                _ => Ok(()),
            }
        },
    );
    assert_eq!(now.load(Ordering::SeqCst), 0, "results leaked: {case:?}");
    Outcome {
        consumed,
        error: result.err().map(|e| {
            let panicked = matches!(e, Error::Panicked { .. });
            (e.task(), e.stage(), panicked)
        }),
        max_alive: max.load(Ordering::SeqCst),
        produced: produced.load(Ordering::SeqCst),
    }
}

/// What a plain sequential loop would have done for `case`.
fn expected(case: &Case) -> (Vec<(usize, u64)>, Option<Failed>) {
    let mut consumed = Vec::new();
    for task in 0..case.tasks {
        match case.fault {
            Fault::ProduceErr(at) if at == task => {
                return (consumed, Some((task, Stage::Produce, false)))
            }
            Fault::ProducePanic(at) if at == task => {
                return (consumed, Some((task, Stage::Produce, true)))
            }
            _ => {}
        }
        consumed.push((task, value_of(task)));
        match case.fault {
            Fault::ConsumeErr(at) if at == task => {
                return (consumed, Some((task, Stage::Consume, false)))
            }
            Fault::ConsumePanic(at) if at == task => {
                return (consumed, Some((task, Stage::Consume, true)))
            }
            _ => {}
        }
    }
    (consumed, None)
}

/// Runs `case` under a watchdog and checks it against the sequential model and the
/// window bound.
fn check_window(case: Case) -> Outcome {
    let window = case.window.max(1);
    let shown = format!("{case:?}");
    let out = within(20, move || {
        let out = run_case(&case);
        let (consumed, error) = expected(&case);
        assert_eq!(out.consumed, consumed, "{case:?}");
        assert_eq!(out.error, error, "{case:?}");
        out
    });
    assert!(
        out.max_alive <= window,
        "{} results alive at once, window {window}: {shown}",
        out.max_alive
    );
    out
}

#[test]
fn zero_tasks_calls_nothing() {
    let out = check_window(Case::new(0, 4, 4));
    assert_eq!((out.produced, out.consumed.len()), (0, 0));
}

#[test]
fn one_vs_many_workers_give_the_same_sequence() {
    let mut rng = Rng::new(1);
    let mut case = Case::new(60, 1, 4);
    case.delay_us = (0..60).map(|_| rng.below(400)).collect();
    let one = check_window(case.clone());
    for jobs in [2, 3, 8] {
        case.jobs = jobs;
        assert_eq!(
            check_window(case.clone()).consumed,
            one.consumed,
            "jobs {jobs}"
        );
    }
    assert_eq!(one.consumed.len(), 60);
}

#[test]
fn one_job_runs_everything_on_the_calling_thread() {
    let me = std::thread::current().id();
    let seen = Mutex::new(Vec::new());
    let mut consumed_on = Vec::new();
    run_ordered::<_, (), _, _>(
        10,
        1,
        3,
        |task| {
            seen.lock().unwrap().push(std::thread::current().id());
            Ok(task)
        },
        |_, _| {
            consumed_on.push(std::thread::current().id());
            Ok(())
        },
    )
    .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 10);
    assert!(seen.iter().chain(&consumed_on).all(|&id| id == me));
}

#[test]
fn slow_first_task_neither_deadlocks_nor_overfills_the_window() {
    let mut case = Case::new(200, 4, 3);
    case.delay_us[0] = 300_000;
    let start = Instant::now();
    let out = check_window(case);
    // The window held everything back while task 0 slept.
    assert_eq!(out.max_alive, 3);
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn slow_task_in_the_middle_with_a_wide_window() {
    let mut case = Case::new(100, 3, 16);
    case.delay_us[37] = 100_000;
    let out = check_window(case);
    assert_eq!(out.max_alive, 16, "the other workers filled the window");
}

#[test]
fn window_of_one_runs_tasks_one_at_a_time() {
    let mut rng = Rng::new(2);
    let mut case = Case::new(40, 4, 1);
    case.delay_us = (0..40).map(|_| rng.below(200)).collect();
    assert_eq!(check_window(case).max_alive, 1);
    // Zero counts as one.
    assert_eq!(check_window(Case::new(5, 2, 0)).max_alive, 1);
}

#[test]
fn more_jobs_than_tasks() {
    let out = check_window(Case::new(3, 16, 8));
    assert_eq!(out.consumed.len(), 3);
    check_window(Case::new(1, 0, 1));
}

#[test]
fn produce_error_reports_the_lowest_failing_task() {
    // Task 3 fails late, task 9 early: the answer is still task 3, as sequentially.
    quiet_injected_panics();
    for jobs in [1, 2, 4] {
        let mut consumed = Vec::new();
        let result = within(10, move || {
            let r = run_ordered(
                20,
                jobs,
                8,
                |task| match task {
                    3 => {
                        std::thread::sleep(Duration::from_millis(50));
                        Err(format!("task {task} is bad"))
                    }
                    9 => Err(format!("task {task} is bad")),
                    _ => Ok(task),
                },
                |task, value| {
                    assert_eq!(task, value);
                    consumed.push(task);
                    Ok(())
                },
            );
            (r, consumed)
        });
        let (r, consumed) = result;
        assert_eq!(consumed, vec![0, 1, 2], "jobs {jobs}");
        match r {
            Err(Error::Failed {
                task: 3,
                stage: Stage::Produce,
                error,
            }) => assert_eq!(error, "task 3 is bad"),
            other => panic!("jobs {jobs}: {other:?}"),
        }
    }
}

#[test]
fn produce_panic_becomes_an_error() {
    let mut case = Case::new(30, 3, 4);
    case.fault = Fault::ProducePanic(11);
    check_window(case);
    quiet_injected_panics();
    let err = run_ordered::<(), String, _, _>(
        5,
        2,
        2,
        |task| {
            if task == 2 {
                panic!("{INJECTED}: task {task}");
            }
            Ok(())
        },
        |_, _| Ok(()),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("task 2: produce panicked: {INJECTED}: task 2")
    );
}

#[test]
fn consume_error_and_panic_end_the_run() {
    for fault in [
        Fault::ConsumeErr(0),
        Fault::ConsumeErr(17),
        Fault::ConsumePanic(5),
    ] {
        for jobs in [1, 3] {
            let mut case = Case::new(40, jobs, 5);
            case.fault = fault;
            check_window(case);
        }
    }
}

#[test]
fn failures_stop_the_other_workers_promptly() {
    // 10 000 tasks of 1 ms each would take seconds; a failure must end it at once.
    for fault in [
        Fault::ProduceErr(0),
        Fault::ConsumeErr(4),
        Fault::ProducePanic(2),
    ] {
        let mut case = Case::new(10_000, 4, 8);
        case.delay_us = vec![1000; 10_000];
        case.fault = fault;
        let start = Instant::now();
        let out = check_window(case);
        assert!(start.elapsed() < Duration::from_secs(1), "{fault:?}");
        assert!(
            out.produced <= 8 + 8,
            "{fault:?}: {} tasks produced",
            out.produced
        );
    }
}

#[test]
fn error_display_and_source() {
    let err: Error<std::io::Error> = Error::Failed {
        task: 4,
        stage: Stage::Consume,
        error: std::io::Error::other("disk full"),
    };
    assert_eq!(err.to_string(), "disk full");
    assert_eq!(
        std::error::Error::source(&err).unwrap().to_string(),
        "disk full"
    );
    let err: Error<std::io::Error> = Error::Panicked {
        task: 1,
        stage: Stage::Produce,
        message: "boom".into(),
    };
    assert_eq!(err.to_string(), "task 1: produce panicked: boom");
    assert!(std::error::Error::source(&err).is_none());
}

#[test]
fn default_window_leaves_slack_for_every_worker() {
    assert_eq!(default_window(0), 2);
    assert_eq!(default_window(1), 2);
    assert_eq!(default_window(8), 16);
    assert_eq!(default_window(usize::MAX), usize::MAX);
}

#[test]
fn stress_random_delays_sizes_and_faults() {
    let mut rng = Rng::new(0xD0A2F);
    let start = Instant::now();
    for _ in 0..400 {
        let tasks = rng.index_below(40);
        let mut case = Case::new(tasks, 1 + rng.index_below(6), rng.index_below(9));
        case.delay_us = (0..tasks)
            .map(|_| if rng.below(4) == 0 { rng.below(300) } else { 0 })
            .collect();
        if tasks > 0 {
            let at = rng.index_below(tasks);
            case.fault = match rng.below(8) {
                0 => Fault::ProduceErr(at),
                1 => Fault::ProducePanic(at),
                2 => Fault::ConsumeErr(at),
                3 => Fault::ConsumePanic(at),
                _ => Fault::None,
            };
        }
        check_window(case);
    }
    assert!(start.elapsed() < Duration::from_secs(8));
}

#[test]
fn an_idle_worker_steals_from_a_busy_workers_deque() {
    // Worker deques take tasks from the injector in batches: while the worker that
    // holds task 0 is slow, the tasks queued behind it in its own deque are stolen
    // and produced by the other worker.
    let producers = within(30, || {
        let producers = Mutex::new(vec![None; 6]);
        run_ordered::<(), (), _, _>(
            6,
            2,
            6,
            |task| {
                if task == 0 {
                    std::thread::sleep(Duration::from_millis(500));
                }
                lock(&producers)[task] = Some(std::thread::current().id());
                Ok(())
            },
            |_, ()| Ok(()),
        )
        .unwrap();
        producers.into_inner().unwrap()
    });
    let slow = producers[0].unwrap();
    assert!(
        producers[1..].iter().all(|p| p.unwrap() != slow),
        "tasks 1..6 should all have run on the other worker: {producers:?}"
    );
}

fn lock<X>(m: &Mutex<X>) -> std::sync::MutexGuard<'_, X> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `tasks` tasks with `weights` under `window` on `jobs` workers, each sleeping
/// `delay_us(task)`, and checks every start against the window's rule as seen from
/// the tasks consumed so far (which the scheduler's own count never exceeds, so a
/// start it allowed is allowed here too). Returns the most tasks in flight at once and
/// how many tasks started before task 0 was consumed.
fn check_weighted(
    jobs: usize,
    window: Window,
    weights: Vec<u64>,
    delay_us: impl Fn(usize) -> u64 + Sync + Send + 'static,
) -> (usize, usize) {
    within(20, move || {
        let tasks = weights.len();
        let upto: Vec<u64> = std::iter::once(0)
            .chain(weights.iter().scan(0u64, |sum, &w| {
                *sum += w;
                Some(*sum)
            }))
            .collect();
        let (min, max_tasks) = (window.min.max(1), window.max.max(window.min.max(1)));
        let consumed = AtomicUsize::new(0);
        let ahead = AtomicUsize::new(0);
        let now = Arc::new(AtomicUsize::new(0));
        let max = AtomicUsize::new(0);
        let mut seen = Vec::new();
        run_ordered_weighted::<_, String, _, _>(
            tasks,
            jobs,
            window,
            |task| weights[task],
            |task| {
                let alive = Alive::new(&now, &max);
                let next = consumed.load(Ordering::SeqCst);
                if next == 0 {
                    ahead.fetch_add(1, Ordering::SeqCst);
                }
                let fits = task < next + min
                    || (task < next + max_tasks && upto[task + 1] - upto[next] <= window.budget);
                assert!(fits, "task {task} started with {next} consumed: {window:?}");
                std::thread::sleep(Duration::from_micros(delay_us(task)));
                Ok((task, alive))
            },
            |task, (value, alive)| {
                assert_eq!(task, value);
                seen.push(task);
                drop(alive);
                consumed.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, (0..tasks).collect::<Vec<_>>());
        let most = max.load(Ordering::SeqCst);
        assert!(most <= max_tasks, "{most} in flight, at most {max_tasks}");
        (most, ahead.load(Ordering::SeqCst))
    })
}

#[test]
fn weighted_window_keeps_to_its_count_and_budget() {
    let mut rng = Rng::new(7);
    for round in 0..20 {
        let tasks = 1 + rng.index_below(60);
        let weights: Vec<u64> = (0..tasks).map(|_| rng.below(100)).collect();
        let window = Window {
            min: rng.index_below(4),
            max: rng.index_below(12),
            budget: rng.below(300),
        };
        let delays: Vec<u64> = (0..tasks).map(|_| rng.below(400)).collect();
        let jobs = 1 + (round % 4);
        check_weighted(jobs, window, weights, move |t| delays[t]);
    }
}

#[test]
fn light_tasks_run_ahead_of_a_slow_heavy_one() {
    // Task 0 is slow and heavy, the rest light: two tasks start whatever their
    // weight, then light ones while the budget lasts (tasks 0..=10 weigh 1010).
    let heavy_first = || {
        let mut weights = vec![1u64; 40];
        weights[0] = 1000;
        weights
    };
    // (Task 0's 200 ms leave the other worker ample time for ten tasks of 10 µs.)
    let slow_first = |t| if t == 0 { 200_000 } else { 10 };
    // Then a budget the heavy task alone exceeds: the fixed window of two.
    for (budget, started) in [(1010, 11), (999, 2)] {
        let window = Window {
            min: 2,
            max: 16,
            budget,
        };
        let (_, ahead) = check_weighted(2, window, heavy_first(), slow_first);
        assert_eq!(
            ahead, started,
            "tasks started before task 0 was consumed, budget {budget}"
        );
    }
}
