//! Property: random CD trees under random faults give the fault-free answer bit for bit, or
//! end with an error when a failure escalates past the root; never a wrong answer.
//!
//! A tree has 1-3 top-level CDs, nested 1-3 deep with up to 3 children each; a CD spans its
//! parent's ranks (`strict`), this rank alone (`strict_local`) or half of its parent's team
//! (`strict_on` a split team). Each preserves its rank's vector, updates it with exact
//! integer arithmetic, runs its children, then (spanning more than one rank) passes the
//! vector around its team's ring through the segment. Faults: exact soft errors and rank
//! losses, and probabilities, on random CDs with random media and retries (0 makes a failure
//! escalate at once).

mod common;

use std::fmt::Write as _;

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdError};
use common::{Ring, config, run, step};
use pgas::Team;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const LEN: usize = 4;

#[derive(Debug, Clone, Copy)]
enum Span {
    Parent,
    Local,
    Split,
}

#[derive(Debug, Clone)]
struct Node {
    name: String,
    span: Span,
    salt: u8,
    children: Vec<Node>,
}

#[derive(Debug, Clone)]
struct Faults {
    node: usize,
    retries: u32,
    medium: &'static str,
    at: Vec<(usize, u64, bool)>,
    soft: f64,
    loss: f64,
}

#[derive(Debug, Clone)]
struct Case {
    ranks: usize,
    seed: u64,
    tops: Vec<Node>,
    faults: Vec<Faults>,
}

fn span() -> impl Strategy<Value = Span> {
    prop_oneof![3 => Just(Span::Parent), 1 => Just(Span::Local), 1 => Just(Span::Split)]
}

fn node() -> impl Strategy<Value = Node> {
    let leaf = (span(), any::<u8>()).prop_map(|(span, salt)| Node {
        name: String::new(),
        span,
        salt,
        children: vec![],
    });
    leaf.prop_recursive(2, 10, 3, |inner| {
        (span(), any::<u8>(), prop::collection::vec(inner, 0..=3)).prop_map(
            |(span, salt, children)| Node {
                name: String::new(),
                span,
                salt,
                children,
            },
        )
    })
}

fn faults() -> impl Strategy<Value = Faults> {
    (
        0usize..64,
        0u32..=2,
        prop::sample::select(vec!["local", "buddy", "file"]),
        prop::collection::vec((0usize..4, 0u64..4, any::<bool>()), 0..=2),
        prop::sample::select(vec![0.0, 0.0, 0.1, 0.3]),
        prop::sample::select(vec![0.0, 0.0, 0.1]),
    )
        .prop_map(|(node, retries, medium, at, soft, loss)| Faults {
            node,
            retries,
            medium,
            at,
            soft,
            loss,
        })
}

fn case() -> impl Strategy<Value = Case> {
    (
        2usize..=4,
        any::<u64>(),
        prop::collection::vec(node(), 1..=3),
        prop::collection::vec(faults(), 1..=4),
    )
        .prop_map(|(ranks, seed, mut tops, faults)| {
            let mut next = 0;
            for t in &mut tops {
                name(t, &mut next);
            }
            Case {
                ranks,
                seed,
                tops,
                faults,
            }
        })
}

/// Names nodes n0, n1, ... in preorder; returns nothing, counts in `next`.
fn name(n: &mut Node, next: &mut usize) {
    n.name = format!("n{next}");
    *next += 1;
    for c in &mut n.children {
        name(c, next);
    }
}

fn count(nodes: &[Node]) -> usize {
    nodes.iter().map(|n| 1 + count(&n.children)).sum()
}

/// The TOML of a case's faults (several entries for one node: the last wins).
fn toml(case: &Case) -> String {
    let n = count(&case.tops);
    let mut s = format!("seed = {}\n", case.seed);
    let mut seen = std::collections::BTreeMap::new();
    for f in &case.faults {
        seen.insert(f.node % n, f);
    }
    for (node, f) in seen {
        let at: Vec<String> =
            f.at.iter()
                .map(|&(rank, iteration, soft)| {
                    // A fault on a rank the job does not have is a configuration error.
                    let rank = rank % case.ranks;
                    format!(
                        "{{ rank = {rank}, iteration = {iteration}, kind = \"{}\" }}",
                        if soft { "soft" } else { "rank_loss" }
                    )
                })
                .collect();
        let _ = write!(
            s,
            "[cd.n{node}]\nretries = {}\nmedium = \"{}\"\n\
             inject = {{ soft_error = {:?}, rank_loss = {:?}, at = [{}] }}\n",
            f.retries,
            f.medium,
            f.soft,
            f.loss,
            at.join(", ")
        );
    }
    s
}

/// Runs `node` as a CD under a parent spanning `parent`. A failed child does not end the body
/// early: the body still takes part in its team's communication, then returns the failure.
fn run_node(node: &Node, parent: &Team, ring: &Ring, v: &mut Vec<f64>) -> Result<(), CdError> {
    let team = match node.span {
        Span::Parent => parent.clone(),
        Span::Local => pgas::solo_team(),
        Span::Split => parent.split((parent.rank_me() % 2) as u64, 0),
    };
    let body = |c: &cd::Cd| {
        c.preserve("v", v);
        step(v, node.salt as u64);
        let mut failed = None;
        for child in &node.children {
            if let Err(e) = run_node(child, &team, ring, v) {
                failed.get_or_insert(e);
            }
        }
        ring.exchange(&team, v);
        failed.map_or(Ok(()), Err)
    };
    match node.span {
        Span::Parent => cd::strict(&node.name, body),
        Span::Local => cd::strict_local(&node.name, body),
        Span::Split => cd::strict_on(&node.name, &team, body),
    }
}

type Out = Result<cd::CdOutcome<Vec<u64>>, cd::CdLaunchError>;

fn program(case: &Case, cfg: CdConfig) -> Out {
    run(case.ranks, cfg, || {
        let ring = Ring::new(LEN);
        let world = pgas::world();
        let mut v: Vec<f64> = (0..LEN)
            .map(|i| (i + 10 * pgas::rank_me()) as f64)
            .collect();
        for _ in 0..2 {
            for top in &case.tops {
                run_node(top, &world, &ring, &mut v)?;
            }
        }
        Ok(v.iter().map(|x| x.to_bits()).collect())
    })
}

#[derive(Default, Debug)]
struct Tally {
    recovered: usize,
    untouched: usize,
    escalated_past_root: usize,
    double_loss: usize,
}

#[test]
fn random_trees_under_faults_give_the_fault_free_answer_or_an_error() {
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let tally = std::cell::RefCell::new(Tally::default());
    let result = runner.run(&case(), |case| {
        let clean = program(&case, CdConfig::default())
            .map_err(|e| TestCaseError::fail(format!("fault-free run failed: {e}")))?;
        let clean_report = clean.report.cd("n0").cloned().unwrap();
        prop_assert_eq!(clean_report.reexecutions, 0);
        let text = toml(&case);
        match program(&case, config(&text)) {
            Ok(out) => {
                prop_assert_eq!(&out.results, &clean.results, "config:\n{}", text);
                let reexecs: u64 = out.report.cds.iter().map(|c| c.reexecutions).sum();
                let mut t = tally.borrow_mut();
                if reexecs > 0 {
                    t.recovered += 1;
                } else {
                    t.untouched += 1;
                }
            }
            Err(e) => {
                let msg = e.to_string();
                // Besides escalations past the root, the one error a run may end with: two
                // buddies lost while one recovers (both copies gone, found on restoring).
                let double = msg.contains("a second rank loss during the recovery");
                prop_assert!(
                    msg.contains("escalated past the root CD") || double,
                    "an error other than an escalation past the root: {}\nconfig:\n{}",
                    msg,
                    text
                );
                let mut t = tally.borrow_mut();
                if double {
                    t.double_loss += 1;
                } else {
                    t.escalated_past_root += 1;
                }
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let t = tally.into_inner();
    eprintln!("{t:?}");
    assert!(
        t.recovered >= 8,
        "too few cases recovered from faults: {t:?}"
    );
    assert!(
        t.escalated_past_root >= 1,
        "no case escalated past the root: {t:?}"
    );
}

#[test]
fn retries_zero_everywhere_escalates_each_fault_to_the_root() {
    // A tree of world CDs, every level with retries 0: the fault reaches the root.
    let case = Case {
        ranks: 3,
        seed: 1,
        tops: vec![{
            let mut t = Node {
                name: String::new(),
                span: Span::Parent,
                salt: 1,
                children: vec![Node {
                    name: String::new(),
                    span: Span::Parent,
                    salt: 2,
                    children: vec![Node {
                        name: String::new(),
                        span: Span::Split,
                        salt: 3,
                        children: vec![],
                    }],
                }],
            };
            name(&mut t, &mut 0);
            t
        }],
        faults: vec![],
    };
    let cfg = |deep: &str| {
        config(&format!(
            "[defaults]\nretries = 0\n[cd.n2]\ninject = {{ at = [{{ rank = 2, iteration = 1, kind = \"{deep}\" }}] }}\n"
        ))
    };
    let msg = program(&case, cfg("soft"))
        .map(|o| o.results)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("escalated past the root CD"), "{msg}");
    assert!(
        msg.contains("\"n0\"") && msg.contains("0 retries exhausted"),
        "{msg}"
    );
    // With one retry at the top the same fault is contained there.
    let clean = program(&case, CdConfig::default()).unwrap();
    let out = program(
        &case,
        config(
            "[defaults]\nretries = 0\n[cd.n0]\nretries = 1\n\
             [cd.n2]\ninject = { at = [{ rank = 2, iteration = 1, kind = \"soft\" }] }\n",
        ),
    )
    .unwrap();
    assert_eq!(out.results, clean.results);
    let r = &out.report;
    // split(rank % 2) of 3 ranks: {0, 2} and {1}; the fault is in {0, 2}.
    assert_eq!(r.cd("n2").unwrap().escalations, 2, "only rank 2's half");
    assert_eq!(r.cd("n1").unwrap().escalations, 3);
    assert_eq!(r.cd("n0").unwrap().reexecutions, 3);
}
