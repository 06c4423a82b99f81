//! LULESH under Containment Domains (`--cd-config`): runs with injected soft
//! errors and rank losses end with exactly the numbers of the fault-free
//! run; a configuration that cannot be used is refused clearly.

mod common;

use std::process::Command;

use cd_runtime::CdConfig;
use lulesh::containment::{self, CdRunOutput};
use lulesh::verify::fmt_e;
use lulesh::{FinalReport, LuleshError, Options, distributed};

use common::{EIGHT_RANK_FAULTS, TempFile};

/// The report's lines without the timings: everything up to the full-precision energy sum.
fn physics(r: &FinalReport) -> String {
    let text = r.render();
    let end = text
        .find("\nElapsed time")
        .expect("the report has a timing section");
    text[..end].to_owned()
}

fn opts(nx: i32, its: i32) -> Options {
    Options {
        nx,
        its,
        ..Options::default()
    }
}

fn config(text: &str) -> CdConfig {
    CdConfig::parse(text, "test.toml").expect("valid configuration")
}

fn run_cd(o: &Options, ranks: usize, text: &str) -> Result<CdRunOutput, LuleshError> {
    containment::run(o, ranks, config(text), |_| {})
        .map(|out| out.expect("rank 0 runs in this process"))
}

fn lulesh(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lulesh"))
        .args(args)
        .env_remove("PGAS_RANKS")
        .env_remove("PGAS_SEGMENT_MB")
        .env_remove("PGAS_RANKS_PER_NODE")
        .env_remove("CD_CONFIG")
        .output()
        .expect("the binary runs")
}

#[test]
fn eight_ranks_with_soft_errors_and_rank_losses_are_bit_exact() {
    let o = opts(5, 9_999_999);
    let clean = distributed::run(&o, 8, |_| {})
        .expect("fault-free run")
        .expect("rank 0 runs in this process");
    assert_eq!(fmt_e(clean.origin_energy, 17), "2.72053116847034435e+04");
    let out = run_cd(&o, 8, EIGHT_RANK_FAULTS).expect("the faults are contained");
    assert_eq!(physics(&out.report), physics(&clean));
    assert_eq!(out.report.cycles, 231);

    let step = out.cd_report.cd("step").expect("the step CD ran");
    assert_eq!(step.level, 1);
    assert_eq!(step.injected, 5);
    assert_eq!(
        step.reexecutions,
        5 * 8,
        "every rank re-executes each failed cycle"
    );
    assert_eq!(step.executions, 231 * 8 + 5 * 8);
    assert_eq!(step.escalations, 0);
    assert!(step.bytes_buddy > 0 && step.bytes_local == 0);
    let root = out
        .cd_report
        .cd("root")
        .expect("the root preserved the mesh");
    assert!(root.bytes_local > 0);
    assert!(out.cd_report.table().contains("step"));
}

#[test]
fn the_binary_prints_the_fault_free_numbers_and_the_cd_report() {
    let cfg = TempFile::new("eight.toml", EIGHT_RANK_FAULTS);
    let args = ["-s", "5", "--ranks", "8", "-i", "120"];
    let clean = lulesh(&args);
    assert!(clean.status.success());
    let mut with_cd: Vec<&str> = args.to_vec();
    with_cd.extend(["--cd-config", cfg.0.to_str().unwrap()]);
    let faulty = lulesh(&with_cd);
    assert!(
        faulty.status.success(),
        "{}",
        String::from_utf8_lossy(&faulty.stderr)
    );
    let (clean, faulty) = (
        String::from_utf8(clean.stdout).unwrap(),
        String::from_utf8(faulty.stdout).unwrap(),
    );
    let before_timing = |s: &str| s[..s.find("\nElapsed time").expect("report")].to_owned();
    assert_eq!(before_timing(&faulty), before_timing(&clean));
    assert!(clean.contains("   Iteration count     =  120\n"));
    assert!(!clean.contains("CD report"));
    let table = &faulty[faulty.find("CD report (8 ranks").expect("the CD report")..];
    let step = table
        .lines()
        .find(|l| l.starts_with("step "))
        .expect("a row for the step CD");
    // name, level, executions, re-executions, escalations, injected: 4 faults before cycle 120.
    let cols: Vec<&str> = step.split_whitespace().collect();
    assert_eq!(&cols[..6], ["step", "1", "992", "32", "0", "4"], "{table}");
}

#[test]
fn single_rank_with_random_soft_errors_matches_the_reference() {
    let out = run_cd(
        &opts(10, 9_999_999),
        1,
        "seed = 11\n[cd.step]\nretries = 8\ninject = { soft_error = 0.1 }\n",
    )
    .expect("the faults are contained");
    let r = &out.report;
    assert_eq!(r.cycles, 231);
    assert_eq!(fmt_e(r.origin_energy, 17), "2.72053116847034689e+04");
    assert_eq!(fmt_e(r.energy_sum, 17), "2.41746210522627283e+05");
    for line in [
        "        MaxAbsDiff   = 2.273737e-12\n",
        "        TotalAbsDiff = 1.659646e-11\n",
        "        MaxRelDiff   = 4.649603e-14\n",
    ] {
        assert!(r.render().contains(line), "missing {line:?}");
    }
    let step = out.cd_report.cd("step").unwrap();
    assert!(step.injected > 5, "{step:?}");
    assert_eq!(step.reexecutions, step.injected);
    assert_eq!(step.executions, 231 + step.reexecutions);
    assert_eq!(step.escalations, 0);
}

#[test]
fn a_rank_loss_with_local_copies_stops_the_run_instead_of_a_wrong_answer() {
    let err = run_cd(
        &opts(3, 20),
        8,
        "[cd.step]\ninject = { at = [{ rank = 5, iteration = 3, kind = \"rank_loss\" }] }\n",
    )
    .unwrap_err();
    assert!(matches!(err, LuleshError::Cd(_)), "{err}");
    assert_eq!(err.exit_code(), 255);
    let text = err.to_string();
    assert!(
        text.contains("\"step\"") && text.contains("escalated"),
        "{text}"
    );
}

#[test]
fn a_bad_configuration_names_file_line_and_key() {
    let cfg = TempFile::new("bad.toml", "seed = 3\n[cd.step]\nretris = 3\n");
    let path = cfg.0.to_str().unwrap();
    let out = lulesh(&["-s", "3", "--cd-config", path]);
    assert_eq!(out.status.code(), Some(255));
    assert!(out.stdout.is_empty(), "nothing runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{path}:3")), "{err}");
    assert!(err.contains("retris"), "{err}");

    let out = lulesh(&["-s", "3", "--cd-config", "/nonexistent/cd.toml"]);
    assert_eq!(out.status.code(), Some(255));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/cd.toml"), "{err}");

    let out = lulesh(&["--cd-config"]);
    assert_eq!(out.status.code(), Some(255));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cd-config"));
}

#[test]
fn without_faults_the_cd_run_equals_the_plain_run() {
    let o = opts(6, 50);
    let out = run_cd(&o, 1, "").expect("run");
    let plain = {
        let mut sim = lulesh::Simulation::single_rank(&o).unwrap();
        let elapsed = sim.run(o.its, |_| {}).unwrap();
        FinalReport::new(&sim.domain, elapsed, o.nx, 1)
    };
    assert_eq!(physics(&out.report), physics(&plain));
    let step = out.cd_report.cd("step").unwrap();
    assert_eq!((step.executions, step.reexecutions), (50, 0));
}

/// `lulesh/configs/daly.toml` (buddy copies, Daly's interval for an MTBF of an hour) with a
/// rank loss in the long second execution of "step": the run ends with the fault-free numbers,
/// the report notes the interval Daly's formula chose (more than one cycle per execution), and
/// the loss re-executed that execution's cycles on every rank.
#[test]
fn the_daly_configuration_survives_a_rank_loss_bit_for_bit() {
    let o = opts(5, 9_999_999);
    let clean = distributed::run(&o, 8, |_| {})
        .expect("fault-free run")
        .expect("rank 0 runs in this process");
    let text = format!(
        "{}inject = {{ at = [{{ rank = 2, iteration = 1, kind = \"rank_loss\" }}] }}\n",
        include_str!("../configs/daly.toml")
    );
    let out = run_cd(&o, 8, &text).expect("the loss is contained");
    assert_eq!(physics(&out.report), physics(&clean));
    let step = out.cd_report.cd(containment::STEP_CD).expect("step ran");
    let chosen = step
        .interval
        .clone()
        .expect("the interval is in the report");
    assert!(chosen.daly && chosen.steps > 1, "{chosen:?}");
    assert_eq!(
        step.reexecutions, 8,
        "every rank re-executed the execution with the loss"
    );
    assert!(
        step.executions >= 3 * 8,
        "the measured cycle, then executions of n cycles: {}",
        step.executions
    );
}
