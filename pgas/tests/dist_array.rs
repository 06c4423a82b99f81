//! DistArray: block and cyclic layouts with uneven sizes, element and range access across
//! owners, element-wise atomics under contention from every rank, reductions against serial
//! references, and the errors of out-of-range indices.

mod common;

use common::{by_rank, mix, ranks, ranks_wide, run};
use pgas::{ArrayError, DistArray, Layout, RpcTable, barrier, rank_me, rank_n, world};

const LAYOUTS: [Layout; 2] = [Layout::Block, Layout::Cyclic];

/// The lengths worth testing on `n` ranks: empty, shorter than the team, one short of a
/// multiple, a multiple, and a longer uneven one.
fn lengths(n: usize) -> Vec<usize> {
    let mut l = vec![0, 1, n.saturating_sub(1), n, 2 * n + 1, 3 * n, 37];
    l.sort();
    l.dedup();
    l
}

/// The value test arrays hold at global index `i`.
fn value(i: usize) -> u64 {
    mix(i as u64 + 1)
}

/// The ranges of an array of `len` the tests read: all of it, every single element's
/// neighbourhood, and ranges that cross owners at odd offsets.
fn ranges(len: usize) -> Vec<std::ops::Range<usize>> {
    let mut r = vec![0..len, 0..0, len..len];
    for s in 0..len {
        r.push(s..(s + 1));
        r.push(s..(s + 5).min(len));
        r.push(s..len);
    }
    r
}

#[test]
fn local_writes_are_read_by_index_and_by_range() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            for layout in LAYOUTS {
                for len in lengths(n) {
                    let a = DistArray::<u64>::new(len, layout).unwrap();
                    assert_eq!((a.len(), a.layout()), (len, layout));
                    let mine = a.local_range();
                    for i in mine.iter() {
                        assert_eq!(a.owner_of(i).unwrap(), rank_me(), "{layout:?} len {len}");
                    }
                    let values: Vec<u64> = mine.iter().map(value).collect();
                    a.write_local(&values).unwrap();
                    assert_eq!(a.read_local(), values);
                    barrier();
                    let owned = pgas::allgather(mine.len()).wait();
                    assert_eq!(
                        owned.iter().sum::<usize>(),
                        len,
                        "every element has one owner"
                    );
                    assert!(owned.iter().max().unwrap() - owned.iter().min().unwrap() <= 1);
                    for i in 0..len {
                        assert_eq!(a.get(i).unwrap().wait(), value(i), "{layout:?} {i}/{len}");
                    }
                    for r in ranges(len) {
                        let want: Vec<u64> = r.clone().map(value).collect();
                        let got = a.get_range(r.clone()).unwrap().wait();
                        assert_eq!(got, want, "{layout:?} len {len}, range {r:?}");
                    }
                    barrier(); // every read is done before anyone drops
                }
            }
        });
    }
}

#[test]
fn ranges_put_across_owners_land_where_they_belong() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            let (me, n) = (rank_me(), rank_n());
            for layout in LAYOUTS {
                for len in lengths(n) {
                    let a = DistArray::<u64>::new(len, layout).unwrap();
                    // Rank r writes the r-th of n nearly equal chunks, which straddle owners.
                    let (lo, hi) = (me * len / n, (me + 1) * len / n);
                    let chunk: Vec<u64> = (lo..hi).map(|i| value(i) ^ 1).collect();
                    a.put_range(lo, &chunk).unwrap().wait();
                    barrier();
                    let whole = a.get_range(0..len).unwrap().wait();
                    let want: Vec<u64> = (0..len).map(|i| value(i) ^ 1).collect();
                    assert_eq!(whole, want, "{layout:?} len {len}");
                    let local: Vec<u64> = a.local_range().iter().map(|i| value(i) ^ 1).collect();
                    assert_eq!(a.read_local(), local, "the puts landed on the owners");
                    barrier();
                    // Single puts, each rank to elements spread over every owner.
                    for i in (0..len).filter(|i| i % n == (me + 1) % n) {
                        a.put(i, value(i)).unwrap().wait();
                    }
                    barrier();
                    for i in 0..len {
                        assert_eq!(a.get(i).unwrap().wait(), value(i));
                    }
                    barrier();
                }
            }
        });
    }
}

#[test]
fn out_of_range_indices_are_errors_naming_index_and_length() {
    for n in ranks() {
        out_of_range_on(n);
    }
}

fn out_of_range_on(n: usize) {
    run(n, 4, RpcTable::new(), || {
        for layout in LAYOUTS {
            let a = DistArray::<u64>::new(5, layout).unwrap();
            let out = ArrayError::IndexOutOfRange { index: 5, len: 5 };
            assert_eq!(a.get(5).err(), Some(out.clone()));
            assert_eq!(
                a.put(7, 1).err(),
                Some(ArrayError::IndexOutOfRange { index: 7, len: 5 })
            );
            assert_eq!(a.owner_of(5).err(), Some(out.clone()));
            assert_eq!(a.fetch_add(5, 1).err(), Some(out.clone()));
            assert_eq!(
                a.load(usize::MAX).err().map(|e| e.to_string()),
                Some(format!(
                    "index {} is out of range for a distributed array of length 5 (valid indices \
                 are 0..5)",
                    usize::MAX
                ))
            );
            let range = |start, end| ArrayError::RangeOutOfBounds { start, end, len: 5 };
            assert_eq!(a.get_range(3..6).err(), Some(range(3, 6)));
            #[allow(clippy::reversed_empty_ranges)]
            let reversed = a.get_range(4..2).err();
            assert_eq!(reversed, Some(range(4, 2)));
            assert_eq!(a.put_range(4, &[1, 2]).err(), Some(range(4, 6)));
            assert_eq!(
                a.put_range(usize::MAX, &[1]).err(),
                Some(range(usize::MAX, usize::MAX))
            );
            assert!(
                range(3, 6).to_string().contains("3..6")
                    && range(3, 6).to_string().contains("length 5")
            );
            let owned = a.local_range().len();
            assert_eq!(
                a.write_local(&vec![0; owned + 1]).err(),
                Some(ArrayError::LocalLength {
                    rank: rank_me(),
                    given: owned + 1,
                    owned
                })
            );
            // An empty array: every index is out of range, the empty range is not.
            let e = DistArray::<u64>::new(0, layout).unwrap();
            assert_eq!(
                e.get(0).err(),
                Some(ArrayError::IndexOutOfRange { index: 0, len: 0 })
            );
            assert_eq!(e.get_range(0..0).unwrap().wait(), Vec::<u64>::new());
            assert!(e.local_range().is_empty());
            barrier();
        }
    });
}

#[test]
fn an_allocation_failure_is_reported_by_every_member() {
    // 1 MiB segments: rank 0's block of a 2-rank block array of 2^18 u64 (1 MiB) cannot fit.
    for n in common::ranks_in(&[2]) {
        let out = run(n, 1, RpcTable::new(), || {
            DistArray::<u64>::new(1 << 18, Layout::Block).err()
        });
        for (_, e) in by_rank(n, &out) {
            assert!(
                matches!(
                    e,
                    Some(ArrayError::OutOfMemory {
                        rank: 0,
                        bytes: 1_048_576
                    })
                ),
                "{e:?}"
            );
        }
    }
}

/// Every rank adds to, xors into, and takes tickets from every element at once.
#[test]
fn atomics_under_contention_from_every_rank() {
    const OPS: u64 = 200;
    for n in ranks_wide() {
        run(n, 4, RpcTable::new(), move || {
            let (me, n) = (rank_me() as u64, rank_n() as u64);
            for layout in LAYOUTS {
                let len = 2 * n as usize + 3;
                let counts = DistArray::<u64>::new(len, layout).unwrap();
                let xors = DistArray::<u64>::new(len, layout).unwrap();
                let lows = DistArray::<i64>::new(len, layout).unwrap();
                let floats = DistArray::<f64>::new(len, layout).unwrap();
                let mut tickets = Vec::new();
                for k in 0..OPS {
                    for i in 0..len {
                        let t = counts.fetch_add(i, 1).unwrap().wait();
                        if i == 0 {
                            tickets.push(t);
                        }
                        xors.fetch_xor(i, mix(me * OPS + k)).unwrap().detach();
                        lows.fetch_min(i, -((me * OPS + k) as i64))
                            .unwrap()
                            .detach();
                        floats.fetch_add(i, 0.5).unwrap().wait();
                    }
                }
                barrier();
                let all_xor = (0..n * OPS).fold(0, |x, v| x ^ mix(v));
                for i in 0..len {
                    assert_eq!(counts.load(i).unwrap().wait(), n * OPS, "{layout:?} {i}");
                    assert_eq!(xors.load(i).unwrap().wait(), all_xor);
                    assert_eq!(lows.load(i).unwrap().wait(), -((n * OPS - 1) as i64));
                    assert_eq!(floats.load(i).unwrap().wait(), (n * OPS) as f64 * 0.5);
                }
                // The tickets of element 0 are every number below n * OPS, each once.
                let mut all: Vec<u64> = pgas::allgather(tickets).wait().concat();
                all.sort_unstable();
                assert_eq!(all, (0..n * OPS).collect::<Vec<_>>());
                // compare_exchange: one winner per element.
                barrier();
                let won = (0..len)
                    .filter(|&i| {
                        counts
                            .compare_exchange(i, n * OPS, 1000 + me)
                            .unwrap()
                            .wait()
                            == n * OPS
                    })
                    .count() as u64;
                assert_eq!(pgas::reduce_all(won, pgas::ops::add).wait(), len as u64);
                barrier();
                for i in 0..len {
                    assert!(counts.load(i).unwrap().wait() >= 1000);
                }
                barrier();
            }
        });
    }
}

/// The binomial tree of the collectives over `n` partials, folded in the order the
/// collectives module documents: a serial model of the combination order.
fn tree_fold<T: Copy>(parts: &[Option<T>], r: usize, op: &impl Fn(T, T) -> T) -> Option<T> {
    let n = parts.len();
    let below = if r == 0 {
        n.next_power_of_two()
    } else {
        r & r.wrapping_neg()
    };
    let mut acc = parts[r];
    let mut d = 1;
    while d < below && r + d < n {
        acc = match (acc, tree_fold(parts, r + d, op)) {
            (Some(a), Some(b)) => Some(op(a, b)),
            (a, b) => a.or(b),
        };
        d *= 2;
    }
    acc
}

#[test]
fn reductions_equal_serial_references() {
    for n in ranks_wide() {
        run(n, 4, RpcTable::new(), move || {
            let n = rank_n();
            for layout in LAYOUTS {
                for len in lengths(n).into_iter().chain([1000]) {
                    let ints = DistArray::<i64>::new(len, layout).unwrap();
                    let floats = DistArray::<f64>::new(len, layout).unwrap();
                    let int_of = |i: usize| (mix(i as u64) % 2001) as i64 - 1000;
                    let float_of =
                        |i: usize| (mix(i as u64 + 7) as f64 / u64::MAX as f64 - 0.5) * 1e6;
                    let mine = ints.local_range();
                    ints.write_local(&mine.iter().map(int_of).collect::<Vec<_>>())
                        .unwrap();
                    floats
                        .write_local(&mine.iter().map(float_of).collect::<Vec<_>>())
                        .unwrap();
                    barrier();
                    let serial: Vec<i64> = (0..len).map(int_of).collect();
                    assert_eq!(ints.sum().wait(), serial.iter().sum::<i64>());
                    assert_eq!(ints.min().wait(), serial.iter().copied().min());
                    assert_eq!(ints.max().wait(), serial.iter().copied().max());
                    // The float sum: each rank's elements left to right, then the tree.
                    let parts: Vec<Option<f64>> = (0..n)
                        .map(|r| {
                            layout
                                .local_indices(r, len, n)
                                .iter()
                                .map(float_of)
                                .reduce(|a, b| a + b)
                        })
                        .collect();
                    let want = tree_fold(&parts, 0, &|a, b| a + b).unwrap_or(0.0);
                    assert_eq!(
                        floats.sum().wait().to_bits(),
                        want.to_bits(),
                        "{layout:?} {len}"
                    );
                    let fl: Vec<f64> = (0..len).map(float_of).collect();
                    assert_eq!(floats.min().wait(), fl.iter().copied().reduce(f64::min));
                    assert_eq!(floats.max().wait(), fl.iter().copied().reduce(f64::max));
                    barrier();
                }
            }
        });
    }
}

/// Of equal extremes (`0.0` and `-0.0`), min and max give the lowest index's, whatever the
/// team size and layout.
#[test]
fn min_and_max_break_ties_by_lowest_index() {
    for n in ranks_wide() {
        let out = run(n, 4, RpcTable::new(), || {
            let mut got = Vec::new();
            for layout in LAYOUTS {
                let a = DistArray::<f64>::new(11, layout).unwrap();
                let v = |i: usize| match i {
                    3 => 0.0,
                    5 | 8 => -0.0,
                    _ => 1.0 + i as f64,
                };
                let b = DistArray::<f64>::new(11, layout).unwrap();
                let w = |i: usize| match i {
                    2 => -0.0,
                    6 => 0.0,
                    _ => -1.0 - i as f64,
                };
                a.write_local(&a.local_range().iter().map(v).collect::<Vec<_>>())
                    .unwrap();
                b.write_local(&b.local_range().iter().map(w).collect::<Vec<_>>())
                    .unwrap();
                barrier();
                got.push((
                    a.min().wait().unwrap().to_bits(),
                    b.max().wait().unwrap().to_bits(),
                ));
                barrier();
            }
            got
        });
        for (_, got) in by_rank(n, &out) {
            let want = (0.0f64.to_bits(), (-0.0f64).to_bits());
            assert_eq!(got, &vec![want, want], "{n} ranks");
        }
    }
}

#[test]
fn an_array_over_a_team_lives_on_its_members() {
    for n in common::ranks_in(&[3, 4, 8]) {
        run(n, 4, RpcTable::new(), move || {
            let odd = world().split((rank_me() % 2) as u64, 0);
            let a = DistArray::<u64>::new_on(&odd, 7, Layout::Cyclic).unwrap();
            // Team rank t owns indices t, t + P, ...; owner_of names world ranks.
            let members = odd.members().to_vec();
            for i in 0..7 {
                assert_eq!(a.owner_of(i).unwrap(), members[i % members.len()]);
            }
            let base = 100 * (rank_me() % 2) as u64;
            if odd.rank_me() == 0 {
                let v: Vec<u64> = (0..7).map(|i| base + i).collect();
                a.put_range(0, &v).unwrap().wait();
            }
            pgas::barrier_on(&odd);
            assert_eq!(a.sum().wait(), 7 * base + 21);
            assert_eq!(
                a.read_local(),
                a.local_range()
                    .iter()
                    .map(|i| base + i as u64)
                    .collect::<Vec<_>>()
            );
            pgas::barrier_on(&odd);
        });
    }
}
