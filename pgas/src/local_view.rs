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
use gasnet_bridge::{Awaiting, Token, WriteAck};
use serde::{Deserialize, Serialize};

use crate::error::{PgasError, ViewError};
use crate::future::Future;
use crate::heap::Heap;
use crate::messages;
use crate::rpc::{PendingReplies, ReplyTo};
use crate::runtime::{self, Runtime};
use crate::view_area::{AREA_ALIGN, MAX_VIEWS, Refused, ViewArea};
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
    let (area, start, bytes) = runtime::with(|rt| {
        let bytes = check(rt, p, len, "with_local_mut")?;
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
        return Ok(f(&mut []));
    }
    let slot = area.open(start, bytes).map_err(|r| match r {
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
    /// Closes the view when the closure returns or unwinds.
    struct Close<'a>(&'a ViewArea, usize);
    impl Drop for Close<'_> {
        fn drop(&mut self) {
            self.0.close(self.1);
        }
    }
    let _close = Close(&area, slot);
    // SAFETY: the view just opened covers exactly `start .. start + bytes`, inside the live
    // area (which `area`, an `Arc`, keeps alive past the slice). `check` made `start` aligned
    // for `T` over a base aligned to `AREA_ALIGN`, which `T`'s alignment divides, and `bytes`
    // is `len` elements of `T`. The slice is
    // exclusive: the handshake keeps every access by anyone else out of the range while the
    // view is open, a nested view of any of its bytes was refused by `open`, and the view
    // closes only when `_close` drops, after `f`, the slice's only user, has returned. `T` is
    // plain data, so any bytes there are a valid `T`.
    let slice = unsafe { std::slice::from_raw_parts_mut(area.address(start).cast::<T>(), len) };
    Ok(f(slice))
}

/// Whether a request is a put or a get (its first header word).
const PUT: u64 = 0;
const GET: u64 = 1;

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
            None => Ok(Ok(request(rt, src.rank(), GET, src.offset(), len, &[]))),
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
                    op: if op == PUT { "put" } else { "get" },
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
    messages::send(
        rt,
        owner,
        Kind::View,
        &[op, offset as u64, len as u64, slot],
        payload,
    );
    future
}

/// Serves a view access from another process on its owner's thread: the same handshake as a
/// local access, so a range under an open view (the closure may be what polled) is refused.
pub(crate) fn handle(rt: &Runtime, token: &Token<'_>, header: &[u64], payload: &[u8]) {
    let source = token.source();
    let [op, offset, len, slot, ..] = *header else {
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
