//! `Promise<T>`: a future completed by counting operations down to zero, as in UPC++.
//!
//! A promise starts with one anonymous dependency, which [`Promise::finalize`] removes. Every
//! operation registered on it adds one and removes it when it completes; the promise's future
//! becomes ready when the count reaches zero (and, for `T` other than `()`, a result was given).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::future::{Fulfiller, Future};

/// A counter of outstanding dependencies with a future that completes when it reaches zero.
pub struct Promise<T: 'static = ()> {
    inner: Rc<Inner<T>>,
}

struct Inner<T: 'static> {
    count: Cell<usize>,
    result: RefCell<Option<T>>,
    fulfiller: RefCell<Option<Fulfiller<T>>>,
    future: RefCell<Option<Future<T>>>,
}

impl<T: 'static> Clone for Promise<T> {
    fn clone(&self) -> Self {
        Promise {
            inner: self.inner.clone(),
        }
    }
}

impl<T: 'static> Default for Promise<T> {
    fn default() -> Self {
        Promise::new()
    }
}

impl<T: 'static> Promise<T> {
    /// A promise with one dependency (removed by `finalize`).
    pub fn new() -> Self {
        let (future, fulfiller) = Future::pending();
        Promise {
            inner: Rc::new(Inner {
                count: Cell::new(1),
                result: RefCell::new(None),
                fulfiller: RefCell::new(Some(fulfiller)),
                future: RefCell::new(Some(future)),
            }),
        }
    }

    /// Adds `n` dependencies.
    ///
    /// # Panics
    /// If the promise has already been fulfilled.
    pub fn require_anonymous(&self, n: usize) {
        assert!(
            self.inner.count.get() > 0,
            "require_anonymous on a promise that is already fulfilled"
        );
        self.inner.count.set(self.inner.count.get() + n);
    }

    /// Panics, naming `what` would have depended on it, if the promise is fulfilled already
    /// (for an operation that completes at once: a dependency added and met at once).
    #[inline]
    pub(crate) fn check_open(&self, what: &str) {
        assert!(
            self.inner.count.get() > 0,
            "{what} counted on a promise that is already fulfilled"
        );
    }

    /// True if `other` is this very promise (a clone of it), not merely an equal one.
    #[inline]
    pub(crate) fn same_as(&self, other: &Promise<T>) -> bool {
        Rc::ptr_eq(&self.inner, &other.inner)
    }

    /// Removes `n` dependencies; at zero the future completes.
    ///
    /// # Panics
    /// If more dependencies are removed than were added.
    pub fn fulfill_anonymous(&self, n: usize) {
        let count = self.inner.count.get();
        assert!(
            n <= count,
            "fulfill_anonymous({n}) on a promise with only {count} outstanding dependencies"
        );
        self.inner.count.set(count - n);
        if count == n {
            self.complete();
        }
    }

    /// Supplies the result value (exactly once for `T` other than `()`).
    pub fn fulfill_result(&self, value: T) {
        let mut r = self.inner.result.borrow_mut();
        assert!(r.is_none(), "fulfill_result called twice on one promise");
        *r = Some(value);
    }

    /// Removes the initial dependency and returns the future.
    pub fn finalize(&self) -> Future<T> {
        let future = self.get_future();
        self.fulfill_anonymous(1);
        future
    }

    /// The promise's future (once; later calls panic, since a future has one consumer).
    pub fn get_future(&self) -> Future<T> {
        self.inner
            .future
            .borrow_mut()
            .take()
            .expect("the future of this promise was already taken")
    }

    /// Number of outstanding dependencies.
    pub fn outstanding(&self) -> usize {
        self.inner.count.get()
    }

    fn complete(&self) {
        let value = self
            .inner
            .result
            .borrow_mut()
            .take()
            .or_else(unit_default::<T>)
            .expect("a promise of a value reached zero dependencies without fulfill_result");
        if let Some(f) = self.inner.fulfiller.borrow_mut().take() {
            f.fulfill(value);
        }
    }
}

/// `Some(())` when `T` is `()`, so `Promise<()>` needs no explicit result.
fn unit_default<T: 'static>() -> Option<T> {
    let unit: Box<dyn std::any::Any> = Box::new(());
    unit.downcast::<T>().ok().map(|b| *b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_down_to_ready() {
        let p: Promise = Promise::new();
        p.require_anonymous(3);
        let f = p.get_future();
        p.fulfill_anonymous(2);
        assert!(!f.is_ready());
        p.fulfill_anonymous(1);
        assert!(
            !f.is_ready(),
            "the initial dependency remains until finalize"
        );
        p.fulfill_anonymous(1);
        assert!(f.is_ready());
        f.result();
    }

    #[test]
    fn value_promise() {
        let p = Promise::<String>::new();
        p.fulfill_result("done".into());
        assert_eq!(p.finalize().result(), "done");
    }

    #[test]
    #[should_panic(expected = "only 1 outstanding")]
    fn over_fulfilling_panics() {
        let p: Promise = Promise::new();
        p.fulfill_anonymous(2);
    }

    #[test]
    #[should_panic(expected = "without fulfill_result")]
    fn value_promise_without_value_panics() {
        let p = Promise::<u8>::new();
        p.finalize().detach();
    }
}
