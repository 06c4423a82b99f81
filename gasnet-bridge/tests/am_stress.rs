//! Active messages: round trips of every category, floods checked message by message, the
//! reply rules, argument and payload limits, and delivery of messages still in flight when
//! their sender's body returns.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{pattern, within};
use gasnet_bridge::{HandlerTable, MAX_MEDIUM, Payload, WriteAck};

/// The value a short request's handler sends back: depends on the args and the handler's rank.
fn short_answer(x: u64, handler_rank: usize) -> u64 {
    x.wrapping_mul(3)
        .wrapping_add(handler_rank as u64 * 1_000_003)
}

/// Per-rank mailbox of a round-trip test: replies counted and the last reply's content.
#[derive(Default)]
struct Mailbox {
    replies: AtomicU64,
    last: Mutex<Vec<u64>>,
}

/// Where the long request of (source, seq) lands in the target's segment.
fn long_offset(source: usize, seq: u64) -> usize {
    (source * 64 + (seq as usize % 64)) * 1024
}

#[test]
fn round_trips_of_every_category() {
    let n = 4;
    let rounds = 60u64;
    let boxes: Arc<Vec<Mailbox>> = Arc::new((0..n).map(|_| Mailbox::default()).collect());
    // (requester, seq) -> ack returned by reply_long at the replier.
    let reply_long_acks: Arc<Mutex<HashMap<(usize, u64), WriteAck>>> = Arc::default();
    // (requester, seq) -> ack seen in the reply handler's Payload::Long.
    let reply_long_seen: Arc<Mutex<HashMap<(usize, u64), WriteAck>>> = Arc::default();

    let mut t = HandlerTable::new();
    let record = {
        let boxes = boxes.clone();
        move |rank: usize, values: Vec<u64>| {
            *boxes[rank].last.lock().unwrap() = values;
            boxes[rank].replies.fetch_add(1, Ordering::Release);
        }
    };
    let rec = record.clone();
    let reply_plain = t.register("reply_plain", move |tok| {
        assert!(tok.is_reply());
        let mut v = tok.args().to_vec();
        if let Payload::Medium(bytes) = tok.payload() {
            v.push(bytes.len() as u64);
            v.extend(bytes.iter().take(8).map(|&b| b as u64));
            // A medium reply is the request's payload reversed.
            let want: Vec<u8> = pattern(v[0], bytes.len()).into_iter().rev().collect();
            assert_eq!(bytes, &want[..], "medium reply payload");
        }
        rec(tok.endpoint().rank(), v);
    });
    let req_short = t.register("req_short", move |tok| {
        assert!(!tok.is_reply());
        let a = tok.args();
        assert_eq!(a.len(), 3);
        assert_eq!(a[2], tok.source() as u64, "arg 2 carries the sender");
        let ans = short_answer(a[1], tok.endpoint().rank());
        tok.reply_short(reply_plain, &[a[0], ans]).unwrap();
    });
    let req_medium = t.register("req_medium", move |tok| {
        let a = tok.args();
        let Payload::Medium(bytes) = tok.payload() else {
            panic!("medium request without a medium payload")
        };
        assert_eq!(bytes.len() as u64, a[1]);
        assert_eq!(
            bytes,
            &pattern(a[0], bytes.len())[..],
            "medium request payload"
        );
        let back: Vec<u8> = bytes.iter().rev().copied().collect();
        tok.reply_medium(reply_plain, &[a[0]], &back).unwrap();
    });
    let rl_seen = reply_long_seen.clone();
    let rec = record.clone();
    let reply_long_done = t.register("reply_long_done", move |tok| {
        let me = tok.endpoint().rank();
        let Payload::Long { offset, len, ack } = tok.payload() else {
            panic!("long reply without a long payload")
        };
        let seq = tok.args()[0];
        let mut landed = vec![0; len];
        tok.endpoint().get(me, offset, &mut landed).unwrap();
        assert_eq!(
            landed,
            pattern(seq ^ 0xFFFF, len),
            "long reply bytes in my segment"
        );
        rl_seen.lock().unwrap().insert((me, seq), ack);
        rec(me, vec![seq, offset as u64, len as u64]);
    });
    let rl_acks = reply_long_acks.clone();
    let req_long = t.register("req_long", move |tok| {
        let me = tok.endpoint().rank();
        let a = tok.args().to_vec();
        let (seq, reply_offset) = (a[0], a[1] as usize);
        let Payload::Long { offset, len, ack } = tok.payload() else {
            panic!("long request without a long payload")
        };
        assert_eq!(offset, long_offset(tok.source(), seq));
        let mut landed = vec![0; len];
        tok.endpoint().get(me, offset, &mut landed).unwrap();
        assert_eq!(
            landed,
            pattern(seq, len),
            "long request bytes in the segment"
        );
        if seq % 2 == 0 {
            // Report the ack this handler saw, to be compared with the sender's.
            tok.reply_short(reply_plain, &[seq, ack.ec, ack.iwc])
                .unwrap();
        } else {
            let data = pattern(seq ^ 0xFFFF, len);
            let got = tok
                .reply_long(reply_long_done, &[seq], &data, reply_offset)
                .unwrap();
            rl_acks.lock().unwrap().insert((tok.source(), seq), got);
        }
    });

    let b = boxes.clone();
    let checked = within(Duration::from_secs(30), "round trips", || {
        gasnet_bridge::launch(&common::config(n, 1 << 20), t, |ep| {
            let me = ep.rank();
            ep.set_epoch(100 + me as u64);
            ep.barrier().unwrap();
            let mine = &b[me];
            let mut expected = 0;
            let mut checked = 0;
            for peer in (0..n).filter(|&p| p != me) {
                for seq in 0..rounds {
                    let key = (me as u64) << 40 | (peer as u64) << 20 | seq;
                    let kind = seq % 3;
                    let mut long_ack = None;
                    match kind {
                        0 => ep.am_request_short(peer, req_short, &[key, seq * 7, me as u64]),
                        1 => {
                            let len = [0, 1, 100, 4096, MAX_MEDIUM][(seq / 3) as usize % 5];
                            ep.am_request_medium(
                                peer,
                                req_medium,
                                &[key, len as u64],
                                &pattern(key, len),
                            )
                        }
                        _ => {
                            let len = 1 + (seq as usize * 37) % 1024;
                            let off = long_offset(me, key);
                            let reply_off = 512 << 10 | (peer * 1024);
                            let h = ep
                                .am_request_long(
                                    peer,
                                    req_long,
                                    &[key, reply_off as u64],
                                    &pattern(key, len),
                                    off,
                                )
                                .unwrap();
                            long_ack = Some(h.wait(ep));
                            Ok(())
                        }
                    }
                    .unwrap();
                    expected += 1;
                    ep.wait_until(|| mine.replies.load(Ordering::Acquire) == expected);
                    let last = mine.last.lock().unwrap().clone();
                    assert_eq!(last[0], key, "reply to the request just sent");
                    match kind {
                        0 => assert_eq!(last[1], short_answer(seq * 7, peer)),
                        1 => {
                            let len = [0, 1, 100, 4096, MAX_MEDIUM][(seq / 3) as usize % 5];
                            assert_eq!(last[1], len as u64);
                        }
                        _ => {
                            let ack = long_ack.unwrap();
                            assert_eq!(ack.ec, 100 + peer as u64, "ack carries the target's EC");
                            if key.is_multiple_of(2) {
                                assert_eq!(&last[1..], &[ack.ec, ack.iwc], "handler saw my ack");
                            }
                        }
                    }
                    checked += 1;
                }
            }
            ep.barrier().unwrap();
            checked
        })
        .unwrap()
    });
    assert_eq!(checked, vec![rounds * (n as u64 - 1); n]);
    let sent = reply_long_acks.lock().unwrap().clone();
    let seen = reply_long_seen.lock().unwrap().clone();
    assert!(!sent.is_empty());
    assert_eq!(
        sent, seen,
        "reply_long acks equal the Payload::Long acks at the requester"
    );
    for ((requester, _), ack) in &sent {
        assert_eq!(ack.ec, 100 + *requester as u64);
    }
}

/// Every rank floods every other rank; each message's arguments and payload are checked in
/// the handler, duplicates and losses are caught by a per-source bitmap.
fn flood(n: usize, per_pair: usize) {
    // seen[target][source][seq]
    let seen: Arc<Vec<Mutex<Vec<Vec<bool>>>>> = Arc::new(
        (0..n)
            .map(|_| Mutex::new(vec![vec![false; per_pair]; n]))
            .collect(),
    );
    let received: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let mut t = HandlerTable::new();
    let (s2, r2) = (seen.clone(), received.clone());
    let h = t.register("flood", move |tok| {
        let me = tok.endpoint().rank();
        let a = tok.args();
        let (source, seq, len, key) = (a[0] as usize, a[1] as usize, a[2] as usize, a[3]);
        assert_eq!(source, tok.source(), "arg 0 names the sender");
        assert_eq!(a[4], me as u64, "arg 4 names the target");
        assert_eq!(key, (source as u64) << 48 | (me as u64) << 32 | seq as u64);
        assert_eq!(a.len(), 5 + seq % 4, "argument count");
        for (i, &x) in a[5..].iter().enumerate() {
            assert_eq!(x, key.rotate_left(i as u32 + 1), "extra argument {i}");
        }
        match tok.payload() {
            Payload::None => assert_eq!(len, usize::MAX, "short message"),
            Payload::Medium(bytes) => {
                assert_eq!(bytes.len(), len);
                assert!(bytes == &pattern(key, len)[..], "payload of {key:#x}");
            }
            Payload::Long { .. } => panic!("no long messages in the flood"),
        }
        let mut s = s2[me].lock().unwrap();
        assert!(
            !s[source][seq],
            "message {seq} from {source} delivered twice"
        );
        s[source][seq] = true;
        r2[me].fetch_add(1, Ordering::Release);
    });
    let r = received.clone();
    let counts = within(Duration::from_secs(60), "flood", || {
        gasnet_bridge::launch(&common::config(n, 1 << 16), t, |ep| {
            let me = ep.rank();
            for seq in 0..per_pair {
                for k in 1..n {
                    let peer = (me + k) % n;
                    let key = (me as u64) << 48 | (peer as u64) << 32 | seq as u64;
                    let mut args = vec![me as u64, seq as u64, 0, key, peer as u64];
                    args.extend((0..seq % 4).map(|i| key.rotate_left(i as u32 + 1)));
                    if seq % 3 == 0 {
                        args[2] = u64::MAX;
                        ep.am_request_short(peer, h, &args).unwrap();
                    } else {
                        let len = if seq % 211 == 1 {
                            MAX_MEDIUM
                        } else {
                            (seq * 13) % 300
                        };
                        args[2] = len as u64;
                        ep.am_request_medium(peer, h, &args, &pattern(key, len))
                            .unwrap();
                    }
                }
                if seq % 16 == 0 {
                    ep.poll();
                }
            }
            let want = (per_pair * (n - 1)) as u64;
            ep.wait_until(|| r[me].load(Ordering::Acquire) >= want);
            ep.barrier().unwrap();
            r[me].load(Ordering::Acquire)
        })
        .unwrap()
    });
    assert_eq!(
        counts,
        vec![(per_pair * (n - 1)) as u64; n],
        "exact count per target"
    );
    for (target, s) in seen.iter().enumerate() {
        let s = s.lock().unwrap();
        for (source, bits) in s.iter().enumerate() {
            let got = bits.iter().filter(|&&b| b).count();
            let want = if source == target { 0 } else { per_pair };
            assert_eq!(got, want, "messages from {source} at {target}");
        }
    }
}

#[test]
fn flood_2_ranks() {
    flood(2, 5000);
}

#[test]
fn flood_4_ranks() {
    flood(4, 3000);
}

#[test]
fn flood_8_ranks() {
    flood(8, 2000);
}

#[test]
fn flood_16_ranks() {
    flood(16, 1000);
}

/// Requests whose replies (and forwarded requests) are still in flight when every body has
/// returned must still run: launch serves AMs until the job is quiet.
#[test]
fn messages_in_flight_at_the_end_are_delivered() {
    let n = 4;
    let per_peer = 300u64;
    let hops = 5u64;
    let replies = Arc::new(AtomicU64::new(0));
    let forwarded = Arc::new(AtomicU64::new(0));
    let mut t = HandlerTable::new();
    let r = replies.clone();
    let reply = t.register("reply", move |tok| {
        assert_eq!(tok.args(), &[tok.endpoint().rank() as u64 * 7]);
        r.fetch_add(1, Ordering::Relaxed);
    });
    let request = t.register("request", move |tok| {
        tok.reply_short(reply, &[tok.source() as u64 * 7]).unwrap();
    });
    // A request that sends a new request to the next rank until its hop count runs out; its
    // own id reaches it through a slot filled after registration.
    let chain_slot: Arc<Mutex<Option<gasnet_bridge::HandlerId>>> = Arc::default();
    let slot = chain_slot.clone();
    let fwd = forwarded.clone();
    let chain = t.register("chain", move |tok| {
        fwd.fetch_add(1, Ordering::Relaxed);
        let left = tok.args()[0];
        if left > 0 {
            let ep = tok.endpoint();
            let next = (ep.rank() + 1) % ep.ranks();
            let id = slot.lock().unwrap().expect("chain id set");
            ep.am_request_short(next, id, &[left - 1]).unwrap();
        }
    });
    *chain_slot.lock().unwrap() = Some(chain);
    within(Duration::from_secs(20), "in-flight delivery", || {
        gasnet_bridge::launch(&common::config(n, 1 << 16), t, |ep| {
            for k in 1..n {
                let peer = (ep.rank() + k) % n;
                for _ in 0..per_peer {
                    ep.am_request_short(peer, request, &[]).unwrap();
                }
                ep.am_request_short(peer, chain, &[hops]).unwrap();
            }
            // Return at once: no waiting for replies.
        })
        .unwrap()
    });
    assert_eq!(
        replies.load(Ordering::Relaxed),
        n as u64 * (n as u64 - 1) * per_peer
    );
    assert_eq!(
        forwarded.load(Ordering::Relaxed),
        n as u64 * (n as u64 - 1) * (hops + 1),
        "every hop of every chain ran"
    );
}
