//! Daly's optimum interval between checkpoints and its expected overhead: the arithmetic
//! shared by the preservation interval of a loop (`interval.rs`, `interval = "daly"`) and the
//! checkpoints to disk (`checkpoint/schedule.rs`, `every = "daly"`). Plain numbers, no runtime.

/// Daly's higher-order estimate of the optimum compute time between checkpoints, in the unit
/// of its arguments: `delta` the time to take one (δ), `mtbf` the mean time between failures
/// (M). See `interval.rs`'s module doc.
pub fn daly_interval(delta: f64, mtbf: f64) -> f64 {
    if delta >= 2.0 * mtbf {
        return mtbf;
    }
    let x = delta / (2.0 * mtbf);
    (2.0 * delta * mtbf).sqrt() * (1.0 + x.sqrt() / 3.0 + x / 9.0) - delta
}

/// Steps per preservation for steps of `step` seconds that preserve in `delta` seconds, with
/// failures every `mtbf` seconds on average: Daly's interval over the step time, rounded, at
/// least 1 and at most `steps_left` (at least 1).
pub fn steps_per_preservation(delta: f64, step: f64, mtbf: f64, steps_left: u64) -> u64 {
    let most = steps_left.max(1);
    let tau = daly_interval(delta, mtbf);
    if step <= 0.0 {
        return most;
    }
    let n = (tau / step).round();
    if n.is_finite() && n >= 1.0 {
        (n as u64).min(most)
    } else if n.is_finite() {
        1
    } else {
        most
    }
}

/// The expected overhead of preserving every `tau` seconds of computation in Daly's first-order
/// model, as a fraction of the computation: δ/τ + (τ + δ)/(2M).
pub fn expected_overhead(delta: f64, tau: f64, mtbf: f64) -> f64 {
    delta / tau + (tau + delta) / (2.0 * mtbf)
}
