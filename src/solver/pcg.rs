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
//!
//! [`BackendPcg`] is the classical loop on a [`Backend`]'s vectors (the multilevel direction on a
//! device): the same recurrence, with every vector update and dot product recorded through
//! [`Backend::combine`] / [`Backend::dots`] — on a device the coefficients `α = rz/pAp` and
//! `β = rz'/rz` are ratios of scalar slots formed there, never crossing the bus — and the
//! host reading three scalars per iteration to decide when to stop.

use crate::error::Result;
use crate::solver::backend::{Backend, Coef, Combine, Dots};

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

/// A host f64 routine `r ↦ c(r)` whose output is added to a preconditioner's
/// ([`BackendPcg::solve`]; the multilevel SMS level's affine coarse correction).
pub type HostCorrection<'a> = dyn FnMut(&[f64]) -> Result<Vec<f64>> + 'a;

/// Records `out ← A v` (or `out ← P⁻¹ v`) on a backend: `(backend, v, out)`.
pub type BackendOp<'a, B> =
    dyn FnMut(&mut B, <B as Backend>::Vector, <B as Backend>::Vector) -> Result<()> + 'a;

/// Classical PCG ([`pcg`]'s loop, [`Beta::FletcherReeves`]) on a backend's vectors, its
/// scratch vectors and scalar slots allocated once (see the module docs).
pub struct BackendPcg<B: Backend> {
    r: B::Vector,
    z: B::Vector,
    ap: B::Vector,
    p: [B::Vector; 2],
    corr: B::Vector,
    rz: [B::Scalar; 2],
    pap: B::Scalar,
    rr: B::Scalar,
    bb: B::Scalar,
}

impl<B: Backend> BackendPcg<B> {
    /// Scratch for per-vertex fields (`flat` = `None`) or for flat vectors of `len` numbers
    /// ([`Backend::flat_vector`]).
    pub fn new(backend: &mut B, flat: Option<usize>) -> Result<Self> {
        let mut vector = |label: &str| match flat {
            None => backend.vector(label),
            Some(len) => backend.flat_vector(label, len),
        };
        let (r, z, ap) = (vector("pcg r")?, vector("pcg z")?, vector("pcg Ap")?);
        let p = [vector("pcg p")?, vector("pcg p'")?];
        let corr = vector("pcg host correction")?;
        Ok(BackendPcg {
            r,
            z,
            ap,
            p,
            corr,
            rz: [backend.scalar()?, backend.scalar()?],
            pap: backend.scalar()?,
            rr: backend.scalar()?,
            bb: backend.scalar()?,
        })
    }

    /// `z += c(r)` by the host routine (r crosses the bus, c(r) back).
    fn correct(&self, be: &mut B, correction: &mut HostCorrection) -> Result<()> {
        be.host_solve(self.r, self.corr, &mut |buf: &mut [f64]| {
            let c = correction(buf)?;
            buf.copy_from_slice(&c);
            Ok(())
        })?;
        be.combine(self.z, Coef::constant(1.0), self.corr, Combine::Add, None)
    }

    /// Solves `A x = b` from the guess in `x` (`warm`; otherwise from 0, `x` overwritten) with
    /// `apply` recording `A v` and `precond` recording `P⁻¹ r`, plus `correction(r)` when
    /// given; stops as [`pcg`] does: after `max_iterations` products or once ‖r‖ ≤
    /// `tolerance`·‖b‖ (the recurrence's residual, in the backend's precision, compared in f64
    /// on the host). One read of three scalars per iteration, and with a correction one host
    /// round trip of r more.
    #[allow(clippy::too_many_arguments)]
    pub fn solve(
        &self,
        be: &mut B,
        apply: &mut BackendOp<B>,
        precond: &mut BackendOp<B>,
        mut correction: Option<&mut HostCorrection>,
        b: B::Vector,
        x: B::Vector,
        warm: bool,
        tolerance: f64,
        max_iterations: usize,
    ) -> Result<PcgOutcome> {
        let (r, z, ap) = (self.r, self.z, self.ap);
        let only = |s: B::Scalar| Dots {
            ab: Some(s),
            aa: None,
            bb: None,
        };
        let set = |c: f64| Coef::constant(c);
        be.dots(
            b,
            b,
            Dots {
                ab: None,
                aa: Some(self.bb),
                bb: None,
            },
        )?;
        // r ← b (− A x).
        be.combine(r, set(1.0), b, Combine::Set, None)?;
        if warm {
            apply(be, x, ap)?;
            be.combine(r, set(-1.0), ap, Combine::Add, None)?;
        } else {
            be.combine(x, set(0.0), b, Combine::Set, None)?;
        }
        precond(be, r, z)?;
        if let Some(c) = correction.as_deref_mut() {
            self.correct(be, c)?;
        }
        be.combine(self.p[0], set(1.0), z, Combine::Set, None)?;
        be.dots(
            r,
            z,
            Dots {
                ab: Some(self.rz[0]),
                aa: Some(self.rr),
                bb: None,
            },
        )?;
        let s = be.read(&[self.bb, self.rr, self.rz[0]])?;
        let b_norm = s[0].sqrt();
        if b_norm == 0.0 {
            be.combine(x, set(0.0), b, Combine::Set, None)?;
            be.sync()?;
            return Ok(PcgOutcome::default());
        }
        let mut r_norm = s[1].sqrt();
        let mut rz_ok = s[2].is_finite();
        let mut done = 0;
        let mut cur = 0;
        let mut breakdown = false;
        // c = base − ratio·num/den with a guarded ratio (0 for den ≤ 0 or not finite), so a
        // breakdown leaves x and r unchanged, as the f64 loop does by stopping first.
        let ratio = |ratio: f64, num: B::Scalar, den: B::Scalar| Coef {
            base: 0.0,
            a: None,
            ratio,
            num: Some(num),
            den: Some(den),
            store: None,
        };
        while done < max_iterations && r_norm > tolerance * b_norm {
            let (p, p_next) = (self.p[cur], self.p[1 - cur]);
            let (rz, rz_next) = (self.rz[cur], self.rz[1 - cur]);
            apply(be, p, ap)?;
            be.dots(p, ap, only(self.pap))?;
            // x += (rz/pAp) p;  r −= (rz/pAp) Ap.
            be.combine(x, ratio(-1.0, rz, self.pap), p, Combine::Add, None)?;
            be.combine(r, ratio(1.0, rz, self.pap), ap, Combine::Add, None)?;
            precond(be, r, z)?;
            if let Some(c) = correction.as_deref_mut() {
                self.correct(be, c)?;
            }
            be.dots(
                r,
                z,
                Dots {
                    ab: Some(rz_next),
                    aa: Some(self.rr),
                    bb: None,
                },
            )?;
            // p' = z + (rz'/rz) p.
            be.combine(p_next, set(1.0), z, Combine::Set, None)?;
            be.combine(p_next, ratio(-1.0, rz_next, rz), p, Combine::Add, None)?;
            let s = be.read(&[self.pap, self.rr, rz_next])?;
            done += 1;
            if s[0].is_nan() || s[0] <= 0.0 || !rz_ok {
                breakdown = true;
                break;
            }
            r_norm = s[1].sqrt();
            rz_ok = s[2].is_finite();
            cur = 1 - cur;
        }
        Ok(PcgOutcome {
            iterations: done,
            relative_residual: r_norm / b_norm,
            breakdown,
        })
    }
}
