//! The end of a job after a lost process, while the conduit's state is not rebuilt yet: the
//! recovery forms the new job communicator, an allreduce over it checks the numbering, and
//! every process ends with status 1, one line saying what was lost and that the rest of the
//! recovery is not implemented (`RECOVERY.md`, "Status").

use std::time::Duration;

use ::mpi::ffi;

use crate::error::BridgeError;

use super::super::calls::check;
use super::members;
use super::recovery::{Recovered, recover};

/// How long a process may spend in the recovery before it ends itself: a survivor that
/// computes without polling joins late, and one that never does must not hold the others
/// forever.
pub(crate) const RECOVERY_DEADLINE: Duration = Duration::from_secs(20);
/// How long a process waits after the last barrier before it ends, so that the launcher
/// forwards its last lines (Open MPI's may drop the output of a process that exits at once).
const LINGER: Duration = Duration::from_millis(100);
/// Environment variable: when `1`, every process prints its place after the recovery.
const VERBOSE_ENV: &str = "PGAS_MPI_RECOVERY_VERBOSE";

/// Ends the process after a lost process: recovery over every live process (collective; `job`
/// is this process's job communicator, `None` at a spare), then the report, then the exit.
pub(crate) fn end_after_loss(job: Option<ffi::MPI_Comm>) -> ! {
    arm_deadline();
    let line = match recover(job) {
        Ok(r) => match check_numbering(&r) {
            Ok(()) => {
                say_place(&r);
                r.first.then(|| {
                    let lost: Vec<String> = r
                        .replaced
                        .iter()
                        .map(|(rank, spare)| {
                            format!(
                                "rank {rank} was lost and spare process {spare} took its number"
                            )
                        })
                        .collect();
                    format!(
                        "{} in a new job communicator of {} ranks (an allreduce over it \
                         checked the numbering); recovery of the conduit state is not \
                         implemented, so the job ends",
                        lost.join(", "),
                        r.ranks
                    )
                })
            }
            Err(e) => r.first.then(|| format!("after the recovery: {e}")),
        },
        Err(f) => f.first.then(|| f.error.to_string()),
    };
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
fn check_numbering(r: &Recovered) -> Result<(), BridgeError> {
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
fn say_place(r: &Recovered) {
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

/// Ends the process [`RECOVERY_DEADLINE`] from now, with a line, if it has not ended by then.
fn arm_deadline() {
    let _ = std::thread::Builder::new()
        .name("gasnet-bridge recovery deadline".into())
        .spawn(|| {
            std::thread::sleep(RECOVERY_DEADLINE);
            crate::stderr_line::stderr_line(format_args!(
                "gasnet-bridge (mpi conduit): pid {}: the recovery after a lost process did not \
                 finish within {} s; ending this process",
                std::process::id(),
                RECOVERY_DEADLINE.as_secs()
            ));
            crate::exit_cleanup::run();
            // SAFETY: _exit ends the process at once; nothing of ours needs running.
            unsafe { libc::_exit(1) };
        });
}
