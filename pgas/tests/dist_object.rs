//! dist_object: fetch from every rank, as an rpc argument (becomes the target's instance),
//! and fetches that reach a rank before it constructs its instance (after UPC++'s
//! dist_object tests).

mod common;

use std::cell::RefCell;
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
            assert_eq!(a.0, me, "Deref gives this rank's instance");
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
        type Named = DistObject<RefCell<(usize, Vec<usize>)>>;
        // Returns the rank recorded in the instance it finds, and records the caller there.
        let visit = rpcs.register("visit", |(d, from): (Named, usize)| {
            let owner = d.borrow().0;
            d.borrow_mut().1.push(from);
            (owner, rank_me())
        });
        run(n, 4, rpcs, move || {
            let me = rank_me();
            let d: Named = DistObject::new(RefCell::new((me, Vec::new())));
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
            let mut callers = d.borrow().1.clone();
            callers.sort_unstable();
            assert_eq!(callers, (0..n).collect::<Vec<_>>());
            assert_eq!(
                d.borrow().0,
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
        let read = rpcs.register("read", |d: DistObject<usize>| *d);
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
