//! `cd::relaxed`: begin, body, detect, complete — alone. On failure: recover by replay
//! (`replay.rs`), or escalate to the parent when the CD cannot recover alone.

use std::rc::Rc;
use std::time::Instant;

use pgas::GlobalPtr;

use crate::buddy::Bytes;
use crate::cd::Cd;
use crate::config::CdSettings;
use crate::error::{CdError, FaultKinds};
use crate::frame::{CdKind, Frame};
use crate::injector::Injected;
use crate::recovery;
use crate::relaxed::frame_state::Region;
use crate::relaxed::log_store::{EntryKind, LogEntry, TargetCounters};
use crate::relaxed::{cluster, durable, fence, logging, op_fault, replay, replica, shadow};
use crate::report::FailureRecord;
use crate::runtime::{self, CdRuntime};

/// A CD the program calls strict and the configuration makes relaxed (its `kind`): runs
/// `body` as a relaxed CD.
pub(crate) fn relaxed_as_configured<R>(
    name: &str,
    body: impl FnMut(&Cd) -> Result<R, CdError>,
) -> Result<R, CdError> {
    let rt = runtime::handle();
    let parent = rt.top();
    let settings = rt.settings(name, parent.level + 1);
    run(rt, parent, settings, name, body)
}

/// Runs `body` as a relaxed child CD of `parent`, the current CD, with the `settings` of
/// `name` at the level below it (the entry point, `entry.rs`, chose the kind).
pub(crate) fn run<R>(
    rt: Rc<CdRuntime>,
    parent: Rc<Frame>,
    settings: Rc<CdSettings>,
    name: &str,
    mut body: impl FnMut(&Cd) -> Result<R, CdError>,
) -> Result<R, CdError> {
    let level = parent.level + 1;
    // A cluster holding every rank of the team: a failure re-executes them all, so no log
    // could ever serve anyone.
    let settings = if settings.logging && cluster::holds_team(&rt, parent.team.members()) {
        Rc::new(CdSettings {
            logging: false,
            ..(*settings).clone()
        })
    } else {
        settings
    };
    let frame = {
        let id = parent.next_child_id(name);
        let iteration = rt.next_iteration(name);
        let mut f = Frame::new(
            name,
            level,
            id,
            iteration,
            parent.team.clone(),
            settings,
            rt.config.seed,
            rt.rank,
        );
        f.kind = CdKind::Relaxed;
        Rc::new(f)
    };
    rt.frames.borrow_mut().push(frame.clone());
    let logging = frame.settings.logging;
    enter(&rt, logging);
    if durable::durable(&frame) {
        rt.relaxed.durable.set(rt.relaxed.durable.get() + 1);
    }
    // Before the IWC this CD starts from is read: its replay window must be gapless.
    rt.count_incoming_writes();
    {
        let mut rx = frame.rx.borrow_mut();
        rx.ec_begin = pgas::runtime_hooks::epoch();
        rx.iwc_begin = pgas::runtime_hooks::incoming_writes();
    }
    let cd = Cd {
        frame: frame.clone(),
    };
    let mut attempt = 0u32;
    // The previous execution ended with this rank's memory lost (its segment with it).
    let mut after_loss = false;
    // ... in the middle of its body (`op_fault.rs`).
    let mut after_mid_body = false;
    // The recovery could not start after a loss in the middle of the body: why.
    let mut degraded: Option<String> = None;
    loop {
        frame.begin(attempt);
        let start = Instant::now();
        let injected = rt.fault_for(&frame, name, attempt);
        let recovery = (attempt > 0).then(|| crate::timeline::recovery(name, attempt));
        if attempt > 0 {
            // A preserved copy changed on disk is not restored: the CD escalates.
            if let Some(cause) = recovery::unreadable_files(&rt) {
                return escalate_replay(&rt, &frame, attempt, cause, logging);
            }
            if after_loss {
                if let Err(cause) = replay::rebuild_before_begin(&rt, &frame, |_| false) {
                    return escalate_replay(&rt, &frame, attempt, cause, logging);
                }
            }
            if let Err(cause) = replay::begin(&rt, &cd, after_loss) {
                rt.relaxed.finish_trace();
                if !after_mid_body {
                    return escalate_replay(&rt, &frame, attempt, cause, logging);
                }
                // Lost in the middle of its body, the rank has not taken part in the rest of
                // the body's synchronizations yet: it runs the body served from its log (no
                // incoming writes) to take part in them, and escalates when it ends.
                replay::begin_without_writes(&rt, &frame);
                degraded = Some(cause);
            }
        }
        drop(recovery);
        // The timeline's span of this execution; a re-execution's body is a replay of its log.
        let execution =
            crate::timeline::execution(name, level, frame.iteration, attempt, "relaxed");
        let replaying = (attempt > 0).then(|| crate::timeline::replay(name, attempt));
        op_fault::arm(&rt, &frame, name, attempt);
        frame.rx.borrow_mut().lost_mid_body = false;
        // `replay::end` lowers the fence; this covers a body that unwinds.
        let fence_guard = (attempt > 0).then_some(fence::LowerOnDrop);
        // `None`: the rank was lost at an operation of the body, which unwound from there.
        let ran = op_fault::run_body(|| body(&cd));
        op_fault::disarm(&rt, &frame);
        let lost_mid_body = ran.is_none();
        // Lost at an operation, the body went on to its end (the CD cannot recover alone):
        // the loss takes its segment now (`op_fault.rs`).
        let lost_and_went_on = !lost_mid_body && frame.rx.borrow().lost_mid_body;
        if lost_and_went_on {
            recovery::poison_segment(&rt, false);
        }
        let mut replay_errors = if attempt > 0 {
            replay::end(&rt)
        } else {
            Vec::new()
        };
        drop(fence_guard);
        drop(replaying);
        if lost_mid_body {
            // The abandoned execution's replay findings are moot: it is executed again.
            replay_errors.clear();
        }
        let out = ran.unwrap_or_else(|| {
            Err(CdError::Detected {
                cd: name.to_string(),
                reason: format!("rank {} was lost in the middle of the body", rt.rank),
            })
        });
        // Replicated when the body ends too: what the last flush point left (with
        // `log_durable = "end"`, everything), before an end-of-body loss strikes.
        if !lost_mid_body && !lost_and_went_on && replica::replicates(&frame) {
            replica::replicate(&rt, &frame, None);
        }
        let mut kinds = frame.state.borrow().failure;
        if !lost_mid_body {
            kinds = kinds.union(kinds_of(&out));
            kinds = kinds.union(recovery::take_effect(&rt, &frame, injected));
        }
        let own_loss = lost_mid_body || lost_and_went_on || injected == Some(Injected::RankLoss);
        {
            let mut stats = rt.stats.borrow_mut();
            let s = stats.entry(name, level);
            s.executions += 1;
            if injected.is_some() && !lost_mid_body {
                s.injected += 1;
            }
            if attempt > 0 {
                s.reexecutions += 1;
                s.recover_ns += start.elapsed().as_nanos() as u64;
                s.failures.push(FailureRecord {
                    iteration: frame.iteration,
                    attempt,
                    ranks: vec![rt.rank],
                    nodes: vec![pgas::node_of(rt.rank)],
                    recover_ns: start.elapsed().as_nanos() as u64,
                    limited: false,
                });
            }
        }
        drop(execution);
        if let Some(cause) = degraded.take() {
            return escalate_replay(&rt, &frame, attempt, cause, logging);
        }
        if !replay_errors.is_empty() {
            return escalate_replay(&rt, &frame, attempt, replay_errors.join("; "), logging);
        }
        // A replay or classification error of a child cannot be fixed by replaying again.
        if matches!(
            out,
            Err(CdError::Replay { .. } | CdError::Classification(_))
        ) {
            return finish(&rt, &frame, out, logging, false);
        }
        let class_errors = std::mem::take(&mut frame.rx.borrow_mut().class_errors);
        if let Some(e) = class_errors.into_iter().next() {
            let _escalation = crate::timeline::escalation(name, attempt, "a classification error");
            rt.stats.borrow_mut().entry(name, level).escalations += 1;
            return finish(
                &rt,
                &frame,
                Err(CdError::Classification(Box::new(e))),
                logging,
                false,
            );
        }
        if kinds.is_empty() {
            return finish(&rt, &frame, out, logging, true);
        }
        // Its memory lost, the rank has its logs back from the buddy (`lose_memory`) if this
        // CD replicated them; its preserved state restores in the replay.
        let loss = if own_loss {
            replica::cannot_recover_alone(&rt, &frame)
        } else {
            None
        };
        let why = if !frame.settings.contain.contains(kinds) {
            Some(format!("this CD is not configured to contain {kinds}"))
        } else if kinds.contains(FaultKinds::RANK_LOSS) && !own_loss {
            Some(
                "a relaxed CD cannot recover alone from a rank loss that a CD inside it escalated"
                    .to_string(),
            )
        } else if let Some((cause, state_lost)) = loss {
            if state_lost {
                kinds = kinds.union(FaultKinds::UNRESTORABLE);
            }
            Some(format!(
                "a relaxed CD cannot recover alone from the loss of its rank's memory: {cause}"
            ))
        } else if !logging && cluster::holds_team(&rt, frame.team.members()) {
            frame.rx.borrow_mut().for_cluster = true;
            Some(
                "its rank's SPBC cluster (`cluster`) holds every rank of the team, so nothing \
                 is logged and the whole team re-executes"
                    .to_string(),
            )
        } else if !logging {
            Some("logging is off for this CD, so it cannot replay".to_string())
        } else if cluster::spans_others(&rt) {
            frame.rx.borrow_mut().for_cluster = true;
            Some(
                "its rank's SPBC cluster (`cluster`) does not log the writes among its ranks, \
                 so the cluster re-executes with it"
                    .to_string(),
            )
        } else if attempt >= frame.settings.retries {
            Some(format!("{} retries exhausted", frame.settings.retries))
        } else {
            None
        };
        if let Some(why) = why {
            // Raised since a loss in the middle of the body (`fence::announce_loss`).
            fence::lower(&rt);
            let _escalation = crate::timeline::escalation(name, attempt, &why);
            rt.stats.borrow_mut().entry(name, level).escalations += 1;
            let mut reasons = frame.state.borrow().reasons.clone();
            if let Err(e) = &out {
                reasons.push(e.to_string());
            }
            let err = CdError::Escalated {
                cd: name.to_string(),
                level,
                kinds,
                attempts: attempt + 1,
                reason: format!("{why}; {} (rank {})", reasons.join("; "), rt.rank),
            };
            return finish(&rt, &frame, Err(err), logging, false);
        }
        after_loss = own_loss;
        after_mid_body = lost_mid_body;
        attempt += 1;
    }
}

fn kinds_of<R>(out: &Result<R, CdError>) -> FaultKinds {
    match out {
        Ok(_) => FaultKinds::NONE,
        Err(CdError::Detected { .. }) => FaultKinds::SOFT,
        Err(CdError::Escalated { kinds, .. }) => FaultKinds(kinds.0 & !FaultKinds::UNRESTORABLE.0),
        Err(CdError::Replay { .. } | CdError::Classification(_)) => FaultKinds::SOFT,
    }
}

fn escalate_replay<R>(
    rt: &CdRuntime,
    frame: &Rc<Frame>,
    attempt: u32,
    cause: String,
    logging: bool,
) -> Result<R, CdError> {
    let _escalation = crate::timeline::escalation(&frame.name, attempt, &cause);
    rt.stats
        .borrow_mut()
        .entry(&frame.name, frame.level)
        .escalations += 1;
    let err = CdError::Replay {
        cd: frame.name.clone(),
        rank: rt.rank,
        attempts: attempt + 1,
        reason: cause,
    };
    finish(rt, frame, Err(err), logging, false)
}

/// A relaxed CD begins on this rank: install the hook when the first logging one begins.
fn enter(rt: &CdRuntime, logging: bool) {
    rt.relaxed.depth.set(rt.relaxed.depth.get() + 1);
    if logging {
        rt.relaxed
            .logging_depth
            .set(rt.relaxed.logging_depth.get() + 1);
        rt.relaxed.acquire_hook();
    }
}

/// Ends the CD: on success its log goes to the parent; the frame leaves the stack, and the
/// hook goes when the last logging relaxed CD of the rank ends.
fn finish<R>(
    rt: &CdRuntime,
    frame: &Rc<Frame>,
    out: Result<R, CdError>,
    logging: bool,
    completed: bool,
) -> Result<R, CdError> {
    if logging {
        // Every entry is complete (acks in) before the store moves.
        pgas::runtime_hooks::wait_for_acks();
    }
    if completed && logging {
        let finals = log_privatized(rt, frame);
        shadow::complete(rt, frame, &finals);
    }
    {
        let logged = std::mem::take(&mut frame.rx.borrow_mut().logged);
        let mut stats = rt.stats.borrow_mut();
        let s = stats.entry(&frame.name, frame.level);
        s.entries_logged += logged.entries;
        s.bytes_logged += logged.bytes;
        s.log_ns += crate::clock::to_ns(logged.ticks);
    }
    shadow::close(rt, frame);
    rt.release_entries(frame);
    let popped = rt.frames.borrow_mut().pop();
    debug_assert!(popped.is_some_and(|f| Rc::ptr_eq(&f, frame)));
    let parent = rt.top();
    let (for_cluster, lost_mid_body) = {
        let mut rx = std::mem::take(&mut *frame.rx.borrow_mut());
        let mut prx = parent.rx.borrow_mut();
        // Pushed to the parent, not deleted: an escalation may re-execute a completed
        // sibling (seed 003, Figure 4). The log of a CD that escalates goes up too: its
        // operations happened, and a limited re-execution of the LCSA serves and squashes
        // the ones with ranks that do not re-execute. Its replicas at the buddy go with it
        // (the lost rank's later recovery fetches its completed siblings' logs back).
        let before = (prx.store.len(), prx.own_iwcs.len());
        prx.store.append(std::mem::take(&mut rx.store));
        prx.own_iwcs.append(&mut rx.own_iwcs);
        prx.cluster.writes.append(&mut rx.cluster.writes);
        let unused = replica::adopt(
            &mut prx,
            before,
            std::mem::take(&mut rx.replica),
            rx.log_lost.take(),
        );
        if completed {
            prx.private.append(&mut rx.private);
        }
        // Completed or not, the frees it deferred are deferred: a re-execution of the parent
        // frees those blocks again.
        prx.deferred.append(&mut rx.deferred);
        // The strict ancestor frees the deferred frees and deletes the logs.
        prx.had_relaxed = true;
        drop(prx);
        replica::forget(rt, unused);
        if let Some(limit) = frame.settings.log_spill_bytes {
            logging::spill(rt, &parent, limit);
        }
        (rx.for_cluster, rx.lost_mid_body)
    };
    // Mark the LCSA too; an escalation it sees came from a relaxed child (dependency
    // tracking limits its re-execution to the ranks that depend on this one).
    {
        let lcsa = rt.lcsa();
        let mut srx = lcsa.rx.borrow_mut();
        srx.had_relaxed = true;
        if for_cluster {
            srx.deps.cluster_child = true;
            srx.deps.cluster_loss_mid_body |= lost_mid_body;
        } else if !completed {
            srx.deps.escalated_child = true;
        }
    }
    rt.relaxed.depth.set(rt.relaxed.depth.get() - 1);
    if durable::durable(frame) {
        rt.relaxed.durable.set(rt.relaxed.durable.get() - 1);
    }
    if logging {
        rt.relaxed
            .logging_depth
            .set(rt.relaxed.logging_depth.get() - 1);
        rt.relaxed.release_hook();
    }
    out
}

/// Logs each privatized region once, at completion: its final bytes (from its shadow block in
/// a re-execution that has one) as one write to its owner (this rank) with the owner's
/// counters at this moment. Returns each region with those bytes, in declaration order.
fn log_privatized(rt: &CdRuntime, frame: &Frame) -> Vec<(Region, Vec<u8>)> {
    let regions = frame.rx.borrow().privatized.clone();
    let mut finals = Vec::with_capacity(regions.len());
    for r in regions {
        let mut bytes = vec![0u8; r.len];
        if GlobalPtr::<u8>::from_raw(rt.rank, shadow::bytes_at(frame, r.offset))
            .read_local_slice(&mut bytes)
            .is_err()
        {
            continue;
        }
        let e = LogEntry {
            lsn: rt.relaxed.next_lsn(),
            ec: pgas::runtime_hooks::epoch(),
            op: 0,
            request: None,
            kind: EntryKind::Privatized {
                offset: r.offset,
                bytes: Bytes(bytes.clone()),
                counters: TargetCounters {
                    ec: pgas::runtime_hooks::epoch(),
                    iwc: pgas::runtime_hooks::incoming_writes(),
                },
            },
        };
        let size = e.size() as u64;
        let mut rx = frame.rx.borrow_mut();
        rx.store.push(e);
        rx.logged.entries += 1;
        rx.logged.bytes += size;
        drop(rx);
        finals.push((r, bytes));
    }
    finals
}
