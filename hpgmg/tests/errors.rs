//! Bad arguments end the run with one line on stderr and a non-zero exit status.

use std::process::Command;

fn fails(args: &[&str], message: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_hpgmg"))
        .args(args)
        .output()
        .expect("run hpgmg");
    assert!(!out.status.success(), "hpgmg {args:?} should fail");
    assert!(out.stdout.is_empty(), "no report for {args:?}");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(
        stderr.lines().count(),
        1,
        "one line for {args:?}: {stderr:?}"
    );
    assert!(
        stderr.contains(message),
        "{args:?}: {stderr:?} lacks {message:?}"
    );
}

#[test]
fn box_dim_too_small() {
    fails(&["3", "1"], "log2_box_dim must be at least 4");
}

#[test]
fn box_dim_too_large() {
    fails(&["10", "1"], "log2_box_dim must be less than 10");
}

#[test]
fn zero_boxes() {
    fails(&["5", "0"], "target_boxes_per_rank must be at least 1");
}

#[test]
fn negative_boxes() {
    fails(&["5", "-2"], "target_boxes_per_rank must be at least 1");
}

#[test]
fn not_a_number() {
    fails(&["five", "1"], "invalid value");
}

#[test]
fn missing_argument() {
    fails(&["5"], "required");
}

#[test]
fn library_errors() {
    use hpgmg::{HpgmgError, configure};
    assert_eq!(configure(3, 1, 1), Err(HpgmgError::BoxDimTooSmall));
    assert_eq!(configure(10, 1, 1), Err(HpgmgError::BoxDimTooLarge));
    assert_eq!(configure(4, 0, 1), Err(HpgmgError::TooFewBoxes));
    let cfg = configure(5, 8, 1).expect("5 8");
    assert_eq!(cfg.boxes_in_i, 2);
    // 27 boxes of 16^3 = 48^3, coarsening to 3^3.
    assert_eq!(configure(4, 27, 1).expect("4 27").boxes_in_i, 3);
    // 2 boxes fit only one per side.
    assert_eq!(configure(4, 7, 1).expect("4 7").boxes_in_i, 1);
}

#[test]
fn more_boxes_than_memory_allows() {
    // 1000 boxes of 512^3: about 11 TiB of vectors.
    fails(&["9", "1000"], "MiB of memory are available");
}

#[test]
fn more_ranks_than_boxes() {
    fails(
        &["4", "1", "--ranks", "2"],
        "2 ranks cannot hold a layout of 1 boxes",
    );
}

#[test]
fn zero_threads() {
    fails(
        &["4", "1", "--threads", "0"],
        "--threads must be at least 1",
    );
}

/// Runs `hpgmg 4 1 --ranks 8` with stdout into `stdout` and returns (status, stderr), failing
/// the test if it does not end within a minute.
fn run_with_stdout(stdout: std::process::Stdio) -> (std::process::ExitStatus, String) {
    use std::time::{Duration, Instant};
    let mut child = Command::new(env!("CARGO_BIN_EXE_hpgmg"))
        .args(["4", "1", "--ranks", "8"])
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run hpgmg");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for hpgmg") {
            break status;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("hpgmg hangs when its report cannot be written");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::io::read_to_string(child.stderr.take().expect("stderr")).expect("utf-8");
    (status, stderr)
}

/// Rank 0's report cannot be written (a full disk: /dev/full, or a reader that went away):
/// rank 0 stops the whole job with one line, instead of leaving the other ranks waiting for
/// it in their next reduction, forever.
#[test]
fn unwritable_report_stops_every_rank() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let (status, stderr) = run_with_stdout(full.into());
    assert!(!status.success(), "a report that cannot be written fails");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(
        stderr.contains("rank 0: writing the report to stdout: No space left on device"),
        "{stderr:?}"
    );
    // A pipe whose reader has gone once the report is under way (the reduction that hung).
    let (reader, writer) = std::io::pipe().expect("pipe");
    let drain = std::thread::spawn(move || {
        let mut reader = reader;
        let mut head = [0u8; 2000];
        std::io::Read::read_exact(&mut reader, &mut head).expect("the report's start");
    });
    let (status, stderr) = run_with_stdout(writer.into());
    drain.join().expect("reader");
    assert!(!status.success(), "a report that cannot be written fails");
    assert!(stderr.contains("Broken pipe"), "{stderr:?}");
}
