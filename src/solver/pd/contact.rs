//! Contact curvature around the constant factor: H₀ = (A + B_c)⁻¹ by a low-rank (Woodbury)
//! update of A⁻¹, with B_c the obstacle barrier's per-vertex curvature at the current iterate.
//!
//! The paper keeps contact out of A (penalties in g and ∇g only; the line search absorbs the
//! cruder Hessian). Against jello's IPC log barrier with its time-of-impact step filter that
//! stalls: A⁻¹∇E knows nothing of the barrier, so every direction drives the vertices touching
//! an obstacle into it and the filter cuts α to 1e-3…1e-7 (`drop.toml`: 12 of 80 steps met
//! ε = 1e-5 within 1000 iterations, and the ball then stuck at residual 0.4). Here A is still
//! never changed or refactored: the barrier's curvature enters only the initial inverse
//! Hessian of L-BFGS, applied around the fixed factor,
//!
//! (A + U C Uᵀ)⁻¹ q = A⁻¹q − A⁻¹U (C⁻¹ + UᵀA⁻¹U)⁻¹ UᵀA⁻¹q,
//!
//! with one rank-1 term β n nᵀ per (vertex, obstacle) in contact (β = κm/h²·b''(d), n = ∇d:
//! Newton's PSD barrier block, whose b'∇²d part vanishes inside d̂ where b' < 0) and, for
//! surface pairs with spheres and boxes, the eigen-terms of each vertex's PSD-projected
//! diagonal block. Because A acts alike on x, y and z, A⁻¹(e_v ⊗ n) = (A⁻¹e_v) ⊗ n: one scalar
//! column per contact vertex, solved once per factor and cached, and C⁻¹ + UᵀA⁻¹U is the
//! k × k SPD matrix diag(1/β) + [(A⁻¹)_{v_i v_j} n_i·n_j]. At most [`MAX_TERMS`] terms (the
//! stiffest) are kept. Measured in `benches/solvers.rs` and the module docs of
//! [`crate::solver::qn`].

use super::global::GlobalSystem;
use crate::error::{JelloError, Result};
use crate::problem::{barrier_derivatives, StepProblem};
use nalgebra::{DMatrix, DVector, Vector3};
use std::collections::HashMap;

/// Most contact terms one correction uses (the stiffest first): the k × k system costs k³/3.
pub const MAX_TERMS: usize = 1024;

/// One rank-1 term β n nᵀ of the contact curvature at vertex `vertex` (N/m).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ContactTerm {
    /// The vertex.
    pub vertex: u32,
    /// Unit direction.
    pub normal: [f64; 3],
    /// Curvature, N/m (> 0).
    pub beta: f64,
}

/// The barrier curvature of `problem` at positions `x` (3n, m) as rank-1 terms, free vertices
/// only (pinned rows are not in A).
pub fn contact_terms(problem: &StepProblem, x: &[f64], out: &mut Vec<ContactTerm>) {
    out.clear();
    let model = problem.model;
    if model.obstacles.is_empty() {
        return;
    }
    let dhat = model.barrier.dhat;
    let ih2 = problem.inv_h2();
    for v in 0..model.num_vertices() {
        if problem.fixed[3 * v] {
            continue;
        }
        let p = Vector3::from_column_slice(&x[3 * v..3 * v + 3]);
        let w = model.barrier.kappa * model.mass[v] * ih2;
        for o in model.obstacles.iter().filter(|o| o.acts_on_vertices()) {
            let de = o.distance(&p);
            if de.d < dhat && de.d > 0.0 {
                let (_, _, ddb) = barrier_derivatives(de.d, dhat);
                let beta = w * ddb;
                if beta > 0.0 && beta.is_finite() {
                    out.push(ContactTerm {
                        vertex: v as u32,
                        normal: de.grad.into(),
                        beta,
                    });
                }
            }
        }
        if model.obstacles.iter().any(|o| o.is_bounded()) {
            let (_, h) = problem.face_barrier_at_vertex(x, v);
            if h != nalgebra::Matrix3::zeros() {
                let eig = h.symmetric_eigen();
                let top = eig.eigenvalues.iter().fold(0.0f64, |m, &l| m.max(l));
                for k in 0..3 {
                    let l = eig.eigenvalues[k];
                    if l > 1e-6 * top && l.is_finite() {
                        out.push(ContactTerm {
                            vertex: v as u32,
                            normal: eig.eigenvectors.column(k).into_owned().into(),
                            beta: l,
                        });
                    }
                }
            }
        }
    }
}

/// The Woodbury correction with its cache of A⁻¹ columns; see the module docs.
#[derive(Debug, Default)]
pub struct ContactCorrection {
    /// A⁻¹e_v per vertex (n values each), for the factor `factor`.
    columns: HashMap<u32, Vec<f64>>,
    factor: Option<u64>,
    /// Terms used by the last application.
    last_terms: usize,
    /// Columns solved so far.
    solved: usize,
}

impl ContactCorrection {
    /// An empty correction.
    pub fn new() -> Self {
        Self::default()
    }

    /// Terms the last [`Self::apply`] used.
    pub fn last_terms(&self) -> usize {
        self.last_terms
    }

    /// A⁻¹ columns solved so far (each costs one scalar right-hand side).
    pub fn columns_solved(&self) -> usize {
        self.solved
    }

    /// r ← (A + Σ β n nᵀ)⁻¹ q in place (`q` per vertex, 3n interleaved).
    pub fn apply(
        &mut self,
        system: &mut GlobalSystem,
        terms: &[ContactTerm],
        q: &mut [f64],
    ) -> Result<()> {
        system.solve(q)?;
        self.last_terms = 0;
        if terms.is_empty() {
            return Ok(());
        }
        let n = q.len() / 3;
        let id = system.factor_id();
        if self.factor != id {
            self.columns.clear();
            self.factor = id;
        }
        let mut terms: Vec<ContactTerm> = terms
            .iter()
            .filter(|t| system.is_free(t.vertex as usize))
            .copied()
            .collect();
        if terms.len() > MAX_TERMS {
            terms.sort_by(|a, b| b.beta.total_cmp(&a.beta));
            terms.truncate(MAX_TERMS);
        }
        if terms.is_empty() {
            return Ok(());
        }
        // Columns A⁻¹e_v for vertices not cached yet, in one multi-column solve.
        let mut missing: Vec<u32> = terms
            .iter()
            .map(|t| t.vertex)
            .filter(|v| !self.columns.contains_key(v))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            let k = missing.len();
            let mut fields = vec![0.0; n * k];
            for (c, &v) in missing.iter().enumerate() {
                fields[c * n + v as usize] = 1.0;
            }
            system.solve_fields(&mut fields, k)?;
            for (c, &v) in missing.iter().enumerate() {
                self.columns.insert(v, fields[c * n..(c + 1) * n].to_vec());
            }
            self.solved += k;
            // Keep the cache bounded: drop columns of vertices not in contact now.
            if self.columns.len() > 4 * MAX_TERMS {
                let keep: std::collections::HashSet<u32> = terms.iter().map(|t| t.vertex).collect();
                self.columns.retain(|v, _| keep.contains(v));
            }
        }
        let k = terms.len();
        let nrm = |t: &ContactTerm| Vector3::from(t.normal);
        let s = DMatrix::from_fn(k, k, |i, j| {
            let (ti, tj) = (&terms[i], &terms[j]);
            let g = self.columns[&tj.vertex][ti.vertex as usize];
            let v = g * nrm(ti).dot(&nrm(tj));
            if i == j {
                v + 1.0 / ti.beta
            } else {
                v
            }
        });
        // Symmetrise against round-off in the cached columns.
        let s = (&s + s.transpose()) * 0.5;
        let y = DVector::from_fn(k, |i, _| {
            let t = &terms[i];
            let v = t.vertex as usize;
            nrm(t).dot(&Vector3::new(q[3 * v], q[3 * v + 1], q[3 * v + 2]))
        });
        let z = s
            .cholesky()
            .ok_or_else(|| JelloError::Solver("contact correction is not definite".into()))?
            .solve(&y);
        for (j, t) in terms.iter().enumerate() {
            let col = &self.columns[&t.vertex];
            let w = nrm(t) * z[j];
            for (v, &a) in col.iter().enumerate() {
                if a != 0.0 {
                    q[3 * v] -= a * w[0];
                    q[3 * v + 1] -= a * w[1];
                    q[3 * v + 2] -= a * w[2];
                }
            }
        }
        self.last_terms = k;
        Ok(())
    }
}
