//! Fatal conditions of a run, mirroring the reference's `VolumeError` / `QStopError` aborts.

use thiserror::Error;

/// Why a run stopped before reaching its end time or cycle count.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LuleshError {
    /// An element's volume became zero or negative (reference `exit(VolumeError)`).
    #[error(
        "VolumeError: element {elem} has a non-positive volume ({volume:e}) in {stage} at cycle {cycle}"
    )]
    Volume {
        /// Local element index.
        elem: usize,
        /// The offending (relative or absolute) volume.
        volume: f64,
        /// Which phase of the step detected it.
        stage: &'static str,
        /// Cycle number at detection.
        cycle: i32,
    },
    /// The artificial viscosity of an element exceeded `qstop` (reference `exit(QStopError)`).
    #[error(
        "QStopError: element {elem} has artificial viscosity q = {q:e} above qstop = {qstop:e} at cycle {cycle}"
    )]
    QStop {
        /// Local element index.
        elem: usize,
        /// Its q value.
        q: f64,
        /// The limit it exceeded.
        qstop: f64,
        /// Cycle number at detection.
        cycle: i32,
    },
    /// The rank count cannot be arranged as a cube of equal blocks.
    #[error("Num processors must be a cube of an integer (1, 8, 27, ...), got {0}")]
    NotACube(i32),
    /// A rank's shared segment cannot hold its communication buffers.
    #[error("shared segment too small for the halo buffers: {0}")]
    Segment(String),
    /// `PGAS_SEGMENT_MB` asks for less than the problem size needs.
    #[error(
        "PGAS_SEGMENT_MB gives {have} bytes per rank, but this problem size needs {need} bytes \
         of shared segment per rank (unset PGAS_SEGMENT_MB to size it automatically)"
    )]
    SegmentTooSmall {
        /// Segment bytes configured.
        have: usize,
        /// Segment bytes needed.
        need: usize,
    },
    /// The ranks could not be started (bad `PGAS_*` variable, or a rank failed).
    #[error("cannot run the ranks: {0}")]
    Launch(String),
    /// The `--cd-config` file cannot be used (names the file, line and key).
    #[error("{0}")]
    CdConfig(String),
    /// A failure the Containment Domains could not contain (it escalated
    /// past the root CD), or the CD-managed job failed otherwise.
    #[error("the run stopped: {0}")]
    Cd(String),
    /// The thread pool for the parallel mode could not be created.
    #[error("cannot create a pool of {threads} threads: {reason}")]
    ThreadPool {
        /// Requested thread count.
        threads: usize,
        /// The underlying error text.
        reason: String,
    },
}

impl LuleshError {
    /// Process exit status the reference produces for this condition
    /// (`exit(-1)` is 255, `exit(-2)` is 254).
    pub fn exit_code(&self) -> i32 {
        match self {
            LuleshError::Volume { .. } => 255,
            LuleshError::QStop { .. } => 254,
            LuleshError::NotACube(_)
            | LuleshError::ThreadPool { .. }
            | LuleshError::Segment(_)
            | LuleshError::SegmentTooSmall { .. }
            | LuleshError::Launch(_)
            | LuleshError::CdConfig(_)
            | LuleshError::Cd(_) => 255,
        }
    }
}
