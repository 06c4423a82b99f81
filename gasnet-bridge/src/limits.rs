//! What this machine can hold: the one place where sizes, rank and thread counts are checked
//! against the memory and cores there are, so every program refuses an impossible request up
//! front with one line (memory needed and available), never an allocation abort.
//!
//! The rules (stated in README's "Running"):
//!
//! * **Memory**: a request fits when the bytes it needs are at most the memory available:
//!   `MemAvailable` of `/proc/meminfo`, lowered to the cgroup limit (`memory.max`) when one is
//!   set. Where neither can be read every request fits (the allocator has the last word).
//!   Segments are zeroed on allocation and their untouched pages cost nothing, so the check is
//!   conservative: a job whose segments *could* all be filled fits.
//! * **Ranks of one process** (smp conduit): at most [`MAX_RANKS_PER_CORE`] per core; each
//!   rank is a thread with a stack ([`RANK_STACK_BYTES`]) and a segment, and all of them must
//!   fit in memory. Under mpirun each process runs one rank and mpirun decides the count.
//! * **Threads inside a rank** (`--threads`): the same cap per core.

use std::fmt;

/// Most ranks (threads of one process, smp conduit) or worker threads per core.
pub const MAX_RANKS_PER_CORE: usize = 64;

/// The stack a rank's thread reserves (Rust's default for spawned threads), counted against
/// memory with the rank's segment.
pub const RANK_STACK_BYTES: usize = 2 << 20;

/// A request this machine cannot satisfy; `Display` is the one line to print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// More memory than is available.
    #[error(
        "{what} needs {} of memory, but only {} is available on this machine{hint}",
        Bytes(*needed),
        Bytes(*available)
    )]
    Memory {
        /// What needs it (`"--n 4000 (4 ranks)"`, `"PGAS_SEGMENT_MB=100000 x 4 ranks"`).
        what: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes available.
        available: u64,
        /// How to ask for less (`"; lower -s"`), or empty.
        hint: String,
    },
    /// More threads than the cap per core allows.
    #[error(
        "{what}{count} is more than this machine can run: at most {max} ({per_core} per core \
         x {cores} cores){hint}"
    )]
    TooMany {
        /// The option or variable with its separator (`--ranks `, `PGAS_RANKS=`).
        what: String,
        /// The count given.
        count: usize,
        /// The cap.
        max: usize,
        /// The cap per core ([`MAX_RANKS_PER_CORE`]).
        per_core: usize,
        /// Cores of this machine.
        cores: usize,
        /// What to do instead, or empty.
        hint: String,
    },
}

/// A byte count shown in the largest binary unit that keeps it at least 1 (`3.5 GiB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        if unit == 0 {
            write!(f, "{} bytes", self.0)
        } else {
            write!(f, "{value:.1} {}", UNITS[unit])
        }
    }
}

/// Cores this process may run on (at least 1).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The most ranks of one process, or worker threads, this machine runs:
/// [`MAX_RANKS_PER_CORE`] x [`cores`].
pub fn max_threads() -> usize {
    MAX_RANKS_PER_CORE.saturating_mul(cores())
}

/// Bytes of memory available to this process now, `None` if it cannot be read.
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let available = meminfo.as_deref().and_then(mem_available);
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    match (available, cgroup) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Refuses `needed` bytes (`None`: more than 64 bits count) for `what` if more than the
/// memory available; `hint` (e.g. `"; lower -s"`) ends the message.
pub fn check_memory(what: &str, needed: Option<u64>, hint: &str) -> Result<(), LimitError> {
    check_memory_against(what, needed, hint, available_memory())
}

/// [`check_memory`] against a given amount available (`None`: unknown, everything fits that
/// has a size).
pub fn check_memory_against(
    what: &str,
    needed: Option<u64>,
    hint: &str,
    available: Option<u64>,
) -> Result<(), LimitError> {
    match (needed, available) {
        (Some(n), Some(a)) if n <= a => Ok(()),
        (Some(_), None) => Ok(()),
        (needed, available) => Err(LimitError::Memory {
            what: what.into(),
            needed: needed.unwrap_or(u64::MAX),
            available: available.unwrap_or(0),
            hint: hint.into(),
        }),
    }
}

/// Refuses `count` threads asked for by `what` (`--ranks`, `--threads`) if above
/// [`max_threads`]; `hint` ends the message. A `what` ending in `=` (`PGAS_RANKS=`) is
/// printed with the count right after it.
pub fn check_threads(what: &str, count: usize, hint: &str) -> Result<(), LimitError> {
    check_threads_on(what, count, hint, cores())
}

/// [`check_threads`] on a machine of `cores` cores.
pub fn check_threads_on(
    what: &str,
    count: usize,
    hint: &str,
    cores: usize,
) -> Result<(), LimitError> {
    let max = MAX_RANKS_PER_CORE.saturating_mul(cores);
    if count <= max {
        return Ok(());
    }
    Err(LimitError::TooMany {
        what: if what.ends_with('=') {
            what.into()
        } else {
            format!("{what} ")
        },
        count,
        max,
        per_core: MAX_RANKS_PER_CORE,
        cores,
        hint: hint.into(),
    })
}

/// Bytes an smp job of `ranks` ranks with `segment_bytes` each needs: a segment and a stack
/// per rank (`None` past 64 bits).
pub fn smp_job_bytes(ranks: usize, segment_bytes: usize) -> Option<u64> {
    (segment_bytes as u64)
        .checked_add(RANK_STACK_BYTES as u64)?
        .checked_mul(ranks as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_is_read_in_bytes() {
        let text = "MemTotal:       16000000 kB\nMemFree: 1 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(mem_available(text), Some(2 << 20));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert!(available_memory().is_some_and(|a| a > 0));
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(Bytes(12).to_string(), "12 bytes");
        assert_eq!(Bytes(3 << 29).to_string(), "1.5 GiB");
        assert_eq!(Bytes(u64::MAX).to_string(), "16384.0 PiB");
    }

    #[test]
    fn memory_checks_name_needed_and_available() {
        assert!(check_memory_against("x", Some(10), "", Some(10)).is_ok());
        assert!(check_memory_against("x", Some(10), "", None).is_ok());
        let e = check_memory_against("-s 5000", Some(3 << 30), "; lower -s", Some(1 << 30))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "-s 5000 needs 3.0 GiB of memory, but only 1.0 GiB is available on this machine; \
             lower -s"
        );
        assert!(check_memory_against("x", None, "", None).is_err());
    }

    #[test]
    fn thread_counts_are_capped_per_core() {
        assert!(check_threads_on("--ranks", 128, "", 2).is_ok());
        let e = check_threads_on("--ranks", 129, "", 2)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--ranks 129 is more than this machine can run: at most 128 (64 per core x 2 cores)"
        );
        assert_eq!(smp_job_bytes(2, 8), Some(2 * (8 + (2 << 20))));
        assert_eq!(smp_job_bytes(usize::MAX, usize::MAX), None);
    }
}
