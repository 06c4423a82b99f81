//! One rank's viewable area: memory beside the segment that its owner may borrow as a Rust
//! slice for a scope (a *view*), and the handshake that keeps every other access out of a
//! viewed range while the view lives.
//!
//! # Why the area is not in the segment
//!
//! Every conduit path (smp and PSHM puts, MPI RMA, AM payloads, remote atomics) reaches any
//! offset of a segment, and a `GlobalPtr` can be forged to any offset. A Rust reference into
//! segment bytes could therefore be written under by an agent no check stops. The area is a
//! separate allocation that no conduit addresses: only this file's [`ViewArea::access`] copies
//! in or out of it, on the owner's thread or on a thread of the same process (smp ranks);
//! ranks of other processes reach it only through a message that the owner's thread serves
//! with the same call (`local_view.rs`).
//!
//! # The handshake (Dekker, all `SeqCst`)
//!
//! An accessor (any copy in or out that is not a view) increments `accessors`, then loads
//! `open`; if a view is open it reads the views' ranges and refuses when its range overlaps
//! one; otherwise it copies and decrements `accessors`. The owner opening a view writes the
//! view's range into a free slot, increments `open`, then waits until `accessors` is 0. In the
//! single total order of `SeqCst` operations either the accessor's load of `open` comes after
//! the owner's increment, so it sees the range (written before the increment) and refuses, or
//! it comes before, so its increment of `accessors` comes before the owner's load of it and
//! the owner waits until its copy is over. Hence no copy of a viewed byte is in progress
//! while the view's reference lives, and none starts. Closing the view clears its slot and
//! decrements `open` (release); an accessor that sees either change acquires the view's writes.
//! An accessor racing a close may still see the old range and be refused: the view was open
//! when it started. The owner's wait never waits for itself: an accessor's counted section
//! never makes progress or runs handlers, so it ends without the owner's help.
//!
//! A view is *exclusive* (a `&mut [T]`: every access to its range is refused) or *shared* (a
//! `&[T]`: reads are served, writes and atomics refused, since reading bytes that a shared
//! reference covers races nothing). The owner's views never alias mutably: an exclusive view
//! overlaps no other view, shared views may overlap each other.
//!
//! Outside views, accesses are the bridge's `shared_copy` copies (inline assembly) and
//! `SeqCst` atomics on 64-bit words, as on the segment: two racing copies tear bytes, as racing
//! transfers into a segment do, and nothing else.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use gasnet_bridge::AtomicOp;

/// Most views one rank may hold open at once (nested, of disjoint ranges).
pub(crate) const MAX_VIEWS: usize = 8;

/// Alignment of an area's base, and the largest element alignment a view serves: the
/// allocator's own, so that a large area comes from `calloc`, whose fresh pages stay untouched
/// (and cost no memory) until used, where a larger alignment would be zeroed by writing it.
pub(crate) const AREA_ALIGN: usize = 16;

/// A word on a cache line of its own, so accessors counting themselves do not share a line
/// with the views' ranges the owner writes.
#[repr(align(64))]
#[derive(Default)]
struct Line(AtomicU64);

/// The byte range of one open view: `end == 0` marks a free slot (an open view is never
/// empty, so its end is positive); `shared` (1) for a read-only view, stored before `end`.
#[derive(Default)]
struct Slot {
    start: AtomicU64,
    shared: AtomicU64,
    end: AtomicU64,
}

/// What an access or a view does to the bytes it covers, which decides the views it must stay
/// out of: a read may overlap a shared view, a write (or an exclusive view) no view at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use {
    /// Reads only (a get, a shared view).
    Read,
    /// Writes, or may write (a put, an atomic, an exclusive view).
    Write,
}

/// Why an access or a view was refused: the open view `view` (a byte range) overlaps it, or
/// every slot is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The requested range overlaps the open view of these bytes.
    Viewed { view_start: usize, view_end: usize },
    /// [`MAX_VIEWS`] views are open already.
    Full,
}

/// One rank's viewable memory and its handshake words.
///
/// # Safety invariant
///
/// `base` points to `len` bytes (zeroed at first, [`AREA_ALIGN`]-aligned) allocated by
/// [`ViewArea::new`] and freed on drop; everyone holding the area (an `Arc`, see
/// `local_view.rs`) keeps it alive. The bytes are touched only by [`ViewArea::access`]'s
/// `shared_copy` copies, and by the owner through the slice of a view opened with
/// [`ViewArea::open`] (made from [`ViewArea::address`]), during which the handshake keeps every
/// access to its range out.
pub(crate) struct ViewArea {
    base: NonNull<u8>,
    len: usize,
    accessors: Line,
    open: Line,
    slots: [Slot; MAX_VIEWS],
}

// SAFETY: the area is memory shared on purpose between the threads of the ranks of one
// process; by the type's invariant it is reached only through copies outside the Rust
// abstract machine (`shared_copy`) and atomics, or through a view's slice while the handshake
// keeps every other access to those bytes out.
unsafe impl Send for ViewArea {}
// SAFETY: as above.
unsafe impl Sync for ViewArea {}

impl ViewArea {
    /// An area of `len` zeroed bytes (untouched pages cost no physical memory).
    pub(crate) fn new(len: usize) -> ViewArea {
        let layout = Layout::from_size_align(len.max(1), AREA_ALIGN).expect("view area layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(base) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        ViewArea {
            base,
            len,
            accessors: Line::default(),
            open: Line::default(),
            slots: Default::default(),
        }
    }

    /// Size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True if `start .. start + len` lies inside the area.
    pub(crate) fn contains(&self, start: usize, len: usize) -> bool {
        start.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// The open view overlapping `start .. end` (`end > start`) that a `how` must stay out of,
    /// if any: any view for a write, an exclusive one for a read.
    fn viewed(&self, start: usize, end: usize, how: Use) -> Option<Refused> {
        if self.open.0.load(SeqCst) == 0 {
            return None;
        }
        self.slots.iter().find_map(|s| {
            let (vs, ve) = (s.start.load(SeqCst) as usize, s.end.load(SeqCst) as usize);
            // Loaded after `end`, which is stored after it: a live slot's flag is its own.
            let shared = s.shared.load(SeqCst) != 0;
            let conflicts = how == Use::Write || !shared;
            (ve != 0 && conflicts && vs < end && start < ve).then_some(Refused::Viewed {
                view_start: vs,
                view_end: ve,
            })
        })
    }

    /// Copies `src` into the area at `start` (a put), unless an open view overlaps it.
    ///
    /// # Panics
    /// If the range is not inside the area (callers check it first, to name it in an error).
    pub(crate) fn write(&self, start: usize, src: &[u8]) -> Result<(), Refused> {
        self.access(start, src.len(), Use::Write, |p| {
            // SAFETY: `access` hands a pointer to `src.len()` bytes inside the area, which no
            // view covers during the call (module handshake).
            unsafe { gasnet_bridge::for_runtimes::shared_copy::copy_in(p, src) }
        })
    }

    /// Copies the area's bytes at `start` into `dst` (a get), unless an open view overlaps.
    ///
    /// # Panics
    /// As [`ViewArea::write`].
    pub(crate) fn read(&self, start: usize, dst: &mut [u8]) -> Result<(), Refused> {
        let len = dst.len();
        self.access(start, len, Use::Read, |p| {
            // SAFETY: as in `write`, for `len` bytes (a shared view may cover them: both only
            // read).
            unsafe { gasnet_bridge::for_runtimes::shared_copy::copy_out(p, dst) }
        })
    }

    /// Sets `len` bytes at `start` to zero (a fresh allocation), unless an open view overlaps.
    ///
    /// # Panics
    /// As [`ViewArea::write`].
    pub(crate) fn zero(&self, start: usize, len: usize) -> Result<(), Refused> {
        self.access(start, len, Use::Write, |p| {
            // SAFETY: as in `write`.
            unsafe { gasnet_bridge::for_runtimes::shared_copy::fill(p, 0, len) }
        })
    }

    /// Applies `op` to the 64-bit word at `start` (8-aligned, inside the area), unless an open
    /// view overlaps it (a shared one too unless `op` is a load); returns the previous value.
    ///
    /// # Panics
    /// If the word is not inside the area or not aligned (callers check both first).
    pub(crate) fn atomic(&self, start: usize, op: AtomicOp) -> Result<u64, Refused> {
        assert!(
            start.is_multiple_of(8),
            "a misaligned atomic in a view area"
        );
        let how = if op == AtomicOp::Load {
            Use::Read
        } else {
            Use::Write
        };
        let mut previous = 0;
        self.access(start, 8, how, |p| {
            // SAFETY: `p` is 8-aligned (an aligned offset over a base aligned to
            // `AREA_ALIGN`) and the 8 bytes lie inside the live area, which no view covers
            // in a conflicting way during the call (module handshake); other accessors reach
            // the word only by copies outside the abstract machine or by atomics, as on the
            // segment, whose atomics are the same `AtomicU64` operations.
            let word = unsafe { AtomicU64::from_ptr(p.cast::<u64>()) };
            previous = op.apply(word).0;
        })?;
        Ok(previous)
    }

    /// Fills every byte of the area with `byte` except those under the owner's open views (an
    /// emulated loss of the rank's memory: a view's slice stays the closure's). Only the
    /// owner's thread calls it, so no view opens meanwhile.
    pub(crate) fn fill_outside_views(&self, byte: u8) {
        self.accessors.0.fetch_add(1, SeqCst);
        let mut views: Vec<(usize, usize)> = (self.slots.iter())
            .map(|s| (s.start.load(SeqCst) as usize, s.end.load(SeqCst) as usize))
            .filter(|&(_, end)| end != 0)
            .collect();
        views.sort_unstable();
        let mut from = 0;
        for (start, end) in views.into_iter().chain([(self.len, self.len)]) {
            if start > from {
                // SAFETY: `from .. start` lies inside the area (views lie inside it) and no
                // view covers it; accessors only copy (`shared_copy`), as this fill does.
                unsafe {
                    gasnet_bridge::for_runtimes::shared_copy::fill(
                        self.base.as_ptr().wrapping_add(from),
                        byte,
                        start - from,
                    )
                }
            }
            from = from.max(end);
        }
        self.accessors.0.fetch_sub(1, SeqCst);
    }

    /// Runs `copy` on the address of `start .. start + len` inside the handshake's counted
    /// section, unless an open view overlaps the range. `copy` must not make progress.
    fn access(
        &self,
        start: usize,
        len: usize,
        how: Use,
        copy: impl FnOnce(*mut u8),
    ) -> Result<(), Refused> {
        assert!(self.contains(start, len), "an access outside the view area");
        if len == 0 {
            return Ok(());
        }
        self.accessors.0.fetch_add(1, SeqCst);
        let refused = self.viewed(start, start + len, how);
        if refused.is_none() {
            // Address arithmetic inside the area (checked above).
            copy(self.base.as_ptr().wrapping_add(start));
        }
        self.accessors.0.fetch_sub(1, SeqCst);
        refused.map_or(Ok(()), Err)
    }

    /// Opens a view of `start .. start + len` (`len > 0`, inside the area) for the owner,
    /// exclusive (`Use::Write`) or shared (`Use::Read`): the range is published, then every
    /// access in progress is waited for. Returns the view's slot, for [`ViewArea::close`].
    /// Only the owner's thread opens and closes views.
    pub(crate) fn open(&self, start: usize, len: usize, how: Use) -> Result<usize, Refused> {
        assert!(
            len > 0 && self.contains(start, len),
            "a view outside the area"
        );
        let end = start + len;
        if let Some(refused) = self.viewed(start, end, how) {
            return Err(refused);
        }
        let slot = (self.slots.iter())
            .position(|s| s.end.load(SeqCst) == 0)
            .ok_or(Refused::Full)?;
        self.slots[slot].start.store(start as u64, SeqCst);
        let shared = u64::from(how == Use::Read);
        self.slots[slot].shared.store(shared, SeqCst);
        self.slots[slot].end.store(end as u64, SeqCst);
        self.open.0.fetch_add(1, SeqCst);
        let mut spins = 0u32;
        while self.accessors.0.load(SeqCst) != 0 {
            // Accessors on other threads finish a copy each; ranks may outnumber cores.
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        Ok(slot)
    }

    /// The address of byte `start` of the area, for the slice of a view opened on a range
    /// starting there (address arithmetic only; `local_view.rs` makes the slice and argues it).
    ///
    /// # Panics
    /// If `start` is not inside the area.
    pub(crate) fn address(&self, start: usize) -> *mut u8 {
        assert!(start < self.len, "an address outside the view area");
        self.base.as_ptr().wrapping_add(start)
    }

    /// Closes the view in `slot`: accesses to its range are served again.
    pub(crate) fn close(&self, slot: usize) {
        self.slots[slot].end.store(0, SeqCst);
        self.slots[slot].start.store(0, SeqCst);
        self.slots[slot].shared.store(0, SeqCst);
        self.open.0.fetch_sub(1, SeqCst);
    }
}

impl Drop for ViewArea {
    fn drop(&mut self) {
        let layout =
            Layout::from_size_align(self.len.max(1), AREA_ALIGN).expect("view area layout");
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.base.as_ptr(), layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_round_trip_and_views_refuse_overlaps() {
        let a = ViewArea::new(4096);
        a.write(8, &[1, 2, 3, 4]).unwrap();
        let mut got = [0u8; 6];
        a.read(6, &mut got).unwrap();
        assert_eq!(got, [0, 0, 1, 2, 3, 4]);
        let slot = a.open(8, 8, Use::Write).unwrap();
        let viewed = Refused::Viewed {
            view_start: 8,
            view_end: 16,
        };
        assert_eq!(a.write(15, &[9]), Err(viewed));
        assert_eq!(a.read(0, &mut [0; 9]), Err(viewed));
        assert_eq!(a.zero(4, 100), Err(viewed));
        assert_eq!(
            a.open(12, 1, Use::Read),
            Err(viewed),
            "a nested overlapping view"
        );
        a.write(16, &[5]).unwrap();
        a.write(0, &[6; 8]).unwrap();
        let inner = a.open(16, 8, Use::Write).unwrap();
        a.close(inner);
        a.close(slot);
        a.write(8, &[7; 8]).unwrap();
        let mut all = [0u8; 17];
        a.read(0, &mut all).unwrap();
        assert_eq!(all, [6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 5]);
    }

    #[test]
    fn shared_views_serve_reads_and_refuse_writes_and_atomics() {
        let a = ViewArea::new(4096);
        a.atomic(8, AtomicOp::Store(5)).unwrap();
        let shared = a.open(8, 16, Use::Read).unwrap();
        let viewed = Refused::Viewed {
            view_start: 8,
            view_end: 24,
        };
        let mut got = [0u8; 8];
        a.read(8, &mut got).unwrap();
        assert_eq!(u64::from_le_bytes(got), 5);
        assert_eq!(a.atomic(8, AtomicOp::Load), Ok(5));
        assert_eq!(a.atomic(16, AtomicOp::FetchAdd(1)), Err(viewed));
        assert_eq!(a.write(23, &[1]), Err(viewed));
        assert_eq!(
            a.open(0, 9, Use::Write),
            Err(viewed),
            "exclusive over shared"
        );
        let inner = a.open(16, 8, Use::Read).unwrap();
        a.close(inner);
        a.close(shared);
        assert_eq!(a.atomic(8, AtomicOp::FetchAdd(2)), Ok(5));
        let exclusive = a.open(8, 8, Use::Write).unwrap();
        assert_eq!(
            a.atomic(8, AtomicOp::Load),
            Err(Refused::Viewed {
                view_start: 8,
                view_end: 16
            })
        );
        assert!(a.open(8, 8, Use::Read).is_err(), "shared over exclusive");
        a.close(exclusive);
        assert_eq!(a.atomic(8, AtomicOp::Load), Ok(7));
    }

    #[test]
    fn slots_run_out_and_come_back() {
        let a = ViewArea::new(1024);
        let slots: Vec<usize> = (0..MAX_VIEWS)
            .map(|i| a.open(i * 8, 8, Use::Write).unwrap())
            .collect();
        assert_eq!(a.open(512, 8, Use::Write), Err(Refused::Full));
        for s in slots {
            a.close(s);
        }
        a.close(a.open(512, 8, Use::Write).unwrap());
        a.write(0, &[1; 64]).unwrap();
    }
}
