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
//! Cost: a switch-on is one message to and from every rank that reaches the target through
//! the window (all other ranks with `PGAS_MPI_PSHM=0`), waited for in parallel; cd-runtime
//! switches each rank on once per job.
//!
//! [`WriteCounting::Switched`]: crate::WriteCounting::Switched

use crate::counters::WriteCounting;

use super::calls::must;
use super::state::State;
use super::wire::{Header, K_COUNTING, K_COUNTING_ACK};
use super::world::MpiWorld;

impl MpiWorld {
    /// Switches counting of the writes into this rank's segment on or off
    /// ([`WriteCounting::Switched`] only); on, it returns once every write it will not count
    /// has landed (module doc).
    pub(crate) fn switch_counting(&self, on: bool) {
        let mode = self.write_counting();
        mode.switch(self.counters(), on, self.counting_scope);
        if mode != WriteCounting::Switched || self.rma.is_none() {
            return;
        }
        let writers: Vec<usize> = (0..self.ranks)
            .filter(|&r| r != self.rank && !self.maps(r))
            .collect();
        {
            let mut st = self.st.borrow_mut();
            st.counting_acks = 0;
            for &r in &writers {
                let notice = Header {
                    kind: K_COUNTING,
                    a: u64::from(on),
                    ..Header::default()
                };
                must(self.send_msg(&mut st, r, notice, &[], &[], false));
            }
        }
        if on {
            self.wait_internal(|st| st.counting_acks == writers.len());
            if let Some(w) = &self.rma {
                must(w.sync());
            }
        }
    }

    /// Whether puts to `rank` go through the window now (not mapped, a window job, `rank` not
    /// counting writes); false for a rank that does not exist.
    #[inline]
    pub(super) fn window_puts(&self, rank: usize) -> bool {
        self.window_puts.get(rank).is_some_and(|c| c.get())
    }

    /// Serves a counting notice from `target` (`on` or off): remembers it, and for a
    /// switch-on flushes this rank's window puts to `target` and answers.
    pub(super) fn serve_counting_notice(&self, st: &mut State, target: usize, on: bool) {
        if self.rma.is_some() && !self.maps(target) {
            self.window_puts[target].set(!on);
        }
        if on {
            if let Some(w) = &self.rma
                && w.is_dirty(target)
            {
                must(w.flush(target));
            }
            let answer = Header {
                kind: K_COUNTING_ACK,
                ..Header::default()
            };
            must(self.send_msg(st, target, answer, &[], &[], false));
        }
        st.handled += 1;
    }
}
