//! The C library's `srand`/`rand` as glibc implements them (the additive
//! feedback generator of `random_r`, TYPE_3), so region assignment matches
//! the reference element for element.

/// A glibc-compatible `rand()` stream.
#[derive(Debug, Clone)]
pub struct GlibcRand {
    state: [i32; 34],
    pos: usize,
}

impl GlibcRand {
    /// Equivalent of `srand(seed)`.
    pub fn new(seed: u32) -> Self {
        let mut r = [0i32; 34];
        // glibc maps a zero seed to 1.
        r[0] = if seed == 0 { 1 } else { seed as i32 };
        for i in 1..31 {
            // Schrage's method as in glibc's srandom_r: 16807 * r mod (2^31 - 1).
            let word = r[i - 1];
            let hi = word / 127_773;
            let lo = word % 127_773;
            let mut next = 16_807 * lo - 2_836 * hi;
            if next < 0 {
                next += 2_147_483_647;
            }
            r[i] = next;
        }
        for i in 31..34 {
            r[i] = r[i - 31];
        }
        let mut g = GlibcRand { state: r, pos: 0 };
        // glibc discards the first 310 outputs of the feedback loop.
        for _ in 34..344 {
            g.step();
        }
        g
    }

    fn step(&mut self) -> i32 {
        // Ring buffer of the last 34 values: new = r[i-31] + r[i-3].
        let n = self.state.len();
        let a = self.state[(self.pos + n - 31) % n];
        let b = self.state[(self.pos + n - 3) % n];
        let v = a.wrapping_add(b);
        self.state[self.pos] = v;
        self.pos = (self.pos + 1) % n;
        v
    }

    /// Equivalent of `rand()`: a value in `0..=i32::MAX`.
    pub fn next_rand(&mut self) -> i32 {
        ((self.step() as u32) >> 1) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_glibc_seed_zero() {
        // First values of glibc rand() after srand(0) (same as srand(1)).
        let mut g = GlibcRand::new(0);
        let got: Vec<i32> = (0..5).map(|_| g.next_rand()).collect();
        assert_eq!(
            got,
            [1804289383, 846930886, 1681692777, 1714636915, 1957747793]
        );
    }
}
