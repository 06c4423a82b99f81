//! The host's shared-memory window: where this rank's segment, its counters and its AM inbox
//! live, and how this process maps those of the other ranks of its host.
//!
//! Each rank's piece of the window is: slack to align to a page, the counters page, the
//! segment (rounded up to pages), then (with shared-memory AMs) its inbox: a claim table and
//! at most `PGAS_MPI_RINGS` rings, each taken by a sender of the host on first use
//! (`inbox.rs`). Page-aligned offsets are the same in every process's mapping of the window, so
//! aligning up finds the same bytes everywhere.

use std::ffi::{CString, c_int, c_void};
use std::ptr::NonNull;

use ::mpi::ffi;

use crate::atomic::{AtomicOp, AtomicResult};
use crate::counters::{WriteAck, WriteCounters, WriteCounting};
use crate::error::BridgeError;
use crate::segment::Segment;

use super::calls::check;
use super::inbox::{InboxLayout, RingLayouts, inbox_bytes, rings_per_inbox};

/// The page size the window's layout is built on.
const PAGE: usize = 4096;

/// A segment of a rank on this host, mapped from the shared window, with its counters.
pub(super) struct Mapped {
    pub(super) segment: Segment,
    /// Points into the same window, the page before the segment; valid while the window is.
    counters: NonNull<WriteCounters>,
    /// The job's mode: whether writes into this segment bump its counters.
    counting: WriteCounting,
}

impl Mapped {
    #[inline]
    pub(super) fn counters(&self) -> &WriteCounters {
        // SAFETY: the counters page lies in the shared window, which outlives every use (the
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

    /// Takes the bytes and counters of `old`, this rank's own segment in the window the host
    /// had before a loss (`rebuild.rs`): the segment moves to this new mapping, its `(rank,
    /// offset)` addresses naming the same bytes, and the old pages are released. Nobody else
    /// accesses either meanwhile.
    #[cfg_attr(not(feature = "ulfm"), allow(dead_code))]
    pub(super) fn take_over(&self, old: &Mapped) -> Result<(), BridgeError> {
        const CHUNK: usize = 1 << 20;
        let len = old.segment.len().min(self.segment.len());
        let mut buf = vec![0u8; CHUNK.min(len)];
        for at in (0..len).step_by(CHUNK) {
            let part = &mut buf[..CHUNK.min(len - at)];
            old.segment.read(at, part)?;
            self.segment.write(at, part)?;
        }
        self.counters().take_over(old.counters());
        // The old pages' memory goes back to the system where the window's memory allows it
        // (shared memory on tmpfs); elsewhere the call fails and the pages stay, unused.
        // Whole pages inside the segment only: the memory around it (the window's, or the RMA
        // window's that held the segment) is not this segment's to release.
        let base = old.segment.base() as usize;
        let (start, end) = (base.next_multiple_of(PAGE), (base + len) / PAGE * PAGE);
        if start < end {
            // SAFETY: `start..end` are whole pages inside `old`'s segment, whose bytes were
            // copied above; they stay mapped (madvise does not unmap), so an address taken
            // before the move reads zeroes, not freed memory; every access to segment memory
            // is a raw copy or atomic, never a Rust reference, and no process accesses this
            // segment any more (the others dropped their old mappings of it).
            let _ = unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_REMOVE)
            };
        }
        Ok(())
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

/// What this process maps of its host's window, by job rank.
pub(super) struct HostMapping {
    pub(super) win: ffi::MPI_Win,
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

/// The host's shared window as this process keeps it for the job's life: the segments it
/// maps, by job rank. A rebuild over a new communicator keeps it while the host's processes
/// live, so the segments keep their contents.
pub(super) struct HostSegments {
    /// This process's job rank.
    me: usize,
    win: ffi::MPI_Win,
    /// The host's communicator the window was allocated on.
    node_comm: ffi::MPI_Comm,
    /// By rank: the segments this process maps (its own always, its host's unless
    /// `PGAS_MPI_PSHM=0`).
    mapped: Box<[Option<Mapped>]>,
    /// The job ranks of the processes of `node_comm`, which a free waits for.
    node_ranks: Vec<usize>,
    /// A process of `node_comm` was lost: freeing is collective over it and would never
    /// complete, so the window and its communicator stay (MPI finalizes with them).
    orphaned: bool,
}

impl HostSegments {
    /// The segments of `mapping` (allocated on `node_comm`), seen by job rank `me`.
    pub(super) fn new(
        me: usize,
        node_comm: ffi::MPI_Comm,
        node_ranks: Vec<usize>,
        mapping: HostMapping,
    ) -> HostSegments {
        HostSegments {
            me,
            win: mapping.win,
            node_comm,
            mapped: mapping.mapped.into_boxed_slice(),
            node_ranks,
            orphaned: false,
        }
    }

    /// After the processes of the ranks `lost` died: their segments are no longer mapped
    /// (their bytes were the dead processes', a replacement has a segment of its own), and
    /// if one of them shared this window it is never freed. The other mappings stay, so
    /// the survivors' segments keep their contents and addresses.
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

    /// Frees the window and the host's communicator (collective over the host): after every
    /// `Segment` over it was dropped and no process accesses it any more. An orphaned window
    /// (`after_loss`) is left as it is.
    pub(super) fn free(&self) -> Result<(), BridgeError> {
        if self.orphaned {
            return Ok(());
        }
        let (mut win, mut node_comm) = (self.win, self.node_comm);
        // SAFETY: the window is freed exactly once, by the teardown that ends the job, after
        // its barrier (no access remains) and after the endpoint and every `Segment` over it
        // were dropped (`launch`).
        check(unsafe { ffi::MPI_Win_free(&mut win) }, "MPI_Win_free")?;
        // SAFETY: freed exactly once; nothing uses the host communicator any more.
        check(
            unsafe { ffi::MPI_Comm_free(&mut node_comm) },
            "MPI_Comm_free(host)",
        )
    }
}

/// Bytes of one rank's piece of the window, and of its segment rounded up to pages; `rings`
/// per inbox (0 without shared memory).
fn piece_len(segment_len: usize, rings: usize) -> (usize, usize) {
    let segment_pages = segment_len.div_ceil(PAGE) * PAGE;
    (2 * PAGE + segment_pages + inbox_bytes(rings), segment_pages)
}

/// Allocates the host's window on `node_comm` (collective) and maps this rank's piece and,
/// with `pshm`, those of the other ranks of the host. `node_ranks[i]` is the job rank of the
/// host's `i`-th process; `rank` is this process's job rank. Ends with a barrier of the host,
/// after which every piece is zeroed and may be written. With `own_segment` (the job's RMA
/// window allocated the segments, `rma_window.rs`; only when no process maps another's) the
/// pieces hold no segment and this rank's segment is that memory.
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
    let (piece, segment_pages) = piece_len(
        if own_segment.is_some() {
            0
        } else {
            segment_len
        },
        rings,
    );
    let (win, base) = allocate(node_comm, piece)?;
    // Segments start zeroed, as on smp: MPI does not promise zeroed memory. This touches every
    // page of the piece (see the top-level README on memory).
    // SAFETY: `base` is this process's own piece of `piece` bytes, just allocated; no other
    // process touches it before the node barrier at the end of this function, and the fill is
    // `shared_copy`'s, like every other access to window memory.
    unsafe { crate::shared_copy::fill(base, 0, piece) };

    let mut mapped: Vec<Option<Mapped>> = (0..ranks).map(|_| None).collect();
    let mut outboxes: Vec<Option<InboxLayout>> = (0..ranks).map(|_| None).collect();
    let mut inbox = None;
    for (place, &job_rank) in node_ranks.iter().enumerate() {
        if !pshm && job_rank != rank {
            continue;
        }
        let ptr = query(win, place, piece, job_rank)?;
        // Aligning up inside the piece: the slack page makes room, so both the counters page
        // and the segment after it lie inside the piece.
        let counters = ptr.wrapping_add(ptr.align_offset(PAGE));
        let segment_start = counters.wrapping_add(PAGE);
        let start = match own_segment {
            Some(elsewhere) if job_rank == rank => elsewhere,
            _ => NonNull::new(segment_start).expect("inside a mapped window"),
        };
        // SAFETY: the segment's `segment_len` bytes lie inside the piece (after the counters
        // page), page-aligned, or in the RMA window MPI allocated for it; either is mapped until `teardown` frees the window after the endpoint
        // and every `Segment` are gone; they are accessed only through `Segment` and MPI.
        let segment = unsafe { Segment::borrowed(job_rank, start, segment_len) };
        mapped[job_rank] = Some(Mapped {
            segment,
            counters: NonNull::new(counters.cast()).expect("inside a mapped window"),
            counting,
        });
        if rings == 0 {
            continue;
        }
        // SAFETY: the inbox follows the segment's pages inside the piece (`piece_len` counts
        // it), page-aligned, zeroed before the node barrier below and mapped until teardown;
        // it is used only through `InboxLayout` and the rings it hands out (`inbox.rs`).
        let layout = unsafe { InboxLayout::new(segment_start.wrapping_add(segment_pages), rings) };
        if job_rank == rank {
            inbox = Some(layout);
        } else {
            outboxes[job_rank] = Some(layout);
        }
    }
    // Everyone has zeroed its piece before anyone may write into it.
    // SAFETY: `node_comm` is a valid communicator of this job.
    check(unsafe { ffi::MPI_Barrier(node_comm) }, "MPI_Barrier(host)")?;
    Ok(HostMapping {
        win,
        mapped,
        outboxes,
        inbox,
        ring_per_sender: !pshm || rings + 1 >= node_ranks.len(),
    })
}

/// `MPI_Win_allocate_shared` of `piece` bytes per process, non-contiguous (each process's
/// piece on its own pages, near its core), with errors returned rather than fatal.
fn allocate(
    node_comm: ffi::MPI_Comm,
    piece: usize,
) -> Result<(ffi::MPI_Win, *mut u8), BridgeError> {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    let mut info = unsafe { ffi::RSMPI_INFO_NULL };
    // SAFETY: MPI is initialized; `info` is written with a new info object.
    check(
        unsafe { ffi::MPI_Info_create(&mut info) },
        "MPI_Info_create",
    )?;
    let key = CString::new("alloc_shared_noncontig").expect("no nul");
    let value = CString::new("true").expect("no nul");
    // SAFETY: `info` was just created; both strings are nul-terminated and live across the call.
    let set = check(
        unsafe { ffi::MPI_Info_set(info, key.as_ptr(), value.as_ptr()) },
        "MPI_Info_set(alloc_shared_noncontig)",
    );
    let mut base: *mut c_void = std::ptr::null_mut();
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    let mut win = unsafe { ffi::RSMPI_WIN_NULL };
    let allocated = set.and_then(|()| {
        // SAFETY: `info` and `node_comm` are valid handles; `base` and `win` are written by
        // the call (baseptr is passed as the address of a pointer, as MPI specifies).
        check(
            unsafe {
                ffi::MPI_Win_allocate_shared(
                    piece as ffi::MPI_Aint,
                    1,
                    info,
                    node_comm,
                    (&mut base as *mut *mut c_void).cast(),
                    &mut win,
                )
            },
            "MPI_Win_allocate_shared",
        )
    });
    // SAFETY: `info` is a valid info object, freed once; MPI copied what it needed.
    let freed = check(unsafe { ffi::MPI_Info_free(&mut info) }, "MPI_Info_free");
    allocated?;
    freed?;
    // SAFETY: `win` is the window just allocated; ERRORS_RETURN is a predefined handler.
    check(
        unsafe { ffi::MPI_Win_set_errhandler(win, ffi::RSMPI_ERRORS_RETURN) },
        "MPI_Win_set_errhandler",
    )?;
    if base.is_null() {
        return Err(BridgeError::Conduit(format!(
            "MPI_Win_allocate_shared returned no memory for a piece of {piece} bytes"
        )));
    }
    Ok((win, base.cast()))
}

/// The address in this process of the piece of the host's `place`-th process (job rank
/// `job_rank`), after checking it holds `piece` bytes.
fn query(
    win: ffi::MPI_Win,
    place: usize,
    piece: usize,
    job_rank: usize,
) -> Result<*mut u8, BridgeError> {
    let (mut size, mut disp, mut ptr): (ffi::MPI_Aint, c_int, *mut c_void) =
        (0, 0, std::ptr::null_mut());
    // SAFETY: `win` is a valid shared window and `place` a rank of its communicator; the
    // three outputs are written by the call (baseptr as the address of a pointer).
    check(
        unsafe {
            ffi::MPI_Win_shared_query(
                win,
                place as c_int,
                &mut size,
                &mut disp,
                (&mut ptr as *mut *mut c_void).cast(),
            )
        },
        "MPI_Win_shared_query",
    )?;
    if ptr.is_null() || (size as usize) < piece {
        return Err(BridgeError::Conduit(format!(
            "the shared window of rank {job_rank} has {size} bytes, {piece} expected"
        )));
    }
    Ok(ptr.cast())
}
