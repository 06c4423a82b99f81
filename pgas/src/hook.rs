//! The interception hook: one trait, installed per rank (`runtime_hooks::set_hook`), that sees every communication and
//! synchronization the rank initiates, like an MPI profiling (PMPI) layer.
//!
//! This is how a resilience layer logs and replays without `pgas` knowing about it: it can
//! observe an operation and its completion (with the target's EC/IWC), answer a get, a fetch,
//! an rpc or a collective from a log instead of the network, suppress a put or an rpc reply,
//! replay logged allocation addresses and defer frees. With no hook installed the only cost
//! is one predictable branch per operation. The acks carry the target's counters only in a
//! job that counts writes (`gasnet_bridge::WriteCounting::On`, or `Switched` at a target that
//! switched counting on); otherwise they are `WriteAck::UNCOUNTED`.
//!
//! # What the hook sees
//!
//! | operation | methods |
//! |---|---|
//! | `rput*` (scalar, slice, `rput_with`; each contiguous run of `rput_strided`, each destination piece of `rput_irregular` / `rput_regular`, though they travel as one message) | `before_put`, `after_put` |
//! | `rget*` (scalar, slice, `rget_into`, `rget_with`; each run of `rget_strided`, each source piece of `rget_irregular` / `rget_regular`) | `before_get`, `after_get` |
//! | `rpc`, `rpc_ff` (and `Completions::remote_rpc`) | `before_rpc`, `after_rpc` |
//! | the reply an rpc function (or a dist_object fetch) sends back from this rank | `before_reply` |
//! | `AtomicDomain` operations (each remote atomic of an `f64` update loop) | `before_atomic`, `after_atomic` |
//! | `DistObject::fetch` of another rank's instance | `before_fetch`, `after_fetch` |
//! | `barrier`, `barrier_on`, `barrier_async`, `broadcast`, `reduce_one`, `reduce_all`, `reduce_all_u64`, `allgather`, `Team::split` | `before_collective`, `after_collective`, and `on_sync` for its EC steps |
//! | `fence` | `on_sync` |
//! | the `*_sync` atomics of [`AtomicDomain`](crate::AtomicDomain), [`wait_until`](crate::wait_until), [`put_signal`](crate::put_signal), [`DistLock`](crate::DistLock) acquire and release | `on_sync` (and the atomics and put they are made of, as above) |
//! | `new_`, `new_array`; `delete_` | `before_alloc`, `after_alloc`; `before_free` |
//!
//! **Collectives** are seen as a whole, not as the messages they are built from: a replaying rank
//! needs the collective's *result*, which a relaxed-CD log keeps as a read entry while the
//! collective's synchronization steps the EC (docs/relaxed-cds.md). `after_collective` gets the
//! postcard encoding of the value the collective returns on this rank (see [`CollectiveKind`]);
//! `before_collective` may return those bytes instead, and the rank then takes no part in the
//! collective at all (it sends nothing, uses no sequence number, waits for no one) while its EC
//! still steps as usual.
//!
//! **Completion is not return.** Every operation started with a hook gets an [`OpId`]; the
//! `before_*` and `after_*` calls of one operation get the same id. `after_put` (the write's ack,
//! with the target's EC and IWC) and `after_rpc` may run after the call that started the operation
//! returned — from [`progress`](crate::progress) or any waiting call — and in any order with
//! respect to other operations: a log entry is created at `before_*` and completed at `after_*`.
//! (Into memory the process maps a put's ack arrives before `rput` returns; a put to another host
//! is acknowledged later; rpc acks arrive with the reply.)
//! [`pending_acks`](crate::runtime_hooks::pending_acks) counts the acks still to come.
//!
//! **Not seen**: accesses to co-located memory through `local()` / `read_local` /
//! `write_local` (local accesses are never logged), the messages inside collectives, and all
//! traffic of a resilience runtime's own scope ([`internal`](crate::runtime_hooks::internal)).

use gasnet_bridge::{AtomicOp, AtomicResult, WriteAck};

/// Names one operation this rank started while a hook was installed; the operation's
/// `before_*` and `after_*` calls get the same id. Ids increase by one per operation, in the
/// order the rank started them (program order), and are never reused within a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u64);

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

/// A reply leaving this rank: the result of an rpc function that ran here, or this rank's
/// instance answering a `DistObject::fetch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcReply {
    /// The rank that made the request (where the reply goes).
    pub rank: usize,
    /// Registered name of the rpc function, or [`RpcReply::DIST_FETCH`].
    pub name: &'static str,
}

impl RpcReply {
    /// The `name` of a reply to a `DistObject::fetch`.
    pub const DIST_FETCH: &'static str = "pgas.dist_object.fetch";
}

/// A `DistObject::fetch` of another rank's instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetch {
    /// The rank whose instance is read.
    pub rank: usize,
    /// The object's id ([`crate::DistObject::id`]).
    pub object: u64,
}

/// Which collective, and what its result bytes are: the postcard encoding of the value the
/// call returns on this rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectiveKind {
    /// `barrier`, `barrier_on`, `barrier_async`: empty result. EC steps are `BarrierEnter` /
    /// `BarrierExit`; every other collective steps `Collective` on entry and at completion.
    Barrier,
    /// `broadcast` from team rank `root`: the `T` every member gets.
    Broadcast {
        /// Team rank of the root.
        root: usize,
    },
    /// `reduce_one` to team rank `root`: the `Option<T>` (`Some` at the root).
    ReduceOne {
        /// Team rank of the root.
        root: usize,
    },
    /// `reduce_all`: the `T`.
    ReduceAll,
    /// `reduce_all_u64`: the `u64`.
    ReduceAllU64,
    /// `allgather`: the `Vec<T>`.
    Allgather,
    /// `Team::split`: `(u64, Vec<(u64, u64)>)`, the operation's sequence number on the parent
    /// team and every member's `(color, key)` in team order (what the new team is made from).
    Split,
}

/// A collective this rank takes part in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collective {
    /// Which one.
    pub kind: CollectiveKind,
    /// The team's id ([`crate::Team::id`]).
    pub team: u64,
    /// This rank's index in the team.
    pub team_rank: usize,
    /// Number of members.
    pub team_size: usize,
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
    /// Before a synchronizing atomic with release semantics leaves (EC + 1): writes into
    /// this rank that the atomic lets others make land in a later epoch than this rank's
    /// accesses before it.
    AtomicRelease,
    /// After a synchronizing atomic with acquire semantics returned (EC + 1).
    AtomicAcquire,
    /// After [`wait_until`](crate::wait_until) saw its flag hold (EC + 1).
    FlagWait,
    /// Before [`put_signal`](crate::put_signal) puts its data and updates its flag (EC + 1).
    Signal,
    /// After a [`DistLock`](crate::DistLock) was acquired (EC + 1).
    LockAcquire,
    /// Before a [`DistLock`](crate::DistLock) is released (EC + 1).
    LockRelease,
}

/// What to do with a put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutAction {
    /// Send it.
    Proceed,
    /// Do not send it (a replaying rank squashes writes others already received); no
    /// `after_put` follows.
    Suppress,
}

/// What to do with a get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetAction {
    /// Read from the network.
    Proceed,
    /// The hook has filled the destination (from a log); no `after_get` follows.
    Served,
}

/// What to do with an rpc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcAction {
    /// Send it.
    Proceed,
    /// Do not send it; an `rpc` then completes with these serialized reply bytes (from a log),
    /// an `rpc_ff` simply completes. No `after_rpc` follows.
    Served(Vec<u8>),
}

/// What to do with a reply this rank is about to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyAction {
    /// Send it.
    Proceed,
    /// Do not send it (a replaying rank re-runs an rpc whose initiator already has the
    /// reply). The initiator's rpc then never completes: only for requests it answered before.
    Suppress,
}

/// What to do with a remote atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicAction {
    /// Perform it.
    Proceed,
    /// Do not perform it; it completes with this result (from a log). No `after_atomic`
    /// follows.
    Served(AtomicResult),
}

/// What to do with a `DistObject::fetch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchAction {
    /// Ask the owner.
    Proceed,
    /// Do not ask; the fetch completes with these bytes (the postcard encoding of the
    /// instance, from a log). No `after_fetch` follows.
    Served(Vec<u8>),
}

/// What to do with a collective.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CollectiveAction {
    /// Take part in it.
    Proceed,
    /// Take no part; the call returns the value these bytes encode (see [`CollectiveKind`]).
    /// The EC still steps as for a real one. No `after_collective` follows.
    Served(Vec<u8>),
}

/// Where an allocation goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocAction {
    /// Wherever the allocator chooses.
    Proceed,
    /// At this byte offset of the rank's segment (a replaying rank gets the logged address
    /// back). It must be the start of a free range of the requested size and alignment;
    /// otherwise `new_` / `new_array` fail with [`crate::PgasError::ReplayAlloc`].
    At(usize),
}

/// What to do with a `delete_`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreeAction {
    /// Free the block now.
    Proceed,
    /// Keep the block allocated until [`free_deferred`](crate::runtime_hooks::free_deferred)
    /// frees it (a free inside a relaxed CD waits for the CD that spans the allocation and the
    /// free).
    /// `delete_` returns `Ok`.
    Defer,
}

/// Sees every operation the rank initiates; every method has a do-nothing default.
pub trait Interceptor {
    /// Before a put's bytes leave: the log entry of a write starts here.
    fn before_put(&self, id: OpId, rma: &Rma, bytes: &[u8]) -> PutAction {
        let _ = (id, rma, bytes);
        PutAction::Proceed
    }
    /// When the put's ack arrived, with the target's counters for that write: the write's log
    /// entry is completed here. May run after the put's call returned.
    fn after_put(&self, id: OpId, rma: &Rma, ack: WriteAck) {
        let _ = (id, rma, ack);
    }
    /// Before a get; may fill `dst` and return `Served`.
    fn before_get(&self, id: OpId, rma: &Rma, dst: &mut [u8]) -> GetAction {
        let _ = (id, rma, dst);
        GetAction::Proceed
    }
    /// After a get's bytes arrived.
    fn after_get(&self, id: OpId, rma: &Rma, data: &[u8]) {
        let _ = (id, rma, data);
    }
    /// Before an rpc leaves, with its serialized arguments.
    fn before_rpc(&self, id: OpId, call: &RpcCall, args: &[u8]) -> RpcAction {
        let _ = (id, call, args);
        RpcAction::Proceed
    }
    /// After an rpc's reply arrived (`reply` empty for `rpc_ff`), with the target's counters
    /// when it ran the request. Runs from progress, after the `rpc` call returned.
    fn after_rpc(&self, id: OpId, call: &RpcCall, ack: WriteAck, reply: &[u8]) {
        let _ = (id, call, ack, reply);
    }
    /// Before this rank sends a reply (the serialized result of an rpc function that ran
    /// here, empty for an `rpc_ff` acknowledgement; or a dist_object's bytes).
    fn before_reply(&self, reply: &RpcReply, bytes: &[u8]) -> ReplyAction {
        let _ = (reply, bytes);
        ReplyAction::Proceed
    }
    /// Before a remote atomic.
    fn before_atomic(&self, id: OpId, rank: usize, offset: usize, op: AtomicOp) -> AtomicAction {
        let _ = (id, rank, offset, op);
        AtomicAction::Proceed
    }
    /// After a remote atomic completed (`result.ack` is set when it wrote).
    fn after_atomic(
        &self,
        id: OpId,
        rank: usize,
        offset: usize,
        op: AtomicOp,
        result: &AtomicResult,
    ) {
        let _ = (id, rank, offset, op, result);
    }
    /// Before a `DistObject::fetch` of another rank's instance.
    fn before_fetch(&self, id: OpId, fetch: &Fetch) -> FetchAction {
        let _ = (id, fetch);
        FetchAction::Proceed
    }
    /// After the fetched instance arrived, with its postcard bytes.
    fn after_fetch(&self, id: OpId, fetch: &Fetch, bytes: &[u8]) {
        let _ = (id, fetch, bytes);
    }
    /// On entering a collective (after its entry EC step).
    fn before_collective(&self, id: OpId, collective: &Collective) -> CollectiveAction {
        let _ = (id, collective);
        CollectiveAction::Proceed
    }
    /// When the collective completed on this rank, with the encoded result (before its
    /// completion EC step). May run after the call returned (`barrier_async`, futures).
    fn after_collective(&self, id: OpId, collective: &Collective, result: &[u8]) {
        let _ = (id, collective, result);
    }
    /// Before an allocation of `size` bytes aligned to `align` in this rank's segment.
    fn before_alloc(&self, size: usize, align: usize) -> AllocAction {
        let _ = (size, align);
        AllocAction::Proceed
    }
    /// After an allocation succeeded, with its offset in this rank's segment.
    fn after_alloc(&self, offset: usize, size: usize) {
        let _ = (offset, size);
    }
    /// Before a live block of this rank (`offset`, `size` bytes) is freed by `delete_`.
    fn before_free(&self, offset: usize, size: usize) -> FreeAction {
        let _ = (offset, size);
        FreeAction::Proceed
    }
    /// Whether a `view_put` into another rank's viewable memory may go ahead: a hook that
    /// logs writes for a replay refuses it, since view accesses are not logged.
    fn allows_view_put(&self, owner: usize) -> bool {
        let _ = owner;
        true
    }
    /// At a synchronization, with this rank's EC after advancing it.
    fn on_sync(&self, sync: SyncEvent, ec: u64) {
        let _ = (sync, ec);
    }
}

/// The program's rpc request whose function is running on this rank: its sender and the
/// counters this rank gave it (the ack the sender logs, so `iwc` names the request there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedRequest {
    /// The rank that sent the request.
    pub source: usize,
    /// This rank's EC when the request was counted.
    pub ec: u64,
    /// This rank's IWC after counting the request (0 in a job that does not count writes).
    pub iwc: u64,
}
