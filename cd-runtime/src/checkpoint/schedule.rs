//! Which executions of the checkpointed CD write a checkpoint: every n-th (`every = n`), or at
//! Daly's interval (`every = "daly"`), recomputed at each commit from what the checkpoint just
//! committed cost: the slowest part's write time (δ), the time of one execution (t) and the
//! configured MTBF (M); n = round(τ(δ, M) / t) executions ([`daly_executions`]). The first
//! checkpoint is execution 1 (nothing is measured before it); until a checkpoint is committed
//! no next one is taken, so its write time is known when the next is chosen.

use std::cell::Cell;
use std::time::Instant;

use crate::checkpoint::format::CheckpointEvery;
use crate::daly::steps_per_preservation;

/// Executions between two checkpoints at Daly's interval: a checkpoint written in `write_ns`,
/// executions of `execution_ns` each, failures every `mtbf_seconds` on average (at least 1).
pub fn daly_executions(write_ns: u64, execution_ns: u64, mtbf_seconds: f64) -> u64 {
    steps_per_preservation(
        write_ns as f64 / 1e9,
        execution_ns as f64 / 1e9,
        mtbf_seconds,
        u64::MAX,
    )
}

/// One rank's checkpoint schedule. Every rank of the job computes the same one: its inputs are
/// the configuration and values every rank has after the commit's allgather.
#[derive(Debug)]
pub(crate) struct Schedule {
    /// `every = "daly"`: the first execution that may be checkpointed (`u64::MAX` while one
    /// is handed over and not committed).
    next: Cell<u64>,
    /// The execution handed over last and when (for the execution time).
    handed: Cell<Option<(u64, Instant)>>,
    /// The interval Daly's formula chose at the last commit.
    chosen: Cell<Option<u64>>,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            next: Cell::new(1),
            handed: Cell::new(None),
            chosen: Cell::new(None),
        }
    }
}

impl Schedule {
    /// Whether execution `iteration` writes a checkpoint.
    pub(crate) fn takes(&self, every: CheckpointEvery, iteration: u64) -> bool {
        match every {
            CheckpointEvery::Executions(n) => iteration > 0 && iteration.is_multiple_of(n.max(1)),
            CheckpointEvery::Daly { .. } => iteration > 0 && iteration >= self.next.get(),
        }
    }

    /// Execution `iteration` was handed over to the writer just now.
    pub(crate) fn handed_over(&self, iteration: u64) {
        self.handed.set(Some((iteration, Instant::now())));
        self.next.set(u64::MAX);
    }

    /// The mean time of one execution since the last hand-over, at the completion of execution
    /// `now` (0 when nothing was handed over or no execution has completed since).
    pub(crate) fn execution_ns(&self, now: u64) -> u64 {
        match self.handed.get() {
            Some((at, since)) if now > at => since.elapsed().as_nanos() as u64 / (now - at),
            _ => 0,
        }
    }

    /// The checkpoint of execution `handed` was committed at the completion of execution
    /// `now`; it took `write_ns` (the slowest part), and executions took `execution_ns`. With
    /// `every = "daly"` the next checkpoint is Daly's interval after `handed`, and never one
    /// that has begun already.
    pub(crate) fn committed(
        &self,
        every: CheckpointEvery,
        handed: u64,
        now: u64,
        write_ns: u64,
        execution_ns: u64,
    ) {
        let CheckpointEvery::Daly { mtbf_seconds } = every else {
            return;
        };
        let n = daly_executions(write_ns, execution_ns, mtbf_seconds);
        self.chosen.set(Some(n));
        self.next
            .set(handed.saturating_add(n).max(now.saturating_add(1)));
    }

    /// The interval Daly's formula chose at the last commit (`every = "daly"`).
    pub(crate) fn chosen(&self) -> Option<u64> {
        self.chosen.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daly::daly_interval;

    const DALY: CheckpointEvery = CheckpointEvery::Daly {
        mtbf_seconds: 3600.0,
    };

    #[test]
    fn daly_chooses_from_the_measured_write_time() {
        let s = Schedule::default();
        // Nothing measured: execution 1 is the first checkpoint, then none until it commits.
        assert!(!s.takes(DALY, 0) && s.takes(DALY, 1));
        s.handed_over(1);
        assert!(!s.takes(DALY, 2) && !s.takes(DALY, 1_000_000));
        // Daly's interval over the execution time: the executions between checkpoints.
        let tau = daly_interval(0.5, 3600.0);
        let n = (tau / 0.01).round() as u64;
        s.committed(DALY, 1, 3, 500_000_000, 10_000_000);
        assert_eq!(s.chosen(), Some(n));
        assert!(!s.takes(DALY, n) && s.takes(DALY, 1 + n));
        // A write four times longer: the interval about doubles (τ grows as sqrt(δ)).
        s.handed_over(1 + n);
        s.committed(DALY, 1 + n, 2 + n, 2_000_000_000, 10_000_000);
        let m = s.chosen().unwrap();
        let ratio = m as f64 / n as f64;
        assert!((1.9..2.1).contains(&ratio), "{n} then {m}");
        assert_eq!(m, daly_executions(2_000_000_000, 10_000_000, 3600.0));
        // Slower executions: fewer of them per interval.
        assert!(daly_executions(2_000_000_000, 20_000_000, 3600.0) < m);
        // A commit later than the interval: the next checkpoint is the next execution.
        s.handed_over(10);
        s.committed(DALY, 10, 50, 1, 10_000_000);
        assert_eq!(s.chosen(), Some(1));
        assert!(!s.takes(DALY, 50) && s.takes(DALY, 51));
    }

    #[test]
    fn a_fixed_interval_ignores_what_was_measured() {
        let s = Schedule::default();
        let every = CheckpointEvery::Executions(10);
        s.handed_over(10);
        s.committed(every, 10, 11, 5, 5);
        assert_eq!(s.chosen(), None);
        assert!(!s.takes(every, 0) && !s.takes(every, 5) && s.takes(every, 10));
        assert!(s.takes(every, 20) && s.takes(CheckpointEvery::Executions(1), 1));
    }
}
