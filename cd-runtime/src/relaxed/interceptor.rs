//! The pgas [`Interceptor`] of relaxed CDs, installed while a logging relaxed CD (or a
//! dependency-tracking strict CD) runs on the rank and removed after (strict-only programs
//! never get a hook).
//!
//! It is a dispatcher: each `before_*` names the operation's peer, [`select`] picks the one
//! mode that serves it ([`modes`]), and the mode answers. The `after_*` calls complete the
//! log entries forward mode started (acks, replies, fetched bytes); `on_sync` applies the
//! incoming writes of a recovery at each epoch step.

use gasnet_bridge::{AtomicOp, AtomicResult, WriteAck};
use pgas::runtime_hooks::{
    AllocAction, AtomicAction, Collective, CollectiveAction, Fetch, FetchAction, FreeAction,
    GetAction, Interceptor, OpId, PutAction, Rma, RpcAction, RpcCall, SyncEvent,
};

use crate::buddy::Bytes;
use crate::frame::CdKind;
use crate::relaxed::ReplayEvent;
use crate::relaxed::cluster;
use crate::relaxed::limited;
use crate::relaxed::log_store::{EntryKind, TargetCounters};
use crate::relaxed::logging::{complete, log};
use crate::relaxed::modes::Mode;
use crate::relaxed::modes::cluster::ClusterPeer;
use crate::relaxed::modes::forward::Forward;
use crate::relaxed::modes::limited::LimitedMode;
use crate::relaxed::modes::live::Live;
use crate::relaxed::modes::refuse::Refuse;
use crate::relaxed::modes::replay::Replaying;
use crate::relaxed::rank_state::RelaxedHook;
use crate::relaxed::replay::{self, apply_incoming};
use crate::relaxed::{durable, op_fault, phases};
use crate::runtime::{self, CdRuntime};

// The paths `classes.rs` and `shadow.rs` import these by.
pub(crate) use crate::relaxed::logging::logging_frame;
pub(crate) use crate::relaxed::replay::replay_error;

/// What the choice of a mode depends on in an operation.
#[derive(Clone, Copy)]
enum Op {
    /// A put, get, rpc or atomic with this rank (this rank itself: a local access).
    Access(usize),
    /// A `DistObject::fetch` from this rank.
    Fetch(usize),
    /// A collective or a `cd::rng()` draw.
    Unranked,
    /// An allocation.
    Alloc,
}

/// The mode chosen for one operation.
enum Chosen {
    Live,
    Refuse,
    Limited,
    Replay(Replaying),
    Cluster,
    Forward,
}

impl Chosen {
    fn mode(&self) -> &dyn Mode {
        match self {
            Chosen::Live => &Live,
            Chosen::Refuse => &Refuse,
            Chosen::Limited => &LimitedMode,
            Chosen::Replay(r) => r,
            Chosen::Cluster => &ClusterPeer,
            Chosen::Forward => &Forward,
        }
    }
}

/// Picks the mode that serves `op`, first match wins: an access to this rank's own memory
/// is live; an rpc function the replay runs again refuses; a limited re-execution serves
/// the operations with ranks outside it (and lets those with ranks inside it run live);
/// an access to another rank of this rank's SPBC cluster is not logged; a replay serves the
/// next logged entry (the replay switches to forward mode when its log ran out); otherwise
/// forward mode logs.
fn select(rt: &CdRuntime, op: Op) -> Chosen {
    if matches!(op, Op::Access(rank) if rank == rt.rank) {
        return Chosen::Live;
    }
    if rt.relaxed.rerunning.borrow().is_some() {
        return Chosen::Refuse;
    }
    match op {
        Op::Access(rank) | Op::Fetch(rank) => {
            if let Some(live) = limited::peer_live(rt, rank) {
                return if live { Chosen::Live } else { Chosen::Limited };
            }
        }
        Op::Unranked => {
            if limited::active(rt) {
                return Chosen::Limited;
            }
        }
        // A limited re-execution's allocations are live: a relaxed CD replaying inside one
        // still serves them from its own log.
        Op::Alloc => {}
    }
    if let Op::Access(rank) | Op::Fetch(rank) = op {
        if cluster::same(rt, rank) {
            return Chosen::Cluster;
        }
    }
    match replay::next_entry(rt) {
        Some(entry) => Chosen::Replay(Replaying { entry }),
        None => Chosen::Forward,
    }
}

/// `select` for a point-to-point operation with `rank`: before an operation forward mode
/// takes, the results that arrived since the last flush reach the buddy (`durable.rs`); then
/// it is counted for the faults that strike at an operation (`op_fault.rs`), and may be one.
fn select_counted(rt: &CdRuntime, rank: usize) -> Chosen {
    let chosen = select(rt, Op::Access(rank));
    if matches!(chosen, Chosen::Forward) {
        durable::before_op(rt);
        op_fault::count(rt);
    }
    chosen
}

fn counters(ack: WriteAck) -> TargetCounters {
    TargetCounters {
        ec: ack.ec,
        iwc: ack.iwc,
    }
}

/// A write into this rank by this rank: no initiator's log will hold it, remember its IWC.
fn own_write(rt: &CdRuntime, ack: WriteAck) {
    if let Some(r) = rt.relaxed.replay.borrow_mut().as_mut() {
        if !r.forward {
            r.own_during += 1;
        }
    }
    if rt.relaxed.trace.borrow().is_some() {
        // Recovering: the incoming writes of this epoch that landed after it in the first
        // execution may be applied now.
        rt.relaxed.incoming.borrow_mut().own_redone();
        apply_incoming(rt, Some(pgas::runtime_hooks::epoch()));
    }
    if let Some(frame) = logging_frame(rt) {
        frame.rx.borrow_mut().own_iwcs.push(ack.iwc);
    }
    // Its IWC reaches the buddy before the next operation: a replay after a loss must know it.
    durable::effect_done(rt);
}

impl Interceptor for RelaxedHook {
    /// Refused: viewable memory is private to its owner under a relaxed CD (preserved, not
    /// logged), and a replay would not know of a write into another rank's.
    fn allows_view_put(&self, _owner: usize) -> bool {
        false
    }

    fn before_put(&self, id: OpId, rma: &Rma, bytes: &[u8]) -> PutAction {
        runtime::with(|rt| select_counted(rt, rma.rank).mode().put(rt, id, rma, bytes))
    }

    fn after_put(&self, id: OpId, rma: &Rma, ack: WriteAck) {
        runtime::with(|rt| {
            if rma.rank == rt.rank {
                own_write(rt, ack);
                return;
            }
            cluster::acked(rt, id.0, rma.rank, ack);
            complete(rt, id.0, |k| {
                if let EntryKind::Write { counters: c, .. } = k {
                    *c = Some(counters(ack));
                }
            });
        })
    }

    fn before_get(&self, id: OpId, rma: &Rma, dst: &mut [u8]) -> GetAction {
        runtime::with(|rt| select_counted(rt, rma.rank).mode().get(rt, id, rma, dst))
    }

    fn after_get(&self, id: OpId, rma: &Rma, data: &[u8]) {
        runtime::with(|rt| {
            if rma.rank == rt.rank {
                return;
            }
            complete(rt, id.0, |k| {
                if let EntryKind::Read { bytes, .. } = k {
                    bytes.0 = data.to_vec();
                }
            });
        })
    }

    fn before_rpc(&self, id: OpId, call: &RpcCall, args: &[u8]) -> RpcAction {
        runtime::with(|rt| select_counted(rt, call.rank).mode().rpc(rt, id, call, args))
    }

    fn after_rpc(&self, id: OpId, call: &RpcCall, ack: WriteAck, reply: &[u8]) {
        runtime::with(|rt| {
            if call.rank == rt.rank {
                own_write(rt, ack);
                return;
            }
            cluster::acked(rt, id.0, call.rank, ack);
            complete(rt, id.0, |k| {
                if let EntryKind::Rpc {
                    reply: r,
                    counters: c,
                    ..
                } = k
                {
                    *r = Some(Bytes(reply.to_vec()));
                    *c = Some(counters(ack));
                }
            });
            durable::effect_done(rt);
        })
    }

    fn before_atomic(&self, id: OpId, rank: usize, offset: usize, op: AtomicOp) -> AtomicAction {
        runtime::with(|rt| {
            select_counted(rt, rank)
                .mode()
                .atomic(rt, id, rank, offset, op)
        })
    }

    fn after_atomic(
        &self,
        id: OpId,
        rank: usize,
        _offset: usize,
        _op: AtomicOp,
        result: &AtomicResult,
    ) {
        runtime::with(|rt| {
            if rank == rt.rank {
                if let Some(ack) = result.ack {
                    own_write(rt, ack);
                }
                return;
            }
            if let Some(ack) = result.ack {
                cluster::acked(rt, id.0, rank, ack);
            }
            complete(rt, id.0, |k| {
                if let EntryKind::Atomic {
                    previous,
                    counters: c,
                    done,
                    ..
                } = k
                {
                    *previous = Some(result.previous);
                    *c = result.ack.map(counters);
                    *done = true;
                }
            });
            if result.ack.is_some() {
                durable::effect_done(rt);
            }
        })
    }

    fn before_fetch(&self, id: OpId, fetch: &Fetch) -> FetchAction {
        runtime::with(|rt| {
            select(rt, Op::Fetch(fetch.rank))
                .mode()
                .fetch(rt, id, fetch)
        })
    }

    fn after_fetch(&self, id: OpId, _fetch: &Fetch, bytes: &[u8]) {
        runtime::with(|rt| {
            complete(rt, id.0, |k| {
                if let EntryKind::Fetch { bytes: b, .. } = k {
                    *b = Some(Bytes(bytes.to_vec()));
                }
            });
        })
    }

    fn before_collective(&self, id: OpId, collective: &Collective) -> CollectiveAction {
        runtime::with(|rt| {
            select(rt, Op::Unranked)
                .mode()
                .collective(rt, id, collective)
        })
    }

    fn after_collective(&self, id: OpId, _collective: &Collective, result: &[u8]) {
        runtime::with(|rt| {
            complete(rt, id.0, |k| {
                if let EntryKind::Collective { result: r, .. } = k {
                    *r = Some(Bytes(result.to_vec()));
                }
            });
            durable::effect_done(rt);
        })
    }

    fn before_alloc(&self, size: usize, _align: usize) -> AllocAction {
        runtime::with(|rt| select(rt, Op::Alloc).mode().alloc(rt, size))
    }

    fn after_alloc(&self, offset: usize, size: usize) {
        runtime::with(|rt| {
            // A mode that served the allocation (or refused it) logs nothing.
            if rt.relaxed.alloc_served.replace(false) {
                return;
            }
            log(rt, 0, EntryKind::Alloc { offset, size });
        })
    }

    fn before_free(&self, offset: usize, _size: usize) -> FreeAction {
        // Deferred to the completion of the CD spanning allocation and free (the LCSA at
        // the latest), so a re-execution gets the same addresses from the allocation log.
        runtime::with(|rt| {
            // Remembered by the CD: its re-execution (or the LCSA's) frees the block again.
            if let Some(f) = rt
                .frames
                .borrow()
                .iter()
                .rev()
                .find(|f| f.kind == CdKind::Relaxed)
            {
                f.rx.borrow_mut().deferred.push(offset);
            }
            rt.lcsa().rx.borrow_mut().had_relaxed = true;
        });
        FreeAction::Defer
    }

    fn on_sync(&self, sync: SyncEvent, ec: u64) {
        runtime::with(|rt| {
            durable::on_sync(rt, sync);
            if sync == SyncEvent::BarrierExit {
                phases::barrier_left(rt, ec);
            }
            let recovering = rt.relaxed.trace.borrow().is_some();
            if !recovering {
                return;
            }
            rt.relaxed.event(ReplayEvent::Epoch(ec));
            apply_incoming(rt, Some(ec));
        })
    }
}

/// A `cd::rng()` draw inside a logging relaxed CD: served by the mode chosen for it.
pub(crate) fn rng_draw(rt: &CdRuntime, dst: &mut [u8], draw: impl FnOnce(&mut [u8])) {
    let mut draw = Some(draw);
    select(rt, Op::Unranked)
        .mode()
        .rng(rt, dst, &mut |d: &mut [u8]| {
            if let Some(draw) = draw.take() {
                draw(d);
            }
        });
}
