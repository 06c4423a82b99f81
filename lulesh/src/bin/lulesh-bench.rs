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
//! Every line says `ranks: 1` (the runs are single-rank; `--ranks` is ignored).

use std::time::Instant;

use bench_report::{BenchArgs, Better, Line, median, print};
use cd_runtime::CdConfig;
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
    let args = BenchArgs::from_env("lulesh-bench");
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
    print(&lines, args.json);
}
