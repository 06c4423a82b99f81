//! Shared pieces of the pgas example programs: command-line conventions, launching with a clear
//! error, exchanging values between ranks, and the deterministic generators the checks rely on;
//! and [`jacobi`], the distributed 3-D Jacobi stencil of `stencil` and `cd_stencil`.
//!
//! Each binary in `src/bin/` is a self-checking program: it computes something with the pgas
//! API, verifies the answer, prints a short summary and exits non-zero with a message if the
//! answer is wrong.

use std::fmt::Display;
use std::time::Duration;

use pgas::{DistObject, LaunchConfig, RpcTable, barrier, rank_n, when_all};

pub mod jacobi;

/// Rank count used when neither `--ranks` nor `PGAS_RANKS` is given.
pub const DEFAULT_RANKS: usize = 4;

/// Bytes kept at the start of every segment by the pgas runtime, plus allocator slack, added to
/// each example's own segment needs.
pub const SEGMENT_SLACK: usize = 64 << 10;

/// Command-line options every example takes.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Number of ranks (threads); default: PGAS_RANKS, else 4.
    #[arg(long, value_parser = parse_positive)]
    pub ranks: Option<usize>,
}

impl CommonArgs {
    /// The rank count: `--ranks`, else `PGAS_RANKS`, else [`DEFAULT_RANKS`].
    pub fn ranks(&self) -> Result<usize, String> {
        if let Some(n) = self.ranks {
            return Ok(n);
        }
        match std::env::var("PGAS_RANKS") {
            Ok(v) => parse_positive(&v).map_err(|e| format!("PGAS_RANKS={v:?} is invalid: {e}")),
            Err(std::env::VarError::NotPresent) => Ok(DEFAULT_RANKS),
            Err(e) => Err(format!("PGAS_RANKS is unreadable: {e}")),
        }
    }
}

/// Parses a whole number of at least 1 (a clap value parser).
pub fn parse_positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{s:?} is not a whole number ({e})")),
    }
}

/// Prints `program: error: message` to stderr and exits with status 1.
pub fn fail(program: &str, message: impl Display) -> ! {
    eprintln!("{program}: error: {message}");
    std::process::exit(1)
}

/// A segment size for `bytes` of example data: the runtime's share and slack added, rounded up
/// to a multiple of 8 as the communication core requires.
pub fn segment_for(bytes: usize) -> Result<usize, String> {
    bytes
        .checked_add(SEGMENT_SLACK)
        .and_then(|b| b.checked_next_multiple_of(8))
        .ok_or_else(|| format!("a segment of {bytes} bytes is too large for this machine"))
}

/// Launches `body` on `ranks` ranks, exiting with the launch error (which names the rank that
/// failed) or with every rank's own error; returns the ranks' values in rank order.
pub fn run<R, F>(
    program: &str,
    ranks: usize,
    segment_bytes: usize,
    rpcs: RpcTable,
    body: F,
) -> Vec<R>
where
    R: Send,
    F: Fn() -> Result<R, String> + Sync,
{
    let config = LaunchConfig::new(ranks).segment_bytes(segment_bytes);
    let results = pgas::launch(&config, rpcs, body).unwrap_or_else(|e| fail(program, e));
    let mut values = Vec::with_capacity(results.len());
    let mut failed = false;
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(v) => values.push(v),
            Err(e) => {
                eprintln!("{program}: rank {rank}: {e}");
                failed = true;
            }
        }
    }
    if failed {
        fail(program, "check failed (see the messages above)");
    }
    values
}

/// Gives every rank's `value` to every rank, in rank order (collective).
///
/// Built on a [`DistObject`]: each rank fetches every other rank's instance, then a barrier
/// keeps the instances alive until every fetch has been answered.
pub fn exchange<T>(value: T) -> Vec<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + 'static,
{
    let object = DistObject::new(value);
    let all = when_all((0..rank_n()).map(|r| object.fetch(r)).collect()).wait();
    barrier();
    all
}

/// The SplitMix64 finalizer: a bijection of `u64` with `mix64(0) == 0`, used to make keys,
/// values and positions that look random but are the same on every run.
pub fn mix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A small, fast, seedable generator (SplitMix64) for the examples' random choices.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }

    /// A value in `0..n` (`n` > 0; the slight modulo bias does not matter here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The HPCC RandomAccess update stream: a linear feedback shift register over GF(2) whose
/// position `n` can be reached in O(log n) steps, so each rank can start at its share.
pub mod hpcc {
    /// The primitive polynomial of the stream.
    pub const POLY: u64 = 0x7;
    /// The period of the stream.
    pub const PERIOD: i64 = 1_317_624_576_693_539_401;

    /// The value after `ran` in the stream.
    #[inline]
    pub fn next(ran: u64) -> u64 {
        (ran << 1) ^ if (ran as i64) < 0 { POLY } else { 0 }
    }

    /// The value at position `n` of the stream that starts at 1 (HPCC_starts).
    pub fn starts(n: i64) -> u64 {
        let mut n = n;
        while n < 0 {
            n += PERIOD;
        }
        while n > PERIOD {
            n -= PERIOD;
        }
        if n == 0 {
            return 1;
        }
        // m2[i] is x^(2i) mod POLY: squaring by table lookup.
        let mut m2 = [0u64; 64];
        let mut temp = 1u64;
        for m in &mut m2 {
            *m = temp;
            temp = next(next(temp));
        }
        let mut i = 62i32;
        while i >= 0 && (n >> i) & 1 == 0 {
            i -= 1;
        }
        let mut ran = 2u64;
        while i > 0 {
            let mut sq = 0u64;
            for (j, m) in m2.iter().enumerate() {
                if (ran >> j) & 1 == 1 {
                    sq ^= m;
                }
            }
            ran = sq;
            i -= 1;
            if (n >> i) & 1 == 1 {
                ran = next(ran);
            }
        }
        ran
    }
}

/// Seconds of `d` as a float, for rates.
pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpcc_starts_jumps_along_the_stream() {
        let mut ran = 1u64;
        for n in 0..2000i64 {
            assert_eq!(hpcc::starts(n), ran, "position {n}");
            ran = hpcc::next(ran);
        }
        assert_eq!(hpcc::starts(hpcc::PERIOD), hpcc::starts(0));
        assert_eq!(hpcc::starts(-1), hpcc::starts(hpcc::PERIOD - 1));
    }

    #[test]
    fn mix64_is_zero_only_at_zero_on_small_inputs() {
        assert_eq!(mix64(0), 0);
        let mut seen = std::collections::HashSet::new();
        for x in 1..10_000u64 {
            let k = mix64(x);
            assert_ne!(k, 0);
            assert!(seen.insert(k));
        }
    }

    #[test]
    fn positive_numbers_parse() {
        assert_eq!(parse_positive(" 7 "), Ok(7));
        assert!(parse_positive("0").unwrap_err().contains("at least 1"));
        assert!(
            parse_positive("x")
                .unwrap_err()
                .contains("not a whole number")
        );
    }

    #[test]
    fn segment_sizes_are_multiples_of_eight() {
        assert_eq!(segment_for(1).unwrap() % 8, 0);
        assert!(segment_for(usize::MAX).is_err());
    }
}
