//! The checkpoint writer: one background thread per process (per launch) that writes what
//! the checkpointed CD's completions hand it, in order. The ranks of the process each hand over
//! their captured state; once every one of them has, the thread writes them as one **part**:
//! one file holding their states one after another, and its copy in the buddy's directory, made
//! durable by one round of concurrent `fsync`s. Rank 0's writer then commits the manifest
//! (write-then-rename) and deletes the checkpoints no longer kept. Every job has a [`Ticket`]
//! the rank waits on only when it needs the result. See `README.md` beside this file.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{IoSlice, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::checkpoint::format::{
    MANIFEST, MANIFEST_TMP, Manifest, RankFile, buddy_file, own_file, parse_checkpoint_name,
};
use crate::private_files;
use crate::resume::{Piece, entry_pieces, write_entries};

/// Where a rank's state went in a part made durable, what the manifest records of it, and
/// what the writer spent on the part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct RankWritten {
    /// The rank whose directory holds the part (the part's lowest rank).
    pub(crate) part: usize,
    /// The rank whose directory holds the part's copy.
    pub(crate) buddy: usize,
    /// Bytes of the part's file.
    pub(crate) file_len: u64,
    /// Where this rank's state begins in it.
    pub(crate) offset: u64,
    /// Bytes of this rank's state.
    pub(crate) len: u64,
    /// CRC-32 of this rank's state.
    pub(crate) crc: u32,
    /// Bytes written for the part (the file and its copy), on the part's lowest rank only (0
    /// on the others, so that a sum over ranks counts each part once).
    pub(crate) bytes: u64,
    /// Nanoseconds from the part's first write to its last `fsync`, on the part's lowest rank
    /// only.
    pub(crate) ns: u64,
}

/// What a queued job gives back: where the rank's state went, or why it could not be written.
pub(crate) type Written = Result<RankWritten, String>;

impl From<&RankWritten> for RankFile {
    fn from(w: &RankWritten) -> RankFile {
        RankFile {
            part: w.part,
            buddy: w.buddy,
            file_len: w.file_len,
            offset: w.offset,
            len: w.len,
            crc: w.crc,
        }
    }
}

/// The result of one queued job, once the thread has done it.
#[derive(Default)]
pub(crate) struct Ticket {
    done: Mutex<Option<Written>>,
    ready: Condvar,
    /// A node-local part's bytes, for its lead rank to send to the buddy (`transfer.rs`).
    payload: Mutex<Option<Vec<u8>>>,
}

impl Ticket {
    /// The bytes of the node-local part this ticket's rank leads, once: set before the
    /// ticket is done, taken by the rank that sends them to the part's buddy.
    pub(crate) fn take_payload(&self) -> Option<Vec<u8>> {
        self.payload
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    fn set(&self, w: Written) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(w);
        self.ready.notify_all();
    }

    /// True once the job is done.
    pub(crate) fn is_done(&self) -> bool {
        self.done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Waits for the job's result. On a rank, `serve` runs every millisecond meanwhile (the
    /// rank's communication progress: other ranks may need it while this one waits).
    pub(crate) fn wait(&self, mut serve: impl FnMut()) -> Written {
        let mut g = self.done.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(w) = g.as_ref() {
                return w.clone();
            }
            g = self
                .ready
                .wait_timeout(g, Duration::from_millis(1))
                .unwrap_or_else(|e| e.into_inner())
                .0;
            if g.is_none() {
                drop(g);
                serve();
                g = self.done.lock().unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}

/// One rank's hand-over: its captured entries for the checkpoint `dir`.
struct Handed {
    buddy: usize,
    /// The part's copy goes to the buddy over the network (node-local directories): the
    /// writer writes the part alone and hands its bytes to the lead's ticket.
    remote: bool,
    entries: BTreeMap<String, Vec<u8>>,
    ticket: Arc<Ticket>,
}

/// One queued piece of work.
enum Job {
    /// Rank `rank`'s state for the checkpoint `dir` (its copy goes to rank `buddy`'s
    /// directory when `rank` is the lowest rank of the part).
    Rank {
        dir: PathBuf,
        rank: usize,
        handed: Handed,
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
    /// Writes `bytes`, the part rank `part` leads, as its copy in rank `buddy`'s directory of
    /// the checkpoint `dir` (received over the network: node-local directories).
    Copy {
        dir: PathBuf,
        part: usize,
        buddy: usize,
        bytes: Vec<u8>,
        ticket: Arc<Ticket>,
    },
}

/// The process's checkpoint writer (shared by the ranks of the process).
pub(crate) struct CheckpointWriter {
    queue: Mutex<Option<(Sender<Job>, JoinHandle<()>)>>,
    /// How many ranks of this process hand over their state (each joins before the first CD).
    ranks: Arc<AtomicUsize>,
    /// Those ranks: a rank whose body runs again after a lost process (`REAL_LOSS.md`) joins
    /// again, and must not count twice (the writer would wait for a second hand-over).
    joined: Mutex<BTreeSet<usize>>,
    /// The lowest of them: the process's directory of a node-local checkpoint is named by it.
    lead: AtomicUsize,
}

impl CheckpointWriter {
    /// A writer whose thread starts with its first job.
    pub(crate) fn new() -> Self {
        CheckpointWriter {
            queue: Mutex::new(None),
            ranks: Arc::new(AtomicUsize::new(0)),
            joined: Mutex::new(BTreeSet::new()),
            lead: AtomicUsize::new(usize::MAX),
        }
    }

    /// Counts rank `rank` of this process among those whose states make a part. Every rank
    /// that shares the writer joins before any rank hands over (launch's barrier is between).
    pub(crate) fn join(&self, rank: usize) {
        let mut joined = self.joined.lock().unwrap_or_else(|e| e.into_inner());
        if joined.insert(rank) {
            self.ranks.fetch_add(1, Ordering::SeqCst);
        }
        self.lead.fetch_min(rank, Ordering::SeqCst);
    }

    /// The lowest rank of this process (once every rank has joined).
    pub(crate) fn lead(&self) -> usize {
        self.lead.load(Ordering::SeqCst)
    }

    fn submit(&self, job: Job) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let (sender, _) = q.get_or_insert_with(|| start(self.ranks.clone()));
        // The thread only ends when its queue closes (`finish`), so the send cannot fail while
        // the writer is alive; a job sent after `finish` has nobody to wait for it.
        let _ = sender.send(job);
    }

    /// Queues rank `rank`'s captured `entries` for the checkpoint `dir` (`buddy`: the rank
    /// whose directory keeps the copy of a part this rank leads).
    /// `remote`: the copy travels to the buddy over the network instead (node-local
    /// directories; the lead's ticket then holds the part's bytes).
    pub(crate) fn write_rank(
        &self,
        dir: PathBuf,
        rank: usize,
        buddy: usize,
        remote: bool,
        entries: BTreeMap<String, Vec<u8>>,
    ) -> Arc<Ticket> {
        let ticket = Arc::new(Ticket::default());
        self.submit(Job::Rank {
            dir,
            rank,
            handed: Handed {
                buddy,
                remote,
                entries,
                ticket: ticket.clone(),
            },
        });
        ticket
    }

    /// Queues the copy `bytes` of the part rank `part` leads, received by rank `buddy`, for
    /// the checkpoint `dir` (in this process's own directory).
    pub(crate) fn write_copy(
        &self,
        dir: PathBuf,
        part: usize,
        buddy: usize,
        bytes: Vec<u8>,
    ) -> Arc<Ticket> {
        let ticket = Arc::new(Ticket::default());
        self.submit(Job::Copy {
            dir,
            part,
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

    /// Ends the thread after its queued jobs (a part some rank never handed its state to is
    /// not written: the job ended before that checkpoint could be whole).
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

/// Niceness of the writer thread: it yields the cores to the ranks' computation, which it
/// only needs for copying and checksumming (its time goes to waiting for the disk).
const WRITER_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority to [`WRITER_NICE`] (Linux: per thread).
#[allow(unsafe_code)]
fn lower_priority() {
    // SAFETY: setpriority takes three integers and touches no memory of ours; `who = 0` is
    // the calling thread on Linux. Failing (a sandbox forbids it) leaves the priority as is.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, WRITER_NICE);
    }
}

fn start(ranks: Arc<AtomicUsize>) -> (Sender<Job>, JoinHandle<()>) {
    let (sender, jobs) = channel::<Job>();
    let thread = std::thread::Builder::new()
        .name("cd-checkpoint-writer".into())
        .spawn(move || {
            lower_priority();
            let mut state = State::default();
            for job in jobs {
                state.run(job, ranks.load(Ordering::SeqCst).max(1));
            }
            state.settle();
        })
        .expect("start the checkpoint writer thread");
    (sender, thread)
}

/// A commit renamed into place whose rename is not durable yet: made durable by the next
/// commit's round of `fsync`s (or at the end), and only then counted among the checkpoints
/// kept, so that the older ones are deleted only once a newer commit is on disk for sure.
struct Unsettled {
    dir: PathBuf,
    cd: String,
    iteration: u64,
    keep: usize,
}

/// What the writer thread keeps between jobs.
#[derive(Default)]
struct State {
    /// Hand-overs waiting for the other ranks of the process, by checkpoint directory.
    parts: BTreeMap<PathBuf, BTreeMap<usize, Handed>>,
    /// The last commit, until its rename is durable.
    unsettled: Option<Unsettled>,
}

impl State {
    /// Does `job`; a rank's hand-over waits until every one of the process's `ranks` has
    /// handed over for the same checkpoint.
    fn run(&mut self, job: Job, ranks: usize) {
        match job {
            Job::Rank { dir, rank, handed } => {
                let part = self.parts.entry(dir.clone()).or_default();
                part.insert(rank, handed);
                if part.len() >= ranks {
                    let part = self.parts.remove(&dir).expect("inserted above");
                    write_part(&dir, part);
                }
            }
            Job::Commit {
                dir,
                manifest,
                keep,
                ticket,
            } => {
                let before = self.unsettled.take();
                let out = commit(&dir, &manifest, before.as_ref().map(|u| u.dir.as_path()));
                if let Some(u) = before {
                    // Durable now (the commit's round of fsyncs made it so), or the commit
                    // failed before: either way the older ones may go only if it is whole.
                    if out.is_ok() {
                        prune_before(&u);
                    } else {
                        self.unsettled = Some(u);
                    }
                }
                if out.is_ok() {
                    self.unsettled = Some(Unsettled {
                        dir,
                        cd: manifest.cd.clone(),
                        iteration: manifest.iteration,
                        keep,
                    });
                }
                ticket.set(out.map(|()| RankWritten::default()));
            }
            Job::Discard { dir, ticket } => {
                remove_checkpoint(&dir);
                ticket.set(Ok(RankWritten::default()));
            }
            Job::Copy {
                dir,
                part,
                buddy,
                bytes,
                ticket,
            } => ticket.set(write_copy(&dir, part, buddy, &bytes)),
        }
    }

    /// Makes the last commit's rename durable and deletes the checkpoints it leaves beyond
    /// `keep` (the end of the writer).
    fn settle(&mut self) {
        if let Some(u) = self.unsettled.take() {
            let mut dirs = vec![Durable::Dir(&u.dir)];
            if let Some(root) = u.dir.parent() {
                dirs.push(Durable::Dir(root));
            }
            if sync_together(dirs).is_ok() {
                prune_before(&u);
            }
        }
    }
}

/// Deletes, after the durable commit `u`, the checkpoints of its CD beyond its `keep`.
fn prune_before(u: &Unsettled) {
    if let Some(root) = u.dir.parent() {
        prune(root, &u.cd, u.iteration, u.keep);
    }
}

/// Writes the states of `part` (by rank) as one file in the directory of its lowest rank and
/// its copy in that rank's buddy's directory, makes both durable, and answers every rank.
/// The states are laid out once as pieces borrowed from the entries ([`part_pieces`]), and
/// each file is written from them by a few `writev` calls, handing its pages to the disk as
/// it goes ([`write_pieces`]), one file after the other on the writer thread: a second thread
/// would only add a runnable thread at the writer's low priority beside the ranks'
/// computation, and wait for a core. Only then
/// are the files and their directories `fsync`ed, in one concurrent round: the file system
/// commits the round together (one journal commit on ext4), where a directory's `fsync`
/// racing the files' writes would commit its entry alone and leave the files' data to a
/// second commit.
fn write_part(dir: &Path, part: BTreeMap<usize, Handed>) {
    let (&lead, first) = part.iter().next().expect("a part has a rank");
    if first.remote {
        return write_part_alone(dir, lead, part);
    }
    let start = Instant::now();
    let buddy = first.buddy;
    let own = own_file(dir, lead);
    let copy = buddy_file(dir, lead, buddy);
    let out: Result<(Vec<Placed>, u64), String> = create_new(&own)
        .and_then(|a| create_new(&copy).map(|b| (a, b)))
        .and_then(|(a, b)| {
            let pieces = part_pieces(&part);
            let placed = place(&pieces);
            write_pieces(&a, &pieces).map_err(|e| describe(&own, e))?;
            write_pieces(&b, &pieces).map_err(|e| describe(&copy, e))?;
            let mut items = vec![
                Durable::File(&own, a),
                Durable::File(&copy, b),
                Durable::Dir(own.parent().expect("in a rank directory")),
            ];
            if copy.parent() != own.parent() {
                items.push(Durable::Dir(copy.parent().expect("in a rank directory")));
            }
            sync_together(items)?;
            let len = placed.last().map_or(0, |&(_, offset, len, _)| offset + len);
            Ok((placed, len))
        });
    let ns = start.elapsed().as_nanos() as u64;
    let file_len = out.as_ref().map_or(0, |(_, l)| *l);
    answer(&part, lead, buddy, &out, 2 * file_len, ns);
}

/// Answers every rank of `part` (led by `lead`, copied to `buddy`): where its state is in
/// the written part, or why the part could not be written. `bytes`: what the writer made
/// durable for the part; `ns`: how long it took.
fn answer(
    part: &BTreeMap<usize, Handed>,
    lead: usize,
    buddy: usize,
    out: &Result<(Vec<Placed>, u64), String>,
    bytes: u64,
    ns: u64,
) {
    for (&r, h) in part {
        let w = match out {
            Err(why) => Err(why.clone()),
            Ok((placed, file_len)) => {
                let &(_, offset, len, crc) = placed
                    .iter()
                    .find(|p| p.0 == r)
                    .expect("every rank of a written part is placed");
                Ok(RankWritten {
                    part: lead,
                    buddy,
                    file_len: *file_len,
                    offset,
                    len,
                    crc,
                    bytes: if r == lead { bytes } else { 0 },
                    ns: if r == lead { ns } else { 0 },
                })
            }
        };
        h.ticket.set(w);
    }
}

/// A node-local part (`README.md` beside this file, "Node-local directories"): the states of
/// `part` encoded once into memory, written as the part's file in the lead's directory and
/// made durable with every directory entry up to the checkpoint root (no other process makes
/// this process's directories durable); the bytes go to the lead's ticket, which its rank sends
/// to the buddy. The copy's write is the buddy's, so `bytes` counts the part's file twice only
/// once the buddy acknowledged it (`transfer.rs`).
fn write_part_alone(dir: &Path, lead: usize, part: BTreeMap<usize, Handed>) {
    let start = Instant::now();
    let buddy = part[&lead].buddy;
    let own = own_file(dir, lead);
    let mut bytes = Vec::new();
    let mut placed = Vec::with_capacity(part.len());
    for (&r, h) in &part {
        let offset = bytes.len() as u64;
        let _ = write_entries(&h.entries, |piece| {
            bytes.extend_from_slice(piece);
            Ok::<(), std::io::Error>(())
        });
        let len = bytes.len() as u64 - offset;
        let crc = crc32fast::hash(&bytes[offset as usize..]);
        placed.push((r, offset, len, crc));
    }
    let out = write_new(&own, &[&bytes]).and_then(|f| {
        let rank_dir = own.parent().expect("in a rank directory");
        let mut items = vec![
            Durable::File(&own, f),
            Durable::Dir(rank_dir),
            Durable::Dir(dir),
        ];
        if let Some(root) = dir.parent() {
            items.push(Durable::Dir(root));
        }
        sync_together(items)?;
        Ok((placed, bytes.len() as u64))
    });
    let ns = start.elapsed().as_nanos() as u64;
    if out.is_ok() {
        *part[&lead]
            .ticket
            .payload
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(bytes);
    }
    let file_len = out.as_ref().map_or(0, |(_, l)| *l);
    answer(&part, lead, buddy, &out, 2 * file_len, ns);
}

/// Writes `bytes`, the copy of the part `part` leads, received over the network by its buddy
/// `buddy`, into `buddy`'s directory of the checkpoint `dir`, durable with every directory
/// entry up to the checkpoint root.
fn write_copy(dir: &Path, part: usize, buddy: usize, bytes: &[u8]) -> Written {
    let start = Instant::now();
    let copy = buddy_file(dir, part, buddy);
    let f = write_new(&copy, &[bytes])?;
    let rank_dir = copy.parent().expect("in a rank directory");
    let mut items = vec![
        Durable::File(&copy, f),
        Durable::Dir(rank_dir),
        Durable::Dir(dir),
    ];
    if let Some(root) = dir.parent() {
        items.push(Durable::Dir(root));
    }
    sync_together(items)?;
    Ok(RankWritten {
        part,
        buddy,
        file_len: bytes.len() as u64,
        bytes: bytes.len() as u64,
        ns: start.elapsed().as_nanos() as u64,
        ..RankWritten::default()
    })
}

/// Where a rank's state is in a part: (rank, offset, length, CRC-32).
type Placed = (usize, u64, u64, u32);

/// The pieces of the states of `part`, rank after rank, each with its rank (the entries'
/// bytes borrowed, not copied).
fn part_pieces(part: &BTreeMap<usize, Handed>) -> Vec<(usize, Piece<'_>)> {
    part.iter()
        .flat_map(|(&r, h)| entry_pieces(&h.entries).into_iter().map(move |p| (r, p)))
        .collect()
}

/// Where each rank's state is in the file `pieces` make, in rank order.
fn place(pieces: &[(usize, Piece<'_>)]) -> Vec<Placed> {
    let mut placed: Vec<Placed> = Vec::new();
    let mut crc = crc32fast::Hasher::new();
    let mut offset = 0u64;
    for (rank, piece) in pieces {
        if placed.last().is_none_or(|p| p.0 != *rank) {
            if let Some(last) = placed.last_mut() {
                last.3 = std::mem::take(&mut crc).finalize();
            }
            placed.push((*rank, offset, 0, 0));
        }
        let bytes = piece.bytes();
        crc.update(bytes);
        placed.last_mut().expect("pushed above").2 += bytes.len() as u64;
        offset += bytes.len() as u64;
    }
    if let Some(last) = placed.last_mut() {
        last.3 = crc.finalize();
    }
    placed
}

/// Bytes written between two hand-overs of a file's pages to the disk.
const WRITEBACK_CHUNK: u64 = 4 << 20;

/// Buffers one `writev` call takes at most (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Writes `pieces` one after another into the new file `f` by `writev` calls of up to
/// [`WRITEBACK_CHUNK`] bytes, a state's many small pieces costing no call each, and hands
/// the pages of each call to the disk at once, so that the disk works while the rest is
/// written and the `fsync` that follows waits for the last pages only.
fn write_pieces(mut f: &File, pieces: &[(usize, Piece<'_>)]) -> std::io::Result<()> {
    let mut written = 0u64;
    let mut rest = pieces;
    while !rest.is_empty() {
        let mut n = 0;
        let mut bytes = 0u64;
        while n < rest.len().min(IOV_MAX)
            && (n == 0 || bytes + rest[n].1.bytes().len() as u64 <= WRITEBACK_CHUNK)
        {
            bytes += rest[n].1.bytes().len() as u64;
            n += 1;
        }
        let mut slices: Vec<IoSlice<'_>> = rest[..n]
            .iter()
            .map(|(_, p)| IoSlice::new(p.bytes()))
            .collect();
        let mut left = &mut slices[..];
        while !left.is_empty() {
            match f.write_vectored(left) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(k) => IoSlice::advance_slices(&mut left, k),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        start_writeback(f, written, bytes);
        written += bytes;
        rest = &rest[n..];
    }
    Ok(())
}

/// Starts the write-back of `len` bytes of `f` from `offset` without waiting for it (Linux's
/// `sync_file_range` with `SYNC_FILE_RANGE_WRITE`); elsewhere it does nothing.
#[allow(unsafe_code)]
fn start_writeback(f: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if len == 0 {
            return;
        }
        // SAFETY: sync_file_range reads and writes no memory of ours: it takes a descriptor,
        // open for the call's duration because `f` is borrowed, and three integers. Its
        // failure (a file system without it) only loses the head start: the `fsync` that
        // follows writes every page anyway.
        unsafe {
            libc::sync_file_range(
                f.as_raw_fd(),
                offset as libc::off64_t,
                len as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (f, offset, len);
}

/// An error of the file `path`, as one line naming it.
fn describe(path: &Path, e: std::io::Error) -> String {
    format!("{}: {e}", path.display())
}

/// Creates the new file `path` (0600, its directory too; a stale file of the same name
/// unlinked first, no symbolic link followed).
fn create_new(path: &Path) -> Result<File, String> {
    if let Some(parent) = path.parent() {
        private_files::create_dir(parent).map_err(|e| describe(path, e))?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(describe(path, e)),
        _ => {}
    }
    private_files::create_file(path).map_err(|e| describe(path, e))
}

/// Writes `pieces` one after another as the new file `path` ([`create_new`]), not yet
/// durable.
fn write_new(path: &Path, pieces: &[&[u8]]) -> Result<File, String> {
    let mut f = create_new(path)?;
    for p in pieces {
        f.write_all(p).map_err(|e| describe(path, e))?;
    }
    Ok(f)
}

/// Writes `bytes` as the new file `path` ([`write_new`]) and `fsync`s it (the tests' files).
#[cfg(test)]
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let f = write_new(path, &[bytes])?;
    sync_together(vec![Durable::File(path, f)])
}

/// Something to make durable: a written file, or a directory whose entries changed.
enum Durable<'a> {
    File(&'a Path, File),
    Dir(&'a Path),
}

/// `fsync`s every item, all at once from threads of their own: the file system commits
/// concurrent `fsync`s together (one journal commit for all on ext4), where one after another
/// each waits for a commit of its own.
fn sync_together(items: Vec<Durable<'_>>) -> Result<(), String> {
    let sync = |item: Durable<'_>| -> Result<(), String> {
        match item {
            Durable::File(path, f) => f
                .sync_all()
                .map_err(|e| format!("{}: fsync: {e}", path.display())),
            Durable::Dir(path) => std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
                .open(path)
                .and_then(|d| d.sync_all())
                .map_err(|e| format!("{}: fsync of the directory: {e}", path.display())),
        }
    };
    if items.len() == 1 {
        return items.into_iter().try_for_each(sync);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .into_iter()
            .map(|item| s.spawn(move || sync(item)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("fsync thread panicked".into()))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .collect::<Result<(), String>>()
    })
}

/// Commits the checkpoint `dir` (`README.md` beside this file, "Durability"): every file the
/// manifest names is durable already (its part's round of `fsync`s, before its ticket said
/// so). The manifest is written to a temporary name and made durable in one round of
/// `fsync`s with the checkpoint directory (its rank directories' entries), its parent (the
/// checkpoint directory's entry) and the previous commit's directory (`previous`: its rename),
/// then renamed: the checkpoint is whole from the rename on.
fn commit(dir: &Path, manifest: &Manifest, previous: Option<&Path>) -> Result<(), String> {
    let tmp = dir.join(MANIFEST_TMP);
    let f = write_new(&tmp, &[manifest.to_text().as_bytes()])?;
    let mut round = vec![Durable::File(&tmp, f), Durable::Dir(dir)];
    let root = dir.parent();
    if let Some(root) = root {
        round.push(Durable::Dir(root));
    }
    if let Some(p) = previous.filter(|p| *p != dir) {
        round.push(Durable::Dir(p));
        if let Some(proot) = p.parent().filter(|r| Some(*r) != root) {
            round.push(Durable::Dir(proot));
        }
    }
    sync_together(round)?;
    let path = dir.join(MANIFEST);
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))
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
    use crate::checkpoint::format::{FORMAT_VERSION, checkpoint_dir};
    use crate::resume::{decode_entries, encode_entries};
    use std::os::unix::fs::MetadataExt;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cd-ckpt-writer-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn entries(tag: u8) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([("x".to_string(), vec![tag; 5])])
    }

    fn manifest(iteration: u64, w: &RankWritten) -> Manifest {
        Manifest {
            version: FORMAT_VERSION,
            program: "t".into(),
            seed: "0x0".into(),
            ranks: 1,
            cd: "step".into(),
            level: 1,
            iteration,
            step: iteration,
            rank: vec![RankFile::from(w)],
        }
    }

    #[test]
    fn files_are_private_commits_rename_and_old_ones_go() {
        let root = scratch("commit");
        let w = CheckpointWriter::new();
        w.join(0);
        for it in [10u64, 20, 30] {
            let dir = checkpoint_dir(&root, "step", it);
            let t = w.write_rank(dir.clone(), 0, 0, false, entries(1));
            let got = t.wait(|| {}).unwrap();
            let bytes = encode_entries(&entries(1));
            assert_eq!(
                (got.part, got.offset, got.len, got.crc, got.bytes),
                (
                    0,
                    0,
                    bytes.len() as u64,
                    crc32fast::hash(&bytes),
                    2 * bytes.len() as u64
                )
            );
            assert!(!dir.join(MANIFEST).exists(), "not whole before its commit");
            w.commit(dir.clone(), manifest(it, &got), 2)
                .wait(|| {})
                .unwrap();
            assert_eq!(Manifest::read(&dir).unwrap(), manifest(it, &got));
        }
        // The last commit's rename is not durable until the next commit (or the end): the
        // older one it would replace stays until then.
        let kept: Vec<u64> = list(&root, "step").iter().map(|(i, ..)| *i).collect();
        assert_eq!(kept, vec![10, 20, 30], "keep = 2 durable ones and the last");
        // An abandoned one newer than the last commit stays (it may be being written).
        let abandoned = checkpoint_dir(&root, "step", 40);
        w.write_rank(abandoned.clone(), 0, 0, false, entries(2))
            .wait(|| {})
            .unwrap();
        drop(w);
        let kept: Vec<u64> = list(&root, "step").iter().map(|(i, ..)| *i).collect();
        assert_eq!(kept, vec![20, 30, 40], "keep = 2 whole ones");
        let f = own_file(&checkpoint_dir(&root, "step", 30), 0);
        assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o777, 0o600);
        let d = f.parent().unwrap();
        assert_eq!(std::fs::metadata(d).unwrap().mode() & 0o777, 0o700);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_ranks_of_a_process_make_one_part_and_its_copy() {
        let root = scratch("part");
        let w = CheckpointWriter::new();
        for r in 0..3 {
            w.join(r);
        }
        let dir = checkpoint_dir(&root, "step", 5);
        // Handed over in any order; the part waits for all three.
        let tickets: Vec<(usize, Arc<Ticket>)> = [2usize, 0, 1]
            .into_iter()
            .map(|r| (r, w.write_rank(dir.clone(), r, 1, false, entries(r as u8))))
            .collect();
        let got: Vec<(usize, RankWritten)> = tickets
            .into_iter()
            .map(|(r, t)| (r, t.wait(|| {}).unwrap()))
            .collect();
        let file = std::fs::read(own_file(&dir, 0)).unwrap();
        assert_eq!(std::fs::read(buddy_file(&dir, 0, 1)).unwrap(), file);
        let mut total_bytes = 0;
        for (r, got) in got {
            assert_eq!(
                (got.part, got.buddy, got.file_len),
                (0, 1, file.len() as u64)
            );
            let range = got.offset as usize..(got.offset + got.len) as usize;
            assert_eq!(crc32fast::hash(&file[range.clone()]), got.crc);
            assert_eq!(decode_entries(&file[range]).unwrap(), entries(r as u8));
            total_bytes += got.bytes;
        }
        assert_eq!(
            total_bytes,
            2 * file.len() as u64,
            "counted once, on rank 0"
        );
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            2,
            "rank 0's directory and rank 1's (the copy)"
        );
        drop(w);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_rank_that_joins_again_after_a_rerun_counts_once() {
        let root = scratch("rejoin");
        let w = CheckpointWriter::new();
        // The body ran, a lost process made it run again: the rank joins a second time.
        w.join(0);
        w.join(0);
        let dir = checkpoint_dir(&root, "step", 7);
        let t = w.write_rank(dir.clone(), 0, 0, false, entries(3));
        // One hand-over makes the part: the writer does not wait for a second one.
        let got = t.wait(|| {}).expect("written");
        let file = std::fs::read(own_file(&dir, 0)).unwrap();
        assert_eq!(got.file_len, file.len() as u64);
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
