//! Directories to remove when the process ends without unwinding.
//!
//! The mpi conduit's watchdog ends a process with `_exit` (a peer failed and the process did
//! not end by itself, or the launcher sent SIGTERM), which runs no destructor: the private
//! files a resilience runtime keeps on disk for the job would stay behind. Such a runtime
//! registers each directory it owns while the job runs ([`register`]), takes it back when it
//! removes the directory itself ([`unregister`]), and the watchdog calls [`run`] right before
//! `_exit`.
//!
//! [`run`] is called on the watchdog's thread while the process's other threads may still
//! run, so it never blocks on them: the registry's lock is only taken with `try_lock`, retried
//! for a bounded time (a holder keeps it for one push or one removal from a short list), and
//! a poisoned lock is used as it is (every update leaves the list whole, so a panic elsewhere
//! cannot leave it half-written).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// The registered directories, in registration order (one entry per [`register`]).
static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// How long [`run`] waits for the registry's lock before giving up on the cleanup (the exit
/// must not wait for a thread that cannot make progress).
const LOCK_WAIT: Duration = Duration::from_millis(500);

/// Removal attempts per directory in [`run`]: a thread of the process may still be creating
/// a file in it while it is being removed.
const REMOVE_ATTEMPTS: usize = 3;

/// The registry, waiting for other threads (a poisoned lock is still usable, see the module
/// doc).
fn lock() -> MutexGuard<'static, Vec<PathBuf>> {
    DIRS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Asks for `dir` and everything in it to be removed if the process ends by `_exit` before
/// [`unregister`] is called for it.
pub fn register(dir: &Path) {
    lock().push(dir.to_path_buf());
}

/// Withdraws one registration of `dir` (its owner removes it, or keeps it on purpose).
pub fn unregister(dir: &Path) {
    let mut dirs = lock();
    if let Some(i) = dirs.iter().rposition(|d| d == dir) {
        dirs.remove(i);
    }
}

/// The registered directories (for tests and diagnostics).
pub fn registered() -> Vec<PathBuf> {
    lock().clone()
}

/// Removes every registered directory, recursively, and forgets them; for the moment right
/// before `_exit`. Never blocks for long: if the registry stays locked by another thread for
/// [`LOCK_WAIT`], it removes nothing.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn run() {
    let start = Instant::now();
    let mut dirs = loop {
        match DIRS.try_lock() {
            Ok(guard) => break guard,
            Err(TryLockError::Poisoned(e)) => break e.into_inner(),
            Err(TryLockError::WouldBlock) if start.elapsed() < LOCK_WAIT => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(TryLockError::WouldBlock) => return,
        }
    };
    // Removed while the lock is held: a second caller (the other exit path of the watchdog,
    // racing with this one) waits instead of exiting before the removal is done.
    for dir in dirs.drain(..) {
        for _ in 0..REMOVE_ATTEMPTS {
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => continue,
                _ => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test touches the process-wide registry, so no other test races with it.
    #[test]
    fn registered_directories_are_removed_by_run_and_unregistered_ones_are_kept() {
        let base = std::env::temp_dir().join(format!("exit-cleanup-{}", std::process::id()));
        let (gone, kept) = (base.join("gone"), base.join("kept"));
        std::fs::create_dir_all(gone.join("rank0")).unwrap();
        std::fs::write(gone.join("rank0").join("level1.bin"), b"x").unwrap();
        std::fs::create_dir_all(&kept).unwrap();
        register(&gone);
        register(&kept);
        unregister(&kept);
        assert_eq!(registered(), vec![gone.clone()]);
        // A thread that panicked holding the lock does not stop the cleanup.
        let _ = std::thread::spawn(|| {
            let _guard = DIRS.lock();
            panic!("poison the registry on purpose");
        })
        .join();
        assert!(DIRS.is_poisoned());
        run();
        assert!(!gone.exists(), "the registered directory is removed");
        assert!(kept.exists(), "an unregistered directory is left alone");
        assert!(registered().is_empty(), "run forgets what it removed");
        // Runs again harmlessly (both exit paths of the watchdog may reach it).
        run();
        std::fs::remove_dir_all(&base).unwrap();
    }
}
