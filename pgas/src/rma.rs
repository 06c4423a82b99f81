//! One-sided transfers: `rput` / `rget` of scalars and slices, with UPC++'s completion kinds.
//!
//! Completions are values: [`Completions`] says which events the caller wants to learn about
//! (source buffer reusable, operation complete, an rpc run at the target once the data has
//! landed) and how (a future, or a promise that counts it). Invalid pointers (null, into the
//! bytes the runtime keeps below the first allocation, another rank's segment overrun) panic
//! with the error, which names rank, offset and length.
//!
//! A put into memory this process maps is complete when the call returns (its futures are
//! ready); a put to another host returns once its source is copied, and its operation
//! completes when the target's ack arrives, through progress. Barriers, collectives and the
//! resilience runtime's scopes complete the rank's puts first (see `pending.rs`). Gets and
//! atomics still wait for their reply inside the call.

use bytemuck::Pod;
use gasnet_bridge::Awaiting;
use gasnet_bridge::WriteHandle;

use crate::future::Future;
use crate::global_ptr::GlobalPtr;
use crate::hook::{GetAction, PutAction, Rma};
use crate::pending::{
    HookedGet, HookedPut, PendingPut, PendingRead, PutHandle, fold_flush, fold_put, push_put,
    push_read,
};
use crate::promise::Promise;
use crate::rpc::{RpcTarget, rpc_ff};
use crate::runtime::{self, Runtime};

/// Writes `bytes` at (`rank`, `offset`) through the hook, if any.
#[inline]
pub(crate) fn put_bytes(rt: &Runtime, rank: usize, offset: usize, bytes: &[u8]) {
    let Some((hook, id)) = rt.hook_op() else {
        rt.ep()
            .put(rank, offset, bytes)
            .unwrap_or_else(|e| panic!("rput: {e}"));
        return;
    };
    let rma = Rma {
        rank,
        offset,
        len: bytes.len(),
    };
    if hook.before_put(id, &rma, bytes) == PutAction::Suppress {
        return;
    }
    // The write's ack is pending from here until `after_put` (on these blocking conduits
    // it arrives before `put` returns; an asynchronous conduit would complete it later).
    rt.acks_pending.set(rt.acks_pending.get() + 1);
    let ack = rt
        .ep()
        .put(rank, offset, bytes)
        .unwrap_or_else(|e| panic!("rput: {e}"));
    rt.acks_pending.set(rt.acks_pending.get() - 1);
    hook.after_put(id, &rma, ack);
}

/// A put that left for memory this process does not map: its handle, and the hook that saw it
/// start (it sees the ack when it arrives).
type Started = (WriteHandle, Option<HookedPut>);

/// Starts a put of `bytes` at (`rank`, `offset`) through the hook, if any: `None` when it is
/// complete already (memory this process maps) or the hook suppressed it, else what its ack
/// must still complete (see `pending.rs`).
#[inline]
fn start_put(rt: &Runtime, rank: usize, offset: usize, bytes: &[u8]) -> Option<Started> {
    let Some((hook, id)) = rt.hook_op() else {
        let handle = rt
            .ep()
            .put_nb(rank, offset, bytes)
            .unwrap_or_else(|e| panic!("rput: {e}"));
        return match handle.completed_at_once() {
            Some(_) => None,
            None => Some((handle, None)),
        };
    };
    let rma = Rma {
        rank,
        offset,
        len: bytes.len(),
    };
    if hook.before_put(id, &rma, bytes) == PutAction::Suppress {
        return None;
    }
    rt.acks_pending.set(rt.acks_pending.get() + 1);
    let handle = rt
        .ep()
        .put_nb(rank, offset, bytes)
        .unwrap_or_else(|e| panic!("rput: {e}"));
    match handle.completed_at_once() {
        Some(ack) => {
            rt.acks_pending.set(rt.acks_pending.get() - 1);
            hook.after_put(id, &rma, ack);
            None
        }
        None => Some((handle, Some((hook, id, rma)))),
    }
}

/// The future of a put started by [`start_put`]: ready, holding the put's number if it is a
/// window put that no hook saw (waiting on it flushes the target), or completed by its ack.
/// Inlined whole: an out-of-line cross-host part adds a call to every rput-and-wait.
#[inline]
fn put_future(rt: &Runtime, started: Option<Started>) -> Future<()> {
    let Some((handle, hooked)) = started else {
        return Future::ready(());
    };
    let handle = match hooked {
        None => match handle.into_flush_id() {
            Ok(id) => return Future::of_write(id),
            Err(handle) => handle,
        },
        Some(_) => handle,
    };
    let mut p = PendingPut::new(handle, hooked);
    let (future, fulfiller) = Future::pending_for(Awaiting::new("the ack of an rput"));
    p.operation = Some(fulfiller);
    push_put(rt, p);
    future
}

/// Reads into `dst` from (`rank`, `offset`) through the hook, if any.
#[inline]
pub(crate) fn get_bytes(rt: &Runtime, rank: usize, offset: usize, dst: &mut [u8]) {
    let Some((hook, id)) = rt.hook_op() else {
        rt.ep()
            .get(rank, offset, dst)
            .unwrap_or_else(|e| panic!("rget: {e}"));
        return;
    };
    let rma = Rma {
        rank,
        offset,
        len: dst.len(),
    };
    if hook.before_get(id, &rma, dst) == GetAction::Served {
        return;
    }
    rt.ep()
        .get(rank, offset, dst)
        .unwrap_or_else(|e| panic!("rget: {e}"));
    hook.after_get(id, &rma, dst);
}

/// Writes `value` to `dst`; the future completes when the write is done at the target.
#[inline]
pub fn rput<T: Pod>(value: T, dst: GlobalPtr<T>) -> Future<()> {
    dst.check_access("rput");
    runtime::with(|rt| put_now(rt, dst.rank(), dst.offset(), bytemuck::bytes_of(&value)))
}

/// Writes `src` to `dst ..`; the future completes when the write is done at the target.
pub fn rput_slice<T: Pod>(src: &[T], dst: GlobalPtr<T>) -> Future<()> {
    dst.check_access("rput");
    runtime::with(|rt| put_now(rt, dst.rank(), dst.offset(), bytemuck::cast_slice(src)))
}

/// Starts a put and returns its operation future: an unhooked window put is known by its
/// number alone from the start (no handle made, reference-counted and converted).
#[inline]
fn put_now(rt: &Runtime, rank: usize, offset: usize, bytes: &[u8]) -> Future<()> {
    if !rt.hooked()
        && let Some(id) = rt.ep().put_nb_flush(rank, offset, bytes)
    {
        return Future::of_write(id.unwrap_or_else(|e| panic!("rput: {e}")));
    }
    put_future(rt, start_put(rt, rank, offset, bytes))
}

/// Reads the `T` at `src`. From memory this process maps the future is ready on return;
/// from another host it completes when the data arrives (many gets can be in flight).
#[inline]
pub fn rget<T: Pod>(src: GlobalPtr<T>) -> Future<T> {
    src.check_access("rget");
    let mut value = T::zeroed();
    runtime::with(|rt| {
        start_get(
            rt,
            src.rank(),
            src.offset(),
            bytemuck::bytes_of_mut(&mut value),
        )
    })
    .map_or(Future::ready(value), |pending| {
        pending.finish(|bytes| bytemuck::pod_read_unaligned::<T>(&bytes))
    })
}

/// Reads `len` elements from `src ..` (ready on return from mapped memory, completed by the
/// reply from another host).
pub fn rget_slice<T: Pod>(src: GlobalPtr<T>, len: usize) -> Future<Vec<T>> {
    src.check_access("rget");
    let mut out = vec![T::zeroed(); len];
    let pending = runtime::with(|rt| {
        start_get(
            rt,
            src.rank(),
            src.offset(),
            bytemuck::cast_slice_mut(&mut out),
        )
    });
    match pending {
        None => Future::ready(out),
        Some(p) => p.finish(move |bytes| {
            bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&bytes);
            out
        }),
    }
}

/// A get that left for another host: its future is made by [`StartedGet::finish`].
struct StartedGet {
    handle: gasnet_bridge::OwnedGetHandle,
    hooked: Option<HookedGet>,
}

impl StartedGet {
    /// The future of the get's value, `decode` making it from the bytes when they arrive.
    fn finish<V: 'static>(self, decode: impl FnOnce(Vec<u8>) -> V + 'static) -> Future<V> {
        let (future, fulfiller) = Future::pending_for(Awaiting::new("the reply of an rget"));
        runtime::with(|rt| {
            push_read(
                rt,
                PendingRead::Get {
                    handle: self.handle,
                    hooked: self.hooked,
                    deliver: Box::new(move |bytes| fulfiller.fulfill(decode(bytes))),
                },
            )
        });
        future
    }
}

/// Starts a get of `dst.len()` bytes from (`rank`, `offset`) through the hook, if any: the
/// bytes are in `dst` on return (`None`) when the hook served them from its log or the
/// memory is mapped; otherwise the get is in flight and `dst` is untouched.
fn start_get(rt: &Runtime, rank: usize, offset: usize, dst: &mut [u8]) -> Option<StartedGet> {
    let hook = rt.hook_op();
    let rma = Rma {
        rank,
        offset,
        len: dst.len(),
    };
    if let Some((h, id)) = &hook {
        if h.before_get(*id, &rma, dst) == GetAction::Served {
            return None;
        }
    }
    if rt.ep().maps(rank) || rt.ep().in_handler() {
        // Complete on return, straight into `dst`: no buffer to own. (Inside a handler, too:
        // an rpc function may wait for its own get.)
        rt.ep()
            .get(rank, offset, dst)
            .unwrap_or_else(|e| panic!("rget: {e}"));
        if let Some((h, id)) = hook {
            h.after_get(id, &rma, dst);
        }
        return None;
    }
    let handle = rt
        .ep()
        .get_nb_owned(rank, offset, dst.len())
        .unwrap_or_else(|e| panic!("rget: {e}"));
    let hooked = hook.map(|(h, id)| {
        rt.acks_pending.set(rt.acks_pending.get() + 1);
        (h, id, rma)
    });
    Some(StartedGet { handle, hooked })
}

/// Reads `dst.len()` elements from `src ..` into `dst`, returning when they are there.
pub fn rget_into<T: Pod>(src: GlobalPtr<T>, dst: &mut [T]) {
    src.check_access("rget");
    runtime::with(|rt| get_bytes(rt, src.rank(), src.offset(), bytemuck::cast_slice_mut(dst)));
}

/// How one completion event is reported.
#[derive(Clone, Copy)]
enum Notify<'p> {
    Future,
    Promise(&'p Promise<()>),
}

/// The completion events a transfer reports, and how (UPC++ `source_cx`, `operation_cx`,
/// `remote_cx`); `'p` is the borrow of the promises that count events.
///
/// A transfer into memory this process maps (smp, the ranks of the host) is complete when its call
/// returns, so a promise's dependency would be registered and removed within the call: only the
/// check that the promise is not fulfilled yet remains, and the promise is borrowed, not cloned (a
/// clone and its drop would cost several times the 8-byte put itself). A put to another host
/// returns before its ack: it registers its dependency and keeps a clone of the promise until the
/// ack comes (see `pending.rs`).
#[derive(Default)]
pub struct Completions<'p> {
    source: Option<Notify<'p>>,
    operation: Option<Notify<'p>>,
    remote: Option<Box<dyn FnOnce(usize)>>,
}

/// The futures a transfer returned, one per event asked for as a future.
#[derive(Debug)]
pub struct CxFutures {
    /// Ready when the source buffer may be reused.
    pub source: Option<Future<()>>,
    /// Ready when the transfer is complete at the target.
    pub operation: Option<Future<()>>,
}

impl<'p> Completions<'p> {
    /// No events (the transfer is still performed).
    #[inline]
    pub fn new() -> Self {
        Completions::default()
    }
    /// Report source completion as a future.
    #[inline]
    pub fn source_future(mut self) -> Self {
        self.source = Some(Notify::Future);
        self
    }
    /// Count source completion on `promise`.
    #[inline]
    pub fn source_promise(mut self, promise: &'p Promise<()>) -> Self {
        self.source = Some(Notify::Promise(promise));
        self
    }
    /// Report operation completion as a future.
    #[inline]
    pub fn operation_future(mut self) -> Self {
        self.operation = Some(Notify::Future);
        self
    }
    /// Count operation completion on `promise`.
    #[inline]
    pub fn operation_promise(mut self, promise: &'p Promise<()>) -> Self {
        self.operation = Some(Notify::Promise(promise));
        self
    }
    /// Run `f(args)` at the target once the data has landed there (`f` a `#[pgas::remote]`
    /// function or a table's handle, as for [`rpc_ff`]).
    pub fn remote_rpc<F>(mut self, f: F, args: F::Args) -> Self
    where
        F: RpcTarget + 'static,
        F::Args: 'static,
    {
        self.remote = Some(Box::new(move |rank| rpc_ff(rank, f, args)));
        self
    }

    /// Checks, before the transfer starts, that no promise is fulfilled already (UPC++: a
    /// dependency may not be added to a ready promise).
    #[inline]
    fn start(&self) {
        for n in [self.source, self.operation].into_iter().flatten() {
            if let Notify::Promise(p) = n {
                p.check_open("a completion of an rput or rget");
            }
        }
    }

    /// Source completion of a put whose source is free on return: a ready future if asked for
    /// as one (a promise counting it had its dependency checked, added and removed at once).
    #[inline]
    fn source_at_once(&self) -> Option<Future<()>> {
        match self.source {
            Some(Notify::Future) => Some(Future::ready(())),
            Some(Notify::Promise(_)) | None => None,
        }
    }

    /// True if operation completion is a promise's count or not asked for, and no remote rpc
    /// is: what a put's record may fold ([`crate::pending::fold_put`]).
    #[inline]
    fn folds(&self) -> bool {
        self.remote.is_none() && !matches!(self.operation, Some(Notify::Future))
    }

    /// Reports the events of a window put known by its number ([`Completions::folds`] held):
    /// the source is free, the promise holds one more dependency, which the record the put
    /// folds into (or a new one) removes when a flush completes it.
    #[inline]
    fn complete_flushed(self, rt: &Runtime, id: gasnet_bridge::FlushId) -> CxFutures {
        let promise = match self.operation {
            Some(Notify::Promise(p)) => {
                p.require_anonymous(1);
                Some(p)
            }
            Some(Notify::Future) | None => None,
        };
        let source = self.source_at_once();
        if !fold_flush(rt, id, promise) {
            push_put(
                rt,
                PendingPut::flushed(PutHandle::Flush(id), promise.cloned()),
            );
        }
        CxFutures {
            source,
            operation: None,
        }
    }

    /// Reports every event of a put whose ack is still to come: the source is free (the
    /// conduit copied it), the operation completes, and the rpc leaves, when the ack arrives.
    /// Inlined for a flood's sake: a put that only counts on a promise folds into the latest
    /// record (`pending.rs`) without its handle and completions being moved around first.
    #[inline]
    fn complete_later(self, rt: &Runtime, started: Started, target: usize) -> CxFutures {
        let (handle, hooked) = started;
        let promise = match self.operation {
            Some(Notify::Promise(p)) => {
                p.require_anonymous(1);
                Some(p)
            }
            Some(Notify::Future) | None => None,
        };
        let plain = hooked.is_none() && self.remote.is_none();
        let handle = match self.operation {
            Some(Notify::Promise(_)) | None if plain => match fold_put(rt, handle, promise) {
                Ok(()) => {
                    return CxFutures {
                        source: self.source_at_once(),
                        operation: None,
                    };
                }
                Err(handle) => handle,
            },
            _ => handle,
        };
        self.record_later(rt, (handle, hooked), promise, target)
    }

    /// [`Completions::complete_later`] for a put that needs a record of its own (or a future
    /// holding the put's number); `promise` had its dependency added already.
    #[inline(never)]
    fn record_later(
        self,
        rt: &Runtime,
        started: Started,
        promise: Option<&Promise<()>>,
        target: usize,
    ) -> CxFutures {
        let (handle, hooked) = started;
        let source = self.source_at_once();
        let handle = match self.operation {
            Some(Notify::Future) if hooked.is_none() && self.remote.is_none() => {
                match handle.into_flush_id() {
                    Ok(id) => {
                        return CxFutures {
                            source,
                            operation: Some(Future::of_write(id)),
                        };
                    }
                    Err(handle) => handle,
                }
            }
            _ => handle,
        };
        let mut pending = PendingPut::new(handle, hooked);
        let operation = match self.operation {
            Some(Notify::Future) => {
                let (future, fulfiller) = Future::pending_for(Awaiting::new("the ack of an rput"));
                pending.operation = Some(fulfiller);
                Some(future)
            }
            Some(Notify::Promise(_)) | None => None,
        };
        pending.promise = promise.cloned();
        pending.remote = self.remote.map(|send| (target, send));
        push_put(rt, pending);
        CxFutures { source, operation }
    }

    /// Reports every event; the transfer is complete when this runs (see the type's doc), so
    /// a promise's dependency is already met.
    #[inline]
    fn complete(self, target: usize) -> CxFutures {
        let report = |n: Option<Notify>| match n {
            Some(Notify::Future) => Some(Future::ready(())),
            Some(Notify::Promise(_)) | None => None,
        };
        let out = CxFutures {
            source: report(self.source),
            operation: report(self.operation),
        };
        // The rpc leaves after the data landed, so it observes the data when it runs.
        if let Some(send) = self.remote {
            send(target);
        }
        out
    }
}

/// `rput` of a slice with explicit completions.
#[inline]
pub fn rput_with<T: Pod>(src: &[T], dst: GlobalPtr<T>, cx: Completions<'_>) -> CxFutures {
    dst.check_access("rput");
    cx.start();
    runtime::with(|rt| {
        let bytes = bytemuck::cast_slice(src);
        // A put that completes nothing but a promise's count, unhooked, through the window:
        // known by its number alone (no handle to make, move and drop per put).
        if cx.folds() && !rt.hooked() {
            if let Some(id) = rt.ep().put_nb_flush(dst.rank(), dst.offset(), bytes) {
                let id = id.unwrap_or_else(|e| panic!("rput: {e}"));
                return cx.complete_flushed(rt, id);
            }
        }
        match start_put(rt, dst.rank(), dst.offset(), bytes) {
            None => cx.complete(dst.rank()),
            Some(p) => cx.complete_later(rt, p, dst.rank()),
        }
    })
}

/// `rget` into `dst` with explicit completions (source completion does not apply to a get and
/// is reported together with operation completion).
#[inline]
pub fn rget_with<T: Pod>(src: GlobalPtr<T>, dst: &mut [T], cx: Completions<'_>) -> CxFutures {
    src.check_access("rget");
    cx.start();
    runtime::with(|rt| get_bytes(rt, src.rank(), src.offset(), bytemuck::cast_slice_mut(dst)));
    cx.complete(src.rank())
}
