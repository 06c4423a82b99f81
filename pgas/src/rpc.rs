//! Remote procedure calls: a `#[pgas::remote]` function (registered at link time,
//! `remote_registry.rs`), or a function registered by name in an [`RpcTable`] before launch,
//! shipped by its number in the registry or the table (plus a hash of its name, checked at the
//! target), with arguments and results serialized by serde + postcard.
//!
//! Every process runs the same binary and every rank builds the same table by running the same
//! registration code, so a number names the same function everywhere, on threads or across
//! processes (`launch` checks both before the program starts); no function address is ever
//! sent. An rpc function runs at the target inside its progress, in UPC++'s "restricted
//! context": it may start communication but not wait; to reply later it returns a future
//! (a remote function returning `Future<T>`, or one registered with
//! [`RpcTable::register_future`]).
//!
//! The target counts each request as an incoming write (seed 003 logs rpcs like writes) and
//! sends its (EC, IWC) back with the reply, so the initiator's hook can log it.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use gasnet_bridge::Awaiting;
use gasnet_bridge::{Token, WriteAck};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::dist_registry::{DeferredRpc, DistRegistry};
use crate::error::RerunError;
use crate::future::{Future, ReplyLanding};
use crate::hook::{ReplyAction, RpcAction, RpcCall, RpcReply, ServedRequest};
use crate::messages;
use crate::remote_registry::{Invoked, Remote, name_hash, remote_at, remote_named};
use crate::runtime::{self, Runtime};
use crate::wire::{self, Kind, decode_reply};

/// No reply is wanted (rpc_ff without a hook).
const NO_REPLY: u64 = u64::MAX;
/// Flag of a reply slot: only the acknowledgement is wanted, not the result (rpc_ff with a
/// hook), so the reply carries no bytes.
const ACK_ONLY: u64 = 1 << 62;

/// Flag of the number an rpc sends: the function is the `#[pgas::remote]` one at that
/// position of the registry, not the table's.
const REMOTE: u64 = 1 << 32;

type Invoke = Box<dyn Fn(&[u8]) -> Result<Invoked, postcard::Error> + Send + Sync>;

struct Entry {
    name: &'static str,
    hash: u64,
    invoke: Invoke,
}

/// The rpc functions of a program, in registration order.
#[derive(Default)]
pub struct RpcTable {
    entries: Vec<Entry>,
}

/// A registered function taking `A` and returning `R`; cheap to copy and to send.
pub struct RpcFn<A, R> {
    index: u32,
    hash: u64,
    _sig: PhantomData<fn(A) -> R>,
}

impl<A, R> Clone for RpcFn<A, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A, R> Copy for RpcFn<A, R> {}

/// An rpc handle travels as its table index and name hash, so an rpc can carry the handle of
/// the function to call next (the table is the same on every rank).
impl<A, R> serde::Serialize for RpcFn<A, R> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.index, self.hash).serialize(s)
    }
}

impl<'de, A, R> serde::Deserialize<'de> for RpcFn<A, R> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (index, hash) = <(u32, u64)>::deserialize(d)?;
        Ok(RpcFn {
            index,
            hash,
            _sig: PhantomData,
        })
    }
}

impl<A, R> std::fmt::Debug for RpcFn<A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RpcFn(#{})", self.index)
    }
}

/// What [`rpc`] and [`rpc_ff`] call: a `#[pgas::remote]` function ([`Remote`]) or a handle
/// from an [`RpcTable`] ([`RpcFn`]).
pub trait RpcTarget: Copy + sealed::Numbered {
    /// The arguments, sent as one value.
    type Args: Serialize;
    /// The result the caller's future gives.
    type Output;
}

mod sealed {
    /// How an rpc names its function on the wire: (number, hash of the name).
    pub trait Numbered {
        fn number(&self) -> (u64, u64);
    }
}

impl<A: Serialize, R> RpcTarget for RpcFn<A, R> {
    type Args = A;
    type Output = R;
}

impl<A, R> sealed::Numbered for RpcFn<A, R> {
    fn number(&self) -> (u64, u64) {
        (self.index as u64, self.hash)
    }
}

impl<A: Serialize, R, F: Copy> RpcTarget for Remote<A, R, F> {
    type Args = A;
    type Output = R;
}

impl<A, R, F: Copy> sealed::Numbered for Remote<A, R, F> {
    fn number(&self) -> (u64, u64) {
        let entry = self.entry();
        (REMOTE | entry.index() as u64, entry.hash)
    }
}

/// A function an rpc names: a table's entry or a `#[pgas::remote]` function.
#[derive(Clone, Copy)]
enum Function<'a> {
    Table(&'a Entry),
    Remote(&'static crate::remote_registry::RemoteEntry),
}

impl Function<'_> {
    fn name(&self) -> &'static str {
        match self {
            Function::Table(e) => e.name,
            Function::Remote(e) => e.path,
        }
    }

    fn hash(&self) -> u64 {
        match self {
            Function::Table(e) => e.hash,
            Function::Remote(e) => e.hash,
        }
    }

    fn invoke(&self, args: &[u8]) -> Result<Invoked, postcard::Error> {
        match self {
            Function::Table(e) => (e.invoke)(args),
            Function::Remote(e) => (e.invoke)(args),
        }
    }
}

/// The function numbered `number` in `table` or the registry (see [`REMOTE`]), if any.
fn function_at(table: &RpcTable, number: u64) -> Option<Function<'_>> {
    if number & REMOTE != 0 {
        remote_at((number & !REMOTE) as usize).map(Function::Remote)
    } else {
        table.entries.get(number as usize).map(Function::Table)
    }
}

/// The function registered as `name` in `table`, else in the registry, if any.
fn function_named<'a>(table: &'a RpcTable, name: &str) -> Option<Function<'a>> {
    table
        .entries
        .iter()
        .find(|e| e.name == name)
        .map(Function::Table)
        .or_else(|| remote_named(name).map(Function::Remote))
}

impl RpcTable {
    /// An empty table.
    pub fn new() -> Self {
        RpcTable::default()
    }

    /// Registers `f` under `name`; the returned handle is what [`rpc`] and [`rpc_ff`] take.
    ///
    /// # Panics
    /// If `name` is already registered.
    pub fn register<A, R, F>(&mut self, name: &'static str, f: F) -> RpcFn<A, R>
    where
        A: Serialize + DeserializeOwned + 'static,
        R: Serialize + DeserializeOwned + 'static,
        F: Fn(A) -> R + Send + Sync + 'static,
    {
        self.add(name, move |bytes| {
            let args: A = postcard::from_bytes(bytes)?;
            Ok(Invoked::Now(postcard::to_allocvec(&f(args))?))
        })
    }

    /// Registers a function that returns a future; the reply leaves when the future is ready.
    pub fn register_future<A, R, F>(&mut self, name: &'static str, f: F) -> RpcFn<A, R>
    where
        A: Serialize + DeserializeOwned + 'static,
        R: Serialize + DeserializeOwned + 'static,
        F: Fn(A) -> Future<R> + Send + Sync + 'static,
    {
        self.add(name, move |bytes| {
            let args: A = postcard::from_bytes(bytes)?;
            Ok(Invoked::Later(f(args).then(|r| {
                postcard::to_allocvec(&r).expect("serialize an rpc result")
            })))
        })
    }

    fn add<A, R>(
        &mut self,
        name: &'static str,
        invoke: impl Fn(&[u8]) -> Result<Invoked, postcard::Error> + Send + Sync + 'static,
    ) -> RpcFn<A, R> {
        assert!(
            self.entries.iter().all(|e| e.name != name),
            "rpc function {name:?} registered twice"
        );
        let index = u32::try_from(self.entries.len()).expect("too many rpc functions");
        let hash = name_hash(name);
        self.entries.push(Entry {
            name,
            hash,
            invoke: Box::new(invoke),
        });
        RpcFn {
            index,
            hash,
            _sig: PhantomData,
        }
    }

    /// Number of registered functions.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The names of the registered functions, in registration order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.entries.iter().map(|e| e.name)
    }
}

/// Reply continuations waiting for their rpc's reply, by slot.
#[derive(Default)]
pub(crate) struct PendingReplies {
    slots: RefCell<Vec<Option<ReplyTo>>>,
    free: RefCell<Vec<usize>>,
}

type ReplyFn = Box<dyn FnOnce(WriteAck, &[u8])>;

/// What completes when an rpc's reply arrives.
pub(crate) enum ReplyTo {
    /// The future of a plain rpc, with what names the call in an error (no allocation
    /// besides the future's slot).
    Future {
        landing: Rc<dyn ReplyLanding>,
        rank: usize,
        name: &'static str,
    },
    /// Anything else (a hooked rpc, an acknowledgement, a dist_object fetch).
    Call(ReplyFn),
}

impl PendingReplies {
    pub(crate) fn insert(&self, to: ReplyTo) -> u64 {
        let mut slots = self.slots.borrow_mut();
        match self.free.borrow_mut().pop() {
            Some(i) => {
                slots[i] = Some(to);
                i as u64
            }
            None => {
                slots.push(Some(to));
                (slots.len() - 1) as u64
            }
        }
    }

    fn take(&self, slot: u64) -> Option<ReplyTo> {
        let to = self.slots.borrow_mut().get_mut(slot as usize)?.take()?;
        self.free.borrow_mut().push(slot as usize);
        Some(to)
    }
}

fn encode<A: Serialize>(what: &str, args: &A) -> Vec<u8> {
    postcard::to_allocvec(args).unwrap_or_else(|e| panic!("cannot serialize the {what}: {e}"))
}

/// Checks the target, serializes the arguments and describes the call for the hook.
fn prepare<F: RpcTarget>(
    rt: &Runtime,
    rank: usize,
    f: &F,
    args: &F::Args,
    fire_and_forget: bool,
) -> (Vec<u8>, RpcCall, [u64; 2]) {
    let n = rt.ep().ranks();
    let op = if fire_and_forget { "rpc_ff" } else { "rpc" };
    assert!(rank < n, "{op} to rank {rank}: the job has {n} ranks");
    let (number, hash) = f.number();
    let call = RpcCall {
        rank,
        name: function_at(rt.state::<Arc<RpcTable>>(), number).map_or("?", |f| f.name()),
        fire_and_forget,
    };
    (encode("rpc arguments", args), call, [number, hash])
}

/// Calls `f(args)` on `rank` and returns a future of its result; `f` is a `#[pgas::remote]`
/// function or a handle from an [`RpcTable`].
///
/// # Panics
/// If `rank` does not exist.
pub fn rpc<F>(rank: usize, f: F, args: F::Args) -> Future<F::Output>
where
    F: RpcTarget,
    F::Output: DeserializeOwned + 'static,
{
    runtime::with(|rt| {
        let (bytes, call, [number, hash]) = prepare(rt, rank, &f, &args, false);
        let hook = rt.hook_op();
        if let Some((h, id)) = &hook {
            if let RpcAction::Served(reply) = h.before_rpc(*id, &call, &bytes) {
                return Future::ready(decode_reply(rank, call.name, &reply));
            }
            rt.acks_pending.set(rt.acks_pending.get() + 1);
        }
        let (future, fulfiller) =
            Future::pending_for(Awaiting::from_rank("the reply of an rpc", rank).woken());
        let slot = rt.state::<PendingReplies>().insert(match hook {
            None => ReplyTo::Future {
                landing: fulfiller.into_reply_landing(),
                rank,
                name: call.name,
            },
            Some((h, id)) => ReplyTo::Call(Box::new(move |ack, reply| {
                let value = decode_reply(rank, call.name, reply);
                runtime::with(|rt| rt.acks_pending.set(rt.acks_pending.get() - 1));
                h.after_rpc(id, &call, ack, reply);
                fulfiller.fulfill(value);
            })),
        });
        messages::send(rt, rank, Kind::RpcRequest, &[number, hash, slot], &bytes);
        future
    })
}

/// Calls `f(args)` on `rank` without a reply (UPC++ `rpc_ff`); the result is dropped. `f` is
/// a `#[pgas::remote]` function or a handle from an [`RpcTable`].
///
/// # Panics
/// If `rank` does not exist.
pub fn rpc_ff<F: RpcTarget>(rank: usize, f: F, args: F::Args) {
    runtime::with(|rt| {
        let (bytes, call, [number, hash]) = prepare(rt, rank, &f, &args, true);
        // With a hook the target's counters must come back for the log: ask for an
        // acknowledgement (an empty reply) that completes nothing else.
        let slot = match rt.hook_op() {
            Some((h, id)) => {
                if let RpcAction::Served(_) = h.before_rpc(id, &call, &bytes) {
                    return;
                }
                rt.acks_pending.set(rt.acks_pending.get() + 1);
                let slot =
                    rt.state::<PendingReplies>()
                        .insert(ReplyTo::Call(Box::new(move |ack, _| {
                            runtime::with(|rt| rt.acks_pending.set(rt.acks_pending.get() - 1));
                            h.after_rpc(id, &call, ack, &[]);
                        })));
                slot | ACK_ONLY
            }
            None => NO_REPLY,
        };
        messages::send(rt, rank, Kind::RpcRequest, &[number, hash, slot], &bytes);
    })
}

pub(crate) fn handle_request(rt: &Runtime, token: &Token<'_>, header: &[u64], payload: &[u8]) {
    // A resilience runtime's own request is not an incoming write of the program: it is not
    // counted, and its ack reports the counters as they are.
    let ack = if rt.is_internal() {
        WriteAck {
            ec: rt.ep().epoch(),
            iwc: rt.ep().incoming_writes(),
        }
    } else {
        token.count_as_write()
    };
    run_request(rt, token.source(), header, payload, ack);
}

/// Runs an rpc request that arrived from `source` (now, or later if it was deferred).
pub(crate) fn run_request(
    rt: &Runtime,
    source: usize,
    header: &[u64],
    payload: &[u8],
    ack: WriteAck,
) {
    let [index, hash, slot, ..] = *header else {
        wire::malformed(source, "an rpc request without its header")
    };
    let rpcs = rt.state::<Arc<RpcTable>>();
    let dist = rt.state::<DistRegistry>();
    let entry = function_at(rpcs, index)
        .filter(|e| e.hash() == hash)
        .unwrap_or_else(|| {
            let (what, number) = match index & REMOTE {
                0 => ("rpc table's function", index),
                _ => ("#[pgas::remote] function", index & !REMOTE),
            };
            wire::malformed(
                source,
                &format!(
                    "the {what} #{number} is not registered here under the same name: every \
                     process must run the same binary, and every rank register the same rpc \
                     functions in the same order"
                ),
            )
        });
    dist.clear_missing();
    // The program's request (not the resilience runtime's) is named by its counters, so a
    // hook can tell which request started the operations the function starts.
    let serving = (!rt.is_internal()).then_some(ServedRequest {
        source,
        ec: ack.ec,
        iwc: ack.iwc,
    });
    let invoked = with_serving(rt, serving, || entry.invoke(payload));
    let outcome = match invoked {
        Ok(outcome) => outcome,
        Err(e) => match dist.take_missing() {
            // The arguments name a dist_object not constructed here yet: run the rpc when
            // it is (see `DistObject::new`).
            Some(id) if !dist.is_gone(id) => {
                let header = header.to_vec();
                let payload = payload.to_vec();
                return dist.defer(
                    id,
                    DeferredRpc {
                        source,
                        header,
                        payload,
                        ack,
                        internal: rt.is_internal(),
                    },
                );
            }
            Some(id) => wire::malformed(
                source,
                &format!(
                    "arguments of rpc {:?} name dist_object {id}, which this rank has \
                     already destroyed",
                    entry.name()
                ),
            ),
            None => wire::malformed(
                source,
                &format!("arguments of rpc {:?} do not decode: {e}", entry.name()),
            ),
        },
    };
    let name = entry.name();
    let (slot, ack_only) = match slot {
        NO_REPLY => (NO_REPLY, false),
        s => (s & !ACK_ONLY, s & ACK_ONLY != 0),
    };
    let reply = move |rt: &Runtime, bytes: &[u8]| {
        let bytes = if ack_only { &[][..] } else { bytes };
        reply(rt, source, name, slot, ack, bytes)
    };
    match outcome {
        Invoked::Now(bytes) if slot != NO_REPLY => reply(rt, &bytes),
        Invoked::Now(_) => {}
        Invoked::Later(future) => {
            // The reply leaves later, in whatever mode the rank is in then: send it in the
            // request's.
            let internal = rt.is_internal();
            future
                .then(move |bytes| {
                    if slot != NO_REPLY {
                        runtime::with(|rt| rt.in_mode(internal, || reply(rt, &bytes)));
                    }
                })
                .detach()
        }
    }
}

/// Runs `f` with `serving` as the request being served, restoring the previous one after
/// (also on unwind).
fn with_serving<R>(rt: &Runtime, serving: Option<ServedRequest>, f: impl FnOnce() -> R) -> R {
    struct Restore<'a>(&'a Runtime, Option<ServedRequest>);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            self.0.serving.set(self.1);
        }
    }
    let _restore = Restore(rt, rt.serving.replace(serving));
    f()
}

/// Re-runs the function registered as `name` with the serialized `args` on this rank, as the
/// program's code inside an rpc function's restricted context, and returns its serialized
/// result. Nothing is counted, sent or replied (`runtime_hooks::rerun_rpc` tells why).
pub(crate) fn rerun(rt: &Runtime, name: &str, args: &[u8]) -> Result<Vec<u8>, RerunError> {
    let dist = rt.state::<DistRegistry>();
    let table = rt.state::<Arc<RpcTable>>();
    let entry = function_named(table, name).ok_or_else(|| RerunError::Unknown {
        name: name.to_string(),
    })?;
    dist.clear_missing();
    let was_in_handler = rt.in_handler.replace(true);
    let invoked = rt.in_mode(false, || with_serving(rt, None, || entry.invoke(args)));
    rt.in_handler.set(was_in_handler);
    match invoked {
        Ok(Invoked::Now(bytes)) => Ok(bytes),
        Ok(Invoked::Later(future)) if future.is_ready() => Ok(future.result()),
        Ok(Invoked::Later(_)) => Err(RerunError::NotReady {
            name: entry.name().to_string(),
        }),
        Err(e) => Err(RerunError::Arguments {
            name: entry.name().to_string(),
            reason: match dist.take_missing() {
                Some(id) => format!("they name dist_object {id}, which this rank does not hold"),
                None => e.to_string(),
            },
        }),
    }
}

/// Sends a reply (an rpc's result or acknowledgement, a dist_object's bytes) through the
/// hook, if any.
pub(crate) fn reply(
    rt: &Runtime,
    to: usize,
    name: &'static str,
    slot: u64,
    ack: WriteAck,
    bytes: &[u8],
) {
    if let Some(h) = rt.hook() {
        if h.before_reply(&RpcReply { rank: to, name }, bytes) == ReplyAction::Suppress {
            return;
        }
    }
    messages::send(rt, to, Kind::RpcReply, &[slot, ack.ec, ack.iwc], bytes);
}

pub(crate) fn handle_reply(rt: &Runtime, source: usize, header: &[u64], payload: &[u8]) {
    let [slot, ec, iwc, ..] = *header else {
        wire::malformed(source, "an rpc reply without its header")
    };
    let to = rt
        .state::<PendingReplies>()
        .take(slot)
        .unwrap_or_else(|| wire::malformed(source, &format!("a reply to unknown rpc slot {slot}")));
    match to {
        ReplyTo::Future {
            landing,
            rank,
            name,
        } => landing.land(rank, name, payload),
        ReplyTo::Call(f) => f(WriteAck { ec, iwc }, payload),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_register_once_in_order() {
        let mut t = RpcTable::new();
        let f: RpcFn<u32, u32> = t.register("double", |x: u32| x * 2);
        let g: RpcFn<(), ()> = t.register("nothing", |()| ());
        assert_eq!((f.index, g.index), (0, 1));
        let out = (t.entries[0].invoke)(&postcard::to_allocvec(&21u32).unwrap()).unwrap();
        let Invoked::Now(bytes) = out else {
            panic!("immediate")
        };
        assert_eq!(postcard::from_bytes::<u32>(&bytes).unwrap(), 42);
        assert!(
            (t.entries[0].invoke)(&[]).is_err(),
            "truncated arguments are an error"
        );
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn duplicate_names_panic() {
        let mut t = RpcTable::new();
        let _: RpcFn<(), ()> = t.register("x", |()| ());
        let _: RpcFn<(), ()> = t.register("x", |()| ());
    }
}
