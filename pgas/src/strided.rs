//! Non-contiguous transfers, after UPC++'s VIS: N-dimensional strided blocks, and irregular
//! and regular vectors of pieces.
//!
//! A strided block is `extents` elements described by per-dimension strides (in elements) on
//! both sides; dimension 0 varies fastest. Runs contiguous on both sides are its pieces. An
//! irregular transfer is a list of pieces on each side with equal total size (the boundaries
//! may differ); a regular one is a list of equal-size pieces on each side.
//!
//! # One message per target
//!
//! One call reaches one rank. Where the target's memory is copied directly (smp, a rank of
//! the same host on mpi), a strided block goes run by run: each run is a plain copy, and
//! packing would only copy every byte twice. Otherwise, and for irregular and regular vectors
//! everywhere, the local pieces are packed into one buffer and the remote ones go as one list
//! to the communication core's vector put / get (`Endpoint::put_vector`), which copies each
//! piece directly into mapped memory and sends one request (with one ack or one data reply)
//! across hosts. A single contiguous piece goes as a plain put / get.
//!
//! # What the hook sees
//!
//! Each remote piece is reported as its own put or get (its own `OpId`, `Rma`, bytes), as if sent
//! alone, so a resilience layer logs the same entries whichever path a block takes. The core counts
//! one incoming write per piece with consecutive IWC values; piece `i`'s `after_put` gets the value
//! that piece produced. Pieces the hook suppresses (put) or serves (get) are left out of the
//! message. With a hook installed a strided block takes the packed path even into mapped memory, so
//! the pieces of one call always get consecutive IWC values.

use std::borrow::Cow;

use bytemuck::Pod;
use gasnet_bridge::vector::piece_iwc;
use gasnet_bridge::{BridgeError, WriteAck};

use crate::future::Future;
use crate::global_ptr::GlobalPtr;
use crate::hook::{GetAction, PutAction, Rma};
use crate::rma::{get_bytes, put_bytes};
use crate::runtime::{self, RESERVED, Runtime};

/// Checks that every remote piece `(offset, len)` lies in the program's part of `rank`'s
/// segment (from the end of the runtime's reserved bytes to the segment's end), before
/// anything is sent or reported to the hook.
fn check_pieces(rt: &Runtime, op: &str, rank: usize, pieces: &[(usize, usize)]) {
    let ep = rt.ep();
    let ranks = ep.ranks();
    if rank >= ranks {
        panic!("{op}: {}", BridgeError::NoSuchRank { rank, ranks });
    }
    let segment_len = ep.segment_len();
    for &(offset, len) in pieces {
        if offset < RESERVED {
            panic!("{op}: {}", runtime::reserved(rank, offset));
        }
        if offset.checked_add(len).is_none_or(|end| end > segment_len) {
            panic!(
                "{op}: {}",
                BridgeError::OutOfSegment {
                    rank,
                    offset,
                    len,
                    segment_len
                }
            );
        }
    }
}

/// Writes the pieces `(offset, len)` of `rank`'s segment from `src` (their bytes back to
/// back): one plain put for one piece, else one vector put; each piece through the hook.
pub(crate) fn put_pieces(
    rt: &Runtime,
    op: &str,
    rank: usize,
    pieces: &[(usize, usize)],
    src: &[u8],
) {
    check_pieces(rt, op, rank, pieces);
    put_checked_pieces(rt, op, rank, pieces, src);
}

/// [`put_pieces`] of pieces already checked against `rank`'s segment (a strided block whose
/// whole span was checked).
fn put_checked_pieces(rt: &Runtime, op: &str, rank: usize, pieces: &[(usize, usize)], src: &[u8]) {
    if let [(offset, _)] = pieces {
        return put_bytes(rt, rank, *offset, src);
    }
    if pieces.is_empty() {
        return;
    }
    if !rt.hooked() {
        rt.ep()
            .put_vector(rank, pieces, src)
            .unwrap_or_else(|e| panic!("{op}: {e}"));
        return;
    }
    // Ask the hook piece by piece; send what it lets through as one vector.
    let mut sent = Vec::with_capacity(pieces.len());
    let mut kept_pieces = Vec::with_capacity(pieces.len());
    let mut kept_bytes = Vec::with_capacity(src.len());
    let mut at = 0;
    for &(offset, len) in pieces {
        let bytes = &src[at..at + len];
        at += len;
        let rma = Rma { rank, offset, len };
        // None if a hook removed itself meanwhile: the piece is sent unreported.
        let seen = rt.hook_op();
        if let Some((hook, id)) = &seen {
            if hook.before_put(*id, &rma, bytes) == PutAction::Suppress {
                continue;
            }
        }
        sent.push(seen.map(|(hook, id)| (hook, id, rma)));
        kept_pieces.push((offset, len));
        kept_bytes.extend_from_slice(bytes);
    }
    if sent.is_empty() {
        return;
    }
    // The writes' acks are pending until `after_put` (see `put_bytes`).
    rt.acks_pending.set(rt.acks_pending.get() + sent.len());
    let ack = rt
        .ep()
        .put_vector(rank, &kept_pieces, &kept_bytes)
        .unwrap_or_else(|e| panic!("{op}: {e}"));
    rt.acks_pending.set(rt.acks_pending.get() - sent.len());
    let n = sent.len();
    for (i, (hook, id, rma)) in sent
        .into_iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s?)))
    {
        let piece_ack = WriteAck {
            ec: ack.ec,
            iwc: piece_iwc(ack, n, i),
        };
        hook.after_put(id, &rma, piece_ack);
    }
}

/// Reads the pieces `(offset, len)` of `rank`'s segment into `dst` (back to back): one plain
/// get for one piece, else one vector get; each piece through the hook.
pub(crate) fn get_pieces(
    rt: &Runtime,
    op: &str,
    rank: usize,
    pieces: &[(usize, usize)],
    dst: &mut [u8],
) {
    check_pieces(rt, op, rank, pieces);
    if let [(offset, _)] = pieces {
        return get_bytes(rt, rank, *offset, dst);
    }
    if pieces.is_empty() {
        return;
    }
    if !rt.hooked() {
        rt.ep()
            .get_vector(rank, pieces, dst)
            .unwrap_or_else(|e| panic!("{op}: {e}"));
        return;
    }
    // Pieces the hook serves are filled in place; the others travel as one vector.
    let mut asked = Vec::with_capacity(pieces.len());
    let mut kept_pieces = Vec::with_capacity(pieces.len());
    let mut at = 0;
    for &(offset, len) in pieces {
        let rma = Rma { rank, offset, len };
        let seen = rt.hook_op();
        let served = seen.as_ref().is_some_and(|(hook, id)| {
            hook.before_get(*id, &rma, &mut dst[at..at + len]) == GetAction::Served
        });
        if !served {
            asked.push((seen, rma, at));
            kept_pieces.push((offset, len));
        }
        at += len;
    }
    if asked.is_empty() {
        return;
    }
    let total = kept_pieces.iter().map(|p| p.1).sum();
    let mut packed = vec![0u8; total];
    rt.ep()
        .get_vector(rank, &kept_pieces, &mut packed)
        .unwrap_or_else(|e| panic!("{op}: {e}"));
    let mut from = 0;
    for (seen, rma, at) in asked {
        let piece = &mut dst[at..at + rma.len];
        piece.copy_from_slice(&packed[from..from + rma.len]);
        from += rma.len;
        if let Some((hook, id)) = seen {
            hook.after_get(id, &rma, piece);
        }
    }
}

/// Element offset of the last element of the block, or None for an empty block.
fn span<const N: usize>(strides: &[usize; N], extents: &[usize; N]) -> Option<usize> {
    if extents.contains(&0) {
        return None;
    }
    Some(strides.iter().zip(extents).map(|(s, e)| s * (e - 1)).sum())
}

/// How many runs [`for_each_run`] visits (so that their lists are allocated once).
fn run_count<const N: usize>(
    src_strides: &[usize; N],
    dst_strides: &[usize; N],
    extents: &[usize; N],
) -> usize {
    if N == 0 {
        return 1;
    }
    let contiguous = src_strides[0] == 1 && dst_strides[0] == 1;
    let outer = if contiguous { 1 } else { 0 };
    extents[outer..].iter().product()
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

/// Checks the remote block (first element at `remote`, last `last` elements on) lies in its
/// rank's segment; true if that memory is copied directly from this process (smp, or a rank
/// of this host on mpi), where sending the runs one by one is fastest: each is a plain copy,
/// and packing would copy every byte twice (pgas-bench's `rput_strided` lines compare both).
/// With a hook installed the vector path is taken everywhere, so that the pieces of one call
/// always get consecutive IWC values at the target.
fn direct<T: 'static>(rt: &Runtime, op: &str, remote: GlobalPtr<T>, last: usize) -> bool {
    let end = remote + last;
    check_pieces(
        rt,
        op,
        remote.rank(),
        &[(
            remote.offset(),
            end.offset() - remote.offset() + size_of::<T>(),
        )],
    );
    !rt.hooked() && rt.ep().segment_base(remote.rank()).is_ok()
}

/// Pairs of (start, length): local runs in elements, remote pieces in bytes.
type Runs = Vec<(usize, usize)>;

/// The runs of a strided block as (local element, remote byte offset, elements).
fn strided_runs<T: 'static, const N: usize>(
    local_strides: &[usize; N],
    remote: GlobalPtr<T>,
    remote_strides: &[usize; N],
    extents: &[usize; N],
) -> (Runs, Runs) {
    let size = size_of::<T>();
    // Sized up front: growing both lists run by run cost about ten allocations per call,
    // more than the transfer itself for a small block across hosts (`rput_strided` / `64x8B`).
    let runs = run_count(local_strides, remote_strides, extents);
    let (mut local, mut pieces) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for_each_run(local_strides, remote_strides, extents, |l, r, run| {
        local.push((l, run));
        pieces.push(((remote + r).offset(), run * size));
    });
    (local, pieces)
}

/// The remote pieces of a strided block (byte offset, bytes) and the local runs' bytes back to
/// back (borrowed when there is one run), in one pass: a small block across hosts is mostly
/// this bookkeeping (`rput_strided` / `64x8B`).
fn strided_packed<'a, T: Pod, const N: usize>(
    src: &'a [T],
    local_strides: &[usize; N],
    remote: GlobalPtr<T>,
    remote_strides: &[usize; N],
    extents: &[usize; N],
) -> (Runs, Cow<'a, [u8]>) {
    let size = size_of::<T>();
    let runs = run_count(local_strides, remote_strides, extents);
    let mut pieces = Vec::with_capacity(runs);
    if runs == 1 {
        let mut local = (0, 0);
        for_each_run(local_strides, remote_strides, extents, |l, r, run| {
            local = (l, run);
            pieces.push(((remote + r).offset(), run * size));
        });
        let (at, len) = local;
        return (
            pieces,
            Cow::Borrowed(bytemuck::cast_slice(&src[at..at + len])),
        );
    }
    let elements: usize = extents.iter().product();
    let mut bytes = Vec::with_capacity(elements * size);
    for_each_run(local_strides, remote_strides, extents, |l, r, run| {
        pieces.push(((remote + r).offset(), run * size));
        bytes.extend_from_slice(bytemuck::cast_slice(&src[l..l + run]));
    });
    (pieces, Cow::Owned(bytes))
}

/// Writes the strided block of `src` to the strided block at `dst`, as one message to
/// `dst`'s rank (see the module doc); the future completes when the write is done there.
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
    let Some(last) = span(&dst_strides, &extents) else {
        return Future::ready(());
    };
    runtime::with(|rt| {
        if direct(rt, "rput_strided", dst, last) {
            for_each_run(&src_strides, &dst_strides, &extents, |s, t, run| {
                let d = dst + t;
                put_bytes(
                    rt,
                    d.rank(),
                    d.offset(),
                    bytemuck::cast_slice(&src[s..s + run]),
                );
            });
        } else {
            // `direct` checked the block's whole span against the segment.
            let (pieces, bytes) = strided_packed(src, &src_strides, dst, &dst_strides, &extents);
            put_checked_pieces(rt, "rput_strided", dst.rank(), &pieces, &bytes);
        }
    });
    Future::ready(())
}

/// Reads the strided block at `src` into the strided block of `dst`, as one message to (and
/// one reply from) `src`'s rank; the future completes when the data is in `dst`.
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
    let Some(last) = span(&src_strides, &extents) else {
        return Future::ready(());
    };
    if runtime::with(|rt| direct(rt, "rget_strided", src, last)) {
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
    } else {
        let (local, pieces) = strided_runs(&dst_strides, src, &src_strides, &extents);
        get_into_runs(src.rank(), "rget_strided", &pieces, dst, &local);
    }
    Future::ready(())
}

/// Gets the remote `pieces` of `rank` into the local runs `(first element, elements)` of
/// `dst`, directly when there is one run, else through one packed buffer.
fn get_into_runs<T: Pod>(
    rank: usize,
    op: &str,
    pieces: &[(usize, usize)],
    dst: &mut [T],
    runs: &[(usize, usize)],
) {
    match runs {
        [] => {}
        [(at, len)] => runtime::with(|rt| {
            get_pieces(
                rt,
                op,
                rank,
                pieces,
                bytemuck::cast_slice_mut(&mut dst[*at..at + len]),
            )
        }),
        _ => {
            let total: usize = runs.iter().map(|r| r.1).sum();
            let mut packed = vec![T::zeroed(); total];
            runtime::with(|rt| {
                get_pieces(rt, op, rank, pieces, bytemuck::cast_slice_mut(&mut packed))
            });
            let mut from = 0;
            for &(at, len) in runs {
                dst[at..at + len].copy_from_slice(&packed[from..from + len]);
                from += len;
            }
        }
    }
}

/// The remote side of an irregular transfer: its rank (None if every piece is empty), its
/// non-empty pieces as (byte offset, bytes), and its total number of elements.
fn remote_pieces<T: 'static>(
    op: &str,
    side: &str,
    pieces: impl Iterator<Item = (GlobalPtr<T>, usize)>,
) -> (Option<usize>, Vec<(usize, usize)>, usize) {
    let (mut rank, mut out, mut total) = (None, Vec::new(), 0usize);
    for (p, len) in pieces {
        if len == 0 {
            continue;
        }
        assert!(!p.is_null(), "{op} through a null global pointer");
        match rank {
            None => rank = Some(p.rank()),
            Some(r) => assert!(
                r == p.rank(),
                "{op}: {side} pieces on ranks {r} and {}: one call reaches one rank",
                p.rank()
            ),
        }
        let bytes = len
            .checked_mul(size_of::<T>())
            .unwrap_or_else(|| panic!("{op}: a piece of {len} elements overflows"));
        out.push((p.offset(), bytes));
        total += len;
    }
    (rank, out, total)
}

/// Panics unless both sides of `op` hold the same number of elements.
fn same_total(op: &str, src: usize, dst: usize) {
    assert!(
        src == dst,
        "{op}: the source pieces hold {src} elements and the destination pieces {dst}: \
         the totals must be equal"
    );
}

/// Panics unless every local piece of a regular transfer has `len` elements.
fn regular_lengths(op: &str, lens: impl Iterator<Item = usize>) {
    let mut first = None;
    for (i, len) in lens.enumerate() {
        match first {
            None => first = Some(len),
            Some(l0) => assert!(
                len == l0,
                "{op}: local piece {i} has {len} elements and piece 0 has {l0}: the pieces \
                 of a regular transfer are all one size"
            ),
        }
    }
}

/// Writes the pieces `src` (back to back) into the pieces `dst` (pointer, elements), all on
/// one rank, as one message there; piece boundaries may differ between the sides.
///
/// # Panics
/// If the totals differ, the destination pieces are on different ranks or null, or a piece
/// lies outside the target's segment.
pub fn rput_irregular<T: Pod>(src: &[&[T]], dst: &[(GlobalPtr<T>, usize)]) -> Future<()> {
    put_irregular("rput_irregular", src, dst.iter().copied())
}

fn put_irregular<T: Pod>(
    op: &str,
    src: &[&[T]],
    dst: impl Iterator<Item = (GlobalPtr<T>, usize)>,
) -> Future<()> {
    let (rank, pieces, total) = remote_pieces(op, "destination", dst);
    let local: usize = src.iter().map(|s| s.len()).sum();
    same_total(op, local, total);
    let Some(rank) = rank else {
        return Future::ready(());
    };
    let mut non_empty = src.iter().filter(|s| !s.is_empty());
    let bytes: Cow<[u8]> = match (non_empty.next(), non_empty.next()) {
        (Some(one), None) => Cow::Borrowed(bytemuck::cast_slice(one)),
        _ => Cow::Owned(
            src.iter()
                .flat_map(|s| bytemuck::cast_slice(s))
                .copied()
                .collect(),
        ),
    };
    runtime::with(|rt| put_pieces(rt, op, rank, &pieces, &bytes));
    Future::ready(())
}

/// Reads the pieces `src` (pointer, elements), all on one rank, into the pieces `dst` (back
/// to back), as one message there and one reply; piece boundaries may differ between sides.
///
/// # Panics
/// As [`rput_irregular`].
pub fn rget_irregular<T: Pod>(src: &[(GlobalPtr<T>, usize)], dst: &mut [&mut [T]]) -> Future<()> {
    get_irregular("rget_irregular", src.iter().copied(), dst)
}

fn get_irregular<T: Pod>(
    op: &str,
    src: impl Iterator<Item = (GlobalPtr<T>, usize)>,
    dst: &mut [&mut [T]],
) -> Future<()> {
    let (rank, pieces, total) = remote_pieces(op, "source", src);
    let local: usize = dst.iter().map(|d| d.len()).sum();
    same_total(op, total, local);
    let Some(rank) = rank else {
        return Future::ready(());
    };
    let non_empty = dst.iter().filter(|d| !d.is_empty()).count();
    if non_empty == 1 {
        let one = dst.iter_mut().find(|d| !d.is_empty()).expect("one piece");
        runtime::with(|rt| get_pieces(rt, op, rank, &pieces, bytemuck::cast_slice_mut(one)));
        return Future::ready(());
    }
    let mut packed = vec![T::zeroed(); total];
    runtime::with(|rt| get_pieces(rt, op, rank, &pieces, bytemuck::cast_slice_mut(&mut packed)));
    let mut from = 0;
    for d in dst.iter_mut() {
        let len = d.len();
        d.copy_from_slice(&packed[from..from + len]);
        from += len;
    }
    Future::ready(())
}

/// Writes the equal-size pieces `src` into the pieces of `dst_len` elements at `dst`, all on
/// one rank, as one message there (UPC++ `rput_regular`).
///
/// # Panics
/// If the `src` pieces differ in size, the totals differ, or as [`rput_irregular`].
pub fn rput_regular<T: Pod>(src: &[&[T]], dst: &[GlobalPtr<T>], dst_len: usize) -> Future<()> {
    let op = "rput_regular";
    regular_lengths(op, src.iter().map(|s| s.len()));
    put_irregular(op, src, dst.iter().map(|&p| (p, dst_len)))
}

/// Reads the pieces of `src_len` elements at `src`, all on one rank, into the equal-size
/// pieces `dst`, as one message there and one reply (UPC++ `rget_regular`).
///
/// # Panics
/// If the `dst` pieces differ in size, the totals differ, or as [`rput_irregular`].
pub fn rget_regular<T: Pod>(
    src: &[GlobalPtr<T>],
    src_len: usize,
    dst: &mut [&mut [T]],
) -> Future<()> {
    let op = "rget_regular";
    regular_lengths(op, dst.iter().map(|d| d.len()));
    get_irregular(op, src.iter().map(|&p| (p, src_len)), dst)
}

/// A strided block sent as one plain put per contiguous run: the baseline the benchmark
/// measures the one-message path against.
#[cfg(feature = "testing")]
pub fn rput_strided_run_by_run<T: Pod, const N: usize>(
    src: &[T],
    src_strides: [usize; N],
    dst: GlobalPtr<T>,
    dst_strides: [usize; N],
    extents: [usize; N],
) {
    // The runs start at or after `dst` (strides are not negative).
    dst.check_access("rput_strided");
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
}

/// A strided block read as one plain get per contiguous run (benchmark baseline, like
/// [`rput_strided_run_by_run`]).
#[cfg(feature = "testing")]
pub fn rget_strided_run_by_run<T: Pod, const N: usize>(
    src: GlobalPtr<T>,
    src_strides: [usize; N],
    dst: &mut [T],
    dst_strides: [usize; N],
    extents: [usize; N],
) {
    src.check_access("rget_strided");
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
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_count_is_the_number_of_runs_visited() {
        let cases: [([usize; 3], [usize; 3], [usize; 3]); 4] = [
            ([1, 4, 20], [1, 4, 20], [4, 5, 2]),
            ([2, 8, 40], [1, 4, 20], [4, 5, 2]),
            ([1, 4, 20], [3, 4, 20], [4, 0, 2]),
            ([1, 1, 1], [1, 1, 1], [1, 1, 1]),
        ];
        for (s, d, e) in cases {
            let mut visited = 0;
            for_each_run(&s, &d, &e, |_, _, _| visited += 1);
            assert_eq!(run_count(&s, &d, &e), visited, "{s:?} {d:?} {e:?}");
        }
        assert_eq!(run_count::<0>(&[], &[], &[]), 1);
    }

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
