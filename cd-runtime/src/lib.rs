//! Containment Domains for pgas programs: a tree of CDs per rank, each preserving the state it
//! needs, detecting errors, and on failure restoring and re-executing only itself, escalating
//! to its parent when it cannot contain the failure.
//!
//! A program depends on `pgas` and `cd-runtime`; [`launch`] runs it like `pgas::launch`, with
//! a [`CdConfig`] (TOML: media, retries, injected faults) and a [`Report`] of what the CDs did.
//!
//! # Strict CDs
//!
//! A strict CD spans its parent's ranks: a failure on any of them re-executes it on all, from
//! the state it preserved. Here rank 1 suffers an injected soft error in the second step:
//!
//! ```
//! use cd_runtime as cd;
//! use pgas::LaunchConfig;
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
//!
//! The attribute form [`macro@strict`] runs a function's body as the CD and preserves the named
//! parameters: `preserve(x)` a value, `preserve(u = len)` the cells a `GlobalPtr` points to:
//!
//! ```
//! use cd_runtime as cd;
//! use pgas::{GlobalPtr, LaunchConfig};
//!
//! #[cd::strict(preserve(u = n))]
//! fn smooth(u: GlobalPtr<f64>, n: usize) -> Result<f64, cd::CdError> {
//!     let mut v = vec![0.0; n];
//!     u.read_local_slice(&mut v).unwrap();
//!     for x in v.iter_mut() {
//!         *x = *x * 0.5 + 1.0; // not idempotent: right only on restored cells
//!     }
//!     u.write_local_slice(&v).unwrap();
//!     Ok(v.iter().sum())
//! }
//!
//! let config = cd::CdConfig::default()
//!     .with_cd("smooth", "inject = { at = [{ rank = 0, iteration = 1, kind = \"soft\" }] }")
//!     .unwrap();
//! let job = LaunchConfig::new(2).segment_bytes(1 << 20);
//! let out = cd::launch(&job, config, pgas::RpcTable::new(), || {
//!     let u = pgas::new_array::<f64>(4).unwrap();
//!     u.write_local_slice(&[4.0; 4]).unwrap(); // 4 -> 3 -> 2.5 -> 2.25
//!     let mut sum = 0.0;
//!     for _ in 0..3 {
//!         sum = smooth(u, 4)?;
//!     }
//!     Ok(sum)
//! })
//! .unwrap();
//! assert_eq!(out.results, vec![9.0, 9.0]);
//! assert_eq!(out.report.cd("smooth").unwrap().reexecutions, 2);
//! ```
//!
//! # Relaxed CDs
//!
//! A relaxed CD begins and completes on its own rank and logs its communication; after a
//! failure that rank alone re-executes, replaying what others wrote into it, while the other
//! ranks run on. Here rank 1 receives its left neighbour's value by `rput` in every step, and
//! re-executes its second step alone:
//!
//! ```
//! use cd_runtime as cd;
//! use pgas::{LaunchConfig, barrier, rank_me, rank_n, world};
//!
//! let config = cd::CdConfig::default()
//!     .with_cd("halo", "inject = { at = [{ rank = 1, iteration = 2, kind = \"soft\" }] }")
//!     .unwrap();
//! let job = LaunchConfig::new(3).segment_bytes(1 << 20);
//! let out = cd::launch(&job, config, pgas::RpcTable::new(), || {
//!     let inbox = pgas::new_array::<u64>(4).unwrap();
//!     let boxes = pgas::allgather(inbox).wait();
//!     let right = boxes[(rank_me() + 1) % rank_n()];
//!     let mut sent = 0u64;
//!     for step in 0..4 {
//!         cd::relaxed("halo", |c| {
//!             c.preserve("sent", &mut sent);
//!             sent += 1; // restored before rank 1's re-execution, so counted once
//!             pgas::rput((rank_me() * 10 + step) as u64, right + step).wait();
//!             Ok(())
//!         })?;
//!     }
//!     barrier();
//!     let mut got = [0u64; 4];
//!     inbox.read_local_slice(&mut got).unwrap();
//!     Ok((sent, got))
//! })
//! .unwrap();
//! assert_eq!(out.results[0], (4, [20, 21, 22, 23]));
//! assert_eq!(out.results[1], (4, [0, 1, 2, 3]));
//! assert_eq!(out.results[2], (4, [10, 11, 12, 13]));
//! let halo = out.report.cd("halo").unwrap();
//! assert_eq!((halo.reexecutions, halo.failures[0].ranks.as_slice()), (1, &[1][..]));
//! ```
//!
//! [`macro@relaxed`] is its attribute form, which also declares the access classes of
//! `GlobalPtr` parameters (`private(x = len)`, `privatized(x = len)`).

// Unsafe code only where a function allows it and says why (clock.rs, private_files.rs).
#![deny(unsafe_code)]

mod buddy;
mod buffer_pool;
pub mod cd;
pub mod checkpoint;
mod checksum;
mod clock;
pub mod config;
mod daly;
pub mod error;
mod file_medium;
mod frame;
mod generations;
/// The fault injector's decision, public for tests (feature `testing`).
#[cfg(feature = "testing")]
pub mod injector;
#[cfg(not(feature = "testing"))]
mod injector;
pub mod interval;
mod launch;
mod macro_support;
mod private_files;
mod real_loss;
mod recovery;
pub mod relaxed;
pub mod report;
pub mod resume;
pub mod rng;
mod runtime;
mod setup_once;
mod setup_values;
mod spill;
pub mod strict;
/// Observability for tests (feature `testing`).
#[cfg(feature = "testing")]
pub mod testing;
pub mod timeline;
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
/// use pgas::{GlobalPtr, LaunchConfig};
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
/// use pgas::LaunchConfig;
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
pub use checkpoint::format::{
    CheckpointError, CheckpointEvery, CheckpointPolicy, Manifest, RestartFrom,
};
pub use checkpoint::restart::{restarted, restarted_value};
pub use config::{
    BuddyDomain, CdConfig, CdKindSetting, CdSettings, Cluster, ExactFault, ExactFaults, FaultKind,
    Injection, Interval, LogDurable, LogMedium, Medium, UNREACHED_LINES,
};
pub use error::{CdError, CdLaunchError, ConfigError, FaultKinds};
pub use interval::{daly_steps, strict_steps};
pub use launch::{CdOutcome, launch, launch_from_env};
pub use relaxed::{ClassificationError, relaxed};
pub use report::{CdStats, FailureRecord, Report};
pub use resume::{ResumeSource, Resumed};
pub use rng::{CdRng, rng};
pub use setup_once::setup_once;
pub use strict::{strict, strict_local, strict_on};

pub use macro_support::HoldsGlobalPtr;
#[doc(hidden)]
pub use macro_support::{
    __HoldsPointer, __NoPointer, __Probe, __ProbeHoldsPointer, __ProbeNoPointer, __preserve_arg,
    __preserve_cells, __private_arg, __privatized_arg, CellsArg, PreserveArg, RegionArg,
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
