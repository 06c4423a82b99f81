//! Futures and promises over real communication: long then-chains, when_all over many
//! pending rpcs, promises fulfilled out of order, join, and_then, rpcs that reply with a
//! future, and futures awaited through `std::future::Future` (after UPC++'s future tests).

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use common::{by_rank, ranks, run};
use pgas::{Future, Promise, RpcFn, RpcTable, barrier, rank_me, rank_n, rpc, when_all};

/// A minimal executor for one future on the calling rank: polls with a no-op waker. Progress
/// comes from `pgas::Future::poll` itself, which makes progress when it is not ready.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    let mut polls = 0u64;
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        polls += 1;
        assert!(polls < 100_000_000, "block_on: future never became ready");
    }
}

struct Fns {
    add: RpcFn<(u64, u64), u64>,
    rank_times: RpcFn<u64, (usize, u64)>,
    relay: RpcFn<(u64, u32), u64>,
}

fn table() -> (RpcTable, Fns) {
    let mut t = RpcTable::new();
    let add = t.register("add", |(a, b): (u64, u64)| a + b);
    let rank_times = t.register("rank_times", |x: u64| {
        (rank_me(), x * (rank_me() as u64 + 1))
    });
    // An rpc that replies with a future: it forwards to its right neighbour `hops` times and
    // replies when the end of the chain has replied (UPC++ rpc returning a future).
    let relay_fn: Arc<OnceLock<RpcFn<(u64, u32), u64>>> = Arc::new(OnceLock::new());
    let relay = t.register_future("relay", {
        let relay_fn = relay_fn.clone();
        move |(acc, hops): (u64, u32)| -> Future<u64> {
            let acc = acc * 10 + rank_me() as u64;
            if hops == 0 {
                return Future::ready(acc);
            }
            let me_again = *relay_fn.get().expect("registered");
            rpc((rank_me() + 1) % rank_n(), me_again, (acc, hops - 1))
        }
    });
    relay_fn.set(relay).unwrap();
    (
        t,
        Fns {
            add,
            rank_times,
            relay,
        },
    )
}

#[test]
fn then_chains_when_all_join_and_then() {
    for n in ranks() {
        let (rpcs, f) = table();
        run(n, 4, rpcs, move || {
            let me = rank_me();
            let right = (me + 1) % n;

            // A chain of 100 continuations on a pending rpc future, each seeing its
            // predecessor's value; the order of execution is recorded.
            let order = Rc::new(RefCell::new(Vec::new()));
            let mut fut = rpc(right, f.add, (me as u64, 1));
            for i in 0..100u64 {
                let order = order.clone();
                fut = fut.then(move |x| {
                    order.borrow_mut().push(i);
                    x + i
                });
            }
            assert_eq!(fut.wait(), me as u64 + 1 + 4950);
            assert_eq!(*order.borrow(), (0..100).collect::<Vec<_>>());

            // Chains on ready futures run at once.
            let ran = Rc::new(Cell::new(false));
            let r2 = ran.clone();
            let ready = Future::ready(3).then(move |x| {
                r2.set(true);
                x * 2
            });
            assert!(ran.get() && ready.is_ready());
            assert_eq!(ready.result(), 6);

            // when_all over many pending rpcs to every rank, results in issue order.
            let futures: Vec<Future<(usize, u64)>> = (0..300u64)
                .map(|i| rpc((me + i as usize) % n, f.rank_times, i))
                .collect();
            let all = when_all(futures).wait();
            for (i, &(r, v)) in all.iter().enumerate() {
                let expect_r = (me + i) % n;
                assert_eq!((r, v), (expect_r, i as u64 * (expect_r as u64 + 1)));
            }
            assert!(when_all(Vec::<Future<u8>>::new()).is_ready());

            // join and and_then.
            let (a, b) = rpc(right, f.add, (1, 2))
                .join(rpc((me + n - 1) % n, f.rank_times, 5))
                .wait();
            assert_eq!(
                (a, b),
                (3, ((me + n - 1) % n, 5 * ((me + n - 1) % n) as u64 + 5))
            );
            let chained = rpc(right, f.add, (10, 20))
                .and_then(move |x| rpc(right, f.add, (x, 100)))
                .and_then(move |y| rpc(me, f.add, (y, 1000)));
            assert_eq!(chained.wait(), 1130);
            assert_eq!(
                Future::ready(4).and_then(|x| Future::ready(x + 1)).result(),
                5
            );

            // An rpc whose function replies with a future from another rpc, n hops around.
            let digits = rpc(right, f.relay, (1, n as u32)).wait();
            let mut expect = 1u64;
            for k in 0..=n {
                expect = expect * 10 + ((me + 1 + k) % n) as u64;
            }
            assert_eq!(digits, expect);
            barrier();
        });
    }
}

#[test]
fn promises_fulfilled_out_of_order() {
    for n in ranks() {
        let (rpcs, f) = table();
        run(n, 4, rpcs, move || {
            let me = rank_me();
            // Value promises, fulfilled from rpc replies in the reverse order of creation.
            let promises: Vec<Promise<u64>> = (0..40).map(|_| Promise::new()).collect();
            let futures: Vec<Future<u64>> = promises.iter().map(Promise::get_future).collect();
            let all = when_all(futures);
            let replies: Vec<Future<u64>> = (0..40u64)
                .map(|i| rpc((me + i as usize) % n, f.add, (i, 1000)))
                .collect();
            for (i, reply) in replies.into_iter().enumerate().rev() {
                assert!(!all.is_ready(), "not before promise {i}");
                let v = reply.wait();
                promises[i].fulfill_result(v);
                promises[i].fulfill_anonymous(1);
            }
            assert_eq!(all.wait(), (0..40).map(|i| i + 1000).collect::<Vec<u64>>());

            // One anonymous promise counting many rpcs, completed only by the last.
            let p: Promise = Promise::new();
            let count = Rc::new(Cell::new(0));
            for i in 0..64u64 {
                p.require_anonymous(1);
                let (p, count) = (p.clone(), count.clone());
                rpc((me + 1 + i as usize) % n, f.add, (i, i))
                    .then(move |v| {
                        assert_eq!(v, 2 * i);
                        count.set(count.get() + 1);
                        p.fulfill_anonymous(1);
                    })
                    .detach();
            }
            let done = p.finalize();
            done.wait();
            assert_eq!(count.get(), 64);
            assert_eq!(p.outstanding(), 0);
            barrier();
        });
    }
}

#[test]
fn futures_awaited_through_std_future_inside_launch() {
    for n in ranks() {
        let (rpcs, f) = table();
        let out = run(n, 4, rpcs, move || {
            let me = rank_me();
            let right = (me + 1) % n;
            let v = block_on(async move {
                let a = rpc(right, f.add, (me as u64, 5)).await;
                let (r, b) = rpc(right, f.rank_times, a).await;
                assert_eq!(r, right);
                let rest = when_all((0..n).map(|t| rpc(t, f.add, (b, t as u64))).collect()).await;
                rest.into_iter().sum::<u64>()
            });
            barrier();
            v
        });
        for (me, &v) in by_rank(n, &out) {
            let right = (me + 1) % n;
            let b = (me as u64 + 5) * (right as u64 + 1);
            let expect: u64 = (0..n as u64).map(|t| b + t).sum();
            assert_eq!(v, expect, "rank {me} of {n}");
        }
    }
}
