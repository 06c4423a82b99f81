//! The mpi conduit: one process per rank, started by `mpirun` (cargo feature `mpi`).
//!
//! How it works and why (progress, shared-memory RMA and AM rings, AMs over MPI with credits,
//! barrier and end of job, topology, failures) is told in `README.md` beside this file; each
//! mechanism has its own file, named for it.

mod am;
mod calls;
mod counting;
mod datatype;
mod inbox;
mod lent;
mod process;
mod progress;
mod receive;
mod rma;
mod rma_window;
mod send;
mod setup;
mod shm_ring;
mod state;
mod teardown;
mod watchdog;
mod window;
mod wire;

pub(crate) use am::{AmHead, OutBody};
pub(crate) use process::world_shape;
pub use rma_window::RMA_ENV;
pub(crate) use rma_window::put_completes_after;
pub use watchdog::{FANOUT, WATCHDOG_ADDR_ENV};
pub use wire::{CREDITS, EAGER, INLINE_MAX, SLOTS};

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ::mpi::ffi;

use crate::active_message::HandlerTable;
use crate::conduit::Conduit;
use crate::config::LaunchConfig;
use crate::counters::WriteCounters;
use crate::endpoint::Endpoint;
use crate::error::{BridgeError, LaunchError};
use crate::failure::{PeerFailure, Stopped, panic_message};
use crate::membarrier::Scope;
use crate::topology::Topology;

use inbox::{Inbox, Outboxes};
use process::{JOB_ACTIVE, POISONED};
use rma_window::RmaWindow;
use state::State;
use watchdog::{Shared, Watchdog};
use window::Mapped;

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
    /// The rings this rank claims in the inboxes of its host's ranks (unless
    /// `PGAS_MPI_PSHM=0`), on its first message to each.
    outboxes: Outboxes,
    /// The rings of this rank's inbox that senders claimed.
    inbox: Option<Inbox>,
    /// Whether any other rank sends to this one through MPI (it is on another host, or
    /// `PGAS_MPI_PSHM=0`); when none does, polling skips the MPI receives, whose test costs a
    /// turn of MPI's progress engine.
    mpi_peers: bool,
    /// The MPI-3 window over every segment that carries RMA to ranks this process does not
    /// map (`rma_window.rs`); `None` keeps that RMA on active messages.
    rma: Option<RmaWindow>,
    /// Which threads can write into this rank's segment and count there: the write-counting
    /// switch's barrier reaches them (`Host` when processes of this host map it).
    counting_scope: Scope,
    /// By rank: whether puts to it go through the window now: a rank this process does not
    /// map, in a job with the window, that has not told this rank it counts incoming writes
    /// (a notice of `K_COUNTING`; puts to such a rank go as active messages, so its IWC
    /// counts each one: `counting.rs`). One byte per rank, read by every put.
    window_puts: Box<[Cell<bool>]>,
    st: RefCell<State>,
    /// The job has ended (torn down, or failed): no MPI call may be made for it any more, so
    /// a handle that outlived it gets [`BridgeError::JobEnded`] instead of progress.
    ended: Cell<bool>,
    /// The bytes of the user AM `poll` runs straight off the wire (`progress.rs`): a receive
    /// buffer, swapped with the slot's so that the slot is posted again at once.
    direct: RefCell<Box<[u8]>>,
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

impl MpiWorld {
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

    /// Whether this job counts incoming writes (the mode every mapping was made with).
    pub(crate) fn write_counting(&self) -> crate::counters::WriteCounting {
        self.own().counting()
    }

    /// Messages sent on `TAG_MSG`, through the rings and to itself ([`Endpoint::messages_sent`]).
    pub(crate) fn messages_sent(&self) -> u64 {
        self.st.borrow().sent
    }

    fn own(&self) -> &Mapped {
        self.mapped[self.rank].as_ref().expect("own segment")
    }

    /// True if a put to `rank` travels as an active message: a rank this process does not
    /// map, without the RMA window or counting writes now (`counting.rs`).
    pub(crate) fn puts_by_messages(&self, rank: usize) -> bool {
        !self.maps(rank) && !self.window_puts(rank)
    }

    /// True if this process maps `rank`'s segment (a rank of this host, with PSHM).
    #[inline]
    pub(crate) fn maps(&self, rank: usize) -> bool {
        matches!(self.mapped(rank), Ok(Some(_)))
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
    process::check_thread(process::process()?)?;
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
                // A deliberate stop is the program's to report: the others end quietly.
                let stopped = payload.is::<Stopped>();
                if let Some(dog) = world.watchdog.borrow().as_ref() {
                    dog.report_failure(&message, stopped);
                }
                (me, message)
            };
            world.ended.set(true);
            // MPI objects of a failed job cannot be freed (that is collective): keep them.
            std::mem::forget(world);
            if message == watchdog::lost_message(rank) {
                // Killed or crashed: it did not panic.
                return Err(LaunchError::RankLost { rank, message });
            }
            Err(LaunchError::RankPanicked { rank, message })
        }
    }
}

/// The MPI thread level this process runs with (for benchmarks and diagnostics).
pub fn thread_level_name() -> Option<&'static str> {
    Some(process::process().ok()?.thread_level.name())
}
