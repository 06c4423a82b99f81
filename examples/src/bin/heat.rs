//! The 1-D heat equation on a ring of ranks, written as a user of pgas and cd-runtime writes
//! it: each step is a strict CD over all ranks that preserves the rank's cells, and inside it
//! the halo exchange is a relaxed CD per rank; faults come from a TOML file
//! (`examples/configs/heat.toml`: soft errors in both CDs and a lost rank), and the checksum
//! is the fault-free one, bit for bit.
//!
//!   cargo run -p pgas-examples --bin heat -- --cd-config examples/configs/heat.toml
//!
//! Each rank holds `--cells` cells plus a ghost cell at each end in its segment; a step puts
//! its edge cells into its neighbours' ghosts, waits for theirs (a barrier) and updates its
//! cells in place. Prints what the CDs did and the checksum: the sum of the squared cells,
//! which diffusion lowers step by step, reduced in a fixed order (the same bits on every run
//! of the same rank count).

#![forbid(unsafe_code)]

use std::path::PathBuf;

use cd_runtime as cd;
use clap::Parser;
use pgas::{GlobalPtr, barrier, ops, rank_me, rank_n, reduce_all, rget, rput};
use pgas_examples::{CommonArgs, fail, job_config, parse_args, speaks};

/// Command line of `heat`.
#[derive(Debug, Parser)]
#[command(about = "1-D heat equation: strict CD steps, relaxed halo exchanges, faults from TOML")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Cells per rank.
    #[arg(long, default_value_t = 64)]
    cells: usize,
    /// Time steps.
    #[arg(long, default_value_t = 20)]
    steps: usize,
    /// CD configuration (TOML); default: `CD_CONFIG`, else CDs on and no faults.
    #[arg(long, value_name = "FILE.toml")]
    cd_config: Option<PathBuf>,
}

/// The diffusion number `alpha * dt / dx^2` (stable below 1/2).
const NU: f64 = 0.25;

/// One time step: the halo exchange, then the update of this rank's cells from the ghosts.
#[cd::strict(preserve(u = n + 2))]
fn step(u: GlobalPtr<f64>, ring: &[GlobalPtr<f64>], n: usize) -> Result<(), cd::CdError> {
    halo(u, ring, n)?;
    let mut v = vec![0.0; n + 2];
    u.read_local_slice(&mut v)?;
    let next: Vec<f64> = (1..=n)
        .map(|i| v[i] + NU * (v[i - 1] - 2.0 * v[i] + v[i + 1]))
        .collect();
    (u + 1).write_local_slice(&next)?;
    Ok(())
}

/// The halo exchange: this rank's edge cells into its neighbours' ghosts. Relaxed: a failure
/// re-executes this rank alone, replaying the neighbours' puts from their logs.
#[cd::relaxed(preserve(u = n + 2))]
fn halo(u: GlobalPtr<f64>, ring: &[GlobalPtr<f64>], n: usize) -> Result<(), cd::CdError> {
    let (me, p) = (rank_me(), rank_n());
    let (left, right) = (ring[(me + p - 1) % p], ring[(me + 1) % p]);
    let (first, last) = (rget(u + 1).wait(), rget(u + n).wait());
    rput(first, left + (n + 1)).wait();
    rput(last, right).wait();
    barrier();
    Ok(())
}

fn main() {
    const NAME: &str = "heat";
    let args: Args = parse_args();
    let ranks = args.common.ranks().unwrap_or_else(|e| fail(NAME, e));
    let (n, steps) = (args.cells, args.steps);
    let config = cd::CdConfig::for_program(args.cd_config.as_deref())
        .unwrap_or_else(|e| fail(NAME, e))
        .unwrap_or_default();
    let segment = (n + 2) * 8 + pgas_examples::SEGMENT_SLACK;
    let job = job_config(ranks, segment).unwrap_or_else(|e| fail(NAME, e));

    let out = cd::launch(&job, config, pgas::RpcTable::new(), || {
        let u = pgas::new_array::<f64>(n + 2)?;
        let start: Vec<f64> = (0..n).map(|i| ((rank_me() * n + i) % 7) as f64).collect();
        (u + 1).write_local_slice(&start)?;
        let ring = pgas::allgather(u).wait();
        for _ in 0..steps {
            step(u, &ring, n)?;
        }
        let mut cells = vec![0.0; n];
        (u + 1).read_local_slice(&mut cells)?;
        let energy: f64 = cells.iter().map(|c| c * c).sum();
        Ok(reduce_all(energy, ops::add).wait())
    })
    .unwrap_or_else(|e| fail(NAME, e));

    if speaks() {
        let checksum = out.results.into_iter().next().unwrap_or_default();
        println!("heat: {ranks} ranks x {n} cells, {steps} steps");
        for name in ["step", "halo"] {
            let s = out.report.cd(name).cloned().unwrap_or_default();
            println!(
                "cd {name}: {} faults injected, {} re-executions, {} escalations",
                s.injected, s.reexecutions, s.escalations
            );
        }
        println!("checksum {checksum:.17e} ({:#018x})", checksum.to_bits());
    }
}
