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
    /// Messages delivered whose handler has not yet returned. A handler's own sends are
    /// counted before its message is uncounted, so once every rank has finished its body this
    /// reaching zero means no message can ever be sent again: the job is quiescent.
    // (Replaces a per-rank "drained" count, which let a rank leave while a reply or a request
    // sent by a handler during another rank's drain was still on its way to it.)
    pub(crate) in_flight: CachePadded<AtomicUsize>,
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
            in_flight: CachePadded::default(),
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
        self.in_flight.fetch_add(1, Ordering::AcqRel);
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

    /// Uncounts a message whose handler has returned (after the handler's own sends were
    /// counted); wakes everyone when that leaves the finished job quiet.
    #[inline]
    pub(crate) fn handled(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 && self.finished() == self.ranks() {
            self.wake_all();
        }
    }

    /// True once no message is queued or being handled anywhere.
    #[inline]
    pub(crate) fn quiet(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Number of ranks that have finished their body.
    pub(crate) fn finished(&self) -> usize {
        self.finished.load(Ordering::Acquire)
    }
}
