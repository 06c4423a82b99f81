//! Running the example binaries from the tests (tests/examples.rs, tests/cd_stencil.rs and
//! tests/mpi.rs share these).
#![allow(dead_code)] // each test file uses its own part

use std::process::{Command, Output};

pub mod kills;
pub mod ulfm_job;

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

/// The shipped configuration in which the relaxed "rank_step" of rank [`ESCALATING_RANK`]
/// escalates once, in iteration [`ESCALATING_ITERATION`], into "iteration", which keeps
/// dependency lists (tests/cd_stencil.rs on smp, tests/mpi.rs under mpirun).
pub const ESCALATION_CONFIG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/configs/cd_stencil_escalation.toml"
);
/// The rank whose "rank_step" fails in [`ESCALATION_CONFIG`].
pub const ESCALATING_RANK: usize = 6;
/// The instance of "rank_step" (and so of "iteration") that fails in [`ESCALATION_CONFIG`].
pub const ESCALATING_ITERATION: usize = 3;

/// The ranks of an 8-rank `cd_stencil` (a 2x2x2 process grid, x fastest) that re-execute when
/// `failed`'s relaxed CD escalates with dependency lists and every rank is a node of its own,
/// from the halo pattern alone: in an iteration every rank puts its faces into its face
/// neighbours (along axis `a` the neighbour of `r` is `r ^ (1 << a)`), synchronizes by a
/// barrier (no dependency) and reads its halos from its own memory. So the failed node's write
/// list is its three neighbours, its read list is empty, and so are the write lists of its
/// read list: D is `failed` and its neighbours.
pub fn dependents_in_2x2x2(failed: usize) -> Vec<usize> {
    let mut d: Vec<usize> = (0..3).map(|a| failed ^ (1 << a)).collect();
    d.push(failed);
    d.sort_unstable();
    d
}

/// The report's line naming the ranks that re-executed "iteration" for the escalation of
/// [`ESCALATION_CONFIG`] when `ranks` did (with the nodes, which equal the ranks when each
/// rank is a node, if that was a dependency-limited re-execution: fewer than all 8).
pub fn escalation_line(ranks: &[usize]) -> String {
    let limited = if ranks.len() < 8 {
        format!(" (dependency-limited, nodes {ranks:?})")
    } else {
        String::new()
    };
    format!(
        "re-executed ranks per failure of iteration: #{ESCALATING_ITERATION}.1: {ranks:?}{limited}"
    )
}
