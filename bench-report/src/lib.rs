//! The report format of every benchmark in the project (docs/benchmarks.md): one measurement
//! per line, a median over repetitions, and the ratio against a baseline measured in the
//! same run; JSON lines with `--json`, a readable table otherwise.

#![forbid(unsafe_code)]

use std::time::Instant;

use clap::Parser;
use serde::Serialize;

/// Which direction of a value is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Smaller is better (latency).
    Lower,
    /// Larger is better (bandwidth, rate).
    Higher,
}

impl Better {
    fn as_str(self) -> &'static str {
        match self {
            Better::Lower => "lower",
            Better::Higher => "higher",
        }
    }
}

/// One measured result, with the baseline it is judged against.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Stable benchmark name, e.g. `put_latency`.
    pub bench: String,
    /// Stable case name, e.g. `8B`.
    pub case: String,
    /// Median over the repetitions.
    pub value: f64,
    /// Unit of `value` (`ns`, `GB/s`, ...).
    pub unit: String,
    /// Baseline name and its median, measured in the same run.
    pub baseline: Option<(String, f64)>,
    /// Direction of improvement.
    pub better: Better,
    /// `smp` or `mpi`.
    pub conduit: String,
    /// Rank count of the run.
    pub ranks: usize,
}

impl Line {
    /// A line without a baseline.
    pub fn new(bench: &str, case: &str, value: f64, unit: &str, better: Better) -> Line {
        Line {
            bench: bench.into(),
            case: case.into(),
            value,
            unit: unit.into(),
            baseline: None,
            better,
            conduit: "smp".into(),
            ranks: 1,
        }
    }

    /// Adds the baseline this value is compared with.
    pub fn baseline(mut self, name: &str, value: f64) -> Line {
        self.baseline = Some((name.into(), value));
        self
    }

    /// Sets the conduit and rank count.
    pub fn on(mut self, conduit: &str, ranks: usize) -> Line {
        self.conduit = conduit.into();
        self.ranks = ranks;
        self
    }

    /// `value / baseline`, when there is a baseline.
    pub fn ratio(&self) -> Option<f64> {
        self.baseline.as_ref().map(|(_, b)| self.value / b)
    }

    /// The JSON object of docs/benchmarks.md, on one line.
    pub fn to_json(&self) -> String {
        let ratio = self.ratio();
        let json = JsonLine {
            bench: &self.bench,
            case: &self.case,
            value: json_num(self.value),
            unit: &self.unit,
            baseline: self.baseline.as_ref().map(|(name, _)| name.as_str()),
            baseline_value: self.baseline.as_ref().map(|&(_, v)| json_num(v)),
            ratio: ratio.map(json_num),
            better: self.better.as_str(),
            conduit: &self.conduit,
            ranks: self.ranks,
        };
        serde_json::to_string(&json).expect("a benchmark line serializes")
    }
}

/// A [`Line`] as docs/benchmarks.md writes it, in its field order; the baseline's three fields are
/// left out when there is none.
#[derive(Serialize)]
struct JsonLine<'a> {
    bench: &'a str,
    case: &'a str,
    value: Option<f64>,
    unit: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    baseline: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    baseline_value: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio: Option<Option<f64>>,
    better: &'static str,
    conduit: &'a str,
    ranks: usize,
}

/// `v` rounded to four decimals, which are plenty for timings and keep lines short (a value
/// that would round to zero is kept as it is); `None`, written `null`, when not finite.
fn json_num(v: f64) -> Option<f64> {
    if !v.is_finite() {
        return None;
    }
    let r = (v * 1e4).round() / 1e4;
    Some(if r == 0.0 && v != 0.0 { v } else { r })
}

/// The median of `samples` (which it sorts); NaN for none.
pub fn median(samples: &mut [f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let n = samples.len();
    if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    }
}

/// Runs `rep` once to warm up, then `reps` times, and returns the median of what it returned.
pub fn median_of(reps: usize, mut rep: impl FnMut() -> f64) -> f64 {
    rep();
    let mut samples: Vec<f64> = (0..reps.max(1)).map(|_| rep()).collect();
    median(&mut samples)
}

/// Medians of `base` and `subject`, measured alternately in every repetition (after one
/// warm-up of each) so that a baseline and what it is the baseline of see the same machine
/// state.
pub fn paired(
    reps: usize,
    mut base: impl FnMut() -> f64,
    mut subject: impl FnMut() -> f64,
) -> (f64, f64) {
    let (mut bs, mut ss) = (Vec::new(), Vec::new());
    base();
    subject();
    for _ in 0..reps.max(1) {
        bs.push(base());
        ss.push(subject());
    }
    (median(&mut bs), median(&mut ss))
}

/// Nanoseconds per operation of `ops` calls of `op`.
pub fn ns_per_op(ops: u64, mut op: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..ops {
        op();
    }
    start.elapsed().as_nanos() as f64 / ops as f64
}

/// One cache line that two threads bounce between them: the cross-core round trip, the floor
/// of any round trip between two threads of one machine (the `cacheline_roundtrip` baseline of
/// the smp round trips; see [`CacheLinePingPong::run`]).
///
/// The word is alone on its line (128-byte alignment: 64-byte aligned, and the adjacent line
/// a pair-prefetching core may pull along holds nothing either).
#[repr(align(128))]
#[derive(Debug, Default)]
pub struct CacheLinePingPong {
    word: std::sync::atomic::AtomicU64,
}

impl CacheLinePingPong {
    /// A line at rest.
    pub fn new() -> CacheLinePingPong {
        CacheLinePingPong::default()
    }

    /// `round_trips` round trips of the line between the thread calling it with `side` 0 and
    /// the one calling it with `side` 1 (both must, the same number of times with the same
    /// count): side 0 makes the word odd and waits until side 1 has made it even again.
    /// Nanoseconds per round trip on side 0; 0 on side 1, and at once on any other side.
    ///
    /// One untimed round trip comes first, so that the time side 1 takes to arrive (a rank
    /// thread woken from a park, say) is not counted.
    pub fn run(&self, side: usize, round_trips: u64) -> f64 {
        use std::sync::atomic::Ordering::{Acquire, Release};
        let word = &self.word;
        let one = || {
            // Even here: only this side makes it odd, and it waited for the answer.
            let v = word.load(Acquire);
            word.store(v + 1, Release);
            while word.load(Acquire) == v + 1 {
                std::hint::spin_loop();
            }
        };
        match side {
            0 => {
                one();
                let start = Instant::now();
                for _ in 0..round_trips {
                    one();
                }
                start.elapsed().as_nanos() as f64 / round_trips.max(1) as f64
            }
            1 => {
                for _ in 0..=round_trips {
                    let v = loop {
                        let v = word.load(Acquire);
                        if v % 2 == 1 {
                            break v;
                        }
                        std::hint::spin_loop();
                    };
                    word.store(v + 1, Release);
                }
                0.0
            }
            _ => 0.0,
        }
    }
}

/// Median nanoseconds per cache-line round trip between two threads started for it, `round_trips`
/// per repetition, `reps` repetitions after one warm-up (see [`CacheLinePingPong`]).
pub fn cacheline_roundtrip_ns(round_trips: u64, reps: usize) -> f64 {
    let line = CacheLinePingPong::new();
    std::thread::scope(|s| {
        let answer = s.spawn(|| {
            for _ in 0..=reps.max(1) {
                line.run(1, round_trips);
            }
        });
        let ns = median_of(reps, || line.run(0, round_trips));
        answer.join().expect("the answering thread");
        ns
    })
}

/// The command line every benchmark accepts.
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(
    about = "A benchmark of the project; its lines carry a baseline measured in the same run"
)]
pub struct BenchArgs {
    /// One JSON object per line (docs/benchmarks.md) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Rank count.
    #[arg(long, default_value_t = 2, value_parser = |s: &str| whole_at_least(s, 2))]
    pub ranks: usize,
    /// Repetitions after warm-up; the median is reported (use at least 5 for a number to keep).
    #[arg(long, default_value_t = 7, value_parser = |s: &str| whole_at_least(s, 1))]
    pub reps: usize,
    /// Fewer operations per repetition, for smoke tests.
    #[arg(long)]
    pub quick: bool,
    /// Only the lines of these benches (comma-separated `bench` names; a bench that does not
    /// know how to skip a measurement still prints every line it measured).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

impl BenchArgs {
    /// Parses `std::env::args`; prints usage and exits on `--help` (status 0) or a bad
    /// argument (status 2).
    pub fn from_env(program: &str) -> BenchArgs {
        BenchArgs::from_args(program, std::env::args().skip(1))
    }

    /// Like [`BenchArgs::from_env`], from `args` (without the program's name): for a bench
    /// that takes options of its own out first.
    pub fn from_args(program: &str, args: impl IntoIterator<Item = String>) -> BenchArgs {
        BenchArgs::parse_from(std::iter::once(program.to_owned()).chain(args))
    }

    /// Whether the lines of `bench` are wanted (`--only` names it, or is absent): lets a
    /// profile or an A/B run measure a few lines without the rest of the binary's time.
    pub fn wants(&self, bench: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|b| b == bench)
    }

    /// Parses arguments (without the program name); `Ok(None)` means help was asked for.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<BenchArgs>, String> {
        let args = std::iter::once("bench".to_owned()).chain(args);
        match BenchArgs::try_parse_from(args) {
            Ok(a) => Ok(Some(a)),
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// A whole number of at least `min` (a clap value parser).
fn whole_at_least(s: &str, min: usize) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= min => Ok(n),
        Ok(_) => Err(format!("must be at least {min}")),
        Err(_) => Err("needs a whole number".into()),
    }
}

/// Prints lines as JSON (one per line, nothing else on stdout) or as a table.
pub fn print(lines: &[Line], json: bool) {
    if json {
        for l in lines {
            println!("{}", l.to_json());
        }
        return;
    }
    println!(
        "{:<22} {:<8} {:>12} {:<5} {:<22} {:>12} {:>8}",
        "bench", "case", "value", "unit", "baseline", "base value", "ratio"
    );
    for l in lines {
        let (bname, bval, ratio) = match &l.baseline {
            Some((n, v)) => (n.as_str(), format!("{v:.3}"), format!("{:.3}", l.value / v)),
            None => ("-", "-".into(), "-".into()),
        };
        println!(
            "{:<22} {:<8} {:>12.3} {:<5} {:<22} {:>12} {:>8}",
            l.bench, l.case, l.value, l.unit, bname, bval, ratio
        );
    }
}

/// A size as the case names write it: `8B`, `4KiB`, `4MiB`.
pub fn size_name(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{}KiB", bytes >> 10)
    } else {
        format!("{bytes}B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_line_has_the_documented_fields() {
        let l = Line::new("put_latency", "8B", 31.2, "ns", Better::Lower)
            .baseline("memcpy_8B", 4.0)
            .on("smp", 2);
        assert_eq!(
            l.to_json(),
            "{\"bench\":\"put_latency\",\"case\":\"8B\",\"value\":31.2,\"unit\":\"ns\",\
             \"baseline\":\"memcpy_8B\",\"baseline_value\":4.0,\"ratio\":7.8,\
             \"better\":\"lower\",\"conduit\":\"smp\",\"ranks\":2}"
        );
        let nb = Line::new("am_roundtrip", "short", 400.0, "ns", Better::Lower);
        assert!(!nb.to_json().contains("baseline"));
        let odd = Line::new("a\"b\\c\n", "x", f64::NAN, "ns", Better::Lower).baseline("b", 1.5e-7);
        assert_eq!(
            odd.to_json(),
            "{\"bench\":\"a\\\"b\\\\c\\n\",\"case\":\"x\",\"value\":null,\"unit\":\"ns\",\
             \"baseline\":\"b\",\"baseline_value\":1.5e-7,\"ratio\":null,\
             \"better\":\"lower\",\"conduit\":\"smp\",\"ranks\":1}"
        );
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
        let mut k = 0.0;
        assert_eq!(
            median_of(5, || {
                k += 1.0;
                k
            }),
            4.0,
            "warm-up (1) is dropped, then 2..=6"
        );
    }

    #[test]
    fn arguments() {
        let p = |v: &[&str]| BenchArgs::parse(v.iter().map(|s| s.to_string()));
        let a = p(&["--json", "--ranks", "4", "--reps", "9"])
            .unwrap()
            .unwrap();
        assert_eq!((a.json, a.ranks, a.reps, a.quick), (true, 4, 9, false));
        assert_eq!(p(&["--help"]).unwrap(), None);
        assert!(p(&["--ranks"]).unwrap_err().contains("--ranks"));
        assert!(p(&["--ranks", "x"]).unwrap_err().contains("whole number"));
        assert!(p(&["--ranks", "1"]).unwrap_err().contains("at least 2"));
        assert!(p(&["--reps", "0"]).unwrap_err().contains("at least 1"));
        assert!(p(&["--bogus"]).unwrap_err().contains("--bogus"));
        assert!(a.wants("anything"));
        let only = p(&["--only", "rput_flood,rput_latency"]).unwrap().unwrap();
        assert!(only.wants("rput_flood") && only.wants("rput_latency"));
        assert!(!only.wants("rget_latency"));
    }

    #[test]
    fn cacheline_roundtrip_is_positive() {
        let ns = cacheline_roundtrip_ns(1000, 3);
        assert!(ns.is_finite() && ns > 0.0, "{ns}");
    }

    #[test]
    fn size_names() {
        assert_eq!(size_name(8), "8B");
        assert_eq!(size_name(4096), "4KiB");
        assert_eq!(size_name(4 << 20), "4MiB");
        assert_eq!(size_name(1000), "1000B");
    }
}
