//! The xor medium: checksum groups restore a lost member bit for bit, for every member lost in
//! turn and several group sizes (also over uneven emulated nodes); two losses in one group
//! escalate with a line naming the group and both ranks; topologies that would put two members
//! of a group on one node are refused; the report states P_cf.

mod common;

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdError};
use common::{M, Ring, config, message, step};
use gasnet_bridge::LaunchConfig;
use pgas::GlobalPtr;

const N: usize = 16;
const ITERS: usize = 3;

/// What one rank ends with: its private vector, its segment array, and how many restores it
/// checked bit for bit against the state it had when the CD began.
type Out = (Vec<f64>, Vec<f64>, usize);

/// `ITERS` world CDs "step", each preserving a private vector (of a length that differs per
/// rank, so the group pads to its largest) and a segment array, updating both and exchanging
/// around the ring. In a re-execution every rank compares what it restored with the state it
/// had when the CD began.
fn program(job: &LaunchConfig, cfg: CdConfig) -> Result<cd::CdOutcome<Out>, cd::CdLaunchError> {
    program_with(job, cfg, false)
}

/// [`program`], preserving both entries in one `preserve_batch` when `batched`.
fn program_with(
    job: &LaunchConfig,
    cfg: CdConfig,
    batched: bool,
) -> Result<cd::CdOutcome<Out>, cd::CdLaunchError> {
    cd::launch(job, cfg, pgas::RpcTable::new(), move || {
        let ring = Ring::new(N);
        let g = pgas::new_array::<f64>(N).unwrap();
        let init: Vec<f64> = (0..N).map(|i| (i * 7 + pgas::rank_me()) as f64).collect();
        pgas::rput_slice(&init, g).wait();
        let mut x: Vec<f64> = (0..N + 3 * pgas::rank_me()).map(|i| i as f64).collect();
        let mut checked = 0;
        for it in 0..ITERS {
            let x_before = x.clone();
            let g_before = pgas::rget_slice(g, N).wait();
            cd::strict("step", |c| {
                if batched {
                    c.preserve_batch(|c| {
                        c.preserve_slice("x", &mut x);
                        c.preserve_global("g", g, N);
                    });
                } else {
                    c.preserve_slice("x", &mut x);
                    c.preserve_global("g", g, N);
                }
                if c.is_reexecution() {
                    let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&x), bits(&x_before), "x restored bit for bit");
                    let now = pgas::rget_slice(g, N).wait();
                    assert_eq!(bits(&now), bits(&g_before), "g restored bit for bit");
                    checked += 1;
                }
                step(&mut x, it as u64);
                update(g, &x);
                let mut head = x[..N].to_vec();
                ring.exchange(&pgas::world(), &mut head);
                x[..N].copy_from_slice(&head);
                Ok(())
            })?;
        }
        Ok((x, pgas::rget_slice(g, N).wait(), checked))
    })
}

/// Updates the segment array from `x` (reads it first: a lost segment shows).
fn update(g: GlobalPtr<f64>, x: &[f64]) {
    let mut v = pgas::rget_slice(g, N).wait();
    for (a, b) in v.iter_mut().zip(x) {
        *a = (*a * 2.0 + b) % M;
    }
    pgas::rput_slice(&v, g).wait();
}

fn xor_config(k: usize, losses: &[usize]) -> CdConfig {
    let at: Vec<String> = losses
        .iter()
        .map(|r| format!("{{ rank = {r}, iteration = 1, kind = \"rank_loss\" }}"))
        .collect();
    config(&format!(
        "[cd.step]\nmedium = \"xor\"\nxor_group = {k}\ninject = {{ at = [{}] }}\n",
        at.join(", ")
    ))
}

fn answers(out: &cd::CdOutcome<Out>) -> Vec<(Vec<f64>, Vec<f64>)> {
    out.results
        .iter()
        .map(|(x, g, _)| (x.clone(), g.clone()))
        .collect()
}

/// Loses every rank in turn (so every member of every group) and checks the run restores bit
/// for bit and ends with the fault-free answer.
fn every_member_in_turn(job: &LaunchConfig, k: usize) {
    every_member_in_turn_with(job, k, false);
}

/// [`every_member_in_turn`], the entries preserved in one batch when `batched`.
fn every_member_in_turn_with(job: &LaunchConfig, k: usize, batched: bool) {
    let clean = program(job, CdConfig::default()).unwrap();
    for lost in 0..job.ranks {
        let faulty = program_with(job, xor_config(k, &[lost]), batched)
            .unwrap_or_else(|e| panic!("k = {k}, rank {lost} lost: {e}"));
        assert_eq!(
            answers(&faulty),
            answers(&clean),
            "k = {k}, rank {lost} lost: the fault-free answer"
        );
        assert!(
            faulty.results.iter().all(|r| r.2 == 1),
            "k = {k}, rank {lost} lost: every rank restored once"
        );
        let s = faulty.report.cd("step").unwrap();
        assert_eq!(
            (s.injected, s.reexecutions, s.escalations),
            (1, job.ranks as u64, 0),
            "k = {k}, rank {lost}: {s:?}"
        );
        assert!(s.bytes_xor > 0 && s.bytes_buddy == 0 && s.bytes_local == 0);
        // Parity is about 1/(k-1) of the copies (the padding and the remainder group's
        // larger size move it a little).
        assert!(
            s.bytes_parity * (k as u64 - 1) <= s.bytes_xor * 2,
            "k = {k}: parity {} for {} preserved",
            s.bytes_parity,
            s.bytes_xor
        );
    }
}

#[test]
fn xor_groups_of_two_restore_every_member_bit_for_bit() {
    // 5 ranks: groups {0, 2, 4} (the remainder joins the first) and {1, 3}.
    every_member_in_turn(&common::job(5), 2);
}

/// The same entries preserved in one batch (one size agreement and one barrier of the group
/// for both): every member lost in turn is restored bit for bit.
#[test]
fn a_batch_of_entries_restores_every_member_bit_for_bit() {
    every_member_in_turn_with(&common::job(7), 3, true);
    every_member_in_turn_with(&common::job(4), 4, true);
}

#[test]
fn xor_groups_of_three_restore_every_member_bit_for_bit() {
    // 7 ranks: groups of 4 and 3.
    every_member_in_turn(&common::job(7), 3);
}

#[test]
fn xor_groups_of_four_restore_every_member_bit_for_bit() {
    every_member_in_turn(&common::job(4), 4);
}

/// Uneven emulated nodes (3, 3 and 1 ranks): groups of 2 take one rank from each of three
/// nodes at most, and every member lost in turn is restored.
#[test]
fn xor_groups_over_uneven_nodes_restore_every_member() {
    every_member_in_turn(&common::job(7).ranks_per_node(3), 2);
}

/// Groups of 3 over nodes of 3, 3 and 1 ranks: only two groups, so two members of one would
/// share a node of 3. Refused before any CD runs, naming the node and what to set.
#[test]
fn a_topology_that_puts_two_members_on_one_node_is_refused() {
    let e = program(&common::job(7).ranks_per_node(3), xor_config(3, &[]))
        .map(|o| o.results)
        .unwrap_err();
    assert!(matches!(e, cd::CdLaunchError::Config(_)), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("xor_group = 3")
            && msg.contains("node 0 holds 3")
            && msg.contains("at most 2"),
        "{msg}"
    );
    // Over ranks instead of nodes the same groups are accepted (and survive a rank's loss).
    let mut cfg = xor_config(3, &[4]);
    cfg.buddy_domain = cd::config::BuddyDomain::Rank;
    program(&common::job(7).ranks_per_node(3), cfg).unwrap();
}

#[test]
fn a_group_larger_than_the_job_is_a_config_error() {
    let e = program(&common::job(3), xor_config(4, &[]))
        .map(|o| o.results)
        .unwrap_err();
    assert!(matches!(e, cd::CdLaunchError::Config(_)), "{e:?}");
    assert!(e.to_string().contains("xor_group = 4"), "{e}");
}

/// Two members of one group (4 ranks on one node, k = 2: groups {0, 2} and {1, 3}) lost in
/// the same execution: the run stops with a line naming the group and both ranks. Two losses
/// in different groups are contained.
#[test]
fn two_losses_in_one_group_escalate_naming_the_group_and_both_ranks() {
    let job = common::job(4);
    let clean = program(&job, CdConfig::default()).unwrap();
    let msg = message(program(&job, xor_config(2, &[0, 2])));
    assert!(
        msg.contains("xor checksum group 0 of xor_group = 2 (ranks [0, 2])")
            && msg.contains("ranks 0 and 2"),
        "{msg}"
    );
    assert!(msg.contains("escalated"), "{msg}");
    let other = program(&job, xor_config(2, &[0, 1])).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answers(&other), answers(&clean));
}

/// A loss rebuilt, then a second loss in the same group in a later CD: the first rebuild made
/// the group whole again, so the second is contained too.
#[test]
fn a_rebuilt_group_survives_the_next_loss() {
    let job = common::job(4);
    let clean = program(&job, CdConfig::default()).unwrap();
    let cfg = config(
        "[cd.step]\nmedium = \"xor\"\nxor_group = 2\ninject = { at = [\
         { rank = 0, iteration = 0, kind = \"rank_loss\" }, \
         { rank = 2, iteration = 2, kind = \"rank_loss\" }] }\n",
    );
    let faulty = program(&job, cfg).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answers(&faulty), answers(&clean));
    assert_eq!(faulty.report.cd("step").unwrap().reexecutions, 8);
}

/// An outer CD on the xor medium around inner ones on the local medium: a loss in an inner CD
/// takes its local copies, it escalates, and the outer CD rebuilds its own entry from the
/// group and re-executes.
#[test]
fn a_local_child_escalates_to_an_xor_parent_that_rebuilds() {
    let body = || -> Result<Vec<f64>, CdError> {
        let mut x: Vec<f64> = (0..N).map(|i| (i + pgas::rank_me()) as f64).collect();
        cd::strict("outer", |c| {
            c.preserve("x", &mut x);
            for it in 0..2 {
                cd::strict("inner", |c| {
                    c.preserve("x", &mut x);
                    step(&mut x, it);
                    Ok(())
                })?;
            }
            Ok(())
        })?;
        Ok(x)
    };
    let clean = common::run(3, CdConfig::default(), body).unwrap();
    let faulty = common::run(
        3,
        config(
            "[cd.outer]\nmedium = \"xor\"\nxor_group = 3\n\
             [cd.inner]\ninject = { at = [{ rank = 1, iteration = 1, kind = \"rank_loss\" }] }\n",
        ),
        body,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(faulty.results, clean.results);
    let r = &faulty.report;
    assert_eq!(r.cd("inner").unwrap().escalations, 3);
    assert_eq!(r.cd("outer").unwrap().reexecutions, 3);
}

/// With `node_mtbf_seconds` the report states P_cf for the buddy and xor media (the numbers
/// follow `cd::xor::p_cf`, tested on its own).
#[test]
fn the_report_states_p_cf_for_buddy_and_xor() {
    let job = common::job(8).ranks_per_node(2);
    let cfg = config(
        "node_mtbf_seconds = 36000.0\nrecovery_seconds = 36.0\n\
         [cd.step]\nmedium = \"xor\"\nxor_group = 4\n",
    );
    let out = program(&job, cfg).unwrap();
    let p = out.report.cd("step").unwrap().pcf.clone().unwrap();
    // 4 nodes of 2, groups {0,2,4,6} {1,3,5,7}: every node's partners are the 3 others.
    let want = 1.0 - (-3.0f64 * 36.0 / 36000.0).exp();
    assert_eq!(
        (p.medium.as_str(), p.group_size, p.groups, p.nodes),
        ("xor", 4, 2, 4)
    );
    assert!((p.p_cf - want).abs() < 1e-12, "{p:?}");
    assert!(
        out.report.table().contains("P_cf of step (xor"),
        "{}",
        out.report.table()
    );
    let cfg = config(
        "node_mtbf_seconds = 36000.0\nrecovery_seconds = 36.0\n[cd.step]\nmedium = \"buddy\"\n",
    );
    let out = program(&job, cfg).unwrap();
    let p = out.report.cd("step").unwrap().pcf.clone().unwrap();
    // Buddies on the next node: each node pairs with the one before and the one after.
    let want = 1.0 - (-2.0f64 * 36.0 / 36000.0).exp();
    assert_eq!((p.medium.as_str(), p.groups), ("buddy", 8));
    assert!((p.p_cf - want).abs() < 1e-12, "{p:?}");
}

/// Names what the program's hook saw: rpcs, replies, collectives, puts.
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

/// The parity traffic (allgathers and barriers of the group, uncounted puts into the staging
/// blocks), the loss notices and the rebuild are the CD runtime's own: the program's hook sees
/// none of them, and neither the Epoch Counter nor the Incoming Write Counter moves.
#[test]
fn xor_parity_traffic_and_rebuild_are_not_the_programs_communication() {
    let out = common::run(
        4,
        config(
            "[cd.step]\nmedium = \"xor\"\nxor_group = 4\n\
             inject = { at = [{ rank = 3, iteration = 1, kind = \"rank_loss\" }] }\n",
        ),
        || {
            let seen = std::rc::Rc::new(Seen::default());
            pgas::runtime_hooks::set_hook(seen.clone());
            let (ec, iwc) = (pgas::epoch(), pgas::runtime_hooks::incoming_writes());
            let mut x: Vec<f64> = (0..N * (1 + pgas::rank_me())).map(|i| i as f64).collect();
            for it in 0..3 {
                cd::strict("step", |c| {
                    c.preserve_slice("x", &mut x);
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
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.report.cd("step").unwrap().reexecutions, 4);
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
