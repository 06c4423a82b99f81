//! Runs each example binary with small problems on several rank counts and checks that it
//! succeeds (each binary verifies its own answer), and that the stencil's checksum is the same
//! for every rank count.

mod common;

use common::{run, run_ok};

/// Runs `bin`, expects failure, and returns its stderr.
fn run_err(bin: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = run(bin, args, env);
    assert!(
        !out.status.success(),
        "{bin} {args:?} should have failed; stdout:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const HELLO: &str = env!("CARGO_BIN_EXE_hello");
const GUPS: &str = env!("CARGO_BIN_EXE_gups");
const DHT: &str = env!("CARGO_BIN_EXE_dht");
const STENCIL: &str = env!("CARGO_BIN_EXE_stencil");

#[test]
fn hello_on_1_2_3_4_ranks() {
    for ranks in ["1", "2", "3", "4"] {
        let out = run_ok(HELLO, &["--ranks", ranks, "--rounds", "3"]);
        assert!(out.contains(&format!("hello: {ranks} ranks OK")), "{out}");
        let greetings = out
            .lines()
            .filter(|l| l.starts_with("hello from rank"))
            .count();
        assert_eq!(greetings.to_string(), ranks, "{out}");
    }
}

#[test]
fn rank_count_comes_from_pgas_ranks_and_is_validated() {
    let out = run(HELLO, &[], &[("PGAS_RANKS", "3")]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("hello: 3 ranks OK"));
    let err = run_err(HELLO, &[], &[("PGAS_RANKS", "many")]);
    assert!(
        err.contains("PGAS_RANKS") && err.contains("not a whole number"),
        "{err}"
    );
    let err = run_err(HELLO, &["--ranks", "0"], &[]);
    assert!(err.contains("at least 1"), "{err}");
}

#[test]
fn gups_atomic_on_1_2_3_4_ranks() {
    for ranks in ["1", "2", "3", "4"] {
        let out = run_ok(
            GUPS,
            &["--ranks", ranks, "--log-table", "10", "--variant", "atomic"],
        );
        assert!(out.contains("GUP/s") && out.contains("0 errors"), "{out}");
    }
}

#[test]
fn gups_rpc_on_1_2_3_4_ranks() {
    for ranks in ["1", "2", "3", "4"] {
        let args = [
            "--ranks",
            ranks,
            "--log-table",
            "10",
            "--variant",
            "rpc",
            "--batch",
            "37",
        ];
        let out = run_ok(GUPS, &args);
        assert!(out.contains("GUP/s") && out.contains("0 errors"), "{out}");
    }
}

#[test]
fn gups_refuses_a_huge_table() {
    let err = run_err(GUPS, &["--ranks", "1", "--log-table", "40"], &[]);
    assert!(err.contains("--log-table 40"), "{err}");
}

#[test]
fn dht_on_1_2_3_4_ranks() {
    for ranks in ["1", "2", "3", "4"] {
        let out = run_ok(
            DHT,
            &[
                "--ranks",
                ranks,
                "--keys-per-rank",
                "1500",
                "--lookups",
                "3000",
            ],
        );
        assert!(out.contains("all lookups checked"), "{out}");
    }
}

#[test]
fn dht_full_table_is_a_clear_error() {
    let args = [
        "--ranks",
        "2",
        "--keys-per-rank",
        "200",
        "--slots-per-rank",
        "150",
    ];
    let err = run_err(DHT, &args, &[]);
    assert!(
        err.contains("table full") && err.contains("--slots-per-rank"),
        "{err}"
    );
}

/// The `checksum ... fingerprint ...` line of a stencil run.
fn checksum_line(out: &str) -> String {
    out.lines()
        .find(|l| l.starts_with("checksum "))
        .unwrap_or_else(|| panic!("no checksum line in:\n{out}"))
        .to_string()
}

#[test]
fn stencil_checksum_is_the_same_on_1_2_3_4_8_ranks() {
    let mut lines = Vec::new();
    for ranks in ["1", "2", "3", "4", "8"] {
        let out = run_ok(STENCIL, &["--ranks", ranks, "--n", "18", "--iters", "7"]);
        assert!(out.contains("identical to serial run"), "{out}");
        lines.push((ranks, checksum_line(&out)));
    }
    for (ranks, line) in &lines[1..] {
        assert_eq!(line, &lines[0].1, "{ranks} ranks against 1 rank");
    }
}

#[test]
fn stencil_uneven_blocks_without_serial_check_agree() {
    // 13 does not divide evenly by 2 or 3: blocks differ in size across ranks.
    let a = checksum_line(&run_ok(
        STENCIL,
        &["--ranks", "2", "--n", "13", "--iters", "5", "--no-serial"],
    ));
    let b = checksum_line(&run_ok(
        STENCIL,
        &["--ranks", "6", "--n", "13", "--iters", "5"],
    ));
    assert_eq!(a, b);
}

#[test]
fn stencil_refuses_a_grid_smaller_than_the_process_grid() {
    let err = run_err(STENCIL, &["--ranks", "3", "--n", "2"], &[]);
    assert!(err.contains("too small"), "{err}");
}
