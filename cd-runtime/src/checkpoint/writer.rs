//! The checkpoint writer: one background thread per process (per launch) that writes what
//! the checkpointed CD's completions hand it, in order: rank files (own and buddy copy,
//! `fsync`ed), then rank 0's manifest (write-then-rename) and the deletion of checkpoints no
//! longer kept. Every job has a [`Ticket`] the rank waits on only when it needs the result
//! (the next completion, the end of the job). See `README.md` beside this file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::checkpoint::format::{
    MANIFEST, MANIFEST_TMP, Manifest, buddy_file, own_file, parse_checkpoint_name,
};
use crate::private_files;

/// A rank file made durable: what the manifest records of it, and what the writer spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct FileWritten {
    /// Bytes of the file.
    pub(crate) len: u64,
    /// CRC-32 of the file.
    pub(crate) crc: u32,
    /// Bytes written for it (the file and its buddy copy).
    pub(crate) bytes: u64,
    /// Nanoseconds from the first write to the last `fsync`.
    pub(crate) ns: u64,
}

/// What a queued job gives back: the file written, or why it failed.
pub(crate) type Written = Result<FileWritten, String>;

/// The result of one queued job, once the thread has done it.
#[derive(Default)]
pub(crate) struct Ticket {
    done: Mutex<Option<Written>>,
    ready: Condvar,
}

impl Ticket {
    fn set(&self, w: Written) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(w);
        self.ready.notify_all();
    }

    /// Waits for the job's result.
    pub(crate) fn wait(&self) -> Written {
        let mut g = self.done.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(w) = g.as_ref() {
                return w.clone();
            }
            g = self.ready.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// One queued piece of work.
enum Job {
    /// Rank `rank`'s file into the checkpoint `dir`, and its copy into rank `buddy`'s
    /// directory there.
    Rank {
        dir: PathBuf,
        rank: usize,
        buddy: usize,
        bytes: Vec<u8>,
        ticket: Arc<Ticket>,
    },
    /// Commits the checkpoint `dir` with `manifest`, then keeps the `keep` newest whole
    /// checkpoints of the same CD in its parent (and deletes abandoned older ones).
    Commit {
        dir: PathBuf,
        manifest: Box<Manifest>,
        keep: usize,
        ticket: Arc<Ticket>,
    },
    /// Deletes the checkpoint `dir` (one that could not be completed).
    Discard { dir: PathBuf, ticket: Arc<Ticket> },
}

/// The process's checkpoint writer (shared by the ranks of the process).
pub(crate) struct CheckpointWriter {
    queue: Mutex<Option<(Sender<Job>, JoinHandle<()>)>>,
}

impl CheckpointWriter {
    /// A writer whose thread starts with its first job.
    pub(crate) fn new() -> Self {
        CheckpointWriter {
            queue: Mutex::new(None),
        }
    }

    fn submit(&self, job: Job) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let (sender, _) = q.get_or_insert_with(start);
        if let Err(returned) = sender.send(job) {
            // The thread ended (it only does when its queue closes): do the job here.
            run(returned.0);
        }
    }

    /// Queues rank `rank`'s file for the checkpoint `dir` (and its copy at rank `buddy`).
    pub(crate) fn write_rank(
        &self,
        dir: PathBuf,
        rank: usize,
        buddy: usize,
        bytes: Vec<u8>,
    ) -> Arc<Ticket> {
        let ticket = Arc::new(Ticket::default());
        self.submit(Job::Rank {
            dir,
            rank,
            buddy,
            bytes,
            ticket: ticket.clone(),
        });
        ticket
    }

    /// Queues the commit of the checkpoint `dir`.
    pub(crate) fn commit(&self, dir: PathBuf, manifest: Manifest, keep: usize) -> Arc<Ticket> {
        let ticket = Arc::new(Ticket::default());
        self.submit(Job::Commit {
            dir,
            manifest: Box::new(manifest),
            keep,
            ticket: ticket.clone(),
        });
        ticket
    }

    /// Queues the deletion of the checkpoint `dir`.
    pub(crate) fn discard(&self, dir: PathBuf) -> Arc<Ticket> {
        let ticket = Arc::new(Ticket::default());
        self.submit(Job::Discard {
            dir,
            ticket: ticket.clone(),
        });
        ticket
    }

    /// Ends the thread after its queued jobs.
    pub(crate) fn finish(&self) {
        let q = self.queue.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((sender, thread)) = q {
            drop(sender);
            let _ = thread.join();
        }
    }
}

impl Drop for CheckpointWriter {
    fn drop(&mut self) {
        self.finish();
    }
}

fn start() -> (Sender<Job>, JoinHandle<()>) {
    let (sender, jobs) = channel::<Job>();
    let thread = std::thread::Builder::new()
        .name("cd-checkpoint-writer".into())
        .spawn(move || jobs.into_iter().for_each(run))
        .expect("start the checkpoint writer thread");
    (sender, thread)
}

fn run(job: Job) {
    match job {
        Job::Rank {
            dir,
            rank,
            buddy,
            bytes,
            ticket,
        } => {
            let start = Instant::now();
            let crc = crc32fast::hash(&bytes);
            let out = write_file(&own_file(&dir, rank), &bytes)
                .and_then(|()| write_file(&buddy_file(&dir, rank, buddy), &bytes))
                .map(|()| FileWritten {
                    len: bytes.len() as u64,
                    crc,
                    bytes: 2 * bytes.len() as u64,
                    ns: start.elapsed().as_nanos() as u64,
                });
            ticket.set(out);
        }
        Job::Commit {
            dir,
            manifest,
            keep,
            ticket,
        } => {
            let out = commit(&dir, &manifest).map(|()| {
                if let Some(root) = dir.parent() {
                    prune(root, &manifest.cd, manifest.iteration, keep);
                }
                FileWritten::default()
            });
            ticket.set(out);
        }
        Job::Discard { dir, ticket } => {
            remove_checkpoint(&dir);
            ticket.set(Ok(FileWritten::default()));
        }
    }
}

/// Writes `bytes` as the new file `path` (0600, a stale file of the same name unlinked first,
/// no symbolic link followed) and `fsync`s it.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let describe = |e: std::io::Error| format!("{}: {e}", path.display());
    if let Some(parent) = path.parent() {
        private_files::create_dir(parent).map_err(describe)?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(describe(e)),
        _ => {}
    }
    let mut f = private_files::create_file(path).map_err(describe)?;
    f.write_all(bytes).map_err(describe)?;
    f.sync_all().map_err(describe)
}

/// Writes the manifest to a temporary name, then renames it: the checkpoint is whole from the
/// rename on; the directory is `fsync`ed so that the rename survives a crash.
fn commit(dir: &Path, manifest: &Manifest) -> Result<(), String> {
    let tmp = dir.join(MANIFEST_TMP);
    write_file(&tmp, manifest.to_text().as_bytes())?;
    let path = dir.join(MANIFEST);
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// Deletes a checkpoint: its manifest first, so that a kill in the middle leaves it absent
/// rather than half there.
pub(crate) fn remove_checkpoint(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(MANIFEST));
    let _ = std::fs::remove_dir_all(dir);
}

/// The checkpoints of CD `cd` in `root`, by iteration, with whether each is whole.
pub(crate) fn list(root: &Path, cd: &str) -> Vec<(u64, PathBuf, bool)> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<(u64, PathBuf, bool)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            let (c, it) = parse_checkpoint_name(&name)?;
            if c != cd || !e.file_type().ok()?.is_dir() {
                return None;
            }
            let path = e.path();
            let whole = path.join(MANIFEST).is_file();
            Some((it, path, whole))
        })
        .collect();
    out.sort_by_key(|(it, ..)| *it);
    out
}

/// After committing `iteration`: keeps the `keep` newest whole checkpoints of `cd` up to it
/// and deletes the older ones, whole or abandoned.
fn prune(root: &Path, cd: &str, iteration: u64, keep: usize) {
    let older: Vec<(u64, PathBuf, bool)> = list(root, cd)
        .into_iter()
        .filter(|(it, ..)| *it <= iteration)
        .collect();
    let mut whole_seen = 0;
    for (_, path, whole) in older.into_iter().rev() {
        if whole && whole_seen < keep.max(1) {
            whole_seen += 1;
            continue;
        }
        remove_checkpoint(&path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::format::{FORMAT_VERSION, RankFile, checkpoint_dir};
    use std::os::unix::fs::MetadataExt;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cd-ckpt-writer-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn manifest(iteration: u64) -> Manifest {
        Manifest {
            version: FORMAT_VERSION,
            program: "t".into(),
            seed: "0x0".into(),
            ranks: 1,
            cd: "step".into(),
            level: 1,
            iteration,
            step: iteration,
            rank: vec![RankFile {
                len: 3,
                crc: crc32fast::hash(b"abc"),
                buddy: 0,
            }],
        }
    }

    #[test]
    fn files_are_private_commits_rename_and_old_ones_go() {
        let root = scratch("commit");
        let w = CheckpointWriter::new();
        for it in [10u64, 20, 30] {
            let dir = checkpoint_dir(&root, "step", it);
            let t = w.write_rank(dir.clone(), 0, 0, b"abc".to_vec());
            let w = t.wait().unwrap();
            assert_eq!((w.len, w.crc, w.bytes), (3, crc32fast::hash(b"abc"), 6));
            assert!(!dir.join(MANIFEST).exists(), "not whole before its commit");
            w.commit(dir.clone(), manifest(it), 2).wait().unwrap();
            assert_eq!(Manifest::read(&dir).unwrap(), manifest(it));
        }
        // An abandoned one newer than the last commit stays (it may be being written).
        let abandoned = checkpoint_dir(&root, "step", 40);
        w.write_rank(abandoned.clone(), 0, 0, b"x".to_vec())
            .wait()
            .unwrap();
        let kept: Vec<u64> = list(&root, "step").iter().map(|(i, ..)| *i).collect();
        assert_eq!(kept, vec![20, 30, 40], "keep = 2 whole ones");
        let f = own_file(&checkpoint_dir(&root, "step", 30), 0);
        assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o777, 0o600);
        let d = f.parent().unwrap();
        assert_eq!(std::fs::metadata(d).unwrap().mode() & 0o777, 0o700);
        drop(w);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_planted_symlink_is_replaced_not_followed() {
        let root = scratch("planted");
        std::fs::create_dir_all(&root).unwrap();
        let victim = root.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let path = root.join("rank0").join("state.bin");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        write_file(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert!(
            !std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
