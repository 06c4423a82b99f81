//! rpc by function: `#[pgas::remote]` functions called by `rpc`, `rpc_ff` and a put's remote
//! completion with no `RpcTable`, beside a table's functions in the same job; run again by
//! path as a replaying runtime does; and the registry's paths.

mod common;

use std::cell::Cell;

use common::{by_rank, ranks, run};
use pgas::runtime_hooks::rerun_rpc;
use pgas::{
    Completions, Future, GlobalPtr, RpcTable, barrier, new_array, progress, rank_me, rank_n, rpc,
    rpc_ff, rput_with,
};

/// Two arguments travel as a tuple.
#[pgas::remote]
fn add(a: u64, b: u64) -> u64 {
    a + b
}

/// One argument travels as itself; the reply names the rank it ran on.
#[pgas::remote]
pub(crate) fn where_am_i(tag: String) -> (usize, String) {
    (rank_me(), tag)
}

/// No argument, no result.
#[pgas::remote]
fn arrive() {
    ARRIVED.with(|a| a.set(a.get() + 1));
}

thread_local! {
    /// rpc_ff and remote-completion arrivals at this rank.
    static ARRIVED: Cell<u64> = const { Cell::new(0) };
}

/// A future result replies when it is ready: here after an rpc to the next rank.
#[pgas::remote]
fn relay(x: u64) -> Future<u64> {
    let next = (rank_me() + 1) % rank_n();
    rpc(next, add, (x, 1000))
}

/// A pattern parameter and a pointer argument: writes `v` into this rank's `at`.
#[pgas::remote]
fn store((at, v): (GlobalPtr<u64>, u64)) -> u64 {
    at.write_local_slice(&[v]).unwrap();
    v * 2
}

fn spin_until(mut done: impl FnMut() -> bool) {
    while !done() {
        if progress() == 0 {
            std::thread::yield_now();
        }
    }
}

#[test]
fn remote_functions_run_where_they_are_sent_without_a_table() {
    for n in ranks() {
        let out = run(n, 2, RpcTable::new(), move || {
            let me = rank_me();
            let right = (me + 1) % n;
            let sum = rpc(right, add, (me as u64, 5)).wait();
            let (ran_on, tag) = rpc(right, where_am_i, format!("from {me}")).wait();
            let relayed = rpc(right, relay, me as u64).wait();
            // The function is still an ordinary function here.
            (sum, ran_on, tag, relayed, add(2, 3))
        });
        for (r, got) in by_rank(n, &out) {
            let want = (
                r as u64 + 5,
                (r + 1) % n,
                format!("from {r}"),
                r as u64 + 1000,
                5,
            );
            assert_eq!(*got, want, "rank {r} of {n}");
        }
    }
}

#[test]
fn rpc_ff_and_remote_completion_take_remote_functions() {
    for n in ranks() {
        let out = run(n, 2, RpcTable::new(), move || {
            ARRIVED.with(|a| a.set(0));
            let me = rank_me();
            let mine: GlobalPtr<u64> = new_array(1).unwrap();
            let all = pgas::allgather(mine).wait();
            barrier();
            let right = (me + 1) % n;
            rpc_ff(right, arrive, ());
            let cx = Completions::new().operation_future().remote_rpc(arrive, ());
            rput_with(&[7 + me as u64], all[right], cx)
                .operation
                .unwrap()
                .wait();
            // Two arrivals from the left neighbour: the rpc_ff and the put's completion.
            spin_until(|| ARRIVED.with(Cell::get) == 2);
            // Read before the barrier: once past it, the left neighbour's `store` may land
            // while this rank still waits in the barrier.
            let landed = mine.read_local().unwrap();
            barrier();
            let doubled = rpc(right, store, (all[right], 40)).wait();
            barrier();
            (landed, doubled, mine.read_local().unwrap())
        });
        for (r, got) in by_rank(n, &out) {
            let left = (r + n - 1) % n;
            assert_eq!(*got, (7 + left as u64, 80, 40), "rank {r} of {n}");
        }
    }
}

#[test]
fn remote_and_table_functions_share_a_job() {
    for n in ranks() {
        let mut table = RpcTable::new();
        let triple = table.register("triple", |x: u64| x * 3);
        let out = run(n, 2, table, move || {
            let right = (rank_me() + 1) % rank_n();
            let a = rpc(right, triple, 4).wait();
            let b = rpc(right, add, (a, 1)).wait();
            (a, b)
        });
        for (r, got) in by_rank(n, &out) {
            assert_eq!(*got, (12, 13), "rank {r}");
        }
    }
}

#[test]
fn a_remote_function_reruns_by_its_path() {
    let out = run(ranks()[0], 2, RpcTable::new(), || {
        let path = add.path();
        let args = postcard::to_allocvec(&(20u64, 22u64)).unwrap();
        let reply = rerun_rpc(path, &args).unwrap();
        let unknown = rerun_rpc("remote::nope", &args).unwrap_err().to_string();
        (path, postcard::from_bytes::<u64>(&reply).unwrap(), unknown)
    });
    for (_, (path, sum, unknown)) in by_rank(ranks()[0], &out) {
        assert_eq!(*path, "remote::add");
        assert_eq!(*sum, 42);
        assert!(unknown.contains("remote::nope"), "{unknown}");
    }
}

#[test]
fn the_handle_prints_its_path() {
    assert_eq!(format!("{where_am_i:?}"), "Remote(remote::where_am_i)");
    assert_eq!(relay.path(), "remote::relay");
}
