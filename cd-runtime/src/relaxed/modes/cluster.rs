//! Cluster mode: an access to another rank of this rank's SPBC cluster is performed and not
//! logged (`relaxed/cluster.rs`); a write keeps its IWC at the target, and a tracking strict
//! CD notes the access.

use std::rc::Rc;

use gasnet_bridge::AtomicOp;
use pgas::runtime_hooks::{
    AllocAction, AtomicAction, Collective, CollectiveAction, Fetch, FetchAction, GetAction, OpId,
    PutAction, Rma, RpcAction, RpcCall,
};

use crate::frame::Frame;
use crate::relaxed::dependencies;
use crate::relaxed::frame_state::ClusterWrite;
use crate::relaxed::log_store::LoggedOp;
use crate::relaxed::logging::logging_frame;
use crate::relaxed::modes::Mode;
use crate::relaxed::phases;
use crate::runtime::CdRuntime;

/// Performs, unlogged, keeping the IWC of writes.
pub(crate) struct ClusterPeer;

impl Mode for ClusterPeer {
    fn put(&self, rt: &CdRuntime, id: OpId, rma: &Rma, _bytes: &[u8]) -> PutAction {
        access(
            rt,
            id.0,
            rma.rank,
            rma.offset..rma.offset + rma.len,
            false,
            Some(None),
        );
        PutAction::Proceed
    }

    fn get(&self, rt: &CdRuntime, id: OpId, rma: &Rma, _dst: &mut [u8]) -> GetAction {
        access(
            rt,
            id.0,
            rma.rank,
            rma.offset..rma.offset + rma.len,
            true,
            None,
        );
        GetAction::Proceed
    }

    fn rpc(&self, rt: &CdRuntime, id: OpId, call: &RpcCall, _args: &[u8]) -> RpcAction {
        // Its function may touch any byte of the target's segment.
        access(rt, id.0, call.rank, 0..usize::MAX, true, Some(None));
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
        access(rt, id.0, rank, offset..offset + 8, true, write);
        AtomicAction::Proceed
    }

    fn fetch(&self, rt: &CdRuntime, id: OpId, fetch: &Fetch) -> FetchAction {
        access(rt, id.0, fetch.rank, 0..0, true, None);
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

/// The CD whose notes hold this rank's unlogged writes: the innermost logging relaxed CD,
/// else the LCSA (a tracking strict CD's body outside relaxed children).
fn notes_frame(rt: &CdRuntime) -> Rc<Frame> {
    logging_frame(rt).unwrap_or_else(|| rt.lcsa())
}

/// An access to `rank` of this cluster starts: noted for a tracking strict CD (as logged:
/// both ends of it are in or out of any limited re-execution together), and a write is kept
/// until its ack gives its IWC. `bytes`: the bytes of `rank`'s segment it touches. `write`: `Some(atomic)` for a write (`atomic`: the word and
/// operation of a writing atomic).
fn access(
    rt: &CdRuntime,
    op: u64,
    rank: usize,
    bytes: std::ops::Range<usize>,
    read: bool,
    write: Option<Option<(usize, LoggedOp)>>,
) {
    if let Some(f) = dependencies::tracking_frame(rt) {
        f.rx.borrow_mut()
            .deps
            .note_access(rank, read, write.is_some());
    }
    if !bytes.is_empty() {
        phases::note_extent(rt, rank, bytes);
    }
    if let Some(atomic) = write {
        notes_frame(rt)
            .rx
            .borrow_mut()
            .cluster
            .writes
            .push(ClusterWrite {
                target: rank,
                atomic,
                counters: None,
                op,
            });
    }
}
