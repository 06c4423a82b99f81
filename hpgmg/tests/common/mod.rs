//! Helpers shared by the hpgmg tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The hpgmg binary with the job-shaping variables removed.
pub fn hpgmg() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hpgmg"));
    c.env_remove("PGAS_RANKS")
        .env_remove("PGAS_SEGMENT_MB")
        .env_remove("PGAS_CONDUIT");
    c
}

/// Stdout of a successful run.
pub fn stdout_of(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Runs `hpgmg args` and returns stdout, asserting success.
pub fn run(args: &[&str]) -> String {
    let out = hpgmg().args(args).output().expect("run hpgmg");
    stdout_of(out, &format!("hpgmg {args:?}"))
}

/// Runs `hpgmg args` and returns stdout, asserting success within `limit` (a run that
/// outlives it, e.g. a rank waiting forever for a message, is killed and fails the test).
pub fn run_within(args: &[&str], limit: Duration) -> String {
    let what = format!("hpgmg {args:?}");
    let mut child = hpgmg()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run hpgmg");
    // Read the pipes on threads so a chatty child never blocks on a full pipe.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut v).map(|_| v)
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut v).map(|_| v)
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for hpgmg") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = Output {
        status,
        stdout: out.join().expect("reader").expect("stdout"),
        stderr: err.join().expect("reader").expect("stderr"),
    };
    stdout_of(output, &what)
}

/// The report without timings (and without the CD report that may follow it).
pub fn physics(out: &str) -> Vec<String> {
    let end = out.find("CD report").unwrap_or(out.len());
    out[..end]
        .lines()
        .filter(|l| !l.contains("seconds") && !l.contains("DOF/s"))
        .map(String::from)
        .collect()
}

/// A file in the temporary directory, removed on drop.
pub struct TempFile(PathBuf);

impl TempFile {
    /// Writes `text` to a file of the test process named after `name`.
    pub fn new(name: &str, text: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("hpgmg-cd-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("write the temporary file");
        TempFile(path)
    }

    /// The path, as an argument.
    pub fn arg(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The Richardson section's f-cycle norms (h, 2h, 4h), error line and order line.
pub fn richardson(stdout: &str) -> Vec<String> {
    let section = stdout
        .split("===== Richardson error analysis")
        .nth(1)
        .unwrap_or_else(|| panic!("no Richardson section in\n{stdout}"));
    section
        .lines()
        .filter_map(|l| {
            if let Some(rest) = l.strip_prefix("FMGSolve... f-cycle     ") {
                Some(rest.split("  done").next().unwrap_or(rest).to_string())
            } else if l.starts_with("  h=") || l.starts_with("  order=") {
                Some(l.to_string())
            } else {
                None
            }
        })
        .collect()
}

/// Every solve's norm line (warm-up, timed, Richardson), without the timing.
pub fn all_norms(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("FMGSolve... f-cycle     "))
        .map(|l| l.split("  done").next().unwrap_or(l).to_string())
        .collect()
}

/// Every solve's residual norms (`norm=...` of the f-cycle line, then of each `v-cycle=`
/// line that follows it), in solve order.
pub fn histories(stdout: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    for line in stdout.lines() {
        let norm = || {
            let at = line.find("norm=").expect("a norm");
            line[at..].split_whitespace().next().unwrap().to_string()
        };
        if line.starts_with("FMGSolve... f-cycle     norm=") {
            out.push(vec![norm()]);
        } else if line.starts_with("            v-cycle=") {
            out.last_mut().expect("an f-cycle line first").push(norm());
        }
    }
    out
}

/// The reference's `5 8` (8 boxes of 32^3): f-cycle norms at h, 2h, 4h, error, order.
pub const REF_5_8: [&str; 5] = [
    "norm=6.934041112727218e-05  rel=7.171390380025997e-05",
    "norm=8.424292969434477e-04  rel=9.623268051667912e-04",
    "norm=2.464277273032022e-03  rel=4.100600716814234e-03",
    "  h=1.562500000000000e-02  ||error||=2.889820931067759e-06",
    "  order=3.247",
];

/// The reference's `5 1` (one 32^3 box).
pub const REF_5_1: [&str; 5] = [
    "norm=8.412949740638220e-04  rel=9.615951595958925e-04",
    "norm=2.463322558838356e-03  rel=4.100446295609216e-03",
    "norm=7.615331127701457e-04  rel=4.130925627080076e-03",
    "  h=3.125000000000000e-02  ||error||=2.741524561805046e-05",
    "  order=1.966",
];

/// `6 8` (8 boxes of 64^3, 128^3): the norm at h, the error and the order are the
/// reference's (README); the norms at 2h and 4h (F restricted from h, so not those of `5 8`)
/// are this port's, which the reference's error and order depend on.
pub const REF_6_8: [&str; 5] = [
    "norm=7.454823500507857e-06  rel=7.517923682618053e-06",
    "norm=6.934667596747435e-05  rel=7.171755554914199e-05",
    "norm=8.424967268479966e-04  rel=9.623699915968146e-04",
    "  h=7.812500000000000e-03  ||error||=2.342436689257467e-07",
    "  order=3.625",
];

/// Asserts the Richardson lines.
pub fn assert_richardson(stdout: &str, expected: &[&str; 5], what: &str) {
    assert_eq!(
        richardson(stdout),
        expected.map(String::from).to_vec(),
        "{what}"
    );
}
