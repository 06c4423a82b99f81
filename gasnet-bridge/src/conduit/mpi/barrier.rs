//! This rank's part of the split-phase barrier: it starts the `MPI_Ibarrier` only once every
//! write it sent as a message is acknowledged, so that when the barrier completes, every
//! rank's writes have landed.

use ::mpi::ffi;

use crate::error::BridgeError;

use super::calls::{check, null_request, or_peer_lost, test};

/// Where this rank's barrier stands.
enum Phase {
    Idle,
    /// Notified: the `MPI_Ibarrier` waits until every write this rank sent as a message is
    /// acknowledged.
    Draining,
    Posted(ffi::MPI_Request),
}

/// This rank's split-phase barrier.
pub(super) struct Barrier {
    phase: Phase,
}

impl Barrier {
    /// No barrier entered.
    pub(super) fn new() -> Barrier {
        Barrier { phase: Phase::Idle }
    }

    /// Enters the barrier; [`test`](Self::test) starts it once no ack is due.
    pub(super) fn notify(&mut self) {
        self.phase = Phase::Draining;
    }

    /// Whether the barrier has completed: starts it on `comm` if it drains and `acks_due`
    /// reached zero, then tests it.
    pub(super) fn test(&mut self, comm: ffi::MPI_Comm, acks_due: u64) -> Result<bool, BridgeError> {
        if let Phase::Draining = self.phase {
            if acks_due > 0 {
                return Ok(false);
            }
            let mut req = null_request();
            // SAFETY: the job communicator is valid until teardown.
            or_peer_lost(
                comm,
                check(unsafe { ffi::MPI_Ibarrier(comm, &mut req) }, "MPI_Ibarrier"),
            )?;
            self.phase = Phase::Posted(req);
        }
        let Phase::Posted(req) = &mut self.phase else {
            return Ok(true);
        };
        // Testing a non-blocking collective runs its schedule, so every round of a waiting
        // rank tests it: testing only every few rounds (to leave the loop to point-to-point
        // traffic) slows the barrier most when processes outnumber cores, where a process
        // gets only a few rounds per time slice.
        // A failed barrier request is freed by MPI and holds no buffer: unwinding is safe.
        let done = or_peer_lost(comm, test(req, "MPI_Test(barrier)"))?;
        if done {
            self.phase = Phase::Idle;
        }
        Ok(done)
    }
}
