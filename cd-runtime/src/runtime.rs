//! The per-rank CD runtime: the stack of CDs this rank is inside, the copies it holds for its
//! buddies, its report counters; and `launch`, which runs a program under a root CD.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use gasnet_bridge::LaunchConfig;
use pgas::RpcTable;

use crate::buddy::{BuddyRpcs, BuddyStore, buddy_map};
use crate::buffer_pool::BufferPool;
use crate::config::CdConfig;
use crate::error::{CdError, CdLaunchError};
use crate::frame::Frame;
use crate::report::{Collector, Report};
use crate::xor::{XorRpcs, XorStore};

/// One rank's CD state.
pub(crate) struct CdRuntime {
    pub(crate) config: Arc<CdConfig>,
    pub(crate) rank: usize,
    pub(crate) buddy_rank: usize,
    pub(crate) frames: RefCell<Vec<Rc<Frame>>>,
    pub(crate) stats: RefCell<Collector>,
    /// Preservation buffers released by completed CDs, for the next ones.
    pub(crate) pool: BufferPool,
    pub(crate) buddy: BuddyStore,
    pub(crate) rpcs: BuddyRpcs,
    iterations: RefCell<HashMap<String, u64>>,
    /// The exact faults of the configuration this rank reached ([`CdConfig::exact_sites`]).
    pub(crate) reached: RefCell<std::collections::BTreeSet<usize>>,
    pub(crate) file_dir: PathBuf,
    /// Writes (and removes) the file medium's copies off the critical path.
    pub(crate) files: crate::file_medium::FileWriter,
    /// Memory losses this rank suffered (emulated).
    pub(crate) losses: Cell<u64>,
    /// Relaxed CDs: logging, replay, the hook.
    pub(crate) relaxed: crate::relaxed::RankState,
    /// The xor medium: this rank's checksum groups and what it heard of their losses.
    pub(crate) xor: XorStore,
    pub(crate) xor_rpcs: XorRpcs,
    /// This rank has switched counting its incoming writes on ([`CdRuntime::count_incoming_writes`]).
    counting: Cell<bool>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<CdRuntime>>> = const { RefCell::new(None) };
}

/// Runs `f` with this rank's CD runtime.
///
/// # Panics
/// Outside [`launch`].
pub(crate) fn with<R>(f: impl FnOnce(&CdRuntime) -> R) -> R {
    let rt = CURRENT
        .with(|c| c.borrow().clone())
        .expect("CD call outside cd_runtime::launch: this thread is not a CD-managed rank");
    f(&rt)
}

/// Runs `f` with this rank's CD runtime, if this thread still has one.
///
/// For the buddy rpc functions: a rank serves rpcs after its body has returned (pgas
/// finalize), and a `forget` sent by a buddy's last CDs can arrive then; with [`with`] that
/// panicked ("CD call outside cd_runtime::launch") and failed a job that had succeeded.
pub(crate) fn try_with<R>(f: impl FnOnce(&CdRuntime) -> R) -> Option<R> {
    let rt = CURRENT.with(|c| c.borrow().clone())?;
    Some(f(&rt))
}

/// This rank's CD runtime.
///
/// # Panics
/// Outside [`launch`].
pub(crate) fn handle() -> Rc<CdRuntime> {
    CURRENT
        .with(|c| c.borrow().clone())
        .expect("CD call outside cd_runtime::launch: this thread is not a CD-managed rank")
}

/// Name of the innermost CD, for messages (`<none>` outside a CD job).
pub(crate) fn current_name() -> String {
    CURRENT.with(|c| {
        c.borrow()
            .as_ref()
            .and_then(|rt| rt.frames.borrow().last().map(|f| f.name.clone()))
            .unwrap_or_else(|| "<none>".into())
    })
}

impl CdRuntime {
    /// The innermost CD.
    pub(crate) fn top(&self) -> Rc<Frame> {
        self.frames
            .borrow()
            .last()
            .cloned()
            .expect("the root CD is always on the stack")
    }

    /// Makes sure the writes into this rank are counted from now on: the first relaxed CD
    /// (or dependency-tracking strict CD) on the rank switches counting on, for the rest of
    /// the job (`WriteCounting::Switched`, which [`launch`] asks for; a job of strict CDs
    /// alone never pays for counting). Call before reading the IWC a CD starts from.
    ///
    /// Writes that landed before carry no IWC (their acks are `UNCOUNTED`): no replay window
    /// starts before this, and a loss recovery that would rebuild such a write from a
    /// neighbour's log refuses and escalates (`replay::rebuild_before_begin`).
    ///
    /// **Reading chosen:** counting stays on once on. Switching it off when the LCSA
    /// completes would leave uncounted the puts that neighbours, already in the next
    /// instance, make before this rank begins it, which a loss recovery rebuilds.
    pub(crate) fn count_incoming_writes(&self) {
        if !self.counting.get() {
            pgas::resilience::count_incoming_writes();
            self.counting.set(true);
        }
    }

    /// The innermost strict CD (the LCSA of the relaxed CDs running inside it; the root at
    /// the latest).
    pub(crate) fn lcsa(&self) -> Rc<Frame> {
        self.frames
            .borrow()
            .iter()
            .rev()
            .find(|f| f.kind == crate::frame::CdKind::Strict)
            .cloned()
            .expect("the root CD is strict")
    }

    /// The instance number of the next CD called `name` on this rank.
    pub(crate) fn next_iteration(&self, name: &str) -> u64 {
        let mut it = self.iterations.borrow_mut();
        // Looked up by `&str` first: no allocation once the name is known.
        if let Some(n) = it.get_mut(name) {
            *n += 1;
            return *n - 1;
        }
        it.insert(name.to_string(), 1);
        0
    }

    /// Stores again at the buddy the copies the buddy lost (it lost its memory), from this
    /// rank's own copies: called before a re-execution, so redundancy is back before the next
    /// failure (without it, a second loss, of this rank, in the same CD escalated).
    /// The xor medium's entries that one member of their group lost are rebuilt here too.
    pub(crate) fn rereplicate(&self) {
        crate::xor::rebuild(self);
        for f in self.frames.borrow().iter() {
            for e in f.state.borrow().entries.iter() {
                if let crate::frame::Store::Buddy {
                    key,
                    held,
                    local: Some(bytes),
                    ..
                } = &e.store
                {
                    if self.buddy.is_lost(*key, *held) {
                        self.rpcs.store_again(self, *key, *held, bytes);
                    }
                }
            }
        }
    }

    /// Emulates the loss of this rank's memory: its segment, the locally preserved state of
    /// every CD it is in, the relaxed logs of every CD (entries, own IWCs, dependency notes),
    /// and the copies and log replicas it held for its buddies; then fetches back the log
    /// replicas this rank's buddy holds (`relaxed/replica.rs`), as a restarted rank would.
    pub(crate) fn lose_memory(&self) {
        // Until the replicas are back, other ranks' gathers are told to ask again (telling
        // the owners below waits for rpcs, so this rank serves requests meanwhile).
        self.relaxed.restoring.set(true);
        pgas::fault::emulate_memory_loss();
        let frames: Vec<Rc<Frame>> = self.frames.borrow().clone();
        for f in &frames {
            f.lose_local();
            crate::relaxed::replica::wipe(f);
        }
        self.pool.clear();
        for (owner, lost) in self.buddy.wipe() {
            self.rpcs.notify_lost(owner, lost);
        }
        crate::xor::notify_loss(self);
        self.losses.set(self.losses.get() + 1);
        crate::relaxed::replica::restore_logs(self);
    }
}

/// What a CD-managed job returns: each rank's result and the report summed over ranks.
#[derive(Debug)]
pub struct CdOutcome<R> {
    /// Results in rank order.
    pub results: Vec<R>,
    /// The CD report (counts summed over ranks).
    pub report: Report,
    /// What the configuration named but the run never used ([`CdConfig::unused`],
    /// [`CdConfig::unreached`]; in the process that ran rank 0).
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

/// Writes one whole line to stderr with one `write_all`, so lines of different ranks (or
/// processes) do not interleave.
pub(crate) fn eprint_line(line: &str) {
    use std::io::Write;
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// What to change in the configuration so that `e` is contained, as a sentence.
fn hint(config: &CdConfig, e: &CdError) -> String {
    use crate::error::FaultKinds;
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
            _ => "see RELAXED_CDS.md on what a relaxed CD can replay".into(),
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
        } else if s.medium == crate::config::Medium::Xor {
            format!(
                "an xor checksum group survives the loss of one member until it is rebuilt: \
                 place groups on different nodes (buddy_domain = \"node\"), use smaller \
                 groups (xor_group) so fewer share one parity, or contain such losses in an \
                 enclosing CD with medium = \"file\" (in {table})"
            )
        } else if s.medium == crate::config::Medium::Buddy && config.buddy_copies == 1 {
            format!(
                "with buddy_copies = 1 the buddy holds the only copy of a rank's state, and the \
                 buddy's loss took it: set buddy_copies = 2 (a local copy too), or contain \
                 such losses in an enclosing CD with medium = \"file\" (around {table})"
            )
        } else if s.medium == crate::config::Medium::Local {
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
        if s.log_medium == crate::config::LogMedium::Local {
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
struct RankGuard(Rc<CdRuntime>);

impl Drop for RankGuard {
    fn drop(&mut self) {
        // Also on a rank that unwinds (an escalation, a peer's failure), whose CDs never
        // complete: the queued writes end, then the arena files go.
        self.0.files.finish();
        let _ = CURRENT.try_with(|c| c.try_borrow_mut().map(|mut c| *c = None));
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
    let buddy_rpcs = BuddyRpcs::register(&mut rpcs);
    let relaxed_rpcs = crate::relaxed::RelaxedRpcs::register(&mut rpcs);
    let xor_rpcs = XorRpcs::register(&mut rpcs);
    let xor_sizes = config.xor_group_sizes();
    // This launch's own directory (in the process: each process under mpirun makes its own),
    // inside `file_dir` or the temporary directory; removed on every exit path.
    let private_dir = crate::private_files::PrivateDir::create(config.file_dir.as_deref())
        .map_err(|e| CdLaunchError::Files {
            reason: e.to_string(),
        })?;
    let file_dir = private_dir.path().to_path_buf();
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
            .saturating_add(config.buddy_segment_bytes + crate::buddy::REGION_ALIGN);
    }
    let job = &job;
    let config_source = config.source().map(PathBuf::from);
    let config = Arc::new(config);
    let report_out: Mutex<Option<Report>> = Mutex::new(None);
    let unused_out: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let report_error: Mutex<Option<CdLaunchError>> = Mutex::new(None);
    let results = pgas::launch(job, rpcs, || {
        let rank = pgas::rank_me();
        let ranks = pgas::rank_n();
        // Every rank computes the same map from the conduit's topology.
        let nodes: Vec<usize> = (0..ranks).map(pgas::node_of).collect();
        // Every rank forms the same groups, or finds the same reason why not.
        let xor = XorStore::new(&xor_sizes, &nodes, config.buddy_domain)
            .unwrap_or_else(|e| stop_config(e.to_string()));
        let rt = Rc::new(CdRuntime {
            config: config.clone(),
            rank,
            buddy_rank: buddy_map(&nodes, config.buddy_domain)[rank],
            frames: RefCell::new(vec![Rc::new(Frame::root(&config, rank))]),
            stats: RefCell::new(Collector::default()),
            pool: BufferPool::default(),
            buddy: BuddyStore::new(config.buddy_segment_bytes),
            rpcs: buddy_rpcs,
            iterations: RefCell::new(HashMap::new()),
            reached: RefCell::new(std::collections::BTreeSet::new()),
            file_dir: file_dir.join(format!("rank{rank}")),
            files: crate::file_medium::FileWriter::new(file_dir.join(format!("rank{rank}"))),
            losses: Cell::new(0),
            relaxed: crate::relaxed::RankState::new(relaxed_rpcs),
            xor,
            xor_rpcs,
            counting: Cell::new(false),
        });
        CURRENT.with(|c| *c.borrow_mut() = Some(rt.clone()));
        // No rank's body starts before every rank has its runtime: an rpc of the runtime's
        // (a buddy slot, a gather) reaching a rank that had none yet found nothing to serve it.
        pgas::resilience::internal(pgas::barrier);
        pgas::resilience::keep_until_job_end(RankGuard(rt.clone()));
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
        if let Some(reasons) = root_failure {
            stop(format!(
                "the root CD detected an error on rank {rank} ({reasons}); the root cannot \
                 re-execute, so the run stops rather than give a wrong answer; to contain it, \
                 check inside a CD (cd::strict), which can re-execute"
            ));
        }
        rt.top().release_entries(&rt);
        crate::strict::end_relaxed_group(&rt, &rt.top());
        let mine = (
            rt.stats.borrow().report(ranks),
            rt.reached.borrow().iter().copied().collect::<Vec<usize>>(),
        );
        let merge = |(a, mut ra): (Report, Vec<usize>), (b, rb): (Report, Vec<usize>)| {
            ra.extend(rb);
            (a.merge(b), ra)
        };
        let total =
            pgas::resilience::internal(|| pgas::reduce_one(&pgas::world(), mine, merge, 0).wait());
        if let Some((mut report, reached)) = total {
            let mut unused = config.unused(&report);
            unused.extend(config.unreached(&reached));
            for line in &unused {
                eprint_line(&format!("cd: warning: {line}"));
            }
            *unused_out.lock().unwrap_or_else(|e| e.into_inner()) = unused;
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
            *report_out.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
        }
        value
    });
    // What this launch made goes (also when the job failed); a configured `file_dir` keeps
    // whatever else it holds.
    drop(private_dir);
    let results = results.map_err(|e| match e {
        gasnet_bridge::LaunchError::RankPanicked { rank, message }
            if message.starts_with(ESCALATION) =>
        {
            CdLaunchError::Escalated {
                rank,
                message: message[ESCALATION.len()..].to_string(),
            }
        }
        gasnet_bridge::LaunchError::RankPanicked { message, .. } if message.starts_with(CONFIG) => {
            CdLaunchError::Config(crate::error::ConfigError {
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
