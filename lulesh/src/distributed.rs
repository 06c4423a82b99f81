//! Multi-rank LULESH over the `pgas` library: one block of the cube per
//! rank, halo exchanges by one-sided puts into the neighbours' receive
//! buffers, the time step by a MIN reduction.
//!
//! The communication pattern is the reference's (lulesh-comm.cc, as the
//! UPC++ port did it): every rank keeps one receive buffer per exchange kind
//! in its shared segment, laid out like the reference's `commDataRecv`. A
//! sender packs a message into its local send buffer in the reference's
//! order and `rput`s it into the slot the receiver's `CommRecv` would have
//! posted, asking for a remote completion: an rpc that counts the arrival at
//! the target. The receiver waits (making progress) until every expected
//! message of the exchange has arrived, then unpacks them in the reference's
//! order, so boundary sums add up exactly as in the 8-rank MPI run.
//!
//! Buffers are separate per exchange kind because a neighbour may already
//! send the next kind while this rank is still unpacking the previous one;
//! an exchange kind repeats only after a global synchronization (the time
//! step reduction, or the barrier that ends initialization), so each buffer
//! is never written while it is read.

use std::cell::{Cell, RefCell};
use std::sync::Mutex;
use std::sync::atomic::{Ordering, fence};

use pgas::{
    Completions, DistObject, GlobalPtr, LaunchConfig, Promise, RpcTable, new_array, ops,
    reduce_all, reduce_one, rput_with,
};

use crate::comm::{Comm, Msg, SingleRank};
use crate::domain::Domain;
use crate::error::LuleshError;
use crate::halo::{self, DIRS, Pattern};
use crate::lagrange::Simulation;
use crate::layout::{BlockLayout, CACHE_COHERENCE_PAD_REAL};
use crate::options::Options;
use crate::verify::FinalReport;

/// Number of exchange kinds, each with its own receive buffer and counter.
pub const KINDS: usize = 3;

fn kind_index(msg: Msg) -> usize {
    match msg {
        Msg::SumBoundaryNodes => 0,
        Msg::SyncPosVel => 1,
        Msg::MonoQ => 2,
    }
}

/// Messages of each kind that have landed in this rank's buffers and are not
/// yet consumed, and the exchange waiting for them (rank-local state; the
/// arrival rpc runs on the rank's own thread, inside its progress).
#[derive(Default)]
struct Arrivals {
    count: [usize; KINDS],
    waiter: Option<(usize, usize, Promise<()>)>,
}

thread_local! {
    static ARRIVALS: RefCell<Arrivals> = RefCell::new(Arrivals::default());
    static SEQUENCE: Cell<HaloSequence> = const { Cell::new(HaloSequence { sent: [0; KINDS], generation: 0 }) };
    static FLAGS_AT: Cell<Option<GlobalPtr<u64>>> = const { Cell::new(None) };
}

/// This rank's arrival flags ([`Arrival::Flags`]) and their number, once its [`PgasComm`]
/// exists: a dependency-limited re-execution restores them (`Cd::preserve_incoming`).
pub fn arrival_flags() -> Option<(GlobalPtr<u64>, usize)> {
    FLAGS_AT.with(Cell::get).map(|p| (p, FLAGS))
}

/// How a receiver learns that a halo message has landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arrival {
    /// A remote-completion rpc counts the arrival at the target (the reference's pattern, and
    /// the default).
    #[default]
    Rpc,
    /// After the message, the sender puts a sequence number into a flag slot of the
    /// receiver's segment; the receiver polls its flags. Used under relaxed CDs: a relaxed
    /// CD's recovery replays an incoming rpc by running its function again, and the arrival
    /// rpc counts into rank state no CD restores (it would count twice); a re-execution
    /// finds the flags of its first execution already set (see [`halo_sequence`]).
    Flags,
}

/// The per-rank state of the [`Arrival::Flags`] protocol: the exchanges of each kind this
/// rank has made (the sequence number of the last one), and a generation that grows at
/// every strict re-execution so that flags set by the abandoned execution do not count.
#[derive(Debug, Clone, Copy, Default)]
struct HaloSequence {
    sent: [u64; KINDS],
    generation: u64,
}

/// The exchanges of each kind this rank has made ([`Arrival::Flags`]): a Containment Domain
/// preserves them with the cycle's state and puts them back ([`set_halo_sequence`]) when it
/// re-executes, so a replayed exchange sends the same sequence numbers as the first time.
pub fn halo_sequence() -> [u64; KINDS] {
    SEQUENCE.with(Cell::get).sent
}

/// Puts back a [`halo_sequence`] (a CD's re-execution).
pub fn set_halo_sequence(sent: [u64; KINDS]) {
    SEQUENCE.with(|c| {
        let mut s = c.get();
        s.sent = sent;
        c.set(s);
    });
}

/// A strict re-execution (every rank re-executes together) begins: flags set by the
/// execution it abandons must not satisfy the new one's waits. (Not preserved: it only grows.)
pub fn next_halo_generation() {
    SEQUENCE.with(|c| {
        let mut s = c.get();
        s.generation += 1;
        c.set(s);
    });
}

/// The next exchange of `kind`: its sequence number (generation in the high half).
fn next_sequence(kind: usize) -> u64 {
    SEQUENCE.with(|c| {
        let mut s = c.get();
        s.sent[kind] += 1;
        c.set(s);
        (s.generation << 32) | s.sent[kind]
    })
}

/// The sequence number of the current exchange of `kind`.
fn current_sequence(kind: usize) -> u64 {
    let s = SEQUENCE.with(Cell::get);
    (s.generation << 32) | s.sent[kind]
}

/// Flag slots per rank: one per exchange kind and direction.
const FLAGS: usize = KINDS * 26;

/// The arrival rpc: one more message of `kind` is in this rank's buffer.
#[pgas::remote]
fn arrived(kind: u8) {
    let kind = kind as usize;
    let ready = ARRIVALS.with(|a| {
        let mut a = a.borrow_mut();
        a.count[kind] += 1;
        match &a.waiter {
            Some((k, need, _)) if *k == kind && a.count[kind] >= *need => {
                a.waiter.take().map(|(_, _, p)| p)
            }
            _ => None,
        }
    });
    if let Some(p) = ready {
        p.fulfill_anonymous(1);
    }
}

/// Waits, making progress, until `need` messages of `kind` have arrived,
/// and consumes them.
fn wait_arrivals(kind: usize, need: usize) {
    let pending = ARRIVALS.with(|a| {
        let mut a = a.borrow_mut();
        if a.count[kind] >= need {
            return None;
        }
        let p = Promise::new();
        p.require_anonymous(1);
        a.waiter = Some((kind, need, p.clone()));
        Some(p)
    });
    if let Some(p) = pending {
        p.finalize().wait();
    }
    ARRIVALS.with(|a| a.borrow_mut().count[kind] -= need);
}

/// True when every message that has landed in this rank's receive buffers
/// has been consumed and no exchange is waiting: the state at the end of
/// every time step, on every rank (each rank receives, within a step, every
/// message its neighbours send it in that step).
///
/// This is why a time step can be re-executed as a Containment Domain
/// ([`crate::containment`]) without resetting the counters: when the ranks
/// agree at the end of a step, all of them are here. The counters must *not*
/// be reset when a step (re-)begins: a neighbour that left the agreement
/// first may already have sent its first message of the next execution
/// (the first cycle has no time-step reduction before the force exchange),
/// and that arrival must be counted.
pub fn halo_idle() -> bool {
    ARRIVALS.with(|a| {
        let a = a.borrow();
        a.count == [0; KINDS] && a.waiter.is_none()
    })
}

/// Shared-segment bytes a rank needs for `nx`^3 elements: three receive
/// buffers of the largest (interior) block, the pgas runtime's reserved
/// area, and some slack.
pub fn segment_bytes(nx: usize) -> usize {
    let max_edge = nx + 1;
    let align = |n: usize| n.div_ceil(CACHE_COHERENCE_PAD_REAL) * CACHE_COHERENCE_PAD_REAL;
    let reals = 6 * align(max_edge * max_edge) * halo::MAX_FIELDS_PER_COMM
        + 12 * align(max_edge) * halo::MAX_FIELDS_PER_COMM
        + 8 * CACHE_COHERENCE_PAD_REAL;
    (KINDS * reals * size_of::<f64>() + FLAGS * size_of::<u64>() + (64 << 10))
        .next_multiple_of(1 << 16)
}

/// A neighbour: its block layout and its receive buffers (one per kind).
struct Neighbour {
    layout: BlockLayout,
    recv: [GlobalPtr<f64>; KINDS],
    /// Its arrival flags ([`Arrival::Flags`]).
    flags: GlobalPtr<u64>,
}

/// The [`Comm`] of one rank of a multi-rank run over pgas.
pub struct PgasComm {
    layout: BlockLayout,
    /// This rank's receive buffers, one per exchange kind, as many reals each as
    /// [`PgasComm::inbox`].
    recv: [GlobalPtr<f64>; KINDS],
    /// Packing area (the reference's `commDataSend`), reused every exchange.
    send: Vec<f64>,
    /// Unpacking area: the received messages of an exchange, copied out of the receive
    /// buffer of its kind (as long as one, allocated once, reused every exchange).
    inbox: Vec<f64>,
    neighbours: [Option<Neighbour>; 26],
    arrival: Arrival,
    /// This rank's arrival flags, `FLAGS` of them, by kind then direction (the side the
    /// message comes from).
    flags: GlobalPtr<u64>,
}

fn segment_error(e: pgas::PgasError) -> LuleshError {
    LuleshError::Segment(e.to_string())
}

impl PgasComm {
    /// Collective: allocates this rank's receive buffers and learns the
    /// neighbours' (every rank must call it, once, inside `pgas::launch`).
    pub fn new(nx: usize, arrival: Arrival) -> Result<Self, LuleshError> {
        let rank = pgas::rank_me() as i32;
        let num_ranks = pgas::rank_n() as i32;
        let layout = BlockLayout::decompose(num_ranks, rank, nx)?;
        let buf_len = halo::buffer_len(&layout).max(1);
        let mut recv = [GlobalPtr::null(); KINDS];
        for r in &mut recv {
            *r = new_array::<f64>(buf_len).map_err(segment_error)?;
        }
        let flags = new_array::<u64>(FLAGS).map_err(segment_error)?;
        flags
            .write_local_slice(&[0; FLAGS])
            .map_err(segment_error)?;
        ARRIVALS.with(|a| *a.borrow_mut() = Arrivals::default());
        SEQUENCE.with(|c| c.set(HaloSequence::default()));
        FLAGS_AT.with(|c| c.set(Some(flags)));

        let directory = DistObject::new((recv, flags));
        let fetches: Vec<_> = DIRS
            .iter()
            .map(|&d| {
                halo::has_neighbour(&layout, d).then(|| {
                    let n = halo::neighbour_rank(&layout, d);
                    (n, directory.fetch(n as usize))
                })
            })
            .collect();
        let mut neighbours: [Option<Neighbour>; 26] = Default::default();
        for (slot, fetch) in neighbours.iter_mut().zip(fetches) {
            if let Some((n, future)) = fetch {
                let (recv, flags) = future.wait();
                *slot = Some(Neighbour {
                    layout: BlockLayout::decompose(num_ranks, n, nx)?,
                    recv,
                    flags,
                });
            }
        }
        // Nobody sends before everyone has its buffers and its neighbours' addresses.
        pgas::barrier();
        drop(directory);
        Ok(PgasComm {
            layout,
            recv,
            send: vec![0.0; buf_len],
            inbox: vec![0.0; buf_len],
            neighbours,
            arrival,
            flags,
        })
    }

    /// Packs `fields` on each side that `msg` sends across and puts every
    /// message into the receiver's slot (`CommSend`); returns when the send
    /// buffer may be reused.
    fn send(&mut self, layout: &BlockLayout, msg: Msg, fields: &[&mut [f64]], dims: [usize; 3]) {
        debug_assert_eq!(layout, &self.layout);
        let pattern = Pattern::of(msg);
        let nf = fields.len();
        let kind = kind_index(msg);
        let ours = halo::slots(layout, pattern, nf, false);
        let seq = next_sequence(kind);
        let sent = Promise::new();
        for (i, &d) in DIRS.iter().enumerate() {
            let Some(at) = ours[i] else { continue };
            let n = halo::side_len(dims, d);
            let buf = &mut self.send[at..at + nf * n];
            for (field, out) in fields.iter().zip(buf.chunks_exact_mut(n)) {
                for (idx, o) in halo::side_indices(dims, d).zip(out.iter_mut()) {
                    *o = field[idx];
                }
            }
            let nb = self.neighbours[i]
                .as_ref()
                .expect("a message goes to an existing neighbour");
            let theirs = halo::slots(&nb.layout, pattern, nf, true)[halo::opposite(i)]
                .expect("the neighbour receives this message");
            match self.arrival {
                Arrival::Rpc => {
                    let cx = Completions::new()
                        .source_promise(&sent)
                        .remote_rpc(arrived, kind as u8);
                    let _ = rput_with(buf, nb.recv[kind] + theirs, cx);
                }
                Arrival::Flags => {
                    // The message is complete at the target before its flag is set.
                    pgas::rput_slice(buf, nb.recv[kind] + theirs).wait();
                    let flag = nb.flags + (kind * 26 + halo::opposite(i));
                    pgas::rput(seq, flag).wait();
                }
            }
        }
        sent.finalize().wait();
    }

    /// Sends the boundary nodes of `fields` to the neighbours and folds what they sent into
    /// the same nodes with `apply`, in the reference's unpack order (a sum for the force
    /// exchange, an overwrite for positions and velocities).
    fn exchange_nodes(
        &mut self,
        layout: &BlockLayout,
        msg: Msg,
        fields: &mut [&mut [f64]],
        apply: impl Fn(&mut f64, f64),
    ) {
        let dims = node_dims(layout);
        self.send(layout, msg, fields, dims);
        let (slots, buf) = self.receive(layout, msg, fields.len(), dims);
        for (i, &d) in DIRS.iter().enumerate() {
            let Some(at) = slots[i] else { continue };
            let n = halo::side_len(dims, d);
            let msg_data = &buf[at..at + fields.len() * n];
            for (field, src) in fields.iter_mut().zip(msg_data.chunks_exact(n)) {
                for (idx, &v) in halo::side_indices(dims, d).zip(src) {
                    apply(&mut field[idx], v);
                }
            }
        }
    }

    /// Waits for every message of `msg` (`nf` fields over sides of a block of `dims`) this
    /// rank expects, copies them out of the receive buffer of their kind, and returns the
    /// receive slots by direction with the copy ([`PgasComm::inbox`]) holding them.
    fn receive(
        &mut self,
        layout: &BlockLayout,
        msg: Msg,
        nf: usize,
        dims: [usize; 3],
    ) -> ([Option<usize>; 26], &[f64]) {
        let kind = kind_index(msg);
        let slots = halo::slots(layout, Pattern::of(msg), nf, true);
        match self.arrival {
            Arrival::Rpc => wait_arrivals(kind, slots.iter().flatten().count()),
            Arrival::Flags => self.wait_flags(kind, &slots),
        }
        // Every expected message has landed (its arrival rpc ran after the put), and no rank
        // writes this buffer again before the next global synchronization, which this rank
        // reaches only after it is done with the copy. One copy of the part the messages
        // fill, through the API (one bounds check).
        let end = DIRS
            .iter()
            .zip(&slots)
            .filter_map(|(&d, at)| at.map(|at| at + nf * halo::side_len(dims, d)))
            .max()
            .unwrap_or(0);
        self.recv[kind]
            .read_local_slice(&mut self.inbox[..end])
            .expect("this rank's own receive buffer is local");
        (slots, &self.inbox)
    }
}

impl PgasComm {
    /// Waits, making progress, until every direction with a slot in `slots` has set its flag
    /// of `kind` to this exchange's sequence number (or a later one).
    fn wait_flags(&self, kind: usize, slots: &[Option<usize>; 26]) {
        let want = current_sequence(kind);
        let base = self.flags + kind * 26;
        for (i, at) in slots.iter().enumerate() {
            if at.is_none() {
                continue;
            }
            let flag = base + i;
            // Arrived: this exchange's number or a later one *of the same generation*. A flag
            // of another generation is stale, or the pattern a rank loss leaves in the segment
            // (which, read as a number, is larger than any sequence number).
            let landed = |v: u64| v >= want && v >> 32 == want >> 32;
            pgas::poll_until(|| {
                landed(flag.read_local().expect("this rank's own flags are local"))
            });
        }
        // The messages were complete before their flags were set.
        fence(Ordering::Acquire);
    }
}

fn node_dims(layout: &BlockLayout) -> [usize; 3] {
    [layout.size_x + 1, layout.size_y + 1, layout.size_z + 1]
}

impl Comm for PgasComm {
    fn rank(&self) -> i32 {
        self.layout.rank
    }

    fn num_ranks(&self) -> i32 {
        self.layout.num_ranks
    }

    // The receive buffers stay exposed in the segment for the whole run and
    // the arrival counters stand for posted receives: nothing to post.
    fn post_recv(&mut self, _layout: &BlockLayout, _msg: Msg, _num_fields: usize) {}

    fn sum_boundary_nodes(&mut self, layout: &BlockLayout, fields: &mut [&mut [f64]]) {
        self.exchange_nodes(layout, Msg::SumBoundaryNodes, fields, |x, v| *x += v);
    }

    fn sync_pos_vel(&mut self, layout: &BlockLayout, fields: &mut [&mut [f64]; 6]) {
        self.exchange_nodes(layout, Msg::SyncPosVel, fields, |x, v| *x = v);
    }

    fn exchange_monoq(&mut self, layout: &BlockLayout, fields: &mut [&mut [f64]; 3]) {
        let msg = Msg::MonoQ;
        let dims = [layout.size_x, layout.size_y, layout.size_z];
        self.send(layout, msg, fields, dims);
        let (slots, buf) = self.receive(layout, msg, fields.len(), dims);
        // The faces' layers fill the ghost elements past numElem in message order.
        let mut ghost = layout.size_x * layout.size_y * layout.size_z;
        for (i, &d) in DIRS.iter().enumerate() {
            let Some(at) = slots[i] else { continue };
            let n = halo::side_len(dims, d);
            let msg_data = &buf[at..at + fields.len() * n];
            for (field, src) in fields.iter_mut().zip(msg_data.chunks_exact(n)) {
                field[ghost..ghost + n].copy_from_slice(src);
            }
            ghost += n;
        }
    }

    fn allreduce_min(&mut self, value: f64) -> f64 {
        reduce_all(value, ops::min).wait()
    }

    fn reduce_max(&mut self, value: f64) -> f64 {
        reduce_one(value, ops::max, 0).wait().unwrap_or(value)
    }

    fn barrier(&mut self) {
        pgas::barrier();
    }
}

/// The job shape of a run of `ranks` ranks (a cube) with `nx`^3 elements
/// each: the smp conduit, a segment sized for the halo buffers, further
/// shaped by `PGAS_SEGMENT_MB` / `PGAS_RANKS_PER_NODE` if set. Fails with
/// the reference's message if `ranks` is not a cube, and if `PGAS_SEGMENT_MB`
/// is too small for the problem.
pub fn launch_config(ranks: usize, nx: usize) -> Result<LaunchConfig, LuleshError> {
    let num_ranks = i32::try_from(ranks).map_err(|_| LuleshError::NotACube(i32::MAX))?;
    BlockLayout::decompose(num_ranks, 0, nx)?;
    // The one reading of PGAS_SEGMENT_MB / PGAS_RANKS_PER_NODE of every program.
    let config = LaunchConfig::for_job(ranks, segment_bytes(nx)).map_err(|e| match e {
        pgas::ConfigError::SegmentTooSmall { have, need } => {
            LuleshError::SegmentTooSmall { have, need }
        }
        e => LuleshError::Launch(e.to_string()),
    })?;
    Ok(config)
}

/// This process's place in a job of the mpi conduit (one rank per process,
/// started by `mpirun`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpiProcess {
    /// Processes in `MPI_COMM_WORLD`: the job's rank count.
    pub world_size: usize,
    /// This process's rank in it (the pgas rank it will run).
    pub rank: usize,
}

/// `Some` when this process's jobs run on the mpi conduit (built with the
/// `mpi` feature, started by `mpirun` or with `PGAS_CONDUIT=mpi`), with the
/// world size and this process's rank; `None` on the smp conduit. An unusable
/// `PGAS_CONDUIT` is an error.
///
/// The job's shape (a cube of ranks) must be checked, and the header printed
/// by rank 0 alone, before the job starts: [`pgas::mpi_world`] asks MPI for
/// it.
pub fn mpi_process() -> Result<Option<MpiProcess>, LuleshError> {
    pgas::mpi_world()
        .map(|w| w.map(|(rank, world_size)| MpiProcess { world_size, rank }))
        .map_err(|e| LuleshError::Launch(e.to_string()))
}

/// The report of rank 0 out of a job's `results`, if this process ran rank 0
/// (on smp it ran every rank; under mpi only rank 0's process did).
pub(crate) fn rank0_result<T>(results: pgas::RankResults<Option<T>>) -> Option<T> {
    results.into_rank0().flatten()
}

/// Fails the job (`fail`) when it does not span `ranks` ranks: under mpi the
/// world size decides, and the shape was checked against the launcher's
/// environment before the job started.
pub(crate) fn check_job_size(ranks: usize) -> Result<(), LuleshError> {
    let n = pgas::rank_n();
    if n == ranks {
        Ok(())
    } else {
        Err(LuleshError::Launch(format!(
            "the job has {n} ranks, but {ranks} were expected from the launcher's environment"
        )))
    }
}

/// The first fatal error met by a job's ranks. A rank that meets one records it (if no rank
/// did before) and ends by unwinding, so that the launcher stops the others, as the
/// reference's `MPI_Abort` does; the driver then returns the recorded error, which names the
/// cause, rather than the launcher's.
#[derive(Default)]
pub(crate) struct FirstFailure(Mutex<Option<LuleshError>>);

impl FirstFailure {
    /// Records `e` if it is the first and ends this rank.
    pub(crate) fn fail(&self, e: LuleshError) -> ! {
        let text = e.to_string();
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
        // Unwinding (without the panic hook's noise) ends this rank; the
        // launcher then stops the others.
        std::panic::resume_unwind(Box::new(text))
    }

    /// The recorded error, else `launch_error` (the job failed otherwise).
    pub(crate) fn or(self, launch_error: impl FnOnce() -> LuleshError) -> LuleshError {
        self.0
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or_else(launch_error)
    }
}

/// This rank's simulation at the start of a job that must span `ranks` ranks (checked):
/// halos over pgas ([`PgasComm`], collective), or none on a single rank when `solo`.
pub(crate) fn start_rank(
    opts: &Options,
    ranks: usize,
    solo: bool,
    arrival: Arrival,
    failure: &FirstFailure,
) -> Simulation {
    check_job_size(ranks).unwrap_or_else(|e| failure.fail(e));
    let comm: Box<dyn Comm> = if solo {
        Box::new(SingleRank)
    } else {
        let nx = opts.nx as usize;
        Box::new(PgasComm::new(nx, arrival).unwrap_or_else(|e| failure.fail(e)))
    };
    Simulation::new(opts, comm).unwrap_or_else(|e| failure.fail(e))
}

/// Runs `opts` on `ranks` ranks (a cube) shaped by [`launch_config`], and returns rank 0's
/// report (elapsed time is the maximum over ranks) if this process ran rank 0: always on
/// the smp conduit, only in rank 0's process under mpi (`None` in the others). `progress`
/// runs on rank 0 after each cycle.
///
/// A fatal error on any rank stops every rank (as the reference's
/// `MPI_Abort` does) and is returned.
pub fn run(
    opts: &Options,
    ranks: usize,
    progress: impl Fn(&Domain) + Sync,
) -> Result<Option<FinalReport>, LuleshError> {
    run_with_arrival(opts, ranks, Arrival::Rpc, progress)
}

/// [`run`] with the halo arrivals signalled by `arrival` (the benchmark of relaxed CDs
/// compares the same communication with and without CDs).
pub fn run_with_arrival(
    opts: &Options,
    ranks: usize,
    arrival: Arrival,
    progress: impl Fn(&Domain) + Sync,
) -> Result<Option<FinalReport>, LuleshError> {
    let num_ranks = ranks as i32;
    let config = launch_config(ranks, opts.nx as usize)?;
    let failure = FirstFailure::default();

    let outcome = pgas::launch(&config, RpcTable::new(), || {
        let mut sim = start_rank(opts, ranks, false, arrival, &failure);
        let rank0 = pgas::rank_me() == 0;
        let elapsed = sim
            .run(opts.its, |dom| {
                if rank0 {
                    progress(dom)
                }
            })
            .unwrap_or_else(|e| failure.fail(e));
        rank0.then(|| FinalReport::new(&sim.domain, elapsed, opts.nx, num_ranks))
    });
    match outcome {
        Ok(reports) => Ok(rank0_result(reports)),
        Err(e) => Err(failure.or(|| LuleshError::Launch(e.to_string()))),
    }
}
