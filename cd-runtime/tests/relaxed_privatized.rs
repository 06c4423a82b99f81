//! Privatized regions and shadow memory (relaxed/shadow.rs): a relaxed CD that privatized a
//! region and completed, then is re-executed in the replay of an enclosing relaxed CD,
//! computes into a shadow copy, so a rank reading the region meanwhile only ever sees its
//! final bytes; a re-execution that computes other bytes is a replay error; and the entries
//! the enclosing CD logged after the inner one completed are still served from the log.

mod common;

use std::cell::RefCell;
use std::time::{Duration, Instant};

use cd_runtime as cd;
use common::{config, run};
use pgas::runtime_hooks::internal;
use pgas::{GlobalPtr, barrier, rank_me, rget, rget_slice, rput};

const FINAL: [u64; 4] = [10, 11, 12, 13];
const INTERMEDIATE: [u64; 4] = [1, 1, 1, 1];

/// Rank 1 fails once in "pz" (the enclosing relaxed CD); its inner CD "inner" privatized
/// `buf` and completed before.
fn faults() -> cd::CdConfig {
    config("[cd.pz]\ninject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n")
}

/// Polls `f` until it returns true (a local flag another rank puts).
fn until(mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(30), "flag never came");
        pgas::progress();
    }
}

#[test]
fn a_reader_never_sees_the_re_execution_of_a_completed_privatized_region() {
    // The classification check (on in debug builds) would ask rank 1 before each of rank
    // 0's gets, and rank 1 answers only between its writes: off, so the gets race them.
    let cfg = config(
        "[cd.pz]\ncheck_classes = false\n\
         inject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n",
    );
    let out = run(2, cfg, || {
        let me = rank_me();
        let buf = pgas::new_array::<u64>(4).unwrap();
        let flag = pgas::new_::<u64>(0).unwrap();
        let (bufs, flags) = internal(|| {
            let w = pgas::world();
            (
                pgas::allgather_on(&w, buf).wait(),
                pgas::allgather_on(&w, flag).wait(),
            )
        });
        // Rank 1: per execution of "inner", whether it computed in place and what `buf`
        // held right after the intermediate values were written.
        let inner_seen = RefCell::new(Vec::new());
        let reader = cd::strict("outer", |_| {
            let r = cd::relaxed("pz", |outer| {
                if me == 1 {
                    let attempt = outer.attempt();
                    cd::relaxed("inner", |c| {
                        let p = c.privatized("out", buf, 4);
                        p.write_local_slice(&INTERMEDIATE).unwrap();
                        let mut now = [0u64; 4];
                        buf.read_local_slice(&mut now).unwrap();
                        inner_seen.borrow_mut().push((attempt, p == buf, now));
                        if attempt > 0 {
                            // The reader polls meanwhile: in place, it would see these.
                            std::thread::sleep(Duration::from_millis(150));
                        }
                        p.write_local_slice(&FINAL).unwrap();
                        Ok(())
                    })?;
                    // Tell rank 0 "inner" completed: from now on it may read the region.
                    rput(1u64, flags[0]).wait();
                    return Ok(Vec::new());
                }
                until(|| flag.read_local().unwrap() == 1);
                // Rank 1's recovery of "pz" runs now: read its region for 500 ms.
                let mut other = Vec::new();
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(500) {
                    let v = rget_slice(bufs[1], 4).wait();
                    if v != FINAL {
                        other.push(v);
                    }
                }
                Ok(other)
            })?;
            barrier();
            Ok(r)
        })?;
        let mut mine = [0u64; 4];
        buf.read_local_slice(&mut mine).unwrap();
        barrier();
        Ok((reader, mine, inner_seen.into_inner()))
    })
    .unwrap();
    // Under mpirun each process checks the ranks it ran; the report is the job's everywhere.
    if let Some((reader, _, _)) = out.results.get(0) {
        assert!(
            reader.is_empty(),
            "rank 0 saw bytes other than the final ones {} times while rank 1 re-executed, first \
             {:?}",
            reader.len(),
            reader.first()
        );
    }
    if let Some((_, mine, seen)) = out.results.get(1) {
        assert_eq!(*mine, FINAL);
        assert_eq!(
            *seen,
            [(0, true, INTERMEDIATE), (1, false, FINAL)],
            "first execution in place; the re-execution in a shadow, the region untouched"
        );
    }
    let pz = out.report.cd("pz").unwrap();
    assert_eq!(pz.reexecutions, 1);
    assert_eq!(pz.escalations, 0);
    assert_eq!(
        out.report.cd("inner").unwrap().entries_logged,
        2,
        "the region, once per completion"
    );
    assert_eq!(out.report.cd("outer").unwrap().reexecutions, 0);
}

#[test]
fn a_re_execution_computing_other_bytes_is_a_replay_error_and_escalates() {
    let out = run(2, faults(), || {
        let me = rank_me();
        let buf = pgas::new_array::<u64>(4).unwrap();
        let mut first_pz_error = None;
        cd::strict("outer", |_| {
            let r = cd::relaxed("pz", |outer| {
                // Only a relaxed re-execution of "pz" differs (salt 1); the strict
                // re-execution of "outer" runs "pz" as a first execution again.
                let salt = u64::from(outer.attempt());
                cd::relaxed("inner", |c| {
                    if me == 1 {
                        let p = c.privatized("out", buf, 4);
                        let v: Vec<u64> = FINAL.iter().map(|x| x + 100 * salt).collect();
                        p.write_local_slice(&v).unwrap();
                    }
                    Ok(())
                })
            });
            if let Err(e) = &r {
                first_pz_error.get_or_insert_with(|| e.to_string());
            }
            r
        })?;
        let mut mine = [0u64; 4];
        buf.read_local_slice(&mut mine).unwrap();
        barrier();
        Ok((mine, first_pz_error))
    })
    .unwrap();
    if let Some((mine, err)) = out.results.get(1) {
        assert_eq!(
            *mine, FINAL,
            "the strict re-execution computed the region again"
        );
        let err = err.as_deref().expect("pz's replay failed");
        assert!(
            err.contains("privatized region `out`") && err.contains("not deterministic"),
            "{err}"
        );
    }
    assert_eq!(out.report.cd("pz").unwrap().escalations, 1);
    assert_eq!(
        out.report.cd("outer").unwrap().reexecutions,
        2,
        "both ranks re-executed the strict CD"
    );
}

#[test]
fn entries_logged_after_a_privatized_completion_are_still_served_from_the_log() {
    let out = run(2, faults(), || {
        let me = rank_me();
        let buf = pgas::new_array::<u64>(4).unwrap();
        let value = pgas::new_::<u64>(5).unwrap();
        let flag = pgas::new_::<u64>(0).unwrap();
        let (values, flags) = internal(|| {
            let w = pgas::world();
            (
                pgas::allgather_on(&w, value).wait(),
                pgas::allgather_on(&w, flag).wait(),
            )
        });
        let got = RefCell::new(Vec::new());
        cd::strict("outer", |_| {
            cd::relaxed("pz", |_| {
                if me == 1 {
                    cd::relaxed("inner", |c| {
                        let p = c.privatized("out", buf, 4);
                        p.write_local_slice(&FINAL).unwrap();
                        Ok(())
                    })?;
                    // Logged after the privatized entry: a replay must serve it.
                    got.borrow_mut().push(rget(values[0]).wait());
                    rput(1u64, flags[0]).wait();
                    // Rank 0 changed its value: a live get would now read 6.
                    until(|| flag.read_local().unwrap() == 1);
                } else {
                    until(|| flag.read_local().unwrap() == 1);
                    value.write_local(6).unwrap();
                    rput(1u64, flags[1]).wait();
                }
                Ok(())
            })?;
            barrier();
            Ok(())
        })?;
        barrier();
        Ok(got.into_inner())
    })
    .unwrap();
    if let Some(got) = out.results.get(1) {
        assert_eq!(*got, [5, 5], "the replayed get returns the logged bytes");
    }
    let pz = out.report.cd("pz").unwrap();
    assert_eq!((pz.reexecutions, pz.escalations), (1, 0));
}

/// In a strict CD `privatized` has no effect: the body computes in the region itself.
#[test]
fn privatized_outside_a_relaxed_cd_returns_the_region_itself() {
    let out = run(1, cd::CdConfig::default(), || {
        let buf = pgas::new_array::<u64>(2).unwrap();
        let p: GlobalPtr<u64> = cd::strict("s", |c| Ok(c.privatized("b", buf, 2)))?;
        Ok(p == buf)
    })
    .unwrap();
    assert!(out.results.iter().all(|&same| same));
}

#[test]
fn a_privatized_region_re_executed_when_its_own_cd_failed_is_recomputed_in_place() {
    let cfg =
        config("[cd.inner]\ninject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n");
    let out = run(2, cfg, || {
        let buf = pgas::new_array::<u64>(4).unwrap();
        let in_place = RefCell::new(Vec::new());
        cd::strict("outer", |_| {
            cd::relaxed("inner", |c| {
                let p = c.privatized("out", buf, 4);
                in_place.borrow_mut().push(p == buf);
                p.write_local_slice(&FINAL).unwrap();
                Ok(())
            })?;
            barrier();
            Ok(())
        })?;
        Ok(in_place.into_inner())
    })
    .unwrap();
    if let Some(in_place) = out.results.get(1) {
        assert_eq!(
            *in_place,
            [true, true],
            "not completed: still private, in place"
        );
    }
    assert_eq!(out.report.cd("inner").unwrap().reexecutions, 1);
}

/// The recovering CD privatized the region too (its child declared it again): the recovering
/// CD itself never completed, so it re-executes in place, even though its log holds its
/// child's privatized entry for the region; the child, which had completed, runs in a
/// shadow, and the region its parent's restore set back gets the child's logged bytes.
#[test]
fn a_recovering_cd_that_privatized_the_region_re_executes_it_in_place() {
    let out = run(2, faults(), || {
        let me = rank_me();
        let buf = pgas::new_array::<u64>(4).unwrap();
        buf.write_local_slice(&[1, 2, 3, 4]).unwrap();
        let seen = RefCell::new(Vec::new());
        cd::strict("outer", |_| {
            cd::relaxed("pz", |c| {
                if me == 1 {
                    // Restored when "pz" recovers: the region starts over from [1, 2, 3, 4].
                    c.preserve_global("buf", buf, 4);
                    let p = c.privatized("out", buf, 4);
                    cd::relaxed("inner", |i| {
                        let q = i.privatized("out", p, 4);
                        let mut v = [0u64; 4];
                        q.read_local_slice(&mut v).unwrap();
                        q.write_local_slice(&[v[0], v[1], v[2] * 10, v[3] * 10])
                            .unwrap();
                        Ok(())
                    })?;
                    let mut v = [0u64; 4];
                    p.read_local_slice(&mut v).unwrap();
                    p.write_local_slice(&[v[0] + 100, v[1] + 100, v[2], v[3]])
                        .unwrap();
                    seen.borrow_mut().push(p == buf);
                }
                Ok(())
            })?;
            barrier();
            Ok(())
        })?;
        let mut mine = [0u64; 4];
        buf.read_local_slice(&mut mine).unwrap();
        Ok((mine, seen.into_inner()))
    })
    .unwrap();
    if let Some((mine, seen)) = out.results.get(1) {
        assert_eq!(*mine, [101, 102, 30, 40]);
        assert_eq!(
            *seen,
            [true, true],
            "the recovering CD computes in the region itself"
        );
    }
    let pz = out.report.cd("pz").unwrap();
    assert_eq!((pz.reexecutions, pz.escalations), (1, 0));
}
