//! The mpi conduit: one process per rank, started by `mpirun` (cargo feature `mpi`).
//!
//! How it works and why (progress, shared-memory RMA and AM rings, AMs over MPI with credits,
//! barrier and end of job, topology, failures) is told in `README.md` beside this file; each
//! mechanism has its own file, named for it. The driver and handle split of the conduits is
//! told in `../README.md`.

mod am;
mod barrier;
mod calls;
mod completions;
mod counting;
mod counting_notice;
mod credits;
mod datatype;
mod emulated_hosts;
mod host_memory;
mod inbox;
mod init_deadline;
mod job;
mod lent;
mod lent_lost;
mod lent_wait;
mod outgoing;
mod payloads;
mod pending;
mod process;
mod progress;
mod receive;
mod request;
mod rma;
mod rma_window;
mod send;
mod setup;
mod slots;
mod spares;
mod started;
mod state;
mod teardown;
#[cfg(feature = "ulfm")]
mod ulfm;
mod user_queue;
mod watchdog;
mod window;
mod wire;
mod world;

pub(crate) use job::{Joined, end_failed, end_normally, recover, start};
pub(crate) use outgoing::{AmHead, OutBody};
pub(crate) use pending::{Link, Pending};
pub(crate) use process::world_shape;
pub(crate) use rma_window::put_completes_after;
pub(crate) use started::Started;
pub(crate) use world::MpiWorld;

/// The MPI thread level this process runs with (for benchmarks and diagnostics).
pub fn thread_level_name() -> Option<&'static str> {
    Some(process::process().ok()?.thread_level.name())
}
