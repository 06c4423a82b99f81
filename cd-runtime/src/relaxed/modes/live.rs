//! Live mode: the operation runs as without the hook and is not logged. An access to the
//! rank's own memory is a local access (re-executed in a replay, never logged); in a
//! limited re-execution an operation with a rank that re-executes too is made again live.

use gasnet_bridge::AtomicOp;
use pgas::runtime_hooks::{
    AllocAction, AtomicAction, Collective, CollectiveAction, Fetch, FetchAction, GetAction, OpId,
    PutAction, Rma, RpcAction, RpcCall,
};

use crate::relaxed::modes::Mode;
use crate::runtime::CdRuntime;

/// Performs, unlogged.
pub(crate) struct Live;

impl Mode for Live {
    fn put(&self, _rt: &CdRuntime, _id: OpId, _rma: &Rma, _bytes: &[u8]) -> PutAction {
        PutAction::Proceed
    }

    fn get(&self, _rt: &CdRuntime, _id: OpId, _rma: &Rma, _dst: &mut [u8]) -> GetAction {
        GetAction::Proceed
    }

    fn rpc(&self, _rt: &CdRuntime, _id: OpId, _call: &RpcCall, _args: &[u8]) -> RpcAction {
        RpcAction::Proceed
    }

    fn atomic(
        &self,
        _rt: &CdRuntime,
        _id: OpId,
        _rank: usize,
        _offset: usize,
        _op: AtomicOp,
    ) -> AtomicAction {
        AtomicAction::Proceed
    }

    fn fetch(&self, _rt: &CdRuntime, _id: OpId, _fetch: &Fetch) -> FetchAction {
        FetchAction::Proceed
    }

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
