//! Remote atomics on world and on split teams: exact fetch_add totals, distinct tickets,
//! compare_exchange, signed and unsigned min/max, f64 add, bitwise ops (after UPC++'s
//! atomics tests).

mod common;

use common::{allgather, ranks, ranks_wide, run};
use pgas::{
    AtomicDomain, GlobalPtr, RpcTable, Team, barrier, barrier_on, broadcast_on, delete_, new_,
    rank_me, reduce_all_on, world,
};

/// A word allocated by team rank 0 and known to every member.
fn team_word<T: pgas::AtomicValue + serde::Serialize + serde::de::DeserializeOwned>(
    team: &Team,
    init: T,
) -> GlobalPtr<T> {
    let p = if team.rank_me() == 0 {
        new_(init).unwrap()
    } else {
        GlobalPtr::null()
    };
    broadcast_on(team, p, 0).wait()
}

fn free_word<T: 'static>(team: &Team, p: GlobalPtr<T>) {
    barrier_on(team);
    if team.rank_me() == 0 {
        delete_(p).unwrap();
    }
}

const K: u64 = 200;

/// Exercises every operation among the members of `team`.
fn exercise(team: &Team) {
    let n = team.rank_n() as u64;
    let me = team.rank_me() as u64;
    let wr = rank_me() as u64;
    let u = AtomicDomain::<u64>::new();
    let i = AtomicDomain::<i64>::new();
    let f = AtomicDomain::<f64>::new();

    // fetch_add: exact total and distinct tickets.
    let counter = team_word(team, 0u64);
    let tickets: Vec<u64> = (0..K).map(|_| u.fetch_add(counter, 1).wait()).collect();
    let sum_p = team_word(team, 0u64);
    for _ in 0..K {
        u.add(sum_p, wr + 1).wait();
    }
    barrier_on(team);
    assert_eq!(u.load(counter).wait(), K * n);
    let members_sum: u64 = team.members().iter().map(|&w| w as u64 + 1).sum();
    assert_eq!(u.load(sum_p).wait(), K * members_sum);
    let mut all = reduce_all_on(team, tickets, common::concat).wait();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..K * n).collect::<Vec<_>>(),
        "every ticket handed out once"
    );
    barrier_on(team);
    let before = u.fetch_sub(counter, 1).wait();
    assert!(before > K * n - n && before <= K * n, "{before}");
    barrier_on(team);
    assert_eq!(u.load(counter).wait(), K * n - n);
    barrier_on(team);

    // compare_exchange: exactly one winner.
    let cas = team_word(team, 0u64);
    let prev = u.compare_exchange(cas, 0, wr + 1).wait();
    let won = prev == 0;
    let winners = reduce_all_on(team, won as u64, pgas::ops::add).wait();
    assert_eq!(winners, 1);
    barrier_on(team);
    let winner_value = u.load(cas).wait();
    assert!(team.members().iter().any(|&w| w as u64 + 1 == winner_value));
    assert_eq!(
        u.compare_exchange(cas, u64::MAX, 5).wait(),
        winner_value,
        "a failed exchange returns the value and writes nothing"
    );
    assert_eq!(u.load(cas).wait(), winner_value);

    // Unsigned min/max compare as unsigned: 1 << 63 is the largest here.
    let umax = team_word(team, 0u64);
    let umin = team_word(team, u64::MAX);
    u.fetch_max(umax, wr * 7 + 3).wait();
    u.fetch_min(umin, wr * 7 + 3).wait();
    if me == n - 1 {
        u.fetch_max(umax, 1 << 63).wait();
    }
    barrier_on(team);
    let wmin = *team.members().iter().min().unwrap() as u64;
    let wmax = *team.members().iter().max().unwrap() as u64;
    assert_eq!(u.load(umax).wait(), 1 << 63);
    assert_eq!(u.load(umin).wait(), wmin * 7 + 3);

    // Signed min/max compare as signed: -1 < 1.
    let imax = team_word(team, i64::MIN);
    let imin = team_word(team, i64::MAX);
    i.fetch_max(imax, wr as i64 - 3).wait();
    i.fetch_min(imin, -(wr as i64) * 5 - 1).wait();
    i.fetch_min(imin, 1).wait();
    barrier_on(team);
    assert_eq!(i.load(imax).wait(), wmax as i64 - 3);
    assert_eq!(i.load(imin).wait(), -(wmax as i64) * 5 - 1);
    let ineg = team_word(team, -1i64);
    assert!(i.fetch_max(ineg, 1).wait() <= 1);
    barrier_on(team);
    assert_eq!(i.load(ineg).wait(), 1);
    barrier_on(team);
    i.fetch_add(ineg, -10).wait();
    barrier_on(team);
    assert_eq!(i.load(ineg).wait(), 1 - 10 * n as i64);

    // f64 add (halves add exactly), min and max.
    let fsum = team_word(team, 0.0f64);
    for _ in 0..50 {
        f.add(fsum, 0.5 * (wr + 1) as f64).wait();
    }
    let fmin = team_word(team, f64::INFINITY);
    f.fetch_min(fmin, -(wr as f64) - 0.25).wait();
    barrier_on(team);
    assert_eq!(f.load(fsum).wait(), 25.0 * members_sum as f64);
    assert_eq!(f.load(fmin).wait(), -(wmax as f64) - 0.25);
    barrier_on(team);
    if me == 0 {
        f.store(fsum, 2.5).wait();
        assert_eq!(f.exchange(fsum, 3.5).wait(), 2.5);
        assert_eq!(f.fetch_max(fsum, 1.0).wait(), 3.5);
        assert_eq!(f.load(fsum).wait(), 3.5);
    }
    barrier_on(team);

    // Bitwise: or sets one bit per member, xor twice cancels, and clears them.
    let bits = team_word(team, 0u64);
    let bit = 1u64 << (wr % 64);
    u.fetch_or(bits, bit).wait();
    u.fetch_xor(bits, 1 << 63).wait();
    u.fetch_xor(bits, 1 << 63).wait();
    barrier_on(team);
    let mask: u64 = team
        .members()
        .iter()
        .map(|&w| 1u64 << (w % 64))
        .fold(0, |a, b| a | b);
    assert_eq!(u.load(bits).wait(), mask);
    barrier_on(team);
    let before = u.fetch_and(bits, !bit).wait();
    assert_ne!(before & bit, 0);
    barrier_on(team);
    assert_eq!(u.load(bits).wait(), 0);
    barrier_on(team);
    // exchange: the previous values and the final one form one chain from 0 through
    // every member's value.
    let prev = u.exchange(bits, wr + 1).wait();
    let mut chain = reduce_all_on(team, vec![prev], common::concat).wait();
    barrier_on(team);
    chain.push(u.load(bits).wait());
    chain.sort_unstable();
    let mut expect: Vec<u64> = team.members().iter().map(|&w| w as u64 + 1).collect();
    expect.push(0);
    expect.sort_unstable();
    assert_eq!(chain, expect);
    barrier_on(team);

    for p in [counter, sum_p, cas, umax, umin, bits] {
        free_word(team, p);
    }
    for p in [imax, imin, ineg] {
        free_word(team, p);
    }
    for p in [fsum, fmin] {
        free_word(team, p);
    }
}

#[test]
fn atomics_on_world() {
    for n in ranks_wide() {
        run(n, 4, RpcTable::new(), || {
            exercise(&world());
            barrier();
        });
    }
}

#[test]
fn atomics_on_split_teams() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            let odd_even = world().split((me % 2) as u64, me as u64);
            exercise(&odd_even);
            let pairs = world().split((me / 2) as u64, (n - me) as u64);
            exercise(&pairs);
            // Teams run their atomics concurrently and independently: totals per team.
            let u = AtomicDomain::<u64>::new();
            let c = team_word(&odd_even, 0u64);
            for _ in 0..100 {
                u.fetch_add(c, 1).wait();
            }
            barrier();
            assert_eq!(u.load(c).wait(), 100 * odd_even.rank_n() as u64);
            let seen = allgather(u.load(c).wait());
            for (r, v) in seen.iter().enumerate() {
                let size = (0..n).filter(|w| w % 2 == r % 2).count() as u64;
                assert_eq!(*v, 100 * size);
            }
            free_word(&odd_even, c);
            barrier();
        });
    }
}
