//! UPC++-style PGAS programming in Rust over the `gasnet-bridge` communication core.
//!
//! Every rank owns a slice of a global address space and reaches the others' through
//! [`GlobalPtr`] with one-sided [`rput`] / [`rget`]; [`rpc()`] ships work to a rank; results are
//! [`Future`]s. A program is a closure run on every rank by [`launch`]:
//!
//! ```
//! use pgas::{launch, rank_me, rank_n, LaunchConfig, RpcTable};
//!
//! let mut rpcs = RpcTable::new();
//! let square = rpcs.register("square", |x: u64| x * x);
//! let out = launch(&LaunchConfig::new(3).segment_bytes(1 << 20), rpcs, move || {
//!     let right = (rank_me() + 1) % rank_n();
//!     pgas::rpc(right, square, right as u64).wait()
//! })
//! .unwrap();
//! assert_eq!(out, vec![1, 4, 0]);
//! ```

pub mod alloc;
pub mod atomic_domain;
pub mod collectives;
pub mod dist_object;
pub mod error;
pub mod fault;
pub mod future;
pub mod global_ptr;
mod heap;
pub mod hook;
mod pending;
pub mod promise;
pub mod resilience;
pub mod rma;
pub mod rpc;
mod runtime;
pub mod strided;
pub mod team;
mod wire;

pub use alloc::{delete_, new_, new_array, shared_bytes_in_use};
pub use atomic_domain::{AtomicDomain, AtomicValue};
pub use collectives::{
    allgather, barrier, barrier_async, barrier_on, broadcast, ops, reduce_all, reduce_all_u64,
    reduce_one,
};
pub use dist_object::DistObject;
pub use error::PgasError;
pub use future::{Future, when_all};
pub use global_ptr::GlobalPtr;
pub use hook::{Interceptor, clear_hook, set_hook};
pub use promise::Promise;
pub use rma::{
    Completions, CxFutures, rget, rget_into, rget_slice, rget_with, rput, rput_slice, rput_with,
};
pub use rpc::{RpcFn, RpcTable, rpc, rpc_ff};
pub use runtime::{
    in_launch, launch, launch_from_env, poll_until, progress, rank_me, rank_n, stop,
};
pub use strided::{
    rget_irregular, rget_regular, rget_strided, rput_irregular, rput_regular, rput_strided,
};
pub use team::{Team, local_team, solo_team, world};

/// Re-exported so users can derive `Pod` for their own types.
pub use bytemuck;
/// The configuration type of [`launch`].
pub use gasnet_bridge::LaunchConfig;
/// The error type of [`launch`] (re-exported so that a program can match on a failed job
/// without naming the communication core's crate).
pub use gasnet_bridge::LaunchError;

/// What a waiting rank waits for, for the hang report (`PGAS_HANG_REPORT`).
pub use gasnet_bridge::Awaiting;
/// The configuration error inside [`LaunchError::Config`] (a bad `PGAS_*` variable, a rank
/// count that differs from the number of MPI processes).
pub use gasnet_bridge::ConfigError;
/// This process's place in an mpi job before it starts, `Some((rank, world size))`, or `None`
/// on smp: for programs that check a job's shape before launching it.
pub use gasnet_bridge::conduit::mpi_world;
/// The rank count of a program's job by the one convention (`--ranks`, else `PGAS_RANKS`, else
/// a default; under mpirun the number of processes, a different `--ranks` refused).
pub use gasnet_bridge::job_ranks;
/// What this machine can hold: memory needed against available, ranks and threads per core
/// (the one check every program makes before allocating).
pub use gasnet_bridge::limits;
/// Which ranks' results the last [`launch`] of this process returned (all on smp, one under
/// mpirun).
pub use gasnet_bridge::returned_ranks;
/// Writes a formatted line to standard error in one write, so that the lines of different
/// processes under mpirun never interleave: `pgas::stderr_line(format_args!("..."))`.
pub use gasnet_bridge::stderr_line;

/// Starting a program under `mpirun` from tests and tools: `MPIRUN` names the launcher
/// (default `mpirun`), `MPIRUN_FLAGS` its flags (default `--allow-run-as-root --oversubscribe`).
pub mod mpirun {
    pub use gasnet_bridge::conduit::{
        mpirun_available, mpirun_command, mpirun_program, require_mpirun,
    };
}

/// The SplitMix64 finalizer: a bijection of `u64` with `mix64(0) == 0` that mixes every bit
/// into every other. The runtime derives team ids with it; programs and the layers above use
/// it for seeded choices that are the same on every rank and every run (one mixer for all).
#[inline]
pub fn mix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Advances this rank's epoch for a fence (a synchronization point of the program).
pub fn fence() {
    runtime::with(|rt| rt.sync(hook::SyncEvent::Fence));
}

/// The calling rank's communication-core endpoint, for benchmarks that measure a raw operation
/// side by side with the API. It bypasses the interception hook: not for programs.
#[doc(hidden)]
pub fn __bench_endpoint<R>(f: impl FnOnce(&gasnet_bridge::Endpoint) -> R) -> R {
    runtime::with(|rt| f(rt.ep()))
}

/// The node (host, or emulated node on smp with `PGAS_RANKS_PER_NODE`) that world rank
/// `rank` runs on, from the conduit's topology; nodes are numbered from 0.
///
/// # Panics
/// If `rank` is not a world rank.
pub fn node_of(rank: usize) -> usize {
    runtime::with(|rt| {
        let t = rt.ep().topology();
        assert!(
            rank < t.ranks(),
            "node_of({rank}): there are {} ranks",
            t.ranks()
        );
        t.node_of(rank)
    })
}

/// This rank's Epoch Counter (EC) in the communication core.
pub fn epoch() -> u64 {
    runtime::with(|rt| rt.ep().epoch())
}
