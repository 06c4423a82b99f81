//! Remote atomics on 64-bit values in shared memory (UPC++ `atomic_domain`).
//!
//! Integers map one-to-one onto the communication core's atomics. `f64` loads, stores and
//! swaps are single operations on the bits; its add, min and max are compare-exchange loops
//! (one remote operation per attempt), which is cheap on the smp conduit and correct on any.

use std::marker::PhantomData;

use gasnet_bridge::{AtomicOp, AtomicResult};

use crate::future::Future;
use crate::global_ptr::GlobalPtr;
use crate::hook::{AtomicAction, SyncEvent};
use crate::pending::{PendingRead, push_read};
use crate::runtime::{self, Runtime};
use gasnet_bridge::Awaiting;

/// A 64-bit type the atomic domain supports.
pub trait AtomicValue: bytemuck::Pod + PartialEq {
    /// The bits as the core stores them.
    fn to_bits(self) -> u64;
    /// The value of those bits.
    fn from_bits(bits: u64) -> Self;
}

impl AtomicValue for u64 {
    fn to_bits(self) -> u64 {
        self
    }
    fn from_bits(bits: u64) -> Self {
        bits
    }
}
impl AtomicValue for i64 {
    fn to_bits(self) -> u64 {
        self as u64
    }
    fn from_bits(bits: u64) -> Self {
        bits as i64
    }
}
impl AtomicValue for f64 {
    fn to_bits(self) -> u64 {
        f64::to_bits(self)
    }
    fn from_bits(bits: u64) -> Self {
        f64::from_bits(bits)
    }
}

/// The synchronization a `*_sync` atomic makes, as C++'s `memory_order` names it; each
/// side it has steps this rank's epoch counter (EC) once.
///
/// Why a separate family of methods with this argument, rather than an ordering on every
/// atomic: the plain atomics stay what they are (relaxed, futures, many in flight, no EC step,
/// nothing added to their path), and an atomic the program uses *to synchronize* says so at
/// the call, where a reader and a resilience runtime both need to see it. The `*_sync` calls
/// block until the result is back: the acquire step must come after the result and before
/// anything the program does with it, which a future completed later in progress could not
/// place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncOrder {
    /// Later accesses of this rank are ordered after the atomic: the EC steps after it
    /// returns (a flag or lock word read before using what it guards).
    Acquire,
    /// Earlier accesses of this rank are ordered before the atomic: the rank's operations in
    /// flight complete, then the EC steps, then the atomic leaves (a flag set after the data
    /// it announces).
    Release,
    /// Both: the EC steps before and after.
    AcqRel,
}

impl SyncOrder {
    fn releases(self) -> bool {
        matches!(self, SyncOrder::Release | SyncOrder::AcqRel)
    }
    fn acquires(self) -> bool {
        matches!(self, SyncOrder::Acquire | SyncOrder::AcqRel)
    }
}

/// Runs `op` on `p` as a synchronization with ordering `order` (see [`SyncOrder`]).
fn synchronizing<T: AtomicValue, V: 'static>(
    p: GlobalPtr<T>,
    op: AtomicOp,
    order: SyncOrder,
    value: fn(u64) -> V,
) -> V {
    if order.releases() {
        runtime::with(|rt| rt.sync(SyncEvent::AtomicRelease));
    }
    let v = start(p, op, value).wait();
    if order.acquires() {
        runtime::with(|rt| rt.sync(SyncEvent::AtomicAcquire));
    }
    v
}

/// Atomic operations on `T` values in any rank's segment.
#[derive(Debug, Clone, Copy, Default)]
pub struct AtomicDomain<T> {
    _t: PhantomData<fn() -> T>,
}

fn apply(rt: &Runtime, rank: usize, offset: usize, op: AtomicOp) -> AtomicResult {
    let hook = rt.hook_op();
    if let Some((h, id)) = &hook {
        if let AtomicAction::Served(r) = h.before_atomic(*id, rank, offset, op) {
            return r;
        }
    }
    let result = rt
        .ep()
        .atomic(rank, offset, op)
        .unwrap_or_else(|e| panic!("atomic: {e}"));
    if let Some((h, id)) = hook {
        h.after_atomic(id, rank, offset, op, &result);
    }
    result
}

fn run<T: AtomicValue>(p: GlobalPtr<T>, op: AtomicOp) -> u64 {
    p.check_access("atomic");
    runtime::with(|rt| apply(rt, p.rank(), p.offset(), op).previous)
}

/// Starts `op` on `p`; the future holds `value(previous)`. Ready on return on memory this
/// process maps (or when the hook serves the result from its log); to another host the
/// operation is in flight and its reply completes the future during progress, after the
/// hook's `after_atomic` saw it (`pending.rs`), so many atomics can be in flight.
///
/// The unhooked atomic on mapped memory is inlined whole (with the operation known at the
/// call, it is the one locked instruction): behind calls, the operation's dispatch and the
/// global pointer passed through memory would cost more than the atomic itself (`pgas-bench`
/// `atomic_fetch_add` / `u64` against the core's).
#[inline]
fn start<T: AtomicValue, V: 'static>(
    p: GlobalPtr<T>,
    op: AtomicOp,
    value: fn(u64) -> V,
) -> Future<V> {
    p.check_access("atomic");
    let (rank, offset) = (p.rank(), p.offset());
    runtime::with(|rt| {
        if !rt.hooked() && rt.ep().maps(rank) {
            let result = rt
                .ep()
                .atomic(rank, offset, op)
                .unwrap_or_else(|e| panic!("atomic: {e}"));
            return Future::ready(value(result.previous));
        }
        start_other(rt, rank, offset, op, value)
    })
}

/// [`start`] with a hook, inside a handler, or to another host.
#[inline(never)]
fn start_other<V: 'static>(
    rt: &Runtime,
    rank: usize,
    offset: usize,
    op: AtomicOp,
    value: fn(u64) -> V,
) -> Future<V> {
    if rt.ep().maps(rank) || rt.ep().in_handler() {
        // Inside a handler too: an rpc function may wait for its own atomic.
        return Future::ready(value(apply(rt, rank, offset, op).previous));
    }
    let hook = rt.hook_op();
    if let Some((h, id)) = &hook {
        if let AtomicAction::Served(r) = h.before_atomic(*id, rank, offset, op) {
            return Future::ready(value(r.previous));
        }
    }
    let handle = rt
        .ep()
        .atomic_nb(rank, offset, op)
        .unwrap_or_else(|e| panic!("atomic: {e}"));
    let hooked = hook.map(|(h, id)| {
        rt.acks_pending.set(rt.acks_pending.get() + 1);
        (h, id, rank, offset, op)
    });
    let (future, fulfiller) = Future::pending_for(Awaiting::new("the reply of a remote atomic"));
    push_read(
        rt,
        PendingRead::Atomic {
            handle,
            hooked,
            deliver: Box::new(move |r| fulfiller.fulfill(value(r.previous))),
        },
    );
    future
}

impl<T: AtomicValue> AtomicDomain<T> {
    /// A domain for `T`.
    pub fn new() -> Self {
        AtomicDomain { _t: PhantomData }
    }

    /// Reads the value.
    pub fn load(&self, p: GlobalPtr<T>) -> Future<T> {
        start(p, AtomicOp::Load, T::from_bits)
    }

    /// Writes `v`.
    pub fn store(&self, p: GlobalPtr<T>, v: T) -> Future<()> {
        start(p, AtomicOp::Store(v.to_bits()), |_| ())
    }

    /// Writes `v`, returns the previous value.
    pub fn exchange(&self, p: GlobalPtr<T>, v: T) -> Future<T> {
        start(p, AtomicOp::Swap(v.to_bits()), T::from_bits)
    }

    /// Writes `new` if the value equals `current`; returns the previous value (equal to
    /// `current` exactly when the exchange happened).
    pub fn compare_exchange(&self, p: GlobalPtr<T>, current: T, new: T) -> Future<T> {
        let op = AtomicOp::CompareExchange {
            current: current.to_bits(),
            new: new.to_bits(),
        };
        start(p, op, T::from_bits)
    }

    /// Reads the value as a synchronization ([`SyncOrder`]): with `Acquire`, what the
    /// program does after depends on what it read.
    pub fn load_sync(&self, p: GlobalPtr<T>, order: SyncOrder) -> T {
        synchronizing(p, AtomicOp::Load, order, T::from_bits)
    }

    /// Writes `v` as a synchronization ([`SyncOrder`]): with `Release`, a flag set after
    /// the accesses it announces.
    pub fn store_sync(&self, p: GlobalPtr<T>, v: T, order: SyncOrder) {
        synchronizing(p, AtomicOp::Store(v.to_bits()), order, |_| ())
    }

    /// Writes `v` and returns the previous value, as a synchronization ([`SyncOrder`]).
    pub fn exchange_sync(&self, p: GlobalPtr<T>, v: T, order: SyncOrder) -> T {
        synchronizing(p, AtomicOp::Swap(v.to_bits()), order, T::from_bits)
    }

    /// [`compare_exchange`](Self::compare_exchange) as a synchronization ([`SyncOrder`]),
    /// such as taking a lock word (`Acquire`) or handing it over (`Release`).
    pub fn compare_exchange_sync(
        &self,
        p: GlobalPtr<T>,
        current: T,
        new: T,
        order: SyncOrder,
    ) -> T {
        let op = AtomicOp::CompareExchange {
            current: current.to_bits(),
            new: new.to_bits(),
        };
        synchronizing(p, op, order, T::from_bits)
    }

    /// Applies `f` to the value with a compare-exchange loop; returns the previous value.
    fn update(&self, p: GlobalPtr<T>, f: impl Fn(T) -> T) -> T {
        let mut current = T::from_bits(run(p, AtomicOp::Load));
        loop {
            let seen = self.compare_exchange(p, current, f(current)).wait();
            if seen.to_bits() == current.to_bits() {
                return seen;
            }
            current = seen;
        }
    }
}

/// Integer operations, single remote atomics each.
macro_rules! integer_ops {
    ($t:ty, $min:ident, $max:ident) => {
        impl AtomicDomain<$t> {
            /// Adds `v` (wrapping), returns the previous value.
            #[inline]
            pub fn fetch_add(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                start(p, AtomicOp::FetchAdd(v.to_bits()), <$t>::from_bits)
            }
            /// Adds `v` (wrapping) and returns the previous value, as a synchronization
            /// ([`SyncOrder`]): a counter others wait on (`Release`), a ticket (`Acquire`).
            pub fn fetch_add_sync(&self, p: GlobalPtr<$t>, v: $t, order: SyncOrder) -> $t {
                synchronizing(p, AtomicOp::FetchAdd(v.to_bits()), order, <$t>::from_bits)
            }
            /// Adds `v` (wrapping).
            pub fn add(&self, p: GlobalPtr<$t>, v: $t) -> Future<()> {
                self.fetch_add(p, v).then(|_| ())
            }
            /// Subtracts `v` (wrapping), returns the previous value.
            #[inline]
            pub fn fetch_sub(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                start(p, AtomicOp::FetchSub(v.to_bits()), <$t>::from_bits)
            }
            /// Stores the minimum, returns the previous value.
            #[inline]
            pub fn fetch_min(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                start(p, AtomicOp::$min(v as _), <$t>::from_bits)
            }
            /// Stores the maximum, returns the previous value.
            #[inline]
            pub fn fetch_max(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                start(p, AtomicOp::$max(v as _), <$t>::from_bits)
            }
            /// Bitwise and, returns the previous value.
            #[inline]
            pub fn fetch_and(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                start(p, AtomicOp::And(v.to_bits()), <$t>::from_bits)
            }
            /// Bitwise or, returns the previous value.
            #[inline]
            pub fn fetch_or(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                start(p, AtomicOp::Or(v.to_bits()), <$t>::from_bits)
            }
            /// Bitwise and.
            pub fn and(&self, p: GlobalPtr<$t>, v: $t) -> Future<()> {
                self.fetch_and(p, v).then(|_| ())
            }
            /// Bitwise or.
            pub fn or(&self, p: GlobalPtr<$t>, v: $t) -> Future<()> {
                self.fetch_or(p, v).then(|_| ())
            }
            /// Bitwise xor.
            pub fn xor(&self, p: GlobalPtr<$t>, v: $t) -> Future<()> {
                self.fetch_xor(p, v).then(|_| ())
            }
            /// Bitwise xor, returns the previous value.
            #[inline]
            pub fn fetch_xor(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                start(p, AtomicOp::Xor(v.to_bits()), <$t>::from_bits)
            }
        }
    };
}

integer_ops!(u64, Min, Max);
integer_ops!(i64, MinI64, MaxI64);

impl AtomicDomain<f64> {
    /// Adds `v`, returns the previous value.
    pub fn fetch_add(&self, p: GlobalPtr<f64>, v: f64) -> Future<f64> {
        Future::ready(self.update(p, |x| x + v))
    }
    /// Adds `v`.
    pub fn add(&self, p: GlobalPtr<f64>, v: f64) -> Future<()> {
        self.fetch_add(p, v).then(|_| ())
    }
    /// Stores the minimum, returns the previous value.
    pub fn fetch_min(&self, p: GlobalPtr<f64>, v: f64) -> Future<f64> {
        Future::ready(self.update(p, |x| x.min(v)))
    }
    /// Stores the maximum, returns the previous value.
    pub fn fetch_max(&self, p: GlobalPtr<f64>, v: f64) -> Future<f64> {
        Future::ready(self.update(p, |x| x.max(v)))
    }
}
