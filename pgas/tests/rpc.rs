//! rpc and rpc_ff: a forwarding ring, a dissemination barrier made of rpc_ff only, large
//! serialized payloads, and operations still in flight when ranks return (after UPC++'s
//! rpc_ff_ring, rpc_barrier, and quiescence tests).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use common::{MIB, by_rank, fnv, held_ranks, ranks, ranks_in, ranks_wide, run};
use pgas::{
    DistObject, Future, GlobalPtr, RpcFn, RpcTable, barrier, delete_, new_array, progress, rank_me,
    rank_n, rget_slice, rpc, rpc_ff, rput,
};

fn counters(n: usize) -> Arc<Vec<AtomicU64>> {
    Arc::new((0..n).map(|_| AtomicU64::new(0)).collect())
}

fn spin_until(mut done: impl FnMut() -> bool) {
    while !done() {
        if progress() == 0 {
            std::thread::yield_now();
        }
    }
}

/// Arrivals recorded by the ring: (origin, hops left) per message, in the target's instance.
type Log = DistObject<Vec<(u32, u32)>>;
/// The ring's rpc: (log, origin, hops left).
type HopFn = RpcFn<(Log, u32, u32), ()>;

#[test]
fn rpc_ff_ring_forwards_and_counts_every_arrival_exactly() {
    const HOPS: u32 = 50;
    for n in ranks_wide() {
        let arrivals = counters(n);
        let mut rpcs = RpcTable::new();
        let hop_fn: Arc<OnceLock<HopFn>> = Arc::new(OnceLock::new());
        let hop = rpcs.register("hop", {
            let (hop_fn, arrivals) = (hop_fn.clone(), arrivals.clone());
            move |(log, origin, left): (Log, u32, u32)| {
                let me = rank_me();
                arrivals[me].fetch_add(1, Ordering::SeqCst);
                log.update(|l| l.push((origin, left)));
                if left > 0 {
                    let next = (me + 1) % rank_n();
                    rpc_ff(next, *hop_fn.get().unwrap(), (log, origin, left - 1));
                }
            }
        });
        hop_fn.set(hop).unwrap();
        let a2 = arrivals.clone();
        let logs = run(n, 4, rpcs, move || {
            let me = rank_me();
            let log: Log = DistObject::new(Vec::new());
            barrier(); // every instance exists before an rpc names it
            rpc_ff((me + 1) % n, hop, (log.clone(), me as u32, HOPS));
            // Each rank receives exactly HOPS + 1 messages in all (hop k of every origin
            // lands on a different rank).
            spin_until(|| a2[me].load(Ordering::SeqCst) > HOPS as u64);
            barrier();
            assert_eq!(a2[me].load(Ordering::SeqCst), HOPS as u64 + 1);
            let mut got = log.get();
            got.sort_unstable();
            got
        });
        for (r, got) in by_rank(n, &logs) {
            assert_eq!(arrivals[r].load(Ordering::SeqCst), HOPS as u64 + 1);
            // The message from `origin` with `left` hops to go is at origin + HOPS + 1 - left.
            let mut expect: Vec<(u32, u32)> = (0..n)
                .flat_map(|o| (0..=HOPS).map(move |left| (o as u32, left)))
                .filter(|&(o, left)| (o as usize + (HOPS - left) as usize + 1) % n == r)
                .collect();
            expect.sort_unstable();
            assert_eq!(*got, expect, "rank {r} of {n}");
        }
    }
}

#[test]
fn dissemination_barrier_from_rpc_ff_lets_nobody_leave_early() {
    const ITERS: u64 = 150;
    for n in ranks() {
        let mut rpcs = RpcTable::new();
        // Messages of round k arrived at this rank, over all iterations so far.
        type Arrived = DistObject<Vec<u64>>;
        let signal = rpcs.register("signal", |(arrived, round): (Arrived, usize)| {
            arrived.update(|a| a[round] += 1);
        });
        run(n, 4, rpcs, move || {
            let me = rank_me();
            let rounds = n.next_power_of_two().trailing_zeros() as usize;
            let arrived: Arrived = DistObject::new(vec![0; rounds.max(1)]);
            let stamps = pgas::broadcast(
                if me == 0 {
                    new_array::<u64>(n).unwrap()
                } else {
                    GlobalPtr::null()
                },
                0,
            )
            .wait();
            barrier();
            let dissemination = |iteration: u64| {
                for k in 0..rounds {
                    let partner = (me + (1 << k)) % n;
                    rpc_ff(partner, signal, (arrived.clone(), k));
                    spin_until(|| arrived.with(|a| a[k]) > iteration);
                }
            };
            for i in 0..ITERS {
                rput(i + 1, stamps + me).wait();
                dissemination(i);
                // Nobody is still before this barrier: every stamp is at least i + 1, and at
                // most one ahead (a rank may already have stamped the next iteration).
                let seen = rget_slice(stamps, n).wait();
                for (r, &s) in seen.iter().enumerate() {
                    assert!(
                        s == i + 1 || s == i + 2,
                        "iteration {i}: rank {r}'s stamp is {s} after the barrier"
                    );
                }
            }
            for k in 0..rounds {
                assert_eq!(arrived.with(|a| a[k]), ITERS, "round {k} messages");
            }
            barrier();
            if me == 0 {
                delete_(stamps).unwrap();
            }
        });
    }
}

#[test]
fn large_payloads_are_fragmented_and_reassembled_exactly() {
    for n in ranks_in(&[1, 2, 3, 4]) {
        let mut rpcs = RpcTable::new();
        let echo = rpcs.register("echo", |v: Vec<u8>| {
            // The reply differs from the argument so that an echo of the wrong bytes shows.
            let mut v = v;
            v.reverse();
            v.push(rank_me() as u8);
            v
        });
        let hash = rpcs.register("hash", |v: Vec<u8>| (v.len(), fnv(&v)));
        let scale = rpcs.register("scale", |(v, k): (Vec<f64>, f64)| -> Vec<f64> {
            v.into_iter().map(|x| x * k).collect()
        });
        run(n, 4, rpcs, move || {
            let me = rank_me();
            // Sizes around the fragment size (64 KiB of encoded bytes: a Vec<u8> of length
            // 65533 encodes to exactly 65536 bytes) and of several MiB.
            let mut sizes: Vec<usize> = (65528..65540).collect();
            sizes.extend([0, 1, 1000, 131_069, 131_072, 3 * MIB + 17]);
            let mut pending = Vec::new();
            for (i, &size) in sizes.iter().enumerate() {
                let target = (me + 1 + i) % n;
                let data = common::pattern((me * 1000 + i) as u64, size);
                let h = fnv(&data);
                // Several in flight at once, from every rank, so fragments interleave.
                pending.push((
                    rpc(target, echo, data.clone()),
                    rpc(target, hash, data.clone()),
                    data,
                    target,
                    h,
                ));
            }
            for (echoed, hashed, data, target, h) in pending {
                assert_eq!(
                    hashed.wait(),
                    (data.len(), h),
                    "argument of {} bytes",
                    data.len()
                );
                let back = echoed.wait();
                let mut expect = data;
                expect.reverse();
                expect.push(target as u8);
                assert_eq!(back.len(), expect.len());
                assert_eq!(fnv(&back), fnv(&expect), "reply of {} bytes", back.len());
            }
            let v: Vec<f64> = (0..(512 * 1024))
                .map(|i| i as f64 * 0.25 - me as f64)
                .collect();
            let out = rpc((me + 1) % n, scale, (v.clone(), -2.0)).wait();
            assert_eq!(out.len(), v.len());
            assert!(out.iter().zip(&v).all(|(o, x)| *o == x * -2.0));
            barrier();
        });
    }
}

#[test]
fn operations_in_flight_at_return_all_complete() {
    const PER_TARGET: u64 = 40;
    for n in ranks() {
        // Everything is counted per rank where it ran (on mpi a process sees only its own
        // rank's counters).
        let ff_ran = counters(n);
        let rpc_ran = counters(n);
        let replies = counters(n);
        let chained = counters(n);
        let deferred = counters(n);
        let mut rpcs = RpcTable::new();
        let ff = rpcs.register("ff", {
            let c = ff_ran.clone();
            move |x: u64| {
                c[rank_me()].fetch_add(x, Ordering::SeqCst);
            }
        });
        let call = rpcs.register("call", {
            let c = rpc_ran.clone();
            move |x: u64| {
                c[rank_me()].fetch_add(1, Ordering::SeqCst);
                x + 1
            }
        });
        let later = rpcs.register_future("later", {
            let c = deferred.clone();
            let call_fn = call;
            move |x: u64| -> Future<u64> {
                let c = c.clone();
                // Replies when another rpc (to the next rank) has replied.
                rpc((rank_me() + 1) % rank_n(), call_fn, x).then(move |y| {
                    c[rank_me()].fetch_add(1, Ordering::SeqCst);
                    y
                })
            }
        });
        let (r2, ch2) = (replies.clone(), chained.clone());
        run(n, 4, rpcs, move || {
            let me = rank_me();
            for t in 0..n {
                for i in 0..PER_TARGET {
                    rpc_ff(t, ff, 1);
                    let r2 = r2.clone();
                    let ch2 = ch2.clone();
                    // A reply continuation that itself sends an rpc_ff: it runs during
                    // finalize, which must still deliver what it sends.
                    rpc(t, call, i)
                        .then(move |y| {
                            assert_eq!(y, i + 1);
                            r2[me].fetch_add(1, Ordering::SeqCst);
                            rpc_ff((me + 1) % n, ff, 1000);
                            ch2[me].fetch_add(1, Ordering::SeqCst);
                        })
                        .detach();
                    if i % 4 == 0 {
                        rpc(t, later, i).detach();
                    }
                }
            }
            // Return at once: nothing above was waited for.
        });
        // Per rank, as origin: n * PER_TARGET replies, each chaining one rpc_ff of 1000 to
        // the right neighbour. As target: PER_TARGET rpc_ffs of 1 and calls from every rank,
        // those 1000s from the left neighbour, and PER_TARGET / 4 `later`s from every rank,
        // each deferred here until its call to the right neighbour replied, so also
        // n * PER_TARGET / 4 calls from the left neighbour. Summed over the ranks: n^2 *
        // PER_TARGET replies, and so on.
        let per_rank = n as u64 * PER_TARGET;
        let later_calls = n as u64 * PER_TARGET.div_ceil(4);
        for r in held_ranks(n) {
            let got = |c: &Arc<Vec<AtomicU64>>| c[r].load(Ordering::SeqCst);
            assert_eq!(got(&replies), per_rank, "rank {r} of {n}: replies");
            assert_eq!(got(&chained), per_rank, "rank {r} of {n}");
            assert_eq!(
                got(&ff_ran),
                per_rank + 1000 * per_rank,
                "rank {r} of {n}: rpc_ff"
            );
            assert_eq!(got(&rpc_ran), per_rank + later_calls, "rank {r} of {n}");
            assert_eq!(got(&deferred), later_calls, "rank {r} of {n}");
        }
    }
}
