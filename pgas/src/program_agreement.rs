//! One program in every process: before a job's body runs, its processes agree that they
//! register the same rpc functions (the `#[pgas::remote]` registry and the [`RpcTable`]), in
//! the same order, since an rpc names its function by its number there.
//!
//! Under mpirun a process may be started from another binary (`mpirun -n 1 a : -n 1 b`, or a
//! binary rebuilt while a job starts); without this check its first rpc would run the wrong
//! function or fail as a malformed message mid-run. On smp one process runs every rank with
//! one table, so there is nothing to agree on.

use serde::{Deserialize, Serialize};

use crate::collectives::allgather;
use crate::remote_registry::{name_hash, remote_paths};
use crate::rpc::RpcTable;

/// The rpc functions a process registers, in order.
#[derive(Serialize, Deserialize, PartialEq, Eq, Clone, Debug)]
pub(crate) struct Registered {
    remote: Vec<String>,
    table: Vec<String>,
}

impl Registered {
    /// This process's functions with `table`.
    pub(crate) fn of(table: &RpcTable) -> Registered {
        Registered {
            remote: remote_paths().map(str::to_string).collect(),
            table: table.names().map(str::to_string).collect(),
        }
    }

    /// A hash of the lists (what the ranks compare first, in one small allgather).
    fn digest(&self) -> u64 {
        let mut h = 0u64;
        for (list, tag) in [(&self.remote, "remote"), (&self.table, "table")] {
            h = h.rotate_left(7) ^ name_hash(tag);
            for name in list {
                h = h.rotate_left(7) ^ name_hash(name);
            }
        }
        h
    }
}

/// Agrees with every rank of the job (a collective: every rank calls it before its body)
/// that each registers `mine`; otherwise the message names the first rank that differs from
/// rank 0 and how.
pub(crate) fn agree(mine: &Registered) -> Result<(), String> {
    let digests = allgather(mine.digest()).wait();
    if digests.iter().all(|d| *d == digests[0]) {
        return Ok(());
    }
    let all = allgather(mine.clone()).wait();
    let (rank, other) = all
        .iter()
        .enumerate()
        .find(|(_, r)| **r != all[0])
        .expect("digests differ, so the lists do");
    Err(difference(&all[0], rank, other))
}

/// What differs between rank 0's functions and `rank`'s, for the launch error.
pub(crate) fn difference(first: &Registered, rank: usize, other: &Registered) -> String {
    let mut parts = Vec::new();
    for (what, a, b) in [
        ("#[pgas::remote] functions", &first.remote, &other.remote),
        ("RpcTable functions", &first.table, &other.table),
    ] {
        let only = |x: &[String], y: &[String]| {
            x.iter()
                .filter(|n| !y.contains(n))
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
        };
        let (in_first, in_other) = (only(a, b), only(b, a));
        if !in_first.is_empty() {
            parts.push(format!(
                "rank 0 has {what} rank {rank} lacks: {}",
                in_first.join(", ")
            ));
        }
        if !in_other.is_empty() {
            parts.push(format!(
                "rank {rank} has {what} rank 0 lacks: {}",
                in_other.join(", ")
            ));
        }
        if in_first.is_empty() && in_other.is_empty() && a != b {
            parts.push(format!("their {what} are registered in another order"));
        }
    }
    format!(
        "the processes of this job run different programs: ranks 0 and {rank} register \
         different rpc functions ({}); start every process of the job from the same binary, \
         registering the same RpcTable functions in the same order",
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(remote: &[&str], table: &[&str]) -> Registered {
        Registered {
            remote: remote.iter().map(|s| s.to_string()).collect(),
            table: table.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_difference_names_what_each_side_lacks() {
        let a = reg(&["app::add", "app::echo"], &["t"]);
        let b = reg(&["app::add", "other::ping"], &["t"]);
        assert_ne!(a.digest(), b.digest());
        let m = difference(&a, 3, &b);
        assert!(
            m.contains("rank 0 has #[pgas::remote] functions rank 3 lacks: `app::echo`"),
            "{m}"
        );
        assert!(
            m.contains("rank 3 has #[pgas::remote] functions rank 0 lacks: `other::ping`"),
            "{m}"
        );
        assert!(m.contains("same binary"), "{m}");
        assert!(!m.contains("RpcTable functions rank"), "{m}");
    }

    #[test]
    fn order_and_list_matter() {
        let a = reg(&["x", "y"], &[]);
        let b = reg(&["y", "x"], &[]);
        assert_ne!(a.digest(), b.digest());
        assert!(difference(&a, 1, &b).contains("another order"));
        assert_ne!(reg(&["x"], &[]).digest(), reg(&[], &["x"]).digest());
        assert_eq!(a.digest(), reg(&["x", "y"], &[]).digest());
    }
}
