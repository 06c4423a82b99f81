//! What a job's life does differently with ULFM: the spares split off at start and released at
//! the end, and a lost process answered by the recovery instead of the end of every process.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use ::mpi::ffi;

use crate::config::LaunchConfig;
use crate::error::{BridgeError, LaunchError};
use crate::recovered::Recovered;

use super::super::pending::Link;
use super::super::process::POISONED;
use super::super::world::MpiWorld;
use super::deadline::Deadline;
use super::exit_check;
use super::members::{self, Place};
use super::mpix;
use super::rebuild;
use super::recovery::{NewJob, recover};
use super::spare::{self, Called};
use super::start_again::start_again_if_lost;
use super::unrecovered::{
    AFTER_END, UNCAUGHT, end_after_loss, end_failed_recovery, end_recovered, go_on, say_place,
};

/// What this process does in the job.
pub(crate) enum Holders {
    /// It holds a rank from the start: the job's world is built over this communicator of the
    /// rank holders.
    Start(ffi::MPI_Comm),
    /// It is a spare that a recovery gave a lost rank: its world is built with the survivors'
    /// rebuild, within the recovery's deadline.
    Replace(NewJob, Deadline),
}

/// Where this process stands: a rank holder from the start, or a spare that waited and took
/// a lost rank. A spare that is not needed does not return: it ends with the job. A process
/// lost during the split makes it run again over the live processes (`start_again_if_lost`).
pub(crate) fn rank_holders() -> Result<Holders, LaunchError> {
    // From the membership on, a process lost after the job's end must not leave the others
    // in `MPI_Finalize` (MPI's own finalize was registered at its initialization, before).
    exit_check::register();
    loop {
        match members::split() {
            Ok(Place::Rank(comm)) => return Ok(Holders::Start(comm)),
            Ok(Place::Spare) => return wait_as_spare(),
            Err(e) if start_again_if_lost(None, &e) => {}
            Err(e) => return Err(LaunchError::Conduit(e.to_string())),
        }
    }
}

/// A spare's life: idle until released, dismissed, or given a lost rank by a recovery.
fn wait_as_spare() -> Result<Holders, LaunchError> {
    let conduit = |e: BridgeError| LaunchError::Conduit(e.to_string());
    loop {
        match spare::wait().map_err(conduit)? {
            // Not needed: MPI is finalized at exit, with every other process.
            Called::Released => std::process::exit(0),
            Called::Dismissed => {
                // The ranks end without finalizing MPI (their job failed), so neither does it.
                POISONED.store(true, Ordering::Release);
                std::process::exit(1)
            }
            Called::ToRecover => {
                let deadline = Deadline::arm();
                let new = match recover(None) {
                    Ok(r) => r,
                    Err(f) => end_failed_recovery(f),
                };
                if !go_on(true) {
                    end_recovered(&new, UNCAUGHT);
                }
                if new.rank.is_some() {
                    return Ok(Holders::Replace(new, deadline));
                }
                // Still idle: wait again, on the communicator the recovery made.
                say_place(&new);
                mpix::forget_failure();
                deadline.disarm();
            }
        }
    }
}

/// `Endpoint::recover` on a survivor: the recovery and the rebuild in place (`rebuild.rs`).
pub(crate) fn rebuild_survivor(world: &mut Rc<MpiWorld>, link: &mut Rc<Link>) -> Recovered {
    rebuild::rebuild_survivor(world, link)
}

/// A replacement's world, built with the survivors' rebuild, and what it tells its body.
pub(crate) fn replacement(
    config: &LaunchConfig,
    new: NewJob,
    deadline: Deadline,
) -> (Rc<MpiWorld>, Recovered) {
    rebuild::replacement(config, new, deadline)
}

/// How a rank holder's start-up over its communicator of the rank holders ended.
pub(crate) enum SetUp {
    /// The world is set up and every process knows the job ranks.
    Started(Rc<MpiWorld>),
    /// A process was lost and enough live: the start-up runs again (`rank_holders` first).
    Again,
}

/// Sets up this rank holder's world over `holders` and tells every process which job rank it
/// holds (collective over every process). A process lost meanwhile makes the start-up run
/// again, or ends the job with one line when no spare is left.
pub(crate) fn set_up(config: &LaunchConfig, holders: ffi::MPI_Comm) -> Result<SetUp, LaunchError> {
    let failed = |e: BridgeError| {
        if start_again_if_lost(Some(holders), &e) {
            Ok(SetUp::Again)
        } else {
            Err(LaunchError::Conduit(e.to_string()))
        }
    };
    let world = match MpiWorld::new(config, holders) {
        Ok(w) => w,
        Err(e) => return failed(e),
    };
    match members::publish(Some(world.rank())) {
        Ok(()) => Ok(SetUp::Started(world)),
        Err(e) => {
            abandon(world);
            failed(e)
        }
    }
}

/// Leaves a world whose start-up failed: its watchdog stopped without a word to its
/// neighbours, its MPI objects leaked (freeing them is collective, and a member may be dead).
fn abandon(world: Rc<MpiWorld>) {
    rebuild::abandon(&world.job);
    std::mem::forget(world);
}

/// After a normal end of the job: job rank 0 releases the spares. A process lost meanwhile
/// (the release failing with its loss) is not this job's error: every process learns of it in
/// the check at its exit (`exit_check.rs`), and an idle spare that saw it takes part there.
pub(crate) fn ended(rank: usize) -> Result<(), LaunchError> {
    if rank == 0 {
        match spare::release() {
            Err(_) if mpix::failure_seen() => {}
            r => r.map_err(|e| LaunchError::Conduit(e.to_string()))?,
        }
    }
    Ok(())
}

/// After the teardown of a job whose bodies all returned failed (`error`): if a process was
/// lost, the recovery runs and the job ends with one line (`AFTER_END`), and this does not
/// return; otherwise the error is the caller's.
pub(crate) fn teardown_failed(job: ffi::MPI_Comm, lost: bool) {
    if lost || mpix::failure_seen() || mpix::comm_has_failure(job) {
        end_after_loss(job, AFTER_END);
    }
}

/// After the rank's body unwound: if a process was lost (`lost`, the watchdog's word, or an MPI
/// error of this process saying so) the recovery runs, the job ends after it (the body did
/// not catch the unwind to recover) and this does not return; otherwise
/// the spares are told the job failed, and the caller ends it as without spares.
pub(crate) fn failed(job: ffi::MPI_Comm, lost: bool) {
    if lost || mpix::failure_seen() || mpix::comm_has_failure(job) {
        end_after_loss(job, UNCAUGHT);
    }
    spare::dismiss();
}
