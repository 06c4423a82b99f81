//! Shared helpers of the pgas conformance suite: launching with a watchdog, rank counts,
//! deterministic data and content hashes.
#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

use pgas::{LaunchConfig, RpcTable};

/// Rank counts most tests run with.
pub const RANKS: &[usize] = &[1, 2, 3, 4, 8];
/// Rank counts of the cheap tests.
pub const RANKS_WIDE: &[usize] = &[1, 2, 3, 4, 8, 16];
pub const MIB: usize = 1 << 20;
/// A launch that has not returned after this long is reported as a hang instead of blocking
/// the suite forever.
const WATCHDOG: Duration = Duration::from_secs(60);

pub fn config(n: usize, segment_mib: usize) -> LaunchConfig {
    LaunchConfig::new(n).segment_bytes(segment_mib * MIB)
}

/// `pgas::launch` on another thread, failing the test if it hangs.
pub fn try_launch<R, F>(
    config: LaunchConfig,
    rpcs: RpcTable,
    body: F,
) -> Result<Vec<R>, pgas::LaunchError>
where
    R: Send + 'static,
    F: Fn() -> R + Sync + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let what = format!("{config:?}");
    std::thread::spawn(move || {
        let _ = tx.send(pgas::launch(&config, rpcs, body));
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("launch {what} did not finish within {WATCHDOG:?}: hang")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("launch {what} panicked"),
    }
}

/// Launches `n` ranks with `segment_mib` MiB segments; panics with the launch error.
pub fn run<R, F>(n: usize, segment_mib: usize, rpcs: RpcTable, body: F) -> Vec<R>
where
    R: Send + 'static,
    F: Fn() -> R + Sync + Send + 'static,
{
    try_launch(config(n, segment_mib), rpcs, body)
        .unwrap_or_else(|e| panic!("launch of {n} ranks failed: {e}"))
}

/// SplitMix64 finalizer: a good, cheap, deterministic hash of a word.
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `len` deterministic pseudo-random bytes named by `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut i = 0u64;
    while out.len() < len {
        out.extend_from_slice(&mix(seed.wrapping_mul(0x1000_0000_01B3) ^ i).to_le_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// FNV-1a of bytes (a content hash for comparing large buffers in messages).
pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Concatenation, a reduction operator that is not commutative (shows the order).
pub fn concat<T>(mut a: Vec<T>, b: Vec<T>) -> Vec<T> {
    a.extend(b);
    a
}

/// Every rank's value, in rank order, on every rank (an allgather from `reduce_all`).
pub fn allgather<T>(v: T) -> Vec<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + 'static,
{
    pgas::reduce_all(&pgas::world(), vec![v], concat).wait()
}
