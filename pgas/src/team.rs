//! Teams: ordered subsets of the world's ranks with their own rank numbering and collectives.
//!
//! `world()` holds every rank; `local_team()` the ranks of this rank's node; `split` divides a
//! team by color, ordering each new team by (key, parent rank), like `MPI_Comm_split`. A
//! team's id is derived from its parent's id, the split's sequence number and the color, so
//! every member computes the same id without further messages. `Team::split` itself is in
//! `collectives.rs`: a split is a collective over the team.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;

use gasnet_bridge::Endpoint;

use crate::mix::mix64;
use crate::runtime;

/// An ordered group of ranks.
#[derive(Clone)]
pub struct Team {
    inner: Rc<TeamInner>,
}

struct TeamInner {
    id: u64,
    /// World ranks in team-rank order.
    members: Vec<usize>,
    /// This rank's index in `members`.
    me: usize,
    /// Whether every member's segment is addressable from this rank, found out once.
    shared: OnceCell<bool>,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("id", &self.inner.id)
            .field("members", &self.inner.members)
            .field("rank_me", &self.inner.me)
            .finish()
    }
}

impl PartialEq for Team {
    fn eq(&self, other: &Self) -> bool {
        self.inner.id == other.inner.id
    }
}

/// The world and local teams of a rank, made once at start-up.
pub(crate) struct TeamRegistry {
    world: RefCell<Option<Team>>,
    local: RefCell<Option<Team>>,
}

const WORLD_ID: u64 = 0;

fn mix(a: u64, b: u64) -> u64 {
    // SplitMix64 finalizer over the pair: ids of different (parent, seq, color) differ.
    mix64(a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17))
}

impl TeamRegistry {
    pub(crate) fn new(ep: &Endpoint) -> TeamRegistry {
        let world = Team::from_members(WORLD_ID, (0..ep.ranks()).collect(), ep.rank());
        let topo = ep.topology();
        let node = topo.node_of(ep.rank());
        let local = Team::from_members(
            mix(u64::MAX, node as u64),
            topo.ranks_on(node).collect(),
            ep.rank(),
        );
        TeamRegistry {
            world: RefCell::new(Some(world)),
            local: RefCell::new(Some(local)),
        }
    }
}

impl Team {
    fn from_members(id: u64, members: Vec<usize>, world_rank: usize) -> Team {
        let me = members
            .iter()
            .position(|&r| r == world_rank)
            .expect("a team is made only on its members");
        Team {
            inner: Rc::new(TeamInner {
                id,
                members,
                me,
                shared: OnceCell::new(),
            }),
        }
    }

    /// Identifier, equal on all members.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// This rank's index in the team.
    pub fn rank_me(&self) -> usize {
        self.inner.me
    }

    /// Number of ranks in the team.
    pub fn rank_n(&self) -> usize {
        self.inner.members.len()
    }

    /// The world rank of team rank `r`.
    ///
    /// # Panics
    /// If `r` is not a team rank.
    pub fn to_world(&self, r: usize) -> usize {
        *self.inner.members.get(r).unwrap_or_else(|| {
            panic!(
                "team rank {r} out of range: the team has {} ranks",
                self.rank_n()
            )
        })
    }

    /// The team rank of world rank `w`, if it is a member.
    pub fn from_world(&self, w: usize) -> Option<usize> {
        self.inner.members.iter().position(|&r| r == w)
    }

    /// True when this rank addresses every member's segment directly: all members are ranks
    /// of one process (smp) or processes of one host mapping each other's segments (mpi). The
    /// same on every member, since a host's processes share memory with each other and with
    /// no one else; the collectives choose their algorithm by it.
    pub(crate) fn shares_memory(&self) -> bool {
        *self.inner.shared.get_or_init(|| {
            runtime::with(|rt| {
                let ep = rt.ep();
                self.inner
                    .members
                    .iter()
                    .all(|&w| ep.segment_base(w).is_ok())
            })
        })
    }

    /// World ranks of the members, in team order.
    pub fn members(&self) -> &[usize] {
        &self.inner.members
    }

    /// The team of this rank's `color` after split `seq` of this team, from every member's
    /// `(color, key)` in team order: ordered by key, then by rank in this team.
    pub(crate) fn split_by(&self, seq: u64, color: u64, all: &[(u64, u64)]) -> Team {
        let mut chosen: Vec<(u64, usize)> = all
            .iter()
            .enumerate()
            .filter(|(_, (c, _))| *c == color)
            .map(|(r, (_, k))| (*k, r))
            .collect();
        chosen.sort_unstable();
        let members = chosen.iter().map(|&(_, r)| self.to_world(r)).collect();
        let id = mix(mix(self.inner.id, seq), color);
        Team::from_members(id, members, runtime::rank_me())
    }
}

/// The team of all ranks.
pub fn world() -> Team {
    runtime::with(|rt| {
        rt.state::<TeamRegistry>()
            .world
            .borrow()
            .clone()
            .expect("world team")
    })
}

/// The team of this rank alone (like `MPI_COMM_SELF`): its collectives complete at once.
pub fn solo_team() -> Team {
    let me = runtime::rank_me();
    Team::from_members(mix(u64::MAX - 1, me as u64), vec![me], me)
}

/// The ranks on this rank's node (all ranks on the smp conduit unless nodes are emulated).
pub fn local_team() -> Team {
    runtime::with(|rt| {
        rt.state::<TeamRegistry>()
            .local
            .borrow()
            .clone()
            .expect("local team")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_separate_parents_sequences_and_colors() {
        let ids = [
            mix(mix(0, 1), 0),
            mix(mix(0, 1), 1),
            mix(mix(0, 2), 0),
            mix(mix(5, 1), 0),
        ];
        for i in 0..ids.len() {
            for j in 0..i {
                assert_ne!(ids[i], ids[j]);
            }
        }
    }

    #[test]
    fn numbering() {
        let t = Team::from_members(9, vec![4, 1, 7], 7);
        assert_eq!((t.rank_me(), t.rank_n()), (2, 3));
        assert_eq!(t.to_world(0), 4);
        assert_eq!(t.from_world(1), Some(1));
        assert_eq!(t.from_world(0), None);
    }
}
