//! A second ordered stage behind [`run_ordered`](crate::run_ordered)'s consumer: items
//! pushed in order are handed to one `step` function strictly in that order, either on
//! a thread of its own (so step `i` overlaps whatever the pusher does for item `i + 1`)
//! or inline on the pusher's thread, through the same calls in the same order. Results
//! come back to the pusher, in order, when it asks for them ([`Feeder::drain`]), so
//! whatever they own is freed on the thread that pushes.
//!
//! It never hangs: a step that fails or panics ends the stage at once, and the pusher's
//! next [`Feeder::push`], even one blocked on a full queue, returns [`Stopped`] instead
//! of waiting; a pusher that panics drops its end of the queue, so the stage's thread
//! ends and the scope joins it. The failure itself comes back from [`ordered_stage`],
//! as the step's error or the caught panic, with the index of the item.

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::{call, Error, Failure, Stage};

/// The stage has ended because a step failed (the failure comes back from
/// [`ordered_stage`]): nothing more can be pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the ordered stage has stopped after a failure")
    }
}

impl std::error::Error for Stopped {}

/// What the pusher sees of a running stage.
pub struct Feeder<'a, T, R, E> {
    route: Route<'a, T, R, E>,
    done: &'a Mutex<Done<R, E>>,
}

/// Where a pushed item goes.
enum Route<'a, T, R, E> {
    /// To the stage's thread, through a queue of bounded length.
    Queue(SyncSender<T>),
    /// To the step itself, called on the pusher's thread.
    Inline(Mutex<InlineStep<'a, T, R, E>>),
}

/// The step of an inline stage and the index of its next item.
struct InlineStep<'a, T, R, E> {
    step: Box<dyn FnMut(usize, T) -> Result<R, E> + Send + 'a>,
    next: usize,
}

/// Results not yet drained, in item order, and the failure that ended the stage.
struct Done<R, E> {
    results: VecDeque<R>,
    failure: Option<Error<E>>,
}

impl<R, E> Done<R, E> {
    fn record(&mut self, index: usize, outcome: Result<R, Failure<E>>) -> Result<(), Stopped> {
        match outcome {
            Ok(r) => {
                self.results.push_back(r);
                Ok(())
            }
            Err(failure) => {
                self.failure = Some(failure.at(index, Stage::Step));
                Err(Stopped)
            }
        }
    }
}

fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    // Steps run under `call`, which catches their panics: a poisoned lock only means a
    // panic was caught while it was held, and the data it guards stays consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T, R, E> Feeder<'_, T, R, E> {
    /// Hands `item` to the stage, after every item pushed before it. On a thread of its
    /// own, waits while `capacity` items are queued; inline, runs the step at once.
    pub fn push(&self, item: T) -> Result<(), Stopped> {
        match &self.route {
            Route::Queue(tx) => tx.send(item).map_err(|_| Stopped),
            Route::Inline(inline) => {
                let mut inline = lock(inline);
                if lock(self.done).failure.is_some() {
                    return Err(Stopped);
                }
                let index = inline.next;
                inline.next += 1;
                let outcome = call(|| (inline.step)(index, item));
                lock(self.done).record(index, outcome)
            }
        }
    }

    /// Hands every result finished so far to `f`, in item order.
    pub fn drain(&self, f: impl FnMut(R)) {
        let ready = std::mem::take(&mut lock(self.done).results);
        ready.into_iter().for_each(f);
    }
}

/// Runs `body` with a [`Feeder`] whose items go, in push order, to `step(index, item)`:
/// on a thread of its own behind a queue of at most `capacity` items (at least 1) when
/// `threaded`, else inline in `push`. Returns what `body` returned and, once every item
/// is through, the results not drained yet (in order), or the stage's failure: the
/// error or caught panic of the first step that failed. If the thread cannot be
/// started, that is the failure (of item 0), and every push returns [`Stopped`].
pub fn ordered_stage<'a, T, R, E, F, B, X>(
    capacity: usize,
    threaded: bool,
    step: F,
    body: B,
) -> (X, Result<Vec<R>, Error<E>>)
where
    T: Send,
    R: Send,
    E: Send,
    F: FnMut(usize, T) -> Result<R, E> + Send + 'a,
    B: for<'f> FnOnce(&Feeder<'f, T, R, E>) -> X,
{
    let done = Mutex::new(Done {
        results: VecDeque::new(),
        failure: None,
    });
    let x = if threaded {
        std::thread::scope(|scope| {
            let (tx, rx) = sync_channel::<T>(capacity.max(1));
            let mut step = step;
            let done = &done;
            let serve = move || {
                for (index, item) in rx.into_iter().enumerate() {
                    let outcome = call(|| step(index, item));
                    if lock(done).record(index, outcome).is_err() {
                        // Dropping the receiver wakes a pusher blocked on a full queue.
                        return;
                    }
                }
            };
            let spawned = std::thread::Builder::new()
                .name("dwarf2btf-stage".into())
                .spawn_scoped(scope, serve);
            if spawned.is_err() {
                lock(done).failure = Some(Error::Panicked {
                    task: 0,
                    stage: Stage::Step,
                    message: "cannot start the stage's thread".into(),
                });
            }
            // The feeder (with the queue's sending end) lives inside the scope: when
            // `body` returns, or panics, it is dropped, the thread ends once the queue
            // is empty, and the scope can join it.
            let feeder = Feeder {
                route: Route::Queue(tx),
                done,
            };
            body(&feeder)
        })
    } else {
        let feeder = Feeder {
            route: Route::Inline(Mutex::new(InlineStep {
                step: Box::new(step),
                next: 0,
            })),
            done: &done,
        };
        body(&feeder)
    };
    let done = done.into_inner().unwrap_or_else(PoisonError::into_inner);
    let rest = match done.failure {
        Some(failure) => Err(failure),
        None => Ok(done.results.into()),
    };
    (x, rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Fails the test if `f` has not finished in 20 s: a hang is the failure these
    /// tests look for.
    fn within_time<X: Send + 'static>(f: impl FnOnce() -> X + Send + 'static) -> X {
        crate::tests::within(20, f)
    }

    /// Pushes `0..n`, draining now and then, and returns every result in order.
    fn squares(threaded: bool, n: usize) -> Vec<(usize, usize)> {
        let (mut got, rest) = ordered_stage(
            3,
            threaded,
            |index, item: usize| -> Result<_, ()> { Ok((index, item * item)) },
            |feeder| {
                let mut got = Vec::new();
                for i in 0..n {
                    feeder.push(i).unwrap();
                    if i % 7 == 0 {
                        feeder.drain(|r| got.push(r));
                    }
                }
                got
            },
        );
        got.extend(rest.unwrap());
        got
    }

    #[test]
    fn results_come_back_in_push_order_inline_and_threaded() {
        let want: Vec<(usize, usize)> = (0..500).map(|i| (i, i * i)).collect();
        assert_eq!(squares(false, 500), want);
        assert_eq!(within_time(|| squares(true, 500)), want);
    }

    #[test]
    fn the_queue_bounds_what_is_pushed_and_not_stepped() {
        within_time(|| {
            let started = AtomicUsize::new(0);
            let capacity = 2;
            let (_, rest) = ordered_stage(
                capacity,
                true,
                |_, _item: usize| -> Result<(), ()> {
                    started.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(2));
                    Ok(())
                },
                |feeder| {
                    for i in 0..40 {
                        feeder.push(i).unwrap();
                        // Pushed i + 1; at most `capacity` queued and one in its step.
                        let ahead = i + 1 - started.load(Ordering::SeqCst);
                        assert!(ahead <= capacity + 1, "{ahead} items ahead");
                    }
                },
            );
            assert_eq!(rest.unwrap().len(), 40);
        });
    }

    #[test]
    fn a_failing_step_stops_the_pusher_without_a_hang() {
        for threaded in [false, true] {
            let (stopped_at, rest) = within_time(move || {
                ordered_stage(
                    1,
                    threaded,
                    |index, item: usize| {
                        std::thread::sleep(Duration::from_millis(1));
                        if index == 3 {
                            Err(format!("bad item {item}"))
                        } else {
                            Ok(item)
                        }
                    },
                    |feeder| (0..1000).position(|i| feeder.push(i).is_err()),
                )
            });
            let stopped_at = stopped_at.expect("a push was refused");
            assert!(stopped_at >= 3, "refused at {stopped_at}");
            match rest {
                Err(Error::Failed { task, stage, error }) => {
                    assert_eq!(
                        (task, stage, error.as_str()),
                        (3, Stage::Step, "bad item 3")
                    );
                }
                other => panic!("unexpected outcome {other:?}"),
            }
        }
    }

    #[test]
    fn a_panicking_step_is_caught_and_wakes_a_blocked_pusher() {
        crate::tests::quiet_injected_panics();
        for threaded in [false, true] {
            let (refused, rest) = within_time(move || {
                ordered_stage(
                    1,
                    threaded,
                    |index, _item: usize| -> Result<(), ()> {
                        if index == 0 {
                            // The pusher fills the queue and blocks meanwhile.
                            std::thread::sleep(Duration::from_millis(50));
                            panic!("{} in step 0", crate::tests::INJECTED);
                        }
                        Ok(())
                    },
                    |feeder| (0..100).any(|i| feeder.push(i).is_err()),
                )
            });
            assert!(refused);
            match rest {
                Err(Error::Panicked { task, message, .. }) => {
                    assert_eq!(task, 0);
                    assert!(message.contains("in step 0"), "{message}");
                }
                other => panic!("unexpected outcome {other:?}"),
            }
        }
    }

    #[test]
    fn a_panicking_pusher_ends_the_stage_thread() {
        crate::tests::quiet_injected_panics();
        let stepped = within_time(|| {
            let stepped = AtomicUsize::new(0);
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                ordered_stage(
                    4,
                    true,
                    |_, _item: usize| -> Result<(), ()> {
                        stepped.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    },
                    |feeder| {
                        for i in 0..10 {
                            feeder.push(i).unwrap();
                        }
                        panic!("{} in the pusher", crate::tests::INJECTED);
                    },
                )
            }));
            assert!(outcome.is_err());
            stepped.into_inner()
        });
        // The thread still stepped what was queued before it ended.
        assert_eq!(stepped, 10);
    }
}
