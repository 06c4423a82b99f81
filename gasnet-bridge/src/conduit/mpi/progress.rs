//! Progress: internal rounds (sends, receives, rings, payloads), user polling, and the waits
//! built on them.
//!
//! These are `impl MpiWorld` because a round spans every part of the job: the slots, the
//! rings, the payloads and the send queue, the protocol state they feed, and the parts a
//! message reaches (`receive.rs`); the waits make rounds until a part's condition holds.

use ::mpi::ffi;

use crate::conduit::context::{HandlerContext, POLL_BATCH};
use crate::counters::WriteAck;
use crate::error::BridgeError;
use crate::message::{Message, MessageView, Payload};
use crate::sleep::{Awaiting, Backoff};

use super::calls::{must, test};
use super::completions::Op;
use super::payloads::Inflight;
use super::receive::Server;
use super::state::Protocol;
use super::user_queue::Ready;
use super::wire::{B_MEDIUM, F_REPLY, Header};
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
    /// A user AM left in `JobParts::direct`, by sender and length.
    direct: Option<(usize, usize)>,
    /// Whether the round took a message off the MPI wire (it takes one at most).
    from_mpi: bool,
}

/// What a round took off the MPI wire.
enum Taken {
    Nothing,
    /// Handled, or queued for `poll`.
    Queued,
    /// A user AM left in `JobParts::direct`.
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
    /// its body, when no older one waits, is left in `self.job.direct` for the caller to run
    /// instead of being queued.
    #[inline]
    fn round(&self, direct: bool) -> Round {
        if self.job.ended.get() {
            job_ended();
        }
        let Ok(mut st) = self.job.st.try_borrow_mut() else {
            return Round::default(); // re-entered from inside progress: the outer round continues
        };
        let st = &mut *st;
        let server = self.server();
        let mut work = 0;
        st.tick = st.tick.wrapping_add(1);
        if st.sends.sweep_due(st.tick) {
            work += st.sends.sweep();
        }
        if !st.abandoned.is_empty() && st.tick.is_multiple_of(16) {
            work += st.abandoned.sweep();
        }
        let mut ready = None;
        let mut from_mpi = false;
        if self.job.mpi_peers {
            match self.take_mpi_message(server, st, direct) {
                Taken::Nothing => {}
                Taken::Queued => from_mpi = true,
                Taken::Direct { source, len } => {
                    from_mpi = true;
                    ready = Some((source, len));
                }
            }
            work += usize::from(from_mpi);
        }
        if let Some(inbox) = &self.job.inbox {
            work += inbox.drain(|source, bytes| server.take_off_wire(st, source, bytes));
        }
        if !st.payloads.is_empty() {
            let mut at = 0;
            while let Some(arrived) = st.payloads.next_arrived(&mut at) {
                work += 1;
                payload_arrived(server, st, arrived);
            }
        }
        Round {
            work,
            direct: ready,
            from_mpi,
        }
    }

    /// Takes the oldest message that arrived through MPI off the wire, if one has: handled
    /// or queued, or (with `direct`, see [`round`](Self::round)) swapped into `self.job.direct`.
    ///
    /// One per round, because a test of a receive that has not completed runs a round of the
    /// library's progress engine (about as long as a message's one-way trip on one host):
    /// testing the next slot before the caller handles this message would put that round
    /// between a request and its reply. Callers that want more run more rounds, after
    /// handling this one ([`poll`](Self::poll) does).
    fn take_mpi_message(&self, server: Server<'_>, st: &mut Protocol, direct: bool) -> Taken {
        let Some((slot, source, len)) = st.slots.test_head(self.job.comm) else {
            return Taken::Nothing;
        };
        let queue_empty = st.user.is_empty();
        let buf = st.slots.buf_mut(slot);
        if direct && queue_empty && Header::is_inline_am(&buf[..len]) {
            // The slot gets the spare buffer and is posted again with it; the bytes stay
            // where they arrived, for the caller.
            std::mem::swap(buf, &mut *self.job.direct.borrow_mut());
            return Taken::Direct { source, len };
        }
        let bytes = std::mem::take(buf);
        server.take_off_wire(st, source, &bytes[..len]);
        *st.slots.buf_mut(slot) = bytes;
        Taken::Queued
    }
}

impl MpiWorld {
    /// Rounds of internal progress, each followed by the user handlers it made ready (in
    /// arrival order), until a round takes no MPI message or `batch` handlers ran. With ULFM,
    /// a poll that found nothing to do unwinds if a peer is known to have failed, as a wait
    /// does: a program's own loop over progress (waiting for a flag a lost rank would have
    /// put) otherwise never reaches the recovery, which the other processes wait in until
    /// its deadline ends them (`ulfm/RECOVERY.md`, "Detection").
    pub(crate) fn poll(&self, cx: &impl HandlerContext, batch: usize) -> usize {
        let n = self.poll_rounds(cx, batch, Until::Idle);
        #[cfg(feature = "ulfm")]
        if n == 0 {
            self.job.shared.failure.check();
        }
        n
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

    /// Runs the handler of the user AM a round left in `self.job.direct` (`len` bytes from
    /// `source`), reading its arguments and payload where they arrived.
    fn run_direct(&self, cx: &impl HandlerContext, source: usize, len: usize) {
        // Only `poll`'s own rounds write `self.job.direct`, and handlers cannot poll, so the
        // bytes stay put while the handler runs (a wait inside it makes internal rounds).
        let bytes = self.job.direct.borrow();
        let Some((h, args, inline)) = Header::decode(&bytes[..len]) else {
            panic!("malformed message of {len} bytes from rank {source} (a different program?)");
        };
        self.server()
            .account(&mut self.job.st.borrow_mut(), source, &h);
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
        self.job.st.borrow_mut().user.next_ready()
    }

    /// Makes internal progress until `done` holds; unwinds if another rank failed.
    pub(super) fn wait_internal(&self, mut done: impl FnMut(&mut Protocol) -> bool) {
        let mut backoff = Backoff::new();
        loop {
            if done(&mut self.job.st.borrow_mut()) {
                return;
            }
            if self.progress() > 0 {
                backoff.reset();
            } else {
                self.job.shared.failure.check();
                backoff.snooze(&self.job.shared.sleeper, || {
                    !self.job.shared.failure.is_failed()
                });
                if let Some(waited) = backoff.hang_due() {
                    crate::stderr_line::stderr_line(format_args!(
                        "pgas: hang report: rank {} of {} has waited {:.1} s without progress \
                         for an MPI operation of the conduit (an acknowledgement, a get, a \
                         barrier step) (PGAS_HANG_REPORT; still waiting)",
                        self.kept.rank,
                        self.kept.ranks,
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
                self.job.shared.failure.check();
                backoff.snooze(&self.job.shared.sleeper, || {
                    !self.job.shared.failure.is_failed()
                });
                if let Some(waited) = backoff.hang_due() {
                    cx.report_hang(awaiting, waited);
                }
            }
        }
    }
}

/// Does what a payload that has arrived was waiting for: count and ack a write, hand a
/// user AM its payload, complete a get, serve a vector request.
#[inline]
fn payload_arrived(server: Server<'_>, st: &mut Protocol, arrived: Inflight) {
    match arrived {
        Inflight::Put {
            origin,
            id,
            counted,
            ..
        } => {
            let ack = if counted {
                server.host.own().count_write()
            } else {
                WriteAck::default()
            };
            must(server.send_ack(st, origin, id, ack));
            st.handled += 1;
        }
        Inflight::Long {
            origin, id, key, ..
        } => {
            let ack = server.host.own().count_write();
            must(server.send_ack(st, origin, id, ack));
            st.user.arrived(key, Ready::Long(ack));
        }
        Inflight::Medium { buf, key, .. } => {
            st.user.arrived(key, Ready::Medium(buf));
        }
        Inflight::GetReply { buf, id, .. } => {
            // A forgotten get (its handle dropped) leaves no entry.
            st.ops.complete(id, Op::Got(buf));
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
        } => server.serve_vector(st, origin, id, (pieces, groups), put, &buf),
    }
}

/// A handle that outlived its job asked for progress (`MpiWorld::ended`).
#[cold]
#[inline(never)]
fn job_ended() -> ! {
    panic!("{}", BridgeError::JobEnded)
}
