//! Which Containment Domains a run uses, and the relaxed CD "smooth": one per rank around
//! each call of the GSRB smoother, inside the strict CD per level of [`crate::mg`], entered
//! when the configuration says `kind = "relaxed"` for it (`[cd.smooth]`, `hpgmg/configs/`).
//! A soft error in it is recovered by the failing rank alone, replaying its log.
//!
//! Around them, when they log (`logging`, on by default), one relaxed CD [`RANK_LEVEL_CD`]
//! per rank spans the rank's part of each strict "level" CD (the V-cycle from that level), so
//! that every write a rank makes into another inside a "level" CD is logged, whether a
//! smoother sends it or the residual, the restriction, the interpolation or the bottom
//! solve: a smoother CD's recovery then accounts for every incoming write in its window, and
//! no barrier around the smoother CDs is needed. The ranks synchronize point to point only
//! (each ghost message's flag, set by `pgas::put_signal` and awaited by `pgas::wait_until`,
//! steps the epoch counter at both ends); a replay applies the incoming writes epoch by
//! epoch, and a message that a neighbour running ahead put into F before F's smoother CD
//! began, then overwrote inside its window, is written again from the neighbour's log at the
//! start of the replay (`cd-runtime/src/relaxed/README.md`, step 6b). Under SPBC clusters
//! a smoother CD's failure re-executes its cluster: the dependency-limited re-execution of
//! "level", which finds every plan's count and flags as they were at its begin
//! (`mg::preserve_plans`), with one barrier at each "level" CD's begin ([`Window::Clusters`]).
//!
//! What makes the replay of one rank F exact:
//!
//! - **Preserved**: the grid the smoother updates (vector `x` of F's boxes, Rust memory no
//!   other rank reaches) and the execution count of the level's ghost-exchange plan, so the
//!   re-execution puts into the same inbox slots with the same sequence numbers (its puts are
//!   squashed against the logged bytes) and reads the same slots. The other vector it writes
//!   (`VECTOR_TEMP`) is rewritten before it is read; the right-hand side and the operator
//!   are only read. [`RANK_LEVEL_CD`] preserves what the strict "level" CD preserves, under
//!   the same names (references to the strict CD's copies, no second copy).
//! - **Incoming writes**: the neighbours' ghost messages and their arrival flags land in F's
//!   segment by replacing puts (no combining write, so no `preserve_global` is needed); the
//!   neighbours log them and F's recovery replays them. Arrivals are flags, not rpcs
//!   ([`Arrival::Flags`]): a relaxed recovery replays an incoming rpc by running its function
//!   again, and the arrival rpc counts into rank state no CD restores.
//!
//! An escalated smoother CD (its recovery refused) does not end the V-cycle early: the rank
//! keeps taking part in the level's communication and [`RANK_LEVEL_CD`] returns the error at
//! its end ([`Smoothing::take_escalation`]), escalating at once ([`program_config`]) to
//! "level", which every rank re-executes together.

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdKindSetting, Cluster};

use crate::comm::{Arrival, FLAG_SLOTS};
use crate::level::{Level, STENCIL_SHAPE_NO_CORNERS};
use crate::operator::smooth;

/// What keeps the writes no log holds out of a relaxed smoother CD's window, so that its
/// replay can account for every incoming write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// A relaxed CD [`RANK_LEVEL_CD`] per rank and "level" CD logs every other write of the
    /// level; no barrier (the default).
    RankLevel,
    /// As `RankLevel`, under SPBC clusters (`cluster`): a smoother CD's failure re-executes
    /// its cluster over the "level" CD, and a barrier at each "level" CD's begin keeps every
    /// message of the level out of a rank until it has preserved its flags there
    /// (`mg::preserve_plans`; a message that landed before, from a rank of its own cluster,
    /// is in no log that could give it back).
    Clusters,
    /// Nothing: the smoother CD does not log (`logging = false`), so it never replays.
    Unneeded,
}

/// Name of the per-rank smoother CD (`[cd.smooth]` in a configuration).
pub const SMOOTH_CD: &str = "smooth";

/// Level of the logging smoother CD in the tree: root 0, "solve" 1, "level" 2, "rank_level"
/// 3 (one that does not log is at 3: no "rank_level" around it). Name it `[cd.smooth]`.
pub const SMOOTH_LEVEL: usize = 4;

/// Name of the per-rank CD around a rank's part of each "level" CD under relaxed smoother
/// CDs (`[cd.rank_level]`; level 3).
pub const RANK_LEVEL_CD: &str = "rank_level";

/// The Containment Domains a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Containment {
    /// No CDs.
    #[default]
    Off,
    /// A strict CD per solve and per V-cycle of the solve (the run is inside
    /// `cd_runtime::launch`).
    Strict,
    /// As `Strict`, and a relaxed CD [`SMOOTH_CD`] per rank around each smoother call.
    RelaxedSmoother {
        /// What keeps the writes no log holds out of a smoother CD's window.
        window: Window,
    },
}

impl Containment {
    /// The CDs a configuration asks for: the relaxed smoother CD when `[cd.smooth]` (or
    /// `[level.4]`) says `kind = "relaxed"`.
    pub fn of(config: Option<&CdConfig>) -> Containment {
        match config {
            None => Containment::Off,
            Some(c) => {
                let smooth = c.settings(SMOOTH_CD, SMOOTH_LEVEL);
                if smooth.kind == Some(CdKindSetting::Relaxed) {
                    let window = match (smooth.logging, c.cluster) {
                        (false, _) => Window::Unneeded,
                        (true, Cluster::None) => Window::RankLevel,
                        (true, _) => Window::Clusters,
                    };
                    Containment::RelaxedSmoother { window }
                } else {
                    Containment::Strict
                }
            }
        }
    }

    /// True with any CDs.
    pub fn is_on(self) -> bool {
        self != Containment::Off
    }

    /// How ghost and transfer messages signal their arrival under these CDs.
    pub fn arrival(self) -> Arrival {
        match self {
            Containment::RelaxedSmoother { .. } => Arrival::Flags,
            _ => Arrival::Rpc,
        }
    }
}

/// The configuration a run under `containment` uses: `config`, and under
/// [`Window::RankLevel`] `[cd.rank_level]` set by the program to escalate a failure at once
/// (`retries = 0`; the strict "level" CD re-executes). [`RANK_LEVEL_CD`] is there so that
/// every write inside a "level" CD is logged; replaying all of it alone (the bottom solve's
/// many exchanges reusing inbox slots) is not supported. A configuration that sets
/// `[cd.rank_level]` itself is refused.
pub fn program_config(config: CdConfig, containment: Containment) -> Result<CdConfig, String> {
    if !matches!(
        containment,
        Containment::RelaxedSmoother {
            window: Window::RankLevel | Window::Clusters,
        }
    ) {
        return Ok(config);
    }
    if config.has_cd(RANK_LEVEL_CD) {
        return Err(format!(
            "{}: hpgmg sets the CD {RANK_LEVEL_CD:?} itself (it logs every write inside a \
             \"level\" CD for the smoother CDs' recovery, and escalates at once); remove the \
             table",
            config.table_of(RANK_LEVEL_CD)
        ));
    }
    config
        .with_cd(RANK_LEVEL_CD, "retries = 0")
        .map_err(|e| e.to_string())
}

/// Runs the smoother, in a relaxed CD per call when asked, and keeps the first failure such
/// a CD escalated.
#[derive(Debug, Default)]
pub struct Smoothing {
    relaxed: Option<Window>,
    escalated: Option<cd::CdError>,
}

impl Smoothing {
    /// The smoother CDs `containment` asks for (the caller is inside a strict CD).
    pub fn new(containment: Containment) -> Smoothing {
        Smoothing {
            relaxed: match containment {
                Containment::RelaxedSmoother { window } => Some(window),
                _ => None,
            },
            escalated: None,
        }
    }

    /// [`smooth`] on `level`: `x_id` relaxed towards `A x = rhs_id`.
    pub fn smooth(&mut self, level: &mut Level, x_id: usize, rhs_id: usize, b: f64) {
        if self.relaxed.is_none() {
            smooth(level, x_id, rhs_id, b);
            return;
        }
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
    }

    /// Runs `body`, this rank's part of a strict "level" CD, inside [`RANK_LEVEL_CD`] under
    /// [`Window::RankLevel`] (directly otherwise); `preserve` preserves what the strict CD
    /// preserved, under the same names. Returns the first escalation of the smoother CDs
    /// inside that the relaxed CD could not recover.
    pub fn rank_level<S>(
        &mut self,
        state: &mut S,
        preserve: impl Fn(&cd::Cd, &mut S),
        mut body: impl FnMut(&mut S, &mut Smoothing),
    ) -> Result<(), cd::CdError> {
        if !matches!(self.relaxed, Some(Window::RankLevel | Window::Clusters)) {
            body(state, self);
            return self.take_escalation();
        }
        cd::relaxed(RANK_LEVEL_CD, |c| {
            preserve(c, state);
            body(state, self);
            self.take_escalation()
        })
    }

    /// True under [`Window::Clusters`]: each "level" CD preserves its plans' counts and flags
    /// (`mg::preserve_plans`), then waits in a barrier.
    pub fn clustered(&self) -> bool {
        self.relaxed == Some(Window::Clusters)
    }

    /// The first escalation since the last call, to be returned by the enclosing strict CD
    /// after the communication it spans.
    pub fn take_escalation(&mut self) -> Result<(), cd::CdError> {
        self.escalated.take().map_or(Ok(()), Err)
    }
}
