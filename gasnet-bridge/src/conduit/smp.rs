//! The smp conduit: ranks are threads of one process and every segment is plain shared memory.
//!
//! Puts, gets and atomics are performed by the initiating thread directly on the target's
//! segment (as GASNet's PSHM support does), so they are complete when the call returns.
//! Active messages go through one lock-free multi-producer queue per target rank and run when
//! the target polls.

use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_queue::SegQueue;
use crossbeam_utils::CachePadded;

use crate::active_message::{HandlerTable, Message};
use crate::barrier::CentralBarrier;
use crate::config::LaunchConfig;
use crate::counters::WriteCounters;
use crate::error::BridgeError;
use crate::failure::Failure;
use crate::segment::Segment;
use crate::sleep::Sleeper;
use crate::topology::Topology;

/// Everything the ranks of one smp job share.
#[derive(Debug)]
pub struct SmpWorld {
    pub(crate) topology: Topology,
    pub(crate) segments: Box<[Segment]>,
    pub(crate) counters: Box<[CachePadded<WriteCounters>]>,
    pub(crate) inboxes: Box<[CachePadded<SegQueue<Message>>]>,
    pub(crate) sleepers: Box<[CachePadded<Sleeper>]>,
    pub(crate) barrier: CentralBarrier,
    /// Ranks whose body has returned (and whose last barrier has completed).
    pub(crate) finished: CachePadded<AtomicUsize>,
    /// Ranks that have drained their inbox after every rank finished.
    pub(crate) drained: CachePadded<AtomicUsize>,
    pub(crate) failure: Failure,
    pub(crate) handlers: HandlerTable,
}

impl SmpWorld {
    /// Allocates the segments, counters and queues of a validated configuration.
    pub(crate) fn new(config: &LaunchConfig, handlers: HandlerTable) -> SmpWorld {
        let n = config.ranks;
        SmpWorld {
            topology: Topology::new(n, config.ranks_per_node.unwrap_or(n)),
            segments: (0..n)
                .map(|r| Segment::new(r, config.segment_bytes))
                .collect(),
            counters: (0..n).map(|_| CachePadded::default()).collect(),
            inboxes: (0..n).map(|_| CachePadded::default()).collect(),
            sleepers: (0..n).map(|_| CachePadded::default()).collect(),
            barrier: CentralBarrier::new(n),
            finished: CachePadded::default(),
            drained: CachePadded::default(),
            failure: Failure::default(),
            handlers,
        }
    }

    /// Number of ranks.
    #[inline]
    pub(crate) fn ranks(&self) -> usize {
        self.segments.len()
    }

    /// The segment of `rank`, or an error naming the rank.
    #[inline]
    pub(crate) fn segment(&self, rank: usize) -> Result<&Segment, BridgeError> {
        self.segments.get(rank).ok_or(BridgeError::NoSuchRank {
            rank,
            ranks: self.segments.len(),
        })
    }

    /// Queues `message` for `target` (an existing rank) and wakes it if it sleeps.
    #[inline]
    pub(crate) fn deliver(&self, target: usize, message: Message) {
        self.inboxes[target].push(message);
        self.sleepers[target].wake();
    }

    /// Wakes every rank (a barrier released, a rank failed, a rank finished).
    pub(crate) fn wake_all(&self) {
        for s in self.sleepers.iter() {
            s.wake();
        }
    }

    /// Marks the job failed by `rank` and wakes everyone so they unwind.
    pub(crate) fn fail(&self, rank: usize, message: String) {
        self.failure.record(rank, message);
        self.wake_all();
    }

    /// Number of ranks that have finished their body.
    pub(crate) fn finished(&self) -> usize {
        self.finished.load(Ordering::Acquire)
    }
}
