//! hello: every rank greets its right neighbour with a put, counts itself into rank 0 with a
//! remote fetch-add and an active message, and checks what it received.
//!
//! `cargo run --release -p gasnet-bridge --example hello -- [RANKS]` (default: `PGAS_RANKS`
//! or 4).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gasnet_bridge::{AtomicOp, HandlerTable, LaunchConfig, launch};

const GREETING_LEN: usize = 32;
const COUNTER: usize = 64;

fn main() {
    let ranks = match std::env::args().nth(1) {
        Some(a) => match a.parse::<usize>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                eprintln!("hello: the rank count must be a positive whole number, got {a:?}");
                std::process::exit(2);
            }
        },
        None => None,
    };
    let mut config = LaunchConfig::from_env(4).unwrap_or_else(|e| {
        eprintln!("hello: {e}");
        std::process::exit(2)
    });
    if let Some(n) = ranks {
        config.ranks = n;
    }

    // Rank 0 counts the AMs it receives; the handler runs on rank 0's thread.
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
            let total = ep
                .atomic(0, COUNTER, AtomicOp::Load)
                .expect("load")
                .previous;
            ep.wait_until(|| arrivals.load(Ordering::Relaxed) == n as u64);
            (total, arrivals.load(Ordering::Relaxed))
        } else {
            (0, 0)
        }
    });
    match result {
        Ok(per_rank) => {
            let (atomic_total, ams) = per_rank[0];
            let n = config.ranks as u64;
            if atomic_total == n && ams == n {
                println!(
                    "hello: all {n} ranks checked in ({atomic_total} fetch-adds, {ams} AMs): OK"
                );
            } else {
                eprintln!(
                    "hello: expected {n} check-ins, got {atomic_total} fetch-adds and {ams} AMs"
                );
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("hello: {e}");
            std::process::exit(1);
        }
    }
}
