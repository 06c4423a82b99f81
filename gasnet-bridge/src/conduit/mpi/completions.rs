//! The operations this rank started that complete by an answer (an ack, an atomic's reply, a
//! get's data), by operation number: what a pending handle asks about.

use std::collections::HashMap;

use crate::atomic::AtomicResult;
use crate::counters::WriteAck;

/// Completion of an operation this rank started.
pub(super) enum Op {
    Waiting,
    Ack(WriteAck),
    Atomic(AtomicResult),
    /// The data of a non-blocking get.
    Got(Vec<u8>),
}

/// The operations waiting for (or holding) their answer, and the next number to give.
pub(super) struct Completions {
    ops: HashMap<u64, Op>,
    next: u64,
}

impl Completions {
    /// No operation started.
    pub(super) fn new() -> Completions {
        Completions {
            ops: HashMap::new(),
            next: 0,
        }
    }

    /// Numbers a new operation, waiting for its answer.
    pub(super) fn start(&mut self) -> u64 {
        let id = self.next;
        self.next += 1;
        self.ops.insert(id, Op::Waiting);
        id
    }

    /// Records the answer of operation `id`; one whose handle was dropped (forgotten) leaves
    /// no entry, and its late answer is ignored.
    #[inline]
    pub(super) fn complete(&mut self, id: u64, answer: Op) {
        if let Some(op) = self.ops.get_mut(&id) {
            *op = answer;
        }
    }

    /// The ack of write `id` if it has arrived (kept).
    #[inline]
    pub(super) fn ack(&self, id: u64) -> Option<WriteAck> {
        match self.ops.get(&id) {
            Some(Op::Ack(a)) => Some(*a),
            _ => None,
        }
    }

    /// The result of atomic `id` if its reply has arrived (kept).
    #[inline]
    pub(super) fn atomic(&self, id: u64) -> Option<AtomicResult> {
        match self.ops.get(&id) {
            Some(Op::Atomic(r)) => Some(*r),
            _ => None,
        }
    }

    /// Whether the data of get `id` has arrived.
    #[inline]
    pub(super) fn has_got(&self, id: u64) -> bool {
        matches!(self.ops.get(&id), Some(Op::Got(_)))
    }

    /// The data of get `id` if it has arrived, taken out (the operation is then done).
    pub(super) fn take_got(&mut self, id: u64) -> Option<Vec<u8>> {
        if !self.has_got(id) {
            return None;
        }
        match self.ops.remove(&id) {
            Some(Op::Got(bytes)) => Some(bytes),
            _ => None,
        }
    }

    /// Forgets operation `id` (taken by a wait, or its handle dropped).
    #[inline]
    pub(super) fn forget(&mut self, id: u64) {
        self.ops.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers are kept until taken, a forgotten operation ignores its late answer, and a
    /// get's data is taken out once.
    #[test]
    fn answers_kept_forgotten_and_taken() {
        let mut c = Completions::new();
        let (put, atomic, get, dropped) = (c.start(), c.start(), c.start(), c.start());
        assert_eq!((put, atomic, get, dropped), (0, 1, 2, 3));
        assert_eq!(c.ack(put), None);
        let ack = WriteAck { ec: 4, iwc: 9 };
        c.complete(put, Op::Ack(ack));
        assert_eq!(c.ack(put), Some(ack));
        assert_eq!(c.ack(put), Some(ack), "peeking keeps the answer");
        assert_eq!(c.atomic(put), None, "an ack is not an atomic's result");
        let result = AtomicResult {
            previous: 7,
            ack: None,
        };
        c.complete(atomic, Op::Atomic(result));
        assert_eq!(c.atomic(atomic), Some(result));
        assert!(!c.has_got(get));
        c.complete(get, Op::Got(vec![1, 2, 3]));
        assert!(c.has_got(get));
        assert_eq!(c.take_got(get), Some(vec![1, 2, 3]));
        assert_eq!(c.take_got(get), None);
        c.forget(dropped);
        c.complete(dropped, Op::Ack(ack));
        assert_eq!(
            c.ack(dropped),
            None,
            "a late answer of a forgotten operation"
        );
    }
}
