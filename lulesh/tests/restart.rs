//! Checkpoint and restart across launches (`cd-runtime/src/checkpoint/README.md`): the whole
//! job is killed with SIGKILL at seeded random moments (also while a checkpoint is being
//! written), relaunched with `--restart auto`, and prints the uninterrupted run's report bit
//! for bit; a relaunch with another `-s` or `--ranks` is refused with one line.
//!
//! On smp (`--ranks 8`, one process) here; under `mpirun -n 8` (one process killed, which ends
//! the job) with the `mpi` feature.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::kills::Seeded;

/// Kill moments per test.
const KILLS: u64 = 20;

/// A fresh directory for one test (in the target directory).
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lulesh-restart-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The configuration of the runs: a checkpoint of "step" every 20 cycles into `dir/ck`.
fn config(dir: &Path) -> PathBuf {
    let path = dir.join("cd.toml");
    std::fs::write(
        &path,
        format!(
            "[cd.step]\ncheckpoint = {{ dir = {:?}, every = 20, keep = 2 }}\n",
            dir.join("ck").display().to_string()
        ),
    )
    .unwrap();
    path
}

/// The report up to its timings (which differ from run to run).
fn physics(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{out:?}\n{text}");
    let end = text
        .find("\nElapsed time")
        .unwrap_or_else(|| panic!("no timing section in\n{text}"));
    text[..end].to_string()
}

/// Whether a checkpoint directory holds a checkpoint whose manifest is missing, newer than
/// every whole one: the kill came while it was being written.
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

/// Runs `start()` (a fresh run), kills the job at `KILLS` seeded moments within `span` (every
/// other one as soon as a seeded checkpoint is seen being written), each time relaunching with
/// `restart()`, and checks every relaunch prints `reference`; at least one kill must have come
/// during a checkpoint write. `kill` ends the started job.
fn kill_and_restart(
    dir: &Path,
    reference: &str,
    span: Duration,
    start: impl Fn() -> Command,
    restart: impl Fn() -> Command,
    mut kill: impl FnMut(&mut std::process::Child),
) {
    let mut moments = Seeded::new(0x5EED_0030);
    let mut during_write = 0;
    for k in 0..KILLS {
        // Every other kill: at a seeded moment of the run; the others as soon as a seeded one
        // of its first checkpoints (executions 20, 40, .., 200) is seen being written (its
        // directory there, its manifest not yet).
        let at = Duration::from_millis(moments.next_below(span.as_millis() as u64));
        let writing = (k % 2 == 1).then(|| {
            let it = 20 * (1 + moments.next_below(10));
            dir.join("ck").join(format!("step-{it:010}"))
        });
        // A run from the beginning replaces the earlier runs' checkpoints: gone before it
        // starts, none of them is mistaken for one it writes.
        let _ = std::fs::remove_dir_all(dir.join("ck"));
        let mut child = start()
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
        kill(&mut child);
        // The job is ending; a launcher that outlives its processes (Open MPI's mpirun has
        // been seen not to exit once every process of the job had ended) is ended too.
        let ending = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if ending.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if killed_during_a_write(&dir.join("ck")) {
            during_write += 1;
        }
        let out = restart().output().expect("relaunch");
        assert_eq!(
            physics(&out),
            reference,
            "kill {k} at {at:?}: the relaunch differs; its stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        during_write > 0,
        "no kill came during a checkpoint write: widen the moments"
    );
}

fn lulesh() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lulesh"));
    c.env_remove("PGAS_RANKS")
        .env_remove("CD_CONFIG")
        .env_remove("CD_RESTART")
        .env_remove("PGAS_CONDUIT");
    c
}

#[test]
fn killed_at_twenty_moments_on_smp_a_relaunch_prints_the_uninterrupted_report() {
    let dir = scratch("smp");
    let cfg = config(&dir);
    let args = |restart: bool| {
        let mut c = lulesh();
        c.args(["-s", "6", "--ranks", "8", "--cd-config"]).arg(&cfg);
        if restart {
            c.args(["--restart", "auto"]);
        }
        c
    };
    let began = Instant::now();
    let reference = physics(&args(false).output().unwrap());
    let span = began.elapsed();
    // The uninterrupted run without CDs prints the same numbers.
    let plain = physics(&lulesh().args(["-s", "6", "--ranks", "8"]).output().unwrap());
    assert_eq!(reference, plain);
    kill_and_restart(
        &dir,
        &reference,
        span,
        || args(false),
        || args(true),
        |c| {
            let _ = c.kill();
        },
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_relaunch_with_another_size_or_rank_count_is_refused_with_one_line() {
    let dir = scratch("refused");
    let cfg = config(&dir);
    let run = |args: &[&str]| {
        lulesh()
            .args(args)
            .arg("--cd-config")
            .arg(&cfg)
            .output()
            .unwrap()
    };
    assert!(
        run(&["-s", "6", "--ranks", "8", "-i", "45"])
            .status
            .success()
    );
    for (args, what) in [
        (
            &["-s", "7", "--ranks", "8", "--restart", "auto"][..],
            "lulesh -s 7",
        ),
        (
            &["-s", "6", "--ranks", "1", "--restart", "auto"][..],
            "rank count (8, this job: 1)",
        ),
    ] {
        let out = run(args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| l.contains("refused")).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(
            lines[0].contains("manifest.toml") && lines[0].contains(what),
            "{err}"
        );
    }
    // No checkpoint at all: from the beginning, and said.
    let empty = scratch("empty");
    let out = lulesh()
        .args(["-s", "6", "--ranks", "8", "-i", "5", "--restart"])
        .arg(empty.join("none"))
        .arg("--cd-config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("starting from the beginning"),
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&empty);
}

/// The pids of `parent`'s child processes.
#[cfg(feature = "mpi")]
fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold blanks, so split after its ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

#[cfg(feature = "mpi")]
#[test]
fn killed_at_twenty_moments_under_mpirun_a_relaunch_prints_the_uninterrupted_report() {
    let dir = scratch("mpi");
    let cfg = config(&dir);
    let args = |restart: bool| {
        let mut c = pgas::mpirun::mpirun_command(8);
        c.arg(env!("CARGO_BIN_EXE_lulesh"))
            .args(["-s", "6", "--cd-config"])
            .arg(&cfg)
            .env_remove("PGAS_RANKS")
            .env_remove("CD_RESTART")
            .env_remove("PGAS_CONDUIT");
        if restart {
            c.args(["--restart", "auto"]);
        }
        c
    };
    let began = Instant::now();
    let reference = physics(&args(false).output().unwrap());
    let span = began.elapsed();
    let mut pick = Seeded::new(0x30);
    kill_and_restart(
        &dir,
        &reference,
        span,
        || args(false),
        || args(true),
        |c| {
            // One process of the job, SIGKILLed: the job ends (the conduit's watchdog).
            let procs = children(c.id());
            if let Some(&pid) = procs.get(pick.next_below(procs.len() as u64) as usize) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            } else {
                let _ = c.kill(); // not started yet (or done): the launcher itself
            }
        },
    );
    let _ = std::fs::remove_dir_all(&dir);
}
