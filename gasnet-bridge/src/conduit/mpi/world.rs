//! The state of one mpi job as this process sees it: communicators, windows, mapped segments,
//! rings and the protocol state; the files beside this one each add one mechanism on it.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use ::mpi::ffi;

use crate::counters::{WriteCounters, WriteCounting};
use crate::error::BridgeError;
use crate::membarrier::Scope;
use crate::topology::Topology;

use super::inbox::{Inbox, Outboxes};
use super::rma_window::RmaWindow;
use super::state::State;
use super::watchdog::{Shared, Watchdog};
use super::window::Mapped;

/// One mpi job as this process sees it.
pub(crate) struct MpiWorld {
    pub(super) rank: usize,
    pub(super) ranks: usize,
    pub(super) comm: ffi::MPI_Comm,
    pub(super) node_comm: ffi::MPI_Comm,
    pub(super) win: ffi::MPI_Win,
    pub(super) topology: Topology,
    pub(super) segment_len: usize,
    /// By rank: the segments this process maps (its own always, its host's unless
    /// `PGAS_MPI_PSHM=0`).
    pub(super) mapped: Box<[Option<Mapped>]>,
    /// The rings this rank claims in the inboxes of its host's ranks (unless
    /// `PGAS_MPI_PSHM=0`), on its first message to each.
    pub(super) outboxes: Outboxes,
    /// The rings of this rank's inbox that senders claimed.
    pub(super) inbox: Option<Inbox>,
    /// Whether any other rank sends to this one through MPI (it is on another host, or
    /// `PGAS_MPI_PSHM=0`); when none does, polling skips the MPI receives, whose test costs a
    /// turn of MPI's progress engine.
    pub(super) mpi_peers: bool,
    /// The MPI-3 window over every segment that carries RMA to ranks this process does not
    /// map (`rma_window.rs`); `None` keeps that RMA on active messages.
    pub(super) rma: Option<RmaWindow>,
    /// Which threads can write into this rank's segment and count there: the write-counting
    /// switch's barrier reaches them (`Host` when processes of this host map it).
    pub(super) counting_scope: Scope,
    /// By rank: whether puts to it go through the window now: a rank this process does not
    /// map, in a job with the window, that has not told this rank it counts incoming writes
    /// (a notice of `K_COUNTING`; puts to such a rank go as active messages, so its IWC
    /// counts each one: `counting.rs`). One byte per rank, read by every put.
    pub(super) window_puts: Box<[Cell<bool>]>,
    pub(super) st: RefCell<State>,
    /// The job has ended (torn down, or failed): no MPI call may be made for it any more, so
    /// a handle that outlived it gets [`BridgeError::JobEnded`] instead of progress.
    pub(super) ended: Cell<bool>,
    /// The bytes of the user AM `poll` runs straight off the wire (`progress.rs`): a receive
    /// buffer, swapped with the slot's so that the slot is posted again at once.
    pub(super) direct: RefCell<Box<[u8]>>,
    pub(super) shared: Arc<Shared>,
    pub(super) watchdog: RefCell<Option<Watchdog>>,
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
    pub(crate) fn rank(&self) -> usize {
        self.rank
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

    /// Whether this job counts incoming writes (the mode every mapping was made with).
    pub(crate) fn write_counting(&self) -> WriteCounting {
        self.own().counting()
    }

    /// Messages sent on `TAG_MSG`, through the rings and to itself ([`Endpoint::messages_sent`]).
    pub(crate) fn messages_sent(&self) -> u64 {
        self.st.borrow().sent
    }

    pub(super) fn own(&self) -> &Mapped {
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
    pub(super) fn mapped(&self, rank: usize) -> Result<Option<&Mapped>, BridgeError> {
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

    pub(super) fn check_range(
        &self,
        rank: usize,
        offset: usize,
        len: usize,
    ) -> Result<(), BridgeError> {
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
