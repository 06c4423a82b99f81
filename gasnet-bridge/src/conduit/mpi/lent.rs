//! MPI operations on memory a caller lends for the length of one call, and why none of them
//! can outlive the call.
//!
//! A blocking put or get hands MPI a pointer into the caller's slice. The call may end early:
//! its wait unwinds when another rank fails (`Failure::check`), or an MPI call returns an
//! error. If MPI still held the pointer then, it would read or write memory the caller has
//! freed or reused (a later progress call, a user `poll` or a drop during the unwind, lets it).
//! So the conduit never returns, by value or by unwinding, while an operation it started
//! still owns lent memory:
//!
//! * **Receives land in conduit memory** (`Landing`, `lent_wait.rs`): the data of a blocking
//!   get over MPI arrives in a buffer the conduit owns and is copied out on success. A landing
//!   whose call ended early is *abandoned*: its request and buffer move to [`Abandoned`] (this
//!   file's part of the protocol state), where progress completes and frees them (or teardown
//!   leaks the buffer if MPI never finishes).
//! * **Sends finish before the unwind** (`MpiWorld::wait_lent`, `lent_wait.rs`): a send from
//!   lent bytes is waited for with internal progress but without the failure check, which
//!   comes only once MPI has let go of the bytes, as does a panic raised inside progress
//!   meanwhile (a malformed message). A send to a live rank completes; one to a rank that died may not,
//!   and then the process waits for the watchdog's deadline rather than return.
//! * **Window operations whose flush fails end the process** (`lent_lost.rs`): MPI
//!   offers no way to cancel an RMA operation, so after a failed `MPI_Win_flush` the bytes
//!   may still be in use and no return is safe.

use ::mpi::ffi;

use super::calls::test;

/// Receives into conduit buffers whose blocking call ended early: freed when MPI completes
/// them, never before.
pub(super) struct Abandoned {
    list: Vec<(ffi::MPI_Request, Vec<u8>)>,
}

impl Abandoned {
    /// None abandoned.
    pub(super) fn new() -> Abandoned {
        Abandoned { list: Vec::new() }
    }

    /// Whether none is left.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Takes over a receive whose call ended early, with the buffer MPI may still write.
    pub(super) fn push(&mut self, req: ffi::MPI_Request, buf: Vec<u8>) {
        self.list.push((req, buf));
    }

    /// Frees the buffers of those MPI has completed; returns how many.
    pub(super) fn sweep(&mut self) -> usize {
        let mut freed = 0;
        let mut i = 0;
        while i < self.list.len() {
            match test(&mut self.list[i].0, "MPI_Test(abandoned)") {
                // A failed request no longer uses its buffer either.
                Ok(true) | Err(_) => {
                    self.list.swap_remove(i);
                    freed += 1;
                }
                Ok(false) => i += 1,
            }
        }
        freed
    }

    /// At teardown: the receives MPI has not completed are cancelled, and their buffers
    /// leaked, since MPI may still write them.
    pub(super) fn leak(&mut self) {
        self.sweep();
        for (mut req, buf) in self.list.drain(..) {
            // SAFETY: a receive request a landing posted and nothing completed; cancelling
            // it is allowed at any time, and its buffer is leaked just below whatever MPI does.
            let _ = unsafe { ffi::MPI_Cancel(&mut req) };
            std::mem::forget(buf);
        }
    }
}
