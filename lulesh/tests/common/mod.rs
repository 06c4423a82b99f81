//! What the test files of lulesh share: the 8-rank fault configuration that runs on smp
//! (tests/cd.rs) and under mpirun (tests/mpi.rs), temporary files, and checking a report's
//! lines.
#![allow(dead_code)] // each test file uses its own part

#[path = "../../../examples/tests/common/kills.rs"]
pub mod kills;
#[path = "../../../examples/tests/common/ulfm_job.rs"]
pub mod ulfm_job;

use std::path::PathBuf;

/// Soft errors in the first cycle (no time-step reduction before its first
/// exchange, so ranks leaving the agreement early send into ranks still in
/// it), in the middle and in the last cycle; two rank losses (segment and
/// local copies wiped), the step's copies kept at a buddy.
pub const EIGHT_RANK_FAULTS: &str = r#"
seed = 5
[cd.step]
medium = "buddy"
inject = { at = [
    { rank = 2, iteration = 0, kind = "soft" },
    { rank = 1, iteration = 17, kind = "soft" },
    { rank = 3, iteration = 40, kind = "rank_loss" },
    { rank = 0, iteration = 100, kind = "rank_loss" },
    { rank = 6, iteration = 230, kind = "soft" },
] }
"#;

/// A file in the temporary directory, removed on drop.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(name: &str, text: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("lulesh-cd-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("write the temporary file");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Fails the test, showing `text`, unless it holds every one of `lines`.
pub fn assert_has_lines(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}
