//! Parallel restart: a re-execution may spread its own work over more threads than the
//! first execution used, as Charm++ spreads a failed processor's objects over the survivors
//! (seed 004). A CD that recovers alone (a relaxed CD replaying its log, a rank recovering
//! from its loss with a replicated log, a dependency-limited re-execution) leaves the other
//! ranks waiting at their next synchronization, and their cores idle; `restart_threads = N`
//! in the configuration hands the re-execution a pool of N threads to run its kernels on
//! ([`crate::Cd::restart_pool`]).
//!
//! The pools belong to the process and are shared by its ranks (on smp, every rank is a
//! thread of it; under mpirun, each process has its own): one pool per thread count, built
//! on first use and kept, so a recovery does not pay for starting threads. Two ranks
//! recovering at once share the pool, as rayon shares its workers between callers. The
//! pool changes the order in which the program's work runs, never what it computes: the
//! program keeps its results independent of the thread count (a kernel splits its output
//! into disjoint parts, a reduction keeps a fixed order), which is what a bit-exact
//! recovery needs.

use std::sync::{Arc, Mutex, OnceLock};

/// The process's restart pools, by thread count.
static POOLS: OnceLock<Mutex<Vec<Arc<rayon::ThreadPool>>>> = OnceLock::new();

/// The process's pool of `threads` threads (built on first use); `Err` names why it could
/// not be built.
pub(crate) fn pool(threads: usize) -> Result<Arc<rayon::ThreadPool>, String> {
    let mut pools = POOLS
        .get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(p) = pools.iter().find(|p| p.current_num_threads() == threads) {
        return Ok(p.clone());
    }
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("cd-restart-{i}"))
        .build()
        .map_err(|e| format!("cannot start a restart pool of {threads} threads: {e}"))?;
    let p = Arc::new(p);
    pools.push(p.clone());
    Ok(p)
}
