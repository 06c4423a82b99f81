//! Local views: in-place mutation that later gets see, puts and gets refused while the owner
//! holds a view (from ranks of the same process and, under mpirun, from other processes,
//! whose requests the owner serves while its closure polls), a stress of many ranks viewing
//! and hammering each other's memory under a competing load, and the refusals of bad views.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};

use common::{mix, ranks, ranks_in, run};
use pgas::{
    GlobalPtr, PgasError, RpcTable, ViewError, ViewPtr, barrier, broadcast, new_, new_array,
    new_viewable, poll_until, progress, rank_me, rank_n, view_get, view_put, with_local_mut,
};

#[test]
fn in_place_mutation_is_seen_by_later_gets_and_puts_by_later_views() {
    for n in ranks() {
        run(n, 1, RpcTable::new(), move || {
            let me = rank_me();
            let mine = new_viewable::<u64>(64).unwrap();
            let all = pgas::allgather(mine).wait();
            let sum = with_local_mut(mine, 64, |v| {
                assert!(v.iter().all(|&x| x == 0), "fresh memory is zeroed");
                for (i, x) in v.iter_mut().enumerate() {
                    *x = (me * 1000 + i) as u64;
                }
                v.iter().sum::<u64>()
            })
            .unwrap();
            assert_eq!(sum, (0..64).map(|i| (me * 1000 + i) as u64).sum::<u64>());
            barrier();
            let right = (me + 1) % n;
            let mut got = vec![0u64; 64];
            view_get(all[right], &mut got).unwrap();
            assert!(
                got.iter()
                    .enumerate()
                    .all(|(i, &x)| x == (right * 1000 + i) as u64)
            );
            // Each rank writes the middle of its right neighbour's block; the owner's next view
            // holds it in place.
            view_put(&[7, 8, 9], all[right] + 10).unwrap();
            barrier();
            with_local_mut(mine + 8, 6, |v| {
                let base = (me * 1000) as u64;
                assert_eq!(v, [base + 8, base + 9, 7, 8, 9, base + 13]);
                v[0] = 1;
            })
            .unwrap();
            let mut one = [0u64];
            view_get(mine + 8, &mut one).unwrap();
            assert_eq!(one, [1]);
        });
    }
}

/// The pointers of the refusal test: rank 0's viewed block and refusal counts, and each
/// hammering rank's flag (1: the view is open, 2: it is closed).
type Pointers = (ViewPtr<u64>, GlobalPtr<u64>, Vec<GlobalPtr<u64>>);

const BLOCK: usize = 256;

/// Rank 0 opens a view, fills it, and polls (serving other processes' requests) until the
/// other ranks have been refused many times; its block is unchanged at the end of the closure.
/// Once the view is closed, a put lands. Runs on smp and under mpirun (where the hammering
/// ranks are other processes, with or without `PGAS_MPI_PSHM=0`).
#[test]
fn puts_and_gets_into_a_viewed_block_are_refused_while_the_view_is_open() {
    for n in ranks_in(&[2, 3, 4]) {
        run(n, 1, RpcTable::new(), move || {
            let me = rank_me();
            let block = if me == 0 {
                new_viewable::<u64>(BLOCK).unwrap()
            } else {
                ViewPtr::null()
            };
            let refusals = new_array::<u64>(n).unwrap();
            let flag = new_(0u64).unwrap();
            let flags = pgas::allgather(flag).wait();
            let (block, counter, flags): Pointers = broadcast((block, refusals, flags), 0).wait();
            if me == 0 {
                with_local_mut(block, BLOCK, |v| {
                    for (i, x) in v.iter_mut().enumerate() {
                        *x = mix(i as u64);
                    }
                    for &f in &flags[1..] {
                        pgas::rput(1, f).wait();
                    }
                    poll_until(|| {
                        let mut counts = vec![0u64; n];
                        counter.read_local_slice(&mut counts).unwrap();
                        counts[1..].iter().all(|&c| c >= 50)
                    });
                    for _ in 0..1000 {
                        progress();
                    }
                    assert!(
                        v.iter().enumerate().all(|(i, &x)| x == mix(i as u64)),
                        "a refused put changed the viewed block"
                    );
                    // Set before the view closes: an access served after this saw the flag.
                    for &f in &flags[1..] {
                        pgas::rput(2, f).wait();
                    }
                })
                .unwrap();
            } else {
                poll_until(|| flag.read_local().unwrap() >= 1);
                let mut refused = 0u64;
                let mut i = 0usize;
                while flag.read_local().unwrap() < 2 {
                    i += 1;
                    // Above the words the final puts write (4 * rank, below 16).
                    let at = block + 128 + (i * 7) % (BLOCK - 128 - 4);
                    let result = if i.is_multiple_of(2) {
                        view_put(&[u64::MAX; 4], at)
                    } else {
                        view_get(at, &mut [0; 4])
                    };
                    let Err(err) = result else {
                        // Served: the view closed, after rank 0 set the flag.
                        assert_eq!(
                            flag.read_local().unwrap(),
                            2,
                            "served while the view is open"
                        );
                        break;
                    };
                    let ViewError::Viewed {
                        accessor,
                        owner,
                        offset,
                        len,
                        view_start,
                        view_end,
                        op,
                    } = err.clone()
                    else {
                        panic!("{err}")
                    };
                    assert_eq!((accessor, owner, offset, len), (me, 0, at.offset(), 32));
                    assert_eq!(
                        (view_start, view_end),
                        (block.offset(), block.offset() + 2048)
                    );
                    assert_eq!(op, if i.is_multiple_of(2) { "put" } else { "get" });
                    let text = err.to_string();
                    assert!(text.contains(&format!("rank {me}'s {op}")), "{text}");
                    refused += 1;
                    // Counted at rank 0, in this rank's word.
                    pgas::rput(refused, counter + me).wait();
                    progress();
                }
                assert!(refused > 0);
                // The flag is set just before the view closes: refused until it has closed.
                loop {
                    match view_put(&[me as u64; 4], block + 4 * me) {
                        Ok(()) => break,
                        Err(ViewError::Viewed { .. }) => {
                            progress();
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            barrier();
            if me == 0 {
                with_local_mut(block, BLOCK, |v| {
                    for r in 1..n {
                        assert_eq!(v[4 * r..4 * r + 4], [r as u64; 4], "rank {r}'s put landed");
                    }
                })
                .unwrap();
            }
            barrier();
        });
    }
}

#[test]
fn bad_views_are_refused_with_their_cause() {
    for n in ranks_in(&[2]) {
        run(n, 1, RpcTable::new(), move || {
            let me = rank_me();
            let mine = new_viewable::<u32>(16).unwrap();
            let other = pgas::allgather(mine).wait()[1 - me];
            let segment = 1 << 20;
            // Length 0: an empty slice, no view taken (an overlapping one can still open).
            let inner = with_local_mut(mine, 0, |v| {
                assert!(v.is_empty());
                with_local_mut(mine, 16, |w| w.len()).unwrap()
            });
            assert_eq!(inner, Ok(16));
            assert!(matches!(
                with_local_mut(mine, segment, |_| ()),
                Err(ViewError::OutOfBounds { rank, len, .. }) if rank == me && len == 4 * segment
            ));
            assert!(matches!(
                view_put(&[1u32; 2], mine + (segment / 4 - 1)),
                Err(ViewError::OutOfBounds { .. })
            ));
            assert_eq!(
                with_local_mut(other, 1, |_| ()),
                Err(ViewError::NotMine { owner: 1 - me, me })
            );
            assert!(matches!(
                with_local_mut(ViewPtr::<u32>::null(), 1, |_| ()),
                Err(ViewError::Null { .. })
            ));
            assert!(matches!(
                with_local_mut(mine.cast::<u8>().cast::<u64>(), 1, |_| ()).and(with_local_mut(
                    (mine.cast::<u8>() + 4).cast::<u64>(),
                    1,
                    |_| ()
                )),
                Err(ViewError::Misaligned { align: 8, .. })
            ));
            // Nested views: disjoint ones open, an overlapping one is refused, the owner's own
            // put into its view is refused; everything works again once they close.
            with_local_mut(mine, 8, |outer| {
                outer[0] = 5;
                let nested = with_local_mut(mine + 8, 8, |v| {
                    v[0] = 6;
                    with_local_mut(mine + 7, 2, |_| ())
                })
                .unwrap();
                assert_eq!(
                    nested,
                    Err(ViewError::Overlapping {
                        owner: me,
                        offset: 28,
                        len: 8,
                        view_start: 0,
                        view_end: 32
                    })
                );
                let own = view_put(&[9u32], mine + 3).unwrap_err();
                assert!(
                    matches!(own, ViewError::Viewed { accessor, owner, .. } if accessor == me && owner == me),
                    "{own}"
                );
                view_put(&[9u32], mine + 12).unwrap();
            })
            .unwrap();
            let mut got = [0u32; 16];
            view_get(mine, &mut got).unwrap();
            assert_eq!((got[0], got[3], got[8], got[12]), (5, 0, 6, 9));
            // At most MAX_VIEWS (8) nested views at once.
            fn nest(p: ViewPtr<u32>, depth: usize) -> Result<usize, ViewError> {
                with_local_mut(p + depth, 1, |_| {
                    if depth == 8 {
                        Ok(depth)
                    } else {
                        nest(p, depth + 1)
                    }
                })?
            }
            assert_eq!(
                nest(mine, 0),
                Err(ViewError::TooManyViews { owner: me, max: 8 })
            );
            // A view past the allocation: a block allocated under it is refused (no hang).
            let past = with_local_mut(mine + 16, 64, |_| new_viewable::<u32>(4)).unwrap();
            assert!(
                matches!(past, Err(PgasError::UnderView { rank, .. }) if rank == me),
                "{past:?}"
            );
            let after = new_viewable::<u32>(4).unwrap();
            assert_eq!(after, mine + 16, "the refused block was freed again");
            pgas::delete_viewable(after).unwrap();
            assert!(matches!(
                pgas::delete_viewable(other),
                Err(PgasError::BadFree { .. })
            ));
            barrier();
            pgas::delete_viewable(mine).unwrap();
        });
    }
}

/// Every rank, many times: opens a view of its own block, stamps it, makes progress (serving
/// other processes' requests) and checks that nothing else landed; or puts a stamp into a
/// random rank's block and reads one back, each either served or refused by the owner's view.
/// 16 ranks on smp, with threads spinning beside them as a competing load.
#[test]
fn stress_many_ranks_viewing_and_hammering_under_load() {
    const WORDS: usize = 32;
    for n in ranks_in(&[2, 3, 4, 16]) {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let load: Vec<_> = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = mix(x);
                        std::hint::black_box(x);
                    }
                })
            })
            .collect();
        let out = run(n, 1, RpcTable::new(), move || {
            let me = rank_me();
            let mine = new_viewable::<u64>(WORDS).unwrap();
            let all = pgas::allgather(mine).wait();
            let (mut views, mut served, mut refused) = (0u64, 0u64, 0u64);
            let mut seed = mix(me as u64 + 1);
            for op in 0..400u64 {
                seed = mix(seed);
                let stamp = ((me as u64) << 32) | op;
                if seed.is_multiple_of(3) {
                    with_local_mut(mine, WORDS, |v| {
                        v.fill(stamp);
                        for _ in 0..3 {
                            progress();
                            std::thread::yield_now();
                        }
                        assert!(v.iter().all(|&x| x == stamp), "a write landed in a view");
                    })
                    .unwrap();
                    views += 1;
                    continue;
                }
                let target = (seed >> 8) as usize % rank_n();
                let at = (seed >> 16) as usize % (WORDS - 4);
                let result = if seed.is_multiple_of(2) {
                    view_put(&[stamp; 4], all[target] + at)
                } else {
                    view_get(all[target] + at, &mut [0; 4])
                };
                match result {
                    Ok(()) => served += 1,
                    Err(ViewError::Viewed {
                        accessor, owner, ..
                    }) if accessor == me && owner == target => refused += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            barrier();
            (views, served, refused)
        });
        stop.store(true, Ordering::Relaxed);
        for t in load {
            t.join().unwrap();
        }
        let ops: u64 = out.iter().map(|(v, s, r)| v + s + r).sum();
        assert_eq!(ops, 400 * out.len() as u64, "every operation accounted for");
    }
}

#[test]
fn an_emulated_memory_loss_poisons_viewable_memory_but_not_an_open_view() {
    for n in ranks() {
        run(n, 1, RpcTable::new(), move || {
            let me = rank_me();
            let cells = new_viewable::<u64>(32).unwrap();
            with_local_mut(cells, 32, |v| v.fill(me as u64 + 1)).unwrap();
            barrier();
            let poison = u64::from_ne_bytes([pgas::runtime_hooks::POISON; 8]);
            if me == 0 {
                // Bytes under the view stay the closure's; the rest of the area is lost.
                with_local_mut(cells + 8, 4, |v| {
                    pgas::runtime_hooks::emulate_memory_loss();
                    assert_eq!(v, [1; 4]);
                })
                .unwrap();
            }
            let mut got = [0u64; 32];
            view_get(cells, &mut got).unwrap();
            for (i, &x) in got.iter().enumerate() {
                let lost = me == 0 && !(8..12).contains(&i);
                assert_eq!(x, if lost { poison } else { me as u64 + 1 }, "cell {i}");
            }
            barrier();
        });
    }
}
