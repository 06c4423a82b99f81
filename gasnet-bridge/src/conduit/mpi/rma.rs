//! Puts, gets and atomics: through the shared memory to ranks of this host, as requests over
//! MPI to the others, and the acknowledgements that carry the target's EC and IWC back.
//!
//! These are `impl MpiWorld` because each operation chooses among the parts: the mapped
//! segments (kept), the RMA window, the counting switch, and requests through the credits,
//! send queue and completions, waiting on progress for their answers.

use crate::atomic::{AtomicOp, AtomicResult};
use crate::counters::WriteAck;
use crate::error::BridgeError;

use super::calls::{mpi_len, must};
use super::lent_wait::Landing;
use super::rma_window::{RmaWindow, is_window_id, is_window_put, put_completes_after};
use super::started::Started;
use super::wire::{
    F_UNCOUNTED, Header, K_ATOMIC, K_GET, K_GET_NB, K_GETV, K_PUT, K_PUTV, TAG_GET, encode_op,
};
use super::world::MpiWorld;

impl MpiWorld {
    /// The RMA window if `id` names one of its operations.
    #[inline]
    fn window_of(&self, id: u64) -> Option<&RmaWindow> {
        self.job.rma.as_ref().filter(|_| is_window_id(id))
    }

    /// Completes the window operations in flight (user progress, barriers, end of job).
    #[inline]
    pub(super) fn flush_window(&self) {
        self.flush_rma();
    }

    /// Completes the window operations in flight, as user progress would but without taking
    /// messages off the wire; returns whether there were any.
    #[inline]
    pub(crate) fn flush_rma(&self) -> bool {
        match &self.job.rma {
            Some(w) if w.any_dirty() => {
                must(w.flush_dirty());
                true
            }
            _ => false,
        }
    }

    /// Whether window write `id` has completed (no flush).
    #[inline]
    pub(crate) fn flushed(&self, id: u64) -> bool {
        self.window_of(id).is_some_and(|w| w.done(id))
    }

    /// True if `id` names a put on the window (completed by a flush of its target).
    #[inline]
    pub(crate) fn is_window_write(&self, id: u64) -> bool {
        self.job.rma.is_some() && is_window_put(id)
    }

    /// True if write `later`'s completion implies write `earlier`'s (same ack): two window
    /// puts to one target, `later` started after.
    #[inline]
    pub(crate) fn write_completes_after(&self, earlier: u64, later: u64) -> bool {
        self.job.rma.is_some() && put_completes_after(earlier, later)
    }

    /// Out of line: inlined into `Endpoint::put`, it makes that function too large to inline
    /// into its callers, and every put pays for it, the smp conduit's (the other arm of the
    /// same match) too, in every binary built with the feature. Keeping only the mapped case
    /// inline here is as slow as inlining all of it.
    #[inline(never)]
    pub(crate) fn put(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<WriteAck, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return m.write_counted(offset, src);
        }
        if let Some(w) = &self.job.rma
            && self.job.counting.window_puts(rank)
        {
            w.put(rank, offset, src)?;
            return Ok(WriteAck::UNCOUNTED);
        }
        let id = self.start_put(in_handler, rank, offset, src)?;
        Ok(self.wait_ack(id))
    }

    /// A put the target does not count in its IWC ([`Endpoint::put_uncounted`](crate::Endpoint::put_uncounted)).
    pub(crate) fn put_uncounted(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<(), BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return m.segment.write(offset, src);
        }
        if let Some(w) = &self.job.rma {
            return w.put(rank, offset, src);
        }
        let id = self.start_put_flagged(in_handler, rank, offset, src, F_UNCOUNTED)?;
        self.wait_ack(id);
        Ok(())
    }

    pub(crate) fn put_nb(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<Started<WriteAck>, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return Ok(Started::Done(m.write_counted(offset, src)?));
        }
        if let Some(w) = &self.job.rma
            && self.job.counting.window_puts(rank)
        {
            let id = w.put_nb(rank, offset, src)?;
            return Ok(Started::Pending(id));
        }
        let id = self.start_put(in_handler, rank, offset, src)?;
        Ok(Started::Pending(id))
    }

    /// [`Endpoint::put_nb_flush`](crate::Endpoint::put_nb_flush): a window put known by its number, if `rank` is reached
    /// through the window and does not count writes now.
    #[inline]
    pub(crate) fn put_nb_flush(
        &self,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Option<Result<u64, BridgeError>> {
        if !self.job.counting.window_puts(rank) {
            return None;
        }
        let w = self.job.rma.as_ref()?;
        Some(w.put_nb(rank, offset, src))
    }

    pub(super) fn start_put(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<u64, BridgeError> {
        self.start_put_flagged(in_handler, rank, offset, src, 0)
    }

    /// Sends a put with header `flags` (0, or [`F_UNCOUNTED`]); returns the id its ack answers.
    fn start_put_flagged(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        src: &[u8],
        flags: u8,
    ) -> Result<u64, BridgeError> {
        self.check_range(rank, offset, src.len())?;
        mpi_len(src.len())?;
        let spend = self.take_credit(in_handler, rank);
        let id = self.new_op();
        let h = Header {
            kind: K_PUT,
            id,
            flags,
            a: offset as u64,
            b: src.len() as u64,
            ..Header::default()
        };
        self.send_op(rank, h, src, spend)?;
        Ok(id)
    }

    pub(crate) fn get(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return m.segment.read(offset, dst);
        }
        if let Some(w) = &self.job.rma {
            return w.get(rank, offset, dst);
        }
        self.check_range(rank, offset, dst.len())?;
        mpi_len(dst.len())?;
        let spend = self.take_credit(in_handler, rank);
        let h = Header {
            kind: K_GET,
            a: offset as u64,
            b: dst.len() as u64,
            ..Header::default()
        };
        self.blocking_get(rank, dst, h, &[], spend)
    }

    /// Posts the receive of a blocking get's data (on `TAG_GET`), sends request `h` (with
    /// `payload`) to `rank`, waits for the data and copies it into `dst`.
    ///
    /// The data lands in a buffer of the conduit's, not in `dst` (`lent.rs`): the wait may
    /// unwind (another rank failed) while the reply is still on its way. Only one blocking
    /// get is outstanding per process (it waits, and no user handler runs meanwhile;
    /// non-blocking gets answer on `TAG_PAYLOAD` or inline), so (source, `TAG_GET`) matches
    /// this receive's reply only; a request that could not be sent cancels its receive, so
    /// that the next get's is the only one posted. One abandoned by an unwind stays posted:
    /// the job has failed by then.
    fn blocking_get(
        &self,
        rank: usize,
        dst: &mut [u8],
        h: Header,
        payload: &[u8],
        spend: bool,
    ) -> Result<(), BridgeError> {
        let len = mpi_len(dst.len())?;
        let landing = Landing::post(self, len, rank, TAG_GET)?;
        if let Err(e) = self.send_with_payload(rank, h, &[], payload, spend) {
            landing.cancel();
            return Err(e);
        }
        landing.wait_into(dst)
    }

    /// A vector put ([`Endpoint::put_vector`](crate::Endpoint::put_vector)): direct copies into mapped memory, else one
    /// `MPI_Put` with the pieces as its datatype through the window (uncounted, pieces in
    /// order), else one request carrying the piece list and the packed bytes, answered by one
    /// ack.
    pub(crate) fn put_vector(
        &self,
        in_handler: bool,
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
        crate::vector::total_len(pieces, src.len(), self.kept.segment_len)?;
        for &(offset, len) in pieces {
            self.check_range(rank, offset, len)?;
        }
        if pieces.is_empty() {
            return Ok(WriteAck::default());
        }
        if let Some(w) = &self.job.rma
            && self.job.counting.window_puts(rank)
            && w.put_pieces(rank, pieces, src)?
        {
            return Ok(WriteAck::UNCOUNTED);
        }
        let mut body = Vec::with_capacity(crate::vector::GROUP_BYTES + src.len());
        let groups = crate::vector::encode_pieces(pieces, &mut body);
        body.extend_from_slice(src);
        mpi_len(body.len())?;
        let spend = self.take_credit(in_handler, rank);
        let id = self.new_op();
        let h = Header {
            kind: K_PUTV,
            id,
            a: pieces.len() as u64,
            b: body.len() as u64,
            c: groups as u64,
            ..Header::default()
        };
        self.send_op(rank, h, &body, spend)?;
        Ok(self.wait_ack(id))
    }

    /// A vector get ([`Endpoint::get_vector`](crate::Endpoint::get_vector)): direct copies from mapped memory, else one
    /// `MPI_Get` with the pieces as its datatype through the window, else one request
    /// carrying the piece list, answered by one message with the gathered bytes.
    pub(crate) fn get_vector(
        &self,
        in_handler: bool,
        rank: usize,
        pieces: &[(usize, usize)],
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return crate::vector::gather(&m.segment, pieces, dst);
        }
        crate::vector::total_len(pieces, dst.len(), self.kept.segment_len)?;
        for &(offset, len) in pieces {
            self.check_range(rank, offset, len)?;
        }
        if pieces.is_empty() {
            return Ok(());
        }
        if let Some(w) = &self.job.rma {
            return w.get_pieces(rank, pieces, dst);
        }
        mpi_len(dst.len())?;
        let mut list = Vec::new();
        let groups = crate::vector::encode_pieces(pieces, &mut list);
        mpi_len(list.len())?;
        let spend = self.take_credit(in_handler, rank);
        let h = Header {
            kind: K_GETV,
            a: pieces.len() as u64,
            b: list.len() as u64,
            c: groups as u64,
            ..Header::default()
        };
        self.blocking_get(rank, dst, h, &list, spend)
    }

    pub(crate) fn atomic(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<AtomicResult, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return m.atomic(offset, op);
        }
        let id = self.start_atomic(in_handler, rank, offset, op)?;
        Ok(self.wait_atomic(id))
    }

    /// A non-blocking atomic ([`Endpoint::atomic_nb`](crate::Endpoint::atomic_nb)): done at once in mapped memory, else
    /// a request whose reply completes the handle.
    pub(crate) fn atomic_nb(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<Started<AtomicResult>, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return Ok(Started::Done(m.atomic(offset, op)?));
        }
        let id = self.start_atomic(in_handler, rank, offset, op)?;
        Ok(Started::Pending(id))
    }

    /// Sends atomic `op` on the word at `offset` of `rank`; returns the id its reply answers.
    fn start_atomic(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<u64, BridgeError> {
        self.check_range(rank, offset, 8)?;
        if !offset.is_multiple_of(8) {
            return Err(BridgeError::Misaligned {
                rank,
                offset,
                align: 8,
            });
        }
        let spend = self.take_credit(in_handler, rank);
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
        self.send_op(rank, h, &[], spend)?;
        Ok(id)
    }

    /// Waits (internal progress only) for the reply of atomic `id`.
    pub(crate) fn wait_atomic(&self, id: u64) -> AtomicResult {
        let mut result = None;
        self.wait_internal(|st| {
            result = st.ops.atomic(id);
            if result.is_some() {
                st.ops.forget(id);
            }
            result.is_some()
        });
        result.expect("atomic completed")
    }

    /// The result of atomic `id` if its reply has arrived, with no progress.
    pub(crate) fn peek_atomic(&self, id: u64) -> Option<AtomicResult> {
        self.job.st.try_borrow().ok()?.ops.atomic(id)
    }

    /// A non-blocking get of `len` bytes into a buffer the handle owns
    /// ([`Endpoint::get_nb_owned`](crate::Endpoint::get_nb_owned)): read at once from mapped memory, else a request (with an
    /// id, so many can be outstanding) whose reply completes the handle.
    pub(crate) fn get_nb_owned(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        len: usize,
    ) -> Result<Started<Vec<u8>>, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            let mut bytes = vec![0u8; len];
            m.segment.read(offset, &mut bytes)?;
            return Ok(Started::Done(bytes));
        }
        if let Some(w) = &self.job.rma {
            let id = w.get_nb(rank, offset, len)?;
            return Ok(Started::Pending(id));
        }
        self.check_range(rank, offset, len)?;
        mpi_len(len)?;
        let spend = self.take_credit(in_handler, rank);
        let id = self.new_op();
        let h = Header {
            kind: K_GET_NB,
            id,
            a: offset as u64,
            b: len as u64,
            ..Header::default()
        };
        self.send_op(rank, h, &[], spend)?;
        Ok(Started::Pending(id))
    }

    /// The data of get `id` if it has arrived (taken out), with no progress.
    pub(crate) fn take_got(&self, id: u64) -> Option<Vec<u8>> {
        if let Some(w) = self.window_of(id) {
            return w.take_got(id);
        }
        self.job.st.try_borrow_mut().ok()?.ops.take_got(id)
    }

    /// Waits (internal progress only) for the data of get `id`.
    pub(crate) fn wait_got(&self, id: u64) -> Vec<u8> {
        if let Some(w) = self.window_of(id) {
            return must(w.wait_got(id));
        }
        self.wait_internal(|st| st.ops.has_got(id));
        self.take_got(id).expect("get completed")
    }

    /// Sends request `h` (with `payload`) to `rank`; if it cannot leave, forgets the
    /// completion its id waits for.
    fn send_op(
        &self,
        rank: usize,
        h: Header,
        payload: &[u8],
        spend: bool,
    ) -> Result<(), BridgeError> {
        self.send_with_payload(rank, h, &[], payload, spend)
            .inspect_err(|_| self.forget_ack(h.id))
    }

    /// The ack of `id` if it has arrived (after one round of internal progress).
    pub(crate) fn test_ack(&self, id: u64) -> Option<WriteAck> {
        if let Some(w) = self.window_of(id) {
            // A flush is the window's only completion test; it waits for this target only.
            return Some(must(w.complete(id)));
        }
        if let Some(ack) = self.peek_ack(id) {
            return Some(ack);
        }
        self.progress();
        self.job.st.borrow().ops.ack(id)
    }

    /// The ack of `id` if it has arrived, with no progress.
    pub(crate) fn peek_ack(&self, id: u64) -> Option<WriteAck> {
        if let Some(w) = self.window_of(id) {
            return w.done(id).then_some(WriteAck::UNCOUNTED);
        }
        self.job.st.try_borrow().ok()?.ops.ack(id)
    }

    /// Waits (internal progress only) for the ack of `id`.
    pub(crate) fn wait_ack(&self, id: u64) -> WriteAck {
        if let Some(w) = self.window_of(id) {
            return must(w.complete(id));
        }
        let mut ack = None;
        self.wait_internal(|st| {
            ack = st.ops.ack(id);
            ack.is_some()
        });
        self.job.st.borrow_mut().ops.forget(id);
        ack.expect("ack arrived")
    }

    pub(crate) fn forget_ack(&self, id: u64) {
        if let Some(w) = self.window_of(id) {
            return w.forget(id);
        }
        if let Ok(mut st) = self.job.st.try_borrow_mut() {
            st.ops.forget(id);
        }
    }
}
