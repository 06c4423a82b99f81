//! The pre-posted receives of the MPI path: [`SLOTS`] receives of [`EAGER`] bytes on
//! `TAG_MSG`, matched in posting order, each posted again after the message it took was
//! handled.

use std::ffi::c_int;

use ::mpi::ffi;

use crate::error::BridgeError;

use super::calls::{check, must, null_request, uint8};
use super::wire::{EAGER, SLOTS, TAG_MSG};

/// One pre-posted receive.
struct Slot {
    req: ffi::MPI_Request,
    buf: Box<[u8]>,
}

/// The ring of pre-posted receives.
pub(super) struct Slots {
    slots: Vec<Slot>,
    /// The slot whose receive was posted first among those still posted (MPI matches
    /// receives in posting order, so it completes first).
    head: usize,
    /// Slots taken off the wire whose receive is not posted again yet: the `unposted` slots
    /// just before `head`, in ring order. The next round posts them before its test, so a
    /// reply goes out before its slot is posted again.
    unposted: usize,
}

/// Posts the receive of `buf` on `comm` for any source.
fn post(
    comm: ffi::MPI_Comm,
    buf: &mut [u8],
    req: &mut ffi::MPI_Request,
) -> Result<(), BridgeError> {
    // SAFETY: the buffer is a slot's boxed slice of EAGER bytes, never reallocated; it stays
    // with its request until the receive completes or is cancelled in `cancel`.
    let rc = unsafe {
        ffi::MPI_Irecv(
            buf.as_mut_ptr().cast(),
            EAGER as c_int,
            uint8(),
            ffi::RSMPI_ANY_SOURCE,
            TAG_MSG,
            comm,
            req,
        )
    };
    check(rc, "MPI_Irecv")
}

impl Slots {
    /// [`SLOTS`] receives of [`EAGER`] bytes, posted on `comm` for any source.
    pub(super) fn post(comm: ffi::MPI_Comm) -> Result<Slots, BridgeError> {
        let mut slots: Vec<Slot> = (0..SLOTS)
            .map(|_| Slot {
                req: null_request(),
                buf: vec![0u8; EAGER].into_boxed_slice(),
            })
            .collect();
        for s in &mut slots {
            post(comm, &mut s.buf, &mut s.req)?;
        }
        Ok(Slots {
            slots,
            head: 0,
            unposted: 0,
        })
    }

    /// Posts the receives of the slots taken off the wire since the last call, in the order
    /// they were taken, so the ring keeps matching in order.
    fn repost(&mut self, comm: ffi::MPI_Comm) {
        while self.unposted > 0 {
            let i = (self.head + SLOTS - self.unposted) % SLOTS;
            let slot = &mut self.slots[i];
            must(post(comm, &mut slot.buf, &mut slot.req));
            self.unposted -= 1;
        }
    }

    /// Tests the oldest posted receive (after posting again the slots taken since the last
    /// call); if it completed, returns its slot with the sender and length. The slot is then
    /// taken off the wire: its bytes stay until the next call posts it again.
    #[inline]
    pub(super) fn test_head(&mut self, comm: ffi::MPI_Comm) -> Option<(usize, usize, usize)> {
        if self.unposted > 0 {
            self.repost(comm);
        }
        let head = self.head;
        let mut flag: c_int = 0;
        // SAFETY: a zeroed MPI_Status is a valid value to be overwritten.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: the slot's request was posted by this module on its own buffer (the head
        // slot is always posted: `repost` runs at the start of every call).
        let rc = unsafe { ffi::MPI_Test(&mut self.slots[head].req, &mut flag, &mut status) };
        must(check(rc, "MPI_Test(receive)"));
        if flag == 0 {
            return None;
        }
        let mut count: c_int = 0;
        // SAFETY: `status` was filled by the completed receive.
        must(check(
            unsafe { ffi::MPI_Get_count(&status, uint8(), &mut count) },
            "MPI_Get_count",
        ));
        self.head = (head + 1) % SLOTS;
        self.unposted += 1;
        Some((head, status.MPI_SOURCE as usize, count.max(0) as usize))
    }

    /// The buffer of slot `i`, taken off the wire by [`test_head`](Self::test_head) and not
    /// posted again yet (swapped or taken out and put back before the next call).
    #[inline]
    pub(super) fn buf_mut(&mut self, i: usize) -> &mut Box<[u8]> {
        &mut self.slots[i].buf
    }

    /// Cancels every posted receive and waits for the cancellations (teardown).
    pub(super) fn cancel(&mut self) -> Result<(), BridgeError> {
        for s in &mut self.slots {
            if s.req == null_request() {
                continue; // taken off the wire and not posted again
            }
            // SAFETY: cancelling this module's own posted receive; its buffer lives in the
            // slot until after the MPI_Wait below.
            check(
                unsafe { ffi::MPI_Cancel(&mut s.req) },
                "MPI_Cancel(receive)",
            )?;
            // SAFETY: completing the request just cancelled; STATUS_IGNORE is allowed.
            let rc = unsafe { ffi::MPI_Wait(&mut s.req, ffi::RSMPI_STATUS_IGNORE) };
            check(rc, "MPI_Wait(cancelled receive)")?;
        }
        Ok(())
    }
}
