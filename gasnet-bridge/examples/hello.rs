//! hello: every rank greets its right neighbour with a put, counts itself into rank 0 with a
//! remote fetch-add and an active message, and checks what it received.
//!
//! `cargo run --release -p gasnet-bridge --example hello -- [RANKS]` (default: `PGAS_RANKS`
//! or 4). On a cluster: `cargo build --release -p gasnet-bridge --features mpi --example hello`,
//! then `mpirun -n 4 target/release/examples/hello`; there the rank count is the number of
//! processes (a `RANKS` that differs is refused), every rank checks the counts, so a wrong one
//! fails every process, and rank 0's process prints the summary.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gasnet_bridge::{AtomicOp, HandlerTable, LaunchConfig, launch, returned_ranks};

const GREETING_LEN: usize = 32;
/// Rank 0's word counting the fetch-adds.
const COUNTER: usize = 64;
/// Rank 0's word where it publishes the AMs it received, so every rank can check them.
const ARRIVED: usize = 72;

fn main() {
    // Under mpirun every process meets the same usage error: rank 0's process reports it.
    let world = gasnet_bridge::conduit::mpi_world().unwrap_or_else(|e| {
        eprintln!("hello: {e}");
        std::process::exit(2)
    });
    let usage_error = |message: String| -> ! {
        if world.is_none_or(|(rank, _)| rank == 0) {
            eprintln!("hello: {message}");
        }
        std::process::exit(2)
    };
    let ranks = std::env::args().nth(1).map(|a| match a.parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => usage_error(format!(
            "the rank count must be a positive whole number, got {a:?}"
        )),
    });
    let mut config = LaunchConfig::from_env(4).unwrap_or_else(|e| usage_error(e.to_string()));
    config.ranks = gasnet_bridge::job_ranks("RANKS", ranks, config.ranks)
        .unwrap_or_else(|e| usage_error(e.to_string()));

    // Rank 0 counts the AMs it receives; the handler runs on rank 0's thread (in rank 0's
    // process under mpi).
    let arrivals = Arc::new(AtomicU64::new(0));
    let mut handlers = HandlerTable::new();
    let seen = arrivals.clone();
    let arrived = handlers.register("arrived", move |t| {
        assert_eq!(t.args(), &[t.source() as u64 * 10]);
        seen.fetch_add(1, Ordering::Relaxed);
    });

    let result = launch(&config, handlers, |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        let mut greeting = [0u8; GREETING_LEN];
        let text = format!("hello from rank {me}");
        greeting[..text.len()].copy_from_slice(text.as_bytes());
        let ack = ep.put((me + 1) % n, 0, &greeting).expect("put greeting");
        ep.atomic(0, COUNTER, AtomicOp::FetchAdd(1))
            .expect("count in");
        ep.am_request_short(0, arrived, &[me as u64 * 10])
            .expect("send AM");
        ep.barrier().expect("barrier");

        let mut got = [0u8; GREETING_LEN];
        ep.get(me, 0, &mut got).expect("read own segment");
        let left = (me + n - 1) % n;
        let expected = format!("hello from rank {left}");
        assert_eq!(&got[..expected.len()], expected.as_bytes());
        println!(
            "rank {me}/{n} (node {}): received \"{expected}\"; my put was write #{} into rank {}",
            ep.node(),
            ack.iwc,
            (me + 1) % n
        );
        if me == 0 {
            ep.wait_until(|| arrivals.load(Ordering::Relaxed) == n as u64);
            let ams = arrivals.load(Ordering::Relaxed);
            ep.atomic(0, ARRIVED, AtomicOp::Store(ams))
                .expect("publish the AM count");
        }
        ep.barrier().expect("barrier");
        let load = |offset| ep.atomic(0, offset, AtomicOp::Load).expect("load").previous;
        (n as u64, load(COUNTER), load(ARRIVED))
    });
    let per_rank = result.unwrap_or_else(|e| {
        eprintln!("hello: {e}");
        std::process::exit(1)
    });
    // Every rank read the same counts, so every process reaches the same verdict.
    let (n, atomic_total, ams) = per_rank[0];
    if atomic_total != n || ams != n {
        eprintln!("hello: expected {n} check-ins, got {atomic_total} fetch-adds and {ams} AMs");
        std::process::exit(1);
    }
    if returned_ranks(per_rank.len()).is_some_and(|r| r.contains(&0)) {
        println!("hello: all {n} ranks checked in ({atomic_total} fetch-adds, {ams} AMs): OK");
    }
}
