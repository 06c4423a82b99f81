//! real-loss-bench: what a real process loss costs a run over spare processes (ULFM,
//! `cd-runtime/src/REAL_LOSS.md`), LULESH and HPGMG each on 8 ranks and one spare
//! (docs/benchmarks.md format; `--json` for JSON lines).
//!
//! It is not started by `mpirun`: each repetition runs the program under
//! `$PGAS_ULFM_MPIRUN -n 9` (from `. .ci/ulfm-env`) as a child, once without a fault and once
//! with rank 3's process killed by SIGKILL a fixed share into the run (a third of a fault-free
//! run's time from its job's start, when rank 3's process has the job's threads, to its end),
//! the two alternating. The programs are the `lulesh` and
//! `hpgmg` binaries built with feature `ulfm` beside this one (`--lulesh PATH`, `--hpgmg PATH`
//! name others), under a strict CD per cycle (`[cd.step]`) or per solve (`[cd.solve]`).
//!
//! Lines (the median over `--reps` repetitions after one warm-up pair):
//! - `real_loss_recovery` / `lulesh_s15_n8`: seconds the killed run took beyond the fault-free
//!   one (the kill to the job back where it died: detection, rebuild, the redone cycles),
//!   baseline `one_cycle` (the fault-free run's loop time over its cycles); the ratio is the
//!   loss's cost in cycles. `lulesh_s15_n8_vs_restart`: the same seconds against
//!   `restart_to_kill` (the killed run's time from its launch to the kill: what a relaunch
//!   from the beginning would need to get back there). `real_loss_resumed` / the same case:
//!   seconds from the kill to rank 0's line saying where the job resumes (detection and
//!   rebuild), baseline `one_cycle`.
//! - `real_loss_total` / `lulesh_s15_n8`: the killed run's wall time against the fault-free
//!   run's (`no_kill`).
//! - The same lines for HPGMG `5 1` (`hpgmg_5_1_n8`; one cycle is one solve at h).
//!
//! `--quick` runs `lulesh -s 6` and `hpgmg 4 1` (case names say so).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bench_report::{BenchArgs, Better, Line, median, print};

#[path = "../../../examples/tests/common/kills.rs"]
#[allow(dead_code)]
mod kills;

use kills::{has_thread, kill9, processes_with};

/// The job's ranks; one spare comes on top.
const RANKS: usize = 8;
/// The rank whose process is killed.
const VICTIM: usize = 3;
/// The variable that tells this run's rank processes apart.
const MARKER: &str = "PGAS_REAL_LOSS_BENCH_RUN";
/// The thread a rank's process starts with its job (the watchdog tree).
const JOB_THREAD: &str = "gasnet-bridge w";
/// A run that takes longer is a hang: the benchmark ends with its output.
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// One program measured.
struct Case {
    /// The line's case name.
    name: String,
    /// The program.
    bin: PathBuf,
    /// Its arguments before `--spares` and `--cd-config`.
    args: Vec<String>,
    /// The CD configuration's text.
    config: &'static str,
    /// One cycle's seconds, read from a fault-free run's stdout.
    cycle: fn(&str) -> Option<f64>,
}

/// What one run measured.
struct Timed {
    /// From the launcher's start to its end.
    wall: f64,
    /// From the moment rank [`VICTIM`]'s job was seen running to the launcher's end.
    job: f64,
    /// From the launcher's start to the kill.
    to_kill: f64,
    /// From the kill to rank 0's resume line.
    to_resumed: f64,
    stdout: String,
}

/// LULESH's cycle: `Elapsed time` over `Iteration count`.
fn lulesh_cycle(out: &str) -> Option<f64> {
    let value = |key: &str| -> Option<f64> {
        let line = out.lines().find(|l| l.trim_start().starts_with(key))?;
        line.split('=')
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    Some(value("Elapsed time")? / value("Iteration count")?)
}

/// HPGMG's cycle: the seconds per solve at h (the first `time=` of the summary).
fn hpgmg_cycle(out: &str) -> Option<f64> {
    let line = out.lines().find(|l| l.contains(" time="))?;
    line.split(" time=")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Runs `case` once under the ULFM launcher, killing rank [`VICTIM`]'s process `kill_after`
/// after its job started (`None`: no kill).
fn run(
    case: &Case,
    config: &Path,
    launcher: &str,
    k: usize,
    kill_after: Option<Duration>,
) -> Timed {
    let marker = format!("{}-{}-{k}", case.name, std::process::id());
    let mut parts = launcher.split_whitespace();
    let mut c = Command::new(parts.next().expect("a launcher"));
    c.args(parts)
        .args(["-x", MARKER, "-n", &(RANKS + 1).to_string()])
        .arg(&case.bin)
        .args(&case.args)
        .args(["--spares", "1", "--cd-config"])
        .arg(config)
        .env(MARKER, &marker)
        .env_remove("CD_CONFIG")
        .env_remove("CD_RESTART")
        .env_remove("PGAS_RANKS")
        .env_remove("PGAS_SPARES")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = c.spawn().expect("start the launcher");
    let resumed: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let stderr = {
        let (pipe, resumed) = (child.stderr.take().expect("piped"), resumed.clone());
        std::thread::spawn(move || {
            let mut text = String::new();
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if line.contains("lost and replaced") {
                    resumed.lock().unwrap().get_or_insert_with(Instant::now);
                }
                text += &line;
                text.push('\n');
            }
            text
        })
    };
    let stdout = {
        let mut pipe = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    // Both runs look for the process, so that both pay for the search.
    let pid = wait_for_rank(&mut child, &marker, VICTIM);
    let job_seen = Instant::now();
    let mut killed = None;
    if let Some(after) = kill_after {
        std::thread::sleep(after);
        killed = Some(Instant::now());
        kill9(pid);
    }
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the launcher") {
            break s;
        }
        if start.elapsed() > RUN_LIMIT {
            for p in processes_with(&[(MARKER, &marker)]) {
                kill9(p);
            }
            let _ = child.kill();
            panic!("{marker}: no end within {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let wall = start.elapsed().as_secs_f64();
    let job = job_seen.elapsed().as_secs_f64();
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    assert!(
        status.success(),
        "{marker}: {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let (to_kill, to_resumed) = match killed {
        None => (0.0, 0.0),
        Some(at) => {
            assert!(
                stderr.contains("from memory"),
                "{marker}: the killed run did not resume from memory\nstderr:\n{stderr}"
            );
            let back = resumed.lock().unwrap().expect("a resume line was seen");
            (
                (at - start).as_secs_f64(),
                back.saturating_duration_since(at).as_secs_f64(),
            )
        }
    };
    Timed {
        wall,
        job,
        to_kill,
        to_resumed,
        stdout,
    }
}

/// The pid of rank `rank`'s process once its job runs.
fn wait_for_rank(child: &mut Child, marker: &str, rank: usize) -> u32 {
    let r = rank.to_string();
    let mut pid = None;
    let ran = kills::wait_for(child, RUN_LIMIT, || {
        pid = processes_with(&[(MARKER, marker), ("OMPI_COMM_WORLD_RANK", &r)])
            .into_iter()
            .find(|p| has_thread(*p, JOB_THREAD));
        pid.is_some()
    });
    assert!(ran, "{marker}: rank {rank}'s job never ran");
    pid.expect("found")
}

/// The lines of one case: `reps` alternating pairs (fault-free, killed) after one warm-up pair.
fn measure(case: &Case, launcher: &str, reps: usize) -> Vec<Line> {
    let config = std::env::temp_dir().join(format!(
        "real-loss-bench-{}-{}.toml",
        std::process::id(),
        case.name
    ));
    std::fs::write(&config, case.config).expect("write the CD configuration");
    // Where the kill lands: a third into the fault-free run's job.
    let first = run(case, &config, launcher, 0, None);
    let after = Duration::from_secs_f64(first.job / 3.0);
    let (mut clean, mut killed, mut cycle, mut extra, mut to_kill, mut to_resumed) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for k in 0..=reps {
        let c = run(case, &config, launcher, 2 * k + 1, None);
        let x = run(case, &config, launcher, 2 * k + 2, Some(after));
        if k == 0 {
            continue; // the warm-up pair
        }
        cycle.push((case.cycle)(&c.stdout).expect("a cycle time in the report"));
        extra.push(x.wall - c.wall);
        to_kill.push(x.to_kill);
        to_resumed.push(x.to_resumed);
        clean.push(c.wall);
        killed.push(x.wall);
    }
    let _ = std::fs::remove_file(&config);
    let on = |l: Line| l.on("mpi", RANKS);
    let (cycle, extra) = (median(&mut cycle), median(&mut extra));
    vec![
        on(
            Line::new("real_loss_recovery", &case.name, extra, "s", Better::Lower)
                .baseline("one_cycle", cycle),
        ),
        on(Line::new(
            "real_loss_recovery",
            &format!("{}_vs_restart", case.name),
            extra,
            "s",
            Better::Lower,
        )
        .baseline("restart_to_kill", median(&mut to_kill))),
        on(Line::new(
            "real_loss_resumed",
            &case.name,
            median(&mut to_resumed),
            "s",
            Better::Lower,
        )
        .baseline("one_cycle", cycle)),
        on(Line::new(
            "real_loss_total",
            &case.name,
            median(&mut killed),
            "s",
            Better::Lower,
        )
        .baseline("no_kill", median(&mut clean))),
    ]
}

/// Takes `--NAME PATH` out of `args`.
fn take_path(args: &mut Vec<String>, name: &str) -> Option<PathBuf> {
    let at = args.iter().position(|a| a == name)?;
    let value = args.get(at + 1).cloned();
    args.drain(at..(at + 2).min(args.len()));
    Some(PathBuf::from(value.unwrap_or_else(|| {
        eprintln!("real-loss-bench: {name} needs a path");
        std::process::exit(2)
    })))
}

/// The program `name` beside this binary, unless `given`.
fn program(given: Option<PathBuf>, name: &str) -> PathBuf {
    let path = given.unwrap_or_else(|| {
        let me = std::env::current_exe().expect("this binary's path");
        me.with_file_name(name)
    });
    if !path.is_file() {
        eprintln!(
            "real-loss-bench: {} is not built: `. .ci/ulfm-env; cargo build --release \
             --features ulfm -p lulesh -p hpgmg -p bench`, or name it with --{name} PATH",
            path.display()
        );
        std::process::exit(2);
    }
    path
}

fn main() {
    let mut rest: Vec<String> = std::env::args().skip(1).collect();
    let lulesh = take_path(&mut rest, "--lulesh");
    let hpgmg = take_path(&mut rest, "--hpgmg");
    let args = BenchArgs::from_args("real-loss-bench", rest);
    let Ok(launcher) = std::env::var("PGAS_ULFM_MPIRUN") else {
        eprintln!("real-loss-bench: PGAS_ULFM_MPIRUN is unset: source .ci/ulfm-env first");
        std::process::exit(2);
    };
    let (s, log2) = if args.quick { ("6", "4") } else { ("15", "5") };
    let cases = [
        Case {
            name: format!("lulesh_s{s}_n{RANKS}"),
            bin: program(lulesh, "lulesh"),
            args: vec!["-s".into(), s.into()],
            config: "[cd.step]\nmedium = \"local\"\n",
            cycle: lulesh_cycle,
        },
        Case {
            name: format!("hpgmg_{log2}_1_n{RANKS}"),
            bin: program(hpgmg, "hpgmg"),
            args: vec![log2.into(), "1".into()],
            config: "[cd.solve]\nmedium = \"local\"\n",
            cycle: hpgmg_cycle,
        },
    ];
    let mut lines = Vec::new();
    for case in &cases {
        lines.extend(measure(case, &launcher, args.reps));
    }
    print(&lines, args.json);
}
