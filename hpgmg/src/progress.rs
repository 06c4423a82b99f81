//! The benchmark's progress through its solves, and where a relaunched run resumes it
//! (`--restart`, `cd-runtime/src/checkpoint/README.md`).
//!
//! A run is a fixed sequence of solves, each one execution of the strict CD "solve" (its
//! iteration is the solve's index in the sequence): per level, the warm-up and the timed
//! passes, then the three solves of the Richardson analysis. A checkpoint of that CD holds
//! what the solve preserves, and with it what the rest of the run reads that no solve
//! recomputes:
//!
//! - the numbers the passes before it printed and the summary prints again ([`Progress`]),
//!   preserved by every solve as one value;
//! - in the Richardson analysis, the solutions of the finer levels solved before (the error
//!   is computed from them at the end), preserved by those solves
//!   ([`crate::mg::MgHierarchy::finer_solutions_kept`]).
//!
//! Everything else a solve reads is rebuilt by the setup, which a relaunch runs again (the
//! operator, the right-hand sides restricted level by level), or written by the solve before it
//! is read. A relaunch ([`crate::bench::run`]) skips the solves before the resumed one (they
//! printed in the run that was interrupted), prints the numbers of the passes it skipped from
//! the resumed [`Progress`], and then prints exactly what the uninterrupted run printed.

use serde::{Deserialize, Serialize};

/// Name of the preserved [`Progress`] in the solve CD.
pub const PROGRESS: &str = "progress";

/// What the passes done printed and the rest of the run reads: per level, the timed pass's
/// average seconds per solve, V-cycles per solve and bottom-solver iterations per solve; and
/// the residual norms of the Richardson solves done.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Progress {
    /// Per level whose timed pass is done: average seconds per solve.
    pub seconds: Vec<f64>,
    /// Per level whose timed pass is done: V-cycles per solve.
    pub vcycles: Vec<usize>,
    /// Per level whose timed pass is done: bottom-solver iterations per solve.
    pub bottom: Vec<usize>,
    /// The Richardson solves' final residual norms, in order.
    pub norms: Vec<f64>,
    /// The report written before this solve, when the run holds its report until its end
    /// (`crate::held_report`: a rerun after a lost process starts its report from it); `None`
    /// when the report is streamed.
    #[serde(default)]
    pub printed: Option<String>,
}

impl Progress {
    /// Progress with room for `levels` levels, nothing done.
    pub fn new(levels: usize) -> Progress {
        Progress {
            seconds: vec![0.0; levels],
            vcycles: vec![0; levels],
            bottom: vec![0; levels],
            norms: vec![0.0; levels],
            printed: None,
        }
    }
}
