//! Running the example binaries from the tests (tests/examples.rs, tests/cd_stencil.rs and
//! tests/mpi.rs share these).
#![allow(dead_code)] // each test file uses its own part

use std::process::{Command, Output};

/// Runs `bin` with `args` and `env`, with `PGAS_RANKS` and `CD_CONFIG` removed unless `env`
/// gives them.
pub fn run(bin: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env_remove("PGAS_RANKS")
        .env_remove("CD_CONFIG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"))
}

/// The stdout of `out`, the output of `what`, failing the test with both streams if it failed.
pub fn stdout_of_success(what: &str, out: Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs `bin` and returns its stdout, failing the test with its output if it failed.
pub fn run_ok(bin: &str, args: &[&str]) -> String {
    stdout_of_success(&format!("{bin} {args:?}"), run(bin, args, &[]))
}
