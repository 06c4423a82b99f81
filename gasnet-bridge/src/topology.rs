//! Which ranks share a node: real hosts on a cluster, or an emulated split on one machine.

use std::ops::Range;

/// Rank count and the (possibly emulated) grouping of ranks into nodes.
///
/// Node `k` holds the ranks `k * ranks_per_node .. min((k + 1) * ranks_per_node, ranks)`;
/// with no setting every rank is on node 0, which is the truth for the smp conduit.
///
/// On the mpi conduit nodes are the real hosts. The conduit numbers ranks host by host, so a
/// node is still a contiguous range of ranks; when hosts hold different numbers of ranks the
/// ranges are listed explicitly ([`Topology::from_node_sizes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology {
    ranks: usize,
    ranks_per_node: usize,
    /// First rank of every node plus `ranks` at the end, when nodes differ in size.
    starts: Option<&'static [usize]>,
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
            starts: None,
        }
    }

    /// Contiguous nodes of the given sizes, in rank order (every size at least 1). Equal sizes
    /// (the last node may be smaller) give the same value as [`Topology::new`]; otherwise the
    /// node boundaries are kept in a small list that lives for the rest of the process (a
    /// job's topology is built once per launch).
    pub fn from_node_sizes(sizes: &[usize]) -> Self {
        assert!(
            !sizes.is_empty() && sizes.iter().all(|&s| s >= 1),
            "every node holds at least one rank"
        );
        let ranks: usize = sizes.iter().sum();
        let first = sizes[0];
        let (last, full) = sizes.split_last().expect("non-empty");
        if full.iter().all(|&s| s == first) && *last <= first {
            return Topology::new(ranks, first);
        }
        let mut starts = Vec::with_capacity(sizes.len() + 1);
        let mut at = 0;
        for s in sizes {
            starts.push(at);
            at += s;
        }
        starts.push(at);
        Topology {
            ranks,
            ranks_per_node: sizes.iter().copied().max().unwrap_or(1),
            starts: Some(Vec::leak(starts)),
        }
    }

    /// Number of ranks in the job.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// Number of ranks on a full node (the largest node when nodes differ in size).
    pub fn ranks_per_node(&self) -> usize {
        self.ranks_per_node
    }

    /// Number of nodes (the last one may be partly filled).
    pub fn nodes(&self) -> usize {
        match self.starts {
            None => self.ranks.div_ceil(self.ranks_per_node),
            Some(starts) => starts.len() - 1,
        }
    }

    /// The node that holds `rank`.
    pub fn node_of(&self, rank: usize) -> usize {
        match self.starts {
            None => rank / self.ranks_per_node,
            // The last node whose first rank is <= rank.
            Some(starts) => starts[..starts.len() - 1].partition_point(|&s| s <= rank) - 1,
        }
    }

    /// The ranks on `node`.
    pub fn ranks_on(&self, node: usize) -> Range<usize> {
        match self.starts {
            None => {
                let start = (node * self.ranks_per_node).min(self.ranks);
                start..(start + self.ranks_per_node).min(self.ranks)
            }
            Some(starts) if node + 1 < starts.len() => starts[node]..starts[node + 1],
            Some(_) => self.ranks..self.ranks,
        }
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
    fn uneven_hosts_are_contiguous_ranges() {
        let t = Topology::from_node_sizes(&[2, 3, 1]);
        assert_eq!((t.ranks(), t.nodes(), t.ranks_per_node()), (6, 3, 3));
        assert_eq!(t.ranks_on(0), 0..2);
        assert_eq!(t.ranks_on(1), 2..5);
        assert_eq!(t.ranks_on(2), 5..6);
        let nodes: Vec<usize> = (0..6).map(|r| t.node_of(r)).collect();
        assert_eq!(nodes, [0, 0, 1, 1, 1, 2]);
        assert_eq!(Topology::from_node_sizes(&[4, 4, 2]), Topology::new(10, 4));
        assert_eq!(Topology::from_node_sizes(&[3]), Topology::new(3, 3));
    }

    #[test]
    fn oversized_node_is_the_whole_job() {
        let t = Topology::new(3, 10);
        assert_eq!(t.nodes(), 1);
        assert_eq!(t.ranks_on(0), 0..3);
    }
}
