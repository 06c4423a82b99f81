//! The checks across keys of a configuration: settings that each are valid but together make
//! a CD that cannot work (an xor medium without its group size, a log replicated for a loss
//! that takes the preserved state, a CD that fails every execution and retries it).

use std::collections::BTreeMap;
use std::ops::Range;

use super::settings::{CdSettings, Layer, first};
use super::source::Source;
use super::values::{CdKindSetting, Interval, LogMedium, Medium};
use crate::checkpoint::format::CheckpointPolicy;
use crate::error::{ConfigError, FaultKinds};

/// Checks the table `l`, its keys named `{at}key`, written at `table` (`None`: `[defaults]`),
/// with the settings `defaults` of `[defaults]` (which fill in what the table leaves out).
pub(super) fn table(
    src: &Source,
    l: &Layer,
    at: &str,
    table: Option<Range<usize>>,
    defaults: &Layer,
) -> Result<(), ConfigError> {
    let fail =
        |span, key: &str, why: &str| Err(src.error(span, Some(format!("{at}{key}")), why.into()));
    if let Some(i) = &l.interval {
        if *i.get_ref() == Interval::Daly && l.mtbf_seconds.or(defaults.mtbf_seconds).is_none() {
            return fail(
                Some(i.span()),
                "interval",
                "interval = \"daly\" needs the mean time between failures: set mtbf_seconds in \
                 the same table or in [defaults]",
            );
        }
    }
    if l.medium == Some(Medium::Xor) && l.xor_group.or(defaults.xor_group).is_none() {
        return fail(
            table,
            "medium",
            "medium = \"xor\" needs the size of its checksum groups: set xor_group (2 or more) \
             in the same table or in [defaults]",
        );
    }
    if l.medium == Some(Medium::Xor) && l.kind == Some(CdKindSetting::Relaxed) {
        return fail(
            table,
            "medium",
            "medium = \"xor\" preserves and rebuilds together with the checksum group, which a \
             relaxed CD (kind = \"relaxed\", recovering alone) cannot: use medium = \"buddy\" \
             there",
        );
    }
    if let Some(m) = l
        .log_medium
        .as_ref()
        .filter(|m| *m.get_ref() == LogMedium::Buddy)
    {
        if l.medium == Some(Medium::Local) {
            return fail(
                Some(m.span()),
                "log_medium",
                "log_medium = \"buddy\" lets the CD recover alone from a rank loss, but medium = \
                 \"local\" (in the same table) keeps its preserved state in the memory the loss \
                 takes: set medium = \"buddy\" (or \"file\")",
            );
        }
        if l.contain
            .is_some_and(|c| !c.contains(FaultKinds::RANK_LOSS))
        {
            return fail(
                Some(m.span()),
                "log_medium",
                "log_medium = \"buddy\" replicates the log for rank losses, but `contain` (in \
                 the same table) leaves out \"rank_loss\": add it, or drop log_medium",
            );
        }
    }
    Ok(())
}

/// A CD whose every execution fails (an injection probability of 1) with retries to spend:
/// it never completes, and its retries repeat the failure without a word. Checked for a CD
/// of each name table (or none) at each level table (or none): the tables that set
/// neither an injection probability nor `retries` change nothing, so only the others are
/// combined. The error names the probability's key and where the retries come from.
pub(super) fn hopeless(
    src: &Source,
    defaults: &Layer,
    levels: &BTreeMap<usize, Layer>,
    names: &BTreeMap<String, Layer>,
) -> Result<(), ConfigError> {
    let matters =
        |l: &Layer| l.retries.is_some() || l.soft_error.is_some() || l.rank_loss.is_some();
    let levels: Vec<(String, &Layer)> = levels
        .iter()
        .filter(|(_, l)| matters(l))
        .map(|(k, l)| (format!("level.{k}."), l))
        .collect();
    let names: Vec<(String, &Layer)> = names
        .iter()
        .filter(|(_, l)| matters(l))
        .map(|(k, l)| (format!("cd.{k}."), l))
        .collect();
    let defaults = ("defaults.".to_string(), defaults);
    for name in std::iter::once(None).chain(names.iter().map(Some)) {
        for level in std::iter::once(None).chain(levels.iter().map(Some)) {
            let tables = [name, level, Some(&defaults)].map(|t| t.map(|(at, l)| (at.as_str(), *l)));
            let retries = first(&tables, |l| l.retries);
            let spent = retries.map_or(CdSettings::default().retries, |(r, _)| r.0);
            if spent == 0 {
                continue;
            }
            let from = retries.map_or("the default".into(), |(_, at)| format!("`{at}retries`"));
            for (key, what, p) in [
                (
                    "soft_error",
                    "fail its check",
                    first(&tables, |l| l.soft_error.as_ref()),
                ),
                (
                    "rank_loss",
                    "lose its rank's memory",
                    first(&tables, |l| l.rank_loss.as_ref()),
                ),
            ] {
                let Some((p, at)) = p.filter(|(p, _)| p.get_ref().0 >= 1.0) else {
                    continue;
                };
                return Err(src.error(
                    Some(p.span()),
                    Some(format!("{at}inject.{key}")),
                    format!(
                        "{key} = {} makes every execution of the CD {what}, so it can never \
                         complete, and retries = {spent} ({from}) would only repeat the \
                         failure: set {key} below 1, or retries = 0 there to see the \
                         escalation at once",
                        p.get_ref().0
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The one CD with a `checkpoint` key, if any: only a `[cd.NAME]` table may have it (the
/// checkpoint is the job's, not a level's), and only one, whose name is usable in a file name.
pub(super) fn checkpoint(
    src: &Source,
    defaults: &Layer,
    levels: &BTreeMap<usize, Layer>,
    names: &BTreeMap<String, Layer>,
) -> Result<Option<(String, CheckpointPolicy)>, ConfigError> {
    let not_here = |at: String, span: &Range<usize>| {
        src.error(
            Some(span.clone()),
            Some(format!("{at}checkpoint")),
            "a checkpoint is the job's: write it in the [cd.NAME] table of one strict CD that \
             spans every rank"
                .into(),
        )
    };
    if let Some((_, span)) = &defaults.checkpoint {
        return Err(not_here("defaults.".into(), span));
    }
    if let Some((k, (_, span))) = levels
        .iter()
        .find_map(|(k, l)| l.checkpoint.as_ref().map(|c| (k, c)))
    {
        return Err(not_here(format!("level.{k}."), span));
    }
    let mut found: Option<(String, CheckpointPolicy)> = None;
    for (name, l) in names {
        let Some((policy, span)) = &l.checkpoint else {
            continue;
        };
        let at = format!("cd.{name}.checkpoint");
        if let Some((first, _)) = &found {
            return Err(src.error(
                Some(span.clone()),
                Some(at),
                format!("[cd.{first}] has a checkpoint already: one CD per job has one"),
            ));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        {
            return Err(src.error(
                Some(span.clone()),
                Some(at),
                "the CD's name names its checkpoints' directories: letters, digits, `_` and \
                 `.` only"
                    .into(),
            ));
        }
        found = Some((name.clone(), policy.clone()));
    }
    Ok(found)
}
