//! Preservation media and kinds under faults: buddy, local, file; by reference; by
//! regeneration; rank losses contained where the copies survive and escalated where not.

mod common;

use std::cell::Cell;
use std::rc::Rc;

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdError};
use common::{M, Ring, config, message, run, step};
use pgas::GlobalPtr;

const N: usize = 16;

/// Updates the segment array `g` from `x` (reads it first: a lost segment shows).
fn update_global(g: GlobalPtr<f64>, x: &[f64]) {
    let mut v = pgas::rget_slice(g, N).wait();
    for (a, b) in v.iter_mut().zip(x) {
        *a = (*a * 2.0 + b) % M;
    }
    pgas::rput_slice(&v, g).wait();
}

/// A fresh segment array with rank-dependent contents.
fn new_global() -> GlobalPtr<f64> {
    let g = pgas::new_array::<f64>(N).unwrap();
    let init: Vec<f64> = (0..N).map(|i| (i * 7 + pgas::rank_me()) as f64).collect();
    pgas::rput_slice(&init, g).wait();
    g
}

/// `iters` CDs "step", each preserving `x` (and the segment array if `preserve_global`),
/// updating both and exchanging `x` around the ring. Returns x followed by the array.
fn steps(
    ranks: usize,
    cfg: CdConfig,
    iters: usize,
    preserve_global: bool,
) -> cd::CdOutcome<Vec<f64>> {
    run(ranks, cfg, || {
        let ring = Ring::new(N);
        let g = new_global();
        let mut x: Vec<f64> = (0..N).map(|i| i as f64).collect();
        for it in 0..iters {
            cd::strict("step", |c| {
                c.preserve("x", &mut x);
                if preserve_global {
                    c.preserve_global("g", g, N);
                }
                step(&mut x, it as u64);
                update_global(g, &x);
                ring.exchange(&pgas::world(), &mut x);
                Ok(())
            })?;
        }
        let mut out = x;
        out.extend(pgas::rget_slice(g, N).wait());
        Ok(out)
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn buddy_medium_recovers_private_and_segment_state_after_a_rank_loss() {
    let clean = steps(4, CdConfig::default(), 4, true);
    let faulty = steps(
        4,
        config(
            "[cd.step]\nmedium = \"buddy\"\n\
             inject = { at = [{ rank = 2, iteration = 1, kind = \"rank_loss\" }] }\n",
        ),
        4,
        true,
    );
    assert_eq!(
        faulty.results, clean.results,
        "same answer after the rank loss"
    );
    let s = faulty.report.cd("step").unwrap();
    assert_eq!((s.injected, s.reexecutions, s.escalations), (1, 4, 0));
    assert_eq!(s.executions, 4 * 4 + 4);
    assert!(s.bytes_buddy >= (4 * 4 * 2 * N * 8) as u64, "{s:?}");
    assert_eq!(s.bytes_local, 0);
}

/// The buddy copies go into the buddy's segment (default region), by rpc when it has no room
/// (`buddy_segment_bytes = 0`), or both (a region too small for all of them); a rank loss is
/// contained the same way in all three, and the report says which bytes went by rpc.
#[test]
fn buddy_copies_into_the_segment_or_by_rpc_recover_the_same() {
    let clean = steps(4, CdConfig::default(), 4, true);
    for (region, rpc) in [
        ("", "none"),
        ("buddy_segment_bytes = 0\n", "all"),
        ("buddy_segment_bytes = 200\n", "some"),
    ] {
        let faulty = steps(
            4,
            config(&format!(
                "{region}[cd.step]\nmedium = \"buddy\"\n\
                 inject = {{ at = [{{ rank = 1, iteration = 2, kind = \"rank_loss\" }}] }}\n"
            )),
            4,
            true,
        );
        assert_eq!(faulty.results, clean.results, "{region}");
        let s = faulty.report.cd("step").unwrap();
        assert_eq!(
            (s.injected, s.reexecutions, s.escalations),
            (1, 4, 0),
            "{region}"
        );
        match rpc {
            "none" => assert_eq!(s.bytes_buddy_rpc, 0, "{s:?}"),
            "all" => assert_eq!(s.bytes_buddy_rpc, s.bytes_buddy, "{s:?}"),
            _ => assert!(
                s.bytes_buddy_rpc > 0 && s.bytes_buddy_rpc < s.bytes_buddy,
                "{s:?}"
            ),
        }
    }
}

/// `steps` with the segment array on 6 ranks on two emulated nodes of 4 and 2 ranks.
fn steps_on_two_nodes(cfg: CdConfig) -> Result<cd::CdOutcome<Vec<f64>>, cd::CdLaunchError> {
    let job = common::job(6).ranks_per_node(4);
    cd::launch(&job, cfg, pgas::RpcTable::new(), || {
        let ring = Ring::new(N);
        let g = new_global();
        let mut x: Vec<f64> = (0..N).map(|i| i as f64).collect();
        for it in 0..3 {
            cd::strict("step", |c| {
                c.preserve("x", &mut x);
                c.preserve_global("g", g, N);
                step(&mut x, it as u64);
                update_global(g, &x);
                ring.exchange(&pgas::world(), &mut x);
                Ok(())
            })?;
        }
        let mut out = x;
        out.extend(pgas::rget_slice(g, N).wait());
        Ok(out)
    })
}

/// All four ranks of node 0 (of two uneven nodes, 4 and 2 ranks) lose their memory in the
/// same execution: with buddies on the other node (`buddy_domain = "node"`, the default) every
/// copy survives on one side and the node's loss is contained; with `"rank"` (the next rank)
/// ranks 0 to 2 kept their copies on node 0 itself, and the run stops.
#[test]
fn a_node_loss_is_contained_when_buddies_are_on_other_nodes() {
    let clean = steps_on_two_nodes(CdConfig::default()).unwrap();
    let losses = "[cd.step]\nmedium = \"buddy\"\ninject = { at = [\
                  { rank = 0, iteration = 1, kind = \"rank_loss\" }, \
                  { rank = 1, iteration = 1, kind = \"rank_loss\" }, \
                  { rank = 2, iteration = 1, kind = \"rank_loss\" }, \
                  { rank = 3, iteration = 1, kind = \"rank_loss\" }] }\n";
    let faulty = steps_on_two_nodes(config(losses)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(faulty.results, clean.results);
    let s = faulty.report.cd("step").unwrap();
    assert_eq!(
        (s.injected, s.reexecutions, s.escalations),
        (4, 6, 0),
        "{s:?}"
    );
    let e = steps_on_two_nodes(config(&format!("buddy_domain = \"rank\"\n{losses}")))
        .map(|o| o.results)
        .unwrap_err();
    assert!(e.to_string().contains("preserved state lost"), "{e}");
}

#[test]
fn the_rank_loss_is_real_segment_data_not_preserved_is_lost() {
    // The control of the test above: without preserve_global the lost segment shows in the
    // answer (so the answer above was restored, not merely left alone).
    let clean = steps(2, CdConfig::default(), 2, false);
    let faulty = steps(
        2,
        config(
            "[cd.step]\nmedium = \"buddy\"\n\
             inject = { at = [{ rank = 1, iteration = 0, kind = \"rank_loss\" }] }\n",
        ),
        2,
        false,
    );
    assert_ne!(faulty.results[1], clean.results[1]);
    assert_eq!(faulty.report.cd("step").unwrap().reexecutions, 2);
}

/// "outer" (preserving x and the segment array on the configured medium) around "inner"
/// (local medium), `iters` times.
fn nested(
    ranks: usize,
    cfg: CdConfig,
    iters: usize,
) -> Result<cd::CdOutcome<Vec<f64>>, cd::CdLaunchError> {
    nested_as(ranks, cfg, iters, false)
}

/// [`nested`], with `x` preserved as a typed value or (`bytes`) as raw bytes.
fn nested_as(
    ranks: usize,
    cfg: CdConfig,
    iters: usize,
    bytes: bool,
) -> Result<cd::CdOutcome<Vec<f64>>, cd::CdLaunchError> {
    let keep = move |c: &cd::Cd, x: &mut Vec<f64>| {
        if bytes {
            c.preserve_slice("x", x);
        } else {
            c.preserve("x", x);
        }
    };
    run(ranks, cfg, move || {
        let ring = Ring::new(N);
        let g = new_global();
        let mut x: Vec<f64> = (0..N).map(|i| i as f64 + 0.5 * 2.0).collect();
        for it in 0..iters {
            cd::strict("outer", |c| {
                keep(c, &mut x);
                c.preserve_global("g", g, N);
                step(&mut x, it as u64);
                cd::strict("inner", |c| {
                    keep(c, &mut x);
                    c.preserve_global("g", g, N);
                    update_global(g, &x);
                    step(&mut x, 100);
                    Ok(())
                })?;
                ring.exchange(&pgas::world(), &mut x);
                Ok(())
            })?;
        }
        let mut out = x;
        out.extend(pgas::rget_slice(g, N).wait());
        Ok(out)
    })
}

#[test]
fn local_medium_loss_escalates_to_a_parent_on_buddy_or_file() {
    let clean = nested(3, CdConfig::default(), 3).unwrap();
    let dir = std::env::temp_dir().join(format!("cd-media-test-{}", std::process::id()));
    for parent in ["buddy", "file"] {
        let cfg = config(&format!(
            "file_dir = {dir:?}\n[cd.outer]\nmedium = \"{parent}\"\n\
             [cd.inner]\nmedium = \"local\"\n\
             inject = {{ at = [{{ rank = 1, iteration = 1, kind = \"rank_loss\" }}] }}\n"
        ));
        let out = nested(3, cfg, 3).unwrap_or_else(|e| panic!("{parent}: {e}"));
        assert_eq!(out.results, clean.results, "parent on {parent}");
        let inner = out.report.cd("inner").unwrap();
        assert_eq!((inner.injected, inner.reexecutions), (1, 0));
        assert_eq!(
            inner.escalations, 3,
            "every rank of inner escalated, at once"
        );
        let outer = out.report.cd("outer").unwrap();
        assert_eq!((outer.reexecutions, outer.escalations), (3, 0));
        if parent == "file" {
            assert!(outer.bytes_file > 0);
        } else {
            assert!(outer.bytes_buddy > 0);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn only_local_preservation_ends_with_an_error_naming_the_cause() {
    let cfg = config(
        "[defaults]\nmedium = \"local\"\n\
         [cd.inner]\ninject = { at = [{ rank = 1, iteration = 1, kind = \"rank_loss\" }] }\n",
    );
    let msg = message(nested(2, cfg, 3));
    for want in [
        "\"outer\"",
        "rank loss",
        "preserved state lost",
        "escalated past the root CD",
    ] {
        assert!(msg.contains(want), "{want:?} not in: {msg}");
    }
}

#[test]
fn file_medium_restores_and_leaves_a_configured_directory_in_place() {
    let dir = std::env::temp_dir().join(format!("cd-file-medium-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let keep = dir.join("keep.txt");
    std::fs::write(&keep, "the user's file").unwrap();
    let clean = steps(2, CdConfig::default(), 3, true);
    let faulty = steps(
        2,
        config(&format!(
            "file_dir = {dir:?}\n[cd.step]\nmedium = \"file\"\n\
             inject = {{ at = [{{ rank = 0, iteration = 0, kind = \"rank_loss\" }}, \
             {{ rank = 1, iteration = 2, kind = \"soft\" }}] }}\n"
        )),
        3,
        true,
    );
    assert_eq!(faulty.results, clean.results);
    let s = faulty.report.cd("step").unwrap();
    assert_eq!((s.injected, s.reexecutions), (2, 4));
    assert!(s.bytes_file >= (3 * 2 * 2 * N * 8) as u64);
    assert!(keep.exists(), "launch removed a file it did not write");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        left,
        vec![keep.clone()],
        "the CD files and rank folders are gone"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn preserve_by_reference_restores_from_the_parent() {
    let program = |cfg: CdConfig| {
        run(2, cfg, || {
            let mut x: Vec<f64> = (0..N).map(|i| (i * 3) as f64).collect();
            let mut y = 5u64;
            for it in 0..2 {
                cd::strict("parent", |c| {
                    c.preserve("x", &mut x);
                    c.preserve("y", &mut y);
                    cd::strict("child", |c| {
                        c.preserve("x", &mut x); // equal to the parent's copy: by reference
                        c.preserve_reference("y", &mut y);
                        step(&mut x, it);
                        y = y * 3 + 1;
                        Ok(())
                    })?;
                    step(&mut x, 7);
                    Ok(())
                })?;
            }
            Ok((x, y))
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let clean = program(CdConfig::default());
    let faulty = program(config(
        "[cd.child]\ninject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }, \
         { rank = 0, iteration = 1, kind = \"soft\" }] }\n",
    ));
    assert_eq!(faulty.results, clean.results);
    let child = faulty.report.cd("child").unwrap();
    assert_eq!(child.reexecutions, 4);
    assert_eq!(
        child.bytes_local, 0,
        "nothing copied: both entries refer to the parent"
    );
    assert!(
        child.bytes_by_reference >= (2 * 2 * N * 8) as u64,
        "{child:?}"
    );
    assert!(faulty.report.cd("parent").unwrap().bytes_local > 0);
}

/// `preserve_slice_reference`: a slice the parent just preserved, referred to without a copy
/// or a comparison, restored from the parent's copy in the child's re-executions; with no
/// ancestor's entry of that name it panics naming the CD and the entry.
#[test]
fn a_slice_preserved_by_reference_restores_from_the_parent() {
    let program = |cfg: CdConfig| {
        run(2, cfg, || {
            let mut x: Vec<f64> = (0..N).map(|i| (i * 5) as f64).collect();
            for it in 0..3 {
                cd::strict("parent", |c| {
                    c.preserve_slice("x", &mut x);
                    cd::strict("child", |c| {
                        c.preserve_slice_reference("x", &mut x);
                        step(&mut x, it);
                        Ok(())
                    })?;
                    step(&mut x, 11);
                    Ok(())
                })?;
            }
            Ok(x)
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let clean = program(CdConfig::default());
    let faulty = program(config(
        "[cd.child]\ninject = { at = [{ rank = 0, iteration = 0, kind = \"soft\" }, \
         { rank = 1, iteration = 2, kind = \"soft\" }] }\n",
    ));
    assert_eq!(faulty.results, clean.results);
    let child = faulty.report.cd("child").unwrap();
    assert_eq!(child.reexecutions, 4, "both ranks, twice");
    assert_eq!(child.bytes_local, 0, "nothing copied");
    assert_eq!(
        child.bytes_by_reference,
        (2 * 3 * N * 8) as u64,
        "one reference per first execution"
    );

    let orphan = std::panic::catch_unwind(|| {
        run(1, CdConfig::default(), || {
            let mut x = vec![1.0f64; 4];
            cd::strict("alone", |c| {
                c.preserve_slice_reference("x", &mut x);
                Ok(())
            })
        })
    });
    let message = match orphan {
        Ok(Err(e)) => e.to_string(),
        Ok(Ok(_)) => panic!("a reference with no enclosing copy was accepted"),
        Err(p) => p.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(
        message.contains("preserve_slice_reference(`x`)") && message.contains("alone"),
        "{message}"
    );
}

#[test]
fn a_durable_child_does_not_refer_to_a_local_parent_copy() {
    // The child asks for its copy on the buddy: referring to the parent's local copy (lost
    // with the rank) would make the loss escalate; it must copy and contain it.
    let program = |cfg: CdConfig| {
        run(2, cfg, || {
            let mut x: Vec<f64> = (0..N).map(|i| i as f64).collect();
            cd::strict("parent", |c| {
                c.preserve("x", &mut x);
                cd::strict("child", |c| {
                    c.preserve("x", &mut x);
                    step(&mut x, 1);
                    Ok(())
                })
            })?;
            Ok(x)
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let clean = program(CdConfig::default());
    let faulty = program(config(
        "[cd.parent]\nmedium = \"local\"\n[cd.child]\nmedium = \"buddy\"\n\
         inject = { at = [{ rank = 0, iteration = 0, kind = \"rank_loss\" }] }\n",
    ));
    assert_eq!(faulty.results, clean.results);
    let child = faulty.report.cd("child").unwrap();
    assert_eq!((child.reexecutions, child.escalations), (2, 0));
    assert_eq!(child.bytes_by_reference, 0);
    assert!(child.bytes_buddy > 0);
}

#[test]
fn regeneration_recomputes_only_in_a_reexecution() {
    let program = |cfg: CdConfig| {
        run(2, cfg, || {
            let calls = Rc::new(Cell::new(0u32));
            let table_of =
                move || -> Vec<f64> { (0..N).map(|i| (i * i + pgas::rank_me()) as f64).collect() };
            let mut table = table_of();
            let mut x = vec![1.0f64; N];
            for it in 0..3 {
                let calls = calls.clone();
                cd::strict("regen", |c| {
                    let calls = calls.clone();
                    c.preserve_regenerate("table", &mut table, move || {
                        calls.set(calls.get() + 1);
                        table_of()
                    });
                    c.preserve("x", &mut x);
                    table[it] = -1.0; // scribbled over; a re-execution must see it regenerated
                    for (a, t) in x.iter_mut().zip(&table) {
                        *a = (*a * 2.0 + t) % M;
                    }
                    table = table_of();
                    Ok(())
                })?;
            }
            Ok((x, calls.get()))
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let clean = program(CdConfig::default());
    assert!(clean.results.iter().all(|(_, calls)| *calls == 0));
    let faulty = program(config(
        "[cd.regen]\ninject = { at = [{ rank = 0, iteration = 1, kind = \"soft\" }] }\n",
    ));
    for (f, c) in faulty.results.iter().zip(&clean.results) {
        assert_eq!(f.0, c.0);
        assert_eq!(f.1, 1, "regenerated once, in the one re-execution");
    }
    let s = faulty.report.cd("regen").unwrap();
    assert_eq!(s.reexecutions, 2);
    assert_eq!(
        s.bytes_local,
        (3 * 2 * (N * 8 + 1)) as u64,
        "x only (postcard: length + f64s)"
    );
}

/// top (buddy) > mid (local) > a child that loses rank 1's memory (contained, buddy), then a
/// soft error in mid on rank 0: rank 1 can no longer restore mid and must say so.
#[test]
fn a_rank_that_lost_its_copies_earlier_makes_the_cd_escalate() {
    let program = |cfg: CdConfig| {
        run(2, cfg, || {
            let mut x: Vec<f64> = (0..N).map(|i| i as f64).collect();
            cd::strict("top", |c| {
                c.preserve("x", &mut x);
                step(&mut x, 1);
                cd::strict("mid", |c| {
                    c.preserve("x", &mut x);
                    step(&mut x, 2);
                    cd::strict("lossy", |c| {
                        c.preserve("x", &mut x);
                        step(&mut x, 3);
                        Ok(())
                    })?;
                    step(&mut x, 4);
                    Ok(())
                })
            })?;
            Ok(x)
        })
    };
    let clean = program(CdConfig::default()).unwrap();
    let faulty = program(config(
        "[cd.top]\nmedium = \"buddy\"\n[cd.mid]\nmedium = \"local\"\n\
         inject = { at = [{ rank = 0, iteration = 0, kind = \"soft\" }] }\n\
         [cd.lossy]\nmedium = \"buddy\"\n\
         inject = { at = [{ rank = 1, iteration = 0, kind = \"rank_loss\" }] }\n",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(faulty.results, clean.results);
    let r = &faulty.report;
    assert_eq!(
        r.cd("lossy").unwrap().reexecutions,
        2,
        "the loss was contained"
    );
    assert_eq!(
        r.cd("mid").unwrap().escalations,
        2,
        "rank 1 cannot restore mid"
    );
    assert_eq!(r.cd("top").unwrap().reexecutions, 2);
}

/// Rank 0 loses its memory (and the copies it held for rank 1, which rank 1 stores again
/// before lose0 re-executes), then rank 1 loses its own: rank 0's copy of mid is gone on both
/// sides (its own with rank 0's loss, the buddy's with rank 1's), so mid escalates to top
/// (file) at the next failure instead of failing to fetch from the buddy.
#[test]
fn losing_both_copies_of_a_buddy_entry_escalates() {
    let program = |cfg: CdConfig| {
        run(2, cfg, || {
            let mut x: Vec<f64> = (0..N).map(|i| i as f64).collect();
            cd::strict("top", |c| {
                c.preserve("x", &mut x);
                cd::strict("mid", |c| {
                    c.preserve("x", &mut x);
                    step(&mut x, 2);
                    for name in ["lose0", "lose1"] {
                        cd::strict(name, |c| {
                            c.preserve("x", &mut x);
                            step(&mut x, 3);
                            Ok(())
                        })?;
                    }
                    Ok(())
                })
            })?;
            Ok(x)
        })
    };
    let clean = program(CdConfig::default()).unwrap();
    let dir = std::env::temp_dir().join(format!("cd-double-loss-{}", std::process::id()));
    let faulty = program(config(&format!(
        "file_dir = {dir:?}\n[defaults]\nmedium = \"buddy\"\n[cd.top]\nmedium = \"file\"\n\
         [cd.mid]\ninject = {{ at = [{{ rank = 0, iteration = 0, kind = \"soft\" }}] }}\n\
         [cd.lose0]\ninject = {{ at = [{{ rank = 0, iteration = 0, kind = \"rank_loss\" }}] }}\n\
         [cd.lose1]\ninject = {{ at = [{{ rank = 1, iteration = 0, kind = \"rank_loss\" }}] }}\n"
    )))
    .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(faulty.results, clean.results);
    let r = &faulty.report;
    assert_eq!(r.cd("mid").unwrap().escalations, 2);
    assert_eq!(r.cd("top").unwrap().reexecutions, 2);
}

/// Three ranks, buddies 0 -> 1 -> 2 -> 0. Rank 0 loses its memory (and rank 2's copies in its
/// segment); before the re-execution rank 2 stores them again from its own copies. Then rank 2
/// loses its memory: its copy of mid at rank 0 is the stored-again one, so a later failure of
/// mid is contained (without storing again, mid escalated: rank 2 had no copy left).
#[test]
fn copies_a_buddy_lost_are_stored_again_before_the_owner_is_lost() {
    let program = |cfg: CdConfig| {
        run(3, cfg, || {
            let mut x: Vec<f64> = (0..N).map(|i| i as f64).collect();
            cd::strict("mid", |c| {
                c.preserve("x", &mut x);
                step(&mut x, 2);
                for name in ["lose0", "lose2"] {
                    cd::strict(name, |c| {
                        c.preserve("x", &mut x);
                        step(&mut x, 3);
                        Ok(())
                    })?;
                }
                Ok(())
            })?;
            Ok(x)
        })
    };
    let clean = program(CdConfig::default()).unwrap();
    let faulty = program(config(
        "[defaults]\nmedium = \"buddy\"\n\
         [cd.mid]\ninject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n\
         [cd.lose0]\ninject = { at = [{ rank = 0, iteration = 0, kind = \"rank_loss\" }] }\n\
         [cd.lose2]\ninject = { at = [{ rank = 2, iteration = 0, kind = \"rank_loss\" }] }\n",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(faulty.results, clean.results);
    let mid = faulty.report.cd("mid").unwrap();
    assert_eq!((mid.reexecutions, mid.escalations), (3, 0), "{mid:?}");
    assert_eq!(mid.bytes_buddy_rpc, 0);
}

#[test]
fn a_failed_check_outside_any_cd_is_an_error() {
    let msg = message(run(2, CdConfig::default(), || {
        let x = 2 + pgas::rank_me();
        cd::check!(x == 2, "rank {} computed {x}", pgas::rank_me());
        Ok(x)
    }));
    assert!(msg.contains("rank 1 computed 3"), "{msg}");
    assert!(msg.contains("root CD"), "{msg}");
}

#[test]
fn report_false_leaves_a_cd_out_of_the_report() {
    let out = run(2, config("[cd.quiet]\nreport = false\n"), || {
        cd::strict("quiet", |_| Ok(()))?;
        cd::strict("loud", |_| Ok(()))
    })
    .unwrap();
    assert!(out.report.cd("quiet").is_none());
    assert_eq!(out.report.cd("loud").unwrap().executions, 2);
}

#[test]
fn errors_from_a_body_are_returned_not_lost() {
    // A detected error that exhausts the retries reaches the caller of `strict`.
    let out = run(2, config("[cd.bad]\nretries = 1\n"), || {
        let r = cd::strict("bad", |_| -> Result<(), CdError> {
            Err(CdError::detected("always"))
        });
        Ok(match r {
            Err(CdError::Escalated { cd, attempts, .. }) => (cd, attempts),
            other => panic!("{other:?}"),
        })
    })
    .unwrap();
    assert_eq!(out.results, vec![("bad".to_string(), 2); 2]);
}

/// Names what the program's hook saw: rpcs, replies, collectives.
#[derive(Default)]
struct Seen(std::cell::RefCell<Vec<String>>);

impl pgas::runtime_hooks::Interceptor for Seen {
    fn before_rpc(
        &self,
        _: pgas::runtime_hooks::OpId,
        call: &pgas::runtime_hooks::RpcCall,
        _: &[u8],
    ) -> pgas::runtime_hooks::RpcAction {
        self.0.borrow_mut().push(format!("rpc {}", call.name));
        pgas::runtime_hooks::RpcAction::Proceed
    }
    fn before_reply(
        &self,
        reply: &pgas::runtime_hooks::RpcReply,
        _: &[u8],
    ) -> pgas::runtime_hooks::ReplyAction {
        self.0.borrow_mut().push(format!("reply {}", reply.name));
        pgas::runtime_hooks::ReplyAction::Proceed
    }
    fn before_collective(
        &self,
        _: pgas::runtime_hooks::OpId,
        c: &pgas::runtime_hooks::Collective,
    ) -> pgas::runtime_hooks::CollectiveAction {
        self.0.borrow_mut().push(format!("{:?}", c.kind));
        pgas::runtime_hooks::CollectiveAction::Proceed
    }
}

#[test]
fn buddy_preservation_and_agreement_are_not_the_programs_communication() {
    let out = run(4, config("[cd.step]\nmedium = \"buddy\"\n"), || {
        let seen = Rc::new(Seen::default());
        pgas::runtime_hooks::set_hook(seen.clone());
        let (ec, iwc) = (pgas::epoch(), pgas::runtime_hooks::incoming_writes());
        let g = pgas::new_array::<f64>(N).unwrap();
        let mut x: Vec<f64> = (0..N).map(|i| i as f64).collect();
        for it in 0..3 {
            cd::strict("step", |c| {
                c.preserve("x", &mut x);
                c.preserve_global("g", g, N);
                step(&mut x, it);
                Ok(())
            })?;
        }
        let counters = (
            pgas::epoch() - ec,
            pgas::runtime_hooks::incoming_writes() - iwc,
        );
        pgas::runtime_hooks::clear_hook();
        Ok((seen.0.take(), counters))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    for (seen, counters) in out.results {
        assert_eq!(
            seen,
            Vec::<String>::new(),
            "the hook saw the CD runtime's traffic"
        );
        assert_eq!(
            counters,
            (0, 0),
            "(EC, IWC) moved by the CD runtime's traffic"
        );
    }
}

/// `nested` with `x` preserved as raw bytes (`preserve_slice`), the copies a memory budget
/// moves (typed values of `preserve` stay in memory).
fn nested_bytes(
    ranks: usize,
    cfg: CdConfig,
    iters: usize,
) -> Result<cd::CdOutcome<Vec<f64>>, cd::CdLaunchError> {
    nested_as(ranks, cfg, iters, true)
}

/// Demand preservation: past `memory_budget_bytes` the oldest local copies (the outer CD's)
/// move to files, the inner CD's stay in memory; soft errors in both CDs still give the
/// fault-free answer, restoring from the moved copies. Without a budget nothing moves.
#[test]
fn a_memory_budget_spills_the_oldest_copies_to_files_instead_of_failing() {
    let clean = nested_bytes(3, CdConfig::default(), 4).unwrap();
    let outer0 = clean.report.cd("outer").unwrap();
    assert_eq!(outer0.bytes_spilled, 0, "no budget, nothing moves");
    let dir = std::env::temp_dir().join(format!("cd-spill-test-{}", std::process::id()));
    // Each CD keeps x and g (128 bytes each) locally: a budget of 300 bytes holds one CD's
    // copies, not both.
    let cfg = config(&format!(
        "file_dir = {dir:?}\nmemory_budget_bytes = 300\n[defaults]\nmedium = \"local\"\n\
         [cd.outer]\ninject = {{ at = [{{ rank = 2, iteration = 1, kind = \"soft\" }}] }}\n\
         [cd.inner]\ninject = {{ at = [{{ rank = 0, iteration = 2, kind = \"soft\" }}] }}\n"
    ));
    let out = nested_bytes(3, cfg, 4).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.results, clean.results, "bit-exact with spilled copies");
    let outer = out.report.cd("outer").unwrap();
    let inner = out.report.cd("inner").unwrap();
    assert!(outer.bytes_spilled > 0, "the outer (oldest) copies moved");
    assert_eq!(inner.bytes_spilled, 0, "the inner copies stayed in memory");
    assert!(outer.reexecutions > 0 && inner.reexecutions > 0);
    assert!(
        std::fs::read_dir(&dir).map_or(true, |d| d.count() == 0),
        "the spilled copies' files are gone after the run"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A budget below every copy moves them all to files, which a rank loss does not take: losses
/// in both CDs then recover (a local-only run would stop, as
/// `only_local_preservation_ends_with_an_error_naming_the_cause` shows).
#[test]
fn spilled_copies_survive_a_rank_loss() {
    let clean = nested_bytes(3, CdConfig::default(), 4).unwrap();
    let dir = std::env::temp_dir().join(format!("cd-spill-loss-{}", std::process::id()));
    let cfg = config(&format!(
        "file_dir = {dir:?}\nmemory_budget_bytes = 64\n[defaults]\nmedium = \"local\"\n\
         [cd.outer]\ninject = {{ at = [{{ rank = 2, iteration = 1, kind = \"rank_loss\" }}] }}\n\
         [cd.inner]\ninject = {{ at = [{{ rank = 1, iteration = 3, kind = \"rank_loss\" }}] }}\n"
    ));
    let out = nested_bytes(3, cfg, 4).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.results, clean.results);
    let outer = out.report.cd("outer").unwrap();
    let inner = out.report.cd("inner").unwrap();
    assert!(outer.bytes_spilled > 0 && inner.bytes_spilled > 0);
    assert_eq!(outer.injected + inner.injected, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_memory_budget_must_be_positive() {
    let e = CdConfig::parse("memory_budget_bytes = 0\n", "t.toml").unwrap_err();
    assert!(e.to_string().contains("memory_budget_bytes"), "{e}");
    assert!(e.to_string().contains("positive"), "{e}");
}

/// With `buddy_copies = 1` a rank keeps no copy of its own: soft errors on several ranks and
/// iterations restore bit for bit from the buddy's copy (fetched back by rpc), values and
/// arrays alike, with the report's buddy bytes and no local ones.
#[test]
fn one_buddy_copy_restores_soft_errors_bit_for_bit_from_the_buddy() {
    let program = |cfg: CdConfig| {
        run(3, cfg, || {
            let ring = Ring::new(N);
            let mut x: Vec<f64> = (0..N).map(|i| (i + pgas::rank_me()) as f64).collect();
            let mut big: Vec<f64> = (0..40_000)
                .map(|i| (i * 3 + pgas::rank_me()) as f64)
                .collect();
            for it in 0..5u64 {
                cd::strict("step", |c| {
                    c.preserve("x", &mut x);
                    c.preserve_slice("big", &mut big);
                    step(&mut x, it);
                    step(&mut big, it + 1);
                    ring.exchange(&pgas::world(), &mut x);
                    Ok(())
                })?;
            }
            Ok((x, big.iter().sum::<f64>()))
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let clean = program(CdConfig::default());
    let faulty = program(config(
        "buddy_copies = 1\n[cd.step]\nmedium = \"buddy\"\n\
         inject = { at = [{ rank = 0, iteration = 1, kind = \"soft\" }, \
                          { rank = 2, iteration = 3, kind = \"soft\" }] }\n",
    ));
    assert_eq!(faulty.results, clean.results);
    let s = faulty.report.cd("step").unwrap();
    assert_eq!((s.reexecutions, s.escalations), (2 * 3, 0), "{s:?}");
    assert_eq!((s.bytes_local, s.bytes_buddy_rpc), (0, 0), "{s:?}");
    assert!(s.bytes_buddy >= 3 * 5 * 320_000, "{s:?}");
}

/// With `buddy_copies = 1` a rank loss that only the lost rank re-executes (a CD of its own)
/// restores from its buddy, as with two copies.
#[test]
fn one_buddy_copy_restores_a_rank_loss_of_a_cd_of_its_own() {
    let program = |cfg: CdConfig| {
        run(3, cfg, || {
            let mut x: Vec<f64> = (0..N).map(|i| (i * 5 + pgas::rank_me()) as f64).collect();
            for it in 0..4u64 {
                cd::strict_local("own", |c| {
                    c.preserve_slice("x", &mut x);
                    step(&mut x, it);
                    Ok(())
                })?;
            }
            Ok(x)
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let clean = program(CdConfig::default());
    let faulty = program(config(
        "buddy_copies = 1\n[cd.own]\nmedium = \"buddy\"\n\
         inject = { at = [{ rank = 1, iteration = 2, kind = \"rank_loss\" }] }\n",
    ));
    assert_eq!(faulty.results, clean.results);
    let s = faulty.report.cd("own").unwrap();
    assert_eq!((s.reexecutions, s.escalations), (1, 0), "{s:?}");
}

/// A rank that loses its memory in a CD of its own after every other rank's program has
/// ended still restores from its buddy: a rank whose body returned keeps serving the CD
/// runtime's requests (buddy fetches, slot requests, copies by rpc) until every rank is done.
/// Rank 1 sleeps in the CD it loses first, so the others are surely past their bodies; later
/// CDs preserve an array of a new size (a slot request to the finished buddy) and lose it
/// again. Before the fix the buddy's runtime was gone by then: a slot request found no
/// runtime, the copy went by rpc and was dropped, and a fetch by rpc found nothing; the job
/// escalated. One and two buddy copies (with two, the lost rank's own copy went with its
/// memory too) and copies by rpc only (`buddy_segment_bytes = 0`).
#[test]
fn a_buddy_whose_program_ended_still_serves_a_lost_ranks_restore() {
    for top in [
        "buddy_copies = 1",
        "buddy_copies = 2",
        "buddy_segment_bytes = 0",
    ] {
        let program = |cfg: CdConfig| {
            run(3, cfg, || {
                let me = pgas::rank_me();
                let mut x: Vec<f64> = (0..N).map(|i| (i * 5 + me) as f64).collect();
                let mut big: Vec<f64> = (0..3000).map(|i| (i + me) as f64).collect();
                let iters = if me == 1 { 6 } else { 2 };
                for it in 0..iters {
                    cd::strict_local("own", |c| {
                        c.preserve_slice("x", &mut x);
                        if it >= 3 {
                            c.preserve_slice("big", &mut big);
                            step(&mut big, it);
                        }
                        if me == 1 && it == 2 && !c.is_reexecution() {
                            std::thread::sleep(std::time::Duration::from_millis(300));
                        }
                        step(&mut x, it);
                        Ok(())
                    })?;
                }
                Ok((x, big))
            })
        };
        let clean = program(CdConfig::default()).unwrap_or_else(|e| panic!("{e}"));
        let faulty = program(config(&format!(
            "{top}\n[cd.own]\nmedium = \"buddy\"\n\
             inject = {{ at = [{{ rank = 1, iteration = 2, kind = \"rank_loss\" }}, \
                               {{ rank = 1, iteration = 4, kind = \"rank_loss\" }}] }}\n",
        )))
        .unwrap_or_else(|e| panic!("{top}: {e}"));
        assert!(faulty.results == clean.results, "{top}: a different answer");
        let s = faulty.report.cd("own").unwrap();
        assert_eq!((s.reexecutions, s.escalations), (2, 0), "{top}: {s:?}");
    }
}

/// The buddy's loss, then a soft error of the owner in a CD whose copy the buddy held: with
/// two copies the owner restores from its own (bit for bit); with one, the only copy went with
/// the buddy's memory and the run ends with a line naming the buddy, the entry and the key.
#[test]
fn one_buddy_copy_escalates_when_the_buddy_lost_it_and_two_recover() {
    let program = |cfg: CdConfig| {
        run(2, cfg, || {
            let mut x: Vec<f64> = (0..N).map(|i| (i + 7 * pgas::rank_me()) as f64).collect();
            cd::strict("mid", |c| {
                c.preserve_slice("x", &mut x);
                step(&mut x, 2);
                let mut y = x.clone();
                cd::strict_local("lose", |c| {
                    c.preserve_slice("y", &mut y);
                    step(&mut y, 3);
                    Ok(())
                })?;
                // Rank 1 told rank 0 of its loss before it reached the barrier.
                pgas::barrier();
                x[0] += y[1];
                Ok(())
            })?;
            Ok(x)
        })
    };
    let faults = "[defaults]\nmedium = \"buddy\"\n\
         [cd.mid]\ninject = { at = [{ rank = 0, iteration = 0, kind = \"soft\" }] }\n\
         [cd.lose]\ninject = { at = [{ rank = 1, iteration = 0, kind = \"rank_loss\" }] }\n";
    let clean = program(CdConfig::default()).unwrap();
    let two = program(config(faults)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(two.results, clean.results);
    assert_eq!(two.report.cd("mid").unwrap().reexecutions, 2);
    let msg = message(program(config(&format!("buddy_copies = 1\n{faults}"))));
    assert!(
        msg.contains("buddy rank 1 lost its memory and with it the only copy (buddy_copies = 1) of `x` on rank 0"),
        "{msg}"
    );
    assert!(msg.contains("set buddy_copies = 2"), "{msg}");
}

/// With two buddy copies the preservation makes the local copy chunk by chunk (128 KiB),
/// each chunk put to the buddy from it: arrays of several chunks and a ragged end restore bit
/// for bit from either copy. In a world CD, soft errors restore from the local copies, rank
/// 1's loss restores it from its buddy's copy, and rank 2's loss (rank 1's buddy) leaves rank
/// 1 its local copy, then stored again at the buddy before the soft error that follows. A chunk put to the wrong offset, or a local copy missing a
/// chunk, changes the answer.
#[test]
fn two_buddy_copies_of_many_chunks_restore_from_either() {
    let program = |cfg: CdConfig| {
        run(3, cfg, || {
            let me = pgas::rank_me();
            // 3 chunks and 3 bytes, and exactly 2 chunks.
            let mut ragged: Vec<u8> = (0..3 * (128 << 10) + 3)
                .map(|i: usize| (i.wrapping_mul(131) ^ (i >> 17) ^ me) as u8)
                .collect();
            let mut even: Vec<u64> = (0..(256 << 10) / 8).map(|i| (i * 7 + me) as u64).collect();
            for it in 0..6u64 {
                cd::strict("own", |c| {
                    c.preserve_slice("ragged", &mut ragged);
                    c.preserve_slice("even", &mut even);
                    for (i, b) in ragged.iter_mut().enumerate() {
                        *b = b.wrapping_mul(3).wrapping_add((i as u64 ^ it) as u8);
                    }
                    for (i, w) in even.iter_mut().enumerate() {
                        *w = w.rotate_left(5) ^ (i as u64 + it);
                    }
                    Ok(())
                })?;
            }
            Ok((ragged, even))
        })
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let clean = program(CdConfig::default());
    let faulty = program(config(
        "buddy_copies = 2\nbuddy_domain = \"rank\"\n[cd.own]\nmedium = \"buddy\"\n\
         inject = { at = [{ rank = 0, iteration = 1, kind = \"soft\" }, \
                          { rank = 1, iteration = 2, kind = \"rank_loss\" }, \
                          { rank = 2, iteration = 3, kind = \"rank_loss\" }, \
                          { rank = 1, iteration = 4, kind = \"soft\" }] }\n",
    ));
    assert!(faulty.results == clean.results, "a different answer");
    let s = faulty.report.cd("own").unwrap();
    assert_eq!((s.reexecutions, s.escalations), (4 * 3, 0), "{s:?}");
    assert_eq!(s.bytes_buddy_rpc, 0, "every copy in a slot: {s:?}");
}

/// A loop of CDs preserving an array and a growing value on the buddy medium: one slot
/// request per entry in the whole run (then every copy is one rput into a slot reused
/// from the previous iteration), nothing by rpc, and a soft error's re-execution restores
/// from the rank's own copy.
#[test]
fn steady_state_buddy_copies_reuse_their_slots() {
    let job = gasnet_bridge::LaunchConfig::new(3).segment_bytes(1 << 20);
    let config = CdConfig::default()
        .with_cd(
            "step",
            "medium = \"buddy\"\ninject = { at = [{ rank = 1, iteration = 7, kind = \"soft\" }] }",
        )
        .unwrap();
    let out = cd::launch(&job, config, pgas::RpcTable::new(), || {
        let me = pgas::rank_me() as f64;
        let mut a = vec![me; 1000];
        let mut x: Vec<u64> = vec![1, 2, 3];
        for it in 0..20u64 {
            cd::strict("step", |c| {
                c.preserve_slice("a", &mut a);
                c.preserve("x", &mut x);
                x.push(it);
                for v in a.iter_mut() {
                    *v = *v * 2.0 + 1.0;
                }
                Ok(())
            })?;
        }
        let reserves = cd::testing::buddy_slot_requests();
        Ok((reserves, a[999], x.len()))
    })
    .unwrap();
    for (rank, (reserves, last, xs)) in out.results.into_iter().enumerate() {
        assert_eq!(reserves, 2, "rank {rank}: one slot per entry");
        let mut want = rank as f64;
        for _ in 0..20 {
            want = want * 2.0 + 1.0;
        }
        assert_eq!((last, xs), (want, 23), "rank {rank}");
    }
    let s = out.report.cd("step").unwrap();
    assert_eq!(s.reexecutions, 3);
    assert_eq!(s.bytes_buddy_rpc, 0);
    assert!(s.bytes_buddy >= 3 * 20 * 8000, "{s:?}");
}
