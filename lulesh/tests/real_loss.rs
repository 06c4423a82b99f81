//! `lulesh -s 6 --spares 1` under a strict CD configuration on 8+1 processes under
//! `mpirun --with-ft ulfm` (feature `ulfm`; the launcher `$PGAS_ULFM_MPIRUN` from
//! `. .ci/ulfm-env`): one rank's process killed with SIGKILL from outside at seeded moments
//! uniform over the run (also with relaxed CDs per rank inside the strict step); the spare
//! takes its rank, every rank resumes the strict CD "step" from memory
//! (`cd-runtime/src/REAL_LOSS.md`), and the run prints the fault-free report's physics bit for
//! bit. Three ranks killed at once, their copies in memory with them, resume from the
//! checkpoint on disk inside the job. Without a spare the job ends with one line. Every run
//! is bounded in time: a hang fails the test.

use std::sync::Mutex;
use std::time::Duration;

mod common;
use common::TempFile;
use common::kills::kill9;
use common::ulfm_job::{Campaign, Job, Ran, kill_campaign, marker};

const LULESH: &str = env!("CARGO_BIN_EXE_lulesh");
/// The job's ranks (the spares come on top): the smallest cube above one.
const RANKS: usize = 8;
/// The problem: about a second of cycles in a debug build, so that the moments spread over
/// hundreds of executions of "step".
const PROBLEM: [&str; 2] = ["-s", "6"];
/// Every cycle one execution of the strict CD "step", no fault injected.
const STRICT: &str = "[cd.step]\nmedium = \"local\"\n";
/// The kills of the seeded test.
const KILLS: usize = 30;

/// One run at a time: the machine's cores are few, and a run's timing sets where kills land.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

impl Ran {
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

/// Starts `lulesh` on the ranks and `spares` spares with the CD configuration `config`, on
/// `problem`.
fn start(spares: usize, marker: &str, config: &TempFile, problem: &[&str]) -> Job {
    let s = spares.to_string();
    let config = config.0.to_str().expect("a UTF-8 temporary path");
    let mut args = vec!["--spares", &s];
    args.extend(problem);
    args.extend(["--cd-config", config]);
    Job::start(RANKS + spares, LULESH, &args, marker, &[])
}

fn reference(config: &TempFile) -> Ran {
    let ran = start(1, &marker("reference", 0), config, &PROBLEM).finish();
    assert!(ran.status.success(), "{}", ran.context());
    assert!(ran.physics().is_some(), "{}", ran.context());
    assert!(!ran.stderr.contains("lost"), "{}", ran.context());
    ran
}

/// Runs a campaign of `kills` and checks its endings: at most `mid_run` runs end with one line
/// while bodies still ran, and at most a quarter after every body had finished (the job's
/// teardown, a larger share of the moments when a run is faster than the reference).
fn campaign(name: &str, text: &str, seed: u64, kills: usize, mid_run: usize) {
    let config = TempFile::new(&format!("real-loss-{name}.toml"), text);
    let reference = reference(&config);
    let expected = reference.physics().unwrap().to_string();
    let answer = |ran: &Ran| ran.physics().map(str::to_string);
    let campaign = Campaign {
        seed,
        kills,
        ranks: RANKS,
        span: reference.elapsed(),
        reference: &reference,
        expected: &expected,
    };
    let tally = kill_campaign(campaign, answer, |k| {
        start(1, &marker(&format!("kill-{name}"), k), &config, &PROBLEM)
    });
    let during = tally.ended - tally.after_end;
    assert!(
        during <= mid_run,
        "{during} of {kills} runs ended with one line while bodies ran: more than {mid_run}"
    );
    assert!(
        tally.after_end <= kills / 4,
        "{} of {kills} kills came after every body had finished: the moments miss the loop",
        tally.after_end
    );
}

#[test]
fn killed_at_thirty_seeded_moments_the_spare_takes_over_and_the_report_is_the_fault_free_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The moments span the loop's time from when the job is seen running, so the set-up
    // pushes some past the loop's end: the signal misses (run again earlier) or lands in the
    // job's end, which ends with the designed line.
    campaign("strict", STRICT, 0x1015_4E5B, KILLS, 2);
}

/// The same kills with one relaxed CD "rank_step" per rank inside the strict "step", its
/// neighbours' halo puts logged (`configs/relaxed.toml`): a relaxed CD re-executes with the
/// strict one it is in, so the recovery is the strict one's.
#[test]
fn with_relaxed_cds_killed_at_fifteen_seeded_moments_the_report_is_the_fault_free_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let text = format!("{STRICT}{}", include_str!("../configs/relaxed.toml"));
    campaign("relaxed", &text, 0x2E1A_C5ED, KILLS / 2, 1);
}

/// Ranks 1, 2 and 3 killed at once in execution 25 of "step" (`CD_REAL_LOSS_KILL_AT`), with a
/// checkpoint on disk every 10 cycles: on one host, or on hosts of two, one of them held
/// another's copies in memory, so no execution is held for every rank, and the job of the
/// survivors and three spares resumes from the newest checkpoint committed, inside the
/// running job, printing the fault-free report.
#[test]
fn three_ranks_killed_at_once_resume_from_the_checkpoint_on_disk() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("lulesh-real-loss-disk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the test's directory");
    let text = format!(
        "{STRICT}checkpoint = {{ dir = {:?}, every = 10 }}\n",
        dir.join("ckpt")
    );
    let config = TempFile::new("real-loss-disk.toml", &text);
    let expected = reference(&config).physics().unwrap().to_string();
    let path = config.0.to_str().expect("a UTF-8 temporary path");
    let mut args = vec!["--spares", "3"];
    args.extend(PROBLEM);
    args.extend(["--cd-config", path]);
    let kill = [("CD_REAL_LOSS_KILL_AT", "agreement:1+2+3:25")];
    // A rank that sees another's death before reaching its own kill point survives, and the
    // recovery may then find an execution in memory after all: a few attempts, each of which
    // must print the fault-free report.
    const ATTEMPTS: usize = 3;
    let from_disk = (0..ATTEMPTS).find_map(|attempt| {
        let ran = Job::start(RANKS + 3, LULESH, &args, &marker("disk", attempt), &kill).finish();
        assert!(ran.status.success(), "{}", ran.context());
        assert_eq!(ran.physics(), Some(expected.as_str()), "{}", ran.context());
        if ran
            .stderr
            .contains("the job resumes from its newest whole checkpoint in")
        {
            return Some(ran);
        }
        println!(
            "attempt {attempt} did not lose a rank with its buddy\n{}",
            ran.context()
        );
        None
    });
    let ran = from_disk.unwrap_or_else(|| {
        panic!("no attempt of {ATTEMPTS} resumed from disk (their output above)")
    });
    // A checkpoint is committed some executions after it is handed over: the kill at 25 may
    // come before 20's commit.
    let at = ran.restarted_at();
    assert!(
        matches!(at, Some(10 | 20)),
        "resumed at {at:?}, not a checkpoint taken before the kill\n{}",
        ran.context()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_a_spare_a_killed_rank_ends_the_job_with_one_line() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = TempFile::new("real-loss-nospare.toml", STRICT);
    // A larger problem than the kill test's: its loop (a few seconds) is still running when
    // the kill comes, on a quiet machine too.
    let mut job = start(0, &marker("nospare", 0), &config, &["-s", "10"]);
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
