//! The incoming writes a recovery gathered from the initiators' logs, and the queue of those
//! still to apply in (EC, IWC) order. Data only: applying them is `epochs.rs`'s.

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
#[derive(Debug, Default)]
pub struct IncomingQueue {
    items: VecDeque<Incoming>,
}

impl IncomingQueue {
    /// A queue of `items`, sorted by (EC, IWC).
    pub fn new(mut items: Vec<Incoming>) -> IncomingQueue {
        items.sort_by_key(|i| (i.ec, i.iwc));
        IncomingQueue {
            items: items.into(),
        }
    }

    /// True when every write was applied.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Removes and returns the writes of epochs up to `ec`, in order.
    pub fn take_through(&mut self, ec: u64) -> Vec<Incoming> {
        let mut out = Vec::new();
        while self.items.front().is_some_and(|i| i.ec <= ec) {
            out.extend(self.items.pop_front());
        }
        out
    }

    /// Removes and returns every write left.
    pub fn take_all(&mut self) -> Vec<Incoming> {
        self.items.drain(..).collect()
    }
}
