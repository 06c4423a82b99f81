//! What the conduit keeps per rank between calls: posted receives, credits, sends and payloads
//! in flight, user AMs waiting to run, and operations waiting for their reply.

use std::collections::{HashMap, VecDeque};

use ::mpi::ffi;

use crate::atomic::AtomicResult;
use crate::counters::WriteAck;
use crate::message::Message;

/// One pre-posted receive.
pub(super) struct Slot {
    pub(super) req: ffi::MPI_Request,
    pub(super) buf: Box<[u8]>,
}

/// A payload still arriving, and what to do when it has.
pub(super) enum Inflight {
    /// A put's bytes into this segment: count (unless `counted` is false), then ack `id` to
    /// `origin`.
    Put {
        req: ffi::MPI_Request,
        origin: usize,
        id: u64,
        counted: bool,
    },
    /// A long AM's bytes into this segment: count, ack, then its handler may run.
    Long {
        req: ffi::MPI_Request,
        origin: usize,
        id: u64,
        key: u64,
    },
    /// The piece list (and, for a put, the packed bytes) of a vector put or get from
    /// `origin` into `buf`: then scatter, count and ack `id`, or gather and send the data.
    Vector {
        req: ffi::MPI_Request,
        buf: Vec<u8>,
        origin: usize,
        id: u64,
        pieces: usize,
        groups: usize,
        put: bool,
    },
    /// The data of this rank's non-blocking get `id`, arriving into `buf`.
    GetReply {
        req: ffi::MPI_Request,
        buf: Vec<u8>,
        id: u64,
    },
    /// A medium AM's bytes into `buf`.
    Medium {
        req: ffi::MPI_Request,
        buf: Vec<u8>,
        key: u64,
    },
}

pub(super) enum Ready {
    Medium(Vec<u8>),
    Long(WriteAck),
}

/// A user AM taken off the wire, waiting to run in order; `wait` names its payload if that is
/// still arriving.
pub(super) struct Deferred {
    pub(super) message: Message,
    pub(super) wait: Option<u64>,
}

/// This rank's part of a barrier.
pub(super) enum BarrierState {
    Idle,
    /// Notified: the `MPI_Ibarrier` waits until every write this rank sent as a message is
    /// acknowledged, so that when the barrier completes, every rank's writes have landed.
    Draining,
    Posted(ffi::MPI_Request),
}

/// Completion of an operation this rank started.
pub(super) enum Op {
    Waiting,
    Ack(WriteAck),
    Atomic(AtomicResult),
    /// The data of a non-blocking get.
    Got(Vec<u8>),
}

pub(super) struct State {
    pub(super) slots: Vec<Slot>,
    /// The slot whose receive was posted first among those still posted (MPI matches
    /// receives in posting order, so it completes first).
    pub(super) head: usize,
    /// Slots taken off the wire whose receive is not posted again yet: the `unposted` slots
    /// just before `head`, in ring order. The next round posts them before its test, so a
    /// reply goes out before its slot is posted again.
    pub(super) unposted: usize,
    /// Message buffers of completed sends, reused for the next ones (at most [`SLOTS`]).
    pub(super) spare: Vec<Vec<u8>>,
    pub(super) credits: Vec<u32>,
    pub(super) to_return: Vec<u32>,
    /// Sends not yet complete, with the buffer they read from (empty for segment memory).
    pub(super) sends: Vec<(ffi::MPI_Request, Vec<u8>)>,
    /// Receives into conduit buffers whose blocking call ended early (`lent.rs`): freed
    /// when MPI completes them, never before.
    pub(super) abandoned: Vec<(ffi::MPI_Request, Vec<u8>)>,
    pub(super) inflight: Vec<Inflight>,
    pub(super) ready: HashMap<u64, Ready>,
    pub(super) next_key: u64,
    pub(super) deferred: VecDeque<Deferred>,
    pub(super) ops: HashMap<u64, Op>,
    pub(super) next_op: u64,
    /// Messages sent on `TAG_MSG` (and to itself), and messages fully handled.
    pub(super) sent: u64,
    pub(super) handled: u64,
    /// Where this rank's split-phase barrier stands.
    pub(super) barrier: BarrierState,
    /// Acknowledgements this rank still awaits for the writes it sent as messages (puts,
    /// vector puts, long AMs), forgotten ones included: a barrier waits for them.
    pub(super) acks_due: u64,
    pub(super) tick: u32,
    /// Answers ([`K_COUNTING_ACK`](super::wire::K_COUNTING_ACK)) to this rank's latest
    /// switch-on notices.
    pub(super) counting_acks: usize,
}
