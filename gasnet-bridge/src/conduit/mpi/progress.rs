//! Progress: internal rounds (sends, receives, rings, payloads), user polling, and the waits
//! built on them.

use std::ffi::c_int;

use ::mpi::ffi;

use crate::conduit::context::{HandlerContext, POLL_BATCH};
use crate::counters::WriteAck;
use crate::error::BridgeError;
use crate::message::{Body, Message, MessageView, Payload};
use crate::sleep::{Awaiting, Backoff};

use super::calls::{check, must, test, uint8};
use super::state::{Inflight, Op, Ready, State};
use super::wire::{B_MEDIUM, EAGER, F_REPLY, Header, SLOTS, TAG_MSG};
use super::world::MpiWorld;

/// When [`MpiWorld::poll_rounds`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// At the first round that takes no MPI message (`poll`).
    Idle,
    /// As `Idle`, or after the first round that ran user handlers (a wait's polls).
    Handled,
}

/// What a round of progress did.
#[derive(Debug, Default)]
struct Round {
    /// Messages taken, sends and payloads completed.
    work: usize,
    /// A user AM left in `MpiWorld::direct`, by sender and length.
    direct: Option<(usize, usize)>,
    /// Whether the round took a message off the MPI wire (it takes one at most).
    from_mpi: bool,
}

/// What a round took off the MPI wire.
enum Taken {
    Nothing,
    /// Handled, or queued for `poll`.
    Queued,
    /// A user AM left in `MpiWorld::direct`.
    Direct {
        source: usize,
        len: usize,
    },
}

impl MpiWorld {
    // ---- progress -----------------------------------------------------------------------

    /// One round of internal progress: completes sends, takes the next MPI message and every
    /// ring record off the wire (handling the conduit's own at once, queueing user AMs in
    /// arrival order), completes payloads. Returns how much happened.
    #[inline]
    pub(super) fn progress(&self) -> usize {
        self.round(false).work
    }

    /// [`progress`](Self::progress); with `direct`, a user AM that arrives through MPI with
    /// its body, when no older one waits, is left in `self.direct` for the caller to run
    /// instead of being queued.
    #[inline]
    fn round(&self, direct: bool) -> Round {
        if self.ended.get() {
            job_ended();
        }
        let Ok(mut st) = self.st.try_borrow_mut() else {
            return Round::default(); // re-entered from inside progress: the outer round continues
        };
        let st = &mut *st;
        let mut work = 0;
        // Completing sends only frees their buffers; every MPI_Test costs a round of the
        // library's progress engine, so the list is swept every 16th round (or when long),
        // keeping the latency path at one test per round.
        st.tick = st.tick.wrapping_add(1);
        if st.sends.len() >= 64 || (!st.sends.is_empty() && st.tick.is_multiple_of(16)) {
            let mut i = 0;
            while i < st.sends.len() {
                let done = test(&mut st.sends[i].0, "MPI_Test(send)");
                match done {
                    Ok(true) => {
                        let (_, buf) = st.sends.swap_remove(i);
                        if buf.capacity() > 0 && buf.capacity() <= EAGER && st.spare.len() < SLOTS {
                            st.spare.push(buf);
                        }
                        work += 1;
                    }
                    Ok(false) => i += 1,
                    Err(e) => panic!("{e}"),
                }
            }
        }
        if !st.abandoned.is_empty() && st.tick.is_multiple_of(16) {
            work += Self::sweep_abandoned(st);
        }
        let mut ready = None;
        let mut from_mpi = false;
        if self.mpi_peers {
            match self.take_mpi_message(st, direct) {
                Taken::Nothing => {}
                Taken::Queued => from_mpi = true,
                Taken::Direct { source, len } => {
                    from_mpi = true;
                    ready = Some((source, len));
                }
            }
            work += usize::from(from_mpi);
        }
        if let Some(inbox) = &self.inbox {
            work += inbox.drain(|source, bytes| self.take_off_wire(st, source, bytes));
        }
        if !st.inflight.is_empty() {
            let mut i = 0;
            while i < st.inflight.len() {
                let req = match &mut st.inflight[i] {
                    Inflight::Put { req, .. }
                    | Inflight::Long { req, .. }
                    | Inflight::Vector { req, .. }
                    | Inflight::GetReply { req, .. }
                    | Inflight::Medium { req, .. } => req,
                };
                let done = test(req, "MPI_Test(payload)");
                match done {
                    Ok(false) => i += 1,
                    Err(e) => panic!("{e}"),
                    Ok(true) => {
                        work += 1;
                        match st.inflight.swap_remove(i) {
                            Inflight::Put {
                                origin,
                                id,
                                counted,
                                ..
                            } => {
                                let ack = if counted {
                                    self.own().count_write()
                                } else {
                                    WriteAck::default()
                                };
                                must(self.send_ack(st, origin, id, ack));
                                st.handled += 1;
                            }
                            Inflight::Long {
                                origin, id, key, ..
                            } => {
                                let ack = self.own().count_write();
                                must(self.send_ack(st, origin, id, ack));
                                st.ready.insert(key, Ready::Long(ack));
                            }
                            Inflight::Medium { buf, key, .. } => {
                                st.ready.insert(key, Ready::Medium(buf));
                            }
                            Inflight::GetReply { buf, id, .. } => {
                                // A forgotten get (its handle dropped) leaves no entry.
                                if let Some(op) = st.ops.get_mut(&id) {
                                    *op = Op::Got(buf);
                                }
                                st.handled += 1;
                            }
                            Inflight::Vector {
                                buf,
                                origin,
                                id,
                                pieces,
                                groups,
                                put,
                                ..
                            } => self.serve_vector(st, origin, id, (pieces, groups), put, &buf),
                        }
                    }
                }
            }
        }
        Round {
            work,
            direct: ready,
            from_mpi,
        }
    }

    /// Takes the oldest message that arrived through MPI off the wire, if one has: handled
    /// or queued, or (with `direct`, see [`round`](Self::round)) swapped into `self.direct`.
    ///
    /// One per round, because a test of a receive that has not completed runs a round of the
    /// library's progress engine (about as long as a message's one-way trip on one host):
    /// testing the next slot before the caller handles this message would put that round
    /// between a request and its reply. Callers that want more run more rounds, after
    /// handling this one ([`poll`](Self::poll) does).
    fn take_mpi_message(&self, st: &mut State, direct: bool) -> Taken {
        if st.unposted > 0 {
            self.repost(st);
        }
        let head = st.head;
        let mut flag: c_int = 0;
        // SAFETY: a zeroed MPI_Status is a valid value to be overwritten.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: the slot's request was posted by this module on its own buffer (the head
        // slot is always posted: `repost` runs at the start of every round that takes one).
        let rc = unsafe { ffi::MPI_Test(&mut st.slots[head].req, &mut flag, &mut status) };
        must(check(rc, "MPI_Test(receive)"));
        if flag == 0 {
            return Taken::Nothing;
        }
        let mut count: c_int = 0;
        // SAFETY: `status` was filled by the completed receive.
        must(check(
            unsafe { ffi::MPI_Get_count(&status, uint8(), &mut count) },
            "MPI_Get_count",
        ));
        let source = status.MPI_SOURCE as usize;
        let len = count.max(0) as usize;
        st.head = (head + 1) % SLOTS;
        st.unposted += 1;
        let slot = &mut st.slots[head].buf;
        if direct && st.deferred.is_empty() && Header::is_inline_am(&slot[..len]) {
            // The slot gets the spare buffer and is posted again with it; the bytes stay
            // where they arrived, for the caller.
            std::mem::swap(slot, &mut *self.direct.borrow_mut());
            return Taken::Direct { source, len };
        }
        let buf = std::mem::take(slot);
        self.take_off_wire(st, source, &buf[..len]);
        st.slots[head].buf = buf;
        Taken::Queued
    }

    /// Posts the receives of the slots taken off the wire since the last call, in the order
    /// they were taken, so the ring keeps matching in order.
    pub(super) fn repost(&self, st: &mut State) {
        while st.unposted > 0 {
            let i = (st.head + SLOTS - st.unposted) % SLOTS;
            let slot = &mut st.slots[i];
            // SAFETY: the buffer is owned by the slot and stays in place (a boxed slice is
            // never reallocated) until this receive completes or is cancelled in teardown.
            let rc = unsafe {
                ffi::MPI_Irecv(
                    slot.buf.as_mut_ptr().cast(),
                    EAGER as c_int,
                    uint8(),
                    ffi::RSMPI_ANY_SOURCE,
                    TAG_MSG,
                    self.comm,
                    &mut slot.req,
                )
            };
            must(check(rc, "MPI_Irecv"));
            st.unposted -= 1;
        }
    }
}

impl MpiWorld {
    /// Rounds of internal progress, each followed by the user handlers it made ready (in
    /// arrival order), until a round takes no MPI message or `batch` handlers ran.
    pub(crate) fn poll(&self, cx: &impl HandlerContext, batch: usize) -> usize {
        self.poll_rounds(cx, batch, Until::Idle)
    }

    /// [`poll`](Self::poll), ending after the first round that ran handlers if `until` says
    /// so: a wait checks its condition then, before the empty round (a turn of MPI's progress
    /// engine) that would otherwise end the call; its next call goes on where this one left.
    fn poll_rounds(&self, cx: &impl HandlerContext, batch: usize, until: Until) -> usize {
        // User progress completes window operations: one flush for all started since the last.
        self.flush_window();
        let mut total = 0;
        let mut ran = 0;
        loop {
            let Round {
                work,
                direct,
                from_mpi,
            } = self.round(true);
            let before = ran;
            if let Some((source, len)) = direct {
                self.run_direct(cx, source, len);
                ran += 1;
            }
            while ran < batch {
                let Some(message) = self.next_ready() else {
                    break;
                };
                cx.run_handler(message.view());
                ran += 1;
            }
            total += work + (ran - before);
            // A round empties the rings and completed payloads but takes one MPI message, so
            // only a round that took one is followed by another; the empty test that ends the
            // call then comes after the handlers, so a reply they sent is already on its way.
            if !from_mpi || ran >= batch || (until == Until::Handled && ran > before) {
                return total;
            }
        }
    }

    /// Runs the handler of the user AM a round left in `self.direct` (`len` bytes from
    /// `source`), reading its arguments and payload where they arrived.
    fn run_direct(&self, cx: &impl HandlerContext, source: usize, len: usize) {
        // Only `poll`'s own rounds write `self.direct`, and handlers cannot poll, so the
        // bytes stay put while the handler runs (a wait inside it makes internal rounds).
        let bytes = self.direct.borrow();
        let Some((h, args, inline)) = Header::decode(&bytes[..len]) else {
            panic!("malformed message of {len} bytes from rank {source} (a different program?)");
        };
        self.account(&mut self.st.borrow_mut(), source, &h);
        cx.run_handler(MessageView {
            source: source as u32,
            handler: h.handler,
            is_reply: h.flags & F_REPLY != 0,
            args: args.as_slice(),
            payload: if h.body == B_MEDIUM {
                Payload::Medium(inline)
            } else {
                Payload::None
            },
        });
    }

    /// The oldest user AM taken off the wire whose payload has arrived, if it is first in line.
    #[inline]
    fn next_ready(&self) -> Option<Message> {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let front = st.deferred.front()?;
        let Some(key) = front.wait else {
            return Some(st.deferred.pop_front().expect("front").message);
        };
        let ready = st.ready.remove(&key)?;
        let mut d = st.deferred.pop_front().expect("front");
        match (ready, &mut d.message.body) {
            (Ready::Medium(buf), body) => *body = Body::Medium(buf),
            (Ready::Long(a), Body::Long { ack, .. }) => *ack = a,
            (Ready::Long(_), _) => unreachable!("long payload for a long message"),
        }
        Some(d.message)
    }

    /// Makes internal progress until `done` holds; unwinds if another rank failed.
    pub(super) fn wait_internal(&self, mut done: impl FnMut(&mut State) -> bool) {
        let mut backoff = Backoff::new();
        loop {
            if done(&mut self.st.borrow_mut()) {
                return;
            }
            if self.progress() > 0 {
                backoff.reset();
            } else {
                self.shared.failure.check();
                backoff.snooze(&self.shared.sleeper, || !self.shared.failure.is_failed());
                if let Some(waited) = backoff.hang_due() {
                    crate::stderr_line::stderr_line(format_args!(
                        "pgas: hang report: rank {} of {} has waited {:.1} s without progress \
                         for an MPI operation of the conduit (an acknowledgement, a get, a \
                         barrier step) (PGAS_HANG_REPORT; still waiting)",
                        self.rank,
                        self.ranks,
                        waited.as_secs_f64()
                    ));
                }
            }
        }
    }

    pub(super) fn wait_request(&self, req: &mut ffi::MPI_Request) -> Result<(), BridgeError> {
        let mut failed = None;
        self.wait_internal(|_| match test(req, "MPI_Test") {
            Ok(done) => done,
            Err(e) => {
                failed = Some(e);
                true
            }
        });
        failed.map_or(Ok(()), Err)
    }

    /// `Endpoint::wait_until` on this conduit: user progress until `done()`.
    pub(crate) fn wait_until(
        &self,
        cx: &impl HandlerContext,
        awaiting: Awaiting,
        mut done: impl FnMut() -> bool,
    ) {
        let mut backoff = Backoff::for_wait(&awaiting);
        loop {
            if done() {
                return;
            }
            if self.poll_rounds(cx, POLL_BATCH, Until::Handled) > 0 {
                backoff.reset();
            } else {
                self.shared.failure.check();
                backoff.snooze(&self.shared.sleeper, || !self.shared.failure.is_failed());
                if let Some(waited) = backoff.hang_due() {
                    cx.report_hang(awaiting, waited);
                }
            }
        }
    }
}

/// A handle that outlived its job asked for progress (`MpiWorld::ended`).
#[cold]
#[inline(never)]
fn job_ended() -> ! {
    panic!("{}", BridgeError::JobEnded)
}
