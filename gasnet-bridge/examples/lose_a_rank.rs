//! lose_a_rank: a job that runs until one of its processes is killed from outside, for the
//! tests of the mpi conduit's recovery over ULFM (`tests/ulfm_spares.rs`).
//!
//! Every rank prints `rank R pid P` (so a test knows which process to kill), then does rounds
//! of a put to its right neighbour and a barrier, sleeping 20 ms between rounds, for about
//! `SECONDS` (default 60; the same number of rounds on every rank). When a process is killed
//! (feature `ulfm`, spares started with `PGAS_SPARES`), every survivor catches the unwind,
//! calls `Endpoint::recover`, and starts its rounds again; the spare that took the lost rank
//! runs the body from its start, so it does the same rounds. At the end every rank checks the
//! round its left neighbour wrote last, and rank 0's process prints
//! `lose_a_rank: N ranks, R rounds: OK`.
//!
//! `. .ci/ulfm-env; cargo build -p gasnet-bridge --features ulfm --example lose_a_rank`, then
//! `PGAS_SPARES=1 $PGAS_ULFM_MPIRUN -n 5 target/ulfm/debug/examples/lose_a_rank` and
//! `kill -9` one of the printed pids.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::time::Duration;

use gasnet_bridge::for_runtimes::PeerFailure;
use gasnet_bridge::{Endpoint, HandlerTable, LaunchConfig, launch, returned_ranks};

/// `rounds` rounds of a put to the right neighbour and a barrier, then the check of the left
/// neighbour's last round.
fn rounds(ep: &Endpoint, rounds: u64) -> (usize, u64) {
    let (me, n) = (ep.rank(), ep.ranks());
    for round in 1..=rounds {
        ep.put((me + 1) % n, 0, &round.to_le_bytes())
            .expect("put to the neighbour");
        ep.barrier().expect("barrier");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut got = [0u8; 8];
    ep.get(me, 0, &mut got).expect("read own segment");
    assert_eq!(
        u64::from_le_bytes(got),
        rounds,
        "the left neighbour's last round"
    );
    (n, rounds)
}

fn main() {
    let seconds: u64 = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 60,
        Some(Ok(s)) => s,
        Some(Err(e)) => {
            eprintln!("lose_a_rank: SECONDS must be a whole number: {e}");
            std::process::exit(2)
        }
    };
    let config = LaunchConfig::from_env(4).unwrap_or_else(|e| {
        eprintln!("lose_a_rank: {e}");
        std::process::exit(2)
    });
    let result = launch(&config, HandlerTable::new(), |ep| {
        let me = ep.rank();
        println!("rank {me} pid {}", std::process::id());
        if let Some(r) = ep.recovered() {
            println!("rank {me} replaces a lost process (epoch {})", r.epoch);
        }
        loop {
            match catch_unwind(AssertUnwindSafe(|| rounds(ep, seconds * 50))) {
                Ok(done) => return done,
                Err(p) if p.is::<PeerFailure>() => match ep.recover() {
                    Ok(r) => println!(
                        "rank {me} rebuilt at epoch {} after losing ranks {:?}; its rounds \
                         start again",
                        r.epoch, r.lost
                    ),
                    // Not recoverable here (no `ulfm` feature, smp, a rank that panicked):
                    // the job ends as it would without the catch.
                    Err(_) => resume_unwind(p),
                },
                Err(p) => resume_unwind(p),
            }
        }
    });
    match result {
        Ok(per_rank) => {
            if returned_ranks(per_rank.len()).is_some_and(|r| r.contains(&0)) {
                let (n, rounds) = per_rank[0];
                println!("lose_a_rank: {n} ranks, {rounds} rounds: OK");
            }
        }
        Err(e) => {
            eprintln!("lose_a_rank: {e}");
            std::process::exit(1)
        }
    }
}
