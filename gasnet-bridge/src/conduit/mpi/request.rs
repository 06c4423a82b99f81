//! Sending a request on the MPI path: a credit waited for, the header with its payload inline
//! or following it as a second message, after the window puts to the same rank.
//!
//! These are `impl MpiWorld` because a request spans the parts: the RMA window (flushed first),
//! the credits and the send queue, the completions that number it, and progress while a
//! credit or a payload's send is due.

use std::ffi::c_int;

use ::mpi::ffi;

use crate::error::BridgeError;

use super::calls::{check, mpi_len, null_request, uint8};
use super::wire::{F_SEPARATE, Header, INLINE_MAX, TAG_PAYLOAD};
use super::world::MpiWorld;

impl MpiWorld {
    /// Sends `bytes` on `TAG_PAYLOAD` and waits (making internal progress) until MPI no longer
    /// needs them: the bytes are lent, so the wait does not unwind before that (`lent.rs`).
    pub(super) fn send_payload(&self, dest: usize, bytes: &[u8]) -> Result<(), BridgeError> {
        let mut req = null_request();
        // SAFETY: `bytes` stays borrowed until `wait_lent` returns, which it does (by value or
        // by unwinding) only once the send has completed or failed.
        let rc = unsafe {
            ffi::MPI_Isend(
                bytes.as_ptr().cast(),
                mpi_len(bytes.len())?,
                uint8(),
                dest as c_int,
                TAG_PAYLOAD,
                self.job.comm,
                &mut req,
            )
        };
        check(rc, "MPI_Isend(payload)")?;
        self.wait_lent(&mut req)
    }

    /// Outside handlers, waits (internally) until a credit toward `dest` is free; true if the
    /// message should spend one.
    pub(super) fn take_credit(&self, in_handler: bool, dest: usize) -> bool {
        if in_handler {
            return false;
        }
        self.wait_internal(|st| st.credits.available(dest));
        true
    }

    /// Numbers a new operation whose answer a handle will wait for.
    pub(super) fn new_op(&self) -> u64 {
        self.job.st.borrow_mut().ops.start()
    }

    /// Sends `header` (with `payload` inline or following it) to `dest`.
    pub(super) fn send_with_payload(
        &self,
        dest: usize,
        mut header: Header,
        args: &[u64],
        payload: &[u8],
        spend: bool,
    ) -> Result<(), BridgeError> {
        // A request after window puts to the same rank finds them landed, as it would find
        // earlier active-message puts (per-pair order).
        if let Some(w) = &self.job.rma
            && w.is_dirty(dest)
        {
            w.flush(dest)?;
        }
        let comm = self.job.comm;
        if payload.len() <= INLINE_MAX {
            let mut st = self.job.st.borrow_mut();
            st.send(comm, dest, header, args, payload, spend)
        } else {
            mpi_len(payload.len())?;
            header.flags |= F_SEPARATE;
            self.job
                .st
                .borrow_mut()
                .send(comm, dest, header, args, &[], spend)?;
            self.send_payload(dest, payload)
        }
    }
}
