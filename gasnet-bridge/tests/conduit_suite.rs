//! The bridge's behaviour on whatever conduit runs it, with the rank count the conduit gives.
//!
//! Every check is one job whose ranks verify what they can see themselves (on mpi each process
//! only has its own rank's result), so the same checks run:
//!
//! * under `cargo test`, on smp with 2, 3 and 4 ranks;
//! * with the `mpi` feature and `mpirun` on `PATH`, this program starts itself under
//!   `mpirun -n 2`, `-n 3` and `-n 4` (`--child checks`), again under `-n 2` and `-n 3` with
//!   `PGAS_MPI_PSHM=0` (every AM and RMA over MPI, as between hosts), under `-n 4` with one
//!   shared-memory ring per inbox (`PGAS_MPI_RINGS=1`: rings and MPI in one job), then runs the failure
//!   tests: a rank process killed with SIGKILL mid-run (`--child kill`) and a rank that panics
//!   (`--child panic`): every other process must exit non-zero within 10 s, naming the lost
//!   rank on stderr; then connects to a rank's watchdog with a wrong secret and with garbage
//!   (`--child intruded`: both refused and reported, the job finishes normally), and runs a
//!   short job under `mpirun -n 32` (`--child wide`).
//!
//! Without `mpirun` the mpi runs are skipped, except under `CI=true`, where that fails.
//!
//! `MPIRUN` overrides the launcher (default `mpirun`), `MPIRUN_FLAGS` its flags (default
//! `--allow-run-as-root --oversubscribe`, for Open MPI in a root container).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gasnet_bridge::{
    AtomicOp, BridgeError, ConduitKind, Endpoint, HandlerTable, LaunchConfig, MAX_MEDIUM, Payload,
    WriteAck, WriteCounting, launch,
};

const SEG: usize = 4 << 20;

/// The suite's job: it checks the counters, so it counts writes (the default does not).
fn config(ranks: usize) -> LaunchConfig {
    LaunchConfig::new(ranks)
        .segment_bytes(SEG)
        .write_counting(WriteCounting::On)
}

/// Reads each piece of `rank`'s segment with a plain get: together, in order, they hold `src`
/// (what a vector put of case `c` wrote there).
fn pieces_hold(ep: &Endpoint, rank: usize, pieces: &[(usize, usize)], src: &[u8], c: usize) {
    let mut at = 0;
    for &(offset, len) in pieces {
        let mut one = vec![0u8; len];
        ep.get(rank, offset, &mut one).unwrap();
        assert_eq!(one, src[at..at + len], "piece at {offset}, case {c}");
        at += len;
    }
}

fn pattern(key: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let x = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xBF58_476D);
            (x ^ (x >> 29)) as u8
        })
        .collect()
}

fn word(ep: &Endpoint, rank: usize, offset: usize) -> u64 {
    let mut b = [0u8; 8];
    ep.get(rank, offset, &mut b).unwrap();
    u64::from_ne_bytes(b)
}

type Check = (&'static str, fn(usize));

const CHECKS: [Check; 20] = [
    ("puts carry the target's EC and IWC", puts_and_counters),
    ("a job that does not count writes", uncounting_job),
    ("the counting switch", counting_switch),
    (
        "the counting switch with puts in flight",
        switch_with_puts_in_flight,
    ),
    ("uncounted puts land without counting", uncounted_puts),
    ("large puts and gets", large_transfers),
    ("vector puts and gets", vector_transfers),
    ("atomics from every rank", atomics),
    (
        "non-blocking gets and atomics in flight",
        gets_and_atomics_in_flight,
    ),
    ("AM round trips, all categories", am_round_trips),
    ("per-pair FIFO under a flood", fifo_flood),
    ("blocking RMA inside handlers", rma_in_handlers),
    ("errors are returned", errors),
    ("finish completes chained work", finish_chains),
    (
        "many uncounted puts in flight, one completion",
        window_flood,
    ),
    (
        "mixed puts and gets in flight, large and out of order",
        window_mixed,
    ),
    ("uncounted RMA refuses bad addresses", window_errors),
    ("uncounted vector puts and gets", window_vectors),
    ("puts known by their number", flush_ids),
    ("a job on another thread", job_on_another_thread),
];

/// A job launched from a thread other than the one that ran the earlier jobs: on mpi below
/// `MPI_THREAD_SERIALIZED` (the default on the main thread) every rank refuses it before any
/// MPI call, naming the level and the way out; at `SERIALIZED` and above, and on smp, it runs.
fn job_on_another_thread(n: usize) {
    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            launch(&config(n), HandlerTable::new(), |ep| {
                ep.barrier().unwrap();
                ep.ranks()
            })
        })
        .join()
        .unwrap()
    });
    #[cfg(feature = "mpi")]
    if gasnet_bridge::conduit::selected().unwrap() == ConduitKind::Mpi {
        let level = gasnet_bridge::conduit::thread_level_name().unwrap();
        if matches!(level, "MPI_THREAD_SINGLE" | "MPI_THREAD_FUNNELED") {
            let e = outcome
                .expect_err("refused below MPI_THREAD_SERIALIZED")
                .to_string();
            assert!(
                e.contains(level) && e.contains("PGAS_MPI_THREAD=serialized"),
                "{e}"
            );
            return;
        }
    }
    let ranks = outcome.expect("a job on another thread runs");
    assert!(ranks.iter().all(|&r| r == n), "{ranks:?}");
}

/// A job that does not count writes: under mpirun across processes (or `PGAS_MPI_PSHM=0`) its
/// RMA goes through the MPI-3 window (`rma_window.rs`) unless `PGAS_MPI_RMA=am`.
fn uncounted_config(ranks: usize) -> LaunchConfig {
    LaunchConfig::new(ranks).segment_bytes(SEG)
}

/// Thousands of small puts in flight toward the right neighbour, completed by waiting on the
/// last handle only (the others dropped unwaited), then more completed by the barrier alone;
/// an AM sent after puts to the same rank finds them landed.
fn window_flood(n: usize) {
    const PUTS: usize = 5000;
    let seen = per_rank();
    let mut t = HandlerTable::new();
    let s = seen.clone();
    let check = t.register("check", move |tok| {
        let ep = tok.endpoint();
        let mut b = [0u8; 8];
        ep.get(ep.rank(), 3 << 20, &mut b).unwrap();
        s[ep.rank()].store(u64::from_ne_bytes(b), Ordering::Relaxed);
    });
    launch(&uncounted_config(n), t, |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        let right = (me + 1) % n;
        let left = (me + n - 1) % n;
        ep.barrier().unwrap();
        let mut last = None;
        for i in 0..PUTS {
            let v = (me * PUTS + i) as u64;
            last = Some(ep.put_nb(right, i * 8, &v.to_ne_bytes()).unwrap());
        }
        assert_eq!(last.unwrap().wait(ep), WriteAck::UNCOUNTED);
        for i in 0..PUTS {
            let v = (me * PUTS + i) as u64 + 1_000_000;
            drop(ep.put_nb(right, (PUTS + i) * 8, &v.to_ne_bytes()).unwrap());
        }
        // Per-pair order: the AM after the puts sees the last one.
        let marker = 77 + me as u64;
        drop(ep.put_nb(right, 3 << 20, &marker.to_ne_bytes()).unwrap());
        ep.am_request_short(right, check, &[]).unwrap();
        ep.barrier().unwrap();
        for i in 0..PUTS {
            assert_eq!(word(ep, me, i * 8), (left * PUTS + i) as u64, "put {i}");
            let late = word(ep, me, (PUTS + i) * 8);
            assert_eq!(
                late,
                (left * PUTS + i) as u64 + 1_000_000,
                "dropped put {i}"
            );
        }
        ep.wait_until(|| seen[me].load(Ordering::Relaxed) != 0);
        assert_eq!(seen[me].load(Ordering::Relaxed), 77 + left as u64);
        ep.barrier().unwrap();
    })
    .unwrap();
}

/// Puts of every size class (staged, and large ones that wait for local completion) and
/// non-blocking gets of data published before a barrier, all in flight together toward
/// several ranks, completed in reverse order; a dropped get is discarded.
fn window_mixed(n: usize) {
    launch(&uncounted_config(n), HandlerTable::new(), |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        // Every origin's puts fit in its own SEG / 2 / 4 bytes of the lower half.
        let sizes = [1usize, 8, 4000, 16 << 10, (16 << 10) + 1, 300_000];
        // Phase 1: everyone publishes its own pattern in the upper half of its segment.
        let published = pattern(1000 + me as u64, 1 << 20);
        ep.put(me, SEG / 2, &published).unwrap();
        ep.barrier().unwrap();
        let mut puts = Vec::new();
        let mut gets = Vec::new();
        for (k, target) in (0..n).filter(|&r| r != me).enumerate() {
            let mut at = me * (SEG / 2 / n);
            for (i, &len) in sizes.iter().enumerate() {
                let bytes = pattern((me * 100 + i) as u64, len);
                puts.push(ep.put_nb(target, at, &bytes).unwrap());
                at += len;
                let off = SEG / 2 + i * 1000 + k;
                gets.push((target, off, len, ep.get_nb_owned(target, off, len).unwrap()));
            }
            gets.push((
                target,
                SEG / 2,
                1 << 20,
                ep.get_nb_owned(target, SEG / 2, 1 << 20).unwrap(),
            ));
            drop(ep.get_nb_owned(target, SEG / 2, 64).unwrap());
        }
        while let Some((target, off, len, h)) = gets.pop() {
            let want = pattern(1000 + target as u64, 1 << 20);
            assert_eq!(
                h.wait(ep),
                want[off - SEG / 2..off - SEG / 2 + len],
                "get {off}+{len}"
            );
        }
        while let Some(h) = puts.pop() {
            assert_eq!(h.wait(ep), WriteAck::UNCOUNTED);
        }
        ep.barrier().unwrap();
        for origin in (0..n).filter(|&r| r != me) {
            let mut at = origin * (SEG / 2 / n);
            for (i, &len) in sizes.iter().enumerate() {
                let mut got = vec![0u8; len];
                ep.get(me, at, &mut got).unwrap();
                assert_eq!(
                    got,
                    pattern((origin * 100 + i) as u64, len),
                    "from {origin} size {len}"
                );
                at += len;
            }
        }
        ep.barrier().unwrap();
    })
    .unwrap();
}

/// Out-of-segment and unknown-rank RMA in a job that does not count writes is refused before
/// anything is sent, blocking or not, and leaves the job usable.
fn window_errors(n: usize) {
    launch(&uncounted_config(n), HandlerTable::new(), |ep| {
        let n = ep.ranks();
        let right = (ep.rank() + 1) % n;
        let out = |r: Result<(), BridgeError>| {
            assert!(
                matches!(r, Err(BridgeError::OutOfSegment { rank, .. }) if rank == right),
                "{r:?}"
            );
        };
        out(ep.put(right, SEG - 4, &[0; 8]).map(|_| ()));
        out(ep.put_nb(right, SEG, &[0; 1]).map(|_| ()));
        out(ep.put_nb(right, usize::MAX - 2, &[0; 8]).map(|_| ()));
        out(ep.put_uncounted(right, SEG - 1, &[0; 2]));
        out(ep.get(right, SEG - 7, &mut [0; 8]));
        out(ep.get_nb_owned(right, SEG + 1, 0).map(|_| ()));
        assert!(matches!(
            ep.put_nb(n + 3, 0, &[0; 8]),
            Err(BridgeError::NoSuchRank { rank, .. }) if rank == n + 3
        ));
        assert!(matches!(
            ep.get_nb_owned(n, 0, 8),
            Err(BridgeError::NoSuchRank { .. })
        ));
        // Still usable: a put at the very end of the segment.
        ep.put(right, SEG - 8, &7u64.to_ne_bytes()).unwrap();
        ep.barrier().unwrap();
        assert_eq!(word(ep, ep.rank(), SEG - 8), 7);
        ep.barrier().unwrap();
    })
    .unwrap();
}

fn puts_and_counters(n: usize) {
    launch(&config(n), HandlerTable::new(), |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        let right = (me + 1) % n;
        assert_eq!(word(ep, me, 64), 0, "segments start zeroed");
        ep.set_epoch(100 + me as u64);
        ep.barrier().unwrap();
        let ack = ep.put(right, 0, &(me as u64 + 1).to_ne_bytes()).unwrap();
        assert_eq!(ack.iwc, 1, "the first write into rank {right}");
        assert_eq!(ack.ec, 100 + right as u64, "the target's epoch");
        let h = ep.put_nb(right, 8, &[7u8; 8]).unwrap();
        assert_eq!(h.wait(ep).iwc, 2);
        ep.barrier().unwrap();
        assert_eq!(ep.incoming_writes(), 2);
        let left = (me + n - 1) % n;
        assert_eq!(word(ep, me, 0), left as u64 + 1);
        assert_eq!(word(ep, right, 0), me as u64 + 1, "get from another rank");
        ep.barrier().unwrap();
        let mut region = ep.access_region();
        for k in 0..10 {
            region.put(right, 16 + 8 * k, &[k as u8; 8]).unwrap();
        }
        assert_eq!(region.wait_all(), 10);
        ep.barrier().unwrap();
        assert_eq!(ep.incoming_writes(), 12);
        // The topology groups ranks by host; on one machine there is one node.
        let t = ep.topology();
        assert_eq!(t.ranks(), n);
        assert!(t.ranks_on(ep.node()).contains(&me));
        assert!(ep.segment_base(me).is_ok());
    })
    .unwrap();
}

/// The default job does not count: puts, non-blocking puts, atomics and long AMs land with
/// [`WriteAck::UNCOUNTED`] and every IWC stays 0.
fn uncounting_job(n: usize) {
    let longs = per_rank();
    let mut t = HandlerTable::new();
    let l = longs.clone();
    let long = t.register("long", move |tok| {
        let Payload::Long { ack, .. } = tok.payload() else {
            panic!("expected a long payload");
        };
        assert_eq!(ack, WriteAck::UNCOUNTED, "a long AM's ack");
        assert_eq!(
            tok.count_as_write(),
            WriteAck::UNCOUNTED,
            "an rpc-style count"
        );
        l[tok.endpoint().rank()].fetch_add(1, Ordering::Relaxed);
    });
    let job = LaunchConfig::new(n).segment_bytes(SEG);
    assert_eq!(job.write_counting, WriteCounting::Off, "the default");
    launch(&job, t, |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        assert_eq!(ep.write_counting(), WriteCounting::Off);
        let right = (me + 1) % n;
        ep.set_epoch(5);
        ep.barrier().unwrap();
        let small = pattern(me as u64, 8);
        let large = pattern(me as u64 + 9, 300_000);
        assert_eq!(ep.put(right, 0, &small).unwrap(), WriteAck::UNCOUNTED);
        let h = ep.put_nb(right, 4096, &large).unwrap();
        assert_eq!(h.wait(ep), WriteAck::UNCOUNTED);
        let r = ep.atomic(right, 64, AtomicOp::FetchAdd(1)).unwrap();
        assert_eq!(r.ack, Some(WriteAck::UNCOUNTED));
        let h = ep.am_request_long(right, long, &[0], &small, 128).unwrap();
        assert_eq!(h.wait(ep), WriteAck::UNCOUNTED);
        ep.wait_until(|| longs[me].load(Ordering::Relaxed) == 1);
        ep.barrier().unwrap();
        assert_eq!(
            ep.incoming_writes(),
            0,
            "the IWC of a job that does not count"
        );
        left_neighbours_writes_landed(ep, 1);
        ep.barrier().unwrap();
    })
    .unwrap();
}

/// Checks what the left neighbour's writes of the counting tests left in this rank's
/// segment: its 300 000-byte put at 4096 and `atomics` fetch-adds of 1 on the word at 64.
fn left_neighbours_writes_landed(ep: &Endpoint, atomics: u64) {
    let (me, n) = (ep.rank(), ep.ranks());
    let left = (me + n - 1) % n;
    let mut got = vec![0u8; 300_000];
    ep.get(me, 4096, &mut got).unwrap();
    assert_eq!(
        got,
        pattern(left as u64 + 9, 300_000),
        "the large put landed"
    );
    assert_eq!(word(ep, me, 64), atomics, "every atomic landed");
}

/// A job with the counting switch (what cd-runtime launches): writes of every kind into a
/// rank land uncounted until it switches counting on, are counted from IWC 1 while it is on
/// (the small and large put, the non-blocking put, the atomic and the long AM: 5 writes, the
/// EC the target set in each ack), and land uncounted again once it switched off.
fn counting_switch(n: usize) {
    let mut t = HandlerTable::new();
    let longs = per_rank();
    let l = longs.clone();
    let long = t.register("long", move |tok| {
        l[tok.endpoint().rank()].fetch_add(1, Ordering::Relaxed);
    });
    let job = LaunchConfig::new(n)
        .segment_bytes(SEG)
        .write_counting(WriteCounting::Switched);
    launch(&job, t, |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        assert_eq!(ep.write_counting(), WriteCounting::Switched);
        let right = (me + 1) % n;
        let small = pattern(me as u64, 8);
        let large = pattern(me as u64 + 9, 300_000);
        let all_kinds = |round: u64| -> Vec<WriteAck> {
            let mut acks = vec![ep.put(right, 0, &small).unwrap()];
            acks.push(ep.put_nb(right, 4096, &large).unwrap().wait(ep));
            acks.push(ep.put(right, 1024, &large[..100]).unwrap());
            acks.push(
                ep.atomic(right, 64, AtomicOp::FetchAdd(1))
                    .unwrap()
                    .ack
                    .unwrap(),
            );
            acks.push(
                ep.am_request_long(right, long, &[0], &small, 128)
                    .unwrap()
                    .wait(ep),
            );
            ep.wait_until(|| longs[me].load(Ordering::Relaxed) == round);
            acks
        };
        assert!(!ep.counts_incoming_writes(), "off at the start");
        ep.barrier().unwrap();
        let off = all_kinds(1);
        assert!(off.iter().all(|&a| a == WriteAck::UNCOUNTED), "{off:?}");
        ep.barrier().unwrap();
        assert_eq!(ep.incoming_writes(), 0);
        ep.set_epoch(7);
        ep.count_incoming_writes();
        assert!(ep.counts_incoming_writes());
        ep.barrier().unwrap();
        let on = all_kinds(2);
        let want: Vec<WriteAck> = (1..=5).map(|iwc| WriteAck { ec: 7, iwc }).collect();
        assert_eq!(on, want, "counted from 1 at a target that switched on");
        ep.barrier().unwrap();
        assert_eq!(ep.incoming_writes(), 5);
        ep.stop_counting_incoming_writes();
        ep.barrier().unwrap();
        let again = all_kinds(3);
        assert!(again.iter().all(|&a| a == WriteAck::UNCOUNTED), "{again:?}");
        ep.barrier().unwrap();
        assert_eq!(ep.incoming_writes(), 5, "not counted once switched off");
        left_neighbours_writes_landed(ep, 3);
        ep.barrier().unwrap();
    })
    .unwrap();
}

/// Rank 0 switches counting on while every other rank streams non-blocking puts at it (across
/// processes with `PGAS_MPI_PSHM=0` these are MPI-3 window puts, in flight until flushed; the
/// writers make internal progress between them without flushing rank 0, by atomics on a third
/// rank). Each writer's puts are uncounted up to some put and counted from it on; the
/// uncounted ones had all landed when the switch-on returned (rank 0's snapshot holds them);
/// the puts a writer started after it saw a flag rank 0 set after its switch-on are all
/// counted; the counted ones of all writers carry IWC values 1..=IWC, each once.
fn switch_with_puts_in_flight(n: usize) {
    // Rank 0's segment: writer w's slots in the w-th MiB, its report (3 words and one IWC per
    // counted put, at most one per slot) from 4 MiB on.
    const REGION: usize = 1 << 20;
    const SLOTS: usize = REGION / 8;
    const REPORTS: usize = 4 << 20;
    const REPORT: usize = REGION + 4096;
    const SEGMENT: usize = REPORTS + 3 * REPORT;
    const AFTER_FLAG: usize = 32;
    assert!(n <= 4, "the layout holds three writers");
    let job = LaunchConfig::new(n)
        .segment_bytes(SEGMENT)
        .write_counting(WriteCounting::Switched);
    launch(&job, HandlerTable::new(), |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        ep.barrier().unwrap();
        if me == 0 {
            ep.wait_until(|| (1..n).all(|w| word(ep, 0, w * REGION) != 0));
            // Writers that already answered may have counted puts by now: the IWC need not be 0.
            ep.count_incoming_writes();
            let mut snapshot = vec![0u8; REPORTS];
            ep.get(0, 0, &mut snapshot).unwrap();
            for w in 1..n {
                ep.put(w, 0, &1u64.to_ne_bytes()).unwrap();
            }
            ep.barrier().unwrap(); // writers done and reported
            let slot = |bytes: &[u8], w: usize, k: usize| {
                let at = w * REGION + k * 8;
                u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap())
            };
            let mut now = vec![0u8; SEGMENT];
            ep.get(0, 0, &mut now).unwrap();
            let mut iwcs = Vec::new();
            for w in 1..n {
                let report = |i: usize| slot(&now, 0, (REPORTS + (w - 1) * REPORT) / 8 + i);
                let (first_counted, puts, counted) =
                    (report(0) as usize, report(1) as usize, report(2) as usize);
                assert!(
                    counted >= AFTER_FLAG,
                    "writer {w}: only {counted} counted puts, fewer than those after the flag"
                );
                for k in 0..puts {
                    let v = ((w as u64) << 32) | (k as u64 + 1);
                    assert_eq!(slot(&now, w, k), v, "writer {w}'s put {k} landed");
                    if k < first_counted {
                        assert_eq!(
                            slot(&snapshot, w, k),
                            v,
                            "writer {w}'s uncounted put {k} (of {first_counted}) had not \
                             landed when the switch-on returned"
                        );
                    }
                }
                iwcs.extend((0..counted).map(|i| report(3 + i)));
            }
            iwcs.sort_unstable();
            let total = ep.incoming_writes();
            assert_eq!(
                iwcs,
                (1..=total).collect::<Vec<_>>(),
                "counted puts carry IWC 1..={total}, each once"
            );
        } else {
            let third = (1..n).find(|&r| r != me);
            let mut handles = Vec::new();
            let mut after_flag = None;
            let mut k = 0;
            while after_flag.is_none_or(|a| a < AFTER_FLAG) {
                assert!(k < SLOTS, "rank {me}: slots exhausted");
                let v = ((me as u64) << 32) | (k as u64 + 1);
                handles.push(ep.put_nb(0, me * REGION + k * 8, &v.to_ne_bytes()).unwrap());
                k += 1;
                if let Some(a) = &mut after_flag {
                    *a += 1;
                } else if k.is_multiple_of(16) {
                    // Internal progress that does not flush the puts to rank 0.
                    match third {
                        Some(r) => drop(ep.atomic(r, 8, AtomicOp::FetchAdd(1)).unwrap()),
                        None => drop(ep.poll()),
                    }
                    if word(ep, me, 0) == 1 {
                        after_flag = Some(0);
                    } else if k == SLOTS - 2 * AFTER_FLAG {
                        ep.wait_until(|| word(ep, me, 0) == 1);
                        after_flag = Some(0);
                    }
                }
            }
            let acks: Vec<WriteAck> = handles.into_iter().map(|h| h.wait(ep)).collect();
            let first_counted = acks
                .iter()
                .position(|a| *a != WriteAck::UNCOUNTED)
                .expect("the puts after the flag are counted");
            let counted = &acks[first_counted..];
            assert!(
                counted
                    .windows(2)
                    .all(|p| p[0].iwc < p[1].iwc && p[1] != WriteAck::UNCOUNTED),
                "rank {me}: uncounted or out-of-order acks after the first counted: {counted:?}"
            );
            assert!(counted.len() * 8 + 24 <= REPORT, "report fits");
            let mut report = vec![
                first_counted as u64,
                acks.len() as u64,
                counted.len() as u64,
            ];
            report.extend(counted.iter().map(|a| a.iwc));
            let bytes: Vec<u8> = report.iter().flat_map(|x| x.to_ne_bytes()).collect();
            ep.put_uncounted(0, REPORTS + (me - 1) * REPORT, &bytes)
                .unwrap();
            ep.barrier().unwrap();
        }
        ep.barrier().unwrap();
    })
    .unwrap();
}

/// `put_uncounted` of an inline and of a separate payload (larger than a message) land like
/// puts, and the target's IWC does not move; a counted put after them is the next write.
fn uncounted_puts(n: usize) {
    launch(&config(n), HandlerTable::new(), |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        let right = (me + 1) % n;
        ep.put(right, 0, &[1u8; 8]).unwrap();
        ep.barrier().unwrap();
        assert_eq!(ep.incoming_writes(), 1);
        let small = pattern(me as u64, 100);
        let large = pattern(me as u64 + 50, 300_000);
        ep.put_uncounted(right, 64, &small).unwrap();
        ep.put_uncounted(right, 4096, &large).unwrap();
        ep.barrier().unwrap();
        assert_eq!(ep.incoming_writes(), 1, "uncounted puts moved the IWC");
        let left = (me + n - 1) % n;
        let mut got = vec![0u8; small.len()];
        ep.get(me, 64, &mut got).unwrap();
        assert_eq!(got, pattern(left as u64, 100));
        let mut got = vec![0u8; large.len()];
        ep.get(me, 4096, &mut got).unwrap();
        assert_eq!(got, pattern(left as u64 + 50, 300_000));
        ep.barrier().unwrap();
        assert_eq!(ep.put(right, 8, &[2u8; 8]).unwrap().iwc, 2);
        let bad = ep.put_uncounted(right, SEG - 4, &[0u8; 8]);
        assert!(bad.is_err(), "out of the segment: {bad:?}");
        ep.barrier().unwrap();
    })
    .unwrap();
}

fn large_transfers(n: usize) {
    launch(&config(n), HandlerTable::new(), |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        let right = (me + 1) % n;
        let sizes = [0usize, 1, 8000, 8200, 100_000, 1 << 20];
        let mut at = 0;
        for (i, &len) in sizes.iter().enumerate() {
            ep.put(right, at, &pattern((me * 10 + i) as u64, len))
                .unwrap();
            at += len;
        }
        ep.barrier().unwrap();
        let left = (me + n - 1) % n;
        let mut at = 0;
        for (i, &len) in sizes.iter().enumerate() {
            let mut mine = vec![0u8; len];
            ep.get(me, at, &mut mine).unwrap();
            assert_eq!(mine, pattern((left * 10 + i) as u64, len), "size {len}");
            let mut theirs = vec![0u8; len];
            ep.get(right, at, &mut theirs).unwrap();
            assert_eq!(theirs, pattern((me * 10 + i) as u64, len), "get size {len}");
            at += len;
        }
        ep.barrier().unwrap();
    })
    .unwrap();
}

/// Vector puts and gets of a few pieces (one inline message) and of thousands of strided and
/// irregular pieces (a payload that follows its header): the bytes land where the pieces say,
/// each piece counts one write with consecutive IWC values, and a refused vector (a piece
/// outside the segment, sizes that differ) writes and counts nothing.
fn vector_transfers(n: usize) {
    launch(&config(n), HandlerTable::new(), |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        let right = (me + 1) % n;
        let left = (me + n - 1) % n;
        let small = [(40, 3), (0, 5), (100, 0), (17, 8)];
        let mut strided: Vec<(usize, usize)> = (0..3000).map(|k| (4096 + 24 * k, 8)).collect();
        strided.extend((0..500).map(|k| (200_000 - 40 * k, 1 + k % 7)));
        let cases: [&[(usize, usize)]; 2] = [&small, &strided];
        ep.barrier().unwrap();
        let mut writes = 0;
        for (c, pieces) in cases.iter().enumerate() {
            let total: usize = pieces.iter().map(|p| p.1).sum();
            let src = pattern((me * 10 + c) as u64, total);
            let ack = ep.put_vector(right, pieces, &src).unwrap();
            writes += pieces.len() as u64;
            assert_eq!(ack.iwc, writes, "the last piece's IWC value, case {c}");
            let mut back = vec![0u8; total];
            ep.get_vector(right, pieces, &mut back).unwrap();
            assert_eq!(
                back, src,
                "get_vector returns what put_vector wrote, case {c}"
            );
            pieces_hold(ep, right, pieces, &src, c);
        }
        let bad = ep.put_vector(right, &[(0, 4), (SEG - 2, 4)], &[9; 8]);
        assert!(
            matches!(bad, Err(BridgeError::OutOfSegment { .. })),
            "{bad:?}"
        );
        let bad = ep.put_vector(right, &[(0, 4)], &[9; 5]);
        assert!(
            matches!(bad, Err(BridgeError::VectorLength { .. })),
            "{bad:?}"
        );
        let bad = ep.get_vector(right, &[(SEG, 1)], &mut [0]);
        assert!(
            matches!(bad, Err(BridgeError::OutOfSegment { .. })),
            "{bad:?}"
        );
        assert_eq!(ep.put_vector(right, &[], &[]).unwrap().iwc, 0);
        ep.barrier().unwrap();
        assert_eq!(
            ep.incoming_writes(),
            writes,
            "one write per piece from rank {left}, none for refused vectors"
        );
        let mut first = [0u8; 5];
        ep.get(me, 0, &mut first).unwrap();
        assert_eq!(
            first,
            pattern(left as u64 * 10, 8)[3..8],
            "untouched by the refused put"
        );
        ep.barrier().unwrap();
    })
    .unwrap();
}

/// `put_nb_flush`: a number for a put to a rank reached through the window (none for a rank
/// this process maps, on smp, or toward a rank that counts writes); a later number to the same
/// target implies an earlier one, not the reverse, nor across targets; `flush_rma` completes
/// them all, and every byte is there after the barrier.
fn flush_ids(n: usize) {
    const PUTS: usize = 3000;
    let run = |job: LaunchConfig, switch_on: bool| {
        launch(&job, HandlerTable::new(), move |ep| {
            let (me, n) = (ep.rank(), ep.ranks());
            let right = (me + 1) % n;
            let left = (me + n - 1) % n;
            if switch_on {
                ep.count_incoming_writes();
            }
            ep.barrier().unwrap();
            // The window: neither mapped nor reached by messages (`PGAS_MPI_RMA=am`, or a
            // target that switched counting on).
            let window = !ep.maps(right) && !ep.rma_by_messages(right);
            assert!(
                !(window && switch_on),
                "a counting target is reached by messages"
            );
            let mut ids = Vec::new();
            for i in 0..PUTS {
                let v = ((me * PUTS + i) as u64).to_ne_bytes();
                match ep.put_nb_flush(right, i * 8, &v) {
                    Some(id) => ids.push(id.unwrap()),
                    None => {
                        assert!(!window, "rank {me}: no number for a window put");
                        ep.put(right, i * 8, &v).unwrap();
                    }
                }
            }
            assert_eq!(ids.len(), if window { PUTS } else { 0 });
            assert!(
                ep.put_nb_flush(n, 0, &[0]).is_none(),
                "no such rank: no number"
            );
            if let [first, .., last] = ids[..] {
                assert!(last.implies(first) && !first.implies(last) && !first.implies(first));
                if n > 2 {
                    let other = ep
                        .put_nb_flush((me + 2) % n, PUTS * 8, &[1])
                        .unwrap()
                        .unwrap();
                    assert!(!other.implies(first), "across targets");
                }
                ep.flush_rma();
                assert!(ids.iter().all(|&id| ep.flushed(id)), "flushed");
                assert!(ep.put_nb_flush(right, SEG, &[0]).unwrap().is_err());
            }
            ep.barrier().unwrap();
            for i in 0..PUTS {
                assert_eq!(word(ep, me, i * 8), (left * PUTS + i) as u64, "put {i}");
            }
            ep.barrier().unwrap();
        })
        .unwrap();
    };
    run(uncounted_config(n), false);
    let switched = LaunchConfig::new(n)
        .segment_bytes(SEG)
        .write_counting(WriteCounting::Switched);
    run(switched, true);
}

/// Vector puts and gets in a job that does not count (across processes: one MPI call with the
/// pieces as a datatype), then in a job with the counting switch toward a rank that switched
/// on (active messages, counted): a strided row (one `hvector`), irregular pieces in order
/// with empty ones (`hindexed`), gets in any order with overlaps, a single piece, and puts
/// whose pieces overlap or go backwards, which land in order, the later piece winning.
fn window_vectors(n: usize) {
    fn exercise(ep: &Endpoint, counted: bool) {
        let (me, n) = (ep.rank(), ep.ranks());
        let right = (me + 1) % n;
        let strided: Vec<(usize, usize)> = (0..64).map(|k| (8192 + 4096 * k, 8)).collect();
        let irregular: Vec<(usize, usize)> = (0..700)
            .map(|k| (600_000 + 50 * k + k % 3, k % 11))
            .collect();
        let single = [(1_000_000, 300)];
        let mut writes = 0;
        for (c, pieces) in [&strided[..], &irregular[..], &single[..]]
            .iter()
            .enumerate()
        {
            let total: usize = pieces.iter().map(|p| p.1).sum();
            let src = pattern((me * 31 + c) as u64, total);
            let ack = ep.put_vector(right, pieces, &src).unwrap();
            if counted {
                writes += pieces.len() as u64;
                assert_eq!(ack.iwc, writes, "counted vector put, case {c}");
            } else {
                assert_eq!(ack, WriteAck::UNCOUNTED, "case {c}");
            }
            pieces_hold(ep, right, pieces, &src, c);
            // The same pieces read back in reverse order, each twice.
            let again: Vec<(usize, usize)> = pieces.iter().rev().flat_map(|&p| [p, p]).collect();
            let mut back = vec![0u8; 2 * total];
            ep.get_vector(right, &again, &mut back).unwrap();
            let mut want = Vec::new();
            let mut end = total;
            for &(_, len) in pieces.iter().rev() {
                let piece = &src[end - len..end];
                want.extend_from_slice(piece);
                want.extend_from_slice(piece);
                end -= len;
            }
            assert_eq!(back, want, "reversed doubled get, case {c}");
        }
        // Overlapping and backward pieces: written in order, the later one winning.
        let a = pattern(me as u64 + 500, 16);
        let b = pattern(me as u64 + 600, 16);
        let both: Vec<u8> = a.iter().chain(&b).copied().collect();
        ep.put_vector(right, &[(2_000_000, 16), (2_000_008, 16)], &both)
            .unwrap();
        ep.put_vector(right, &[(2_100_008, 16), (2_100_000, 16)], &both)
            .unwrap();
        let mut got = [0u8; 24];
        ep.get(right, 2_000_000, &mut got).unwrap();
        assert_eq!(got[..8], a[..8], "overlap: first piece's head");
        assert_eq!(got[8..], b[..], "overlap: the later piece wins");
        ep.get(right, 2_100_000, &mut got).unwrap();
        assert_eq!(got[..16], b[..], "backward: second piece");
        assert_eq!(got[16..], a[8..], "backward: the first piece's tail");
        let bad = ep.put_vector(right, &[(0, 4), (SEG - 2, 4)], &[9; 8]);
        assert!(
            matches!(bad, Err(BridgeError::OutOfSegment { .. })),
            "{bad:?}"
        );
        let bad = ep.get_vector(right, &[(8, 1), (SEG, 1)], &mut [0; 2]);
        assert!(
            matches!(bad, Err(BridgeError::OutOfSegment { .. })),
            "{bad:?}"
        );
    }
    launch(&uncounted_config(n), HandlerTable::new(), |ep| {
        ep.barrier().unwrap();
        exercise(ep, false);
        ep.barrier().unwrap();
    })
    .unwrap();
    let job = LaunchConfig::new(n)
        .segment_bytes(SEG)
        .write_counting(WriteCounting::Switched);
    launch(&job, HandlerTable::new(), |ep| {
        ep.count_incoming_writes();
        ep.barrier().unwrap();
        exercise(ep, true);
        ep.barrier().unwrap();
    })
    .unwrap();
}

fn atomics(n: usize) {
    launch(&config(n), HandlerTable::new(), |ep| {
        let n = ep.ranks();
        for _ in 0..200 {
            let r = ep.atomic(0, 64, AtomicOp::FetchAdd(1)).unwrap();
            assert!(r.ack.is_some());
        }
        ep.atomic(n - 1, 128, AtomicOp::MaxI64(-(ep.rank() as i64)))
            .unwrap();
        ep.barrier().unwrap();
        let total = ep.atomic(0, 64, AtomicOp::Load).unwrap();
        assert_eq!(total.previous, 200 * n as u64);
        assert_eq!(total.ack, None, "a load writes nothing");
        assert_eq!(ep.atomic(n - 1, 128, AtomicOp::Load).unwrap().previous, 0);
        let failed = ep
            .atomic(0, 64, AtomicOp::CompareExchange { current: 1, new: 2 })
            .unwrap();
        assert_eq!((failed.previous, failed.ack), (200 * n as u64, None));
        ep.barrier().unwrap();
    })
    .unwrap();
}

/// Every rank starts gets of three sizes (inline, a little above one eager message, 96 KiB)
/// from every rank and fetch-adds on rank 0's word, all in flight before any is waited on;
/// some handles are dropped unfinished. Between hosts (`PGAS_MPI_PSHM=0`) they complete out
/// of order during progress; in mapped memory at once.
fn gets_and_atomics_in_flight(n: usize) {
    const SIZES: [usize; 3] = [40, 9000, 96 << 10];
    const ADDS: usize = 300;
    launch(&config(n), HandlerTable::new(), |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        let base = 1 << 20;
        for (k, &len) in SIZES.iter().enumerate() {
            let at = base + k * (128 << 10);
            ep.put(me, at, &pattern((me * 10 + k) as u64, len)).unwrap();
        }
        ep.barrier().unwrap();
        let mut gets = Vec::new();
        for round in 0..4 {
            for r in 0..n {
                for (k, &len) in SIZES.iter().enumerate() {
                    let at = base + k * (128 << 10);
                    let h = ep.get_nb_owned(r, at, len).unwrap();
                    if round == 3 && k == 1 {
                        drop(h); // abandoned: its reply is discarded
                        continue;
                    }
                    gets.push((r, k, h));
                }
            }
        }
        let mut adds: Vec<_> = (0..ADDS)
            .map(|_| ep.atomic_nb(0, 64, AtomicOp::FetchAdd(1)).unwrap())
            .collect();
        if std::env::var("PGAS_MPI_PSHM").as_deref() == Ok("0") {
            // Every other rank is on another "host": its operations are in flight.
            let remote = gets.iter().filter(|(r, _, _)| *r != me).count();
            let pending = gets
                .iter()
                .filter(|(_, _, h)| !h.completed_at_once())
                .count();
            assert_eq!(pending, remote, "gets from other hosts return pending");
            if me != 0 {
                assert!(adds.iter().all(|h| h.completed_at_once().is_none()));
            }
        }
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !gets.is_empty() || !adds.is_empty() {
            assert!(Instant::now() < deadline, "gets or atomics never completed");
            ep.poll();
            gets.retain_mut(|(r, k, h)| match h.take_arrived() {
                Some(bytes) => {
                    assert_eq!(
                        bytes,
                        pattern((*r * 10 + *k) as u64, SIZES[*k]),
                        "get {r} {k}"
                    );
                    false
                }
                None => true,
            });
            adds.retain(|h| match h.arrived() {
                Some(res) => {
                    assert!(res.ack.is_some(), "a fetch-add writes");
                    seen.push(res.previous);
                    false
                }
                None => true,
            });
        }
        // Every fetch-add saw a different previous value.
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), ADDS);
        ep.barrier().unwrap();
        let total = ep.atomic_nb(0, 64, AtomicOp::Load).unwrap().wait(ep);
        assert_eq!(total.previous, (ADDS * n) as u64);
        // A waited handle returns its data too.
        let at = base + 2 * (128 << 10);
        let got = ep
            .get_nb_owned((me + 1) % n, at, SIZES[2])
            .unwrap()
            .wait(ep);
        assert_eq!(got, pattern((((me + 1) % n) * 10 + 2) as u64, SIZES[2]));
        ep.barrier().unwrap();
    })
    .unwrap();
}

/// One counter per rank (on smp the ranks share the handlers' captured state).
fn per_rank() -> Arc<Vec<AtomicU64>> {
    Arc::new((0..64).map(|_| AtomicU64::new(0)).collect())
}

fn am_round_trips(n: usize) {
    let replies = per_rank();
    let longs = per_rank();
    let mut t = HandlerTable::new();
    let r = replies.clone();
    let reply = t.register("reply", move |tok| {
        assert!(tok.is_reply());
        let key = tok.args()[0];
        match tok.payload() {
            Payload::Medium(p) => assert_eq!(p, &pattern(key, p.len())[..]),
            other => panic!("expected a medium reply, got {other:?}"),
        }
        r[tok.endpoint().rank()].fetch_add(1, Ordering::Relaxed);
    });
    let request = t.register("request", move |tok| {
        let (key, len) = (tok.args()[0], tok.args()[1] as usize);
        match tok.payload() {
            Payload::Medium(p) => assert_eq!(p, &pattern(key, len)[..]),
            Payload::None => assert_eq!(len, usize::MAX),
            other => panic!("unexpected {other:?}"),
        }
        let back = if len == usize::MAX { 3 } else { len };
        tok.reply_medium(reply, &[key + 1], &pattern(key + 1, back))
            .unwrap();
    });
    let l = longs.clone();
    let long = t.register("long", move |tok| {
        let Payload::Long { offset, len, ack } = tok.payload() else {
            panic!("expected a long payload");
        };
        assert!(ack.iwc >= 1);
        let mut got = vec![0u8; len];
        tok.endpoint()
            .get(tok.endpoint().rank(), offset, &mut got)
            .unwrap();
        assert_eq!(got, pattern(tok.args()[0], len));
        l[tok.endpoint().rank()].fetch_add(1, Ordering::Relaxed);
    });
    launch(&config(n), t, |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        let mut expected = 0;
        for target in 0..n {
            for &len in &[usize::MAX, 0, 100, 9000, MAX_MEDIUM] {
                let key = (me * 1000 + target * 10) as u64 + len as u64 % 7;
                if len == usize::MAX {
                    ep.am_request_short(target, request, &[key, len as u64])
                        .unwrap();
                } else {
                    ep.am_request_medium(target, request, &[key, len as u64], &pattern(key, len))
                        .unwrap();
                }
                expected += 1;
            }
        }
        let right = (me + 1) % n;
        for (i, len) in [10usize, 20_000].into_iter().enumerate() {
            let key = (me * 7 + i) as u64;
            let h = ep
                .am_request_long(right, long, &[key], &pattern(key, len), 4096 * (1 + i))
                .unwrap();
            assert!(h.wait(ep).iwc >= 1);
        }
        ep.wait_until(|| replies[me].load(Ordering::Relaxed) == expected);
        ep.barrier().unwrap();
        ep.wait_until(|| longs[me].load(Ordering::Relaxed) == 2);
    })
    .unwrap();
}

fn fifo_flood(n: usize) {
    const FLOOD: u64 = 20_000;
    let next = Arc::new((0..64).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
    let mut t = HandlerTable::new();
    let nx = next.clone();
    let seq = t.register("seq", move |tok| {
        let expect = nx[tok.source()].fetch_add(1, Ordering::Relaxed);
        assert_eq!(
            tok.args()[0],
            expect,
            "messages from rank {} reordered",
            tok.source()
        );
    });
    launch(&config(n), t, |ep| {
        let n = ep.ranks();
        if ep.rank() != 0 {
            for i in 0..FLOOD {
                ep.am_request_short(0, seq, &[i]).unwrap();
            }
        } else {
            // Rank 0 is slow to poll at first: the senders must be held back by credits.
            std::thread::sleep(Duration::from_millis(200));
        }
        ep.barrier().unwrap();
        if ep.rank() == 0 {
            ep.wait_until(|| (1..n).all(|r| next[r].load(Ordering::Relaxed) == FLOOD));
        }
    })
    .unwrap();
}

fn rma_in_handlers(n: usize) {
    let done = per_rank();
    let mut t = HandlerTable::new();
    let d = done.clone();
    let finished = t.register("finished", move |tok| {
        d[tok.endpoint().rank()].fetch_add(1, Ordering::Relaxed);
    });
    let work = t.register("work", move |tok| {
        let ep = tok.endpoint();
        let src = tok.source();
        let ack = ep
            .put(src, 256 + 8 * ep.rank(), &[ep.rank() as u8 + 1; 8])
            .unwrap();
        assert!(ack.iwc >= 1);
        ep.atomic(src, 1024, AtomicOp::FetchAdd(1)).unwrap();
        let mut b = [0u8; 8];
        ep.get(src, 1024, &mut b).unwrap();
        tok.reply_short(finished, &[]).unwrap();
    });
    launch(&config(n), t, |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        for target in (0..n).filter(|&t| t != me) {
            ep.am_request_short(target, work, &[]).unwrap();
        }
        ep.wait_until(|| done[me].load(Ordering::Relaxed) == n as u64 - 1);
        assert_eq!(word(ep, me, 1024), n as u64 - 1);
        for r in (0..n).filter(|&t| t != me) {
            assert_eq!(
                word(ep, me, 256 + 8 * r),
                u64::from_ne_bytes([r as u8 + 1; 8])
            );
        }
        ep.barrier().unwrap();
    })
    .unwrap();
}

fn errors(n: usize) {
    launch(&config(n), HandlerTable::new(), |ep| {
        let n = ep.ranks();
        let right = (ep.rank() + 1) % n;
        assert!(matches!(
            ep.put(right, SEG - 4, &[0; 8]),
            Err(BridgeError::OutOfSegment { offset, .. }) if offset == SEG - 4
        ));
        assert!(matches!(
            ep.get(n, 0, &mut [0; 8]),
            Err(BridgeError::NoSuchRank { rank, ranks }) if rank == n && ranks == n
        ));
        assert!(matches!(
            ep.atomic(right, 12, AtomicOp::Load),
            Err(BridgeError::Misaligned { .. })
        ));
        match ep.segment_base(right) {
            Ok(_) => {}
            Err(e) => assert!(matches!(e, BridgeError::NotAddressable { .. }), "{e}"),
        }
        ep.barrier().unwrap();
        assert_eq!(
            ep.incoming_writes(),
            0,
            "refused operations leave no write behind"
        );
    })
    .unwrap();
}

fn finish_chains(n: usize) {
    // Rank r's request starts a chain of `HOPS` requests around the ring; nobody waits for
    // it: the end of the job must run every hop before `launch` returns.
    const HOPS: u64 = 50;
    let hops = Arc::new(AtomicU64::new(0));
    let mut t = HandlerTable::new();
    let h = hops.clone();
    let id = Arc::new(std::sync::OnceLock::new());
    let id2 = id.clone();
    let hop = t.register("hop", move |tok| {
        h.fetch_add(1, Ordering::Relaxed);
        let left = tok.args()[0];
        if left > 0 {
            let ep = tok.endpoint();
            ep.am_request_short(
                (ep.rank() + 1) % ep.ranks(),
                *id2.get().unwrap(),
                &[left - 1],
            )
            .unwrap();
        }
    });
    id.set(hop).unwrap();
    let per_rank = launch(&config(n), t, |ep| {
        ep.am_request_short((ep.rank() + 1) % ep.ranks(), hop, &[HOPS - 1])
            .unwrap();
    })
    .unwrap();
    // Every chain visits each rank in turn; in total n * HOPS hops ran.
    let total = hops.load(Ordering::Relaxed);
    if per_rank.len() == n {
        assert_eq!(total, n as u64 * HOPS);
    } else {
        assert_eq!(total, HOPS, "each rank runs one hop of every chain per lap");
    }
}

fn run_checks(n: usize) {
    for (name, check) in CHECKS {
        let start = Instant::now();
        check(n);
        if gasnet_bridge::returned_ranks(n).is_some_and(|r| r.start == 0) {
            eprintln!("  ok ({n} ranks) {name} [{:?}]", start.elapsed());
        }
    }
}

/// Under mpirun: the checks, or a failure scenario.
fn child(mode: &str) {
    let n = std::env::var("OMPI_COMM_WORLD_SIZE")
        .or_else(|_| std::env::var("PMI_SIZE"))
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    assert_eq!(
        gasnet_bridge::conduit::selected().unwrap(),
        ConduitKind::Mpi
    );
    match mode {
        "checks" => run_checks(n),
        "kill" | "panic" => {
            let victim = 2;
            let r = launch(&config(n), HandlerTable::new(), |ep| {
                println!("rank {} pid {}", ep.rank(), std::process::id());
                ep.barrier().unwrap();
                let right = (ep.rank() + 1) % ep.ranks();
                for i in 0u64.. {
                    if mode == "panic" && ep.rank() == victim && i == 300 {
                        panic!("rank {victim} gives up on purpose");
                    }
                    ep.put(right, 0, &i.to_ne_bytes()).unwrap();
                    ep.barrier().unwrap();
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            match r {
                Ok(_) => unreachable!("the loop never ends"),
                Err(e) => {
                    eprintln!("suite child pid {}: launch failed: {e}", std::process::id());
                    std::process::exit(1);
                }
            }
        }
        "wide" => wide_job(n),
        "intruded" => intruded_job(n),
        other => panic!("unknown child mode {other}"),
    }
}

/// A short job on many ranks: start-up (watchdog tree included), a ring of puts, barriers,
/// teardown. Rank 0 reports success on stdout.
fn wide_job(n: usize) {
    let cfg = LaunchConfig::new(n).segment_bytes(64 << 10);
    launch(&cfg, HandlerTable::new(), |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        ep.barrier().unwrap();
        ep.put((me + 1) % n, 0, &(me as u64).to_ne_bytes()).unwrap();
        ep.barrier().unwrap();
        assert_eq!(word(ep, me, 0), ((me + n - 1) % n) as u64);
        ep.barrier().unwrap();
        if me == 0 {
            println!("wide job of {n} ranks done");
        }
    })
    .unwrap();
}

/// A job that keeps running until the file named by `PGAS_SUITE_MARKER` exists (the parent
/// creates it after its intruders have connected), then checks that it still works.
fn intruded_job(n: usize) {
    let marker = std::env::var("PGAS_SUITE_MARKER").expect("PGAS_SUITE_MARKER");
    launch(&config(n), HandlerTable::new(), |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        let start = Instant::now();
        loop {
            let mut go = [0u8; 8];
            if me == 0 && std::path::Path::new(&marker).exists() {
                go = [1; 8];
            }
            ep.barrier().unwrap();
            if me == 0 {
                ep.put(0, 0, &go).unwrap();
            }
            ep.barrier().unwrap();
            if word(ep, 0, 0) != 0 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "no marker");
            std::thread::sleep(Duration::from_millis(10));
        }
        ep.barrier().unwrap();
        ep.put((me + 1) % n, 8, &[1u8; 8]).unwrap();
        ep.barrier().unwrap();
        assert_eq!(word(ep, me, 8), u64::from_ne_bytes([1u8; 8]));
        if me == 0 {
            println!("intruded job done");
        }
    })
    .unwrap();
}

/// `mpirun -n 32` of a short job: the watchdog's tree and the rest of start-up and teardown
/// hold up at that size (on 2 cores, oversubscribed).
fn wide_test() {
    let n = 32;
    let start = Instant::now();
    let out = mpirun(n, "wide").output().expect("start mpirun");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("wide job of 32 ranks done"),
        "mpirun -n {n} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "  ok {n} ranks: start-up, barriers, teardown in {:?}",
        start.elapsed()
    );
}

/// Connects to a rank's watchdog with a wrong secret and with garbage while a job runs: both
/// are refused and reported on stderr, and the job finishes normally.
fn intruder_test() {
    let marker = std::env::temp_dir().join(format!("pgas-suite-marker-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let mut child = mpirun(3, "intruded")
        .env("PGAS_MPI_WATCHDOG_VERBOSE", "1")
        .env("PGAS_SUITE_MARKER", &marker)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let err_reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let addr: std::net::SocketAddr = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a rank announced its watchdog address");
        if let Some(a) = line.split("watchdog listening on ").nth(1) {
            break a.trim().parse().expect("an address");
        }
    };
    assert!(
        addr.ip().is_loopback(),
        "a one-host job listens on loopback only: {addr}"
    );
    {
        use std::io::Write;
        let mut wrong = std::net::TcpStream::connect(addr).expect("connect");
        let mut hello = b"PGASWD01".to_vec();
        hello.extend_from_slice(&1u64.to_le_bytes());
        hello.extend_from_slice(&[0x5a; 32]);
        wrong.write_all(&hello).unwrap();
        let mut garbage = std::net::TcpStream::connect(addr).expect("connect");
        garbage.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(500));
    }
    std::fs::write(&marker, b"go").unwrap();
    let status = child.wait().expect("mpirun ends");
    let _ = std::fs::remove_file(&marker);
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    let stderr = err_reader.join().unwrap();
    assert!(
        status.success() && stdout.contains("intruded job done"),
        "the job must finish normally despite the intruders:\n{stdout}\n{stderr}"
    );
    for why in ["wrong secret", "garbage"] {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("watchdog refused a connection") && l.contains(why)),
            "the {why} intruder was not reported:\n{stderr}"
        );
    }
    eprintln!("  ok intruders (wrong secret, garbage) refused and reported; the job finished");
}

fn mpirun(n: usize, mode: &str) -> Command {
    let mut c = gasnet_bridge::conduit::mpirun_command(n);
    c.arg(std::env::current_exe().expect("own path"))
        .args(["--child", mode]);
    c
}

/// Starts 4 ranks, lets them run, makes rank 2 fail (`kill`: SIGKILL of its process;
/// `panic`: it panics), and checks that the job ends within 10 s with every other rank
/// exiting non-zero and naming rank 2.
fn failure_test(mode: &str) {
    let mut child = mpirun(4, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let stderr = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
        s
    });
    let mut pids = std::collections::HashMap::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        let parts: Vec<&str> = line.split_whitespace().collect();
        if let ["rank", r, "pid", p] = parts[..] {
            pids.insert(r.parse::<usize>().unwrap(), p.to_string());
        }
        if pids.len() == 4 {
            break;
        }
    }
    assert_eq!(pids.len(), 4, "every rank reported its pid");
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    if mode == "kill" {
        let killed = Command::new("kill")
            .args(["-KILL", &pids[&2]])
            .status()
            .unwrap();
        assert!(killed.success());
    }
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(if mode == "kill" { 10 } else { 20 }) {
            let _ = child.kill();
            panic!("{mode}: the job did not end within the bound");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = start.elapsed();
    let stderr = err_reader.join().unwrap();
    assert!(
        !status.success(),
        "{mode}: mpirun must exit non-zero\n{stderr}"
    );
    for r in [0, 1, 3] {
        let named = stderr.lines().any(|l| {
            (l.contains(&format!("rank {r}: rank 2 failed"))
                || l.contains(&format!(
                    "rank {r}: terminated by the launcher after rank 2"
                )))
                || (l.contains(&format!("pid {}:", pids[&r])) && l.contains("rank 2"))
        });
        assert!(named, "{mode}: rank {r} did not name rank 2:\n{stderr}");
    }
    eprintln!("  ok {mode}: every other rank exited non-zero naming rank 2 after {took:?}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(args.get(i + 1).map(String::as_str).unwrap_or("checks"));
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return; // `cargo test -- --list`: nothing to list for this harness
    }
    // `PGAS_SUITE_ONLY=kill` (or `panic`, `checks`) runs one part, for debugging.
    let only = std::env::var("PGAS_SUITE_ONLY").ok();
    let part = |p: &str| only.as_deref().is_none_or(|o| o == p);
    if part("smp") {
        eprintln!("conduit_suite on smp");
        for n in [2, 3, 4] {
            run_checks(n);
        }
    }
    if !cfg!(feature = "mpi") {
        eprintln!("conduit_suite: built without the mpi feature; mpi runs skipped");
        return;
    }
    // Skips without mpirun, except under CI=true, where that is a failure.
    if !gasnet_bridge::conduit::require_mpirun("conduit_suite") {
        return;
    }
    if part("checks") {
        for n in [2, 3, 4] {
            eprintln!("conduit_suite on mpi, mpirun -n {n}");
            let status = mpirun(n, "checks").status().expect("start mpirun");
            assert!(status.success(), "the checks failed under mpirun -n {n}");
        }
        // Ranks of one host exchange AMs and RMA through shared memory; ranks on different
        // hosts go through MPI. PGAS_MPI_PSHM=0 sends everything through MPI, so the checks
        // cover the cross-host path on this one machine too.
        for n in [2, 3] {
            eprintln!("conduit_suite on mpi without shared memory, mpirun -n {n}");
            let status = mpirun(n, "checks")
                .env("PGAS_MPI_PSHM", "0")
                .status()
                .expect("start mpirun");
            assert!(
                status.success(),
                "the checks failed under mpirun -n {n} with PGAS_MPI_PSHM=0"
            );
        }
    }
    if part("checks") {
        // The same cross-host checks with RMA kept on active messages (the window's
        // alternative, still used by every job that counts writes).
        eprintln!("conduit_suite on mpi without shared memory, PGAS_MPI_RMA=am, mpirun -n 2");
        let status = mpirun(2, "checks")
            .env("PGAS_MPI_PSHM", "0")
            .env("PGAS_MPI_RMA", "am")
            .status()
            .expect("start mpirun");
        assert!(status.success(), "the checks failed with PGAS_MPI_RMA=am");
    }
    if part("rings") {
        // One ring per inbox: of the three other ranks of the host, the first to send takes
        // it and the other two send through MPI, so both paths and their per-pair FIFO run in
        // one job.
        eprintln!("conduit_suite on mpi with one ring per inbox, mpirun -n 4");
        let status = mpirun(4, "checks")
            .env("PGAS_MPI_RINGS", "1")
            .status()
            .expect("start mpirun");
        assert!(
            status.success(),
            "the checks failed under mpirun -n 4 with PGAS_MPI_RINGS=1"
        );
        let out = mpirun(2, "checks")
            .env("PGAS_MPI_RINGS", "zero")
            .output()
            .expect("start mpirun");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("PGAS_MPI_RINGS") && err.contains("zero"),
            "an unusable PGAS_MPI_RINGS is refused, naming it: {err}"
        );
    }
    for mode in ["kill", "panic"] {
        if part(mode) {
            failure_test(mode);
        }
    }
    if part("intruders") {
        intruder_test();
    }
    if part("wide") {
        wide_test();
    }
}
