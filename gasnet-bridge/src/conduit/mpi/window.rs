//! The host's shared memory as the conduit lays it out: where this rank's segment, its
//! counters and its AM inbox live, and how this process maps those of the other ranks of its
//! host.
//!
//! Each rank's piece (`host_memory.rs`) is: the counters page, the segment (rounded up to
//! pages), then (with shared-memory AMs) its inbox: a claim table and at most `PGAS_MPI_RINGS`
//! rings, each taken by a sender of the host on first use (`inbox.rs`), then the token page.
//! Every mapping of a piece starts at a page, so offsets name the same bytes everywhere.

use std::cell::RefCell;
use std::ptr::NonNull;

use ::mpi::ffi;

use crate::atomic::{AtomicOp, AtomicResult};
use crate::counters::{WriteAck, WriteCounters, WriteCounting};
use crate::error::BridgeError;
use crate::segment::Segment;

use super::calls::check;
use super::host_memory::{Mapping, OwnPiece, PAGE, PieceId, exchange, map_peer};
use super::inbox::{InboxLayout, RingLayouts, inbox_bytes, rings_per_inbox};

/// A segment of a rank on this host, mapped from the shared memory, with its counters.
pub(super) struct Mapped {
    pub(super) segment: Segment,
    /// Points into the same piece, the page before the segment; valid while the piece is mapped.
    counters: NonNull<WriteCounters>,
    /// The job's mode: whether writes into this segment bump its counters.
    counting: WriteCounting,
}

impl Mapped {
    #[inline]
    pub(super) fn counters(&self) -> &WriteCounters {
        // SAFETY: the counters page lies in the shared memory, which outlives every use (the
        // world frees it in `teardown`, after the endpoint is gone); it holds three u64 atomics
        // only ever accessed atomically (`WriteCounters` is `repr(C)`), zeroed at creation.
        unsafe { self.counters.as_ref() }
    }

    /// The job's write-counting mode.
    pub(super) fn counting(&self) -> WriteCounting {
        self.counting
    }

    /// Counts a write that landed in this segment, if the job counts writes.
    #[inline]
    pub(super) fn count_write(&self) -> WriteAck {
        self.counting.count(self.counters())
    }

    /// Runs atomic `op` on the word at `offset` and counts it if it wrote (if the job
    /// counts): an atomic on mapped memory, as on smp.
    #[inline]
    pub(super) fn atomic(&self, offset: usize, op: AtomicOp) -> Result<AtomicResult, BridgeError> {
        let word = self.segment.atomic_u64(offset)?;
        let ec = self.counting.epoch_now(self.counters());
        let (previous, wrote) = op.apply(word);
        let ack = wrote.then(|| self.counting.count_since(self.counters(), 1, ec));
        Ok(AtomicResult { previous, ack })
    }

    /// Writes `src` at `offset` and counts the write (if the job counts): a put into mapped
    /// memory, as on smp.
    #[inline]
    pub(super) fn write_counted(&self, offset: usize, src: &[u8]) -> Result<WriteAck, BridgeError> {
        let ec = self.counting.epoch_now(self.counters());
        self.segment.write(offset, src)?;
        Ok(self.counting.count_since(self.counters(), 1, ec))
    }
}

/// What this process maps of its host's memory, by job rank.
pub(super) struct HostMapping {
    /// This process's piece.
    own: OwnPiece,
    /// Every piece this process mapped, its own included.
    maps: Vec<Mapping>,
    /// By rank: the segments this process maps.
    pub(super) mapped: Vec<Option<Mapped>>,
    /// By rank: the inbox of that rank of this host (`inbox.rs`), for this rank to claim a
    /// ring in.
    pub(super) outboxes: Vec<Option<InboxLayout>>,
    /// This rank's inbox (`None` without shared memory or alone on its host).
    pub(super) inbox: Option<InboxLayout>,
    /// Every other rank of the host can have a ring in every inbox (else some send through
    /// MPI).
    pub(super) ring_per_sender: bool,
}

impl HostMapping {
    /// The rings' layouts in this mapping, taken out of it for the world to keep.
    pub(super) fn take_rings(&mut self) -> RingLayouts {
        RingLayouts {
            outboxes: std::mem::take(&mut self.outboxes),
            inbox: self.inbox.take(),
            ring_per_sender: self.ring_per_sender,
        }
    }
}

/// The host's shared memory as this process keeps it for the job's life: the segments it
/// maps, by job rank. A rebuild over a new communicator keeps it while the host's processes
/// live, so the segments keep their contents and their addresses.
pub(super) struct HostSegments {
    /// This process's job rank.
    me: usize,
    /// This process's piece, kept open so that a replacement joining the host can map it.
    own: OwnPiece,
    /// Every piece this process mapped, unmapped by [`HostSegments::free`].
    maps: RefCell<Vec<Mapping>>,
    /// The host's communicator the pieces were exchanged on.
    node_comm: ffi::MPI_Comm,
    /// By rank: the segments this process maps (its own always, its host's unless
    /// `PGAS_MPI_PSHM=0`).
    mapped: Box<[Option<Mapped>]>,
    /// The job ranks of the processes of `node_comm`.
    node_ranks: Vec<usize>,
    /// A process of `node_comm` was lost: freeing the communicator is collective over it and
    /// would never complete, so it stays (MPI finalizes with it).
    orphaned: bool,
}

impl HostSegments {
    /// The segments of `mapping` (exchanged on `node_comm`), seen by job rank `me`.
    pub(super) fn new(
        me: usize,
        node_comm: ffi::MPI_Comm,
        node_ranks: Vec<usize>,
        mapping: HostMapping,
    ) -> HostSegments {
        HostSegments {
            me,
            own: mapping.own,
            maps: RefCell::new(mapping.maps),
            node_comm,
            mapped: mapping.mapped.into_boxed_slice(),
            node_ranks,
            orphaned: false,
        }
    }

    /// After the processes of the ranks `lost` died: their segments are no longer mapped
    /// (their bytes were the dead processes', a replacement has a segment of its own), and
    /// if one of them was of this host its communicator is never freed. The other mappings
    /// stay, so the survivors' segments keep their contents and addresses. The dead pieces
    /// stay mapped until [`HostSegments::free`]: an address taken from one before the loss
    /// still points at memory.
    #[cfg_attr(not(feature = "ulfm"), allow(dead_code))]
    pub(super) fn after_loss(&mut self, lost: &[usize]) {
        for &rank in lost {
            if rank != self.me {
                if let Some(m) = self.mapped.get_mut(rank) {
                    *m = None;
                }
            }
        }
        self.orphaned |= self.node_ranks.iter().any(|r| lost.contains(r));
    }

    /// After [`HostSegments::after_loss`], in a rebuilt job whose host communicator is
    /// `node_comm` (its processes' job ranks `node_ranks`): maps the pieces of the
    /// replacements that joined this host, among `lost` (collective over the host, matching a
    /// replacement's [`map_host`]). Returns the replacements' inboxes, for this rank's rings
    /// toward them, and whether every inbox of the host has a ring per sender.
    #[cfg_attr(not(feature = "ulfm"), allow(dead_code))]
    pub(super) fn join(
        &mut self,
        node_comm: ffi::MPI_Comm,
        node_ranks: &[usize],
        lost: &[usize],
        segment_len: usize,
        counting: WriteCounting,
    ) -> Result<(Vec<(usize, InboxLayout)>, bool), BridgeError> {
        let ids = exchange(node_comm, node_ranks.len(), self.own.id())?;
        let mut inboxes = Vec::new();
        let mut ring_per_sender = true;
        for (&rank, &id) in node_ranks.iter().zip(&ids) {
            ring_per_sender &= id.rings() + 1 >= node_ranks.len();
            if rank == self.me || !lost.contains(&rank) {
                continue;
            }
            let m = map_peer(id, rank)?;
            let (mapped, inbox) = lay_out(&m, rank, segment_len, id.rings(), counting, None);
            self.mapped[rank] = Some(mapped);
            inboxes.extend(inbox.map(|i| (rank, i)));
            self.maps.borrow_mut().push(m);
        }
        self.node_comm = node_comm;
        self.node_ranks = node_ranks.to_vec();
        self.orphaned = false;
        Ok((inboxes, ring_per_sender))
    }

    /// This rank's own segment.
    #[inline]
    pub(super) fn own(&self) -> &Mapped {
        self.mapped[self.me].as_ref().expect("own segment")
    }

    /// The mapping of `rank` if this process shares its memory, after checking it exists.
    #[inline]
    pub(super) fn mapped(&self, rank: usize) -> Result<Option<&Mapped>, BridgeError> {
        match self.mapped.get(rank) {
            Some(m) => Ok(m.as_ref()),
            None => Err(BridgeError::NoSuchRank {
                rank,
                ranks: self.mapped.len(),
            }),
        }
    }

    /// By rank: whether this process does not map that rank's segment.
    pub(super) fn unmapped(&self) -> impl Iterator<Item = bool> + '_ {
        self.mapped.iter().map(Option::is_none)
    }

    /// Unmaps every piece and frees the host's communicator (unless a process of it was
    /// lost): after every `Segment` over them was dropped and no process of the host accesses
    /// them any more. The own piece's memory goes when the last process unmaps it.
    pub(super) fn free(&self) -> Result<(), BridgeError> {
        for m in self.maps.take() {
            // SAFETY: the teardown that ends the job calls this once, after its barrier (no
            // process of the job accesses any segment any more) and after the endpoint and
            // every `Segment`, counters view and ring over these pieces were dropped
            // (`launch`).
            unsafe { m.unmap() };
        }
        if self.orphaned {
            return Ok(());
        }
        let mut node_comm = self.node_comm;
        // SAFETY: freed exactly once; nothing uses the host communicator any more.
        check(
            unsafe { ffi::MPI_Comm_free(&mut node_comm) },
            "MPI_Comm_free(host)",
        )
    }
}

/// Bytes of one rank's piece: the counters page, `segment_len` rounded up to pages, the inbox
/// of `rings` rings (0 without shared memory) rounded up to pages, the token page.
fn piece_len(segment_len: usize, rings: usize) -> usize {
    PAGE + segment_len.next_multiple_of(PAGE) + inbox_bytes(rings).next_multiple_of(PAGE) + PAGE
}

/// The segment (with its counters) and the inbox of job rank `rank` in the piece `m`, whose
/// inbox has `rings` rings; with `elsewhere` the segment is that memory instead (the job's
/// RMA window allocated it) and the piece holds its counters only.
fn lay_out(
    m: &Mapping,
    rank: usize,
    segment_len: usize,
    rings: usize,
    counting: WriteCounting,
    elsewhere: Option<NonNull<u8>>,
) -> (Mapped, Option<InboxLayout>) {
    let counters = m.base();
    let segment_start = counters.wrapping_add(PAGE);
    let start = elsewhere.unwrap_or(NonNull::new(segment_start).expect("inside a mapping"));
    // SAFETY: the segment's `segment_len` bytes lie inside the piece (after the counters
    // page), page-aligned, or in the RMA window MPI allocated for it; either is mapped until
    // `teardown` frees it after the endpoint and every `Segment` are gone; they are accessed
    // only through `Segment` and MPI.
    let segment = unsafe { Segment::borrowed(rank, start, segment_len) };
    let mapped = Mapped {
        segment,
        counters: NonNull::new(counters.cast()).expect("inside a mapping"),
        counting,
    };
    if rings == 0 {
        return (mapped, None);
    }
    let segment_pages = if elsewhere.is_some() {
        0
    } else {
        segment_len.next_multiple_of(PAGE)
    };
    // SAFETY: the inbox follows the segment's pages inside the piece (`piece_len` counts it),
    // page-aligned, zeroed by the kernel (a new memory file) or by `RingLayouts::after_loss`
    // before any rank uses it, and mapped until teardown; it is used only through
    // `InboxLayout` and the rings it hands out (`inbox.rs`).
    let inbox = unsafe { InboxLayout::new(segment_start.wrapping_add(segment_pages), rings) };
    (mapped, Some(inbox))
}

/// Makes this rank's piece (zeroed) and maps it and, with `pshm`, those of the other ranks of
/// the host (collective over `node_comm`, whose `i`-th process holds job rank `node_ranks[i]`;
/// `rank` is this process's). With `own_segment` (the job's RMA window allocated the segments,
/// `rma_window.rs`; only when no process maps another's) the pieces hold no segment and this
/// rank's segment is that memory.
#[allow(clippy::too_many_arguments)]
pub(super) fn map_host(
    node_comm: ffi::MPI_Comm,
    node_ranks: &[usize],
    rank: usize,
    ranks: usize,
    segment_len: usize,
    pshm: bool,
    counting: WriteCounting,
    own_segment: Option<NonNull<u8>>,
) -> Result<HostMapping, BridgeError> {
    let rings = if pshm {
        rings_per_inbox(node_ranks.len()).map_err(|e| BridgeError::Conduit(e.to_string()))?
    } else {
        0
    };
    let in_piece = if own_segment.is_some() {
        0
    } else {
        segment_len
    };
    let piece = piece_len(in_piece, rings);
    let (own, own_map) = OwnPiece::create(rank, piece, rings)?;
    let ids = if pshm {
        exchange(node_comm, node_ranks.len(), own.id())?
    } else {
        Vec::new()
    };
    let mut mapped: Vec<Option<Mapped>> = (0..ranks).map(|_| None).collect();
    let mut outboxes: Vec<Option<InboxLayout>> = (0..ranks).map(|_| None).collect();
    let (mut inbox, mut maps) = (None, Vec::new());
    let mut own_map = Some(own_map);
    let mut ring_per_sender = true;
    for (place, &job_rank) in node_ranks.iter().enumerate() {
        let (m, elsewhere, id_rings) = if job_rank == rank {
            (own_map.take().expect("one own rank"), own_segment, rings)
        } else if pshm {
            let id: PieceId = ids[place];
            (map_peer(id, job_rank)?, None, id.rings())
        } else {
            continue;
        };
        ring_per_sender &= !pshm || id_rings + 1 >= node_ranks.len();
        let (segment, layout) = lay_out(&m, job_rank, segment_len, id_rings, counting, elsewhere);
        mapped[job_rank] = Some(segment);
        if job_rank == rank {
            inbox = layout;
        } else {
            outboxes[job_rank] = layout;
        }
        maps.push(m);
    }
    Ok(HostMapping {
        own,
        maps,
        mapped,
        outboxes,
        inbox,
        ring_per_sender,
    })
}
