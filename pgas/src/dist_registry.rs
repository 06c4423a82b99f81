//! The dist objects of a rank by id, the fetches waiting for an instance not constructed yet,
//! and the rpcs whose arguments name one: the state `dist_object.rs` keeps and `rpc.rs` consults
//! when a request's arguments do not decode.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use gasnet_bridge::WriteAck;

struct Entry {
    value: Rc<dyn Any>,
    encode: Box<dyn Fn() -> Encoded>,
}

/// An instance's encoding for a fetch, or why it cannot be read now.
pub(crate) enum Encoded {
    /// The instance's bytes.
    Bytes(Vec<u8>),
    /// This rank is inside an `update` of the instance: the fetch waits for its end.
    Updating,
}

impl Encoded {
    /// The bytes, if the instance could be read.
    pub(crate) fn bytes(self) -> Option<Vec<u8>> {
        match self {
            Encoded::Bytes(b) => Some(b),
            Encoded::Updating => None,
        }
    }
}

/// The instances of this rank, and fetches and rpcs waiting for an instance not yet constructed.
#[derive(Default)]
pub(crate) struct DistRegistry {
    next_id: Cell<u64>,
    objects: RefCell<HashMap<u64, Entry>>,
    waiting: RefCell<HashMap<u64, Vec<(usize, u64)>>>,
    /// Fetches (rank, reply slot) that arrived during an `update` of the instance, by its id.
    waiting_for_update: RefCell<HashMap<u64, Vec<(usize, u64)>>>,
    /// The id a failed deserialization did not find (read by the rpc handler to defer it).
    missing: Cell<Option<u64>>,
    /// Rpcs whose arguments name an instance this rank has not constructed yet, by its id.
    deferred: RefCell<HashMap<u64, Vec<DeferredRpc>>>,
}

/// An rpc request kept until the dist_object its arguments name is constructed here.
pub(crate) struct DeferredRpc {
    pub(crate) source: usize,
    pub(crate) header: Vec<u64>,
    pub(crate) payload: Vec<u8>,
    pub(crate) ack: WriteAck,
    /// Sent in a resilience runtime's internal scope.
    pub(crate) internal: bool,
}

impl DistRegistry {
    /// Registers the next instance, `value`, with how to encode it for a fetch; returns its id
    /// with the fetches (rank, reply slot) and the rpcs that were waiting for it.
    pub(crate) fn construct(
        &self,
        value: Rc<dyn Any>,
        encode: Box<dyn Fn() -> Encoded>,
    ) -> (u64, Vec<(usize, u64)>, Vec<DeferredRpc>) {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.objects
            .borrow_mut()
            .insert(id, Entry { value, encode });
        let waiting = self.waiting.borrow_mut().remove(&id).unwrap_or_default();
        let deferred = self.deferred.borrow_mut().remove(&id).unwrap_or_default();
        (id, waiting, deferred)
    }

    /// Unregisters instance `id` (its owning handle was dropped).
    pub(crate) fn destroy(&self, id: u64) {
        self.objects.borrow_mut().remove(&id);
    }

    /// Instance `id`, if constructed here and not destroyed; otherwise `id` is remembered as
    /// missing ([`DistRegistry::take_missing`]).
    pub(crate) fn find(&self, id: u64) -> Option<Rc<dyn Any>> {
        let found = self.objects.borrow().get(&id).map(|e| e.value.clone());
        if found.is_none() {
            self.missing.set(Some(id));
        }
        found
    }

    /// The encoded value of instance `id`, if it is here.
    pub(crate) fn encode(&self, id: u64) -> Option<Encoded> {
        self.objects.borrow().get(&id).map(|e| (e.encode)())
    }

    /// Keeps a fetch of `id` from rank `source` (reply slot `slot`) until the `update` of `id`
    /// this rank is inside ends.
    pub(crate) fn wait_for_update(&self, id: u64, source: usize, slot: u64) {
        self.waiting_for_update
            .borrow_mut()
            .entry(id)
            .or_default()
            .push((source, slot));
    }

    /// The fetches of `id` that arrived during an update of it (none, usually).
    pub(crate) fn take_waiting_for_update(&self, id: u64) -> Vec<(usize, u64)> {
        if self.waiting_for_update.borrow().is_empty() {
            return Vec::new();
        }
        self.waiting_for_update
            .borrow_mut()
            .remove(&id)
            .unwrap_or_default()
    }

    /// True if `id` was constructed here (whether or not it has been destroyed since).
    pub(crate) fn constructed(&self, id: u64) -> bool {
        id < self.next_id.get()
    }

    /// True if `id` was constructed here and has since been dropped.
    pub(crate) fn is_gone(&self, id: u64) -> bool {
        self.constructed(id) && !self.objects.borrow().contains_key(&id)
    }

    /// Keeps a fetch of `id` from rank `source` (reply slot `slot`) until `id` is constructed.
    pub(crate) fn wait_for(&self, id: u64, source: usize, slot: u64) {
        self.waiting
            .borrow_mut()
            .entry(id)
            .or_default()
            .push((source, slot));
    }

    /// Forgets the id a failed deserialization did not find, before decoding arguments.
    pub(crate) fn clear_missing(&self) {
        self.missing.set(None);
    }

    /// The id the last failed deserialization did not find, if any.
    pub(crate) fn take_missing(&self) -> Option<u64> {
        self.missing.take()
    }

    /// Keeps `rpc` until instance `id` is constructed (UPC++ defers an rpc whose dist_object
    /// argument does not exist yet at the target, rather than failing it).
    pub(crate) fn defer(&self, id: u64, rpc: DeferredRpc) {
        self.deferred.borrow_mut().entry(id).or_default().push(rpc);
    }
}
