//! A loom model of the shared-memory AM ring, `src/conduit/shm_ring.rs`: one producer thread
//! and one consumer thread over a 64-byte ring, every interleaving (up to
//! `LOOM_MAX_PREEMPTIONS`) and every value the C++11 memory model lets a load return.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p gasnet-bridge --test loom_ring --release`
//! (`.ci/loom`); a normal build compiles nothing here.
//!
//! The ring's own `try_push`, `drain` and `is_empty` run, on loom's atomics (`src/sync.rs`).
//! Under `--cfg loom` the ring's data is 64 bytes, records are aligned to 8 bytes and at most
//! 16 long (the bound `DATA >= 2 * padded(MAX_RECORD)` holds); its memory is loom atomics of
//! 8 bytes, and record bytes are written and read a word at a time with Relaxed atomics,
//! because the same memory is a record word on one lap and record bytes on another (loom
//! cannot track one location both as an atomic and as plain memory). A missing happens-before
//! therefore shows as the consumer reading an old value, which the checks below catch, rather
//! than as a data-race report. Record bytes are chosen so that, read as a record word, they are
//! `SKIP` or an impossible length: a stale record start is never silently accepted.
#![cfg(loom)]

use gasnet_bridge::for_loom::{ALIGN, DATA, MAX_RECORD, RING_BYTES, Ring, SharedBytes};

/// Bytes of record `seq`: 8-byte words that are all-ones-ish, so that read as a record word
/// they are `SKIP` (record 0's first word) or an impossible length.
fn bytes_of(seq: usize, len: usize) -> Vec<u8> {
    (0..len.div_ceil(8))
        .flat_map(|i| (u64::MAX - ((seq as u64) << 4 | i as u64)).to_ne_bytes())
        .take(len)
        .collect()
}

/// One producer pushes records of `lens` (retrying while the ring is full), one consumer
/// drains until it has them all; checks order, lengths and bytes, then that nothing else is
/// ever read as a record. A side that can never progress makes loom exceed its branch bound.
fn run(lens: &'static [usize]) {
    assert_eq!(
        (DATA, ALIGN, MAX_RECORD),
        (64, 8, 16),
        "the scenarios below are laid out for this ring"
    );
    loom::model(move || {
        let memory = SharedBytes::zeroed(RING_BYTES);
        let producer = {
            let memory = memory.clone();
            loom::thread::spawn(move || {
                let ring = Ring::new(memory);
                for (seq, &len) in lens.iter().enumerate() {
                    let bytes = bytes_of(seq, len);
                    while !ring.try_push(len, |dst| dst.copy_from_slice(&bytes)) {
                        loom::thread::yield_now();
                    }
                }
            })
        };
        let ring = Ring::new(memory);
        let mut next = 0;
        while next < lens.len() {
            let took = ring.drain(|bytes| {
                assert!(next < lens.len(), "a record after the last one");
                assert_eq!(bytes.len(), lens[next], "length of record {next}");
                assert_eq!(
                    bytes,
                    &bytes_of(next, bytes.len())[..],
                    "bytes of record {next}"
                );
                next += 1;
            });
            if took == 0 {
                loom::thread::yield_now();
            }
        }
        producer.join().unwrap();
        assert!(
            ring.is_empty(),
            "a stale record start after the last record"
        );
        assert_eq!(ring.drain(|_| panic!("a stale record")), 0);
    });
}

/// Records 0-2 fill the ring to the byte (the producer cannot clear record 0's word, the
/// consumer must), record 3 reuses offset 0 and clears offset 16, which held record 0's bytes.
#[test]
fn ring_full_to_the_byte_then_reused() {
    run(&[16, 16, 8, 8]);
}

/// Record 2 does not fit at offset 48: SKIP there, the record at offset 0; then an odd-sized
/// and an empty record.
#[test]
fn record_wraps_through_skip() {
    run(&[16, 16, 16, 5, 0]);
}
