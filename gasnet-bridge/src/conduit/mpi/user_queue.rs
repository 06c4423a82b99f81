//! The user active messages taken off the wire, waiting to run in arrival order, and the
//! payloads some of them still wait for.

use std::collections::{HashMap, VecDeque};

use crate::counters::WriteAck;
use crate::message::{Body, Message};

/// A payload that arrived for a queued user AM.
pub(super) enum Ready {
    Medium(Vec<u8>),
    Long(WriteAck),
}

/// A user AM taken off the wire, waiting to run in order; `wait` names its payload if that is
/// still arriving.
struct Deferred {
    message: Message,
    wait: Option<u64>,
}

/// The queue of user AMs and the payloads that arrived for them, by key.
pub(super) struct UserQueue {
    deferred: VecDeque<Deferred>,
    ready: HashMap<u64, Ready>,
    next_key: u64,
}

impl UserQueue {
    /// Nothing queued.
    pub(super) fn new() -> UserQueue {
        UserQueue {
            deferred: VecDeque::new(),
            ready: HashMap::new(),
            next_key: 0,
        }
    }

    /// Whether no user AM waits to run.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.deferred.is_empty()
    }

    /// A key for a payload still arriving, for [`push`](Self::push) and
    /// [`arrived`](Self::arrived).
    pub(super) fn new_key(&mut self) -> u64 {
        let key = self.next_key;
        self.next_key += 1;
        key
    }

    /// Queues `message` behind the others; with `wait`, it runs only once that payload has
    /// [`arrived`](Self::arrived).
    #[inline]
    pub(super) fn push(&mut self, message: Message, wait: Option<u64>) {
        self.deferred.push_back(Deferred { message, wait });
    }

    /// Payload `key` has arrived.
    pub(super) fn arrived(&mut self, key: u64, ready: Ready) {
        self.ready.insert(key, ready);
    }

    /// The oldest user AM whose payload has arrived, if it is first in line.
    #[inline]
    pub(super) fn next_ready(&mut self) -> Option<Message> {
        let front = self.deferred.front()?;
        let Some(key) = front.wait else {
            return Some(self.deferred.pop_front().expect("front").message);
        };
        let ready = self.ready.remove(&key)?;
        let mut d = self.deferred.pop_front().expect("front");
        match (ready, &mut d.message.body) {
            (Ready::Medium(buf), body) => *body = Body::Medium(buf),
            (Ready::Long(a), Body::Long { ack, .. }) => *ack = a,
            (Ready::Long(_), _) => unreachable!("long payload for a long message"),
        }
        Some(d.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Args;

    fn message(handler: u16, body: Body) -> Message {
        Message {
            source: 1,
            handler,
            is_reply: false,
            args: Args::new(&[]).expect("no arguments"),
            body,
        }
    }

    /// User AMs run in arrival order: one whose payload is still arriving holds back the
    /// ones behind it, and gets its payload (medium bytes, or a long write's ack) when it
    /// runs.
    #[test]
    fn arrival_order_with_payloads_still_arriving() {
        let mut q = UserQueue::new();
        assert!(q.is_empty() && q.next_ready().is_none());
        let (medium, long) = (q.new_key(), q.new_key());
        assert_ne!(medium, long);
        q.push(message(1, Body::Short), None);
        q.push(message(2, Body::Short), Some(medium));
        q.push(
            message(
                3,
                Body::Long {
                    offset: 0,
                    len: 8,
                    ack: WriteAck::default(),
                },
            ),
            Some(long),
        );
        q.push(message(4, Body::Short), None);
        assert_eq!(q.next_ready().map(|m| m.handler), Some(1));
        q.arrived(long, Ready::Long(WriteAck { ec: 2, iwc: 5 }));
        assert!(
            q.next_ready().is_none(),
            "the medium payload has not arrived"
        );
        q.arrived(medium, Ready::Medium(vec![6, 7]));
        let m = q.next_ready().expect("medium ready");
        assert_eq!((m.handler, m.body), (2, Body::Medium(vec![6, 7])));
        let m = q.next_ready().expect("long ready");
        assert_eq!(
            (m.handler, m.body),
            (
                3,
                Body::Long {
                    offset: 0,
                    len: 8,
                    ack: WriteAck { ec: 2, iwc: 5 }
                }
            )
        );
        assert_eq!(q.next_ready().map(|m| m.handler), Some(4));
        assert!(q.is_empty());
    }
}
