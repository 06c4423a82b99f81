//! A run of a program under `mpirun --with-ft ulfm` (`$PGAS_ULFM_MPIRUN` from
//! `. .ci/ulfm-env`) whose rank processes a test finds and kills (`kills.rs`): the one harness
//! of the real-loss tests (`cd_stencil_real_loss.rs`; lulesh's and hpgmg's `real_loss.rs`,
//! which include this file by path). Every run is bounded in time: a hang fails the test.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::kills::{has_thread, kill9, processes_with, wait_for};

/// How long a run may take, kill and recovery included.
pub const JOB_LIMIT: Duration = Duration::from_secs(90);
/// How long the launcher may outlive the last rank process of its run. Open MPI 5.0.11's
/// `prterun --with-ft ulfm` can deadlock after a job that lost a process: every rank process
/// has exited, its line printed, and the launcher's main thread waits on a mutex inside
/// `libprrte` forever, so the run would otherwise end only at [`JOB_LIMIT`].
const LAUNCHER_GRACE: Duration = Duration::from_secs(10);
/// The variable that tells a run's rank processes apart from any other's.
const MARKER: &str = "PGAS_REAL_LOSS_TEST_RUN";
/// The thread a rank's process starts with its job (the watchdog tree): the job is running.
const JOB_THREAD: &str = "gasnet-bridge w";

/// What a run printed and how it ended.
pub struct Ran {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
}

impl Ran {
    /// The execution a restart from a checkpoint resumed at (rank 0's line `cd: restart:
    /// resuming CD "NAME" at execution N ...`).
    pub fn restarted_at(&self) -> Option<u64> {
        let line = self
            .stderr
            .lines()
            .find(|l| l.starts_with("cd: restart: resuming CD "))?;
        let after = line.split(" at execution ").nth(1)?;
        after.split(' ').next()?.parse().ok()
    }

    /// Both streams and the status, for a failed assertion.
    pub fn context(&self) -> String {
        format!(
            "status {}\nstdout:\n{}\nstderr:\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// A started run, its rank processes marked with its marker.
pub struct Job {
    child: Child,
    spec: Spec,
    /// How many times the launcher failed to start and the run was launched again.
    relaunched: usize,
    started: Instant,
}

/// What a run is launched with, kept to launch it again when the launcher itself failed.
struct Spec {
    processes: usize,
    program: String,
    args: Vec<String>,
    marker: String,
    env: Vec<(String, String)>,
    out: PathBuf,
    err: PathBuf,
}

/// The line of Open MPI 5.0.11's launcher when it fails before starting any process (seen
/// once in a while on this machine kind): the run says nothing of the program, so it is
/// launched again, up to [`RELAUNCHES`] times.
const LAUNCHER_FAILED: &str = "PMIx server's listener thread failed to start";
/// How many times a run whose launcher failed to start is launched again.
const RELAUNCHES: usize = 2;

/// A marker for run `k` of `test`, unique to this test process.
pub fn marker(test: &str, k: usize) -> String {
    format!("{test}-{}-{k}", std::process::id())
}

impl Spec {
    /// Starts the launcher, its streams into fresh files.
    fn spawn(&self) -> Child {
        let launcher = std::env::var("PGAS_ULFM_MPIRUN")
            .expect("PGAS_ULFM_MPIRUN is unset: source .ci/ulfm-env before running this test");
        let mut parts = launcher.split_whitespace();
        let mut c = Command::new(parts.next().expect("a launcher"));
        c.args(parts).args(["-x", MARKER]);
        for (k, v) in &self.env {
            c.args(["-x", k]).env(k, v);
        }
        c.args(["-n", &self.processes.to_string(), &self.program])
            .args(&self.args)
            .env(MARKER, &self.marker)
            .env_remove("CD_CONFIG")
            .env_remove("CD_RESTART")
            .env_remove("PGAS_RANKS")
            .env_remove("PGAS_SPARES")
            .env_remove("PGAS_SEGMENT_MB");
        c.stdout(Stdio::from(std::fs::File::create(&self.out).unwrap()))
            .stderr(Stdio::from(std::fs::File::create(&self.err).unwrap()));
        c.spawn().expect("start the launcher")
    }
}

impl Job {
    /// Starts `program args` on `processes` processes (ranks and spares) marked `marker`;
    /// `env` is set in every process. The variables a user may have set for other runs are
    /// removed, so the program's own options decide.
    pub fn start(
        processes: usize,
        program: &str,
        args: &[&str],
        marker: &str,
        env: &[(&str, &str)],
    ) -> Job {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let spec = Spec {
            processes,
            program: program.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            marker: marker.to_string(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            out: dir.join(format!("{marker}.out")),
            err: dir.join(format!("{marker}.err")),
        };
        Job {
            child: spec.spawn(),
            spec,
            relaunched: 0,
            started: Instant::now(),
        }
    }

    /// If the launcher ended having failed to start (no process of the run ran), launches
    /// the run again, at most [`RELAUNCHES`] times, and says so; true if it did.
    fn relaunch_if_launcher_failed(&mut self) -> bool {
        let ended = self.child.try_wait().ok().flatten();
        let failed = ended.is_some_and(|s| !s.success())
            && std::fs::read_to_string(&self.spec.err).is_ok_and(|e| e.contains(LAUNCHER_FAILED));
        if !failed || self.relaunched >= RELAUNCHES {
            return false;
        }
        self.relaunched += 1;
        println!(
            "harness: run {}: the launcher failed to start ({LAUNCHER_FAILED}); launched again",
            self.spec.marker
        );
        self.child = self.spec.spawn();
        self.started = Instant::now();
        true
    }

    /// The pid of rank `rank`'s process once its job runs (`None`: the run ended first).
    pub fn rank_pid(&mut self, rank: usize) -> Option<u32> {
        let (marker, r) = (self.spec.marker.clone(), rank.to_string());
        loop {
            let mut pid = None;
            wait_for(&mut self.child, JOB_LIMIT, || {
                pid = processes_with(&[(MARKER, &marker), ("OMPI_COMM_WORLD_RANK", &r)])
                    .into_iter()
                    .find(|p| has_thread(*p, JOB_THREAD));
                pid.is_some()
            });
            if pid.is_some() || !self.relaunch_if_launcher_failed() {
                return pid;
            }
        }
    }

    /// Waits for the run's end within [`JOB_LIMIT`]; a run that takes longer is killed with
    /// its processes and fails the test. A launcher still running [`LAUNCHER_GRACE`] after
    /// every rank process of the run has ended is killed (see [`LAUNCHER_GRACE`]) and its run
    /// counts as failed, with a line saying so at the end of its stderr.
    pub fn finish(mut self) -> Ran {
        let ran = self.wait_end();
        if self.relaunch_if_launcher_failed() {
            return self.finish();
        }
        let _ = std::fs::remove_file(&self.spec.out);
        let _ = std::fs::remove_file(&self.spec.err);
        ran
    }

    /// [`Job::finish`] for the launcher running now.
    fn wait_end(&mut self) -> Ran {
        let launcher = self.child.id();
        let (mut ranks_seen, mut ranks_gone) = (false, None::<Instant>);
        let (mut scanned, mut note) = (None::<Instant>, String::new());
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            // A scan of /proc reads every process's environment: a few times a second is enough.
            if scanned.is_none_or(|t| t.elapsed() > Duration::from_millis(250)) {
                let now = *scanned.insert(Instant::now());
                let ranks = processes_with(&[(MARKER, &self.spec.marker)])
                    .into_iter()
                    .any(|p| p != launcher);
                ranks_seen |= ranks;
                if ranks || !ranks_seen {
                    ranks_gone = None;
                } else {
                    ranks_gone.get_or_insert(now);
                }
            }
            if ranks_gone.is_some_and(|t| t.elapsed() > LAUNCHER_GRACE) {
                let _ = self.child.kill();
                note = format!(
                    "\nharness: every rank process had ended {LAUNCHER_GRACE:?} before, but the \
                     launcher had not: killed (Open MPI 5.0.11's prterun, see LAUNCHER_GRACE)\n"
                );
                break self.child.wait().unwrap();
            }
            if self.started.elapsed() > JOB_LIMIT {
                for p in processes_with(&[(MARKER, &self.spec.marker)]) {
                    kill9(p);
                }
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "run {} hung past {JOB_LIMIT:?}; stderr:\n{}",
                    self.spec.marker,
                    std::fs::read_to_string(&self.spec.err).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let wall = self.started.elapsed();
        // Read, not removed yet: a relaunch finds the launcher's failure there.
        let read = |p: &PathBuf| {
            String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned()
        };
        Ran {
            status,
            stdout: read(&self.spec.out),
            stderr: read(&self.spec.err) + &note,
            wall,
        }
    }
}

/// How the kills of a seeded campaign ended: the counts its test prints and bounds.
#[derive(Default)]
pub struct Tally {
    /// Runs whose replacement resumed from memory.
    pub resumed: usize,
    /// Runs that started again from the beginning (killed in the set-up).
    pub from_start: usize,
    /// Runs that resumed from the newest checkpoint on disk (no execution held in memory for
    /// every rank, and a checkpointed CD configured).
    pub from_disk: usize,
    /// Runs whose ranks took a set-up value back from memory (`cd::setup_once`) instead of
    /// computing it again.
    pub setup_kept: usize,
    /// Runs that ended with one line, as the design says (`REAL_LOSS.md`).
    pub ended: usize,
    /// Of those, runs whose kill came after every rank had finished its body (the job's
    /// teardown): the last moments of the span, whose share grows as the run gets shorter.
    pub after_end: usize,
    /// Runs whose kill came during the conduit's start-up, which ran again over the live
    /// processes, a spare among the ranks.
    pub at_start: usize,
    /// Runs the signal missed (ended before it), run again with an earlier kill.
    pub missed: usize,
    /// Each resumed run's wall time over the fault-free run's.
    extra: Vec<Duration>,
}

/// A campaign of seeded SIGKILLs against a program's runs, and what every run must print.
pub struct Campaign<'a> {
    /// The seed of the ranks and moments (`PGAS_KILL_SEED` replaces it).
    pub seed: u64,
    /// How many kills.
    pub kills: usize,
    /// The job's ranks (a kill picks one).
    pub ranks: usize,
    /// The moments are uniform in `[0, span)` after the job runs.
    pub span: Duration,
    /// The fault-free run.
    pub reference: &'a Ran,
    /// What every run that does not end with one line prints (`answer` of its output).
    pub expected: &'a str,
}

/// Runs `campaign`, each run started by `start(k)`: each must print the expected answer or end
/// with one of the designed lines. A run the signal missed (it ended well with no loss) runs
/// again with the kill twice as early, so that every one of the kills is one.
pub fn kill_campaign(
    campaign: Campaign<'_>,
    answer: impl Fn(&Ran) -> Option<String>,
    mut start: impl FnMut(usize) -> Job,
) -> Tally {
    let Campaign {
        seed,
        kills,
        ranks,
        span,
        reference,
        expected,
    } = campaign;
    // A soak (`.ci/kill-soak`) runs the same campaign under other seeds.
    let seed = match std::env::var("PGAS_KILL_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("PGAS_KILL_SEED={s:?}: want a whole number")),
        Err(_) => seed,
    };
    println!("kill campaign seed {seed} (PGAS_KILL_SEED={seed} runs it again)");
    let mut seeded = super::kills::Seeded::new(seed);
    let mut tally = Tally::default();
    for k in 0..kills {
        let rank = seeded.next_below(ranks as u64) as usize;
        let mut at = seeded.moment(span);
        let (ran, what) = loop {
            let mut job = start(k);
            let Some(pid) = job.rank_pid(rank) else {
                panic!(
                    "kill {k}: rank {rank}'s job never ran\n{}",
                    job.finish().context()
                );
            };
            std::thread::sleep(at);
            kill9(pid);
            let what = format!("kill {k}: rank {rank} at {at:?} into the run");
            // Said before the wait: a run that hangs fails the test inside it.
            println!("{what}");
            let ran = job.finish();
            // Only a run that ended well with no loss is one the signal missed: a failed run
            // without a loss line is a kill the recovery did not handle, and fails below.
            if ran.stderr.contains("lost") || !ran.status.success() || at.is_zero() {
                break (ran, what);
            }
            tally.missed += 1;
            at /= 2;
        };
        println!(
            "{what}: status {:?}, {:.2} s",
            ran.status.code(),
            ran.wall.as_secs_f64()
        );
        if !ran.status.success() {
            // The cases the design ends with one line (`REAL_LOSS.md`): a rank already past
            // its body, in the conduit's end of the job, when the other died; a kill after
            // every rank had finished its body (the job's teardown, the program's last lines,
            // the processes' exit); or a kill during the conduit's start-up with no spare
            // left.
            let after_end = |l: &str| l.contains("after every rank had finished the job's body");
            let lines = ran
                .stderr
                .lines()
                .filter(|l| {
                    l.contains("did not catch the peer failure")
                        || after_end(l)
                        || l.contains("died during the conduit's start-up")
                })
                .count();
            assert_eq!(lines, 1, "{what}: {}", ran.context());
            if let Some(line) = ran.stderr.lines().find(|l| l.contains("gasnet-bridge")) {
                println!("{what}: {line}");
            }
            // After every body finished the program may have printed its whole answer
            // before the kill; never a part of it, never another.
            let printed = answer(&ran);
            let teardown = ran.stderr.lines().any(after_end);
            let whole = teardown && printed.as_deref() == Some(expected);
            assert!(printed.is_none() || whole, "{what}: {}", ran.context());
            tally.ended += 1;
            tally.after_end += usize::from(teardown);
            continue;
        }
        assert_eq!(
            answer(&ran).as_deref(),
            Some(expected),
            "{what}: {}",
            ran.context()
        );
        tally.setup_kept += usize::from(ran.stderr.contains("taken back from memory"));
        if ran.stderr.contains("lost and replaced") && ran.stderr.contains("from memory") {
            tally.resumed += 1;
            tally.extra.push(ran.wall.saturating_sub(reference.wall));
        } else if ran.stderr.contains("lost and replaced")
            && ran.stderr.contains("cd: restart: resuming")
        {
            tally.from_disk += 1;
        } else if ran.stderr.contains("from its beginning")
            || ran.stderr.contains("no whole checkpoint of this job")
        {
            tally.from_start += 1;
        } else if ran.stderr.contains("the start-up runs again") {
            tally.at_start += 1;
        } else {
            panic!("{what}: no line says the rank was lost\n{}", ran.context());
        }
    }
    let mean = tally.extra.iter().sum::<Duration>() / tally.extra.len().max(1) as u32;
    let max = tally.extra.iter().max().copied().unwrap_or_default();
    println!(
        "{kills} kills: {} resumed from memory, {} from disk, {} from the beginning, {} at \
         start-up, {} ended with one line ({} runs again: the run had ended before the signal); \
         the killed run's wall time over the fault-free run's ({:.2} s, span {:.3} s): mean \
         {:.2} s, max {:.2} s",
        tally.resumed,
        tally.from_disk,
        tally.from_start,
        tally.at_start,
        tally.ended,
        tally.missed,
        reference.wall.as_secs_f64(),
        span.as_secs_f64(),
        mean.as_secs_f64(),
        max.as_secs_f64()
    );
    assert!(
        tally.resumed * 2 >= kills,
        "most kills must land in the run's loop and resume from memory: {} of {kills}",
        tally.resumed
    );
    tally
}
