//! Detection and repeatability: `cd::check!`, errors returned by a body, and `cd::rng()`
//! giving the same numbers when a CD re-executes.

mod common;

use std::cell::RefCell;

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdError};
use common::{config, message, run};
use rand::{Rng, RngCore};

#[test]
fn a_check_failing_once_reexecutes_the_cd() {
    let out = run(2, CdConfig::default(), || {
        let mut x = 10u64;
        let mut seen = Vec::new();
        cd::strict("checked", |c| {
            c.preserve("x", &mut x);
            x += 1;
            // Fails on rank 1's first execution only.
            let ok = cd::check!(pgas::rank_me() == 0 || c.is_reexecution());
            seen.push((c.attempt(), ok));
            Ok(())
        })?;
        Ok((x, seen))
    })
    .unwrap();
    assert_eq!(out.results[0], (11, vec![(0, true), (1, true)]));
    assert_eq!(out.results[1], (11, vec![(0, false), (1, true)]));
    let s = out.report.cd("checked").unwrap();
    assert_eq!((s.executions, s.reexecutions, s.injected), (4, 2, 0));
}

#[test]
fn a_body_returning_a_detected_error_reexecutes() {
    let out = run(3, CdConfig::default(), || {
        let mut v = vec![1.0f64; 4];
        for _ in 0..2 {
            cd::strict("detect", |c| {
                c.preserve("v", &mut v);
                for x in v.iter_mut() {
                    *x *= 3.0;
                }
                if pgas::rank_me() == 2 && !c.is_reexecution() {
                    return Err(CdError::detected("rank 2 saw a bad value"));
                }
                Ok(())
            })?;
        }
        Ok(v)
    })
    .unwrap();
    assert_eq!(
        out.results,
        vec![vec![9.0; 4]; 3],
        "restored before each re-execution"
    );
    let s = out.report.cd("detect").unwrap();
    assert_eq!((s.executions, s.reexecutions), (12, 6));
}

#[test]
fn a_check_failing_every_time_escalates_after_the_retries() {
    let msg = message(run(2, config("[cd.hopeless]\nretries = 3\n"), || {
        cd::strict("hopeless", |_| {
            cd::check!(pgas::rank_me() == 0, "rank {} disagrees", pgas::rank_me());
            Ok(())
        })
    }));
    for want in [
        "\"hopeless\"",
        "after 4 execution(s)",
        "3 retries exhausted",
        "escalated past the root CD",
    ] {
        assert!(msg.contains(want), "{want:?} not in: {msg}");
    }
}

#[test]
fn a_pgas_error_taken_by_question_mark_is_detected_and_reexecutes() {
    let out = run(2, CdConfig::default(), || {
        let mut tries = 0u32;
        cd::strict("allocates", |_| {
            tries += 1;
            // Too large on rank 1's first execution only: `?` turns the PgasError into a
            // detected error of this CD.
            let len = if pgas::rank_me() == 1 && tries == 1 {
                1 << 40
            } else {
                8
            };
            let p = pgas::new_array::<u64>(len)?;
            pgas::delete_(p)?;
            Ok(())
        })?;
        Ok(tries)
    })
    .unwrap();
    assert_eq!(out.results, vec![2, 2], "both ranks re-executed once");
    let msg = message(run(1, config("[cd.never]\nretries = 1\n"), || {
        cd::strict(
            "never",
            |_| Ok(pgas::new_array::<u64>(1 << 40).map(|_| ())?),
        )
    }));
    for want in ["\"never\"", "after 2 execution(s)", "segment"] {
        assert!(msg.contains(want), "{want:?} not in: {msg}");
    }
}

#[test]
fn rng_gives_the_same_numbers_in_a_reexecution() {
    let cfg = config(
        "seed = 42\n[cd.draw]\ninject = { at = [{ rank = 0, iteration = 1, kind = \"soft\" }] }\n\
         [cd.inner]\ninject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n",
    );
    let out = run(2, cfg, || {
        // Per CD instance, the draws of each execution.
        let draws: RefCell<Vec<Vec<Vec<u64>>>> = RefCell::new(Vec::new());
        for _ in 0..3 {
            draws.borrow_mut().push(Vec::new());
            cd::strict("draw", |c| {
                let mut d = vec![cd::rng().next_u64(), cd::rng().random_range(0..1000)];
                let inner = cd::strict("inner", |_| Ok(cd::rng().next_u64()))?;
                d.push(inner);
                d.push(c.with_rng(|r| r.next_u64())); // after the child: the parent's stream
                d.push(cd::rng().next_u64());
                draws.borrow_mut().last_mut().unwrap().push(d);
                Ok(())
            })?;
        }
        Ok(draws.into_inner())
    })
    .unwrap();
    for (rank, instances) in out.results.iter().enumerate() {
        let executions: Vec<usize> = instances.iter().map(Vec::len).collect();
        assert_eq!(
            executions,
            vec![1, 2, 1],
            "rank {rank}: instance 1 re-executed"
        );
        assert_eq!(instances[1][0], instances[1][1], "rank {rank}: same draws");
        assert_ne!(
            instances[0][0], instances[2][0],
            "instances draw differently"
        );
        let d = &instances[0][0];
        assert_ne!(d[0], d[3], "the stream goes on after the child");
    }
    assert_ne!(
        out.results[0][0][0], out.results[1][0][0],
        "ranks draw differently"
    );
    assert_eq!(out.report.cd("draw").unwrap().reexecutions, 2);
    assert_eq!(out.report.cd("inner").unwrap().reexecutions, 2);

    // Another seed, other numbers.
    let other = run(2, config("seed = 43\n"), || {
        cd::strict("draw", |_| Ok(cd::rng().next_u64()))
    })
    .unwrap();
    assert_ne!(other.results[0], out.results[0][0][0][0]);
}
