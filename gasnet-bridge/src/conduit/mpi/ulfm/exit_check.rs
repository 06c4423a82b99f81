//! The check at a process's exit, before `MPI_Finalize`, that no process of the job was lost
//! after every rank had finished the job (`RECOVERY.md`, "A loss after the job's end").
//!
//! Open MPI 5.0.11's `MPI_Finalize` waits for every process of `MPI_COMM_WORLD`, a killed one
//! too, forever; and once the job has ended no watchdog or recovery deadline is armed. So a
//! process killed between the end of the job and its own finalize (HPGMG printing its held
//! report, the spares' release, the exit) left every other process in `ompi_mpi_finalize`
//! and the job hung. Here every live process first shrinks the communicator of every process,
//! which ULFM completes over the live ones whoever died: the same dead set at each, agreed as
//! the recovery agrees it. None dead: `MPI_Finalize`. Some dead: the recovery's renumbering,
//! which an idle spare that saw the loss runs too, then the job ends with one line
//! (`unrecovered.rs`) without finalizing; only idle spares dead: one line, and the processes
//! end as the program says, without finalizing. A deadline bounds both, `MPI_Finalize` included: a
//! process lost after the shrink and before the others' finalize costs that time, not a hang.

use std::sync::Once;
use std::sync::atomic::Ordering;

use super::super::process::{JOB_ACTIVE, POISONED};
use super::deadline::Deadline;
use super::members;
use super::mpix;
use super::recovery::{RecoveryError, recover_if_lost};
use super::unrecovered::{AFTER_END, end_failed_recovery, end_recovered, go_on};

static REGISTERED: Once = Once::new();

/// Runs the check at this process's exit. Called once the membership exists, after MPI's
/// initialization registered the finalize: handlers registered later run earlier, so the
/// check runs before `MPI_Finalize`.
pub(crate) fn register() {
    REGISTERED.call_once(|| {
        // SAFETY: registering a plain `extern "C" fn()` with the C library.
        unsafe { libc::atexit(check_at_exit) };
    });
}

extern "C" fn check_at_exit() {
    // A failed job (its processes end without finalizing) or an exit from inside a job: the
    // other processes learn of it as a failure of the job, not at their exit.
    if POISONED.load(Ordering::Acquire) || JOB_ACTIVE.load(Ordering::Acquire) {
        return;
    }
    // The membership is the thread's that ran the job; a program that ran it on another
    // thread than the one that exits finalizes unchecked.
    if members::with(|m| m.is_none()) {
        return;
    }
    // Never disarmed: it bounds `MPI_Finalize` after this returns too, and the process ends
    // either way.
    let _deadline = Deadline::arm_for(
        "the end of the job (the check that no process was lost, then MPI_Finalize)",
    );
    match recover_if_lost() {
        Ok(None) => {}
        // Only idle spares died: the job lost nothing, and its processes end as the program
        // says, without `MPI_Finalize` (`recover_if_lost` marked them recovered).
        Ok(Some(new)) if new.replaced.is_empty() => {
            // The step an idle spare that saw the loss takes after the renumbering.
            go_on(false);
            if new.first {
                crate::stderr_line::stderr_line(format_args!(
                    "gasnet-bridge (mpi conduit): an idle spare process died during the job, \
                     which did not need it; the job's processes end without MPI_Finalize"
                ));
            }
        }
        Ok(Some(new)) => {
            go_on(false);
            end_recovered(&new, AFTER_END)
        }
        // An MPI without fault tolerance enabled (`mpirun` without `--with-ft ulfm`) may refuse
        // the shrink: with no failure seen, the job ended well, and finalize decides.
        Err(f) if matches!(f.error, RecoveryError::Mpi(_)) && !mpix::failure_seen() => {}
        Err(f) => end_failed_recovery(f),
    }
}
