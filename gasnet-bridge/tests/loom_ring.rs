//! A loom model of the shared-memory AM ring, `src/conduit/mpi/shm_ring.rs`: one producer
//! thread and one consumer thread over a 64-byte ring, every interleaving (up to
//! `LOOM_MAX_PREEMPTIONS`) and every value the C++11 memory model lets a load return.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p gasnet-bridge --test loom_ring --release`
//! (`.ci/loom`). In a normal build only [`the_mirrored_lines_are_unchanged`] runs.
//!
//! # What it mirrors (keep in sync)
//!
//! shm_ring.rs is compiled only with feature `mpi` and works on raw shared memory through
//! `&*ptr.cast::<AtomicU64>()`, which loom's tracked atomics cannot stand in for without a
//! layer in the hot path; so this file is a line-by-line copy of the protocol:
//!
//! * `padded` (shm_ring.rs lines 75-77, with the model's `ALIGN`) and `SKIP` (line 56),
//!   verbatim.
//! * `Ring::try_push` (lines 120-158) → [`Producer::try_push`]: the room check against the
//!   cached head reading and its Acquire re-read, the fill, the Relaxed clear of the next
//!   record start when `end < seen_head + DATA`, the Release publication of the word (or
//!   the Relaxed word then the Release `SKIP` for a wrapped record), the tail update.
//! * `Ring::drain` (lines 162-194) → [`Consumer::drain`]: the Relaxed head load, the Acquire
//!   word load, `SKIP` handling and its checks, `take`, the Relaxed clear of the word, the
//!   Release store of the head after every record.
//! * `Ring::is_empty` (lines 198-201) → [`Consumer::is_empty`].
//!
//! [`the_mirrored_lines_are_unchanged`] (a normal test) fails when any of those statements
//! changes in shm_ring.rs, pointing here.
//!
//! Differences, by necessity: `DATA` is 64 bytes, `MAX_RECORD` 16 and `ALIGN` 8 (the bound
//! `DATA >= 2 * (MAX_RECORD + 16)` holds); the data area is 8 loom `AtomicU64` slots and the
//! record bytes are written and read 8 at a time with Relaxed atomics, because the same
//! memory is a record word on one lap and record bytes on another (loom cannot track one
//! location both as an atomic and as plain memory). A missing happens-before therefore shows
//! as a consumer reading an old value (loom lets a Relaxed load return any store not yet
//! ordered before it), which the checks below catch, rather than as a data-race report.
//! Record bytes are chosen so that, read as a record word, they are `SKIP` or an impossible
//! length: a stale record start is never silently accepted.
#![cfg_attr(not(loom), allow(dead_code))]

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
use std::cell::Cell;

const DATA: usize = 64;
/// Record alignment: 8 here (the real ring's is a cache line, 64; the protocol does not
/// depend on it, and 8 lets the 64-byte model hold several records).
const ALIGN: usize = 8;
const MAX_RECORD: usize = 16;
const SKIP: u64 = u64::MAX;
const _: () = assert!(DATA >= 2 * (MAX_RECORD + 16));

fn padded(len: usize) -> usize {
    (8 + len).next_multiple_of(ALIGN)
}

/// The ring's shared memory: the head, then DATA bytes as 8-byte slots.
#[cfg(loom)]
struct Shared {
    head: AtomicU64,
    slots: Vec<AtomicU64>,
}

#[cfg(loom)]
impl Shared {
    fn new() -> Shared {
        Shared {
            head: AtomicU64::new(0),
            slots: (0..DATA / 8).map(|_| AtomicU64::new(0)).collect(),
        }
    }
    fn head(&self) -> &AtomicU64 {
        &self.head
    }
    /// The record word at `offset` (8-aligned).
    fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset < DATA);
        &self.slots[offset / 8]
    }
}

#[cfg(loom)]
struct Producer<'a> {
    ring: &'a Shared,
    tail: Cell<usize>,
    seen_head: Cell<usize>,
}

#[cfg(loom)]
impl Producer<'_> {
    /// shm_ring.rs `try_push`; `fill` is the record's bytes, 8 at a time.
    fn try_push(&self, len: usize, fill: &[u64]) -> bool {
        assert!(len <= MAX_RECORD, "a ring record of {len} bytes");
        assert_eq!(fill.len(), len.div_ceil(8));
        let tail = self.tail.get();
        let offset = tail % DATA;
        let need = padded(len);
        let skip = if offset + need > DATA {
            DATA - offset
        } else {
            0
        };
        let end = tail + skip + need;
        if end - self.seen_head.get() > DATA {
            self.seen_head
                .set(self.ring.head().load(Ordering::Acquire) as usize);
            if end - self.seen_head.get() > DATA {
                return false;
            }
        }
        let at = (offset + skip) % DATA;
        // fill(data(at + 8), len)
        for (i, &v) in fill.iter().enumerate() {
            self.ring.word(at + 8 + 8 * i).store(v, Ordering::Relaxed);
        }
        if end < self.seen_head.get() + DATA {
            self.ring.word(end % DATA).store(0, Ordering::Relaxed);
        }
        if skip == 0 {
            self.ring.word(at).store(len as u64 + 1, Ordering::Release);
        } else {
            self.ring.word(at).store(len as u64 + 1, Ordering::Relaxed);
            self.ring.word(offset).store(SKIP, Ordering::Release);
        }
        self.tail.set(end);
        true
    }
}

#[cfg(loom)]
struct Consumer<'a> {
    ring: &'a Shared,
}

#[cfg(loom)]
impl Consumer<'_> {
    /// shm_ring.rs `drain`; `take` gets the record's length and bytes (8 at a time).
    fn drain(&self, mut take: impl FnMut(usize, &[u64])) -> usize {
        let mut head = self.ring.head().load(Ordering::Relaxed) as usize;
        let mut taken = 0;
        loop {
            let offset = head % DATA;
            let word = self.ring.word(offset).load(Ordering::Acquire);
            if word == 0 {
                break;
            }
            let next = if word == SKIP {
                assert!(offset != 0, "corrupt shared-memory ring: SKIP at offset 0");
                head + DATA - offset
            } else {
                let len = (word - 1) as usize;
                assert!(
                    len <= MAX_RECORD && offset + padded(len) <= DATA,
                    "corrupt shared-memory ring: record of {len} bytes at {offset}"
                );
                // take(data(offset + 8), len)
                let bytes: Vec<u64> = (0..len.div_ceil(8))
                    .map(|i| self.ring.word(offset + 8 + 8 * i).load(Ordering::Relaxed))
                    .collect();
                take(len, &bytes);
                taken += 1;
                head + padded(len)
            };
            self.ring.word(offset).store(0, Ordering::Relaxed);
            head = next;
            self.ring.head().store(head as u64, Ordering::Release);
        }
        taken
    }

    /// shm_ring.rs `is_empty`.
    fn is_empty(&self) -> bool {
        let head = self.ring.head().load(Ordering::Relaxed) as usize;
        self.ring.word(head % DATA).load(Ordering::Acquire) == 0
    }
}

/// Bytes of record `seq`, 8 at a time: all-ones-ish, so that read as a record word they are
/// `SKIP` (record 0's first 8 bytes) or an impossible length.
fn bytes_of(seq: usize, len: usize) -> Vec<u64> {
    (0..len.div_ceil(8))
        .map(|i| u64::MAX - ((seq as u64) << 4 | i as u64))
        .collect()
}

/// One producer pushes records of `lens` (retrying while the ring is full), one consumer
/// drains until it has them all; checks order, lengths and bytes, then that nothing else is
/// ever read as a record. A side that can never progress makes loom exceed its branch bound.
#[cfg(loom)]
fn run(lens: &'static [usize]) {
    loom::model(move || {
        let ring = loom::sync::Arc::new(Shared::new());
        let producer = {
            let ring = ring.clone();
            loom::thread::spawn(move || {
                let p = Producer {
                    ring: &ring,
                    tail: Cell::new(0),
                    seen_head: Cell::new(0),
                };
                for (seq, &len) in lens.iter().enumerate() {
                    let bytes = bytes_of(seq, len);
                    while !p.try_push(len, &bytes) {
                        loom::thread::yield_now();
                    }
                }
            })
        };
        let c = Consumer { ring: &ring };
        let mut next = 0;
        while next < lens.len() {
            let took = c.drain(|len, bytes| {
                assert!(next < lens.len(), "a record after the last one");
                assert_eq!(len, lens[next], "length of record {next}");
                assert_eq!(bytes, &bytes_of(next, len)[..], "bytes of record {next}");
                next += 1;
            });
            if took == 0 {
                loom::thread::yield_now();
            }
        }
        producer.join().unwrap();
        assert!(c.is_empty(), "a stale record start after the last record");
        assert_eq!(c.drain(|_, _| panic!("a stale record")), 0);
    });
}

/// Records 0-2 fill the ring to the byte (the producer cannot clear record 0's word, the
/// consumer must), record 3 reuses offset 0 and clears offset 16, which held record 0's bytes.
#[cfg(loom)]
#[test]
fn ring_full_to_the_byte_then_reused() {
    run(&[16, 16, 8, 8]);
}

/// Record 2 does not fit at offset 48: SKIP there, the record at offset 0; then an odd-sized
/// and an empty record.
#[cfg(loom)]
#[test]
fn record_wraps_through_skip() {
    run(&[16, 16, 16, 5, 0]);
}

/// The statements of shm_ring.rs this model copies, as they read there: a change to any of
/// them fails here, so the model above is updated with it.
#[test]
fn the_mirrored_lines_are_unchanged() {
    let src = include_str!("../src/conduit/mpi/shm_ring.rs");
    let mirrored = [
        "const SKIP: u64 = u64::MAX;",
        "fn padded(len: usize) -> usize {\n    (8 + len).next_multiple_of(ALIGN)\n}",
        "let skip = if offset + need > DATA {\n            DATA - offset\n        } else {\n            0\n        };",
        "let end = tail + skip + need;\n        if end - self.seen_head.get() > DATA {",
        ".set(self.head().load(Ordering::Acquire) as usize);\n            if end - self.seen_head.get() > DATA {\n                return false;",
        "let at = (offset + skip) % DATA;",
        "if end < self.seen_head.get() + DATA {",
        "self.word(end % DATA).store(0, Ordering::Relaxed);",
        "if skip == 0 {\n            self.word(at).store(len as u64 + 1, Ordering::Release);\n        } else {",
        "self.word(at).store(len as u64 + 1, Ordering::Relaxed);\n            self.word(offset).store(SKIP, Ordering::Release);\n        }\n        self.tail.set(end);",
        "let mut head = self.head().load(Ordering::Relaxed) as usize;",
        "let word = self.word(offset).load(Ordering::Acquire);\n            if word == 0 {\n                break;",
        "head + DATA - offset",
        "head + padded(len)",
        "self.word(offset).store(0, Ordering::Relaxed);\n            head = next;",
        "self.head().store(head as u64, Ordering::Release);",
        "self.word(head % DATA).load(Ordering::Acquire) == 0",
    ];
    for line in mirrored {
        assert!(
            src.contains(line),
            "shm_ring.rs no longer contains\n{line}\nupdate gasnet-bridge/tests/loom_ring.rs (its loom model) to match, then this list"
        );
    }
}
