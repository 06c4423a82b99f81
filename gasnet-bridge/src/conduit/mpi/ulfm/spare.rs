//! A spare's wait: idle until the job ends or a process dies (`RECOVERY.md`, "Spares wait
//! idle"), and the messages that end it.

use std::ffi::c_int;
use std::time::Duration;

use ::mpi::ffi;

use crate::error::BridgeError;

use super::super::calls::{check, null_request};
use super::members;
use super::mpix;

/// Tag of the empty message that tells a spare the job ended normally.
const TAG_RELEASE: c_int = 1;
/// Tag of the empty message that tells a spare the job failed in a way no spare can mend (a
/// rank panicked or stopped): it ends quietly.
const TAG_DISMISS: c_int = 2;
/// How long a spare sleeps between two tests of its receive.
const IDLE: Duration = Duration::from_millis(10);

/// How a spare's wait ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Called {
    /// The job ended normally: the spare is not needed.
    Released,
    /// The job failed without a lost process: the spare ends with it.
    Dismissed,
    /// A process died or the communicator of every process was revoked: join the recovery.
    ToRecover,
}

/// Waits, sleeping between tests, for the release, the dismissal or a failure.
pub(crate) fn wait() -> Result<Called, BridgeError> {
    let all = members::with(|m| m.map(|m| m.all)).expect("a spare has its membership");
    let mut req = null_request();
    // The receive's byte lives as long as the process: after a failure the request may stay
    // posted (`MPIX_ERR_PROC_FAILED_PENDING`), and MPI could write it at any later time.
    let byte: &'static mut u8 = Box::leak(Box::new(0u8));
    // SAFETY: `byte` is never freed, so MPI may write it whenever the receive completes.
    check(
        unsafe {
            ffi::MPI_Irecv(
                std::ptr::from_mut(byte).cast(),
                1,
                ffi::RSMPI_UINT8_T,
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                all,
                &mut req,
            )
        },
        "MPI_Irecv(spare)",
    )?;
    loop {
        let mut flag: c_int = 0;
        // SAFETY: a zeroed MPI_Status is a valid place for MPI to write.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: `req` is the receive above; `status` is written.
        let rc = unsafe { ffi::MPI_Test(&mut req, &mut flag, &mut status) };
        if rc != ffi::MPI_SUCCESS as c_int {
            if mpix::is_process_failure(rc) {
                return Ok(Called::ToRecover);
            }
            check(rc, "MPI_Test(spare)")?;
        }
        if flag != 0 {
            return Ok(if status.MPI_TAG == TAG_RELEASE {
                Called::Released
            } else {
                Called::Dismissed
            });
        }
        std::thread::sleep(IDLE);
    }
}

/// Sends the idle spares the message `tag`; `what` names it in an error.
fn tell_spares(tag: c_int, what: &str) -> Result<(), BridgeError> {
    let (all, spares) = members::with(|m| m.map(|m| (m.all, m.roles.spares.clone())))
        .expect("the job has its membership");
    for spare in spares {
        // SAFETY: an empty message: no buffer is read; `all` is valid.
        check(
            unsafe {
                ffi::MPI_Send(
                    std::ptr::null(),
                    0,
                    ffi::RSMPI_UINT8_T,
                    spare as c_int,
                    tag,
                    all,
                )
            },
            what,
        )?;
    }
    Ok(())
}

/// Releases the idle spares after a normal end of the job (job rank 0 calls it).
pub(crate) fn release() -> Result<(), BridgeError> {
    tell_spares(TAG_RELEASE, "MPI_Send(release the spares)")
}

/// Tells the idle spares the job failed without a lost process, so that they end with it.
pub(crate) fn dismiss() {
    // Best effort: the job is ending with an error already; a spare that misses it ends when
    // the ranks' processes exit (it then sees them fail).
    let _ = tell_spares(TAG_DISMISS, "MPI_Send(dismiss the spares)");
}
