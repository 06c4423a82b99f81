//! The state of one mpi job as this process sees it, in two groups: what a rebuild over a new
//! communicator keeps ([`Kept`]: identity, the host's shared segments) and what it drops and
//! builds again ([`JobParts`]: the communicator, the watchdog and its failure state, the RMA
//! window, the rings, the counting switch, the protocol state). Each part is defined in its mechanism's file with its
//! own operations; the operations that span parts are `impl MpiWorld` blocks in the files
//! named for them (progress, receiving, RMA, AMs, counting notices, setup, teardown).

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use ::mpi::ffi;

use crate::counters::{WriteCounters, WriteCounting};
use crate::error::BridgeError;
use crate::topology::Topology;

use super::calls::or_peer_lost;
use super::counting::CountingSwitch;
use super::inbox::{Inbox, Outboxes, RingLayouts};
use super::receive::Server;
use super::rma_window::RmaWindow;
use super::state::Protocol;
use super::watchdog::{Shared, Watchdog};
use super::window::{HostSegments, Mapped};

/// One mpi job as this process sees it.
pub(crate) struct MpiWorld {
    /// What outlives the job's communicator.
    pub(super) kept: Kept,
    /// What is built over the job's communicator.
    pub(super) job: JobParts,
}

/// The parts a rebuild keeps: the rank's identity (a spare takes a dead rank's number, so
/// numbers and sizes stay) and the host's shared segments with their contents and counters.
pub(super) struct Kept {
    pub(super) rank: usize,
    pub(super) ranks: usize,
    pub(super) topology: Topology,
    pub(super) segment_len: usize,
    /// The host's shared window and the segments this process maps (`window.rs`).
    pub(super) host: HostSegments,
    /// The inboxes of the host's ranks in that window (`inbox.rs`), which each job claims
    /// rings in.
    pub(super) rings: RingLayouts,
}

/// The parts a rebuild drops and builds again over the new communicator: every MPI object of
/// the job, the watchdog tree with its failure state, the rings' claims, the counting switch
/// and the protocol state (whose pending operations then fail).
pub(super) struct JobParts {
    pub(super) comm: ffi::MPI_Comm,
    /// The failure state and sleeper this thread shares with the watchdog's: a failure
    /// belongs to the job it happened in, so a rebuilt job starts with none.
    pub(super) shared: Arc<Shared>,
    /// The watchdog tree over the job's processes (`watchdog/`): its links follow the
    /// numbering and the processes of one job, so a rebuild connects a new tree, the
    /// replacement joining it as every rank did at start.
    pub(super) watchdog: RefCell<Option<Watchdog>>,
    /// The MPI-3 window over every segment that carries RMA to ranks this process does not
    /// map (`rma_window.rs`); `None` keeps that RMA on active messages.
    pub(super) rma: Option<RmaWindow>,
    /// The rings this rank claims in the inboxes of its host's ranks (unless
    /// `PGAS_MPI_PSHM=0`), on its first message to each.
    pub(super) outboxes: Outboxes,
    /// The rings of this rank's inbox that senders claimed.
    pub(super) inbox: Option<Inbox>,
    /// Whether any other rank sends to this one through MPI (it is on another host, or
    /// `PGAS_MPI_PSHM=0`); when none does, polling skips the MPI receives, whose test costs a
    /// turn of MPI's progress engine.
    pub(super) mpi_peers: bool,
    /// The write-counting switch across processes (`counting.rs`).
    pub(super) counting: CountingSwitch,
    /// The protocol state a progress round borrows (`state.rs`).
    pub(super) st: RefCell<Protocol>,
    /// The bytes of the user AM `poll` runs straight off the wire (`progress.rs`): a receive
    /// buffer, swapped with the slot's so that the slot is posted again at once.
    pub(super) direct: RefCell<Box<[u8]>>,
    /// The job has ended (torn down, or failed): no MPI call may be made for it any more, so
    /// a handle that outlived it gets [`BridgeError::JobEnded`] instead of progress.
    pub(super) ended: Cell<bool>,
}

impl std::fmt::Debug for MpiWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiWorld")
            .field("rank", &self.kept.rank)
            .field("ranks", &self.kept.ranks)
            .field("topology", &self.kept.topology)
            .field("segment_len", &self.kept.segment_len)
            .finish()
    }
}

impl MpiWorld {
    /// The world of `kept` and `job`: how setup assembles it, and how a rebuild will, with
    /// the kept parts of the old world and job parts built over the new communicator.
    pub(super) fn from_parts(kept: Kept, job: JobParts) -> MpiWorld {
        MpiWorld { kept, job }
    }

    /// The parts serving a message reaches (`receive.rs`), borrowed for a round.
    #[inline]
    pub(super) fn server(&self) -> Server<'_> {
        Server {
            comm: self.job.comm,
            host: &self.kept.host,
            rma: self.job.rma.as_ref(),
            counting: &self.job.counting,
        }
    }

    pub(crate) fn rank(&self) -> usize {
        self.kept.rank
    }

    pub(crate) fn ranks(&self) -> usize {
        self.kept.ranks
    }

    pub(crate) fn topology(&self) -> Topology {
        self.kept.topology
    }

    pub(crate) fn segment_len(&self) -> usize {
        self.kept.segment_len
    }

    pub(crate) fn counters(&self) -> &WriteCounters {
        self.own().counters()
    }

    /// Whether this job counts incoming writes (the mode every mapping was made with).
    pub(crate) fn write_counting(&self) -> WriteCounting {
        self.own().counting()
    }

    /// Messages sent on `TAG_MSG`, through the rings and to itself ([`Endpoint::messages_sent`]).
    pub(crate) fn messages_sent(&self) -> u64 {
        self.job.st.borrow().sends.sent()
    }

    #[inline]
    pub(super) fn own(&self) -> &Mapped {
        self.kept.host.own()
    }

    /// True if a put to `rank` travels as an active message: a rank this process does not
    /// map, without the RMA window or counting writes now (`counting.rs`).
    pub(crate) fn puts_by_messages(&self, rank: usize) -> bool {
        !self.maps(rank) && !self.job.counting.window_puts(rank)
    }

    /// True if this process maps `rank`'s segment (a rank of this host, with PSHM).
    #[inline]
    pub(crate) fn maps(&self, rank: usize) -> bool {
        matches!(self.mapped(rank), Ok(Some(_)))
    }

    /// The mapping of `rank` if this process shares its memory, after checking it exists.
    #[inline]
    pub(super) fn mapped(&self, rank: usize) -> Result<Option<&Mapped>, BridgeError> {
        self.kept.host.mapped(rank)
    }

    pub(crate) fn segment_base(&self, rank: usize) -> Result<*mut u8, BridgeError> {
        match self.mapped(rank)? {
            Some(m) => Ok(m.segment.base()),
            None => Err(BridgeError::NotAddressable {
                rank,
                me: self.kept.rank,
            }),
        }
    }

    /// `r` as the program gets it from an operation of this world. With ULFM, an MPI error
    /// saying a peer died or the job's communicator was revoked unwinds the rank as a peer's
    /// failure (which the recovery answers) instead of reaching the program, where an
    /// `expect` would print it as this rank's panic. Every operation has let go of the
    /// caller's memory when it returns (`lent.rs`), so unwinding from here leaves MPI holding
    /// none of it.
    #[inline]
    pub(crate) fn or_peer_lost<T>(&self, r: Result<T, BridgeError>) -> Result<T, BridgeError> {
        or_peer_lost(self.job.comm, r)
    }

    pub(super) fn check_range(
        &self,
        rank: usize,
        offset: usize,
        len: usize,
    ) -> Result<(), BridgeError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.kept.segment_len => Ok(()),
            _ => Err(BridgeError::OutOfSegment {
                rank,
                offset,
                len,
                segment_len: self.kept.segment_len,
            }),
        }
    }
}
