//! The CD report: per CD name and level, how often it ran and recovered, what it preserved
//! where, and the time spent preserving and recovering; summed over ranks at the end.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::config::Medium;

/// Counters of one CD (name, level), summed over the ranks that ran it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdStats {
    /// CD name.
    pub name: String,
    /// Level in the tree (root 0).
    pub level: usize,
    /// Executions, including re-executions.
    pub executions: u64,
    /// Re-executions after a failure.
    pub reexecutions: u64,
    /// Failures passed to the parent.
    pub escalations: u64,
    /// Injected faults.
    pub injected: u64,
    /// Entries preserved (each `preserve*` call that saved rather than restored).
    #[serde(default)]
    pub preservations: u64,
    /// Bytes copied into local memory.
    pub bytes_local: u64,
    /// Bytes copied to a buddy rank.
    pub bytes_buddy: u64,
    /// Of `bytes_buddy`, the bytes sent by rpc into the buddy's private memory because the
    /// buddy region in its segment had no room (`buddy_segment_bytes`); the others went
    /// straight into its segment.
    #[serde(default)]
    pub bytes_buddy_rpc: u64,
    /// Bytes written to files.
    pub bytes_file: u64,
    /// Of the local copies: bytes moved to the file medium because the rank's preserved state
    /// passed `memory_budget_bytes` (demand preservation, `spill.rs`).
    #[serde(default)]
    pub bytes_spilled: u64,
    /// Bytes preserved on the xor medium (each rank's own copies; `xor.rs`).
    #[serde(default)]
    pub bytes_xor: u64,
    /// Of the xor medium: bytes of parity the ranks hold for their checksum groups (about
    /// `bytes_xor / (k - 1)` for groups of k).
    #[serde(default)]
    pub bytes_parity: u64,
    /// Bytes not copied because the parent held the same data (preserved by reference).
    pub bytes_by_reference: u64,
    /// Nanoseconds spent preserving (first executions).
    pub preserve_ns: u64,
    /// Nanoseconds spent recovering: restoring and re-executing.
    pub recover_ns: u64,
    /// Relaxed CDs: bytes logged.
    #[serde(default)]
    pub bytes_logged: u64,
    /// Relaxed CDs: log entries made.
    #[serde(default)]
    pub entries_logged: u64,
    /// Relaxed CDs: entries spilled to files.
    #[serde(default)]
    pub entries_spilled: u64,
    /// Relaxed CDs: nanoseconds spent logging (making entries in the hook; the time-stamp
    /// counter summed per execution, converted at its end).
    #[serde(default)]
    pub log_ns: u64,
    /// Relaxed CDs: entries served from the log in replays.
    #[serde(default)]
    pub entries_replayed: u64,
    /// Relaxed CDs: outgoing writes squashed in replays.
    #[serde(default)]
    pub writes_squashed: u64,
    /// Relaxed CDs with `log_medium = "buddy"`: bytes of log replicas shipped to the buddy
    /// rank when their bodies ended (postcard bytes, this CD's entries and those of the CDs
    /// around it not replicated before).
    #[serde(default)]
    pub bytes_replicated: u64,
    /// Per failure (instance and execution), the ranks that re-executed for it.
    #[serde(default)]
    pub failures: Vec<FailureRecord>,
    /// Strict CDs with `dependency_tracking`: why an escalation re-executed the whole group
    /// instead of the ranks that depend on the failed one (one line per rank and case).
    #[serde(default)]
    pub whole_group: Vec<String>,
    /// CDs run with `strict_steps` and an `interval`: the steps per preservation chosen (by
    /// Daly's formula, with its inputs and the expected overhead, or as configured).
    #[serde(default)]
    pub interval: Option<IntervalChoice>,
    /// CDs on the buddy or xor medium, with `node_mtbf_seconds` configured: the probability
    /// that a node failure is not survivable for their pairs or groups (`xor::p_cf`).
    #[serde(default)]
    pub pcf: Option<Pcf>,
    /// The CD with a `checkpoint` key: checkpoints committed to disk (`checkpoint/`).
    #[serde(default)]
    pub checkpoints: u64,
    /// The CD with a `checkpoint` key: bytes the background writer made durable for them
    /// (every file and its buddy copy).
    #[serde(default)]
    pub bytes_checkpointed: u64,
    /// The CD with a `checkpoint` key: nanoseconds the background writer took for those
    /// bytes, from its first write of a file to its last `fsync` (off the critical path).
    #[serde(default)]
    pub checkpoint_write_ns: u64,
    /// The CD with `checkpoint = { every = "daly" }`: the executions between checkpoints
    /// Daly's formula chose at the last commit (the same on every rank).
    #[serde(default)]
    pub checkpoint_every: Option<u64>,
}

/// The interval a CD run with `interval::strict_steps` chose, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntervalChoice {
    /// Steps per preservation (one CD execution each).
    pub steps: u64,
    /// True if chosen by Daly's formula (else configured).
    pub daly: bool,
    /// δ: the preservation time measured in the first step (ns; the largest over the ranks).
    pub preserve_ns: u64,
    /// t: the time of the first step without its preservation (ns; the largest over the
    /// ranks).
    pub step_ns: u64,
    /// M (ns).
    pub mtbf_ns: u64,
    /// Daly's optimum τ (ns).
    pub daly_ns: u64,
    /// The expected overhead of n·t between preservations in Daly's first-order model, in
    /// parts per million of the computation.
    pub overhead_ppm: u64,
}

/// The probability of a catastrophic failure of one CD's medium (ftRMA's P_cf; the formula
/// and its reading are at `xor::p_cf`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pcf {
    /// `"buddy"` or `"xor"`.
    pub medium: String,
    /// Members per group: 2 for buddy pairs, `xor_group` for xor (groups that took the
    /// remainder ranks have more).
    pub group_size: usize,
    /// Groups (buddy: one pair per rank).
    pub groups: usize,
    /// Nodes that hold ranks.
    pub nodes: usize,
    /// The configured mean time between failures of one node, in seconds.
    pub node_mtbf_seconds: f64,
    /// The configured window without redundancy after a failure, in seconds.
    pub recovery_seconds: f64,
    /// The probability that a node failure is catastrophic.
    pub p_cf: f64,
    /// Expected catastrophic failures per hour: node failures per hour times `p_cf`.
    pub per_hour: f64,
}

/// Compared bit for bit (reports compare equal when they were made from the same numbers).
impl PartialEq for Pcf {
    fn eq(&self, o: &Self) -> bool {
        self.medium == o.medium
            && (self.group_size, self.groups, self.nodes) == (o.group_size, o.groups, o.nodes)
            && [
                self.node_mtbf_seconds,
                self.recovery_seconds,
                self.p_cf,
                self.per_hour,
            ]
            .map(f64::to_bits)
                == [o.node_mtbf_seconds, o.recovery_seconds, o.p_cf, o.per_hour].map(f64::to_bits)
    }
}

impl Eq for Pcf {}

/// The ranks that re-executed a CD instance for one failure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureRecord {
    /// Which instance of the CD (per-rank begin count).
    pub iteration: u64,
    /// Which execution (1 for the first re-execution).
    pub attempt: u32,
    /// The ranks that re-executed, in increasing order.
    pub ranks: Vec<usize>,
    /// Their nodes, in increasing order.
    #[serde(default)]
    pub nodes: Vec<usize>,
    /// The longest recovery (restore and re-execution) among them, in nanoseconds.
    #[serde(default)]
    pub recover_ns: u64,
    /// Only the ranks that depend on the failed one re-executed (dependency tracking).
    #[serde(default)]
    pub limited: bool,
}

impl CdStats {
    fn add(&mut self, o: &CdStats) {
        self.executions += o.executions;
        self.reexecutions += o.reexecutions;
        self.escalations += o.escalations;
        self.injected += o.injected;
        self.preservations += o.preservations;
        self.bytes_local += o.bytes_local;
        self.bytes_buddy += o.bytes_buddy;
        self.bytes_buddy_rpc += o.bytes_buddy_rpc;
        self.bytes_file += o.bytes_file;
        self.bytes_spilled += o.bytes_spilled;
        self.bytes_xor += o.bytes_xor;
        self.bytes_parity += o.bytes_parity;
        self.bytes_by_reference += o.bytes_by_reference;
        self.preserve_ns += o.preserve_ns;
        self.recover_ns += o.recover_ns;
        self.bytes_logged += o.bytes_logged;
        self.entries_logged += o.entries_logged;
        self.entries_spilled += o.entries_spilled;
        self.log_ns += o.log_ns;
        self.entries_replayed += o.entries_replayed;
        self.writes_squashed += o.writes_squashed;
        self.bytes_replicated += o.bytes_replicated;
        self.checkpoints += o.checkpoints;
        self.bytes_checkpointed += o.bytes_checkpointed;
        self.checkpoint_write_ns += o.checkpoint_write_ns;
        self.checkpoint_every = self.checkpoint_every.or(o.checkpoint_every);
        self.whole_group.extend(o.whole_group.iter().cloned());
        // Every rank of the CD chose the same interval.
        if self.interval.is_none() {
            self.interval = o.interval.clone();
        }
        if self.pcf.is_none() {
            self.pcf = o.pcf.clone();
        }
        for f in &o.failures {
            match self
                .failures
                .iter_mut()
                .find(|m| (m.iteration, m.attempt) == (f.iteration, f.attempt))
            {
                Some(m) => {
                    m.ranks.extend(&f.ranks);
                    m.ranks.sort_unstable();
                    m.ranks.dedup();
                    m.nodes.extend(&f.nodes);
                    m.nodes.sort_unstable();
                    m.nodes.dedup();
                    m.recover_ns = m.recover_ns.max(f.recover_ns);
                    m.limited |= f.limited;
                }
                None => self.failures.push(f.clone()),
            }
        }
        self.failures.sort_by_key(|f| (f.iteration, f.attempt));
    }

    /// Counts `bytes` preserved on `medium`.
    pub(crate) fn preserved(&mut self, medium: Medium, bytes: usize) {
        let b = bytes as u64;
        match medium {
            Medium::Local => self.bytes_local += b,
            Medium::Buddy => self.bytes_buddy += b,
            Medium::File => self.bytes_file += b,
            Medium::Xor => self.bytes_xor += b,
        }
    }
}

/// The report of a job: one entry per (level, name).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Ranks the counters are summed over.
    pub ranks: usize,
    /// Per CD, ordered by level then name.
    pub cds: Vec<CdStats>,
}

/// Counters as a rank collects them.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    /// By level, then name: looked up with a `&str` on every CD execution, so the common case
    /// (the CD was seen before) allocates nothing.
    by_cd: BTreeMap<usize, BTreeMap<String, CdStats>>,
}

impl Collector {
    pub(crate) fn entry(&mut self, name: &str, level: usize) -> &mut CdStats {
        let names = self.by_cd.entry(level).or_default();
        if !names.contains_key(name) {
            names.insert(
                name.to_string(),
                CdStats {
                    name: name.to_string(),
                    level,
                    ..CdStats::default()
                },
            );
        }
        names.get_mut(name).expect("inserted above")
    }

    pub(crate) fn report(&self, ranks: usize) -> Report {
        Report {
            ranks,
            cds: self
                .by_cd
                .values()
                .flat_map(|n| n.values().cloned())
                .collect(),
        }
    }
}

impl Report {
    /// Sums two ranks' reports.
    pub fn merge(mut self, other: Report) -> Report {
        let mut by: BTreeMap<(usize, String), CdStats> = self
            .cds
            .drain(..)
            .map(|c| ((c.level, c.name.clone()), c))
            .collect();
        for c in other.cds {
            by.entry((c.level, c.name.clone()))
                .and_modify(|e| e.add(&c))
                .or_insert(c);
        }
        Report {
            ranks: self.ranks.max(other.ranks),
            cds: by.into_values().collect(),
        }
    }

    /// The stats of the CD called `name`, if it ran.
    pub fn cd(&self, name: &str) -> Option<&CdStats> {
        self.cds.iter().find(|c| c.name == name)
    }

    /// JSON text of the report.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serializes")
    }

    /// A readable table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "CD report ({} ranks, counts summed over ranks)\n{:<16} {:>5} {:>8} {:>8} {:>6} {:>8} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
            self.ranks,
            "cd",
            "level",
            "execs",
            "reexecs",
            "escal",
            "injected",
            "local B",
            "buddy B",
            "file B",
            "by-ref B",
            "pres ms",
            "recov ms"
        );
        for c in &self.cds {
            let _ = writeln!(
                s,
                "{:<16} {:>5} {:>8} {:>8} {:>6} {:>8} {:>12} {:>12} {:>12} {:>12} {:>10.3} {:>10.3}",
                c.name,
                c.level,
                c.executions,
                c.reexecutions,
                c.escalations,
                c.injected,
                c.bytes_local,
                c.bytes_buddy,
                c.bytes_file,
                c.bytes_by_reference,
                c.preserve_ns as f64 / 1e6,
                c.recover_ns as f64 / 1e6
            );
        }
        if self
            .cds
            .iter()
            .any(|c| c.entries_logged > 0 || c.entries_replayed > 0)
        {
            let _ = writeln!(
                s,
                "relaxed CDs\n{:<16} {:>5} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}",
                "cd",
                "level",
                "logged B",
                "entries",
                "spilled",
                "log ms",
                "replayed",
                "squashed",
                "replic B"
            );
            for c in self
                .cds
                .iter()
                .filter(|c| c.entries_logged > 0 || c.entries_replayed > 0)
            {
                let _ = writeln!(
                    s,
                    "{:<16} {:>5} {:>12} {:>10} {:>10} {:>10.3} {:>10} {:>10} {:>12}",
                    c.name,
                    c.level,
                    c.bytes_logged,
                    c.entries_logged,
                    c.entries_spilled,
                    c.log_ns as f64 / 1e6,
                    c.entries_replayed,
                    c.writes_squashed,
                    c.bytes_replicated
                );
            }
        }
        for c in self.cds.iter().filter(|c| !c.failures.is_empty()) {
            let list: Vec<String> = c
                .failures
                .iter()
                .map(|f| {
                    // Recovery times are in the JSON report (`recover_ns`).
                    let limited = if f.limited {
                        format!(" (dependency-limited, nodes {:?})", f.nodes)
                    } else {
                        String::new()
                    };
                    format!("#{}.{}: {:?}{limited}", f.iteration, f.attempt, f.ranks)
                })
                .collect();
            let _ = writeln!(
                s,
                "re-executed ranks per failure of {}: {}",
                c.name,
                list.join(", ")
            );
        }
        for c in &self.cds {
            let Some(i) = &c.interval else { continue };
            let _ = if i.daly {
                writeln!(
                    s,
                    "interval of {}: preserves every {} steps (Daly: preservation {:.3} ms, \
                     step {:.3} ms, MTBF {} s, optimum {:.3} ms of steps; expected \
                     overhead {:.2} %)",
                    c.name,
                    i.steps,
                    i.preserve_ns as f64 / 1e6,
                    i.step_ns as f64 / 1e6,
                    i.mtbf_ns as f64 / 1e9,
                    i.daly_ns as f64 / 1e6,
                    i.overhead_ppm as f64 / 1e4
                )
            } else {
                writeln!(
                    s,
                    "interval of {}: preserves every {} steps (configured)",
                    c.name, i.steps
                )
            };
        }
        for c in self.cds.iter().filter(|c| c.bytes_xor > 0) {
            let _ = writeln!(
                s,
                "xor medium of {}: {} B preserved, {} B of parity held",
                c.name, c.bytes_xor, c.bytes_parity
            );
        }
        for c in &self.cds {
            let Some(p) = &c.pcf else { continue };
            let _ = writeln!(
                s,
                "P_cf of {} ({}, {} groups of {} on {} nodes; node MTBF {} s, recovery {} s): \
                 {:.3e} per node failure, {:.3e} catastrophic failures per hour",
                c.name,
                p.medium,
                p.groups,
                p.group_size,
                p.nodes,
                p.node_mtbf_seconds,
                p.recovery_seconds,
                p.p_cf,
                p.per_hour
            );
        }
        for c in self.cds.iter().filter(|c| c.checkpoints > 0) {
            let _ = writeln!(
                s,
                "checkpoints of {}: {} committed, {} B written in the background in {:.3} ms",
                c.name,
                c.checkpoints,
                c.bytes_checkpointed,
                c.checkpoint_write_ns as f64 / 1e6
            );
            if let Some(n) = c.checkpoint_every {
                let _ = writeln!(
                    s,
                    "checkpoints of {}: every {n} executions (Daly's interval at the last commit)",
                    c.name
                );
            }
        }
        for c in self.cds.iter().filter(|c| !c.whole_group.is_empty()) {
            let _ = writeln!(
                s,
                "whole-group re-executions of {}: {}",
                c.name,
                c.whole_group.join("; ")
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_sums_matching_cds() {
        let mut a = Collector::default();
        a.entry("step", 1).executions = 3;
        a.entry("step", 1).preserved(Medium::Buddy, 100);
        let mut b = Collector::default();
        b.entry("step", 1).executions = 4;
        b.entry("inner", 2).reexecutions = 1;
        let r = a.report(2).merge(b.report(2));
        assert_eq!(r.cd("step").unwrap().executions, 7);
        assert_eq!(r.cd("step").unwrap().bytes_buddy, 100);
        assert_eq!(r.cd("inner").unwrap().reexecutions, 1);
        let json = r.to_json();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        assert!(r.table().contains("inner"));
    }
}
