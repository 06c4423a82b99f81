//! The file medium's writer: preserved bytes go to disk on a thread of the rank's own, off
//! the critical path of the CD's body.
//!
//! A preservation on `medium = "file"` hands its bytes to the writer and returns; the body
//! runs on while the thread creates, writes and closes the file. A completed CD's files are
//! removed by the same thread, after their writes (one queue, in order). What must see the
//! bytes on disk waits for the queue to drain ([`FileWriter::wait`]):
//!
//! - a restore from a file (the bytes may still be in the queue);
//! - the completion of a CD, before it releases its entries: a CD completes only with its
//!   preserved files written, so an enclosing CD that re-executes finds them there;
//! - the end of the rank (the thread is joined, so `launch` removes a directory no thread
//!   still writes into).
//!
//! A write that fails ends the rank at the next preservation, restore or completion, with a
//! message naming the CD, the entry and the file (as the synchronous write did at once).
//! An emulated rank loss does not stop the thread: the disk outlives the rank's memory.
//!
//! Measured: `lulesh-bench` (`LULESH_BENCH=media`), `lulesh_medium_overhead` /
//! `file_s15_r8` against no CDs; see ROADMAP.md.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// One queued piece of work for the writer thread.
enum Job {
    /// Write `bytes` to `path`; `what` names the CD and entry for an error message.
    Write {
        path: PathBuf,
        bytes: Vec<u8>,
        what: String,
    },
    /// Remove `path` (a completed CD's copy); a missing file is no error.
    Remove(PathBuf),
}

/// What the thread reports back.
#[derive(Default)]
struct Done {
    /// Jobs finished, in queue order.
    finished: AtomicU64,
    /// The first failure, as the message the rank ends with.
    failure: Mutex<Option<String>>,
    /// Signalled after each job, for [`FileWriter::wait`].
    progress: Condvar,
    lock: Mutex<()>,
}

/// The rank's file writer: a queue and the thread that drains it, started on first use.
#[derive(Default)]
pub(crate) struct FileWriter {
    queue: std::cell::RefCell<Option<(Sender<Job>, JoinHandle<()>)>>,
    submitted: std::cell::Cell<u64>,
    done: Arc<Done>,
}

impl FileWriter {
    /// Queues a write of `bytes` to `path`; `what` names the CD and entry for errors.
    pub(crate) fn write(&self, path: PathBuf, bytes: Vec<u8>, what: String) {
        self.check();
        self.submit(Job::Write { path, bytes, what });
    }

    /// Queues the removal of `path`, after every write queued before it.
    pub(crate) fn remove(&self, path: PathBuf) {
        self.submit(Job::Remove(path));
    }

    /// Returns once every queued job is done; ends the rank if a write failed.
    pub(crate) fn wait(&self) {
        self.drain();
        self.check();
    }

    /// Returns once every queued job is done (also on a rank that unwinds: no failure check,
    /// which would panic again).
    pub(crate) fn drain(&self) {
        let target = self.submitted.get();
        if self.done.finished.load(Ordering::Acquire) < target {
            let mut guard = self.done.lock.lock().unwrap_or_else(|e| e.into_inner());
            while self.done.finished.load(Ordering::Acquire) < target {
                guard = self
                    .done
                    .progress
                    .wait(guard)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
    }

    /// Ends the rank with the first failed write's message, if one failed.
    fn check(&self) {
        let failure = self
            .done
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(message) = failure {
            panic!("{message}");
        }
    }

    fn submit(&self, job: Job) {
        let mut queue = self.queue.borrow_mut();
        let (sender, _) = queue.get_or_insert_with(|| start(self.done.clone()));
        self.submitted.set(self.submitted.get() + 1);
        sender
            .send(job)
            .expect("the file writer thread lives as long as the rank");
    }
}

impl Drop for FileWriter {
    fn drop(&mut self) {
        if let Some((sender, thread)) = self.queue.get_mut().take() {
            drop(sender);
            let _ = thread.join();
        }
    }
}

/// Starts the writer thread of one rank.
fn start(done: Arc<Done>) -> (Sender<Job>, JoinHandle<()>) {
    let (sender, jobs) = channel::<Job>();
    let thread = std::thread::Builder::new()
        .name("cd-file-writer".into())
        .spawn(move || {
            let mut made_dirs = std::collections::HashSet::new();
            for job in jobs {
                match job {
                    Job::Write { path, bytes, what } => {
                        let dir = path.parent().map(PathBuf::from).unwrap_or_default();
                        let result = if made_dirs.contains(&dir) {
                            Ok(())
                        } else {
                            std::fs::create_dir_all(&dir).map(|()| {
                                made_dirs.insert(dir);
                            })
                        }
                        .and_then(|()| std::fs::write(&path, &bytes));
                        if let Err(e) = result {
                            let mut failure =
                                done.failure.lock().unwrap_or_else(|e| e.into_inner());
                            failure.get_or_insert_with(|| {
                                format!("{what}: cannot preserve to {}: {e}", path.display())
                            });
                        }
                    }
                    Job::Remove(path) => {
                        let _ = std::fs::remove_file(path);
                    }
                }
                let _guard = done.lock.lock().unwrap_or_else(|e| e.into_inner());
                done.finished.fetch_add(1, Ordering::Release);
                done.progress.notify_all();
            }
        })
        .expect("start the file medium's writer thread");
    (sender, thread)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cd-file-writer-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn writes_land_in_order_and_removals_follow_their_writes() {
        let dir = scratch("order");
        let w = FileWriter::default();
        for i in 0..200u32 {
            let path = dir.join(format!("{}.bin", i % 7));
            w.write(path, i.to_le_bytes().repeat(1000), format!("entry {i}"));
        }
        w.remove(dir.join("6.bin"));
        w.wait();
        for k in 0..6u32 {
            let last = (0..200u32).filter(|i| i % 7 == k).max().unwrap();
            let got = std::fs::read(dir.join(format!("{k}.bin"))).unwrap();
            assert_eq!(
                got,
                last.to_le_bytes().repeat(1000),
                "file {k} holds the last write"
            );
        }
        assert!(!dir.join("6.bin").exists(), "removed after its writes");
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_write_ends_the_rank_at_the_next_wait_naming_the_file() {
        let dir = scratch("fail");
        std::fs::create_dir_all(&dir).unwrap();
        // A regular file where a directory should be: the write cannot create its file.
        let blocker = dir.join("not-a-dir");
        std::fs::write(&blocker, b"x").unwrap();
        let w = FileWriter::default();
        w.write(
            blocker.join("a.bin"),
            vec![1; 10],
            "CD \"step\", entry `x`".into(),
        );
        let message = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wait()))
            .expect_err("the failure ends the rank");
        let message = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(message.contains("CD \"step\", entry `x`"), "{message}");
        assert!(message.contains("not-a-dir"), "{message}");
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_idle_writer_starts_no_thread_and_waits_for_nothing() {
        let w = FileWriter::default();
        w.wait();
        assert!(w.queue.borrow().is_none());
    }
}
