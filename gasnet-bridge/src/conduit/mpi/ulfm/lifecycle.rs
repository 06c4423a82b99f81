//! What a job's life does differently with ULFM: the spares split off at start and released at
//! the end, and a lost process answered by the recovery instead of the end of every process.

use std::sync::atomic::Ordering;

use ::mpi::ffi;

use crate::error::{BridgeError, LaunchError};

use super::super::process::POISONED;
use super::members::{self, Place};
use super::mpix;
use super::spare::{self, Called};
use super::unrecovered::end_after_loss;

/// The communicator of the processes that hold ranks, over which the job's world is built. A
/// spare does not return: it waits, then ends with the job or joins the recovery.
pub(crate) fn rank_holders() -> Result<ffi::MPI_Comm, LaunchError> {
    let conduit = |e: BridgeError| LaunchError::Conduit(e.to_string());
    match members::split().map_err(conduit)? {
        Place::Rank(comm) => Ok(comm),
        Place::Spare => match spare::wait().map_err(conduit)? {
            // Not needed: MPI is finalized at exit, with every other process.
            Called::Released => std::process::exit(0),
            Called::Dismissed => {
                // The ranks end without finalizing MPI (their job failed), so neither does it.
                POISONED.store(true, Ordering::Release);
                std::process::exit(1)
            }
            Called::ToRecover => end_after_loss(None),
        },
    }
}

/// Tells every process which job rank this process holds, once its world is set up.
pub(crate) fn started(rank: usize) -> Result<(), LaunchError> {
    members::publish(Some(rank)).map_err(|e| LaunchError::Conduit(e.to_string()))
}

/// After a normal end of the job: job rank 0 releases the spares.
pub(crate) fn ended(rank: usize) -> Result<(), LaunchError> {
    if rank == 0 {
        spare::release().map_err(|e| LaunchError::Conduit(e.to_string()))?;
    }
    Ok(())
}

/// After the rank's body unwound: if a process was lost (`lost`, the watchdog's word, or an MPI
/// error of this process saying so) the recovery runs and this does not return; otherwise
/// the spares are told the job failed, and the caller ends it as without spares.
pub(crate) fn failed(job: ffi::MPI_Comm, lost: bool) {
    if lost || mpix::failure_seen() || mpix::comm_has_failure(job) {
        end_after_loss(Some(job));
    }
    spare::dismiss();
}
