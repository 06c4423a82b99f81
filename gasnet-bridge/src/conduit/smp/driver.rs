//! One rank's operations on an smp job: every one is done by the calling thread on the shared
//! state ([`SmpWorld`]); only active messages wait for the target's poll.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::atomic::{AtomicOp, AtomicResult};
use crate::barrier::Phase;
use crate::conduit::context::{HandlerContext, POLL_BATCH};
use crate::conduit::smp_inbox::Outgoing;
use crate::counters::{WriteAck, WriteCounters};
use crate::error::BridgeError;
use crate::hang_report::{BARRIER, FINISH, rank_list};
use crate::segment::Segment;
use crate::sleep::{Awaiting, Backoff};

use super::world::SmpWorld;

/// A rank's driver of the smp conduit: its rank, the shared world, and where its polls start.
#[derive(Debug)]
pub(crate) struct SmpDriver {
    rank: usize,
    world: Arc<SmpWorld>,
    /// The inbox lane `poll` starts with.
    next_lane: Cell<usize>,
}

impl SmpDriver {
    /// The driver of `rank` in `world`; the calling thread is the rank's (it is registered as
    /// the sleeper others wake).
    pub(crate) fn new(rank: usize, world: Arc<SmpWorld>) -> SmpDriver {
        world.sleepers[rank].register_current();
        SmpDriver {
            rank,
            world,
            next_lane: Cell::new(0),
        }
    }

    /// The shared state (for `launch`, which gathers the failures).
    pub(crate) fn world(&self) -> &SmpWorld {
        &self.world
    }

    #[inline]
    pub(crate) fn ranks(&self) -> usize {
        self.world.ranks()
    }

    #[inline]
    pub(crate) fn segment(&self, rank: usize) -> Result<&Segment, BridgeError> {
        self.world.segment(rank)
    }

    pub(crate) fn segment_len(&self) -> usize {
        self.world.segments[self.rank].len()
    }

    pub(crate) fn counters(&self) -> &WriteCounters {
        &self.world.counters[self.rank]
    }

    pub(crate) fn switch_counting(&self, on: bool) {
        self.world.switch_counting(self.rank, on);
    }

    pub(crate) fn messages_sent(&self) -> u64 {
        self.world.traffic[self.rank].sent.load(Ordering::Relaxed)
    }

    // ---- RMA and atomics ------------------------------------------------------------------

    #[inline(always)]
    pub(crate) fn put(
        &self,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<WriteAck, BridgeError> {
        let segment = self.world.segment(rank)?;
        let ec = self.world.epoch_now(rank);
        segment.write(offset, src)?;
        Ok(self.world.count_write_since(rank, ec))
    }

    #[inline]
    pub(crate) fn put_uncounted(
        &self,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<(), BridgeError> {
        self.world.segment(rank)?.write(offset, src)
    }

    #[inline]
    pub(crate) fn get(
        &self,
        rank: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        self.world.segment(rank)?.read(offset, dst)
    }

    pub(crate) fn put_vector(
        &self,
        rank: usize,
        pieces: &[(usize, usize)],
        src: &[u8],
    ) -> Result<WriteAck, BridgeError> {
        crate::vector::scatter_counted(
            self.world.segment(rank)?,
            self.world.write_counting,
            &self.world.counters[rank],
            pieces,
            src,
        )
    }

    pub(crate) fn get_vector(
        &self,
        rank: usize,
        pieces: &[(usize, usize)],
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        crate::vector::gather(self.world.segment(rank)?, pieces, dst)
    }

    pub(crate) fn get_owned(
        &self,
        rank: usize,
        offset: usize,
        len: usize,
    ) -> Result<Vec<u8>, BridgeError> {
        let mut bytes = vec![0u8; len];
        self.world.segment(rank)?.read(offset, &mut bytes)?;
        Ok(bytes)
    }

    #[inline]
    pub(crate) fn atomic(
        &self,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<AtomicResult, BridgeError> {
        let word = self.world.segment(rank)?.atomic_u64(offset)?;
        let ec = self.world.epoch_now(rank);
        let (previous, wrote) = op.apply(word);
        let ack = wrote.then(|| self.world.count_write_since(rank, ec));
        Ok(AtomicResult { previous, ack })
    }

    // ---- active messages ------------------------------------------------------------------

    /// Queues a short or medium message (target, handler and arguments checked by the caller).
    #[inline]
    pub(crate) fn send(
        &self,
        target: usize,
        handler: u16,
        is_reply: bool,
        args: &[u64],
        body: Outgoing<'_>,
    ) {
        // SAFETY: this driver is its rank's only one and belongs to the rank's thread, so
        // this thread is the only sender from `self.rank`.
        unsafe {
            self.world
                .deliver(self.rank, target, handler, is_reply, args, body)
        };
    }

    /// Writes a long message's payload into `target`'s segment, then queues the message;
    /// returns the write's ack (target, handler and arguments checked by the caller).
    pub(crate) fn send_long(
        &self,
        target: usize,
        handler: u16,
        is_reply: bool,
        args: &[u64],
        payload: &[u8],
        offset: usize,
    ) -> Result<WriteAck, BridgeError> {
        let ec = self.world.epoch_now(target);
        self.world.segments[target].write(offset, payload)?;
        let ack = self.world.count_write_since(target, ec);
        let body = Outgoing::Long {
            offset,
            len: payload.len(),
            ack,
        };
        self.send(target, handler, is_reply, args, body);
        Ok(ack)
    }

    // ---- progress -------------------------------------------------------------------------

    /// Runs queued handlers (at most a batch): one pass over the lanes, each drained up to what
    /// is left of the batch, starting one lane further each time so that no source is always
    /// last. The caller is not inside a handler.
    pub(crate) fn poll(&self, cx: &impl HandlerContext) -> usize {
        let inbox = &self.world.inboxes[self.rank];
        let lanes = inbox.len();
        let first = self.next_lane.get();
        let mut ran = 0;
        let mut source = first;
        loop {
            while ran < POLL_BATCH {
                // SAFETY: this driver is the only one of its rank, so this thread is the only
                // target of its inbox; handlers do not nest (the caller is not in one, and
                // `poll` inside a handler returns before reaching here), so no `pop` runs
                // inside another.
                let Some(message) = (unsafe { inbox.lane(source).pop() }) else {
                    break;
                };
                cx.run_handler(message.view(source));
                ran += 1;
            }
            source += 1;
            if source == lanes {
                source = 0;
            }
            if source == first || ran == POLL_BATCH {
                break;
            }
        }
        self.next_lane
            .set(if first + 1 == lanes { 0 } else { first + 1 });
        ran
    }

    /// Counts a message whose handler has returned.
    #[inline]
    pub(crate) fn handled(&self) {
        self.world.handled(self.rank);
    }

    /// Polls until `done()`, spinning, then yielding, then parking; unwinds if another rank
    /// failed. The caller is not inside a handler.
    pub(crate) fn wait_for(
        &self,
        cx: &impl HandlerContext,
        awaiting: Awaiting,
        mut done: impl FnMut() -> bool,
    ) {
        let world = &*self.world;
        let inbox = &world.inboxes[self.rank];
        let mut backoff = Backoff::for_wait(&awaiting);
        loop {
            if done() {
                return;
            }
            if self.poll(cx) > 0 {
                // Traffic tends to come in bursts (a round trip, a flood): stay responsive.
                backoff.reset();
            } else {
                world.failure.check();
                backoff.snooze(&world.sleepers[self.rank], || {
                    // SAFETY: this thread is the inbox's target (see `poll`).
                    (unsafe { inbox.is_empty() }) && !world.failure.is_failed() && !done()
                });
                if let Some(waited) = backoff.hang_due() {
                    cx.report_hang(awaiting, waited);
                }
            }
        }
    }

    /// What the hang report adds on this conduit: the ranks missing from a barrier, or how
    /// many have returned.
    pub(crate) fn hang_detail(&self, what: &str, phase: Phase) -> String {
        match (what, phase) {
            (BARRIER, Phase::Notified(g)) => format!(
                " #{}; ranks not arrived: {}",
                g + 1,
                rank_list(&self.world.barrier.missing(g))
            ),
            (FINISH, _) => format!(
                "; {} of {} ranks have returned",
                self.world.finished(),
                self.world.ranks()
            ),
            _ => String::new(),
        }
    }

    // ---- barrier and end of job -----------------------------------------------------------

    /// Announces arrival; returns the phase the rank is in now.
    pub(crate) fn barrier_notify(&self) -> Phase {
        let world = &self.world;
        let (phase, released) = world.barrier.notify();
        world.barrier.record(self.rank, phase);
        if released {
            world.wake_all();
        }
        phase
    }

    pub(crate) fn barrier_try(&self, generation: u64) -> bool {
        self.world.barrier.is_complete(generation)
    }

    /// Waits (polling) until barrier `generation` completes. Panics, naming the cause, if it
    /// can no longer complete because some rank has already returned from the job.
    pub(crate) fn barrier_wait(&self, cx: &impl HandlerContext, generation: u64) {
        let world = &*self.world;
        self.wait_for(cx, Awaiting::new(BARRIER).woken(), || {
            if world.barrier.is_complete(generation) {
                return true;
            }
            let finished = world.finished();
            // A finished rank completed all its barriers; re-read after acquiring its count.
            if finished > 0 && !world.barrier.is_complete(generation) {
                panic!(
                    "rank {} waits in barrier #{} but {finished} rank(s) already returned from \
                     the job: every rank must enter the same number of barriers",
                    self.rank,
                    generation + 1
                );
            }
            false
        });
    }

    /// Keeps serving AMs until every rank has returned and no message is queued or being
    /// handled anywhere (handlers may still send replies and new requests).
    pub(crate) fn finish(&self, cx: &impl HandlerContext) {
        let world = &*self.world;
        let ranks = world.ranks();
        world.finished.fetch_add(1, Ordering::AcqRel);
        world.wake_all();
        // Every message must run, including replies and requests that handlers send while
        // other ranks are already done: wait for global quiescence (see `SmpWorld::quiet`),
        // not just for this rank's inbox to drain.
        self.wait_for(cx, Awaiting::new(FINISH).woken(), || {
            world.finished() == ranks && world.quiet()
        });
    }
}
