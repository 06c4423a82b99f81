//! Handles that travel between ranks and collectives added for UPC++ users: an rpc carrying
//! the handle of the rpc to call next, `allgather`, and the fetch of a destroyed dist_object.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{by_rank, config, held_ranks, ranks, ranks_wide, run, try_launch};
use pgas::{DistObject, RpcFn, RpcTable};

#[test]
fn an_rpc_forwards_itself_by_handle() {
    for n in ranks() {
        let arrivals: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
        let seen = arrivals.clone();
        let mut rpcs = RpcTable::new();
        // The function receives its own handle and sends it on: no OnceLock needed.
        type Hop = RpcFn<(u32, Vec<u8>), ()>;
        let hop: Hop = rpcs.register("hop", move |(left, me): (u32, Vec<u8>)| {
            let this: Hop = postcard::from_bytes(&me).expect("handle decodes");
            seen[pgas::rank_me()].fetch_add(1, Ordering::Relaxed);
            if left > 0 {
                let next = (pgas::rank_me() + 1) % pgas::rank_n();
                pgas::rpc_ff(next, this, (left - 1, me));
            }
        });
        const HOPS: u32 = 37;
        run(n, 2, rpcs, move || {
            if pgas::rank_me() == 0 {
                let me = postcard::to_allocvec(&hop).expect("handle encodes");
                pgas::rpc_ff(0, hop, (HOPS, me));
            }
        });
        // Hop h runs on rank h % n. The counts are checked per rank (on mpi a process sees
        // only its own rank's), and together they are the HOPS + 1 calls.
        let expected = |r: usize| (0..=HOPS as usize).filter(|h| h % n == r).count() as u64;
        assert_eq!((0..n).map(expected).sum::<u64>(), HOPS as u64 + 1);
        for r in held_ranks(n) {
            let got = arrivals[r].load(Ordering::Relaxed);
            assert_eq!(got, expected(r), "rank {r} of {n}");
        }
    }
}

#[test]
fn allgather_gives_every_value_in_team_order() {
    for n in ranks() {
        let out = run(n, 2, RpcTable::new(), || {
            let world = pgas::world();
            let all = pgas::allgather_on(&world, format!("r{}", pgas::rank_me())).wait();
            let halves = world.split(
                (pgas::rank_me() % 2) as u64,
                u64::MAX - pgas::rank_me() as u64,
            );
            let mine = pgas::allgather_on(&halves, pgas::rank_me() as u64).wait();
            (all, mine)
        });
        for (r, (all, mine)) in by_rank(n, &out) {
            let expected: Vec<String> = (0..n).map(|i| format!("r{i}")).collect();
            assert_eq!(*all, expected, "rank {r} of {n}");
            let mut team: Vec<u64> = (0..n as u64).filter(|i| i % 2 == r as u64 % 2).collect();
            team.reverse(); // keys were given in reverse rank order
            assert_eq!(*mine, team, "rank {r} of {n}");
        }
    }
}

#[test]
fn fetching_a_destroyed_dist_object_is_an_error() {
    if common::skip_on_mpi("the fetching rank panics, which ends an MPI job") {
        return;
    }
    let err = try_launch(config(2, 2), RpcTable::new(), || {
        let d = DistObject::new(pgas::rank_me() as u64);
        pgas::barrier();
        if pgas::rank_me() == 1 {
            drop(d);
            pgas::barrier();
            pgas::barrier();
        } else {
            pgas::barrier();
            let _ = d.fetch(1).wait();
            pgas::barrier();
        }
    })
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("rank 1") && msg.contains("destroyed"), "{msg}");
}

#[test]
fn bulk_local_copies_and_non_fetching_bit_operations() {
    for n in ranks() {
        let out = run(n, 2, RpcTable::new(), || {
            let me = pgas::rank_me();
            let arr = pgas::new_array::<u64>(1000).unwrap();
            let values: Vec<u64> = (0..1000).map(|i| i * 7 + me as u64).collect();
            arr.write_local_slice(&values).unwrap();
            let mut back = vec![0u64; 1000];
            arr.read_local_slice(&mut back).unwrap();
            assert_eq!(back, values);
            assert!(matches!(
                pgas::GlobalPtr::<u64>::from_raw(me, (2 << 20) - 8)
                    .read_local_slice(&mut [0u64; 2]),
                Err(pgas::PgasError::Bridge(
                    gasnet_bridge::BridgeError::OutOfSegment { .. }
                ))
            ));
            let word = pgas::broadcast(arr, 0).wait();
            pgas::barrier();
            let ad = pgas::AtomicDomain::<u64>::new();
            ad.xor(word, 1 << me).wait();
            ad.or(word + 1, 1 << (me + 8)).wait();
            ad.and(word + 2, !(1u64 << me)).wait();
            pgas::barrier();
            (
                ad.load(word).wait(),
                ad.load(word + 1).wait(),
                ad.load(word + 2).wait(),
            )
        });
        let all: u64 = (0..n).map(|r| 1u64 << r).sum();
        for (r, &(x, o, a)) in by_rank(n, &out) {
            assert_eq!(x, all, "rank {r} of {n}");
            assert_eq!(o, 7 | (all << 8), "rank {r} of {n}");
            assert_eq!(a, 14 & !all, "rank {r} of {n}");
        }
    }
}

#[test]
fn fast_world_reduction_matches_the_message_path() {
    for n in ranks_wide() {
        let out = run(n, 2, RpcTable::new(), || {
            let world = pgas::world();
            let mut results = Vec::new();
            // Many in a row: the two alternating words must never be overwritten early.
            for k in 0..200u64 {
                let mine = (pgas::rank_me() as u64 + 1) * 1000 + k;
                let fast = pgas::reduce_all_u64_on(&world, mine, |a, b| {
                    a.wrapping_mul(31).wrapping_add(b)
                });
                let slow = pgas::reduce_all_on(&world, mine, |a: u64, b: u64| {
                    a.wrapping_mul(31).wrapping_add(b)
                })
                .wait();
                let or = pgas::reduce_all_u64_on(&world, 1 << pgas::rank_me(), |a, b| a | b);
                results.push((fast, slow, or));
            }
            let halves = world.split((pgas::rank_me() % 2) as u64, 0);
            let team_sum = pgas::reduce_all_u64_on(&halves, pgas::rank_me() as u64, |a, b| a + b);
            (results, team_sum)
        });
        for (r, (results, team_sum)) in by_rank(n, &out) {
            for (k, &(fast, slow, or)) in results.iter().enumerate() {
                assert_eq!(
                    fast, slow,
                    "reduction {k} on rank {r} of {n}: fold order differs"
                );
                assert_eq!(or, (1u64 << n) - 1, "{n} ranks");
            }
            let expected: u64 = (0..n as u64).filter(|x| x % 2 == r as u64 % 2).sum();
            assert_eq!(*team_sum, expected);
        }
    }
}
