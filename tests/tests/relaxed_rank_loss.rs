//! Rank loss under relaxed CDs: with `log_medium = "buddy"` the lost rank fetches its logs
//! back from its buddy and recovers alone; with `"local"` the loss escalates and the strict
//! LCSA re-executes its whole group (dependency tracking cannot help: the lost rank's notes
//! went with its memory). Every run gives the bits of the run without CDs.
//!
//! The program is a halo exchange on a 4 x 2 grid of 8 ranks (no wrap-around): along an axis a
//! rank either *pulls* its neighbours' values (rget) or *pushes* its values into their inboxes
//! (rput). A strict CD `step` per time step holds, per rank, one relaxed CD `cell` per
//! sub-step (so the cells of earlier sub-steps are completed siblings when a later one fails),
//! or, on one chosen rank, one relaxed CD `span` around all the sub-steps of the step. Every
//! relaxed CD preserves the rank's values with `preserve_global`; the inboxes are consumed
//! and zeroed by each sub-step, so a loss's fill pattern never reaches the answer.
//!
//! Also under `mpirun -n 8` (`cd-runtime/tests/mpirun-relaxed.sh`): the lost rank fetches its
//! logs from a buddy in another process; each process checks its own rank's results.

use std::cell::RefCell;

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdError, FailureRecord};
use gasnet_bridge::LaunchConfig;
use pgas::{GlobalPtr, RankResults, barrier, rank_me, rget};

const DIMS: [usize; 2] = [4, 2];
const RANKS: usize = DIMS[0] * DIMS[1];
/// Values per rank.
const K: usize = 4;
const STEPS: usize = 3;
const SUBS: usize = 3;
const M: f64 = 1_000_003.0;

/// Per axis: true = pull (rget), false = push (rput).
type Pattern = [bool; 2];

const PULL: Pattern = [true, true];
const PUSH: Pattern = [false, false];
/// Push along x, pull along y.
const MIXED: Pattern = [false, true];

fn coords(r: usize) -> [usize; 2] {
    [r % DIMS[0], r / DIMS[0]]
}

fn rank_at(c: [usize; 2]) -> usize {
    c[0] + DIMS[0] * c[1]
}

fn neighbours(r: usize, axis: usize) -> Vec<usize> {
    let c = coords(r);
    let mut out = Vec::new();
    if c[axis] > 0 {
        let mut d = c;
        d[axis] -= 1;
        out.push(rank_at(d));
    }
    if c[axis] + 1 < DIMS[axis] {
        let mut d = c;
        d[axis] += 1;
        out.push(rank_at(d));
    }
    out
}

fn pulls_from(p: Pattern, r: usize) -> Vec<usize> {
    (0..2)
        .filter(|&a| p[a])
        .flat_map(|a| neighbours(r, a))
        .collect()
}

fn pushes_to(p: Pattern, r: usize) -> Vec<usize> {
    (0..2)
        .filter(|&a| !p[a])
        .flat_map(|a| neighbours(r, a))
        .collect()
}

/// The inbox slot rank `from` writes into at rank `to` (4 directions).
fn slot(from: usize, to: usize) -> usize {
    let (a, b) = (coords(from), coords(to));
    let axis = usize::from(a[0] == b[0]);
    2 * axis + usize::from(a[axis] > b[axis])
}

struct Arrays {
    cur: Vec<GlobalPtr<f64>>,
    inbox: Vec<GlobalPtr<f64>>,
}

/// One sub-step: a barrier, the pushes, the pulls, a barrier, the inboxes read (and zeroed),
/// the update.
fn sub_body(p: Pattern, arr: &Arrays, step: usize, sub: usize) {
    let me = rank_me();
    let cur = arr.cur[me];
    let mut v = vec![0.0; K];
    cur.read_local_slice(&mut v).unwrap();
    barrier();
    for t in pushes_to(p, me) {
        pgas::rput_slice(&v, arr.inbox[t] + slot(me, t) * K).wait();
    }
    let mut acc = [0.0; K];
    for s in pulls_from(p, me) {
        for (i, a) in acc.iter_mut().enumerate() {
            *a += rget(arr.cur[s] + i).wait() * (1.0 + s as f64);
        }
    }
    barrier();
    for w in 0..RANKS {
        if pushes_to(p, w).contains(&me) {
            let mut x = [0.0; K];
            (arr.inbox[me] + slot(w, me) * K)
                .read_local_slice(&mut x)
                .unwrap();
            for (a, x) in acc.iter_mut().zip(x) {
                *a += x * (2.0 + w as f64);
            }
        }
    }
    arr.inbox[me].write_local_slice(&[0.0; 4 * K]).unwrap();
    let next: Vec<f64> = (0..K)
        .map(|i| (3.0 * v[i] + acc[i] + ((step * SUBS + sub) * K + i) as f64) % M)
        .collect();
    cur.write_local_slice(&next).unwrap();
}

/// A relaxed CD that returns a detected error at the end of its first `executions`
/// executions: (rank, step, sub-step (ignored for `span`), executions).
type Fail = (usize, usize, usize, u32);

#[derive(Clone, Default)]
struct Plan {
    pattern: Pattern,
    /// The rank that runs one relaxed CD `span` per step instead of a `cell` per sub-step.
    span: Option<usize>,
    fail: Vec<Fail>,
}

struct Out {
    bits: Vec<u64>,
    /// The errors this rank's relaxed CDs escalated with.
    escalated: Vec<String>,
    traces: Vec<cd::relaxed::RecoveryTrace>,
}

fn program(plan: &Plan, cds: bool) -> Result<Out, CdError> {
    let me = rank_me();
    let p = plan.pattern;
    let cur = pgas::new_array::<f64>(K).unwrap();
    let inbox = pgas::new_array::<f64>(4 * K).unwrap();
    let init: Vec<f64> = (0..K).map(|i| (me * 10 + i) as f64).collect();
    cur.write_local_slice(&init).unwrap();
    let arr = Arrays {
        cur: pgas::allgather(cur).wait(),
        inbox: pgas::allgather(inbox).wait(),
    };
    let left = RefCell::new(
        plan.fail
            .iter()
            .filter(|f| f.0 == me)
            .map(|f| (f.1, f.2, f.3))
            .collect::<Vec<_>>(),
    );
    // Fails the relaxed CD of (step, sub) if the plan says so for this execution.
    let fails = |step: usize, sub: usize| -> Result<(), CdError> {
        let mut left = left.borrow_mut();
        match left
            .iter_mut()
            .find(|l| l.0 == step && l.1 == sub && l.2 > 0)
        {
            Some(l) => {
                l.2 -= 1;
                Err(CdError::detected("injected at the end of the relaxed CD"))
            }
            None => Ok(()),
        }
    };
    let escalated = RefCell::new(Vec::new());
    let note = |r: Result<(), CdError>| {
        if let Err(e) = &r {
            escalated.borrow_mut().push(e.to_string());
        }
        r
    };
    for step in 0..STEPS {
        if !cds {
            for sub in 0..SUBS {
                sub_body(p, &arr, step, sub);
            }
            barrier();
            continue;
        }
        cd::strict("step", |s| {
            s.preserve_global("cur", cur, K);
            if plan.span == Some(me) {
                note(cd::relaxed("span", |c| {
                    c.preserve_global("cur", cur, K);
                    for sub in 0..SUBS {
                        sub_body(p, &arr, step, sub);
                    }
                    // Inside `span`, so its end (where its failure is detected and its
                    // replay gathers) comes after every other rank's last `cell`.
                    barrier();
                    fails(step, 0)
                }))?;
            } else {
                // A cell that escalates returns at its end; the rank still takes part in the
                // step's other sub-steps and barrier (the step then re-executes).
                let mut first = Ok(());
                for sub in 0..SUBS {
                    let r = note(cd::relaxed("cell", |c| {
                        c.preserve_global("cur", cur, K);
                        sub_body(p, &arr, step, sub);
                        fails(step, sub)
                    }));
                    first = first.and(r);
                }
                barrier();
                first?;
            }
            Ok(())
        })?;
    }
    let mut v = vec![0.0; K];
    cur.read_local_slice(&mut v).unwrap();
    Ok(Out {
        bits: v.iter().map(|x| x.to_bits()).collect(),
        escalated: escalated.into_inner(),
        traces: if cds {
            cd::relaxed::recoveries()
        } else {
            Vec::new()
        },
    })
}

fn job() -> LaunchConfig {
    LaunchConfig::new(RANKS)
        .segment_bytes(1 << 20)
        .ranks_per_node(1)
}

/// The bits of the ranks this process ran, without CDs.
fn reference(plan: &Plan) -> RankResults<Vec<u64>> {
    let plan = plan.clone();
    pgas::launch(&job(), pgas::RpcTable::new(), move || {
        program(&plan, false).unwrap().bits
    })
    .unwrap()
}

/// A rank loss at the end of instance `iteration` of `cell` on `rank`.
fn loss(rank: usize, iteration: usize) -> String {
    format!("{{ rank = {rank}, iteration = {iteration}, kind = \"rank_loss\" }}")
}

/// The instance of `cell` on a rank with a cell per sub-step.
fn cell_instance(step: usize, sub: usize) -> usize {
    step * SUBS + sub
}

/// `log_medium` of the relaxed CDs, `medium` of all CDs, tracking at `step`, and the losses
/// injected into `cell` (the relaxed tables are `[level.2]`, which `cell` and `span` share).
fn config(log_medium: &str, medium: &str, tracking: bool, losses: &[String]) -> CdConfig {
    let text = format!(
        "[cd.step]\nmedium = \"{medium}\"\ndependency_tracking = {tracking}\nretries = 2\n\
         [level.2]\nmedium = \"{medium}\"\nlog_medium = \"{log_medium}\"\nretries = 1\n\
         check_classes = false\n\
         [cd.cell]\ninject = {{ at = [{}] }}\n",
        losses.join(", ")
    );
    CdConfig::parse(&text, "loss.toml").unwrap()
}

fn run(plan: &Plan, cfg: CdConfig, want: &RankResults<Vec<u64>>, what: &str) -> cd::CdOutcome<Out> {
    let p = plan.clone();
    let out = cd::launch(&job(), cfg, pgas::RpcTable::new(), move || {
        program(&p, true)
    })
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    for (r, o) in out.results.with_ranks() {
        assert_eq!(
            Some(&o.bits),
            want.get(r),
            "{what}: rank {r} differs from the run without CDs"
        );
    }
    out
}

fn one_rank(iteration: usize, rank: usize) -> FailureRecord {
    FailureRecord {
        iteration: iteration as u64,
        attempt: 1,
        ranks: vec![rank],
        nodes: vec![rank],
        recover_ns: 0,
        limited: false,
    }
}

/// The failure records without their times.
fn records(stats: &cd::CdStats) -> Vec<FailureRecord> {
    stats
        .failures
        .iter()
        .map(|f| FailureRecord {
            recover_ns: 0,
            ..f.clone()
        })
        .collect()
}

/// With the log replicated at the buddy, the lost rank recovers alone: one relaxed
/// re-execution on that rank, no escalation, the step not re-executed; with the log local
/// (and dependency tracking), the loss escalates and every rank re-executes the step.
fn loss_in_a_cell(pattern: Pattern, rank: usize) {
    let plan = Plan {
        pattern,
        ..Plan::default()
    };
    let want = reference(&plan);
    let at = cell_instance(1, 1);
    let what = format!("{pattern:?}, loss of rank {rank} in cell #{at}");

    let out = run(
        &plan,
        config("buddy", "buddy", true, &[loss(rank, at)]),
        &want,
        &format!("{what}, log_medium = buddy"),
    );
    let cell = out.report.cd("cell").unwrap();
    let step = out.report.cd("step").unwrap();
    assert_eq!(
        (cell.reexecutions, cell.escalations, cell.injected),
        (1, 0, 1),
        "{what}"
    );
    assert_eq!(records(cell), vec![one_rank(at, rank)], "{what}");
    assert_eq!(
        (step.reexecutions, step.escalations),
        (0, 0),
        "{what}: the strict parent is not re-executed"
    );
    assert!(step.failures.is_empty(), "{what}: {:?}", step.failures);
    // Every rank's cells replicate their logs; the lost rank's replica brought its log back.
    // Each entry goes once (postcard, smaller than the report's estimate of logged bytes):
    // about 130 to 180 B per cell instance here.
    assert!(
        cell.bytes_replicated > 0 && cell.bytes_replicated < cell.bytes_logged,
        "{what}: {} B replicated, {} B logged",
        cell.bytes_replicated,
        cell.bytes_logged
    );
    assert!(cell.entries_replayed + cell.writes_squashed > 0, "{what}");
    for (r, o) in out.results.with_ranks() {
        assert_eq!(o.traces.len(), usize::from(r == rank), "{what}: rank {r}");
        assert!(
            o.escalated.is_empty(),
            "{what}: rank {r}: {:?}",
            o.escalated
        );
    }
    // Writes pushed into the lost rank during the cell were replayed from their initiators'
    // logs onto its restored values.
    // Under mpirun each process checks the ranks it ran; the report is the job's everywhere.
    if let Some(o) = out.results.get(rank) {
        let t = &o.traces[0];
        let incoming = t
            .events
            .iter()
            .filter(|e| matches!(e, cd::relaxed::ReplayEvent::Incoming { .. }))
            .count();
        let pushers = (0..RANKS)
            .filter(|&w| pushes_to(pattern, w).contains(&rank))
            .count();
        assert_eq!(incoming, pushers, "{what}: {:?}", t.events);
    }

    let out = run(
        &plan,
        config("local", "buddy", true, &[loss(rank, at)]),
        &want,
        &format!("{what}, log_medium = local"),
    );
    let cell = out.report.cd("cell").unwrap();
    let step = out.report.cd("step").unwrap();
    assert_eq!((cell.reexecutions, cell.escalations), (0, 1), "{what}");
    assert_eq!(cell.bytes_replicated, 0, "{what}");
    limited_to_dependents(step, rank, &what);
    if let Some(o) = out.results.get(rank) {
        let escalated = &o.escalated;
        assert_eq!(escalated.len(), 1, "{what}: {escalated:?}");
        assert!(
            escalated[0].contains("cannot recover alone from the loss of its rank's memory")
                && escalated[0].contains("log_medium = \"local\""),
            "{what}: {escalated:?}"
        );
    }
}

/// The loss of `rank`'s log (it escalated its cell) re-executed `step` once, limited to the
/// ranks that depend on it (`tests/tests/dependency_tracking.rs` checks which): its dependency
/// notes reached the buddy whenever they grew, since `step` keeps its state there.
fn limited_to_dependents(step: &cd::CdStats, rank: usize, what: &str) {
    assert_eq!(step.failures.len(), 1, "{what}: {:?}", step.whole_group);
    let f = &step.failures[0];
    assert!(f.limited, "{what}: {:?}", step.whole_group);
    assert!(
        f.ranks.contains(&rank) && f.ranks.len() < RANKS,
        "{what}: {f:?}"
    );
    assert_eq!(step.reexecutions, f.ranks.len() as u64, "{what}");
}

#[test]
fn a_lost_rank_recovers_alone_with_buddy_logs_push() {
    // An interior rank (pushes from three neighbours) and a corner.
    loss_in_a_cell(PUSH, 1);
    loss_in_a_cell(PUSH, 7);
}

#[test]
fn a_lost_rank_recovers_alone_with_buddy_logs_pull() {
    loss_in_a_cell(PULL, 2);
}

#[test]
fn a_lost_rank_recovers_alone_with_buddy_logs_mixed() {
    loss_in_a_cell(MIXED, 5);
}

/// Rank 1 loses its memory at the end of its last cell of step 1 (its two earlier cells of
/// the step are completed siblings, their logs pushed into `step`); rank 2, which rank 1
/// pushes into, runs one relaxed CD `span` over the whole step and fails at its end, after
/// rank 1's loss: its replay gathers rank 1's writes of all three sub-steps, two of them
/// from the logs of rank 1's completed cells, which rank 1 fetched back from its buddy.
#[test]
fn a_replay_after_a_loss_gets_the_lost_ranks_writes_from_completed_siblings() {
    let (lost, span) = (1, 2);
    let plan = Plan {
        pattern: MIXED,
        span: Some(span),
        fail: vec![(span, 1, 0, 1)],
    };
    assert!(pushes_to(MIXED, lost).contains(&span));
    let want = reference(&plan);
    let at = cell_instance(1, SUBS - 1);
    let what = "loss of rank 1, then a replay of rank 2's span";
    let out = run(
        &plan,
        config("buddy", "buddy", false, &[loss(lost, at)]),
        &want,
        what,
    );
    let cell = out.report.cd("cell").unwrap();
    let span_stats = out.report.cd("span").unwrap();
    let step = out.report.cd("step").unwrap();
    assert_eq!(records(cell), vec![one_rank(at, lost)], "{what}");
    assert_eq!(records(span_stats), vec![one_rank(1, span)], "{what}");
    assert_eq!(
        (cell.escalations, span_stats.escalations, step.reexecutions),
        (0, 0, 0),
        "{what}"
    );
    if let Some(o) = out.results.get(span) {
        let t = &o.traces[0];
        let from_lost: Vec<u64> = t
            .events
            .iter()
            .filter_map(|e| match e {
                cd::relaxed::ReplayEvent::Incoming { from, iwc, .. } if *from == lost => Some(*iwc),
                _ => None,
            })
            .collect();
        assert_eq!(
            from_lost.len(),
            SUBS,
            "{what}: one push per sub-step from rank {lost}: {:?}",
            t.events
        );
        assert!(
            o.traces
                .iter()
                .all(|t| t.cd == "span" && t.asked.contains(&lost)),
            "{what}"
        );
    }

    // Without replicas of the cells' logs, rank 1's loss takes its write logs: its cell
    // escalates, and rank 2's replay cannot find rank 1's writes (a gap), so it escalates
    // too; the step re-executes every rank, with the same bits.
    let text = format!(
        "[cd.step]\nmedium = \"buddy\"\n[level.2]\nmedium = \"buddy\"\nlog_medium = \"buddy\"\n\
         retries = 1\ncheck_classes = false\n[cd.cell]\nlog_medium = \"local\"\n\
         inject = {{ at = [{}] }}\n",
        loss(lost, at)
    );
    let what = "the same with the cells' logs local";
    let out = run(
        &plan,
        CdConfig::parse(&text, "loss.toml").unwrap(),
        &want,
        what,
    );
    let span_stats = out.report.cd("span").unwrap();
    let step = out.report.cd("step").unwrap();
    assert_eq!(out.report.cd("cell").unwrap().escalations, 1, "{what}");
    assert_eq!(span_stats.escalations, 1, "{what}");
    assert_eq!(step.reexecutions, RANKS as u64, "{what}");
    if let Some(o) = out.results.get(span) {
        let escalated = &o.escalated;
        assert!(
            escalated.len() == 1
                && escalated[0].contains("cannot recover by replay")
                && escalated[0].contains("was not found in any initiator's log"),
            "{what}: {escalated:?}"
        );
    }
}

/// Rank 3 (rank 2's buddy) loses its memory at the end of its cell of sub-step 1, taking the
/// replica of rank 2's log of sub-step 0; rank 2 loses its own at the end of sub-step 2: its
/// log cannot be made whole, so its cell escalates (with the reason) and the step
/// re-executes. Its dependency notes reached the buddy again after the buddy's loss (they grow
/// at every barrier phase), so the re-execution is limited to the ranks that depend on rank 2,
/// grown by those it wrote into (its log is lost). Preserved state is in files here, so only
/// the log's replica is missing. No hang, the same bits.
#[test]
fn a_loss_whose_log_replica_the_buddy_lost_escalates_cleanly() {
    let (lost, buddy) = (2, 3);
    let plan = Plan {
        pattern: MIXED,
        ..Plan::default()
    };
    let want = reference(&plan);
    let what = "losses of rank 3 then rank 2";
    let out = run(
        &plan,
        config(
            "buddy",
            "file",
            true,
            &[
                loss(buddy, cell_instance(1, 1)),
                loss(lost, cell_instance(1, 2)),
            ],
        ),
        &want,
        what,
    );
    let cell = out.report.cd("cell").unwrap();
    let step = out.report.cd("step").unwrap();
    // The buddy recovered alone; the lost rank's cell escalated.
    assert_eq!(
        records(cell),
        vec![one_rank(cell_instance(1, 1), buddy)],
        "{what}"
    );
    assert_eq!(cell.escalations, 1, "{what}");
    let limited = &step.failures;
    assert!(
        limited.len() == 1 && limited[0].limited && limited[0].ranks.contains(&lost),
        "{what}: {limited:?} {:?}",
        step.whole_group
    );
    assert!(step.reexecutions < RANKS as u64, "{what}");
    assert_eq!(step.escalations, 0, "{what}");
    if let Some(o) = out.results.get(lost) {
        let escalated = &o.escalated;
        assert_eq!(escalated.len(), 1, "{what}: {escalated:?}");
        assert!(
            escalated[0].contains(&format!("buddy rank {buddy} lost the replica")),
            "{what}: {escalated:?}"
        );
    }
    if let Some(o) = out.results.get(buddy) {
        assert!(o.escalated.is_empty(), "{what}");
    }

    // Both at the end of the same cell: whether the buddy's loss came before or after the
    // lost rank fetched its replicas back, it recovers alone or escalates (and then the
    // buddy's own replay may find rank 2's writes into it gone, and escalate too); never a
    // wrong answer or a hang.
    let out = run(
        &plan,
        config(
            "buddy",
            "file",
            true,
            &[
                loss(buddy, cell_instance(1, 2)),
                loss(lost, cell_instance(1, 2)),
            ],
        ),
        &want,
        "simultaneous losses",
    );
    let cell = out.report.cd("cell").unwrap();
    let step = out.report.cd("step").unwrap();
    assert!(
        ((1..=2).contains(&cell.escalations) && step.reexecutions == RANKS as u64)
            || (cell.escalations == 0 && step.reexecutions == 0 && cell.reexecutions == 2),
        "simultaneous losses: {cell:?} {step:?}"
    );
}

/// The dependency notes of the tracking step are replicated with the logs: after rank 5
/// lost its memory and recovered alone in sub-step 0, rank 2's cell escalates in sub-step 2
/// and only the ranks that depend on it re-execute the step (without the notes, rank 5's
/// record would force the whole group).
#[test]
fn after_a_recovered_loss_an_escalation_is_still_dependency_limited() {
    let plan = Plan {
        pattern: MIXED,
        span: None,
        fail: vec![(2, 1, 2, 2)],
    };
    let want = reference(&plan);
    let what = "loss of rank 5, then an escalation of rank 2";
    let out = run(
        &plan,
        config("buddy", "buddy", true, &[loss(5, cell_instance(1, 0))]),
        &want,
        what,
    );
    let step = out.report.cd("step").unwrap();
    assert_eq!(step.failures.len(), 1, "{what}: {:?}", step.whole_group);
    assert!(
        step.failures[0].limited,
        "{what}: {:?} {:?}",
        step.failures, step.whole_group
    );
    assert!(step.failures[0].ranks.len() < RANKS, "{what}");
    let cell = out.report.cd("cell").unwrap();
    assert!(
        records(cell).contains(&one_rank(cell_instance(1, 0), 5)),
        "{what}: {:?}",
        cell.failures
    );
}

/// The configuration of [`config`] (buddy logs and copies, tracking) with the relaxed CDs'
/// `log_durable` set and `losses` injected into `cell`.
fn durable_config(log_durable: &str, losses: &[String]) -> CdConfig {
    let text = format!(
        "[cd.step]\nmedium = \"buddy\"\ndependency_tracking = true\nretries = 2\n\
         [level.2]\nmedium = \"buddy\"\nlog_medium = \"buddy\"\nlog_durable = \"{log_durable}\"\n\
         retries = 1\ncheck_classes = false\n\
         [cd.cell]\ninject = {{ at = [{}] }}\n",
        losses.join(", ")
    );
    CdConfig::parse(&text, "durable.toml").unwrap()
}

/// A rank loss right before operation `op` of instance `iteration` of `cell` on `rank`.
fn loss_at_op(rank: usize, iteration: usize, op: usize) -> String {
    format!("{{ rank = {rank}, iteration = {iteration}, kind = \"rank_loss\", at_op = {op} }}")
}

/// A loss in the middle of a cell's body, before each of its operations in turn (rank 1
/// pushes to ranks 0 and 2, then pulls 4 values from rank 5: 6 operations, between the
/// cell's two barriers). With the log durable at every operation the lost rank recovers
/// alone, bit for bit; with `log_durable = "end"` the loss takes the entries logged since the
/// cell began (its barrier's among them), so the cell escalates and the step re-executes
/// every rank (the right bits still, by the strict recovery).
#[test]
fn a_loss_at_any_operation_of_a_body_recovers_alone_with_durable_logs() {
    let plan = Plan {
        pattern: MIXED,
        ..Plan::default()
    };
    let want = reference(&plan);
    let (rank, at) = (1, cell_instance(1, 1));
    for op in 0..6 {
        let what = format!("loss of rank {rank} before operation {op} of cell #{at}");
        let out = run(
            &plan,
            durable_config("operation", &[loss_at_op(rank, at, op)]),
            &want,
            &format!("{what}, durable at every operation"),
        );
        let cell = out.report.cd("cell").unwrap();
        let step = out.report.cd("step").unwrap();
        assert_eq!(
            (cell.reexecutions, cell.escalations, cell.injected),
            (1, 0, 1),
            "{what}"
        );
        assert_eq!(records(cell), vec![one_rank(at, rank)], "{what}");
        assert_eq!((step.reexecutions, step.escalations), (0, 0), "{what}");
        for (r, o) in out.results.with_ranks() {
            assert_eq!(o.traces.len(), usize::from(r == rank), "{what}: rank {r}");
            assert!(
                o.escalated.is_empty(),
                "{what}: rank {r}: {:?}",
                o.escalated
            );
        }

        let out = run(
            &plan,
            durable_config("end", &[loss_at_op(rank, at, op)]),
            &want,
            &format!("{what}, durable at the end of the body only"),
        );
        let cell = out.report.cd("cell").unwrap();
        let step = out.report.cd("step").unwrap();
        assert_eq!((cell.reexecutions, cell.escalations), (0, 1), "{what}");
        limited_to_dependents(step, rank, &what);
        if let Some(o) = out.results.get(rank) {
            let escalated = &o.escalated;
            assert_eq!(escalated.len(), 1, "{what}: {escalated:?}");
            assert!(
                escalated[0].contains("logged after the last replication"),
                "{what}: {escalated:?}"
            );
        }
    }
}
