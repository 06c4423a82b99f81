//! Unbalanced tree search: a deterministic random tree explored by rpc_ff, each node sent to
//! the rank its hash picks, counts kept with remote atomics; the total must equal a
//! sequential count of the same tree (after the UPC++ UTS example).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use common::{by_rank, mix, ranks, run};
use pgas::{
    AtomicDomain, GlobalPtr, RpcFn, RpcTable, barrier, broadcast, new_array, ops, progress,
    rank_me, rank_n, reduce_all, rpc_ff,
};

const SEED: u64 = 0x5EED_2024;
const ROOT: u64 = 1;
const ROOT_CHILDREN: u64 = 300;
const MAX_DEPTH: u32 = 60;

/// Children of a node: the root has many; every other node has 4 with probability 0.23
/// (a binomial tree, finite but very unbalanced), none below MAX_DEPTH.
fn children(id: u64, depth: u32) -> Vec<u64> {
    let k = if depth == 0 {
        ROOT_CHILDREN
    } else if depth >= MAX_DEPTH || mix(id ^ SEED) % 1000 >= 230 {
        0
    } else {
        4
    };
    (0..k).map(|i| mix(id.wrapping_mul(31) ^ (i + 1))).collect()
}

fn owner(id: u64, n: usize) -> usize {
    (mix(id ^ 0xABCD) % n as u64) as usize
}

fn sequential_count() -> u64 {
    let mut stack = vec![(ROOT, 0u32)];
    let mut count = 0;
    while let Some((id, depth)) = stack.pop() {
        count += 1;
        stack.extend(children(id, depth).into_iter().map(|c| (c, depth + 1)));
    }
    count
}

/// (counters at rank 0: [created, completed], node, depth)
type Visit = RpcFn<(GlobalPtr<u64>, u64, u32), ()>;

#[test]
fn unbalanced_tree_search_counts_every_node_once() {
    let expected = sequential_count();
    assert!(
        expected > 2000,
        "the tree is big enough to matter: {expected}"
    );
    for n in ranks() {
        let visited: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
        let mut rpcs = RpcTable::new();
        let visit_fn: Arc<OnceLock<Visit>> = Arc::new(OnceLock::new());
        let visit = rpcs.register("visit", {
            let (visit_fn, visited) = (visit_fn.clone(), visited.clone());
            move |(ctr, id, depth): (GlobalPtr<u64>, u64, u32)| {
                let ad = AtomicDomain::<u64>::new();
                visited[rank_me()].fetch_add(1, Ordering::SeqCst);
                let kids = children(id, depth);
                if !kids.is_empty() {
                    // Created before the parent completes: completed == created means done.
                    ad.add(ctr, kids.len() as u64).wait();
                    for c in kids {
                        rpc_ff(
                            owner(c, rank_n()),
                            *visit_fn.get().unwrap(),
                            (ctr, c, depth + 1),
                        );
                    }
                }
                ad.add(ctr + 1, 1).wait();
            }
        });
        visit_fn.set(visit).unwrap();
        let v2 = visited.clone();
        let out = run(n, 4, rpcs, move || {
            let me = rank_me();
            let ad = AtomicDomain::<u64>::new();
            let ctr = if me == 0 {
                let c = new_array::<u64>(2).unwrap();
                ad.store(c, 1).wait(); // the root exists before anyone checks
                c
            } else {
                GlobalPtr::null()
            };
            let ctr = broadcast(ctr, 0).wait();
            barrier();
            if me == 0 {
                rpc_ff(owner(ROOT, n), visit, (ctr, ROOT, 0));
            }
            // Termination: completed (read first) equal to created (read after).
            loop {
                let completed = ad.load(ctr + 1).wait();
                let created = ad.load(ctr).wait();
                if completed == created {
                    break;
                }
                if progress() == 0 {
                    std::thread::yield_now();
                }
            }
            barrier();
            let total = ad.load(ctr + 1).wait();
            let mine = v2[me].load(Ordering::SeqCst);
            let sum = reduce_all(mine, ops::add).wait();
            (total, sum, mine)
        });
        for (r, &(total, sum, mine)) in by_rank(n, &out) {
            assert_eq!(total, expected, "{n} ranks: atomic count at rank {r}");
            assert_eq!(sum, expected, "{n} ranks: sum of per-rank counts");
            assert_eq!(mine, visited[r].load(Ordering::SeqCst));
            assert!(n == 1 || mine > 0, "rank {r} got no work");
        }
    }
}
