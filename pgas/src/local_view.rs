//! Safe in-place local views: viewable memory ([`new_viewable`], addressed by [`ViewPtr`])
//! that its owner borrows as a `&mut [T]` for a closure's scope ([`with_local_mut`]), while
//! other ranks put into it and get from it by copy ([`view_put`], [`view_get`]).
//!
//! # Why a view is sound
//!
//! A `&mut [T]` over memory is undefined behaviour if any other agent reads or writes those
//! bytes while the reference lives: another rank's thread, another process, or a handler that
//! the closure itself runs by making progress. Viewable memory is therefore kept where only
//! this module reaches it:
//!
//! - It is not in the segment but in a per-rank area beside it (`view_area.rs`), which no
//!   conduit path addresses: no put, get, atomic, AM payload or forged `GlobalPtr` lands there.
//!   [`ViewPtr`] is a pointer type of its own, so none of the segment's operations takes one.
//! - Every access other than a view goes through the area's handshake (`view_area.rs`, a
//!   Dekker pair of `SeqCst` counters): from a rank of the same process directly, from a rank
//!   of another process (another host, or the same host under mpirun) as a message that the
//!   owner's thread serves with the same call when it makes progress. An access overlapping an
//!   open view is refused with [`ViewError::Viewed`], naming accessor, owner and ranges; opening
//!   a view waits for accesses in progress. So no byte of a view is accessed by anyone else from
//!   the moment the slice exists until the closure returns, including by handlers the closure
//!   runs (they are refused too).
//! - The owner's own nested views must be disjoint ([`ViewError::Overlapping`]), so two live
//!   slices never alias; a view is only of the caller's own memory ([`ViewError::NotMine`]).
//! - A read-only view ([`with_local`], a `&[T]`) admits gets of its bytes, which only read,
//!   and refuses puts, atomics other than loads and exclusive views; read-only views may
//!   overlap each other. Atomics on viewable words (the element atomics of
//!   [`ViewArray`](crate::ViewArray)) run inside the same handshake as puts.
//!
//! Refusing, rather than deferring, an access keeps every call bounded: a deferred put whose
//! writer waits for it could wait for an owner that waits for that writer in a barrier inside
//! its view. A program that orders its accesses and views (a barrier between them, as a
//! stencil's exchange does) never sees a refusal.
//!
//! Ordinary puts are untouched: the segment's paths do not look at views at all.
//!
//! Viewable memory is not part of the segment: segment checkpoints and emulated memory loss
//! (`pgas::runtime_hooks`) do not cover it, and the interception hook does not see view
//! accesses (Containment Domains neither log nor replay them).
//!
//! # Example: a heat equation stepped in place
//!
//! Each rank keeps its cells and a ghost cell at each end in viewable memory, sends its edge
//! cells into its neighbours' ghost cells, and steps its cells in place: no copy in or out.
//! The barriers order the views and the puts, so none is refused.
//!
//! ```
//! use pgas::{LaunchConfig, RpcTable, barrier, rank_me, rank_n, view_put, with_local_mut};
//!
//! /// One explicit step of the cells between the two ghost cells at the ends of `u`.
//! fn step(u: &mut [f64]) {
//!     let mut left = u[0];
//!     for i in 1..u.len() - 1 {
//!         let here = u[i];
//!         u[i] = here + 0.25 * (left - 2.0 * here + u[i + 1]);
//!         left = here;
//!     }
//! }
//!
//! let job = LaunchConfig::new(2).segment_bytes(1 << 20);
//! let out = pgas::launch(&job, RpcTable::new(), || {
//!     let (me, n) = (rank_me(), rank_n());
//!     let u = pgas::new_viewable::<f64>(10).unwrap(); // 8 cells and 2 ghost cells
//!     let all = pgas::allgather(u).wait();
//!     with_local_mut(u + 1, 8, |cells| cells.fill(me as f64)).unwrap();
//!     for _ in 0..4 {
//!         barrier(); // every rank's previous step is done
//!         let (first, last) = with_local_mut(u + 1, 8, |cells| (cells[0], cells[7])).unwrap();
//!         if me > 0 {
//!             view_put(&[first], all[me - 1] + 9).unwrap();
//!         }
//!         if me + 1 < n {
//!             view_put(&[last], all[me + 1]).unwrap();
//!         }
//!         barrier(); // every ghost cell has landed
//!         with_local_mut(u, 10, step).unwrap();
//!     }
//!     with_local_mut(u + 1, 8, |cells| cells.to_vec()).unwrap()
//! })
//! .unwrap();
//!
//! // The same steps on one array give the same bits.
//! let mut serial = vec![0.0; 18];
//! serial[9..17].fill(1.0);
//! for _ in 0..4 {
//!     step(&mut serial);
//! }
//! assert_eq!(out.into_vec().concat(), serial[1..17]);
//! ```

use std::cell::RefCell;
use std::marker::PhantomData;
use std::ops::Add;
use std::sync::Arc;

use bytemuck::Pod;
use gasnet_bridge::{AtomicOp, Awaiting, Token, WriteAck};
use serde::{Deserialize, Serialize};

use crate::atomic_domain::AtomicValue;
use crate::error::{PgasError, ViewError};
use crate::future::Future;
use crate::heap::Heap;
use crate::messages;
use crate::rpc::{PendingReplies, ReplyTo};
use crate::runtime::{self, Runtime};
use crate::view_area::{AREA_ALIGN, MAX_VIEWS, Refused, Use, ViewArea};
use crate::wire::{self, Kind};

const NULL_RANK: u32 = u32::MAX;

/// The address of a `T` in some rank's viewable memory (rank + byte offset in its area), as
/// [`GlobalPtr`](crate::GlobalPtr) is in its segment; made by [`new_viewable`], sent to other
/// ranks as a serde value (by rpc or a collective).
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct ViewPtr<T: 'static> {
    offset: u64,
    rank: u32,
    #[serde(skip)]
    _type: PhantomData<fn() -> T>,
}

impl<T: 'static> Clone for ViewPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: 'static> Copy for ViewPtr<T> {}

impl<T: 'static> PartialEq for ViewPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.rank, self.offset) == (other.rank, other.offset)
    }
}
impl<T: 'static> Eq for ViewPtr<T> {}

impl<T: 'static> std::fmt::Debug for ViewPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_null() {
            write!(f, "ViewPtr(null)")
        } else {
            write!(f, "ViewPtr(rank {}, offset {:#x})", self.rank, self.offset)
        }
    }
}

impl<T: 'static> Default for ViewPtr<T> {
    fn default() -> Self {
        Self::null()
    }
}

/// The pointer `n` elements further on.
///
/// # Panics
/// On a null pointer or on address overflow.
impl<T: 'static> Add<usize> for ViewPtr<T> {
    type Output = ViewPtr<T>;
    fn add(self, n: usize) -> Self {
        assert!(!self.is_null(), "arithmetic on a null view pointer");
        let offset = (n as u64)
            .checked_mul(size_of::<T>() as u64)
            .and_then(|b| self.offset.checked_add(b))
            .expect("view pointer arithmetic overflowed");
        ViewPtr { offset, ..self }
    }
}

impl<T: 'static> ViewPtr<T> {
    /// The null pointer.
    pub const fn null() -> Self {
        ViewPtr {
            offset: 0,
            rank: NULL_RANK,
            _type: PhantomData,
        }
    }

    /// True for the null pointer.
    pub fn is_null(&self) -> bool {
        self.rank == NULL_RANK
    }

    /// The rank whose viewable memory holds the pointee.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// Byte offset in that rank's viewable area.
    pub fn offset(&self) -> usize {
        self.offset as usize
    }

    /// The same address viewed as another type.
    pub fn cast<U: 'static>(self) -> ViewPtr<U> {
        ViewPtr {
            offset: self.offset,
            rank: self.rank,
            _type: PhantomData,
        }
    }

    fn at(rank: usize, offset: usize) -> Self {
        ViewPtr {
            offset: offset as u64,
            rank: u32::try_from(rank).expect("rank fits in 32 bits"),
            _type: PhantomData,
        }
    }
}

impl<T: Pod> ViewPtr<T> {
    /// [`with_local_mut`] of `len` elements from here.
    pub fn with_local_mut<R>(
        self,
        len: usize,
        f: impl FnOnce(&mut [T]) -> R,
    ) -> Result<R, ViewError> {
        with_local_mut(self, len, f)
    }
}

/// The viewable areas a rank reaches directly, by rank: every rank's on smp (one process), only
/// its own under mpirun.
pub(crate) type Reach = Vec<Option<Arc<ViewArea>>>;

/// The viewable areas of the ranks `ranks` of a job of `job_ranks` (those this process runs),
/// each of `bytes`.
pub(crate) fn areas(job_ranks: usize, ranks: std::ops::Range<usize>, bytes: usize) -> Reach {
    (0..job_ranks)
        .map(|r| ranks.contains(&r).then(|| Arc::new(ViewArea::new(bytes))))
        .collect()
}

/// One rank's viewable memory: the areas it reaches and its own area's allocator.
pub(crate) struct ViewState {
    reach: Reach,
    heap: RefCell<Heap>,
}

impl ViewState {
    /// The state of `rank`, which reaches the areas of `reach` (its own among them).
    pub(crate) fn new(rank: usize, reach: Reach) -> ViewState {
        let len = reach[rank]
            .as_ref()
            .expect("a rank reaches its own area")
            .len();
        ViewState {
            reach,
            heap: RefCell::new(Heap::new(rank, 0, len)),
        }
    }

    fn own(&self, rt: &Runtime) -> &ViewArea {
        self.reach[rt.rank_me()]
            .as_deref()
            .expect("a rank reaches its own area")
    }
}

/// Fills this rank's viewable memory with `byte`, except the bytes under its open views:
/// what an emulated loss of the rank's memory does to its viewable area (`fault.rs`).
pub(crate) fn poison_own(rt: &Runtime, byte: u8) {
    rt.state::<ViewState>().own(rt).fill_outside_views(byte);
}

/// Allocates `len` zeroed `T`s in this rank's viewable memory (as large as its segment, beside
/// it): memory its owner can borrow in place with [`with_local_mut`] and others reach with
/// [`view_put`] / [`view_get`].
pub fn new_viewable<T: Pod>(len: usize) -> Result<ViewPtr<T>, PgasError> {
    runtime::with(|rt| {
        let state = rt.state::<ViewState>();
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or(PgasError::OutOfMemory {
                rank: rt.rank_me(),
                requested: usize::MAX,
                largest_free: 0,
            })?;
        let offset = state
            .heap
            .borrow_mut()
            .alloc(bytes, align_of::<T>().max(8))?;
        // A block handed out again is zeroed. Only a view refuses that: one this rank holds
        // over bytes it freed, or past its allocation.
        if let Err(Refused::Viewed {
            view_start,
            view_end,
        }) = state.own(rt).zero(offset, bytes)
        {
            state.heap.borrow_mut().free(offset)?;
            return Err(PgasError::UnderView {
                rank: rt.rank_me(),
                offset,
                len: bytes,
                view_start,
                view_end,
            });
        }
        Ok(ViewPtr::at(rt.rank_me(), offset))
    })
}

/// Frees memory allocated by [`new_viewable`] on this rank.
pub fn delete_viewable<T: 'static>(p: ViewPtr<T>) -> Result<(), PgasError> {
    if p.is_null() {
        return Err(PgasError::Null {
            op: "delete_viewable",
        });
    }
    runtime::with(|rt| {
        if p.rank() != rt.rank_me() {
            return Err(PgasError::BadFree {
                what: "another rank's view pointer",
                rank: p.rank(),
                offset: p.offset(),
            });
        }
        rt.state::<ViewState>()
            .heap
            .borrow_mut()
            .free(p.offset())
            .map(|_| ())
    })
}

/// Checks `len` elements at `p` for `op`: not null, a rank of the job, inside its area when the
/// area is reached here, aligned. Returns the byte length.
fn check<T>(rt: &Runtime, p: ViewPtr<T>, len: usize, op: &'static str) -> Result<usize, ViewError> {
    if p.is_null() {
        return Err(ViewError::Null { op });
    }
    let ranks = rt.ep().ranks();
    if p.rank() >= ranks {
        return Err(ViewError::NoSuchRank {
            op,
            rank: p.rank(),
            ranks,
        });
    }
    let bytes = len.saturating_mul(size_of::<T>());
    // An area of another process is as large as the segment (the owner checks again).
    let area = rt.state::<ViewState>().reach[p.rank()]
        .as_ref()
        .map_or(rt.ep().segment_len(), |a| a.len());
    if p.offset().checked_add(bytes).is_none_or(|e| e > area) {
        return Err(ViewError::OutOfBounds {
            rank: p.rank(),
            offset: p.offset(),
            len: bytes,
            area,
        });
    }
    // The area's base is aligned to `AREA_ALIGN`: an offset that is a multiple of a larger
    // alignment would not make an aligned address.
    if align_of::<T>() > AREA_ALIGN || !p.offset().is_multiple_of(align_of::<T>()) {
        return Err(ViewError::Misaligned {
            rank: p.rank(),
            offset: p.offset(),
            align: align_of::<T>(),
        });
    }
    Ok(bytes)
}

/// A view open on this rank's area, closed on drop (when the closure returns or unwinds).
struct Opened {
    area: Arc<ViewArea>,
    slot: usize,
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.area.close(self.slot);
    }
}

/// Opens a view of `len` elements at `p` (this rank's memory), exclusive or shared (`how`):
/// `None` for an empty range, which needs no view. Returns the view and the address of its
/// first element.
fn open_view<T: Pod>(
    p: ViewPtr<T>,
    len: usize,
    how: Use,
    op: &'static str,
) -> Result<Option<(Opened, *mut T)>, ViewError> {
    let (area, start, bytes) = runtime::with(|rt| {
        let bytes = check(rt, p, len, op)?;
        let me = rt.rank_me();
        if p.rank() != me {
            return Err(ViewError::NotMine {
                owner: p.rank(),
                me,
            });
        }
        Ok((
            rt.state::<ViewState>().reach[me]
                .clone()
                .expect("a rank reaches its own area"),
            p.offset(),
            bytes,
        ))
    })?;
    if bytes == 0 {
        return Ok(None);
    }
    let slot = area.open(start, bytes, how).map_err(|r| match r {
        Refused::Viewed {
            view_start,
            view_end,
        } => ViewError::Overlapping {
            owner: p.rank(),
            offset: start,
            len: bytes,
            view_start,
            view_end,
        },
        Refused::Full => ViewError::TooManyViews {
            owner: p.rank(),
            max: MAX_VIEWS,
        },
    })?;
    let address = area.address(start).cast::<T>();
    Ok(Some((Opened { area, slot }, address)))
}

/// Runs `f` on this rank's `len` elements at `p` as one `&mut [T]`, in place (no copy in or
/// out), and returns its result.
///
/// While `f` runs, every other access to those bytes is refused ([`ViewError::Viewed`] to
/// the [`view_put`] or [`view_get`] that tries, from any rank, including handlers that `f`'s
/// own pgas calls run), and opening the view first waits for the accesses in progress: the
/// module doc argues why this makes the slice sound. Views nest if their ranges are disjoint.
/// `len` 0 gives an empty slice. The view closes when `f` returns or unwinds.
///
/// # Errors
/// [`ViewError::NotMine`] for another rank's memory, [`ViewError::Overlapping`] for a range
/// overlapping a view open already, and the refusals of a bad pointer or range.
pub fn with_local_mut<T: Pod, R>(
    p: ViewPtr<T>,
    len: usize,
    f: impl FnOnce(&mut [T]) -> R,
) -> Result<R, ViewError> {
    let Some((_open, address)) = open_view(p, len, Use::Write, "with_local_mut")? else {
        return Ok(f(&mut []));
    };
    // SAFETY: the view just opened covers exactly the `len` elements at `address`, inside the
    // live area (which `_open`'s `Arc` keeps alive past the slice). `check` made the offset
    // aligned for `T` over a base aligned to `AREA_ALIGN`, which `T`'s alignment divides. The
    // slice is exclusive: the handshake keeps every access by anyone else out of the range
    // while the view is open, a nested view of any of its bytes was refused by `open`, and the
    // view closes only when `_open` drops, after `f`, the slice's only user, has returned. `T`
    // is plain data, so any bytes there are a valid `T`.
    let slice = unsafe { std::slice::from_raw_parts_mut(address, len) };
    Ok(f(slice))
}

/// Runs `f` on this rank's `len` elements at `p` as one `&[T]`, in place, and returns its
/// result: a read-only view.
///
/// While `f` runs, puts and atomics into those bytes are refused ([`ViewError::Viewed`]) and
/// gets are served (reading bytes that a shared reference covers races nothing). Shared views
/// may overlap each other but not an exclusive one ([`with_local_mut`]). Otherwise as
/// [`with_local_mut`].
///
/// # Errors
/// As [`with_local_mut`]; [`ViewError::Overlapping`] only for an overlapping exclusive view.
pub fn with_local<T: Pod, R>(
    p: ViewPtr<T>,
    len: usize,
    f: impl FnOnce(&[T]) -> R,
) -> Result<R, ViewError> {
    let Some((_open, address)) = open_view(p, len, Use::Read, "with_local")? else {
        return Ok(f(&[]));
    };
    // SAFETY: as in `with_local_mut`, but the slice is shared: while the view is open the
    // handshake refuses every write and atomic to its range (other ranks', handlers', and an
    // exclusive view of this rank), and admits only copies out of it and other shared views,
    // which only read. The view closes after `f` has returned.
    let slice = unsafe { std::slice::from_raw_parts(address.cast_const(), len) };
    Ok(f(slice))
}

/// Whether a request is a put, a get or an atomic (its first header word).
const PUT: u64 = 0;
const GET: u64 = 1;
const ATOMIC: u64 = 2;

/// The name of a request's operation in a refusal.
fn op_name(op: u64) -> &'static str {
    match op {
        PUT => "put",
        GET => "get",
        _ => "atomic",
    }
}

/// `op` as three header words (a code and its operands), for an owner in another process.
fn encode_op(op: AtomicOp) -> [u64; 3] {
    match op {
        AtomicOp::Load => [0, 0, 0],
        AtomicOp::Store(v) => [1, v, 0],
        AtomicOp::Swap(v) => [2, v, 0],
        AtomicOp::FetchAdd(v) => [3, v, 0],
        AtomicOp::FetchSub(v) => [4, v, 0],
        AtomicOp::CompareExchange { current, new } => [5, current, new],
        AtomicOp::Min(v) => [6, v, 0],
        AtomicOp::Max(v) => [7, v, 0],
        AtomicOp::MinI64(v) => [8, v as u64, 0],
        AtomicOp::MaxI64(v) => [9, v as u64, 0],
        AtomicOp::And(v) => [10, v, 0],
        AtomicOp::Or(v) => [11, v, 0],
        AtomicOp::Xor(v) => [12, v, 0],
    }
}

/// The operation [`encode_op`] made these words of; `None` for an unknown code.
fn decode_op([code, a, b]: [u64; 3]) -> Option<AtomicOp> {
    Some(match code {
        0 => AtomicOp::Load,
        1 => AtomicOp::Store(a),
        2 => AtomicOp::Swap(a),
        3 => AtomicOp::FetchAdd(a),
        4 => AtomicOp::FetchSub(a),
        5 => AtomicOp::CompareExchange { current: a, new: b },
        6 => AtomicOp::Min(a),
        7 => AtomicOp::Max(a),
        8 => AtomicOp::MinI64(a as i64),
        9 => AtomicOp::MaxI64(a as i64),
        10 => AtomicOp::And(a),
        11 => AtomicOp::Or(a),
        12 => AtomicOp::Xor(a),
        _ => return None,
    })
}

/// The first byte of a reply: served, or refused (then the view's range follows).
const SERVED: u8 = 0;
const REFUSED: u8 = 1;

/// Copies `src` into `dst ..` of any rank's viewable memory, complete at the target on return.
///
/// # Errors
/// [`ViewError::Viewed`] if its owner holds a view overlapping the range (nothing is written),
/// [`ViewError::UnloggedPut`] for another rank's memory inside a relaxed CD (a replay would
/// not know of the write), and the refusals of a bad pointer or range.
pub fn view_put<T: Pod>(src: &[T], dst: ViewPtr<T>) -> Result<(), ViewError> {
    let bytes: &[u8] = bytemuck::cast_slice(src);
    let pending = runtime::with(|rt| {
        check(rt, dst, src.len(), "view_put")?;
        let me = rt.rank_me();
        if dst.rank() != me && rt.hook().is_some_and(|h| !h.allows_view_put(dst.rank())) {
            return Err(ViewError::UnloggedPut {
                owner: dst.rank(),
                me,
            });
        }
        match &rt.state::<ViewState>().reach[dst.rank()] {
            Some(area) => {
                let served = area.write(dst.offset(), bytes);
                Ok(Err(refusal(rt.rank_me(), "put", dst, bytes.len(), served)))
            }
            None => Ok(Ok(request(
                rt,
                dst.rank(),
                PUT,
                dst.offset(),
                bytes.len(),
                &[],
                bytes,
            ))),
        }
    })?;
    match pending {
        Err(done) => done,
        Ok(reply) => reply.wait().map(|_| ()),
    }
}

/// Copies `dst.len()` elements of any rank's viewable memory from `src ..` into `dst`.
///
/// # Errors
/// As [`view_put`] (nothing is read when refused).
pub fn view_get<T: Pod>(src: ViewPtr<T>, dst: &mut [T]) -> Result<(), ViewError> {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
    let len = bytes.len();
    let pending = runtime::with(|rt| {
        check(rt, src, len / size_of::<T>().max(1), "view_get")?;
        match &rt.state::<ViewState>().reach[src.rank()] {
            Some(area) => {
                let served = area.read(src.offset(), bytes);
                Ok(Err(refusal(rt.rank_me(), "get", src, len, served)))
            }
            None => Ok(Ok(request(
                rt,
                src.rank(),
                GET,
                src.offset(),
                len,
                &[],
                &[],
            ))),
        }
    })?;
    match pending {
        Err(done) => done,
        Ok(reply) => {
            bytes.copy_from_slice(&reply.wait()?);
            Ok(())
        }
    }
}

/// Applies `op` (`SeqCst`) to the 64-bit value at `p` in any rank's viewable memory, complete
/// at the target on return; returns the previous value's bits. On a word this process reaches
/// the accessor applies it inside the area's handshake, as [`view_put`] copies; otherwise the
/// owner's thread does when it serves the request.
///
/// # Errors
/// [`ViewError::Viewed`] if its owner holds a view overlapping the word (a shared one too,
/// unless `op` is a load), [`ViewError::UnloggedPut`] for a writing `op` into another rank's
/// memory inside a relaxed CD, and the refusals of a bad pointer.
pub(crate) fn view_atomic<T: AtomicValue>(p: ViewPtr<T>, op: AtomicOp) -> Result<u64, ViewError> {
    let pending = runtime::with(|rt| {
        check(rt, p, 1, "view_atomic")?;
        let me = rt.rank_me();
        if op != AtomicOp::Load
            && p.rank() != me
            && rt.hook().is_some_and(|h| !h.allows_view_put(p.rank()))
        {
            return Err(ViewError::UnloggedPut {
                owner: p.rank(),
                me,
            });
        }
        match &rt.state::<ViewState>().reach[p.rank()] {
            Some(area) => {
                let served = area.atomic(p.offset(), op);
                let previous = *served.as_ref().unwrap_or(&0);
                let done = refusal(me, "atomic", p, 8, served.map(|_| ()));
                Ok(Err(done.map(|()| previous)))
            }
            None => {
                let extra = encode_op(op);
                Ok(Ok(request(
                    rt,
                    p.rank(),
                    ATOMIC,
                    p.offset(),
                    8,
                    &extra,
                    &[],
                )))
            }
        }
    })?;
    match pending {
        Err(done) => done,
        Ok(reply) => {
            let bytes = reply.wait()?;
            let word: [u8; 8] = bytes[..].try_into().expect("an atomic's reply is 8 bytes");
            Ok(u64::from_le_bytes(word))
        }
    }
}

/// `served` as the accessor `accessor` sees it: a refusal named for `op` on `len` bytes at `p`.
fn refusal<T>(
    accessor: usize,
    op: &'static str,
    p: ViewPtr<T>,
    len: usize,
    served: Result<(), Refused>,
) -> Result<(), ViewError> {
    match served {
        Ok(()) => Ok(()),
        Err(Refused::Viewed {
            view_start,
            view_end,
        }) => Err(ViewError::Viewed {
            accessor,
            op,
            owner: p.rank(),
            offset: p.offset(),
            len,
            view_start,
            view_end,
        }),
        Err(Refused::Full) => unreachable!("an access takes no view slot"),
    }
}

/// Sends a put (`payload`) or get of `len` bytes at `offset` of `owner`'s area to the owner,
/// whose thread serves it ([`handle`]); the future holds the bytes read, or the refusal.
fn request(
    rt: &Runtime,
    owner: usize,
    op: u64,
    offset: usize,
    len: usize,
    extra: &[u64],
    payload: &[u8],
) -> Future<Result<Vec<u8>, ViewError>> {
    let (future, fulfiller) = Future::pending_for(Awaiting::new("the reply of a view access"));
    let accessor = rt.rank_me();
    let reply = Box::new(move |_: WriteAck, bytes: &[u8]| {
        let out = match bytes.split_first() {
            Some((&SERVED, data)) => Ok(data.to_vec()),
            Some((&REFUSED, range)) if range.len() == 16 => {
                let word = |i: usize| {
                    u64::from_le_bytes(range[i..i + 8].try_into().expect("8 bytes")) as usize
                };
                Err(ViewError::Viewed {
                    accessor,
                    op: op_name(op),
                    owner,
                    offset,
                    len,
                    view_start: word(0),
                    view_end: word(8),
                })
            }
            _ => wire::malformed(owner, "a view access's reply"),
        };
        fulfiller.fulfill(out);
    });
    let slot = rt.state::<PendingReplies>().insert(ReplyTo::Call(reply));
    let mut header = vec![op, offset as u64, len as u64, slot];
    header.extend_from_slice(extra);
    messages::send(rt, owner, Kind::View, &header, payload);
    future
}

/// Serves a view access from another process on its owner's thread: the same handshake as a
/// local access, so a range under an open view (the closure may be what polled) is refused.
pub(crate) fn handle(rt: &Runtime, token: &Token<'_>, header: &[u64], payload: &[u8]) {
    let source = token.source();
    let [op, offset, len, slot, ref extra @ ..] = *header else {
        wire::malformed(source, "a view access without its header")
    };
    let (offset, len) = (offset as usize, len as usize);
    let area = rt.state::<ViewState>().own(rt);
    let mut reply = vec![SERVED];
    let served = if !area.contains(offset, len) {
        wire::malformed(source, "a view access outside the area")
    } else if op == PUT && payload.len() == len {
        area.write(offset, payload)
    } else if op == GET {
        reply.resize(1 + len, 0);
        area.read(offset, &mut reply[1..])
    } else if let (ATOMIC, 8, &[a, b, c]) = (op, len, extra)
        && offset.is_multiple_of(8)
    {
        let Some(atomic) = decode_op([a, b, c]) else {
            wire::malformed(source, "a view atomic of unknown operation")
        };
        area.atomic(offset, atomic).map(|previous| {
            reply.extend_from_slice(&previous.to_le_bytes());
        })
    } else {
        wire::malformed(source, "a view access of unknown kind or length")
    };
    if let Err(Refused::Viewed {
        view_start,
        view_end,
    }) = served
    {
        reply.clear();
        reply.push(REFUSED);
        reply.extend_from_slice(&(view_start as u64).to_le_bytes());
        reply.extend_from_slice(&(view_end as u64).to_le_bytes());
    }
    // A view access writes nothing of the segment: the ack carries no counters.
    messages::send(rt, source, Kind::RpcReply, &[slot, 0, 0], &reply);
}
