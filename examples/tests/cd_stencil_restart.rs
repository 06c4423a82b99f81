//! `cd_stencil --restart auto`: the job SIGKILLed at 20 seeded moments (every other one as soon
//! as a seeded checkpoint is seen being written) and relaunched prints the uninterrupted run's checksum bit for
//! bit (`cd-runtime/src/checkpoint/README.md`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::kills::{Seeded, being_written};

const CD_STENCIL: &str = env!("CARGO_BIN_EXE_cd_stencil");

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cd-stencil-restart-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The checksum line of a successful run.
fn checksum(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    text.lines()
        .find(|l| l.starts_with("checksum "))
        .unwrap_or_else(|| panic!("no checksum in {text}"))
        .to_string()
}

#[test]
fn killed_at_twenty_moments_a_relaunch_prints_the_uninterrupted_checksum() {
    let dir = scratch("kill");
    let cfg = dir.join("cd.toml");
    let ck = dir.join("ck");
    std::fs::write(
        &cfg,
        format!(
            "[cd.iteration]\ncheckpoint = {{ dir = {:?}, every = 10 }}\n",
            ck.display().to_string()
        ),
    )
    .unwrap();
    let run = |restart: bool| {
        let mut c = Command::new(CD_STENCIL);
        c.args(["--ranks", "8", "--n", "32", "--iters", "150", "--cd-config"])
            .arg(&cfg)
            .env_remove("PGAS_RANKS")
            .env_remove("CD_CONFIG")
            .env_remove("CD_RESTART");
        if restart {
            c.args(["--restart", "auto"]);
        }
        c
    };
    let began = Instant::now();
    let reference = checksum(&run(false).output().unwrap());
    let span = began.elapsed().as_millis() as u64;
    let mut seeded = Seeded::new(0x5EED_57E7);
    let mut during_write = 0;
    for k in 0..20 {
        let z = seeded.next_u64();
        let at = Duration::from_millis(z % span.max(1));
        // Every other kill as soon as a seeded one of the first checkpoints (iterations 10,
        // 20, .., 100) is seen being written (its directory there, its manifest not yet).
        let writing = (k % 2 == 1).then(|| ck.join(format!("iteration-{:010}", 10 * (1 + z % 10))));
        // A run from the beginning replaces the earlier runs' checkpoints: gone before it
        // starts, none of them is mistaken for one it writes.
        let _ = std::fs::remove_dir_all(&ck);
        let mut child = run(false)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while (t.elapsed() < at || writing.is_some()) && child.try_wait().unwrap().is_none() {
            if writing
                .as_ref()
                .is_some_and(|w| being_written(w, "manifest.toml"))
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = child.kill();
        let _ = child.wait();
        let mut names: Vec<PathBuf> = std::fs::read_dir(&ck)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        names.sort();
        if names
            .last()
            .is_some_and(|p| !p.join("manifest.toml").exists())
        {
            during_write += 1;
        }
        let out = run(true).output().unwrap();
        assert_eq!(
            checksum(&out),
            reference,
            "kill {k} at {at:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(during_write > 0, "no kill came during a checkpoint write");
    let _ = std::fs::remove_dir_all(&dir);
}
