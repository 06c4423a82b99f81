//! Puts in flight: on the cross-host path (mpirun with `PGAS_MPI_PSHM=0`) an rput returns
//! before its ack, many are in flight at once, source and operation completion differ, and
//! progress, a promise, a barrier or a collective complete them; into memory the process maps
//! (smp, one host) everything is complete at once.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::{on_mpi, run};
use pgas::{
    Completions, Future, GlobalPtr, Promise, RpcFn, RpcTable, allgather, barrier, new_array,
    rank_me, rank_n, rget_slice, rput, rput_slice, rput_with, when_all, world,
};

/// Puts per rank in each flood.
const FLOOD: usize = 1_000;

/// Whether this job's puts to another rank leave as messages (and complete on their ack).
fn cross_host() -> bool {
    on_mpi() && std::env::var("PGAS_MPI_PSHM").is_ok_and(|v| v.trim() == "0")
}

/// Every rank's array of `len` words, in rank order.
fn arrays(len: usize) -> Vec<GlobalPtr<u64>> {
    let mine = new_array::<u64>(len).unwrap();
    allgather(&world(), mine).wait()
}

fn word(rank: usize, i: usize, round: u64) -> u64 {
    (rank as u64) << 40 | (i as u64) << 8 | round
}

#[test]
fn a_flood_of_futures_completes_and_lands() {
    for n in common::ranks_in(&[2, 3, 4]) {
        let pending_seen = run(n, 4, RpcTable::new(), move || {
            let all = arrays(FLOOD);
            let (me, n) = (rank_me(), rank_n());
            let right = all[(me + 1) % n];
            let futures: Vec<Future<()>> = (0..FLOOD)
                .map(|i| rput(word(me, i, 1), right + i))
                .collect();
            let pending = futures.iter().filter(|f| !f.is_ready()).count();
            if !cross_host() {
                assert_eq!(pending, 0, "a put into mapped memory is complete at once");
            }
            when_all(futures).wait();
            barrier();
            let left = (me + n - 1) % n;
            let got = rget_slice(all[me], FLOOD).wait();
            for (i, w) in got.iter().enumerate() {
                assert_eq!(*w, word(left, i, 1), "word {i} from rank {left}");
            }
            barrier();
            pending
        });
        if cross_host() {
            assert!(
                pending_seen.iter().all(|&p| p > 0),
                "on the cross-host path puts return before their acks: {pending_seen:?}"
            );
        }
    }
}

#[test]
fn source_completes_at_once_operation_on_the_ack_and_a_promise_counts_them() {
    for n in common::ranks_in(&[2, 3, 4]) {
        run(n, 4, RpcTable::new(), move || {
            let all = arrays(FLOOD + 64);
            let (me, n) = (rank_me(), rank_n());
            let right = all[(me + 1) % n];
            // Futures for both events: the source is free when the call returns.
            let mut src = vec![0u64; 64];
            let mut ops = Vec::new();
            for k in 0..8u64 {
                src.iter_mut()
                    .enumerate()
                    .for_each(|(i, w)| *w = word(me, i, k));
                let cx = rput_with(
                    &src,
                    right + FLOOD,
                    Completions::new().source_future().operation_future(),
                );
                assert!(cx.source.expect("asked for").is_ready(), "source at once");
                ops.push(cx.operation.expect("asked for"));
            }
            if cross_host() {
                assert!(
                    !ops[7].is_ready(),
                    "the last put's ack cannot have come back yet"
                );
            }
            when_all(ops).wait();
            // A promise counts operation completions of a whole flood.
            let p = Promise::new();
            for i in 0..FLOOD {
                let _ = rput_with(
                    &[word(me, i, 2)],
                    right + i,
                    Completions::new().operation_promise(&p),
                );
            }
            if cross_host() {
                assert!(p.outstanding() > 1, "acks outstanding on the promise");
            }
            p.finalize().wait();
            barrier();
            let left = (me + n - 1) % n;
            let got = rget_slice(all[me], FLOOD + 64).wait();
            for (i, w) in got[..FLOOD].iter().enumerate() {
                assert_eq!(*w, word(left, i, 2), "promise flood word {i}");
            }
            for i in 0..64 {
                assert_eq!(
                    got[FLOOD + i],
                    word(left, i, 7),
                    "the last of the 8 puts wins"
                );
            }
            barrier();
        });
    }
}

#[test]
fn a_barrier_completes_puts_whose_futures_were_dropped() {
    for n in common::ranks_in(&[2, 3, 4]) {
        run(n, 4, RpcTable::new(), move || {
            let all = arrays(FLOOD);
            let (me, n) = (rank_me(), rank_n());
            for round in 0..3u64 {
                let right = all[(me + 1) % n];
                for i in 0..FLOOD {
                    // The future is dropped on purpose: the barrier must complete the put.
                    drop(rput_slice(&[word(me, i, round)], right + i));
                }
                barrier();
                let left = (me + n - 1) % n;
                let got = rget_slice(all[me], FLOOD).wait();
                for (i, w) in got.iter().enumerate() {
                    assert_eq!(*w, word(left, i, round), "round {round} word {i}");
                }
                barrier();
            }
        });
    }
}

/// Remote-completion rpcs run at this process's ranks.
static LANDED: AtomicU64 = AtomicU64::new(0);

#[test]
fn remote_completion_sees_the_data() {
    for n in common::ranks_in(&[2, 3, 4]) {
        let mut rpcs = RpcTable::new();
        let check: RpcFn<(GlobalPtr<u64>, u64), ()> =
            rpcs.register("check", |(at, want): (GlobalPtr<u64>, u64)| {
                for i in 0..16 {
                    let got = (at + i).read_local().expect("the rpc runs at the target");
                    assert_eq!(got, want, "the rpc ran before word {i} landed");
                }
                LANDED.fetch_add(1, Ordering::Relaxed);
            });
        let before = LANDED.load(Ordering::Relaxed);
        run(n, 4, rpcs, move || {
            let all = arrays(16 * 32);
            let (me, n) = (rank_me(), rank_n());
            let right = all[(me + 1) % n];
            for k in 0..32usize {
                let at = right + 16 * k;
                let want = word(me, k, 9);
                let _ = rput_with(
                    &[want; 16],
                    at,
                    Completions::new().remote_rpc(check, (at, want)),
                );
            }
            barrier();
        });
        // Launch returns once every rpc sent has run (pgas finalize).
        let ran = LANDED.load(Ordering::Relaxed) - before;
        let per_process = if on_mpi() { 32 } else { 32 * n as u64 };
        assert_eq!(ran, per_process, "remote completions run");
    }
}

/// Gets and atomics to another host are in flight together and complete out of order during
/// progress; into mapped memory they are ready on return.
#[test]
fn gets_and_atomics_are_in_flight_together() {
    const GETS: usize = 500;
    const ADDS: usize = 200;
    for n in common::ranks_in(&[2, 3, 4]) {
        let pending_seen = run(n, 4, RpcTable::new(), move || {
            let all = arrays(FLOOD);
            let (me, n) = (rank_me(), rank_n());
            for i in 0..FLOOD {
                (all[me] + i).write_local(word(me, i, 7)).unwrap();
            }
            let counter = all[0] + (FLOOD - 1);
            if me == 0 {
                counter.write_local(0).unwrap();
            }
            barrier();
            let right = (me + 1) % n;
            let ad = pgas::AtomicDomain::<u64>::new();
            let words: Vec<Future<u64>> = (0..GETS).map(|i| pgas::rget(all[right] + i)).collect();
            let slices: Vec<Future<Vec<u64>>> = [1usize, 100, FLOOD - 1]
                .iter()
                .map(|&len| rget_slice(all[right], len))
                .collect();
            let adds: Vec<Future<u64>> = (0..ADDS).map(|_| ad.fetch_add(counter, 1)).collect();
            let pending = words.iter().filter(|f| !f.is_ready()).count()
                + slices.iter().filter(|f| !f.is_ready()).count()
                + adds.iter().filter(|f| !f.is_ready()).count();
            if !cross_host() {
                assert_eq!(pending, 0, "into mapped memory they are ready at once");
            }
            for (i, f) in words.into_iter().enumerate() {
                assert_eq!(f.wait(), word(right, i, 7), "word {i} of rank {right}");
            }
            for f in slices {
                let got = f.wait();
                for (i, w) in got.iter().enumerate() {
                    assert_eq!(*w, word(right, i, 7));
                }
            }
            let mut seen: Vec<u64> = when_all(adds).wait();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(
                seen.len(),
                ADDS,
                "every fetch-add saw its own previous value"
            );
            barrier();
            if me == 0 {
                assert_eq!(ad.load(counter).wait(), (ADDS * n) as u64);
            }
            barrier();
            // A dropped future's atomic still happens; a barrier completes it.
            drop(ad.fetch_add(counter, 1));
            barrier();
            assert_eq!(ad.load(counter).wait(), (ADDS * n + n) as u64);
            barrier();
            pending
        });
        if cross_host() {
            assert!(
                pending_seen.iter().all(|&p| p > 0),
                "on the cross-host path gets and atomics return pending: {pending_seen:?}"
            );
        }
    }
}
