//! The tree collectives under stress: results in team-rank order for every team size and
//! root with an operation that is not commutative, floating-point sums whose bits depend on
//! the team size only (never on which message came first), many collectives of mixed kinds
//! back to back and in flight together on the world, on split teams and on one-member teams;
//! each under every [`Algorithm`], which must agree to the bit; and HPGMG's reductions
//! thousands of times beside a competing load.

mod common;

use common::{concat, mix, ranks_in, ranks_wide, run};
use pgas::collectives::{Algorithm, set_algorithm};
use pgas::{
    RpcTable, Team, allgather, allgather_on, barrier, barrier_async_on, barrier_on, broadcast_on,
    ops, rank_me, rank_n, reduce_all, reduce_all_on, reduce_all_u64, reduce_all_u64_on, reduce_one,
    reduce_one_on, solo_team, world,
};

/// Every way the collectives can move their messages.
const ALGORITHMS: [Algorithm; 3] = [Algorithm::Auto, Algorithm::Tree, Algorithm::Flat];

/// Makes this rank late by a pseudo-random amount that differs by rank and by `salt`, while
/// serving messages, so that partials reach their parents in varying orders.
fn stagger(salt: u64) {
    let spins = mix(salt ^ (rank_me() as u64) << 32) % 2000;
    for _ in 0..spins {
        pgas::progress();
    }
}

/// Every collective on `team` (members `expect`, world ranks in team order), for every root:
/// results follow team-rank order exactly.
fn in_order_on(team: &Team, expect: &[usize], salt: u64) {
    let n = team.rank_n();
    let me = team.rank_me();
    assert_eq!(team.members(), expect);
    for root in 0..n {
        stagger(salt ^ root as u64);
        let r = reduce_one_on(team, vec![me], concat, root).wait();
        if me == root {
            assert_eq!(r, Some((0..n).collect::<Vec<_>>()), "root {root} of {n}");
        } else {
            assert_eq!(r, None);
        }
        let s = reduce_one_on(team, format!("<{}>", rank_me()), |a, b| a + &b, root).wait();
        let want: String = expect.iter().map(|w| format!("<{w}>")).collect();
        assert_eq!(s, (me == root).then_some(want));
        let b = broadcast_on(team, (root, rank_me()), root).wait();
        assert_eq!(b, (root, expect[root]), "broadcast from {root} of {n}");
    }
    stagger(salt ^ 0xa11);
    let all = reduce_all_on(team, vec![rank_me()], concat).wait();
    assert_eq!(all, expect);
    let gathered = allgather_on(team, format!("{me}@{}", rank_me())).wait();
    let want: Vec<String> = expect
        .iter()
        .enumerate()
        .map(|(t, w)| format!("{t}@{w}"))
        .collect();
    assert_eq!(gathered, want);
    barrier_async_on(team).wait();
}

#[test]
fn non_commutative_results_in_team_order_for_every_size_and_root() {
    for (n, algorithm) in ranks_in(&(1..=13).collect::<Vec<_>>())
        .into_iter()
        .flat_map(|n| ALGORITHMS.map(|a| (n, a)))
    {
        run(n, 2, RpcTable::new(), move || {
            set_algorithm(algorithm);
            let me = rank_me();
            in_order_on(&world(), &(0..n).collect::<Vec<_>>(), 1);
            // A team in reverse world order, and the thirds of the world (sizes differ).
            let reversed = world().split(0, (n - me) as u64);
            let mut rev: Vec<usize> = (0..n).collect();
            rev.reverse();
            in_order_on(&reversed, &rev, 2);
            let third = world().split((me % 3) as u64, me as u64);
            let members: Vec<usize> = (0..n).filter(|w| w % 3 == me % 3).collect();
            in_order_on(&third, &members, 3);
            in_order_on(&solo_team(), &[me], 4);
            barrier();
        });
    }
}

/// What a tree of `values.len()` ranks computes from rank `r` down: `values` combined with
/// `op(lower, higher)` in the binomial tree rooted at rank 0 (the parenthesisation the module
/// doc promises).
fn tree_fold<T: Copy>(values: &[T], r: usize, op: &impl Fn(T, T) -> T) -> T {
    let n = values.len();
    let lowest = if r == 0 {
        n.next_power_of_two()
    } else {
        r & r.wrapping_neg()
    };
    let mut acc = values[r];
    let mut d = 1;
    while d < lowest && r + d < n {
        acc = op(acc, tree_fold(values, r + d, op));
        d *= 2;
    }
    acc
}

fn tree_sum(values: &[f64], r: usize) -> f64 {
    tree_fold(values, r, &|a, b| a + b)
}

/// A value of rank `r` whose sums round differently in different orders: ±1e16 (where the
/// spacing of doubles is 2) alternating with small values that round away next to them.
fn float_of(r: usize) -> f64 {
    match r % 4 {
        0 => 1e16,
        2 => -1e16,
        _ => 1.5 + r as f64 * 0.25,
    }
}

#[test]
fn float_sums_depend_on_the_team_size_not_on_timing() {
    for n in ranks_wide() {
        let values: Vec<f64> = (0..n).map(float_of).collect();
        let want = tree_sum(&values, 0).to_bits();
        let left = values[1..].iter().fold(values[0], |a, b| a + b).to_bits();
        let sums = |salt: u64, algorithm: Algorithm| {
            run(n, 2, RpcTable::new(), move || {
                set_algorithm(algorithm);
                (0..40u64)
                    .map(|k| {
                        stagger(salt + k);
                        let all = reduce_all(float_of(rank_me()), ops::add).wait();
                        stagger(salt + k + 1000);
                        let one = reduce_one(float_of(rank_me()), ops::add, k as usize % n).wait();
                        (all.to_bits(), one.map(f64::to_bits))
                    })
                    .collect::<Vec<_>>()
            })
        };
        for (run_no, algorithm) in [0u64, 1]
            .into_iter()
            .flat_map(|r| ALGORITHMS.map(|a| (r, a)))
        {
            let out = sums(run_no * 7919, algorithm);
            for (r, results) in common::by_rank(n, &out) {
                for (k, &(all, one)) in results.iter().enumerate() {
                    let what = format!("{n} ranks, rank {r}, reduction {k}, {algorithm:?}");
                    assert_eq!(all, want, "{what}, run {run_no}");
                    let root = k % n;
                    assert_eq!(one, (r == root).then_some(want), "{what}, reduce_one");
                }
            }
        }
        if n == 4 || n == 8 || n == 16 {
            // The test would not see a reordering if the values summed the same in any order.
            assert_ne!(want, left, "{n} ranks: pick values that round differently");
        }
    }
}

#[test]
fn mixed_collectives_back_to_back_and_in_flight() {
    for (n, algorithm) in ranks_wide()
        .into_iter()
        .flat_map(|n| ALGORITHMS.map(|a| (n, a)))
    {
        let out = run(n, 4, RpcTable::new(), move || {
            set_algorithm(algorithm);
            let me = rank_me();
            let world = world();
            let halves = world.split((me % 2) as u64, (n - me) as u64);
            let solo = world.split(me as u64, 0);
            let mut checks = 0u64;
            for i in 0..60usize {
                let root = (i * 7) % n;
                let hroot = i % halves.rank_n();
                // Started without waiting, on three teams, completed in reverse order.
                let a = broadcast_on(&world, i * 1000 + me, root);
                let b = reduce_one_on(&world, vec![me], concat, (root + 1) % n);
                let c = barrier_async_on(&world);
                let d = reduce_all_on(&halves, vec![halves.rank_me()], concat);
                let e = allgather_on(&halves, (i, me));
                let f = reduce_all_on(&solo, i as u64 + me as u64, ops::add);
                let g = broadcast_on(&halves, me, hroot);
                let h = barrier_async_on(&halves);
                let u = reduce_all_u64_on(&world, 1 << me, |x, y| x | y);
                h.wait();
                assert_eq!(g.wait(), halves.to_world(hroot));
                assert_eq!(f.wait(), i as u64 + me as u64);
                let e = e.wait();
                assert_eq!(e.len(), halves.rank_n());
                for (t, &(j, w)) in e.iter().enumerate() {
                    assert_eq!((j, w), (i, halves.to_world(t)));
                }
                assert_eq!(d.wait(), (0..halves.rank_n()).collect::<Vec<_>>());
                c.wait();
                let b = b.wait();
                if me == (root + 1) % n {
                    assert_eq!(b, Some((0..n).collect::<Vec<_>>()));
                } else {
                    assert_eq!(b, None);
                }
                assert_eq!(a.wait(), i * 1000 + root);
                assert_eq!(u, (1u64 << n) - 1);
                checks += 1;
                if i % 10 == 0 {
                    barrier_on(&halves);
                    barrier();
                }
            }
            barrier();
            (checks, rank_n())
        });
        for (r, &(checks, ranks)) in common::by_rank(n, &out) {
            assert_eq!((checks, ranks), (60, n), "rank {r} of {n}, {algorithm:?}");
        }
    }
}

#[test]
fn word_reduction_has_the_bits_of_the_message_reduction_under_every_algorithm() {
    // Neither associative nor commutative: any other order or parenthesisation differs.
    fn op(a: u64, b: u64) -> u64 {
        a.wrapping_mul(31).wrapping_add(b) ^ (b >> 3)
    }
    for (n, algorithm) in ranks_wide()
        .into_iter()
        .flat_map(|n| ALGORITHMS.map(|a| (n, a)))
    {
        let value = |r: usize, k: u64| mix(r as u64 * 1000 + k);
        let out = run(n, 2, RpcTable::new(), move || {
            set_algorithm(algorithm);
            (0..50u64)
                .map(|k| {
                    stagger(k);
                    let words = reduce_all_u64(value(rank_me(), k), op);
                    let messages = reduce_all(value(rank_me(), k), op).wait();
                    (words, messages)
                })
                .collect::<Vec<_>>()
        });
        for (r, results) in common::by_rank(n, &out) {
            for (k, &(words, messages)) in results.iter().enumerate() {
                let values: Vec<u64> = (0..n).map(|w| value(w, k as u64)).collect();
                let want = tree_fold(&values, 0, &op);
                let what = format!("{n} ranks, rank {r}, reduction {k}, {algorithm:?}");
                assert_eq!(words, want, "{what}: reduce_all_u64");
                assert_eq!(messages, want, "{what}: reduce_all");
            }
        }
    }
}

/// Spins `n` threads (a competing load on the machine's cores) until the guard is dropped.
struct Load(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Vec<std::thread::JoinHandle<()>>,
);

impl Load {
    fn start(n: usize) -> Load {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Load(stop, threads)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

/// HPGMG's pattern of collectives, thousands of times on 8 and 16 ranks beside two spinning
/// threads: a max-norm (`reduce_all` of an `f64`), a dot product (`allgather` of each rank's
/// partial sums, summed in one order everywhere) and a convergence test on their results, as
/// in a V-cycle's loop. Every rank must see the same bits every time, and a rank that left the
/// loop early would leave the others waiting in a reduction (the job's watchdog reports that).
#[test]
fn hpgmg_reductions_thousands_of_times_under_competing_load() {
    for n in ranks_in(&[8, 16]) {
        let rounds = if n > 8 { 750 } else { 1500 };
        let _load = Load::start(2);
        let out = run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            let mut seen = 0u64;
            let mut i = 0u64;
            loop {
                let mine = (mix(i ^ (me as u64) << 20) % 1000) as f64 / 7.0;
                let norm = reduce_all(mine, ops::max).wait();
                let want = (0..n)
                    .map(|r| (mix(i ^ (r as u64) << 20) % 1000) as f64 / 7.0)
                    .fold(f64::MIN, f64::max);
                assert_eq!(norm.to_bits(), want.to_bits(), "norm {i} on rank {me}");
                let parts = allgather((me, mine * 0.5)).wait();
                let dot: f64 = parts.iter().map(|&(_, p)| p).sum();
                assert!(parts.iter().enumerate().all(|(r, &(w, _))| r == w));
                seen = seen
                    .wrapping_mul(31)
                    .wrapping_add(norm.to_bits() ^ dot.to_bits());
                i += 1;
                // The loop's end is decided from the reductions' results, as HPGMG's is.
                if i as usize >= rounds && dot >= 0.0 {
                    break;
                }
            }
            (i, seen)
        });
        let (rounds0, seen0) = out[0];
        for (r, &(rounds, seen)) in common::by_rank(n, &out) {
            assert_eq!((rounds, seen), (rounds0, seen0), "rank {r} of {n}");
        }
    }
}
