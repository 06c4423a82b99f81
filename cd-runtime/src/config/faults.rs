//! Exact faults (`inject = { at = [...] }`): shared by the CDs that take them, indexed by rank
//! and iteration so a lookup is one hash probe however many faults a table lists, and the
//! warnings about those a run never reached.

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::source::{Place, Source};
use super::values::FaultKind;

/// One fault injected at an exact place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExactFault {
    /// The rank that fails.
    pub rank: usize,
    /// Which instance of the CD on that rank (0 for the first time it begins).
    pub iteration: u64,
    /// What happens.
    pub kind: FaultKind,
}

/// The exact faults of one table (`inject.at`) in the order written, indexed by rank and
/// iteration: every CD that takes its faults from the table shares them (its settings hold a
/// reference, not a copy), and finding the fault of an execution is one hash lookup, however
/// many faults the table lists.
///
/// The empty list holds no allocation: every CD's settings carry one, and settings are made at
/// every CD begin.
#[derive(Debug, Clone, Default)]
pub struct ExactFaults(Option<Arc<ExactFaultList>>);

/// The faults of [`ExactFaults`] and their index.
#[derive(Debug, Default)]
struct ExactFaultList {
    faults: Vec<ExactFault>,
    /// (rank, iteration) to the first fault written for it.
    first: HashMap<(usize, u64), usize>,
}

impl ExactFaults {
    /// The faults `faults`, in this order.
    pub fn new(faults: Vec<ExactFault>) -> ExactFaults {
        let mut first = HashMap::with_capacity(faults.len());
        for (i, f) in faults.iter().enumerate() {
            first.entry((f.rank, f.iteration)).or_insert(i);
        }
        ExactFaults(Some(Arc::new(ExactFaultList { faults, first })))
    }

    /// The first fault written for instance `iteration` on `rank`, if any.
    pub fn find(&self, rank: usize, iteration: u64) -> Option<&ExactFault> {
        let list = self.0.as_ref()?;
        list.first.get(&(rank, iteration)).map(|&i| &list.faults[i])
    }

    /// The faults, in the order written.
    pub fn as_slice(&self) -> &[ExactFault] {
        self.0.as_ref().map_or(&[], |list| &list.faults)
    }
}

impl PartialEq for ExactFaults {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl From<Vec<ExactFault>> for ExactFaults {
    fn from(faults: Vec<ExactFault>) -> Self {
        ExactFaults::new(faults)
    }
}

/// Lines [`crate::CdConfig::unreached`] spends on faults one by one before it counts the rest.
pub const UNREACHED_LINES: usize = 10;

/// An exact fault as written, for the checks against the job and the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FaultSite {
    pub(super) place: Place,
    /// The table it is in (`cd.step`, `level.1`, `defaults`), shared by its faults.
    pub(super) table: Arc<str>,
    pub(super) fault: ExactFault,
}

/// Every exact fault of a configuration, with where it was written, indexed by (rank,
/// iteration).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct FaultSites {
    sites: Vec<FaultSite>,
    /// The indices in `sites` of the faults at each (rank, iteration).
    at: HashMap<(usize, u64), Vec<usize>>,
}

impl FaultSites {
    /// Adds the faults `at` of the table `table` of `src`, and returns them as the CDs that
    /// take them share them.
    pub(super) fn add(
        &mut self,
        src: &Source,
        table: &str,
        at: &[Spanned<ExactFault>],
    ) -> ExactFaults {
        let table: Arc<str> = table.into();
        for f in at {
            self.push(FaultSite {
                place: src.place(f.span()),
                table: table.clone(),
                fault: f.get_ref().clone(),
            });
        }
        ExactFaults::new(at.iter().map(|f| f.get_ref().clone()).collect())
    }

    /// Adds one fault.
    fn push(&mut self, site: FaultSite) {
        let at = (site.fault.rank, site.fault.iteration);
        self.at.entry(at).or_default().push(self.sites.len());
        self.sites.push(site);
    }

    /// These faults, those of the table `table` replaced by the faults of `other`.
    pub(super) fn replace_table(&mut self, table: &str, other: FaultSites) {
        let old = std::mem::take(self);
        let kept = old.sites.into_iter().filter(|f| *f.table != *table);
        kept.chain(other.sites).for_each(|f| self.push(f));
    }

    /// The first fault on a rank a job of `ranks` ranks lacks.
    pub(super) fn beyond(&self, ranks: usize) -> Option<&FaultSite> {
        self.sites.iter().find(|f| f.fault.rank >= ranks)
    }

    /// Whether no exact fault names `rank` and `iteration`: the common case, answered without
    /// hashing when the configuration has no exact faults at all.
    pub(super) fn none_at(&self, rank: usize, iteration: u64) -> bool {
        self.at.is_empty() || !self.at.contains_key(&(rank, iteration))
    }

    /// The indices of the faults of the table `table` at `rank` and `iteration`. Allocates
    /// nothing unless some exact fault names this rank and iteration.
    pub(super) fn reached(&self, table: impl Display, rank: usize, iteration: u64) -> Vec<usize> {
        self.at.get(&(rank, iteration)).map_or_else(Vec::new, |c| {
            let table = table.to_string();
            c.iter()
                .copied()
                .filter(|&i| *self.sites[i].table == *table)
                .collect()
        })
    }

    /// One line per fault not in `reached`, for the first [`UNREACHED_LINES`], then one line
    /// with the count of the others (a generated list may hold many thousands).
    pub(super) fn unreached(&self, reached: &[usize]) -> Vec<String> {
        let reached: HashSet<usize> = reached.iter().copied().collect();
        let mut missed = self
            .sites
            .iter()
            .enumerate()
            .filter(|(i, _)| !reached.contains(i));
        let mut lines: Vec<String> = missed
            .by_ref()
            .take(UNREACHED_LINES)
            .map(|(_, f)| {
                let ExactFault {
                    rank,
                    iteration,
                    kind,
                } = &f.fault;
                format!(
                    "{}[{}] inject.at {{ rank = {rank}, iteration = {iteration}, kind = \"{}\" }} \
                     was never injected: rank {rank} never began instance {iteration} (counted \
                     from 0) of a CD that takes its faults from [{}]; check the rank and the \
                     iteration",
                    f.place.prefix(),
                    f.table,
                    kind.name(),
                    f.table
                )
            })
            .collect();
        let more = missed.count();
        if more > 0 {
            lines.push(format!(
                "... and {more} more exact faults of the configuration were never injected"
            ));
        }
        lines
    }
}
