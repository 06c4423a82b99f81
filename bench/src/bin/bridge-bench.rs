//! bridge-bench: latency and bandwidth of the communication core against raw memory operations
//! measured in the same run (docs/benchmarks.md).
//!
//! Rank 0 measures, rank 1 is the target (it sits in a barrier, polling, so it serves AMs);
//! further ranks (`--ranks N`) only take part in the barrier measurement. One repetition is
//! `OPS` operations for latencies (fewer with `--quick`) and about 32 MiB of traffic (at most
//! 200 000 operations) per size for bandwidth; the median of `--reps` repetitions after one
//! warm-up is reported.
//!
//! Built with `--features mpi` and started by `mpirun -n 2`, it runs on the mpi conduit: lines
//! say `conduit: mpi`, and the baselines are raw MPI measured in the same run between the same
//! two processes (`mpi_put_flush_8B`, `mpi_put_<size>`, `mpi_pingpong_8B`); only rank 0 prints.
//!
//! The lines (rank 0 to rank 1; baseline on smp, then on mpi where it differs):
//! - `put_latency` / `8B`: one blocking 8-byte `put` after another in the default job (which
//!   does not count incoming writes), `OPS` per repetition; `memcpy_8B`, `mpi_put_flush_8B`.
//! - `put_latency` / `8B_counting_job`: the same in a job that counts incoming writes;
//!   `put_8B_default_job`. `8B_switch_off`: in a job with the counting switch (what
//!   cd-runtime launches) whose target has not switched counting on (a job with strict CDs
//!   only); `8B_switch_on`: the same after the target switched on; both against
//!   `put_8B_default_job`.
//! - `put_rate` / `8B`, Mop/s: the puts of `put_latency` / `8B` (same default job, `OPS` per
//!   repetition) as a rate, paired with its baseline in every repetition: `memcpy_rate_8B`
//!   (the same 8-byte memcpy, one after another), `mpi_put_flush_rate_8B` (1 / the raw put +
//!   flush of `mpi_put_flush_8B`).
//! - `get_latency` / `8B`, `atomic_fetch_add` / `u64`: `OPS` blocking gets / fetch-adds;
//!   `memcpy_8B` (`mpi_put_flush_8B`), `raw_atomic` (a local `fetch_add`).
//! - `put_vector` / `64x8B`: `OPS / 10` blocking vector puts of 64 pieces of 8 bytes, 4 KiB
//!   apart; `put_512B` (as many blocking contiguous puts of the same 512 bytes).
//! - `put_bandwidth` / 8B .. 4MiB, GB/s: non-blocking puts waited one by one, about 32 MiB per
//!   repetition; `memcpy_<size>` into a page-aligned buffer, `mpi_put_<size>`.
//! - `am_roundtrip` / `short`: `OPS / 10` short request / reply round trips per repetition,
//!   paired in every repetition with `cacheline_roundtrip` on smp: ranks 0 and 1 (the same
//!   two threads) bouncing one `AtomicU64` alone on its cache line the same number of times,
//!   nanoseconds per round trip, the machine's floor for a round trip between cores
//!   ([`bench_report::CacheLinePingPong`]); on mpi with `mpi_pingpong_8B`.
//! - `barrier` / `latency`: `OPS / 20` barriers of every rank; `std_barrier` (smp, among as
//!   many threads), none on mpi.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bench_report::{
    BenchArgs, Better, CacheLinePingPong, Line, median_of, ns_per_op, print, size_name,
};
use gasnet_bridge::{AtomicOp, Endpoint, HandlerTable, LaunchConfig, WriteCounting, launch};

const FLOOD_SIZES: [usize; 8] = [8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20];

fn main() {
    let args = BenchArgs::from_env("bridge-bench");
    let ops: u64 = if args.quick { 20_000 } else { 1_000_000 };
    let flood_bytes: usize = if args.quick { 4 << 20 } else { 32 << 20 };

    // AM round trip: the request handler replies, the reply handler counts.
    let replies = Arc::new(AtomicU64::new(0));
    let mut handlers = HandlerTable::new();
    let counted = replies.clone();
    let pong = handlers.register("pong", move |_| {
        counted.fetch_add(1, Ordering::Relaxed);
    });
    let ping = handlers.register("ping", move |t| {
        t.reply_short(pong, &[]).expect("reply to ping");
    });
    // Ends a repetition of the round trip at rank 1, which serves until then.
    let stops = Arc::new(AtomicU64::new(0));
    let stopped = stops.clone();
    let stop = handlers.register("stop", move |_| {
        stopped.fetch_add(1, Ordering::Release);
    });

    let config = LaunchConfig::new(args.ranks).segment_bytes(8 << 20);
    let reps = args.reps;
    let conduit = gasnet_bridge::conduit::selected().unwrap_or_else(|e| {
        eprintln!("bridge-bench: {e}");
        std::process::exit(1)
    });
    // Ranks 0 and 1 bounce this line between them, paired with the AM round trip (smp).
    let floor = CacheLinePingPong::new();
    let per_rank = launch(&config, handlers, |ep| {
        let mut lines = Vec::new();
        let ranks = ep.ranks();
        let line = |l: Line| l.on(conduit.name(), ranks);
        let measuring = ep.rank() == 0;

        // -- 8-byte blocking put, get, atomic: rank 0 -> rank 1 --------------------------
        if measuring {
            let src = 42u64.to_ne_bytes();
            let mut local = [0u8; 8];
            let memcpy = median_of(reps, || {
                ns_per_op(ops, || {
                    black_box(&mut local).copy_from_slice(black_box(&src));
                })
            });
            let put = median_of(reps, || {
                ns_per_op(ops, || {
                    black_box(ep.put(1, 0, black_box(&src)).unwrap());
                })
            });
            lines.push(line(
                Line::new("put_latency", "8B", put, "ns", Better::Lower)
                    .baseline("memcpy_8B", memcpy),
            ));
            // The same puts as a rate, paired with the rate of the same 8-byte memcpy.
            let mops = |ns: f64| 1e3 / ns;
            let memcpy_rate = || {
                mops(ns_per_op(ops, || {
                    black_box(&mut local).copy_from_slice(black_box(&src));
                }))
            };
            let put_rate = || {
                mops(ns_per_op(ops, || {
                    black_box(ep.put(1, 0, black_box(&src)).unwrap());
                }))
            };
            let (memcpy_rate, put_rate) = bench_report::paired(reps, memcpy_rate, put_rate);
            lines.push(line(
                Line::new("put_rate", "8B", put_rate, "Mop/s", Better::Higher)
                    .baseline("memcpy_rate_8B", memcpy_rate),
            ));
            let mut dst = [0u8; 8];
            let get = median_of(reps, || {
                ns_per_op(ops, || {
                    ep.get(1, 0, black_box(&mut dst)).unwrap();
                })
            });
            assert_eq!(u64::from_ne_bytes(dst), 42, "get returns what put wrote");
            lines.push(line(
                Line::new("get_latency", "8B", get, "ns", Better::Lower)
                    .baseline("memcpy_8B", memcpy),
            ));
            let word = AtomicU64::new(0);
            let raw = median_of(reps, || {
                ns_per_op(ops, || {
                    black_box(black_box(&word).fetch_add(1, Ordering::SeqCst));
                })
            });
            let remote = median_of(reps, || {
                ns_per_op(ops, || {
                    black_box(ep.atomic(1, 64, AtomicOp::FetchAdd(1)).unwrap());
                })
            });
            lines.push(line(
                Line::new("atomic_fetch_add", "u64", remote, "ns", Better::Lower)
                    .baseline("raw_atomic", raw),
            ));
            // 64 pieces of 8 B, 4 KiB apart, as one vector put, against one 512 B put.
            let pieces: Vec<(usize, usize)> = (0..64).map(|k| (4096 * (k + 1), 8)).collect();
            let src = [5u8; 512];
            let contiguous = median_of(reps, || {
                ns_per_op(ops / 10, || {
                    black_box(ep.put(1, 0, black_box(&src)).unwrap());
                })
            });
            let vector = median_of(reps, || {
                ns_per_op(ops / 10, || {
                    black_box(ep.put_vector(1, black_box(&pieces), &src).unwrap());
                })
            });
            lines.push(line(
                Line::new("put_vector", "64x8B", vector, "ns", Better::Lower)
                    .baseline("put_512B", contiguous),
            ));
        }
        ep.barrier().unwrap();

        // -- put flood, 8 B .. 4 MiB, against memcpy of the same size --------------------
        if measuring {
            for size in FLOOD_SIZES {
                let n = (flood_bytes / size).clamp(4, 200_000);
                let src = vec![7u8; size];
                // The baseline's destination is page-aligned like a segment, so both copies see
                // the same alignment (and neither the 4 KiB aliasing of two adjacent buffers).
                let mut backing = vec![0u8; size + 4096];
                let skip = backing.as_ptr().align_offset(4096);
                let dst = &mut backing[skip..skip + size];
                let gbps = |ns_per_op: f64| size as f64 / ns_per_op;
                let memcpy = median_of(reps, || {
                    gbps(ns_per_op(n as u64, || {
                        black_box(&mut *dst).copy_from_slice(black_box(&src[..]));
                    }))
                });
                let put = median_of(reps, || {
                    gbps(ns_per_op(n as u64, || {
                        let h = ep.put_nb(1, 0, black_box(&src)).unwrap();
                        black_box(h.wait(ep));
                    }))
                });
                let case = size_name(size);
                lines.push(line(
                    Line::new("put_bandwidth", &case, put, "GB/s", Better::Higher)
                        .baseline(&format!("memcpy_{case}"), memcpy),
                ));
            }
        }
        ep.barrier().unwrap();

        // -- AM round trip ---------------------------------------------------------------
        for l in am_roundtrip(ep, reps, ops / 10, ping, stop, &replies, &stops, &floor) {
            lines.push(line(l));
        }
        ep.barrier().unwrap();

        // -- barrier, against std::sync::Barrier among the same threads ------------------
        let barrier_ops = ops / 20;
        let bridge = time_all(ep, reps, barrier_ops, || ep.barrier().unwrap());
        if measuring {
            // The std barrier is measured in a second launch below; keep the bridge value here.
            lines.push(line(Line::new(
                "barrier",
                "latency",
                bridge,
                "ns",
                Better::Lower,
            )));
        }
        lines
    })
    .unwrap_or_else(|e| {
        eprintln!("bridge-bench: {e}");
        std::process::exit(1)
    });

    let mut lines = per_rank.into_iter().next().unwrap_or_default();
    // What counting incoming writes costs a put: the same put in a job that counts (what
    // cd-runtime launches), against this job's default, which does not. On mpi every process
    // takes part in these jobs (launching is collective); rank 0's process measures.
    let default_put = lines
        .iter()
        .find(|l| l.bench == "put_latency" && l.case == "8B")
        .map(|l| l.value);
    if default_put.is_some() || conduit == gasnet_bridge::ConduitKind::Mpi {
        for (case, mode, switch_on) in [
            ("8B_counting_job", WriteCounting::On, false),
            ("8B_switch_off", WriteCounting::Switched, false),
            ("8B_switch_on", WriteCounting::Switched, true),
        ] {
            // On mpi the job has every process as a rank (ranks past 1 only wait).
            let ranks = if conduit == gasnet_bridge::ConduitKind::Mpi {
                args.ranks
            } else {
                2
            };
            let ns = counting_put_ns(ranks, mode, switch_on, reps, ops);
            if let (Some(ns), Some(default_put)) = (ns, default_put) {
                lines.push(
                    Line::new("put_latency", case, ns, "ns", Better::Lower)
                        .baseline("put_8B_default_job", default_put)
                        .on(conduit.name(), 2),
                );
            }
        }
    }
    if conduit == gasnet_bridge::ConduitKind::Mpi {
        #[cfg(feature = "mpi")]
        mpi_baselines(&mut lines, ops, flood_bytes, reps);
        if gasnet_bridge::returned_ranks(args.ranks).is_none_or(|r| r.start != 0) {
            return; // only rank 0 measured
        }
        print(&lines, args.json);
        return;
    }
    let std_barrier = std_barrier_ns(args.ranks, reps, ops / 20);
    if let Some(l) = lines.iter_mut().find(|l| l.bench == "barrier") {
        l.baseline = Some(("std_barrier".into(), std_barrier));
    }
    print(&lines, args.json);
}

/// ns per 8-byte blocking put from rank 0 into rank 1 in a job of `ranks` counting as `mode`,
/// rank 1 having switched counting on if `switch_on`; `None` in a process without rank 0 (mpi).
fn counting_put_ns(
    ranks: usize,
    mode: WriteCounting,
    switch_on: bool,
    reps: usize,
    ops: u64,
) -> Option<f64> {
    let job = LaunchConfig::new(ranks)
        .segment_bytes(1 << 16)
        .write_counting(mode);
    let per_rank = launch(&job, HandlerTable::new(), |ep| {
        if switch_on && ep.rank() == 1 {
            ep.count_incoming_writes();
        }
        ep.barrier().unwrap();
        let src = 42u64.to_ne_bytes();
        let ns = (ep.rank() == 0).then(|| {
            median_of(reps, || {
                ns_per_op(ops, || {
                    black_box(ep.put(1, 0, black_box(&src)).unwrap());
                })
            })
        });
        ep.barrier().unwrap();
        ns
    })
    .unwrap_or_else(|e| {
        eprintln!("bridge-bench: {e}");
        std::process::exit(1)
    });
    per_rank.into_iter().next().flatten()
}

/// Raw MPI between the same two processes, in place of the smp baselines (collective: every
/// process measures along; rank 0's values are the ones printed).
#[cfg(feature = "mpi")]
fn mpi_baselines(lines: &mut [Line], ops: u64, flood_bytes: usize, reps: usize) {
    use bench::mpi_baseline as baseline;
    let fail = |e: bench::mpi_baseline::BaselineError| -> f64 {
        eprintln!("bridge-bench: raw MPI baseline: {e}");
        std::process::exit(1)
    };
    let put8 = baseline::put_flush(8, ops / 10, reps).unwrap_or_else(fail);
    let mut flood = Vec::new();
    for size in FLOOD_SIZES {
        let n = (flood_bytes / size).clamp(4, 200_000) as u64;
        let ns = baseline::put_flush(size, n, reps).unwrap_or_else(fail);
        flood.push((size_name(size), size as f64 / ns));
    }
    for l in lines.iter_mut() {
        l.baseline = match (l.bench.as_str(), l.case.as_str()) {
            ("put_latency", "8B") => Some(("mpi_put_flush_8B".into(), put8)),
            ("put_bandwidth", case) => flood
                .iter()
                .find(|(c, _)| c == case)
                .map(|(c, v)| (format!("mpi_put_{c}"), *v)),
            ("get_latency", "8B") => Some(("mpi_put_flush_8B".into(), put8)),
            ("put_rate", "8B") => Some(("mpi_put_flush_rate_8B".into(), 1e3 / put8)),
            _ => l.baseline.take(),
        };
    }
}

/// The short AM round trip, rank 0 to rank 1, on ranks 0 and 1 together (rank 1 serves until
/// rank 0's `stop` AM ends a repetition); rank 0's line. Each repetition alternates with its
/// baseline between the same two ranks: on the mpi conduit a raw MPI ping-pong between the
/// same two processes (`mpi_pingpong_8B`), on smp the same two threads bouncing one cache line
/// (`cacheline_roundtrip`, the machine's floor for a round trip between cores).
#[allow(clippy::too_many_arguments)]
fn am_roundtrip(
    ep: &Endpoint,
    reps: usize,
    ops: u64,
    ping: gasnet_bridge::HandlerId,
    stop: gasnet_bridge::HandlerId,
    replies: &AtomicU64,
    stops: &AtomicU64,
    floor: &CacheLinePingPong,
) -> Vec<Line> {
    let me = ep.rank();
    let mut served = 0;
    let mut once = || {
        if me == 0 {
            let start = Instant::now();
            for _ in 0..ops {
                let before = replies.load(Ordering::Relaxed);
                ep.am_request_short(1, ping, &[]).unwrap();
                ep.wait_until(|| replies.load(Ordering::Relaxed) > before);
            }
            let ns = start.elapsed().as_nanos() as f64 / ops as f64;
            ep.am_request_short(1, stop, &[]).unwrap();
            ns
        } else {
            if me == 1 {
                served += 1;
                ep.wait_until(|| stops.load(Ordering::Acquire) >= served);
            }
            0.0
        }
    };
    let line = |rtt| Line::new("am_roundtrip", "short", rtt, "ns", Better::Lower);
    #[cfg(feature = "mpi")]
    if gasnet_bridge::conduit::selected().ok() == Some(gasnet_bridge::ConduitKind::Mpi) {
        let fail = |e: bench::mpi_baseline::BaselineError| -> ! {
            eprintln!("bridge-bench: raw MPI baseline: {e}");
            std::process::exit(1)
        };
        use bench::mpi_baseline::PingPong;
        let pingpong = PingPong::new().unwrap_or_else(|e| fail(e));
        let raw = || pingpong.run(ops).unwrap_or_else(|e| fail(e));
        let (raw, rtt) = bench_report::paired(reps, raw, &mut once);
        // Against the MPI calls any active-message layer makes, raw (a short AM is 8 bytes).
        let posted = PingPong::am_pattern(8).unwrap_or_else(|e| fail(e));
        let floor = || posted.run(ops).unwrap_or_else(|e| fail(e));
        let (floor, rtt_floor) = bench_report::paired(reps, floor, &mut once);
        if me != 0 {
            return Vec::new();
        }
        return vec![
            line(rtt).baseline("mpi_pingpong_8B", raw),
            Line::new(
                "am_roundtrip",
                "short_vs_posted",
                rtt_floor,
                "ns",
                Better::Lower,
            )
            .baseline("mpi_posted_isend_8B", floor),
        ];
    }
    let (floor, rtt) = bench_report::paired(reps, || floor.run(me, ops), &mut once);
    if me != 0 {
        return Vec::new();
    }
    vec![line(rtt).baseline("cacheline_roundtrip", floor)]
}

/// Median ns per call of `op` on every rank, with ranks aligned by a barrier before each rep.
fn time_all(ep: &Endpoint, reps: usize, ops: u64, mut op: impl FnMut()) -> f64 {
    median_of(reps, || {
        ep.barrier().unwrap();
        ns_per_op(ops, &mut op)
    })
}

/// Median ns per `std::sync::Barrier::wait` among `ranks` threads.
fn std_barrier_ns(ranks: usize, reps: usize, ops: u64) -> f64 {
    let barrier = std::sync::Barrier::new(ranks);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..ranks)
            .map(|_| {
                s.spawn(|| {
                    median_of(reps, || {
                        barrier.wait();
                        ns_per_op(ops, || {
                            barrier.wait();
                        })
                    })
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).next().unwrap()
    })
}
