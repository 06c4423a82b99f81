//! Starting a job on the smp conduit: one thread per rank, results or the first failure back.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread;

use crate::active_message::HandlerTable;
use crate::conduit::smp::SmpWorld;
use crate::config::LaunchConfig;
use crate::endpoint::Endpoint;
use crate::error::LaunchError;
use crate::failure::{PeerFailure, panic_message};

/// Runs `body` on every rank of a job shaped by `config`, with the AM `handlers`, and returns
/// each rank's result in rank order.
///
/// When a rank panics, the others are woken at their next wait and unwound; the error names
/// the first rank that panicked and its message. After its body returns a rank keeps serving
/// active messages until all ranks have returned, so nobody waits on a departed rank.
///
/// The conduit is chosen when the job starts ([`crate::conduit::selected`]). On **smp** the
/// ranks are threads of this process and the vector holds every rank's result. On **mpi**
/// (built with the `mpi` feature, run under `mpirun -n N`):
///
/// * the job spans every process of `MPI_COMM_WORLD`: the world size wins over
///   `config.ranks`, and `config.ranks_per_node` is ignored (nodes are the real hosts);
///   `config.segment_bytes` is used and must be the same in every process;
/// * each process runs one rank, so the vector holds **this process's rank's result only**
///   (one element); [`returned_ranks`] tells which rank that was, and
///   [`Endpoint::rank`] inside the body gives it too;
/// * every process must call `launch` the same number of times, in the same order;
/// * a rank that panics or whose process dies makes every other process's `launch` return
///   [`LaunchError::RankPanicked`] naming it (and the process exit within seconds, see the
///   conduit's watchdog); after that no further job can start in this process.
pub fn launch<R, F>(
    config: &LaunchConfig,
    handlers: HandlerTable,
    body: F,
) -> Result<Vec<R>, LaunchError>
where
    R: Send,
    F: Fn(&Endpoint) -> R + Sync,
{
    config.validate()?;
    crate::sleep::hang_report_after()?;
    let kind = crate::conduit::selected()?;
    config.check_fits(kind != crate::conduit::ConduitKind::Smp)?;
    match kind {
        crate::conduit::ConduitKind::Smp => {}
        #[cfg(feature = "mpi")]
        crate::conduit::ConduitKind::Mpi => {
            let results = crate::conduit::mpi::launch(config, handlers, |ep| {
                LAST_RANK.store(ep.rank(), std::sync::atomic::Ordering::Relaxed);
                body(ep)
            })?;
            return Ok(results);
        }
        #[cfg(not(feature = "mpi"))]
        crate::conduit::ConduitKind::Mpi => unreachable!("`selected` refuses mpi without it"),
    }
    LAST_RANK.store(usize::MAX, std::sync::atomic::Ordering::Relaxed);
    let world = Arc::new(SmpWorld::new(config, handlers));
    let body = &body;
    // Rank 0 runs on the calling thread: a one-rank job starts no thread at all, and rank 0's
    // allocations come from the caller's malloc arena, as in a program without pgas (LULESH on
    // a spawned rank thread ran 5-9% slower at -s 30, its arrays in a thread arena).
    let results: Vec<Option<R>> = thread::scope(|scope| {
        let mut threads = Vec::with_capacity(config.ranks);
        for rank in 1..config.ranks {
            let rank_world = world.clone();
            let spawned = thread::Builder::new()
                .name(format!("rank {rank}"))
                .spawn_scoped(scope, move || run_rank(rank, rank_world, body));
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    world.fail(rank, format!("could not start its thread: {e}"));
                    break;
                }
            }
        }
        let first = run_rank(0, world.clone(), body);
        std::iter::once(first)
            .chain(threads.into_iter().map(|t| t.join().unwrap_or(None)))
            .collect()
    });
    if let Some((rank, message)) = world.failure.first() {
        return Err(if results.len() < config.ranks && rank == results.len() {
            LaunchError::Spawn {
                rank,
                reason: message,
            }
        } else {
            LaunchError::RankPanicked { rank, message }
        });
    }
    Ok(results
        .into_iter()
        .map(|r| r.expect("a rank without a result recorded a failure"))
        .collect())
}

/// This process's rank in the last job of the mpi conduit; `usize::MAX` after an smp job.
static LAST_RANK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(usize::MAX);

/// The ranks whose results the last [`launch`] of this process returned, in the order of the
/// returned vector: `0..ranks` after an smp job, `r..r + 1` after an mpi job that ran rank
/// `r` here, `None` before any job.
pub fn returned_ranks(ranks: usize) -> Option<std::ops::Range<usize>> {
    match LAST_RANK.load(std::sync::atomic::Ordering::Relaxed) {
        usize::MAX if ranks > 0 => Some(0..ranks),
        usize::MAX => None,
        r => Some(r..r + 1),
    }
}

/// The rank count of a program's job, given by its option `flag` (`--ranks`, `RANKS`) or not:
/// [`LaunchConfig::resolve_ranks`] with this process's MPI world and environment. Under
/// `mpirun` the number of processes (a different `given` is an error naming both), otherwise
/// `given`, else `PGAS_RANKS`, else `default`.
pub fn job_ranks(flag: &str, given: Option<usize>, default: usize) -> Result<usize, LaunchError> {
    let world = crate::conduit::mpi_world()?.map(|(_, size)| size);
    Ok(LaunchConfig::resolve_ranks(
        flag,
        given,
        default,
        world,
        |var| std::env::var(var).ok(),
    )?)
}

/// [`launch`] with the shape read from the environment (`PGAS_RANKS`, `PGAS_SEGMENT_MB`,
/// `PGAS_RANKS_PER_NODE`), `default_ranks` when `PGAS_RANKS` is unset.
pub fn launch_from_env<R, F>(
    default_ranks: usize,
    handlers: HandlerTable,
    body: F,
) -> Result<Vec<R>, LaunchError>
where
    R: Send,
    F: Fn(&Endpoint) -> R + Sync,
{
    let config = LaunchConfig::from_env(default_ranks)?;
    launch(&config, handlers, body)
}

fn run_rank<R, F>(rank: usize, world: Arc<SmpWorld>, body: &F) -> Option<R>
where
    F: Fn(&Endpoint) -> R,
{
    world.sleepers[rank].register_current();
    let endpoint = Endpoint::new(rank, world.clone());
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let result = body(&endpoint);
        endpoint.finish();
        result
    }));
    match outcome {
        Ok(result) => Some(result),
        Err(payload) => {
            if !payload.is::<PeerFailure>() {
                world.fail(rank, panic_message(&*payload));
            }
            None
        }
    }
}
