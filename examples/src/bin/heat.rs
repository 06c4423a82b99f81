//! The 1-D heat equation on a ring of ranks, written as a user of pgas and cd-runtime writes
//! it: each step is a strict CD over all ranks that preserves the rank's cells, and inside it
//! the halo exchange is a relaxed CD per rank; faults come from a TOML file
//! (`examples/configs/heat.toml`: soft errors in both CDs and a lost rank), and the checksum
//! is the fault-free one, bit for bit.
//!
//!   cargo run -p pgas-examples --bin heat -- --cd-config examples/configs/heat.toml
//!
//! Each rank holds `--cells` cells in viewable memory, updated in place (`with_local_mut`),
//! and a ghost cell for each neighbour in its segment, where the neighbours' puts land (and a
//! relaxed CD logs and replays them). A step puts its edge cells into its neighbours' ghosts,
//! waits for theirs (a barrier) and updates its cells. Prints what the CDs did and the
//! checksum: the sum of the squared cells, which diffusion lowers step by step, reduced in a
//! fixed order (the same bits on every run of the same rank count).

#![forbid(unsafe_code)]

use std::path::PathBuf;

use cd_runtime as cd;
use clap::Parser;
use pgas::{GlobalPtr, ViewPtr, barrier, ops, rank_me, rank_n, reduce_all, rput};
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

/// One time step: the halo exchange into the ghosts `g` (left, right), then the update of
/// this rank's cells `u` in place.
#[cd::strict(preserve(u = n, g = 2))]
fn step(
    u: ViewPtr<f64>,
    g: GlobalPtr<f64>,
    ring: &[GlobalPtr<f64>],
    n: usize,
) -> Result<(), cd::CdError> {
    halo(u, g, ring, n)?;
    let mut ghost = [0.0; 2];
    g.read_local_slice(&mut ghost)?;
    u.with_local_mut(n, |u| {
        let mut left = ghost[0];
        for i in 0..n {
            let right = if i + 1 < n { u[i + 1] } else { ghost[1] };
            let cell = u[i];
            u[i] = cell + NU * (left - 2.0 * cell + right);
            left = cell;
        }
    })?;
    Ok(())
}

/// The halo exchange: this rank's edge cells into its neighbours' ghosts. Relaxed: a failure
/// re-executes this rank alone, replaying the neighbours' puts from their logs.
#[cd::relaxed(preserve(u = n, g = 2))]
fn halo(
    u: ViewPtr<f64>,
    g: GlobalPtr<f64>,
    ring: &[GlobalPtr<f64>],
    n: usize,
) -> Result<(), cd::CdError> {
    let (me, p) = (rank_me(), rank_n());
    let (left, right) = (ring[(me + p - 1) % p], ring[(me + 1) % p]);
    let (first, last) = u.with_local_mut(n, |u| (u[0], u[n - 1]))?;
    rput(first, left + 1).wait();
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
    // The viewable area is as large as the segment: room for the cells.
    let segment = (n + 2) * 8 + pgas_examples::SEGMENT_SLACK;
    let job = job_config(ranks, segment).unwrap_or_else(|e| fail(NAME, e));

    let out = cd::launch(&job, config, pgas::RpcTable::new(), || {
        let (u, g) = (pgas::new_viewable::<f64>(n)?, pgas::new_array::<f64>(2)?);
        u.with_local_mut(n, |u| {
            (0..n).for_each(|i| u[i] = ((rank_me() * n + i) % 7) as f64)
        })?;
        let ring = pgas::allgather(g).wait();
        for _ in 0..steps {
            step(u, g, &ring, n)?;
        }
        let energy: f64 = u.with_local_mut(n, |u| u.iter().map(|c| c * c).sum())?;
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
