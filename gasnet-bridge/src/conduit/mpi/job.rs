//! The life of a job on this conduit around the rank's body: the world set up, then freed after
//! a normal end, or kept (its MPI objects cannot be freed) after a failure, which poisons MPI
//! for this process.

use std::any::Any;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use crate::config::LaunchConfig;
use crate::error::{BridgeError, LaunchError};
use crate::failure::{PeerFailure, Stopped, panic_message};
use crate::recovered::Recovered;

use super::pending::Link;
use super::process::{self, JOB_ACTIVE, POISONED};
use super::watchdog;
use super::world::MpiWorld;

/// This process's place in a job it joined: its world, the link its handles hold, and, on a
/// replacement, what the recovery that gave it its rank tells the body.
pub(crate) struct Joined {
    pub(crate) world: Rc<MpiWorld>,
    pub(crate) link: Rc<Link>,
    pub(crate) recovered: Option<Recovered>,
}

/// Sets up this process's rank of a job spanning every process of `MPI_COMM_WORLD`
/// (collective), with the link its completion handles will hold. With ULFM a spare returns
/// from here only when a recovery gave it a lost rank: then with what its body is told.
pub(crate) fn start(config: &LaunchConfig) -> Result<Joined, LaunchError> {
    if POISONED.load(Ordering::Acquire) {
        return Err(LaunchError::Conduit(
            "an earlier job of this process failed; MPI cannot start another one".into(),
        ));
    }
    process::check_thread(process::process()?)?;
    #[cfg(feature = "ulfm")]
    let world = loop {
        use super::ulfm::lifecycle::{self, Holders, SetUp};
        match lifecycle::rank_holders()? {
            Holders::Start(holders) => match lifecycle::set_up(config, holders)? {
                SetUp::Started(world) => break world,
                SetUp::Again => {}
            },
            Holders::Replace(new, deadline) => {
                let (world, recovered) = lifecycle::replacement(config, new, deadline);
                let link = Link::new(world.clone());
                return Ok(Joined {
                    world,
                    link,
                    recovered: Some(recovered),
                });
            }
        }
    };
    #[cfg(not(feature = "ulfm"))]
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    let world = MpiWorld::new(config, unsafe { ::mpi::ffi::RSMPI_COMM_WORLD })
        .map_err(|e| LaunchError::Conduit(e.to_string()))?;
    let link = Link::new(world.clone());
    Ok(Joined {
        world,
        link,
        recovered: None,
    })
}

/// `Endpoint::recover` on this conduit: after a peer's failure this rank caught, the recovery
/// and the rebuild of `world` in place, with a new `link` (`ulfm/RECOVERY.md`). Ends the
/// process when the job cannot go on. Refused when no process was lost, and without ULFM.
pub(crate) fn recover(
    world: &mut Rc<MpiWorld>,
    link: &mut Rc<Link>,
) -> Result<Recovered, BridgeError> {
    #[cfg(feature = "ulfm")]
    {
        let lost = lost_a_process(world);
        let failed = world.job.shared.failure.is_failed();
        if !lost
            && (failed
                || !(super::ulfm::mpix::failure_seen()
                    || super::ulfm::mpix::comm_has_failure(world.job.comm)))
        {
            return Err(BridgeError::RecoverRefused(
                "no process of the job was lost (a rank that panicked or stopped ends the \
                 job; let the unwind reach launch)",
            ));
        }
        Ok(super::ulfm::lifecycle::rebuild_survivor(world, link))
    }
    #[cfg(not(feature = "ulfm"))]
    {
        let _ = (world, link);
        Err(BridgeError::RecoverRefused(
            "a lost process is recovered only with the `ulfm` cargo feature and an MPI with \
             ULFM (`. .ci/ulfm-env`, then build with `--features ulfm` and run under \
             `mpirun --with-ft ulfm` with PGAS_SPARES); without it a lost process ends the job",
        ))
    }
}

/// Whether the job's first failure is a lost process (the watchdog's message for it), not a
/// rank that panicked or stopped.
#[cfg(feature = "ulfm")]
fn lost_a_process(world: &MpiWorld) -> bool {
    world
        .job
        .shared
        .failure
        .first()
        .is_some_and(|(r, m)| m == watchdog::lost_message(r))
}

/// Frees the world's MPI objects after the body returned and the job reached quiescence on
/// every rank. The link stays valid: the job completed every operation, so handles kept past
/// it answer from what it left.
pub(crate) fn end_normally(world: Rc<MpiWorld>) -> Result<(), LaunchError> {
    if let Err(e) = world.teardown() {
        // A process lost in the teardown, after every body returned: the job ends with one
        // line, as for a loss at a process's exit.
        #[cfg(feature = "ulfm")]
        {
            super::ulfm::lifecycle::teardown_failed(world.job.comm, lost_a_process(&world));
        }
        return Err(LaunchError::Conduit(e.to_string()));
    }
    JOB_ACTIVE.store(false, Ordering::Release);
    #[cfg(feature = "ulfm")]
    super::ulfm::lifecycle::ended(world.rank())?;
    Ok(())
}

/// Ends a job whose body unwound with `payload`: the error names the rank that failed first.
/// The link is invalidated, so a handle kept past the job answers `JobEnded` without reaching
/// the world; the world itself is leaked, because freeing MPI objects is collective and the
/// failed ranks will not take part.
pub(crate) fn end_failed(
    world: Rc<MpiWorld>,
    link: &Link,
    payload: Box<dyn Any + Send>,
) -> LaunchError {
    POISONED.store(true, Ordering::Release);
    let me = world.kept.rank;
    #[cfg(feature = "ulfm")]
    {
        // A lost process is answered by the recovery, which does not return; any other
        // failure ends the job as without ULFM, the spares with it.
        let lost = payload.is::<PeerFailure>()
            && world
                .job
                .shared
                .failure
                .first()
                .is_some_and(|(r, m)| m == watchdog::lost_message(r));
        super::ulfm::lifecycle::failed(world.job.comm, lost);
    }
    let (rank, message) = if payload.is::<PeerFailure>() {
        world
            .job
            .shared
            .failure
            .first()
            .unwrap_or((me, "unknown failure".into()))
    } else {
        let message = panic_message(&*payload);
        // A deliberate stop is the program's to report: the others end quietly.
        let stopped = payload.is::<Stopped>();
        if let Some(dog) = world.job.watchdog.borrow().as_ref() {
            dog.report_failure(&message, stopped);
        }
        (me, message)
    };
    world.job.ended.set(true);
    link.invalidate();
    std::mem::forget(world);
    if message == watchdog::lost_message(rank) {
        // Killed or crashed: it did not panic.
        return LaunchError::RankLost { rank, message };
    }
    LaunchError::RankPanicked { rank, message }
}
