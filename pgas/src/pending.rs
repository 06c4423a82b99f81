//! Puts still in flight: what each one completes when its ack arrives.
//!
//! A put into memory this process maps (every rank on smp, the ranks of the host under mpirun)
//! is complete when the call returns, and never comes here. A put to another host (or with
//! `PGAS_MPI_PSHM=0`) leaves as a message and returns at once: its source buffer is free
//! (the conduit copied it), its operation completion waits for the target's ack. Such a put
//! is kept here with what its completion does: fulfil the operation future, remove the
//! dependency it holds on a promise, show the ack to the hook that saw it start, send the
//! remote-completion rpc (after the data landed, so the rpc sees it).
//!
//! **Progress completes them.** Every round of pgas progress (any wait, [`crate::progress`])
//! polls the conduit once and then checks each put's handle without further progress.
//!
//! **Synchronizations and resilience traffic complete them first** ([`Runtime::quiet`]): a
//! barrier, a collective, and the entry of an internal scope (a Containment Domain's
//! preservation, agreement or recovery) wait until this rank has no put in flight (except
//! inside a message handler, which may not wait). UPC++
//! leaves a put whose future was dropped unordered with a later barrier; here the barrier
//! orders it, so a program that forgets a future still finds the data at the target after
//! the barrier, and a CD never preserves or restores around a write still landing.
//!
//! [`Runtime::quiet`]: crate::runtime::Runtime::quiet

use std::rc::Rc;

use gasnet_bridge::completion::WriteHandle;

use crate::future::Fulfiller;
use crate::hook::{Interceptor, OpId, Rma};
use crate::promise::Promise;
use crate::runtime::Runtime;

/// A remote-completion rpc still to send: the target rank and the sending closure.
pub(crate) type RemoteSend = (usize, Box<dyn FnOnce(usize)>);

/// What a put's ack completes.
pub(crate) struct PendingPut {
    /// The conduit's handle; yields the target's EC and IWC.
    pub(crate) handle: WriteHandle,
    /// The hook that saw the put start, its operation and range (`after_put` on the ack).
    pub(crate) hooked: Option<(Rc<dyn Interceptor>, OpId, Rma)>,
    /// The operation future to fulfil.
    pub(crate) operation: Option<Fulfiller<()>>,
    /// A promise counting operation completion (one dependency held).
    pub(crate) promise: Option<Promise<()>>,
    /// The remote-completion rpc, sent once the data has landed.
    pub(crate) remote: Option<RemoteSend>,
}

impl PendingPut {
    /// A put that only its handle tracks (no completion asked for).
    pub(crate) fn new(
        handle: WriteHandle,
        hooked: Option<(Rc<dyn Interceptor>, OpId, Rma)>,
    ) -> Self {
        PendingPut {
            handle,
            hooked,
            operation: None,
            promise: None,
            remote: None,
        }
    }

    /// Runs what the ack completes.
    fn complete(self, rt: &Runtime) {
        let ack = self.handle.wait(rt.ep());
        if let Some((hook, id, rma)) = self.hooked {
            rt.acks_pending.set(rt.acks_pending.get() - 1);
            hook.after_put(id, &rma, ack);
        }
        if let Some((target, send)) = self.remote {
            send(target);
        }
        if let Some(f) = self.operation {
            f.fulfill(());
        }
        if let Some(p) = self.promise {
            p.fulfill_anonymous(1);
        }
    }
}

/// Completes the puts whose acks have arrived (after the caller's round of progress); the
/// completions run after the list is released, as they may start new puts.
pub(crate) fn complete_arrived(rt: &Runtime) {
    let arrived: Vec<PendingPut> = {
        let mut list = rt.pending_puts.borrow_mut();
        if list.is_empty() {
            return;
        }
        let mut arrived = Vec::new();
        let mut i = 0;
        while i < list.len() {
            if list[i].handle.arrived().is_some() {
                arrived.push(list.swap_remove(i));
            } else {
                i += 1;
            }
        }
        arrived
    };
    for p in arrived {
        p.complete(rt);
    }
}
