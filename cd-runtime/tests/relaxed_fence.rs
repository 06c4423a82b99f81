//! The recovery fence (`relaxed/fence.rs`): writers that run ahead of a rank replaying its
//! log wait until it runs forward again, instead of landing in the middle of the replay
//! (which made the recovery escalate).
//!
//! Also under mpirun (`cd-runtime/tests/mpirun-relaxed.sh`: -n 3 and -n 6), each process
//! checking its own rank's values.

mod common;

use std::time::{Duration, Instant};

use cd_runtime as cd;
use common::{config, job};
use pgas::runtime_hooks::internal;
use pgas::{GlobalPtr, barrier, rank_me, rput};

fn gather_ptrs<T: 'static>(p: GlobalPtr<T>) -> Vec<GlobalPtr<T>> {
    internal(|| pgas::allgather(p).wait())
}

/// Waits, making progress, until `slot` of this rank holds `value`.
fn await_value(slot: GlobalPtr<u64>, value: u64) {
    while slot.read_local().unwrap() != value {
        pgas::progress();
    }
}

/// Makes progress (serving other ranks) for `d`.
fn progress_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        pgas::progress();
        std::thread::yield_now();
    }
}

const A: u64 = 11;
const B: u64 = 22;
const C: u64 = 33;
const DONE: u64 = 1;

/// Rank 1 fails in its relaxed CD "c" and replays slowly. Rank 0 wrote into it before (a
/// marked writer: fenced by the drain) and rank 2 never did (it learns of the fence when it
/// marks itself); both write into rank 1 once they know its first execution finished, while
/// it replays. Both writes must wait for the replay to end: rank 1 recovers alone, without
/// escalating, and ends with both new values.
#[test]
fn writers_that_run_ahead_wait_for_the_replay_to_end() {
    let cfg = config(
        "[cd.c]\ncheck_classes = false\nretries = 1\n\
         inject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n",
    );
    let out = cd::launch(&job(3), cfg, pgas::RpcTable::new(), || {
        let me = rank_me();
        // Slots: [0] written by rank 0, [1] written by rank 2, [2] rank 1's "done" flag.
        let buf = pgas::new_array::<u64>(3).unwrap();
        let bufs = gather_ptrs(buf);
        internal(barrier);
        let mut waited = Duration::ZERO;
        cd::relaxed("c", |c| {
            if !c.is_reexecution() {
                internal(barrier);
            }
            match me {
                0 => {
                    rput(A, bufs[1]).wait();
                    await_value(buf + 2, DONE);
                    // Serve rank 1's drain request meanwhile: rank 0 is then fenced.
                    progress_for(Duration::from_millis(30));
                    let t = Instant::now();
                    rput(B, bufs[1]).wait();
                    waited = t.elapsed();
                }
                1 => {
                    await_value(buf, A);
                    rput(DONE, bufs[0] + 2).wait();
                    rput(DONE, bufs[2] + 2).wait();
                    if c.is_reexecution() {
                        // A slow replay: the writers above are running ahead meanwhile.
                        std::thread::sleep(Duration::from_millis(150));
                    }
                }
                _ => {
                    await_value(buf + 2, DONE);
                    progress_for(Duration::from_millis(30));
                    let t = Instant::now();
                    rput(C, bufs[1] + 1).wait();
                    waited = t.elapsed();
                }
            }
            Ok(())
        })?;
        barrier();
        let mine = [buf.read_local().unwrap(), (buf + 1).read_local().unwrap()];
        let traces = cd::relaxed::recoveries();
        barrier();
        Ok((mine, waited, traces))
    })
    .unwrap();
    // Under mpirun each process checks the ranks it ran; the report is the job's everywhere.
    if let Some((mine, _, traces)) = out.results.get(1) {
        assert_eq!(
            *mine,
            [B, C],
            "both writes made during the replay arrived after it"
        );
        assert_eq!(traces.len(), 1, "rank 1 recovered once");
    }
    let s = out.report.cd("c").unwrap();
    assert_eq!(s.escalations, 0, "the recovery did not escalate");
    assert_eq!(s.failures.len(), 1);
    assert_eq!(s.failures[0].ranks, [1], "rank 1 alone re-executed");
    for w in [0, 2] {
        if let Some((_, waited, _)) = out.results.get(w) {
            assert!(
                *waited >= Duration::from_millis(50),
                "rank {w}'s write waited for the replay to end (waited {waited:?})"
            );
        }
    }
}

const RING: usize = 6;
const STEPS: usize = 3;
const ROUNDS: usize = 8;

/// The tag of round `g` in the high half of a slot: a slot holds round `g`'s value only when
/// its tag says so.
fn tag(g: usize) -> u64 {
    ((g + 1) as u64) << 32
}

/// A ring pipeline with no barrier inside a step: each round is a relaxed CD "c" in which a
/// rank puts a value derived from its left neighbour's previous one into its right
/// neighbour's slot for the round, then waits for its own. Left neighbours run ahead into
/// the next round (and write into a rank) while that rank replays a failed round. Returns
/// the slots of the ranks this process ran, the reexecutions and escalations of "c".
fn ring(faults: &[(usize, usize)]) -> (Vec<Vec<u64>>, u64, u64) {
    let at: Vec<String> = faults
        .iter()
        .map(|(r, i)| format!("{{ rank = {r}, iteration = {i}, kind = \"soft\" }}"))
        .collect();
    let cfg = config(&format!(
        "[cd.c]\ncheck_classes = false\nretries = 1\ninject = {{ at = [{}] }}\n",
        at.join(", ")
    ));
    let out = cd::launch(&job(RING), cfg, pgas::RpcTable::new(), || {
        let me = rank_me();
        let right = (me + 1) % RING;
        let buf = pgas::new_array::<u64>(STEPS * ROUNDS).unwrap();
        for g in 0..STEPS * ROUNDS {
            (buf + g).write_local(0).unwrap();
        }
        let bufs = gather_ptrs(buf);
        internal(barrier);
        for step in 0..STEPS {
            cd::strict("step", |_| {
                for k in 0..ROUNDS {
                    let g = step * ROUNDS + k;
                    cd::relaxed("c", |_| {
                        let prev = if g == 0 {
                            me as u64
                        } else {
                            (buf + (g - 1)).read_local().unwrap() & 0xffff_ffff
                        };
                        let value = prev.wrapping_mul(31).wrapping_add(7 * me as u64 + g as u64)
                            & 0xffff_ffff;
                        rput(tag(g) | value, bufs[right] + g).wait();
                        while (buf + g).read_local().unwrap() >> 32 != tag(g) >> 32 {
                            pgas::progress();
                        }
                        Ok(())
                    })?;
                }
                Ok(())
            })?;
        }
        barrier();
        let mine: Vec<u64> = (0..STEPS * ROUNDS)
            .map(|g| (buf + g).read_local().unwrap())
            .collect();
        barrier();
        Ok(mine)
    })
    .unwrap_or_else(|e| panic!("faults {faults:?}: {e}"));
    let s = out.report.cd("c").unwrap();
    (out.results.into_vec(), s.reexecutions, s.escalations)
}

/// Faults in many rounds of many ranks, several runs: every recovery stays on its rank (no
/// escalation) and the ring's values are the fault-free run's, bit for bit.
#[test]
fn a_ring_whose_ranks_run_ahead_recovers_every_fault_alone() {
    let (clean, _, _) = ring(&[]);
    let plans: [&[(usize, usize)]; 4] = [
        &[(1, 3)],
        &[(0, 0), (3, 9), (5, 23)],
        &[(2, 7), (2, 8), (4, 15), (1, 16)],
        &[(0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5)],
    ];
    for _ in 0..3 {
        for faults in plans {
            let (got, reexecutions, escalations) = ring(faults);
            assert_eq!(escalations, 0, "faults {faults:?}: no recovery escalated");
            assert_eq!(reexecutions, faults.len() as u64, "faults {faults:?}");
            assert_eq!(got, clean, "faults {faults:?}: the fault-free values");
        }
    }
}
