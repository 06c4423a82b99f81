//! What a runtime built on this crate needs and a program does not (pgas is such a runtime):
//! how a rank stops a job on purpose, the unwind that a lost peer starts (caught before
//! [`Endpoint::recover`](crate::Endpoint::recover)), the per-piece counts of a vector put, the
//! copies of shared memory, and the directories to remove when the process ends by `_exit`.
//!
//! Programs use the crate root; the items here let a runtime keep its promises to them.

pub use crate::failure::{PeerFailure, Stopped, panic_message};
pub use crate::vector::piece_iwc;

/// The copies every conduit uses on memory other agents may access at the same moment, for a
/// runtime that keeps such memory of its own beside the segment (pgas's viewable areas); their
/// model and safety contract are this module's doc.
pub mod shared_copy {
    pub use crate::shared_copy::{copy_in, copy_out, fill};
}

/// Directories a runtime keeps on disk for a job, removed even when the process ends without
/// unwinding (the mpi conduit's watchdog ends it by `_exit`).
pub mod exit_cleanup {
    pub use crate::exit_cleanup::{register, registered, unregister};
}
