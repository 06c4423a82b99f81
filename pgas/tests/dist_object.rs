//! dist_object: fetch from every rank, as an rpc argument (becomes the target's instance),
//! and fetches that reach a rank before it constructs its instance (after UPC++'s
//! dist_object tests).

mod common;

use std::time::Duration;

use common::{by_rank, ranks, ranks_in, ranks_wide, run};
use pgas::{DistObject, RpcTable, barrier, rank_me, rank_n, rpc, when_all};

#[test]
fn fetch_from_every_rank() {
    for n in ranks_wide() {
        run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            let a = DistObject::new((me, format!("rank {me}"), vec![me as u64; me + 1]));
            let b = DistObject::new(me as f64 * 1.5);
            assert_eq!(a.id() + 1, b.id(), "ids follow construction order");
            assert_eq!(a.with(|v| v.0), me, "with reads this rank's instance");
            let fetched = when_all((0..n).map(|r| a.fetch(r)).collect()).wait();
            for (r, v) in fetched.into_iter().enumerate() {
                assert_eq!(v, (r, format!("rank {r}"), vec![r as u64; r + 1]));
            }
            for r in (0..n).rev() {
                assert_eq!(b.fetch(r).wait(), r as f64 * 1.5);
            }
            barrier(); // nobody drops an instance another rank still fetches
        });
    }
}

#[test]
fn as_rpc_argument_it_is_the_targets_own_instance() {
    for n in ranks() {
        let mut rpcs = RpcTable::new();
        type Named = DistObject<(usize, Vec<usize>)>;
        // Returns the rank recorded in the instance it finds, and records the caller there.
        let visit = rpcs.register("visit", |(d, from): (Named, usize)| {
            let owner = d.update(|(owner, callers)| {
                callers.push(from);
                *owner
            });
            (owner, rank_me())
        });
        run(n, 4, rpcs, move || {
            let me = rank_me();
            let d: Named = DistObject::new((me, Vec::new()));
            barrier();
            for k in 0..n {
                let t = (me + k) % n;
                let (owner, ran_on) = rpc(t, visit, (d.clone(), me)).wait();
                assert_eq!(
                    (owner, ran_on),
                    (t, t),
                    "rpc to {t} saw instance of {owner}"
                );
            }
            barrier();
            let mut callers = d.get().1;
            callers.sort_unstable();
            assert_eq!(callers, (0..n).collect::<Vec<_>>());
            assert_eq!(
                d.with(|v| v.0),
                me,
                "my instance still there after sending handles"
            );
            barrier();
        });
    }
}

#[test]
fn fetch_before_the_target_constructs_is_answered_when_it_does() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            if me == 0 {
                std::thread::sleep(Duration::from_millis(30));
            }
            let d = DistObject::new(me * 100 + 7);
            // Everyone (rank 0 too) fetches from rank 0 and from the last rank; rank 0
            // constructed late, so the others' fetches reached it before it had an instance.
            let a = d.fetch(0);
            let b = d.fetch(n - 1);
            assert_eq!(a.wait(), 7);
            assert_eq!(b.wait(), (n - 1) * 100 + 7);
            // A second object constructed late by every rank but the last.
            if me != n - 1 {
                std::thread::sleep(Duration::from_millis(10));
            }
            let e = DistObject::new(vec![me; 3]);
            let last = if me == n - 1 { 0 } else { n - 1 };
            assert_eq!(e.fetch(last).wait(), vec![last; 3]);
            barrier();
            let _ = rank_n();
        });
    }
}

#[test]
fn rpc_naming_an_instance_not_yet_constructed_waits_for_it() {
    // UPC++ defers such an rpc at the target until the dist_object is constructed there.
    for n in ranks_in(&[2, 3, 4]) {
        let mut rpcs = RpcTable::new();
        let read = rpcs.register("read", |d: DistObject<usize>| d.get());
        let out = run(n, 4, rpcs, move || {
            let me = rank_me();
            if me == 0 {
                // Rank 0 makes progress (runs incoming rpcs) before it constructs.
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_millis(30) {
                    pgas::progress();
                    std::thread::yield_now();
                }
            }
            let d = DistObject::new(me * 3);
            let v = rpc(0, read, d.clone()).wait();
            barrier();
            v
        });
        for (r, &v) in by_rank(n, &out) {
            assert_eq!(v, 0, "rank {r} of {n} read rank 0's instance");
        }
    }
}

#[test]
fn updates_from_every_rank_by_rpc_are_all_applied() {
    const PER_RANK: u64 = 100;
    for n in ranks_wide() {
        let mut rpcs = RpcTable::new();
        let bump = rpcs.register("bump", |(d, by): (DistObject<(u64, Vec<u64>)>, u64)| {
            d.update(|(sum, from)| {
                *sum += by;
                from.push(by);
            })
        });
        let out = run(n, 4, rpcs, move || {
            let me = rank_me() as u64;
            let d = DistObject::new((0u64, Vec::new()));
            barrier();
            for k in 0..PER_RANK {
                let target = ((me + k) % n as u64) as usize;
                rpc(target, bump, (d.clone(), me)).wait();
            }
            barrier();
            let (sum, from) = d.get();
            barrier();
            (sum, from.len() as u64)
        });
        for (r, &(sum, count)) in by_rank(n, &out) {
            // Rank r is the target of the k-th call of rank s when (s + k) % n == r.
            let expect: u64 = (0..n as u64)
                .map(|s| {
                    s * (0..PER_RANK)
                        .filter(|k| (s + k) % n as u64 == r as u64)
                        .count() as u64
                })
                .sum();
            // Each k has one sender s with (s + k) % n == r: PER_RANK calls per target.
            assert_eq!((sum, count), (expect, PER_RANK), "rank {r} of {n}");
        }
    }
}

/// A fetch that reaches a rank while it is inside an update of the instance (its closure
/// waits, so the rank polls) is answered after the update, with the updated value: the reader
/// never sees the instance half-written.
#[test]
fn a_fetch_during_an_update_sees_the_value_after_it() {
    for n in ranks_in(&[2, 3, 4]) {
        let out = run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            let d = DistObject::new([0u64; 2]);
            barrier();
            let result = if me == 0 {
                d.update(|v| {
                    v[0] = 1;
                    // Polls until rank 1's fetch has arrived and been held, half-written.
                    let start = std::time::Instant::now();
                    while start.elapsed() < Duration::from_millis(100) {
                        pgas::progress();
                        std::thread::yield_now();
                    }
                    v[1] = 1;
                });
                [0, 0]
            } else if me == 1 {
                std::thread::sleep(Duration::from_millis(20));
                d.fetch(0).wait()
            } else {
                [0, 0]
            };
            barrier();
            result
        });
        for (r, &v) in by_rank(n, &out) {
            if r == 1 {
                assert_eq!(v, [1, 1], "the fetch saw the whole update");
            }
        }
    }
}

#[test]
fn access_inside_its_own_update_is_an_error_not_aliasing() {
    for n in ranks() {
        access_inside_update_on(n);
    }
}

fn access_inside_update_on(n: usize) {
    run(n, 4, RpcTable::new(), || {
        let d = DistObject::new(5u64);
        let inner = d.update(|v| {
            *v += 1;
            (d.try_with(|w| *w), d.try_update(|w| *w += 1))
        });
        let updating = pgas::DistObjectError::Updating {
            id: d.id(),
            rank: rank_me(),
        };
        assert_eq!(inner, (Err(updating.clone()), Err(updating.clone())));
        assert!(
            updating
                .to_string()
                .contains(&format!("dist_object {}", d.id()))
        );
        assert_eq!(d.get(), 6, "the refused update changed nothing");
        let reading = d.with(|_| d.try_update(|w| *w = 0));
        assert_eq!(reading, Err(updating));
        barrier();
    });
}
