//! The squash check: a replay and a limited re-execution do not send a put whose target
//! already holds it (it landed in the first execution). The put must be the one the log
//! holds, with the same bytes; a difference means the re-execution computes something else.

use pgas::runtime_hooks::Rma;

use crate::relaxed::ReplayEvent;
use crate::relaxed::log_store::LogEntry;
use crate::relaxed::replay::replay_error;
use crate::runtime::CdRuntime;

/// Squashes the put of `bytes` to `rma` against the logged entry `e`: a difference in the
/// bytes is a replay error, and the squash is traced. False if `e` is not a put to the same
/// place (the caller reports the divergence; the put is not sent either way).
pub(crate) fn squash(rt: &CdRuntime, rma: &Rma, bytes: &[u8], e: &LogEntry) -> bool {
    let Some(logged) = e.put_to(rma.rank, rma.offset) else {
        return false;
    };
    if logged != bytes {
        replay_error(
            rt,
            format!(
                "squashed put to rank {} at offset {} (LSN {}) differs from the logged bytes: \
                 the body is not deterministic or an access is misclassified",
                rma.rank, rma.offset, e.lsn
            ),
        );
    }
    rt.relaxed.event(ReplayEvent::Squashed { lsn: e.lsn });
    true
}
