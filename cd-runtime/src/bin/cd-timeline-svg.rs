//! Renders a CD timeline (the Chrome trace events that `PGAS_TRACE=FILE.json` writes) as an
//! SVG picture: one row per rank, spans as colored bars nested by depth, injected faults and
//! losses as marks. The README's picture is made with it:
//!
//! ```text
//! PGAS_TRACE=/tmp/timeline.json cargo run -p lulesh -- -s 6 --ranks 8 -i 12 \
//!     --cd-config lulesh/configs/relaxed-trace.toml
//! cargo run -p cd-runtime --bin cd-timeline-svg -- /tmp/timeline.json --fault 1 --ms 2.4 \
//!     -o docs/timeline.svg
//! ```
//!
//! Several files (one per process under mpirun) are read as one timeline. `--from MS` and
//! `--to MS` cut a window, in milliseconds from the first event; `--fault N --ms W` a window
//! of W milliseconds around the N-th injected fault (a quarter before it), the same part of
//! the run whatever the machine's speed moved it to.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::Value;

/// A span or an instant of one rank's track.
struct Mark {
    cat: String,
    name: String,
    /// Microseconds from the first event.
    ts: f64,
    /// Microseconds; `None` for an instant.
    dur: Option<f64>,
    attempt: u64,
    /// The CD's level (executions; 0 otherwise).
    level: u64,
    /// Nesting depth among the rank's spans (0: outermost).
    depth: usize,
}

/// The command line.
struct Args {
    inputs: Vec<PathBuf>,
    out: Option<PathBuf>,
    from_ms: Option<f64>,
    to_ms: Option<f64>,
    /// The window around this injected fault (1: the first), `window_ms` wide.
    fault: Option<usize>,
    window_ms: f64,
}

const USAGE: &str = "usage: cd-timeline-svg TRACE.json [TRACE.json ...] [-o OUT.svg] \
     [--from MS] [--to MS] [--fault N [--ms W]]";

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        inputs: Vec::new(),
        out: None,
        from_ms: None,
        to_ms: None,
        fault: None,
        window_ms: 2.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |what: &str| it.next().ok_or(format!("{arg} needs {what}; {USAGE}"));
        match arg.as_str() {
            "-o" => a.out = Some(PathBuf::from(value("a file")?)),
            "--fault" => {
                let v = value("a number")?;
                a.fault = Some(v.parse().ok().filter(|&n| n > 0).ok_or(format!(
                    "--fault {v}: the number of an injected fault, 1 for the first; {USAGE}"
                ))?);
            }
            "--from" | "--to" | "--ms" => {
                let v = value("milliseconds")?;
                let ms: f64 = v
                    .parse()
                    .map_err(|_| format!("{arg} {v}: not a number of milliseconds; {USAGE}"))?;
                match arg.as_str() {
                    "--from" => a.from_ms = Some(ms),
                    "--to" => a.to_ms = Some(ms),
                    _ => a.window_ms = ms,
                }
            }
            "-h" | "--help" => return Err(USAGE.into()),
            _ => a.inputs.push(PathBuf::from(arg)),
        }
    }
    if a.inputs.is_empty() {
        return Err(format!("no trace file given; {USAGE}"));
    }
    Ok(a)
}

/// Every rank's marks, by rank, from the files' events.
fn read(inputs: &[PathBuf]) -> Result<BTreeMap<u64, Vec<Mark>>, String> {
    let mut events = Vec::new();
    for p in inputs {
        let text = std::fs::read_to_string(p)
            .map_err(|e| format!("cannot read the trace {}: {e}", p.display()))?;
        let v: Vec<Value> = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} is not a JSON array of trace events ({e}); was it written by PGAS_TRACE?",
                p.display()
            )
        })?;
        events.extend(v);
    }
    let t0 = events
        .iter()
        .filter(|e| e["ph"] != "M")
        .filter_map(|e| e["ts"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let mut by_rank: BTreeMap<u64, Vec<Mark>> = BTreeMap::new();
    for e in &events {
        let ph = e["ph"].as_str().unwrap_or_default();
        if ph != "X" && ph != "i" {
            continue;
        }
        let (Some(tid), Some(ts)) = (e["tid"].as_u64(), e["ts"].as_f64()) else {
            continue;
        };
        by_rank.entry(tid).or_default().push(Mark {
            cat: e["cat"].as_str().unwrap_or_default().to_string(),
            name: e["name"].as_str().unwrap_or_default().to_string(),
            ts: ts - t0,
            dur: (ph == "X").then(|| e["dur"].as_f64().unwrap_or(0.0)),
            attempt: e["args"]["attempt"].as_u64().unwrap_or(0),
            level: e["args"]["level"].as_u64().unwrap_or(0),
            depth: 0,
        });
    }
    for marks in by_rank.values_mut() {
        // Outer spans first: by start, the longer first among equal starts.
        marks.sort_by(|a, b| {
            a.ts.total_cmp(&b.ts)
                .then(b.dur.unwrap_or(0.0).total_cmp(&a.dur.unwrap_or(0.0)))
        });
        let mut open: Vec<f64> = Vec::new();
        for m in marks.iter_mut() {
            while open.last().is_some_and(|&end| end <= m.ts) {
                open.pop();
            }
            m.depth = open.len();
            if let Some(d) = m.dur {
                open.push(m.ts + d);
            }
        }
    }
    Ok(by_rank)
}

/// The fill of a span of category `cat` (a re-execution stands out from a first execution,
/// an inner CD's execution from an outer one's).
fn color(cat: &str, attempt: u64, level: u64) -> &'static str {
    match cat {
        "execution" if attempt > 0 => "#f28e2b",
        "execution" if level <= 1 => "#c6dbef",
        "execution" => "#6baed6",
        "preserve" => "#59a14f",
        "agreement" => "#9d9d9d",
        "recovery" => "#b07aa1",
        "replay" => "#ff9d9a",
        "escalation" => "#e15759",
        _ => "#d4d4d4",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn render(by_rank: &BTreeMap<u64, Vec<Mark>>, from_ms: Option<f64>, to_ms: Option<f64>) -> String {
    let end = by_rank
        .values()
        .flatten()
        .map(|m| m.ts + m.dur.unwrap_or(0.0))
        .fold(0.0, f64::max);
    let (lo, hi) = (
        from_ms.map_or(0.0, |ms| ms * 1000.0),
        to_ms.map_or(end, |ms| ms * 1000.0),
    );
    let span_us = (hi - lo).max(1.0);
    let (left, width, row, top) = (70.0, 1100.0, 34.0, 30.0);
    let x = |t: f64| left + (t - lo).clamp(0.0, span_us) / span_us * width;
    let height = top + row * by_rank.len() as f64 + 70.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" viewBox="0 0 {w} {height}" font-family="sans-serif" font-size="12">"#,
        w = left + width + 20.0
    );
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="100%" height="100%" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="18">CD timeline, {:.2} to {:.2} ms of the run (one row per rank; hover for details)</text>"#,
        lo / 1000.0,
        hi / 1000.0
    );
    for (i, (rank, marks)) in by_rank.iter().enumerate() {
        let y0 = top + row * i as f64;
        let _ = writeln!(
            s,
            r#"<text x="8" y="{:.1}">rank {rank}</text>"#,
            y0 + row / 2.0 + 4.0
        );
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#eeeeee"/>"##,
            y0 + row - 1.0,
            left + width,
            y0 + row - 1.0
        );
        for m in marks {
            let shown = m.ts + m.dur.unwrap_or(0.0) >= lo && m.ts <= hi;
            if !shown {
                continue;
            }
            let title = match m.dur {
                Some(d) => format!(
                    "{} {} (attempt {}): {:.3} ms",
                    m.cat,
                    m.name,
                    m.attempt,
                    d / 1000.0
                ),
                None => format!("{} {} at {:.3} ms", m.cat, m.name, m.ts / 1000.0),
            };
            match m.dur {
                Some(d) => {
                    let inset = (m.depth as f64 * 5.0).min(row / 2.0 - 3.0);
                    let (x0, x1) = (x(m.ts), x(m.ts + d));
                    let _ = writeln!(
                        s,
                        r##"<rect x="{x0:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}" stroke="#555555" stroke-width="0.2"><title>{}</title></rect>"##,
                        y0 + 2.0 + inset,
                        (x1 - x0).max(0.5),
                        row - 5.0 - 2.0 * inset,
                        color(&m.cat, m.attempt, m.level),
                        escape(&title)
                    );
                }
                None => {
                    let (cx, cy) = (x(m.ts), y0 + 4.0);
                    let fill = if m.cat == "fault" {
                        "#d62728"
                    } else {
                        "#000000"
                    };
                    let _ = writeln!(
                        s,
                        r#"<path d="M{:.2},{:.1} l-5,-7 h10 z" fill="{fill}"><title>{}</title></path>"#,
                        cx,
                        cy + 5.0,
                        escape(&title)
                    );
                }
            }
        }
    }
    let axis = top + row * by_rank.len() as f64 + 4.0;
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{axis}" x2="{:.1}" y2="{axis}" stroke="#333333"/>"##,
        left + width
    );
    for k in 0..=10 {
        let t = lo + span_us * k as f64 / 10.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{:.1} ms</text>"#,
            x(t),
            axis + 15.0,
            t / 1000.0
        );
    }
    let legend = [
        ("execution", 0, 1, "level-1 CD"),
        ("execution", 0, 2, "inner CD"),
        ("execution", 1, 1, "re-execution"),
        ("preserve", 0, 0, "preservation"),
        ("agreement", 0, 0, "agreement"),
        ("recovery", 0, 0, "recovery"),
        ("replay", 0, 0, "replay"),
        ("escalation", 0, 0, "escalation"),
    ];
    let ly = axis + 38.0;
    for (i, (cat, attempt, level, label)) in legend.iter().enumerate() {
        let lx = left + i as f64 * 100.0;
        let _ = writeln!(
            s,
            r##"<rect x="{lx}" y="{:.1}" width="14" height="12" fill="{}" stroke="#555555" stroke-width="0.3"/><text x="{:.1}" y="{:.1}">{label}</text>"##,
            ly - 10.0,
            color(cat, *attempt, *level),
            lx + 18.0,
            ly
        );
    }
    let lx = left + legend.len() as f64 * 100.0;
    let _ = writeln!(
        s,
        r##"<path d="M{:.1},{:.1} l-5,-7 h10 z" fill="#d62728"/><text x="{:.1}" y="{ly:.1}">fault</text>"##,
        lx + 5.0,
        ly,
        lx + 14.0
    );
    let _ = writeln!(
        s,
        r##"<path d="M{:.1},{:.1} l-5,-7 h10 z" fill="#000000"/><text x="{:.1}" y="{ly:.1}">memory lost</text>"##,
        lx + 65.0,
        ly,
        lx + 74.0
    );
    s.push_str("</svg>\n");
    s
}

fn main() -> ExitCode {
    let run = || -> Result<(), String> {
        let args = parse_args()?;
        let by_rank = read(&args.inputs)?;
        if by_rank.is_empty() {
            return Err("the trace holds no spans: was the run made with PGAS_TRACE set?".into());
        }
        let (mut from_ms, mut to_ms) = (args.from_ms, args.to_ms);
        if let Some(n) = args.fault {
            let mut faults: Vec<f64> = by_rank
                .values()
                .flatten()
                .filter(|m| m.cat == "fault")
                .map(|m| m.ts / 1000.0)
                .collect();
            faults.sort_by(f64::total_cmp);
            let at = faults.get(n - 1).ok_or(format!(
                "--fault {n}: the trace holds {} injected fault(s)",
                faults.len()
            ))?;
            from_ms = Some(at - args.window_ms / 4.0);
            to_ms = Some(at + args.window_ms * 3.0 / 4.0);
        }
        let svg = render(&by_rank, from_ms, to_ms);
        match &args.out {
            Some(p) => std::fs::write(p, svg)
                .map_err(|e| format!("cannot write the picture to {}: {e}", p.display())),
            None => {
                print!("{svg}");
                Ok(())
            }
        }
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cd-timeline-svg: {e}");
            ExitCode::from(2)
        }
    }
}
