//! Which Containment Domains a run uses, and the relaxed CD "smooth": one per rank around
//! each call of the GSRB smoother, inside the strict CD per level of [`crate::mg`], entered
//! when the configuration says `kind = "relaxed"` for it (`[cd.smooth]`, `hpgmg/configs/`).
//! A soft error in it is recovered by the failing rank alone, replaying its log.
//!
//! What makes the replay of one rank F exact:
//!
//! - **Preserved**: the grid the smoother updates (vector `x` of F's boxes, Rust memory no
//!   other rank reaches) and the execution count of the level's ghost-exchange plan, so the
//!   re-execution puts into the same inbox slots with the same sequence numbers (its puts are
//!   squashed against the logged bytes) and reads the same slots. The other vector it writes
//!   (`VECTOR_TEMP`) is rewritten before it is read; the right-hand side and the operator
//!   are only read.
//! - **Incoming writes**: the neighbours' ghost messages and their arrival flags land in F's
//!   segment by replacing puts (no combining write, so no `preserve_global` is needed); the
//!   neighbours log them and F's recovery replays them. Arrivals are flags, not rpcs
//!   ([`Arrival::Flags`]): a relaxed recovery replays an incoming rpc by running its function
//!   again, and the arrival rpc counts into rank state no CD restores. The smoother
//!   exchanges ghosts [`FLAG_SLOTS`] times and a plan has that many slots under relaxed CDs,
//!   so each slot and flag is written once per CD: replaying the writes in any epoch order
//!   leaves every slot as the first execution read it.
//! - **A barrier before and after each smoother CD** (only under relaxed CDs). Before: the
//!   incoming writes of earlier phases, which no relaxed CD logged, are all counted before
//!   the CD records its begin counter (a rank can see a message's flag before the writer's
//!   conduit has counted it), so they are not in the window the recovery must account for.
//!   After: a neighbour that finished its CD cannot send the next phase's (unlogged) ghosts
//!   into F while F still runs or replays its CD, which would make F's recovery refuse.
//!
//! An escalated smoother CD (its recovery refused) does not end the V-cycle early: the rank
//! keeps taking part in the level's communication and the per-level CD returns the error at
//! its end, so every rank re-executes the level together ([`Smoothing::take_escalation`]).

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdKindSetting};

use crate::comm::{Arrival, FLAG_SLOTS};
use crate::level::{Level, STENCIL_SHAPE_NO_CORNERS};
use crate::operator::smooth;

/// Name of the per-rank smoother CD (`[cd.smooth]` in a configuration).
pub const SMOOTH_CD: &str = "smooth";

/// Level of the smoother CD in the tree: root 0, "solve" 1, "level" 2.
pub const SMOOTH_LEVEL: usize = 3;

/// The Containment Domains a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Containment {
    /// No CDs.
    #[default]
    Off,
    /// A strict CD per solve and per V-cycle of the solve (the run is inside
    /// `cd_runtime::launch`).
    Strict,
    /// As `Strict`, and a relaxed CD per rank around each smoother call.
    RelaxedSmoother,
}

impl Containment {
    /// The CDs a configuration asks for: the relaxed smoother CD when `[cd.smooth]` (or
    /// `[level.3]`) says `kind = "relaxed"`.
    pub fn of(config: Option<&CdConfig>) -> Containment {
        match config {
            None => Containment::Off,
            Some(c) if c.settings(SMOOTH_CD, SMOOTH_LEVEL).kind == Some(CdKindSetting::Relaxed) => {
                Containment::RelaxedSmoother
            }
            Some(_) => Containment::Strict,
        }
    }

    /// True with any CDs.
    pub fn is_on(self) -> bool {
        self != Containment::Off
    }

    /// How ghost and transfer messages signal their arrival under these CDs.
    pub fn arrival(self) -> Arrival {
        match self {
            Containment::RelaxedSmoother => Arrival::Flags,
            _ => Arrival::Rpc,
        }
    }
}

/// Runs the smoother, in a relaxed CD per call when asked, and keeps the first failure such
/// a CD escalated.
#[derive(Debug, Default)]
pub struct Smoothing {
    relaxed: bool,
    escalated: Option<cd::CdError>,
}

impl Smoothing {
    /// Relaxed smoother CDs when `relaxed` (the caller is inside a strict CD).
    pub fn new(relaxed: bool) -> Smoothing {
        Smoothing {
            relaxed,
            escalated: None,
        }
    }

    /// [`smooth`] on `level`: `x_id` relaxed towards `A x = rhs_id`.
    pub fn smooth(&mut self, level: &mut Level, x_id: usize, rhs_id: usize, b: f64) {
        if !self.relaxed {
            smooth(level, x_id, rhs_id, b);
            return;
        }
        pgas::barrier();
        let out = cd::relaxed(SMOOTH_CD, |c| {
            for bx in level.boxes.iter_mut() {
                c.preserve_slice(&format!("x.{}", bx.global_id), &mut bx.vectors[x_id]);
            }
            let plan = &level.remote[STENCIL_SHAPE_NO_CORNERS];
            let mut executions = plan.executions();
            c.preserve("exchanges", &mut executions);
            plan.set_executions(executions);
            smooth(level, x_id, rhs_id, b);
            let plan = &level.remote[STENCIL_SHAPE_NO_CORNERS];
            debug_assert!(
                plan.is_idle() || plan.executions() == executions + FLAG_SLOTS as u64,
                "one smoother call executes the ghost plan once per slot"
            );
            Ok(())
        });
        if let Err(e) = out {
            self.escalated.get_or_insert(e);
        }
        pgas::barrier();
    }

    /// The first escalation since the last call, to be returned by the enclosing strict CD
    /// after the communication it spans.
    pub fn take_escalation(&mut self) -> Result<(), cd::CdError> {
        self.escalated.take().map_or(Ok(()), Err)
    }
}
