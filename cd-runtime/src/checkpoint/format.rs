//! What a checkpoint is on disk (`README.md` beside this file): the directory layout, the
//! manifest, the policy key of a CD, where a restart is asked to start from, and why a
//! checkpoint is refused. Plain data: no runtime.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Version of the manifest's format (a manifest of another version is refused).
pub const FORMAT_VERSION: u32 = 2;

/// File name of a committed manifest.
pub(crate) const MANIFEST: &str = "manifest.toml";
/// File name a manifest is written to before it is renamed to [`MANIFEST`].
pub(crate) const MANIFEST_TMP: &str = ".manifest.tmp";

/// Default checkpoint directory (relative to the working directory): not a predictable path in
/// the system's temporary directory, where another user could make it first.
pub const DEFAULT_DIR: &str = "cd-checkpoint";

/// How often the checkpointed CD writes a checkpoint (`every`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CheckpointEvery {
    /// Execution `i` is checkpointed when `i > 0` and `i % n == 0` (`every = n`).
    Executions(u64),
    /// Daly's interval (`every = "daly"`): from the write time of the previous checkpoint, the
    /// time of an execution and the job's mean time between failures (`schedule.rs`).
    Daly {
        /// The mean time between the failures that end the job, in seconds.
        mtbf_seconds: f64,
    },
}

/// The `checkpoint` key of a CD: where, how often, how many are kept.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointPolicy {
    /// The checkpoint directory (relative paths are relative to the working directory).
    pub dir: PathBuf,
    /// Which executions of the CD are checkpointed.
    pub every: CheckpointEvery,
    /// Whole checkpoints kept (at least 1).
    pub keep: usize,
    /// Each process's `dir` is its own (a node-local disk, or a `{rank}` in `dir`): no process
    /// reads or writes another's, and a part's buddy copy travels to the buddy's process over
    /// the network, which writes it into its own `dir` (`transfer.rs`).
    pub node_local: bool,
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        CheckpointPolicy {
            dir: PathBuf::from(DEFAULT_DIR),
            every: CheckpointEvery::Executions(1),
            keep: 2,
            node_local: false,
        }
    }
}

/// The placeholder in `dir` that names each process's own directory by its lowest rank.
pub const RANK_PLACEHOLDER: &str = "{rank}";

impl CheckpointPolicy {
    /// The checkpoint directory of the process whose lowest rank is `lead`: `dir` with
    /// [`RANK_PLACEHOLDER`] replaced by `lead`.
    pub fn dir_of(&self, lead: usize) -> PathBuf {
        expand_rank(&self.dir, lead)
    }
}

/// `path` with [`RANK_PLACEHOLDER`] replaced by `lead` (a `--restart DIR` of a node-local
/// job names each process's directory the same way).
pub fn expand_rank(path: &Path, lead: usize) -> PathBuf {
    match path.to_str() {
        Some(s) if s.contains(RANK_PLACEHOLDER) => {
            PathBuf::from(s.replace(RANK_PLACEHOLDER, &lead.to_string()))
        }
        _ => path.to_path_buf(),
    }
}

/// Where a relaunch resumes from: `--restart DIR|auto`, or `CD_RESTART`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestartFrom {
    /// The newest whole checkpoint in the configured directory (falling back to older ones).
    Auto,
    /// A checkpoint directory (the newest whole checkpoint in it, falling back to older ones),
    /// or one checkpoint (that one alone).
    Dir(PathBuf),
}

impl RestartFrom {
    /// `auto` or a path.
    pub fn parse(text: &str) -> RestartFrom {
        if text == "auto" {
            RestartFrom::Auto
        } else {
            RestartFrom::Dir(PathBuf::from(text))
        }
    }

    /// The restart of a program, by the rule every binary follows: the command line's value
    /// (`cli`, e.g. `--restart`) wins, else `CD_RESTART` (unset or empty: none).
    pub fn for_program(cli: Option<&str>) -> Option<RestartFrom> {
        Self::for_program_with(cli, std::env::var("CD_RESTART").ok())
    }

    fn for_program_with(cli: Option<&str>, env: Option<String>) -> Option<RestartFrom> {
        match (cli, env) {
            (Some(c), _) => Some(Self::parse(c)),
            (None, Some(e)) if !e.is_empty() => Some(Self::parse(&e)),
            _ => None,
        }
    }
}

/// Where one rank's state is in a checkpoint: a range of a *part*, the file that holds the
/// states of the ranks of one process one after another (`README.md` beside this file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankFile {
    /// The rank whose directory holds the part (the lowest rank of its process).
    pub part: usize,
    /// The rank whose directory holds the part's buddy copy.
    pub buddy: usize,
    /// Bytes of the part's file (a file of another length is truncated or overwritten).
    pub file_len: u64,
    /// Where the rank's state begins in the part.
    pub offset: u64,
    /// Bytes of the rank's state.
    pub len: u64,
    /// CRC-32 of the rank's state.
    pub crc: u32,
}

/// The manifest of one checkpoint: committed last, the checkpoint is whole iff it exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT_VERSION`] when written.
    pub version: u32,
    /// The program and the parameters that shape its state (given by the program).
    pub program: String,
    /// The CD seed (hexadecimal: TOML integers are signed), which `cd::rng()` draws from.
    pub seed: String,
    /// Ranks of the job.
    pub ranks: usize,
    /// The checkpointed strict CD.
    pub cd: String,
    /// Its level.
    pub level: usize,
    /// The execution of the CD a restart resumes at.
    pub iteration: u64,
    /// The loop step that execution began with.
    pub step: u64,
    /// Every rank's file, in rank order.
    pub rank: Vec<RankFile>,
}

/// What a job is, to compare with a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobShape {
    pub(crate) program: String,
    pub(crate) seed: u64,
    pub(crate) ranks: usize,
    /// The CD this job's configuration checkpoints (`None`: none; a restart from a named
    /// directory then resumes whatever CD the checkpoint holds).
    pub(crate) cd: Option<String>,
}

impl Manifest {
    /// The manifest as TOML text.
    pub(crate) fn to_text(&self) -> String {
        toml::to_string(self).expect("a manifest serializes")
    }

    /// Reads the manifest of the checkpoint `dir`.
    pub(crate) fn read(dir: &Path) -> Result<Manifest, CheckpointError> {
        let path = dir.join(MANIFEST);
        let text = crate::private_files::open_file(&path)
            .and_then(|mut f| {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut f, &mut s)?;
                Ok(s)
            })
            .map_err(|source| CheckpointError::Io {
                path: path.clone(),
                source,
            })?;
        let m: Manifest = toml::from_str(&text).map_err(|e| CheckpointError::Manifest {
            path: path.clone(),
            reason: e.message().to_string(),
        })?;
        if m.version != FORMAT_VERSION {
            return Err(CheckpointError::Manifest {
                path,
                reason: format!(
                    "format version {} (this program reads {FORMAT_VERSION})",
                    m.version
                ),
            });
        }
        let out_of_range = |r: &RankFile| {
            r.buddy >= m.ranks
                || r.part >= m.ranks
                || r.offset
                    .checked_add(r.len)
                    .is_none_or(|end| end > r.file_len)
        };
        if m.rank.len() != m.ranks || m.rank.iter().any(out_of_range) {
            return Err(CheckpointError::Manifest {
                path,
                reason: format!(
                    "{} rank entries (or a part, buddy or range out of bounds) for {} ranks",
                    m.rank.len(),
                    m.ranks
                ),
            });
        }
        Ok(m)
    }

    /// Whether this checkpoint belongs to the job `shape` (else the refusal, naming what
    /// differs).
    pub(crate) fn check(&self, dir: &Path, shape: &JobShape) -> Result<(), CheckpointError> {
        let seed = format!("{:#x}", shape.seed);
        let differs = if self.ranks != shape.ranks {
            Some((
                "rank count",
                self.ranks.to_string(),
                shape.ranks.to_string(),
            ))
        } else if self.program != shape.program {
            Some(("program", self.program.clone(), shape.program.clone()))
        } else if self.seed != seed {
            Some(("CD seed", self.seed.clone(), seed))
        } else {
            shape
                .cd
                .as_ref()
                .filter(|cd| **cd != self.cd)
                .map(|cd| ("checkpointed CD", self.cd.clone(), cd.clone()))
        };
        match differs {
            None => Ok(()),
            Some((what, theirs, ours)) => Err(CheckpointError::OtherJob {
                path: dir.join(MANIFEST),
                what,
                theirs,
                ours,
            }),
        }
    }
}

/// The directory of the checkpoint of CD `cd` resuming at `iteration`, inside `root`.
pub(crate) fn checkpoint_dir(root: &Path, cd: &str, iteration: u64) -> PathBuf {
    root.join(format!("{cd}-{iteration:010}"))
}

/// The CD and iteration a checkpoint directory's name says, if it is one.
pub(crate) fn parse_checkpoint_name(name: &str) -> Option<(&str, u64)> {
    let (cd, it) = name.rsplit_once('-')?;
    if it.len() != 10 || !it.bytes().all(|b| b.is_ascii_digit()) || cd.is_empty() {
        return None;
    }
    Some((cd, it.parse().ok()?))
}

/// Rank `rank`'s directory in the checkpoint `dir`.
pub(crate) fn rank_dir(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("rank{rank}"))
}

/// The part led by rank `part` (the lowest rank of its process) in the checkpoint `dir`.
pub(crate) fn own_file(dir: &Path, part: usize) -> PathBuf {
    rank_dir(dir, part).join("state.bin")
}

/// The copy of the part led by rank `part` that rank `buddy`'s directory keeps, in the
/// checkpoint `dir`.
pub(crate) fn buddy_file(dir: &Path, part: usize, buddy: usize) -> PathBuf {
    rank_dir(dir, buddy).join(format!("copy-of-rank{part}.bin"))
}

/// Why a checkpoint (or one of its files) is not used. Each displays as one line naming the
/// file and the reason.
#[derive(Debug, Error)]
pub enum CheckpointError {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The manifest is not one this program wrote.
    #[error("{}: not a checkpoint manifest: {reason}", path.display())]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The checkpoint is another job's.
    #[error(
        "{}: written by a job with another {what} ({theirs}, this job: {ours}): refused; \
         restart with the same ranks, program parameters and configuration, or start without \
         --restart",
        path.display()
    )]
    OtherJob {
        /// The manifest.
        path: PathBuf,
        /// What differs.
        what: &'static str,
        /// The checkpoint's value.
        theirs: String,
        /// This job's value.
        ours: String,
    },
    /// A part file is shorter or longer than the manifest says.
    #[error("{}: {got} bytes, the manifest says {want}: truncated or overwritten", path.display())]
    Length {
        /// The file.
        path: PathBuf,
        /// Bytes the manifest says.
        want: u64,
        /// Bytes found.
        got: u64,
    },
    /// A rank's range of a part file is not the bytes written.
    #[error("{}: {}: it changed on disk after it was written", path.display(), crate::checksum::FAILED)]
    Checksum {
        /// The file.
        path: PathBuf,
    },
    /// A rank's range of a part file does not decode.
    #[error("{}: {reason}", path.display())]
    Decode {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The part's copy could not be fetched from the buddy that keeps it (node-local
    /// directories).
    #[error("{}: not fetched from rank {buddy}: {reason}", path.display())]
    Fetch {
        /// The copy's file at the buddy.
        path: PathBuf,
        /// The rank that keeps it.
        buddy: usize,
        /// Why.
        reason: String,
    },
    /// Neither copy of a rank's state could be used.
    #[error("rank {rank} has no usable copy of its state: {own}; {copy}")]
    RankLost {
        /// The rank.
        rank: usize,
        /// Why its part was refused.
        own: Box<CheckpointError>,
        /// Why the part's copy was refused.
        copy: Box<CheckpointError>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            version: FORMAT_VERSION,
            program: "lulesh -s 6".into(),
            seed: format!("{:#x}", u64::MAX),
            ranks: 2,
            cd: "step".into(),
            level: 1,
            iteration: 20,
            step: 20,
            rank: vec![
                RankFile {
                    part: 0,
                    buddy: 1,
                    file_len: 21,
                    offset: 0,
                    len: 10,
                    crc: u32::MAX,
                },
                RankFile {
                    part: 0,
                    buddy: 1,
                    file_len: 21,
                    offset: 10,
                    len: 11,
                    crc: 7,
                },
            ],
        }
    }

    #[test]
    fn names_and_manifests_round_trip() {
        let d = checkpoint_dir(Path::new("/c"), "step", 20);
        assert_eq!(d, Path::new("/c/step-0000000020"));
        let name = d.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_checkpoint_name(name), Some(("step", 20)));
        assert_eq!(parse_checkpoint_name("step-20"), None);
        assert_eq!(parse_checkpoint_name("a-b-0000000003"), Some(("a-b", 3)));
        let m = manifest();
        assert_eq!(toml::from_str::<Manifest>(&m.to_text()).unwrap(), m);
    }

    #[test]
    fn another_job_is_named() {
        let m = manifest();
        let shape = JobShape {
            program: "lulesh -s 6".into(),
            seed: u64::MAX,
            ranks: 2,
            cd: Some("step".into()),
        };
        m.check(Path::new("/c"), &shape).unwrap();
        let e = m
            .check(
                Path::new("/c"),
                &JobShape {
                    ranks: 8,
                    ..shape.clone()
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains("rank count (2, this job: 8)"), "{e}");
        let e = m
            .check(
                Path::new("/c"),
                &JobShape {
                    program: "lulesh -s 7".into(),
                    ..shape.clone()
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains("/c/manifest.toml"), "{e}");
        assert!(e.to_string().contains("lulesh -s 7"), "{e}");
        // The configuration checkpoints another CD: refused, naming both.
        let e = m
            .check(
                Path::new("/c"),
                &JobShape {
                    cd: Some("cycle".into()),
                    ..shape.clone()
                },
            )
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("another checkpointed CD (step, this job: cycle)"),
            "{e}"
        );
        let any_cd = JobShape { cd: None, ..shape };
        m.check(Path::new("/c"), &any_cd).unwrap();
    }

    #[test]
    fn restart_from_the_command_line_wins() {
        assert_eq!(
            RestartFrom::for_program_with(Some("auto"), Some("x".into())),
            Some(RestartFrom::Auto)
        );
        assert_eq!(
            RestartFrom::for_program_with(None, Some("ck".into())),
            Some(RestartFrom::Dir("ck".into()))
        );
        assert_eq!(
            RestartFrom::for_program_with(None, Some(String::new())),
            None
        );
    }
}
