//! Shared helpers of the cd-runtime integration tests: job shapes, a ring exchange in the
//! segment, and integer-valued arithmetic on f64 (exact, so runs compare bit for bit).
//!
//! The relaxed tests also run on the mpi conduit, one process per rank
//! (`cd-runtime/tests/mpirun-relaxed.sh`): there a launch returns only this process's rank's
//! result, so they check each rank's result where that rank ran, and a job's rank count must
//! be the MPI world's size ([`job`] fails the test otherwise, naming the size to run it at).
#![allow(dead_code)]

use std::sync::OnceLock;

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdError, CdLaunchError, CdOutcome};
use gasnet_bridge::LaunchConfig;
use pgas::{GlobalPtr, Team};

/// Modulus of the test arithmetic: values stay small integers, so f64 is exact.
pub const M: f64 = 1_000_003.0;

/// The size of the MPI world this test process belongs to, `None` on smp.
pub fn mpi_world_size() -> Option<usize> {
    static SIZE: OnceLock<Option<usize>> = OnceLock::new();
    *SIZE.get_or_init(|| {
        gasnet_bridge::conduit::mpi_world()
            .expect("the MPI world's shape")
            .map(|(_, size)| size)
    })
}

/// The rank counts a test sweeps: `smp` on smp; under mpirun the world's size, which must be
/// one of them.
pub fn rank_counts(smp: &[usize]) -> Vec<usize> {
    match mpi_world_size() {
        None => smp.to_vec(),
        Some(size) => {
            assert!(
                smp.contains(&size),
                "this test runs at {smp:?} ranks, not under `mpirun -n {size}` \
                 (cd-runtime/tests/mpirun-relaxed.sh names each test's sizes)"
            );
            vec![size]
        }
    }
}

/// A job of `ranks` ranks with a 1 MiB segment each. Under mpirun the world is the job, so a
/// test asking for another rank count fails here instead of hanging or checking nothing.
pub fn job(ranks: usize) -> LaunchConfig {
    if let Some(size) = mpi_world_size() {
        assert_eq!(
            size, ranks,
            "this test's job has {ranks} ranks but runs under `mpirun -n {size}`: run it at \
             -n {ranks} (cd-runtime/tests/mpirun-relaxed.sh names each test's size)"
        );
    }
    LaunchConfig::new(ranks).segment_bytes(1 << 20)
}

/// A configuration from TOML text (panics on an error: the tests' texts are valid).
pub fn config(toml: &str) -> CdConfig {
    CdConfig::parse(toml, "test.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `body` under CDs on `ranks` ranks.
pub fn run<R, F>(ranks: usize, cfg: CdConfig, body: F) -> Result<CdOutcome<R>, CdLaunchError>
where
    R: Send,
    F: Fn() -> Result<R, CdError> + Sync,
{
    cd::launch(&job(ranks), cfg, pgas::RpcTable::new(), body)
}

/// One deterministic update of `v` (integer-valued, exact in f64).
pub fn step(v: &mut [f64], salt: u64) {
    let rank = pgas::rank_me() as f64;
    for (i, x) in v.iter_mut().enumerate() {
        *x = (*x * 3.0 + i as f64 + rank + salt as f64 + 1.0) % M;
    }
}

/// A buffer of `len` f64 in every rank's segment, with every rank's pointer known.
pub struct Ring {
    bufs: Vec<GlobalPtr<f64>>,
    len: usize,
}

impl Ring {
    /// Collective over the world: allocates this rank's buffer and learns the others'.
    pub fn new(len: usize) -> Ring {
        let mine = pgas::new_array::<f64>(len).expect("segment space for the ring");
        let all = pgas::reduce_all(
            vec![(pgas::rank_me(), mine)],
            |mut a: Vec<(usize, GlobalPtr<f64>)>, b| {
                a.extend(b);
                a
            },
        )
        .wait();
        let mut bufs = vec![mine; pgas::rank_n()];
        for (r, p) in all {
            bufs[r] = p;
        }
        Ring { bufs, len }
    }

    /// This rank's buffer.
    pub fn mine(&self) -> GlobalPtr<f64> {
        self.bufs[pgas::rank_me()]
    }

    /// Collective over `team`: each member puts `v` into its right neighbour's buffer, then
    /// adds what its left neighbour put into `v`. A barrier first, so no put lands in a
    /// buffer whose rank is still before the exchange (a rank loss poisons the segment at the
    /// end of an execution); a barrier between the puts and the reads.
    pub fn exchange(&self, team: &Team, v: &mut [f64]) {
        assert_eq!(v.len(), self.len);
        let n = team.rank_n();
        if n == 1 {
            return;
        }
        pgas::barrier_on(team);
        let right = team.to_world((team.rank_me() + 1) % n);
        pgas::rput_slice(v, self.bufs[right]).wait();
        pgas::barrier_on(team);
        let left = pgas::rget_slice(self.mine(), self.len).wait();
        for (x, l) in v.iter_mut().zip(left) {
            *x = (*x + l) % M;
        }
    }
}

/// The message of a failed job.
pub fn message<R>(r: Result<CdOutcome<R>, CdLaunchError>) -> String {
    match r {
        Ok(_) => panic!("the job was expected to fail"),
        Err(e) => e.to_string(),
    }
}
