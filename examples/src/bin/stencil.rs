//! A 3-D Jacobi (7-point) stencil on pgas: the `n`^3 global grid is split over a
//! `px * py * pz` process grid; each rank iterates on its block (with one-cell halos) and, after
//! every sweep, packs its six faces and writes them with `view_put` into receive buffers in
//! its neighbours' viewable memory, double-buffered by iteration parity so one barrier per
//! iteration suffices; each rank reads its buffers in place through a local view
//! (`with_local_mut`), with no copy out of them. The grid, the exchange and the checksum are [`pgas_examples::jacobi`]'s.
//!
//! Every point's update is the same floating-point expression whatever the decomposition, so
//! the result is bit-identical for any rank count. The checksum is the sum of all interior
//! values, reduced exactly (as 2^-96 fixed-point integers, whose sum does not depend on
//! order), so it prints the same bits for 1, 2, 4 or 8 ranks; a position-sensitive fingerprint
//! of the values' bits is reduced alongside. For small grids rank 0 repeats the run serially and
//! both numbers must match exactly. Under mpirun (feature `mpi`) the checks stop every process
//! if one fails, and rank 0's process prints the two lines.

#![forbid(unsafe_code)]

use std::time::Instant;

use clap::Parser;
use pgas::{RpcTable, barrier};
use pgas_examples::jacobi::{Block, Grid, JacobiArgs, summarize};
use pgas_examples::{CommonArgs, fail, parse_args, run, secs};

/// Command line of `stencil`.
#[derive(Debug, Parser)]
#[command(about = "3-D 7-point Jacobi with halo exchange by rput into neighbours' buffers")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    jacobi: JacobiArgs,
}

fn main() {
    const NAME: &str = "stencil";
    let args: Args = parse_args();
    let ranks = args.common.ranks().unwrap_or_else(|e| fail(NAME, e));
    let iters = args.jacobi.iters;
    let grid = Grid::new(args.jacobi.n, ranks).unwrap_or_else(|e| fail(NAME, e));
    let serial_check = args.jacobi.serial_check();
    let segment = grid.segment_bytes().unwrap_or_else(|e| fail(NAME, e));

    let Some(reports) = run(NAME, ranks, segment, RpcTable::new(), || {
        let mut block = Block::new_in_place(&grid)?;
        barrier();
        let start = Instant::now();
        for t in 0..iters {
            block.step(t);
        }
        let seconds = secs(start.elapsed());
        block.report(iters, seconds, serial_check)
    }) else {
        return;
    };

    let summary = summarize(&reports);
    println!("{}", summary.headline(NAME, &grid, iters));
    println!("{}", summary.checksum_line());
}
