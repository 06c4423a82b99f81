//! What the benchmark binaries share beyond bench-report: the raw MPI baselines that the
//! mpi-conduit lines are measured against, the directory the checkpoint lines write to, and
//! the process's CPU time.

pub mod checkpoint_dir;
pub mod cpu_time;

#[cfg(feature = "mpi")]
pub mod mpi_baseline;
