//! Puts, gets and atomics: through the shared window to ranks of this host, as requests over
//! MPI to the others, and the acknowledgements that carry the target's EC and IWC back.

use std::ffi::c_int;
use std::rc::Rc;

use ::mpi::ffi;

use crate::atomic::{AtomicOp, AtomicResult};
use crate::completion::WriteHandle;
use crate::counters::WriteAck;
use crate::endpoint::Endpoint;
use crate::error::BridgeError;

use super::MpiWorld;
use super::calls::{check, mpi_len, null_request, uint8};
use super::state::Op;
use super::wire::{
    F_UNCOUNTED, Header, K_ATOMIC, K_GET, K_GETV, K_PUT, K_PUTV, TAG_GET, encode_op,
};

impl MpiWorld {
    // ---- RMA ------------------------------------------------------------------------------

    #[inline]
    pub(crate) fn put(
        &self,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<WriteAck, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return m.write_counted(offset, src);
        }
        let id = self.start_put(ep, rank, offset, src)?;
        Ok(self.wait_ack(id))
    }

    /// A put the target does not count in its IWC ([`Endpoint::put_uncounted`]).
    pub(crate) fn put_uncounted(
        &self,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<(), BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return m.segment.write(offset, src);
        }
        let id = self.start_put_flagged(ep, rank, offset, src, F_UNCOUNTED)?;
        self.wait_ack(id);
        Ok(())
    }

    pub(crate) fn put_nb(
        self: &Rc<Self>,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<WriteHandle, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return Ok(WriteHandle::complete(m.write_counted(offset, src)?));
        }
        let id = self.start_put(ep, rank, offset, src)?;
        Ok(WriteHandle::pending(self.clone(), id))
    }

    pub(super) fn start_put(
        &self,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<u64, BridgeError> {
        self.start_put_flagged(ep, rank, offset, src, 0)
    }

    /// Sends a put with header `flags` (0, or [`F_UNCOUNTED`]); returns the id its ack answers.
    fn start_put_flagged(
        &self,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        src: &[u8],
        flags: u8,
    ) -> Result<u64, BridgeError> {
        self.check_range(rank, offset, src.len())?;
        mpi_len(src.len())?;
        let spend = self.take_credit(ep, rank);
        let id = self.new_op();
        let h = Header {
            kind: K_PUT,
            id,
            flags,
            a: offset as u64,
            b: src.len() as u64,
            ..Header::default()
        };
        if let Err(e) = self.send_with_payload(rank, h, &[], src, spend) {
            self.forget_ack(id);
            return Err(e);
        }
        Ok(id)
    }

    pub(crate) fn get(
        &self,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return m.segment.read(offset, dst);
        }
        self.check_range(rank, offset, dst.len())?;
        let len = mpi_len(dst.len())?;
        let spend = self.take_credit(ep, rank);
        let mut req = null_request();
        // SAFETY: `dst` is exclusively borrowed until `wait_request` below returns, i.e. until
        // the receive completed. Only one get is outstanding per process (gets are blocking
        // and no user handler runs while one waits), so the (source, TAG_GET) pair matches
        // this receive's reply only.
        let rc = unsafe {
            ffi::MPI_Irecv(
                dst.as_mut_ptr().cast(),
                len,
                uint8(),
                rank as c_int,
                TAG_GET,
                self.comm,
                &mut req,
            )
        };
        check(rc, "MPI_Irecv(get)")?;
        let h = Header {
            kind: K_GET,
            a: offset as u64,
            b: dst.len() as u64,
            ..Header::default()
        };
        {
            let mut st = self.st.borrow_mut();
            self.send_msg(&mut st, rank, h, &[], &[], spend)?;
        }
        self.wait_request(&mut req)
    }

    /// A vector put ([`Endpoint::put_vector`]): direct copies into mapped memory, else one
    /// request carrying the piece list and the packed bytes, answered by one ack.
    pub(crate) fn put_vector(
        &self,
        ep: &Endpoint,
        rank: usize,
        pieces: &[(usize, usize)],
        src: &[u8],
    ) -> Result<WriteAck, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return crate::vector::scatter_counted(
                &m.segment,
                m.counting(),
                m.counters(),
                pieces,
                src,
            );
        }
        crate::vector::total_len(pieces, src.len())?;
        for &(offset, len) in pieces {
            self.check_range(rank, offset, len)?;
        }
        if pieces.is_empty() {
            return Ok(WriteAck::default());
        }
        let mut body = Vec::with_capacity(crate::vector::GROUP_BYTES + src.len());
        let groups = crate::vector::encode_pieces(pieces, &mut body);
        body.extend_from_slice(src);
        mpi_len(body.len())?;
        let spend = self.take_credit(ep, rank);
        let id = self.new_op();
        let h = Header {
            kind: K_PUTV,
            id,
            a: pieces.len() as u64,
            b: body.len() as u64,
            c: groups as u64,
            ..Header::default()
        };
        if let Err(e) = self.send_with_payload(rank, h, &[], &body, spend) {
            self.forget_ack(id);
            return Err(e);
        }
        Ok(self.wait_ack(id))
    }

    /// A vector get ([`Endpoint::get_vector`]): direct copies from mapped memory, else one
    /// request carrying the piece list, answered by one message with the gathered bytes.
    pub(crate) fn get_vector(
        &self,
        ep: &Endpoint,
        rank: usize,
        pieces: &[(usize, usize)],
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return crate::vector::gather(&m.segment, pieces, dst);
        }
        crate::vector::total_len(pieces, dst.len())?;
        for &(offset, len) in pieces {
            self.check_range(rank, offset, len)?;
        }
        if pieces.is_empty() {
            return Ok(());
        }
        let len = mpi_len(dst.len())?;
        let mut list = Vec::new();
        let groups = crate::vector::encode_pieces(pieces, &mut list);
        mpi_len(list.len())?;
        let spend = self.take_credit(ep, rank);
        let mut req = null_request();
        // SAFETY: as in `get`: `dst` is exclusively borrowed until `wait_request` below
        // returns, and only one get (plain or vector) is outstanding per process, so the
        // (source, TAG_GET) pair matches this receive's reply only.
        let rc = unsafe {
            ffi::MPI_Irecv(
                dst.as_mut_ptr().cast(),
                len,
                uint8(),
                rank as c_int,
                TAG_GET,
                self.comm,
                &mut req,
            )
        };
        check(rc, "MPI_Irecv(vector get)")?;
        let h = Header {
            kind: K_GETV,
            a: pieces.len() as u64,
            b: list.len() as u64,
            c: groups as u64,
            ..Header::default()
        };
        self.send_with_payload(rank, h, &[], &list, spend)?;
        self.wait_request(&mut req)
    }

    pub(crate) fn atomic(
        &self,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<AtomicResult, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            let word = m.segment.atomic_u64(offset)?;
            let (previous, wrote) = op.apply(word);
            let ack = wrote.then(|| m.count_write());
            return Ok(AtomicResult { previous, ack });
        }
        self.check_range(rank, offset, 8)?;
        if !offset.is_multiple_of(8) {
            return Err(BridgeError::Misaligned {
                rank,
                offset,
                align: 8,
            });
        }
        let spend = self.take_credit(ep, rank);
        let id = self.new_op();
        let (code, x, y) = encode_op(op);
        let h = Header {
            kind: K_ATOMIC,
            id,
            a: offset as u64,
            b: code,
            c: x,
            d: y,
            ..Header::default()
        };
        {
            let mut st = self.st.borrow_mut();
            self.send_msg(&mut st, rank, h, &[], &[], spend)?;
        }
        let mut result = None;
        self.wait_internal(|st| match st.ops.get(&id) {
            Some(Op::Atomic(r)) => {
                result = Some(*r);
                st.ops.remove(&id);
                true
            }
            _ => false,
        });
        Ok(result.expect("atomic completed"))
    }

    /// The ack of `id` if it has arrived (after one round of internal progress).
    pub(crate) fn test_ack(&self, id: u64) -> Option<WriteAck> {
        self.progress();
        match self.st.borrow().ops.get(&id) {
            Some(Op::Ack(a)) => Some(*a),
            _ => None,
        }
    }

    /// The ack of `id` if it has arrived, with no progress.
    pub(crate) fn peek_ack(&self, id: u64) -> Option<WriteAck> {
        match self.st.try_borrow().ok()?.ops.get(&id) {
            Some(Op::Ack(a)) => Some(*a),
            _ => None,
        }
    }

    /// Waits (internal progress only) for the ack of `id`.
    pub(crate) fn wait_ack(&self, id: u64) -> WriteAck {
        let mut ack = None;
        self.wait_internal(|st| match st.ops.get(&id) {
            Some(Op::Ack(a)) => {
                ack = Some(*a);
                true
            }
            _ => false,
        });
        self.st.borrow_mut().ops.remove(&id);
        ack.expect("ack arrived")
    }

    pub(crate) fn forget_ack(&self, id: u64) {
        if let Ok(mut st) = self.st.try_borrow_mut() {
            st.ops.remove(&id);
        }
    }
}
