//! Node-level dependency lists (seed 003, "Node-level Dependency Tracking"; docs/relaxed-cds.md,
//! "Escalation and dependency lists"): which ranks an escalation from a
//! relaxed CD must re-execute.
//!
//! While a tracking strict CD runs (`dependency_tracking = true`, or unset: from the
//! instance after the first one that held relaxed CDs), each rank notes, from the
//! operations its hook sees, the ranks it read from and the ranks it wrote into
//! (`Dependencies`). Synchronizations add nothing. When a relaxed child escalates, every
//! rank of the LCSA gives its notes in one allgather (`Record`); grouped by node they are the
//! read list (nodes a node's CDs read from) and the write list (nodes whose CDs wrote into a
//! node) of every node, and every rank computes the same set D (`reexecution_set`): the
//! ranks on the failed node F, on the nodes of F's write list, on the nodes of F's read list,
//! and on the nodes in the write lists of F's read list.
//!
//! Reading chosen: the lists are kept per rank at the initiator and grouped by node only at
//! escalation (one allgather, made only then), so forward execution pays a set insert per
//! remote operation and no communication.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::frame::Frame;
use crate::relaxed::log_store::EntryKind;
use crate::runtime::CdRuntime;

pub(crate) use super::frame_state::Dependencies;

/// Why a rank's execution of the strict CD failed, as far as dependency tracking cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Failure {
    /// No failure on this rank.
    None,
    /// Only a relaxed child escalated (it could not recover alone): the rank's memory is
    /// usable, so a limited re-execution can contain it.
    RelaxedEscalation,
    /// A relaxed child failed and escalated only because its rank's SPBC cluster must
    /// re-execute with it (`cluster.rs`): the cluster re-executes, not the dependents.
    Cluster,
    /// The same after a loss of the rank's memory whose log came back from the buddy: the
    /// cluster re-executes, and the rank first rebuilds the writes from outside D that landed
    /// before the strict CD began (`limited::prepare`).
    ClusterLoss,
    /// The rank lost its memory inside a relaxed child, which escalated, and the strict CD's
    /// own preserved state survived (a medium that survives a loss): limited like
    /// `RelaxedEscalation` if the rank's notes survived too (else `WholeGroup::NotesLost`),
    /// D grown by the ranks it wrote into if its log did not (`Record::log_lost`).
    RankLoss,
    /// Anything else (a failure of the strict CD's own code, an injected fault at its level,
    /// a loss that took the strict CD's state): the whole group re-executes.
    Other,
}

/// One rank's contribution to the escalation's allgather.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) rank: usize,
    pub(crate) failure: Failure,
    pub(crate) reads_from: Vec<usize>,
    pub(crate) writes_to: Vec<usize>,
    pub(crate) unlogged: bool,
    pub(crate) notes_lost: bool,
    /// The loss took entries of this rank's log of the execution: a limited re-execution
    /// cannot serve or check this rank's operations with ranks outside D from it.
    pub(crate) log_lost: bool,
    /// The rank took what only its own log can give again (`Dependencies::log_served`).
    pub(crate) log_served: bool,
    /// This execution kept no notes (tracking unset, and the CD's first instance that held
    /// relaxed CDs).
    pub(crate) untracked: bool,
    /// The bytes of other ranks this rank accessed, per barrier phase
    /// (`Dependencies::extents`).
    pub(crate) extents: BTreeMap<(usize, u32), Vec<(usize, usize)>>,
}

/// Why an escalation re-executes the whole group instead of a limited set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WholeGroup {
    /// A rank failed other than by a relaxed child's escalation.
    OtherFailure(usize),
    /// A rank communicated outside logging relaxed CDs.
    Unlogged(usize),
    /// A rank lost its notes with its memory.
    NotesLost(usize),
    /// A rank lost its log with its memory, and the log held what only it can serve.
    LogNeeded(usize),
    /// The execution kept no notes: the first instance of the CD that held relaxed CDs.
    Untracked,
    /// D is every rank anyway.
    Everyone,
}

impl std::fmt::Display for WholeGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WholeGroup::OtherFailure(r) => write!(
                f,
                "rank {r} failed outside a relaxed child (or lost its memory)"
            ),
            WholeGroup::Unlogged(r) => write!(
                f,
                "rank {r} communicated outside logging relaxed CDs, which no log can serve"
            ),
            WholeGroup::NotesLost(r) => write!(
                f,
                "rank {r} lost its dependency notes with its memory (they reach the buddy \
                 with a log_medium = \"buddy\" log, or whenever they grow when this strict CD \
                 keeps its state where a loss leaves it: medium other than \"local\")"
            ),
            WholeGroup::LogNeeded(r) => write!(
                f,
                "rank {r} lost its log with its memory, and took an rng draw or a collective \
                 result in it (a reduce_one's, or one on a team other than this CD's) that \
                 only its own log could give a limited re-execution again"
            ),
            WholeGroup::Untracked => write!(
                f,
                "the first instance of this CD that held relaxed CDs kept no dependency notes \
                 (tracking starts with the next one; set dependency_tracking = true to track \
                 from the first)"
            ),
            WholeGroup::Everyone => write!(f, "every rank depends on the failed ones"),
        }
    }
}

/// The node-level lists of a group: for each node, the nodes its CDs read from and the nodes
/// whose CDs wrote into it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NodeLists {
    /// Node → nodes its ranks read from.
    pub read: BTreeMap<usize, BTreeSet<usize>>,
    /// Node → nodes whose ranks wrote into it.
    pub write: BTreeMap<usize, BTreeSet<usize>>,
}

impl NodeLists {
    /// Groups per-rank notes `(rank, reads_from, writes_to)` by node.
    pub fn from_ranks<'a>(
        ranks: impl IntoIterator<Item = (usize, &'a [usize], &'a [usize])>,
        node_of: impl Fn(usize) -> usize,
    ) -> NodeLists {
        let mut lists = NodeLists::default();
        for (rank, reads, writes) in ranks {
            let me = node_of(rank);
            for &r in reads {
                lists.read.entry(me).or_default().insert(node_of(r));
            }
            for &w in writes {
                lists.write.entry(node_of(w)).or_default().insert(me);
            }
        }
        lists
    }

    /// The nodes whose CDs re-execute when a CD on `failed` escalates (the four criteria of
    /// seed 003): `failed`, its write list, its read list, and the write lists of its read
    /// list.
    pub fn dependents(&self, failed: usize) -> BTreeSet<usize> {
        let empty = BTreeSet::new();
        let reads = self.read.get(&failed).unwrap_or(&empty);
        let mut d: BTreeSet<usize> = BTreeSet::from([failed]);
        d.extend(self.write.get(&failed).unwrap_or(&empty));
        d.extend(reads);
        for n in reads {
            d.extend(self.write.get(n).unwrap_or(&empty));
        }
        d
    }
}

/// The world ranks (of `members`, sorted) that re-execute for the failures in `records`, or
/// why the whole group must. `cluster_of` names each rank's SPBC cluster (the rank itself
/// without clusters): D holds whole clusters, since the writes among a cluster's ranks are
/// in no log and only their re-execution makes them again.
pub(crate) fn reexecution_set(
    records: &[Record],
    members: &[usize],
    node_of: impl Fn(usize) -> usize,
    cluster_of: impl Fn(usize) -> usize,
) -> Result<Vec<usize>, WholeGroup> {
    if let Some(r) = records.iter().find(|r| r.failure == Failure::Other) {
        return Err(WholeGroup::OtherFailure(r.rank));
    }
    if records.iter().any(|r| r.untracked) {
        return Err(WholeGroup::Untracked);
    }
    if let Some(r) = records.iter().find(|r| r.unlogged) {
        return Err(WholeGroup::Unlogged(r.rank));
    }
    if let Some(r) = records.iter().find(|r| r.notes_lost) {
        return Err(WholeGroup::NotesLost(r.rank));
    }
    if let Some(r) = records.iter().find(|r| r.log_lost && r.log_served) {
        return Err(WholeGroup::LogNeeded(r.rank));
    }
    let lists = NodeLists::from_ranks(
        records
            .iter()
            .map(|r| (r.rank, &r.reads_from[..], &r.writes_to[..])),
        &node_of,
    );
    let mut nodes = BTreeSet::new();
    let mut clusters = BTreeSet::new();
    for r in records.iter() {
        match r.failure {
            Failure::None => {}
            Failure::Cluster | Failure::ClusterLoss => {
                clusters.insert(cluster_of(r.rank));
            }
            _ => nodes.extend(lists.dependents(node_of(r.rank))),
        }
        if r.log_lost {
            // Its writes into a rank outside D would be squashed after a comparison with
            // its log, which is gone: the ranks it wrote into take them live instead.
            nodes.insert(node_of(r.rank));
            nodes.extend(r.writes_to.iter().map(|&w| node_of(w)));
        }
    }
    for &m in members {
        if nodes.contains(&node_of(m)) {
            clusters.insert(cluster_of(m));
        }
    }
    let mut d: Vec<usize> = members
        .iter()
        .copied()
        .filter(|&m| clusters.contains(&cluster_of(m)))
        .collect();
    d.sort_unstable();
    if d.len() == members.len() {
        return Err(WholeGroup::Everyone);
    }
    Ok(d)
}

/// The innermost strict CD, if it keeps dependency lists.
pub(crate) fn tracking_frame(rt: &CdRuntime) -> Option<std::rc::Rc<Frame>> {
    if rt.relaxed.tracking.get() == 0 {
        // No tracking CD runs: spare the logging path the search.
        return None;
    }
    Some(rt.lcsa()).filter(|f| f.rx.borrow().tracked)
}

/// Notes a remote operation in the tracking strict CD's lists (no-op without one); returns
/// that CD if its notes grew (the caller ships them, `replica::ship_notes`).
pub(crate) fn note(rt: &CdRuntime, kind: &EntryKind, logged: bool) -> Option<std::rc::Rc<Frame>> {
    let f = tracking_frame(rt)?;
    let team = f.team.id();
    let grew = f.rx.borrow_mut().deps.note(kind, logged, team);
    grew.then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(rank: usize, failure: Failure, reads: &[usize], writes: &[usize]) -> Record {
        Record {
            rank,
            failure,
            reads_from: reads.to_vec(),
            writes_to: writes.to_vec(),
            unlogged: false,
            notes_lost: false,
            log_lost: false,
            log_served: false,
            untracked: false,
            extents: BTreeMap::new(),
        }
    }

    /// Seed 003, Figure 5: a chain of CDs, each reading from its neighbours; B fails.
    #[test]
    fn figure_5_chain_reexecutes_the_failed_cd_and_its_neighbours() {
        let n: usize = 6;
        let records: Vec<Record> = (0..n)
            .map(|r| {
                let reads: Vec<usize> = [r.wrapping_sub(1), r + 1]
                    .into_iter()
                    .filter(|&x| x < n)
                    .collect();
                let f = if r == 2 {
                    Failure::RelaxedEscalation
                } else {
                    Failure::None
                };
                rec(r, f, &reads, &[])
            })
            .collect();
        let members: Vec<usize> = (0..n).collect();
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Ok(vec![1, 2, 3])
        );
    }

    #[test]
    fn the_four_criteria_each_add_their_nodes() {
        // Node = rank. F = 0. 1 wrote into 0 (criterion 2); 0 read from 2 (3); 3 wrote into
        // 2 (4); 4 only read from 0 and 5 is unrelated.
        let records = vec![
            rec(0, Failure::RelaxedEscalation, &[2], &[]),
            rec(1, Failure::None, &[], &[0]),
            rec(2, Failure::None, &[], &[]),
            rec(3, Failure::None, &[], &[2]),
            rec(4, Failure::None, &[0], &[]),
            rec(5, Failure::None, &[], &[]),
        ];
        let members: Vec<usize> = (0..6).collect();
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Ok(vec![0, 1, 2, 3])
        );
        // Nodes of two ranks: F's node partner (1) comes by criterion 1 and brings nothing
        // else; node 1 (ranks 2, 3) is read from, node 2 (ranks 4, 5) reads node 0 only.
        assert_eq!(
            reexecution_set(&records, &members, |r| r / 2, |r| r),
            Ok(vec![0, 1, 2, 3])
        );
    }

    #[test]
    fn clusters_reexecute_whole() {
        // Clusters of 2; node = rank. A cluster failure on 2 brings 3 and no dependents; an
        // escalation on 0, which read from 4, brings 1 (its cluster), 4 and 5 (4's cluster).
        let members: Vec<usize> = (0..8).collect();
        let mut records: Vec<Record> = (0..8).map(|r| rec(r, Failure::None, &[], &[])).collect();
        records[2] = rec(2, Failure::Cluster, &[1], &[1]);
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r / 2),
            Ok(vec![2, 3])
        );
        records[2] = rec(2, Failure::None, &[], &[]);
        records[0] = rec(0, Failure::RelaxedEscalation, &[4], &[]);
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r / 2),
            Ok(vec![0, 1, 4, 5])
        );
        // One cluster holding every rank: everyone.
        records[0] = rec(0, Failure::Cluster, &[], &[]);
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |_| 0),
            Err(WholeGroup::Everyone)
        );
    }

    #[test]
    fn another_failure_or_unlogged_communication_means_the_whole_group() {
        let members = vec![0, 1, 2];
        let mut records = vec![
            rec(0, Failure::RelaxedEscalation, &[], &[]),
            rec(1, Failure::Other, &[], &[]),
            rec(2, Failure::None, &[], &[]),
        ];
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Err(WholeGroup::OtherFailure(1))
        );
        records[1].failure = Failure::None;
        records[2].unlogged = true;
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Err(WholeGroup::Unlogged(2))
        );
        records[2].unlogged = false;
        records[1].notes_lost = true;
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Err(WholeGroup::NotesLost(1))
        );
        records[1].notes_lost = false;
        records[0].reads_from = vec![1, 2];
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Err(WholeGroup::Everyone)
        );
    }

    /// A rank loss whose only consequence is a relaxed child's escalation is limited like
    /// that escalation, by the lost rank's notes; notes lost with it mean the whole group.
    #[test]
    fn a_rank_loss_with_surviving_notes_is_limited() {
        let members: Vec<usize> = (0..6).collect();
        let mut records: Vec<Record> = (0..6).map(|r| rec(r, Failure::None, &[], &[])).collect();
        // F = 2 read from 3; 1 wrote into 2, 4 into 3; 2's own write into 5 brings nothing.
        records[1] = rec(1, Failure::None, &[], &[2]);
        records[2] = rec(2, Failure::RankLoss, &[3], &[5]);
        records[4] = rec(4, Failure::None, &[], &[3]);
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Ok(vec![1, 2, 3, 4])
        );
        records[2].notes_lost = true;
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Err(WholeGroup::NotesLost(2))
        );
        // Its log lost too: the ranks it wrote into (5) re-execute with D.
        records[2].notes_lost = false;
        records[2].log_lost = true;
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Ok(vec![1, 2, 3, 4, 5])
        );
        records[2].log_served = true;
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Err(WholeGroup::LogNeeded(2))
        );
        records[2].log_lost = false;
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Ok(vec![1, 2, 3, 4]),
            "what only the log can give matters only with the log lost"
        );
        records[2].log_served = false;
        records[2].reads_from = (0..6).collect();
        assert_eq!(
            reexecution_set(&records, &members, |r| r, |r| r),
            Err(WholeGroup::Everyone)
        );
    }
}
