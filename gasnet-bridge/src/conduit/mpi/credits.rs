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

#[cfg(test)]
mod tests {
    use super::*;

    /// A sender spends one credit per request and stops at zero; the target owes them back
    /// and says so at half of [`CREDITS`]; the owed ones ride on the next message back, which
    /// refills the sender.
    #[test]
    fn credits_spent_owed_and_returned() {
        let (mut sender, mut target) = (Credits::new(2), Credits::new(2));
        let mut sent = Vec::new();
        while sender.available(1) {
            let mut h = Header::default();
            sender.stamp(&mut h, 1, true);
            assert_ne!(h.flags & F_CREDIT, 0);
            sent.push(h);
        }
        assert_eq!(sent.len(), CREDITS as usize);
        let due: Vec<bool> = sent.iter().map(|h| target.account(0, h)).collect();
        assert_eq!(due.iter().position(|&d| d), Some(CREDITS as usize / 2 - 1));
        let mut back = Header::default();
        target.stamp(&mut back, 0, false);
        assert_eq!(back.credits, CREDITS);
        assert_eq!(back.flags & F_CREDIT, 0, "a reply spends no credit");
        assert!(!sender.account(1, &back));
        assert!(sender.available(1));
        let mut again = Header::default();
        target.stamp(&mut again, 0, false);
        assert_eq!(again.credits, 0, "owed credits go back once");
    }
}
