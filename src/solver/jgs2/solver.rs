//! The JGS2 / VBD iteration (Jacobi or coloured Gauss–Seidel) on the CPU in f64.

use super::local::{element_pass, local_system, rotations, vertex_gradient, ElementCache};
use super::subspace::Jgs2Subspace;
use crate::error::{JelloError, Result};
use crate::mesh::{colour_vertices, Colouring, VertexTets};
use crate::problem::{ElasticTerms, Model, StepProblem};
use crate::solver::{IterationRecord, StepReport, StepSolver, StepTimings, StopRule};
use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;

/// How vertices are swept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// All vertices in parallel from the same iterate (double-buffered).
    Jacobi,
    /// Colour by colour (vertices of a colour share no tet), each colour seeing the updates of
    /// the previous ones.
    GaussSeidel,
}

/// Parameters of JGS2 / VBD.
#[derive(Clone, Copy, Debug)]
pub struct Jgs2Params {
    /// Stop rule (default: characteristic norm ε = 1e-5; the paper uses Dx 1e-3).
    pub stop: StopRule,
    /// Iteration cap per step (default 1000).
    pub max_iterations: usize,
    /// Sweep order.
    pub variant: Variant,
    /// Energy safeguard: when a sweep (Jacobi) or a colour's update (Gauss–Seidel) raises E,
    /// scale that update back by halving. Costs one or two energy evaluations per sweep or
    /// colour; off reproduces the paper's plain iteration, which can overshoot when the
    /// subspace or cubature is poor (stiff bodies whose Ū spans the whole mesh).
    pub safeguard: bool,
}

impl Default for Jgs2Params {
    fn default() -> Self {
        Jgs2Params {
            stop: StopRule::default(),
            max_iterations: 1000,
            variant: Variant::Jacobi,
            safeguard: true,
        }
    }
}

/// JGS2 (with a subspace) or VBD (without).
pub struct Jgs2Solver {
    params: Jgs2Params,
    subspace: Option<Arc<Jgs2Subspace>>,
    vertex_tets: VertexTets,
    colouring: Colouring,
    free: Vec<u32>,
    extent: f64,
    cache: ElementCache,
}

impl Jgs2Solver {
    /// VBD: no subspace (plain per-vertex Newton on inertia + incident elements).
    pub fn vbd(model: &Model, params: Jgs2Params) -> Self {
        Self::new(model, params, None)
    }

    /// JGS2 with a precomputed subspace for this model and h.
    pub fn jgs2(model: &Model, params: Jgs2Params, subspace: Arc<Jgs2Subspace>) -> Result<Self> {
        if subspace.vertices.len() != model.num_vertices() {
            return Err(JelloError::Solver(
                "JGS2 subspace does not match the model".into(),
            ));
        }
        Ok(Self::new(model, params, Some(subspace)))
    }

    fn new(model: &Model, params: Jgs2Params, subspace: Option<Arc<Jgs2Subspace>>) -> Self {
        let extent = model.largest_extent();
        Jgs2Solver {
            params,
            subspace,
            vertex_tets: VertexTets::new(&model.mesh),
            colouring: colour_vertices(&model.mesh),
            free: (0..model.num_vertices() as u32)
                .filter(|&v| !model.pinned[v as usize])
                .collect(),
            extent,
            cache: ElementCache::default(),
        }
    }

    /// Number of vertex colours (Gauss–Seidel sweeps per iteration).
    pub fn num_colours(&self) -> usize {
        self.colouring.num_colours()
    }

    /// The step for vertex `i` at `x` with assembled gradient `g` (before the obstacle filter).
    fn vertex_step(
        &self,
        problem: &StepProblem,
        x: &[f64],
        g: &[f64],
        rot: Option<&[Matrix3<f64>]>,
        i: usize,
    ) -> Vector3<f64> {
        let (a, r) = match &self.subspace {
            None => local_system(
                problem,
                &self.cache,
                x,
                g,
                i,
                self.vertex_tets.of(i).map(|(t, _)| (t, 1.0, None)),
                std::iter::empty(),
                None,
            ),
            Some(s) => {
                let vs = &s.vertices[i];
                let incident = self
                    .vertex_tets
                    .of(i)
                    .zip(&vs.incident)
                    .map(|((t, _), b)| (t, 1.0, Some(b)));
                let cub = vs
                    .elements
                    .iter()
                    .zip(&vs.weights)
                    .zip(&vs.blocks)
                    .map(|((&e, &w), b)| (e, w, Some(b)));
                let grad = vs.grad_terms.iter().map(|(j, w, b)| (*j, *w, b));
                local_system(
                    problem,
                    &self.cache,
                    x,
                    g,
                    i,
                    incident.chain(cub),
                    grad,
                    rot,
                )
            }
        };
        // A is SPD (projected element Hessians + mass); fall back to a gradient step if round-off
        // says otherwise.
        let d = match a.cholesky() {
            Some(c) => -c.solve(&r),
            None => -r / a.diagonal().max().max(1e-300),
        };
        // A vertex whose local system broke down (e.g. a degenerate element) stays put this
        // iteration rather than poisoning the state.
        if d.iter().all(|v| v.is_finite()) {
            d
        } else {
            Vector3::zeros()
        }
    }

    /// Refreshes the assembled gradient at `vertices` from the element cache.
    fn gather(&self, problem: &StepProblem, x: &[f64], g: &mut [f64], vertices: &[u32]) {
        let vals: Vec<Vector3<f64>> = vertices
            .par_iter()
            .map(|&v| vertex_gradient(problem, &self.cache, &self.vertex_tets, x, v as usize))
            .collect();
        for (&v, val) in vertices.iter().zip(vals) {
            g[3 * v as usize..3 * v as usize + 3].copy_from_slice(val.as_slice());
        }
    }

    /// Limits a vertex's step so it cannot cross an obstacle (0.9 × time of impact).
    fn filter(problem: &StepProblem, x: &[f64], i: usize, d: Vector3<f64>) -> Vector3<f64> {
        let p = Vector3::from_column_slice(&x[3 * i..3 * i + 3]);
        let mut alpha = 1.0f64;
        for o in &problem.model.obstacles {
            let toi = o.time_of_impact(&p, &d);
            if toi < 1.0 {
                alpha = alpha.min(0.9 * toi);
            }
        }
        d * alpha
    }
}

impl StepSolver for Jgs2Solver {
    fn name(&self) -> String {
        match (&self.subspace, self.params.variant) {
            (Some(_), Variant::Jacobi) => "jgs2-jacobi".into(),
            (Some(_), Variant::GaussSeidel) => "jgs2-gs".into(),
            (None, Variant::Jacobi) => "vbd-jacobi".into(),
            (None, Variant::GaussSeidel) => "vbd".into(),
        }
    }

    fn step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
        trace: bool,
    ) -> Result<StepReport> {
        let start = Instant::now();
        let mut timings = StepTimings::default();
        let model = problem.model;
        let n = problem.x_start.len();
        x.clear();
        x.extend_from_slice(&problem.x_start);
        let all: Vec<u32> = (0..model.num_vertices() as u32).collect();
        // The iteration keeps the element cache and the assembled gradient g current; the CN
        // residual is then free (‖g‖ of the current iterate).
        let t0 = Instant::now();
        element_pass(model, x, &mut self.cache, None);
        let mut g = vec![0.0; n];
        self.gather(problem, x, &mut g, &all);
        timings.assembly_ms += ms(t0);
        let energy_of = |x: &[f64]| problem.energy(elastic, x);
        let mut residual = model.char_norm.residual(&g);
        let mut records = trace.then(Vec::new);
        if let Some(r) = records.as_mut() {
            r.push(IterationRecord {
                residual,
                energy: energy_of(x),
                alpha: 1.0,
            });
        }
        let mut iterations = 0;
        let mut converged;
        let mut max_dx = f64::INFINITY;
        loop {
            converged = match self.params.stop {
                StopRule::Cn { eps } => residual < eps,
                StopRule::Dx { tol } => max_dx / self.extent < tol,
            };
            if converged || iterations >= self.params.max_iterations {
                break;
            }
            iterations += 1;
            let t0 = Instant::now();
            let rot = self
                .subspace
                .as_ref()
                .map(|_| rotations(model, x, &self.vertex_tets));
            let rot = rot.as_deref();
            max_dx = 0.0;
            let groups: Vec<Vec<u32>> = match self.params.variant {
                Variant::Jacobi => vec![self.free.clone()],
                Variant::GaussSeidel => self
                    .colouring
                    .groups
                    .iter()
                    .map(|grp| {
                        grp.iter()
                            .copied()
                            .filter(|&v| !model.pinned[v as usize])
                            .collect()
                    })
                    .collect(),
            };
            for group in groups.iter().filter(|grp| !grp.is_empty()) {
                let e_old = self.params.safeguard.then(|| energy_of(x));
                let this = &*self;
                let (xs, gs): (&[f64], &[f64]) = (x, &g);
                let steps: Vec<Vector3<f64>> = group
                    .par_iter()
                    .map(|&i| {
                        Self::filter(
                            problem,
                            xs,
                            i as usize,
                            this.vertex_step(problem, xs, gs, rot, i as usize),
                        )
                    })
                    .collect();
                let mut scale = 1.0;
                let apply = |x: &mut [f64], s: f64| {
                    for (&i, d) in group.iter().zip(&steps) {
                        for k in 0..3 {
                            x[3 * i as usize + k] += s * d[k];
                        }
                    }
                };
                apply(x, 1.0);
                if let Some(e0) = e_old {
                    // Energy safeguard: halve this group's update while it raises E.
                    let mut e1 = energy_of(x);
                    let mut tries = 0;
                    // After 8 halvings the (small) update is kept: near convergence E's round-off
                    // can hide a true decrease, and stalling would be worse.
                    let rejected = |e: f64| e.is_nan() || e > e0 + 1e-12 * e0.abs();
                    while rejected(e1) && tries < 8 {
                        apply(x, -0.5 * scale);
                        scale *= 0.5;
                        e1 = energy_of(x);
                        tries += 1;
                    }
                }
                for d in &steps {
                    max_dx = max_dx.max(scale * d.norm());
                }
                // Refresh the elements touching the moved vertices and the gradient at their
                // corners (for Jacobi: everything).
                if group.len() == self.free.len() {
                    element_pass(model, x, &mut self.cache, None);
                    self.gather(problem, x, &mut g, &all);
                } else {
                    let mut touched: Vec<u32> = group
                        .iter()
                        .flat_map(|&i| self.vertex_tets.of(i as usize).map(|(t, _)| t))
                        .collect();
                    touched.sort_unstable();
                    touched.dedup();
                    element_pass(model, x, &mut self.cache, Some(&touched));
                    let mut verts: Vec<u32> = touched
                        .iter()
                        .flat_map(|&t| model.mesh.tets[t as usize])
                        .collect();
                    verts.sort_unstable();
                    verts.dedup();
                    self.gather(problem, x, &mut g, &verts);
                }
            }
            timings.solve_ms += ms(t0);
            residual = model.char_norm.residual(&g);
            if !residual.is_finite() || x.iter().any(|v| !v.is_finite()) {
                return Err(JelloError::Solver(format!(
                    "{} diverged (non-finite positions)",
                    self.name()
                )));
            }
            if let Some(r) = records.as_mut() {
                r.push(IterationRecord {
                    residual,
                    energy: energy_of(x),
                    alpha: 1.0,
                });
            }
        }
        Ok(StepReport {
            iterations,
            converged,
            residual,
            energy: energy_of(x),
            wall_ms: ms(start),
            timings,
            trace: records,
        })
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
