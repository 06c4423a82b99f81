//! Starting a job: on the smp conduit one thread per rank, on the mpi conduit this process's
//! rank; results or the first failure back.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread;

use crate::conduit::driver::Driver;
use crate::conduit::kind::{ConduitKind, mpi_world, selected};
use crate::conduit::smp::{SmpDriver, SmpWorld};
use crate::config::LaunchConfig;
use crate::endpoint::{Endpoint, RunHandlers};
use crate::error::LaunchError;
use crate::failure::{PeerFailure, panic_message};
use crate::handler_table::HandlerTable;

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
    let kind = selected()?;
    config.check_fits(kind != ConduitKind::Smp)?;
    let handlers: Arc<dyn RunHandlers> = Arc::new(handlers);
    match kind {
        ConduitKind::Smp => {}
        #[cfg(feature = "mpi")]
        ConduitKind::Mpi => {
            let results = launch_mpi(config, handlers, |ep| {
                LAST_RANK.store(ep.rank(), std::sync::atomic::Ordering::Relaxed);
                body(ep)
            })?;
            return Ok(results);
        }
        #[cfg(not(feature = "mpi"))]
        ConduitKind::Mpi => unreachable!("`selected` refuses mpi without it"),
    }
    LAST_RANK.store(usize::MAX, std::sync::atomic::Ordering::Relaxed);
    let world = Arc::new(SmpWorld::new(config));
    let handlers = &handlers;
    let body = &body;
    // Rank 0 runs on the calling thread: a one-rank job starts no thread at all, and rank 0's
    // allocations come from the caller's malloc arena, as in a program without pgas (a
    // thread arena placed LULESH's arrays less well, and a one-rank run was measurably slower).
    let results: Vec<Option<R>> = thread::scope(|scope| {
        let mut threads = Vec::with_capacity(config.ranks);
        for rank in 1..config.ranks {
            let rank_world = world.clone();
            let spawned = thread::Builder::new()
                .name(format!("rank {rank}"))
                .spawn_scoped(scope, move || run_rank(rank, rank_world, handlers, body));
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    world.fail(rank, format!("could not start its thread: {e}"));
                    break;
                }
            }
        }
        let first = run_rank(0, world.clone(), handlers, body);
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
    let world = mpi_world()?.map(|(_, size)| size);
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

fn run_rank<R, F>(
    rank: usize,
    world: Arc<SmpWorld>,
    handlers: &Arc<dyn RunHandlers>,
    body: &F,
) -> Option<R>
where
    F: Fn(&Endpoint) -> R,
{
    let driver = Driver::Smp(SmpDriver::new(rank, world.clone()));
    let endpoint = Endpoint::new(rank, driver, handlers.clone());
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

/// `launch` on the mpi conduit: this process runs one rank of a job spanning every process of
/// `MPI_COMM_WORLD`; see [`launch`] for the rules.
#[cfg(feature = "mpi")]
fn launch_mpi<R, F>(
    config: &LaunchConfig,
    handlers: Arc<dyn RunHandlers>,
    body: F,
) -> Result<Vec<R>, LaunchError>
where
    F: Fn(&Endpoint) -> R,
{
    use crate::conduit::driver::MpiDriver;
    use crate::conduit::mpi;
    let mpi::Joined {
        world,
        link,
        recovered,
    } = mpi::start(config)?;
    let me = world.rank();
    let driver = Driver::Mpi(Box::new(std::cell::RefCell::new(MpiDriver { world, link })));
    let endpoint = Endpoint::new(me, driver, handlers);
    if let Some(r) = recovered {
        endpoint.set_recovered(r);
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let result = body(&endpoint);
        endpoint.finish();
        result
    }));
    // The world as the endpoint leaves it (rebuilt, if the job recovered from a loss). The
    // endpoint goes first: the window is freed only after every reference into it.
    let (world, link) = endpoint
        .into_driver()
        .into_mpi()
        .expect("an mpi job's driver is mpi");
    match outcome {
        Ok(result) => {
            mpi::end_normally(world)?;
            drop(link);
            Ok(vec![result])
        }
        Err(payload) => Err(mpi::end_failed(world, &link, payload)),
    }
}
