//! A loss during the start-up (`RECOVERY.md`, "A loss during the start-up"): the live
//! processes agree on the dead, and the start-up runs again over them when they are enough to
//! hold every rank; otherwise the job ends with one line.

use ::mpi::ffi;

use crate::error::BridgeError;

use super::deadline::Deadline;
use super::members;
use super::mpix;
use super::recovery::lost_at_start;
use super::unrecovered::{end_failed_recovery, end_with};

/// After a start-up that failed with `error` (`holders`: this process's communicator of the
/// rank holders, `None` at a spare): if a process was lost meanwhile, the live processes agree
/// on the dead, and the start-up runs again over them (true) when they are enough to hold every
/// rank, the first saying so in one line; when they are too few, every live process ends with
/// status 1 and the first prints one line. False when no process was lost: `error` is then
/// this process's own.
pub(crate) fn start_again_if_lost(holders: Option<ffi::MPI_Comm>, error: &BridgeError) -> bool {
    let Some((all, ranks)) = members::with(|m| m.map(|m| (m.all, m.ranks))) else {
        return false;
    };
    let lost = || {
        mpix::failure_seen()
            || mpix::comm_has_failure(all)
            || holders.is_some_and(mpix::comm_has_failure)
    };
    // Armed before the agreement: a holder still in a set-up collective over a communicator
    // made from the holders' (its host's) is not woken by the revoke below, and must not hold
    // this process forever.
    let deadline = lost().then(|| Deadline::arm_for("a start-up that lost a process"));
    if let (Some(holders), Some(_)) = (holders, &deadline) {
        // Wakes the holders still in a set-up collective, so that they reach the agreement.
        // SAFETY: a valid communicator of this process; a second revoke is harmless.
        unsafe { mpix::MPIX_Comm_revoke(holders) };
    }
    // This process's part of the start-up's agreement, if it failed before making it: the
    // others then learn that the start-up failed, uniformly.
    let _ = members::agree_start(false);
    if !lost() {
        return false;
    }
    let deadline = deadline.unwrap_or_else(|| Deadline::arm_for("a start-up that lost a process"));
    let l = match lost_at_start(holders) {
        Ok(l) => l,
        Err(f) => end_failed_recovery(f),
    };
    let died = format!(
        "process{} {:?} of MPI_COMM_WORLD died during the conduit's start-up, before any \
         rank's body ran ({error})",
        if l.dead.len() == 1 { "" } else { "es" },
        l.dead
    );
    if l.live < ranks {
        end_with(l.first.then(|| {
            format!(
                "{died}; {} processes live for {ranks} ranks, no spare is left to take the \
                 place of the dead, and the job ends: start more with PGAS_SPARES and \
                 mpirun -n N+S",
                l.live
            )
        }))
    }
    if l.first {
        crate::stderr_line::stderr_line(format_args!(
            "gasnet-bridge (mpi conduit): {died}; the start-up runs again over the {} live \
             processes, {} of them spare",
            l.live,
            l.live - ranks
        ));
    }
    // The failure belongs to the start-up given up: one of the next counts only if it says so.
    mpix::forget_failure();
    deadline.disarm();
    true
}
