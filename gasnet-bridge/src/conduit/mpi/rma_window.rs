//! Cross-host RMA through an MPI-3 window over every rank's segment (passive target).
//!
//! **When.** A job creates this window only if some rank reaches another through MPI (another
//! host, or `PGAS_MPI_PSHM=0`), the job does not count every write ([`WriteCounting::Off`] or
//! [`WriteCounting::Switched`], not [`WriteCounting::On`]) and `PGAS_MPI_RMA` is not `am`; all
//! three are agreed by every process at set-up (creating a window is collective). Otherwise
//! puts and gets to other hosts stay active messages.
//!
//! **Never for a counted write.** A counted put's ack must carry the IWC value *this* write
//! produced after its bytes landed, gapless per target. On a window that costs a flush, an
//! `MPI_Fetch_and_op` on the target's counter and a second flush: two round trips where the
//! active-message path needs one. So a put the target counts always travels as an active
//! message, and the IWC stays exact by construction: in a [`WriteCounting::On`] job every put
//! to another host does; in a [`WriteCounting::Switched`] job (what cd-runtime launches) the
//! puts to a rank that switched counting on do, the others use the window (`counting.rs`
//! tells how a switch-on moves a writer from one to the other without a write slipping
//! uncounted past it). An uncounted put's ack is [`WriteAck::UNCOUNTED`] on either path, so an
//! interception hook sees the same acks (when the flush completes the put) whichever path
//! carried the bytes.
//!
//! **How.** One window on the job communicator over every segment ([`Flavor`]:
//! `MPI_Win_allocate` when no process maps another's segment, else `MPI_Win_create` over the
//! segments in the host's shared memory), then `MPI_Win_lock_all` once (`MPI_MODE_NOCHECK`: nothing ever takes an exclusive lock) until
//! teardown. A blocking put or get is `MPI_Put` / `MPI_Get` and `MPI_Win_flush` on its target.
//! A non-blocking put returns with its source free: a small one is copied into a staging chunk
//! that lives until the next flush, a large one is followed by `MPI_Win_flush_local`; it stays
//! in flight until something flushes its target: user progress (`poll`), a wait on its
//! handle, a barrier, the end of the job, or an active-message request to the same target
//! (which keeps today's order of a put before a later request to the same rank), or
//! `Endpoint::flush_rma`. Many puts thus complete with one flush. Operations are numbered per
//! process; a target's flush completes every operation numbered below the count at the time of
//! that flush, so a later put's completion implies an earlier one's to the same target
//! ([`put_completes_after`]), which lets a caller track a flood by its last handle.
//!
//! Vector puts and gets are one `MPI_Put` / `MPI_Get` whose target datatype lists the pieces
//! (`datatype.rs`). Atomics stay active messages: an `MPI_Fetch_and_op` per atomic would need
//! its own flush, a round trip like the message's, and would not order with the AM path.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use ::mpi::ffi;

use crate::counters::{WriteAck, WriteCounting};
use crate::error::BridgeError;

use super::calls::{check, mpi_len, uint8};
use super::datatype::TargetPieces;
use super::lent_lost::lent_memory_lost;

/// Environment switch of the cross-host RMA path: `window` (the default) or `am` (the default
/// of a build with the `ulfm` feature: see [`RmaPath::from_env`]).
pub const RMA_ENV: &str = "PGAS_MPI_RMA";

/// Puts of at most this many bytes are copied into a staging chunk (their source is then free
/// at once); larger ones wait for local completion (`MPI_Win_flush_local`) instead.
const STAGE_MAX: usize = 16 << 10;
/// Bytes of one staging chunk.
const CHUNK: usize = 1 << 20;
/// Staged bytes past which a put first flushes everything (bounds the staging memory of a
/// flood that never makes progress).
const STAGE_LIMIT: usize = 64 << 20;

/// Ids of window operations carry this bit, the target in bits 40..62 and a sequence number in
/// bits 0..40, so they never collide with the ids of active-message operations.
const WINDOW_ID: u64 = 1 << 63;
/// Ids of window gets carry this bit too: only they have data to discard when their handle is
/// dropped, so dropping a put's handle never looks anything up.
const GET_ID: u64 = 1 << 62;
const TARGET_SHIFT: u32 = 40;
const SEQ_MASK: u64 = (1 << TARGET_SHIFT) - 1;
/// Ranks a window id can name.
const MAX_TARGETS: usize = 1 << (62 - TARGET_SHIFT);

/// Where the window's memory comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flavor {
    /// `MPI_Win_allocate`: MPI allocates every segment (registered or shared memory, the
    /// fastest RMA MPI offers); possible when no process maps another rank's segment.
    Allocate,
    /// `MPI_Win_create` over segments that live in the host's shared memory (ranks of a host
    /// map each other's segments, and reach other hosts through this window).
    Create,
}

/// Which path carries RMA to ranks this process does not map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RmaPath {
    /// An MPI-3 window (this file).
    Window,
    /// Requests and acks over active messages (`rma.rs`), as GASNet's mpi-conduit does.
    ActiveMessages,
}

/// Why the RMA path could not be chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RmaPathError {
    /// `PGAS_MPI_RMA` holds something other than `window` or `am`.
    BadSwitch(String),
}

impl std::fmt::Display for RmaPathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RmaPathError::BadSwitch(v) => write!(
                f,
                "{RMA_ENV}={v:?}: expected \"window\" (an MPI-3 window, the default without \
                 the ulfm feature) or \"am\" (active messages)"
            ),
        }
    }
}

impl RmaPath {
    /// The path `PGAS_MPI_RMA` asks for (this process's view, before the job agrees). Unset,
    /// a build with the `ulfm` feature (whose jobs recover or end with one line after a loss,
    /// with spares or without) takes active messages: MPI's one-sided components are not made to
    /// survive a failure (Open MPI 5 says so when fault tolerance is on), and a window flush
    /// toward a process that died was seen never to return (`osc/rdma`, hosts emulated with
    /// `PGAS_MPI_HOST_SIZE`), where a message's wait sees the loss and unwinds.
    pub(super) fn from_env() -> Result<RmaPath, RmaPathError> {
        RmaPath::parse(
            std::env::var(RMA_ENV).ok().as_deref(),
            cfg!(feature = "ulfm"),
        )
    }

    /// The path a value of `PGAS_MPI_RMA` (unset: `None`) names, in a `fault_tolerant` build
    /// or not.
    fn parse(value: Option<&str>, fault_tolerant: bool) -> Result<RmaPath, RmaPathError> {
        match value.map(str::trim) {
            None | Some("") if fault_tolerant => Ok(RmaPath::ActiveMessages),
            None | Some("" | "window") => Ok(RmaPath::Window),
            Some("am") => Ok(RmaPath::ActiveMessages),
            Some(other) => Err(RmaPathError::BadSwitch(other.to_string())),
        }
    }
}

/// True if `id` names a window operation (else an active-message one).
#[inline]
pub(super) fn is_window_id(id: u64) -> bool {
    id & WINDOW_ID != 0
}

/// True if `id` names a window put (not a get).
#[inline]
pub(super) fn is_window_put(id: u64) -> bool {
    id & (WINDOW_ID | GET_ID) == WINDOW_ID
}

#[inline]
fn target_of(id: u64) -> usize {
    ((id & !(WINDOW_ID | GET_ID)) >> TARGET_SHIFT) as usize
}

/// True if window operation `later`'s completion implies `earlier`'s: two puts to one target,
/// `later` started after `earlier` (a flush of a target completes every operation started
/// toward it before the flush, and the acks of window puts are all [`WriteAck::UNCOUNTED`]).
#[inline]
pub(crate) fn put_completes_after(earlier: u64, later: u64) -> bool {
    is_window_put(earlier)
        && is_window_put(later)
        && target_of(earlier) == target_of(later)
        && (earlier & SEQ_MASK) < (later & SEQ_MASK)
}

/// Bytes of small non-blocking puts, kept until the flush that completes them.
#[derive(Default)]
struct Staging {
    /// Chunks in use; `Box<[u8]>` never moves its bytes, which MPI may still read.
    full: Vec<Box<[u8]>>,
    /// The chunk being filled (empty before the first put).
    current: Box<[u8]>,
    used: usize,
    /// Chunks free for reuse.
    free: Vec<Box<[u8]>>,
}

impl Staging {
    /// Copies `src` (at most [`STAGE_MAX`] bytes) into a chunk; the pointer stays valid until
    /// [`Staging::reset`]. `None` if [`STAGE_LIMIT`] bytes are staged already: flush first.
    /// The common case is one comparison and the copy (a flood of small puts pays it per put).
    #[inline]
    fn stage(&mut self, src: &[u8]) -> Option<*const u8> {
        if self.used + src.len() > self.current.len() && !self.next_chunk() {
            return None;
        }
        let dst = &mut self.current[self.used..self.used + src.len()];
        // A word (the common small put) as one move; other lengths through memcpy.
        if let (Ok(word), Ok(to)) = (
            <&[u8; 8]>::try_from(src),
            <&mut [u8; 8]>::try_from(&mut *dst),
        ) {
            *to = *word;
        } else {
            dst.copy_from_slice(src);
        }
        self.used += src.len();
        Some(dst.as_ptr())
    }

    /// Bytes staged since the last reset, each filled chunk counted whole (so an upper bound).
    fn total(&self) -> usize {
        self.full.len() * CHUNK + self.used
    }

    /// Moves on to a fresh chunk (the current one is full, or there is none yet); false if
    /// [`STAGE_LIMIT`] bytes are staged already.
    #[cold]
    #[inline(never)]
    fn next_chunk(&mut self) -> bool {
        if self.total() >= STAGE_LIMIT {
            return false;
        }
        let fresh = self
            .free
            .pop()
            .unwrap_or_else(|| vec![0u8; CHUNK].into_boxed_slice());
        let old = std::mem::replace(&mut self.current, fresh);
        if !old.is_empty() {
            self.full.push(old);
        }
        self.used = 0;
        true
    }

    /// Every staged put has completed: the chunks may be reused (two kept besides the current
    /// one, which stays current: a put-and-wait loop resets after every put and so touches
    /// no list).
    #[inline]
    fn reset(&mut self) {
        if !self.full.is_empty() {
            self.free.append(&mut self.full);
            self.free.truncate(2);
        }
        self.used = 0;
    }
}

/// A get waiting for its target's flush: the buffer MPI writes into.
struct PendingGet {
    id: u64,
    buf: Vec<u8>,
    /// Its handle was dropped: discard the data at the flush.
    forgotten: bool,
}

/// What is in flight on the window.
struct InFlight {
    next_seq: u64,
    /// By target: every operation numbered below this has completed at the target.
    flushed_below: Vec<u64>,
    /// Targets with operations started since their last flush (each once), and the flag.
    dirty: Vec<usize>,
    is_dirty: Vec<bool>,
    gets: Vec<PendingGet>,
    /// Gets whose flush came, waiting for their handle to take the data.
    got: HashMap<u64, Vec<u8>>,
    staging: Staging,
}

/// The job's RMA window over every rank's segment, locked for the whole job.
pub(super) struct RmaWindow {
    win: ffi::MPI_Win,
    /// Freed with its job: a handle that outlived the job may not flush it.
    freed: Cell<bool>,
    segment_len: usize,
    st: RefCell<InFlight>,
}

impl RmaWindow {
    /// Agrees with every process of `comm` (collective) on whether the job uses a window, and
    /// of which flavour. `needs`: this process reaches some rank through MPI; `alone`: it maps
    /// no other rank's segment.
    pub(super) fn agree(
        comm: ffi::MPI_Comm,
        ranks: usize,
        needs: bool,
        alone: bool,
        counting: WriteCounting,
    ) -> Result<Option<Flavor>, BridgeError> {
        let wanted = RmaPath::from_env().map_err(|e| BridgeError::Conduit(e.to_string()))?
            == RmaPath::Window
            && counting != WriteCounting::On
            && ranks <= MAX_TARGETS;
        // MAX over (needs, refuses, shares): one process reaching another through MPI makes
        // the window useful; one refusing it (switch, or counting every write) keeps everyone on active
        // messages; one mapping another's segment needs the segments where they are.
        let mine = [u64::from(needs), u64::from(!wanted), u64::from(!alone)];
        let mut all = [0u64; 3];
        // SAFETY: three u64 in and out, both arrays live across this blocking collective.
        check(
            unsafe {
                ffi::MPI_Allreduce(
                    mine.as_ptr().cast(),
                    all.as_mut_ptr().cast(),
                    3,
                    ffi::RSMPI_UINT64_T,
                    ffi::RSMPI_MAX,
                    comm,
                )
            },
            "MPI_Allreduce(RMA path)",
        )?;
        let [needed, refused, shared] = all;
        Ok(if needed == 0 || refused != 0 {
            None
        } else if shared == 0 {
            Some(Flavor::Allocate)
        } else {
            Some(Flavor::Create)
        })
    }

    /// `MPI_Win_allocate` of every rank's segment (collective): the window and this rank's
    /// segment in it, zeroed.
    pub(super) fn allocate(
        comm: ffi::MPI_Comm,
        ranks: usize,
        segment_len: usize,
    ) -> Result<(RmaWindow, NonNull<u8>), BridgeError> {
        let mut base: *mut c_void = std::ptr::null_mut();
        // SAFETY: reading a link-time constant of rsmpi's C shim.
        let mut win = unsafe { ffi::RSMPI_WIN_NULL };
        // SAFETY: `comm` is the job communicator; `base` and `win` are written by the call
        // (baseptr as the address of a pointer, as MPI specifies).
        check(
            unsafe {
                ffi::MPI_Win_allocate(
                    segment_len.max(8) as ffi::MPI_Aint,
                    1,
                    ffi::RSMPI_INFO_NULL,
                    comm,
                    (&mut base as *mut *mut c_void).cast(),
                    &mut win,
                )
            },
            "MPI_Win_allocate(segments)",
        )?;
        let Some(base) = NonNull::new(base.cast::<u8>()) else {
            return Err(BridgeError::Conduit(format!(
                "MPI_Win_allocate returned no memory for a segment of {segment_len} bytes"
            )));
        };
        // Segments start zeroed, as on smp: MPI does not promise zeroed memory.
        // SAFETY: `base` is this process's own `segment_len` bytes, just allocated; no one
        // writes into them before the job's set-up barrier.
        unsafe { crate::shared_copy::fill(base.as_ptr(), 0, segment_len) };
        Ok((RmaWindow::locked(win, ranks, segment_len)?, base))
    }

    /// `MPI_Win_create` over this rank's segment (`base`, `segment_len` bytes), which lives
    /// in the host's shared memory (collective).
    pub(super) fn create(
        comm: ffi::MPI_Comm,
        ranks: usize,
        base: *mut u8,
        segment_len: usize,
    ) -> Result<RmaWindow, BridgeError> {
        // SAFETY: reading a link-time constant of rsmpi's C shim.
        let mut win = unsafe { ffi::RSMPI_WIN_NULL };
        // SAFETY: `base` is this rank's segment of `segment_len` bytes, mapped until teardown,
        // which frees this window before the memory under it; `win` is written by the call.
        check(
            unsafe {
                ffi::MPI_Win_create(
                    base.cast::<c_void>(),
                    segment_len as ffi::MPI_Aint,
                    1,
                    ffi::RSMPI_INFO_NULL,
                    comm,
                    &mut win,
                )
            },
            "MPI_Win_create(segments)",
        )?;
        RmaWindow::locked(win, ranks, segment_len)
    }

    /// Sets errors to return and takes the job-long shared lock on every rank.
    fn locked(
        win: ffi::MPI_Win,
        ranks: usize,
        segment_len: usize,
    ) -> Result<RmaWindow, BridgeError> {
        // SAFETY: `win` was just created; ERRORS_RETURN is a predefined handler.
        check(
            unsafe { ffi::MPI_Win_set_errhandler(win, ffi::RSMPI_ERRORS_RETURN) },
            "MPI_Win_set_errhandler(segments)",
        )?;
        // SAFETY: `win` is valid; a shared lock on every rank, held until `free`.
        check(
            unsafe { ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, win) },
            "MPI_Win_lock_all",
        )?;
        Ok(RmaWindow {
            win,
            freed: Cell::new(false),
            segment_len,
            st: RefCell::new(InFlight {
                next_seq: 0,
                flushed_below: vec![0; ranks],
                dirty: Vec::new(),
                is_dirty: vec![false; ranks],
                gets: Vec::new(),
                got: HashMap::new(),
                staging: Staging::default(),
            }),
        })
    }

    /// Checks that `offset..offset + len` lies in a segment; MPI is never asked otherwise.
    #[inline]
    fn check(&self, target: usize, offset: usize, len: usize) -> Result<c_int, BridgeError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.segment_len => mpi_len(len),
            _ => Err(BridgeError::OutOfSegment {
                rank: target,
                offset,
                len,
                segment_len: self.segment_len,
            }),
        }
    }

    /// Starts a put from `src` (which must stay unchanged until local completion) and
    /// returns its id.
    fn start_put(
        &self,
        target: usize,
        offset: usize,
        src: *const u8,
        len: c_int,
    ) -> Result<u64, BridgeError> {
        // SAFETY: the caller keeps `len` bytes at `src` unchanged until local completion;
        // the target range was checked against the segment (the window's size).
        unsafe { self.raw_put(src, len, target, offset, (len, uint8())) }?;
        Ok(self.started(target))
    }

    /// `MPI_Put` of `count` bytes at `src` into `target`'s segment from byte `disp`, laid out
    /// there as `target_layout` (a count and a datatype): the one place this file calls it.
    ///
    /// # Safety
    /// The `count` bytes at `src` stay unchanged until the put completes locally (a flush or
    /// `MPI_Win_flush_local` of `target`), and the layout from `disp` lies in the segment
    /// (the window's size). The window is locked on every target for the whole job.
    #[inline]
    unsafe fn raw_put(
        &self,
        src: *const u8,
        count: c_int,
        target: usize,
        disp: usize,
        (target_count, target_type): (c_int, ffi::MPI_Datatype),
    ) -> Result<(), BridgeError> {
        // SAFETY: forwarded to the caller (above).
        let rc = unsafe {
            ffi::MPI_Put(
                src.cast(),
                count,
                uint8(),
                target as c_int,
                disp as ffi::MPI_Aint,
                target_count,
                target_type,
                self.win,
            )
        };
        check(rc, "MPI_Put")
    }

    /// `MPI_Get` of `count` bytes into `dst` from `target`'s segment at byte `disp`, laid out
    /// there as `target_layout`: the one place this file calls it.
    ///
    /// # Safety
    /// Nothing reads, writes or frees the `count` bytes at `dst` until a flush of `target`
    /// completes the get, and the layout from `disp` lies in the segment.
    #[inline]
    unsafe fn raw_get(
        &self,
        dst: *mut u8,
        count: c_int,
        target: usize,
        disp: usize,
        (target_count, target_type): (c_int, ffi::MPI_Datatype),
    ) -> Result<(), BridgeError> {
        // SAFETY: forwarded to the caller (above).
        let rc = unsafe {
            ffi::MPI_Get(
                dst.cast(),
                count,
                uint8(),
                target as c_int,
                disp as ffi::MPI_Aint,
                target_count,
                target_type,
                self.win,
            )
        };
        check(rc, "MPI_Get")
    }

    /// Numbers an operation just started toward `target` and marks the target dirty.
    fn started(&self, target: usize) -> u64 {
        Self::number(&mut self.st.borrow_mut(), target)
    }

    /// [`RmaWindow::started`] on state already borrowed.
    #[inline]
    fn number(st: &mut InFlight, target: usize) -> u64 {
        let seq = st.next_seq;
        st.next_seq += 1;
        if !st.is_dirty[target] {
            st.is_dirty[target] = true;
            st.dirty.push(target);
        }
        WINDOW_ID | ((target as u64) << TARGET_SHIFT) | (seq & SEQ_MASK)
    }

    /// A blocking put: `MPI_Put` and `MPI_Win_flush`; complete at the target on return.
    ///
    /// When nothing else is in flight (no put toward `target`, no get at all), the put is not
    /// numbered and its flush completes nothing else, so neither is recorded: the two MPI
    /// calls alone, as the latency of a lone put is bounded by them.
    #[inline]
    pub(super) fn put(&self, target: usize, offset: usize, src: &[u8]) -> Result<(), BridgeError> {
        let len = self.check(target, offset, src.len())?;
        let alone = {
            let st = self.st.borrow();
            !st.is_dirty[target] && st.gets.is_empty()
        };
        if !alone {
            self.start_put(target, offset, src.as_ptr(), len)?;
            self.flush_lent(target);
            return Ok(());
        }
        // SAFETY: `src` is borrowed until this returns, after the flush completed the put (a
        // failed flush ends the process: `flush_lent`); the target range was checked.
        unsafe { self.raw_put(src.as_ptr(), len, target, offset, (len, uint8())) }?;
        self.raw_flush(target)
            .unwrap_or_else(|e| lent_memory_lost(e));
        Ok(())
    }

    /// A non-blocking put; `src` is free on return; the id completes at a flush of `target`.
    ///
    /// Inlined, with its rare paths out of line: a flood of small puts pays this per put
    /// (`pgas-bench` `rput_flood` / `8B` across processes, ROADMAP).
    #[inline]
    pub(super) fn put_nb(
        &self,
        target: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<u64, BridgeError> {
        let len = self.check(target, offset, src.len())?;
        if src.len() > STAGE_MAX {
            return self.put_nb_large(target, offset, src, len);
        }
        let mut st = self.st.borrow_mut();
        // The staged bytes stay in their chunk until a flush of every dirty target resets it.
        let staged = match st.staging.stage(src) {
            Some(staged) => staged,
            None => {
                // A flood that never makes progress: complete it, then stage afresh.
                drop(st);
                self.flush_dirty()?;
                st = self.st.borrow_mut();
                st.staging
                    .stage(src)
                    .expect("a reset staging takes a small put")
            }
        };
        // One borrow for staging, the put and its number (a flood's per-put cost); MPI_Put
        // calls back into nothing of this process.
        // SAFETY: the staged bytes stay unchanged until a flush of every dirty target, which
        // completes this put first; the target range was checked against the segment.
        unsafe { self.raw_put(staged, len, target, offset, (len, uint8())) }?;
        Ok(Self::number(&mut st, target))
    }

    /// [`RmaWindow::put_nb`] of more than [`STAGE_MAX`] bytes: put from `src` itself, then
    /// wait for local completion.
    #[inline(never)]
    fn put_nb_large(
        &self,
        target: usize,
        offset: usize,
        src: &[u8],
        len: c_int,
    ) -> Result<u64, BridgeError> {
        let id = self.start_put(target, offset, src.as_ptr(), len)?;
        // SAFETY: `win` is locked on `target`; completes locally the puts to it.
        check(
            unsafe { ffi::MPI_Win_flush_local(target as c_int, self.win) },
            "MPI_Win_flush_local",
        )
        .unwrap_or_else(|e| lent_memory_lost(e));
        Ok(id)
    }

    /// A blocking get: `MPI_Get` and `MPI_Win_flush`.
    pub(super) fn get(
        &self,
        target: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        let len = self.check(target, offset, dst.len())?;
        // SAFETY: `dst` is exclusively borrowed until the flush below has completed the get
        // (a failed flush ends the process); the range was checked against the window's size.
        unsafe { self.raw_get(dst.as_mut_ptr(), len, target, offset, (len, uint8())) }?;
        self.started(target);
        self.flush_lent(target);
        Ok(())
    }

    /// A blocking vector put: `src` (the pieces' bytes back to back) into `pieces` of
    /// `target`'s segment (non-empty, each checked) as one `MPI_Put` with the pieces as its
    /// target datatype (`datatype.rs`), then `MPI_Win_flush`. False, and nothing sent, if
    /// the pieces overlap or go backwards (the caller sends them as a message).
    pub(super) fn put_pieces(
        &self,
        target: usize,
        pieces: &[(usize, usize)],
        src: &[u8],
    ) -> Result<bool, BridgeError> {
        let Some(to) = TargetPieces::for_put(pieces)? else {
            return Ok(false);
        };
        debug_assert_eq!(to.bytes as usize, src.len());
        // SAFETY: `src` is borrowed until the flush below completed the put (a failed flush
        // ends the process); the datatype covers `to.bytes` bytes (the length of `src`) in
        // pieces the caller checked against the segment, from displacement `to.base`.
        unsafe { self.raw_put(src.as_ptr(), to.bytes, target, to.base, (1, to.datatype())) }?;
        self.started(target);
        self.flush_lent(target);
        Ok(true)
    }

    /// A blocking vector get: `pieces` of `target`'s segment (non-empty, each checked) into
    /// `dst` back to back, as one `MPI_Get` with the pieces as its target datatype.
    pub(super) fn get_pieces(
        &self,
        target: usize,
        pieces: &[(usize, usize)],
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        let from = TargetPieces::for_get(pieces)?;
        debug_assert_eq!(from.bytes as usize, dst.len());
        // SAFETY: `dst` is exclusively borrowed until the flush below completed the get (a
        // failed flush ends the process); the datatype covers `from.bytes` bytes (the length
        // of `dst`) in checked pieces.
        let layout = (1, from.datatype());
        unsafe { self.raw_get(dst.as_mut_ptr(), from.bytes, target, from.base, layout) }?;
        self.started(target);
        self.flush_lent(target);
        Ok(())
    }

    /// A non-blocking get of `len` bytes into a buffer of its own; the id completes at a flush
    /// of `target`, then [`RmaWindow::take_got`] hands the bytes over.
    pub(super) fn get_nb(
        &self,
        target: usize,
        offset: usize,
        len: usize,
    ) -> Result<u64, BridgeError> {
        let count = self.check(target, offset, len)?;
        let mut buf = vec![0u8; len];
        // SAFETY: `buf`'s heap bytes do not move when the Vec moves into `gets` below, and it
        // is neither read nor dropped before the flush of `target` completes the get.
        unsafe { self.raw_get(buf.as_mut_ptr(), count, target, offset, (count, uint8())) }?;
        let id = self.started(target) | GET_ID;
        self.st.borrow_mut().gets.push(PendingGet {
            id,
            buf,
            forgotten: false,
        });
        Ok(id)
    }

    /// Whether operation `id` has completed at its target (no progress).
    #[inline]
    pub(super) fn done(&self, id: u64) -> bool {
        let st = self.st.borrow();
        (id & SEQ_MASK) < st.flushed_below[target_of(id)]
    }

    /// Completes `id` (flushing its target if needed); a put's ack.
    pub(super) fn complete(&self, id: u64) -> Result<WriteAck, BridgeError> {
        if !self.done(id) {
            self.flush(target_of(id))?;
        }
        Ok(WriteAck::UNCOUNTED)
    }

    /// The data of get `id` if its flush came (taken out), with no progress.
    pub(super) fn take_got(&self, id: u64) -> Option<Vec<u8>> {
        self.st.borrow_mut().got.remove(&id)
    }

    /// The data of get `id`, flushing its target if needed.
    pub(super) fn wait_got(&self, id: u64) -> Result<Vec<u8>, BridgeError> {
        if !self.done(id) {
            self.flush(target_of(id))?;
        }
        Ok(self.take_got(id).unwrap_or_default())
    }

    /// The handle of `id` was dropped: its data (if a get) is discarded.
    #[inline]
    pub(super) fn forget(&self, id: u64) {
        if id & GET_ID == 0 {
            return; // a put: nothing kept for it but its number
        }
        let Ok(mut st) = self.st.try_borrow_mut() else {
            return;
        };
        if st.got.remove(&id).is_none()
            && let Some(g) = st.gets.iter_mut().find(|g| g.id == id)
        {
            g.forgotten = true;
        }
    }

    /// Whether operations toward `target` await a flush.
    #[inline]
    pub(super) fn is_dirty(&self, target: usize) -> bool {
        self.st
            .borrow()
            .is_dirty
            .get(target)
            .copied()
            .unwrap_or(false)
    }

    /// Whether any operation awaits a flush.
    #[inline]
    pub(super) fn any_dirty(&self) -> bool {
        !self.st.borrow().dirty.is_empty()
    }

    /// `MPI_Win_flush` on `target` alone, recording nothing.
    #[inline]
    fn raw_flush(&self, target: usize) -> Result<(), BridgeError> {
        if self.freed.get() {
            return Err(BridgeError::JobEnded);
        }
        // SAFETY: `win` is locked on every rank; `target` is a rank of its communicator (the
        // callers checked it, or took it from an operation started on it).
        check(
            unsafe { ffi::MPI_Win_flush(target as c_int, self.win) },
            "MPI_Win_flush",
        )
    }

    /// [`RmaWindow::flush`] of an operation on the caller's memory: a failed flush leaves it
    /// in an unknown state, and MPI cannot cancel it, so the process ends (`lent.rs`).
    fn flush_lent(&self, target: usize) {
        self.flush(target).unwrap_or_else(|e| lent_memory_lost(e));
    }

    /// `MPI_Win_flush` on `target`: every operation started toward it has completed there.
    pub(super) fn flush(&self, target: usize) -> Result<(), BridgeError> {
        self.raw_flush(target)?;
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        st.flushed_below[target] = st.next_seq;
        if st.is_dirty[target] {
            st.is_dirty[target] = false;
            st.dirty.retain(|&t| t != target);
        }
        if !st.gets.is_empty() {
            let mut i = 0;
            while i < st.gets.len() {
                if target_of(st.gets[i].id) == target {
                    let g = st.gets.swap_remove(i);
                    if !g.forgotten {
                        st.got.insert(g.id, g.buf);
                    }
                } else {
                    i += 1;
                }
            }
        }
        // Staged bytes are free once nothing started since they were staged is in flight.
        if st.dirty.is_empty() {
            st.staging.reset();
        }
        Ok(())
    }

    /// `MPI_Win_sync`: a memory barrier between this process's view of its own segment and
    /// the window's, so that bytes other ranks' completed puts wrote are seen by plain loads
    /// (MPI's separate memory model requires it; in the unified model it is a fence).
    pub(super) fn sync(&self) -> Result<(), BridgeError> {
        // SAFETY: `win` is locked on every rank for the whole job (a passive-target epoch,
        // which `MPI_Win_sync` requires).
        check(unsafe { ffi::MPI_Win_sync(self.win) }, "MPI_Win_sync")
    }

    /// Flushes every target with operations in flight.
    pub(super) fn flush_dirty(&self) -> Result<(), BridgeError> {
        loop {
            let next = self.st.borrow().dirty.last().copied();
            let Some(target) = next else {
                return Ok(());
            };
            self.flush(target)?;
        }
    }

    /// Unlocks and frees the window (collective; every process has flushed and passed the
    /// teardown barrier).
    pub(super) fn free(&self) -> Result<(), BridgeError> {
        let mut win = self.win;
        // SAFETY: the lock taken in `create`, released once.
        check(
            unsafe { ffi::MPI_Win_unlock_all(win) },
            "MPI_Win_unlock_all",
        )?;
        self.freed.set(true);
        // SAFETY: freed once, before the memory under it (the host's shared memory).
        check(
            unsafe { ffi::MPI_Win_free(&mut win) },
            "MPI_Win_free(segments)",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_names_a_path_or_is_refused_by_name() {
        assert_eq!(RmaPath::parse(None, false), Ok(RmaPath::Window));
        assert_eq!(RmaPath::parse(Some(" window "), false), Ok(RmaPath::Window));
        assert_eq!(
            RmaPath::parse(Some("am"), false),
            Ok(RmaPath::ActiveMessages)
        );
        assert_eq!(RmaPath::parse(None, true), Ok(RmaPath::ActiveMessages));
        assert_eq!(RmaPath::parse(Some("window"), true), Ok(RmaPath::Window));
        let e = RmaPath::parse(Some("rdma"), false).unwrap_err();
        assert!(e.to_string().contains("PGAS_MPI_RMA=\"rdma\""), "{e}");
    }

    #[test]
    fn window_ids_name_their_target_and_never_collide_with_am_ids() {
        let id = WINDOW_ID | (5u64 << TARGET_SHIFT) | 42;
        assert!(is_window_id(id) && !is_window_id(42));
        assert_eq!(target_of(id), 5);
        assert_eq!(target_of(id | GET_ID), 5);
        assert_eq!(
            target_of(WINDOW_ID | ((MAX_TARGETS as u64 - 1) << TARGET_SHIFT)),
            MAX_TARGETS - 1
        );
        assert_eq!(id & SEQ_MASK, 42);
    }

    #[test]
    fn only_a_later_put_to_the_same_target_completes_after_another() {
        let put = |target: u64, seq: u64| WINDOW_ID | (target << TARGET_SHIFT) | seq;
        assert!(put_completes_after(put(3, 7), put(3, 8)));
        assert!(
            !put_completes_after(put(3, 8), put(3, 7)),
            "started earlier"
        );
        assert!(!put_completes_after(put(3, 7), put(3, 7)));
        assert!(!put_completes_after(put(3, 7), put(4, 8)), "another target");
        assert!(!put_completes_after(put(3, 7) | GET_ID, put(3, 8)), "a get");
        assert!(!put_completes_after(put(3, 7), put(3, 8) | GET_ID), "a get");
        assert!(!put_completes_after(7, 8), "active-message operations");
        assert!(!put_completes_after(put(3, 7), 8));
    }

    #[test]
    fn staged_bytes_stay_put_until_reset() {
        let mut s = Staging::default();
        let a = s.stage(&[1, 2, 3]).unwrap();
        let big = vec![9u8; CHUNK - 1];
        let b = s.stage(&big).unwrap();
        // SAFETY: `a` points at 3 staged bytes, alive until `reset`.
        assert_eq!(unsafe { std::slice::from_raw_parts(a, 3) }, &[1, 2, 3]);
        assert_ne!(a, b, "a second chunk");
        assert_eq!(s.total(), 2 * CHUNK - 1);
        s.reset();
        assert_eq!(s.total(), 0);
        assert!(s.free.len() <= 2 && s.full.is_empty());
        // The current chunk is reused from its start.
        let c = s.stage(&[4]).unwrap();
        assert_eq!(c, b, "the current chunk's first byte again");
        assert_eq!(s.total(), 1);
    }

    #[test]
    fn staging_refuses_past_its_limit_until_reset() {
        let mut s = Staging::default();
        let piece = vec![3u8; STAGE_MAX];
        let mut staged = 0;
        while s.stage(&piece).is_some() {
            staged += piece.len();
            assert!(staged <= STAGE_LIMIT + CHUNK, "the limit holds");
        }
        assert!(
            staged >= STAGE_LIMIT - CHUNK,
            "refused only near the limit: {staged}"
        );
        s.reset();
        assert!(
            s.stage(&piece).is_some(),
            "a reset staging takes puts again"
        );
    }
}
