//! `heat`: the shipped fault configuration gives the fault-free checksum bit for bit, with the
//! strict step re-executed by every rank and each relaxed halo failure by its rank alone.

mod common;

use common::run_ok;

const HEAT: &str = env!("CARGO_BIN_EXE_heat");
const FAULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/heat.toml");

fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    let mut lines = out.lines().filter(|l| l.starts_with(prefix));
    let found = lines
        .next()
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{out}"));
    assert!(lines.next().is_none(), "two {prefix:?} lines in:\n{out}");
    found
}

#[test]
fn the_faulty_run_prints_the_fault_free_checksum() {
    let clean = run_ok(HEAT, &["--ranks", "4"]);
    let faulty = run_ok(HEAT, &["--ranks", "4", "--cd-config", FAULTS]);
    assert_eq!(line(&faulty, "checksum "), line(&clean, "checksum "));
    // The re-executed step's puts race with the neighbours' restores of their halos: several
    // runs, so that a restore that is not ordered before them shows.
    for _ in 0..8 {
        let again = run_ok(HEAT, &["--ranks", "4", "--cd-config", FAULTS]);
        assert_eq!(line(&again, "checksum "), line(&clean, "checksum "));
    }
    assert_eq!(
        line(&clean, "cd step: "),
        "cd step: 0 faults injected, 0 re-executions, 0 escalations"
    );
    // The step's soft error: all 4 ranks restore and re-execute it.
    assert_eq!(
        line(&faulty, "cd step: "),
        "cd step: 1 faults injected, 4 re-executions, 0 escalations"
    );
    // A soft error and a lost rank in the halo exchange: each re-executed by its rank alone.
    assert_eq!(
        line(&faulty, "cd halo: "),
        "cd halo: 2 faults injected, 2 re-executions, 0 escalations"
    );
}

#[test]
fn the_checksum_changes_with_the_problem() {
    let a = run_ok(HEAT, &["--ranks", "4", "--steps", "20"]);
    let b = run_ok(HEAT, &["--ranks", "4", "--steps", "21"]);
    assert_ne!(line(&a, "checksum "), line(&b, "checksum "));
}
