//! Obstacle contact in ADMM's global step without refactoring A (the paper's Sec. 5, Alg. 2,
//! eq. 47), and its explicit Coulomb friction (Sec. 4.3).
//!
//! # The constrained global step
//! Each global step solves, instead of A y = b,
//!
//! ```text
//! min_y ½ yᵀA y − bᵀy   subject to   n_i·y_{v_i} ≥ t_i   for every row i,
//! KKT:  A y = b + Cᵀλ,  λ ≥ 0,  λ_i (n_i·y_{v_i} − t_i) = 0
//! ```
//!
//! on the same factor of A ([`GlobalSystem`]: nothing is ever refactored for contact; the
//! factorisation counter stays put — `tests/cpu/admm_contact.rs`). λ_i is the normal force on
//! vertex v_i, N; Cᵀλ puts λ_i n_i on that vertex.
//!
//! **Rows** ([`detect`]): at the current iterate x, every free vertex within the band
//! d < (1 + [`BAND`])·d̂ of an obstacle (d the signed distance of
//! [`crate::problem::Obstacle::distance`], spheres included: ADMM constrains vertices, not
//! triangles) gets the paper's linearised slide row n·y ≥ n·p + d̂ — n the outward normal at
//! p, p the nearest surface point to x_v. The constraint surface is the obstacle offset by
//! d̂, the barrier's activation distance (`[contact] dhat`): every obstacle is convex, so the
//! row's half-space lies outside the offset obstacle and a vertex that meets its row is at
//! distance ≥ d̂ — never on a surface, where the state checks and the next step's start
//! (which evaluates the barrier) would see a contact. After a solve, a vertex that ended
//! closer than d̂ to an obstacle it had no row for gets one (linearised at x, where it was
//! outside) and the step is solved again ([`MAX_ROUNDS`] rounds at most), so every global
//! step ends feasible. Vertex rows cannot stop an obstacle's edge, corner or a small sphere
//! from poking into a face between its vertices (a box edge under a face; a sphere whose
//! bulge under a face, L²/8R, exceeds d̂): the paper's nodal constraints have the same limit.
//!
//! **Activity.** The paper treats rows as equalities (with an ε band against jitter) and
//! notes Uzawa CG then stalls on unilateral contact. Here both variants solve the inequality
//! problem above, so a vertex can leave the surface (a bouncing ball) and the KKT residual
//! below is the true one:
//! - [`ContactVariant::Uzawa`] (Alg. 2 with its minus signs restored): CG on
//!   S λ_W = t_W − C_W A⁻¹ b over a working set W (the rows with λ > 0 in the warm start —
//!   the last global step's λ per vertex and obstacle, within the step —, then the rows the last solve
//!   violated), one factor solve per CG iteration; after CG, rows of W with λ < 0 leave W
//!   (λ = 0), rows outside W that y violates join it, and CG runs again (a primal–dual
//!   active-set loop, at most [`MAX_ROUNDS`] rounds). CG stops when every row of W is met to
//!   `tolerance`·d̂ (m) or after `iterations` CG iterations. The iterate y is updated with λ
//!   (x += α A⁻¹Cᵀs), so a CG iteration costs one three-column solve.
//! - [`ContactVariant::Pgs`] (eq. 47): Gauss–Seidel sweeps over the free vertices on the
//!   rows of A (assembled once per factor from the same weights; not a factorisation) — each
//!   vertex block of A is a_vv·I, so the vertex's exact minimiser with its neighbours fixed is
//!   r_v/a_vv, and under a row it is that point projected onto the row's half-space (the
//!   paper's tangent projection G Gᵀ(·) + p when the row is active; left alone when the point
//!   is already outside: projected Gauss–Seidel on the convex QP, which lowers ½yᵀAy − bᵀy
//!   monotonically). It starts from the better (lower objective) of the current iterate and
//!   the factor's A⁻¹(b + Cᵀλ_warm), both projected — the factor carries the body's weight
//!   from the first sweep, the iterate guards against a poor warm λ (a falling body's first
//!   iterations: taking the factor's start unconditionally let a too-large λ throw the ball
//!   up and the sweeps never recovered). Optional SOR (`sor` = ω ∈ (0, 2), applied before the
//!   projection). Nodal rows make each vertex its own block, so a colouring only matters for
//!   a parallel sweep; the CPU sweeps in vertex order (one valid Gauss–Seidel order). Stops
//!   when a sweep moves no vertex more than `tolerance`·d̂ or after `iterations` sweeps; then
//!   λ from the vertex's force (A y − b)_v = Σ λ_i n_i over its rows met within tolerance
//!   (n·F for one row, least squares for a vertex near several obstacles), clamped at 0. A
//!   vertex with several rows is projected exactly onto their intersection
//!   (`project_point`).
//!
//! Measured (module docs of [`super`]): Uzawa needs 3.8 CG iterations per global step on
//! `drop.toml` and reaches a relative error of 1.6e-8 on the resting ball where PGS stalls
//! at 3e-3 (its sweeps do not converge on A ≈ the Laplacian at h = 0.2 s), so Uzawa is the
//! default.
//!
//! # Friction (explicit, non-conservative)
//! `friction = μ > 0` (one coefficient for every obstacle: the scene schema has none per
//! obstacle): after every solve, each vertex with an active row (λ > 0) updates a tangential
//! force f_T carried into the next global step's right-hand side (the paper feeds Coulomb's
//! law into f_ext "during the iterations"):
//! f_T ← clamp_{|f| ≤ μλ}(f_T − (m_v/h)·v_T), v_T the tangential part of (y_v − xᵗ_v)/h (under
//! BDF2 h → ĥ = 2h/3 and xᵗ → x̂ = 4/3 xᵗ − 1/3 xᵗ⁻¹: its velocity is (y − x̂)/ĥ and an impulse
//! changes it by ĥ f/m; with xᵗ and h instead, a block sliding at 0.5 m/s on a plane with
//! μ = 0.5 bounced back at 2.1e-2 m/s where it stopped, against 7.4e-3 m/s with x̂ and ĥ — the
//! rest is the elastic rocking of a block whose base is held). The increment is the force that
//! would stop the vertex's tangential motion this step if only its own inertia resisted (exact
//! for a sliding rigid body, an under-estimate otherwise), so a vertex's friction never
//! reverses its motion; the clamp is Coulomb's cone (static and
//! kinetic μ alike). Like the paper's this is not the gradient of anything — the paper calls
//! it a non-conservative approximation that is "not strictly applicable" to its fixed
//! objective: the step's problem changes while it is solved, and a converged step is a fixed
//! point of ADMM together with the friction force it ends with. Friction starts at zero each
//! step; vertices without an active row carry none.
//!
//! # What converged means with contact
//! ADMM's objective with obstacles is E(x) = ½‖x − x̃‖²_M/h² + Ψ(x) subject to the rows —
//! the IPC barrier of the other solvers is left out ([`kkt_gradient`]): its surface-pair
//! terms (a face over a sphere, closer than d̂ between vertices that are at d̂) are not
//! constrained by vertex rows, and keeping them left a residual floor (9.5e-5 on a cube
//! dropped on a sphere, never below ε). The shared stop rule (`--stop cn`; `dx` as before)
//! runs on the KKT residual g = ∇E(x) − Cᵀλ − f_T, with λ of the last global step and f_T
//! the friction force *after* its update (so a step whose friction still changes is not
//! converged), zero on pinned DOFs; and converged also requires feasibility: every vertex at
//! distance ≥ d̂ − `tolerance`·d̂ from every obstacle. Note the rule's scale: ε = 1e-5 is a
//! force tolerance of ε‖C‖ℓ per vertex, which for a stiff block is a sizeable fraction of
//! its weight — the friction test runs at ε = 1e-9.

use crate::error::{JelloError, Result};
use crate::problem::{ElasticReference, ElasticTerms, Model, StepProblem};
use crate::solver::pd::{element_operator, operator_gram, GlobalSystem};
use nalgebra::Vector3;
use std::collections::HashMap;

/// The ε band, in units of d̂: rows for vertices within (1 + BAND)·d̂ of an obstacle (the
/// paper's "vertices within ε count as colliding"; with λ ≥ 0 handled, a row that is not
/// needed costs only its bookkeeping, and the band saves re-solve rounds for vertices moving
/// in).
pub const BAND: f64 = 1.0;

/// Rounds at most per global step: Uzawa's active-set updates and, for both variants, rows
/// added for vertices that ended inside the band without one.
pub const MAX_ROUNDS: usize = 16;

/// How the constrained global step is solved (`[solver] contact`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContactVariant {
    /// Uzawa CG on the Schur complement C A⁻¹ Cᵀ (the paper's Alg. 2), active-set λ ≥ 0.
    Uzawa,
    /// Projected Gauss–Seidel on the rows of A in the constraint tangent spaces (eq. 47).
    Pgs,
}

impl ContactVariant {
    /// Name as in scene files.
    pub fn name(self) -> &'static str {
        match self {
            ContactVariant::Uzawa => "uzawa",
            ContactVariant::Pgs => "pgs",
        }
    }

    /// Parses a scene-file name.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "uzawa" => Some(ContactVariant::Uzawa),
            "pgs" => Some(ContactVariant::Pgs),
            _ => None,
        }
    }
}

/// Contact options of ADMM (`[solver]` keys `contact`, `contact_iterations`,
/// `contact_tolerance`, `sor`, `friction`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ContactParams {
    /// The constrained solve (default [`ContactVariant::Uzawa`], measured faster per accuracy
    /// in the module docs of [`super`]).
    pub variant: ContactVariant,
    /// Inner cap: CG iterations per active-set round (Uzawa) or sweeps (PGS), ≥ 1
    /// (default 200).
    pub iterations: usize,
    /// Inner tolerance as a fraction of d̂ (dimensionless, > 0; default 1e-6): CG stops when
    /// every working row is met within it, PGS when a sweep moves no vertex by more.
    pub tolerance: f64,
    /// PGS over-relaxation ω ∈ (0, 2) (default 1: plain Gauss–Seidel).
    pub sor: f64,
    /// Coulomb friction coefficient μ ≥ 0 against every obstacle (default 0, frictionless).
    pub friction: f64,
}

impl Default for ContactParams {
    fn default() -> Self {
        ContactParams {
            variant: ContactVariant::Uzawa,
            iterations: 200,
            tolerance: 1e-6,
            sor: 1.0,
            friction: 0.0,
        }
    }
}

impl ContactParams {
    /// One line naming the `[solver]` key of the first bad value, if any.
    pub fn check(&self) -> Option<String> {
        if self.iterations == 0 {
            return Some("solver.contact_iterations must be ≥ 1".into());
        }
        let t = self.tolerance;
        if !(t.is_finite() && t > 0.0) {
            return Some(format!(
                "solver.contact_tolerance must be finite and > 0, got {t}"
            ));
        }
        let w = self.sor;
        if !(w.is_finite() && w > 0.0 && w < 2.0) {
            return Some(format!("solver.sor must be in (0, 2), got {w}"));
        }
        let mu = self.friction;
        if !(mu.is_finite() && mu >= 0.0) {
            return Some(format!("solver.friction must be finite and ≥ 0, got {mu}"));
        }
        None
    }
}

/// One linearised contact row n·y_v ≥ t.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ContactRow {
    /// The vertex.
    pub vertex: u32,
    /// The obstacle (index into the model's obstacles).
    pub obstacle: u32,
    /// Outward unit normal at the nearest surface point.
    pub normal: Vector3<f64>,
    /// n·p + d̂, m.
    pub target: f64,
    /// Normal force, N (≥ 0; 0 when the row is not active).
    pub lambda: f64,
}

/// What the step's problem gives the contact solve (everything it reads, passed explicitly).
#[derive(Clone, Copy)]
pub struct ContactInput<'a> {
    /// The model: obstacles, d̂, lumped masses, and the element data of A's rows (PGS).
    pub model: &'a Model,
    /// Per vertex: pinned this step (eliminated from A).
    pub pinned: &'a [bool],
    /// A's mass weight (1/ĥ², 1/s²: [`crate::problem::StepProblem::inertia`]).
    pub mass_weight: f64,
    /// The base x̂ of the step's velocity, m: v = (y − x̂)/ĥ (friction's velocities; xᵗ under
    /// implicit Euler, [`crate::problem::StepProblem::x_hat`]).
    pub x_prev: &'a [f64],
    /// ĥ, s: the time step under implicit Euler, 2h/3 under BDF2
    /// ([`crate::problem::StepProblem::h_hat`]).
    pub h: f64,
}

/// What one constrained global step did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ContactSolve {
    /// Rows (vertex–obstacle pairs in the band, plus those added for violators).
    pub rows: usize,
    /// Rows with λ > 0 at the end.
    pub active: usize,
    /// CG iterations (Uzawa) or sweeps (PGS), all rounds together.
    pub inner: usize,
    /// Factor solves (three right-hand sides each).
    pub solves: usize,
    /// Rounds (active-set updates and added rows), ≥ 1.
    pub rounds: usize,
    /// Largest row violation t − n·y left, m (≤ 0 when every row is met).
    pub violation: f64,
    /// Largest ∞-norm friction force applied in this solve's right-hand side, N.
    pub friction: f64,
}

/// Counters summed over every global step since the solver was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContactTotals {
    /// Constrained global steps.
    pub global_steps: usize,
    /// CG iterations (Uzawa) or sweeps (PGS).
    pub inner: usize,
    /// Factor solves (three right-hand sides each).
    pub solves: usize,
    /// Rounds (active-set updates and added rows).
    pub rounds: usize,
}

/// The rows of A on the free vertices, for PGS: a_vv (mass weight·m_v plus the stiffness
/// diagonal) and the off-diagonal entries to free neighbours (pinned couplings are in the
/// right-hand side already).
struct Rows {
    factor: Option<u64>,
    free: Vec<bool>,
    diag: Vec<f64>,
    start: Vec<usize>,
    cols: Vec<u32>,
    vals: Vec<f64>,
}

impl Rows {
    fn build(system: &GlobalSystem, input: &ContactInput) -> Rows {
        let m = input.model;
        let nv = m.num_vertices();
        let w = system.weights();
        let mut diag: Vec<f64> = (0..nv).map(|v| input.mass_weight * m.mass[v]).collect();
        let mut off: Vec<HashMap<u32, f64>> = vec![HashMap::new(); nv];
        for (t, tet) in m.mesh.tets.iter().enumerate() {
            let gram = operator_gram(&element_operator(&m.rest[t]));
            for a in 0..4 {
                let va = tet[a] as usize;
                if input.pinned[va] {
                    continue;
                }
                for b in 0..4 {
                    let vb = tet[b];
                    if a == b {
                        diag[va] += w[t] * gram[a][a];
                    } else if !input.pinned[vb as usize] {
                        *off[va].entry(vb).or_insert(0.0) += w[t] * gram[a][b];
                    }
                }
            }
        }
        let mut start = Vec::with_capacity(nv + 1);
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for o in off {
            start.push(cols.len());
            let mut e: Vec<(u32, f64)> = o.into_iter().collect();
            e.sort_unstable_by_key(|p| p.0);
            for (c, v) in e {
                cols.push(c);
                vals.push(v);
            }
        }
        start.push(cols.len());
        Rows {
            factor: system.factor_id(),
            free: input.pinned.iter().map(|p| !p).collect(),
            diag,
            start,
            cols,
            vals,
        }
    }

    /// ½yᵀA y − bᵀy over the free vertices (pinned rows have a_vv = … and b = 0 ignored).
    fn objective(&self, b: &[f64], y: &[f64]) -> f64 {
        let mut e = 0.0;
        for v in 0..self.diag.len() {
            if self.free[v] {
                let yv = vertex(y, v);
                let r = self.off_residual(v, b, y);
                // ½ y_v·(a_vv y_v + Σ a_vj y_j) − b_v·y_v = ½ y_v·(a_vv y_v − r_v) − ½ b_v·y_v.
                e += 0.5 * yv.dot(&(yv * self.diag[v] - r)) - 0.5 * vertex(b, v).dot(&yv);
            }
        }
        e
    }

    /// r_v = b_v − Σ_{j≠v} a_vj y_j.
    fn off_residual(&self, v: usize, b: &[f64], y: &[f64]) -> Vector3<f64> {
        let mut r = Vector3::new(b[3 * v], b[3 * v + 1], b[3 * v + 2]);
        for k in self.start[v]..self.start[v + 1] {
            let j = self.cols[k] as usize;
            r -= self.vals[k] * Vector3::new(y[3 * j], y[3 * j + 1], y[3 * j + 2]);
        }
        r
    }
}

/// The contact rows at positions `x` (3n, m): every free vertex within (1 + [`BAND`])·d̂ of
/// an obstacle, linearised at its nearest surface point, with λ = 0.
pub fn detect(model: &Model, pinned: &[bool], x: &[f64], out: &mut Vec<ContactRow>) {
    out.clear();
    let dhat = model.barrier.dhat;
    for v in (0..model.num_vertices()).filter(|&v| !pinned[v]) {
        let p = vertex(x, v);
        for (o, obstacle) in model.obstacles.iter().enumerate() {
            let de = obstacle.distance(&p);
            if de.d < (1.0 + BAND) * dhat {
                out.push(row_at(v, o, &de.grad, de.d, &p, dhat));
            }
        }
    }
}

fn row_at(v: usize, o: usize, n: &Vector3<f64>, d: f64, p: &Vector3<f64>, dhat: f64) -> ContactRow {
    // Nearest surface point q = p − d n: n·q + d̂ = n·p − d + d̂.
    ContactRow {
        vertex: v as u32,
        obstacle: o as u32,
        normal: *n,
        target: n.dot(p) - d + dhat,
        lambda: 0.0,
    }
}

/// ADMM's objective with contact and its KKT residual: E(x) = ½‖x − x̃‖²_M/h² + Ψ(x) (no
/// obstacle barrier: the rows replace it) and g = ∇E(x) − `forces` (Cᵀλ and friction of the
/// last global step) into `g`, zero on pinned DOFs. Returns (E(x), E(x) − E(x_start)) with
/// `reference` = Ψ at `problem.x_start` ([`ElasticTerms::elastic_reference`]). Static
/// increments (no inertia) take the load's potential −f·x instead.
pub fn kkt_gradient(
    problem: &StepProblem,
    elastic: &dyn ElasticTerms,
    reference: &ElasticReference,
    forces: &[f64],
    x: &[f64],
    g: &mut [f64],
) -> (f64, f64) {
    g.iter_mut().for_each(|v| *v = 0.0);
    let (psi, dpsi) = elastic.elastic_gradient_and_change(x, g, reference);
    let model = problem.model;
    let w = problem.inertia;
    let x0 = &problem.x_start;
    let mut inertia_change = 0.0;
    for (v, m) in model.mass.iter().enumerate() {
        let mut s = 0.0;
        for k in 0..3 {
            let i = 3 * v + k;
            g[i] += m * w * (x[i] - problem.x_tilde[i]);
            // ½m·w·(x − x₀)·(x + x₀ − 2x̃): the change without the inertia's large constant.
            s += (x[i] - x0[i]) * (x[i] + x0[i] - 2.0 * problem.x_tilde[i]);
        }
        inertia_change += 0.5 * m * w * s;
    }
    for (i, f) in problem.load.iter().enumerate() {
        g[i] -= f;
        inertia_change -= f * (x[i] - x0[i]);
    }
    for (i, gi) in g.iter_mut().enumerate() {
        if problem.fixed[i] {
            *gi = 0.0;
        } else if let Some(f) = forces.get(i) {
            *gi -= f;
        }
    }
    (psi + problem.inertia_energy(x), inertia_change + dpsi)
}

/// The Euclidean projection of `p` onto the intersection of the half-spaces n_i·y ≥ t_i of
/// `rows` (one vertex's rows: the exact minimiser of that vertex's block a_vv·I under them).
/// One row: a single projection; several (a vertex near two obstacles): the KKT point among
/// the projections onto every subset of at most three rows' planes (the feasible one with
/// multipliers ≥ 0 nearest to `p`); sequential projections if no subset qualifies
/// (degenerate normals).
fn project_point(p: Vector3<f64>, rows: &[&ContactRow]) -> Vector3<f64> {
    let gap = |r: &ContactRow, y: &Vector3<f64>| r.target - r.normal.dot(y);
    if rows.iter().all(|r| gap(r, &p) <= 0.0) {
        return p;
    }
    if rows.len() == 1 {
        return p + rows[0].normal * gap(rows[0], &p);
    }
    let k = rows.len().min(16);
    let mut best: Option<(f64, Vector3<f64>)> = None;
    for mask in 1u32..(1 << k) {
        if mask.count_ones() > 3 {
            continue;
        }
        let set: Vec<&ContactRow> = (0..k)
            .filter(|&i| mask & (1 << i) != 0)
            .map(|i| rows[i])
            .collect();
        let m = set.len();
        let gram = nalgebra::DMatrix::from_fn(m, m, |i, j| set[i].normal.dot(&set[j].normal));
        let rhs = nalgebra::DVector::from_fn(m, |i, _| gap(set[i], &p));
        let Some(mu) = gram.cholesky().map(|c| c.solve(&rhs)) else {
            continue;
        };
        if mu.iter().any(|&v| v < -1e-12) {
            continue;
        }
        let mut y = p;
        for (i, r) in set.iter().enumerate() {
            y += r.normal * mu[i];
        }
        let slack = 1e-12 * (1.0 + p.amax());
        if rows.iter().any(|r| gap(r, &y) > slack) {
            continue;
        }
        let d = (y - p).norm_squared();
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, y));
        }
    }
    match best {
        Some((_, y)) => y,
        None => {
            let mut y = p;
            for r in rows {
                let g = gap(r, &y);
                if g > 0.0 {
                    y += r.normal * g;
                }
            }
            y
        }
    }
}

fn vertex(x: &[f64], v: usize) -> Vector3<f64> {
    Vector3::new(x[3 * v], x[3 * v + 1], x[3 * v + 2])
}

/// The constrained global step with its state across iterations (warm-start λ, friction,
/// PGS's rows of A); see the module docs. Owned by the caller's loop, which resets it per
/// step with [`Self::begin_step`].
pub struct ContactSolver {
    params: ContactParams,
    rows: Vec<ContactRow>,
    /// λ per (vertex, obstacle) of the last solve (warm start).
    warm: HashMap<(u32, u32), f64>,
    /// Tangential friction force per vertex carried into the next solve, N (3n).
    friction: Vec<f64>,
    /// Cᵀλ + friction of the last solve, N (3n): the contact forces the KKT residual takes off.
    forces: Vec<f64>,
    gs: Option<Rows>,
    last: ContactSolve,
    totals: ContactTotals,
    violation: f64,
}

impl ContactSolver {
    /// A contact solve with `params` (checked: one line naming the key).
    pub fn new(params: ContactParams) -> Result<Self> {
        if let Some(why) = params.check() {
            return Err(JelloError::Invalid(format!("admm: {why}")));
        }
        Ok(ContactSolver {
            params,
            rows: Vec::new(),
            warm: HashMap::new(),
            friction: Vec::new(),
            forces: Vec::new(),
            gs: None,
            last: ContactSolve::default(),
            totals: ContactTotals::default(),
            violation: 0.0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &ContactParams {
        &self.params
    }

    /// Starts a time step of `nv` vertices: friction, contact forces and the warm-start λ to
    /// zero — nothing is carried between steps (as ADMM's ū), so a run resumed from a
    /// checkpoint repeats the straight run's steps bit for bit.
    pub fn begin_step(&mut self, nv: usize) {
        self.warm.clear();
        self.friction.clear();
        self.friction.resize(3 * nv, 0.0);
        self.forces.clear();
        self.forces.resize(3 * nv, 0.0);
        self.rows.clear();
        self.violation = 0.0;
    }

    /// The rows of the last global step with their λ.
    pub fn rows(&self) -> &[ContactRow] {
        &self.rows
    }

    /// What the last global step did.
    pub fn last(&self) -> ContactSolve {
        self.last
    }

    /// Counters over every global step so far.
    pub fn totals(&self) -> ContactTotals {
        self.totals
    }

    /// Cᵀλ plus the friction force of the last global step, N (3n).
    pub fn forces(&self) -> &[f64] {
        &self.forces
    }

    /// Whether every vertex ended the last global step at distance ≥ d̂ − tolerance·d̂ of
    /// every obstacle (m); see [`Self::global_step`].
    pub fn feasible(&self, dhat: f64) -> bool {
        self.violation <= self.params.tolerance * dhat
    }

    /// One constrained global step: `rhs` is b (3n, N, pinned couplings subtracted as for
    /// [`GlobalSystem::solve`]), `x` the current positions (3n, m: the rows are linearised
    /// there, pinned vertices are copied from it), `out` receives the new positions. The
    /// friction force carried from the last call is added to b; after the solve the rows'
    /// λ, the contact forces and the next friction force are updated. A must be prepared
    /// for `input`'s pins and mass weight; it is only solved with, never changed.
    pub fn global_step(
        &mut self,
        system: &mut GlobalSystem,
        input: &ContactInput,
        rhs: &[f64],
        x: &[f64],
        out: &mut [f64],
    ) -> Result<ContactSolve> {
        let model = input.model;
        let nv = model.num_vertices();
        if rhs.len() != 3 * nv || x.len() != 3 * nv || out.len() != 3 * nv {
            return Err(JelloError::Solver(format!(
                "admm contact: vectors of {} / {} / {} values for {nv} vertices",
                rhs.len(),
                x.len(),
                out.len()
            )));
        }
        if self.friction.len() != 3 * nv {
            self.begin_step(nv);
        }
        let dhat = model.barrier.dhat;
        let tol = self.params.tolerance * dhat;
        let mut b = rhs.to_vec();
        for (bk, f) in b.iter_mut().zip(&self.friction) {
            *bk += f;
        }
        let mut report = ContactSolve {
            friction: self.friction.iter().fold(0.0f64, |m, f| m.max(f.abs())),
            ..ContactSolve::default()
        };
        detect(model, input.pinned, x, &mut self.rows);
        for r in self.rows.iter_mut() {
            r.lambda = self
                .warm
                .get(&(r.vertex, r.obstacle))
                .copied()
                .unwrap_or(0.0);
        }
        if self.params.variant == ContactVariant::Pgs
            && self
                .gs
                .as_ref()
                .is_none_or(|g| g.factor != system.factor_id())
        {
            self.gs = Some(Rows::build(system, input));
        }
        out.copy_from_slice(x);
        loop {
            report.rounds += 1;
            match self.params.variant {
                ContactVariant::Uzawa => {
                    self.uzawa(system, &b, out, tol, &mut report)?;
                }
                ContactVariant::Pgs => {
                    self.pgs(system, &b, out, tol, &mut report)?;
                }
            }
            // Vertices that ended within d̂ of an obstacle they have no row for.
            let before = self.rows.len();
            for v in (0..nv).filter(|&v| !input.pinned[v]) {
                let p = vertex(out, v);
                for (o, obstacle) in model.obstacles.iter().enumerate() {
                    if obstacle.distance(&p).d < dhat - tol
                        && !self
                            .rows
                            .iter()
                            .any(|r| r.vertex as usize == v && r.obstacle as usize == o)
                    {
                        let px = vertex(x, v);
                        let de = obstacle.distance(&px);
                        self.rows.push(row_at(v, o, &de.grad, de.d, &px, dhat));
                    }
                }
            }
            if self.rows.len() == before || report.rounds >= MAX_ROUNDS {
                break;
            }
        }
        for v in (0..nv).filter(|&v| input.pinned[v]) {
            out[3 * v..3 * v + 3].copy_from_slice(&x[3 * v..3 * v + 3]);
        }
        // Feasibility at the end (true distances, every obstacle).
        let mut violation: f64 = f64::NEG_INFINITY;
        for v in (0..nv).filter(|&v| !input.pinned[v]) {
            let p = vertex(out, v);
            for o in &model.obstacles {
                violation = violation.max(dhat - o.distance(&p).d);
            }
        }
        self.violation = violation;
        report.violation = self
            .rows
            .iter()
            .map(|r| r.target - r.normal.dot(&vertex(out, r.vertex as usize)))
            .fold(f64::NEG_INFINITY, f64::max);
        report.rows = self.rows.len();
        report.active = self.rows.iter().filter(|r| r.lambda > 0.0).count();
        // Contact forces of this solve (what A y − b balances), then friction for the next.
        self.forces.iter_mut().for_each(|f| *f = 0.0);
        for r in &self.rows {
            let v = r.vertex as usize;
            for c in 0..3 {
                self.forces[3 * v + c] += r.lambda * r.normal[c];
            }
        }
        // Friction for the next solve; the residual takes the updated force, so a step whose
        // friction has not settled (f_T still changing) is not converged.
        self.update_friction(input, out);
        for (f, fr) in self.forces.iter_mut().zip(&self.friction) {
            *f += fr;
        }
        self.warm.clear();
        for r in self.rows.iter().filter(|r| r.lambda > 0.0) {
            self.warm.insert((r.vertex, r.obstacle), r.lambda);
        }
        self.last = report;
        self.totals.global_steps += 1;
        self.totals.inner += report.inner;
        self.totals.solves += report.solves;
        self.totals.rounds += report.rounds;
        Ok(report)
    }

    /// Coulomb friction for the next solve; see the module docs.
    fn update_friction(&mut self, input: &ContactInput, y: &[f64]) {
        let mu = self.params.friction;
        if mu == 0.0 {
            return;
        }
        let h = input.h;
        let mut normal: HashMap<u32, (Vector3<f64>, f64)> = HashMap::new();
        for r in self.rows.iter().filter(|r| r.lambda > 0.0) {
            let e = normal.entry(r.vertex).or_insert((Vector3::zeros(), 0.0));
            e.0 += r.lambda * r.normal;
            e.1 += r.lambda;
        }
        let mut next = vec![0.0; self.friction.len()];
        for (&v, &(fn_vec, _)) in &normal {
            let v = v as usize;
            let fnorm = fn_vec.norm();
            if fnorm == 0.0 {
                continue;
            }
            let n = fn_vec / fnorm;
            let vel = (vertex(y, v) - vertex(input.x_prev, v)) / h;
            let vt = vel - n * n.dot(&vel);
            let f0 = vertex(&self.friction, v);
            let mut ft = f0 - n * n.dot(&f0) - vt * (input.model.mass[v] / h);
            let cap = mu * fnorm;
            let len = ft.norm();
            if len > cap {
                ft *= cap / len;
            }
            for c in 0..3 {
                next[3 * v + c] = ft[c];
            }
        }
        self.friction = next;
    }

    /// Cᵀλ over `rows` with multipliers `lam` into a fresh 3n vector added to `base`.
    fn scatter(rows: &[ContactRow], lam: impl Fn(usize) -> f64, base: &[f64]) -> Vec<f64> {
        let mut f = base.to_vec();
        for (i, r) in rows.iter().enumerate() {
            let l = lam(i);
            if l != 0.0 {
                let v = r.vertex as usize;
                for c in 0..3 {
                    f[3 * v + c] += l * r.normal[c];
                }
            }
        }
        f
    }

    /// Uzawa CG with the active-set update of λ (one round of the caller's loop may run
    /// several active-set rounds); writes y into `y`.
    fn uzawa(
        &mut self,
        system: &mut GlobalSystem,
        b: &[f64],
        y: &mut [f64],
        tol: f64,
        report: &mut ContactSolve,
    ) -> Result<()> {
        let cap = self.params.iterations;
        let rows = &mut self.rows;
        let mut working: Vec<bool> = rows.iter().map(|r| r.lambda > 0.0).collect();
        let gap =
            |r: &ContactRow, y: &[f64]| r.target - r.normal.dot(&vertex(y, r.vertex as usize));
        for _ in 0..MAX_ROUNDS {
            // y = A⁻¹(b + C_Wᵀλ_W).
            let mut rhs = Self::scatter(rows, |i| if working[i] { rows[i].lambda } else { 0.0 }, b);
            system.solve(&mut rhs)?;
            report.solves += 1;
            y.copy_from_slice(&rhs);
            let w: Vec<usize> = (0..rows.len()).filter(|&i| working[i]).collect();
            if !w.is_empty() {
                // CG on S λ_W = t_W − C_W A⁻¹b, from the current λ_W; r = t − C y.
                let mut r: Vec<f64> = w.iter().map(|&i| gap(&rows[i], y)).collect();
                let mut p = r.clone();
                let mut rr: f64 = r.iter().map(|v| v * v).sum();
                let mut iters = 0;
                let zero = vec![0.0; y.len()];
                while r.iter().fold(0.0f64, |m, v| m.max(v.abs())) > tol && iters < cap {
                    iters += 1;
                    let mut q = Self::scatter(
                        rows,
                        |i| match w.binary_search(&i) {
                            Ok(k) => p[k],
                            Err(_) => 0.0,
                        },
                        &zero,
                    );
                    system.solve(&mut q)?;
                    report.solves += 1;
                    let a: Vec<f64> = w
                        .iter()
                        .map(|&i| {
                            let rw = &rows[i];
                            rw.normal.dot(&vertex(&q, rw.vertex as usize))
                        })
                        .collect();
                    let pa: f64 = p.iter().zip(&a).map(|(p, a)| p * a).sum();
                    if pa.is_nan() || pa <= 0.0 {
                        break;
                    }
                    let alpha = rr / pa;
                    for (yk, qk) in y.iter_mut().zip(&q) {
                        *yk += alpha * qk;
                    }
                    for (k, &i) in w.iter().enumerate() {
                        rows[i].lambda += alpha * p[k];
                        r[k] -= alpha * a[k];
                    }
                    let rr_new: f64 = r.iter().map(|v| v * v).sum();
                    let beta = rr_new / rr;
                    rr = rr_new;
                    for (pk, rk) in p.iter_mut().zip(&r) {
                        *pk = rk + beta * *pk;
                    }
                }
                report.inner += iters;
            }
            // Active-set update: negative λ leave, violated rows join.
            let mut changed = false;
            for (i, r) in rows.iter_mut().enumerate() {
                if working[i] && r.lambda < 0.0 {
                    working[i] = false;
                    r.lambda = 0.0;
                    changed = true;
                } else if !working[i] && gap(r, y) > tol {
                    working[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for (i, r) in rows.iter_mut().enumerate() {
            if !working[i] {
                r.lambda = 0.0;
            }
        }
        Ok(())
    }

    /// Projected Gauss–Seidel from the factor's warm start; writes y into `y`.
    fn pgs(
        &mut self,
        system: &mut GlobalSystem,
        b: &[f64],
        y: &mut [f64],
        tol: f64,
        report: &mut ContactSolve,
    ) -> Result<()> {
        let rows = &mut self.rows;
        let gs = self.gs.as_ref().expect("built before the solve");
        // Rows per vertex.
        let mut at: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, r) in rows.iter().enumerate() {
            at.entry(r.vertex).or_default().push(i);
        }
        let project = |y: &mut [f64]| {
            for list in at.values() {
                let v = rows[list[0]].vertex as usize;
                let mine: Vec<&ContactRow> = list.iter().map(|&i| &rows[i]).collect();
                let p = project_point(vertex(y, v), &mine);
                for c in 0..3 {
                    y[3 * v + c] = p[c];
                }
            }
        };
        // Start: the better (lower ½yᵀAy − bᵀy) of the current iterate and the factor's
        // A⁻¹(b + Cᵀλ_warm), each projected onto the rows. Gauss–Seidel then decreases the
        // objective monotonically, so a poor warm λ (a falling body's first iterations)
        // cannot throw the solve off.
        let mut start = Self::scatter(rows, |i| rows[i].lambda.max(0.0), b);
        system.solve(&mut start)?;
        report.solves += 1;
        if rows.is_empty() {
            // No rows: the factor's solve is the answer.
            y.copy_from_slice(&start);
            return Ok(());
        }
        project(&mut start);
        project(y);
        if gs.objective(b, &start) < gs.objective(b, y) {
            y.copy_from_slice(&start);
        }
        let omega = self.params.sor;
        let free: Vec<usize> = (0..gs.diag.len()).filter(|&v| system.is_free(v)).collect();
        let mut sweeps = 0;
        loop {
            sweeps += 1;
            let mut moved: f64 = 0.0;
            for &v in &free {
                let old = vertex(y, v);
                let gsv = gs.off_residual(v, b, y) / gs.diag[v];
                let mut new = old + (gsv - old) * omega;
                if let Some(list) = at.get(&(v as u32)) {
                    let mine: Vec<&ContactRow> = list.iter().map(|&i| &rows[i]).collect();
                    new = project_point(new, &mine);
                }
                moved = moved.max((new - old).amax());
                for c in 0..3 {
                    y[3 * v + c] = new[c];
                }
            }
            if moved <= tol || sweeps >= self.params.iterations {
                break;
            }
        }
        report.inner += sweeps;
        // λ from the vertex equations at y: the force F = a_vv y_v − r_v the rows exert,
        // F = Σ λ_i n_i over the vertex's rows met within tolerance (n·F for one row; least
        // squares for several), clamped at 0.
        for list in at.values() {
            let v = rows[list[0]].vertex as usize;
            let yv = vertex(y, v);
            let force = yv * gs.diag[v] - gs.off_residual(v, b, y);
            let met: Vec<usize> = list
                .iter()
                .copied()
                .filter(|&i| rows[i].target - rows[i].normal.dot(&yv) >= -tol)
                .collect();
            for &i in list {
                rows[i].lambda = 0.0;
            }
            match met.len() {
                0 => {}
                1 => rows[met[0]].lambda = rows[met[0]].normal.dot(&force).max(0.0),
                m => {
                    let n = nalgebra::DMatrix::from_fn(3, m, |c, j| rows[met[j]].normal[c]);
                    let f = nalgebra::DVector::from_column_slice(force.as_slice());
                    if let Ok(l) = n.svd(true, true).solve(&f, 1e-12) {
                        for (j, &i) in met.iter().enumerate() {
                            rows[i].lambda = l[j].max(0.0);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::material::{Material, MaterialModel};
    use crate::mesh::box_grid;
    use crate::problem::{BarrierParams, Body};
    use crate::solver::pd::GlobalOptions;

    /// PGS's rows of A are the factor's A: a_vv y_v + Σ a_vj y_j equals
    /// [`GlobalSystem::apply`] on every free vertex (one vertex pinned), to round-off.
    #[test]
    fn pgs_rows_are_the_global_matrix() {
        let mesh = box_grid([0.0; 3], [0.2, 0.1, 0.1], [4, 2, 2]);
        let (nv, nt) = (mesh.num_vertices(), mesh.num_tets());
        let mat = Material::from_young_poisson(MaterialModel::NeoHookean, 1e5, 0.3).unwrap();
        let model = Model::new(
            mesh,
            vec![Body {
                name: "b".into(),
                vertices: 0..nv,
                tets: 0..nt,
            }],
            vec![mat; nt],
            vec![1000.0; nt],
            [0.0; 3],
            vec![],
            vec![],
            BarrierParams {
                dhat: 1e-3,
                kappa: 1.0,
            },
        )
        .unwrap();
        let mut pinned = vec![false; nv];
        pinned[0] = true;
        let mut system = GlobalSystem::new(&model, GlobalOptions::default()).unwrap();
        system.prepare(&model, &pinned, 1e4).unwrap();
        let x_prev = vec![0.0; 3 * nv];
        let input = ContactInput {
            model: &model,
            pinned: &pinned,
            mass_weight: 1e4,
            x_prev: &x_prev,
            h: 0.01,
        };
        let rows = Rows::build(&system, &input);
        let y: Vec<f64> = (0..3 * nv)
            .map(|k| ((k * 7919) % 13) as f64 * 0.01)
            .collect();
        let mut ay = vec![0.0; 3 * nv];
        // Pinned entries of y do not enter A's free rows.
        let mut yf = y.clone();
        yf[..3].iter_mut().for_each(|v| *v = 0.0);
        system.apply(&model, &yf, &mut ay).unwrap();
        let zero = vec![0.0; 3 * nv];
        let mut worst: f64 = 0.0;
        for v in 1..nv {
            let mine = vertex(&yf, v) * rows.diag[v] - rows.off_residual(v, &zero, &yf);
            worst = worst.max((mine - vertex(&ay, v)).amax() / vertex(&ay, v).amax().max(1.0));
        }
        assert!(worst < 1e-12, "{worst:e}");
    }
}
