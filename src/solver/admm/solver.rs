//! The ADMM-PD loop (Algorithm 1, local step first), written once over [`AdmmBackend`].

use super::anderson::{residual_parts, Anderson};
use super::backend::AdmmBackend;
use super::contact::{kkt_gradient, ContactInput, ContactSolver};
use super::params::AdmmParams;
use super::prox::{pd_refusal, ProxKind};
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::material::MaterialModel;
use crate::problem::{ElasticReference, ElasticTerms, Model, StepProblem};
use crate::solver::backend::CpuBackend;
use crate::solver::pd::GlobalSystem;
use crate::solver::qn::QnMode;
use crate::solver::report::ms;
use crate::solver::{IterationRecord, StepReport, StepSolver, StepTimings, StepWork, StopRule};
use nalgebra::Matrix3;
use std::sync::Arc;

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
    /// Combined residual ‖G(q) − q‖_W = (‖W(Dx − z')‖² + ‖W(z' − z)‖²)^½ of the state q this
    /// iteration's x-step used, √J under the run's base weights (NaN where not evaluated: the
    /// last iteration of a step, and runs with neither Anderson nor penalty updates).
    pub combined: f64,
    /// Anderson: `Some(true)` when this iteration's state was a mix that the safeguard kept,
    /// `Some(false)` when it was a mix the safeguard rejected (its combined residual exceeded
    /// the previous iteration's: the next iteration restarts from the plain step), `None` for a
    /// plain step.
    pub accelerated: Option<bool>,
    /// Penalty factor ρ (every w_e² times ρ) this iteration ran under.
    pub rho: f64,
}

/// A z-step supplied by the caller: `(element, v, w²) ↦ argmin_F U_e(F) + w²/2‖F − v‖²` (F
/// form), for energies that are not jello materials (tests: the quadratic energy of the
/// paper's ½-rate proof).
pub type CustomProx = Arc<dyn Fn(usize, &Matrix3<f64>, f64) -> Matrix3<f64> + Send + Sync>;

/// z and ū per element (F form, dimensionless) and w_e² (J), on the host.
pub type LocalState = (Vec<Matrix3<f64>>, Vec<Matrix3<f64>>, Vec<f64>);

/// ADMM-PD on a backend (f64 CPU or f32 device); see the module docs.
pub struct AdmmSolver<B: AdmmBackend = CpuBackend> {
    params: AdmmParams,
    backend: B,
    system: GlobalSystem,
    extent: f64,
    /// w_e² (J), per element.
    w2: Vec<f64>,
    /// z after the last z-step (F form).
    z: B::Field,
    /// Scaled dual ū after the last z-step (F form).
    u: B::Field,
    /// Σ w² Dᵀ(z − ū), then the x-step's right-hand side.
    rhs: B::Vector,
    /// The true gradient (stop rule).
    g: B::Vector,
    log: Vec<AdmmIteration>,
    /// Host time of the x-steps over the solver's life, ms (with a device's transfers).
    global_ms: f64,
    /// The constrained global step, for models with obstacles (module contact).
    contact: Option<ContactSolver>,
    /// Penalty factor ρ on every w_e² (residual balancing; 1 until it adapts, kept across
    /// steps).
    rho: f64,
    /// Penalty updates over the solver's life.
    penalty_updates: usize,
}

impl AdmmSolver<CpuBackend> {
    /// A solver for `model` on the f64 CPU backend (see [`AdmmSolver::with_backend`]).
    pub fn new(model: &Model, params: AdmmParams) -> Result<Self> {
        AdmmSolver::with_backend(model, CpuBackend::new(model.num_vertices()), params)
    }

    /// Replaces the z-step by `prox` (see [`CustomProx`]; f64 CPU only); the stop rule still
    /// evaluates the model's own energy, so use a fixed count unless `prox` is the model's prox.
    pub fn with_custom_prox(mut self, prox: CustomProx) -> Self {
        self.backend.set_custom_prox(Some(prox));
        self
    }

    /// z and ū after the last z-step, per element, as deformation gradients (F = Σ x_a∇N_aᵀ,
    /// the transpose of D_e x; dimensionless), and w_e² (J).
    pub fn local_state(&self) -> (&[Matrix3<f64>], &[Matrix3<f64>], Vec<f64>) {
        (
            self.backend.field_values(self.z),
            self.backend.field_values(self.u),
            self.w2.clone(),
        )
    }
}

impl<B: AdmmBackend> AdmmSolver<B> {
    /// A solver for `model` on `backend`: weights and element constants now, the factor at the
    /// first step. Errors (one line, naming the key) for a PD prox on a material without PD
    /// form, a weight scale that is not finite and > 0, a fixed count of 0, bad contact options
    /// ([`super::contact::ContactParams::check`]), and obstacles or strain limits on a device
    /// backend.
    pub fn with_backend(model: &Model, mut backend: B, params: AdmmParams) -> Result<Self> {
        let contact = ContactSolver::new(params.contact)?;
        if let Some(why) = contact_refusal(model, backend.is_f64()) {
            return Err(JelloError::Invalid(why));
        }
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
        if let Some(e) = (0..model.mesh.tets.len()).find(|&e| {
            model.strain_limit(e).is_some() && model.materials[e].model == MaterialModel::Linear
        }) {
            return Err(JelloError::Invalid(format!(
                "admm: element {e} has a strain limit but a linear material (limits need an \
                 isotropic energy)"
            )));
        }
        if !model.strain_limits.is_empty() && !backend.is_f64() {
            return Err(JelloError::Invalid(
                "admm: hard strain limits (material.strain_limit) run on the f64 CPU backend \
                 only: use --backend cpu"
                    .into(),
            ));
        }
        let system = GlobalSystem::new(model, params.global)?;
        let w2 = system.weights().to_vec();
        let z = backend.field("admm z")?;
        let u = backend.field("admm u")?;
        let rhs = backend.vector("admm right-hand side")?;
        let g = backend.vector("gradient")?;
        backend.admm_setup(model, &w2, params.prox)?;
        Ok(AdmmSolver {
            params,
            backend,
            system,
            extent: model.largest_extent(),
            w2,
            z,
            u,
            rhs,
            g,
            log: Vec::new(),
            global_ms: 0.0,
            contact: (!model.obstacles.is_empty()).then_some(contact),
            rho: 1.0,
            penalty_updates: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &AdmmParams {
        &self.params
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The global matrix (factorisation counts).
    pub fn system(&self) -> &GlobalSystem {
        &self.system
    }

    /// The iterations of the last step.
    pub fn last_step(&self) -> &[AdmmIteration] {
        &self.log
    }

    /// Host time of the x-steps so far (the prefactored solve, and a device's transfers of the
    /// right-hand side and the positions), ms.
    pub fn global_ms(&self) -> f64 {
        self.global_ms
    }

    /// z and ū after the last z-step read back to the host (f64; a device's f32 values
    /// widened), and w_e² (J).
    pub fn read_local_state(&mut self) -> Result<LocalState> {
        let z = self.backend.read_field(self.z)?;
        let u = self.backend.read_field(self.u)?;
        Ok((z, u, self.w2.clone()))
    }

    /// The stop rule's (residual, E − E(x_start)) at the current point: the backend's gradient
    /// pass, or with contact (`reference` set) the KKT residual of the barrier-free objective
    /// (∇E − Cᵀλ − f_T, module contact) on the host positions `x` into `g`.
    fn rule_values(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        reference: Option<&ElasticReference>,
        x: &[f64],
        g: &mut [f64],
    ) -> Result<[f64; 2]> {
        if let (Some(c), Some(r)) = (self.contact.as_ref(), reference) {
            let (_, change) = kkt_gradient(problem, elastic, r, c.forces(), x, g);
            return Ok([problem.model.char_norm.residual(g), change]);
        }
        let (res, ch) = self.backend.admm_gradient(problem, elastic, self.g)?;
        let v = self.backend.read(&[res, ch])?;
        Ok([v[0], v[1]])
    }

    /// The current penalty factor ρ (every w_e² times ρ; 1 without penalty updates).
    pub fn rho(&self) -> f64 {
        self.rho
    }

    /// Penalty updates so far (each one a refactorisation unless a cached factor fits).
    pub fn penalty_updates(&self) -> usize {
        self.penalty_updates
    }

    /// The state (z, ū) on the host: z then ū, 9 values per element each (column-major).
    fn read_state(&mut self) -> Result<Vec<f64>> {
        let z = self.backend.read_field(self.z)?;
        let u = self.backend.read_field(self.u)?;
        Ok(z.iter()
            .chain(&u)
            .flat_map(|m| m.as_slice().to_vec())
            .collect())
    }

    /// Writes a host state (as [`Self::read_state`] gives it) into z and ū.
    fn write_state(&mut self, q: &[f64]) -> Result<()> {
        let half = q.len() / 2;
        let field = |s: &[f64]| -> Vec<Matrix3<f64>> {
            s.chunks_exact(9).map(Matrix3::from_column_slice).collect()
        };
        self.backend.write_field(self.z, &field(&q[..half]))?;
        self.backend.write_field(self.u, &field(&q[half..]))
    }

    /// The penalty update: ρ ← ρ·`factor`, the scaled dual of the host state `q` divided by
    /// `factor` (y = ρū unchanged), the backend's weights and the x-step's factor (mass weight
    /// 1/(h²ρ), a cached one when ρ was used before) made current, `q` written to the backend.
    /// Returns the right-hand side Σ ρw² Dᵀ(z − ū) of `q` (3n; scattered on the host, once per
    /// update).
    fn rescale(
        &mut self,
        problem: &StepProblem,
        pinned: &[bool],
        factor: f64,
        q: &mut [f64],
    ) -> Result<Vec<f64>> {
        let model = problem.model;
        let half = q.len() / 2;
        q[half..].iter_mut().for_each(|u| *u /= factor);
        self.rho *= factor;
        self.penalty_updates += 1;
        let w: Vec<f64> = self.w2.iter().map(|w| w * self.rho).collect();
        self.backend.admm_weights(&w)?;
        self.system
            .prepare(model, pinned, problem.inertia / self.rho)?;
        self.write_state(q)?;
        let mut rhs = vec![0.0; 3 * model.num_vertices()];
        for (e, tet) in model.mesh.tets.iter().enumerate() {
            let d = Matrix3::from_column_slice(&q[9 * e..9 * e + 9])
                - Matrix3::from_column_slice(&q[half + 9 * e..half + 9 * e + 9]);
            let grads = model.rest[e].shape_gradients();
            for (a, &v) in tet.iter().enumerate() {
                let f = d * grads[a] * w[e];
                for c in 0..3 {
                    rhs[3 * v as usize + c] += f[c];
                }
            }
        }
        Ok(rhs)
    }

    /// The contact solve (models with obstacles), for its rows and counters.
    pub fn contact(&self) -> Option<&ContactSolver> {
        self.contact.as_ref()
    }

    fn rule_met(&self, residual: f64, last_move: f64, dhat: f64) -> bool {
        // With contact, converged also means every vertex ended feasible (module contact).
        if self.contact.as_ref().is_some_and(|c| !c.feasible(dhat)) {
            return false;
        }
        self.params.stop.met(residual, last_move / self.extent)
    }
}

/// Why ADMM cannot take `model`'s obstacles, if it cannot: contact (the QP on the factor, the
/// KKT residual, the feasibility check) is f64 host work on every iterate, so it runs on the
/// CPU backend only; and its KKT residual does not carry the strain limits' forces yet.
fn contact_refusal(model: &Model, f64_backend: bool) -> Option<String> {
    if model.obstacles.is_empty() {
        return None;
    }
    if !f64_backend {
        return Some(
            "admm with obstacles (obstacles[0]) runs on the f64 CPU backend only: use --backend \
             cpu"
            .into(),
        );
    }
    (!model.strain_limits.is_empty()).then(|| {
        "admm: hard strain limits (material.strain_limit) together with obstacles \
         (obstacles[0]) are not supported yet"
            .into()
    })
}

/// What the x-step routine needs besides the right-hand side and the positions.
struct XStep<'a> {
    system: &'a mut GlobalSystem,
    /// The constrained solve, for models with obstacles.
    contact: Option<&'a mut ContactSolver>,
    problem: &'a StepProblem<'a>,
    pinned: &'a [bool],
    /// M x̃/h², 3n.
    inertial: &'a [f64],
    /// The constrained solve's output (reused across iterations).
    solved: &'a mut Vec<f64>,
    /// 1/ρ: the system is A/ρ (mass weight 1/(h²ρ)), so the right-hand side is divided by ρ.
    scale: f64,
}

/// The x-step, one host routine on either backend (the host keeps x in f64): b = `inertial` +
/// `rhs` (rhs holding Σ w² Dᵀ(z − ū), 3n), pins subtracted (their rows eliminated from A), then
/// A x = b on the prefactored matrix — or, with obstacles, the constrained solve on the same
/// factor ([`ContactSolver::global_step`]: Uzawa CG or projected Gauss–Seidel over the
/// linearised rows at `x`, friction in the right-hand side). Overwrites `rhs` and the free
/// entries of `x` (m); returns the largest vertex move (m).
fn global_step(s: XStep<'_>, rhs: &mut [f64], x: &mut [f64]) -> Result<f64> {
    for (r, b) in rhs.iter_mut().zip(s.inertial) {
        *r = (*r + b) * s.scale;
    }
    s.system.subtract_pinned(x, rhs)?;
    let new: &[f64] = match s.contact {
        None => {
            s.system.solve(rhs)?;
            rhs
        }
        Some(c) => {
            let input = ContactInput {
                model: s.problem.model,
                pinned: s.pinned,
                mass_weight: s.problem.inertia,
                x_prev: &s.problem.x_hat,
                h: s.problem.h_hat,
            };
            s.solved.resize(rhs.len(), 0.0);
            c.global_step(s.system, &input, rhs, x, s.solved)?;
            s.solved
        }
    };
    let mut moved: f64 = 0.0;
    for (v, _) in s.pinned.iter().enumerate().filter(|(_, &p)| !p) {
        let mut d2 = 0.0;
        for c in 0..3 {
            let k = 3 * v + c;
            d2 += (new[k] - x[k]) * (new[k] - x[k]);
            x[k] = new[k];
        }
        moved = moved.max(d2.sqrt());
    }
    Ok(moved)
}

impl<B: AdmmBackend> StepSolver for AdmmSolver<B> {
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
        if let Some(why) = contact_refusal(model, self.backend.is_f64()) {
            return Err(JelloError::Invalid(why));
        }
        if problem.is_static() {
            return Err(JelloError::Invalid(
                "solver admm does not handle static solves yet (its splitting needs the \
                 inertia term): use qn or newton"
                    .into(),
            ));
        }
        self.backend.check(problem)?;
        let nv = model.num_vertices();
        // Contact (module contact): a solve for models with obstacles, reset per step; the stop
        // rule then runs on the barrier-free objective's KKT residual, on the host.
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
        let mut g_host = vec![0.0; if reference.is_some() { 3 * nv } else { 0 }];
        let t0 = Instant::now();
        let pinned: Vec<bool> = (0..nv).map(|v| problem.fixed[3 * v]).collect();
        let factorizations = self.system.factorizations();
        if self
            .system
            .prepare(model, &pinned, problem.inertia / self.rho)?
        {
            timings.factor_ms += ms(t0);
        }

        // Algorithm 1: x ← x_start (the inertial prediction, pulled back only where it would
        // invert an element), ū ← 0, z⁰ = D x_start (for the first iteration's s only).
        let t0 = Instant::now();
        x.clear();
        x.extend_from_slice(&problem.x_start);
        self.backend.begin_step(problem, elastic)?;
        self.backend.admm_reset(self.z, self.u)?;
        let mut inertial = vec![0.0; 3 * nv];
        for v in 0..nv {
            for c in 0..3 {
                inertial[3 * v + c] = problem.inertia * model.mass[v] * problem.x_tilde[3 * v + c];
            }
        }
        let start_vals = self.rule_values(problem, elastic, reference, x, &mut g_host)?;
        let mut residual = start_vals[0];
        timings.setup_ms += ms(t0);
        if !residual.is_finite() {
            return Err(JelloError::Solver(format!(
                "admm: non-finite gradient at the step's start ({})",
                problem.diagnose_non_finite(elastic, &problem.x_start)
            )));
        }
        let mut change = start_vals[1];
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
        let mut solved = Vec::new(); // the constrained x-step's output
        let mut last_move = f64::INFINITY;
        let mut iterations = 0;
        // Anderson and the penalty update work on host copies of the state (module anderson).
        // Neither runs with obstacles (the contact solve's active set and friction forces are
        // state outside (z, ū), and it is built on ρ = 1); Anderson not with strain limits
        // either (a mix of feasible z's leaves the limits' set, which z must hold).
        let adapt = self.params.penalty.adapt && self.contact.is_none();
        let mut anderson =
            (self.params.anderson > 0 && self.contact.is_none() && model.strain_limits.is_empty())
                .then(|| Anderson::new(self.params.anderson, &self.w2));
        let host_state = anderson.is_some() || adapt;
        let mut updates = 0; // penalty updates this step
        let mut q_prev: Option<Vec<f64>> = None; // the state the last x-step used
        let mut r_prev = f64::INFINITY; // its predecessor's combined residual
        let mut r_check = f64::INFINITY; // the combined residual at the last penalty check
        let mut mixed = false; // whether q_prev is an Anderson mix
        let mut x_saved = Vec::new(); // x before the last x-step (restored on a rejection)
        loop {
            let done = match self.params.mode {
                QnMode::Fixed(n) => iterations >= n,
                QnMode::Rule => StopRule::stop_now(
                    self.rule_met(residual, last_move, dhat),
                    iterations,
                    self.params.max_iterations,
                ),
            };
            if done {
                break;
            }
            iterations += 1;

            // Local step: v = Dx + ū, z = prox(v), ū = v − z; Σ w²Dᵀ(z − ū) and s with it.
            let t0 = Instant::now();
            let local = self.backend.admm_local(problem, self.z, self.u, self.rhs)?;
            // The state the x-step takes: G(q_prev), an Anderson mix, or after a rejection
            // the previous plain step; `replace` is a right-hand side that the backend's
            // (that of G(q_prev)) gives way to.
            let mut replace: Option<Vec<f64>> = None;
            let mut rejected = false;
            if host_state {
                let g = self.read_state()?;
                let mut next = None;
                if let Some(q) = q_prev.take() {
                    let parts = residual_parts(&self.w2, &q, &g);
                    let combined = parts[0].hypot(parts[1]);
                    let k = self.log.len() - 1;
                    self.log[k].combined = combined;
                    // A mix is kept only when its combined residual did not grow (NaN grew).
                    let grew = combined.is_nan() || combined > r_prev;
                    rejected = mixed && grew;
                    self.log[k].accelerated = mixed.then_some(!rejected);
                    if let Some(r) = records.as_mut().and_then(|r| r.last_mut()) {
                        r.combined = Some(combined);
                        r.accelerated = self.log[k].accelerated;
                    }
                    if rejected {
                        let aa = anderson.as_mut().expect("a mix needs Anderson");
                        let (g0, rhs0) = aa.newest().expect("a mix has a plain step before it");
                        next = Some(g0.to_vec());
                        replace = Some(rhs0.to_vec());
                        aa.clear();
                        x.clone_from(&x_saved);
                    } else {
                        r_prev = combined;
                        let due = adapt
                            && iterations % self.params.penalty.interval.max(1) == 0
                            && updates < self.params.penalty.max_updates;
                        let p = &self.params.penalty;
                        // Stalled: less than `stall` of the combined residual taken off since
                        // the last check (the cycle of nonconvex ADMM at too small a w, which a
                        // larger w breaks); otherwise Boyd's balance.
                        let stalled = combined > (1.0 - p.stall) * r_check;
                        let factor = if !due {
                            1.0
                        } else if (parts[1] > p.band * parts[0] || stalled)
                            && self.rho * p.factor <= p.range
                        {
                            p.factor
                        } else if parts[0] > p.band * parts[1]
                            && self.rho / p.factor >= 1.0 / p.range
                        {
                            1.0 / p.factor
                        } else {
                            1.0
                        };
                        if due {
                            r_check = combined;
                        }
                        if factor != 1.0 {
                            updates += 1;
                            r_check = f64::INFINITY;
                            let mut g = g.clone();
                            replace = Some(self.rescale(problem, &pinned, factor, &mut g)?);
                            next = Some(g);
                            r_prev = f64::INFINITY;
                            if let Some(aa) = anderson.as_mut() {
                                aa.clear();
                            }
                        } else if let Some(aa) = anderson.as_mut() {
                            next = aa.push(&q, g.clone());
                        }
                    }
                }
                mixed = next.is_some() && !rejected && replace.is_none();
                match next {
                    Some(n) => {
                        self.write_state(&n)?;
                        q_prev = Some(n);
                    }
                    None => q_prev = Some(g),
                }
            }
            timings.assembly_ms += ms(t0);

            // Global step: A x = M x̃/h² + Σ w² Dᵀ(z − ū), pins eliminated.
            let t0 = Instant::now();
            let mut moved = 0.0;
            if host_state {
                x_saved.clone_from(x);
            }
            {
                let (system, contact) = (&mut self.system, &mut self.contact);
                let (pinned, inertial, solved) = (&pinned, &inertial, &mut solved);
                let (anderson, replace) = (&mut anderson, &replace);
                let scale = 1.0 / self.rho;
                self.backend.admm_global(self.rhs, x, &mut |rhs, x| {
                    match (replace, anderson.as_mut()) {
                        (Some(r), _) => rhs.copy_from_slice(r),
                        (None, Some(aa)) => aa.mix_rhs(rhs),
                        (None, None) => {}
                    }
                    let step = XStep {
                        system: &mut *system,
                        contact: contact.as_mut(),
                        problem,
                        pinned,
                        inertial,
                        solved: &mut *solved,
                        scale,
                    };
                    moved = global_step(step, rhs, x)?;
                    Ok(())
                })?;
            }
            let dt = ms(t0);
            timings.solve_ms += dt;
            self.global_ms += dt;
            let finite = x.iter().all(|v| v.is_finite());
            if !finite && !mixed {
                return Err(JelloError::Solver(format!(
                    "admm diverged (non-finite positions after iteration {iterations})"
                )));
            }
            // A mix that gave non-finite positions: its combined residual is NaN and the
            // safeguard rejects it at the next local step.
            last_move = moved;

            // Primal residual r = W(Dx − z) at the new x, and the true gradient.
            let t0 = Instant::now();
            let primal = self.backend.admm_primal(self.z)?;
            let mut wanted = vec![primal, local.dual];
            let mut host = None;
            if need_rule_each && finite {
                if reference.is_some() {
                    host = Some(self.rule_values(problem, elastic, reference, x, &mut g_host)?);
                } else {
                    let (res, ch) = self.backend.admm_gradient(problem, elastic, self.g)?;
                    wanted.extend([res, ch]);
                }
            }
            let mut vals = self.backend.read(&wanted)?;
            if let Some(h) = host {
                vals.extend(h);
            }
            let mut it = AdmmIteration {
                primal: vals[0],
                dual: vals[1],
                residual: f64::NAN,
                energy: f64::NAN,
                moved,
                combined: f64::NAN,
                accelerated: None,
                rho: self.rho,
            };
            fresh = false;
            if need_rule_each {
                // Non-finite (an element inverted under a model infinite there): not met, and
                // the iterations go on — ADMM's later iterates may leave it.
                residual = if finite { vals[2] } else { f64::INFINITY };
                if !residual.is_finite() {
                    residual = f64::INFINITY;
                }
                change = if finite { vals[3] } else { f64::NAN };
                it.residual = residual;
                it.energy = change;
                fresh = finite;
            }
            timings.assembly_ms += ms(t0);
            self.log.push(it);
            if let Some(r) = records.as_mut() {
                r.push(IterationRecord {
                    residual,
                    energy: change,
                    alpha: 1.0,
                    primal: Some(it.primal),
                    dual: Some(it.dual),
                    ..IterationRecord::default()
                });
            }
        }
        if x.iter().any(|v| !v.is_finite()) {
            // The last iteration was a mix that diverged: back to the point before it.
            x.clone_from(&x_saved);
            self.backend.admm_global(self.rhs, x, &mut |_, _| Ok(()))?;
            fresh = false;
        }
        if !fresh {
            let vals = self.rule_values(problem, elastic, reference, x, &mut g_host)?;
            residual = vals[0];
            change = vals[1];
            if let Some(last) = self.log.last_mut() {
                last.residual = residual;
                last.energy = change;
            }
        }
        let converged = residual.is_finite() && self.rule_met(residual, last_move, dhat);
        if reference.is_some() {
            // The report's energies are the step problem's, as every solver's (the KKT values
            // above are the barrier-free objective's): one backend pass at the final x.
            let (_, ch) = self.backend.admm_gradient(problem, elastic, self.g)?;
            change = self.backend.read(&[ch])?[0];
        }
        let (energy, energy_change) = self.backend.finish_step(problem, elastic, change, x)?;
        Ok(StepReport {
            iterations,
            converged,
            residual,
            energy,
            energy_change,
            wall_ms: ms(start),
            timings,
            work: StepWork {
                refactorisations: self.system.factorizations() - factorizations,
                primal: self.log.last().map(|l| l.primal),
                dual: self.log.last().map(|l| l.dual),
                ..StepWork::default()
            },
            trace: records,
            ..StepReport::default()
        })
    }
}
