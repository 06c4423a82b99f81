//! **For resilience runtimes (such as a Containment Domain runtime), not for applications.**
//!
//! What a layer that logs and replays the program's communication needs from `pgas` besides
//! the [`Interceptor`](crate::runtime_hooks::Interceptor) itself:
//!
//! - the rank's counters: read the Incoming Write Counter ([`incoming_writes`]) and the Epoch
//!   Counter ([`epoch`]); rewind the EC to a saved value ([`set_epoch`]). Writes are counted,
//!   and acks carry the target's EC and IWC, only in a job launched with
//!   `LaunchConfig::write_counting(WriteCounting::On)`, or with `WriteCounting::Switched`
//!   at targets that switched counting on ([`count_incoming_writes`]; cd-runtime's launch
//!   does this, and switches on when a rank first needs its IWC). The default job does not
//!   count, which makes a small put cheaper;
//! - a path for its own traffic that the hook does not see ([`internal`]): preserving state at
//!   a buddy rank, gathering logs, agreeing on a CD's outcome are not the program's
//!   communication and must not be logged or replayed as such;
//! - a put into memory it keeps for itself at another rank that the target's IWC does not
//!   count ([`rput_uncounted`]): a copy preserved at a buddy is no incoming write of the
//!   buddy's program, so its replay must not have to account for it;
//! - the acks still to come ([`pending_acks`], [`wait_for_acks`]): a write's log entry is
//!   completed when its ack arrives, which may be after the call returned; recovery first
//!   waits for them;
//! - deferred frees: a `delete_` the hook deferred ([`FreeAction::Defer`]) keeps its block
//!   allocated until [`free_deferred`] frees it; [`deferred_frees`] lists them;
//! - incoming rpc requests: which one's function is running ([`serving_request`], so a log
//!   can tell the operations it starts from the body's), and running a function again from
//!   its logged arguments without counting, sending or replying ([`rerun_rpc`]), so a
//!   replaying rank re-applies an rpc request like an incoming write;
//! - state that outlives the rank's program ([`keep_until_job_end`]): a rank whose body has
//!   returned still serves the runtime's requests (a buddy's copy fetched back by a rank that
//!   lost its memory) until every rank is done.
//!
//! Allocation addresses are logged and replayed through the hook's `before_alloc` /
//! `after_alloc` ([`AllocAction::At`]).
//!
//! [`FreeAction::Defer`]: crate::runtime_hooks::FreeAction::Defer
//! [`AllocAction::At`]: crate::runtime_hooks::AllocAction::At

use std::rc::Rc;

use bytemuck::Pod;

use crate::error::{PgasError, RerunError};
use crate::global_ptr::GlobalPtr;
use crate::hook::{Interceptor, ServedRequest};
use crate::rpc;
use crate::runtime;

/// Installs `hook` on the calling rank (replacing any previous one).
pub fn set_hook(hook: Rc<dyn Interceptor>) {
    runtime::with(|rt| rt.set_hook(Some(hook)));
}

/// Removes the calling rank's hook.
pub fn clear_hook() {
    runtime::with(|rt| rt.set_hook(None));
}

/// This rank's Incoming Write Counter: the writes (puts, counted rpc requests, writing
/// atomics) that have landed in its segment so far (0 in a job that does not count writes).
pub fn incoming_writes() -> u64 {
    runtime::with(|rt| rt.ep().incoming_writes())
}

/// Starts counting the writes into this rank's segment, in a job launched with
/// `WriteCounting::Switched` (elsewhere nothing changes); a write that is not counted landed
/// before this returns, so [`incoming_writes`] read afterwards starts a gapless sequence. The
/// first call costs a `membarrier(2)`; later ones a load.
pub fn count_incoming_writes() {
    runtime::with(|rt| rt.ep().count_incoming_writes())
}

/// Whether writes into this rank's segment are counted now.
pub fn counts_incoming_writes() -> bool {
    runtime::with(|rt| rt.ep().counts_incoming_writes())
}

/// This rank's Epoch Counter (the same as [`crate::epoch`]).
pub fn epoch() -> u64 {
    runtime::with(|rt| rt.ep().epoch())
}

/// Sets this rank's Epoch Counter: a replaying CD rewinds it to its value at CD begin. Acks of
/// writes into this rank report the new value from now on.
pub fn set_epoch(ec: u64) {
    runtime::with(|rt| rt.ep().set_epoch(ec))
}

/// Runs `f` as the resilience runtime's own traffic, which the program's hook does not see.
///
/// Inside `f` (nested calls included): no hook method runs for anything the rank does;
/// synchronizations do not advance the EC (they are not the program's epochs); rpcs are
/// marked, so the target runs them in this mode too and does not count them as incoming
/// writes; allocations and frees are neither reported nor deferred. Puts still land as writes
/// in the conduit's counters (a NIC counts every write): use co-located access (`read_local`
/// / `write_local`) for the rank's own memory.
///
/// Messages of the program that arrive while `f` waits are handled as the program's, with the
/// hook. Operations the program started before keep the hook they started with (their acks
/// still reach it).
pub fn internal<R>(f: impl FnOnce() -> R) -> R {
    runtime::with(|rt| rt.in_mode(true, f))
}

/// Writes `src` at `dst` as the resilience runtime's own traffic that the target does not count
/// as an incoming write; returns once the bytes are there.
///
/// As inside [`internal`], no hook sees it. Unlike a put inside [`internal`] (which the target's
/// conduit counts, as a NIC counts every write into counted memory), the target's Incoming
/// Write Counter does not move, and the ack carries nothing back: for memory the runtime
/// reserved at the target for its own copies (a buddy's buffer of another rank's preserved
/// state), which the target's program never reads. A replay of the target's incoming writes
/// checks that their IWC values leave no gap; a counted copy landing there while the target
/// ran a relaxed Containment Domain would be a gap no log explains. A NIC does this for a
/// memory region registered without a counting event.
///
/// # Panics
/// If `dst` is null, in the bytes the runtime keeps below the first allocation, or
/// `dst .. dst + src.len()` is not inside the target's segment.
pub fn rput_uncounted<T: Pod>(src: &[T], dst: GlobalPtr<T>) {
    dst.check_access("rput_uncounted");
    runtime::with(|rt| {
        rt.ep()
            .put_uncounted(dst.rank(), dst.offset(), bytemuck::cast_slice(src))
            .unwrap_or_else(|e| panic!("rput_uncounted: {e}"))
    })
}

/// Keeps `value` alive on this rank until every rank of the job has returned from its body and
/// every message in flight has been handled (the end of `launch`'s finalize), then drops it;
/// if the rank unwinds, when it leaves `launch`. Values are dropped in the order kept, while
/// pgas is still usable on the rank.
///
/// For the state behind a resilience runtime's rpc functions: a rank keeps serving requests
/// after its own body returned (finalize waits for the others), and state dropped with the
/// body could not answer them, e.g. a buddy rank that finished first could not give back the
/// copy a rank recovering from a memory loss asks for.
pub fn keep_until_job_end(value: impl std::any::Any) {
    runtime::with(|rt| rt.kept.borrow_mut().push(Box::new(value)))
}

/// True inside [`internal`] (or in an rpc function run for another rank's internal traffic).
pub fn is_internal() -> bool {
    runtime::with(|rt| rt.is_internal())
}

/// True while this rank runs a message handler (an rpc function, a reply), where a blocking
/// call such as [`rput_uncounted`] to another host must not wait.
pub fn in_handler() -> bool {
    runtime::with(|rt| rt.ep().in_handler())
}

/// Writes and rpcs started with the hook whose ack has not reached it yet.
pub fn pending_acks() -> usize {
    runtime::with(|rt| rt.acks_pending.get())
}

/// Makes progress until every ack counted by [`pending_acks`] has reached the hook (recovery
/// does this before it reads the logs). Not inside an rpc function.
pub fn wait_for_acks() {
    runtime::progress_until(|| runtime::with(|rt| rt.acks_pending.get() == 0));
}

/// Offsets (in this rank's segment) of the blocks whose `delete_` the hook deferred, in
/// increasing order.
pub fn deferred_frees() -> Vec<usize> {
    runtime::with(|rt| rt.deferred_frees.borrow().iter().copied().collect())
}

/// Cancels the deferred free of the block at `offset`: the block stays allocated, as if its
/// `delete_` had not run (the execution that deferred it is re-executed, and the re-execution
/// frees the block again).
///
/// # Errors
/// [`PgasError::BadFree`] if no free of that block is deferred.
pub fn cancel_deferred_free(offset: usize) -> Result<(), PgasError> {
    runtime::with(|rt| {
        if rt.deferred_frees.borrow_mut().remove(&offset) {
            Ok(())
        } else {
            Err(PgasError::BadFree {
                what: "a pointer whose free was not deferred",
                rank: rt.rank_me(),
                offset,
            })
        }
    })
}

/// Frees the block at `offset` whose `delete_` was deferred (when the CD that spans both its
/// allocation and its free completes).
///
/// # Errors
/// [`PgasError::BadFree`] if no free of that block is deferred.
pub fn free_deferred(offset: usize) -> Result<(), PgasError> {
    runtime::with(|rt| {
        if !rt.deferred_frees.borrow_mut().remove(&offset) {
            return Err(PgasError::BadFree {
                what: "a pointer whose free was not deferred",
                rank: rt.rank_me(),
                offset,
            });
        }
        rt.heap.borrow_mut().free(offset).map(|_| ())
    })
}

/// The program's rpc request whose function is running now on this rank (inside the function,
/// and in what it calls); `None` in the body, in the resilience runtime's own requests, and in
/// a [`rerun_rpc`]. A future's continuation that runs later is not inside the function.
pub fn serving_request() -> Option<ServedRequest> {
    runtime::with(|rt| rt.serving.get())
}

/// Runs the rpc function registered as `name` on this rank again, with the serialized
/// arguments a log kept, and returns its serialized result: a replaying rank re-applies an
/// incoming rpc request as it re-applies an incoming write.
///
/// Unlike a request that arrives: the Incoming Write Counter does not move (the request was
/// counted when it first arrived), no reply is sent (the sender has it; the caller may compare
/// the bytes with the reply the sender logged), and [`serving_request`] is `None`. The function
/// runs as the program's code (the hook sees what it starts, so a replaying layer can refuse
/// or serve it) in an rpc function's restricted context (it must not wait).
///
/// A function registered with `register_future` must return a ready future: a future that is
/// not ready waits for messages or for code of this rank that the caller (a replay, in the
/// middle of the rank's recovery) cannot run without risking a deadlock, so the function's
/// effects stand but [`RerunError::NotReady`] is returned instead of waiting.
///
/// # Errors
/// [`RerunError`]: an unknown name, arguments that do not decode, a future not ready.
pub fn rerun_rpc(name: &str, args: &[u8]) -> Result<Vec<u8>, RerunError> {
    runtime::with(|rt| rpc::rerun(rt, name, args))
}
