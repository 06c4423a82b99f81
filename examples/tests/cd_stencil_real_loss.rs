//! `cd_stencil --spares 1` on 4+1 processes under `mpirun --with-ft ulfm` (feature `ulfm`; the
//! launcher `$PGAS_ULFM_MPIRUN` from `. .ci/ulfm-env`): one rank's process killed with SIGKILL
//! from outside at seeded moments uniform over the run, or by itself at a named point
//! (`CD_REAL_LOSS_KILL_AT`); the spare takes its rank, every rank resumes the strict CD
//! "iteration" from memory, and the run prints the fault-free checksum bit for bit
//! (`cd-runtime/src/REAL_LOSS.md`). Without a spare the job ends with one line. Every run is
//! bounded in time: a hang fails the test.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::kills::{Seeded, has_thread, kill9, processes_with, wait_for};

const CD_STENCIL: &str = env!("CARGO_BIN_EXE_cd_stencil");
/// The job's ranks (the spares come on top).
const RANKS: usize = 4;
/// The problem: one to two seconds of iterations, so that the moments spread over many.
const PROBLEM: [&str; 4] = ["--n", "64", "--iters", "200"];
/// How long a run may take, kill and recovery included.
const JOB_LIMIT: Duration = Duration::from_secs(90);
/// The variable that tells this test's rank processes apart from any other's.
const MARKER: &str = "CD_REAL_LOSS_TEST_RUN";
/// The thread a rank's process starts with its job (the watchdog tree): the job is running.
const JOB_THREAD: &str = "gasnet-bridge w";

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

    /// The checksum line (the answer, bit for bit).
    fn checksum(&self) -> Option<&str> {
        self.stdout.lines().find(|l| l.starts_with("checksum "))
    }

    /// The loop's time the headline states (`... iterations in X s ...`).
    fn body_time(&self) -> Duration {
        let line = self
            .stdout
            .lines()
            .find(|l| l.contains(" iterations in "))
            .unwrap_or_else(|| panic!("no headline\n{}", self.context()));
        let after = line.split(" iterations in ").nth(1).expect("split");
        let secs: f64 = after
            .split(' ')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no time in {line:?}"));
        Duration::from_secs_f64(secs)
    }
}

/// A started run of `cd_stencil` with `spares` spares, its rank processes marked with `marker`.
struct Job {
    child: Child,
    marker: String,
    out: PathBuf,
    err: PathBuf,
    started: Instant,
}

impl Job {
    fn start(spares: usize, marker: &str, env: &[(&str, &str)]) -> Job {
        let launcher = std::env::var("PGAS_ULFM_MPIRUN")
            .expect("PGAS_ULFM_MPIRUN is unset: source .ci/ulfm-env before running this test");
        let mut parts = launcher.split_whitespace();
        let mut c = Command::new(parts.next().expect("a launcher"));
        c.args(parts).args(["-x", MARKER]);
        for (k, v) in env {
            c.args(["-x", k]).env(k, v);
        }
        let n = (RANKS + spares).to_string();
        let s = spares.to_string();
        c.args(["-n", &n, CD_STENCIL, "--spares", &s])
            .args(PROBLEM)
            .env(MARKER, marker)
            .env_remove("CD_CONFIG")
            .env_remove("CD_RESTART")
            .env_remove("PGAS_RANKS")
            .env_remove("PGAS_SPARES");
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
fn reference() -> Ran {
    let ran = Job::start(1, &marker("reference", 0), &[]).finish();
    assert!(ran.status.success(), "{}", ran.context());
    assert!(ran.checksum().is_some(), "{}", ran.context());
    ran
}

/// The execution the recovery resumed at, from rank 0's line.
fn resumed_at(stderr: &str) -> Option<u64> {
    let line = stderr.lines().find(|l| l.contains("lost and replaced"))?;
    let after = line.split("at execution ").nth(1)?;
    after.split(' ').next()?.parse().ok()
}

#[test]
fn killed_at_thirty_seeded_moments_the_spare_takes_over_and_the_checksum_is_the_fault_free_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let reference = reference();
    let expected = reference.checksum().unwrap().to_string();
    let body = reference.body_time();
    let mut seeded = Seeded::new(0x0EA1_1055);
    let (mut resumed, mut from_start, mut missed, mut ended) = (0, 0, 0, 0);
    let mut extra: Vec<Duration> = Vec::new();
    const KILLS: usize = 30;
    for k in 0..KILLS {
        let rank = (seeded.next_u64() % RANKS as u64) as usize;
        let mut at = seeded.moment(body);
        // A run that ended before its signal came (a slower reference, a faster machine) is
        // run again with the kill twice as early, so that every one of the kills is one.
        let (ran, what) = loop {
            let mut job = Job::start(1, &marker("kill", k), &[]);
            let Some(pid) = job.rank_pid(rank) else {
                panic!(
                    "kill {k}: rank {rank}'s job never ran\n{}",
                    job.finish().context()
                );
            };
            std::thread::sleep(at);
            kill9(pid);
            let ran = job.finish();
            let what = format!("kill {k}: rank {rank} at {at:?} into the loop");
            if ran.stderr.contains("lost") || at.is_zero() {
                break (ran, what);
            }
            missed += 1;
            at /= 2;
        };
        if !ran.status.success() {
            // A rank already past its body, in the conduit's end of the job, when the other
            // died: the one case the design ends with one line (`REAL_LOSS.md`).
            let lines = ran
                .stderr
                .lines()
                .filter(|l| l.contains("did not catch the peer failure"))
                .count();
            assert_eq!(lines, 1, "{what}: {}", ran.context());
            assert!(ran.checksum().is_none(), "{what}: {}", ran.context());
            ended += 1;
            continue;
        }
        assert_eq!(
            ran.checksum(),
            Some(expected.as_str()),
            "{what}: {}",
            ran.context()
        );
        if resumed_at(&ran.stderr).is_some() {
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
         ended with one line ({missed} runs again: the run had ended before the signal); kill \
         to back at the iteration it died (the run's wall time over the fault-free run's, \
         {:.2} s, loop {:.3} s): mean {:.2} s, max {:.2} s",
        reference.wall.as_secs_f64(),
        body.as_secs_f64(),
        mean.as_secs_f64(),
        max.as_secs_f64()
    );
    assert!(
        ended <= 1,
        "{ended} of {KILLS} runs ended with one line: more than a few percent"
    );
    assert!(
        resumed * 2 >= KILLS,
        "most kills must land in the loop and resume from memory: {resumed} of {KILLS}"
    );
}

#[test]
fn killed_at_named_points_the_run_resumes_at_that_execution_or_the_one_before() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let expected = reference().checksum().unwrap().to_string();
    for (k, (point, rank)) in [("preserve", 1), ("agreement", 2), ("buddy_copy", 3)]
        .into_iter()
        .enumerate()
    {
        let at = format!("{point}:{rank}:100");
        let ran = Job::start(1, &marker("point", k), &[("CD_REAL_LOSS_KILL_AT", &at)]).finish();
        assert!(ran.status.success(), "{at}: {}", ran.context());
        assert_eq!(
            ran.checksum(),
            Some(expected.as_str()),
            "{at}: {}",
            ran.context()
        );
        let it = resumed_at(&ran.stderr)
            .unwrap_or_else(|| panic!("{at}: no resume line\n{}", ran.context()));
        assert!(
            (98..=100).contains(&it),
            "{at}: resumed at execution {it}\n{}",
            ran.context()
        );
    }
}

#[test]
fn without_a_spare_a_killed_rank_ends_the_job_with_one_line() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut job = Job::start(0, &marker("nospare", 0), &[]);
    let pid = job.rank_pid(1).expect("rank 1's job runs");
    std::thread::sleep(Duration::from_millis(200));
    kill9(pid);
    let ran = job.finish();
    assert!(!ran.status.success(), "{}", ran.context());
    let lines: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.contains("no spare is left"))
        .collect();
    assert_eq!(lines.len(), 1, "one line\n{}", ran.context());
    assert!(lines[0].contains("rank 1 lost"), "{}", ran.context());
    assert!(ran.checksum().is_none(), "{}", ran.context());
}
