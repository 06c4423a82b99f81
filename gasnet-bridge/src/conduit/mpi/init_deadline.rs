//! A bound on the wait in `MPI_Init_thread`. A process of the job that dies before its own
//! `MPI_Init` finished leaves the others waiting in theirs for the data it never contributes:
//! without fault tolerance the launcher ends the job, but under `mpirun --with-ft ulfm` it
//! keeps the survivors running, and they wait for ever. No recovery is possible there (MPI is
//! not initialized, so no failure can be acknowledged), so the process ends itself with one
//! line once the deadline passes, and the job ends instead of hanging.

use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::time::Duration;

/// Environment variable: seconds `MPI_Init_thread` may take before the process ends itself;
/// `0` for no bound.
pub(crate) const INIT_TIMEOUT_ENV: &str = "PGAS_MPI_INIT_TIMEOUT";

/// The bound without [`INIT_TIMEOUT_ENV`]: far above a start-up's normal time (a fraction of a
/// second on one machine, tens of seconds for the largest jobs), far below a batch job's wall
/// time.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The bound [`INIT_TIMEOUT_ENV`] sets (`None`: no bound), or why its value is refused.
fn timeout(var: Option<&str>) -> Result<Option<Duration>, String> {
    let Some(v) = var else {
        return Ok(Some(DEFAULT_TIMEOUT));
    };
    match v.trim().parse::<f64>() {
        Ok(0.0) => Ok(None),
        Ok(s) if s.is_finite() && s > 0.0 => Ok(Some(Duration::from_secs_f64(s))),
        _ => Err(format!(
            "{INIT_TIMEOUT_ENV}={v:?}: expected the seconds MPI_Init may take (a positive \
             number), or 0 for no bound"
        )),
    }
}

/// An armed deadline: dropping it (`MPI_Init_thread` returned) disarms it.
pub(crate) struct InitDeadline {
    /// Closed on drop, which wakes the watching thread before its deadline.
    _returned: Option<Sender<()>>,
}

/// Arms the deadline for the `MPI_Init_thread` call about to be made: a thread that ends the
/// process with one line on standard error if the call has not returned when it passes.
pub(crate) fn arm() -> Result<InitDeadline, String> {
    arm_for(timeout(std::env::var(INIT_TIMEOUT_ENV).ok().as_deref())?)
}

/// [`arm`] with the bound `limit` (`None`: nothing armed).
fn arm_for(limit: Option<Duration>) -> Result<InitDeadline, String> {
    let Some(limit) = limit else {
        return Ok(InitDeadline { _returned: None });
    };
    let (returned, wait) = channel::<()>();
    std::thread::Builder::new()
        .name("gasnet-bridge init deadline".into())
        .spawn(move || {
            if wait.recv_timeout(limit) == Err(RecvTimeoutError::Timeout) {
                crate::stderr_line::stderr_line(format_args!(
                    "gasnet-bridge (mpi conduit): MPI_Init did not return within {:.0} s: a \
                     process of the job probably died while starting (under mpirun --with-ft \
                     ulfm the others then wait in MPI_Init for ever), so this process ends; \
                     set {INIT_TIMEOUT_ENV}=SECONDS for a slower start-up (0: no bound)",
                    limit.as_secs_f64()
                ));
                // SAFETY: _exit(2) ends the process at once and touches no memory of ours. It
                // runs no atexit handler: the other thread is inside MPI_Init, and a handler
                // of the half-initialized library could wait for it.
                unsafe { libc::_exit(1) };
            }
        })
        .map_err(|e| format!("cannot start the MPI_Init deadline's thread: {e}"))?;
    Ok(InitDeadline {
        _returned: Some(returned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_sets_seconds_or_no_bound_and_refuses_the_rest() {
        assert_eq!(timeout(None), Ok(Some(DEFAULT_TIMEOUT)));
        assert_eq!(timeout(Some("2")), Ok(Some(Duration::from_secs(2))));
        assert_eq!(timeout(Some(" 0.5 ")), Ok(Some(Duration::from_millis(500))));
        assert_eq!(timeout(Some("0")), Ok(None));
        for bad in ["", "-1", "soon", "inf", "NaN"] {
            let e = timeout(Some(bad)).unwrap_err();
            assert!(
                e.contains(INIT_TIMEOUT_ENV) && e.contains("or 0"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_deadline_dropped_in_time_does_not_end_the_process() {
        // Were the drop not to disarm it, the deadline would end the test process with
        // status 1, failing the run.
        let armed = arm_for(Some(Duration::from_millis(50))).expect("armed");
        drop(armed);
        std::thread::sleep(Duration::from_millis(200));
    }
}
