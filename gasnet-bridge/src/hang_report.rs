//! The hang report's one line (`PGAS_HANG_REPORT`): what a rank waits for, since when, and
//! what its conduit can tell about the ranks it waits on.

use std::time::Duration;

use crate::sleep::Awaiting;
use crate::stderr_line::stderr_line;

/// What a rank in a barrier waits for.
pub(crate) const BARRIER: &str = "a barrier";
/// What a rank whose body returned waits for.
pub(crate) const FINISH: &str = "the end of the job (every rank's body to return)";

/// `0, 1, 2` for at most 16 ranks, then how many more.
pub(crate) fn rank_list(ranks: &[usize]) -> String {
    let mut s: Vec<String> = ranks.iter().take(16).map(usize::to_string).collect();
    if ranks.len() > 16 {
        s.push(format!("and {} more", ranks.len() - 16));
    }
    if s.is_empty() {
        "none".into()
    } else {
        s.join(", ")
    }
}

/// Prints the report of rank `rank` of `ranks`, which has waited `waited` for `awaiting`;
/// `detail` is what the conduit adds (empty, or starting with `;` or ` #`).
#[cold]
pub(crate) fn print(rank: usize, ranks: usize, awaiting: Awaiting, waited: Duration, detail: &str) {
    let from = awaiting
        .rank
        .map_or(String::new(), |r| format!(" from rank {r}"));
    stderr_line(format_args!(
        "pgas: hang report: rank {rank} of {ranks} has waited {:.1} s without progress for {}{from}{detail} \
         (PGAS_HANG_REPORT; still waiting)",
        waited.as_secs_f64(),
        awaiting.what,
    ));
}
