//! How far the workers may run ahead of the in-order merge: the look-ahead budget
//! of the units in flight (`sched::Budget`, in bytes of `.debug_info`), which the
//! merge sets after each unit.
//!
//! Units in flight cost memory, their arenas while parsed and their batches until
//! merged, and the run's peak comes where the kept types are largest: after the last
//! unit (the functions are encoded over the kept set) or, should the kept set stop
//! growing before the end, wherever it has levelled off. So the budget is wide
//! ([`WIDE`]) while the run is far from that, and [`NARROW`] after: in the first
//! [`WIDE_SHARE_PCT`] % of the input and while the last [`GROWTH_SPAN`] units kept
//! at least one new type a unit. Corpus vmlinux at -j2: the wide budget cut the
//! workers' waits at the window (one CPU idle 75-110 ms of a run) to a third and
//! the wall time 0.95-0.97x, peak RSS the same; over all of the run it raised the
//! peak 0.8 MB, and by position alone the four-copy kernel's (kept types level
//! after its first copy, so the peak is there) by 3.2 MB.

use std::collections::VecDeque;

/// The budget while the run is far from its peak (see the module doc).
pub(super) const WIDE: u64 = 4 << 20;

/// The budget near the run's peak: on the corpus vmlinux at -j2 (units of 84 KB on
/// average), 512 KB gave 0.973x the wall time of a fixed window of two units for
/// +0.2 MB of peak RSS (11 interleaved pairs; 1 MB: 0.962x for +1.1 MB).
pub(super) const NARROW: u64 = 512 << 10;

/// Most units in flight: what [`WIDE`] lets through in units of 64 KB.
pub(super) const MAX_UNITS: usize = 64;

/// The share of the input's `.debug_info`, in percent, within which the budget may
/// be wide: the corpus vmlinux's kept types grow to the end (at 70% of its input
/// they are three quarters of the final set), and a wide budget up to 80 or 90%
/// raised its peak by 0.2 and 0.8 MB.
const WIDE_SHARE_PCT: u64 = 70;

/// The units over which the kept set's growth is counted: on the corpus vmlinux
/// every 64 consecutive units kept at least 98 new types; the four-copy kernel's
/// copies after the first, fewer than 50 in all but one span (68, where the
/// first copy ends).
const GROWTH_SPAN: usize = 64;

/// The merge's view of the run's progress, which sets the budget.
pub(super) struct Ahead<'b> {
    budget: &'b sched::Budget,
    /// Where the wide budget ends, in bytes of `.debug_info` from the first unit.
    wide_until: u64,
    /// The kept types' count after each of the last [`GROWTH_SPAN`] units (or
    /// fewer, at the start), oldest first.
    kept: VecDeque<usize>,
}

impl<'b> Ahead<'b> {
    /// For a run over `input_len` bytes of `.debug_info`, setting `budget`.
    pub fn new(budget: &'b sched::Budget, input_len: u64) -> Ahead<'b> {
        budget.set(WIDE);
        Ahead {
            budget,
            wide_until: input_len / 100 * WIDE_SHARE_PCT,
            kept: VecDeque::with_capacity(GROWTH_SPAN + 1),
        }
    }

    /// After a unit is merged: `done`, the bytes of `.debug_info` up to its end;
    /// `kept`, the types the run keeps so far.
    pub fn after_unit(&mut self, done: u64, kept: usize) {
        self.kept.push_back(kept);
        let grew = if self.kept.len() > GROWTH_SPAN {
            let first = self.kept.pop_front().unwrap_or(0);
            kept.saturating_sub(first) >= GROWTH_SPAN
        } else {
            true
        };
        let wide = done <= self.wide_until && grew;
        self.budget.set(if wide { WIDE } else { NARROW });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_while_early_and_growing() {
        let budget = sched::Budget::new(0);
        let mut a = Ahead::new(&budget, 1000);
        assert_eq!(budget.get(), WIDE);
        // Growing by two types a unit, in the first 70% of the input: wide.
        for i in 0..100usize {
            a.after_unit(i as u64 * 5, i * 2);
            assert_eq!(budget.get(), WIDE, "unit {i}");
        }
        // Past 70%: narrow, however fast the kept set grows.
        a.after_unit(701, 1000);
        assert_eq!(budget.get(), NARROW);
    }

    #[test]
    fn narrow_once_the_kept_set_levels_off() {
        let budget = sched::Budget::new(0);
        let mut a = Ahead::new(&budget, 1_000_000);
        for i in 0..GROWTH_SPAN {
            a.after_unit(i as u64, 5000 + i);
        }
        // Fewer than one new type a unit over the span: narrow.
        a.after_unit(GROWTH_SPAN as u64, 5000 + GROWTH_SPAN - 2);
        assert_eq!(budget.get(), NARROW);
        // Growing again by a unit's worth of new types over the span: wide.
        for i in 0..GROWTH_SPAN {
            a.after_unit(100 + i as u64, 6000 + 2 * i);
        }
        assert_eq!(budget.get(), WIDE);
    }
}
