//! A cheap clock for summing many short intervals (the time the relaxed hook spends logging):
//! the time-stamp counter on x86-64, converted to nanoseconds when a sum is reported.
//!
//! `Instant::now()` costs about 20 ns here (the vDSO's `clock_gettime`), two of them per logged
//! operation a third of the logging itself; `rdtsc` costs a few. The counter's rate is
//! calibrated against `Instant` over the process's lifetime so far, at each conversion: on a
//! CPU with an invariant counter (`constant_tsc` and `nonstop_tsc`, every x86-64 of the last
//! decade) that ratio is the counter's frequency. Other targets use `Instant` directly.

use std::sync::OnceLock;
use std::time::Instant;

/// The instant and counter value of the first reading, the calibration's origin.
static ORIGIN: OnceLock<(Instant, u64)> = OnceLock::new();

/// The raw counter.
#[inline]
#[allow(unsafe_code)]
fn raw() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` exists on every x86-64 CPU and only reads the time-stamp counter
        // (no memory access, no side effect).
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let (t0, _) = origin();
        t0.elapsed().as_nanos() as u64
    }
}

fn origin() -> &'static (Instant, u64) {
    ORIGIN.get_or_init(|| (Instant::now(), raw_unanchored()))
}

/// The counter before the origin exists (x86-64: the same counter; elsewhere 0).
#[inline]
fn raw_unanchored() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        raw()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// A reading of the clock, in ticks.
#[inline]
pub(crate) fn now() -> u64 {
    origin();
    raw()
}

/// Ticks since `start` (a reading of [`now`]).
#[inline]
pub(crate) fn since(start: u64) -> u64 {
    raw().saturating_sub(start)
}

/// Nanoseconds in `ticks`, at the rate measured since the first reading (exact where the
/// ticks are nanoseconds already).
pub(crate) fn to_ns(ticks: u64) -> u64 {
    if cfg!(not(target_arch = "x86_64")) || ticks == 0 {
        return ticks;
    }
    let (t0, c0) = *origin();
    let elapsed = t0.elapsed().as_nanos() as f64;
    let counted = raw().saturating_sub(c0) as f64;
    if counted <= 0.0 || elapsed <= 0.0 {
        return 0;
    }
    (ticks as f64 * elapsed / counted) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_measures_about_its_length() {
        let start = now();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let ns = to_ns(since(start));
        // Sleeps overshoot; the bound only catches a wrong rate (a factor, not percent).
        assert!((25_000_000..300_000_000).contains(&ns), "{ns} ns");
    }

    #[test]
    fn readings_never_go_back_and_zero_is_zero() {
        let a = now();
        let b = now();
        assert!(b >= a);
        assert_eq!(to_ns(0), 0);
        assert_eq!(since(u64::MAX), 0);
    }
}
