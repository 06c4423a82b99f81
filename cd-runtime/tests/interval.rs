//! Preservation intervals (`interval`, `cd::strict_steps`): one CD execution per n steps,
//! preserving at the first; a failure re-executes the steps since that preservation; n from
//! Daly's formula with `interval = "daly"`.

mod common;

use cd_runtime as cd;
use cd_runtime::interval::steps_per_preservation;
use cd_runtime::{CdConfig, CdOutcome};
use common::{Ring, config, run, step};

const N: usize = 16;
const STEPS: u64 = 12;
/// Bytes of one preservation of `x` (postcard: the length, then the f64s).
const X_BYTES: u64 = 1 + 8 * N as u64;

/// `STEPS` steps of `x` with a ring exchange in each, under `cd::strict_steps("step")`; each
/// rank returns `x` and how many steps it ran (re-executed ones included).
fn program(cfg: CdConfig) -> CdOutcome<(Vec<f64>, u64)> {
    run(2, cfg, || {
        let ring = Ring::new(N);
        let mut x: Vec<f64> = (0..N).map(|i| (i + pgas::rank_me()) as f64).collect();
        let mut runs = 0u64;
        cd::strict_steps("step", 0..STEPS, |c, s| {
            c.preserve("x", &mut x);
            runs += 1;
            step(&mut x, s);
            ring.exchange(&pgas::world(), &mut x);
            Ok(())
        })?;
        Ok((x, runs))
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn xs(out: &CdOutcome<(Vec<f64>, u64)>) -> Vec<Vec<f64>> {
    out.results.iter().map(|(x, _)| x.clone()).collect()
}

#[test]
fn without_an_interval_every_step_preserves() {
    let out = program(CdConfig::default());
    let s = out.report.cd("step").unwrap();
    assert_eq!(s.executions, 2 * STEPS);
    assert_eq!(s.bytes_local, 2 * STEPS * X_BYTES);
    assert_eq!(s.interval, None);
    assert!(out.results.iter().all(|(_, runs)| *runs == STEPS));
}

/// Every 4th step preserves; a soft error in the second execution (steps 4 to 7) re-executes
/// those four steps from the state step 4 preserved, bit for bit as without the failure.
#[test]
fn a_fixed_interval_preserves_every_nth_step_and_reexecutes_from_it() {
    let clean = program(CdConfig::default());
    let out = program(config(
        "[cd.step]\ninterval = 4\n\
         inject = { at = [{ rank = 1, iteration = 1, kind = \"soft\" }] }\n",
    ));
    assert_eq!(xs(&out), xs(&clean));
    for (rank, (_, runs)) in out.results.iter().enumerate() {
        assert_eq!(*runs, STEPS + 4, "rank {rank}: steps 4 to 7 ran twice");
    }
    let s = out.report.cd("step").unwrap();
    assert_eq!((s.executions, s.reexecutions), (2 * 4, 2));
    assert_eq!(
        s.bytes_local,
        2 * 3 * X_BYTES,
        "one preservation per 4 steps"
    );
    let i = s.interval.as_ref().unwrap();
    assert_eq!((i.steps, i.daly), (4, false));
    assert!(
        out.report
            .table()
            .contains("interval of step: preserves every 4 steps (configured)")
    );
}

/// With failures rare against the steps (M = 10^9 s), Daly's interval covers every step left
/// after the measured first one; with failures more frequent than a preservation takes
/// (M = 1 ns), every step preserves. Both give the fault-free bits under a soft error, and the
/// report's n is the formula's for the measured inputs it prints.
#[test]
fn daly_chooses_n_from_the_measured_preservation_and_the_mtbf() {
    let clean = program(CdConfig::default());
    for (mtbf, want) in [("1e9", Some(STEPS - 1)), ("1e-9", Some(1))] {
        let out = program(config(&format!(
            "[cd.step]\ninterval = \"daly\"\nmtbf_seconds = {mtbf}\n\
             inject = {{ at = [{{ rank = 0, iteration = 1, kind = \"soft\" }}] }}\n"
        )));
        assert_eq!(xs(&out), xs(&clean), "mtbf {mtbf}");
        let s = out.report.cd("step").unwrap();
        let i = s.interval.clone().unwrap();
        assert!(i.daly);
        let (delta, t, m) = (
            i.preserve_ns as f64 * 1e-9,
            i.step_ns as f64 * 1e-9,
            i.mtbf_ns as f64 * 1e-9,
        );
        assert_eq!(
            i.steps,
            steps_per_preservation(delta, t, m, STEPS - 1),
            "{i:?}"
        );
        assert_eq!(Some(i.steps), want, "mtbf {mtbf}: {i:?}");
        let executions = 1 + (STEPS - 1).div_ceil(i.steps);
        assert_eq!(
            s.executions,
            2 * (executions + 1),
            "mtbf {mtbf}: one re-execution"
        );
        assert_eq!(s.bytes_local, 2 * executions * X_BYTES);
        for (rank, (_, runs)) in out.results.iter().enumerate() {
            assert_eq!(
                *runs,
                STEPS + i.steps,
                "rank {rank}: the second execution twice"
            );
        }
        let table = out.report.table();
        assert!(
            table.contains(&format!(
                "interval of step: preserves every {} steps (Daly",
                i.steps
            )) && table.contains("expected overhead"),
            "{table}"
        );
    }
}
