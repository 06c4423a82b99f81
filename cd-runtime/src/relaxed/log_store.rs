//! The log store of one CD: its entries in LSN order, the part spilled to files, and the
//! queries replay and the serving of incoming-write requests need.
//!
//! A store is a list of *segments*, each either entries in memory or a postcard file of
//! entries, oldest first. Pushing a completed child's store into its parent appends the
//! child's segments (all its LSNs are newer than the parent's entries so far); spilling turns
//! the oldest in-memory segments into files. Reading a store back gives the entries in LSN
//! order whatever mix of memory and files holds them.
//!
//! A spilled file is created in the job's private directory, exclusively, at mode 0600
//! (`private_files.rs`), and ends with the checksum of its entries (`checksum.rs`): a file
//! changed on disk is an error naming it ([`SpillReadError::Corrupted`]), so a recovery
//! escalates instead of replaying it.

use std::path::{Path, PathBuf};

use gasnet_bridge::AtomicOp;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::buddy::Bytes;
use crate::checksum;
use crate::private_files;

/// Why a spilled log file cannot be read back.
#[derive(Debug, Error)]
pub enum SpillReadError {
    /// The file could not be opened or read.
    #[error("cannot read the spilled log {}: {source}", path.display())]
    Io {
        /// The spilled file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file's bytes are not those written.
    #[error(
        "the spilled log {} {}: it changed on disk after it was written, so it is not \
         replayed",
        path.display(),
        checksum::FAILED
    )]
    Corrupted {
        /// The spilled file.
        path: PathBuf,
    },
    /// The file's checksum holds but its entries do not decode.
    #[error("the spilled log {} does not decode: {reason}", path.display())]
    Decode {
        /// The spilled file.
        path: PathBuf,
        /// What the decoder said.
        reason: String,
    },
}

/// The entries of the spilled file `path`, if its checksum holds.
fn read_spilled(path: &Path) -> Result<Vec<LogEntry>, SpillReadError> {
    use std::io::Read;
    let mut stored = Vec::new();
    private_files::open_file(path)
        .and_then(|mut file| file.read_to_end(&mut stored))
        .map_err(|source| SpillReadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    let bytes = checksum::verified(&stored).ok_or_else(|| SpillReadError::Corrupted {
        path: path.to_path_buf(),
    })?;
    postcard::from_bytes(bytes).map_err(|e| SpillReadError::Decode {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Writes `entries` to the new file `path` (it must not exist), their checksum after them.
fn write_spilled(path: &Path, entries: &[LogEntry]) -> std::io::Result<()> {
    use std::io::Write;
    let mut encoded = postcard::to_allocvec(entries).map_err(std::io::Error::other)?;
    let sum = checksum::trailer(&encoded);
    encoded.extend_from_slice(&sum);
    private_files::create_file(path)?.write_all(&encoded)
}

/// The target's counters for a write, from its ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetCounters {
    /// The target's EC when the write landed.
    pub ec: u64,
    /// The target's IWC after counting the write.
    pub iwc: u64,
}

/// A remote atomic operation, as logged (gasnet-bridge's `AtomicOp` has no serde).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LoggedOp {
    /// Read.
    Load,
    /// Replace with the value.
    Store(u64),
    /// Replace, fetch the old value.
    Swap(u64),
    /// Wrapping add.
    FetchAdd(u64),
    /// Wrapping subtract.
    FetchSub(u64),
    /// Compare and exchange.
    CompareExchange(u64, u64),
    /// Unsigned minimum.
    Min(u64),
    /// Unsigned maximum.
    Max(u64),
    /// Signed minimum.
    MinI64(i64),
    /// Signed maximum.
    MaxI64(i64),
    /// Bitwise and.
    And(u64),
    /// Bitwise or.
    Or(u64),
    /// Bitwise xor.
    Xor(u64),
}

impl From<AtomicOp> for LoggedOp {
    fn from(op: AtomicOp) -> Self {
        match op {
            AtomicOp::Load => LoggedOp::Load,
            AtomicOp::Store(v) => LoggedOp::Store(v),
            AtomicOp::Swap(v) => LoggedOp::Swap(v),
            AtomicOp::FetchAdd(v) => LoggedOp::FetchAdd(v),
            AtomicOp::FetchSub(v) => LoggedOp::FetchSub(v),
            AtomicOp::CompareExchange { current, new } => LoggedOp::CompareExchange(current, new),
            AtomicOp::Min(v) => LoggedOp::Min(v),
            AtomicOp::Max(v) => LoggedOp::Max(v),
            AtomicOp::MinI64(v) => LoggedOp::MinI64(v),
            AtomicOp::MaxI64(v) => LoggedOp::MaxI64(v),
            AtomicOp::And(v) => LoggedOp::And(v),
            AtomicOp::Or(v) => LoggedOp::Or(v),
            AtomicOp::Xor(v) => LoggedOp::Xor(v),
        }
    }
}

impl From<LoggedOp> for AtomicOp {
    fn from(op: LoggedOp) -> Self {
        match op {
            LoggedOp::Load => AtomicOp::Load,
            LoggedOp::Store(v) => AtomicOp::Store(v),
            LoggedOp::Swap(v) => AtomicOp::Swap(v),
            LoggedOp::FetchAdd(v) => AtomicOp::FetchAdd(v),
            LoggedOp::FetchSub(v) => AtomicOp::FetchSub(v),
            LoggedOp::CompareExchange(current, new) => AtomicOp::CompareExchange { current, new },
            LoggedOp::Min(v) => AtomicOp::Min(v),
            LoggedOp::Max(v) => AtomicOp::Max(v),
            LoggedOp::MinI64(v) => AtomicOp::MinI64(v),
            LoggedOp::MaxI64(v) => AtomicOp::MaxI64(v),
            LoggedOp::And(v) => AtomicOp::And(v),
            LoggedOp::Or(v) => AtomicOp::Or(v),
            LoggedOp::Xor(v) => AtomicOp::Xor(v),
        }
    }
}

impl LoggedOp {
    /// True for an operation whose replay on top of its own effect changes the result
    /// (docs/relaxed-cds.md: "combining" writes). Store and swap replace, and are idempotent.
    pub fn is_combining(self) -> bool {
        !matches!(
            self,
            LoggedOp::Load | LoggedOp::Store(_) | LoggedOp::Swap(_)
        )
    }
}

/// What one log entry records (docs/relaxed-cds.md, "Forward execution: logging").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryKind {
    /// A remote write (rput) at its initiator: target, address, bytes; the target's counters
    /// once the ack arrived.
    Write {
        /// Target rank.
        target: usize,
        /// Byte offset in the target's segment.
        offset: usize,
        /// The bytes written.
        bytes: Bytes,
        /// From the ack (`None` until it arrives).
        counters: Option<TargetCounters>,
    },
    /// A remote read (rget) at its requestor: the bytes that came back.
    Read {
        /// Source rank.
        source: usize,
        /// Byte offset in the source's segment.
        offset: usize,
        /// The bytes read.
        bytes: Bytes,
    },
    /// A remote atomic: the write (with the target's counters when it wrote) and the read
    /// (the previous value).
    Atomic {
        /// Target rank.
        target: usize,
        /// Byte offset of the word.
        offset: usize,
        /// The operation.
        op: LoggedOp,
        /// The word's value before it.
        previous: Option<u64>,
        /// The target's counters when it wrote (`None`: not yet, or it wrote nothing).
        counters: Option<TargetCounters>,
        /// True once the completion arrived.
        done: bool,
    },
    /// An rpc: the request (a write the target counts) and the reply (a read).
    Rpc {
        /// Target rank.
        target: usize,
        /// Registered name of the function.
        name: String,
        /// Serialized arguments.
        args: Bytes,
        /// Serialized reply (empty for `rpc_ff`), once it arrived.
        reply: Option<Bytes>,
        /// An `rpc_ff`: the target's function result was not sent back, so `reply` is no
        /// result to compare a replayed request's with.
        fire_and_forget: bool,
        /// The target's counters when it ran the request.
        counters: Option<TargetCounters>,
    },
    /// A `DistObject::fetch`: the fetched bytes.
    Fetch {
        /// The rank whose instance was read.
        rank: usize,
        /// The object's id.
        object: u64,
        /// Postcard bytes of the instance, once they arrived.
        bytes: Option<Bytes>,
    },
    /// A collective's result on this rank (its synchronization is EC steps, not logged).
    Collective {
        /// Postcard bytes of the result, once it completed.
        result: Option<Bytes>,
        /// A barrier (its result is empty): a dependency-limited re-execution runs it among
        /// the re-executing ranks instead of serving it.
        barrier: bool,
        /// The team's id.
        team: u64,
        /// Every member of the team got the same result (all but `reduce_one`): another
        /// member's log can serve it to a rank whose log is lost.
        shared: bool,
    },
    /// A `cd::rng()` draw (the bytes drawn).
    Rng {
        /// The drawn bytes.
        bytes: Bytes,
    },
    /// An allocation's returned address.
    Alloc {
        /// Offset in this rank's segment.
        offset: usize,
        /// Size in bytes.
        size: usize,
    },
    /// A privatized region's final bytes, logged once at the CD's completion as one write to
    /// its owner (this rank), with the owner's counters at that moment.
    Privatized {
        /// Offset in this rank's segment.
        offset: usize,
        /// The region's bytes at completion.
        bytes: Bytes,
        /// This rank's counters at completion.
        counters: TargetCounters,
    },
}

/// One log entry: its LSN, the initiator's EC when it was made, and what it records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Per-rank log sequence number, in program order.
    pub lsn: u64,
    /// The initiator's EC at the operation.
    pub ec: u64,
    /// The pgas operation id (to pair the completion with its start); 0 when none.
    pub op: u64,
    /// Set when an rpc function serving another rank's request started the operation (not the
    /// body): that request's IWC at this rank. A recovery that replays the request refuses
    /// such functions (their operations cannot be matched in LSN order).
    pub request: Option<u64>,
    /// What it records.
    pub kind: EntryKind,
}

impl EntryKind {
    /// The rank and the bytes of its segment the operation wrote or, for an atomic, read (an
    /// rpc: all of them, its function may touch any; `None`: no other rank's segment, or a
    /// read, whose bytes are not there when it is noted).
    pub(crate) fn extent(&self) -> Option<(usize, std::ops::Range<usize>)> {
        match self {
            EntryKind::Write {
                target,
                offset,
                bytes,
                ..
            } => Some((*target, *offset..*offset + bytes.0.len())),
            EntryKind::Atomic { target, offset, .. } => Some((*target, *offset..*offset + 8)),
            EntryKind::Rpc { target, .. } => Some((*target, 0..usize::MAX)),
            _ => None,
        }
    }
}

// What a replay serves for an operation when the log's next entry records that same
// operation (`None`: it records something else, the re-execution diverged). Shared by the
// recovery of a relaxed CD and by a dependency-limited re-execution.
impl LogEntry {
    /// A put to `rank` at `offset`: the logged bytes.
    pub fn put_to(&self, rank: usize, offset: usize) -> Option<&[u8]> {
        match &self.kind {
            EntryKind::Write {
                target,
                offset: o,
                bytes,
                ..
            } if *target == rank && *o == offset => Some(&bytes.0),
            _ => None,
        }
    }

    /// A get of `len` bytes from `rank` at `offset`: the bytes that came back.
    pub fn read_from(&self, rank: usize, offset: usize, len: usize) -> Option<&[u8]> {
        match &self.kind {
            EntryKind::Read {
                source,
                offset: o,
                bytes,
            } if *source == rank && *o == offset && bytes.0.len() == len => Some(&bytes.0),
            _ => None,
        }
    }

    /// An rpc `name` to `rank`: the logged arguments and the reply (empty for `rpc_ff`).
    pub fn rpc_to(&self, rank: usize, name: &str) -> Option<(&[u8], Vec<u8>)> {
        match &self.kind {
            EntryKind::Rpc {
                target,
                name: n,
                args,
                reply,
                ..
            } if *target == rank && n == name => {
                Some((&args.0, reply.clone().map(|r| r.0).unwrap_or_default()))
            }
            _ => None,
        }
    }

    /// An atomic `op` on `rank` at `offset`: the previous value and the target's counters.
    pub fn atomic_on(
        &self,
        rank: usize,
        offset: usize,
        op: LoggedOp,
    ) -> Option<(u64, Option<TargetCounters>)> {
        match &self.kind {
            EntryKind::Atomic {
                target,
                offset: o,
                op: lop,
                previous,
                counters,
                ..
            } if *target == rank && *o == offset && *lop == op => {
                Some((previous.unwrap_or(0), *counters))
            }
            _ => None,
        }
    }

    /// A fetch of `object` from `rank`: the fetched bytes.
    pub fn fetch_of(&self, rank: usize, object: u64) -> Option<Vec<u8>> {
        match &self.kind {
            EntryKind::Fetch {
                rank: r,
                object: o,
                bytes,
            } if *r == rank && *o == object => Some(bytes.clone().map(|b| b.0).unwrap_or_default()),
            _ => None,
        }
    }

    /// A collective: its result.
    pub fn collective_result(&self) -> Option<Vec<u8>> {
        match &self.kind {
            EntryKind::Collective { result, .. } => {
                Some(result.clone().map(|b| b.0).unwrap_or_default())
            }
            _ => None,
        }
    }

    /// An rng draw of `len` bytes: the bytes drawn.
    pub fn rng_of(&self, len: usize) -> Option<&[u8]> {
        match &self.kind {
            EntryKind::Rng { bytes } if bytes.0.len() == len => Some(&bytes.0),
            _ => None,
        }
    }

    /// True once the operation's completion (ack, reply, result) is in the entry.
    pub fn is_complete(&self) -> bool {
        is_complete(self)
    }

    /// Bytes this entry holds, for the spill threshold and the report.
    pub fn size(&self) -> usize {
        let payload = match &self.kind {
            EntryKind::Write { bytes, .. } | EntryKind::Read { bytes, .. } => bytes.0.len(),
            EntryKind::Rpc { args, reply, .. } => {
                args.0.len() + reply.as_ref().map_or(0, |r| r.0.len())
            }
            EntryKind::Fetch { bytes, .. } => bytes.as_ref().map_or(0, |b| b.0.len()),
            EntryKind::Collective { result, .. } => result.as_ref().map_or(0, |b| b.0.len()),
            EntryKind::Rng { bytes } | EntryKind::Privatized { bytes, .. } => bytes.0.len(),
            EntryKind::Atomic { .. } | EntryKind::Alloc { .. } => 16,
        };
        payload + 32
    }

    /// If this entry is a write into `target` whose counters are known: (EC, IWC).
    pub fn write_into(&self, target: usize) -> Option<TargetCounters> {
        match &self.kind {
            EntryKind::Write {
                target: t,
                counters,
                ..
            }
            | EntryKind::Atomic {
                target: t,
                counters,
                ..
            }
            | EntryKind::Rpc {
                target: t,
                counters,
                ..
            } if *t == target => *counters,
            _ => None,
        }
    }

    /// True if this is a write into `target` whose ack has not arrived yet.
    pub fn pending_write_into(&self, target: usize) -> bool {
        match &self.kind {
            EntryKind::Write {
                target: t,
                counters,
                ..
            }
            | EntryKind::Rpc {
                target: t,
                counters,
                ..
            } => *t == target && counters.is_none(),
            EntryKind::Atomic {
                target: t, done, ..
            } => *t == target && !done,
            _ => false,
        }
    }
}

/// A run of entries, in memory or in a file.
#[derive(Debug)]
enum Segment {
    Mem(Vec<LogEntry>),
    /// A postcard file of `Vec<LogEntry>` with `count` entries, then its checksum.
    File {
        path: PathBuf,
        count: usize,
    },
}

/// The log store of one CD.
#[derive(Debug, Default)]
pub struct LogStore {
    segments: Vec<Segment>,
    /// Bytes of the entries held in memory.
    mem_bytes: usize,
    /// Entries in all segments.
    count: usize,
}

impl LogStore {
    /// Appends an entry (its LSN is newer than every entry so far).
    pub fn push(&mut self, e: LogEntry) {
        self.mem_bytes += e.size();
        self.count += 1;
        if let Some(Segment::Mem(v)) = self.segments.last_mut() {
            v.push(e);
        } else {
            self.segments.push(Segment::Mem(vec![e]));
        }
    }

    /// Entries in the store (memory and files).
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when the store holds nothing.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes held in memory.
    #[cfg(test)]
    pub fn mem_bytes(&self) -> usize {
        self.mem_bytes
    }

    /// Entries spilled to files.
    #[cfg(test)]
    pub fn spilled(&self) -> usize {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::File { count, .. } => *count,
                Segment::Mem(_) => 0,
            })
            .sum()
    }

    /// The newest in-memory entry made by operation `op`, to complete it with its ack (a
    /// completion may arrive after later operations started, so search from the end).
    pub fn find_op_mut(&mut self, op: u64) -> Option<&mut LogEntry> {
        for s in self.segments.iter_mut().rev() {
            if let Segment::Mem(v) = s {
                if let Some(e) = v.iter_mut().rev().find(|e| e.op == op) {
                    return Some(e);
                }
            }
        }
        None
    }

    /// Appends a completed child's store (push to parent): its entries are all newer.
    pub fn append(&mut self, mut child: LogStore) {
        self.mem_bytes += child.mem_bytes;
        self.count += child.count;
        self.segments.append(&mut child.segments);
    }

    /// Past `limit` bytes in memory, writes the oldest in-memory entries to a postcard file
    /// in `dir` (named `stem`-n.log) until at most half the limit stays in memory. The newest
    /// segment stays in memory: its entries may still wait for their acks.
    pub fn maybe_spill(&mut self, limit: usize, dir: &Path, stem: &str) -> std::io::Result<usize> {
        if self.mem_bytes <= limit {
            return Ok(0);
        }
        // Merge the in-memory entries into one run, then cut off the oldest ones.
        let mut all = Vec::new();
        let mut rest = Vec::new();
        let mut spilled = 0;
        for s in self.segments.drain(..) {
            match s {
                Segment::Mem(v) => all.extend(v),
                f @ Segment::File { .. } => {
                    if !all.is_empty() {
                        rest.push(Segment::Mem(std::mem::take(&mut all)));
                    }
                    rest.push(f);
                }
            }
        }
        // Keep entries whose completion is still to come (no counters yet) in memory.
        let mut cut = 0;
        let mut bytes = 0;
        let target = self.mem_bytes - limit / 2;
        while cut < all.len() && bytes < target && is_complete(&all[cut]) {
            bytes += all[cut].size();
            cut += 1;
        }
        let newer = all.split_off(cut);
        if !all.is_empty() {
            private_files::create_dir(dir)?;
            let n = rest.len();
            let path = dir.join(format!("{stem}-{}-{n}.log", all[0].lsn));
            write_spilled(&path, &all)?;
            spilled = all.len();
            rest.push(Segment::File {
                path,
                count: all.len(),
            });
            self.mem_bytes -= bytes;
        }
        if !newer.is_empty() {
            rest.push(Segment::Mem(newer));
        }
        self.segments = rest;
        Ok(spilled)
    }

    /// Every entry in LSN order, reading spilled files back.
    pub fn entries(&self) -> Result<Vec<LogEntry>, SpillReadError> {
        let mut out = Vec::with_capacity(self.count);
        for s in &self.segments {
            match s {
                Segment::Mem(v) => out.extend(v.iter().cloned()),
                Segment::File { path, .. } => out.extend(read_spilled(path)?),
            }
        }
        Ok(out)
    }

    /// The entries from index `start` on, in LSN order (reading spilled files back).
    pub fn entries_from(&self, start: usize) -> Result<Vec<LogEntry>, SpillReadError> {
        let mut out = Vec::with_capacity(self.count.saturating_sub(start));
        let mut index = 0;
        for s in &self.segments {
            let n = match s {
                Segment::Mem(v) => v.len(),
                Segment::File { count, .. } => *count,
            };
            if index + n > start {
                match s {
                    Segment::Mem(v) => out.extend(v[start.saturating_sub(index)..].iter().cloned()),
                    Segment::File { path, .. } => out.extend(
                        read_spilled(path)?
                            .into_iter()
                            .skip(start.saturating_sub(index)),
                    ),
                }
            }
            index += n;
        }
        Ok(out)
    }

    /// Calls `f` on every entry in LSN order (reading spilled files back one at a time).
    pub fn for_each(&self, mut f: impl FnMut(&LogEntry)) -> Result<(), SpillReadError> {
        for s in &self.segments {
            match s {
                Segment::Mem(v) => v.iter().for_each(&mut f),
                Segment::File { path, .. } => read_spilled(path)?.iter().for_each(&mut f),
            }
        }
        Ok(())
    }

    /// Deletes every entry and spilled file (a strict CD completed: all communication inside
    /// it is contained).
    pub fn clear(&mut self) {
        for s in self.segments.drain(..) {
            if let Segment::File { path, .. } = s {
                let _ = std::fs::remove_file(path);
            }
        }
        self.mem_bytes = 0;
        self.count = 0;
    }
}

impl Drop for LogStore {
    fn drop(&mut self) {
        self.clear();
    }
}

fn is_complete(e: &LogEntry) -> bool {
    match &e.kind {
        EntryKind::Write { counters, .. } => counters.is_some(),
        EntryKind::Rpc { reply, .. } => reply.is_some(),
        EntryKind::Atomic { done, .. } => *done,
        EntryKind::Fetch { bytes, .. } => bytes.is_some(),
        EntryKind::Collective { result, .. } => result.is_some(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(lsn: u64, n: usize) -> LogEntry {
        LogEntry {
            lsn,
            ec: lsn / 3,
            op: lsn,
            request: None,
            kind: EntryKind::Write {
                target: 1,
                offset: 8 * lsn as usize,
                bytes: Bytes(vec![lsn as u8; n]),
                counters: Some(TargetCounters { ec: 4, iwc: lsn }),
            },
        }
    }

    #[test]
    fn spilled_logs_read_back_equal() {
        let dir = std::env::temp_dir().join(format!("cd-log-test-{}", std::process::id()));
        let mut parent = LogStore::default();
        let mut expect = Vec::new();
        for lsn in 0..10 {
            parent.push(write(lsn, 100));
            expect.push(write(lsn, 100));
        }
        assert!(parent.maybe_spill(500, &dir, "p").unwrap() > 0);
        assert!(parent.spilled() > 0 && parent.mem_bytes() <= 500);
        let mut child = LogStore::default();
        for lsn in 10..40 {
            child.push(write(lsn, 50));
            expect.push(write(lsn, 50));
            child.maybe_spill(400, &dir, "c").unwrap();
        }
        parent.append(child);
        assert_eq!(parent.len(), 40);
        assert_eq!(
            parent.entries().unwrap(),
            expect,
            "LSN order across files and memory"
        );
        for start in [0, 3, 9, 10, 25, 39, 40] {
            assert_eq!(
                parent.entries_from(start).unwrap(),
                expect[start..],
                "entries from {start} (a replication ships the ones not shipped before)"
            );
        }
        let mut lsns = Vec::new();
        parent.for_each(|e| lsns.push(e.lsn)).unwrap();
        assert_eq!(lsns, (0..40).collect::<Vec<_>>());
        let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(!files.is_empty());
        parent.clear();
        assert!(parent.is_empty());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "clear deletes the files"
        );
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn a_flipped_byte_in_a_spilled_log_is_refused_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("cd-log-test3-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut s = LogStore::default();
        for lsn in 0..10 {
            s.push(write(lsn, 100));
        }
        assert!(s.maybe_spill(500, &dir, "f").unwrap() > 0);
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        crate::file_medium::flip_bit(&file, 40);
        let name = file.display().to_string();
        for e in [
            s.entries().unwrap_err(),
            s.entries_from(0).unwrap_err(),
            s.for_each(|_| {}).unwrap_err(),
        ] {
            assert!(matches!(e, SpillReadError::Corrupted { .. }), "{e}");
            let text = e.to_string();
            assert!(
                text.contains(&name) && text.contains(checksum::FAILED),
                "{text}"
            );
            assert!(!text.contains('\n'), "one line: {text}");
        }
        s.clear();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_spill_is_the_owners_alone_and_does_not_follow_a_planted_symlink() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("cd-log-test4-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim.txt");
        std::fs::write(&victim, b"precious").unwrap();
        // The name the first spill of stem "p" takes (LSN 0, segment 0).
        std::os::unix::fs::symlink(&victim, dir.join("p-0-0.log")).unwrap();
        let mut s = LogStore::default();
        for lsn in 0..10 {
            s.push(write(lsn, 100));
        }
        let e = s.maybe_spill(500, &dir, "p").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let mut s = LogStore::default();
        for lsn in 0..10 {
            s.push(write(lsn, 100));
        }
        assert!(s.maybe_spill(500, &dir, "q").unwrap() > 0);
        let spilled = dir.join("q-0-0.log");
        let mode = std::fs::metadata(&spilled).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", spilled.display());
        s.clear();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pending_entries_stay_in_memory() {
        let dir = std::env::temp_dir().join(format!("cd-log-test2-{}", std::process::id()));
        let mut s = LogStore::default();
        let mut e = write(0, 1000);
        if let EntryKind::Write { counters, .. } = &mut e.kind {
            *counters = None;
        }
        s.push(e);
        s.push(write(1, 1000));
        assert_eq!(s.maybe_spill(10, &dir, "x").unwrap(), 0);
        assert!(s.find_op_mut(0).is_some());
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn combining_ops() {
        assert!(LoggedOp::FetchAdd(1).is_combining());
        assert!(!LoggedOp::Store(1).is_combining());
        assert!(!LoggedOp::Swap(1).is_combining());
    }
}
