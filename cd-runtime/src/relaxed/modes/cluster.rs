//! Cluster mode: an access to another rank of this rank's SPBC cluster is performed and not
//! logged (`relaxed/cluster.rs`); a write keeps its IWC at the target, and a tracking strict
//! CD notes the access.

use gasnet_bridge::AtomicOp;
use pgas::runtime_hooks::{
    AllocAction, AtomicAction, Collective, CollectiveAction, Fetch, FetchAction, GetAction, OpId,
    PutAction, Rma, RpcAction, RpcCall,
};

use crate::relaxed::cluster::access;
use crate::relaxed::log_store::LoggedOp;
use crate::relaxed::modes::Mode;
use crate::runtime::CdRuntime;

/// Performs, unlogged, keeping the IWC of writes.
pub(crate) struct ClusterPeer;

impl Mode for ClusterPeer {
    fn put(&self, rt: &CdRuntime, id: OpId, rma: &Rma, _bytes: &[u8]) -> PutAction {
        access(rt, id.0, rma.rank, false, Some(None));
        PutAction::Proceed
    }

    fn get(&self, rt: &CdRuntime, id: OpId, rma: &Rma, _dst: &mut [u8]) -> GetAction {
        access(rt, id.0, rma.rank, true, None);
        GetAction::Proceed
    }

    fn rpc(&self, rt: &CdRuntime, id: OpId, call: &RpcCall, _args: &[u8]) -> RpcAction {
        access(rt, id.0, call.rank, true, Some(None));
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
        let logged = LoggedOp::from(op);
        let write = (logged != LoggedOp::Load).then_some(Some((offset, logged)));
        access(rt, id.0, rank, true, write);
        AtomicAction::Proceed
    }

    fn fetch(&self, rt: &CdRuntime, id: OpId, fetch: &Fetch) -> FetchAction {
        access(rt, id.0, fetch.rank, true, None);
        FetchAction::Proceed
    }

    // The operations below have no peer: the hook never picks this mode for them.

    fn collective(&self, _rt: &CdRuntime, _id: OpId, _c: &Collective) -> CollectiveAction {
        CollectiveAction::Proceed
    }

    fn alloc(&self, _rt: &CdRuntime, _size: usize) -> AllocAction {
        AllocAction::Proceed
    }

    fn rng(&self, _rt: &CdRuntime, dst: &mut [u8], draw: &mut dyn FnMut(&mut [u8])) {
        draw(dst);
    }
}
