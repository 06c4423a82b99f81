//! `Future<T>`: the value of an asynchronous operation, as in UPC++.
//!
//! A future belongs to the rank (thread) that created it. It is either ready, holding its
//! value (no allocation: most smp operations complete at once), or pending on a shared slot
//! that the runtime fills when the operation completes, during some call that makes progress.
//! Continuations attached with [`Future::then`] run at that moment, on the rank's thread.
//! The operation future of a put that a flush completes (the mpi conduit's window) holds the
//! put's number instead of a slot (`FlushId`: eight bytes like the slot's pointer, no `Drop`):
//! no allocation, and waiting is that flush; a continuation attached to it turns it into a
//! slot that progress fills, like any other.
//!
//! Waiting ([`Future::wait`]) makes progress, so it can never deadlock on work that only this
//! rank can do. `Future<T>` also implements [`std::future::Future`]; polled from an executor on
//! the rank's thread it makes progress itself and asks to be polled again until it is ready.

use std::cell::{Cell, RefCell};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use gasnet_bridge::FlushId;
use gasnet_bridge::sleep::Awaiting;

use crate::runtime;
use crate::wire::decode_reply;

/// The eventual result of an asynchronous operation on this rank.
#[must_use = "a future does nothing unless waited on, chained or dropped deliberately"]
pub struct Future<T: 'static> {
    state: State<T>,
}

enum State<T: 'static> {
    Ready(T),
    Pending(Rc<Slot<T>>),
    /// A write that a flush completes (`WriteHandle::into_flush_id`); only in a `Future<()>`
    /// (see [`Future::of_write`]), whose value it gives once the write has completed.
    Write(FlushId),
    /// The value was moved out by `poll`.
    Taken,
}

/// What runs when a pending future completes.
type Continuation<T> = Box<dyn FnOnce(T)>;

/// Where a pending operation's value lands; shared by the future and its fulfiller.
struct Slot<T> {
    /// What waiting on it waits for (the hang report, `PGAS_HANG_REPORT`).
    awaiting: Awaiting,
    value: RefCell<Option<T>>,
    ready: Cell<bool>,
    continuation: RefCell<Option<Continuation<T>>>,
}

/// The producer's end of a pending future.
pub(crate) struct Fulfiller<T: 'static> {
    slot: Rc<Slot<T>>,
}

impl<T: 'static> Fulfiller<T> {
    /// Completes the future: runs its continuation, or stores the value for `wait`.
    pub(crate) fn fulfill(self, value: T) {
        let continuation = self.slot.continuation.borrow_mut().take();
        match continuation {
            Some(k) => k(value),
            None => *self.slot.value.borrow_mut() = Some(value),
        }
        self.slot.ready.set(true);
    }
}

impl<T: serde::de::DeserializeOwned + 'static> Fulfiller<T> {
    /// This fulfiller as the completion of an rpc whose reply's bytes encode the value: the
    /// future's own slot, so an rpc allocates nothing else to wait for its reply.
    pub(crate) fn into_reply_landing(self) -> Rc<dyn ReplyLanding> {
        self.slot
    }
}

/// Where an rpc's reply lands: a pending future's slot, its value type erased behind the
/// decoding of the reply's bytes.
pub(crate) trait ReplyLanding {
    /// Decodes `bytes` (the reply of rpc `name` from `rank`) and completes the future.
    fn land(self: Rc<Self>, rank: usize, name: &'static str, bytes: &[u8]);
}

impl<T: serde::de::DeserializeOwned + 'static> ReplyLanding for Slot<T> {
    fn land(self: Rc<Self>, rank: usize, name: &'static str, bytes: &[u8]) {
        Fulfiller { slot: self }.fulfill(decode_reply(rank, name, bytes));
    }
}

impl<T: 'static> Future<T> {
    /// A future that is already ready with `value` (UPC++ `make_future`).
    pub fn ready(value: T) -> Future<T> {
        Future {
            state: State::Ready(value),
        }
    }

    /// A pending future and the fulfiller that will complete it.
    pub(crate) fn pending() -> (Future<T>, Fulfiller<T>) {
        Future::pending_for(Awaiting::new("an asynchronous operation (a future)").woken())
    }

    /// [`Future::pending`], telling what waiting on it waits for.
    pub(crate) fn pending_for(awaiting: Awaiting) -> (Future<T>, Fulfiller<T>) {
        let slot = Rc::new(Slot {
            awaiting,
            value: RefCell::new(None),
            ready: Cell::new(false),
            continuation: RefCell::new(None),
        });
        (
            Future {
                state: State::Pending(slot.clone()),
            },
            Fulfiller { slot },
        )
    }

    /// The future of write `id` as a slot that progress fills (for a continuation).
    fn tracked(id: FlushId) -> Future<T> {
        let (future, fulfiller) = Future::<()>::pending_for(Awaiting::new("the ack of an rput"));
        runtime::with(|rt| rt.track_write(id, Box::new(move || fulfiller.fulfill(()))));
        future.then(|()| unit::<T>())
    }

    /// True if the value is available without waiting.
    pub fn is_ready(&self) -> bool {
        match &self.state {
            State::Ready(_) => true,
            State::Pending(slot) => slot.ready.get(),
            State::Write(id) => runtime::with(|rt| rt.ep().flushed(*id)),
            State::Taken => false,
        }
    }

    /// Waits, making progress, and returns the value.
    #[inline]
    pub fn wait(self) -> T {
        match self.state {
            State::Ready(v) => v,
            State::Write(id) => {
                // A flush of the target (when not done yet): it runs no handler.
                runtime::with(|rt| rt.ep().complete_flush(id));
                unit::<T>()
            }
            State::Pending(slot) => wait_slot(slot),
            State::Taken => panic!("wait on a future whose value was already taken by poll"),
        }
    }

    /// The value of a ready future.
    ///
    /// # Panics
    /// If the future is not ready: use [`Future::wait`] to make progress until it is.
    pub fn result(self) -> T {
        assert!(
            self.is_ready(),
            "result() on a future that is not ready; call wait() instead"
        );
        self.wait()
    }

    /// A future of `f(value)`; `f` runs when this future completes (at once if it is ready).
    pub fn then<U: 'static>(self, f: impl FnOnce(T) -> U + 'static) -> Future<U> {
        match self.state {
            State::Ready(v) => Future::ready(f(v)),
            State::Pending(slot) => {
                if slot.ready.get() {
                    return Future::ready(f(take(&slot)));
                }
                let (future, fulfiller) = Future::pending();
                *slot.continuation.borrow_mut() = Some(Box::new(move |v| fulfiller.fulfill(f(v))));
                future
            }
            State::Write(id) => {
                if runtime::with(|rt| rt.ep().flushed(id)) {
                    return Future::ready(f(unit::<T>()));
                }
                Future::tracked(id).then(f)
            }
            State::Taken => panic!("then on a future whose value was already taken by poll"),
        }
    }

    /// A future of the future that `f` returns; `f` runs when this future completes.
    pub fn and_then<U: 'static>(self, f: impl FnOnce(T) -> Future<U> + 'static) -> Future<U> {
        let (future, fulfiller) = Future::pending();
        self.then(move |v| f(v).then(move |u| fulfiller.fulfill(u)))
            .detach();
        collapse(future)
    }

    /// A future of both values, ready when both are.
    pub fn join<U: 'static>(self, other: Future<U>) -> Future<(T, U)> {
        if self.is_ready() && other.is_ready() {
            return Future::ready((self.wait(), other.wait()));
        }
        self.and_then(move |t| other.then(move |u| (t, u)))
    }

    /// Lets the operation complete without anyone waiting for its value.
    pub fn detach(self) {}
}

/// A ready future stays ready; a pending one is returned as it is (keeps `and_then` cheap to
/// read for the common case that everything completed at once).
fn collapse<T: 'static>(f: Future<T>) -> Future<T> {
    match f.state {
        State::Pending(slot) if slot.ready.get() => Future::ready(take(&slot)),
        state => Future { state },
    }
}

impl Future<()> {
    /// The future of write `id` (one that a flush completes): waiting is that flush.
    #[inline]
    pub(crate) fn of_write(id: FlushId) -> Future<()> {
        Future {
            state: State::Write(id),
        }
    }
}

/// The value of a completed write's future: `()`, the only `T` whose future holds a write
/// ([`Future::of_write`]); a compile-time type check, no allocation (`()` is zero-sized).
#[inline]
fn unit<T: 'static>() -> T {
    let unit: Box<dyn std::any::Any> = Box::new(());
    *unit
        .downcast::<T>()
        .expect("only a Future<()> holds a write")
}

/// [`Future::wait`] on a slot: out of line, so that waiting on a future that is ready at once
/// (smp, one host) or holds a write stays small enough to inline.
#[inline(never)]
fn wait_slot<T>(slot: Rc<Slot<T>>) -> T {
    if !slot.ready.get() {
        runtime::progress_until_for(slot.awaiting, || slot.ready.get());
    }
    take(&slot)
}

fn take<T>(slot: &Slot<T>) -> T {
    slot.value
        .borrow_mut()
        .take()
        .expect("a ready future holds its value until it is taken once")
}

/// A future of all the values, in order, ready when every one is (UPC++ `when_all`).
pub fn when_all<T: 'static>(futures: Vec<Future<T>>) -> Future<Vec<T>> {
    if futures.iter().all(Future::is_ready) {
        return Future::ready(futures.into_iter().map(Future::wait).collect());
    }
    let n = futures.len();
    let (future, fulfiller) = Future::pending();
    let gathered: Rc<RefCell<Vec<Option<T>>>> =
        Rc::new(RefCell::new((0..n).map(|_| None).collect()));
    let remaining = Rc::new(Cell::new(n));
    let fulfiller = Rc::new(RefCell::new(Some(fulfiller)));
    for (i, f) in futures.into_iter().enumerate() {
        let (gathered, remaining, fulfiller) =
            (gathered.clone(), remaining.clone(), fulfiller.clone());
        f.then(move |v| {
            gathered.borrow_mut()[i] = Some(v);
            remaining.set(remaining.get() - 1);
            if remaining.get() == 0 {
                let values = gathered
                    .borrow_mut()
                    .drain(..)
                    .map(|v| v.expect("every value arrived"))
                    .collect();
                fulfiller
                    .borrow_mut()
                    .take()
                    .expect("fulfilled once")
                    .fulfill(values);
            }
        })
        .detach();
    }
    future
}

impl<T: 'static> Unpin for Future<T> {}

impl<T: 'static> std::future::Future for Future<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = self.get_mut();
        let ready = match &this.state {
            State::Ready(_) => true,
            State::Pending(slot) => {
                if !slot.ready.get() {
                    runtime::progress();
                }
                slot.ready.get()
            }
            State::Write(id) => runtime::with(|rt| {
                if !rt.ep().flushed(*id) {
                    crate::runtime::progress();
                }
                rt.ep().flushed(*id)
            }),
            State::Taken => panic!("a future polled after it returned its value"),
        };
        if !ready {
            // Completion needs this rank to make progress, which only polling does: ask to be
            // polled again rather than sleeping on a wake-up that nobody would send.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        match std::mem::replace(&mut this.state, State::Taken) {
            State::Ready(v) => Poll::Ready(v),
            State::Pending(slot) => Poll::Ready(take(&slot)),
            State::Write(_) => Poll::Ready(unit::<T>()),
            State::Taken => unreachable!(),
        }
    }
}

impl<T: std::fmt::Debug + 'static> std::fmt::Debug for Future<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.state {
            State::Ready(v) => f.debug_tuple("Future::Ready").field(v).finish(),
            State::Pending(s) => f
                .debug_struct("Future::Pending")
                .field("ready", &s.ready.get())
                .finish(),
            State::Write(id) => f.debug_tuple("Future::Write").field(id).finish(),
            State::Taken => f.write_str("Future::Taken"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_futures_chain_without_progress() {
        let f = Future::ready(2).then(|x| x * 10).join(Future::ready("a"));
        assert!(f.is_ready());
        assert_eq!(f.result(), (20, "a"));
    }

    #[test]
    fn pending_future_runs_its_continuation_on_fulfil() {
        let (f, p) = Future::<u32>::pending();
        let seen = Rc::new(Cell::new(0));
        let s = seen.clone();
        let g = f.then(move |v| {
            s.set(v);
            v + 1
        });
        assert!(!g.is_ready());
        assert_eq!(seen.get(), 0);
        p.fulfill(41);
        assert_eq!(seen.get(), 41);
        assert!(g.is_ready());
        assert_eq!(g.result(), 42);
    }

    #[test]
    fn when_all_keeps_order_when_fulfilled_out_of_order() {
        let (fs, ps): (Vec<_>, Vec<_>) = (0..5).map(|_| Future::<usize>::pending()).unzip();
        let all = when_all(fs);
        let mut ps: Vec<_> = ps.into_iter().enumerate().collect();
        ps.reverse();
        for (i, p) in ps {
            assert!(!all.is_ready());
            p.fulfill(i * 100);
        }
        assert_eq!(all.result(), vec![0, 100, 200, 300, 400]);
    }

    #[test]
    fn and_then_flattens() {
        let (a, pa) = Future::<u8>::pending();
        let (b, pb) = Future::<u8>::pending();
        let chained = a.and_then(move |x| b.then(move |y| x + y));
        pa.fulfill(1);
        assert!(!chained.is_ready());
        pb.fulfill(2);
        assert_eq!(chained.result(), 3);
        assert_eq!(
            Future::ready(5).and_then(|x| Future::ready(x * 2)).result(),
            10
        );
    }

    #[test]
    #[should_panic(expected = "not ready")]
    fn result_of_pending_future_panics() {
        let (f, _p) = Future::<u8>::pending();
        let _ = f.result();
    }
}
