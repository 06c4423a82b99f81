//! The TOML configuration of the CD tree, per CD name or level and global; the schema, every key
//! with its meaning and default, is `cd-runtime/cd.example.toml` (`tests/config_example.rs`):
//!
#![doc = concat!("```toml\n", include_str!("../../cd.example.toml"), "```")]
//!
//! Layers: `values` (validated as read), `source` (lines, errors), `faults`, `settings` (each
//! key declared once, the merge), `checks` (across keys), and [`CdConfig`] here.

mod checks;
mod faults;
mod settings;
mod source;
mod values;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

pub use faults::{ExactFault, ExactFaults, UNREACHED_LINES};
pub use settings::{CdSettings, Injection};
pub use values::{
    BuddyDomain, CdKindSetting, Cluster, FaultKind, Interval, LogDurable, LogMedium, MAX_RETRIES,
    Medium,
};

use faults::FaultSites;
use settings::{Key, Layer, Merge, Tables, get, settings, span};
use source::{Place, Source};
use values::{BuddyCopies, BudgetBytes, Seconds, SegmentBytes};

use crate::checkpoint::format::{CheckpointPolicy, RestartFrom};
use crate::error::ConfigError;

/// Default of [`CdConfig::buddy_segment_bytes`]: 16 MiB.
pub const DEFAULT_BUDDY_SEGMENT_BYTES: usize = 16 << 20;

/// Default of [`CdConfig::recovery_seconds`]: a minute to detect a node's loss and rebuild.
pub const DEFAULT_RECOVERY_SECONDS: f64 = 60.0;

settings! {
    /// The whole configuration; its keys are described in `cd.example.toml`.
    CdConfig, written as ConfigFile {
        /// Seed of the injector and of `cd::rng()`.
        seed: u64 = 0, read as Key<u64>;
        /// Print the report table at the end.
        report: bool = false, read as Key<bool>;
        /// Write the report as JSON here.
        report_file: Option<PathBuf> = None, read as Key<PathBuf>;
        /// Write the timeline (Chrome trace events) here; `PGAS_TRACE` wins ([`crate::timeline`]).
        trace_file: Option<PathBuf> = None, read as Key<PathBuf>;
        /// Where each launch makes its private directory (`None`: the system's temporary one).
        file_dir: Option<PathBuf> = None, read as Key<PathBuf>;
        /// Bytes [`crate::launch`] adds to each rank's segment for buddy copies (a multiple of 64).
        buddy_segment_bytes: usize = DEFAULT_BUDDY_SEGMENT_BYTES, read as Key<SegmentBytes>;
        /// Bytes of preserved state a rank keeps in memory before spilling to files (`spill.rs`).
        memory_budget_bytes: Option<usize> = None, read as Key<BudgetBytes>;
        /// Where a rank's buddy is: on another node, or the next rank.
        buddy_domain: BuddyDomain = BuddyDomain::Node, read as Key<BuddyDomain>;
        /// Copies the buddy medium keeps of an entry: 2 (at the buddy and locally) or 1.
        buddy_copies: usize = 2, read as Key<BuddyCopies>;
        /// Mean time between failures of one node, in seconds, for P_cf ([`crate::xor::p_cf`]).
        node_mtbf_seconds: Option<f64> = None, read as Key<Seconds>;
        /// Seconds a group stays without redundancy after a node failure, for P_cf.
        recovery_seconds: f64 = DEFAULT_RECOVERY_SECONDS, read as Key<Seconds>;
        /// SPBC clusters of relaxed CDs: writes inside one are not logged.
        cluster: Cluster = Cluster::None, read as Key<Cluster>;
    } also {
        /// The CD whose completions write checkpoints to disk, and its policy.
        pub checkpoint: Option<(String, CheckpointPolicy)>,
        /// Where a relaunch resumes from (`--restart`, `CD_RESTART`; set by the program).
        pub restart: Option<RestartFrom>,
        /// The program and the parameters that shape its state, which a checkpoint records.
        pub program: String,
        defaults: Layer,
        levels: BTreeMap<usize, Layer>,
        names: BTreeMap<String, Layer>,
        /// Where tables and path keys were written (`cd.<name>`, `level.<n>`, `file_dir`).
        places: BTreeMap<String, Place>,
        faults: FaultSites,
        /// The file read (`None` for the default configuration and inline text).
        source: Option<PathBuf>,
    } written with {
        defaults: Layer,
        level: BTreeMap<String, Spanned<Layer>>,
        cd: BTreeMap<String, Spanned<Layer>>,
    }
}

impl CdConfig {
    /// Reads the configuration from `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<CdConfig, ConfigError> {
        let file = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(&file).map_err(|e| {
            let why = format!("cannot read the CD configuration: {e}");
            Source::new("", &file).error(None, None, why)
        })?;
        Self::parse(&text, file)
    }

    /// Reads the file named by `CD_CONFIG`, or the default configuration if it is unset.
    pub fn from_env() -> Result<CdConfig, ConfigError> {
        Ok(Self::for_program(None)?.unwrap_or_default())
    }

    /// A program's configuration: the file given on the command line (`cli`), else `CD_CONFIG`'s.
    pub fn for_program(cli: Option<&Path>) -> Result<Option<CdConfig>, ConfigError> {
        let (path, from) = match (cli, std::env::var_os("CD_CONFIG")) {
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
        let raw: ConfigFile = toml::from_str(text).map_err(|e| src.toml_error(text, &e))?;
        let mut config = ConfigFile::merge([Some(&raw), None, None], CdConfig::default());
        config.source = (file != Path::new("<string>")).then(|| file.to_path_buf());
        let mut place =
            |key: String, at: Option<usize>| at.map(|at| config.places.insert(key, src.place(at)));
        place("file_dir".into(), span(&raw.file_dir));
        place("report_file".into(), span(&raw.report_file));
        place("cluster".into(), span(&raw.cluster));
        for (k, t) in raw.level {
            let Ok(level) = k.parse::<usize>() else {
                let why = "a level must be a whole number (the root is level 0)";
                return Err(src.error(t.span().start, format!("level.{k}"), why));
            };
            place(format!("level.{level}"), Some(t.span().start));
            config.levels.insert(level, t.into_inner());
        }
        for (k, t) in raw.cd {
            place(format!("cd.{k}"), Some(t.span().start));
            config.names.insert(k, t.into_inner());
        }
        config.defaults = raw.defaults;
        for (table, l) in config.named_tables() {
            checks::table(&src, &table, l, &config.defaults)?;
        }
        checks::hopeless(&src, config.named_tables())?;
        config.checkpoint = checks::checkpoint(&src, config.named_tables())?;
        let at = config.named_tables();
        let at = at.filter_map(|(t, l)| Some((t, l.inject.at.as_ref()?.get_ref())));
        config.faults = FaultSites::new(&src, at);
        Ok(config)
    }

    /// Every table of the configuration with its name (`defaults`, `level.1`, `cd.step`).
    fn named_tables(&self) -> impl Iterator<Item = (String, &Layer)> {
        std::iter::once(("defaults".to_string(), &self.defaults))
            .chain(self.levels.iter().map(|(k, l)| (format!("level.{k}"), l)))
            .chain(self.names.iter().map(|(k, l)| (format!("cd.{k}"), l)))
    }

    /// The tables of the CD called `name` at `level`, most specific first.
    fn tables(&self, name: &str, level: usize) -> Tables<'_, Layer> {
        let (by_name, by_level) = (self.names.get(name), self.levels.get(&level));
        [by_name, by_level, Some(&self.defaults)]
    }

    /// The settings of the CD called `name` at `level`, its tables merged key by key.
    pub fn settings(&self, name: &str, level: usize) -> CdSettings {
        Layer::merge(self.tables(name, level), CdSettings::default())
    }

    /// The file this configuration was read from, if any.
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// Where to change the settings of the CD `name`, for messages (`[cd.<name>]` of the file).
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
        let file = place
            .map(|p| p.file.to_path_buf())
            .or_else(|| self.source.clone());
        ConfigError {
            file: file.unwrap_or_else(|| PathBuf::from("<config>")),
            line: place.map(|p| p.line),
            key: Some(key.to_string()),
            message,
        }
    }

    /// Checks the configuration against a job of `ranks` ranks before it starts (groups, faults,
    /// `file_dir` private and writable (`private_files.rs`), `report_file` writable).
    pub fn check_job(&self, ranks: usize) -> Result<(), ConfigError> {
        if let Some(k) = self.xor_group_sizes().into_iter().find(|&k| k > ranks) {
            let why = format!(
                "xor_group = {k} needs {k} ranks for one checksum group, but the job has \
                 {ranks}: set xor_group to at most {ranks}"
            );
            return Err(self.config_error("xor_group", why));
        }
        if let Cluster::Ranks(k) = self.cluster
            && k > ranks
        {
            let why = format!(
                "cluster = {k} groups {k} consecutive ranks, but the job has {ranks}: set cluster \
                 to at most {ranks} (or \"node\")"
            );
            return Err(self.config_error("cluster", why));
        }
        if let Some((table, src, at, f)) = self.faults.beyond(ranks) {
            let why = format!(
                "a fault on rank {}, but the job has {ranks} rank(s) (0 to {}): it would never \
                 happen; name a rank of the job",
                f.rank,
                ranks.saturating_sub(1)
            );
            return Err(src.error(at, format!("{table}.inject.at.rank"), why));
        }
        if let Some(dir) = &self.file_dir {
            // The job's own directory, made and removed again: the proof it can be made there.
            crate::private_files::PrivateDir::create(Some(dir))
                .map_err(|e| self.config_error("file_dir", e.to_string()))?;
        }
        let Some(path) = &self.report_file else {
            return Ok(());
        };
        let (existed, shown) = (path.exists(), path.display());
        let error = |why: String| self.config_error("report_file", why);
        if path.is_dir() {
            let why = format!("{shown} is a directory; name a file for the JSON report");
            return Err(error(why));
        }
        let mut open = std::fs::OpenOptions::new();
        let opened = open.append(true).create(true).open(path);
        opened.map_err(|e| error(format!("cannot write {shown}: {e}")))?;
        if !existed {
            let _ = std::fs::remove_file(path);
        }
        Ok(())
    }

    /// True when some CD may keep preserved state in files (`medium = "file"`, or a budget).
    pub(crate) fn keeps_files(&self) -> bool {
        self.memory_budget_bytes.is_some()
            || (self.named_tables()).any(|(_, l)| get(&l.medium) == Some(Medium::File))
    }

    /// The checksum group sizes written anywhere, increasing, which [`crate::launch`] forms.
    pub fn xor_group_sizes(&self) -> Vec<usize> {
        let sizes = (self.named_tables()).filter_map(|(_, l)| get(&l.xor_group)?.into());
        Vec::from_iter(BTreeSet::<usize>::from_iter(sizes))
    }

    /// The tables a run whose CDs were `ran` (name, level) never used, one line each.
    pub fn unused<'a>(&self, ran: impl IntoIterator<Item = (&'a str, usize)>) -> Vec<String> {
        let ran: Vec<(&str, usize)> = ran.into_iter().collect();
        let entered = Vec::from_iter(BTreeSet::from_iter(ran.iter().map(|r| r.0))).join(", ");
        let entered = if entered.is_empty() { "none" } else { &entered };
        let deepest = ran.iter().map(|&(_, level)| level).max().unwrap_or(0);
        let at = |key: String| self.places.get(&key).map(Place::prefix).unwrap_or_default();
        let names = (self.names.keys()).filter(|n| *n != "root" && !ran.iter().any(|r| r.0 == *n));
        let names = names.map(|name| {
            format!(
                "{}[cd.{name}] names a CD this run never entered, so its settings were unused \
                 (CDs it entered: {entered}); check the name",
                at(format!("cd.{name}"))
            )
        });
        let levels = (self.levels.keys()).filter(|&&l| l > 0 && !ran.iter().any(|r| r.1 == l));
        let levels = levels.map(|level| {
            format!(
                "{}[level.{level}] names a level no CD of this run reached (the deepest was \
                 {deepest}), so its settings were unused",
                at(format!("level.{level}"))
            )
        });
        names.chain(levels).collect()
    }

    /// The exact faults (numbers for [`CdConfig::unreached`]) instance `iteration` of the CD
    /// `name` at `level` on `rank` reaches; allocates nothing unless one is there.
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

    /// The exact faults the run never reached, given those it reached: at most
    /// [`UNREACHED_LINES`] lines naming them, then one with the count of the others.
    pub fn unreached(&self, reached: &[usize]) -> Vec<String> {
        self.faults.unreached(reached)
    }

    /// Whether the configuration has a table for the CDs named `name` (`[cd.<name>]`).
    pub fn has_cd(&self, name: &str) -> bool {
        self.names.contains_key(name)
    }

    /// Sets the table of CDs named `name` from TOML text; errors name `<string>`.
    pub fn with_cd(mut self, name: &str, table: &str) -> Result<CdConfig, ConfigError> {
        let parsed = CdConfig::parse(&format!("[cd.{name}]\n{table}"), "<string>")?;
        self.names.extend(parsed.names);
        self.places.extend(parsed.places);
        self.faults
            .replace_table(&format!("cd.{name}"), parsed.faults);
        Ok(self)
    }
}
