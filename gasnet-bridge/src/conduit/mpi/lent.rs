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
//! * **Receives land in conduit memory** ([`Landing`]): the data of a blocking get over MPI
//!   arrives in a buffer the conduit owns and is copied out on success. A landing whose call
//!   ended early is *abandoned*: its request and buffer move to `State::abandoned`, where
//!   progress completes and frees them (or teardown leaks the buffer if MPI never finishes).
//! * **Sends finish before the unwind** ([`MpiWorld::wait_lent`]): a send from lent bytes is
//!   waited for with internal progress but without the failure check, which comes only once
//!   MPI has let go of the bytes, as does a panic raised inside progress meanwhile (a
//!   malformed message). A send to a live rank completes; one to a rank that died may not,
//!   and then the process waits for the watchdog's deadline rather than return.
//! * **Window operations whose flush fails end the process** (`lent_lost.rs`): MPI
//!   offers no way to cancel an RMA operation, so after a failed `MPI_Win_flush` the bytes
//!   may still be in use and no return is safe.

use std::panic::AssertUnwindSafe;

use ::mpi::ffi;

use crate::error::BridgeError;
use crate::sleep::Backoff;

use super::calls::{check, null_request, test, uint8};
use super::world::MpiWorld;

/// The receive of a blocking get's data into a buffer the conduit owns.
pub(super) struct Landing<'w> {
    world: &'w MpiWorld,
    req: ffi::MPI_Request,
    buf: Vec<u8>,
    done: bool,
}

impl<'w> Landing<'w> {
    /// Posts a receive of `len` bytes (already checked to fit a `c_int`) from `source` on
    /// `tag`.
    pub(super) fn post(
        world: &'w MpiWorld,
        len: std::ffi::c_int,
        source: usize,
        tag: std::ffi::c_int,
    ) -> Result<Self, BridgeError> {
        let mut buf = vec![0u8; len as usize];
        let mut req = null_request();
        // SAFETY: `buf`'s heap bytes stay where they are for as long as the request may write
        // them: the landing owns the Vec until the request completes, and if it is dropped
        // first, `Drop` hands both to `State::abandoned` (or leaks the Vec), never frees it.
        let rc = unsafe {
            ffi::MPI_Irecv(
                buf.as_mut_ptr().cast(),
                len,
                uint8(),
                source as std::ffi::c_int,
                tag,
                world.comm,
                &mut req,
            )
        };
        check(rc, "MPI_Irecv(landing)")?;
        Ok(Landing {
            world,
            req,
            buf,
            done: false,
        })
    }

    /// Waits (internal progress; unwinds if another rank failed) for the data, then copies it
    /// into `dst` (as long as the receive).
    pub(super) fn wait_into(mut self, dst: &mut [u8]) -> Result<(), BridgeError> {
        self.world.wait_request(&mut self.req)?;
        self.done = true;
        dst.copy_from_slice(&self.buf);
        Ok(())
    }

    /// Cancels the receive (its request was never sent, so nothing can match it) and waits
    /// for the cancellation; if MPI cannot, the landing is abandoned as on an unwind.
    pub(super) fn cancel(mut self) {
        // SAFETY: a receive this landing posted and nothing completed; its buffer stays owned
        // by the landing until the wait below returns (or it is abandoned on failure).
        if check(
            unsafe { ffi::MPI_Cancel(&mut self.req) },
            "MPI_Cancel(landing)",
        )
        .is_err()
        {
            return;
        }
        // SAFETY: the request just cancelled; MPI promises a wait on a cancelled receive
        // returns whatever other processes do. STATUS_IGNORE is allowed.
        let rc = unsafe { ffi::MPI_Wait(&mut self.req, ffi::RSMPI_STATUS_IGNORE) };
        self.done = check(rc, "MPI_Wait(cancelled landing)").is_ok();
    }
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let buf = std::mem::take(&mut self.buf);
        match self.world.st.try_borrow_mut() {
            Ok(mut st) => st.abandoned.push((self.req, buf)),
            // Dropped inside a borrow of the state (an unwind out of progress itself): the
            // receive may still write the buffer, so it is never freed.
            Err(_) => std::mem::forget(buf),
        }
    }
}

impl MpiWorld {
    /// Waits for a request on lent memory with internal progress, without unwinding while
    /// it is outstanding; then unwinds if another rank failed meanwhile, as other waits do.
    /// A panic inside progress (a malformed message) is held until the request is done, with
    /// `MPI_Test` alone driving MPI from then on.
    pub(super) fn wait_lent(&self, req: &mut ffi::MPI_Request) -> Result<(), BridgeError> {
        let mut backoff = Backoff::new();
        let mut held = None;
        loop {
            match test(req, "MPI_Test(lent)") {
                Ok(true) => break,
                Ok(false) => {}
                // MPI reports the request failed: it no longer uses the bytes.
                Err(e) => {
                    if let Some(payload) = held {
                        std::panic::resume_unwind(payload);
                    }
                    return Err(e);
                }
            }
            let worked = match held {
                Some(_) => false,
                None => match std::panic::catch_unwind(AssertUnwindSafe(|| self.progress())) {
                    Ok(work) => work > 0,
                    Err(payload) => {
                        held = Some(payload);
                        false
                    }
                },
            };
            if worked {
                backoff.reset();
            } else {
                backoff.snooze(&self.shared.sleeper, || true);
            }
        }
        if let Some(payload) = held {
            std::panic::resume_unwind(payload);
        }
        self.shared.failure.check();
        Ok(())
    }

    /// Sweeps the abandoned landings: frees the buffers of those MPI has completed.
    pub(super) fn sweep_abandoned(st: &mut super::state::State) -> usize {
        let mut freed = 0;
        let mut i = 0;
        while i < st.abandoned.len() {
            match test(&mut st.abandoned[i].0, "MPI_Test(abandoned)") {
                // A failed request no longer uses its buffer either.
                Ok(true) | Err(_) => {
                    st.abandoned.swap_remove(i);
                    freed += 1;
                }
                Ok(false) => i += 1,
            }
        }
        freed
    }

    /// At teardown: the abandoned landings MPI has not completed are cancelled, and their
    /// buffers leaked, since MPI may still write them.
    pub(super) fn leak_abandoned(&self) {
        let Ok(mut st) = self.st.try_borrow_mut() else {
            return;
        };
        Self::sweep_abandoned(&mut st);
        for (mut req, buf) in st.abandoned.drain(..) {
            // SAFETY: a receive request this module posted and nothing completed; cancelling
            // it is allowed at any time, and its buffer is leaked just below whatever MPI does.
            let _ = unsafe { ffi::MPI_Cancel(&mut req) };
            std::mem::forget(buf);
        }
    }
}
