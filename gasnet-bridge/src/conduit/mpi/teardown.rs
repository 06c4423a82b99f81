//! The barrier and the end of a job: the split-phase barrier, quiescence across ranks, and
//! freeing the job's MPI objects.

use ::mpi::ffi;

use crate::conduit::context::HandlerContext;
use crate::error::BridgeError;
use crate::hang_report::FINISH;
use crate::sleep::Awaiting;

use super::calls::{check, must, null_request, or_peer_lost, test};
use super::state::BarrierState;
use super::world::MpiWorld;

impl MpiWorld {
    // ---- barrier and end of job ---------------------------------------------------------

    /// Enters the barrier without waiting: window puts are flushed now, and the barrier
    /// itself starts once every write this rank sent as a message is acknowledged (a later
    /// `barrier_test` starts it), so that every write started before the barrier has landed
    /// when it completes, whichever path it took.
    pub(crate) fn barrier_notify(&self) -> Result<(), BridgeError> {
        self.flush_window();
        self.st.borrow_mut().barrier = BarrierState::Draining;
        self.barrier_test().map(|_| ())
    }

    pub(crate) fn barrier_test(&self) -> Result<bool, BridgeError> {
        let mut st = self.st.borrow_mut();
        if let BarrierState::Draining = st.barrier {
            if st.acks_due > 0 {
                return Ok(false);
            }
            let mut req = null_request();
            // SAFETY: the job communicator is valid until teardown.
            or_peer_lost(
                self.comm,
                check(
                    unsafe { ffi::MPI_Ibarrier(self.comm, &mut req) },
                    "MPI_Ibarrier",
                ),
            )?;
            st.barrier = BarrierState::Posted(req);
        }
        let BarrierState::Posted(req) = &mut st.barrier else {
            return Ok(true);
        };
        // Testing a non-blocking collective runs its schedule, so every round of a waiting
        // rank tests it: testing only every few rounds (to leave the loop to point-to-point
        // traffic) slows the barrier most when processes outnumber cores, where a process
        // gets only a few rounds per time slice.
        // A failed barrier request is freed by MPI and holds no buffer: unwinding is safe.
        let done = or_peer_lost(self.comm, test(req, "MPI_Test(barrier)"))?;
        if done {
            st.barrier = BarrierState::Idle;
        }
        Ok(done)
    }

    /// Serves AMs until every rank's body has returned and nothing is in flight anywhere.
    pub(crate) fn finish(&self, cx: &impl HandlerContext) {
        self.flush_window();
        let mut previous = None;
        loop {
            let local = {
                let st = self.st.borrow();
                Box::new([st.sent, st.handled])
            };
            let mut total = Box::new([0u64; 2]);
            let mut req = null_request();
            // SAFETY: both boxes outlive the request, which is waited on just below.
            let rc = unsafe {
                ffi::MPI_Iallreduce(
                    local.as_ptr().cast(),
                    total.as_mut_ptr().cast(),
                    2,
                    ffi::RSMPI_UINT64_T,
                    ffi::RSMPI_SUM,
                    self.comm,
                    &mut req,
                )
            };
            must(check(rc, "MPI_Iallreduce"));
            let mut failed = None;
            let finish = Awaiting::new(FINISH);
            self.wait_until(cx, finish, || match test(&mut req, "MPI_Test(allreduce)") {
                Ok(done) => done,
                Err(e) => {
                    failed = Some(e);
                    true
                }
            });
            must(failed.map_or(Ok(()), Err));
            let totals = *total;
            if totals[0] == totals[1] && previous == Some(totals) {
                break;
            }
            previous = Some(totals);
        }
        self.wait_internal(|st| st.sends.is_empty() && st.inflight.is_empty());
    }

    /// Frees the job's MPI objects (collective); the world must not be used afterwards.
    pub(super) fn teardown(&self) -> Result<(), BridgeError> {
        self.leak_abandoned();
        {
            let mut st = self.st.borrow_mut();
            for s in &mut st.slots {
                if s.req == null_request() {
                    continue; // taken off the wire and not posted again
                }
                // SAFETY: cancelling this module's own posted receive; its buffer lives in
                // the slot until after the MPI_Wait below.
                check(
                    unsafe { ffi::MPI_Cancel(&mut s.req) },
                    "MPI_Cancel(receive)",
                )?;
                // SAFETY: completing the request just cancelled; STATUS_IGNORE is allowed.
                let rc = unsafe { ffi::MPI_Wait(&mut s.req, ffi::RSMPI_STATUS_IGNORE) };
                check(rc, "MPI_Wait(cancelled receive)")?;
            }
        }
        let mut win = self.win;
        let (mut comm, mut node_comm) = (self.comm, self.node_comm);
        // Every rank reached quiescence (`finish`), so once all are here no access to the
        // window or traffic on the communicators remains.
        // SAFETY: `comm` is the job communicator, valid until freed below.
        check(unsafe { ffi::MPI_Barrier(comm) }, "MPI_Barrier(teardown)")?;
        if let Some(w) = &self.rma {
            w.free()?;
        }
        // SAFETY: the window is freed exactly once, after the barrier (no access remains)
        // and after the endpoint and every `Segment` over it were dropped (`launch`).
        check(unsafe { ffi::MPI_Win_free(&mut win) }, "MPI_Win_free")?;
        // SAFETY: freed exactly once; nothing uses the host communicator any more.
        check(
            unsafe { ffi::MPI_Comm_free(&mut node_comm) },
            "MPI_Comm_free(host)",
        )?;
        // SAFETY: freed exactly once; the slots' receives on it were completed above.
        check(
            unsafe { ffi::MPI_Comm_free(&mut comm) },
            "MPI_Comm_free(job)",
        )?;
        if let Some(dog) = self.watchdog.borrow_mut().take() {
            dog.shutdown();
        }
        self.ended.set(true);
        Ok(())
    }
}
