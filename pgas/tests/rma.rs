//! rput/rget of 1 B to several MiB with every completion kind, and strided 2-D / 3-D
//! transfers (after UPC++'s rput/rget, completion and vis tests).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{allgather, by_rank, pattern, ranks, run};
use pgas::{
    Completions, GlobalPtr, Promise, RpcTable, barrier, delete_, new_array, rank_me, rank_n,
    rget_into, rget_slice, rget_strided, rget_with, rput_slice, rput_strided, rput_with,
};

const SIZES: &[usize] = &[
    1,
    2,
    3,
    7,
    8,
    16,
    63,
    64,
    100,
    255,
    256,
    1000,
    1024,
    4095,
    4096,
    65535,
    65536,
    65537,
    100_003,
    1 << 18,
    1 << 20,
    (1 << 20) + 7,
    3 << 20,
];
const MAX: usize = 3 << 20;
/// The put completion kinds exercised.
const PUT_KINDS: usize = 5;
/// The get completion kinds exercised.
const GET_KINDS: usize = 4;

fn seed(src: usize, size: usize, it: usize) -> u64 {
    ((src as u64) << 48) ^ ((size as u64) << 8) ^ it as u64
}

#[test]
fn rput_rget_every_size_every_completion_to_every_rank() {
    for n in ranks() {
        // Remote-completion rpcs record, per target rank, how many found their data in place
        // and how many did not.
        let landed: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
        let missing: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
        let mut rpcs = RpcTable::new();
        let check = {
            let (landed, missing) = (landed.clone(), missing.clone());
            rpcs.register(
                "check_landed",
                move |(buf, len, seed): (GlobalPtr<u8>, usize, u64)| {
                    let me = rank_me();
                    assert_eq!(buf.rank(), me, "the remote rpc runs at the target");
                    // Read it as the target's own memory (an rget on itself).
                    let here = rget_slice(buf, len).result();
                    if here == pattern(seed, len) {
                        landed[me].fetch_add(1, Ordering::SeqCst);
                    } else {
                        missing[me].fetch_add(1, Ordering::SeqCst);
                    }
                },
            )
        };
        let (landed2, missing2) = (landed.clone(), missing.clone());
        let expected = run(n, 8, rpcs, move || {
            let me = rank_me();
            let buf = new_array::<u8>(MAX).unwrap();
            let bufs = allgather(buf);
            let mut remote_expected = 0;
            let mut it = 0;
            for &size in SIZES {
                // Big transfers with fewer kinds, to keep the suite fast.
                let kinds: Vec<usize> = if size > (1 << 18) {
                    vec![it % PUT_KINDS, (it + 3) % PUT_KINDS]
                } else {
                    (0..PUT_KINDS).collect()
                };
                for kind in kinds {
                    // Targets rotate so every size goes to every other rank (or to itself on
                    // one rank); one writer per target per iteration.
                    let shift = if n == 1 { 0 } else { 1 + it % (n - 1) };
                    let target = (me + shift) % n;
                    let source = (me + n - shift) % n;
                    let data = pattern(seed(me, size, it), size);
                    let dst = bufs[target];
                    match kind {
                        0 => rput_slice(&data, dst).wait(),
                        1 => {
                            let cx = rput_with(
                                &data,
                                dst,
                                Completions::new().source_future().operation_future(),
                            );
                            cx.source.expect("asked for").wait();
                            cx.operation.expect("asked for").wait();
                        }
                        2 => {
                            // Many ops counted on one pair of promises.
                            let src_done: Promise = Promise::new();
                            let op_done: Promise = Promise::new();
                            let chunks = 7.min(size);
                            let per = size.div_ceil(chunks);
                            let mut issued = 0;
                            for (c, part) in data.chunks(per).enumerate() {
                                let cx = rput_with(
                                    part,
                                    dst + c * per,
                                    Completions::new()
                                        .source_promise(&src_done)
                                        .operation_promise(&op_done),
                                );
                                assert!(cx.source.is_none() && cx.operation.is_none());
                                issued += 1;
                            }
                            assert!(issued >= 1);
                            let f = op_done.finalize();
                            src_done.finalize().wait();
                            f.wait();
                            assert_eq!(op_done.outstanding(), 0);
                        }
                        3 => {
                            let cx = rput_with(
                                &data,
                                dst,
                                Completions::new()
                                    .remote_rpc(check, (dst, size, seed(me, size, it))),
                            );
                            assert!(cx.source.is_none() && cx.operation.is_none());
                            remote_expected += 1;
                        }
                        _ => {
                            let cx = rput_with(&data, dst, Completions::new().operation_future());
                            assert!(cx.source.is_none());
                            cx.operation.expect("asked for").wait();
                        }
                    }
                    if kind == 3 {
                        // The target waits until its remote completion ran.
                        while landed2[me].load(Ordering::SeqCst)
                            + missing2[me].load(Ordering::SeqCst)
                            < remote_expected
                        {
                            if pgas::progress() == 0 {
                                std::thread::yield_now();
                            }
                        }
                    }
                    barrier();
                    // The target finds exactly the source's bytes.
                    let here = rget_slice(buf, size).wait();
                    assert!(
                        here == pattern(seed(source, size, it), size),
                        "{size} bytes from rank {source} (kind {kind}) differ at rank {me}"
                    );
                    // And the source reads them back with a get of some completion kind.
                    let mut back = vec![0u8; size];
                    match it % GET_KINDS {
                        0 => back = rget_slice(dst, size).wait(),
                        1 => rget_into(dst, &mut back),
                        2 => {
                            let cx =
                                rget_with(dst, &mut back, Completions::new().operation_future());
                            cx.operation.expect("asked for").wait();
                        }
                        _ => {
                            let p: Promise = Promise::new();
                            let cx =
                                rget_with(dst, &mut back, Completions::new().operation_promise(&p));
                            assert!(cx.operation.is_none());
                            p.finalize().wait();
                        }
                    }
                    assert!(
                        back == data,
                        "rget of {size} bytes from rank {target} differs"
                    );
                    barrier();
                    it += 1;
                }
            }
            assert_eq!(missing2[me].load(Ordering::SeqCst), 0);
            barrier();
            delete_(buf).unwrap();
            remote_expected
        });
        // Every target ran exactly one remote completion per remote-completion put it got,
        // and every one found its data.
        for (r, &e) in by_rank(n, &expected) {
            assert_eq!(landed[r].load(Ordering::SeqCst), e, "rank {r} of {n}");
            assert!(e >= 10, "rank {r} of {n}");
        }
        assert!(missing.iter().all(|c| c.load(Ordering::SeqCst) == 0));
    }
}

/// Value of element (x, y, z) of rank `r`'s grid.
fn cell(r: usize, x: usize, y: usize, z: usize) -> u64 {
    ((r as u64) << 48) | ((x as u64) << 32) | ((y as u64) << 16) | z as u64
}

const NX: usize = 10;
const NY: usize = 9;
const NZ: usize = 8;
const GRID: usize = NX * NY * NZ;
const STRIDES: [usize; 3] = [1, NX, NX * NY];

fn idx(x: usize, y: usize, z: usize) -> usize {
    x + NX * (y + NY * z)
}

#[test]
fn strided_3d_halo_faces_and_sub_blocks() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            let right = (me + 1) % n;
            let grid = new_array::<u64>(GRID).unwrap();
            let mut model: Vec<u64> = (0..GRID)
                .map(|i| cell(me, i % NX, i / NX % NY, i / (NX * NY)))
                .collect();
            rput_slice(&model, grid).wait();
            let grids = allgather(grid);
            barrier();
            let rg = grids[right];

            // 1. The right neighbour's x = 0 face (a fully strided plane), packed.
            let mut face = vec![0u64; NY * NZ];
            rget_strided(rg, STRIDES, &mut face, [1, 1, NY], [1, NY, NZ]).wait();
            for z in 0..NZ {
                for y in 0..NY {
                    assert_eq!(face[y + NY * z], cell(right, 0, y, z), "x-face ({y},{z})");
                }
            }
            // 2. Its y = NY-1 face (contiguous rows) and z = 0 face (one contiguous plane).
            let mut yface = vec![0u64; NX * NZ];
            rget_strided(
                rg + idx(0, NY - 1, 0),
                STRIDES,
                &mut yface,
                [1, NX, NX],
                [NX, 1, NZ],
            )
            .wait();
            for z in 0..NZ {
                for x in 0..NX {
                    assert_eq!(yface[x + NX * z], cell(right, x, NY - 1, z));
                }
            }
            let mut zface = vec![0u64; NX * NY];
            rget_strided(rg, [1, NX], &mut zface, [1, NX], [NX, NY]).wait();
            assert!(
                zface
                    .iter()
                    .enumerate()
                    .all(|(i, &v)| v == cell(right, i % NX, i / NX, 0))
            );

            // 3. An interior sub-block into a larger local array with its own layout
            //    (destination padded to 7 x 6 x 5 with the block at (1, 1, 1)).
            let (bx, by, bz) = (4, 3, 4);
            let (ox, oy, oz) = (3, 2, 1);
            let dst_strides = [1, 7, 42];
            let mut local = vec![u64::MAX; 7 * 6 * 5];
            rget_strided(
                rg + idx(ox, oy, oz),
                STRIDES,
                &mut local[1 + 7 + 42..],
                dst_strides,
                [bx, by, bz],
            )
            .wait();
            for (i, &v) in local.iter().enumerate() {
                let (x, y, z) = (i % 7, i / 7 % 6, i / 42);
                let inside =
                    (1..=bx).contains(&x) && (1..=by).contains(&y) && (1..=bz).contains(&z);
                let want = if inside {
                    cell(right, ox + x - 1, oy + y - 1, oz + z - 1)
                } else {
                    u64::MAX
                };
                assert_eq!(v, want, "local ({x},{y},{z})");
            }

            // 4. 2-D transpose on get: the fast dimension is strided on the source side.
            let mut t = vec![0u64; NX * NY];
            rget_strided(rg, [NX, 1], &mut t, [1, NY], [NY, NX]).wait();
            for x in 0..NX {
                for y in 0..NY {
                    assert_eq!(t[y + NY * x], cell(right, x, y, 0));
                }
            }
            barrier();

            // 5. Puts: my x = NX-1 face into the right neighbour's x = 0 halo, and a transposed
            //    2-D block into its z = NZ-1 plane; the neighbour checks its whole grid.
            let mine: Vec<u64> = (0..GRID)
                .map(|i| cell(me, i % NX, i / NX % NY, i / (NX * NY)) | 1 << 63)
                .collect();
            rput_strided(
                &mine[idx(NX - 1, 0, 0)..],
                STRIDES,
                rg,
                STRIDES,
                [1, NY, NZ],
            )
            .wait();
            let src2: Vec<u64> = (0..20)
                .map(|i| 7_000 + i as u64 + 100 * me as u64)
                .collect();
            // src2 is a 4 x 5 matrix (x fastest), written transposed as 5 x 4 at (2, 3, NZ-1).
            rput_strided(&src2, [4, 1], rg + idx(2, 3, NZ - 1), [1, NX], [5, 4]).wait();
            barrier();
            let left = (me + n - 1) % n;
            for z in 0..NZ {
                for y in 0..NY {
                    model[idx(0, y, z)] = cell(left, NX - 1, y, z) | 1 << 63;
                }
            }
            for a in 0..5 {
                for b in 0..4 {
                    model[idx(2 + a, 3 + b, NZ - 1)] =
                        7_000 + (b + 4 * a) as u64 + 100 * left as u64;
                }
            }
            let got = rget_slice(grid, GRID).wait();
            for (i, (&g, &m)) in got.iter().zip(&model).enumerate() {
                assert_eq!(
                    g,
                    m,
                    "rank {me} element ({},{},{}) after strided puts",
                    i % NX,
                    i / NX % NY,
                    i / (NX * NY)
                );
            }
            // Empty blocks move nothing.
            rput_strided(&mine, STRIDES, rg, STRIDES, [0, NY, NZ]).wait();
            barrier();
            assert_eq!(rget_slice(grid, GRID).wait(), model);
            barrier();
            delete_(grid).unwrap();
            let _ = rank_n();
        });
    }
}
