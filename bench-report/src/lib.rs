//! The report format of every benchmark in the project (see BENCHMARKS.md): one measurement
//! per line, a median over repetitions, and the ratio against a baseline measured in the
//! same run; JSON lines with `--json`, a readable table otherwise.

use std::fmt::Write as _;
use std::time::Instant;

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

    /// The JSON object of BENCHMARKS.md, on one line.
    pub fn to_json(&self) -> String {
        let mut s = String::from("{");
        let _ = write!(
            s,
            "\"bench\":{},\"case\":{},\"value\":{},\"unit\":{}",
            json_str(&self.bench),
            json_str(&self.case),
            json_num(self.value),
            json_str(&self.unit)
        );
        if let Some((name, value)) = &self.baseline {
            let _ = write!(
                s,
                ",\"baseline\":{},\"baseline_value\":{},\"ratio\":{}",
                json_str(name),
                json_num(*value),
                json_num(self.value / value)
            );
        }
        let _ = write!(
            s,
            ",\"better\":\"{}\",\"conduit\":{},\"ranks\":{}}}",
            self.better.as_str(),
            json_str(&self.conduit),
            self.ranks
        );
        s
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_num(v: f64) -> String {
    if v.is_finite() {
        // Four significant decimals are plenty for timings and keep lines short.
        let r = (v * 1e4).round() / 1e4;
        if r == 0.0 && v != 0.0 {
            format!("{v:e}")
        } else {
            format!("{r}")
        }
    } else {
        "null".into()
    }
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

/// The command line every benchmark accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchArgs {
    /// Print JSON lines instead of a table.
    pub json: bool,
    /// Rank count (`--ranks N`, default 2).
    pub ranks: usize,
    /// Repetitions after warm-up (`--reps N`, default 7, at least 5 as BENCHMARKS.md asks).
    pub reps: usize,
    /// Shorter runs for smoke tests (`--quick`).
    pub quick: bool,
}

impl BenchArgs {
    /// Parses `std::env::args`; prints usage and exits on `--help` or a bad argument.
    pub fn from_env(program: &str) -> BenchArgs {
        match BenchArgs::parse(std::env::args().skip(1)) {
            Ok(Some(a)) => a,
            Ok(None) => {
                println!("{}", usage(program));
                std::process::exit(0)
            }
            Err(e) => {
                eprintln!("{program}: {e}\n{}", usage(program));
                std::process::exit(2)
            }
        }
    }

    /// Parses arguments; `Ok(None)` means help was asked for.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<BenchArgs>, String> {
        let mut out = BenchArgs {
            json: false,
            ranks: 2,
            reps: 7,
            quick: false,
        };
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--json" => out.json = true,
                "--quick" => out.quick = true,
                "--ranks" | "--reps" => {
                    let v = it.next().ok_or_else(|| format!("{arg} needs a number"))?;
                    let n: usize = v
                        .parse()
                        .map_err(|_| format!("{arg} needs a whole number, got {v:?}"))?;
                    if arg == "--ranks" {
                        if n < 2 {
                            return Err("--ranks must be at least 2".into());
                        }
                        out.ranks = n;
                    } else {
                        if n < 1 {
                            return Err("--reps must be at least 1".into());
                        }
                        out.reps = n;
                    }
                }
                "-h" | "--help" => return Ok(None),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(Some(out))
    }
}

fn usage(program: &str) -> String {
    format!(
        "usage: {program} [--json] [--ranks N] [--reps N] [--quick]\n  \
         --json     one JSON object per line (BENCHMARKS.md)\n  \
         --ranks N  rank count (default 2)\n  \
         --reps N   repetitions after warm-up; the median is reported (default 7)\n  \
         --quick    fewer operations per repetition, for smoke tests"
    )
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
             \"baseline\":\"memcpy_8B\",\"baseline_value\":4,\"ratio\":7.8,\
             \"better\":\"lower\",\"conduit\":\"smp\",\"ranks\":2}"
        );
        let nb = Line::new("am_roundtrip", "short", 400.0, "ns", Better::Lower);
        assert!(!nb.to_json().contains("baseline"));
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert_eq!(json_num(f64::NAN), "null");
        assert_eq!(json_num(1.5e-7), "1.5e-7");
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
        assert!(p(&["--ranks"]).unwrap_err().contains("needs a number"));
        assert!(p(&["--ranks", "x"]).unwrap_err().contains("whole number"));
        assert!(p(&["--ranks", "1"]).is_err());
        assert!(p(&["--bogus"]).unwrap_err().contains("--bogus"));
    }

    #[test]
    fn size_names() {
        assert_eq!(size_name(8), "8B");
        assert_eq!(size_name(4096), "4KiB");
        assert_eq!(size_name(4 << 20), "4MiB");
        assert_eq!(size_name(1000), "1000B");
    }
}
