//! A dependency-limited re-execution keeps the order that the first execution gave to the
//! accesses among its ranks. SPBC clusters of two (ranks 0 and 1; rank 2 alone), a soft error
//! in rank 1's relaxed CD: the cluster re-executes the strict CD "outer", rank 2 does not.
//!
//! - A collective whose result the log serves still orders the re-executing ranks' accesses
//!   (`limited::synchronize`): rank 1 reads its word before an all-reduce, rank 0 writes it
//!   after; served without a synchronization, rank 0's write could land before the read.
//! - A lock on rank 1 handed from rank 2 (outside) to rank 0 (inside) in one barrier phase:
//!   rank 1 applies rank 2's writes at its own epochs, which rank 0's live lock operations do
//!   not wait for, so the re-execution cannot give the hand-over its order. The preparation
//!   refuses (`phases::check`) and the whole group re-executes, with the right count; a
//!   limited re-execution would lose rank 2's add.

mod common;

use std::time::{Duration, Instant};

use cd_runtime as cd;
use common::{config, job, mpi_world_size};
use pgas::runtime_hooks::internal;
use pgas::{DistLock, GlobalPtr, Signal, barrier, put_signal, rank_me, wait_until};

/// Words per rank: `X` a value, `FLAG` a flag, `LOCK` a lock word, `COUNT` the count it guards.
const X: usize = 0;
const FLAG: usize = 1;
const LOCK: usize = 2;
const COUNT: usize = 3;
const WORDS: usize = 4;

/// This rank's words, zeroed, as every rank sees them (counting of incoming writes on first).
fn words() -> Result<Vec<GlobalPtr<u64>>, cd::CdError> {
    let w = pgas::new_array::<u64>(WORDS).unwrap();
    w.write_local_slice(&[0; WORDS]).unwrap();
    let ws = internal(|| pgas::allgather(w).wait());
    cd::relaxed("warm", |_| Ok(()))?;
    internal(barrier);
    Ok(ws)
}

/// Waits until `flag` holds `want`, for at most ten seconds; whether it did.
fn wait_for(flag: GlobalPtr<u64>, want: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    wait_until(flag, |v| v == want || Instant::now() > deadline).unwrap() == want
}

/// The configuration: clusters of two, "outer" tracking, a soft error at the end of rank 1's
/// relaxed CD if `fault`.
fn cfg(fault: bool) -> cd::CdConfig {
    let inject = match fault {
        true => "inject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n",
        false => "",
    };
    config(&format!(
        "cluster = 2\n[cd.outer]\ndependency_tracking = true\n\
         [cd.s]\ncheck_classes = false\n{inject}"
    ))
}

/// Rank 1's answer, and the failures and whole-group reasons of "outer".
type Outcome = (Option<u64>, Vec<cd::FailureRecord>, Vec<String>);

fn outcome(out: cd::CdOutcome<u64>) -> Outcome {
    let stats = out.report.cd("outer");
    let failures = stats.map(|s| s.failures.clone()).unwrap_or_default();
    let whole = stats.map(|s| s.whole_group.clone()).unwrap_or_default();
    (out.results.get(1).copied(), failures, whole)
}

/// Rank 1 reads its `X` (slowly) before an all-reduce, rank 0 puts 5 into it after.
fn collective_scenario(fault: bool) -> Outcome {
    let out = cd::launch(
        &job(3).ranks_per_node(1),
        cfg(fault),
        pgas::RpcTable::new(),
        || {
            let me = rank_me();
            let ws = words()?;
            let got = cd::strict("outer", |c| {
                c.preserve_global("x", ws[me] + X, 1);
                cd::relaxed("s", |_| {
                    let mut got = 0;
                    if me == 1 {
                        std::thread::sleep(Duration::from_millis(200));
                        got = (ws[1] + X).read_local().unwrap();
                    }
                    let sum = pgas::reduce_all(me as u64, u64::wrapping_add).wait();
                    if me == 0 {
                        pgas::rput(5u64, ws[1] + X).wait();
                    }
                    barrier();
                    Ok(got + 100 * sum)
                })
            })?;
            barrier();
            Ok(got)
        },
    )
    .unwrap();
    outcome(out)
}

/// Runs `scenario` without and with the fault: rank 1 answers `want` both times; on smp the
/// faulty run failed once, and `expect` holds of that failure and the whole-group reasons.
fn check(scenario: fn(bool) -> Outcome, want: u64, expect: fn(&cd::FailureRecord, &[String])) {
    for fault in [false, true] {
        let (got, failures, whole) = scenario(fault);
        if let Some(got) = got {
            assert_eq!(
                got, want,
                "fault: {fault}; failures {failures:?}; {whole:?}"
            );
        }
        if !fault {
            assert!(failures.is_empty(), "{failures:?}");
        } else if mpi_world_size().is_none() {
            assert_eq!(failures.len(), 1, "{failures:?}");
            expect(&failures[0], &whole);
        }
    }
}

#[test]
fn a_collective_served_from_the_log_still_orders_the_re_executing_ranks() {
    check(collective_scenario, 300, |failure, whole| {
        assert!(failure.limited, "{failure:?} {whole:?}");
        assert_eq!(failure.ranks, vec![0, 1], "only the cluster re-executes");
    });
}

/// Rank 1 (the lock's home) signals rank 2 after a while; rank 2 adds 10 under the lock and
/// signals rank 0, which adds 1 under it. Rank 1 answers the count after the barrier.
fn lock_scenario(fault: bool) -> Outcome {
    let out = cd::launch(
        &job(3).ranks_per_node(1),
        cfg(fault),
        pgas::RpcTable::new(),
        || {
            let me = rank_me();
            let ws = words()?;
            let lock = DistLock::from_word(ws[1] + LOCK);
            let add = |v: u64| {
                lock.acquire().unwrap();
                let x = pgas::rget(ws[1] + COUNT).wait();
                pgas::rput(x + v, ws[1] + COUNT).wait();
                lock.release().unwrap();
            };
            let got = cd::strict("outer", |c| {
                c.preserve_global("lock", ws[me] + LOCK, 2);
                cd::relaxed("s", |_| {
                    match me {
                        1 => {
                            // Rank 2's lock operations land in the epoch this signal opens.
                            std::thread::sleep(Duration::from_millis(200));
                            put_signal::<u64>(&[], ws[2] + FLAG, ws[2] + FLAG, Signal::Set(1))
                                .unwrap();
                        }
                        2 => {
                            assert!(wait_for(ws[2] + FLAG, 1), "rank 1's signal");
                            add(10);
                            put_signal::<u64>(&[], ws[0] + FLAG, ws[0] + FLAG, Signal::Set(1))
                                .unwrap();
                        }
                        _ => {
                            assert!(wait_for(ws[0] + FLAG, 1), "rank 2's signal");
                            add(1);
                        }
                    }
                    barrier();
                    Ok(match me {
                        1 => (ws[1] + COUNT).read_local().unwrap(),
                        _ => 0,
                    })
                })
            })?;
            barrier();
            Ok(got)
        },
    )
    .unwrap();
    outcome(out)
}

#[test]
fn a_lock_handed_from_outside_into_the_cluster_in_one_phase_re_executes_the_whole_group() {
    check(lock_scenario, 11, |failure, whole| {
        assert!(!failure.limited, "{failure:?}");
        assert!(
            whole
                .iter()
                .any(|w| w.contains("between the same two barriers")),
            "{whole:?}"
        );
    });
}
