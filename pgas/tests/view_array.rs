//! ViewArray: in-place views of each member's block that later remote gets see, in block and
//! cyclic layouts; puts, ranges, atomics and gets into a block refused while its owner views
//! it (16 ranks under a competing load on smp, every owner in turn, many operations, each
//! refusal checked); shared views that serve gets; reductions and atomics; bad and nested
//! views.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{mix, ranks, ranks_in, run};
use pgas::{ArrayError, Layout, RpcTable, ViewArray, ViewError, barrier, rank_me, rank_n};

const LAYOUTS: [Layout; 2] = [Layout::Block, Layout::Cyclic];

/// The lengths worth testing on `n` ranks: empty, shorter than the team, uneven, longer.
fn lengths(n: usize) -> Vec<usize> {
    let mut l = vec![0, 1, n.saturating_sub(1), 2 * n + 1, 37];
    l.sort();
    l.dedup();
    l
}

fn value(i: usize) -> u64 {
    mix(i as u64 + 1)
}

#[test]
fn in_place_writes_are_seen_by_remote_gets_and_remote_puts_by_later_views() {
    for n in ranks() {
        for layout in LAYOUTS {
            for len in lengths(n) {
                run(n, 1, RpcTable::new(), move || {
                    let a = ViewArray::<u64>::new(len, layout).unwrap();
                    let local = a.local_range();
                    let owned = a
                        .with_local_mut(|s| {
                            assert!(s.iter().all(|&x| x == 0), "a fresh array is zeroed");
                            for (k, x) in s.iter_mut().enumerate() {
                                *x = value(local.global(k));
                            }
                            s.len()
                        })
                        .unwrap();
                    assert_eq!(owned, local.len());
                    barrier();
                    let all: Vec<u64> = (0..len).map(value).collect();
                    assert_eq!(a.get_range(0..len).unwrap(), all, "{layout:?} {len}");
                    for i in 0..len {
                        assert_eq!(a.get(i).unwrap(), value(i));
                        let (s, e) = (i, (i + 5).min(len));
                        assert_eq!(a.get_range(s..e).unwrap(), all[s..e]);
                    }
                    barrier();
                    // Rank 0 overwrites everything by ranges; the owners' views hold it.
                    if rank_me() == 0 {
                        let twice: Vec<u64> = (0..len).map(|i| 2 * i as u64).collect();
                        a.put_range(0, &twice).unwrap();
                    }
                    barrier();
                    a.with_local(|s| {
                        for (k, &x) in s.iter().enumerate() {
                            assert_eq!(x, 2 * local.global(k) as u64);
                        }
                    })
                    .unwrap();
                    barrier();
                    // Every rank puts one element of its right neighbour's block.
                    let right = (rank_me() + 1) % rank_n();
                    let theirs: Vec<usize> = (0..len)
                        .filter(|&i| a.owner_of(i).unwrap() == right)
                        .collect();
                    if let Some(&i) = theirs.first() {
                        a.put(i, 1000 + rank_me() as u64).unwrap();
                    }
                    barrier();
                    let left = (rank_me() + rank_n() - 1) % rank_n();
                    a.with_local(|s| {
                        if !s.is_empty() {
                            assert_eq!(s[0], 1000 + left as u64, "the left neighbour's put");
                        }
                    })
                    .unwrap();
                    barrier();
                });
            }
        }
    }
}

#[test]
fn reductions_and_atomics_from_every_rank() {
    for n in ranks() {
        for layout in LAYOUTS {
            run(n, 1, RpcTable::new(), move || {
                let len = 3 * n + 2;
                let a = ViewArray::<u64>::new(len, layout).unwrap();
                let local = a.local_range();
                a.with_local_mut(|s| {
                    for (k, x) in s.iter_mut().enumerate() {
                        *x = local.global(k) as u64;
                    }
                })
                .unwrap();
                barrier();
                let want = (len * (len - 1) / 2) as u64;
                assert_eq!(a.sum().unwrap(), want);
                assert_eq!(a.min().unwrap(), Some(0));
                assert_eq!(a.max().unwrap(), Some(len as u64 - 1));
                // Every rank adds to every element; each add returns a distinct earlier value.
                for i in 0..len {
                    a.fetch_add(i, 1).unwrap();
                }
                barrier();
                a.with_local(|s| {
                    for (k, &x) in s.iter().enumerate() {
                        assert_eq!(x, (local.global(k) + n) as u64);
                    }
                })
                .unwrap();
                assert_eq!(a.sum().unwrap(), want + (n * len) as u64);
                barrier();
                // One winner per element of a compare-exchange race.
                let won = (0..len)
                    .filter(|&i| {
                        let start = (i + n) as u64;
                        a.compare_exchange(i, start, 0).unwrap() == start
                    })
                    .count() as u64;
                let wins = pgas::reduce_all(won, pgas::ops::add).wait();
                assert_eq!(wins, len as u64);
                barrier();
                assert_eq!(a.max().unwrap(), Some(0));
                assert_eq!(a.load(len - 1).unwrap(), 0);
                barrier();
                if rank_me() == n - 1 {
                    a.store(len - 1, 9).unwrap();
                    assert_eq!(a.exchange(len - 1, 9).unwrap(), 9);
                    assert_eq!(a.fetch_max(len - 1, 4).unwrap(), 9);
                    assert_eq!(a.fetch_min(len - 1, 4).unwrap(), 9);
                    assert_eq!(a.fetch_or(len - 1, 3).unwrap(), 4);
                    assert_eq!(a.fetch_and(len - 1, 6).unwrap(), 7);
                    assert_eq!(a.fetch_xor(len - 1, 6).unwrap(), 6);
                    assert_eq!(a.fetch_sub(len - 1, 1).unwrap(), 0);
                }
                barrier();
                assert_eq!(a.load(len - 1).unwrap(), u64::MAX);
                barrier();

                let s = ViewArray::<i64>::new(len, layout).unwrap();
                s.fetch_min(0, -(rank_me() as i64) - 1).unwrap();
                s.fetch_max(1, rank_me() as i64 + 1).unwrap();
                let f = ViewArray::<f64>::new(len, layout).unwrap();
                f.fetch_add(len - 1, 0.5).unwrap();
                f.fetch_max(0, rank_me() as f64).unwrap();
                f.fetch_min(1, -(rank_me() as f64)).unwrap();
                barrier();
                assert_eq!(s.get(0).unwrap(), -(n as i64));
                assert_eq!(s.get(1).unwrap(), n as i64);
                assert_eq!(s.min().unwrap(), Some(-(n as i64)));
                assert_eq!(f.get(len - 1).unwrap(), 0.5 * n as f64);
                assert_eq!(f.get(0).unwrap(), (n - 1) as f64);
                assert_eq!(f.get(1).unwrap(), -((n - 1) as f64));
                assert_eq!(f.sum().unwrap(), 0.5 * n as f64);
                barrier();
            });
        }
    }
}

/// What one non-owner rank did in one owner's window: operations tried, refused.
type Tally = (u64, u64);

/// Checks that `result` is a refusal of this rank's `op` by `owner`'s view of `view_bytes`
/// (the owner's whole block), and counts it.
fn refused<R: std::fmt::Debug>(
    result: Result<R, ArrayError>,
    op: &str,
    owner: usize,
    view_bytes: usize,
    tally: &mut Tally,
) {
    tally.0 += 1;
    let me = rank_me();
    match result {
        Err(ArrayError::View(
            ref e @ ViewError::Viewed {
                accessor,
                op: seen,
                owner: o,
                view_start,
                view_end,
                ..
            },
        )) => {
            assert_eq!((accessor, o, seen), (me, owner, op), "{e}");
            assert_eq!(view_end - view_start, view_bytes, "{e}");
            let text = e.to_string();
            assert!(
                text.contains(&format!("rank {me}'s {op}"))
                    && text.contains(&format!("rank {owner} holds a local view")),
                "{text}"
            );
            tally.1 += 1;
        }
        other => panic!("rank {me}'s {op} into rank {owner}'s viewed block: {other:?}"),
    }
}

/// Every owner in turn opens an exclusive view of its block, stamps it, and waits in a barrier
/// while every other rank tries many puts, range puts, gets, range gets and atomics of its
/// elements: each is refused, naming accessor, owner and view, and the stamp is intact when
/// the closure ends. Then a shared view: gets and loads served, puts and atomics refused.
/// Once the views are closed every access lands. On smp 16 ranks with threads spinning beside
/// them (a competing load); under mpirun the owner serves other processes' requests from the
/// barrier inside its view.
#[test]
fn accesses_overlapping_an_open_view_are_refused_under_load() {
    const PER_RANK: usize = 24;
    const OPS: usize = 40;
    for n in ranks_in(&[2, 3, 4, 16]) {
        let stop = Arc::new(AtomicBool::new(false));
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
        for layout in LAYOUTS {
            let out = run(n, 1, RpcTable::new(), move || {
                let me = rank_me();
                let len = PER_RANK * n;
                let a = ViewArray::<u64>::new(len, layout).unwrap();
                let view_bytes = PER_RANK * 8;
                let mut tally: Tally = (0, 0);
                for owner in 0..n {
                    let theirs: Vec<usize> = (0..len)
                        .filter(|&i| a.owner_of(i).unwrap() == owner)
                        .collect();
                    let stamp = mix(owner as u64 + 77);
                    if me == owner {
                        a.with_local_mut(|s| {
                            s.fill(stamp);
                            barrier(); // the view is open
                            barrier(); // every other rank has been refused
                            assert!(s.iter().all(|&x| x == stamp), "a write landed in a view");
                        })
                        .unwrap();
                    } else {
                        barrier();
                        let mut seed = mix((me * 1000 + owner) as u64);
                        for _ in 0..OPS {
                            seed = mix(seed);
                            let i = theirs[seed as usize % theirs.len()];
                            match (seed >> 32) % 6 {
                                0 => refused(a.put(i, 1), "put", owner, view_bytes, &mut tally),
                                1 => refused(a.get(i), "get", owner, view_bytes, &mut tally),
                                2 => refused(
                                    a.fetch_add(i, 1),
                                    "atomic",
                                    owner,
                                    view_bytes,
                                    &mut tally,
                                ),
                                3 => refused(
                                    a.compare_exchange(i, stamp, 0),
                                    "atomic",
                                    owner,
                                    view_bytes,
                                    &mut tally,
                                ),
                                4 => refused(a.load(i), "atomic", owner, view_bytes, &mut tally),
                                _ => {
                                    // A range inside the owner's block: one access, refused.
                                    let r = if layout == Layout::Block {
                                        theirs[0]..theirs[0] + PER_RANK
                                    } else {
                                        i..i + 1
                                    };
                                    let src = vec![5; r.len()];
                                    refused(
                                        a.put_range(r.start, &src),
                                        "put",
                                        owner,
                                        view_bytes,
                                        &mut tally,
                                    );
                                    refused(a.get_range(r), "get", owner, view_bytes, &mut tally);
                                }
                            }
                        }
                        barrier();
                    }
                    // A shared view: gets and loads served, puts and atomics refused.
                    if me == owner {
                        a.with_local(|s| {
                            barrier();
                            barrier();
                            assert!(s.iter().all(|&x| x == stamp));
                        })
                        .unwrap();
                    } else {
                        barrier();
                        for &i in theirs.iter().take(4) {
                            assert_eq!(a.get(i).unwrap(), stamp, "a get during a shared view");
                            assert_eq!(a.load(i).unwrap(), stamp);
                            refused(a.put(i, 3), "put", owner, view_bytes, &mut tally);
                            refused(a.fetch_or(i, 1), "atomic", owner, view_bytes, &mut tally);
                        }
                        barrier();
                    }
                    barrier(); // the owner has closed its view
                    // Views closed: every rank's atomic lands.
                    a.fetch_add(theirs[0], 1).unwrap();
                    barrier();
                    if me == owner {
                        let first = a.with_local(|s| s[0]).unwrap();
                        assert_eq!(first, stamp.wrapping_add(n as u64));
                    }
                    barrier();
                }
                tally
            });
            for (tried, refusals) in out.iter() {
                assert_eq!(tried, refusals, "every access during a view refused");
            }
        }
        stop.store(true, Ordering::Relaxed);
        for t in load {
            t.join().unwrap();
        }
    }
}

#[test]
fn bad_and_nested_views_are_refused_with_their_cause() {
    for n in ranks() {
        run(n, 1, RpcTable::new(), move || {
            let me = rank_me();
            let a = ViewArray::<u64>::new(2 * n, Layout::Block).unwrap();
            // An exclusive view inside an exclusive view, and a shared one inside it.
            let inner = a.with_local_mut(|_| a.with_local_mut(|_| ()).map(|_| ()));
            let Ok(Err(ArrayError::View(e @ ViewError::Overlapping { owner, .. }))) = inner else {
                panic!("a nested exclusive view: {inner:?}")
            };
            assert_eq!(owner, me);
            assert!(
                e.to_string().contains("nested views must not overlap"),
                "{e}"
            );
            let inner = a.with_local_mut(|_| a.with_local(|_| ()));
            assert!(matches!(
                inner,
                Ok(Err(ArrayError::View(ViewError::Overlapping { .. })))
            ));
            let inner = a.with_local(|_| a.with_local_mut(|_| ()));
            assert!(matches!(
                inner,
                Ok(Err(ArrayError::View(ViewError::Overlapping { .. })))
            ));
            // Shared views nest.
            assert_eq!(
                a.with_local(|s| a.with_local(|t| s.len() + t.len())),
                Ok(Ok(4))
            );
            // Inside its own exclusive view a rank's own accesses are refused too.
            let own = a.local_range().global(0);
            let inside = a.with_local_mut(|_| a.put(own, 1)).unwrap();
            assert!(matches!(
                inside,
                Err(ArrayError::View(ViewError::Viewed { .. }))
            ));
            // A reduction with one member inside its view fails on every member.
            let sum = if me == 0 {
                a.with_local_mut(|_| a.sum()).unwrap()
            } else {
                a.sum()
            };
            assert_eq!(sum, Err(ArrayError::ReducedInView { rank: 0 }));
            let text = sum.unwrap_err().to_string();
            assert!(text.contains("rank 0 reduced"), "{text}");
            assert_eq!(
                a.get(2 * n),
                Err(ArrayError::IndexOutOfRange {
                    index: 2 * n,
                    len: 2 * n
                })
            );
            assert!(matches!(
                a.put_range(2 * n - 1, &[1, 2]),
                Err(ArrayError::RangeOutOfBounds { .. })
            ));
            // Every access that was refused wrote nothing.
            barrier();
            assert_eq!(a.get_range(0..2 * n).unwrap(), vec![0; 2 * n]);
            barrier();
            // A member with no elements views an empty block.
            let small = ViewArray::<u64>::new(1, Layout::Cyclic).unwrap();
            let seen = small.with_local_mut(|s| s.len()).unwrap();
            assert_eq!(seen, usize::from(me == 0));
            barrier();
        });
    }
}
