//! Containment Domains for pgas programs: a tree of CDs per rank, each preserving the state it
//! needs, detecting errors, and on failure restoring and re-executing only itself, escalating
//! to its parent when it cannot contain the failure.
//!
//! ```
//! use cd_runtime as cd;
//! use gasnet_bridge::LaunchConfig;
//!
//! let config = cd::CdConfig::default()
//!     .with_cd("step", "inject = { at = [{ rank = 1, iteration = 2, kind = \"soft\" }] }")
//!     .unwrap();
//! let job = LaunchConfig::new(2).segment_bytes(1 << 20);
//! let out = cd::launch(&job, config, pgas::RpcTable::new(), || {
//!     let mut x = vec![1.0f64; 4];
//!     for _ in 0..5 {
//!         cd::strict("step", |c| {
//!             c.preserve("x", &mut x);
//!             for v in x.iter_mut() {
//!                 *v *= 2.0; // re-executed after a failure: restored first, so never doubled twice
//!             }
//!             Ok(())
//!         })?;
//!     }
//!     Ok(x[0])
//! })
//! .unwrap();
//! assert_eq!(out.results, vec![32.0, 32.0]);
//! assert_eq!(out.report.cd("step").unwrap().reexecutions, 2, "both ranks re-executed once");
//! ```

// Unsafe code only where a function allows it and says why (clock.rs, private_files.rs).
#![deny(unsafe_code)]

mod buddy;
mod buffer_pool;
pub mod cd;
pub mod checkpoint;
mod checksum;
mod clock;
pub mod config;
pub mod error;
mod file_medium;
mod frame;
/// The fault injector's decision, public for tests (feature `testing`).
#[cfg(feature = "testing")]
pub mod injector;
#[cfg(not(feature = "testing"))]
mod injector;
pub mod interval;
mod launch;
mod macro_support;
mod private_files;
mod recovery;
pub mod relaxed;
pub mod report;
mod restart;
pub mod resume;
pub mod rng;
mod runtime;
mod spill;
pub mod strict;
/// Observability for tests (feature `testing`).
#[cfg(feature = "testing")]
pub mod testing;
pub mod xor;
mod xor_entries;

pub use cd::{Cd, Preservable};
/// Runs a function's body as a relaxed child CD (recovering on this rank alone, by replaying
/// its log), preserving chosen arguments and declaring the access classes of `GlobalPtr<T>`
/// arguments: `#[cd::relaxed]`, `#[cd::relaxed(preserve(a), private(b = len),
/// privatized(c = len), name = "...")]`. `len` is the region's length in elements, any `usize`
/// expression (it may name other parameters), evaluated at the start of each execution.
///
/// The attribute (macro namespace) and the function [`relaxed()`](fn@relaxed) (value
/// namespace) share the name: `#[cd::relaxed]` and `cd::relaxed("name", |c| ...)` both work
/// after `use cd_runtime as cd;`, as for `strict`.
///
/// ```
/// use cd_runtime as cd;
/// use gasnet_bridge::LaunchConfig;
/// use pgas::GlobalPtr;
///
/// #[cd::relaxed(preserve(x), private(scratch = x.len()))]
/// fn step(x: &mut Vec<f64>, scratch: GlobalPtr<f64>) -> Result<f64, cd::CdError> {
///     for v in x.iter_mut() {
///         *v *= 2.0; // restored before a re-execution, so never doubled twice
///     }
///     scratch.write_local_slice(x).unwrap(); // private: no other CD touches it
///     Ok(x.iter().sum())
/// }
///
/// let config = cd::CdConfig::default()
///     .with_cd("step", "inject = { at = [{ rank = 0, iteration = 1, kind = \"soft\" }] }")
///     .unwrap();
/// let job = LaunchConfig::new(2).segment_bytes(1 << 20);
/// let out = cd::launch(&job, config, pgas::RpcTable::new(), || {
///     let scratch = pgas::new_array::<f64>(4).unwrap();
///     let mut x = vec![1.0f64; 4];
///     let mut sum = 0.0;
///     for _ in 0..3 {
///         sum = step(&mut x, scratch)?;
///     }
///     // The function of the same name: a relaxed CD from a closure.
///     cd::relaxed("check", |_| {
///         cd::check!(x[0] == 8.0);
///         Ok(())
///     })?;
///     Ok(sum)
/// })
/// .unwrap();
/// assert_eq!(out.results, vec![32.0, 32.0]);
/// assert_eq!(out.report.cd("step").unwrap().reexecutions, 1, "rank 0 alone re-executed");
/// ```
pub use cd_macros::relaxed;
/// Runs a function's body as a strict child CD, preserving chosen arguments: `#[cd::strict]`,
/// `#[cd::strict(preserve(a, b))]`, with options `name = "..."`, `team = <expr>`, `local`.
///
/// ```
/// use cd_runtime as cd;
/// use gasnet_bridge::LaunchConfig;
///
/// #[cd::strict(preserve(x))]
/// fn step(x: &mut [f64]) -> Result<(), cd::CdError> {
///     for v in x.iter_mut() {
///         *v *= 2.0; // restored before a re-execution, so never doubled twice
///     }
///     Ok(())
/// }
///
/// let config = cd::CdConfig::default()
///     .with_cd("step", "inject = { at = [{ rank = 0, iteration = 1, kind = \"soft\" }] }")
///     .unwrap();
/// let job = LaunchConfig::new(2).segment_bytes(1 << 20);
/// let out = cd::launch(&job, config, pgas::RpcTable::new(), || {
///     let mut x = [1.0f64; 4];
///     for _ in 0..3 {
///         step(&mut x)?;
///     }
///     Ok(x[3])
/// })
/// .unwrap();
/// assert_eq!(out.results, vec![8.0, 8.0]);
/// assert_eq!(out.report.cd("step").unwrap().reexecutions, 2);
/// ```
pub use cd_macros::strict;
pub use checkpoint::format::{CheckpointError, CheckpointPolicy, Manifest, RestartFrom};
pub use checkpoint::restart::restarted;
pub use config::{
    BuddyDomain, CdConfig, CdKindSetting, CdSettings, ExactFault, ExactFaults, FaultKind,
    Injection, Interval, LogMedium, Medium, UNREACHED_LINES,
};
pub use error::{CdError, CdLaunchError, ConfigError, FaultKinds};
pub use interval::{daly_steps, strict_steps};
pub use launch::{CdOutcome, launch, launch_from_env};
pub use relaxed::{ClassificationError, relaxed};
pub use report::{CdStats, FailureRecord, Report};
pub use resume::{ResumeSource, Resumed};
pub use rng::{CdRng, rng};
pub use strict::{strict, strict_local, strict_on};

pub use macro_support::HoldsGlobalPtr;
#[doc(hidden)]
pub use macro_support::{
    __HoldsPointer, __NoPointer, __Probe, __ProbeHoldsPointer, __ProbeNoPointer, __preserve_arg,
    __preserve_cells, __private_arg, __privatized_arg, PreserveArg, RegionArg,
};

/// The innermost CD of this rank (the root CD outside any `strict` call).
pub fn current() -> Cd {
    runtime::with(|rt| Cd { frame: rt.top() })
}

/// Records a detected failure in the innermost CD if `ok` is false; returns `ok`. Used by
/// [`check!`].
#[doc(hidden)]
pub fn __check(ok: bool, what: &str, file: &str, line: u32) -> bool {
    if !ok {
        runtime::with(|rt| {
            rt.top()
                .fail(FaultKinds::SOFT, format!("{what} ({file}:{line})"))
        });
    }
    ok
}

/// Checks a condition in the innermost CD: if false, the CD fails at completion and
/// re-executes (the body goes on, so ranks of a multi-rank CD stay in step). Evaluates to the
/// condition's value.
#[macro_export]
macro_rules! check {
    ($cond:expr) => {
        $crate::__check($cond, concat!("check failed: ", stringify!($cond)), file!(), line!())
    };
    ($cond:expr, $($msg:tt)+) => {
        $crate::__check($cond, &format!($($msg)+), file!(), line!())
    };
}
