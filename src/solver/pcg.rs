//! Preconditioned conjugate gradients, matrix-free: written once for every solver that needs a
//! Krylov solve of an SPD system given only its product (the multilevel solver's Galerkin
//! levels and its full-space smoother; a Newton-PCG baseline).
//!
//! Two update rules for the search direction ([`Beta`]): the classical Fletcher–Reeves
//! `β = r_{k+1}ᵀz_{k+1} / r_kᵀz_k`, right for a fixed SPD preconditioner, and the flexible
//! Polak–Ribière `β = r_{k+1}ᵀ(z_{k+1} − z_k) / r_kᵀz_k` (Golub and Ye 1999; Notay 2000), for a
//! preconditioner that is not exactly symmetric or changes between iterations — the JGS2 map
//! away from rest ([`crate::solver::jgs2::Jgs2Preconditioner`]). With a symmetric fixed
//! preconditioner both give the same iterates in exact arithmetic (`r_{k+1}ᵀz_k = 0` there);
//! otherwise Fletcher–Reeves loses the conjugacy the recurrence assumes and can stall, while
//! Polak–Ribière keeps local conjugacy with the previous direction. In both the step length
//! is the exact minimiser of the quadratic along the search direction, so the quadratic
//! decreases monotonically whatever the preconditioner.

/// Outcome of [`pcg`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PcgOutcome {
    /// Iterations taken (operator products after the initial residual).
    pub iterations: usize,
    /// ‖b − A x‖ / ‖b‖ at the end (the recurrence's residual; 0 when `b` = 0).
    pub relative_residual: f64,
    /// The curvature pᵀAp of a search direction was not positive (A not SPD on that
    /// direction, or round-off at convergence): the iteration stopped there, keeping `x`.
    pub breakdown: bool,
}

/// How the next search direction `p ← z + β p` is formed (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Beta {
    /// `β = r_{k+1}ᵀz_{k+1} / r_kᵀz_k`: classical PCG, for a fixed SPD preconditioner.
    #[default]
    FletcherReeves,
    /// `β = r_{k+1}ᵀ(z_{k+1} − z_k) / r_kᵀz_k`: flexible PCG, for a preconditioner that is
    /// not exactly symmetric (one more vector and dot product per iteration). When
    /// `r_kᵀz_k ≤ 0` (the preconditioner not positive on that residual) it restarts, β = 0.
    PolakRibiere,
}

/// Solves `A x = b` by PCG from the initial guess in `x`, with `apply(v, out)` setting
/// `out = A v` and `precond(r, out)` setting `out = P⁻¹ r` (P SPD).
///
/// Stops after `max_iterations` products, or once ‖r‖ ≤ `tolerance`·‖b‖ (`tolerance` = 0:
/// exactly `max_iterations`, the fixed-count smoother of the multilevel solver). The residual
/// is the recurrence's, not recomputed: at the tolerances used here (≥ 1e-12) the drift is
/// below them. Starting from `x = 0` every iterate is a descent direction for the quadratic
/// ½xᵀAx − bᵀx, so `bᵀx > 0` whenever `x ≠ 0`.
pub fn pcg(
    apply: &mut dyn FnMut(&[f64], &mut [f64]),
    precond: &dyn Fn(&[f64], &mut [f64]),
    b: &[f64],
    x: &mut [f64],
    tolerance: f64,
    max_iterations: usize,
) -> PcgOutcome {
    pcg_with(
        apply,
        precond,
        b,
        x,
        tolerance,
        max_iterations,
        Beta::FletcherReeves,
    )
}

/// [`pcg`] with the direction update `beta` ([`Beta::PolakRibiere`]: flexible PCG; the step
/// length is then `rᵀp / pᵀAp`, the exact line minimiser, which equals `rᵀz / pᵀAp` in
/// classical PCG but not when the preconditioner is not symmetric).
pub fn pcg_with(
    apply: &mut dyn FnMut(&[f64], &mut [f64]),
    precond: &dyn Fn(&[f64], &mut [f64]),
    b: &[f64],
    x: &mut [f64],
    tolerance: f64,
    max_iterations: usize,
    beta_rule: Beta,
) -> PcgOutcome {
    let flexible = beta_rule == Beta::PolakRibiere;
    let n = b.len();
    let b_norm = dot(b, b).sqrt();
    if b_norm == 0.0 {
        x.fill(0.0);
        return PcgOutcome::default();
    }
    let mut r = vec![0.0; n];
    let mut ap = vec![0.0; n];
    if x.iter().any(|&v| v != 0.0) {
        apply(x, &mut ap);
        for k in 0..n {
            r[k] = b[k] - ap[k];
        }
    } else {
        r.copy_from_slice(b);
    }
    let mut z = vec![0.0; n];
    let mut z_old = if flexible { vec![0.0; n] } else { Vec::new() };
    precond(&r, &mut z);
    let mut p = z.clone();
    let mut rz = dot(&r, &z);
    let mut r_norm = dot(&r, &r).sqrt();
    let mut breakdown = false;
    let mut done = 0;
    while done < max_iterations && r_norm > tolerance * b_norm {
        apply(&p, &mut ap);
        done += 1;
        let pap = dot(&p, &ap);
        if pap.is_nan() || pap <= 0.0 || !rz.is_finite() {
            breakdown = true;
            break;
        }
        let alpha = if flexible { dot(&r, &p) } else { rz } / pap;
        for k in 0..n {
            x[k] += alpha * p[k];
            r[k] -= alpha * ap[k];
        }
        r_norm = dot(&r, &r).sqrt();
        if flexible {
            std::mem::swap(&mut z, &mut z_old);
        }
        precond(&r, &mut z);
        let rz_new = dot(&r, &z);
        let beta = if !flexible {
            rz_new / rz
        } else if rz > 0.0 {
            (rz_new - dot(&r, &z_old)) / rz
        } else {
            0.0
        };
        rz = rz_new;
        for k in 0..n {
            p[k] = z[k] + beta * p[k];
        }
    }
    PcgOutcome {
        iterations: done,
        relative_residual: r_norm / b_norm,
        breakdown,
    }
}

/// Euclidean dot product.
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
