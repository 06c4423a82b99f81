//! Waiting on MPI operations that use memory a caller lends (the rule is told in `lent.rs`):
//! a blocking get's data landing in conduit memory, and a send from lent bytes finished before
//! any unwind.
//!
//! These are `impl MpiWorld` (and a landing holds the world) because each wait spans the
//! parts: it makes progress rounds, and a landing whose call ended early hands its buffer to
//! the protocol state's abandoned list.

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
        // first, `Drop` hands both to `Abandoned` (`lent.rs`) (or leaks the Vec), never frees it.
        let rc = unsafe {
            ffi::MPI_Irecv(
                buf.as_mut_ptr().cast(),
                len,
                uint8(),
                source as std::ffi::c_int,
                tag,
                world.job.comm,
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
        match self.world.job.st.try_borrow_mut() {
            Ok(mut st) => st.abandoned.push(self.req, buf),
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
                backoff.snooze(&self.job.shared.sleeper, || true);
            }
        }
        if let Some(payload) = held {
            std::panic::resume_unwind(payload);
        }
        self.job.shared.failure.check();
        Ok(())
    }
}
