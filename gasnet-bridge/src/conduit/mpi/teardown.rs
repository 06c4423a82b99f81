//! The barrier and the end of a job: the split-phase barrier, quiescence across ranks, and
//! freeing the job's MPI objects.
//!
//! These are `impl MpiWorld` because each spans the parts: the barrier waits for the send
//! queue's acks after flushing the window, the end of the job balances the send queue's and
//! the protocol's counts with progress, and teardown frees the job parts, then the kept ones
//! (a rebuild would free only the former).

use ::mpi::ffi;

use crate::conduit::context::HandlerContext;
use crate::error::BridgeError;
use crate::hang_report::FINISH;
use crate::sleep::Awaiting;

use super::calls::{check, must, null_request, test};
use super::world::MpiWorld;

impl MpiWorld {
    /// Enters the barrier without waiting: window puts are flushed now, and the barrier
    /// itself starts once every write this rank sent as a message is acknowledged (a later
    /// `barrier_test` starts it), so that every write started before the barrier has landed
    /// when it completes, whichever path it took.
    pub(crate) fn barrier_notify(&self) -> Result<(), BridgeError> {
        self.flush_window();
        self.job.st.borrow_mut().barrier.notify();
        self.barrier_test().map(|_| ())
    }

    /// Whether the barrier has completed (`barrier.rs`; it starts once no ack is due).
    pub(crate) fn barrier_test(&self) -> Result<bool, BridgeError> {
        let st = &mut *self.job.st.borrow_mut();
        st.barrier.test(self.job.comm, st.sends.acks_due())
    }

    /// Serves AMs until every rank's body has returned and nothing is in flight anywhere.
    pub(crate) fn finish(&self, cx: &impl HandlerContext) {
        self.flush_window();
        let mut previous = None;
        loop {
            let local = {
                let st = self.job.st.borrow();
                Box::new([st.sends.sent(), st.handled])
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
                    self.job.comm,
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
        self.wait_internal(|st| st.sends.is_empty() && st.payloads.is_empty());
    }

    /// Frees the job's MPI objects (collective); the world must not be used afterwards.
    pub(super) fn teardown(&self) -> Result<(), BridgeError> {
        if let Ok(mut st) = self.job.st.try_borrow_mut() {
            st.abandoned.leak();
        }
        self.job.st.borrow_mut().slots.cancel()?;
        let mut comm = self.job.comm;
        // Every rank reached quiescence (`finish`), so once all are here no access to the
        // windows or traffic on the communicators remains.
        // SAFETY: `comm` is the job communicator, valid until freed below.
        check(unsafe { ffi::MPI_Barrier(comm) }, "MPI_Barrier(teardown)")?;
        if let Some(w) = &self.job.rma {
            w.free()?;
        }
        self.kept.host.free()?;
        // SAFETY: freed exactly once; the slots' receives on it were completed above.
        check(
            unsafe { ffi::MPI_Comm_free(&mut comm) },
            "MPI_Comm_free(job)",
        )?;
        if let Some(dog) = self.job.watchdog.borrow_mut().take() {
            dog.shutdown();
        }
        self.job.ended.set(true);
        Ok(())
    }
}
