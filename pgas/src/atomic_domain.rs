//! Remote atomics on 64-bit values in shared memory (UPC++ `atomic_domain`).
//!
//! Integers map one-to-one onto the communication core's atomics. `f64` loads, stores and
//! swaps are single operations on the bits; its add, min and max are compare-exchange loops
//! (one remote operation per attempt), which is cheap on the smp conduit and correct on any.

use std::marker::PhantomData;

use gasnet_bridge::{AtomicOp, AtomicResult};

use crate::future::Future;
use crate::global_ptr::GlobalPtr;
use crate::hook::AtomicAction;
use crate::runtime::{self, Runtime};

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
    assert!(!p.is_null(), "atomic through a null global pointer");
    runtime::with(|rt| apply(rt, p.rank(), p.offset(), op).previous)
}

impl<T: AtomicValue> AtomicDomain<T> {
    /// A domain for `T`.
    pub fn new() -> Self {
        AtomicDomain { _t: PhantomData }
    }

    /// Reads the value.
    pub fn load(&self, p: GlobalPtr<T>) -> Future<T> {
        Future::ready(T::from_bits(run(p, AtomicOp::Load)))
    }

    /// Writes `v`.
    pub fn store(&self, p: GlobalPtr<T>, v: T) -> Future<()> {
        run(p, AtomicOp::Store(v.to_bits()));
        Future::ready(())
    }

    /// Writes `v`, returns the previous value.
    pub fn exchange(&self, p: GlobalPtr<T>, v: T) -> Future<T> {
        Future::ready(T::from_bits(run(p, AtomicOp::Swap(v.to_bits()))))
    }

    /// Writes `new` if the value equals `current`; returns the previous value (equal to
    /// `current` exactly when the exchange happened).
    pub fn compare_exchange(&self, p: GlobalPtr<T>, current: T, new: T) -> Future<T> {
        let op = AtomicOp::CompareExchange {
            current: current.to_bits(),
            new: new.to_bits(),
        };
        Future::ready(T::from_bits(run(p, op)))
    }

    /// Applies `f` to the value with a compare-exchange loop; returns the previous value.
    fn update(&self, p: GlobalPtr<T>, f: impl Fn(T) -> T) -> T {
        let mut current = T::from_bits(run(p, AtomicOp::Load));
        loop {
            let seen = self.compare_exchange(p, current, f(current)).result();
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
            pub fn fetch_add(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                Future::ready(<$t>::from_bits(run(p, AtomicOp::FetchAdd(v.to_bits()))))
            }
            /// Adds `v` (wrapping).
            pub fn add(&self, p: GlobalPtr<$t>, v: $t) -> Future<()> {
                self.fetch_add(p, v).then(|_| ())
            }
            /// Subtracts `v` (wrapping), returns the previous value.
            pub fn fetch_sub(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                Future::ready(<$t>::from_bits(run(p, AtomicOp::FetchSub(v.to_bits()))))
            }
            /// Stores the minimum, returns the previous value.
            pub fn fetch_min(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                Future::ready(<$t>::from_bits(run(p, AtomicOp::$min(v as _))))
            }
            /// Stores the maximum, returns the previous value.
            pub fn fetch_max(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                Future::ready(<$t>::from_bits(run(p, AtomicOp::$max(v as _))))
            }
            /// Bitwise and, returns the previous value.
            pub fn fetch_and(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                Future::ready(<$t>::from_bits(run(p, AtomicOp::And(v.to_bits()))))
            }
            /// Bitwise or, returns the previous value.
            pub fn fetch_or(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                Future::ready(<$t>::from_bits(run(p, AtomicOp::Or(v.to_bits()))))
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
            pub fn fetch_xor(&self, p: GlobalPtr<$t>, v: $t) -> Future<$t> {
                Future::ready(<$t>::from_bits(run(p, AtomicOp::Xor(v.to_bits()))))
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
