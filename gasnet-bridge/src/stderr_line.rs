//! Whole lines on standard error: one `write` per line, so that lines printed by the ranks of
//! an mpirun job at the same moment never interleave. (Standard error is unbuffered, and
//! `eprintln!` may write one line in several pieces: "pgas: hang report: rank pgas: hang
//! report: rank 0 ..." was seen from two processes.) A line up to the pipe buffer size
//! (4 KiB) is written atomically to a pipe.

use std::io::Write;

/// Writes `args` and a newline to standard error in one write.
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    let mut line = std::fmt::format(args);
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
