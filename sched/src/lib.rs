//! Parallel producers over indexed tasks, feeding one consumer strictly in index order.
//!
//! [`run_ordered`] runs `produce(i)` for every task `0..tasks` on a pool of workers and
//! hands each result to `consume(i, result)` in index order, exactly once per task. No
//! thread is dedicated to consuming: a *token* travels between workers. A worker that
//! finishes a task stores the result and, if the token is free, takes it and consumes
//! every consecutive ready result, then puts the token back. The state lock makes
//! "nothing ready, release the token" atomic with "result stored, is the token free?",
//! so a ready result is never left without a consumer.
//!
//! A look-ahead *window* bounds memory: task `i` starts only once `i < next + window`,
//! where `next` is the next index to consume and advances only after `consume` returns.
//! So at most `window` results exist at once, counting the one being consumed and the
//! ones still being produced. A slow task 0 cannot make the others pile up results: the
//! workers wait at the window edge until task 0's worker produces and consumes it.
//! [`run_ordered_weighted`] sizes the window by weight instead: beyond a few tasks,
//! more start only while the weights of the tasks in flight stay within a budget, so
//! many small tasks can run ahead of a large one for the memory a few large ones take.
//!
//! Tasks are handed out by work stealing (`crossbeam_deque`): one FIFO injector,
//! seeded in index order, and a FIFO deque per worker. A worker takes its next task
//! from its own deque; when that is empty it steals from the other workers' deques
//! first and only then moves a small batch from the injector into its own. That order
//! keeps tasks starting in (nearly) index order, which is what feeds the ordered
//! consumer early: every deque holds a run of consecutive indices below the injector's
//! front, so a stolen task is always an earlier one than the injector would give.
//! (ripgrep's walker keeps work local because walking a directory *creates* work; our
//! tasks create none, so the deques only spread the injector's order over the
//! workers.) Each worker pops its own tasks in increasing order, so a worker that meets
//! a task it must not run (past a failure) holds no earlier one. No active-worker count
//! is needed to detect the end: all work exists up front, so a worker is done when no
//! queue has a task and its last result is stored; the run is done when all have joined.
//!
//! The outcome is the one a sequential loop `for i { consume(i, produce(i)?)? }` would
//! give: the same `consume` calls in the same order, and the error of the lowest-indexed
//! failure, whatever the timing. Once task `i` is known to fail no task above `i`
//! starts, and once the failure is reached in order every worker stops after its
//! current task. Panics in `produce` or `consume` are caught and returned as
//! [`Error::Panicked`]; they are never re-raised on the caller and never hang the run.
//!
//! [`LocalPool`] holds what the workers reuse from task to task (buffers, caches,
//! arenas) and gives each thread back the object it used last, so that a worker's
//! warm cache stays with the core that warmed it.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::any::Any;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};

mod pool;
pub use pool::LocalPool;

/// Which callback failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `produce`, running on some worker.
    Produce,
    /// `consume`, running on the token holder.
    Consume,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Produce => "produce",
            Stage::Consume => "consume",
        })
    }
}

/// Why a run ended early: the first failure in task order.
#[derive(Debug)]
pub enum Error<E> {
    /// A callback returned `error` for `task`.
    Failed {
        /// The failing task's index.
        task: usize,
        /// The callback that failed.
        stage: Stage,
        /// What it returned.
        error: E,
    },
    /// A callback panicked on `task`; the panic was caught and its message kept.
    Panicked {
        /// The panicking task's index.
        task: usize,
        /// The callback that panicked.
        stage: Stage,
        /// The panic message (`"<non-string panic payload>"` if it was not a string).
        message: String,
    },
}

impl<E> Error<E> {
    /// The index of the task that failed.
    pub fn task(&self) -> usize {
        match self {
            Error::Failed { task, .. } | Error::Panicked { task, .. } => *task,
        }
    }

    /// The callback that failed.
    pub fn stage(&self) -> Stage {
        match self {
            Error::Failed { stage, .. } | Error::Panicked { stage, .. } => *stage,
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Failed { error, .. } => error.fmt(f),
            Error::Panicked {
                task,
                stage,
                message,
            } => write!(f, "task {task}: {stage} panicked: {message}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Failed { error, .. } => Some(error),
            Error::Panicked { .. } => None,
        }
    }
}

/// A window that keeps `jobs` workers busy with slack for uneven task sizes: twice the
/// workers, so a worker finishing early finds a task to start while a long one is still
/// being produced. Each unit of window costs one task's result in memory.
pub const fn default_window(jobs: usize) -> usize {
    if jobs == 0 {
        2
    } else {
        jobs.saturating_mul(2)
    }
}

/// How far ahead of the consumer tasks may start, for [`run_ordered_weighted`]: task
/// `i` starts once `i < next + min`, or once `i < next + max` and the weights of tasks
/// `next..=i` sum to at most `budget` (`next`: the next task to consume). At most `max`
/// results exist at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Tasks in flight whatever their weights (below 1 counts as 1).
    pub min: usize,
    /// Tasks in flight at most (below `min` counts as `min`).
    pub max: usize,
    /// The weight that tasks beyond the first `min` may bring in flight.
    pub budget: u64,
}

impl Window {
    /// A window of `n` tasks, whatever their weights.
    pub const fn tasks(n: usize) -> Window {
        Window {
            min: n,
            max: n,
            budget: 0,
        }
    }
}

/// Runs `produce` for tasks `0..tasks` on `jobs` workers and `consume` on each result in
/// index order, with at most `window` results alive at once (see the crate docs).
///
/// `jobs` and `window` below 1 count as 1; `jobs` is capped at `tasks`. With one job
/// everything runs on the calling thread, through the same code as with many; with
/// more, the calling thread is one of the workers. Returns the error, or the caught
/// panic, of the first task in index order that failed; `consume` has then been called
/// for exactly the tasks before it.
///
/// ```
/// // Square numbers on two workers; collect them in order.
/// let mut out = Vec::new();
/// sched::run_ordered::<u64, String, _, _>(
///     10,
///     2,
///     sched::default_window(2),
///     |i| Ok((i * i) as u64),
///     |i, square| {
///         assert_eq!(out.len(), i);
///         out.push(square);
///         Ok(())
///     },
/// )
/// .unwrap();
/// assert_eq!(out, [0, 1, 4, 9, 16, 25, 36, 49, 64, 81]);
/// ```
pub fn run_ordered<T, E, P, C>(
    tasks: usize,
    jobs: usize,
    window: usize,
    produce: P,
    consume: C,
) -> Result<(), Error<E>>
where
    T: Send,
    E: Send,
    P: Fn(usize) -> Result<T, E> + Sync,
    C: FnMut(usize, T) -> Result<(), E> + Send,
{
    run_ordered_weighted(tasks, jobs, Window::tasks(window), |_| 0, produce, consume)
}

/// [`run_ordered`] with a window sized by the tasks' weights: `weight(i)` for task `i`
/// (say, the bytes its result will take), asked once per task before any starts.
pub fn run_ordered_weighted<T, E, P, C>(
    tasks: usize,
    jobs: usize,
    window: Window,
    weight: impl Fn(usize) -> u64,
    produce: P,
    consume: C,
) -> Result<(), Error<E>>
where
    T: Send,
    E: Send,
    P: Fn(usize) -> Result<T, E> + Sync,
    C: FnMut(usize, T) -> Result<(), E> + Send,
{
    if tasks == 0 {
        return Ok(());
    }
    let jobs = jobs.clamp(1, tasks);
    let min = window.min.clamp(1, tasks);
    let window = Window {
        min,
        max: window.max.clamp(min, tasks),
        budget: window.budget,
    };
    // Weights summed up to each task, so that any run of tasks is weighed at once.
    let mut upto = Vec::with_capacity(tasks + 1);
    upto.push(0u64);
    for task in 0..tasks {
        upto.push(upto[task].saturating_add(weight(task)));
    }
    let mut deques: Vec<Worker<usize>> = (0..jobs).map(|_| Worker::new_fifo()).collect();
    let stealers = deques.iter().map(Worker::stealer).collect();
    let run = Run::new(tasks, window, upto, stealers, produce, consume);
    let own = deques.remove(0);
    if jobs == 1 {
        run.worker(0, own);
    } else {
        std::thread::scope(|scope| {
            for (k, deque) in deques.into_iter().enumerate() {
                let run = &run;
                let spawned = std::thread::Builder::new()
                    .name(format!("dwarf2btf-worker-{}", k + 1))
                    // The main thread's usual stack, so a deep recursion that works
                    // with one job does not overflow with more.
                    .stack_size(WORKER_STACK)
                    .spawn_scoped(scope, move || run.worker(k + 1, deque));
                // Too few threads only slows the run down: the caller's worker and the
                // ones already started still do every task (a deque whose thread did
                // not start stays empty: it never took a task).
                if spawned.is_err() {
                    break;
                }
            }
            run.worker(0, own);
        });
    }
    run.finish()
}

/// Stack size of spawned workers: what Linux gives the main thread by default.
const WORKER_STACK: usize = 8 << 20;

/// Most tasks a worker moves from the injector into its own deque at once: enough to
/// spare the injector a steal per task, few enough that a batch's later tasks are
/// soon stolen by idle workers rather than waiting behind a long first one.
const BATCH: usize = 2;

/// What `produce` gave for one task, waiting in the window to be consumed.
type Outcome<T, E> = Result<T, Failure<E>>;

/// A failed callback, before the task index and stage are attached.
enum Failure<E> {
    /// It returned an error.
    Returned(E),
    /// It panicked with this message.
    Panicked(String),
}

impl<E> Failure<E> {
    fn at(self, task: usize, stage: Stage) -> Error<E> {
        match self {
            Failure::Returned(error) => Error::Failed { task, stage, error },
            Failure::Panicked(message) => Error::Panicked {
                task,
                stage,
                message,
            },
        }
    }
}

/// Runs `f`, turning a returned error or a panic into a [`Failure`].
fn call<R, E>(f: impl FnOnce() -> Result<R, E>) -> Result<R, Failure<E>> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(Failure::Returned(error)),
        Err(payload) => Err(Failure::Panicked(panic_message(payload))),
    }
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(message) => (*message).to_owned(),
            Err(_) => "<non-string panic payload>".to_owned(),
        },
    }
}

/// State behind the lock: the window's results and the consumer token.
struct Slots<T, E> {
    /// Produced, not yet consumed results; task `i` lives at `i % window`. Tasks in
    /// flight all lie in `next..next + window`, so no two share a slot.
    ring: Vec<Option<Outcome<T, E>>>,
    /// A worker holds the consumer token and is draining ready results.
    token_held: bool,
    /// The failure that ended the run, once reached in order.
    failure: Option<Error<E>>,
    /// Workers asleep on `advanced`; waking nobody would cost a syscall per task.
    waiting: usize,
}

/// Everything the workers of one run share.
struct Run<T, E, P, C> {
    /// Number of tasks; indices are `0..tasks`.
    tasks: usize,
    /// Most results alive at once; also the length of the slot ring.
    window: usize,
    /// Tasks that may be in flight whatever their weights.
    min: usize,
    /// What tasks beyond the first `min` in flight may weigh together.
    budget: u64,
    /// The weights of tasks `0..i` summed, for every `i` in `0..=tasks`.
    upto: Vec<u64>,
    /// Task indices not yet taken by any worker, lowest first.
    queue: Injector<usize>,
    /// The other ends of the workers' own deques, by worker number.
    stealers: Vec<Stealer<usize>>,
    /// Index of the next task to consume. Only the token holder advances it, under the
    /// `slots` lock, after `consume` returns; read without the lock as a fast path for
    /// the window check (it only grows, so a stale value is merely conservative).
    next: AtomicUsize,
    /// No task at or above this index starts: the lowest task whose `produce` failed
    /// (`tasks` while none has). Tasks below it still run, as a sequential run would.
    limit: AtomicUsize,
    /// Set once the run must stop: a failure was reached in order, or a worker thread
    /// died. Workers check it before each task and while waiting at the window.
    quit: AtomicBool,
    /// The window's results, the token, the failure.
    slots: Mutex<Slots<T, E>>,
    /// Signalled (under `slots`) whenever `next` advances or `quit` is set, to wake
    /// workers waiting at the window edge.
    advanced: Condvar,
    /// The producer, shared by all workers.
    produce: P,
    /// The consumer. Only the token holder locks it, so the lock is never contended; it
    /// only makes the `FnMut` reachable from whichever thread holds the token.
    consume: Mutex<C>,
}

impl<T, E, P, C> Run<T, E, P, C>
where
    T: Send,
    E: Send,
    P: Fn(usize) -> Result<T, E> + Sync,
    C: FnMut(usize, T) -> Result<(), E> + Send,
{
    fn new(
        tasks: usize,
        window: Window,
        upto: Vec<u64>,
        stealers: Vec<Stealer<usize>>,
        produce: P,
        consume: C,
    ) -> Self {
        let queue = Injector::new();
        for task in 0..tasks {
            queue.push(task);
        }
        Self {
            tasks,
            window: window.max,
            min: window.min,
            budget: window.budget,
            upto,
            queue,
            stealers,
            next: AtomicUsize::new(0),
            limit: AtomicUsize::new(tasks),
            quit: AtomicBool::new(false),
            slots: Mutex::new(Slots {
                ring: (0..window.max).map(|_| None).collect(),
                token_held: false,
                failure: None,
                waiting: 0,
            }),
            advanced: Condvar::new(),
            produce,
            consume: Mutex::new(consume),
        }
    }

    /// One worker: take the next task, wait for the window, produce, store, consume
    /// what is ready. Returns when the queue is empty or the run must stop.
    fn worker(&self, me: usize, own: Worker<usize>) {
        let _guard = QuitOnPanic(self);
        while !self.quit.load(Ordering::Acquire) {
            let Some(task) = self.take_task(me, &own) else {
                break;
            };
            // Our own tasks come out in index order, so every later one is out of
            // bounds too.
            if !self.wait_for_window(task) {
                break;
            }
            let outcome = call(|| (self.produce)(task));
            if outcome.is_err() {
                self.limit.fetch_min(task, Ordering::AcqRel);
            }
            self.store(task, outcome);
        }
    }

    /// The next task for worker `me`: from its own deque, else stolen from another
    /// worker's (those hold earlier tasks than the injector), else a batch from the
    /// injector. `None` once every queue is empty.
    fn take_task(&self, me: usize, own: &Worker<usize>) -> Option<usize> {
        if let Some(task) = own.pop() {
            return Some(task);
        }
        loop {
            let mut retry = false;
            for (k, other) in self.stealers.iter().enumerate() {
                if k == me {
                    continue;
                }
                match other.steal() {
                    Steal::Success(task) => return Some(task),
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
            }
            match self.queue.steal_batch_with_limit_and_pop(own, BATCH) {
                Steal::Success(task) => return Some(task),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            if !retry {
                return None;
            }
            std::hint::spin_loop();
        }
    }

    /// Whether `task` may start while `next` is the next task to consume.
    fn fits(&self, task: usize, next: usize) -> bool {
        task < next + self.min
            || (task < next + self.window && self.upto[task + 1] - self.upto[next] <= self.budget)
    }

    /// Waits until `task` is inside the window. False if it must not run at all.
    fn wait_for_window(&self, task: usize) -> bool {
        if task >= self.limit.load(Ordering::Acquire) {
            return false;
        }
        if self.fits(task, self.next.load(Ordering::Acquire)) {
            return true;
        }
        let mut slots = self.lock_slots();
        loop {
            if self.quit.load(Ordering::Acquire) || task >= self.limit.load(Ordering::Acquire) {
                return false;
            }
            if self.fits(task, self.next.load(Ordering::Acquire)) {
                return true;
            }
            slots.waiting += 1;
            slots = self
                .advanced
                .wait(slots)
                .unwrap_or_else(PoisonError::into_inner);
            slots.waiting -= 1;
        }
    }

    /// Puts a result in its slot and, if the token is free, takes it and consumes.
    fn store(&self, task: usize, outcome: Outcome<T, E>) {
        let mut slots = self.lock_slots();
        if self.quit.load(Ordering::Acquire) {
            drop(slots);
            // Dropped outside the lock: freeing a result (an arena) can take a while.
            drop(outcome);
            return;
        }
        slots.ring[task % self.window] = Some(outcome);
        if slots.token_held {
            // The holder re-checks the slot of `next` under this lock before releasing
            // the token, so it will see this result if it is the one due.
            return;
        }
        slots.token_held = true;
        self.drain(slots);
    }

    /// Holding the token: consume ready results in order until the next one is not
    /// ready, then release the token.
    fn drain<'a>(&'a self, mut slots: MutexGuard<'a, Slots<T, E>>) {
        loop {
            let next = self.next.load(Ordering::Acquire);
            if next == self.tasks || self.quit.load(Ordering::Acquire) {
                break;
            }
            let Some(outcome) = slots.ring[next % self.window].take() else {
                break;
            };
            drop(slots);
            let failure = match outcome {
                Ok(value) => call(|| {
                    let mut consume = self.consume.lock().unwrap_or_else(PoisonError::into_inner);
                    (*consume)(next, value)
                })
                .err()
                .map(|failure| failure.at(next, Stage::Consume)),
                Err(failure) => Some(failure.at(next, Stage::Produce)),
            };
            slots = self.lock_slots();
            match failure {
                None => self.next.store(next + 1, Ordering::Release),
                Some(error) => {
                    slots.failure = Some(error);
                    self.quit.store(true, Ordering::Release);
                }
            }
            if slots.waiting > 0 {
                self.advanced.notify_all();
            }
        }
        slots.token_held = false;
    }

    fn lock_slots(&self) -> MutexGuard<'_, Slots<T, E>> {
        // No callback runs under this lock, so it is poisoned only by a bug here; the
        // state is still consistent enough to wind the run down.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// After every worker has returned: the run's result.
    fn finish(self) -> Result<(), Error<E>> {
        let slots = self
            .slots
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        match slots.failure {
            Some(error) => Err(error),
            None => {
                debug_assert_eq!(self.next.into_inner(), self.tasks, "tasks left unconsumed");
                Ok(())
            }
        }
    }
}

/// Stops the whole run if a worker thread unwinds (a bug in this crate: callback panics
/// are caught), so the other workers do not wait at the window forever; the scope then
/// re-raises the panic on the caller.
struct QuitOnPanic<'a, T, E, P, C>(&'a Run<T, E, P, C>);

impl<T, E, P, C> Drop for QuitOnPanic<'_, T, E, P, C> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let run = self.0;
            run.quit.store(true, Ordering::Release);
            // Taken so a waiter cannot check `quit` and then miss this wakeup.
            let _slots = run.slots.lock().unwrap_or_else(PoisonError::into_inner);
            run.advanced.notify_all();
        }
    }
}

#[cfg(test)]
mod tests;
