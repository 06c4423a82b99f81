//! Teams and collectives: split by rank % 2 and by rank / 2 with reversed keys, barrier_on,
//! broadcast from every root, reduce_one / reduce_all with built-in and user operators,
//! overlapping asynchronous collectives, and the local team with `local()` (after UPC++'s
//! team and collectives tests).

mod common;

use common::{allgather, concat, expected_nodes, ranks, ranks_wide, run};
use pgas::{
    AtomicDomain, GlobalPtr, LaunchConfig, PgasError, RpcTable, Team, barrier, barrier_async_on,
    barrier_on, broadcast_on, delete_, local_team, new_, ops, rank_me, rank_n, reduce_all_on,
    reduce_one_on, rget, world,
};

/// Checks numbering, barrier, broadcast and reductions on `team`, whose members in team
/// order are `expect`.
fn check_team(team: &Team, expect: &[usize]) {
    let me = rank_me();
    assert_eq!(team.members(), expect);
    assert_eq!(team.rank_n(), expect.len());
    assert_eq!(team.to_world(team.rank_me()), me);
    for (tr, &w) in expect.iter().enumerate() {
        assert_eq!(team.to_world(tr), w);
        assert_eq!(team.from_world(w), Some(tr));
    }
    for w in (0..rank_n()).filter(|w| !expect.contains(w)) {
        assert_eq!(team.from_world(w), None);
    }
    let n = team.rank_n();

    // barrier_on: arrivals counted on a word of team rank 0; after the k-th barrier every
    // member has arrived k times.
    let word = broadcast_on(
        team,
        if team.rank_me() == 0 {
            new_(0u64).unwrap()
        } else {
            GlobalPtr::null()
        },
        0,
    )
    .wait();
    let ad = AtomicDomain::<u64>::new();
    for k in 1..=10u64 {
        ad.add(word, 1).wait();
        barrier_on(team);
        let seen = ad.load(word).wait();
        assert!(
            seen >= k * n as u64 && seen <= (k + 1) * n as u64,
            "barrier {k}: {seen} arrivals"
        );
    }
    barrier_on(team);

    // broadcast from every root, of a value only the root knows.
    #[allow(clippy::needless_range_loop)]
    for root in 0..n {
        let v = if team.rank_me() == root {
            format!("from {} (team rank {root})", me)
        } else {
            String::from("not me")
        };
        let got = broadcast_on(team, v, root).wait();
        assert_eq!(got, format!("from {} (team rank {root})", expect[root]));
    }

    // reduce_one at every root: Some only there.
    for root in 0..n {
        let r = reduce_one_on(team, me as u64 + 1, ops::add, root).wait();
        if team.rank_me() == root {
            assert_eq!(r, Some(expect.iter().map(|&w| w as u64 + 1).sum()));
        } else {
            assert_eq!(r, None);
        }
    }
    // reduce_all with built-in ops.
    let ws: Vec<u64> = expect.iter().map(|&w| w as u64).collect();
    assert_eq!(
        reduce_all_on(team, me as u64, ops::min).wait(),
        *ws.iter().min().unwrap()
    );
    assert_eq!(
        reduce_all_on(team, me as u64, ops::max).wait(),
        *ws.iter().max().unwrap()
    );
    assert_eq!(
        reduce_all_on(team, me as u64 + 2, ops::mul).wait(),
        ws.iter().map(|w| w + 2).product::<u64>()
    );
    assert_eq!(
        reduce_all_on(team, 1u64 << me, ops::bit_or).wait(),
        ws.iter().fold(0, |a, w| a | 1 << w)
    );
    assert_eq!(
        reduce_all_on(team, me as u64 * 3, ops::bit_xor).wait(),
        ws.iter().fold(0, |a, w| a ^ (w * 3))
    );
    assert_eq!(
        reduce_all_on(team, !(1u64 << me), ops::bit_and).wait(),
        !ws.iter().fold(0, |a, w| a | 1 << w)
    );
    assert_eq!(
        reduce_all_on(team, me as f64 * 0.5, ops::add).wait(),
        ws.iter().map(|&w| w as f64 * 0.5).sum::<f64>()
    );
    // A user operator that is not commutative: concatenation shows team order.
    let s = reduce_all_on(team, format!("[{me}]"), |a: String, b: String| a + &b).wait();
    let want: String = expect.iter().map(|w| format!("[{w}]")).collect();
    assert_eq!(s, want);
    let v = reduce_all_on(team, vec![team.rank_me()], concat).wait();
    assert_eq!(v, (0..n).collect::<Vec<_>>());

    // Collectives started without waiting, completed in any order: each result belongs to
    // its own operation.
    let a = reduce_all_on(team, me as u64, ops::add);
    let b = broadcast_on(team, 1000 + me, n - 1);
    let c = barrier_async_on(team);
    let d = reduce_one_on(team, vec![me], concat, 0);
    let e = reduce_all_on(team, format!("{me},"), |a: String, b: String| a + &b);
    let d = d.wait();
    c.wait();
    assert_eq!(
        e.wait(),
        expect.iter().map(|w| format!("{w},")).collect::<String>()
    );
    assert_eq!(b.wait(), 1000 + expect[n - 1]);
    assert_eq!(a.wait(), ws.iter().sum::<u64>());
    if team.rank_me() == 0 {
        assert_eq!(d, Some(expect.to_vec()));
    }
    barrier_on(team);
    if team.rank_me() == 0 {
        delete_(word).unwrap();
    }
}

#[test]
fn world_collectives() {
    for n in ranks_wide() {
        run(n, 4, RpcTable::new(), move || {
            check_team(&world(), &(0..n).collect::<Vec<_>>());
            assert_eq!(world(), world());
            barrier();
        });
    }
}

#[test]
fn split_teams_collectives_and_order() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            // By parity, keyed by world rank.
            let parity = world().split((me % 2) as u64, me as u64);
            let same: Vec<usize> = (0..n).filter(|w| w % 2 == me % 2).collect();
            check_team(&parity, &same);
            // In pairs, keyed in reverse: team order is descending world rank.
            let pairs = world().split((me / 2) as u64, (n - me) as u64);
            let mut pair: Vec<usize> = (0..n).filter(|w| w / 2 == me / 2).collect();
            pair.reverse();
            check_team(&pairs, &pair);
            assert!(n < 2 || parity != pairs || same.len() == 1);
            // Equal keys: ordered by rank in the parent team.
            let one = world().split(0, 7);
            check_team(&one, &(0..n).collect::<Vec<_>>());
            assert_ne!(one.id(), world().id());
            // A split of a split: reversed parity team split again by (world rank / 4).
            let rev = parity.split(0, (n - me) as u64);
            let mut rev_members = same.clone();
            rev_members.reverse();
            check_team(&rev, &rev_members);
            let sub = rev.split((me / 4) as u64, me as u64);
            let sub_members: Vec<usize> =
                same.iter().copied().filter(|w| w / 4 == me / 4).collect();
            check_team(&sub, &sub_members);
            barrier();
        });
    }
}

#[test]
fn local_team_and_local_pointers() {
    for n in ranks() {
        let config = LaunchConfig::new(n)
            .segment_bytes(4 << 20)
            .ranks_per_node(2);
        common::try_launch(config, RpcTable::new(), move || {
            let me = rank_me();
            // Two ranks to a node on smp; on mpi the hosts decide (one node on one machine).
            let nodes = expected_nodes(Some(2));
            let on_one_node = |a: usize, b: usize| nodes[a] == nodes[b];
            let node_members: Vec<usize> = (0..n).filter(|&w| on_one_node(w, me)).collect();
            let lt = local_team();
            assert_eq!(lt.members(), &node_members[..]);
            check_team(&lt, &node_members);

            let mine = new_(me as u64 * 11).unwrap();
            let all = allgather(mine);
            for (w, p) in all.iter().enumerate() {
                let same_node = on_one_node(w, me);
                assert_eq!(p.is_local(), same_node, "pointer of rank {w}");
                match p.local() {
                    Ok(raw) => {
                        assert!(same_node);
                        assert!(!raw.is_null());
                        assert_eq!(p.read_local().unwrap(), w as u64 * 11);
                    }
                    Err(e) => {
                        assert!(!same_node, "local() refused a same-node pointer: {e}");
                        assert_eq!(e, PgasError::NotLocal { rank: w, me });
                        assert!(e.to_string().contains("not local"), "{e}");
                        assert!(p.read_local().is_err() && p.write_local(0).is_err());
                    }
                }
            }
            barrier();
            // The partner (rank ^ 1), when there is one on my node, writes my word directly
            // through shared memory...
            let paired = |w: usize| w ^ 1 < n && on_one_node(w, w ^ 1);
            if paired(me) {
                all[me ^ 1].write_local(1000 + me as u64).unwrap();
            }
            barrier();
            // ...and every rank, of that node or another, reads it with an rget.
            for (w, p) in all.iter().enumerate() {
                let want = if paired(w) {
                    1000 + (w ^ 1) as u64
                } else {
                    w as u64 * 11
                };
                assert_eq!(rget(*p).wait(), want, "word of rank {w}");
            }
            barrier();
            delete_(mine).unwrap();
        })
        .unwrap_or_else(|e| panic!("{n} ranks: {e}"));
    }
}
