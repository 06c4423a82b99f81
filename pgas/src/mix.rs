//! The one mixer of seeded choices: the same on every rank and every run.

/// The SplitMix64 finalizer: a bijection of `u64` with `mix64(0) == 0` that mixes every bit
/// into every other. The runtime derives team ids with it; programs and the layers above use
/// it for seeded choices that are the same on every rank and every run (one mixer for all).
#[inline]
pub fn mix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
