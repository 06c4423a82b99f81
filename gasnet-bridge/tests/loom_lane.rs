//! A loom model of the smp conduit's AM lane, `src/conduit/smp_inbox.rs`: one sender thread and
//! one target thread over a lane whose first ring has 2 slots and whose rings grow to 4, every
//! interleaving (up to `LOOM_MAX_PREEMPTIONS`) and every value the C++11 memory model lets a
//! load return.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p gasnet-bridge --test loom_lane --release`
//! (`.ci/loom`). In a normal build only [`the_mirrored_lines_are_unchanged`] runs.
//!
//! # What it mirrors (keep in sync)
//!
//! smp_inbox.rs's lane is private to the crate and works on raw ring pointers, so this file is
//! a statement-by-statement copy of its protocol, with the slot's contents reduced to one word
//! in a loom `UnsafeCell` (loom reports any access to it that no happens-before orders after
//! the other side's, so a missing release/acquire pair shows as a data race, not only as a
//! stale value):
//!
//! * `Lane::claim` → [`Lane::claim`]: the first ring published with Release; the room check
//!   against the cached head, its Acquire re-read, and when the ring is still full a new ring
//!   twice as large (up to `MAX_SLOTS`) linked with Release, tail and cached head reset.
//! * `Lane::push` → [`Lane::push`]: the slot written, its stamp (position + 1) stored with
//!   Release, the tail advanced.
//! * `Lane::pop` → [`Lane::pop`]: the first ring found with Acquire; the stamp's Acquire load;
//!   when it is not the expected one, the Acquire load of `next` and the stamp's re-read
//!   (a message published before the link), or the ring freed and the next one taken; the slot
//!   read, the position advanced and `head` stored with Release.
//!
//! [`the_mirrored_lines_are_unchanged`] fails when one of those statements changes in
//! smp_inbox.rs, pointing here. What is checked: the target receives every message exactly
//! once, in order, with its contents (no stale or torn slot), the sender never reuses a slot
//! the target still reads (loom's race detector on the slot), every ring is freed once (loom's
//! leak check on the rings' atomics), and neither side spins forever.
#![cfg_attr(not(loom), allow(dead_code))]

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(loom)]
use loom::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
#[cfg(loom)]
use std::ptr;

/// Slots of a lane's first ring (the real lane's is 32).
const FIRST_SLOTS: usize = 2;
/// Slots of the largest ring (the real lane's is 1024).
const MAX_SLOTS: usize = 4;

#[cfg(loom)]
struct Slot {
    stamp: AtomicU64,
    data: UnsafeCell<u64>,
}

#[cfg(loom)]
struct Ring {
    slots: Box<[Slot]>,
    head: AtomicU64,
    next: AtomicPtr<Ring>,
}

#[cfg(loom)]
impl Ring {
    fn boxed(slots: usize) -> *mut Ring {
        let slots = (0..slots)
            .map(|_| Slot {
                stamp: AtomicU64::new(0),
                data: UnsafeCell::new(0),
            })
            .collect();
        Box::into_raw(Box::new(Ring {
            slots,
            head: AtomicU64::new(0),
            next: AtomicPtr::new(ptr::null_mut()),
        }))
    }

    fn slot(&self, position: u64) -> &Slot {
        &self.slots[position as usize & (self.slots.len() - 1)]
    }
}

#[cfg(loom)]
struct Lane {
    // The sender's end.
    send_ring: AtomicPtr<Ring>,
    send_tail: AtomicU64,
    send_head: AtomicU64,
    // The target's end.
    receive_ring: AtomicPtr<Ring>,
    receive_position: AtomicU64,
    first: AtomicPtr<Ring>,
}

// SAFETY (of the model): as the real lane's: one sender thread and one target thread.
#[cfg(loom)]
unsafe impl Sync for Lane {}
#[cfg(loom)]
unsafe impl Send for Lane {}

#[cfg(loom)]
impl Lane {
    fn new() -> Lane {
        Lane {
            send_ring: AtomicPtr::new(ptr::null_mut()),
            send_tail: AtomicU64::new(0),
            send_head: AtomicU64::new(0),
            receive_ring: AtomicPtr::new(ptr::null_mut()),
            receive_position: AtomicU64::new(0),
            first: AtomicPtr::new(ptr::null_mut()),
        }
    }

    fn claim(&self) -> &Slot {
        let mut ring = self.send_ring.load(Ordering::Relaxed);
        if ring.is_null() {
            ring = Ring::boxed(FIRST_SLOTS);
            self.send_ring.store(ring, Ordering::Relaxed);
            self.first.store(ring, Ordering::Release);
        }
        // SAFETY: as in smp_inbox.rs: the target frees a ring only after finding its `next`.
        let mut r = unsafe { &*ring };
        let tail = self.send_tail.load(Ordering::Relaxed);
        let len = r.slots.len() as u64;
        if tail - self.send_head.load(Ordering::Relaxed) >= len {
            let head = r.head.load(Ordering::Acquire);
            self.send_head.store(head, Ordering::Relaxed);
            if tail - head >= len {
                let grown = Ring::boxed((len as usize * 2).min(MAX_SLOTS));
                r.next.store(grown, Ordering::Release);
                self.send_ring.store(grown, Ordering::Relaxed);
                self.send_tail.store(0, Ordering::Relaxed);
                self.send_head.store(0, Ordering::Relaxed);
                // SAFETY: just allocated.
                r = unsafe { &*grown };
                return r.slot(0);
            }
        }
        r.slot(tail)
    }

    fn push(&self, value: u64) {
        let slot = self.claim();
        // SAFETY: the model's claim: a slot the target returned; loom reports it otherwise.
        slot.data.with_mut(|d| unsafe { *d = value });
        let tail = self.send_tail.load(Ordering::Relaxed);
        slot.stamp.store(tail + 1, Ordering::Release);
        self.send_tail.store(tail + 1, Ordering::Relaxed);
    }

    fn pop(&self) -> Option<u64> {
        let mut ring = self.receive_ring.load(Ordering::Relaxed);
        if ring.is_null() {
            ring = self.first.load(Ordering::Acquire);
            if ring.is_null() {
                return None;
            }
            self.receive_ring.store(ring, Ordering::Relaxed);
        }
        loop {
            // SAFETY: only this thread frees rings, and not this one yet.
            let r = unsafe { &*ring };
            let position = self.receive_position.load(Ordering::Relaxed);
            let slot = r.slot(position);
            if slot.stamp.load(Ordering::Acquire) != position + 1 {
                let next = r.next.load(Ordering::Acquire);
                if next.is_null() || slot.stamp.load(Ordering::Acquire) == position + 1 {
                    if next.is_null() {
                        return None;
                    }
                } else {
                    self.receive_ring.store(next, Ordering::Relaxed);
                    self.receive_position.store(0, Ordering::Relaxed);
                    // SAFETY: as in smp_inbox.rs: the sender has moved on for good.
                    drop(unsafe { Box::from_raw(ring) });
                    ring = next;
                    continue;
                }
            }
            // SAFETY: the model's claim: the stamp (acquired) says the slot is written;
            // loom reports a read that no happens-before orders after the write.
            let value = slot.data.with(|d| unsafe { *d });
            self.receive_position.store(position + 1, Ordering::Relaxed);
            r.head.store(position + 1, Ordering::Release);
            return Some(value);
        }
    }

    /// Frees the target's last ring (the real lane's `Drop`, after `pop` returned `None`).
    fn free_last(&self) {
        assert!(self.pop().is_none(), "a message was left in the lane");
        let ring = self.receive_ring.load(Ordering::Relaxed);
        if !ring.is_null() {
            // SAFETY: the last ring of the chain, not freed yet.
            drop(unsafe { Box::from_raw(ring) });
        }
    }
}

/// `n` messages from the sender, received in order with their contents; the target polls (with
/// loom's yield, so a spin that never ends is reported) until it has them all.
#[cfg(loom)]
fn run(n: u64) {
    use loom::sync::Arc;
    loom::model(move || {
        let lane = Arc::new(Lane::new());
        let sender = {
            let lane = lane.clone();
            loom::thread::spawn(move || {
                for v in 1..=n {
                    lane.push(v * 10);
                }
            })
        };
        let mut got = Vec::new();
        while got.len() < n as usize {
            match lane.pop() {
                Some(v) => got.push(v),
                None => loom::thread::yield_now(),
            }
        }
        sender.join().unwrap();
        let want: Vec<u64> = (1..=n).map(|v| v * 10).collect();
        assert_eq!(got, want, "every message once, in order, with its contents");
        lane.free_last();
    });
}

/// Three messages: the first ring (2 slots) fills unless the target keeps up, and the sender
/// links a second ring while the target may be reading the first.
#[cfg(loom)]
#[test]
fn a_lane_delivers_every_message_once_in_order_across_a_new_ring() {
    run(3);
}

/// Seven messages: a ring of 2, then rings of 4 (the largest) wrapped and linked again, in
/// whatever order the two threads go.
#[cfg(loom)]
#[test]
fn a_lane_delivers_every_message_once_in_order_across_wraps_and_links() {
    run(7);
}

#[test]
fn the_mirrored_lines_are_unchanged() {
    let src = include_str!("../src/conduit/smp_inbox.rs");
    let mirrored = [
        "let mut ring = self.send.ring.load(Ordering::Relaxed);\n        if ring.is_null() {\n            ring = Ring::boxed(FIRST_SLOTS);\n            self.send.ring.store(ring, Ordering::Relaxed);",
        "self.first.store(ring, Ordering::Release);",
        "let tail = self.send.tail.load(Ordering::Relaxed);\n        let len = r.slots.len() as u64;\n        if tail - self.send.head.load(Ordering::Relaxed) >= len {",
        "let head = r.head.load(Ordering::Acquire);\n            self.send.head.store(head, Ordering::Relaxed);\n            if tail - head >= len {\n                let grown = Ring::boxed((len as usize * 2).min(MAX_SLOTS));",
        "r.next.store(grown, Ordering::Release);\n                self.send.ring.store(grown, Ordering::Relaxed);\n                self.send.tail.store(0, Ordering::Relaxed);\n                self.send.head.store(0, Ordering::Relaxed);",
        "return r.slot(0);\n            }\n        }\n        r.slot(tail)",
        "let slot = unsafe { self.claim() };",
        "let tail = self.send.tail.load(Ordering::Relaxed);\n        // Release: the target that acquires this stamp sees the slot's contents.\n        slot.stamp.store(tail + 1, Ordering::Release);\n        self.send.tail.store(tail + 1, Ordering::Relaxed);",
        "let mut ring = self.receive.ring.load(Ordering::Relaxed);\n        if ring.is_null() {\n            // Acquire: pairs with the release that published the first ring.\n            ring = self.first.load(Ordering::Acquire);",
        "let position = self.receive.position.load(Ordering::Relaxed);\n            let slot = r.slot(position);",
        "if slot.stamp.load(Ordering::Acquire) != position + 1 {",
        "let next = r.next.load(Ordering::Acquire);\n                if next.is_null() || slot.stamp.load(Ordering::Acquire) == position + 1 {",
        "self.receive.ring.store(next, Ordering::Relaxed);\n                    self.receive.position.store(0, Ordering::Relaxed);",
        "drop(unsafe { Box::from_raw(ring) });\n                    ring = next;\n                    continue;",
        "self.receive.position.store(position + 1, Ordering::Relaxed);\n            // Release: our reads of the slot happen before the sender reuses it.\n            r.head.store(position + 1, Ordering::Release);",
        "fn slot(&self, position: u64) -> &Slot {\n        &self.slots[position as usize & (self.slots.len() - 1)]",
    ];
    for line in mirrored {
        assert!(
            src.contains(line),
            "smp_inbox.rs no longer contains\n{line}\nupdate gasnet-bridge/tests/loom_lane.rs (its loom model) to match, then this list"
        );
    }
}
