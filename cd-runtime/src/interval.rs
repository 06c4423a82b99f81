//! Preservation intervals: a CD level that preserves at every n-th step of a loop, with n
//! from Daly's formula (`interval = "daly"`) or given (`interval = 4`).
//!
//! ## The reading chosen
//!
//! A CD preserves its state when it begins, and a re-execution restores that state: every
//! execution preserves. ftRMA (seed 000, "Daly's Interval"; the "Gsync" scheme) takes a
//! coordinated checkpoint not at every synchronization point but after the right ones, every
//! τ of computation, with τ from Daly's formula; after a failure the processes roll back to the
//! last checkpoint and redo the work since. "A CD level preserves every n-th execution" is read
//! the same way: **the executions between two preservations re-execute from the last preserved
//! state**, not from the CD's parent. (From the parent, a failure in an execution that did not
//! preserve would throw away the parent's whole progress, which is not the trade-off Daly's
//! formula optimizes; for a CD under the root it would not be contained at all.)
//!
//! Re-executing from the last preserved state means running again the steps since then, which
//! only the code that drives the loop can do: a CD entered with [`crate::strict()`] from the
//! program's own loop ends when its body returns, and the bodies of the steps before are gone.
//! So the interval applies to a loop the runtime drives, [`strict_steps`]: `body(cd, step)` for
//! every step of a range. With an interval of n it runs **n consecutive steps as one execution
//! of the strict CD**: the first step's `preserve` calls save, the later steps' calls of the
//! same names do nothing (a name first preserved in a later step is saved there), and a failure
//! in any of the n steps makes the CD restore the state of the first and run the n steps again
//! (with its retries and escalation as for any strict CD). Injected faults, `iteration` in the
//! configuration and the report count these executions, not steps.
//!
//! A failed step does not end its execution early: the remaining steps of the n run (as a body
//! runs to its end after a failed check), so the ranks of the CD stay in step in their
//! communication, and the agreement at the end decides. The first error a step returned is the
//! execution's.
//!
//! ## Daly's interval
//!
//! `interval = "daly"` with `mtbf_seconds = M` (the mean time between the failures this CD
//! contains): the first step runs alone and measures δ, its preservation time, and t, the time
//! of the step without it (the largest over the CD's ranks, one internal reduction, so every
//! rank runs the same n). Daly's higher-order estimate of the optimum compute time between
//! checkpoints ([`daly_interval`]) is
//!
//! ```text
//! τ = sqrt(2δM) · (1 + sqrt(δ/(2M))/3 + (δ/(2M))/9) − δ    for δ < 2M
//! τ = M                                                    for δ ≥ 2M
//! ```
//!
//! and n = round(τ / t), at least 1 and at most the steps left ([`steps_per_preservation`]).
//! The report prints n and the expected overhead of that interval in Daly's first-order model,
//! δ/τ' + (τ' + δ)/(2M) with τ' = n·t ([`expected_overhead`]): the time spent preserving plus
//! the expected rework per unit of computation. In this runtime a failure is detected when its
//! execution ends, so the rework of one failure is the whole interval, not the half the model
//! averages: the printed figure is the model's, a lower bound.

use std::ops::Range;
use std::time::Instant;

use crate::cd::Cd;
use crate::config::Interval;
use crate::error::CdError;
use crate::runtime;

pub use crate::daly::{daly_interval, expected_overhead, steps_per_preservation};
pub use crate::report::IntervalChoice;

/// Runs `body(cd, step)` for every step of `steps`, in order, as strict child CDs called `name`
/// spanning the current CD's ranks, preserving as the CD's `interval` says (see the module
/// doc): with `interval = "every"` (the default) one CD execution per step, as
/// `for s in steps { cd::strict(name, |c| body(c, s))? }` would; with an interval of n, one
/// execution per n steps, whose failure re-executes those n steps from the state the first of
/// them preserved.
///
/// Every rank of the CD must run the same steps. Returns the first error of an execution that
/// escalated (the steps after it are not run).
pub fn strict_steps(
    name: &str,
    steps: Range<u64>,
    mut body: impl FnMut(&Cd, u64) -> Result<(), CdError>,
) -> Result<(), CdError> {
    let (settings, team) = runtime::with(|rt| {
        (
            crate::strict::child_settings(rt, name),
            rt.top().team.clone(),
        )
    });
    let relaxed = crate::strict::is_relaxed(&settings);
    // One execution of the CD running steps `range`: later `preserve` calls of a name keep
    // the first copy; a failed step does not stop the others.
    let mut group = |range: Range<u64>, mut measure: Option<&mut (u64, u64)>| {
        let run = |c: &Cd| -> Result<(), CdError> {
            c.frame.keep_first.set(true);
            c.frame.first_step.set(Some(range.start));
            let preserved_before = preserve_ns(c);
            let start = Instant::now();
            let mut first_error = None;
            for step in range.clone() {
                if let Err(e) = body(c, step) {
                    first_error.get_or_insert(e);
                }
            }
            if c.attempt() == 0 {
                if let Some(m) = measure.as_deref_mut() {
                    let delta = preserve_ns(c).saturating_sub(preserved_before);
                    let total = start.elapsed().as_nanos() as u64;
                    *m = (delta, total.saturating_sub(delta));
                }
            }
            first_error.map_or(Ok(()), Err)
        };
        if relaxed {
            crate::relaxed::relaxed(name, run)
        } else {
            crate::strict::run(name, team.clone(), settings.clone(), run)
        }
    };
    // A restart resumes the loop at the step its checkpoint's execution began with.
    let resumed_step = runtime::with(|rt| {
        let level = rt.top().level + 1;
        rt.checkpoint
            .resume
            .borrow()
            .as_ref()
            .filter(|r| r.at.cd == name && r.at.level == level)
            .map(|r| r.at.step)
    });
    let mut at = resumed_step.map_or(steps.start, |s| s.clamp(steps.start, steps.end));
    let per = match settings.interval {
        Interval::Every => 1,
        Interval::Steps(n) => n,
        Interval::Daly => {
            if at >= steps.end {
                return Ok(());
            }
            // The first step alone, measured.
            let mut measured = (0u64, 0u64);
            group(at..at + 1, Some(&mut measured))?;
            at += 1;
            let reduce_over = (team.rank_n() > 1 && !relaxed).then_some(&team);
            let mtbf = settings.mtbf_seconds.unwrap_or(f64::INFINITY);
            choose_daly(name, measured, mtbf, steps.end - at, reduce_over)
        }
    };
    if let Interval::Steps(n) = settings.interval {
        record(
            name,
            IntervalChoice {
                steps: n,
                ..IntervalChoice::default()
            },
        );
    }
    while at < steps.end {
        let end = at.saturating_add(per).min(steps.end);
        group(at..end, None)?;
        at = end;
    }
    Ok(())
}

/// Daly's steps per preservation for the child CD `name` of the current CD, from the
/// preservation time and the step time (ns) of its first execution, `measured`; recorded in
/// the report.
///
/// For a program that drives its own loop of CD executions (as LULESH does) and so cannot use
/// [`strict_steps`]: it runs the first execution with one step, measures, calls this on every
/// rank of the CD (collective: the largest δ and t over the current CD's team, so every rank
/// runs the same n), then runs n steps per execution. `steps_left` bounds n (`u64::MAX` when
/// the loop's length is not known ahead). `mtbf_seconds` is the CD's configured M.
pub fn daly_steps(name: &str, measured: (u64, u64), mtbf_seconds: f64, steps_left: u64) -> u64 {
    let team = runtime::with(|rt| rt.top().team.clone());
    let reduce_over = (team.rank_n() > 1).then_some(&team);
    choose_daly(name, measured, mtbf_seconds, steps_left, reduce_over)
}

/// n from `measured` (δ, t in ns; their largest over `reduce_over`, collectively), recorded.
fn choose_daly(
    name: &str,
    measured: (u64, u64),
    mtbf: f64,
    steps_left: u64,
    reduce_over: Option<&pgas::Team>,
) -> u64 {
    let (delta_ns, step_ns) = match reduce_over {
        Some(team) => pgas::runtime_hooks::internal(|| {
            pgas::reduce_all_on(team, measured, |a: (u64, u64), b: (u64, u64)| {
                (a.0.max(b.0), a.1.max(b.1))
            })
            .wait()
        }),
        None => measured,
    };
    let (delta, step) = (delta_ns as f64 * 1e-9, step_ns as f64 * 1e-9);
    let n = steps_per_preservation(delta, step, mtbf, steps_left);
    let tau = daly_interval(delta, mtbf);
    record(
        name,
        IntervalChoice {
            steps: n,
            daly: true,
            preserve_ns: delta_ns,
            step_ns,
            mtbf_ns: (mtbf * 1e9).min(u64::MAX as f64) as u64,
            daly_ns: (tau * 1e9).min(u64::MAX as f64) as u64,
            overhead_ppm: (expected_overhead(delta, n as f64 * step, mtbf) * 1e6)
                .min(u64::MAX as f64) as u64,
        },
    );
    n
}

/// The preservation time so far of the CD `c` names on this rank (all its instances).
fn preserve_ns(c: &Cd) -> u64 {
    runtime::with(|rt| {
        rt.stats
            .borrow_mut()
            .entry(&c.frame.name, c.frame.level)
            .preserve_ns
    })
}

/// Notes the interval chosen for the CD `name` (a child of the current CD) in the report.
fn record(name: &str, choice: IntervalChoice) {
    runtime::with(|rt| {
        let level = rt.top().level + 1;
        rt.stats.borrow_mut().entry(name, level).interval = Some(choice);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daly_matches_the_formula() {
        // δ = 1 s, M = 100 s: x = δ/(2M) = 0.005.
        let x: f64 = 0.005;
        let want = 200f64.sqrt() * (1.0 + x.sqrt() / 3.0 + x / 9.0) - 1.0;
        assert!((daly_interval(1.0, 100.0) - want).abs() < 1e-12);
        assert!(
            (daly_interval(1.0, 100.0) - 13.483_325_7).abs() < 1e-6,
            "{want}"
        );
        // δ = 30 s, M = 3600 s: x = 1/240.
        let x: f64 = 30.0 / 7200.0;
        let want = 216_000f64.sqrt() * (1.0 + x.sqrt() / 3.0 + x / 9.0) - 30.0;
        assert!((daly_interval(30.0, 3600.0) - want).abs() < 1e-9);
        assert!(
            (daly_interval(30.0, 3600.0) - 444.973_167).abs() < 1e-5,
            "{want}"
        );
        // δ ≥ 2M: τ = M.
        assert_eq!(daly_interval(10.0, 5.0), 5.0);
        assert_eq!(daly_interval(10.0, 4.0), 4.0);
        // Near first order for δ << M: sqrt(2δM) − δ.
        let (d, m) = (1e-3, 1e4);
        assert!((daly_interval(d, m) / ((2.0 * d * m).sqrt() - d) - 1.0).abs() < 1e-3);
    }

    #[test]
    fn steps_per_preservation_rounds_and_bounds() {
        // τ = 13.4833 s over 1 s steps: 13 steps.
        assert_eq!(steps_per_preservation(1.0, 1.0, 100.0, 1000), 13);
        // over 2 s steps: 6.74 -> 7.
        assert_eq!(steps_per_preservation(1.0, 2.0, 100.0, 1000), 7);
        assert_eq!(
            steps_per_preservation(1.0, 1.0, 100.0, 5),
            5,
            "at most the steps left"
        );
        assert_eq!(
            steps_per_preservation(1.0, 100.0, 100.0, 50),
            1,
            "at least one"
        );
        assert_eq!(
            steps_per_preservation(10.0, 1.0, 4.0, 50),
            4,
            "δ ≥ 2M: τ = M"
        );
        assert_eq!(
            steps_per_preservation(1.0, 0.0, 100.0, 9),
            9,
            "steps take no time"
        );
        assert_eq!(
            steps_per_preservation(1.0, 1.0, f64::INFINITY, 9),
            9,
            "no failures"
        );
        assert_eq!(steps_per_preservation(1.0, 1.0, 100.0, 0), 1);
    }

    #[test]
    fn expected_overhead_is_the_first_order_model() {
        // δ = 1, τ = 13, M = 100: 1/13 + 14/200.
        let o = expected_overhead(1.0, 13.0, 100.0);
        assert!((o - (1.0 / 13.0 + 0.07)).abs() < 1e-12);
        // The optimum τ is near the minimum of the model.
        let best = daly_interval(1.0, 100.0);
        for tau in [best * 0.5, best * 2.0] {
            assert!(expected_overhead(1.0, tau, 100.0) > expected_overhead(1.0, best, 100.0));
        }
    }
}
