//! The 3-D Jacobi stencil of `stencil` under Containment Domains: every iteration is a strict
//! CD spanning all ranks that preserves the rank's grid block; with `--cd-config FILE.toml`
//! the cd-runtime's injector adds soft errors and rank losses, the failing iteration is
//! restored and re-executed by all ranks, and the checksum is the same as without faults.
//!
//! The grid, the halo exchange and the numerics are `stencil`'s (both use
//! [`pgas_examples::jacobi`]), so the checksum also equals `stencil`'s for the same `--n` and
//! `--iters`.
//!
//! What a CD preserves: the block (interior and halos, by `preserve_slice`). The receive
//! buffers in the segment need no preservation: every execution of an iteration, first or
//! repeated, has all neighbours write the faces it reads before the barrier it reads after,
//! so a segment wiped by a rank loss is rewritten before it is read. (A rank loss happens at
//! the end of an execution, and the neighbours write the next faces only after the CD's
//! agreement, which the lost rank joins after its loss.)
//!
//! Relaxed CDs (`examples/configs/cd_stencil_relaxed.toml`): when the configuration says
//! `kind = "relaxed"` for the CD "rank_step" (level 2), each iteration's body runs in one
//! relaxed CD per rank inside the strict "iteration", entered with `cd::relaxed` (read from the
//! configuration before the run, so this does not depend on `kind` turning a `cd::strict`
//! call into a relaxed CD); without it there is no inner CD. The faces the neighbours put into
//! this rank's receive buffers are potentially shared (logged by the senders, replayed into a
//! recovering rank epoch by epoch); the block is private Rust memory, preserved by reference
//! to "iteration"'s copy. A soft error injected into "rank_step" is recovered by the failing
//! rank alone while the others wait in the agreement of "iteration"; the checksum is the
//! fault-free one.
//!
//! Prints the checksum with `{:.17e}`, then the CD report table. Under mpirun (feature `mpi`)
//! each process runs one rank, the checks stop every process if one fails, and rank 0's process
//! prints.

#![forbid(unsafe_code)]

use std::path::PathBuf;

use cd_runtime as cd;
use clap::Parser;
use pgas_examples::jacobi::{
    Grid, ITERATION_CD, JacobiArgs, RANK_CD, cd_launch, check_edge, relaxed_rank_cd, summarize,
};
use pgas_examples::{CommonArgs, fail, finish, job_config, parse_args, speaks};

/// Command line of `cd_stencil`.
#[derive(Debug, Parser)]
#[command(about = "3-D 7-point Jacobi with a strict Containment Domain per iteration")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    jacobi: JacobiArgs,
    /// CD configuration (TOML, see cd_runtime::config); default: the file named by `CD_CONFIG`,
    /// else CDs on, no faults injected.
    #[arg(long, value_name = "FILE.toml")]
    cd_config: Option<PathBuf>,
    /// Resume from a checkpoint (`checkpoint` key of the CD "iteration"): `auto` for the
    /// newest whole one in the configured directory, or a directory; default: `CD_RESTART`.
    #[arg(long, value_name = "DIR|auto")]
    restart: Option<String>,
    /// Spare processes (mpi conduit, feature `ulfm`, under `mpirun --with-ft ulfm -n N+S`):
    /// a killed rank's process is replaced by one and the run resumes from memory
    /// (`cd-runtime/src/REAL_LOSS.md`); default: `PGAS_SPARES`, else none.
    #[arg(long, value_name = "S")]
    spares: Option<usize>,
}

fn main() {
    const NAME: &str = "cd_stencil";
    let args: Args = parse_args();
    // Before anything starts the conduit, which reads the count once.
    if let Some(s) = args.spares {
        if let Err(set) = pgas::request_spares(s) {
            fail(
                NAME,
                format!("--spares {s}: {set} spares were already asked for"),
            );
        }
    }
    let ranks = args.common.ranks().unwrap_or_else(|e| fail(NAME, e));
    let (n, iters) = (args.jacobi.n, args.jacobi.iters);
    // The errors are reported in this order: `--n` too large, the configuration, `--n` too
    // small for the process grid.
    check_edge(n).unwrap_or_else(|e| fail(NAME, e));
    let mut config = cd::CdConfig::for_program(args.cd_config.as_deref())
        .unwrap_or_else(|e| fail(NAME, e))
        .unwrap_or_default();
    // What shapes the grid's state; `--iters` may differ in a relaunch that goes further.
    config.program = format!("{NAME} --n {n}");
    config.restart = cd::RestartFrom::for_program(args.restart.as_deref());
    let relaxed = relaxed_rank_cd(&config);
    let grid = Grid::new(n, ranks).unwrap_or_else(|e| fail(NAME, e));
    let serial_check = args.jacobi.serial_check();
    let segment = grid.segment_bytes().unwrap_or_else(|e| fail(NAME, e));
    let job = job_config(ranks, segment).unwrap_or_else(|e| fail(NAME, e));

    let mut report = cd::Report::default();
    let launched = cd_launch(&job, config, &grid, iters, serial_check)
        .map(|outcome| {
            report = outcome.report;
            outcome.results
        })
        .map_err(|e| stop(NAME, e));
    let Some(reports) = finish(NAME, launched) else {
        return;
    };

    let summary = summarize(&reports);
    let stats = report.cd(ITERATION_CD).cloned().unwrap_or_default();
    println!("{}", summary.headline(NAME, &grid, iters));
    println!(
        "cd: {} faults injected, {} re-executions, {} escalations",
        stats.injected, stats.reexecutions, stats.escalations
    );
    if relaxed {
        let inner = report.cd(RANK_CD).cloned().unwrap_or_default();
        println!(
            "relaxed cd: {} faults injected, {} re-executions, {} escalations, {} bytes logged",
            inner.injected, inner.reexecutions, inner.escalations, inner.bytes_logged
        );
    }
    println!("{}", summary.checksum_line());
    print!("{}", report.table());
}

/// Ends the program on a CD job's error: one whole line on stderr (an escalation from rank 0's
/// process only under mpirun, as every process has the same one), the error's exit status.
fn stop(program: &str, e: cd::CdLaunchError) -> ! {
    use std::io::Write;
    if speaks() || !matches!(e, cd::CdLaunchError::Escalated { .. }) {
        let line = format!("{program}: error: {e}\n");
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
    std::process::exit(i32::from(e.exit_code()))
}
