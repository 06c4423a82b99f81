//! The timeline of what the CDs did: spans and instants made with `tracing` at the runtime's
//! events, written as Chrome trace events (JSON, viewable in Perfetto or `chrome://tracing`),
//! one track per rank.
//!
//! Turned on by the environment variable [`TRACE_ENV`] (`PGAS_TRACE=FILE.json`) or the
//! configuration's global key `trace_file` (the variable wins). On smp, where the ranks are
//! threads of one process, the process writes `FILE.json` with one track per rank (thread id
//! = rank, named "rank N"). Under mpirun every process writes its own ranks' tracks into
//! `FILE` with `.rankN` inserted before the extension (`trace.json` → `trace.rank3.json`, N
//! the process's rank); their timestamps are wall-clock microseconds, so the files line up
//! when read together (`cargo run -p cd-runtime --bin cd-timeline-svg -- trace.rank*.json`).
//!
//! What the timeline holds (the category `cat` of each event; spans are complete events
//! `"ph": "X"`, instants `"ph": "i"`), and the report counter each agrees with:
//!
//! | cat | what | report |
//! |---|---|---|
//! | `execution` | one execution of a CD (named by the CD; args `level`, `iteration`, `attempt`, `kind`) | `executions`; attempt > 0: `reexecutions` |
//! | `preserve` | one entry preserved in a first execution (arg `entry`) | `preservations` |
//! | `agreement` | a strict CD's agreement on its ranks' failures | |
//! | `recovery` | preparing a re-execution: redundancy restored, dependencies planned (strict), preserved state restored and incoming writes gathered (relaxed) | |
//! | `replay` | a relaxed CD's body re-executed from its log | |
//! | `escalation` | a failure passed to the parent (arg `why`) | `escalations` |
//! | `fault` | an injected fault (instant; arg `kind`) | `injected` |
//! | `loss` | this rank's memory lost (instant) | |
//!
//! Off (neither set), no subscriber exists and every callsite below costs one relaxed load
//! of its interest; nothing is written.

use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// The environment variable that turns the timeline on: the file to write it to.
pub const TRACE_ENV: &str = "PGAS_TRACE";

/// The timeline file of a launch: [`TRACE_ENV`] if set and not empty, else the configuration's
/// `trace_file`. `None`: no timeline.
pub(crate) fn trace_path(configured: Option<&Path>) -> Option<PathBuf> {
    std::env::var_os(TRACE_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| configured.map(Path::to_path_buf))
}

/// `path` with `.rank{rank}` inserted before its extension (or appended without one): the file
/// of one process under mpirun.
pub fn path_for_rank(path: &Path, rank: usize) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.rank{rank}.{}", ext.to_string_lossy()),
        None => format!("{stem}.rank{rank}"),
    };
    path.with_file_name(name)
}

/// Why the timeline could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub(crate) struct TimelineError {
    /// The file.
    pub(crate) path: PathBuf,
    /// What the system said.
    pub(crate) reason: String,
}

/// Where the events go: one file per process, shared by its ranks' layers.
struct Sink {
    out: Mutex<SinkState>,
    /// Wall-clock microseconds at `start` (files of several processes line up).
    start_us: f64,
    start: Instant,
}

struct SinkState {
    file: BufWriter<File>,
    /// Events written so far (a comma goes before every one after the first).
    written: u64,
    /// The first write error: the launch reports it (the timeline would lack events).
    error: Option<String>,
}

impl Sink {
    fn now_us(&self) -> f64 {
        self.start_us + self.start.elapsed().as_nanos() as f64 / 1000.0
    }

    fn write(&self, event: &Value) {
        let mut st = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if st.error.is_some() {
            return;
        }
        let sep = if st.written == 0 { "\n" } else { ",\n" };
        let r = write!(st.file, "{sep}{event}");
        st.written += 1;
        if let Err(e) = r {
            st.error = Some(e.to_string());
        }
    }
}

/// One launch's timeline in this process: the file, and a subscriber per rank writing into it.
pub(crate) struct Timeline {
    path: PathBuf,
    sink: Arc<Sink>,
}

impl Timeline {
    /// Creates (truncates) `path` and starts the JSON array of events.
    pub(crate) fn create(path: &Path) -> Result<Timeline, TimelineError> {
        let err = |e: std::io::Error| TimelineError {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        if path.is_dir() {
            return Err(TimelineError {
                path: path.to_path_buf(),
                reason: "is a directory; name a file for the timeline".into(),
            });
        }
        let mut file = BufWriter::new(File::create(path).map_err(err)?);
        file.write_all(b"[").map_err(err)?;
        let start_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_nanos() as f64 / 1000.0);
        Ok(Timeline {
            path: path.to_path_buf(),
            sink: Arc::new(Sink {
                out: Mutex::new(SinkState {
                    file,
                    written: 0,
                    error: None,
                }),
                start_us,
                start: Instant::now(),
            }),
        })
    }

    /// Makes this thread record into the timeline as `rank`'s track until the guard drops (the
    /// subscriber is the thread's own: a rank's events carry its rank whatever thread runs
    /// it, and other launches in the process are not disturbed).
    pub(crate) fn enter_rank(&self, rank: usize) -> tracing::dispatcher::DefaultGuard {
        let pid = std::process::id();
        self.sink.write(&json!({
            "ph": "M", "name": "process_name", "pid": pid, "tid": rank,
            "args": { "name": "pgas job" }
        }));
        self.sink.write(&json!({
            "ph": "M", "name": "thread_name", "pid": pid, "tid": rank,
            "args": { "name": format!("rank {rank}") }
        }));
        self.sink.write(&json!({
            "ph": "M", "name": "thread_sort_index", "pid": pid, "tid": rank,
            "args": { "sort_index": rank }
        }));
        let layer = ChromeLayer {
            rank,
            pid,
            sink: self.sink.clone(),
        };
        tracing::dispatcher::set_default(&tracing::Dispatch::new(Registry::default().with(layer)))
    }

    /// Ends the JSON array and flushes the file (after every rank of the process is done).
    pub(crate) fn finish(self) -> Result<(), TimelineError> {
        let mut st = self.sink.out.lock().unwrap_or_else(|e| e.into_inner());
        let r = match st.error.take() {
            Some(e) => Err(e),
            None => st
                .file
                .write_all(b"\n]\n")
                .and_then(|()| st.file.flush())
                .map_err(|e| e.to_string()),
        };
        r.map_err(|reason| TimelineError {
            path: self.path.clone(),
            reason,
        })
    }
}

/// A tracing layer writing each closed span as a complete event and each event as an instant,
/// on the track (thread id) of its rank.
struct ChromeLayer {
    rank: usize,
    pid: u32,
    sink: Arc<Sink>,
}

/// The fields of a span (kept in its extensions) or an event, as JSON.
struct Fields(Map<String, Value>);

/// When the span was entered (µs, the sink's clock).
struct Entered(f64);

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

impl ChromeLayer {
    /// A Chrome event of category `cat`: named after the CD (field `cd`) when it has one, so
    /// that Perfetto labels an execution with its CD's name.
    fn event(&self, cat: &str, ph: &str, ts: f64, args: Map<String, Value>) -> Value {
        let name = match args.get("cd") {
            Some(Value::String(cd)) if cat == "execution" => cd.clone(),
            _ => cat.to_string(),
        };
        json!({
            "name": name, "cat": cat, "ph": ph, "ts": ts,
            "pid": self.pid, "tid": self.rank, "args": args,
        })
    }
}

impl<S> Layer<S> for ChromeLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields(Map::new());
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().replace(Entered(self.sink.now_us()));
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let end = self.sink.now_us();
        let Some(span) = ctx.span(id) else { return };
        let ext = span.extensions();
        let Some(Entered(start)) = ext.get::<Entered>() else {
            return;
        };
        let args = ext.get::<Fields>().map(|f| f.0.clone()).unwrap_or_default();
        let mut e = self.event(span.name(), "X", *start, args);
        e["dur"] = (end - start).into();
        self.sink.write(&e);
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let mut e = self.event(event.metadata().name(), "i", self.sink.now_us(), fields.0);
        e["s"] = "t".into();
        self.sink.write(&e);
    }
}

/// The span of one execution of the CD `cd` (`kind` "strict" or "relaxed").
pub(crate) fn execution(
    cd: &str,
    level: usize,
    iteration: u64,
    attempt: u32,
    kind: &'static str,
) -> tracing::span::EnteredSpan {
    tracing::span!(
        Level::INFO,
        "execution",
        cd,
        level = level as u64,
        iteration,
        attempt,
        kind
    )
    .entered()
}

/// The span of one entry preserved by the CD `cd`.
pub(crate) fn preserve(cd: &str, entry: &str) -> tracing::span::EnteredSpan {
    tracing::span!(Level::INFO, "preserve", cd, entry).entered()
}

/// The span of a strict CD's agreement.
pub(crate) fn agreement(cd: &str, attempt: u32) -> tracing::span::EnteredSpan {
    tracing::span!(Level::INFO, "agreement", cd, attempt).entered()
}

/// The span of preparing re-execution `attempt` of the CD `cd`.
pub(crate) fn recovery(cd: &str, attempt: u32) -> tracing::span::EnteredSpan {
    tracing::span!(Level::INFO, "recovery", cd, attempt).entered()
}

/// The span of a relaxed CD's body re-executed from its log.
pub(crate) fn replay(cd: &str, attempt: u32) -> tracing::span::EnteredSpan {
    tracing::span!(Level::INFO, "replay", cd, attempt).entered()
}

/// The span of the CD `cd` passing its failure to its parent.
pub(crate) fn escalation(cd: &str, attempt: u32, why: &str) -> tracing::span::EnteredSpan {
    tracing::span!(Level::INFO, "escalation", cd, attempt, why).entered()
}

/// The instant of a fault injected into the CD `cd` (`kind` "soft" or "rank_loss").
pub(crate) fn fault(cd: &str, iteration: u64, kind: &'static str) {
    tracing::event!(name: "fault", Level::INFO, cd, iteration, kind);
}

/// The instant at which this rank's memory is lost.
pub(crate) fn loss(mid_body: bool) {
    tracing::event!(name: "loss", Level::INFO, mid_body);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &Path) -> Vec<Value> {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn a_rank_records_spans_and_instants_on_its_own_track() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let t = Timeline::create(&path).unwrap();
        std::thread::scope(|s| {
            for rank in [3, 1] {
                let t = &t;
                s.spawn(move || {
                    let _g = t.enter_rank(rank);
                    let _e = execution("step", 1, 7, 1, "strict");
                    {
                        let _p = preserve("step", "mesh");
                    }
                    fault("step", 7, "soft");
                });
            }
        });
        t.finish().unwrap();
        let events = read(&path);
        for rank in [1, 3] {
            let on = |cat: &str| {
                events
                    .iter()
                    .filter(|e| e["tid"] == rank && e["cat"] == cat)
                    .collect::<Vec<_>>()
            };
            let exec = on("execution");
            assert_eq!(exec.len(), 1);
            assert_eq!(exec[0]["name"], "step");
            assert_eq!(exec[0]["ph"], "X");
            assert_eq!(exec[0]["args"]["attempt"], 1);
            assert_eq!(exec[0]["args"]["iteration"], 7);
            let pres = on("preserve");
            assert_eq!(pres.len(), 1);
            assert_eq!(pres[0]["args"]["entry"], "mesh");
            // Nested: the preservation lies inside the execution.
            let (es, ed) = (
                exec[0]["ts"].as_f64().unwrap(),
                exec[0]["dur"].as_f64().unwrap(),
            );
            let ps = pres[0]["ts"].as_f64().unwrap();
            assert!(es <= ps && ps <= es + ed);
            let f = on("fault");
            assert_eq!(f.len(), 1);
            assert_eq!(f[0]["ph"], "i");
            assert_eq!(f[0]["args"]["kind"], "soft");
            assert!(events.iter().any(|e| e["name"] == "thread_name"
                && e["tid"] == rank
                && e["args"]["name"] == format!("rank {rank}")));
        }
    }

    #[test]
    fn without_a_subscriber_nothing_is_recorded_anywhere() {
        // Another launch's timeline in the same process: events made on a thread that did not
        // enter it do not reach it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let t = Timeline::create(&path).unwrap();
        std::thread::spawn(|| {
            let _e = execution("step", 1, 0, 0, "strict");
            fault("step", 0, "soft");
        })
        .join()
        .unwrap();
        t.finish().unwrap();
        assert!(read(&path).is_empty());
    }

    #[test]
    fn a_process_file_under_mpirun_has_its_rank_before_the_extension() {
        assert_eq!(
            path_for_rank(Path::new("/tmp/trace.json"), 3),
            Path::new("/tmp/trace.rank3.json")
        );
        assert_eq!(
            path_for_rank(Path::new("out/trace"), 0),
            Path::new("out/trace.rank0")
        );
    }

    #[test]
    fn a_directory_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let Err(e) = Timeline::create(dir.path()) else {
            panic!("a directory is no timeline file")
        };
        assert!(e.to_string().contains("is a directory"), "{e}");
    }
}
