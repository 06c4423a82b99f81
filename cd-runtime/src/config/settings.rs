//! The settings of one CD: a table as written in the file, the same table validated (a
//! [`Layer`]), and the one merge rule, the most specific table that sets a key wins
//! (`[cd.<name>]` over `[level.<n>]` over `[defaults]` over the built-in defaults).

use std::ops::Range;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::faults::{ExactFault, ExactFaults, FaultSites};
use super::source::Source;
use super::values::{
    Bytes, CdKindSetting, FaultKind, GroupSize, Interval, IntervalFile, LogMedium, Medium,
    Probability, Retries, Seconds, Threads,
};
use crate::checkpoint::format::CheckpointPolicy;
use crate::error::{ConfigError, FaultKinds};

/// The injector of one CD: probabilities per execution and exact faults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Injection {
    /// Probability that an execution fails its check.
    pub soft_error: f64,
    /// Probability that an execution loses the rank's memory.
    pub rank_loss: f64,
    /// Faults at exact (rank, iteration) places.
    pub at: ExactFaults,
}

/// The settings that apply to one CD, after merging defaults, its level and its name.
#[derive(Debug, Clone, PartialEq)]
pub struct CdSettings {
    /// Where `preserve` keeps copies by default.
    pub medium: Medium,
    /// Re-executions after the first execution before escalating.
    pub retries: u32,
    /// Failures this CD contains (others escalate at once).
    pub contain: FaultKinds,
    /// Whether this CD appears in the report.
    pub report: bool,
    /// Its fault injector.
    pub inject: Injection,
    /// `kind = "strict" | "relaxed"`: run the CD as this kind whatever the program calls
    /// (`None`: as called).
    pub kind: Option<CdKindSetting>,
    /// A relaxed CD logs its communication (without logs it cannot recover alone and
    /// escalates every failure).
    pub logging: bool,
    /// Past this many bytes of log in memory, the oldest entries go to a file.
    pub log_spill_bytes: Option<u64>,
    /// Where a relaxed CD's log survives a rank loss: `Buddy` replicates it at the buddy rank
    /// when the body ends, so the rank can recover alone (`log_medium` in cd.example.toml).
    pub log_medium: LogMedium,
    /// Check the access classes of relaxed CDs (an internal rpc per remote access).
    pub check_classes: bool,
    /// For a strict CD around relaxed ones: keep node-level read and write lists, so that an
    /// escalation from a relaxed child re-executes only the ranks it can have touched
    /// (`relaxed/dependencies.rs`); off, it re-executes every rank of the CD.
    pub dependency_tracking: bool,
    /// How often the CD preserves when run with [`crate::strict_steps`].
    pub interval: Interval,
    /// The mean time between failures this CD contains, in seconds (for `interval = "daly"`).
    pub mtbf_seconds: Option<f64>,
    /// Members of a checksum group of the xor medium (`xor_group`; at least 2).
    pub xor_group: Option<usize>,
    /// Threads a re-execution may spread its work over (`restart_threads`; 1: serial
    /// restart). See [`crate::Cd::restart_pool`].
    pub restart_threads: usize,
}

impl Default for CdSettings {
    fn default() -> Self {
        CdSettings {
            medium: Medium::Local,
            retries: 2,
            contain: FaultKinds::SOFT.union(FaultKinds::RANK_LOSS),
            report: true,
            inject: Injection::default(),
            kind: None,
            logging: true,
            log_spill_bytes: None,
            log_medium: LogMedium::Local,
            check_classes: cfg!(debug_assertions),
            dependency_tracking: false,
            interval: Interval::Every,
            mtbf_seconds: None,
            xor_group: None,
            restart_threads: 1,
        }
    }
}

/// Injection settings of a CD, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct InjectFile {
    soft_error: Option<Spanned<f64>>,
    rank_loss: Option<Spanned<f64>>,
    at: Option<Vec<Spanned<ExactFault>>>,
}

/// One table of settings, as written in the file (the order of the fields is the order the
/// message about an unknown key lists them in).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SettingsFile {
    medium: Option<Medium>,
    retries: Option<Spanned<i64>>,
    contain: Option<Vec<FaultKind>>,
    report: Option<bool>,
    inject: Option<InjectFile>,
    kind: Option<CdKindSetting>,
    logging: Option<bool>,
    log_spill_bytes: Option<Spanned<i64>>,
    log_medium: Option<Spanned<LogMedium>>,
    check_classes: Option<bool>,
    dependency_tracking: Option<bool>,
    interval: Option<Spanned<IntervalFile>>,
    mtbf_seconds: Option<Spanned<f64>>,
    xor_group: Option<Spanned<i64>>,
    restart_threads: Option<Spanned<i64>>,
    checkpoint: Option<Spanned<CheckpointFile>>,
}

/// `checkpoint = { dir, every, keep }`, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointFile {
    dir: Option<String>,
    every: Option<i64>,
    keep: Option<i64>,
}

/// One table of settings, validated: what it sets (with the places of the keys a check across
/// keys names).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Layer {
    pub(super) medium: Option<Medium>,
    pub(super) retries: Option<Retries>,
    pub(super) contain: Option<FaultKinds>,
    pub(super) report: Option<bool>,
    pub(super) soft_error: Option<Spanned<Probability>>,
    pub(super) rank_loss: Option<Spanned<Probability>>,
    pub(super) at: Option<ExactFaults>,
    pub(super) kind: Option<CdKindSetting>,
    pub(super) logging: Option<bool>,
    pub(super) log_spill_bytes: Option<Bytes>,
    pub(super) log_medium: Option<Spanned<LogMedium>>,
    pub(super) check_classes: Option<bool>,
    pub(super) dependency_tracking: Option<bool>,
    pub(super) interval: Option<Spanned<Interval>>,
    pub(super) mtbf_seconds: Option<Seconds>,
    pub(super) xor_group: Option<GroupSize>,
    pub(super) restart_threads: Option<Threads>,
    /// `checkpoint`, and where it was written.
    pub(super) checkpoint: Option<(CheckpointPolicy, Range<usize>)>,
}

impl SettingsFile {
    /// This table validated, its keys named `{at}key` in errors; its exact faults are added
    /// to `sites` as written in the table `table`.
    pub(super) fn validate(
        self,
        src: &Source,
        at: &str,
        table: &str,
        sites: &mut FaultSites,
    ) -> Result<Layer, ConfigError> {
        let inject = self.inject.unwrap_or_default();
        Ok(Layer {
            medium: self.medium,
            retries: src.value(&self.retries, at, "retries")?,
            contain: self.contain.as_ref().map(FaultKinds::from),
            report: self.report,
            soft_error: src.spanned(&inject.soft_error, at, "inject.soft_error")?,
            rank_loss: src.spanned(&inject.rank_loss, at, "inject.rank_loss")?,
            at: inject.at.map(|faults| sites.add(src, table, &faults)),
            kind: self.kind,
            logging: self.logging,
            log_spill_bytes: src.value(&self.log_spill_bytes, at, "log_spill_bytes")?,
            log_medium: self.log_medium,
            check_classes: self.check_classes,
            dependency_tracking: self.dependency_tracking,
            interval: src.spanned(&self.interval, at, "interval")?,
            mtbf_seconds: src.value(&self.mtbf_seconds, at, "mtbf_seconds")?,
            xor_group: src.value(&self.xor_group, at, "xor_group")?,
            restart_threads: src.value(&self.restart_threads, at, "restart_threads")?,
            checkpoint: self
                .checkpoint
                .map(|c| checkpoint(src, at, c))
                .transpose()?,
        })
    }
}

/// `checkpoint` validated: `every` and `keep` at least 1.
fn checkpoint(
    src: &Source,
    at: &str,
    c: Spanned<CheckpointFile>,
) -> Result<(CheckpointPolicy, Range<usize>), ConfigError> {
    let span = c.span();
    let c = c.into_inner();
    let d = CheckpointPolicy::default();
    let count = |v: Option<i64>, key: &str, default: u64| match v {
        None => Ok(default),
        Some(n) if n >= 1 => Ok(n as u64),
        Some(n) => Err(src.error(
            Some(span.clone()),
            Some(format!("{at}checkpoint.{key}")),
            format!("{n}: must be at least 1"),
        )),
    };
    Ok((
        CheckpointPolicy {
            dir: c.dir.map_or(d.dir, PathBuf::from),
            every: count(c.every, "every", d.every)?,
            keep: count(c.keep, "keep", d.keep as u64)? as usize,
        },
        span,
    ))
}

/// The most specific value `get` finds in `tables` (most specific first), and the name of the
/// table it comes from.
pub(super) fn first<'a, T, N: Copy>(
    tables: &[Option<(N, &'a Layer)>],
    get: impl Fn(&'a Layer) -> Option<T>,
) -> Option<(T, N)> {
    tables
        .iter()
        .flatten()
        .find_map(|&(n, l)| get(l).map(|v| (v, n)))
}

/// The most specific value `get` finds in `tables` (most specific first).
fn pick<N: Copy, T>(
    tables: &[Option<(N, &Layer)>],
    get: impl Fn(&Layer) -> Option<T>,
) -> Option<T> {
    first(tables, get).map(|(v, _)| v)
}

/// The settings of a CD whose tables are `tables`, most specific first.
pub(super) fn merge<N: Copy>(t: &[Option<(N, &Layer)>]) -> CdSettings {
    let d = CdSettings::default();
    let value = |s: &Option<Spanned<Probability>>| s.as_ref().map(|p| p.get_ref().0);
    CdSettings {
        medium: pick(t, |l| l.medium).unwrap_or(d.medium),
        retries: pick(t, |l| l.retries).map_or(d.retries, |r| r.0),
        contain: pick(t, |l| l.contain).unwrap_or(d.contain),
        report: pick(t, |l| l.report).unwrap_or(d.report),
        inject: Injection {
            soft_error: pick(t, |l| value(&l.soft_error)).unwrap_or(d.inject.soft_error),
            rank_loss: pick(t, |l| value(&l.rank_loss)).unwrap_or(d.inject.rank_loss),
            at: pick(t, |l| l.at.clone()).unwrap_or_default(),
        },
        kind: pick(t, |l| l.kind),
        logging: pick(t, |l| l.logging).unwrap_or(d.logging),
        log_spill_bytes: pick(t, |l| l.log_spill_bytes.map(|b| b.0)),
        log_medium: pick(t, |l| l.log_medium.as_ref().map(|m| *m.get_ref()))
            .unwrap_or(d.log_medium),
        check_classes: pick(t, |l| l.check_classes).unwrap_or(d.check_classes),
        dependency_tracking: pick(t, |l| l.dependency_tracking).unwrap_or(d.dependency_tracking),
        interval: pick(t, |l| l.interval.as_ref().map(|i| *i.get_ref())).unwrap_or(d.interval),
        mtbf_seconds: pick(t, |l| l.mtbf_seconds.map(|s| s.0)),
        xor_group: pick(t, |l| l.xor_group.map(|k| k.0)),
        restart_threads: pick(t, |l| l.restart_threads.map(|n| n.0)).unwrap_or(d.restart_threads),
    }
}
