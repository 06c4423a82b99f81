//! The incoming writes a recovery gathered from the initiators' logs, and the queue of those
//! still to apply in (EC, IWC) order, each after the rank's own writes that landed before it.
//! Data only: applying them is `epochs.rs`'s.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::buddy::Bytes;
use crate::relaxed::log_store::LoggedOp;

/// What an incoming write did to this rank's memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IncomingWhat {
    /// A put of these bytes at this offset.
    Put {
        /// Byte offset in the target's segment.
        offset: usize,
        /// The bytes.
        bytes: Bytes,
    },
    /// A remote atomic that wrote the word at this offset.
    Atomic {
        /// Byte offset of the word.
        offset: usize,
        /// The operation.
        op: LoggedOp,
    },
    /// An rpc request the target ran (counted like a write), re-run from its arguments.
    Rpc {
        /// The function's registered name.
        name: String,
        /// Its serialized arguments.
        args: Bytes,
        /// The serialized result the initiator got back (`None` for `rpc_ff`: none came).
        reply: Option<Bytes>,
    },
    /// A write from a rank of this rank's SPBC cluster, not logged: only its IWC is known, so
    /// only a re-execution of the cluster makes it again (`cluster.rs`).
    Unlogged {
        /// The word and operation of a writing atomic (`None`: a put or an rpc request).
        atomic: Option<(usize, LoggedOp)>,
    },
}

impl IncomingWhat {
    /// The word and operation of a combining atomic (logged or not), which a recovery must not
    /// apply on top of a copy that holds it.
    pub(crate) fn combining(&self) -> Option<(usize, LoggedOp)> {
        match self {
            IncomingWhat::Atomic { offset, op }
            | IncomingWhat::Unlogged {
                atomic: Some((offset, op)),
            } if op.is_combining() => Some((*offset, *op)),
            _ => None,
        }
    }
}

/// One write into the recovering rank, from its initiator's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Incoming {
    /// The initiator.
    pub from: usize,
    /// The target's EC when it landed.
    pub ec: u64,
    /// The target's IWC after counting it.
    pub iwc: u64,
    /// What it wrote.
    pub what: IncomingWhat,
}

/// The gathered incoming writes still to apply, in (EC, IWC) order.
///
/// Within an epoch, a write that landed after one of the rank's own writes (a lock's home
/// freeing its own word, then another rank's compare-exchange taking it) must be applied
/// after the re-executed body made that own write again: the queue holds it back until the
/// own writes with a lower IWC in the first execution are redone ([`Self::own_redone`]).
#[derive(Debug, Default)]
pub struct IncomingQueue {
    items: VecDeque<Incoming>,
    /// The IWCs of the rank's own writes of the first execution not redone yet, ascending.
    own: VecDeque<u64>,
}

impl IncomingQueue {
    /// A queue of `items`, sorted by (EC, IWC).
    pub fn new(items: Vec<Incoming>) -> IncomingQueue {
        IncomingQueue::with_own(items, Vec::new())
    }

    /// A queue of `items` applied in order with the own writes that had the IWCs `own` in the
    /// first execution.
    pub fn with_own(mut items: Vec<Incoming>, mut own: Vec<u64>) -> IncomingQueue {
        items.sort_by_key(|i| (i.ec, i.iwc));
        own.sort_unstable();
        IncomingQueue {
            items: items.into(),
            own: own.into(),
        }
    }

    /// The re-executed body made its next own write again.
    pub fn own_redone(&mut self) {
        self.own.pop_front();
    }

    /// True when every write was applied.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Removes and returns the writes of epochs up to `ec` that landed before the next own
    /// write not redone yet, in order.
    pub fn take_through(&mut self, ec: u64) -> Vec<Incoming> {
        let before = self.own.front().copied().unwrap_or(u64::MAX);
        let mut out = Vec::new();
        while self
            .items
            .front()
            .is_some_and(|i| i.ec <= ec && i.iwc < before)
        {
            out.extend(self.items.pop_front());
        }
        out
    }

    /// Removes and returns every write left.
    pub fn take_all(&mut self) -> Vec<Incoming> {
        self.items.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(ec: u64, iwc: u64) -> Incoming {
        Incoming {
            from: 1,
            ec,
            iwc,
            what: IncomingWhat::Put {
                offset: 0,
                bytes: Bytes(vec![0]),
            },
        }
    }

    fn iwcs(w: &[Incoming]) -> Vec<u64> {
        w.iter().map(|w| w.iwc).collect()
    }

    #[test]
    fn a_write_after_an_own_write_waits_for_it_to_be_redone() {
        // Own writes had IWCs 2 and 5; incoming writes 1, 3, 4 (epoch 6) and 6 (epoch 7).
        let mut q =
            IncomingQueue::with_own(vec![put(7, 6), put(6, 4), put(6, 1), put(6, 3)], vec![5, 2]);
        assert_eq!(iwcs(&q.take_through(6)), [1]);
        q.own_redone();
        assert_eq!(iwcs(&q.take_through(6)), [3, 4]);
        q.own_redone();
        assert_eq!(iwcs(&q.take_through(6)), Vec::<u64>::new());
        assert_eq!(iwcs(&q.take_through(7)), [6]);
        assert!(q.is_empty());
    }

    #[test]
    fn without_own_writes_an_epoch_is_applied_whole() {
        let mut q = IncomingQueue::new(vec![put(2, 3), put(1, 1), put(2, 2)]);
        assert_eq!(iwcs(&q.take_through(1)), [1]);
        assert_eq!(iwcs(&q.take_through(2)), [2, 3]);
    }

    #[test]
    fn own_writes_never_redone_hold_nothing_back_at_the_end() {
        let mut q = IncomingQueue::with_own(vec![put(1, 2)], vec![1]);
        assert!(q.take_through(1).is_empty());
        assert_eq!(iwcs(&q.take_all()), [2]);
    }
}
