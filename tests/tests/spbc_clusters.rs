//! SPBC clusters of relaxed CDs (`cluster` in the configuration): accesses between two ranks
//! of one cluster are not logged, and a failure of a relaxed CD re-executes exactly its rank's
//! cluster (the dependency-limited re-execution of the strict CD around it), bit for bit.
//!
//! The program is a halo exchange on a chain of ranks (no wrap-around): each rank pushes its
//! values into both neighbours' inboxes (rput) and pulls theirs (rget). A strict CD `step`
//! per time step (tracking dependencies from its first instance) holds one relaxed CD `cell`
//! per rank; the failing rank's `cell` reports a detected error at the end of its first
//! execution, which it would recover from alone without clusters (`retries = 1`).
//!
//! Under mpirun without shared memory between the processes (`cd-runtime/tests/
//! mpirun-relaxed.sh`) every rank is a node of its own, so `cluster = "node"` means clusters of
//! one; with hosts emulated by `PGAS_MPI_HOST_SIZE=k` (`.ci/run`) a node is k processes.

mod common;

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdError, CdStats};
use common::mpi_world_size;
use gasnet_bridge::LaunchConfig;
use pgas::{GlobalPtr, RankResults, barrier, rank_me, rget};

/// Ranks of the chain.
const N: usize = 8;
/// Ranks per node on smp (for `cluster = "node"`).
const PER_NODE: usize = 4;

/// Ranks per node in this job: [`PER_NODE`] on smp; under mpirun the emulated host's
/// processes, or 1 (module doc).
fn per_node() -> usize {
    if mpi_world_size().is_none() {
        return PER_NODE;
    }
    let pshm = std::env::var("PGAS_MPI_PSHM").map_or(true, |v| v.trim() != "0");
    std::env::var("PGAS_MPI_HOST_SIZE")
        .ok()
        .filter(|_| pshm)
        .map_or(1, |k| {
            k.trim().parse().expect("PGAS_MPI_HOST_SIZE: a number")
        })
}
/// Values per rank.
const K: usize = 4;
const STEPS: usize = 3;
const M: f64 = 1_000_003.0;

fn neighbours(r: usize) -> Vec<usize> {
    [r.wrapping_sub(1), r + 1]
        .into_iter()
        .filter(|&x| x < N)
        .collect()
}

/// The inbox slot of rank `from` at its neighbour.
fn slot(from: usize, to: usize) -> usize {
    usize::from(from > to)
}

struct Arrays {
    cur: Vec<GlobalPtr<f64>>,
    inbox: Vec<GlobalPtr<f64>>,
}

fn step_body(arr: &Arrays, step: usize) {
    let me = rank_me();
    let mut v = vec![0.0; K];
    arr.cur[me].read_local_slice(&mut v).unwrap();
    barrier();
    for t in neighbours(me) {
        pgas::rput_slice(&v, arr.inbox[t] + slot(me, t) * K).wait();
    }
    let mut acc = [0.0; K];
    for s in neighbours(me) {
        for (i, a) in acc.iter_mut().enumerate() {
            *a += rget(arr.cur[s] + i).wait() * (1.0 + s as f64);
        }
    }
    barrier();
    for w in neighbours(me) {
        let mut x = vec![0.0; K];
        (arr.inbox[me] + slot(w, me) * K)
            .read_local_slice(&mut x)
            .unwrap();
        for (a, x) in acc.iter_mut().zip(&x) {
            *a += x * (2.0 + w as f64);
        }
    }
    // Consumed: a re-execution must get the pushes again (live from its cluster, from the
    // logs of the ranks outside it).
    arr.inbox[me].write_local_slice(&[0.0; 2 * K]).unwrap();
    let next: Vec<f64> = (0..K)
        .map(|i| (3.0 * v[i] + acc[i] + (step * K + i) as f64) % M)
        .collect();
    arr.cur[me].write_local_slice(&next).unwrap();
}

/// Runs the chain; with `cds`, the relaxed CD of rank `fail.0` fails at step `fail.1` once.
fn program(cds: bool, fail: Option<(usize, usize)>) -> Result<Vec<u64>, CdError> {
    let me = rank_me();
    let cur = pgas::new_array::<f64>(K).unwrap();
    let inbox = pgas::new_array::<f64>(2 * K).unwrap();
    let init: Vec<f64> = (0..K).map(|i| (me * 10 + i) as f64).collect();
    cur.write_local_slice(&init).unwrap();
    let arr = Arrays {
        cur: pgas::allgather(cur).wait(),
        inbox: pgas::allgather(inbox).wait(),
    };
    let mut left = fail.filter(|f| f.0 == me).map(|f| f.1);
    for step in 0..STEPS {
        if !cds {
            step_body(&arr, step);
            continue;
        }
        cd::strict("step", |s| {
            s.preserve_global("cur", cur, K);
            cd::relaxed("cell", |c| {
                c.preserve_global("cur", cur, K);
                step_body(&arr, step);
                if left == Some(step) {
                    left = None;
                    return Err(CdError::detected("injected at the end of the cell"));
                }
                Ok(())
            })
        })?;
    }
    let mut v = vec![0.0; K];
    cur.read_local_slice(&mut v).unwrap();
    Ok(v.iter().map(|x| x.to_bits()).collect())
}

fn job() -> LaunchConfig {
    LaunchConfig::new(N)
        .segment_bytes(1 << 20)
        .ranks_per_node(per_node())
}

fn reference() -> RankResults<Vec<u64>> {
    pgas::launch(&job(), pgas::RpcTable::new(), || {
        program(false, None).unwrap()
    })
    .unwrap()
}

/// The configuration with `cluster` set to `cluster` (TOML text; `None`: unset).
fn config(cluster: Option<&str>) -> CdConfig {
    config_with(cluster, "", "")
}

/// [`config`] with `step` and `cell` lines added.
fn config_with(cluster: Option<&str>, step: &str, cell: &str) -> CdConfig {
    let key = cluster.map_or(String::new(), |c| format!("cluster = {c}\n"));
    let text = format!(
        "{key}[cd.step]\ndependency_tracking = true\nretries = 2\n{step}[cd.cell]\nretries = 1\n\
         check_classes = false\n{cell}"
    );
    CdConfig::parse(&text, "spbc.toml").unwrap()
}

/// Runs the program under CDs, checks every rank's bits against `want`, and returns the
/// report's `step` and `cell` lines.
fn run(
    cluster: Option<&str>,
    fail: Option<(usize, usize)>,
    want: &RankResults<Vec<u64>>,
) -> (CdStats, CdStats) {
    run_with(config(cluster), cluster, fail, want)
}

/// [`run`] with the configuration `cfg`.
fn run_with(
    cfg: CdConfig,
    cluster: Option<&str>,
    fail: Option<(usize, usize)>,
    want: &RankResults<Vec<u64>>,
) -> (CdStats, CdStats) {
    let out = cd::launch(&job(), cfg, pgas::RpcTable::new(), move || {
        program(true, fail)
    })
    .unwrap_or_else(|e| panic!("cluster {cluster:?}, failure {fail:?}: {e}"));
    for (r, bits) in out.results.with_ranks() {
        assert_eq!(
            Some(bits),
            want.get(r),
            "cluster {cluster:?}, failure {fail:?}: rank {r} differs from the run without CDs"
        );
    }
    let step = out.report.cd("step").unwrap().clone();
    let cell = out.report.cd("cell").unwrap().clone();
    (step, cell)
}

/// Runs with a failure on `f` at step 1 and returns the ranks that re-executed `step`,
/// checking that the cell did not recover alone and the re-execution was the limited one.
fn reexecuted(cluster: &str, f: usize, want: &RankResults<Vec<u64>>) -> Vec<usize> {
    let (step, cell) = run(Some(cluster), Some((f, 1)), want);
    assert_eq!(
        cell.reexecutions, 0,
        "cluster {cluster}: rank {f} recovered alone, though its cluster's writes into it are \
         not logged"
    );
    assert_eq!(step.failures.len(), 1, "{:?}", step.failures);
    assert!(step.failures[0].limited, "{:?}", step.whole_group);
    step.failures[0].ranks.clone()
}

#[test]
fn clusters_of_2_reexecute_exactly_the_failed_ranks_pair() {
    let want = reference();
    for f in [2, 5, 7] {
        let c = f / 2 * 2;
        assert_eq!(reexecuted("2", f, &want), vec![c, c + 1], "failure on {f}");
    }
    // Blocks of 3: the last one is short.
    assert_eq!(reexecuted("3", 7, &want), vec![6, 7]);
    assert_eq!(reexecuted("3", 4, &want), vec![3, 4, 5]);
}

#[test]
fn node_clusters_reexecute_exactly_the_failed_ranks_node() {
    let want = reference();
    let k = per_node();
    for f in [1, 6] {
        if k == 1 {
            // A cluster of one logs what no cluster logs: the cell recovers alone.
            let (step, cell) = run(Some("\"node\""), Some((f, 1)), &want);
            assert_eq!(cell.reexecutions, 1, "failure on {f}");
            assert!(step.failures.is_empty(), "{:?}", step.failures);
            continue;
        }
        let node = f / k * k;
        let want_ranks: Vec<usize> = (node..node + k).collect();
        assert_eq!(
            reexecuted("\"node\"", f, &want),
            want_ranks,
            "failure on {f}"
        );
    }
}

/// Entries the cells log fault-free with clusters of `k` ranks (`N`: none logged): per rank
/// and step, its two barriers and, per neighbour outside its cluster, one put and K gets.
fn expected_entries(k: usize) -> u64 {
    if k >= N {
        return 0;
    }
    let per_step: usize = (0..N)
        .map(|r| 2 + neighbours(r).iter().filter(|&&n| n / k != r / k).count() * (1 + K))
        .sum();
    (per_step * STEPS) as u64
}

#[test]
fn accesses_inside_a_cluster_are_not_logged() {
    let want = reference();
    let mut bytes = Vec::new();
    for (cluster, k) in [(None, 1), (Some("2"), 2), (Some("\"node\""), per_node())] {
        let (_, cell) = run(cluster, None, &want);
        assert_eq!(
            cell.entries_logged,
            expected_entries(k),
            "cluster {cluster:?}: entries logged"
        );
        assert!(
            cell.bytes_logged > 0,
            "cluster {cluster:?}: some accesses leave it"
        );
        bytes.push((k, cell.bytes_logged));
    }
    // Larger clusters log fewer bytes; clusters of one size log the same.
    for &(ka, a) in &bytes {
        for &(kb, b) in &bytes {
            assert!(
                ka.cmp(&kb) == b.cmp(&a),
                "bytes logged by cluster size: {bytes:?}"
            );
        }
    }
    // One cluster holding the whole job: nothing is logged.
    let (_, cell) = run(Some(&N.to_string()), None, &want);
    assert_eq!((cell.entries_logged, cell.bytes_logged), (0, 0));
}

#[test]
fn one_cluster_for_the_whole_job_reexecutes_everyone() {
    let want = reference();
    let (step, cell) = run(Some(&N.to_string()), Some((3, 1)), &want);
    assert_eq!(cell.reexecutions, 0);
    assert_eq!(step.failures.len(), 1, "{:?}", step.failures);
    assert_eq!(step.failures[0].ranks, (0..N).collect::<Vec<_>>());
    assert!(!step.failures[0].limited);
}

/// Without clusters the same failure recovers alone: the tests above see the clusters.
#[test]
fn without_clusters_the_cell_recovers_alone() {
    let want = reference();
    let (step, cell) = run(None, Some((3, 1)), &want);
    assert_eq!(cell.reexecutions, 1);
    assert!(step.failures.is_empty(), "{:?}", step.failures);
}

/// A loss of rank 3's memory in the middle of its cell (buddy logs, durable at every
/// operation), which without clusters it recovers from alone: in a cluster of 2 its cell
/// escalates, the body goes on to take part in the barriers (the others would wait for it
/// otherwise), and the step re-executes every rank (a loss is no relaxed escalation).
#[test]
fn a_mid_body_loss_in_a_cluster_escalates_and_the_others_do_not_wait() {
    let want = reference();
    let buddy = "medium = \"buddy\"\n";
    let cell_text = format!(
        "{buddy}log_medium = \"buddy\"\n\
         inject = {{ at = [{{ rank = 3, iteration = 1, kind = \"rank_loss\", at_op = 1 }}] }}\n"
    );
    let cfg = config_with(Some("2"), buddy, &cell_text);
    let (step, cell) = run_with(cfg, Some("2"), None, &want);
    assert_eq!((cell.injected, cell.reexecutions), (1, 0));
    assert_eq!(step.failures.len(), 1, "{:?}", step.failures);
    assert_eq!(step.failures[0].ranks, (0..N).collect::<Vec<_>>());
    // Without clusters the same loss recovers alone.
    let (step, cell) = run_with(config_with(None, buddy, &cell_text), None, None, &want);
    assert_eq!((cell.injected, cell.reexecutions), (1, 1));
    assert!(step.failures.is_empty(), "{:?}", step.failures);
}

/// A loss of rank 3's memory at the end of its cell, its whole log at the buddy: only its
/// cluster of 2 re-executes the step (`Failure::ClusterLoss`), bit for bit. (The rebuild of
/// messages from outside the cluster that landed before the step began is tested in
/// `cd-runtime/tests/relaxed_overwritten.rs`: this program's messages all land inside it.)
#[test]
fn an_end_of_body_loss_in_a_cluster_reexecutes_the_cluster() {
    let want = reference();
    let buddy = "medium = \"buddy\"\n";
    let cell_text = format!(
        "{buddy}log_medium = \"buddy\"\n\
         inject = {{ at = [{{ rank = 3, iteration = 1, kind = \"rank_loss\" }}] }}\n"
    );
    let cfg = config_with(Some("2"), buddy, &cell_text);
    let (step, cell) = run_with(cfg, Some("2"), None, &want);
    assert_eq!((cell.injected, cell.reexecutions), (1, 0));
    assert_eq!(step.failures.len(), 1, "{:?}", step.failures);
    assert!(step.failures[0].limited, "{:?}", step.whole_group);
    assert_eq!(step.failures[0].ranks, vec![2, 3]);
}
