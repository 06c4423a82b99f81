//! A target's switch of counting across processes (the protocol is told in `counting.rs`):
//! the switch, then a notice to every rank that reaches it through the window, waited for
//! when on. A writer serves a notice in `receive.rs`.
//!
//! This is `impl MpiWorld` because it spans the parts and waits: the own counters (kept), the
//! counting switch, the send queue, progress while the answers are due, then the window.

use crate::counters::WriteCounting;

use super::calls::must;
use super::wire::{Header, K_COUNTING};
use super::world::MpiWorld;

impl MpiWorld {
    /// Switches counting of the writes into this rank's segment on or off
    /// ([`WriteCounting::Switched`] only); on, it returns once every write it will not count
    /// has landed (`counting.rs`).
    pub(crate) fn switch_counting(&self, on: bool) {
        let mode = self.write_counting();
        mode.switch(self.counters(), on, self.job.counting.scope());
        if mode != WriteCounting::Switched || self.job.rma.is_none() {
            return;
        }
        let writers: Vec<usize> = (0..self.kept.ranks)
            .filter(|&r| r != self.kept.rank && !self.maps(r))
            .collect();
        {
            let mut st = self.job.st.borrow_mut();
            self.job.counting.expect_answers();
            for &r in &writers {
                let notice = Header {
                    kind: K_COUNTING,
                    a: u64::from(on),
                    ..Header::default()
                };
                must(st.send(self.job.comm, r, notice, &[], &[], false));
            }
        }
        if on {
            self.wait_internal(|_| self.job.counting.answers() == writers.len());
            if let Some(w) = &self.job.rma {
                must(w.sync());
            }
        }
    }
}
