//! A single-producer, single-consumer ring of variable-length records in shared memory: how
//! the active messages of two ranks on one host travel (GASNet's PSHM idea), instead of MPI.
//!
//! Each rank's window holds one ring per rank of its host (its inbox, indexed by the sender's
//! place on the host). Only that sender appends and only the owner takes records off, so the
//! ring needs no lock: two monotonically growing byte positions, each written by one side.
//!
//! # Layout and protocol
//!
//! ```text
//! [0, 64)     tail: u64, written by the producer (Release), read by the consumer (Acquire)
//! [64, 128)   head: u64, written by the consumer (Release), read by the producer (Acquire)
//! [128, ..)   DATA bytes of records
//! ```
//!
//! A record at position `p` starts at `p % DATA` with its length as a `u64`, then its bytes,
//! padded to 8. A record never wraps: when it does not fit before the end, the producer writes
//! [`SKIP`] as the length (or nothing, if fewer than 8 bytes remain) and starts at 0. The
//! producer writes a record's bytes and length *before* publishing the new tail with Release,
//! so a consumer that reads the tail with Acquire sees the whole record; the consumer copies
//! what it needs *before* publishing the new head with Release, so a producer that reads the
//! head with Acquire never overwrites bytes still being read (the producer keeps its last
//! reading of the head and reads it again only when that shows too little room). Between `head` and `tail` the
//! bytes belong to the consumer, from `tail` to `head + DATA` to the producer.
//!
//! [`DATA`] is at least twice the largest record, so an empty ring always has room for any
//! record whatever its position: a producer that finds no room makes progress and retries.

use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::active_message::{MAX_ARGS, MAX_MEDIUM};

/// Bytes of record data in one ring.
pub(crate) const DATA: usize = 256 << 10;
/// Bytes of one ring: the two cursors, each on its own cache line, then the data.
pub(crate) const RING_BYTES: usize = 128 + DATA;
/// Largest record (a medium AM with every argument: header, arguments, payload).
pub(crate) const MAX_RECORD: usize = 64 + 8 * MAX_ARGS + MAX_MEDIUM;
/// Length word of the filler that sends the consumer back to offset 0.
const SKIP: u64 = u64::MAX;

const _: () = assert!(
    DATA >= 2 * (MAX_RECORD + 16),
    "a record must fit an empty ring"
);
const _: () = assert!(DATA.is_multiple_of(8));

/// A view of one ring in shared memory; one process holds it as producer, one as consumer.
#[derive(Debug)]
pub(crate) struct Ring {
    base: NonNull<u8>,
    /// The producer's last reading of the head. The head only grows, so room computed from an
    /// old reading is never more than there is; the producer reads the shared head again only
    /// when the old reading shows too little room. Without this every push would pull the
    /// head's cache line from the consumer's core: a cache miss on the latency path.
    seen_head: Cell<usize>,
}

fn padded(len: usize) -> usize {
    8 + len.next_multiple_of(8)
}

impl Ring {
    /// A view of the ring at `base`.
    ///
    /// # Safety
    /// `base` is 64-byte aligned and points to [`RING_BYTES`] bytes that were zeroed before
    /// either side used them, stay mapped while the view is used, and are accessed only
    /// through `Ring` views: by one producer (`try_push`) and one consumer (`drain`).
    pub(crate) unsafe fn new(base: *mut u8) -> Ring {
        debug_assert!((base as usize).is_multiple_of(64), "ring not aligned");
        Ring {
            base: NonNull::new(base).expect("ring base is not null"),
            seen_head: Cell::new(0),
        }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: offset 0 of the ring holds the tail, an aligned u64 only accessed atomically.
        unsafe { &*self.base.as_ptr().cast::<AtomicU64>() }
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: offset 64 of the ring holds the head, an aligned u64 only accessed atomically.
        unsafe { &*self.base.as_ptr().add(64).cast::<AtomicU64>() }
    }

    fn data(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset < DATA);
        // SAFETY (arithmetic only): `offset < DATA`, inside the ring's data.
        unsafe { self.base.as_ptr().add(128 + offset) }
    }

    /// Producer: appends a record of `len` bytes, written by `fill`, and publishes it; false
    /// (and `fill` not called) when the ring has no room for it now.
    ///
    /// # Panics
    /// If `len` exceeds [`MAX_RECORD`].
    pub(crate) fn try_push(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        assert!(len <= MAX_RECORD, "a ring record of {len} bytes");
        // Only this side writes the tail, so a relaxed read gives its own last value.
        let tail = self.tail().load(Ordering::Relaxed) as usize;
        let offset = tail % DATA;
        let need = padded(len);
        let skip = if offset + need > DATA {
            DATA - offset
        } else {
            0
        };
        if tail + skip + need - self.seen_head.get() > DATA {
            // The Acquire pairs with the consumer's Release of the head: its reads of the
            // bytes now free happened before this side writes them.
            self.seen_head
                .set(self.head().load(Ordering::Acquire) as usize);
            if tail + skip + need - self.seen_head.get() > DATA {
                return false;
            }
        }
        if skip >= 8 {
            // SAFETY: [offset, DATA) lies in the producer's part (checked above); 8-aligned.
            unsafe { self.data(offset).cast::<u64>().write(SKIP) };
        }
        let at = (offset + skip) % DATA;
        // SAFETY: [at, at + need) lies in the data and in the producer's part (room checked);
        // the consumer does not read it before the Release store of the tail below.
        unsafe {
            self.data(at).cast::<u64>().write(len as u64);
            fill(std::slice::from_raw_parts_mut(self.data(at + 8), len));
        }
        self.tail()
            .store((tail + skip + need) as u64, Ordering::Release);
        true
    }

    /// Consumer: hands each published record, oldest first, to `take`, then frees its bytes;
    /// returns how many records it took.
    pub(crate) fn drain(&self, mut take: impl FnMut(&[u8])) -> usize {
        let tail = self.tail().load(Ordering::Acquire) as usize;
        // Only this side writes the head.
        let mut head = self.head().load(Ordering::Relaxed) as usize;
        let mut taken = 0;
        while head < tail {
            let offset = head % DATA;
            if DATA - offset < 8 {
                head += DATA - offset;
                continue;
            }
            // SAFETY: [head, tail) was published by the producer (Acquire above); a length
            // word sits at every record start, 8-aligned.
            let len = unsafe { self.data(offset).cast::<u64>().read() };
            if len == SKIP {
                head += DATA - offset;
                continue;
            }
            let len = len as usize;
            assert!(
                len <= MAX_RECORD && offset + padded(len) <= DATA,
                "corrupt shared-memory ring: record of {len} bytes at {offset}"
            );
            // SAFETY: the record's bytes lie in the published part, which the producer does
            // not touch until the head moves past them (after `take` returns).
            take(unsafe { std::slice::from_raw_parts(self.data(offset + 8), len) });
            head += padded(len);
            taken += 1;
            // Publish per record: a producer waiting for room can go on at once.
            self.head().store(head as u64, Ordering::Release);
        }
        self.head().store(head as u64, Ordering::Release);
        taken
    }

    /// Consumer: whether a record may be waiting (a cheap check for idle polling).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.tail().load(Ordering::Acquire) == self.head().load(Ordering::Relaxed)
    }
}

#[cfg(test)]
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
            while next < total {
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
            let start = ring.tail().load(Ordering::Relaxed) as usize;
            let mut moved = 0;
            while moved < step {
                let len = (step - moved - 8).min(4096);
                assert!(ring.try_push(len, |_| {}));
                ring.drain(|_| {});
                moved = ring.tail().load(Ordering::Relaxed) as usize - start;
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
    #[should_panic(expected = "a ring record")]
    fn an_oversized_record_is_refused() {
        let mem = HeapRing::new();
        mem.ring().try_push(MAX_RECORD + 1, |_| {});
    }
}
