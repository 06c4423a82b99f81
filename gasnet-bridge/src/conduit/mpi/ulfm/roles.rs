//! The role table: which process holds each job rank, and which processes wait as spares. Every
//! live process holds the same table, because it changes only by [`Roles::renumber`] over the
//! agreed set of the dead (`RECOVERY.md`, "Renumbering").

use thiserror::Error;

/// Who holds what, by process number in the communicator of every process (`all`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Roles {
    /// By job rank: the process that holds it.
    pub(crate) holders: Vec<usize>,
    /// The idle spares, in the order they are recruited.
    pub(crate) spares: Vec<usize>,
}

/// A renumbering that cannot be made.
#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum RenumberError {
    /// More ranks were lost than spares were left.
    #[error(
        "rank{} {} lost and no spare is left to replace {} ({} spare{} left before the loss): \
         start more with PGAS_SPARES and mpirun -n N+S",
        plural(lost.len()),
        list(lost),
        if lost.len() == 1 { "it" } else { "them" },
        spares,
        plural(*spares)
    )]
    NoSpare { lost: Vec<usize>, spares: usize },
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn list(ranks: &[usize]) -> String {
    let words: Vec<String> = ranks.iter().map(usize::to_string).collect();
    words.join(", ")
}

/// What the renumbering did: the new table, and which job ranks changed process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Renumbered {
    pub(crate) roles: Roles,
    /// The job ranks whose process died, each with the process (old number) that now holds it.
    pub(crate) replaced: Vec<(usize, usize)>,
}

impl Roles {
    /// The table of a job given each process's job rank (`None` for a spare), by process.
    pub(crate) fn from_ranks(rank_of: &[Option<usize>]) -> Roles {
        let mut holders = vec![usize::MAX; rank_of.iter().flatten().count()];
        let mut spares = Vec::new();
        for (process, rank) in rank_of.iter().enumerate() {
            match rank {
                Some(r) => holders[*r] = process,
                None => spares.push(process),
            }
        }
        debug_assert!(holders.iter().all(|&p| p != usize::MAX), "ranks 0..N");
        Roles { holders, spares }
    }

    /// The job rank `process` holds, if any.
    pub(crate) fn rank_of(&self, process: usize) -> Option<usize> {
        self.holders.iter().position(|&p| p == process)
    }

    /// The new table after the processes `dead` (old numbers) died: each dead holder's rank,
    /// in rank order, goes to the first idle spares in order; dead spares leave the list.
    pub(crate) fn renumber(&self, dead: &[usize]) -> Result<Renumbered, RenumberError> {
        let mut spares: Vec<usize> = self
            .spares
            .iter()
            .copied()
            .filter(|p| !dead.contains(p))
            .collect();
        let lost: Vec<usize> = (0..self.holders.len())
            .filter(|&r| dead.contains(&self.holders[r]))
            .collect();
        if lost.len() > spares.len() {
            return Err(RenumberError::NoSpare {
                lost,
                spares: spares.len(),
            });
        }
        let mut holders = self.holders.clone();
        let mut replaced = Vec::with_capacity(lost.len());
        for (&rank, spare) in lost.iter().zip(spares.drain(..lost.len())) {
            holders[rank] = spare;
            replaced.push((rank, spare));
        }
        Ok(Renumbered {
            roles: Roles { holders, spares },
            replaced,
        })
    }

    /// `process`'s key in the communicator of every live process after a renumbering: its job
    /// rank, or the job's size plus its place among the spares.
    pub(crate) fn all_key(&self, process: usize) -> Option<usize> {
        self.rank_of(process).or_else(|| {
            self.spares
                .iter()
                .position(|&p| p == process)
                .map(|i| self.holders.len() + i)
        })
    }

    /// The table in the numbering of the new communicator of every live process, whose keys
    /// were [`Roles::all_key`]: job rank r is process r, spares follow.
    pub(crate) fn compacted(&self) -> Roles {
        let n = self.holders.len();
        Roles {
            holders: (0..n).collect(),
            spares: (n..n + self.spares.len()).collect(),
        }
    }
}

/// A 30-bit digest of a set of process numbers (sorted, so every holder of the set computes
/// the same), for the agreement: two bits of the agreed word stay free for flags.
pub(crate) fn digest(set: &[usize]) -> u32 {
    let mut sorted = set.to_vec();
    sorted.sort_unstable();
    // FNV-1a over the numbers' bytes: deterministic, unlike std's RandomState.
    let mut h: u32 = 0x811c_9dc5;
    for p in sorted {
        for b in (p as u64).to_le_bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
    }
    h & 0x3fff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn four_plus_two() -> Roles {
        Roles::from_ranks(&[Some(0), Some(1), Some(2), Some(3), None, None])
    }

    #[test]
    fn a_spare_takes_the_dead_rank_and_the_others_keep_theirs() {
        let r = four_plus_two().renumber(&[2]).unwrap();
        assert_eq!(r.roles.holders, vec![0, 1, 4, 3]);
        assert_eq!(r.roles.spares, vec![5]);
        assert_eq!(r.replaced, vec![(2, 4)]);
        assert_eq!(r.roles.all_key(4), Some(2));
        assert_eq!(r.roles.all_key(5), Some(4));
        assert_eq!(r.roles.all_key(2), None);
        let c = r.roles.compacted();
        assert_eq!((c.holders, c.spares), (vec![0, 1, 2, 3], vec![4]));
    }

    #[test]
    fn two_losses_go_to_spares_in_order_and_a_dead_spare_is_dropped() {
        let r = four_plus_two().renumber(&[3, 1]).unwrap();
        assert_eq!(r.roles.holders, vec![0, 4, 2, 5]);
        assert_eq!(r.replaced, vec![(1, 4), (3, 5)]);
        let r = four_plus_two().renumber(&[4, 0]).unwrap();
        assert_eq!(r.roles.holders, vec![5, 1, 2, 3]);
        assert!(r.roles.spares.is_empty());
    }

    #[test]
    fn without_a_spare_the_error_names_the_ranks() {
        let roles = Roles::from_ranks(&[Some(1), Some(0), Some(2)]);
        let e = roles.renumber(&[0]).unwrap_err();
        assert_eq!(
            e,
            RenumberError::NoSpare {
                lost: vec![1],
                spares: 0
            }
        );
        assert!(e.to_string().starts_with("rank 1 lost and no spare"), "{e}");
        let e = four_plus_two().renumber(&[0, 1, 4, 5]).unwrap_err();
        assert!(e.to_string().starts_with("ranks 0, 1 lost"), "{e}");
    }

    #[test]
    fn the_digest_ignores_order_and_fits_30_bits() {
        assert_eq!(digest(&[3, 1]), digest(&[1, 3]));
        assert_ne!(digest(&[1]), digest(&[2]));
        assert_ne!(digest(&[]), digest(&[0]));
        assert!(digest(&[7, 9, 1000]) < 1 << 30);
    }
}
