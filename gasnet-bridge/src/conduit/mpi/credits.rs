//! Flow control on the MPI path: the credits a rank may spend toward each target, and those it
//! owes back to each sender, so a flood from one rank occupies at most [`CREDITS`] messages
//! at its target.

use super::wire::{CREDITS, F_CREDIT, Header};

/// By rank: credits left to spend toward it, and credits owed back to it.
pub(super) struct Credits {
    left: Vec<u32>,
    owed: Vec<u32>,
}

impl Credits {
    /// [`CREDITS`] toward each of `ranks` ranks, none owed.
    pub(super) fn new(ranks: usize) -> Credits {
        Credits {
            left: vec![CREDITS; ranks],
            owed: vec![0; ranks],
        }
    }

    /// Whether a request toward `dest` may spend a credit now.
    #[inline]
    pub(super) fn available(&self, dest: usize) -> bool {
        self.left[dest] > 0
    }

    /// Stamps `h` for `dest`: the credits owed to `dest` ride along, and one is spent if
    /// `spend`.
    #[inline]
    pub(super) fn stamp(&mut self, h: &mut Header, dest: usize, spend: bool) {
        h.credits = std::mem::take(&mut self.owed[dest]);
        if spend {
            h.flags |= F_CREDIT;
            self.left[dest] -= 1;
        }
    }

    /// Takes the credits a message `h` from `source` returns, and owes one back if it spent
    /// one; true when half of [`CREDITS`] are owed, so a credit message should carry them now.
    #[inline]
    pub(super) fn account(&mut self, source: usize, h: &Header) -> bool {
        self.left[source] += h.credits;
        if h.flags & F_CREDIT == 0 {
            return false;
        }
        self.owed[source] += 1;
        self.owed[source] >= CREDITS / 2
    }
}
