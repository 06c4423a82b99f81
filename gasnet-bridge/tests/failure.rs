//! A failing rank ends the job promptly with an error naming it, wherever the others wait.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::sleep;
use std::time::Duration;

use common::{assert_rank_panicked, within};
use gasnet_bridge::{HandlerTable, LaunchError};

const QUICK: Duration = Duration::from_secs(5);

#[test]
fn panic_at_start() {
    let r = within(QUICK, "panic at start", || {
        gasnet_bridge::launch(&common::config(4, 4096), HandlerTable::new(), |ep| {
            if ep.rank() == 2 {
                panic!("rank two gives up at start");
            }
            for _ in 0..10 {
                ep.barrier().unwrap();
            }
            ep.rank()
        })
    });
    assert_rank_panicked(r, 2, "rank two gives up at start");
}

#[test]
fn panic_mid_run_while_others_wait_in_a_barrier() {
    let r = within(QUICK, "panic mid-run", || {
        gasnet_bridge::launch(&common::config(8, 4096), HandlerTable::new(), |ep| {
            for i in 0..50 {
                if ep.rank() == 5 && i == 20 {
                    sleep(Duration::from_millis(30)); // the others are parked in the barrier
                    panic!("rank 5 fails in iteration {i}");
                }
                ep.put((ep.rank() + 1) % 8, 8 * ep.rank(), &[i as u8; 8])
                    .unwrap();
                ep.barrier().unwrap();
            }
        })
    });
    assert_rank_panicked(r, 5, "rank 5 fails in iteration 20");
}

#[test]
fn panic_inside_an_am_handler() {
    let mut t = HandlerTable::new();
    let boom = t.register("boom", |tok| {
        panic!(
            "handler exploded on rank {} (message from {})",
            tok.endpoint().rank(),
            tok.source()
        );
    });
    let r = within(QUICK, "panic in handler", || {
        gasnet_bridge::launch(&common::config(4, 4096), t, |ep| {
            if ep.rank() == 0 {
                ep.am_request_short(3, boom, &[]).unwrap();
            }
            ep.barrier().unwrap();
            ep.wait_until(|| false); // only the failure can end this
        })
    });
    assert_rank_panicked(r, 3, "handler exploded on rank 3 (message from 0)");
}

#[test]
fn panic_while_others_wait_for_something_that_never_happens() {
    let r = within(QUICK, "never-ending wait", || {
        gasnet_bridge::launch(&common::config(16, 4096), HandlerTable::new(), |ep| {
            if ep.rank() == 7 {
                sleep(Duration::from_millis(100)); // everyone else is parked by now
                panic!("rank 7 fails while the rest wait");
            }
            let never = AtomicU64::new(0);
            ep.wait_until(|| never.load(Ordering::Relaxed) == 1);
        })
    });
    assert_rank_panicked(r, 7, "rank 7 fails while the rest wait");
}

#[test]
fn panic_in_a_handler_after_every_body_returned() {
    let mut t = HandlerTable::new();
    let late = t.register("late", |_| panic!("late handler failure"));
    let r = within(QUICK, "late handler panic", || {
        gasnet_bridge::launch(&common::config(3, 4096), t, |ep| {
            if ep.rank() == 0 {
                ep.am_request_short(1, late, &[]).unwrap();
            }
            // Return at once; rank 1 runs the handler while finishing.
        })
    });
    assert_rank_panicked(r, 1, "late handler failure");
}

#[test]
fn non_string_panic_payload_is_named() {
    let r = within(QUICK, "panic_any", || {
        gasnet_bridge::launch(&common::config(2, 4096), HandlerTable::new(), |ep| {
            if ep.rank() == 1 {
                std::panic::panic_any(42u32);
            }
            ep.barrier().unwrap();
        })
    });
    assert_rank_panicked(r, 1, "non-string payload");
}

#[test]
fn two_failing_ranks_report_one_of_them() {
    let r = within(QUICK, "two panics", || {
        gasnet_bridge::launch(&common::config(6, 4096), HandlerTable::new(), |ep| {
            if ep.rank() == 1 || ep.rank() == 4 {
                panic!("failure of rank {}", ep.rank());
            }
            ep.barrier().unwrap();
        })
    });
    match r {
        Err(LaunchError::RankPanicked { rank, message }) => {
            assert!(rank == 1 || rank == 4, "{rank}");
            assert_eq!(message, format!("failure of rank {rank}"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rank_returning_early_while_others_wait_in_a_barrier() {
    let r = within(QUICK, "barrier mismatch", || {
        gasnet_bridge::launch(&common::config(4, 4096), HandlerTable::new(), |ep| {
            if ep.rank() == 0 {
                return;
            }
            for _ in 0..3 {
                ep.barrier().unwrap();
            }
        })
    });
    match r {
        Err(LaunchError::RankPanicked { rank, message }) => {
            assert_ne!(rank, 0, "the waiting ranks report the mismatch");
            assert!(
                message.contains("every rank must enter the same number of barriers")
                    && message.contains("already returned"),
                "{message}"
            );
        }
        other => panic!("expected a barrier-mismatch error, got {other:?}"),
    }
}

#[test]
fn one_rank_entering_an_extra_barrier() {
    let r = within(QUICK, "extra barrier", || {
        gasnet_bridge::launch(&common::config(5, 4096), HandlerTable::new(), |ep| {
            for _ in 0..5 {
                ep.barrier().unwrap();
            }
            if ep.rank() == 3 {
                ep.barrier().unwrap();
            }
        })
    });
    assert_rank_panicked(r, 3, "rank 3 waits in barrier #6");
}

#[test]
fn a_failed_job_leaves_nothing_behind() {
    // After failures, a fresh job runs normally and sees fresh counters and segments.
    for _ in 0..3 {
        let r = gasnet_bridge::launch(&common::config(4, 4096), HandlerTable::new(), |ep| {
            ep.put(0, 0, &[1; 8]).unwrap();
            if ep.rank() == 3 {
                panic!("again");
            }
            ep.barrier().unwrap();
        });
        assert_rank_panicked(r, 3, "again");
    }
    let seen = Arc::new(AtomicU64::new(0));
    let s = seen.clone();
    let out = gasnet_bridge::launch(&common::config(4, 4096), HandlerTable::new(), move |ep| {
        assert_eq!(ep.incoming_writes(), 0);
        let mut b = [9u8; 8];
        ep.get(0, 0, &mut b).unwrap();
        assert_eq!(b, [0; 8]);
        s.fetch_add(1, Ordering::Relaxed);
        ep.rank() * 10
    })
    .unwrap();
    assert_eq!(out, vec![0, 10, 20, 30]);
    assert_eq!(seen.load(Ordering::Relaxed), 4);
}
