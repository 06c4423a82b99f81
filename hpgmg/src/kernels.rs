//! The operator's inner loops, written so that the compiler vectorizes them along i: every
//! row of a box is evaluated at all cells with unchecked loads, and a select keeps the old
//! value on the cells a GSRB sweep does not update. Each lane performs exactly the scalar
//! expression of the reference (same operations, same order, no contraction), so the bits
//! are those of the scalar code. The box-level entry points pick AVX-512, AVX2 or the
//! baseline instruction set at run time.

/// Number of GSRB smooths (each a red and a black sweep).
pub const NUM_SMOOTHS: usize = 3;

/// One box's stencil coefficients and geometry.
pub(crate) struct Stencil<'a> {
    pub bi: &'a [f64],
    pub bj: &'a [f64],
    pub bk: &'a [f64],
    pub js: usize,
    pub ks: usize,
    /// `-b * h2inv`.
    pub scale: f64,
    /// Cells per box side.
    pub dim: usize,
    /// Array index of cell (0, 0, 0).
    pub base: usize,
}

use std::cell::RefCell;
use std::sync::Arc;

use rayon::prelude::*;

const TWELFTH: f64 = 1.0 / 12.0;

impl Stencil<'_> {
    /// Panics unless every slice spans the box's ghost-padded volume (2 ghost layers), which
    /// makes every access of the kernels in bounds.
    fn check(&self, slices: &[&[f64]]) {
        let volume = self.ks * (self.dim + 4);
        assert!(self.js >= self.dim + 4 && self.ks >= self.js * (self.dim + 4));
        assert!(self.base == 2 + 2 * self.js + 2 * self.ks);
        assert!(self.bi.len() >= volume && self.bj.len() >= volume && self.bk.len() >= volume);
        assert!(slices.iter().all(|s| s.len() >= volume));
    }

    /// A x at `ijk` (Poisson, a = 0), the reference's expression.
    ///
    /// # Safety
    /// `ijk` is an interior cell of a box that passed [`Stencil::check`] with `x`.
    #[inline(always)]
    unsafe fn apply(&self, x: &[f64], ijk: usize) -> f64 {
        let (js, ks) = (self.js, self.ks);
        // SAFETY: interior cell, 2 ghost layers: every offset below stays in the volume.
        unsafe {
            let xv = |o: usize| *x.get_unchecked(o);
            let bi = |o: usize| *self.bi.get_unchecked(o);
            let bj = |o: usize| *self.bj.get_unchecked(o);
            let bk = |o: usize| *self.bk.get_unchecked(o);
            let xc = xv(ijk);
            let faces = bi(ijk) * (15.0 * (xv(ijk - 1) - xc) - (xv(ijk - 2) - xv(ijk + 1)))
                + bi(ijk + 1) * (15.0 * (xv(ijk + 1) - xc) - (xv(ijk + 2) - xv(ijk - 1)))
                + bj(ijk) * (15.0 * (xv(ijk - js) - xc) - (xv(ijk - 2 * js) - xv(ijk + js)))
                + bj(ijk + js) * (15.0 * (xv(ijk + js) - xc) - (xv(ijk + 2 * js) - xv(ijk - js)))
                + bk(ijk) * (15.0 * (xv(ijk - ks) - xc) - (xv(ijk - 2 * ks) - xv(ijk + ks)))
                + bk(ijk + ks) * (15.0 * (xv(ijk + ks) - xc) - (xv(ijk + 2 * ks) - xv(ijk - ks)));
            let edges = (bi(ijk + js) - bi(ijk - js))
                * (xv(ijk - 1 + js) - xv(ijk + js) - xv(ijk - 1 - js) + xv(ijk - js))
                + (bi(ijk + ks) - bi(ijk - ks))
                    * (xv(ijk - 1 + ks) - xv(ijk + ks) - xv(ijk - 1 - ks) + xv(ijk - ks))
                + (bj(ijk + 1) - bj(ijk - 1))
                    * (xv(ijk - js + 1) - xv(ijk + 1) - xv(ijk - js - 1) + xv(ijk - 1))
                + (bj(ijk + ks) - bj(ijk - ks))
                    * (xv(ijk - js + ks) - xv(ijk + ks) - xv(ijk - js - ks) + xv(ijk - ks))
                + (bk(ijk + 1) - bk(ijk - 1))
                    * (xv(ijk - ks + 1) - xv(ijk + 1) - xv(ijk - ks - 1) + xv(ijk - 1))
                + (bk(ijk + js) - bk(ijk - js))
                    * (xv(ijk - ks + js) - xv(ijk + js) - xv(ijk - ks - js) + xv(ijk - js))
                + (bi(ijk + 1 + js) - bi(ijk + 1 - js))
                    * (xv(ijk + 1 + js) - xv(ijk + js) - xv(ijk + 1 - js) + xv(ijk - js))
                + (bi(ijk + 1 + ks) - bi(ijk + 1 - ks))
                    * (xv(ijk + 1 + ks) - xv(ijk + ks) - xv(ijk + 1 - ks) + xv(ijk - ks))
                + (bj(ijk + js + 1) - bj(ijk + js - 1))
                    * (xv(ijk + js + 1) - xv(ijk + 1) - xv(ijk + js - 1) + xv(ijk - 1))
                + (bj(ijk + js + ks) - bj(ijk + js - ks))
                    * (xv(ijk + js + ks) - xv(ijk + ks) - xv(ijk + js - ks) + xv(ijk - ks))
                + (bk(ijk + ks + 1) - bk(ijk + ks - 1))
                    * (xv(ijk + ks + 1) - xv(ijk + 1) - xv(ijk + ks - 1) + xv(ijk - 1))
                + (bk(ijk + ks + js) - bk(ijk + ks - js))
                    * (xv(ijk + ks + js) - xv(ijk + js) - xv(ijk + ks - js) + xv(ijk - js));
            self.scale * (TWELFTH * faces + 0.25 * TWELFTH * edges)
        }
    }
}

/// What a row loop computes at each cell.
#[derive(Clone, Copy)]
enum Op {
    /// `out = A x`.
    Apply,
    /// `out = rhs - A x`.
    Residual,
    /// GSRB: `out = x + dinv (rhs - A x)` on cells of colour `color000` (i ^ j ^ k parity),
    /// `out = x` elsewhere.
    Gsrb(usize),
}

/// One k-plane of the interior: `out` is the plane's slice of the output (`ks` reals
/// starting at plane `k + 2`).
#[inline(always)]
fn run_plane(
    st: &Stencil,
    op: Op,
    x: &[f64],
    rhs: &[f64],
    dinv: &[f64],
    out: &mut [f64],
    k: usize,
) {
    let d = st.dim;
    let plane = (k + 2) * st.ks;
    for j in 0..d {
        let row = st.base + j * st.js + k * st.ks;
        let out_row = &mut out[row - plane..row - plane + d];
        match op {
            Op::Apply => {
                for (n, o) in out_row.iter_mut().enumerate() {
                    // SAFETY: (n, j, k) is interior and the box passed `check`.
                    *o = unsafe { st.apply(x, row + n) };
                }
            }
            Op::Residual => {
                for (n, o) in out_row.iter_mut().enumerate() {
                    let ijk = row + n;
                    // SAFETY: as above.
                    *o = unsafe { *rhs.get_unchecked(ijk) - st.apply(x, ijk) };
                }
            }
            Op::Gsrb(color000) => {
                let phase = (j ^ k ^ color000) & 1;
                for (n, o) in out_row.iter_mut().enumerate() {
                    let ijk = row + n;
                    // SAFETY: as above.
                    unsafe {
                        let ax = st.apply(x, ijk);
                        let xo = *x.get_unchecked(ijk);
                        let new = xo + *dinv.get_unchecked(ijk) * (*rhs.get_unchecked(ijk) - ax);
                        *o = if n & 1 == phase { new } else { xo };
                    }
                }
            }
        }
    }
}

/// The planes `ks`-sized chunks `planes` of the output hold, starting at interior plane `k0`.
#[inline(always)]
fn run(st: &Stencil, op: Op, x: &[f64], rhs: &[f64], dinv: &[f64], out: &mut [f64], k0: usize) {
    for (n, plane) in out.chunks_exact_mut(st.ks).enumerate() {
        run_plane(st, op, x, rhs, dinv, plane, k0 + n);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn run_avx512(
    st: &Stencil,
    op: Op,
    x: &[f64],
    rhs: &[f64],
    dinv: &[f64],
    out: &mut [f64],
    k0: usize,
) {
    run(st, op, x, rhs, dinv, out, k0)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn run_avx2(
    st: &Stencil,
    op: Op,
    x: &[f64],
    rhs: &[f64],
    dinv: &[f64],
    out: &mut [f64],
    k0: usize,
) {
    run(st, op, x, rhs, dinv, out, k0)
}

fn run_base(
    st: &Stencil,
    op: Op,
    x: &[f64],
    rhs: &[f64],
    dinv: &[f64],
    out: &mut [f64],
    k0: usize,
) {
    run(st, op, x, rhs, dinv, out, k0)
}

/// Runs planes `k0..` (as many as `out` holds) with the best instruction set.
fn run_planes(
    st: &Stencil,
    op: Op,
    x: &[f64],
    rhs: &[f64],
    dinv: &[f64],
    out: &mut [f64],
    k0: usize,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { run_avx512(st, op, x, rhs, dinv, out, k0) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { run_avx2(st, op, x, rhs, dinv, out, k0) };
        }
    }
    run_base(st, op, x, rhs, dinv, out, k0)
}

thread_local! {
    /// This rank's thread pool for the kernels (`--threads`), if more than one thread.
    static POOL: RefCell<Option<Arc<rayon::ThreadPool>>> = const { RefCell::new(None) };
}

/// Runs this rank's kernels on `threads` threads (planes of a box split among them; every
/// cell is computed as on one thread, so the bits do not change).
pub fn set_threads(threads: usize) -> Result<(), String> {
    let pool = if threads > 1 {
        Some(Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .map_err(|e| format!("cannot start {threads} threads: {e}"))?,
        ))
    } else {
        None
    };
    POOL.with(|p| *p.borrow_mut() = pool);
    Ok(())
}

/// Threads this rank's kernels run on.
pub fn threads() -> usize {
    POOL.with(|p| p.borrow().as_ref().map_or(1, |p| p.current_num_threads()))
}

fn dispatch(st: &Stencil, op: Op, x: &[f64], rhs: &[f64], dinv: &[f64], out: &mut [f64]) {
    st.check(&[x, rhs, dinv, out]);
    let (ks, d) = (st.ks, st.dim);
    let interior = &mut out[2 * ks..(d + 2) * ks];
    let pool = POOL.with(|p| p.borrow().clone());
    match pool {
        Some(pool) if d >= 8 => pool.install(|| {
            // A few planes per task: enough work to pay for the task.
            let per = d.div_ceil(2 * pool.current_num_threads()).max(1);
            interior
                .par_chunks_mut(per * ks)
                .enumerate()
                .for_each(|(n, chunk)| run_planes(st, op, x, rhs, dinv, chunk, n * per));
        }),
        _ => run_planes(st, op, x, rhs, dinv, interior, 0),
    }
}

/// `out = A x` over the box's interior.
pub(crate) fn apply_box(st: &Stencil, x: &[f64], out: &mut [f64]) {
    dispatch(st, Op::Apply, x, x, x, out)
}

/// `out = rhs - A x` over the box's interior.
pub(crate) fn residual_box(st: &Stencil, x: &[f64], rhs: &[f64], out: &mut [f64]) {
    dispatch(st, Op::Residual, x, rhs, x, out)
}

/// One out-of-place GSRB sweep over the box's interior.
pub(crate) fn gsrb_box(
    st: &Stencil,
    color000: usize,
    x: &[f64],
    rhs: &[f64],
    dinv: &[f64],
    out: &mut [f64],
) {
    dispatch(st, Op::Gsrb(color000), x, rhs, dinv, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every instruction-set variant gives the scalar expression's bits, cell by cell.
    #[test]
    fn variants_match_the_scalar_expression() {
        let dim = 12;
        let js = dim + 4;
        let ks = js * js;
        let volume = ks * js;
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = || {
            seed = pgas::mix64(seed.wrapping_add(0x9e37_79b9_7f4a_7c15));
            (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let mut v: Vec<Vec<f64>> = (0..6)
            .map(|_| (0..volume).map(|_| rnd()).collect())
            .collect();
        let (x, rhs, dinv) = (v.pop().unwrap(), v.pop().unwrap(), v.pop().unwrap());
        let st = Stencil {
            bi: &v[0],
            bj: &v[1],
            bk: &v[2],
            js,
            ks,
            scale: -144.0,
            dim,
            base: 2 + 2 * js + 2 * ks,
        };
        for op in [Op::Apply, Op::Residual, Op::Gsrb(0), Op::Gsrb(1)] {
            let mut want = vec![0.0; volume];
            for k in 0..dim {
                for j in 0..dim {
                    for i in 0..dim {
                        let ijk = st.base + i + j * js + k * ks;
                        // SAFETY: interior cell of a checked box.
                        let ax = unsafe { st.apply(&x, ijk) };
                        want[ijk] = match op {
                            Op::Apply => ax,
                            Op::Residual => rhs[ijk] - ax,
                            Op::Gsrb(c) if (i ^ j ^ k ^ c) & 1 == 0 => {
                                x[ijk] + dinv[ijk] * (rhs[ijk] - ax)
                            }
                            Op::Gsrb(_) => x[ijk],
                        };
                    }
                }
            }
            let bits = |o: &[f64]| o.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            let mut out = vec![0.0; volume];
            run_base(
                &st,
                op,
                &x,
                &rhs,
                &dinv,
                &mut out[2 * ks..(dim + 2) * ks],
                0,
            );
            assert_eq!(bits(&out), bits(&want));
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx2") {
                    let mut out = vec![0.0; volume];
                    // SAFETY: detected.
                    unsafe {
                        run_avx2(
                            &st,
                            op,
                            &x,
                            &rhs,
                            &dinv,
                            &mut out[2 * ks..(dim + 2) * ks],
                            0,
                        )
                    };
                    assert_eq!(bits(&out), bits(&want));
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    let mut out = vec![0.0; volume];
                    // SAFETY: detected.
                    unsafe {
                        run_avx512(
                            &st,
                            op,
                            &x,
                            &rhs,
                            &dinv,
                            &mut out[2 * ks..(dim + 2) * ks],
                            0,
                        )
                    };
                    assert_eq!(bits(&out), bits(&want));
                }
            }
        }
    }
}
