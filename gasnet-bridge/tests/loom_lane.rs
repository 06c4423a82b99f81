//! A loom model of the smp conduit's AM lane, `src/conduit/smp_inbox.rs`: one sender thread and
//! one target thread over a lane whose first ring has 2 slots and whose rings grow to 4, every
//! interleaving (up to `LOOM_MAX_PREEMPTIONS`) and every value the C++11 memory model lets a
//! load return.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p gasnet-bridge --test loom_lane --release`
//! (`.ci/loom`); a normal build compiles nothing here.
//!
//! The lane's own `push` (with `claim`), `pop` and `Drop` run, on loom's atomics and cells
//! (`src/sync.rs`); under `--cfg loom` its rings have `FIRST_SLOTS` = 2 and `MAX_SLOTS` = 4
//! slots. A slot's contents are a loom `UnsafeCell`: loom reports any access to it that no
//! happens-before orders after the other side's, so a missing release/acquire pair shows as a
//! data race, not only as a stale value.
//!
//! What is checked: the target receives every message exactly once, in order, with its
//! arguments (no stale or torn slot), the sender never reuses a slot the target still reads
//! (loom's race detector on the slot), and neither side spins forever (loom's branch bound).
#![cfg(loom)]

use gasnet_bridge::for_loom::{FIRST_SLOTS, Lane, MAX_SLOTS, Outgoing};
use loom::sync::Arc;

/// `n` messages from the sender, received in order with their arguments; the target polls
/// (with loom's yield, so a spin that never ends is reported) until it has them all.
fn run(n: u64) {
    assert_eq!(
        (FIRST_SLOTS, MAX_SLOTS),
        (2, 4),
        "the scenarios below are laid out for these rings"
    );
    loom::model(move || {
        let lane = Arc::new(Lane::default());
        let sender = {
            let lane = lane.clone();
            loom::thread::spawn(move || {
                for v in 1..=n {
                    // SAFETY: this thread is the lane's only sender.
                    unsafe { lane.push(1, 0, false, &[v * 10], Outgoing::Short) };
                }
            })
        };
        let mut got = Vec::new();
        while got.len() < n as usize {
            // SAFETY: this thread is the lane's only target.
            match unsafe { lane.pop() } {
                Some(message) => got.push(message.args().to_vec()),
                None => loom::thread::yield_now(),
            }
        }
        sender.join().unwrap();
        let want: Vec<Vec<u64>> = (1..=n).map(|v| vec![v * 10]).collect();
        assert_eq!(
            got, want,
            "every message once, in order, with its arguments"
        );
        // SAFETY: as above.
        assert!(
            unsafe { lane.pop() }.is_none(),
            "a message was left in the lane"
        );
        // SAFETY: as above.
        assert!(
            unsafe { lane.is_empty() },
            "an empty lane reads as not empty"
        );
        // The last ring is freed by the lane's `Drop`, here, the sender's clone being gone.
        drop(lane);
    });
}

/// Three messages: the first ring (2 slots) fills unless the target keeps up, and the sender
/// links a second ring while the target may be reading the first.
#[test]
fn a_lane_delivers_every_message_once_in_order_across_a_new_ring() {
    run(3);
}

/// Seven messages: a ring of 2, then rings of 4 (the largest) wrapped and linked again, in
/// whatever order the two threads go.
#[test]
fn a_lane_delivers_every_message_once_in_order_across_wraps_and_links() {
    run(7);
}
