//! Refuse mode: an rpc function that the replay runs again started the operation. Such a
//! function may only change this rank's memory and state (`incoming_rpc.rs`), so the
//! operation is not performed and not logged, the refusal is recorded (the recovering CD
//! escalates), and the caller gets an empty answer.

use gasnet_bridge::{AtomicOp, AtomicResult};
use pgas::runtime_hooks::{
    AllocAction, AtomicAction, Collective, CollectiveAction, CollectiveKind, Fetch, FetchAction,
    GetAction, OpId, PutAction, Rma, RpcAction, RpcCall,
};

use crate::relaxed::incoming_rpc::refuse_operation;
use crate::relaxed::modes::Mode;
use crate::runtime::CdRuntime;

/// Refuses, with a replay error naming the operation.
pub(crate) struct Refuse;

/// Records the refusal of `doing` (the mode is chosen only while a function runs again,
/// when `refuse_operation` records and answers true).
fn refuse(rt: &CdRuntime, doing: impl FnOnce() -> String) {
    let refused = refuse_operation(rt, doing);
    debug_assert!(refused, "refuse mode outside a re-run rpc function");
}

impl Mode for Refuse {
    fn put(&self, rt: &CdRuntime, _id: OpId, rma: &Rma, _bytes: &[u8]) -> PutAction {
        refuse(rt, || format!("a put to rank {}", rma.rank));
        PutAction::Suppress
    }

    fn get(&self, rt: &CdRuntime, _id: OpId, rma: &Rma, dst: &mut [u8]) -> GetAction {
        refuse(rt, || format!("a get from rank {}", rma.rank));
        dst.fill(0);
        GetAction::Served
    }

    fn rpc(&self, rt: &CdRuntime, _id: OpId, call: &RpcCall, _args: &[u8]) -> RpcAction {
        refuse(rt, || {
            format!("an rpc `{}` to rank {}", call.name, call.rank)
        });
        // Not sent: the recovery fails (a reply the function waits for never comes).
        RpcAction::Served(Vec::new())
    }

    fn atomic(
        &self,
        rt: &CdRuntime,
        _id: OpId,
        rank: usize,
        _offset: usize,
        _op: AtomicOp,
    ) -> AtomicAction {
        refuse(rt, || format!("an atomic on rank {rank}"));
        AtomicAction::Served(AtomicResult {
            previous: 0,
            ack: None,
        })
    }

    fn fetch(&self, rt: &CdRuntime, _id: OpId, fetch: &Fetch) -> FetchAction {
        refuse(rt, || format!("a fetch from rank {}", fetch.rank));
        FetchAction::Served(Vec::new())
    }

    fn collective(&self, rt: &CdRuntime, _id: OpId, collective: &Collective) -> CollectiveAction {
        refuse(rt, || "a collective".into());
        // Taking part would make the others wait for a rank that is replaying.
        if collective.kind == CollectiveKind::Barrier {
            return CollectiveAction::Served(Vec::new());
        }
        CollectiveAction::Proceed
    }

    fn alloc(&self, rt: &CdRuntime, size: usize) -> AllocAction {
        refuse(rt, || format!("an allocation of {size} bytes"));
        // Live, and not logged: the recovery fails anyway.
        rt.relaxed.alloc_served.set(true);
        AllocAction::Proceed
    }

    fn rng(&self, rt: &CdRuntime, dst: &mut [u8], draw: &mut dyn FnMut(&mut [u8])) {
        refuse(rt, || "an rng draw".into());
        draw(dst);
    }
}
