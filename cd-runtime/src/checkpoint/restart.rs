//! Choosing where a relaunched job resumes (collective, before the program's body): the newest
//! whole checkpoint of the job in the restart directory, every rank's state loaded from its
//! part or the part's copy; and, with a checkpointed CD configured, the deletion of the
//! checkpoints newer than the one resumed (`README.md` beside this file).

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::checkpoint::format::{
    CheckpointError, JobShape, MANIFEST, Manifest, RestartFrom, expand_rank, parse_checkpoint_name,
};
use crate::checkpoint::load::{candidates, check_part, load_rank, load_rank_with};
use crate::checkpoint::transfer::fetch;
use crate::checkpoint::writer::{list, remove_checkpoint};
use crate::resume::{Resume, ResumeSource, Resumed};
use crate::runtime::{CdRuntime, eprint_line};

/// Why a restart cannot go on (one line; the job stops with it).
pub(crate) type Refused = String;

/// Sets up checkpointing on this rank and, with `restart`, chooses the checkpoint to resume
/// from. Collective: every rank calls it with the same arguments and reaches the same choice.
pub(crate) fn prepare(
    rt: &CdRuntime,
    restart: Option<&RestartFrom>,
    shape: JobShape,
) -> Result<(), Refused> {
    let ck = &rt.checkpoint;
    let policy = ck.policy.borrow().clone();
    let lead = lead(rt);
    let node_local = policy.as_ref().is_some_and(|(_, p)| p.node_local);
    let resume = match restart {
        None => None,
        Some(from) => {
            let root = root(rt, from)?;
            *ck.restart_root.borrow_mut() = Some(root.clone());
            choose(rt, &root, &shape, node_local)?
        }
    };
    // The rerun after a loss resumed from memory (`real_loss::resume`): the checkpoints this
    // job wrote before it stay, those after the execution it resumed at are written again
    // (none is removed when the CD resumed is not the checkpointed one: its executions are
    // not comparable).
    let from_memory = ck.resumed.borrow().clone().and_then(|r| match r.source {
        ResumeSource::Memory(_) => Some((r.cd, r.iteration)),
        ResumeSource::Checkpoint(_) => None,
    });
    if let Some((cd, p)) = &policy {
        let after = match (&resume, &from_memory) {
            (Some(r), _) => Some(r.at.iteration),
            (None, Some((c, it))) => Some(if c == cd { *it } else { u64::MAX }),
            (None, None) => None,
        };
        // Each process cleans its own directory when they are node-local.
        if rt.rank == 0 || (node_local && lead == rt.rank) {
            remove_newer(
                &p.dir_of(lead),
                cd,
                after.unwrap_or(0),
                after.is_none() && rt.rank == 0,
            );
        }
    }
    if let Some(r) = resume {
        rt.set_next_iteration(&r.at.cd, r.at.iteration);
        *ck.resumed.borrow_mut() = Some(r.at.clone());
        *ck.resume.borrow_mut() = Some(r);
    }
    *ck.shape.borrow_mut() = Some(shape);
    // No rank writes a checkpoint before rank 0 removed the stale ones.
    pgas::runtime_hooks::internal(pgas::barrier);
    Ok(())
}

/// The rank that names this process's directory when `dir` has `{rank}`: its lowest.
fn lead(rt: &CdRuntime) -> usize {
    rt.checkpoint
        .writer
        .borrow()
        .as_ref()
        .map_or(rt.rank, |w| w.lead())
}

/// The directory a restart from `from` looks in, on this process.
pub(crate) fn root(rt: &CdRuntime, from: &RestartFrom) -> Result<PathBuf, Refused> {
    match (from, &*rt.checkpoint.policy.borrow()) {
        (RestartFrom::Dir(d), _) => Ok(expand_rank(d, lead(rt))),
        (RestartFrom::Auto, Some((_, p))) => Ok(p.dir_of(lead(rt))),
        (RestartFrom::Auto, None) => Err("--restart auto (CD_RESTART=auto) restarts from the \
                                          configured checkpoint directory, and no CD has a \
                                          `checkpoint` key: add one, or name the directory \
                                          (--restart DIR)"
            .into()),
    }
}

/// The newest whole checkpoint of this job in `root` (or `root` itself), with this rank's
/// state; `None` when there is none (said in one line).
fn choose(
    rt: &CdRuntime,
    root: &Path,
    shape: &JobShape,
    node_local: bool,
) -> Result<Option<Resume>, Refused> {
    let (mut dirs, mut explicit) = candidates(root);
    if node_local {
        (dirs, explicit) = agreed_candidates(root, dirs, explicit);
    }
    let lead = rt.rank == 0;
    for dir in dirs {
        let read = if node_local {
            agreed_manifest(&dir)
        } else {
            Manifest::read(&dir)
        };
        let manifest = match read {
            Ok(m) => m,
            Err(e) if explicit => return Err(format!("cannot restart: {e}")),
            Err(e) => {
                if lead {
                    eprint_line(&format!("cd: restart: {e}; trying the previous checkpoint"));
                }
                continue;
            }
        };
        manifest
            .check(&dir, shape)
            .map_err(|e| format!("cannot restart: {e}"))?;
        let loaded = if node_local {
            load_rank_with(&dir, &manifest, rt.rank, |copy, info| {
                let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let bytes = fetch(rt, name, info.part, info.buddy).map_err(|reason| {
                    CheckpointError::Fetch {
                        path: copy.to_path_buf(),
                        buddy: info.buddy,
                        reason,
                    }
                })?;
                check_part(copy, info, &bytes)
            })
        } else {
            load_rank(&dir, &manifest, rt.rank)
        };
        let mine = match loaded {
            Ok((entries, line)) => {
                if let Some(line) = line {
                    eprint_line(&format!("cd: restart: {line}"));
                }
                Ok(entries)
            }
            Err(e) => Err(e),
        };
        let whole = pgas::runtime_hooks::internal(|| {
            pgas::reduce_all(u64::from(mine.is_ok()), |a, b| a.min(b)).wait()
        }) == 1;
        match mine {
            Ok(entries) if whole => {
                if lead {
                    eprint_line(&format!(
                        "cd: restart: resuming CD {:?} at execution {} (step {}) from {}",
                        manifest.cd,
                        manifest.iteration,
                        manifest.step,
                        dir.display()
                    ));
                }
                return Ok(Some(Resume {
                    at: Resumed {
                        cd: manifest.cd,
                        level: manifest.level,
                        iteration: manifest.iteration,
                        step: manifest.step,
                        source: ResumeSource::Checkpoint(dir),
                    },
                    entries,
                }));
            }
            Ok(_) => {}
            Err(e) => refuse_rank(&e),
        }
        if explicit {
            return Err(format!(
                "cannot restart: the checkpoint {} is not whole (see the line above)",
                dir.display()
            ));
        }
        if lead {
            eprint_line(&format!(
                "cd: restart: {} is not whole; trying the previous checkpoint",
                dir.display()
            ));
        }
    }
    if lead {
        eprint_line(&format!(
            "cd: restart: no whole checkpoint of this job in {}; starting from the beginning",
            root.display()
        ));
    }
    Ok(None)
}

/// Node-local directories: the checkpoints any process has a manifest of, newest first (a
/// process whose directory is gone has none; its ranks load their state from the buddies'
/// copies), and whether the restart named one checkpoint. Collective.
fn agreed_candidates(root: &Path, mine: Vec<PathBuf>, explicit: bool) -> (Vec<PathBuf>, bool) {
    let names: Vec<String> = mine
        .iter()
        .filter_map(|d| d.file_name()?.to_str().map(str::to_string))
        .collect();
    let all: Vec<(Vec<String>, bool)> =
        pgas::runtime_hooks::internal(|| pgas::allgather((names, explicit)).wait());
    if all.iter().any(|(_, e)| *e) {
        return (vec![root.to_path_buf()], true);
    }
    let mut union: Vec<(u64, String)> = all
        .into_iter()
        .flat_map(|(n, _)| n)
        .filter_map(|n| parse_checkpoint_name(&n).map(|(_, it)| (it, n.clone())))
        .collect();
    union.sort();
    union.dedup();
    (
        union.into_iter().rev().map(|(_, n)| root.join(n)).collect(),
        false,
    )
}

/// Node-local directories: the manifest of the checkpoint `dir` as the lowest rank that has
/// one reads it (every process that committed it holds the same text). Collective.
fn agreed_manifest(dir: &Path) -> Result<Manifest, CheckpointError> {
    let mine = Manifest::read(dir);
    let text = mine.as_ref().ok().map(Manifest::to_text);
    let all: Vec<Option<String>> = pgas::runtime_hooks::internal(|| pgas::allgather(text).wait());
    match all.into_iter().flatten().next() {
        Some(t) => toml::from_str(&t).map_err(|e| CheckpointError::Manifest {
            path: dir.join(MANIFEST),
            reason: e.message().to_string(),
        }),
        None => mine,
    }
}

/// This rank's line about its refused state.
fn refuse_rank(e: &CheckpointError) {
    eprint_line(&format!("cd: restart: {e}"));
}

/// Where this launch resumed (`--restart`, `CD_RESTART`): the CD, its execution and the loop
/// step, for a program that drives its own loop and starts it there; `None` in a run that
/// started from the beginning.
///
/// # Panics
/// Outside [`crate::launch`].
pub fn restarted() -> Option<Resumed> {
    crate::runtime::with(|rt| rt.checkpoint.resumed.borrow().clone())
}

/// The value the launch resumed for the entry `name` of the resumed CD (`preserve(name, ..)`
/// in its checkpointed execution), for a program that needs it before that execution begins:
/// to print what the executions it skips printed, say. `None` in a run that started from the
/// beginning, for a name the checkpoint does not hold, and once the resumed execution has
/// begun (its `preserve` call writes the value into the program's own).
///
/// # Panics
/// Outside [`crate::launch`], or if the bytes do not decode as a `T` (the checkpoint was
/// written by another version of the program).
pub fn restarted_value<T: DeserializeOwned>(name: &str) -> Option<T> {
    crate::runtime::with(|rt| {
        let resume = rt.checkpoint.resume.borrow();
        let bytes = resume.as_ref()?.entries.get(name)?;
        Some(postcard::from_bytes(bytes).unwrap_or_else(|e| {
            panic!(
                "the checkpoint's `{name}` does not decode as this program's value ({e}): was \
                 it written by another version of the program?"
            )
        }))
    })
}

/// Deletes the checkpoints of `cd` in `root` newer than execution `after` (abandoned by the
/// interrupted run, or refused): the new run's must not mix with them. `fresh`: the run starts
/// from the beginning, and whole ones it deletes are said.
fn remove_newer(root: &Path, cd: &str, after: u64, fresh: bool) {
    let newer: Vec<(u64, PathBuf, bool)> = list(root, cd)
        .into_iter()
        .filter(|(it, ..)| *it > after)
        .collect();
    let whole = newer.iter().filter(|(.., w)| *w).count();
    if fresh && whole > 0 {
        eprint_line(&format!(
            "cd: checkpoint: this run starts from the beginning and replaces the {whole} \
             checkpoint(s) of an earlier run in {} (relaunch with --restart auto to resume one)",
            root.display()
        ));
    }
    for (_, path, _) in newer {
        remove_checkpoint(&path);
    }
}
