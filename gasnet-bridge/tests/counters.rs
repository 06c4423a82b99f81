//! The NIC-like counters: the IWC counts exactly the writes a rank received (puts, long AMs,
//! writing atomics, rpcs counted by their handler; not gets, loads or failed CAS), acks for
//! one target carry IWC values 1..=N without gap or repeat and increasing per initiator, and
//! every ack carries the EC its target set for the phase. The same with the counting switch
//! (`WriteCounting::Switched`), every rank switching on before the first write.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{pattern, within};
use gasnet_bridge::{AtomicOp, HandlerTable, Payload, WriteAck, WriteCounting};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The epoch rank `rank` sets in phase `phase`; the last phase rewinds to a small value.
fn epoch_of(phase: usize, rank: usize, phases: usize) -> u64 {
    if phase + 1 == phases {
        3 + rank as u64
    } else {
        1000 * (phase as u64 + 1) + 10 * rank as u64 + 1
    }
}

const REGION: usize = 1 << 14; // each initiator writes only its own region of a target
const WORDS: usize = 8 * 64; // then one private atomic word per initiator

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Put,
    PutNb,
    Long,
    Atomic,
    Rpc,
}

fn run(n: usize, phases: usize, ops: usize, seed: u64) {
    run_in(WriteCounting::On, n, phases, ops, seed)
}

fn run_in(mode: WriteCounting, n: usize, phases: usize, ops: usize, seed: u64) {
    let expected: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    // Acks of long AMs as seen by the target's handler: (target, source, ack).
    let long_seen: Arc<Mutex<Vec<(usize, usize, WriteAck)>>> = Arc::default();
    let rpc_replies: Arc<Vec<Mutex<Option<WriteAck>>>> =
        Arc::new((0..n).map(|_| Mutex::new(None)).collect());
    let mut t = HandlerTable::new();
    let ls = long_seen.clone();
    let on_long = t.register("long", move |tok| {
        let Payload::Long { offset, len, ack } = tok.payload() else {
            panic!("not a long AM")
        };
        assert_eq!(offset as u64, tok.args()[0]);
        assert_eq!(len as u64, tok.args()[1]);
        let me = tok.endpoint().rank();
        ls.lock().unwrap().push((me, tok.source(), ack));
    });
    let rr = rpc_replies.clone();
    let rpc_reply = t.register("rpc_reply", move |tok| {
        let a = tok.args();
        *rr[tok.endpoint().rank()].lock().unwrap() = Some(WriteAck {
            ec: a[0],
            iwc: a[1],
        });
    });
    let rpc = t.register("rpc", move |tok| {
        // A message that modifies memory: the handler writes, and counts it as a write.
        let ack = tok.count_as_write();
        assert_eq!(ack.ec, tok.endpoint().epoch());
        tok.reply_short(rpc_reply, &[ack.ec, ack.iwc]).unwrap();
    });

    let exp = expected.clone();
    let rr = rpc_replies.clone();
    let results = within(Duration::from_secs(30), "counters", || {
        let job = common::config(n, n * REGION + WORDS).write_counting(mode);
        gasnet_bridge::launch(&job, t, |ep| {
            let me = ep.rank();
            // (Switched would run as On on a kernel without membarrier; this one has it.)
            assert_eq!(ep.write_counting(), mode);
            ep.count_incoming_writes();
            assert!(ep.counts_incoming_writes());
            ep.barrier().unwrap();
            let mut rng = SmallRng::seed_from_u64(seed + me as u64);
            let mut acks: Vec<(usize, Kind, WriteAck)> = Vec::new();
            let mut my_word = vec![0u64; n]; // value of my private word at each target
            let word_at = n * REGION + 8 * me;
            for phase in 0..phases {
                let ec = epoch_of(phase, me, phases);
                if phase == 1 {
                    let prev = ep.epoch();
                    assert_eq!(ep.advance_epoch(ec - prev), ec);
                } else {
                    ep.set_epoch(ec);
                }
                assert_eq!(ep.epoch(), ec);
                ep.barrier().unwrap();
                let mut wrote = vec![0u64; n];
                for _ in 0..ops {
                    let target = rng.random_range(0..n);
                    let len = rng.random_range(0..=256usize);
                    let off = me * REGION + rng.random_range(0..=REGION - len);
                    let data = pattern(rng.random(), len);
                    let ack = match rng.random_range(0..10) {
                        0 => Some((Kind::Put, ep.put(target, off, &data).unwrap())),
                        1 => Some((Kind::PutNb, ep.put_nb(target, off, &data).unwrap().wait(ep))),
                        2 => {
                            let h = ep
                                .am_request_long(
                                    target,
                                    on_long,
                                    &[off as u64, len as u64],
                                    &data,
                                    off,
                                )
                                .unwrap();
                            let test = h.test();
                            let ack = h.wait(ep);
                            assert_eq!(test, Some(ack));
                            Some((Kind::Long, ack))
                        }
                        3 => {
                            let (op, new) = match rng.random_range(0..5) {
                                0 => (AtomicOp::FetchAdd(3), my_word[target] + 3),
                                1 => (AtomicOp::Store(9), 9),
                                2 => (AtomicOp::Swap(11), 11),
                                3 => (AtomicOp::Max(my_word[target] + 1), my_word[target] + 1),
                                _ => {
                                    let cur = my_word[target];
                                    (
                                        AtomicOp::CompareExchange {
                                            current: cur,
                                            new: cur + 2,
                                        },
                                        cur + 2,
                                    )
                                }
                            };
                            let r = ep.atomic(target, word_at, op).unwrap();
                            assert_eq!(r.previous, my_word[target]);
                            my_word[target] = new;
                            Some((Kind::Atomic, r.ack.expect("a writing atomic has an ack")))
                        }
                        4 => {
                            *rr[me].lock().unwrap() = None;
                            ep.am_request_short(target, rpc, &[]).unwrap();
                            ep.wait_until(|| rr[me].lock().unwrap().is_some());
                            Some((Kind::Rpc, rr[me].lock().unwrap().unwrap()))
                        }
                        5 | 6 => {
                            let mut back = vec![0; len];
                            if rng.random() {
                                ep.get(target, off, &mut back).unwrap();
                            } else {
                                ep.get_nb(target, off, &mut back).unwrap().wait(ep);
                            }
                            None
                        }
                        7 => {
                            let r = ep.atomic(target, word_at, AtomicOp::Load).unwrap();
                            assert_eq!((r.previous, r.ack), (my_word[target], None));
                            None
                        }
                        _ => {
                            let cur = my_word[target];
                            let op = AtomicOp::CompareExchange {
                                current: cur + 1,
                                new: 0,
                            };
                            let r = ep.atomic(target, word_at, op).unwrap();
                            assert_eq!((r.previous, r.ack), (cur, None), "failed CAS");
                            None
                        }
                    };
                    if let Some((kind, ack)) = ack {
                        assert_eq!(
                            ack.ec,
                            epoch_of(phase, target, phases),
                            "{kind:?} to {target} in phase {phase}"
                        );
                        acks.push((target, kind, ack));
                        wrote[target] += 1;
                    }
                }
                for (target, w) in wrote.iter().enumerate() {
                    exp[target].fetch_add(*w, Ordering::Relaxed);
                }
                ep.barrier().unwrap();
                assert_eq!(
                    ep.incoming_writes(),
                    exp[me].load(Ordering::Relaxed),
                    "rank {me}: IWC after phase {phase}"
                );
                assert_eq!(ep.epoch(), ec, "nobody else moves my epoch");
                ep.barrier().unwrap(); // nobody adds to `expected` before all have checked
            }
            // Reads, loads and failed CAS after the last count change nothing.
            let before = ep.incoming_writes();
            ep.barrier().unwrap();
            let peer = (me + 1) % n;
            let mut b = [0u8; 64];
            ep.get(peer, 0, &mut b).unwrap();
            ep.atomic(peer, word_at, AtomicOp::Load).unwrap();
            let cur = my_word[peer];
            ep.atomic(
                peer,
                word_at,
                AtomicOp::CompareExchange {
                    current: cur ^ 1,
                    new: 5,
                },
            )
            .unwrap();
            ep.barrier().unwrap();
            assert_eq!(ep.incoming_writes(), before);
            (acks, ep.incoming_writes())
        })
        .unwrap()
    });

    for target in 0..n {
        let final_iwc = results[target].1;
        assert_eq!(final_iwc, expected[target].load(Ordering::Relaxed));
        let mut iwcs: Vec<u64> = Vec::new();
        for (init, (acks, _)) in results.iter().enumerate() {
            let mine: Vec<u64> = acks
                .iter()
                .filter(|(t, _, _)| *t == target)
                .map(|(_, _, a)| a.iwc)
                .collect();
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "acks of rank {init} for target {target} are not increasing"
            );
            iwcs.extend(mine);
        }
        iwcs.sort_unstable();
        assert_eq!(
            iwcs,
            (1..=final_iwc).collect::<Vec<_>>(),
            "IWC values at {target}: gaps or repeats"
        );
    }
    // Every kind of write was exercised, and long-AM acks at the handlers match the senders'.
    let mut kinds: Vec<Kind> = results
        .iter()
        .flat_map(|(a, _)| a.iter().map(|x| x.1))
        .collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(kinds.len(), 5, "{kinds:?}");
    let mut sent: Vec<(usize, usize, WriteAck)> = results
        .iter()
        .enumerate()
        .flat_map(|(src, (a, _))| {
            a.iter()
                .filter(|x| x.1 == Kind::Long)
                .map(move |&(t, _, ack)| (t, src, ack))
        })
        .collect();
    let mut seen = long_seen.lock().unwrap().clone();
    sent.sort();
    seen.sort();
    assert_eq!(sent, seen, "Payload::Long acks equal the senders' acks");
}

#[test]
fn counters_3_ranks() {
    run(3, 4, 400, 11);
}

#[test]
fn counters_8_ranks() {
    run(8, 4, 200, 22);
}

#[test]
fn counters_16_ranks() {
    run(16, 3, 100, 33);
}

#[test]
fn counters_switched_on_8_ranks() {
    run_in(WriteCounting::Switched, 8, 4, 200, 44);
}
