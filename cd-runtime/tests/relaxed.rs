//! Relaxed CDs: the worked example of docs/relaxed-cds.md with its exact counters and replay
//! order, fault-free logging equal to CDs off, a failure at every epoch, gapless incoming
//! writes, logs emptied at strict completion, squash mismatches and uncovered combining
//! writes escalating, misclassified accesses.

mod common;

use cd_runtime as cd;
use cd_runtime::relaxed::{RecoveryTrace, ReplayEvent};
use cd_runtime::{CdConfig, CdError};
use common::{config, run};
use pgas::runtime_hooks::{self as resilience, internal};
use pgas::{GlobalPtr, barrier, rank_me, rget, rput};

fn gather_ptrs<T: 'static>(p: GlobalPtr<T>) -> Vec<GlobalPtr<T>> {
    internal(|| pgas::allgather(p).wait())
}

fn internal_barrier() {
    internal(barrier);
}

const X: u64 = 0x1111;
const Y: u64 = 0x2222;
const Z: u64 = 0x3333;

/// T0, T1, T2; C is T1's relaxed CD, begun with EC 5, IWC 10. Epoch 5: T0 puts x into T1
/// (IWC 11), T2 puts y (IWC 12); a barrier (EC 5 → 6 → 7); epoch 7: T1 gets z from T2; T1
/// fails. Recovery: EC := 5, x then y, barrier skipped (EC → 7), z from the log, forward.
#[test]
fn worked_example_counters_and_replay_order() {
    let cfg = config(
        "[cd.c]\ncheck_classes = false\ninject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n",
    );
    let out = run(3, cfg, || {
        let me = rank_me();
        let buf = pgas::new_array::<u64>(4).unwrap();
        let bufs = gather_ptrs(buf);
        if me == 2 {
            (buf + 2).write_local(Z).unwrap();
        }
        // T1's IWC to 10 (writes before the CD, unlogged) and every EC to 5. (The job counts
        // a rank's writes from its first relaxed CD on; the example counts from the start.)
        resilience::count_incoming_writes();
        internal_barrier();
        if me == 1 {
            while resilience::incoming_writes() < 10 {
                rput(0u64, buf + 3).wait();
            }
            assert_eq!(resilience::incoming_writes(), 10);
        }
        resilience::set_epoch(5);
        internal_barrier();
        let mut trace_begin = (0, 0);
        let got = cd::relaxed("c", |c| {
            if me == 1 {
                c.preserve_global("xy", buf, 2);
            }
            if !c.is_reexecution() {
                // Scaffolding, unseen by the hook: every rank has begun before any write.
                internal_barrier();
            }
            trace_begin = (resilience::epoch(), resilience::incoming_writes());
            if me == 0 {
                rput(X, bufs[1]).wait();
            }
            if me == 2 {
                while internal(|| rget(bufs[1]).wait()) != X {}
                rput(Y, bufs[1] + 1).wait();
            }
            if me == 1 {
                // Both writes land in epoch 5, before T1 enters the barrier (in the replay
                // they were applied when epoch 5 began).
                while (buf + 1).read_local().unwrap() != Y {
                    pgas::progress();
                }
            }
            barrier();
            let z = if me == 1 { rget(bufs[2] + 2).wait() } else { 0 };
            Ok((z, resilience::epoch()))
        })?;
        let mine = [buf.read_local().unwrap(), (buf + 1).read_local().unwrap()];
        let traces = cd::relaxed::recoveries();
        barrier();
        Ok((got, mine, trace_begin, traces))
    })
    .unwrap();
    // Under mpirun each process checks the ranks it ran; the report is the job's everywhere.
    if let Some((got, mine, _, traces)) = out.results.get(1) {
        assert_eq!(
            *got,
            (Z, 7),
            "z served from the log, EC 7 after the skipped barrier"
        );
        assert_eq!(*mine, [X, Y]);
        assert_eq!(traces.len(), 1);
        let t: &RecoveryTrace = &traces[0];
        assert_eq!((t.ec_begin, t.iwc_begin, t.iwc_end), (5, 10, 12));
        assert_eq!(t.asked, [0, 2]);
        use ReplayEvent::*;
        assert_eq!(
            t.events,
            [
                Incoming {
                    from: 0,
                    ec: 5,
                    iwc: 11
                },
                Incoming {
                    from: 2,
                    ec: 5,
                    iwc: 12
                },
                Epoch(6),
                Served {
                    lsn: 0,
                    what: "collective"
                },
                Epoch(7),
                Served {
                    lsn: 1,
                    what: "read"
                },
                Forward { ec: 7 },
            ]
        );
    }
    for r in [0, 2] {
        if let Some((.., traces)) = out.results.get(r) {
            assert!(traces.is_empty(), "rank {r} never re-executed");
        }
    }
    let s = out.report.cd("c").unwrap();
    assert_eq!((s.executions, s.reexecutions, s.escalations), (4, 1, 0));
    assert_eq!(s.entries_replayed, 2);
    assert_eq!(s.failures.len(), 1);
    assert_eq!(s.failures[0].ranks, [1], "T1 alone re-executed");
}

fn inject(cd: &str, rank: usize, extra: &str) -> CdConfig {
    config(&format!(
        "[cd.{cd}]\n{extra}\ninject = {{ at = [{{ rank = {rank}, iteration = 0, kind = \"soft\" }}] }}\n"
    ))
}

/// A body whose put depends on the execution: the squashed put differs from its log entry.
#[test]
fn a_non_deterministic_body_gets_the_squash_mismatch_error() {
    for nondeterministic in [false, true] {
        let out = run(2, inject("nd", 0, ""), move || {
            let me = rank_me();
            let buf = pgas::new_array::<u64>(2).unwrap();
            let bufs = gather_ptrs(buf);
            let r = cd::relaxed("nd", |c| {
                if me == 0 {
                    let v = if nondeterministic {
                        7 + u64::from(c.attempt())
                    } else {
                        7
                    };
                    rput(v, bufs[1]).wait();
                }
                Ok(())
            });
            barrier();
            Ok(r)
        })
        .unwrap();
        if let Some(r1) = out.results.get(1) {
            assert_eq!(*r1, Ok(()));
        }
        if !nondeterministic {
            if let Some(r0) = out.results.get(0) {
                assert_eq!(*r0, Ok(()), "the control recovers");
            }
            continue;
        }
        assert_eq!(out.report.cd("nd").unwrap().escalations, 1);
        let Some(r0) = out.results.get(0) else {
            continue;
        };
        match r0 {
            Err(CdError::Replay {
                cd, rank, reason, ..
            }) => {
                assert_eq!((cd.as_str(), *rank), ("nd", 0));
                assert!(reason.contains("differs from the logged bytes"), "{reason}");
            }
            other => panic!("expected the squash-mismatch error, got {other:?}"),
        }
        let msg = r0.clone().unwrap_err().to_string();
        assert!(msg.contains("\"nd\"") && msg.contains("rank 0"), "{msg}");
    }
}

/// A remote atomic add into F during C, replayed on top of its own effect, would count twice:
/// without a preservation covering the word, recovery refuses and escalates.
#[test]
fn an_uncovered_combining_write_escalates() {
    for covered in [true, false] {
        let out = run(2, inject("acc", 1, "check_classes = false"), move || {
            let me = rank_me();
            let buf = pgas::new_array::<u64>(2).unwrap();
            let bufs = gather_ptrs(buf);
            let ad = pgas::AtomicDomain::<u64>::new();
            internal_barrier();
            let r = cd::relaxed("acc", |c| {
                if me == 1 && covered {
                    c.preserve_global("counter", buf, 2);
                }
                if !c.is_reexecution() {
                    internal_barrier();
                }
                if me == 0 {
                    ad.fetch_add(bufs[1], 5).wait();
                } else {
                    while buf.read_local().unwrap() == 0 {
                        pgas::progress();
                    }
                }
                Ok(())
            });
            let value = buf.read_local().unwrap();
            barrier();
            Ok((r, value))
        })
        .unwrap();
        let Some((r, value)) = out.results.get(1) else {
            continue;
        };
        if covered {
            assert_eq!(*r, Ok(()));
            assert_eq!(*value, 5, "restored, then the add replayed once");
        } else {
            match r {
                Err(CdError::Replay {
                    cd, rank, reason, ..
                }) => {
                    assert_eq!((cd.as_str(), *rank), ("acc", 1));
                    assert!(reason.contains("combining"), "{reason}");
                }
                other => panic!("expected an escalation, got {other:?}"),
            }
        }
    }
}

/// A remote atomic add that lands after F's CD began but before F preserved the word is in
/// the preserved copy *and* in the incoming-write log: the recovery restores the copy and must
/// not apply the add a second time (it did, silently, before the preservation's IWC window).
#[test]
fn a_combining_write_already_in_the_preserved_copy_is_not_applied_twice() {
    let out = run(2, inject("early", 1, "check_classes = false"), move || {
        let me = rank_me();
        let buf = pgas::new_array::<u64>(2).unwrap();
        let bufs = gather_ptrs(buf);
        let ad = pgas::AtomicDomain::<u64>::new();
        internal_barrier();
        let r = cd::relaxed("early", |c| {
            if !c.is_reexecution() {
                internal_barrier(); // both CDs have begun
            }
            if me == 0 {
                ad.fetch_add(bufs[1], 5).wait();
            } else if !c.is_reexecution() {
                // The add has landed before the copy is taken.
                while buf.read_local().unwrap() == 0 {
                    pgas::progress();
                }
            }
            if me == 1 {
                c.preserve_global("counter", buf, 2);
            }
            Ok(())
        });
        let value = buf.read_local().unwrap();
        barrier();
        Ok((r, value, cd::relaxed::recoveries()))
    })
    .unwrap();
    if let Some((r, value, traces)) = out.results.get(1) {
        assert_eq!(*r, Ok(()));
        assert_eq!(*value, 5, "the add counted once");
        assert_eq!(traces.len(), 1);
        assert!(
            traces[0]
                .events
                .iter()
                .any(|e| matches!(e, ReplayEvent::InCopy { from: 0, .. })),
            "{:?}",
            traces[0].events
        );
    }
}

/// Rank 1 declares its buffer private; rank 0's relaxed CD writes into it.
#[test]
fn a_misclassified_access_is_a_classification_error() {
    for misclassified in [false, true] {
        let out = run(2, config("[cd.cls]\ncheck_classes = true\n"), move || {
            let me = rank_me();
            let buf = pgas::new_array::<u64>(4).unwrap();
            let other = pgas::new_array::<u64>(4).unwrap();
            let bufs = gather_ptrs(buf);
            let others = gather_ptrs(other);
            let r = cd::relaxed("cls", |c| {
                if me == 1 {
                    c.private("mine", buf, 4);
                }
                internal_barrier();
                if me == 0 {
                    let target = if misclassified {
                        bufs[1] + 2
                    } else {
                        others[1]
                    };
                    rput(1u64, target).wait();
                }
                internal_barrier();
                Ok(())
            });
            barrier();
            Ok(r)
        })
        .unwrap();
        if let Some(r1) = out.results.get(1) {
            assert_eq!(*r1, Ok(()));
        }
        let Some(r0) = out.results.get(0) else {
            continue;
        };
        if !misclassified {
            assert_eq!(*r0, Ok(()));
            continue;
        }
        match r0 {
            Err(CdError::Classification(e)) => {
                assert_eq!((e.cd.as_str(), e.rank), ("cls", 0));
                assert_eq!((e.owner_cd.as_str(), e.owner), ("cls", 1));
                assert_eq!((e.region.as_str(), e.class.as_str()), ("mine", "private"));
                let msg = e.to_string();
                assert!(msg.contains("mine") && msg.contains("\"cls\""), "{msg}");
            }
            other => panic!("expected a classification error, got {other:?}"),
        }
    }
}

/// Allocation addresses and `cd::rng()` draws come back from the log in a replay.
#[test]
fn allocations_and_rng_draws_replay() {
    use rand::RngCore;
    let body = || {
        let r = cd::relaxed("nd2", |_| {
            let p = pgas::new_array::<u64>(3).unwrap();
            let draw = cd::rng().next_u64();
            pgas::delete_(p).unwrap();
            Ok((p.offset(), draw))
        })?;
        barrier();
        Ok(r)
    };
    let clean = run(2, CdConfig::default(), body).unwrap();
    let failed = run(2, inject("nd2", 0, ""), body).unwrap();
    assert_eq!(clean.results, failed.results);
    let s = failed.report.cd("nd2").unwrap();
    assert_eq!(s.reexecutions, 1);
    assert_eq!(s.entries_replayed, 2, "the allocation and the draw");
}

/// A strict CD's completion deletes the logs of the relaxed CDs inside; spilled logs are
/// read back for the recovery.
#[test]
fn logs_spill_to_files_and_are_deleted_at_strict_completion() {
    let cfg = config(
        "[cd.sp]\ncheck_classes = false\nlog_spill_bytes = 64\n\
         inject = { at = [{ rank = 1, iteration = 1, kind = \"soft\" }] }\n",
    );
    let out = run(2, cfg, || {
        let me = rank_me();
        let buf = pgas::new_array::<u64>(64).unwrap();
        // Constants others read remotely (outside the restored region: a recovery rolls
        // back what it restores, under the feet of a remote reader).
        let consts: Vec<u64> = (0..16).map(|k| me as u64 * 1000 + k).collect();
        (buf + 32).write_local_slice(&consts).unwrap();
        let bufs = gather_ptrs(buf);
        let mut seen = Vec::new();
        let mut sums = Vec::new();
        cd::strict("outer", |_| {
            for round in 0..3u64 {
                let s = cd::relaxed("sp", |c| {
                    c.preserve_global("in", buf, 16);
                    let peer = bufs[1 - me];
                    // First a barrier: no write of this round lands in a rank still
                    // recovering the previous one.
                    barrier();
                    for k in 0..16 {
                        rput(round * 100 + k as u64, peer + k).wait();
                    }
                    barrier();
                    let mut sum = 0;
                    for k in 0..16 {
                        sum += rget(peer + 32 + k).wait();
                    }
                    let mut mine = [0u64; 16];
                    buf.read_local_slice(&mut mine).unwrap();
                    Ok(sum + mine.iter().sum::<u64>())
                })?;
                sums.push(s);
                seen.push(cd::relaxed::logged_entries());
            }
            Ok(())
        })?;
        let after = cd::relaxed::logged_entries();
        Ok((sums, seen, after))
    })
    .unwrap();
    for (r, (sums, seen, after)) in out.results.with_ranks() {
        let remote = 16_000 * (1 - r as u64) + 120;
        let want: Vec<u64> = (0..3).map(|round| remote + round * 1600 + 120).collect();
        assert_eq!(*sums, want, "rank {r}");
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "pushed to the parent: {seen:?}"
        );
        assert_eq!(*after, 0, "deleted at the strict completion");
    }
    let s = out.report.cd("sp").unwrap();
    assert!(
        s.entries_spilled > 0,
        "the running CDs' stores spilled: {s:?}"
    );
    let outer = out.report.cd("outer").unwrap();
    assert!(
        outer.entries_spilled > 0,
        "the pushed logs spilled: {outer:?}"
    );
    assert_eq!(s.reexecutions, 1);
    assert_eq!(s.entries_replayed, 18, "two barriers and 16 reads");
}
