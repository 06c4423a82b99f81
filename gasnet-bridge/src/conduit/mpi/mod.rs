//! The mpi conduit: one process per rank, started by `mpirun` (cargo feature `mpi`).
//!
//! # Design
//!
//! * **Progress: the rank's own thread, `MPI_THREAD_SERIALIZED`.** Only the thread that runs the
//!   rank calls MPI; it makes progress whenever it polls, waits, or completes a blocking operation,
//!   exactly where the smp conduit would run handlers. Measured (Open MPI 4.1.4, 2 ranks on one
//!   2-core host, `bridge-bench --quick`): AM round trip 673-688 ns with `MPI_THREAD_SERIALIZED`,
//!   674 ns with `MPI_THREAD_MULTIPLE` (`PGAS_MPI_THREAD=multiple`): no gain from MULTIPLE, which
//!   only adds locking risk. A dedicated progress thread would add a thread hand-off to each
//!   direction of a round trip and, with 2 ranks on 2 cores, two more spinning threads competing
//!   for the cores, so it was not built. A rank that computes without polling delays the remote
//!   puts and AMs aimed at it, as in GASNet's mpi-conduit; RMA between ranks of one host never
//!   needs it (below).
//! * **RMA within a host: an MPI-3 shared-memory window.** Segments are allocated with
//!   `MPI_Win_allocate_shared` on the host's communicator, and every process maps the segments (and
//!   the EC/IWC counters, which sit in the page before each segment) of the ranks on its host. A
//!   put, get or atomic to such a rank is the smp conduit's code on that memory: a copy, then the
//!   target's IWC bumped with a release RMW; the ack carries the target's EC and that IWC value.
//!   `segment_base` works for these ranks.
//! * **RMA across hosts: over active messages**, as GASNet's mpi-conduit does: a put is a request
//!   carrying the bytes (inline up to [`INLINE_MAX`], else a second message received straight into
//!   the target segment), the target copies, counts the write and replies with its EC and the IWC
//!   value; gets and atomics likewise. MPI windows with `MPI_Put`+`MPI_Win_flush` were the
//!   alternative, but the ack must carry the IWC value *this* write produced after its bytes
//!   landed, which on a window costs a flush, an `MPI_Fetch_and_op` and a second flush: two round
//!   trips where the AM path needs one. `PGAS_MPI_PSHM=0` sends even same-host RMA and AMs this way
//!   (for measuring it on one machine): 8 B put 1780 ns and 4 MiB 3.0 GB/s against raw
//!   `MPI_Put`+flush 41 ns and 36.5 GB/s (Open MPI's osc/sm is itself shared memory there), while
//!   the shared-window path gives 3.3 ns and 47 GB/s; hence shared memory within a host, AMs only
//!   across hosts.
//! * **Active messages within a host: shared-memory rings** (GASNet's PSHM idea). Each rank's
//!   window also holds an inbox of one ring (`shm_ring.rs`) per rank of its host; a sender appends
//!   the encoded message to its ring in the target's inbox and the target takes it off while
//!   polling, as it would an MPI message. A long AM's payload is written straight into the target's
//!   segment first (as a put), so its handle completes at once. The ring bounds a flood (a sender
//!   without room makes internal progress until the target takes messages), and one ring per
//!   ordered pair keeps per-pair FIFO. The receiver watches the word where the next record will
//!   start, so a message moves only its own cache lines between cores. Measured on this 2-core
//!   machine, 2 ranks: see ROADMAP.md (the AM round trip and the rpc round trip against the raw MPI
//!   ping-pong, `PGAS_MPI_PSHM=0` for the MPI path). Each rank's window grows by `ranks on the host
//!   × 256 KiB`.
//! * **Active messages across hosts: non-blocking point-to-point with bounded, pre-posted
//!   buffers.** Each process keeps [`SLOTS`] receives of [`EAGER`] bytes posted and handles them in
//!   arrival order (per-pair FIFO, which pgas relies on); a slot taken off the wire is posted again
//!   at the start of the next progress round, after the handlers it fed have run, which keeps the
//!   re-post off the round trip's latency path. Requests issued outside handlers spend a credit
//!   toward their target ([`CREDITS`] per pair); the target returns credits as it takes messages
//!   off the wire (piggybacked on any message back, or in a credit message after half of them), and
//!   a sender without credits makes progress until some return. So a flood from one rank occupies
//!   at most `CREDITS` messages at its target, never an unbounded MPI unexpected-message queue.
//!   Replies and messages sent inside handlers do not wait for credits (a handler cannot wait), as
//!   GASNet reserves reply buffers.
//! * **Internal versus user progress.** The conduit's own messages (put/get/atomic requests, acks,
//!   credits, payloads) are handled whenever MPI is progressed, including while a blocking put
//!   waits and inside handlers; user AM handlers run only from `poll`/`wait_until` outside
//!   handlers, in order. Blocking operations therefore never run user handlers, as on smp, and may
//!   be used inside handlers.
//! * **Barrier:** `MPI_Ibarrier`, tested while polling. **End of job:** waves of `MPI_Iallreduce`
//!   over (messages sent, messages handled) until two consecutive waves agree and balance (the
//!   four-counter method), serving AMs meanwhile.
//! * **Topology:** host names are gathered at start-up; ranks are numbered host by host (the job
//!   communicator is split with that key), so each host is a contiguous range of ranks. A node is a
//!   host; with `PGAS_MPI_PSHM=0` every rank is a node of its own, since no segment of another rank
//!   is mapped (so pgas's `local_team` and `is_local` stay true).
//! * **Failures:** see `watchdog.rs`. MPI calls use `MPI_ERRORS_RETURN`; errors come back as
//!   [`BridgeError::Conduit`] where the caller can act, and end the rank (reported to the others)
//!   where it cannot, inside progress.

pub mod baseline;
mod process;
pub(crate) use process::world_shape;
mod shm_ring;
mod watchdog;

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::ffi::{CString, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ::mpi::ffi;

use crate::active_message::{Args, Body, HandlerTable, MAX_ARGS, Message};
use crate::atomic::{AtomicOp, AtomicResult};
use crate::completion::WriteHandle;
use crate::conduit::Conduit;
use crate::config::LaunchConfig;
use crate::counters::{WriteAck, WriteCounters};
use crate::endpoint::Endpoint;
use crate::error::{BridgeError, LaunchError};
use crate::failure::{PeerFailure, panic_message};
use crate::segment::Segment;
use crate::sleep::Backoff;
use crate::topology::Topology;

use process::{JOB_ACTIVE, POISONED, check};
use shm_ring::{RING_BYTES, Ring};
use watchdog::{Shared, Watchdog};

/// Pre-posted receive buffers per process.
pub const SLOTS: usize = 64;
/// Size of one pre-posted buffer: header, arguments and an inline payload.
pub const EAGER: usize = 8 << 10;
/// Bytes of the fixed message header.
const HDR: usize = 56;
/// Largest payload carried inside the message itself; larger ones follow as a second message
/// received directly into its destination.
pub const INLINE_MAX: usize = EAGER - HDR - 8 * MAX_ARGS;
/// Requests one rank may have outstanding toward another before it waits for credits.
pub const CREDITS: u32 = 32;
const PAGE: usize = 4096;

const TAG_MSG: c_int = 1;
const TAG_PAYLOAD: c_int = 2;
const TAG_GET: c_int = 3;

const K_AM: u8 = 1;
const K_PUT: u8 = 2;
const K_GET: u8 = 3;
const K_ATOMIC: u8 = 4;
const K_ACK: u8 = 5;
const K_ATOMIC_REPLY: u8 = 6;
const K_CREDIT: u8 = 7;

/// The message spent a credit of its sender.
const F_CREDIT: u8 = 1;
/// The payload follows as a separate message on `TAG_PAYLOAD`.
const F_SEPARATE: u8 = 2;
/// An AM reply.
const F_REPLY: u8 = 4;
/// A long AM whose payload the sender wrote into the target's segment through shared memory;
/// `c` and `d` carry the write's EC and IWC.
const F_PLACED: u8 = 8;

const B_SHORT: u8 = 0;
const B_MEDIUM: u8 = 1;
const B_LONG: u8 = 2;

/// The fixed part of every message on `TAG_MSG`; `a..d` mean what the kind says.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Header {
    kind: u8,
    nargs: u8,
    flags: u8,
    body: u8,
    handler: u16,
    /// Credits the sender returns to the receiver.
    credits: u32,
    id: u64,
    a: u64,
    b: u64,
    c: u64,
    d: u64,
}

impl Header {
    #[cfg(test)]
    fn encode(&self, args: &[u64], inline: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode_into(&mut v, args, inline);
        v
    }

    /// The header of a user AM: its handler, reply flag, body kind and payload length.
    fn am(message: &Message, body: &OutBody<'_>) -> Header {
        let (body, len) = match body {
            OutBody::Short => (B_SHORT, 0),
            OutBody::Medium(p) => (B_MEDIUM, p.len()),
            OutBody::Long { payload, .. } => (B_LONG, payload.len()),
        };
        Header {
            kind: K_AM,
            flags: if message.is_reply { F_REPLY } else { 0 },
            handler: message.handler,
            body,
            b: len as u64,
            ..Header::default()
        }
    }

    /// Bytes of the message with `nargs` arguments and `inline` payload bytes.
    fn encoded_len(nargs: usize, inline: usize) -> usize {
        HDR + 8 * nargs + inline
    }

    /// Replaces `v`'s contents with the message's bytes, reusing its allocation.
    fn encode_into(&self, v: &mut Vec<u8>, args: &[u64], inline: &[u8]) {
        v.clear();
        v.resize(Header::encoded_len(args.len(), inline.len()), 0);
        self.write(v, args, inline);
    }

    /// Writes the message into `out`, which is exactly [`Header::encoded_len`] bytes long.
    fn write(&self, out: &mut [u8], args: &[u64], inline: &[u8]) {
        out[..4].copy_from_slice(&[self.kind, args.len() as u8, self.flags, self.body]);
        out[4..6].copy_from_slice(&self.handler.to_le_bytes());
        out[6..8].fill(0);
        out[8..12].copy_from_slice(&self.credits.to_le_bytes());
        out[12..16].fill(0);
        for (i, w) in [self.id, self.a, self.b, self.c, self.d].iter().enumerate() {
            out[16 + 8 * i..24 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        for (i, w) in args.iter().enumerate() {
            out[HDR + 8 * i..HDR + 8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
        out[HDR + 8 * args.len()..].copy_from_slice(inline);
    }

    /// Splits a received message into header, arguments and inline payload.
    fn decode(bytes: &[u8]) -> Option<(Header, Args, &[u8])> {
        if bytes.len() < HDR {
            return None;
        }
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let nargs = bytes[1] as usize;
        let args_end = HDR + 8 * nargs;
        if nargs > MAX_ARGS || bytes.len() < args_end {
            return None;
        }
        let mut words = [0u64; MAX_ARGS];
        for (i, w) in words.iter_mut().take(nargs).enumerate() {
            *w = word(HDR + 8 * i);
        }
        let h = Header {
            kind: bytes[0],
            nargs: nargs as u8,
            flags: bytes[2],
            body: bytes[3],
            handler: u16::from_le_bytes([bytes[4], bytes[5]]),
            credits: u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")),
            id: word(16),
            a: word(24),
            b: word(32),
            c: word(40),
            d: word(48),
        };
        let args = Args::new(&words[..nargs]).ok()?;
        Some((h, args, &bytes[args_end..]))
    }
}

fn encode_op(op: AtomicOp) -> (u64, u64, u64) {
    match op {
        AtomicOp::Load => (0, 0, 0),
        AtomicOp::Store(v) => (1, v, 0),
        AtomicOp::Swap(v) => (2, v, 0),
        AtomicOp::FetchAdd(v) => (3, v, 0),
        AtomicOp::FetchSub(v) => (4, v, 0),
        AtomicOp::CompareExchange { current, new } => (5, current, new),
        AtomicOp::Min(v) => (6, v, 0),
        AtomicOp::Max(v) => (7, v, 0),
        AtomicOp::MinI64(v) => (8, v as u64, 0),
        AtomicOp::MaxI64(v) => (9, v as u64, 0),
        AtomicOp::And(v) => (10, v, 0),
        AtomicOp::Or(v) => (11, v, 0),
        AtomicOp::Xor(v) => (12, v, 0),
    }
}

fn decode_op(code: u64, x: u64, y: u64) -> Option<AtomicOp> {
    Some(match code {
        0 => AtomicOp::Load,
        1 => AtomicOp::Store(x),
        2 => AtomicOp::Swap(x),
        3 => AtomicOp::FetchAdd(x),
        4 => AtomicOp::FetchSub(x),
        5 => AtomicOp::CompareExchange { current: x, new: y },
        6 => AtomicOp::Min(x),
        7 => AtomicOp::Max(x),
        8 => AtomicOp::MinI64(x as i64),
        9 => AtomicOp::MaxI64(x as i64),
        10 => AtomicOp::And(x),
        11 => AtomicOp::Or(x),
        12 => AtomicOp::Xor(x),
        _ => return None,
    })
}

/// What a user AM carries besides its arguments, as the sender gives it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum OutBody<'a> {
    Short,
    Medium(&'a [u8]),
    Long { payload: &'a [u8], offset: usize },
}

/// A segment of a rank on this host, mapped from the shared window, with its counters.
struct Mapped {
    segment: Segment,
    /// Points into the same window, the page before the segment; valid while the window is.
    counters: NonNull<WriteCounters>,
}

impl Mapped {
    #[inline]
    fn counters(&self) -> &WriteCounters {
        // SAFETY: the counters page lies in the shared window, which outlives every use (the
        // world frees it in `teardown`, after the endpoint is gone); it holds two u64 atomics
        // only ever accessed atomically (`WriteCounters` is `repr(C)`), zeroed at creation.
        unsafe { self.counters.as_ref() }
    }

    /// Writes `src` at `offset` and counts the write: a put into mapped memory, as on smp.
    #[inline]
    fn write_counted(&self, offset: usize, src: &[u8]) -> Result<WriteAck, BridgeError> {
        self.segment.write(offset, src)?;
        Ok(self.counters().count_write())
    }
}

/// One pre-posted receive.
struct Slot {
    req: ffi::MPI_Request,
    buf: Box<[u8]>,
}

/// A payload still arriving, and what to do when it has.
enum Inflight {
    /// A put's bytes into this segment: count, then ack `id` to `origin`.
    Put {
        req: ffi::MPI_Request,
        origin: usize,
        id: u64,
    },
    /// A long AM's bytes into this segment: count, ack, then its handler may run.
    Long {
        req: ffi::MPI_Request,
        origin: usize,
        id: u64,
        key: u64,
    },
    /// A medium AM's bytes into `buf`.
    Medium {
        req: ffi::MPI_Request,
        buf: Vec<u8>,
        key: u64,
    },
}

enum Ready {
    Medium(Vec<u8>),
    Long(WriteAck),
}

/// A user AM taken off the wire, waiting to run in order; `wait` names its payload if that is
/// still arriving.
struct Deferred {
    message: Message,
    wait: Option<u64>,
}

/// Completion of an operation this rank started.
enum Op {
    Waiting,
    Ack(WriteAck),
    Atomic(AtomicResult),
}

struct State {
    slots: Vec<Slot>,
    /// The slot whose receive was posted first among those still posted (MPI matches
    /// receives in posting order, so it completes first).
    head: usize,
    /// Slots taken off the wire whose receive is not posted again yet: the `unposted` slots
    /// just before `head`, in ring order. Re-posting waits until the next progress round so
    /// that it is off the latency path (a reply goes out before its slot is re-posted).
    unposted: usize,
    /// Message buffers of completed sends, reused for the next ones (at most [`SLOTS`]).
    spare: Vec<Vec<u8>>,
    credits: Vec<u32>,
    to_return: Vec<u32>,
    /// Sends not yet complete, with the buffer they read from (empty for segment memory).
    sends: Vec<(ffi::MPI_Request, Vec<u8>)>,
    inflight: Vec<Inflight>,
    ready: HashMap<u64, Ready>,
    next_key: u64,
    deferred: VecDeque<Deferred>,
    ops: HashMap<u64, Op>,
    next_op: u64,
    /// Messages sent on `TAG_MSG` (and to itself), and messages fully handled.
    sent: u64,
    handled: u64,
    barrier: Option<ffi::MPI_Request>,
    tick: u32,
    barrier_tick: u32,
}

/// One mpi job as this process sees it.
pub struct MpiWorld {
    rank: usize,
    ranks: usize,
    comm: ffi::MPI_Comm,
    node_comm: ffi::MPI_Comm,
    win: ffi::MPI_Win,
    topology: Topology,
    pub(crate) handlers: HandlerTable,
    segment_len: usize,
    /// By rank: the segments this process maps (its own always, its host's unless
    /// `PGAS_MPI_PSHM=0`).
    mapped: Box<[Option<Mapped>]>,
    /// By rank: the ring in that rank's inbox that this rank fills (ranks of this host only,
    /// unless `PGAS_MPI_PSHM=0`).
    outboxes: Box<[Option<Ring>]>,
    /// The rings of this rank's inbox, with the rank that fills each.
    inboxes: Box<[(usize, Ring)]>,
    /// Whether any other rank sends to this one through MPI (it is on another host, or
    /// `PGAS_MPI_PSHM=0`); when none does, polling skips the MPI receives, whose test costs a
    /// turn of MPI's progress engine.
    mpi_peers: bool,
    st: RefCell<State>,
    shared: Arc<Shared>,
    watchdog: RefCell<Option<Watchdog>>,
}

impl std::fmt::Debug for MpiWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiWorld")
            .field("rank", &self.rank)
            .field("ranks", &self.ranks)
            .field("topology", &self.topology)
            .field("segment_len", &self.segment_len)
            .finish()
    }
}

/// Panics with the conduit error: used inside progress, where no caller can act on it; the
/// rank then fails and the others are told.
fn must<T>(r: Result<T, BridgeError>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn uint8() -> ffi::MPI_Datatype {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    unsafe { ffi::RSMPI_UINT8_T }
}

fn null_request() -> ffi::MPI_Request {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

fn mpi_len(len: usize) -> Result<c_int, BridgeError> {
    c_int::try_from(len).map_err(|_| {
        BridgeError::Conduit(format!(
            "a transfer of {len} bytes exceeds what one MPI message carries (2 GiB); split it"
        ))
    })
}

/// Tests `req`; true once complete (then MPI has set it to `MPI_REQUEST_NULL`).
#[inline]
fn test(req: &mut ffi::MPI_Request, what: &str) -> Result<bool, BridgeError> {
    let mut flag: c_int = 0;
    // SAFETY: `req` is a request handle this module started (or already null, which MPI_Test
    // reports as complete); STATUS_IGNORE is allowed.
    let rc = unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
    check(rc, what)?;
    Ok(flag != 0)
}

impl MpiWorld {
    /// Sets up a job over every process of `MPI_COMM_WORLD` (collective).
    fn new(config: &LaunchConfig, handlers: HandlerTable) -> Result<Rc<MpiWorld>, BridgeError> {
        // SAFETY (whole function): MPI is initialized (`process()` succeeded); every handle
        // passed is one MPI returned or a predefined one; every buffer passed is sized for the
        // count and datatype given and lives across the (blocking) call.
        unsafe {
            let world = ffi::RSMPI_COMM_WORLD;
            let (mut wsize, mut wrank) = (0, 0);
            check(ffi::MPI_Comm_size(world, &mut wsize), "MPI_Comm_size")?;
            check(ffi::MPI_Comm_rank(world, &mut wrank), "MPI_Comm_rank")?;
            let wsize = wsize as usize;
            // Host names, to number ranks host by host and to build the topology.
            const NAME: usize = ffi::MPI_MAX_PROCESSOR_NAME as usize;
            let host = process::processor_name();
            let mut mine = [0u8; NAME];
            let n = host.len().min(NAME - 1);
            mine[..n].copy_from_slice(&host.as_bytes()[..n]);
            let mut all = vec![0u8; NAME * wsize];
            check(
                ffi::MPI_Allgather(
                    mine.as_ptr().cast(),
                    NAME as c_int,
                    uint8(),
                    all.as_mut_ptr().cast(),
                    NAME as c_int,
                    uint8(),
                    world,
                ),
                "MPI_Allgather(host names)",
            )?;
            let names: Vec<String> = all
                .chunks(NAME)
                .map(|c| {
                    let end = c.iter().position(|&b| b == 0).unwrap_or(NAME);
                    String::from_utf8_lossy(&c[..end]).into_owned()
                })
                .collect();
            let mut hosts: Vec<&str> = Vec::new();
            let host_of: Vec<usize> = names
                .iter()
                .map(|n| match hosts.iter().position(|h| h == n) {
                    Some(i) => i,
                    None => {
                        hosts.push(n);
                        hosts.len() - 1
                    }
                })
                .collect();
            let mut order: Vec<usize> = (0..wsize).collect();
            order.sort_by_key(|&w| (host_of[w], w));
            let key = order
                .iter()
                .position(|&w| w == wrank as usize)
                .expect("own rank");
            let sizes: Vec<usize> = (0..hosts.len())
                .map(|h| host_of.iter().filter(|&&x| x == h).count())
                .collect();

            let mut comm = ffi::RSMPI_COMM_NULL;
            check(
                ffi::MPI_Comm_split(world, 0, key as c_int, &mut comm),
                "MPI_Comm_split",
            )?;
            check(
                ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN),
                "MPI_Comm_set_errhandler",
            )?;
            let mut rank = 0;
            check(ffi::MPI_Comm_rank(comm, &mut rank), "MPI_Comm_rank")?;
            let rank = rank as usize;
            let ranks = wsize;

            // The host's shared-memory communicator and window.
            let mut node_comm = ffi::RSMPI_COMM_NULL;
            check(
                ffi::MPI_Comm_split_type(
                    comm,
                    ffi::RSMPI_COMM_TYPE_SHARED,
                    rank as c_int,
                    ffi::RSMPI_INFO_NULL,
                    &mut node_comm,
                ),
                "MPI_Comm_split_type",
            )?;
            let mut node_size = 0;
            check(
                ffi::MPI_Comm_size(node_comm, &mut node_size),
                "MPI_Comm_size",
            )?;
            let my_job_rank = rank as u64;
            let mut node_ranks = vec![0u64; node_size as usize];
            check(
                ffi::MPI_Allgather(
                    (&my_job_rank as *const u64).cast(),
                    8,
                    uint8(),
                    node_ranks.as_mut_ptr().cast(),
                    8,
                    uint8(),
                    node_comm,
                ),
                "MPI_Allgather(node ranks)",
            )?;
            let segment_len = config.segment_bytes;
            let pshm = std::env::var("PGAS_MPI_PSHM").map_or(true, |v| v.trim() != "0");
            let node_size = node_size as usize;
            // Slack to align the counters page, the counters page, the segment, and the inbox
            // of AM rings (one per rank of the host) when AMs go through shared memory.
            let segment_pages = segment_len.div_ceil(PAGE) * PAGE;
            let inbox_len = if pshm { node_size * RING_BYTES } else { 0 };
            let piece = 2 * PAGE + segment_pages + inbox_len;
            let mut info = ffi::RSMPI_INFO_NULL;
            check(ffi::MPI_Info_create(&mut info), "MPI_Info_create")?;
            let k = CString::new("alloc_shared_noncontig").expect("no nul");
            let v = CString::new("true").expect("no nul");
            ffi::MPI_Info_set(info, k.as_ptr(), v.as_ptr());
            let mut base: *mut c_void = std::ptr::null_mut();
            let mut win = ffi::RSMPI_WIN_NULL;
            let rc = ffi::MPI_Win_allocate_shared(
                piece as ffi::MPI_Aint,
                1,
                info,
                node_comm,
                (&mut base as *mut *mut c_void).cast(),
                &mut win,
            );
            ffi::MPI_Info_free(&mut info);
            check(rc, "MPI_Win_allocate_shared")?;
            ffi::MPI_Win_set_errhandler(win, ffi::RSMPI_ERRORS_RETURN);
            // Segments start zeroed, as on smp (MPI does not promise zeroed memory).
            std::ptr::write_bytes(base.cast::<u8>(), 0, piece);
            let mut mapped: Vec<Option<Mapped>> = (0..ranks).map(|_| None).collect();
            let mut outboxes: Vec<Option<Ring>> = (0..ranks).map(|_| None).collect();
            let mut inboxes = Vec::new();
            let my_place = node_ranks
                .iter()
                .position(|&r| r as usize == rank)
                .expect("this rank is on its host");
            for (i, &job_rank) in node_ranks.iter().enumerate() {
                let job_rank = job_rank as usize;
                if !pshm && job_rank != rank {
                    continue;
                }
                let (mut size, mut disp, mut ptr) = (
                    0 as ffi::MPI_Aint,
                    0 as c_int,
                    std::ptr::null_mut::<c_void>(),
                );
                check(
                    ffi::MPI_Win_shared_query(
                        win,
                        i as c_int,
                        &mut size,
                        &mut disp,
                        (&mut ptr as *mut *mut c_void).cast(),
                    ),
                    "MPI_Win_shared_query",
                )?;
                if ptr.is_null() || (size as usize) < piece {
                    return Err(BridgeError::Conduit(format!(
                        "the shared window of rank {job_rank} has {size} bytes, {piece} expected"
                    )));
                }
                // Page-aligned offsets are the same in every process's mapping of the window,
                // so aligning up finds the same bytes everywhere; the slack page makes room.
                let counters = ptr.cast::<u8>().add(ptr.cast::<u8>().align_offset(PAGE));
                let segment = Segment::borrowed(
                    job_rank,
                    NonNull::new(counters.add(PAGE)).expect("non-null"),
                    segment_len,
                );
                mapped[job_rank] = Some(Mapped {
                    segment,
                    counters: NonNull::new(counters.cast()).expect("non-null"),
                });
                if pshm {
                    // Ring `j` of a rank's inbox is filled by the rank at place `j` of the host.
                    let inbox = counters.add(PAGE + segment_pages);
                    // SAFETY (for `Ring::new`): the inbox lies inside this rank's piece of the
                    // window (`piece` counts it), page-aligned, zeroed above before the node
                    // barrier below, and mapped until teardown; ring `j` has one producer (the
                    // rank at place `j`) and one consumer (the inbox's owner).
                    if job_rank == rank {
                        for (j, &from) in node_ranks.iter().enumerate() {
                            if j != my_place {
                                inboxes.push((from as usize, Ring::new(inbox.add(j * RING_BYTES))));
                            }
                        }
                    } else {
                        outboxes[job_rank] = Some(Ring::new(inbox.add(my_place * RING_BYTES)));
                    }
                }
            }
            // Everyone has zeroed its piece before anyone may write into it.
            check(ffi::MPI_Barrier(node_comm), "MPI_Barrier")?;

            // The failure detector's star, rank 0 at the centre.
            let shared = Arc::new(Shared::default());
            shared.sleeper.register_current();
            let root_host = names[order[0]].clone();
            let dog = if rank == 0 {
                Watchdog::start_root(ranks, shared.clone(), |port| {
                    let mut p = port as u32;
                    check(
                        ffi::MPI_Bcast((&mut p as *mut u32).cast(), 4, uint8(), 0, comm),
                        "MPI_Bcast(port)",
                    )
                })?
            } else {
                let mut p = 0u32;
                check(
                    ffi::MPI_Bcast((&mut p as *mut u32).cast(), 4, uint8(), 0, comm),
                    "MPI_Bcast(port)",
                )?;
                Watchdog::start_leaf(
                    rank,
                    &root_host,
                    root_host == host,
                    p as u16,
                    shared.clone(),
                )?
            };

            let mut slots: Vec<Slot> = (0..SLOTS)
                .map(|_| Slot {
                    req: ffi::RSMPI_REQUEST_NULL,
                    buf: vec![0u8; EAGER].into_boxed_slice(),
                })
                .collect();
            for s in &mut slots {
                check(
                    ffi::MPI_Irecv(
                        s.buf.as_mut_ptr().cast(),
                        EAGER as c_int,
                        uint8(),
                        ffi::RSMPI_ANY_SOURCE,
                        TAG_MSG,
                        comm,
                        &mut s.req,
                    ),
                    "MPI_Irecv",
                )?;
            }
            check(ffi::MPI_Barrier(comm), "MPI_Barrier")?;
            JOB_ACTIVE.store(true, Ordering::Release);
            Ok(Rc::new(MpiWorld {
                rank,
                ranks,
                comm,
                node_comm,
                win,
                // Without shared memory the ranks of a host reach each other as across hosts,
                // so each is a node of its own: the topology (pgas's local_team, is_local) must
                // name only ranks whose segments this process has mapped.
                topology: if pshm {
                    Topology::from_node_sizes(&sizes)
                } else {
                    Topology::new(ranks, 1)
                },
                handlers,
                segment_len,
                mapped: mapped.into_boxed_slice(),
                mpi_peers: (0..ranks).any(|r| r != rank && outboxes[r].is_none()),
                outboxes: outboxes.into_boxed_slice(),
                inboxes: inboxes.into_boxed_slice(),
                st: RefCell::new(State {
                    slots,
                    head: 0,
                    unposted: 0,
                    spare: Vec::new(),
                    credits: vec![CREDITS; ranks],
                    to_return: vec![0; ranks],
                    sends: Vec::new(),
                    inflight: Vec::new(),
                    ready: HashMap::new(),
                    next_key: 0,
                    deferred: VecDeque::new(),
                    ops: HashMap::new(),
                    next_op: 0,
                    sent: 0,
                    handled: 0,
                    barrier: None,
                    tick: 0,
                    barrier_tick: 0,
                }),
                shared,
                watchdog: RefCell::new(Some(dog)),
            }))
        }
    }

    pub(crate) fn ranks(&self) -> usize {
        self.ranks
    }

    pub(crate) fn topology(&self) -> Topology {
        self.topology
    }

    pub(crate) fn segment_len(&self) -> usize {
        self.segment_len
    }

    pub(crate) fn counters(&self) -> &WriteCounters {
        self.mapped[self.rank]
            .as_ref()
            .expect("own segment is mapped")
            .counters()
    }

    fn own(&self) -> &Mapped {
        self.mapped[self.rank].as_ref().expect("own segment")
    }

    /// The mapping of `rank` if this process shares its memory, after checking it exists.
    #[inline]
    fn mapped(&self, rank: usize) -> Result<Option<&Mapped>, BridgeError> {
        match self.mapped.get(rank) {
            Some(m) => Ok(m.as_ref()),
            None => Err(BridgeError::NoSuchRank {
                rank,
                ranks: self.ranks,
            }),
        }
    }

    pub(crate) fn segment_base(&self, rank: usize) -> Result<*mut u8, BridgeError> {
        match self.mapped(rank)? {
            Some(m) => Ok(m.segment.base()),
            None => Err(BridgeError::NotAddressable {
                rank,
                me: self.rank,
            }),
        }
    }

    fn check_range(&self, rank: usize, offset: usize, len: usize) -> Result<(), BridgeError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.segment_len => Ok(()),
            _ => Err(BridgeError::OutOfSegment {
                rank,
                offset,
                len,
                segment_len: self.segment_len,
            }),
        }
    }

    // ---- sending ------------------------------------------------------------------------

    /// Queues a message to `dest` (not this rank) on `TAG_MSG`; returns nothing to wait for.
    fn send_msg(
        &self,
        st: &mut State,
        dest: usize,
        mut h: Header,
        args: &[u64],
        inline: &[u8],
        spend_credit: bool,
    ) -> Result<(), BridgeError> {
        h.credits = std::mem::take(&mut st.to_return[dest]);
        if spend_credit {
            h.flags |= F_CREDIT;
            st.credits[dest] -= 1;
        }
        let mut buf = st.spare.pop().unwrap_or_default();
        h.encode_into(&mut buf, args, inline);
        let mut req = null_request();
        // SAFETY: `buf` is moved into `st.sends` below without reallocation, so the bytes
        // MPI reads stay in place until the request completes and the pair is dropped.
        let rc = unsafe {
            ffi::MPI_Isend(
                buf.as_ptr().cast(),
                buf.len() as c_int,
                uint8(),
                dest as c_int,
                TAG_MSG,
                self.comm,
                &mut req,
            )
        };
        check(rc, "MPI_Isend")?;
        st.sends.push((req, buf));
        st.sent += 1;
        Ok(())
    }

    /// Sends `bytes` on `TAG_PAYLOAD` and waits (making internal progress) until MPI no longer
    /// needs them.
    fn send_payload(&self, dest: usize, bytes: &[u8]) -> Result<(), BridgeError> {
        let mut req = null_request();
        // SAFETY: `bytes` stays borrowed until `wait_request` returns, i.e. until the send
        // completed; on an unwind (a peer failed) the process is being abandoned.
        let rc = unsafe {
            ffi::MPI_Isend(
                bytes.as_ptr().cast(),
                mpi_len(bytes.len())?,
                uint8(),
                dest as c_int,
                TAG_PAYLOAD,
                self.comm,
                &mut req,
            )
        };
        check(rc, "MPI_Isend(payload)")?;
        self.wait_request(&mut req)
    }

    /// Outside handlers, waits (internally) until a credit toward `dest` is free; true if the
    /// message should spend one.
    fn take_credit(&self, ep: &Endpoint, dest: usize) -> bool {
        if ep.in_handler() {
            return false;
        }
        self.wait_internal(|st| st.credits[dest] > 0);
        true
    }

    fn new_op(&self) -> u64 {
        let mut st = self.st.borrow_mut();
        let id = st.next_op;
        st.next_op += 1;
        st.ops.insert(id, Op::Waiting);
        id
    }

    /// Sends `header` (with `payload` inline or following it) to `dest`.
    fn send_with_payload(
        &self,
        dest: usize,
        mut header: Header,
        args: &[u64],
        payload: &[u8],
        spend: bool,
    ) -> Result<(), BridgeError> {
        if payload.len() <= INLINE_MAX {
            let mut st = self.st.borrow_mut();
            self.send_msg(&mut st, dest, header, args, payload, spend)
        } else {
            mpi_len(payload.len())?;
            header.flags |= F_SEPARATE;
            {
                let mut st = self.st.borrow_mut();
                self.send_msg(&mut st, dest, header, args, &[], spend)?;
            }
            self.send_payload(dest, payload)
        }
    }

    // ---- RMA ------------------------------------------------------------------------------

    #[inline]
    pub(crate) fn put(
        &self,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<WriteAck, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return m.write_counted(offset, src);
        }
        let id = self.start_put(ep, rank, offset, src)?;
        Ok(self.wait_ack(id))
    }

    pub(crate) fn put_nb(
        self: &Rc<Self>,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<WriteHandle, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return Ok(WriteHandle::complete(m.write_counted(offset, src)?));
        }
        let id = self.start_put(ep, rank, offset, src)?;
        Ok(WriteHandle::pending(self.clone(), id))
    }

    fn start_put(
        &self,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<u64, BridgeError> {
        self.check_range(rank, offset, src.len())?;
        mpi_len(src.len())?;
        let spend = self.take_credit(ep, rank);
        let id = self.new_op();
        let h = Header {
            kind: K_PUT,
            id,
            a: offset as u64,
            b: src.len() as u64,
            ..Header::default()
        };
        if let Err(e) = self.send_with_payload(rank, h, &[], src, spend) {
            self.forget_ack(id);
            return Err(e);
        }
        Ok(id)
    }

    pub(crate) fn get(
        &self,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            return m.segment.read(offset, dst);
        }
        self.check_range(rank, offset, dst.len())?;
        let len = mpi_len(dst.len())?;
        let spend = self.take_credit(ep, rank);
        let mut req = null_request();
        // SAFETY: `dst` is exclusively borrowed until `wait_request` below returns, i.e. until
        // the receive completed. Only one get is outstanding per process (gets are blocking
        // and no user handler runs while one waits), so the (source, TAG_GET) pair matches
        // this receive's reply only.
        let rc = unsafe {
            ffi::MPI_Irecv(
                dst.as_mut_ptr().cast(),
                len,
                uint8(),
                rank as c_int,
                TAG_GET,
                self.comm,
                &mut req,
            )
        };
        check(rc, "MPI_Irecv(get)")?;
        let h = Header {
            kind: K_GET,
            a: offset as u64,
            b: dst.len() as u64,
            ..Header::default()
        };
        {
            let mut st = self.st.borrow_mut();
            self.send_msg(&mut st, rank, h, &[], &[], spend)?;
        }
        self.wait_request(&mut req)
    }

    pub(crate) fn atomic(
        &self,
        ep: &Endpoint,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<AtomicResult, BridgeError> {
        if let Some(m) = self.mapped(rank)? {
            let word = m.segment.atomic_u64(offset)?;
            let (previous, wrote) = op.apply(word);
            let ack = wrote.then(|| m.counters().count_write());
            return Ok(AtomicResult { previous, ack });
        }
        self.check_range(rank, offset, 8)?;
        if !offset.is_multiple_of(8) {
            return Err(BridgeError::Misaligned {
                rank,
                offset,
                align: 8,
            });
        }
        let spend = self.take_credit(ep, rank);
        let id = self.new_op();
        let (code, x, y) = encode_op(op);
        let h = Header {
            kind: K_ATOMIC,
            id,
            a: offset as u64,
            b: code,
            c: x,
            d: y,
            ..Header::default()
        };
        {
            let mut st = self.st.borrow_mut();
            self.send_msg(&mut st, rank, h, &[], &[], spend)?;
        }
        let mut result = None;
        self.wait_internal(|st| match st.ops.get(&id) {
            Some(Op::Atomic(r)) => {
                result = Some(*r);
                st.ops.remove(&id);
                true
            }
            _ => false,
        });
        Ok(result.expect("atomic completed"))
    }

    /// The ack of `id` if it has arrived (after one round of internal progress).
    pub(crate) fn test_ack(&self, id: u64) -> Option<WriteAck> {
        self.progress();
        match self.st.borrow().ops.get(&id) {
            Some(Op::Ack(a)) => Some(*a),
            _ => None,
        }
    }

    /// Waits (internal progress only) for the ack of `id`.
    pub(crate) fn wait_ack(&self, id: u64) -> WriteAck {
        let mut ack = None;
        self.wait_internal(|st| match st.ops.get(&id) {
            Some(Op::Ack(a)) => {
                ack = Some(*a);
                true
            }
            _ => false,
        });
        self.st.borrow_mut().ops.remove(&id);
        ack.expect("ack arrived")
    }

    pub(crate) fn forget_ack(&self, id: u64) {
        if let Ok(mut st) = self.st.try_borrow_mut() {
            st.ops.remove(&id);
        }
    }

    // ---- active messages ----------------------------------------------------------------

    /// Sends a user AM (`message` carries handler, arguments, reply flag) with `body`; for a
    /// long message, returns the handle of its write.
    pub(crate) fn send_am(
        self: &Rc<Self>,
        ep: &Endpoint,
        target: usize,
        mut message: Message,
        body: OutBody<'_>,
    ) -> Result<Option<WriteHandle>, BridgeError> {
        let (payload, long_offset) = match body {
            OutBody::Short => (&[][..], None),
            OutBody::Medium(p) => (p, None),
            OutBody::Long { payload, offset } => {
                self.check_range(target, offset, payload.len())?;
                (payload, Some(offset))
            }
        };
        if target == self.rank {
            let mut handle = None;
            message.body = match body {
                OutBody::Long { payload, offset } => {
                    let ack = self.own().write_counted(offset, payload)?;
                    handle = Some(WriteHandle::complete(ack));
                    Body::Long {
                        offset,
                        len: payload.len(),
                        ack,
                    }
                }
                OutBody::Short => Body::Short,
                OutBody::Medium(p) => Body::Medium(p.to_vec()),
            };
            let mut st = self.st.borrow_mut();
            st.sent += 1;
            st.deferred.push_back(Deferred {
                message,
                wait: None,
            });
            return Ok(handle);
        }
        if let Some(ring) = &self.outboxes[target] {
            return self.send_am_shm(target, ring, &message, body);
        }
        mpi_len(payload.len())?;
        let spend = !message.is_reply && self.take_credit(ep, target);
        let mut h = Header::am(&message, &body);
        let mut handle = None;
        if let Some(offset) = long_offset {
            let id = self.new_op();
            h.id = id;
            h.a = offset as u64;
            handle = Some(WriteHandle::pending(self.clone(), id));
        }
        self.send_with_payload(target, h, message.args.as_slice(), payload, spend)?;
        Ok(handle)
    }

    /// Sends a user AM to a rank of this host through its inbox ring. A long payload is
    /// written straight into the target's segment first (as a put would be), so the message
    /// carries the write's acknowledgement and the handle is complete at once.
    fn send_am_shm(
        &self,
        target: usize,
        ring: &Ring,
        message: &Message,
        body: OutBody<'_>,
    ) -> Result<Option<WriteHandle>, BridgeError> {
        let mut h = Header::am(message, &body);
        let mut handle = None;
        let inline = match body {
            OutBody::Short => &[][..],
            OutBody::Medium(p) => p,
            OutBody::Long { payload, offset } => {
                let m = self
                    .mapped(target)?
                    .expect("a rank with an outbox is mapped");
                let ack = m.write_counted(offset, payload)?;
                handle = Some(WriteHandle::complete(ack));
                h.flags |= F_PLACED;
                (h.a, h.c, h.d) = (offset as u64, ack.ec, ack.iwc);
                &[][..]
            }
        };
        let args = message.args.as_slice();
        let len = Header::encoded_len(args.len(), inline.len());
        // No room: the target has not taken our earlier messages yet. Take our own traffic
        // off the wire meanwhile (never user handlers), so two ranks filling each other's
        // rings both make room, even from inside handlers.
        self.wait_internal(|_| ring.try_push(len, |out| h.write(out, args, inline)));
        self.st.borrow_mut().sent += 1;
        Ok(handle)
    }

    /// Counts a user message whose handler has run.
    pub(crate) fn handled(&self) {
        self.st.borrow_mut().handled += 1;
    }

    // ---- progress -----------------------------------------------------------------------

    /// One round of internal progress: completes sends, takes messages off the wire in
    /// arrival order (handling the conduit's own at once, queueing user AMs), completes
    /// payloads. Returns how much happened.
    fn progress(&self) -> usize {
        let Ok(mut st) = self.st.try_borrow_mut() else {
            return 0; // re-entered from inside progress: the outer round continues
        };
        let st = &mut *st;
        let mut work = 0;
        // Completing sends only frees their buffers; every MPI_Test costs a round of the
        // library's progress engine, so the list is swept every 16th round (or when long),
        // keeping the latency path at one test per round.
        st.tick = st.tick.wrapping_add(1);
        if st.sends.len() >= 64 || (!st.sends.is_empty() && st.tick.is_multiple_of(16)) {
            let mut i = 0;
            while i < st.sends.len() {
                let done = test(&mut st.sends[i].0, "MPI_Test(send)");
                match done {
                    Ok(true) => {
                        let (_, buf) = st.sends.swap_remove(i);
                        if buf.capacity() > 0 && buf.capacity() <= EAGER && st.spare.len() < SLOTS {
                            st.spare.push(buf);
                        }
                        work += 1;
                    }
                    Ok(false) => i += 1,
                    Err(e) => panic!("{e}"),
                }
            }
        }
        if self.mpi_peers {
            work += self.take_mpi_messages(st);
        }
        for (source, ring) in self.inboxes.iter() {
            if !ring.is_empty() {
                work += ring.drain(|bytes| self.take_off_wire(st, *source, bytes));
            }
        }
        if !st.inflight.is_empty() {
            let mut i = 0;
            while i < st.inflight.len() {
                let req = match &mut st.inflight[i] {
                    Inflight::Put { req, .. }
                    | Inflight::Long { req, .. }
                    | Inflight::Medium { req, .. } => req,
                };
                let done = test(req, "MPI_Test(payload)");
                match done {
                    Ok(false) => i += 1,
                    Err(e) => panic!("{e}"),
                    Ok(true) => {
                        work += 1;
                        match st.inflight.swap_remove(i) {
                            Inflight::Put { origin, id, .. } => {
                                let ack = self.own().counters().count_write();
                                must(self.send_ack(st, origin, id, ack));
                                st.handled += 1;
                            }
                            Inflight::Long {
                                origin, id, key, ..
                            } => {
                                let ack = self.own().counters().count_write();
                                must(self.send_ack(st, origin, id, ack));
                                st.ready.insert(key, Ready::Long(ack));
                            }
                            Inflight::Medium { buf, key, .. } => {
                                st.ready.insert(key, Ready::Medium(buf));
                            }
                        }
                    }
                }
            }
        }
        work
    }

    /// Takes the messages that arrived through MPI off the wire, in arrival order; returns
    /// how many.
    fn take_mpi_messages(&self, st: &mut State) -> usize {
        let mut work = 0;
        if st.unposted > 0 {
            self.repost(st);
        }
        loop {
            let head = st.head;
            let mut flag: c_int = 0;
            // SAFETY: a zeroed MPI_Status is a valid value to be overwritten.
            let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
            // SAFETY: the slot's request was posted by this module on its own buffer (the
            // head slot is always posted: `repost` runs before half the ring is used up).
            let rc = unsafe { ffi::MPI_Test(&mut st.slots[head].req, &mut flag, &mut status) };
            must(check(rc, "MPI_Test(receive)"));
            if flag == 0 {
                break;
            }
            let mut count: c_int = 0;
            // SAFETY: `status` was filled by the completed receive.
            must(check(
                unsafe { ffi::MPI_Get_count(&status, uint8(), &mut count) },
                "MPI_Get_count",
            ));
            let source = status.MPI_SOURCE as usize;
            let buf = std::mem::take(&mut st.slots[head].buf);
            self.take_off_wire(st, source, &buf[..count.max(0) as usize]);
            st.slots[head].buf = buf;
            st.head = (head + 1) % SLOTS;
            st.unposted += 1;
            if st.unposted >= SLOTS / 2 {
                self.repost(st);
            }
            work += 1;
        }
        work
    }

    /// Posts the receives of the slots taken off the wire since the last call, in the order
    /// they were taken, so the ring keeps matching in order.
    fn repost(&self, st: &mut State) {
        while st.unposted > 0 {
            let i = (st.head + SLOTS - st.unposted) % SLOTS;
            let slot = &mut st.slots[i];
            // SAFETY: the buffer is owned by the slot and stays in place (a boxed slice is
            // never reallocated) until this receive completes or is cancelled in teardown.
            let rc = unsafe {
                ffi::MPI_Irecv(
                    slot.buf.as_mut_ptr().cast(),
                    EAGER as c_int,
                    uint8(),
                    ffi::RSMPI_ANY_SOURCE,
                    TAG_MSG,
                    self.comm,
                    &mut slot.req,
                )
            };
            must(check(rc, "MPI_Irecv"));
            st.unposted -= 1;
        }
    }

    fn send_ack(
        &self,
        st: &mut State,
        origin: usize,
        id: u64,
        ack: WriteAck,
    ) -> Result<(), BridgeError> {
        let h = Header {
            kind: K_ACK,
            id,
            c: ack.ec,
            d: ack.iwc,
            ..Header::default()
        };
        self.send_msg(st, origin, h, &[], &[], false)
    }

    /// Posts a receive of `len` payload bytes from `source` into `dst`.
    fn post_payload(
        &self,
        dst: *mut u8,
        len: usize,
        source: usize,
    ) -> Result<ffi::MPI_Request, BridgeError> {
        let mut req = null_request();
        // SAFETY: callers pass either a checked range of this rank's segment (valid until
        // teardown, which waits for every payload) or a Vec's buffer that is moved, not
        // reallocated, into the inflight list alongside the request.
        let rc = unsafe {
            ffi::MPI_Irecv(
                dst.cast(),
                mpi_len(len)?,
                uint8(),
                source as c_int,
                TAG_PAYLOAD,
                self.comm,
                &mut req,
            )
        };
        check(rc, "MPI_Irecv(payload)")?;
        Ok(req)
    }

    /// Handles one message just received from `source`.
    fn take_off_wire(&self, st: &mut State, source: usize, bytes: &[u8]) {
        let Some((h, args, inline)) = Header::decode(bytes) else {
            panic!(
                "malformed message of {} bytes from rank {source} (a different program?)",
                bytes.len()
            );
        };
        st.credits[source] += h.credits;
        if h.flags & F_CREDIT != 0 {
            st.to_return[source] += 1;
            if st.to_return[source] >= CREDITS / 2 {
                let credit = Header {
                    kind: K_CREDIT,
                    ..Header::default()
                };
                must(self.send_msg(st, source, credit, &[], &[], false));
            }
        }
        let separate = h.flags & F_SEPARATE != 0;
        let own = self.own();
        let (offset, len) = (h.a as usize, h.b as usize);
        let in_segment = || {
            own.segment.check(offset, len).unwrap_or_else(|e| {
                panic!("malformed message from rank {source}: {e}");
            });
            // SAFETY (pointer arithmetic only): the range was checked just above.
            unsafe { own.segment.base().add(offset) }
        };
        match h.kind {
            K_AM => {
                let mut message = Message {
                    source: source as u32,
                    handler: h.handler,
                    is_reply: h.flags & F_REPLY != 0,
                    args,
                    body: Body::Short,
                };
                let mut wait = None;
                match h.body {
                    B_SHORT => {}
                    B_MEDIUM if separate => {
                        let mut buf = vec![0u8; len];
                        let req = self.post_payload(buf.as_mut_ptr(), len, source);
                        let key = st.next_key;
                        st.next_key += 1;
                        st.inflight.push(Inflight::Medium {
                            req: req.unwrap_or_else(|e| panic!("{e}")),
                            buf,
                            key,
                        });
                        wait = Some(key);
                    }
                    B_MEDIUM => message.body = Body::Medium(inline.to_vec()),
                    B_LONG if h.flags & F_PLACED != 0 => {
                        in_segment(); // checks the range
                        message.body = Body::Long {
                            offset,
                            len,
                            ack: WriteAck { ec: h.c, iwc: h.d },
                        };
                    }
                    B_LONG => {
                        let dst = in_segment();
                        if separate {
                            let req = self.post_payload(dst, len, source);
                            let key = st.next_key;
                            st.next_key += 1;
                            st.inflight.push(Inflight::Long {
                                req: req.unwrap_or_else(|e| panic!("{e}")),
                                origin: source,
                                id: h.id,
                                key,
                            });
                            wait = Some(key);
                            message.body = Body::Long {
                                offset,
                                len,
                                ack: WriteAck::default(),
                            };
                        } else {
                            let ack = must(own.write_counted(offset, &inline[..len]));
                            must(self.send_ack(st, source, h.id, ack));
                            message.body = Body::Long { offset, len, ack };
                        }
                    }
                    other => panic!("malformed message from rank {source}: AM body {other}"),
                }
                st.deferred.push_back(Deferred { message, wait });
            }
            K_PUT => {
                let dst = in_segment();
                if separate {
                    let req = self.post_payload(dst, len, source);
                    st.inflight.push(Inflight::Put {
                        req: req.unwrap_or_else(|e| panic!("{e}")),
                        origin: source,
                        id: h.id,
                    });
                } else {
                    let ack = must(own.write_counted(offset, &inline[..len]));
                    must(self.send_ack(st, source, h.id, ack));
                    st.handled += 1;
                }
            }
            K_GET => {
                let src = in_segment();
                let mut req = null_request();
                // SAFETY: the range lies in this rank's segment (checked), which stays valid
                // until teardown, and teardown first waits for every send in `st.sends`.
                let rc = unsafe {
                    ffi::MPI_Isend(
                        src.cast_const().cast(),
                        len as c_int,
                        uint8(),
                        source as c_int,
                        TAG_GET,
                        self.comm,
                        &mut req,
                    )
                };
                must(check(rc, "MPI_Isend(get data)"));
                st.sends.push((req, Vec::new()));
                st.handled += 1;
            }
            K_ATOMIC => {
                let word = own
                    .segment
                    .atomic_u64(offset)
                    .unwrap_or_else(|e| panic!("malformed atomic from rank {source}: {e}"));
                let op = decode_op(h.b, h.c, h.d)
                    .unwrap_or_else(|| panic!("malformed atomic from rank {source}: op {}", h.b));
                let (previous, wrote) = op.apply(word);
                let ack = if wrote {
                    own.counters().count_write()
                } else {
                    WriteAck::default()
                };
                let reply = Header {
                    kind: K_ATOMIC_REPLY,
                    id: h.id,
                    a: previous,
                    b: wrote as u64,
                    c: ack.ec,
                    d: ack.iwc,
                    ..Header::default()
                };
                must(self.send_msg(st, source, reply, &[], &[], false));
                st.handled += 1;
            }
            K_ACK => {
                if let Some(op) = st.ops.get_mut(&h.id) {
                    *op = Op::Ack(WriteAck { ec: h.c, iwc: h.d });
                }
                st.handled += 1;
            }
            K_ATOMIC_REPLY => {
                if let Some(op) = st.ops.get_mut(&h.id) {
                    *op = Op::Atomic(AtomicResult {
                        previous: h.a,
                        ack: (h.b != 0).then_some(WriteAck { ec: h.c, iwc: h.d }),
                    });
                }
                st.handled += 1;
            }
            K_CREDIT => st.handled += 1,
            other => panic!("malformed message from rank {source}: kind {other}"),
        }
    }

    /// Internal progress, then up to `batch` user handlers in arrival order.
    pub(crate) fn poll(&self, ep: &Endpoint, batch: usize) -> usize {
        let work = self.progress();
        let mut ran = 0;
        while ran < batch {
            let message = {
                let mut st = self.st.borrow_mut();
                let st = &mut *st;
                let Some(front) = st.deferred.front() else {
                    break;
                };
                if let Some(key) = front.wait {
                    let Some(ready) = st.ready.remove(&key) else {
                        break;
                    };
                    let mut d = st.deferred.pop_front().expect("front");
                    match (ready, &mut d.message.body) {
                        (Ready::Medium(buf), body) => *body = Body::Medium(buf),
                        (Ready::Long(a), Body::Long { ack, .. }) => *ack = a,
                        (Ready::Long(_), _) => unreachable!("long payload for a long message"),
                    }
                    d.message
                } else {
                    st.deferred.pop_front().expect("front").message
                }
            };
            ep.run_handler(&message);
            ran += 1;
        }
        work + ran
    }

    /// Makes internal progress until `done` holds; unwinds if another rank failed.
    fn wait_internal(&self, mut done: impl FnMut(&mut State) -> bool) {
        let mut backoff = Backoff::new();
        loop {
            if done(&mut self.st.borrow_mut()) {
                return;
            }
            if self.progress() > 0 {
                backoff.reset();
            } else {
                self.shared.failure.check();
                backoff.snooze(&self.shared.sleeper, || !self.shared.failure.is_failed());
            }
        }
    }

    fn wait_request(&self, req: &mut ffi::MPI_Request) -> Result<(), BridgeError> {
        let mut failed = None;
        self.wait_internal(|_| match test(req, "MPI_Test") {
            Ok(done) => done,
            Err(e) => {
                failed = Some(e);
                true
            }
        });
        failed.map_or(Ok(()), Err)
    }

    /// `Endpoint::wait_until` on this conduit: user progress until `done()`.
    pub(crate) fn wait_until(&self, ep: &Endpoint, mut done: impl FnMut() -> bool) {
        let mut backoff = Backoff::new();
        loop {
            if done() {
                return;
            }
            if ep.poll() > 0 {
                backoff.reset();
            } else {
                self.shared.failure.check();
                backoff.snooze(&self.shared.sleeper, || !self.shared.failure.is_failed());
            }
        }
    }

    // ---- barrier and end of job ---------------------------------------------------------

    pub(crate) fn barrier_notify(&self) -> Result<(), BridgeError> {
        let mut req = null_request();
        // SAFETY: the job communicator is valid until teardown.
        check(
            unsafe { ffi::MPI_Ibarrier(self.comm, &mut req) },
            "MPI_Ibarrier",
        )?;
        self.st.borrow_mut().barrier = Some(req);
        Ok(())
    }

    pub(crate) fn barrier_test(&self) -> Result<bool, BridgeError> {
        let mut st = self.st.borrow_mut();
        st.barrier_tick = st.barrier_tick.wrapping_add(1);
        let tick = st.barrier_tick;
        let Some(req) = st.barrier.as_mut() else {
            return Ok(true);
        };
        // Testing a non-blocking collective runs its schedule; every 4th round is enough and
        // leaves the rest of a waiting rank's loop to the point-to-point traffic it serves.
        if !tick.is_multiple_of(4) {
            return Ok(false);
        }
        let done = test(req, "MPI_Test(barrier)")?;
        if done {
            st.barrier = None;
        }
        Ok(done)
    }

    /// Serves AMs until every rank's body has returned and nothing is in flight anywhere.
    pub(crate) fn finish(&self, ep: &Endpoint) {
        let mut previous = None;
        loop {
            let local = {
                let st = self.st.borrow();
                Box::new([st.sent, st.handled])
            };
            let mut total = Box::new([0u64; 2]);
            let mut req = null_request();
            // SAFETY: both boxes outlive the request, which is waited on just below.
            let rc = unsafe {
                ffi::MPI_Iallreduce(
                    local.as_ptr().cast(),
                    total.as_mut_ptr().cast(),
                    2,
                    ffi::RSMPI_UINT64_T,
                    ffi::RSMPI_SUM,
                    self.comm,
                    &mut req,
                )
            };
            must(check(rc, "MPI_Iallreduce"));
            let mut failed = None;
            ep.wait_until(|| match test(&mut req, "MPI_Test(allreduce)") {
                Ok(done) => done,
                Err(e) => {
                    failed = Some(e);
                    true
                }
            });
            must(failed.map_or(Ok(()), Err));
            let totals = *total;
            if totals[0] == totals[1] && previous == Some(totals) {
                break;
            }
            previous = Some(totals);
        }
        self.wait_internal(|st| st.sends.is_empty() && st.inflight.is_empty());
    }

    /// Frees the job's MPI objects (collective); the world must not be used afterwards.
    fn teardown(&self) -> Result<(), BridgeError> {
        {
            let mut st = self.st.borrow_mut();
            for s in &mut st.slots {
                if s.req == null_request() {
                    continue; // taken off the wire and not posted again
                }
                // SAFETY: cancelling and completing this module's own posted receives; the
                // buffers live until after MPI_Wait returns.
                unsafe {
                    ffi::MPI_Cancel(&mut s.req);
                    ffi::MPI_Wait(&mut s.req, ffi::RSMPI_STATUS_IGNORE);
                }
            }
        }
        let mut win = self.win;
        let (mut comm, mut node_comm) = (self.comm, self.node_comm);
        // SAFETY: every rank reached quiescence (`finish`), so no access to the window or
        // traffic on the communicators remains; these handles are freed exactly once.
        unsafe {
            check(ffi::MPI_Barrier(comm), "MPI_Barrier(teardown)")?;
            check(ffi::MPI_Win_free(&mut win), "MPI_Win_free")?;
            check(ffi::MPI_Comm_free(&mut node_comm), "MPI_Comm_free")?;
            check(ffi::MPI_Comm_free(&mut comm), "MPI_Comm_free")?;
        }
        if let Some(dog) = self.watchdog.borrow_mut().take() {
            dog.shutdown();
        }
        Ok(())
    }
}

/// `launch` on the mpi conduit: this process runs one rank of a job spanning every process of
/// `MPI_COMM_WORLD`; see [`crate::launch`] for the rules.
pub(crate) fn launch<R, F>(
    config: &LaunchConfig,
    handlers: HandlerTable,
    body: F,
) -> Result<Vec<R>, LaunchError>
where
    F: Fn(&Endpoint) -> R,
{
    if POISONED.load(Ordering::Acquire) {
        return Err(LaunchError::Conduit(
            "an earlier job of this process failed; MPI cannot start another one".into(),
        ));
    }
    process::process()?;
    let world = MpiWorld::new(config, handlers).map_err(|e| LaunchError::Conduit(e.to_string()))?;
    let me = world.rank;
    let endpoint = Endpoint::with_conduit(me, Conduit::Mpi(world.clone()));
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let result = body(&endpoint);
        endpoint.finish();
        result
    }));
    drop(endpoint);
    match outcome {
        Ok(result) => {
            world
                .teardown()
                .map_err(|e| LaunchError::Conduit(e.to_string()))?;
            JOB_ACTIVE.store(false, Ordering::Release);
            Ok(vec![result])
        }
        Err(payload) => {
            POISONED.store(true, Ordering::Release);
            let (rank, message) = if payload.is::<PeerFailure>() {
                world
                    .shared
                    .failure
                    .first()
                    .unwrap_or((me, "unknown failure".into()))
            } else {
                let message = panic_message(&*payload);
                if let Some(dog) = world.watchdog.borrow().as_ref() {
                    dog.report_failure(&message);
                }
                (me, message)
            };
            // MPI objects of a failed job cannot be freed (that is collective): keep them.
            std::mem::forget(world);
            Err(LaunchError::RankPanicked { rank, message })
        }
    }
}

/// The MPI thread level this process runs with (for benchmarks and diagnostics).
pub fn thread_level_name() -> Option<&'static str> {
    let p = process::process().ok()?;
    // SAFETY: reading link-time constants of rsmpi's C shim.
    let multiple = unsafe { ffi::RSMPI_THREAD_MULTIPLE };
    Some(if p.thread_level >= multiple {
        "MPI_THREAD_MULTIPLE"
    } else {
        "MPI_THREAD_SERIALIZED"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = Header {
            kind: K_AM,
            nargs: 3,
            flags: F_CREDIT | F_REPLY,
            body: B_MEDIUM,
            handler: 513,
            credits: 7,
            id: u64::MAX,
            a: 1,
            b: 2,
            c: 3,
            d: 4,
        };
        let bytes = h.encode(&[10, 20, 30], b"xyz");
        assert_eq!(bytes.len(), HDR + 24 + 3);
        let (back, args, inline) = Header::decode(&bytes).unwrap();
        assert_eq!(back, h);
        assert_eq!(args.as_slice(), &[10, 20, 30]);
        assert_eq!(inline, b"xyz");
        assert!(Header::decode(&bytes[..HDR - 1]).is_none());
        let mut bad = bytes.clone();
        bad[1] = MAX_ARGS as u8 + 1;
        assert!(Header::decode(&bad).is_none());
        assert_eq!(INLINE_MAX + HDR + 8 * MAX_ARGS, EAGER);
    }

    #[test]
    fn atomic_ops_round_trip() {
        let ops = [
            AtomicOp::Load,
            AtomicOp::Store(1),
            AtomicOp::Swap(2),
            AtomicOp::FetchAdd(3),
            AtomicOp::FetchSub(4),
            AtomicOp::CompareExchange { current: 5, new: 6 },
            AtomicOp::Min(7),
            AtomicOp::Max(8),
            AtomicOp::MinI64(-9),
            AtomicOp::MaxI64(-10),
            AtomicOp::And(11),
            AtomicOp::Or(12),
            AtomicOp::Xor(13),
        ];
        for op in ops {
            let (c, x, y) = encode_op(op);
            assert_eq!(decode_op(c, x, y), Some(op));
        }
        assert_eq!(decode_op(13, 0, 0), None);
    }
}
