//! Checkpoint and restart across launches (`cd-runtime/src/checkpoint/README.md`,
//! `hpgmg/src/progress.rs`): `hpgmg 4 1 --ranks 8` checkpointing its solve CD is killed with
//! SIGKILL at seeded random moments (every other one as soon as a seeded checkpoint is seen
//! being written), relaunched
//! with `--restart auto`, and prints the uninterrupted run's report: every line but the
//! timings, and exactly the norms of the solves from the resumed one on. A checkpoint key on
//! another CD, a restart without a CD configuration, and a relaunch with other arguments are
//! refused with one line.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::{all_norms, hpgmg, physics};

/// Kill moments.
const KILLS: u64 = 20;

/// The arguments of the runs: 8 ranks, 2 solves per pass (15 solves in all).
const ARGS: &[&str] = &["4", "1", "--ranks", "8", "--solves", "2"];

/// Solves of one run: two passes of `--solves` on three levels, three Richardson solves.
const SOLVES: usize = 3 * 2 * 2 + 3;

/// A fresh directory for one test (in the target directory).
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("hpgmg-restart-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A configuration checkpointing the CD `cd` every 2 executions into `dir/ck`.
fn config(dir: &Path, cd: &str) -> PathBuf {
    let path = dir.join(format!("{cd}.toml"));
    std::fs::write(
        &path,
        format!(
            "[cd.{cd}]\ncheckpoint = {{ dir = {:?}, every = 2, keep = 2 }}\n",
            dir.join("ck").display().to_string()
        ),
    )
    .unwrap();
    path
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A small seeded generator (SplitMix64) for the kill moments.
struct Moments(u64);
impl Moments {
    fn next_below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % bound.max(1)
    }
}

/// Whether the newest checkpoint in `ck` has no manifest: the kill came while it was being
/// written.
fn killed_during_a_write(ck: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(ck) else {
        return false;
    };
    let mut all: Vec<(String, bool)> = entries
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                p.join("manifest.toml").exists(),
            )
        })
        .collect();
    all.sort();
    all.last().is_some_and(|(_, whole)| !whole)
}

/// The execution the relaunch said it resumed at (0: it started from the beginning).
fn resumed_at(stderr: &str) -> usize {
    stderr
        .lines()
        .find_map(|l| {
            let rest = l.split("resuming CD \"solve\" at execution ").nth(1)?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0)
}

#[test]
fn killed_at_twenty_moments_a_relaunch_prints_the_uninterrupted_report() {
    let dir = scratch("kills");
    let cfg = config(&dir, "solve");
    let run = |restart: bool| {
        let mut c = hpgmg();
        c.args(ARGS).arg("--cd-config").arg(&cfg);
        c.env_remove("CD_RESTART");
        if restart {
            c.args(["--restart", "auto"]);
        }
        c
    };
    let reference = stdout(&hpgmg().args(ARGS).output().unwrap());
    let reference_norms = all_norms(&reference);
    assert_eq!(reference_norms.len(), SOLVES);
    let began = Instant::now();
    let checkpointing = stdout(&run(false).output().unwrap());
    let span = began.elapsed();
    assert_eq!(physics(&checkpointing), physics(&reference));
    let mut moments = Moments(0x5EED_0030);
    let (mut during_write, mut resumed) = (0, 0);
    for k in 0..KILLS {
        // Every other kill: at a seeded moment of the run; the others as soon as a seeded one
        // of its checkpoints (executions 2, 4, .., 14) is seen being written (its directory
        // there, its manifest not yet).
        let at = Duration::from_millis(moments.next_below(span.as_millis() as u64));
        let writing = (k % 2 == 1).then(|| {
            let it = 2 * (1 + moments.next_below(7));
            dir.join("ck").join(format!("solve-{it:010}"))
        });
        // A run from the beginning replaces the earlier runs' checkpoints: gone before it
        // starts, none of them is mistaken for one it writes.
        let _ = std::fs::remove_dir_all(dir.join("ck"));
        let mut child = run(false)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the run");
        let began = Instant::now();
        while began.elapsed() < at || writing.is_some() {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if let Some(ck) = &writing {
                if ck.is_dir() && !ck.join("manifest.toml").exists() {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = child.kill();
        let _ = child.wait();
        if killed_during_a_write(&dir.join("ck")) {
            during_write += 1;
        }
        let out = run(true).output().expect("relaunch");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let text = stdout(&out);
        let from = resumed_at(&err);
        if from > 0 {
            resumed += 1;
        }
        assert_eq!(
            physics(&text),
            physics(&reference),
            "kill {k} at {at:?}: the relaunch differs; its stderr:\n{err}"
        );
        assert_eq!(
            all_norms(&text),
            reference_norms[from..],
            "kill {k} at {at:?}: the solves from {from} on print other norms; stderr:\n{err}"
        );
    }
    eprintln!("{resumed} of {KILLS} relaunches resumed; {during_write} kills came during a write");
    assert!(
        during_write > 0,
        "no kill came during a checkpoint write: widen the moments"
    );
    assert!(resumed > 0, "no relaunch resumed: widen the moments");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_resume_in_the_richardson_analysis_has_the_finer_solutions() {
    // The last checkpoint is taken before the last Richardson solve (execution 14): the
    // error and order need the solutions of the two finer levels, solved before it.
    let dir = scratch("richardson");
    let cfg = config(&dir, "solve");
    let reference = stdout(&hpgmg().args(ARGS).output().unwrap());
    let first = hpgmg()
        .args(ARGS)
        .arg("--cd-config")
        .arg(&cfg)
        .output()
        .unwrap();
    stdout(&first);
    let ck = dir.join("ck");
    // The newest (execution 14) alone: the previous ones deleted.
    for e in std::fs::read_dir(&ck).unwrap() {
        let p = e.unwrap().path();
        if !p.ends_with("solve-0000000014") {
            std::fs::remove_dir_all(p).unwrap();
        }
    }
    let out = hpgmg()
        .args(ARGS)
        .arg("--cd-config")
        .arg(&cfg)
        .args(["--restart"])
        .arg(&ck)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(resumed_at(&err), 14, "{err}");
    let text = stdout(&out);
    assert_eq!(physics(&text), physics(&reference));
    assert_eq!(all_norms(&text), all_norms(&reference)[14..]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wrong_checkpoint_key_a_missing_configuration_and_other_arguments_are_refused() {
    let dir = scratch("refused");
    let one_line = |out: &Output, what: &str| {
        assert!(!out.status.success(), "{what}");
        assert!(out.stdout.is_empty(), "{what}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        assert!(err.contains(what), "{err}");
    };
    // The key on the V-cycle CD: a relaunch resumes at a solve.
    let level = config(&dir, "level");
    let out = hpgmg()
        .args(ARGS)
        .arg("--cd-config")
        .arg(&level)
        .output()
        .unwrap();
    one_line(&out, "move it to [cd.solve]");
    // --restart without --cd-config.
    let out = hpgmg()
        .args(ARGS)
        .args(["--restart", "auto"])
        .output()
        .unwrap();
    one_line(&out, "give its --cd-config too");
    // A checkpoint of `--solves 2`, relaunched with `--solves 3`: refused, naming the manifest.
    let cfg = config(&dir, "solve");
    stdout(
        &hpgmg()
            .args(ARGS)
            .arg("--cd-config")
            .arg(&cfg)
            .output()
            .unwrap(),
    );
    let out = hpgmg()
        .args([
            "4",
            "1",
            "--ranks",
            "8",
            "--solves",
            "3",
            "--restart",
            "auto",
        ])
        .arg("--cd-config")
        .arg(&cfg)
        .output()
        .unwrap();
    one_line(&out, "--solves 3");
    assert!(String::from_utf8_lossy(&out.stderr).contains("manifest.toml"));
    let _ = std::fs::remove_dir_all(&dir);
}
