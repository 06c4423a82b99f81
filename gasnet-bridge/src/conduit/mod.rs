//! Conduits: the transports under an [`Endpoint`](crate::Endpoint).
//!
//! Every conduit provides the same operations with the same semantics (segments addressed by
//! rank and offset, AMs by handler index, puts acknowledged with the target's EC/IWC, remote
//! atomics, a split-phase barrier, explicit progress). `smp` runs ranks as threads of one
//! process; the `mpi` conduit (one process per rank) slots in beside it as a second world type
//! that the endpoint dispatches to.

pub mod smp;
