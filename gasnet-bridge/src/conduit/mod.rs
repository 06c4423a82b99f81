//! Conduits: the transports under an [`Endpoint`](crate::Endpoint).
//!
//! Every conduit provides the same operations with the same semantics (segments addressed by
//! rank and offset, AMs by handler index, puts acknowledged with the target's EC/IWC, remote
//! atomics, a split-phase barrier, explicit progress). `smp` runs ranks as threads of one
//! process; `mpi` (cargo feature `mpi`) runs one process per rank under `mpirun`.
//!
//! The endpoint reaches its conduit through the driver enum (`driver.rs`): one predictable
//! branch per operation and no virtual call; without the `mpi` feature the enum has a single
//! variant and the branch disappears. `README.md` beside this file tells the driver and handle
//! design.
//!
//! Which conduit a job uses is decided when it starts ([`kind::selected`]): `PGAS_CONDUIT=smp` or
//! `PGAS_CONDUIT=mpi` if set, otherwise `mpi` when the process was started by an MPI launcher
//! (and the feature is built in), otherwise `smp`. The program does not change.

pub(crate) mod context;
pub(crate) mod driver;
pub(crate) mod kind;
mod launcher;
#[cfg(feature = "mpi")]
pub(crate) mod mpi;
// The mpi conduit's same-host AM ring: shared memory, not MPI, so it builds for its unit
// tests and loom models without the feature.
#[cfg(any(feature = "mpi", test, loom))]
pub(crate) mod shm_ring;
pub(crate) mod smp;
pub(crate) mod smp_inbox;

pub use kind::{ConduitKind, mpi_world, select, selected};
pub use launcher::{mpirun_available, mpirun_command, mpirun_program, require_mpirun};
#[cfg(feature = "mpi")]
pub use mpi::thread_level_name;
