//! Killing a running job from outside at seeded moments: the one harness of the kill tests
//! (`cd_stencil_restart.rs` and lulesh's `restart.rs` kill the whole job and relaunch it;
//! `cd_stencil_real_loss.rs` and lulesh's `real_loss.rs` kill one rank's process under
//! `mpirun --with-ft ulfm` and let a spare take its place). lulesh's and hpgmg's tests and
//! bench's `real-loss-bench` include this file by path (`lulesh/tests/common/mod.rs`): a
//! harness this small needs no crate of its own.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Seeded moments and choices (SplitMix64): the same seed gives the same kills.
pub struct Seeded(u64);

impl Seeded {
    /// The sequence of `seed`.
    pub fn new(seed: u64) -> Seeded {
        Seeded(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number uniform in `[0, bound)` (0 when `bound` is 0).
    pub fn next_below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound.max(1)
    }

    /// A moment uniform in `[0, span)` (millisecond resolution).
    pub fn moment(&mut self, span: Duration) -> Duration {
        Duration::from_millis(self.next_below(span.as_millis() as u64))
    }
}

/// Sends SIGKILL to process `pid` (a rank's process, not the test's child).
pub fn kill9(pid: u32) {
    // The process may have ended meanwhile: `kill`'s complaint about it is not the test's.
    let _ = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status();
}

/// The processes whose environment holds `KEY=VALUE` for every pair of `env` (the ranks
/// `mpirun -x MARKER` started, told apart by `OMPI_COMM_WORLD_RANK`).
pub fn processes_with(env: &[(&str, &str)]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(bytes) = std::fs::read(format!("/proc/{pid}/environ")) else {
                return false;
            };
            let vars: Vec<&[u8]> = bytes.split(|b| *b == 0).collect();
            env.iter().all(|(k, v)| {
                let want = format!("{k}={v}");
                vars.contains(&want.as_bytes())
            })
        })
        .collect()
}

/// Whether process `pid` has a thread whose name starts with `prefix` (the kernel keeps 15
/// bytes of a thread's name).
pub fn has_thread(pid: u32, prefix: &str) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.filter_map(|t| t.ok()).any(|t| {
        std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(prefix))
    })
}

/// Polls `ready` every millisecond until it holds, `child` ends, or `limit` passes; whether it
/// held.
pub fn wait_for(child: &mut Child, limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if ready() {
            return true;
        }
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// Whether `path` names a directory being written: present, its `done` file not yet.
pub fn being_written(path: &Path, done: &str) -> bool {
    path.is_dir() && !path.join(done).exists()
}
