//! What the benchmark binaries share beyond bench-report: the raw MPI baselines that the
//! mpi-conduit lines are measured against.

#[cfg(feature = "mpi")]
pub mod mpi_baseline;
