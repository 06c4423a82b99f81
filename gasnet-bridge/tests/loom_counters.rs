//! A loom model of the EC / IWC counters, `src/counters.rs`: writers count their writes while
//! the owner moves the epoch and reads the IWC, under every interleaving (up to
//! `LOOM_MAX_PREEMPTIONS`) and every value the memory model lets a load return.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p gasnet-bridge --test loom_counters --release`
//! (`.ci/loom`). In a normal build only [`the_mirrored_lines_are_unchanged`] runs.
//!
//! # What it mirrors (keep in sync)
//!
//! `WriteCounters` uses std atomics and loom is a dev-dependency (the library never links
//! it), so [`Counters`] copies it: `count_write` (counters.rs lines 46-50: the Release
//! `fetch_add` of the IWC, then the Acquire load of the EC), `iwc` (line 55, Acquire) and
//! `set_ec` (line 67, Release). [`the_mirrored_lines_are_unchanged`] fails when one of those
//! statements changes there.
//!
//! A write is modelled as its bytes stored (plain memory, a loom `UnsafeCell`, plus a Relaxed
//! atomic copy a reader may look at before every write is counted) before `count_write`.
#![cfg_attr(not(loom), allow(dead_code))]

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(loom)]
use loom::sync::Arc;
#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};

#[cfg(loom)]
#[derive(Default)]
struct Counters {
    ec: AtomicU64,
    iwc: AtomicU64,
}

#[cfg(loom)]
impl Counters {
    /// counters.rs `count_write`: returns (ec, iwc).
    fn count_write(&self) -> (u64, u64) {
        let iwc = self.iwc.fetch_add(1, Ordering::Release) + 1;
        let ec = self.ec.load(Ordering::Acquire);
        (ec, iwc)
    }
    fn iwc(&self) -> u64 {
        self.iwc.load(Ordering::Acquire)
    }
    fn set_ec(&self, ec: u64) {
        self.ec.store(ec, Ordering::Release);
    }
}

/// The bytes of one write in the target's segment.
#[cfg(loom)]
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
#[cfg(loom)]
#[test]
fn counted_writes_are_visible_and_iwc_gapless() {
    loom::model(|| {
        let c = Arc::new(Counters::default());
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
                    let mut acks = Vec::new();
                    for k in 0..PER_WRITER {
                        let i = w * PER_WRITER + k;
                        // The write's bytes land, then it is counted.
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
                    pair[0].0 <= pair[1].0,
                    "a writer's epochs went back: {acks:?}"
                );
            }
            for &(ec, iwc) in &acks {
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

/// The statements of counters.rs this model copies, as they read there: a change to any of
/// them fails here, so the model above is updated with it.
#[test]
fn the_mirrored_lines_are_unchanged() {
    let src = include_str!("../src/counters.rs");
    let mirrored = [
        "let iwc = self.iwc.fetch_add(1, Ordering::Release) + 1;\n        let ec = self.ec.load(Ordering::Acquire);",
        "self.iwc.load(Ordering::Acquire)",
        "self.ec.store(ec, Ordering::Release);",
    ];
    for line in mirrored {
        assert!(
            src.contains(line),
            "counters.rs no longer contains\n{line}\nupdate gasnet-bridge/tests/loom_counters.rs (its loom model) to match, then this list"
        );
    }
}
