//! lulesh-bench: the cost of Containment Domains on LULESH (BENCHMARKS.md).
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
//! `LULESH_BENCH=relaxed` runs only the relaxed lines, `LULESH_BENCH=strict` only the others.
//!
//! `--escalation-table` prints instead the table of node-level dependency tracking (issue
//! 11): LULESH `-s 6` (`-s 3` with `--quick`) on 27 and 64 ranks (one rank per emulated node unless
//! `PGAS_RANKS_PER_NODE` says otherwise), a relaxed CD "rank_step" with `retries = 0` that
//! fails once on a corner rank (0) or an interior rank (13 of 27, 21 of 64) and escalates to
//! "step":
//! - `escalation_ranks` / `lulesh_r64_corner` (and `_interior`, `r27`): the ranks that
//!   re-executed with `dependency_tracking = true`, against `escalation_ranks_no_deps` (the
//!   same run with `false`). Targets (64 ranks): at most 8 (corner) and 27 (interior), 64
//!   without.
//! - `escalation_recovery` / the same cases: seconds of the recovery (planning, restoring and
//!   re-executing the step, the slowest re-executing rank), against
//!   `escalation_recovery_no_deps`. Target: at most 0.3.
//!
//! Both runs of a case are checked to print the fault-free run's energy, bit for bit.

use std::time::Instant;

use bench_report::{BenchArgs, Better, Line, median, print};
use cd_runtime::CdConfig;
use lulesh::distributed::{self, Arrival};
use lulesh::verify::fmt_e;
use lulesh::{FinalReport, Options, Simulation, containment};

/// CPU seconds (user + sys) this process has used, all threads included.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at state, field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    // utime and stime are fields 14 and 15 (1-based), 12 and 13 after the command.
    match (ticks(11), ticks(12)) {
        // The kernel reports clock ticks; USER_HZ is 100 on Linux.
        (Some(u), Some(s)) => (u + s) / 100.0,
        _ => f64::NAN,
    }
}

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
    let args = BenchArgs::from_args(
        "lulesh-bench",
        argv.into_iter().filter(|a| a != "--escalation-table"),
    );
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
    if only != "relaxed" {
        lines.extend(strict_lines(&args));
    }
    if only != "strict" {
        lines.extend(relaxed_lines(&args));
    }
    print(&lines, args.json);
}

const RANKS: usize = 8;
const RELAXED: &str = include_str!("../../configs/relaxed.toml");

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

fn relaxed_lines(args: &BenchArgs) -> Vec<Line> {
    let size = if args.quick { 5 } else { 15 };
    let opts = Options {
        nx: size,
        quiet: true,
        ..Options::default()
    };
    let case = format!("lulesh_s{size}_r{RANKS}");
    let reps = args.reps.max(1);

    // Overhead: no CDs (rpc arrivals), no CDs (flag arrivals), relaxed; rotating order.
    let (mut plain, mut flags, mut relaxed) = (Vec::new(), Vec::new(), Vec::new());
    let mut log_bytes = Vec::new();
    for rep in 0..=reps {
        let mut t = [0.0; 3];
        for k in 0..3 {
            let which = (k + rep) % 3;
            t[which] = match which {
                0 => no_cd_r8(&opts, Arrival::Rpc).elapsed,
                1 => no_cd_r8(&opts, Arrival::Flags).elapsed,
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
                "relaxed rep {rep}{}: no CDs {:.3} s, no CDs (flags) {:.3} s, relaxed {:.3} s",
                if rep == 0 { " (warm-up)" } else { "" },
                t[0],
                t[1],
                t[2]
            );
        }
        if rep > 0 {
            plain.push(t[0]);
            flags.push(t[1]);
            relaxed.push(t[2]);
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

    vec![
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
    failing: usize,
    deps: bool,
    clean: &FinalReport,
) -> (f64, f64) {
    let config = CdConfig::parse(
        &format!(
            "{RELAXED}retries = 0\ninject = {{ at = [{{ rank = {failing}, iteration = 3, kind = \"soft\" }}] }}\n\
             [cd.step]\ndependency_tracking = {deps}\n"
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

fn escalation_lines(args: &BenchArgs) -> Vec<Line> {
    let opts = Options {
        nx: if args.quick { 3 } else { 6 },
        its: 10,
        quiet: true,
        ..Options::default()
    };
    let reps = args.reps.max(1);
    let mut lines = Vec::new();
    for (ranks, cases) in [
        (27, [("corner", 0), ("interior", 13)]),
        (64, [("corner", 0), ("interior", 21)]),
    ] {
        let clean = containment::run(&opts, ranks, relaxed_config(""), |_| {})
            .expect("the run completes")
            .expect("rank 0 runs in this process")
            .report;
        for (where_, failing) in cases {
            let case = format!("lulesh_r{ranks}_{where_}");
            let (mut with, mut without) = (Vec::new(), Vec::new());
            let (mut n_with, mut n_without) = (0.0, 0.0);
            for rep in 0..=reps {
                // Alternate the order; the first pair warms up.
                let pair = if rep % 2 == 0 {
                    [true, false]
                } else {
                    [false, true]
                };
                for deps in pair {
                    let (n, t) = escalation_run(&opts, ranks, failing, deps, &clean);
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
            lines.push(
                Line::new("escalation_ranks", &case, n_with, "ranks", Better::Lower)
                    .baseline("escalation_ranks_no_deps", n_without)
                    .on("smp", ranks),
            );
            lines.push(
                Line::new(
                    "escalation_recovery",
                    &case,
                    median(&mut with),
                    "s",
                    Better::Lower,
                )
                .baseline("escalation_recovery_no_deps", median(&mut without))
                .on("smp", ranks),
            );
        }
    }
    lines
}
