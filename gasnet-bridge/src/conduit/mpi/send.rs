//! Sending on the MPI path: eager messages with credits, and payloads that follow their
//! header as a second message.

use std::ffi::c_int;

use ::mpi::ffi;

use crate::error::BridgeError;

use super::calls::{check, mpi_len, null_request, uint8};
use super::state::{Op, State};
use super::wire::{F_CREDIT, F_SEPARATE, Header, INLINE_MAX, TAG_MSG, TAG_PAYLOAD};
use super::world::MpiWorld;

impl MpiWorld {
    // ---- sending ------------------------------------------------------------------------

    /// Queues a message to `dest` (not this rank) on `TAG_MSG`; returns nothing to wait for.
    #[inline]
    pub(super) fn send_msg(
        &self,
        st: &mut State,
        dest: usize,
        mut h: Header,
        args: &[u64],
        inline: &[u8],
        spend_credit: bool,
    ) -> Result<(), BridgeError> {
        h.credits = std::mem::take(&mut st.to_return[dest]);
        st.acks_due += u64::from(h.is_acked_write());
        if spend_credit {
            h.flags |= F_CREDIT;
            st.credits[dest] -= 1;
        }
        let mut buf = st.spare.pop().unwrap_or_default();
        h.encode_into(&mut buf, args, inline);
        let mut req = null_request();
        // SAFETY: `buf` is moved into `st.sends` below without reallocation, so the bytes
        // MPI reads stay in place until the request completes and the pair is dropped.
        let rc = unsafe {
            ffi::MPI_Isend(
                buf.as_ptr().cast(),
                buf.len() as c_int,
                uint8(),
                dest as c_int,
                TAG_MSG,
                self.comm,
                &mut req,
            )
        };
        check(rc, "MPI_Isend")?;
        st.sends.push((req, buf));
        st.sent += 1;
        Ok(())
    }

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
                self.comm,
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
        self.wait_internal(|st| st.credits[dest] > 0);
        true
    }

    pub(super) fn new_op(&self) -> u64 {
        let mut st = self.st.borrow_mut();
        let id = st.next_op;
        st.next_op += 1;
        st.ops.insert(id, Op::Waiting);
        id
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
        if let Some(w) = &self.rma
            && w.is_dirty(dest)
        {
            w.flush(dest)?;
        }
        if payload.len() <= INLINE_MAX {
            let mut st = self.st.borrow_mut();
            self.send_msg(&mut st, dest, header, args, payload, spend)
        } else {
            mpi_len(payload.len())?;
            header.flags |= F_SEPARATE;
            {
                let mut st = self.st.borrow_mut();
                self.send_msg(&mut st, dest, header, args, &[], spend)?;
            }
            self.send_payload(dest, payload)
        }
    }
}
