//! A dependency-limited re-execution in progress on a rank of D: the re-executing ranks, the
//! first execution's log and the cursor over the entries the body consumes, the barriers run
//! among D, and the arrivals at them. What prepares, runs and ends it is `limited.rs`.

use std::collections::HashMap;

use pgas::{Promise, Team};

use crate::relaxed::log_store::LogEntry;

/// A limited re-execution in progress on a rank of D.
pub(crate) struct Limited {
    /// D: the re-executing world ranks, sorted.
    pub(crate) members: Vec<usize>,
    /// The strict CD's team (its barriers run among `members` ∩ team).
    team: Team,
    /// This rank's log of the first execution, whole (served to other ranks' gathers).
    pub(crate) old: Vec<LogEntry>,
    /// The entries the re-execution consumes: operations with ranks outside D, non-barrier
    /// collectives and rng draws, in LSN order.
    served: Vec<LogEntry>,
    cursor: usize,
    /// Barriers run so far per team id.
    barriers: HashMap<u64, u64>,
    /// When this rank's log of the first execution is lost: a rank of the strict CD's team
    /// whose log serves the collectives' results (every member got the same).
    result_holder: Option<usize>,
    /// Non-barrier collectives taken so far per team id (from `result_holder`).
    collectives: HashMap<u64, u64>,
    /// The body runs (set after the preparation D agreed on).
    active: bool,
    squashed: u64,
    replayed: u64,
}

impl Limited {
    /// A prepared re-execution among `members` of `team`, with this rank's whole log of the
    /// first execution (`old`) and the entries of it the body consumes (`served`); when the
    /// log was lost, the rank whose log serves the collectives' results (`result_holder`).
    pub(crate) fn new(
        members: Vec<usize>,
        team: Team,
        old: Vec<LogEntry>,
        served: Vec<LogEntry>,
        result_holder: Option<usize>,
    ) -> Limited {
        Limited {
            members,
            team,
            old,
            served,
            cursor: 0,
            barriers: HashMap::new(),
            result_holder,
            collectives: HashMap::new(),
            active: false,
            squashed: 0,
            replayed: 0,
        }
    }

    /// The body starts.
    pub(crate) fn start(&mut self) {
        self.active = true;
    }

    /// True while the body runs.
    pub(crate) fn active(&self) -> bool {
        self.active
    }

    /// The next entry for an operation with a rank outside D (`None`: the log ran out).
    pub(crate) fn next(&mut self) -> Option<LogEntry> {
        let e = self.served.get(self.cursor)?.clone();
        self.cursor += 1;
        Some(e)
    }

    /// If the body left entries unconsumed: how many it consumed, how many there are, and
    /// the next one's LSN.
    pub(crate) fn left_over(&self) -> Option<(usize, usize, u64)> {
        let e = self.served.get(self.cursor)?;
        Some((self.cursor, self.served.len(), e.lsn))
    }

    /// Counts an entry served to the body.
    pub(crate) fn count_served(&mut self) {
        self.replayed += 1;
    }

    /// Counts a write squashed.
    pub(crate) fn count_squashed(&mut self) {
        self.squashed += 1;
    }

    /// Entries served and writes squashed, for the report.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.replayed, self.squashed)
    }

    /// Where the result of the next non-barrier collective on the team `team_id` comes from
    /// when this rank's log is lost: (the holder, the collective's index among those of the
    /// team in the first execution, from 0). `None` with the log.
    pub(crate) fn next_collective(&mut self, team_id: u64) -> Option<(usize, u64)> {
        let holder = self.result_holder?;
        let k = self.collectives.entry(team_id).or_insert(0);
        *k += 1;
        Some((holder, *k - 1))
    }

    /// The re-executing ranks of the team `team_id` (the world's or the CD's) and the
    /// sequence number of its next barrier; `None` for another team, whose re-executing
    /// members are not known.
    pub(crate) fn next_barrier(&mut self, team_id: u64) -> Option<(Vec<usize>, u64)> {
        let peers: Vec<usize> = if team_id == pgas::world().id() {
            self.members.clone()
        } else if team_id == self.team.id() {
            self.members
                .iter()
                .copied()
                .filter(|m| self.team.members().contains(m))
                .collect()
        } else {
            return None;
        };
        let seq = self.barriers.entry(team_id).or_insert(0);
        *seq += 1;
        Some((peers, *seq))
    }
}

/// Arrivals of other ranks at a limited barrier, whether one of them failed (at the
/// preparation's agreement), and the waiter's promise once it waits.
#[derive(Default)]
pub(crate) struct Arrival {
    count: usize,
    failed: bool,
    promise: Option<Promise<()>>,
}

impl Arrival {
    /// The waiter waits on `promise`; returns how many ranks arrived already.
    pub(crate) fn wait_on(&mut self, promise: Promise<()>) -> usize {
        self.promise = Some(promise);
        self.count
    }

    /// One more rank arrived, having `failed` or not; fulfills the waiter's promise once.
    pub(crate) fn arrived(&mut self, failed: bool) {
        self.count += 1;
        self.failed |= failed;
        if let Some(p) = &self.promise {
            p.fulfill_anonymous(1);
        }
    }

    /// True if one of the ranks that arrived failed.
    pub(crate) fn failed(&self) -> bool {
        self.failed
    }
}
