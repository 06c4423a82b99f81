//! N-dimensional strided transfers: a block of `extents` elements described by per-dimension
//! strides (in elements) on both sides; dimension 0 varies fastest. Runs that are contiguous on
//! both sides go as one transfer each.

use bytemuck::Pod;

use crate::future::Future;
use crate::global_ptr::GlobalPtr;
use crate::rma::{get_bytes, put_bytes};
use crate::runtime;

/// Element offset of the last element of the block, or None for an empty block.
fn span<const N: usize>(strides: &[usize; N], extents: &[usize; N]) -> Option<usize> {
    if extents.contains(&0) {
        return None;
    }
    Some(strides.iter().zip(extents).map(|(s, e)| s * (e - 1)).sum())
}

/// Calls `f(src_elem, dst_elem, run_len)` for every contiguous run of the block.
fn for_each_run<const N: usize>(
    src_strides: &[usize; N],
    dst_strides: &[usize; N],
    extents: &[usize; N],
    mut f: impl FnMut(usize, usize, usize),
) {
    if N == 0 {
        f(0, 0, 1);
        return;
    }
    if extents.contains(&0) {
        return;
    }
    let contiguous = src_strides[0] == 1 && dst_strides[0] == 1;
    let (run, first_outer) = if contiguous { (extents[0], 1) } else { (1, 0) };
    let mut index = [0usize; N];
    loop {
        let s: usize = (first_outer..N).map(|d| index[d] * src_strides[d]).sum();
        let t: usize = (first_outer..N).map(|d| index[d] * dst_strides[d]).sum();
        f(s, t, run);
        let mut d = first_outer;
        loop {
            if d == N {
                return;
            }
            index[d] += 1;
            if index[d] < extents[d] {
                break;
            }
            index[d] = 0;
            d += 1;
        }
    }
}

/// Writes the strided block of `src` to the strided block at `dst`.
///
/// # Panics
/// If the block overruns `src`, or the target range is invalid.
pub fn rput_strided<T: Pod, const N: usize>(
    src: &[T],
    src_strides: [usize; N],
    dst: GlobalPtr<T>,
    dst_strides: [usize; N],
    extents: [usize; N],
) -> Future<()> {
    if let Some(last) = span(&src_strides, &extents) {
        assert!(
            last < src.len(),
            "rput_strided: the block reaches element {last} of a {}-element source",
            src.len()
        );
    }
    runtime::with(|rt| {
        for_each_run(&src_strides, &dst_strides, &extents, |s, t, run| {
            let d = dst + t;
            put_bytes(
                rt,
                d.rank(),
                d.offset(),
                bytemuck::cast_slice(&src[s..s + run]),
            );
        })
    });
    Future::ready(())
}

/// Reads the strided block at `src` into the strided block of `dst`.
///
/// # Panics
/// If the block overruns `dst`, or the source range is invalid.
pub fn rget_strided<T: Pod, const N: usize>(
    src: GlobalPtr<T>,
    src_strides: [usize; N],
    dst: &mut [T],
    dst_strides: [usize; N],
    extents: [usize; N],
) -> Future<()> {
    if let Some(last) = span(&dst_strides, &extents) {
        assert!(
            last < dst.len(),
            "rget_strided: the block reaches element {last} of a {}-element destination",
            dst.len()
        );
    }
    runtime::with(|rt| {
        for_each_run(&src_strides, &dst_strides, &extents, |s, t, run| {
            let p = src + s;
            get_bytes(
                rt,
                p.rank(),
                p.offset(),
                bytemuck::cast_slice_mut(&mut dst[t..t + run]),
            );
        })
    });
    Future::ready(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_block_once() {
        // 3 x 4 x 2 block out of a 5 x 6 x 3 source into a packed destination.
        let src_strides = [1, 5, 30];
        let dst_strides = [1, 3, 12];
        let extents = [3, 4, 2];
        let mut seen = [0; 24];
        let mut runs = 0;
        for_each_run(&src_strides, &dst_strides, &extents, |s, t, run| {
            runs += 1;
            for k in 0..run {
                seen[t + k] += 1;
                let (i, j, l) = ((t + k) % 3, (t + k) / 3 % 4, (t + k) / 12);
                assert_eq!(s + k, i + 5 * j + 30 * l);
            }
        });
        assert_eq!(runs, 8, "one run per row");
        assert!(seen.iter().all(|&c| c == 1));
    }

    #[test]
    fn non_contiguous_fast_dimension_goes_element_by_element() {
        let mut n = 0;
        for_each_run(&[2, 10], &[1, 3], &[3, 2], |_, _, run| {
            assert_eq!(run, 1);
            n += 1;
        });
        assert_eq!(n, 6);
        for_each_run(&[1], &[1], &[0], |_, _, _| panic!("empty block"));
    }
}
