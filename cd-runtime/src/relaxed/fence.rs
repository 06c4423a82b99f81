//! The recovery fence: while a rank F replays its log, the ranks that write into it wait, so
//! that no write of theirs lands between an older replayed one and the switch to forward mode.
//!
//! Without the fence, a writer that ran ahead of F (it passed a synchronization F had passed
//! before failing) could put into F while F replays: an older replayed write could then
//! overwrite the new bytes, or the replayed code could read them in place of the old ones.
//! The protocol (docs/relaxed-cds.md, "Recovery of C on F") has the ranks that wait on F simply
//! wait; this is how a writer knows.
//!
//! # Protocol
//!
//! F's fence word is the word after its writer-mark table (`writers.rs`), [`RAISED`] while F
//! replays and 0 otherwise.
//!
//! 1. **Raise** (F, at the start of recovery, before it reads its IWC as `iwc_end`): store
//!    [`RAISED`], a sequentially consistent fence, then read the writer marks.
//! 2. **Drain** (F): ask each marked writer (every other member of the LCSA's team after F
//!    lost its memory, marks included) by the internal rpc `cd.relaxed.fence`. The writer
//!    notes that F is fenced, then answers how many of its writes into F still wait for their
//!    ack; F asks again until none does. Every write those ranks made into F is now counted in
//!    F's IWC, and every later one waits.
//! 3. **Mark, then check** (a writer W, before its first write into F under an LCSA instance):
//!    W puts its mark into F's table (as before), a sequentially consistent fence, then reads
//!    F's fence word. This is Dekker's handshake with step 1: either F's read of the marks sees
//!    W's mark (W is drained in step 2), or W's read sees [`RAISED`] (W waits), or both.
//! 4. **Wait** (W, before any logged write, writing atomic or rpc request into F that F
//!    fenced): make progress, serving other ranks, until F's fence word is no longer
//!    [`RAISED`].
//! 5. **Lower** (F, when its replay switches to forward mode, when the recovery fails, and
//!    when the re-executed body unwinds): store 0. At the switch F stands where its first
//!    execution stopped, so the gathered writes left (if any) carry its current epoch. Not
//!    later: a body that failed early (an error returned mid-body) goes on in forward mode
//!    and may wait for its neighbours' new writes.
//!
//! F's replay never waits for a writer's new write (it is fed by logs up to the point where
//! the first execution stopped), so a waiting writer never blocks the rank it waits for.
//! Writes made inside an rpc handler, which may not wait, are not fenced: one landing during
//! the replay is still counted and makes the recovery fail with a clear error
//! (`Replay::switch_to_forward`), as before.

use std::sync::atomic::{Ordering, fence};

use pgas::runtime_hooks::{self as resilience, internal};

use crate::relaxed::gather;
use crate::runtime::{self, CdRuntime};

/// The fence word's value while its rank replays (any other value means "not fenced": a
/// poisoned segment after a rank loss is not mistaken for a raised fence).
pub(crate) const RAISED: u64 = 0x5245_504c_4159_494e; // "REPLAYIN"

/// A fence word the loss of its rank's memory filled: its rank is about to set it (to
/// [`RAISED`] after a loss in the middle of a body, to 0 otherwise), so it means "wait" too.
const POISONED: u64 = u64::from_ne_bytes([resilience::POISON; 8]);

/// True if a fence word says: wait.
fn raised(word: u64) -> bool {
    word == RAISED || word == POISONED
}

/// How often F asks a writer again whose writes into F still wait for their ack.
const DRAIN_ROUNDS: usize = 100_000;

/// Raises this rank's fence and drains its writers (steps 1-2): the marked writers under the
/// current LCSA, or every other member of its team when `all` (the marks were lost).
pub(crate) fn raise_and_drain(rt: &CdRuntime, all: bool) -> Result<(), String> {
    raise(rt);
    let lcsa = rt.lcsa();
    let members = gather::other_members(&lcsa, rt.rank);
    let mut ask = if all {
        members
    } else {
        gather::marked_writers(rt, &lcsa, &members)
    };
    for _ in 0..DRAIN_ROUNDS {
        if ask.is_empty() {
            return Ok(());
        }
        let answers = note_at(rt, &ask);
        ask = (ask.iter().zip(answers))
            .filter(|(_, pending)| *pending > 0)
            .map(|(&r, _)| r)
            .collect();
        pgas::progress();
    }
    Err(format!(
        "rank(s) {ask:?} still had writes into this rank without an ack after {DRAIN_ROUNDS} \
         rounds of asking; the recovery cannot know which writes it must replay"
    ))
}

/// Has each of `ranks` note that this rank is fenced (one round, all requests in flight at
/// once); each one's answer: how many of its writes into this rank still wait for their ack.
fn note_at(rt: &CdRuntime, ranks: &[usize]) -> Vec<u64> {
    let futures: Vec<_> = internal(|| {
        (ranks.iter())
            .map(|&r| pgas::rpc(r, rt.relaxed.rpcs.fence, rt.rank))
            .collect()
    });
    futures.into_iter().map(|f| internal(|| f.wait())).collect()
}

/// Raises this rank's fence (step 1).
fn raise(rt: &CdRuntime) {
    let word = rt.relaxed.writers.fence_word(rt.rank);
    word.write_local(RAISED).expect("own fence word");
    // Orders the raise before the reads of the marks (Dekker with `after_mark`).
    fence(Ordering::SeqCst);
}

/// Lowers this rank's fence (step 5); harmless when it is not raised.
pub(crate) fn lower(rt: &CdRuntime) {
    let word = rt.relaxed.writers.fence_word(rt.rank);
    if matches!(word.read_local(), Ok(RAISED)) {
        word.write_local(0).expect("own fence word");
    }
}

/// Lowers the fence when dropped: the re-executed body may unwind (an escalation).
pub(crate) struct LowerOnDrop;

impl Drop for LowerOnDrop {
    fn drop(&mut self) {
        runtime::try_with(lower);
    }
}

/// This rank is about to lose its memory in the middle of a relaxed body (as the failure
/// detector of a real system would tell the others a rank is down): raises the fence and
/// has every other member of the LCSA's team note it, so that from now on they neither
/// write into this rank nor read from it (`before_read`) until its replay has rebuilt its
/// memory up to where the log ends and the fence comes down.
///
/// Every member is asked once and only has to note it: the drain that bounds the replay comes
/// when the recovery begins. Waiting here until no member has a write into this rank without
/// an ack could wait for a member that holds its write back at this very fence, and a rank
/// that gave up waiting would leave its poisoned memory unfenced.
pub(crate) fn announce_loss(rt: &CdRuntime) {
    raise(rt);
    note_at(rt, &gather::other_members(&rt.lcsa(), rt.rank));
}

/// The loss filled this rank's segment, its fence word with it: sets the word again,
/// [`RAISED`] after [`announce_loss`] (`raised`: a loss in the middle of a body), 0 otherwise.
pub(crate) fn after_loss(rt: &CdRuntime, raised: bool) {
    let word = rt.relaxed.writers.fence_word(rt.rank);
    word.write_local(if raised { RAISED } else { 0 })
        .expect("own fence word");
}

/// Before a read from `target` (a get, an atomic, an rpc, a fetch) by a rank that `target`
/// fenced: waits while its fence is up (a rank lost in the middle of a body has not rebuilt
/// what it published yet). One lookup in an empty list otherwise. Not inside an rpc
/// handler, which may not wait.
pub(crate) fn before_read(rt: &CdRuntime, target: usize) {
    if !rt.relaxed.fenced.contains(target) || resilience::in_handler() {
        return;
    }
    before_write(rt, target, false);
}

/// Serves F's drain request (step 2): notes that `target` is fenced and answers how many of
/// this rank's writes into it wait for their ack (`u64::MAX` while this rank restores its
/// own logs after a loss, as for a gather: F asks again).
pub(crate) fn serve(rt: &CdRuntime, target: usize) -> u64 {
    rt.relaxed.fenced.note(target);
    gather::pending_writes_into(rt, target)
}

/// Before a logged write into `target` (steps 3-4): after this rank just marked itself in
/// `target`'s table (`marked`), or when `target` fenced it, waits while `target`'s fence is
/// raised. Not inside an rpc handler, which may not wait.
pub(crate) fn before_write(rt: &CdRuntime, target: usize, marked: bool) {
    if resilience::in_handler() {
        return;
    }
    let fenced = rt.relaxed.fenced.contains(target);
    if !marked && !fenced {
        return;
    }
    if marked {
        // Orders the mark before the read of the fence word (Dekker with `raise_and_drain`).
        fence(Ordering::SeqCst);
    }
    let word = rt.relaxed.writers.fence_word(target);
    let mut spins = 0u32;
    while raised(internal(|| pgas::rget(word).wait())) {
        pgas::progress();
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(64) {
            // Ranks may share cores (smp): let the replaying rank run.
            std::thread::yield_now();
        }
    }
    if fenced {
        rt.relaxed.fenced.forget(target);
    }
}
