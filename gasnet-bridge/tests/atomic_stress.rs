//! Remote atomics from many ranks on the same words: exact totals, a lock built from
//! compare-exchange, min/max in both signednesses, bit operations, and refused addresses.

mod common;

use std::time::Duration;

use common::within;
use gasnet_bridge::{AtomicOp, BridgeError, HandlerTable};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn load(ep: &gasnet_bridge::Endpoint, rank: usize, offset: usize) -> u64 {
    ep.atomic(rank, offset, AtomicOp::Load).unwrap().previous
}

#[test]
fn fetch_add_from_every_rank_is_exact() {
    for (n, per_rank) in [(2, 20_000u64), (4, 10_000), (16, 2_000)] {
        let target = n - 1;
        let previous = within(Duration::from_secs(30), "fetch_add", || {
            gasnet_bridge::launch(&common::config(n, 1 << 12), HandlerTable::new(), |ep| {
                let mut seen = Vec::with_capacity(per_rank as usize);
                for i in 0..per_rank {
                    // Alternate add and sub on a second word that must end where it started.
                    let r = ep.atomic(target, 0, AtomicOp::FetchAdd(1)).unwrap();
                    assert!(r.ack.is_some(), "fetch_add writes");
                    seen.push(r.previous);
                    let op = if i % 2 == 0 {
                        AtomicOp::FetchAdd(5)
                    } else {
                        AtomicOp::FetchSub(5)
                    };
                    ep.atomic(target, 8, op).unwrap();
                }
                ep.barrier().unwrap();
                assert_eq!(load(ep, target, 0), n as u64 * per_rank, "total");
                assert_eq!(load(ep, target, 8), 0, "adds and subs cancel");
                seen
            })
            .unwrap()
        });
        // The values returned are exactly 0..total, each once, increasing per rank.
        let mut all: Vec<u64> = previous.iter().flatten().copied().collect();
        for per in &previous {
            assert!(per.windows(2).all(|w| w[0] < w[1]), "increasing per rank");
        }
        all.sort_unstable();
        assert_eq!(
            all,
            (0..n as u64 * per_rank).collect::<Vec<_>>(),
            "{n} ranks"
        );
    }
}

#[test]
fn compare_exchange_lock_protects_a_plain_counter() {
    let n = 16;
    let rounds = 60u64;
    const LOCK: usize = 0;
    const COUNTER: usize = 64; // updated with plain get / put under the lock
    const HOLDER: usize = 128; // who holds the lock; checked inside the critical section
    let (counter, holds) = within(Duration::from_secs(30), "cas lock", || {
        let r = gasnet_bridge::launch(&common::config(n, 1 << 12), HandlerTable::new(), |ep| {
            let me = ep.rank() as u64 + 1;
            let mut failed_cas = 0u64;
            for _ in 0..rounds {
                ep.wait_until(|| {
                    let r = ep
                        .atomic(
                            0,
                            LOCK,
                            AtomicOp::CompareExchange {
                                current: 0,
                                new: me,
                            },
                        )
                        .unwrap();
                    if r.ack.is_none() {
                        assert_ne!(r.previous, 0, "a failed CAS saw a held lock");
                        failed_cas += 1;
                    }
                    r.ack.is_some()
                });
                // Critical section: nobody else may be in here.
                let h = ep.atomic(0, HOLDER, AtomicOp::Swap(me)).unwrap().previous;
                assert_eq!(h, 0, "rank {me} entered while {h} held the lock");
                let mut b = [0u8; 8];
                ep.get(0, COUNTER, &mut b).unwrap();
                let v = u64::from_ne_bytes(b) + 1;
                std::hint::spin_loop();
                ep.put(0, COUNTER, &v.to_ne_bytes()).unwrap();
                assert_eq!(
                    ep.atomic(0, HOLDER, AtomicOp::Swap(0)).unwrap().previous,
                    me
                );
                let unlock = ep.atomic(0, LOCK, AtomicOp::Swap(0)).unwrap();
                assert_eq!(unlock.previous, me, "the lock was held by me");
            }
            ep.barrier().unwrap();
            let mut b = [0u8; 8];
            ep.get(0, COUNTER, &mut b).unwrap();
            (u64::from_ne_bytes(b), failed_cas)
        })
        .unwrap();
        (r[0].0, r)
    });
    assert_eq!(counter, n as u64 * rounds, "lost updates under the lock");
    assert!(
        holds.iter().all(|&(c, _)| c == counter),
        "every rank reads the same total"
    );
}

#[test]
fn min_max_signed_and_unsigned_and_bits() {
    let n = 8;
    let per_rank = 500;
    // Slots of rank 0: umin, umax, smin, smax, or, and, xor.
    let values = |rank: usize| -> Vec<u64> {
        let mut rng = SmallRng::seed_from_u64(rank as u64 * 77 + 1);
        (0..per_rank).map(|_| rng.random::<u64>()).collect()
    };
    let finals = within(Duration::from_secs(20), "min/max", || {
        gasnet_bridge::launch(&common::config(n, 1 << 12), HandlerTable::new(), |ep| {
            if ep.rank() == 0 {
                ep.atomic(0, 0, AtomicOp::Store(u64::MAX)).unwrap();
                ep.atomic(0, 16, AtomicOp::Store(i64::MAX as u64)).unwrap();
                ep.atomic(0, 24, AtomicOp::Store(i64::MIN as u64)).unwrap();
                ep.atomic(0, 40, AtomicOp::Store(u64::MAX)).unwrap();
            }
            ep.barrier().unwrap();
            for (i, v) in values(ep.rank()).into_iter().enumerate() {
                ep.atomic(0, 0, AtomicOp::Min(v)).unwrap();
                ep.atomic(0, 8, AtomicOp::Max(v)).unwrap();
                ep.atomic(0, 16, AtomicOp::MinI64(v as i64)).unwrap();
                ep.atomic(0, 24, AtomicOp::MaxI64(v as i64)).unwrap();
                if i == 0 {
                    ep.atomic(0, 32, AtomicOp::Or(1 << ep.rank())).unwrap();
                    ep.atomic(0, 40, AtomicOp::And(!(1 << (ep.rank() * 2))))
                        .unwrap();
                }
                ep.atomic(0, 48, AtomicOp::Xor(v)).unwrap();
            }
            ep.barrier().unwrap();
            (0..7).map(|k| load(ep, 0, k * 8)).collect::<Vec<_>>()
        })
        .unwrap()
    });
    let all: Vec<u64> = (0..n).flat_map(values).collect();
    let want = vec![
        *all.iter().min().unwrap(),
        *all.iter().max().unwrap(),
        all.iter().map(|&v| v as i64).min().unwrap() as u64,
        all.iter().map(|&v| v as i64).max().unwrap() as u64,
        (1 << n) - 1,
        !(0..n).fold(0u64, |m, r| m | 1 << (r * 2)),
        all.iter().fold(0, |x, &v| x ^ v),
    ];
    // The values straddle 2^63, so signed and unsigned answers differ.
    assert_ne!(want[0], want[2]);
    assert_ne!(want[1], want[3]);
    for f in &finals {
        assert_eq!(f, &want);
    }
}

#[test]
fn refused_atomic_addresses() {
    let seg = 1 << 12;
    let errs = gasnet_bridge::launch(&common::config(2, seg), HandlerTable::new(), |ep| {
        let peer = 1 - ep.rank();
        let mut out = Vec::new();
        for off in [1, 4, 7, 12, seg - 4] {
            out.push(ep.atomic(peer, off, AtomicOp::FetchAdd(1)).unwrap_err());
        }
        out.push(ep.atomic(peer, seg, AtomicOp::Load).unwrap_err());
        out.push(ep.atomic(peer, seg - 1, AtomicOp::Store(3)).unwrap_err());
        out.push(ep.atomic(peer, usize::MAX - 3, AtomicOp::Load).unwrap_err());
        out.push(ep.atomic(2, 0, AtomicOp::Load).unwrap_err());
        // The last aligned word works; nothing refused was counted as a write.
        let ok = ep.atomic(peer, seg - 8, AtomicOp::FetchAdd(2)).unwrap();
        assert_eq!(ok.ack.unwrap().iwc, 1);
        ep.barrier().unwrap();
        assert_eq!(ep.incoming_writes(), 1);
        assert_eq!(load(ep, ep.rank(), seg - 8), 2);
        out
    })
    .unwrap();
    for (rank, e) in errs.iter().enumerate() {
        let peer = 1 - rank;
        let mis = |offset| BridgeError::Misaligned {
            rank: peer,
            offset,
            align: 8,
        };
        let out = |offset, len| BridgeError::OutOfSegment {
            rank: peer,
            offset,
            len,
            segment_len: seg,
        };
        assert_eq!(
            e,
            &vec![
                mis(1),
                mis(4),
                mis(7),
                mis(12),
                out(seg - 4, 8),
                out(seg, 8),
                out(seg - 1, 8),
                out(usize::MAX - 3, 8),
                BridgeError::NoSuchRank { rank: 2, ranks: 2 },
            ]
        );
        let text = mis(12).to_string();
        assert!(
            text.contains(&format!("rank {peer}")) && text.contains("offset 12"),
            "{text}"
        );
    }
}
