//! The end-of-run report (`VerifyAndWriteFinalOutput`), plus two lines with
//! the origin energy and the energy sum at full precision so that runs can
//! be compared bit for bit.

use crate::domain::Domain;

/// Formats like C's `%.{prec}e` (exponent with a sign and at least two digits).
pub fn fmt_e(x: f64, prec: usize) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let s = format!("{x:.prec$e}");
    let (mantissa, exp) = s.split_once('e').expect("exponent present");
    let exp: i32 = exp.parse().expect("integer exponent");
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// Formats like C's `%.{prec}g` (the default floating-point format of C++ streams).
pub fn fmt_g(x: f64, prec: usize) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let p = prec.max(1);
    // The exponent after rounding to p significant digits decides the style.
    let sci = format!("{x:.*e}", p - 1);
    let exp: i32 = sci
        .split_once('e')
        .expect("exponent")
        .1
        .parse()
        .expect("int");
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    };
    if exp < -4 || exp >= p as i32 {
        let e = fmt_e(x, p - 1);
        let (m, ex) = e.split_once('e').expect("exponent");
        format!("{}e{}", trim(m.to_owned()), ex)
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        trim(format!("{x:.decimals$}"))
    }
}

/// Values printed at the end of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalReport {
    /// Elements per edge of each rank's block.
    pub nx: i32,
    /// Number of ranks.
    pub num_ranks: i32,
    /// Cycles run.
    pub cycles: i32,
    /// Energy of element 0 (the blast origin).
    pub origin_energy: f64,
    /// Sum of the energy of all local elements, in element order.
    pub energy_sum: f64,
    /// Largest |e(j,k) - e(k,j)| on plane 0.
    pub max_abs_diff: f64,
    /// Sum of |e(j,k) - e(k,j)| on plane 0.
    pub total_abs_diff: f64,
    /// Largest relative symmetry difference on plane 0.
    pub max_rel_diff: f64,
    /// Wall time of the cycle loop in seconds.
    pub elapsed: f64,
}

impl FinalReport {
    /// Collects the report values from a finished domain.
    pub fn new(dom: &Domain, elapsed: f64, nx: i32, num_ranks: i32) -> Self {
        let n = nx as usize;
        let e = &dom.e;
        let (mut max_abs, mut total_abs, mut max_rel) = (0.0f64, 0.0f64, 0.0f64);
        for j in 0..n {
            for k in j + 1..n {
                let abs_diff = (e[j * n + k] - e[k * n + j]).abs();
                total_abs += abs_diff;
                if max_abs < abs_diff {
                    max_abs = abs_diff;
                }
                let rel_diff = abs_diff / e[k * n + j];
                if max_rel < rel_diff {
                    max_rel = rel_diff;
                }
            }
        }
        let mut energy_sum = 0.0;
        for &v in e {
            energy_sum += v;
        }
        FinalReport {
            nx,
            num_ranks,
            cycles: dom.ts.cycle,
            origin_energy: e[0],
            energy_sum,
            max_abs_diff: max_abs,
            total_abs_diff: total_abs,
            max_rel_diff: max_rel,
            elapsed,
        }
    }

    /// Microseconds per zone per cycle on one rank (`grindTime1`).
    pub fn grind_time_per_domain(&self) -> f64 {
        let nx = i64::from(self.nx);
        ((self.elapsed * 1e6) / f64::from(self.cycles)) / ((nx * nx * nx) as f64)
    }

    /// Microseconds per zone per cycle over all ranks (`grindTime2`).
    pub fn grind_time(&self) -> f64 {
        let nx = i64::from(self.nx);
        ((self.elapsed * 1e6) / f64::from(self.cycles))
            / ((nx * nx * nx * i64::from(self.num_ranks)) as f64)
    }

    /// Figure of merit: zones per microsecond times 1000 (`1000 / grindTime2`).
    pub fn fom(&self) -> f64 {
        1000.0 / self.grind_time()
    }

    /// The text the reference prints, with the full-precision lines added
    /// after the symmetry check.
    pub fn render(&self) -> String {
        let mut s = String::new();
        s.push_str("Run completed:\n");
        s.push_str(&format!("   Problem size        =  {}\n", self.nx));
        s.push_str(&format!("   MPI tasks           =  {}\n", self.num_ranks));
        s.push_str(&format!("   Iteration count     =  {}\n", self.cycles));
        s.push_str(&format!(
            "   Final Origin Energy =  {:>12}\n",
            fmt_e(self.origin_energy, 6)
        ));
        s.push_str("   Testing Plane 0 of Energy Array on rank 0:\n");
        s.push_str(&format!(
            "        MaxAbsDiff   = {:>12}\n",
            fmt_e(self.max_abs_diff, 6)
        ));
        s.push_str(&format!(
            "        TotalAbsDiff = {:>12}\n",
            fmt_e(self.total_abs_diff, 6)
        ));
        s.push_str(&format!(
            "        MaxRelDiff   = {:>12}\n",
            fmt_e(self.max_rel_diff, 6)
        ));
        s.push_str(&format!(
            "   Origin Energy (full)  = {}\n",
            fmt_e(self.origin_energy, 17)
        ));
        s.push_str(&format!(
            "   Sum of Energy (full)  = {}\n",
            fmt_e(self.energy_sum, 17)
        ));
        s.push_str(&format!(
            "\nElapsed time         = {:>10} (s)\n",
            fmt_g(self.elapsed, 2)
        ));
        s.push_str(&format!(
            "Grind time (us/z/c)  = {:>10} (per dom)  ({:>10} overall)\n",
            fmt_g(self.grind_time_per_domain(), 8),
            fmt_g(self.elapsed, 8)
        ));
        s.push_str(&format!(
            "FOM                  = {:>10} (z/s)\n\n",
            fmt_g(self.fom(), 8)
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_style_formats() {
        assert_eq!(fmt_e(27205.3117, 6), "2.720531e+04");
        assert_eq!(fmt_e(2.273737e-12, 6), "2.273737e-12");
        assert_eq!(fmt_e(0.0, 6), "0.000000e+00");
        assert_eq!(fmt_g(0.12676, 2), "0.13");
        assert_eq!(fmt_g(0.54874459123, 8), "0.54874459");
        assert_eq!(fmt_g(1822.34141, 8), "1822.3414");
        assert_eq!(fmt_g(15.0, 2), "15");
        assert_eq!(fmt_g(123.0, 2), "1.2e+02");
        assert_eq!(fmt_g(0.00001234, 3), "1.23e-05");
        assert_eq!(fmt_g(100.0, 8), "100");
    }
}
