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

/// Whether tests that need the launcher can run: `true` when it runs here. Without it they are
/// skipped (`false`, with a line on stderr), except under `CI=true`, where a missing launcher
/// is a failure: this panics naming it, so a CI job cannot pass without running them.
pub fn require_mpirun() -> bool {
    if mpirun_available() {
        return true;
    }
    let program = mpirun_program();
    if std::env::var("CI").is_ok_and(|v| v.trim() == "true") {
        panic!(
            "CI=true but the MPI launcher `{program}` does not run here (set MPIRUN or install \
             Open MPI); the mpi tests must run in CI"
        );
    }
    eprintln!("no MPI launcher `{program}` here; mpi runs skipped");
    false
}
