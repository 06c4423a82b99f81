//! The split-phase barrier of the smp conduit: a shared arrival counter and a generation number.
//!
//! `notify` reads the generation `g`, then adds one to the arrival count. The rank that brings
//! the count to `ranks` resets it to zero and then publishes generation `g + 1` with `Release`;
//! every waiter is done when it reads a generation greater than `g` with `Acquire`.
//!
//! Why `g` cannot be stale or skipped: a rank notifies barrier `k + 1` only after its wait
//! for barrier `k` saw generation `k + 1` (the per-rank [`Phase`] enforces notify → wait →
//! notify), and generation `k + 2` needs this rank's own arrival. The reset of the counter is
//! ordered before the generation store, and every later arrival acquires that generation
//! first, so no arrival for barrier `k + 1` is lost to the reset of barrier `k`.
//!
//! A central counter is the right tool here: ranks are threads of one process, at most a few
//! dozen, and one contended cache line costs less than the `log2(ranks)` rounds of a
//! dissemination barrier.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// Where one rank stands in the barrier sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// Not in a barrier.
    #[default]
    Idle,
    /// Notified the barrier that completes when the generation passes this value.
    Notified(u64),
}

/// The shared counters of one job's barrier.
#[derive(Debug)]
pub struct CentralBarrier {
    ranks: usize,
    arrived: CachePadded<AtomicUsize>,
    generation: CachePadded<AtomicU64>,
    /// By rank: how many barriers it has notified (for the hang report: who is missing).
    notified: Box<[AtomicU64]>,
}

impl CentralBarrier {
    /// A barrier for `ranks` participants.
    pub fn new(ranks: usize) -> Self {
        CentralBarrier {
            ranks,
            arrived: CachePadded::new(AtomicUsize::new(0)),
            generation: CachePadded::new(AtomicU64::new(0)),
            notified: (0..ranks).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Records that `rank` notified the barrier of `phase` (one relaxed store; read only by
    /// [`CentralBarrier::missing`]).
    #[inline]
    pub fn record(&self, rank: usize, phase: Phase) {
        if let (Phase::Notified(g), Some(n)) = (phase, self.notified.get(rank)) {
            n.store(g + 1, Ordering::Relaxed);
        }
    }

    /// The ranks that have not notified the barrier of `generation` (as far as
    /// [`CentralBarrier::record`] tells).
    pub fn missing(&self, generation: u64) -> Vec<usize> {
        (0..self.notified.len())
            .filter(|&r| self.notified[r].load(Ordering::Relaxed) <= generation)
            .collect()
    }

    /// Arrives; returns the phase to wait on and whether this arrival released the barrier
    /// (the caller then wakes the other ranks).
    pub fn notify(&self) -> (Phase, bool) {
        let generation = self.generation.load(Ordering::Acquire);
        let last = self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.ranks;
        if last {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.store(generation + 1, Ordering::Release);
        }
        (Phase::Notified(generation), last)
    }

    /// True once the barrier notified in `generation` has completed.
    #[inline]
    pub fn is_complete(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) > generation
    }

    /// Number of barriers completed so far (the tests count rounds with it).
    #[cfg(test)]
    pub fn completed(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rank_leaves_before_all_arrive() {
        // Each rank bumps a per-round counter before the barrier and checks after it that all
        // ranks have bumped it: a barrier that released early would show a short count.
        let ranks = 6;
        let rounds = 300;
        let b = CentralBarrier::new(ranks);
        let counts: Vec<AtomicUsize> = (0..rounds).map(|_| AtomicUsize::new(0)).collect();
        std::thread::scope(|s| {
            for _ in 0..ranks {
                s.spawn(|| {
                    for c in &counts {
                        c.fetch_add(1, Ordering::Relaxed);
                        let (Phase::Notified(g), _) = b.notify() else {
                            unreachable!()
                        };
                        while !b.is_complete(g) {
                            std::thread::yield_now();
                        }
                        assert_eq!(c.load(Ordering::Relaxed), ranks);
                    }
                });
            }
        });
        assert_eq!(b.completed(), rounds as u64);
    }

    #[test]
    fn exactly_one_arrival_releases() {
        let b = CentralBarrier::new(3);
        assert!(!b.notify().1);
        assert!(!b.notify().1);
        assert!(!b.is_complete(0));
        assert!(b.notify().1);
        assert!(b.is_complete(0));
    }

    #[test]
    fn missing_ranks_are_those_not_recorded() {
        let b = CentralBarrier::new(3);
        let (p, _) = b.notify();
        b.record(1, p);
        assert_eq!(b.missing(0), vec![0, 2]);
        b.record(0, p);
        b.record(2, p);
        assert!(b.missing(0).is_empty());
        assert_eq!(b.missing(1), vec![0, 1, 2]);
    }
}
