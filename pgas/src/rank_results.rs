//! What [`launch`](crate::launch) returns: the results of the ranks this process ran, with the
//! ranks they belong to. The same shape on every conduit: on smp one process runs every rank,
//! under mpirun each process runs one, and a program that prints its report through
//! [`RankResults::rank0`] or [`RankResults::print_once`] prints it once on either.

use std::fmt;
use std::ops::{Deref, Range};

/// The results of the ranks this process ran, in rank order, and which ranks those are.
///
/// It dereferences to the slice of results, and compares equal to a `Vec` of the same values,
/// so on smp (every rank here) `assert_eq!(out, vec![..])` checks every rank.
#[derive(Clone, PartialEq, Eq)]
pub struct RankResults<R> {
    /// The rank of `values[0]`.
    first: usize,
    /// The job's rank count (all processes).
    job_ranks: usize,
    values: Vec<R>,
}

impl<R> RankResults<R> {
    /// The results `values` of the consecutive ranks `first..`, in a job of `job_ranks` ranks.
    ///
    /// # Panics
    /// If the ranks run past the job's.
    pub fn new(first: usize, job_ranks: usize, values: Vec<R>) -> Self {
        assert!(
            first + values.len() <= job_ranks,
            "results of ranks {first}..{} in a job of {job_ranks} ranks",
            first + values.len()
        );
        RankResults {
            first,
            job_ranks,
            values,
        }
    }

    /// The ranks whose results these are: `0..n` on smp, this process's rank under mpirun.
    pub fn ranks(&self) -> Range<usize> {
        self.first..self.first + self.values.len()
    }

    /// The job's rank count, over all processes.
    pub fn job_ranks(&self) -> usize {
        self.job_ranks
    }

    /// `rank`'s result, if this process ran it.
    pub fn get(&self, rank: usize) -> Option<&R> {
        rank.checked_sub(self.first)
            .and_then(|i| self.values.get(i))
    }

    /// Rank 0's result, if this process ran rank 0: the one process that prints a job's report.
    pub fn rank0(&self) -> Option<&R> {
        self.get(0)
    }

    /// Rank 0's result, owned, if this process ran rank 0.
    pub fn into_rank0(self) -> Option<R> {
        (self.first == 0)
            .then(|| self.values.into_iter().next())
            .flatten()
    }

    /// Prints `line(rank 0's result)` on standard output, in the process that ran rank 0 only:
    /// once per job on any conduit.
    pub fn print_once<D: fmt::Display>(&self, line: impl FnOnce(&R) -> D) {
        if let Some(r) = self.rank0() {
            println!("{}", line(r));
        }
    }

    /// Each result with its rank.
    pub fn with_ranks(&self) -> impl Iterator<Item = (usize, &R)> {
        (self.first..).zip(self.values.iter())
    }

    /// The same ranks' results transformed by `f`.
    pub fn map<S>(self, f: impl FnMut(R) -> S) -> RankResults<S> {
        RankResults {
            first: self.first,
            job_ranks: self.job_ranks,
            values: self.values.into_iter().map(f).collect(),
        }
    }

    /// The results alone, in rank order.
    pub fn into_vec(self) -> Vec<R> {
        self.values
    }
}

impl<R> Deref for RankResults<R> {
    type Target = [R];
    fn deref(&self) -> &[R] {
        &self.values
    }
}

impl<R: PartialEq<S>, S> PartialEq<Vec<S>> for RankResults<R> {
    fn eq(&self, other: &Vec<S>) -> bool {
        self.values == *other
    }
}

impl<R: PartialEq<S>, S> PartialEq<[S]> for RankResults<R> {
    fn eq(&self, other: &[S]) -> bool {
        self.values == other
    }
}

impl<R: PartialEq<S>, S> PartialEq<&[S]> for RankResults<R> {
    fn eq(&self, other: &&[S]) -> bool {
        self.values == *other
    }
}

impl<R: fmt::Debug> fmt::Debug for RankResults<R> {
    /// As the `Vec` of results when they are every rank's (as the `Vec` it compares equal to),
    /// with the ranks otherwise.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == 0 && self.values.len() == self.job_ranks {
            self.values.fmt(f)
        } else {
            f.debug_map().entries(self.with_ranks()).finish()
        }
    }
}

impl<R> IntoIterator for RankResults<R> {
    type Item = R;
    type IntoIter = std::vec::IntoIter<R>;
    fn into_iter(self) -> Self::IntoIter {
        self.values.into_iter()
    }
}

impl<'a, R> IntoIterator for &'a RankResults<R> {
    type Item = &'a R;
    type IntoIter = std::slice::Iter<'a, R>;
    fn into_iter(self) -> Self::IntoIter {
        self.values.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::RankResults;

    #[test]
    fn every_rank_here() {
        let r = RankResults::new(0, 3, vec!['a', 'b', 'c']);
        assert_eq!(r.ranks(), 0..3);
        assert_eq!(
            (r.rank0(), r.get(2), r.get(3)),
            (Some(&'a'), Some(&'c'), None)
        );
        assert_eq!(r, vec!['a', 'b', 'c']);
        assert_eq!(format!("{r:?}"), "['a', 'b', 'c']");
        let doubled = r.map(|c| c.to_string().repeat(2));
        assert_eq!(doubled[1], "bb");
        assert_eq!(doubled.into_rank0().as_deref(), Some("aa"));
    }

    #[test]
    fn one_rank_of_four_here() {
        let r = RankResults::new(2, 4, vec![20u32]);
        assert_eq!((r.ranks(), r.job_ranks()), (2..3, 4));
        assert_eq!((r.rank0(), r.get(1), r.get(2)), (None, None, Some(&20)));
        assert_eq!(r.with_ranks().collect::<Vec<_>>(), vec![(2, &20)]);
        assert_eq!(format!("{r:?}"), "{2: 20}");
        assert_eq!(r.into_rank0(), None);
    }

    #[test]
    #[should_panic(expected = "results of ranks 3..5 in a job of 4 ranks")]
    fn ranks_past_the_job_are_refused() {
        RankResults::new(3, 4, vec![0, 0]);
    }
}
