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
use super::unrecovered::{
    AFTER_END, UNCAUGHT, end_after_loss, end_failed_recovery, end_if_lost_at_start, end_recovered,
    go_on, say_place,
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
/// a lost rank. A spare that is not needed does not return: it ends with the job.
pub(crate) fn rank_holders() -> Result<Holders, LaunchError> {
    let conduit = |e: BridgeError| LaunchError::Conduit(e.to_string());
    // From the membership on, a process lost after the job's end must not leave the others
    // in `MPI_Finalize` (MPI's own finalize was registered at its initialization, before).
    exit_check::register();
    let split = members::split().map_err(|e| {
        end_if_lost_at_start(None, &e);
        conduit(e)
    });
    match split? {
        Place::Rank(comm) => Ok(Holders::Start(comm)),
        Place::Spare => loop {
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
        },
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

/// Tells every process which job rank this process holds, once its world is set up over the
/// communicator of the rank holders `holders`.
pub(crate) fn started(holders: ffi::MPI_Comm, rank: usize) -> Result<(), LaunchError> {
    members::publish(Some(rank)).map_err(|e| set_up_failed(holders, e))
}

/// The error of a rank holder's start-up over `holders`; when a process was lost meanwhile the
/// job ends with one line instead, and this does not return (`unrecovered.rs`).
pub(crate) fn set_up_failed(holders: ffi::MPI_Comm, e: BridgeError) -> LaunchError {
    end_if_lost_at_start(Some(holders), &e);
    LaunchError::Conduit(e.to_string())
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
