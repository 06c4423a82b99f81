//! The send queue of the MPI path: eager messages on `TAG_MSG` in flight with the buffers they
//! read, the spare buffers of completed ones, and the counts the barrier and the end of the
//! job read (messages sent, writes not yet acknowledged).

use std::ffi::c_int;

use ::mpi::ffi;

use crate::error::BridgeError;

use super::calls::{check, must, null_request, test, uint8};
use super::credits::Credits;
use super::wire::{EAGER, Header, SLOTS, TAG_MSG};

/// Sends in flight and what the barrier and the end of the job count of them.
pub(super) struct SendQueue {
    /// Message buffers of completed sends, reused for the next ones (at most [`SLOTS`]).
    spare: Vec<Vec<u8>>,
    /// Sends not yet complete, with the buffer they read from (empty for segment memory).
    sends: Vec<(ffi::MPI_Request, Vec<u8>)>,
    /// Messages sent on `TAG_MSG`, through the rings and to itself.
    sent: u64,
    /// Acknowledgements this rank still awaits for the writes it sent as messages (puts,
    /// vector puts, long AMs), forgotten ones included: a barrier waits for them.
    acks_due: u64,
}

impl SendQueue {
    /// Nothing sent.
    pub(super) fn new() -> SendQueue {
        SendQueue {
            spare: Vec::new(),
            sends: Vec::new(),
            sent: 0,
            acks_due: 0,
        }
    }

    /// Queues a message to `dest` (not this rank) on `TAG_MSG` over `comm`, stamped with the
    /// credits owed to `dest` and spending one if `spend_credit`; returns nothing to wait for.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send(
        &mut self,
        comm: ffi::MPI_Comm,
        credits: &mut Credits,
        dest: usize,
        mut h: Header,
        args: &[u64],
        inline: &[u8],
        spend_credit: bool,
    ) -> Result<(), BridgeError> {
        credits.stamp(&mut h, dest, spend_credit);
        self.acks_due += u64::from(h.is_acked_write());
        let mut buf = self.spare.pop().unwrap_or_default();
        h.encode_into(&mut buf, args, inline);
        let mut req = null_request();
        // SAFETY: `buf` is moved into `self.sends` below without reallocation, so the bytes
        // MPI reads stay in place until the request completes and the pair is dropped.
        let rc = unsafe {
            ffi::MPI_Isend(
                buf.as_ptr().cast(),
                buf.len() as c_int,
                uint8(),
                dest as c_int,
                TAG_MSG,
                comm,
                &mut req,
            )
        };
        check(rc, "MPI_Isend")?;
        self.sends.push((req, buf));
        self.sent += 1;
        Ok(())
    }

    /// Keeps a send started elsewhere until it completes, with the buffer it reads (empty
    /// when it reads segment memory, which outlives every send).
    pub(super) fn push(&mut self, req: ffi::MPI_Request, buf: Vec<u8>) {
        self.sends.push((req, buf));
    }

    /// Counts a message that did not go through [`send`](Self::send) (a ring, this rank).
    #[inline]
    pub(super) fn count_sent(&mut self) {
        self.sent += 1;
    }

    /// Messages sent on `TAG_MSG`, through the rings and to itself.
    #[inline]
    pub(super) fn sent(&self) -> u64 {
        self.sent
    }

    /// Whether every send has completed.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.sends.is_empty()
    }

    /// Acknowledgements still due for writes sent as messages.
    #[inline]
    pub(super) fn acks_due(&self) -> u64 {
        self.acks_due
    }

    /// An acknowledgement from `source` arrived.
    ///
    /// # Panics
    /// Naming `source`, if none was due.
    #[inline]
    pub(super) fn acked(&mut self, source: usize) {
        self.acks_due = self.acks_due.checked_sub(1).unwrap_or_else(|| {
            panic!("malformed message from rank {source}: an unexpected acknowledgement")
        });
    }

    /// Whether round `tick` should sweep the completed sends. Completing sends only frees
    /// their buffers, and every `MPI_Test` costs a round of the library's progress engine,
    /// so the list is swept every 16th round (or when long), keeping the latency path at one
    /// test per round.
    #[inline]
    pub(super) fn sweep_due(&self, tick: u32) -> bool {
        self.sends.len() >= 64 || (!self.sends.is_empty() && tick.is_multiple_of(16))
    }

    /// Frees the completed sends (keeping small buffers as spares); returns how many.
    pub(super) fn sweep(&mut self) -> usize {
        let mut done = 0;
        let mut i = 0;
        while i < self.sends.len() {
            match test(&mut self.sends[i].0, "MPI_Test(send)") {
                Ok(true) => {
                    let (_, buf) = self.sends.swap_remove(i);
                    if buf.capacity() > 0 && buf.capacity() <= EAGER && self.spare.len() < SLOTS {
                        self.spare.push(buf);
                    }
                    done += 1;
                }
                Ok(false) => i += 1,
                // Inside progress no caller can act on it: the rank fails, or with ULFM
                // unwinds as a peer's failure (the buffer stays listed, for MPI to let go of).
                Err(e) => must::<()>(Err(e)),
            }
        }
        done
    }
}
