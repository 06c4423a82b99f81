//! UPC++-style PGAS programming in Rust over the `gasnet-bridge` communication core.
//!
//! Every rank owns a slice of a global address space and reaches the others' through
//! [`GlobalPtr`] with one-sided [`rput`] / [`rget`]; [`rpc()`] ships work to a rank; results are
//! [`Future`]s. A program is a closure run on every rank by [`launch`], which returns the
//! results of the ranks this process ran (all of them on the default smp conduit).
//!
//! # Global pointers and one-sided puts
//!
//! Each rank allocates in its shared segment; [`allgather`] shares the pointers; [`rput`]
//! writes into another rank's memory without its involvement:
//!
//! ```
//! use pgas::{LaunchConfig, RpcTable, barrier, launch, rank_me, rank_n, world};
//!
//! let out = launch(&LaunchConfig::new(4).segment_bytes(1 << 20), RpcTable::new(), || {
//!     let mine = pgas::new_array::<u64>(2).unwrap();
//!     let all = pgas::allgather(mine).wait();
//!     let right = all[(rank_me() + 1) % rank_n()];
//!     pgas::rput_slice(&[rank_me() as u64, 7], right).wait(); // into the right neighbour
//!     barrier(); // every put has landed
//!     let left_wrote = pgas::rget(mine).wait(); // a get of one's own memory works too
//!     let mut both = [0u64; 2];
//!     mine.read_local_slice(&mut both).unwrap();
//!     (left_wrote, both[1])
//! })
//! .unwrap();
//! assert_eq!(out, vec![(3, 7), (0, 7), (1, 7), (2, 7)]);
//! ```
//!
//! # Remote procedure calls
//!
//! A `#[pgas::remote]` function runs on the rank named in [`rpc()`]; its result comes back as
//! a future ([`rpc_ff`] sends without a reply). It is registered at link time, so nothing is
//! set up before [`launch`] (the arguments travel as one value, a tuple for several):
//!
//! ```
//! use pgas::{LaunchConfig, RpcTable, launch, rank_me, rank_n};
//!
//! #[pgas::remote]
//! fn scaled(x: u64, by: u64) -> u64 {
//!     x * by + rank_me() as u64 // runs on the target: its rank
//! }
//!
//! let out = launch(&LaunchConfig::new(3).segment_bytes(1 << 20), RpcTable::new(), || {
//!     let right = (rank_me() + 1) % rank_n();
//!     let there = pgas::rpc(right, scaled, (10, 100)).wait();
//!     let here = scaled(10, 100); // still an ordinary function, run here
//!     (there, here)
//! })
//! .unwrap();
//! assert_eq!(out, vec![(1001, 1000), (1002, 1001), (1000, 1002)]);
//! ```
//!
//! A function can also be registered by name in an [`RpcTable`], for one that captures state:
//!
//! ```
//! use pgas::{launch, rank_me, rank_n, LaunchConfig, RpcTable};
//!
//! let mut rpcs = RpcTable::new();
//! let offset = 100;
//! let shifted = rpcs.register("shifted", move |x: u64| x + offset);
//! let out = launch(&LaunchConfig::new(3).segment_bytes(1 << 20), rpcs, move || {
//!     let right = (rank_me() + 1) % rank_n();
//!     pgas::rpc(right, shifted, right as u64).wait()
//! })
//! .unwrap();
//! assert_eq!(out, vec![101, 102, 100]);
//! ```
//!
//! # Remote atomics
//!
//! An [`AtomicDomain`] applies atomic operations to shared memory of any rank:
//!
//! ```
//! use pgas::{AtomicDomain, LaunchConfig, RpcTable, barrier, broadcast, launch, world};
//!
//! let out = launch(&LaunchConfig::new(4).segment_bytes(1 << 20), RpcTable::new(), || {
//!     // Rank 0's counter, its pointer broadcast to all.
//!     let mine = pgas::new_::<u64>(0).unwrap();
//!     let counter = broadcast(mine, 0).wait();
//!     let ad = AtomicDomain::<u64>::new();
//!     ad.fetch_add(counter, 10).wait();
//!     barrier();
//!     ad.load(counter).wait()
//! })
//! .unwrap();
//! assert_eq!(out, vec![40; 4]);
//! ```
//!
//! # Collectives
//!
//! Reductions, broadcasts, gathers and barriers over a [`Team`] ([`world`] is every rank):
//!
//! ```
//! use pgas::{LaunchConfig, RpcTable, launch, ops, rank_me, world};
//!
//! let out = launch(&LaunchConfig::new(4).segment_bytes(1 << 20), RpcTable::new(), || {
//!     let sum = pgas::reduce_all(rank_me() as u64, ops::add).wait();
//!     let max = pgas::reduce_all(rank_me() as f64, ops::max).wait();
//!     let from_two = pgas::broadcast(rank_me() * 100, 2).wait();
//!     let evens = world().split((rank_me() % 2) as u64, rank_me() as u64);
//!     let even_sum = pgas::reduce_all_on(&evens, rank_me(), ops::add).wait();
//!     (sum, max, from_two, even_sum)
//! })
//! .unwrap();
//! assert_eq!(out[0], (6, 3.0, 200, 2));
//! assert_eq!(out[1], (6, 3.0, 200, 4));
//! ```
//!
//! # Distributed objects
//!
//! A [`DistObject`] has one instance per rank, readable from any rank ([`DistObject::fetch`])
//! and changed by its own rank ([`DistObject::update`], also from an rpc run there):
//!
//! ```
//! use pgas::{DistObject, LaunchConfig, RpcTable, launch, rank_me, rank_n};
//!
//! #[pgas::remote]
//! fn visit((seen, from): (DistObject<Vec<usize>>, usize)) {
//!     seen.update(|v| v.push(from)); // the target's own instance
//! }
//!
//! let out = launch(&LaunchConfig::new(3).segment_bytes(1 << 20), RpcTable::new(), || {
//!     let name = DistObject::new(format!("rank {}", rank_me()));
//!     let seen = DistObject::new(Vec::new());
//!     pgas::barrier(); // every instance exists before an rpc names it
//!     let next = name.fetch((rank_me() + 1) % rank_n()).wait();
//!     pgas::rpc((rank_me() + 1) % rank_n(), visit, (seen.clone(), rank_me())).wait();
//!     // An instance must outlive every fetch of it: nobody drops theirs before all fetched.
//!     pgas::barrier();
//!     (next, seen.get())
//! })
//! .unwrap();
//! assert_eq!(out[0], ("rank 1".to_string(), vec![2]));
//! assert_eq!(out[2], ("rank 0".to_string(), vec![1]));
//! ```
//!
//! # Distributed arrays
//!
//! A [`DistArray`] spreads `len` elements over a team in a block or cyclic [`Layout`]; any
//! rank reads and writes any element or range by global index (a range spanning several
//! owners is one future), applies atomics to elements, and reduces the whole array:
//!
//! ```
//! use pgas::{DistArray, LaunchConfig, Layout, RpcTable, barrier, launch, rank_me};
//!
//! let out = launch(&LaunchConfig::new(4).segment_bytes(1 << 20), RpcTable::new(), || {
//!     let a = DistArray::<u64>::new(10, Layout::Cyclic).unwrap(); // 3, 3, 2, 2 elements
//!     let mine: Vec<u64> = a.local_range().iter().map(|i| i as u64).collect();
//!     a.write_local(&mine).unwrap(); // element i holds i
//!     barrier();
//!     let across = a.get_range(2..7).unwrap().wait(); // from every rank's part
//!     a.fetch_add(9, 1).unwrap().wait(); // every rank adds 1 to element 9
//!     barrier();
//!     let sum = a.sum().wait(); // 0 + 1 + ... + 9, plus the 4 additions
//!     let out_of_range = a.get(10).unwrap_err().to_string();
//!     (a.owner_of(6).unwrap(), across, sum, a.max().wait(), out_of_range)
//! })
//! .unwrap();
//! let (owner, across, sum, max, err) = &out[0];
//! assert_eq!((*owner, across.as_slice(), *sum, *max), (2, &[2, 3, 4, 5, 6][..], 49, Some(13)));
//! assert!(err.starts_with("index 10 is out of range for a distributed array of length 10"));
//! ```
//!
//! A [`ViewArray`] is the same array with its blocks in viewable memory: each rank updates its
//! own block in place as a slice ([`ViewArray::with_local_mut`]; [`ViewArray::with_local`]
//! reads it), and any access of another rank overlapping an open view is refused with an error
//! naming both, never a data race:
//!
//! ```
//! use pgas::{ArrayError, LaunchConfig, Layout, RpcTable, ViewArray, barrier, launch, rank_me};
//!
//! let out = launch(&LaunchConfig::new(4).segment_bytes(1 << 20), RpcTable::new(), || {
//!     let a = ViewArray::<u64>::new(10, Layout::Block).unwrap(); // 3, 3, 2, 2 elements
//!     let mine = a.local_range();
//!     a.with_local_mut(|s| {
//!         for (k, x) in s.iter_mut().enumerate() {
//!             *x = mine.global(k) as u64; // element i holds i, written in place
//!         }
//!     })
//!     .unwrap();
//!     barrier();
//!     let across = a.get_range(2..7).unwrap(); // from three ranks' blocks
//!     a.fetch_add(9, 1).unwrap(); // every rank adds 1 to element 9
//!     barrier();
//!     // Rank 3 holds element 9 under its view while the others try to add to it.
//!     let refused = if rank_me() == 3 {
//!         a.with_local_mut(|s| {
//!             barrier(); // the view is open
//!             barrier(); // the others were refused
//!             s[1]
//!         })
//!         .unwrap();
//!         false
//!     } else {
//!         barrier();
//!         let tried = a.fetch_add(9, 1);
//!         barrier();
//!         matches!(tried, Err(ArrayError::View(pgas::ViewError::Viewed { owner: 3, .. })))
//!     };
//!     (across, a.sum().unwrap(), refused)
//! })
//! .unwrap();
//! assert_eq!(out[0], (vec![2, 3, 4, 5, 6], 49, true));
//! assert_eq!(out[3], (vec![2, 3, 4, 5, 6], 49, false));
//! ```
//!
//! # Running on a cluster
//!
//! Built with the feature `mpi` (an application crate forwards it: `mpi = ["pgas/mpi"]` in its
//! `[features]`), the same program runs one process per rank under `mpirun`; [`launch`] then
//! returns this process's rank's result (see the README's mpi section). Its [`RankResults`]
//! are the same type on both conduits, so a report printed through them prints once:
//!
//! ```
//! use pgas::{LaunchConfig, RpcTable, launch, rank_me};
//!
//! let out = launch(&LaunchConfig::new(4).segment_bytes(1 << 20), RpcTable::new(), || {
//!     pgas::reduce_all(rank_me() as u64, pgas::ops::add).wait()
//! })
//! .unwrap();
//! out.print_once(|sum| format!("sum of ranks: {sum}")); // by rank 0's process only
//! assert_eq!(out.rank0(), Some(&6)); // on smp this process ran every rank
//! ```

// The modules in layers, each importing only the layers above it (pgas/src/README.md gives the
// order of the files within a layer).
// Plain data and the wire format:
pub mod array_layout;
pub mod error;
mod heap;
mod hook;
mod mix;
pub mod rank_results;
mod view_area;
mod wire;
// The rank's runtime:
mod runtime;
// Futures, promises, operations in flight, and pgas messages:
pub mod future;
mod messages;
mod pending;
pub mod promise;
// The mechanisms:
pub mod alloc;
mod array_blocks;
pub mod atomic_domain;
pub mod collectives;
pub mod dist_array;
pub mod dist_object;
mod dist_registry;
pub mod flag_sync;
pub mod global_ptr;
pub mod local_view;
pub mod lock;
mod program_agreement;
pub mod remote_registry;
pub mod rma;
pub mod rpc;
pub mod strided;
pub mod team;
pub mod view_array;
// For resilience runtimes:
mod fault;
mod resilience;
// The job's start:
mod launch;
mod rerun;

pub use alloc::{delete_, new_, new_array, shared_bytes_in_use};
pub use array_layout::{Layout, LocalIndices};
pub use atomic_domain::{AtomicDomain, AtomicValue, SyncOrder};
pub use collectives::{
    allgather, allgather_on, barrier, barrier_async, barrier_async_on, barrier_on, broadcast,
    broadcast_on, ops, reduce_all, reduce_all_on, reduce_all_u64, reduce_all_u64_on, reduce_one,
    reduce_one_on,
};
pub use dist_array::{DistArray, Reducible};
pub use dist_object::DistObject;
pub use error::{ArrayError, DistObjectError, PgasError, ViewError};
pub use flag_sync::{Signal, put_signal, wait_until};
pub use future::{Future, when_all};
pub use global_ptr::GlobalPtr;
pub use launch::{launch, launch_from_env};
pub use local_view::{
    ViewPtr, delete_viewable, new_viewable, view_get, view_put, with_local, with_local_mut,
};
pub use lock::DistLock;
pub use mix::mix64;
pub use pgas_macros::remote;
pub use promise::Promise;
pub use rank_results::RankResults;
pub use remote_registry::{Remote, Reply};
pub use rma::{
    Completions, CxFutures, rget, rget_into, rget_slice, rget_with, rput, rput_slice, rput_with,
};
pub use rpc::{RpcFn, RpcTable, RpcTarget, rpc, rpc_ff};
pub use runtime::{epoch, fence, in_launch, node_of, poll_until, progress, rank_me, rank_n, stop};
pub use strided::{
    rget_irregular, rget_regular, rget_strided, rput_irregular, rput_regular, rput_strided,
};
pub use team::{Team, local_team, solo_team, world};
pub use view_array::ViewArray;

/// **For authors of resilience runtimes (cd-runtime), not for programs**: the interception
/// hook that sees every operation a rank starts, the rank's counters, the runtime's own
/// traffic unseen by the hook, re-running logged rpcs, and the emulated loss of a rank's memory.
pub mod runtime_hooks {
    pub use crate::error::RerunError;
    pub use crate::fault::{POISON, emulate_memory_loss};
    pub use crate::hook::{
        AllocAction, AtomicAction, Collective, CollectiveAction, CollectiveKind, Fetch,
        FetchAction, FreeAction, GetAction, Interceptor, OpId, PutAction, ReplyAction, Rma,
        RpcAction, RpcCall, RpcReply, ServedRequest, SyncEvent,
    };
    pub use crate::launch::launch_rerunning;
    pub use crate::rerun::recovered;
    pub use crate::resilience::{
        cancel_deferred_free, clear_hook, count_incoming_writes, counts_incoming_writes,
        deferred_frees, epoch, free_deferred, in_handler, incoming_writes, internal, is_internal,
        keep_until_job_end, pending_acks, rerun_rpc, rput_uncounted, serving_request, set_epoch,
        set_hook, wait_for_acks,
    };
    pub use gasnet_bridge::Recovered;
}

/// **For pgas's own tests and the benchmarks** (feature `testing`): the raw endpoint beside
/// the API, and the run-by-run baselines of the strided transfers.
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::runtime::bench_endpoint;
    pub use crate::strided::{rget_strided_run_by_run, rput_strided_run_by_run};
}

/// What the code `#[pgas::remote]` writes names; not for programs.
#[doc(hidden)]
pub mod __private {
    pub use linkme;
}

/// Re-exported so users can derive `Pod` for their own types.
pub use bytemuck;
/// The configuration type of [`launch`].
pub use gasnet_bridge::LaunchConfig;
/// The error type of [`launch`] (re-exported so that a program can match on a failed job
/// without naming the communication core's crate).
pub use gasnet_bridge::LaunchError;
/// The spare processes a job asks for (a program's `--spares S`, else `PGAS_SPARES`; mpi
/// conduit with the `ulfm` feature).
pub use gasnet_bridge::{request_spares, spares_wanted};

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
