//! pgas-bench: the cost of the UPC++-style API over the raw communication core, measured side
//! by side in one run (docs/benchmarks.md).
//!
//! Two jobs run back to back in this process: a `gasnet-bridge` job measures the raw
//! operations (the baselines), then a `pgas` job measures the API. In both, rank 0 measures
//! and rank 1 is the target, polling in a barrier. One repetition holds `OPS` operations for
//! latencies (a tenth of that for round trips, fewer with `--quick`) and about 32 MiB of
//! traffic per flood size; the median of `--reps` repetitions after one warm-up is reported.
//!
//! A third job measures the tree collectives on the world team against the flat ones (through
//! one rank, the algorithms the trees replaced; `pgas::collectives::Algorithm`), paired in
//! every repetition: on smp with [`COLLECTIVE_RANKS`] ranks, where a tree differs from a line
//! (or `--ranks` if that is above 2); on mpi with the job's ranks. One repetition holds
//! `OPS / 100` collectives.
//!
//! Under `mpirun` every process takes part, lines carry the job's process count, the baselines
//! of `rput_latency` / `8B`, `rput_bandwidth`, `rpc_roundtrip` / `empty` and of the lines below
//! that name an MPI one become raw MPI measured in the same job (`mpi_baselines`, after the
//! pgas jobs; the ping-pong alternating with the rpc), and only rank 0 prints. Lines added
//! for issue 16 (baseline on smp, then on mpi where it differs):
//! - `rput_flood` / `8B`, Mop/s: `rput_bandwidth_promise`'s 8-byte flood (about 32 MiB of
//!   8-byte puts per repetition, at most 200 000: every one counted on one operation
//!   `Promise`, one `finalize().wait()` at the end) as a rate; `bridge_put_rate_8B` (as many
//!   blocking bridge puts, paired), `mpi_put_flood_8B` (as many raw `MPI_Put`s in flight, one
//!   `MPI_Win_flush`).
//! - `rpc_roundtrip_floor` / `empty` (smp only): the value of `rpc_roundtrip` / `empty` (`OPS /
//!   10` round trips per repetition) against `cacheline_roundtrip`, the same two rank threads
//!   bouncing one cache line as often, paired in every repetition: the machine's floor.
//! - `allreduce_u64` / `world`: `OPS / 20` `reduce_all_u64` sums of one `u64` per rank on the
//!   world team per repetition; `bridge_barrier` (the core's barrier, paired), `mpi_allreduce_u64`
//!   (`MPI_Allreduce` of one `u64`, `MPI_SUM`, as many).
//! - `rput_strided` / `64x8B`: `OPS / 100` strided rputs of 64 `u64`s 4 KiB apart on rank 1
//!   per repetition; `rput_512B` (one contiguous rput of the same 512 bytes, paired).
//! - `barrier` / `world` (an existing line): `OPS / 20` barriers; `bridge_barrier`,
//!   `mpi_barrier` (as many `MPI_Barrier`s).
//!
//! `dist_array_fetch_add` / `u64`: `OPS` `DistArray::fetch_add`s of an element on rank 1 (index
//! checked and placed by the layout on each) against `atomic_fetch_add`, the `AtomicDomain`
//! fetch-add on a global pointer to a word of rank 1, paired: what global indexing costs.
//!
//! `view_array` / `heat_4096_f64`: a heat step on rank 0's 4096-element block of a `ViewArray`
//! in place (`with_local_mut`) against the same step through a `DistArray`'s `read_local` and
//! `write_local`, paired.

use std::hint::black_box;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bench_report::{
    BenchArgs, Better, CacheLinePingPong, Line, median_of, ns_per_op, paired, print, size_name,
};
use gasnet_bridge::{AtomicOp, HandlerTable};
use pgas::runtime_hooks::Interceptor;
use pgas::{
    AtomicDomain, Completions, DistArray, GlobalPtr, LaunchConfig, Layout, Promise, RpcFn,
    RpcTable, ViewArray, barrier, barrier_async_on, rget, rpc, rpc_ff, rput, rput_slice, rput_with,
};

const FLOOD_SIZES: [usize; 6] = [8, 512, 4 << 10, 64 << 10, 1 << 20, 4 << 20];
const SEGMENT: usize = 16 << 20;
/// Ranks of the collectives job on smp: the widest rank count the conformance suite runs.
const COLLECTIVE_RANKS: usize = 16;

/// A hook that does nothing: what remains is the cost of having one installed.
struct NoopHook;
impl Interceptor for NoopHook {}

struct Sizes {
    ops: u64,
    flood_bytes: usize,
    reps: usize,
    ranks: usize,
    args: BenchArgs,
}

impl Sizes {
    /// Whether any of `benches` is wanted (`--only`; the same answer on every rank).
    fn wants(&self, benches: &[&str]) -> bool {
        benches.iter().any(|b| self.args.wants(b))
    }
}

/// Operations of one repetition of a flood of `size`-byte puts: about `flood_bytes` of
/// traffic, at least 4 and at most 200 000 puts.
fn flood_count(s: &Sizes, size: usize) -> u64 {
    (s.flood_bytes / size).clamp(4, 200_000) as u64
}

fn main() {
    let args = BenchArgs::from_env("pgas-bench");
    // Under mpirun the job has as many ranks as there are processes, whatever `--ranks` says.
    let mpi_world = gasnet_bridge::conduit::mpi_world().unwrap_or_else(|e| {
        eprintln!("pgas-bench: {e}");
        std::process::exit(1)
    });
    let sizes = Sizes {
        ops: if args.quick { 20_000 } else { 1_000_000 },
        flood_bytes: if args.quick { 4 << 20 } else { 32 << 20 },
        reps: args.reps,
        ranks: mpi_world.map_or(args.ranks, |(_, size)| size),
        args: args.clone(),
    };
    let conduit = gasnet_bridge::conduit::selected().unwrap_or_else(|e| {
        eprintln!("pgas-bench: {e}");
        std::process::exit(1)
    });
    let am_rtt = bridge_am_roundtrip(&sizes);
    let mut lines = pgas_lines(&sizes, am_rtt);
    for l in &mut lines {
        *l = l.clone().on(conduit.name(), sizes.ranks);
    }
    let wide = if conduit == gasnet_bridge::ConduitKind::Mpi {
        sizes.ranks
    } else {
        // Two ranks (the default) show no tree; a count asked for on the command line is kept.
        if sizes.ranks > 2 {
            sizes.ranks
        } else {
            COLLECTIVE_RANKS
        }
    };
    if sizes.wants(&[
        "reduce_all_tree",
        "reduce_all_u64_tree",
        "broadcast_tree",
        "barrier_async_tree",
    ]) {
        lines.extend(
            collective_lines(&sizes, wide)
                .into_iter()
                .map(|l| l.on(conduit.name(), wide)),
        );
    }
    if conduit == gasnet_bridge::ConduitKind::Mpi {
        // On the mpi conduit the baselines are raw MPI between the same two processes
        // (docs/benchmarks.md); every process takes part, rank 0 prints.
        #[cfg(feature = "mpi")]
        mpi_baselines(&mut lines, &sizes);
        if gasnet_bridge::returned_ranks(sizes.ranks).is_none_or(|r| r.start != 0) {
            return;
        }
    }
    print(&lines, args.json);
}

#[cfg(feature = "mpi")]
fn mpi_baselines(lines: &mut [Line], s: &Sizes) {
    use bench::mpi_baseline as baseline;
    let fail = |e: bench::mpi_baseline::BaselineError| -> f64 {
        eprintln!("pgas-bench: raw MPI baseline: {e}");
        std::process::exit(1)
    };
    let put8 = baseline::put_flush(8, s.ops / 10, s.reps).unwrap_or_else(fail);
    let put_flood = 1e3 / baseline::put_flood(8, flood_count(s, 8), s.reps).unwrap_or_else(fail);
    let mpi_barrier = baseline::barrier(s.ops / 20, s.reps).unwrap_or_else(fail);
    let mpi_allreduce = baseline::allreduce_u64(s.ops / 20, s.reps).unwrap_or_else(fail);
    let mut flood = Vec::new();
    for size in FLOOD_SIZES {
        let ns = baseline::put_flush(size, flood_count(s, size), s.reps).unwrap_or_else(fail);
        flood.push((size_name(size), size as f64 / ns));
    }
    for l in lines.iter_mut() {
        l.baseline = match (l.bench.as_str(), l.case.as_str()) {
            ("rput_latency", "8B") => Some(("mpi_put_flush_8B".into(), put8)),
            ("rput_flood", "8B") => Some(("mpi_put_flood_8B".into(), put_flood)),
            ("barrier", "world") => Some(("mpi_barrier".into(), mpi_barrier)),
            ("allreduce_u64", "world") => Some(("mpi_allreduce_u64".into(), mpi_allreduce)),
            ("rput_bandwidth", case) => flood
                .iter()
                .find(|(c, _)| c == case)
                .map(|(c, v)| (format!("mpi_put_{c}"), *v)),
            _ => l.baseline.take(),
        };
    }
}

/// The raw active-message round trip, in a `gasnet-bridge` job run just before the pgas job
/// (pgas owns the handler table of its own job, so this baseline needs a job of its own).
fn bridge_am_roundtrip(s: &Sizes) -> f64 {
    let replies = Arc::new(AtomicU64::new(0));
    let mut handlers = HandlerTable::new();
    let counted = replies.clone();
    let pong = handlers.register("pong", move |_| {
        counted.fetch_add(1, Ordering::Relaxed);
    });
    let ping = handlers.register("ping", move |t| t.reply_short(pong, &[]).expect("reply"));
    let config = LaunchConfig::new(s.ranks).segment_bytes(SEGMENT);
    let per_rank = gasnet_bridge::launch(&config, handlers, |ep| {
        let mut rtt = 0.0;
        if ep.rank() == 0 {
            rtt = median_of(s.reps, || {
                ns_per_op(s.ops / 10, || {
                    let before = replies.load(Ordering::Relaxed);
                    ep.am_request_short(1, ping, &[]).unwrap();
                    ep.wait_until(|| replies.load(Ordering::Relaxed) > before);
                })
            });
        }
        rtt
    })
    .unwrap_or_else(|e| {
        eprintln!("pgas-bench: bridge job failed: {e}");
        std::process::exit(1)
    });
    per_rank[0]
}

/// The empty rpc round trip, rank 0 to rank 1, on ranks 0 and 1 together: rank 1 serves until
/// rank 0's `stop` rpc says a repetition is over. On the mpi conduit each repetition alternates
/// with a raw MPI ping-pong between the same two processes (the baseline, seeing the same
/// machine state). On smp each repetition alternates with the same two rank threads bouncing
/// one cache line as many times (`cacheline_roundtrip`, the machine's floor), and the value is
/// reported twice: `rpc_roundtrip` against the bridge's AM round trip from the job before, and
/// `rpc_roundtrip_floor` against the cache line. Returns rank 0's lines (none elsewhere).
fn rpc_roundtrip(
    s: &Sizes,
    noop: RpcFn<(), ()>,
    stop: RpcFn<(), ()>,
    stops: &AtomicU64,
    am_rtt: f64,
    floor: &CacheLinePingPong,
) -> Vec<Line> {
    let me = pgas::rank_me();
    let round_trips = s.ops / 10;
    let mut served = 0;
    let mut once = || {
        if me == 0 {
            let ns = ns_per_op(round_trips, || rpc(1, noop, ()).wait());
            rpc_ff(1, stop, ());
            ns
        } else {
            if me == 1 {
                served += 1;
                while stops.load(Ordering::Acquire) < served {
                    pgas::progress();
                }
            }
            0.0
        }
    };
    #[cfg(feature = "mpi")]
    if gasnet_bridge::conduit::selected().ok() == Some(gasnet_bridge::ConduitKind::Mpi) {
        use bench::mpi_baseline::PingPong;
        let pingpong = PingPong::new().unwrap_or_else(|e| fail_with(&e));
        let raw = || pingpong.run(round_trips).unwrap_or_else(|e| fail_with(&e));
        let (raw, rtt) = paired(s.reps, raw, &mut once);
        // The same round trip against the MPI calls any active-message layer makes, raw: an
        // rpc and its reply are 40 bytes each on the wire.
        let posted = PingPong::am_pattern(40).unwrap_or_else(|e| fail_with(&e));
        let floor = || posted.run(round_trips).unwrap_or_else(|e| fail_with(&e));
        let (floor, rtt_floor) = paired(s.reps, floor, &mut once);
        if me != 0 {
            return Vec::new();
        }
        return vec![
            Line::new("rpc_roundtrip", "empty", rtt, "ns", Better::Lower)
                .baseline("mpi_pingpong_8B", raw),
            Line::new(
                "rpc_roundtrip",
                "empty_vs_posted",
                rtt_floor,
                "ns",
                Better::Lower,
            )
            .baseline("mpi_posted_isend_40B", floor),
        ];
    }
    let (floor, rtt) = paired(s.reps, || floor.run(me, round_trips), &mut once);
    if me != 0 {
        return Vec::new();
    }
    vec![
        Line::new("rpc_roundtrip", "empty", rtt, "ns", Better::Lower)
            .baseline("bridge_am_roundtrip", am_rtt),
        Line::new("rpc_roundtrip_floor", "empty", rtt, "ns", Better::Lower)
            .baseline("cacheline_roundtrip", floor),
    ]
}

#[cfg(feature = "mpi")]
fn fail_with<T>(e: &bench::mpi_baseline::BaselineError) -> T {
    eprintln!("pgas-bench: raw MPI baseline: {e}");
    std::process::exit(1)
}

trait IntoUnit {
    fn into_unit(self);
}
impl IntoUnit for u64 {
    fn into_unit(self) {}
}

fn pgas_lines(s: &Sizes, am_rtt: f64) -> Vec<Line> {
    let mut rpcs = RpcTable::new();
    let noop = rpcs.register("noop", |()| ());
    let ff_count = Arc::new(AtomicU64::new(0));
    let counter = ff_count.clone();
    let ff = rpcs.register("count", move |()| {
        counter.fetch_add(1, Ordering::Relaxed);
    });
    let stops = Arc::new(AtomicU64::new(0));
    let stopped = stops.clone();
    let stop = rpcs.register("stop", move |()| {
        stopped.fetch_add(1, Ordering::Release);
    });
    let config = LaunchConfig::new(s.ranks).segment_bytes(SEGMENT);
    // Ranks 0 and 1 bounce this line between them, paired with the rpc round trip (smp).
    let floor = CacheLinePingPong::new();
    let per_rank = pgas::launch(&config, rpcs, || {
        let mut lines = Vec::new();
        // Every rank allocates the same array first, so rank 1's array is at the same offset.
        let mine = pgas::new_array::<u8>(8 << 20).expect("bench buffer");
        let target: GlobalPtr<u8> = GlobalPtr::from_raw(1, mine.offset());
        let word = target.cast::<u64>();
        let at = word.offset();
        // Element 1 of a cyclic array lives on rank 1, as `word` does.
        let array = DistArray::<u64>::new(2, Layout::Cyclic).expect("bench array");
        // Each rank's block of 4096 f64, in the segment and in viewable memory (collective).
        let heat_arrays = s.wants(&["view_array"]).then(|| {
            let len = HEAT_POINTS * pgas::rank_n();
            (
                DistArray::<f64>::new(len, Layout::Block).expect("heat DistArray"),
                ViewArray::<f64>::new(len, Layout::Block).expect("heat ViewArray"),
            )
        });
        barrier();
        if pgas::rank_me() == 0 {
            let (ops, reps) = (s.ops, s.reps);
            let src8 = 7u64.to_ne_bytes();
            let raw_put = || {
                pgas::testing::bench_endpoint(|ep| {
                    ns_per_op(ops, || {
                        ep.put(1, at, black_box(&src8)).unwrap().iwc.into_unit()
                    })
                })
            };
            let api_put = || ns_per_op(ops, || rput(black_box(7u64), word).wait());
            if s.wants(&["rput_latency"]) {
                let (bridge, no_hook) = paired(reps, raw_put, api_put);
                lines.push(
                    Line::new("rput_latency", "8B", no_hook, "ns", Better::Lower)
                        .baseline("bridge_put_8B", bridge),
                );
            }
            let hooked = || {
                pgas::runtime_hooks::set_hook(Rc::new(NoopHook));
                let t = api_put();
                pgas::runtime_hooks::clear_hook();
                t
            };
            if s.wants(&["hook_overhead"]) {
                let (no_hook, hooked) = paired(reps, api_put, hooked);
                lines.push(
                    Line::new("hook_overhead", "rput_8B", hooked, "ns", Better::Lower)
                        .baseline("rput_8B_no_hook", no_hook),
                );
            }
            let raw_get = || {
                let mut dst = [0u8; 8];
                pgas::testing::bench_endpoint(|ep| {
                    ns_per_op(ops, || ep.get(1, at, black_box(&mut dst)).unwrap())
                })
            };
            let api_get = || ns_per_op(ops, || black_box(rget(word).wait()).into_unit());
            if s.wants(&["rget_latency"]) {
                let (bridge, got) = paired(reps, raw_get, api_get);
                lines.push(
                    Line::new("rget_latency", "8B", got, "ns", Better::Lower)
                        .baseline("bridge_get_8B", bridge),
                );
            }
            let ad = AtomicDomain::<u64>::new();
            let raw_add = || {
                pgas::testing::bench_endpoint(|ep| {
                    ns_per_op(ops, || {
                        // The previous value alone, as the pgas side returns: keeping the
                        // whole 32-byte result made this loop's cost depend on code layout.
                        black_box(ep.atomic(1, at, AtomicOp::FetchAdd(1)).unwrap().previous);
                    })
                })
            };
            let api_add = || ns_per_op(ops, || black_box(ad.fetch_add(word, 1).wait()).into_unit());
            if s.wants(&["atomic_fetch_add"]) {
                let (bridge, fadd) = paired(reps, raw_add, api_add);
                lines.push(
                    Line::new("atomic_fetch_add", "u64", fadd, "ns", Better::Lower)
                        .baseline("bridge_atomic_fetch_add", bridge),
                );
            }
            let array_add = || {
                ns_per_op(ops, || {
                    black_box(array.fetch_add(1, 1).expect("element 1").wait()).into_unit()
                })
            };
            if s.wants(&["dist_array_fetch_add"]) {
                let (global_ptr, element) = paired(reps, api_add, array_add);
                lines.push(
                    Line::new("dist_array_fetch_add", "u64", element, "ns", Better::Lower)
                        .baseline("atomic_fetch_add", global_ptr),
                );
            }
            if s.wants(&["local_view"]) {
                lines.push(local_view_line(s));
            }
            if let Some((segment, viewable)) = &heat_arrays {
                lines.push(view_array_line(s, segment, viewable));
            }
            let round_trips = ops / 10;
            let flood = || {
                median_of(reps, || {
                    let start = Instant::now();
                    for _ in 0..round_trips {
                        rpc_ff(1, ff, ());
                    }
                    rpc(1, noop, ()).wait(); // FIFO per pair: every rpc_ff before it has run
                    start.elapsed().as_nanos() as f64 / round_trips as f64
                })
            };
            if s.wants(&["rpc_ff_flood"]) {
                lines.push(
                    Line::new("rpc_ff_flood", "empty", flood(), "ns", Better::Lower)
                        .baseline("bridge_am_roundtrip", am_rtt),
                );
            }
            let floods = ["rput_bandwidth", "rput_bandwidth_promise"];
            for size in FLOOD_SIZES.into_iter().filter(|_| s.wants(&floods)) {
                let n = flood_count(s, size);
                let src = vec![3u8; size];
                let case = size_name(size);
                let bname = format!("bridge_put_{case}");
                let gbps = |ns: f64| size as f64 / ns;
                let raw = || {
                    gbps(pgas::testing::bench_endpoint(|ep| {
                        ns_per_op(n, || ep.put(1, at, &src).unwrap().iwc.into_unit())
                    }))
                };
                let fut = || gbps(ns_per_op(n, || rput_slice(&src, target).wait()));
                let (bridge, fut) = paired(reps, raw, fut);
                lines.push(
                    Line::new("rput_bandwidth", &case, fut, "GB/s", Better::Higher)
                        .baseline(&bname, bridge),
                );
                let prom = || gbps(promise_flood_ns(&src, target, n));
                let (bridge, prom) = paired(reps, raw, prom);
                lines.push(
                    Line::new(
                        "rput_bandwidth_promise",
                        &case,
                        prom,
                        "GB/s",
                        Better::Higher,
                    )
                    .baseline(&bname, bridge),
                );
            }
            if s.wants(&["rput_flood"]) {
                lines.push(rput_flood(s, target, at));
            }
            if s.wants(&["gups"]) {
                lines.push(gups(s, word));
            }
            if s.wants(&["rput_strided", "rget_strided"]) {
                lines.extend(strided_lines(s, target.cast::<f64>()));
                lines.push(strided_column_line(s, target));
            }
            if s.wants(&["rput_irregular"]) {
                lines.push(irregular_line(s, target.cast::<f64>()));
            }
        }
        barrier();
        if s.wants(&["rpc_roundtrip", "rpc_roundtrip_floor"]) {
            lines.extend(rpc_roundtrip(s, noop, stop, &stops, am_rtt, &floor));
        }
        barrier();
        if !s.wants(&["barrier", "allreduce_u64", "reduce_all_u64", "reduce_all"]) {
            return lines;
        }
        let raw_barrier = || {
            pgas::testing::bench_endpoint(|ep| {
                ep.barrier().unwrap();
                ns_per_op(s.ops / 20, || ep.barrier().unwrap())
            })
        };
        let api_barrier = || {
            barrier();
            ns_per_op(s.ops / 20, barrier)
        };
        let (bridge, bar) = paired(s.reps, raw_barrier, api_barrier);
        if pgas::rank_me() == 0 {
            lines.push(
                Line::new("barrier", "world", bar, "ns", Better::Lower)
                    .baseline("bridge_barrier", bridge),
            );
        }
        // One u64 per rank summed on the world team (MPI_Allreduce's job), paired with the
        // core's barrier (smp; the floor of any collective) or, on mpi, judged against raw
        // MPI_Allreduce measured after the jobs.
        let world = pgas::world();
        let sum = || {
            barrier();
            ns_per_op(s.ops / 20, || {
                black_box(pgas::reduce_all_u64_on(&world, 1, u64::wrapping_add)).into_unit()
            })
        };
        let (bridge, allreduce) = paired(s.reps, raw_barrier, sum);
        if pgas::rank_me() == 0 {
            lines.push(
                Line::new("allreduce_u64", "world", allreduce, "ns", Better::Lower)
                    .baseline("bridge_barrier", bridge),
            );
        }
        // One u64 per rank reduced on the world team: the segment path and the message path.
        let fast = || {
            barrier();
            ns_per_op(s.ops / 20, || {
                black_box(pgas::reduce_all_u64_on(&world, 1, |a, b| a | b)).into_unit()
            })
        };
        let (bar, fast) = paired(s.reps, api_barrier, fast);
        let messages = || {
            barrier();
            ns_per_op(s.ops / 100, || {
                black_box(pgas::reduce_all_on(&world, 1u64, |a, b| a | b).wait()).into_unit()
            })
        };
        let slow = median_of(s.reps, messages);
        if pgas::rank_me() == 0 {
            lines.push(
                Line::new("reduce_all_u64", "world", fast, "ns", Better::Lower)
                    .baseline("barrier_world", bar),
            );
            lines.push(
                Line::new("reduce_all", "world_u64", slow, "ns", Better::Lower)
                    .baseline("barrier_world", bar),
            );
        }
        lines
    })
    .unwrap_or_else(|e| {
        eprintln!("pgas-bench: pgas job failed: {e}");
        std::process::exit(1)
    });
    per_rank.into_iter().next().expect("rank 0")
}

/// Points of the heat kernel of the `local_view` line (32 KiB of f64).
const HEAT_POINTS: usize = 4096;

/// One explicit 1-D heat step over `u` in place (ends fixed): the kernel of `local_view`.
fn heat_step(u: &mut [f64]) {
    let Some(last) = u.len().checked_sub(1) else {
        return;
    };
    let mut left = u[0];
    for i in 1..last {
        let here = u[i];
        u[i] = here + 0.25 * (left - 2.0 * here + u[i + 1]);
        left = here;
    }
}

/// `local_view` / `heat_4096_f64`: one heat step on a rank's 4096 f64 in viewable memory,
/// borrowed in place with `with_local_mut`, against the same step on the same data in the
/// segment copied out with `read_local_slice` and back with `write_local_slice` (the safe
/// path without views), paired; nanoseconds per step, `OPS / 1000` steps per repetition.
fn local_view_line(s: &Sizes) -> Line {
    let steps = (s.ops / 1000).max(10);
    let in_segment = pgas::new_array::<f64>(HEAT_POINTS).expect("heat array");
    let viewable = pgas::new_viewable::<f64>(HEAT_POINTS).expect("viewable heat array");
    let start: Vec<f64> = (0..HEAT_POINTS).map(|i| (i % 17) as f64).collect();
    in_segment.write_local_slice(&start).expect("heat array");
    pgas::view_put(&start, viewable).expect("viewable heat array");
    let mut buffer = vec![0.0; HEAT_POINTS];
    let mut copied = || {
        ns_per_op(steps, || {
            in_segment.read_local_slice(&mut buffer).expect("copy in");
            heat_step(black_box(&mut buffer));
            in_segment.write_local_slice(&buffer).expect("copy out");
        })
    };
    let mut in_place = || {
        ns_per_op(steps, || {
            pgas::with_local_mut(viewable, HEAT_POINTS, |u| heat_step(black_box(u))).expect("view")
        })
    };
    let (base, value) = paired(s.reps, &mut copied, &mut in_place);
    let (mut a, mut b) = (vec![0.0; HEAT_POINTS], vec![0.0; HEAT_POINTS]);
    in_segment.read_local_slice(&mut a).expect("heat array");
    pgas::view_get(viewable, &mut b).expect("viewable heat array");
    assert_eq!(a, b, "both kernels ran the same steps on the same data");
    Line::new("local_view", "heat_4096_f64", value, "ns", Better::Lower)
        .baseline("copy_in_out_4096_f64", base)
}

/// `view_array` / `heat_4096_f64`: one heat step on rank 0's block of 4096 f64 of a
/// `ViewArray`, viewed in place with `with_local_mut`, against the same step on the same data
/// in a `DistArray`'s block through `read_local` and `write_local` (the array's copying path),
/// paired; nanoseconds per step, `OPS / 1000` steps per repetition.
fn view_array_line(s: &Sizes, segment: &DistArray<f64>, viewable: &ViewArray<f64>) -> Line {
    let steps = (s.ops / 1000).max(10);
    let start: Vec<f64> = (0..HEAT_POINTS).map(|i| (i % 17) as f64).collect();
    segment.write_local(&start).expect("heat DistArray");
    viewable
        .with_local_mut(|u| u.copy_from_slice(&start))
        .expect("heat ViewArray");
    let copied = || {
        ns_per_op(steps, || {
            let mut u = segment.read_local();
            heat_step(black_box(&mut u));
            segment.write_local(&u).expect("copy out");
        })
    };
    let in_place = || {
        ns_per_op(steps, || {
            viewable
                .with_local_mut(|u| heat_step(black_box(u)))
                .expect("view")
        })
    };
    let (base, value) = paired(s.reps, copied, in_place);
    let same = viewable
        .with_local(|u| u == segment.read_local())
        .expect("view");
    assert!(same, "both kernels ran the same steps on the same data");
    Line::new("view_array", "heat_4096_f64", value, "ns", Better::Lower)
        .baseline("read_write_local_4096_f64", base)
}

/// A 64 x 64 block of f64 written into (read from) every other element of 128-element rows
/// on rank 1 (innermost stride 2: 4096 runs of one element), and the same block with unit
/// innermost stride (64 runs of 512 B), each against the same block sent run by run (the
/// path before one-message transfers) measured in the same run; nanoseconds per block, 50
/// blocks per repetition (10 with `--quick`).
fn strided_lines(s: &Sizes, dst: GlobalPtr<f64>) -> Vec<Line> {
    use pgas::testing::{rget_strided_run_by_run, rput_strided_run_by_run};
    use pgas::{rget_strided, rput_strided};
    let blocks: u64 = if s.ops < 1_000_000 { 10 } else { 50 };
    let src: Vec<f64> = (0..64 * 64).map(|k| k as f64).collect();
    let mut lines = Vec::new();
    for (case, dst_strides) in [
        ("64x64_f64_stride2", [2, 128]),
        ("64x64_f64_rows", [1, 128]),
    ] {
        let by_runs = || {
            ns_per_op(blocks, || {
                rput_strided_run_by_run(&src, [1, 64], dst, dst_strides, [64, 64])
            })
        };
        let one = || {
            ns_per_op(blocks, || {
                rput_strided(&src, [1, 64], dst, dst_strides, [64, 64]).wait()
            })
        };
        let (base, value) = paired(s.reps, by_runs, one);
        lines.push(
            Line::new("rput_strided", case, value, "ns", Better::Lower)
                .baseline(&format!("rput_strided_run_by_run_{case}"), base),
        );
        let mut back = vec![0.0f64; 64 * 64];
        let mut by_runs = || {
            ns_per_op(blocks, || {
                rget_strided_run_by_run(dst, dst_strides, &mut back, [1, 64], [64, 64])
            })
        };
        let mut back2 = vec![0.0f64; 64 * 64];
        let mut one = || {
            ns_per_op(blocks, || {
                rget_strided(dst, dst_strides, &mut back2, [1, 64], [64, 64]).wait()
            })
        };
        let (base, value) = paired(s.reps, &mut by_runs, &mut one);
        assert_eq!(back, src, "the block read run by run");
        assert_eq!(back2, src, "the block read as one message");
        lines.push(
            Line::new("rget_strided", case, value, "ns", Better::Lower)
                .baseline(&format!("rget_strided_run_by_run_{case}"), base),
        );
    }
    lines
}

/// `rput_strided` / `64x8B`: 64 `u64`s written 4 KiB apart on rank 1 (one dimension, stride
/// 512 elements), against one contiguous `rput_slice` of the same 512 bytes (`rput_512B`),
/// paired; nanoseconds per transfer, `OPS / 100` transfers per repetition.
fn strided_column_line(s: &Sizes, target: GlobalPtr<u8>) -> Line {
    use pgas::rput_strided;
    let ops = s.ops / 100;
    let dst = target.cast::<u64>();
    let src: Vec<u64> = (0..64).collect();
    let contiguous = || ns_per_op(ops, || rput_slice(&src, dst).wait());
    let strided = || ns_per_op(ops, || rput_strided(&src, [1], dst, [512], [64]).wait());
    let (base, value) = paired(s.reps, contiguous, strided);
    Line::new("rput_strided", "64x8B", value, "ns", Better::Lower).baseline("rput_512B", base)
}

/// 4096 single-f64 pieces (every other element on rank 1) written by one `rput_irregular`,
/// against the same pieces written by 4096 `rput_slice` calls; nanoseconds per 4096 pieces,
/// blocks per repetition as in [`strided_lines`].
fn irregular_line(s: &Sizes, dst: GlobalPtr<f64>) -> Line {
    let blocks: u64 = if s.ops < 1_000_000 { 10 } else { 50 };
    let src: Vec<f64> = (0..4096).map(|k| k as f64).collect();
    let pieces: Vec<(GlobalPtr<f64>, usize)> = (0..4096).map(|k| (dst + 2 * k, 1)).collect();
    let one_by_one = || {
        ns_per_op(blocks, || {
            for (k, &(p, _)) in pieces.iter().enumerate() {
                rput_slice(&src[k..=k], p).wait();
            }
        })
    };
    let one = || ns_per_op(blocks, || pgas::rput_irregular(&[&src[..]], &pieces).wait());
    let (base, value) = paired(s.reps, one_by_one, one);
    Line::new("rput_irregular", "4096x8B", value, "ns", Better::Lower)
        .baseline("rput_slice_one_by_one_4096x8B", base)
}

/// The tree collectives on the world team of `ranks` ranks against the flat ones (through one
/// rank: the algorithms they replaced), each repetition of each run under the algorithm it
/// measures (rank 0's lines). Broadcasts rotate their root, so that every rank's receiving and
/// forwarding is in rank 0's time, as it is in a program's sequence of them.
fn collective_lines(s: &Sizes, ranks: usize) -> Vec<Line> {
    use pgas::collectives::{Algorithm, set_algorithm};
    let config = LaunchConfig::new(ranks).segment_bytes(SEGMENT);
    let per_rank = pgas::launch(&config, RpcTable::new(), || {
        let world = pgas::world();
        let n = world.rank_n();
        let mut lines = Vec::new();
        let or = |a: u64, b: u64| a | b;
        let ops = s.ops / 100;
        // Every rank switches at the same point, between collectives.
        fn under(algorithm: Algorithm, ops: u64, f: &dyn Fn()) -> impl FnMut() -> f64 + '_ {
            move || {
                set_algorithm(algorithm);
                barrier();
                let ns = ns_per_op(ops, f);
                set_algorithm(Algorithm::Auto);
                ns
            }
        }
        let reduce = || black_box(pgas::reduce_all_on(&world, 1u64, or).wait()).into_unit();
        let (flat, tree) = paired(
            s.reps,
            under(Algorithm::Flat, ops, &reduce),
            under(Algorithm::Tree, ops, &reduce),
        );
        lines.push(
            Line::new("reduce_all_tree", "world_u64", tree, "ns", Better::Lower)
                .baseline("reduce_all_flat", flat),
        );
        let words = || black_box(pgas::reduce_all_u64_on(&world, 1, or)).into_unit();
        let (words, tree) = paired(
            s.reps,
            under(Algorithm::Auto, ops, &words),
            under(Algorithm::Tree, ops, &words),
        );
        lines.push(
            Line::new("reduce_all_u64_tree", "world", tree, "ns", Better::Lower)
                .baseline("reduce_all_u64_auto", words),
        );
        for (case, bytes) in [("world_u64", 8), ("world_64KiB", 64 << 10)] {
            let payload = vec![7u8; bytes];
            let k = std::cell::Cell::new(0);
            let bcast = || {
                let root = k.get() % n;
                k.set(k.get() + 1);
                black_box(pgas::broadcast_on(&world, payload.clone(), root).wait());
            };
            let (flat, tree) = paired(
                s.reps,
                under(Algorithm::Flat, ops, &bcast),
                under(Algorithm::Tree, ops, &bcast),
            );
            lines.push(
                Line::new("broadcast_tree", case, tree, "ns", Better::Lower)
                    .baseline("broadcast_flat", flat),
            );
        }
        let bar = || barrier_async_on(&world).wait();
        let (flat, tree) = paired(
            s.reps,
            under(Algorithm::Flat, ops, &bar),
            under(Algorithm::Tree, ops, &bar),
        );
        lines.push(
            Line::new("barrier_async_tree", "world", tree, "ns", Better::Lower)
                .baseline("barrier_async_flat", flat),
        );
        barrier();
        lines
    })
    .unwrap_or_else(|e| {
        eprintln!("pgas-bench: collectives job failed: {e}");
        std::process::exit(1)
    });
    // Rank 0's lines, in the process that ran rank 0.
    per_rank.into_rank0().unwrap_or_default()
}

/// Random xor updates into a 1 Mi-word table on rank 1 through the atomic domain, against the
/// same updates on a local table of plain atomics (million updates per second).
fn gups(s: &Sizes, table: GlobalPtr<u64>) -> Line {
    const WORDS: u64 = 1 << 20;
    let updates = s.ops;
    let stream = |mut x: u64| {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    };
    let local: Vec<AtomicU64> = (0..WORDS).map(|_| AtomicU64::new(0)).collect();
    let raw = median_of(s.reps, || {
        let mut next = stream(88172645463325252);
        let start = Instant::now();
        for _ in 0..updates {
            let r = next();
            local[(r % WORDS) as usize].fetch_xor(r, Ordering::SeqCst);
        }
        updates as f64 / start.elapsed().as_secs_f64() / 1e6
    });
    let ad = AtomicDomain::<u64>::new();
    let remote = median_of(s.reps, || {
        let mut next = stream(88172645463325252);
        let start = Instant::now();
        for _ in 0..updates {
            let r = next();
            ad.fetch_xor(table + (r % WORDS) as usize, r).wait();
        }
        updates as f64 / start.elapsed().as_secs_f64() / 1e6
    });
    Line::new("gups", "atomic", remote, "MUP/s", Better::Higher).baseline("raw_atomic_xor", raw)
}

/// Nanoseconds per put of `n` rputs of `src` to `target`, all counted on one promise that is
/// finalized and waited on once at the end (UPC++'s promise flood).
fn promise_flood_ns(src: &[u8], target: GlobalPtr<u8>, n: u64) -> f64 {
    let start = Instant::now();
    let p = Promise::new();
    for _ in 0..n {
        let _ = rput_with(src, target, Completions::new().operation_promise(&p));
    }
    p.finalize().wait();
    start.elapsed().as_nanos() as f64 / n as f64
}

/// `rput_flood` / `8B`: [`flood_count`] 8-byte rputs to rank 1 (the 8-byte case of
/// `rput_bandwidth_promise`: every one counted on one operation `Promise`, all in flight, one
/// `finalize().wait()` at the end), in million puts per second. On smp paired in every
/// repetition with as many blocking bridge puts (`bridge_put_rate_8B`); on mpi measured alone
/// (blocking puts across processes would take the run's time), its baseline the raw `MPI_Put`
/// flood with one flush of the same count (`mpi_put_flood_8B`, `mpi_baselines`).
fn rput_flood(s: &Sizes, target: GlobalPtr<u8>, at: usize) -> Line {
    let n = flood_count(s, 8);
    let src = [3u8; 8];
    let mops = |ns: f64| 1e3 / ns;
    let prom = || mops(promise_flood_ns(&src, target, n));
    let line = |v| Line::new("rput_flood", "8B", v, "Mop/s", Better::Higher);
    if gasnet_bridge::conduit::selected().ok() == Some(gasnet_bridge::ConduitKind::Mpi) {
        return line(median_of(s.reps, prom));
    }
    let raw = || {
        mops(pgas::testing::bench_endpoint(|ep| {
            ns_per_op(n, || ep.put(1, at, &src).unwrap().iwc.into_unit())
        }))
    };
    let (bridge, flood) = paired(s.reps, raw, prom);
    line(flood).baseline("bridge_put_rate_8B", bridge)
}
