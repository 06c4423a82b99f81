//! The end of the process when a failed flush leaves the caller's lent memory in MPI's hands
//! (`lent.rs` tells why no return is safe then).

use crate::error::BridgeError;

/// Ends the process after a failed flush left an RMA operation on lent memory in an unknown
/// state: returning would let MPI touch memory the caller may free.
#[cold]
pub(super) fn lent_memory_lost(e: BridgeError) -> ! {
    crate::stderr_line::stderr_line(format_args!(
        "gasnet-bridge (mpi conduit): {e} while an RMA operation used the caller's memory; MPI \
         cannot cancel it, so this process ends rather than return"
    ));
    std::process::abort()
}
