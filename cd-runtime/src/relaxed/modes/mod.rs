//! The modes in which the relaxed hook serves an operation. The hook
//! ([`super::interceptor`]) picks one mode per operation and hands the operation to it:
//!
//! - [`live::Live`]: the operation runs as without the hook, unlogged (an access to the
//!   rank's own memory; in a limited re-execution, an operation with a rank that
//!   re-executes too);
//! - [`refuse::Refuse`]: not performed (an rpc function the replay runs again starts it);
//! - [`limited::LimitedMode`]: served from the first execution's log, or squashed
//!   (an operation with a rank outside a limited re-execution);
//! - [`replay::Replaying`]: served from the recovering CD's log, or squashed (a replay
//!   whose log still holds entries);
//! - [`cluster::ClusterPeer`]: performed unlogged, its IWC kept (an access to another rank
//!   of this rank's SPBC cluster, `relaxed/cluster.rs`);
//! - [`forward::Forward`]: performed and logged.
//!
//! The squash check of the two modes that squash writes is [`squash`].

pub(crate) mod cluster;
pub(crate) mod forward;
pub(crate) mod limited;
pub(crate) mod live;
pub(crate) mod refuse;
pub(crate) mod replay;
pub(crate) mod squash;

use gasnet_bridge::AtomicOp;
use pgas::runtime_hooks::{
    AllocAction, AtomicAction, Collective, CollectiveAction, Fetch, FetchAction, GetAction, OpId,
    PutAction, Rma, RpcAction, RpcCall,
};

use crate::runtime::CdRuntime;

/// Serves the operations the relaxed hook intercepts, one method per kind of operation,
/// each answering what the pgas hook then does with it.
pub(crate) trait Mode {
    /// A put of `bytes` to `rma`.
    fn put(&self, rt: &CdRuntime, id: OpId, rma: &Rma, bytes: &[u8]) -> PutAction;
    /// A get from `rma` into `dst` (filled when served).
    fn get(&self, rt: &CdRuntime, id: OpId, rma: &Rma, dst: &mut [u8]) -> GetAction;
    /// An rpc with serialized arguments `args`.
    fn rpc(&self, rt: &CdRuntime, id: OpId, call: &RpcCall, args: &[u8]) -> RpcAction;
    /// An atomic `op` on the word at `offset` of `rank`.
    fn atomic(
        &self,
        rt: &CdRuntime,
        id: OpId,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> AtomicAction;
    /// A `DistObject::fetch`.
    fn fetch(&self, rt: &CdRuntime, id: OpId, fetch: &Fetch) -> FetchAction;
    /// A collective (barriers included).
    fn collective(&self, rt: &CdRuntime, id: OpId, collective: &Collective) -> CollectiveAction;
    /// An allocation of `size` bytes in this rank's segment.
    fn alloc(&self, rt: &CdRuntime, size: usize) -> AllocAction;
    /// A `cd::rng()` draw into `dst`; `draw` makes a live one (calls after the first do
    /// nothing).
    fn rng(&self, rt: &CdRuntime, dst: &mut [u8], draw: &mut dyn FnMut(&mut [u8]));
}
