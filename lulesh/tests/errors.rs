//! Fatal conditions and the command line's error handling.

use std::process::Command;

use lulesh::{LuleshError, Options, Simulation};

fn small() -> Simulation {
    let opts = Options {
        nx: 4,
        ..Options::default()
    };
    Simulation::single_rank(&opts).unwrap()
}

#[test]
fn negative_volume_is_a_volume_error_with_status_255() {
    let mut sim = small();
    sim.domain.v[5] = -1.0;
    let err = sim.step().unwrap_err();
    assert!(matches!(err, LuleshError::Volume { elem: 5, .. }), "{err}");
    assert_eq!(err.exit_code(), 255);
    assert!(err.to_string().starts_with("VolumeError"));
}

#[test]
fn excessive_q_is_a_qstop_error_with_status_254() {
    let mut sim = small();
    // A huge q would first crush the element, so lower the limit instead.
    sim.domain.params.qstop = 1.0e-3;
    sim.domain.q[7] = 1.0e-2;
    let err = sim.step().unwrap_err();
    assert!(matches!(err, LuleshError::QStop { elem: 7, .. }), "{err}");
    assert_eq!(err.exit_code(), 254);
    assert!(err.to_string().starts_with("QStopError"));
}

fn lulesh(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lulesh"))
        .args(args)
        .output()
        .expect("the binary runs")
}

#[test]
fn unknown_option_prints_usage_and_a_clear_error() {
    let out = lulesh(&["-x"]);
    assert_eq!(out.status.code(), Some(255));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ERROR: Unknown command line argument: -x"),
        "{err}"
    );
    assert!(err.contains("Usage:"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_values_name_the_option() {
    for (args, expect) in [
        (
            &["-s", "ten"][..],
            "Parse Error on option -s integer value required",
        ),
        (&["-i"][..], "Missing integer argument to -i"),
        (&["-s", "0"][..], "Option -s must be at least 1"),
        (
            &["--threads", "0"][..],
            "Option --threads must be at least 1",
        ),
    ] {
        let out = lulesh(args);
        assert_eq!(out.status.code(), Some(255), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

#[test]
fn help_exits_successfully() {
    let out = lulesh(&["-h"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("-s <size>"));
}

#[test]
fn command_line_run_prints_the_reference_report() {
    let out = lulesh(&["-s", "6", "-i", "20", "-p"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Running problem size 6^3 per domain until completion\n"));
    assert!(text.contains("cycle = 1, time = "), "{text}");
    assert!(text.contains("Run completed:\n   Problem size        =  6\n"));
    assert!(text.contains("   Iteration count     =  20\n"));
    assert!(text.contains("\nElapsed time         = "));
    assert!(text.contains("Grind time (us/z/c)  = "));
    assert!(text.contains("FOM                  = "));
    let quiet = lulesh(&["-s", "4", "-i", "3", "-q"]);
    assert!(quiet.status.success() && quiet.stdout.is_empty());
}
