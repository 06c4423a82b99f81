//! Shared helpers of the cross-crate tests. They also run on the mpi conduit, one process per
//! rank (`cd-runtime/tests/mpirun-relaxed.sh`), where a launch returns only this process's
//! rank's result.

/// The size of the MPI world this test process belongs to, `None` on smp.
pub fn mpi_world_size() -> Option<usize> {
    gasnet_bridge::conduit::mpi_world()
        .expect("the MPI world's shape")
        .map(|(_, size)| size)
}
