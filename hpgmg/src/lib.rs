//! HPGMG-FV: a bit-exact port of the default configuration of the HPGMG finite-volume
//! benchmark (fv4 operator, GSRB smoother, FMG F-cycle, BiCGStab bottom), on one rank or
//! many over `pgas` ([`driver`], [`comm`]), with threads per rank ([`kernels`]), strict
//! Containment Domains per solve and per level ([`mg`]) and relaxed ones per smoother call
//! ([`containment`]).

// Stencil kernels index several arrays with one shared index, mirroring the reference's
// loops (and so its floating-point order); iterator rewrites would obscure that.
#![allow(clippy::needless_range_loop)]

pub mod bench;
pub mod bicgstab;
pub mod boundary;
pub mod comm;
pub mod containment;
pub mod driver;
pub mod error;
pub mod format;
pub mod held_report;
pub mod interpolation;
pub mod kernels;
pub mod level;
pub mod mg;
pub mod operator;
pub mod problem;
pub mod progress;
pub mod restriction;
pub mod transfer;
pub mod vectors;

pub use bench::{Config, Report, configure, run};
pub use error::HpgmgError;
