//! The multi-rank driver: one `pgas` job whose ranks each run the benchmark on their boxes
//! (threads of this process on smp, one process each under `mpirun` with feature `mpi`).
//! Only rank 0 writes the report.

use std::io::Write;

use cd_runtime as cd;

use crate::bench::{Config, Report, run};
use crate::comm::{self, ExchangeMode};
use crate::containment::{self, Containment};
use crate::operator::STENCIL_RADIUS;

/// How a job runs.
#[derive(Debug, Clone, Copy)]
pub struct JobOptions {
    /// Ranks of the job.
    pub ranks: usize,
    /// How ghost zones travel between ranks.
    pub mode: ExchangeMode,
}

/// Shared-segment bytes one rank needs for its message inboxes (`slots` per message).
pub fn segment_bytes(cfg: &Config, slots: usize) -> usize {
    let boxes = (cfg.boxes_in_i as usize).pow(3);
    let per_rank = boxes.div_ceil(cfg.num_ranks.max(1));
    let g = STENCIL_RADIUS as usize;
    let mut reals = 0usize;
    let mut d = 1usize << cfg.log2_box_dim;
    while d >= 2 {
        let shell = (d + 2 * g).pow(3) - d.pow(3);
        reals += per_rank * slots * (3 * shell + 4 * (d / 2 + 1).pow(3) + (d / 2 + 4).pow(3));
        d /= 2;
    }
    // Agglomerated coarse levels (at most 1/64 of the fine cells, gathered).
    let cells = boxes << (3 * cfg.log2_box_dim);
    reals += cells / 64 * 12 * slots;
    (reals * 8 * 5 / 4 + (32 << 20)).next_multiple_of(1 << 16)
}

/// What a job returns in the process that ran rank 0.
#[derive(Debug, Clone)]
pub struct JobOutput {
    /// Rank 0's report.
    pub report: Report,
    /// The CD report (runs with a CD configuration).
    pub cd_report: Option<cd::Report>,
}

/// Runs the benchmark on a job of `job.ranks` ranks, rank 0 printing the report to stdout
/// when `print` (as it is written, or once the job has ended with [`Config::hold_report`]);
/// with a CD configuration every solve and every V-cycle is a strict CD, and
/// every smoother call a relaxed one when the configuration asks
/// ([`Containment::of`]). Returns rank 0's report in the process that ran rank 0 (`None` in
/// the other processes of an mpi job).
pub fn run_job(
    mut cfg: Config,
    job: JobOptions,
    print: bool,
    cd_config: Option<cd::CdConfig>,
) -> Result<Option<JobOutput>, String> {
    let mut config = pgas::LaunchConfig::from_env(job.ranks).map_err(|e| e.to_string())?;
    config.ranks = job.ranks;
    cfg.containment = Containment::of(cd_config.as_ref());
    let cd_config = cd_config
        .map(|c| containment::program_config(c, cfg.containment))
        .transpose()?;
    let arrival = cfg.containment.arrival();
    config.segment_bytes = config
        .segment_bytes
        .max(segment_bytes(&cfg, arrival.slots()));
    // A held report (`Config::hold_report`) is rank 0's body's result, printed once the job
    // has ended: a body that a lost process interrupted runs again, and prints nothing itself.
    let hold = cfg.hold_report;
    let body = || {
        comm::start_rank(job.mode, arrival);
        let r = if pgas::rank_me() == 0 {
            let mut held = Vec::new();
            let mut out: Box<dyn Write + '_> = match (print, hold) {
                (true, false) => Box::new(std::io::LineWriter::new(std::io::stdout())),
                (true, true) => Box::new(&mut held),
                (false, _) => Box::new(std::io::sink()),
            };
            let r = run(cfg, &mut out);
            let _ = out.flush();
            drop(out);
            r.map(|report| Some((report, held)))
        } else {
            run(cfg, &mut std::io::sink()).map(|_| None)
        };
        // A rank that cannot go on (rank 0's report could not be written: a closed pipe, a
        // full disk) stops the job: returning alone would leave the others waiting for it in
        // their next collective. The run's own errors are `Other`; the rest come from writes.
        r.unwrap_or_else(|e| match e.kind() {
            std::io::ErrorKind::Other => pgas::stop(e.to_string()),
            _ => pgas::stop(format!("writing the report to stdout: {e}")),
        })
    };
    let (results, cd_report) = match cd_config {
        None => (
            pgas::launch(&config, pgas::RpcTable::new(), body).map_err(job_error)?,
            None,
        ),
        Some(mut c) => {
            c.report = false;
            let out = cd::launch(&config, c, pgas::RpcTable::new(), || Ok(body()))
                .map_err(|e| e.to_string())?;
            (out.results, Some(out.report))
        }
    };
    // Rank 0's report, in the one process that ran rank 0.
    let Some((report, held)) = results.into_rank0().flatten() else {
        return Ok(None);
    };
    if !held.is_empty() {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(&held)
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("writing the report to stdout: {e}"))?;
    }
    Ok(Some(JobOutput { report, cd_report }))
}

/// The line a failed job prints: a rank's stop (or panic) with its message as it is.
fn job_error(e: pgas::LaunchError) -> String {
    match e {
        pgas::LaunchError::RankPanicked { rank, message } => format!("rank {rank}: {message}"),
        e => e.to_string(),
    }
}
