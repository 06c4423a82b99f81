//! Faults at an operation of a relaxed body (`inject.at` with `at_op`, `soft_error_per_op`,
//! `rank_loss_per_op`): the hook counts the point-to-point operations (puts, gets, rpcs,
//! atomics) a logging relaxed CD's body performs in forward mode and, when a fault strikes
//! right before one, makes it happen there.
//!
//! A soft error fails the execution (detected when the body ends, like `cd::check!`). A rank
//! loss is a crash in the middle of the body: what the rank sent has landed, its memory goes
//! (`recovery::lose_memory_mid_body`: the segment, and every log entry no replica held),
//! and, when the CD can recover alone, the body unwinds at once, so the CD starts again from
//! its begin as a replacement rank would, replaying from what the buddy held, while the
//! other ranks keep running. When it cannot (its log lost entries), the body goes on to its
//! end, taking part in the group's synchronizations, and the CD escalates when it ends. Its
//! segment is filled only then: the emulated rank cannot stop the others' operations as a
//! real death does (the conduit's revoke), and a body that went on on a poisoned segment
//! could spin forever on a word it held (a lock's). What it computes in between is thrown
//! away with the re-execution of its group, as a dead rank's would be.
//!
//! Faults strike only where unwinding leaves nothing half done: in the innermost CD (a
//! relaxed CD with a CD nested inside it running counts nothing), outside rpc functions
//! (their operations run inside another rank's request), and before the operation is
//! logged or started.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use crate::error::FaultKinds;
use crate::frame::{CdKind, Frame};
use crate::injector::{Injected, OpFaults};
use crate::recovery;
use crate::relaxed::{cluster, fence, replica};
use crate::runtime::CdRuntime;

/// The payload a body unwinds with when its rank is lost at one of its operations.
pub(crate) struct MidBodyLoss;

/// Arms the operation faults of execution `attempt` of `frame` (`name`), if it has any.
pub(crate) fn arm(rt: &CdRuntime, frame: &Frame, name: &str, attempt: u32) {
    disarm(rt, frame);
    let plan = OpFaults::plan(
        &frame.settings.inject,
        rt.config.seed,
        rt.rank,
        name,
        frame.iteration,
        attempt,
    );
    if plan.is_none() || !frame.settings.logging {
        return;
    }
    let mut rx = frame.rx.borrow_mut();
    rx.op_faults = plan;
    rx.ops = 0;
    rt.relaxed
        .op_faults_armed
        .set(rt.relaxed.op_faults_armed.get() + 1);
}

/// The execution of `frame` ended: its operation faults strike no more.
pub(crate) fn disarm(rt: &CdRuntime, frame: &Frame) {
    if frame.rx.borrow_mut().op_faults.take().is_some() {
        rt.relaxed
            .op_faults_armed
            .set(rt.relaxed.op_faults_armed.get() - 1);
    }
}

/// A point-to-point operation of the innermost CD's body is about to be logged and sent in
/// forward mode: counts it, and makes the fault striking right before it happen.
pub(crate) fn count(rt: &CdRuntime) {
    if rt.relaxed.op_faults_armed.get() == 0 || pgas::runtime_hooks::serving_request().is_some() {
        return;
    }
    let frame = rt.top();
    if frame.kind != CdKind::Relaxed {
        return;
    }
    let hit = {
        let mut rx = frame.rx.borrow_mut();
        let op = rx.ops;
        let Some(plan) = rx.op_faults.as_ref() else {
            return;
        };
        let hit = plan.strike(op);
        rx.ops += 1;
        hit.map(|kind| (op, kind))
    };
    let Some((op, kind)) = hit else {
        return;
    };
    rt.stats
        .borrow_mut()
        .entry(&frame.name, frame.level)
        .injected += 1;
    let what = match kind {
        Injected::SoftError => "soft",
        Injected::RankLoss => "rank_loss",
    };
    crate::timeline::fault(&frame.name, frame.iteration, what);
    match (op, kind) {
        (op, Injected::SoftError) => frame.fail(
            FaultKinds::SOFT,
            format!("injected soft error on rank {} at operation {op}", rt.rank),
        ),
        (op, Injected::RankLoss) => {
            disarm(rt, &frame);
            // What the rank sent before the crash has landed (a crash does not call back
            // the bytes on the wire); what it had not sent never leaves.
            pgas::runtime_hooks::wait_for_acks();
            recovery::lose_memory_mid_body(rt);
            frame.rx.borrow_mut().lost_mid_body = true;
            frame.fail(
                FaultKinds::RANK_LOSS,
                format!(
                    "injected loss of rank {} at operation {op} of the body",
                    rt.rank
                ),
            );
            if replica::cannot_recover_alone(rt, &frame).is_some() || cluster::spans_others(rt) {
                // It escalates (a rank of an SPBC cluster never recovers alone): its group
                // re-executes, so, as after a loss detected at the end, the rank goes on with
                // the body and takes part in its synchronizations until the LCSA's agreement;
                // its segment is filled when the body ends (`run.rs`).
                fence::lower(rt);
                return;
            }
            recovery::poison_segment(rt, true);
            resume_unwind(Box::new(MidBodyLoss));
        }
    }
}

/// Runs a relaxed body: `None` if its rank was lost at one of its operations (the body
/// unwound from there); any other panic goes on unwinding.
pub(crate) fn run_body<R>(body: impl FnOnce() -> R) -> Option<R> {
    // Unwind safety: a body that unwinds with `MidBodyLoss` is abandoned with everything it
    // held, as a crashed rank's would be; the CD re-executes it from the preserved state.
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(out) => Some(out),
        Err(payload) if payload.is::<MidBodyLoss>() => None,
        Err(payload) => resume_unwind(payload),
    }
}
