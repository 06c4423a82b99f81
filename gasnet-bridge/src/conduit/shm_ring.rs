//! A single-producer, single-consumer ring of variable-length records in shared memory: how
//! the mpi conduit's active messages between two ranks on one host travel (GASNet's PSHM
//! idea), instead of MPI. Nothing here depends on MPI; the loom model `tests/loom_ring.rs`
//! drives this code on loom's atomics (`crate::sync`).
//!
//! Each rank's window holds one ring per rank of its host (its inbox, indexed by the sender's
//! place on the host). Only that sender appends and only the owner takes records off, so the
//! ring needs no lock: the consumer publishes how far it has read (the head), the producer
//! publishes each record through the record's own first word.
//!
//! # Layout and protocol
//!
//! ```text
//! [0, 64)     head: u64, written by the consumer (Release), read by the producer (Acquire)
//! [64, 128)   unused (keeps the head's cache line to itself)
//! [128, ..)   DATA bytes of records
//! ```
//!
//! A record at position `p` (positions grow without bound; the offset is `p % DATA`) is a
//! `u64` word, then its bytes, padded to [`ALIGN`] (a cache line, so that the producer
//! writing one record and the consumer reading the one before never share a line, which
//! would move it between their cores on every message). The word is 0 while nothing is
//! published there, `len + 1` for a record of `len` bytes, or [`SKIP`] when the next record
//! starts again at offset 0 (a record never wraps). The consumer watches the word at its
//! head, so a message costs the consumer only the cache lines of the record itself: there is
//! no shared tail.
//!
//! * The producer writes the record's bytes, then clears the word at the record's end (the
//!   next record's start, which may hold bytes of an older record), then stores the record's
//!   word with Release (for a wrapped record, its word, then [`SKIP`] at the old end with
//!   Release). A consumer that reads the word with Acquire sees all of it.
//! * The consumer copies what it needs, clears the record's word, and only then publishes the
//!   new head with Release, so a producer that reads the head with Acquire never overwrites
//!   bytes still being read, and finds every freed record start cleared. A record start the
//!   producer cannot clear (the ring is full to the byte) is the start of a record the
//!   consumer has not taken yet, which the consumer clears when it does.
//! * The producer keeps its last reading of the head and reads the shared head again only
//!   when that shows too little room (the head only grows, so an old reading is safe). Without
//!   this every push would pull the head's cache line from the consumer's core.
//!
//! [`DATA`] is at least twice the largest padded record, so an empty ring always has room for
//! any record whatever its position: a producer that finds no room makes progress and retries.

use std::cell::Cell;

use crate::sync::{AtomicU64, Ordering, SharedBytes};

#[cfg(not(loom))]
use crate::message::{MAX_ARGS, MAX_MEDIUM};

/// Bytes of record data in one ring.
#[cfg(not(loom))]
pub(crate) const DATA: usize = 256 << 10;
/// Largest record (a medium AM with every argument: header, arguments, payload).
#[cfg(not(loom))]
pub(crate) const MAX_RECORD: usize = 64 + 8 * MAX_ARGS + MAX_MEDIUM;
/// Every record starts at a multiple of this (a cache line).
#[cfg(not(loom))]
pub(crate) const ALIGN: usize = 64;

// The loom models (`tests/loom_ring.rs`) explore every interleaving, which only a ring of a
// few records keeps tractable; the protocol does not depend on the sizes, only on the bound
// asserted below.
/// Bytes of record data in one ring.
#[cfg(loom)]
pub const DATA: usize = 64;
/// Largest record.
#[cfg(loom)]
pub const MAX_RECORD: usize = 16;
/// Every record starts at a multiple of this.
#[cfg(loom)]
pub const ALIGN: usize = 8;

/// Bytes of one ring: the head on its own cache line (two lines reserved), then the data.
pub const RING_BYTES: usize = 128 + DATA;
/// Length word of the filler that sends the consumer back to offset 0.
const SKIP: u64 = u64::MAX;

// A record that does not fit before the end of the data skips less than its own padded
// length, so an empty ring has room for any record at any position when this holds: a
// producer that finds no room makes progress once the consumer drains.
const _: () = assert!(
    DATA >= 2 * padded(MAX_RECORD),
    "a record must fit an empty ring"
);
const _: () = assert!(DATA.is_multiple_of(ALIGN) && ALIGN.is_multiple_of(8));

/// A view of one ring in shared memory; one process holds it as producer, one as consumer.
#[derive(Debug)]
pub struct Ring {
    memory: SharedBytes,
    /// Producer: the position of the next record (only the producer needs it).
    tail: Cell<usize>,
    /// Producer: its last reading of the head.
    seen_head: Cell<usize>,
}

/// Bytes a record of `len` bytes takes in the ring: its word, its bytes, padding.
const fn padded(len: usize) -> usize {
    (8 + len).next_multiple_of(ALIGN)
}

impl Ring {
    /// A view of the ring at `base`.
    ///
    /// # Safety
    /// `base` is 64-byte aligned and points to [`RING_BYTES`] bytes that were zeroed before
    /// either side used them, stay mapped while the view is used, and are accessed only
    /// through `Ring` views: by one producer (`try_push`, always through the same view) and
    /// one consumer (`drain`, `is_empty`).
    #[cfg(not(loom))]
    pub(crate) unsafe fn new(base: *mut u8) -> Ring {
        debug_assert!((base as usize).is_multiple_of(64), "ring not aligned");
        // SAFETY: the caller's contract; the protocol accesses record words only atomically.
        Ring::over(unsafe { SharedBytes::from_raw(base, RING_BYTES) })
    }

    /// A view of the ring in `memory` ([`RING_BYTES`] zeroed bytes) for a loom model: one
    /// view for the producer, one for the consumer.
    #[cfg(loom)]
    pub fn new(memory: SharedBytes) -> Ring {
        Ring::over(memory)
    }

    fn over(memory: SharedBytes) -> Ring {
        Ring {
            memory,
            tail: Cell::new(0),
            seen_head: Cell::new(0),
        }
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: offset 0 of the ring holds the head, only accessed atomically.
        unsafe { self.memory.word(0) }
    }

    /// The record word at `offset` (8-aligned) of the data.
    fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset < DATA);
        // SAFETY: an 8-aligned u64 inside the data; record words are only accessed atomically
        // (the bytes between them are plain data, never read as words).
        unsafe { self.memory.word(128 + offset) }
    }

    /// Producer: appends a record of `len` bytes, written by `fill`, and publishes it; false
    /// (and `fill` not called) when the ring has no room for it now.
    ///
    /// # Panics
    /// If `len` exceeds [`MAX_RECORD`].
    pub fn try_push(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        assert!(len <= MAX_RECORD, "a ring record of {len} bytes");
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
            // The Acquire pairs with the consumer's Release of the head: its reads of the
            // bytes now free, and its clearing of their record words, happened before.
            self.seen_head
                .set(self.head().load(Ordering::Acquire) as usize);
            if end - self.seen_head.get() > DATA {
                return false;
            }
        }
        let at = (offset + skip) % DATA;
        // SAFETY: [at, at + need) lies in the data and in the producer's part (room checked),
        // and `need` covers the record's bytes rounded up to 8; the consumer does not read
        // them before the record's word is published below.
        unsafe { self.memory.write(128 + at + 8, len, fill) };
        if end < self.seen_head.get() + DATA {
            // The next record's start is in the producer's part and may hold an older record's
            // bytes: clear it before the consumer can get there.
            self.word(end % DATA).store(0, Ordering::Relaxed);
        }
        if skip == 0 {
            self.word(at).store(len as u64 + 1, Ordering::Release);
        } else {
            // Published by the Release of the SKIP word, which the consumer reads first.
            self.word(at).store(len as u64 + 1, Ordering::Relaxed);
            self.word(offset).store(SKIP, Ordering::Release);
        }
        self.tail.set(end);
        true
    }

    /// Consumer: hands each published record, oldest first, to `take`, then frees its bytes;
    /// returns how many records it took.
    pub fn drain(&self, mut take: impl FnMut(&[u8])) -> usize {
        // Only this side writes the head.
        let mut head = self.head().load(Ordering::Relaxed) as usize;
        let mut taken = 0;
        loop {
            let offset = head % DATA;
            let word = self.word(offset).load(Ordering::Acquire);
            if word == 0 {
                break;
            }
            let next = if word == SKIP {
                // Every record fits at offset 0, so a SKIP there can only be old bytes.
                assert!(offset != 0, "corrupt shared-memory ring: SKIP at offset 0");
                head + DATA - offset
            } else {
                let len = (word - 1) as usize;
                assert!(
                    len <= MAX_RECORD && offset + padded(len) <= DATA,
                    "corrupt shared-memory ring: record of {len} bytes at {offset}"
                );
                // SAFETY: the record lies in the data (checked above) and was published
                // (Acquire above); the producer does not touch its bytes until the head moves
                // past them (after `take` returns).
                unsafe { self.memory.read(128 + offset + 8, len, &mut take) };
                taken += 1;
                head + padded(len)
            };
            self.word(offset).store(0, Ordering::Relaxed);
            head = next;
            // Publish per record: a producer waiting for room can go on at once.
            self.head().store(head as u64, Ordering::Release);
        }
        taken
    }

    /// Consumer: whether no record is waiting (a cheap check for idle polling).
    #[inline]
    pub fn is_empty(&self) -> bool {
        let head = self.head().load(Ordering::Relaxed) as usize;
        self.word(head % DATA).load(Ordering::Acquire) == 0
    }
}

// Std threads at full size; under loom the models in tests/loom_*.rs take their place.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::alloc::{Layout, alloc_zeroed, dealloc};

    /// A zeroed, 64-aligned ring on the heap, shared by two threads in these tests.
    struct HeapRing {
        ptr: *mut u8,
    }
    // SAFETY: the ring protocol makes concurrent use by one producer and one consumer sound.
    unsafe impl Send for HeapRing {}
    unsafe impl Sync for HeapRing {}
    impl HeapRing {
        fn new() -> HeapRing {
            // SAFETY: a non-zero size and valid alignment.
            let ptr = unsafe { alloc_zeroed(Layout::from_size_align(RING_BYTES, 64).unwrap()) };
            assert!(!ptr.is_null());
            HeapRing { ptr }
        }
        fn ring(&self) -> Ring {
            // SAFETY: zeroed, aligned, RING_BYTES long, alive for the test.
            unsafe { Ring::new(self.ptr) }
        }
    }
    impl Drop for HeapRing {
        fn drop(&mut self) {
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.ptr, Layout::from_size_align(RING_BYTES, 64).unwrap()) }
        }
    }

    fn record(seq: u64, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (seq.wrapping_mul(31) ^ i as u64) as u8)
            .collect()
    }

    #[test]
    fn records_come_out_in_order_across_many_wraps() {
        let mem = HeapRing::new();
        let total = 20_000u64;
        // Sizes that do not divide the ring, including the largest record and empty ones.
        let len_of = |seq: u64| match seq % 7 {
            0 => 0,
            1 => MAX_RECORD,
            2 => 1,
            3 => 4093,
            _ => (seq as usize * 977) % 9000,
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                let ring = mem.ring();
                for seq in 0..total {
                    let bytes = record(seq, len_of(seq));
                    while !ring.try_push(bytes.len(), |dst| dst.copy_from_slice(&bytes)) {
                        std::hint::spin_loop();
                    }
                }
            });
            let ring = mem.ring();
            let mut next = 0u64;
            let mut last = (0, std::time::Instant::now());
            while next < total {
                if next != last.0 {
                    last = (next, std::time::Instant::now());
                }
                assert!(
                    last.1.elapsed() < std::time::Duration::from_secs(20),
                    "no record after {next} for 20 s"
                );
                ring.drain(|got| {
                    assert_eq!(got, &record(next, len_of(next))[..], "record {next}");
                    next += 1;
                });
            }
            assert!(ring.is_empty());
        });
    }

    #[test]
    fn a_full_ring_refuses_until_drained() {
        let mem = HeapRing::new();
        let ring = mem.ring();
        let mut pushed = 0;
        while ring.try_push(1000, |d| d.fill(pushed as u8)) {
            pushed += 1;
        }
        assert_eq!(pushed, DATA / padded(1000), "fills the ring, no more");
        let mut called = false;
        assert!(!ring.try_push(1000, |_| called = true));
        assert!(!called, "fill is not called without room");
        let mut seen = 0;
        assert_eq!(
            ring.drain(|d| {
                assert!(d.iter().all(|&b| b == seen as u8));
                seen += 1;
            }),
            pushed
        );
        assert!(
            ring.try_push(MAX_RECORD, |d| d.fill(1)),
            "an empty ring takes any record"
        );
    }

    #[test]
    fn the_largest_record_fits_an_empty_ring_at_any_offset() {
        let mem = HeapRing::new();
        let ring = mem.ring();
        for step in [8usize, 24, 4096, DATA / 2 - 8, DATA - 16, DATA - 8] {
            // Move the cursors to an awkward offset through small records, then empty it.
            let start = ring.tail.get();
            let mut moved = 0;
            while moved < step {
                let len = (step - moved - 8).min(4096);
                assert!(ring.try_push(len, |_| {}));
                ring.drain(|_| {});
                moved = ring.tail.get() - start;
            }
            assert!(
                ring.try_push(MAX_RECORD, |d| d[MAX_RECORD - 1] = 9),
                "at step {step}"
            );
            let mut got = 0;
            ring.drain(|d| {
                assert_eq!(d.len(), MAX_RECORD);
                assert_eq!(d[MAX_RECORD - 1], 9);
                got += 1;
            });
            assert_eq!(got, 1);
        }
    }

    #[test]
    fn old_bytes_are_never_read_as_records() {
        // Records of 0xFF bytes (a stale word of them reads as SKIP or a huge length), sizes
        // whose starts fall inside older records, and rings filled to the byte, so every
        // record start the consumer reaches held something else on the lap before.
        let mem = HeapRing::new();
        let ring = mem.ring();
        for (lap, len) in [1016usize, 1000, 4088, 24, 1016, 65_000, 8]
            .into_iter()
            .enumerate()
        {
            let mut pushed = 0;
            while ring.try_push(len, |d| d.fill(0xFF)) {
                pushed += 1;
                assert!(!ring.is_empty());
            }
            assert!(pushed > 0, "lap {lap}: an empty ring takes a record");
            let mut got = 0;
            ring.drain(|d| {
                assert!(got < pushed, "lap {lap}: more records than were pushed");
                assert_eq!(d.len(), len, "lap {lap}");
                assert!(d.iter().all(|&b| b == 0xFF));
                got += 1;
            });
            assert_eq!(got, pushed, "lap {lap}: every record once, nothing else");
            assert!(ring.is_empty(), "lap {lap}: empty after the drain");
            assert_eq!(ring.drain(|_| panic!("a stale record")), 0);
        }
    }

    #[test]
    #[should_panic(expected = "a ring record")]
    fn an_oversized_record_is_refused() {
        let mem = HeapRing::new();
        mem.ring().try_push(MAX_RECORD + 1, |_| {});
    }
}
