//! The checks across keys: settings each valid that together make a CD that cannot work.

use super::settings::{CdSettings, Key, Layer, get, span};
use super::source::Source;
use super::values::{CdKindSetting, FaultKind, Interval, LogMedium, Medium, Probability};
use crate::checkpoint::format::CheckpointPolicy;
use crate::error::ConfigError;

/// Checks the table `l` called `table`, with `[defaults]` `d` filling in what it leaves out.
pub(super) fn table(src: &Source, table: &str, l: &Layer, d: &Layer) -> Result<(), ConfigError> {
    let xor = get(&l.medium) == Some(Medium::Xor);
    let buddy_log = get(&l.log_medium) == Some(LogMedium::Buddy);
    let no_mtbf = l.mtbf_seconds.is_none() && d.mtbf_seconds.is_none();
    let checks = [
        (
            get(&l.interval) == Some(Interval::Daly) && no_mtbf,
            (span(&l.interval), "interval"),
            "interval = \"daly\" needs the mean time between failures: set mtbf_seconds in the \
             same table or in [defaults]",
        ),
        (
            xor && l.xor_group.is_none() && d.xor_group.is_none(),
            (span(&l.medium), "medium"),
            "medium = \"xor\" needs the size of its checksum groups: set xor_group (2 or more) in \
             the same table or in [defaults]",
        ),
        (
            xor && get(&l.kind) == Some(CdKindSetting::Relaxed),
            (span(&l.medium), "medium"),
            "medium = \"xor\" preserves and rebuilds together with the checksum group, which a \
             relaxed CD (kind = \"relaxed\", recovering alone) cannot: use medium = \"buddy\" \
             there",
        ),
        (
            buddy_log && get(&l.medium) == Some(Medium::Local),
            (span(&l.log_medium), "log_medium"),
            "log_medium = \"buddy\" lets the CD recover alone from a rank loss, but medium = \
             \"local\" (in the same table) keeps its preserved state in the memory the loss \
             takes: set medium = \"buddy\" (or \"file\")",
        ),
        (
            buddy_log && get(&l.contain).is_some_and(|c| !c.contains(&FaultKind::RankLoss)),
            (span(&l.log_medium), "log_medium"),
            "log_medium = \"buddy\" replicates the log for rank losses, but `contain` (in the \
             same table) leaves out \"rank_loss\": add it, or drop log_medium",
        ),
    ];
    match checks.into_iter().find(|c| c.0) {
        Some((_, (at, key), why)) => Err(src.error(at, format!("{table}.{key}"), why)),
        None => Ok(()),
    }
}

/// The key of a table a check reads.
type Getter<T> = fn(&Layer) -> &Key<T>;

/// A CD whose every execution fails (an injection probability of 1) with retries to spend: it
/// never completes, and its retries repeat the failure: checked for each name and level table.
pub(super) fn hopeless<'a>(
    src: &Source,
    tables: impl Iterator<Item = (String, &'a Layer)>,
) -> Result<(), ConfigError> {
    let probabilities: [(&str, &str, Getter<Probability>); 2] = [
        ("soft_error", "fail its check", |l| &l.inject.soft_error),
        ("rank_loss", "lose its rank's memory", |l| {
            &l.inject.rank_loss
        }),
    ];
    let tables: Vec<_> = (tables)
        .filter(|(_, l)| l.retries.is_some() || probabilities.iter().any(|p| p.2(l).is_some()))
        .collect();
    let defaults = tables.iter().find(|(t, _)| t == "defaults");
    let of = |kind: &str| {
        let some = tables.iter().filter(|(t, _)| t.starts_with(kind)).map(Some);
        std::iter::once(None).chain(some).collect::<Vec<_>>()
    };
    for name in of("cd.") {
        for &level in &of("level.") {
            // The tables of a CD of that name at that level, most specific first.
            let tables = || [name, level, defaults].into_iter().flatten();
            let retries = tables().find_map(|(at, l)| Some((get(&l.retries)?, at)));
            let spent = retries.map_or(CdSettings::default().retries, |(r, _)| r.0);
            let from = retries.map_or("the default".into(), |(_, at)| format!("`{at}.retries`"));
            for (key, what, probability) in probabilities.into_iter().filter(|_| spent > 0) {
                let p = tables().find_map(|(at, l)| Some((probability(l).as_ref()?, at)));
                if let Some((p, at)) = p.filter(|(p, _)| p.get_ref().0 >= 1.0) {
                    let why = format!(
                        "{key} = {} makes every execution of the CD {what}, so it can never \
                         complete, and retries = {spent} ({from}) would only repeat the failure: \
                         set {key} below 1, or retries = 0 there to see the escalation at once",
                        p.get_ref().0
                    );
                    let key = format!("{at}.inject.{key}");
                    return Err(src.error(p.span().start, key, why));
                }
            }
        }
    }
    Ok(())
}

/// The one CD with a `checkpoint` key, in a `[cd.NAME]` table usable in a file name.
pub(super) fn checkpoint<'a>(
    src: &Source,
    tables: impl Iterator<Item = (String, &'a Layer)>,
) -> Result<Option<(String, CheckpointPolicy)>, ConfigError> {
    let mut found: Option<(String, CheckpointPolicy)> = None;
    for (table, c) in tables.filter_map(|(t, l)| Some((t, l.checkpoint.as_ref()?))) {
        let file_name = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'.';
        let why = match (table.strip_prefix("cd."), &found) {
            (None, _) => "a checkpoint is the job's: write it in the [cd.NAME] table of one \
                          strict CD that spans every rank"
                .to_string(),
            (_, Some((first, _))) => {
                format!("[cd.{first}] has a checkpoint already: one CD per job has one")
            }
            (Some(name), _) if !name.bytes().all(file_name) => "the CD's name names its \
                checkpoints' directories: letters, digits, `_` and `.` only"
                .to_string(),
            (Some(name), None) => {
                found = Some((name.to_string(), c.get_ref().clone()));
                continue;
            }
        };
        return Err(src.error(c.span().start, format!("{table}.checkpoint"), why));
    }
    Ok(found)
}
