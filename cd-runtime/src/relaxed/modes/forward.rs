//! Forward mode: the operation is performed, and logged in the innermost logging relaxed
//! CD's store (`logging.rs`; the hook completes the entry when the operation's ack, reply
//! or bytes arrive). Remote accesses of a CD that checks its classes are checked first.

use gasnet_bridge::AtomicOp;
use pgas::runtime_hooks::{
    AllocAction, AtomicAction, Collective, CollectiveAction, CollectiveKind, Fetch, FetchAction,
    GetAction, OpId, PutAction, Rma, RpcAction, RpcCall,
};

use crate::buddy::Bytes;
use crate::relaxed::log_store::{EntryKind, LoggedOp};
use crate::relaxed::logging::log;
use crate::relaxed::modes::Mode;
use crate::relaxed::{classes, durable, fence, phases};
use crate::runtime::CdRuntime;

/// Performs and logs.
pub(crate) struct Forward;

impl Mode for Forward {
    fn put(&self, rt: &CdRuntime, id: OpId, rma: &Rma, bytes: &[u8]) -> PutAction {
        classes::check_access(rt, rma.rank, rma.offset, rma.len);
        durable::before_put(rt, rma);
        log(
            rt,
            id.0,
            EntryKind::Write {
                target: rma.rank,
                offset: rma.offset,
                bytes: Bytes(bytes.to_vec()),
                counters: None,
            },
        );
        PutAction::Proceed
    }

    fn get(&self, rt: &CdRuntime, id: OpId, rma: &Rma, _dst: &mut [u8]) -> GetAction {
        classes::check_access(rt, rma.rank, rma.offset, rma.len);
        durable::before_get(rt, rma);
        phases::note_extent(rt, rma.rank, rma.offset..rma.offset + rma.len);
        log(
            rt,
            id.0,
            EntryKind::Read {
                source: rma.rank,
                offset: rma.offset,
                bytes: Bytes(Vec::new()),
            },
        );
        // Last before the read: the class check's rpc runs progress, which may note a loss
        // of the target (its drain) that a check made before it would miss.
        fence::before_read(rt, rma.rank);
        GetAction::Proceed
    }

    fn rpc(&self, rt: &CdRuntime, id: OpId, call: &RpcCall, args: &[u8]) -> RpcAction {
        let lsn = log(
            rt,
            id.0,
            EntryKind::Rpc {
                target: call.rank,
                name: call.name.to_string(),
                args: Bytes(args.to_vec()),
                reply: None,
                fire_and_forget: call.fire_and_forget,
                counters: None,
            },
        );
        // Until it leaves, a drain by the target does not wait for it: the target may be the
        // rank whose fence it waits at.
        rt.relaxed.unsent.set(lsn);
        durable::before_effect(rt, lsn);
        // After the flush's rpc, whose progress may note a loss of the target.
        fence::before_read(rt, call.rank);
        rt.relaxed.unsent.set(None);
        RpcAction::Proceed
    }

    fn atomic(
        &self,
        rt: &CdRuntime,
        id: OpId,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> AtomicAction {
        classes::check_access(rt, rank, offset, 8);
        let logged = LoggedOp::from(op);
        let lsn = log(
            rt,
            id.0,
            EntryKind::Atomic {
                target: rank,
                offset,
                op: logged,
                previous: None,
                counters: None,
                done: false,
            },
        );
        rt.relaxed.unsent.set(lsn);
        if logged != LoggedOp::Load {
            durable::before_effect(rt, lsn);
        }
        // After the class check's and the flush's rpcs, whose progress may note a loss of
        // the target.
        fence::before_read(rt, rank);
        rt.relaxed.unsent.set(None);
        AtomicAction::Proceed
    }

    fn fetch(&self, rt: &CdRuntime, id: OpId, fetch: &Fetch) -> FetchAction {
        fence::before_read(rt, fetch.rank);
        log(
            rt,
            id.0,
            EntryKind::Fetch {
                rank: fetch.rank,
                object: fetch.object,
                bytes: None,
            },
        );
        FetchAction::Proceed
    }

    fn collective(&self, rt: &CdRuntime, id: OpId, collective: &Collective) -> CollectiveAction {
        let lsn = log(
            rt,
            id.0,
            EntryKind::Collective {
                result: None,
                barrier: collective.kind == CollectiveKind::Barrier,
                team: collective.team,
                shared: !matches!(collective.kind, CollectiveKind::ReduceOne { .. }),
            },
        );
        durable::before_effect(rt, lsn);
        CollectiveAction::Proceed
    }

    /// The allocator chooses; the hook logs the address it chose (`after_alloc`).
    fn alloc(&self, _rt: &CdRuntime, _size: usize) -> AllocAction {
        AllocAction::Proceed
    }

    fn rng(&self, rt: &CdRuntime, dst: &mut [u8], draw: &mut dyn FnMut(&mut [u8])) {
        draw(dst);
        log(
            rt,
            0,
            EntryKind::Rng {
                bytes: Bytes(dst.to_vec()),
            },
        );
    }
}
