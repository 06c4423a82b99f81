//! The split-phase barrier under load, and 16 ranks on a small machine (oversubscription).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{within, word};
use gasnet_bridge::{AtomicOp, HandlerTable};

/// Notify, do work (puts, AMs, polls), then complete with `barrier_try` or `barrier_wait`.
/// No rank may leave an iteration's barrier before every rank has arrived: each rank writes
/// its iteration number into its slot of rank 0's segment (double-buffered by parity) and
/// bumps an arrival counter before notifying; after completing, every rank must see all
/// slots and the exact count.
#[test]
fn split_phase_barrier_lets_nobody_leave_early() {
    let n = 16;
    let iters = 150usize;
    let counters_at = 2 * n * 8;
    let worked = Arc::new(AtomicU64::new(0));
    let mut t = HandlerTable::new();
    let w = worked.clone();
    let work = t.register("work", move |tok| {
        w.fetch_add(tok.args()[0], Ordering::Relaxed);
    });
    let segment = counters_at + iters * 8;
    let tries = within(Duration::from_secs(60), "split-phase barrier", || {
        gasnet_bridge::launch(&common::config(n, segment.next_multiple_of(8)), t, |ep| {
            let me = ep.rank();
            let mut tries = 0u64;
            for i in 0..iters {
                let slot = ((i % 2) * n + me) * 8;
                ep.put(0, slot, &(i as u64 + 1).to_ne_bytes()).unwrap();
                ep.atomic(0, counters_at + 8 * i, AtomicOp::FetchAdd(1))
                    .unwrap();
                ep.barrier_notify().unwrap();
                // Work between the halves: an AM to a neighbour.
                ep.am_request_short((me + 1 + i) % n, work, &[1]).unwrap();
                if i % 3 == 0 {
                    ep.barrier_wait().unwrap();
                } else {
                    loop {
                        tries += 1;
                        if ep.barrier_try().unwrap() {
                            break;
                        }
                        std::thread::yield_now();
                    }
                }
                let c = ep
                    .atomic(0, counters_at + 8 * i, AtomicOp::Load)
                    .unwrap()
                    .previous;
                assert_eq!(c, n as u64, "rank {me} left barrier {i} after {c} arrivals");
                let mut slots = vec![0u8; n * 8];
                ep.get(0, (i % 2) * n * 8, &mut slots).unwrap();
                for (r, s) in slots.chunks(8).enumerate() {
                    assert_eq!(
                        word(s),
                        i as u64 + 1,
                        "rank {me}, iteration {i}: slot of {r}"
                    );
                }
            }
            ep.barrier().unwrap();
            tries
        })
        .unwrap()
    });
    assert_eq!(tries.len(), n);
    assert_eq!(
        worked.load(Ordering::Relaxed),
        (n * iters) as u64,
        "every AM ran"
    );
}

/// 16 ranks on (typically) 2 cores: 200 barriers with a ping-pong round trip each. The time
/// bound only guards against a hang.
#[test]
fn sixteen_ranks_oversubscribed_barriers_and_ping_pong() {
    let n = 16;
    let iters = 200u64;
    // pongs[r] = last pong value rank r received.
    let pongs: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let mut t = HandlerTable::new();
    let p = pongs.clone();
    let pong = t.register("pong", move |tok| {
        p[tok.endpoint().rank()].store(tok.args()[0], Ordering::Release);
    });
    let ping = t.register("ping", move |tok| {
        let a = tok.args();
        assert_eq!(
            a[1],
            tok.endpoint().rank() as u64,
            "ping reached its target"
        );
        tok.reply_short(pong, &[a[0] * 2 + 1]).unwrap();
    });
    let pg = pongs.clone();
    let sums = within(Duration::from_secs(60), "oversubscribed job", || {
        gasnet_bridge::launch(&common::config(n, 1 << 12), t, |ep| {
            let me = ep.rank();
            let mut sum = 0;
            for i in 0..iters {
                let peer = (me + 1 + i as usize % (n - 1)) % n;
                let v = i * 1000 + me as u64;
                ep.am_request_short(peer, ping, &[v, peer as u64]).unwrap();
                ep.wait_until(|| pg[me].load(Ordering::Acquire) == v * 2 + 1);
                sum += pg[me].load(Ordering::Acquire);
                ep.barrier().unwrap();
            }
            sum
        })
        .unwrap()
    });
    for (me, s) in sums.iter().enumerate() {
        let want: u64 = (0..iters).map(|i| (i * 1000 + me as u64) * 2 + 1).sum();
        assert_eq!(*s, want);
    }
}
