//! The ADMM-PD loop (Algorithm 1, local step first) on the f64 CPU.

use super::contact::{kkt_gradient, ContactInput, ContactSolver};
use super::params::AdmmParams;
use super::prox::{pd_refusal, prox_hyperelastic, prox_pd, ProxKind};
use crate::error::{JelloError, Result};
use crate::material::Material;
use crate::problem::{ElasticReference, ElasticTerms, Model, StepProblem};
use crate::solver::pd::GlobalSystem;
use crate::solver::qn::QnMode;
use crate::solver::report::ms;
use crate::solver::{IterationRecord, StepReport, StepSolver, StepTimings, StopRule};
use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;

/// What one ADMM iteration did (for tests, traces and benches).
#[derive(Clone, Copy, Debug, Default)]
pub struct AdmmIteration {
    /// Primal residual ‖r‖ = ‖W(Dx − z)‖ after the global step, √J.
    pub primal: f64,
    /// Dual residual ‖s‖ = ‖DᵀW²(zⁿ⁺¹ − zⁿ)‖ over the free vertices, N (iteration 1 measures
    /// z¹ against z⁰ = D x_start).
    pub dual: f64,
    /// Characteristic-norm residual of the true gradient after the iteration (NaN where it
    /// was not evaluated: fixed mode without a trace, except the last iteration).
    pub residual: f64,
    /// E − E(x_start) after the iteration, J (NaN where not evaluated).
    pub energy: f64,
    /// Largest vertex move of the global step, m.
    pub moved: f64,
}

/// A z-step supplied by the caller: `(element, v, w²) ↦ argmin_F U_e(F) + w²/2‖F − v‖²` (F
/// form), for energies that are not jello materials (tests: the quadratic energy of the
/// paper's ½-rate proof).
pub type CustomProx = Arc<dyn Fn(usize, &Matrix3<f64>, f64) -> Matrix3<f64> + Send + Sync>;

/// Per-element constants.
struct Element {
    grads: [Vector3<f64>; 4],
    volume: f64,
    /// w_e² (J): ρ = 1, W_e = w_e I.
    w2: f64,
    material: Material,
}

/// ADMM-PD on the f64 CPU; see the module docs.
pub struct AdmmSolver {
    params: AdmmParams,
    system: GlobalSystem,
    extent: f64,
    elements: Vec<Element>,
    tets: Vec<[u32; 4]>,
    /// Deformation gradient at the current x, per element.
    fx: Vec<Matrix3<f64>>,
    /// z after the last z-step (F form).
    z: Vec<Matrix3<f64>>,
    /// Scaled dual ū after the last z-step (F form).
    u: Vec<Matrix3<f64>>,
    log: Vec<AdmmIteration>,
    custom: Option<CustomProx>,
    /// The constrained global step, for models with obstacles.
    contact: Option<ContactSolver>,
}

impl AdmmSolver {
    /// A solver for `model`: weights and element constants now, the factor at the first step.
    /// Errors (one line, naming the key) for a PD prox on a material without PD form, a
    /// weight scale that is not finite and > 0, a fixed count of 0, or bad contact options
    /// ([`super::contact::ContactParams::check`]).
    pub fn new(model: &Model, params: AdmmParams) -> Result<Self> {
        let contact = ContactSolver::new(params.contact)?;
        let ws = params.global.weight_scale;
        if !(ws.is_finite() && ws > 0.0) {
            return Err(JelloError::Invalid(format!(
                "admm: solver.weight_scale must be finite and > 0, got {ws}"
            )));
        }
        if let QnMode::Fixed(0) = params.mode {
            return Err(JelloError::Invalid(
                "admm: solver.iterations (a fixed count) must be ≥ 1".into(),
            ));
        }
        if params.prox == ProxKind::Pd {
            if let Some(why) = model.materials.iter().find_map(pd_refusal) {
                return Err(JelloError::Invalid(format!(
                    "admm: solver.prox = \"pd\": {why}"
                )));
            }
        }
        let system = GlobalSystem::new(model, params.global)?;
        let elements: Vec<Element> = (0..model.mesh.tets.len())
            .map(|e| Element {
                grads: model.rest[e].shape_gradients(),
                volume: model.rest[e].volume,
                w2: system.weights()[e],
                material: model.materials[e],
            })
            .collect();
        let ne = elements.len();
        Ok(AdmmSolver {
            params,
            system,
            extent: model.largest_extent(),
            elements,
            tets: model.mesh.tets.clone(),
            fx: vec![Matrix3::zeros(); ne],
            z: vec![Matrix3::zeros(); ne],
            u: vec![Matrix3::zeros(); ne],
            log: Vec::new(),
            custom: None,
            contact: (!model.obstacles.is_empty()).then_some(contact),
        })
    }

    /// Replaces the z-step by `prox` (see [`CustomProx`]); the stop rule still evaluates the
    /// model's own energy, so use a fixed count unless `prox` is the model's prox.
    pub fn with_custom_prox(mut self, prox: CustomProx) -> Self {
        self.custom = Some(prox);
        self
    }

    /// The parameters.
    pub fn params(&self) -> &AdmmParams {
        &self.params
    }

    /// The global matrix (factorisation counts).
    pub fn system(&self) -> &GlobalSystem {
        &self.system
    }

    /// The contact solve (models with obstacles), for its rows and counters.
    pub fn contact(&self) -> Option<&ContactSolver> {
        self.contact.as_ref()
    }

    /// The iterations of the last step.
    pub fn last_step(&self) -> &[AdmmIteration] {
        &self.log
    }

    /// z and ū after the last z-step, per element, as deformation gradients (F = Σ x_a∇N_aᵀ,
    /// the transpose of D_e x; dimensionless), and w_e² (J).
    pub fn local_state(&self) -> (&[Matrix3<f64>], &[Matrix3<f64>], Vec<f64>) {
        (
            &self.z,
            &self.u,
            self.elements.iter().map(|e| e.w2).collect(),
        )
    }

    /// F of every element at positions `x` into `self.fx`.
    fn update_fx(&mut self, x: &[f64]) {
        let tets = &self.tets;
        let elements = &self.elements;
        self.fx.par_iter_mut().enumerate().for_each(|(e, f)| {
            let el = &elements[e];
            let mut out = Matrix3::zeros();
            for (a, &v) in tets[e].iter().enumerate() {
                let v = v as usize;
                let p = Vector3::new(x[3 * v], x[3 * v + 1], x[3 * v + 2]);
                out += p * el.grads[a].transpose();
            }
            *f = out;
        });
    }

    /// Adds Σ_e c_e D_eᵀ G_e (per vertex a: c_e G_e ∇N_a) into `out` (3n).
    fn scatter(&self, g: impl Fn(usize) -> Matrix3<f64>, out: &mut [f64]) {
        for (e, tet) in self.tets.iter().enumerate() {
            let ge = g(e);
            for (a, &v) in tet.iter().enumerate() {
                let f = ge * self.elements[e].grads[a];
                for c in 0..3 {
                    out[3 * v as usize + c] += f[c];
                }
            }
        }
    }

    fn rule_met(&self, residual: f64, last_move: f64, dhat: f64) -> bool {
        // With contact, converged also means every vertex ended feasible (module contact).
        if self.contact.as_ref().is_some_and(|c| !c.feasible(dhat)) {
            return false;
        }
        match self.params.stop {
            StopRule::Cn { eps } => residual < eps,
            StopRule::Dx { tol } => last_move / self.extent < tol,
        }
    }
}

impl AdmmSolver {
    /// E(x) and E(x) − E(x_start) with ∇E into `g`: the step problem's, or with contact
    /// (`reference` set) the barrier-free objective's KKT residual ∇E − Cᵀλ − f_T of module
    /// contact ("What converged means").
    fn objective(
        &self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        reference: Option<&ElasticReference>,
        x: &[f64],
        g: &mut [f64],
    ) -> (f64, f64) {
        match (self.contact.as_ref(), reference) {
            (Some(c), Some(r)) => kkt_gradient(problem, elastic, r, c.forces(), x, g),
            _ => problem.gradient_and_change(elastic, x, g),
        }
    }
}

impl StepSolver for AdmmSolver {
    fn name(&self) -> String {
        "admm".into()
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
        self.log.clear();
        let model = problem.model;
        let dhat = model.barrier.dhat;
        if problem.is_static() {
            return Err(JelloError::Invalid(
                "solver admm does not handle static solves yet (its splitting needs the \
                 inertia term): use qn or newton"
                    .into(),
            ));
        }
        let nv = model.num_vertices();
        // --- contact (module contact): a solve for models with obstacles, reset per step.
        if model.obstacles.is_empty() {
            self.contact = None;
        } else if self.contact.is_none() {
            self.contact = Some(ContactSolver::new(self.params.contact)?);
        }
        if let Some(c) = self.contact.as_mut() {
            c.begin_step(nv);
        }
        let reference = self
            .contact
            .is_some()
            .then(|| elastic.elastic_reference(&problem.x_start));
        let reference = reference.as_ref();
        // --- end contact
        let t0 = Instant::now();
        let pinned: Vec<bool> = (0..nv).map(|v| problem.fixed[3 * v]).collect();
        if self.system.prepare(model, &pinned, problem.inertia)? {
            timings.factor_ms += ms(t0);
        }

        // Algorithm 1: x ← x_start (the inertial prediction, pulled back only where it would
        // invert an element), ū ← 0.
        let t0 = Instant::now();
        x.clear();
        x.extend_from_slice(&problem.x_start);
        self.update_fx(x);
        self.u.iter_mut().for_each(|u| *u = Matrix3::zeros());
        self.z.clone_from(&self.fx);
        let mut g = vec![0.0; 3 * nv];
        let mut inertial = vec![0.0; 3 * nv];
        for v in 0..nv {
            for c in 0..3 {
                inertial[3 * v + c] = problem.inertia * model.mass[v] * problem.x_tilde[3 * v + c];
            }
        }
        let (_, change0) = self.objective(problem, elastic, reference, x, &mut g);
        let mut residual = model.char_norm.residual(&g);
        timings.setup_ms += ms(t0);
        if !residual.is_finite() {
            return Err(JelloError::Solver(format!(
                "admm: non-finite gradient at the step's start ({})",
                problem.diagnose_non_finite(elastic, &problem.x_start)
            )));
        }
        let mut change = change0;
        let mut fresh = true;
        let mut records = trace.then(Vec::new);
        if let Some(r) = records.as_mut() {
            r.push(IterationRecord {
                residual,
                energy: change,
                alpha: 0.0,
                ..IterationRecord::default()
            });
        }
        let need_rule_each = matches!(self.params.mode, QnMode::Rule) || trace;
        let mut last_move = f64::INFINITY;
        let mut iterations = 0;
        let mut rhs = vec![0.0; 3 * nv];
        let mut solved = Vec::new(); // contact: the constrained step's output
        let mut sv = vec![0.0; 3 * nv];
        loop {
            let done = match self.params.mode {
                QnMode::Fixed(n) => iterations >= n,
                QnMode::Rule => {
                    (iterations > 0 && self.rule_met(residual, last_move, dhat))
                        || iterations >= self.params.max_iterations
                }
            };
            if done {
                break;
            }
            iterations += 1;

            // Local step: v = Dx + ū, z = prox(v), ū = v − z.
            let t0 = Instant::now();
            let prox = self.params.prox;
            let z_prev = std::mem::take(&mut self.z);
            let (fx, elements, custom) = (&self.fx, &self.elements, &self.custom);
            let (z, u): (Vec<_>, Vec<_>) = self
                .u
                .par_iter()
                .enumerate()
                .map(|(e, u)| {
                    let el = &elements[e];
                    let v = fx[e] + u;
                    let z = match prox {
                        _ if custom.is_some() => custom.as_ref().expect("some")(e, &v, el.w2),
                        ProxKind::Pd => prox_pd(&el.material, el.volume, &v, el.w2)
                            .expect("PD form checked in AdmmSolver::new"),
                        ProxKind::Hyperelastic => {
                            prox_hyperelastic(&el.material, el.volume, &v, el.w2)
                        }
                    };
                    (z, v - z)
                })
                .unzip();
            self.z = z;
            self.u = u;
            timings.assembly_ms += ms(t0);

            // Dual residual s = DᵀW²(zⁿ⁺¹ − zⁿ) on the free vertices.
            sv.iter_mut().for_each(|s| *s = 0.0);
            self.scatter(|e| (self.z[e] - z_prev[e]) * self.elements[e].w2, &mut sv);
            for (s, &f) in sv.iter_mut().zip(&problem.fixed) {
                if f {
                    *s = 0.0;
                }
            }
            let dual = sv.iter().map(|s| s * s).sum::<f64>().sqrt();

            // Global step: A x = M x̃/h² + Σ w² Dᵀ(z − ū), pins eliminated.
            let t0 = Instant::now();
            rhs.copy_from_slice(&inertial);
            self.scatter(|e| (self.z[e] - self.u[e]) * self.elements[e].w2, &mut rhs);
            self.system.subtract_pinned(x, &mut rhs)?;
            // --- contact: the constrained global step on the same factor (module contact).
            if let Some(c) = self.contact.as_mut() {
                let input = ContactInput {
                    model,
                    pinned: &pinned,
                    mass_weight: problem.inertia,
                    x_prev: &problem.x_prev,
                    h: problem.h,
                };
                solved.resize(rhs.len(), 0.0);
                c.global_step(&mut self.system, &input, &rhs, x, &mut solved)?;
                std::mem::swap(&mut rhs, &mut solved);
            } else {
                self.system.solve(&mut rhs)?;
            }
            // --- end contact
            let mut moved: f64 = 0.0;
            for (v, _) in pinned.iter().enumerate().filter(|(_, &p)| !p) {
                let mut d2 = 0.0;
                for c in 0..3 {
                    let k = 3 * v + c;
                    d2 += (rhs[k] - x[k]) * (rhs[k] - x[k]);
                    x[k] = rhs[k];
                }
                moved = moved.max(d2.sqrt());
            }
            timings.solve_ms += ms(t0);
            if x.iter().any(|v| !v.is_finite()) {
                return Err(JelloError::Solver(format!(
                    "admm diverged (non-finite positions after iteration {iterations})"
                )));
            }
            last_move = moved;

            // Primal residual r = W(Dx − z) at the new x (F at x is also the next local step's).
            let t0 = Instant::now();
            self.update_fx(x);
            let primal = self
                .fx
                .iter()
                .zip(&self.z)
                .zip(&self.elements)
                .map(|((f, z), el)| el.w2 * (f - z).norm_squared())
                .sum::<f64>()
                .sqrt();
            let mut it = AdmmIteration {
                primal,
                dual,
                residual: f64::NAN,
                energy: f64::NAN,
                moved,
            };
            fresh = false;
            if need_rule_each {
                let (_, ch) = self.objective(problem, elastic, reference, x, &mut g);
                // Non-finite (an element inverted under a model infinite there): not met, and
                // the iterations go on — ADMM's later iterates may leave it.
                residual = model.char_norm.residual(&g);
                if !residual.is_finite() {
                    residual = f64::INFINITY;
                }
                change = ch;
                it.residual = residual;
                it.energy = ch;
                fresh = true;
            }
            timings.assembly_ms += ms(t0);
            self.log.push(it);
            if let Some(r) = records.as_mut() {
                r.push(IterationRecord {
                    residual,
                    energy: change,
                    alpha: 1.0,
                    primal: Some(primal),
                    dual: Some(dual),
                });
            }
        }
        if !fresh {
            let (_, ch) = self.objective(problem, elastic, reference, x, &mut g);
            residual = model.char_norm.residual(&g);
            change = ch;
            if let Some(last) = self.log.last_mut() {
                last.residual = residual;
                last.energy = ch;
            }
        }
        let converged = residual.is_finite() && self.rule_met(residual, last_move, dhat);
        let energy = problem.energy(elastic, x);
        Ok(StepReport {
            iterations,
            converged,
            residual,
            energy,
            energy_change: change,
            wall_ms: ms(start),
            timings,
            trace: records,
            ..StepReport::default()
        })
    }
}
