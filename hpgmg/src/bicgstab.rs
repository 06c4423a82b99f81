//! The bottom solver: BiCGStab with diagonal (Jacobi) right preconditioning.

use crate::level::{Level, VECTOR_DINV, VECTOR_TEMP, VECTORS_RESERVED};
use crate::operator::{apply_op, residual};
use crate::vectors::{add_vectors, dot, mul_vectors, norm, scale_vector};

/// Extra vectors BiCGStab needs on the bottom level.
pub const BICGSTAB_NUM_VECTORS: usize = 8;
const MAX_ITERATIONS: usize = 200;

/// How the iteration ended (kept for diagnostics; the reference ignores it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BiCgStabOutcome {
    /// The residual norm dropped below the requested reduction (or to zero).
    Converged,
    /// A breakdown (zero pivot, infinite step, ...) stopped the iteration.
    Failed,
    /// The iteration limit was reached.
    IterationLimit,
}

/// Solves `A x = rhs` on `level` from the current `x` until the residual shrinks by
/// `desired_reduction_in_norm` (max norm), as the reference does.
pub fn bicgstab(
    level: &mut Level,
    x_id: usize,
    rhs_id: usize,
    b: f64,
    desired_reduction_in_norm: f64,
) -> BiCgStabOutcome {
    let r0_id = VECTORS_RESERVED;
    let r_id = VECTORS_RESERVED + 1;
    let p_id = VECTORS_RESERVED + 2;
    let q_id = VECTORS_RESERVED + 3;
    let s_id = VECTORS_RESERVED + 4;
    let t_id = VECTORS_RESERVED + 5;
    let ap_id = VECTORS_RESERVED + 6;
    let as_id = VECTORS_RESERVED + 7;
    residual(level, r0_id, x_id, rhs_id, b);
    scale_vector(level, r_id, 1.0, r0_id);
    scale_vector(level, p_id, 1.0, r0_id);
    let mut r_dot_r0 = dot(level, r_id, r0_id);
    let norm_of_r0 = norm(level, r_id);
    if r_dot_r0 == 0.0 || norm_of_r0 == 0.0 {
        return BiCgStabOutcome::Converged;
    }
    for _ in 0..MAX_ITERATIONS {
        level.krylov_iterations += 1;
        mul_vectors(level, q_id, 1.0, VECTOR_DINV, p_id);
        apply_op(level, ap_id, q_id, b);
        let ap_dot_r0 = dot(level, ap_id, r0_id);
        if ap_dot_r0 == 0.0 {
            return BiCgStabOutcome::Failed;
        }
        let alpha = r_dot_r0 / ap_dot_r0;
        if alpha.is_infinite() {
            return BiCgStabOutcome::Failed;
        }
        add_vectors(level, x_id, 1.0, x_id, alpha, q_id);
        add_vectors(level, s_id, 1.0, r_id, -alpha, ap_id);
        let norm_of_s = norm(level, s_id);
        if norm_of_s == 0.0 || norm_of_s < desired_reduction_in_norm * norm_of_r0 {
            return BiCgStabOutcome::Converged;
        }
        mul_vectors(level, t_id, 1.0, VECTOR_DINV, s_id);
        apply_op(level, as_id, t_id, b);
        let as_dot_as = dot(level, as_id, as_id);
        let as_dot_s = dot(level, as_id, s_id);
        if as_dot_as == 0.0 {
            return BiCgStabOutcome::Converged;
        }
        let omega = as_dot_s / as_dot_as;
        if omega == 0.0 || omega.is_infinite() {
            return BiCgStabOutcome::Failed;
        }
        add_vectors(level, x_id, 1.0, x_id, omega, t_id);
        add_vectors(level, r_id, 1.0, s_id, -omega, as_id);
        let norm_of_r = norm(level, r_id);
        if norm_of_r == 0.0 || norm_of_r < desired_reduction_in_norm * norm_of_r0 {
            return BiCgStabOutcome::Converged;
        }
        let r_dot_r0_new = dot(level, r_id, r0_id);
        if r_dot_r0_new == 0.0 {
            return BiCgStabOutcome::Failed;
        }
        let beta = (r_dot_r0_new / r_dot_r0) * (alpha / omega);
        if beta.is_infinite() {
            return BiCgStabOutcome::Failed;
        }
        add_vectors(level, VECTOR_TEMP, 1.0, p_id, -omega, ap_id);
        add_vectors(level, p_id, 1.0, r_id, beta, VECTOR_TEMP);
        r_dot_r0 = r_dot_r0_new;
    }
    BiCgStabOutcome::IterationLimit
}
