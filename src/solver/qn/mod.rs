//! Quasi-Newton L-BFGS-PD (Liu, Bouaziz, Kavan 2017): `--solver qn`.
//!
//! Minimises the step's incremental potential ([`crate::problem::StepProblem`]: backward Euler,
//! elasticity, obstacle barriers) from the same initial guess as every solver
//! (`problem.x_start`) by L-BFGS whose initial inverse Hessian is A⁻¹, the constant
//! projective-dynamics matrix A = M/h² + Σ w_e D_eᵀD_e ([`crate::solver::pd`]) factored once per
//! time step size and pin set:
//!
//! ```text
//! per step:   x ← x_start; history ← ∅; g ← ∇E(x)
//! per iteration:
//!   q ← −g; for i newest..oldest: ζ_i ← s_iᵀq/ρ_i; q ← q − ζ_i t_i        (first loop)
//!   d ← A⁻¹q                                                              (prefactored, f64)
//!   for i oldest..newest: η ← t_iᵀd/ρ_i; d ← d + (ζ_i − η) s_i             (second loop)
//!   α ← min(α₀, filter bound); reduce until E(x + αd) ≤ E(x) + γ α ∇Eᵀd   (Armijo, γ = 0.3)
//!   s ← αd; t ← ∇E(x + αd) − ∇E(x); keep (s, t) if sᵀt > 0 (to round-off); x ← x + αd
//! ```
//!
//! With m = 0 the direction is −A⁻¹∇E: for PD energies (ARAP, corotated with λ = 0) one
//! iteration from x is exactly the PD local/global step x* = A⁻¹(Σ w_e D_eᵀ p_e + M x̃/h²)
//! (`tests/cpu/qn.rs` checks it to 1e-10). Obstacles enter E and ∇E only, never A (the paper's
//! rule): their barrier makes a direction's energy rise near contact, the line search backs
//! off, and the step filter ([`crate::problem::StepProblem::step_limit`] on the CPU; the
//! vertex time-of-impact filter on a device) keeps every vertex — and every surface triangle,
//! on the CPU — outside every obstacle.
//!
//! # One loop, two backends
//! [`QnSolver`] is generic over [`crate::solver::backend::PotentialBackend`]:
//! `QnSolver<CpuBackend>` is the f64 reference (every scene), `QnSolver<DeviceBackend>` runs
//! the same loop in f32 WGSL kernels on a GPU or on their CPU twins (dynamic steps,
//! half-space obstacles). Per iteration on a device: the second loop, the step bound, the
//! trial with its energy change, the speculative gradient at the trial, the new curvature pair
//! and the next first loop are recorded into one plan; one read returns the Armijo decision's
//! scalars (and the stop rule's); the host solve then reads q (12·n bytes), solves in f64 and
//! writes r (12·n bytes) — the only vectors that cross the bus. A rejected trial re-records
//! from the trial; a rejected pair re-records the first loop. `benches/solvers.rs` measures
//! each phase's share.
//!
//! # Choices the paper leaves open (and their measured effect, `benches/solvers.rs`, 2 cores)
//! - **Default stopping mode.** jello's shared stop rule (`cn`, ε = 1e-5, or `dx`) with a cap
//!   of 1000 iterations — every comparison with Newton uses it and `converged` means what it
//!   means for every solver. The paper's fixed count is `[solver] mode = "fixed"`,
//!   `iterations = 10` (default 10); its steps report `converged` by the stop rule at the end.
//! - **Line-search cap.** The paper gives none. Backtracking stops after 30 reductions
//!   (α ≥ 2⁻³⁰ of the first trial, ~1e-9): below that no direction of a converging step is useful.
//!   Then the history is dropped and the direction tried again; if that fails and a contact
//!   correction was in it, once more without it: the plain PD direction −A⁻¹∇E, always a
//!   descent direction (A is SPD; the Woodbury correction is SPD only up to round-off, and a
//!   barrier curvature of ~1e12 N/m — a vertex within 1e-9 m of an obstacle — cancels it
//!   away). If that fails too the step ends, reported as not converged unless the start
//!   already met the rule (as Newton). On the bundled scenes α = 1 is taken in
//!   nearly every iteration (one trial each) away from contact.
//! - **Trials (`QnParams::trials`, [`TrialRule`]).** The paper starts every line search at
//!   α = 1 and halves. Each trial is a full element pass (E and ∇E fused), so a rejected
//!   α = 1 costs as much as an iteration, and it is rejected predictably: a step's first
//!   direction is H₀'s alone (the history is reset per step), and A⁻¹ = (M/h² + Σ w D ᵀD)⁻¹
//!   lacks the volumetric stiffness of λ and the stretch beyond the weights' interval, so it
//!   overshoots (on the bundled twist and TSS from Newton's states, α = 1 failed and 0.5
//!   passed on every step's first iteration; in the hard TSS regime about every other
//!   iteration failed its α = 1). The default ([`TrialRule::Carry`]) keeps what the loop
//!   already reads: the accepted pair's sᵀt gives the secant curvature along the direction
//!   and its minimiser α*; when α* says α = 1 fails Armijo on a quadratic
//!   (α* < 1/(2(1 − γ)) = 0.71), the next direction starts at α*; a rejection moves α to
//!   the minimiser of the parabola through E, ∇Eᵀd and the rejected energy, within
//!   [0.1, 0.5] of it. No new vector work (a device reads the
//!   filter's bound once when a carried start fires); the stop rule and the Armijo test are
//!   unchanged, so a step converges to the same solution within the stop rule's slack.
//!   Carrying the first iteration's α* into the next step's first trial would also save the
//!   rejected α = 1 at each step's start (bundled twist from Newton's states: 3.00 → 2.25
//!   element passes per step), but a step would then depend on the solver's past and a
//!   resumed run (the checkpoint holds the state only) would no longer equal the straight
//!   one bit for bit; not done. `benches/qn_line_search.rs` compares the rules.
//! - **Curvature guard.** A pair is skipped when sᵀt ≤ ε‖s‖‖t‖ (ε = 1e-10 in f64, 1e-5 on a
//!   device): the paper skips sᵀt ≤ 0; the margin is the dot products' round-off.
//! - **History.** m = 5 by default (the paper's). Table I bar, relative error after 10
//!   iterations at E = 1e5 Pa: m = 0 8.4e-2, m = 2 1.1e-2, m = 5 1.1e-2, m = 10 1.1e-2; at
//!   1e4 Pa 5.9e-2, 6.8e-4, 6.6e-4, 6.6e-4 — the history is what makes the method, beyond
//!   m = 2 it barely matters (the paper: m = 5 best, m = 100 slightly worse). Reset per step
//!   (the paper implies it): pairs from the last step describe a different objective.
//! - **Contact.** The paper keeps collisions out of A and lets the line search absorb them.
//!   Against the IPC barrier and its time-of-impact filter that stalls: every direction drives
//!   the vertices in contact into the obstacle and the filter cuts α to 1e-3…1e-7. The
//!   barrier's curvature enters the *initial inverse Hessian* instead, by a low-rank update
//!   around the fixed factor ([`crate::solver::pd::contact`]; A is never changed or
//!   refactored; `QnParams::contact_correction`). The history is dropped whenever the set of
//!   vertices with contact terms changes: pairs measured under the old set mix the barrier's
//!   curvature into directions the new H₀ treats differently. Kept, they made the impact
//!   steps of `drop.toml` depend on round-off — under other rayon thread counts a step's
//!   L-BFGS direction drove a vertex 90% closer to the ground per iteration (the filter's
//!   bound), its residual ×10 per iteration, until the line search gave up (1 run in ~10 at
//!   8 threads); from the saved state of such a step: m = 5 failed in 3 of 5 runs, m = 0
//!   converged in 39 iterations every time, m = 5 with the reset in 77 every time; the impact steps 13–16 take 184 iterations
//!   (239–333 without the reset, by thread count). `drop.toml`, first 20 steps, measured
//!   before the reset: 327 iterations, all converged, against 2,018 with two steps at the
//!   1000-iteration cap (and the ball then stuck at residual 0.4 for the rest of the run)
//!   under the paper's rule.
//! - **Static increments** use A = L + M/h² with the increment's pseudo-time h: the objective
//!   has no inertia, but A must stay definite for a body that no pin holds (one resting on an
//!   obstacle); A is only a preconditioner, the line search sees the true objective.
//! - **Inversion.** No explicit handling in the paper; here the shared step filter (inversion
//!   trust region, strict under `inversion = "forbid"`'s retry), as every jello solver.
//! - **k interval.** The paper's [0.5, 1.5] (its Fig. 15 shows the choice barely matters).
//! - **Ordering** of A: METIS nested dissection (see [`crate::solver::pd::global`]).
//!
//! # Measured (`cargo bench --bench solvers`, 2 cores, f64 CPU)
//! - Table I, twisting Neo-Hookean bar (3,321 vertices, 15,360 tets, h = 1/30 s, ν = 0.4, caps
//!   at ±π rad/s; 6 frames): relative error (QN Eq. 12) after 10 iterations 1.1e-2 against one
//!   Newton iteration's 2.7e-3 at E = 1e5 Pa, 6.6e-4 against 1.2e-3 at E = 1e4 Pa; 129–133 ms
//!   per frame against Newton's 102–103 ms (1.27–1.29×). The paper has QN below Newton's
//!   error at ~1/15 of its time: its bars' parameters are not given, and the softer the bar
//!   (the more M/h² dominates A) the better QN does here. A QN iteration costs 13.9 ms, 89% of
//!   it the f64 element gradient (an SVD per element); Newton's ~100 ms.
//! - To ε = 1e-5: armadillo_18k kicked (h = 10 ms) 25.6 iterations per step against Newton's
//!   5.8 and JGS2's 19.6, at 553 ms per step against 549 and 2,150; the 15,616-vertex twist bar
//!   (h = 25 ms) 2.4 iterations against 1.0, 434 ms per step against Newton's 1,143.
mod initial;
mod params;

pub use crate::solver::lbfgs::{TrialRule, MAX_HISTORY};
pub use initial::PdInverse;
pub use params::{QnMode, QnParams, PAPER_ITERATIONS};

use crate::error::{JelloError, Result};
use crate::problem::Model;
use crate::solver::backend::PotentialBackend;
use crate::solver::lbfgs::LbfgsSolver;
use crate::solver::pd::GlobalSystem;

/// What one QN iteration did.
pub type QnIteration = crate::solver::lbfgs::LbfgsIteration;
/// QN's per-phase times.
pub type QnPhases = crate::solver::lbfgs::LbfgsPhases;
/// Quasi-Newton L-BFGS-PD on a backend: the shared L-BFGS loop with the PD initial inverse.
pub type QnSolver<B> = LbfgsSolver<B, PdInverse>;

impl<B: PotentialBackend> LbfgsSolver<B, PdInverse> {
    /// A QN solver for `model` on `backend`: the global matrix's weights now, its factor at
    /// the first step.
    pub fn new(model: &Model, backend: B, params: QnParams) -> Result<Self> {
        let h0 = PdInverse::new(model, params)?;
        LbfgsSolver::with_initial(backend, h0, params.lbfgs(), model.largest_extent()).map_err(
            |e| match e {
                JelloError::Invalid(m) => JelloError::Invalid(format!("qn: {m}")),
                e => e,
            },
        )
    }

    /// The parameters.
    pub fn params(&self) -> &QnParams {
        self.initial().params()
    }

    /// The global matrix (factorisation counts, fill).
    pub fn system(&self) -> &GlobalSystem {
        self.initial().system()
    }
}
