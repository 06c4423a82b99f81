//! A loom model of the EC / IWC counters, `src/counters.rs`: writers count their writes while
//! the owner moves the epoch and reads the IWC, under every interleaving (up to
//! `LOOM_MAX_PREEMPTIONS`) and every value the memory model lets a load return.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p gasnet-bridge --test loom_counters --release`
//! (`.ci/loom`); a normal build compiles nothing here.
//!
//! `WriteCounters`'s own `count_write`, `iwc` and `set_ec` run, on loom's atomics
//! (`src/sync.rs`). A write is modelled as its bytes stored (plain memory, a loom
//! `UnsafeCell`, plus a Relaxed atomic copy a reader may look at before every write is
//! counted) before `count_write`.
#![cfg(loom)]

use gasnet_bridge::for_loom::{WriteAck, WriteCounters};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};

/// The bytes of one write in the target's segment.
struct Write {
    bytes: UnsafeCell<u64>,
    /// The same bytes, for a reader that cannot yet know this write landed.
    peek: AtomicU64,
}

const WRITERS: usize = 2;
const PER_WRITER: usize = 2;
const TOTAL: usize = WRITERS * PER_WRITER;

/// Two writers count two writes each; the owner sets EC 1, reads the IWC, sets EC 2, reads it
/// again. Checks: a reader seeing IWC = n (Acquire) sees the bytes of at least n writes (the n
/// counted ones) and, at n = all, reads every write's bytes race-free; the IWC values handed
/// out are 1..=4 exactly once; each writer's acks carry epochs in 0..=2 that never go back.
#[test]
fn counted_writes_are_visible_and_iwc_gapless() {
    loom::model(|| {
        let c = Arc::new(WriteCounters::default());
        let writes: Arc<Vec<Write>> = Arc::new(
            (0..TOTAL)
                .map(|_| Write {
                    bytes: UnsafeCell::new(0),
                    peek: AtomicU64::new(0),
                })
                .collect(),
        );
        let payload = |i: usize| 0x100 + i as u64;
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (c, writes) = (c.clone(), writes.clone());
                loom::thread::spawn(move || {
                    let mut acks: Vec<WriteAck> = Vec::new();
                    for k in 0..PER_WRITER {
                        let i = w * PER_WRITER + k;
                        // The write's bytes land, then it is counted.
                        // SAFETY: only this writer writes write `i`; loom reports a read of
                        // it that no happens-before orders after this.
                        writes[i].bytes.with_mut(|p| unsafe { *p = payload(i) });
                        writes[i].peek.store(payload(i), Ordering::Relaxed);
                        acks.push(c.count_write());
                    }
                    acks
                })
            })
            .collect();

        let check = |n: u64| {
            let seen = (0..TOTAL)
                .filter(|&i| writes[i].peek.load(Ordering::Relaxed) == payload(i))
                .count() as u64;
            assert!(seen >= n, "IWC = {n} but only {seen} writes' bytes visible");
            if n == TOTAL as u64 {
                for (i, w) in writes.iter().enumerate() {
                    // A causality violation here is loom's data-race report.
                    // SAFETY: as at the write: loom checks that it happened before.
                    assert_eq!(w.bytes.with(|p| unsafe { *p }), payload(i));
                }
            }
        };
        c.set_ec(1);
        check(c.iwc());
        c.set_ec(2);
        check(c.iwc());

        let mut iwcs = Vec::new();
        for h in writers {
            let acks = h.join().unwrap();
            for pair in acks.windows(2) {
                assert!(
                    pair[0].ec <= pair[1].ec,
                    "a writer's epochs went back: {acks:?}"
                );
            }
            for &WriteAck { ec, iwc } in &acks {
                assert!(ec <= 2, "an epoch never set: {ec}");
                iwcs.push(iwc);
            }
        }
        iwcs.sort_unstable();
        assert_eq!(iwcs, (1..=TOTAL as u64).collect::<Vec<_>>(), "IWC values");
        assert_eq!(c.iwc(), TOTAL as u64);
        check(TOTAL as u64);
    });
}
