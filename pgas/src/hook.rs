//! The interception hook: one trait, installed per rank, that sees every communication and
//! synchronization the rank initiates, like an MPI profiling (PMPI) layer.
//!
//! This is how a resilience layer logs and replays without `pgas` knowing about it: it can
//! observe an operation and its completion (with the target's EC/IWC), answer a get or an rpc
//! from a log instead of the network, or suppress a put or an rpc. With no hook installed the
//! only cost is one predictable branch per operation.

use std::rc::Rc;

use gasnet_bridge::{AtomicOp, AtomicResult, WriteAck};

/// A one-sided transfer: the remote rank, the byte range there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rma {
    /// Target (put) or source (get) rank.
    pub rank: usize,
    /// Byte offset in that rank's segment.
    pub offset: usize,
    /// Number of bytes.
    pub len: usize,
}

/// An rpc leaving this rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcCall {
    /// Target rank.
    pub rank: usize,
    /// Registered name of the function.
    pub name: &'static str,
    /// True for `rpc_ff` (no reply).
    pub fire_and_forget: bool,
}

/// A synchronization this rank takes part in; the EC has already been advanced for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncEvent {
    /// Entering a barrier (EC + 1).
    BarrierEnter,
    /// Leaving a barrier (EC + 1).
    BarrierExit,
    /// A collective other than a barrier, on entry and completion (EC + 1 each).
    Collective,
    /// A fence or flush (EC + 1).
    Fence,
}

/// What to do with a put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutAction {
    /// Send it.
    Proceed,
    /// Do not send it (a replaying rank squashes writes others already received).
    Suppress,
}

/// What to do with a get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetAction {
    /// Read from the network.
    Proceed,
    /// The hook has filled the destination (from a log).
    Served,
}

/// What to do with an rpc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcAction {
    /// Send it.
    Proceed,
    /// Do not send it; an `rpc` then completes with these serialized reply bytes (from a log),
    /// an `rpc_ff` simply completes.
    Served(Vec<u8>),
}

/// What to do with a remote atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicAction {
    /// Perform it.
    Proceed,
    /// Do not perform it; it completes with this result (from a log).
    Served(AtomicResult),
}

/// Sees every operation the rank initiates; every method has a do-nothing default.
pub trait Interceptor {
    /// Before a put's bytes leave.
    fn before_put(&self, rma: &Rma, bytes: &[u8]) -> PutAction {
        let _ = (rma, bytes);
        PutAction::Proceed
    }
    /// After a put completed at the target, with the target's counters for that write.
    fn after_put(&self, rma: &Rma, ack: WriteAck) {
        let _ = (rma, ack);
    }
    /// Before a get; may fill `dst` and return `Served`.
    fn before_get(&self, rma: &Rma, dst: &mut [u8]) -> GetAction {
        let _ = (rma, dst);
        GetAction::Proceed
    }
    /// After a get's bytes arrived.
    fn after_get(&self, rma: &Rma, data: &[u8]) {
        let _ = (rma, data);
    }
    /// Before an rpc leaves, with its serialized arguments.
    fn before_rpc(&self, call: &RpcCall, args: &[u8]) -> RpcAction {
        let _ = (call, args);
        RpcAction::Proceed
    }
    /// After an rpc's reply arrived (`reply` empty for `rpc_ff`), with the target's counters
    /// when it ran the request.
    fn after_rpc(&self, call: &RpcCall, ack: WriteAck, reply: &[u8]) {
        let _ = (call, ack, reply);
    }
    /// Before a remote atomic.
    fn before_atomic(&self, rank: usize, offset: usize, op: AtomicOp) -> AtomicAction {
        let _ = (rank, offset, op);
        AtomicAction::Proceed
    }
    /// After a remote atomic completed.
    fn after_atomic(&self, rank: usize, offset: usize, op: AtomicOp, result: &AtomicResult) {
        let _ = (rank, offset, op, result);
    }
    /// At a synchronization, with this rank's EC after advancing it.
    fn on_sync(&self, sync: SyncEvent, ec: u64) {
        let _ = (sync, ec);
    }
}

/// Installs `hook` on the calling rank (replacing any previous one).
pub fn set_hook(hook: Rc<dyn Interceptor>) {
    crate::runtime::with(|rt| rt.set_hook(Some(hook)));
}

/// Removes the calling rank's hook.
pub fn clear_hook() {
    crate::runtime::with(|rt| rt.set_hook(None));
}
