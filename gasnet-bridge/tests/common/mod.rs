//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use gasnet_bridge::{LaunchConfig, LaunchError};

/// A small-segment job shape, so that even 16 ranks cost little memory; it counts writes,
/// as these tests check the counters (`conduit_suite` checks the default, which does not).
pub fn config(ranks: usize, segment_bytes: usize) -> LaunchConfig {
    LaunchConfig::new(ranks)
        .segment_bytes(segment_bytes)
        .write_counting(gasnet_bridge::WriteCounting::On)
}

/// Runs `f`, asserting it finishes within `limit` (a hang guard, not a performance claim).
pub fn within<T>(limit: Duration, what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(took < limit, "{what} took {took:?}, limit {limit:?}");
    out
}

/// Asserts `result` is `RankPanicked` naming `rank` with a message containing `needle`.
pub fn assert_rank_panicked<T: std::fmt::Debug>(
    result: Result<T, LaunchError>,
    rank: usize,
    needle: &str,
) {
    match result {
        Err(LaunchError::RankPanicked { rank: r, message }) => {
            assert_eq!(r, rank, "wrong rank blamed; message: {message}");
            assert!(
                message.contains(needle),
                "message {message:?} does not contain {needle:?}"
            );
        }
        other => panic!("expected rank {rank} to be reported as panicked, got {other:?}"),
    }
}

/// A deterministic byte for position `i` of a message identified by `key`.
#[inline]
pub fn pattern_byte(key: u64, i: usize) -> u8 {
    let x = key
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    (x ^ (x >> 29) ^ (x >> 47)) as u8
}

/// `len` bytes of the pattern for `key`.
pub fn pattern(key: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| pattern_byte(key, i)).collect()
}

/// Reads a native-endian u64 from the start of `bytes`.
pub fn word(bytes: &[u8]) -> u64 {
    u64::from_ne_bytes(bytes[..8].try_into().unwrap())
}
