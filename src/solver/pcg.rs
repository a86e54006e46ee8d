//! Preconditioned conjugate gradients, matrix-free: written once for every solver that needs a
//! Krylov solve of an SPD system given only its product (the multilevel solver's Galerkin
//! levels and its full-space smoother; a Newton-PCG baseline).

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
        let alpha = rz / pap;
        for k in 0..n {
            x[k] += alpha * p[k];
            r[k] -= alpha * ap[k];
        }
        r_norm = dot(&r, &r).sqrt();
        precond(&r, &mut z);
        let rz_new = dot(&r, &z);
        let beta = rz_new / rz;
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
