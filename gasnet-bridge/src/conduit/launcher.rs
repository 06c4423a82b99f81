//! Starting a program under `mpirun` from tests and tools, with one convention for the
//! launcher: `MPIRUN` names it (default `mpirun`), `MPIRUN_FLAGS` gives its flags (default
//! `--allow-run-as-root --oversubscribe`, which Open MPI needs in a root container and with more
//! processes than cores).

use std::process::{Command, Stdio};

/// The launcher program (`MPIRUN`, default `mpirun`).
pub fn mpirun_program() -> String {
    std::env::var("MPIRUN").unwrap_or_else(|_| "mpirun".into())
}

/// `mpirun <flags> -n <n>`, ready for the program and its arguments.
pub fn mpirun_command(n: usize) -> Command {
    let flags = std::env::var("MPIRUN_FLAGS")
        .unwrap_or_else(|_| "--allow-run-as-root --oversubscribe".into());
    let mut c = Command::new(mpirun_program());
    c.args(flags.split_whitespace())
        .arg("-n")
        .arg(n.to_string());
    c
}

/// Whether the launcher runs here (`mpirun --version` succeeds); tests skip without it.
pub fn mpirun_available() -> bool {
    Command::new(mpirun_program())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `test`, which needs the launcher, can run: `true` when it runs here. Without it the
/// test is skipped (`false`, with a line on stderr), except under `CI=true`, where a missing
/// launcher is a failure: this panics naming it, so a CI job cannot pass without running it.
pub fn require_mpirun(test: &str) -> bool {
    if mpirun_available() {
        return true;
    }
    let launcher = mpirun_program();
    assert!(
        !std::env::var("CI").is_ok_and(|v| v.trim() == "true"),
        "{test}: needs {launcher} (MPIRUN), which does not run here; under CI=true that is a \
         failure, not a skip (install Open MPI, as .ci/run does)"
    );
    eprintln!("{test}: no {launcher} on PATH; skipped (under CI=true this fails)");
    false
}
