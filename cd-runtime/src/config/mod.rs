//! The TOML configuration of the CD tree: per CD name or level, the preservation medium, the
//! retries, which failures a level contains, the fault injector; globally the seed, the
//! report and the media's room.
//!
//! The schema is `cd-runtime/cd.example.toml`, every key with its meaning and default (a
//! test parses it and checks it names every key the parser knows):
//!
#![doc = concat!("```toml\n", include_str!("../../cd.example.toml"), "```")]
//!
//! A file is read in layers, each importing only those before it: `values` (what a key
//! takes, validated by its type as it is read), `source` (lines and errors), `faults` (exact
//! faults), `settings` (each key of a CD's table declared once, and the merge), `checks`
//! (across keys), and [`CdConfig`] here, which parses and answers the runtime's questions.
//!
//! Adding a key of the CD tables is one line in the `settings!` list of `settings.rs` (name,
//! type, default, and the type it is read as: a `values` newtype whose rule and message say
//! what the key takes, or an enumeration), plus its description in `cd.example.toml` (a test
//! fails without it). A global key is one field of `ConfigFile` and one of [`CdConfig`].

mod checks;
mod faults;
mod removed;
mod settings;
mod source;
#[cfg(test)]
mod tests;
mod values;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

pub use faults::{ExactFault, ExactFaults, UNREACHED_LINES};
pub use settings::{CdSettings, Injection};
pub use values::{
    BuddyDomain, CdKindSetting, FaultKind, Interval, LogDurable, LogMedium, MAX_RETRIES, Medium,
};

use faults::FaultSites;
use settings::{Key, Layer, Merge, Tables, get};
use source::{Place, Source};
use values::{BuddyCopies, BudgetBytes, Seconds, SegmentBytes};

use crate::checkpoint::format::{CheckpointPolicy, RestartFrom};
use crate::error::ConfigError;

/// The whole file, as written (the order of the fields is the order the message about an
/// unknown key lists them in).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ConfigFile {
    seed: Option<u64>,
    report: Option<bool>,
    report_file: Key<PathBuf>,
    file_dir: Key<PathBuf>,
    buddy_segment_bytes: Option<SegmentBytes>,
    memory_budget_bytes: Option<BudgetBytes>,
    buddy_domain: Option<BuddyDomain>,
    buddy_copies: Option<BuddyCopies>,
    node_mtbf_seconds: Option<Seconds>,
    recovery_seconds: Option<Seconds>,
    defaults: Layer,
    level: BTreeMap<String, Spanned<Layer>>,
    cd: BTreeMap<String, Spanned<Layer>>,
}

/// Default of [`CdConfig::buddy_segment_bytes`]: 16 MiB.
pub const DEFAULT_BUDDY_SEGMENT_BYTES: usize = 16 << 20;

/// Default of [`CdConfig::recovery_seconds`]: a minute to detect a node's loss, restart its
/// ranks and rebuild their copies.
pub const DEFAULT_RECOVERY_SECONDS: f64 = 60.0;

/// The whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct CdConfig {
    /// Seed of the injector and of `cd::rng()`.
    pub seed: u64,
    /// Print the report table at the end.
    pub report: bool,
    /// Write the report as JSON here.
    pub report_file: Option<PathBuf>,
    /// The directory in which each launch makes its own private directory for its files (file
    /// medium, spilled logs, memory-budget spills); `None`: the system's temporary directory.
    pub file_dir: Option<PathBuf>,
    /// Bytes [`crate::launch`] adds to each rank's segment for the copies of the buddy medium
    /// it keeps for other ranks (a multiple of 64; 0: every buddy copy goes by rpc).
    pub buddy_segment_bytes: usize,
    /// Bytes of preserved state a rank may keep in its memory on the local medium; past it the
    /// oldest copies move to the file medium (demand preservation, `spill.rs`). `None`: no limit.
    pub memory_budget_bytes: Option<usize>,
    /// Where a rank's buddy is: on another node, or the next rank.
    pub buddy_domain: BuddyDomain,
    /// Copies the buddy medium keeps of an entry: 2 (at the buddy and locally; the default) or
    /// 1 (at the buddy alone: faster, but the buddy's loss takes it).
    pub buddy_copies: usize,
    /// Mean time between failures of one node, in seconds: with it the report states the
    /// probability of a catastrophic failure (P_cf) of the buddy and xor media
    /// ([`crate::xor::p_cf`]).
    pub node_mtbf_seconds: Option<f64>,
    /// Seconds a group stays without redundancy after a node failure (until its lost member's
    /// copies are rebuilt), for P_cf; default [`DEFAULT_RECOVERY_SECONDS`].
    pub recovery_seconds: f64,
    defaults: Layer,
    levels: BTreeMap<usize, Layer>,
    names: BTreeMap<String, Layer>,
    /// Where tables and keys were written (`cd.<name>`, `level.<n>`, `file_dir`,
    /// `report_file`), for messages.
    places: BTreeMap<String, Place>,
    faults: FaultSites,
    /// The file read (`None` for the default configuration and inline text).
    source: Option<PathBuf>,
    /// The CD whose completions write checkpoints to disk, and its policy (`checkpoint` in a
    /// `[cd.NAME]` table; `checkpoint/README.md`).
    pub checkpoint: Option<(String, CheckpointPolicy)>,
    /// Where a relaunch resumes from (`--restart`, `CD_RESTART`; set by the program).
    pub restart: Option<RestartFrom>,
    /// The program and the parameters that shape its state (set by the program), which a
    /// checkpoint's manifest records and a restart compares.
    pub program: String,
}

impl Default for CdConfig {
    fn default() -> Self {
        CdConfig::parse("", "<string>").expect("the empty configuration is valid")
    }
}

impl CdConfig {
    /// Reads the configuration from `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<CdConfig, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            line: None,
            key: None,
            message: format!("cannot read the CD configuration: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// Reads the file named by `CD_CONFIG`, or the default configuration if it is unset.
    pub fn from_env() -> Result<CdConfig, ConfigError> {
        Ok(Self::for_program(None)?.unwrap_or_default())
    }

    /// The configuration of a program, by the rule every binary follows: the file given on
    /// the command line (`cli`, e.g. `--cd-config`) wins, else the file named by the
    /// environment variable `CD_CONFIG` (unset or empty: none), else `None` (the program's
    /// default: CDs with default settings, or no CDs at all).
    pub fn for_program(cli: Option<&Path>) -> Result<Option<CdConfig>, ConfigError> {
        Self::for_program_with(cli, std::env::var_os("CD_CONFIG"))
    }

    /// [`CdConfig::for_program`] with `CD_CONFIG`'s value given.
    fn for_program_with(
        cli: Option<&Path>,
        env: Option<std::ffi::OsString>,
    ) -> Result<Option<CdConfig>, ConfigError> {
        let (path, from) = match (cli, env) {
            (Some(p), _) => (p.to_path_buf(), "--cd-config"),
            (None, Some(p)) if !p.is_empty() => (PathBuf::from(p), "CD_CONFIG"),
            _ => return Ok(None),
        };
        Self::from_file(&path).map(Some).map_err(|mut e| {
            if e.line.is_none() && e.key.is_none() {
                e.message = format!("{} (named by {from})", e.message);
            }
            e
        })
    }

    /// Parses configuration text; `file` names it in errors.
    pub fn parse(text: &str, file: impl AsRef<Path>) -> Result<CdConfig, ConfigError> {
        let file = file.as_ref();
        let src = Source::new(text, file);
        let raw: ConfigFile =
            toml::from_str(text).map_err(|e| removed::explain(src.toml_error(text, &e)))?;
        let mut places = BTreeMap::new();
        let mut levels = BTreeMap::new();
        for (k, t) in raw.level {
            let level: usize = k.parse().map_err(|_| {
                let why = "a level must be a whole number (the root is level 0)";
                src.error(Some(t.span()), Some(format!("level.{k}")), why.into())
            })?;
            places.insert(format!("level.{level}"), src.place(t.span().start));
            levels.insert(level, t.into_inner());
        }
        let mut names = BTreeMap::new();
        for (k, t) in raw.cd {
            places.insert(format!("cd.{k}"), src.place(t.span().start));
            names.insert(k, t.into_inner());
        }
        for (key, v) in [
            ("file_dir", &raw.file_dir),
            ("report_file", &raw.report_file),
        ] {
            if let Some(v) = v {
                places.insert(key.to_string(), src.place(v.span().start));
            }
        }
        let config = CdConfig {
            seed: raw.seed.unwrap_or(0),
            report: raw.report.unwrap_or(false),
            report_file: raw.report_file.map(Spanned::into_inner),
            file_dir: raw.file_dir.map(Spanned::into_inner),
            buddy_segment_bytes: (raw.buddy_segment_bytes)
                .map_or(DEFAULT_BUDDY_SEGMENT_BYTES, Into::into),
            memory_budget_bytes: raw.memory_budget_bytes.map(Into::into),
            buddy_domain: raw.buddy_domain.unwrap_or_default(),
            buddy_copies: raw.buddy_copies.map_or(2, Into::into),
            node_mtbf_seconds: raw.node_mtbf_seconds.map(Into::into),
            recovery_seconds: (raw.recovery_seconds).map_or(DEFAULT_RECOVERY_SECONDS, Into::into),
            defaults: raw.defaults,
            levels,
            names,
            places,
            faults: FaultSites::default(),
            source: (file != Path::new("<string>")).then(|| file.to_path_buf()),
            checkpoint: None,
            restart: None,
            program: String::new(),
        };
        let mut faults = FaultSites::default();
        for (table, l) in config.named_tables() {
            checks::table(&src, &table, l, &config.defaults)?;
            if let Some(at) = &l.inject.at {
                faults.add(table, &src, at.get_ref());
            }
        }
        checks::hopeless(&src, config.named_tables())?;
        let checkpoint = checks::checkpoint(&src, config.named_tables())?;
        Ok(CdConfig {
            faults,
            checkpoint,
            ..config
        })
    }

    /// Every table of the configuration with its name (`defaults`, `level.1`, `cd.step`).
    fn named_tables(&self) -> impl Iterator<Item = (String, &Layer)> {
        std::iter::once(("defaults".to_string(), &self.defaults))
            .chain(self.levels.iter().map(|(k, l)| (format!("level.{k}"), l)))
            .chain(self.names.iter().map(|(k, l)| (format!("cd.{k}"), l)))
    }

    /// The tables of the CD called `name` at `level`, most specific first.
    fn tables(&self, name: &str, level: usize) -> Tables<'_, Layer> {
        let (name, level) = (self.names.get(name), self.levels.get(&level));
        [name, level, Some(&self.defaults)]
    }

    /// The settings of the CD called `name` at `level`: its name's table over its level's
    /// over the defaults, key by key.
    pub fn settings(&self, name: &str, level: usize) -> CdSettings {
        Layer::merge(self.tables(name, level), CdSettings::default())
    }

    /// The `kind` the CD called `name` at `level` is configured with, if any: what every CD
    /// begin asks first, without merging the other keys.
    pub fn kind(&self, name: &str, level: usize) -> Option<CdKindSetting> {
        self.tables(name, level)
            .iter()
            .flatten()
            .find_map(|l| get(&l.kind))
    }

    /// The file this configuration was read from, if any.
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// Where to change the settings of the CD `name`: `[cd.<name>]` of the file (with its
    /// line when the table exists), for messages.
    pub fn table_of(&self, name: &str) -> String {
        let key = format!("cd.{name}");
        match (self.places.get(&key), &self.source) {
            (Some(p), _) if *p.file != *Path::new("<string>") => {
                format!("[{key}] ({}:{})", p.file.display(), p.line)
            }
            (_, Some(f)) => format!("[{key}] of {}", f.display()),
            _ => format!("[{key}] of the CD configuration (--cd-config or CD_CONFIG)"),
        }
    }

    /// The error about `key`, at its place if it was written in the file.
    fn config_error(&self, key: &str, message: String) -> ConfigError {
        let place = self.places.get(key);
        ConfigError {
            file: place
                .map(|p| p.file.to_path_buf())
                .or_else(|| self.source.clone())
                .unwrap_or_else(|| PathBuf::from("<config>")),
            line: place.map(|p| p.line),
            key: Some(key.to_string()),
            message,
        }
    }

    /// Checks what can be checked against a job of `ranks` ranks before it starts: exact
    /// faults name existing ranks, `file_dir` is a directory this process can write in (it is
    /// created if missing) that no other user can redirect (not a symbolic link, not writable
    /// by others without the sticky bit, not another user's), `report_file` can be written.
    pub fn check_job(&self, ranks: usize) -> Result<(), ConfigError> {
        if let Some(k) = self.xor_group_sizes().into_iter().find(|&k| k > ranks) {
            return Err(self.config_error(
                "xor_group",
                format!(
                    "xor_group = {k} needs {k} ranks for one checksum group, but the job has \
                     {ranks}: set xor_group to at most {ranks}"
                ),
            ));
        }
        if let Some(f) = self.faults.beyond(ranks) {
            let place = f.place();
            return Err(ConfigError {
                file: place.file.to_path_buf(),
                line: Some(place.line),
                key: Some(format!("{}.inject.at.rank", f.table)),
                message: format!(
                    "a fault on rank {}, but the job has {ranks} rank(s) (0 to {}): it would \
                     never happen; name a rank of the job",
                    f.fault.rank,
                    ranks.saturating_sub(1)
                ),
            });
        }
        if let Some(dir) = &self.file_dir {
            // The job's own directory, made and removed again: the proof it can be made there.
            crate::private_files::PrivateDir::create(Some(dir))
                .map_err(|e| self.config_error("file_dir", e.to_string()))?;
        }
        if let Some(path) = &self.report_file {
            let bad = |m: String| self.config_error("report_file", m);
            if path.is_dir() {
                return Err(bad(format!(
                    "{} is a directory; name a file for the JSON report",
                    path.display()
                )));
            }
            let existed = path.exists();
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .map_err(|e| bad(format!("cannot write {}: {e}", path.display())))?;
            if !existed {
                let _ = std::fs::remove_file(path);
            }
        }
        Ok(())
    }

    /// True when some CD may keep preserved state in files: a table sets `medium = "file"`, or
    /// a memory budget moves copies to files.
    pub(crate) fn keeps_files(&self) -> bool {
        self.memory_budget_bytes.is_some()
            || self
                .named_tables()
                .any(|(_, l)| get(&l.medium) == Some(Medium::File))
    }

    /// The checksum group sizes (`xor_group`) written anywhere in the configuration, in
    /// increasing order: [`crate::launch`] forms the groups of each size at start-up (a
    /// collective over every rank, so not when a CD first asks).
    pub fn xor_group_sizes(&self) -> Vec<usize> {
        let tables = self.named_tables();
        let mut sizes: Vec<usize> = tables
            .filter_map(|(_, l)| get(&l.xor_group)?.into())
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// What the configuration names but a run whose CDs were `ran` (name and level of each)
    /// never used: tables of CD names no CD had, levels no CD ran at. One line each, naming
    /// the file and line.
    pub fn unused<'a>(&self, ran: impl IntoIterator<Item = (&'a str, usize)>) -> Vec<String> {
        let ran: Vec<(&str, usize)> = ran.into_iter().collect();
        let mut entered: Vec<&str> = ran.iter().map(|&(name, _)| name).collect();
        entered.sort_unstable();
        entered.dedup();
        let entered = if entered.is_empty() {
            "none".to_string()
        } else {
            entered.join(", ")
        };
        let at = |key: &str| self.places.get(key).map(Place::prefix).unwrap_or_default();
        let mut out = Vec::new();
        for name in self.names.keys() {
            if name != "root" && !ran.iter().any(|&(n, _)| n == name) {
                out.push(format!(
                    "{}[cd.{name}] names a CD this run never entered, so its settings were \
                     unused (CDs it entered: {entered}); check the name",
                    at(&format!("cd.{name}"))
                ));
            }
        }
        let deepest = ran.iter().map(|&(_, level)| level).max().unwrap_or(0);
        for &level in self.levels.keys() {
            if level > 0 && !ran.iter().any(|&(_, l)| l == level) {
                out.push(format!(
                    "{}[level.{level}] names a level no CD of this run reached (the deepest was \
                     {deepest}), so its settings were unused",
                    at(&format!("level.{level}"))
                ));
            }
        }
        out
    }

    /// The exact faults (indices for [`CdConfig::unreached`]) that an execution of instance
    /// `iteration` of the CD `name` at `level` on `rank` reaches: those at that rank and
    /// iteration in the most specific table that sets `inject.at` for the CD (the one the CD
    /// uses). Allocates nothing unless some exact fault names this rank and iteration.
    pub(crate) fn exact_sites(
        &self,
        name: &str,
        level: usize,
        rank: usize,
        iteration: u64,
    ) -> Vec<usize> {
        // Every CD begin asks: look for the CD's tables only when some fault is there at all.
        if self.faults.none_at(rank, iteration) {
            return Vec::new();
        }
        let tables = self.tables(name, level);
        let at = tables.iter().flatten().find_map(|l| l.inject.at.as_ref());
        at.map_or_else(Vec::new, |at| {
            self.faults.reached(at.get_ref(), rank, iteration)
        })
    }

    /// The exact faults (`inject = { at = [...] }`) the run never reached, given those it
    /// reached (`CdConfig::exact_sites` of every execution, on every rank): one line each,
    /// naming the file and line and the fault, for the first [`UNREACHED_LINES`], then one
    /// line with the count of the others. A fault is reached when its rank begins that
    /// instance of a CD whose settings take their `at` from the fault's table.
    pub fn unreached(&self, reached: &[usize]) -> Vec<String> {
        self.faults.unreached(reached)
    }

    /// Sets the settings table of CDs named `name` from TOML text (for programs and tests
    /// that configure in code); errors name `<string>`.
    pub fn with_cd(mut self, name: &str, table: &str) -> Result<CdConfig, ConfigError> {
        let parsed = CdConfig::parse(&format!("[cd.{name}]\n{table}"), "<string>")?;
        self.names.extend(parsed.names);
        self.places.extend(parsed.places);
        self.faults
            .replace_table(&format!("cd.{name}"), parsed.faults);
        Ok(self)
    }
}
