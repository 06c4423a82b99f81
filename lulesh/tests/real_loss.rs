//! `lulesh -s 6 --spares 1` under a strict CD configuration on 8+1 processes under
//! `mpirun --with-ft ulfm` (feature `ulfm`; the launcher `$PGAS_ULFM_MPIRUN` from
//! `. .ci/ulfm-env`): one rank's process killed with SIGKILL from outside at seeded moments
//! uniform over the run; the spare takes its rank, every rank resumes the strict CD "step"
//! from memory (`cd-runtime/src/REAL_LOSS.md`), and the run prints the fault-free report's
//! physics bit for bit. Without a spare the job ends with one line. Every run is bounded in
//! time: a hang fails the test.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::TempFile;
use common::kills::{Seeded, has_thread, kill9, processes_with, wait_for};

const LULESH: &str = env!("CARGO_BIN_EXE_lulesh");
/// The job's ranks (the spares come on top): the smallest cube above one.
const RANKS: usize = 8;
/// The problem: about a second of cycles in a debug build, so that the moments spread over
/// hundreds of executions of "step".
const PROBLEM: [&str; 2] = ["-s", "6"];
/// Every cycle one execution of the strict CD "step", no fault injected.
const STRICT: &str = "[cd.step]\nmedium = \"local\"\n";
/// How long a run may take, kill and recovery included.
const JOB_LIMIT: Duration = Duration::from_secs(90);
/// The variable that tells this test's rank processes apart from any other's.
const MARKER: &str = "LULESH_REAL_LOSS_TEST_RUN";
/// The thread a rank's process starts with its job (the watchdog tree): the job is running.
const JOB_THREAD: &str = "gasnet-bridge w";
/// The kills of the seeded test.
const KILLS: usize = 30;

/// One run at a time: the machine's cores are few, and a run's timing sets where kills land.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What a run printed and how it ended.
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    wall: Duration,
}

impl Ran {
    fn context(&self) -> String {
        format!(
            "status {}\nstdout:\n{}\nstderr:\n{}",
            self.status, self.stdout, self.stderr
        )
    }

    /// The report's lines up to the timings, as `tests/mpi.rs` compares them (the answer).
    fn physics(&self) -> Option<&str> {
        let start = self.stdout.find("Run completed:")?;
        let end = self.stdout.find("\nElapsed time")?;
        self.stdout.get(start..end)
    }

    /// The loop's time the report states (`Elapsed time = X (s)`).
    fn elapsed(&self) -> Duration {
        let line = self
            .stdout
            .lines()
            .find(|l| l.starts_with("Elapsed time"))
            .unwrap_or_else(|| panic!("no elapsed time\n{}", self.context()));
        let secs: f64 = line
            .split('=')
            .nth(1)
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no time in {line:?}"));
        Duration::from_secs_f64(secs)
    }
}

/// A started run of `lulesh` with `spares` spares, its rank processes marked with `marker`.
struct Job {
    child: Child,
    marker: String,
    out: PathBuf,
    err: PathBuf,
    started: Instant,
}

impl Job {
    fn start(spares: usize, marker: &str, config: &TempFile) -> Job {
        let launcher = std::env::var("PGAS_ULFM_MPIRUN")
            .expect("PGAS_ULFM_MPIRUN is unset: source .ci/ulfm-env before running this test");
        let mut parts = launcher.split_whitespace();
        let mut c = Command::new(parts.next().expect("a launcher"));
        let (n, s) = ((RANKS + spares).to_string(), spares.to_string());
        c.args(parts)
            .args(["-x", MARKER, "-n", &n, LULESH, "--spares", &s])
            .args(PROBLEM)
            .arg("--cd-config")
            .arg(&config.0)
            .env(MARKER, marker)
            .env_remove("CD_CONFIG")
            .env_remove("CD_RESTART")
            .env_remove("PGAS_RANKS")
            .env_remove("PGAS_SPARES")
            .env_remove("PGAS_SEGMENT_MB");
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let out = dir.join(format!("{marker}.out"));
        let err = dir.join(format!("{marker}.err"));
        c.stdout(Stdio::from(std::fs::File::create(&out).unwrap()))
            .stderr(Stdio::from(std::fs::File::create(&err).unwrap()));
        Job {
            child: c.spawn().expect("start the launcher"),
            marker: marker.to_string(),
            out,
            err,
            started: Instant::now(),
        }
    }

    /// The pid of rank `rank`'s process once its job runs (`None`: the run ended first).
    fn rank_pid(&mut self, rank: usize) -> Option<u32> {
        let (marker, r) = (self.marker.clone(), rank.to_string());
        let mut pid = None;
        wait_for(&mut self.child, JOB_LIMIT, || {
            pid = processes_with(&[(MARKER, &marker), ("OMPI_COMM_WORLD_RANK", &r)])
                .into_iter()
                .find(|p| has_thread(*p, JOB_THREAD));
            pid.is_some()
        });
        pid
    }

    /// Waits for the run's end within [`JOB_LIMIT`]; a run that takes longer is killed with
    /// its processes and fails the test.
    fn finish(mut self) -> Ran {
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if self.started.elapsed() > JOB_LIMIT {
                for p in processes_with(&[(MARKER, &self.marker)]) {
                    kill9(p);
                }
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "run {} hung past {JOB_LIMIT:?}; stderr:\n{}",
                    self.marker,
                    std::fs::read_to_string(&self.err).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let wall = self.started.elapsed();
        let read = |p: &PathBuf| {
            let s = String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
            let _ = std::fs::remove_file(p);
            s
        };
        Ran {
            status,
            stdout: read(&self.out),
            stderr: read(&self.err),
            wall,
        }
    }
}

fn marker(test: &str, k: usize) -> String {
    format!("{test}-{}-{k}", std::process::id())
}

/// The fault-free run with a spare that is never needed.
fn reference(config: &TempFile) -> Ran {
    let ran = Job::start(1, &marker("reference", 0), config).finish();
    assert!(ran.status.success(), "{}", ran.context());
    assert!(ran.physics().is_some(), "{}", ran.context());
    assert!(!ran.stderr.contains("lost"), "{}", ran.context());
    ran
}

#[test]
#[ignore = "not yet reliable: a kill of rank 0 in the job's first second once left the recovery \
            waiting past the conduit's 20 s deadline and the job hung (ROADMAP, ULFM area); \
            run with --ignored"]
fn killed_at_thirty_seeded_moments_the_spare_takes_over_and_the_report_is_the_fault_free_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = TempFile::new("real-loss.toml", STRICT);
    let reference = reference(&config);
    let expected = reference.physics().unwrap().to_string();
    let body = reference.elapsed();
    let mut seeded = Seeded::new(0x1015_4E5B);
    let (mut resumed, mut from_start, mut missed, mut ended) = (0, 0, 0, 0);
    let mut extra: Vec<Duration> = Vec::new();
    for k in 0..KILLS {
        let rank = seeded.next_below(RANKS as u64) as usize;
        let mut at = seeded.moment(body);
        // A run that ended before its signal came (a slower reference, a faster machine) is
        // run again with the kill twice as early, so that every one of the kills is one.
        let (ran, what) = loop {
            let mut job = Job::start(1, &marker("kill", k), &config);
            let Some(pid) = job.rank_pid(rank) else {
                panic!(
                    "kill {k}: rank {rank}'s job never ran\n{}",
                    job.finish().context()
                );
            };
            std::thread::sleep(at);
            kill9(pid);
            let ran = job.finish();
            let what = format!("kill {k}: rank {rank} at {at:?} into the job");
            // Only a run that ended well with no loss is one the signal missed: a failed run
            // without a loss line is a kill the recovery did not handle, and fails below.
            if ran.stderr.contains("lost") || !ran.status.success() || at.is_zero() {
                break (ran, what);
            }
            eprintln!("{what}: the run ended before the signal; again, earlier");
            missed += 1;
            at /= 2;
        };
        if !ran.status.success() {
            // The two cases the design ends with one line (`REAL_LOSS.md`): a rank already
            // past its body, in the conduit's end of the job, when the other died; or a kill
            // during the conduit's start-up collectives, before any body ran.
            let lines = ran
                .stderr
                .lines()
                .filter(|l| {
                    l.contains("did not catch the peer failure")
                        || (l.contains("conduit error") && l.contains("job ranks"))
                })
                .count();
            assert_eq!(lines, 1, "{what}: {}", ran.context());
            assert!(ran.physics().is_none(), "{what}: {}", ran.context());
            ended += 1;
            continue;
        }
        assert_eq!(
            ran.physics(),
            Some(expected.as_str()),
            "{what}: {}",
            ran.context()
        );
        if ran.stderr.contains("lost and replaced") && ran.stderr.contains("from memory") {
            resumed += 1;
            extra.push(ran.wall.saturating_sub(reference.wall));
        } else if ran.stderr.contains("from its beginning") {
            from_start += 1;
        } else {
            panic!("{what}: no line says the rank was lost\n{}", ran.context());
        }
    }
    let mean = extra.iter().sum::<Duration>() / extra.len().max(1) as u32;
    let max = extra.iter().max().copied().unwrap_or_default();
    println!(
        "{KILLS} kills: {resumed} resumed from memory, {from_start} from the beginning, {ended} \
         ended with one line ({missed} runs again: the run had ended before the signal); the \
         killed run's wall time over the fault-free run's ({:.2} s, loop {:.3} s): mean \
         {:.2} s, max {:.2} s",
        reference.wall.as_secs_f64(),
        body.as_secs_f64(),
        mean.as_secs_f64(),
        max.as_secs_f64()
    );
    assert!(
        ended <= 2,
        "{ended} of {KILLS} runs ended with one line: more than a few percent"
    );
    assert!(
        resumed * 2 >= KILLS,
        "most kills must land in the loop and resume from memory: {resumed} of {KILLS}"
    );
}

#[test]
fn without_a_spare_a_killed_rank_ends_the_job_with_one_line() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = TempFile::new("real-loss-nospare.toml", STRICT);
    let mut job = Job::start(0, &marker("nospare", 0), &config);
    let pid = job.rank_pid(5).expect("rank 5's job runs");
    std::thread::sleep(Duration::from_millis(300));
    kill9(pid);
    let ran = job.finish();
    assert!(!ran.status.success(), "{}", ran.context());
    let lines: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.contains("no spare is left"))
        .collect();
    assert_eq!(lines.len(), 1, "one line\n{}", ran.context());
    assert!(lines[0].contains("rank 5 lost"), "{}", ran.context());
    assert!(ran.physics().is_none(), "{}", ran.context());
}
