//! `cd_stencil --spares 1` on 4+1 processes under `mpirun --with-ft ulfm` (feature `ulfm`; the
//! launcher `$PGAS_ULFM_MPIRUN` from `. .ci/ulfm-env`): one rank's process killed with SIGKILL
//! from outside at seeded moments uniform over the run, or by itself at a named point
//! (`CD_REAL_LOSS_KILL_AT`); the spare takes its rank, every rank resumes the strict CD
//! "iteration" from memory, and the run prints the fault-free checksum bit for bit
//! (`cd-runtime/src/REAL_LOSS.md`). Without a spare the job ends with one line. Every run is
//! bounded in time: a hang fails the test.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

mod common;
use common::kills::kill9;
use common::ulfm_job::{Campaign, Job, Ran, kill_campaign, marker};

const CD_STENCIL: &str = env!("CARGO_BIN_EXE_cd_stencil");
/// The job's ranks (the spares come on top).
const RANKS: usize = 4;
/// The problem: 200 iterations of a 64^2 grid, whose executions the campaign's moments spread
/// over (the kills are drawn from the run's printed time, the iterations alone).
const N: [&str; 2] = ["--n", "64"];
const ITERS: &str = "200";
/// Iterations of the run without a spare: enough that its kill, at a fixed moment, lands in
/// them however fast the machine is.
const LONG_ITERS: &str = "20000";

/// One run at a time: the machine's cores are few, and a run's timing sets where kills land.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

impl Ran {
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

/// Starts `cd_stencil` on the ranks and `spares` spares for `iters` iterations, `env` set in
/// every process.
fn start(spares: usize, marker: &str, iters: &str, env: &[(&str, &str)]) -> Job {
    let s = spares.to_string();
    let mut args = vec!["--spares", &s];
    args.extend(N);
    args.extend(["--iters", iters]);
    Job::start(RANKS + spares, CD_STENCIL, &args, marker, env)
}

/// The fault-free run with a spare that is never needed.
fn reference() -> Ran {
    let ran = start(1, &marker("reference", 0), ITERS, &[]).finish();
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

/// Checks a run killed at a named point (`what`): it prints `expected`, and the recovery
/// resumed from memory at an execution in `at`.
fn resumed_in(ran: &Ran, expected: &str, at: std::ops::RangeInclusive<u64>, what: &str) {
    assert!(ran.status.success(), "{what}: {}", ran.context());
    assert_eq!(ran.checksum(), Some(expected), "{what}: {}", ran.context());
    let it = resumed_at(&ran.stderr)
        .unwrap_or_else(|| panic!("{what}: no resume line\n{}", ran.context()));
    assert!(
        at.contains(&it),
        "{what}: resumed at execution {it}, not in {at:?}\n{}",
        ran.context()
    );
}

#[test]
fn killed_at_thirty_seeded_moments_the_spare_takes_over_and_the_checksum_is_the_fault_free_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let reference = reference();
    let expected = reference.checksum().unwrap().to_string();
    let body = reference.body_time();
    let answer = |ran: &Ran| ran.checksum().map(str::to_string);
    let campaign = Campaign {
        seed: 0x0EA1_1055,
        kills: 30,
        ranks: RANKS,
        span: body,
        reference: &reference,
        expected: &expected,
    };
    let tally = kill_campaign(campaign, answer, |k| {
        start(1, &marker("kill", k), ITERS, &[])
    });
    assert!(
        tally.ended <= 1,
        "{} of 30 runs ended with one line: more than a few percent",
        tally.ended
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
        let ran = start(
            1,
            &marker("point", k),
            ITERS,
            &[("CD_REAL_LOSS_KILL_AT", &at)],
        )
        .finish();
        resumed_in(&ran, &expected, 98..=100, &at);
    }
}

/// The second rank a test of two losses kills after rank 1: one whose copies rank 1 does not
/// hold and which does not hold rank 1's, so that both ranks' states survive at their buddies
/// and the job can resume from memory. The buddy medium puts a rank's copies on the next rank
/// on one host, and on the rank one host further on emulated hosts of two
/// (`PGAS_MPI_HOST_SIZE=2`, as `.ci/run` runs this test too).
fn second_victim() -> usize {
    match std::env::var("PGAS_MPI_HOST_SIZE").as_deref() {
        Ok("2") => 2,
        _ => 3,
    }
}

/// Runs the job with two spares and `env` (its kill points), and checks it as a test of two
/// losses (`what`): the fault-free checksum, resumed from memory at execution 98 to 100, and
/// `line` on stderr.
fn two_losses(name: &str, env: &[(&str, &str)], what: &str, line: &str) {
    let expected = reference().checksum().unwrap().to_string();
    let ran = start(2, &marker(name, 0), ITERS, env).finish();
    resumed_in(&ran, &expected, 98..=100, what);
    assert!(
        ran.stderr.contains(line),
        "{what}: {line:?}\n{}",
        ran.context()
    );
}

/// Rank 1 killed at a named point, and a second rank's process killing itself at the start of
/// the conduit's rebuild (`PGAS_MPI_KILL_AT=rebuild:P`): the recovery runs a second round, the
/// second spare takes that rank, and the strict CD resumes from memory for both lost ranks.
#[test]
fn a_second_loss_in_the_rebuild_is_recovered_and_the_checksum_is_the_fault_free_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let second = second_victim();
    let rebuild = format!("rebuild:{second}");
    let env = [
        ("CD_REAL_LOSS_KILL_AT", "preserve:1:100"),
        ("PGAS_MPI_KILL_AT", rebuild.as_str()),
    ];
    let both = format!("rank(s) [1, {second}] lost and replaced");
    two_losses("rebuild", &env, "a loss in the rebuild", &both);
}

/// Rank 1 killed at a named point, then a second rank's process killing itself in the resume
/// that follows (`resume:R:1`), after the generations were offered: a second recovery, in
/// which the first one's replacement, which had not kept its generation yet, takes its copy
/// again, and the job still resumes from memory (not from its beginning).
#[test]
fn a_second_loss_during_the_resume_still_resumes_from_memory() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let second = second_victim();
    let kills = format!("preserve:1:100,resume:{second}:1");
    let line = format!("rank(s) [{second}] lost and replaced");
    two_losses(
        "resume",
        &[("CD_REAL_LOSS_KILL_AT", kills.as_str())],
        "a loss during the resume",
        &line,
    );
}

#[test]
fn without_a_spare_a_killed_rank_ends_the_job_with_one_line() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut job = start(0, &marker("nospare", 0), LONG_ITERS, &[]);
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

/// A checkpoint directory of its own (`name`) and the configuration that writes the CD
/// "iteration"'s state into it every 10 executions; removed when dropped.
struct Checkpointed {
    dir: PathBuf,
    config: String,
}

/// Where the checkpoints go: one directory every process sees, or one per process
/// (`ckpt-{rank}`: node-local, the copies sent to the buddies).
#[derive(Clone, Copy, Debug)]
enum Dirs {
    Shared,
    NodeLocal,
}

impl Checkpointed {
    fn new(name: &str, dirs: Dirs) -> Checkpointed {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the test's directory");
        let config = dir.join("cd.toml");
        let ckpt = dir.join(match dirs {
            Dirs::Shared => "ckpt",
            Dirs::NodeLocal => "ckpt-{rank}",
        });
        std::fs::write(
            &config,
            format!(
                "[cd.iteration]\nmedium = \"buddy\"\n\
                 checkpoint = {{ dir = {ckpt:?}, every = 10 }}\n"
            ),
        )
        .expect("write the configuration");
        let config = config.to_str().expect("a UTF-8 path").to_string();
        Checkpointed { dir, config }
    }

    /// Starts the run on the ranks and `spares` spares, with `extra` arguments and `env`.
    fn start(&self, spares: usize, marker: &str, extra: &[&str], env: &[(&str, &str)]) -> Job {
        let s = spares.to_string();
        let mut args = vec!["--spares", &s];
        args.extend(N);
        args.extend(["--iters", ITERS, "--cd-config", &self.config]);
        args.extend(extra);
        Job::start(RANKS + spares, CD_STENCIL, &args, marker, env)
    }

    /// Relaunches with `--restart auto`: it must resume at execution `at` and print
    /// `expected`.
    fn restart_resumes_at(&self, at: u64, marker: &str, expected: &str) {
        let ran = self.start(1, marker, &["--restart", "auto"], &[]).finish();
        assert!(ran.status.success(), "{}", ran.context());
        assert_eq!(ran.checksum(), Some(expected), "{}", ran.context());
        let line = format!("cd: restart: resuming CD \"iteration\" at execution {at} ");
        assert!(
            ran.stderr.contains(&line),
            "the newest checkpoint (every 10 of 200 iterations) is whole: {line:?}\n{}",
            ran.context()
        );
    }
}

impl Drop for Checkpointed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn with_checkpoints_to_disk_a_killed_rank_is_recovered_and_the_checkpoints_go_on() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let ck = Checkpointed::new("cd-stencil-real-loss-ckpt", Dirs::Shared);
    let reference = ck.start(1, &marker("ckpt-reference", 0), &[], &[]).finish();
    assert!(reference.status.success(), "{}", reference.context());
    let expected = reference.checksum().expect("a checksum").to_string();
    let answer = |ran: &Ran| ran.checksum().map(str::to_string);
    let campaign = Campaign {
        seed: 0xC4EC_5A7E,
        kills: 8,
        ranks: RANKS,
        span: reference.body_time(),
        reference: &reference,
        expected: &expected,
    };
    // The rerun after a loss joins the process's checkpoint writer again: the checkpoints must
    // go on being written and committed, never wait for a hand-over that does not come.
    let tally = kill_campaign(campaign, answer, |k| {
        ck.start(1, &marker("ckpt-kill", k), &[], &[])
    });
    assert!(
        tally.resumed >= 4,
        "most kills resume from memory: {}",
        tally.resumed
    );
    // A loss after the last checkpoint was committed: the rerun resumes from memory past it
    // and must keep the checkpoints the job wrote before the loss.
    let late = ck
        .start(
            1,
            &marker("ckpt-late", 0),
            &[],
            &[("CD_REAL_LOSS_KILL_AT", "agreement:2:195")],
        )
        .finish();
    resumed_in(&late, &expected, 194..=195, "agreement:2:195");
    ck.restart_resumes_at(190, &marker("ckpt-restart", 0), &expected);
}

/// Attempts of a run whose several kills must all land before the recovery: a rank that sees
/// another's death before reaching its own kill point survives, and the recovery may then find
/// an execution in memory after all.
const ATTEMPTS: usize = 3;

#[test]
fn with_checkpoints_to_disk_a_loss_memory_cannot_cover_resumes_from_the_newest_checkpoint() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let expected = reference().checksum().unwrap().to_string();
    for (k, dirs) in [Dirs::Shared, Dirs::NodeLocal].into_iter().enumerate() {
        let ck = Checkpointed::new("cd-stencil-real-loss-disk", dirs);
        // Ranks 1, 2 and 3 at once: whatever the buddy map (one host, or hosts of two), one of
        // them held the other's copies, so no execution is held in memory for every rank.
        let from_disk = (0..ATTEMPTS).find_map(|attempt| {
            let ran = ck
                .start(
                    3,
                    &marker("disk", k * ATTEMPTS + attempt),
                    &[],
                    &[("CD_REAL_LOSS_KILL_AT", "agreement:1+2+3:105")],
                )
                .finish();
            // Every attempt, from disk or not, gives the fault-free answer.
            assert!(ran.status.success(), "{dirs:?}: {}", ran.context());
            let answer = ran.checksum();
            let context = ran.context();
            assert_eq!(answer, Some(expected.as_str()), "{dirs:?}: {context}");
            let line = "no execution of the covered strict CD is held in memory for every rank, \
                        so the job resumes from its newest whole checkpoint in";
            if ran.stderr.contains(line) {
                return Some(ran);
            }
            println!("{dirs:?}: attempt {attempt} did not lose a rank with its buddy\n{context}");
            None
        });
        let ran = from_disk.unwrap_or_else(|| {
            panic!("{dirs:?}: no attempt of {ATTEMPTS} resumed from disk (their output above)")
        });
        // A checkpoint is handed over as its execution begins and committed some executions
        // later (node-local: once the buddy's copy is durable): the kill at 105 may come before
        // 100's commit, or, on a loaded machine, 90's.
        let at = ran.restarted_at();
        assert!(
            at.is_some_and(|it| it > 0 && it <= 100 && it % 10 == 0),
            "{dirs:?}: resumed at {at:?}, not a checkpoint taken before the kill\n{}",
            ran.context()
        );
        // The resumed run goes on writing checkpoints: a relaunch resumes from its last.
        ck.restart_resumes_at(190, &marker("disk-restart", k), &expected);
    }
}
