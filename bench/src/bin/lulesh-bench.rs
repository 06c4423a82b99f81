//! lulesh-bench: the cost of Containment Domains on LULESH (docs/benchmarks.md).
//!
//! One repetition is a pair of complete single-rank runs of the same problem
//! (`-s 30`, `-s 10` with `--quick`), run through the library in this
//! process: one without CDs (the serial code path, no CD runtime at all) and
//! one under CDs ([`lulesh::containment::run`]: the root CD, one strict CD
//! "step" per cycle preserving the cycle's state, no faults). The two runs
//! of a pair alternate in order from one repetition to the next; after one
//! warm-up pair, the median of `--reps` pairs is reported.
//!
//! Lines:
//! - `lulesh_cd_overhead` / `s30`: wall seconds of the run with CDs,
//!   baseline `lulesh_no_cd_s30` (the run without); the ratio is the
//!   failure-free overhead (target: at most 1.02, ROADMAP.md).
//! - `lulesh_cd_overhead_cpu` / `s30`: the same in CPU seconds (user + sys of
//!   the process), which other load on the machine disturbs less.
//! - `lulesh_fom` / `s30`: the figure of merit (zones per second, as LULESH
//!   prints it, over the cycle loop) of the run without CDs; `s30_cd` the
//!   one with CDs against it.
//!
//! - `lulesh_cd_preserve` / `s30`: milliseconds per cycle spent preserving
//!   (the CD report's preservation time over the cycles), baseline
//!   `lulesh_no_cd_cycle_s30` (milliseconds per cycle without CDs): the
//!   ratio is the share of a cycle the copies take, a measure other load
//!   disturbs less than the difference of two run times.
//!
//! These lines say `ranks: 1` (the runs are single-rank; `--ranks` is ignored).
//!
//! Relaxed CDs (8 ranks, `-s 15`, `-s 5` with `--quick`; `ranks: 8`): one repetition is a
//! pair of complete runs, alternating in order, after one warm-up pair; times are the cycle
//! loops' (LULESH's "Elapsed time", maximum over ranks):
//! - `relaxed_logging_overhead` / `lulesh_s15_r8`: the run with a strict CD per cycle and a
//!   relaxed CD "rank_step" per rank inside it, logging, no faults
//!   (`lulesh/configs/relaxed.toml`), against `lulesh_no_cd_s15_r8`, the run without CDs
//!   (the reference's arrival rpcs). Target: at most 1.03.
//! - `relaxed_logging_overhead_paired` / `lulesh_s15_r8`: the median over repetitions of each
//!   repetition's relaxed time over its no-CD time (both runs of one repetition are
//!   neighbours in time, so slow drifts of the machine cancel); unit `x`, no baseline.
//! - `relaxed_logging_overhead` / `lulesh_s15_r8_step4` (and `_paired`): the same with
//!   `[cd.step] interval = 4` (`lulesh/configs/relaxed-step4.toml`): the strict CD and the
//!   relaxed CDs inside it span four cycles, so the step's agreement and copy come once per
//!   four cycles (the "a strict CD per time step, or per k steps"), in the same
//!   repetitions, against the same no-CD runs.
//! - `relaxed_logging_overhead` / `lulesh_s15_r8_buddy_durable`: the relaxed run with its log
//!   (and preserved state) at the buddy, durable at every operation (`log_durable =
//!   "operation"`), against `lulesh_s15_r8_buddy_end_of_body`, the same replicated at the end
//!   of each body only (`log_durable = "end"`), in the same repetitions: the cost of the
//!   flushes (`_paired`: the median of the per-repetition ratios); `_buddy_end_of_body` and
//!   `_buddy_durable_vs_no_cd` give each against the run without CDs.
//! - `relaxed_logging_overhead` / `lulesh_s15_r8_same_comm`: the same relaxed runs against
//!   runs without CDs using the relaxed runs' halo arrivals (flags), `lulesh_no_cd_flags_s15_r8`:
//!   the cost of the CDs alone.
//! - `relaxed_recovery` / `lulesh_one_fault`: milliseconds of one relaxed recovery (the CD
//!   report's recovery time over its re-executions; ten soft errors at different cycles and
//!   ranks per run), against `rank_step_forward`, the milliseconds of one cycle of the
//!   fault-free relaxed run. Target: at most 1.2.
//! - `reexecuted_ranks` / `relaxed`: ranks that re-execute for one soft error in
//!   "rank_step" (the report's failure record), against `reexecuted_ranks_strict`;
//!   `reexecuted_ranks` / `strict`: the same for a soft error in the strict "step". Target:
//!   1 against 8.
//! - `log_bytes` / `lulesh_step`: bytes logged per rank per cycle.
//!
//! Checkpoints to disk (`cd-runtime/src/checkpoint/README.md`; one rank, `-s 30`, `-s 10` with
//! `--quick`; `ranks: 1`), all runs under CDs with the strict CD "step" per cycle; the
//! checkpoints go to a fresh directory in the working directory, removed at the end:
//! - `checkpoint_overhead` / `lulesh_s30`: wall seconds of the whole run (setup, cycles and the
//!   last checkpoint's commit) with `[cd.step] checkpoint = { every = n }`, against
//!   `lulesh_no_checkpoint_s30`, the same run without the key, alternating in order. n is
//!   Daly's interval for an MTBF of one hour and δ the write time of one checkpoint measured by
//!   a calibration run before the repetitions, at most just over half the run's cycles (so
//!   that the run takes at most one checkpoint, and none is left to commit at its end);
//!   `checkpoint_interval` / `lulesh_s30` prints n. Target: at most 1.02.
//!   `checkpoint_overhead_cpu`: the same in CPU seconds of the process (the writer's
//!   included), which other load on the machine disturbs less; `checkpoint_overhead_paired`:
//!   the median of each repetition's ratio of the two wall times (unit `x`).
//! - `checkpoint_write` / `lulesh_s30`: bytes per second the background writer made durable
//!   (the CD report's `bytes_checkpointed` over `checkpoint_write_ns`) in a run with a
//!   checkpoint every tenth of its cycles, against `sequential_write`: as many checkpoints'
//!   bytes written right after it, each as one file by one `write` and one `fsync` (dd-like).
//!   Target: at least 0.8.
//!   `checkpoint_write_vs_pair`: the same rate against `sequential_write_pair`, those bytes
//!   as two files in two new directories written and `fsync`ed (files and directories) at
//!   once, the durability work the writer does. `LULESH_BENCH_CHECKPOINT_S=45` runs these
//!   lines at another size (a larger state per checkpoint).
//! - `restart_time` / `lulesh_s30`: seconds from the call that launches the run to the end of
//!   its first cycle, for a run with `--restart auto` resuming from those checkpoints, against
//!   `cold_start`, the same without a restart, alternating in order.
//!
//! - `dependency_tracking_overhead` / `lulesh_s15_r8`: the relaxed run (`relaxed.toml`) with
//!   `[cd.step] dependency_tracking = true` (notes from the first step on) against
//!   `tracking_off_lulesh_s15_r8`, the same with `false`, alternating in order; `_paired`: the
//!   median of each repetition's ratio (unit `x`). Target: at most 1.005.
//!
//! `LULESH_BENCH=relaxed` runs only the relaxed lines (the tracking ones included;
//! `LULESH_BENCH=tracking` only those), `LULESH_BENCH=strict` only the strict
//! ones, `LULESH_BENCH=media` the media lines, `LULESH_BENCH=checkpoint` the checkpoint lines.
//!
//! `--escalation-table` prints instead the table of node-level dependency tracking (issue
//! 11), on 27 and 64 ranks (one rank per emulated node unless `PGAS_RANKS_PER_NODE` says
//! otherwise), for two programs whose relaxed CD "rank_step" (one per rank, `retries = 0`)
//! fails once on a corner rank (0) or an interior rank (13 of 27, 21 of 64) and escalates to
//! the strict CD around it (a soft error; in cases `_log_lost` a rank loss that takes the
//! rank's log, `log_medium = "local"`, with the strict CD's state at the buddy), run with
//! `dependency_tracking = true` and `false` on that CD:
//! LULESH `-s 14` (`-s 3` with `--quick`), 10 cycles, "rank_step" inside "step"; and the CD
//! stencil of the examples (`cd_stencil`, run by `pgas_examples::jacobi::cd_run`), 64^3 points
//! per rank for 10 iterations (4^3 for 6 with `--quick`), "rank_step" inside "iteration".
//! Cases `lulesh_r64_corner`, `lulesh_r64_interior`, `stencil_r27_corner`, and so on.
//!
//! The sizes make a rank's step cost milliseconds, as a real run's would at the least: the
//! planning of a limited re-execution has a fixed cost (an allgather over the 64 thread-ranks
//! on a few cores takes milliseconds), which at `-s 6` or 32^3 per rank is as large as the
//! step itself and measures the machine's thread switching rather than the protocol.
//!
//! - `escalation_ranks`: the ranks that re-executed with the lists, against
//!   `escalation_ranks_no_deps` (the same run without; every rank). Targets (64 ranks): at
//!   most 8 (corner) and 27 (interior).
//! - `escalation_recovery`: seconds of the recovery (planning, restoring and re-executing the
//!   strict CD, the slowest re-executing rank), against `escalation_recovery_no_deps`. Target:
//!   at most 0.3.
//!
//! `--spbc-table` prints instead a markdown table of SPBC clusters of relaxed CDs (`cluster`
//! in the CD configuration): LULESH on 64 ranks (`-s 10`, `-s 3` with `--quick`; 40 cycles),
//! the relaxed configuration, for clusters of 1 (none), 2, 4, 8, 16 and 64 consecutive
//! ranks. Per size: the bytes logged per rank per cycle (the report's `bytes_logged` of
//! "rank_step" over its executions), the logging overhead (the cycle loop's time with logging
//! over the same configuration with `logging = false` on "rank_step", alternating in order
//! after a warm-up pair, the median of `--reps` per-pair ratios), and the ranks re-executed for
//! one soft error in "rank_step" on rank 21 (the report's failure record of "step", or of
//! "rank_step" when the rank recovered alone), that run checked to print the fault-free energy.
//!
//! Both runs of a case are checked to print the fault-free run's energy (LULESH) or checksum
//! (stencil) bit for bit. The stencil's tracked runs are also checked to re-execute exactly the
//! ranks its halo pattern implies, computed here from the process grid: the failed rank's node
//! and the nodes that put faces into it (its face neighbours'; it reads only its own memory).
//! One repetition is a pair of runs, with and without the lists, alternating in order, after
//! one warm-up pair (`--reps`, median).

use std::collections::BTreeSet;
use std::time::Instant;

use bench::checkpoint_dir::{CheckpointDir, sequential_write, sequential_write_pair};
use bench::cpu_time::cpu_seconds;
use bench_report::{BenchArgs, Better, Line, median, print};
use cd_runtime::CdConfig;
use lulesh::distributed::{self, Arrival};
use lulesh::verify::fmt_e;
use lulesh::{FinalReport, Options, Simulation, containment};
use pgas_examples::jacobi::{Checksum, ITERATION_CD, RANK_CD, cd_run, process_grid};

/// One measured run: wall seconds, CPU seconds, its report, and for a run
/// with CDs the milliseconds per cycle spent preserving.
struct Sample {
    wall: f64,
    cpu: f64,
    report: FinalReport,
    preserve_ms_per_cycle: f64,
}

impl Sample {
    /// Milliseconds per cycle of the cycle loop.
    fn cycle_ms(&self) -> f64 {
        self.report.elapsed * 1e3 / f64::from(self.report.cycles)
    }
}

fn measure(run: impl FnOnce() -> (FinalReport, f64)) -> Sample {
    let (c0, t0) = (cpu_seconds(), Instant::now());
    let (report, preserve_ms_per_cycle) = run();
    Sample {
        wall: t0.elapsed().as_secs_f64(),
        cpu: cpu_seconds() - c0,
        report,
        preserve_ms_per_cycle,
    }
}

fn without_cds(opts: &Options) -> (FinalReport, f64) {
    let mut sim = Simulation::single_rank(opts).expect("setup");
    let elapsed = sim.run(opts.its, |_| {}).expect("the run completes");
    (FinalReport::new(&sim.domain, elapsed, opts.nx, 1), 0.0)
}

fn with_cds(opts: &Options) -> (FinalReport, f64) {
    let out = containment::run(opts, 1, CdConfig::default(), |_| {})
        .expect("the run completes")
        .expect("a one-rank job runs in this process");
    let step = out
        .cd_report
        .cd(containment::STEP_CD)
        .expect("the step CD ran");
    let per_cycle = step.preserve_ns as f64 / 1e6 / step.executions as f64;
    (out.report, per_cycle)
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let table = argv.iter().any(|a| a == "--escalation-table");
    let spbc = argv.iter().any(|a| a == "--spbc-table");
    let args = BenchArgs::from_args(
        "lulesh-bench",
        argv.into_iter()
            .filter(|a| a != "--escalation-table" && a != "--spbc-table"),
    );
    if spbc {
        spbc_table(&args);
        return;
    }
    if table {
        if std::env::var_os("PGAS_RANKS_PER_NODE").is_none() {
            // SAFETY: no other thread exists yet (no job has been launched), so nothing reads
            // the environment concurrently.
            unsafe { std::env::set_var("PGAS_RANKS_PER_NODE", "1") };
        }
        print(&escalation_lines(&args), args.json);
        return;
    }
    let only = std::env::var("LULESH_BENCH").unwrap_or_default();
    let mut lines = Vec::new();
    if only.is_empty() || only == "strict" {
        lines.extend(strict_lines(&args));
    }
    if only.is_empty() || only == "relaxed" {
        lines.extend(relaxed_lines(&args));
    }
    if only.is_empty() || only == "relaxed" || only == "tracking" {
        lines.extend(tracking_lines(&args));
    }
    if only.is_empty() || only == "media" {
        lines.extend(media_lines(&args));
    }
    if only.is_empty() || only == "checkpoint" {
        lines.extend(checkpoint_lines(&args));
    }
    print(&lines, args.json);
}

const RANKS: usize = 8;
const RELAXED: &str = include_str!("../../../lulesh/configs/relaxed.toml");

/// Cycles per execution of the strict "step" in the second relaxed configuration
/// (`[cd.step] interval`): its agreement and preservation once per that many cycles.
const STEP_CYCLES: u32 = 4;

fn relaxed_config(extra: &str) -> CdConfig {
    CdConfig::parse(&format!("{RELAXED}{extra}"), "relaxed.toml").expect("valid configuration")
}

/// An 8-rank run without CDs: its report.
fn no_cd_r8(opts: &Options, arrival: Arrival) -> FinalReport {
    distributed::run_with_arrival(opts, RANKS, arrival, |_| {})
        .expect("the run completes")
        .expect("rank 0 runs in this process")
}

/// An 8-rank run under CDs configured by `config`.
fn cd_r8(opts: &Options, config: CdConfig) -> containment::CdRunOutput {
    containment::run(opts, RANKS, config, |_| {})
        .expect("the run completes")
        .expect("rank 0 runs in this process")
}

fn same_physics(a: &FinalReport, b: &FinalReport) {
    assert_eq!(a.cycles, b.cycles);
    assert_eq!(fmt_e(a.energy_sum, 17), fmt_e(b.energy_sum, 17));
}

/// `dependency_tracking_overhead`: the relaxed run with the step's dependency notes kept from
/// its first instance against the same run with them off, alternating in order.
fn tracking_lines(args: &BenchArgs) -> Vec<Line> {
    let size = if args.quick { 5 } else { 15 };
    let opts = Options {
        nx: size,
        quiet: true,
        ..Options::default()
    };
    let case = format!("lulesh_s{size}_r{RANKS}");
    let step = containment::STEP_CD;
    let (mut on, mut off) = (Vec::new(), Vec::new());
    let mut energy = None;
    for rep in 0..=args.reps.max(1) {
        let mut t = [0.0; 2];
        for k in 0..2 {
            let which = (k + rep) % 2;
            let out = cd_r8(
                &opts,
                relaxed_config(&format!(
                    "[cd.{step}]\ndependency_tracking = {}\n",
                    which == 0
                )),
            );
            // Both runs compute the same bits; the tracked one kept notes on every rank.
            let e = fmt_e(out.report.energy_sum, 17);
            assert_eq!(energy.get_or_insert_with(|| e.clone()), &e);
            t[which] = out.report.elapsed;
        }
        if !args.json {
            eprintln!(
                "tracking rep {rep}{}: on {:.3} s, off {:.3} s",
                if rep == 0 { " (warm-up)" } else { "" },
                t[0],
                t[1]
            );
        }
        if rep > 0 {
            on.push(t[0]);
            off.push(t[1]);
        }
    }
    let mut paired: Vec<f64> = on.iter().zip(&off).map(|(a, b)| a / b).collect();
    vec![
        Line::new(
            "dependency_tracking_overhead_paired",
            &case,
            median(&mut paired),
            "x",
            Better::Lower,
        ),
        Line::new(
            "dependency_tracking_overhead",
            &case,
            median(&mut on),
            "s",
            Better::Lower,
        )
        .baseline(&format!("tracking_off_{case}"), median(&mut off)),
    ]
}

fn relaxed_lines(args: &BenchArgs) -> Vec<Line> {
    let size = if args.quick { 5 } else { 15 };
    let opts = Options {
        nx: size,
        quiet: true,
        ..Options::default()
    };
    let case = format!("lulesh_s{size}_r{RANKS}");
    let reps = args.reps.max(1);

    // Overhead: no CDs (rpc arrivals), no CDs (flag arrivals), relaxed, relaxed with a strict
    // "step" per STEP_CYCLES cycles; rotating order.
    let (mut plain, mut flags, mut relaxed) = (Vec::new(), Vec::new(), Vec::new());
    let mut relaxed_k = Vec::new();
    let per_k = format!("[cd.{}]\ninterval = {STEP_CYCLES}\n", containment::STEP_CD);
    let mut log_bytes = Vec::new();
    // Relaxed with the log at the buddy: durable at every operation, and at the end of each
    // body only (both with the preserved state at the buddy too).
    let (mut durable, mut at_end) = (Vec::new(), Vec::new());
    let buddy = |when: &str| {
        relaxed_config(&format!(
            "medium = \"buddy\"\nlog_medium = \"buddy\"\nlog_durable = \"{when}\"\n"
        ))
    };
    for rep in 0..=reps {
        let mut t = [0.0; 6];
        for k in 0..6 {
            let which = (k + rep) % 6;
            t[which] = match which {
                0 => no_cd_r8(&opts, Arrival::Rpc).elapsed,
                1 => no_cd_r8(&opts, Arrival::Flags).elapsed,
                3 => {
                    let config = CdConfig::parse(&format!("{per_k}{RELAXED}"), "relaxed.toml")
                        .expect("valid configuration");
                    let out = cd_r8(&opts, config);
                    if rep == 0 {
                        same_physics(&out.report, &no_cd_r8(&opts, Arrival::Flags));
                    }
                    out.report.elapsed
                }
                4 => cd_r8(&opts, buddy("operation")).report.elapsed,
                5 => cd_r8(&opts, buddy("end")).report.elapsed,
                _ => {
                    let out = cd_r8(&opts, relaxed_config(""));
                    let inner = out
                        .cd_report
                        .cd(containment::RANK_CD)
                        .expect("rank_step ran");
                    log_bytes.push(inner.bytes_logged as f64 / inner.executions as f64);
                    out.report.elapsed
                }
            };
        }
        if !args.json {
            eprintln!(
                "relaxed rep {rep}{}: no CDs {:.3} s, no CDs (flags) {:.3} s, relaxed {:.3} s, \
                 relaxed with \"step\" per {STEP_CYCLES} cycles {:.3} s, buddy logs durable \
                 at every operation {:.3} s, at the end of each body {:.3} s",
                if rep == 0 { " (warm-up)" } else { "" },
                t[0],
                t[1],
                t[2],
                t[3],
                t[4],
                t[5]
            );
        }
        if rep > 0 {
            plain.push(t[0]);
            flags.push(t[1]);
            relaxed.push(t[2]);
            relaxed_k.push(t[3]);
            durable.push(t[4]);
            at_end.push(t[5]);
        }
    }
    let clean = cd_r8(&opts, relaxed_config(""));
    let cycles = clean.report.cycles;
    let forward_ms = clean.report.elapsed * 1e3 / f64::from(cycles);

    // Recovery: ten soft errors spread over cycles and ranks, per run.
    let faults: Vec<String> = (0..10)
        .map(|i| {
            let cycle = (i + 1) * cycles as usize / 11;
            format!(
                "{{ rank = {}, iteration = {cycle}, kind = \"soft\" }}",
                (3 * i) % RANKS
            )
        })
        .collect();
    let inject = format!("inject = {{ at = [{}] }}\n", faults.join(", "));
    let mut recovery_ms = Vec::new();
    let mut forward = Vec::new();
    let mut relaxed_ranks = 0.0;
    for _ in 0..=reps {
        let out = cd_r8(&opts, relaxed_config(&inject));
        same_physics(&out.report, &clean.report);
        let inner = out
            .cd_report
            .cd(containment::RANK_CD)
            .expect("rank_step ran");
        assert_eq!(inner.reexecutions, 10);
        assert_eq!(inner.escalations, 0);
        relaxed_ranks = inner
            .failures
            .iter()
            .map(|f| f.ranks.len() as f64)
            .sum::<f64>()
            / inner.failures.len() as f64;
        recovery_ms.push(inner.recover_ns as f64 / 1e6 / inner.reexecutions as f64);
        forward.push(out.report.elapsed * 1e3 / f64::from(out.report.cycles));
    }
    recovery_ms.remove(0);
    forward.remove(0);
    let _ = forward_ms;

    // Ranks re-executed for one soft error in the strict step CD (no relaxed CD).
    let strict_cfg = CdConfig::parse(
        &format!(
            "[cd.step]\ninject = {{ at = [{{ rank = 3, iteration = {}, kind = \"soft\" }}] }}\n",
            cycles / 2
        ),
        "strict.toml",
    )
    .expect("valid configuration");
    let strict = cd_r8(&opts, strict_cfg);
    same_physics(&strict.report, &clean.report);
    let step = strict.cd_report.cd(containment::STEP_CD).expect("step ran");
    let strict_ranks = step.failures[0].ranks.len() as f64;

    // The ratio of each repetition's relaxed run to the no-CD run beside it: drifts of the
    // machine's speed that span a repetition cancel, which a ratio of two medians keeps.
    let mut paired: Vec<f64> = relaxed.iter().zip(&plain).map(|(r, p)| r / p).collect();
    let mut paired_k: Vec<f64> = relaxed_k.iter().zip(&plain).map(|(r, p)| r / p).collect();
    let case_k = format!("{case}_step{STEP_CYCLES}");
    let mut paired_durable: Vec<f64> = durable.iter().zip(&at_end).map(|(d, e)| d / e).collect();
    vec![
        Line::new(
            "relaxed_logging_overhead",
            &format!("{case}_buddy_durable"),
            median(&mut durable.clone()),
            "s",
            Better::Lower,
        )
        .baseline(
            &format!("{case}_buddy_end_of_body"),
            median(&mut at_end.clone()),
        ),
        Line::new(
            "relaxed_logging_overhead_paired",
            &format!("{case}_buddy_durable"),
            median(&mut paired_durable),
            "x",
            Better::Lower,
        ),
        Line::new(
            "relaxed_logging_overhead",
            &format!("{case}_buddy_end_of_body"),
            median(&mut at_end),
            "s",
            Better::Lower,
        )
        .baseline(
            &format!("lulesh_no_cd_s{size}_r{RANKS}"),
            median(&mut plain.clone()),
        ),
        Line::new(
            "relaxed_logging_overhead",
            &format!("{case}_buddy_durable_vs_no_cd"),
            median(&mut durable),
            "s",
            Better::Lower,
        )
        .baseline(
            &format!("lulesh_no_cd_s{size}_r{RANKS}"),
            median(&mut plain.clone()),
        ),
        Line::new(
            "relaxed_logging_overhead_paired",
            &case_k,
            median(&mut paired_k),
            "x",
            Better::Lower,
        ),
        Line::new(
            "relaxed_logging_overhead",
            &case_k,
            median(&mut relaxed_k),
            "s",
            Better::Lower,
        )
        .baseline(
            &format!("lulesh_no_cd_s{size}_r{RANKS}"),
            median(&mut plain.clone()),
        ),
        Line::new(
            "relaxed_logging_overhead_paired",
            &case,
            median(&mut paired),
            "x",
            Better::Lower,
        ),
        Line::new(
            "relaxed_logging_overhead",
            &case,
            median(&mut relaxed.clone()),
            "s",
            Better::Lower,
        )
        .baseline(
            &format!("lulesh_no_cd_s{size}_r{RANKS}"),
            median(&mut plain),
        ),
        Line::new(
            "relaxed_logging_overhead",
            &format!("{case}_same_comm"),
            median(&mut relaxed),
            "s",
            Better::Lower,
        )
        .baseline(
            &format!("lulesh_no_cd_flags_s{size}_r{RANKS}"),
            median(&mut flags),
        ),
        Line::new(
            "relaxed_recovery",
            "lulesh_one_fault",
            median(&mut recovery_ms),
            "ms",
            Better::Lower,
        )
        .baseline("rank_step_forward", median(&mut forward)),
        Line::new(
            "reexecuted_ranks",
            "relaxed",
            relaxed_ranks,
            "ranks",
            Better::Lower,
        )
        .baseline("reexecuted_ranks_strict", strict_ranks),
        Line::new(
            "reexecuted_ranks",
            "strict",
            strict_ranks,
            "ranks",
            Better::Lower,
        ),
        Line::new(
            "log_bytes",
            "lulesh_step",
            median(&mut log_bytes),
            "B",
            Better::Lower,
        ),
    ]
    .into_iter()
    .map(|l| l.on("smp", RANKS))
    .collect()
}

/// The preservation media compared by [`media_lines`]: name, top-level keys and the
/// `[cd.step]` settings.
const MEDIA: &[(&str, &str, &str)] = &[
    ("local", "", "medium = \"local\""),
    ("buddy", "", "medium = \"buddy\""),
    ("buddy_one_copy", "buddy_copies = 1\n", "medium = \"buddy\""),
    ("file", "", "medium = \"file\""),
    ("xor_k4", "", "medium = \"xor\"\nxor_group = 4"),
    // Daly's interval for an MTBF of one hour (issue 13): "step" preserves every n cycles.
    (
        "buddy_daly",
        "",
        "medium = \"buddy\"\ninterval = \"daly\"\nmtbf_seconds = 3600.0",
    ),
    (
        "xor_k4_daly",
        "",
        "medium = \"xor\"\nxor_group = 4\ninterval = \"daly\"\nmtbf_seconds = 3600.0",
    ),
];

/// Failure-free cost of each preservation medium (the file medium writes on a thread of its
/// own, the xor medium keeps groups of 4): LULESH `-s 15 --ranks 8` (`-s 5` with
/// `--quick`) with a strict CD per cycle preserving on that medium (the `_daly` cases: per n
/// cycles, n from Daly's formula for the measured preservation time and an MTBF of one hour),
/// against the same run without CDs, in rotating order within each repetition.
fn media_lines(args: &BenchArgs) -> Vec<Line> {
    let size = if args.quick { 5 } else { 15 };
    let opts = Options {
        nx: size,
        quiet: true,
        ..Options::default()
    };
    let reps = args.reps.max(1);
    let configs: Vec<CdConfig> = MEDIA
        .iter()
        .map(|(name, top, settings)| {
            CdConfig::parse(
                &format!("{top}[cd.step]\n{settings}\n"),
                format!("{name}.toml"),
            )
            .expect("valid configuration")
        })
        .collect();
    let mut plain = Vec::new();
    let mut with: Vec<Vec<f64>> = vec![Vec::new(); MEDIA.len()];
    let reference = no_cd_r8(&opts, Arrival::Rpc);
    for rep in 0..=reps {
        let runs = MEDIA.len() + 1;
        for k in 0..runs {
            let which = (k + rep) % runs;
            if which == MEDIA.len() {
                let t = no_cd_r8(&opts, Arrival::Rpc).elapsed;
                if rep > 0 {
                    plain.push(t);
                }
            } else {
                let out = cd_r8(&opts, configs[which].clone());
                same_physics(&out.report, &reference);
                if rep > 0 {
                    with[which].push(out.report.elapsed);
                }
            }
        }
    }
    let base = median(&mut plain);
    MEDIA
        .iter()
        .zip(with.iter_mut())
        .map(|((name, _, _), times)| {
            Line::new(
                "lulesh_medium_overhead",
                &format!("{name}_s{size}_r{RANKS}"),
                median(times),
                "s",
                Better::Lower,
            )
            .baseline(&format!("lulesh_no_cd_s{size}_r{RANKS}"), base)
            .on("smp", RANKS)
        })
        .collect()
}

fn strict_lines(args: &BenchArgs) -> Vec<Line> {
    let size = if args.quick { 10 } else { 30 };
    let opts = Options {
        nx: size,
        quiet: true,
        ..Options::default()
    };
    let case = format!("s{size}");

    let mut plain = Vec::new();
    let mut cds = Vec::new();
    for rep in 0..=args.reps.max(1) {
        let pair = if rep % 2 == 0 {
            let p = measure(|| without_cds(&opts));
            (p, measure(|| with_cds(&opts)))
        } else {
            let c = measure(|| with_cds(&opts));
            (measure(|| without_cds(&opts)), c)
        };
        // The same numbers with and without CDs, or the comparison is void.
        for r in [&pair.0.report, &pair.1.report] {
            assert_eq!(r.cycles, pair.0.report.cycles);
            assert_eq!(fmt_e(r.energy_sum, 17), fmt_e(pair.0.report.energy_sum, 17));
        }
        if !args.json {
            eprintln!(
                "rep {rep}{}: no CDs {:.3} s ({:.2} s CPU), CDs {:.3} s ({:.2} s CPU)",
                if rep == 0 { " (warm-up)" } else { "" },
                pair.0.wall,
                pair.0.cpu,
                pair.1.wall,
                pair.1.cpu
            );
        }
        if rep > 0 {
            plain.push(pair.0);
            cds.push(pair.1);
        }
    }
    let med =
        |v: &[Sample], f: fn(&Sample) -> f64| median(&mut v.iter().map(f).collect::<Vec<_>>());
    let lines = [
        Line::new(
            "lulesh_cd_overhead",
            &case,
            med(&cds, |s| s.wall),
            "s",
            Better::Lower,
        )
        .baseline(&format!("lulesh_no_cd_{case}"), med(&plain, |s| s.wall)),
        Line::new(
            "lulesh_cd_overhead_cpu",
            &case,
            med(&cds, |s| s.cpu),
            "s",
            Better::Lower,
        )
        .baseline(&format!("lulesh_no_cd_cpu_{case}"), med(&plain, |s| s.cpu)),
        Line::new(
            "lulesh_fom",
            &case,
            med(&plain, |s| s.report.fom()),
            "z/s",
            Better::Higher,
        ),
        Line::new(
            "lulesh_fom",
            &format!("{case}_cd"),
            med(&cds, |s| s.report.fom()),
            "z/s",
            Better::Higher,
        )
        .baseline(
            &format!("lulesh_fom_no_cd_{case}"),
            med(&plain, |s| s.report.fom()),
        ),
        Line::new(
            "lulesh_cd_preserve",
            &case,
            med(&cds, |s| s.preserve_ms_per_cycle),
            "ms",
            Better::Lower,
        )
        .baseline(
            &format!("lulesh_no_cd_cycle_{case}"),
            med(&plain, Sample::cycle_ms),
        ),
    ]
    .map(|l| l.on("smp", 1));
    lines.to_vec()
}

/// One escalating run: (ranks re-executed, recovery seconds), checked against `clean`.
fn escalation_run(
    opts: &Options,
    ranks: usize,
    (failing, fault): (usize, Escalating),
    deps: bool,
    clean: &FinalReport,
) -> (f64, f64) {
    let (kind, medium) = fault.kind_and_medium();
    let config = CdConfig::parse(
        &format!(
            "{RELAXED}retries = 0\ninject = {{ at = [{{ rank = {failing}, iteration = 3, kind = \"{kind}\" }}] }}\n\
             [cd.step]\ndependency_tracking = {deps}\n{medium}"
        ),
        "escalation.toml",
    )
    .expect("valid configuration");
    let out = containment::run(opts, ranks, config, |_| {})
        .expect("the run completes")
        .expect("rank 0 runs in this process");
    same_physics(&out.report, clean);
    let step = out.cd_report.cd(containment::STEP_CD).expect("step ran");
    assert_eq!(
        step.failures.len(),
        1,
        "one escalation: {:?}",
        step.failures
    );
    let f = &step.failures[0];
    // With the lists, D may still be everyone (the interior rank of 3x3x3 touches all).
    assert!(deps || !f.limited);
    (f.ranks.len() as f64, f.recover_ns as f64 / 1e9)
}

/// The two lines of one escalation case: `run(deps)` is one escalating run with
/// `dependency_tracking = deps`, giving (ranks re-executed, recovery seconds). The runs with
/// and without alternate in order; the first pair warms up; the median of `reps` is reported.
fn escalation_case(
    case: &str,
    ranks: usize,
    reps: usize,
    run: impl Fn(bool) -> (f64, f64),
) -> [Line; 2] {
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut n_with, mut n_without) = (0.0, 0.0);
    for rep in 0..=reps {
        let pair = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for deps in pair {
            let (n, t) = run(deps);
            if rep == 0 {
                continue;
            }
            if deps {
                n_with = n;
                with.push(t);
            } else {
                n_without = n;
                without.push(t);
            }
        }
    }
    [
        Line::new("escalation_ranks", case, n_with, "ranks", Better::Lower)
            .baseline("escalation_ranks_no_deps", n_without)
            .on("smp", ranks),
        Line::new(
            "escalation_recovery",
            case,
            median(&mut with),
            "s",
            Better::Lower,
        )
        .baseline("escalation_recovery_no_deps", median(&mut without))
        .on("smp", ranks),
    ]
}

/// The failing ranks of the escalation table: a corner and the first interior rank (of the
/// 3x3x3 and 4x4x4 process grids of both programs).
const ESCALATION_CASES: [(usize, [(&str, usize); 2]); 2] = [
    (27, [("corner", 0), ("interior", 13)]),
    (64, [("corner", 0), ("interior", 21)]),
];

fn escalation_lines(args: &BenchArgs) -> Vec<Line> {
    let opts = Options {
        nx: if args.quick { 3 } else { 14 },
        its: 10,
        quiet: true,
        ..Options::default()
    };
    let reps = args.reps.max(1);
    let mut lines = Vec::new();
    for (ranks, cases) in ESCALATION_CASES {
        let clean = containment::run(&opts, ranks, relaxed_config(""), |_| {})
            .expect("the run completes")
            .expect("rank 0 runs in this process")
            .report;
        for (where_, failing) in cases {
            for (fault, suffix) in Escalating::CASES {
                lines.extend(escalation_case(
                    &format!("lulesh_r{ranks}_{where_}{suffix}"),
                    ranks,
                    reps,
                    |deps| escalation_run(&opts, ranks, (failing, fault), deps, &clean),
                ));
            }
        }
    }
    lines.extend(stencil_escalation_lines(args.quick, reps));
    lines
}

/// What makes the escalating "rank_step" of the stencil rows fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escalating {
    /// A soft error: the rank's memory and log are intact.
    Soft,
    /// A rank loss that takes the rank's log (`log_medium = "local"`, the default), with
    /// the strict CD's state at the buddy so that the loss leaves it.
    LogLost,
}

impl Escalating {
    /// Every case, with the suffix of its rows' case names.
    const CASES: [(Escalating, &str); 2] =
        [(Escalating::Soft, ""), (Escalating::LogLost, "_log_lost")];

    /// The injected fault's `kind`, and the strict CD's key that lets the loss leave its state.
    fn kind_and_medium(self) -> (&'static str, &'static str) {
        match self {
            Escalating::Soft => ("soft", ""),
            Escalating::LogLost => ("rank_loss", "medium = \"buddy\"\n"),
        }
    }
}

/// The CD stencil's configuration (`examples/src/bin/cd_stencil.rs`): a relaxed "rank_step" per
/// rank inside the strict "iteration", and with `escalation = Some((failing, deps, fault))` no
/// retries, `fault` in `failing`'s fourth "rank_step", and `dependency_tracking = deps` on
/// "iteration".
fn stencil_config(escalation: Option<(usize, bool, Escalating)>) -> CdConfig {
    let mut text = format!("[cd.{RANK_CD}]\nkind = \"relaxed\"\nlogging = true\n");
    if let Some((failing, deps, fault)) = escalation {
        let (kind, medium) = fault.kind_and_medium();
        text.push_str(&format!(
            "retries = 0\ninject = {{ at = [{{ rank = {failing}, iteration = 3, kind = \"{kind}\" }}] }}\n\
             [cd.{ITERATION_CD}]\ndependency_tracking = {deps}\n{medium}"
        ));
    }
    CdConfig::parse(&text, "stencil-escalation.toml").expect("valid configuration")
}

/// The node of a rank as the launch places it on smp: `PGAS_RANKS_PER_NODE` consecutive ranks
/// per node, or all on node 0 without it.
fn smp_node_of(rank: usize) -> usize {
    let per_node = std::env::var("PGAS_RANKS_PER_NODE")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&k| k > 0);
    per_node.map_or(0, |k| rank / k)
}

/// The ranks the CD stencil on `ranks` ranks must re-execute when `failing`'s relaxed CD
/// escalates with the lists, derived from its communication alone. In an iteration each rank
/// puts its six faces into its face neighbours' receive buffers in the x-fastest process grid
/// ([`process_grid`]), synchronizes by a barrier (which adds nothing), and reads its halos from
/// its own buffers (no remote read). So the write list of the failed node F is the nodes of the
/// face neighbours of F's ranks, F's read list is empty, and so is the fourth criterion (the
/// write lists of the read list): D is the ranks on F and on the nodes of F's write list.
fn stencil_expected(ranks: usize, failing: usize, node_of: impl Fn(usize) -> usize) -> Vec<usize> {
    let dims = process_grid(ranks);
    let coords = |r: usize| [r % dims[0], r / dims[0] % dims[1], r / (dims[0] * dims[1])];
    let rank_at = |c: [usize; 3]| c[0] + dims[0] * (c[1] + dims[1] * c[2]);
    let failed_node = node_of(failing);
    let mut nodes = BTreeSet::from([failed_node]);
    for r in (0..ranks).filter(|&r| node_of(r) == failed_node) {
        for axis in 0..3 {
            let c = coords(r);
            if c[axis] > 0 {
                let mut n = c;
                n[axis] -= 1;
                nodes.insert(node_of(rank_at(n)));
            }
            if c[axis] + 1 < dims[axis] {
                let mut n = c;
                n[axis] += 1;
                nodes.insert(node_of(rank_at(n)));
            }
        }
    }
    (0..ranks)
        .filter(|&r| nodes.contains(&node_of(r)))
        .collect()
}

/// One escalating run of the CD stencil: (ranks re-executed, recovery seconds), checked: the
/// fault-free checksum bit for bit, one escalation into "iteration", and the ranks that
/// re-executed exactly [`stencil_expected`] with the lists (limited unless that is everyone),
/// everyone without.
fn stencil_escalation_run(
    (n, iters, ranks): (usize, usize, usize),
    (failing, fault): (usize, Escalating),
    deps: bool,
    clean: &Checksum,
) -> (f64, f64) {
    let (checksum, report) = cd_run(
        n,
        iters,
        ranks,
        false,
        stencil_config(Some((failing, deps, fault))),
    )
    .unwrap_or_else(|e| panic!("cd stencil, rank {failing} escalating: {e}"))
    .expect("rank 0 runs in this process");
    assert_eq!(
        checksum, *clean,
        "the escalating run (rank {failing}, tracking {deps}) changed the checksum"
    );
    let iteration = report.cd(ITERATION_CD).expect("iteration ran");
    assert_eq!(
        iteration.failures.len(),
        1,
        "one escalation: {:?}",
        iteration.failures
    );
    let f = &iteration.failures[0];
    let everyone: Vec<usize> = (0..ranks).collect();
    let expected = if deps {
        stencil_expected(ranks, failing, smp_node_of)
    } else {
        everyone.clone()
    };
    assert_eq!(
        f.ranks, expected,
        "re-executed ranks, {ranks} ranks, rank {failing} escalating, tracking {deps}"
    );
    assert_eq!(f.limited, expected != everyone, "{f:?}");
    (f.ranks.len() as f64, f.recover_ns as f64 / 1e9)
}

/// The stencil rows: the CD stencil on the same rank counts, 64^3 points per rank for 10
/// iterations (4^3 for 6 with `quick`), "rank_step" escalating from the same ranks, for a
/// soft error and (cases `_log_lost`) for a rank loss that takes the rank's log: its
/// dependency notes reached the buddy, and its face neighbours, which it wrote into, are in
/// D anyway.
fn stencil_escalation_lines(quick: bool, reps: usize) -> Vec<Line> {
    let (edge, iters) = if quick { (4, 6) } else { (64, 10) };
    let mut lines = Vec::new();
    for (ranks, cases) in ESCALATION_CASES {
        let n = edge * process_grid(ranks)[0];
        let (clean, _) = cd_run(n, iters, ranks, true, stencil_config(None))
            .unwrap_or_else(|e| panic!("cd stencil, fault-free: {e}"))
            .expect("rank 0 runs in this process");
        for (where_, failing) in cases {
            for (fault, suffix) in Escalating::CASES {
                lines.extend(escalation_case(
                    &format!("stencil_r{ranks}_{where_}{suffix}"),
                    ranks,
                    reps,
                    |deps| {
                        stencil_escalation_run((n, iters, ranks), (failing, fault), deps, &clean)
                    },
                ));
            }
        }
    }
    lines
}

/// A configuration checkpointing "step" every `every` cycles into `dir`, or with no checkpoint
/// (`None`); restarting from the newest checkpoint with `restart`.
fn checkpoint_config(dir: &CheckpointDir, every: Option<u64>, restart: bool) -> CdConfig {
    let key = every.map_or(String::new(), |n| dir.key(n));
    let mut c = CdConfig::parse(
        &format!("[cd.{}]\n{key}", containment::STEP_CD),
        "checkpoint.toml",
    )
    .expect("valid configuration");
    c.program = "lulesh-bench".into();
    if restart {
        c.restart = Some(cd_runtime::RestartFrom::Auto);
    }
    c
}

/// One timed one-rank run under CDs.
struct Timed {
    /// Wall seconds from the launch to the end of the first cycle.
    first: f64,
    /// Wall seconds of the whole run.
    wall: f64,
    /// CPU seconds of the whole run (this process, the checkpoint writer included).
    cpu: f64,
    /// The reports.
    out: containment::CdRunOutput,
}

fn timed_cd_run(opts: &Options, config: CdConfig) -> Timed {
    let first = std::sync::OnceLock::new();
    let (c0, start) = (cpu_seconds(), Instant::now());
    let out = containment::run(opts, 1, config, |_| {
        first.get_or_init(|| start.elapsed().as_secs_f64());
    })
    .expect("the run completes")
    .expect("a one-rank job runs in this process");
    let wall = start.elapsed().as_secs_f64();
    Timed {
        first: first.get().copied().unwrap_or(wall),
        wall,
        cpu: cpu_seconds() - c0,
        out,
    }
}

fn checkpoint_lines(args: &BenchArgs) -> Vec<Line> {
    // `LULESH_BENCH_CHECKPOINT_S`: another problem size (a larger state per checkpoint).
    let size = std::env::var("LULESH_BENCH_CHECKPOINT_S")
        .ok()
        .map(|s| {
            s.trim()
                .parse::<i32>()
                .unwrap_or_else(|_| panic!("LULESH_BENCH_CHECKPOINT_S={s:?}: not a size"))
        })
        .unwrap_or(if args.quick { 10 } else { 30 });
    let opts = Options {
        nx: size,
        quiet: true,
        ..Options::default()
    };
    let case = format!("lulesh_s{size}");
    let dir = CheckpointDir::new("lulesh-bench-checkpoints");
    let step = containment::STEP_CD;

    // Calibration: the cycle time without checkpoints, and δ, one checkpoint's write time, from
    // a run that takes about ten.
    let plain = timed_cd_run(&opts, checkpoint_config(&dir, None, false)).out;
    let cycles = u64::try_from(plain.report.cycles).expect("cycles");
    let cycle_s = plain.report.elapsed / cycles as f64;
    dir.fresh_checkpoints();
    let calib = timed_cd_run(
        &opts,
        checkpoint_config(&dir, Some((cycles / 10).max(1)), false),
    )
    .out;
    same_physics(&calib.report, &plain.report);
    let s = calib.cd_report.cd(step).expect("step ran");
    assert!(s.checkpoints > 0, "the calibration run took checkpoints");
    let delta = s.checkpoint_write_ns as f64 / 1e9 / s.checkpoints as f64;
    let daly = cd_runtime::interval::steps_per_preservation(delta, cycle_s, 3600.0, u64::MAX);
    // At most one checkpoint in these short runs, and none left to commit at their end.
    let every = daly.min(cycles / 2 + 1).max(1);
    let rate_every = (cycles / 10).max(1);
    if !args.json {
        eprintln!(
            "checkpoint: {cycles} cycles of {:.3} ms, one checkpoint written in {:.3} ms: Daly's \
             interval {daly} cycles, every {every} cycles",
            cycle_s * 1e3,
            delta * 1e3
        );
    }

    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut with_cpu, mut without_cpu) = (Vec::new(), Vec::new());
    let (mut writer_rate, mut dd_rate, mut pair_rate) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..=args.reps.max(1) {
        let run_with = || {
            dir.fresh_checkpoints();
            let t = timed_cd_run(&opts, checkpoint_config(&dir, Some(every), false));
            same_physics(&t.out.report, &plain.report);
            let s = t.out.cd_report.cd(step).expect("step ran").clone();
            (t, s)
        };
        let run_without = || timed_cd_run(&opts, checkpoint_config(&dir, None, false));
        let ((t_with, s), t_without) = if rep % 2 == 0 {
            let w = run_with();
            (w, run_without())
        } else {
            let wo = run_without();
            (run_with(), wo)
        };
        assert!(s.checkpoints > 0, "the run took checkpoints");
        // The write rate from a run that takes about ten checkpoints (one checkpoint's write
        // time varies with the disk's other work), against as many sequential writes of the
        // same bytes right after it.
        dir.fresh_checkpoints();
        let rated = timed_cd_run(&opts, checkpoint_config(&dir, Some(rate_every), false)).out;
        same_physics(&rated.report, &plain.report);
        let r = rated.cd_report.cd(step).expect("step ran").clone();
        assert!(r.checkpoints > 1, "the rate run took checkpoints");
        let per_checkpoint = (r.bytes_checkpointed / r.checkpoints) as usize;
        let n = r.checkpoints as usize;
        let dd: f64 = (0..n)
            .map(|_| sequential_write(dir.path(), per_checkpoint))
            .sum();
        let pair: f64 = (0..n)
            .map(|_| sequential_write_pair(dir.path(), per_checkpoint))
            .sum();
        if !args.json {
            eprintln!(
                "checkpoint rep {rep}{}: with {:.3} s ({} checkpoints), without {:.3} s; \
                 {n} checkpoints of {per_checkpoint} B written in {:.3} ms, sequential writes \
                 {:.3} ms, as two files {:.3} ms",
                if rep == 0 { " (warm-up)" } else { "" },
                t_with.wall,
                s.checkpoints,
                t_without.wall,
                r.checkpoint_write_ns as f64 / 1e6,
                dd * 1e3,
                pair * 1e3
            );
        }
        if rep > 0 {
            with.push(t_with.wall);
            without.push(t_without.wall);
            with_cpu.push(t_with.cpu);
            without_cpu.push(t_without.cpu);
            writer_rate.push(r.bytes_checkpointed as f64 / (r.checkpoint_write_ns as f64 / 1e9));
            dd_rate.push((n * per_checkpoint) as f64 / dd);
            pair_rate.push((n * per_checkpoint) as f64 / pair);
        }
    }

    // Restart against a cold start: the checkpoints of the last run with the key serve.
    let (mut restart, mut cold) = (Vec::new(), Vec::new());
    for rep in 0..=args.reps.max(1) {
        let run_restart = || {
            let t = timed_cd_run(&opts, checkpoint_config(&dir, Some(every), true));
            same_physics(&t.out.report, &plain.report);
            t.first
        };
        // Only its first cycle is timed: one is all it runs.
        let one_cycle = Options {
            its: 1,
            ..opts.clone()
        };
        let run_cold = || timed_cd_run(&one_cycle, checkpoint_config(&dir, None, false)).first;
        let (r, c) = if rep % 2 == 0 {
            let r = run_restart();
            (r, run_cold())
        } else {
            let c = run_cold();
            (run_restart(), c)
        };
        if rep > 0 {
            restart.push(r);
            cold.push(c);
        }
    }

    // Each repetition's ratio: the two runs are neighbours in time, so slow drifts of the
    // machine's speed cancel, which a ratio of two medians keeps.
    let mut paired: Vec<f64> = with.iter().zip(&without).map(|(w, wo)| w / wo).collect();
    let mb = 1024.0 * 1024.0;
    vec![
        Line::new(
            "checkpoint_overhead_paired",
            &case,
            median(&mut paired),
            "x",
            Better::Lower,
        ),
        Line::new(
            "checkpoint_overhead",
            &case,
            median(&mut with),
            "s",
            Better::Lower,
        )
        .baseline(
            &format!("lulesh_no_checkpoint_s{size}"),
            median(&mut without),
        ),
        Line::new(
            "checkpoint_overhead_cpu",
            &case,
            median(&mut with_cpu),
            "s",
            Better::Lower,
        )
        .baseline(
            &format!("lulesh_no_checkpoint_cpu_s{size}"),
            median(&mut without_cpu),
        ),
        Line::new(
            "checkpoint_interval",
            &case,
            every as f64,
            "cycles",
            Better::Higher,
        ),
        Line::new(
            "checkpoint_write",
            &case,
            median(&mut writer_rate) / mb,
            "MiB/s",
            Better::Higher,
        )
        .baseline("sequential_write", median(&mut dd_rate) / mb),
        Line::new(
            "checkpoint_write_vs_pair",
            &case,
            median(&mut writer_rate) / mb,
            "MiB/s",
            Better::Higher,
        )
        .baseline("sequential_write_pair", median(&mut pair_rate) / mb),
        Line::new(
            "restart_time",
            &case,
            median(&mut restart),
            "s",
            Better::Lower,
        )
        .baseline("cold_start", median(&mut cold)),
    ]
    .into_iter()
    .map(|l| l.on("smp", 1))
    .collect()
}

/// Cluster sizes of the SPBC table (1: no clusters), its ranks and the rank that fails.
const SPBC_CLUSTERS: [usize; 6] = [1, 2, 4, 8, 16, 64];
const SPBC_RANKS: usize = 64;
const SPBC_FAILING: usize = 21;

/// The relaxed configuration with clusters of `cluster` ranks (1: none), logging on "rank_step"
/// or not, and `extra` appended.
fn spbc_config(cluster: usize, logging: bool, extra: &str) -> CdConfig {
    let key = if cluster > 1 {
        format!("cluster = {cluster}\n")
    } else {
        String::new()
    };
    let relaxed = RELAXED.replace("logging = true", &format!("logging = {logging}"));
    CdConfig::parse(&format!("{key}{relaxed}{extra}"), "spbc.toml").expect("valid configuration")
}

/// One row of the SPBC table: (bytes logged per rank per cycle, logging overhead, ranks
/// re-executed for one failure).
fn spbc_row(opts: &Options, cluster: usize, reps: usize, clean: &FinalReport) -> (f64, f64, usize) {
    let mut ratios = Vec::new();
    let mut bytes = 0.0;
    for rep in 0..=reps {
        let mut t = [0.0; 2];
        for k in 0..2 {
            let logging = (k + rep) % 2 == 0;
            let out = containment::run(opts, SPBC_RANKS, spbc_config(cluster, logging, ""), |_| {})
                .expect("the run completes")
                .expect("rank 0 runs in this process");
            same_physics(&out.report, clean);
            if logging {
                let inner = out
                    .cd_report
                    .cd(containment::RANK_CD)
                    .expect("rank_step ran");
                bytes = inner.bytes_logged as f64 / inner.executions as f64;
            }
            t[usize::from(!logging)] = out.report.elapsed;
        }
        if rep > 0 {
            ratios.push(t[0] / t[1]);
        }
    }
    let fail = format!(
        "inject = {{ at = [{{ rank = {SPBC_FAILING}, iteration = 3, kind = \"soft\" }}] }}\n\
         [cd.{}]\ndependency_tracking = true\n",
        containment::STEP_CD
    );
    let out = containment::run(opts, SPBC_RANKS, spbc_config(cluster, true, &fail), |_| {})
        .expect("the run completes")
        .expect("rank 0 runs in this process");
    same_physics(&out.report, clean);
    let step = out.cd_report.cd(containment::STEP_CD).expect("step ran");
    let inner = out
        .cd_report
        .cd(containment::RANK_CD)
        .expect("rank_step ran");
    let record = step.failures.first().or(inner.failures.first());
    let ranks = record.expect("the failure was recovered").ranks.len();
    (bytes, median(&mut ratios), ranks)
}

/// `--spbc-table`: the markdown table of SPBC clusters on LULESH (module doc).
fn spbc_table(args: &BenchArgs) {
    if std::env::var_os("PGAS_RANKS_PER_NODE").is_none() {
        // SAFETY: no other thread exists yet (no job has been launched), so nothing reads
        // the environment concurrently.
        unsafe { std::env::set_var("PGAS_RANKS_PER_NODE", "1") };
    }
    let opts = Options {
        nx: if args.quick { 3 } else { 10 },
        its: 40,
        quiet: true,
        ..Options::default()
    };
    let reps = args.reps.max(1);
    let clean = containment::run(&opts, SPBC_RANKS, relaxed_config(""), |_| {})
        .expect("the run completes")
        .expect("rank 0 runs in this process")
        .report;
    println!(
        "| cluster (ranks) | log bytes per rank per cycle | logging overhead | ranks re-executed \
         for one failure |"
    );
    println!("|---|---|---|---|");
    for cluster in SPBC_CLUSTERS {
        let (bytes, overhead, ranks) = spbc_row(&opts, cluster, reps, &clean);
        println!("| {cluster} | {bytes:.0} | {overhead:.3} | {ranks} / {SPBC_RANKS} |");
    }
}
