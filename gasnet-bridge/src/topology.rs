//! Which ranks share a node: real hosts on a cluster, or an emulated split on one machine.

use std::ops::Range;

/// Rank count and the (possibly emulated) grouping of ranks into nodes.
///
/// Node `k` holds the ranks `k * ranks_per_node .. min((k + 1) * ranks_per_node, ranks)`;
/// with no setting every rank is on node 0, which is the truth for the smp conduit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology {
    ranks: usize,
    ranks_per_node: usize,
}

impl Topology {
    /// A topology of `ranks` ranks, `ranks_per_node` to a node (both at least 1).
    pub fn new(ranks: usize, ranks_per_node: usize) -> Self {
        assert!(
            ranks >= 1 && ranks_per_node >= 1,
            "ranks and ranks per node must be >= 1"
        );
        Topology {
            ranks,
            ranks_per_node: ranks_per_node.min(ranks),
        }
    }

    /// Number of ranks in the job.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// Number of ranks on a full node.
    pub fn ranks_per_node(&self) -> usize {
        self.ranks_per_node
    }

    /// Number of nodes (the last one may be partly filled).
    pub fn nodes(&self) -> usize {
        self.ranks.div_ceil(self.ranks_per_node)
    }

    /// The node that holds `rank`.
    pub fn node_of(&self, rank: usize) -> usize {
        rank / self.ranks_per_node
    }

    /// The ranks on `node`.
    pub fn ranks_on(&self, node: usize) -> Range<usize> {
        let start = (node * self.ranks_per_node).min(self.ranks);
        start..(start + self.ranks_per_node).min(self.ranks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_partition_the_ranks() {
        for ranks in 1..20 {
            for rpn in 1..8 {
                let t = Topology::new(ranks, rpn);
                let mut seen = vec![0; ranks];
                for node in 0..t.nodes() {
                    let r = t.ranks_on(node);
                    assert!(!r.is_empty(), "node {node} of {t:?} is empty");
                    for rank in r {
                        assert_eq!(t.node_of(rank), node);
                        seen[rank] += 1;
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "{t:?}: {seen:?}");
            }
        }
    }

    #[test]
    fn oversized_node_is_the_whole_job() {
        let t = Topology::new(3, 10);
        assert_eq!(t.nodes(), 1);
        assert_eq!(t.ranks_on(0), 0..3);
    }
}
