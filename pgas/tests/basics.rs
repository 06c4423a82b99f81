//! Hello world, global pointer arithmetic and casts, allocation and exhaustion
//! (after UPC++'s hello_world, global_ptr and alloc tests).

mod common;

use common::{MIB, allgather, by_rank, ranks, ranks_wide, run};
use pgas::{
    GlobalPtr, LaunchConfig, LaunchError, PgasError, RpcTable, barrier, delete_, new_, new_array,
    rank_me, rank_n, rget, rget_slice, rput, rput_slice, shared_bytes_in_use,
};

#[test]
fn hello_every_rank_reports_its_rank_and_the_rank_count() {
    for n in ranks_wide() {
        let out = run(n, 4, RpcTable::new(), || (rank_me(), rank_n()));
        for (r, &got) in by_rank(n, &out) {
            assert_eq!(got, (r, n), "{n} ranks");
        }
    }
}

#[test]
fn launch_returns_the_results_of_this_process_ranks_on_every_conduit() {
    for n in ranks() {
        let out = run(n, 4, RpcTable::new(), || rank_me() * 10);
        let here = common::held_ranks(n);
        assert_eq!((out.ranks(), out.job_ranks()), (here.clone(), n));
        for r in 0..n {
            let expect = here.contains(&r).then_some(r * 10);
            assert_eq!(out.get(r).copied(), expect, "rank {r} of {n}");
        }
        assert_eq!(out.rank0().copied(), here.contains(&0).then_some(0));
        if !common::on_mpi() {
            let every: Vec<usize> = (0..n).map(|r| r * 10).collect();
            assert_eq!(out, every, "on smp this process ran every rank");
        }
        assert_eq!(out.into_rank0(), here.contains(&0).then_some(0));
    }
}

#[test]
fn launch_refuses_a_segment_too_small_for_the_runtime() {
    let e = pgas::launch(
        &LaunchConfig::new(2).segment_bytes(4096),
        RpcTable::new(),
        || (),
    )
    .unwrap_err();
    assert!(matches!(e, LaunchError::Config(_)), "{e:?}");
    assert!(e.to_string().contains("segment size"), "{e}");
}

#[test]
fn global_pointer_arithmetic_casts_ordering_and_null() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            let a = new_array::<u64>(16).unwrap();
            assert!(!a.is_null());
            assert!(a.is_local());
            assert_eq!(a.rank(), me);
            assert_eq!(a.offset() % 8, 0, "u64 arrays are aligned");

            // + and - are in elements, offset_from is their inverse.
            let b = a + 5;
            assert_eq!(b.offset() - a.offset(), 5 * 8);
            assert_eq!(b.offset_from(a), 5);
            assert_eq!(a.offset_from(b), -5);
            assert_eq!(b - 5, a);
            assert_eq!((a + 0), a);
            assert!(a < b);
            assert_eq!(a.max(b), b);
            assert_eq!(a.cmp(&a), std::cmp::Ordering::Equal);
            assert_ne!(a, b);

            // A byte view of the same memory: writes through one are seen through the other.
            let words: Vec<u64> = (0..16)
                .map(|i| 0x0102_0304_0506_0708u64.wrapping_mul(i + 1 + me as u64))
                .collect();
            rput_slice(&words, a).wait();
            let bytes = a.cast::<u8>();
            assert_eq!(bytes.offset(), a.offset());
            assert_eq!((bytes + 8).cast::<u64>(), a + 1);
            assert_eq!((a + 3).cast::<u8>().offset_from(bytes), 24);
            let seen = rget_slice(bytes, 16 * 8).wait();
            assert_eq!(seen, bytemuck::cast_slice::<u64, u8>(&words));
            rput(0xABu8, bytes + 8 * 2 + 3).wait();
            let mut w2 = words[2].to_ne_bytes();
            w2[3] = 0xAB;
            assert_eq!(rget(a + 2).wait(), u64::from_ne_bytes(w2));
            assert_eq!(rget(a + 1).wait(), words[1], "neighbours untouched");
            assert_eq!(rget(a + 3).wait(), words[3], "neighbours untouched");

            // Null.
            let null = GlobalPtr::<u64>::null();
            assert!(null.is_null());
            assert!(!null.is_local());
            assert_eq!(null, GlobalPtr::default());
            assert_ne!(null, a);
            assert!(matches!(null.local(), Err(PgasError::Null { .. })));
            assert!(matches!(delete_(null), Err(PgasError::Null { .. })));

            // Pointers of every rank: rank-major order, equal only to themselves, and usable
            // from anywhere (they are plain data: serialized in a collective here).
            let all = allgather(a);
            assert_eq!(all.len(), rank_n());
            // One node (on mpi: one host), so every segment is local, unless the mpi conduit
            // runs with PGAS_MPI_PSHM=0 (see `expected_nodes`).
            let nodes = common::expected_nodes(None);
            for (r, p) in all.iter().enumerate() {
                assert_eq!(p.rank(), r);
                assert_eq!(p.is_local(), nodes[r] == nodes[me], "segment of rank {r}");
                let v: u64 = rget(*p + 1).wait();
                assert_eq!(v, 0x0102_0304_0506_0708u64.wrapping_mul(2 + r as u64));
            }
            let mut sorted = all.clone();
            sorted.sort();
            assert_eq!(sorted, all, "ordered by rank first");
            if n > 1 {
                let right = all[(me + 1) % n];
                let crossed = std::panic::catch_unwind(|| right.offset_from(a));
                assert!(crossed.is_err(), "offset_from across ranks is refused");
            }
            assert!(std::panic::catch_unwind(|| null + 1).is_err());
            assert!(std::panic::catch_unwind(|| a - (a.offset() / 8 + 1)).is_err());
            barrier();
            delete_(a).unwrap();
        });
    }
}

#[test]
fn global_pointers_stored_in_shared_memory_work_as_a_directory() {
    // Every rank writes its pointer into a directory array owned by rank 0, then everybody
    // reads the directory (pointers are Pod) and reads through each entry.
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            let dir = if me == 0 {
                new_array::<GlobalPtr<u32>>(n).unwrap()
            } else {
                GlobalPtr::null()
            };
            let dir = pgas::broadcast(dir, 0).wait();
            let mine = new_(1000 + me as u32).unwrap();
            rput(mine, dir + me).wait();
            barrier();
            let entries = rget_slice(dir, n).wait();
            for (r, p) in entries.iter().enumerate() {
                assert_eq!(p.rank(), r);
                assert_eq!(rget(*p).wait(), 1000 + r as u32);
            }
            barrier();
            delete_(mine).unwrap();
            if me == 0 {
                delete_(dir).unwrap();
            }
        });
    }
}

#[test]
fn allocation_cycles_exhaustion_and_bad_frees() {
    const SEG: usize = 4 * MIB;
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            let baseline = shared_bytes_in_use();

            // Many new_/delete_ cycles of mixed sizes, freed in a scrambled order; every block
            // holds its own pattern, so an overlap would show.
            for round in 0..150usize {
                let blocks: Vec<(GlobalPtr<u32>, usize)> = (0..12)
                    .map(|k| {
                        let len = (round * 31 + k * 97) % 1500 + 1;
                        let p = new_array::<u32>(len).unwrap();
                        (p, len)
                    })
                    .collect();
                for (k, &(p, len)) in blocks.iter().enumerate() {
                    let fill: Vec<u32> = (0..len as u32).map(|i| i ^ (k as u32) << 20).collect();
                    rput_slice(&fill, p).wait();
                }
                for (k, &(p, len)) in blocks.iter().enumerate() {
                    let got = rget_slice(p, len).wait();
                    assert!(
                        got.iter()
                            .enumerate()
                            .all(|(i, &v)| v == (i as u32) ^ (k as u32) << 20),
                        "block {k} of round {round} was overwritten"
                    );
                }
                let mut order: Vec<usize> = (0..blocks.len()).collect();
                order.sort_by_key(|&k| common::mix((round * 100 + k) as u64));
                for k in order {
                    delete_(blocks[k].0).unwrap();
                }
                assert_eq!(shared_bytes_in_use(), baseline, "round {round}");
            }

            // Memory handed out again is zeroed by new_array and initialised by new_.
            let p = new_array::<u8>(4096).unwrap();
            rput_slice(&[0xFFu8; 4096], p).wait();
            delete_(p).unwrap();
            let q = new_array::<u8>(4096).unwrap();
            assert!(rget_slice(q, 4096).wait().iter().all(|&b| b == 0));
            delete_(q).unwrap();
            let s = new_(0xDEAD_BEEFu64).unwrap();
            assert_eq!(s.read_local().unwrap(), 0xDEAD_BEEF);

            // More than the segment: an error naming the rank and the sizes.
            match new_array::<u8>(SEG + 1) {
                Err(e @ PgasError::OutOfMemory { .. }) => {
                    let PgasError::OutOfMemory {
                        rank,
                        requested,
                        largest_free,
                    } = e
                    else {
                        unreachable!()
                    };
                    assert_eq!((rank, requested), (me, SEG + 1));
                    assert!(largest_free < SEG);
                    let msg = e.to_string();
                    assert!(
                        msg.contains("exhausted") && msg.contains(&format!("rank {me}")),
                        "{msg}"
                    );
                }
                other => panic!("allocating more than the segment gave {other:?}"),
            }
            assert!(matches!(
                new_array::<u64>(usize::MAX / 4),
                Err(PgasError::OutOfMemory { .. })
            ));
            // Fill most of the segment, see the next large block refused, free, retry.
            let big = new_array::<u8>(3 * MIB).unwrap();
            assert!(matches!(
                new_array::<u8>(MIB),
                Err(PgasError::OutOfMemory { .. })
            ));
            delete_(big).unwrap();
            let again = new_array::<u8>(3 * MIB).unwrap();
            delete_(again).unwrap();

            // Double free and interior pointers are BadFree.
            delete_(s).unwrap();
            assert!(matches!(delete_(s), Err(PgasError::BadFree { .. })));
            let arr = new_array::<u64>(8).unwrap();
            let e = delete_(arr + 1).unwrap_err();
            assert!(matches!(e, PgasError::BadFree { .. }), "{e:?}");
            assert!(e.to_string().contains("not a live allocation"), "{e}");
            delete_(arr).unwrap();

            // Another rank's pointer cannot be freed here.
            let mine = new_(me as u64).unwrap();
            let all = allgather(mine);
            if n > 1 {
                let other = all[(me + 1) % n];
                let e = delete_(other).unwrap_err();
                assert!(
                    matches!(e, PgasError::BadFree { rank, .. } if rank == (me + 1) % n),
                    "{e:?}"
                );
                assert!(e.to_string().contains("another rank"), "{e}");
            }
            barrier();
            // The failed delete_ above did not free the neighbour's block.
            assert_eq!(mine.read_local().unwrap(), me as u64);
            delete_(mine).unwrap();
            assert_eq!(shared_bytes_in_use(), baseline);
        });
    }
}
