//! cd-bench: the cost of Containment Domains against the operations they are built from,
//! measured in the same run (docs/benchmarks.md).
//!
//! - `cd_begin_complete` / `empty`: a `strict_local` CD with an empty body (ns); case
//!   `empty_world`: a `strict` CD spanning the world with an empty body.
//! - `preserve_copy` / `1MiB`: `preserve_slice` of 1 MiB on the local medium (GB/s), against
//!   `memcpy_1MiB`, a copy of the same size into a fresh buffer (as the preservation makes).
//! - `preserve_buddy` / `1MiB`: the same on the buddy medium, against `rput_1MiB`,
//!   `pgas::rput_slice` of 1 MiB to the buddy. The preservation makes two copies: one kept
//!   locally (so that a loss of the buddy does not take the only copy) and one put with one
//!   uncounted rput into a slot of the buddy's segment (the slot reused from the previous
//!   repetition's CD). On smp both are memory copies on the measuring rank's thread (made
//!   chunk by chunk, the array read once), so the ratio stays near 0.6 (`buddy_copies = 2`,
//!   the default).
//! - `preserve_buddy` / `1MiB_one_copy`: the same with `buddy_copies = 1` (the buddy's copy
//!   alone, put straight from the program's array), in a job of its own of `--ranks` ranks,
//!   against `rput_1MiB` measured again in that job (alternating with it).
//! - `preserve_xor` / `1MiB_k4`: `preserve_slice` of 1 MiB on the xor medium with checksum
//!   groups of 4, against `rput_1MiB` measured again in the same job (alternating with it).
//!   It runs in a job of its own of `max(--ranks, 4)` ranks (a group of 4 needs 4 ranks), all
//!   of which preserve together (the parity is collective over the group): every rank keeps
//!   its copy, puts three chunks of a third of it into the other members' staging blocks with
//!   uncounted rputs, waits at one barrier of the group and XORs three chunks into its parity.
//!   Its line says the ranks of that job.
//! - `preserve_xor` / `14x8KiB_k4_batch`: microseconds of one CD preserving 14 entries of
//!   8 KiB on the xor medium inside one `preserve_batch` (one size agreement and one barrier
//!   of the group for all), against `14x8KiB_k4_one_by_one` (two collectives per entry), in
//!   the same job, alternating.
//! - `preserve_buddy` / `1MiB_all_ranks`: in the same job, the buddy medium's preservation of
//!   1 MiB with every rank preserving at once (as they do on the xor medium), against the same
//!   `rput_1MiB`: the buddy medium under the xor line's load.
//! - `recovery_rank_loss` / `xor_k4_1MiB`: in the same job, the time of one world CD
//!   preserving 1 MiB per rank on the xor medium in which rank 1 loses its memory (segment and
//!   copies) and the group rebuilds its copy before the re-execution, against
//!   `forward_xor_k4_1MiB`, the same CD without a loss; `buddy_1MiB` and `file_1MiB` the same
//!   on the buddy medium (rank 1 fetches its copy back from its buddy) and the file medium
//!   (it reads its file back), against their own forward CDs.
//! - `strict_agreement` / `world`: ns per completion of an empty world-spanning CD, whose
//!   cost is its agreement (a reduction over the world), against `barrier_world`
//!   (`pgas::barrier()`).
//! - `relaxed_logged_put` / `8B`: ns per 8-byte `rput` (waited) from rank 0 to rank 1 inside
//!   a relaxed CD with logging (the hook's entry: the bytes, then the ack's EC/IWC), against
//!   `rput_8B_unlogged`, the same put directly in the strict CD around it (no hook), in the
//!   same job, alternating; `relaxed_logged_get` / `8B` the same for an `rget` (the entry
//!   keeps the bytes read), against `rget_8B_unlogged`.
//! - `recovery` / `step`: the time of one world CD that fails on rank 0 and re-executes
//!   (restoring 1 MiB), against the forward time of the same CD without a failure.
//!
//! One repetition is `OPS` CDs (fewer with `--quick`) for latencies and `COPIES` preservations
//! of 1 MiB for bandwidths; recovery repetitions are `STEPS` CDs. The median of `--reps`
//! repetitions after one warm-up is reported. Rank 0 measures; the other ranks take part in
//! the world CDs and serve the buddy copies.

use std::hint::black_box;
use std::time::Instant;

use bench_report::{BenchArgs, Better, Line, median_of, ns_per_op, print};
use cd_runtime::{self as cd, CdConfig, Medium};
use gasnet_bridge::LaunchConfig;

const MIB: usize = 1 << 20;

fn main() {
    let args = BenchArgs::from_env("cd-bench");
    let ops: u64 = if args.quick { 2_000 } else { 50_000 };
    let copies: usize = if args.quick { 8 } else { 64 };
    let steps: usize = if args.quick { 4 } else { 16 };
    let reps = args.reps;
    let ranks = args.ranks;
    let job = LaunchConfig::new(ranks).segment_bytes(4 * MIB);

    let outcome = cd::launch(&job, CdConfig::default(), pgas::RpcTable::new(), || {
        let measuring = pgas::rank_me() == 0;
        let line = |l: Line| l.on("smp", ranks);
        let mut lines = Vec::new();
        let world = pgas::world();

        // -- empty CDs -----------------------------------------------------------------
        if measuring {
            let local = median_of(reps, || {
                ns_per_op(ops, || {
                    cd::strict_local("empty", |_| Ok(())).unwrap();
                })
            });
            lines.push(line(Line::new(
                "cd_begin_complete",
                "empty",
                local,
                "ns",
                Better::Lower,
            )));
        }
        let world_ops = ops / 10;
        let empty_world = time_all(reps, world_ops, || {
            cd::strict("empty_world", |_| Ok(())).unwrap();
        });
        let barrier = time_all(reps, world_ops, pgas::barrier);
        let agreement = time_all(reps, world_ops, || {
            cd::strict("agreement", |_| Ok(())).unwrap();
        });
        if measuring {
            lines.push(line(Line::new(
                "cd_begin_complete",
                "empty_world",
                empty_world,
                "ns",
                Better::Lower,
            )));
            lines.push(line(
                Line::new("strict_agreement", "world", agreement, "ns", Better::Lower)
                    .baseline("barrier_world", barrier),
            ));
        }
        pgas::barrier_on(&world);

        // -- preservation bandwidth, local and buddy ------------------------------------
        // The rput baseline writes into a buffer of rank 1's segment (rank 0's buddy).
        let buffer = pgas::new_array::<f64>(MIB / 8).expect("1 MiB of segment");
        let target = pgas::broadcast_on(&world, buffer, 1).wait();
        if measuring {
            let mut data: Vec<f64> = (0..MIB / 8).map(|i| i as f64).collect();
            let gbps = |ns: f64| MIB as f64 / ns;
            let memcpy = median_of(reps, || {
                gbps(ns_per_op(copies as u64, || {
                    // A fresh destination, as a preservation makes.
                    let copy: Vec<u8> = black_box(bytemuck::cast_slice::<f64, u8>(&data)).to_vec();
                    black_box(copy);
                }))
            });
            let mut preserve = |medium: Medium| {
                median_of(reps, || {
                    gbps(mean_preserve_ns(copies, Span::Local, "preserve", |c| {
                        c.preserve_slice_on("data", &mut data, medium)
                    }))
                })
            };
            let local = preserve(Medium::Local);
            let buddy = preserve(Medium::Buddy);
            lines.push(line(
                Line::new("preserve_copy", "1MiB", local, "GB/s", Better::Higher)
                    .baseline("memcpy_1MiB", memcpy),
            ));
            let rput = median_of(reps, || {
                gbps(ns_per_op(copies as u64, || {
                    pgas::rput_slice(black_box(&data), target).wait();
                }))
            });
            lines.push(line(
                Line::new("preserve_buddy", "1MiB", buddy, "GB/s", Better::Higher)
                    .baseline("rput_1MiB", rput),
            ));
        }
        pgas::barrier_on(&world);

        // -- the cost of logging one operation in a relaxed CD ---------------------------
        // Rank 0 puts (gets) 8 bytes to rank 1, `ops / 10` times per execution of a world
        // CD, inside a relaxed CD (logged: the hook makes an entry with the bytes and the
        // ack's counters) or directly in the strict CD (no hook), alternating.
        let word = pgas::new_::<u64>(0).expect("a word of segment");
        let peer = pgas::broadcast_on(&world, word, 1).wait();
        let per_cd = ops / 10;
        let timed = |relaxed: bool, get: bool| -> f64 {
            let mut ns = 0.0;
            cd::strict("lcsa", |_| {
                let mut body = |_: &cd::Cd| {
                    if measuring {
                        ns = ns_per_op(per_cd, || {
                            if get {
                                black_box(pgas::rget(peer).wait());
                            } else {
                                pgas::rput(black_box(7u64), peer).wait();
                            }
                        });
                    }
                    Ok(())
                };
                if relaxed {
                    cd::relaxed("logged", body)
                } else {
                    body(&cd::current())
                }
            })
            .unwrap();
            ns
        };
        let mut logged = [Vec::new(), Vec::new()];
        let mut plain = [Vec::new(), Vec::new()];
        for _ in 0..reps.max(1) {
            for (k, get) in [false, true].into_iter().enumerate() {
                logged[k].push(timed(true, get));
                plain[k].push(timed(false, get));
            }
        }
        if measuring {
            for (k, (op, base)) in [
                ("relaxed_logged_put", "rput_8B_unlogged"),
                ("relaxed_logged_get", "rget_8B_unlogged"),
            ]
            .into_iter()
            .enumerate()
            {
                lines.push(line(
                    Line::new(
                        op,
                        "8B",
                        bench_report::median(&mut logged[k]),
                        "ns",
                        Better::Lower,
                    )
                    .baseline(base, bench_report::median(&mut plain[k])),
                ));
            }
        }
        pgas::barrier_on(&world);

        // -- recovery of one CD against its forward time --------------------------------
        let mut state: Vec<f64> = (0..MIB / 8).map(|i| (i % 1000) as f64).collect();
        let mut run_step = |fail_once: bool| {
            cd::strict("step", |c| {
                c.preserve_slice("state", &mut state);
                for v in state.iter_mut() {
                    *v = (*v * 3.0 + 1.0) % 1009.0;
                }
                if fail_once && measuring && !c.is_reexecution() {
                    c.fail("benchmark: fail the first execution");
                }
                Ok(())
            })
            .unwrap();
        };
        let forward = time_all(reps, steps as u64, || run_step(false));
        let recovery = time_all(reps, steps as u64, || run_step(true));
        if measuring {
            lines.push(line(
                Line::new("recovery", "step", recovery, "ns", Better::Lower)
                    .baseline("forward_step", forward),
            ));
        }
        Ok(lines)
    })
    .unwrap_or_else(|e| {
        eprintln!("cd-bench: {e}");
        std::process::exit(1)
    });
    let mut lines = outcome.results.into_iter().next().unwrap_or_default();
    lines.extend(one_copy_lines(&args, copies));
    lines.extend(xor_lines(&args, copies, steps));
    print(&lines, args.json);
}

/// The buddy medium with `buddy_copies = 1`, paired with the rput it is made of.
fn one_copy_lines(args: &BenchArgs, copies: usize) -> Vec<Line> {
    let ranks = args.ranks;
    let reps = args.reps;
    let config = CdConfig::parse("buddy_copies = 1\n", "<cd-bench>")
        .expect("the bench's configuration parses");
    let job = LaunchConfig::new(ranks).segment_bytes(4 * MIB);
    let outcome = cd::launch(&job, config, pgas::RpcTable::new(), || {
        let measuring = pgas::rank_me() == 0;
        let world = pgas::world();
        let buffer = pgas::new_array::<f64>(MIB / 8).expect("1 MiB of segment");
        let target = pgas::broadcast_on(&world, buffer, 1).wait();
        let mut lines = Vec::new();
        if measuring {
            let data: Vec<f64> = (0..MIB / 8).map(|i| i as f64).collect();
            let gbps = |ns: f64| MIB as f64 / ns;
            let mut preserved = data.clone();
            let rput = || {
                gbps(ns_per_op(copies as u64, || {
                    pgas::rput_slice(black_box(&data), target).wait();
                }))
            };
            let one_copy = || {
                gbps(mean_preserve_ns(
                    copies,
                    Span::Local,
                    "preserve_one_copy",
                    |c| c.preserve_slice_on("data", &mut preserved, Medium::Buddy),
                ))
            };
            let (rput, one_copy) = bench_report::paired(reps, rput, one_copy);
            lines.push(
                Line::new(
                    "preserve_buddy",
                    "1MiB_one_copy",
                    one_copy,
                    "GB/s",
                    Better::Higher,
                )
                .baseline("rput_1MiB", rput)
                .on("smp", ranks),
            );
        }
        pgas::barrier_on(&world);
        Ok(lines)
    })
    .unwrap_or_else(|e| {
        eprintln!("cd-bench: the one-copy buddy job: {e}");
        std::process::exit(1)
    });
    outcome.results.into_iter().next().unwrap_or_default()
}

/// The lines of the xor medium (groups of 4), from a job of `max(--ranks, 4)` ranks.
/// Which CD a preservation benchmark opens.
#[derive(Clone, Copy)]
enum Span {
    /// On this rank alone (`cd::strict_local`).
    Local,
    /// Over the world (`cd::strict`), every rank preserving together.
    World,
}

/// Mean nanoseconds of `preserve` over `copies` CDs called `name`, timing the preservation
/// alone (not the CD's begin and completion).
fn mean_preserve_ns(
    copies: usize,
    span: Span,
    name: &str,
    mut preserve: impl FnMut(&cd::Cd),
) -> f64 {
    let mut ns = 0.0;
    for _ in 0..copies {
        let mut body = |c: &cd::Cd| {
            let start = Instant::now();
            preserve(c);
            ns += start.elapsed().as_nanos() as f64;
            Ok(())
        };
        match span {
            Span::Local => cd::strict_local(name, &mut body),
            Span::World => cd::strict(name, &mut body),
        }
        .unwrap();
    }
    ns / copies as f64
}

fn xor_lines(args: &BenchArgs, copies: usize, steps: usize) -> Vec<Line> {
    let ranks = args.ranks.max(4);
    let reps = args.reps;
    // Rank 1 loses its memory in the first execution of every recovery CD (the warm-up
    // repetition's too).
    let losses: Vec<String> = (0..(reps + 1) * steps)
        .map(|i| format!("{{ rank = 1, iteration = {i}, kind = \"rank_loss\" }}"))
        .collect();
    let losses = losses.join(", ");
    let config = CdConfig::parse(
        &format!(
            "[defaults]\nxor_group = 4\nmedium = \"xor\"\n\
             [cd.xor_recovery]\ninject = {{ at = [{losses}] }}\n\
             [cd.buddy_forward]\nmedium = \"buddy\"\n\
             [cd.buddy_recovery]\nmedium = \"buddy\"\ninject = {{ at = [{losses}] }}\n\
             [cd.file_forward]\nmedium = \"file\"\n\
             [cd.file_recovery]\nmedium = \"file\"\ninject = {{ at = [{losses}] }}\n"
        ),
        "<cd-bench>",
    )
    .expect("the bench's configuration parses");
    let job = LaunchConfig::new(ranks).segment_bytes(4 * MIB);
    let outcome = cd::launch(&job, config, pgas::RpcTable::new(), || {
        let measuring = pgas::rank_me() == 0;
        let line = |l: Line| l.on("smp", ranks);
        let mut lines = Vec::new();
        let world = pgas::world();
        let buffer = pgas::new_array::<f64>(MIB / 8).expect("1 MiB of segment");
        let target = pgas::broadcast_on(&world, buffer, 1).wait();
        let mut data: Vec<f64> = (0..MIB / 8).map(|i| (i + pgas::rank_me()) as f64).collect();
        let gbps = |ns: f64| MIB as f64 / ns;
        let rput = || {
            if !measuring {
                return 0.0;
            }
            gbps(ns_per_op(copies as u64, || {
                pgas::rput_slice(black_box(&data), target).wait();
            }))
        };
        let mut preserved = data.clone();
        let xor = || {
            gbps(mean_preserve_ns(copies, Span::World, "preserve_xor", |c| {
                c.preserve_slice_on("data", &mut preserved, Medium::Xor)
            }))
        };
        let (rput, xor) = bench_report::paired(reps, rput, xor);
        // Many small entries (LULESH's cycle state is 14): one batch, one round of the group,
        // against a round per entry.
        let small: std::cell::RefCell<Vec<Vec<f64>>> =
            std::cell::RefCell::new((0..14).map(|k| vec![k as f64; 1024]).collect());
        let entries = |batched: bool| {
            let ns = mean_preserve_ns(copies, Span::World, "preserve_xor_entries", |c| {
                let mut small = small.borrow_mut();
                let mut each = |c: &cd::Cd| {
                    for (k, v) in small.iter_mut().enumerate() {
                        c.preserve_slice_on(&format!("e{k}"), v, Medium::Xor);
                    }
                };
                if batched {
                    c.preserve_batch(each);
                } else {
                    each(c);
                }
            });
            ns / 1e3
        };
        let (one_by_one, batch) = bench_report::paired(reps, || entries(false), || entries(true));
        if measuring {
            lines.push(line(
                Line::new(
                    "preserve_xor",
                    "14x8KiB_k4_batch",
                    batch,
                    "us",
                    Better::Lower,
                )
                .baseline("14x8KiB_k4_one_by_one", one_by_one),
            ));
        }
        // The buddy medium under the same load: every rank preserving at once.
        let buddy = median_of(reps, || {
            gbps(mean_preserve_ns(
                copies,
                Span::World,
                "preserve_buddy_all",
                |c| c.preserve_slice_on("data", &mut preserved, Medium::Buddy),
            ))
        });
        if measuring {
            lines.push(line(
                Line::new("preserve_xor", "1MiB_k4", xor, "GB/s", Better::Higher)
                    .baseline("rput_1MiB", rput),
            ));
            lines.push(line(
                Line::new(
                    "preserve_buddy",
                    "1MiB_all_ranks",
                    buddy,
                    "GB/s",
                    Better::Higher,
                )
                .baseline("rput_1MiB", rput),
            ));
        }
        // Last: the losses poison rank 1's segment (the rput target among it).
        let mut run_step = |name: &str| {
            cd::strict(name, |c| {
                c.preserve_slice("state", &mut data);
                for v in data.iter_mut() {
                    *v = (*v * 3.0 + 1.0) % 1009.0;
                }
                Ok(())
            })
            .unwrap();
        };
        for (medium, case) in [
            ("xor", "xor_k4_1MiB"),
            ("buddy", "buddy_1MiB"),
            ("file", "file_1MiB"),
        ] {
            let forward = time_all(reps, steps as u64, || {
                run_step(&format!("{medium}_forward"))
            });
            let recovery = time_all(reps, steps as u64, || {
                run_step(&format!("{medium}_recovery"))
            });
            if measuring {
                lines.push(line(
                    Line::new("recovery_rank_loss", case, recovery, "ns", Better::Lower)
                        .baseline(&format!("forward_{case}"), forward),
                ));
            }
        }
        Ok(lines)
    })
    .unwrap_or_else(|e| {
        eprintln!("cd-bench: the xor medium's job: {e}");
        std::process::exit(1)
    });
    outcome.results.into_iter().next().unwrap_or_default()
}

/// Median ns per call of `op`, run on every rank in step (a barrier before each repetition).
fn time_all(reps: usize, ops: u64, mut op: impl FnMut()) -> f64 {
    median_of(reps, || {
        pgas::barrier();
        ns_per_op(ops, &mut op)
    })
}
