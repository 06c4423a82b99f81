//! A message that landed before a relaxed CD began, read by its body, and overwritten inside
//! its window by the same writer's next message (a neighbour running ahead, no barrier): the
//! replay after a soft error must read the first message and its flag again, which the
//! recovery rebuilds from the writer's log (`replay::rebuild_overwritten`); without that step
//! the replay waits forever for the first flag, or, past it, reads the second message in
//! place of the first. After a rank loss the memory is gone: the message and its flag (an
//! atomic store) are rebuilt from the log before the replay (`replay::rebuild_before_begin`).
//! The same two hazards in a dependency-limited re-execution of the strict CD around: a
//! message overwritten in its window, and, after a loss in an SPBC cluster that only the
//! cluster re-executes, a message from outside the cluster that landed before it began.

mod common;

use std::time::{Duration, Instant};

use cd_runtime as cd;
use cd_runtime::relaxed::ReplayEvent;
use common::{config, job, mpi_world_size, run};
use pgas::runtime_hooks::internal;
use pgas::{GlobalPtr, Signal, barrier, put_signal, rank_me, wait_until};

/// The rank that fails and replays.
const F: usize = 0;
/// The rank that runs ahead and writes into it.
const R: usize = 1;
/// Words per rank: `X` the message slot, `FLAG` its arrival flag, `DONE` a flag of R's.
const X: usize = 0;
const FLAG: usize = 1;
const DONE: usize = 2;
const WORDS: usize = 3;

/// Waits until `flag` holds `want`, for at most ten seconds (a replay that lost the value
/// would otherwise wait forever); whether it did.
fn wait_for(flag: GlobalPtr<u64>, want: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    wait_until(flag, |v| v == want || Instant::now() > deadline).unwrap() == want
}

/// This rank's `WORDS` words, zeroed, as every rank sees them; counting of incoming writes
/// switched on (it starts at a rank's first relaxed CD) before any message, so that every
/// message carries an IWC.
fn words() -> Result<Vec<GlobalPtr<u64>>, cd::CdError> {
    let w = pgas::new_array::<u64>(WORDS).unwrap();
    w.write_local_slice(&[0; WORDS]).unwrap();
    let ws = internal(|| pgas::allgather(w).wait());
    cd::relaxed("warm", |_| Ok(()))?;
    internal(barrier);
    Ok(ws)
}

/// The failures of the CD `name` in `report`.
fn failures_of(report: &cd::Report, name: &str) -> Vec<cd::FailureRecord> {
    report
        .cd(name)
        .map(|s| s.failures.clone())
        .unwrap_or_default()
}

/// Each rank's answer, relaxed recoveries and replay events, rank 0 failing with `fault`
/// ("soft", "rank_loss") in its CD or not.
fn scenario(fault: Option<&str>) -> Vec<(usize, u64, usize, Vec<ReplayEvent>)> {
    let inject = fault.map_or(String::new(), |kind| {
        format!("inject = {{ at = [{{ rank = 0, iteration = 0, kind = \"{kind}\" }}] }}\n")
    });
    let cfg = config(&format!(
        "[cd.s]\ncheck_classes = false\nmedium = \"buddy\"\nlog_medium = \"buddy\"\n{inject}"
    ));
    let out = run(2, cfg, || {
        let me = rank_me();
        let ws = words()?;
        let got = if me == F {
            // The first message landed before F's CD begins.
            wait_until(ws[F] + FLAG, |v| v == 1).unwrap();
            cd::relaxed("s", |_| {
                if !wait_for(ws[F] + FLAG, 1) {
                    return Ok(0);
                }
                let first = (ws[F] + X).read_local().unwrap();
                put_signal::<u64>(&[], ws[R] + DONE, ws[R] + DONE, Signal::Set(1)).unwrap();
                wait_until(ws[F] + FLAG, |v| v == 2).unwrap();
                let second = (ws[F] + X).read_local().unwrap();
                Ok(first * 100 + second)
            })?
        } else {
            cd::relaxed("s", |_| {
                put_signal(&[11u64], ws[F] + X, ws[F] + FLAG, Signal::Set(1)).unwrap();
                wait_until(ws[R] + DONE, |v| v == 1).unwrap();
                put_signal(&[22u64], ws[F] + X, ws[F] + FLAG, Signal::Set(2)).unwrap();
                Ok(0)
            })?
        };
        let traces = cd::relaxed::recoveries();
        barrier();
        let events = traces.first().map(|t| t.events.clone()).unwrap_or_default();
        Ok((got, traces.len(), events))
    })
    .unwrap();
    out.results
        .with_ranks()
        .map(|(r, (got, n, events))| (r, *got, *n, events.clone()))
        .collect()
}

#[test]
fn a_message_overwritten_in_the_window_is_read_again_in_the_replay() {
    for fault in [None, Some("soft"), Some("rank_loss")] {
        for (r, got, recoveries, events) in scenario(fault) {
            if r != F {
                assert_eq!(recoveries, 0, "rank {r} never re-executes");
                continue;
            }
            assert_eq!(got, 1122, "fault: {fault:?}; replay events {events:?}");
            assert_eq!(recoveries, usize::from(fault.is_some()), "{fault:?}");
            if fault == Some("soft") {
                assert!(
                    events
                        .iter()
                        .any(|e| matches!(e, ReplayEvent::Rebuilt { from: R, .. })),
                    "the first message was written again: {events:?}"
                );
            }
        }
    }
}

/// The rank that writes into R in the limited scenario, outside the re-executing ranks.
const W: usize = 2;

/// The same hazard in a dependency-limited re-execution of the strict CD "outer" around the
/// relaxed CDs: F's relaxed CD escalates at once; R wrote into F, so F and R re-execute
/// "outer" (seed 003's criteria), and W, which only wrote into R, does not: its writes into
/// R are applied epoch by epoch from its log. W's first message landed before R began
/// "outer", and its second overwrote it inside the window: without the rebuild
/// (`limited::prepare`) R's re-execution finds the second flag and waits for the first in
/// vain. Returns R's answer and replay events, and the failures of "outer".
fn limited_scenario(fault: bool) -> (Option<(u64, Vec<ReplayEvent>)>, Vec<cd::FailureRecord>) {
    let inject = match fault {
        true => "inject = { at = [{ rank = 0, iteration = 0, kind = \"soft\" }] }\n",
        false => "",
    };
    let cfg = config(&format!(
        "[cd.s]\ncheck_classes = false\nretries = 0\n{inject}\
         [cd.outer]\ndependency_tracking = true\n"
    ));
    // Dependency lists are per node: one rank per node, so that W's node is apart.
    let launch = job(3).ranks_per_node(1);
    let out = cd::launch(&launch, cfg, pgas::RpcTable::new(), || {
        let me = rank_me();
        let ws = words()?;
        if me == R {
            // W's first message lands before R's "outer" begins.
            wait_until(ws[R] + FLAG, |v| v == 1).unwrap();
        }
        let got = cd::strict("outer", |_| {
            cd::relaxed("s", |_| match me {
                F => {
                    barrier();
                    Ok(0)
                }
                R => {
                    // A message whose flag never comes counts 0 (F waits in the barrier).
                    let read = |flag| match wait_for(ws[R] + FLAG, flag) {
                        true => (ws[R] + X).read_local().unwrap(),
                        false => 0,
                    };
                    let first = read(1);
                    barrier();
                    let got = first * 100 + read(2);
                    pgas::rput(got, ws[F] + X).wait();
                    Ok(got)
                }
                W => {
                    put_signal(&[11u64], ws[R] + X, ws[R] + FLAG, Signal::Set(1)).unwrap();
                    barrier();
                    put_signal(&[22u64], ws[R] + X, ws[R] + FLAG, Signal::Set(2)).unwrap();
                    Ok(0)
                }
                _ => unreachable!("three ranks"),
            })
        })?;
        let events = cd::relaxed::recoveries()
            .into_iter()
            .flat_map(|t| t.events)
            .collect::<Vec<_>>();
        barrier();
        Ok((got, events))
    })
    .unwrap();
    let failures = failures_of(&out.report, "outer");
    (out.results.get(R).cloned(), failures)
}

#[test]
fn a_message_overwritten_in_the_window_is_read_again_in_a_limited_re_execution() {
    for fault in [false, true] {
        let (r, failures) = limited_scenario(fault);
        if let Some((got, events)) = r {
            assert_eq!(got, 1122, "fault: {fault}; failures {failures:?}");
            let rebuilt = events
                .iter()
                .any(|e| matches!(e, ReplayEvent::Rebuilt { from: W, .. }));
            assert_eq!(
                rebuilt, fault,
                "W's first message written again: {events:?}"
            );
        }
        if !fault {
            assert!(failures.is_empty(), "{failures:?}");
        } else if mpi_world_size().is_none() {
            assert_eq!(failures.len(), 1, "{failures:?}");
            assert!(failures[0].limited, "{failures:?}");
            assert_eq!(failures[0].ranks, vec![F, R], "W does not re-execute");
        }
    }
}

/// A loss at the end of a relaxed CD in an SPBC cluster of two (ranks 0 and 1): only the
/// cluster re-executes the strict CD "outer" (its log came back from the buddy), and rank 2,
/// outside it, had put its message and flag into rank 0 before rank 0 began "outer". The loss
/// took them, and no re-executing rank makes them again: rank 0 writes them back from rank
/// 2's log first (`limited::prepare`), or its re-execution waits for the flag in vain.
/// Returns rank 0's answer and the failures of "outer".
fn cluster_loss_scenario(fault: bool) -> (Option<u64>, Vec<cd::FailureRecord>) {
    let inject = match fault {
        true => "inject = { at = [{ rank = 0, iteration = 0, kind = \"rank_loss\" }] }\n",
        false => "",
    };
    let cfg = config(&format!(
        "cluster = 2\n[cd.outer]\ndependency_tracking = true\nmedium = \"buddy\"\n\
         [cd.s]\ncheck_classes = false\nmedium = \"buddy\"\nlog_medium = \"buddy\"\n{inject}"
    ));
    let out = cd::launch(
        &job(4).ranks_per_node(1),
        cfg,
        pgas::RpcTable::new(),
        || {
            let me = rank_me();
            let ws = words()?;
            if me == 0 {
                // Rank 2's message lands before rank 0's "outer" begins.
                wait_until(ws[0] + FLAG, |v| v == 1).unwrap();
            }
            let got = cd::strict("outer", |_| {
                cd::relaxed("s", |_| {
                    let got = match me {
                        0 => match wait_for(ws[0] + FLAG, 1) {
                            true => (ws[0] + X).read_local().unwrap(),
                            false => 0,
                        },
                        2 => {
                            put_signal(&[33u64], ws[0] + X, ws[0] + FLAG, Signal::Set(1)).unwrap();
                            0
                        }
                        _ => 0,
                    };
                    barrier();
                    Ok(got)
                })
            })?;
            barrier();
            Ok(got)
        },
    )
    .unwrap();
    let failures = failures_of(&out.report, "outer");
    (out.results.get(0).copied(), failures)
}

#[test]
fn a_message_from_outside_a_cluster_is_rebuilt_after_a_loss_in_it() {
    for fault in [false, true] {
        let (got, failures) = cluster_loss_scenario(fault);
        if let Some(got) = got {
            assert_eq!(got, 33, "fault: {fault}; failures {failures:?}");
        }
        if !fault {
            assert!(failures.is_empty(), "{failures:?}");
        } else if mpi_world_size().is_none() {
            assert_eq!(failures.len(), 1, "{failures:?}");
            assert!(failures[0].limited, "{failures:?}");
            assert_eq!(
                failures[0].ranks,
                vec![0, 1],
                "only the cluster re-executes"
            );
        }
    }
}
