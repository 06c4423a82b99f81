//! Relaxed CDs over point-to-point synchronization (no barrier in the body): a signaling put,
//! a wait on a flag, a lock and synchronizing atomics each step the epoch counter (EC), and
//! a replay of rank 0 applies rank 1's writes into it epoch by epoch, so after the exact
//! soft error it gets the first run's answer.
//!
//! Each program is built so that the answer depends on the order of a local access of rank 0
//! and a write rank 1 makes into it *because of* one synchronization: without that
//! synchronization's EC step the write is in the same epoch as the local access, the replay
//! applies it first, and the answer is wrong (each test names the step it needs).
//!
//! Under the mpi conduit (`cargo test -p cd-runtime --features pgas/mpi --test relaxed_sync`
//! with `mpirun -n 2` as cargo's runner) each process checks its own rank's result.

mod common;

use cd_runtime as cd;
use cd_runtime::relaxed::ReplayEvent;
use common::{config, run};
use pgas::runtime_hooks::internal;
use pgas::{
    AtomicDomain, DistLock, GlobalPtr, Signal, SyncOrder, barrier, put_signal, rank_me, rget, rput,
    wait_until,
};

/// The rank that fails and replays.
const F: usize = 0;
/// The rank that writes into it.
const R: usize = 1;
/// Words per rank: `X` data, `FLAG` a flag or counter, `DONE` a second flag.
const X: usize = 0;
const FLAG: usize = 1;
const DONE: usize = 2;
const WORDS: usize = 3;

/// What one rank of a scenario sees: its answer, its number of relaxed recoveries, and the
/// recovery's replay events (rank 0).
type Seen = (u64, usize, Vec<ReplayEvent>);

/// Runs `body(me, words of every rank, lock homed at R)` in a relaxed CD `s` on two ranks,
/// rank 0's first execution failing (`fault`) or not; rank 0 preserves its words. Returns
/// the ranks' results this process ran.
fn scenario(
    fault: bool,
    body: impl Fn(usize, &[GlobalPtr<u64>], DistLock) -> u64 + Sync,
) -> Vec<(usize, Seen)> {
    let inject = if fault {
        "inject = { at = [{ rank = 0, iteration = 0, kind = \"soft\" }] }\n"
    } else {
        ""
    };
    let cfg = config(&format!("[cd.s]\ncheck_classes = false\n{inject}"));
    let out = run(2, cfg, || {
        let me = rank_me();
        let w = pgas::new_array::<u64>(WORDS).unwrap();
        w.write_local_slice(&[0; WORDS]).unwrap();
        let ws = internal(|| pgas::allgather(w).wait());
        let lock = DistLock::new(R).unwrap();
        internal(barrier);
        let got = cd::relaxed("s", |c| {
            if me == F {
                c.preserve_global("words", w, WORDS);
            }
            if !c.is_reexecution() {
                // Scaffolding, unseen by the hook: rank 0 preserved its words (and counts
                // incoming writes) before rank 1 writes into it.
                internal(barrier);
            }
            Ok(body(me, &ws, lock))
        })?;
        let traces = cd::relaxed::recoveries();
        barrier();
        let events = traces.first().map(|t| t.events.clone()).unwrap_or_default();
        Ok((got, traces.len(), events))
    })
    .unwrap();
    out.results
        .with_ranks()
        .map(|(r, s)| (r, s.clone()))
        .collect()
}

/// Checks that rank 0 answers `want` without a fault and after its replay, and that only
/// rank 0 re-executed.
fn check(name: &str, want: u64, body: impl Fn(usize, &[GlobalPtr<u64>], DistLock) -> u64 + Sync) {
    for fault in [false, true] {
        for (r, (got, recoveries, events)) in scenario(fault, &body) {
            if r == F {
                assert_eq!(
                    got, want,
                    "{name}: rank 0's answer (fault: {fault}); replay events {events:?}"
                );
                assert_eq!(recoveries, usize::from(fault), "{name}: rank 0 replayed");
                if fault {
                    assert!(
                        events
                            .iter()
                            .any(|e| matches!(e, ReplayEvent::Incoming { from: R, .. })),
                        "{name}: rank 1's writes were replayed: {events:?}"
                    );
                }
            } else {
                assert_eq!(recoveries, 0, "{name}: rank {r} never re-executed");
            }
        }
    }
}

/// Needs the signaling side's step (`SyncEvent::Signal`): rank 0 writes x = 1, signals rank
/// 1 by `put_signal`; rank 1 answers with x = 2 and a signal; rank 0 reads 2.
#[test]
fn put_signal_orders_the_answer_after_the_local_write() {
    check("put_signal", 2, |me, w, _| {
        if me == F {
            w[F].write_local(1).unwrap();
            put_signal::<u64>(&[], w[R], w[R] + FLAG, Signal::Set(1)).unwrap();
            wait_until(w[F] + FLAG, |v| v == 1).unwrap();
            (w[F] + X).read_local().unwrap()
        } else {
            wait_until(w[R] + FLAG, |v| v == 1).unwrap();
            put_signal(&[2u64], w[F] + X, w[F] + FLAG, Signal::Set(1)).unwrap();
            0
        }
    });
}

/// Needs the waiting side's step (`SyncEvent::FlagWait`): rank 1 adds 1 to rank 0's counter,
/// waits for a plain (not synchronizing) store from rank 0, adds 1 again; rank 0 waits for
/// 1, stores, waits for 2: it sees 1 then 2 (10 + 2), never 2 at once.
#[test]
fn wait_until_sees_the_values_of_the_first_run() {
    check("wait_until", 12, |me, w, _| {
        let ad = AtomicDomain::<u64>::new();
        if me == F {
            let first = wait_until(w[F] + FLAG, |v| v >= 1).unwrap();
            ad.store(w[R] + FLAG, 1).wait();
            let second = wait_until(w[F] + FLAG, |v| v >= 2).unwrap();
            first * 10 + second
        } else {
            ad.add(w[F] + FLAG, 1).wait();
            wait_until(w[R] + FLAG, |v| v == 1).unwrap();
            ad.add(w[F] + FLAG, 1).wait();
            0
        }
    });
}

/// Needs the releasing side's step (`SyncEvent::LockRelease`): rank 0 holds the lock (homed
/// at rank 1), writes x = 1, releases; rank 1 takes the lock after it, reads x and writes
/// x + 10 into rank 0, then tells it by a plain store; rank 0 reads 11.
#[test]
fn lock_orders_the_next_holders_write_after_the_local_one() {
    check("lock", 11, |me, w, lock| {
        let ad = AtomicDomain::<u64>::new();
        if me == F {
            lock.acquire().unwrap();
            ad.store(w[R] + FLAG, 1).wait();
            w[F].write_local(1).unwrap();
            lock.release().unwrap();
            wait_until(w[F] + DONE, |v| v == 1).unwrap();
            (w[F] + X).read_local().unwrap()
        } else {
            wait_until(w[R] + FLAG, |v| v == 1).unwrap();
            lock.acquire().unwrap();
            let x = rget(w[F] + X).wait();
            rput(x + 10, w[F] + X).wait();
            lock.release().unwrap();
            ad.store(w[F] + DONE, 1).wait();
            0
        }
    });
}

/// Needs the step of a releasing atomic (`SyncEvent::AtomicRelease`): rank 0 writes x = 1,
/// then `fetch_add_sync(.., Release)` on rank 1's flag; rank 1 writes x = 2 and tells rank 0
/// by a plain store; rank 0 reads 2.
#[test]
fn release_atomic_orders_the_answer_after_the_local_write() {
    check("release atomic", 2, |me, w, _| {
        let ad = AtomicDomain::<u64>::new();
        if me == F {
            w[F].write_local(1).unwrap();
            ad.fetch_add_sync(w[R] + FLAG, 1, SyncOrder::Release);
            wait_until(w[F] + DONE, |v| v == 1).unwrap();
            (w[F] + X).read_local().unwrap()
        } else {
            wait_until(w[R] + FLAG, |v| v == 1).unwrap();
            rput(2u64, w[F] + X).wait();
            ad.store(w[F] + DONE, 1).wait();
            0
        }
    });
}

/// Needs the step of an acquiring atomic (`SyncEvent::AtomicAcquire`): as the `wait_until`
/// test, rank 0 spinning with `load_sync(.., Acquire)` on its own counter instead.
#[test]
fn acquire_atomic_sees_the_values_of_the_first_run() {
    check("acquire atomic", 12, |me, w, _| {
        let ad = AtomicDomain::<u64>::new();
        if me == F {
            let spin = |at_least: u64| loop {
                let v = ad.load_sync(w[F] + FLAG, SyncOrder::Acquire);
                if v >= at_least {
                    return v;
                }
                pgas::progress();
            };
            let first = spin(1);
            ad.store(w[R] + FLAG, 1).wait();
            let second = spin(2);
            first * 10 + second
        } else {
            ad.add(w[F] + FLAG, 1).wait();
            wait_until(w[R] + FLAG, |v| v == 1).unwrap();
            ad.add(w[F] + FLAG, 1).wait();
            0
        }
    });
}
