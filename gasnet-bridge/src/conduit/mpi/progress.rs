//! Progress: internal rounds (sends, receives, rings, payloads), user polling, and the waits
//! built on them.

use std::ffi::c_int;

use ::mpi::ffi;

use crate::active_message::Body;
use crate::counters::WriteAck;
use crate::endpoint::Endpoint;
use crate::error::BridgeError;
use crate::sleep::Backoff;

use super::MpiWorld;
use super::calls::{check, must, test, uint8};
use super::state::{Inflight, Op, Ready, State};
use super::wire::{EAGER, SLOTS, TAG_MSG};

impl MpiWorld {
    // ---- progress -----------------------------------------------------------------------

    /// One round of internal progress: completes sends, takes messages off the wire in
    /// arrival order (handling the conduit's own at once, queueing user AMs), completes
    /// payloads. Returns how much happened.
    #[inline]
    pub(super) fn progress(&self) -> usize {
        let Ok(mut st) = self.st.try_borrow_mut() else {
            return 0; // re-entered from inside progress: the outer round continues
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
        if self.mpi_peers {
            work += self.take_mpi_messages(st);
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
        work
    }

    /// Takes the messages that arrived through MPI off the wire, in arrival order; returns
    /// how many.
    pub(super) fn take_mpi_messages(&self, st: &mut State) -> usize {
        let mut work = 0;
        if st.unposted > 0 {
            self.repost(st);
        }
        loop {
            let head = st.head;
            let mut flag: c_int = 0;
            // SAFETY: a zeroed MPI_Status is a valid value to be overwritten.
            let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
            // SAFETY: the slot's request was posted by this module on its own buffer (the
            // head slot is always posted: `repost` runs before half the ring is used up).
            let rc = unsafe { ffi::MPI_Test(&mut st.slots[head].req, &mut flag, &mut status) };
            must(check(rc, "MPI_Test(receive)"));
            if flag == 0 {
                break;
            }
            let mut count: c_int = 0;
            // SAFETY: `status` was filled by the completed receive.
            must(check(
                unsafe { ffi::MPI_Get_count(&status, uint8(), &mut count) },
                "MPI_Get_count",
            ));
            let source = status.MPI_SOURCE as usize;
            let buf = std::mem::take(&mut st.slots[head].buf);
            self.take_off_wire(st, source, &buf[..count.max(0) as usize]);
            st.slots[head].buf = buf;
            st.head = (head + 1) % SLOTS;
            st.unposted += 1;
            if st.unposted >= SLOTS / 2 {
                self.repost(st);
            }
            work += 1;
        }
        work
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
    /// Internal progress, then up to `batch` user handlers in arrival order.
    pub(crate) fn poll(&self, ep: &Endpoint, batch: usize) -> usize {
        // User progress completes window operations: one flush for all started since the last.
        self.flush_window();
        let work = self.progress();
        let mut ran = 0;
        while ran < batch {
            let message = {
                let mut st = self.st.borrow_mut();
                let st = &mut *st;
                let Some(front) = st.deferred.front() else {
                    break;
                };
                if let Some(key) = front.wait {
                    let Some(ready) = st.ready.remove(&key) else {
                        break;
                    };
                    let mut d = st.deferred.pop_front().expect("front");
                    match (ready, &mut d.message.body) {
                        (Ready::Medium(buf), body) => *body = Body::Medium(buf),
                        (Ready::Long(a), Body::Long { ack, .. }) => *ack = a,
                        (Ready::Long(_), _) => unreachable!("long payload for a long message"),
                    }
                    d.message
                } else {
                    st.deferred.pop_front().expect("front").message
                }
            };
            ep.run_handler(message.view());
            ran += 1;
        }
        work + ran
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
        ep: &Endpoint,
        awaiting: crate::sleep::Awaiting,
        mut done: impl FnMut() -> bool,
    ) {
        let mut backoff = Backoff::for_wait(&awaiting);
        loop {
            if done() {
                return;
            }
            if ep.poll() > 0 {
                backoff.reset();
            } else {
                self.shared.failure.check();
                backoff.snooze(&self.shared.sleeper, || !self.shared.failure.is_failed());
                if let Some(waited) = backoff.hang_due() {
                    ep.report_hang(awaiting, waited);
                }
            }
        }
    }
}
