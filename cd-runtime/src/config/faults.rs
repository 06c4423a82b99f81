//! Exact faults (`inject = { at = [...] }`), indexed by rank and iteration (one hash probe
//! however many a table lists), and the warnings about those a run never reached.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::source::Source;
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
    /// Strike before the `at_op`-th operation of a logging relaxed CD's body, not at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_op: Option<u64>,
}

/// The exact faults of one table in the order written, shared by every CD that takes them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(from = "Vec<Spanned<ExactFault>>")]
pub struct ExactFaults(Option<Arc<ExactFaultList>>);

/// The faults of [`ExactFaults`], where each starts in its text, and those of each place.
#[derive(Debug, Default)]
struct ExactFaultList {
    faults: Vec<ExactFault>,
    starts: Vec<usize>,
    at: HashMap<(usize, u64), Vec<usize>>,
}

impl ExactFaults {
    /// The faults `faults`, the i-th written at byte `starts[i]` of its text.
    fn written(faults: Vec<ExactFault>, starts: Vec<usize>) -> ExactFaults {
        let mut at: HashMap<_, Vec<usize>> = HashMap::with_capacity(faults.len());
        for (i, f) in faults.iter().enumerate() {
            at.entry((f.rank, f.iteration)).or_default().push(i);
        }
        ExactFaults(Some(Arc::new(ExactFaultList { faults, starts, at })))
    }

    /// The first fault of instance `iteration` on `rank`, at an operation if `at_op`, else at end.
    pub fn find_striking(&self, rank: usize, iteration: u64, at_op: bool) -> Option<&ExactFault> {
        let faults = self.as_slice();
        (self.indices(rank, iteration).iter())
            .map(|&i| &faults[i])
            .find(|f| f.at_op.is_some() == at_op)
    }

    /// The faults, in the order written.
    pub fn as_slice(&self) -> &[ExactFault] {
        self.0.as_ref().map_or(&[], |list| &list.faults)
    }

    /// The indices of the faults written for instance `iteration` on `rank`.
    fn indices(&self, rank: usize, iteration: u64) -> &[usize] {
        let list = self.0.as_ref().and_then(|l| l.at.get(&(rank, iteration)));
        list.map_or(&[], Vec::as_slice)
    }
}

impl PartialEq for ExactFaults {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl From<Vec<ExactFault>> for ExactFaults {
    fn from(faults: Vec<ExactFault>) -> Self {
        ExactFaults::written(faults, Vec::new())
    }
}

impl From<Vec<Spanned<ExactFault>>> for ExactFaults {
    fn from(written: Vec<Spanned<ExactFault>>) -> Self {
        let starts = written.iter().map(|f| f.span().start).collect();
        let faults = written.into_iter().map(Spanned::into_inner).collect();
        ExactFaults::written(faults, starts)
    }
}

/// Lines [`crate::CdConfig::unreached`] spends on faults one by one before it counts the rest.
pub const UNREACHED_LINES: usize = 10;

/// Every table's exact faults with the table's name (`cd.step`) and the text they were read
/// from, numbered across the tables in this order (the numbers of `CdConfig::exact_sites`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct FaultSites(Vec<(String, Source, ExactFaults)>);

impl FaultSites {
    /// The faults of each table, with its name, read from `src`.
    pub(super) fn new<'a>(
        src: &Source,
        at: impl Iterator<Item = (String, &'a ExactFaults)>,
    ) -> Self {
        FaultSites(at.map(|(t, at)| (t, src.clone(), at.clone())).collect())
    }

    /// These faults, those of the table `table` replaced by the faults of `other`.
    pub(super) fn replace_table(&mut self, table: &str, other: FaultSites) {
        self.0.retain(|(t, _, _)| t != table);
        self.0.extend(other.0);
    }

    /// Every fault with its table, its text and where it starts there, in the order of their
    /// numbers (placed only when a message names it).
    fn all(&self) -> impl Iterator<Item = (&str, &Source, usize, &ExactFault)> {
        self.0.iter().flat_map(|(table, src, at)| {
            let starts = at.0.as_ref().map_or(&[][..], |l| &l.starts);
            let faults = at.as_slice().iter().enumerate();
            faults.map(move |(i, f)| (table.as_str(), src, starts.get(i).map_or(0, |s| *s), f))
        })
    }

    /// The first fault on a rank a job of `ranks` ranks lacks, with its table, text and start.
    pub(super) fn beyond(&self, ranks: usize) -> Option<(&str, &Source, usize, &ExactFault)> {
        self.all().find(|s| s.3.rank >= ranks)
    }

    /// Whether no exact fault names `rank` and `iteration` (no hashing without exact faults).
    pub(super) fn none_at(&self, rank: usize, iteration: u64) -> bool {
        (self.0.iter()).all(|(_, _, at)| at.indices(rank, iteration).is_empty())
    }

    /// The numbers of the faults at `rank` and `iteration` of the table whose list is `at` (the
    /// same list, not an equal one). Allocates nothing unless some fault is there.
    pub(super) fn reached(&self, at: &ExactFaults, rank: usize, iteration: u64) -> Vec<usize> {
        let mut first = 0;
        for (_, _, faults) in &self.0 {
            if matches!((&faults.0, &at.0), (Some(a), Some(b)) if Arc::ptr_eq(a, b)) {
                let found = faults.indices(rank, iteration).iter();
                return found.map(|i| first + i).collect();
            }
            first += faults.as_slice().len();
        }
        Vec::new()
    }

    /// One line per fault not in `reached`, for the first [`UNREACHED_LINES`], then one line
    /// with the count of the others (a generated list may hold many thousands).
    pub(super) fn unreached(&self, reached: &[usize]) -> Vec<String> {
        let reached: HashSet<usize> = reached.iter().copied().collect();
        let mut missed = (self.all().enumerate()).filter(|(i, _)| !reached.contains(i));
        let mut lines: Vec<String> = (missed.by_ref().take(UNREACHED_LINES))
            .map(|(_, (table, src, start, f))| {
                let (rank, iteration, kind) = (f.rank, f.iteration, f.kind.name());
                format!(
                    "{}[{table}] inject.at {{ rank = {rank}, iteration = {iteration}, kind = \
                     \"{kind}\" }} was never injected: rank {rank} never began instance \
                     {iteration} (counted from 0) of a CD that takes its faults from [{table}]; \
                     check the rank and the iteration",
                    src.place(start).prefix(),
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
