//! The file medium's writer: preserved bytes go to disk on a thread of the rank's own, off
//! the critical path of the CD's body, into one arena file per CD nesting level.
//!
//! **Arenas, not a file per entry.** Creating, writing, closing and later unlinking one file
//! per preserved entry costs file system metadata on every preservation, far more than the
//! bytes of a small CD. A rank's CDs at one nesting level run one after another, so each
//! level gets one file, opened once: an entry is a slice of it ([`FileSlot`]), written with one
//! positioned write. When the last live entry of a level is released (its CD completed), the
//! level's next entry starts at offset 0 again, overwriting in place.
//!
//! **Off the critical path.** A preservation hands its bytes to the writer thread and
//! returns; the body runs on while the thread writes. What must see the bytes on disk waits
//! for the queue to drain ([`FileWriter::wait`]):
//!
//! - a restore from a file (the bytes may still be in the queue);
//! - the completion of a CD, before it releases its entries: a CD completes only with its
//!   preserved bytes written, so an enclosing CD that re-executes finds them there;
//! - the end of the rank, which joins the thread and removes the arena files.
//!
//! Writes run in queue order, so a slice reused after a reset is written after the bytes it
//! replaces. A write that fails ends the rank at the next preservation, restore or
//! completion, with a message naming the CD, the entry and the file (the synchronous write
//! did so at once). An emulated rank loss does not stop the thread: the disk outlives the
//! rank's memory.
//!
//! **Checked when read back.** Each entry is followed in its arena by its checksum
//! (`checksum.rs`, computed on the writer thread, off the critical path too); a read whose
//! bytes fail it is an error naming the file ([`FileReadError::Corrupted`]), which makes the CD
//! escalate before it would restore them (`frame::unreadable_files`). The files are created
//! in the job's private directory, exclusively, at mode 0600 (`private_files.rs`).
//!
//! Measured: `lulesh-bench` (`LULESH_BENCH=media`), `lulesh_medium_overhead` /
//! `file_s15_r8` against no CDs; see ROADMAP.md.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use thiserror::Error;

use crate::checksum;
use crate::private_files;

/// Why a file medium entry cannot be read back.
#[derive(Debug, Error)]
pub enum FileReadError {
    /// The file could not be opened or read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The arena file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The bytes read back are not the bytes written.
    #[error(
        "{} (bytes {offset}..{end}) {}: it changed on disk after it was written",
        path.display(),
        checksum::FAILED
    )]
    Corrupted {
        /// The arena file.
        path: PathBuf,
        /// Where the entry starts in it.
        offset: u64,
        /// Where the entry (and its checksum) ends.
        end: u64,
    },
}

/// One queued piece of work for the writer thread.
enum Job {
    /// Write `bytes` at `offset` of the arena file `path`; `what` names the CD and entry for
    /// an error message.
    Write {
        path: PathBuf,
        offset: u64,
        bytes: Vec<u8>,
        what: String,
    },
}

/// Where one preserved entry lies: a slice of its level's arena file (its bytes, then their
/// checksum).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileSlot {
    pub(crate) path: PathBuf,
    level: usize,
    offset: u64,
    len: usize,
}

/// The rank-side bookkeeping of one level's arena.
#[derive(Debug)]
struct Arena {
    path: PathBuf,
    /// Where the next entry goes.
    next: u64,
    /// Entries written and not released.
    live: usize,
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
pub(crate) struct FileWriter {
    dir: PathBuf,
    arenas: std::cell::RefCell<std::collections::BTreeMap<usize, Arena>>,
    queue: std::cell::RefCell<Option<(Sender<Job>, JoinHandle<()>)>>,
    submitted: std::cell::Cell<u64>,
    done: Arc<Done>,
}

impl FileWriter {
    /// A writer whose arena files go into `dir` (created on the first write).
    pub(crate) fn new(dir: PathBuf) -> Self {
        FileWriter {
            dir,
            arenas: Default::default(),
            queue: Default::default(),
            submitted: Default::default(),
            done: Default::default(),
        }
    }

    /// Queues `bytes` for the arena of CD nesting `level`; `what` names the CD and entry for
    /// errors. The slot says where they will be.
    pub(crate) fn write(&self, level: usize, bytes: Vec<u8>, what: String) -> FileSlot {
        self.check();
        let slot = {
            let mut arenas = self.arenas.borrow_mut();
            let arena = arenas.entry(level).or_insert_with(|| Arena {
                path: self.dir.join(format!("level{level}.bin")),
                next: 0,
                live: 0,
            });
            let slot = FileSlot {
                path: arena.path.clone(),
                level,
                offset: arena.next,
                len: bytes.len(),
            };
            arena.next += (bytes.len() + checksum::LEN) as u64;
            arena.live += 1;
            slot
        };
        self.submit(Job::Write {
            path: slot.path.clone(),
            offset: slot.offset,
            bytes,
            what,
        });
        slot
    }

    /// Releases `slot` (its CD completed, or the entry was preserved again); a level with no
    /// live slot starts over at offset 0.
    pub(crate) fn release(&self, slot: &FileSlot) {
        if let Some(arena) = self.arenas.borrow_mut().get_mut(&slot.level) {
            arena.live = arena.live.saturating_sub(1);
            if arena.live == 0 {
                arena.next = 0;
            }
        }
    }

    /// The bytes of `slot`, once every queued write is done, if their checksum holds.
    pub(crate) fn read(&self, slot: &FileSlot) -> Result<Vec<u8>, FileReadError> {
        use std::os::unix::fs::FileExt;
        self.wait();
        let mut bytes = vec![0u8; slot.len + checksum::LEN];
        private_files::open_file(&slot.path)
            .and_then(|file| file.read_exact_at(&mut bytes, slot.offset))
            .map_err(|source| FileReadError::Io {
                path: slot.path.clone(),
                source,
            })?;
        if checksum::verified(&bytes).is_none() {
            return Err(FileReadError::Corrupted {
                path: slot.path.clone(),
                offset: slot.offset,
                end: slot.offset + bytes.len() as u64,
            });
        }
        bytes.truncate(slot.len);
        Ok(bytes)
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

    /// Ends the writer at the end of the rank (also one that unwinds): joins the thread after
    /// its queued writes, then removes the arena files. Later writes start a new thread.
    pub(crate) fn finish(&self) {
        let queue = self.queue.borrow_mut().take();
        if let Some((sender, thread)) = queue {
            drop(sender);
            let _ = thread.join();
        }
        for arena in std::mem::take(&mut *self.arenas.borrow_mut()).values() {
            let _ = std::fs::remove_file(&arena.path);
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
        self.finish();
    }
}

/// Starts the writer thread of one rank.
fn start(done: Arc<Done>) -> (Sender<Job>, JoinHandle<()>) {
    let (sender, jobs) = channel::<Job>();
    let thread = std::thread::Builder::new()
        .name("cd-file-writer".into())
        .spawn(move || {
            let mut open: std::collections::HashMap<PathBuf, std::fs::File> = Default::default();
            for job in jobs {
                let Job::Write {
                    path,
                    offset,
                    bytes,
                    what,
                } = job;
                let result = match open.get(&path) {
                    Some(file) => write_checked(file, offset, &bytes),
                    None => path
                        .parent()
                        .map_or(Ok(()), private_files::create_dir)
                        .and_then(|()| private_files::create_file(&path))
                        .and_then(|file| {
                            write_checked(&file, offset, &bytes)?;
                            open.insert(path.clone(), file);
                            Ok(())
                        }),
                };
                if let Err(e) = result {
                    let mut failure = done.failure.lock().unwrap_or_else(|e| e.into_inner());
                    failure.get_or_insert_with(|| {
                        format!("{what}: cannot preserve to {}: {e}", path.display())
                    });
                }
                let _guard = done.lock.lock().unwrap_or_else(|e| e.into_inner());
                done.finished.fetch_add(1, Ordering::Release);
                done.progress.notify_all();
            }
        })
        .expect("start the file medium's writer thread");
    (sender, thread)
}

/// Writes `bytes` at `offset` of `file`, then their checksum right after them.
fn write_checked(file: &std::fs::File, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(bytes, offset)?;
    file.write_all_at(&checksum::trailer(bytes), offset + bytes.len() as u64)
}

/// Flips one bit at `offset` of the file `path` (tests of the checksum).
#[cfg(test)]
pub(crate) fn flip_bit(path: &std::path::Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    file.read_exact_at(&mut b, offset).unwrap();
    file.write_all_at(&[b[0] ^ 0x10], offset).unwrap();
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
    fn slots_read_back_and_a_released_level_is_reused_in_place() {
        let dir = scratch("order");
        let w = FileWriter::new(dir.clone());
        let mut last = Vec::new();
        for round in 0..50u32 {
            // Level 0 holds one long-lived entry; level 1 a CD's three entries per round.
            if round == 0 {
                let s = w.write(0, vec![7; 5000], "root".into());
                last.push((s, vec![7; 5000]));
            }
            let slots: Vec<(FileSlot, Vec<u8>)> = (0..3u32)
                .map(|k| {
                    let bytes = (round * 10 + k).to_le_bytes().repeat(100 + k as usize);
                    (w.write(1, bytes.clone(), format!("entry {k}")), bytes)
                })
                .collect();
            for (slot, bytes) in &slots {
                assert_eq!(&w.read(slot).unwrap(), bytes, "round {round}");
            }
            assert_eq!(
                slots[0].0.offset, 0,
                "the level starts over after a release"
            );
            slots.iter().for_each(|(s, _)| w.release(s));
        }
        let (root, bytes) = &last[0];
        assert_eq!(
            &w.read(root).unwrap(),
            bytes,
            "the live level-0 entry is intact"
        );
        let arena = dir.join("level1.bin");
        assert!(arena.exists());
        assert!(
            std::fs::metadata(&arena).unwrap().len() < 2_000,
            "reused in place, not appended"
        );
        drop(w);
        assert!(!arena.exists(), "the rank's end removes its arenas");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_write_ends_the_rank_at_the_next_wait_naming_the_file() {
        let dir = scratch("fail");
        std::fs::create_dir_all(&dir).unwrap();
        // A regular file where a directory should be: the write cannot create its file.
        let blocker = dir.join("not-a-dir");
        std::fs::write(&blocker, b"x").unwrap();
        let w = FileWriter::new(blocker.join("sub"));
        let _ = w.write(0, vec![1; 10], "CD \"step\", entry `x`".into());
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
    fn arenas_are_the_owners_alone_and_a_planted_symlink_is_not_followed() {
        use std::os::unix::fs::MetadataExt;
        let dir = scratch("planted");
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim.txt");
        std::fs::write(&victim, b"precious").unwrap();
        // Where the writer would put level 0's arena: a link to a file of the planter's choice.
        std::os::unix::fs::symlink(&victim, dir.join("level0.bin")).unwrap();
        let w = FileWriter::new(dir.clone());
        let _ = w.write(0, vec![9; 64], "CD \"step\", entry `x`".into());
        let message = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wait()))
            .expect_err("the planted link ends the rank");
        let message = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(message.contains("level0.bin"), "{message}");
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            b"precious",
            "not written through"
        );
        drop(w);
        let w = FileWriter::new(dir.join("rank0"));
        let slot = w.write(1, vec![5; 64], "CD \"inner\", entry `y`".into());
        w.wait();
        let mode = std::fs::metadata(&slot.path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", slot.path.display());
        let mode = std::fs::metadata(dir.join("rank0")).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "the rank's directory");
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_flipped_bit_is_refused_naming_the_file() {
        let dir = scratch("flip");
        let w = FileWriter::new(dir.clone());
        let a = w.write(0, vec![1; 100], "a".into());
        let b = w.write(0, vec![2; 100], "b".into());
        assert_eq!(w.read(&b).unwrap(), vec![2; 100]);
        flip_bit(&a.path, a.offset + 37);
        let e = w.read(&a).unwrap_err();
        assert!(matches!(e, FileReadError::Corrupted { .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains(&a.path.display().to_string()), "{text}");
        assert!(text.contains(checksum::FAILED), "{text}");
        assert_eq!(
            w.read(&b).unwrap(),
            vec![2; 100],
            "the next entry is intact"
        );
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_idle_writer_starts_no_thread_and_waits_for_nothing() {
        let w = FileWriter::new(scratch("idle"));
        w.wait();
        assert!(w.queue.borrow().is_none());
    }
}
