//! Node-level dependency tracking (issue 11): an escalation from a relaxed CD re-executes
//! exactly the set D of seed 003's four criteria, computed here independently from the
//! known communication pattern, and the answer is bit-identical to the run without CDs.
//!
//! The program is a halo exchange on a 1-, 2- or 3-D grid of ranks (no wrap-around, so
//! corner and interior ranks differ): along some axes a rank *pulls* its neighbours' values
//! (rget), along others it *pushes* its values into the neighbours' inboxes (rput). A strict
//! CD `step` per time step (with `dependency_tracking`) holds one relaxed CD `cell` per rank;
//! the failing rank's `cell` reports a detected error at its end with `retries = 0`, so it
//! escalates to `step`.
//!
//! Also under mpirun without shared memory (`cd-runtime/tests/mpirun-relaxed.sh`, each test at
//! its shape's rank count): every rank is then a node, so the shapes run with nodes of 1, and
//! each process checks its own rank's bits.

mod common;

use std::collections::BTreeSet;

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdError};
use common::mpi_world_size;
use gasnet_bridge::LaunchConfig;
use pgas::{GlobalPtr, RankResults, barrier, rank_me, rget};

/// Values per rank.
const K: usize = 4;
const STEPS: usize = 3;
const M: f64 = 1_000_003.0;

#[derive(Clone, Copy, Debug)]
struct Shape {
    dims: [usize; 3],
    /// Per axis: true = pull (rget), false = push (rput).
    pull: [bool; 3],
    /// Pushes go one way only, to the neighbour with the higher coordinate (a rank then
    /// writes into ranks that do not write into it).
    forward: bool,
    /// A reduction over every rank inside each cell, whose result enters the answer.
    reduce: Reduce,
    ranks_per_node: usize,
    /// Each rank adds 1 by an atomic to the tally of the next rank (a combining write into a
    /// word no CD preserves; its owner zeroes it at the start of the step), which enters the
    /// answer: a limited re-execution cannot be prepared then.
    tally: bool,
}

impl Shape {
    fn ranks(&self) -> usize {
        self.dims.iter().product()
    }
    fn coords(&self, r: usize) -> [usize; 3] {
        [
            r % self.dims[0],
            (r / self.dims[0]) % self.dims[1],
            r / (self.dims[0] * self.dims[1]),
        ]
    }
    fn rank(&self, c: [usize; 3]) -> usize {
        c[0] + self.dims[0] * (c[1] + self.dims[1] * c[2])
    }
    /// Neighbours of `r` along `axis` (one or two: no wrap-around).
    fn neighbours(&self, r: usize, axis: usize) -> Vec<usize> {
        let c = self.coords(r);
        let mut out = Vec::new();
        if c[axis] > 0 {
            let mut d = c;
            d[axis] -= 1;
            out.push(self.rank(d));
        }
        if c[axis] + 1 < self.dims[axis] {
            let mut d = c;
            d[axis] += 1;
            out.push(self.rank(d));
        }
        out
    }
    fn pulls_from(&self, r: usize) -> Vec<usize> {
        (0..3)
            .filter(|&a| self.pull[a])
            .flat_map(|a| self.neighbours(r, a))
            .collect()
    }
    fn pushes_to(&self, r: usize) -> Vec<usize> {
        (0..3)
            .filter(|&a| !self.pull[a])
            .flat_map(|a| self.neighbours(r, a))
            .filter(|&t| !self.forward || t > r)
            .collect()
    }
    fn node(&self, r: usize) -> usize {
        r / self.ranks_per_node
    }

    /// D for a failure on rank `f`, from the pattern: the ranks on the failed node; on the
    /// nodes that wrote into it; on the nodes it read from; on the nodes that wrote into
    /// those.
    fn expected_d(&self, f: usize) -> Vec<usize> {
        let n = self.ranks();
        let node_f = self.node(f);
        let on = |node: usize| (0..n).filter(move |&r| self.node(r) == node);
        let writers_into = |node: usize| -> BTreeSet<usize> {
            (0..n)
                .filter(|&w| self.pushes_to(w).iter().any(|&t| self.node(t) == node))
                .map(|w| self.node(w))
                .collect()
        };
        let read_from: BTreeSet<usize> = on(node_f)
            .flat_map(|r| self.pulls_from(r))
            .map(|r| self.node(r))
            .collect();
        let mut nodes = BTreeSet::from([node_f]);
        nodes.extend(writers_into(node_f));
        nodes.extend(read_from.iter().copied());
        for &m in &read_from {
            nodes.extend(writers_into(m));
        }
        (0..n).filter(|&r| nodes.contains(&self.node(r))).collect()
    }
}

/// The reduction a cell makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reduce {
    None,
    /// `reduce_all` (every rank gets the same result).
    All,
    /// `reduce_one` to rank 0 (only rank 0 gets a result).
    One,
}

/// Shared arrays of one rank: the values neighbours pull, and one inbox of K values per
/// possible pushing neighbour (6 directions).
struct Arrays {
    cur: Vec<GlobalPtr<f64>>,
    inbox: Vec<GlobalPtr<f64>>,
    tally: Vec<GlobalPtr<u64>>,
}

/// The inbox slot rank `from` writes into at rank `to`.
fn slot(shape: &Shape, from: usize, to: usize) -> usize {
    let (a, b) = (shape.coords(from), shape.coords(to));
    let axis = (0..3).find(|&i| a[i] != b[i]).unwrap();
    2 * axis + usize::from(a[axis] > b[axis])
}

fn step_body(shape: &Shape, arr: &Arrays, step: usize) {
    let me = rank_me();
    let cur = arr.cur[me];
    let mut v = vec![0.0; K];
    cur.read_local_slice(&mut v).unwrap();
    if shape.tally {
        arr.tally[me].write_local_slice(&[0]).unwrap();
    }
    barrier();
    if shape.tally && me + 1 < shape.ranks() {
        pgas::AtomicDomain::<u64>::new()
            .fetch_add(arr.tally[me + 1], 1)
            .wait();
    }
    for t in shape.pushes_to(me) {
        pgas::rput_slice(&v, arr.inbox[t] + slot(shape, me, t) * K).wait();
    }
    let mut acc = [0.0; K];
    for s in shape.pulls_from(me) {
        for (i, a) in acc.iter_mut().enumerate() {
            *a += rget(arr.cur[s] + i).wait() * (1.0 + s as f64);
        }
    }
    acc[0] += match shape.reduce {
        Reduce::None => 0.0,
        Reduce::All => pgas::reduce_all(v[1], f64::max).wait(),
        Reduce::One => pgas::reduce_one(v[1], f64::max, 0).wait().unwrap_or(-1.0),
    };
    barrier();
    // The inboxes of the ranks that push here, in a fixed order.
    for (i, a) in acc.iter_mut().enumerate() {
        for w in 0..shape.ranks() {
            if shape.pushes_to(w).contains(&me) {
                let mut x = [0.0];
                (arr.inbox[me] + slot(shape, w, me) * K + i)
                    .read_local_slice(&mut x)
                    .unwrap();
                *a += x[0] * (2.0 + w as f64);
            }
        }
    }
    if shape.tally {
        let mut t = [0u64];
        arr.tally[me].read_local_slice(&mut t).unwrap();
        acc[0] += t[0] as f64;
    }
    // Consumed: a re-execution must get the pushes again (live from ranks that re-execute,
    // replayed from the logs of those that do not).
    arr.inbox[me].write_local_slice(&[0.0; 6 * K]).unwrap();
    let next: Vec<f64> = (0..K)
        .map(|i| (3.0 * v[i] + acc[i] + (step * K + i) as f64) % M)
        .collect();
    cur.write_local_slice(&next).unwrap();
}

/// (rank, step, executions): the relaxed CD of that rank and step fails at the end of its
/// first `executions` executions (with `retries = 1`, two failures escalate, one recovers
/// alone).
type Fail<'a> = &'a [(usize, usize, u32)];

struct Out {
    bits: Vec<u64>,
}

fn program(shape: Shape, cds: bool, fail: Fail) -> Result<Out, CdError> {
    let me = rank_me();
    let cur = pgas::new_array::<f64>(K).unwrap();
    let inbox = pgas::new_array::<f64>(6 * K).unwrap();
    let init: Vec<f64> = (0..K).map(|i| (me * 10 + i) as f64).collect();
    cur.write_local_slice(&init).unwrap();
    let arr = Arrays {
        cur: pgas::allgather(cur).wait(),
        inbox: pgas::allgather(inbox).wait(),
        tally: pgas::allgather(pgas::new_array::<u64>(1).unwrap()).wait(),
    };
    let mut left: Vec<(usize, u32)> = fail
        .iter()
        .filter(|f| f.0 == me)
        .map(|f| (f.1, f.2))
        .collect();
    for step in 0..STEPS {
        if !cds {
            step_body(&shape, &arr, step);
            continue;
        }
        cd::strict("step", |s| {
            s.preserve_global("cur", cur, K);
            cd::relaxed("cell", |c| {
                c.preserve_global("cur", cur, K);
                step_body(&shape, &arr, step);
                if let Some(l) = left.iter_mut().find(|l| l.0 == step && l.1 > 0) {
                    l.1 -= 1;
                    return Err(CdError::detected("injected at the end of the cell"));
                }
                Ok(())
            })
        })?;
    }
    let mut v = vec![0.0; K];
    cur.read_local_slice(&mut v).unwrap();
    Ok(Out {
        bits: v.iter().map(|x| x.to_bits()).collect(),
    })
}

fn job(shape: &Shape) -> LaunchConfig {
    LaunchConfig::new(shape.ranks())
        .segment_bytes(1 << 20)
        .ranks_per_node(shape.ranks_per_node)
}

/// The bits of the ranks this process ran, without CDs.
fn reference(shape: Shape) -> RankResults<Vec<u64>> {
    pgas::launch(&job(&shape), pgas::RpcTable::new(), move || {
        program(shape, false, &[]).unwrap().bits
    })
    .unwrap()
}

/// The node sizes a test sweeps: `smp` on smp; under mpirun only 1, since without shared
/// memory between the processes (`PGAS_MPI_PSHM=0`) every rank is a node of its own.
fn node_sizes(smp: &[usize]) -> Vec<usize> {
    match mpi_world_size() {
        None => smp.to_vec(),
        Some(_) => {
            assert!(
                smp.contains(&1),
                "under mpirun every rank is a node: {smp:?}"
            );
            vec![1]
        }
    }
}

fn config(tracking: bool) -> CdConfig {
    let text = format!(
        "[cd.step]\ndependency_tracking = {tracking}\nretries = 2\n[cd.cell]\nretries = 1\n\
         check_classes = false\n"
    );
    CdConfig::parse(&text, "deps.toml").unwrap()
}

/// Launches `shape` under `config` with the failures `fail`, checks every rank's bits against
/// `want` (`what` names the run in a failed assertion), and returns the report, whose `step`
/// escalated nothing and recorded one failure.
fn launch_checked(
    shape: Shape,
    config: CdConfig,
    fail: Fail,
    want: &RankResults<Vec<u64>>,
    what: &str,
) -> cd::Report {
    let f = fail.to_vec();
    let out = cd::launch(&job(&shape), config, pgas::RpcTable::new(), move || {
        program(shape, true, &f)
    })
    .unwrap_or_else(|e| panic!("{shape:?}, {what}: {e}"));
    for (r, o) in out.results.with_ranks() {
        assert_eq!(
            Some(&o.bits),
            want.get(r),
            "{shape:?}, {what}: rank {r} differs from the run without CDs"
        );
    }
    let step = out.report.cd("step").unwrap();
    assert_eq!(
        step.escalations, 0,
        "{shape:?}, {what}: {:?}",
        step.whole_group
    );
    assert_eq!(
        step.failures.len(),
        1,
        "{shape:?}, {what}: {:?}",
        step.failures
    );
    out.report
}

/// Runs `shape` with an escalation from rank `f` at step 1 and returns the ranks that
/// re-executed `step` (checking the bits against `want`).
fn reexecuted(shape: Shape, f: usize, tracking: bool, want: &RankResults<Vec<u64>>) -> Vec<usize> {
    run(shape, &[(f, 1, 2)], tracking, want).0
}

/// Runs `shape` with the failures `fail`; returns the ranks that re-executed `step` and the
/// relaxed re-executions of `cell`.
fn run(
    shape: Shape,
    fail: Fail,
    tracking: bool,
    want: &RankResults<Vec<u64>>,
) -> (Vec<usize>, u64) {
    let what = format!("failures {fail:?}, tracking {tracking}");
    let report = launch_checked(shape, config(tracking), fail, want, &what);
    let step = report.cd("step").unwrap();
    let record = &step.failures[0];
    assert_eq!(
        record.limited, tracking,
        "{shape:?}: {:?}",
        step.whole_group
    );
    let cell = report.cd("cell").unwrap();
    (record.ranks.clone(), cell.reexecutions)
}

fn check(shape: Shape, failing: &[usize]) {
    let want = reference(shape);
    for &f in failing {
        let d = reexecuted(shape, f, true, &want);
        assert_eq!(d, shape.expected_d(f), "{shape:?}: failure on rank {f}");
        assert!(d.len() < shape.ranks(), "{shape:?}: D is not everyone");
    }
}

/// Seed 003, Figure 5: a chain of CDs that read from their neighbours; B fails; exactly A,
/// B and C re-execute, all others run forward.
#[test]
fn figure_5_chain_reexecutes_a_b_and_c_only() {
    let shape = Shape {
        dims: [7, 1, 1],
        pull: [true, true, true],
        forward: false,
        reduce: Reduce::None,
        ranks_per_node: 1,
        tally: false,
    };
    let want = reference(shape);
    assert_eq!(reexecuted(shape, 3, true, &want), vec![2, 3, 4]);
    // Without the lists, everyone re-executes, with the same answer.
    assert_eq!(
        reexecuted(shape, 3, false, &want),
        (0..7).collect::<Vec<_>>()
    );
}

#[test]
fn pull_2d_16_ranks_nodes_of_1_and_2() {
    for rpn in node_sizes(&[1, 2]) {
        let shape = Shape {
            dims: [4, 4, 1],
            pull: [true, true, true],
            forward: false,
            reduce: Reduce::None,
            ranks_per_node: rpn,
            tally: false,
        };
        check(shape, &[0, 5]);
    }
}

#[test]
fn push_2d_16_ranks_nodes_of_1_and_4() {
    for rpn in node_sizes(&[1, 4]) {
        let shape = Shape {
            dims: [4, 4, 1],
            pull: [false, false, false],
            forward: false,
            reduce: Reduce::None,
            ranks_per_node: rpn,
            tally: false,
        };
        check(shape, &[0, 10]);
    }
}

/// Pull along x, push along y and z: all four criteria add ranks (the failed node, the
/// nodes pushing into it, the nodes it pulls from, and the nodes pushing into those).
#[test]
fn mixed_3d_27_ranks_all_four_criteria() {
    for rpn in node_sizes(&[1, 3]) {
        let shape = Shape {
            dims: [3, 3, 3],
            pull: [true, false, false],
            forward: false,
            reduce: Reduce::None,
            ranks_per_node: rpn,
            tally: false,
        };
        check(shape, &[0, 13]);
    }
}

#[test]
fn mixed_3d_64_ranks_nodes_of_2() {
    let shape = Shape {
        dims: [4, 4, 4],
        pull: [true, false, true],
        forward: false,
        reduce: Reduce::None,
        ranks_per_node: 2,
        tally: false,
    };
    check(shape, &[0, 21]);
}

/// Two escalations at the same step on nodes far apart: D is the union of their sets.
#[test]
fn two_escalations_far_apart() {
    let shape = Shape {
        dims: [9, 1, 1],
        pull: [true, true, true],
        forward: false,
        reduce: Reduce::None,
        ranks_per_node: 1,
        tally: false,
    };
    let want = reference(shape);
    let (d, _) = run(shape, &[(1, 1, 2), (7, 1, 2)], true, &want);
    assert_eq!(d, vec![0, 1, 2, 6, 7, 8]);
}

/// Rank 1 escalates while rank 5 recovers its own relaxed CD alone, in the same step: only
/// 0, 1 and 2 re-execute the step; rank 5's replayed recovery stands.
#[test]
fn an_escalation_while_another_rank_recovers_alone() {
    let shape = Shape {
        dims: [7, 1, 1],
        pull: [false, true, true],
        forward: false,
        reduce: Reduce::None,
        ranks_per_node: 1,
        tally: false,
    };
    let want = reference(shape);
    let (d, relaxed) = run(shape, &[(1, 1, 2), (5, 1, 1)], true, &want);
    assert_eq!(d, vec![0, 1, 2]);
    // Rank 1's replay (which failed again) and rank 5's (which recovered).
    assert_eq!(relaxed, 2);
}

/// A preparation that fails is agreed on among D alone; nobody runs the limited body, and the
/// next attempt re-executes the whole group, bit-exact. Rank 3's cell fails once; its replay
/// finds the combining write from rank 2 in a word no CD preserves (replaying it would apply
/// it twice), so it escalates, and so does the preparation of the limited re-execution. The
/// limited attempt spends no retry: with `retries = 1` on `step` the whole group still
/// re-executes.
#[test]
fn a_failed_preparation_falls_back_to_the_whole_group() {
    let shape = Shape {
        dims: [7, 1, 1],
        pull: [true, true, true],
        forward: false,
        reduce: Reduce::None,
        ranks_per_node: 1,
        tally: true,
    };
    let want = reference(shape);
    for retries in [2, 1] {
        let text = format!(
            "[cd.step]\ndependency_tracking = true\nretries = {retries}\n[cd.cell]\nretries = 1\n\
             check_classes = false\n"
        );
        let config = CdConfig::parse(&text, "deps.toml").unwrap();
        let what = format!("retries {retries}");
        let report = launch_checked(shape, config, &[(3, 1, 1)], &want, &what);
        let step = report.cd("step").unwrap();
        assert!(
            step.whole_group
                .iter()
                .any(|w| w.contains("rank 3") && w.contains("combining write")),
            "{:?}",
            step.whole_group
        );
        // The limited attempt ran no body: the one re-execution is the whole group's.
        assert!(!step.failures[0].limited);
        assert_eq!(step.failures[0].ranks, (0..7).collect::<Vec<_>>());
        assert_eq!(step.failures[0].attempt, 2, "{:?}", step.failures);
    }
}

/// The default configuration (no `dependency_tracking` key): the first instance of `step`
/// holding relaxed CDs keeps no notes, so an escalation there re-executes every rank and
/// says why; from the next instance on the lists are kept and an escalation re-executes
/// exactly D. Both answers are bit-identical to the run without CDs.
#[test]
fn tracking_is_on_by_default_from_the_second_instance() {
    let shape = Shape {
        dims: [7, 1, 1],
        pull: [true, true, true],
        forward: false,
        reduce: Reduce::None,
        ranks_per_node: 1,
        tally: false,
    };
    let want = reference(shape);
    let text = "[cd.step]\nretries = 2\n[cd.cell]\nretries = 1\ncheck_classes = false\n";
    for (step, expected) in [(0, (0..7).collect::<Vec<usize>>()), (1, vec![2, 3, 4])] {
        let config = CdConfig::parse(text, "default.toml").unwrap();
        let what = format!("failure at step {step}");
        let report = launch_checked(shape, config, &[(3, step, 2)], &want, &what);
        let report = report.cd("step").unwrap();
        assert_eq!(report.failures[0].ranks, expected, "failure at step {step}");
        assert_eq!(report.failures[0].limited, step > 0);
        if step == 0 {
            assert!(
                report
                    .whole_group
                    .iter()
                    .any(|w| w.contains("kept no dependency notes")),
                "{:?}",
                report.whole_group
            );
        }
    }
}

/// The configuration of a rank loss inside rank `f`'s `cell` at step 1 (`at_op`: before its
/// n-th operation, else at the end of its body), the cell's log in the rank's memory only
/// (`log_medium = "local"`, the default): the loss takes the log, the cell escalates, and
/// `step` (its state at the buddy, so the loss leaves it) re-executes.
fn loss_config(f: usize, at_op: Option<u64>) -> CdConfig {
    let at_op = at_op.map_or(String::new(), |n| format!(", at_op = {n}"));
    let text = format!(
        "[cd.step]\ndependency_tracking = true\nretries = 2\nmedium = \"buddy\"\n\
         [cd.cell]\nretries = 1\ncheck_classes = false\n\
         inject = {{ at = [{{ rank = {f}, iteration = 1, kind = \"rank_loss\"{at_op} }}] }}\n"
    );
    CdConfig::parse(&text, "loss.toml").unwrap()
}

/// Runs `shape` with the loss of [`loss_config`]; checks the bits against the run without
/// CDs and returns the `step` failure's record and the reasons for whole-group attempts.
fn run_loss(
    shape: Shape,
    f: usize,
    at_op: Option<u64>,
) -> (cd::report::FailureRecord, Vec<String>) {
    let want = reference(shape);
    let what = format!("loss on rank {f} at {at_op:?}");
    let report = launch_checked(shape, loss_config(f, at_op), &[], &want, &what);
    let step = report.cd("step").unwrap();
    (step.failures[0].clone(), step.whole_group.clone())
}

/// D for a loss on `f` that took its log: D for an escalation there, and the nodes of the
/// ranks it wrote into (its writes cannot be checked against a log, so they are made again
/// where they land).
fn expected_d_log_lost(shape: &Shape, f: usize) -> Vec<usize> {
    let nodes: BTreeSet<usize> = shape
        .pushes_to(f)
        .into_iter()
        .chain([f])
        .map(|r| shape.node(r))
        .collect();
    let mut d: BTreeSet<usize> = shape.expected_d(f).into_iter().collect();
    d.extend((0..shape.ranks()).filter(|&r| nodes.contains(&shape.node(r))));
    d.into_iter().collect()
}

/// A rank loss that takes the rank's log (seed 003's loss of communication logs) is limited
/// like an escalation: its dependency notes reached the buddy before each operation that grew
/// them, and D also holds the ranks it wrote into. Pushes one way along a chain: rank 3
/// writes into 4, which writes nothing into 3, so 4 is in D only for the lost log.
#[test]
fn a_rank_loss_that_took_the_log_reexecutes_d_and_the_ranks_written_into() {
    let shape = Shape {
        dims: [7, 1, 1],
        pull: [false, true, true],
        forward: true,
        reduce: Reduce::None,
        ranks_per_node: 1,
        tally: false,
    };
    assert_eq!(shape.expected_d(3), vec![2, 3]);
    for at_op in [None, Some(0)] {
        let (record, whole) = run_loss(shape, 3, at_op);
        assert!(record.limited, "loss at {at_op:?}: {whole:?}");
        assert_eq!(record.ranks, vec![2, 3, 4], "loss at {at_op:?}");
        assert_eq!(record.ranks, expected_d_log_lost(&shape, 3));
    }
}

/// The same at the chain's ends and with ranks sharing nodes.
#[test]
fn a_rank_loss_that_took_the_log_at_the_ends_and_on_nodes_of_two() {
    for rpn in node_sizes(&[1, 2]) {
        let shape = Shape {
            dims: [7, 1, 1],
            pull: [false, true, true],
            forward: true,
            reduce: Reduce::None,
            ranks_per_node: rpn,
            tally: false,
        };
        for f in [0, 3, 6] {
            let (record, whole) = run_loss(shape, f, None);
            assert!(record.limited, "{shape:?}, rank {f}: {whole:?}");
            assert_eq!(
                record.ranks,
                expected_d_log_lost(&shape, f),
                "{shape:?}, rank {f}"
            );
        }
    }
}

/// On a grid where every rank writes into the ranks that write into it (the lost log adds
/// nobody to D).
#[test]
fn a_rank_loss_that_took_the_log_on_a_9_rank_grid() {
    let shape = Shape {
        dims: [3, 3, 1],
        pull: [true, false, true],
        forward: false,
        reduce: Reduce::None,
        ranks_per_node: 1,
        tally: false,
    };
    let (record, whole) = run_loss(shape, 0, None);
    assert!(record.limited, "{whole:?}");
    assert_eq!(record.ranks, vec![0, 1, 3, 4]);
    assert_eq!(record.ranks, shape.expected_d(0));
}

/// A rank that lost its log takes the results of the cell's reductions from another rank's
/// log (every rank got the same): the loss is still limited to D.
#[test]
fn a_rank_that_lost_its_log_takes_reduction_results_from_another_rank() {
    let shape = Shape {
        dims: [7, 1, 1],
        pull: [false, true, true],
        forward: true,
        reduce: Reduce::All,
        ranks_per_node: 1,
        tally: false,
    };
    for at_op in [None, Some(0)] {
        let (record, whole) = run_loss(shape, 3, at_op);
        assert!(record.limited, "loss at {at_op:?}: {whole:?}");
        assert_eq!(record.ranks, vec![2, 3, 4], "loss at {at_op:?}");
    }
}

/// A `reduce_one` gives each rank its own result, which only the lost log held: the whole
/// group re-executes, and the report says why.
#[test]
fn a_lost_log_with_a_reduce_one_result_reexecutes_the_whole_group() {
    let shape = Shape {
        dims: [7, 1, 1],
        pull: [false, true, true],
        forward: true,
        reduce: Reduce::One,
        ranks_per_node: 1,
        tally: false,
    };
    let (record, whole) = run_loss(shape, 3, None);
    assert!(!record.limited, "{record:?}");
    assert_eq!(record.ranks, (0..7).collect::<Vec<_>>());
    assert!(
        whole
            .iter()
            .any(|w| w.contains("rank 3 lost its log") && w.contains("collective result")),
        "{whole:?}"
    );
}
