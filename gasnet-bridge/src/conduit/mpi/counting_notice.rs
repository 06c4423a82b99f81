//! The notices of the counting switch across processes (the protocol is told in
//! `counting.rs`): a target's switch-on or off sent to every rank that reaches it through the
//! window, and a writer's service of one.
//!
//! These are `impl MpiWorld` because each spans the parts: the own counters (kept), the
//! counting switch, the RMA window it flushes, the send queue, and progress while the answers
//! are due.

use crate::counters::WriteCounting;

use super::calls::must;
use super::state::Protocol;
use super::wire::{Header, K_COUNTING, K_COUNTING_ACK};
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

    /// Serves a counting notice from `target` (`on` or off): remembers it, and for a
    /// switch-on flushes this rank's window puts to `target` and answers.
    pub(super) fn serve_counting_notice(&self, st: &mut Protocol, target: usize, on: bool) {
        if self.job.rma.is_some() && !self.maps(target) {
            self.job.counting.noticed(target, on);
        }
        if on {
            if let Some(w) = &self.job.rma
                && w.is_dirty(target)
            {
                must(w.flush(target));
            }
            let answer = Header {
                kind: K_COUNTING_ACK,
                ..Header::default()
            };
            must(st.send(self.job.comm, target, answer, &[], &[], false));
        }
        st.handled += 1;
    }
}
