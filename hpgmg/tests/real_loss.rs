//! `hpgmg 4 1 --spares 1` under a strict CD configuration (and with relaxed CDs inside it) on
//! 8+1 processes under `mpirun --with-ft ulfm` (feature `ulfm`; the launcher
//! `$PGAS_ULFM_MPIRUN` from `. .ci/ulfm-env`): one rank's process killed with SIGKILL from
//! outside at seeded moments uniform over the run; the spare takes its rank, every rank
//! resumes the strict CD "solve" from memory (`cd-runtime/src/REAL_LOSS.md`), and the run
//! prints the fault-free report bit for bit but for its timings (held until the job's end:
//! `src/held_report.rs`). Without a spare the job ends with one line. The operators, kept by
//! `cd::setup_once`, are taken back by every resumed run, not computed again. Every run is
//! bounded in time: a hang fails the test.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "../../examples/tests/common/kills.rs"]
#[allow(dead_code)]
mod kills;
#[path = "../../examples/tests/common/ulfm_job.rs"]
#[allow(dead_code)]
mod ulfm_job;

use kills::kill9;
use ulfm_job::{Campaign, Job, Ran, kill_campaign, marker};

const HPGMG: &str = env!("CARGO_BIN_EXE_hpgmg");
/// The job's ranks (the spares come on top).
const RANKS: usize = 8;
/// The problem: one 16^3 box per rank and many short solves, so that the moments spread over
/// many executions of "solve" and the job's start and end (where a kill ends the job with one
/// line) are a small share of the run.
const PROBLEM: [&str; 4] = ["4", "1", "--solves", "60"];
/// Every solve one execution of the strict CD "solve" (and each V-cycle one of "level"), no
/// fault injected.
const STRICT: &str = "[cd.solve]\nmedium = \"local\"\n";
/// The kills of the seeded test.
const KILLS: usize = 30;

/// One run at a time: the machine's cores are few, and a run's timing sets where kills land.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The report's text up to the CD report, each timing replaced by `T`: the answer, which a
/// recovered run must print bit for bit.
fn answer(ran: &Ran) -> Option<String> {
    let end = ran.stdout.find("CD report").unwrap_or(ran.stdout.len());
    let report = &ran.stdout[..end];
    if !report.contains("===== Done") {
        return None;
    }
    Some(report.lines().map(untimed).collect::<Vec<_>>().join("\n"))
}

/// `line` with its timings (`X seconds`, `time=X`, `DOF/s=X`) replaced by `T`.
fn untimed(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let next = words.get(i + 1).copied().unwrap_or("");
            if w.starts_with("time=") {
                "time=T"
            } else if w.starts_with("DOF/s=") {
                "DOF/s=T"
            } else if next.starts_with("seconds")
                && w.trim_start_matches('(').parse::<f64>().is_ok()
            {
                "T"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A temporary CD configuration, removed on drop.
struct Config(std::path::PathBuf);

impl Config {
    fn new(name: &str) -> Config {
        Config::with(name, STRICT)
    }

    /// A configuration of the text `text`.
    fn with(name: &str, text: &str) -> Config {
        let path =
            std::env::temp_dir().join(format!("hpgmg-real-loss-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("write the configuration");
        Config(path)
    }

    fn arg(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temporary path")
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Starts `hpgmg` on the ranks and `spares` spares with the CD configuration `config`, on
/// [`PROBLEM`], `env` set in every process.
fn start(spares: usize, marker: &str, config: &Config, env: &[(&str, &str)]) -> Job {
    let s = spares.to_string();
    let mut args = PROBLEM.to_vec();
    args.extend(["--spares", &s, "--cd-config", config.arg()]);
    Job::start(RANKS + spares, HPGMG, &args, marker, env)
}

/// The fault-free run with a spare that is never needed, and how long its job ran from the
/// moment rank 0's job was seen running (the span the kills are drawn from).
fn reference(config: &Config) -> (Ran, Duration) {
    let mut job = start(1, &marker("reference", 0), config, &[]);
    job.rank_pid(0).expect("rank 0's job runs");
    let seen = Instant::now();
    let ran = job.finish();
    let span = seen.elapsed();
    assert!(ran.status.success(), "{}", ran.context());
    assert!(answer(&ran).is_some(), "{}", ran.context());
    assert!(!ran.stderr.contains("lost"), "{}", ran.context());
    (ran, span)
}

/// Runs a campaign of `kills` under the CD configuration `text` and checks its endings: at
/// most `mid_run` runs end with one line before the teardown, at most a quarter in it; and
/// every run that resumed at a solve took its operators back.
fn campaign(name: &str, text: &str, seed: u64, kills: usize, mid_run: usize) {
    let config = Config::with(&format!("{name}.toml"), text);
    let (reference, span) = reference(&config);
    let expected = answer(&reference).unwrap();
    let campaign = Campaign {
        seed,
        kills,
        ranks: RANKS,
        span,
        reference: &reference,
        expected: &expected,
    };
    let tally = kill_campaign(campaign, answer, |k| {
        start(1, &marker(&format!("kill-{name}"), k), &config, &[])
    });
    // A kill in the job's teardown ends it with one line by design; the start-up and the
    // other designed endings are a small share of the run.
    assert!(
        tally.ended - tally.after_end <= mid_run,
        "{} of {kills} runs ended with one line before the teardown: more than {mid_run}",
        tally.ended - tally.after_end
    );
    assert!(
        tally.after_end <= kills / 4,
        "{} of {kills} kills came in the teardown: the solves are too short a share of the run",
        tally.after_end
    );
    // A run resumes at a solve only after the set-up kept the operators on every rank and at
    // every buddy: each such rerun takes them back instead of computing them again.
    assert_eq!(
        tally.setup_kept, tally.resumed,
        "every run that resumed from memory takes the operators back (`cd::setup_once`)"
    );
}

#[test]
fn killed_at_thirty_seeded_moments_the_spare_takes_over_and_the_report_is_the_fault_free_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    campaign("kills", STRICT, 0x4B61_5E5D, KILLS, 2);
}

/// The same kills with a relaxed CD per rank around each smoother call and one around each
/// level (`configs/relaxed.toml`: ghost puts logged, arrivals by flags, no barrier): a relaxed
/// CD re-executes with the strict one it is in, so the recovery is the strict one's.
#[test]
fn with_relaxed_cds_killed_at_fifteen_seeded_moments_the_report_is_the_fault_free_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let text = format!("{STRICT}{}", include_str!("../configs/relaxed.toml"));
    campaign("relaxed", &text, 0x5E1A_CED5, KILLS / 2, 1);
}

/// Runs the job with `spares` spares under the kill points `kill` (`CD_REAL_LOSS_KILL_AT`) and
/// checks that it exits 0, prints the fault-free report and says each of `lines` on stderr.
fn killed_at_points(name: &str, spares: usize, kill: &str, lines: &[&str]) {
    let config = Config::new(&format!("{name}.toml"));
    let (reference, _) = reference(&config);
    let expected = answer(&reference).unwrap();
    let ran = start(
        spares,
        &marker(name, 0),
        &config,
        &[("CD_REAL_LOSS_KILL_AT", kill)],
    )
    .finish();
    assert!(ran.status.success(), "{}", ran.context());
    assert_eq!(
        answer(&ran).as_deref(),
        Some(expected.as_str()),
        "{}",
        ran.context()
    );
    for line in lines {
        assert!(ran.stderr.contains(line), "{line}\n{}", ran.context());
    }
}

/// Rank 1 killed in the preservation of solve 20, then rank 3 killing itself in the resume
/// that follows (`resume:3:1`): in the second recovery the first one's replacement, whose
/// rerun was cut short before it kept its generation and its operators, takes both from
/// their copies again, so the job resumes from memory and computes no operator again.
#[test]
fn a_second_loss_during_the_resume_still_takes_the_operators_back() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    killed_at_points(
        "resume",
        2,
        "preserve:1:20,resume:3:1",
        &[
            "rank(s) [3] lost and replaced by spares; resuming CD \"solve\" at execution",
            "\"hpgmg.operators\" taken back from memory on every rank",
        ],
    );
}

/// Rank 3 dies in `cd::setup_once` before sending its operators to its buddy: nobody holds
/// them, so the rerun must compute them on every rank (the computation exchanges halos: all
/// or none), and still print the fault-free report.
#[test]
fn killed_before_its_operators_reached_its_buddy_every_rank_computes_them_again() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    killed_at_points(
        "setup",
        1,
        "setup:3:0",
        &[
            "\"hpgmg.operators\" computed again on every rank",
            "from its beginning",
        ],
    );
}

#[test]
fn without_a_spare_a_killed_rank_ends_the_job_with_one_line() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = Config::new("nospare.toml");
    // The solves still run when the kill comes, on a quiet machine too.
    let mut job = start(0, &marker("nospare", 0), &config, &[]);
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
    assert!(answer(&ran).is_none(), "{}", ran.context());
}

#[test]
fn spares_without_a_cd_configuration_are_refused_with_one_line() {
    let out = std::process::Command::new(HPGMG)
        .args(["4", "1", "--spares", "1"])
        .env_remove("PGAS_SPARES")
        .env_remove("PGAS_RANKS")
        .output()
        .expect("run hpgmg");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--cd-config"), "{err}");
}

#[test]
fn a_report_answer_hides_the_timings_only() {
    assert_eq!(
        untimed("FMGSolve... f-cycle     norm=8.4e-04  rel=9.6e-04  done (0.027125 seconds)"),
        "FMGSolve... f-cycle     norm=8.4e-04  rel=9.6e-04  done T seconds)"
    );
    assert_eq!(
        untimed("   Total time in MGSolve      0.003118 seconds"),
        "   Total time in MGSolve      T seconds"
    );
    assert_eq!(
        untimed("  h=3.1e-02  DOF=3.2e+04  time=0.040102  DOF/s=8.171e+05  MPI=8  OMP=1"),
        "  h=3.1e-02  DOF=3.2e+04  time=T  DOF/s=T  MPI=8  OMP=1"
    );
}
