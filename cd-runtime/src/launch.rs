//! `launch`: runs a program on every rank under a root CD, turns an escalation past the root
//! into a one-line error with a hint, and gathers the report. The top of the crate: it
//! installs each rank's runtime and ends its relaxed group at the root.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use gasnet_bridge::LaunchConfig;
use pgas::RpcTable;

use crate::buddy::{self, BuddyRpcs};
use crate::checkpoint::format::{JobShape, RestartFrom};
use crate::checkpoint::writer::CheckpointWriter;
use crate::config::{CdConfig, LogMedium, Medium};
use crate::error::{CdError, CdLaunchError, ConfigError, FaultKinds};
use crate::generations::GenerationRpcs;
use crate::relaxed::rank_state::RelaxedRpcs;
use crate::report::Report;
use crate::runtime::{self, CdRuntime, Installed, RuntimeRpcs, eprint_line};
use crate::timeline::{Timeline, TimelineError, path_for_rank, trace_path};
use crate::xor::XorRpcs;

/// What a CD-managed job returns: the results of the ranks this process ran and the report
/// summed over ranks.
#[derive(Debug)]
pub struct CdOutcome<R> {
    /// The results of the ranks this process ran, in rank order (every rank's on smp).
    pub results: pgas::RankResults<R>,
    /// The CD report (counts summed over every rank of the job, in every process).
    pub report: Report,
    /// What the configuration named but the run never used ([`CdConfig::unused`],
    /// [`CdConfig::unreached`]).
    pub unused: Vec<String>,
}

/// The prefix of the panic payload with which a rank unwinds after an escalation past the
/// root: recognised in the job's error (also when it comes from another process, under mpi).
const ESCALATION: &str = "cd-runtime: stop: ";

/// Ends this rank quietly with the escalation `line`: no panic hook runs, so no panic message
/// and no backtrace; the other ranks are woken and unwind quietly too. The payload is a
/// deliberate stop ([`gasnet_bridge::for_runtimes::Stopped`]): under mpirun the conduit prints
/// nothing about it on the other processes either, as the program prints the line itself.
fn stop(line: String) -> ! {
    std::panic::resume_unwind(Box::new(gasnet_bridge::for_runtimes::Stopped(format!(
        "{ESCALATION}{line}"
    ))))
}

/// The prefix of the panic payload with which every rank unwinds when the configuration cannot
/// be used with the job's topology (found inside the job, where the topology is known).
const CONFIG: &str = "cd-runtime: config: ";

/// Ends this rank quietly on a configuration error found inside the job (every rank finds the
/// same): the job returns [`CdLaunchError::Config`] with `message`.
fn stop_config(message: String) -> ! {
    std::panic::resume_unwind(Box::new(gasnet_bridge::for_runtimes::Stopped(format!(
        "{CONFIG}{message}"
    ))))
}

/// The prefix of the payload with which a rank unwinds when a restart cannot go on.
const RESTART: &str = "cd-runtime: restart: ";

/// Ends this rank quietly with a refused restart (every rank refuses the same): the job
/// returns [`CdLaunchError::Restart`] with `message`.
fn stop_restart(message: String) -> ! {
    std::panic::resume_unwind(Box::new(gasnet_bridge::for_runtimes::Stopped(format!(
        "{RESTART}{message}"
    ))))
}

/// What to change in the configuration so that `e` is contained, as a sentence.
fn hint(config: &CdConfig, e: &CdError) -> String {
    let CdError::Escalated {
        cd,
        level,
        kinds,
        attempts,
        reason,
    } = e
    else {
        return match e {
            CdError::Detected { .. } => "return errors from inside a CD (cd::strict), which can \
                 re-execute; the root cannot"
                .into(),
            _ => "see docs/relaxed-cds.md (\"Limits\") on what a relaxed CD can replay".into(),
        };
    };
    let s = config.settings(cd, *level);
    let table = config.table_of(cd);
    let failures = FaultKinds(kinds.0 & !FaultKinds::UNRESTORABLE.0);
    if kinds.contains(FaultKinds::UNRESTORABLE) {
        if reason.contains(crate::checksum::FAILED) {
            format!(
                "a preserved file changed on disk after it was written (a failing disk, or \
                 another process writing into file_dir): check the disk that holds file_dir, \
                 or keep the CD's copies in memory (medium = \"buddy\" in {table}, no \
                 memory_budget_bytes)"
            )
        } else if s.medium == Medium::Xor {
            format!(
                "an xor checksum group survives the loss of one member until it is rebuilt: \
                 place groups on different nodes (buddy_domain = \"node\"), use smaller \
                 groups (xor_group) so fewer share one parity, or contain such losses in an \
                 enclosing CD with medium = \"file\" (in {table})"
            )
        } else if s.medium == Medium::Buddy && config.buddy_copies == 1 {
            format!(
                "with buddy_copies = 1 the buddy holds the only copy of a rank's state, and the \
                 buddy's loss took it: set buddy_copies = 2 (a local copy too), or contain \
                 such losses in an enclosing CD with medium = \"file\" (around {table})"
            )
        } else if s.medium == Medium::Local {
            format!(
                "to contain it, keep the CD's copies where a rank loss cannot take them: \
                 medium = \"buddy\" (or \"file\") in {table}"
            )
        } else {
            format!(
                "a rank lost state an enclosing CD kept in its own memory: set medium = \
                 \"buddy\" (or \"file\") for the CDs around {cd:?} too ([defaults] or [level.N]); \
                 or a rank and its buddy both lost their memory: keep buddies on other nodes \
                 (buddy_domain = \"node\") or contain such losses in an enclosing CD with \
                 medium = \"file\""
            )
        }
    } else if reason.starts_with("a relaxed CD cannot recover alone") {
        if s.log_medium == LogMedium::Local {
            format!(
                "to let it recover alone from rank losses, set log_medium = \"buddy\" (with \
                 medium = \"buddy\" or \"file\") in {table}, or contain the loss in an \
                 enclosing strict CD (its `contain` and `medium`)"
            )
        } else {
            format!(
                "its log could not be made whole from the buddy's replicas (see the cause; \
                 e.g. the buddy lost its memory too): contain such losses in an enclosing \
                 strict CD (contain = [\"soft\", \"rank_loss\"], medium = \"file\"), as \
                 {table} cannot alone"
            )
        }
    } else if !s.contain.contains(failures) {
        let missing: Vec<&str> = [
            (FaultKinds::SOFT, "\"soft\""),
            (FaultKinds::RANK_LOSS, "\"rank_loss\""),
        ]
        .into_iter()
        .filter(|(k, _)| failures.contains(*k) && !s.contain.contains(*k))
        .map(|(_, n)| n)
        .collect();
        format!(
            "to contain it, add {} to `contain` in {table}",
            missing.join(" and ")
        )
    } else if *attempts > s.retries {
        format!(
            "to contain it, raise `retries` in {table} (it is {}) or inject fewer faults",
            s.retries
        )
    } else if !s.logging {
        format!("to contain it, set logging = true in {table}")
    } else {
        "see the cause above".into()
    }
}

/// The line that ends a job whose root CD's body returned `e` (the failing rank is named in
/// `e`, agreed by the ranks of the CD that escalated).
fn escalation_line(config: &CdConfig, e: &CdError) -> String {
    format!(
        "{e}; it escalated past the root CD, so the run stops rather than give a wrong \
         answer; {}",
        hint(config, e)
    )
}

/// Ends a rank's CD state, also when it unwinds: removes the files its CDs preserved (a rank
/// that stops on an escalation or a peer's failure never completes them) and forgets the
/// runtime. Kept by pgas until every rank is done (`keep_until_job_end`), not dropped with
/// the body: a rank whose program ended must still serve the runtime's requests (a buddy's
/// copy fetched back by a rank recovering from its loss in a CD of its own, slot requests,
/// log gathers); with the runtime gone they found nothing and the recovery escalated.
struct RankGuard {
    rt: Rc<CdRuntime>,
    /// Dropped after `drop` below: the runtime is forgotten once its files are done.
    _installed: Installed,
}

impl Drop for RankGuard {
    fn drop(&mut self) {
        // Also on a rank that unwinds (an escalation, a peer's failure), whose CDs never
        // complete: the queued writes end, then the arena files go.
        self.rt.files.finish();
    }
}

/// Runs `body` on every rank under a root CD spanning all ranks, configured by `config`.
///
/// Every rank's segment is `job`'s plus the configuration's `buddy_segment_bytes`, the room
/// for the copies of the buddy medium it keeps for other ranks ([`crate::config`]).
///
/// `rpcs` is the program's rpc table; the runtime adds its own functions to it. A failure that
/// escalates past the root ends the job, so it returns an error instead of a wrong answer:
/// [`CdLaunchError::Escalated`], one line naming the CD, the rank, the cause and what to change
/// in the configuration. The ranks unwind quietly (no panic message, no backtrace); a genuine
/// panic in the program stays a panic ([`CdLaunchError::Job`]). Files the file medium
/// preserved are removed on every exit path.
///
/// Before the job starts, the configuration is checked against it
/// ([`CdConfig::check_job`]: exact faults on ranks that do not exist, an unusable `file_dir`
/// or `report_file` are [`CdLaunchError::Config`]). At the end, rank 0 prints to stderr a
/// warning line for each table the configuration names but the run never used
/// ([`CdConfig::unused`]) and each exact fault whose rank and iteration the run never reached
/// ([`CdConfig::unreached`]), also in [`CdOutcome::unused`]. When the configuration asks for it,
/// rank 0 prints the report table and writes the JSON report (a report that cannot be
/// written is [`CdLaunchError::Report`]).
///
/// With `PGAS_TRACE=FILE.json` in the environment (or `trace_file` in the configuration) the
/// launch writes the timeline of what the CDs did, one track per rank ([`crate::timeline`]);
/// a file that cannot be written is [`CdLaunchError::Trace`], before the job starts.
pub fn launch<R, F>(
    job: &LaunchConfig,
    config: CdConfig,
    mut rpcs: RpcTable,
    body: F,
) -> Result<CdOutcome<R>, CdLaunchError>
where
    R: Send,
    F: Fn() -> Result<R, CdError> + Sync,
{
    config.check_job(job.ranks)?;
    let timeline = open_timeline(config.trace_file.as_deref())?;
    let runtime_rpcs = RuntimeRpcs {
        buddy: BuddyRpcs::register(&mut rpcs),
        relaxed: RelaxedRpcs::register(&mut rpcs),
        xor: XorRpcs::register(&mut rpcs),
        generations: GenerationRpcs::register(&mut rpcs),
        setup: crate::setup_values::SetupRpcs::register(&mut rpcs),
    };
    let checkpoint_rpcs = crate::checkpoint::transfer::register(&mut rpcs);
    // This launch's own directory (in the process: each process under mpirun makes its own),
    // inside `file_dir` or the temporary directory; removed on every exit path.
    let private_dir = crate::private_files::PrivateDir::create(config.file_dir.as_deref())
        .map_err(|e| CdLaunchError::Files {
            reason: e.to_string(),
        })?;
    let file_dir = private_dir.path().to_path_buf();
    // The checkpoint directory, checked as file_dir is; one writer thread for the process.
    // (A `{rank}` in it names each process's own: that one is checked by the process.)
    if let Some((_, p)) = &config.checkpoint {
        if p.dir_of(0) == p.dir {
            crate::private_files::check_parent(&p.dir).map_err(|e| CdLaunchError::Files {
                reason: format!("the checkpoint directory (key `checkpoint`): {e}"),
            })?;
        }
    }
    let writer = config
        .checkpoint
        .is_some()
        .then(|| Arc::new(CheckpointWriter::new()));
    let ranks = job.ranks;
    // Room for the buddy medium's copies (`buddy.rs`), so that the program's own allocations
    // keep what it asked for (and a page more, to align the region's block).
    let mut job = job.clone();
    // Relaxed CDs read the IWC and the acks' target counters (replay order, gap checks): each
    // rank switches counting on when it first needs it (`CdRuntime::count_incoming_writes`).
    job.write_counting = gasnet_bridge::WriteCounting::Switched;
    // Room for the writer marks (`relaxed/writers.rs`): a word per rank and the heap's
    // block overhead.
    job.segment_bytes = job.segment_bytes.saturating_add(ranks * 8 + 256);
    if config.buddy_segment_bytes > 0 {
        job.segment_bytes = job
            .segment_bytes
            .saturating_add(config.buddy_segment_bytes + buddy::REGION_ALIGN);
    }
    let job = &job;
    let config_source = config.source().map(PathBuf::from);
    let config = Arc::new(config);
    let report_out: Mutex<Option<Report>> = Mutex::new(None);
    let unused_out: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let report_error: Mutex<Option<CdLaunchError>> = Mutex::new(None);
    // A rank whose body a lost process interrupted runs it again from its start, with the
    // replacement (`REAL_LOSS.md`).
    let results = pgas::runtime_hooks::launch_rerunning(job, rpcs, || {
        let recovered = pgas::runtime_hooks::recovered();
        crate::generations::reset(recovered.is_some(), pgas::spares_wanted() > 0);
        crate::setup_values::reset(recovered.is_some(), pgas::spares_wanted() > 0);
        let rank = pgas::rank_me();
        let ranks = pgas::rank_n();
        // Until the rank's body and report are done: its events go to its own track.
        let _timeline = timeline.as_ref().map(|t| t.enter_rank(rank));
        // Every rank computes the same map from the conduit's topology.
        let nodes: Vec<usize> = (0..ranks).map(pgas::node_of).collect();
        // Every rank forms the same groups, or finds the same reason why not.
        let rt = CdRuntime::new(
            config.clone(),
            rank,
            &nodes,
            file_dir.join(format!("rank{rank}")),
            runtime_rpcs,
        )
        .unwrap_or_else(|e| stop_config(e.to_string()));
        let rt = Rc::new(rt);
        let installed = runtime::install(rt.clone());
        if let Some(w) = &writer {
            // Before the barrier below: every rank of the process has joined before any hands
            // its state over, and the process's lowest rank is known.
            w.join(rank);
        }
        // No rank's body starts before every rank has its runtime: an rpc of the runtime's
        // (a buddy slot, a gather) reaching a rank that had none yet found nothing to serve it.
        pgas::runtime_hooks::internal(pgas::barrier);
        pgas::runtime_hooks::keep_until_job_end(RankGuard {
            rt: rt.clone(),
            _installed: installed,
        });
        // The rerun after a loss resumed from the generations kept in memory.
        let mut from_memory = false;
        if config.checkpoint.is_some() || config.restart.is_some() {
            *rt.checkpoint.policy.borrow_mut() = config.checkpoint.clone();
            if let (Some(w), Some((_, p))) = (&writer, &config.checkpoint) {
                let own = p.dir_of(w.lead());
                if own != p.dir && w.lead() == rank {
                    crate::private_files::check_parent(&own).unwrap_or_else(|e| {
                        stop_config(format!("the checkpoint directory (key `checkpoint`): {e}"))
                    });
                }
            }
            *rt.checkpoint.writer.borrow_mut() = writer.clone();
            rt.checkpoint.rpcs.set(Some(checkpoint_rpcs));
            rt.checkpoint
                .buddy
                .set(buddy::buddy_map(&nodes, config.buddy_domain)[rank]);
            let shape = JobShape {
                program: config.program.clone(),
                seed: config.seed,
                ranks,
                cd: config.checkpoint.as_ref().map(|(cd, _)| cd.clone()),
            };
            // After a loss the job resumes from memory; only when no execution is held in
            // memory for every rank does it go back to disk: to its newest checkpoint (what
            // it wrote, or the one it was launched from), not to the beginning.
            let restart = match &recovered {
                None => config.restart.clone(),
                Some(r) => {
                    let on_disk = config.checkpoint.as_ref().map(|_| RestartFrom::Auto);
                    let on_disk = on_disk.or_else(|| config.restart.clone());
                    let root = on_disk.as_ref().map(|from| {
                        crate::checkpoint::restart::root(&rt, from)
                            .unwrap_or_else(|why| stop_restart(why))
                    });
                    from_memory = crate::real_loss::resume(&rt, &r.lost, root.as_deref());
                    on_disk.filter(|_| !from_memory)
                }
            };
            crate::checkpoint::restart::prepare(&rt, restart.as_ref(), shape)
                .unwrap_or_else(|why| stop_restart(why));
        } else if let Some(r) = &recovered {
            from_memory = crate::real_loss::resume(&rt, &r.lost, None);
        }
        if recovered.is_some() && !from_memory {
            // Resumed from disk or from the beginning: the generations the abandoned run kept
            // after that point are not this run's (a later loss must not resume at one).
            let at = rt
                .checkpoint
                .resumed
                .borrow()
                .as_ref()
                .map_or(0, |r| r.iteration);
            crate::generations::forget_after(at);
        }
        let out = body();
        let value = match out {
            Ok(v) => v,
            Err(e) => stop(escalation_line(&config, &e)),
        };
        // A failure detected outside any CD (`cd::check!` in the root) was recorded in the
        // root, which cannot re-execute: without this the job returned the result the check
        // had found wrong.
        let root_failure = {
            let root = rt.top();
            let st = root.state.borrow();
            (!st.failure.is_empty()).then(|| st.reasons.join("; "))
        };
        // The last checkpoint handed over is committed (collective: every rank is here).
        crate::checkpoint::commit::at_end(&rt);
        if let Some(reasons) = root_failure {
            stop(format!(
                "the root CD detected an error on rank {rank} ({reasons}); the root cannot \
                 re-execute, so the run stops rather than give a wrong answer; to contain it, \
                 check inside a CD (cd::strict), which can re-execute"
            ));
        }
        rt.release_entries(&rt.top());
        crate::strict::end_relaxed_group(&rt, &rt.top());
        let mine = (rt.stats.borrow().report(ranks), rt.reached());
        let merge = |(a, mut ra): (Report, Vec<usize>), (b, rb): (Report, Vec<usize>)| {
            ra.extend(rb);
            (a.merge(b), ra)
        };
        // Every rank gets the sum, so that each process's outcome holds the whole job's report
        // (under mpirun a process runs one rank); rank 0 alone prints and writes it.
        let (mut report, reached) =
            pgas::runtime_hooks::internal(|| pgas::reduce_all(mine, merge).wait());
        let mut unused = config.unused(report.cds.iter().map(|c| (c.name.as_str(), c.level)));
        unused.extend(config.unreached(&reached));
        if let Some(mtbf) = config.node_mtbf_seconds {
            for c in report.cds.iter_mut() {
                let s = config.settings(&c.name, c.level);
                c.pcf = crate::xor::pcf_of(&s, &nodes, &config, mtbf);
            }
        }
        // `report = false` in a CD's settings leaves it out of the report (it was ignored).
        report
            .cds
            .retain(|c| config.settings(&c.name, c.level).report);
        if rank == 0 {
            for line in &unused {
                eprint_line(&format!("cd: warning: {line}"));
            }
            if config.report {
                print!("{}", report.table());
            }
            if let Some(path) = &config.report_file {
                if let Err(e) = std::fs::write(path, report.to_json()) {
                    *report_error.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(CdLaunchError::Report {
                            path: path.clone(),
                            reason: e.to_string(),
                        });
                }
            }
        }
        // The same on every rank: the last store wins.
        *unused_out.lock().unwrap_or_else(|e| e.into_inner()) = unused;
        *report_out.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
        value
    });
    // What this launch made goes (also when the job failed); a configured `file_dir` keeps
    // whatever else it holds. The checkpoints are on disk before the launch returns.
    drop(private_dir);
    drop(writer);
    // Also when the job failed: the timeline of an escalated run shows how it came to that.
    let trace_error = timeline.map(Timeline::finish).and_then(Result::err);
    let results = results.map_err(|e| match e {
        gasnet_bridge::LaunchError::RankPanicked { rank, message }
            if message.starts_with(ESCALATION) =>
        {
            CdLaunchError::Escalated {
                rank,
                message: message[ESCALATION.len()..].to_string(),
            }
        }
        gasnet_bridge::LaunchError::RankPanicked { message, .. }
            if message.starts_with(RESTART) =>
        {
            CdLaunchError::Restart {
                message: message[RESTART.len()..].to_string(),
            }
        }
        gasnet_bridge::LaunchError::RankPanicked { message, .. } if message.starts_with(CONFIG) => {
            CdLaunchError::Config(ConfigError {
                file: config_source
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("<config>")),
                line: None,
                key: Some("xor_group".into()),
                message: message[CONFIG.len()..].to_string(),
            })
        }
        e => CdLaunchError::Job(e),
    })?;
    if let Some(e) = report_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    if let Some(TimelineError { path, reason }) = trace_error {
        return Err(CdLaunchError::Trace { path, reason });
    }
    let report = report_out
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or_default();
    let unused = unused_out.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(CdOutcome {
        results,
        report,
        unused,
    })
}

/// The timeline file of this process, created, if `PGAS_TRACE` or `configured` names one:
/// the file itself on smp, under mpirun the file with this process's rank inserted.
fn open_timeline(configured: Option<&std::path::Path>) -> Result<Option<Timeline>, CdLaunchError> {
    let Some(path) = trace_path(configured) else {
        return Ok(None);
    };
    let path = match pgas::mpi_world()? {
        Some((rank, _)) => path_for_rank(&path, rank),
        None => path,
    };
    Timeline::create(&path)
        .map(Some)
        .map_err(|TimelineError { path, reason }| CdLaunchError::Trace { path, reason })
}

/// [`launch`] with the configuration from the file named by `CD_CONFIG` (defaults if unset).
pub fn launch_from_env<R, F>(
    job: &LaunchConfig,
    rpcs: RpcTable,
    body: F,
) -> Result<CdOutcome<R>, CdLaunchError>
where
    R: Send,
    F: Fn() -> Result<R, CdError> + Sync,
{
    launch(job, CdConfig::from_env()?, rpcs, body)
}
