//! The completion handles' side of the conduit: an operation number and a link to the world
//! that numbered it. The driver owns the world; handles own only the link, which the driver
//! invalidates when the world is gone for good (a failed job; a world rebuilt over a new
//! communicator), after which every handle answers [`BridgeError::JobEnded`] (or
//! [`BridgeError::WorldRebuilt`], naming the lost ranks) without touching the world.

use std::cell::RefCell;
use std::rc::Rc;

use crate::atomic::AtomicResult;
use crate::counters::WriteAck;
use crate::error::BridgeError;

use super::world::MpiWorld;

/// The way from handles to their world; empty once the driver invalidated it, with the
/// error the handles then answer.
#[derive(Debug)]
pub(crate) struct Link(RefCell<Result<Rc<MpiWorld>, BridgeError>>);

impl Link {
    /// A valid link to `world`.
    pub(crate) fn new(world: Rc<MpiWorld>) -> Rc<Link> {
        Rc::new(Link(RefCell::new(Ok(world))))
    }

    /// Cuts every handle off its world: from now on they answer `JobEnded`.
    pub(crate) fn invalidate(&self) {
        self.invalidate_with(BridgeError::JobEnded);
    }

    /// Cuts every handle off its world, which a rebuild after the loss of the ranks `lost`
    /// replaced: from now on they answer [`BridgeError::WorldRebuilt`] naming them.
    #[cfg_attr(not(feature = "ulfm"), allow(dead_code))]
    pub(crate) fn invalidate_rebuilt(&self, lost: Vec<usize>) {
        self.invalidate_with(BridgeError::WorldRebuilt { lost });
    }

    fn invalidate_with(&self, why: BridgeError) {
        let world = std::mem::replace(&mut *self.0.borrow_mut(), Err(why));
        drop(world);
    }

    /// The world, if the link is valid (cloned, so no borrow is held while it works: a wait
    /// may run progress that drops other handles).
    fn world(&self) -> Option<Rc<MpiWorld>> {
        self.0.borrow().as_ref().ok().cloned()
    }

    /// Why the link is invalid (`JobEnded` while it is valid: only asked once it is not).
    fn why(&self) -> BridgeError {
        self.0
            .borrow()
            .as_ref()
            .err()
            .cloned()
            .unwrap_or(BridgeError::JobEnded)
    }
}

/// An operation whose completion arrives later (an ack, a reply, a flush), by its number.
#[derive(Debug)]
pub(crate) struct Pending {
    link: Rc<Link>,
    id: u64,
}

/// A handle whose world is gone asked for progress: the job ended (or was rebuilt) without
/// completing it; `why` says which.
#[cold]
#[inline(never)]
fn ended(why: BridgeError) -> ! {
    panic!("{why}")
}

impl Pending {
    /// Operation `id` of the world behind `link`.
    pub(crate) fn new(link: Rc<Link>, id: u64) -> Pending {
        Pending { link, id }
    }

    /// The operation's number.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    fn world(&self) -> Rc<MpiWorld> {
        self.link.world().unwrap_or_else(|| ended(self.link.why()))
    }

    /// The write's ack if it has arrived (no progress); `None` once the link is invalid.
    pub(crate) fn peek_ack(&self) -> Option<WriteAck> {
        self.link.world()?.peek_ack(self.id)
    }

    /// The write's ack after one round of the conduit's own progress, if it has arrived.
    pub(crate) fn test_ack(&self) -> Option<WriteAck> {
        self.world().test_ack(self.id)
    }

    /// Waits (the conduit's own progress only) for the write's ack.
    pub(crate) fn wait_ack(&self) -> WriteAck {
        self.world().wait_ack(self.id)
    }

    /// True if a flush completes this write (a window put).
    pub(crate) fn is_window_write(&self) -> bool {
        self.link
            .world()
            .is_some_and(|w| w.is_window_write(self.id))
    }

    /// True if this write's completion implies `earlier`'s (same world, see
    /// [`MpiWorld::write_completes_after`]).
    pub(crate) fn completes_after(&self, earlier: &Pending) -> bool {
        Rc::ptr_eq(&self.link, &earlier.link)
            && self
                .link
                .world()
                .is_some_and(|w| w.write_completes_after(earlier.id, self.id))
    }

    /// The atomic's result if its reply has arrived (no progress).
    pub(crate) fn peek_atomic(&self) -> Option<AtomicResult> {
        self.link.world()?.peek_atomic(self.id)
    }

    /// Waits (the conduit's own progress only) for the atomic's reply.
    pub(crate) fn wait_atomic(&self) -> AtomicResult {
        self.world().wait_atomic(self.id)
    }

    /// The get's bytes if they have arrived (taken out, no progress).
    pub(crate) fn take_got(&self) -> Option<Vec<u8>> {
        self.link.world()?.take_got(self.id)
    }

    /// Waits (the conduit's own progress only) for the get's bytes.
    pub(crate) fn wait_got(&self) -> Vec<u8> {
        self.world().wait_got(self.id)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Taken by a wait, or abandoned: a late answer for it is then ignored.
        if let Some(world) = self.link.world() {
            world.forget_ack(self.id);
        }
    }
}
