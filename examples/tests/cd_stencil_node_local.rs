//! `cd_stencil` under `mpirun -n 4` with a checkpoint directory per process
//! (`dir = ".../ck-{rank}"`, node-local: no process reads another's), the buddy copies sent over
//! the network (`cd-runtime/src/checkpoint/README.md`, "Node-local directories"): the job is
//! SIGKILLed at seeded moments (every other one while a checkpoint is being written); after
//! each kill, the newest manifest in any directory names only files that exist whole (the
//! part and its copy at the buddy); then one process's whole directory is deleted and the relaunch with
//! `--restart auto` prints the uninterrupted run's checksum bit for bit, the lost parts fetched
//! from the buddies.
//!
//! Only with the `mpi` feature (`cargo test -p pgas-examples --features mpi --test
//! cd_stencil_node_local`); skipped with a message without mpirun, except under `CI=true`,
//! where that fails.
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CD_STENCIL: &str = env!("CARGO_BIN_EXE_cd_stencil");
const PROCESSES: usize = 4;

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cd-stencil-node-local-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The checksum line of a successful run.
fn checksum(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{out:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find(|l| l.starts_with("checksum "))
        .unwrap_or_else(|| panic!("no checksum in {text}"))
        .to_string()
}

/// The processes mpirun (`parent`) started.
fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
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

/// Process `r`'s checkpoint directory.
fn ck(dir: &Path, r: usize) -> PathBuf {
    dir.join(format!("ck-{r}"))
}

/// The newest checkpoint with a manifest in any process's directory names files that exist
/// with the length it says: the part in its lead's directory and the copy in its buddy's. (An
/// older one may have lost files already: each process deletes the checkpoints beyond `keep`
/// in its own directory once it has committed a newer one, at its own pace.) The number of
/// manifests of that checkpoint seen.
fn newest_manifest_names_whole_files(dir: &Path) -> usize {
    let mut manifests: Vec<(String, PathBuf)> = Vec::new();
    for r in 0..PROCESSES {
        let Ok(entries) = std::fs::read_dir(ck(dir, r)) else {
            continue;
        };
        for e in entries.flatten() {
            let manifest = e.path().join("manifest.toml");
            if manifest.is_file() {
                manifests.push((e.file_name().into_string().unwrap(), manifest));
            }
        }
    }
    let Some(newest) = manifests.iter().map(|(n, _)| n.clone()).max() else {
        return 0;
    };
    let mut seen = 0;
    for (name, manifest) in manifests.iter().filter(|(n, _)| *n == newest) {
        seen += 1;
        let text = std::fs::read_to_string(manifest).unwrap();
        let m: cd_runtime::Manifest = toml::from_str(&text).unwrap();
        for f in &m.rank {
            let own = ck(dir, f.part)
                .join(name)
                .join(format!("rank{}/state.bin", f.part));
            let copy = ck(dir, f.buddy)
                .join(name)
                .join(format!("rank{}/copy-of-rank{}.bin", f.buddy, f.part));
            for p in [own, copy] {
                let len = std::fs::metadata(&p).map(|m| m.len());
                assert_eq!(
                    len.ok(),
                    Some(f.file_len),
                    "{} names {}, which is not whole",
                    manifest.display(),
                    p.display()
                );
            }
        }
    }
    seen
}

#[test]
fn node_local_checkpoints_survive_kills_and_a_deleted_directory_bit_for_bit() {
    if !pgas::mpirun::mpirun_available() {
        pgas::mpirun::require_mpirun("cd_stencil_node_local");
        return;
    }
    let dir = scratch("kill");
    let cfg = dir.join("cd.toml");
    std::fs::write(
        &cfg,
        format!(
            "[cd.iteration]\ncheckpoint = {{ dir = {:?}, every = 10 }}\n",
            dir.join("ck-{rank}").display().to_string()
        ),
    )
    .unwrap();
    let run = |restart: bool| {
        let mut c = pgas::mpirun::mpirun_command(PROCESSES);
        c.arg(CD_STENCIL)
            .args(["--n", "32", "--iters", "150", "--cd-config"])
            .arg(&cfg)
            .env_remove("PGAS_RANKS")
            .env_remove("PGAS_CONDUIT")
            .env_remove("CD_CONFIG")
            .env_remove("CD_RESTART");
        if restart {
            c.args(["--restart", "auto"]);
        }
        c
    };
    let clear = || {
        for r in 0..PROCESSES {
            let _ = std::fs::remove_dir_all(ck(&dir, r));
        }
    };
    clear();
    let began = Instant::now();
    let reference = checksum(&run(false).output().unwrap());
    let span = began.elapsed().as_millis() as u64;
    assert!(
        newest_manifest_names_whole_files(&dir) > 0,
        "the run committed checkpoints"
    );
    let mut seed = 0x0DE_10CA1u64;
    let (mut fetched, mut during_write) = (0, 0);
    for k in 0..8 {
        // SplitMix64.
        seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let z = z ^ (z >> 31);
        // Half the span at least: most kills come after a commit, so there is one to resume.
        let at = Duration::from_millis(span / 2 + z % (span / 2).max(1));
        // Every other kill as soon as process 0 is seen writing a seeded checkpoint after the
        // first (its directory there, its manifest not yet).
        let writing =
            (k % 2 == 1).then(|| ck(&dir, 0).join(format!("iteration-{:010}", 10 * (2 + z % 8))));
        clear();
        let mut child = run(false)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        let mut caught_writing = false;
        while (t.elapsed() < at || writing.is_some()) && child.try_wait().unwrap().is_none() {
            if let Some(w) = &writing {
                if w.is_dir() && !w.join("manifest.toml").exists() {
                    caught_writing = true;
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // One process of the job, SIGKILLed: the job ends (the conduit's watchdog).
        let procs = children(child.id());
        if let Some(&pid) = procs.get((z % PROCESSES as u64) as usize % procs.len().max(1)) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        } else {
            let _ = child.kill();
        }
        let _ = child.wait();
        during_write += usize::from(caught_writing);
        newest_manifest_names_whole_files(&dir);
        // One process's whole directory (one node's disk) gone.
        let victim = (z >> 8) as usize % PROCESSES;
        let _ = std::fs::remove_dir_all(ck(&dir, victim));
        let out = run(true).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            checksum(&out),
            reference,
            "kill {k} at {at:?}, directory {victim} deleted: {stderr}"
        );
        if stderr.contains("resuming CD") {
            assert!(
                stderr.contains(&format!("copy-of-rank{victim}.bin")),
                "the parts of process {victim} came from its buddy's copy: {stderr}"
            );
            fetched += 1;
        }
    }
    assert!(fetched > 0, "no relaunch resumed from a checkpoint");
    assert!(during_write > 0, "no kill came during a checkpoint write");
    let _ = std::fs::remove_dir_all(&dir);
}
