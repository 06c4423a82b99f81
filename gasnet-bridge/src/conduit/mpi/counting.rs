//! The counting switch across processes: a rank that switches counting on tells every rank
//! that reaches it through the MPI-3 window, and reads its IWC only after each has flushed its
//! window puts to it and moved later ones to active messages.
//!
//! Within a host the switch is the smp conduit's handshake (`counters.rs`: the switch, then
//! `membarrier(2)` over every process mapping the segment). A window put is different: it is
//! applied by MPI, possibly long after the writer's call returned, and never looks at the
//! switch. So in a [`WriteCounting::Switched`] job with a window (`rma_window.rs`), each
//! writer keeps one byte per target, `window_puts`, set while that target does not count, and
//! sends its puts to a target whose byte is clear as active messages, which the target's own
//! thread applies and counts. The target's switch-on is:
//!
//! 1. store the switch (and the membarrier, for the processes of its host);
//! 2. send [`K_COUNTING`] (on) to every rank that does not map its segment, then make internal
//!    progress until each has answered [`K_COUNTING_ACK`];
//! 3. `MPI_Win_sync`, then return (the caller reads the IWC after).
//!
//! A writer's handler of the notice (internal progress: it runs in any wait, never delayed
//! behind user code that polls) clears the byte, flushes its window puts to the target, then
//! answers. A writer runs on one thread, so each of its puts either started before the
//! handler, went through the window and has landed at the target before the answer left, or
//! started after it, went as an active message and is counted by the target's thread, whose
//! switch is already on. Hence, as within a host: every write the IWC does not count landed
//! before the switch-on returned, and the counted ones are exactly the increments (gapless).
//! Put requests a writer sent after setting its bit may arrive while the target still waits
//! for other answers; the target counts them then (its switch is on), which is what a write
//! after the switch-on gets anyway.
//!
//! Switching off is a store and a notice (off) to the same ranks, not waited for: a writer
//! that still sends a target active messages after it switched off is slower but right (the
//! target no longer counts them). Notices and answers travel on the per-pair FIFO of the
//! conduit's messages, so an off followed by an on reaches each writer in that order.
//!
//! This file holds the switch's state, [`CountingSwitch`]; the notices and their answers,
//! which span it, the window, the send queue and progress, are `counting_notice.rs`.
//!
//! Cost: a switch-on is one message to and from every rank that reaches the target through
//! the window (all other ranks with `PGAS_MPI_PSHM=0`), waited for in parallel; cd-runtime
//! switches each rank on once per job.
//!
//! [`WriteCounting::Switched`]: crate::WriteCounting::Switched

use std::cell::Cell;

use crate::membarrier::Scope;

/// A writer's side and a target's side of the counting switch across processes.
pub(super) struct CountingSwitch {
    /// Which threads can write into this rank's segment and count there: the switch's
    /// barrier reaches them (`Host` when processes of this host map it).
    scope: Scope,
    /// By rank: whether puts to it go through the window now: a rank this process does not
    /// map, in a job with the window, that has not told this rank it counts incoming writes
    /// (a notice of `K_COUNTING`; puts to such a rank go as active messages, so its IWC
    /// counts each one). One byte per rank, read by every put.
    window_puts: Box<[Cell<bool>]>,
    /// Answers ([`K_COUNTING_ACK`](super::wire::K_COUNTING_ACK)) to this rank's latest
    /// switch-on notices.
    answers: Cell<usize>,
}

impl CountingSwitch {
    /// The switch of a job whose writes reach this segment from `scope`; `window_puts[r]`
    /// says whether puts to rank `r` start on the window.
    pub(super) fn new(scope: Scope, window_puts: Box<[Cell<bool>]>) -> CountingSwitch {
        CountingSwitch {
            scope,
            window_puts,
            answers: Cell::new(0),
        }
    }

    /// Which threads the switch's barrier reaches.
    pub(super) fn scope(&self) -> Scope {
        self.scope
    }

    /// Whether puts to `rank` go through the window now (not mapped, a window job, `rank` not
    /// counting writes); false for a rank that does not exist.
    #[inline]
    pub(super) fn window_puts(&self, rank: usize) -> bool {
        self.window_puts.get(rank).is_some_and(|c| c.get())
    }

    /// Remembers a notice from `target`: its puts go through the window unless it counts.
    pub(super) fn noticed(&self, target: usize, counts: bool) {
        self.window_puts[target].set(!counts);
    }

    /// Starts counting the answers to a new round of switch-on notices.
    pub(super) fn expect_answers(&self) {
        self.answers.set(0);
    }

    /// A writer answered a switch-on notice.
    pub(super) fn answered(&self) {
        self.answers.set(self.answers.get() + 1);
    }

    /// Answers received since [`expect_answers`](Self::expect_answers).
    pub(super) fn answers(&self) -> usize {
        self.answers.get()
    }
}
