//! Strict Containment Domains: begin, body, detect, complete by agreement; on failure restore
//! and re-execute together; escalate when the failure is not this CD's to contain.
//!
//! Completion is an agreement among the ranks the CD spans: each rank contributes the set of
//! failures it saw (failed checks, body errors, injected faults, and whether it can restore
//! this CD's state), and one bitwise-or reduction over the CD's team gives every rank the same
//! set, hence the same decision: complete, re-execute, or escalate. Ranks outside the team
//! take no part and are not disturbed.

use std::rc::Rc;
use std::time::Instant;

use pgas::Team;

use crate::cd::Cd;
use crate::config::{CdKindSetting, CdSettings};
use crate::error::{CdError, FaultKinds};
use crate::frame::{Frame, restorable};
use crate::relaxed::dependencies::{Failure, Record, reexecution_set};
use crate::runtime::{self, CdRuntime};

/// Runs `body` as a strict child CD of the current CD, spanning the same ranks.
///
/// With `kind = "relaxed"` in the CD's configuration it runs as [`crate::relaxed()`] instead
/// (the rule is in [`crate::config`]).
pub fn strict<R>(name: &str, body: impl FnMut(&Cd) -> Result<R, CdError>) -> Result<R, CdError> {
    let (team, settings) = runtime::with(|rt| (rt.top().team.clone(), child_settings(rt, name)));
    if is_relaxed(&settings) {
        return crate::relaxed::run::relaxed_as_configured(name, body);
    }
    run(name, team, settings, body)
}

/// The settings of the CD `name` entered now as a child of the current CD: looked up once
/// per CD and handed to [`run`].
pub(crate) fn child_settings(rt: &CdRuntime, name: &str) -> Rc<CdSettings> {
    rt.settings(name, rt.top().level + 1)
}

/// True when `settings` give the CD `kind = "relaxed"`.
pub(crate) fn is_relaxed(settings: &CdSettings) -> bool {
    settings.kind == Some(CdKindSetting::Relaxed)
}

/// A CD the program calls relaxed and the configuration makes strict: spans the parent's
/// ranks.
pub(crate) fn strict_as_configured<R>(
    name: &str,
    body: impl FnMut(&Cd) -> Result<R, CdError>,
) -> Result<R, CdError> {
    let (team, settings) = runtime::with(|rt| (rt.top().team.clone(), child_settings(rt, name)));
    run(name, team, settings, body)
}

/// Runs `body` as a strict child CD spanning the ranks of `team` (which must include this
/// rank and be part of the parent's ranks).
///
/// With `kind = "relaxed"` in the CD's configuration it runs as [`crate::relaxed()`] instead,
/// and `team` is unused (a relaxed CD begins, completes and recovers on its own rank).
pub fn strict_on<R>(
    name: &str,
    team: &Team,
    body: impl FnMut(&Cd) -> Result<R, CdError>,
) -> Result<R, CdError> {
    let settings = runtime::with(|rt| child_settings(rt, name));
    if is_relaxed(&settings) {
        return crate::relaxed::run::relaxed_as_configured(name, body);
    }
    run(name, team.clone(), settings, body)
}

/// Runs `body` as a strict child CD of this rank alone (no agreement with other ranks).
///
/// With `kind = "relaxed"` in the CD's configuration it runs as [`crate::relaxed()`] instead.
pub fn strict_local<R>(
    name: &str,
    body: impl FnMut(&Cd) -> Result<R, CdError>,
) -> Result<R, CdError> {
    let settings = runtime::with(|rt| child_settings(rt, name));
    if is_relaxed(&settings) {
        return crate::relaxed::run::relaxed_as_configured(name, body);
    }
    run(name, pgas::solo_team(), settings, body)
}

/// The failure set a body's result contributes.
fn kinds_of<R>(out: &Result<R, CdError>) -> FaultKinds {
    match out {
        Ok(_) => FaultKinds::NONE,
        Err(CdError::Detected { .. }) => FaultKinds::SOFT,
        // The parent decides for itself whether it can restore its own state.
        Err(CdError::Escalated { kinds, .. }) => FaultKinds(kinds.0 & !FaultKinds::UNRESTORABLE.0),
        // A relaxed child that could not recover alone: the LCSA re-executes it with all.
        Err(CdError::Replay { .. } | CdError::Classification(_)) => FaultKinds::SOFT,
    }
}

fn reason_of<R>(out: &Result<R, CdError>, frame: &Frame) -> String {
    let mut reasons = frame.state.borrow().reasons.clone();
    if let Err(e) = out {
        reasons.push(e.to_string());
    }
    if reasons.is_empty() {
        "a rank of the CD failed".into()
    } else {
        reasons.join("; ")
    }
}

fn agree(team: &Team, kinds: FaultKinds) -> FaultKinds {
    agree_writing(team, kinds, false, false).0
}

/// The bit of the agreement's word above the fault kinds: the rank still writes the checkpoint
/// its process's writer was handed at an earlier completion (`checkpoint/commit.rs`).
const WRITING: u64 = 1 << 32;

/// The bit of the agreement's word that says the rank ran relaxed CDs inside this execution
/// (the strict CD is the LCSA of a relaxed group).
const RELAXED: u64 = 1 << 33;

/// The union of every rank's fault kinds, whether any rank still writes a checkpoint, and
/// whether any rank ran relaxed CDs inside the CD.
fn agree_writing(
    team: &Team,
    kinds: FaultKinds,
    writing: bool,
    relaxed: bool,
) -> (FaultKinds, bool, bool) {
    if team.rank_n() == 1 {
        return (kinds, writing, relaxed);
    }
    let mine =
        u64::from(kinds.0) | if writing { WRITING } else { 0 } | if relaxed { RELAXED } else { 0 };
    // On the world team this is one barrier of the core plus a read of every rank's word.
    // The CD runtime's own traffic: unseen by the program's hook, no EC steps.
    let all = pgas::runtime_hooks::internal(|| pgas::reduce_all_u64_on(team, mine, |a, b| a | b));
    (
        FaultKinds(all as u32),
        all & WRITING != 0,
        all & RELAXED != 0,
    )
}

/// The lowest rank of `team` that saw a failure itself, with its reasons (one collective,
/// made only when a CD escalates).
fn agree_reason(team: &Team, mine: Option<(usize, String)>) -> (Option<usize>, String) {
    let value = mine.map_or((u64::MAX, String::new()), |(r, s)| (r as u64, s));
    let (rank, reasons) = if team.rank_n() == 1 {
        value
    } else {
        pgas::runtime_hooks::internal(|| {
            pgas::reduce_all_on(
                team,
                value,
                |a: (u64, String), b: (u64, String)| {
                    if b.0 < a.0 { b } else { a }
                },
            )
            .wait()
        })
    };
    if rank == u64::MAX {
        (None, reasons)
    } else {
        (Some(rank as usize), reasons)
    }
}

/// Runs `body` as the strict CD `name` over `team`, with `settings` ([`child_settings`]).
pub(crate) fn run<R>(
    name: &str,
    team: Team,
    settings: Rc<CdSettings>,
    mut body: impl FnMut(&Cd) -> Result<R, CdError>,
) -> Result<R, CdError> {
    let rt = runtime::handle();
    assert!(
        rt.relaxed.depth.get() == 0,
        "strict CD {name:?} inside a relaxed CD: a relaxed CD's children must be relaxed \
         (its log would be deleted by the strict child's completion)"
    );
    if team.rank_n() > 1 {
        // Its agreements would wait for ranks a limited re-execution of the enclosing
        // tracking CD leaves out: that CD then re-executes its whole group.
        if let Some(f) = crate::relaxed::dependencies::tracking_frame(&rt) {
            f.rx.borrow_mut().deps.unlogged = true;
        }
    }
    let frame = {
        let rt = &rt;
        let parent = rt.top();
        let level = parent.level + 1;
        let id = parent.next_child_id(name);
        let iteration = rt.next_iteration(name);
        let frame = Rc::new(Frame::new(
            name,
            level,
            id,
            iteration,
            team,
            settings,
            rt.config.seed,
            rt.rank,
        ));
        rt.frames.borrow_mut().push(frame.clone());
        crate::checkpoint::commit::begin(rt, &frame);
        crate::real_loss::begin(&frame);
        frame
    };
    let cd = Cd {
        frame: frame.clone(),
    };
    // Tracking: notes kept from the begin (configured, or learned: an earlier instance held
    // relaxed CDs). An escalation is planned by every tracking-enabled CD whose agreement says
    // relaxed CDs ran, so all members decide alike; an execution that kept no notes then
    // says so and the whole group re-executes.
    let enabled = frame.settings.dependency_tracking != Some(false);
    let tracking = match frame.settings.dependency_tracking {
        Some(on) => on,
        None => rt
            .relaxed
            .groups
            .borrow()
            .get(&frame.level)
            .is_some_and(|names| names.contains(name)),
    };
    // D of a dependency-limited attempt (`None`: every rank of the CD executes), whether one
    // was tried, and the result of the execution a limited attempt keeps on the ranks
    // outside D.
    let mut limited: Option<Vec<usize>> = None;
    // On a rank of D: why D could not prepare (then nobody in D runs the body, and the
    // attempt fails, so that the next one is the whole group's).
    let mut unprepared: Option<String> = None;
    let mut limited_tried = false;
    let mut previous: Option<Result<R, CdError>> = None;
    // Time spent planning a limited attempt (allgather, preparation): part of its recovery.
    let mut planning_ns = 0u64;
    let mut attempt = 0u32;
    loop {
        let in_d = limited
            .as_ref()
            .is_none_or(|d| d.binary_search(&rt.rank).is_ok());
        let start = Instant::now();
        let ran = in_d && unprepared.is_none();
        // The timeline's span of an execution the report counts, through its agreement.
        let execution = ran.then(|| {
            crate::timeline::execution(name, frame.level, frame.iteration, attempt, "strict")
        });
        let (out, mut kinds, injected) = if let Some(why) = unprepared.take() {
            frame.begin(attempt);
            frame.fail(FaultKinds::SOFT, why);
            let out = previous
                .take()
                .expect("a limited attempt follows an execution of this rank");
            (out, FaultKinds::SOFT, None)
        } else if in_d {
            if attempt > 0 {
                let _recovery = crate::timeline::recovery(name, attempt);
                crate::recovery::rereplicate(&rt);
            }
            frame.begin(attempt);
            // Logs of relaxed children of a failed execution are of no use to the next one; the
            // frees they deferred are cancelled (the re-execution frees those blocks again).
            if attempt > 0 {
                if let Err(e) = frame.rx.borrow_mut().cancel_deferred(&[]) {
                    panic!("CD {name:?}: {e}");
                }
            }
            crate::relaxed::replica::clear(&rt, &frame);
            {
                let mut rx = frame.rx.borrow_mut();
                rx.tracked = tracking;
                if limited.is_none() {
                    if tracking {
                        // Its limited re-execution gathers the writes of a gapless window.
                        rt.count_incoming_writes();
                    }
                    // A limited attempt keeps the window of the execution it repeats.
                    rx.ec_begin = pgas::runtime_hooks::epoch();
                    rx.iwc_begin = pgas::runtime_hooks::incoming_writes();
                    rx.eager_restored.clear();
                }
            }
            if tracking {
                // The hook sees every operation, also outside relaxed children.
                rt.relaxed.acquire_hook();
                rt.relaxed.tracking.set(rt.relaxed.tracking.get() + 1);
            }
            if attempt > 0 && limited.is_none() {
                // The preserved cells of this rank's segment go back before any rank of the
                // CD re-executes: others write into them (a halo), and a write of a faster
                // rank's re-execution that landed before this rank's restore would be
                // overwritten with the old value. Every rank of the CD re-executes here, so
                // all meet at the barrier.
                cd.restore_globals_now();
                pgas::runtime_hooks::internal(|| pgas::barrier_on(&frame.team));
            }
            let injected = rt.fault_for(&frame, name, attempt);
            if limited.is_some() {
                crate::relaxed::limited::start(&rt);
            }
            let out = body(&cd);
            let mut kinds = frame.state.borrow().failure.union(kinds_of(&out));
            if limited.is_some() {
                let errors = crate::relaxed::limited::end(&rt, name, frame.level);
                if !errors.is_empty() {
                    frame.fail(FaultKinds::SOFT, errors.join("; "));
                    kinds = kinds.union(FaultKinds::SOFT);
                }
            }
            if tracking {
                rt.relaxed.tracking.set(rt.relaxed.tracking.get() - 1);
                rt.relaxed.release_hook();
            }
            kinds = kinds.union(crate::recovery::take_effect(&rt, &frame, injected));
            (out, kinds, injected)
        } else {
            // Outside D: this rank's execution stands; it waits at the agreement (and serves
            // the gathers of the ranks in D from progress meanwhile).
            let out = previous
                .take()
                .expect("a limited attempt follows an execution of this rank");
            (out, FaultKinds::NONE, None)
        };
        // Every rank says whether it could restore, failed or not: a rank that lost its memory
        // in an earlier, contained failure (a child's rank loss) has lost this CD's local copies
        // too, and must not be asked to re-execute because *another* rank failed now. (Checked
        // only on failing ranks, such a rank would panic on restoring a lost entry.)
        if !restorable(
            &rt.frames.borrow(),
            rt.frames.borrow().len() - 1,
            &rt.buddy,
            &rt.xor,
        ) {
            kinds = kinds.union(FaultKinds::UNRESTORABLE);
        }
        if frame.level == 1 {
            crate::injector::kill_at("agreement", rt.rank, frame.iteration);
        }
        let agreement = crate::timeline::agreement(name, attempt);
        let (mut agreed, writing, relaxed_ran) = agree_writing(
            &frame.team,
            kinds,
            crate::checkpoint::commit::still_writing(&rt, &frame),
            frame.rx.borrow().had_relaxed,
        );
        drop(agreement);
        if relaxed_ran && enabled {
            rt.relaxed
                .groups
                .borrow_mut()
                .entry(frame.level)
                .or_default()
                .insert(name.to_string());
        }
        if agreed.contains(FaultKinds::RANK_LOSS) && !agreed.contains(FaultKinds::UNRESTORABLE) {
            // A rank lost in this execution took the buddy copies it held for another rank,
            // which may have lost its own copies in this same execution. Each losing rank told
            // the owners before joining the agreement, so now every owner knows: ask again
            // (only after a rank loss), or that owner re-executes and cannot fetch its state.
            let lost = !restorable(
                &rt.frames.borrow(),
                rt.frames.borrow().len() - 1,
                &rt.buddy,
                &rt.xor,
            );
            if lost {
                kinds = kinds.union(FaultKinds::UNRESTORABLE);
            }
            agreed = agreed.union(agree(
                &frame.team,
                if lost {
                    FaultKinds::UNRESTORABLE
                } else {
                    FaultKinds::NONE
                },
            ));
        }
        if kinds.contains(FaultKinds::UNRESTORABLE) {
            // An xor entry two members of its group lost: the line that ends the run names the
            // group and both ranks.
            if let Some(why) = crate::xor_entries::loss_reason(&rt.xor_context(), &frame) {
                frame.state.borrow_mut().reasons.push(why);
            }
            if let Some(why) = crate::recovery::buddy_loss_reason(&rt, &frame) {
                frame.state.borrow_mut().reasons.push(why);
            }
        }
        if ran {
            let mut stats = rt.stats.borrow_mut();
            let s = stats.entry(name, frame.level);
            s.executions += 1;
            if injected.is_some() {
                s.injected += 1;
            }
            if attempt > 0 {
                let ns = start.elapsed().as_nanos() as u64 + std::mem::take(&mut planning_ns);
                s.reexecutions += 1;
                s.recover_ns += ns;
                s.failures.push(crate::report::FailureRecord {
                    iteration: frame.iteration,
                    attempt,
                    ranks: vec![rt.rank],
                    nodes: vec![pgas::node_of(rt.rank)],
                    recover_ns: ns,
                    limited: limited.is_some(),
                });
            }
        }
        drop(execution);
        // Lost copies alone are no failure of this execution: complete.
        if FaultKinds(agreed.0 & !FaultKinds::UNRESTORABLE.0).is_empty() {
            crate::real_loss::completed(&rt, &frame);
            crate::checkpoint::commit::completed(&rt, &frame, writing);
            return finish(&rt, &frame, out);
        }
        let contained = frame
            .settings
            .contain
            .contains(FaultKinds(agreed.0 & !FaultKinds::UNRESTORABLE.0));
        let mut why = if agreed.contains(FaultKinds::UNRESTORABLE) {
            Some("a rank lost the state this CD preserved (kept in its own memory)".to_string())
        } else if !contained {
            Some(format!("this CD is not configured to contain {agreed}"))
        } else if attempt >= frame.settings.retries + u32::from(limited_tried) {
            // A dependency-limited attempt spends no retry: when it fails (or D cannot
            // prepare it), the whole group's attempt follows as if it had not been tried.
            Some(format!("{} retries exhausted", frame.settings.retries))
        } else {
            None
        };
        // About to re-execute: the files it would restore from are read back first, so that
        // one changed on disk escalates as a lost copy does instead of being restored. `why` is
        // agreed, so every rank of the CD makes this agreement or none does.
        let mut unreadable = None;
        let mut files_lost = false;
        if why.is_none() && rt.config.keeps_files() {
            unreadable = crate::recovery::unreadable_files(&rt);
            if unreadable.is_some() {
                kinds = kinds.union(FaultKinds::UNRESTORABLE);
            }
            let lost = agree(
                &frame.team,
                if unreadable.is_some() {
                    FaultKinds::UNRESTORABLE
                } else {
                    FaultKinds::NONE
                },
            );
            if lost.contains(FaultKinds::UNRESTORABLE) {
                files_lost = true;
                agreed = agreed.union(FaultKinds::UNRESTORABLE);
                why = Some("a rank cannot restore the state this CD preserved in files".into());
            }
        }
        if let Some(why) = why {
            let _escalation = crate::timeline::escalation(name, attempt, &why);
            rt.stats.borrow_mut().entry(name, frame.level).escalations += 1;
            // Every rank of the CD gives the same reason (that of the lowest rank that saw a
            // failure itself), so the one line that ends the run names the rank and cause
            // whichever rank's error reaches the top first.
            // A child's escalation reached every rank alike: not this rank's own failure.
            let own = !frame.state.borrow().failure.is_empty()
                || kinds.contains(FaultKinds::UNRESTORABLE)
                || matches!(out, Err(ref e) if !matches!(e, CdError::Escalated { .. }));
            // A file that failed its check is the cause to name, whichever rank failed first.
            let mine = if files_lost {
                unreadable.map(|why| (rt.rank, why))
            } else {
                own.then(|| (rt.rank, reason_of(&out, &frame)))
            };
            let (first, reasons) = agree_reason(&frame.team, mine);
            let reason = match first {
                Some(r) => format!("{why}; on rank {r}: {reasons}"),
                None => format!("{why}; {}", reason_of(&out, &frame)),
            };
            return finish(
                &rt,
                &frame,
                Err(CdError::Escalated {
                    cd: name.to_string(),
                    level: frame.level,
                    kinds: agreed,
                    attempts: attempt + 1,
                    reason,
                }),
            );
        }
        limited = None;
        if enabled && relaxed_ran && !limited_tried {
            limited_tried = true;
            let (escalated, for_cluster, mid_body) = {
                let rx = frame.rx.borrow();
                let d = &rx.deps;
                (d.escalated_child, d.cluster_child, d.cluster_loss_mid_body)
            };
            let child_only = (escalated || for_cluster)
                && frame.state.borrow().failure.is_empty()
                && injected.is_none()
                && !kinds.contains(FaultKinds::UNRESTORABLE)
                && !matches!(out, Err(CdError::Detected { .. }));
            let relaxed_only = child_only && !kinds.contains(FaultKinds::RANK_LOSS);
            // A loss inside a relaxed child that escalated: the strict CD's own state survived
            // (else `restorable` made it UNRESTORABLE above), so only the child's log is gone.
            let lost_in_child = child_only && escalated && kinds.contains(FaultKinds::RANK_LOSS);
            // A loss at the end of a child's body that it could recover from alone but for
            // its cluster (its whole log came back): the cluster re-executes.
            let lost_for_cluster =
                child_only && !escalated && !mid_body && kinds.contains(FaultKinds::RANK_LOSS);
            let failure = if kinds.is_empty() {
                Failure::None
            } else if lost_in_child {
                Failure::RankLoss
            } else if lost_for_cluster {
                Failure::ClusterLoss
            } else if relaxed_only && escalated {
                Failure::RelaxedEscalation
            } else if relaxed_only {
                Failure::Cluster
            } else {
                Failure::Other
            };
            let planning = Instant::now();
            let recovery = crate::timeline::recovery(name, attempt + 1);
            let planned = plan_limited(&rt, &cd, failure, tracking);
            drop(recovery);
            planning_ns = planning.elapsed().as_nanos() as u64;
            if let Some((d, prepared)) = planned {
                limited = Some(d);
                unprepared = prepared.err();
                previous = Some(out);
            }
        }
        attempt += 1;
    }
}

/// After an escalation from relaxed children: every rank of the CD gives its dependency
/// notes (one allgather), all compute the same D, and the ranks in D prepare (restore, gather
/// the incoming writes) and agree among themselves that every preparation succeeded. `None`:
/// the whole group re-executes (every rank computed the same reason, in the report's trace of
/// why). Else D, and on a rank of D whether D prepared (`Err`: why not; no rank of D then runs
/// the body, and the attempt's failure makes the next one the whole group's).
///
/// The ranks outside D do not wait for D's preparation: they go on to the attempt's
/// agreement, which they would join anyway, and serve the gathers from there. (An agreement
/// of all ranks after the preparation cost as much as the allgather: one round over every
/// rank of the CD, for news that only D needs before the body.)
fn plan_limited(
    rt: &CdRuntime,
    cd: &Cd,
    failure: Failure,
    tracked: bool,
) -> Option<(Vec<usize>, Result<(), String>)> {
    let frame = &cd.frame;
    let record = {
        let rx = frame.rx.borrow();
        Record {
            rank: rt.rank,
            failure,
            reads_from: rx.deps.reads_from.iter().copied().collect(),
            writes_to: rx.deps.writes_to.iter().copied().collect(),
            unlogged: rx.deps.unlogged,
            notes_lost: rx.deps.notes_lost,
            log_lost: rx.log_lost.is_some(),
            log_served: rx.deps.log_served,
            untracked: !tracked,
            extents: rx.deps.extents.clone(),
        }
    };
    let records: Vec<Record> =
        pgas::runtime_hooks::internal(|| pgas::allgather_on(&frame.team, record).wait());
    let d = match reexecution_set(&records, frame.team.members(), pgas::node_of, |r| {
        rt.config.cluster.of(r)
    }) {
        Ok(d) => d,
        Err(why) => {
            if frame.team.rank_me() == 0 {
                rt.stats
                    .borrow_mut()
                    .entry(&frame.name, frame.level)
                    .whole_group
                    .push(format!("#{}: {why}", frame.iteration));
            }
            return None;
        }
    };
    if d.binary_search(&rt.rank).is_err() {
        return Some((d, Ok(())));
    }
    let writers: Vec<usize> = records
        .iter()
        .filter(|r| r.writes_to.contains(&rt.rank))
        .map(|r| r.rank)
        .collect();
    let ranks = |f: fn(&Record) -> bool| records.iter().filter(|r| f(r)).map(|r| r.rank).collect();
    let losses = crate::relaxed::limited::Losses {
        logs: ranks(|r| r.log_lost),
        cluster_memory: ranks(|r| r.failure == Failure::ClusterLoss),
    };
    let accesses = crate::relaxed::phases::accesses_into(rt.rank, &records, &d);
    let prepared =
        crate::relaxed::limited::prepare(rt, cd, d.clone(), &writers, &losses, &accesses);
    let all = crate::relaxed::limited::agree_prepared(rt, &d, prepared.is_ok());
    if all {
        return Some((d, Ok(())));
    }
    crate::relaxed::limited::abandon(rt);
    let why = match prepared {
        Err(e) => {
            let why = format!("rank {}: {e}", rt.rank);
            rt.stats
                .borrow_mut()
                .entry(&frame.name, frame.level)
                .whole_group
                .push(format!("#{}: {why}", frame.iteration));
            why
        }
        Ok(()) => "another rank of the limited re-execution could not prepare".to_string(),
    };
    Some((
        d,
        Err(format!(
            "the dependency-limited re-execution could not be prepared ({why}); the whole \
             group re-executes"
        )),
    ))
}

fn finish<R>(rt: &CdRuntime, frame: &Frame, out: Result<R, CdError>) -> Result<R, CdError> {
    rt.release_entries(frame);
    end_relaxed_group(rt, frame);
    let popped = rt.frames.borrow_mut().pop();
    debug_assert!(popped.is_some_and(|f| std::ptr::eq(&*f, frame)));
    out
}

/// A strict CD completes (or gives up): every communication of the relaxed CDs inside it is
/// contained, so their logs go (with their replicas at the buddy), and the frees they
/// deferred take effect.
pub(crate) fn end_relaxed_group(rt: &CdRuntime, frame: &Frame) {
    if !frame.rx.borrow().had_relaxed {
        return;
    }
    crate::relaxed::replica::clear(rt, frame);
    frame.rx.borrow_mut().had_relaxed = false;
    for offset in pgas::runtime_hooks::deferred_frees() {
        pgas::runtime_hooks::free_deferred(offset)
            .unwrap_or_else(|e| panic!("CD {:?}: a deferred free failed: {e}", frame.name));
    }
}
