//! The rules of active messages: one reply per request, none from a reply, argument and
//! payload limits, unknown handlers and ranks; refused messages leave no trace.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{pattern, within};
use gasnet_bridge::{BridgeError, HandlerTable, MAX_ARGS, MAX_MEDIUM, Payload};

/// What a handler tried, and what came of it.
type Log = Arc<Mutex<Vec<(String, Result<(), BridgeError>)>>>;
/// (kind, arguments, payload length) of every message that ran.
type Ran = Arc<Mutex<Vec<(u8, Vec<u64>, usize)>>>;

#[test]
fn reply_rules() {
    // Results of the reply attempts, as recorded by the handlers.
    let log: Log = Arc::default();
    let replies = Arc::new(AtomicU64::new(0));
    let mut t = HandlerTable::new();
    let noop = t.register("noop", |_| {});
    let (l, r) = (log.clone(), replies.clone());
    let reply = t.register("reply", move |tok| {
        assert!(tok.is_reply());
        let mut l = l.lock().unwrap();
        l.push(("reply_short from reply".into(), tok.reply_short(noop, &[])));
        l.push((
            "reply_medium from reply".into(),
            tok.reply_medium(noop, &[], &[1]),
        ));
        l.push((
            "reply_long from reply".into(),
            tok.reply_long(noop, &[], &[1], 0).map(|_| ()),
        ));
        r.fetch_add(tok.args()[0], Ordering::Release);
    });
    let l = log.clone();
    let twice = t.register("twice", move |tok| {
        let mut l = l.lock().unwrap();
        l.push(("first reply".into(), tok.reply_short(reply, &[1])));
        l.push(("second reply".into(), tok.reply_short(reply, &[100])));
        l.push((
            "second reply medium".into(),
            tok.reply_medium(reply, &[100], &[]),
        ));
        l.push((
            "second reply long".into(),
            tok.reply_long(reply, &[100], &[], 0).map(|_| ()),
        ));
    });
    let l = log.clone();
    let refused_then_ok = t.register("refused_then_ok", move |tok| {
        let seg = tok.endpoint().segment_len();
        let mut l = l.lock().unwrap();
        l.push((
            "too large".into(),
            tok.reply_medium(reply, &[100], &vec![0; MAX_MEDIUM + 1]),
        ));
        l.push((
            "too many args".into(),
            tok.reply_short(reply, &[100; MAX_ARGS + 1]),
        ));
        l.push((
            "outside the segment".into(),
            tok.reply_long(reply, &[100], &[1, 2], seg - 1).map(|_| ()),
        ));
        // None of those was sent, so the one reply is still available.
        l.push(("after refusals".into(), tok.reply_short(reply, &[10])));
        l.push(("after the reply".into(), tok.reply_short(reply, &[100])));
    });
    let r = replies.clone();
    within(Duration::from_secs(10), "reply rules", || {
        gasnet_bridge::launch(&common::config(2, 1 << 12), t, |ep| {
            if ep.rank() == 0 {
                ep.am_request_short(1, twice, &[]).unwrap();
                ep.wait_until(|| r.load(Ordering::Acquire) == 1);
                ep.am_request_short(1, refused_then_ok, &[]).unwrap();
                ep.wait_until(|| r.load(Ordering::Acquire) == 11);
                // Let any wrongly sent extra reply arrive before counting.
                ep.am_request_short(1, twice, &[]).unwrap();
                ep.wait_until(|| r.load(Ordering::Acquire) >= 12);
            }
            ep.barrier().unwrap();
        })
        .unwrap()
    });
    assert_eq!(
        replies.load(Ordering::Relaxed),
        12,
        "exactly three replies arrived"
    );
    let log = log.lock().unwrap();
    let find = |what: &str| -> Vec<Result<(), BridgeError>> {
        log.iter()
            .filter(|(w, _)| w == what)
            .map(|(_, r)| r.clone())
            .collect()
    };
    let at_most_once = Err(BridgeError::ReplyNotAllowed(
        "a request handler may reply at most once",
    ));
    let from_reply = Err(BridgeError::ReplyNotAllowed(
        "a reply handler cannot reply; send a new request instead",
    ));
    assert_eq!(find("first reply"), vec![Ok(()), Ok(())]);
    assert_eq!(find("second reply"), vec![at_most_once.clone(); 2]);
    assert_eq!(find("second reply medium"), vec![at_most_once.clone(); 2]);
    assert_eq!(find("second reply long"), vec![at_most_once.clone(); 2]);
    assert_eq!(find("reply_short from reply"), vec![from_reply.clone(); 3]);
    assert_eq!(find("reply_medium from reply"), vec![from_reply.clone(); 3]);
    assert_eq!(find("reply_long from reply"), vec![from_reply.clone(); 3]);
    assert_eq!(
        find("too large"),
        vec![Err(BridgeError::PayloadTooLarge {
            len: MAX_MEDIUM + 1,
            max: MAX_MEDIUM
        })]
    );
    assert_eq!(
        find("too many args"),
        vec![Err(BridgeError::TooManyArgs {
            given: MAX_ARGS + 1,
            max: MAX_ARGS
        })]
    );
    assert_eq!(
        find("outside the segment"),
        vec![Err(BridgeError::OutOfSegment {
            rank: 0,
            offset: (1 << 12) - 1,
            len: 2,
            segment_len: 1 << 12
        })]
    );
    assert_eq!(find("after refusals"), vec![Ok(())]);
    assert_eq!(find("after the reply"), vec![at_most_once]);
}

#[test]
fn argument_and_payload_limits() {
    let got: Ran = Arc::default();
    let mut t = HandlerTable::new();
    let g = got.clone();
    let h = t.register("record", move |tok| {
        let me = tok.endpoint().rank();
        let (kind, len) = match tok.payload() {
            Payload::None => (0, 0),
            Payload::Medium(b) => {
                assert_eq!(b, &pattern(tok.args()[0], b.len())[..]);
                (1, b.len())
            }
            Payload::Long { offset, len, .. } => {
                let mut landed = vec![0; len];
                tok.endpoint().get(me, offset, &mut landed).unwrap();
                assert_eq!(landed, pattern(tok.args()[0], len));
                (2, len)
            }
        };
        g.lock().unwrap().push((kind, tok.args().to_vec(), len));
    });
    // A handler id from a larger table: unknown here.
    let mut bigger = HandlerTable::new();
    for _ in 0..5 {
        bigger.register("other", |_| {});
    }
    let foreign = bigger.register("foreign", |_| {});
    let seg = 1 << 18;
    let errors = within(Duration::from_secs(10), "limits", || {
        gasnet_bridge::launch(&common::config(2, seg), t, |ep| {
            let mut errors = Vec::new();
            if ep.rank() == 0 {
                let max_args: Vec<u64> = (0..MAX_ARGS as u64).map(|i| i * 0x0101 + 7).collect();
                let too_many: Vec<u64> = (0..=MAX_ARGS as u64).collect();
                ep.am_request_short(1, h, &max_args).unwrap();
                ep.am_request_medium(1, h, &max_args, &pattern(max_args[0], MAX_MEDIUM))
                    .unwrap();
                ep.am_request_long(1, h, &max_args, &pattern(max_args[0], 70_000), 100)
                    .unwrap()
                    .wait(ep);
                errors.push(ep.am_request_short(1, h, &too_many));
                errors.push(ep.am_request_medium(1, h, &too_many, &[1]));
                errors.push(ep.am_request_long(1, h, &too_many, &[1], 0).map(|_| ()));
                errors.push(ep.am_request_medium(1, h, &[1], &vec![0; MAX_MEDIUM + 1]));
                errors.push(ep.am_request_short(1, foreign, &[]));
                errors.push(ep.am_request_medium(1, foreign, &[], &[]));
                errors.push(ep.am_request_long(1, foreign, &[], &[9; 8], 0).map(|_| ()));
                errors.push(ep.am_request_short(2, h, &[]));
                errors.push(ep.am_request_medium(7, h, &[], &[]));
                errors.push(ep.am_request_long(usize::MAX, h, &[], &[], 0).map(|_| ()));
                errors.push(ep.am_request_long(1, h, &[], &[9; 8], seg - 7).map(|_| ()));
                // An empty medium and a long of zero bytes at the very end are fine.
                ep.am_request_medium(1, h, &[5], &[]).unwrap();
                ep.am_request_long(1, h, &[6], &[], seg).unwrap().wait(ep);
            }
            ep.barrier().unwrap();
            if ep.rank() == 1 {
                // Exactly the two accepted long AMs wrote here.
                assert_eq!(ep.incoming_writes(), 2, "refused long AMs must not count");
                let mut zero = [0xFFu8; 8];
                ep.get(1, 0, &mut zero).unwrap();
                assert_eq!(zero, [0; 8], "refused long AMs must not land");
                ep.get(1, seg - 8, &mut zero).unwrap();
                assert_eq!(zero, [0; 8], "refused long AMs must not land");
            }
            errors
        })
        .unwrap()
    });
    let too_many = Err(BridgeError::TooManyArgs {
        given: MAX_ARGS + 1,
        max: MAX_ARGS,
    });
    let unknown = Err(BridgeError::UnknownHandler {
        index: 5,
        registered: 1,
    });
    assert_eq!(
        errors[0],
        vec![
            too_many.clone(),
            too_many.clone(),
            too_many,
            Err(BridgeError::PayloadTooLarge {
                len: MAX_MEDIUM + 1,
                max: MAX_MEDIUM
            }),
            unknown.clone(),
            unknown.clone(),
            unknown,
            Err(BridgeError::NoSuchRank { rank: 2, ranks: 2 }),
            Err(BridgeError::NoSuchRank { rank: 7, ranks: 2 }),
            Err(BridgeError::NoSuchRank {
                rank: usize::MAX,
                ranks: 2
            }),
            Err(BridgeError::OutOfSegment {
                rank: 1,
                offset: seg - 7,
                len: 8,
                segment_len: seg
            }),
        ]
    );
    assert!(errors[1].is_empty());
    let msg = BridgeError::TooManyArgs { given: 17, max: 16 }.to_string();
    assert!(msg.contains("17") && msg.contains("16"), "{msg}");
    let mut got = got.lock().unwrap().clone();
    got.sort();
    let max_args: Vec<u64> = (0..MAX_ARGS as u64).map(|i| i * 0x0101 + 7).collect();
    let mut want = vec![
        (0, max_args.clone(), 0),
        (1, max_args.clone(), MAX_MEDIUM),
        (2, max_args, 70_000),
        (1, vec![5], 0),
        (2, vec![6], 0),
    ];
    want.sort();
    assert_eq!(
        got, want,
        "exactly the accepted messages ran, with all their arguments"
    );
}
