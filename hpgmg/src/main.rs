//! `hpgmg log2_box_dim target_boxes_per_rank [--ranks N]`: the HPGMG-FV benchmark, on one
//! rank or on a `pgas` job (`--ranks N` on smp; one rank per process under `mpirun -n N`
//! when built with feature `mpi`). Only rank 0 prints the report.

#![forbid(unsafe_code)]

use clap::Parser;
use clap::error::ErrorKind;
use hpgmg::comm::ExchangeMode;
use hpgmg::driver::{JobOptions, run_job};
use std::io::Write;
use std::process::ExitCode;

/// HPGMG-FV benchmark: FMG solves of a 4th-order variable-coefficient Poisson problem.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// log2 of the cells per box side (4..=9)
    #[arg(allow_negative_numbers = true)]
    log2_box_dim: i64,
    /// Target number of boxes per rank (at least 1)
    #[arg(allow_negative_numbers = true)]
    target_boxes_per_rank: i64,
    /// Ranks (default: PGAS_RANKS, else 1; under mpirun the number of processes)
    #[arg(long)]
    ranks: Option<usize>,
    /// How ghost zones travel between ranks: `box` (one rput per box-to-box region) or
    /// `agg` (one rput per neighbour rank)
    #[arg(long, default_value = "agg")]
    exchange: ExchangeMode,
    /// Containment Domains: a strict CD per solve (`[cd.solve]`) and per V-cycle
    /// (`[cd.level]`), and with `kind = "relaxed"` in `[cd.smooth]` a relaxed CD per rank
    /// around each smoother call, configured (and faults injected) by this TOML file
    #[arg(long, value_name = "FILE.toml")]
    cd_config: Option<std::path::PathBuf>,
    /// Threads per rank for the operator kernels (rayon; the same bits on any count)
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Solves per level in each of the warm-up and timed passes
    #[arg(long, default_value_t = hpgmg::bench::MIN_SOLVES)]
    solves: usize,
    /// After each F-cycle, V-cycles (at most 20) until ||F - A u|| / ||F|| < 1e-10, each
    /// norm printed (the reference built with -DUNLIMIT_FMG_ITERATIONS)
    #[arg(long)]
    unlimit_fmg_iterations: bool,
    /// Resume from a checkpoint of the solve CD (`checkpoint` key of `[cd.solve]`): `auto` for
    /// the newest whole one in the configured directory, or a directory; default: CD_RESTART
    #[arg(long, value_name = "DIR|auto")]
    restart: Option<String>,
    /// Spare processes (mpi conduit, feature `ulfm`, under `mpirun --with-ft ulfm -n N+S`)
    /// that take a killed rank's place, the solve CD resuming from memory; the report is then
    /// printed whole at the end. Needs --cd-config. Default: PGAS_SPARES
    #[arg(long, value_name = "S")]
    spares: Option<usize>,
}

fn main() -> ExitCode {
    // Parsed before the conduit starts: `--spares` must be set before anything reads the
    // count (the MPI world's shape below already does).
    let parsed = Cli::try_parse();
    if let Ok(Cli {
        spares: Some(s), ..
    }) = &parsed
    {
        if let Err(set) = pgas::request_spares(*s) {
            pgas::stderr_line(format_args!(
                "hpgmg: --spares {s}: {set} spares were already asked for"
            ));
            return ExitCode::from(1);
        }
    }
    // Messages before the job starts come from rank 0's process only.
    let speaks = match pgas::mpi_world() {
        Ok(w) => w.is_none_or(|(rank, _)| rank == 0),
        Err(e) => {
            pgas::stderr_line(format_args!("hpgmg: {e}"));
            return ExitCode::from(1);
        }
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            if speaks {
                e.exit()
            }
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            if speaks {
                let text = e.to_string();
                let first = text.lines().next().unwrap_or("invalid arguments");
                pgas::stderr_line(format_args!(
                    "{first} (usage: hpgmg <log2_box_dim> <target_boxes_per_rank>)"
                ));
            }
            return ExitCode::from(2);
        }
    };
    let fail = |msg: String| {
        if speaks {
            pgas::stderr_line(format_args!("hpgmg: {msg}"));
        }
        ExitCode::from(1)
    };
    let ranks = match pgas::job_ranks("--ranks", cli.ranks, 1) {
        Ok(n) => n,
        Err(e) => return fail(e.to_string()),
    };
    let mut cfg = match hpgmg::configure(cli.log2_box_dim, cli.target_boxes_per_rank, ranks) {
        Ok(cfg) => cfg,
        Err(e) => return fail(e.to_string()),
    };
    if cli.solves == 0 {
        return fail("--solves must be at least 1".into());
    }
    cfg.solves = cli.solves;
    if cli.threads == 0 {
        return fail("--threads must be at least 1".into());
    }
    cfg.threads = cli.threads;
    if cli.unlimit_fmg_iterations {
        cfg.max_vcycles = hpgmg::mg::UNLIMITED_FMG_VCYCLES;
    }
    let cd_config = match cli
        .cd_config
        .as_deref()
        .map(cd_runtime::CdConfig::from_file)
    {
        None => None,
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => return fail(format!("--cd-config: {e}")),
    };
    let cd_config = match restartable(cd_config, &cli, &cfg) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    // A lost process is recovered by resuming the solve CD, so spares need the CDs; the
    // report of a body that may run again is held until the job's end (`held_report.rs`).
    let spares = pgas::spares_wanted();
    if spares > 0 {
        if cd_config.is_none() {
            return fail(format!(
                "--spares {spares} (or PGAS_SPARES): a killed rank is recovered by resuming the \
                 strict CD per solve: give --cd-config too (a file holding `[cd.solve]` will do)"
            ));
        }
        cfg.hold_report = true;
    }
    let result = if ranks == 1 && cd_config.is_none() {
        let stdout = std::io::stdout();
        let mut out = std::io::LineWriter::new(stdout.lock());
        let r = hpgmg::run(cfg, &mut out)
            .map(|_| ())
            .map_err(|e| format!("output failed: {e}"));
        let _ = out.flush();
        r
    } else {
        let job = JobOptions {
            ranks,
            mode: cli.exchange,
        };
        run_job(cfg, job, true, cd_config).map(|out| {
            if let Some(table) = out.and_then(|o| o.cd_report).map(|r| r.table()) {
                print!("{table}");
            }
        })
    };
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

/// `config` with what a checkpoint records of this run (the arguments that shape the solves:
/// sizes, solves per pass, V-cycles after the F-cycle; the ranks are recorded by the runtime)
/// and the restart `--restart` or `CD_RESTART` asks for, which needs a CD configuration. A
/// `checkpoint` key on another CD than the solve is refused: a relaunch resumes at a solve.
fn restartable(
    config: Option<cd_runtime::CdConfig>,
    cli: &Cli,
    cfg: &hpgmg::Config,
) -> Result<Option<cd_runtime::CdConfig>, String> {
    let restart = cd_runtime::RestartFrom::for_program(cli.restart.as_deref());
    let Some(mut c) = config else {
        return match restart {
            Some(_) => Err("--restart (or CD_RESTART) resumes a run under Containment \
                            Domains: give its --cd-config too"
                .into()),
            None => Ok(None),
        };
    };
    let solve = hpgmg::mg::SOLVE_CD;
    if let Some((name, _)) = c.checkpoint.as_ref().filter(|(name, _)| name != solve) {
        return Err(format!(
            "--cd-config: the `checkpoint` key is in [cd.{name}], and hpgmg resumes a run at \
             a solve: move it to [cd.{solve}]"
        ));
    }
    c.program = format!(
        "hpgmg {} {} --solves {}{}",
        cli.log2_box_dim,
        cli.target_boxes_per_rank,
        cfg.solves,
        if cfg.max_vcycles > 0 {
            " --unlimit-fmg-iterations"
        } else {
            ""
        }
    );
    c.restart = restart;
    Ok(Some(c))
}
