//! Remote atomic operations on 64-bit words in a segment.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::counters::WriteAck;

/// One atomic operation on a 64-bit word; `Min`/`Max` compare as unsigned, `MinI64`/`MaxI64`
/// as two's-complement signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// Reads the word.
    Load,
    /// Writes `v`.
    Store(u64),
    /// Writes `v`, returns the old value.
    Swap(u64),
    /// Adds `v` (wrapping).
    FetchAdd(u64),
    /// Subtracts `v` (wrapping).
    FetchSub(u64),
    /// Writes `new` if the word equals `current`.
    CompareExchange { current: u64, new: u64 },
    /// Unsigned minimum.
    Min(u64),
    /// Unsigned maximum.
    Max(u64),
    /// Signed minimum.
    MinI64(i64),
    /// Signed maximum.
    MaxI64(i64),
    /// Bitwise and.
    And(u64),
    /// Bitwise or.
    Or(u64),
    /// Bitwise xor.
    Xor(u64),
}

/// The word's value before the operation, and how the target counted the write if it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicResult {
    /// The value before the operation (for `Load` the value read).
    pub previous: u64,
    /// The write's counters at the target; `None` for a load or a failed compare-exchange,
    /// which write nothing.
    pub ack: Option<WriteAck>,
}

impl AtomicOp {
    /// Applies the operation; returns the previous value and whether it counts as a write.
    ///
    /// Every operation is `SeqCst`, so remote atomics on one word form a single total order
    /// and synchronize like the C++ defaults that UPC++ atomics use. Inlined: with the
    /// operation known at the call it is the one locked instruction, no dispatch.
    #[inline]
    pub fn apply(self, word: &AtomicU64) -> (u64, bool) {
        const O: Ordering = Ordering::SeqCst;
        match self {
            AtomicOp::Load => (word.load(O), false),
            AtomicOp::Store(v) => (word.swap(v, O), true),
            AtomicOp::Swap(v) => (word.swap(v, O), true),
            AtomicOp::FetchAdd(v) => (word.fetch_add(v, O), true),
            AtomicOp::FetchSub(v) => (word.fetch_sub(v, O), true),
            AtomicOp::CompareExchange { current, new } => {
                match word.compare_exchange(current, new, O, O) {
                    Ok(prev) => (prev, true),
                    Err(prev) => (prev, false),
                }
            }
            AtomicOp::Min(v) => (word.fetch_min(v, O), true),
            AtomicOp::Max(v) => (word.fetch_max(v, O), true),
            AtomicOp::MinI64(v) => (signed(word, |x| x.min(v)), true),
            AtomicOp::MaxI64(v) => (signed(word, |x| x.max(v)), true),
            AtomicOp::And(v) => (word.fetch_and(v, O), true),
            AtomicOp::Or(v) => (word.fetch_or(v, O), true),
            AtomicOp::Xor(v) => (word.fetch_xor(v, O), true),
        }
    }
}

fn signed(word: &AtomicU64, f: impl Fn(i64) -> i64) -> u64 {
    match word.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |x| {
        Some(f(x as i64) as u64)
    }) {
        Ok(prev) | Err(prev) => prev,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(start: u64, op: AtomicOp) -> (u64, u64, bool) {
        let w = AtomicU64::new(start);
        let (prev, wrote) = op.apply(&w);
        (prev, w.load(Ordering::Relaxed), wrote)
    }

    #[test]
    fn each_operation() {
        assert_eq!(run(5, AtomicOp::Load), (5, 5, false));
        assert_eq!(run(5, AtomicOp::Store(9)), (5, 9, true));
        assert_eq!(run(5, AtomicOp::Swap(9)), (5, 9, true));
        assert_eq!(run(u64::MAX, AtomicOp::FetchAdd(2)), (u64::MAX, 1, true));
        assert_eq!(run(0, AtomicOp::FetchSub(1)), (0, u64::MAX, true));
        assert_eq!(
            run(5, AtomicOp::CompareExchange { current: 5, new: 6 }),
            (5, 6, true)
        );
        assert_eq!(
            run(5, AtomicOp::CompareExchange { current: 4, new: 6 }),
            (5, 5, false)
        );
        assert_eq!(run(5, AtomicOp::Min(3)), (5, 3, true));
        assert_eq!(run(5, AtomicOp::Max(3)), (5, 5, true));
        assert_eq!(
            run(-5i64 as u64, AtomicOp::MinI64(3)),
            (-5i64 as u64, -5i64 as u64, true)
        );
        assert_eq!(
            run(-5i64 as u64, AtomicOp::MaxI64(3)),
            (-5i64 as u64, 3, true)
        );
        assert_eq!(
            run(-5i64 as u64, AtomicOp::Min(3)),
            (-5i64 as u64, 3, true),
            "unsigned"
        );
        assert_eq!(run(0b1100, AtomicOp::And(0b1010)), (0b1100, 0b1000, true));
        assert_eq!(run(0b1100, AtomicOp::Or(0b1010)), (0b1100, 0b1110, true));
        assert_eq!(run(0b1100, AtomicOp::Xor(0b1010)), (0b1100, 0b0110, true));
    }
}
