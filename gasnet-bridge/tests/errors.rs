//! Refused operations: each error names the rank, offset and length it was given, leaves no
//! trace, and the job goes on; misuse that cannot be refused (blocking in a handler) fails the
//! rank with a clear message.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{assert_rank_panicked, within};
use gasnet_bridge::{AtomicOp, BridgeError, HandlerTable, LaunchConfig, LaunchError};

const SEG: usize = 1 << 12;

fn oos(rank: usize, offset: usize, len: usize) -> BridgeError {
    BridgeError::OutOfSegment {
        rank,
        offset,
        len,
        segment_len: SEG,
    }
}

#[test]
fn out_of_segment_accesses_name_rank_offset_and_length() {
    let mut t = HandlerTable::new();
    let h = t.register("never", |_| {
        panic!("a refused long AM must not run its handler")
    });
    let errs = gasnet_bridge::launch(&common::config(3, SEG), t, |ep| {
        let peer = (ep.rank() + 1) % 3;
        let mut e = Vec::new();
        let mut buf = [0u8; 16];
        e.push(ep.put(peer, SEG - 15, &[1; 16]).unwrap_err());
        e.push(ep.get(peer, SEG - 1, &mut buf).unwrap_err());
        e.push(ep.put_nb(peer, SEG, &[1]).unwrap_err());
        e.push(
            ep.get_nb(peer, SEG + 100, &mut buf[..4])
                .map(|_| ())
                .unwrap_err(),
        );
        e.push(ep.put(peer, usize::MAX, &[1; 2]).unwrap_err());
        e.push(
            ep.am_request_long(peer, h, &[], &[7; 16], SEG - 8)
                .map(|_| ())
                .unwrap_err(),
        );
        {
            let mut region = ep.access_region();
            e.push(region.put(peer, SEG - 2, &[1; 3]).unwrap_err());
            e.push(region.get(peer, SEG - 2, &mut buf[..3]).unwrap_err());
            assert_eq!(region.issued(), 0, "refused operations are not issued");
            assert_eq!(region.wait_all(), 0);
        }
        // Ranges ending exactly at the end are fine, including empty ones.
        ep.put(peer, SEG - 16, &[2; 16]).unwrap();
        ep.put(peer, SEG, &[]).unwrap();
        ep.get(peer, SEG, &mut []).unwrap();
        ep.barrier().unwrap();
        // Only the two good puts were counted, and nothing else landed.
        assert_eq!(ep.incoming_writes(), 2);
        let mut tail = [0u8; 32];
        ep.get(ep.rank(), SEG - 32, &mut tail).unwrap();
        assert_eq!(tail[..16], [0; 16]);
        assert_eq!(tail[16..], [2; 16]);
        e
    })
    .unwrap();
    for (rank, e) in errs.iter().enumerate() {
        let p = (rank + 1) % 3;
        assert_eq!(
            e,
            &vec![
                oos(p, SEG - 15, 16),
                oos(p, SEG - 1, 16),
                oos(p, SEG, 1),
                oos(p, SEG + 100, 4),
                oos(p, usize::MAX, 2),
                oos(p, SEG - 8, 16),
                oos(p, SEG - 2, 3),
                oos(p, SEG - 2, 3),
            ]
        );
        for err in e {
            let BridgeError::OutOfSegment { offset, len, .. } = err else {
                unreachable!()
            };
            let text = err.to_string();
            for part in [
                format!("rank {p}"),
                format!("offset {offset}"),
                format!("length {len}"),
                format!("{SEG} bytes"),
            ] {
                assert!(text.contains(&part), "{text:?} lacks {part:?}");
            }
        }
    }
}

#[test]
fn no_such_rank_everywhere() {
    let mut t = HandlerTable::new();
    let h = t.register("never", |_| panic!("must not run"));
    let errs = gasnet_bridge::launch(&common::config(4, SEG), t, |ep| {
        let mut buf = [0u8; 8];
        let mut e = vec![
            ep.put(4, 0, &[1]).unwrap_err(),
            ep.put_nb(9, 0, &[1]).map(|_| ()).unwrap_err(),
            ep.get(4, 0, &mut buf).unwrap_err(),
            ep.get_nb(100, 0, &mut buf).map(|_| ()).unwrap_err(),
            ep.atomic(4, 0, AtomicOp::Load).unwrap_err(),
            ep.segment_base(5).unwrap_err(),
            ep.am_request_short(4, h, &[]).unwrap_err(),
            ep.am_request_medium(4, h, &[], &[1]).unwrap_err(),
            ep.am_request_long(4, h, &[], &[1], 0)
                .map(|_| ())
                .unwrap_err(),
        ];
        let mut region = ep.access_region();
        e.push(region.put(4, 0, &[1]).unwrap_err());
        assert_eq!(region.wait_all(), 0);
        ep.barrier().unwrap();
        assert_eq!(ep.incoming_writes(), 0);
        e
    })
    .unwrap();
    let nsr = |rank| BridgeError::NoSuchRank { rank, ranks: 4 };
    for e in errs {
        assert_eq!(
            e,
            vec![
                nsr(4),
                nsr(9),
                nsr(4),
                nsr(100),
                nsr(4),
                nsr(5),
                nsr(4),
                nsr(4),
                nsr(4),
                nsr(4)
            ]
        );
        let text = e[1].to_string();
        assert!(
            text.contains("rank 9") && text.contains("4 ranks"),
            "{text}"
        );
    }
}

#[test]
fn split_phase_barrier_misuse() {
    let out = gasnet_bridge::launch(&common::config(3, SEG), HandlerTable::new(), |ep| {
        let mut e = vec![
            ep.barrier_wait().unwrap_err(),
            ep.barrier_try().unwrap_err(),
        ];
        ep.barrier_notify().unwrap();
        e.push(ep.barrier_notify().unwrap_err());
        e.push(ep.barrier().unwrap_err()); // barrier() notifies first: refused the same way
        ep.barrier_wait().unwrap(); // the first notify is still pending and completes
        ep.barrier_notify().unwrap();
        ep.wait_until(|| ep.barrier_try().unwrap());
        e.push(ep.barrier_try().unwrap_err()); // that barrier is over
        e.push(ep.barrier_wait().unwrap_err());
        // The job still synchronizes correctly after the misuse.
        ep.put(0, 8 * ep.rank(), &[ep.rank() as u8 + 1; 8]).unwrap();
        ep.barrier().unwrap();
        let mut all = [0u8; 24];
        ep.get(0, 0, &mut all).unwrap();
        assert_eq!(all, [[1u8; 8], [2; 8], [3; 8]].concat()[..]);
        e
    })
    .unwrap();
    for e in out {
        let texts: Vec<String> = e.iter().map(|x| x.to_string()).collect();
        assert!(
            e.iter().all(|x| matches!(x, BridgeError::BarrierOrder(_))),
            "{e:?}"
        );
        assert!(texts[0].contains("barrier_wait called without barrier_notify"));
        assert!(texts[1].contains("barrier_try called without barrier_notify"));
        assert!(texts[2].contains("barrier_notify called again"));
        assert!(texts[3].contains("barrier_notify called again"));
        assert!(texts[4].contains("barrier_try called without barrier_notify"));
        assert!(texts[5].contains("barrier_wait called without barrier_notify"));
    }
}

#[test]
fn blocking_inside_a_handler_fails_the_rank() {
    for how in ["wait_until", "barrier", "barrier_wait"] {
        let polled: Arc<Mutex<Vec<usize>>> = Arc::default();
        let mut t = HandlerTable::new();
        let p = polled.clone();
        let inner = t.register("inner", |_| {});
        let block = t.register("block", move |tok| {
            let ep = tok.endpoint();
            // Polling inside a handler is allowed but never nests handlers.
            ep.am_request_short(ep.rank(), inner, &[]).unwrap();
            p.lock().unwrap().push(ep.poll());
            match tok.args()[0] {
                0 => ep.wait_until(|| true),
                1 => ep.barrier().unwrap(),
                _ => {
                    ep.barrier_notify().unwrap();
                    ep.barrier_wait().unwrap();
                }
            }
        });
        let arg = ["wait_until", "barrier", "barrier_wait"]
            .iter()
            .position(|&h| h == how)
            .unwrap() as u64;
        let r = within(Duration::from_secs(5), how, || {
            gasnet_bridge::launch(&common::config(2, SEG), t, |ep| {
                if ep.rank() == 0 {
                    ep.am_request_short(1, block, &[arg]).unwrap();
                }
                ep.wait_until(|| false);
            })
        });
        assert_rank_panicked(
            r,
            1,
            "rank 1: a blocking call inside an active-message handler would deadlock",
        );
        assert_eq!(
            *polled.lock().unwrap(),
            vec![0],
            "{how}: poll in a handler ran nothing"
        );
    }
}

#[test]
fn bad_configurations_start_no_rank() {
    for config in [
        LaunchConfig::new(0),
        LaunchConfig::new(2).segment_bytes(12),
        LaunchConfig::new(2).segment_bytes(0),
        LaunchConfig::new(2).ranks_per_node(0),
    ] {
        let r = gasnet_bridge::launch(&config, HandlerTable::new(), |_| {
            panic!("no rank may start with a bad configuration")
        });
        match r {
            Err(LaunchError::Config(e)) => assert!(e.to_string().contains("invalid"), "{e}"),
            other => panic!("{config:?}: {other:?}"),
        }
    }
}
