//! Errors of the pgas layer, each naming its cause.

use gasnet_bridge::BridgeError;
use thiserror::Error;

/// Why a pgas operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PgasError {
    /// The shared segment has no free block large enough.
    #[error(
        "shared segment of rank {rank} exhausted: {requested} bytes requested, largest free block \
         is {largest_free} bytes (raise PGAS_SEGMENT_MB or free memory with delete_)"
    )]
    OutOfMemory {
        rank: usize,
        requested: usize,
        largest_free: usize,
    },
    /// `delete_` of a pointer that is not the start of a live allocation of this rank.
    #[error(
        "delete_ of {what}: rank {rank}, offset {offset} is not a live allocation (double free or foreign pointer)"
    )]
    BadFree {
        what: &'static str,
        rank: usize,
        offset: usize,
    },
    /// A null global pointer was used for an access.
    #[error("{op} through a null global pointer")]
    Null { op: &'static str },
    /// `local()` of memory this rank cannot address directly.
    #[error("global pointer to rank {rank} is not local to rank {me} (different node)")]
    NotLocal { rank: usize, me: usize },
    /// The communication core refused the access.
    #[error(transparent)]
    Bridge(#[from] BridgeError),
    /// Bytes from another rank could not be decoded.
    #[error("malformed {what} from rank {source_rank}: {reason}")]
    Malformed {
        what: &'static str,
        source_rank: usize,
        reason: String,
    },
    /// A team argument is out of range.
    #[error("{0}")]
    Team(String),
}
