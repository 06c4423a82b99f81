//! The state the ranks of one smp job share: segments, counters, inboxes, sleepers, the
//! barrier, the message counts of quiescence and the job's failure.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

use crate::barrier::CentralBarrier;
use crate::conduit::smp_inbox::{Inbox, Outgoing};
use crate::config::LaunchConfig;
use crate::counters::{WriteAck, WriteCounters, WriteCounting, effective_counting};
use crate::error::BridgeError;
use crate::failure::Failure;
use crate::membarrier::Scope;
use crate::segment::Segment;
use crate::sleep::Sleeper;
use crate::topology::Topology;

/// One rank's message counts, each written only by the rank's own thread (a plain store of
/// the next value, `Release`: no locked instruction on the message path).
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    pub(crate) sent: AtomicU64,
    pub(crate) handled: AtomicU64,
}

impl Traffic {
    /// Adds one to `counter`, which only the calling rank's thread writes.
    #[inline]
    fn bump(counter: &AtomicU64) {
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Release);
    }
}

/// Everything the ranks of one smp job share.
#[derive(Debug)]
pub(crate) struct SmpWorld {
    pub(crate) topology: Topology,
    pub(crate) segments: Box<[Segment]>,
    pub(crate) counters: Box<[CachePadded<WriteCounters>]>,
    /// Whether writes bump the counters (the job's mode, the same for every rank).
    pub(crate) write_counting: WriteCounting,
    /// Each rank's inbox: one lane per source rank (`smp_inbox`).
    pub(crate) inboxes: Box<[Inbox]>,
    pub(crate) sleepers: Box<[CachePadded<Sleeper>]>,
    pub(crate) barrier: CentralBarrier,
    /// Ranks whose body has returned (and whose last barrier has completed).
    pub(crate) finished: CachePadded<AtomicUsize>,
    /// Messages sent and handled, counted by each rank in its own cache line (a shared
    /// counter would bounce between cores on every message); `quiet` sums them.
    pub(crate) traffic: Box<[CachePadded<Traffic>]>,
    pub(crate) failure: Failure,
}

impl SmpWorld {
    /// Allocates the segments, counters and queues of a validated configuration.
    pub(crate) fn new(config: &LaunchConfig) -> SmpWorld {
        let n = config.ranks;
        SmpWorld {
            topology: Topology::new(n, config.ranks_per_node.unwrap_or(n)),
            segments: (0..n)
                .map(|r| Segment::new(r, config.segment_bytes))
                .collect(),
            counters: (0..n).map(|_| CachePadded::default()).collect(),
            write_counting: effective_counting(config.write_counting, Scope::Process),
            inboxes: (0..n).map(|_| Inbox::new(n)).collect(),
            sleepers: (0..n)
                .map(|_| CachePadded::new(Sleeper::with_spin(Sleeper::spin_rounds_for(n)).waking()))
                .collect(),
            barrier: CentralBarrier::new(n),
            finished: CachePadded::default(),
            traffic: (0..n).map(|_| CachePadded::default()).collect(),
            failure: Failure::default(),
        }
    }

    /// Switches counting of the writes into `rank`'s segment on or off (the rank's own
    /// thread; [`WriteCounting::Switched`] only, else nothing changes).
    pub(crate) fn switch_counting(&self, rank: usize, on: bool) {
        // Writers are the job's threads, all in this process.
        self.write_counting
            .switch(&self.counters[rank], on, Scope::Process);
    }

    /// `rank`'s EC for the ack of a write about to land there (read before its bytes).
    #[inline]
    pub(crate) fn epoch_now(&self, rank: usize) -> u64 {
        self.write_counting.epoch_now(&self.counters[rank])
    }

    /// Counts a write that landed in `rank`'s segment, its ack carrying `ec` from
    /// [`World::epoch_now`] before the bytes.
    #[inline]
    pub(crate) fn count_write_since(&self, rank: usize, ec: u64) -> WriteAck {
        self.write_counting.count_since(&self.counters[rank], 1, ec)
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

    /// Queues a message from `source` for `target` (existing ranks; at most
    /// [`crate::MAX_ARGS`] arguments, a medium payload of at most [`crate::MAX_MEDIUM`] bytes)
    /// and wakes the target if it sleeps.
    ///
    /// # Safety
    /// Only `source`'s endpoint calls this with that `source` (one thread per lane sender).
    #[inline]
    pub(crate) unsafe fn deliver(
        &self,
        source: usize,
        target: usize,
        handler: u16,
        is_reply: bool,
        args: &[u64],
        body: Outgoing<'_>,
    ) {
        // Counted before it is queued, so a queued message is always counted as sent (the
        // lane's release of the message orders this store before the target's handling).
        Traffic::bump(&self.traffic[source].sent);
        // SAFETY: forwarded contract: this thread is the lane's only sender.
        unsafe {
            self.inboxes[target]
                .lane(source)
                .push(source, handler, is_reply, args, body)
        };
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

    /// Counts a message handled by `rank`, after its handler returned (so the messages the
    /// handler sent are already counted as sent); near the end of the job, wakes the ranks
    /// waiting for quiescence.
    #[inline]
    pub(crate) fn handled(&self, rank: usize) {
        Traffic::bump(&self.traffic[rank].handled);
        if self.finished() == self.ranks() {
            self.wake_all();
        }
    }

    /// True if no message is queued or being handled, once every body has returned (the
    /// caller saw [`SmpWorld::finished`] equal the rank count, with `Acquire`).
    ///
    /// All handled counters are read first (`Acquire`), then all sent counters; H and S are
    /// the messages those reads count. A message's `sent` store happens before its handling
    /// (the lane releases the message after it, the target acquires it), and a handler's
    /// sends happen before its `handled` store, so whatever H holds, S holds, with the sends
    /// of its handlers: equal sums make H = S, every message in S handled. A message m not
    /// in S was sent by the handler of some p whose `handled` store the first pass missed
    /// (else m would be in S), so p is not in H = S either; going up that chain ends at a
    /// message a body sent, which is in S (bodies returned before `finished` was read): a
    /// contradiction. So every message sent is handled, and with only handlers left to send,
    /// that is final.
    pub(crate) fn quiet(&self) -> bool {
        let handled: u64 = self
            .traffic
            .iter()
            .map(|t| t.handled.load(Ordering::Acquire))
            .sum();
        let sent: u64 = self
            .traffic
            .iter()
            .map(|t| t.sent.load(Ordering::Acquire))
            .sum();
        handled == sent
    }

    /// Number of ranks that have finished their body.
    pub(crate) fn finished(&self) -> usize {
        self.finished.load(Ordering::Acquire)
    }
}
