//! What the benchmark binaries share beyond bench-report: the raw MPI baselines that the
//! mpi-conduit lines are measured against, and the directory the checkpoint lines write to.

pub mod checkpoint_dir;

#[cfg(feature = "mpi")]
pub mod mpi_baseline;
