//! A halo exchange on pgas with a strict CD per step and a relaxed CD per rank inside,
//! checked against its run without CDs: fault-free with logging gives the same bits; one
//! relaxed CD failing at every epoch of the run gives the same bits, with exactly the failed
//! rank re-executing; every incoming write is replayed exactly once; logs are empty after
//! every strict completion.
//!
//! Also under `mpirun -n 4` (`cd-runtime/tests/mpirun-relaxed.sh`), each process checking its
//! own rank's results.

use cd_runtime as cd;
use cd_runtime::relaxed::ReplayEvent;
use cd_runtime::{CdConfig, CdError};
use gasnet_bridge::LaunchConfig;
use pgas::{GlobalPtr, RankResults, barrier, rank_me, rank_n, rput};

const RANKS: usize = 4;
const N: usize = 6;
const STEPS: usize = 3;
const SUBS: usize = 3;
const M: f64 = 1_000_003.0;

/// Where a relaxed CD returns a detected error early: (rank, step, sub-step), first
/// execution only, after the sub-step's update and before its closing barrier.
type Early = Option<(usize, usize, usize)>;

fn job() -> LaunchConfig {
    LaunchConfig::new(RANKS).segment_bytes(1 << 20)
}

/// One sub-step: puts the edge values into the neighbours' ghosts, a barrier, the update
/// from the ghosts, a barrier.
fn substeps(
    u: GlobalPtr<f64>,
    ptrs: &[GlobalPtr<f64>],
    step: usize,
    early: Option<usize>,
) -> Result<(), CdError> {
    let (me, n) = (rank_me(), rank_n());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    for sub in 0..SUBS {
        let mut v = vec![0.0; N + 2];
        u.read_local_slice(&mut v).unwrap();
        rput(v[1], ptrs[left] + (N + 1)).wait();
        rput(v[N], ptrs[right]).wait();
        barrier();
        u.read_local_slice(&mut v).unwrap();
        let w: Vec<f64> = (1..=N)
            .map(|i| (v[i - 1] + 2.0 * v[i] + v[i + 1] + (step * SUBS + sub) as f64) % M)
            .collect();
        (u + 1).write_local_slice(&w).unwrap();
        if early == Some(sub) {
            return Err(CdError::detected(format!(
                "early failure at sub-step {sub}"
            )));
        }
        barrier();
    }
    Ok(())
}

struct Out {
    bits: Vec<u64>,
    /// Log entries left on the rank after each strict completion.
    left_after_strict: Vec<usize>,
    traces: Vec<cd::relaxed::RecoveryTrace>,
}

fn program(cds: bool, early: Early) -> Result<Out, CdError> {
    let me = rank_me();
    let u = pgas::new_array::<f64>(N + 2).unwrap();
    let init: Vec<f64> = (1..=N).map(|i| (me * 100 + i) as f64).collect();
    (u + 1).write_local_slice(&init).unwrap();
    let ptrs = pgas::allgather(u).wait();
    let mut left_after_strict = Vec::new();
    for step in 0..STEPS {
        if cds {
            cd::strict("step", |_| {
                cd::relaxed("halo", |c| {
                    c.preserve_global("u", u, N + 2);
                    let fail_here = match early {
                        Some((r, s, sub)) if r == me && s == step && !c.is_reexecution() => {
                            Some(sub)
                        }
                        _ => None,
                    };
                    substeps(u, &ptrs, step, fail_here)
                })
            })?;
            left_after_strict.push(cd::relaxed::logged_entries());
        } else {
            substeps(u, &ptrs, step, None)?;
        }
    }
    let mut v = vec![0.0; N];
    (u + 1).read_local_slice(&mut v).unwrap();
    let traces = if cds {
        cd::relaxed::recoveries()
    } else {
        Vec::new()
    };
    Ok(Out {
        bits: v.iter().map(|x| x.to_bits()).collect(),
        left_after_strict,
        traces,
    })
}

/// The bits of the ranks this process ran, without CDs.
fn reference() -> RankResults<Vec<u64>> {
    let out = pgas::launch(&job(), pgas::RpcTable::new(), || {
        program(false, None).map(|o| o.bits).unwrap()
    })
    .unwrap();
    assert_eq!(out.job_ranks(), RANKS);
    out
}

fn with_cds(cfg: CdConfig, early: Early) -> cd::CdOutcome<Out> {
    cd::launch(&job(), cfg, pgas::RpcTable::new(), move || {
        program(true, early)
    })
    .unwrap_or_else(|e| panic!("{early:?}: {e}"))
}

/// `failed`: (rank, instance, sub-steps whose incoming writes the recovery replays).
fn check_run(
    out: &cd::CdOutcome<Out>,
    want: &RankResults<Vec<u64>>,
    failed: Option<(usize, u64, usize)>,
    what: &str,
) {
    for (r, o) in out.results.with_ranks() {
        assert_eq!(
            Some(&o.bits),
            want.get(r),
            "{what}: rank {r} differs from the run without CDs"
        );
        assert!(
            o.left_after_strict.iter().all(|&n| n == 0),
            "{what}: rank {r} kept logs after a strict completion: {:?}",
            o.left_after_strict
        );
    }
    let halo = out.report.cd("halo").unwrap();
    assert!(halo.entries_logged > 0 && halo.bytes_logged > 0);
    assert_eq!(
        out.report.cd("step").unwrap().reexecutions,
        0,
        "{what}: no strict re-execution"
    );
    assert_eq!(halo.escalations, 0, "{what}");
    match failed {
        None => {
            assert_eq!(halo.reexecutions, 0);
            assert!(out.results.iter().all(|o| o.traces.is_empty()));
        }
        Some((rank, iteration, subs)) => {
            assert_eq!(halo.reexecutions, 1, "{what}");
            assert_eq!(halo.failures.len(), 1, "{what}");
            assert_eq!(
                halo.failures[0].ranks,
                [rank],
                "{what}: exactly the failed rank re-executed"
            );
            assert_eq!(halo.failures[0].iteration, iteration, "{what}");
            for (r, o) in out.results.with_ranks() {
                assert_eq!(o.traces.len(), usize::from(r == rank), "{what}: rank {r}");
            }
            assert!(
                halo.entries_replayed > 0 && halo.writes_squashed > 0,
                "{what}"
            );
            // The failed rank's trace, where this process ran it.
            let Some(o) = out.results.get(rank) else {
                return;
            };
            let t = &o.traces[0];
            // Only the two writers into the rank, its neighbours, were asked for their logs.
            let mut asked = t.asked.clone();
            asked.sort_unstable();
            let mut neighbours = vec![(rank + RANKS - 1) % RANKS, (rank + 1) % RANKS];
            neighbours.sort_unstable();
            assert_eq!(asked, neighbours, "{what}: the ranks asked");
            // Every incoming write replayed exactly once, in (EC, IWC) order: the IWC
            // sequence has no gap and no repeat.
            let applied: Vec<(u64, u64)> = t
                .events
                .iter()
                .filter_map(|e| match e {
                    ReplayEvent::Incoming { ec, iwc, .. } => Some((*ec, *iwc)),
                    _ => None,
                })
                .collect();
            let mut iwcs: Vec<u64> = applied.iter().map(|a| a.1).collect();
            assert!(
                applied.windows(2).all(|w| w[0] < w[1]),
                "{what}: (EC, IWC) order"
            );
            iwcs.sort_unstable();
            assert_eq!(
                iwcs,
                ((t.iwc_begin + 1)..=t.iwc_end).collect::<Vec<_>>(),
                "{what}"
            );
            // Two neighbours, one put each per sub-step. A neighbour's put of sub-step 0 may
            // land before this rank begins its relaxed CD (nothing orders the two), and is then
            // part of the state at begin, not of the replay; every later put lands after the
            // sub-step's barrier, inside the CD.
            assert!(
                (2 * (subs - 1)..=2 * subs).contains(&iwcs.len()),
                "{what}: {} incoming writes replayed",
                iwcs.len()
            );
        }
    }
}

#[test]
fn fault_free_with_logging_equals_cds_off_bit_for_bit() {
    let want = reference();
    let out = with_cds(CdConfig::default(), None);
    check_run(&out, &want, None, "fault-free");
    assert!(out.report.table().contains("relaxed CDs"));
    assert!(out.report.to_json().contains("\"writes_squashed\""));
}

#[test]
fn a_relaxed_cd_failing_at_every_epoch_gives_the_fault_free_bits() {
    let want = reference();
    // At the end of each relaxed CD instance (the whole log replayed).
    for rank in 0..RANKS {
        for step in 0..STEPS {
            let cfg = CdConfig::default()
                .with_cd(
                    "halo",
                    &format!("inject = {{ at = [{{ rank = {rank}, iteration = {step}, kind = \"soft\" }}] }}"),
                )
                .unwrap();
            let out = with_cds(cfg, None);
            check_run(
                &out,
                &want,
                Some((rank, step as u64, SUBS)),
                &format!("end of step {step} on rank {rank}"),
            );
        }
    }
    // Inside every sub-step (the log runs out and the body goes on forward).
    for rank in 0..RANKS {
        for step in 0..STEPS {
            for sub in 0..SUBS {
                let out = with_cds(CdConfig::default(), Some((rank, step, sub)));
                let what = format!("sub-step {sub} of step {step} on rank {rank}");
                check_run(&out, &want, Some((rank, step as u64, sub + 1)), &what);
                let Some(o) = out.results.get(rank) else {
                    continue;
                };
                let t = &o.traces[0];
                let forward_at = t
                    .events
                    .iter()
                    .position(|e| matches!(e, ReplayEvent::Forward { .. }));
                assert!(forward_at.is_some(), "{what}: switched to forward mode");
            }
        }
    }
}
