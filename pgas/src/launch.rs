//! Starting a job: every rank's runtime made with the per-rank state of each mechanism, and the
//! one bridge handler of pgas messages dispatching each kind to the mechanism that handles it.
//! The top of the layers: the only file that names every mechanism.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;

use gasnet_bridge::{ConfigError, HandlerTable, LaunchConfig, LaunchError, Token};

use crate::collectives::{self, CollectiveState};
use crate::dist_object;
use crate::dist_registry::DistRegistry;
use crate::local_view::{self, ViewState};
use crate::messages;
use crate::pending::Pending;
use crate::program_agreement::{self, Registered};
use crate::rank_results::RankResults;
use crate::rerun;
use crate::rpc::{self, PendingReplies, RpcTable};
use crate::runtime::{self, RESERVED, Runtime};
use crate::team::TeamRegistry;
use crate::wire::Kind;

/// Runs `body` on every rank of a job shaped by `config`, with the rpc functions of `rpcs`,
/// and returns the results of the ranks this process ran, in rank order (UPC++
/// `init`/`finalize` around the body): every rank's on smp, this process's rank's under
/// mpirun. [`RankResults::print_once`] prints a report once on either.
///
/// Before a rank returns, every operation in flight anywhere in the job completes (rpcs run,
/// replies arrive). If a rank panics, the error names it and its message. On the mpi conduit
/// the processes first agree that they register the same rpc functions (`#[pgas::remote]`
/// and `rpcs`); if not, no body runs and the error is [`LaunchError::DifferentPrograms`].
pub fn launch<R, F>(
    config: &LaunchConfig,
    rpcs: RpcTable,
    body: F,
) -> Result<RankResults<R>, LaunchError>
where
    R: Send,
    F: Fn() -> R + Sync,
{
    launch_with(config, rpcs, false, body)
}

/// [`launch`] for a resilience runtime whose ranks start their body again after a lost process
/// (`cd-runtime/src/REAL_LOSS.md`): a rank whose body unwinds with a peer's failure calls
/// `Endpoint::recover` and, once the job is rebuilt, runs the body again from its start with
/// a new pgas runtime, as the lost rank's replacement does; the launch-time agreement runs
/// again on every rank with the replacement's. When the recovery is refused (no `ulfm`
/// feature, smp) the unwind goes on and the job ends as under [`launch`].
pub fn launch_rerunning<R, F>(
    config: &LaunchConfig,
    rpcs: RpcTable,
    body: F,
) -> Result<RankResults<R>, LaunchError>
where
    R: Send,
    F: Fn() -> R + Sync,
{
    launch_with(config, rpcs, true, body)
}

/// [`launch`], and with `rerun` [`launch_rerunning`].
fn launch_with<R, F>(
    config: &LaunchConfig,
    rpcs: RpcTable,
    rerun: bool,
    body: F,
) -> Result<RankResults<R>, LaunchError>
where
    R: Send,
    F: Fn() -> R + Sync,
{
    if config.segment_bytes <= RESERVED {
        return Err(LaunchError::Config(ConfigError::BadValue {
            what: "segment size",
            reason: format!(
                "{} bytes; pgas keeps {RESERVED} bytes of each segment, so it needs more",
                config.segment_bytes
            ),
        }));
    }
    // One process runs every rank on smp, with one registry and one table: nothing to agree.
    let registered = gasnet_bridge::conduit::mpi_world()?
        .is_some()
        .then(|| Registered::of(&rpcs));
    let rpcs = Arc::new(rpcs);
    // One process runs every rank on smp: every rank reaches every viewable area directly.
    let smp_areas = registered
        .is_none()
        .then(|| local_view::areas(config.ranks, 0..config.ranks, config.segment_bytes));
    let mut handlers = HandlerTable::new();
    let msg_handler = handlers.register("pgas.message", |token: &Token<'_>| {
        messages::receive(token, deliver)
    });
    let tagged = gasnet_bridge::launch(config, handlers, |ep| {
        let attempt = || {
            let reach = smp_areas.clone().unwrap_or_else(|| {
                let me = ep.rank();
                local_view::areas(ep.ranks(), me..me + 1, ep.segment_len())
            });
            // The most used first: `Runtime::state` looks them up in this order.
            let states: Vec<Box<dyn Any>> = vec![
                Box::new(PendingReplies::default()),
                Box::new(rpcs.clone()),
                Box::new(DistRegistry::default()),
                Box::new(CollectiveState::default()),
                Box::new(TeamRegistry::new(ep)),
                Box::new(ViewState::new(ep.rank(), reach)),
            ];
            let rt = Runtime::new(ep, msg_handler, Box::new(Pending::default()), states);
            let run = || {
                // Inside the new runtime: a faster rank's first messages may arrive during
                // the barrier, and their handlers need it.
                if rerun && ep.recovered().is_some() {
                    rerun::rejoin(ep);
                }
                match &registered {
                    Some(mine) => program_agreement::agree(mine).map(|()| body()),
                    None => Ok(body()),
                }
            };
            runtime::run_rank(&rt, run)
        };
        if !rerun {
            return (ep.rank(), ep.ranks(), attempt());
        }
        loop {
            match catch_unwind(AssertUnwindSafe(attempt)) {
                Ok(out) => return (ep.rank(), ep.ranks(), out),
                // Nothing of the body is on the stack: the recovery may rebuild the world.
                Err(p) if rerun::is_peer_failure(&*p) => {
                    if ep.recover().is_err() {
                        resume_unwind(p);
                    }
                }
                Err(p) => resume_unwind(p),
            }
        }
    })?;
    if let Some(message) = tagged.iter().find_map(|t| t.2.as_ref().err()) {
        return Err(LaunchError::DifferentPrograms {
            message: message.clone(),
        });
    }
    let first = tagged.first().map_or(0, |t| t.0);
    let job_ranks = tagged.first().map_or(0, |t| t.1);
    Ok(RankResults::new(
        first,
        job_ranks,
        tagged.into_iter().filter_map(|(_, _, r)| r.ok()).collect(),
    ))
}

/// [`launch`] shaped by `PGAS_RANKS` (default `default_ranks`), `PGAS_SEGMENT_MB` and
/// `PGAS_RANKS_PER_NODE`.
pub fn launch_from_env<R, F>(
    default_ranks: usize,
    rpcs: RpcTable,
    body: F,
) -> Result<RankResults<R>, LaunchError>
where
    R: Send,
    F: Fn() -> R + Sync,
{
    let config = LaunchConfig::from_env(default_ranks)?;
    launch(&config, rpcs, body)
}

/// Hands a whole pgas message to the mechanism of its kind.
fn deliver(rt: &Runtime, token: &Token<'_>, kind: Kind, header: &[u64], payload: &[u8]) {
    match kind {
        Kind::RpcRequest => rpc::handle_request(rt, token, header, payload),
        Kind::RpcReply => rpc::handle_reply(rt, token.source(), header, payload),
        Kind::Collective => collectives::handle(rt, token.source(), header, payload),
        Kind::DistFetch => dist_object::handle_fetch(rt, token, header),
        Kind::View => local_view::handle(rt, token, header, payload),
    }
}
