//! The protocol state of one job, in the one `RefCell` a progress round borrows: each field is
//! one mechanism's part, defined in that mechanism's file with its own operations.

use ::mpi::ffi;

use crate::error::BridgeError;

use super::barrier::Barrier;
use super::completions::Completions;
use super::credits::Credits;
use super::lent::Abandoned;
use super::payloads::Payloads;
use super::send::SendQueue;
use super::slots::Slots;
use super::user_queue::UserQueue;
use super::wire::Header;

/// What the conduit keeps between calls for one job; all of it is rebuilt with the job
/// (`world.rs`, [`JobParts`](super::world::JobParts)).
pub(super) struct Protocol {
    /// The pre-posted receives (`slots.rs`).
    pub(super) slots: Slots,
    /// Payloads still arriving after their header (`payloads.rs`).
    pub(super) payloads: Payloads,
    /// Sends in flight, messages sent, acks due (`send.rs`).
    pub(super) sends: SendQueue,
    /// Flow control toward and from each rank (`credits.rs`).
    pub(super) credits: Credits,
    /// Operations waiting for their answer (`completions.rs`).
    pub(super) ops: Completions,
    /// User AMs waiting to run in order (`user_queue.rs`).
    pub(super) user: UserQueue,
    /// This rank's split-phase barrier (`barrier.rs`).
    pub(super) barrier: Barrier,
    /// Landings whose call ended early (`lent.rs`).
    pub(super) abandoned: Abandoned,
    /// Messages fully handled: with the messages sent, what the end of the job balances.
    pub(super) handled: u64,
    /// Rounds of progress, for the work a round does only every so often.
    pub(super) tick: u32,
}

impl Protocol {
    /// The state of a job of `ranks` ranks whose receives `slots` are posted.
    pub(super) fn new(slots: Slots, ranks: usize) -> Protocol {
        Protocol {
            slots,
            payloads: Payloads::new(),
            sends: SendQueue::new(),
            credits: Credits::new(ranks),
            ops: Completions::new(),
            user: UserQueue::new(),
            barrier: Barrier::new(),
            abandoned: Abandoned::new(),
            handled: 0,
            tick: 0,
        }
    }
}

impl Protocol {
    /// Queues message `h` to `dest` (not this rank) on `comm`, carrying the credits owed to
    /// `dest` and spending one if `spend_credit` (the send queue with the credits it stamps).
    #[inline]
    pub(super) fn send(
        &mut self,
        comm: ffi::MPI_Comm,
        dest: usize,
        h: Header,
        args: &[u64],
        inline: &[u8],
        spend_credit: bool,
    ) -> Result<(), BridgeError> {
        self.sends
            .send(comm, &mut self.credits, dest, h, args, inline, spend_credit)
    }
}
