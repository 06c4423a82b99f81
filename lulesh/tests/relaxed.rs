//! LULESH under relaxed Containment Domains (`lulesh/configs/relaxed.toml`: a strict CD
//! "step" per cycle, one relaxed CD "rank_step" per rank inside): fault-free, the numbers of
//! the run without CDs; one injected soft error in "rank_step", at cycles from the first to
//! the last and on different ranks, gives those numbers bit for bit, with exactly the failed
//! rank re-executing (the report's failure records) and no strict re-execution.

mod common;

use std::process::Command;

use cd_runtime::CdConfig;
use lulesh::containment::{self, CdRunOutput, RANK_CD, STEP_CD};
use lulesh::verify::fmt_e;
use lulesh::{FinalReport, Options, distributed};

use common::TempFile;

const RELAXED: &str = include_str!("../configs/relaxed.toml");
const CYCLES: u32 = 231;

/// The report's lines without the timings.
fn physics(r: &FinalReport) -> String {
    let text = r.render();
    let end = text.find("\nElapsed time").expect("a timing section");
    text[..end].to_owned()
}

fn opts() -> Options {
    Options {
        nx: 5,
        its: 9_999_999,
        ..Options::default()
    }
}

fn run(text: &str) -> CdRunOutput {
    let config = CdConfig::parse(text, "relaxed.toml").expect("valid configuration");
    assert!(containment::relaxed_configured(&config));
    containment::run(&opts(), 8, config, |_| {})
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .expect("rank 0 runs in this process")
}

fn clean() -> FinalReport {
    distributed::run(&opts(), 8, |_| {})
        .expect("fault-free run")
        .expect("rank 0 runs in this process")
}

/// `faults`: (rank, cycle) of each injected soft error.
fn check(out: &CdRunOutput, want: &FinalReport, faults: &[(usize, u64)], what: &str) {
    assert_eq!(physics(&out.report), physics(want), "{what}");
    assert_eq!(out.report.cycles as u32, CYCLES, "{what}");
    let step = out.cd_report.cd(STEP_CD).expect("the step CD ran");
    assert_eq!(step.reexecutions, 0, "{what}: no strict re-execution");
    assert_eq!(step.executions, u64::from(CYCLES) * 8, "{what}");
    let inner = out.cd_report.cd(RANK_CD).expect("the relaxed CD ran");
    assert_eq!(inner.level, 2);
    assert!(inner.bytes_logged > 0 && inner.entries_logged > 0, "{what}");
    assert_eq!(inner.escalations, 0, "{what}");
    assert_eq!(inner.injected, faults.len() as u64, "{what}");
    assert_eq!(inner.reexecutions, faults.len() as u64, "{what}");
    assert_eq!(
        inner.executions,
        u64::from(CYCLES) * 8 + faults.len() as u64,
        "{what}"
    );
    let mut got: Vec<(Vec<usize>, u64)> = inner
        .failures
        .iter()
        .map(|f| (f.ranks.clone(), f.iteration))
        .collect();
    got.sort_by_key(|g| g.1);
    // The report merges the records of one cycle over ranks: two ranks failing in the same
    // cycle (each recovering alone) make one record naming both.
    let mut want: Vec<(Vec<usize>, u64)> = Vec::new();
    for &(r, c) in faults {
        match want.iter_mut().find(|w| w.1 == c) {
            Some(w) => w.0.push(r),
            None => want.push((vec![r], c)),
        }
    }
    want.iter_mut().for_each(|w| w.0.sort_unstable());
    want.sort_by_key(|w| w.1);
    assert_eq!(
        got, want,
        "{what}: exactly the failed rank re-executes each time"
    );
    if !faults.is_empty() && !what.contains("before operation Some") {
        // Its own halo puts squashed (the first cycle has no reduction to serve; a loss in
        // the middle of the body may come before the first flush point, and the replay then
        // performs the puts again instead).
        assert!(inner.writes_squashed > 0, "{what}");
    }
}

fn inject(faults: &[(usize, u64)]) -> String {
    let at: Vec<String> = faults
        .iter()
        .map(|(r, c)| format!("{{ rank = {r}, iteration = {c}, kind = \"soft\" }}"))
        .collect();
    format!("{RELAXED}inject = {{ at = [{}] }}\n", at.join(", "))
}

#[test]
fn fault_free_relaxed_run_equals_the_run_without_cds() {
    let want = clean();
    assert_eq!(fmt_e(want.origin_energy, 17), "2.72053116847034435e+04");
    check(&run(RELAXED), &want, &[], "fault-free");
}

#[test]
fn one_soft_error_anywhere_reexecutes_one_rank_and_is_bit_exact() {
    let want = clean();
    // The first cycle (no time-step reduction before its first exchange), early, middle,
    // the last; corner ranks of the 2x2x2 cube, each with seven neighbours.
    for (rank, cycle) in [(2, 0), (7, 1), (0, 57), (5, 120), (3, 230)] {
        let faults = [(rank, cycle)];
        check(
            &run(&inject(&faults)),
            &want,
            &faults,
            &format!("soft error on rank {rank} in cycle {cycle}"),
        );
    }
    // Several in one run, two on the same cycle.
    let faults = [(1, 10), (6, 10), (4, 99), (1, 200)];
    check(&run(&inject(&faults)), &want, &faults, "four soft errors");
}

/// A rank loss at the end of "rank_step", or in its middle, with the relaxed CD's log and copies at the buddy
/// (`log_medium = "buddy"`, `medium = "buddy"`): the lost rank fetches its log back from
/// its buddy and recovers alone, bit for bit, while "step" is not re-executed. (The halo
/// buffers and flags the loss poisons are rewritten by the replayed puts: every put into a
/// rank's cycle lands after its "rank_step" began, the time-step reduction ordering them.)
#[test]
fn a_rank_loss_in_rank_step_with_buddy_logs_is_recovered_alone() {
    let want = clean();
    // At the end of the body, and (the log durable at every operation) right before an
    // operation in the middle of it.
    for (rank, cycle, op) in [
        (3, 40, None),
        (6, 229, None),
        (5, 77, Some(3)),
        (2, 150, Some(20)),
    ] {
        let at_op = op.map_or(String::new(), |op: u64| format!(", at_op = {op}"));
        let text = format!(
            "[cd.step]\nmedium = \"buddy\"\n{RELAXED}medium = \"buddy\"\n\
             log_medium = \"buddy\"\n\
             inject = {{ at = [{{ rank = {rank}, iteration = {cycle}, kind = \"rank_loss\"{at_op} }}] }}\n"
        );
        let out = run(&text);
        let what = format!("loss of rank {rank} in cycle {cycle} (before operation {op:?})");
        check(&out, &want, &[(rank, cycle)], &what);
        // Each entry replicated once: about 8.5 kB per rank and cycle at -s 5.
        let inner = out.cd_report.cd(RANK_CD).unwrap();
        assert!(
            inner.bytes_replicated > 0 && inner.bytes_replicated < inner.bytes_logged,
            "{what}: {} B replicated, {} B logged",
            inner.bytes_replicated,
            inner.bytes_logged
        );
    }
}

/// Rank losses at seeded random operations of random cycles and ranks, one per run, the log
/// durable at every operation: each recovers alone, bit for bit (a campaign like the ones
/// that found the mid-body bugs of the relaxed property test).
#[test]
fn rank_losses_at_random_operations_are_recovered_alone() {
    let want = clean();
    for i in 0..12u64 {
        let r = pgas::mix64(0x1075 ^ i);
        let (rank, cycle, op) = ((r % 8) as usize, (r >> 8) % 230 + 1, (r >> 24) % 16);
        let text = format!(
            "[cd.step]\nmedium = \"buddy\"\n{RELAXED}medium = \"buddy\"\n\
             log_medium = \"buddy\"\nlog_durable = \"operation\"\n\
             inject = {{ at = [{{ rank = {rank}, iteration = {cycle}, kind = \"rank_loss\", \
             at_op = {op} }}] }}\n"
        );
        let what = format!("loss of rank {rank} in cycle {cycle} before operation Some({op})");
        check(&run(&text), &want, &[(rank, cycle)], &what);
    }
}

#[test]
fn the_binary_runs_relaxed_from_the_config_file_alone() {
    let faults = TempFile::new(
        "relaxed-faults.toml",
        include_str!("../configs/relaxed-faults.toml"),
    );
    let lulesh = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_lulesh"))
            .args(args)
            .env_remove("PGAS_RANKS")
            .env_remove("PGAS_SEGMENT_MB")
            .env_remove("CD_CONFIG")
            .output()
            .expect("the binary runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let plain = lulesh(&["-s", "5", "--ranks", "8"]);
    let with = lulesh(&[
        "-s",
        "5",
        "--ranks",
        "8",
        "--cd-config",
        faults.0.to_str().unwrap(),
    ]);
    for key in [
        "Iteration count",
        "Origin Energy (full)",
        "Sum of Energy (full)",
    ] {
        let line = |t: &str| t.lines().find(|l| l.contains(key)).unwrap().to_owned();
        assert_eq!(line(&with), line(&plain), "{with}");
    }
    assert!(
        with.contains(
            "re-executed ranks per failure of rank_step: #3.1: [0], #10.1: [5], #25.1: [7]"
        ),
        "{with}"
    );
}

/// A rank loss in the strict "step" around relaxed per-rank CDs: the lost rank's arrival flags
/// hold the loss's fill pattern, which read as a number exceeds every sequence number: a flag
/// counts only in the waiting exchange's generation, or the pattern would satisfy the next
/// wait, the rank would go on with no data, and the job would hang.
#[test]
fn a_rank_loss_around_relaxed_cds_is_bit_exact() {
    let want = clean();
    let text = format!(
        "{RELAXED}[cd.step]\nmedium = \"buddy\"\n\
         inject = {{ at = [{{ rank = 3, iteration = 40, kind = \"rank_loss\" }}] }}\n"
    );
    let out = run(&text);
    assert_eq!(physics(&out.report), physics(&want));
    let step = out.cd_report.cd(STEP_CD).unwrap();
    assert_eq!(step.reexecutions, 8, "every rank re-executes the step");
}

/// `[cd.step] interval = 4`: one strict "step" and one relaxed "rank_step" per rank for every
/// four cycles (the last execution has the three left). Soft errors in "rank_step" are each
/// recovered by the failed rank alone, replaying four cycles' logs; a soft error in "step"
/// re-executes its four cycles on every rank. The numbers stay the fault-free ones bit for bit,
/// and the progress callback sees every cycle exactly once, in order, re-executions included.
#[test]
fn a_step_of_four_cycles_is_bit_exact_and_reports_each_cycle_once() {
    let want = clean();
    let blocks = u64::from(CYCLES).div_ceil(4);
    let relaxed_faults = [(2usize, 0u64), (5, 30), (3, blocks - 1)];
    let at: Vec<String> = relaxed_faults
        .iter()
        .map(|(r, b)| format!("{{ rank = {r}, iteration = {b}, kind = \"soft\" }}"))
        .collect();
    let text = format!(
        "[cd.step]\ninterval = 4\ninject = {{ at = [{{ rank = 1, iteration = 20, kind = \"soft\" }}] }}\n\
         {RELAXED}inject = {{ at = [{}] }}\n",
        at.join(", ")
    );
    let config = CdConfig::parse(&text, "relaxed.toml").expect("valid configuration");
    assert_eq!(
        containment::cycles_per_step(&config).unwrap(),
        containment::StepInterval::Fixed(4)
    );
    let seen = std::sync::Mutex::new(Vec::new());
    let out = containment::run(&opts(), 8, config, |d| {
        seen.lock().unwrap().push(d.ts.cycle)
    })
    .unwrap_or_else(|e| panic!("{e}\n{text}"))
    .expect("rank 0 runs in this process");
    assert_eq!(physics(&out.report), physics(&want));
    let cycles: Vec<i32> = (1..=CYCLES as i32).collect();
    assert_eq!(
        *seen.lock().unwrap(),
        cycles,
        "each cycle reported once, in order"
    );

    let step = out.cd_report.cd(STEP_CD).unwrap();
    assert_eq!(
        step.reexecutions, 8,
        "the step's soft error re-executes every rank"
    );
    assert_eq!(step.executions, (blocks + 1) * 8);
    let inner = out.cd_report.cd(RANK_CD).unwrap();
    assert_eq!(inner.escalations, 0);
    assert_eq!(inner.reexecutions, relaxed_faults.len() as u64);
    let mut got: Vec<(Vec<usize>, u64)> = inner
        .failures
        .iter()
        .map(|f| (f.ranks.clone(), f.iteration))
        .collect();
    got.sort_by_key(|g| g.1);
    let want_failures: Vec<(Vec<usize>, u64)> =
        relaxed_faults.iter().map(|&(r, b)| (vec![r], b)).collect();
    assert_eq!(
        got, want_failures,
        "exactly the failed rank re-executes each time"
    );
    // Four cycles' own puts squashed per recovery, against one cycle's in a step per cycle.
    assert!(inner.writes_squashed > 0);
}

/// `[cd.step] interval = "daly"`: the first execution of "step" is one cycle, measured; the
/// later ones span Daly's n for that measurement (the report's interval), and a soft error in
/// "step" and in "rank_step" still gives the fault-free numbers. An MTBF of a nanosecond makes
/// n = 1 (a step per cycle); of 10^9 s, one execution for every cycle after the first.
#[test]
fn a_daly_interval_spans_the_cycles_the_formula_gives_and_stays_bit_exact() {
    let want = clean();
    for (mtbf, n_is_one) in [("1e-9", true), ("1e9", false)] {
        let text = format!(
            "[cd.step]\ninterval = \"daly\"\nmtbf_seconds = {mtbf}\n\
             inject = {{ at = [{{ rank = 1, iteration = 1, kind = \"soft\" }}] }}\n\
             {RELAXED}inject = {{ at = [{{ rank = 6, iteration = 1, kind = \"soft\" }}] }}\n"
        );
        let out = run(&text);
        assert_eq!(physics(&out.report), physics(&want), "M = {mtbf}");
        let step = out.cd_report.cd(STEP_CD).unwrap();
        let chosen = step
            .interval
            .clone()
            .expect("the report notes the interval");
        assert!(chosen.daly && chosen.preserve_ns > 0 && chosen.step_ns > 0);
        let executions = if n_is_one {
            assert_eq!(chosen.steps, 1, "M = {mtbf}");
            u64::from(CYCLES) + 1
        } else {
            assert!(chosen.steps >= u64::from(CYCLES), "M = {mtbf}: {chosen:?}");
            // The measured cycle, then the rest in one execution, run twice (the soft error).
            3
        };
        assert_eq!(step.executions, executions * 8, "M = {mtbf}");
        assert_eq!(step.reexecutions, 8, "M = {mtbf}");
        let inner = out.cd_report.cd(RANK_CD).unwrap();
        assert_eq!(
            (inner.reexecutions, inner.escalations),
            (1, 0),
            "M = {mtbf}"
        );
    }
}
