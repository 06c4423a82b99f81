//! Puts in flight: on the cross-host path (mpirun with `PGAS_MPI_PSHM=0`) an rput returns
//! before its ack, many are in flight at once, source and operation completion differ, and
//! progress, a promise, a barrier or a collective complete them; into memory the process maps
//! (smp, one host) everything is complete at once.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::{on_mpi, run};
use pgas::{
    Completions, Future, GlobalPtr, Promise, RpcFn, RpcTable, allgather, barrier, new_array,
    rank_me, rank_n, rget_slice, rput, rput_slice, rput_with, when_all,
};

/// Puts per rank in each flood.
const FLOOD: usize = 1_000;

/// Whether this job's puts to another rank leave as messages (and complete on their ack).
fn cross_host(p: GlobalPtr<u64>) -> bool {
    on_mpi() && !p.is_local()
}

/// Every rank's array of `len` words, in rank order.
fn arrays(len: usize) -> Vec<GlobalPtr<u64>> {
    let mine = new_array::<u64>(len).unwrap();
    allgather(mine).wait()
}

fn word(rank: usize, i: usize, round: u64) -> u64 {
    (rank as u64) << 40 | (i as u64) << 8 | round
}

#[test]
fn a_flood_of_futures_completes_and_lands() {
    for n in common::ranks_in(&[2, 3, 4]) {
        let pending_seen = run(n, 4, RpcTable::new(), move || {
            let all = arrays(FLOOD);
            let (me, n) = (rank_me(), rank_n());
            let right = all[(me + 1) % n];
            let futures: Vec<Future<()>> = (0..FLOOD)
                .map(|i| rput(word(me, i, 1), right + i))
                .collect();
            let pending = futures.iter().filter(|f| !f.is_ready()).count();
            if !cross_host(right) {
                assert_eq!(pending, 0, "a put into mapped memory is complete at once");
            }
            when_all(futures).wait();
            barrier();
            let left = (me + n - 1) % n;
            let got = rget_slice(all[me], FLOOD).wait();
            for (i, w) in got.iter().enumerate() {
                assert_eq!(*w, word(left, i, 1), "word {i} from rank {left}");
            }
            barrier();
            (pending, cross_host(right))
        });
        assert!(
            pending_seen.iter().all(|&(p, cross)| p > 0 || !cross),
            "on the cross-host path puts return before their acks: {pending_seen:?}"
        );
    }
}

#[test]
fn source_completes_at_once_operation_on_the_ack_and_a_promise_counts_them() {
    for n in common::ranks_in(&[2, 3, 4]) {
        run(n, 4, RpcTable::new(), move || {
            let all = arrays(FLOOD + 64);
            let (me, n) = (rank_me(), rank_n());
            let right = all[(me + 1) % n];
            // Futures for both events: the source is free when the call returns.
            let mut src = vec![0u64; 64];
            let mut ops = Vec::new();
            for k in 0..8u64 {
                src.iter_mut()
                    .enumerate()
                    .for_each(|(i, w)| *w = word(me, i, k));
                let cx = rput_with(
                    &src,
                    right + FLOOD,
                    Completions::new().source_future().operation_future(),
                );
                assert!(cx.source.expect("asked for").is_ready(), "source at once");
                ops.push(cx.operation.expect("asked for"));
            }
            if cross_host(right) {
                assert!(
                    !ops[7].is_ready(),
                    "the last put's ack cannot have come back yet"
                );
            }
            when_all(ops).wait();
            // A promise counts operation completions of a whole flood.
            let p = Promise::new();
            for i in 0..FLOOD {
                let _ = rput_with(
                    &[word(me, i, 2)],
                    right + i,
                    Completions::new().operation_promise(&p),
                );
            }
            if cross_host(right) {
                assert!(p.outstanding() > 1, "acks outstanding on the promise");
            }
            p.finalize().wait();
            barrier();
            let left = (me + n - 1) % n;
            let got = rget_slice(all[me], FLOOD + 64).wait();
            for (i, w) in got[..FLOOD].iter().enumerate() {
                assert_eq!(*w, word(left, i, 2), "promise flood word {i}");
            }
            for i in 0..64 {
                assert_eq!(
                    got[FLOOD + i],
                    word(left, i, 7),
                    "the last of the 8 puts wins"
                );
            }
            barrier();
        });
    }
}

#[test]
fn a_barrier_completes_puts_whose_futures_were_dropped() {
    for n in common::ranks_in(&[2, 3, 4]) {
        run(n, 4, RpcTable::new(), move || {
            let all = arrays(FLOOD);
            let (me, n) = (rank_me(), rank_n());
            for round in 0..3u64 {
                let right = all[(me + 1) % n];
                for i in 0..FLOOD {
                    // The future is dropped on purpose: the barrier must complete the put.
                    drop(rput_slice(&[word(me, i, round)], right + i));
                }
                barrier();
                let left = (me + n - 1) % n;
                let got = rget_slice(all[me], FLOOD).wait();
                for (i, w) in got.iter().enumerate() {
                    assert_eq!(*w, word(left, i, round), "round {round} word {i}");
                }
                barrier();
            }
        });
    }
}

/// A rank that returns from its body with puts in flight loses none: rank 0 starts its puts
/// (futures dropped, a promise-counted flood never waited on, puts asking for nothing) and
/// returns at once, making no progress; rank 1 waits, polling only (no barrier, which would
/// complete them), until every word is there. The end of the job must complete them (on the
/// cross-host path they are window puts that nothing has flushed when rank 0 returns).
#[test]
fn puts_in_flight_when_their_rank_returns_still_land() {
    for n in common::ranks_in(&[2, 3, 4]) {
        run(n, 4, RpcTable::new(), move || {
            let all = arrays(3 * FLOOD);
            barrier();
            match rank_me() {
                0 => {
                    let target = all[1];
                    let p = Promise::new();
                    for i in 0..FLOOD {
                        drop(rput_slice(&[word(0, i, 1)], target + i));
                        let cx = Completions::new().operation_promise(&p);
                        let _ = rput_with(&[word(0, i, 2)], target + (FLOOD + i), cx);
                        let _ = rput_with(
                            &[word(0, i, 3)],
                            target + (2 * FLOOD + i),
                            Completions::new(),
                        );
                    }
                    // Returns with `p` unfinalized and every put possibly in flight.
                }
                1 => {
                    let want: Vec<u64> = (1..=3u64)
                        .flat_map(|round| (0..FLOOD).map(move |i| word(0, i, round)))
                        .collect();
                    pgas::poll_until(|| rget_slice(all[1], 3 * FLOOD).wait() == want);
                }
                _ => {}
            }
        });
    }
}

/// Remote-completion rpcs run at this process's ranks.
static LANDED: AtomicU64 = AtomicU64::new(0);

#[test]
fn remote_completion_sees_the_data() {
    for n in common::ranks_in(&[2, 3, 4]) {
        let mut rpcs = RpcTable::new();
        let check: RpcFn<(GlobalPtr<u64>, u64), ()> =
            rpcs.register("check", |(at, want): (GlobalPtr<u64>, u64)| {
                for i in 0..16 {
                    let got = (at + i).read_local().expect("the rpc runs at the target");
                    assert_eq!(got, want, "the rpc ran before word {i} landed");
                }
                LANDED.fetch_add(1, Ordering::Relaxed);
            });
        let before = LANDED.load(Ordering::Relaxed);
        run(n, 4, rpcs, move || {
            let all = arrays(16 * 32);
            let (me, n) = (rank_me(), rank_n());
            let right = all[(me + 1) % n];
            for k in 0..32usize {
                let at = right + 16 * k;
                let want = word(me, k, 9);
                let _ = rput_with(
                    &[want; 16],
                    at,
                    Completions::new().remote_rpc(check, (at, want)),
                );
            }
            barrier();
        });
        // Launch returns once every rpc sent has run (pgas finalize).
        let ran = LANDED.load(Ordering::Relaxed) - before;
        let per_process = if on_mpi() { 32 } else { 32 * n as u64 };
        assert_eq!(ran, per_process, "remote completions run");
    }
}

/// Gets and atomics to another host are in flight together and complete out of order during
/// progress; into mapped memory they are ready on return.
#[test]
fn gets_and_atomics_are_in_flight_together() {
    const GETS: usize = 500;
    const ADDS: usize = 200;
    for n in common::ranks_in(&[2, 3, 4]) {
        let pending_seen = run(n, 4, RpcTable::new(), move || {
            let all = arrays(FLOOD);
            let (me, n) = (rank_me(), rank_n());
            for i in 0..FLOOD {
                (all[me] + i).write_local(word(me, i, 7)).unwrap();
            }
            let counter = all[0] + (FLOOD - 1);
            if me == 0 {
                counter.write_local(0).unwrap();
            }
            barrier();
            let right = (me + 1) % n;
            let ad = pgas::AtomicDomain::<u64>::new();
            let words: Vec<Future<u64>> = (0..GETS).map(|i| pgas::rget(all[right] + i)).collect();
            let slices: Vec<Future<Vec<u64>>> = [1usize, 100, FLOOD - 1]
                .iter()
                .map(|&len| rget_slice(all[right], len))
                .collect();
            let adds: Vec<Future<u64>> = (0..ADDS).map(|_| ad.fetch_add(counter, 1)).collect();
            let pending = words.iter().filter(|f| !f.is_ready()).count()
                + slices.iter().filter(|f| !f.is_ready()).count()
                + adds.iter().filter(|f| !f.is_ready()).count();
            let cross = cross_host(all[right]);
            if !cross && !cross_host(counter) {
                assert_eq!(pending, 0, "into mapped memory they are ready at once");
            }
            for (i, f) in words.into_iter().enumerate() {
                assert_eq!(f.wait(), word(right, i, 7), "word {i} of rank {right}");
            }
            for f in slices {
                let got = f.wait();
                for (i, w) in got.iter().enumerate() {
                    assert_eq!(*w, word(right, i, 7));
                }
            }
            let mut seen: Vec<u64> = when_all(adds).wait();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(
                seen.len(),
                ADDS,
                "every fetch-add saw its own previous value"
            );
            barrier();
            if me == 0 {
                assert_eq!(ad.load(counter).wait(), (ADDS * n) as u64);
            }
            barrier();
            // A dropped future's atomic still happens; a barrier completes it.
            drop(ad.fetch_add(counter, 1));
            barrier();
            assert_eq!(ad.load(counter).wait(), (ADDS * n + n) as u64);
            barrier();
            (pending, cross)
        });
        assert!(
            pending_seen.iter().all(|&(p, cross)| p > 0 || !cross),
            "on the cross-host path gets and atomics return pending: {pending_seen:?}"
        );
    }
}

/// Floods that the window path tracks cheaply (pgas/src/pending.rs): puts counted on one
/// promise fold into one record per target, and an rput's future holds its number. Every put
/// is still counted on its promise one by one, two promises interleaved on one target each
/// complete on their own, a continuation on such a future runs, a fence completes the puts of
/// held futures (`is_ready` without a wait), and every byte of every put (1 B to 20 KiB, past
/// the staging limit) is at its target once its completion says so, read back without a
/// barrier. Each rank writes a region of its own in every other rank's array.
#[test]
fn folded_and_handle_holding_puts_complete_every_byte() {
    const BIG: usize = 2560;
    const WORDS: usize = 3 * FLOOD + 3 * BIG;
    for n in common::ranks_in(&[2, 3, 4]) {
        run(n, 4, RpcTable::new(), move || {
            let all = arrays(WORDS * n);
            let (me, n) = (rank_me(), rank_n());
            let others: Vec<usize> = (1..n).map(|k| (me + k) % n).collect();
            // Word `i` of this rank's region at rank `t`.
            let at = |t: usize, i: usize| all[t] + (me * WORDS + i);
            let read = |t: usize, from: usize, len: usize| {
                rget_slice(all[t] + (me * WORDS + from), len).wait()
            };
            for round in 1..=2u64 {
                let want: Vec<u64> = (0..WORDS).map(|i| word(me, i, round)).collect();
                // Two promises interleaved, every put to every other rank (targets alternate,
                // so a record folds only puts of one target and one promise).
                let (p, q) = (Promise::new(), Promise::new());
                let mut counted = (0usize, 0usize);
                for i in 0..FLOOD {
                    for &t in &others {
                        let (pr, c) = if i % 3 == 0 {
                            (&q, &mut counted.1)
                        } else {
                            (&p, &mut counted.0)
                        };
                        let _ = rput_with(
                            &want[i..=i],
                            at(t, i),
                            Completions::new().operation_promise(pr),
                        );
                        // Into mapped memory a put is complete at once: nothing to count.
                        *c += usize::from(cross_host(all[t]));
                    }
                }
                // Puts asking for no completion fold too; the barrier at the end of the round
                // completes them (checked there).
                for i in FLOOD..2 * FLOOD {
                    for &t in &others {
                        let _ = rput_with(&want[i..=i], at(t, i), Completions::new());
                    }
                }
                if on_mpi() {
                    assert_eq!(p.outstanding(), counted.0 + 1, "one dependency per put");
                    assert_eq!(q.outstanding(), counted.1 + 1, "one dependency per put");
                }
                q.finalize().wait();
                assert_eq!(q.outstanding(), 0);
                p.finalize().wait();
                assert_eq!(p.outstanding(), 0);
                for &t in &others {
                    for (i, w) in read(t, 0, FLOOD).iter().enumerate() {
                        assert_eq!(*w, want[i], "round {round}: promised word {i} at rank {t}");
                    }
                }
                // Operation futures: byte-sized, word-sized and 20 KiB puts, some chained.
                let bytes: Vec<u8> = bytemuck::cast_slice::<u64, u8>(&want).to_vec();
                let mut futures: Vec<Future<()>> = Vec::new();
                let chained = std::rc::Rc::new(std::cell::Cell::new(0usize));
                for &t in &others {
                    let region = at(t, 0).cast::<u8>();
                    for (i, &w) in want.iter().enumerate().take(3 * FLOOD).skip(2 * FLOOD) {
                        let f = if i % 2 == 0 {
                            // One byte at a time: eight puts per word.
                            let fs: Vec<Future<()>> = (8 * i..8 * i + 8)
                                .map(|b| rput_slice(&bytes[b..=b], region + b))
                                .collect();
                            when_all(fs).then(|_| ())
                        } else {
                            rput(w, at(t, i))
                        };
                        if i % 7 == 0 {
                            let c = chained.clone();
                            futures.push(f.then(move |()| c.set(c.get() + 1)));
                        } else {
                            futures.push(f);
                        }
                    }
                    for k in 0..3 {
                        let from = 3 * FLOOD + k * BIG;
                        futures.push(rput_slice(&want[from..from + BIG], at(t, from)));
                    }
                }
                when_all(futures).wait();
                let chains = (2 * FLOOD..3 * FLOOD).filter(|i| i % 7 == 0).count();
                assert_eq!(
                    chained.get(),
                    chains * others.len(),
                    "every continuation ran"
                );
                for &t in &others {
                    let got = read(t, 2 * FLOOD, WORDS - 2 * FLOOD);
                    for (k, w) in got.iter().enumerate() {
                        let i = 2 * FLOOD + k;
                        assert_eq!(*w, want[i], "round {round}: word {i} at rank {t}");
                    }
                }
                // Futures kept unwaited: a synchronization (a fence, which sends nothing)
                // completes their puts.
                let kept: Vec<Future<()>> = (0..FLOOD)
                    .map(|i| rput(want[i] ^ 1, at(others[0], i)))
                    .collect();
                pgas::fence();
                assert!(
                    kept.iter().all(Future::is_ready),
                    "a fence completes held puts"
                );
                drop(kept);
                barrier();
                // Every other rank's region here, read locally: the puts with no completion
                // and the kept ones of the rank on the left landed by the barrier.
                let left = (me + n - 1) % n;
                let got = rget_slice(all[me], WORDS * n).wait();
                for from in (0..n).filter(|&r| r != me) {
                    for i in 0..WORDS {
                        let mut w = word(from, i, round);
                        if from == left && i < FLOOD {
                            w ^= 1;
                        }
                        assert_eq!(
                            got[from * WORDS + i],
                            w,
                            "round {round}: word {i} of {from}"
                        );
                    }
                }
                barrier();
            }
        });
    }
}
