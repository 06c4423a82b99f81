//! The recovery deadline (`RECOVERY.md`, "Detection"): a process that has not finished the
//! recovery within [`RECOVERY_DEADLINE`] ends itself with a line, so that a survivor that never
//! joins (or a recovery that cannot finish) holds nobody forever. Disarmed when the recovery
//! finished and the job goes on. The end of a process (`exit_check.rs`) is bounded the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a process may spend in the recovery before it ends itself: a survivor that
/// computes without polling joins late, and one that never does must not hold the others
/// forever.
pub(crate) const RECOVERY_DEADLINE: Duration = Duration::from_secs(20);

/// An armed recovery deadline; [`Deadline::disarm`] cancels it.
#[derive(Debug)]
pub(crate) struct Deadline(Arc<AtomicBool>);

impl Deadline {
    /// Ends the process [`RECOVERY_DEADLINE`] from now, with a line, unless disarmed first.
    pub(crate) fn arm() -> Deadline {
        Deadline::arm_for("the recovery after a lost process")
    }

    /// As [`Deadline::arm`], the line naming `what` did not finish.
    pub(crate) fn arm_for(what: &'static str) -> Deadline {
        let disarmed = Arc::new(AtomicBool::new(false));
        let seen = disarmed.clone();
        let _ = std::thread::Builder::new()
            .name("gasnet-bridge recovery deadline".into())
            .spawn(move || {
                std::thread::sleep(RECOVERY_DEADLINE);
                if seen.load(Ordering::Acquire) {
                    return;
                }
                crate::stderr_line::stderr_line(format_args!(
                    "gasnet-bridge (mpi conduit): pid {}: {what} did not finish within {} s; \
                     ending this process",
                    std::process::id(),
                    RECOVERY_DEADLINE.as_secs()
                ));
                crate::exit_cleanup::run();
                // SAFETY: _exit ends the process at once; nothing of ours needs running.
                unsafe { libc::_exit(1) };
            });
        Deadline(disarmed)
    }

    /// The recovery finished: the deadline does nothing when it expires.
    pub(crate) fn disarm(self) {
        self.0.store(true, Ordering::Release);
    }
}
