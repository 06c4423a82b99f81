//! The fault injector: decides, per CD execution, whether a fault is injected at the end of
//! its body, and, per operation of a logging relaxed CD's body, whether one strikes right
//! before it ([`OpFaults`]). Seeded and repeatable: the decision is a hash of (seed, rank,
//! CD name, iteration, attempt, and the operation's index).

use crate::config::{FaultKind, Injection};

/// A fault to inject into one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injected {
    /// The execution fails its check.
    SoftError,
    /// The rank loses its memory at the end of the execution.
    RankLoss,
}

/// SplitMix64: a well-mixed 64-bit hash step.
pub(crate) fn mix(z: u64) -> u64 {
    pgas::mix64(z.wrapping_add(0x9E37_79B9_7F4A_7C15))
}

/// A stable hash of a name (FNV-1a).
pub(crate) fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A uniform number in [0, 1) from the hash of the inputs.
fn uniform(parts: &[u64]) -> f64 {
    let h = parts.iter().fold(0u64, |acc, &p| mix(acc ^ p));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// The fault for execution `attempt` of instance `iteration` of CD `name` on `rank`.
///
/// Exact faults fire on the first attempt only (a re-execution is the recovery from them);
/// probabilities apply to every attempt, so a high rate can exhaust the retries and escalate.
pub fn decide(
    inject: &Injection,
    seed: u64,
    rank: usize,
    name: &str,
    iteration: u64,
    attempt: u32,
) -> Option<Injected> {
    if attempt == 0 {
        if let Some(f) = inject.at.find_striking(rank, iteration, false) {
            return Some(match f.kind {
                FaultKind::Soft => Injected::SoftError,
                FaultKind::RankLoss => Injected::RankLoss,
            });
        }
    }
    let parts = [
        seed,
        rank as u64,
        name_hash(name),
        iteration,
        attempt as u64,
    ];
    if inject.rank_loss > 0.0 && uniform(&[&parts[..], &[1]].concat()) < inject.rank_loss {
        return Some(Injected::RankLoss);
    }
    if inject.soft_error > 0.0 && uniform(&[&parts[..], &[2]].concat()) < inject.soft_error {
        return Some(Injected::SoftError);
    }
    None
}

/// The faults that strike at an operation of one execution of a relaxed body: an exact
/// fault at its `at_op`-th intercepted operation (first attempt only) and the per-operation
/// probabilities.
#[derive(Debug, Clone, PartialEq)]
pub struct OpFaults {
    at: Option<(u64, Injected)>,
    soft: f64,
    loss: f64,
    parts: [u64; 5],
}

impl OpFaults {
    /// The operation faults of execution `attempt` of instance `iteration` of CD `name` on
    /// `rank`; `None` when none can strike (the common case: the hook then counts nothing).
    pub fn plan(
        inject: &Injection,
        seed: u64,
        rank: usize,
        name: &str,
        iteration: u64,
        attempt: u32,
    ) -> Option<OpFaults> {
        let at = (attempt == 0)
            .then(|| inject.at.find_striking(rank, iteration, true))
            .flatten()
            .and_then(|f| {
                let kind = match f.kind {
                    FaultKind::Soft => Injected::SoftError,
                    FaultKind::RankLoss => Injected::RankLoss,
                };
                f.at_op.map(|op| (op, kind))
            });
        let (soft, loss) = (inject.soft_error_per_op, inject.rank_loss_per_op);
        if at.is_none() && soft == 0.0 && loss == 0.0 {
            return None;
        }
        Some(OpFaults {
            at,
            soft,
            loss,
            parts: [
                seed,
                rank as u64,
                name_hash(name),
                iteration,
                attempt as u64,
            ],
        })
    }

    /// The fault that strikes right before operation `op` (counted from 0), if any.
    pub fn strike(&self, op: u64) -> Option<Injected> {
        if let Some((at, kind)) = self.at {
            if at == op {
                return Some(kind);
            }
        }
        let parts = [&self.parts[..], &[op]].concat();
        if self.loss > 0.0 && uniform(&[&parts[..], &[3]].concat()) < self.loss {
            return Some(Injected::RankLoss);
        }
        if self.soft > 0.0 && uniform(&[&parts[..], &[4]].concat()) < self.soft {
            return Some(Injected::SoftError);
        }
        None
    }
}

/// Environment variable naming points where a rank's process kills itself with SIGKILL, for
/// the tests of a real loss (`REAL_LOSS.md`): `POINT:RANKS:ITERATION`, several joined by `,`.
/// POINT is one of [`KILL_POINTS`], RANKS one rank or several joined by `+` (losses at once).
/// ITERATION is the execution of the covered CD, and the point fires in a job that has not
/// recovered yet (the replacement runs the same execution again and must not die); for
/// `resume` it is the recovery's epoch instead, and the point fires in a survivor's process
/// during that recovery (a second loss while the CD layer resumes from the first).
pub const KILL_AT_ENV: &str = "CD_REAL_LOSS_KILL_AT";

/// The named points of [`KILL_AT_ENV`]: inside the preservation (after the first entry is
/// saved), inside the end agreement (before this rank's part), while sending the generation's
/// copy to the buddy (sent, its reply not yet waited for), in `cd::setup_once` before the
/// set-up value's copy is sent to the buddy (ITERATION 0), and in the resume after a recovery,
/// the generations offered, before this rank serves or fetches any (`real_loss::resume`).
pub const KILL_POINTS: [&str; 5] = ["preserve", "agreement", "buddy_copy", "setup", "resume"];

/// The points [`KILL_AT_ENV`] names, read once (empty: unset or not of the form).
fn kill_points() -> &'static [KillPoint] {
    static AT: std::sync::OnceLock<Vec<KillPoint>> = std::sync::OnceLock::new();
    AT.get_or_init(|| {
        std::env::var(KILL_AT_ENV)
            .ok()
            .and_then(|v| v.split(',').map(parse_kill_point).collect())
            .unwrap_or_default()
    })
}

/// A point of [`KILL_AT_ENV`]: where, on which ranks, in which execution.
#[derive(Debug, PartialEq)]
struct KillPoint {
    point: String,
    ranks: Vec<usize>,
    iteration: u64,
}

/// `POINT:RANKS:ITERATION` ([`KILL_AT_ENV`]); `None` when not of the form.
///
/// # Panics
/// On a point not in [`KILL_POINTS`]: a test that names one the runtime does not know would
/// otherwise pass without its kill.
fn parse_kill_point(v: &str) -> Option<KillPoint> {
    let mut parts = v.split(':');
    let point = parts.next()?.to_string();
    let ranks = parts
        .next()?
        .split('+')
        .map(|r| r.parse().ok())
        .collect::<Option<Vec<usize>>>()?;
    let iteration = parts.next()?.parse().ok()?;
    assert!(
        KILL_POINTS.contains(&point.as_str()),
        "{KILL_AT_ENV}={v:?}: the point is one of {KILL_POINTS:?}"
    );
    Some(KillPoint {
        point,
        ranks,
        iteration,
    })
}

/// Kills this process with SIGKILL when [`KILL_AT_ENV`] names `point` on `rank` at
/// `iteration` (an execution, or for `resume` a recovery's epoch) and the job is where that
/// point fires (module doc of the variable); returns otherwise.
pub(crate) fn kill_at(point: &str, rank: usize, iteration: u64) {
    let named = kill_points()
        .iter()
        .any(|at| at.point == point && at.ranks.contains(&rank) && at.iteration == iteration);
    if !named {
        return;
    }
    let recovered = pgas::runtime_hooks::recovered();
    let now = if point == "resume" {
        recovered.is_some_and(|r| !r.replacement)
    } else {
        recovered.is_none()
    };
    if !now {
        return;
    }
    // `kill -9` of this process: the signal a killed node's process gets, with no unwinding.
    let _ = std::process::Command::new("kill")
        .args(["-9", &std::process::id().to_string()])
        .status();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ExactFault;

    #[test]
    fn repeatable_and_close_to_the_rate() {
        let inj = Injection {
            soft_error: 0.1,
            ..Injection::default()
        };
        let hits = (0..10_000)
            .filter(|&i| decide(&inj, 5, 0, "step", i, 0).is_some())
            .count();
        assert!((800..1200).contains(&hits), "{hits}");
        let again = (0..10_000)
            .filter(|&i| decide(&inj, 5, 0, "step", i, 0).is_some())
            .count();
        assert_eq!(hits, again);
        let other_seed = (0..10_000)
            .filter(|&i| decide(&inj, 6, 0, "step", i, 0) != decide(&inj, 5, 0, "step", i, 0))
            .count();
        assert!(other_seed > 0);
    }

    #[test]
    fn a_kill_point_names_one_rank_or_several() {
        let one = parse_kill_point("agreement:2:100").unwrap();
        assert_eq!(one.ranks, vec![2]);
        assert_eq!(one.iteration, 100);
        let three = parse_kill_point("preserve:1+2+3:7").unwrap();
        assert_eq!(three.ranks, vec![1, 2, 3]);
        assert_eq!(three.point, "preserve");
        assert_eq!(parse_kill_point("agreement:1+x:7"), None);
        assert_eq!(parse_kill_point("agreement:1"), None);
        let resume = parse_kill_point("resume:2:1").unwrap();
        assert_eq!((resume.point.as_str(), resume.iteration), ("resume", 1));
    }

    #[test]
    fn exact_faults_fire_once() {
        let inj = Injection {
            at: vec![ExactFault {
                rank: 2,
                iteration: 4,
                kind: FaultKind::RankLoss,
                at_op: None,
            }]
            .into(),
            ..Injection::default()
        };
        assert_eq!(decide(&inj, 0, 2, "x", 4, 0), Some(Injected::RankLoss));
        assert_eq!(decide(&inj, 0, 2, "x", 4, 1), None);
        assert_eq!(decide(&inj, 0, 1, "x", 4, 0), None);
        assert_eq!(decide(&inj, 0, 2, "x", 3, 0), None);
    }

    #[test]
    fn operation_faults_strike_at_their_operation_and_not_at_the_end() {
        let inj = Injection {
            at: vec![ExactFault {
                rank: 1,
                iteration: 2,
                kind: FaultKind::RankLoss,
                at_op: Some(7),
            }]
            .into(),
            ..Injection::default()
        };
        assert_eq!(decide(&inj, 0, 1, "x", 2, 0), None);
        let plan = OpFaults::plan(&inj, 0, 1, "x", 2, 0).expect("a plan");
        assert_eq!(plan.strike(7), Some(Injected::RankLoss));
        assert_eq!((0..100).filter(|&op| plan.strike(op).is_some()).count(), 1);
        assert_eq!(OpFaults::plan(&inj, 0, 1, "x", 2, 1), None);
        assert_eq!(OpFaults::plan(&inj, 0, 0, "x", 2, 0), None);
        let rate = Injection {
            rank_loss_per_op: 0.1,
            ..Injection::default()
        };
        let plan = OpFaults::plan(&rate, 3, 0, "x", 0, 0).expect("a plan");
        let hits = (0..10_000).filter(|&op| plan.strike(op).is_some()).count();
        assert!((800..1200).contains(&hits), "{hits}");
    }
}
