//! A GASNet-EX-style communication core: per-rank segments, active messages, one-sided RMA,
//! remote atomics, a split-phase barrier and NIC-like epoch / incoming-write counters.
//!
//! The `smp` conduit (ranks as threads of one process) is the default and needs no system
//! library. A job starts with [`launch()`]; each rank gets an [`Endpoint`]:
//!
//! ```
//! use gasnet_bridge::{launch, HandlerTable, LaunchConfig, WriteCounting};
//! // A resilience runtime asks for the incoming-write counters; by default writes are not counted.
//! let job = LaunchConfig::new(4).segment_bytes(1 << 16).write_counting(WriteCounting::On);
//! let sums = launch(&job, HandlerTable::new(), |ep| {
//!     let right = (ep.rank() + 1) % ep.ranks();
//!     let ack = ep.put(right, 0, &(ep.rank() as u64).to_ne_bytes()).unwrap();
//!     assert_eq!(ack.iwc, 1); // the first write into `right`'s segment
//!     ep.barrier().unwrap();
//!     let mut word = [0u8; 8];
//!     ep.get(ep.rank(), 0, &mut word).unwrap();
//!     u64::from_ne_bytes(word)
//! })
//! .unwrap();
//! assert_eq!(sums, vec![3, 0, 1, 2]);
//! ```
//!
//! The crate root is what a program needs. Besides it: [`conduit`] says which conduit a job
//! uses and starts programs under `mpirun`, [`limits`] checks what the machine can hold, and
//! [`for_runtimes`] gathers what only a runtime built on this crate needs (pgas is one).

mod atomic;
mod barrier;
mod completion;
mod completion_wait;
pub mod conduit;
mod config;
mod counters;
mod endpoint;
mod error;
mod exit_cleanup;
mod failure;
pub mod for_runtimes;
mod handler_table;
mod hang_report;
mod launch;
pub mod limits;
mod mapped_access;
mod membarrier;
mod message;
mod recovered;
mod segment;
mod shared_copy;
mod sleep;
mod spares_wanted;
mod stderr_line;
mod sync;
mod token;
mod topology;
mod vector;

/// The lock-free structures as the loom models in `tests/loom_*.rs` drive them; exists only
/// under `RUSTFLAGS="--cfg loom"` (`.ci/loom`), where they run on loom's atomics.
#[cfg(loom)]
#[doc(hidden)]
pub mod for_loom {
    pub use crate::conduit::shm_ring::{ALIGN, DATA, MAX_RECORD, RING_BYTES, Ring};
    pub use crate::conduit::smp_inbox::{FIRST_SLOTS, Incoming, Lane, MAX_SLOTS, Outgoing};
    pub use crate::counters::{WriteAck, WriteCounters};
    pub use crate::sync::SharedBytes;
}

pub use atomic::{AtomicOp, AtomicResult};
pub use completion::{AtomicHandle, FlushId, GetHandle, OwnedGetHandle, WriteHandle};
pub use completion_wait::AccessRegion;
pub use conduit::ConduitKind;
pub use config::{DEFAULT_SEGMENT_BYTES, LaunchConfig};
pub use counters::{WriteAck, WriteCounting};
pub use endpoint::Endpoint;
pub use error::{BridgeError, ConfigError, LaunchError};
pub use handler_table::{Handler, HandlerTable};
pub use launch::{job_ranks, launch, launch_from_env, returned_ranks};
pub use limits::LimitError;
pub use message::{HandlerId, MAX_ARGS, MAX_MEDIUM, Payload};
pub use recovered::Recovered;
pub use sleep::Awaiting;
pub use spares_wanted::{request_spares, spares_wanted};
pub use stderr_line::stderr_line;
pub use token::Token;
pub use topology::Topology;
