//! hpgmg-bench: HPGMG-FV speed, the cost of Containment Domains and the two ghost-exchange
//! variants (docs/benchmarks.md format; `--json` for JSON lines).
//!
//! Every value is the average seconds per FMG solve at the finest level h (the benchmark's
//! own timed pass, `solves` solves after as many warm-up solves) of one complete run through
//! the library in this process; the median over `--reps` repetitions after one warm-up is
//! reported, subject and baseline alternating within each repetition.
//!
//! Lines:
//! - `hpgmg_dofs` / `5_1`, `6_1`: degrees of freedom per second at h on one rank, one
//!   thread (`hpgmg 5 1`, `hpgmg 6 1`). With `HPGMG_REF` naming the reference C binary
//!   (built with its default defines, run with `OMP_NUM_THREADS=1`), its DOF/s at h,
//!   measured alternately, is the baseline `c_reference_5_1` / `c_reference_6_1`.
//! - `hpgmg_dofs` / `5_8_r8`, `5_1_r8`: degrees of freedom per second at h of the 8-rank runs
//!   without CDs below (`hpgmg 5 8 --ranks 8`, 128^3; `hpgmg 5 1 --ranks 8`, 64^3), on smp or
//!   under `mpirun -n 8` (the conduit field says which).
//! - `hpgmg_cd_overhead` / `5_8_r8`: seconds per solve of `hpgmg 5 8 --ranks 8` (64 boxes of
//!   32^3, 8 per rank) with a strict CD per solve and per level (default configuration, no
//!   faults), baseline `hpgmg_no_cd_5_8_r8` (the same run without CDs); target ratio <= 1.02.
//! - `hpgmg_relaxed_overhead` / `5_8_r8`: the same with `hpgmg/configs/relaxed.toml` (a
//!   relaxed CD per rank around each smoother call inside the strict ones and one per rank
//!   around each "level", every put logged, arrivals by flags, no barrier), baseline
//!   `hpgmg_no_cd_5_8_r8`.
//! - `hpgmg_exchange` / `agg_5_8_r8`: seconds per solve with ghost zones aggregated per
//!   neighbour rank (the default), baseline `hpgmg_exchange_box_5_8_r8` (one rput per
//!   box-to-box region, the naturally-grained puts of the UPC++ port); `agg_5_1_r8` the same
//!   with one box per rank (every neighbour remote).
//!
//! - `checkpoint_overhead` / `hpgmg_6_1`: wall seconds of the whole run `hpgmg 6 1` (one
//!   rank, strict CDs, the default 10 solves per pass) with `[cd.solve] checkpoint = { every
//!   = n }` (checkpoints to a fresh directory in the working directory, removed at the end),
//!   against `hpgmg_no_checkpoint_6_1`, the same run without the key, alternating in order.
//!   n is Daly's interval for an MTBF of one hour, with δ the write time of one checkpoint
//!   measured by a calibration run and the step the run's average solve, at most just over
//!   half the run's solves (so that the run takes at most one checkpoint, and none is left to
//!   commit at its end); `checkpoint_interval` / `hpgmg_6_1` prints n. Target: at most 1.02.
//!   `checkpoint_overhead_cpu`: the same in CPU seconds of the process (the writer's
//!   included), which other load on the machine disturbs less; `checkpoint_overhead_paired`:
//!   the median of each repetition's ratio of the two wall times (unit `x`). Not under
//!   mpirun.
//!
//! The multi-rank runs time 3 solves per pass (5 for one box per rank).
//! `HPGMG_BENCH=checkpoint` runs only the checkpoint lines.
//!
//! `--quick` uses `4 1`/`5 1` and `4 8 --ranks 8` (case names say so) and one solve per pass
//! (the checkpoint lines: `4 1`, two solves per pass).
//! `--ranks` is ignored: the multi-rank cases use 8 ranks on smp, or the mpirun world.
//!
//! `--spbc-table` prints instead a markdown table of SPBC clusters of relaxed CDs (`cluster`
//! in the CD configuration) on `hpgmg 4 8 --ranks 8` (smp, 3 solves per pass) with
//! `hpgmg/configs/relaxed.toml`, for clusters of 1 (none), 2, 4 and 8 consecutive ranks: the
//! bytes logged per rank per smoother call (the report's `bytes_logged` of "smooth" over its
//! executions), the logging overhead (seconds per solve with logging over the same
//! configuration with `logging = false`, alternating in order after a warm-up pair, the median
//! of `--reps` per-pair ratios), and the ranks re-executed for one soft error in "smooth" on
//! rank 5 (the failure record of "level", or of "smooth" when the rank recovered alone), that
//! run checked to give the fault-free norms bit for bit.

use bench::checkpoint_dir::CheckpointDir;
use bench::cpu_time::cpu_seconds;
use bench_report::{BenchArgs, Better, Line, median, print};
use hpgmg::comm::ExchangeMode;
use hpgmg::driver::{JobOptions, run_job};
use hpgmg::{Report, configure};

fn config(log2: i64, boxes: i64, ranks: usize, solves: usize) -> hpgmg::Config {
    let mut cfg = configure(log2, boxes, ranks).unwrap_or_else(|e| panic!("{log2} {boxes}: {e}"));
    cfg.solves = solves;
    cfg
}

fn serial(cfg: hpgmg::Config) -> Report {
    hpgmg::run(cfg, &mut std::io::sink()).expect("a run to a sink")
}

/// The Containment Domains of a measured job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cds {
    None,
    /// The default configuration: strict CDs per solve and per V-cycle.
    Strict,
    /// `hpgmg/configs/relaxed.toml`: relaxed smoother CDs inside the strict ones.
    Relaxed,
}

/// Seconds per solve at h of a job and its DOF/s at h; `None` in the processes of an mpi job
/// but rank 0's.
fn job(cfg: hpgmg::Config, mode: ExchangeMode, cds: Cds) -> Option<(f64, f64)> {
    let opts = JobOptions {
        ranks: cfg.num_ranks,
        mode,
    };
    let cd = match cds {
        Cds::None => None,
        Cds::Strict => Some(cd_runtime::CdConfig::default()),
        Cds::Relaxed => Some(
            cd_runtime::CdConfig::parse(
                include_str!("../../../hpgmg/configs/relaxed.toml"),
                "hpgmg/configs/relaxed.toml",
            )
            .expect("the relaxed configuration parses"),
        ),
    };
    run_job(cfg, opts, false, cd)
        .unwrap_or_else(|e| panic!("hpgmg job: {e}"))
        .map(|o| (o.report.seconds[0], o.report.dofs[0] / o.report.seconds[0]))
}

/// DOF/s at h of the reference binary `bin` (`None` if it cannot run).
fn reference(bin: &str, log2: i64, boxes: i64) -> Option<f64> {
    let out = std::process::Command::new(bin)
        .args([log2.to_string(), boxes.to_string()])
        .env("OMP_NUM_THREADS", "1")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("DOF/s="))?;
    line.split("DOF/s=")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let spbc = argv.iter().any(|a| a == "--spbc-table");
    let args = BenchArgs::from_args(
        "hpgmg-bench",
        argv.into_iter().filter(|a| a != "--spbc-table"),
    );
    if spbc {
        spbc_table(&args);
        return;
    }
    let solves = if args.quick {
        1
    } else {
        hpgmg::bench::MIN_SOLVES
    };
    let ranks = match pgas::mpi_world() {
        Ok(Some((_, n))) => n,
        _ => 8,
    };
    let under_mpi = matches!(pgas::mpi_world(), Ok(Some(_)));
    let conduit = if under_mpi { "mpi" } else { "smp" };
    let mut lines = Vec::new();
    if std::env::var("HPGMG_BENCH").as_deref() == Ok("checkpoint") {
        if !under_mpi {
            print(&checkpoint_lines(&args), args.json);
        }
        return;
    }

    // Single-rank speed (skipped under mpirun: every process would run it).
    if !under_mpi {
        let sizes: &[i64] = if args.quick { &[4, 5] } else { &[5, 6] };
        let c_ref = std::env::var("HPGMG_REF").ok();
        for &log2 in sizes {
            let cfg = config(log2, 1, 1, solves);
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            for rep in 0..=args.reps {
                let r = serial(cfg);
                let c = c_ref.as_deref().and_then(|b| reference(b, log2, 1));
                if rep > 0 {
                    ours.push(r.dofs[0] / r.seconds[0]);
                    if let Some(c) = c {
                        theirs.push(c);
                    }
                }
            }
            let case = format!("{log2}_1");
            let mut line = Line::new(
                "hpgmg_dofs",
                &case,
                median(&mut ours),
                "DOF/s",
                Better::Higher,
            );
            if !theirs.is_empty() {
                line = line.baseline(&format!("c_reference_{case}"), median(&mut theirs));
            }
            lines.push(line.on(conduit, 1));
        }
    }

    // Multi-rank: CDs on/off and the two exchange variants, alternating.
    let (log2, per_rank) = if args.quick { (4, 8) } else { (5, 8) };
    let case = format!("{log2}_{per_rank}_r{ranks}");
    // Seconds per solve need fewer solves than the benchmark's own pass.
    let cfg = config(log2, per_rank, ranks, solves.min(3));
    let one_box = config(log2, 1, ranks, solves.min(5));
    let (mut no_cd, mut with_cd, mut agg, mut per_box) = (vec![], vec![], vec![], vec![]);
    let (mut relaxed, mut dofs) = (vec![], vec![]);
    let (mut agg1, mut per_box1, mut dofs1) = (vec![], vec![], vec![]);
    const CASES: usize = 5;
    for rep in 0..=args.reps {
        let flip = rep % 2 == 1;
        let mut samples = Vec::new();
        for n in 0..CASES {
            let which = if flip { CASES - 1 - n } else { n };
            let t = match which {
                0 => job(cfg, ExchangeMode::Aggregated, Cds::None),
                1 => job(cfg, ExchangeMode::Aggregated, Cds::Strict),
                2 => job(cfg, ExchangeMode::Aggregated, Cds::None),
                3 => job(cfg, ExchangeMode::PerBox, Cds::None),
                _ => job(cfg, ExchangeMode::Aggregated, Cds::Relaxed),
            };
            samples.push((which, t));
        }
        let pair = if flip {
            let b = job(one_box, ExchangeMode::PerBox, Cds::None);
            (job(one_box, ExchangeMode::Aggregated, Cds::None), b)
        } else {
            let a = job(one_box, ExchangeMode::Aggregated, Cds::None);
            (a, job(one_box, ExchangeMode::PerBox, Cds::None))
        };
        if rep == 0 {
            continue;
        }
        if let (Some((a, d)), Some((b, _))) = pair {
            agg1.push(a);
            dofs1.push(d);
            per_box1.push(b);
        }
        for (which, t) in samples {
            let Some((t, d)) = t else { continue };
            match which {
                0 => {
                    no_cd.push(t);
                    dofs.push(d);
                }
                1 => with_cd.push(t),
                2 => agg.push(t),
                3 => per_box.push(t),
                _ => relaxed.push(t),
            }
        }
    }
    if no_cd.is_empty() {
        return; // a process of an mpi job other than rank 0's
    }
    let case1 = format!("{log2}_1_r{ranks}");
    for (case, dofs) in [(&case, &mut dofs), (&case1, &mut dofs1)] {
        let line = Line::new("hpgmg_dofs", case, median(dofs), "DOF/s", Better::Higher);
        lines.push(line.on(conduit, ranks));
    }
    let no_cd = median(&mut no_cd);
    lines.push(
        Line::new(
            "hpgmg_cd_overhead",
            &case,
            median(&mut with_cd),
            "s",
            Better::Lower,
        )
        .baseline(&format!("hpgmg_no_cd_{case}"), no_cd)
        .on(conduit, ranks),
    );
    lines.push(
        Line::new(
            "hpgmg_relaxed_overhead",
            &case,
            median(&mut relaxed),
            "s",
            Better::Lower,
        )
        .baseline(&format!("hpgmg_no_cd_{case}"), no_cd)
        .on(conduit, ranks),
    );
    lines.push(
        Line::new(
            "hpgmg_exchange",
            &format!("agg_{case}"),
            median(&mut agg),
            "s",
            Better::Lower,
        )
        .baseline(&format!("hpgmg_exchange_box_{case}"), median(&mut per_box))
        .on(conduit, ranks),
    );
    lines.push(
        Line::new(
            "hpgmg_exchange",
            &format!("agg_{case1}"),
            median(&mut agg1),
            "s",
            Better::Lower,
        )
        .baseline(
            &format!("hpgmg_exchange_box_{case1}"),
            median(&mut per_box1),
        )
        .on(conduit, ranks),
    );
    if !under_mpi {
        lines.extend(checkpoint_lines(&args));
    }
    print(&lines, args.json);
}

/// A one-rank run under strict CDs, `[cd.solve]` checkpointing every `every` solves into
/// `dir` (none with `None`): its wall and CPU seconds, report and CD report.
fn checkpoint_job(
    cfg: hpgmg::Config,
    dir: &CheckpointDir,
    every: Option<u64>,
) -> ((f64, f64), Report, cd_runtime::Report) {
    let key = every.map_or(String::new(), |n| {
        dir.fresh_checkpoints();
        dir.key(n)
    });
    let mut config = cd_runtime::CdConfig::parse(&format!("[cd.solve]\n{key}"), "checkpoint.toml")
        .expect("the configuration parses");
    config.program = "hpgmg-bench".into();
    let opts = JobOptions {
        ranks: 1,
        mode: ExchangeMode::Aggregated,
    };
    let (c0, start) = (cpu_seconds(), std::time::Instant::now());
    let out = run_job(cfg, opts, false, Some(config))
        .unwrap_or_else(|e| panic!("hpgmg job: {e}"))
        .expect("a one-rank job runs in this process");
    let t = (start.elapsed().as_secs_f64(), cpu_seconds() - c0);
    (t, out.report, out.cd_report.expect("a CD report"))
}

/// `checkpoint_overhead` and `checkpoint_interval` (module doc).
fn checkpoint_lines(args: &BenchArgs) -> Vec<Line> {
    let (log2, solves) = if args.quick {
        (4, 2)
    } else {
        (6, hpgmg::bench::MIN_SOLVES)
    };
    let cfg = config(log2, 1, 1, solves);
    let case = format!("hpgmg_{log2}_1");
    let dir = CheckpointDir::new("hpgmg-bench-checkpoints");
    let total = (hpgmg::bench::DYNAMIC_RANGE * (2 * solves + 1)) as u64;
    let (_, plain, _) = checkpoint_job(cfg, &dir, None);
    // The average solve: each level's timed average, for its two passes and its Richardson
    // solve.
    let solve_s = plain
        .seconds
        .iter()
        .map(|s| s * (2 * solves + 1) as f64)
        .sum::<f64>()
        / total as f64;
    let (_, calib, cds) = checkpoint_job(cfg, &dir, Some((total / 6).max(1)));
    assert_eq!(calib.norms, plain.norms, "the same solves");
    let s = cds.cd("solve").expect("the solve CD ran");
    assert!(s.checkpoints > 0, "the calibration run took checkpoints");
    let delta = s.checkpoint_write_ns as f64 / 1e9 / s.checkpoints as f64;
    let daly = cd_runtime::interval::steps_per_preservation(delta, solve_s, 3600.0, u64::MAX);
    // At most one checkpoint in these short runs, and none left to commit at their end.
    let every = daly.min(total / 2 + 1).max(1);
    if !args.json {
        eprintln!(
            "checkpoint: {total} solves of {:.3} ms on average, one checkpoint written in \
             {:.3} ms: Daly's interval {daly} solves, every {every} solves",
            solve_s * 1e3,
            delta * 1e3
        );
    }
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut with_cpu, mut without_cpu) = (Vec::new(), Vec::new());
    for rep in 0..=args.reps.max(1) {
        let (w, wo) = if rep % 2 == 0 {
            let w = checkpoint_job(cfg, &dir, Some(every));
            (w, checkpoint_job(cfg, &dir, None))
        } else {
            let wo = checkpoint_job(cfg, &dir, None);
            (checkpoint_job(cfg, &dir, Some(every)), wo)
        };
        assert_eq!(w.1.norms, plain.norms, "the same solves");
        assert!(w.2.cd("solve").expect("solve ran").checkpoints > 0);
        if !args.json {
            eprintln!(
                "checkpoint rep {rep}{}: with {:.3} s, without {:.3} s",
                if rep == 0 { " (warm-up)" } else { "" },
                w.0.0,
                wo.0.0
            );
        }
        if rep > 0 {
            with.push(w.0.0);
            without.push(wo.0.0);
            with_cpu.push(w.0.1);
            without_cpu.push(wo.0.1);
        }
    }
    // Each repetition's ratio: the two runs are neighbours in time, so slow drifts of the
    // machine's speed cancel, which a ratio of two medians keeps.
    let mut paired: Vec<f64> = with.iter().zip(&without).map(|(w, wo)| w / wo).collect();
    vec![
        Line::new(
            "checkpoint_overhead_paired",
            &case,
            median(&mut paired),
            "x",
            Better::Lower,
        )
        .on("smp", 1),
        Line::new(
            "checkpoint_overhead",
            &case,
            median(&mut with),
            "s",
            Better::Lower,
        )
        .baseline(
            &format!("hpgmg_no_checkpoint_{log2}_1"),
            median(&mut without),
        )
        .on("smp", 1),
        Line::new(
            "checkpoint_overhead_cpu",
            &case,
            median(&mut with_cpu),
            "s",
            Better::Lower,
        )
        .baseline(
            &format!("hpgmg_no_checkpoint_cpu_{log2}_1"),
            median(&mut without_cpu),
        )
        .on("smp", 1),
        Line::new(
            "checkpoint_interval",
            &case,
            every as f64,
            "solves",
            Better::Higher,
        )
        .on("smp", 1),
    ]
}

/// Cluster sizes of the SPBC table (1: no clusters), its ranks and the rank that fails.
const SPBC_CLUSTERS: [usize; 4] = [1, 2, 4, 8];
const SPBC_RANKS: usize = 8;
const SPBC_FAILING: usize = 5;

/// `hpgmg/configs/relaxed.toml` with clusters of `cluster` ranks (1: none), logging on
/// "smooth" or not, and `extra` appended to its table.
fn spbc_config(cluster: usize, logging: bool, extra: &str) -> cd_runtime::CdConfig {
    let key = if cluster > 1 {
        format!("cluster = {cluster}\n")
    } else {
        String::new()
    };
    let relaxed = include_str!("../../../hpgmg/configs/relaxed.toml")
        .replace("logging = true", &format!("logging = {logging}"));
    cd_runtime::CdConfig::parse(&format!("{key}{relaxed}{extra}"), "spbc.toml")
        .expect("valid configuration")
}

/// One job of the SPBC table: rank 0's report and the CD report.
fn spbc_job(cfg: hpgmg::Config, cd: cd_runtime::CdConfig) -> (Report, cd_runtime::Report) {
    let opts = JobOptions {
        ranks: SPBC_RANKS,
        mode: ExchangeMode::Aggregated,
    };
    let out = run_job(cfg, opts, false, Some(cd))
        .unwrap_or_else(|e| panic!("hpgmg job: {e}"))
        .expect("rank 0 runs in this process");
    (out.report, out.cd_report.expect("a CD report"))
}

/// `--spbc-table`: the markdown table of SPBC clusters on HPGMG (module doc).
fn spbc_table(args: &BenchArgs) {
    let cfg = config(4, 8, SPBC_RANKS, 3);
    let bits = |r: &Report| r.norms.map(f64::to_bits);
    let clean = bits(&spbc_job(cfg, spbc_config(1, true, "")).0);
    println!(
        "| cluster (ranks) | log bytes per rank per smoother call | logging overhead | ranks \
         re-executed for one failure |"
    );
    println!("|---|---|---|---|");
    for cluster in SPBC_CLUSTERS {
        let (mut ratios, mut bytes) = (Vec::new(), 0.0);
        for rep in 0..=args.reps.max(1) {
            let mut t = [0.0; 2];
            for k in 0..2 {
                let logging = (k + rep) % 2 == 0;
                let (report, cds) = spbc_job(cfg, spbc_config(cluster, logging, ""));
                assert_eq!(bits(&report), clean, "cluster {cluster}: the norms differ");
                if logging {
                    let smooth = cds.cd("smooth").expect("smooth ran");
                    bytes = smooth.bytes_logged as f64 / smooth.executions as f64;
                }
                t[usize::from(!logging)] = report.seconds[0];
            }
            if rep > 0 {
                ratios.push(t[0] / t[1]);
            }
        }
        let fail = format!(
            "inject = {{ at = [{{ rank = {SPBC_FAILING}, iteration = 13, kind = \"soft\" }}] }}\n"
        );
        let (report, cds) = spbc_job(cfg, spbc_config(cluster, true, &fail));
        assert_eq!(
            bits(&report),
            clean,
            "cluster {cluster}, one failure: the norms differ"
        );
        let level = cds.cd(hpgmg::mg::LEVEL_CD).expect("level ran");
        let smooth = cds.cd("smooth").expect("smooth ran");
        let record = level.failures.first().or(smooth.failures.first());
        let ranks = record.expect("the failure was recovered").ranks.len();
        let why = level
            .whole_group
            .first()
            .map_or(String::new(), |w| format!(" ({w})"));
        println!(
            "| {cluster} | {bytes:.0} | {:.3} | {ranks} / {SPBC_RANKS}{why} |",
            median(&mut ratios)
        );
    }
}
