//! `lulesh -s 6 --spares 1` under a strict CD configuration on 8+1 processes under
//! `mpirun --with-ft ulfm` (feature `ulfm`; the launcher `$PGAS_ULFM_MPIRUN` from
//! `. .ci/ulfm-env`): one rank's process killed with SIGKILL from outside at seeded moments
//! uniform over the run; the spare takes its rank, every rank resumes the strict CD "step"
//! from memory (`cd-runtime/src/REAL_LOSS.md`), and the run prints the fault-free report's
//! physics bit for bit. Without a spare the job ends with one line. Every run is bounded in
//! time: a hang fails the test.

use std::sync::Mutex;
use std::time::Duration;

mod common;
use common::TempFile;
use common::kills::{Seeded, kill9};
use common::ulfm_job::{Job, Ran, marker};

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
            let mut job = start(1, &marker("kill", k), &config, &PROBLEM);
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
