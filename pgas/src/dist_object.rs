//! `DistObject<T>`: one instance per rank, named by an id that is the same everywhere.
//!
//! Construction is collective (every rank constructs its instance, in the same order), so the
//! n-th object of each rank gets id n. `fetch(rank)` returns a copy of another rank's
//! instance; a fetch that arrives before the target has constructed its instance is answered
//! when it does. Passed as an rpc argument, a `DistObject` travels as its id and becomes the
//! target's own instance. This rank's instance is read with `with`/`get` and changed with
//! `update`, each for the span of a closure (see [`DistObject::update`] for why that is sound
//! beside the fetches other ranks make of it).

use std::cell::RefCell;
use std::rc::Rc;

use gasnet_bridge::Token;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::dist_registry::{DistRegistry, Encoded};
use crate::error::DistObjectError;
use crate::future::Future;
use crate::hook::{Fetch, FetchAction, RpcReply};
use crate::messages;
use crate::rpc::{self, PendingReplies, ReplyTo};
use crate::runtime::{self, Runtime};
use crate::wire::{self, Kind};

/// This rank's instance of a distributed object.
pub struct DistObject<T: 'static> {
    id: u64,
    value: Rc<RefCell<T>>,
    /// The handle made by `new` unregisters the instance when dropped; copies made by
    /// deserialization do not.
    owner: bool,
}

impl<T: Serialize + DeserializeOwned + 'static> DistObject<T> {
    /// Constructs this rank's instance (collective: every rank constructs, in the same order).
    pub fn new(value: T) -> DistObject<T> {
        runtime::with(|rt| {
            let value = Rc::new(RefCell::new(value));
            let for_encode = value.clone();
            let (id, waiting, deferred) = rt.state::<DistRegistry>().construct(
                value.clone(),
                Box::new(move || match for_encode.try_borrow() {
                    Ok(v) => Encoded::Bytes(encode(&*v)),
                    // Inside this rank's `update` of it: answered when the update ends.
                    Err(_) => Encoded::Updating,
                }),
            );
            if !waiting.is_empty() {
                let bytes = encode(&*value.borrow());
                for (to, slot) in waiting {
                    answer(rt, to, slot, &bytes);
                }
            }
            let object = DistObject {
                id,
                value,
                owner: true,
            };
            // Rpcs that named this instance before it existed here were deferred (their
            // arguments cannot decode without it): they run now.
            for d in deferred {
                rt.in_mode(d.internal, || {
                    rpc::run_request(rt, d.source, &d.header, &d.payload, d.ack)
                });
            }
            object
        })
    }

    /// A copy of `rank`'s instance.
    pub fn fetch(&self, rank: usize) -> Future<T> {
        runtime::with(|rt| {
            if rank == rt.rank_me() {
                let bytes = self.with(|v| encode(v));
                return Future::ready(postcard::from_bytes(&bytes).expect("round trip"));
            }
            let n = rt.ep().ranks();
            assert!(rank < n, "fetch from rank {rank}: the job has {n} ranks");
            let fetch = Fetch {
                rank,
                object: self.id,
            };
            let hook = rt.hook_op();
            if let Some((h, id)) = &hook {
                if let FetchAction::Served(bytes) = h.before_fetch(*id, &fetch) {
                    return Future::ready(postcard::from_bytes(&bytes).unwrap_or_else(|e| {
                        panic!(
                            "the hook served dist_object {} from rank {rank} with bytes that \
                             do not decode: {e}",
                            self.id
                        )
                    }));
                }
            }
            let (future, fulfiller) = Future::pending();
            let reply = Box::new(move |_, bytes: &[u8]| {
                let v = postcard::from_bytes(bytes).unwrap_or_else(|e| {
                    wire::malformed(rank, &format!("a dist_object that does not decode: {e}"))
                });
                if let Some((h, id)) = hook {
                    h.after_fetch(id, &fetch, bytes);
                }
                fulfiller.fulfill(v);
            });
            let slot = rt.state::<PendingReplies>().insert(ReplyTo::Call(reply));
            messages::send(rt, rank, Kind::DistFetch, &[self.id, slot], &[]);
            future
        })
    }
}

impl<T: 'static> DistObject<T> {
    /// The id, equal on all ranks for corresponding instances.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Runs `f` on this rank's instance and returns its result.
    ///
    /// Panics if called inside an [`update`](Self::update) of the same instance (from its
    /// closure, or from an rpc that closure's waiting let run); [`try_with`](Self::try_with)
    /// returns that as an error.
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        self.try_with(f).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`with`](Self::with), or [`DistObjectError::Updating`] inside an update of the instance.
    pub fn try_with<R>(&self, f: impl FnOnce(&T) -> R) -> Result<R, DistObjectError> {
        let v = self.value.try_borrow().map_err(|_| self.updating())?;
        Ok(f(&v))
    }

    /// A copy of this rank's instance.
    pub fn get(&self) -> T
    where
        T: Clone,
    {
        self.with(T::clone)
    }

    /// Runs `f` on this rank's instance with write access and returns its result.
    ///
    /// Sound beside remote reads: other ranks read an instance only by `fetch`, which this rank
    /// answers in its handler, on its own thread, when it polls. The instance sits in a
    /// `RefCell`; `update` holds its one mutable borrow for the span of `f` and no `&T` or
    /// `&mut T` outlives a closure. If `f` polls (waits for a future, sends an rpc) and a fetch
    /// of this instance arrives meanwhile, the handler finds the cell borrowed and does not
    /// read it: the fetch is answered when `update` returns, with the updated value, so a
    /// remote reader sees the value before or after an update, never during. A `with`,
    /// `update` or own-rank `fetch` of the same instance from inside `f` (directly or through
    /// an rpc run while `f` waits) would alias the `&mut T`: it is refused (a panic here, an
    /// error from [`try_update`](Self::try_update)) rather than deferred, because `f` would be
    /// waiting for itself.
    pub fn update<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.try_update(f).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`update`](Self::update), or [`DistObjectError::Updating`] if the instance is being read
    /// or updated on this rank already (from a closure that let this rpc run).
    pub fn try_update<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, DistObjectError> {
        let result = {
            let mut v = self.value.try_borrow_mut().map_err(|_| self.updating())?;
            f(&mut v)
        };
        // Fetches that arrived during `f` wait for the borrow's end, which is here.
        runtime::with(|rt| {
            let registry = rt.state::<DistRegistry>();
            let waiting = registry.take_waiting_for_update(self.id);
            if !waiting.is_empty() {
                let bytes = registry
                    .encode(self.id)
                    .and_then(Encoded::bytes)
                    .expect("the instance is registered and no longer borrowed");
                for (to, slot) in waiting {
                    answer(rt, to, slot, &bytes);
                }
            }
        });
        Ok(result)
    }

    fn updating(&self) -> DistObjectError {
        DistObjectError::Updating {
            id: self.id,
            rank: runtime::rank_me(),
        }
    }
}

/// Another handle on the same instance (not a copy of the value). Sending a `DistObject` in
/// an rpc moves it; sending a clone keeps this rank's owning handle, and with it the
/// instance, alive: moving the owner into the arguments would unregister this rank's instance
/// when the arguments are dropped after sending, and rpcs from other ranks naming it would
/// then fail here.
impl<T: 'static> Clone for DistObject<T> {
    fn clone(&self) -> Self {
        DistObject {
            id: self.id,
            value: self.value.clone(),
            owner: false,
        }
    }
}

impl<T: 'static> Drop for DistObject<T> {
    fn drop(&mut self) {
        if self.owner && runtime::in_launch() {
            runtime::with(|rt| rt.state::<DistRegistry>().destroy(self.id));
        }
    }
}

impl<T: 'static> Serialize for DistObject<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.id.serialize(s)
    }
}

impl<'de, T: 'static> Deserialize<'de> for DistObject<T> {
    /// Becomes the deserializing rank's own instance with that id.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let id = u64::deserialize(d)?;
        let value = runtime::with(|rt| rt.state::<DistRegistry>().find(id))
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "dist_object {id} is not constructed on this rank (construct it on every \
                     rank, e.g. before a barrier, before sending it)"
                ))
            })?
            .downcast::<RefCell<T>>()
            .map_err(|_| {
                serde::de::Error::custom(format!("dist_object {id} has another type here"))
            })?;
        Ok(DistObject {
            id,
            value,
            owner: false,
        })
    }
}

/// An instance's encoding, for a fetch.
fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_allocvec(v).expect("serialize a dist_object")
}

/// Sends `bytes`, an instance's encoding, to the fetch of rank `to` waiting in reply slot `slot`.
fn answer(rt: &Runtime, to: usize, slot: u64, bytes: &[u8]) {
    // A fetch is a read: it writes nothing at the target, so the ack carries no counters.
    let no_write = gasnet_bridge::WriteAck::default();
    rpc::reply(rt, to, RpcReply::DIST_FETCH, slot, no_write, bytes);
}

pub(crate) fn handle_fetch(rt: &Runtime, token: &Token<'_>, header: &[u64]) {
    let source = token.source();
    let [id, slot, ..] = *header else {
        wire::malformed(source, "a dist_object fetch without its header")
    };
    let registry = rt.state::<DistRegistry>();
    match registry.encode(id) {
        Some(Encoded::Bytes(bytes)) => return answer(rt, source, slot, &bytes),
        Some(Encoded::Updating) => return registry.wait_for_update(id, source, slot),
        None => {}
    }
    if registry.constructed(id) {
        // Constructed here before and since destroyed: waiting would never end.
        panic!(
            "rank {source} fetched dist_object {id} from rank {}, which has already destroyed it",
            rt.rank_me()
        );
    } else {
        registry.wait_for(id, source, slot);
    }
}
