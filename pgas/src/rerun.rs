//! The rank's body run again from its start after the job recovered from a lost process
//! (`cd-runtime/src/REAL_LOSS.md`): what a survivor and a replacement do between the conduit's
//! rebuild and the new runtime, so that every live rank starts the body from the same state.

use std::any::Any;

use gasnet_bridge::Endpoint;
use gasnet_bridge::for_runtimes::PeerFailure;

use crate::runtime::RESERVED;

/// Whether the unwind `payload` is a peer's loss, the one unwind a recovery answers.
pub(crate) fn is_peer_failure(payload: &(dyn Any + Send)) -> bool {
    payload.is::<PeerFailure>()
}

/// Makes this rank ready to run the body again in a recovered job: zeroes the runtime's
/// reserved bytes of its own segment (finalize's counting waves hold the interrupted body's
/// counts on a survivor; a replacement's segment starts zeroed), then joins one barrier of
/// every rank, so that no rank's first collective of the new body lands in words another has
/// still to zero. Every live process calls it once per recovery: a survivor after
/// `Endpoint::recover`, a replacement at its start.
pub(crate) fn rejoin(ep: &Endpoint) {
    let me = ep.rank();
    for at in (0..RESERVED).step_by(8) {
        ep.store_mapped(me, at, 0u64)
            .expect("the reserved bytes of the own segment are mapped");
    }
    ep.barrier().expect("the barrier of a recovered job");
}

/// What the latest recovery of the job told this rank (`None` in a job that lost no process):
/// a runtime asks it at the start of the body to tell a rerun from a first run.
///
/// # Panics
/// Outside [`launch`](crate::launch).
pub fn recovered() -> Option<gasnet_bridge::Recovered> {
    crate::runtime::with(|rt| rt.ep().recovered())
}
