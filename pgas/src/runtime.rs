//! The per-rank runtime: the rank's endpoint, heap, hook, modes and message counters,
//! reachable from the free functions of the API (`rank_me()`, `rput(..)`, ...) through a
//! thread-local pointer.
//!
//! The mechanisms above (pending completions, rpc, collectives, teams, dist objects) keep their
//! per-rank state here without this file naming their types: [`InFlight`] is the one the
//! runtime drives itself (waits complete what arrived), the others sit in a registry that
//! `launch` fills in and each mechanism reads with [`Runtime::state`].
//!
//! # Safety invariant of the thread-local pointer
//!
//! `CURRENT` is non-null only between [`Entered::new`] and the drop of the returned guard,
//! both inside [`run_rank`], which `launch` calls in its per-rank closure, where the `Runtime`
//! lives on the rank thread's stack and outlives the guard. Only the owning thread reads it.
//! Dereferencing it in `with` is therefore a shared borrow of a live value; all mutable state inside uses `Cell` and
//! `RefCell`, and no `RefCell` borrow is held across a call that can run handlers.

use std::any::{Any, TypeId};
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::rc::Rc;

use gasnet_bridge::{AtomicOp, Endpoint, FlushId, HandlerId};

use crate::error::PgasError;
use crate::heap::Heap;
use crate::hook::{Interceptor, OpId, ServedRequest, SyncEvent};
use crate::wire::Reassembly;

/// Bytes of the segment used by finalize's counting waves (at offset 0).
const WAVES_BYTES: usize = 4096;
/// Offset of the two words of the fast world reduction (`collectives::reduce_all_u64`).
pub(crate) const FAST_REDUCE_AT: usize = WAVES_BYTES;
/// Bytes at the start of every segment kept for the runtime.
pub(crate) const RESERVED: usize = WAVES_BYTES + 64;
/// Counting waves finalize may use before it reports that messages keep flowing.
const MAX_WAVES: usize = WAVES_BYTES / 16;

/// The refusal of an access at `offset` of `rank`'s segment, below the program's memory.
pub(crate) fn reserved(rank: usize, offset: usize) -> PgasError {
    PgasError::Reserved {
        rank,
        offset,
        reserved: RESERVED,
    }
}

/// The puts, gets and atomics of this rank still in flight, kept by the layer above
/// (`pending.rs`) and driven from here: every wait completes what has arrived.
pub(crate) trait InFlight: Any {
    /// How many records of operations in flight it keeps (what [`Runtime::in_flight_added`]
    /// and [`Runtime::in_flight_done`] must have counted).
    fn records(&self) -> usize;
    /// Completes the operations whose acks or replies have arrived, making no progress.
    fn complete_arrived(&self, rt: &Runtime);
    /// Keeps write `id` (one that a flush completes) until it has completed, then runs `done`
    /// during progress: a continuation on the future of such a write.
    fn track_write(&self, rt: &Runtime, id: FlushId, done: Box<dyn FnOnce()>);
}

thread_local! {
    static CURRENT: Cell<*const Runtime> = const { Cell::new(std::ptr::null()) };
}

/// Everything one rank's pgas layer keeps.
pub(crate) struct Runtime {
    ep: *const Endpoint,
    pub(crate) msg_handler: HandlerId,
    pub(crate) heap: RefCell<Heap>,
    hook: RefCell<Option<Rc<dyn Interceptor>>>,
    /// A hook is installed and the rank is not in an internal scope: the one flag the hot
    /// paths test.
    hooked: Cell<bool>,
    /// Depth of nested `resilience::internal` scopes (0: the application's traffic).
    internal: Cell<u32>,
    /// Next `OpId` given to an operation started with a hook.
    next_op: Cell<u64>,
    /// Hooked writes (puts, rpcs) started whose ack has not arrived yet.
    pub(crate) acks_pending: Cell<usize>,
    /// Offsets of blocks whose `delete_` the hook deferred.
    pub(crate) deferred_frees: RefCell<BTreeSet<usize>>,
    /// Puts, gets and atomics to other hosts whose acks or replies have not come yet.
    in_flight: Box<dyn InFlight>,
    /// The records `in_flight` keeps, counted as they are added and completed: the test every
    /// round of progress makes, a load where asking `in_flight` is a call through its vtable.
    in_flight_records: Cell<usize>,
    /// True while a pgas message (an rpc, a reply, a collective step) is being handled.
    pub(crate) in_handler: Cell<bool>,
    /// The program's rpc request whose function is running on this rank, if any
    /// (`resilience::serving_request`).
    pub(crate) serving: Cell<Option<ServedRequest>>,
    next_message: Cell<u64>,
    /// Logical messages this rank sent / handled, for finalize's termination detection.
    pub(crate) sent: Cell<u64>,
    pub(crate) handled: Cell<u64>,
    pub(crate) reassembly: Reassembly,
    /// The per-rank state of the mechanisms above, one value of each type ([`Runtime::state`]),
    /// beside its type's id so that a lookup compares ids inline instead of asking each box.
    states: Vec<(TypeId, Box<dyn Any>)>,
    /// Values a resilience runtime keeps alive until every rank of the job is done
    /// (`resilience::keep_until_job_end`).
    pub(crate) kept: RefCell<Vec<Box<dyn Any>>>,
}

/// Resets the thread-local pointer when the rank leaves `launch` (also on unwind).
struct Entered;

impl Entered {
    fn new(rt: &Runtime) -> Entered {
        CURRENT.with(|c| c.set(rt as *const Runtime));
        Entered
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(std::ptr::null()));
    }
}

/// Drops the values kept until the job's end (`resilience::keep_until_job_end`) while the
/// rank is still entered: after finalize, or when the rank unwinds.
struct Kept<'a>(&'a Runtime);

impl Drop for Kept<'_> {
    fn drop(&mut self) {
        // Taken out first: a value's drop may use pgas, even keep another value.
        let values = std::mem::take(&mut *self.0.kept.borrow_mut());
        drop(values);
    }
}

/// Runs `body` as the program of `rt`'s rank (the thread-local pointer set meanwhile), then
/// completes everything in flight in the job before it returns.
pub(crate) fn run_rank<R>(rt: &Runtime, body: impl FnOnce() -> R) -> R {
    let _entered = Entered::new(rt);
    let kept = Kept(rt);
    let result = body();
    rt.finalize();
    // Only now: until finalize's termination detection every rank may still send this
    // one requests (a rank recovering from a loss fetches its buddy's copy), and the
    // state that serves them must still be there.
    drop(kept);
    result
}

/// Runs `f` with the calling rank's runtime.
///
/// # Panics
/// Outside [`launch`](crate::launch).
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&Runtime) -> R) -> R {
    let p = CURRENT.with(|c| c.get());
    assert!(
        !p.is_null(),
        "pgas used outside pgas::launch: this thread is not a rank"
    );
    // SAFETY: see the module invariant: non-null means the runtime is alive on this thread.
    f(unsafe { &*p })
}

impl Runtime {
    /// The runtime of the rank of `ep`, whose pgas messages go to handler `msg_handler`, with
    /// the in-flight operations and the per-rank states of the mechanisms above.
    pub(crate) fn new(
        ep: &Endpoint,
        msg_handler: HandlerId,
        in_flight: Box<dyn InFlight>,
        states: Vec<Box<dyn Any>>,
    ) -> Runtime {
        let rank = ep.rank();
        Runtime {
            ep,
            msg_handler,
            heap: RefCell::new(Heap::new(rank, RESERVED, ep.segment_len())),
            hook: RefCell::new(None),
            hooked: Cell::new(false),
            internal: Cell::new(0),
            next_op: Cell::new(0),
            acks_pending: Cell::new(0),
            deferred_frees: RefCell::new(BTreeSet::new()),
            in_flight,
            in_flight_records: Cell::new(0),
            in_handler: Cell::new(false),
            serving: Cell::new(None),
            next_message: Cell::new(0),
            sent: Cell::new(0),
            handled: Cell::new(0),
            reassembly: Reassembly::default(),
            states: states.into_iter().map(|s| ((*s).type_id(), s)).collect(),
            kept: RefCell::new(Vec::new()),
        }
    }

    /// The per-rank state of type `S` of a mechanism above, which `launch` created.
    ///
    /// # Panics
    /// If `launch` created none (a bug of `launch`).
    #[inline]
    pub(crate) fn state<S: Any>(&self) -> &S {
        let id = TypeId::of::<S>();
        self.states
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, s)| s.downcast_ref::<S>())
            .unwrap_or_else(|| {
                panic!(
                    "pgas: launch made no per-rank {}",
                    std::any::type_name::<S>()
                )
            })
    }

    /// The operations in flight, as the type that keeps them (`pending.rs`).
    #[inline]
    pub(crate) fn in_flight<S: InFlight>(&self) -> &S {
        let any: &dyn Any = &*self.in_flight;
        any.downcast_ref::<S>()
            .expect("pgas: the in-flight operations are kept by one type")
    }

    /// The rank's endpoint.
    #[inline]
    pub(crate) fn ep(&self) -> &Endpoint {
        // SAFETY: the runtime is created from the endpoint inside the bridge's per-rank closure
        // and dropped before that closure returns, so the endpoint outlives it.
        unsafe { &*self.ep }
    }

    #[inline]
    pub(crate) fn rank_me(&self) -> usize {
        self.ep().rank()
    }

    pub(crate) fn is_local_rank(&self, rank: usize) -> bool {
        let t = self.ep().topology();
        rank < t.ranks() && t.node_of(rank) == self.ep().node()
    }

    pub(crate) fn check_range(
        &self,
        rank: usize,
        offset: usize,
        len: usize,
    ) -> Result<(), PgasError> {
        if rank >= self.ep().ranks() {
            return Err(gasnet_bridge::BridgeError::NoSuchRank {
                rank,
                ranks: self.ep().ranks(),
            }
            .into());
        }
        if offset < RESERVED {
            return Err(reserved(rank, offset));
        }
        match offset.checked_add(len) {
            Some(end) if end <= self.ep().segment_len() => Ok(()),
            _ => Err(gasnet_bridge::BridgeError::OutOfSegment {
                rank,
                offset,
                len,
                segment_len: self.ep().segment_len(),
            }
            .into()),
        }
    }

    pub(crate) fn segment_base(&self, rank: usize) -> Result<*mut u8, PgasError> {
        Ok(self.ep().segment_base(rank)?)
    }

    /// The installed hook, if any and not in an internal scope (one branch when none is
    /// installed).
    #[inline]
    pub(crate) fn hook(&self) -> Option<Rc<dyn Interceptor>> {
        if self.hooked.get() {
            self.hook.borrow().clone()
        } else {
            None
        }
    }

    /// True when a hook applies (installed, not in an internal scope).
    #[inline]
    pub(crate) fn hooked(&self) -> bool {
        self.hooked.get()
    }

    /// The hook and a fresh id for an operation about to start, if a hook applies.
    #[inline]
    pub(crate) fn hook_op(&self) -> Option<(Rc<dyn Interceptor>, OpId)> {
        if self.hooked.get() {
            let hook = self.hook.borrow().clone()?;
            let id = self.next_op.get();
            self.next_op.set(id + 1);
            Some((hook, OpId(id)))
        } else {
            None
        }
    }

    pub(crate) fn set_hook(&self, hook: Option<Rc<dyn Interceptor>>) {
        *self.hook.borrow_mut() = hook;
        self.refresh_hooked();
    }

    fn refresh_hooked(&self) {
        self.hooked
            .set(self.internal.get() == 0 && self.hook.borrow().is_some());
    }

    /// True inside `resilience::internal` (or while handling a message marked internal).
    #[inline]
    pub(crate) fn is_internal(&self) -> bool {
        self.internal.get() > 0
    }

    /// Runs `f` as internal traffic (`internal == true`) or as the application's (`false`),
    /// restoring the previous mode afterwards, also on unwind.
    pub(crate) fn in_mode<R>(&self, internal: bool, f: impl FnOnce() -> R) -> R {
        struct Restore<'a>(&'a Runtime, u32);
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                self.0.internal.set(self.1);
                self.0.refresh_hooked();
            }
        }
        let previous = self.internal.get();
        if internal && previous == 0 {
            // The resilience runtime's work (preserve, agree, restore) starts after the
            // program's writes have landed (see `pending.rs`).
            self.quiet();
        }
        let _restore = Restore(self, previous);
        self.internal.set(if internal {
            previous.saturating_add(1)
        } else {
            0
        });
        self.refresh_hooked();
        f()
    }

    pub(crate) fn next_message_id(&self) -> u64 {
        let id = self.next_message.get();
        self.next_message.set(id + 1);
        id
    }

    /// Advances the EC for a synchronization and tells the hook; nothing in an internal scope
    /// (a resilience runtime's own synchronizations are not the program's epochs).
    pub(crate) fn sync(&self, kind: SyncEvent) {
        if self.is_internal() {
            return;
        }
        self.step(self.hook().as_ref(), kind);
    }

    /// Advances the EC for a synchronization and tells `hook` (the one an operation captured
    /// when it started: its completion may come in another mode).
    pub(crate) fn step(&self, hook: Option<&Rc<dyn Interceptor>>, kind: SyncEvent) {
        self.quiet();
        let ec = self.ep().advance_epoch(1);
        if let Some(h) = hook {
            h.on_sync(kind, ec);
        }
    }

    /// True if no put, get or atomic of this rank is in flight.
    #[inline]
    pub(crate) fn nothing_in_flight(&self) -> bool {
        self.in_flight_records.get() == 0
    }

    /// The in-flight operations keep one record more.
    #[inline]
    pub(crate) fn in_flight_added(&self) {
        self.in_flight_records.set(self.in_flight_records.get() + 1);
    }

    /// The in-flight operations completed `n` records (and keep them no more).
    #[inline]
    pub(crate) fn in_flight_done(&self, n: usize) {
        let left = self.in_flight_records.get() - n;
        self.in_flight_records.set(left);
        debug_assert_eq!(
            left,
            self.in_flight.records(),
            "in-flight records miscounted"
        );
    }

    /// Keeps write `id` until it has completed, then runs `done` ([`InFlight::track_write`]).
    pub(crate) fn track_write(&self, id: FlushId, done: Box<dyn FnOnce()>) {
        self.in_flight.track_write(self, id, done);
    }

    /// Completes the operations whose acks or replies have arrived (after a round of progress).
    #[inline]
    pub(crate) fn complete_arrived(&self) {
        if !self.nothing_in_flight() {
            self.in_flight.complete_arrived(self);
        }
    }

    /// Makes progress until this rank has no put, get or atomic in flight (see `pending.rs`);
    /// free when it has none. Not inside a pgas message's handler, which may not wait (an rpc
    /// function that enters an internal scope, a resilience runtime's gather): the rank's own
    /// synchronization or scope entry outside the handler quiets instead.
    #[inline]
    pub(crate) fn quiet(&self) {
        if self.ep().in_handler() {
            return;
        }
        // Window puts whose futures hold only their numbers are in no list (`pending.rs`): the
        // flush completes them, and whatever in the lists waited for it.
        if self.ep().flush_rma() && !self.nothing_in_flight() {
            self.complete_arrived();
        }
        if self.nothing_in_flight() {
            return;
        }
        self.ep().wait_for(
            gasnet_bridge::Awaiting::new("the replies of this rank's operations"),
            || {
                self.complete_arrived();
                self.nothing_in_flight()
            },
        );
    }

    /// Before a wait's rounds of progress: if operations that complete without messages are in
    /// flight (the mpi conduit's window puts and gets), completes them and what they complete
    /// (`pending.rs`), and returns whether `done` then holds. A put's wait thus costs one flush
    /// of its target instead of a progress round (a flush, the receive test of the message
    /// path, a back-off), and runs no handler, as a wait on a future found ready runs none.
    /// Not inside a handler, where a wait must still refuse to block.
    #[inline]
    fn complete_without_messages(&self, done: &mut impl FnMut() -> bool) -> bool {
        if self.nothing_in_flight() || self.ep().in_handler() || !self.ep().flush_rma() {
            return false;
        }
        self.complete_arrived();
        done()
    }

    /// Completes everything in flight before the rank leaves: waves of (sent, handled)
    /// totals, summed at rank 0 between barriers, until two consecutive waves agree and every
    /// sent message was handled (the four-counter method of termination detection).
    fn finalize(&self) {
        self.quiet();
        let ep = self.ep();
        let mut previous = None;
        for wave in 0..MAX_WAVES {
            // Drain first: a barrier that is already complete when a rank reaches it (always
            // on one rank; the last arriver otherwise) polls nothing, so a rank holding
            // unhandled rpcs would never handle them and finalize would give up after
            // MAX_WAVES.
            while ep.poll() > 0 {}
            ep.barrier().expect("finalize barrier");
            let base = wave * 16;
            let add = |at: usize, v: u64| {
                ep.atomic(0, at, AtomicOp::FetchAdd(v))
                    .expect("finalize count");
            };
            add(base, self.sent.get());
            add(base + 8, self.handled.get());
            ep.barrier().expect("finalize barrier");
            let load = |at: usize| {
                ep.atomic(0, at, AtomicOp::Load)
                    .expect("finalize count")
                    .previous
            };
            let totals = (load(base), load(base + 8));
            if totals.0 == totals.1 && previous == Some(totals) {
                return;
            }
            previous = Some(totals);
        }
        panic!(
            "pgas finalize: messages were still being sent after {MAX_WAVES} counting waves \
             (an rpc that sends an rpc forever?)"
        );
    }
}

/// This rank's index in the world.
pub fn rank_me() -> usize {
    with(|rt| rt.rank_me())
}

/// Number of ranks in the world.
pub fn rank_n() -> usize {
    with(|rt| rt.ep().ranks())
}

/// The node (host, or emulated node on smp with `PGAS_RANKS_PER_NODE`) that world rank
/// `rank` runs on, from the conduit's topology; nodes are numbered from 0.
///
/// # Panics
/// If `rank` is not a world rank.
pub fn node_of(rank: usize) -> usize {
    with(|rt| {
        let t = rt.ep().topology();
        assert!(
            rank < t.ranks(),
            "node_of({rank}): there are {} ranks",
            t.ranks()
        );
        t.node_of(rank)
    })
}

/// This rank's Epoch Counter (EC) in the communication core.
pub fn epoch() -> u64 {
    with(|rt| rt.ep().epoch())
}

/// Advances this rank's epoch for a fence (a synchronization point of the program).
pub fn fence() {
    with(|rt| rt.sync(SyncEvent::Fence));
}

/// The calling rank's communication-core endpoint, for benchmarks that measure a raw operation
/// side by side with the API. It bypasses the interception hook: not for programs.
#[cfg(feature = "testing")]
pub fn bench_endpoint<R>(f: impl FnOnce(&Endpoint) -> R) -> R {
    with(|rt| f(rt.ep()))
}

/// Runs pending incoming work (rpcs, replies, completions); returns how much ran.
pub fn progress() -> usize {
    with(|rt| {
        let n = rt.ep().poll();
        rt.complete_arrived();
        n
    })
}

/// Makes progress until `done()` holds, for a condition that no message announces, such as a
/// flag in this rank's segment that another rank's put sets (a put wakes nobody): spins
/// briefly, then yields, then sleeps 20 us between polls (ranks may outnumber cores).
pub fn poll_until(mut done: impl FnMut() -> bool) {
    let mut rounds = 0u32;
    while !done() {
        progress();
        rounds += 1;
        if rounds > 2_000 {
            std::thread::sleep(std::time::Duration::from_micros(20));
        } else if rounds > 20 {
            std::thread::yield_now();
        }
    }
}

/// Makes progress until `done()` holds (spinning, then yielding, then parking).
pub(crate) fn progress_until(mut done: impl FnMut() -> bool) {
    with(|rt| {
        if rt.complete_without_messages(&mut done) {
            return;
        }
        rt.ep().wait_until(|| {
            rt.complete_arrived();
            done()
        })
    })
}

/// [`progress_until`], telling what is awaited (the hang report, `PGAS_HANG_REPORT`).
pub(crate) fn progress_until_for(awaiting: gasnet_bridge::Awaiting, done: impl FnMut() -> bool) {
    let mut done = done;
    with(|rt| {
        if rt.complete_without_messages(&mut done) {
            return;
        }
        rt.ep().wait_for(awaiting, || {
            rt.complete_arrived();
            done()
        })
    })
}

/// Ends the job on every rank with `message`, already worded for the user: this rank unwinds
/// without a panic message, the others are woken and unwind quietly, and
/// [`launch`](crate::launch) returns
/// [`LaunchError::RankPanicked`](gasnet_bridge::LaunchError::RankPanicked) with `message`. For a
/// rank that cannot go on (its output failed, its input is bad): returning alone instead would
/// leave the other ranks waiting for it in their next collective, forever.
pub fn stop(message: impl Into<String>) -> ! {
    std::panic::resume_unwind(Box::new(gasnet_bridge::for_runtimes::Stopped(
        message.into(),
    )))
}

/// True when called on a rank inside [`launch`](crate::launch).
pub fn in_launch() -> bool {
    !CURRENT.with(|c| c.get()).is_null()
}
