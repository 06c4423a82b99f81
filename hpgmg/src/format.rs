//! C `printf`-style number formatting (`%e` with a signed two-digit exponent).

/// Formats `x` like C's `%.{prec}e` (e.g. `2.445831475708595e-03`).
pub fn fmt_e(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    let s = format!("{x:.prec$e}");
    let (mantissa, exp) = s.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent value");
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

#[cfg(test)]
mod tests {
    use super::fmt_e;

    #[test]
    fn matches_c() {
        assert_eq!(fmt_e(2.445831475708595e-03, 15), "2.445831475708595e-03");
        assert_eq!(fmt_e(4096.0, 15), "4.096000000000000e+03");
        assert_eq!(fmt_e(1.868e6, 3), "1.868e+06");
        assert_eq!(fmt_e(0.0, 3), "0.000e+00");
        assert_eq!(fmt_e(1e-100, 1), "1.0e-100");
    }
}
