//! The C library's cube root.
//!
//! Rust's `f64::cbrt` is served by the compiler's own math routines
//! (compiler-builtins), which round some inputs differently from glibc's
//! `cbrt`; even an `extern "C" fn cbrt` binds to that copy at link time.
//! The reference results come from glibc's `cbrt`, so on glibc this calls it
//! through its `cbrtf64` alias (same code, a name nothing else defines).

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod imp {
    #[link(name = "m")]
    unsafe extern "C" {
        fn cbrtf64(x: f64) -> f64;
    }

    #[inline]
    pub fn cbrt(x: f64) -> f64 {
        // SAFETY: `cbrtf64` is glibc's pure `cbrt` taking and returning a
        // double by value; it has no preconditions and touches no memory.
        unsafe { cbrtf64(x) }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    #[inline]
    pub fn cbrt(x: f64) -> f64 {
        x.cbrt()
    }
}

/// Cube root as computed by glibc (`f64::cbrt` on other platforms).
#[inline]
pub fn cbrt(x: f64) -> f64 {
    imp::cbrt(x)
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn matches_glibc_on_a_known_input() {
        // glibc rounds this input up; a correctly rounded cbrt rounds down.
        let x = f64::from_bits(0x3f56706f9ef44c6e);
        assert_eq!(super::cbrt(x).to_bits(), 0x3fbc6df350e035db);
    }

    #[test]
    fn close_to_exact_cubes() {
        // glibc's cbrt is accurate to about one ulp, not correctly rounded.
        for (x, r) in [(27.0, 3.0), (0.125, 0.5), (1.0e-9, 1.0e-3)] {
            let c: f64 = super::cbrt(x);
            assert!(((c - r) / r).abs() < 4.0 * f64::EPSILON, "cbrt({x}) = {c}");
        }
    }
}
