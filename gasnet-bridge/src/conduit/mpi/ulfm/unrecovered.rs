//! The end of a job after a lost process when it cannot go on: the recovery failed (no spare
//! left, a disagreement, processes dying throughout), or some rank's body let the peer
//! failure reach `launch` instead of catching it and calling `Endpoint::recover`. Every live
//! process ends with status 1, and the first live one prints one line saying what was lost and
//! why the job ends (`RECOVERY.md`, "Renumbering" and "Re-entry at the bridge level").

use std::ffi::c_int;
use std::time::Duration;

use ::mpi::ffi;

use crate::error::BridgeError;

use super::super::calls::check;
use super::deadline::Deadline;
use super::members;
use super::recovery::{Failed, NewJob, recover};

/// How long a process waits after the last barrier before it ends, so that the launcher
/// forwards its last lines (Open MPI's may drop the output of a process that exits at once).
const LINGER: Duration = Duration::from_millis(100);
/// Environment variable: when `1`, every process prints its place after the recovery.
const VERBOSE_ENV: &str = "PGAS_MPI_RECOVERY_VERBOSE";
/// Why the job ends when a body did not catch the peer failure.
pub(crate) const UNCAUGHT: &str = "a rank's program did not catch the peer failure to go on \
                        (std::panic::catch_unwind, then Endpoint::recover), so the job ends";

/// Why the job ends when a process was lost after every rank had finished the body: in the
/// end of the job (its teardown, the spares' release) or at a process's exit (`exit_check.rs`).
pub(crate) const AFTER_END: &str = "the loss came after every rank had finished the job's body, \
                        so nothing is left to recover and the job ends (what the program \
                        printed after its body may be whole or cut short)";

/// Ends the process after a lost process whose unwind reached `launch`: the recovery over
/// every live process (collective; `job` is this process's job communicator), then the
/// agreement that the job does not go on, the report and the exit; `why` says why it does not.
pub(crate) fn end_after_loss(job: ffi::MPI_Comm, why: &str) -> ! {
    // Never disarmed: this process ends either way.
    let _deadline = Deadline::arm();
    match recover(Some(job)) {
        Ok(r) => {
            go_on(false);
            end_recovered(&r, why)
        }
        Err(f) => end_failed_recovery(f),
    }
}

/// Whether every live process goes on after the recovery, each offering `mine` (collective
/// over the communicator of every live process the recovery made). False if any offers false,
/// or the exchange itself fails.
pub(crate) fn go_on(mine: bool) -> bool {
    let all = members::with(|m| m.map(|m| m.all)).expect("the job has its membership");
    let mine = c_int::from(mine);
    let mut every: c_int = 0;
    // SAFETY: one int in and out, both live across this blocking collective; `all` is the
    // communicator of every live process.
    let rc = unsafe {
        ffi::MPI_Allreduce(
            (&raw const mine).cast(),
            (&raw mut every).cast(),
            1,
            ffi::RSMPI_INT32_T,
            ffi::RSMPI_MIN,
            all,
        )
    };
    rc == ffi::MPI_SUCCESS as c_int && every == 1
}

/// Ends the process after a recovery that formed the new job communicator `r` but from which
/// the job does not go on (`why`): the numbering checked, the first live process's line, the
/// exit.
pub(crate) fn end_recovered(r: &NewJob, why: &str) -> ! {
    let line = match check_numbering(r) {
        Ok(()) => {
            say_place(r);
            r.first.then(|| {
                format!(
                    "{} in a new job communicator of {} ranks (an allreduce over it checked \
                     the numbering); {why}",
                    replaced_words(r),
                    r.ranks
                )
            })
        }
        Err(e) => r.first.then(|| format!("after the recovery: {e}")),
    };
    end_with(line)
}

/// Ends the process after a recovery that failed with `f`.
pub(crate) fn end_failed_recovery(f: Failed) -> ! {
    end_with(f.first.then(|| f.error.to_string()))
}

/// Ends the process after the rebuild over the new job communicator `r` failed with `e`.
pub(crate) fn end_failed_rebuild(r: &NewJob, e: &BridgeError) -> ! {
    end_with(r.first.then(|| {
        format!(
            "{}, but rebuilding the conduit over the new job communicator failed: {e}; the \
             job ends",
            replaced_words(r)
        )
    }))
}

/// "rank r was lost and spare process s took its number", for every lost rank.
fn replaced_words(r: &NewJob) -> String {
    let lost: Vec<String> = r
        .replaced
        .iter()
        .map(|(rank, spare)| {
            format!("rank {rank} was lost and spare process {spare} took its number")
        })
        .collect();
    lost.join(", ")
}

/// Prints `line` (if this process speaks for the live ones), waits until every live process
/// has written its lines, and ends the process with status 1.
pub(crate) fn end_with(line: Option<String>) -> ! {
    if let Some(line) = line {
        crate::stderr_line::stderr_line(format_args!("gasnet-bridge (mpi conduit): {line}"));
    }
    // Every live process has written its lines before any ends: the launcher may drop what
    // a process wrote just before it exited.
    let all = members::with(|m| m.map(|m| m.all)).expect("the job has its membership");
    // SAFETY: `all` is the communicator of every live process (the new one after a recovery;
    // after a failed recovery the old one, revoked, on which the barrier fails at once).
    let _ = unsafe { ffi::MPI_Barrier(all) };
    std::thread::sleep(LINGER);
    crate::exit_cleanup::run();
    // SAFETY: _exit ends the process at once. MPI is not finalized: the old job's window and
    // communicators hold a dead member and cannot be freed.
    unsafe { libc::_exit(1) }
}

/// Checks over the new job communicator that every job rank is held once: the sum of the
/// ranks.
fn check_numbering(r: &NewJob) -> Result<(), BridgeError> {
    if let (Some(job), Some(rank)) = (r.job, r.rank) {
        let mine = rank as u64;
        let mut sum = 0u64;
        // SAFETY: one u64 in and out, both live across this blocking collective.
        check(
            unsafe {
                ffi::MPI_Allreduce(
                    (&raw const mine).cast(),
                    (&raw mut sum).cast(),
                    1,
                    ffi::RSMPI_UINT64_T,
                    ffi::RSMPI_SUM,
                    job,
                )
            },
            "MPI_Allreduce(new job communicator)",
        )?;
        let n = r.ranks as u64;
        if sum != n * (n - 1) / 2 {
            return Err(BridgeError::Conduit(format!(
                "the ranks of the new job communicator sum to {sum}, not {}",
                n * (n - 1) / 2
            )));
        }
    }
    Ok(())
}

/// With `PGAS_MPI_RECOVERY_VERBOSE=1`, one line per process: its place in the new job.
pub(crate) fn say_place(r: &NewJob) {
    if std::env::var(VERBOSE_ENV).map_or(true, |v| v.trim() != "1") {
        return;
    }
    let was = match r.was {
        Some(w) => format!("was rank {w}"),
        None => "was a spare".into(),
    };
    let now = match r.rank {
        Some(rank) => format!("rank {rank} of {}", r.ranks),
        None => "an idle spare".into(),
    };
    crate::stderr_line::stderr_line(format_args!(
        "gasnet-bridge (mpi conduit): recovered: pid {} is {now} ({was})",
        std::process::id()
    ));
}
