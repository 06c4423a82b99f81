//! Incoming rpc requests in relaxed recoveries: a ring that delivers increments and halo data
//! by rpc into each neighbour's preserved inbox, with a soft error on every rank at every step,
//! equals the fault-free run bit for bit with one rank re-executing and each incoming rpc
//! replayed once in IWC order; a function whose result differs in the replay, and one that
//! communicates, make the recovery escalate instead of giving a wrong answer. The ring runs
//! with `#[pgas::remote]` functions too: replayed by their paths, the same answer.
//!
//! Also under mpirun (`cd-runtime/tests/mpirun-relaxed.sh`), each process checking the ranks
//! it ran.

mod common;

use std::cell::Cell;
use std::time::{Duration, Instant};

use cd_runtime as cd;
use cd_runtime::relaxed::{RecoveryTrace, ReplayEvent};
use cd_runtime::{CdConfig, CdError, CdOutcome};
use common::{config, job, rank_counts};
use pgas::runtime_hooks::internal;
use pgas::{GlobalPtr, RpcFn, RpcTable, RpcTarget, barrier, rank_me, rank_n, rpc, rpc_ff, rput};

/// Words of a rank's inbox: the increments' word, the halo, the halo's arrival flag.
const INBOX: usize = 2 + HALO;
const HALO: usize = 3;
const STEPS: u64 = 3;

/// (the target's increments word, value): a combining update, replied with the new value.
type AddArgs = (GlobalPtr<u64>, u64);
/// (the target's inbox, halo, flag): replaces the halo, then raises the flag.
type HaloArgs = (GlobalPtr<u64>, Vec<u64>, u64);

/// The ring's two functions: from a table, or `#[pgas::remote]` ones.
#[derive(Clone, Copy)]
struct Rpcs<A, H> {
    add: A,
    halo: H,
}

/// The increment: not commutative with itself, so applied twice or out of order, the value
/// shows it.
fn add_into((word, v): AddArgs) -> u64 {
    let x = word.read_local().unwrap().wrapping_mul(31).wrapping_add(v);
    word.write_local(x).unwrap();
    x
}

fn halo_into((inbox, halo, flag): HaloArgs) {
    (inbox + 1).write_local_slice(&halo).unwrap();
    (inbox + 1 + HALO).write_local(flag).unwrap();
}

/// The ring's functions from a table.
type TableRpcs = Rpcs<RpcFn<AddArgs, u64>, RpcFn<HaloArgs, ()>>;

fn rpcs() -> (RpcTable, TableRpcs) {
    let mut t = RpcTable::new();
    let add = t.register("ring.add", add_into);
    let halo = t.register("ring.halo", halo_into);
    (t, Rpcs { add, halo })
}

#[pgas::remote]
fn remote_add(args: AddArgs) -> u64 {
    add_into(args)
}

#[pgas::remote]
fn remote_halo(args: HaloArgs) {
    halo_into(args)
}

fn mix(a: u64, b: u64) -> u64 {
    pgas::mix64(a ^ pgas::mix64(b))
}

/// What a rank ends with: its accumulator and its inbox.
type Out = (u64, Vec<u64>);

/// `STEPS` steps; each a strict CD holding one relaxed CD per rank that sends its right
/// neighbour an increment (`rpc`, the reply folded in) and its left neighbour a halo
/// (`rpc_ff`), then folds its inbox into its accumulator.
fn ring<A, H>(f: Rpcs<A, H>) -> Result<(Out, Vec<RecoveryTrace>), CdError>
where
    A: RpcTarget<Args = AddArgs, Output = u64>,
    H: RpcTarget<Args = HaloArgs>,
{
    let (me, n) = (rank_me(), rank_n());
    let inbox = pgas::new_array::<u64>(INBOX).unwrap();
    inbox.write_local(me as u64 + 1).unwrap();
    let inboxes = internal(|| pgas::allgather(inbox).wait());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let mut acc = me as u64;
    for step in 0..STEPS {
        acc = cd::strict("step", |_| {
            let from = acc;
            cd::relaxed("rx", |r| {
                r.preserve_global("inbox", inbox, INBOX);
                // Every inbox is preserved before any request lands.
                barrier();
                let mut acc = from;
                let reply = rpc(right, f.add, (inboxes[right], mix(acc, 1))).wait();
                acc = mix(acc, reply);
                let halo: Vec<u64> = (0..HALO as u64).map(|k| mix(acc, k)).collect();
                rpc_ff(left, f.halo, (inboxes[left], halo, step + 1));
                // The halo from the right has landed (rpc_ff has no completion to wait for).
                // Bounded: a replay that lost the request goes on, and the answer shows it.
                let start = Instant::now();
                while (inbox + 1 + HALO).read_local().unwrap() != step + 1
                    && start.elapsed() < Duration::from_secs(10)
                {
                    pgas::progress();
                }
                barrier();
                let mut words = vec![0; INBOX];
                inbox.read_local_slice(&mut words).unwrap();
                Ok(words.iter().fold(acc, |a, &w| mix(a, w)))
            })
        })?;
    }
    let mut words = vec![0; INBOX];
    inbox.read_local_slice(&mut words).unwrap();
    let traces = cd::relaxed::recoveries();
    barrier();
    Ok(((acc, words), traces))
}

fn launch(ranks: usize, cfg: CdConfig) -> CdOutcome<(Out, Vec<RecoveryTrace>)> {
    let (t, f) = rpcs();
    cd::launch(&job(ranks), cfg, t, || ring(f)).unwrap_or_else(|e| panic!("{e}"))
}

/// [`launch`] with the `#[pgas::remote]` functions and no table.
fn launch_remote(ranks: usize, cfg: CdConfig) -> CdOutcome<(Out, Vec<RecoveryTrace>)> {
    let f = Rpcs {
        add: remote_add,
        halo: remote_halo,
    };
    cd::launch(&job(ranks), cfg, RpcTable::new(), || ring(f)).unwrap_or_else(|e| panic!("{e}"))
}

/// The names a recovery's trace gives its replayed rpc requests, sorted.
fn replayed_names(t: &RecoveryTrace) -> Vec<&str> {
    let mut names: Vec<&str> = t
        .events
        .iter()
        .filter_map(|e| match e {
            ReplayEvent::IncomingRpc { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    names.sort_unstable();
    names
}

fn fault(rank: usize, step: u64) -> CdConfig {
    config(&format!(
        "[cd.rx]\ncheck_classes = false\n\
         inject = {{ at = [{{ rank = {rank}, iteration = {step}, kind = \"soft\" }}] }}\n"
    ))
}

/// The IWCs of the incoming writes a recovery applied, and of the rpcs among them.
fn applied(t: &RecoveryTrace) -> (Vec<u64>, Vec<u64>) {
    let mut all = Vec::new();
    let mut rpcs = Vec::new();
    for e in &t.events {
        match e {
            ReplayEvent::Incoming { iwc, .. } => all.push(*iwc),
            ReplayEvent::IncomingRpc { iwc, .. } => {
                all.push(*iwc);
                rpcs.push(*iwc);
            }
            _ => {}
        }
    }
    (all, rpcs)
}

/// A soft error on the rpc target at every step: the answer is the fault-free one, only the
/// failed rank re-executes, and its trace replays each incoming rpc once, in IWC order.
#[test]
fn rpcs_into_a_failed_rank_are_replayed_once_in_iwc_order() {
    for ranks in rank_counts(&[2, 3]) {
        let clean = launch(ranks, config("[cd.rx]\ncheck_classes = false\n"));
        let want = clean.results.map(|r| r.0);
        for failed in 0..ranks {
            for step in 0..STEPS {
                let out = launch(ranks, fault(failed, step));
                let what = format!("{ranks} ranks, rank {failed} failing at step {step}");
                for (r, (got, traces)) in out.results.with_ranks() {
                    assert_eq!(Some(got), want.get(r), "{what}: rank {r} differs");
                    assert_eq!(traces.is_empty(), r != failed, "{what}: rank {r}'s traces");
                }
                let rx = out.report.cd("rx").unwrap();
                assert_eq!((rx.reexecutions, rx.escalations), (1, 0), "{what}");
                assert_eq!(rx.failures[0].ranks, [failed], "{what}");
                assert_eq!(out.report.cd("step").unwrap().reexecutions, 0, "{what}");
                // The failed rank's trace, where it ran.
                let Some((_, traces)) = out.results.get(failed) else {
                    continue;
                };
                assert_eq!(traces.len(), 1, "{what}");
                let t = &traces[0];
                let (all, rpcs) = applied(t);
                let expect: Vec<u64> = (t.iwc_begin + 1..=t.iwc_end).collect();
                assert_eq!(
                    all, expect,
                    "{what}: every incoming write once, in IWC order"
                );
                // One increment from the left, one halo from the right (both from the other
                // rank with 2 ranks): nothing else writes into an inbox.
                assert_eq!(rpcs, expect, "{what}: {:?}", t.events);
                assert_eq!(rpcs.len(), 2, "{what}");
                assert_eq!(replayed_names(t), ["ring.add", "ring.halo"], "{what}");
            }
        }
    }
}

/// The same ring with `#[pgas::remote]` functions: the failed rank replays each incoming
/// request by the function's path, and the answer is the table's fault-free one.
#[test]
fn remote_functions_are_replayed_like_the_table_s() {
    let ranks = 3;
    let clean = launch(ranks, config("[cd.rx]\ncheck_classes = false\n"));
    let want = clean.results.map(|r| r.0);
    for failed in 0..ranks {
        let step = failed as u64 % STEPS;
        let out = launch_remote(ranks, fault(failed, step));
        let what = format!("rank {failed} failing at step {step}");
        for (r, (got, _)) in out.results.with_ranks() {
            assert_eq!(Some(got), want.get(r), "{what}: rank {r} differs");
        }
        let rx = out.report.cd("rx").unwrap();
        assert_eq!((rx.reexecutions, rx.escalations), (1, 0), "{what}");
        let Some((_, traces)) = out.results.get(failed) else {
            continue;
        };
        assert_eq!(traces.len(), 1, "{what}");
        assert_eq!(
            replayed_names(&traces[0]),
            ["relaxed_rpc::remote_add", "relaxed_rpc::remote_halo"],
            "{what}"
        );
    }
}

thread_local! {
    /// Times `tick` ran on this rank's thread.
    static TICKS: Cell<u64> = const { Cell::new(0) };
}

/// A function whose result depends on how often it ran: its replay replies otherwise than
/// the first execution did, and the recovery escalates (the deterministic control recovers).
#[test]
fn an_rpc_whose_replayed_reply_differs_escalates() {
    for deterministic in [true, false] {
        let mut t = RpcTable::new();
        let tick: RpcFn<(GlobalPtr<u64>, u64), u64> =
            t.register("nd.tick", move |(word, v): (GlobalPtr<u64>, u64)| {
                word.write_local(v).unwrap();
                let n = TICKS.with(|c| {
                    c.set(c.get() + 1);
                    c.get()
                });
                if deterministic { v } else { n }
            });
        let cfg = config(
            "[cd.nd]\ncheck_classes = false\n\
             inject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n",
        );
        let out = cd::launch(&job(2), cfg, t, move || {
            let me = rank_me();
            let word = pgas::new_array::<u64>(1).unwrap();
            let words = internal(|| pgas::allgather(word).wait());
            let r = cd::relaxed("nd", |c| {
                c.preserve_global("word", word, 1);
                barrier();
                if me == 0 {
                    rpc(1, tick, (words[1], 7)).wait();
                }
                barrier();
                Ok(word.read_local().unwrap())
            });
            barrier();
            Ok(r)
        })
        .unwrap();
        if let Some(r) = out.results.get(0) {
            assert_eq!(*r, Ok(0));
        }
        if deterministic {
            if let Some(r) = out.results.get(1) {
                assert_eq!(*r, Ok(7), "the control recovers");
            }
            assert_eq!(out.report.cd("nd").unwrap().reexecutions, 1);
            continue;
        }
        match out.results.get(1) {
            None => {}
            Some(Err(CdError::Replay {
                cd, rank, reason, ..
            })) => {
                assert_eq!((cd.as_str(), *rank), ("nd", 1));
                assert!(reason.contains("other bytes than the reply"), "{reason}");
                assert!(reason.contains("nd.tick"), "{reason}");
            }
            Some(other) => panic!("expected the reply-mismatch error, got {other:?}"),
        }
        assert_eq!(out.report.cd("nd").unwrap().escalations, 1);
    }
}

thread_local! {
    /// Times `comm.echo` ran on this rank's thread in the current launch.
    static ECHOES: Cell<u64> = const { Cell::new(0) };
}

/// A function that started a put in its first execution: the put is in the target's log where
/// progress ran the function, which a replay cannot match, so the recovery refuses before
/// replaying. One that starts a put only when replayed is refused as it does (the put is not
/// sent). The control, a function that only writes locally, recovers.
#[test]
fn an_rpc_function_that_communicates_is_refused() {
    for (first, replayed) in [(false, false), (true, true), (false, true)] {
        let mut t = RpcTable::new();
        let echo: RpcFn<(GlobalPtr<u64>, GlobalPtr<u64>, u64), ()> = t.register(
            "comm.echo",
            move |(word, back, v): (GlobalPtr<u64>, GlobalPtr<u64>, u64)| {
                word.write_local(v).unwrap();
                let runs = ECHOES.with(|c| c.replace(c.get() + 1));
                if (runs == 0 && first) || (runs > 0 && replayed) {
                    rput(v, back).detach();
                }
            },
        );
        let cfg = config(
            "[cd.cm]\ncheck_classes = false\n\
             inject = { at = [{ rank = 1, iteration = 0, kind = \"soft\" }] }\n",
        );
        let out = cd::launch(&job(2), cfg, t, move || {
            let me = rank_me();
            ECHOES.with(|c| c.set(0));
            let word = pgas::new_array::<u64>(2).unwrap();
            let words = internal(|| pgas::allgather(word).wait());
            let r = cd::relaxed("cm", |c| {
                c.preserve_global("word", word, 1);
                barrier();
                if me == 0 {
                    rpc(1, echo, (words[1], words[0] + 1, 9)).wait();
                }
                barrier();
                Ok(word.read_local().unwrap())
            });
            // Rank 1's recovery has ended: what its function sent has landed.
            barrier();
            Ok((r, (word + 1).read_local().unwrap()))
        })
        .unwrap();
        // Only the first run's put reached rank 0 (a refused one is not sent).
        if let Some(r) = out.results.get(0) {
            assert_eq!(*r, (Ok(0), if first { 9 } else { 0 }));
        }
        let Some((r1, _)) = out.results.get(1) else {
            continue;
        };
        if !replayed {
            assert_eq!(*r1, Ok(9), "the control recovers");
            continue;
        }
        let cause = if first {
            "started operations here"
        } else {
            "started a put to rank 0"
        };
        match r1 {
            Err(CdError::Replay {
                cd, rank, reason, ..
            }) => {
                assert_eq!((cd.as_str(), *rank), ("cm", 1));
                assert!(reason.contains("comm.echo"), "{reason}");
                assert!(reason.contains(cause), "{reason}");
            }
            other => panic!("expected the refusal ({cause}), got {other:?}"),
        }
    }
}
