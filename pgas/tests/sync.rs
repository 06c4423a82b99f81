//! Point-to-point synchronizations: `wait_until` on a flag, `put_signal`, the `*_sync`
//! atomics and `DistLock`, each stepping the epoch counter (EC) as its doc says; the lock
//! excludes under contention of every rank; the refusals name their cause.

mod common;

use common::{by_rank, ranks, ranks_in, run};
use pgas::{
    AtomicDomain, DistLock, GlobalPtr, PgasError, RpcTable, Signal, SyncOrder, barrier, epoch,
    new_array, put_signal, rank_me, rank_n, rget, rput, wait_until,
};

/// `len` zeroed words on every rank, every rank's pointer known.
fn words(len: usize) -> Vec<GlobalPtr<u64>> {
    let p = new_array::<u64>(len).unwrap();
    p.write_local_slice(&vec![0; len]).unwrap();
    pgas::allgather(p).wait()
}

/// Each rank sends its data to its right neighbour with `put_signal`; each waits for its
/// flag and then finds the data in place. The sender's EC steps once, the waiter's once.
#[test]
fn put_signal_data_is_there_when_the_flag_is() {
    for n in ranks_in(&[2, 3, 4, 8]) {
        let out = run(n, 1, RpcTable::new(), move || {
            let (me, n) = (rank_me(), rank_n());
            let w = words(5);
            barrier();
            let right = (me + 1) % n;
            let data = [
                me as u64 * 10 + 1,
                me as u64 * 10 + 2,
                me as u64 * 10 + 3,
                7,
            ];
            let e0 = epoch();
            put_signal(&data, w[right], w[right] + 4, Signal::Set(1)).unwrap();
            let e1 = epoch();
            let seen = wait_until(w[me] + 4, |v| v == 1).unwrap();
            let e2 = epoch();
            let mut got = [0u64; 4];
            w[me].read_local_slice(&mut got).unwrap();
            barrier();
            (e1 - e0, e2 - e1, seen, got)
        });
        for (r, (sig, wait, seen, got)) in by_rank(n, &out) {
            let left = ((r + n - 1) % n) as u64;
            assert_eq!((*sig, *wait, *seen), (1, 1, 1), "rank {r}: one step each");
            assert_eq!(
                *got,
                [left * 10 + 1, left * 10 + 2, left * 10 + 3, 7],
                "rank {r}"
            );
        }
    }
}

/// Every rank adds 1 to rank 0's counter with `Signal::Add` (no data); rank 0 waits until it
/// reached the number of ranks.
#[test]
fn signal_add_counts_every_sender() {
    for n in ranks() {
        let out = run(n, 1, RpcTable::new(), move || {
            let w = words(1);
            barrier();
            put_signal::<u64>(&[], w[0], w[0], Signal::Add(1)).unwrap();
            let seen = if rank_me() == 0 {
                wait_until(w[0], |v| v == rank_n() as u64).unwrap()
            } else {
                0
            };
            barrier();
            seen
        });
        for (r, seen) in by_rank(n, &out) {
            if r == 0 {
                assert_eq!(*seen, n as u64);
            }
        }
    }
}

#[test]
fn refusals_name_their_cause() {
    for n in ranks_in(&[2]) {
        let out = run(n, 1, RpcTable::new(), || {
            let w = words(1);
            let other = w[1 - rank_me()];
            let e = epoch();
            let not_own = wait_until(other, |_| true).unwrap_err();
            let ranks = put_signal(&[1u64], w[0], w[1], Signal::Set(1)).unwrap_err();
            let lock = DistLock::new(1).unwrap();
            let not_held = lock.release().unwrap_err();
            lock.acquire().unwrap();
            let twice = lock.acquire().unwrap_err();
            lock.release().unwrap();
            barrier();
            (not_own, ranks, not_held, twice, epoch() - e)
        });
        for (r, (not_own, ranks, not_held, twice, _)) in by_rank(n, &out) {
            assert_eq!(*not_own, PgasError::WaitNotOwn { rank: 1 - r, me: r });
            assert!(not_own.to_string().contains("own segment"), "{not_own}");
            assert_eq!(
                *ranks,
                PgasError::SignalRanks {
                    data_rank: 0,
                    flag_rank: 1
                }
            );
            assert!(matches!(not_held, PgasError::LockNotHeld { rank, home: 1, .. } if *rank == r));
            assert!(
                matches!(twice, PgasError::LockHeldByCaller { rank, home: 1, .. } if *rank == r)
            );
            assert!(twice.to_string().contains("not reentrant"), "{twice}");
        }
    }
}

/// `Acquire` and `Release` step the EC once, `AcqRel` twice, the plain atomics never.
#[test]
fn sync_atomics_step_the_epoch_by_their_order() {
    for n in ranks_in(&[1, 2, 4]) {
        let out = run(n, 1, RpcTable::new(), || {
            let w = words(1);
            let target = w[(rank_me() + 1) % rank_n()];
            let ad = AtomicDomain::<u64>::new();
            barrier();
            let mut steps = Vec::new();
            let mut measure = |f: &dyn Fn()| {
                let e = epoch();
                f();
                steps.push(epoch() - e);
            };
            measure(&|| {
                ad.fetch_add(target, 1).wait();
            });
            measure(&|| {
                ad.fetch_add_sync(target, 1, SyncOrder::Acquire);
            });
            measure(&|| {
                ad.fetch_add_sync(target, 1, SyncOrder::Release);
            });
            measure(&|| {
                ad.fetch_add_sync(target, 1, SyncOrder::AcqRel);
            });
            measure(&|| {
                ad.load_sync(target, SyncOrder::Acquire);
            });
            measure(&|| ad.store_sync(target, 9, SyncOrder::Release));
            measure(&|| {
                assert_eq!(ad.exchange_sync(target, 4, SyncOrder::AcqRel), 9);
            });
            measure(&|| {
                assert_eq!(
                    ad.compare_exchange_sync(target, 4, 5, SyncOrder::Acquire),
                    4
                );
            });
            barrier();
            steps
        });
        for (r, steps) in by_rank(n, &out) {
            assert_eq!(*steps, [0, 1, 1, 2, 1, 1, 2, 1], "rank {r}");
        }
    }
}

/// Every rank increments a counter on rank 0 by a non-atomic read-modify-write (rget, then
/// rput) under one `DistLock`, many times: the total is exact only if the lock excludes.
/// Each acquire and each release steps the EC once.
#[test]
fn lock_excludes_under_contention() {
    const ROUNDS: u64 = 40;
    for n in ranks_in(&[2, 4, 8, 16]) {
        let out = run(n, 1, RpcTable::new(), || {
            let w = words(2);
            let lock = DistLock::new(rank_n() - 1).unwrap();
            barrier();
            let e = epoch();
            for _ in 0..ROUNDS {
                lock.acquire().unwrap();
                let v = rget(w[0]).wait();
                // A window in which a second holder would read the same value.
                std::thread::yield_now();
                rput(v + 1, w[0]).wait();
                let inside = AtomicDomain::<u64>::new().fetch_add(w[0] + 1, 1).wait();
                assert_eq!(inside, 0, "another rank holds the lock too");
                AtomicDomain::<u64>::new().fetch_sub(w[0] + 1, 1).wait();
                lock.release().unwrap();
            }
            let steps = epoch() - e;
            barrier();
            let total = rget(w[0]).wait();
            barrier();
            (total, steps)
        });
        for (r, (total, steps)) in by_rank(n, &out) {
            assert_eq!(*total, n as u64 * ROUNDS, "rank {r}: the lock let two in");
            assert_eq!(*steps, 2 * ROUNDS, "rank {r}");
        }
    }
}
